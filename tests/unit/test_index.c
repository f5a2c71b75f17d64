/* test_index.c - the cache-level API on a file-backed pmem: writes, reads,
 * overwrites, invalidation, write-back marking, eviction, pins, volume
 * references and removal, counters across clean and crash restarts. */
#include <errno.h>
#include <unistd.h>

#include "cache.h"
#include "cache_internal.h"
#include "check.h"
#include "t.h"

#define BS 4096

static struct pmc_err err;

static void fill(char *b, uint64_t tag)
{
	for (int i = 0; i < BS / 8; i++)
		((uint64_t *)b)[i] = tag * 1000003 + (uint64_t)i;
}

static void check(struct pmc_cache *c)
{
	struct pmc_check_report rep;

	T_OK(pmc_cache_check(c, &rep, &err));
}

static void expect(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t tag)
{
	char want[BS], got[BS];
	uint8_t hit = 9;

	fill(want, tag);
	T_EQ(pmc_cache_read(c, vol, lba, 1, got, &hit), 1);
	T_EQ(hit, 1);
	if (memcmp(want, got, BS))
		T_FAIL("vol %u lba %llu: data differs from tag %llu", vol, (unsigned long long)lba,
		       (unsigned long long)tag);
}

static void expect_miss(struct pmc_cache *c, uint32_t vol, uint64_t lba)
{
	char got[BS];
	uint8_t hit = 9;

	T_EQ(pmc_cache_read(c, vol, lba, 1, got, &hit), 0);
	T_EQ(hit, 0);
}

/* a new cache on a 3.25 MiB file in TMPDIR (or /tmp), named NAME.PID (its
 * path in path) */
static struct pmc_cache *new_cache(char *path, size_t len, const char *name, uint32_t max_volumes,
				   struct pmc_pmem **pm)
{
	struct pmc_cache *c;

	snprintf(path, len, "%s/%s.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name,
		 getpid());
	unlink(path);
	T_OK(pmc_pmem_open(path, (2u << 20) + 64 * BS + (1u << 20), pm, &err));
	T_OK(pmc_cache_format(*pm, &(struct pmc_format_opts){.max_volumes = max_volumes}, &err));
	T_OK(pmc_cache_open(*pm, 0, &c, &err));
	return c;
}

/*
 * Second chance (CLOCK): a clean block looked up since the hand last
 * passed it is evicted after every other clean block, then like any
 * other. On a cache of its own: all clean, reference bits cleared, one
 * block looked up; new dirty writes evict the others first.
 */
static void second_chance(void)
{
	char path[256], buf[BS];
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	struct pmc_volume_info vi;
	uint64_t n, blk, keep;
	uint32_t v;
	enum pmc_block_state st;

	c = new_cache(path, sizeof(path), "pmc-test-index-clock", 2, &pm);
	pmc_cache_get_info(c, &info);
	n = info.nr_blocks;
	T_OK(pmc_cache_volume_add(c, "clock", "/dev/nvme0n1", 4 * n * BS, &v, &err));
	for (uint64_t lba = 0; lba < n; lba++) {
		fill(buf, 9000 + lba);
		T_OK(pmc_cache_write(c, v, lba, 1, buf, &err));
		T_OK(pmc_cache_lookup_pin(c, v, lba, &blk, &st));
		T_OK(pmc_cache_mark_clean(c, v, lba, blk));
		pmc_cache_unpin(c, blk);
	}
	for (uint64_t x = 0; x < n; x++)
		c->descs[x].hint = 0;
	T_OK(pmc_cache_lookup_pin(c, v, 3, &keep, &st)); /* referenced */
	pmc_cache_unpin(c, keep);
	/* n - 1 new blocks: every clean block but the referenced one goes */
	for (uint64_t i = 0; i < n - 1; i++) {
		fill(buf, 20000 + i);
		T_OK(pmc_cache_write(c, v, n + i, 1, buf, &err));
	}
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_clean, 1);
	T_EQ(c->descs[keep].lba, 3);
	T_EQ(pmc_load64(&c->descs[keep].state) & 0xff, PMC_BLK_CLEAN);
	/* its bit was spent: the next new block takes it */
	fill(buf, 30000);
	T_OK(pmc_cache_write(c, v, 2 * n, 1, buf, &err));
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_clean, 0);
	expect_miss(c, v, 3);
	check(c);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	unlink(path);
	printf("ok: second chance: the referenced clean block is evicted last of %llu\n",
	       (unsigned long long)n);
}

int main(void)
{
	char path[256], buf[4 * BS];
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	struct pmc_volume_info vi;
	uint32_t a, b, a2;
	uint64_t blk, blk2, nblocks;
	enum pmc_block_state st;

	c = new_cache(path, sizeof(path), "pmc-test-index", 4, &pm);
	pmc_cache_get_info(c, &info);
	nblocks = info.nr_blocks;
	printf("ok: %llu blocks\n", (unsigned long long)nblocks);

	/* volumes: add, duplicates, bad names, lookup */
	T_OK(pmc_cache_volume_add(c, "alpha", "/dev/nvme0n1", 1024 * BS, &a, &err));
	T_OK(pmc_cache_volume_add(c, "beta", "/dev/nvme1n1", 1024 * BS, &b, &err));
	T_ERR(pmc_cache_volume_add(c, "alpha", "/dev/sdz", 1024 * BS, &a2, &err), EEXIST,
	      "volume alpha: already exists");
	T_ERR(pmc_cache_volume_add(c, "bad name", "/dev/sdz", 1024 * BS, &a2, &err), EINVAL,
	      "volume name 'bad name'");
	T_ERR(pmc_cache_volume_add(c, "odd", "/dev/sdz", 1000, &a2, &err), EINVAL,
	      "not a positive multiple of the block size");
	T_OK(pmc_cache_volume_find(c, "beta", &a2));
	T_EQ(a2, b);
	T_EQ(pmc_cache_volume_find(c, "gamma", &a2), -ENOENT);

	/* write, read back, same LBA on another volume, range checks */
	fill(buf, 1);
	fill(buf + BS, 2);
	T_OK(pmc_cache_write(c, a, 10, 2, buf, &err));
	fill(buf, 3);
	T_OK(pmc_cache_write(c, b, 10, 1, buf, &err));
	expect(c, a, 10, 1);
	expect(c, a, 11, 2);
	expect(c, b, 10, 3);
	expect_miss(c, a, 12);
	T_ERR(pmc_cache_write(c, a, 1023, 2, buf, &err), EINVAL, "beyond its end");
	T_EQ(pmc_cache_read(c, a, 1024, 1, buf, NULL), -EINVAL);

	/* overwrite replaces; the old block is freed; counters follow */
	T_OK(pmc_cache_lookup_pin(c, a, 10, &blk, &st));
	T_EQ(st, PMC_BLK_DIRTY);
	pmc_cache_unpin(c, blk);
	fill(buf, 4);
	T_OK(pmc_cache_write(c, a, 10, 1, buf, &err));
	expect(c, a, 10, 4);
	T_OK(pmc_cache_lookup_pin(c, a, 10, &blk2, &st));
	T_TRUE(blk2 != blk);
	pmc_cache_unpin(c, blk2);
	T_OK(pmc_cache_volume_info(c, a, &vi));
	T_EQ(vi.nr_dirty, 2);
	check(c);

	/* write-back: mark clean only the current copy */
	T_OK(pmc_cache_lookup_pin(c, a, 11, &blk, &st));
	T_OK(pmc_cache_mark_clean(c, a, 11, blk));
	T_EQ(pmc_cache_mark_clean(c, a, 11, blk), -ESTALE); /* already clean */
	pmc_cache_unpin(c, blk);
	T_OK(pmc_cache_lookup_pin(c, a, 10, &blk, &st));
	fill(buf, 5);
	T_OK(pmc_cache_write(c, a, 10, 1, buf, &err)); /* overwritten during "write-back" */
	T_EQ(pmc_cache_mark_clean(c, a, 10, blk), -ESTALE);
	pmc_cache_unpin(c, blk);
	T_OK(pmc_cache_volume_info(c, a, &vi));
	T_EQ(vi.nr_dirty, 1);
	T_EQ(vi.nr_clean, 1);

	/* invalidate drops clean and dirty copies */
	T_OK(pmc_cache_invalidate(c, a, 10, 2));
	expect_miss(c, a, 10);
	expect_miss(c, a, 11);
	T_OK(pmc_cache_volume_info(c, a, &vi));
	T_EQ(vi.nr_dirty + vi.nr_clean, 0);
	check(c);

	/* a pinned block is never reused, even after invalidation */
	fill(buf, 6);
	T_OK(pmc_cache_write(c, b, 20, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, b, 20, &blk, &st));
	T_OK(pmc_cache_invalidate(c, b, 20, 1));
	T_EQ(pmc_cache_pins(c, blk), 1);
	for (uint64_t i = 0; i < 3 * nblocks; i++) {
		uint64_t x;

		if (pmc_cache_alloc(c, PMC_ALLOC_EVICT, &x))
			break;
		T_TRUE(x != blk);
		pmc_cache_unpin(c, x);
	}
	fill(buf + BS, 6);
	if (memcmp(pmc_cache_block_data(c, blk), buf + BS, BS))
		T_FAIL("pinned block's data changed");
	pmc_cache_unpin(c, blk);
	T_EQ(pmc_cache_pins(c, blk), 0);

	/* a cache full of dirty data: -ENOSPC, nothing lost */
	T_OK(pmc_cache_invalidate(c, b, 10, 1));
	for (uint64_t lba = 0; lba < nblocks; lba++) {
		fill(buf, 100 + lba);
		if (pmc_cache_write(c, a, lba, 1, buf, &err))
			T_FAIL("filling block %llu of %llu: %s", (unsigned long long)lba,
			       (unsigned long long)nblocks, err.msg);
	}
	fill(buf, 999);
	T_ERR(pmc_cache_write(c, b, 500, 1, buf, &err), ENOSPC, "no free or clean cache block");
	for (uint64_t lba = 0; lba < nblocks; lba++)
		expect(c, a, lba, 100 + lba);
	check(c);

	/* clean blocks get evicted (CLOCK), dirty ones never */
	for (uint64_t lba = 0; lba < nblocks / 2; lba++) {
		T_OK(pmc_cache_lookup_pin(c, a, lba, &blk, &st));
		T_OK(pmc_cache_mark_clean(c, a, lba, blk));
		pmc_cache_unpin(c, blk);
	}
	for (uint64_t lba = 0; lba < nblocks / 2; lba++) {
		fill(buf, 5000 + lba);
		T_OK(pmc_cache_write(c, b, lba, 1, buf, &err));
	}
	for (uint64_t lba = nblocks / 2; lba < nblocks; lba++)
		expect(c, a, lba, 100 + lba);
	for (uint64_t lba = 0; lba < nblocks / 2; lba++)
		expect(c, b, lba, 5000 + lba);
	T_OK(pmc_cache_volume_info(c, a, &vi));
	T_EQ(vi.nr_clean, 0);
	check(c);

	/* volume references and removal */
	T_OK(pmc_cache_volume_get(c, b));
	T_ERR(pmc_cache_volume_remove(c, b, &err), EBUSY, "volume beta: 1 references held");
	pmc_cache_volume_put(c, b);
	T_ERR(pmc_cache_volume_remove(c, b, &err), EBUSY, "dirty blocks not yet written back");
	for (uint64_t lba = 0; lba < nblocks / 2; lba++) {
		T_OK(pmc_cache_lookup_pin(c, b, lba, &blk, &st));
		T_OK(pmc_cache_mark_clean(c, b, lba, blk));
		pmc_cache_unpin(c, blk);
	}
	T_OK(pmc_cache_volume_remove(c, b, &err));
	T_EQ(pmc_cache_volume_get(c, b), -ENOENT);
	T_ERR(pmc_cache_write(c, b, 0, 1, buf, &err), ENOENT, "no such volume");
	/* re-added under the same name: nothing of the old one shows */
	T_OK(pmc_cache_volume_add(c, "beta", "/dev/nvme1n1", 1024 * BS, &a2, &err));
	for (uint64_t lba = 0; lba < nblocks / 2; lba++)
		expect_miss(c, a2, lba);
	check(c);
	/* stale blocks are reclaimed by the allocator */
	for (uint64_t lba = 0; lba < nblocks / 2; lba++) {
		fill(buf, 7000 + lba);
		T_OK(pmc_cache_write(c, a2, lba, 1, buf, &err));
	}
	check(c);

	/* crash with a pin held: the next open voids it, counters recount */
	T_OK(pmc_cache_lookup_pin(c, a2, 0, &blk, &st));
	T_EQ(pmc_cache_pins(c, blk), 1);
	pmc_cache_abandon(c);
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_EQ(pmc_cache_pins(c, blk), 0);
	pmc_cache_get_info(c, &info);
	T_EQ(info.counts_valid, 0);
	pmc_cache_recount(c);
	T_OK(pmc_cache_volume_find(c, "beta", &a2));
	T_OK(pmc_cache_volume_info(c, a2, &vi));
	T_EQ(vi.nr_dirty, nblocks / 2);
	expect(c, a2, 0, 7000);
	expect(c, a, nblocks - 1, 100 + nblocks - 1);
	check(c);

	/* clean close: counters come back without a recount */
	pmc_cache_close(c);
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.was_clean, 1);
	T_EQ(info.counts_valid, 1);
	T_EQ(info.nr_dirty, nblocks);
	check(c);

	/* the dirty map: empty after an open, whole after the rebuild pass,
	 * and the allocator passes what it marks */
	{
		uint64_t n = 0, x, last = 0;
		int done = 0;

		for (x = 0; pmc_cache_dirty_next(c, x, &x) == 0; x++)
			n++;
		T_EQ(n, 0);
		for (int k = 0; k < 1000 && !done; k++)
			done = pmc_cache_dirty_rebuild(c, 7);
		T_EQ(done, 1);
		for (x = 0; pmc_cache_dirty_next(c, x, &x) == 0; x++)
			n++, last = x;
		T_EQ(n, nblocks);
		/* the last block marked clean: the only one alloc may take */
		T_OK(pmc_cache_volume_find(c, "alpha", &a));
		T_OK(pmc_cache_volume_find(c, "beta", &b));
		{
			uint64_t lba_last = 0;
			uint32_t vol_last;
			enum pmc_block_state s2;

			/* find the key of block `last` by lookup over both volumes */
			vol_last = UINT32_MAX;
			for (uint32_t v = 0; v < 2 && vol_last == UINT32_MAX; v++) {
				uint32_t vv = v ? b : a;

				for (lba_last = 0; lba_last < 1024; lba_last++) {
					if (pmc_cache_lookup_pin(c, vv, lba_last, &blk, &s2))
						continue;
					pmc_cache_unpin(c, blk);
					if (blk == last) {
						vol_last = vv;
						break;
					}
				}
			}
			T_TRUE(vol_last != UINT32_MAX);
			T_OK(pmc_cache_mark_clean(c, vol_last, lba_last, last));
			n = 0;
			for (x = 0; pmc_cache_dirty_next(c, x, &x) == 0; x++)
				n++;
			T_EQ(n, nblocks - 1);
			T_OK(pmc_cache_alloc(c, PMC_ALLOC_EVICT, &blk));
			T_EQ(blk, last);
			T_EQ(pmc_cache_alloc(c, PMC_ALLOC_EVICT, &blk2), -ENOSPC);
			pmc_cache_unpin(c, blk);
		}
		printf("ok: dirty map rebuilt (%llu blocks); the allocator takes the one clean block\n",
		       (unsigned long long)nblocks);

		/* reopened, the map is empty again: the hand meets every dirty
		 * block before the one free block (the last) and must take
		 * none of them, only the free one. The reference bits are
		 * cleared first, as a power cut can leave them (a volatile
		 * word, never flushed): only the block state keeps the hand
		 * off dirty data then. */
		pmc_cache_close(c);
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		for (x = 0; x < nblocks; x++)
			c->descs[x].hint = 0;
		for (x = 0, n = 0; pmc_cache_dirty_next(c, x, &x) == 0; x++)
			n++;
		T_EQ(n, 0);
		T_OK(pmc_cache_alloc(c, PMC_ALLOC_EVICT, &blk));
		T_EQ(blk, last);
		T_EQ(pmc_cache_alloc(c, PMC_ALLOC_EVICT, &blk2), -ENOSPC);
		pmc_cache_unpin(c, blk);
		T_OK(pmc_cache_volume_find(c, "alpha", &a));
		T_OK(pmc_cache_volume_info(c, a, &vi));
		T_OK(pmc_cache_volume_find(c, "beta", &b));
		{
			struct pmc_volume_info vb;

			T_OK(pmc_cache_volume_info(c, b, &vb));
			T_EQ(vi.nr_dirty + vb.nr_dirty, nblocks - 1);
		}
		check(c);
		printf("ok: before the rebuild, the allocator evicts no dirty block\n");
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	unlink(path);
	second_chance();
	printf("PASS test_index\n");
	return 0;
}
