/* bench_engine.c - `pmcache-bench engine`: the DRAM the engine costs per
 * cache block with it running, its pmem-hit speed, the CPU time of a 4 KiB
 * hit, what write-back gains over writing to the disk directly, and a
 * block trace replayed under eviction pressure (--replay, below); and,
 * for `pmcache-bench core`, the write-back time of a fixed amount of dirty
 * data at two cache sizes (bench_writeback_time).
 *
 * Every measurement runs in a fresh child process (fork) that creates the
 * pmem file and sparse backing-disk files in DIR (default /dev/shm),
 * formats and opens the cache and starts the engine with one queue, write-
 * back held off (high watermark 100 %, no age limit) until it is timed.
 *
 * Per size (default 1 GiB and 8 GiB), one volume as large as the cache:
 *   fill   writes every cache block once with 256 KiB write-back requests
 *          (acknowledged from pmem), timed;
 *   read   reads them all back (every block a pmem hit), timed;
 *   copy   the baseline: memcpy of the same bytes from the data area of the
 *          mapping into the same buffer, timed;
 * then reads RssAnon. dram_bytes_per_block_engine = (RssAnon large -
 * RssAnon small) / (blocks large - blocks small), as measured.
 *
 * 4 KiB hits (the small size, a 256 MiB volume written whole first, so
 * every request below is a hit; QD 32):
 *   write_hit_ns / read_hit_ns   CPU time of the process (CLOCK_PROCESS_
 *          CPUTIME_ID) per 4 KiB write / read of a random block through
 *          the queue API, over HIT_REQS requests;
 *   write_hit_clean_ns   the same writes again once write-back made every
 *          block clean (flush_all): an overwrite of clean data retires a
 *          clean block, and the allocator's hand meets clean blocks;
 *   write_hit_vs_memcpy_ratio    the same writes' throughput over that of
 *          libpmem2's memcpy (with persist, pmem2_get_memcpy_fn) of 4 KiB
 *          into the same mapping at the same offsets in the data area, both
 *          taken as CPU time per request (memcpy_persist_ns_4k / write_hit_ns):
 *          one thread either way, and CPU time does not count the other
 *          processes of a shared machine as wall time does.
 *
 * Write-back against direct writes (the [engine] issue's definition): a
 * workload of random 4 KiB writes over a 256 MiB region, four times as
 * many writes as the region has blocks. writeback_vs_randwrite_speedup =
 * the time to issue them directly to a disk file with O_DIRECT at QD 32
 * (io_uring) / the time write-back takes to write back what the cache
 * absorbed of them (pmc_engine_flush_all), the writes having gone through
 * the queue API first with write-back held off.
 *
 * The disk files live in DIR too, unless --disk-dir names another
 * directory: on tmpfs a write costs about its bytes, so write-back, which
 * writes 4x fewer bytes here, can gain at most about 4x; a disk file on a
 * disk's filesystem is what the figure is about (merging and ordering).
 *
 * Persists take libpmem2's granularity of DIR: a file on tmpfs reports
 * page granularity (msync). Run with PMEM2_FORCE_GRANULARITY=CACHE_LINE
 * for the cache-line flushes of real pmem; the header says which one ran.
 * Single-threaded; the files are removed by the child and, on a signal or
 * a failed child, by the parent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libpmem2.h>
#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cache.h"
#include "engine.h"
#include "pmem.h"
#include "wb.h"

#define REQ_BYTES (256u << 10)
#define DEPTH 16u
#define BLK 4096u
#define HIT_DEPTH 32u
#define HIT_REGION (256ull << 20) /* the 4 KiB hit and write-back workloads */
#ifndef HIT_REQS
#define HIT_REQS 200000u
#endif
#define WB_REGION (256ull << 20)
#define WB_WRITES (4 * (WB_REGION / BLK))

struct eng_result {
	int rc;
	char msg[PMC_ERR_MSG_MAX + 64];
	uint64_t nr_blocks;
	long anon_kib;
	double fill_s, read_s, copy_s;
	int fixed;
	/* 4 KiB hits and write-back (run_hits, run_wb) */
	double write_hit_cpu_s, read_hit_cpu_s, write_hit_s, read_hit_s, memcpy4k_s, memcpy4k_cpu_s;
	double write_clean_cpu_s, write_clean_s;
	double direct_s, absorb_s, wb_s;
	uint64_t wb_blocks, wb_ios;
	double wbt_s[BENCH_WBT_ROUNDS]; /* bench_writeback_time: each round's time */
	double touch_s[BENCH_WBT_ROUNDS]; /* and its machine reference (wbt_touch) */
	char gran[16];
	/* the replay (child_replay): [0] the disk file alone, [1] and [2] the
	 * passes through the cache */
	double rp_wall[3], rp_cpu[3], rp_qcpu[3], rp_wbcpu[3];
	uint64_t rp_hit[3], rp_miss[3], rp_bypass[3], rp_wpmem[3], rp_wbblk[3], rp_wbios[3];
	uint64_t rp_evict[3], rp_nospace[3];
};

static char g_pmem[PATH_MAX], g_disk[PATH_MAX];
static const char *g_disk_dir; /* --disk-dir: the disk files there, not in DIR */

static void cleanup(int sig)
{
	unlink(g_pmem);
	unlink(g_disk);
	if (sig)
		_exit(128 + sig);
}

static int efail(struct eng_result *r, int code, const char *what, const struct pmc_err *err)
{
	r->rc = -code;
	snprintf(r->msg, sizeof(r->msg), "%.100s: %.200s", what,
		 err && err->msg[0] ? err->msg : strerror(code));
	return r->rc;
}

static unsigned g_done;
static int g_res;
/* the replay with --ucopy: requests move their data as pmcached's do with
 * ublk user copy, with this file standing for /dev/ublkcN (slot i's data
 * at i * slot bytes); -1: through their buffers */
static int g_ucopy_fd = -1;

/* a block trace (the replay, below): request i reads or writes len bytes
 * at off */
struct trace_req {
	uint64_t off;
	uint32_t len;
	uint32_t write;
};

/* free request slots: a request and its buffer stay in their slot until
 * it completes, and completions come in any order */
static unsigned g_slot[HIT_DEPTH], g_nslot;

static void slots_init(unsigned depth)
{
	for (g_nslot = 0; g_nslot < depth; g_nslot++)
		g_slot[g_nslot] = g_nslot;
}

static void done_cb(struct pmc_req *req, int res)
{
	g_done++;
	if (res && !g_res)
		g_res = res;
	g_slot[g_nslot++] = (unsigned)(uintptr_t)req->priv;
}

/*
 * nreq requests through q, depth (at most HIT_DEPTH) in flight, each with
 * a buffer of slot_bytes in bufs: trace[i] when trace is set; otherwise op
 * of slot_bytes each at offs[i], or one after the other from 0 when offs
 * is NULL
 */
static int run_src(struct pmc_queue *q, uint32_t vol, char *bufs, uint32_t slot_bytes,
		   uint64_t nreq, unsigned depth, enum pmc_req_op op, const uint64_t *offs,
		   const struct trace_req *trace)
{
	struct pmc_req reqs[HIT_DEPTH];
	struct pmc_err err = {0};
	uint64_t issued = 0;

	slots_init(depth);
	g_done = 0;
	g_res = 0;
	while (g_done < nreq && !g_res) {
		while (issued < nreq && g_nslot) {
			unsigned slot = g_slot[--g_nslot];
			struct pmc_req *r = &reqs[slot];

			memset(r, 0, sizeof(*r));
			r->vol = vol;
			if (trace) {
				r->op = trace[issued].write ? PMC_REQ_WRITE : PMC_REQ_READ;
				r->off = trace[issued].off;
				r->len = trace[issued].len;
			} else {
				r->op = op;
				r->off = offs ? offs[issued] : issued * slot_bytes;
				r->len = slot_bytes;
			}
			if (trace && g_ucopy_fd >= 0) {
				r->flags = PMC_REQ_UCOPY;
				r->ucopy_fd = g_ucopy_fd;
				r->ucopy_off = (uint64_t)slot * slot_bytes;
			} else {
				r->buf = bufs + (size_t)slot * slot_bytes;
			}
			r->cb = done_cb;
			r->priv = (void *)(uintptr_t)slot;
			if (pmc_queue_submit(q, r, &err)) {
				g_slot[g_nslot++] = slot;
				g_res = -EIO;
				break;
			}
			issued++;
		}
		pmc_queue_poll(q, 1, 10000000ull);
	}
	/* the requests in flight complete before their slots go away */
	while (pmc_queue_busy(q))
		pmc_queue_poll(q, 1, 10000000ull);
	return g_res;
}

/* nreq requests of op and req_bytes each, depth at a time: at offs[i], or
 * one after the other from 0 when offs is NULL */
static int run_reqs(struct pmc_queue *q, uint32_t vol, enum pmc_req_op op, char *bufs,
		    uint32_t req_bytes, uint64_t nreq, const uint64_t *offs, unsigned depth)
{
	return run_src(q, vol, bufs, req_bytes, nreq, depth, op, offs, NULL);
}

/* the whole volume of bytes in REQ_BYTES requests, DEPTH at a time */
static int run_all(struct pmc_queue *q, uint32_t vol, enum pmc_req_op op, char *bufs,
		   uint64_t bytes)
{
	return run_reqs(q, vol, op, bufs, REQ_BYTES, bytes / REQ_BYTES, NULL, DEPTH);
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return g_rng * 0x2545F4914F6CDD1Dull;
}

/* seconds of CPU time on clock id: the process's, a thread's */
static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* every page of the mapping touched once: the first store to a page of a
 * tmpfs file (or, in a VM, to a page the hypervisor has not mapped yet)
 * costs the kernel a fault, which is not the cache's work */
static void pmem_touch(struct pmc_pmem *pm)
{
	for (uint64_t off = 0; off < pm->size; off += 4096)
		((volatile char *)pm->base)[off] = ((volatile char *)pm->base)[off];
}

/* a cache in g_pmem with the engine, one queue and one volume of vol_bytes
 * (0: as large as the cache) over a new sparse disk file g_disk, write-back
 * held off; or, live, over the disk file g_disk as it is, with the
 * default write-back settings (the replay) */
struct eng_env {
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info ci;
	struct pmc_engine *e;
	struct pmc_disk *d;
	struct pmc_queue *q;
	uint32_t vol;
	uint64_t vol_bytes;
};

static int env_open(struct eng_env *v, uint64_t size, uint64_t vol_bytes, unsigned depth, int live,
		    struct eng_result *r)
{
	struct pmc_err err = {0};
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	int fd, rc;

	memset(v, 0, sizeof(*v));
	rc = bench_pmem_open(g_pmem, size, &v->pm, &err);
	if (!rc)
		rc = pmc_cache_format(v->pm, NULL, &err);
	if (!rc)
		rc = pmc_cache_open(v->pm, 0, &v->c, &err);
	if (rc)
		return efail(r, -rc, "cache", &err);
	pmc_cache_get_info(v->c, &v->ci);
	snprintf(r->gran, sizeof(r->gran), "%s", v->ci.gran);
	r->nr_blocks = v->ci.nr_blocks;
	v->vol_bytes = vol_bytes ? vol_bytes : v->ci.nr_blocks * v->ci.block_size;
	if (!live) {
		fd = open(g_disk, O_CREAT | O_EXCL | O_RDWR, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)v->vol_bytes))
			return efail(r, errno, g_disk, NULL);
		close(fd);
	}
	pmc_wb_conf_default(&wb);
	if (!live) {
		wb.high_pct = 100;
		wb.low_pct = 100;
		wb.max_age_ms = UINT64_MAX / 2000000;
	}
	pmc_volume_conf_default(&vc);
	rc = pmc_engine_create(v->c, &wb, &v->e, &err);
	if (!rc)
		rc = pmc_disk_open(g_disk, 0, &v->d, &err);
	if (!rc)
		rc = pmc_engine_attach(v->e, "bench", v->d, &vc, &v->vol, &err);
	if (!rc)
		rc = pmc_queue_create(v->e, depth, &v->q, &err);
	if (rc)
		return efail(r, -rc, "engine", &err);
	return 0;
}

static void env_close(struct eng_env *v)
{
	pmc_queue_destroy(v->q);
	pmc_engine_destroy(v->e);
	pmc_cache_close(v->c);
	pmc_pmem_close(v->pm);
	cleanup(0);
}

static int child(uint64_t size, struct eng_result *r)
{
	struct eng_env v;
	uint64_t bytes, t0;
	char *bufs = aligned_alloc(4096, (size_t)DEPTH * REQ_BYTES);
	int rc;

	if (!bufs)
		return efail(r, ENOMEM, "buffers", NULL);
	memset(bufs, 0x5a, (size_t)DEPTH * REQ_BYTES);
	rc = env_open(&v, size, 0, DEPTH, 0, r);
	if (rc)
		return rc;
	bytes = v.ci.nr_blocks * v.ci.block_size / REQ_BYTES * REQ_BYTES;
	r->fixed = pmc_queue_fixed_buffers(v.q);

	t0 = bench_now_ns();
	rc = run_all(v.q, v.vol, PMC_REQ_WRITE, bufs, bytes);
	r->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "fill", NULL);
	t0 = bench_now_ns();
	rc = run_all(v.q, v.vol, PMC_REQ_READ, bufs, bytes);
	r->read_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "read", NULL);
	t0 = bench_now_ns();
	for (uint64_t off = 0; off < bytes; off += REQ_BYTES)
		memcpy(bufs + (size_t)(off / REQ_BYTES % DEPTH) * REQ_BYTES,
		       v.pm->base + v.ci.data_off + off, REQ_BYTES);
	r->copy_s = (double)(bench_now_ns() - t0) / 1e9;
	r->anon_kib = bench_status_kib("RssAnon");
	env_close(&v);
	return 0;
}

/* 4 KiB hits: CPU time per request, and write hits against libpmem2's
 * memcpy + persist into the same mapping */
/* HIT_REQS requests of op at offs, QD HIT_DEPTH: CPU and wall seconds */
static int timed_hits(struct eng_env *v, enum pmc_req_op op, char *bufs, const uint64_t *offs,
		      double *cpu, double *wall)
{
	uint64_t t0 = bench_now_ns();
	double c0 = cpu_s();
	int rc = run_reqs(v->q, v->vol, op, bufs, BLK, HIT_REQS, offs, HIT_DEPTH);

	*cpu = cpu_s() - c0;
	*wall = (double)(bench_now_ns() - t0) / 1e9;
	return rc;
}

static int child_hits(uint64_t size, struct eng_result *r)
{
	struct eng_env v;
	uint64_t *offs = malloc(HIT_REQS * sizeof(*offs)), t0;
	char *bufs = aligned_alloc(4096, (size_t)HIT_DEPTH * REQ_BYTES);
	pmem2_memcpy_fn cpy;
	double c0;
	int rc;

	if (!bufs || !offs)
		return efail(r, ENOMEM, "buffers", NULL);
	memset(bufs, 0xa5, (size_t)HIT_DEPTH * REQ_BYTES);
	rc = env_open(&v, size, HIT_REGION, HIT_DEPTH, 0, r);
	if (rc)
		return rc;
	if (v.ci.nr_blocks * v.ci.block_size < 2 * HIT_REGION)
		return efail(r, ENOSPC, "4 KiB hits: the cache must hold twice 256 MiB", NULL);
	for (unsigned i = 0; i < HIT_REQS; i++)
		offs[i] = rnd() % (HIT_REGION / BLK) * BLK;
	/* every page of the mapping written once before anything is timed: a
	 * write hit takes a new block, and the first store to a page of a
	 * tmpfs file (or, in a VM, to a page the hypervisor has not mapped
	 * yet) costs 15-30 us here, which is the kernel's and the hypervisor's,
	 * not the hit path's; the baseline's offsets were touched by the fill */
	pmem_touch(v.pm);
	rc = run_all(v.q, v.vol, PMC_REQ_WRITE, bufs, HIT_REGION);
	if (rc)
		return efail(r, -rc, "4 KiB hits: fill", NULL);

	rc = timed_hits(&v, PMC_REQ_WRITE, bufs, offs, &r->write_hit_cpu_s, &r->write_hit_s);
	if (rc)
		return efail(r, -rc, "4 KiB write hits", NULL);
	/* the same writes again once write-back made every block clean */
	{
		struct pmc_err err = {0};

		rc = pmc_engine_flush_all(v.e, v.q, v.vol, NULL, NULL, &err);
		if (rc)
			return efail(r, -rc, "4 KiB hits: flush", &err);
	}
	rc = timed_hits(&v, PMC_REQ_WRITE, bufs, offs, &r->write_clean_cpu_s, &r->write_clean_s);
	if (rc)
		return efail(r, -rc, "4 KiB write hits on clean blocks", NULL);
	rc = timed_hits(&v, PMC_REQ_READ, bufs, offs, &r->read_hit_cpu_s, &r->read_hit_s);
	if (rc)
		return efail(r, -rc, "4 KiB read hits", NULL);

	/* the baseline last: it overwrites cached data in the data area */
	cpy = pmem2_get_memcpy_fn(v.pm->map);
	t0 = bench_now_ns();
	c0 = cpu_s();
	for (unsigned i = 0; i < HIT_REQS; i++)
		cpy(v.pm->base + v.ci.data_off + offs[i], bufs + (size_t)(i % HIT_DEPTH) * BLK, BLK,
		    0);
	r->memcpy4k_cpu_s = cpu_s() - c0;
	r->memcpy4k_s = (double)(bench_now_ns() - t0) / 1e9;
	env_close(&v);
	free(offs);
	free(bufs);
	return 0;
}

/* the direct writes of the write-back comparison: offs[0..n) to g_disk
 * with O_DIRECT through io_uring at QD 32, timed into r->direct_s */
static int direct_writes(const uint64_t *offs, uint64_t n, char *buf, struct eng_result *r)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	uint64_t issued = 0, done = 0, t0;
	int fd, rc;

	fd = open(g_disk, O_CREAT | O_EXCL | O_RDWR | O_DIRECT, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)WB_REGION))
		return efail(r, errno, g_disk, NULL);
	rc = io_uring_queue_init(HIT_DEPTH, &ring, 0);
	if (rc)
		return efail(r, -rc, "io_uring", NULL);
	t0 = bench_now_ns();
	while (done < n) {
		while (issued < n && issued - done < HIT_DEPTH) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			io_uring_prep_write(sqe, fd, buf, BLK, offs[issued]);
			issued++;
		}
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc < 0)
			return efail(r, -rc, "direct writes", NULL);
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			if (cqe->res != (int)BLK)
				return efail(r, cqe->res < 0 ? -cqe->res : EIO, "direct write", NULL);
			io_uring_cqe_seen(&ring, cqe);
			done++;
		}
	}
	r->direct_s = (double)(bench_now_ns() - t0) / 1e9;
	io_uring_queue_exit(&ring);
	close(fd);
	unlink(g_disk);
	return 0;
}

/* writeback_vs_randwrite_speedup: see the head of the file */
static int child_wb(uint64_t size, struct eng_result *r)
{
	struct pmc_err err = {0};
	struct pmc_vol_stats st;
	struct eng_env v;
	uint64_t *offs = malloc(WB_WRITES * sizeof(*offs)), t0;
	char *bufs = aligned_alloc(4096, (size_t)HIT_DEPTH * BLK);
	int rc;

	if (!bufs || !offs)
		return efail(r, ENOMEM, "buffers", NULL);
	memset(bufs, 0x3c, (size_t)HIT_DEPTH * BLK);
	for (uint64_t i = 0; i < WB_WRITES; i++)
		offs[i] = rnd() % (WB_REGION / BLK) * BLK;
	rc = direct_writes(offs, WB_WRITES, bufs, r);
	if (rc)
		return rc;
	rc = env_open(&v, size, WB_REGION, HIT_DEPTH, 0, r);
	if (rc)
		return rc;
	t0 = bench_now_ns();
	rc = run_reqs(v.q, v.vol, PMC_REQ_WRITE, bufs, BLK, WB_WRITES, offs, HIT_DEPTH);
	r->absorb_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "writes into the cache", NULL);
	t0 = bench_now_ns();
	rc = pmc_engine_flush_all(v.e, v.q, v.vol, NULL, NULL, &err);
	r->wb_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "write-back", &err);
	pmc_engine_stats(v.e, v.vol, &st);
	r->wb_blocks = st.wb_blocks;
	r->wb_ios = st.wb_ios;
	env_close(&v);
	free(offs);
	free(bufs);
	return 0;
}

/*
 * The machine's share of a write-back round: n reads of one word each from
 * random cache blocks of the mapping, no engine involved. Its time grows
 * with the mapping as the write-back's does where page tables and caches
 * stop holding the working set, and it jumps when the machine under the
 * benchmark is slow to give back memory (a guest whose pages the host has
 * taken back), so a round that is slow for that reason shows here too.
 */
static double wbt_touch(struct eng_env *v, uint64_t n)
{
	volatile uint64_t sum = 0;
	uint64_t t0 = bench_now_ns();

	for (uint64_t i = 0; i < n; i++)
		sum +=
		    *(const volatile uint64_t *)pmc_cache_block_data(v->c, rnd() % v->ci.nr_blocks);
	(void)sum;
	return (double)(bench_now_ns() - t0) / 1e9;
}

/* write-back time of WBT_DIRTY bytes of dirty blocks scattered over a cache
 * of size otherwise full of clean blocks (bench_writeback_time) */
#define WBT_DIRTY (64ull << 20)
static int child_wbtime(uint64_t size, struct eng_result *r)
{
	struct pmc_err err = {0};
	struct pmc_vol_stats st;
	struct eng_env v;
	uint64_t n = WBT_DIRTY / BLK, *offs = malloc(n * BENCH_WBT_ROUNDS * sizeof(*offs)), stride,
		 bytes, t0;
	char *bufs = aligned_alloc(4096, (size_t)DEPTH * REQ_BYTES);
	int rc, fd;

	if (!bufs || !offs)
		return efail(r, ENOMEM, "buffers", NULL);
	memset(bufs, 0x77, (size_t)DEPTH * REQ_BYTES);
	rc = env_open(&v, size, 0, HIT_DEPTH, 0, r);
	if (rc)
		return rc;
	/* every block read once: misses, admitted clean */
	bytes = v.vol_bytes / REQ_BYTES * REQ_BYTES;
	t0 = bench_now_ns();
	rc = run_all(v.q, v.vol, PMC_REQ_READ, bufs, bytes);
	r->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "clean fill", NULL);
	stride = v.vol_bytes / BLK / n;
	if (!stride)
		return efail(r, ENOSPC, "the cache is smaller than 64 MiB", NULL);
	/* each round: one block in each of n equal stretches of the volume,
	 * at a random place, other blocks each round */
	for (unsigned k = 0; k < BENCH_WBT_ROUNDS; k++)
		for (uint64_t i = 0; i < n; i++)
			offs[k * n + i] = (i * stride + rnd() % stride) * BLK;
	/* those blocks allocated in the disk file first: in a sparse file
	 * each write-back write allocated a page, and the small volume's
	 * later rounds met blocks that earlier rounds had allocated (9 of its
	 * 16 per stretch) where the large one's (9 of 128) did not, so the
	 * ratio measured the file system's allocation, not the write-back */
	fd = open(g_disk, O_RDWR);
	if (fd < 0)
		return efail(r, errno, "open the disk file", NULL);
	for (uint64_t i = 0; i < n * BENCH_WBT_ROUNDS; i++)
		if (fallocate(fd, 0, (off_t)offs[i], BLK)) {
			rc = errno;
			close(fd);
			return efail(r, rc, "allocate the disk file's blocks", NULL);
		}
	close(fd);
	/* rounds: one write-back alone is at the mercy of the machine (single
	 * samples of 0.1-0.3 s spread 2x from run to run); the figure is the
	 * median round (bench_writeback_time) */
	for (unsigned k = 0; k < BENCH_WBT_ROUNDS; k++) {
		rc = run_reqs(v.q, v.vol, PMC_REQ_WRITE, bufs, BLK, n, offs + k * n, HIT_DEPTH);
		if (rc)
			return efail(r, -rc, "dirty writes", NULL);
		t0 = bench_now_ns();
		rc = pmc_engine_flush_all(v.e, v.q, v.vol, NULL, NULL, &err);
		r->wbt_s[k] = (double)(bench_now_ns() - t0) / 1e9;
		if (rc)
			return efail(r, -rc, "write-back", &err);
		r->touch_s[k] = wbt_touch(&v, n);
	}
	pmc_engine_stats(v.e, v.vol, &st);
	r->wb_blocks = st.wb_blocks;
	r->wb_ios = st.wb_ios;
	env_close(&v);
	free(offs);
	free(bufs);
	return 0;
}

/*
 * The replay (--replay FILE): a block trace as pmc-trace-gen writes it
 * (fio iolog version 2: "NAME read|write OFFSET LENGTH" lines) replayed
 * through the queue API at QD 32, the way the peer benchmark's replay job
 * runs it through ublk in the guest, but on this machine without ublk or
 * an emulator between: what a replay request costs pmcache's engine under
 * eviction pressure (every miss and write allocates, every allocation
 * evicts once the cache is full), in CPU time per request. The disk file
 * (in --disk-dir) is written whole first, so that reads of it read data;
 * the trace is replayed on it directly with O_DIRECT at the same depth
 * (raw_disk: the baseline, once), then twice through a cache of
 * --replay-cache bytes (default 224 MiB, the guest's) with one queue and
 * pmcached's own write-back thread (daemon/wb.c), with the
 * default write-back settings and a write-back volume of the default
 * configuration. CPU times are the process's (both threads) and each
 * thread's. With --ucopy the requests carry no buffer: their data is in a
 * tmpfs file standing for /dev/ublkcN (g_ucopy_fd), as with ublk user
 * copy in pmcached.
 */
static struct trace_req *g_trace;
static uint64_t g_trace_n, g_trace_end;
static uint32_t g_trace_max;

#define TRACE_MAX_LEN (16u << 20)

/* g_trace from an iolog file; 0, or 2 with a one-line error on stderr */
static int trace_load(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512], act[16];
	uint64_t cap = 0, lineno = 0, off;
	uint32_t len;

	if (!f) {
		fprintf(stderr, "pmcache-bench engine: trace %s: %s\n", path, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (lineno == 1) {
			if (strncmp(line, "fio version 2 iolog", 19))
				goto bad;
			continue;
		}
		if (sscanf(line, "%*s %15s", act) != 1)
			goto bad;
		if (strcmp(act, "read") && strcmp(act, "write"))
			continue; /* add, open, close */
		if (sscanf(line, "%*s %*s %" SCNu64 " %" SCNu32, &off, &len) != 2 || !len ||
		    off % BLK || len % BLK || len > TRACE_MAX_LEN)
			goto bad;
		if (g_trace_n == cap) {
			struct trace_req *t;

			cap = cap ? cap * 2 : 4096;
			t = realloc(g_trace, cap * sizeof(*t));
			if (!t) {
				fclose(f);
				fprintf(stderr, "pmcache-bench engine: trace %s: out of memory\n",
					path);
				return 2;
			}
			g_trace = t;
		}
		g_trace[g_trace_n++] = (struct trace_req){off, len, act[0] == 'w'};
		if (off + len > g_trace_end)
			g_trace_end = off + len;
		if (len > g_trace_max)
			g_trace_max = len;
	}
	fclose(f);
	if (!g_trace_n) {
		fprintf(stderr, "pmcache-bench engine: trace %s: no read or write requests\n",
			path);
		return 2;
	}
	/* the volume: whole MiB */
	g_trace_end = (g_trace_end + (1u << 20) - 1) & ~((uint64_t)(1u << 20) - 1);
	return 0;
bad:
	fclose(f);
	fprintf(stderr,
		"pmcache-bench engine: trace %s line %llu: not a fio version 2 iolog line with a "
		"4 KiB-aligned offset and length (at most 16 MiB)\n",
		path, (unsigned long long)lineno);
	return 2;
}

/* the disk file written whole (1 MiB at a time), then the trace replayed
 * on it directly: O_DIRECT, io_uring, QD HIT_DEPTH */
static int raw_replay(char *bufs, struct eng_result *r)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	uint64_t issued = 0, done = 0, t0;
	double c0;
	int fd, rc;

	fd = open(g_disk, O_CREAT | O_EXCL | O_RDWR | O_DIRECT, 0600);
	if (fd < 0)
		return efail(r, errno, g_disk, NULL);
	for (uint64_t off = 0; off < g_trace_end; off += 1u << 20)
		if (pwrite(fd, bufs, 1u << 20, (off_t)off) != 1 << 20) {
			rc = errno ? errno : EIO;
			close(fd);
			return efail(r, rc, "writing the disk file", NULL);
		}
	if (fdatasync(fd)) {
		rc = errno;
		close(fd);
		return efail(r, rc, "syncing the disk file", NULL);
	}
	rc = io_uring_queue_init(HIT_DEPTH, &ring, 0);
	if (rc) {
		close(fd);
		return efail(r, -rc, "io_uring", NULL);
	}
	slots_init(HIT_DEPTH);
	t0 = bench_now_ns();
	c0 = cpu_s();
	while (done < g_trace_n) {
		while (issued < g_trace_n && g_nslot) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			const struct trace_req *t = &g_trace[issued++];
			unsigned s = g_slot[--g_nslot];
			char *b = bufs + (size_t)s * g_trace_max;

			if (t->write)
				io_uring_prep_write(sqe, fd, b, t->len, t->off);
			else
				io_uring_prep_read(sqe, fd, b, t->len, t->off);
			io_uring_sqe_set_data64(sqe, s);
		}
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc < 0)
			break;
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			if (cqe->res < 0)
				rc = cqe->res;
			g_slot[g_nslot++] = (unsigned)cqe->user_data;
			io_uring_cqe_seen(&ring, cqe);
			done++;
		}
		if (rc < 0)
			break;
	}
	r->rp_cpu[0] = cpu_s() - c0;
	r->rp_wall[0] = (double)(bench_now_ns() - t0) / 1e9;
	io_uring_queue_exit(&ring);
	close(fd);
	return rc < 0 ? efail(r, -rc, "the replay on the disk file", NULL) : 0;
}

static int child_replay(uint64_t size, struct eng_result *r)
{
	struct pmc_err err = {0};
	struct pmcd_wb w;
	struct eng_env v;
	clockid_t wbclk;
	char *bufs = aligned_alloc(4096, (size_t)HIT_DEPTH * g_trace_max + (1u << 20));
	int rc;

	if (!bufs)
		return efail(r, ENOMEM, "buffers", NULL);
	memset(bufs, 0x6b, (size_t)HIT_DEPTH * g_trace_max + (1u << 20));
	rc = raw_replay(bufs, r);
	if (rc)
		return rc;
	rc = env_open(&v, size, g_trace_end, HIT_DEPTH, 1, r);
	if (rc)
		return rc;
	/* every page of the mapping touched first, as for the hits: the first
	 * store to a page of a tmpfs file costs the kernel a fault, which
	 * would land in pass 1 only */
	pmem_touch(v.pm);
	/* pmcached's own write-back thread (daemon/wb.c) */
	rc = pmcd_wb_start(&w, v.e, &err);
	if (rc)
		return efail(r, -rc, "the write-back thread", &err);
	pthread_getcpuclockid(w.thread, &wbclk);
	for (int p = 1; p <= 2 && !rc; p++) {
		struct pmc_vol_stats s0, s1, c0, c1;
		double pc = cpu_s(), qc = clock_s(CLOCK_THREAD_CPUTIME_ID), wc = clock_s(wbclk);
		uint64_t t0 = bench_now_ns();

		pmc_engine_stats(v.e, v.vol, &s0);
		pmc_engine_stats(v.e, UINT32_MAX, &c0);
		rc = run_src(v.q, v.vol, bufs, g_trace_max, g_trace_n, HIT_DEPTH, PMC_REQ_READ,
			     NULL, g_trace);
		r->rp_wall[p] = (double)(bench_now_ns() - t0) / 1e9;
		r->rp_cpu[p] = cpu_s() - pc;
		r->rp_qcpu[p] = clock_s(CLOCK_THREAD_CPUTIME_ID) - qc;
		r->rp_wbcpu[p] = clock_s(wbclk) - wc;
		pmc_engine_stats(v.e, v.vol, &s1);
		pmc_engine_stats(v.e, UINT32_MAX, &c1);
		r->rp_hit[p] = s1.read_hit_blocks - s0.read_hit_blocks;
		r->rp_miss[p] = s1.read_miss_blocks - s0.read_miss_blocks;
		r->rp_bypass[p] = s1.bypass_blocks - s0.bypass_blocks;
		r->rp_wpmem[p] = s1.write_pmem_blocks - s0.write_pmem_blocks;
		r->rp_wbblk[p] = s1.wb_blocks - s0.wb_blocks;
		r->rp_wbios[p] = s1.wb_ios - s0.wb_ios;
		r->rp_evict[p] = c1.evictions - c0.evictions;
		r->rp_nospace[p] = s1.nospace_waits - s0.nospace_waits;
	}
	pmcd_wb_stop(&w);
	if (rc)
		return efail(r, -rc, "the replay through the cache", NULL);
	env_close(&v);
	free(bufs);
	return 0;
}

/* the replay's figures (pass 0: the disk file alone) */
static void print_replay(const struct eng_result *x, const char *trace, const char *tag)
{
	printf("# replay of %s: %llu requests over %llu MiB, QD %u; cache of %s, %llu blocks\n",
	       trace, (unsigned long long)g_trace_n, (unsigned long long)(g_trace_end >> 20),
	       HIT_DEPTH, tag, (unsigned long long)x->nr_blocks);
	printf("# raw disk file: %.3f s wall, %.3f s CPU\n", x->rp_wall[0], x->rp_cpu[0]);
	for (int p = 1; p <= 2; p++)
		printf("# pass %d: %.3f s wall; CPU %.3f s (queue thread %.3f, write-back thread "
		       "%.3f); read blocks %llu hit %llu missed %llu bypassed; %llu blocks written "
		       "to pmem, %llu evicted, %llu written back in %llu writes, %llu waits for "
		       "space\n",
		       p, x->rp_wall[p], x->rp_cpu[p], x->rp_qcpu[p], x->rp_wbcpu[p],
		       (unsigned long long)x->rp_hit[p], (unsigned long long)x->rp_miss[p],
		       (unsigned long long)x->rp_bypass[p], (unsigned long long)x->rp_wpmem[p],
		       (unsigned long long)x->rp_evict[p], (unsigned long long)x->rp_wbblk[p],
		       (unsigned long long)x->rp_wbios[p], (unsigned long long)x->rp_nospace[p]);
	bench_figure("replay_host_raw_s", "s", "%.3f", x->rp_wall[0]);
	bench_figure("replay_host_raw_cpu_us_per_req", "us", "%.2f",
		     x->rp_cpu[0] * 1e6 / (double)g_trace_n);
	for (int p = 1; p <= 2; p++) {
		char name[64];
		uint64_t rd = x->rp_hit[p] + x->rp_miss[p];

		snprintf(name, sizeof(name), "replay_host_pass%d_s", p);
		bench_figure(name, "s", "%.3f", x->rp_wall[p]);
		snprintf(name, sizeof(name), "replay_host_pass%d_cpu_us_per_req", p);
		bench_figure(name, "us", "%.2f", x->rp_cpu[p] * 1e6 / (double)g_trace_n);
		snprintf(name, sizeof(name), "replay_host_pass%d_queue_cpu_us_per_req", p);
		bench_figure(name, "us", "%.2f", x->rp_qcpu[p] * 1e6 / (double)g_trace_n);
		snprintf(name, sizeof(name), "replay_host_pass%d_wb_cpu_us_per_req", p);
		bench_figure(name, "us", "%.2f", x->rp_wbcpu[p] * 1e6 / (double)g_trace_n);
		snprintf(name, sizeof(name), "replay_host_pass%d_read_hit_pct", p);
		bench_figure(name, "%", "%.1f", rd ? 100.0 * (double)x->rp_hit[p] / (double)rd : 0);
	}
}

typedef int (*eng_child_fn)(uint64_t size, struct eng_result *r);

static int run_size(const char *dir, uint64_t size, eng_child_fn fn, struct eng_result *out)
{
	int p[2];
	pid_t pid;
	int st;

	snprintf(g_pmem, sizeof(g_pmem), "%s/pmcache-bench-%d-engine.pmem", dir, getpid());
	snprintf(g_disk, sizeof(g_disk), "%s/pmcache-bench-%d-engine.disk",
		 g_disk_dir ? g_disk_dir : dir, getpid());
	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid == 0) {
		struct eng_result r;

		memset(&r, 0, sizeof(r));
		close(p[0]);
		fn(size, &r);
		if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	memset(out, 0, sizeof(*out));
	if (read(p[0], out, sizeof(*out)) != (ssize_t)sizeof(*out))
		out->rc = -EIO, snprintf(out->msg, sizeof(out->msg), "the child died");
	close(p[0]);
	waitpid(pid, &st, 0);
	cleanup(0);
	return out->rc;
}

int bench_writeback_time(const char *dir, uint64_t size, double *secs, double *round_s,
			 double *touch_s, uint64_t *blocks, uint64_t *ios, char *msg,
			 size_t msg_len)
{
	struct eng_result r;

	signal(SIGINT, cleanup);
	signal(SIGTERM, cleanup);
	signal(SIGHUP, cleanup);
	if (run_size(dir, size, child_wbtime, &r)) {
		snprintf(msg, msg_len, "%s", r.msg);
		return r.rc ? r.rc : -EIO;
	}
	memcpy(round_s, r.wbt_s, sizeof(r.wbt_s));
	memcpy(touch_s, r.touch_s, sizeof(r.touch_s));
	*secs = bench_median(r.wbt_s, BENCH_WBT_ROUNDS); /* sorts r's copy */
	*blocks = r.wb_blocks;
	*ios = r.wb_ios;
	return 0;
}

/* the 4 KiB hit figures of h, measured on the cache of size tag */
static void print_hits(const struct eng_result *h, const char *tag)
{
	printf("# hit and write-back runs on the %s cache\n", tag);
	printf("# 4 KiB hits: %u random requests over a 256 MiB volume; CPU %.3f s writes, "
	       "%.3f s reads, %.3f s libpmem2 memcpy+persist; wall %.3f / %.3f / %.3f s\n",
	       HIT_REQS, h->write_hit_cpu_s, h->read_hit_cpu_s, h->memcpy4k_cpu_s, h->write_hit_s,
	       h->read_hit_s, h->memcpy4k_s);
	bench_figure("write_hit_ns", "ns", "%.0f", h->write_hit_cpu_s * 1e9 / HIT_REQS);
	bench_figure("write_hit_clean_ns", "ns", "%.0f", h->write_clean_cpu_s * 1e9 / HIT_REQS);
	bench_figure("read_hit_ns", "ns", "%.0f", h->read_hit_cpu_s * 1e9 / HIT_REQS);
	bench_figure("memcpy_persist_ns_4k", "ns", "%.0f", h->memcpy4k_cpu_s * 1e9 / HIT_REQS);
	bench_figure("write_hit_vs_memcpy_ratio", "x", "%.2f",
		     h->memcpy4k_cpu_s / h->write_hit_cpu_s);
	printf("# goal write_hit_vs_memcpy_ratio >= 0.5: %s\n",
	       h->memcpy4k_cpu_s / h->write_hit_cpu_s >= 0.5 ? "met" : "NOT met");
}

/* the write-back figure of w */
static void print_wb(const struct eng_result *w)
{
	printf("# write-back against direct writes: %llu random 4 KiB writes over 256 MiB; "
	       "direct O_DIRECT QD %u %.3f s; into the cache %.3f s; write-back %.3f s "
	       "(%llu blocks in %llu writes)\n",
	       (unsigned long long)WB_WRITES, HIT_DEPTH, w->direct_s, w->absorb_s, w->wb_s,
	       (unsigned long long)w->wb_blocks, (unsigned long long)w->wb_ios);
	bench_figure("writeback_vs_randwrite_speedup", "x", "%.2f", w->direct_s / w->wb_s);
	printf("# goal writeback_vs_randwrite_speedup >= 3: %s\n",
	       w->direct_s / w->wb_s >= 3 ? "met" : "NOT met");
}

int bench_engine(int argc, char **argv)
{
	const char *dir = "/dev/shm";
	uint64_t size[2] = {1ull << 30, 8ull << 30};
	struct eng_result r[2], h, w;
	char tag[2][32];
	const char *trace = NULL;
	uint64_t rcache = 224ull << 20;
	int opt, hs, hits_only = 0, wb_only = 0, ucopy = 0;

	static const struct option lopts[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"sizes", required_argument, NULL, 's'},
	    {"hits-only", no_argument, NULL, 'H'},
	    {"writeback-only", no_argument, NULL, 'W'},
	    {"disk-dir", required_argument, NULL, 'D'},
	    {"replay", required_argument, NULL, 'R'},
	    {"replay-cache", required_argument, NULL, 'C'},
	    {"ucopy", no_argument, NULL, 'U'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};

	while ((opt = getopt_long(argc, argv, "d:s:HWD:R:C:Uh", lopts, NULL)) != -1) {
		switch (opt) {
		case 'U':
			ucopy = 1;
			break;
		case 'R':
			trace = optarg;
			break;
		case 'C':
			if (bench_parse_size(optarg, &rcache) || rcache < (64ull << 20)) {
				fprintf(stderr,
					"pmcache-bench engine: --replay-cache %s: a size of "
					"at least 64m\n",
					optarg);
				return 2;
			}
			break;
		case 'H':
			hits_only = 1;
			break;
		case 'W':
			wb_only = 1;
			break;
		case 'D':
			g_disk_dir = optarg;
			break;
		case 'd':
			dir = optarg;
			break;
		case 's': {
			char *comma = strchr(optarg, ',');

			if (comma)
				*comma = '\0';
			if (!comma || bench_parse_size(optarg, &size[0]) ||
			    bench_parse_size(comma + 1, &size[1])) {
				fprintf(stderr, "pmcache-bench engine: --sizes SMALL,LARGE\n");
				return 2;
			}
			break;
		}
		default:
			fprintf(
			    stderr,
			    "usage: pmcache-bench engine [-d|--dir DIR] [-s|--sizes SMALL,LARGE] "
			    "[-H|--hits-only] [-W|--writeback-only] [-D|--disk-dir DIR] "
			    "[-R|--replay TRACE [-C|--replay-cache SIZE] [-U|--ucopy]]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (trace) {
		struct eng_result x;
		char rtag[32];

		if (trace_load(trace))
			return 2;
		if (ucopy) {
			char path[64];

			/* in /dev/shm, whatever --dir says: it stands for a char
			 * device, whose copies never wait for a disk */
			snprintf(path, sizeof(path), "/dev/shm/pmcache-bench-%d-ucopy",
				 (int)getpid());
			g_ucopy_fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
			if (g_ucopy_fd < 0 ||
			    ftruncate(g_ucopy_fd, (off_t)HIT_DEPTH * g_trace_max) || unlink(path)) {
				fprintf(stderr, "pmcache-bench engine: --ucopy: %s: %s\n", path,
					strerror(errno));
				return 1;
			}
		}
		if (!g_disk_dir)
			g_disk_dir = "/var/tmp"; /* a disk, not tmpfs: see the replay */
		signal(SIGINT, cleanup);
		signal(SIGTERM, cleanup);
		bench_header_start("engine");
		printf("replay at QD %u, one queue and a write-back thread, data %s; "
		       "PMEM2_FORCE_GRANULARITY=%s; pmem in %s, disk file in %s\n",
		       HIT_DEPTH, ucopy ? "by user copy (a tmpfs file)" : "in buffers",
		       getenv("PMEM2_FORCE_GRANULARITY") ? getenv("PMEM2_FORCE_GRANULARITY")
							 : "(unset)",
		       dir, g_disk_dir);
		fflush(stdout);
		bench_size_tag(rcache, rtag, sizeof(rtag));
		fprintf(stderr, "pmcache-bench engine: replay of %s ...\n", trace);
		if (run_size(dir, rcache, child_replay, &x)) {
			fprintf(stderr, "pmcache-bench engine: replay: %s\n", x.msg);
			return 1;
		}
		print_replay(&x, trace, rtag);
		return 0;
	}
	/* the hit and write-back runs need a cache of twice their 256 MiB
	 * region (and its metadata): the smaller size if it holds that, else
	 * the larger (-s 256m,1g used to fail there after the size runs) */
	hs = size[0] >= 2 * HIT_REGION + (64ull << 20) ? 0 : 1;
	if (size[hs] < 2 * HIT_REGION + (64ull << 20)) {
		fprintf(stderr, "pmcache-bench engine: --sizes: the hit and write-back runs need "
				"a cache of at least %llu MiB\n",
			(unsigned long long)((2 * HIT_REGION + (64ull << 20)) >> 20));
		return 2;
	}
	signal(SIGINT, cleanup);
	signal(SIGTERM, cleanup);
	bench_header_start("engine");
	printf("%u KiB write-back requests, %u in flight, one queue; 4 KiB hits at QD %u; "
	       "PMEM2_FORCE_GRANULARITY=%s; pmem in %s, disk files in %s\n",
	       REQ_BYTES >> 10, DEPTH, HIT_DEPTH,
	       getenv("PMEM2_FORCE_GRANULARITY") ? getenv("PMEM2_FORCE_GRANULARITY") : "(unset)",
	       dir, g_disk_dir ? g_disk_dir : dir);
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		bench_size_tag(size[i], tag[i], sizeof(tag[i]));
		if (hits_only || wb_only)
			continue;
		fprintf(stderr, "pmcache-bench engine: %s ...\n", tag[i]);
		if (run_size(dir, size[i], child, &r[i])) {
			fprintf(stderr, "pmcache-bench engine: %s: %s\n", tag[i], r[i].msg);
			return 1;
		}
	}
	if (wb_only)
		goto wb;
	fprintf(stderr, "pmcache-bench engine: 4 KiB hits (%s cache) ...\n", tag[hs]);
	if (run_size(dir, size[hs], child_hits, &h)) {
		fprintf(stderr, "pmcache-bench engine: 4 KiB hits: %s\n", h.msg);
		return 1;
	}
	if (hits_only) {
		print_hits(&h, tag[hs]);
		return 0;
	}
wb:
	fprintf(stderr, "pmcache-bench engine: write-back against direct writes ...\n");
	if (run_size(dir, size[hs], child_wb, &w)) {
		fprintf(stderr, "pmcache-bench engine: write-back: %s\n", w.msg);
		return 1;
	}
	if (wb_only) {
		print_wb(&w);
		return 0;
	}
	printf("# store granularity of the mapping: %s\n", r[0].gran);
	for (int i = 0; i < 2; i++) {
		char name[128];
		double mib = (double)(r[i].nr_blocks * 4096) / (1 << 20);

		snprintf(name, sizeof(name), "blocks_%s", tag[i]);
		bench_figure(name, "blocks", "%llu", (unsigned long long)r[i].nr_blocks);
		snprintf(name, sizeof(name), "rss_anon_kib_engine_%s", tag[i]);
		bench_figure(name, "KiB", "%ld", r[i].anon_kib);
		snprintf(name, sizeof(name), "write_pmem_mib_s_%s", tag[i]);
		bench_figure(name, "MiB/s", "%.0f", mib / r[i].fill_s);
		snprintf(name, sizeof(name), "read_hit_mib_s_%s", tag[i]);
		bench_figure(name, "MiB/s", "%.0f", mib / r[i].read_s);
		snprintf(name, sizeof(name), "memcpy_baseline_mib_s_%s", tag[i]);
		bench_figure(name, "MiB/s", "%.0f", mib / r[i].copy_s);
		snprintf(name, sizeof(name), "read_hit_vs_memcpy_%s", tag[i]);
		bench_figure(name, "x", "%.2f", r[i].copy_s / r[i].read_s);
	}
	bench_figure("fixed_buffers", "", "%d", r[1].fixed);
	bench_figure("dram_bytes_per_block_engine", "B/block", "%.1f",
		     (double)(r[1].anon_kib - r[0].anon_kib) * 1024.0 /
			     (double)(r[1].nr_blocks - r[0].nr_blocks));
	/* CPU time, not wall time: on a shared machine the wall time of a
	 * CPU-bound loop measures the other processes as much as this one */
	print_hits(&h, tag[hs]);
	print_wb(&w);
	return 0;
}
