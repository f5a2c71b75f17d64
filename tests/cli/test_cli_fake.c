/* test_cli_fake.c PMCACHECTL - pmcachectl against a fake daemon on a Unix
 * socket (lib/ctl.c's codec on both sides): flush draws a progress bar on a
 * terminal (a pty) and prints plain lines otherwise, error replies map to
 * the documented exit codes with one line on stderr, status renders, a
 * silent daemon ends with --timeout, and a full one is reported busy. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cache.h"
#include "cache_internal.h"
#include "ctl.h"
#include "format.h"
#include "pmem.h"
#include "t.h"

static char sock_path[108];

static void put(int fd, char *line)
{
	T_TRUE(line);
	T_TRUE(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
	free(line);
}

/* serve one connection: each request line gets a canned answer */
static int g_recount; /* the server answers status as right after a crash */
static const char *g_a4; /* a fourth argument for run(), after a3 */
/* 1: status names g_pmem as its pmem; 2: ... as one it could not open */
static int g_pmem_state;
static char g_pmem[128];

static void serve_conn(int fd)
{
	char buf[65536];
	size_t len = 0;
	ssize_t n;

	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
		char *nl;

		len += (size_t)n;
		while ((nl = memchr(buf, '\n', len))) {
			struct pmc_ctl_req r;
			struct pmc_err err = {0};
			size_t l = (size_t)(nl - buf) + 1;

			memset(&r, 0, sizeof(r));
			if (pmc_ctl_decode(buf, l, &r, &err)) {
				put(fd, pmc_ctl_reply_error(&r.id, EINVAL, err.msg));
			} else if (r.cmd == PMC_CTL_STATUS && g_pmem_state) {
				char j[512];

				snprintf(j, sizeof(j),
					 "{\"pmem\":\"%s\",\"pid\":4242,%s\"volumes\":[]}", g_pmem,
					 g_pmem_state == 2 ? "\"pmem_unavailable\":true," : "");
				put(fd, pmc_ctl_reply_ok(&r.id, json_tokener_parse(j)));
			} else if (r.cmd == PMC_CTL_STATUS && g_recount) {
				/* right after a crash: the counts are being rebuilt */
				json_object *o = json_tokener_parse(
					"{\"pmem\":\"/dev/dax0.0\",\"uuid\":\"00\",\"block_size\":4096,"
					"\"nr_blocks\":1000,\"dirty_blocks\":0,\"clean_blocks\":0,"
					"\"counts_valid\":false,\"last_restart\":\"crash\",\"boot_epoch\":4,"
					"\"store_granularity\":\"cache-line\",\"volumes\":[{\"name\":\"v0\","
					"\"disk\":\"/dev/nvme0n1\",\"disk_id\":\"nvme.sn-S123-ns1\","
					"\"device\":\"/dev/ublkb0\",\"ublk_id\":0,"
					"\"mode\":\"write-back\",\"draining\":false,\"size_bytes\":1073741824,"
					"\"dirty_blocks\":0,\"clean_blocks\":0,\"counts_valid\":false,"
					"\"error\":0,\"error_text\":\"\",\"recovered\":true}]}");
				put(fd, pmc_ctl_reply_ok(&r.id, o));
			} else if (r.cmd == PMC_CTL_STATUS) {
				json_object *o = json_tokener_parse(
					"{\"pmem\":\"/dev/dax0.0\",\"uuid\":\"00\",\"block_size\":4096,"
					"\"nr_blocks\":1000,\"dirty_blocks\":100,\"clean_blocks\":50,"
					"\"counts_valid\":true,\"last_restart\":\"clean\",\"boot_epoch\":3,"
					"\"store_granularity\":\"cache-line\",\"volumes\":[{\"name\":\"v0\","
					"\"disk\":\"/dev/nvme0n1\",\"disk_id\":\"nvme.sn-S123-ns1\","
					"\"device\":\"/dev/ublkb0\",\"ublk_id\":0,"
					"\"mode\":\"write-back\",\"draining\":false,\"size_bytes\":1073741824,"
					"\"dirty_blocks\":100,\"clean_blocks\":50,\"error\":5,"
					"\"error_text\":\"Input/output error\",\"recovered\":false},"
					"{\"name\":\"v1\",\"disk\":\"/dev/nvme1n1\",\"disk_id\":\"\","
					"\"device\":\"/dev/ublkb1\",\"mode\":\"write-back\","
					"\"draining\":false,\"size_bytes\":4096,\"dirty_blocks\":0,"
					"\"clean_blocks\":0,\"lost_blocks\":3,\"error\":5,"
					"\"error_text\":\"Input/output error\",\"recovered\":false}]}");
				put(fd, pmc_ctl_reply_ok(&r.id, o));
			} else if (r.cmd == PMC_CTL_FLUSH && !strcmp(r.volume, "v0")) {
				/* a reader: status answered, the flush refused */
				put(fd, pmc_ctl_reply_error(&r.id, EPERM,
							    "flush: permission denied: root only"));
			} else if (r.cmd == PMC_CTL_FLUSH && !strcmp(r.volume, "nosuch")) {
				put(fd, pmc_ctl_reply_error(&r.id, ENOENT, "volume nosuch: not served"));
			} else if (r.cmd == PMC_CTL_FLUSH) {
				put(fd, pmc_ctl_reply_progress(&r.id, 100));
				put(fd, pmc_ctl_reply_progress(&r.id, 40));
				put(fd, pmc_ctl_reply_progress(&r.id, 0));
				put(fd, pmc_ctl_reply_ok(&r.id, NULL));
			} else if (r.cmd == PMC_CTL_GET && !strcmp(r.key->key, "queues.count")) {
				/* a daemon that says nothing */
			} else if (r.cmd == PMC_CTL_GET && !strcmp(r.key->key, "queues.depth")) {
				/* every connection taken: one line, then close */
				put(fd, pmc_ctl_reply_error(NULL, EBUSY,
							    "daemon busy: 64 control connections open"));
				close(fd);
				return;
			} else if (r.cmd == PMC_CTL_GET && !strcmp(r.key->key, "writeback.high_pct")) {
				close(fd);
				return;
			} else if (r.cmd == PMC_CTL_STATS) {
				/* ... then the connection is closed, as the daemon
				 * closes one idle for control.idle_timeout */
				put(fd, pmc_ctl_reply_ok(&r.id, json_tokener_parse(
									"{\"total\":{\"reads\":7}}")));
				close(fd);
				return;
			} else if (r.cmd == PMC_CTL_VOLUME_CLEAR_ERROR) {
				/* v0: its disk's error cleared; v1: LOST blocks keep
				 * EIO; v2: no error */
				int was = strcmp(r.volume, "v2") ? EIO : 0;
				int now = !strcmp(r.volume, "v1") ? EIO : 0;
				json_object *o = json_object_new_object();

				json_object_object_add(o, "was", json_object_new_int(was));
				json_object_object_add(o, "error", json_object_new_int(now));
				json_object_object_add(o, "error_text",
						       json_object_new_string(now ? strerror(now) : ""));
				put(fd, pmc_ctl_reply_ok(&r.id, o));
			} else if (r.cmd == PMC_CTL_VOLUME_RECONNECT) {
				/* the daemon's own connect refused (NVMe/TCP) */
				put(fd, pmc_ctl_reply_error(&r.id, ECONNREFUSED,
							    "volume net: connect: Connection refused"));
			} else if (r.cmd == PMC_CTL_VOLUME_REMOVE) {
				put(fd, pmc_ctl_reply_error(&r.id, EBUSY,
							    "volume v0: /dev/ublkb0 is in use"));
			} else {
				put(fd, pmc_ctl_reply_error(&r.id, EIO, "not in the fake"));
			}
			memmove(buf, buf + l, len - l);
			len -= l;
		}
	}
	close(fd);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	ssize_t n;

	T_TRUE(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		T_EQ(write(out, buf, (size_t)n), n);
	T_EQ(n, 0);
	T_TRUE(fchmod(out, mode) == 0 && close(out) == 0);
	close(in);
}

static pid_t start_server(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	pid_t pid;

	snprintf(sock_path, sizeof(sock_path), "/tmp/pmc-fake-%d.sock", getpid());
	unlink(sock_path);
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	T_TRUE(lfd >= 0 && !bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) && !listen(lfd, 8));
	pid = fork();
	T_TRUE(pid >= 0);
	if (pid == 0) {
		/* a failed check ends the test: the fake goes with it (else it
		 * holds ctest's pipe open until the timeout) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;) {
			int fd = accept(lfd, NULL, NULL);

			if (fd >= 0)
				serve_conn(fd);
		}
	}
	close(lfd);
	return pid;
}

static uid_t g_uid; /* run as this uid (and gid), not 0 */

/* run pmcachectl -s SOCK ARGS; stdout and stderr captured apart, or both
 * on a pty when tty; returns the exit code */
static int run(const char *prog, int tty, char *out, size_t outlen, char *err, size_t errlen,
	       const char *a1, const char *a2, const char *a3)
{
	int po[2], pe[2], master = -1, st;
	size_t o = 0, e = 0;
	pid_t pid;
	ssize_t n;

	T_TRUE(!pipe(po) && !pipe(pe));
	pid = tty ? forkpty(&master, NULL, NULL, NULL) : fork();
	T_TRUE(pid >= 0);
	if (pid == 0) {
		if (g_uid && (setgroups(0, NULL) || setgid(g_uid) || setuid(g_uid)))
			_exit(126);
		if (!tty) {
			dup2(po[1], 1);
			dup2(pe[1], 2);
		}
		execl(prog, prog, "-s", sock_path, a1, a2, a3, g_a4, (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	if (tty) {
		while (o + 1 < outlen && (n = read(master, out + o, outlen - 1 - o)) > 0)
			o += (size_t)n;
		close(master);
	} else {
		while (o + 1 < outlen && (n = read(po[0], out + o, outlen - 1 - o)) > 0)
			o += (size_t)n;
		while (e + 1 < errlen && (n = read(pe[0], err + e, errlen - 1 - e)) > 0)
			e += (size_t)n;
	}
	out[o] = '\0';
	err[e] = '\0';
	close(po[0]);
	close(pe[0]);
	T_TRUE(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	printf("--- pmcachectl %s %s %s (%s): exit %d\n%s%s", a1, a2 ? a2 : "", a3 ? a3 : "",
	       tty ? "tty" : "pipes", WEXITSTATUS(st), out, err);
	return WEXITSTATUS(st);
}

/* what a failing check leaves (T_FAIL exits): the 0444 pmem, the socket */
static void cleanup(void)
{
	if (g_pmem[0])
		unlink(g_pmem);
	unlink(sock_path);
}

/*
 * check --repair on the cache at g_pmem: counters a clean close kept that
 * disagree with a sound index are recounted (two volumes' dirty counts
 * swapped: their sum still agrees with the superblock's, so a start
 * trusted them, and a flush or remove judged a volume by the wrong one);
 * an index with a bad descriptor is left as it is, not a byte changed.
 */
static void repair_counts(const char *ctl, char *out, size_t olen, char *ebuf, size_t elen)
{
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_vol *vols;
	struct pmc_desc *descs;
	enum pmc_block_state st;
	uint64_t blk;
	uint32_t va, vb, csum;
	struct stat a, b;
	char *buf = aligned_alloc(4096, 4096);

	memset(buf, 7, 4096);
	T_OK(pmc_pmem_open(g_pmem, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_OK(pmc_cache_volume_add(c, "a", "/dev/pmc-test-a", 1 << 20, &va, &err));
	T_OK(pmc_cache_volume_add(c, "b", "/dev/pmc-test-b", 1 << 20, &vb, &err));
	for (uint64_t i = 0; i < 3; i++)
		T_OK(pmc_cache_write(c, va, i, 1, buf, &err));
	T_OK(pmc_cache_write(c, vb, 0, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, vb, 0, &blk, &st));
	pmc_cache_unpin(c, blk);
	vols = c->vols;
	descs = c->descs;
	pmc_cache_close(c);
	T_EQ(vols[va].clean_nr_dirty, 3);
	vols[va].clean_nr_dirty = 1;
	vols[vb].clean_nr_dirty = 3;
	pmc_pmem_persist(pm, &vols[va], sizeof(vols[va]));
	pmc_pmem_persist(pm, &vols[vb], sizeof(vols[vb]));
	pmc_pmem_close(pm);

	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "check", g_pmem, NULL), 7);
	T_TRUE(strstr(out, "INCONSISTENT") != NULL);
	T_TRUE(strstr(out, "counters     as kept at the last close, compared with the index"));
	T_TRUE(strstr(ebuf, "volume a: counters say 1 dirty 0 clean, the index has 3 and 0") != NULL);
	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "check", g_pmem, "--repair"), 0);
	T_TRUE(strstr(out, "repaired     the counters of 2 volumes, recounted from the index") != NULL);
	T_TRUE(strstr(out, "volume a: counters say 1 dirty") != NULL);
	T_TRUE(strstr(out, "result       consistent") != NULL);
	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "--json", "check", g_pmem), 0);
	T_TRUE(strstr(out, "\"repaired\": 0") != NULL && strstr(out, "\"consistent\": true") != NULL);
	T_TRUE(strstr(out, "\"ok\": true") != NULL);
	/* the recount was kept: a start trusts 3 and 1 */
	T_OK(pmc_pmem_open(g_pmem, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err));
	{
		struct pmc_volume_info vi;

		T_OK(pmc_cache_volume_info(c, va, &vi));
		T_TRUE(vi.counts_valid && vi.nr_dirty == 3);
		T_OK(pmc_cache_volume_info(c, vb, &vi));
		T_TRUE(vi.counts_valid && vi.nr_dirty == 1);
	}
	pmc_cache_abandon(c);

	/* a damaged descriptor: --repair refuses and writes nothing */
	csum = descs[blk].csum;
	descs[blk].csum = csum ^ 1;
	pmc_pmem_persist(pm, &descs[blk], sizeof(descs[blk]));
	pmc_pmem_close(pm);
	T_TRUE(stat(g_pmem, &a) == 0);
	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "check", g_pmem, "--repair"), 7);
	T_TRUE(strstr(out, "nothing repaired: an inconsistent index is not repaired") != NULL);
	T_TRUE(strstr(ebuf, "bad checksum") != NULL);
	T_TRUE(stat(g_pmem, &b) == 0 && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
	       a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);
	T_OK(pmc_pmem_open(g_pmem, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err));
	descs = c->descs;
	pmc_cache_abandon(c);
	descs[blk].csum = csum;
	pmc_pmem_persist(pm, &descs[blk], sizeof(descs[blk]));
	/* after a crash no counters are kept: check says it did not compare
	 * them (it printed "consistent" as if it had) */
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "check", g_pmem, NULL), 0);
	T_TRUE(strstr(out, "counters     not compared: not kept by the last close"));
	T_OK(pmc_pmem_open(g_pmem, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	free(buf);
}

/*
 * dump walks the tables of the newest superblock copy whose checksum
 * holds: a newer copy with the magic but a damaged checksum (a torn
 * commit) is shown as such, its geometry not followed (the volume table
 * was read from wherever it pointed). The cache at g_pmem holds volumes a
 * and b (repair_counts).
 */
static void dump_good_copy(const char *ctl, char *out, size_t olen, char *ebuf, size_t elen)
{
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_sb *sb[PMC_SB_COPIES], keep;
	unsigned n;
	char want[64];

	T_OK(pmc_pmem_open(g_pmem, 0, &pm, &err));
	for (unsigned i = 0; i < PMC_SB_COPIES; i++)
		sb[i] = (struct pmc_sb *)(pm->base + (uint64_t)i * PMC_SB_SLOT);
	n = sb[0]->seq > sb[1]->seq ? 0 : 1;
	keep = *sb[n];
	sb[n]->seq += 100;
	sb[n]->vol_off = sb[n]->desc_off; /* the checksum no longer holds */
	pmc_pmem_persist(pm, sb[n], sizeof(*sb[n]));
	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "--json", "dump", g_pmem), 0);
	snprintf(want, sizeof(want), "\"tables_of_copy\": %u", 1 - n);
	T_TRUE(strstr(out, want) != NULL);
	T_TRUE(strstr(out, "\"csum_ok\": false") != NULL);
	T_TRUE(strstr(out, "\"name\": \"a\"") != NULL && strstr(out, "\"name\": \"b\"") != NULL);
	*sb[n] = keep;
	pmc_pmem_persist(pm, sb[n], sizeof(*sb[n]));
	pmc_pmem_close(pm);
	T_EQ(run(ctl, 0, out, olen, ebuf, elen, "--json", "dump", g_pmem), 0);
	snprintf(want, sizeof(want), "\"tables_of_copy\": %u", n);
	T_TRUE(strstr(out, want) != NULL && !strstr(out, "\"csum_ok\": false"));
}

int main(int argc, char **argv)
{
	static char out[65536], err[4096];
	pid_t srv;

	if (argc != 2)
		T_FAIL("usage: test_cli_fake PMCACHECTL");
	srv = start_server();
	atexit(cleanup);

	T_EQ(run(argv[1], 1, out, sizeof(out), err, sizeof(err), "flush", NULL, NULL), 0);
	T_TRUE(strstr(out, "\r[########################----------------]  60%"));
	T_TRUE(strstr(out, "100%  100 of 100 blocks written back"));
	T_TRUE(strstr(out, "flush: done"));

	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "flush", NULL, NULL), 0);
	T_TRUE(strstr(out, "flush: 100 dirty blocks\n"));
	T_TRUE(strstr(out, "flush: 40 dirty blocks left of 100\n"));
	T_TRUE(!strchr(out, '\r') && !err[0]);

	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--json", "flush", NULL), 0);
	T_TRUE(strstr(out, "{\"progress\":{\"dirty_blocks\":40}}\n"));
	T_TRUE(strstr(out, "{\"ok\":true}\n"));

	/* refused: nothing printed as if it had started */
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "flush", "v0", NULL), 4);
	T_TRUE(!out[0] && strstr(err, "permission denied"));
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "flush", "nosuch", NULL), 5);
	T_TRUE(!strcmp(err, "pmcachectl: volume nosuch: not served\n") && !out[0]);

	/* a connection refused in the daemon's reply is its failure (1), not
	 * "daemon not running" (3): the CLI is connected */
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "volume", "reconnect", "net"), 1);
	T_TRUE(strstr(err, "Connection refused") && !strstr(err, "not running"));

	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "volume", "clear-error", "v0"), 0);
	T_TRUE(!strcmp(out, "volume v0: error cleared (was: Input/output error); write-back tries "
			    "at once\n") && !err[0]);
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "volume", "clear-error", "v1"), 0);
	T_TRUE(!strcmp(out, "volume v1: error kept: Input/output error (dirty data lost to pmem "
			    "media errors; reads of it fail until it is written again)\n"));
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "volume", "clear-error", "v2"), 0);
	T_TRUE(!strcmp(out, "volume v2: had no error\n"));
	/* --json: every success says so, as every failure does */
	/* usage errors and a config that does not load too, with --json
	 * after the word that failed */
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "bogus", "--json", NULL), 2);
	if (!strstr(out, "\"exit\":2") || !strstr(out, "\"ok\":false") || !strstr(err, "bogus"))
		T_FAIL("a usage error with --json: stdout %s, stderr %s", out, err);
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--json", "--config=/nonexistent.conf",
		 "status"),
	     2);
	if (!strstr(out, "\"ok\":false") || !strstr(out, "cannot open"))
		T_FAIL("-c of a missing file with --json: stdout %s", out);
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--json", "status", NULL), 0);
	if (!strstr(out, "\"ok\": true") || strstr(out, "\"ok\": false"))
		T_FAIL("status --json: no \"ok\": true:\n%s", out);

	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "volume", "remove", "v0"), 6);
	T_TRUE(strstr(err, "in use\n") && !strchr(err, '\n')[1]);

	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "status", NULL, NULL), 0);
	T_TRUE(strstr(out, "dirty 400 KiB (10.0%), clean 200 KiB (5.0%)"));
	T_TRUE(strstr(out, "v0      write-back  failed     /dev/ublkb0  /dev/nvme0n1  nvme.sn-S123-ns1  "
			   "1.00 GiB"));
	/* LOST blocks (dirty data lost to pmem media errors) show first */
	T_TRUE(strstr(out, "v1      write-back  lost-data  /dev/ublkb1  /dev/nvme1n1  -  "));
	T_TRUE(strstr(out, "Input/output error"));

	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "get", "log.level", NULL), 1);
	T_TRUE(strstr(err, "not in the fake"));

	/* --timeout: a silent daemon */
	{
		uint64_t t0 = (uint64_t)time(NULL);

		T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--timeout=1", "get",
			 "queues.count"),
		     1);
		T_TRUE(strstr(err, "no word from the daemon for 1 s (--timeout"));
		T_TRUE((uint64_t)time(NULL) - t0 <= 5);
	}
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--timeout", "x", "status"), 2);
	/* stats --watch across a connection the daemon closed between two
	 * refreshes (an interval past control.idle_timeout): each refresh
	 * has a connection of its own */
	g_a4 = "--count=2";
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "stats", "--json", "--watch=0.2"),
	     0);
	g_a4 = NULL;
	if (!strstr(out, "\"reads\"") || !strstr(strstr(out, "\"reads\"") + 1, "\"reads\""))
		T_FAIL("stats --watch: two refreshes expected:\n%s\n%s", out, err);
	/* --timeout: a daemon that accepts no connection (its backlog full)
	 * is busy, exit 6 as pmcachectl(8) says (it was 1) */
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		char keep[sizeof(sock_path)];
		int lfd = socket(AF_UNIX, SOCK_STREAM, 0), cfd[16], nc = 0;

		memcpy(keep, sock_path, sizeof(keep));
		snprintf(sock_path, sizeof(sock_path), "/tmp/pmc-fake-full-%d.sock", getpid());
		unlink(sock_path);
		memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
		T_TRUE(lfd >= 0 && !bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) && !listen(lfd, 0));
		while (nc < 16) {
			cfd[nc] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
			T_TRUE(cfd[nc] >= 0);
			if (connect(cfd[nc], (struct sockaddr *)&sa, sizeof(sa))) {
				close(cfd[nc]);
				break;
			}
			nc++;
		}
		T_TRUE(nc < 16); /* the backlog is full */
		T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--timeout=1", "status", NULL),
		     6);
		T_TRUE(strstr(err, "accepted no connection within 1 s"));
		while (nc > 0)
			close(cfd[--nc]);
		close(lfd);
		unlink(sock_path);
		memcpy(sock_path, keep, sizeof(keep));
	}
	/* a full daemon is busy, not absent */
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "get", "queues.depth", NULL), 6);
	T_TRUE(strstr(err, "daemon busy") && !strstr(err, "not running"));
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "get", "writeback.high_pct", NULL),
	     1);
	T_TRUE(strstr(err, "closed the connection without a reply") &&
	       !strstr(err, "not running"));

	/* counts being rebuilt after a crash: no volume shows a partial count */
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	g_recount = 1;
	srv = start_server();
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "status", NULL, NULL), 0);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	if (!strstr(out, "(recount pending)") || !strstr(out, "counting") || strstr(out, "0 B "))
		T_FAIL("status while the counts are rebuilt shows partial counts:\n%s", out);
	/* check and dump refuse the pmem a daemon serves; not one it could
	 * not open (it runs pass-through and holds no lock on it: the lock
	 * decides) */
	snprintf(g_pmem, sizeof(g_pmem), "/tmp/pmc-fake-%d.pmem", getpid());
	{
		FILE *f = fopen(g_pmem, "w");

		T_TRUE(f && ftruncate(fileno(f), 1 << 20) == 0);
		fclose(f);
	}
	for (g_pmem_state = 1; g_pmem_state <= 2; g_pmem_state++) {
		srv = start_server();
		for (int k = 0; k < 2; k++) {
			int rc = run(argv[1], 0, out, sizeof(out), err, sizeof(err),
				     k ? "dump" : "check", g_pmem, NULL);

			if (g_pmem_state == 1 && (rc != 6 || !strstr(err, "served by pmcached (pid 4242)")))
				T_FAIL("%s of the served pmem: exit %d: %s", k ? "dump" : "check", rc, err);
			if (g_pmem_state == 2 && (rc == 6 || strstr(err, "served by")))
				T_FAIL("%s of the pmem the daemon could not open: exit %d: %s",
				       k ? "dump" : "check", rc, err);
		}
		/* --json: one document, also when it reports a bad cache (the
		 * error object followed the report), which says it failed */
		if (g_pmem_state == 2) {
			int rc = run(argv[1], 0, out, sizeof(out), err, sizeof(err), "--json", "dump",
				     g_pmem);
			const char *end = strstr(out, "\n}\n");

			if (!rc || out[0] != '{' || !end || end[3] || !strstr(out, "\"ok\": false") ||
			    strstr(out, "\"errno\""))
				T_FAIL("--json dump of a bad cache: exit %d, not one JSON document:\n%s",
				       rc, out);
		}
		kill(srv, SIGKILL);
		waitpid(srv, NULL, 0);
	}
	g_pmem_state = 0;
	unlink(g_pmem);
	/* a pmem path that is not there: a failure (1), not "unknown volume" (5) */
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "check", g_pmem, NULL), 1);
	T_TRUE(strstr(err, "No such file or directory") != NULL);
	/* a format --size that fails leaves no file it made: the retry with
	 * the right size was refused by the file left ("exists with ...") */
	{
		char sz[] = "--size=1M";

		T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "format", g_pmem, sz), 1);
		T_TRUE(strstr(err, "too small") != NULL);
		T_TRUE(access(g_pmem, F_OK) != 0 && errno == ENOENT);
		T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "format", g_pmem,
			 "--size=64M"),
		     0);
		T_TRUE(strstr(out, "formatted") != NULL);
	}
	/* a devdax name that did not appear is not a file to make (one under
	 * /dev lives in RAM): refused, nothing made */
	{
		const char *dax = "/dev/dax-pmc-test-nosuch.0";

		T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "format", dax,
			 "--size=64M"),
		     1);
		if (!strstr(err, "no such device (--size makes a pmem file only outside /dev"))
			T_FAIL("format --size of a missing devdax name: %s", err);
		T_TRUE(access(dax, F_OK) != 0 && errno == ENOENT);
	}
	repair_counts(argv[1], out, sizeof(out), err, sizeof(err));
	dump_good_copy(argv[1], out, sizeof(out), err, sizeof(err));
	/* check and dump map the pmem read-only: a cache the user may only
	 * read is checked (they opened it read-write: "permission denied"),
	 * and nothing of it changes */
	g_uid = 65534;
	if (geteuid() != 0) {
		printf("read-only check: not checked (needs root to drop to another user)\n");
	} else {
		/* a copy of the binary that user can run, wherever the build is
		 * (under /root it could not) */
		char bin[64] = "/tmp/pmc-cli-fake.XXXXXX", exe[96];
		struct stat a, b;

		T_TRUE(mkdtemp(bin) && chmod(bin, 0755) == 0);
		snprintf(exe, sizeof(exe), "%s/pmcachectl", bin);
		copy_file(argv[1], exe, 0755);
		T_EQ(run(exe, 0, out, sizeof(out), err, sizeof(err), "--help", NULL, NULL), 0);
		T_TRUE(chmod(g_pmem, 0444) == 0 && stat(g_pmem, &a) == 0);
		T_EQ(run(exe, 0, out, sizeof(out), err, sizeof(err), "check", g_pmem, NULL), 0);
		T_TRUE(strstr(out, "consistent") != NULL);
		T_EQ(run(exe, 0, out, sizeof(out), err, sizeof(err), "dump", g_pmem, NULL), 0);
		T_TRUE(strstr(out, "valid cache") != NULL);
		T_TRUE(stat(g_pmem, &b) == 0 && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
		       a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);
		printf("ok: read-only check: check and dump as uid 65534 change nothing\n");
		unlink(exe);
		rmdir(bin);
	}
	g_uid = 0;
	unlink(g_pmem);
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "status", NULL, NULL), 3);
	unlink(sock_path);
	T_EQ(run(argv[1], 0, out, sizeof(out), err, sizeof(err), "status", NULL, NULL), 3);
	T_TRUE(strstr(err, "daemon not running"));
	puts("test_cli_fake: ok");
	return 0;
}
