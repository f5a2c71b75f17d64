/* engine_cost.c - persist barriers, flushes and syscalls per request on the
 * hit paths, counted through the pmem ops table (a test build of the
 * project's pmem API, as the crash simulator counts persist points).
 *
 * One queue, one write-back volume, write-back held off. For each kind of
 * request (4 KiB new write, 4 KiB overwrite, 64-block write, 4 KiB read hit,
 * 64-block read hit) it runs --iters requests one at a time and prints the
 * drains (persist barriers) and flushes per request and the wall time per
 * request; then checks the bounds the engine promises:
 *   - a 4 KiB write costs 2 drains, and a 64-block write about as much
 *     (copy every block, write every descriptor, one drain; link every
 *     block, one drain); keys that share a hash bucket split a batch, which
 *     with this cache's 16 Ki buckets happens to ~1 in 8 requests of 64
 *     blocks: at most 2.5 drains on average;
 *   - a read hit costs no drain at all;
 *   - the data read back is the data last written (each block's version
 *     is tracked; every block is read back at the end);
 *   - the writes of one loop iteration are published together: 32 writes
 *     of 4 KiB submitted before a poll (as the requests of one
 *     io_uring_enter reach the daemon's queue thread) cost 2 drains for
 *     all of them (4 at most over the runs: keys sharing a bucket split a
 *     batch), and none completes before the poll that publishes it; one
 *     block written twice in an iteration holds the later write's data.
 *   - a read miss of 64 blocks into a cache that has not wrapped reaches
 *     the disk through the registered buffers (its blocks are neighbours).
 * With --iters large and under `valgrind --tool=callgrind` the instruction
 * counts per request are stable on a loaded machine; --only KIND (w4k,
 * ow4k, wbig, r4k, rbig) runs the others without the one_request wrapper,
 * so `--toggle-collect=one_request` counts that kind alone.
 * Usage: engine_cost [--iters N] [--only KIND]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etest.h"
#include "t.h"

#define VOL_BLOCKS 8192u
#define BIG 64u

static const struct pmc_pmem_ops *g_orig;
static uint64_t g_drains, g_flushes;

static void c_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	g_orig->copy(pm, dst, src, len);
}

static void c_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	g_orig->fill(pm, dst, c, len);
}

static void c_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	g_orig->store8(pm, dst, val);
}

static void c_flush(struct pmc_pmem *pm, const void *addr, size_t len)
{
	g_flushes++;
	g_orig->flush(pm, addr, len);
}

static void c_drain(struct pmc_pmem *pm)
{
	g_drains++;
	g_orig->drain(pm);
}

static const struct pmc_pmem_ops counting = {
	.copy = c_copy,
	.fill = c_fill,
	.store8 = c_store8,
	.flush = c_flush,
	.drain = c_drain,
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* the request alone, for `valgrind --tool=callgrind --toggle-collect=one_request` */
__attribute__((noinline)) static int one_request(struct et *t, struct pmc_queue *q,
						 struct et_vol *v, enum pmc_req_op op, uint64_t lba,
						 uint32_t nblocks, char *buf)
{
	return et_io(t->e, q, NULL, op, v->vol, lba, nblocks, buf, 0);
}

struct cost {
	double drains, flushes, ns;
};

/* iters requests of nblocks each, at lba = first + i * stride (mod the volume) */
static const char *g_only;
/* the version each block was last written with (0: the disk's) */
static uint64_t g_last[VOL_BLOCKS];

static struct cost run(const char *kind, struct et *t, struct pmc_queue *q, struct et_vol *v,
		       enum pmc_req_op op, uint32_t nblocks, uint64_t first, uint64_t stride, unsigned iters,
		       char *buf, uint64_t ver)
{
	uint64_t d0 = g_drains, f0 = g_flushes, t0 = mono_ns();
	struct cost c;

	for (unsigned i = 0; i < iters; i++) {
		uint64_t lba = (first + (uint64_t)i * stride) % (VOL_BLOCKS - nblocks + 1);
		int rc;

		if (op == PMC_REQ_WRITE)
			for (uint32_t k = 0; k < nblocks; k++)
				et_fill(buf + (size_t)k * BS, v->tag, lba + k, ver);
		if (g_only && strcmp(g_only, kind))
			rc = et_io(t->e, q, NULL, op, v->vol, lba, nblocks, buf, 0);
		else
			rc = one_request(t, q, v, op, lba, nblocks, buf);
		if (rc)
			T_FAIL("request %u (lba %" PRIu64 "): %d", i, lba, rc);
		for (uint32_t k = 0; k < nblocks; k++) {
			uint64_t got;

			if (op == PMC_REQ_WRITE) {
				g_last[lba + k] = ver;
				continue;
			}
			got = et_version(buf + (size_t)k * BS, v->tag, lba + k);
			if (got != g_last[lba + k])
				T_FAIL("read of lba %" PRIu64 ": version %" PRIu64
				       ", the last written was %" PRIu64,
				       lba + k, got, g_last[lba + k]);
		}
	}
	c.drains = (double)(g_drains - d0) / iters;
	c.flushes = (double)(g_flushes - f0) / iters;
	c.ns = (double)(mono_ns() - t0) / iters;
	return c;
}

#define ITER_WRITES 32u

/*
 * ITER_WRITES writes of one block each, at lba[i] with version ver + i,
 * all submitted before any poll, then waited for. Returns the drains they
 * took; fails the test if one completed before a poll or failed.
 */
static uint64_t iteration_writes(struct et *t, struct pmc_queue *q, struct et_vol *v,
				 const uint64_t *lba, uint64_t ver, char *bufs)
{
	struct et_req r[ITER_WRITES];
	uint64_t d0 = g_drains;

	for (unsigned i = 0; i < ITER_WRITES; i++) {
		et_fill(bufs + (size_t)i * BS, v->tag, lba[i], ver + i);
		et_submit(q, &r[i], PMC_REQ_WRITE, v->vol, lba[i], 1, bufs + (size_t)i * BS, 0);
	}
	for (unsigned i = 0; i < ITER_WRITES; i++)
		if (r[i].done)
			T_FAIL("write %u of an iteration completed before a poll published it", i);
	if (g_drains != d0)
		T_FAIL("writes of an iteration drained %" PRIu64 " times before the poll",
		       g_drains - d0);
	for (unsigned i = 0; i < ITER_WRITES; i++) {
		et_wait(t->e, q, NULL, &r[i].done, 15000, "write of an iteration");
		T_EQ(r[i].res, 0);
		g_last[lba[i]] = ver + i; /* in submission order: the later wins */
	}
	return g_drains - d0;
}

/*
 * A read miss of BIG blocks in a cache that has not wrapped: the blocks
 * it fills are taken one after the other and are neighbours in the pmem,
 * so its disk read goes through the registered buffers in one piece (no
 * page pinning per I/O), though it names one segment per block. Returns
 * the failures.
 */
static int fixed_fill(struct et *t, struct pmc_queue *q, struct et_vol *v, char *buf)
{
	struct pmc_ring_info a, b;
	uint64_t lba = VOL_BLOCKS / 2;

	pmc_ring_get_info(pmc_queue_ring(q), &a);
	if (!a.fixed) {
		printf("read miss of %u blocks: no fixed buffers here (%s), not checked\n", BIG,
		       strerror(a.fixed_err));
		return 0;
	}
	T_EQ(et_io(t->e, q, NULL, PMC_REQ_READ, v->vol, lba, BIG, buf, 0), 0);
	for (unsigned k = 0; k < BIG; k++)
		if (et_version(buf + (size_t)k * BS, v->tag, lba + k) != 0) {
			printf("FAIL: the read miss returned block %" PRIu64 " as version %" PRIu64
			       ", not the disk's 0\n",
			       lba + k, et_version(buf + (size_t)k * BS, v->tag, lba + k));
			return 1;
		}
	pmc_ring_get_info(pmc_queue_ring(q), &b);
	printf("read miss of %u blocks: %" PRIu64 " disk I/O through the fixed buffers\n", BIG,
	       b.fixed_ios - a.fixed_ios);
	if (b.fixed_ios - a.fixed_ios < 1) {
		printf("FAIL: a read miss into %u neighbouring cache blocks pinned its pages "
		       "instead of using the registered buffers\n", BIG);
		return 1;
	}
	return 0;
}

static void show(const char *what, struct cost c)
{
	printf("%-22s %6.2f drains %7.2f flushes %9.0f ns per request\n", what, c.drains, c.flushes,
	       c.ns);
}

int main(int argc, char **argv)
{
	struct et t = {0};
	struct et_vol v = {.name = "cost", .tag = 7, .nblocks = VOL_BLOCKS};
	struct pmc_volume_conf vc;
	struct pmc_queue *q;
	struct cost w4k, ow4k, wbig, r4k, rbig;
	unsigned iters = 256;
	char *buf = et_alloc((size_t)BIG * BS);
	int fails = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			g_only = argv[++i];
	}
	if (iters < 1 || iters > VOL_BLOCKS / BIG)
		iters = VOL_BLOCKS / BIG;
	et_path(t.pmem_path, sizeof(t.pmem_path), "pmem");
	et_path(v.path, sizeof(v.path), "disk");
	et_disk_create(v.path, v.tag, v.nblocks);
	t.pmem_size = et_pmem_size(2 * VOL_BLOCKS);
	pmc_wb_conf_default(&t.wb);
	t.wb.high_pct = 100;
	t.wb.low_pct = 100;
	t.wb.max_age_ms = UINT64_MAX / 2000000;
	et_open(&t, 1);
	g_orig = t.pm->ops;
	t.pm->ops = &counting;
	pmc_volume_conf_default(&vc);
	et_attach(&t, &v, &vc, NULL, NULL);
	q = et_queue(t.e, 4);

	/* one write first: the state file and first-touch costs stay out */
	et_fill(buf, v.tag, VOL_BLOCKS - 1, 1);
	T_EQ(et_io(t.e, q, NULL, PMC_REQ_WRITE, v.vol, VOL_BLOCKS - 1, 1, buf, 0), 0);
	g_last[VOL_BLOCKS - 1] = 1;
	fails += fixed_fill(&t, q, &v, buf);
	w4k = run("w4k", &t, q, &v, PMC_REQ_WRITE, 1, 0, 1, iters, buf, 1);
	ow4k = run("ow4k", &t, q, &v, PMC_REQ_WRITE, 1, 0, 1, iters, buf, 2);
	wbig = run("wbig", &t, q, &v, PMC_REQ_WRITE, BIG, 0, BIG, iters, buf, 3);
	r4k = run("r4k", &t, q, &v, PMC_REQ_READ, 1, 0, 1, iters, buf, 0);
	rbig = run("rbig", &t, q, &v, PMC_REQ_READ, BIG, 0, BIG, iters, buf, 0);
	{
		struct pmc_queue *qi = et_queue(t.e, ITER_WRITES);
		char *bufs = et_alloc((size_t)ITER_WRITES * BS);
		uint64_t lba[ITER_WRITES], most = 0, sum = 0;
		unsigned runs = 16;

		for (unsigned k = 0; k < runs; k++) {
			uint64_t d;

			for (unsigned i = 0; i < ITER_WRITES; i++)
				lba[i] = (k * ITER_WRITES + i) * 7 % VOL_BLOCKS;
			d = iteration_writes(&t, qi, &v, lba, 100 + k * ITER_WRITES, bufs);
			sum += d;
			most = d > most ? d : most;
		}
		printf("%-22s %6.2f drains (at most %" PRIu64 ") per %u writes\n",
		       "write 4K x32 in one poll", (double)sum / runs, most, ITER_WRITES);
		if (most > 4) {
			printf("FAIL: the writes of one loop iteration take more than 4 drains\n");
			fails++;
		}
		/* one block twice in an iteration, among others: the later wins */
		for (unsigned i = 0; i < ITER_WRITES; i++)
			lba[i] = 4000 + i;
		lba[ITER_WRITES - 1] = lba[3];
		iteration_writes(&t, qi, &v, lba, 1000, bufs);
		T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, v.vol, lba[3], 1, buf, 0), 0);
		if (et_version(buf, v.tag, lba[3]) != 1000 + ITER_WRITES - 1) {
			printf("FAIL: a block written twice in one iteration holds version %" PRIu64
			       ", not the later write's %u\n",
			       et_version(buf, v.tag, lba[3]), 1000 + ITER_WRITES - 1);
			fails++;
		}
		pmc_queue_destroy(qi);
		free(bufs);
		/* every block read back is the last version written to it */
		for (uint64_t b = 0; b < VOL_BLOCKS; b++) {
			T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, v.vol, b, 1, buf, 0), 0);
			if (et_version(buf, v.tag, b) != g_last[b])
				T_FAIL("block %" PRIu64 " reads version %" PRIu64
				       ", the last written was %" PRIu64,
				       b, et_version(buf, v.tag, b), g_last[b]);
		}
		printf("every block of the volume reads its last written version\n");
	}
	show("write 4K new", w4k);
	show("write 4K overwrite", ow4k);
	show("write 256K", wbig);
	show("read hit 4K", r4k);
	show("read hit 256K", rbig);

	if (w4k.drains != 2 || ow4k.drains != 2 || wbig.drains > 2.5) {
		printf("FAIL: a write request takes more drains than 2 (4K) or 2.5 (256K)\n");
		fails++;
	}
	if (r4k.drains != 0 || rbig.drains != 0) {
		printf("FAIL: a read hit drains\n");
		fails++;
	}
	pmc_queue_destroy(q);
	t.pm->ops = g_orig;
	et_close(&t, 0);
	free(buf);
	if (fails)
		return 1;
	printf("PASS engine_cost\n");
	return 0;
}
