/* engine_ucopy.c - requests whose data is in a file, not in a buffer
 * (PMC_REQ_UCOPY: ublk user copy, where the file is /dev/ublkcN). A plain
 * file stands for the char device here: a write's data is placed in it at
 * the request's offset, a read's data must appear there.
 *
 * Checks, on one write-back volume: a write goes into the cache (read back
 * through a buffer it holds every block's new version); a read that hits
 * every block, and one that misses some (the misses admitted and not),
 * put each block's right version at the request's offset of the file,
 * and the blocks that read filled are left pinned by nobody;
 * the same after the volume switched to write-around (the write reaches
 * the disk); the disk reads and writes of the request's DRAM bounce
 * buffer (misses not admitted, write-around) go through io_uring's fixed
 * buffers, the bounce registered (no page pinned per I/O); and a request
 * whose file is shorter than it fails with -EIO and writes nothing past
 * the file's end (a failed write may have written any part before it, as
 * on a disk). Requests in flight together each move their data
 * through a bounce buffer of their own. Last, back in write-back, a write's acknowledgement: the
 * pmem as it is when the request's callback runs (copied then), opened
 * after a crash, holds the write: the copy from the file has landed and
 * the blocks are published before the write completes, whatever way the
 * copy is made (a change that made it asynchronous must keep that).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_internal.h" /* PMC_BATCH_MAX */
#include "etest.h"
#include "t.h"
#include "tcache.h"

#define VOL_BLOCKS 1024u
#define N 16u

static struct et g_t;
static struct et_vol g_v = {.name = "ucopy", .tag = 11, .nblocks = VOL_BLOCKS};
static struct pmc_queue *g_q;
static int g_fd;
static char g_snap[256]; /* where snapshot() copies the pmem */
static int g_snapping;	 /* each completion takes a snapshot */

/* the pmem file as it is now (the mapping is shared: its stores are in it) */
static void snapshot(void)
{
	t_file_copy(g_t.pmem_path, g_snap);
}

static void req_cb(struct pmc_req *req, int res)
{
	struct et_req *r = req->priv;

	if (g_snapping)
		snapshot();
	r->done = 1;
	r->res = res;
}

/* r: a request of n blocks at lba with its data in file fd at offset foff */
static void uprep(struct et_req *r, enum pmc_req_op op, uint64_t lba, uint32_t n, int fd,
		  uint64_t foff)
{
	memset(r, 0, sizeof(*r));
	r->req.op = op;
	r->req.vol = g_v.vol;
	r->req.off = lba * BS;
	r->req.len = (uint64_t)n * BS;
	r->req.flags = PMC_REQ_UCOPY;
	r->req.ucopy_fd = fd;
	r->req.ucopy_off = foff;
	r->req.cb = req_cb;
	r->req.priv = r;
}

/* one request with its data at file offset foff */
static int uio(enum pmc_req_op op, uint64_t lba, uint32_t n, uint64_t foff)
{
	struct et_req r;
	struct pmc_err err = {0};
	int rc;

	uprep(&r, op, lba, n, g_fd, foff);
	rc = pmc_queue_submit(g_q, &r.req, &err);
	if (rc)
		T_FAIL("submit: %d (%s)", rc, err.msg);
	et_wait(g_t.e, g_q, g_q, &r.done, 10000, "user-copy request");
	return r.res;
}

/* k requests of n blocks in flight together: request j on blocks
 * lba + j * n.., its data at file offset foff + j * n blocks; every one
 * must succeed. Each has a context, and a bounce buffer, of its own. */
static void uio_together(enum pmc_req_op op, uint64_t lba, uint32_t n, uint32_t k, uint64_t foff)
{
	struct et_req r[8];
	struct pmc_err err = {0};

	T_TRUE(k <= 8);
	for (uint32_t j = 0; j < k; j++) {
		uprep(&r[j], op, lba + (uint64_t)j * n, n, g_fd, foff + (uint64_t)j * n * BS);
		if (pmc_queue_submit(g_q, &r[j].req, &err))
			T_FAIL("submit %u: %s", j, err.msg);
	}
	for (uint32_t j = 0; j < k; j++) {
		et_wait(g_t.e, g_q, g_q, &r[j].done, 10000, "user-copy requests together");
		T_EQ(r[j].res, 0);
	}
}

static void put(uint64_t foff, uint64_t lba, uint32_t n, uint64_t ver)
{
	char *b = et_alloc((size_t)n * BS);

	for (uint32_t i = 0; i < n; i++)
		et_fill(b + (size_t)i * BS, g_v.tag, lba + i, ver);
	T_EQ(pwrite(g_fd, b, (size_t)n * BS, (off_t)foff), (ssize_t)n * BS);
	free(b);
}

/* the file at foff holds blocks lba.. in version want[i] */
static void expect_file(const char *what, uint64_t foff, uint64_t lba, uint32_t n,
			const uint64_t *want)
{
	char *b = et_alloc((size_t)n * BS), d[96];

	T_EQ(pread(g_fd, b, (size_t)n * BS, (off_t)foff), (ssize_t)n * BS);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t got = et_version(b + (size_t)i * BS, g_v.tag, lba + i);

		if (got != want[i])
			T_FAIL("%s: block %" PRIu64 ": %s, expected version %" PRIu64, what, lba + i,
			       et_describe(b + (size_t)i * BS, g_v.tag, lba + i, want[i], d,
					   sizeof(d)),
			       want[i]);
	}
	free(b);
	printf("ok: %s\n", what);
}

/* the queue ring's I/O through fixed buffers since *before (updated):
 * at least min of them, with a bounce buffer registered, where the kernel
 * has room for one (a sparse buffer table: Linux 5.19) */
static void expect_fixed(const char *what, struct pmc_ring_info *before, uint64_t min)
{
	struct pmc_ring_info now;

	pmc_ring_get_info(pmc_queue_ring(g_q), &now);
	if (!now.dram_slots) {
		printf("%s: no room for DRAM fixed buffers here, not checked\n", what);
	} else if (now.dram_buffers < 1 || now.fixed_ios - before->fixed_ios < min) {
		T_FAIL("%s: %" PRIu64 " I/O through fixed buffers, expected %" PRIu64
		       " (%u bounce buffers registered)",
		       what, now.fixed_ios - before->fixed_ios, min, now.dram_buffers);
	} else {
		printf("ok: %s: %" PRIu64 " I/O through fixed buffers, %u bounce buffers\n", what,
		       now.fixed_ios - before->fixed_ios, now.dram_buffers);
	}
	*before = now;
}

/* read through a plain buffer */
static void expect_cache(const char *what, uint64_t lba, uint32_t n, uint64_t ver)
{
	char *b = et_alloc((size_t)n * BS);

	T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_READ, g_v.vol, lba, n, b, 0), 0);
	for (uint32_t i = 0; i < n; i++)
		T_EQ(et_version(b + (size_t)i * BS, g_v.tag, lba + i), ver);
	free(b);
	printf("ok: %s\n", what);
}

/* every block of [lba, lba + n) cached and pinned by nobody: a read's
 * fills, which go out from pmem, are unpinned once it completed (clean
 * blocks only: write-back may pin dirty ones at any time) */
static void expect_unpinned(const char *what, uint64_t lba, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t blk;

		T_EQ(pmc_cache_lookup_pin(g_t.c, g_v.vol, lba + i, &blk, NULL), 0);
		T_EQ(pmc_cache_pins(g_t.c, blk), 1); /* the lookup's own pin */
		pmc_cache_unpin(g_t.c, blk);
	}
	printf("ok: %s\n", what);
}

/*
 * The writes of one loop iteration are published in batches of at most
 * PMC_BATCH_MAX blocks, and a write whose copy from its file fails is
 * one of the batch's parts too. Three writes in one iteration, of 200,
 * 100 and 30 blocks, the second one's file gone (EBADF): the batch ends
 * with the second one's first 56 blocks, and the third is published
 * once, in the next batch, and reads back as written (a failed part that
 * did not count let the first batch take the third write as well, and
 * the next publish it again: its blocks freed under their live index
 * entries). Then more failing one-block writes in one iteration than a
 * batch has parts: every one fails, none is published, nothing
 * overflows (part[] was sized for the blocks that were copied).
 */
static void publish_batches(void)
{
	static const uint64_t lba[3] = {256, 512, 640};
	static const uint32_t n[3] = {200, 100, 30};
	const int fd[3] = {g_fd, -1, g_fd};
	struct pmc_queue *q = g_q;
	struct pmc_err err = {0};
	struct et_req r[3], *many;
	enum { MANY = PMC_BATCH_MAX + 44 };

	put(48 << 20, lba[0], n[0], 15);
	put(52 << 20, lba[2], n[2], 15);
	for (int j = 0; j < 3; j++) {
		uprep(&r[j], PMC_REQ_WRITE, lba[j], n[j], fd[j], j ? 52 << 20 : 48 << 20);
		if (pmc_queue_submit(q, &r[j].req, &err))
			T_FAIL("submit %d: %s", j, err.msg);
	}
	for (int j = 0; j < 3; j++)
		et_wait(g_t.e, q, q, &r[j].done, 10000, "writes of one iteration");
	T_EQ(r[0].res, 0);
	T_EQ(r[1].res, -EBADF);
	T_EQ(r[2].res, 0);
	expect_cache("first write of a batch with a failed copy", lba[0], n[0], 15);
	expect_cache("write after a failed copy cut short by the batch", lba[2], n[2], 15);
	expect_cache("failed write leaves nothing", lba[1], n[1], 0);
	et_check_cache(&g_t);

	many = calloc(MANY, sizeof(*many));
	T_TRUE(many != NULL);
	q = et_queue(g_t.e, MANY);
	for (int j = 0; j < MANY; j++) {
		uprep(&many[j], PMC_REQ_WRITE, 700 + (uint64_t)j, 1, -1, 0);
		if (pmc_queue_submit(q, &many[j].req, &err))
			T_FAIL("submit %d: %s", j, err.msg);
	}
	for (int j = 0; j < MANY; j++) {
		et_wait(g_t.e, q, q, &many[j].done, 10000, "failing writes of one iteration");
		T_EQ(many[j].res, -EBADF);
	}
	pmc_queue_destroy(q);
	free(many);
	/* in two reads: one request carries at most 1 MiB */
	expect_cache("more failed copies than a batch has parts", 700, MANY / 2, 0);
	expect_cache("... the rest of them", 700 + MANY / 2, MANY - MANY / 2, 0);
	et_check_cache(&g_t);
}

int main(void)
{
	char path[256];
	struct pmc_volume_conf vc;
	struct pmc_vol_stats st0, st1;
	struct pmc_ring_info ri;
	struct pmc_err err;
	uint64_t want[N];

	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	et_path(g_v.path, sizeof(g_v.path), "disk");
	et_path(path, sizeof(path), "ucopy");
	et_disk_create(g_v.path, g_v.tag, g_v.nblocks);
	g_fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	T_TRUE(g_fd >= 0);
	g_t.pmem_size = et_pmem_size(4 * VOL_BLOCKS);
	pmc_wb_conf_default(&g_t.wb);
	g_t.wb.high_pct = 100;
	g_t.wb.low_pct = 100;
	g_t.wb.max_age_ms = UINT64_MAX / 2000000;
	et_open(&g_t, 1);
	pmc_volume_conf_default(&vc);
	et_attach(&g_t, &g_v, &vc, NULL, NULL);
	g_q = et_queue(g_t.e, 4);

	/* a write: from the file straight into the cache */
	put(1 << 20, 0, N, 5);
	et_stats(g_t.e, g_v.vol, &st0);
	T_EQ(uio(PMC_REQ_WRITE, 0, N, 1 << 20), 0);
	et_stats(g_t.e, g_v.vol, &st1);
	T_EQ(st1.write_pmem_blocks - st0.write_pmem_blocks, N);
	expect_cache("write from the file lands in the cache", 0, N, 5);

	/* a read hit on every block: straight from pmem to the file */
	for (uint32_t i = 0; i < N; i++)
		want[i] = 5;
	T_EQ(uio(PMC_REQ_READ, 0, N, 4 << 20), 0);
	expect_file("read hit goes to the file", 4 << 20, 0, N, want);

	/* half hits, half misses (disk version 0): admitted, then bypassed */
	for (uint32_t i = 0; i < N; i++)
		want[i] = i < N / 2 ? 5 : 0;
	T_EQ(uio(PMC_REQ_READ, N / 2, N, 8 << 20), 0);
	expect_file("partial miss goes to the file", 8 << 20, N / 2, N, want);
	expect_unpinned("fills of the partial miss unpinned", N, N / 2);
	vc.seq_cutoff_bytes = 4096; /* any multi-block read now bypasses */
	T_OK(pmc_engine_set_volume_conf(g_t.e, g_v.vol, &vc, &err));
	for (uint32_t i = 0; i < N; i++)
		want[i] = 0;
	pmc_ring_get_info(pmc_queue_ring(g_q), &ri);
	T_EQ(uio(PMC_REQ_READ, 4 * N, N, 12 << 20), 0);
	T_EQ(uio(PMC_REQ_READ, 5 * N, N, 12 << 20), 0);
	expect_file("bypassed misses go to the file", 12 << 20, 5 * N, N, want);
	expect_fixed("bypassed misses read into the bounce buffer", &ri, 2);
	vc.seq_cutoff_bytes = 0;
	T_OK(pmc_engine_set_volume_conf(g_t.e, g_v.vol, &vc, &err));

	/* a request longer than the file's data: -EIO, nothing changes */
	put(16 << 20, 2 * N, 2, 9); /* the file ends inside the request */
	T_EQ(uio(PMC_REQ_WRITE, 2 * N, N, 16 << 20), -EIO);
	expect_cache("short source: nothing past its end written", 2 * N + 2, N - 2, 0);

	/* write-around: the data goes to the disk through a buffer */
	vc.mode = PMC_MODE_WRITE_AROUND;
	T_OK(pmc_engine_set_volume_conf(g_t.e, g_v.vol, &vc, &err));
	et_flush_all(&g_t, g_q, NULL);
	put(20 << 20, 3 * N, N, 7);
	pmc_ring_get_info(pmc_queue_ring(g_q), &ri);
	T_EQ(uio(PMC_REQ_WRITE, 3 * N, N, 20 << 20), 0);
	expect_fixed("write-around from the bounce buffer", &ri, 1);
	{
		char *b = et_alloc(BS);

		for (uint32_t i = 0; i < N; i++) {
			et_disk_read(g_v.path, 3 * N + i, b);
			T_EQ(et_version(b, g_v.tag, 3 * N + i), 7);
		}
		free(b);
		printf("ok: write-around from the file reaches the disk\n");
	}
	for (uint32_t i = 0; i < N; i++)
		want[i] = 7;
	T_EQ(uio(PMC_REQ_READ, 3 * N, N, 24 << 20), 0);
	expect_file("write-around data reads back to the file", 24 << 20, 3 * N, N, want);

	/* four write-arounds in flight together, then four reads that miss
	 * and are not admitted: each moves its own data through its own
	 * bounce buffer (one shared by two would send one request's data as
	 * the other's) */
	put(32 << 20, 8 * N, 4 * N, 13);
	uio_together(PMC_REQ_WRITE, 8 * N, N, 4, 32 << 20);
	{
		char *b = et_alloc(BS);

		for (uint32_t i = 0; i < 4 * N; i++) {
			et_disk_read(g_v.path, 8 * N + i, b);
			if (et_version(b, g_v.tag, 8 * N + i) != 13)
				T_FAIL("write-arounds together: block %u: version %" PRIu64
				       ", expected 13",
				       8 * N + i, et_version(b, g_v.tag, 8 * N + i));
		}
		free(b);
		printf("ok: write-arounds together reach the disk, each its own data\n");
	}
	vc.mode = PMC_MODE_PASS_THROUGH; /* nothing admitted: reads through the bounce */
	T_OK(pmc_engine_set_volume_conf(g_t.e, g_v.vol, &vc, &err));
	uio_together(PMC_REQ_READ, 8 * N, N, 4, 40 << 20);
	for (uint32_t j = 0; j < 4; j++) {
		char what[64];

		for (uint32_t i = 0; i < N; i++)
			want[i] = 13;
		snprintf(what, sizeof(what), "reads together: request %u", j);
		expect_file(what, (40 << 20) + (uint64_t)j * N * BS, 8 * N + j * N, N, want);
	}
	vc.mode = PMC_MODE_WRITE_AROUND;
	T_OK(pmc_engine_set_volume_conf(g_t.e, g_v.vol, &vc, &err));

	/* write-back again: what the pmem holds at the acknowledgement */
	vc.mode = PMC_MODE_WRITE_BACK;
	T_OK(pmc_engine_set_volume_conf(g_t.e, g_v.vol, &vc, &err));
	put(28 << 20, 6 * N, N, 11);
	et_path(g_snap, sizeof(g_snap), "snap");
	g_snapping = 1;
	T_EQ(uio(PMC_REQ_WRITE, 6 * N, N, 28 << 20), 0);
	g_snapping = 0;
	pmc_queue_destroy(g_q);
	et_close(&g_t, 1);
	T_OK(rename(g_snap, g_t.pmem_path));
	et_open(&g_t, 0);
	et_attach(&g_t, &g_v, &vc, NULL, NULL);
	g_q = et_queue(g_t.e, 4);
	expect_cache("a write is in pmem when it is acknowledged", 6 * N, N, 11);

	publish_batches();

	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	close(g_fd);
	printf("PASS engine_ucopy\n");
	return 0;
}
