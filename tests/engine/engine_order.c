/* engine_order.c - flush, FUA and write ordering against a disk with a
 * volatile write cache (lib/ORDERING.md), one scenario per rule.
 *
 * The backing disk is the model of etest.h (et_vdisk): plain writes are
 * durable only after a flush issued once they completed, RWF_DSYNC writes
 * when they complete. Each scenario drives the engine into the window the
 * rule closes (a write or a sync held back by the model), then checks
 * what a power cut at that instant would leave: every write acknowledged
 * before a completed flush, and every FUA write, is there; no CLEAN cached
 * copy differs from what the disk would hold.
 *
 *   flush_gen      a flush completes only after a sync issued after every
 *                  write completed before it (one racing an older sync, two
 *                  concurrent flushes, a re-attached volume, a failed sync)
 *   fill_unsynced  a read miss does not cache data the disk has not made
 *                  durable (a write-around write not yet flushed)
 *   detach_unsynced  ... nor after the volume was detached and attached
 *                  again in the same process (the detach syncs; if that
 *                  sync fails, no fill until the next one succeeds)
 *   stop_unsynced  ... nor after a clean stop whose sync failed (no clean
 *                  shutdown is recorded then)
 *   detach_inflight  a detach waits for the volume's write-back I/O in
 *                  flight before it closes the disk
 *   around_clean   a write-around drops the CLEAN copy before its disk write,
 *                  and a read miss during it caches nothing
 *   around_lost    ... but keeps a LOST one (its EIO) until the new data is
 *                  durable: the write is RWF_DSYNC
 *   through_order  overlapping write-through writes reach the disk in order
 *   through_wb     write-back of a newer copy waits for an older write-through
 *                  disk write of its blocks (a switch to write-back; a held one)
 *   discard_order  a discard lands after a write-back write of its blocks
 *   discard_nodisk ... and waits for it on a disk that cannot discard
 *
 * Usage: engine_order [--only NAME]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "etest.h"
#include "poison.h"
#include "t.h"

#define NB 64		/* volume and cache size in blocks */
#define TAG 7
#define SLOW_NS 200000000ull /* a disk I/O held back this long */

static struct et g_t;
static struct et_vol g_v;
static struct et_vdisk *g_d;
static struct pmc_queue *g_q;
static struct pmc_volume_conf g_vc;
static char *g_buf, *g_img;
static uint64_t g_rng = 1;

static void open_engine(void)
{
	et_open(&g_t, 0);
	et_attach(&g_t, &g_v, &g_vc, &et_vdisk_ops, g_d);
	g_q = et_queue(g_t.e, 16);
}

static void setup(enum pmc_mode mode)
{
	memset(&g_t, 0, sizeof(g_t));
	memset(&g_v, 0, sizeof(g_v));
	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	g_t.pmem_size = et_pmem_size(NB);
	pmc_wb_conf_default(&g_t.wb);
	snprintf(g_v.name, sizeof(g_v.name), "ord");
	et_path(g_v.path, sizeof(g_v.path), "disk");
	g_v.tag = TAG;
	g_v.nblocks = NB;
	et_disk_create(g_v.path, TAG, NB);
	g_d = et_vdisk_new(g_v.path, NB);
	pmc_volume_conf_default(&g_vc);
	g_vc.mode = mode;
	et_open(&g_t, 1);
	et_attach(&g_t, &g_v, &g_vc, &et_vdisk_ops, g_d);
	g_q = et_queue(g_t.e, 16);
}

/* the process dies: the disk keeps its volatile cache */
static void process_crash(void)
{
	pmc_queue_destroy(g_q);
	et_close(&g_t, 1);
}

static void teardown(void)
{
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	et_vdisk_free(g_d);
}

static int write_ver(uint64_t lba, uint64_t ver, unsigned flags)
{
	et_fill(g_buf, TAG, lba, ver);
	return et_io(g_t.e, g_q, NULL, PMC_REQ_WRITE, g_v.vol, lba, 1, g_buf, flags);
}

static void submit_write(struct et_req *r, char *buf, uint64_t lba, uint64_t ver)
{
	et_fill(buf, TAG, lba, ver);
	et_submit(g_q, r, PMC_REQ_WRITE, g_v.vol, lba, 1, buf, 0);
}

static int flush(void)
{
	return et_io(g_t.e, g_q, NULL, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0);
}

static void wait_req(struct et_req *r, const char *what)
{
	et_wait(g_t.e, g_q, NULL, &r->done, 15000, what);
}

/* poll for a while without waiting on anything in particular */
static void poll_ms(unsigned ms)
{
	uint64_t t0 = pmc_mono_ns();

	while (pmc_mono_ns() - t0 < ms * 1000000ull)
		pmc_queue_poll(g_q, 1, 1000000ull);
}

/* block lba of what a power cut now would leave on the disk (how) */
static uint64_t durable_ver(uint64_t lba, enum et_land how)
{
	et_vdisk_crash_image(g_d, g_img, how, &g_rng);
	return et_version(g_img + lba * BS, TAG, lba);
}

static void expect_durable(uint64_t lba, uint64_t want, const char *what)
{
	uint64_t got = durable_ver(lba, ET_LAND_NONE);
	char g[64];

	if (got != want)
		T_FAIL("%s: block %" PRIu64 " after a power cut now would be %s, expected version "
		       "%" PRIu64 " (acknowledged before a completed flush, or FUA)",
		       what, lba, et_vstr(got, g, sizeof(g)), want);
}

/* no CLEAN cached copy differs from what a power cut (how) would leave */
static void expect_clean_agrees(enum et_land how, const char *what)
{
	et_vdisk_crash_image(g_d, g_img, how, &g_rng);
	for (uint64_t lba = 0; lba < NB; lba++) {
		enum pmc_block_state st;
		uint64_t blk, cv, dv;
		char c[64], d[64];

		if (pmc_cache_lookup_pin(g_t.c, g_v.vol, lba, &blk, &st))
			continue;
		cv = et_version(pmc_cache_block_data(g_t.c, blk), TAG, lba);
		pmc_cache_unpin(g_t.c, blk);
		dv = et_version(g_img + lba * BS, TAG, lba);
		if (st == PMC_BLK_CLEAN && cv != dv)
			T_FAIL("%s: block %" PRIu64 " is CLEAN in the cache with %s, but a power cut "
			       "now would leave %s on the disk: it would change value without a "
			       "write",
			       what, lba, et_vstr(cv, c, sizeof(c)), et_vstr(dv, d, sizeof(d)));
	}
}

/* the cache holds no CLEAN copy of lba */
static void expect_no_clean(uint64_t lba, const char *what)
{
	enum pmc_block_state st;
	uint64_t blk;

	if (pmc_cache_lookup_pin(g_t.c, g_v.vol, lba, &blk, &st))
		return;
	pmc_cache_unpin(g_t.c, blk);
	if (st == PMC_BLK_CLEAN)
		T_FAIL("%s: block %" PRIu64 " is cached CLEAN with version %" PRIu64, what, lba,
		       et_version(pmc_cache_block_data(g_t.c, blk), TAG, lba));
}

/* block lba, written with version lba and not known durable: a read
 * miss of it caches no CLEAN copy; the next flush makes it durable */
static void expect_unsynced_miss(uint64_t lba, const char *what, const char *after_flush)
{
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, lba, 1, g_buf, 0), 0);
	T_EQ(et_version(g_buf, TAG, lba), lba);
	expect_no_clean(lba, what);
	expect_clean_agrees(ET_LAND_NONE, what);
	T_EQ(flush(), 0);
	expect_durable(lba, lba, after_flush);
}

static void sc_flush_gen(void)
{
	struct et_req w, f1, f2;
	char *wb = et_alloc(BS);
	struct et_vdisk_stats s0, s1;

	setup(PMC_MODE_WRITE_AROUND);
	/* a write still on its way while an older flush syncs */
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	submit_write(&w, wb, 1, 1);
	et_submit(g_q, &f1, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0);
	wait_req(&f1, "flush 1");
	T_EQ(f1.res, 0);
	wait_req(&w, "write of block 1");
	T_EQ(w.res, 0);
	T_EQ(flush(), 0);
	expect_durable(1, 1, "a flush after a write that completed after an older flush's sync");

	/* two flushes at once: the second must not complete before a sync
	 * of the write acknowledged before it */
	T_EQ(write_ver(2, 2, 0), 0);
	et_vdisk_delay_next(g_d, PMC_IO_FSYNC, SLOW_NS);
	et_submit(g_q, &f1, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0);
	et_submit(g_q, &f2, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0);
	wait_req(&f2, "flush 2");
	T_EQ(f2.res, 0);
	expect_durable(2, 2, "the second of two concurrent flushes, at its completion");
	wait_req(&f1, "flush 1");
	T_EQ(f1.res, 0);

	/* the process dies with a write in the disk's cache; the volume is
	 * attached again: its first flush must sync */
	T_EQ(write_ver(3, 3, 0), 0);
	process_crash();
	open_engine();
	et_vdisk_get_stats(g_d, &s0);
	T_EQ(flush(), 0);
	et_vdisk_get_stats(g_d, &s1);
	if (s1.syncs == s0.syncs)
		T_FAIL("the first flush of a re-attached volume did not sync the disk");
	expect_durable(3, 3, "the first flush after the volume was attached again");

	/* a failed sync: the flush fails, the next one syncs again */
	T_EQ(write_ver(4, 4, 0), 0);
	et_vdisk_fail_next(g_d, PMC_IO_FSYNC, EIO);
	T_EQ(flush(), -EIO);
	pmc_engine_clear_error(g_t.e, g_v.vol);
	et_vdisk_get_stats(g_d, &s0);
	T_EQ(flush(), 0);
	et_vdisk_get_stats(g_d, &s1);
	if (s1.syncs == s0.syncs)
		T_FAIL("a flush after a failed flush did not sync the disk");
	expect_durable(4, 4, "a flush after a failed one");

	/* a write completing while a flush's sync runs is not covered by that
	 * sync: the next flush must sync again (the generation is taken when
	 * the sync is issued, not when it completes) */
	T_EQ(write_ver(6, 6, 0), 0);
	et_vdisk_delay_next(g_d, PMC_IO_FSYNC, 5 * SLOW_NS); /* room for the write below */
	et_submit(g_q, &f1, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0);
	poll_ms(20);
	T_TRUE(!f1.done);
	T_EQ(write_ver(7, 7, 0), 0);
	T_TRUE(!f1.done);
	wait_req(&f1, "flush whose sync was held");
	T_EQ(f1.res, 0);
	expect_durable(6, 6, "a write acknowledged before a completed flush");
	et_vdisk_get_stats(g_d, &s0);
	T_EQ(flush(), 0);
	et_vdisk_get_stats(g_d, &s1);
	if (s1.syncs == s0.syncs)
		T_FAIL("a flush after a write that completed during an older flush's sync did not "
		       "sync the disk");
	expect_durable(7, 7, "a flush after a write that completed during an older sync");

	/* FUA: durable at completion, no flush needed */
	T_EQ(write_ver(5, 5, PMC_REQ_FUA), 0);
	expect_durable(5, 5, "a FUA write-around write");
	free(wb);
	teardown();
	printf("ok: flush_gen\n");
}

static void sc_fill_unsynced(void)
{
	setup(PMC_MODE_WRITE_AROUND);
	T_EQ(write_ver(5, 5, 0), 0);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 5, 1, g_buf, 0), 0);
	T_EQ(et_version(g_buf, TAG, 5), 5);
	expect_no_clean(5, "a read miss of an unflushed write-around write");
	expect_clean_agrees(ET_LAND_NONE, "a read miss of an unflushed write-around write");
	/* after the flush, misses are cached again */
	T_EQ(flush(), 0);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 6, 1, g_buf, 0), 0);
	{
		enum pmc_block_state st;
		uint64_t blk;

		if (pmc_cache_lookup_pin(g_t.c, g_v.vol, 6, &blk, &st))
			T_FAIL("a read miss after a flush was not cached");
		pmc_cache_unpin(g_t.c, blk);
	}
	/* a power cut: the cache must not keep what the disk lost */
	T_EQ(write_ver(7, 7, 0), 0);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 7, 1, g_buf, 0), 0);
	process_crash();
	et_vdisk_power_cut(g_d, ET_LAND_NONE, &g_rng);
	open_engine();
	expect_clean_agrees(ET_LAND_NONE, "after a power cut that lost an unflushed write");
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 7, 1, g_buf, 0), 0);
	et_disk_read(g_v.path, 7, g_img);
	if (memcmp(g_buf, g_img, BS))
		T_FAIL("after a power cut, block 7 reads %" PRIu64 " through the engine but the disk "
		       "holds %" PRIu64,
		       et_version(g_buf, TAG, 7), et_version(g_img, TAG, 7));
	teardown();
	printf("ok: fill_unsynced\n");
}

/*
 * A volume attached after an unclean stop starts unsynced (ORDERING.md):
 * the last process may have acknowledged plain writes that are still only
 * in the disk's volatile cache. So no read miss is cached until a sync,
 * and the first flush syncs even though this process wrote nothing.
 */
static void sc_attach_unsynced(void)
{
	setup(PMC_MODE_WRITE_AROUND);
	T_EQ(write_ver(5, 5, 0), 0); /* acknowledged, never flushed */
	process_crash();
	open_engine();
	/* the first flush of the new process covers the old one's writes */
	expect_unsynced_miss(5, "a read miss after an unclean stop, before any sync",
			     "a flush after an unclean stop");
	teardown();
	/* the same volume not attached by the process after the crash: its
	 * clean stop syncs nothing of it, so it must not record a clean
	 * shutdown (the next attach admitted fills before any sync) */
	setup(PMC_MODE_WRITE_AROUND);
	T_EQ(write_ver(5, 5, 0), 0);
	process_crash();
	et_open(&g_t, 0);
	g_q = et_queue(g_t.e, 16);
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	open_engine();
	expect_unsynced_miss(5, "a read miss after an unclean stop and a run without the volume",
			     "a flush after an unclean stop and a run without the volume");
	teardown();
	printf("ok: attach_unsynced\n");
}

/*
 * A volume detached and attached again in the same process (the daemon's
 * volume-remove and volume-add): the detach syncs the plain writes not yet
 * synced, as a clean stop does, so the next attach may admit fills at
 * once; when that sync fails, the next attach admits none until a sync
 * succeeds. Either way no CLEAN copy may differ from what a power cut
 * would leave.
 */
static void sc_detach_unsynced(void)
{
	struct pmc_err err = {0};
	struct et_vdisk_stats s0, s1;

	setup(PMC_MODE_WRITE_AROUND);
	T_EQ(write_ver(5, 5, 0), 0); /* acknowledged, never flushed */
	et_vdisk_get_stats(g_d, &s0);
	T_OK(pmc_engine_detach(g_t.e, g_v.vol, 0, &err));
	et_vdisk_get_stats(g_d, &s1);
	T_EQ(s1.syncs - s0.syncs, 1);
	expect_durable(5, 5, "a detach");
	et_attach(&g_t, &g_v, &g_vc, &et_vdisk_ops, g_d);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 5, 1, g_buf, 0), 0);
	T_EQ(et_version(g_buf, TAG, 5), 5);
	expect_clean_agrees(ET_LAND_NONE, "a read miss after a detach and an attach");

	/* the detach's sync fails: nothing admitted until a sync succeeds */
	T_EQ(write_ver(6, 6, 0), 0);
	et_vdisk_fail_next(g_d, PMC_IO_FSYNC, EIO);
	T_OK(pmc_engine_detach(g_t.e, g_v.vol, 0, &err));
	et_attach(&g_t, &g_v, &g_vc, &et_vdisk_ops, g_d);
	expect_unsynced_miss(6, "a read miss after a detach whose sync failed",
			     "the first flush after a detach whose sync failed");
	teardown();
	printf("ok: detach_unsynced\n");
}

/*
 * The engine's synchronous syncs (a volume that stops being volatile, a
 * clean shutdown) go through the disk's ops like every other disk I/O, so
 * a disk with a volatile cache sees them: writes acknowledged before are
 * durable after.
 */
static void sc_sync_ops(void)
{
	setup(PMC_MODE_WRITE_AROUND);
	T_EQ(write_ver(8, 8, 0), 0); /* plain: only in the disk's cache */
	pmc_engine_set_volatile(g_t.e, g_v.vol, 0);
	expect_durable(8, 8, "a volume that stopped being volatile");
	pmc_engine_set_volatile(g_t.e, g_v.vol, 1);
	/* that sync failing: a device with no volatile cache may never get
	 * the FLUSH that would report it, so the volume's error does */
	T_EQ(write_ver(7, 7, 0), 0);
	et_vdisk_fail_next(g_d, PMC_IO_FSYNC, EIO);
	pmc_engine_set_volatile(g_t.e, g_v.vol, 0);
	T_EQ(pmc_engine_volume_error(g_t.e, g_v.vol), EIO);
	pmc_engine_clear_error(g_t.e, g_v.vol);
	T_EQ(flush(), -EIO); /* and the next FLUSH, once */
	T_EQ(flush(), 0);
	pmc_engine_set_volatile(g_t.e, g_v.vol, 1);
	T_EQ(write_ver(9, 9, 0), 0);
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0); /* a clean stop */
	expect_durable(9, 9, "a clean stop");
	et_vdisk_free(g_d);
	printf("ok: sync_ops\n");
}

static void sc_around_clean(void)
{
	struct et_req w, r;
	char *wb = et_alloc(BS), *rb = et_alloc(BS);

	setup(PMC_MODE_WRITE_AROUND);
	/* block 6 cached CLEAN (written, flushed, read) */
	T_EQ(write_ver(6, 6, 0), 0);
	T_EQ(flush(), 0);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 6, 1, g_buf, 0), 0);
	{
		enum pmc_block_state st;
		uint64_t blk;

		T_EQ(pmc_cache_lookup_pin(g_t.c, g_v.vol, 6, &blk, &st), 0);
		pmc_cache_unpin(g_t.c, blk);
		T_EQ(st, PMC_BLK_CLEAN);
	}
	/* a write-around of it on its way to the disk */
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	submit_write(&w, wb, 6, 7);
	poll_ms(20);
	T_TRUE(!w.done);
	expect_no_clean(6, "a write-around in flight over a CLEAN block");
	expect_clean_agrees(ET_LAND_ALL, "a write-around in flight over a CLEAN block");
	/* a read miss meanwhile caches nothing */
	et_submit(g_q, &r, PMC_REQ_READ, g_v.vol, 6, 1, rb, 0);
	wait_req(&r, "read during the write-around");
	T_TRUE(!w.done);
	expect_no_clean(6, "a read miss during a write-around");
	expect_clean_agrees(ET_LAND_ALL, "a read miss during a write-around");
	wait_req(&w, "write-around of block 6");
	T_EQ(w.res, 0);
	expect_clean_agrees(ET_LAND_NONE, "after the write-around");

	/* the same with nothing cached: a miss that reads the old data
	 * while the new is on its way must not be cached */
	T_EQ(write_ver(8, 8, 0), 0);
	T_EQ(flush(), 0);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	submit_write(&w, wb, 8, 9);
	poll_ms(20);
	et_submit(g_q, &r, PMC_REQ_READ, g_v.vol, 8, 1, rb, 0);
	wait_req(&r, "read during the write-around");
	T_TRUE(!w.done);
	expect_no_clean(8, "a read miss during a write-around of an uncached block");
	expect_clean_agrees(ET_LAND_ALL, "a read miss during a write-around of an uncached block");
	wait_req(&w, "write-around of block 8");

	/* the same with a FUA write-around: a durable disk write, so no plain
	 * write is in flight and the volume is synced; only the write-around
	 * in flight over the block keeps the miss out of the cache */
	T_EQ(write_ver(10, 10, 0), 0);
	T_EQ(flush(), 0);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	et_fill(wb, TAG, 10, 11);
	et_submit(g_q, &w, PMC_REQ_WRITE, g_v.vol, 10, 1, wb, PMC_REQ_FUA);
	poll_ms(20);
	T_TRUE(!w.done);
	et_submit(g_q, &r, PMC_REQ_READ, g_v.vol, 10, 1, rb, 0);
	wait_req(&r, "read during the FUA write-around");
	T_TRUE(!w.done);
	expect_no_clean(10, "a read miss during a FUA write-around");
	wait_req(&w, "FUA write-around of block 10");
	T_EQ(w.res, 0);
	expect_clean_agrees(ET_LAND_NONE, "after the FUA write-around");
	free(wb);
	free(rb);
	teardown();
	printf("ok: around_clean\n");
}

static void sc_through_order(void)
{
	struct et_req w1, w2;
	char *b1 = et_alloc(BS), *b2 = et_alloc(BS);
	enum pmc_block_state st;
	uint64_t blk, ver;

	setup(PMC_MODE_WRITE_THROUGH);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	submit_write(&w1, b1, 10, 10);
	poll_ms(5);
	submit_write(&w2, b2, 10, 11);
	wait_req(&w1, "write-through 1");
	wait_req(&w2, "write-through 2");
	T_EQ(w1.res, 0);
	T_EQ(w2.res, 0);
	et_quiesce(g_q, NULL);
	et_disk_read(g_v.path, 10, g_img);
	ver = et_version(g_img, TAG, 10);
	if (ver != 11)
		T_FAIL("two overlapping write-through writes: the disk holds version %" PRIu64
		       ", expected the newer 11",
		       ver);
	expect_durable(10, 11, "two overlapping write-through writes");
	T_EQ(pmc_cache_lookup_pin(g_t.c, g_v.vol, 10, &blk, &st), 0);
	ver = et_version(pmc_cache_block_data(g_t.c, blk), TAG, 10);
	pmc_cache_unpin(g_t.c, blk);
	T_EQ(ver, 11);
	expect_clean_agrees(ET_LAND_NONE, "two overlapping write-through writes");
	free(b1);
	free(b2);
	teardown();
	printf("ok: through_order\n");
}

/*
 * A LOST block (acknowledged write-back data whose pmem failed: reads fail
 * rather than return the disk's older data) overwritten around the cache
 * on a volatile disk: the LOST copy stays until the new data is durable,
 * so the write is RWF_DSYNC; a power cut after its acknowledgement leaves
 * the new data (the copy was dropped at once and the write plain: the
 * disk's older data read back, silently).
 */
static void sc_around_lost(void)
{
	struct et_vdisk_stats s0, s1;
	enum pmc_block_state st, was;
	struct pmc_err err;
	uint64_t blk;
	int rc;

	setup(PMC_MODE_WRITE_BACK);
	T_EQ(write_ver(5, 5, 0), 0);
	T_OK(pmc_cache_lookup_pin(g_t.c, g_v.vol, 5, &blk, &st));
	T_OK(pmc_cache_quarantine(g_t.c, g_v.vol, 5, blk, &was));
	pmc_cache_unpin(g_t.c, blk);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 5, 1, g_buf, 0), -EIO);
	pmc_engine_clear_error(g_t.e, g_v.vol);
	T_OK(pmc_engine_set_mode(g_t.e, g_v.vol, PMC_MODE_WRITE_AROUND, &err));
	pmc_engine_writeback_step(g_t.e, g_q);
	et_vdisk_get_stats(g_d, &s0);
	T_EQ(write_ver(5, 6, 0), 0);
	et_vdisk_get_stats(g_d, &s1);
	if (s1.dsync_writes - s0.dsync_writes != 1)
		T_FAIL("a write-around over a LOST block: %" PRIu64 " RWF_DSYNC of %" PRIu64
		       " disk writes, expected the write durable",
		       s1.dsync_writes - s0.dsync_writes, s1.writes - s0.writes);
	expect_durable(5, 6, "a write-around over a LOST block");
	process_crash();
	et_vdisk_power_cut(g_d, ET_LAND_NONE, &g_rng);
	open_engine();
	rc = et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 5, 1, g_buf, 0);
	if (rc != 0 || et_version(g_buf, TAG, 5) != 6)
		T_FAIL("a write-around over a LOST block, then a power cut: read %d, version %" PRIu64
		       ", expected the acknowledged 6",
		       rc, et_version(g_buf, TAG, 5));
	teardown();
	printf("ok: around_lost\n");
}

/*
 * Write-back of a newer copy stays off blocks whose older write-through
 * disk write is still on its way: (a) the volume switched to write-back
 * with that write in flight, (b) two write-through writes, the newer held
 * behind the older. A write-back write that overtook it would leave a
 * CLEAN copy the disk disagrees with once the older write lands (and the
 * block would go back to the older data when that copy is evicted).
 */
static void sc_through_wb(void)
{
	struct et_req w1, w2;
	char *b1 = et_alloc(BS), *b2 = et_alloc(BS);
	struct pmc_wb_conf wb;
	struct pmc_err err;
	uint64_t ver;

	/* (a) */
	setup(PMC_MODE_WRITE_THROUGH);
	wb = g_t.wb;
	wb.max_age_ms = 0; /* write back whatever is dirty */
	pmc_engine_set_wb_conf(g_t.e, &wb);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	submit_write(&w1, b1, 10, 10);
	poll_ms(5);
	T_TRUE(!w1.done);
	T_OK(pmc_engine_set_mode(g_t.e, g_v.vol, PMC_MODE_WRITE_BACK, &err));
	T_EQ(write_ver(10, 11, 0), 0);
	T_EQ(pmc_engine_writeback_step(g_t.e, g_q), 0);
	wait_req(&w1, "write-through write before the switch");
	T_EQ(w1.res, 0);
	expect_clean_agrees(ET_LAND_NONE, "write-back after a switch from write-through");
	et_flush_all(&g_t, g_q, NULL);
	et_disk_read(g_v.path, 10, g_img);
	ver = et_version(g_img, TAG, 10);
	if (ver != 11)
		T_FAIL("a write-through write, then a switch to write-back and a newer write of "
		       "the block: the disk holds version %" PRIu64 " once all is written back, "
		       "expected 11",
		       ver);
	expect_clean_agrees(ET_LAND_NONE, "write-back after a switch from write-through");
	teardown();

	/* (b) */
	setup(PMC_MODE_WRITE_THROUGH);
	wb = g_t.wb;
	wb.max_age_ms = 0;
	pmc_engine_set_wb_conf(g_t.e, &wb);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	submit_write(&w1, b1, 20, 20);
	poll_ms(5);
	submit_write(&w2, b2, 20, 21); /* held behind w1 */
	poll_ms(5);
	T_EQ(pmc_engine_writeback_step(g_t.e, g_q), 0);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS); /* w2's own write, after w1 */
	wait_req(&w1, "write-through 1");
	if (!w2.done)
		expect_clean_agrees(ET_LAND_NONE, "a write-through write held behind another");
	wait_req(&w2, "write-through 2");
	T_EQ(w2.res, 0);
	expect_durable(20, 21, "two overlapping write-through writes");
	expect_clean_agrees(ET_LAND_NONE, "a write-through write held behind another");
	free(b1);
	free(b2);
	teardown();
	printf("ok: through_wb\n");
}

/* a write-back volume whose block lba (version lba) has its write-back
 * write on its way to the disk, held back SLOW_NS; s0 (optional): the
 * model disk's counts before that write */
static void slow_writeback(uint64_t lba, struct et_vdisk_stats *s0)
{
	struct pmc_wb_conf wb;

	setup(PMC_MODE_WRITE_BACK);
	T_EQ(write_ver(lba, lba, 0), 0);
	wb = g_t.wb;
	wb.max_age_ms = 0; /* write back whatever is dirty */
	pmc_engine_set_wb_conf(g_t.e, &wb);
	et_vdisk_delay_next(g_d, PMC_IO_WRITE, SLOW_NS);
	if (s0)
		et_vdisk_get_stats(g_d, s0);
	T_EQ(pmc_engine_writeback_step(g_t.e, g_q), 1);
}

static void sc_discard_order(void)
{
	struct et_req dr;
	uint64_t ver;
	char g[64];

	/* write-back of block 20 on its way to the disk */
	slow_writeback(20, NULL);
	et_submit(g_q, &dr, PMC_REQ_DISCARD, g_v.vol, 20, 1, NULL, 0);
	wait_req(&dr, "discard of block 20");
	T_EQ(dr.res, 0);
	et_quiesce(g_q, NULL);
	T_EQ(flush(), 0);
	et_disk_read(g_v.path, 20, g_img);
	ver = et_version(g_img, TAG, 20);
	if (ver != EV_ZERO)
		T_FAIL("a discard after a write-back write of the block: the disk holds %s, "
		       "expected zeroes (the older data landed after the discard)",
		       et_vstr(ver, g, sizeof(g)));
	teardown();
	printf("ok: discard_order\n");
}

/*
 * The same on a disk that cannot discard: nothing goes to the disk, but
 * the discard still waits for the write-back write of its block, or a
 * read miss meanwhile caches (CLEAN) what that write then changes.
 */
static void sc_discard_nodisk(void)
{
	struct et_req dr;

	slow_writeback(20, NULL);
	g_t.e->vols[g_v.vol].disk->can_discard = 0;
	et_submit(g_q, &dr, PMC_REQ_DISCARD, g_v.vol, 20, 1, NULL, 0);
	poll_ms(5);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 20, 1, g_buf, 0), 0);
	wait_req(&dr, "discard of block 20");
	T_EQ(dr.res, 0);
	et_quiesce(g_q, NULL);
	expect_clean_agrees(ET_LAND_ALL, "a discard on a disk that cannot discard");
	teardown();
	printf("ok: discard_nodisk\n");
}

/*
 * A clean stop whose sync of the disk failed leaves acknowledged plain
 * writes in the disk's volatile cache: the next process must not cache a
 * read miss of them before a sync of its own (the cache then records no
 * clean shutdown: pmc_engine_destroy says so, and et_close does as the
 * daemon's stop).
 */
static void sc_stop_unsynced(void)
{
	setup(PMC_MODE_WRITE_AROUND);
	T_EQ(write_ver(5, 5, 0), 0); /* plain */
	et_vdisk_fail_next(g_d, PMC_IO_FSYNC, EIO);
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	open_engine();
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 5, 1, g_buf, 0), 0);
	expect_clean_agrees(ET_LAND_NONE, "a read miss after a stop whose sync failed");
	teardown();
	printf("ok: stop_unsynced\n");
}

/*
 * A write-back round's sync covers the plain writes completed before it
 * (flush generations). When it fails, those writes may be gone from the
 * disk's volatile cache though acknowledged: the host's next FLUSH must
 * fail, as it would have with no cache in between (it synced again,
 * succeeded, and acknowledged them).
 */
static void sc_sync_lost(void)
{
	struct pmc_err err = {0};
	struct pmc_vol_stats s;

	setup(PMC_MODE_WRITE_BACK);
	T_EQ(write_ver(20, 20, 0), 0); /* dirty in the pmem */
	/* leaving write-back: writes go to the disk plain while it drains */
	T_OK(pmc_engine_set_mode(g_t.e, g_v.vol, PMC_MODE_WRITE_AROUND, &err));
	T_EQ(write_ver(5, 5, 0), 0);
	et_vdisk_fail_next(g_d, PMC_IO_FSYNC, EIO);
	for (int i = 0; i < 200; i++) {
		pmc_engine_writeback_step(g_t.e, g_q);
		poll_ms(5);
		T_OK(pmc_engine_stats(g_t.e, g_v.vol, &s));
		if (s.wb_errors)
			break;
	}
	T_TRUE(s.wb_errors > 0);
	T_EQ(flush(), -EIO); /* block 5's covering sync failed */
	pmc_engine_clear_error(g_t.e, g_v.vol);
	T_EQ(flush(), 0); /* reported once; this one synced */
	expect_durable(5, 5, "a flush after the reported loss");
	teardown();
	printf("ok: sync_lost\n");
}

/*
 * The engine's own sync fails while a host FLUSH's sync is in flight (the
 * FLUSH began before the latch was set): the FLUSH's sync succeeds, but
 * the plain writes the failed one covered may be lost all the same, so the
 * FLUSH completes with the error (it was acknowledged: the latch then
 * failed a later, unrelated FLUSH instead).
 */
static void sc_sync_lost_inflight(void)
{
	struct pmc_err err = {0};
	struct pmc_vol_stats s;
	struct et_req r;

	setup(PMC_MODE_WRITE_BACK);
	T_EQ(write_ver(20, 20, 0), 0); /* dirty in the pmem */
	T_OK(pmc_engine_set_mode(g_t.e, g_v.vol, PMC_MODE_WRITE_AROUND, &err));
	T_EQ(write_ver(5, 5, 0), 0); /* plain, not yet synced */
	et_vdisk_delay_next(g_d, PMC_IO_FSYNC, 300000000ull);
	et_submit(g_q, &r, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0);
	et_vdisk_fail_next(g_d, PMC_IO_FSYNC, EIO);
	for (int i = 0; i < 200 && !r.done; i++) {
		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_queue_poll(g_q, 0, 0);
		T_OK(pmc_engine_stats(g_t.e, g_v.vol, &s));
		if (s.wb_errors)
			break;
		poll_ms(1);
	}
	T_TRUE(s.wb_errors > 0 && !r.done); /* the round's sync failed first */
	wait_req(&r, "the flush whose sync was in flight");
	T_EQ(r.res, -EIO);
	pmc_engine_clear_error(g_t.e, g_v.vol);
	T_EQ(flush(), 0); /* reported once */
	teardown();
	printf("ok: sync_lost_inflight\n");
}

/*
 * The path of a volume's disk goes down and comes back (an NVMe-oF target
 * that rebooted: its volatile cache is lost) while a write-back round's
 * sync is on its way: the sync then succeeds on the new path, but the
 * round's writes went to the old one. Nothing of the round may be marked
 * clean; it is written again, and only then clean (the disk holds it).
 */
static void sc_wb_path_back(void)
{
	struct pmc_err err = {0};
	struct et_vdisk_stats vs;
	struct pmc_vol_stats s;

	setup(PMC_MODE_WRITE_BACK);
	g_t.wb.high_pct = 0; /* write back whatever is dirty, at once */
	g_t.wb.low_pct = 0;
	g_t.wb.max_age_ms = 0;
	pmc_engine_set_wb_conf(g_t.e, &g_t.wb);
	for (uint64_t lba = 20; lba < 28; lba++)
		T_EQ(write_ver(lba, 1, 0), 0); /* dirty in the pmem */
	et_vdisk_delay_next(g_d, PMC_IO_FSYNC, 300000000ull);
	for (int i = 0; i < 200; i++) {
		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_queue_poll(g_q, 0, 0);
		et_vdisk_get_stats(g_d, &vs);
		if (vs.volatile_blocks >= 8)
			break;
		poll_ms(1);
	}
	T_TRUE(vs.volatile_blocks >= 8); /* written, the sync on its way */
	/* the path goes and comes back meanwhile (the daemon's path monitor
	 * clears the volume's error then); the target may have lost its cache,
	 * which the model cannot do with the sync in flight: what is checked is
	 * that the sync, completing on the new path, cleans nothing */
	pmc_engine_clear_error(g_t.e, g_v.vol);
	poll_ms(400);
	et_vdisk_get_stats(g_d, &vs);
	T_TRUE(vs.syncs >= 1); /* the round's sync completed */
	T_OK(pmc_engine_stats(g_t.e, g_v.vol, &s));
	if (s.dirty_blocks != 8)
		T_FAIL("after the path came back under a round's sync, %" PRIu64
		       " blocks dirty (8 expected: their writes went to the old path)",
		       s.dirty_blocks);
	/* written again, now durable */
	et_flush_all(&g_t, g_q, NULL);
	T_OK(pmc_engine_stats(g_t.e, g_v.vol, &s));
	T_EQ(s.dirty_blocks, 0);
	for (uint64_t lba = 20; lba < 28; lba++)
		expect_durable(lba, 1, "written back again after the path came back");
	teardown();
	printf("ok: wb_path_back\n");
}

/*
 * A discard the disk fails: the cached copies stay, a dirty one still the
 * newest data the host wrote (they were dropped before the disk's discard
 * ran, so a read then got the disk's older data); and written back later.
 * One that succeeds drops them.
 */
static void sc_discard_fail(void)
{
	struct et_req dr;

	setup(PMC_MODE_WRITE_BACK);
	T_EQ(write_ver(30, 1, 0), 0);
	T_EQ(flush(), 0);
	et_flush_all(&g_t, g_q, NULL); /* version 1 on the disk */
	T_EQ(write_ver(30, 2, 0), 0); /* version 2 dirty in the pmem */
	et_vdisk_fail_next(g_d, PMC_IO_DISCARD, EIO);
	et_submit(g_q, &dr, PMC_REQ_DISCARD, g_v.vol, 30, 1, NULL, 0);
	wait_req(&dr, "the failing discard of block 30");
	T_EQ(dr.res, -EIO);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 30, 1, g_buf, 0), 0);
	T_EQ(et_version(g_buf, TAG, 30), 2);
	pmc_engine_clear_error(g_t.e, g_v.vol);
	et_flush_all(&g_t, g_q, NULL);
	expect_durable(30, 2, "a dirty block a failed discard kept");
	/* one that succeeds */
	T_EQ(write_ver(30, 3, 0), 0);
	et_submit(g_q, &dr, PMC_REQ_DISCARD, g_v.vol, 30, 1, NULL, 0);
	wait_req(&dr, "the discard of block 30");
	T_EQ(dr.res, 0);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, 30, 1, g_buf, 0), 0);
	T_TRUE(et_version(g_buf, TAG, 30) != 3);
	teardown();
	printf("ok: discard_fail\n");
}

static atomic_int g_detached;

static void *detach_main(void *arg)
{
	struct pmc_err err = {0};

	(void)arg;
	T_OK(pmc_engine_detach(g_t.e, g_v.vol, 0, &err));
	atomic_store(&g_detached, 1);
	return NULL;
}

/*
 * A volume detached while a write-back write of it is on its way to the
 * disk (a forced volume-remove of a failing disk): the write holds the
 * disk, so the detach returns only once it completed, and closes the disk
 * after it; the write's round is synced by nobody, so its block stays
 * dirty and is written back after the next attach. (The detach closed the
 * disk under the write, whose completion then used it: AddressSanitizer
 * builds report that.) Meanwhile a flush of every volume leaves the
 * detached one's dirty block alone.
 */
static void sc_detach_inflight(void)
{
	struct et_vdisk_stats s0, s1;
	struct pmc_err err = {0};
	pthread_t th;

	slow_writeback(21, &s0);
	atomic_store(&g_detached, 0);
	T_EQ(pthread_create(&th, NULL, detach_main, NULL), 0);
	while (!atomic_load(&g_detached))
		pmc_queue_poll(g_q, 1, 1000000ull);
	T_EQ(pthread_join(th, NULL), 0);
	et_vdisk_get_stats(g_d, &s1);
	T_EQ(s1.writes - s0.writes, 1);
	T_EQ(s1.syncs - s0.syncs, 0); /* its round was not synced */
	/* the delayed write reached the disk before the detach returned */
	et_disk_read(g_v.path, 21, g_img);
	T_EQ(et_version(g_img, TAG, 21), 21);
	/* a flush of every volume does not wait for the detached one's dirty
	 * block (it waited for ever, and held up write-back meanwhile) */
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	et_attach(&g_t, &g_v, &g_vc, &et_vdisk_ops, g_d);
	{
		struct pmc_volume_info vi;

		T_OK(pmc_cache_volume_info(g_t.c, g_v.vol, &vi));
		T_EQ(vi.nr_dirty, 1);
	}
	T_OK(pmc_engine_flush_all(g_t.e, g_q, g_v.vol, NULL, NULL, &err));
	expect_durable(21, 21, "write-back after a detach that waited for its write");
	teardown();
	printf("ok: detach_inflight\n");
}

static const struct {
	const char *name;
	void (*fn)(void);
} g_sc[] = {
	{"flush_gen", sc_flush_gen},
	{"fill_unsynced", sc_fill_unsynced},
	{"attach_unsynced", sc_attach_unsynced},
	{"detach_unsynced", sc_detach_unsynced},
	{"detach_inflight", sc_detach_inflight},
	{"sync_ops", sc_sync_ops},
	{"around_clean", sc_around_clean},
	{"through_order", sc_through_order},
	{"through_wb", sc_through_wb},
	{"around_lost", sc_around_lost},
	{"discard_order", sc_discard_order},
	{"discard_nodisk", sc_discard_nodisk},
	{"discard_fail", sc_discard_fail},
	{"stop_unsynced", sc_stop_unsynced},
	{"sync_lost", sc_sync_lost},
	{"sync_lost_inflight", sc_sync_lost_inflight},
	{"wb_path_back", sc_wb_path_back},
};

int main(int argc, char **argv)
{
	const char *only = NULL;
	int ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
	g_buf = et_alloc(BS);
	g_img = et_alloc(NB * BS);
	for (size_t i = 0; i < sizeof(g_sc) / sizeof(g_sc[0]); i++) {
		if (only && strcmp(only, g_sc[i].name))
			continue;
		g_sc[i].fn();
		ran++;
	}
	if (!ran)
		T_FAIL("no scenario named %s", only);
	free(g_buf);
	free(g_img);
	return 0;
}
