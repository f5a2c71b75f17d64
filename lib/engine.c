/* engine.c - requests served from pmem or the backing disks, and
 * write-back.
 *
 * Owns: the attached volumes (disk, mode, tunables, sticky error), the
 * queues (one per thread: ring, request contexts, statistics) and the
 * write-back state. The metadata decisions stay in the core (cache.h): the
 * engine allocates, pins, publishes and invalidates through it.
 *
 * Data paths (B = the cache block size, 4 KiB):
 *  - read: every block is looked up and pinned; hits are copied out of pmem
 *    at once; runs of misses are read from the disk, either straight into
 *    freshly allocated, pinned cache blocks (admitted: then published clean
 *    with pmc_cache_publish_fill and copied out) or straight into the
 *    request's buffer (not admitted: pass-through, sequential cutoff,
 *    n-miss rule, no free block).
 *  - write-back: each block is copied into a new cache block and published
 *    dirty (atomic replacement, see FORMAT.md): durable in pmem before the
 *    request completes. With no free block the request waits for write-back
 *    (or goes around, as configured).
 *  - write-through: as write-back, then the pinned blocks are written to the
 *    disk with RWF_DSYNC and marked clean; the request completes after both.
 *  - write-around, pass-through, and any write while a volume drains for a
 *    mode change: drop the CLEAN cached copies, write the buffer to the disk
 *    (RWF_DSYNC unless the mode is write-around or pass-through on a volatile
 *    volume and no DIRTY copy is cached), then drop the DIRTY copies that
 *    stood for the older data.
 *  - flush: data acknowledged in write-back mode is already durable in pmem;
 *    disk writes made without RWF_DSYNC are covered by flush generations:
 *    a flush completes once a sync issued after its arrival finished.
 *  - discard: invalidate (dirty data too), pass down, invalidate again.
 *
 * Ordering (lib/ORDERING.md): foreground disk writes and discards enter an
 * in-flight list by block range; a disk write of blocks that an older entry
 * or a write-back write still has in flight is held until those complete,
 * and write-back stays off ranges in the list. A read miss is not admitted
 * into the cache while the list covers its range or the volume has plain
 * disk writes not yet synced.
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
 * Locking: a queue, its ring, its contexts and statistics belong to its
 * thread (statistics are read by others with relaxed atomics). Volume
 * settings are atomics. e->lock serialises attach and mode changes.
 * Write-back state belongs to the thread running writeback_step (one at a
 * time: wb_lock, also taken by write-back completions, which may run on
 * any queue: a queue with writes waiting for free blocks kicks write-back
 * itself). No lock is held across a ring poll; ring submissions never run
 * callbacks, so holding wb_lock while submitting cannot deadlock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cache_internal.h"
#include "diskid.h"
#include "engine.h"
#include "log.h"
#include "poison.h"
#include "ring.h"
#include "state.h"
#include "stats.h"

#define GHOST_SLOTS 65536u	/* n-miss admission: counters of recent misses */
#define WB_BATCH 512u		/* blocks considered per write-back step */
#define WB_SCAN 4096u		/* descriptors swept per write-back step */
#define WB_BACKOFF_MAX_MS 60000u
#define NO_BLK UINT64_MAX
#define HIT_BLK (UINT64_MAX - 1) /* read: served from pmem already */
/* wr_done of a volume attached after a clean stop, with no plain disk
 * write since: unsynced for flushes, but fills may be admitted */
#define WR_GEN_FRESH 1u

struct pmc_evol {
	struct pmc_disk *disk;	/* NULL: not attached */
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
	atomic_uint_fast64_t retry_at_ns;
	atomic_uint backoff_ms;
	atomic_uint fail_streak; /* failed write-back rounds in a row */
	/* write-back round (wb_lock): raised by the first failure of a round;
	 * the other writes of that round fail without growing the back-off */
	uint32_t wb_round;
	/* flush generations (ORDERING.md): plain disk writes and discards
	 * completed, and the value of wr_done when the newest finished sync
	 * was issued; wr_synced < wr_done: not known durable */
	atomic_uint_fast64_t wr_done;
	atomic_uint_fast64_t wr_synced;
	atomic_int plain_flying; /* plain disk writes and discards in flight */
	atomic_int no_volatile;	/* the device promised no volatile cache: always DSYNC */
	atomic_uint_fast64_t seq_next; /* sequential read detection: next expected offset */
	atomic_uint_fast64_t seq_run;  /* bytes in the current run */
	atomic_uint_fast64_t oldest_birth_ns; /* last full sweep */
	struct pmc_ratelimit rl;
};

struct wb_io {
	struct pmc_io io;
	struct pmc_engine *e;
	struct pmc_queue *q;
	uint32_t vol;
	uint32_t n;
	uint32_t round;		/* the volume's wb_round at submit */
	uint64_t lba;		/* first block */
	uint64_t start_ns;
	uint64_t *blk;		/* [max_io_blocks] */
	struct iovec *iov;	/* [max_io_blocks] */
	struct wb_io *next;	/* free list */
	struct wb_io *fnext, **fprev; /* in-flight list (dw_lock) */
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
	struct pmc_evol *vols;	/* [max_volumes] */
	struct pmc_queue *queues; /* under lock */
	struct pmc_vol_stats *retired; /* [nvols] counted by destroyed queues (lock) */
	atomic_uint_fast64_t last_fg_ns;
	int told_fixed;		/* logged which I/O path is in use (under lock) */
	atomic_uchar ghost[GHOST_SLOTS];
	/* write-back, owned by the thread in writeback_step (wb_lock) */
	pthread_mutex_t wb_lock;
	/* disk writes in flight, by block range: no other disk write of
	 * those blocks may be issued before they complete, or the disk could
	 * end up with the older data under a block marked clean */
	pthread_mutex_t dw_lock;
	struct wb_io *wb_flying;
	struct pmc_req_ctx *around_flying; /* write-around and discard requests */
	struct pmc_req_ctx *fg_flying;	   /* requests with disk writes held or in flight */
	uint64_t dw_seq;		   /* order of foreground disk writes (dw_lock) */
	uint64_t wb_cursor;
	int wb_active;		/* between the watermarks */
	unsigned wb_inflight;
	uint32_t wb_force_vol;	/* flush_all: UINT32_MAX all, NONE none */
	int wb_force;
	uint64_t *wb_oldest;	/* [max_volumes] oldest birth in the current sweep */
	uint64_t wb_swept;	/* descriptors swept in the current pass */
	uint32_t wb_first_vol;	/* the next step serves this volume (or the next one) first */
	struct wb_item *items;	/* [WB_BATCH] */
	struct wb_io *wb_free;
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
	struct pmc_req **pending;		    /* no free context yet: FIFO */
	unsigned npending, pend_head;
	unsigned busy;				    /* contexts in use */
	struct pmc_vol_stats *stats;		    /* [max_volumes] */
	struct pmc_queue *next;
};

void (*pmc_test_wb_pinned)(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n);

/* --- small helpers --- */

const char *pmc_mode_name(enum pmc_mode m)
{
	switch (m) {
	case PMC_MODE_WRITE_BACK:
		return "write-back";
	case PMC_MODE_WRITE_THROUGH:
		return "write-through";
	case PMC_MODE_WRITE_AROUND:
		return "write-around";
	case PMC_MODE_PASS_THROUGH:
		return "pass-through";
	}
	return "unknown";
}

int pmc_mode_parse(const char *s, enum pmc_mode *m)
{
	for (int i = PMC_MODE_WRITE_BACK; i <= PMC_MODE_PASS_THROUGH; i++) {
		if (!strcmp(s, pmc_mode_name((enum pmc_mode)i))) {
			*m = (enum pmc_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

void pmc_wb_conf_default(struct pmc_wb_conf *wb)
{
	wb->high_pct = 50;
	wb->low_pct = 30;
	wb->max_age_ms = 30000;
	wb->max_io_bytes = 1u << 20;
	wb->max_inflight = 32;
	wb->busy_inflight = 4;
	wb->idle_ms = 100;
	wb->retry_ms = 1000;
	wb->max_req_bytes = 1u << 20;
}

void pmc_volume_conf_default(struct pmc_volume_conf *vc)
{
	vc->mode = PMC_MODE_WRITE_BACK;
	vc->admit_after_misses = 1;
	vc->seq_cutoff_bytes = 0;
	vc->nospace = PMC_NOSPACE_WAIT;
}

/* relaxed counter bump: the owner writes, others sum */
#define STAT_ADD(s, field, v) __atomic_fetch_add(&(s)->field, (uint64_t)(v), __ATOMIC_RELAXED)

static void stat_lat(struct pmc_vol_stats *s, int path, uint64_t start_ns)
{
	STAT_ADD(s, lat[path][pmc_hist_bucket(pmc_mono_ns() - start_ns)], 1);
}

static void wake(struct pmc_queue *q)
{
	uint64_t one = 1;

	if (write(pmc_ring_eventfd(q->ring), &one, sizeof(one)) < 0) {
		/* the counter is saturated or the fd gone: the poller wakes anyway */
	}
}

static int wb_conf_check(const struct pmc_wb_conf *wb, struct pmc_err *err)
{
	if (wb->low_pct > wb->high_pct || wb->high_pct > 100)
		return pmc_err_set(err, EINVAL,
				   "write-back watermarks: low %u%% and high %u%% must satisfy "
				   "low <= high <= 100",
				   wb->low_pct, wb->high_pct);
	if (wb->max_io_bytes < 4096 || wb->max_io_bytes > (16u << 20) ||
	    wb->max_io_bytes % 4096)
		return pmc_err_set(err, EINVAL,
				   "write-back max_io_bytes %u: not a multiple of 4 KiB between "
				   "4 KiB and 16 MiB",
				   wb->max_io_bytes);
	if (wb->max_req_bytes < 4096 || wb->max_req_bytes > (16u << 20) ||
	    wb->max_req_bytes % 4096)
		return pmc_err_set(err, EINVAL,
				   "max_req_bytes %u: not a multiple of 4 KiB between 4 KiB and "
				   "16 MiB",
				   wb->max_req_bytes);
	if (!wb->max_inflight || !wb->busy_inflight || wb->max_inflight > 1024 ||
	    wb->busy_inflight > wb->max_inflight)
		return pmc_err_set(err, EINVAL,
				   "write-back in-flight limits %u (idle) and %u (busy): need "
				   "1 <= busy <= idle <= 1024",
				   wb->max_inflight, wb->busy_inflight);
	return 0;
}

static void state_mark_clean(struct pmc_engine *e);
static void synced_advance(struct pmc_evol *v, uint64_t gen);
static int fills_allowed(struct pmc_evol *v);
static int around_overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n);

/* drop cached copies; nothing to do without a cache */
static void inval(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n)
{
	if (e->c)
		pmc_cache_invalidate(e->c, vol, lba, n);
}

/* --- engine --- */

int pmc_engine_create(struct pmc_cache *c, const struct pmc_wb_conf *wb, struct pmc_engine **out,
		      struct pmc_err *err)
{
	struct pmc_engine *e;
	struct pmc_wb_conf def;
	uint32_t nvols = c ? c->max_volumes : PMC_MAX_VOLUMES_DEFAULT;
	int rc;

	*out = NULL;
	if (!wb) {
		pmc_wb_conf_default(&def);
		wb = &def;
	}
	if (c && c->rdonly)
		return pmc_err_set(err, EROFS, "engine: the cache is open read-only");
	if (c && pmc_poison_init())
		return pmc_err_set(err, errno, "engine: cannot install the SIGBUS handler");
	if (c && c->block_size != 4096)
		return pmc_err_set(err, EINVAL,
				   "engine: cache block size %u; the engine serves 4 KiB blocks only",
				   c->block_size);
	rc = wb_conf_check(wb, err);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e)
		return pmc_err_set(err, ENOMEM, "engine: out of memory");
	e->vols = calloc(nvols, sizeof(*e->vols));
	e->wb_oldest = calloc(nvols, sizeof(*e->wb_oldest));
	e->items = calloc(WB_BATCH, sizeof(*e->items));
	e->retired = calloc(nvols, sizeof(*e->retired));
	if (!e->vols || !e->wb_oldest || !e->items || !e->retired) {
		free(e->retired);
		free(e->vols);
		free(e->wb_oldest);
		free(e->items);
		free(e);
		return pmc_err_set(err, ENOMEM, "engine: out of memory");
	}
	e->c = c;
	e->nvols = nvols;
	e->pm = c ? pmc_cache_pmem(c) : NULL;
	e->bs = c ? c->block_size : PMC_BLOCK_SIZE_DEFAULT;
	e->wb = *wb;
	e->max_req_blocks = wb->max_req_bytes / e->bs;
	e->max_io_blocks = wb->max_io_bytes / e->bs;
	e->wb_force_vol = UINT32_MAX;
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->wb_lock, NULL);
	pthread_mutex_init(&e->dw_lock, NULL);
	for (uint32_t i = 0; i < nvols; i++)
		e->wb_oldest[i] = UINT64_MAX;
	*out = e;
	return 0;
}

void pmc_engine_set_state(struct pmc_engine *e, struct pmc_state *st)
{
	e->state = st;
}

void pmc_engine_destroy(struct pmc_engine *e)
{
	if (!e)
		return;
	state_mark_clean(e);
	for (uint32_t i = 0; i < e->nvols; i++)
		if (e->vols[i].disk) {
			struct pmc_evol *v = &e->vols[i];

			/* plain writes not yet synced: a clean stop leaves none,
			 * so the next attach may admit fills at once */
			if (atomic_load(&v->wr_synced) < atomic_load(&v->wr_done) &&
			    atomic_load(&v->wr_done) > WR_GEN_FRESH && fdatasync(v->disk->fd))
				pmc_log(LOG_ERR, "volume %s: disk %s: sync at shutdown failed: %s",
					v->name, v->disk->path, strerror(errno));
			pmc_disk_close(e->vols[i].disk);
			if (e->c)
				pmc_cache_volume_put(e->c, i);
		}
	while (e->wb_free) {
		struct wb_io *w = e->wb_free;

		e->wb_free = w->next;
		free(w->blk);
		free(w->iov);
		free(w);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->wb_lock);
	pthread_mutex_destroy(&e->dw_lock);
	free(e->retired);
	free(e->vols);
	free(e->wb_oldest);
	free(e->items);
	free(e);
}

static void apply_conf(struct pmc_evol *v, const struct pmc_volume_conf *vc)
{
	atomic_store(&v->admit_after, vc->admit_after_misses);
	atomic_store(&v->seq_cutoff, vc->seq_cutoff_bytes);
	atomic_store(&v->nospace, (int)vc->nospace);
}

static int conf_check(const struct pmc_volume_conf *vc, struct pmc_err *err)
{
	if ((unsigned)vc->mode > PMC_MODE_PASS_THROUGH)
		return pmc_err_set(err, EINVAL, "volume: mode %d unknown", (int)vc->mode);
	if ((unsigned)vc->nospace > PMC_NOSPACE_AROUND)
		return pmc_err_set(err, EINVAL, "volume: no-space policy %d unknown",
				   (int)vc->nospace);
	if (vc->admit_after_misses > 255)
		return pmc_err_set(err, EINVAL, "volume: admit_after_misses %u is above 255",
				   vc->admit_after_misses);
	return 0;
}

/* without a cache: only a volume the state file calls clean may run */
static int attach_nocache(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
			  uint32_t *slot, struct pmc_volume_info *vi, struct pmc_err *err)
{
	int dirty = e->state ? pmc_state_get(e->state, name) : -ENOENT;
	uint32_t i, free_slot = UINT32_MAX;

	if (dirty != 0)
		return pmc_err_set(err, EIO,
				   "volume %s: the unreachable pmem may hold its acknowledged "
				   "writes (%s); refusing to serve it from the disk alone",
				   name,
				   dirty == 1 ? "state file says dirty" : "the state file does not name it");
	for (i = 0; i < e->nvols; i++) {
		if (e->vols[i].disk && !strcmp(e->vols[i].name, name))
			return pmc_err_set(err, EBUSY, "volume %s: already attached", name);
		if (!e->vols[i].disk && free_slot == UINT32_MAX)
			free_slot = i;
	}
	if (free_slot == UINT32_MAX)
		return pmc_err_set(err, ENOSPC, "volume %s: no free volume slot", name);
	memset(vi, 0, sizeof(*vi));
	vi->size_bytes = disk->size / e->bs * e->bs;
	vi->counts_valid = 1;
	*slot = free_slot;
	return 0;
}

/* record that the cache may hold dirty data of vol; under e->lock */
static int state_mark_dirty_locked(struct pmc_engine *e, struct pmc_evol *v, const char *name,
				   struct pmc_err *err)
{
	int rc;

	if (!e->state || atomic_load(&v->marked))
		return 0;
	rc = pmc_state_set(e->state, name, 1, err);
	if (rc == 0)
		atomic_store(&v->marked, 1);
	return rc;
}

/* on attach: make the state file agree with what the cache holds */
static int state_attach(struct pmc_engine *e, uint32_t slot, const char *name,
			const struct pmc_volume_info *vi, struct pmc_err *err)
{
	struct pmc_evol *v = &e->vols[slot];
	int dirty;

	atomic_store(&v->marked, 0);
	atomic_store(&v->dirtying, 0);
	if (!e->state || !e->c)
		return 0;
	dirty = pmc_state_get(e->state, name);
	if (dirty == 1) {
		atomic_store(&v->marked, 1);
		return 0;
	}
	if (!vi->counts_valid || vi->nr_dirty)
		return state_mark_dirty_locked(e, v, name, err);
	return 0;
}

/* before a write may create dirty blocks; 0 or -errno (then go around) */
static int state_begin_dirty(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = &e->vols[vol];
	struct pmc_err err = {0};
	int rc;

	atomic_fetch_add(&v->dirtying, 1);
	if (!e->state || atomic_load(&v->marked))
		return 0;
	pthread_mutex_lock(&e->lock);
	rc = state_mark_dirty_locked(e, v, v->name, &err);
	pthread_mutex_unlock(&e->lock);
	if (rc) {
		atomic_fetch_sub(&v->dirtying, 1);
		pmc_log_ratelimited(&v->rl, LOG_ERR, "volume %s: %s; writing around the cache",
				    v->name, err.msg);
	}
	return rc;
}

static void state_end_dirty(struct pmc_engine *e, uint32_t vol)
{
	atomic_fetch_sub(&e->vols[vol].dirtying, 1);
}

/* mark clean every attached volume with no dirty block and no write that
 * could make one; called after flush_all and at shutdown */
static void state_mark_clean(struct pmc_engine *e)
{
	if (!e->state || !e->c)
		return;
	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < e->nvols; i++) {
		struct pmc_evol *v = &e->vols[i];
		struct pmc_volume_info vi;
		struct pmc_err err = {0};

		if (!v->disk || !atomic_load(&v->marked))
			continue;
		/* unmark first: a writer arriving now must take e->lock */
		atomic_store(&v->marked, 0);
		if (atomic_load(&v->dirtying) || pmc_cache_volume_info(e->c, i, &vi) ||
		    !vi.counts_valid || vi.nr_dirty ||
		    pmc_state_set(e->state, v->name, 0, &err)) {
			atomic_store(&v->marked, 1);
			if (err.code)
				pmc_log(LOG_ERR, "volume %s: %s", v->name, err.msg);
		}
	}
	pthread_mutex_unlock(&e->lock);
}

int pmc_engine_attach(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
		      const struct pmc_volume_conf *vc, uint32_t *vol, struct pmc_err *err)
{
	return pmc_engine_attach_flags(e, name, disk, vc, 0, vol, err);
}

int pmc_engine_attach_flags(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
			    const struct pmc_volume_conf *vc, unsigned flags, uint32_t *vol,
			    struct pmc_err *err)
{
	struct pmc_volume_conf def, pt = {.mode = PMC_MODE_PASS_THROUGH,
					  .nospace = PMC_NOSPACE_AROUND};
	struct pmc_volume_info vi;
	struct pmc_evol *v;
	uint32_t slot;
	int rc, clean_stop = 1;

	if (!vc) {
		pmc_volume_conf_default(&def);
		vc = &def;
	}
	rc = conf_check(vc, err);
	if (rc)
		return rc;
	if (disk->lbs > e->bs || e->bs % disk->lbs)
		return pmc_err_set(err, EINVAL,
				   "disk %s: logical block size %u does not divide the cache block "
				   "size %u",
				   disk->path, disk->lbs, e->bs);
	pthread_mutex_lock(&e->lock);
	if (!e->c) {
		rc = attach_nocache(e, name, disk, &slot, &vi, err);
		if (rc) {
			pthread_mutex_unlock(&e->lock);
			return rc;
		}
		vc = &pt;
	} else if (pmc_cache_volume_find(e->c, name, &slot) == 0) {
		struct pmc_cache_info ci;

		/* the disk must be the one the volume's data belongs to (diskid.c),
		 * checked first: another disk is refused as such, whatever its size */
		rc = e->vols[slot].disk ? 0 : pmc_disk_id_attach(e->c, slot, name, disk, flags, err);
		if (rc) {
			pthread_mutex_unlock(&e->lock);
			return rc;
		}
		pmc_cache_get_info(e->c, &ci);
		clean_stop = ci.was_clean;
		pmc_cache_volume_info(e->c, slot, &vi);
		if (disk->size < vi.size_bytes) {
			pthread_mutex_unlock(&e->lock);
			return pmc_err_set(err, ENOSPC,
					   "volume %s: disk %s has %" PRIu64
					   " bytes, the cache holds a volume of %" PRIu64 " bytes",
					   name, disk->path, disk->size, vi.size_bytes);
		}
	} else {
		uint64_t size = disk->size / e->bs * e->bs;

		rc = pmc_disk_id_volume_add(e->c, name, disk, size, &slot, err);
		if (rc) {
			pthread_mutex_unlock(&e->lock);
			return rc;
		}
		pmc_cache_volume_info(e->c, slot, &vi);
	}
	v = &e->vols[slot];
	if (v->disk) {
		pthread_mutex_unlock(&e->lock);
		return pmc_err_set(err, EBUSY, "volume %s: already attached to %s", name,
				   v->disk->path);
	}
	rc = e->c ? pmc_cache_volume_get(e->c, slot) : 0; /* held while attached */
	if (rc) {
		pthread_mutex_unlock(&e->lock);
		return pmc_err_set(err, -rc, "volume %s: vanished while attaching", name);
	}
	rc = state_attach(e, slot, name, &vi, err);
	if (rc) {
		if (e->c)
			pmc_cache_volume_put(e->c, slot);
		pthread_mutex_unlock(&e->lock);
		return rc;
	}
	snprintf(v->name, sizeof(v->name), "%s", name);
	memset(&v->rl, 0, sizeof(v->rl));
	v->blocks = vi.size_bytes / e->bs;
	atomic_store(&v->mode, (int)vc->mode);
	atomic_store(&v->target, (int)vc->mode);
	atomic_store(&v->draining, 0);
	atomic_store(&v->error, 0);
	atomic_store(&v->backoff_ms, 0);
	atomic_store(&v->retry_at_ns, 0);
	/* unsynced: the first flush syncs. After an unclean stop the last
	 * process may have left acknowledged plain writes in the disk's
	 * volatile cache: then no fill either until a sync (ORDERING.md) */
	atomic_store(&v->wr_synced, 0);
	atomic_store(&v->wr_done, WR_GEN_FRESH + !clean_stop);
	atomic_store(&v->plain_flying, 0);
	apply_conf(v, vc);
	v->disk = disk;
	pthread_mutex_unlock(&e->lock);
	/* a volume attached in another mode may still hold dirty data */
	if (vc->mode != PMC_MODE_WRITE_BACK)
		pmc_engine_set_mode(e, slot, vc->mode, NULL);
	*vol = slot;
	return 0;
}

static struct pmc_evol *evol(struct pmc_engine *e, uint32_t vol)
{
	return vol < e->nvols && e->vols[vol].disk ? &e->vols[vol] : NULL;
}

int pmc_engine_find(struct pmc_engine *e, const char *name, uint32_t *vol)
{
	for (uint32_t i = 0; i < e->nvols; i++) {
		if (e->vols[i].disk && !strcmp(e->vols[i].name, name)) {
			*vol = i;
			return 0;
		}
	}
	return -ENOENT;
}

const char *pmc_engine_volume_name(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = evol(e, vol);

	return v ? v->name : NULL;
}

const char *pmc_engine_volume_disk(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = evol(e, vol);

	return v ? v->disk->path : NULL;
}

uint64_t pmc_engine_volume_size(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = evol(e, vol);

	return v ? v->blocks * e->bs : 0;
}

int pmc_engine_detach(struct pmc_engine *e, uint32_t vol, int remove, struct pmc_err *err)
{
	struct pmc_evol *v = evol(e, vol);
	struct pmc_disk *disk;
	char name[PMC_VOLUME_NAME_MAX + 1];
	int rc;

	if (!v)
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	pthread_mutex_lock(&e->lock);
	snprintf(name, sizeof(name), "%s", v->name);
	if (remove && e->c) {
		struct pmc_volume_info vi;

		if (!atomic_load(&e->c->counts_valid))
			pmc_cache_recount(e->c);
		pmc_cache_volume_info(e->c, vol, &vi);
		if (vi.nr_dirty) {
			pthread_mutex_unlock(&e->lock);
			return pmc_err_set(err, EBUSY,
					   "volume %s: %" PRIu64 " dirty blocks not yet written back",
					   name, vi.nr_dirty);
		}
	}
	disk = v->disk;
	v->disk = NULL;
	if (e->c)
		pmc_cache_volume_put(e->c, vol);
	rc = remove && e->c ? pmc_cache_volume_remove(e->c, vol, err) : 0;
	if (rc == 0 && remove && e->state) {
		struct pmc_err serr = {0};

		if (pmc_state_set(e->state, name, 0, &serr))
			pmc_log(LOG_ERR, "volume %s: %s", name, serr.msg);
	}
	if (rc) {
		/* still in the cache: keep serving it */
		v->disk = disk;
		if (e->c)
			pmc_cache_volume_get(e->c, vol);
		pthread_mutex_unlock(&e->lock);
		return rc;
	}
	pthread_mutex_unlock(&e->lock);
	pmc_disk_close(disk);
	return 0;
}

int pmc_engine_set_mode(struct pmc_engine *e, uint32_t vol, enum pmc_mode mode,
			struct pmc_err *err)
{
	struct pmc_evol *v = evol(e, vol);

	if (!v)
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	if ((unsigned)mode > PMC_MODE_PASS_THROUGH)
		return pmc_err_set(err, EINVAL, "mode %d unknown", (int)mode);
	if (!e->c && mode != PMC_MODE_PASS_THROUGH)
		return pmc_err_set(err, EIO, "volume %s: the pmem is unavailable: pass-through only",
				   v->name);
	pthread_mutex_lock(&e->lock);
	atomic_store(&v->target, (int)mode);
	if (mode == PMC_MODE_WRITE_BACK) {
		atomic_store(&v->draining, 0);
		atomic_store(&v->mode, (int)mode);
	} else {
		/* no new dirty data from now on; write-back finishes the switch */
		atomic_store(&v->draining, 1);
	}
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int pmc_engine_get_mode(struct pmc_engine *e, uint32_t vol, enum pmc_mode *mode, int *draining)
{
	struct pmc_evol *v = evol(e, vol);

	if (!v)
		return -ENOENT;
	*mode = (enum pmc_mode)atomic_load(&v->mode);
	if (draining)
		*draining = atomic_load(&v->draining);
	return 0;
}

int pmc_engine_set_volume_conf(struct pmc_engine *e, uint32_t vol,
			       const struct pmc_volume_conf *vc, struct pmc_err *err)
{
	struct pmc_evol *v = evol(e, vol);
	int rc = conf_check(vc, err);

	if (rc)
		return rc;
	if (!v)
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	apply_conf(v, vc);
	if ((int)vc->mode != atomic_load(&v->target))
		return pmc_engine_set_mode(e, vol, vc->mode, err);
	return 0;
}

void pmc_engine_set_wb_conf(struct pmc_engine *e, const struct pmc_wb_conf *wb)
{
	pthread_mutex_lock(&e->lock);
	/* request and merge sizes are fixed at create: they size the arrays */
	uint32_t req = e->wb.max_req_bytes, io = e->wb.max_io_bytes;

	e->wb = *wb;
	e->wb.max_req_bytes = req;
	if (wb->max_io_bytes > io || wb->max_io_bytes < 4096)
		e->wb.max_io_bytes = io;
	pthread_mutex_unlock(&e->lock);
}

void pmc_engine_set_volatile(struct pmc_engine *e, uint32_t vol, int volatile_cache)
{
	struct pmc_evol *v = evol(e, vol);
	uint64_t gen;

	if (!v)
		return;
	atomic_store(&v->no_volatile, !volatile_cache);
	if (volatile_cache)
		return;
	/* every disk write is RWF_DSYNC from now on and no flush will come:
	 * sync what earlier plain writes (of this process or the last) left
	 * in the disk's volatile cache, so that fills may be admitted */
	gen = atomic_load(&v->wr_done);
	if (fdatasync(v->disk->fd) == 0)
		synced_advance(v, gen);
	else
		pmc_log(LOG_ERR, "volume %s: disk %s: sync failed: %s; read misses stay uncached "
			"until a flush succeeds", v->name, v->disk->path, strerror(errno));
}

int pmc_engine_volume_error(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = evol(e, vol);

	return v ? atomic_load(&v->error) : 0;
}

void pmc_engine_clear_error(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = evol(e, vol);

	if (v) {
		atomic_store(&v->error, 0);
		atomic_store(&v->retry_at_ns, 0);
		atomic_store(&v->backoff_ms, 0);
	}
}

static void volume_failed(struct pmc_engine *e, uint32_t vol, int res, const char *what)
{
	struct pmc_evol *v = &e->vols[vol];
	int zero = 0;

	atomic_compare_exchange_strong(&v->error, &zero, -res);
	pmc_log_ratelimited(&v->rl, LOG_ERR, "volume %s: disk %s: %s failed: %s",
			    e->vols[vol].name, v->disk->path, what, strerror(-res));
}

/* --- pmem media errors (poison.h) --- */

/* blk of (vol, lba) is poisoned: quarantine it; a dirty one's loss is the
 * volume's sticky error, logged with the block */
static void media_error(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t blk)
{
	struct pmc_evol *v = &e->vols[vol];
	enum pmc_block_state was = PMC_BLK_FREE;
	int zero = 0;

	if (pmc_cache_quarantine(e->c, vol, lba, blk, &was))
		return; /* no longer this block's copy */
	if (was == PMC_BLK_CLEAN) {
		pmc_log_ratelimited(&v->rl, LOG_WARNING,
				    "volume %s: block %" PRIu64 ": pmem media error in cache block "
				    "%" PRIu64 "; clean copy dropped, the block is retired",
				    v->name, lba, blk);
		return;
	}
	atomic_compare_exchange_strong(&v->error, &zero, EIO);
	pmc_log_ratelimited(&v->rl, LOG_ERR,
			    "volume %s: block %" PRIu64 " (bytes %" PRIu64 "+%u): pmem media error "
			    "in cache block %" PRIu64 ": its dirty data is lost; reads of it fail "
			    "with EIO until it is written again",
			    v->name, lba, lba * e->bs, e->bs, blk);
}

/* copy a cached block out for a read: -EIO for a LOST block or a poisoned
 * one (then quarantined), never the disk's older data */
static int hit_copy(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t blk,
		    enum pmc_block_state st, void *dst)
{
	if (st == PMC_BLK_LOST) {
		int zero = 0;

		atomic_compare_exchange_strong(&e->vols[vol].error, &zero, EIO);
		return -EIO;
	}
	if (pmc_poison_copy(dst, pmc_cache_block_data(e->c, blk), e->bs) == 0)
		return 0;
	media_error(e, vol, lba, blk);
	return -EIO;
}

/* a failed disk write from pmem blocks: which of them are poisoned (the
 * kernel could not read them)? Quarantines those; returns their count */
static unsigned write_poisoned(struct pmc_engine *e, uint32_t vol, uint64_t lba,
			       const uint64_t *blk, uint32_t n)
{
	unsigned bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (pmc_poison_probe(pmc_cache_block_data(e->c, blk[i]), e->bs) == 0)
			continue;
		media_error(e, vol, lba + i, blk[i]);
		bad++;
	}
	return bad;
}

/* --- queues --- */

static void ctx_free_arrays(struct pmc_req_ctx *x)
{
	free(x->blk);
	free(x->snap);
	free(x->ioseq);
	free(x->io);
	free(x->iov);
}

int pmc_queue_create(struct pmc_engine *e, unsigned depth, struct pmc_queue **out,
		     struct pmc_err *err)
{
	return pmc_queue_create_opts(e, depth, NULL, out, err);
}

struct pmc_ring *pmc_queue_ring(struct pmc_queue *q)
{
	return q->ring;
}

int pmc_queue_create_opts(struct pmc_engine *e, unsigned depth, const struct pmc_ring_opts *ro,
			  struct pmc_queue **out, struct pmc_err *err)
{
	struct pmc_queue *q;
	unsigned n = e->max_req_blocks;
	int rc;

	*out = NULL;
	if (depth < 1 || depth > 1024)
		return pmc_err_set(err, EINVAL, "queue depth %u: not between 1 and 1024", depth);
	q = calloc(1, sizeof(*q));
	if (!q)
		return pmc_err_set(err, ENOMEM, "queue: out of memory");
	q->e = e;
	q->depth = depth;
	q->ctxs = calloc(depth, sizeof(*q->ctxs));
	q->pending = calloc(depth * 4, sizeof(*q->pending));
	q->stats = calloc(e->nvols, sizeof(*q->stats));
	if (!q->ctxs || !q->pending || !q->stats) {
		rc = pmc_err_set(err, ENOMEM, "queue: out of memory");
		goto err_free;
	}
	for (unsigned i = 0; i < depth; i++) {
		struct pmc_req_ctx *x = &q->ctxs[i];

		x->q = q;
		x->blk = calloc(n, sizeof(*x->blk));
		x->snap = calloc(n, sizeof(*x->snap));
		x->ioseq = calloc(n, sizeof(*x->ioseq));
		x->io = calloc(n, sizeof(*x->io));
		x->iov = calloc(n, sizeof(*x->iov));
		if (!x->blk || !x->snap || !x->io || !x->iov || !x->ioseq) {
			rc = pmc_err_set(err, ENOMEM, "queue: out of memory");
			goto err_free;
		}
		x->next = q->free;
		q->free = x;
	}
	/* a ring slot per block of every context, plus write-back */
	rc = pmc_ring_create_opts(depth * 2 + 64 > 4096 ? 4096 : depth * 2 + 64, e->pm, ro, &q->ring,
				  err);
	if (rc)
		goto err_free;
	pthread_mutex_lock(&e->lock);
	q->next = e->queues;
	e->queues = q;
	if (!e->told_fixed && e->pm) {
		struct pmc_ring_info ri;

		pmc_ring_get_info(q->ring, &ri);
		if (ri.fixed)
			pmc_log(LOG_INFO, "pmem %s: registered as io_uring fixed buffers",
				e->pm->path);
		else
			pmc_log(LOG_INFO,
				"pmem %s: no io_uring fixed buffers (%s): plain reads and writes",
				e->pm->path, strerror(ri.fixed_err));
		e->told_fixed = 1;
	}
	pthread_mutex_unlock(&e->lock);
	*out = q;
	return 0;

err_free:
	if (q->ctxs)
		for (unsigned i = 0; i < depth; i++)
			ctx_free_arrays(&q->ctxs[i]);
	free(q->ctxs);
	free(q->pending);
	free(q->stats);
	free(q);
	return rc;
}

unsigned pmc_queue_busy(struct pmc_queue *q)
{
	return q->busy + q->npending + pmc_ring_busy(q->ring);
}

int pmc_queue_eventfd(struct pmc_queue *q)
{
	return pmc_ring_eventfd(q->ring);
}

int pmc_queue_fixed_buffers(struct pmc_queue *q)
{
	struct pmc_ring_info ri;

	pmc_ring_get_info(q->ring, &ri);
	return ri.fixed;
}

void pmc_queue_destroy(struct pmc_queue *q)
{
	struct pmc_engine *e;
	struct pmc_queue **pp;

	if (!q)
		return;
	e = q->e;
	while (pmc_queue_busy(q))
		pmc_queue_poll(q, 1, 100000000ull);
	pthread_mutex_lock(&e->lock);
	for (pp = &e->queues; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	/* keep what this queue counted */
	for (uint32_t i = 0; i < e->nvols; i++)
		pmc_stats_add(&e->retired[i], &q->stats[i]);
	pthread_mutex_unlock(&e->lock);
	pmc_ring_destroy(q->ring);
	for (unsigned i = 0; i < q->depth; i++)
		ctx_free_arrays(&q->ctxs[i]);
	free(q->ctxs);
	free(q->pending);
	free(q->stats);
	free(q);
}

/* --- request completion --- */

static void around_leave(struct pmc_req_ctx *x);

static void req_finish(struct pmc_req_ctx *x)
{
	struct pmc_queue *q = x->q;

	around_leave(x);
	x->next = q->done;
	q->done = x;
}

static void sub_done(struct pmc_req_ctx *x)
{
	if (--x->pending == 0)
		req_finish(x);
}

static void set_res(struct pmc_req_ctx *x, int res)
{
	if (res && !x->res)
		x->res = res;
}

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

/* sequential detection: 1 if this read continues a run beyond the cutoff */
static int sequential(struct pmc_evol *v, uint64_t off, uint64_t len)
{
	uint64_t cutoff = atomic_load(&v->seq_cutoff), run;

	if (!cutoff)
		return 0;
	if (atomic_load(&v->seq_next) == off)
		run = atomic_fetch_add(&v->seq_run, len) + len;
	else {
		atomic_store(&v->seq_run, len);
		run = len;
	}
	atomic_store(&v->seq_next, off + len);
	return run > cutoff;
}

static void read_io_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	uint32_t first = (uint32_t)(io->off / e->bs - x->lba);
	uint32_t end = first + (uint32_t)(io->len / e->bs);

	/* admitted blocks have blk[] set: publish them clean, then copy out */
	for (uint32_t i = first; i < end; i++) {
		uint64_t blk = x->blk[i];

		if (blk == NO_BLK || blk == HIT_BLK)
			continue;
		if (res == 0) {
			/* -EEXIST/-ESTALE: a write got there first; the block is dropped */
			pmc_cache_publish_fill(e->c, req->vol, x->lba + i, blk, x->snap[i]);
			if (hit_copy(e, req->vol, x->lba + i, blk, PMC_BLK_CLEAN,
				     (char *)req->buf + (size_t)i * e->bs))
				set_res(x, -EIO);
		}
		pmc_cache_unpin(e->c, blk);
		x->blk[i] = NO_BLK;
	}
	if (res) {
		STAT_ADD(&x->q->stats[req->vol], read_errors, 1);
		volume_failed(e, req->vol, res, "read");
		set_res(x, res);
	}
	sub_done(x);
}

/*
 * The next sub-I/O of x, for blocks [start, end): to or from the pinned
 * cache blocks x->blk[] (pmem), or the request buffer. Counted in pending.
 */
static struct pmc_io *req_io(struct pmc_req_ctx *x, enum pmc_io_op op, uint32_t start,
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
		x->iov[start].iov_base = (char *)req->buf + (size_t)start * e->bs;
		x->iov[start].iov_len = io->len;
		io->iovcnt = 1;
	}
	x->pending++;
	return io;
}

/* blocks [start, end) of x from the disk: into pinned cache blocks when
 * admitted, else straight into the request buffer */
static void submit_run(struct pmc_req_ctx *x, uint32_t start, uint32_t end, int admitted)
{
	struct pmc_io *io = req_io(x, PMC_IO_READ, start, end, admitted, read_io_done);

	pmc_ring_submit(x->q->ring, io);
}

static void start_read(struct pmc_req_ctx *x)
{
	struct pmc_queue *q = x->q;
	struct pmc_engine *e = q->e;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &e->vols[req->vol];
	struct pmc_vol_stats *st = &q->stats[req->vol];
	uint32_t hits = 0, i, run = UINT32_MAX;
	int mode = atomic_load(&v->mode);
	int bypass = mode == PMC_MODE_PASS_THROUGH || !e->c || sequential(v, req->off, req->len);

	x->pending = 1; /* held until every run is submitted */
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

		if (pmc_cache_lookup_pin(e->c, req->vol, x->lba + i, &blk, &bst) == 0) {
			if (hit_copy(e, req->vol, x->lba + i, blk, bst,
				     (char *)req->buf + (size_t)i * e->bs))
				set_res(x, -EIO);
			pmc_cache_unpin(e->c, blk);
			hits++;
			x->blk[i] = HIT_BLK;
		}
	}
	STAT_ADD(st, read_hit_blocks, hits);
	STAT_ADD(st, read_miss_blocks, x->n - hits);
	if (hits == x->n) {
		STAT_ADD(st, read_hits, 1);
		x->path = PMC_LAT_READ_HIT;
		sub_done(x);
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
		bypass = !fills_allowed(v) || around_overlap(e, req->vol, x->lba, x->n);
	/* runs of misses: admitted blocks read into pmem, others into buf */
	for (i = 0; i <= x->n; i++) {
		int miss = i < x->n && x->blk[i] == NO_BLK;
		int adm = 0;

		if (miss && !bypass && admit_block(e, v, req->vol, x->lba + i)) {
			uint64_t blk;

			if (pmc_cache_alloc(e->c, 1, &blk) == 0) {
				x->blk[i] = blk;
				adm = 1;
			}
		}
		if (miss && adm)
			STAT_ADD(st, admit_blocks, 1);
		else if (miss)
			STAT_ADD(st, bypass_blocks, 1);
		/* close the current run when its kind changes */
		if (run != UINT32_MAX &&
		    (!miss || adm != (x->blk[run] != NO_BLK) || i - run >= e->max_io_blocks)) {
			submit_run(x, run, i, x->blk[run] != NO_BLK);
			run = UINT32_MAX;
		}
		if (miss && run == UINT32_MAX)
			run = i;
	}
	sub_done(x);
}

/* --- ordering of disk writes --- */

static int ranges_meet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

/* a write-back write of any block of [lba, lba + n) is in flight; dw_lock */
static int wb_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	for (struct wb_io *w = e->wb_flying; w; w = w->fnext)
		if (w->vol == vol && ranges_meet(w->lba, w->n, lba, n))
			return 1;
	return 0;
}

/* a write-around or discard of any block of the range is in flight; dw_lock */
static int around_overlap_locked(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	for (struct pmc_req_ctx *x = e->around_flying; x; x = x->anext)
		if (x->req->vol == vol && ranges_meet(x->lba, x->n, lba, n))
			return 1;
	return 0;
}

/* ... the same, taking dw_lock; without a cache there is nothing to keep
 * consistent */
static int around_overlap(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t n)
{
	int r;

	if (!e->c)
		return 0;
	pthread_mutex_lock(&e->dw_lock);
	r = around_overlap_locked(e, vol, lba, n);
	pthread_mutex_unlock(&e->dw_lock);
	return r;
}

/*
 * x (a write-around or a discard) is entered before it drops any cached
 * copy: write-back stays off its range and read misses of it are not
 * admitted until x completes (around_leave from req_finish).
 */
static void around_enter(struct pmc_req_ctx *x)
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

static void around_leave(struct pmc_req_ctx *x)
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
static void fg_io_leave(struct pmc_req_ctx *x, struct pmc_io *io)
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
 * check (see wb_claim). Older writes never wait for newer ones, and none
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
	r = wb_overlap_locked(e, x->req->vol, lba, n) ||
	    fg_older_locked(e, x->req->vol, lba, n, x->ioseq[io - x->io]);
	pthread_mutex_unlock(&e->dw_lock);
	return r;
}

static void around_done(struct pmc_io *io, int res);
static void around_recheck(struct pmc_req_ctx *x, uint32_t start, uint32_t end);

/* issue a foreground disk write or discard, or hold it on the queue (in
 * no particular order: must_hold orders the overlapping ones) */
static void disk_write_issue(struct pmc_queue *q, struct pmc_io *io)
{
	struct pmc_req_ctx *x = io->priv;

	if (q->e->c)
		fg_io_enter(x, io);
	if (!must_hold(q, io)) {
		pmc_ring_submit(q->ring, io);
		return;
	}
	io->next = NULL;
	if (q->held_tail)
		q->held_tail->next = io;
	else
		q->held = io;
	q->held_tail = io;
}

static void retry_held(struct pmc_queue *q)
{
	struct pmc_io **pp = &q->held, *prev = NULL;

	while (*pp) {
		struct pmc_io *io = *pp;

		if (must_hold(q, io)) {
			prev = io;
			pp = &io->next;
			continue;
		}
		*pp = io->next;
		if (q->held_tail == io)
			q->held_tail = prev;
		if (io->cb == around_done) {
			/* a copy may have turned CLEAN while the write waited
			 * (write-back of the older data) */
			struct pmc_req_ctx *x = io->priv;
			uint32_t first = (uint32_t)(io->off / q->e->bs - x->lba);

			around_recheck(x, first, first + (uint32_t)(io->len / q->e->bs));
		}
		pmc_ring_submit(q->ring, io);
	}
}

/* --- flush generations --- */

/* wr_synced only grows */
static void synced_advance(struct pmc_evol *v, uint64_t gen)
{
	uint64_t cur = atomic_load(&v->wr_synced);

	while (cur < gen && !atomic_compare_exchange_weak(&v->wr_synced, &cur, gen))
		;
}

/* a plain disk write or discard of v is about to be issued */
static void plain_begin(struct pmc_evol *v)
{
	atomic_fetch_add(&v->plain_flying, 1);
}

/* ... completed (or failed): a flush arriving from now on must sync it */
static void plain_end(struct pmc_evol *v)
{
	atomic_fetch_add(&v->wr_done, 1);
	atomic_fetch_sub(&v->plain_flying, 1);
}

/*
 * Read misses of v may be admitted into the cache: no plain disk write is
 * in flight or unsynced, so what a fill reads is durable on the disk
 * (WR_GEN_FRESH: attached after a clean stop, no plain write since).
 */
static int fills_allowed(struct pmc_evol *v)
{
	uint64_t done;

	if (atomic_load(&v->plain_flying))
		return 0;
	done = atomic_load(&v->wr_done);
	return done == WR_GEN_FRESH || atomic_load(&v->wr_synced) >= done;
}

/* --- writes --- */

static void disk_write(struct pmc_req_ctx *x, uint32_t start, uint32_t end, int from_pmem,
		       int dsync, void (*cb)(struct pmc_io *, int));

static void around_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;
	uint32_t first = (uint32_t)(io->off / e->bs - x->lba);
	uint32_t end = first + (uint32_t)(io->len / e->bs);

	/* the new data is durable on the disk (RWF_DSYNC was used whenever a
	 * DIRTY copy was kept): drop the DIRTY copies it replaces, unless a
	 * newer write replaced them meanwhile */
	for (uint32_t i = first; i < end; i++) {
		uint64_t blk;

		if (res == 0 && x->blk[i] != NO_BLK &&
		    pmc_cache_lookup_pin(e->c, req->vol, x->lba + i, &blk, NULL) == 0) {
			pmc_cache_unpin(e->c, blk);
			if (blk == x->blk[i])
				inval(e, req->vol, x->lba + i, 1);
		}
		x->blk[i] = NO_BLK;
	}
	if (!(io->rw_flags & RWF_DSYNC))
		plain_end(&e->vols[req->vol]);
	if (res) {
		STAT_ADD(&x->q->stats[req->vol], write_errors, 1);
		volume_failed(e, req->vol, res, "write");
		set_res(x, res);
	}
	fg_io_leave(x, io);
	sub_done(x);
}

/*
 * Drop the CLEAN cached copies of blocks [start, end) of x (each drop, and
 * the lookup of an absent block, also keeps any fill in flight from
 * landing). A DIRTY copy may be the only durable copy of an acknowledged
 * write: it stays, noted in x->blk[i] (else NO_BLK). Returns 1 if one did.
 */
static int around_inval_clean(struct pmc_req_ctx *x, uint32_t start, uint32_t end)
{
	struct pmc_engine *e = x->q->e;
	uint32_t vol = x->req->vol;
	int dirty = 0;

	for (uint32_t i = start; i < end; i++) {
		enum pmc_block_state st;
		uint64_t blk;

		x->blk[i] = NO_BLK;
		if (!e->c)
			continue;
		if (pmc_cache_lookup_pin(e->c, vol, x->lba + i, &blk, &st) == 0) {
			pmc_cache_unpin(e->c, blk);
			if (st == PMC_BLK_DIRTY) {
				x->blk[i] = blk;
				dirty = 1;
				continue;
			}
		}
		pmc_cache_invalidate(e->c, vol, x->lba + i, 1);
	}
	return dirty;
}

/* before a held write-around goes to the disk: drop the copies that are
 * CLEAN now; a DIRTY one (noted or newer) stays */
static void around_recheck(struct pmc_req_ctx *x, uint32_t start, uint32_t end)
{
	struct pmc_engine *e = x->q->e;
	uint32_t vol = x->req->vol;

	for (uint32_t i = start; i < end; i++) {
		enum pmc_block_state st;
		uint64_t blk;

		if (pmc_cache_lookup_pin(e->c, vol, x->lba + i, &blk, &st) == 0) {
			pmc_cache_unpin(e->c, blk);
			if (st == PMC_BLK_DIRTY)
				continue;
		}
		pmc_cache_invalidate(e->c, vol, x->lba + i, 1);
	}
}

/*
 * Blocks [start, end) of x to the disk, from the request buffer, around
 * the cache. The CLEAN copies go first, so none stands for older data once
 * the new data may be on the disk; write-back and read-miss fills stay off
 * the range until x completes (around_enter). The write is plain (made
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
	int dsync;

	around_enter(x);
	dsync = durable || (req->flags & PMC_REQ_FUA) || atomic_load(&v->no_volatile);
	if (!dsync)
		plain_begin(v); /* before any copy is dropped: fills see it */
	if (around_inval_clean(x, start, end) && !dsync) {
		/* a DIRTY copy stays until the new data is durable */
		atomic_fetch_sub(&v->plain_flying, 1);
		dsync = 1;
	}
	STAT_ADD(&x->q->stats[req->vol], write_disk_blocks, end - start);
	x->path = PMC_LAT_WRITE_DISK;
	disk_write(x, start, end, 0, dsync, around_done);
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
		volume_failed(e, req->vol, res, "write-through");
		set_res(x, res);
	}
	fg_io_leave(x, io);
	sub_done(x);
}

static void disk_write(struct pmc_req_ctx *x, uint32_t start, uint32_t end, int from_pmem,
		       int dsync, void (*cb)(struct pmc_io *, int))
{
	struct pmc_io *io = req_io(x, PMC_IO_WRITE, start, end, from_pmem, cb);

	io->rw_flags = dsync ? RWF_DSYNC : 0;
	if (from_pmem) /* write-through: the same blocks went into pmem too */
		STAT_ADD(&x->q->stats[x->req->vol], write_disk_blocks, end - start);
	disk_write_issue(x->q, io);
}

static void park(struct pmc_req_ctx *x)
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

static int write_cached(struct pmc_req_ctx *x, int through)
{
	uint32_t vol = x->req->vol;
	int rc;

	if (state_begin_dirty(x->q->e, vol)) {
		/* the marker could not be made durable: no dirty data then */
		write_around(x, x->cursor, x->n, 1);
		x->cursor = x->n;
		return 0;
	}
	rc = write_cached_marked(x, through);
	state_end_dirty(x->q->e, vol);
	return rc;
}

static int write_cached_marked(struct pmc_req_ctx *x, int through)
{
	struct pmc_queue *q = x->q;
	struct pmc_engine *e = q->e;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &e->vols[req->vol];
	struct pmc_vol_stats *st = &q->stats[req->vol];
	uint32_t i = x->cursor, tstart = x->cursor;

	for (; i < x->n; i++) {
		uint64_t blk;
		int rc = pmc_cache_alloc(e->c, 1, &blk);

		if (rc) {
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
			x->cursor = i;
			return 1;
		}
		pmc_pmem_copy(e->pm, pmc_cache_block_data(e->c, blk),
			      (const char *)req->buf + (size_t)i * e->bs, e->bs);
		rc = pmc_cache_publish(e->c, req->vol, x->lba + i, blk, PMC_BLK_DIRTY);
		if (rc) {
			pmc_cache_unpin(e->c, blk);
			set_res(x, rc);
			break;
		}
		if (through) {
			x->blk[i] = blk; /* pinned until the disk write is done */
			if (i + 1 - tstart >= e->max_io_blocks) {
				disk_write(x, tstart, i + 1, 1, 1, through_done);
				tstart = i + 1;
			}
		} else {
			pmc_cache_unpin(e->c, blk);
		}
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
static void start_write(struct pmc_req_ctx *x)
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
		park(x);
		return;
	}
	switch (mode) {
	case PMC_MODE_WRITE_BACK:
		x->path = PMC_LAT_WRITE_PMEM;
		if (write_cached(x, 0)) {
			park(x); /* keeps its reference */
			return;
		}
		break;
	case PMC_MODE_WRITE_THROUGH:
		x->path = PMC_LAT_WRITE_DISK;
		if (write_cached(x, 1)) {
			park(x);
			return;
		}
		break;
	default:
		write_around(x, 0, x->n, durable_mode(v, in_force));
		break;
	}
	sub_done(x);
}

/* a parked write resumes where it stopped; it still holds its reference */
static void resume_write(struct pmc_req_ctx *x)
{
	struct pmc_evol *v = &x->q->e->vols[x->req->vol];
	int mode = atomic_load(&v->mode);

	if (atomic_load(&v->draining) || mode > PMC_MODE_WRITE_THROUGH) {
		write_around(x, x->cursor, x->n, durable_mode(v, mode));
		x->cursor = x->n;
		sub_done(x);
		return;
	}
	x->path = mode == PMC_MODE_WRITE_THROUGH ? PMC_LAT_WRITE_DISK : PMC_LAT_WRITE_PMEM;
	if (write_cached(x, mode == PMC_MODE_WRITE_THROUGH)) {
		park(x);
		return;
	}
	sub_done(x);
}

/* --- flush and discard --- */

static void simple_done(struct pmc_io *io, int res)
{
	struct pmc_req_ctx *x = io->priv;
	struct pmc_req *req = x->req;
	struct pmc_evol *v = &x->q->e->vols[req->vol];

	if (req->op == PMC_REQ_DISCARD) {
		inval(x->q->e, req->vol, x->lba, x->n);
		plain_end(v);
		fg_io_leave(x, io);
	}
	/* what completed before the sync was issued is durable now; after a
	 * failure nothing is known durable: the next flush syncs again */
	if (!res && req->op == PMC_REQ_FLUSH)
		synced_advance(v, x->gen);
	if (res) {
		volume_failed(x->q->e, req->vol, res, req->op == PMC_REQ_FLUSH ? "flush" : "discard");
		STAT_ADD(&x->q->stats[req->vol], write_errors, 1);
		set_res(x, res);
	}
	sub_done(x);
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
		disk_write_issue(x->q, io); /* after older writes of the range */
	else
		pmc_ring_submit(x->q->ring, io);
}

static void start_flush(struct pmc_req_ctx *x)
{
	struct pmc_evol *v = &x->q->e->vols[x->req->vol];

	x->path = PMC_LAT_FLUSH;
	/* write-back data is durable in pmem; plain disk writes completed
	 * before this flush arrived are in wr_done, and a sync issued now
	 * covers them. Nothing to do if one issued later has finished. */
	x->gen = atomic_load(&v->wr_done);
	if (atomic_load(&v->wr_synced) >= x->gen) {
		x->pending = 1;
		sub_done(x);
		return;
	}
	start_simple(x, PMC_IO_FSYNC);
}

static void start_discard(struct pmc_req_ctx *x)
{
	struct pmc_engine *e = x->q->e;
	struct pmc_req *req = x->req;

	x->path = PMC_LAT_DISCARD;
	if (!e->vols[req->vol].disk->can_discard) {
		inval(e, req->vol, x->lba, x->n);
		x->pending = 1;
		sub_done(x);
		return;
	}
	/* like a write around the cache: write-back and fills stay off the
	 * range, and the discard waits for older writes of it in flight */
	around_enter(x);
	plain_begin(&e->vols[req->vol]);
	inval(e, req->vol, x->lba, x->n);
	start_simple(x, PMC_IO_DISCARD);
}

/* --- submission --- */

static void start(struct pmc_req_ctx *x)
{
	struct pmc_req *req = x->req;
	struct pmc_vol_stats *st = &x->q->stats[req->vol];

	x->lba = req->off / x->q->e->bs;
	x->n = (uint32_t)(req->len / x->q->e->bs);
	x->cursor = 0;
	x->nio = 0;
	x->res = 0;
	x->start_ns = pmc_mono_ns();
	atomic_store(&x->q->e->last_fg_ns, x->start_ns);
	switch (req->op) {
	case PMC_REQ_READ:
		STAT_ADD(st, reads, 1);
		STAT_ADD(st, read_bytes, req->len);
		start_read(x);
		break;
	case PMC_REQ_WRITE:
		STAT_ADD(st, writes, 1);
		STAT_ADD(st, write_bytes, req->len);
		start_write(x);
		break;
	case PMC_REQ_FLUSH:
		STAT_ADD(st, flushes, 1);
		start_flush(x);
		break;
	case PMC_REQ_DISCARD:
		STAT_ADD(st, discards, 1);
		STAT_ADD(st, discard_bytes, req->len);
		start_discard(x);
		break;
	}
}

static int validate(struct pmc_queue *q, struct pmc_req *req, struct pmc_err *err)
{
	struct pmc_engine *e = q->e;
	struct pmc_evol *v = evol(e, req->vol);
	const char *name;

	if (!v)
		return pmc_err_set(err, ENOENT, "request: volume slot %u is not attached",
				   req->vol);
	name = e->vols[req->vol].name;
	if ((unsigned)req->op > PMC_REQ_DISCARD)
		return pmc_err_set(err, EINVAL, "volume %s: request op %d unknown", name,
				   (int)req->op);
	if (req->op == PMC_REQ_FLUSH)
		return 0;
	if (req->off % e->bs || req->len % e->bs || req->len == 0)
		return pmc_err_set(err, EINVAL,
				   "volume %s: request %" PRIu64 "+%" PRIu64
				   " is not aligned to %u bytes",
				   name, req->off, req->len, e->bs);
	if (req->off / e->bs > v->blocks || req->len / e->bs > v->blocks - req->off / e->bs)
		return pmc_err_set(err, EINVAL,
				   "volume %s: request %" PRIu64 "+%" PRIu64 " runs past its end (%" PRIu64
				   " bytes)",
				   name, req->off, req->len, v->blocks * e->bs);
	if (req->op != PMC_REQ_DISCARD && req->len > (uint64_t)e->max_req_blocks * e->bs)
		return pmc_err_set(err, EINVAL,
				   "volume %s: request of %" PRIu64 " bytes is larger than %u",
				   name, req->len, e->max_req_blocks * e->bs);
	if (req->op == PMC_REQ_DISCARD && req->len / e->bs > UINT32_MAX)
		return pmc_err_set(err, EINVAL, "volume %s: discard too large", name);
	if ((req->op == PMC_REQ_READ || req->op == PMC_REQ_WRITE) &&
	    ((uintptr_t)req->buf % 4096 || !req->buf))
		return pmc_err_set(err, EINVAL, "volume %s: request buffer not 4 KiB aligned",
				   name);
	return 0;
}

static void dispatch(struct pmc_queue *q, struct pmc_req *req)
{
	struct pmc_req_ctx *x = q->free;

	q->free = x->next;
	q->busy++;
	x->req = req;
	req->ctx = x;
	start(x);
}

int pmc_queue_submit(struct pmc_queue *q, struct pmc_req *req, struct pmc_err *err)
{
	int rc = validate(q, req, err);

	if (rc)
		return rc;
	if (q->free && !q->npending) {
		dispatch(q, req);
		wake(q);
		return 0;
	}
	if (q->npending == q->depth * 4)
		return pmc_err_set(err, EAGAIN, "queue: %u requests pending", q->npending);
	q->pending[(q->pend_head + q->npending++) % (q->depth * 4)] = req;
	return 0;
}

static int run_done(struct pmc_queue *q)
{
	int n = 0;

	while (q->done) {
		struct pmc_req_ctx *x = q->done;
		struct pmc_req *req = x->req;

		q->done = x->next;
		stat_lat(&q->stats[req->vol], x->path, x->start_ns);
		x->next = q->free;
		q->free = x;
		q->busy--;
		req->ctx = NULL;
		req->cb(req, x->res);
		n++;
	}
	while (q->free && q->npending) {
		struct pmc_req *req = q->pending[q->pend_head];

		q->pend_head = (q->pend_head + 1) % (q->depth * 4);
		q->npending--;
		dispatch(q, req);
	}
	return n;
}

/* in order; once one must wait again, the later ones wait behind it */
static void retry_waiting(struct pmc_queue *q)
{
	struct pmc_req_ctx *x = q->waiting;

	q->waiting = q->waiting_tail = NULL;
	while (x) {
		struct pmc_req_ctx *next = x->next;

		if (q->waiting)
			park(x);
		else
			resume_write(x);
		x = next;
	}
}

int pmc_queue_poll(struct pmc_queue *q, int wait, uint64_t timeout_ns)
{
	uint64_t start = pmc_mono_ns();
	int n;

	for (;;) {
		uint64_t buf;

		if (read(pmc_ring_eventfd(q->ring), &buf, sizeof(buf)) < 0) {
			/* nothing signalled: fine */
		}
		n = run_done(q);
		if (q->held)
			retry_held(q);
		if (q->waiting) {
			/* writes wait for free blocks: make sure write-back runs */
			pmc_engine_writeback_step(q->e, q);
			retry_waiting(q);
			n += run_done(q);
		}
		n += pmc_ring_poll(q->ring, 0, 0);
		n += run_done(q);
		if (n || !wait)
			return n;
		if (timeout_ns && pmc_mono_ns() - start >= timeout_ns)
			return 0;
		if ((q->waiting || q->held) && !pmc_ring_busy(q->ring)) {
			/* only free blocks can wake these: look again shortly */
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
			continue;
		}
		if (!pmc_ring_waitable(q->ring) && !q->done)
			return 0;
		n = pmc_ring_poll(q->ring, 1, timeout_ns ? timeout_ns : 10000000ull);
		if (n < 0)
			return n;
		n += run_done(q);
		if (n)
			return n;
	}
}

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
	if (res < 0 && write_poisoned(e, w->vol, w->lba, w->blk, w->n))
		res = 1;
	for (uint32_t i = 0; i < w->n; i++) {
		if (res == 0)
			pmc_cache_mark_clean(e->c, w->vol, w->lba + i, w->blk[i]);
		pmc_cache_unpin(e->c, w->blk[i]);
	}

	stat_lat(st, PMC_LAT_WRITEBACK, w->start_ns);
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
		STAT_ADD(st, wb_errors, 1);
		volume_failed(e, w->vol, res, "write-back");
		/* one failed round, however many of its writes fail: the
		 * back-off doubles once per retry, not once per write */
		if (w->round == v->wb_round) {
			unsigned b = atomic_load(&v->backoff_ms);

			v->wb_round++;
			atomic_fetch_add(&v->fail_streak, 1);
			b = b ? (b * 2 > WB_BACKOFF_MAX_MS ? WB_BACKOFF_MAX_MS : b * 2)
			      : e->wb.retry_ms;
			atomic_store(&v->backoff_ms, b);
			atomic_store(&v->retry_at_ns, pmc_mono_ns() + (uint64_t)b * 1000000ull);
		}
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
		      (birth < pmc_now_ns() - max_age_ns && birth)))
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
static int wb_claim(struct pmc_engine *e, struct wb_io *w)
{
	pthread_mutex_lock(&e->dw_lock);
	if (wb_overlap_locked(e, w->vol, w->lba, w->n) ||
	    around_overlap_locked(e, w->vol, w->lba, w->n)) {
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
	w->round = e->vols[w->vol].wb_round;
	w->start_ns = pmc_mono_ns();
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
	uint64_t now = pmc_mono_ns(), pct;
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
	e->wb_first_vol = items_order(e->items, n, e->wb_first_vol);
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
		if (wb_claim(e, w)) {
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

	if (vol != UINT32_MAX && !evol(e, vol))
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
	state_mark_clean(e);
	return rc;
}

/* --- statistics --- */

static void sample_volume(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *out,
			  uint64_t now_rt)
{
	struct pmc_volume_info vi;
	uint64_t oldest = atomic_load(&e->vols[vol].oldest_birth_ns);
	int error = atomic_load(&e->vols[vol].error);

	if (e->c && pmc_cache_volume_info(e->c, vol, &vi) == 0) {
		out->dirty_blocks += vi.nr_dirty;
		out->clean_blocks += vi.nr_clean;
		out->dirty_bytes += vi.nr_dirty * e->bs;
	}
	if (oldest && oldest != UINT64_MAX && oldest < now_rt &&
	    (now_rt - oldest) / 1000000ull > out->oldest_dirty_age_ms)
		out->oldest_dirty_age_ms = (now_rt - oldest) / 1000000ull;
	if (error && !out->error)
		out->error = error;
}

int pmc_engine_stats(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *out)
{
	uint64_t now_rt = pmc_now_ns();

	memset(out, 0, sizeof(*out));
	if (vol != UINT32_MAX && !evol(e, vol))
		return -ENOENT;
	pthread_mutex_lock(&e->lock);
	for (struct pmc_queue *q = e->queues; q; q = q->next) {
		for (uint32_t i = 0; i < e->nvols; i++)
			if (vol == UINT32_MAX || vol == i)
				pmc_stats_add(out, &q->stats[i]);
	}
	for (uint32_t i = 0; i < e->nvols; i++)
		if (vol == UINT32_MAX || vol == i)
			pmc_stats_add(out, &e->retired[i]);
	pthread_mutex_unlock(&e->lock);
	for (uint32_t i = 0; i < e->nvols; i++)
		if (e->vols[i].disk && (vol == UINT32_MAX || vol == i))
			sample_volume(e, i, out, now_rt);
	if (vol == UINT32_MAX && e->c)
		out->evictions = atomic_load(&e->c->evictions);
	return 0;
}
