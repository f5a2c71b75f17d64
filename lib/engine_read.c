/* engine_read.c - reads, and the user-copy transfers of ublk.
 *
 * Every block of a read is looked up and pinned; hits are copied out of
 * pmem at once (SIGBUS-safe: a poisoned block is quarantined and the read
 * fails, never served from the disk's older data). The misses are read
 * from the disk in one read per span (READ_GAP_BYTES: over the few cached
 * blocks between them, whose disk data is dropped), each block either
 * straight into a freshly allocated, pinned cache block (admitted: then
 * published clean with pmc_cache_publish_fill and copied out) or straight
 * into the request's buffer (not admitted:
 * pass-through, sequential cutoff, n-miss rule, no free block, or fills
 * not allowed while plain disk writes of the volume are unsynced or
 * write-around is in flight over the range, engine_order.c).
 *
 * User copy (PMC_REQ_UCOPY, UBLK_F_USER_COPY): the request's data is in
 * /dev/ublkcN at ucopy_off, not in a buffer. An all-hit read is written
 * there from the pinned pmem blocks with one pwritev; any other read with
 * one pwritev when the request completes, the blocks it filled straight
 * from pmem (kept pinned until then) and the rest (hits, misses not
 * admitted) from a bounce buffer. Writes read it straight into their new
 * cache blocks (engine_write.c).
 */
#define _GNU_SOURCE
#include "engine_internal.h"

/* --- reads --- */

static int admit_block(struct pmc_engine *e, struct pmc_evol *v, uint32_t vol, uint64_t lba)
{
	unsigned need = atomic_load(&v->admit_after);
	uint64_t h;
	unsigned char seen;

	if (need <= 1)
		return 1;
	h = (lba * 0x9e3779b97f4a7c15ull ^ vol) >> 40;
	seen = atomic_fetch_add(&e->ghost[h % GHOST_SLOTS], 1);
	if (seen == 255)
		atomic_store(&e->ghost[h % GHOST_SLOTS], 255);
	if ((unsigned)seen + 1 >= need) {
		atomic_store(&e->ghost[h % GHOST_SLOTS], 0);
		return 1;
	}
	return 0;
}

/* sequential detection: 1 if this request continues a stream of its kind
 * (sq: the read or the write streams) beyond the cutoff */
int pmc_eng_seq_run(struct pmc_evol *v, struct pmc_seq *sq, uint64_t off, uint64_t len)
{
	uint64_t cutoff = atomic_load_explicit(&v->seq_cutoff, memory_order_relaxed);
	uint64_t win = PMC_SEQ_WINDOW * len, run, best = 0;
	unsigned s = PMC_SEQ_STREAMS;

	if (!cutoff)
		return 0;
	/* the longest stream this request is near */
	for (unsigned i = 0; i < PMC_SEQ_STREAMS; i++) {
		uint64_t end = atomic_load_explicit(&sq->end[i], memory_order_relaxed);
		uint64_t r = atomic_load_explicit(&sq->run[i], memory_order_relaxed);

		if (end && off + win >= end && off <= end + win && (s == PMC_SEQ_STREAMS || r > best)) {
			s = i;
			best = r;
		}
	}
	if (s == PMC_SEQ_STREAMS) {
		s = atomic_fetch_add_explicit(&sq->hand, 1, memory_order_relaxed) % PMC_SEQ_STREAMS;
		atomic_store_explicit(&sq->run[s], len, memory_order_relaxed);
		atomic_store_explicit(&sq->end[s], off + len, memory_order_relaxed);
		return len > cutoff;
	}
	run = atomic_fetch_add_explicit(&sq->run[s], len, memory_order_relaxed) + len;
	if (off + len > atomic_load_explicit(&sq->end[s], memory_order_relaxed))
		atomic_store_explicit(&sq->end[s], off + len, memory_order_relaxed);
	return run > cutoff;
}

static int sequential(struct pmc_evol *v, uint64_t off, uint64_t len)
{
	return pmc_eng_seq_run(v, &v->seq_r, off, len);
}

static void submit_span(struct pmc_req_ctx *x, uint32_t start, uint32_t end);

/* a span that read over cached blocks failed: its runs of misses again,
 * each alone, so an error of the disk under a block the read did not
 * need (a bad sector a cached write covers) fails nothing. 1 if it was
 * such a span. */
static int span_retry_runs(struct pmc_req_ctx *x, uint32_t first, uint32_t end)
{
	uint32_t run = UINT32_MAX;
	int gap = 0;

	for (uint32_t i = first; i < end; i++)
		gap |= x->blk[i] == HIT_BLK;
	if (!gap)
		return 0;
	for (uint32_t i = first; i <= end; i++) {
		int miss = i < end && x->blk[i] != HIT_BLK;

		if (run != UINT32_MAX &&
		    (!miss || (x->blk[i] == NO_BLK) != (x->blk[run] == NO_BLK))) {
			submit_span(x, run, i);
			run = UINT32_MAX;
		}
		if (miss && run == UINT32_MAX)
			run = i;
	}
	return 1;
}

static void read_io_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	uint32_t first = (uint32_t)(io->off / e->bs - x->lba);
	uint32_t end = first + (uint32_t)(io->len / e->bs);

	if (res && span_retry_runs(x, first, end)) {
		pmc_eng_sub_done(x); /* the runs hold the request now */
		return;
	}
	/* admitted blocks have blk[] set: publish them clean, then copy out */
	for (uint32_t i = first; i < end; i++) {
		uint64_t blk = x->blk[i];

		if (blk == NO_BLK || blk == HIT_BLK)
			continue;
		if (res == 0) {
			/* -EEXIST/-ESTALE: a write got there first; the block is dropped */
			pmc_cache_publish_fill(e->c, req->vol, x->lba + i, blk, x->snap[i]);
			if (x->ucopy_out) {
				/* user copy: goes out from pmem, still pinned, with
				 * the rest of the request (pmc_eng_ucopy_finish) */
				x->blk[i] = blk | UCOPY_HIT;
				continue;
			}
			if (pmc_eng_hit_copy(e, req->vol, x->lba + i, blk, PMC_BLK_CLEAN,
				     x->buf + (size_t)i * e->bs))
				pmc_eng_set_res(x, -EIO);
		}
		pmc_cache_unpin(e->c, blk);
		x->blk[i] = NO_BLK;
	}
	if (res) {
		STAT_ADD(&x->q->stats[req->vol], read_errors, 1);
		pmc_eng_volume_failed(e, req->vol, res, "read", io->epoch);
		pmc_eng_set_res(x, res);
	}
	pmc_eng_sub_done(x);
}

/*
 * The next sub-I/O of x, for blocks [start, end): to or from the pinned
 * cache blocks x->blk[] (pmem), or the request buffer. Counted in pending.
 */
struct pmc_io *pmc_eng_req_io(struct pmc_req_ctx *x, enum pmc_io_op op, uint32_t start,
			     uint32_t end, int pmem, void (*cb)(struct pmc_io *, int))
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	struct pmc_io *io = &x->io[x->nio++];

	memset(io, 0, sizeof(*io));
	io->op = op;
	io->disk = e->vols[req->vol].disk;
	io->off = (x->lba + start) * e->bs;
	io->len = (uint64_t)(end - start) * e->bs;
	io->cb = cb;
	io->priv = x;
	io->iov = &x->iov[start];
	if (pmem) {
		for (uint32_t i = start; i < end; i++) {
			x->iov[i].iov_base = pmc_cache_block_data(e->c, x->blk[i]);
			x->iov[i].iov_len = e->bs;
		}
		io->iovcnt = (int)(end - start);
	} else {
		x->iov[start].iov_base = x->buf + (size_t)start * e->bs;
		x->iov[start].iov_len = io->len;
		io->iovcnt = 1;
	}
	x->pending++;
	return io;
}

/*
 * A read's misses reach the disk in one read per span: a span runs from a
 * miss to the last miss before a stretch of more than this many cached
 * blocks (or the end of the request, or max_io). The cached blocks inside
 * it are read too, into the queue's gap sink, and never used: their data
 * came from pmem. One disk read instead of one per run of misses, which on
 * an array or a network disk costs far more than the few extra blocks.
 */
#define READ_GAP_BYTES (64u << 10)

/* where the disk's data for block i of a span goes */
static char *span_dest(struct pmc_req_ctx *x, uint32_t i)
{
	if (x->blk[i] == HIT_BLK)
		return x->q->gap_sink;
	if (x->blk[i] == NO_BLK)
		return x->buf + (size_t)i * x->q->e->bs;
	return pmc_cache_block_data(x->q->e->c, x->blk[i]);
}

/*
 * Blocks [start, end) of x from the disk in one read: an admitted miss into
 * its pinned cache block, one not admitted into the request buffer, a hit
 * (HIT_BLK: already copied out) into the gap sink.
 */
static void submit_span(struct pmc_req_ctx *x, uint32_t start, uint32_t end)
{
	struct pmc_engine *e = x->q->e;
	int adm = 0, buf = 0, gap = 0;
	struct pmc_io *io;
	int c = 0;

	for (uint32_t i = start; i < end; i++) {
		if (x->blk[i] == HIT_BLK)
			gap = 1;
		else if (x->blk[i] == NO_BLK)
			buf = 1;
		else
			adm = 1;
	}
	io = pmc_eng_req_io(x, PMC_IO_READ, start, end, adm && !buf && !gap, read_io_done);
	if (adm + buf + gap > 1) {
		for (uint32_t i = start; i < end; i++) {
			char *p = span_dest(x, i);
			struct iovec *prev = c ? &x->iov[start + c - 1] : NULL;

			if (prev && p != x->q->gap_sink &&
			    (char *)prev->iov_base + prev->iov_len == p) {
				prev->iov_len += e->bs;
				continue;
			}
			x->iov[start + c].iov_base = p;
			x->iov[start + c].iov_len = e->bs;
			c++;
		}
		io->iovcnt = c;
	}
	pmc_eng_submit(x->q, x->req->vol, io);
}

/* --- user copy (PMC_REQ_UCOPY): the data is in a file, not in buf --- */

/* all of iov to or from fd at off, in IOV_MAX pieces; 0 or -errno */
int pmc_eng_ucopy_rw(int fd, struct iovec *iov, uint32_t cnt, uint64_t off, int out)
{
	while (cnt) {
		int k = cnt > IOV_MAX ? IOV_MAX : (int)cnt;
		uint64_t want = 0;
		ssize_t n;

		for (int i = 0; i < k; i++)
			want += iov[i].iov_len;
		n = out ? pwritev(fd, iov, k, (off_t)off) : preadv(fd, iov, k, (off_t)off);
		if (n < 0)
			return -errno;
		if ((uint64_t)n != want)
			return -EIO; /* the device's request is shorter than ours */
		iov += k;
		cnt -= (uint32_t)k;
		off += want;
	}
	return 0;
}

/* the request's data in a DRAM buffer of the context (reads: filled by
 * the read, sent out by pmc_eng_ucopy_finish; writes: read in now); 0 or -errno */
int pmc_eng_ucopy_bounce(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	struct iovec iov;
	int rc;

	if (x->buf)
		return 0;
	if (!x->bounce) {
		size_t len = pmc_eng_bounce_len(e);

		x->bounce = x->q->bounces + (size_t)(x - x->q->ctxs) * len;
		/* a fixed buffer: the disk reads and writes from it (write
		 * bypass, write-around, misses not admitted) pin no page */
		pmc_ring_add_buffer(x->q->ring, x->bounce, len);
	}
	if (req->op == PMC_REQ_READ) {
		x->buf = x->bounce;
		x->ucopy_out = 1;
		return 0;
	}
	iov.iov_base = x->bounce;
	iov.iov_len = req->len;
	rc = pmc_eng_ucopy_rw(req->ucopy_fd, &iov, 1, req->ucopy_off, 0);
	if (rc == 0)
		x->buf = x->bounce;
	return rc;
}

/* blk[i] of a user-copy read: a pinned block whose data has not gone out */
static int ucopy_pinned(uint64_t b)
{
	return b != NO_BLK && b != HIT_BLK && (b & UCOPY_HIT);
}

/* x->iov[0..cnt) out to the request; 0 or -errno. When the kernel could
 * not read the pmem, the pinned blocks that are poisoned are quarantined
 * and the read fails either way. */
static int ucopy_send(struct pmc_req_ctx *x, uint32_t cnt)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	int rc = pmc_eng_ucopy_rw(req->ucopy_fd, x->iov, cnt, req->ucopy_off, 1);

	if (rc != -EFAULT && rc != -EIO)
		return rc;
	for (uint32_t i = 0; i < x->n; i++) {
		uint64_t blk = x->blk[i] & ~UCOPY_HIT;

		if (ucopy_pinned(x->blk[i]) &&
		    pmc_poison_probe(pmc_cache_block_data(e->c, blk), e->bs))
			pmc_eng_media_error(e, req->vol, x->lba + i, blk);
	}
	return -EIO;
}

/* a read's pinned hits (blk | UCOPY_HIT, iov set): all hits go out from
 * pmem in one call; otherwise they are copied into the bounce buffer,
 * which the misses fill and pmc_eng_ucopy_finish sends */
static void ucopy_read_hits(struct pmc_req_ctx *x, uint32_t hits)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	int rc = 0;

	int direct = hits == x->n && !x->res;

	if (direct)
		rc = ucopy_send(x, x->n);
	else
		rc = pmc_eng_ucopy_bounce(x);
	for (uint32_t i = 0; i < x->n; i++) {
		uint64_t blk = x->blk[i] & ~UCOPY_HIT;

		if (!ucopy_pinned(x->blk[i]))
			continue;
		if (!direct && rc == 0 &&
		    pmc_eng_hit_copy(e, req->vol, x->lba + i, blk, PMC_BLK_CLEAN, x->buf + (size_t)i * e->bs))
			rc = -EIO;
		pmc_cache_unpin(e->c, blk);
		x->blk[i] = HIT_BLK;
	}
	if (rc)
		pmc_eng_set_res(x, rc);
}

/* a user-copy read that was not all hits goes out in one call: the blocks
 * it filled from pmem (pinned since their fill), the rest (hits copied
 * in, misses not admitted) from the bounce buffer; then the fills are
 * unpinned */
void pmc_eng_ucopy_finish(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;
	uint32_t cnt = 0;
	int rc;

	x->ucopy_out = 0;
	for (uint32_t i = 0; i < x->n && !x->res; i++) {
		char *p = ucopy_pinned(x->blk[i])
			      ? pmc_cache_block_data(e->c, x->blk[i] & ~UCOPY_HIT)
			      : x->buf + (size_t)i * e->bs;

		if (cnt && (char *)x->iov[cnt - 1].iov_base + x->iov[cnt - 1].iov_len == p) {
			x->iov[cnt - 1].iov_len += e->bs;
			continue;
		}
		x->iov[cnt].iov_base = p;
		x->iov[cnt++].iov_len = e->bs;
	}
	rc = x->res ? 0 : ucopy_send(x, cnt);
	for (uint32_t i = 0; i < x->n; i++) {
		if (!ucopy_pinned(x->blk[i]))
			continue;
		pmc_cache_unpin(e->c, x->blk[i] & ~UCOPY_HIT);
		x->blk[i] = NO_BLK;
	}
	if (rc)
		pmc_eng_set_res(x, rc);
}

void pmc_eng_start_read(struct pmc_req_ctx *x)
{
	struct pmc_queue *q = x->q;
	struct pmc_engine *e = q->e;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &e->vols[req->vol];
	struct pmc_vol_stats *st = &q->stats[req->vol];
	uint32_t hits = 0, i, run = UINT32_MAX, last = 0, gap_max;
	int mode = atomic_load(&v->mode);
	int bypass = mode == PMC_MODE_PASS_THROUGH || !e->c || sequential(v, req->off, req->len);

	x->pending = 1; /* held until every run is submitted */
	if (e->c)
		pmc_cache_prefetch(e->c, req->vol, x->lba, x->n);
	for (i = 0; i < x->n; i++) {
		uint64_t blk;

		x->blk[i] = NO_BLK;
		if (!e->c)
			continue;
		/* the fill snapshot precedes the lookup: any write of the block
		 * after the miss was seen (even one written back and evicted
		 * since) then keeps the fill out */
		x->snap[i] = pmc_cache_fill_seq(e->c, req->vol, x->lba + i);
		enum pmc_block_state bst;
		int lrc = pmc_cache_lookup_pin(e->c, req->vol, x->lba + i, &blk, &bst);

		if (lrc == -EUCLEAN) {
			/* the chain leaves the table or loops (corrupt index): a
			 * copy of the block may lie past the break, newer than
			 * the disk's; the read fails as for a LOST block */
			pmc_log_ratelimited(&v->rl, LOG_ERR,
					    "volume %s: block %" PRIu64 ": its index chain is "
					    "corrupt; reads fail (pmcachectl check)",
					    v->name, x->lba + i);
			pmc_eng_set_res(x, -EIO);
			x->blk[i] = HIT_BLK;
			continue;
		}
		if (lrc == 0) {
			hits++;
			if (!x->buf && bst != PMC_BLK_LOST) {
				/* user copy: kept pinned, sent out below */
				x->iov[i].iov_base = pmc_cache_block_data(e->c, blk);
				x->iov[i].iov_len = e->bs;
				x->blk[i] = blk | UCOPY_HIT;
				continue;
			}
			/* a LOST block fails the read whatever the copy path */
			if (pmc_eng_hit_copy(e, req->vol, x->lba + i, blk, bst,
				     x->buf ? x->buf + (size_t)i * e->bs : NULL))
				pmc_eng_set_res(x, -EIO);
			pmc_cache_unpin(e->c, blk);
			x->blk[i] = HIT_BLK;
		}
	}
	if (!x->buf)
		ucopy_read_hits(x, hits);
	STAT_ADD(st, read_hit_blocks, hits);
	STAT_ADD(st, read_miss_blocks, x->n - hits);
	if (hits == x->n) {
		STAT_ADD(st, read_hits, 1);
		x->path = PMC_LAT_READ_HIT;
		pmc_eng_sub_done(x);
		return;
	}
	if (hits)
		STAT_ADD(st, read_partial_misses, 1);
	else
		STAT_ADD(st, read_full_misses, 1);
	x->path = PMC_LAT_READ_MISS;
	/* what the disk holds may not be durable yet: a plain write of the
	 * volume not synced, or a write or discard of these blocks in flight
	 * (checked after the fill snapshots: one that starts later drops the
	 * fills, ORDERING.md) */
	if (!bypass)
		bypass = !pmc_eng_fills_allowed(v) || pmc_eng_around_overlap(e, req->vol, x->lba, x->n);
	/* spans of misses (READ_GAP_BYTES): admitted blocks read into pmem,
	 * others into buf, in the same disk read. Once a fill finds no
	 * block, the rest of the request is not admitted: the hand's look
	 * would be paid again for every block, each likely to fail too */
	gap_max = READ_GAP_BYTES / e->bs;
	for (i = 0; i <= x->n; i++) {
		int miss = i < x->n && x->blk[i] == NO_BLK;
		int adm = 0;

		if (miss && !bypass && admit_block(e, v, req->vol, x->lba + i)) {
			uint64_t blk;

			if (pmc_cache_alloc(e->c, PMC_ALLOC_FILL, &blk) == 0) {
				x->blk[i] = blk;
				adm = 1;
			} else {
				bypass = 1;
			}
		}
		if (miss && adm)
			STAT_ADD(st, admit_blocks, 1);
		else if (miss)
			STAT_ADD(st, bypass_blocks, 1);
		/* close the current span at the end, at max_io, or once the
		 * cached blocks since its last miss are too many to read over */
		if (run != UINT32_MAX &&
		    (i == x->n || (miss ? i - run >= e->max_io_blocks : i - last > gap_max))) {
			submit_span(x, run, last + 1);
			run = UINT32_MAX;
		}
		if (miss && run == UINT32_MAX)
			run = i;
		if (miss)
			last = i;
	}
	pmc_eng_sub_done(x);
}
