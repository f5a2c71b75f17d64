/* engine_wb.c - write-back.
 *
 * Finding dirty blocks costs what the dirty blocks cost, not what the cache
 * size does: write-back walks the core's DRAM dirty map (1 bit per block,
 * pmc_cache_dirty_next) with a cursor. After an open the map lacks the
 * dirty blocks of the previous boot until pmc_cache_dirty_rebuild has read
 * every descriptor (at once if nothing is dirty); each write-back step,
 * also one with nothing to write, runs WB_REBUILD descriptors of that
 * rebuild and, until it is complete, sweeps the descriptor table with
 * the old cursor (WB_SCAN descriptors per step), so those blocks are
 * written back meanwhile and no request waits for the rebuild. A marked
 * block that is not the live dirty copy of its key is dropped from the map
 * (pmc_cache_dirty_forget). A full pass (the map's end, or every
 * descriptor) publishes each volume's oldest dirty birth.
 *
 * Of the blocks found, write-back picks live dirty ones (all of them above
 * the high watermark until below the low one, otherwise those older than
 * max_age or of a draining volume), sorts them by (volume, LBA) and merges
 * neighbours (also looked up beyond the sweep) into writes of up to
 * max_io_bytes from pinned pmem blocks (no bounce buffer); the volumes
 * take turns at coming first (items_order), so the in-flight limit does
 * not always go to the lowest-numbered ones. A step stopped by the
 * in-flight limit leaves the candidates it did not take to the steps after
 * it, which take them without sweeping again (each is checked at its turn:
 * still the live dirty copy, its volume not backed off), for WB_KEEP_NS at
 * most and while the selection stands (the watermarks, a flush, a drain):
 * with a few writes in flight each step starts about one, and sweeping and
 * sorting WB_BATCH candidates for it cost the write-back thread more CPU
 * than the writes. The map's cursor only moves forward, so no window of
 * blocks that foreground writes keep dirtying can hold it.
 *
 * Durability (lib/ORDERING.md): a volume's write-back writes are grouped
 * in rounds. They are plain writes (no RWF_DSYNC); once a round is sealed
 * and every write of it completed, one sync (PMC_IO_FSYNC: fdatasync
 * through the disk's ops) is issued, and only when it succeeded are the
 * blocks of the writes that succeeded marked clean (pmc_cache_mark_clean_n:
 * one persist barrier per batch of 64 blocks), as dm-writecache does.
 *
 * A round stays open across steps while write-back has more to start than
 * the in-flight limit lets it (busy write-back starts a write or two per
 * step), for WB_ROUND_NS, WB_ROUND_BYTES and WB_ROUND_WRITES at most: on a
 * disk with a volatile cache every sync is a cache flush, and one per step
 * made write-back wait for a flush per two or three writes. A step that
 * took every candidate seals the open rounds (nothing more is coming), and
 * so does a foreground disk write held by one of their writes.
 *
 * A failed write leaves its blocks dirty; a failed sync leaves every block
 * of the round dirty. Either sets the volume's sticky error and backs the
 * volume off (doubling once per failed retry however many of its writes
 * fail, up to 60 s; a flush starts the back-off over).
 * A write stays in the in-flight list, pinned, until its round's sync
 * completed and its blocks were marked clean: foreground disk writes of
 * those blocks wait for that.
 *
 * Locking: write-back state belongs to the thread in writeback_step
 * (wb_lock); its disk writes in flight are listed under dw_lock so that
 * foreground disk writes of the same blocks wait for them. A round's
 * writes and its sync run on the queue of the step that started them.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

/* --- write-back --- */

static struct wb_io *wb_get(struct pmc_engine *e)
{
	struct wb_io *w = e->wb_free;

	if (w) {
		e->wb_free = w->next;
		return w;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->blk = calloc(e->max_io_blocks, sizeof(*w->blk));
	w->iov = calloc(e->max_io_blocks, sizeof(*w->iov));
	if (!w->blk || !w->iov) {
		free(w->blk);
		free(w->iov);
		free(w);
		return NULL;
	}
	return w;
}

/* wb_lock held */
static struct wb_round *round_get(struct pmc_engine *e, uint32_t vol, uint64_t now)
{
	struct wb_round *r = e->wb_round_free;

	if (r)
		e->wb_round_free = r->next;
	else if (!(r = calloc(1, sizeof(*r))))
		return NULL;
	memset(r, 0, sizeof(*r));
	r->e = e;
	r->vol = vol;
	r->open_ns = now;
	r->fail_round = e->vols[vol].wb_fail_round;
	return r;
}

/* a write leaves: unpinned, out of the in-flight list, free; wb_lock held */
static void wb_release(struct pmc_engine *e, struct wb_io *w)
{
	for (uint32_t i = 0; i < w->n; i++)
		pmc_cache_unpin(e->c, w->blk[i]);
	pthread_mutex_lock(&e->dw_lock);
	*w->fprev = w->fnext;
	if (w->fnext)
		w->fnext->fprev = w->fprev;
	pthread_mutex_unlock(&e->dw_lock);
	w->next = e->wb_free;
	e->wb_free = w;
}

/* a completed write leaves its round unsynced or synced; wb_lock held */
static void held_release(struct pmc_engine *e, struct wb_io *w)
{
	e->wb_held_bytes -= (uint64_t)w->n * e->bs;
	e->vols[w->vol].wb_held -= (uint64_t)w->n * e->bs;
	wb_release(e, w);
}

/* a write or sync of v completed at now: it progresses; wb_lock held */
static void wb_progress(struct pmc_evol *v, uint64_t now)
{
	v->wb_progress_ns = now;
	if (v->wb_stalled) {
		v->wb_stalled = 0;
		pmc_log(LOG_NOTICE, "volume %s: write-back to its disk progresses again",
			v->name);
	}
}

/*
 * Is v stalled at now: write-back writes or syncs in flight and none
 * completed for stall_ms (a disk that stopped answering, a fabric path
 * queueing its I/O until ctrl_loss_tmo)? Logged once per stall. wb_lock
 * held.
 */
static int wb_stalled(struct pmc_evol *v, uint64_t now, uint64_t stall_ns)
{
	if (!v->wb_busy || now < v->wb_progress_ns || now - v->wb_progress_ns <= stall_ns)
		return 0;
	if (!v->wb_stalled) {
		v->wb_stalled = 1;
		pmc_log(LOG_WARNING,
			"volume %s: write-back to its disk completed nothing for %" PRIu64
			" ms (%u writes in flight): the other volumes write back meanwhile",
			v->name, (now - v->wb_progress_ns) / 1000000, v->wb_writes);
	}
	return 1;
}

/* r leaves: its completed writes unsynced (their blocks stay dirty), r
 * free; wb_lock held */
static void round_free(struct pmc_engine *e, struct wb_round *r)
{
	while (r->done) {
		struct wb_io *w = r->done;

		r->done = w->next;
		held_release(e, w);
	}
	r->next = e->wb_round_free;
	e->wb_round_free = r;
}

/* a write or sync of r's volume failed: sticky error, back-off; wb_lock held */
static void wb_failed(struct pmc_engine *e, struct pmc_vol_stats *st, struct wb_round *r, int res,
		      const char *what, uint32_t epoch)
{
	struct pmc_evol *v = &e->vols[r->vol];

	STAT_ADD(st, wb_errors, 1);
	/* the old path's failure: no back-off, the blocks are retried now */
	if (!pmc_eng_volume_failed(e, r->vol, res, what, epoch))
		return;
	/* one failed retry, however many of its writes (and syncs) fail: the
	 * back-off doubles once per retry, not once per write */
	if (r->fail_round == v->wb_fail_round) {
		unsigned b = atomic_load(&v->backoff_ms);

		v->wb_fail_round++;
		atomic_fetch_add(&v->fail_streak, 1);
		b = b ? (b * 2 > WB_BACKOFF_MAX_MS ? WB_BACKOFF_MAX_MS : b * 2) : e->wb.retry_ms;
		atomic_store(&v->backoff_ms, b);
		atomic_store(&v->retry_at_ns, pmc_mono_ns() + (uint64_t)b * 1000000ull);
	}
}

/*
 * Mark the blocks of r's completed writes clean, WB_CLEAN_BATCH at a time
 * (one persist barrier each; a batch holds the stripe locks of all its
 * blocks): 4 barriers where 256 would take 1. (ThreadSanitizer builds
 * have few stripes, lib/cache.c, so its deadlock detector, which tracks
 * 64 held locks per thread, is not what bounds the batch.)
 */
#define WB_CLEAN_BATCH 64u
/* a write issued before the volume's error was cleared (its path came
 * back: pmc_engine_clear_error) may have been lost with the target's
 * volatile cache meanwhile, whatever a later sync says: not made clean,
 * written again */
static uint32_t round_epoch(struct pmc_engine *e, const struct wb_round *r)
{
	return atomic_load_explicit(&e->vols[r->vol].err_epoch, memory_order_acquire);
}

/* epoch: round_epoch() once per round, so that what is counted is what was cleaned */
static void round_mark_clean(struct pmc_engine *e, struct wb_round *r, uint32_t epoch)
{
	uint64_t lba[WB_CLEAN_BATCH], blk[WB_CLEAN_BATCH];
	int res[WB_CLEAN_BATCH];
	uint32_t n = 0, stale = 0;

	for (struct wb_io *w = r->done; w; w = w->next) {
		if (w->io.epoch != epoch) {
			stale += w->n;
			continue;
		}
		for (uint32_t i = 0; i < w->n; i++) {
			lba[n] = w->lba + i;
			blk[n] = w->blk[i];
			if (++n == WB_CLEAN_BATCH) {
				pmc_cache_mark_clean_n(e->c, r->vol, lba, blk, n, res);
				n = 0;
			}
		}
	}
	if (n)
		pmc_cache_mark_clean_n(e->c, r->vol, lba, blk, n, res);
	if (stale)
		pmc_log_ratelimited(&e->vols[r->vol].rl, LOG_WARNING,
				    "volume %s: %u blocks written back before its path came back "
				    "stay dirty: written again (the target may have lost them)",
				    e->vols[r->vol].name, stale);
}

/* the round's sync completed: clean only what it made durable */
static void round_synced(struct pmc_io *io, int res)
{
	struct wb_round *r = (struct wb_round *)io;
	struct pmc_engine *e = r->e;
	struct pmc_evol *v = &e->vols[r->vol];
	struct pmc_vol_stats *st = &r->q->stats[r->vol];
	uint32_t epoch = round_epoch(e, r);

	if (res == 0) {
		pmc_eng_synced_advance(v, r->gen);
		round_mark_clean(e, r, epoch);
	} else {
		/* first: a host FLUSH from now on, or one whose sync is in
		 * flight, must fail (pmc_eng_start_flush, simple_done) */
		pmc_eng_sync_lost(v, r->gen, res);
	}
	pthread_mutex_lock(&e->wb_lock);
	v->wb_busy--;
	wb_progress(v, pmc_eng_queue_now(r->q));
	while (r->done) {
		struct wb_io *w = r->done;

		r->done = w->next;
		if (res == 0 && w->io.epoch == epoch) {
			STAT_ADD(st, wb_ios, 1);
			STAT_ADD(st, wb_blocks, w->n);
			STAT_ADD(st, wb_bytes, (uint64_t)w->n * e->bs);
			STAT_ADD(st, wb_merged_blocks, w->n - 1);
		}
		pmc_eng_stat_lat(r->q, st, PMC_LAT_WRITEBACK, w->start_ns);
		held_release(e, w);
	}
	if (res == 0) {
		atomic_store(&v->backoff_ms, 0);
		atomic_store(&v->fail_streak, 0);
	} else {
		wb_failed(e, st, r, res, "write-back sync", io->epoch);
	}
	round_free(e, r);
	pthread_mutex_unlock(&e->wb_lock);
}

/*
 * r is sealed and none of its writes is in flight: sync what completed
 * (r then leaves in round_synced), or free r when nothing did. wb_lock
 * held; returns r if its sync is to be submitted after the unlock.
 */
static struct wb_round *round_close(struct pmc_engine *e, struct wb_round *r)
{
	struct pmc_io *io = &r->io;

	/* nothing completed, or its volume was detached meanwhile: no disk
	 * to sync, the blocks stay dirty (written back after the next attach) */
	if (!r->done || !e->vols[r->vol].disk) {
		round_free(e, r);
		return NULL;
	}
	memset(io, 0, sizeof(*io));
	io->op = PMC_IO_FSYNC;
	io->disk = e->vols[r->vol].disk;
	io->cb = round_synced;
	/* until round_synced; a sync of an idle volume starts a busy spell
	 * (a stall only if it does not complete within stall_ms from now) */
	if (!e->vols[r->vol].wb_busy++)
		e->vols[r->vol].wb_progress_ns = pmc_mono_ns();
	/* covers every plain write of the volume completed by now (FLUSH) */
	r->gen = atomic_load(&e->vols[r->vol].wr_done);
	return r;
}

static void wb_done(struct pmc_io *io, int res)
{
	struct wb_io *w = (struct wb_io *)io;
	struct pmc_engine *e = w->e;
	struct pmc_queue *q = w->q; /* alive: this completion runs on it */
	struct wb_round *r = w->round, *sync = NULL;
	struct pmc_vol_stats *st = &q->stats[w->vol];

	/* a source the kernel could not read: quarantined, not a disk error */
	if (res < 0 && pmc_eng_write_poisoned(e, w->vol, w->lba, w->blk, w->n))
		res = 1;
	/* any queue may run write-back: its state is under wb_lock */
	pthread_mutex_lock(&e->wb_lock);
	e->wb_inflight--;
	e->vols[w->vol].wb_busy--;
	e->vols[w->vol].wb_writes--;
	wb_progress(&e->vols[w->vol], pmc_eng_queue_now(q));
	r->writes--;
	if (res == 0) {
		/* in the disk's cache: clean once the round's sync succeeded */
		w->next = r->done;
		r->done = w;
		e->wb_held_bytes += (uint64_t)w->n * e->bs;
		e->vols[w->vol].wb_held += (uint64_t)w->n * e->bs;
	} else {
		/* poisoned source (res > 0): nothing marked clean, the rest is
		 * written back again; no disk error, no back-off */
		if (res < 0)
			wb_failed(e, st, r, res, "write-back", io->epoch);
		pmc_eng_stat_lat(q, st, PMC_LAT_WRITEBACK, w->start_ns);
		wb_release(e, w);
	}
	if (r->sealed && r->writes == 0 && (sync = round_close(e, r)))
		sync->q = q;
	pthread_mutex_unlock(&e->wb_lock);
	if (sync)
		pmc_eng_submit(sync->q, sync->vol, &sync->io);
}

static int item_cmp(const void *a, const void *b)
{
	const struct wb_item *x = a, *y = b;

	if (x->vol != y->vol)
		return x->vol < y->vol ? -1 : 1;
	return x->lba < y->lba ? -1 : x->lba > y->lba;
}

static void items_reverse(struct wb_item *it, unsigned lo, unsigned hi)
{
	while (lo + 1 < hi) {
		struct wb_item t = it[lo];

		it[lo++] = it[--hi];
		it[hi] = t;
	}
}

/*
 * Sort the swept items by volume and block, starting at volume first
 * (wrapping around), so that the in-flight limit does not always go to the
 * lowest-numbered volumes: with a busy limit of a few writes, a volume
 * whose neighbours below kept writing would otherwise never be served.
 * Returns the volume to start at next time: the one after this step's first.
 */
static uint32_t items_order(struct wb_item *it, unsigned n, uint32_t first)
{
	unsigned k = 0;

	qsort(it, n, sizeof(*it), item_cmp);
	while (k < n && it[k].vol < first)
		k++;
	if (k == n)
		k = 0;
	/* rotate left by k, keeping the order within each part */
	items_reverse(it, 0, k);
	items_reverse(it, k, n);
	items_reverse(it, 0, n);
	return n ? it[0].vol + 1 : first;
}

/* passes of a flush without progress (each waits on the ring up to 10 ms;
 * the dirty map's rebuild is progress) before a volume with a block it
 * cannot write back fails it */
#define WB_CORRUPT_STALL 100u

/* a dirty block of vol that write-back must not write (corrupt metadata):
 * logged once per attach, and a flush of the volume fails */
static void wb_corrupt(struct pmc_engine *e, uint32_t vol, uint64_t lba, const char *why)
{
	int was = 0;

	if (atomic_compare_exchange_strong(&e->vols[vol].wb_corrupt, &was, 1))
		pmc_log(LOG_ERR,
			"volume %s: write-back at block %" PRIu64 ": %s; metadata corrupt, "
			"what it hides is not written back (pmcachectl check)",
			e->vols[vol].name, lba, why);
}

/* pin blk if it is still the live dirty copy of (vol, lba) */
static int wb_pin(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t *blk)
{
	enum pmc_block_state st;
	int rc = pmc_cache_lookup_pin(e->c, vol, lba, blk, &st);

	if (rc == -EUCLEAN) /* its chain breaks: a copy past the break is not seen */
		wb_corrupt(e, vol, lba, "its index chain is corrupt");
	if (rc)
		return 0;
	if (st != PMC_BLK_DIRTY) {
		pmc_cache_unpin(e->c, *blk);
		return 0;
	}
	return 1;
}

/* a write-back or foreground disk write of blocks [lba, lba + n) of vol
 * is in flight */
static int wb_flying(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	int busy;

	pthread_mutex_lock(&e->dw_lock);
	busy = pmc_eng_wb_overlap_locked(e, vol, lba, n) ||
	       pmc_eng_around_overlap_locked(e, vol, lba, n) ||
	       pmc_eng_fg_overlap_locked(e, vol, lba, n);
	pthread_mutex_unlock(&e->dw_lock);
	return busy;
}

/*
 * Where the dirty run that lba is in starts: back from lba while the block
 * before it is a live dirty block, at most max blocks and not below floor
 * (the end of this step's last write of the volume); lba itself when a
 * disk write of the blocks before it is in flight (the claim would refuse
 * the write). Write-back then writes the run from its start: the map's
 * order is the cache's, not the disk's, and a write that started at the
 * block the map gave would leave the run's head for a write of its own.
 */
static uint64_t wb_run_start(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t floor,
			     uint32_t max)
{
	uint64_t first = lba, blk;
	uint32_t ahead = max < 8 ? max : 8;

	/* most heads are a few blocks back, if any */
	if (ahead && lba - floor >= ahead)
		pmc_cache_prefetch(e->c, vol, lba - ahead, ahead);
	while (first > floor && max--) {
		if (!wb_pin(e, vol, first - 1, &blk))
			break;
		pmc_cache_unpin(e->c, blk);
		first--;
	}
	if (first < lba && wb_flying(e, vol, first, lba - first))
		return lba;
	return first;
}

static int vol_eligible(struct pmc_engine *e, uint32_t vol, uint64_t now)
{
	struct pmc_evol *v = &e->vols[vol];

	return v->disk && atomic_load(&v->retry_at_ns) <= now && !v->wb_stalled;
}

/* a full pass over the dirty blocks: publish the oldest dirty ages */
static void wb_pass_done(struct pmc_engine *e)
{
	uint64_t now = pmc_now_ns(), born = e->wb_pass_start;

	for (uint32_t j = 0; j < e->c->max_volumes; j++) {
		if (e->wb_oldest[j] < born)
			born = e->wb_oldest[j];
		atomic_store(&e->vols[j].oldest_birth_ns, e->wb_oldest[j]);
		e->wb_oldest[j] = UINT64_MAX;
	}
	/* every block dirty now was seen by this pass or dirtied since it
	 * began; a birth ahead of the clock (set back since) bounds nothing:
	 * such a block is due, and the next pass must look again if it is
	 * still dirty */
	e->wb_born_after = e->wb_pass_future ? 0 : born;
	e->wb_pass_future = 0;
	e->wb_pass_start = now;
}

/*
 * Nothing can be due by age before the oldest dirty block the last full
 * pass saw ages: until then a step below the high watermark, with no flush
 * or drain asked for, need not sweep the dirty map (each sweep reads up to
 * WB_SCAN descriptors; on a large cache of young dirty blocks the write-back
 * thread did that every 10 ms for nothing). A clock that went back makes
 * the bound unknown.
 */
static int wb_nothing_due(struct pmc_engine *e, uint64_t max_age_ns)
{
	uint64_t now = pmc_now_ns(), born = e->wb_born_after;

	if (e->wb_active || e->wb_force || !e->wb_map || !born || now < born)
		return 0;
	for (uint32_t i = 0; i < e->nvols; i++)
		if (atomic_load(&e->vols[i].draining))
			return 0;
	return max_age_ns > UINT64_MAX - born || now < born + max_age_ns;
}

/* a sweep's times: births are wall-clock (kept across boots), retries
 * monotonic */
struct wb_when {
	uint64_t now;	/* pmc_eng_queue_now: retry_at_ns */
	uint64_t aged;	/* pmc_now_ns - max_age: born before this, due */
	uint64_t ahead; /* pmc_now_ns + WB_CLOCK_SLACK_NS: born after this,
			 * stored under a clock since set back */
};

/*
 * Look at descriptor i: if it is a live dirty block, count its birth for
 * its volume's oldest age and, if it is due, add it to e->items[*n].
 * -ENOENT: not a live dirty block.
 */
static int wb_consider(struct pmc_engine *e, uint64_t i, const struct wb_when *t, unsigned *n)
{
	struct pmc_cache *c = e->c;
	struct pmc_desc *d = &c->descs[i];
	uint64_t st, lba, birth, volgen, gs;
	uint32_t vol;

	st = pmc_load64(&d->state) & 0xff;
	if (st != PMC_BLK_DIRTY)
		return -ENOENT;
	/* unlocked: word by word with atomic loads (publish stores the key
	 * the same way); wb_pin checks the block under its lock later */
	lba = __atomic_load_n(&d->lba, __ATOMIC_RELAXED);
	volgen = __atomic_load_n((uint64_t *)&d->vol, __ATOMIC_RELAXED);
	birth = __atomic_load_n(&d->birth_ns, __ATOMIC_RELAXED);
	vol = (uint32_t)volgen;
	if (vol >= c->max_volumes)
		return -ENOENT;
	gs = pmc_load64(&c->vols[vol].gen_state);
	if (PMC_VOL_STATE(gs) != PMC_VOL_ACTIVE || (uint32_t)PMC_VOL_GEN(gs) != volgen >> 32)
		return -ENOENT;
	if (birth < e->wb_oldest[vol])
		e->wb_oldest[vol] = birth;
	/* a birth more than a step ahead of the clock: stored under a clock
	 * since set back. Its age is unknown: due now, or it would wait for as
	 * long as the clock went back, however small max_age_ms */
	if (!vol_eligible(e, vol, t->now))
		return 0;
	/* (a volume that cannot be written back now, in back-off or not
	 * attached, makes no pass sweep again for it: it waits its turn) */
	if (birth > t->ahead)
		e->wb_pass_future = 1;
	if (!(e->wb_active ||
	      (e->wb_force && (e->wb_force_vol == UINT32_MAX || e->wb_force_vol == vol)) ||
	      atomic_load(&e->vols[vol].draining) || (birth < t->aged && birth) ||
	      birth > t->ahead))
		return 0;
	e->items[*n].vol = vol;
	e->items[*n].lba = lba;
	e->items[*n].blk = i;
	(*n)++;
	return 0;
}

/* until the dirty map is complete: sweep part of the descriptor table */
static unsigned wb_sweep_descs(struct pmc_engine *e, const struct wb_when *t, unsigned want)
{
	struct pmc_cache *c = e->c;
	unsigned n = 0;

	for (unsigned k = 0; k < WB_SCAN && n < want; k++) {
		uint64_t i = e->wb_cursor;

		e->wb_cursor = (i + 1) % c->nr_blocks;
		if (++e->wb_swept >= c->nr_blocks) {
			wb_pass_done(e);
			e->wb_swept = 0;
		}
		wb_consider(e, i, t, &n);
	}
	return n;
}

/* walk the dirty map from the cursor: at most WB_SCAN marked blocks and
 * one wrap per step */
static unsigned wb_sweep_map(struct pmc_engine *e, const struct wb_when *t, unsigned want)
{
	struct pmc_cache *c = e->c;
	unsigned n = 0, wraps = 0;

	for (unsigned k = 0; k < WB_SCAN && n < want;) {
		uint64_t blk;

		if (pmc_cache_dirty_next(c, e->wb_cursor, &blk)) {
			wb_pass_done(e);
			e->wb_cursor = 0;
			if (wraps++)
				break;
			continue;
		}
		e->wb_cursor = blk + 1;
		k++;
		if (wb_consider(e, blk, t, &n))
			pmc_cache_dirty_forget(c, blk); /* checked under its lock */
	}
	return n;
}

/* one chunk of the dirty map's rebuild, while it is not complete */
static void wb_rebuild(struct pmc_engine *e)
{
	if (e->wb_map || !pmc_cache_dirty_rebuild(e->c, WB_REBUILD))
		return;
	/* complete: from now on the map; a new pass starts */
	e->wb_map = 1;
	e->wb_cursor = 0;
	e->wb_swept = 0;
	e->wb_pass_start = pmc_now_ns();
	e->wb_born_after = 0;
	e->wb_pass_future = 0;
	for (uint32_t j = 0; j < e->c->max_volumes; j++)
		e->wb_oldest[j] = UINT64_MAX;
}

/* find write-back candidates */
static unsigned wb_sweep(struct pmc_engine *e, uint64_t now, uint64_t max_age_ns, unsigned want)
{
	uint64_t rt = pmc_now_ns();
	struct wb_when t = {.now = now, .aged = rt - max_age_ns, .ahead = rt + WB_CLOCK_SLACK_NS};

	if (e->wb_map)
		return wb_sweep_map(e, &t, want);
	return wb_sweep_descs(e, &t, want);
}

/*
 * Enter w in the in-flight list unless another write-back write, or a
 * foreground disk write or discard, of its blocks is in flight, then check that each block is still the live dirty
 * copy: a foreground write that replaced or dropped one before looking at
 * the list (it then did not see w) is caught here, and w is dropped. 0: w
 * may be submitted; -EBUSY: not now (w left out of the list).
 */
int pmc_eng_wb_claim(struct pmc_engine *e, struct wb_io *w)
{
	pthread_mutex_lock(&e->dw_lock);
	if (pmc_eng_wb_overlap_locked(e, w->vol, w->lba, w->n) ||
	    pmc_eng_around_overlap_locked(e, w->vol, w->lba, w->n) ||
	    pmc_eng_fg_overlap_locked(e, w->vol, w->lba, w->n)) {
		pthread_mutex_unlock(&e->dw_lock);
		return -EBUSY;
	}
	w->fnext = e->wb_flying;
	w->fprev = &e->wb_flying;
	if (e->wb_flying)
		e->wb_flying->fprev = &w->fnext;
	e->wb_flying = w;
	pthread_mutex_unlock(&e->dw_lock);
	for (uint32_t i = 0; i < w->n; i++) {
		uint64_t blk;
		enum pmc_block_state st;
		int live = pmc_cache_lookup_pin(e->c, w->vol, w->lba + i, &blk, &st) == 0;

		if (live)
			pmc_cache_unpin(e->c, blk);
		if (!live || blk != w->blk[i] || st != PMC_BLK_DIRTY) {
			pthread_mutex_lock(&e->dw_lock);
			*w->fprev = w->fnext;
			if (w->fnext)
				w->fnext->fprev = w->fprev;
			pthread_mutex_unlock(&e->dw_lock);
			return -EBUSY;
		}
	}
	return 0;
}

static void wb_submit(struct pmc_engine *e, struct pmc_queue *q, struct wb_round *r,
		      struct wb_io *w)
{
	struct pmc_io *io = &w->io;

	memset(io, 0, sizeof(*io));
	for (uint32_t i = 0; i < w->n; i++) {
		w->iov[i].iov_base = pmc_cache_block_data(e->c, w->blk[i]);
		w->iov[i].iov_len = e->bs;
	}
	io->op = PMC_IO_WRITE;
	io->disk = e->vols[w->vol].disk;
	io->off = w->lba * e->bs;
	io->len = (uint64_t)w->n * e->bs;
	io->iov = w->iov;
	io->iovcnt = (int)w->n;
	io->rw_flags = 0; /* plain: durable once the round's sync completed */
	io->cb = wb_done;
	w->e = e;
	w->q = q;
	w->start_ns = pmc_eng_queue_now(q);
	w->round = r;
	r->writes++;
	r->started++;
	r->bytes += io->len;
	e->wb_inflight++;
	/* a busy spell starts: stalled only if nothing completes from now */
	if (!e->vols[w->vol].wb_busy++)
		e->vols[w->vol].wb_progress_ns = w->start_ns;
	e->vols[w->vol].wb_writes++;
	pmc_eng_submit(q, w->vol, io);
}

/* finish mode switches whose volumes have no dirty data left */
static void wb_finish_drains(struct pmc_engine *e)
{
	for (uint32_t i = 0; i < e->nvols; i++) {
		struct pmc_evol *v = &e->vols[i];
		struct pmc_volume_info vi;

		/* draining is set only on an attached volume; v->disk itself is
		 * read under e->lock, where attach and detach change it */
		if (!atomic_load(&v->draining))
			continue;
		/* nor any write still to publish (a queue's loop iteration
		 * publishes its writes at its end, engine_write.c) */
		if (atomic_load(&v->dirtying) || pmc_cache_volume_info(e->c, i, &vi) ||
		    !vi.counts_valid || vi.nr_dirty)
			continue;
		pthread_mutex_lock(&e->lock);
		if (v->disk && atomic_load(&v->draining)) {
			atomic_store(&v->mode, atomic_load(&v->target));
			atomic_store(&v->draining, 0);
			pmc_log(LOG_INFO, "volume %s: now in %s mode", e->vols[i].name,
				pmc_mode_name((enum pmc_mode)atomic_load(&v->mode)));
		}
		pthread_mutex_unlock(&e->lock);
	}
}

/* r takes no more writes: its sync is issued (on q if none of its writes
 * is in flight) once they completed; wb_lock held */
static void round_seal(struct pmc_engine *e, struct pmc_queue *q, struct wb_round *r)
{
	struct pmc_evol *v = &e->vols[r->vol];

	if (v->wb_open == r)
		v->wb_open = NULL;
	r->sealed = 1;
	if (r->writes == 0 && round_close(e, r)) {
		r->q = q;
		pmc_eng_submit(q, r->vol, &r->io);
	}
}

/* a round's writes stay in the in-flight list until its sync: many small
 * ones would make each lookup of that list (a claim, a held disk write)
 * walk them all */
static int round_full(const struct wb_round *r)
{
	return r->bytes >= WB_ROUND_BYTES || r->started >= WB_ROUND_WRITES;
}

/* the round that vol's next write joins: the open one, unless it is full;
 * NULL when out of memory; wb_lock held */
static struct wb_round *round_for(struct pmc_engine *e, struct pmc_queue *q, uint32_t vol,
				  uint64_t now)
{
	struct pmc_evol *v = &e->vols[vol];

	if (v->wb_open && round_full(v->wb_open))
		round_seal(e, q, v->wb_open);
	if (!v->wb_open)
		v->wb_open = round_get(e, vol, now);
	return v->wb_open;
}

/*
 * Seal the open rounds: all of them, or those that took writes for
 * WB_ROUND_NS or are full. A round stays open across steps while
 * write-back has more to start (the in-flight limit stopped the step), so
 * that one sync covers the writes of many steps: on a disk with a
 * volatile cache each sync is a cache flush. wb_lock held.
 */
static void rounds_seal(struct pmc_engine *e, struct pmc_queue *q, uint64_t now, int all)
{
	for (uint32_t i = 0; i < e->nvols; i++) {
		struct wb_round *r = e->vols[i].wb_open;

		if (r && (all || round_full(r) ||
			  (now > r->open_ns && now - r->open_ns >= WB_ROUND_NS)))
			round_seal(e, q, r);
	}
}

/* what a sweep selects besides blocks due by age (wb_consider): a step
 * keeps the last sweep's candidates only while this is unchanged */
static uint64_t wb_selection(struct pmc_engine *e)
{
	uint64_t sel = (uint64_t)(e->wb_active != 0) | (uint64_t)(e->wb_force != 0) << 1;

	if (e->wb_force)
		sel |= (uint64_t)e->wb_force_vol << 2;
	for (uint32_t i = 0; i < e->nvols; i++)
		if (atomic_load(&e->vols[i].draining))
			sel += 1ull << 34;
	return sel;
}

/* the candidates for this step: what the last sweep left, or a new sweep */
static unsigned wb_candidates(struct pmc_engine *e, uint64_t now, uint64_t max_age_ns)
{
	uint64_t sel = wb_selection(e);

	if (e->items_pos < e->items_n && e->items_sel == sel && now >= e->items_ns &&
	    now - e->items_ns < WB_KEEP_NS)
		return e->items_n;
	e->items_n = wb_sweep(e, now, max_age_ns, WB_BATCH);
	e->items_pos = 0;
	e->items_ns = now;
	e->items_sel = sel;
	e->wb_first_vol = items_order(e->items, e->items_n, e->wb_first_vol);
	return e->items_n;
}

int pmc_engine_writeback_step(struct pmc_engine *e, struct pmc_queue *q)
{
	struct pmc_cache_info ci;
	struct pmc_wb_conf wb;
	uint64_t now = pmc_eng_queue_now(q), pct, nospace_ns, fg_ns, held;
	unsigned limit, n, i, started = 0, inflight;
	uint32_t prev_vol = UINT32_MAX; /* this step's last write */
	uint64_t prev_end = 0;
	int idle, starved;

	if (!e->c)
		return 0;
	if (pthread_mutex_trylock(&e->wb_lock))
		return 0; /* another thread is at it */
	pthread_mutex_lock(&e->lock);
	wb = e->wb;
	pthread_mutex_unlock(&e->lock);
	if (!atomic_load(&e->c->counts_valid))
		pmc_cache_recount(e->c); /* after a crash: walks the index once */
	/* in the background, also while nothing is dirty or due */
	wb_rebuild(e);
	pmc_cache_get_info(e->c, &ci);
	pct = ci.nr_dirty * 100 / ci.nr_blocks;
	e->wb_active = e->wb_active ? pct > wb.low_pct : pct >= wb.high_pct;
	wb_finish_drains(e);
	/* now is the time of this queue's loop iteration, and a request that
	 * started since on another queue (or outside a poll) can be later */
	fg_ns = atomic_load(&e->last_fg_ns);
	idle = now > fg_ns && now - fg_ns > (uint64_t)wb.idle_ms * 1000000ull;
	/* foreground I/O running: write-back keeps out of its way, unless
	 * writes waited for free blocks within idle_ms: they wait for
	 * write-back anyway, holding it back only makes them wait longer */
	nospace_ns = atomic_load(&e->last_nospace_ns);
	starved = nospace_ns && (now < nospace_ns ||
				 now - nospace_ns <= (uint64_t)wb.idle_ms * 1000000ull);
	limit = idle || starved || e->wb_force ? wb.max_inflight : wb.busy_inflight;
	/* what stalled volumes hold is not counted: one hung disk must not
	 * stop every volume's write-back (they get no more meanwhile) */
	inflight = e->wb_inflight;
	held = e->wb_held_bytes;
	for (i = 0; i < e->nvols; i++) {
		struct pmc_evol *v = &e->vols[i];

		if (wb_stalled(v, now, (uint64_t)wb.stall_ms * 1000000ull)) {
			inflight -= v->wb_writes;
			held -= v->wb_held;
		}
	}
	if (ci.nr_dirty == 0 || inflight >= limit || held >= WB_HELD_BYTES ||
	    wb_nothing_due(e, wb.max_age_ms * 1000000ull)) {
		/* at the in-flight limit, more is coming: only the due rounds */
		rounds_seal(e, q, now, inflight < limit || held >= WB_HELD_BYTES);
		pthread_mutex_unlock(&e->wb_lock);
		return 0;
	}
	n = wb_candidates(e, now, wb.max_age_ms * 1000000ull);
	/* writes waiting for their sync hold pins and wb_io: WB_HELD_BYTES */
	for (i = e->items_pos; i < n && inflight < limit && held < WB_HELD_BYTES;) {
		struct wb_round *r;
		struct wb_io *w;
		uint32_t vol = e->items[i].vol;
		uint64_t seed = e->items[i].lba, blk, lba;

		/* a candidate kept from an earlier step: its volume may have
		 * been backed off or detached since */
		if (!vol_eligible(e, vol, now)) {
			i++;
			continue;
		}
		lba = wb_run_start(e, vol, seed, prev_vol == vol ? prev_end : 0, e->max_io_blocks / 2);
		/* the run's head, or the block the map gave if the head changed */
		if (!wb_pin(e, vol, lba, &blk) && (lba == seed || !wb_pin(e, vol, lba = seed, &blk))) {
			i++;
			continue;
		}
		/* pinned as the live dirty copy of (vol, lba): a key past the
		 * volume's end (metadata corrupt under a valid checksum) is
		 * never written (its disk offset would be past the volume, or
		 * wrap onto another block); a flush of the volume fails */
		if (lba >= e->vols[vol].blocks) {
			pmc_cache_unpin(e->c, blk);
			wb_corrupt(e, vol, lba, "past the volume's end");
			i++;
			continue;
		}
		if (!(r = round_for(e, q, vol, now))) {
			pmc_cache_unpin(e->c, blk);
			break;
		}
		w = wb_get(e);
		if (!w) {
			pmc_cache_unpin(e->c, blk);
			break;
		}
		w->vol = vol;
		w->lba = lba;
		w->blk[0] = blk;
		w->n = 1;
		i++;
		/* merge neighbours: from the sweep, then by lookup beyond it */
		while (w->n < e->max_io_blocks && w->n * e->bs < wb.max_io_bytes &&
		       lba + w->n < e->vols[vol].blocks) {
			while (i < n && e->items[i].vol == vol && e->items[i].lba < lba + w->n)
				i++; /* duplicates */
			if (w->n % 32 == 1)
				pmc_cache_prefetch(e->c, vol, lba + w->n, 32);
			if (!wb_pin(e, vol, lba + w->n, &blk))
				break;
			w->blk[w->n++] = blk;
			if (i < n && e->items[i].vol == vol && e->items[i].lba == lba + w->n - 1)
				i++;
		}
		if (pmc_test_wb_pinned)
			pmc_test_wb_pinned(e, vol, lba, w->n);
		if (pmc_eng_wb_claim(e, w)) {
			for (uint32_t k = 0; k < w->n; k++)
				pmc_cache_unpin(e->c, w->blk[k]);
			w->next = e->wb_free;
			e->wb_free = w;
			continue;
		}
		wb_submit(e, q, r, w);
		inflight++;
		started++;
		prev_vol = vol;
		prev_end = lba + w->n;
	}
	/* every candidate taken: nothing more is coming for now */
	rounds_seal(e, q, now, i >= n);
	/* the candidates not taken are the next steps' (wb_candidates) */
	e->items_pos = i;
	pthread_mutex_unlock(&e->wb_lock);
	return (int)started;
}

/* a foreground disk write is held by a write-back write (must_hold,
 * engine_order.c): seal the open rounds, so that it waits for their syncs
 * only, not for a later step to seal them */
void pmc_eng_wb_seal_asked(struct pmc_engine *e, struct pmc_queue *q)
{
	pthread_mutex_lock(&e->wb_lock);
	if (atomic_exchange(&e->wb_seal_asked, 0))
		rounds_seal(e, q, 0, 1);
	pthread_mutex_unlock(&e->wb_lock);
}

/* at destroy, with no I/O in flight: the open rounds' writes are dropped
 * unsynced, their blocks stay dirty (written back again after the next
 * open) */
void pmc_eng_wb_drop_open(struct pmc_engine *e)
{
	pthread_mutex_lock(&e->wb_lock);
	for (uint32_t i = 0; i < e->nvols; i++) {
		struct wb_round *r = e->vols[i].wb_open;

		if (!r)
			continue;
		e->vols[i].wb_open = NULL;
		round_free(e, r);
	}
	pthread_mutex_unlock(&e->wb_lock);
}

/* vol is being detached (its disk already unset; wb_lock held): its open
 * round takes no more writes and is synced by nobody (round_close frees
 * it once its writes in flight completed; their blocks stay dirty) */
void pmc_eng_wb_detach_locked(struct pmc_engine *e, uint32_t vol)
{
	struct wb_round *r = e->vols[vol].wb_open;

	if (r)
		round_seal(e, NULL, r);
}

/* the write-back writes and syncs of vol in flight (other threads' rings
 * complete them) */
unsigned pmc_eng_wb_busy(struct pmc_engine *e, uint32_t vol)
{
	unsigned n;

	pthread_mutex_lock(&e->wb_lock);
	n = e->vols[vol].wb_busy;
	pthread_mutex_unlock(&e->wb_lock);
	return n;
}

int pmc_engine_wb_rebuilding(struct pmc_engine *e)
{
	/* max 0: reads whether the map is complete (taking the shortcut of a
	 * cache without dirty blocks), rebuilds nothing */
	return e->c && !pmc_cache_dirty_rebuild(e->c, 0);
}

void pmc_engine_flush_cancel(struct pmc_engine *e)
{
	atomic_fetch_add(&e->flush_cancel, 1);
}

int pmc_engine_unattached_dirty(struct pmc_engine *e, struct pmc_err *err)
{
	struct pmc_cache_info ci;
	struct pmc_volume_info vi;
	char names[160] = "";
	uint64_t total = 0;
	unsigned n = 0, uncounted = 0;
	size_t len = 0;

	if (!e->c)
		return 0;
	pmc_cache_get_info(e->c, &ci);
	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < ci.max_volumes; i++) {
		if ((i < e->nvols && e->vols[i].disk) || pmc_cache_volume_info(e->c, i, &vi) ||
		    (vi.counts_valid && !vi.nr_dirty))
			continue;
		n++;
		if (vi.counts_valid)
			total += vi.nr_dirty;
		else
			uncounted++;
		if (len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
						len ? ", " : "", vi.name);
	}
	pthread_mutex_unlock(&e->lock);
	if (!n)
		return 0;
	return pmc_err_set(err, EAGAIN,
			   "flush: the served volumes are on their disks, but %u volume%s not "
			   "served keep%s %" PRIu64 " dirty blocks%s in the pmem (%s): serve "
			   "them to write them back",
			   n, n == 1 ? "" : "s", n == 1 ? "s" : "", total,
			   uncounted ? " and uncounted ones" : "", names);
}

int pmc_engine_flush_all(struct pmc_engine *e, struct pmc_queue *q, uint32_t vol,
			 void (*progress)(uint64_t left, void *arg), void *arg,
			 struct pmc_err *err)
{
	uint64_t last_left = UINT64_MAX, hung_left;
	uint32_t hung, stall_ms;
	unsigned stalled = 0;
	unsigned *streak0, cancel0 = atomic_load(&e->flush_cancel);
	int rc = 0;

	if (vol != UINT32_MAX && !pmc_eng_evol(e, vol))
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	if (!e->c)
		return 0; /* nothing is cached */
	pthread_mutex_lock(&e->lock);
	stall_ms = e->wb.stall_ms;
	pthread_mutex_unlock(&e->lock);
	/* give up on a volume only after it failed 3 more times in a row here */
	streak0 = calloc(e->nvols, sizeof(*streak0));
	if (!streak0)
		return pmc_err_set(err, ENOMEM, "flush: out of memory");
	for (uint32_t i = 0; i < e->nvols; i++)
		streak0[i] = atomic_load(&e->vols[i].fail_streak);
	pthread_mutex_lock(&e->wb_lock);
	e->wb_force = 1;
	e->wb_force_vol = vol;
	/* a failing volume is tried again now, its back-off from the start:
	 * a flush (or a volume removal) after the disk healed does not wait
	 * out a back-off of up to a minute, and one that keeps failing gives
	 * up after three short rounds */
	for (uint32_t i = 0; i < e->nvols; i++)
		if (vol == UINT32_MAX || vol == i) {
			atomic_store(&e->vols[i].backoff_ms, 0);
			atomic_store(&e->vols[i].retry_at_ns, 0);
		}
	pthread_mutex_unlock(&e->wb_lock);
	for (;;) {
		struct pmc_volume_info vi;
		uint64_t left;
		int failing = 0;

		if (pmc_engine_writeback_step(e, q) == 0 && pmc_queue_busy(q) == 0 &&
		    !pmc_engine_wb_rebuilding(e)) {
			/* nothing to start (back-off): do not spin; a step that
			 * rebuilt part of the dirty map made progress */
			struct timespec ts = {0, 2000000};

			nanosleep(&ts, NULL);
		}
		pmc_queue_poll(q, 1, 10000000ull);
		/* the attached volumes' dirty blocks: those of a volume that is
		 * not (its disk missing, or detached with its dirty data kept)
		 * stay until it is attached again, and must not make this wait
		 * for ever */
		left = 0;
		hung_left = 0;
		hung = UINT32_MAX;
		pthread_mutex_lock(&e->wb_lock);
		for (uint32_t i = 0; i < e->nvols; i++)
			if ((vol == UINT32_MAX || vol == i) && e->vols[i].disk &&
			    pmc_cache_volume_info(e->c, i, &vi) == 0) {
				left += vi.nr_dirty;
				if (e->vols[i].wb_stalled && vi.nr_dirty) {
					hung_left += vi.nr_dirty;
					hung = i;
				}
			}
		pthread_mutex_unlock(&e->wb_lock);
		if (left != last_left && progress)
			progress(left, arg);
		/* a volume whose disk stopped answering (stalled: nothing of its
		 * write-back completed for stall_ms) cannot be flushed now: once
		 * the others are written back, fail naming it; its dirty blocks
		 * stay, its writes in flight complete whenever the disk answers */
		if (hung != UINT32_MAX && left == hung_left) {
			rc = pmc_err_set(err, ETIMEDOUT,
					 "volume %s: its disk %s has not answered write-back for "
					 "over %u ms; %" PRIu64 " dirty blocks stay in the cache",
					 e->vols[hung].name, e->vols[hung].disk->path, stall_ms,
					 left);
			break;
		}
		if (left == 0 && pmc_queue_busy(q) == 0)
			break;
		/* cancelled (pmcached's stop, its client gone): with writers
		 * running, nothing dirty may never come */
		if (atomic_load(&e->flush_cancel) != cancel0) {
			rc = pmc_err_set(err, ECANCELED,
					 "flush cancelled; %" PRIu64 " dirty blocks stay in the cache",
					 left);
			break;
		}
		/* a block that cannot be written back: its dirty data stays;
		 * the flush fails once the others are written (nothing moved
		 * for a while, nothing in flight) */
		stalled = left == last_left && pmc_queue_busy(q) == 0 &&
				  !pmc_engine_wb_rebuilding(e)
			  ? stalled + 1
			  : 0;
		for (uint32_t i = 0; i < e->nvols && !failing && stalled >= WB_CORRUPT_STALL; i++) {
			if (atomic_load(&e->vols[i].wb_corrupt) && e->vols[i].disk &&
			    (vol == UINT32_MAX || vol == i)) {
				rc = pmc_err_set(err, EUCLEAN,
						 "volume %s: a dirty block cannot be written back: "
						 "metadata corrupt (logged; pmcachectl check); %" PRIu64
						 " dirty blocks stay in the cache",
						 e->vols[i].name, left);
				failing = 1;
			}
		}
		if (failing)
			break;
		/* a volume that keeps failing: give up after its back-off grew large */
		for (uint32_t i = 0; i < e->nvols; i++) {
			struct pmc_evol *v = &e->vols[i];

			if (v->disk && (vol == UINT32_MAX || vol == i) &&
			    atomic_load(&v->fail_streak) >= streak0[i] + 3) {
				rc = pmc_err_set(err, EIO,
						 "volume %s: disk %s keeps failing (%s); %" PRIu64
						 " dirty blocks stay in the cache",
						 e->vols[i].name, v->disk->path,
						 strerror(atomic_load(&v->error)), left);
				failing = 1;
				break;
			}
		}
		if (failing)
			break;
		last_left = left;
	}
	free(streak0);
	pthread_mutex_lock(&e->wb_lock);
	rounds_seal(e, q, 0, 1);
	pthread_mutex_unlock(&e->wb_lock);
	/* cancelled, or a disk that does not answer: what is in flight
	 * completes in the caller's later polls (a hung disk would keep it
	 * here) */
	while (pmc_queue_busy(q) && rc != -ECANCELED && rc != -ETIMEDOUT)
		pmc_queue_poll(q, 1, 10000000ull);
	pthread_mutex_lock(&e->wb_lock);
	e->wb_force = 0;
	pthread_mutex_unlock(&e->wb_lock);
	wb_finish_drains(e);
	pmc_eng_state_mark_clean(e);
	return rc;
}
