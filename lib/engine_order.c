/* engine_order.c - the order of disk writes, and flush generations
 * (lib/ORDERING.md).
 *
 * Foreground disk writes and discards enter an in-flight list by block
 * range; a disk write of blocks that an older entry or a write-back write
 * still has in flight is held until those complete, and write-back stays
 * off ranges in the list. A read miss is not admitted into the cache while
 * the list covers its range or the volume has plain disk writes not yet
 * synced.
 *
 * Flush generations: wr_done counts plain disk writes and discards
 * completed; wr_synced is the value of wr_done when the newest finished
 * sync was issued. wr_synced < wr_done: not known durable.
 *
 * Locking: the in-flight lists and the order counter are under dw_lock;
 * the generations are atomics of the volume.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

/* --- ordering of disk writes --- */

static int ranges_meet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

/* a write-back write of any block of [lba, lba + n) is in flight; dw_lock */
int pmc_eng_wb_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	for (struct wb_io *w = e->wb_flying; w; w = w->fnext)
		if (w->vol == vol && ranges_meet(w->lba, w->n, lba, n))
			return 1;
	return 0;
}

/* a write-around or discard of any block of the range is in flight; dw_lock */
int pmc_eng_around_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	for (struct pmc_req_ctx *x = e->around_flying; x; x = x->anext)
		if (x->req->vol == vol && ranges_meet(x->lba, x->n, lba, n))
			return 1;
	return 0;
}

/* one of the two above, taking dw_lock; without a cache there is nothing
 * to keep consistent */
static int overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n,
		   int (*locked)(struct pmc_engine *, uint32_t, uint64_t, uint64_t))
{
	int r;

	if (!e->c)
		return 0;
	pthread_mutex_lock(&e->dw_lock);
	r = locked(e, vol, lba, n);
	pthread_mutex_unlock(&e->dw_lock);
	return r;
}

int pmc_eng_around_overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	return overlap(e, vol, lba, n, pmc_eng_around_overlap_locked);
}

int pmc_eng_wb_overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	return overlap(e, vol, lba, n, pmc_eng_wb_overlap_locked);
}

/*
 * x (a write-around or a discard) is entered before it drops any cached
 * copy: write-back stays off its range and read misses of it are not
 * admitted until x completes (pmc_eng_around_leave from pmc_eng_req_finish).
 */
void pmc_eng_around_enter(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;

	if (x->around || !e->c)
		return;
	pthread_mutex_lock(&e->dw_lock);
	x->anext = e->around_flying;
	x->aprev = &e->around_flying;
	if (e->around_flying)
		e->around_flying->aprev = &x->anext;
	e->around_flying = x;
	x->around = 1;
	pthread_mutex_unlock(&e->dw_lock);
}

void pmc_eng_around_leave(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;

	if (!x->around)
		return;
	pthread_mutex_lock(&e->dw_lock);
	*x->aprev = x->anext;
	if (x->anext)
		x->anext->aprev = x->aprev;
	x->around = 0;
	pthread_mutex_unlock(&e->dw_lock);
}

/* a foreground disk write (or discard) of the range, older than seq, is
 * held or in flight; dw_lock */
static int fg_older_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n,
			   uint64_t seq)
{
	for (struct pmc_req_ctx *y = e->fg_flying; y; y = y->fgnext) {
		if (y->req->vol != vol)
			continue;
		for (uint32_t k = 0; k < y->fg_hi; k++)
			if (y->ioseq[k] && y->ioseq[k] < seq &&
			    ranges_meet(y->io[k].off / e->bs, y->io[k].len / e->bs, lba, n))
				return 1;
	}
	return 0;
}

/* a foreground disk write (or discard) of any block of the range is held
 * or in flight, whatever its age; dw_lock. Write-back stays off such a
 * range: its write of a newer copy must not land before that older one
 * (a write-through write whose newer copy went dirty meanwhile, after a
 * mode switch or behind a held write-through write). */
int pmc_eng_fg_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	return fg_older_locked(e, vol, lba, n, UINT64_MAX);
}

/* io of x takes its place in the order of foreground disk writes */
static void fg_io_enter(struct pmc_req_ctx *x, struct pmc_io *io)
{
	struct pmc_engine *e = x->q->e;

	pthread_mutex_lock(&e->dw_lock);
	x->ioseq[io - x->io] = ++e->dw_seq;
	if (x->fg_hi <= io - x->io)
		x->fg_hi = (uint32_t)(io - x->io) + 1;
	if (!x->fg_listed) {
		x->fgnext = e->fg_flying;
		x->fgprev = &e->fg_flying;
		if (e->fg_flying)
			e->fg_flying->fgprev = &x->fgnext;
		e->fg_flying = x;
		x->fg_listed = 1;
	}
	pthread_mutex_unlock(&e->dw_lock);
}

/* io of x completed; called after its cache updates, so a later write of
 * the blocks that this releases sees them done */
void pmc_eng_fg_io_leave(struct pmc_req_ctx *x, struct pmc_io *io)
{
	struct pmc_engine *e = x->q->e;
	int any = 0;

	if (!e->c)
		return;
	pthread_mutex_lock(&e->dw_lock);
	x->ioseq[io - x->io] = 0;
	for (uint32_t k = 0; k < x->fg_hi && !any; k++)
		any = x->ioseq[k] != 0;
	if (!any && x->fg_listed) {
		*x->fgprev = x->fgnext;
		if (x->fgnext)
			x->fgnext->fgprev = x->fgprev;
		x->fg_listed = 0;
		x->fg_hi = 0;
	}
	pthread_mutex_unlock(&e->dw_lock);
}

/*
 * A foreground disk write or discard must wait while a write-back write
 * or an older foreground write of any of its blocks is in flight: that
 * older data must land first. The caller has already replaced or dropped
 * the cached copies, so no write-back of older data can start after this
 * check (see pmc_eng_wb_claim). Older writes never wait for newer ones, and none
 * waits for a request that waits for free blocks: no cycle.
 */
static int must_hold(struct pmc_queue *q, struct pmc_io *io)
{
	struct pmc_engine *e = q->e;
	struct pmc_req_ctx *x = io->priv;
	uint64_t lba = io->off / e->bs, n = io->len / e->bs;
	int r;

	if (!e->c)
		return 0;
	pthread_mutex_lock(&e->dw_lock);
	r = pmc_eng_wb_overlap_locked(e, x->req->vol, lba, n);
	if (r)
		/* that write may wait in an open round: have it synced now
		 * (pmc_queue_poll), not when write-back next gets to it */
		atomic_store(&e->wb_seal_asked, 1);
	r = r || fg_older_locked(e, x->req->vol, lba, n, x->ioseq[io - x->io]);
	pthread_mutex_unlock(&e->dw_lock);
	return r;
}

/* issue a foreground disk write or discard, or hold it on the queue (in
 * no particular order: must_hold orders the overlapping ones) */
void pmc_eng_disk_write_issue(struct pmc_queue *q, struct pmc_io *io)
{
	struct pmc_req_ctx *x = io->priv;

	if (q->e->c)
		fg_io_enter(x, io);
	if (!must_hold(q, io)) {
		pmc_eng_submit(q, x->req->vol, io);
		return;
	}
	io->next = NULL;
	if (q->held_tail)
		q->held_tail->next = io;
	else
		q->held = io;
	q->held_tail = io;
}

void pmc_eng_retry_held(struct pmc_queue *q)
{
	struct pmc_io **pp = &q->held, *prev = NULL;

	while (*pp) {
		struct pmc_io *io = *pp;
		struct pmc_req_ctx *x = io->priv;

		if (must_hold(q, io)) {
			prev = io;
			pp = &io->next;
			continue;
		}
		*pp = io->next;
		if (q->held_tail == io)
			q->held_tail = prev;
		if (io->cb == pmc_eng_around_done) {
			/* a copy may have turned CLEAN while the write waited
			 * (write-back of the older data) */
			uint32_t first = (uint32_t)(io->off / q->e->bs - x->lba);

			pmc_eng_around_recheck(x, first, first + (uint32_t)(io->len / q->e->bs));
		}
		pmc_eng_submit(q, x->req->vol, io);
	}
}

/* --- flush generations --- */

/* wr_synced only grows */
void pmc_eng_synced_advance(struct pmc_evol *v, uint64_t gen)
{
	uint64_t cur = atomic_load(&v->wr_synced);

	while (cur < gen && !atomic_compare_exchange_weak(&v->wr_synced, &cur, gen))
		;
}

/* a sync not asked by the host, covering plain writes up to gen, failed
 * with err (negative errno): what it covered and no sync had made durable
 * may be lost (the disk's failed flush may drop its cache), yet those
 * writes were acknowledged; the next FLUSH reports it (ORDERING.md) */
void pmc_eng_sync_lost(struct pmc_evol *v, uint64_t gen, int err)
{
	if (gen > atomic_load(&v->wr_synced))
		atomic_store(&v->sync_lost, err < 0 ? -err : err ? err : EIO);
}

/* a plain disk write or discard of v is about to be issued */
void pmc_eng_plain_begin(struct pmc_evol *v)
{
	atomic_fetch_add(&v->plain_flying, 1);
}

/* ... completed (or failed): a flush arriving from now on must sync it */
void pmc_eng_plain_end(struct pmc_evol *v)
{
	atomic_fetch_add(&v->wr_done, 1);
	atomic_fetch_sub(&v->plain_flying, 1);
}

/*
 * Read misses of v may be admitted into the cache: no plain disk write is
 * in flight or unsynced, so what a fill reads is durable on the disk
 * (WR_GEN_FRESH: attached after a clean stop, no plain write since).
 */
int pmc_eng_fills_allowed(struct pmc_evol *v)
{
	uint64_t done;

	if (atomic_load(&v->plain_flying))
		return 0;
	done = atomic_load(&v->wr_done);
	return done == WR_GEN_FRESH || atomic_load(&v->wr_synced) >= done;
}
