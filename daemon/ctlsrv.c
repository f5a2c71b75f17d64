/* ctlsrv.c - the control socket: a Unix stream socket, mode 0660, whose
 * peers are checked with SO_PEERCRED. Protocol: lib/ctl.h.
 *
 * Who may do what: root and members of control.admin_group everything;
 * members of control.group only the read-only commands (status, stats,
 * get, volume-list). Every mutating command is logged with the caller's
 * uid and pid, refused or not. volume-add takes only a block device under
 * /dev matching control.allowed_disks; callers other than root learn only
 * that the disk is not one they may add, never why (whether a path exists,
 * what it is).
 *
 * Bounds (a root daemon serving any member of a group): at most MAX_CONNS
 * connections, the last ADMIN_SLOTS of them kept for root and
 * control.admin_group (readers cannot lock the admins out) and the last
 * ROOT_SLOTS for root, and at most UID_SLOTS of one user that is only a
 * member of control.group (one cannot lock the other readers out); a full
 * server answers a busy error before closing. Per connection one request line of
 * PMC_CTL_MAX_LINE, unsent output past OUT_SOFT stops the reading of its
 * requests, past OUT_HARD drops the client; a connection with no traffic
 * for control.idle_timeout seconds (and no operation running) is closed.
 * Each callback handles at most LINES_PER_RUN requests, so one flooding
 * client cannot hold the loop, and root's watchers run first among those
 * ready at once.
 *
 * Long operations (volume-add, volume-remove, flush) run on one worker
 * thread, one at a time, so the loop keeps serving other clients and the
 * systemd watchdog; their connection waits for the final reply, getting a
 * progress line at least every PROGRESS_S while write-back runs. The
 * worker changes the volume table under d->lock; the loop reads it under
 * d->lock too.
 *
 * Connection lifetime: a connection is never freed under a caller still
 * using it. Every event callback holds its connection (conn_hold) for its
 * whole run; conn_close only shuts it (watchers stopped, fd closed, marked
 * dead) and the last conn_release frees it. Code that may write (and so
 * close) checks c->dead before touching the connection again. A running
 * operation's job points at its connection; closing the connection
 * detaches it (the operation still completes, and is logged).
 *
 * The loop runs on the main thread; the worker only runs the job it is
 * handed and signals its end with an ev_async.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "ctlsrv.h"
#include "diskid.h"
#include "log.h"
#include "pmcached.h"
#include "ring.h"
#include "stats.h"

#define MAX_CONNS 64
#define ROOT_SLOTS 1		      /* of MAX_CONNS, kept for root */
#define ADMIN_SLOTS 8		      /* ... kept for root and control.admin_group */
#define UID_SLOTS 16		      /* ... that one control.group member may hold */
#define OUT_SOFT (256u << 10)	      /* bytes unsent: stop reading requests */
#define OUT_HARD (OUT_SOFT + PMC_CTL_MAX_REPLY) /* bytes unsent: drop the client */
#define LINES_PER_RUN 64	      /* requests handled per callback */
#define PROGRESS_S 1.0		      /* a progress line at least this often */

struct conn;

/* an operation on the worker thread */
struct job {
	struct pmc_ctl_req req;
	struct conn *c;		/* NULL once the client is gone */
	uid_t uid;
	pid_t pid;
	int flushing;		/* write-back runs for it: progress lines */
	uint64_t last_left;
	double last_sent;	/* ev_now of the last progress line */
	int rc;			/* worker's result, valid once done */
	struct pmc_err err;
	json_object *payload;	/* success reply members, made on the loop */
};

struct conn {
	struct ctlsrv *srv;
	int fd;
	uid_t uid;
	pid_t pid;
	int admin;		/* root or control.admin_group: may change things */
	ev_io rw, ww;
	ev_timer idle;		/* control.idle_timeout */
	ev_timer kick;		/* handle requests left in "in" */
	double active;		/* ev_now of the last byte in or out */
	char in[PMC_CTL_MAX_LINE + 1];
	size_t in_len;
	char *out;
	size_t out_len, out_cap;
	int closing;		/* close once out is written */
	int dead;		/* closed: freed when holds drops to 0 */
	unsigned holds;		/* event callbacks running on it */
	struct job *job;	/* its operation, running */
	struct conn *next;
};

struct ctlsrv {
	struct pmcd *d;
	int fd;
	ev_io aw;
	ev_timer accept_pause;	/* out of fds: accept again later */
	gid_t gid, admin_gid;
	int has_gid, has_admin_gid;
	unsigned nconns;
	struct conn *conns;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	/* the worker */
	pthread_t worker;
	int worker_started;
	pthread_mutex_t lock;	/* job handover, stop */
	pthread_cond_t cond;
	struct job *todo;	/* handed to the worker */
	struct job *running;	/* owned by the loop; the worker runs it */
	int done;		/* the worker finished running */
	int stop;
	int exited;		/* the worker returned (lock) */
	ev_async job_done;
	ev_timer job_tick;
	/* lines any client can cause, again and again: a flood of them would
	 * push everything else out of the journal (its per-unit limit) */
	struct pmc_ratelimit rl_refused, rl_client;
};

static void conn_update(struct conn *c);
static void conn_kick(struct conn *c);

/* --- connections --- */

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
	ev_timer_stop(loop, &c->idle);
	ev_timer_stop(loop, &c->kick);
	close(c->fd);
	c->fd = -1;
	/* the operation goes on without its client, but a flush: it may
	 * never end while the devices are written, and holds off every other
	 * operation meanwhile (pmcachectl flush, interrupted, cancels it) */
	if (c->job && c->job->req.cmd == PMC_CTL_FLUSH && s->d->e)
		pmc_engine_flush_cancel(s->d->e);
	if (c->job)
		c->job->c = NULL;
	c->job = NULL;
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
	size_t done = 0;

	if (c->dead)
		return;
	while (done < c->out_len) {
		ssize_t n = write(c->fd, c->out + done, c->out_len - done);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			conn_close(c);
			return;
		}
		done += (size_t)n;
	}
	if (done) {
		memmove(c->out, c->out + done, c->out_len - done);
		c->out_len -= done;
		c->active = ev_now(c->srv->d->loop);
	}
	if (!c->out_len && c->closing) {
		conn_close(c);
		return;
	}
	conn_update(c);
}

/* queue a reply line (takes ownership of line); may close c */
static void conn_send(struct conn *c, char *line)
{
	size_t n;

	if (c->dead) {
		free(line);
		return;
	}
	if (!line) {
		pmc_log(LOG_ERR, "control: uid %u pid %d: out of memory for a reply; closing",
			c->uid, c->pid);
		c->closing = 1;
		conn_flush_out(c);
		return;
	}
	n = strlen(line);
	if (c->out_len + n > OUT_HARD) {
		pmc_log_ratelimited(&c->srv->rl_client, LOG_WARNING,
				    "control: uid %u pid %d: %zu bytes of replies unread; dropping the "
				    "client",
				    c->uid, c->pid, c->out_len);
		free(line);
		conn_close(c);
		return;
	}
	if (c->out_len + n > c->out_cap) {
		size_t cap = (c->out_len + n) * 2;
		char *p = realloc(c->out, cap);

		if (!p) {
			free(line);
			conn_close(c);
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

/* the served volume r names, or NULL after an ENOENT reply; d->lock held */
static struct pmcd_volume *served(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd_volume *v = pmcd_volume_find(c->srv->d, r->volume);
	char msg[128];

	if (!v) {
		snprintf(msg, sizeof(msg), "volume %s: not served", r->volume);
		send_err(c, id_of(r), ENOENT, msg);
	}
	return v;
}

/* --- read-only commands (d->lock held) --- */

/* dirty and clean blocks of every volume slot and their totals, one
 * snapshot (pmc_cache_counts_snapshot): the volumes of one reply add up */
struct counts {
	int valid;		/* 0: partial, the recount after a crash is pending */
	uint64_t dirty, clean;	/* totals, blocks */
	uint64_t *vdirty, *vclean; /* [max_volumes]; NULL: not taken */
};

/* snap: one snapshot, which takes every index stripe lock in turn (the
 * I/O threads' too): for root and the admins only, so that a reader in
 * control.group polling status cannot slow every volume's I/O; readers get
 * each volume's own counters, read one by one (a block moving meanwhile
 * may count in two) */
static void counts_take(struct pmcd *d, struct counts *k, int snap)
{
	struct pmc_cache_info ci;

	memset(k, 0, sizeof(*k));
	k->valid = 1;
	if (!d->cache)
		return;
	pmc_cache_get_info(d->cache, &ci);
	k->vdirty = snap ? calloc(ci.max_volumes, sizeof(*k->vdirty)) : NULL;
	k->vclean = snap ? calloc(ci.max_volumes, sizeof(*k->vclean)) : NULL;
	if (!k->vdirty || !k->vclean) {
		/* a reader, or out of memory: each volume's own counters */
		free(k->vdirty);
		free(k->vclean);
		k->vdirty = k->vclean = NULL;
		k->valid = ci.counts_valid;
		k->dirty = ci.nr_dirty;
		k->clean = ci.nr_clean;
		return;
	}
	k->valid = pmc_cache_counts_snapshot(d->cache, k->vdirty, k->vclean, &k->dirty, &k->clean);
}

static void counts_free(struct counts *k)
{
	free(k->vdirty);
	free(k->vclean);
}

static json_object *volume_json(struct pmcd *d, struct pmcd_volume *v, const struct counts *k)
{
	json_object *o = json_object_new_object();
	struct pmc_vol_stats st;
	enum pmc_mode mode;
	int draining = 0;
	char dev[32];

	pmc_engine_get_mode(d->e, v->vol, &mode, &draining);
	pmc_engine_stats(d->e, v->vol, &st);
	snprintf(dev, sizeof(dev), "/dev/ublkb%u", v->dev ? v->dev->info.dev_id : 0);
	json_object_object_add(o, "name", json_object_new_string(v->conf.name));
	if (pmc_config_volume_is_nvmf(&v->conf)) {
		char label[PMC_CONFIG_NQN_MAX + PMC_CONFIG_TRADDR_MAX + 96];
		json_object *p = json_object_new_object();

		pmc_config_nvmf_label(&v->conf.nvmf, label, sizeof(label));
		json_object_object_add(o, "disk", json_object_new_string(label));
		json_object_object_add(
		    p, "transport",
		    json_object_new_string(pmc_config_transport_name(v->conf.nvmf.transport)));
		json_object_object_add(p, "address", json_object_new_string(v->path_addr));
		json_object_object_add(p, "controller", json_object_new_string(v->path_ctrl));
		json_object_object_add(p, "device", json_object_new_string(v->path_dev));
		json_object_object_add(p, "state", json_object_new_string(v->path_state));
		json_object_object_add(p, "reconnects", json_object_new_uint64(v->path_reconnects));
		json_object_object_add(o, "path", p);
	} else {
		json_object_object_add(o, "disk", json_object_new_string(v->conf.disk));
	}
	json_object_object_add(o, "disk_id", json_object_new_string(pmcd_volume_disk_id(d, v)));
	json_object_object_add(o, "device", json_object_new_string(dev));
	json_object_object_add(o, "mode", json_object_new_string(pmc_mode_name(mode)));
	json_object_object_add(o, "draining", json_object_new_boolean(draining));
	json_object_object_add(o, "size_bytes",
			       json_object_new_uint64(pmc_engine_volume_size(d->e, v->vol)));
	json_object_object_add(o, "dirty_blocks",
			       json_object_new_uint64(k->vdirty ? k->vdirty[v->vol] : st.dirty_blocks));
	json_object_object_add(o, "clean_blocks",
			       json_object_new_uint64(k->vclean ? k->vclean[v->vol] : st.clean_blocks));
	json_object_object_add(o, "lost_blocks", json_object_new_uint64(st.lost_blocks));
	/* false while the counts are rebuilt after a crash: the two above are
	 * partial then */
	json_object_object_add(o, "counts_valid", json_object_new_boolean(k->valid));
	json_object_object_add(o, "oldest_dirty_age_ms",
			       json_object_new_uint64(st.oldest_dirty_age_ms));
	json_object_object_add(o, "error", json_object_new_int(st.error));
	json_object_object_add(o, "error_text",
			       json_object_new_string(st.error ? strerror(st.error) : ""));
	json_object_object_add(o, "recovered",
			       json_object_new_boolean(v->dev && v->dev->recovered));
	return o;
}

/* with tot, the snapshot's totals (for status); snap: counts_take */
static json_object *volumes_json(struct pmcd *d, struct counts *tot, int snap)
{
	json_object *vols = json_object_new_array();
	struct counts k;

	counts_take(d, &k, snap);
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		if (d->vols[i].used)
			json_object_array_add(vols, volume_json(d, &d->vols[i], &k));
	counts_free(&k);
	if (tot) {
		*tot = k;
		tot->vdirty = tot->vclean = NULL;
	}
	return vols;
}

static void do_status(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	json_object *o = json_object_new_object();
	struct counts tot;
	/* the volumes and the totals from one snapshot: they add up */
	json_object *vols = volumes_json(d, &tot, c->admin);

	json_object_object_add(o, "version", json_object_new_string(PMC_VERSION));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "uptime_s",
			       json_object_new_uint64((pmc_mono_ns() - d->start_ns) / 1000000000ull));
	json_object_object_add(o, "pmem", json_object_new_string(d->conf.pmem_path));
	if (d->cache) {
		struct pmc_cache_info ci;
		char uuid[40];

		pmc_cache_get_info(d->cache, &ci);
		for (int i = 0; i < 16; i++)
			snprintf(uuid + 2 * i, 3, "%02x", ci.uuid[i]);
		json_object_object_add(o, "uuid", json_object_new_string(uuid));
		json_object_object_add(o, "block_size", json_object_new_uint64(ci.block_size));
		json_object_object_add(o, "nr_blocks", json_object_new_uint64(ci.nr_blocks));
		json_object_object_add(o, "dirty_blocks", json_object_new_uint64(tot.dirty));
		json_object_object_add(o, "clean_blocks", json_object_new_uint64(tot.clean));
		json_object_object_add(o, "counts_valid", json_object_new_boolean(tot.valid));
		json_object_object_add(o, "last_restart",
				       json_object_new_string(ci.was_clean ? "clean" : "crash"));
		json_object_object_add(o, "boot_epoch", json_object_new_uint64(ci.boot_epoch));
		json_object_object_add(o, "store_granularity", json_object_new_string(ci.gran));
	} else {
		json_object_object_add(o, "pmem_unavailable", json_object_new_boolean(1));
	}
	json_object_object_add(o, "volumes", vols);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), o));
}

static void do_stats(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	json_object *o, *vols;
	struct pmc_vol_stats st;
	char *js;

	if (r->volume[0] && !served(c, r))
		return;
	o = json_object_new_object();
	vols = json_object_new_array();
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		struct pmcd_volume *v = &d->vols[i];

		if (!v->used || (r->volume[0] && strcmp(r->volume, v->conf.name)))
			continue;
		pmc_engine_stats(d->e, v->vol, &st);
		js = pmc_stats_render_json(&st, v->conf.name);
		json_object_array_add(vols, js ? json_tokener_parse(js) : NULL);
		free(js);
	}
	pmc_engine_stats(d->e, UINT32_MAX, &st);
	js = pmc_stats_render_json(&st, "total");
	json_object_object_add(o, "total", js ? json_tokener_parse(js) : NULL);
	free(js);
	json_object_object_add(o, "volumes", vols);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), o));
}

static void do_volume_list(struct conn *c, const struct pmc_ctl_req *r)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "volumes", volumes_json(c->srv->d, NULL, c->admin));
	conn_send(c, pmc_ctl_reply_ok(id_of(r), o));
}

/* the volume a set/get names, or an error reply (returns NULL) */
static struct pmcd_volume *req_volume(struct conn *c, const struct pmc_ctl_req *r)
{
	char msg[160];

	if (!r->volume[0]) {
		snprintf(msg, sizeof(msg), "%s: a volume key needs \"volume\"", r->key->key);
		send_err(c, id_of(r), EINVAL, msg);
		return NULL;
	}
	return served(c, r);
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

/* --- set: quick, on the loop (d->lock held) --- */

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
		v->conf.vc = nv.vc; /* the worker reads the name, never this */
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
	pmc_log(LOG_NOTICE, "control: uid %u pid %d: %s%s%s set", c->uid, c->pid,
		r->volume[0] ? r->volume : "", r->volume[0] ? ": " : "", r->key->key);
	conn_send(c, pmc_ctl_reply_ok(id_of(r), NULL));
}

/* --- volume-add: which disks --- */

/* 0 if every pattern fails, 1 if one of the space-separated patterns matches */
static int disk_allowed(const char *patterns, const char *path)
{
	char buf[PMC_CONFIG_PATH_MAX];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", patterns);
	for (char *p = strtok_r(buf, " \t", &save); p; p = strtok_r(NULL, " \t", &save))
		if (fnmatch(p, path, 0) == 0)
			return 1;
	return 0;
}

/* the block device of sysfs path sys (/sys/devices/.../block/X[/Xp1])
 * is, or is a partition of, ublkbN of a volume this daemon serves: its
 * name, else NULL; d->lock held */
static const char *own_ublk(struct pmcd *d, const char *sys)
{
	char comp[32];

	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		const struct pmcd_volume *v = &d->vols[i];
		const char *p;
		size_t n;

		if (!v->used || !v->dev)
			continue;
		n = (size_t)snprintf(comp, sizeof(comp), "/ublkb%u", v->dev->info.dev_id);
		for (p = strstr(sys, comp); p; p = strstr(p + 1, comp))
			if (p[n] == '\0' || p[n] == '/')
				return v->conf.name;
	}
	return NULL;
}

/* the device rdev is one this daemon serves, a partition of one, or a
 * device stacked on one (device-mapper, md: its slaves, depth levels
 * down): why says so, naming the volume (a volume on such a device would
 * send its I/O back into this daemon); d->lock held */
static int on_own(struct pmcd *d, unsigned maj, unsigned min, const char *real, char *why,
		  size_t len, int depth)
{
	char path[128], sys[PATH_MAX], slaves[PATH_MAX + 16];
	const char *vol;
	struct dirent *e;
	DIR *dir;
	int found = 0;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", maj, min);
	if (!realpath(path, sys))
		return 0;
	vol = own_ublk(d, sys);
	if (vol) {
		snprintf(why, len, "%s is on volume %s of this daemon", real, vol);
		return 1;
	}
	if (depth >= 8)
		return 0;
	snprintf(slaves, sizeof(slaves), "%s/slaves", sys);
	dir = opendir(slaves);
	while (dir && !found && (e = readdir(dir))) {
		char dev[PATH_MAX + 300];
		unsigned a, b;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(dev, sizeof(dev), "%s/%s/dev", slaves, e->d_name);
		f = fopen(dev, "r");
		if (f && fscanf(f, "%u:%u", &a, &b) == 2)
			found = on_own(d, a, b, real, why, len, depth + 1);
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return found;
}

static void own_device(struct pmcd *d, dev_t rdev, const char *real, char *why, size_t len)
{
	pthread_mutex_lock(&d->lock);
	on_own(d, major(rdev), minor(rdev), real, why, len, 0);
	pthread_mutex_unlock(&d->lock);
}

/*
 * The disk of a volume-add: opened first (O_PATH: no device is opened for
 * real, a FIFO does not block), then fstat'ed, so the checks are on the
 * object that was found, not on a name that may change after. It must be
 * a block device whose own name (the kernel's, through the descriptor) is
 * under /dev, which only root can change, and matches
 * control.allowed_disks, and not be one of this daemon's own devices;
 * that name replaces the caller's in the request, and pmc_disk_open opens
 * it O_EXCL. 0, or an error reply sent.
 */
static int check_disk(struct conn *c, struct pmc_ctl_req *r)
{
	const char *allowed = c->srv->d->conf.control_allowed_disks;
	char link[64], real[PMC_VOLUME_DISK_MAX + 1], why[PMC_VOLUME_DISK_MAX + 64];
	char msg[2 * PMC_VOLUME_DISK_MAX + 200];
	struct stat st, st2;
	ssize_t n = -1;
	int fd;

	why[0] = '\0';
	fd = open(r->add.disk, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
	} else if (fstat(fd, &st)) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
	} else if (!S_ISBLK(st.st_mode)) {
		snprintf(why, sizeof(why), "not a block device");
	} else {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, real, sizeof(real) - 1);
		if (n > 0)
			real[n] = '\0';
		if (n <= 0 || (size_t)n >= sizeof(real) - 1 || strncmp(real, "/dev/", 5) ||
		    stat(real, &st2) || !S_ISBLK(st2.st_mode) || st2.st_rdev != st.st_rdev)
			snprintf(why, sizeof(why), "not a device node under /dev");
		else if (!disk_allowed(allowed, real))
			snprintf(why, sizeof(why), "%s is not in control.allowed_disks", real);
		else
			own_device(c->srv->d, st.st_rdev, real, why, sizeof(why));
	}
	if (fd >= 0)
		close(fd);
	if (!why[0]) {
		snprintf(r->add.disk, sizeof(r->add.disk), "%s", real);
		return 0;
	}
	/* only root may learn why: the others could probe files they cannot see */
	if (c->uid == 0)
		snprintf(msg, sizeof(msg), "volume %s: disk %s: %s", r->add.name, r->add.disk,
			 why);
	else
		snprintf(msg, sizeof(msg),
			 "volume %s: disk %s: not a block device this daemon may use "
			 "(control.allowed_disks)",
			 r->add.name, r->add.disk);
	send_err(c, id_of(r), EINVAL, msg);
	return -EINVAL;
}

/* --- operations on the worker --- */

static void *worker_main(void *arg)
{
	struct ctlsrv *s = arg;
	struct pmcd *d = s->d;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct job *j;

		while (!s->todo && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->todo)
			break;
		j = s->todo;
		s->todo = NULL;
		pthread_mutex_unlock(&s->lock);
		switch (j->req.cmd) {
		case PMC_CTL_VOLUME_ADD:
			j->rc = pmcd_volume_add(d, &j->req.add,
						(j->req.replace_disk ? PMC_ATTACH_REPLACE_DISK : 0) |
							(j->req.discard_dirty ? PMC_ATTACH_DISCARD_DIRTY : 0),
						&j->err);
			break;
		case PMC_CTL_VOLUME_REMOVE:
			j->rc = pmcd_volume_remove(d, j->req.volume, j->req.force, &j->err);
			break;
		case PMC_CTL_FLUSH: {
			uint32_t vol = UINT32_MAX;
			struct pmcd_volume *v;

			pthread_mutex_lock(&d->lock);
			v = j->req.volume[0] ? pmcd_volume_find(d, j->req.volume) : NULL;
			if (v)
				vol = v->vol;
			pthread_mutex_unlock(&d->lock);
			if (j->req.volume[0] && !v) {
				j->rc = pmc_err_set(&j->err, ENOENT, "volume %s: not served",
						    j->req.volume);
				break;
			}
			while (pmcd_wb_flush(&d->wb, vol) == -EBUSY)
				usleep(10000);
			while (atomic_load(&d->wb.flush_busy))
				usleep(10000);
			pthread_mutex_lock(&d->wb.lock);
			j->rc = d->wb.flush_res;
			if (j->rc)
				j->err = d->wb.flush_err;
			pthread_mutex_unlock(&d->wb.lock);
			/* the cache's volumes not served here (removed with
			 * --force, their disk did not open) keep their dirty
			 * blocks: "every dirty block is on its disk" would be
			 * false */
			if (!j->rc && vol == UINT32_MAX && d->e)
				j->rc = pmc_engine_unattached_dirty(d->e, &j->err);
			break;
		}
		default:
			j->rc = pmc_err_set(&j->err, EINVAL, "request not handled");
			break;
		}
		pthread_mutex_lock(&s->lock);
		s->done = 1;
		ev_async_send(d->loop, &s->job_done);
	}
	s->exited = 1;
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* the running job's final reply, on the loop */
static void on_job_done(struct ev_loop *loop, ev_async *w, int revents)
{
	struct ctlsrv *s = w->data;
	struct pmcd *d = s->d;
	struct job *j;
	struct conn *c;
	const char *what;
	int done;

	pthread_mutex_lock(&s->lock);
	done = s->done;
	s->done = 0;
	pthread_mutex_unlock(&s->lock);
	if (!done || !s->running)
		return;
	j = s->running;
	s->running = NULL;
	ev_timer_stop(loop, &s->job_tick);
	c = j->c;
	what = j->req.cmd == PMC_CTL_VOLUME_ADD ? j->req.add.name : j->req.volume;
	if (j->rc)
		pmc_log(LOG_WARNING, "control: uid %u pid %d: %s%s%s: failed: %s", j->uid, j->pid,
			pmc_ctl_cmd_name(j->req.cmd), what[0] ? " " : "", what, j->err.msg);
	else
		pmc_log(LOG_NOTICE, "control: uid %u pid %d: %s%s%s: done%s", j->uid, j->pid,
			pmc_ctl_cmd_name(j->req.cmd), what[0] ? " " : "", what,
			c ? "" : " (the client left)");
	if (c) {
		conn_hold(c);
		c->job = NULL;
		if (j->rc) {
			send_err(c, &j->req.id, j->rc, j->err.msg);
		} else if (j->req.cmd == PMC_CTL_VOLUME_ADD) {
			json_object *o = json_object_new_object();

			pthread_mutex_lock(&d->lock);
			json_object_object_add(o, "volumes", volumes_json(d, NULL, 1));
			pthread_mutex_unlock(&d->lock);
			conn_send(c, pmc_ctl_reply_ok(&j->req.id, o));
		} else {
			conn_send(c, pmc_ctl_reply_ok(&j->req.id, NULL));
		}
		conn_kick(c);
		conn_release(c);
	}
	free(j);
}

/* progress of the running job's write-back, to its client */
static void on_job_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ctlsrv *s = w->data;
	struct job *j = s->running;
	struct conn *c = j ? j->c : NULL;
	uint64_t left;

	if (!c || !j->flushing || !atomic_load(&s->d->wb.flush_busy))
		return;
	left = atomic_load(&s->d->wb.flush_left);
	if (left == UINT64_MAX)
		return;
	if (left == j->last_left && ev_now(loop) - j->last_sent < PROGRESS_S)
		return;
	if (c->out_len > OUT_SOFT)
		return; /* not read: progress is only news */
	j->last_left = left;
	j->last_sent = ev_now(loop);
	conn_hold(c);
	conn_send(c, pmc_ctl_reply_progress(&j->req.id, left));
	conn_release(c);
}

/* hand a long operation to the worker; the reply comes from on_job_done */
static void start_job(struct conn *c, const struct pmc_ctl_req *r)
{
	struct ctlsrv *s = c->srv;
	struct job *j;
	char msg[200];

	if (s->running) {
		const struct pmc_ctl_req *o = &s->running->req;

		snprintf(msg, sizeof(msg), "another operation is running: %s %s; try again",
			 pmc_ctl_cmd_name(o->cmd),
			 o->cmd == PMC_CTL_VOLUME_ADD ? o->add.name : o->volume);
		send_err(c, id_of(r), EBUSY, msg);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		send_err(c, id_of(r), ENOMEM, "control: out of memory");
		return;
	}
	j->req = *r;
	j->c = c;
	j->uid = c->uid;
	j->pid = c->pid;
	j->flushing = r->cmd == PMC_CTL_FLUSH || r->cmd == PMC_CTL_VOLUME_REMOVE;
	j->last_left = UINT64_MAX;
	j->last_sent = ev_now(s->d->loop);
	c->job = j;
	s->running = j;
	ev_timer_again(s->d->loop, &s->job_tick);
	pthread_mutex_lock(&s->lock);
	s->todo = j;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* --- requests --- */

static int mutating(enum pmc_ctl_cmd cmd)
{
	return cmd == PMC_CTL_VOLUME_ADD || cmd == PMC_CTL_VOLUME_REMOVE || cmd == PMC_CTL_SET ||
	       cmd == PMC_CTL_FLUSH || cmd == PMC_CTL_SHUTDOWN || cmd == PMC_CTL_VOLUME_RECONNECT ||
	       cmd == PMC_CTL_VOLUME_CLEAR_ERROR;
}

/* is the running operation on this volume? */
static int volume_in_job(struct ctlsrv *s, const char *name)
{
	const struct pmc_ctl_req *o = s->running ? &s->running->req : NULL;

	if (!o || !name[0])
		return 0;
	return !strcmp(o->cmd == PMC_CTL_VOLUME_ADD ? o->add.name : o->volume, name);
}

/* volume-clear-error; d->lock held */
static void do_clear_error(struct conn *c, const struct pmc_ctl_req *r)
{
	struct pmcd *d = c->srv->d;
	struct pmcd_volume *v = served(c, r);
	json_object *o;
	int was, now;

	if (!v)
		return;
	was = pmc_engine_volume_error(d->e, v->vol);
	now = pmc_engine_clear_error(d->e, v->vol);
	if (now)
		pmc_log(LOG_WARNING,
			"volume %s: error %s kept: some of its dirty data was lost to pmem media "
			"errors (reads of it fail until it is written again)",
			v->conf.name, strerror(now));
	else if (was)
		pmc_log(LOG_NOTICE, "volume %s: error %s cleared; write-back tries at once",
			v->conf.name, strerror(was));
	o = json_object_new_object();
	json_object_object_add(o, "was", json_object_new_int(was));
	json_object_object_add(o, "error", json_object_new_int(now));
	json_object_object_add(o, "error_text", json_object_new_string(now ? strerror(now) : ""));
	conn_send(c, pmc_ctl_reply_ok(&r->id, o));
}

static void handle_line(struct conn *c, const char *line, size_t len)
{
	struct ctlsrv *s = c->srv;
	struct pmcd *d = s->d;
	struct pmc_ctl_req r;
	struct pmc_err err = {0};
	char msg[200];
	int rc;

	memset(&r, 0, sizeof(r));
	rc = pmc_ctl_decode(line, len, &r, &err);
	if (rc) {
		send_err(c, &r.id, -rc, err.msg);
		return;
	}
	if (mutating(r.cmd)) {
		const char *what = r.cmd == PMC_CTL_VOLUME_ADD ? r.add.name : r.volume;

		if (!c->admin) {
			pmc_log_ratelimited(&s->rl_refused, LOG_WARNING,
					    "control: uid %u pid %d: %s%s%s%s%s: refused, not an admin",
					    c->uid, c->pid, pmc_ctl_cmd_name(r.cmd), what[0] ? " " : "",
					    what, r.key ? " " : "", r.key ? r.key->key : "");
			snprintf(msg, sizeof(msg), "%s: permission denied: root%s%s only",
				 pmc_ctl_cmd_name(r.cmd),
				 s->has_admin_gid ? " or control.admin_group " : "",
				 s->has_admin_gid ? d->conf.control_admin_group : "");
			send_err(c, &r.id, EPERM, msg);
			return;
		}
		if (r.cmd != PMC_CTL_SET)
			pmc_log(LOG_NOTICE, "control: uid %u pid %d: %s%s%s%s%s%s", c->uid, c->pid,
				pmc_ctl_cmd_name(r.cmd), what[0] ? " " : "", what,
				r.cmd == PMC_CTL_VOLUME_ADD ? " disk " : "",
				r.cmd == PMC_CTL_VOLUME_ADD
				    ? (pmc_config_volume_is_nvmf(&r.add) ? r.add.nvmf.subsysnqn
									   : r.add.disk)
				    : "",
				r.force ? " (force)" : "");
		if (r.cmd != PMC_CTL_VOLUME_ADD && r.cmd != PMC_CTL_SHUTDOWN &&
		    volume_in_job(s, r.volume)) {
			snprintf(msg, sizeof(msg), "volume %s: an operation on it is running",
				 r.volume);
			send_err(c, &r.id, EBUSY, msg);
			return;
		}
	}
	switch (r.cmd) {
	case PMC_CTL_VOLUME_ADD:
		/* an NVMe-oF disk has no path yet: the daemon connects what it names */
		if (pmc_config_volume_is_nvmf(&r.add) || check_disk(c, &r) == 0)
			start_job(c, &r);
		return;
	case PMC_CTL_VOLUME_REMOVE:
	case PMC_CTL_FLUSH:
		start_job(c, &r);
		return;
	case PMC_CTL_SHUTDOWN:
		if (r.remove_devices) {
			/* refused while a device is held: nothing is stopped */
			pthread_mutex_lock(&d->lock);
			rc = pmcd_shutdown_remove(d, &err);
			pthread_mutex_unlock(&d->lock);
			if (rc) {
				send_err(c, &r.id, -rc, err.msg);
				return;
			}
			conn_send(c, pmc_ctl_reply_ok(&r.id, NULL));
			return;
		}
		conn_send(c, pmc_ctl_reply_ok(&r.id, NULL));
		pmcd_shutdown(d);
		return;
	default:
		break;
	}
	pthread_mutex_lock(&d->lock);
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
	case PMC_CTL_SET:
		do_set(c, &r);
		break;
	case PMC_CTL_GET:
		do_get(c, &r);
		break;
	case PMC_CTL_VOLUME_RECONNECT: {
		struct pmcd_volume *v = served(c, &r);

		if (!v) {
			/* answered */
		} else if (!pmc_config_volume_is_nvmf(&v->conf)) {
			snprintf(msg, sizeof(msg), "volume %s: its disk is not an NVMe-oF namespace",
				 r.volume);
			send_err(c, &r.id, EINVAL, msg);
		} else {
			v->path_retry_ns = 0;
			v->path_backoff_ms = 0;
			pmcd_path_kick(d);
			conn_send(c, pmc_ctl_reply_ok(&r.id, NULL));
		}
		break;
	}
	case PMC_CTL_VOLUME_CLEAR_ERROR:
		do_clear_error(c, &r);
		break;
	default:
		send_err(c, &r.id, EINVAL, "request not handled");
		break;
	}
	pthread_mutex_unlock(&d->lock);
}

/* handle the complete request lines in c->in, within the bounds */
static void conn_handle_lines(struct conn *c)
{
	unsigned n = 0;
	char *nl;

	while (!c->dead && !c->closing && !c->job && c->out_len <= OUT_SOFT &&
	       (nl = memchr(c->in, '\n', c->in_len))) {
		size_t len = (size_t)(nl - c->in);

		if (n++ == LINES_PER_RUN) {
			conn_kick(c); /* the others' turn first */
			return;
		}
		handle_line(c, c->in, len);
		if (c->dead)
			return;
		memmove(c->in, nl + 1, c->in_len - len - 1);
		c->in_len -= len + 1;
	}
	if (c->dead || c->closing)
		return;
	if (c->in_len == sizeof(c->in) - 1 && !memchr(c->in, '\n', c->in_len)) {
		char msg[100];

		snprintf(msg, sizeof(msg), "request: longer than the limit of %u bytes",
			 PMC_CTL_MAX_LINE);
		send_err(c, NULL, EMSGSIZE, msg);
		if (c->dead)
			return;
		c->closing = 1;
		conn_flush_out(c);
		return;
	}
	conn_update(c);
}

/* which watchers c needs now */
static void conn_update(struct conn *c)
{
	struct ev_loop *loop = c->srv->d->loop;
	int want_read = !c->dead && !c->closing && !c->job && c->out_len <= OUT_SOFT &&
			c->in_len < sizeof(c->in) - 1;

	if (c->dead)
		return;
	if (want_read)
		ev_io_start(loop, &c->rw);
	else
		ev_io_stop(loop, &c->rw);
	if (c->out_len)
		ev_io_start(loop, &c->ww);
	else
		ev_io_stop(loop, &c->ww);
}

static void conn_kick(struct conn *c)
{
	if (!c->dead && memchr(c->in, '\n', c->in_len))
		ev_timer_start(c->srv->d->loop, &c->kick);
}

static void on_kick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;

	conn_hold(c);
	conn_handle_lines(c);
	conn_release(c);
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	ssize_t n;

	conn_hold(c);
	n = read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
	} else if (n > 0) {
		c->in_len += (size_t)n;
		c->active = ev_now(loop);
		conn_handle_lines(c);
	}
	conn_release(c);
}

static void on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	conn_hold(c);
	conn_flush_out(c);
	if (!c->dead && c->out_len <= OUT_SOFT)
		conn_handle_lines(c);
	conn_release(c);
}

static void on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	double limit = c->srv->d->conf.control_idle_s;
	double left = c->active + limit - ev_now(loop);

	if (c->job || left > 0.01) {
		w->repeat = c->job ? limit : left;
		ev_timer_again(loop, w);
		return;
	}
	pmc_log(LOG_INFO, "control: uid %u pid %d: idle for %.0f s; closing", c->uid, c->pid,
		limit);
	conn_close(c);
}

/* --- accepting --- */

/*
 * The peer's supplementary groups as they were when it connected, read
 * off the socket (SO_PEERGROUPS, Linux 4.13): no look at /proc, whose pid
 * may be another process by now, and no line to cut (a fixed buffer of
 * /proc's "Groups:" line split a long list, and could read half of a
 * number as a group). Into small when they fit, else malloc'ed; their
 * number, 0 when none or unreadable.
 */
static size_t peer_groups(int fd, gid_t *small, size_t nsmall, gid_t **g)
{
	socklen_t len = (socklen_t)(nsmall * sizeof(gid_t));

	*g = small;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, *g, &len) == 0)
		return len / sizeof(gid_t);
	if (errno == ERANGE && (*g = malloc(len)) &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, *g, &len) == 0)
		return len / sizeof(gid_t);
	if (*g != small)
		free(*g);
	*g = small;
	return 0;
}

/* is gid the peer's primary group or one of its n groups g? */
static int peer_in_group(const struct ucred *cr, const gid_t *g, size_t n, gid_t gid)
{
	if (cr->gid == gid)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (g[i] == gid)
			return 1;
	return 0;
}

/* a one-line refusal, then close (the socket is new: the line fits) */
static void refuse(int fd, int code, const char *msg)
{
	char *line = pmc_ctl_reply_error(NULL, code, msg);

	if (line && write(fd, line, strlen(line)) < 0) {
		/* the peer is gone: nothing to tell */
	}
	free(line);
	close(fd);
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ctlsrv *s = w->data;

	ev_io_start(loop, &s->aw);
}

static void accept_one(struct ctlsrv *s, int fd)
{
	struct ev_loop *loop = s->d->loop;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct conn *c;
	gid_t small[64], *groups;
	size_t ngroups;
	int admin, reader;
	char msg[160];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
		close(fd);
		return;
	}
	ngroups = peer_groups(fd, small, sizeof(small) / sizeof(small[0]), &groups);
	admin = cr.uid == 0 ||
		(s->has_admin_gid && peer_in_group(&cr, groups, ngroups, s->admin_gid));
	reader = admin || (s->has_gid && peer_in_group(&cr, groups, ngroups, s->gid));
	if (groups != small)
		free(groups);
	if (!reader) {
		refuse(fd, EACCES, "permission denied: root, control.group or control.admin_group only");
		return;
	}
	if (s->nconns >= MAX_CONNS - (cr.uid == 0 ? 0 : admin ? ROOT_SLOTS : ADMIN_SLOTS)) {
		static struct pmc_ratelimit rl;

		snprintf(msg, sizeof(msg),
			 "daemon busy: %u control connections open (the limit is %u, the last "
			 "%u for control.admin_group and root, the last %u for root); try again",
			 s->nconns, MAX_CONNS, ADMIN_SLOTS, ROOT_SLOTS);
		pmc_log_ratelimited(&rl, LOG_WARNING, "control: uid %u pid %d refused: %s",
				    cr.uid, cr.pid, msg);
		refuse(fd, EBUSY, msg);
		return;
	}
	if (!admin) {
		unsigned mine = 0;

		for (struct conn *o = s->conns; o; o = o->next)
			mine += o->uid == cr.uid;
		if (mine >= UID_SLOTS) {
			static struct pmc_ratelimit rl;

			snprintf(msg, sizeof(msg),
				 "daemon busy: uid %u has %u control connections open (the limit "
				 "for a control.group member); try again",
				 cr.uid, mine);
			pmc_log_ratelimited(&rl, LOG_WARNING, "control: uid %u pid %d refused: %s",
					    cr.uid, cr.pid, msg);
			refuse(fd, EBUSY, msg);
			return;
		}
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		refuse(fd, ENOMEM, "daemon out of memory");
		return;
	}
	c->srv = s;
	c->fd = fd;
	c->uid = cr.uid;
	c->pid = cr.pid;
	c->admin = admin;
	c->active = ev_now(loop);
	ev_io_init(&c->rw, on_read, fd, EV_READ);
	ev_io_init(&c->ww, on_write, fd, EV_WRITE);
	ev_timer_init(&c->idle, on_idle, s->d->conf.control_idle_s, 0);
	ev_timer_init(&c->kick, on_kick, 0, 0);
	c->rw.data = c->ww.data = c->idle.data = c->kick.data = c;
	if (cr.uid == 0) {
		/* root's requests first among those ready at once */
		ev_set_priority(&c->rw, EV_MAXPRI);
		ev_set_priority(&c->ww, EV_MAXPRI);
		ev_set_priority(&c->kick, EV_MAXPRI);
	}
	c->next = s->conns;
	s->conns = c;
	s->nconns++;
	ev_io_start(loop, &c->rw);
	ev_timer_start(loop, &c->idle);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctlsrv *s = w->data;

	for (int i = 0; i < 16; i++) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			accept_one(s, fd);
			continue;
		}
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			static struct pmc_ratelimit rl;

			/* level-triggered: without a pause this would spin */
			pmc_log_ratelimited(&rl, LOG_ERR, "control socket: accept: %s",
					    strerror(errno));
			ev_io_stop(loop, &s->aw);
			ev_timer_start(loop, &s->accept_pause);
		}
		return;
	}
}

static int group_gid(const char *key, const char *name, gid_t *gid, int *has, struct pmc_err *err)
{
	struct group *g;

	if (!name[0])
		return 0;
	g = getgrnam(name);
	if (!g)
		return pmc_err_set(err, ENOENT, "%s: no group named %s", key, name);
	*gid = g->gr_gid;
	*has = 1;
	return 0;
}

int pmcd_ctlsrv_check_groups(const struct pmc_config *c, struct pmc_err *err)
{
	gid_t gid;
	int has, rc = group_gid("control.group", c->control_group, &gid, &has, err);

	return rc ? rc
		  : group_gid("control.admin_group", c->control_admin_group, &gid, &has, err);
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
	mode_t mask;
	int rc;

	if (!s)
		return pmc_err_set(err, ENOMEM, "control socket: out of memory");
	s->d = d;
	s->fd = -1;
	snprintf(s->path, sizeof(s->path), "%s", path);
	rc = group_gid("control.group", d->conf.control_group, &s->gid, &s->has_gid, err);
	if (!rc)
		rc = group_gid("control.admin_group", d->conf.control_admin_group, &s->admin_gid,
			       &s->has_admin_gid, err);
	if (rc) {
		free(s);
		return rc;
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
	/* the mode from the umask at bind, the group on the node itself: no
	 * change by path that a symlink put there meanwhile could redirect */
	mask = umask(0117);
	rc = s->fd < 0 ? -1 : bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(mask);
	if (rc || ((s->has_gid || s->has_admin_gid) &&
		   fchownat(AT_FDCWD, path, 0, s->has_gid ? s->gid : s->admin_gid,
			    AT_SYMLINK_NOFOLLOW)) ||
	    listen(s->fd, 64)) {
		int e = errno;

		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return pmc_err_set(err, e, "control socket %s: %s", path, strerror(e));
	}
	if (s->has_gid && s->has_admin_gid && s->gid != s->admin_gid)
		pmc_log(LOG_WARNING,
			"control socket %s: group %s; control.admin_group %s reaches it only "
			"through its members' membership of %s",
			path, d->conf.control_group, d->conf.control_admin_group,
			d->conf.control_group);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	ev_async_init(&s->job_done, on_job_done);
	s->job_done.data = s;
	ev_async_start(d->loop, &s->job_done);
	ev_init(&s->job_tick, on_job_tick);
	s->job_tick.repeat = 0.2;
	s->job_tick.data = s;
	rc = pthread_create(&s->worker, NULL, worker_main, s);
	if (rc) {
		ev_async_stop(d->loop, &s->job_done);
		close(s->fd);
		unlink(path);
		free(s);
		return pmc_err_set(err, rc, "control: worker thread: %s", strerror(rc));
	}
	pthread_setname_np(s->worker, "pmc-control");
	s->worker_started = 1;
	ev_io_init(&s->aw, on_accept, s->fd, EV_READ);
	ev_set_priority(&s->aw, EV_MAXPRI); /* cheap; root's connection waits less */
	s->aw.data = s;
	ev_timer_init(&s->accept_pause, on_accept_pause, 0.1, 0);
	s->accept_pause.data = s;
	ev_io_start(d->loop, &s->aw);
	d->ctlsrv = s;
	return 0;
}

void pmcd_ctlsrv_stop(struct pmcd *d)
{
	struct ctlsrv *s = d->ctlsrv;

	if (!s)
		return;
	ev_io_stop(d->loop, &s->aw);
	ev_timer_stop(d->loop, &s->accept_pause);
	close(s->fd);
	unlink(s->path);
	while (s->conns)
		conn_close(s->conns);
	/* an operation running finishes first (a removal half done is worse) */
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->running)
		pmc_log(LOG_NOTICE, "control: waiting for %s to finish",
			pmc_ctl_cmd_name(s->running->req.cmd));
	/* ... but not a flush (its own, or a removal's): with the devices
	 * still written, nothing dirty may never come, and the stop would
	 * wait until systemd kills it, leaving the cache as after a crash.
	 * Cancelled until the worker is out: one may begin after a cancel */
	for (int out = !s->worker_started; !out;) {
		if (d->e)
			pmc_engine_flush_cancel(d->e);
		pthread_mutex_lock(&s->lock);
		out = s->exited;
		pthread_mutex_unlock(&s->lock);
		if (!out)
			usleep(20000);
	}
	if (s->worker_started)
		pthread_join(s->worker, NULL);
	free(s->running);
	ev_timer_stop(d->loop, &s->job_tick);
	ev_async_stop(d->loop, &s->job_done);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	d->ctlsrv = NULL;
}
