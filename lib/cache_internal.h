/* cache_internal.h - the DRAM side of an open cache, shared by the lib/
 * modules that implement cache.h. Never included by daemon/ or cli/.
 *
 * DRAM holds one bit per block (dirty_map, a hint for the allocator);
 * everything else per block lives in the pmem descriptor table. The rest
 * is fixed-size (stripe locks, per-volume counters).
 */
#ifndef PMC_CACHE_INTERNAL_H
#define PMC_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cache.h"
#include "format.h"

/* index stripes: one mutex covers every bucket b with b % nr_stripes == s */
#define PMC_STRIPES_MAX 4096u

#define PMC_BLK_NONE UINT64_MAX

struct pmc_vol_rt {
	atomic_int refs;	  /* pmc_cache_volume_get() holders */
	atomic_int removing;	  /* set while volume_remove decides */
	atomic_int_fast64_t nr_dirty; /* linked live dirty blocks (counted stripes) */
	atomic_int_fast64_t nr_clean;
	atomic_int_fast64_t nr_lost; /* linked live LOST blocks (counted stripes) */
};

struct pmc_cache {
	struct pmc_pmem *pm;
	struct pmc_sb sb;	/* DRAM copy of the newest superblock */
	unsigned sb_slot;	/* copy that holds sb */
	struct pmc_vol *vols;	/* pmem: volume table */
	struct pmc_desc *descs; /* pmem: descriptor table */
	pmc_bucket_t *buckets;	/* pmem: index */
	char *data;		/* pmem: data area */
	uint64_t nr_blocks;
	uint64_t bucket_mask;
	uint32_t block_size;
	uint32_t max_volumes;
	uint32_t epoch;		/* low 32 bits of sb.boot_epoch */
	int rdonly;
	int was_clean;
	uint32_t nr_stripes;	/* power of two, <= PMC_STRIPES_MAX */

	pthread_mutex_t vol_lock; /* volume table changes */
	struct pmc_vol_rt *vrt;	  /* [max_volumes] */
	pthread_mutex_t stripe[PMC_STRIPES_MAX];
	/* stripe s's blocks are included in the counters; set by recount or
	 * at a clean open, read and written under stripe[s] */
	uint8_t counted[PMC_STRIPES_MAX];
	atomic_int counts_valid;
	atomic_uint_fast64_t hand; /* CLOCK hand over the descriptors */
	/* bumped under stripe[s] by every publish and invalidate in the stripe:
	 * a fill publishes only if its snapshot still matches (pmc_cache_fill_seq) */
	atomic_uint fill_seq[PMC_STRIPES_MAX];
	atomic_uint_fast64_t evictions; /* clean blocks evicted */
	/*
	 * One bit per block: set while the block is a live DIRTY copy that
	 * this boot has seen (published dirty, or met by the allocator), so
	 * the allocator's hand passes dirty blocks without claiming them. A
	 * hint, never trusted for safety (reclaim checks under the lock);
	 * exact for every block published since open. Changed only under the
	 * stripe lock of the block's key, as its state is.
	 */
	_Atomic uint64_t *dirty_map; /* [(nr_blocks + 63) / 64] */
	/* the dirty blocks of the previous boot get into dirty_map by a
	 * background pass over the descriptors (pmc_cache_dirty_rebuild);
	 * once it completed, the map holds every live dirty block */
	atomic_uint_fast64_t rebuild_cursor;
	atomic_int dirty_map_complete;
	atomic_int_fast64_t tot_dirty;	/* sum of vrt[].nr_dirty (counted stripes) */
};

/* super.c */
struct pmc_geom {
	uint64_t pmem_size;
	uint32_t block_size;
	uint32_t max_volumes;
	uint64_t nr_blocks;
	uint64_t nr_buckets;
	uint64_t vol_off, desc_off, index_off, data_off;
};
int pmc_geom_compute(uint64_t pmem_size, uint32_t block_size, uint32_t max_volumes,
		     struct pmc_geom *g, struct pmc_err *err);
/* 1.1: bytes 8..167; 1.0: bytes 8..231 */
uint32_t pmc_vol_csum(const struct pmc_vol *v);
uint32_t pmc_vol_csum_v10(const struct pmc_vol *v);
/* the disk identity record, bytes 168..227 */
uint32_t pmc_vol_id_csum(const struct pmc_vol *v);
uint32_t pmc_desc_csum(const struct pmc_desc *d);
/* validate and pick the newest copy; no stores */
int pmc_sb_load(struct pmc_pmem *pm, struct pmc_sb *sb, unsigned *slot, struct pmc_err *err);
/* write c->sb (seq + 1) into the other copy and persist it */
void pmc_sb_commit(struct pmc_cache *c);
uint64_t pmc_now_ns(void);

/* index.c */
uint64_t pmc_index_bucket(const struct pmc_cache *c, uint32_t vol, uint64_t lba);
static inline uint32_t pmc_stripe_of(const struct pmc_cache *c, uint64_t bucket)
{
	return (uint32_t)(bucket & (c->nr_stripes - 1));
}
/* live: linked, in a valid state, and of the volume's current generation */
int pmc_desc_live(const struct pmc_cache *c, const struct pmc_desc *d);
/* under the bucket's stripe lock: -ENOENT, -EUCLEAN or 0 and the link word */
int pmc_index_find_blk_locked(struct pmc_cache *c, uint64_t b, uint64_t target, uint64_t **link);
void pmc_count_adj(struct pmc_cache *c, uint32_t stripe, uint32_t vol, uint64_t state, int delta);

/* block.c */
void pmc_pin_locked(struct pmc_cache *c, uint64_t blk);

static inline void pmc_dirty_mark(struct pmc_cache *c, uint64_t blk, int dirty)
{
	uint64_t bit = 1ull << (blk % 64);

	if (dirty)
		atomic_fetch_or_explicit(&c->dirty_map[blk / 64], bit, memory_order_relaxed);
	else if (atomic_load_explicit(&c->dirty_map[blk / 64], memory_order_relaxed) & bit)
		atomic_fetch_and_explicit(&c->dirty_map[blk / 64], ~bit, memory_order_relaxed);
}

/* index.c: the stripe locks of a batch, taken in ascending order (no other
 * path holds two stripe locks, so batches cannot deadlock) */
#define PMC_BATCH_MAX 256u
struct pmc_stripe_set {
	uint32_t s[PMC_BATCH_MAX]; /* stripes to lock, any order, repeats allowed */
	unsigned n;
	uint64_t map[PMC_STRIPES_MAX / 64]; /* pmc_stripes_lock's: the set, sorted */
};
void pmc_stripes_lock(struct pmc_cache *c, struct pmc_stripe_set *set);
void pmc_stripes_unlock(struct pmc_cache *c, struct pmc_stripe_set *set);

/* Test hooks, NULL outside tests (tests/unit/test_guards.c and
 * tests/engine/engine_faults.c force races through them):
 * pmc_test_alloc_claimed runs in pmc_cache_alloc right after blk was
 * claimed, before the allocator takes the stripe lock to look at it;
 * pmc_test_wb_pinned runs in write-back after the blocks of a write were
 * pinned (wb_pin) and before they are claimed for the disk (wb_claim);
 * pmc_test_open_committing runs in a read-write pmc_cache_open after the
 * media check, before the open.epoch commit (tests/unit/test_badblocks.c
 * crashes there); pmc_test_counts_snapshot runs at each
 * pmc_cache_counts_snapshot (tests/ctlsrv counts who takes one). */
struct pmc_engine;
extern void (*pmc_test_alloc_claimed)(struct pmc_cache *c, uint64_t blk);
extern void (*pmc_test_wb_pinned)(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n);
extern void (*pmc_test_open_committing)(struct pmc_cache *c);
extern void (*pmc_test_counts_snapshot)(void);

static inline uint64_t pmc_load64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* always-on check: going on could lose data */
#define PMC_BUG_ON(cond, ...)                                                                      \
	do {                                                                                       \
		if (__builtin_expect(!!(cond), 0))                                                  \
			pmc_bug(__FILE__, __LINE__, __VA_ARGS__);                                   \
	} while (0)
void pmc_bug(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));

#endif
