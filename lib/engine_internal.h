/* engine_internal.h - the engine's shared request state: volumes, queues,
 * request contexts and write-back state, and the functions one engine file
 * calls in another (engine.c, engine_read.c, engine_write.c,
 * engine_order.c, engine_wb.c). Never included outside lib/. */
#ifndef PMC_ENGINE_INTERNAL_H
#define PMC_ENGINE_INTERNAL_H

#include <errno.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>
#include <limits.h>

#include "cache_internal.h"
#include "diskid.h"
#include "engine.h"
#include "log.h"
#include "poison.h"
#include "ring.h"
#include "state.h"
#include "stats.h"

#define GHOST_SLOTS 65536u	/* n-miss admission: counters of recent misses */
#define WB_BATCH 512u		/* candidates one write-back sweep collects */
#define WB_KEEP_NS (50 * 1000000ull) /* steps take a sweep's candidates this long */
#define WB_SCAN 4096u		/* descriptors (or dirty-map bits) looked at per write-back step */
#define WB_CLOCK_SLACK_NS (1000 * 1000000ull) /* a birth further ahead of now: the clock went back */
#define WB_REBUILD 16384u	/* descriptors the dirty-map rebuild reads per write-back step */
#define WB_BACKOFF_MAX_MS 60000u
#define WB_ROUND_NS (20 * 1000000ull) /* a write-back round takes writes this long at most */
#define WB_ROUND_BYTES (16u << 20)    /* ... and this much data */
#define WB_ROUND_WRITES 64u	      /* ... and this many writes (each in the in-flight list) */
#define WB_HELD_BYTES (64u << 20)     /* written back, waiting for a sync: at most */
#define NO_BLK UINT64_MAX
#define HIT_BLK (UINT64_MAX - 1) /* read: served from pmem already */
#define UCOPY_HIT (1ull << 62)	 /* read, user copy: pinned hit not yet sent */
/* wr_done of a volume attached after a clean stop, with no plain disk
 * write since: fills may be admitted; a flush syncs unless wr_synced
 * starts there too (pmc_engine_attach_flags: a known volume, not bypassed) */
#define WR_GEN_FRESH 1u

/*
 * Sequential detection (engine_read.c): the last few streams of a kind on a
 * volume, each its end and its length so far. A request near a stream's
 * end (within PMC_SEQ_WINDOW of its own length: the requests of one stream
 * reach the queues out of order) continues it, the longest of them when
 * several are near (random requests close by leave short streams there
 * that would cut a long one short); any other replaces one of the
 * streams in turn, so random requests never add up to a run.
 * Shared by the queues with relaxed atomics: a heuristic, races only blur
 * it.
 */
#define PMC_SEQ_STREAMS 8
#define PMC_SEQ_WINDOW 8
struct pmc_seq {
	atomic_uint_fast64_t end[PMC_SEQ_STREAMS];
	atomic_uint_fast64_t run[PMC_SEQ_STREAMS];
	atomic_uint hand;
};

struct pmc_evol {
	/* NULL: not attached. Atomic: attach and detach store it under e->lock,
	 * write-back and the queues read it under other locks or none */
	struct pmc_disk *_Atomic disk;
	int attached_once;	/* attached in this process (under e->lock) */
	char disk_id[PMC_DISK_ID_MAX + 1]; /* its disk's identity, "" unknown (e->lock) */
	/* the slot's counters when this volume was attached (a slot reused
	 * by another volume keeps its queues' counts): subtracted from its
	 * statistics; under e->lock */
	struct pmc_vol_stats stats_base;
	char name[PMC_VOLUME_NAME_MAX + 1];
	atomic_int marked;	/* the state file says dirty */
	atomic_int dirtying;	/* writes that may create dirty blocks, in progress */
	uint64_t blocks;	/* volume size in blocks */
	atomic_int mode;	/* enum pmc_mode in force */
	atomic_int target;	/* mode to switch to once drained */
	atomic_int draining;	/* leaving write-back: writes go to disk */
	atomic_uint admit_after;
	atomic_uint_fast64_t seq_cutoff;
	atomic_int nospace;
	atomic_int error;	/* sticky first disk error, positive errno */
	atomic_uint err_epoch;	/* raised by each pmc_engine_clear_error */
	atomic_uint_fast64_t retry_at_ns;
	atomic_uint backoff_ms;
	atomic_uint fail_streak; /* failed write-back rounds in a row */
	/* a dirty block of the volume cannot be written back (corrupt
	 * metadata: its key past the end, its chain broken): a flush fails */
	atomic_int wb_corrupt;
	/* failure round of write-back (wb_lock): raised by the first failure
	 * (of a write or a sync) of a retry; the other writes of that retry
	 * fail without growing the back-off */
	uint32_t wb_fail_round;
	struct wb_round *wb_open; /* write-back: the round taking writes (wb_lock) */
	unsigned wb_busy;	  /* its write-back writes and syncs in flight (wb_lock) */
	/* (wb_lock) its write-back writes in flight, the bytes of its
	 * completed ones waiting for their round's sync, and when its last
	 * write or sync completed, or its first of a busy spell started:
	 * busy with no progress for stall_ms, the volume is stalled (a hung
	 * disk or path): what it holds stops counting against write-back's
	 * shared limits, and it gets no more until it progresses */
	unsigned wb_writes;
	uint64_t wb_held;
	uint64_t wb_progress_ns;
	int wb_stalled;
	/* flush generations (ORDERING.md): plain disk writes and discards
	 * completed, and the value of wr_done when the newest finished sync
	 * was issued; wr_synced < wr_done: not known durable */
	atomic_uint_fast64_t wr_done;
	atomic_uint_fast64_t wr_synced;
	/* a sync of the engine's own (a write-back round's, set_volatile's)
	 * failed while it covered plain writes not yet known durable: they
	 * may be gone from the disk's cache, acknowledged; the next FLUSH
	 * fails with this error (once), as it would have without the cache */
	atomic_int sync_lost;
	atomic_int plain_flying; /* plain disk writes and discards in flight */
	atomic_int no_volatile;	/* the device promised no volatile cache: always DSYNC */
	struct pmc_seq seq_r;	/* sequential read detection */
	struct pmc_seq seq_w;	/* ... of writes (write-back bypass) */
	atomic_uint_fast64_t oldest_birth_ns; /* last full sweep */
	struct pmc_ratelimit rl;
};

struct wb_round;

/* one write-back write: plain, made durable by its round's sync */
struct wb_io {
	struct pmc_io io;
	struct pmc_engine *e;
	struct pmc_queue *q;
	struct wb_round *round;	/* the round it belongs to */
	uint32_t vol;
	uint32_t n;
	uint64_t lba;		/* first block */
	uint64_t start_ns;
	uint64_t *blk;		/* [max_io_blocks] */
	struct iovec *iov;	/* [max_io_blocks] */
	struct wb_io *next;	/* free list; the round's completed writes */
	struct wb_io *fnext, **fprev; /* in-flight list (dw_lock) */
};

/*
 * Write-back writes of one volume, started by one or more steps within
 * WB_ROUND_NS, and the sync (PMC_IO_FSYNC, fdatasync through the disk's
 * ops) issued once the round is sealed and all of them completed; the
 * blocks of the writes that succeeded are marked clean when the sync
 * succeeded. Under wb_lock. The sync runs on the queue that issues it
 * (the sealing step's, or the one the last write completed on).
 */
struct wb_round {
	struct pmc_io io;	/* the sync */
	struct pmc_engine *e;
	struct pmc_queue *q;	/* where the sync runs (set when it is issued) */
	uint32_t vol;
	int sealed;		/* takes no more writes */
	unsigned writes;	/* writes in flight */
	uint64_t open_ns;	/* when its first write was started */
	uint64_t bytes;		/* of the writes started */
	unsigned started;	/* writes started */
	struct wb_io *done;	/* writes completed without error */
	uint64_t gen;		/* the volume's wr_done when the sync was issued */
	uint32_t fail_round;	/* the volume's wb_fail_round when the round began */
	struct wb_round *next;	/* free list */
};

struct wb_item {
	uint32_t vol;
	uint64_t lba;
	uint64_t blk;
};

struct pmc_engine {
	struct pmc_cache *c;	/* NULL: the pmem is unavailable, pass-through only */
	struct pmc_state *state; /* may be NULL (tests) */
	uint32_t nvols;
	struct pmc_pmem *pm;
	uint32_t bs;
	uint32_t max_req_blocks;
	uint32_t max_io_blocks;
	pthread_mutex_t lock;
	struct pmc_wb_conf wb;	/* under lock; copied by each step */
	uint32_t wb_max_io_cap;	/* wb.max_io_bytes at create: sizes the arrays */
	struct pmc_evol *vols;	/* [max_volumes] */
	struct pmc_queue *queues; /* under lock */
	struct pmc_vol_stats *retired; /* [nvols] counted by destroyed queues (lock) */
	atomic_uint_fast64_t last_fg_ns;
	atomic_uint_fast64_t last_nospace_ns; /* a write last waited for a free block */
	int told_fixed;		/* logged which I/O path is in use (under lock) */
	atomic_uchar ghost[GHOST_SLOTS];
	/* write-back, owned by the thread in writeback_step (wb_lock) */
	pthread_mutex_t wb_lock;
	/* disk writes in flight, by block range: no other disk write of
	 * those blocks may be issued before they complete, or the disk could
	 * end up with the older data under a block marked clean */
	pthread_mutex_t dw_lock;
	struct wb_io *wb_flying;
	atomic_int wb_seal_asked; /* a held disk write waits for write-back: seal its rounds */
	atomic_uint flush_cancel; /* bumped by pmc_engine_flush_cancel */
	struct pmc_req_ctx *around_flying; /* write-around and discard requests */
	struct pmc_req_ctx *fg_flying;	   /* requests with disk writes held or in flight */
	uint64_t dw_seq;		   /* order of foreground disk writes (dw_lock) */
	uint64_t wb_cursor;	/* next descriptor, or next block of the dirty map */
	int wb_map;		/* the dirty map is complete: write-back walks it */
	int wb_active;		/* between the watermarks */
	unsigned wb_inflight;	/* write-back writes in flight */
	uint64_t wb_held_bytes;	/* data of writes completed, waiting for their round's sync */
	uint32_t wb_force_vol;	/* flush_all: UINT32_MAX all, NONE none */
	int wb_force;
	uint64_t *wb_oldest;	/* [max_volumes] oldest birth in the current sweep */
	uint64_t wb_swept;	/* descriptors swept in the current pass */
	/* no dirty block is older than this (pmc_now_ns): the oldest birth
	 * the last full pass saw, or that pass's start if earlier; 0 unknown */
	uint64_t wb_born_after;
	uint64_t wb_pass_start;	/* when the current pass began (0: unknown) */
	int wb_pass_future;	/* the current pass saw a birth ahead of the clock */
	uint32_t wb_first_vol;	/* the next step serves this volume (or the next one) first */
	struct wb_item *items;	/* [WB_BATCH]: the last sweep's candidates, sorted */
	unsigned items_n;	/* ... how many */
	unsigned items_pos;	/* ... the first one no step took yet */
	uint64_t items_ns;	/* ... when swept (the queue's loop time) */
	uint64_t items_sel;	/* ... what the sweep selected (wb_selection) */
	struct wb_io *wb_free;
	struct wb_round *wb_round_free;
};

struct pmc_req_ctx {
	struct pmc_queue *q;
	struct pmc_req *req;
	uint64_t lba;		/* first block */
	uint32_t n;		/* blocks */
	uint32_t cursor;	/* write-back writes: blocks done */
	int pending;		/* sub-I/Os in flight */
	int res;		/* first error */
	int path;		/* enum pmc_lat_path for the histogram */
	uint64_t start_ns;
	uint64_t *blk;		/* [max_req_blocks] pinned cache block or NO_BLK */
	uint32_t *snap;		/* [max_req_blocks] fill snapshots */
	struct pmc_io *io;	/* [max_req_blocks] */
	struct iovec *iov;	/* [max_req_blocks] */
	uint32_t nio;
	char *buf;		/* the request's data in DRAM: req->buf, or bounce */
	char *bounce;		/* PMC_REQ_UCOPY: [max_req_blocks * bs], on first need
				 * (its slot of q->bounces) */
	int ucopy_out;		/* PMC_REQ_UCOPY read: bounce goes out at the end */
	/* [max_req_blocks] disk write or discard io[k] held or in flight:
	 * its place in the order of those (e->dw_seq), else 0 (dw_lock) */
	uint64_t *ioseq;
	uint32_t fg_hi;		/* ioseq[k] is 0 for k >= fg_hi (dw_lock) */
	int fg_listed;		/* in e->fg_flying (dw_lock) */
	struct pmc_req_ctx *fgnext, **fgprev;
	/* a disk write or discard in flight over [lba, lba + n): write-back
	 * stays off it, later disk writes of those blocks wait for it */
	int around;
	struct pmc_req_ctx *anext, **aprev; /* e->around_flying (dw_lock) */
	uint64_t gen;		/* flush: wr_done when its sync was issued */
	/* write-back blocks [pub_lo, pub_hi) copied in, waiting in q->pub to
	 * be published with the other writes of the loop iteration; pub_ref:
	 * the request holds the volume's dirtying reference until then */
	uint32_t pub_lo, pub_hi;
	int pub_listed, pub_ref;
	struct pmc_req_ctx *pub_next;
	struct pmc_req_ctx *next;
};

struct pmc_queue {
	struct pmc_engine *e;
	struct pmc_ring *ring;
	unsigned depth;
	struct pmc_req_ctx *ctxs;
	struct pmc_req_ctx *free;
	struct pmc_req_ctx *waiting, *waiting_tail; /* no free block: retried */
	struct pmc_req_ctx *done;		    /* complete from poll */
	struct pmc_io *held, *held_tail;	    /* disk writes waiting on write-back, FIFO */
	struct pmc_req_ctx *pub, **pub_tail;	    /* writes to publish, FIFO */
	struct pmc_req **pending;		    /* no free context yet: FIFO */
	unsigned npending, pend_head;
	unsigned busy;				    /* contexts in use */
	int in_poll;				    /* pmc_queue_poll on the stack */
	struct pmc_vol_stats *stats;		    /* [max_volumes] */
	/* [max_volumes] writes of this queue that may make dirty blocks of
	 * the volume; the queue holds the volume's dirtying reference while
	 * this is not 0 (engine_write.c) */
	unsigned *dirtying;
	/* one block of DRAM that the disk reads of cached blocks inside a
	 * read's span land in, never read (engine_read.c) */
	char *gap_sink;
	/* [depth][max_req_blocks * bs], reserved, not committed: a context's
	 * bounce buffer is its slot, touched on first need (pmc_ring_buf_alloc:
	 * huge pages where the kernel gives them, so the user copy pins few) */
	char *bounces;
	struct pmc_queue *next;
};

/*
 * Counter bump of a queue's own statistics: one writer (the queue's
 * thread), so a relaxed load and store, no locked read-modify-write; other
 * threads sum them with relaxed loads. (Write-back completions run on the
 * queue that issued them, and count in that queue's statistics.)
 */
#define STAT_ADD(s, field, v)                                                                      \
	__atomic_store_n(&(s)->field, __atomic_load_n(&(s)->field, __ATOMIC_RELAXED) + (uint64_t)(v), \
			 __ATOMIC_RELAXED)

/* engine.c */
void pmc_eng_inval(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n);
int pmc_eng_state_begin_dirty(struct pmc_engine *e, uint32_t vol);
void pmc_eng_state_end_dirty(struct pmc_engine *e, uint32_t vol);
void pmc_eng_state_mark_clean(struct pmc_engine *e);
struct pmc_evol *pmc_eng_evol(struct pmc_engine *e, uint32_t vol);
int pmc_eng_volume_failed(struct pmc_engine *e, uint32_t vol, int res, const char *what,
			  uint32_t epoch);

/* start io on q's ring, stamped with its volume's error epoch: a failure
 * of an I/O started before the volume's error was cleared (a path that
 * has been replaced since) is not the volume's error */
static inline void pmc_eng_submit(struct pmc_queue *q, uint32_t vol, struct pmc_io *io)
{
	io->epoch = atomic_load_explicit(&q->e->vols[vol].err_epoch, memory_order_acquire);
	pmc_ring_submit(q->ring, io);
}
void pmc_eng_media_error(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t blk);
int pmc_eng_hit_copy(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t blk,
		    enum pmc_block_state st, void *dst);
unsigned pmc_eng_write_poisoned(struct pmc_engine *e, uint32_t vol, uint64_t lba,
			       const uint64_t *blk, uint32_t n);
void pmc_eng_req_finish(struct pmc_req_ctx *x);
void pmc_eng_start(struct pmc_req_ctx *x);

/* engine_read.c */
int pmc_eng_seq_run(struct pmc_evol *v, struct pmc_seq *sq, uint64_t off, uint64_t len);
struct pmc_io *pmc_eng_req_io(struct pmc_req_ctx *x, enum pmc_io_op op, uint32_t start,
			     uint32_t end, int pmem, void (*cb)(struct pmc_io *, int));
int pmc_eng_ucopy_rw(int fd, struct iovec *iov, uint32_t cnt, uint64_t off, int out);
int pmc_eng_ucopy_bounce(struct pmc_req_ctx *x);
void pmc_eng_ucopy_finish(struct pmc_req_ctx *x);
void pmc_eng_start_read(struct pmc_req_ctx *x);

/* engine_order.c */
int pmc_eng_wb_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n);
int pmc_eng_fg_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n);
int pmc_eng_around_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n);
int pmc_eng_wb_overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n);
int pmc_eng_around_overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n);
void pmc_eng_around_enter(struct pmc_req_ctx *x);
void pmc_eng_around_leave(struct pmc_req_ctx *x);
void pmc_eng_fg_io_leave(struct pmc_req_ctx *x, struct pmc_io *io);
void pmc_eng_disk_write_issue(struct pmc_queue *q, struct pmc_io *io);
void pmc_eng_retry_held(struct pmc_queue *q);
void pmc_eng_synced_advance(struct pmc_evol *v, uint64_t gen);
void pmc_eng_sync_lost(struct pmc_evol *v, uint64_t gen, int err);
void pmc_eng_plain_begin(struct pmc_evol *v);
void pmc_eng_plain_end(struct pmc_evol *v);
int pmc_eng_fills_allowed(struct pmc_evol *v);

/* engine_write.c */
void pmc_eng_around_done(struct pmc_io *io, int res);
void pmc_eng_around_recheck(struct pmc_req_ctx *x, uint32_t start, uint32_t end);
void pmc_eng_park(struct pmc_req_ctx *x);
void pmc_eng_start_write(struct pmc_req_ctx *x);
void pmc_eng_resume_write(struct pmc_req_ctx *x);
void pmc_eng_start_flush(struct pmc_req_ctx *x);
void pmc_eng_start_discard(struct pmc_req_ctx *x);
void pmc_eng_publish_deferred(struct pmc_queue *q);

/* engine_wb.c */
int pmc_eng_wb_claim(struct pmc_engine *e, struct wb_io *w);
void pmc_eng_wb_drop_open(struct pmc_engine *e);
void pmc_eng_wb_detach_locked(struct pmc_engine *e, uint32_t vol);
unsigned pmc_eng_wb_busy(struct pmc_engine *e, uint32_t vol);
void pmc_eng_wb_seal_asked(struct pmc_engine *e, struct pmc_queue *q);

/* one context's bounce buffer: its slot of q->bounces */
static inline size_t pmc_eng_bounce_len(const struct pmc_engine *e)
{
	return (size_t)e->max_req_blocks * e->bs;
}

/* the whole reservation of a queue of depth contexts */
static inline size_t pmc_eng_bounces_len(const struct pmc_engine *e, unsigned depth)
{
	return (size_t)depth * pmc_eng_bounce_len(e);
}

/* the time of the current loop iteration: read once per poll by the ring,
 * or now when called outside a poll (a request submitted from outside) */
static inline uint64_t pmc_eng_queue_now(struct pmc_queue *q)
{
	return q->in_poll ? pmc_ring_now(q->ring) : pmc_mono_ns();
}

static inline void pmc_eng_stat_lat(struct pmc_queue *q, struct pmc_vol_stats *s, int path, uint64_t start_ns)
{
	uint64_t now = pmc_eng_queue_now(q);

	STAT_ADD(s, lat[path][pmc_hist_bucket(now > start_ns ? now - start_ns : 0)], 1);
}

static inline void pmc_eng_set_res(struct pmc_req_ctx *x, int res)
{
	if (res && !x->res)
		x->res = res;
}

static inline void pmc_eng_sub_done(struct pmc_req_ctx *x)
{
	if (--x->pending == 0)
		pmc_eng_req_finish(x);
}

#endif
