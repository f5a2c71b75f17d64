/* engine.h - the cache engine: requests on volumes, served from pmem or the
 * backing disks through per-thread io_uring queues, with write-back.
 *
 * Threads: an engine is shared; each thread that submits requests owns a
 * struct pmc_queue (its ring, its request contexts, its statistics). One
 * queue - usually on its own thread - also runs write-back
 * (pmc_engine_writeback_step). Every call taking a queue is made from the
 * queue's thread; engine-level calls (attach, set_mode, stats) from any
 * thread. Request callbacks run from pmc_queue_poll() on the queue's thread.
 *
 * Requests are in bytes and must be aligned to the cache block size (the
 * daemon exports that as the device's logical block size); a request that
 * is not, or runs past the volume's end, is refused at submit.
 */
#ifndef PMC_ENGINE_H
#define PMC_ENGINE_H

#include <stdint.h>

#include "cache.h"
#include "disk.h"
#include "err.h"
#include "stats.h"

enum pmc_mode {
	PMC_MODE_WRITE_BACK = 0,    /* acknowledged once persistent in pmem */
	PMC_MODE_WRITE_THROUGH = 1, /* pmem and disk, acknowledged after both */
	PMC_MODE_WRITE_AROUND = 2,  /* writes to disk only, cached copy dropped */
	PMC_MODE_PASS_THROUGH = 3,  /* the cache is bypassed */
};

enum pmc_nospace {
	PMC_NOSPACE_WAIT = 0,	/* a write finding no free block waits for write-back */
	PMC_NOSPACE_AROUND = 1, /* ... or goes to the disk, dropping the cached copy */
};

const char *pmc_mode_name(enum pmc_mode m);
int pmc_mode_parse(const char *s, enum pmc_mode *m);

struct pmc_volume_conf {
	enum pmc_mode mode;
	uint32_t admit_after_misses; /* admit a missed block on its Nth miss; 0 or 1: at once */
	uint64_t seq_cutoff_bytes;   /* sequential reads beyond this are not admitted; 0: off */
	enum pmc_nospace nospace;
};

struct pmc_wb_conf {
	uint32_t high_pct;	  /* start write-back above this % of blocks dirty (default 50) */
	uint32_t low_pct;	  /* stop below this % (default 30) */
	uint64_t max_age_ms;	  /* write back blocks dirty for longer than this (default 30000) */
	uint32_t max_io_bytes;	  /* merge neighbours into writes up to this size (default 1 MiB) */
	uint32_t max_inflight;	  /* write-back writes at once when idle or writes wait for blocks (default 32) */
	uint32_t busy_inflight;	  /* ... while foreground I/O runs (default 4) */
	uint32_t idle_ms;	  /* no foreground request for this long = idle (default 100) */
	uint32_t retry_ms;	  /* first back-off after a disk error, doubling to 60 s (default 1000) */
	uint32_t stall_ms;	  /* a volume whose write-back completed nothing for this long
				   * while some was in flight (a hung disk or path) stops taking
				   * write-back's shared limits (default 10000) */
	uint32_t max_req_bytes;	  /* largest request (default 1 MiB) */
};

void pmc_wb_conf_default(struct pmc_wb_conf *wb);
void pmc_volume_conf_default(struct pmc_volume_conf *vc);

struct pmc_engine;
struct pmc_queue;

/* The cache must use 4 KiB blocks (or be NULL, see below). Runs no
 * recount; write-back does it. */
int pmc_engine_create(struct pmc_cache *c, const struct pmc_wb_conf *wb, struct pmc_engine **out,
		      struct pmc_err *err);
/*
 * With c == NULL the engine runs without a cache (the pmem failed to map):
 * every volume is pass-through, and only volumes the state file records as
 * clean may attach; the others are refused by name.
 */
struct pmc_state;
/* Use st (state.h) to record which volumes may hold dirty data; optional,
 * set before attaching volumes. */
void pmc_engine_set_state(struct pmc_engine *e, struct pmc_state *st);
/* All queues destroyed first. Marks clean volumes clean in the state file,
 * syncs the plain disk writes and closes the attached disks. Returns 1 when
 * some volume's plain writes could not be made durable (a sync failed,
 * here or at its last detach, or, after an unclean stop, the volume was
 * never attached in this process): the cache must then not record a clean
 * shutdown, so that the next process admits no read-miss fill before a
 * sync of its own succeeds (lib/ORDERING.md). */
int pmc_engine_destroy(struct pmc_engine *e);

/*
 * Serve volume `name` from disk (the engine owns disk on success). A volume
 * the cache does not know is added with the disk's size (rounded down to the
 * block size); a known one needs a disk at least as large as recorded.
 */
int pmc_engine_attach(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
		      const struct pmc_volume_conf *vc, uint32_t *vol, struct pmc_err *err);
/* ... checking the disk's identity against the one the cache recorded for
 * the volume (diskid.h: PMC_ATTACH_* flags replace it) */
int pmc_engine_attach_flags(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
			    const struct pmc_volume_conf *vc, unsigned flags, uint32_t *vol,
			    struct pmc_err *err);
/*
 * After a flush of every attached volume: the cache's volumes not attached
 * (detached keeping their data, or never attached in this process) keep
 * their dirty blocks. -EAGAIN naming them, their dirty block count (and
 * whether some are not counted yet, after a crash); 0 when none has any.
 */
int pmc_engine_unattached_dirty(struct pmc_engine *e, struct pmc_err *err);

/*
 * Stop serving vol: its requests must all have completed (its device is
 * stopped). Closes its disk; the volume stays in the cache (its dirty data
 * too, for the next attach). With remove, the volume must have no dirty
 * block and is removed from the cache.
 */
int pmc_engine_detach(struct pmc_engine *e, uint32_t vol, int remove, struct pmc_err *err);
/* slot of an attached volume by name */
int pmc_engine_find(struct pmc_engine *e, const char *name, uint32_t *vol);
const char *pmc_engine_volume_name(struct pmc_engine *e, uint32_t vol);
const char *pmc_engine_volume_disk(struct pmc_engine *e, uint32_t vol);
/* the identity of the volume's disk as the engine knows it (the cache's
 * record, or without the cache the state file's or the one found at
 * attach), "" if none */
void pmc_engine_volume_disk_id(struct pmc_engine *e, uint32_t vol, char *buf, size_t len);
uint64_t pmc_engine_volume_size(struct pmc_engine *e, uint32_t vol);

/*
 * Change the mode. Leaving write-back first writes back the volume's dirty
 * data: until that is done new writes go through to the disk, and
 * pmc_engine_get_mode() reports the old mode with draining set.
 */
int pmc_engine_set_mode(struct pmc_engine *e, uint32_t vol, enum pmc_mode mode,
			struct pmc_err *err);
int pmc_engine_set_volume_conf(struct pmc_engine *e, uint32_t vol,
			       const struct pmc_volume_conf *vc, struct pmc_err *err);
int pmc_engine_get_mode(struct pmc_engine *e, uint32_t vol, enum pmc_mode *mode, int *draining);
void pmc_engine_set_wb_conf(struct pmc_engine *e, const struct pmc_wb_conf *wb);
/*
 * Whether the exported device tells the kernel it has a volatile write
 * cache (then flush requests make disk writes durable, lib/ORDERING.md).
 * Without one, every write that reaches the disk directly uses RWF_DSYNC,
 * and this call syncs the disk once (fdatasync, on the calling thread)
 * since no flush will come. Default: volatile. Call it before the device
 * takes its first request (a write served before it would go by the
 * default).
 */
void pmc_engine_set_volatile(struct pmc_engine *e, uint32_t vol, int volatile_cache);
/* first disk error of the volume (sticky until cleared), 0 if none */
int pmc_engine_volume_error(struct pmc_engine *e, uint32_t vol);
/*
 * Clear the volume's error and write-back back-off (its disk works again):
 * I/O started before fails as before, without setting the error again.
 * While the volume has LOST blocks (dirty data lost to pmem media errors)
 * the error stays EIO: that error is returned, else 0.
 */
int pmc_engine_clear_error(struct pmc_engine *e, uint32_t vol);

/* --- queues and requests --- */

int pmc_queue_create(struct pmc_engine *e, unsigned depth, struct pmc_queue **out,
		     struct pmc_err *err);
/* ... whose ring also carries another protocol's commands (ring.h) */
struct pmc_ring_opts;
int pmc_queue_create_opts(struct pmc_engine *e, unsigned depth, const struct pmc_ring_opts *ro,
			  struct pmc_queue **out, struct pmc_err *err);
struct pmc_ring *pmc_queue_ring(struct pmc_queue *q);
/* Waits for the queue's in-flight work to finish, then frees it. */
void pmc_queue_destroy(struct pmc_queue *q);

enum pmc_req_op {
	PMC_REQ_READ,
	PMC_REQ_WRITE,
	PMC_REQ_FLUSH,
	PMC_REQ_DISCARD,
};

#define PMC_REQ_FUA 1u /* write: durable on completion in every mode */
/*
 * READ/WRITE: the data is not in buf but in the file ucopy_fd at byte
 * offset ucopy_off (ublk user copy: /dev/ublkcN at the request's position).
 * A write's data is read from there straight into new cache blocks, a read
 * hit written there straight from pmem: one copy, no request buffer. Paths
 * that need the data in DRAM (disk writes of write-around, misses not
 * admitted) copy it through a buffer of the request's context, allocated
 * on first such use. buf is ignored.
 */
#define PMC_REQ_UCOPY 2u

struct pmc_req_ctx;

struct pmc_req {
	enum pmc_req_op op;
	uint32_t vol;
	uint64_t off;	/* bytes */
	uint64_t len;	/* bytes */
	void *buf;	/* READ/WRITE: len bytes, aligned to 4 KiB (O_DIRECT) */
	unsigned flags; /* PMC_REQ_* */
	int ucopy_fd;	/* PMC_REQ_UCOPY: where the data is */
	uint64_t ucopy_off; /* ... at this byte offset */
	void (*cb)(struct pmc_req *req, int res); /* 0 or -errno */
	void *priv;
	struct pmc_req_ctx *ctx; /* engine's */
};

/* 0: req completes later through cb; -errno: refused now (cb not called) */
int pmc_queue_submit(struct pmc_queue *q, struct pmc_req *req, struct pmc_err *err);
/*
 * One iteration of the queue thread's loop: one io_uring_enter submits what
 * was prepared (disk I/O, the ring's other commands) and collects
 * completions, whose callbacks run; see pmc_ring_poll() for wait and
 * timeout. Work prepared by callbacks goes to the kernel with the next
 * poll: a thread that stops polling calls pmc_ring_flush() first.
 */
int pmc_queue_poll(struct pmc_queue *q, int wait, uint64_t timeout_ns);
/* requests and write-back I/O not yet completed on this queue */
unsigned pmc_queue_busy(struct pmc_queue *q);
int pmc_queue_fixed_buffers(struct pmc_queue *q);

/* --- write-back, run on one queue --- */

/* Start what write-back the policy allows now; returns I/Os started. */
int pmc_engine_writeback_step(struct pmc_engine *e, struct pmc_queue *q);
/* 1 while the steps still rebuild the cache's dirty map after an open:
 * a step that started no I/O then did work all the same, and the caller
 * should not pause before the next one */
int pmc_engine_wb_rebuilding(struct pmc_engine *e);
/*
 * Write back every dirty block (of one volume, or all with vol = UINT32_MAX)
 * and wait. progress(dirty blocks left, arg) is called as it goes. Fails
 * with -EIO naming the volume if a disk keeps failing. Write-back writes
 * that other queues started complete only when those queues are polled:
 * their threads must keep polling meanwhile (the daemon's always do).
 */
int pmc_engine_flush_all(struct pmc_engine *e, struct pmc_queue *q, uint32_t vol,
			 void (*progress)(uint64_t left, void *arg), void *arg,
			 struct pmc_err *err);

/* Make a pmc_engine_flush_all running now (on any thread) return -ECANCELED
 * soon, naming the dirty blocks left; its write-back writes in flight
 * complete in its queue's later polls. A flush that starts after this call
 * is not cancelled. */
void pmc_engine_flush_cancel(struct pmc_engine *e);

/* --- statistics (stats.h) --- */
struct pmc_vol_stats;
/* one volume, or the whole cache with vol = UINT32_MAX */
int pmc_engine_stats(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *out);

#endif
