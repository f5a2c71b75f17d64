/* block.c - pins and allocation of cache blocks.
 *
 * A pin is a reference on a block, held by whoever reads or writes its data
 * (a copy, an O_DIRECT transfer): a pinned block is never reclaimed. Pins
 * live in the descriptor's ref word in pmem, tagged with the boot epoch:
 * epoch in the high 32 bits, count in the low 32. They are never persisted;
 * a ref word whose epoch is not the current one counts as zero pins, so the
 * open after a crash voids every pin in O(1) by bumping the epoch, with no
 * scan of the descriptors.
 *
 * Allocation is a CLOCK sweep over the descriptors. A candidate is first
 * claimed (its pins go from 0 to 1 in one CAS, so two allocators never get
 * the same block), then taken if, once it is known to be in no chain, the
 * claim is still its only pin, and it is FREE, an orphan (in no chain: left
 * by a crash between storing a descriptor and linking it, or by an
 * overwrite), stale (its volume was removed), or, when eviction is allowed,
 * clean, unpinned by anyone else and not referenced since the hand last
 * passed. Dirty blocks are never taken, and the hand skips the blocks the
 * dirty bitmap (cache_internal.h) marks, a word of 64 at a time, without
 * claiming or locking them: allocation costs the same however many blocks
 * are dirty. A dirty block the bitmap does not know yet (after an open)
 * is marked when the hand first meets it.
 *
 * Read-miss fills (PMC_ALLOC_FILL) look at a few blocks only and evict
 * only a clean block nobody referenced since the hand last passed: a miss
 * takes a free or cold block, or is not admitted.
 *
 * Locking: claim is lock-free; the chain check and eviction run under the
 * stripe lock of the candidate's bucket (see index.c).
 */
#include <errno.h>
#include <inttypes.h>

#include "cache_internal.h"
#include "log.h"

void (*pmc_test_alloc_claimed)(struct pmc_cache *c, uint64_t blk);

void pmc_pin_locked(struct pmc_cache *c, uint64_t blk)
{
	uint64_t *r = &c->descs[blk].ref;
	uint64_t old = pmc_load64(r), new;

	if (c->rdonly)
		return;
	do {
		if (PMC_REF_EPOCH(old) == c->epoch && PMC_REF_PINS(old) < PMC_REF_PINS_BOGUS) {
			new = old + 1;
		} else {
			new = PMC_REF(c->epoch, 1);
		}
	} while (!__atomic_compare_exchange_n(r, &old, new, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
}

void pmc_cache_pin(struct pmc_cache *c, uint64_t blk)
{
	PMC_BUG_ON(blk >= c->nr_blocks || (!c->rdonly && pmc_cache_pins(c, blk) == 0),
		   "block %llu: extra pin without a pin held", (unsigned long long)blk);
	pmc_pin_locked(c, blk);
}

void pmc_cache_unpin(struct pmc_cache *c, uint64_t blk)
{
	uint64_t *r;
	uint64_t old;

	if (c->rdonly)
		return;
	PMC_BUG_ON(blk >= c->nr_blocks, "unpin of block %llu beyond the table",
		   (unsigned long long)blk);
	r = &c->descs[blk].ref;
	old = pmc_load64(r);
	do {
		PMC_BUG_ON(PMC_REF_EPOCH(old) != c->epoch || PMC_REF_PINS(old) == 0 ||
				   PMC_REF_PINS(old) >= PMC_REF_PINS_BOGUS,
			   "block %llu: pin count underflow", (unsigned long long)blk);
	} while (!__atomic_compare_exchange_n(r, &old, old - 1, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
}

uint32_t pmc_cache_pins(struct pmc_cache *c, uint64_t blk)
{
	uint64_t r = pmc_load64(&c->descs[blk].ref);

	return PMC_REF_EPOCH(r) == c->epoch && PMC_REF_PINS(r) < PMC_REF_PINS_BOGUS ? PMC_REF_PINS(r)
										    : 0;
}

/* take the first pin on an unpinned block; 0 if someone holds it */
static int claim(struct pmc_cache *c, uint64_t blk)
{
	uint64_t *r = &c->descs[blk].ref;
	uint64_t old = pmc_load64(r);

	if (PMC_REF_EPOCH(old) == c->epoch && PMC_REF_PINS(old) != 0 &&
	    PMC_REF_PINS(old) < PMC_REF_PINS_BOGUS)
		return 0;
	return __atomic_compare_exchange_n(r, &old, PMC_REF(c->epoch, 1), 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

/*
 * A claimed block whose key does not verify (its checksum fails, or its
 * volume slot is out of range): a descriptor torn by a crash before it was
 * linked, or a linked one corrupted since. Its key cannot find its chain,
 * so every chain is searched, one stripe lock at a time (rare: torn
 * orphans are a few per crash). 0: in no chain; -EBUSY: linked (or a chain
 * is corrupt), kept for the checker.
 */
static int unverified(struct pmc_cache *c, uint64_t blk)
{
	static struct pmc_ratelimit rl;
	uint64_t *link;
	int rc = -ENOENT;

	/* a stripe's buckets are b with b & (nr_stripes - 1) == s */
	for (uint32_t s = 0; s < c->nr_stripes && rc == -ENOENT; s++) {
		pthread_mutex_lock(&c->stripe[s]);
		for (uint64_t b = s; b <= c->bucket_mask && rc == -ENOENT; b += c->nr_stripes)
			rc = pmc_index_find_blk_locked(c, b, blk, &link);
		pthread_mutex_unlock(&c->stripe[s]);
	}
	if (rc == -ENOENT)
		return 0;
	pmc_log_ratelimited(&rl, LOG_ERR,
			    "pmem %s: cache block %" PRIu64 " is linked but its descriptor's key "
			    "is corrupt: not reused (pmcachectl check)",
			    c->pm->path, blk);
	return -EBUSY;
}

/* decide on a claimed, non-FREE block: 0 = reusable, -EBUSY = keep */
static int reclaim(struct pmc_cache *c, uint64_t blk, int mode)
{
	struct pmc_desc *d = &c->descs[blk];
	uint64_t b, st, *link;
	uint32_t s, vol = d->vol;
	int rc;

	if ((pmc_load64(&d->state) & 0xff) == PMC_BLK_BAD)
		return -EBUSY; /* retired: bad media (poison.h) */
	if (vol >= c->max_volumes)
		return unverified(c, blk); /* a live descriptor has a valid slot */
	b = pmc_index_bucket(c, vol, d->lba);
	s = pmc_stripe_of(c, b);
	pthread_mutex_lock(&c->stripe[s]);
	rc = pmc_index_find_blk_locked(c, b, blk, &link);
	if (rc == -ENOENT && d->csum != pmc_desc_csum(d)) {
		/* not in its key's chain, but the key may be corrupt */
		pthread_mutex_unlock(&c->stripe[s]);
		return unverified(c, blk);
	}
	if (rc == -ENOENT) {
		/* an orphan. A LOST one is bad media whose BAD store (after
		 * its unlink, index.c retire_old) a crash lost: retired now,
		 * never handed out */
		rc = 0;
		if ((pmc_load64(&d->state) & 0xff) == PMC_BLK_LOST) {
			pmc_pmem_store8(c->pm, &d->state, PMC_BLK_BAD);
			pmc_pmem_persist(c->pm, &d->state, sizeof(uint64_t));
			rc = -EBUSY;
		}
		goto out;
	}
	if (rc < 0) {
		rc = -EBUSY; /* corrupt chain: leave it to the checker */
		goto out;
	}
	st = pmc_load64(&d->state) & 0xff;
	if (st == PMC_BLK_LOST && !pmc_desc_live(c, d)) {
		/* a stale LOST block (its volume was removed or its disk
		 * replaced): unlinked, but its media is bad: retired */
		pmc_pmem_store8(c->pm, link, pmc_load64(&d->next));
		pmc_pmem_persist(c->pm, link, sizeof(*link));
		pmc_pmem_store8(c->pm, &d->state, PMC_BLK_BAD);
		pmc_pmem_flush(c->pm, &d->state, sizeof(uint64_t));
		rc = -EBUSY;
		goto out;
	}
	if (pmc_desc_live(c, d)) {
		if (st == PMC_BLK_DIRTY)
			pmc_dirty_mark(c, blk, 1); /* pass it by from now on */
		if (st != PMC_BLK_CLEAN || mode == PMC_ALLOC_FREE || pmc_cache_pins(c, blk) != 1) {
			rc = -EBUSY;
			goto out;
		}
		if (pmc_load64(&d->hint) & PMC_HINT_REFERENCED) {
			__atomic_fetch_and(&d->hint, ~PMC_HINT_REFERENCED, __ATOMIC_RELAXED);
			rc = -EBUSY;
			goto out;
		}
		pmc_count_adj(c, s, vol, PMC_BLK_CLEAN, -1);
		atomic_fetch_add(&c->evictions, 1);
	}
	/* crash point reclaim.unlink: live clean (evicted) or stale, unlinked
	 * durably before the caller may overwrite the data. FREE is not
	 * flushed (as publish.free_old, index.c): an unlinked block whose
	 * FREE store did not reach the media is an orphan, whose data nobody
	 * reads, and the publish that reuses the block stores and flushes
	 * its state anyway; a flush here made the unlock below wait for the
	 * line's write-back, once per evicted block */
	pmc_pmem_store8(c->pm, link, pmc_load64(&d->next));
	pmc_pmem_persist(c->pm, link, sizeof(*link));
	pmc_pmem_store8(c->pm, &d->state, PMC_BLK_FREE);
	rc = 0;
out:
	pthread_mutex_unlock(&c->stripe[s]);
	return rc;
}

/* blocks marked dirty from blk on, within its bitmap word (0 if blk is not) */
static uint64_t dirty_run(struct pmc_cache *c, uint64_t blk)
{
	uint64_t w = atomic_load_explicit(&c->dirty_map[blk / 64], memory_order_relaxed) >>
		     (blk % 64);

	return ~w ? (uint64_t)__builtin_ctzll(~w) : 64 - blk % 64;
}

int pmc_cache_alloc(struct pmc_cache *c, int mode, uint64_t *blk)
{
	/* two sweeps: the first may only clear reference bits */
	uint64_t budget = mode == PMC_ALLOC_FILL ? PMC_ALLOC_FILL_LOOK : 2 * c->nr_blocks + 1;

	if (c->rdonly)
		return -EROFS;
	/* all dirty: no sweep can succeed (the common full-cache case) */
	if (atomic_load(&c->counts_valid) && atomic_load(&c->tot_dirty) >= (int64_t)c->nr_blocks)
		return -ENOSPC;
	while (budget) {
		uint64_t i = atomic_fetch_add(&c->hand, 1) % c->nr_blocks;
		uint64_t run = dirty_run(c, i);

		if (run) {
			/* a run of dirty blocks: move the hand past it at once */
			if (run > 1)
				atomic_fetch_add(&c->hand, run - 1);
			budget = budget > run ? budget - run : 0;
			continue;
		}
		budget--;
		/* second chance, decided before the claim, the stripe lock and
		 * the chain walk (most of what the hand meets under pressure):
		 * a clean block referenced since the hand last passed keeps its
		 * place. Only a skip, so an unpinned look at a hint is enough;
		 * a stale block so passed waits for the next sweep. A bit set
		 * after this look is seen by reclaim(). */
		if (mode != PMC_ALLOC_FREE &&
		    (pmc_load64(&c->descs[i].hint) & PMC_HINT_REFERENCED) &&
		    (pmc_load64(&c->descs[i].state) & 0xff) == PMC_BLK_CLEAN) {
			__atomic_fetch_and(&c->descs[i].hint, ~PMC_HINT_REFERENCED,
					   __ATOMIC_RELAXED);
			continue;
		}
		if (!claim(c, i))
			continue;
		if (pmc_test_alloc_claimed)
			pmc_test_alloc_claimed(c, i);
		/* The claim only says nobody pinned the block at that instant: a
		 * reader may have pinned it since, while it was still linked.
		 * Once it is known to be in no chain no new pin can appear, so
		 * ours must then be the only one. */
		if (((pmc_load64(&c->descs[i].state) & 0xff) == PMC_BLK_FREE ||
		     reclaim(c, i, mode) == 0) &&
		    pmc_cache_pins(c, i) == 1) {
			*blk = i;
			return 0;
		}
		pmc_cache_unpin(c, i);
	}
	return -ENOSPC;
}

int pmc_cache_dirty_rebuild(struct pmc_cache *c, uint64_t max)
{
	if (atomic_load(&c->dirty_map_complete))
		return 1;
	/* counted and none dirty: no block of the previous boot is left to
	 * mark (each block dirtied since is marked by its publish) */
	if (atomic_load(&c->counts_valid) && atomic_load(&c->tot_dirty) == 0) {
		atomic_store(&c->dirty_map_complete, 1);
		return 1;
	}
	while (max--) {
		uint64_t i = atomic_fetch_add(&c->rebuild_cursor, 1);
		struct pmc_desc *d;
		uint64_t lba, volgen, b, *link;
		uint32_t s;

		if (i >= c->nr_blocks) {
			atomic_store(&c->dirty_map_complete, 1);
			return 1;
		}
		d = &c->descs[i];
		if ((pmc_load64(&d->state) & 0xff) != PMC_BLK_DIRTY)
			continue;
		/* the key, word by word as publish stores it; then the state
		 * again under the key's stripe lock, where it changes */
		lba = __atomic_load_n(&d->lba, __ATOMIC_RELAXED);
		volgen = __atomic_load_n((uint64_t *)&d->vol, __ATOMIC_RELAXED);
		if ((uint32_t)volgen >= c->max_volumes)
			continue;
		b = pmc_index_bucket(c, (uint32_t)volgen, lba);
		s = pmc_stripe_of(c, b);
		pthread_mutex_lock(&c->stripe[s]);
		/* linked only: a DIRTY orphan (a crash lost the FREE store of an
		 * overwritten copy, FORMAT.md publish.free_old) marked would be
		 * passed by the allocator, and never forgotten by write-back,
		 * for ever; unmarked, the allocator reclaims it */
		if ((pmc_load64(&d->state) & 0xff) == PMC_BLK_DIRTY && d->lba == lba &&
		    d->vol == (uint32_t)volgen && pmc_desc_live(c, d) &&
		    pmc_index_find_blk_locked(c, b, i, &link) == 0)
			pmc_dirty_mark(c, i, 1);
		pthread_mutex_unlock(&c->stripe[s]);
	}
	return 0;
}

int pmc_cache_dirty_next(struct pmc_cache *c, uint64_t from, uint64_t *blk)
{
	for (uint64_t w = from / 64; w * 64 < c->nr_blocks; w++) {
		uint64_t bits = atomic_load_explicit(&c->dirty_map[w], memory_order_relaxed);

		if (w == from / 64)
			bits &= ~0ull << (from % 64);
		if (bits) {
			*blk = w * 64 + (uint64_t)__builtin_ctzll(bits);
			return *blk < c->nr_blocks ? 0 : -ENOENT;
		}
	}
	return -ENOENT;
}

void pmc_cache_dirty_forget(struct pmc_cache *c, uint64_t blk)
{
	struct pmc_desc *d = &c->descs[blk];
	uint64_t lba, b, *link;
	uint32_t vol, s;

	if (c->rdonly)
		return;
	/* claimed, so that nobody allocates and publishes it under a new
	 * key (and marks it) while its old key is checked here; a pinned
	 * block keeps its mark (looked at again in a later pass) */
	if (!claim(c, blk))
		return;
	lba = __atomic_load_n(&d->lba, __ATOMIC_RELAXED);
	vol = __atomic_load_n(&d->vol, __ATOMIC_RELAXED);
	if (vol >= c->max_volumes) {
		pmc_dirty_mark(c, blk, 0);
		pmc_cache_unpin(c, blk);
		return;
	}
	b = pmc_index_bucket(c, vol, lba);
	s = pmc_stripe_of(c, b);
	pthread_mutex_lock(&c->stripe[s]);
	/* only if it is not (or no longer) the live dirty copy of its key */
	if (pmc_index_find_blk_locked(c, b, blk, &link) != 0 || !pmc_desc_live(c, d) ||
	    (pmc_load64(&d->state) & 0xff) != PMC_BLK_DIRTY)
		pmc_dirty_mark(c, blk, 0);
	pthread_mutex_unlock(&c->stripe[s]);
	pmc_cache_unpin(c, blk);
}

void *pmc_cache_block_data(struct pmc_cache *c, uint64_t blk)
{
	return c->data + blk * c->block_size;
}
