/* etest.h - helpers shared by the engine tests (tests/engine/).
 *
 * Files: pmem and backing disks are plain files in a directory where
 * O_DIRECT works (et_dir()); every file is removed at exit unless
 * PMC_TEST_KEEP is set.
 *
 * Blocks: every block a test writes names its owner and version in its
 * first words (tag, lba, version) and the rest is a pattern derived from
 * them, so a reader can tell one whole version of the right block from a
 * torn, misplaced or stale one. Version 0 is a disk's initial contents.
 *
 * Driving: requests are submitted on a pmc_queue from the test thread and
 * completed by polling it; et_wait() polls until a condition holds, running
 * write-back steps meanwhile and failing the test after a timeout.
 *
 * The model (struct et_model) is a seeded random workload of reads, writes,
 * discards and flushes over a few volumes, several requests in flight (no
 * two overlapping unless one is a read and the other a write), checked
 * against an in-memory copy of what each volume must hold. Used by
 * engine_model.c and engine_faults.c.
 *
 * Single-threaded, except the block helpers, which any thread may call.
 */
#ifndef PMC_TEST_ETEST_H
#define PMC_TEST_ETEST_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "disk.h"
#include "engine.h"
#include "stats.h"

#define BS 4096u
#define ET_MAX_REQ_BLOCKS 64u

/* et_version() results that are not a version */
#define EV_BAD UINT64_MAX	   /* not one whole version of this block */
#define EV_ZERO (UINT64_MAX - 1)   /* all zeroes (a discarded block) */
#define EV_ANY (UINT64_MAX - 2)	   /* model: any whole version or zeroes */

/* --- files --- */

/* Directory for test files where O_DIRECT works: $TMPDIR, /dev/shm, /tmp,
 * /var/tmp, the first that works. Exits 77 (skip) if none does. */
const char *et_dir(void);
/* A path in et_dir() unique to this process, removed at exit. */
void et_path(char *buf, size_t len, const char *what);
/* Create (or overwrite) a disk file of nblocks blocks holding version 0 of
 * tag's blocks. */
void et_disk_create(const char *path, uint32_t tag, uint64_t nblocks);
/* Read block lba of a disk file, buffered (not through the engine). */
void et_disk_read(const char *path, uint64_t lba, void *buf);

/* --- block contents --- */

void et_fill(void *b, uint32_t tag, uint64_t lba, uint64_t ver);
/* the version b holds as block lba of tag, EV_ZERO or EV_BAD */
uint64_t et_version(const void *b, uint32_t tag, uint64_t lba);
/* what a block that is not the expected version holds, for a message */
const char *et_describe(const void *b, uint32_t tag, uint64_t lba, uint64_t want, char *buf,
			size_t len);
/* "17", "zeroes", "garbage", "any" into buf */
const char *et_vstr(uint64_t v, char *buf, size_t len);
void *et_alloc(size_t len); /* 4 KiB aligned, zeroed; fails the test if out of memory */
uint64_t et_rand(uint64_t *state);
/* --seed S or the time; also makes stdout line-buffered */
uint64_t et_seed_arg(int argc, char **argv, int *argi);

/* A failed check that does not invalidate what follows (a stats counter):
 * printed as FAIL at once, the test goes on and et_exit() fails it. */
void et_soft_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define ET_SOFT_FAIL(...) et_soft_fail(__FILE__, __LINE__, __VA_ARGS__)
/* 1 if any soft failure was recorded, after saying how many */
int et_exit(const char *test, uint64_t seed);

/* --- engine set-up --- */

struct et_vol {
	char name[32];
	char path[256];	   /* disk file */
	uint32_t tag;	   /* owner tag in the block contents */
	uint64_t nblocks;  /* volume size in blocks */
	uint32_t vol;	   /* engine's volume number after attach */
};

struct et {
	char pmem_path[256];
	uint64_t pmem_size; /* bytes */
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_engine *e;
	struct pmc_wb_conf wb;
	uint64_t nr_blocks; /* cache blocks */
};

/* 2 MiB of metadata room + nblocks cache blocks */
static inline uint64_t et_pmem_size(uint64_t nblocks)
{
	return (2ull << 20) + nblocks * BS;
}

/* Map t->pmem_path (creating it with t->pmem_size), format it if asked,
 * open the cache and create an engine with t->wb. */
void et_open(struct et *t, int format);
/* Open the volume's disk file, set ops (NULL: default) and attach. */
void et_attach(struct et *t, struct et_vol *v, const struct pmc_volume_conf *vc,
	       const struct pmc_disk_ops *ops, void *ops_priv);
/* Destroy the engine, then close the cache cleanly (crash = 0) or abandon
 * it (crash = 1: a process crash, every store made so far stays), unmap. */
void et_close(struct et *t, int crash);
/* pmc_cache_check of the cache t holds (no engine may run I/O meanwhile) */
void et_check_cache(struct et *t);

struct pmc_queue *et_queue(struct pmc_engine *e, unsigned depth);

/* --- requests --- */

struct et_req {
	struct pmc_req req;
	int done;
	int res;
};

/* Poll q (and wbq, unless NULL or q) until *done is set, calling
 * pmc_engine_writeback_step(e, wbq) between polls when wbq is not NULL.
 * Fails the test after timeout_ms, naming what. */
void et_wait(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, const int *done,
	     unsigned timeout_ms, const char *what);
/* Submit one request and wait for it; returns its result. Fails the test
 * if the submit is refused. */
int et_io(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, enum pmc_req_op op,
	  uint32_t vol, uint64_t lba, uint64_t nblocks, void *buf, unsigned flags);
/* Start one request; its completion sets r->done and r->res. */
void et_submit(struct pmc_queue *q, struct et_req *r, enum pmc_req_op op, uint32_t vol,
	       uint64_t lba, uint64_t nblocks, void *buf, unsigned flags);
/* Run write-back steps and polls for ms milliseconds. */
void et_run(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, unsigned ms);

/* Poll q and other (may be NULL) until neither has anything in flight. */
void et_quiesce(struct pmc_queue *q, struct pmc_queue *other);
/* flush_all on q, after other (a queue of the same thread that may have
 * write-back I/O in flight, or NULL) is quiet; fails the test on an error */
void et_flush_all(struct et *t, struct pmc_queue *q, struct pmc_queue *other);

/* Stats of one volume (vol) or of the whole cache (UINT32_MAX). */
void et_stats(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *s);
uint64_t et_hist_sum(const uint64_t *hist);

/* --- a disk with a volatile write cache --- */

/*
 * A backing disk whose writes land in a volatile cache: a plain write is
 * durable only once a flush (PMC_IO_FSYNC) submitted after it completed
 * has finished; an RWF_DSYNC write is durable when it completes. Discards
 * are writes of zeroes. The file at path always holds the live contents
 * (what reads return); the model keeps what is durable and, per block,
 * the writes that are not, so that a power cut can lose any subset of
 * them. Plug it in with et_vdisk_ops and the et_vdisk as ops_priv, or
 * call et_vdisk_submit/et_vdisk_complete from other ops. Thread-safe.
 */
struct et_vdisk;

/* the file's contents now are durable */
struct et_vdisk *et_vdisk_new(const char *path, uint64_t nblocks);
void et_vdisk_free(struct et_vdisk *d);
extern const struct pmc_disk_ops et_vdisk_ops;
void et_vdisk_submit(struct pmc_disk *disk, struct pmc_ring *r, struct pmc_io *io);
int et_vdisk_complete(struct pmc_disk *disk, struct pmc_io *io, int res);
int et_vdisk_sync(struct pmc_disk *disk);

enum et_land {
	ET_LAND_NONE,	/* every write not yet durable is lost */
	ET_LAND_ALL,	/* ... all of them land (the newest wins per block) */
	ET_LAND_RANDOM, /* per block: nothing, or any one of them */
};
/* what the disk would hold after a power cut now (nblocks * BS bytes) */
void et_vdisk_crash_image(struct et_vdisk *d, char *out, enum et_land how, uint64_t *rng);
/* A power cut now (no I/O of the disk in flight): the file and the
 * durable contents become such an image; nothing is volatile after. */
void et_vdisk_power_cut(struct et_vdisk *d, enum et_land how, uint64_t *rng);
/* the next I/O of kind op reaches the disk after delay_ns, or fails with
 * -err at once (the write then lands nowhere; a PMC_IO_FSYNC failure
 * also fails the next synchronous sync, et_vdisk_sync) */
void et_vdisk_delay_next(struct et_vdisk *d, enum pmc_io_op op, uint64_t delay_ns);
void et_vdisk_fail_next(struct et_vdisk *d, enum pmc_io_op op, int err);

struct et_vdisk_stats {
	uint64_t writes, dsync_writes, discards, syncs, failed;
	uint64_t volatile_blocks; /* block writes not durable now */
};
void et_vdisk_get_stats(struct et_vdisk *d, struct et_vdisk_stats *s);

/* --- the model --- */

#define ET_MAXV 4
#define ET_HIST 16
#define ET_MAX_INFLIGHT 16

struct et_model;

struct et_mreq {
	struct pmc_req req;
	struct et_model *m;
	int busy;
	unsigned mv;	   /* model volume */
	uint64_t lba, n;   /* blocks */
	uint64_t ver;	   /* write: its version */
	uint64_t *snap;	   /* read: want[] of its blocks at submit */
	void *buf;
};

struct et_mvol {
	struct et_vol *v;
	uint64_t *want;	   /* acknowledged version per block, or EV_ANY */
	uint64_t *issued;  /* newest version ever submitted for the block */
	uint64_t (*hist)[ET_HIST]; /* the last ET_HIST versions submitted per block */
	uint8_t *wbusy;	   /* a write or discard in flight covers the block */
	uint16_t *rbusy;   /* reads in flight covering the block */
	/* requests completed, to compare with the engine's stats */
	uint64_t reads, writes, flushes, discards;
	uint64_t read_bytes, write_bytes, discard_bytes;
	uint64_t errors;   /* requests that completed with an error */
};

struct et_model {
	struct et *t;
	struct pmc_queue *q;	/* requests */
	struct pmc_queue *wbq;	/* write-back steps (q, another queue, or NULL) */
	uint64_t seed, rng;
	unsigned nvols;
	struct et_mvol mv[ET_MAXV];
	struct et_mreq slot[ET_MAX_INFLIGHT];
	unsigned max_inflight;	/* <= ET_MAX_INFLIGHT */
	unsigned inflight;
	uint64_t next_ver;
	/* mix, in percent: the rest are reads */
	unsigned pct_write, pct_discard, pct_flush;
	unsigned pct_fua;	/* of writes */
	int rw_overlap;		/* allow reads to overlap writes in flight */
	int allow_errors;	/* a failed request is not a test failure: its
				 * blocks become "any" (engine_faults) */
	/* called every hook_every requests issued, with others in flight */
	void (*hook)(struct et_model *m);
	unsigned hook_every;
	void *priv;
	uint32_t trace_vol;	/* ET_TRACE=v:lba: print requests covering it */
	uint64_t trace_lba;
	uint64_t ops_done;
	uint64_t overlapped_reads;
	uint64_t torn_reads;	/* blocks read mixed from versions written meanwhile */
};

/* nvols volumes in vols, attached already */
void et_model_init(struct et_model *m, struct et *t, struct et_vol *vols, unsigned nvols,
		   uint64_t seed);
void et_model_fini(struct et_model *m);
/* a block's history of versions (the last n written), and whether b is a
 * word-by-word mix of versions lo..hi of the block that it knows */
void et_hist_add(uint64_t *h, unsigned n, uint64_t ver);
int et_mixed_of(const uint64_t *h, unsigned n, uint32_t tag, uint64_t lba, uint64_t lo, uint64_t hi,
		const void *b, int zero_ok);
/* the model's own checks of what it accepts as a torn read (no engine) */
void et_model_selftest(void);
/* Run ops random requests to completion, with a write-back step every
 * wb_every loop turns (0: none). */
void et_model_run(struct et_model *m, uint64_t ops, unsigned wb_every);
/* Wait for every request in flight. */
void et_model_drain(struct et_model *m);
/* Read every block of every volume through the engine and compare. */
void et_model_verify_engine(struct et_model *m, const char *when);
/* Read every block of every disk file directly and compare (after flush_all). */
void et_model_verify_disks(struct et_model *m, const char *when);
/* The requests counted by the model agree with the engine's stats. */
void et_model_check_stats(struct et_model *m);
/* The whole cache's stats are the sum of those of the n attached volumes. */
void et_check_total_stats(struct pmc_engine *e, const uint32_t *vols, unsigned n,
			  int identities);

#endif
