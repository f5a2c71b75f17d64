/* ctlsrv_stress.c - the daemon's control server (daemon/ctlsrv.c, linked
 * as it is) under hostile clients, on the host, under ASan.
 *
 * There is no ublk here, so the server runs in a child process over a real
 * engine on a file-backed pmem with plain files as disks; this file stands
 * in for pmcached.c's volume functions (attach to the engine without a
 * ublk device). Everything ctlsrv.c does - accepting, peer checks,
 * buffering, request handling, replies - is the daemon's own code.
 *
 * The parent connects as root or, through seteuid, as uid 65534 (in or out
 * of control.group), and checks that the child survives and answers.
 * Usage: ctlsrv_stress [SEED [TEST...]] (TEST: early-close never-reading
 * idle flood many privileges add-disk long-op; default all)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache_internal.h"
#include "ctl.h"
#include "ctlgen.h"
#include "ctlsrv.h"
#include "log.h"
#include "pmcached.h"
#include "ring.h"
#include "t.h"

#define NOBODY 65534
#define IDLE_S 3 /* control.idle_timeout of the server */
#define SLACK_S 10 /* what a loaded machine may add before the close is seen */
#define PMEM_BYTES (64ull << 20)
#define DISK_BYTES (16ull << 20)

static char dir[40], sock_path[64];
static pid_t server;
/* the server's count of index snapshots (every stripe lock in turn), in
 * memory it shares with the test */
static atomic_uint *g_snapshots;

static void count_snapshot(void)
{
	atomic_fetch_add(g_snapshots, 1);
}
/* the server's log lines of refused requests (shared with it) */
static atomic_uint *g_refused_lines;
static void log_sink(int prio, const char *line)
{
	if (strstr(line, "refused, not an admin") || strstr(line, "suppressed"))
		atomic_fetch_add(g_refused_lines, 1);
	fprintf(stderr, "<%d>%s\n", prio, line);
}
static gid_t ctl_gid, admin_gid;

/* --- the server (child process) --- */

static struct pmcd srv;

int pmcd_volume_add(struct pmcd *d, const struct pmc_config_volume *vc, unsigned flags,
		    struct pmc_err *err)
{
	struct pmcd_volume *v = NULL;
	struct pmc_disk *disk;
	int rc;

	if (pmcd_volume_find(d, vc->name))
		return pmc_err_set(err, EEXIST, "volume %s: already served", vc->name);
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES && !v; i++)
		if (!d->vols[i].used)
			v = &d->vols[i];
	if (!v)
		return pmc_err_set(err, ENOSPC, "volume %s: no free slot", vc->name);
	rc = pmc_disk_open(vc->disk, 0, &disk, err);
	if (rc)
		return rc;
	rc = pmc_engine_attach(d->e, vc->name, disk, &vc->vc, &v->vol, err);
	if (rc) {
		pmc_disk_close(disk);
		return rc;
	}
	pthread_mutex_lock(&d->lock);
	v->conf = *vc;
	v->dev = NULL;
	v->used = 1;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* no NVMe-oF volume here: the path monitor connects none */
void pmcd_nvmf_release(struct pmcd *d, const char *made, const char *name, const char *why)
{
	(void)d;
	(void)made;
	(void)name;
	(void)why;
}

/* as pmcached's: write-around, flush through the write-back thread, detach */
int pmcd_volume_remove(struct pmcd *d, const char *name, int force, struct pmc_err *err)
{
	struct pmcd_volume *v = pmcd_volume_find(d, name);

	if (!v)
		return pmc_err_set(err, ENOENT, "volume %s: not served", name);
	pmc_engine_set_mode(d->e, v->vol, PMC_MODE_WRITE_AROUND, NULL);
	while (pmcd_wb_flush(&d->wb, v->vol) == -EBUSY)
		usleep(10000);
	while (atomic_load(&d->wb.flush_busy))
		usleep(10000);
	/* a volume with much dirty data takes seconds: this one pretends to */
	usleep(1500000);
	pthread_mutex_lock(&d->lock);
	v->used = 0;
	pthread_mutex_unlock(&d->lock);
	return pmc_engine_detach(d->e, v->vol, 1, err);
}

void pmcd_status(struct pmcd *d, char *buf, size_t len)
{
	snprintf(buf, len, "test");
}

void pmcd_shutdown(struct pmcd *d)
{
	d->stopping = 1;
	ev_break(d->loop, EVBREAK_ALL);
}

/* no ublk devices here: nothing can hold one */
int pmcd_shutdown_remove(struct pmcd *d, struct pmc_err *err)
{
	(void)err;
	d->remove_devices = 1;
	pmcd_shutdown(d);
	return 0;
}

static int server_main(void)
{
	struct pmcd *d = &srv;
	struct pmc_err err = {0};
	struct pmc_config_volume vc;
	char path[96];

	signal(SIGPIPE, SIG_IGN);
	pmc_config_default(&d->conf);
	snprintf(d->conf.pmem_path, sizeof(d->conf.pmem_path), "%s/pmem", dir);
	snprintf(d->conf.control_socket, sizeof(d->conf.control_socket), "%s", sock_path);
	snprintf(d->conf.control_group, sizeof(d->conf.control_group), "nogroup");
	snprintf(d->conf.control_admin_group, sizeof(d->conf.control_admin_group), "users");
	d->conf.control_idle_s = IDLE_S;
	pthread_mutex_init(&d->lock, NULL);
	d->start_ns = pmc_mono_ns();
	d->max_io_start = d->conf.wb.max_io_bytes;
	d->loop = ev_default_loop(0);
	T_OK(pmc_pmem_open(d->conf.pmem_path, PMEM_BYTES, &d->pm, &err));
	T_OK(pmc_cache_format(d->pm, NULL, &err));
	T_OK(pmc_cache_open(d->pm, 0, &d->cache, &err));
	T_OK(pmc_engine_create(d->cache, &d->conf.wb, &d->e, &err));
	T_OK(pmcd_wb_start(&d->wb, d->e, &err));
	/* the configuration's volumes (set checks the whole configuration) */
	d->conf.volumes = calloc(2, sizeof(*d->conf.volumes));
	d->conf.nr_volumes = 2;
	T_TRUE(d->conf.volumes);
	for (int i = 0; i < 2; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/disk%d", dir, i);
		fd = open(path, O_CREAT | O_RDWR, 0600);
		T_TRUE(fd >= 0 && ftruncate(fd, DISK_BYTES) == 0);
		close(fd);
		pmc_config_volume_default(&vc);
		snprintf(vc.name, sizeof(vc.name), "v%d", i);
		snprintf(vc.disk, sizeof(vc.disk), "%s", path);
		T_OK(pmcd_volume_add(d, &vc, 0, &err));
		d->conf.volumes[i] = vc;
	}
	T_OK(pmcd_ctlsrv_start(d, &err));
	ev_run(d->loop, 0);
	pmcd_ctlsrv_stop(d);
	pmcd_wb_stop(&d->wb);
	pmc_engine_destroy(d->e);
	pmc_cache_close(d->cache);
	pmc_pmem_close(d->pm);
	return 0;
}

/* --- the documented reply shapes (lib/ctl.h, "REPLY SHAPES") --- */

#define MAX_SHAPES 32
static struct {
	char name[32];
	char text[2048];
} shapes[MAX_SHAPES];
static unsigned nr_shapes;
static unsigned replies_checked;

static void load_shapes(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int depth = 0;

	if (!f)
		T_FAIL("%s: cannot open", path);
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		if (strncmp(p, " *", 2))
			continue;
		p += 2;
		while (*p == ' ')
			p++;
		p[strcspn(p, "\n")] = '\0';
		if (*p == '@' && depth == 0) {
			char *sp = strchr(p, ' ');

			T_TRUE(sp && nr_shapes < MAX_SHAPES);
			*sp = '\0';
			snprintf(shapes[nr_shapes].name, sizeof(shapes[0].name), "%s", p + 1);
			p = sp + 1;
			nr_shapes++;
		} else if (depth == 0) {
			continue;
		}
		strncat(shapes[nr_shapes - 1].text, p,
			sizeof(shapes[0].text) - strlen(shapes[nr_shapes - 1].text) - 1);
		for (; *p; p++)
			depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
	}
	fclose(f);
	T_TRUE(nr_shapes >= 12);
}

static const char *shape(const char *name)
{
	for (unsigned i = 0; i < nr_shapes; i++)
		if (!strcmp(shapes[i].name, name))
			return shapes[i].text;
	T_FAIL("lib/ctl.h documents no reply shape @%s", name);
}

static int match_alts(const char **p, struct json_object *j, char *why, size_t wlen);

/* one term of a shape at *p against j (NULL: only skip it); advances *p */
static int match_term(const char **p, struct json_object *j, char *why, size_t wlen)
{
	const char *s = *p;
	int ok = 1;

	if (*s == '{') {
		struct json_object *seen = json_object_new_object();
		int is_obj = j && json_object_is_type(j, json_type_object);

		s++;
		while (*s != '}') {
			char key[64];
			size_t n;
			struct json_object *v = NULL;
			int present, opt;
			const char *val;

			T_TRUE(*s == '"');
			n = strcspn(s + 1, "\"");
			snprintf(key, sizeof(key), "%.*s", (int)n, s + 1);
			s += n + 2;
			T_TRUE(*s == ':');
			s++;
			present = is_obj && json_object_object_get_ex(j, key, &v);
			val = s;
			if (!match_alts(&s, present ? v : NULL, why, wlen) && present) {
				if (ok)
					snprintf(why + strlen(why), wlen - strlen(why),
						 " in member \"%s\" (%.*s)", key, (int)(s - val), val);
				ok = 0;
			}
			opt = *s == '?';
			s += opt;
			if (!present && !opt && ok) {
				snprintf(why, wlen, "member \"%s\" missing", key);
				ok = 0;
			}
			json_object_object_add(seen, key, NULL);
			if (*s == ',')
				s++;
		}
		s++;
		if (!is_obj) {
			if (j && ok)
				snprintf(why, wlen, "not an object");
			ok = 0;
		} else {
			json_object_object_foreach(j, key, val)
			{
				(void)val;
				if (ok && !json_object_object_get_ex(seen, key, NULL)) {
					snprintf(why, wlen, "member \"%s\" not documented", key);
					ok = 0;
				}
			}
		}
		json_object_put(seen);
	} else if (*s == '[') {
		const char *elem = ++s;
		int is_arr = j && json_object_is_type(j, json_type_array);

		match_alts(&s, NULL, why, wlen);
		T_TRUE(*s == ']');
		s++;
		ok = is_arr;
		for (size_t i = 0; ok && i < json_object_array_length(j); i++) {
			const char *e = elem;

			ok = match_alts(&e, json_object_array_get_idx(j, i), why, wlen);
		}
		if (!is_arr && j)
			snprintf(why, wlen, "not an array");
	} else if (!strncmp(s, "true", 4) || !strncmp(s, "false", 5)) {
		int t = *s == 't';

		s += t ? 4 : 5;
		ok = j && json_object_is_type(j, json_type_boolean) &&
		     json_object_get_boolean(j) == t;
	} else if (*s >= 'A' && *s <= 'Z' && s[1] >= 'A' && s[1] <= 'Z') {
		char name[32];
		size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
		const char *t;

		snprintf(name, sizeof(name), "%.*s", (int)n, s);
		s += n;
		t = shape(name);
		ok = j && match_term(&t, j, why, wlen);
	} else {
		enum json_type ty = j ? json_object_get_type(j) : json_type_null;

		switch (*s) {
		case 'S':
			ok = j && ty == json_type_string;
			break;
		case 'N':
			ok = j && ty == json_type_int && json_object_get_int64(j) >= 0;
			break;
		case 'I':
			ok = j && ty == json_type_int;
			break;
		case 'B':
			ok = j && ty == json_type_boolean;
			break;
		case 'O':
			ok = j && ty == json_type_object;
			break;
		default:
			T_FAIL("shape: cannot read '%s'", s);
		}
		s++;
	}
	*p = s;
	return ok;
}

static int match_alts(const char **p, struct json_object *j, char *why, size_t wlen)
{
	int ok = match_term(p, j, why, wlen);

	while (**p == '|') {
		(*p)++;
		ok |= match_term(p, j, why, wlen);
	}
	return ok;
}

/* a reply line of the daemon against the shape of its kind: "v" first,
 * then "id", then the shape's members exactly */
static void check_reply(const char *line, size_t len, const char *ok_shape)
{
	struct json_object *o = json_tokener_parse(line), *rest;
	const char *kind, *t;
	char why[256] = "";
	int first = 1;

	(void)len;
	if (!o || !json_object_is_type(o, json_type_object))
		T_FAIL("reply is not a JSON object: %s", line);
	rest = json_object_new_object();
	json_object_object_foreach(o, key, val)
	{
		if (first && strcmp(key, "v"))
			T_FAIL("reply does not begin with \"v\": %s", line);
		if (first) {
			T_TRUE(json_object_is_type(val, json_type_int));
			T_EQ(json_object_get_int(val), PMC_CTL_VERSION);
		} else if (!strcmp(key, "id")) {
			T_TRUE(json_object_is_type(val, json_type_int) ||
			       json_object_is_type(val, json_type_string));
		} else {
			json_object_object_add(rest, key, json_object_get(val));
		}
		first = 0;
	}
	if (json_object_object_get_ex(rest, "progress", NULL))
		kind = "progress";
	else if (json_object_object_get_ex(rest, "ok", NULL) &&
		 !json_object_get_boolean(json_object_object_get(rest, "ok")))
		kind = "error";
	else
		kind = ok_shape;
	t = shape(kind);
	if (!match_term(&t, rest, why, sizeof(why)))
		T_FAIL("reply does not have the shape @%s documented in lib/ctl.h: %s\n  %s\n  "
		       "documented: %s",
		       kind, why, line, shape(kind));
	replies_checked++;
	json_object_put(rest);
	json_object_put(o);
}

/* --- clients (parent) --- */

static void server_alive(const char *after)
{
	int st;
	pid_t p = waitpid(server, &st, WNOHANG);

	if (p == server)
		T_FAIL("after %s: the server died (%s %d)", after,
		       WIFSIGNALED(st) ? "signal" : "exit",
		       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* more supplementary groups for the connections of conn_as() */
static gid_t g_extra[160];
static int g_nextra;

/* connect as uid (0 or NOBODY) with egid, and control.group (and
 * g_extra) as supplementary groups (to pass the socket's mode); -errno on
 * failure */
static int conn_as(uid_t uid, gid_t gid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	gid_t groups[1 + sizeof(g_extra) / sizeof(g_extra[0])];
	int fd, rc = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_TRUE(fd >= 0);
	groups[0] = ctl_gid;
	memcpy(groups + 1, g_extra, (size_t)g_nextra * sizeof(gid_t));
	if (uid) {
		T_TRUE(setgroups((size_t)(1 + g_nextra), groups) == 0);
		T_TRUE(setegid(gid) == 0);
		T_TRUE(seteuid(uid) == 0);
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		rc = -errno;
	if (uid) {
		T_TRUE(seteuid(0) == 0);
		T_TRUE(setegid(0) == 0);
		T_TRUE(setgroups(0, NULL) == 0);
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

static int conn_root(void)
{
	int fd = conn_as(0, 0);

	if (fd < 0)
		T_FAIL("connect as root: %s", strerror(-fd));
	return fd;
}

static int conn_member(void)
{
	int fd = conn_as(NOBODY, ctl_gid);

	if (fd < 0)
		T_FAIL("connect as uid %d gid %u: %s", NOBODY, ctl_gid, strerror(-fd));
	return fd;
}

static void send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		T_TRUE(n > 0);
		buf += n;
		len -= (size_t)n;
	}
}

static void send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s));
}

/* one reply line within ms milliseconds into buf; its length, or -1
 * (timeout), 0 (closed) */
static ssize_t recv_line(int fd, char *buf, size_t cap, int ms)
{
	size_t len = 0;
	uint64_t end = pmc_mono_ns() + (uint64_t)ms * 1000000ull;

	while (len + 1 < cap) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = (int64_t)(end - pmc_mono_ns()) / 1000000;
		ssize_t n;
		char *nl;

		if (left < 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		n = recv(fd, buf + len, cap - 1 - len, MSG_PEEK);
		if (n <= 0)
			return len ? (ssize_t)len : 0;
		nl = memchr(buf + len, '\n', (size_t)n);
		if (nl)
			n = nl - (buf + len) + 1;
		n = recv(fd, buf + len, (size_t)n, 0); /* what was peeked, up to the line's end */
		T_TRUE(n > 0);
		len += (size_t)n;
		if (nl)
			break;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

/* the final reply to a request sent on fd, every line checked against the
 * documented shapes (ok_shape for a success) */
static void reply_on(int fd, const char *what, const char *ok_shape, struct pmc_ctl_reply *r,
		     unsigned *progress)
{
	static char buf[PMC_CTL_MAX_REPLY];
	struct pmc_err err = {0};
	ssize_t n;

	do {
		n = recv_line(fd, buf, sizeof(buf), 10000);
		if (n <= 0)
			T_FAIL("%s: no reply (%zd)", what, n);
		check_reply(buf, (size_t)n, ok_shape);
		T_OK(pmc_ctl_decode_reply(buf, (size_t)n, r, &err));
		T_EQ(r->version, PMC_CTL_VERSION);
		if (r->kind == PMC_CTL_REPLY_PROGRESS) {
			if (progress)
				(*progress)++;
			pmc_ctl_reply_free(r);
		}
	} while (r->kind == PMC_CTL_REPLY_PROGRESS);
}

/* a request on a fresh connection of uid (0 or NOBODY) with egid */
static void request_as(uid_t uid, gid_t gid, const char *req, const char *ok_shape,
		       struct pmc_ctl_reply *r)
{
	int fd = uid ? conn_as(uid, gid) : conn_root();

	T_TRUE(fd >= 0);
	send_all(fd, req, strlen(req));
	reply_on(fd, req, ok_shape, r, NULL);
	close(fd);
}

static void request(const char *req, const char *ok_shape, struct pmc_ctl_reply *r)
{
	request_as(0, 0, req, ok_shape, r);
}

static void expect_ok(uid_t uid, gid_t gid, const char *req, const char *ok_shape)
{
	struct pmc_ctl_reply r;

	request_as(uid, gid, req, ok_shape, &r);
	if (r.kind != PMC_CTL_REPLY_OK)
		T_FAIL("uid %u: %s: %s", uid, req, r.error);
	pmc_ctl_reply_free(&r);
}

/* the request fails with code and a message containing text; the message */
static const char *expect_err(uid_t uid, gid_t gid, const char *req, int code, const char *text)
{
	static struct pmc_ctl_reply r;

	request_as(uid, gid, req, "error", &r);
	if (r.kind != PMC_CTL_REPLY_ERROR || r.errnum != code || !strstr(r.error, text))
		T_FAIL("uid %u: %s: expected errno %d with '%s', got %s %d '%s'", uid, req, code,
		       text, r.kind == PMC_CTL_REPLY_OK ? "ok" : "error", r.errnum, r.error);
	printf("ok: uid %u: %.*s: %s\n", uid, (int)strcspn(req, "\n"), req, r.error);
	return r.error;
}

static void status_ok(const char *after)
{
	server_alive(after);
	expect_ok(0, 0, "{\"cmd\":\"status\"}\n", "status");
}

/* VmRSS of the server, KiB */
static long server_rss_kib(void)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", server);
	f = fopen(path, "r");
	T_TRUE(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	fclose(f);
	return kib;
}

/* Requests pipelined, then the client is gone before the replies: the
 * server's writes fail with EPIPE while it still has lines to handle
 * (pmcachectl interrupted by Ctrl-C). */
static void t_early_close(void)
{
	char buf[8192];
	size_t len = 0;

	while (len + 64 < sizeof(buf))
		len += (size_t)snprintf(buf + len, sizeof(buf) - len,
					"{\"cmd\":\"status\",\"id\":%zu}\n", len);
	for (int i = 0; i < 50; i++) {
		int fd = conn_root();

		send_all(fd, buf, len);
		if (i % 2)
			shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	/* and one that closes while its reply is half written */
	for (int i = 0; i < 20; i++) {
		int fd = conn_root();

		for (int k = 0; k < 20; k++)
			send_all(fd, buf, len);
		usleep(1000);
		close(fd);
	}
	status_ok("early-closing clients");
	printf("ok: early close: 70 clients gone before their replies\n");
}

/* A member pipelines status requests and reads nothing: the server stops
 * reading them once its replies back up (bounded memory), serves the
 * others meanwhile, and drops the client after the idle timeout. */
static void t_never_reading(void)
{
	static const char req[] = "{\"cmd\":\"status\"}\n";
	static char buf[64 * 1024];
	const size_t limit = 12800000; /* what grew the daemon to 430 MB */
	size_t sent = 0, len = 0;
	long rss0 = server_rss_kib(), rss1;
	uint64_t stuck = 0;
	int fd = conn_member();

	while (len + sizeof(req) < sizeof(buf)) {
		memcpy(buf + len, req, sizeof(req) - 1);
		len += sizeof(req) - 1;
	}
	T_TRUE(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	while (sent < limit) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n > 0) {
			sent += (size_t)n;
			stuck = 0;
			continue;
		}
		T_TRUE(n < 0 && errno == EAGAIN);
		if (!stuck)
			stuck = pmc_mono_ns();
		else if (pmc_mono_ns() - stuck > 1500000000ull)
			break;
		usleep(20000);
	}
	if (sent >= limit)
		T_FAIL("the server read %zu bytes of requests from a client that reads no reply",
		       sent);
	/* others are served meanwhile */
	status_ok("a never-reading client");
	rss1 = server_rss_kib();
	printf("ok: never reading: the server stopped reading after %zu bytes of requests "
	       "(RSS %ld -> %ld KiB)\n",
	       sent, rss0, rss1);
	/* idle: the server closes it (drain what it had sent, then EOF).
	 * The bound leaves room for a loaded machine (ctest -j, sanitizers):
	 * the server's idle check runs on its loop, not at an exact time */
	{
		uint64_t until = pmc_mono_ns() + (IDLE_S + SLACK_S) * 1000000000ull;

		for (;;) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);

			if (n == 0 || (n < 0 && errno == ECONNRESET))
				break; /* a reset: it closed with our requests unread */
			if (n < 0 && errno != EAGAIN)
				T_FAIL("never-reading client: %s", strerror(errno));
			if (n < 0 && pmc_mono_ns() > until)
				T_FAIL("never-reading client: not closed %d s after it went idle",
				       IDLE_S + SLACK_S);
			if (n < 0)
				usleep(50000);
		}
	}
	close(fd);
	printf("ok: never reading: closed after the %d s idle timeout\n", IDLE_S);
}

/* An idle connection is closed after control.idle_timeout. */
static void t_idle(void)
{
	static char buf[PMC_CTL_MAX_REPLY];
	int fd = conn_member();
	ssize_t n;

	send_str(fd, "{\"cmd\":\"status\"}\n");
	n = recv_line(fd, buf, sizeof(buf), 5000);
	T_TRUE(n > 0);
	n = recv_line(fd, buf, sizeof(buf), (IDLE_S + SLACK_S) * 1000);
	if (n != 0)
		T_FAIL("an idle connection is still open %d s after its last request (%zd)",
		       IDLE_S + SLACK_S, n);
	close(fd);
	printf("ok: idle connection closed after %d s\n", IDLE_S);
}

static void random_line(char *buf, size_t cap)
{
	static const char *const pieces[] = {
	    "{", "}", "[", "]", "\"cmd\"", ":", ",", "\"status\"", "\"stats\"", "\"get\"",
	    "\"volume-list\"", "\"key\"", "\"log.level\"", "\"volume\"", "\"v0\"", "\"id\"",
	    "12345678901234567890", "-1", "1e999", "null", "true", "\"\\u0000\"", "\"\\ud800\"",
	    "\xff\xfe", "\"set\"", "\"value\"", "\"shutdown\"", "\"flush\"", " ", "\t", "\"x\"",
	};

	pmc_ctlgen_line(buf, cap, pieces, sizeof(pieces) / sizeof(pieces[0]), 200);
}

/* the shape a request's success reply has: its command's */
static const char *ok_shape_of(const char *line)
{
	static const char *const cmds[] = {"status", "stats", "volume-list", "get", "set",
					   "flush", "shutdown"};
	struct pmc_ctl_req r;

	if (pmc_ctl_decode(line, strlen(line), &r, NULL))
		return "error";
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(pmc_ctl_cmd_name(r.cmd), cmds[i]))
			return cmds[i];
	return "error";
}

/* Random and malformed requests from a member: one reply each, of the
 * documented shape; then a line over the limit gets EMSGSIZE and a close. */
static void t_flood(void)
{
	static char big[PMC_CTL_MAX_LINE + 4096];
	char line[1024];
	struct pmc_ctl_reply r;
	unsigned errors = 0, oks = 0;
	int fd = conn_member();

	for (int i = 0; i < 2000; i++) {
		size_t len;

		random_line(line, sizeof(line));
		len = strlen(line);
		send_all(fd, line, len);
		reply_on(fd, line, ok_shape_of(line), &r, NULL);
		if (r.kind == PMC_CTL_REPLY_OK)
			oks++;
		else
			errors++;
		pmc_ctl_reply_free(&r);
	}
	close(fd);
	/* in one go: the replies come back in order, one per line */
	fd = conn_member();
	for (int i = 0; i < 500; i++)
		send_str(fd, "{\"cmd\":\"volume-list\",\"id\":1}\n");
	for (int i = 0; i < 500; i++) {
		reply_on(fd, "pipelined volume-list", "volume-list", &r, NULL);
		if (r.kind != PMC_CTL_REPLY_OK)
			T_FAIL("pipelined volume-list %d: %s", i, r.error);
		pmc_ctl_reply_free(&r);
	}
	close(fd);
	/* a line past the limit */
	fd = conn_member();
	memset(big, 'x', sizeof(big));
	send(fd, big, sizeof(big), MSG_NOSIGNAL);
	reply_on(fd, "a line past the limit", "error", &r, NULL);
	if (r.kind != PMC_CTL_REPLY_ERROR || r.errnum != EMSGSIZE)
		T_FAIL("a line past the limit: errno %d (%s), expected EMSGSIZE %d", r.errnum,
		       r.error, EMSGSIZE);
	T_TRUE(recv_line(fd, line, sizeof(line), 5000) == 0);
	close(fd);
	status_ok("flooding clients");
	printf("ok: flood: 2000 random lines (%u errors, %u ok), 500 pipelined, one oversized "
	       "(EMSGSIZE)\n",
	       errors, oks);
}

/* 200 connections of members of control.group at once (four users, 50
 * each): 56 are served, the others told "busy"; a member of
 * control.admin_group and root still get in while they are held (the last
 * 8 slots are theirs, the last one root's). Then one member alone: 16 of
 * its connections are served, the next told busy, another member is not. */
static void t_many(void)
{
	enum { N = 200 };
	static char buf[PMC_CTL_MAX_REPLY];
	int fds[N], ok = 0, busy = 0, rootfd, admfd;
	struct pmc_ctl_reply r;
	struct pmc_err err = {0};

	usleep(200000); /* the previous tests' connections are closed */
	for (int i = 0; i < N; i++) {
		static const char req[] = "{\"cmd\":\"status\"}\n";
		ssize_t n;

		fds[i] = conn_as(NOBODY - (uid_t)(i % 4), ctl_gid);
		T_TRUE(fds[i] >= 0);
		/* a connection over the limit is told busy and closed as soon
		 * as the server accepts it, which on a loaded machine can come
		 * before this request: EPIPE then, and the busy line is still
		 * there to read */
		n = send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL);
		if (n != (ssize_t)sizeof(req) - 1 && !(n < 0 && (errno == EPIPE || errno == ECONNRESET)))
			T_FAIL("connection %d: send: %zd (%s)", i, n, strerror(errno));
	}
	for (int i = 0; i < N; i++) {
		ssize_t n = recv_line(fds[i], buf, sizeof(buf), 10000);

		if (n <= 0)
			T_FAIL("connection %d of %d: closed or silent without a reply (%zd)", i, N,
			       n);
		check_reply(buf, (size_t)n, "status");
		T_OK(pmc_ctl_decode_reply(buf, (size_t)n, &r, &err));
		if (r.kind == PMC_CTL_REPLY_OK) {
			ok++;
		} else {
			if (r.errnum != EBUSY || !strstr(r.error, "busy"))
				T_FAIL("connection %d: %d %s", i, r.errnum, r.error);
			busy++;
			T_TRUE(recv_line(fds[i], buf, sizeof(buf), 5000) == 0);
		}
		pmc_ctl_reply_free(&r);
	}
	if (ok != 56 || busy != N - 56)
		T_FAIL("200 connections: %d served, %d busy; expected 56 and %d", ok, busy, N - 56);
	/* the admins' slots, then root's */
	admfd = conn_as(NOBODY, admin_gid);
	T_TRUE(admfd >= 0);
	send_str(admfd, "{\"cmd\":\"status\"}\n");
	reply_on(admfd, "an admin with 56 reader connections open", "status", &r, NULL);
	if (r.kind != PMC_CTL_REPLY_OK)
		T_FAIL("control.admin_group with 56 reader connections open: %s", r.error);
	pmc_ctl_reply_free(&r);
	rootfd = conn_root();
	send_str(rootfd, "{\"cmd\":\"status\"}\n");
	reply_on(rootfd, "root with 57 connections open", "status", &r, NULL);
	if (r.kind != PMC_CTL_REPLY_OK)
		T_FAIL("root with 57 connections open: %s", r.error);
	pmc_ctl_reply_free(&r);
	close(rootfd);
	close(admfd);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	usleep(200000); /* the server saw them closed */
	for (int i = 0; i < 17; i++) {
		static const char req[] = "{\"cmd\":\"status\"}\n";
		ssize_t n;

		fds[i] = conn_member();
		/* the 17th is told busy and closed as soon as it is accepted,
		 * which can come before this request (EPIPE: the busy line is
		 * still there to read) */
		n = send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL);
		if (n != (ssize_t)sizeof(req) - 1 &&
		    !(i == 16 && n < 0 && (errno == EPIPE || errno == ECONNRESET)))
			T_FAIL("member connection %d: send: %zd (%s)", i, n, strerror(errno));
		T_TRUE(recv_line(fds[i], buf, sizeof(buf), 10000) > 0);
		T_OK(pmc_ctl_decode_reply(buf, strlen(buf), &r, &err));
		if (i < 16 && r.kind != PMC_CTL_REPLY_OK)
			T_FAIL("member connection %d of one user: %s", i, r.error);
		if (i == 16 && (r.kind != PMC_CTL_REPLY_ERROR || r.errnum != EBUSY ||
				!strstr(r.error, "(the limit for a control.group member)")))
			T_FAIL("a member's 17th connection: %s", r.kind == PMC_CTL_REPLY_OK ? "served" : r.error);
		pmc_ctl_reply_free(&r);
	}
	expect_ok(NOBODY - 1, ctl_gid, "{\"cmd\":\"status\"}\n", "status");
	for (int i = 0; i < 17; i++)
		close(fds[i]);
	status_ok("200 connections");
	printf("ok: 200 connections: %d served, %d told busy, an admin and root got in\n", ok,
	       busy);
}

/* control.group reads; changes need root or control.admin_group */
static void t_privileges(void)
{
	static const char *const ro[][2] = {
	    {"{\"cmd\":\"status\"}\n", "status"},
	    {"{\"cmd\":\"stats\"}\n", "stats"},
	    {"{\"cmd\":\"stats\",\"volume\":\"v0\"}\n", "stats"},
	    {"{\"cmd\":\"volume-list\"}\n", "volume-list"},
	    {"{\"cmd\":\"get\",\"key\":\"writeback.high_pct\"}\n", "get"},
	    {"{\"cmd\":\"get\",\"volume\":\"v0\",\"key\":\"mode\"}\n", "get"},
	};
	static const char *const rw[] = {
	    "{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":60}\n",
	    "{\"cmd\":\"flush\"}\n",
	    "{\"cmd\":\"volume-remove\",\"name\":\"v0\",\"force\":true}\n",
	    "{\"cmd\":\"volume-add\",\"name\":\"x\",\"disk\":\"/dev/null\"}\n",
	    "{\"cmd\":\"shutdown\"}\n",
	    "{\"cmd\":\"volume-clear-error\",\"name\":\"v0\"}\n",
	};

	unsigned snaps = atomic_load(g_snapshots);

	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
		expect_ok(NOBODY, ctl_gid, ro[i][0], ro[i][1]);
	/* a reader's status takes no snapshot of the index: polling it would
	 * take every stripe lock the I/O threads use, again and again */
	T_EQ(atomic_load(g_snapshots), snaps);
	expect_ok(0, 0, ro[0][0], ro[0][1]);
	T_TRUE(atomic_load(g_snapshots) > snaps);
	for (size_t i = 0; i < sizeof(rw) / sizeof(rw[0]); i++)
		expect_err(NOBODY, ctl_gid, rw[i], EPERM, "permission denied");
	expect_ok(NOBODY, admin_gid, rw[0], "set");
	expect_ok(NOBODY, admin_gid, rw[1], "flush");
	expect_ok(NOBODY, admin_gid, rw[5], "volume-clear-error");
	expect_err(0, 0, "{\"cmd\":\"volume-clear-error\",\"name\":\"nope\"}\n", ENOENT,
		   "volume nope: not served");
	/* control.admin_group as the last of many supplementary groups: the
	 * peer's groups as the socket has them (a fixed line buffer of /proc's
	 * "Groups:" cut a long list, and could read half a number as a group) */
	for (int i = 0; i < 159; i++)
		g_extra[i] = 61000 + (gid_t)i;
	g_extra[159] = admin_gid;
	g_nextra = 160;
	expect_ok(NOBODY, ctl_gid, rw[0], "set");
	g_nextra = 159;
	expect_err(NOBODY, ctl_gid, rw[0], EPERM, "permission denied");
	g_nextra = 0;
	expect_ok(0, 0, "{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":50}\n", "set");
	/* a reader sending refused requests as fast as it can: each is
	 * refused, but the log gets a burst, not a line each */
	{
		unsigned before = atomic_load(g_refused_lines), lines;
		int fd = conn_as(NOBODY, ctl_gid);
		struct pmc_ctl_reply r;

		T_TRUE(fd >= 0);
		for (int i = 0; i < 500; i++) {
			send_all(fd, rw[0], strlen(rw[0]));
			reply_on(fd, rw[0], "error", &r, NULL);
			T_TRUE(r.kind == PMC_CTL_REPLY_ERROR && r.errnum == EPERM);
			pmc_ctl_reply_free(&r);
		}
		close(fd);
		lines = atomic_load(g_refused_lines) - before;
		printf("ok: 500 refused requests of a reader: %u log lines\n", lines);
		T_TRUE(lines >= 1 && lines <= PMC_RATELIMIT_BURST + 1);
	}
	status_ok("privileges");
	printf("ok: privileges: control.group reads, control.admin_group and root change\n");
}

/* volume-add: block devices only; what others learn of files they cannot see */
static void t_add_disk(void)
{
	char req[512], priv[96], a[256], b[256];
	const char *m;
	int fd;

	snprintf(priv, sizeof(priv), "%s/private", dir);
	T_TRUE(mkdir(priv, 0700) == 0);
	snprintf(req, sizeof(req), "%s/private/secret", dir);
	fd = open(req, O_CREAT | O_RDWR, 0600);
	T_TRUE(fd >= 0 && ftruncate(fd, DISK_BYTES) == 0);
	close(fd);
	/* root: told why */
	snprintf(req, sizeof(req),
		 "{\"cmd\":\"volume-add\",\"name\":\"f\",\"disk\":\"%s/disk0\"}\n", dir);
	expect_err(0, 0, req, EINVAL, "not a block device");
	expect_err(0, 0, "{\"cmd\":\"volume-add\",\"name\":\"f\",\"disk\":\"/dev/null\"}\n",
		   EINVAL, "not a block device");
	expect_err(0, 0, "{\"cmd\":\"volume-add\",\"name\":\"f\",\"disk\":\"/nonexistent\"}\n",
		   EINVAL, "No such file");
	/* an admin who is not root: the same words for a file that exists and
	 * one that does not */
	snprintf(req, sizeof(req),
		 "{\"cmd\":\"volume-add\",\"name\":\"f\",\"disk\":\"%s/secret\"}\n", priv);
	m = expect_err(NOBODY, admin_gid, req, EINVAL, "not a block device this daemon may use");
	snprintf(a, sizeof(a), "%s", m);
	snprintf(req, sizeof(req),
		 "{\"cmd\":\"volume-add\",\"name\":\"f\",\"disk\":\"%s/absent\"}\n", priv);
	m = expect_err(NOBODY, admin_gid, req, EINVAL, "not a block device this daemon may use");
	snprintf(b, sizeof(b), "%s", m);
	*strstr(a, "/secret") = '\0';
	*strstr(b, "/absent") = '\0';
	if (strcmp(a, b))
		T_FAIL("the messages tell a hidden file from a missing one:\n  %s\n  %s", a, b);
	snprintf(req, sizeof(req), "%s/private/secret", dir);
	unlink(req);
	rmdir(priv);
	printf("ok: volume-add: files and character devices refused; a hidden file and a "
	       "missing one get the same message\n");
}

/* A volume removal (1.5 s here) runs off the loop: status answers at
 * once meanwhile, other operations are told busy, and the removal's own
 * client gets its reply. */
static void t_long_op(void)
{
	struct pmc_ctl_reply r;
	uint64_t t0, worst = 0;
	unsigned progress = 0;
	int fd = conn_root();

	send_str(fd, "{\"cmd\":\"volume-remove\",\"name\":\"v1\",\"id\":\"rm\"}\n");
	usleep(100000);
	for (int i = 0; i < 5; i++) {
		t0 = pmc_mono_ns();
		expect_ok(NOBODY, ctl_gid, "{\"cmd\":\"status\"}\n", "status");
		if (pmc_mono_ns() - t0 > worst)
			worst = pmc_mono_ns() - t0;
		usleep(100000);
	}
	expect_err(0, 0, "{\"cmd\":\"flush\"}\n", EBUSY, "another operation is running");
	expect_err(0, 0, "{\"cmd\":\"set\",\"volume\":\"v1\",\"key\":\"mode\",\"value\":\"write-back\"}\n",
		   EBUSY, "an operation on it is running");
	reply_on(fd, "volume-remove", "volume-remove", &r, &progress);
	if (r.kind != PMC_CTL_REPLY_OK)
		T_FAIL("volume-remove v1: %s", r.error);
	T_EQ(r.id.kind, PMC_CTL_ID_STR);
	pmc_ctl_reply_free(&r);
	close(fd);
	if (worst > 300000000ull)
		T_FAIL("status took %llu ms while a volume was being removed",
		       (unsigned long long)(worst / 1000000));
	expect_err(0, 0, "{\"cmd\":\"stats\",\"volume\":\"v1\"}\n", ENOENT, "not served");
	/* a client that leaves during the operation */
	fd = conn_root();
	send_str(fd, "{\"cmd\":\"flush\"}\n");
	close(fd);
	status_ok("a long operation");
	printf("ok: long operation: status within %llu ms during a 1.5 s removal\n",
	       (unsigned long long)(worst / 1000000));
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
    {"early-close", t_early_close}, {"never-reading", t_never_reading},
    {"idle", t_idle},		    {"flood", t_flood},
    {"many", t_many},		    {"privileges", t_privileges},
    {"add-disk", t_add_disk},	    {"long-op", t_long_op},
};

/* a failing check exits: take the server along */
static void kill_server(void)
{
	if (server > 0 && getpid() != server)
		kill(server, SIGKILL);
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL);
	struct group *g;
	struct pmc_ctl_reply r;
	long rss;
	int st;

	if (geteuid() != 0) {
		printf("SKIP: needs root (connects as root and as uid %d)\n", NOBODY);
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	g = getgrnam("nogroup");
	if (!g) {
		printf("SKIP: no group nogroup (control.group)\n");
		return 77;
	}
	ctl_gid = g->gr_gid;
	g = getgrnam("users");
	if (!g) {
		printf("SKIP: no group users (control.admin_group)\n");
		return 77;
	}
	admin_gid = g->gr_gid;
	load_shapes(PMC_CTL_DOC);
	printf("seed %u; %u reply shapes from lib/ctl.h\n", seed, nr_shapes);
	srandom(seed);
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/ctlsrv_stress.XXXXXX");
	T_TRUE(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/ctl.sock", dir);
	/* clients drop to NOBODY: they must reach the socket */
	T_TRUE(chmod(dir, 0755) == 0);
	T_TRUE(setgroups(0, NULL) == 0);
	pmc_log_set_level(LOG_INFO);
	g_snapshots = mmap(NULL, 2 * sizeof(*g_snapshots), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_TRUE(g_snapshots != MAP_FAILED);
	g_refused_lines = g_snapshots + 1;
	pmc_log_set_sink(log_sink);
	pmc_test_counts_snapshot = count_snapshot;
	server = fork();
	T_TRUE(server >= 0);
	if (server == 0)
		_exit(server_main());
	atexit(kill_server);
	for (int i = 0; i < 500 && access(sock_path, F_OK); i++) {
		server_alive("start");
		usleep(20000);
	}
	status_ok("start");

	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int run = argc <= 2;

		for (int a = 2; a < argc; a++)
			run |= !strcmp(argv[a], tests[i].name);
		if (run)
			tests[i].fn();
	}

	rss = server_rss_kib();
	request("{\"cmd\":\"shutdown\"}\n", "shutdown", &r);
	T_EQ(r.kind, PMC_CTL_REPLY_OK);
	pmc_ctl_reply_free(&r);
	T_TRUE(waitpid(server, &st, 0) == server);
	server = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		T_FAIL("server: %s %d", WIFSIGNALED(st) ? "signal" : "exit",
		       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	for (int i = 0; i < 2; i++) {
		char p[96];

		snprintf(p, sizeof(p), "%s/disk%d", dir, i);
		unlink(p);
	}
	snprintf(sock_path, sizeof(sock_path), "%s/pmem", dir);
	unlink(sock_path);
	rmdir(dir);
	printf("ctlsrv_stress: pass (%u replies checked against lib/ctl.h; server RSS %ld KiB "
	       "at the end, ASan build)\n",
	       replies_checked, rss);
	return 0;
}
