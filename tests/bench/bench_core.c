/* bench_core.c - `pmcache-bench core`: what the metadata core costs in DRAM
 * per cache block, and how long a restart takes, at two cache sizes (by
 * default 1 GiB and 8 GiB, file-backed on /dev/shm).
 *
 * Every measurement runs in a fresh child process (fork), so that allocator
 * caches, page tables and libpmem2 state never carry over from one run to
 * the next; the child sends a fixed-size result back over a pipe. The sizes
 * run one after the other, and each file is deleted before the next size
 * starts, so the directory must hold the largest size only. For each size:
 *
 *   fill   create and size the file, format, open, add CORE_VOLS volumes,
 *          write every cache block once through pmc_cache_write (distinct
 *          LBAs, round robin over the volumes), read RssAnon and VmPTE from
 *          /proc/self/status, then die by SIGKILL with the cache open.
 *   crash  reps times: time pmc_pmem_open + pmc_cache_open of the crashed
 *          cache, then time pmc_cache_recount; then invalidate and rewrite
 *          CORE_REWRITE blocks and die by SIGKILL, so that every repetition
 *          opens a full cache left by a process that wrote and died.
 *   close  open and close cleanly once (the close recounts).
 *   clean  reps times: time pmc_pmem_open + pmc_cache_open after a clean
 *          close, then close cleanly again.
 *
 * Each timed child is forked after an idle pause (--settle-ms), so that
 * what the previous child did does not leak into the time (see settle()).
 *
 * dram_bytes_per_block = (RssAnon large - RssAnon small) / (blocks large -
 * blocks small), both read right after the fill with the same buffers,
 * volumes and libraries; it is printed as measured, never clamped. The
 * parent allocates nothing between the forks, so the heap each child
 * inherits is the same for both sizes.
 *
 * writeback_s_<size> (after both sizes, through the engine, see
 * bench_writeback_time in bench_engine.c): a new cache of that size, every
 * block read once from a sparse disk file (all clean), the blocks the
 * rounds will write allocated in that file, then nine rounds of: 64 MiB of
 * 4 KiB blocks scattered over the whole volume written (dirty), and the
 * time pmc_engine_flush_all takes to write them back. writeback_s_
 * <size> is the median round (each round's time is printed);
 * writeback_ratio_<L>_<S> is the large size's median over the small one's:
 * the same dirty data, so a write-back whose cost does not grow with the
 * cache gives about 1.
 *
 * page_table_bytes_per_block is the same difference taken over VmPTE: the
 * kernel's page tables for the 4 KiB-page file mapping once every block has
 * been touched. Not RssAnon and not pmcache's own allocation, but DRAM all
 * the same, so it is printed beside it.
 *
 * The parent owns the file: it creates it (O_EXCL), and deletes it after
 * each size, on error, and on SIGINT/SIGTERM/SIGHUP (killing the running
 * child first). Single-threaded.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/magic.h>
#include <mntent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cache.h"
#include "pmem.h"

#define CORE_VOLS 4u	 /* volumes the fill spreads its writes over */
#define CORE_BATCH 64u	 /* blocks per pmc_cache_write call */
#define CORE_REWRITE 64u /* blocks each crash repetition rewrites */
#define CORE_REPS_MAX 99u
#define CORE_SLACK (64ull << 20) /* bytes asked of the directory beyond the file */

struct core_opts {
	const char *dir;
	uint64_t size[2]; /* bytes: small, large */
	unsigned reps;
	unsigned settle_ms; /* idle pause before each timed child */
	uint32_t block_size;
};

/* what a child hands back; fixed size, written once to the pipe */
struct core_result {
	int rc; /* 0 or -errno; msg says what failed */
	char msg[PMC_ERR_MSG_MAX + 64];
	uint64_t nr_blocks;
	uint64_t nr_dirty;  /* after the fill, or after the recount */
	long anon_open_kib; /* RssAnon after open, before the fill */
	long anon_fill_kib; /* RssAnon after the fill */
	long pte_fill_kib;  /* VmPTE after the fill */
	double fill_s;
	double open_ms;	     /* pmc_pmem_open + pmc_cache_open */
	double pmem_open_ms; /* the pmc_pmem_open part of open_ms */
	double recount_ms;   /* pmc_cache_recount */
};

/* what the parent knows of one size */
struct core_size {
	uint64_t bytes;
	char tag[32]; /* "8g" */
	struct core_result fill;
	double crash_ms[CORE_REPS_MAX], recount_ms[CORE_REPS_MAX], clean_ms[CORE_REPS_MAX];
	/* the pmc_pmem_open and pmc_cache_open parts of crash_ms and clean_ms */
	double crash_pmem_ms[CORE_REPS_MAX], crash_cache_ms[CORE_REPS_MAX];
	double clean_pmem_ms[CORE_REPS_MAX], clean_cache_ms[CORE_REPS_MAX];
	double crash_med, recount_med, clean_med;
	double wb_s; /* write-back of 64 MiB of scattered dirty blocks */
	double touch_s; /* the machine reference of its rounds (median) */
};

/* the file and child of the running size, for the signal handler */
static char g_path[PATH_MAX];
static volatile sig_atomic_t g_have_file;
static volatile pid_t g_child;

static void on_signal(int sig)
{
	pid_t pid = g_child;

	if (pid > 0)
		kill(pid, SIGKILL);
	if (g_have_file)
		unlink(g_path);
	_exit(128 + sig);
}

static const int core_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void set_signals(void (*handler)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(core_signals) / sizeof(core_signals[0]); i++)
		sigaction(core_signals[i], &sa, NULL);
}

/* record a failure in r; returns -code */
static int fail(struct core_result *r, int code, const char *what, const struct pmc_err *err)
{
	r->rc = -code;
	snprintf(r->msg, sizeof(r->msg), "%s: %s", what,
		 err && err->msg[0] ? err->msg : strerror(code));
	return r->rc;
}

static double ms_between(uint64_t t0, uint64_t t1)
{
	return (double)(t1 - t0) / 1e6;
}

/* the fill child: see the design comment; the caller then dies by SIGKILL */
static int child_fill(const struct core_opts *o, uint64_t size, struct core_result *r)
{
	struct pmc_format_opts fo = {.block_size = o->block_size};
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	uint32_t vol[CORE_VOLS];
	uint64_t per[CORE_VOLS], done = 0, t0;
	size_t bs = o->block_size;
	char *buf;
	int rc;

	/* the same buffer in both sizes' children, allocated before the open */
	buf = malloc(CORE_BATCH * bs);
	if (!buf)
		return fail(r, ENOMEM, "fill buffer", NULL);
	memset(buf, 0xa5, CORE_BATCH * bs);

	rc = bench_pmem_open(g_path, size, &pm, &err);
	if (rc)
		return fail(r, -rc, "pmc_pmem_open", &err);
	rc = pmc_cache_format(pm, &fo, &err);
	if (rc)
		return fail(r, -rc, "pmc_cache_format", &err);
	rc = pmc_cache_open(pm, 0, &c, &err);
	if (rc)
		return fail(r, -rc, "pmc_cache_open", &err);
	pmc_cache_get_info(c, &info);
	r->nr_blocks = info.nr_blocks;
	for (unsigned v = 0; v < CORE_VOLS; v++) {
		char name[32], disk[32];

		per[v] = info.nr_blocks / CORE_VOLS + (v < info.nr_blocks % CORE_VOLS);
		snprintf(name, sizeof(name), "bench%u", v);
		snprintf(disk, sizeof(disk), "bench-disk%u", v);
		rc = pmc_cache_volume_add(c, name, disk, per[v] * bs, &vol[v], &err);
		if (rc)
			return fail(r, -rc, "pmc_cache_volume_add", &err);
	}
	r->anon_open_kib = bench_status_kib("RssAnon");

	t0 = bench_now_ns();
	for (uint64_t lba = 0; done < info.nr_blocks; lba += CORE_BATCH) {
		for (unsigned v = 0; v < CORE_VOLS; v++) {
			uint32_t n;

			if (lba >= per[v])
				continue;
			n = per[v] - lba < CORE_BATCH ? (uint32_t)(per[v] - lba) : CORE_BATCH;
			for (uint32_t i = 0; i < n; i++) {
				uint64_t tag[2] = {vol[v], lba + i};

				memcpy(buf + i * bs, tag, sizeof(tag));
			}
			rc = pmc_cache_write(c, vol[v], lba, n, buf, &err);
			if (rc)
				return fail(r, -rc, "pmc_cache_write (fill)", &err);
			done += n;
		}
	}
	r->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	r->anon_fill_kib = bench_status_kib("RssAnon");
	r->pte_fill_kib = bench_status_kib("VmPTE");

	pmc_cache_get_info(c, &info);
	r->nr_dirty = info.nr_dirty;
	if (!info.counts_valid || info.nr_dirty != info.nr_blocks) {
		r->rc = -EIO;
		snprintf(r->msg, sizeof(r->msg),
			 "fill: %llu dirty blocks of %llu (counts_valid %d), expected all",
			 (unsigned long long)info.nr_dirty, (unsigned long long)info.nr_blocks,
			 info.counts_valid);
	}
	/* no close, no abandon: the caller dies by SIGKILL with the cache open */
	return r->rc;
}

/* a crash repetition: time the open and the recount, write, then die */
static int child_crash(const struct core_opts *o, uint64_t size, struct core_result *r)
{
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	uint64_t t0, tm, t1;
	uint32_t vol;
	char *buf;
	int rc;

	t0 = bench_now_ns();
	rc = pmc_pmem_open(g_path, 0, &pm, &err);
	tm = bench_now_ns();
	if (rc == 0)
		rc = pmc_cache_open(pm, 0, &c, &err);
	t1 = bench_now_ns();
	if (rc)
		return fail(r, -rc, "crash restart: open", &err);
	r->open_ms = ms_between(t0, t1);
	r->pmem_open_ms = ms_between(t0, tm);
	pmc_cache_get_info(c, &info);
	if (info.was_clean || info.counts_valid) {
		r->rc = -EPROTO;
		snprintf(r->msg, sizeof(r->msg),
			 "crash restart: the cache reports was_clean %d, counts_valid %d; "
			 "expected a crashed cache (0, 0)",
			 info.was_clean, info.counts_valid);
		return r->rc;
	}

	t0 = bench_now_ns();
	pmc_cache_recount(c);
	t1 = bench_now_ns();
	r->recount_ms = ms_between(t0, t1);
	pmc_cache_get_info(c, &info);
	r->nr_blocks = info.nr_blocks;
	r->nr_dirty = info.nr_dirty;
	if (info.nr_dirty != info.nr_blocks) {
		r->rc = -EIO;
		snprintf(r->msg, sizeof(r->msg),
			 "crash restart: recount found %llu dirty blocks of %llu, expected all",
			 (unsigned long long)info.nr_dirty, (unsigned long long)info.nr_blocks);
		return r->rc;
	}

	/* write before dying, as the filler did (not timed) */
	buf = malloc((size_t)CORE_REWRITE * o->block_size);
	if (!buf)
		return fail(r, ENOMEM, "rewrite buffer", NULL);
	memset(buf, 0x5a, (size_t)CORE_REWRITE * o->block_size);
	if (pmc_cache_volume_find(c, "bench0", &vol))
		return fail(r, ENOENT, "crash restart: volume bench0", NULL);
	rc = pmc_cache_invalidate(c, vol, 0, CORE_REWRITE);
	if (rc == 0)
		rc = pmc_cache_write(c, vol, 0, CORE_REWRITE, buf, &err);
	if (rc)
		return fail(r, -rc, "crash restart: rewrite", &err);
	return 0;
}

/* open and close cleanly once: the close recounts and records clean */
static int child_close(const struct core_opts *o, uint64_t size, struct core_result *r)
{
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	int rc;

	rc = pmc_pmem_open(g_path, 0, &pm, &err);
	if (rc == 0)
		rc = pmc_cache_open(pm, 0, &c, &err);
	if (rc)
		return fail(r, -rc, "clean close: open", &err);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	return 0;
}

/* a clean repetition: time the open after a clean close, close again */
static int child_clean(const struct core_opts *o, uint64_t size, struct core_result *r)
{
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	uint64_t t0, tm, t1;
	int rc;

	t0 = bench_now_ns();
	rc = pmc_pmem_open(g_path, 0, &pm, &err);
	tm = bench_now_ns();
	if (rc == 0)
		rc = pmc_cache_open(pm, 0, &c, &err);
	t1 = bench_now_ns();
	if (rc)
		return fail(r, -rc, "clean restart: open", &err);
	r->open_ms = ms_between(t0, t1);
	r->pmem_open_ms = ms_between(t0, tm);
	pmc_cache_get_info(c, &info);
	r->nr_blocks = info.nr_blocks;
	r->nr_dirty = info.nr_dirty;
	if (!info.was_clean || !info.counts_valid || info.nr_dirty != info.nr_blocks) {
		r->rc = -EPROTO;
		snprintf(r->msg, sizeof(r->msg),
			 "clean restart: was_clean %d, counts_valid %d, %llu dirty of %llu; "
			 "expected 1, 1, all",
			 info.was_clean, info.counts_valid, (unsigned long long)info.nr_dirty,
			 (unsigned long long)info.nr_blocks);
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	return r->rc;
}

static int write_all(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p = (const char *)p + n;
		len -= (size_t)n;
	}
	return 0;
}

static size_t read_all(int fd, void *p, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

typedef int (*child_fn)(const struct core_opts *o, uint64_t size, struct core_result *r);

/*
 * Run fn in a fresh child. With die != 0 the child ends by SIGKILL once it
 * has reported (a real crash, the cache left open); otherwise by _exit(0).
 * 0 with *r filled, or -1 after printing why on stderr.
 */
static int run_child(const char *what, child_fn fn, int die, const struct core_opts *o,
		     uint64_t size, struct core_result *r)
{
	int fds[2], status = 0;
	sigset_t all, old;
	size_t got;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe2(fds, O_CLOEXEC) != 0) {
		fprintf(stderr, "pmcache-bench core: pipe: %s\n", strerror(errno));
		return -1;
	}
	fflush(NULL);
	/* no handler may run between fork and g_child = pid */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "pmcache-bench core: fork: %s\n", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		set_signals(SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(fds[0]);
		fn(o, size, r);
		if (write_all(fds[1], r, sizeof(*r)) != 0)
			_exit(3);
		if (r->rc == 0 && die)
			raise(SIGKILL);
		_exit(r->rc ? 1 : 0);
	}
	g_child = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(fds[1]);
	got = read_all(fds[0], r, sizeof(*r));
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	g_child = 0;
	if (got != sizeof(*r)) {
		fprintf(stderr, "pmcache-bench core: %s: child died before reporting (%s %d)\n",
			what, WIFSIGNALED(status) ? "signal" : "exit status",
			WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		return -1;
	}
	if (r->rc) {
		fprintf(stderr, "pmcache-bench core: %s: %s\n", what, r->msg);
		return -1;
	}
	if (die ? !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		: !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		fprintf(stderr, "pmcache-bench core: %s: child ended unexpectedly (status 0x%x)\n",
			what, status);
		return -1;
	}
	return 0;
}

/* the samples of one figure, as a comment line */
static void print_samples(const char *name, const double *v, unsigned n)
{
	printf("# %s samples:", name);
	for (unsigned i = 0; i < n; i++)
		printf(" %.3f", v[i]);
	printf("\n");
}

/*
 * Sleep before a timed child, so that every restart starts from the same
 * idle machine whatever the previous child did. Back to back, a crash
 * restart that follows a child which has just walked the whole index
 * (recount) and died measured about twice a clean restart at 1 GiB (0.21 vs
 * 0.11 ms, both pmc_pmem_open and pmc_cache_open slower); after a pause
 * both take the same time.
 */
static void settle(const struct core_opts *o)
{
	struct timespec ts = {.tv_sec = o->settle_ms / 1000,
			      .tv_nsec = (long)(o->settle_ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* where a restart's time goes, as a comment line */
static void print_split(const char *name, double *pmem_ms, double *cache_ms, unsigned n)
{
	double p = bench_median(pmem_ms, n), c = bench_median(cache_ms, n);

	printf("# %s medians of its parts: pmc_pmem_open %.3f ms, pmc_cache_open %.3f ms\n", name,
	       p, c);
}

/* every phase of one size; the file exists only inside this function */
static int run_size(const struct core_opts *o, struct core_size *s)
{
	char name[96], what[64];
	struct core_result r;
	int rc = -1, fd;

	/* created empty here, so that it is ours to delete; the fill sizes it */
	snprintf(g_path, sizeof(g_path), "%s/pmcache-bench-%ld-%s.pmem", o->dir, (long)getpid(),
		 s->tag);
	fd = open(g_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "pmcache-bench core: cannot create %s: %s\n", g_path,
			strerror(errno));
		return -1;
	}
	close(fd);
	g_have_file = 1;

	fprintf(stderr, "pmcache-bench core: %s: fill\n", s->tag);
	if (run_child("fill", child_fill, 1, o, s->bytes, &s->fill))
		goto out;
	for (unsigned i = 0; i < o->reps; i++) {
		fprintf(stderr, "pmcache-bench core: %s: crash restart %u/%u\n", s->tag, i + 1,
			o->reps);
		snprintf(what, sizeof(what), "crash restart %u", i + 1);
		settle(o);
		if (run_child(what, child_crash, 1, o, s->bytes, &r))
			goto out;
		s->crash_ms[i] = r.open_ms;
		s->crash_pmem_ms[i] = r.pmem_open_ms;
		s->crash_cache_ms[i] = r.open_ms - r.pmem_open_ms;
		s->recount_ms[i] = r.recount_ms;
	}
	if (run_child("clean close", child_close, 0, o, s->bytes, &r))
		goto out;
	for (unsigned i = 0; i < o->reps; i++) {
		fprintf(stderr, "pmcache-bench core: %s: clean restart %u/%u\n", s->tag, i + 1,
			o->reps);
		snprintf(what, sizeof(what), "clean restart %u", i + 1);
		settle(o);
		if (run_child(what, child_clean, 0, o, s->bytes, &r))
			goto out;
		s->clean_ms[i] = r.open_ms;
		s->clean_pmem_ms[i] = r.pmem_open_ms;
		s->clean_cache_ms[i] = r.open_ms - r.pmem_open_ms;
	}
	rc = 0;

	snprintf(name, sizeof(name), "blocks_%s", s->tag);
	bench_figure(name, "blocks", "%llu", (unsigned long long)s->fill.nr_blocks);
	printf("# rss_anon_kib_%s after open, before the fill: %ld KiB\n", s->tag,
	       s->fill.anon_open_kib);
	snprintf(name, sizeof(name), "rss_anon_kib_%s", s->tag);
	bench_figure(name, "KiB", "%ld", s->fill.anon_fill_kib);
	snprintf(name, sizeof(name), "vm_pte_kib_%s", s->tag);
	bench_figure(name, "KiB", "%ld", s->fill.pte_fill_kib);
	snprintf(name, sizeof(name), "fill_s_%s", s->tag);
	bench_figure(name, "s", "%.1f", s->fill.fill_s);

	snprintf(name, sizeof(name), "restart_clean_ms_%s", s->tag);
	print_samples(name, s->clean_ms, o->reps);
	print_split(name, s->clean_pmem_ms, s->clean_cache_ms, o->reps);
	s->clean_med = bench_median(s->clean_ms, o->reps);
	bench_figure(name, "ms", "%.3f", s->clean_med);

	snprintf(name, sizeof(name), "restart_crash_ms_%s", s->tag);
	print_samples(name, s->crash_ms, o->reps);
	print_split(name, s->crash_pmem_ms, s->crash_cache_ms, o->reps);
	s->crash_med = bench_median(s->crash_ms, o->reps);
	bench_figure(name, "ms", "%.3f", s->crash_med);

	snprintf(name, sizeof(name), "recount_ms_%s", s->tag);
	print_samples(name, s->recount_ms, o->reps);
	s->recount_med = bench_median(s->recount_ms, o->reps);
	bench_figure(name, "ms", "%.1f", s->recount_med);
out:
	if (unlink(g_path) != 0 && errno != ENOENT) {
		fprintf(stderr, "pmcache-bench core: cannot remove %s: %s\n", g_path,
			strerror(errno));
		rc = -1;
	}
	g_have_file = 0;
	return rc;
}

/* the directory must hold the largest file, and a tmpfs must fit in RAM */
static int check_space(const struct core_opts *o, int *is_tmpfs)
{
	uint64_t need = o->size[1] + CORE_SLACK, avail;
	struct statvfs sv;
	struct statfs sf;
	long mem_kib;

	if (statvfs(o->dir, &sv) != 0 || statfs(o->dir, &sf) != 0) {
		fprintf(stderr, "pmcache-bench core: %s: %s\n", o->dir, strerror(errno));
		return -1;
	}
	if (access(o->dir, W_OK) != 0) {
		fprintf(stderr, "pmcache-bench core: %s: not writable: %s\n", o->dir,
			strerror(errno));
		return -1;
	}
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (avail < need) {
		fprintf(stderr,
			"pmcache-bench core: %s has %llu MiB free, needs %llu MiB (the largest "
			"cache, %llu MiB, plus %llu MiB); free space or use --dir / --sizes\n",
			o->dir, (unsigned long long)(avail >> 20), (unsigned long long)(need >> 20),
			(unsigned long long)(o->size[1] >> 20),
			(unsigned long long)(CORE_SLACK >> 20));
		return -1;
	}
	*is_tmpfs = sf.f_type == TMPFS_MAGIC;
	mem_kib = bench_meminfo_kib("MemAvailable");
	if (*is_tmpfs && mem_kib >= 0 && (uint64_t)mem_kib << 10 < need) {
		fprintf(stderr,
			"pmcache-bench core: %s is tmpfs and only %ld MiB of RAM is available, "
			"needs %llu MiB\n",
			o->dir, mem_kib >> 10, (unsigned long long)(need >> 20));
		return -1;
	}
	return 0;
}

/*
 * The huge= option of the tmpfs that holds dir ("never" when it has none:
 * the kernel's default for a mount). devdax maps the cache with 2 MiB
 * pages; a tmpfs with 4 KiB pages adds page-table walks that grow with the
 * cache, and so with the 8 GiB case of the write-back figure.
 */
static void tmpfs_huge(const char *dir, char *out, size_t len)
{
	char real[PATH_MAX];
	size_t best = 0;
	struct mntent *m;
	FILE *f;

	snprintf(out, len, "never");
	if (!realpath(dir, real) || !(f = setmntent("/proc/mounts", "r")))
		return;
	while ((m = getmntent(f))) {
		size_t n = strlen(m->mnt_dir);
		const char *h;

		if (n < best || strncmp(real, m->mnt_dir, n) ||
		    (real[n] != '/' && real[n] != '\0' && n > 1))
			continue;
		best = n;
		h = hasmntopt(m, "huge");
		if (h)
			snprintf(out, len, "%.*s", (int)strcspn(h + 5, ","), h + 5);
		else
			snprintf(out, len, "never");
	}
	endmntent(f);
}

static void core_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: pmcache-bench core [--dir DIR] [--sizes SMALL,LARGE] [--reps N]\n"
	    "                          [--block-size BYTES] [--settle-ms MS] [--writeback-only]\n"
	    "  --dir DIR          where the pmem files go (default /dev/shm); must hold LARGE.\n"
	    "                     A tmpfs mounted with huge=always maps them with 2 MiB\n"
	    "                     pages, as devdax does\n"
	    "  --sizes S,L        the two cache sizes, suffix k/m/g (default 1g,8g)\n"
	    "  --reps N           repetitions of each restart, median printed (default 7)\n"
	    "  --block-size B     cache block size in bytes (default 4096)\n"
	    "  --settle-ms MS     idle pause before each timed restart (default 100)\n"
	    "  --writeback-only   only the write-back figures (writeback_s_*, "
	    "writeback_ratio_*)\n");
}

int bench_core(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"dir", required_argument, NULL, 'd'},
		{"sizes", required_argument, NULL, 's'},
		{"reps", required_argument, NULL, 'r'},
		{"block-size", required_argument, NULL, 'b'},
		{"settle-ms", required_argument, NULL, 'p'},
		{"writeback-only", no_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	/* static: large, and allocated before any child is forked */
	static struct core_size sz[2];
	struct core_opts o = {
		.dir = "/dev/shm",
		.size = {1ull << 30, 8ull << 30},
		.reps = 7,
		.settle_ms = 100,
		.block_size = PMC_BLOCK_SIZE_DEFAULT,
	};
	char name[96], *comma;
	uint64_t v;
	double blocks_diff;
	int opt, is_tmpfs = 0, wb_only = 0;
	char huge[32];

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			o.dir = optarg;
			break;
		case 's':
			comma = strchr(optarg, ',');
			if (!comma) {
				fprintf(stderr, "pmcache-bench core: --sizes wants SMALL,LARGE\n");
				return 2;
			}
			*comma = '\0';
			if (bench_parse_size(optarg, &o.size[0]) ||
			    bench_parse_size(comma + 1, &o.size[1]) || o.size[0] >= o.size[1]) {
				fprintf(stderr, "pmcache-bench core: --sizes wants SMALL,LARGE with "
						"SMALL < LARGE, such as 1g,8g\n");
				return 2;
			}
			break;
		case 'r':
			o.reps = (unsigned)strtoul(optarg, NULL, 10);
			if (o.reps < 1 || o.reps > CORE_REPS_MAX) {
				fprintf(stderr, "pmcache-bench core: --reps wants 1..%u\n",
					CORE_REPS_MAX);
				return 2;
			}
			break;
		case 'b':
			if (bench_parse_size(optarg, &v) || v > UINT32_MAX) {
				fprintf(stderr, "pmcache-bench core: bad --block-size '%s'\n",
					optarg);
				return 2;
			}
			o.block_size = (uint32_t)v;
			break;
		case 'p':
			o.settle_ms = (unsigned)strtoul(optarg, NULL, 10);
			if (o.settle_ms > 10000) {
				fprintf(stderr, "pmcache-bench core: --settle-ms wants 0..10000\n");
				return 2;
			}
			break;
		case 'w':
			wb_only = 1;
			break;
		case 'h':
			core_usage(stdout);
			return 0;
		default:
			core_usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		core_usage(stderr);
		return 2;
	}
	for (int i = 0; i < 2; i++) {
		if (o.size[i] % 4096) {
			fprintf(stderr, "pmcache-bench core: size %llu is not a multiple of 4 KiB\n",
				(unsigned long long)o.size[i]);
			return 2;
		}
		sz[i].bytes = o.size[i];
		bench_size_tag(o.size[i], sz[i].tag, sizeof(sz[i].tag));
	}
	if (check_space(&o, &is_tmpfs))
		return 1;
	set_signals(on_signal);

	if (is_tmpfs)
		tmpfs_huge(o.dir, huge, sizeof(huge));
	bench_header_start("core");
	printf("block size %u B, %u repetitions, %u volumes, dir %s (%s%s%s), sizes %s and %s, "
	       "settle %u ms\n",
	       o.block_size, o.reps, CORE_VOLS, o.dir, is_tmpfs ? "tmpfs, huge=" : "not tmpfs",
	       is_tmpfs ? huge : "", is_tmpfs && !strcmp(huge, "never") ? ": 4 KiB pages" : "",
	       sz[0].tag, sz[1].tag, o.settle_ms);
	fflush(stdout);

	if (wb_only)
		goto writeback;
	for (int i = 0; i < 2; i++)
		if (run_size(&o, &sz[i]))
			return 1;

	blocks_diff = (double)sz[1].fill.nr_blocks - (double)sz[0].fill.nr_blocks;
	bench_figure("repetitions", "runs", "%u", o.reps);
	bench_figure("dram_bytes_per_block", "B/block", "%.1f",
		     (double)(sz[1].fill.anon_fill_kib - sz[0].fill.anon_fill_kib) * 1024 /
			     blocks_diff);
	/* kernel page tables of the 4 KiB-page file mapping: not RssAnon */
	bench_figure("page_table_bytes_per_block", "B/block", "%.1f",
		     (double)(sz[1].fill.pte_fill_kib - sz[0].fill.pte_fill_kib) * 1024 /
			     blocks_diff);
	snprintf(name, sizeof(name), "restart_ratio_%s_%s", sz[1].tag, sz[0].tag);
	bench_figure(name, "x", "%.2f", sz[1].crash_med / sz[0].crash_med);
	snprintf(name, sizeof(name), "restart_clean_ratio_%s_%s", sz[1].tag, sz[0].tag);
	bench_figure(name, "x", "%.2f", sz[1].clean_med / sz[0].clean_med);

	/* write-back of the same 64 MiB of scattered dirty blocks in a cache
	 * otherwise full of clean ones, at both sizes, through the engine */
writeback:
	for (int i = 0; i < 2; i++) {
		char msg[PMC_ERR_MSG_MAX + 64];
		double round_s[BENCH_WBT_ROUNDS], touch_s[BENCH_WBT_ROUNDS];
		uint64_t blocks, ios;

		fprintf(stderr, "pmcache-bench core: %s: write-back of 64 MiB, %u rounds\n", sz[i].tag,
			BENCH_WBT_ROUNDS);
		if (bench_writeback_time(o.dir, o.size[i], &sz[i].wb_s, round_s, touch_s, &blocks,
					 &ios, msg, sizeof(msg))) {
			fprintf(stderr, "pmcache-bench core: %s: write-back: %s\n", sz[i].tag, msg);
			return 1;
		}
		printf("# writeback_s_%s: %u rounds of %llu blocks in %llu writes on average; "
		       "seconds per round:", sz[i].tag, BENCH_WBT_ROUNDS,
		       (unsigned long long)blocks / BENCH_WBT_ROUNDS,
		       (unsigned long long)ios / BENCH_WBT_ROUNDS);
		for (unsigned k = 0; k < BENCH_WBT_ROUNDS; k++)
			printf(" %.3f", round_s[k]);
		printf(" (the figure: their median)\n");
		printf("# touch_ms_%s: after each round, as many reads of one word from random "
		       "cache blocks, no engine (the machine's part; ms):",
		       sz[i].tag);
		for (unsigned k = 0; k < BENCH_WBT_ROUNDS; k++)
			printf(" %.1f", touch_s[k] * 1e3);
		printf("\n");
		sz[i].touch_s = bench_median(touch_s, BENCH_WBT_ROUNDS);
		snprintf(name, sizeof(name), "writeback_s_%s", sz[i].tag);
		bench_figure(name, "s", "%.3f", sz[i].wb_s);
	}
	/* the reference first: a write-back ratio far above it is the
	 * engine's, one that moves with it is the machine's */
	snprintf(name, sizeof(name), "touch_ratio_%s_%s", sz[1].tag, sz[0].tag);
	bench_figure(name, "x", "%.2f", sz[1].touch_s / sz[0].touch_s);
	snprintf(name, sizeof(name), "writeback_ratio_%s_%s", sz[1].tag, sz[0].tag);
	bench_figure(name, "x", "%.2f", sz[1].wb_s / sz[0].wb_s);
	printf("# goal %s <= 1.5: %s\n", name, sz[1].wb_s / sz[0].wb_s <= 1.5 ? "met" : "NOT met");
	return 0;
}
