/* engine_split.c - reads and writes larger than the disk takes whole go to
 * the kernel in parts (ring.h), through the engine's own paths.
 *
 * The disk is a file; its ops set the limits a block device's queue would
 * have (max_bytes LIM, max_segs SEGS) before each I/O and see every raw
 * completion: each part must stay within the limits, and the data must be
 * what was written. Scenarios:
 *   fill      a 64-block read miss into neighbouring cache blocks: one
 *             fixed span in parts of LIM (when the pmem is registered)
 *   wb        a 64-block dirty run whose cache blocks are not neighbours,
 *             written back as one write of 64 segments: parts of at most
 *             SEGS segments
 *   bypass    a 64-block read that is not admitted: one segment of the
 *             request's buffer, in pieces of LIM
 *   part_err  one part of a split read fails: the read fails with that
 *             error, and the other parts are reaped (the queue goes idle)
 *   short     one part comes back short: the whole read is issued again
 *             and returns the disk's data
 *   pieces    (no limits, a small cache full of dirty blocks and a few
 *             referenced clean ones) a 32-block read miss: its first
 *             fill finds no block, and the rest is not admitted (no look
 *             at the cache per block); its misses reach the disk in one
 *             read
 *   iov       (no limits, write-back merging up to 16 MiB) a dirty run of
 *             more non-neighbouring cache blocks than one writev takes is
 *             written back
 * Usage: engine_split [--seed S]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etest.h"
#include "ring.h"
#include "t.h"

#define VOL_BLOCKS 2048u
#define BIG 64u
#define LIM (8u * BS)	/* max_bytes of the fill and bypass scenarios */
#define SEGS 3u		/* max_segs of the wb scenario */

static unsigned g_parts_seen;	 /* raw completions of reads and writes */
static int g_largest;		 /* the largest of them, bytes */
static unsigned g_fail_at;	 /* fail the raw completion with this number (1-based) */
static unsigned g_short_at;	 /* ... or make it short */
static int g_short_all;		 /* make every part longer than a block short */
static uint32_t g_lim, g_segs;	 /* the limits the disk has */

static void s_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	d->max_bytes = g_lim;
	d->max_segs = g_segs;
	pmc_ring_submit_raw(r, io);
}

static int s_complete(struct pmc_disk *d, struct pmc_io *io, int res)
{
	(void)d;
	if (io->op != PMC_IO_READ && io->op != PMC_IO_WRITE)
		return res;
	g_parts_seen++;
	if (res > g_largest)
		g_largest = res;
	if (g_fail_at && g_parts_seen == g_fail_at)
		return -EIO;
	if (((g_short_at && g_parts_seen == g_short_at) || g_short_all) && res > (int)BS)
		return res / 2 / (int)BS * (int)BS;
	return res;
}

static const struct pmc_disk_ops split_ops = {
	.submit = s_submit,
	.complete = s_complete,
};

static void counters(struct pmc_queue *q, struct pmc_ring_info *info)
{
	pmc_ring_get_info(pmc_queue_ring(q), info);
}

/* blocks [lba, lba + n) of buf are version ver */
static int check_blocks(const char *what, const char *buf, const struct et_vol *v, uint64_t lba,
			unsigned n, uint64_t ver)
{
	char a[32], b[64];

	for (unsigned k = 0; k < n; k++) {
		const char *blk = buf + (size_t)k * BS;

		if (et_version(blk, v->tag, lba + k) != ver) {
			printf("FAIL: %s: block %" PRIu64 " holds %s, not version %s\n", what,
			       lba + k, et_describe(blk, v->tag, lba + k, ver, b, sizeof(b)),
			       et_vstr(ver, a, sizeof(a)));
			return 1;
		}
	}
	return 0;
}

/* what the parts since the counters in a0 did: at most limit bytes each,
 * and at least min_parts of them in split I/O */
static int check_parts(const char *what, struct pmc_queue *q, const struct pmc_ring_info *a0,
		       unsigned limit, uint64_t min_parts)
{
	struct pmc_ring_info a;

	counters(q, &a);
	printf("%s: %" PRIu64 " split I/O in %" PRIu64 " parts, largest completion %d bytes\n",
	       what, a.split_ios - a0->split_ios, a.parts - a0->parts, g_largest);
	if (a.parts - a0->parts < min_parts) {
		printf("FAIL: %s: %" PRIu64 " parts, not the %" PRIu64 " the limits ask for\n", what,
		       a.parts - a0->parts, min_parts);
		return 1;
	}
	if (g_largest > (int)limit) {
		printf("FAIL: %s: a part of %d bytes, over the disk's limit of %u\n", what,
		       g_largest, limit);
		return 1;
	}
	return 0;
}

/* a cache of blocks for volume v (its disk created) over the split disk
 * with no limits, written back only when flushed, write-back merging up
 * to max_io bytes (0: the default); its queue */
static struct pmc_queue *small_rig(struct et *t, struct et_vol *v, const char *tag,
				   uint64_t blocks, uint32_t max_io)
{
	struct pmc_volume_conf vc;
	char name[32];

	snprintf(name, sizeof(name), "pmem-%s", tag);
	et_path(t->pmem_path, sizeof(t->pmem_path), name);
	snprintf(name, sizeof(name), "disk-%s", tag);
	et_path(v->path, sizeof(v->path), name);
	et_disk_create(v->path, v->tag, v->nblocks);
	t->pmem_size = et_pmem_size(blocks);
	pmc_wb_conf_default(&t->wb);
	t->wb.high_pct = 100;
	t->wb.low_pct = 100;
	t->wb.max_age_ms = UINT64_MAX / 2000000;
	if (max_io)
		t->wb.max_io_bytes = max_io;
	et_open(t, 1);
	pmc_volume_conf_default(&vc);
	et_attach(t, v, &vc, &split_ops, NULL);
	g_lim = g_segs = 0;
	return et_queue(t->e, 8);
}

/* pieces: the disk reads of one read miss, over a cache of PC_BLOCKS
 * whose every 16th block is clean and referenced, the rest dirty */
#define PC_BLOCKS 256u
static int pieces(void)
{
	struct et t = {0};
	struct et_vol v = {.name = "pieces", .tag = 13, .nblocks = 4096};
	struct pmc_vol_stats st;
	struct pmc_queue *q;
	char *buf = et_alloc((size_t)32 * BS);
	uint64_t admitted, bypassed;
	unsigned reads;
	int fails = 0;

	q = small_rig(&t, &v, "pieces", PC_BLOCKS, 0); /* the dirty blocks stay */
	/* the cache's blocks in order: a fill every 16th, writes between */
	for (unsigned i = 0; i < t.nr_blocks; i++) {
		if (i % 16 == 0) {
			T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, v.vol, 1024 + i, 1, buf, 0), 0);
		} else {
			et_fill(buf, v.tag, i, 1);
			T_EQ(et_io(t.e, q, NULL, PMC_REQ_WRITE, v.vol, i, 1, buf, 0), 0);
		}
	}
	/* the clean ones read again: referenced */
	for (unsigned i = 0; i < t.nr_blocks; i += 16)
		T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, v.vol, 1024 + i, 1, buf, 0), 0);
	et_stats(t.e, v.vol, &st);
	printf("pieces: %" PRIu64 " cache blocks, %" PRIu64 " dirty\n", t.nr_blocks,
	       st.dirty_blocks);
	g_parts_seen = 0;
	admitted = st.admit_blocks;
	bypassed = st.bypass_blocks;
	T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, v.vol, 2048, 32, buf, 0), 0);
	reads = g_parts_seen;
	fails += check_blocks("pieces", buf, &v, 2048, 32, 0);
	et_stats(t.e, v.vol, &st);
	printf("pieces: a 32-block read miss made %u disk reads (%" PRIu64 " blocks admitted, "
	       "%" PRIu64 " not)\n",
	       reads, st.admit_blocks - admitted, st.bypass_blocks - bypassed);
	if (reads != 1) {
		printf("FAIL: pieces: the misses of one run reached the disk in %u reads\n", reads);
		fails++;
	}
	/* its first fill's look finds no block (every block dirty or just
	 * referenced): the rest of the request is not admitted, rather than
	 * paying the hand's look for each of its blocks */
	if (st.admit_blocks - admitted != 0 || st.bypass_blocks - bypassed != 32) {
		printf("FAIL: pieces: %" PRIu64 " blocks admitted after a fill found none\n",
		       st.admit_blocks - admitted);
		fails++;
	}
	pmc_queue_destroy(q);
	et_close(&t, 0);
	free(buf);
	return fails;
}

/* iov: write-back merging up to 16 MiB (writeback.max_io's most) over a
 * disk without limits (a file): a dirty run of IOV_BLOCKS whose cache
 * blocks are not neighbours is more segments than one writev takes
 * (IOV_MAX, 1024): the merge stops there, or the kernel refused the write
 * (EINVAL) and write-back failed the volume for good */
#define IOV_BLOCKS 1100u
static int iov_limit(void)
{
	struct et t = {0};
	struct et_vol v = {.name = "iov", .tag = 14, .nblocks = 2048};
	struct pmc_vol_stats st;
	struct pmc_queue *q;
	char *buf = et_alloc((size_t)IOV_BLOCKS * BS);
	int fails = 0;

	q = small_rig(&t, &v, "iov", 2048, 16u << 20);
	/* written last to first: the cache blocks run backwards */
	for (unsigned k = IOV_BLOCKS; k-- > 0;) {
		et_fill(buf, v.tag, k, 7);
		T_EQ(et_io(t.e, q, NULL, PMC_REQ_WRITE, v.vol, k, 1, buf, 0), 0);
	}
	et_flush_all(&t, q, NULL);
	et_stats(t.e, v.vol, &st);
	printf("iov: %u dirty blocks written back in %" PRIu64 " writes, %" PRIu64 " errors\n",
	       IOV_BLOCKS, st.wb_ios, st.wb_errors);
	if (st.wb_errors) {
		printf("FAIL: iov: write-back of a %u-block run failed\n", IOV_BLOCKS);
		fails++;
	}
	for (unsigned k = 0; k < IOV_BLOCKS; k++)
		et_disk_read(v.path, k, buf + (size_t)k * BS);
	fails += check_blocks("iov (the disk file)", buf, &v, 0, IOV_BLOCKS, 7);
	pmc_queue_destroy(q);
	et_close(&t, 0);
	free(buf);
	return fails;
}

int main(int argc, char **argv)
{
	struct et t = {0};
	struct et_vol v = {.name = "split", .tag = 11, .nblocks = VOL_BLOCKS};
	struct et_vol pv = {.name = "around", .tag = 12, .nblocks = VOL_BLOCKS};
	struct pmc_volume_conf vc, pvc;
	struct pmc_ring_info a0, a1;
	struct pmc_queue *q;
	char *buf = et_alloc((size_t)BIG * BS), *blk = et_alloc(BS);
	uint64_t seed;
	int argi = 1, fails = 0;

	seed = et_seed_arg(argc, argv, &argi);
	et_path(t.pmem_path, sizeof(t.pmem_path), "pmem");
	et_path(v.path, sizeof(v.path), "disk");
	et_path(pv.path, sizeof(pv.path), "disk2");
	et_disk_create(v.path, v.tag, v.nblocks);
	et_disk_create(pv.path, pv.tag, pv.nblocks);
	t.pmem_size = et_pmem_size(2 * VOL_BLOCKS);
	pmc_wb_conf_default(&t.wb);
	t.wb.high_pct = 100; /* write-back only when flushed */
	t.wb.low_pct = 100;
	t.wb.max_age_ms = UINT64_MAX / 2000000;
	et_open(&t, 1);
	pmc_volume_conf_default(&vc);
	et_attach(&t, &v, &vc, &split_ops, NULL);
	pmc_volume_conf_default(&pvc);
	pvc.mode = PMC_MODE_PASS_THROUGH;
	et_attach(&t, &pv, &pvc, &split_ops, NULL);
	q = et_queue(t.e, 8);

	/* fill: a read miss into neighbouring cache blocks */
	g_lim = LIM;
	counters(q, &a0);
	g_largest = 0;
	T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, v.vol, 0, BIG, buf, 0), 0);
	fails += check_blocks("fill", buf, &v, 0, BIG, 0);
	fails += check_parts("fill", q, &a0, LIM, BIG * BS / LIM);
	counters(q, &a1);
	printf("fill: %" PRIu64 " parts through the fixed buffers (registered: %s)\n",
	       a1.fixed_ios - a0.fixed_ios, a1.fixed ? "yes" : strerror(a1.fixed_err));
	if (a1.fixed && a1.fixed_ios - a0.fixed_ios < BIG * BS / LIM) {
		printf("FAIL: fill: the parts of a fixed span left the registered buffers\n");
		fails++;
	}

	/* wb: 64 dirty blocks written last to first, one at a time: their
	 * cache blocks run backwards, so write-back's one write of the run
	 * has 64 segments */
	for (unsigned k = BIG; k-- > 0;) {
		et_fill(blk, v.tag, 256 + k, 5);
		T_EQ(et_io(t.e, q, NULL, PMC_REQ_WRITE, v.vol, 256 + k, 1, blk, 0), 0);
	}
	g_lim = 0;
	g_segs = SEGS;
	counters(q, &a0);
	g_largest = 0;
	et_flush_all(&t, q, NULL);
	for (unsigned k = 0; k < BIG; k++) {
		et_disk_read(v.path, 256 + k, buf + (size_t)k * BS);
	}
	fails += check_blocks("wb (the disk file)", buf, &v, 256, BIG, 5);
	fails += check_parts("wb", q, &a0, SEGS * BS, (BIG + SEGS - 1) / SEGS);

	/* bypass: a read of a pass-through volume, into the request's buffer */
	g_lim = LIM;
	g_segs = 0;
	counters(q, &a0);
	g_largest = 0;
	T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, pv.vol, 512, BIG, buf, 0), 0);
	fails += check_blocks("bypass", buf, &pv, 512, BIG, 0);
	fails += check_parts("bypass", q, &a0, LIM, BIG * BS / LIM);

	/* part_err: the second part of a split read fails */
	g_parts_seen = 0;
	g_fail_at = 2;
	{
		int rc = et_io(t.e, q, NULL, PMC_REQ_READ, pv.vol, 1024, BIG, buf, 0);

		printf("part_err: the read returned %d (%s) after %u raw completions\n", rc,
		       strerror(-rc), g_parts_seen);
		if (rc != -EIO) {
			printf("FAIL: part_err: a read one of whose parts failed returned %d, "
			       "not -EIO\n", rc);
			fails++;
		}
	}
	g_fail_at = 0;
	et_quiesce(q, NULL);
	if (pmc_ring_busy(pmc_queue_ring(q))) {
		printf("FAIL: part_err: the ring still has I/O after the read failed\n");
		fails++;
	}
	/* the volume took an error: it reads again once the error is cleared */
	pmc_engine_clear_error(t.e, pv.vol);

	/* short: the third part comes back short; the read is issued again */
	counters(q, &a0);
	g_parts_seen = 0;
	g_short_at = 3;
	T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, pv.vol, 1536, BIG, buf, 0), 0);
	g_short_at = 0;
	fails += check_blocks("short", buf, &pv, 1536, BIG, 0);
	counters(q, &a1);
	printf("short: %u raw completions, %" PRIu64 " reissued whole\n", g_parts_seen,
	       a1.short_retries - a0.short_retries);
	if (a1.short_retries - a0.short_retries != 1 || a1.parts - a0.parts != 2 * (BIG * BS / LIM)) {
		printf("FAIL: short: a short part did not have the whole read issued once more\n");
		fails++;
	}

	/* short for ever (a disk shrunk under the volume: the block layer
	 * cuts every part past its end): the read fails with EIO after a few
	 * reissues; it was reissued whole for ever, the request hung */
	g_parts_seen = 0;
	g_short_all = 1;
	{
		int rc = et_io(t.e, q, NULL, PMC_REQ_READ, pv.vol, 1536, BIG, buf, 0);

		printf("short_always: the read returned %d (%s) after %u raw completions\n", rc,
		       strerror(-rc), g_parts_seen);
		if (rc != -EIO || g_parts_seen > 16 * (BIG * BS / LIM)) {
			printf("FAIL: short_always: a read whose parts are always short returned "
			       "%d after %u raw completions, not -EIO within a few reissues\n",
			       rc, g_parts_seen);
			fails++;
		}
	}
	g_short_all = 0;
	et_quiesce(q, NULL);
	pmc_engine_clear_error(t.e, pv.vol);

	/* no limits: one I/O as before */
	g_lim = 0;
	counters(q, &a0);
	T_EQ(et_io(t.e, q, NULL, PMC_REQ_READ, pv.vol, 0, BIG, buf, 0), 0);
	counters(q, &a1);
	if (a1.split_ios != a0.split_ios) {
		printf("FAIL: a disk without limits had a read split\n");
		fails++;
	}

	pmc_queue_destroy(q);
	et_close(&t, 0);
	free(buf);
	free(blk);
	fails += pieces();
	fails += iov_limit();
	if (fails)
		printf("FAIL: %d checks failed\n", fails);
	return et_exit("engine_split", seed) || fails ? 1 : 0;
}
