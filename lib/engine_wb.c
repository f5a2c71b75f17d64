/* engine_wb.c - write-back.
 *
 * Write-back sweeps the descriptor table with a cursor, picks live dirty
 * blocks (all of them above the high watermark until below the low one,
 * otherwise those older than max_age or of a draining volume), sorts them
 * by (volume, LBA), merges neighbours (also looked up beyond the sweep)
 * into writes of up to max_io_bytes from pinned pmem blocks (no bounce
 * buffer), and marks each block clean only after its RWF_DSYNC write
 * completed. A failed write leaves the blocks dirty, sets the volume's
 * sticky error and backs the volume off (doubling up to 60 s).
 *
 * Locking: write-back state belongs to the thread in writeback_step
 * (wb_lock); its disk writes in flight are listed under dw_lock so that
 * foreground disk writes of the same blocks wait for them.
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

static void wb_done(struct pmc_io *io, int res)
{
	struct wb_io *w = (struct wb_io *)io;
	struct pmc_engine *e = w->e;
	struct pmc_evol *v = &e->vols[w->vol];
	struct pmc_vol_stats *st = &w->q->stats[w->vol];

	/* a source the kernel could not read: quarantined, not a disk error */
	if (res < 0 && pmc_eng_write_poisoned(e, w->vol, w->lba, w->blk, w->n))
		res = 1;
	for (uint32_t i = 0; i < w->n; i++) {
		if (res == 0)
			pmc_cache_mark_clean(e->c, w->vol, w->lba + i, w->blk[i]);
		pmc_cache_unpin(e->c, w->blk[i]);
	}
	pmc_eng_stat_lat(w->q, st, PMC_LAT_WRITEBACK, w->start_ns);
	pthread_mutex_lock(&e->dw_lock);
	*w->fprev = w->fnext;
	if (w->fnext)
		w->fnext->fprev = w->fprev;
	pthread_mutex_unlock(&e->dw_lock);
	/* any queue may run write-back: its state is under wb_lock */
	pthread_mutex_lock(&e->wb_lock);
	if (res > 0) {
		/* poisoned source: nothing marked clean, the rest is written
		 * back again; no disk error, no back-off */
	} else if (res == 0) {
		STAT_ADD(st, wb_ios, 1);
		STAT_ADD(st, wb_blocks, w->n);
		STAT_ADD(st, wb_bytes, (uint64_t)w->n * e->bs);
		STAT_ADD(st, wb_merged_blocks, w->n - 1);
		atomic_store(&v->backoff_ms, 0);
		atomic_store(&v->fail_streak, 0);
	} else {
		unsigned b = atomic_load(&v->backoff_ms);

		atomic_fetch_add(&v->fail_streak, 1);
		STAT_ADD(st, wb_errors, 1);
		pmc_eng_volume_failed(e, w->vol, res, "write-back");
		b = b ? (b * 2 > WB_BACKOFF_MAX_MS ? WB_BACKOFF_MAX_MS : b * 2) : e->wb.retry_ms;
		atomic_store(&v->backoff_ms, b);
		atomic_store(&v->retry_at_ns, pmc_mono_ns() + (uint64_t)b * 1000000ull);
	}
	e->wb_inflight--;
	w->next = e->wb_free;
	e->wb_free = w;
	pthread_mutex_unlock(&e->wb_lock);
}

static int item_cmp(const void *a, const void *b)
{
	const struct wb_item *x = a, *y = b;

	if (x->vol != y->vol)
		return x->vol < y->vol ? -1 : 1;
	return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/* pin blk if it is still the live dirty copy of (vol, lba) */
static int wb_pin(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t *blk)
{
	enum pmc_block_state st;

	if (pmc_cache_lookup_pin(e->c, vol, lba, blk, &st))
		return 0;
	if (st != PMC_BLK_DIRTY) {
		pmc_cache_unpin(e->c, *blk);
		return 0;
	}
	return 1;
}

static int vol_eligible(struct pmc_engine *e, uint32_t vol, uint64_t now)
{
	struct pmc_evol *v = &e->vols[vol];

	return v->disk && atomic_load(&v->retry_at_ns) <= now;
}

/* sweep part of the descriptor table for write-back candidates */
static unsigned wb_sweep(struct pmc_engine *e, uint64_t now, uint64_t max_age_ns, unsigned want)
{
	struct pmc_cache *c = e->c;
	uint64_t aged = pmc_now_ns() - max_age_ns; /* born before this: due */
	unsigned n = 0;

	for (unsigned k = 0; k < WB_SCAN && n < want; k++) {
		uint64_t i = e->wb_cursor;
		struct pmc_desc *d = &c->descs[i];
		uint64_t st, lba, birth, volgen, gs;
		uint32_t vol;

		e->wb_cursor = (i + 1) % c->nr_blocks;
		if (++e->wb_swept >= c->nr_blocks) {
			/* a full pass: publish the oldest dirty ages */
			for (uint32_t j = 0; j < c->max_volumes; j++) {
				atomic_store(&e->vols[j].oldest_birth_ns, e->wb_oldest[j]);
				e->wb_oldest[j] = UINT64_MAX;
			}
			e->wb_swept = 0;
		}
		st = pmc_load64(&d->state) & 0xff;
		if (st != PMC_BLK_DIRTY)
			continue;
		/* unlocked: word by word with atomic loads (publish stores the key
		 * the same way); wb_pin checks the block under its lock later */
		lba = __atomic_load_n(&d->lba, __ATOMIC_RELAXED);
		volgen = __atomic_load_n((uint64_t *)&d->vol, __ATOMIC_RELAXED);
		birth = __atomic_load_n(&d->birth_ns, __ATOMIC_RELAXED);
		vol = (uint32_t)volgen;
		if (vol >= c->max_volumes)
			continue;
		gs = pmc_load64(&c->vols[vol].gen_state);
		if (PMC_VOL_STATE(gs) != PMC_VOL_ACTIVE || (uint32_t)PMC_VOL_GEN(gs) != volgen >> 32)
			continue;
		if (birth < e->wb_oldest[vol])
			e->wb_oldest[vol] = birth;
		if (!vol_eligible(e, vol, now))
			continue;
		if (!(e->wb_active || (e->wb_force && (e->wb_force_vol == UINT32_MAX ||
						       e->wb_force_vol == vol)) ||
		      atomic_load(&e->vols[vol].draining) ||
		      (birth < aged && birth)))
			continue;
		e->items[n].vol = vol;
		e->items[n].lba = lba;
		e->items[n].blk = i;
		n++;
	}
	return n;
}

/*
 * Enter w in the in-flight list unless another write-back write of its
 * blocks is in flight, then check that each block is still the live dirty
 * copy: a foreground write that replaced or dropped one before looking at
 * the list (it then did not see w) is caught here, and w is dropped. 0: w
 * may be submitted; -EBUSY: not now (w left out of the list).
 */
int pmc_eng_wb_claim(struct pmc_engine *e, struct wb_io *w)
{
	pthread_mutex_lock(&e->dw_lock);
	if (pmc_eng_wb_overlap_locked(e, w->vol, w->lba, w->n) ||
	    pmc_eng_around_overlap_locked(e, w->vol, w->lba, w->n)) {
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

static void wb_submit(struct pmc_engine *e, struct pmc_queue *q, struct wb_io *w)
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
	io->rw_flags = RWF_DSYNC; /* clean only once durable on the disk */
	io->cb = wb_done;
	w->e = e;
	w->q = q;
	w->start_ns = pmc_eng_queue_now(q);
	e->wb_inflight++;
	pmc_ring_submit(q->ring, io);
}

/* finish mode switches whose volumes have no dirty data left */
static void wb_finish_drains(struct pmc_engine *e)
{
	for (uint32_t i = 0; i < e->nvols; i++) {
		struct pmc_evol *v = &e->vols[i];
		struct pmc_volume_info vi;

		if (!v->disk || !atomic_load(&v->draining))
			continue;
		if (pmc_cache_volume_info(e->c, i, &vi) || !vi.counts_valid || vi.nr_dirty)
			continue;
		pthread_mutex_lock(&e->lock);
		if (atomic_load(&v->draining)) {
			atomic_store(&v->mode, atomic_load(&v->target));
			atomic_store(&v->draining, 0);
			pmc_log(LOG_INFO, "volume %s: now in %s mode", e->vols[i].name,
				pmc_mode_name((enum pmc_mode)atomic_load(&v->mode)));
		}
		pthread_mutex_unlock(&e->lock);
	}
}

int pmc_engine_writeback_step(struct pmc_engine *e, struct pmc_queue *q)
{
	struct pmc_cache_info ci;
	struct pmc_wb_conf wb;
	uint64_t now = pmc_eng_queue_now(q), pct;
	unsigned limit, n, started = 0;
	int idle;

	if (!e->c)
		return 0;
	if (pthread_mutex_trylock(&e->wb_lock))
		return 0; /* another thread is at it */
	pthread_mutex_lock(&e->lock);
	wb = e->wb;
	pthread_mutex_unlock(&e->lock);
	if (!atomic_load(&e->c->counts_valid))
		pmc_cache_recount(e->c); /* after a crash: walks the index once */
	pmc_cache_get_info(e->c, &ci);
	pct = ci.nr_dirty * 100 / ci.nr_blocks;
	e->wb_active = e->wb_active ? pct > wb.low_pct : pct >= wb.high_pct;
	wb_finish_drains(e);
	idle = now - atomic_load(&e->last_fg_ns) > (uint64_t)wb.idle_ms * 1000000ull;
	limit = idle || e->wb_force ? wb.max_inflight : wb.busy_inflight;
	if (ci.nr_dirty == 0 || e->wb_inflight >= limit) {
		pthread_mutex_unlock(&e->wb_lock);
		return 0;
	}
	n = wb_sweep(e, now, wb.max_age_ms * 1000000ull, WB_BATCH);
	qsort(e->items, n, sizeof(*e->items), item_cmp);
	for (unsigned i = 0; i < n && e->wb_inflight < limit;) {
		struct wb_io *w;
		uint32_t vol = e->items[i].vol;
		uint64_t lba = e->items[i].lba, blk;

		if (!wb_pin(e, vol, lba, &blk)) {
			i++;
			continue;
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
		wb_submit(e, q, w);
		started++;
	}
	pthread_mutex_unlock(&e->wb_lock);
	return (int)started;
}

int pmc_engine_flush_all(struct pmc_engine *e, struct pmc_queue *q, uint32_t vol,
			 void (*progress)(uint64_t left, void *arg), void *arg,
			 struct pmc_err *err)
{
	uint64_t last_left = UINT64_MAX;
	unsigned *streak0;
	int rc = 0;

	if (vol != UINT32_MAX && !pmc_eng_evol(e, vol))
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	if (!e->c)
		return 0; /* nothing is cached */
	/* give up on a volume only after it failed 3 more times in a row here */
	streak0 = calloc(e->nvols, sizeof(*streak0));
	if (!streak0)
		return pmc_err_set(err, ENOMEM, "flush: out of memory");
	for (uint32_t i = 0; i < e->nvols; i++)
		streak0[i] = atomic_load(&e->vols[i].fail_streak);
	pthread_mutex_lock(&e->wb_lock);
	e->wb_force = 1;
	e->wb_force_vol = vol;
	pthread_mutex_unlock(&e->wb_lock);
	for (;;) {
		struct pmc_cache_info ci;
		struct pmc_volume_info vi;
		uint64_t left;
		int failing = 0;

		if (pmc_engine_writeback_step(e, q) == 0 && pmc_queue_busy(q) == 0) {
			/* nothing to start (back-off): do not spin */
			struct timespec ts = {0, 2000000};

			nanosleep(&ts, NULL);
		}
		pmc_queue_poll(q, 1, 10000000ull);
		if (vol == UINT32_MAX) {
			pmc_cache_get_info(e->c, &ci);
			left = ci.nr_dirty;
		} else {
			pmc_cache_volume_info(e->c, vol, &vi);
			left = vi.nr_dirty;
		}
		if (left != last_left && progress)
			progress(left, arg);
		if (left == 0 && pmc_queue_busy(q) == 0)
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
	while (pmc_queue_busy(q))
		pmc_queue_poll(q, 1, 10000000ull);
	pthread_mutex_lock(&e->wb_lock);
	e->wb_force = 0;
	pthread_mutex_unlock(&e->wb_lock);
	wb_finish_drains(e);
	pmc_eng_state_mark_clean(e);
	return rc;
}
