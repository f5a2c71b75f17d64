/* engine_faults.c - the engine on backing disks that fail, stall, and
 * transfer short.
 *
 * A fault-injecting disk (struct fdisk) replaces each disk's ops table
 * before attach: its submit hook fails I/O at once (pmc_ring_complete_later
 * with -EIO), or delays it (pmc_ring_submit_later); its complete hook fails
 * an I/O that ran, cuts transfers short, or answers -EAGAIN once per piece.
 * Each scenario runs on a freshly formatted cache:
 *   wb_error      write-back to a failing disk: data stays dirty and
 *                 readable, sticky error, wb_errors, retries with a growing
 *                 back-off; healed, flush_all succeeds and the disk holds
 *                 everything
 *   wb_backoff    write-back of many separate blocks (one disk write each)
 *                 to a failing disk: the back-off doubles once per failed
 *                 round, not once per failed write; healed, a flush tries
 *                 again at once instead of waiting the back-off out
 *   wb_fair       write-back limited to one write in flight while the
 *                 lower-numbered volume keeps writing: the other volume's
 *                 dirty blocks are written back too (not after it stops)
 *   wb_rebuild    the dirty map: complete at once on a new cache and on
 *                 one closed without dirty blocks; rebuilt by the steps
 *                 after a reopen with dirty blocks, which flush_all then
 *                 writes back
 *   wb_window     a full cache, one write in flight, a window of the
 *                 dirty map that foreground writes keep dirtying again (each
 *                 new block takes the one write-back just cleaned): the
 *                 cursor still leaves the window, and the dirty blocks
 *                 beyond it - another volume's - are written back within
 *                 one pass over the map
 *   wb_kept       a failed write backs its volume off: the candidates the
 *                 sweep before it found and the steps kept wait too, and
 *                 are written back once the disk healed
 *   read_error    failed reads return -EIO and cache nothing; healed, exact
 *   read_span     a read's misses reach the disk in one read over the
 *                 cached blocks between them (dirty and clean, returned
 *                 from pmem, not from the disk), admitted or not; a longer
 *                 stretch of cached blocks splits it; a bad block of the
 *                 disk under a cached block fails no read
 *   write_error   write-around, write-through, flush and discard errors
 *                 reach the request; the data is old or new, never garbage
 *   flush_fail    flush_all on a disk that keeps failing: -EIO naming the
 *                 volume, in bounded time, nothing lost
 *   short_eagain  the random model with every transfer short and every
 *                 piece answered -EAGAIN first: data exact
 *   latency       the random model with disk I/O delayed at random
 *   wb_order      a slow write-back write of an old version must not land
 *                 over a newer one written around, through, or written back
 *   around_dirty  a write around the cache over a dirty block: reads meanwhile
 *                 see the acknowledged or the new version, never an older one
 *   nospace       a cache full of dirty data: writes wait for write-back
 *                 (write-back and write-through mode) or go around
 *   refusals      a disk smaller than asked or than the cached volume
 *   wb_race       a block replaced or dropped between write-back's pin and
 *                 its claim (test hook pmc_test_wb_pinned): the old copy is
 *                 not written to the disk
 *   durable       a disk with a volatile write cache (a write is durable
 *                 once written with RWF_DSYNC or covered by a sync that
 *                 started after it completed): what the engine calls
 *                 durable is - write-through and FUA writes when
 *                 acknowledged, plain writes after a flush, blocks marked
 *                 clean by write-back
 *   wb_sync       write-back writes a round without RWF_DSYNC, syncs once,
 *                 and marks blocks clean only after the sync completed
 *                 (the sync held back 300 ms: every block stays dirty)
 *   wb_batch      write-back held to one write in flight: one sync covers
 *                 the writes of many steps, a round of slow writes is
 *                 sealed by its age, not only once all is written, and a
 *                 discard held by a write of an open round gets its sync
 *                 without another write-back step
 *   wb_sync_fail  a failed write-back sync leaves the round's blocks dirty,
 *                 sets the sticky error and backs off; healed, all clean
 *   stale_error   write-back writes started before the volume's error was
 *                 cleared (a path that came back) fail after the clear:
 *                 counted, their blocks stay dirty and are written again
 *                 at once, but the volume gets no sticky error and no
 *                 back-off (the old path's failure is not the new one's)
 *   seq_bypass    a stream of 16-block writes, each pair submitted swapped,
 *                 after random 4 KiB writes nearby: past seq_cutoff it goes
 *                 around the cache (the seq_bypass_near CTest pins a seed
 *                 whose random writes leave short streams in its way)
 *   wb_corrupt    a dirty descriptor naming a block past its volume's end
 *                 (corrupt, checksummed): never written to the disk (its
 *                 offset would wrap onto another block), flush_all fails
 *                 naming it, the checker reports it
 *   idx_corrupt   a looping index chain hides a dirty block: its read fails
 *                 with EIO (not the disk's older data), flush_all fails
 *                 naming the volume instead of waiting for ever
 *   wb_pace       write-back keeps busy_inflight writes in flight while
 *                 requests run, max_inflight once a write waited for a
 *                 free block
 * Usage: engine_faults [--seed S] [--only NAME] [--mode MODE]
 * (--mode: run the model scenarios in that one mode, to narrow a failure)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_internal.h"
#include "check.h"
#include "diskid.h"
#include "etest.h"
#include "t.h"

static struct pmc_err err;
static uint64_t g_seed;
static int g_only_mode = -1; /* --mode: the model scenarios in one mode only */

/* --- the fault-injecting disk --- */

#define AGAIN_MAX 4096
#define FAIL_TIMES_MAX 512

struct fdisk {
	/* what to inject: a positive errno per op kind, 0 for none */
	int fail[4];		/* indexed by enum pmc_io_op */
	int fail_after_io;	/* fail in the complete hook, after the I/O ran */
	int short_io;		/* READ/WRITE complete in pieces of at most half */
	int eagain;		/* every piece is answered -EAGAIN once first */
	atomic_int eagain_reads; /* every read is answered -EAGAIN while set */
	uint64_t lat_max_ns;	/* delay every submit by 0..lat_max_ns */
	unsigned delay_writes;	/* delay the next N writes ... */
	uint64_t delay_ns;	/* ... by this much */
	int doom_delayed;	/* ... and fail each of them with -EIO when it completes */
	struct pmc_io *doomed[64];
	unsigned ndoomed;
	unsigned delay_syncs;	/* delay the next N syncs by sync_delay_ns */
	uint64_t sync_delay_ns;
	uint64_t bad_lba; /* reads that cover this block fail with -EIO (bad_set) */
	int bad_set;
	uint64_t rng;
	/* what happened */
	uint64_t submits[4], failed[4], shorts[4], eagains[4], delayed;
	uint64_t dsync_writes;	/* writes submitted with RWF_DSYNC */
	uint64_t fail_ns[FAIL_TIMES_MAX]; /* when failed writes were submitted */
	unsigned nfail_ns;
	/* volatile write cache model (NULL: off): per block, the number of
	 * the plain write completion that left it not yet durable, 0 when
	 * durable; a sync clears what completed before it was submitted */
	uint64_t *unsynced;
	uint64_t nblocks, wdone;
	uint64_t synced_at, max_cover; /* most plain write completions one sync covered */
	struct {
		struct pmc_io *io;
		uint64_t covers; /* completions before the sync was submitted */
	} sync[8];
	struct {
		struct pmc_io *io;
		uint64_t done;
	} again[AGAIN_MAX];
	unsigned nagain;
};

static void fd_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	struct fdisk *f = d->priv;
	int e = f->fail[io->op];

	f->submits[io->op]++;
	if (io->op == PMC_IO_WRITE && (io->rw_flags & RWF_DSYNC))
		f->dsync_writes++;
	if (io->op == PMC_IO_FSYNC && f->unsynced) {
		unsigned i;

		for (i = 0; i < 8 && f->sync[i].io; i++)
			;
		if (i == 8)
			T_FAIL("fdisk: more than 8 syncs in flight");
		f->sync[i].io = io;
		f->sync[i].covers = f->wdone;
		if (f->wdone - f->synced_at > f->max_cover)
			f->max_cover = f->wdone - f->synced_at;
		f->synced_at = f->wdone;
	}
	if (!e && f->bad_set && io->op == PMC_IO_READ && io->off / BS <= f->bad_lba &&
	    f->bad_lba < (io->off + io->len) / BS)
		e = EIO;
	if (e && !f->fail_after_io) {
		f->failed[io->op]++;
		if (io->op == PMC_IO_WRITE && f->nfail_ns < FAIL_TIMES_MAX)
			f->fail_ns[f->nfail_ns++] = pmc_mono_ns();
		pmc_ring_complete_later(r, io, -e, 0);
		return;
	}
	if (io->op == PMC_IO_FSYNC && f->delay_syncs) {
		f->delay_syncs--;
		f->delayed++;
		pmc_ring_submit_later(r, io, f->sync_delay_ns);
		return;
	}
	if (io->op == PMC_IO_WRITE && f->delay_writes) {
		f->delay_writes--;
		f->delayed++;
		if (f->doom_delayed) {
			if (f->ndoomed == 64)
				T_FAIL("fdisk: more than 64 doomed writes");
			f->doomed[f->ndoomed++] = io;
		}
		pmc_ring_submit_later(r, io, f->delay_ns);
		return;
	}
	if (f->lat_max_ns) {
		f->delayed++;
		pmc_ring_submit_later(r, io, et_rand(&f->rng) % f->lat_max_ns);
		return;
	}
	pmc_ring_submit_raw(r, io);
}

static int fd_complete_faults(struct pmc_disk *d, struct pmc_io *io, int res);

/* the volatile write cache model: io completed with res */
static void fd_cache(struct fdisk *f, struct pmc_io *io, int res)
{
	if (io->op == PMC_IO_FSYNC) {
		for (unsigned i = 0; i < 8; i++) {
			if (f->sync[i].io != io)
				continue;
			f->sync[i].io = NULL;
			for (uint64_t b = 0; res >= 0 && b < f->nblocks; b++)
				if (f->unsynced[b] && f->unsynced[b] <= f->sync[i].covers)
					f->unsynced[b] = 0;
		}
	} else if (io->op == PMC_IO_WRITE && res >= 0 && io->done + (uint64_t)res >= io->len) {
		uint64_t mark = io->rw_flags & RWF_DSYNC ? 0 : ++f->wdone;

		for (uint64_t b = io->off / BS; b < (io->off + io->len) / BS && b < f->nblocks; b++)
			f->unsynced[b] = mark;
	}
}

static int fd_complete(struct pmc_disk *d, struct pmc_io *io, int res)
{
	res = fd_complete_faults(d, io, res);
	if (((struct fdisk *)d->priv)->unsynced)
		fd_cache(d->priv, io, res);
	return res;
}

static int fd_complete_faults(struct pmc_disk *d, struct pmc_io *io, int res)
{
	struct fdisk *f = d->priv;
	int e = f->fail[io->op];

	if (res < 0)
		return res;
	for (unsigned i = 0; i < f->ndoomed; i++) {
		if (f->doomed[i] != io)
			continue;
		f->doomed[i] = f->doomed[--f->ndoomed];
		f->failed[io->op]++;
		return -EIO;
	}
	if (e && f->fail_after_io) {
		f->failed[io->op]++;
		return -e;
	}
	if (io->op == PMC_IO_READ && atomic_load(&f->eagain_reads)) {
		f->eagains[io->op]++;
		return -EAGAIN;
	}
	if (f->eagain) {
		unsigned i;

		for (i = 0; i < f->nagain; i++)
			if (f->again[i].io == io && f->again[i].done == io->done)
				break;
		if (i == f->nagain) {
			if (f->nagain == AGAIN_MAX)
				T_FAIL("fdisk: more than %u I/O pieces waiting for a retry", AGAIN_MAX);
			f->again[f->nagain].io = io;
			f->again[f->nagain].done = io->done;
			f->nagain++;
			f->eagains[io->op]++;
			return -EAGAIN;
		}
		f->again[i] = f->again[--f->nagain];
	}
	if (f->short_io && (io->op == PMC_IO_READ || io->op == PMC_IO_WRITE) && res >= 1024) {
		/* a multiple of 512 (the file's logical block size), at most half */
		int n = (int)(((unsigned)res / 2) & ~511u);

		if (n > 512 && et_rand(&f->rng) % 2)
			n = 512 * (int)(1 + et_rand(&f->rng) % (unsigned)(n / 512));
		f->shorts[io->op]++;
		return n;
	}
	return res;
}

static const struct pmc_disk_ops fdisk_ops = {
	.submit = fd_submit,
	.complete = fd_complete,
};

/* --- set-up per scenario --- */

#define MAXV 3

static struct et g_t;
static struct et_vol g_v[MAXV];
static struct fdisk g_f[MAXV];
static unsigned g_nv;
static struct pmc_queue *g_q;
static int g_no_steps; /* helpers wait without running write-back steps */

static struct pmc_queue *wbq(void)
{
	return g_no_steps ? NULL : g_q;
}

static void base_wb(struct pmc_wb_conf *wb)
{
	pmc_wb_conf_default(wb);
	wb->high_pct = 0; /* write back whatever is dirty, at once */
	wb->low_pct = 0;
	wb->max_age_ms = 0;
	wb->retry_ms = 40;
	wb->idle_ms = 1;
}

static void setup(const char *scenario, uint64_t cache_blocks, unsigned nv, uint64_t vol_blocks,
		  const struct pmc_wb_conf *wb, const struct pmc_volume_conf *vc)
{
	static const char *names[MAXV] = {"vol-a", "vol-b", "vol-c"};

	printf("--- %s\n", scenario);
	memset(&g_t, 0, sizeof(g_t));
	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	unlink(g_t.pmem_path);
	g_t.pmem_size = et_pmem_size(cache_blocks);
	g_t.wb = *wb;
	et_open(&g_t, 1);
	g_nv = nv;
	for (unsigned i = 0; i < nv; i++) {
		struct et_vol *v = &g_v[i];

		memset(v, 0, sizeof(*v));
		memset(&g_f[i], 0, sizeof(g_f[i]));
		g_f[i].rng = g_seed ^ (i + 1);
		snprintf(v->name, sizeof(v->name), "%s", names[i]);
		et_path(v->path, sizeof(v->path), names[i]);
		v->tag = i + 1;
		v->nblocks = vol_blocks;
		et_disk_create(v->path, v->tag, v->nblocks);
		et_attach(&g_t, v, vc, &fdisk_ops, &g_f[i]);
	}
	g_q = et_queue(g_t.e, 32);
	g_no_steps = 0;
}

static void teardown(void)
{
	pmc_queue_destroy(g_q);
	g_q = NULL;
	et_check_cache(&g_t);
	et_close(&g_t, 0);
	for (unsigned i = 0; i < g_nv; i++) {
		free(g_f[i].unsynced);
		g_f[i].unsynced = NULL;
	}
}

static void healed(struct fdisk *f)
{
	memset(f->fail, 0, sizeof(f->fail));
	f->fail_after_io = 0;
}

/* the disk healed and v's error cleared, as the path monitor does */
static void heal(struct et_vol *v, struct fdisk *f)
{
	healed(f);
	pmc_engine_clear_error(g_t.e, v->vol);
}

/* ... and then everything written back */
static void heal_and_flush(struct et_vol *v, struct fdisk *f)
{
	int rc;

	heal(v, f);
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
	if (rc)
		T_FAIL("flush_all after the disk healed: %d (%s)", rc, err.msg);
}

/* one write-back step, then its writes (and their round's sync) finished;
 * returns the writes it started */
static int step_and_drain(void)
{
	int started = pmc_engine_writeback_step(g_t.e, g_q);

	while (pmc_queue_busy(g_q))
		pmc_queue_poll(g_q, 1, 10000000ull);
	return started;
}

/* write versions ver of blocks lba..+n; returns the request's result */
static int write_ver(struct et_vol *v, uint64_t lba, uint64_t n, uint64_t ver, unsigned flags)
{
	char *buf = et_alloc(n * BS);
	int rc;

	for (uint64_t i = 0; i < n; i++)
		et_fill(buf + i * BS, v->tag, lba + i, ver);
	rc = et_io(g_t.e, g_q, wbq(), PMC_REQ_WRITE, v->vol, lba, n, buf, flags);
	free(buf);
	return rc;
}

/* each block of lba..+n, read through the engine, holds one of the versions
 * in ok[0..nok) (EV_ZERO allowed if listed) */
static void expect_engine(struct et_vol *v, uint64_t lba, uint64_t n, const uint64_t *ok,
			  unsigned nok, const char *when)
{
	char *buf = et_alloc(n * BS);
	int rc = et_io(g_t.e, g_q, wbq(), PMC_REQ_READ, v->vol, lba, n, buf, 0);

	if (rc)
		T_FAIL("%s: vol %s: read %" PRIu64 "+%" PRIu64 " failed: %d", when, v->name, lba,
		       n, rc);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got = et_version(buf + i * BS, v->tag, lba + i);
		unsigned k;
		char g[64];

		for (k = 0; k < nok && ok[k] != got; k++)
			;
		if (k == nok)
			T_FAIL("%s: vol %s block %" PRIu64 " reads as %s, expected version %" PRIu64
			       "%s",
			       when, v->name, lba + i, et_vstr(got, g, sizeof(g)), ok[0],
			       nok > 1 ? " (or another listed)" : "");
	}
	free(buf);
}

static void expect_disk(struct et_vol *v, uint64_t lba, uint64_t n, const uint64_t *ok,
			unsigned nok, const char *when)
{
	char *buf = et_alloc(BS);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t got;
		unsigned k;
		char g[64];

		et_disk_read(v->path, lba + i, buf);
		got = et_version(buf, v->tag, lba + i);
		for (k = 0; k < nok && ok[k] != got; k++)
			;
		if (k == nok)
			T_FAIL("%s: vol %s block %" PRIu64 " on the disk is %s, expected version %" PRIu64
			       "%s",
			       when, v->name, lba + i, et_vstr(got, g, sizeof(g)), ok[0],
			       nok > 1 ? " (or another listed)" : "");
	}
	free(buf);
}

#define ONE(v) ((const uint64_t[]){(v)}), 1

/* each block of lba..+n on the disk is the version a read through the
 * engine returns */
static void expect_disk_as_engine(struct et_vol *v, uint64_t lba, uint64_t n, const char *when)
{
	char *buf = et_alloc(n * BS);
	int rc = et_io(g_t.e, g_q, wbq(), PMC_REQ_READ, v->vol, lba, n, buf, 0);

	if (rc)
		T_FAIL("%s: vol %s: read %" PRIu64 "+%" PRIu64 " failed: %d", when, v->name, lba,
		       n, rc);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got = et_version(buf + i * BS, v->tag, lba + i);

		expect_disk(v, lba + i, 1, ONE(got), when);
	}
	free(buf);
}

static int cached(struct et_vol *v, uint64_t lba, enum pmc_block_state *st)
{
	uint64_t blk;

	if (pmc_cache_lookup_pin(g_t.c, v->vol, lba, &blk, st))
		return 0;
	pmc_cache_unpin(g_t.c, blk);
	return 1;
}

/* --- scenarios --- */

static void sc_wb_error(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	struct pmc_vol_stats s;
	unsigned bursts = 0;
	uint64_t burst_ns[64], t0;
	int rc;

	base_wb(&wb);
	setup("wb_error: write-back to a failing disk", 256, 1, 1024, &wb, NULL);
	f->fail[PMC_IO_WRITE] = EIO;
	t0 = pmc_mono_ns();
	for (uint64_t lba = 0; lba < 40; lba += 8)
		T_EQ(write_ver(v, 100 + lba, 8, 7, 0), 0);
	et_run(g_t.e, g_q, g_q, 700);
	/* failed write-back writes come in bursts, one per retry */
	for (unsigned i = 0; i < f->nfail_ns; i++)
		if (!bursts || f->fail_ns[i] - burst_ns[bursts - 1] > 15000000ull) {
			if (bursts < 64)
				burst_ns[bursts] = f->fail_ns[i];
			bursts++;
		}
	printf("%" PRIu64 " failed write-back writes in %u bursts over 700 ms:", f->failed[1],
	       bursts);
	for (unsigned i = 0; i < bursts && i < 64; i++)
		printf(" +%" PRIu64 "ms", (burst_ns[i] - t0) / 1000000);
	printf("\n");
	if (bursts < 3)
		T_FAIL("write-back tried %u times in 700 ms with a 40 ms back-off: no retries",
		       bursts);
	if (bursts > 8)
		T_FAIL("write-back tried %u times in 700 ms with a 40 ms back-off doubling: "
		       "no back-off",
		       bursts);
	/* back-off: 40 ms, then 80 ms (doubling), never sooner (load only
	 * makes retries later) */
	if (burst_ns[1] - burst_ns[0] < 30000000ull)
		T_FAIL("the first retry came %" PRIu64 " ms after the failure, before the back-off "
		       "of 40 ms",
		       (burst_ns[1] - burst_ns[0]) / 1000000);
	if (burst_ns[2] - burst_ns[1] < 60000000ull)
		T_FAIL("the second retry came %" PRIu64 " ms after the first, before a doubled "
		       "back-off of 80 ms",
		       (burst_ns[2] - burst_ns[1]) / 1000000);
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), EIO);
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.error, EIO);
	T_TRUE(s.wb_errors >= bursts);
	T_EQ(s.wb_blocks, 0);
	T_EQ(s.dirty_blocks, 40);
	for (uint64_t lba = 100; lba < 140; lba++) {
		enum pmc_block_state st;

		if (!cached(v, lba, &st) || st != PMC_BLK_DIRTY)
			T_FAIL("block %" PRIu64 ": not dirty in the cache after failed write-backs",
			       lba);
	}
	expect_engine(v, 100, 40, ONE(7), "while write-back fails");
	expect_disk(v, 100, 40, ONE(0), "while write-back fails");

	/* healed: flush_all (without clearing the error) writes everything */
	healed(f);
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
	if (rc) {
		ET_SOFT_FAIL("flush_all after the disk healed (error not cleared): %d (%s)", rc,
			     err.msg);
		pmc_engine_clear_error(g_t.e, v->vol);
		T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
		/* the sticky error is what this run cleared: set it again */
		f->fail[PMC_IO_WRITE] = EIO;
		T_EQ(write_ver(v, 500, 1, 7, 0), 0);
		et_run(g_t.e, g_q, g_q, 20);
		healed(f);
		T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	}
	expect_disk(v, 100, 40, ONE(7), "flush_all after the disk healed");
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.dirty_blocks, 0);
	T_TRUE(s.wb_blocks >= 40);
	/* sticky until cleared */
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), EIO);
	pmc_engine_clear_error(g_t.e, v->vol);
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), 0);
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.error, 0);
	expect_engine(v, 100, 40, ONE(7), "after flush_all");
	teardown();
	printf("ok: wb_error\n");
}

/* failed write-back writes, grouped in bursts (one per retry) more than
 * 15 ms apart; returns the number of bursts, their times in burst_ns */
static unsigned fail_bursts(const struct fdisk *f, uint64_t *burst_ns, unsigned max)
{
	unsigned bursts = 0;

	for (unsigned i = 0; i < f->nfail_ns; i++)
		if (!bursts || f->fail_ns[i] - burst_ns[(bursts < max ? bursts : max) - 1] >
				       15000000ull) {
			if (bursts < max)
				burst_ns[bursts] = f->fail_ns[i];
			bursts++;
		}
	return bursts;
}

static void sc_wb_backoff(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	uint64_t burst_ns[64], t0;
	unsigned bursts, per_burst;

	base_wb(&wb);
	setup("wb_backoff: a failing round of many separate write-back writes", 256, 1, 1024,
	      &wb, NULL);
	f->fail[PMC_IO_WRITE] = EIO;
	t0 = pmc_mono_ns();
	/* 24 dirty blocks two apart: no two merge, one disk write each */
	for (uint64_t i = 0; i < 24; i++)
		T_EQ(write_ver(v, 100 + 2 * i, 1, 5, 0), 0);
	et_run(g_t.e, g_q, g_q, 700);
	bursts = fail_bursts(f, burst_ns, 64);
	per_burst = bursts ? (unsigned)(f->failed[PMC_IO_WRITE] / bursts) : 0;
	printf("%" PRIu64 " failed write-back writes in %u bursts over 700 ms:",
	       f->failed[PMC_IO_WRITE], bursts);
	for (unsigned i = 0; i < bursts && i < 64; i++)
		printf(" +%" PRIu64 "ms", (burst_ns[i] - t0) / 1000000);
	printf("\n");
	if (per_burst < 2)
		T_FAIL("%u failed writes per burst: the scenario needs several per round",
		       per_burst);
	/* 40 ms back-off, doubling per round: retries at about +40, +120,
	 * +280, +600 ms; doubling per failed write would reach 60 s in the
	 * first round and leave one burst */
	if (bursts < 3)
		T_FAIL("write-back tried %u times in 700 ms with a 40 ms back-off doubling per "
		       "round: the back-off grew once per failed write (%u writes a round)",
		       bursts, per_burst);
	if (burst_ns[1] - burst_ns[0] < 30000000ull)
		T_FAIL("the first retry came %" PRIu64 " ms after the failure, before the back-off "
		       "of 40 ms",
		       (burst_ns[1] - burst_ns[0]) / 1000000);
	expect_engine(v, 100, 1, ONE(5), "while write-back fails");
	/* a long back-off (retries at about +0.2, +0.6, +1.4, +3 s, the
	 * next at +6.2 s); healed at +3.2 s, a flush does not wait it out */
	wb.retry_ms = 200;
	pmc_engine_set_wb_conf(g_t.e, &wb);
	pmc_engine_clear_error(g_t.e, v->vol);
	et_run(g_t.e, g_q, g_q, 3200);
	healed(f);
	memset(&err, 0, sizeof(err));
	t0 = pmc_mono_ns();
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	t0 = (pmc_mono_ns() - t0) / 1000000;
	printf("flush_all after the disk healed, under a back-off of seconds: %" PRIu64 " ms\n",
	       t0);
	if (t0 > 1000)
		T_FAIL("flush_all after the disk healed took %" PRIu64 " ms: it waited out the "
		       "write-back back-off instead of trying again at once",
		       t0);
	for (uint64_t i = 0; i < 24; i++)
		expect_disk(v, 100 + 2 * i, 1, ONE(5), "flushed after the disk healed");
	teardown();
	printf("ok: wb_backoff\n");
}

static void sc_wb_fair(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	unsigned b_clean = 0, a_clean = 0;

	base_wb(&wb);
	wb.max_inflight = 1;
	wb.busy_inflight = 1;
	setup("wb_fair: one write-back write at a time, the first volume keeps writing", 256, 2,
	      1024, &wb, NULL);
	g_no_steps = 1; /* the steps below are all there is */
	T_TRUE(a->vol < b->vol);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ(write_ver(b, 10 * i, 1, 3, 0), 0);
	/* a new dirty block of a before every step: a always has some */
	for (uint64_t i = 0; i < 40; i++) {
		T_EQ(write_ver(a, 4 * i, 1, 2, 0), 0);
		step_and_drain();
	}
	for (uint64_t i = 0; i < 8; i++) {
		enum pmc_block_state st;

		b_clean += cached(b, 10 * i, &st) && st == PMC_BLK_CLEAN;
	}
	for (uint64_t i = 0; i < 40; i++) {
		enum pmc_block_state st;

		a_clean += cached(a, 4 * i, &st) && st == PMC_BLK_CLEAN;
	}
	printf("40 steps of one write each: %u of %s's 40 blocks and %u of %s's 8 written back\n",
	       a_clean, a->name, b_clean, b->name);
	/* served in turn: b's 8 blocks take 8 of the 40 steps at most 2 apart */
	if (b_clean < 8)
		T_FAIL("volume %s (slot %u): %u of 8 dirty blocks written back in 40 steps while "
		       "%s (slot %u) kept writing: starved",
		       b->name, b->vol, b_clean, a->name, a->vol);
	if (a_clean < 16)
		T_FAIL("volume %s: %u of 40 blocks written back in 40 steps", a->name, a_clean);
	expect_disk(b, 0, 1, ONE(3), "written back in turn");
	g_no_steps = 0;
	teardown();
	printf("ok: wb_fair\n");
}

/*
 * One volume's disk stops answering (every write held HUNG_NS, as a fabric
 * path queueing I/O until ctrl_loss_tmo, or a disk in its retries) while
 * its write-back writes hold every in-flight slot: once nothing of it
 * completed for stall_ms, they no longer count, and another volume's dirty
 * blocks are written back long before the hung writes come back; the hung
 * volume gets no more writes meanwhile, and a flush fails naming it instead
 * of waiting for it. Then all of it is written back, every block in its
 * last version.
 */
#define HUNG_NS 3000000000ull
static void sc_wb_hung(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	struct pmc_vol_stats s;
	uint64_t t0, t_b = 0;
	int started;

	base_wb(&wb);
	wb.max_inflight = 4;
	wb.busy_inflight = 4;
	wb.max_io_bytes = BS; /* one block per write: many writes */
	wb.stall_ms = 100;
	setup("wb_hung: one volume's disk stops answering with every write-back slot", 512, 2,
	      1024, &wb, NULL);
	g_no_steps = 1;
	g_f[0].delay_writes = 1000;
	g_f[0].delay_ns = HUNG_NS;
	for (uint64_t i = 0; i < 32; i++)
		T_EQ(write_ver(a, 2 * i, 1, 2, 0), 0);
	t0 = pmc_mono_ns();
	started = pmc_engine_writeback_step(g_t.e, g_q);
	if (started != 4)
		T_FAIL("the first step started %d writes to %s, expected every slot (4)", started,
		       a->name);
	for (uint64_t i = 0; i < 32; i++)
		T_EQ(write_ver(b, 3 * i, 1, 3, 0), 0);
	while (pmc_mono_ns() - t0 < HUNG_NS) {
		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_queue_poll(g_q, 1, 1000000ull);
		et_stats(g_t.e, b->vol, &s);
		if (s.dirty_blocks == 0) {
			t_b = pmc_mono_ns() - t0;
			break;
		}
	}
	et_stats(g_t.e, b->vol, &s);
	if (!t_b || t_b > HUNG_NS * 2 / 3)
		T_FAIL("volume %s: %" PRIu64 " blocks still dirty after %" PRIu64 " ms while %s's "
		       "write-back hung (stall_ms %u): the hung volume held every slot",
		       b->name, s.dirty_blocks, (pmc_mono_ns() - t0) / 1000000, a->name,
		       wb.stall_ms);
	printf("%s's 32 dirty blocks written back %" PRIu64 " ms after %s's writes hung\n",
	       b->name, t_b / 1000000, a->name);
	et_stats(g_t.e, a->vol, &s);
	T_EQ(s.dirty_blocks, 32); /* nothing of a came back yet */
	/* and a got no more writes while stalled: each would hang too */
	if (g_f[0].submits[PMC_IO_WRITE] != 4)
		T_FAIL("volume %s: %" PRIu64 " write-back writes submitted while stalled with 4 "
		       "in flight; expected none more",
		       a->name, g_f[0].submits[PMC_IO_WRITE] - 4);
	expect_disk(b, 0, 1, ONE(3), "written back past the hung volume");
	/* a flush cannot wait for the hung disk: it fails naming it, once
	 * the others are written back, long before the disk answers */
	{
		uint64_t t1 = pmc_mono_ns();
		int rc;

		memset(&err, 0, sizeof(err));
		rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
		printf("flush with %s hung: %d (%s) after %" PRIu64 " ms\n", a->name, rc, err.msg,
		       (pmc_mono_ns() - t1) / 1000000);
		if (rc != -ETIMEDOUT || !strstr(err.msg, "volume vol-a: its disk") ||
		    !strstr(err.msg, "32 dirty blocks stay"))
			T_FAIL("flush of all with %s's disk hung: %d (%s)", a->name, rc, err.msg);
		if (pmc_mono_ns() - t0 > HUNG_NS * 2 / 3)
			T_FAIL("the flush failed only as the hung writes came back");
	}
	/* the disk answers again: everything written back */
	g_f[0].delay_writes = 0;
	et_run(g_t.e, g_q, g_q, (unsigned)(HUNG_NS / 1000000));
	heal_and_flush(a, &g_f[0]);
	for (uint64_t i = 0; i < 32; i++) {
		expect_disk(a, 2 * i, 1, ONE(2), "written back once its disk answered");
		expect_disk(b, 3 * i, 1, ONE(3), "written back past the hung volume");
	}
	g_no_steps = 0;
	teardown();
	printf("ok: wb_hung\n");
}

/*
 * An attach whose disk takes long to say who it is (an NVMe Identify on a
 * stalled fabric path waits up to the admin timeout, 60 s) must not hold
 * the engine meanwhile: stats (the control loop's status) and write-back
 * of the other volumes go on. The identity here takes SLOW_ID_MS.
 */
#define SLOW_ID_MS 2000u
static int slow_identify(struct pmc_disk *d, struct pmc_disk_id *id, struct pmc_err *e)
{
	struct timespec ts = {SLOW_ID_MS / 1000, (SLOW_ID_MS % 1000) * 1000000l};

	nanosleep(&ts, NULL);
	return pmc_disk_id_get(d->fd, d->size, id, e);
}

static const struct pmc_disk_ops slow_id_ops = {
	.submit = fd_submit,
	.complete = fd_complete,
	.identify = slow_identify,
};

static void *attach_slow(void *arg)
{
	struct et_vol *v = arg;

	et_attach(&g_t, v, NULL, &slow_id_ops, &g_f[1]);
	return NULL;
}

static void sc_attach_slow_id(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	struct pmc_vol_stats s;
	uint64_t t0, stats_ns, step_ns;
	pthread_t th;

	base_wb(&wb);
	setup("attach_slow_id: a volume whose disk takes 2 s to identify is attached", 256, 1,
	      1024, &wb, NULL);
	g_no_steps = 1;
	T_EQ(write_ver(a, 5, 1, 2, 0), 0); /* dirty, for the write-back step */
	memset(b, 0, sizeof(*b));
	memset(&g_f[1], 0, sizeof(g_f[1]));
	snprintf(b->name, sizeof(b->name), "vol-b");
	et_path(b->path, sizeof(b->path), "vol-b");
	b->tag = 2;
	b->nblocks = 1024;
	et_disk_create(b->path, b->tag, b->nblocks);
	t0 = pmc_mono_ns();
	T_EQ(pthread_create(&th, NULL, attach_slow, b), 0);
	usleep(300000); /* the attach is reading the identity */
	et_stats(g_t.e, a->vol, &s);
	stats_ns = pmc_mono_ns() - t0;
	pmc_engine_writeback_step(g_t.e, g_q);
	step_ns = pmc_mono_ns() - t0;
	T_EQ(pthread_join(th, NULL), 0);
	g_nv = 2;
	printf("stats after %" PRIu64 " ms, a write-back step after %" PRIu64 " ms, the attach "
	       "took %" PRIu64 " ms\n",
	       stats_ns / 1000000, step_ns / 1000000, (pmc_mono_ns() - t0) / 1000000);
	if (step_ns > SLOW_ID_MS * 1000000ull / 2)
		T_FAIL("stats and a write-back step waited %" PRIu64 " ms for an attach reading "
		       "its disk's identity (%u ms): the engine was held meanwhile",
		       step_ns / 1000000, SLOW_ID_MS);
	T_EQ(write_ver(b, 7, 1, 3, 0), 0); /* the attached volume works */
	expect_engine(b, 7, 1, ONE(3), "the volume attached with a slow identity");
	g_no_steps = 0;
	teardown();
	printf("ok: attach_slow_id\n");
}

/*
 * A flush of every volume writes back the attached ones; a volume detached
 * keeping its dirty blocks (pmcachectl volume remove --force) keeps them,
 * and pmc_engine_unattached_dirty says so, naming it and the count, so
 * that the daemon's flush does not report every dirty block on its disk.
 */
static void sc_flush_unattached(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	int rc;

	base_wb(&wb);
	setup("flush_unattached: a flush of all with a volume detached keeping dirty data", 256,
	      2, 1024, &wb, NULL);
	g_no_steps = 1;
	T_EQ(write_ver(a, 1, 2, 2, 0), 0);
	T_EQ(write_ver(b, 10, 3, 2, 0), 0);
	et_quiesce(g_q, NULL);
	T_OK(pmc_engine_detach(g_t.e, b->vol, 0, &err));
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	expect_disk(a, 1, 2, ONE(2), "flushed");
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_unattached_dirty(g_t.e, &err);
	printf("after the flush: %d (%s)\n", rc, err.msg);
	if (rc != -EAGAIN || !strstr(err.msg, "1 volume not served keeps 3 dirty blocks") ||
	    !strstr(err.msg, "(vol-b)"))
		T_FAIL("a flush of all with vol-b's 3 dirty blocks unreachable: %d (%s)", rc,
		       err.msg);
	/* served again: written back, nothing left */
	et_attach(&g_t, b, NULL, &fdisk_ops, &g_f[1]);
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	T_EQ(pmc_engine_unattached_dirty(g_t.e, &err), 0);
	expect_disk(b, 10, 3, ONE(2), "flushed once attached again");
	g_no_steps = 0;
	teardown();
	printf("ok: flush_unattached\n");
}

/* close the cache cleanly and open it again with volume v attached */
static void reopen_one(struct et_vol *v)
{
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	et_open(&g_t, 0);
	et_attach(&g_t, v, NULL, &fdisk_ops, &g_f[0]);
	g_q = et_queue(g_t.e, 32);
}

static void sc_wb_rebuild(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct pmc_vol_stats s;
	struct pmc_err e2;

	base_wb(&wb);
	setup("wb_rebuild: the dirty map after a reopen", 1024, 1, 4096, &wb, NULL);
	if (pmc_engine_wb_rebuilding(g_t.e))
		T_FAIL("a new cache: the dirty map is being rebuilt (nothing to rebuild)");
	g_no_steps = 1;
	for (uint64_t i = 0; i < 64; i++)
		T_EQ(write_ver(v, 7 * i, 1, 2, 0), 0);
	/* closed cleanly with 64 dirty blocks: the map is DRAM, rebuilt after
	 * the open */
	reopen_one(v);
	if (!pmc_engine_wb_rebuilding(g_t.e))
		T_FAIL("reopened with 64 dirty blocks: the dirty map counts as complete before "
		       "its rebuild");
	memset(&e2, 0, sizeof(e2));
	T_OK(pmc_engine_flush_all(g_t.e, g_q, v->vol, NULL, NULL, &e2));
	if (pmc_engine_wb_rebuilding(g_t.e))
		T_FAIL("flush_all returned with the dirty map still being rebuilt");
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.dirty_blocks, 0);
	for (uint64_t i = 0; i < 64; i++)
		expect_disk(v, 7 * i, 1, ONE(2), "flushed after the reopen");
	/* closed with nothing dirty: complete at once again */
	reopen_one(v);
	if (pmc_engine_wb_rebuilding(g_t.e))
		T_FAIL("reopened without dirty blocks: the dirty map is being rebuilt");
	expect_engine(v, 0, 1, ONE(2), "after the second reopen");
	g_no_steps = 0;
	teardown();
	printf("ok: wb_rebuild\n");
}

/* blocks one write-back step considers (WB_BATCH, lib/engine_internal.h) */
#define WB_STEP_BLOCKS 512u

static void sc_wb_window(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	uint64_t nr, na, low_b = UINT64_MAX, blk, steps;
	unsigned b_clean = 0;
	enum pmc_block_state st;

	base_wb(&wb);
	wb.max_inflight = 1;
	wb.busy_inflight = 1;
	wb.max_io_bytes = BS; /* one block per write: no merging of neighbours */
	setup("wb_window: a window of the dirty map kept dirty by foreground writes", 1024, 2,
	      8192, &wb, NULL);
	g_no_steps = 1;
	nr = g_t.c->nr_blocks;
	if (nr < 2 * WB_STEP_BLOCKS || nr > 2048)
		T_FAIL("setup: %" PRIu64 " cache blocks", nr);
	/* the cache full of dirty blocks: a's first, in falling block numbers
	 * (the lowest cache blocks hold a's highest lbas), then b's 8 */
	na = nr - 8;
	for (uint64_t i = 0; i < na; i++)
		T_EQ(write_ver(a, na - 1 - i, 1, 2, 0), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ(write_ver(b, 10 * i, 1, 3, 0), 0);
	/* the construction: b's blocks lie beyond the first WB_STEP_BLOCKS dirty
	 * blocks of the map, so a step that starts at block 0 never sees them */
	for (uint64_t i = 0; i < 8; i++) {
		T_EQ(pmc_cache_lookup_pin(g_t.c, b->vol, 10 * i, &blk, &st), 0);
		pmc_cache_unpin(g_t.c, blk);
		T_EQ(st, PMC_BLK_DIRTY);
		if (blk < low_b)
			low_b = blk;
	}
	if (low_b < WB_STEP_BLOCKS + 8)
		T_FAIL("setup: volume %s's lowest cache block is %" PRIu64 ", within the first %u",
		       b->name, low_b, WB_STEP_BLOCKS + 8);
	/* each step writes one block back; then a writes a new block (a fresh,
	 * high lba, taken late), which can only go to the block just cleaned */
	for (steps = 0; steps < 2 * nr && b_clean < 8; steps++) {
		step_and_drain();
		T_EQ(write_ver(a, na + steps, 1, 4, 0), 0);
		b_clean = 0;
		for (uint64_t i = 0; i < 8; i++)
			b_clean += !(cached(b, 10 * i, &st) && st == PMC_BLK_DIRTY);
	}
	printf("%" PRIu64 " steps of one write each, %u of %s's 8 blocks written back "
	       "(%" PRIu64 " cache blocks, %s's from block %" PRIu64 ")\n",
	       steps, b_clean, b->name, nr, b->name, low_b);
	/* the steps take the candidates of a sweep in turn and the cursor only
	 * moves forward: b's blocks, after na - 8 dirty blocks of a in the
	 * map, are written back before the cursor came round once, whatever
	 * a dirties behind it (one block per step: fewer than nr steps) */
	if (b_clean < 8 || steps > nr)
		T_FAIL("volume %s: %u of 8 dirty blocks written back in %" PRIu64 " steps while "
		       "%s kept dirtying the window the write-back cursor stood in (%" PRIu64
		       " cache blocks): starved",
		       b->name, b_clean, steps, a->name, nr);
	for (uint64_t i = 0; i < 8; i++)
		expect_disk(b, 10 * i, 1, ONE(3), "written back beyond the window");
	g_no_steps = 0;
	teardown();
	printf("ok: wb_window\n");
}

/*
 * A step leaves the candidates it did not take to the steps after it. A
 * failed write backs the volume off: its kept candidates wait like the
 * ones a new sweep would find, and are written back once it healed.
 */
static void sc_wb_kept(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	uint64_t failed;
	int started;

	base_wb(&wb);
	wb.max_inflight = 2;
	wb.busy_inflight = 2;
	wb.max_io_bytes = BS; /* one block per write */
	wb.retry_ms = 10000;
	setup("wb_kept: candidates kept from a sweep, then a failed write", 256, 1, 1024, &wb,
	      NULL);
	g_no_steps = 1;
	/* 24 dirty blocks two apart: 24 candidates, one write each */
	for (uint64_t i = 0; i < 24; i++)
		T_EQ(write_ver(v, 100 + 2 * i, 1, 5, 0), 0);
	f->fail[PMC_IO_WRITE] = EIO;
	started = step_and_drain();
	failed = f->failed[PMC_IO_WRITE];
	if (started != 2 || failed != 2)
		T_FAIL("setup: the first step started %d writes, %" PRIu64 " failed (want 2, 2)",
		       started, failed);
	/* backed off for 10 s: the 22 candidates kept from the sweep wait */
	for (int k = 0; k < 20; k++) {
		started = step_and_drain();
		if (started)
			T_FAIL("step %d after the failure started %d writes of volume %s, which is "
			       "backed off for 10 s: the candidates kept from the sweep before the "
			       "failure ignored the back-off (%" PRIu64 " writes failed)",
			       k + 1, started, v->name, f->failed[PMC_IO_WRITE]);
	}
	T_EQ(f->failed[PMC_IO_WRITE], failed);
	expect_engine(v, 100, 1, ONE(5), "while backed off");
	/* healed: every block, the failed ones and the kept ones, written back */
	g_no_steps = 0;
	heal_and_flush(v, f);
	for (uint64_t i = 0; i < 24; i++)
		expect_disk(v, 100 + 2 * i, 1, ONE(5), "written back once the disk healed");
	teardown();
	printf("ok: wb_kept\n");
}

static void sc_read_error(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	struct pmc_vol_stats s0, s1;
	char *buf = et_alloc(8 * BS);
	enum pmc_block_state st;

	pmc_wb_conf_default(&wb);
	setup("read_error: reads from a failing disk", 256, 1, 1024, &wb, NULL);
	T_EQ(write_ver(v, 3, 1, 5, 0), 0); /* block 3 dirty in the cache */
	for (int after = 0; after <= 1; after++) {
		f->fail[PMC_IO_READ] = EIO;
		f->fail_after_io = after;
		et_stats(g_t.e, v->vol, &s0);
		/* all misses; then a partial hit (block 3) */
		T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_READ, v->vol, 200, 8, buf, 0), -EIO);
		T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_READ, v->vol, 0, 8, buf, 0), -EIO);
		et_stats(g_t.e, v->vol, &s1);
		T_TRUE(s1.read_errors - s0.read_errors >= 2);
		T_EQ(pmc_engine_volume_error(g_t.e, v->vol), EIO);
		for (uint64_t lba = 0; lba < 8; lba++) {
			if (lba != 3 && cached(v, lba, &st))
				T_FAIL("block %" PRIu64 ": cached after a failed read (%s)", lba,
				       after ? "failed after the transfer" : "failed at submit");
			if (cached(v, 200 + lba, &st))
				T_FAIL("block %" PRIu64 ": cached after a failed read", 200 + lba);
		}
		T_TRUE(cached(v, 3, &st) && st == PMC_BLK_DIRTY);
		/* a hit needs no disk */
		T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_READ, v->vol, 3, 1, buf, 0), 0);
		T_EQ(et_version(buf, v->tag, 3), 5);
	}
	/* pass-through reads fail the same way */
	T_OK(pmc_engine_set_mode(g_t.e, v->vol, PMC_MODE_PASS_THROUGH, &err));
	T_OK(pmc_engine_flush_all(g_t.e, g_q, v->vol, NULL, NULL, &err));
	T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_READ, v->vol, 300, 4, buf, 0), -EIO);
	heal(v, f);
	expect_engine(v, 300, 4, ONE(0), "healed, pass-through");
	T_OK(pmc_engine_set_mode(g_t.e, v->vol, PMC_MODE_WRITE_BACK, &err));
	expect_engine(v, 0, 3, ONE(0), "healed");
	expect_engine(v, 3, 1, ONE(5), "healed");
	expect_engine(v, 4, 4, ONE(0), "healed");
	expect_engine(v, 200, 8, ONE(0), "healed");
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), 0);
	free(buf);
	teardown();
	printf("ok: read_error\n");
}

/* the disk reads a read of lba..+n makes, and its data checked: block i
 * has version ver[i] */
static uint64_t span_read(struct et_vol *v, uint64_t lba, uint64_t n, const uint64_t *ver)
{
	struct fdisk *f = &g_f[0];
	uint64_t r0 = f->submits[PMC_IO_READ];
	char *buf = et_alloc(n * BS);

	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, v->vol, lba, n, buf, 0), 0);
	for (uint64_t i = 0; i < n; i++)
		if (et_version(buf + i * BS, v->tag, lba + i) != ver[i])
			T_FAIL("read %" PRIu64 "+%" PRIu64 ": block %" PRIu64 " is version %" PRIu64
			       ", not %" PRIu64,
			       lba, n, lba + i, et_version(buf + i * BS, v->tag, lba + i), ver[i]);
	free(buf);
	return f->submits[PMC_IO_READ] - r0;
}

static void sc_read_span(void)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	struct pmc_vol_stats s0, s1;
	enum pmc_block_state st;
	uint64_t ver[64] = {0}, nr;

	pmc_wb_conf_default(&wb);
	pmc_volume_conf_default(&vc);
	vc.admit_after_misses = 2; /* admitted on the second miss: kinds mix */
	setup("read_span: one disk read per span of misses", 1024, 1, 4096, &wb, &vc);
	g_no_steps = 1; /* the dirty blocks stay dirty: the disk has version 0 */

	/* 2 and 5 dirty, 7 clean in the cache, 4 missed once before */
	T_EQ(write_ver(v, 2, 1, 5, 0), 0);
	T_EQ(write_ver(v, 5, 1, 6, 0), 0);
	T_EQ(span_read(v, 7, 1, ver), 1);
	T_EQ(span_read(v, 7, 1, ver), 1); /* second miss: admitted */
	T_EQ(span_read(v, 4, 1, ver), 1);
	T_TRUE(cached(v, 7, &st) && st == PMC_BLK_CLEAN);
	T_TRUE(!cached(v, 4, &st));
	ver[2] = 5, ver[5] = 6;
	nr = span_read(v, 0, 10, ver);
	printf("read of 10 blocks, 3 cached among them: %" PRIu64 " disk read(s)\n", nr);
	T_EQ(nr, 1);
	T_TRUE(cached(v, 4, &st) && st == PMC_BLK_CLEAN); /* its second miss */
	T_TRUE(cached(v, 2, &st) && st == PMC_BLK_DIRTY);
	T_TRUE(cached(v, 5, &st) && st == PMC_BLK_DIRTY);

	/* more cached blocks in a row than a span reads over: two reads */
	memset(ver, 0, sizeof(ver));
	T_EQ(write_ver(v, 101, 20, 8, 0), 0);
	for (unsigned i = 1; i <= 20; i++)
		ver[i] = 8;
	nr = span_read(v, 100, 22, ver);
	printf("read of 22 blocks, 20 cached in a row: %" PRIu64 " disk reads\n", nr);
	T_EQ(nr, 2);

	/* a bad block of the disk under a cached block fails no read, and
	 * is no error of the volume; one under a miss still does */
	memset(ver, 0, sizeof(ver));
	T_EQ(write_ver(v, 202, 1, 9, 0), 0);
	ver[2] = 9;
	f->bad_lba = 202;
	f->bad_set = 1;
	et_stats(g_t.e, v->vol, &s0);
	nr = span_read(v, 200, 6, ver);
	et_stats(g_t.e, v->vol, &s1);
	printf("read of 6 blocks over a bad block that is cached: %" PRIu64 " disk reads\n", nr);
	T_EQ(nr, 3); /* the span, then 200-201 and 203-205 alone */
	T_EQ(s1.read_errors - s0.read_errors, 0);
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), 0);
	f->bad_lba = 301;
	{
		char *buf = et_alloc(4 * BS);

		T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_READ, v->vol, 300, 4, buf, 0), -EIO);
		free(buf);
	}
	f->bad_set = 0;
	for (uint64_t lba = 300; lba < 304; lba++)
		if (cached(v, lba, &st))
			T_FAIL("block %" PRIu64 ": cached after a failed read", lba);
	teardown();
	printf("ok: read_span\n");
}

static void sc_write_error(void)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	struct fdisk *fa = &g_f[0], *fb = &g_f[1];
	struct pmc_vol_stats s;
	char *buf = et_alloc(4 * BS);

	base_wb(&wb);
	wb.retry_ms = 10;
	pmc_volume_conf_default(&vc);
	vc.mode = PMC_MODE_WRITE_AROUND;
	setup("write_error: write-around and write-through to a failing disk", 256, 2, 1024, &wb,
	      &vc);
	T_OK(pmc_engine_set_mode(g_t.e, b->vol, PMC_MODE_WRITE_THROUGH, &err));
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	for (int after = 0; after <= 1; after++) {
		uint64_t ver = 10 + (uint64_t)after * 10, prev = after ? 11 : 0;

		fa->fail[PMC_IO_WRITE] = fb->fail[PMC_IO_WRITE] = EIO;
		fa->fail_after_io = fb->fail_after_io = after;
		/* a failed write is not acknowledged: old or new data, never garbage */
		T_EQ(write_ver(a, 10, 4, ver, 0), -EIO);
		T_EQ(write_ver(b, 10, 4, ver, 0), -EIO);
		T_EQ(write_ver(a, 20, 4, ver, PMC_REQ_FUA), -EIO);
		expect_engine(a, 10, 4, ((const uint64_t[]){ver, prev}), 2,
			      "after a failed write-around write");
		expect_engine(b, 10, 4, ((const uint64_t[]){ver, prev}), 2,
			      "after a failed write-through write");
		expect_engine(a, 20, 4, ((const uint64_t[]){ver, 0}), 2,
			      "after a failed write-around FUA write");
		et_stats(g_t.e, a->vol, &s);
		T_TRUE(s.write_errors >= 2);
		T_EQ(s.error, EIO);
		et_stats(g_t.e, b->vol, &s);
		T_TRUE(s.write_errors >= 1);
		T_EQ(s.error, EIO);
		healed(fa);
		healed(fb);
		pmc_engine_clear_error(g_t.e, a->vol);
		pmc_engine_clear_error(g_t.e, b->vol);
		T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
		/* whichever version a read returns is the one the disk holds
		 * once flushed: a failed write never leaves a block that
		 * changes value when evicted */
		expect_disk_as_engine(a, 10, 4, "a failed write-around write, flushed");
		expect_disk_as_engine(b, 10, 4, "a failed write-through write, flushed");
		expect_disk_as_engine(a, 20, 4, "a failed write-around FUA write, flushed");
		/* written again, the data is exact */
		T_EQ(write_ver(a, 10, 4, ver + 1, 0), 0);
		T_EQ(write_ver(b, 10, 4, ver + 1, 0), 0);
		expect_engine(a, 10, 4, ONE(ver + 1), "rewritten after a failure");
		expect_engine(b, 10, 4, ONE(ver + 1), "rewritten after a failure");
		expect_disk(a, 10, 4, ONE(ver + 1), "rewritten after a failure");
		expect_disk(b, 10, 4, ONE(ver + 1), "rewritten after a failure");
	}
	/* flush after an unsynced write-around write, on a failing disk */
	T_EQ(write_ver(a, 40, 1, 50, 0), 0);
	fa->fail[PMC_IO_FSYNC] = EIO;
	T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_FLUSH, a->vol, 0, 0, NULL, 0), -EIO);
	et_stats(g_t.e, a->vol, &s);
	T_EQ(s.error, EIO);
	healed(fa);
	pmc_engine_clear_error(g_t.e, a->vol);
	/* the failed flush must not be forgotten: the next one syncs */
	{
		uint64_t before = fa->submits[PMC_IO_FSYNC];

		T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_FLUSH, a->vol, 0, 0, NULL, 0), 0);
		if (fa->submits[PMC_IO_FSYNC] == before)
			ET_SOFT_FAIL("a flush after a failed flush did not sync the disk: the unsynced "
			       "write-around write of block 40 is not known durable");
	}
	/* a failing discard */
	fa->fail[PMC_IO_DISCARD] = EIO;
	T_EQ(et_io(g_t.e, g_q, g_q, PMC_REQ_DISCARD, a->vol, 60, 4, NULL, 0), -EIO);
	healed(fa);
	pmc_engine_clear_error(g_t.e, a->vol);
	expect_engine(a, 60, 4, ((const uint64_t[]){0, EV_ZERO}), 2, "after a failed discard");
	free(buf);
	teardown();
	printf("ok: write_error\n");
}

static void sc_flush_fail(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	struct fdisk *fa = &g_f[0];
	uint64_t t0, ms;
	int rc;

	base_wb(&wb);
	wb.retry_ms = 20;
	wb.high_pct = 100; /* nothing written back unless asked */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	setup("flush_fail: flush_all on a disk that keeps failing", 256, 2, 1024, &wb, NULL);
	T_EQ(write_ver(a, 0, 10, 3, 0), 0);
	T_EQ(write_ver(b, 0, 10, 3, 0), 0);
	fa->fail[PMC_IO_WRITE] = EIO;
	t0 = pmc_mono_ns();
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
	ms = (pmc_mono_ns() - t0) / 1000000;
	printf("flush_all: %d after %" PRIu64 " ms: %s\n", rc, ms, err.msg);
	T_EQ(rc, -EIO);
	if (!strstr(err.msg, a->name) || strchr(err.msg, '\n'))
		T_FAIL("flush_all's message '%s' does not name volume %s on one line", err.msg,
		       a->name);
	if (ms > 10000)
		T_FAIL("flush_all took %" PRIu64 " ms to give up", ms);
	/* nothing lost: the healthy volume is written back, the other is dirty */
	expect_disk(b, 0, 10, ONE(3), "flush_all with another volume failing");
	expect_disk(a, 0, 10, ONE(0), "flush_all failed");
	expect_engine(a, 0, 10, ONE(3), "flush_all failed");
	/* one volume alone, too */
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_flush_all(g_t.e, g_q, a->vol, NULL, NULL, &err);
	T_EQ(rc, -EIO);
	T_TRUE(strstr(err.msg, a->name) != NULL);
	/* healed: everything goes */
	healed(fa);
	pmc_engine_clear_error(g_t.e, a->vol);
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	expect_disk(a, 0, 10, ONE(3), "healed and flushed");
	teardown();
	printf("ok: flush_fail\n");
}

/* a dirty descriptor whose key lies past its volume's end, checksummed
 * (corrupt metadata, as a bug could leave it): never written back (its
 * offset wrapped onto block 3 of the disk), flush_all fails naming it
 * once everything else (of both volumes, over many steps) is written
 * back, and the checker reports it */
static void sc_wb_corrupt(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	struct pmc_check_report rep;
	uint64_t blk, lba = (1ull << 52) + 3; /* * 4096 wraps to 3 * 4096 */
	int res = -1, rc;

	base_wb(&wb);
	wb.high_pct = 100; /* nothing written back unless asked */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	setup("wb_corrupt: a dirty block past its volume's end", 1024, 2, 1024, &wb, NULL);
	T_EQ(write_ver(a, 20, 10, 3, 0), 0);
	/* many separate writes of the other volume: more than one step's */
	for (uint64_t l = 0; l < 600; l += 2)
		T_EQ(write_ver(b, l, 1, 3, 0), 0);
	T_OK(pmc_cache_alloc(g_t.c, 0, &blk));
	et_fill(pmc_cache_block_data(g_t.c, blk), a->tag, 3, 7);
	T_OK(pmc_cache_publish_n(g_t.c, a->vol, &lba, &blk, 1, PMC_BLK_DIRTY, NULL, &res));
	T_EQ(res, 0);
	pmc_cache_unpin(g_t.c, blk);
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
	printf("flush_all: %d: %s\n", rc, err.msg);
	T_EQ(rc, -EUCLEAN);
	if (!strstr(err.msg, a->name) || !strstr(err.msg, "metadata corrupt"))
		T_FAIL("flush_all's message '%s' does not name %s and the bad block", err.msg,
		       a->name);
	expect_disk(a, 3, 1, ONE(0), "a block past the end, wrapped onto block 3");
	expect_disk(a, 20, 10, ONE(3), "the same volume's other blocks");
	for (uint64_t l = 0; l < 600; l += 2)
		expect_disk(b, l, 1, ONE(3), "flush_all with another volume's block corrupt");
	T_ERR(pmc_cache_check(g_t.c, &rep, &err), EUCLEAN, "past the end of volume");
	/* dropped (what an operator's --discard-dirty would do): consistent */
	T_OK(pmc_cache_invalidate(g_t.c, a->vol, lba, 1));
	T_OK(pmc_cache_check(g_t.c, &rep, &err));
	teardown();
	printf("ok: wb_corrupt\n");
}

/* a bucket's chain that loops at its head (corrupt index), hiding the
 * dirty copy of another block behind it: a read of that block fails with
 * EIO (it was served from the disk's older data), write-back cannot
 * reach it and flush_all fails naming the volume (instead of waiting for
 * ever); the block at the head is still read; mended, all is back */
static void sc_idx_corrupt(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0];
	uint64_t blk, b, other = UINT64_MAX, next;
	char *buf;
	int rc;

	base_wb(&wb);
	wb.high_pct = 100; /* nothing written back unless asked */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	setup("idx_corrupt: a looping index chain hides a dirty block", 256, 1, 1024, &wb, NULL);
	buf = et_alloc(BS);
	b = pmc_index_bucket(g_t.c, a->vol, 5);
	for (uint64_t l = 0; l < a->nblocks && other == UINT64_MAX; l++)
		if (l != 5 && pmc_index_bucket(g_t.c, a->vol, l) == b)
			other = l;
	T_TRUE(other != UINT64_MAX);
	T_EQ(write_ver(a, other, 1, 4, 0), 0);
	T_EQ(write_ver(a, 5, 1, 3, 0), 0); /* the chain: 5, then other */
	blk = g_t.c->buckets[b] - 1;
	T_EQ(g_t.c->descs[blk].lba, 5);
	next = g_t.c->descs[blk].next;
	T_TRUE(next != 0 && g_t.c->descs[next - 1].lba == other);
	g_t.c->descs[blk].next = blk + 1; /* the head points at itself */
	rc = et_io(g_t.e, g_q, wbq(), PMC_REQ_READ, a->vol, other, 1, buf, 0);
	printf("read of block %" PRIu64 " behind the loop: %d\n", other, rc);
	T_EQ(rc, -EIO);
	T_EQ(et_io(g_t.e, g_q, wbq(), PMC_REQ_READ, a->vol, 5, 1, buf, 0), 0);
	T_EQ(et_version(buf, a->tag, 5), 3);
	memset(&err, 0, sizeof(err));
	alarm(20); /* a flush waiting for ever for the hidden block: killed */
	rc = pmc_engine_flush_all(g_t.e, g_q, a->vol, NULL, NULL, &err);
	alarm(0);
	printf("flush_all: %d: %s\n", rc, err.msg);
	T_EQ(rc, -EUCLEAN);
	T_TRUE(strstr(err.msg, a->name) && strstr(err.msg, "metadata corrupt"));
	expect_disk(a, other, 1, ONE(0), "the block behind the loop");
	g_t.c->descs[blk].next = next;
	T_EQ(et_io(g_t.e, g_q, wbq(), PMC_REQ_READ, a->vol, other, 1, buf, 0), 0);
	T_EQ(et_version(buf, a->tag, other), 4);
	free(buf);
	teardown();
	printf("ok: idx_corrupt\n");
}

/* the random model on disks that misbehave without failing */
static void model_run(const char *name, void (*arm)(struct fdisk *f), uint64_t ops)
{
	struct pmc_wb_conf wb;
	struct et_model m;
	uint64_t rng = g_seed ^ 0xfa17;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 20;
	wb.low_pct = 10;
	wb.max_age_ms = 10;
	wb.max_io_bytes = 64 << 10;
	wb.idle_ms = 1;
	setup(name, 256, 2, 768, &wb, NULL);
	for (unsigned i = 0; i < g_nv; i++)
		arm(&g_f[i]);
	et_model_init(&m, &g_t, g_v, g_nv, g_seed);
	m.q = g_q;
	m.wbq = g_q;
	m.pct_discard = 4;
	for (int mode = PMC_MODE_WRITE_BACK; mode <= PMC_MODE_PASS_THROUGH + 1; mode++) {
		for (unsigned i = 0; i < g_nv; i++) {
			enum pmc_mode md = mode <= PMC_MODE_PASS_THROUGH
						   ? (enum pmc_mode)mode
						   : (enum pmc_mode)(et_rand(&rng) % 4);

			if (g_only_mode >= 0)
				md = (enum pmc_mode)g_only_mode;

			T_OK(pmc_engine_set_mode(g_t.e, g_v[i].vol, md, &err));
		}
		et_model_run(&m, ops, 2);
	}
	T_OK(pmc_engine_set_mode(g_t.e, g_v[0].vol,
				 g_only_mode >= 0 ? (enum pmc_mode)g_only_mode : PMC_MODE_WRITE_BACK,
				 &err));
	et_model_run(&m, ops, 2);
	et_flush_all(&g_t, g_q, NULL);
	et_model_verify_engine(&m, name);
	et_model_verify_disks(&m, name);
	et_model_check_stats(&m);
	printf("torn reads (a read overlapping a write): %" PRIu64 "\n", m.torn_reads);
	for (unsigned i = 0; i < g_nv; i++) {
		struct fdisk *f = &g_f[i];

		printf("%s: reads %" PRIu64 " (short %" PRIu64 ", again %" PRIu64 "), writes %" PRIu64
		       " (short %" PRIu64 ", again %" PRIu64 "), fsync %" PRIu64 " (again %" PRIu64
		       "), discard %" PRIu64 " (again %" PRIu64 "), delayed %" PRIu64 "\n",
		       g_v[i].name, f->submits[0], f->shorts[0], f->eagains[0], f->submits[1],
		       f->shorts[1], f->eagains[1], f->submits[2], f->eagains[2], f->submits[3],
		       f->eagains[3], f->delayed);
	}
	et_model_fini(&m);
	teardown();
}

static void arm_short_eagain(struct fdisk *f)
{
	f->short_io = 1;
	f->eagain = 1;
}

static void arm_latency(struct fdisk *f)
{
	f->lat_max_ns = 3000000; /* 0..3 ms */
}

static void sc_short_eagain(void)
{
	model_run("short_eagain: every transfer short, every piece -EAGAIN first", arm_short_eagain,
		  400);
	for (unsigned i = 0; i < g_nv; i++) {
		struct fdisk *f = &g_f[i];

		T_TRUE(f->shorts[PMC_IO_READ] > 0 && f->shorts[PMC_IO_WRITE] > 0);
		T_TRUE(f->eagains[PMC_IO_READ] > 0 && f->eagains[PMC_IO_WRITE] > 0);
	}
	printf("ok: short_eagain\n");
}

static void sc_latency(void)
{
	model_run("latency: disk I/O delayed 0..3 ms at random", arm_latency, 400);
	for (unsigned i = 0; i < g_nv; i++)
		if (g_f[i].delayed == 0 || g_f[i].delayed > g_f[i].submits[0] + g_f[i].submits[1] +
								 g_f[i].submits[2] + g_f[i].submits[3])
			T_FAIL("latency: %s: %" PRIu64 " I/Os delayed of %" PRIu64
			       " reads and %" PRIu64 " writes: the delay was not injected",
			       g_v[i].name, g_f[i].delayed, g_f[i].submits[0], g_f[i].submits[1]);
	printf("ok: latency\n");
}

/*
 * A write-back write of version 1 is held back 50 ms by the disk; meanwhile
 * an acknowledged version 2 reaches the disk another way. The old write
 * must not end up on the disk after the new one (or the engine must not let
 * both be in flight at once): after flush_all the disk holds version 2.
 */
enum wb_order_how {
	WBO_DRAIN,	/* a write while the volume drains for a mode change */
	WBO_NOSPACE,	/* a write that finds no free block: nospace=around */
	WBO_WRITEBACK,	/* write-back of version 2 while version 1's is held */
	WBO_THROUGH,	/* write-through of version 2 (version 1's failed) */
};

static void aggressive_wb(void)
{
	struct pmc_wb_conf wb;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 0;
	wb.low_pct = 0;
	wb.max_age_ms = 0;
	wb.idle_ms = 1;
	wb.retry_ms = 1;
	pmc_engine_set_wb_conf(g_t.e, &wb);
}

static void wb_order_case(enum wb_order_how how, const char *name)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	char *buf = et_alloc(BS);
	struct et_req r;
	uint64_t lba = 77, got;
	char g[64];

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* write-back only when asked */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	pmc_volume_conf_default(&vc);
	if (how == WBO_THROUGH)
		vc.mode = PMC_MODE_WRITE_THROUGH;
	if (how == WBO_NOSPACE)
		vc.nospace = PMC_NOSPACE_AROUND;
	setup(name, 256, 1, 256, &wb, &vc);
	g_no_steps = 1;
	if (how == WBO_THROUGH) {
		/* version 1's write-through fails: it stays dirty in pmem */
		f->fail[PMC_IO_WRITE] = EIO;
		T_EQ(write_ver(v, lba, 1, 1, 0), -EIO);
		heal(v, f);
	} else {
		T_EQ(write_ver(v, lba, 1, 1, 0), 0);
	}
	/* write-back of version 1, held back by the disk */
	f->delay_writes = 1;
	f->delay_ns = 50000000ull;
	aggressive_wb();
	T_EQ(pmc_engine_writeback_step(g_t.e, g_q), 1);
	T_EQ(f->delayed, 1);
	pmc_engine_set_wb_conf(g_t.e, &wb);
	et_fill(buf, v->tag, lba, 2);
	switch (how) {
	case WBO_DRAIN:
		T_OK(pmc_engine_set_mode(g_t.e, v->vol, PMC_MODE_WRITE_AROUND, &err));
		break;
	case WBO_NOSPACE:
		/* every other block dirty: no free block left */
		for (uint64_t k = 0; k < v->nblocks && k < g_t.nr_blocks; k++)
			if (k != lba)
				T_EQ(write_ver(v, k, 1, 1, 0), 0);
		break;
	default:
		break;
	}
	et_submit(g_q, &r, PMC_REQ_WRITE, v->vol, lba, 1, buf, 0);
	et_wait(g_t.e, g_q, NULL, &r.done, 5000, "write of version 2");
	T_EQ(r.res, 0);
	if (how == WBO_WRITEBACK) {
		/* may start version 2's write-back now, or wait for version 1's */
		aggressive_wb();
		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_engine_set_wb_conf(g_t.e, &wb);
	}
	/* let everything land, then write back whatever is dirty */
	et_run(g_t.e, g_q, NULL, 120);
	et_quiesce(g_q, NULL); /* a loaded machine may need longer: fails after 15 s */
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	et_disk_read(v->path, lba, buf);
	got = et_version(buf, v->tag, lba);
	if (got != 2)
		ET_SOFT_FAIL("%s: block %" PRIu64 " on the disk is %s after flush_all, expected "
			     "version 2 (acknowledged; the held write-back of version 1 landed "
			     "after it)",
			     name, lba, et_vstr(got, g, sizeof(g)));
	else
		printf("ok: %s\n", name);
	free(buf);
	teardown();
}

static void sc_wb_order(void)
{
	wb_order_case(WBO_DRAIN, "wb_order: a held write-back write vs a write while draining");
	wb_order_case(WBO_NOSPACE, "wb_order: a held write-back write vs a nospace=around write");
	wb_order_case(WBO_WRITEBACK,
		      "wb_order: a held write-back write vs the write-back of a newer version");
	wb_order_case(WBO_THROUGH, "wb_order: a held write-back write vs a write-through write");
}

/*
 * A write that goes around the cache over a block still dirty in it (the
 * volume drains for a mode change, or nospace=around finds no free block):
 * while its disk write is held back, a read of the block must return the
 * acknowledged version 1 or the new version 2 - not the disk's version 0,
 * which version 1 replaced. (After a power cut in that window the block
 * would be version 0 for good: engine_crash finds that too.)
 */
static void around_dirty_case(int nospace, const char *name)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	char *buf = et_alloc(BS), *rbuf = et_alloc(BS);
	struct et_req w, r;
	uint64_t lba = 33, got;
	char g[64];

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* no write-back: version 1 stays dirty */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	pmc_volume_conf_default(&vc);
	if (nospace)
		vc.nospace = PMC_NOSPACE_AROUND;
	setup(name, 256, 1, 512, &wb, &vc);
	g_no_steps = 1;
	T_EQ(write_ver(v, lba, 1, 1, 0), 0);
	if (nospace) {
		/* every other cache block dirty: no free block left */
		for (uint64_t k = 0; k + 1 < g_t.nr_blocks; k++)
			T_EQ(write_ver(v, k + 100, 1, 1, 0), 0);
	} else {
		T_OK(pmc_engine_set_mode(g_t.e, v->vol, PMC_MODE_WRITE_AROUND, &err));
	}
	T_EQ(f->submits[PMC_IO_WRITE], 0);
	f->delay_writes = 1;
	f->delay_ns = 100000000ull;
	et_fill(buf, v->tag, lba, 2);
	et_submit(g_q, &w, PMC_REQ_WRITE, v->vol, lba, 1, buf, 0);
	et_run(g_t.e, g_q, NULL, 10);
	/* (if it went to the disk, it is held there now) */
	et_submit(g_q, &r, PMC_REQ_READ, v->vol, lba, 1, rbuf, 0);
	et_wait(g_t.e, g_q, NULL, &r.done, 5000, "read during the held write");
	T_EQ(r.res, 0);
	got = et_version(rbuf, v->tag, lba);
	if (got != 1 && got != 2)
		ET_SOFT_FAIL("%s: a read during the write of version 2 returned %s; acknowledged "
			     "version 1 was dropped from the cache before version 2 reached the disk",
			     name, et_vstr(got, g, sizeof(g)));
	else
		printf("ok: %s (read version %" PRIu64 ")\n", name, got);
	et_wait(g_t.e, g_q, NULL, &w.done, 5000, "held write");
	T_EQ(w.res, 0);
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	expect_engine(v, lba, 1, ONE(2), name);
	expect_disk(v, lba, 1, ONE(2), name);
	free(buf);
	free(rbuf);
	teardown();
}

static void sc_around_dirty(void)
{
	around_dirty_case(0, "around_dirty: a write while draining, over a dirty block");
	around_dirty_case(1, "around_dirty: a nospace=around write over a dirty block");
}

/*
 * Volume a (write-back) fills the cache with dirty data but for 4 blocks;
 * then volume b, in the mode under test, writes 4 requests of 8 blocks: the
 * first takes the 4 free blocks and needs more.
 */
static void nospace_case(enum pmc_mode mode, enum pmc_nospace nospace)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *a = &g_v[0], *b = &g_v[1];
	struct pmc_vol_stats a0, a1, b0, b1;
	struct et_req r[4];
	char *buf[4];
	char name[128];
	uint64_t n;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* write-back only for a full cache or when waited for */
	wb.low_pct = 90;
	wb.max_age_ms = 600000;
	pmc_volume_conf_default(&vc);
	vc.nospace = nospace;
	snprintf(name, sizeof(name), "nospace: %s, nospace=%s", pmc_mode_name(mode),
		 nospace == PMC_NOSPACE_WAIT ? "wait" : "around");
	setup(name, 256, 2, 1024, &wb, &vc);
	g_no_steps = 1;
	vc.mode = mode;
	T_OK(pmc_engine_set_volume_conf(g_t.e, b->vol, &vc, &err));
	T_OK(pmc_engine_flush_all(g_t.e, g_q, b->vol, NULL, NULL, &err)); /* finishes the switch */
	n = g_t.nr_blocks - 4;
	for (uint64_t lba = 0; lba < n; lba += 4)
		T_EQ(write_ver(a, lba, 4, 1, 0), 0);
	et_stats(g_t.e, a->vol, &a0);
	et_stats(g_t.e, b->vol, &b0);
	T_EQ(a0.dirty_blocks, n);
	T_EQ(g_f[0].submits[PMC_IO_WRITE], 0);
	for (int i = 0; i < 4; i++) {
		buf[i] = et_alloc(8 * BS);
		for (uint64_t k = 0; k < 8; k++)
			et_fill(buf[i] + k * BS, b->tag, 512 + (uint64_t)i * 8 + k, 2);
		et_submit(g_q, &r[i], PMC_REQ_WRITE, b->vol, 512 + (uint64_t)i * 8, 8, buf[i], 0);
	}
	for (int i = 0; i < 4; i++) {
		et_wait(g_t.e, g_q, NULL, &r[i].done, 10000, name);
		if (r[i].res)
			T_FAIL("%s: write %d failed: %d", name, i, r[i].res);
	}
	/* overwrite dirty blocks of a, too */
	T_EQ(write_ver(a, 0, 8, 3, 0), 0);
	et_stats(g_t.e, a->vol, &a1);
	et_stats(g_t.e, b->vol, &b1);
	printf("%s: nospace_waits %" PRIu64 ", write_pmem_blocks %" PRIu64
	       ", write_disk_blocks %" PRIu64 ", a written back %" PRIu64 " blocks\n",
	       name, b1.nospace_waits - b0.nospace_waits,
	       b1.write_pmem_blocks - b0.write_pmem_blocks,
	       b1.write_disk_blocks - b0.write_disk_blocks, a1.wb_blocks - a0.wb_blocks);
	if (nospace == PMC_NOSPACE_WAIT) {
		if (b1.nospace_waits == b0.nospace_waits)
			T_FAIL("%s: no write waited for a free block", name);
		if (a1.wb_blocks == a0.wb_blocks)
			T_FAIL("%s: writes completed without write-back freeing blocks", name);
	} else {
		if (b1.write_disk_blocks - b0.write_disk_blocks < 28)
			T_FAIL("%s: %" PRIu64 " blocks went around, expected at least 28", name,
			       b1.write_disk_blocks - b0.write_disk_blocks);
		T_EQ(b1.nospace_waits, b0.nospace_waits);
	}
	expect_engine(b, 512, 32, ONE(2), name);
	expect_engine(a, 0, 8, ONE(3), name);
	expect_engine(a, 8, n - 8, ONE(1), name);
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	expect_disk(b, 512, 32, ONE(2), name);
	expect_disk(a, 0, 8, ONE(3), name);
	expect_disk(a, 8, n - 8, ONE(1), name);
	for (int i = 0; i < 4; i++)
		free(buf[i]);
	teardown();
	printf("ok: %s\n", name);
}

static void sc_nospace(void)
{
	nospace_case(PMC_MODE_WRITE_BACK, PMC_NOSPACE_WAIT);
	nospace_case(PMC_MODE_WRITE_THROUGH, PMC_NOSPACE_WAIT);
	nospace_case(PMC_MODE_WRITE_BACK, PMC_NOSPACE_AROUND);
	nospace_case(PMC_MODE_WRITE_THROUGH, PMC_NOSPACE_AROUND);
}

/* a disk that reports the identity of the file at d->priv */
static int shrunk_identify(struct pmc_disk *d, struct pmc_disk_id *id, struct pmc_err *e)
{
	int fd = open(d->priv, O_RDONLY), rc;

	if (fd < 0)
		return pmc_err_set(e, errno, "%s: %s", (const char *)d->priv, strerror(errno));
	rc = pmc_disk_id_get(fd, d->size, id, e);
	close(fd);
	return rc;
}

static void shrunk_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	pmc_disk_default_ops.submit(d, r, io);
}

static const struct pmc_disk_ops shrunk_ops = {
	.submit = shrunk_submit,
	.identify = shrunk_identify,
};

/*
 * Sequential write bypass: a stream of write-back writes longer than
 * seq_cutoff goes to the disk, also when its requests arrive out of order
 * (one stream's requests reach two queues, or one queue's iteration, in
 * any order); random writes never add up to a stream; the bypassed data
 * reads back through the engine and is on the disk, and the cached copies
 * it overwrote are gone.
 */
static void sc_seq_bypass(void)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *a = &g_v[0];
	struct pmc_vol_stats s0, s1;
	uint64_t order[256], rng = g_seed | 1, v2 = 2, v1 = 1;
	char *buf[2];

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* no write-back: what is cached stays */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	pmc_volume_conf_default(&vc);
	vc.seq_cutoff_bytes = 64 * BS;
	setup("seq_bypass", 1024, 1, 4096, &wb, &vc);
	g_no_steps = 1;
	/* blocks 0..255 cached dirty by 4 KiB writes in random order */
	for (unsigned i = 0; i < 256; i++)
		order[i] = i;
	for (unsigned i = 255; i > 0; i--) {
		unsigned k = (unsigned)(et_rand(&rng) % (i + 1));
		uint64_t t = order[i];

		order[i] = order[k];
		order[k] = t;
	}
	et_stats(g_t.e, a->vol, &s0);
	for (unsigned i = 0; i < 256; i++)
		T_EQ(write_ver(a, order[i], 1, 1, 0), 0);
	et_stats(g_t.e, a->vol, &s1);
	T_EQ(s1.write_bypass_blocks - s0.write_bypass_blocks, 0);
	T_EQ(s1.dirty_blocks, 256);
	/* a stream of 16-block writes over 0..511, each pair submitted swapped */
	buf[0] = et_alloc(16 * BS);
	buf[1] = et_alloc(16 * BS);
	for (uint64_t lba = 0; lba < 512; lba += 32) {
		struct et_req r[2];

		for (unsigned j = 0; j < 2; j++)
			for (uint64_t k = 0; k < 16; k++)
				et_fill(buf[j] + k * BS, a->tag, lba + 16 * j + k, 2);
		et_submit(g_q, &r[1], PMC_REQ_WRITE, a->vol, lba + 16, 16, buf[1], 0);
		et_submit(g_q, &r[0], PMC_REQ_WRITE, a->vol, lba, 16, buf[0], 0);
		for (unsigned j = 0; j < 2; j++) {
			et_wait(g_t.e, g_q, NULL, &r[j].done, 10000, "seq_bypass stream");
			T_EQ(r[j].res, 0);
		}
	}
	et_stats(g_t.e, a->vol, &s0);
	/* all but the first cutoff's worth (and the pair that crossed it) */
	if (s0.write_bypass_blocks - s1.write_bypass_blocks < 512 - 64 - 32)
		T_FAIL("seq_bypass: %llu of 512 blocks of a stream went around the cache, "
		       "expected at least %u",
		       (unsigned long long)(s0.write_bypass_blocks - s1.write_bypass_blocks),
		       512 - 64 - 32);
	expect_engine(a, 0, 256, &v2, 1, "after the stream");
	expect_engine(a, 256, 256, &v2, 1, "after the stream");
	T_OK(pmc_engine_flush_all(g_t.e, g_q, a->vol, NULL, NULL, &err));
	expect_disk(a, 0, 512, &v2, 1, "after the stream and a flush");
	/* random writes again: none goes around */
	et_stats(g_t.e, a->vol, &s0);
	for (unsigned i = 0; i < 256; i++)
		T_EQ(write_ver(a, 1024 + order[i] * 8, 1, 1, 0), 0);
	et_stats(g_t.e, a->vol, &s1);
	T_EQ(s1.write_bypass_blocks - s0.write_bypass_blocks, 0);
	expect_engine(a, 1024 + order[7] * 8, 1, &v1, 1, "a random write");
	free(buf[0]);
	free(buf[1]);
	teardown();
}

/*
 * Write-back pacing: with requests running, write-back keeps busy_inflight
 * writes in flight, and max_inflight once a write waited for a free block
 * (it waits for write-back anyway).
 */
static void sc_wb_pace(void)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct et_vol *a = &g_v[0];
	struct et_req r;
	char *buf = et_alloc(BS);
	uint64_t w0, n;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* below the watermark throughout: only age makes blocks due */
	wb.low_pct = 90;
	wb.max_age_ms = 1; /* every dirty block is due at once */
	wb.max_io_bytes = BS;
	wb.max_inflight = 8;
	wb.busy_inflight = 2;
	wb.idle_ms = 60000; /* requests ran: busy, and a wait counts, throughout */
	pmc_volume_conf_default(&vc);
	setup("wb_pace", 256, 1, 4096, &wb, &vc);
	g_no_steps = 1;
	/* every block of the cache dirty, no two neighbours */
	n = g_t.nr_blocks;
	for (uint64_t k = 0; k < n; k++)
		T_EQ(write_ver(a, k * 2, 1, 1, 0), 0);
	usleep(5000);
	g_f[0].delay_writes = 1000;
	g_f[0].delay_ns = 3000000000ull;
	w0 = g_f[0].submits[PMC_IO_WRITE];
	for (int k = 0; k < 20; k++)
		pmc_engine_writeback_step(g_t.e, g_q);
	T_EQ(g_f[0].submits[PMC_IO_WRITE] - w0, wb.busy_inflight);
	/* one more write: no free block, it waits (nospace = wait) */
	et_fill(buf, a->tag, 1, 1);
	et_submit(g_q, &r, PMC_REQ_WRITE, a->vol, 1, 1, buf, 0);
	for (int k = 0; k < 20 && !r.done; k++)
		pmc_queue_poll(g_q, 0, 0);
	T_TRUE(!r.done);
	for (int k = 0; k < 20; k++)
		pmc_engine_writeback_step(g_t.e, g_q);
	T_EQ(g_f[0].submits[PMC_IO_WRITE] - w0, wb.max_inflight);
	g_f[0].delay_writes = 0;
	et_wait(g_t.e, g_q, g_q, &r.done, 15000, "wb_pace: the waiting write");
	T_EQ(r.res, 0);
	expect_engine(a, 1, 1, &(uint64_t){1}, 1, "the write that waited");
	et_flush_all(&g_t, g_q, NULL);
	free(buf);
	teardown();
}

/*
 * Births are wall-clock times, kept across boots: blocks stored under a
 * clock an hour ahead, then set back (a wrong clock at boot that NTP
 * corrects) were not due by age for that hour, however small max_age_ms,
 * so their data stayed only in the pmem. They are due at once now; blocks
 * born under the right clock still wait for their age.
 */
static void sc_wb_clock_back(void)
{
	struct pmc_wb_conf wb;
	struct pmc_volume_info vi;
	struct et_vol *a = &g_v[0];
	enum pmc_block_state st;
	uint64_t w0, blk;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* below the watermark throughout: only age makes blocks due */
	wb.low_pct = 90;
	wb.max_age_ms = 600000;
	wb.max_io_bytes = BS;
	setup("wb_clock_back", 256, 1, 4096, &wb, NULL);
	g_no_steps = 1;
	for (uint64_t k = 0; k < 10; k++)
		T_EQ(write_ver(a, k * 2, 1, 1, 0), 0);
	for (uint64_t k = 0; k < 8; k++) {
		struct pmc_desc *d;

		T_OK(pmc_cache_lookup_pin(g_t.c, a->vol, k * 2, &blk, &st));
		pmc_cache_unpin(g_t.c, blk);
		d = &g_t.c->descs[blk];
		d->birth_ns += 3600ull * 1000000000ull;
		d->csum = pmc_desc_csum(d);
		pmc_pmem_persist(pmc_cache_pmem(g_t.c), d, sizeof(*d));
	}
	w0 = g_f[0].submits[PMC_IO_WRITE];
	for (int k = 0; k < 50; k++) {
		et_run(g_t.e, g_q, g_q, 100);
		T_OK(pmc_cache_volume_info(g_t.c, a->vol, &vi));
		if (vi.nr_dirty <= 2)
			break;
	}
	et_run(g_t.e, g_q, g_q, 200); /* and no more */
	et_quiesce(g_q, NULL);
	T_OK(pmc_cache_volume_info(g_t.c, a->vol, &vi));
	T_EQ(vi.nr_dirty, 2);
	T_EQ(g_f[0].submits[PMC_IO_WRITE] - w0, 8);
	et_flush_all(&g_t, g_q, NULL);
	teardown();
}

static void *cancel_later(void *arg)
{
	usleep(200000);
	pmc_engine_flush_cancel(arg);
	return NULL;
}

/*
 * A flush that cannot finish soon (its disk's writes take 2 s each; with
 * writers on the device, nothing dirty may never come) is cancelled from
 * another thread, as pmcached's stop and a vanished client do: it returns
 * at once, naming what stays dirty, and a flush after it writes back all.
 */
static void sc_flush_cancel(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *a = &g_v[0];
	pthread_t th;
	uint64_t t0, ms;
	int rc;

	pmc_wb_conf_default(&wb);
	wb.max_io_bytes = BS;
	setup("flush_cancel", 256, 1, 4096, &wb, NULL);
	g_no_steps = 1;
	for (uint64_t k = 0; k < 16; k++)
		T_EQ(write_ver(a, k * 2, 1, 1, 0), 0);
	g_f[0].delay_writes = 1000;
	g_f[0].delay_ns = 2000000000ull;
	T_EQ(pthread_create(&th, NULL, cancel_later, g_t.e), 0);
	t0 = pmc_mono_ns();
	rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
	ms = (pmc_mono_ns() - t0) / 1000000;
	T_EQ(pthread_join(th, NULL), 0);
	T_EQ(rc, -ECANCELED);
	T_TRUE(strstr(err.msg, "flush cancelled;") && strstr(err.msg, "dirty blocks stay"));
	if (ms > 1500)
		T_FAIL("the cancelled flush returned after %" PRIu64 " ms", ms);
	pmc_err_clear(&err);
	g_f[0].delay_writes = 0;
	et_flush_all(&g_t, g_q, NULL);
	expect_engine(a, 0, 1, &(uint64_t){1}, 1, "after the cancelled flush");
	teardown();
}

/*
 * A disk that keeps answering EAGAIN: the ring reissues a few times at
 * once, then each reissue waits a millisecond (it reissued at once for
 * ever: the queue thread spun, its request held); once the disk takes the
 * read, it completes.
 */
static void sc_eagain_backoff(void)
{
	struct et_vol *a = &g_v[0];
	struct et_req r;
	char *buf = et_alloc(BS);
	struct pmc_wb_conf wb;
	uint64_t n0, n, t0;

	pmc_wb_conf_default(&wb);
	setup("eagain_backoff", 256, 1, 4096, &wb, NULL);
	atomic_store(&g_f[0].eagain_reads, 1);
	n0 = g_f[0].eagains[PMC_IO_READ];
	et_submit(g_q, &r, PMC_REQ_READ, a->vol, 100, 1, buf, 0);
	t0 = pmc_mono_ns();
	while (pmc_mono_ns() - t0 < 50000000ull)
		pmc_queue_poll(g_q, 1, 1000000ull);
	n = g_f[0].eagains[PMC_IO_READ] - n0;
	T_TRUE(!r.done);
	if (n > 8 + 50 + 20)
		T_FAIL("a read answered EAGAIN for 50 ms was reissued %" PRIu64 " times", n);
	atomic_store(&g_f[0].eagain_reads, 0);
	et_wait(g_t.e, g_q, NULL, &r.done, 5000, "the read once the disk takes it");
	T_EQ(r.res, 0);
	printf("eagain_backoff: %" PRIu64 " reissues in 50 ms\n", n);
	free(buf);
	teardown();
}

static void sc_refusals(void)
{
	struct pmc_wb_conf wb;
	struct pmc_disk *d;
	char small[256], missing[256], other[256];
	uint32_t vol;

	pmc_wb_conf_default(&wb);
	setup("refusals: disks too small", 64, 1, 1024, &wb, NULL);
	et_path(small, sizeof(small), "small");
	et_disk_create(small, 9, 512);
	et_path(missing, sizeof(missing), "missing");
	unlink(missing);
	T_ERR(pmc_disk_open(small, 512 * BS + 1, &d, &err), ENOSPC, small);
	T_TRUE(strstr(err.msg, "smaller") != NULL);
	T_ERR(pmc_disk_open(missing, 0, &d, &err), ENOENT, missing);
	/* the size is exactly enough */
	T_OK(pmc_disk_open(small, 512 * BS, &d, &err));
	/* attaching the same volume twice */
	{
		struct pmc_disk *d2;

		et_path(other, sizeof(other), "other");
		et_disk_create(other, 1, 1024);
		T_OK(pmc_disk_open(other, 0, &d2, &err));
		T_ERR(pmc_engine_attach(g_t.e, g_v[0].name, d2, NULL, &vol, &err), EBUSY,
		      g_v[0].name);
		pmc_disk_close(d2);
	}
	/* a volume the cache knows needs its own disk (diskid.h) ... */
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	et_open(&g_t, 0);
	T_ERR(pmc_engine_attach(g_t.e, g_v[0].name, d, NULL, &vol, &err), EXDEV, "wrong disk");
	/* ... at least as large as recorded: the small one standing for the
	 * volume's own disk, shrunk */
	d->ops = &shrunk_ops;
	d->priv = g_v[0].path;
	T_ERR(pmc_engine_attach(g_t.e, g_v[0].name, d, NULL, &vol, &err), ENOSPC, g_v[0].name);
	T_TRUE(strstr(err.msg, small) != NULL);
	pmc_disk_close(d); /* refused: still ours */
	/* the right disk is accepted, with its data */
	et_attach(&g_t, &g_v[0], NULL, NULL, NULL);
	g_q = et_queue(g_t.e, 8);
	expect_engine(&g_v[0], 0, 16, ONE(0), "reattached");
	teardown();
	printf("ok: refusals\n");
}

/*
 * Write-back pins a run of dirty blocks (wb_pin), then claims them for the
 * disk (wb_claim). A foreground write or discard that replaces or drops one
 * of them in between (forced here through the test hook) must make the
 * claim fail: the old copy would otherwise reach the disk, possibly after
 * the newer data went there another way (write-through, write-around).
 */
static struct {
	int armed;
	int drop;	/* invalidate instead of overwriting */
	struct et_vol *v;
	uint64_t lba;
} g_wbr;

static void wb_pinned(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n)
{
	char *buf;

	if (!g_wbr.armed || vol != g_wbr.v->vol || g_wbr.lba < lba || g_wbr.lba >= lba + n)
		return;
	g_wbr.armed = 0;
	if (g_wbr.drop) {
		T_EQ(pmc_cache_invalidate(g_t.c, vol, g_wbr.lba, 1), 0);
		return;
	}
	buf = et_alloc(BS);
	et_fill(buf, g_wbr.v->tag, g_wbr.lba, 2);
	T_OK(pmc_cache_write(g_t.c, vol, g_wbr.lba, 1, buf, &err));
	free(buf);
}

static void wb_race_case(int drop, const char *name)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	int started;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* write-back only when asked */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	setup(name, 256, 1, 256, &wb, NULL);
	g_no_steps = 1;
	T_EQ(write_ver(v, 5, 3, 1, 0), 0);
	g_wbr.armed = 1;
	g_wbr.drop = drop;
	g_wbr.v = v;
	g_wbr.lba = 6;
	pmc_test_wb_pinned = wb_pinned;
	aggressive_wb();
	started = pmc_engine_writeback_step(g_t.e, g_q);
	pmc_engine_set_wb_conf(g_t.e, &wb);
	pmc_test_wb_pinned = NULL;
	if (g_wbr.armed)
		T_FAIL("%s: write-back never pinned block 6", name);
	et_quiesce(g_q, NULL);
	if (started || f->submits[PMC_IO_WRITE])
		T_FAIL("%s: write-back started %d writes (%" PRIu64 " reached the disk) of blocks "
		       "5..7 although block 6 was %s after they were pinned",
		       name, started, f->submits[PMC_IO_WRITE], drop ? "dropped" : "overwritten");
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	expect_disk(v, 5, 1, ONE(1), name);
	expect_disk(v, 6, 1, ONE(drop ? 0 : 2), name);
	expect_disk(v, 7, 1, ONE(1), name);
	expect_engine(v, 6, 1, ONE(drop ? 0 : 2), name);
	teardown();
	printf("ok: %s\n", name);
}

static void sc_wb_race(void)
{
	wb_race_case(0, "wb_race: a block overwritten between write-back's pin and claim");
	wb_race_case(1, "wb_race: a block dropped between write-back's pin and claim");
}

/* blocks lba..+n of v are durable on f's volatile cache model */
static void durable(struct et_vol *v, struct fdisk *f, uint64_t lba, uint64_t n, const char *when)
{
	for (uint64_t b = lba; b < lba + n; b++)
		if (f->unsynced[b])
			T_FAIL("%s: vol %s block %" PRIu64 " is still only in the disk's volatile "
			       "cache",
			       when, v->name, b);
}

static void durable_mode(enum pmc_mode mode)
{
	T_OK(pmc_engine_set_mode(g_t.e, g_v[0].vol, mode, &err));
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err)); /* the switch */
}

static void sc_durable(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	enum pmc_block_state st;
	uint64_t syncs;

	pmc_wb_conf_default(&wb);
	wb.high_pct = 100; /* write-back only when asked */
	wb.low_pct = 100;
	wb.max_age_ms = 600000;
	setup("durable: a disk with a volatile write cache", 256, 1, 512, &wb, NULL);
	g_no_steps = 1;
	f->nblocks = v->nblocks;
	f->unsynced = calloc(v->nblocks, sizeof(*f->unsynced));
	T_TRUE(f->unsynced != NULL);

	/* write-back: a block is marked clean only once durable on the disk */
	T_EQ(write_ver(v, 0, 8, 1, 0), 0);
	T_OK(pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err));
	for (uint64_t b = 0; b < 8; b++)
		T_TRUE(cached(v, b, &st) && st == PMC_BLK_CLEAN);
	durable(v, f, 0, 8, "write-back: blocks marked clean");

	/* write-through: durable when acknowledged, FUA or not */
	durable_mode(PMC_MODE_WRITE_THROUGH);
	T_EQ(write_ver(v, 16, 8, 2, 0), 0);
	durable(v, f, 16, 8, "write-through: an acknowledged write");
	T_EQ(write_ver(v, 24, 2, 2, PMC_REQ_FUA), 0);
	durable(v, f, 24, 2, "write-through: an acknowledged FUA write");

	/* write-around and pass-through: FUA at once, plain writes by a flush */
	for (int m = PMC_MODE_WRITE_AROUND; m <= PMC_MODE_PASS_THROUGH; m++) {
		uint64_t base = 32 + (uint64_t)(m - PMC_MODE_WRITE_AROUND) * 32;
		char when[96];

		durable_mode((enum pmc_mode)m);
		T_EQ(write_ver(v, base, 4, 3, PMC_REQ_FUA), 0);
		snprintf(when, sizeof(when), "%s: an acknowledged FUA write",
			 pmc_mode_name((enum pmc_mode)m));
		durable(v, f, base, 4, when);
		T_EQ(write_ver(v, base + 8, 4, 3, 0), 0);
		T_EQ(write_ver(v, base + 16, 1, 3, 0), 0);
		T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_FLUSH, v->vol, 0, 0, NULL, 0), 0);
		snprintf(when, sizeof(when), "%s: plain writes, then a flush",
			 pmc_mode_name((enum pmc_mode)m));
		durable(v, f, base + 8, 9, when);
	}
	/* the model itself: a plain write is not durable before a flush */
	syncs = f->submits[PMC_IO_FSYNC];
	T_EQ(write_ver(v, 100, 1, 4, 0), 0);
	if (!f->unsynced[100] && f->submits[PMC_IO_FSYNC] == syncs)
		T_FAIL("durable: the volatile cache model lost track of a plain write");

	/* a device that promised no volatile cache: every write durable at
	 * once. Saying so syncs the disk (ORDERING.md) with an fdatasync of
	 * its own, not through the disk's ops: the model sees no sync then */
	pmc_engine_set_volatile(g_t.e, v->vol, 0);
	memset(f->unsynced, 0, v->nblocks * sizeof(*f->unsynced));
	T_EQ(write_ver(v, 110, 4, 5, 0), 0);
	durable(v, f, 110, 4, "no volatile cache: an acknowledged plain write");
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_FLUSH, v->vol, 0, 0, NULL, 0), 0);
	durable(v, f, 0, v->nblocks, "after the last flush");
	expect_disk(v, 16, 8, ONE(2), "durable");
	teardown();
	printf("ok: durable\n");
}


/* no block of v cached CLEAN while the disk holds it only in its volatile
 * cache; returns how many blocks of lba..+n are CLEAN */
static uint64_t clean_only_durable(struct et_vol *v, struct fdisk *f, uint64_t lba, uint64_t n,
				   const char *when)
{
	uint64_t clean = 0;

	for (uint64_t b = lba; b < lba + n; b++) {
		enum pmc_block_state st;

		if (!cached(v, b, &st) || st != PMC_BLK_CLEAN)
			continue;
		clean++;
		if (f->unsynced[b])
			T_FAIL("%s: vol %s block %" PRIu64 " is marked clean while the disk holds "
			       "it only in its volatile cache",
			       when, v->name, b);
	}
	return clean;
}

/*
 * wb_sync: write-back writes a round without RWF_DSYNC, then syncs the
 * disk once, and marks the blocks clean only when that sync completed.
 * The sync is held back 300 ms by the disk: until then every block stays
 * DIRTY (though every write completed), and no CLEAN block is ever only
 * in the disk's volatile cache.
 */
static void sc_wb_sync(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	struct pmc_vol_stats s;
	uint64_t t0;

	base_wb(&wb);
	setup("wb_sync: write-back writes, one sync, then clean", 256, 1, 512, &wb, NULL);
	f->nblocks = v->nblocks;
	f->unsynced = calloc(v->nblocks, sizeof(*f->unsynced));
	T_TRUE(f->unsynced != NULL);
	g_no_steps = 1;
	for (uint64_t lba = 0; lba < 64; lba += 16)
		T_EQ(write_ver(v, lba * 2, 8, 5, 0), 0); /* 4 runs of 8, apart */
	T_EQ(f->submits[PMC_IO_WRITE], 0);
	f->delay_syncs = 1;
	f->sync_delay_ns = 300000000ull;
	t0 = pmc_mono_ns();
	while (pmc_mono_ns() - t0 < 250000000ull) {
		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_queue_poll(g_q, 0, 1000000ull);
		if (clean_only_durable(v, f, 0, 128, "sync held back"))
			T_FAIL("write-back marked blocks clean before its sync completed");
	}
	if (!f->submits[PMC_IO_WRITE])
		T_FAIL("write-back wrote nothing in 250 ms");
	if (f->dsync_writes)
		T_FAIL("write-back wrote %" PRIu64 " of %" PRIu64 " writes with RWF_DSYNC: a "
		       "round's writes are plain, one sync makes them durable",
		       f->dsync_writes, f->submits[PMC_IO_WRITE]);
	if (f->submits[PMC_IO_FSYNC] != 1)
		T_FAIL("write-back issued %" PRIu64 " syncs for one round of %" PRIu64
		       " writes, expected 1",
		       f->submits[PMC_IO_FSYNC], f->submits[PMC_IO_WRITE]);
	for (uint64_t lba = 0; lba < 64; lba += 16)
		for (uint64_t b = lba * 2; b < lba * 2 + 8; b++) {
			enum pmc_block_state st;

			if (!cached(v, b, &st) || st != PMC_BLK_DIRTY)
				T_FAIL("block %" PRIu64 " is not DIRTY while its write-back "
				       "sync is held back",
				       b);
		}
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.wb_blocks, 0);
	T_EQ(s.dirty_blocks, 32);
	/* the sync lands: every block clean, each durable */
	t0 = pmc_mono_ns();
	while (pmc_mono_ns() - t0 < 5000000000ull) {
		uint64_t clean;

		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_queue_poll(g_q, 0, 1000000ull);
		clean = clean_only_durable(v, f, 0, 128, "after the sync");
		if (clean == 32 && pmc_queue_busy(g_q) == 0)
			break;
	}
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.dirty_blocks, 0);
	T_EQ(s.wb_blocks, 32);
	T_EQ(s.wb_errors, 0);
	durable(v, f, 0, 128, "write-back done");
	expect_disk(v, 0, 8, ONE(5), "write-back done");
	printf("%" PRIu64 " write-back writes, %" PRIu64 " sync\n", f->submits[PMC_IO_WRITE],
	       f->submits[PMC_IO_FSYNC]);
	teardown();
	printf("ok: wb_sync\n");
}

/* step write-back until want of v's blocks [0, n) are clean (20 s at
 * most), before of them clean at the start; every block marked clean is
 * durable on the way. Returns the writes submitted when the first block
 * became clean. */
static uint64_t wb_until_clean(struct et_vol *v, struct fdisk *f, uint64_t n, uint64_t before,
			       uint64_t want, const char *when)
{
	uint64_t t0 = pmc_mono_ns(), first = UINT64_MAX, clean = 0;

	while (pmc_mono_ns() - t0 < 20000000000ull) {
		pmc_engine_writeback_step(g_t.e, g_q);
		pmc_queue_poll(g_q, 0, 1000000ull);
		clean = clean_only_durable(v, f, 0, n, when);
		if (clean > before && first == UINT64_MAX)
			first = f->submits[PMC_IO_WRITE];
		if (clean == want && pmc_queue_busy(g_q) == 0)
			break;
	}
	if (clean != want)
		T_FAIL("%s: %" PRIu64 " of %" PRIu64 " blocks clean after 20 s", when, clean, want);
	return first;
}

/*
 * wb_batch: write-back held to one write in flight (a busy disk) writes
 * many separate runs, one per step; one sync covers the writes of many
 * steps (each sync is a cache flush on a disk with a volatile cache), not
 * one sync per step. A round still stops taking writes after WB_ROUND_NS:
 * with more blocks than a sweep collects and the first writes taking
 * 30 ms, blocks become clean while write-back is still writing the rest,
 * not only once it ran out of candidates.
 */
static void sc_wb_batch(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	uint64_t writes, syncs, first;

	base_wb(&wb);
	wb.max_inflight = 1;
	wb.busy_inflight = 1;
	setup("wb_batch: one sync for the writes of many steps", 2048, 1, 4096, &wb, NULL);
	f->nblocks = v->nblocks;
	f->unsynced = calloc(v->nblocks, sizeof(*f->unsynced));
	T_TRUE(f->unsynced != NULL);
	g_no_steps = 1;
	for (uint64_t i = 0; i < 32; i++)
		T_EQ(write_ver(v, i * 4, 2, 3, 0), 0); /* 32 runs of 2, apart */
	wb_until_clean(v, f, 128, 0, 64, "32 runs, one write in flight");
	writes = f->submits[PMC_IO_WRITE];
	syncs = f->submits[PMC_IO_FSYNC];
	printf("%" PRIu64 " write-back writes, %" PRIu64 " syncs\n", writes, syncs);
	T_EQ(writes, 32);
	if (syncs > writes / 4)
		T_FAIL("write-back issued %" PRIu64 " syncs for %" PRIu64 " writes started one per "
		       "step: a sync per step, not per round",
		       syncs, writes);
	durable(v, f, 0, 128, "32 runs written back");
	expect_disk(v, 0, 2, ONE(3), "32 runs written back");
	expect_disk(v, 124, 2, ONE(3), "32 runs written back");
	/* more separate blocks than a sweep collects, the first writes slow:
	 * the round is sealed by its age, not once write-back ran out of
	 * candidates */
	for (uint64_t i = 0; i < 1000; i++)
		T_EQ(write_ver(v, 1024 + i * 2, 1, 4, 0), 0);
	f->delay_writes = 4;
	f->delay_ns = 30000000ull;
	first = wb_until_clean(v, f, 3072, 64, 1064, "1000 blocks, 30 ms writes first") - writes;
	printf("first block clean after %" PRIu64 " of 1000 writes, the first 4 of 30 ms; "
	       "at most %" PRIu64 " writes per sync\n",
	       first, f->max_cover);
	if (f->max_cover > 64)
		T_FAIL("a sync covered %" PRIu64 " write-back writes: a round takes 64 at most "
		       "(each stays in the in-flight list that every claim walks)",
		       f->max_cover);
	if (first >= 16)
		T_FAIL("no block was clean before %" PRIu64 " writes were started, the first of "
		       "them 30 ms long: a round took writes longer than WB_ROUND_NS (20 ms)",
		       first);
	durable(v, f, 0, 3072, "1000 blocks written back");
	expect_disk(v, 3022, 1, ONE(4), "1000 blocks written back");
	/* a discard of blocks whose write-back write completed and waits in
	 * an open round: held until that round's sync, which it gets without
	 * another write-back step */
	for (uint64_t i = 0; i < 4; i++)
		T_EQ(write_ver(v, 3100 + i * 4, 2, 5, 0), 0);
	writes = f->submits[PMC_IO_WRITE];
	T_EQ(pmc_engine_writeback_step(g_t.e, g_q), 1);
	while (f->submits[PMC_IO_WRITE] == writes || pmc_queue_busy(g_q))
		pmc_queue_poll(g_q, 1, 1000000ull);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_DISCARD, v->vol, 3100, 2, NULL, 0), 0);
	expect_engine(v, 3100, 2, ONE(EV_ZERO), "discarded under write-back");
	wb_until_clean(v, f, 3116, 1064, 1070, "the runs after the discard");
	expect_disk(v, 3100, 2, ONE(EV_ZERO), "discarded under write-back");
	expect_disk(v, 3112, 2, ONE(5), "written back after the discard");
	teardown();
	printf("ok: wb_batch\n");
}

/*
 * wb_sync_fail: the writes of a round succeed, its sync fails: every block
 * stays dirty (the data may be lost from the disk's cache), the volume's
 * sticky error is set, write-back backs off and retries; healed, flush_all
 * writes everything and the blocks become clean.
 */
static void sc_wb_sync_fail(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	struct pmc_vol_stats s;

	base_wb(&wb);
	setup("wb_sync_fail: write-back's sync fails", 256, 1, 512, &wb, NULL);
	f->nblocks = v->nblocks;
	f->unsynced = calloc(v->nblocks, sizeof(*f->unsynced));
	T_TRUE(f->unsynced != NULL);
	f->fail[PMC_IO_FSYNC] = EIO;
	T_EQ(write_ver(v, 10, 8, 6, 0), 0);
	T_EQ(write_ver(v, 40, 3, 6, 0), 0);
	et_run(g_t.e, g_q, g_q, 300);
	if (!f->submits[PMC_IO_WRITE] || !f->failed[PMC_IO_FSYNC])
		T_FAIL("write-back wrote %" PRIu64 " times and tried %" PRIu64 " syncs in 300 ms",
		       f->submits[PMC_IO_WRITE], f->submits[PMC_IO_FSYNC]);
	/* back-off after each failed sync: 40, 80, 160 ms */
	if (f->failed[PMC_IO_FSYNC] > 5)
		T_FAIL("%" PRIu64 " failed syncs in 300 ms with a 40 ms back-off doubling",
		       f->failed[PMC_IO_FSYNC]);
	for (uint64_t b = 0; b < 64; b++) {
		enum pmc_block_state st;
		int want = (b >= 10 && b < 18) || (b >= 40 && b < 43);

		if (want && (!cached(v, b, &st) || st != PMC_BLK_DIRTY))
			T_FAIL("block %" PRIu64 " is not DIRTY after its write-back sync failed", b);
	}
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), EIO);
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.error, EIO);
	T_EQ(s.wb_blocks, 0);
	T_EQ(s.dirty_blocks, 11);
	T_TRUE(s.wb_errors >= 1);
	expect_engine(v, 10, 8, ONE(6), "write-back sync failed");
	heal_and_flush(v, f);
	et_stats(g_t.e, v->vol, &s);
	T_EQ(s.dirty_blocks, 0);
	durable(v, f, 0, v->nblocks, "healed, flushed");
	expect_disk(v, 10, 8, ONE(6), "healed, flushed");
	expect_disk(v, 40, 3, ONE(6), "healed, flushed");
	teardown();
	printf("ok: wb_sync_fail\n");
}

static void sc_stale_error(void)
{
	struct pmc_wb_conf wb;
	struct et_vol *v = &g_v[0];
	struct fdisk *f = &g_f[0];
	struct pmc_vol_stats s;

	base_wb(&wb);
	wb.retry_ms = 10000; /* a back-off would keep the blocks dirty all test long */
	setup("stale_error: failures of I/O started before the error was cleared", 256, 1, 512,
	      &wb, NULL);
	f->delay_writes = 64;
	f->delay_ns = 200000000ull;
	f->doom_delayed = 1;
	T_EQ(write_ver(v, 10, 8, 6, 0), 0);
	T_EQ(write_ver(v, 40, 3, 6, 0), 0);
	et_run(g_t.e, g_q, g_q, 50);
	if (!f->ndoomed || f->failed[PMC_IO_WRITE])
		T_FAIL("write-back has %u writes held at the disk and %" PRIu64 " failed after 50 ms",
		       f->ndoomed, f->failed[PMC_IO_WRITE]);
	/* the path comes back: new I/O goes through; what is in flight on
	 * the old one fails later */
	f->delay_writes = 0;
	pmc_engine_clear_error(g_t.e, v->vol);
	et_run(g_t.e, g_q, g_q, 600);
	T_EQ(f->ndoomed, 0);
	T_TRUE(f->failed[PMC_IO_WRITE] >= 1);
	et_stats(g_t.e, v->vol, &s);
	T_TRUE(s.wb_errors >= 1);
	if (pmc_engine_volume_error(g_t.e, v->vol))
		T_FAIL("a write-back write started before the clear set the volume's error %d",
		       pmc_engine_volume_error(g_t.e, v->vol));
	T_EQ(s.error, 0);
	if (s.dirty_blocks)
		T_FAIL("%" PRIu64 " blocks still dirty 600 ms after the old path's failures: "
		       "write-back backed off", s.dirty_blocks);
	expect_disk(v, 10, 8, ONE(6), "written again after the old path failed");
	expect_disk(v, 40, 3, ONE(6), "written again after the old path failed");
	/* a failure after the clear is the volume's again */
	f->fail[PMC_IO_WRITE] = EIO;
	T_EQ(write_ver(v, 80, 2, 7, 0), 0);
	et_run(g_t.e, g_q, g_q, 100);
	T_EQ(pmc_engine_volume_error(g_t.e, v->vol), EIO);
	heal_and_flush(v, f);
	expect_disk(v, 80, 2, ONE(7), "healed, flushed");
	teardown();
	printf("ok: stale_error\n");
}

static const struct {
	const char *name;
	void (*fn)(void);
} scenarios[] = {
    {"refusals", sc_refusals},	     {"wb_error", sc_wb_error},
    {"wb_backoff", sc_wb_backoff},   {"wb_fair", sc_wb_fair},
    {"wb_window", sc_wb_window},     {"wb_kept", sc_wb_kept},
    {"wb_rebuild", sc_wb_rebuild},   {"read_error", sc_read_error},
    {"read_span", sc_read_span},     {"write_error", sc_write_error},
    {"flush_fail", sc_flush_fail},   {"short_eagain", sc_short_eagain},
    {"latency", sc_latency},	     {"nospace", sc_nospace},
    {"wb_order", sc_wb_order},	     {"around_dirty", sc_around_dirty},
    {"wb_race", sc_wb_race},	     {"durable", sc_durable},
    {"wb_sync", sc_wb_sync},	     {"wb_sync_fail", sc_wb_sync_fail},
    {"seq_bypass", sc_seq_bypass},   {"wb_pace", sc_wb_pace},
    {"wb_clock_back", sc_wb_clock_back},
    {"flush_cancel", sc_flush_cancel},
    {"eagain_backoff", sc_eagain_backoff},
    {"stale_error", sc_stale_error}, {"wb_batch", sc_wb_batch},
    {"wb_corrupt", sc_wb_corrupt},   {"idx_corrupt", sc_idx_corrupt},
    {"wb_hung", sc_wb_hung},	     {"attach_slow_id", sc_attach_slow_id},
    {"flush_unattached", sc_flush_unattached},
};

int main(int argc, char **argv)
{
	const char *only = NULL;

	g_seed = et_seed_arg(argc, argv, NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[i + 1];
		if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
			enum pmc_mode md;

			if (pmc_mode_parse(argv[i + 1], &md))
				T_FAIL("--mode %s: not a mode", argv[i + 1]);
			g_only_mode = (int)md;
		}
	}
	printf("seed: %" PRIu64 "\n", g_seed);
	if (only) {
		size_t i;

		for (i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
			if (!strcmp(only, scenarios[i].name))
				break;
		if (i == sizeof(scenarios) / sizeof(scenarios[0]))
			T_FAIL("--only %s: no such scenario", only);
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (!only || !strcmp(only, scenarios[i].name))
			scenarios[i].fn();
	return et_exit("engine_faults", g_seed);
}
