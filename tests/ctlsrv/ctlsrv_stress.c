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
 * Usage: ctlsrv_stress [seed]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctlsrv.h"
#include "log.h"
#include "pmcached.h"
#include "ring.h"
#include "t.h"

#define NOBODY 65534
#define PMEM_BYTES (64ull << 20)
#define DISK_BYTES (16ull << 20)

static char dir[40], sock_path[64];
static pid_t server;
static gid_t ctl_gid;

/* --- the server (child process) --- */

static struct pmcd srv;

int pmcd_volume_add(struct pmcd *d, const struct pmc_config_volume *vc, struct pmc_err *err)
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
	v->conf = *vc;
	v->dev = NULL;
	v->used = 1;
	return 0;
}

struct pmcd_volume *pmcd_volume_find(struct pmcd *d, const char *name)
{
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		if (d->vols[i].used && !strcmp(d->vols[i].conf.name, name))
			return &d->vols[i];
	return NULL;
}

/* as pmcached's: write-around, flush through the write-back thread, detach */
int pmcd_volume_remove(struct pmcd *d, const char *name, int force, struct pmc_err *err)
{
	struct pmcd_volume *v = pmcd_volume_find(d, name);
	int rc;

	if (!v)
		return pmc_err_set(err, ENOENT, "volume %s: not served", name);
	pmc_engine_set_mode(d->e, v->vol, PMC_MODE_WRITE_AROUND, NULL);
	while (pmcd_wb_flush(&d->wb, v->vol) == -EBUSY)
		usleep(10000);
	while (atomic_load(&d->wb.flush_busy))
		usleep(10000);
	/* a volume with much dirty data takes seconds: this one pretends to */
	usleep(1500000);
	rc = pmc_engine_detach(d->e, v->vol, 1, err);
	v->used = 0;
	return rc;
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
	d->start_ns = pmc_mono_ns();
	d->max_io_start = d->conf.wb.max_io_bytes;
	d->loop = ev_default_loop(0);
	T_OK(pmc_pmem_open(d->conf.pmem_path, PMEM_BYTES, &d->pm, &err));
	T_OK(pmc_cache_format(d->pm, NULL, &err));
	T_OK(pmc_cache_open(d->pm, 0, &d->cache, &err));
	T_OK(pmc_engine_create(d->cache, &d->conf.wb, &d->e, &err));
	T_OK(pmcd_wb_start(&d->wb, d->e, &err));
	for (int i = 0; i < 2; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/disk%d", dir, i);
		fd = open(path, O_CREAT | O_RDWR, 0600);
		T_TRUE(fd >= 0 && ftruncate(fd, DISK_BYTES) == 0);
		close(fd);
		pmc_config_volume_default(&vc);
		snprintf(vc.name, sizeof(vc.name), "v%d", i);
		snprintf(vc.disk, sizeof(vc.disk), "%s", path);
		T_OK(pmcd_volume_add(d, &vc, &err));
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

/* connect as uid (0 or NOBODY), with egid; -errno on failure */
static int conn_as(uid_t uid, gid_t gid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_TRUE(fd >= 0);
	if (uid) {
		T_TRUE(setegid(gid) == 0);
		T_TRUE(seteuid(uid) == 0);
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		rc = -errno;
	if (uid) {
		T_TRUE(seteuid(0) == 0);
		T_TRUE(setegid(0) == 0);
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

	T_TRUE(fd >= 0);
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

		if (left < 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		n = recv(fd, buf + len, 1, 0);
		if (n <= 0)
			return len ? (ssize_t)len : 0;
		if (buf[len++] == '\n')
			break;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

/* a request on a fresh root connection; the final reply decoded */
static void request(const char *req, struct pmc_ctl_reply *r)
{
	static char buf[PMC_CTL_MAX_REPLY];
	struct pmc_err err = {0};
	int fd = conn_root();
	ssize_t n;

	send_all(fd, req, strlen(req));
	do {
		n = recv_line(fd, buf, sizeof(buf), 10000);
		if (n <= 0)
			T_FAIL("%s: no reply (%zd)", req, n);
		T_OK(pmc_ctl_decode_reply(buf, (size_t)n, r, &err));
		if (r->kind == PMC_CTL_REPLY_PROGRESS)
			pmc_ctl_reply_free(r);
	} while (r->kind == PMC_CTL_REPLY_PROGRESS);
	close(fd);
}

static void status_ok(const char *after)
{
	struct pmc_ctl_reply r;

	server_alive(after);
	request("{\"cmd\":\"status\"}\n", &r);
	if (r.kind != PMC_CTL_REPLY_OK)
		T_FAIL("after %s: status: %s", after, r.error);
	pmc_ctl_reply_free(&r);
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

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL);
	struct group *g = getgrnam("nogroup");
	struct pmc_ctl_reply r;
	int st;

	if (geteuid() != 0) {
		printf("SKIP: needs root (connects as root and as uid %d)\n", NOBODY);
		return 77;
	}
	if (!g) {
		printf("SKIP: no group nogroup\n");
		return 77;
	}
	ctl_gid = g->gr_gid;
	printf("seed %u\n", seed);
	srandom(seed);
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/ctlsrv_stress.XXXXXX");
	T_TRUE(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/ctl.sock", dir);
	/* clients drop to NOBODY: they must reach the socket */
	T_TRUE(chmod(dir, 0755) == 0);
	T_TRUE(setgroups(0, NULL) == 0);
	pmc_log_set_level(LOG_WARNING);
	server = fork();
	T_TRUE(server >= 0);
	if (server == 0)
		_exit(server_main());
	for (int i = 0; i < 500 && access(sock_path, F_OK); i++) {
		server_alive("start");
		usleep(20000);
	}
	status_ok("start");

	t_early_close();

	request("{\"cmd\":\"shutdown\"}\n", &r);
	T_EQ(r.kind, PMC_CTL_REPLY_OK);
	pmc_ctl_reply_free(&r);
	T_TRUE(waitpid(server, &st, 0) == server);
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
	printf("ctlsrv_stress: pass\n");
	return 0;
}
