/* engine_write.c - writes in every mode, flushes and discards.
 *
 *  - write-back: each block gets a new cache block at submission; the
 *    request then waits in the queue's publish list until the end of the
 *    loop iteration, when the data of every write of the iteration is
 *    copied in and all their blocks are published dirty together (two
 *    persist barriers per batch of up to 256 blocks, FORMAT.md): durable
 *    in pmem before any of them completes. With no free block the request
 *    waits for write-back (or goes around, as configured). A sequential
 *    stream beyond seq_cutoff goes around the cache.
 *  - write-through: as write-back but published at once (not deferred),
 *    then the pinned blocks are written to
 *    the disk with RWF_DSYNC and marked clean; the request completes after
 *    both.
 *  - write-around, pass-through, and any write while a volume drains for a
 *    mode change: drop the CLEAN cached copies, write the buffer to the
 *    disk (RWF_DSYNC unless the mode is write-around or pass-through on a
 *    volatile volume and no DIRTY copy is cached), then drop the DIRTY
 *    copies that stood for the older data.
 *  - flush: data acknowledged in write-back mode is already durable in
 *    pmem; disk writes made without RWF_DSYNC are covered by flush
 *    generations: a flush completes once a sync issued after its arrival
 *    finished (engine_order.c).
 *  - discard: invalidate (dirty data too), pass down, invalidate again.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

/* --- writes --- */

static void disk_write(struct pmc_req_ctx *x, uint32_t start, uint32_t end, int from_pmem,
		       int dsync, void (*cb)(struct pmc_io *, int));

void pmc_eng_around_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	uint32_t first = (uint32_t)(io->off / e->bs - x->lba);
	uint32_t end = first + (uint32_t)(io->len / e->bs);

	/* the new data is durable on the disk (RWF_DSYNC was used whenever a
	 * DIRTY or LOST copy was kept): drop the copies it replaces, unless a
	 * newer write replaced them meanwhile */
	for (uint32_t i = first; i < end; i++) {
		uint64_t blk;

		if (res == 0 && x->blk[i] != NO_BLK &&
		    pmc_cache_lookup_pin(e->c, req->vol, x->lba + i, &blk, NULL) == 0) {
			pmc_cache_unpin(e->c, blk);
			if (blk == x->blk[i])
				pmc_eng_inval(e, req->vol, x->lba + i, 1);
		}
		x->blk[i] = NO_BLK;
	}
	if (!(io->rw_flags & RWF_DSYNC))
		pmc_eng_plain_end(&e->vols[req->vol]);
	if (res) {
		STAT_ADD(&x->q->stats[req->vol], write_errors, 1);
		pmc_eng_volume_failed(e, req->vol, res, "write", io->epoch);
		pmc_eng_set_res(x, res);
	}
	pmc_eng_fg_io_leave(x, io);
	pmc_eng_sub_done(x);
}

/*
 * Drop the CLEAN cached copies of blocks [start, end) of x (each drop, and
 * the lookup of an absent block, also keeps any fill in flight from
 * landing). A DIRTY copy may be the only durable copy of an acknowledged
 * write, and a LOST one stands for one (reads fail rather than return the
 * older data on the disk): it stays, noted in x->blk[i] (else NO_BLK), and
 * the write is then durable. Returns 1 if one did.
 */
static int around_inval_clean(struct pmc_req_ctx *x, uint32_t start, uint32_t end)
{
	struct pmc_engine *e = x->q->e;
	int dirty = 0;

	if (!e->c) {
		for (uint32_t i = start; i < end; i++)
			x->blk[i] = NO_BLK;
		return 0;
	}
	/* one look per block, under the lock that drops it (NO_BLK is the
	 * cache's "none") */
	pmc_cache_invalidate_clean(e->c, x->req->vol, x->lba + start, end - start, &x->blk[start]);
	for (uint32_t i = start; i < end && !dirty; i++)
		dirty = x->blk[i] != NO_BLK;
	return dirty;
}

/* before a held write-around goes to the disk: drop the copies that are
 * CLEAN now; a DIRTY one (noted or newer) stays */
void pmc_eng_around_recheck(struct pmc_req_ctx *x, uint32_t start, uint32_t end)
{
	pmc_cache_invalidate_clean(x->q->e->c, x->req->vol, x->lba + start, end - start, NULL);
}

/*
 * Blocks [start, end) of x to the disk, from the request buffer, around
 * the cache. The CLEAN copies go first, so none stands for older data once
 * the new data may be on the disk; write-back and read-miss fills stay off
 * the range until x completes (pmc_eng_around_enter). The write is plain (made
 * durable by a later flush) only in write-around and pass-through mode on
 * a volume with a volatile cache, without FUA and with no DIRTY copy kept;
 * durable says the mode in force acknowledges durable writes (write-back,
 * write-through: a drain, no free block, the state marker failed).
 */
static void write_around(struct pmc_req_ctx *x, uint32_t start, uint32_t end, int durable)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &e->vols[req->vol];
	int dsync, rc = pmc_eng_ucopy_bounce(x);

	if (rc) {
		pmc_eng_set_res(x, rc);
		return;
	}
	pmc_eng_around_enter(x);
	dsync = durable || (req->flags & PMC_REQ_FUA) || atomic_load(&v->no_volatile);
	if (!dsync)
		pmc_eng_plain_begin(v); /* before any copy is dropped: fills see it */
	if (around_inval_clean(x, start, end) && !dsync) {
		/* a DIRTY copy stays until the new data is durable */
		atomic_fetch_sub(&v->plain_flying, 1);
		dsync = 1;
	}
	STAT_ADD(&x->q->stats[req->vol], write_disk_blocks, end - start);
	x->path = PMC_LAT_WRITE_DISK;
	disk_write(x, start, end, 0, dsync, pmc_eng_around_done);
}

static void through_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	uint32_t first = (uint32_t)(io->off / e->bs - x->lba);

	for (uint32_t i = first; i < first + io->len / e->bs; i++) {
		if (res == 0)
			pmc_cache_mark_clean(e->c, req->vol, x->lba + i, x->blk[i]);
		pmc_cache_unpin(e->c, x->blk[i]);
		x->blk[i] = NO_BLK;
	}
	if (res) {
		/* the data is dirty in pmem: write-back retries it */
		STAT_ADD(&x->q->stats[req->vol], write_errors, 1);
		pmc_eng_volume_failed(e, req->vol, res, "write-through", io->epoch);
		pmc_eng_set_res(x, res);
	}
	pmc_eng_fg_io_leave(x, io);
	pmc_eng_sub_done(x);
}

static void disk_write(struct pmc_req_ctx *x, uint32_t start, uint32_t end, int from_pmem,
		       int dsync, void (*cb)(struct pmc_io *, int))
{
	struct pmc_io *io = pmc_eng_req_io(x, PMC_IO_WRITE, start, end, from_pmem, cb);

	io->rw_flags = dsync ? RWF_DSYNC : 0;
	if (from_pmem) /* write-through: the same blocks went into pmem too */
		STAT_ADD(&x->q->stats[x->req->vol], write_disk_blocks, end - start);
	pmc_eng_disk_write_issue(x->q, io);
}

void pmc_eng_park(struct pmc_req_ctx *x)
{
	struct pmc_queue *q = x->q;

	x->next = NULL;
	if (q->waiting_tail)
		q->waiting_tail->next = x;
	else
		q->waiting = x;
	q->waiting_tail = x;
}

/*
 * Write-back and write-through: blocks from x->next on go into new cache
 * blocks. Returns 1 when the request had to wait for free blocks.
 */
static int write_cached_marked(struct pmc_req_ctx *x, int through);

/*
 * The volume's dirtying reference (pmc_eng_state_begin_dirty), taken once
 * by the queue for all of its writes in progress on the volume: the
 * writes of a loop iteration share one locked instruction, not one each.
 */
static int queue_begin_dirty(struct pmc_queue *q, uint32_t vol)
{
	int rc = 0;

	if (!q->dirtying[vol])
		rc = pmc_eng_state_begin_dirty(q->e, vol);
	if (!rc)
		q->dirtying[vol]++;
	return rc;
}

static void queue_end_dirty(struct pmc_queue *q, uint32_t vol)
{
	PMC_BUG_ON(!q->dirtying[vol], "volume %u: dirtying reference underflow", vol);
	if (--q->dirtying[vol] == 0)
		pmc_eng_state_end_dirty(q->e, vol);
}

static int write_cached(struct pmc_req_ctx *x, int through)
{
	uint32_t vol = x->req->vol;
	int rc;

	if (queue_begin_dirty(x->q, vol)) {
		/* the marker could not be made durable: no dirty data then */
		write_around(x, x->cursor, x->n, 1);
		x->cursor = x->n;
		return 0;
	}
	if (!through) {
		/* the mode again, now that the reference is held: a switch away
		 * from write-back finishes (wb_finish_drains: mode, then
		 * draining 0) only while no reference is, so either it sees
		 * ours and waits, or this sees it (draining first, then mode,
		 * the reverse of its stores) and makes no dirty data */
		struct pmc_evol *v = &x->q->e->vols[vol];

		if (atomic_load(&v->draining) || atomic_load(&v->mode) != PMC_MODE_WRITE_BACK) {
			queue_end_dirty(x->q, vol);
			write_around(x, x->cursor, x->n, 1);
			x->cursor = x->n;
			return 0;
		}
	}
	rc = write_cached_marked(x, through);
	if (x->pub_listed && !x->pub_ref)
		x->pub_ref = 1; /* ends when its blocks are published */
	else
		queue_end_dirty(x->q, vol);
	return rc;
}

/* the data of blocks [i, i + k) of x, allocated and pinned in x->blk[],
 * copied in and flushed (not drained); 0 or the error of the user copy */
static int copy_blocks(struct pmc_req_ctx *x, uint32_t i, uint32_t k)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	int rc;

	if (x->buf) {
		for (uint32_t j = i; j < i + k; j++)
			pmc_pmem_copy_flush(e->pm, pmc_cache_block_data(e->c, x->blk[j]),
					    x->buf + (size_t)j * e->bs, e->bs);
		return 0;
	}
	/* user copy: one read from the device straight into the blocks */
	for (uint32_t j = i; j < i + k; j++) {
		x->iov[j].iov_base = pmc_cache_block_data(e->c, x->blk[j]);
		x->iov[j].iov_len = e->bs;
	}
	rc = pmc_eng_ucopy_rw(req->ucopy_fd, &x->iov[i], k, req->ucopy_off + (uint64_t)i * e->bs, 0);
	for (uint32_t j = i; j < i + k && !rc; j++)
		pmc_pmem_flush(e->pm, x->iov[j].iov_base, e->bs);
	return rc;
}

/* drop the pins of blocks [i, i + k) of x */
static void unpin_blocks(struct pmc_req_ctx *x, uint32_t i, uint32_t k)
{
	for (uint32_t j = i; j < i + k; j++)
		if (x->blk[j] != NO_BLK) {
			pmc_cache_unpin(x->q->e->c, x->blk[j]);
			x->blk[j] = NO_BLK;
		}
}

/*
 * Write-through: blocks [i, i + k) of x, copied in, published together now
 * (two persist barriers for all of them); they keep their pins for the
 * disk write unless the publish failed. 0 or the first error.
 */
static int publish_through(struct pmc_req_ctx *x, uint32_t i, uint32_t k)
{
	struct pmc_engine *e = x->q->e;
	int res[PMC_BATCH_MAX], rc;

	rc = pmc_cache_publish_range(e->c, x->req->vol, x->lba + i, &x->blk[i], k, PMC_BLK_DIRTY,
				     res);
	for (uint32_t j = 0; j < k && !rc; j++)
		rc = res[j];
	return rc;
}

/*
 * Write-back: blocks [i, i + k) of x, allocated and pinned, wait in the
 * queue's publish list for the end of the loop iteration, when the data of
 * every write of the iteration is copied in and all of it is published
 * together (pmc_eng_publish_deferred). The copies then follow one another
 * with no locked instruction between them (each would wait for the
 * non-temporal stores before it), and the whole iteration pays two persist
 * barriers, not two per request. The request holds a reference until
 * then: it completes after the publish, so nothing is acknowledged before
 * it is durable.
 */
static void defer_publish(struct pmc_req_ctx *x, uint32_t i, uint32_t k)
{
	struct pmc_queue *q = x->q;

	if (x->pub_listed) {
		/* a request resumed before its earlier blocks were published:
		 * its blocks follow on from them */
		PMC_BUG_ON(x->pub_hi != i, "deferred publish of blocks %u.. after ..%u", i,
			   x->pub_hi);
		x->pub_hi = i + k;
		return;
	}
	x->pub_lo = i;
	x->pub_hi = i + k;
	x->pub_listed = 1;
	x->pending++;
	x->pub_next = NULL;
	*q->pub_tail = x;
	q->pub_tail = &x->pub_next;
}

/* part of a publish batch: blocks [lo, hi) of x, copied in or failed */
struct pub_part {
	struct pmc_req_ctx *x;
	uint32_t lo, hi;
	int err;
};

/* one batch from the head of q->pub: at most PMC_BATCH_MAX blocks of
 * requests of one volume, in the list's order (a key written twice is
 * published in that order: pmc_cache_publish_n keeps it) */
static void publish_deferred_batch(struct pmc_queue *q)
{
	struct pmc_engine *e = q->e;
	uint32_t vol = q->pub->req->vol, n = 0, m = 0, nparts = 0, taken = 0;
	uint64_t lba[PMC_BATCH_MAX], blk[PMC_BATCH_MAX];
	struct pub_part part[PMC_BATCH_MAX];
	int res[PMC_BATCH_MAX], rc = 0;

	/* taken counts the blocks of every part, published or failed: each
	 * part has at least one, so part[] cannot overflow, and a part cut
	 * short fills the batch, so it is the last (the results below stop
	 * at it) */
	for (struct pmc_req_ctx *x = q->pub; x && x->req->vol == vol && taken < PMC_BATCH_MAX;
	     x = x->pub_next) {
		struct pub_part *p = &part[nparts++];
		uint32_t k = x->pub_hi - x->pub_lo;

		if (k > PMC_BATCH_MAX - taken)
			k = PMC_BATCH_MAX - taken;
		taken += k;
		p->x = x;
		p->lo = x->pub_lo;
		p->hi = x->pub_lo + k;
		p->err = copy_blocks(x, p->lo, k);
		if (!p->err) {
			for (uint32_t j = p->lo; j < p->hi; j++, n++) {
				lba[n] = x->lba + j;
				blk[n] = x->blk[j];
			}
		}
	}
	if (n)
		rc = pmc_cache_publish_n(e->c, vol, lba, blk, n, PMC_BLK_DIRTY, NULL, res);
	/* the results, to the requests in the same order */
	for (uint32_t i = 0; i < nparts; i++) {
		struct pub_part *p = &part[i];
		struct pmc_req_ctx *x = p->x;

		for (uint32_t j = p->lo; j < p->hi; j++)
			pmc_eng_set_res(x, p->err ? p->err : rc ? rc : res[m++]);
		unpin_blocks(x, p->lo, p->hi - p->lo);
		x->pub_lo = p->hi;
		if (p->hi < x->pub_hi)
			break; /* the rest in the next batch */
		q->pub = x->pub_next;
		if (!q->pub)
			q->pub_tail = &q->pub;
		x->pub_listed = 0;
		if (x->pub_ref) {
			x->pub_ref = 0;
			queue_end_dirty(q, vol);
		}
		pmc_eng_sub_done(x);
	}
}

void pmc_eng_publish_deferred(struct pmc_queue *q)
{
	while (q->pub)
		publish_deferred_batch(q);
}

static int write_cached_marked(struct pmc_req_ctx *x, int through)
{
	struct pmc_queue *q = x->q;
	struct pmc_engine *e = q->e;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &e->vols[req->vol];
	struct pmc_vol_stats *st = &q->stats[req->vol];
	uint32_t i = x->cursor, tstart = x->cursor;

	while (i < x->n) {
		uint32_t k = 0;
		int rc = 0;

		/* a batch: as many blocks as can be had, published together */
		while (i + k < x->n && k < PMC_BATCH_MAX) {
			rc = pmc_cache_alloc(e->c, PMC_ALLOC_EVICT, &x->blk[i + k]);
			if (rc)
				break;
			k++;
		}
		if (k) {
			int prc = 0;

			if (through) {
				prc = copy_blocks(x, i, k);
				if (!prc)
					prc = publish_through(x, i, k);
			} else {
				defer_publish(x, i, k);
			}
			if (prc) {
				/* the blocks before i: write-through writes them
				 * to the disk, write-back publishes them */
				unpin_blocks(x, i, k);
				pmc_eng_set_res(x, prc);
				if (through && i > tstart)
					disk_write(x, tstart, i, 1, 1, through_done);
				STAT_ADD(st, write_pmem_blocks, i - x->cursor);
				x->cursor = x->n;
				return 0;
			}
			i += k;
			while (through && i - tstart >= e->max_io_blocks) {
				disk_write(x, tstart, tstart + e->max_io_blocks, 1, 1, through_done);
				tstart += e->max_io_blocks;
			}
		}
		if (!rc)
			continue;
		if (atomic_load(&v->nospace) == PMC_NOSPACE_AROUND) {
			if (through && i > tstart)
				disk_write(x, tstart, i, 1, 1, through_done);
			STAT_ADD(st, write_pmem_blocks, i - x->cursor);
			write_around(x, i, x->n, 1);
			x->cursor = x->n;
			return 0;
		}
		if (through && i > tstart)
			disk_write(x, tstart, i, 1, 1, through_done);
		STAT_ADD(st, write_pmem_blocks, i - x->cursor);
		STAT_ADD(st, nospace_waits, 1);
		/* write-back: no holding back while writes wait for it */
		atomic_store_explicit(&e->last_nospace_ns, pmc_eng_queue_now(q), memory_order_relaxed);
		x->cursor = i;
		return 1;
	}
	if (through && i > tstart)
		disk_write(x, tstart, i, 1, 1, through_done);
	STAT_ADD(st, write_pmem_blocks, i - x->cursor);
	x->cursor = x->n;
	return 0;
}

/* writes acknowledged in the mode in force, or in the one a drain leads
 * to, must be durable at completion (write-back, write-through) */
static int durable_mode(struct pmc_evol *v, int in_force)
{
	return in_force <= PMC_MODE_WRITE_THROUGH ||
	       atomic_load(&v->target) <= PMC_MODE_WRITE_THROUGH;
}

/* x->pending holds one reference for the request itself while it is being
 * started or parked; sub-I/Os add theirs. */
void pmc_eng_start_write(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_evol *v = &e->vols[x->req->vol];
	int mode = atomic_load(&v->mode), in_force = mode;

	if (atomic_load(&v->draining) && mode == PMC_MODE_WRITE_BACK)
		mode = PMC_MODE_WRITE_AROUND; /* leaving write-back: no new dirty data */
	x->pending = 1;
	if (x->q->waiting) {
		/* writes leave in the order they came: behind the waiting ones */
		x->path = PMC_LAT_WRITE_PMEM;
		pmc_eng_park(x);
		return;
	}
	switch (mode) {
	case PMC_MODE_WRITE_BACK:
		if (pmc_eng_seq_run(v, &v->seq_w, x->req->off, x->req->len) &&
		    !(x->req->flags & PMC_REQ_FUA)) {
			/* a stream beyond seq_cutoff: to the disk, around the cache
			 * (its copies dropped), plain on a volatile volume; the
			 * disk writes it once instead of pmem now and write-back
			 * later */
			STAT_ADD(&x->q->stats[x->req->vol], write_bypass_blocks, x->n);
			write_around(x, 0, x->n, 0);
			break;
		}
		x->path = PMC_LAT_WRITE_PMEM;
		if (write_cached(x, 0)) {
			pmc_eng_park(x); /* keeps its reference */
			return;
		}
		break;
	case PMC_MODE_WRITE_THROUGH:
		x->path = PMC_LAT_WRITE_DISK;
		if (write_cached(x, 1)) {
			pmc_eng_park(x);
			return;
		}
		break;
	default:
		write_around(x, 0, x->n, durable_mode(v, in_force));
		break;
	}
	pmc_eng_sub_done(x);
}

/* a parked write resumes where it stopped; it still holds its reference */
void pmc_eng_resume_write(struct pmc_req_ctx *x)
{
	struct pmc_evol *v = &x->q->e->vols[x->req->vol];
	int mode = atomic_load(&v->mode);

	if (atomic_load(&v->draining) || mode > PMC_MODE_WRITE_THROUGH) {
		write_around(x, x->cursor, x->n, durable_mode(v, mode));
		x->cursor = x->n;
		pmc_eng_sub_done(x);
		return;
	}
	x->path = mode == PMC_MODE_WRITE_THROUGH ? PMC_LAT_WRITE_DISK : PMC_LAT_WRITE_PMEM;
	if (write_cached(x, mode == PMC_MODE_WRITE_THROUGH)) {
		pmc_eng_park(x);
		return;
	}
	pmc_eng_sub_done(x);
}

/* --- flush and discard --- */

/* a FLUSH reports a sync loss the engine recorded (pmc_eng_sync_lost),
 * once: 1 when x now fails with it */
static int flush_lost(struct pmc_req_ctx *x)
{
	int lost = atomic_exchange(&x->q->e->vols[x->req->vol].sync_lost, 0);

	if (!lost)
		return 0;
	STAT_ADD(&x->q->stats[x->req->vol], write_errors, 1);
	pmc_eng_set_res(x, -lost);
	return 1;
}

static void simple_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &x->q->e->vols[req->vol];

	if (req->op == PMC_REQ_DISCARD) {
		if (!res)
			pmc_eng_inval(x->q->e, req->vol, x->lba, x->n);
		pmc_eng_plain_end(v);
		pmc_eng_fg_io_leave(x, io);
	}
	/* what completed before the sync was issued is durable now; after a
	 * failure nothing is known durable: the next flush syncs again */
	/* a sync of the engine's own that failed while this one was in
	 * flight: the plain writes it covered may be lost whatever this one
	 * says */
	if (!res && req->op == PMC_REQ_FLUSH && !flush_lost(x))
		pmc_eng_synced_advance(v, x->gen);
	if (res) {
		pmc_eng_volume_failed(x->q->e, req->vol, res,
				      req->op == PMC_REQ_FLUSH ? "flush" : "discard", io->epoch);
		STAT_ADD(&x->q->stats[req->vol], write_errors, 1);
		pmc_eng_set_res(x, res);
	}
	pmc_eng_sub_done(x);
}

static void start_simple(struct pmc_req_ctx *x, enum pmc_io_op op)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	struct pmc_io *io = &x->io[0];

	x->nio = 1;
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->disk = e->vols[req->vol].disk;
	io->off = req->off;
	io->len = req->len;
	io->cb = simple_done;
	io->priv = x;
	x->pending = 1;
	if (op == PMC_IO_DISCARD)
		pmc_eng_disk_write_issue(x->q, io); /* after older writes of the range */
	else
		pmc_eng_submit(x->q, req->vol, io);
}

void pmc_eng_start_flush(struct pmc_req_ctx *x)
{
	struct pmc_evol *v = &x->q->e->vols[x->req->vol];

	x->path = PMC_LAT_FLUSH;
	/* a sync of the engine's own failed over plain writes acknowledged
	 * before this flush: they may be lost, and this flush is the first
	 * the host sees since */
	if (flush_lost(x)) {
		x->pending = 1;
		pmc_eng_sub_done(x);
		return;
	}
	/* write-back data is durable in pmem; plain disk writes completed
	 * before this flush arrived are in wr_done, and a sync issued now
	 * covers them. Nothing to do if one issued later has finished. */
	x->gen = atomic_load(&v->wr_done);
	if (atomic_load(&v->wr_synced) >= x->gen) {
		x->pending = 1;
		pmc_eng_sub_done(x);
		return;
	}
	start_simple(x, PMC_IO_FSYNC);
}

void pmc_eng_start_discard(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;

	x->path = PMC_LAT_DISCARD;
	/* like a write around the cache: write-back and fills stay off the
	 * range, and the discard waits for older writes of it in flight */
	pmc_eng_around_enter(x);
	if (!e->vols[req->vol].disk->can_discard && !pmc_eng_wb_overlap(e, req->vol, x->lba, x->n)) {
		/* nothing to send, and no write-back write whose data could
		 * land after the drop (one that started before around_enter
		 * is seen here, none can start after it) */
		pmc_eng_inval(e, req->vol, x->lba, x->n);
		pmc_eng_around_leave(x);
		x->pending = 1;
		pmc_eng_sub_done(x);
		return;
	}
	/* (a disk that cannot discard answers EOPNOTSUPP, taken as done: the
	 * request only had to wait for the write-back write of its blocks,
	 * so that no fill caches what that write then changes) */
	/* the cached copies go when the disk's discard succeeded
	 * (simple_done): failed, a dirty copy is still the newest data the
	 * host wrote (dropped first, reads then got the disk's older data);
	 * write-back and fills stay off the range meanwhile */
	pmc_eng_plain_begin(&e->vols[req->vol]);
	start_simple(x, PMC_IO_DISCARD);
}
