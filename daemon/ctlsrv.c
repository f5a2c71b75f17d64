/* ctlsrv.c - the control socket: a Unix stream socket, mode 0660, whose
 * peers are checked with SO_PEERCRED (root, or a member of the configured
 * group). Each connection sends newline-delimited JSON requests (lib/ctl.h
 * decodes them) and gets one reply line each, or progress lines and then
 * the reply for a flush. A malformed or oversized request gets an error
 * reply; a line longer than PMC_CTL_MAX_LINE closes the connection after
 * the reply. Nothing here blocks the loop except volume removal, which
 * waits for its volume's write-back.
 *
 * Runs on the main thread only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "ctlsrv.h"
#include "log.h"
#include "pmcached.h"
#include "ring.h"
#include "stats.h"

#define MAX_CONNS 64

struct conn {
	struct ctlsrv *srv;
	int fd;
	ev_io rw, ww;
	char in[PMC_CTL_MAX_LINE + 1];
	size_t in_len;
	char *out;
	size_t out_len, out_cap;
	int closing;		/* close once out is written */
	int dead;		/* closed: freed when holds drops to 0 */
	unsigned holds;		/* event callbacks running on it */
	/* a flush in progress */
	int flushing;
	struct pmc_ctl_id flush_id;
	uint64_t last_left;
	ev_timer flush_timer;
	struct conn *next;
};

struct ctlsrv {
	struct pmcd *d;
	int fd;
	ev_io aw;
	gid_t gid;
	int has_gid;
	unsigned nconns;
	struct conn *conns;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/*
 * Connection lifetime: a connection is never freed under a caller that
 * still holds it. Every event callback holds its connection (conn_hold)
 * for its whole run; conn_close only shuts it (watchers stopped, fd
 * closed, marked dead) and conn_release frees it once the last holder
 * lets go. Code that may close a connection (any write) checks c->dead
 * before touching it again.
 */
static void conn_free(struct conn *c)
{
	free(c->out);
	free(c);
}

static void conn_hold(struct conn *c)
{
	c->holds++;
}

static void conn_release(struct conn *c)
{
	if (--c->holds == 0 && c->dead)
		conn_free(c);
}

static void conn_close(struct conn *c)
{
	struct ctlsrv *s = c->srv;
	struct ev_loop *loop = s->d->loop;

	if (c->dead)
		return;
	c->dead = 1;
	ev_io_stop(loop, &c->rw);
	ev_io_stop(loop, &c->ww);
	ev_timer_stop(loop, &c->flush_timer);
	close(c->fd);
	c->fd = -1;
	for (struct conn **pp = &s->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	s->nconns--;
	if (c->holds == 0)
		conn_free(c);
}

/* write what can be written; may close c (check c->dead after) */
static void conn_flush_out(struct conn *c)
{
	if (c->dead)
		return;
	while (c->out_len) {
		ssize_t n = write(c->fd, c->out, c->out_len);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			conn_close(c);
			return;
		}
		memmove(c->out, c->out + n, c->out_len - (size_t)n);
		c->out_len -= (size_t)n;
	}
	if (c->out_len)
		ev_io_start(c->srv->d->loop, &c->ww);
	else {
		ev_io_stop(c->srv->d->loop, &c->ww);
		if (c->closing)
			conn_close(c);
	}
}

/* queue a reply line (takes ownership of line) */
static void conn_send(struct conn *c, char *line)
{
	size_t n;

	if (!line) {
		c->closing = 1;
		conn_flush_out(c);
		return;
	}
	if (c->dead) {
		free(line);
		return;
	}
	n = strlen(line);
	if (c->out_len + n > c->out_cap) {
		size_t cap = (c->out_len + n) * 2;
		char *p = realloc(c->out, cap);

		if (!p) {
			free(line);
			c->closing = 1;
			return;
		}
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, line, n);
	c->out_len += n;
	free(line);
	conn_flush_out(c);
}

static const struct pmc_ctl_id *id_of(const struct pmc_ctl_req *r)
{
	return &r->id;
}

static void send_err(struct conn *c, const struct pmc_ctl_id *id, int code, const char *msg)
{
	conn_send(c, pmc_ctl_reply_error(id, code, msg));
}

static json_object *volume_json(struct pmcd *d, struct pmcd_volume *v)
{
	json_object *o = json_object_new_object();
	struct pmc_vol_stats st;
	enum pmc_mode mode;
	int draining = 0;
	char dev[32];

	pmc_engine_get_mode(d->e, v->vol, &mode, &draining);
	pmc_engine_stats(d->e, v->vol, &st);
	snprintf(dev, sizeof(dev), "/dev/ublkb%u", v->dev ? v->dev->dev_id : 0);
	json_object_object_add(o, "name", json_object_new_string(v->conf.name));
	json_object_object_add(o, "disk", json_object_new_string(v->conf.disk));
	json_object_object_add(o, "device", json_object_new_string(dev));
	json_object_object_add(o, "mode", json_object_new_string(pmc_mode_name(mode)));
	json_object_object_add(o, "draining", json_object_new_boolean(draining));
	json_object_object_add(o, "size_bytes",
			       json_object_new_uint64(pmc_engine_volume_size(d->e, v->vol)));
	json_object_object_add(o, "dirty_blocks", json_object_new_uint64(st.dirty_blocks));
	json_object_object_add(o, "clean_blocks", json_object_new_uint64(st.clean_blocks));
	json_object_object_add(o, "oldest_dirty_age_ms",
			       json_object_new_uint64(st.oldest_dirty_age_ms));
	json_object_object_add(o, "error", json_object_new_int(st.error));
	json_object_object_add(o, "error_text",
			       json_object_new_string(st.error ? strerror(st.error) : ""));
	json_object_object_add(o, "recovered",
			       json_object_new_boolean(v->dev && v->dev->recovered));
	return o;
}

static void do_status(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	json_object *o = json_object_new_object(), *vols = json_object_new_array();

	json_object_object_add(o, "version", json_object_new_string(PMC_VERSION));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "uptime_s",
			       json_object_new_uint64((pmc_mono_ns() - d->start_ns) / 1000000000ull));
	if (d->cache) {
		struct pmc_cache_info ci;
		char uuid[40];

		pmc_cache_get_info(d->cache, &ci);
		for (int i = 0; i < 16; i++)
			snprintf(uuid + 2 * i, 3, "%02x", ci.uuid[i]);
		json_object_object_add(o, "pmem", json_object_new_string(d->conf.pmem_path));
		json_object_object_add(o, "uuid", json_object_new_string(uuid));
		json_object_object_add(o, "block_size", json_object_new_uint64(ci.block_size));
		json_object_object_add(o, "nr_blocks", json_object_new_uint64(ci.nr_blocks));
		json_object_object_add(o, "dirty_blocks", json_object_new_uint64(ci.nr_dirty));
		json_object_object_add(o, "clean_blocks", json_object_new_uint64(ci.nr_clean));
		json_object_object_add(o, "counts_valid", json_object_new_boolean(ci.counts_valid));
		json_object_object_add(o, "last_restart",
				       json_object_new_string(ci.was_clean ? "clean" : "crash"));
		json_object_object_add(o, "boot_epoch", json_object_new_uint64(ci.boot_epoch));
		json_object_object_add(o, "store_granularity", json_object_new_string(ci.gran));
	} else {
		json_object_object_add(o, "pmem", json_object_new_string(d->conf.pmem_path));
		json_object_object_add(o, "pmem_unavailable", json_object_new_boolean(1));
	}
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		if (d->vols[i].used)
			json_object_array_add(vols, volume_json(d, &d->vols[i]));
	json_object_object_add(o, "volumes", vols);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), o));
}

static void do_stats(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	json_object *o = json_object_new_object(), *vols = json_object_new_array();
	struct pmc_vol_stats st;
	char *js;

	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		struct pmcd_volume *v = &d->vols[i];

		if (!v->used || (r->volume[0] && strcmp(r->volume, v->conf.name)))
			continue;
		pmc_engine_stats(d->e, v->vol, &st);
		js = pmc_stats_render_json(&st, v->conf.name);
		json_object_array_add(vols, json_tokener_parse(js));
		free(js);
	}
	if (r->volume[0] && json_object_array_length(vols) == 0) {
		char msg[128];

		json_object_put(o);
		json_object_put(vols);
		snprintf(msg, sizeof(msg), "volume %s: not served", r->volume);
		send_err(c, id_of(r), ENOENT, msg);
		return;
	}
	pmc_engine_stats(d->e, UINT32_MAX, &st);
	js = pmc_stats_render_json(&st, "total");
	json_object_object_add(o, "total", json_tokener_parse(js));
	free(js);
	json_object_object_add(o, "volumes", vols);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), o));
}

static void flush_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	struct pmcd *d = c->srv->d;
	const struct pmc_ctl_id *id = &c->flush_id;
	uint64_t left = atomic_load(&d->wb.flush_left);

	conn_hold(c);
	if (atomic_load(&d->wb.flush_busy)) {
		if (left != c->last_left && left != UINT64_MAX) {
			c->last_left = left;
			conn_send(c, pmc_ctl_reply_progress(id, left));
		}
		conn_release(c);
		return;
	}
	ev_timer_stop(loop, w);
	c->flushing = 0;
	pthread_mutex_lock(&d->wb.lock);
	if (d->wb.flush_res)
		send_err(c, id, -d->wb.flush_res, d->wb.flush_err.msg);
	else
		conn_send(c, pmc_ctl_reply_ok(id, NULL));
	pthread_mutex_unlock(&d->wb.lock);
	conn_release(c);
}

static void do_flush(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	uint32_t vol = UINT32_MAX;
	char msg[160];

	if (r->volume[0]) {
		struct pmcd_volume *v = pmcd_volume_find(d, r->volume);

		if (!v) {
			snprintf(msg, sizeof(msg), "volume %s: not served", r->volume);
			send_err(c, id_of(r), ENOENT, msg);
			return;
		}
		vol = v->vol;
	}
	if (pmcd_wb_flush(&d->wb, vol)) {
		send_err(c, id_of(r), EBUSY, "a flush is already running");
		return;
	}
	c->flushing = 1;
	c->flush_id = r->id;
	c->last_left = UINT64_MAX;
	ev_timer_init(&c->flush_timer, flush_tick, 0.05, 0.2);
	c->flush_timer.data = c;
	ev_timer_start(d->loop, &c->flush_timer);
}

static void do_volume_list(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	json_object *o = json_object_new_object(), *vols = json_object_new_array();

	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		if (d->vols[i].used)
			json_object_array_add(vols, volume_json(d, &d->vols[i]));
	json_object_object_add(o, "volumes", vols);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), o));
}

/* the volume a set/get names, or an error reply (returns NULL) */
static struct pmcd_volume *req_volume(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd_volume *v;
	char msg[160];

	if (!r->volume[0]) {
		snprintf(msg, sizeof(msg), "%s: a volume key needs \"volume\"", r->key->key);
		send_err(c, id_of(r), EINVAL, msg);
		return NULL;
	}
	v = pmcd_volume_find(c->srv->d, r->volume);
	if (!v) {
		snprintf(msg, sizeof(msg), "volume %s: not served", r->volume);
		send_err(c, id_of(r), ENOENT, msg);
	}
	return v;
}

static void do_get(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	struct pmcd_volume *v;

	if (r->key->scope == PMC_CONFIG_SCOPE_TOP) {
		conn_send(c, pmc_ctl_reply_value(id_of(r), NULL, r->key, &d->conf));
		return;
	}
	v = req_volume(c, r);
	if (v)
		conn_send(c, pmc_ctl_reply_value(id_of(r), v->conf.name, r->key, &v->conf));
}

static void do_set(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	struct pmc_err err = {0};
	char msg[200];

	if (!(r->key->flags & PMC_CONFIG_RUNTIME)) {
		snprintf(msg, sizeof(msg),
			 "%s: cannot change at run time; edit the configuration file and restart",
			 r->key->key);
		send_err(c, id_of(r), EPERM, msg);
		return;
	}
	if (r->key->scope == PMC_CONFIG_SCOPE_VOLUME) {
		struct pmcd_volume *v = req_volume(c, r);
		struct pmc_config_volume nv;

		if (!v)
			return;
		nv = v->conf;
		pmc_config_key_store(r->key, &nv, r->value);
		if (pmc_engine_set_volume_conf(d->e, v->vol, &nv.vc, &err)) {
			send_err(c, id_of(r), err.code, err.msg);
			return;
		}
		v->conf = nv;
	} else {
		struct pmc_config nc = d->conf;

		/* checked whole, with the volumes, like a file would be */
		pmc_config_key_store(r->key, &nc, r->value);
		if (nc.wb.max_io_bytes > d->max_io_start) {
			snprintf(msg, sizeof(msg),
				 "writeback.max_io: at most %u bytes at run time (its value at "
				 "start); restart to raise it",
				 d->max_io_start);
			send_err(c, id_of(r), EINVAL, msg);
			return;
		}
		if (pmc_config_check(&nc, &err)) {
			send_err(c, id_of(r), err.code, err.msg);
			return;
		}
		d->conf.wb = nc.wb;
		d->conf.log_level = nc.log_level;
		pmc_engine_set_wb_conf(d->e, &d->conf.wb);
		pmc_log_set_level(d->conf.log_level);
	}
	pmc_log(LOG_NOTICE, "control: %s%s%s set", r->volume[0] ? r->volume : "",
		r->volume[0] ? ": " : "", r->key->key);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), NULL));
}

static void handle_line(struct conn *c, const char *line, size_t len)
{
	struct pmcd *d = c->srv->d;
	struct pmc_ctl_req r;
	struct pmc_err err = {0};
	int rc;

	if (c->flushing) {
		send_err(c, NULL, EBUSY, "a flush is running on this connection; wait for its reply");
		return;
	}
	memset(&r, 0, sizeof(r));
	rc = pmc_ctl_decode(line, len, &r, &err);
	if (rc) {
		send_err(c, &r.id, -rc, err.msg);
		return;
	}
	switch (r.cmd) {
	case PMC_CTL_STATUS:
		do_status(c, &r);
		break;
	case PMC_CTL_STATS:
		do_stats(c, &r);
		break;
	case PMC_CTL_VOLUME_LIST:
		do_volume_list(c, &r);
		break;
	case PMC_CTL_FLUSH:
		do_flush(c, &r);
		break;
	case PMC_CTL_VOLUME_ADD:
		rc = pmcd_volume_add(d, &r.add, &err);
		if (rc)
			send_err(c, &r.id, -rc, err.msg);
		else
			do_volume_list(c, &r);
		break;
	case PMC_CTL_VOLUME_REMOVE:
		rc = pmcd_volume_remove(d, r.volume, r.force, &err);
		if (rc)
			send_err(c, &r.id, -rc, err.msg);
		else
			conn_send(c, pmc_ctl_reply_ok(&r.id, NULL));
		break;
	case PMC_CTL_SET:
		do_set(c, &r);
		break;
	case PMC_CTL_GET:
		do_get(c, &r);
		break;
	case PMC_CTL_SHUTDOWN:
		if (r.remove_devices && (rc = pmcd_shutdown_remove(d, &err))) {
			send_err(c, &r.id, -rc, err.msg);
			break;
		}
		conn_send(c, pmc_ctl_reply_ok(&r.id, NULL));
		if (!r.remove_devices)
			pmcd_shutdown(d);
		break;
	default:
		send_err(c, &r.id, EINVAL, "request not handled");
		break;
	}
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	conn_hold(c);
	while (!c->dead) {
		ssize_t n = read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);
		char *nl;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			conn_close(c);
			break;
		}
		c->in_len += (size_t)n;
		while (!c->dead && (nl = memchr(c->in, '\n', c->in_len))) {
			size_t len = (size_t)(nl - c->in);

			handle_line(c, c->in, len);
			memmove(c->in, nl + 1, c->in_len - len - 1);
			c->in_len -= len + 1;
		}
		if (!c->dead && c->in_len == sizeof(c->in) - 1) {
			send_err(c, NULL, E2BIG, "control request longer than the 64 KiB limit");
			if (!c->dead) {
				c->closing = 1;
				ev_io_stop(loop, &c->rw);
				conn_flush_out(c);
			}
			break;
		}
	}
	conn_release(c);
}

static void on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	conn_hold(c);
	conn_flush_out(c);
	conn_release(c);
}

/* root, or the configured group as primary or supplementary group */
static int peer_allowed(struct ctlsrv *s, int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char path[64], line[512];
	FILE *f;
	int ok = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return 0;
	if (cr.uid == 0)
		return 1;
	if (!s->has_gid)
		return 0;
	if (cr.gid == s->gid)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/status", cr.pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p, *end;

		if (strncmp(line, "Groups:", 7))
			continue;
		for (p = line + 7;; p = end) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (g == s->gid)
				ok = 1;
		}
	}
	fclose(f);
	return ok;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctlsrv *s = w->data;
	int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct conn *c;

	if (fd < 0)
		return;
	if (!peer_allowed(s, fd)) {
		static const char msg[] =
			"{\"ok\":false,\"errno\":13,\"error\":\"permission denied: root or the "
			"control group only\"}\n";

		if (write(fd, msg, sizeof(msg) - 1) < 0) {
			/* the peer is gone: nothing to tell */
		}
		close(fd);
		return;
	}
	if (s->nconns >= MAX_CONNS || !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return;
	}
	c->srv = s;
	c->fd = fd;
	ev_io_init(&c->rw, on_read, fd, EV_READ);
	ev_io_init(&c->ww, on_write, fd, EV_WRITE);
	ev_init(&c->flush_timer, flush_tick);
	c->rw.data = c->ww.data = c->flush_timer.data = c;
	c->next = s->conns;
	s->conns = c;
	s->nconns++;
	ev_io_start(loop, &c->rw);
}

/* does a process accept connections on the socket at path? */
static int socket_alive(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), alive;

	if (fd < 0)
		return 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN;
	close(fd);
	return alive;
}

int pmcd_ctlsrv_start(struct pmcd *d, struct pmc_err *err)
{
	struct ctlsrv *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = d->conf.control_socket;
	char dir[sizeof(sa.sun_path)], *slash;
	struct stat st;

	if (!s)
		return pmc_err_set(err, ENOMEM, "control socket: out of memory");
	s->d = d;
	snprintf(s->path, sizeof(s->path), "%s", path);
	if (d->conf.control_group[0]) {
		struct group *g = getgrnam(d->conf.control_group);

		if (!g) {
			free(s);
			return pmc_err_set(err, ENOENT, "control.group: no group named %s",
					   d->conf.control_group);
		}
		s->gid = g->gr_gid;
		s->has_gid = 1;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		mkdir(dir, 0750);
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			free(s);
			return pmc_err_set(err, EEXIST, "control socket %s: exists and is not a socket",
					   path);
		}
		/* replaced only when nobody answers on it: a live daemon's
		 * socket is never taken over */
		if (socket_alive(path)) {
			free(s);
			return pmc_err_set(err, EADDRINUSE,
					   "control socket %s: another daemon answers on it", path);
		}
		unlink(path);
	}
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(path, 0660) || (s->has_gid && chown(path, 0, s->gid)) || listen(s->fd, 16)) {
		int e = errno;

		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return pmc_err_set(err, e, "control socket %s: %s", path, strerror(e));
	}
	ev_io_init(&s->aw, on_accept, s->fd, EV_READ);
	s->aw.data = s;
	ev_io_start(d->loop, &s->aw);
	d->ctlsrv = s;
	return 0;
}

void pmcd_ctlsrv_stop(struct pmcd *d)
{
	struct ctlsrv *s = d->ctlsrv;

	if (!s)
		return;
	while (s->conns)
		conn_close(s->conns);
	ev_io_stop(d->loop, &s->aw);
	close(s->fd);
	unlink(s->path);
	free(s);
	d->ctlsrv = NULL;
}
