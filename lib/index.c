/* index.c - the pmem index from (volume, LBA) to cache blocks.
 *
 * A power-of-two array of buckets, each the head of a singly linked chain
 * threaded through the descriptors' next words (block + 1; 0 ends). Every
 * change to a chain is one aligned 8-byte store (a bucket or a next word),
 * so the index is consistent after a power cut at any instant and recovery
 * has nothing to replay. Lookups are O(1): a hash and a short chain walk.
 *
 * A descriptor in a chain is "live" when its state is clean or dirty and its
 * volume slot is active with the generation it records; anything else in a
 * chain (a removed volume's block) is stale, ignored by lookups and
 * unlinked by the allocator when it comes by.
 *
 * Locking: bucket b is guarded by stripe[b % nr_stripes]. Every chain store
 * is persisted before that lock is released, so whoever next takes it sees
 * a durable chain: no thread can act on an unlink that a power cut could
 * still undo. Pins are taken under the same lock as the lookup that found
 * the block, so eviction (which holds it too) sees every pin.
 */
#include <errno.h>
#include <string.h>

#include "cache_internal.h"

/* splitmix64 finaliser over the key */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t pmc_index_bucket(const struct pmc_cache *c, uint32_t vol, uint64_t lba)
{
	return mix64(lba * 0x9e3779b97f4a7c15ull ^ ((uint64_t)vol << 52 | vol)) & c->bucket_mask;
}

int pmc_desc_live(const struct pmc_cache *c, const struct pmc_desc *d)
{
	uint64_t st = pmc_load64(&d->state) & 0xff;
	uint64_t gs;

	if (st != PMC_BLK_CLEAN && st != PMC_BLK_DIRTY && st != PMC_BLK_LOST)
		return 0;
	if (d->vol >= c->max_volumes)
		return 0;
	gs = pmc_load64(&c->vols[d->vol].gen_state);
	return PMC_VOL_STATE(gs) == PMC_VOL_ACTIVE && (uint32_t)PMC_VOL_GEN(gs) == d->vol_gen;
}

void pmc_count_adj(struct pmc_cache *c, uint32_t stripe, uint32_t vol, uint64_t state, int delta)
{
	if (!c->counted[stripe] || vol >= c->max_volumes)
		return;
	if (state == PMC_BLK_DIRTY) {
		atomic_fetch_add(&c->vrt[vol].nr_dirty, delta);
		atomic_fetch_add(&c->tot_dirty, delta);
	}
	else if (state == PMC_BLK_CLEAN)
		atomic_fetch_add(&c->vrt[vol].nr_clean, delta);
	else if (state == PMC_BLK_LOST)
		atomic_fetch_add(&c->vrt[vol].nr_lost, delta);
}

/*
 * Walk bucket b. With target != PMC_BLK_NONE find that block physically;
 * otherwise find the live block of (vol, lba). On success *link is the word
 * that points at it and *blk the block. -ENOENT when absent, -EUCLEAN when
 * the chain leaves the table or loops (media corruption).
 */
static int chain_walk(struct pmc_cache *c, uint64_t b, uint32_t vol, uint64_t lba,
		      uint64_t target, uint64_t **link, uint64_t *blk)
{
	uint64_t *l = &c->buckets[b];
	uint64_t steps = 0;

	for (;;) {
		uint64_t v = pmc_load64(l);
		struct pmc_desc *d;

		if (v == 0)
			return -ENOENT;
		if (v > c->nr_blocks || ++steps > c->nr_blocks)
			return -EUCLEAN;
		d = &c->descs[v - 1];
		if (target != PMC_BLK_NONE ? v - 1 == target
					   : d->lba == lba && d->vol == vol && pmc_desc_live(c, d)) {
			*link = l;
			*blk = v - 1;
			return 0;
		}
		l = &d->next;
	}
}

/* the n buckets b[] and the descriptors at their chains' heads into the
 * CPU cache: two rounds, each of independent loads, rather than two
 * dependent misses per bucket (the heads are read without the stripe
 * lock: a stale one only fetches a line for nothing) */
static void prefetch_chains(const struct pmc_cache *c, const uint64_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		__builtin_prefetch(&c->buckets[b[i]]);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t v = pmc_load64(&c->buckets[b[i]]);

		if (v && v <= c->nr_blocks)
			__builtin_prefetch(&c->descs[v - 1]);
	}
}

void pmc_cache_prefetch(const struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n)
{
	enum { WINDOW = 32 };
	uint64_t b[WINDOW];

	if (n > WINDOW)
		n = WINDOW;
	for (uint32_t i = 0; i < n; i++)
		b[i] = pmc_index_bucket(c, vol, lba + i);
	prefetch_chains(c, b, n);
}

int pmc_index_find_blk_locked(struct pmc_cache *c, uint64_t b, uint64_t target, uint64_t **link)
{
	uint64_t blk;

	return chain_walk(c, b, 0, 0, target, link, &blk);
}

static void set_referenced(struct pmc_cache *c, uint64_t blk)
{
	uint64_t *h = &c->descs[blk].hint;

	if (!c->rdonly && !(pmc_load64(h) & PMC_HINT_REFERENCED))
		__atomic_fetch_or(h, PMC_HINT_REFERENCED, __ATOMIC_RELAXED);
}

/*
 * The old copy of a key, unlinked durably: FREE, or BAD if its media
 * failed (LOST). FREE is not flushed: an unlinked block whose FREE store
 * did not reach the media is an orphan, which the allocator reclaims
 * anyway (FORMAT.md), and a flush here would make the next atomic
 * instruction wait for its write-back (locked instructions order CLWB and
 * CLFLUSHOPT on x86). BAD is flushed: a bad block must never be reused.
 */
static void retire_old(struct pmc_cache *c, uint64_t old, uint64_t ost)
{
	uint64_t *st = &c->descs[old].state;

	if (ost == PMC_BLK_LOST) {
		pmc_pmem_store8(c->pm, st, PMC_BLK_BAD);
		pmc_pmem_flush(c->pm, st, sizeof(uint64_t));
	} else {
		pmc_pmem_store8(c->pm, st, PMC_BLK_FREE);
	}
}

int pmc_cache_lookup_pin(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t *blk,
			 enum pmc_block_state *state)
{
	uint64_t b = pmc_index_bucket(c, vol, lba);
	uint32_t s = pmc_stripe_of(c, b);
	uint64_t *link;
	int rc;

	pthread_mutex_lock(&c->stripe[s]);
	rc = chain_walk(c, b, vol, lba, PMC_BLK_NONE, &link, blk);
	if (rc == 0) {
		pmc_pin_locked(c, *blk);
		set_referenced(c, *blk);
		if (state)
			*state = (enum pmc_block_state)(pmc_load64(&c->descs[*blk].state) & 0xff);
	}
	pthread_mutex_unlock(&c->stripe[s]);
	return rc;
}

uint32_t pmc_cache_fill_seq(struct pmc_cache *c, uint32_t vol, uint64_t lba)
{
	return atomic_load(&c->fill_seq[pmc_stripe_of(c, pmc_index_bucket(c, vol, lba))]);
}

/* fill: 0 for a write (replace any copy), 1 for a fill (only if absent and
 * the stripe's sequence still equals snap) */
static int publish(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
		   enum pmc_block_state state, int fill, uint32_t snap)
{
	struct pmc_pmem *pm = c->pm;
	struct pmc_desc *d = &c->descs[blk];
	struct pmc_desc img = {0};
	uint64_t b, gs, old, next, *link;
	uint32_t s;
	int rc;

	if (c->rdonly)
		return -EROFS;
	PMC_BUG_ON(blk >= c->nr_blocks || pmc_cache_pins(c, blk) == 0,
		   "publish of block %llu that the caller does not pin", (unsigned long long)blk);
	PMC_BUG_ON(state != PMC_BLK_CLEAN && state != PMC_BLK_DIRTY, "publish in state %d", state);
	if (vol >= c->max_volumes)
		return -EINVAL;
	gs = pmc_load64(&c->vols[vol].gen_state);
	if (PMC_VOL_STATE(gs) != PMC_VOL_ACTIVE)
		return -ESTALE;

	/* step 1 (crash point publish.desc): data and descriptor, unlinked */
	img.lba = lba;
	img.vol = vol;
	img.vol_gen = (uint32_t)PMC_VOL_GEN(gs);
	img.birth_ns = pmc_now_ns();
	img.csum = pmc_desc_csum(&img);
	pmc_pmem_flush(pm, c->data + blk * c->block_size, c->block_size);
	/* word by word: scanners read the key with atomic loads */
	for (unsigned w = 0; w < offsetof(struct pmc_desc, state) / 8; w++)
		pmc_pmem_store8(pm, (uint64_t *)d + w, ((uint64_t *)&img)[w]);
	pmc_pmem_store8(pm, &d->state, state);

	b = pmc_index_bucket(c, vol, lba);
	s = pmc_stripe_of(c, b);
	pthread_mutex_lock(&c->stripe[s]);
	rc = chain_walk(c, b, vol, lba, PMC_BLK_NONE, &link, &old);
	if (fill && (rc == 0 || atomic_load(&c->fill_seq[s]) != snap)) {
		pthread_mutex_unlock(&c->stripe[s]);
		return rc == 0 ? -EEXIST : -ESTALE;
	}
	if (rc == -ENOENT) {
		old = PMC_BLK_NONE;
		link = &c->buckets[b];
		next = pmc_load64(link);
	} else if (rc == 0) {
		next = pmc_load64(&c->descs[old].next);
	} else {
		pthread_mutex_unlock(&c->stripe[s]);
		return rc;
	}
	pmc_pmem_store8(pm, &d->next, next);
	pmc_pmem_flush(pm, d, offsetof(struct pmc_desc, ref));
	pmc_pmem_drain(pm);

	/* step 2 (crash point publish.link): one store swaps old for new */
	pmc_pmem_store8(pm, link, blk + 1);
	pmc_pmem_persist(pm, link, sizeof(*link));

	/* step 3 (crash point publish.free_old): the old copy is unlinked and
	 * durable; FREE only spares the allocator a chain walk */
	if (old != PMC_BLK_NONE) {
		uint64_t ost = pmc_load64(&c->descs[old].state) & 0xff;

		/* the mark first: once FREE, the block may be taken and
		 * published dirty for another key, whose mark a late clear
		 * would wipe (write-back would never find it) */
		pmc_dirty_mark(c, old, 0);
		retire_old(c, old, ost);
		pmc_count_adj(c, s, vol, ost, -1);
	}
	pmc_count_adj(c, s, vol, state, +1);
	pmc_dirty_mark(c, blk, state == PMC_BLK_DIRTY);
	__atomic_store_n(&d->hint, PMC_HINT_REFERENCED, __ATOMIC_RELAXED);
	atomic_fetch_add(&c->fill_seq[s], 1);
	pthread_mutex_unlock(&c->stripe[s]);
	return 0;
}

int pmc_cache_publish(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
		      enum pmc_block_state state)
{
	return publish(c, vol, lba, blk, state, 0, 0);
}

int pmc_cache_publish_fill(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
			   uint32_t snap)
{
	return publish(c, vol, lba, blk, PMC_BLK_CLEAN, 1, snap);
}

int pmc_cache_mark_clean(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk)
{
	uint64_t b, cur, *link;
	uint32_t s;
	int rc;

	if (c->rdonly)
		return -EROFS;
	b = pmc_index_bucket(c, vol, lba);
	s = pmc_stripe_of(c, b);
	pthread_mutex_lock(&c->stripe[s]);
	rc = chain_walk(c, b, vol, lba, PMC_BLK_NONE, &link, &cur);
	if (rc == 0 && cur == blk && (pmc_load64(&c->descs[blk].state) & 0xff) == PMC_BLK_DIRTY) {
		/* crash point clean.state: one store */
		pmc_pmem_store8(c->pm, &c->descs[blk].state, PMC_BLK_CLEAN);
		pmc_pmem_persist(c->pm, &c->descs[blk].state, sizeof(uint64_t));
		pmc_count_adj(c, s, vol, PMC_BLK_DIRTY, -1);
		pmc_count_adj(c, s, vol, PMC_BLK_CLEAN, +1);
		pmc_dirty_mark(c, blk, 0);
	} else if (rc == 0 || rc == -ENOENT) {
		rc = -ESTALE;
	}
	pthread_mutex_unlock(&c->stripe[s]);
	return rc;
}

void pmc_stripes_lock(struct pmc_cache *c, struct pmc_stripe_set *set)
{
	if (set->n <= 8) {
		/* a few: insertion sort, drop repeats */
		unsigned m = 0;

		for (unsigned i = 0; i < set->n; i++) {
			uint32_t v = set->s[i];
			unsigned k = m;

			for (; k && set->s[k - 1] > v; k--)
				set->s[k] = set->s[k - 1];
			if (k && set->s[k - 1] == v) {
				memmove(&set->s[k], &set->s[k + 1], (m - k) * sizeof(set->s[0]));
				continue;
			}
			set->s[k] = v;
			m++;
		}
		set->n = m;
		for (unsigned i = 0; i < m; i++)
			pthread_mutex_lock(&c->stripe[set->s[i]]);
		return;
	}
	/* many: a bitmap sorts and dedupes them in O(stripes / 64) */
	memset(set->map, 0, (c->nr_stripes + 63) / 64 * sizeof(set->map[0]));
	for (unsigned i = 0; i < set->n; i++)
		set->map[set->s[i] / 64] |= 1ull << (set->s[i] % 64);
	set->n = UINT32_MAX; /* unlock by the map */
	for (uint32_t w = 0; w < (c->nr_stripes + 63) / 64; w++)
		for (uint64_t m = set->map[w]; m; m &= m - 1)
			pthread_mutex_lock(&c->stripe[w * 64 + (uint32_t)__builtin_ctzll(m)]);
}

void pmc_stripes_unlock(struct pmc_cache *c, struct pmc_stripe_set *set)
{
	if (set->n != UINT32_MAX) {
		for (unsigned i = set->n; i-- > 0;)
			pthread_mutex_unlock(&c->stripe[set->s[i]]);
		return;
	}
	for (uint32_t w = 0; w < (c->nr_stripes + 63) / 64; w++)
		for (uint64_t m = set->map[w]; m; m &= m - 1)
			pthread_mutex_unlock(&c->stripe[w * 64 + (uint32_t)__builtin_ctzll(m)]);
}

/*
 * Publish blocks [0, n) of one batch: n <= PMC_BATCH_MAX and no two keys in
 * one bucket (each block's successor is chosen before any of them is
 * linked). Holds every stripe lock of the batch from the first descriptor
 * store to the last FREE store, so no thread acts on a link that a power
 * cut could still undo (FORMAT.md, "New write and overwrite").
 */
static void publish_batch(struct pmc_cache *c, uint32_t vol, uint32_t gen, const uint64_t *lba,
			  const uint64_t *blk, uint32_t n, enum pmc_block_state state, int fill,
			  const uint32_t *snap, int *res, const uint64_t *bucket)
{
	struct pmc_pmem *pm = c->pm;
	struct pmc_stripe_set set;
	uint64_t *link[PMC_BATCH_MAX], old[PMC_BATCH_MAX];
	uint64_t birth = pmc_now_ns();
	int linked = 0;

	/* the new descriptors, the chains' first words and descriptors,
	 * fetched together rather than one cache miss after the other */
	for (uint32_t i = 0; i < n; i++)
		__builtin_prefetch(&c->descs[blk[i]], 1);
	prefetch_chains(c, bucket, n);
	set.n = n;
	for (uint32_t i = 0; i < n; i++)
		set.s[i] = pmc_stripe_of(c, bucket[i]);
	pmc_stripes_lock(c, &set);
	/* step 1 (crash point publish.desc): every descriptor, unlinked, then
	 * one drain; the data was flushed by the caller */
	for (uint32_t i = 0; i < n; i++) {
		struct pmc_desc *d = &c->descs[blk[i]];
		uint32_t s = pmc_stripe_of(c, bucket[i]);
		struct pmc_desc img = {0};
		uint64_t next;
		int rc;

		rc = chain_walk(c, bucket[i], vol, lba[i], PMC_BLK_NONE, &link[i], &old[i]);
		if (fill && (rc == 0 || atomic_load(&c->fill_seq[s]) != snap[i]))
			rc = rc == 0 ? -EEXIST : -ESTALE;
		else if (rc == -ENOENT)
			rc = 0, old[i] = PMC_BLK_NONE, link[i] = &c->buckets[bucket[i]];
		res[i] = rc;
		if (rc)
			continue;
		next = old[i] == PMC_BLK_NONE ? pmc_load64(link[i]) : pmc_load64(&c->descs[old[i]].next);
		img.lba = lba[i];
		img.vol = vol;
		img.vol_gen = gen;
		img.birth_ns = birth;
		img.csum = pmc_desc_csum(&img);
		/* word by word: scanners read the key with atomic loads */
		for (unsigned w = 0; w < offsetof(struct pmc_desc, state) / 8; w++)
			pmc_pmem_store8(pm, (uint64_t *)d + w, ((uint64_t *)&img)[w]);
		pmc_pmem_store8(pm, &d->state, state);
		pmc_pmem_store8(pm, &d->next, next);
		pmc_pmem_flush(pm, d, offsetof(struct pmc_desc, ref));
		linked++;
	}
	if (linked) {
		pmc_pmem_drain(pm);
		/* step 2 (crash point publish.link): one store per block swaps its
		 * old copy for the new one; one drain for all */
		for (uint32_t i = 0; i < n; i++) {
			if (res[i])
				continue;
			pmc_pmem_store8(pm, link[i], blk[i] + 1);
			pmc_pmem_flush(pm, link[i], sizeof(uint64_t));
		}
		pmc_pmem_drain(pm);
	}
	/* step 3 (crash point publish.free_old): old copies FREE, no flush */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = pmc_stripe_of(c, bucket[i]);

		if (res[i])
			continue;
		if (old[i] != PMC_BLK_NONE) {
			uint64_t ost = pmc_load64(&c->descs[old[i]].state) & 0xff;

			pmc_dirty_mark(c, old[i], 0); /* before FREE: see publish() */
			retire_old(c, old[i], ost);
			pmc_count_adj(c, s, vol, ost, -1);
		}
		pmc_count_adj(c, s, vol, state, +1);
		pmc_dirty_mark(c, blk[i], state == PMC_BLK_DIRTY);
		__atomic_store_n(&c->descs[blk[i]].hint, PMC_HINT_REFERENCED, __ATOMIC_RELAXED);
		atomic_fetch_add(&c->fill_seq[s], 1);
	}
	pmc_stripes_unlock(c, &set);
}

int pmc_cache_publish_n(struct pmc_cache *c, uint32_t vol, const uint64_t *lba,
			const uint64_t *blk, uint32_t n, enum pmc_block_state state,
			const uint32_t *snap, int *res)
{
	uint64_t gs;
	uint32_t start = 0;

	if (c->rdonly)
		return -EROFS;
	PMC_BUG_ON(state != PMC_BLK_CLEAN && state != PMC_BLK_DIRTY, "publish in state %d", state);
	for (uint32_t i = 0; i < n; i++)
		PMC_BUG_ON(blk[i] >= c->nr_blocks || pmc_cache_pins(c, blk[i]) == 0,
			   "publish of block %llu that the caller does not pin",
			   (unsigned long long)blk[i]);
	if (vol >= c->max_volumes)
		return -EINVAL;
	gs = pmc_load64(&c->vols[vol].gen_state);
	if (PMC_VOL_STATE(gs) != PMC_VOL_ACTIVE)
		return -ESTALE;
	/* batches of at most PMC_BATCH_MAX keys, none sharing a bucket: a
	 * 4096-bit filter over the buckets finds the candidates to compare */
	while (start < n) {
		uint64_t seen[64] = {0}, bk[PMC_BATCH_MAX];
		uint32_t end = start;

		while (end < n && end - start < PMC_BATCH_MAX) {
			uint64_t b = pmc_index_bucket(c, vol, lba[end]);
			uint32_t f = (uint32_t)(b % 4096), k = end;

			if (seen[f / 64] & (1ull << (f % 64)))
				for (k = start; k < end && bk[k - start] != b; k++)
					;
			if (k < end)
				break;
			seen[f / 64] |= 1ull << (f % 64);
			bk[end - start] = b;
			end++;
		}
		publish_batch(c, vol, (uint32_t)PMC_VOL_GEN(gs), lba + start, blk + start, end - start,
			      state, snap != NULL, snap ? snap + start : NULL, res + start, bk);
		start = end;
	}
	return 0;
}

int pmc_cache_publish_range(struct pmc_cache *c, uint32_t vol, uint64_t lba, const uint64_t *blk,
			    uint32_t n, enum pmc_block_state state, int *res)
{
	uint64_t lbas[PMC_BATCH_MAX];
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i += PMC_BATCH_MAX) {
		uint32_t m = n - i < PMC_BATCH_MAX ? n - i : PMC_BATCH_MAX;

		for (uint32_t k = 0; k < m; k++)
			lbas[k] = lba + i + k;
		rc = pmc_cache_publish_n(c, vol, lbas, blk + i, m, state, NULL, res + i);
	}
	return rc;
}

int pmc_cache_mark_clean_range(struct pmc_cache *c, uint32_t vol, uint64_t lba, const uint64_t *blk,
			       uint32_t n, int *res)
{
	uint64_t lbas[PMC_BATCH_MAX];
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i += PMC_BATCH_MAX) {
		uint32_t m = n - i < PMC_BATCH_MAX ? n - i : PMC_BATCH_MAX;

		for (uint32_t k = 0; k < m; k++)
			lbas[k] = lba + i + k;
		rc = pmc_cache_mark_clean_n(c, vol, lbas, blk + i, m, res + i);
	}
	return rc;
}

int pmc_cache_mark_clean_n(struct pmc_cache *c, uint32_t vol, const uint64_t *lba,
			   const uint64_t *blk, uint32_t n, int *res)
{
	if (c->rdonly)
		return -EROFS;
	for (uint32_t start = 0; start < n; start += PMC_BATCH_MAX) {
		uint32_t m = n - start < PMC_BATCH_MAX ? n - start : PMC_BATCH_MAX;
		struct pmc_stripe_set set;
		uint64_t b[PMC_BATCH_MAX];
		int stored = 0;

		set.n = m;
		for (uint32_t i = 0; i < m; i++) {
			b[i] = pmc_index_bucket(c, vol, lba[start + i]);
			set.s[i] = pmc_stripe_of(c, b[i]);
		}
		pmc_stripes_lock(c, &set);
		/* crash point clean.state: one store per block, one drain */
		for (uint32_t i = 0; i < m; i++) {
			uint64_t cur, *link, x = blk[start + i];
			int rc = chain_walk(c, b[i], vol, lba[start + i], PMC_BLK_NONE, &link, &cur);

			if (rc == 0 && cur == x &&
			    (pmc_load64(&c->descs[x].state) & 0xff) == PMC_BLK_DIRTY) {
				pmc_pmem_store8(c->pm, &c->descs[x].state, PMC_BLK_CLEAN);
				pmc_pmem_flush(c->pm, &c->descs[x].state, sizeof(uint64_t));
				stored = 1;
			} else if (rc == 0 || rc == -ENOENT) {
				rc = -ESTALE;
			}
			res[start + i] = rc;
		}
		if (stored)
			pmc_pmem_drain(c->pm);
		for (uint32_t i = 0; i < m; i++) {
			uint32_t s = pmc_stripe_of(c, b[i]);

			if (res[start + i])
				continue;
			pmc_count_adj(c, s, vol, PMC_BLK_DIRTY, -1);
			pmc_count_adj(c, s, vol, PMC_BLK_CLEAN, +1);
			pmc_dirty_mark(c, blk[start + i], 0);
		}
		pmc_stripes_unlock(c, &set);
	}
	return 0;
}

/*
 * Unlink the live copies of up to PMC_BATCH_MAX keys of one volume under
 * their stripe locks: every unlink, one drain, then the FREE stores
 * (FORMAT.md, "Invalidate / discard"). Keys sharing a bucket are fine:
 * each walk sees the unlinks before it. With keep_dirty, a DIRTY copy
 * stays linked and kept[i] (if kept) names it, else PMC_BLK_NONE; so does
 * a LOST one (its EIO stands for an acknowledged write until the data
 * that replaces it is durable): decided
 * under the same lock as the unlinks, so no copy turns DIRTY between look
 * and drop.
 */
static int invalidate_batch(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n,
			    int keep_dirty, uint64_t *kept)
{
	struct pmc_stripe_set set;
	uint64_t b[PMC_BATCH_MAX], gone[PMC_BATCH_MAX];
	int rc = 0, unlinked = 0;

	set.n = n;
	for (uint32_t i = 0; i < n; i++) {
		b[i] = pmc_index_bucket(c, vol, lba + i);
		set.s[i] = pmc_stripe_of(c, b[i]);
	}
	pmc_stripes_lock(c, &set);
	/* crash point invalidate.unlink: one store per key, one drain */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t blk, *link;
		int r = chain_walk(c, b[i], vol, lba + i, PMC_BLK_NONE, &link, &blk);

		gone[i] = PMC_BLK_NONE;
		if (kept)
			kept[i] = PMC_BLK_NONE;
		if (r == 0 && keep_dirty &&
		    ((pmc_load64(&c->descs[blk].state) & 0xff) == PMC_BLK_DIRTY ||
		     (pmc_load64(&c->descs[blk].state) & 0xff) == PMC_BLK_LOST)) {
			if (kept)
				kept[i] = blk;
		} else if (r == 0) {
			pmc_pmem_store8(c->pm, link, pmc_load64(&c->descs[blk].next));
			pmc_pmem_flush(c->pm, link, sizeof(*link));
			gone[i] = blk;
			unlinked = 1;
		} else if (r != -ENOENT && !rc) {
			rc = r;
		}
	}
	if (unlinked)
		pmc_pmem_drain(c->pm);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = pmc_stripe_of(c, b[i]);

		if (gone[i] != PMC_BLK_NONE) {
			struct pmc_desc *d = &c->descs[gone[i]];
			uint64_t st = pmc_load64(&d->state) & 0xff;

			pmc_dirty_mark(c, gone[i], 0); /* before FREE: see publish() */
			retire_old(c, gone[i], st);
			pmc_count_adj(c, s, vol, st, -1);
		}
		/* even when nothing was cached: a fill in flight must not land */
		atomic_fetch_add(&c->fill_seq[s], 1);
	}
	pmc_stripes_unlock(c, &set);
	return rc;
}

static int invalidate_range(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks,
			    int keep_dirty, uint64_t *kept)
{
	int rc = 0;

	for (uint32_t i = 0; kept && i < nblocks; i++)
		kept[i] = PMC_BLK_NONE;
	if (c->rdonly)
		return -EROFS;
	for (uint32_t i = 0; i < nblocks && rc == 0; i += PMC_BATCH_MAX)
		rc = invalidate_batch(c, vol, lba + i,
				      nblocks - i < PMC_BATCH_MAX ? nblocks - i : PMC_BATCH_MAX,
				      keep_dirty, kept ? kept + i : NULL);
	return rc;
}

int pmc_cache_invalidate(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks)
{
	return invalidate_range(c, vol, lba, nblocks, 0, NULL);
}

int pmc_cache_invalidate_clean(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks,
			       uint64_t *kept)
{
	return invalidate_range(c, vol, lba, nblocks, 1, kept);
}

void pmc_cache_recount(struct pmc_cache *c)
{
	/* a sound index links each block at most once: more steps than blocks
	 * means a corrupt (looping) chain; stop walking chains then */
	uint64_t budget = c->nr_blocks;

	for (uint32_t s = 0; s < c->nr_stripes; s++) {
		pthread_mutex_lock(&c->stripe[s]);
		if (!c->counted[s]) {
			for (uint64_t b = s; b <= c->bucket_mask; b += c->nr_stripes) {
				uint64_t v = pmc_load64(&c->buckets[b]), steps = 0;

				while (v && v <= c->nr_blocks && ++steps <= c->nr_blocks && budget) {
					budget--;
					struct pmc_desc *d = &c->descs[v - 1];

					if (pmc_desc_live(c, d)) {
						uint64_t st = pmc_load64(&d->state) & 0xff;

						if (st == PMC_BLK_DIRTY) {
							atomic_fetch_add(&c->vrt[d->vol].nr_dirty, 1);
							atomic_fetch_add(&c->tot_dirty, 1);
						}
						else if (st == PMC_BLK_CLEAN)
							atomic_fetch_add(&c->vrt[d->vol].nr_clean, 1);
						else if (st == PMC_BLK_LOST)
							atomic_fetch_add(&c->vrt[d->vol].nr_lost, 1);
					}
					v = pmc_load64(&d->next);
				}
			}
			c->counted[s] = 1;
		}
		pthread_mutex_unlock(&c->stripe[s]);
	}
	atomic_store(&c->counts_valid, 1);
}
