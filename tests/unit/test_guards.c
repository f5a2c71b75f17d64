/* test_guards.c - the core's guards against races and misuse, each forced
 * deterministically (no timing, no seeds):
 *   mark_clean   marking a block clean under a key it is not the live copy
 *                of changes nothing and returns -ESTALE: another key's dirty
 *                data is never marked clean
 *   alloc_race   a reader pins a block between the allocator's claim and
 *                its stripe lock (test hook pmc_test_alloc_claimed), and a
 *                writer invalidates it, or clears its reference bit: the
 *                allocator must not hand out the pinned block
 *   remove_dirty volume removal refuses a volume with dirty blocks, also
 *                right after a crash (counters unknown until a recount) and
 *                after a clean reopen; nothing of the volume is lost
 *   sb_lands     a power cut at the persist point of a superblock commit
 *                where the new superblock lands and nothing else that is
 *                pending does: what the superblock vouches for must already
 *                be durable - the counters of a clean close (close.counters
 *                before close.sb), the zeroed metadata of a format
 *                (format.meta before format.sb0), and the state of a block
 *                marked clean (clean.state: the counters of the close say
 *                clean). The crash simulator lets every pending word land
 *                or not at random; this is the one landing that tells
 *                whether the earlier barrier is there.
 *   corrupt_key  a linked descriptor whose key no longer verifies (its slot
 *                out of range, another bucket's lba, another volume) is
 *                never handed out by the allocator: its key cannot find
 *                its chain, so every chain is searched; a torn orphan is
 * Each one guards a line that a kept mutant (tests/mutants/) removes.
 */
#include <errno.h>

#include "cache.h"
#include "cache_internal.h"
#include "check.h"
#include "simpmem.h"
#include "t.h"

#define BS 4096

static struct pmc_err err;
static struct simpmem sim;

static void fill(char *b, uint64_t lba, uint64_t ver)
{
	for (int i = 0; i < BS / 8; i++)
		((uint64_t *)b)[i] = lba << 32 ^ ver * 7919 ^ (uint64_t)i;
}

static void put(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t ver)
{
	char buf[BS];

	fill(buf, lba, ver);
	T_OK(pmc_cache_write(c, vol, lba, 1, buf, &err));
}

/* (vol, lba) is cached with version ver in state st */
static void expect(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t ver,
		   enum pmc_block_state st)
{
	char want[BS];
	enum pmc_block_state got;
	uint64_t blk;

	fill(want, lba, ver);
	if (pmc_cache_lookup_pin(c, vol, lba, &blk, &got))
		T_FAIL("vol %u block %llu: not cached, expected version %llu", vol,
		       (unsigned long long)lba, (unsigned long long)ver);
	if (memcmp(pmc_cache_block_data(c, blk), want, BS))
		T_FAIL("vol %u block %llu: data is not version %llu", vol, (unsigned long long)lba,
		       (unsigned long long)ver);
	if (got != st)
		T_FAIL("vol %u block %llu: state %d, expected %d", vol, (unsigned long long)lba,
		       got, st);
	pmc_cache_unpin(c, blk);
}

static uint64_t blk_of(struct pmc_cache *c, uint32_t vol, uint64_t lba)
{
	uint64_t blk;

	T_EQ(pmc_cache_lookup_pin(c, vol, lba, &blk, NULL), 0);
	pmc_cache_unpin(c, blk);
	return blk;
}

static struct pmc_cache *fresh(void)
{
	struct pmc_cache *c;

	memset(sim.live, 0, sim.size);
	T_OK(pmc_cache_format(sim.pm, &(struct pmc_format_opts){.max_volumes = 4}, &err));
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	return c;
}

static void check(struct pmc_cache *c)
{
	struct pmc_check_report rep;

	T_OK(pmc_cache_check(c, &rep, &err));
}

static void test_mark_clean(void)
{
	struct pmc_cache *c = fresh();
	struct pmc_volume_info vi;
	uint32_t a, b;
	uint64_t b1, b2, old;

	T_OK(pmc_cache_volume_add(c, "a", "/dev/a", 64 * BS, &a, &err));
	T_OK(pmc_cache_volume_add(c, "b", "/dev/b", 64 * BS, &b, &err));
	put(c, a, 1, 1);
	put(c, a, 2, 2);
	put(c, b, 2, 3);
	b1 = blk_of(c, a, 1);
	b2 = blk_of(c, a, 2);
	/* a's block 2 named as the copy of a's block 1, of b's block 2, of an
	 * uncached block: each key is (or is not) cached, by another block */
	T_EQ(pmc_cache_mark_clean(c, a, 1, b2), -ESTALE);
	T_EQ(pmc_cache_mark_clean(c, b, 2, b2), -ESTALE);
	T_EQ(pmc_cache_mark_clean(c, a, 3, b2), -ESTALE);
	T_EQ(pmc_cache_mark_clean(c, a, 2, b1), -ESTALE);
	expect(c, a, 1, 1, PMC_BLK_DIRTY);
	expect(c, a, 2, 2, PMC_BLK_DIRTY);
	expect(c, b, 2, 3, PMC_BLK_DIRTY);
	T_OK(pmc_cache_volume_info(c, a, &vi));
	T_EQ(vi.nr_dirty, 2);
	T_EQ(vi.nr_clean, 0);
	/* the copy an overwrite replaced */
	old = b1;
	put(c, a, 1, 4);
	T_EQ(pmc_cache_mark_clean(c, a, 1, old), -ESTALE);
	expect(c, a, 1, 4, PMC_BLK_DIRTY);
	/* the live copy itself: clean, once */
	T_OK(pmc_cache_mark_clean(c, a, 2, b2));
	expect(c, a, 2, 2, PMC_BLK_CLEAN);
	T_EQ(pmc_cache_mark_clean(c, a, 2, b2), -ESTALE);
	T_OK(pmc_cache_volume_info(c, a, &vi));
	T_EQ(vi.nr_dirty, 1);
	T_EQ(vi.nr_clean, 1);
	check(c);
	pmc_cache_close(c);
	printf("ok: mark_clean of a block that is not the live copy: -ESTALE, nothing changed\n");
}

/* --- the allocator's claim vs a reader --- */

enum race { RACE_INVALIDATE, RACE_UNREFERENCED };

static struct {
	int armed;
	enum race how;
	uint32_t vol;
	uint64_t lba, target, pinned;
} g_race;

/* runs in pmc_cache_alloc between the claim of blk and its stripe lock */
static void after_claim(struct pmc_cache *c, uint64_t blk)
{
	uint64_t got;

	if (!g_race.armed || blk != g_race.target)
		return;
	g_race.armed = 0;
	/* a reader finds the block and pins it, under the stripe lock */
	T_EQ(pmc_cache_lookup_pin(c, g_race.vol, g_race.lba, &got, NULL), 0);
	T_EQ(got, blk);
	g_race.pinned = got;
	if (g_race.how == RACE_INVALIDATE) {
		/* ... and a writer drops the key: the block is FREE, still pinned */
		T_OK(pmc_cache_invalidate(c, g_race.vol, g_race.lba, 1));
	} else {
		/* ... and the CLOCK hand cleared the reference bit since: only
		 * the pin count tells that the block is in use */
		__atomic_fetch_and(&c->descs[blk].hint, ~PMC_HINT_REFERENCED, __ATOMIC_RELAXED);
	}
}

static void alloc_race(enum race how, const char *what)
{
	struct pmc_cache *c = fresh();
	struct pmc_cache_info info;
	uint64_t n, x, got;
	uint32_t a;
	int rc;

	pmc_cache_get_info(c, &info);
	n = info.nr_blocks;
	T_OK(pmc_cache_volume_add(c, "a", "/dev/a", (n + 8) * BS, &a, &err));
	/* every block dirty but x (block 0's copy), which is clean */
	for (uint64_t lba = 0; lba < n; lba++)
		put(c, a, lba, 1);
	x = blk_of(c, a, 0);
	T_OK(pmc_cache_mark_clean(c, a, 0, x));
	g_race.armed = 1;
	g_race.how = how;
	g_race.vol = a;
	g_race.lba = 0;
	g_race.target = x;
	g_race.pinned = UINT64_MAX;
	pmc_test_alloc_claimed = after_claim;
	rc = pmc_cache_alloc(c, 1, &got);
	pmc_test_alloc_claimed = NULL;
	if (g_race.armed)
		T_FAIL("%s: the allocator never claimed block %llu", what, (unsigned long long)x);
	if (rc == 0 && got == x)
		T_FAIL("%s: the allocator handed out block %llu while a reader pins it", what,
		       (unsigned long long)x);
	T_EQ(rc, -ENOSPC); /* every other block is dirty */
	T_EQ(pmc_cache_pins(c, x), 1);
	if (how == RACE_UNREFERENCED)
		expect(c, a, 0, 1, PMC_BLK_CLEAN);
	pmc_cache_unpin(c, g_race.pinned);
	/* the reader is gone: now the block may go */
	T_EQ(pmc_cache_alloc(c, 1, &got), 0);
	T_EQ(got, x);
	pmc_cache_unpin(c, got);
	for (uint64_t lba = 1; lba < n; lba++)
		expect(c, a, lba, 1, PMC_BLK_DIRTY);
	check(c);
	pmc_cache_close(c);
	printf("ok: %s: the pinned block is not handed out\n", what);
}

/* --- volume removal with dirty data --- */

static void test_remove_dirty(void)
{
	struct pmc_cache *c = fresh();
	struct pmc_cache_info info;
	uint32_t a, b;

	T_OK(pmc_cache_volume_add(c, "a", "/dev/a", 64 * BS, &a, &err));
	T_OK(pmc_cache_volume_add(c, "b", "/dev/b", 64 * BS, &b, &err));
	put(c, a, 5, 1);
	put(c, b, 7, 2);
	put(c, b, 8, 3);
	T_OK(pmc_cache_mark_clean(c, b, 8, blk_of(c, b, 8)));
	T_ERR(pmc_cache_volume_remove(c, b, &err), EBUSY, "volume b: 1 dirty blocks");
	/* a crash: the counters are unknown until removal recounts them */
	pmc_cache_abandon(c);
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.counts_valid, 0);
	T_OK(pmc_cache_volume_find(c, "b", &b));
	T_ERR(pmc_cache_volume_remove(c, b, &err), EBUSY, "volume b: 1 dirty blocks");
	expect(c, b, 7, 2, PMC_BLK_DIRTY);
	/* a clean close and reopen: the counters come from the close */
	pmc_cache_close(c);
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.counts_valid, 1);
	T_ERR(pmc_cache_volume_remove(c, b, &err), EBUSY, "volume b: 1 dirty blocks");
	expect(c, b, 7, 2, PMC_BLK_DIRTY);
	expect(c, b, 8, 3, PMC_BLK_CLEAN);
	/* written back: now it goes, and a's data stays */
	T_OK(pmc_cache_mark_clean(c, b, 7, blk_of(c, b, 7)));
	T_OK(pmc_cache_volume_remove(c, b, &err));
	T_EQ(pmc_cache_volume_get(c, b), -ENOENT);
	expect(c, a, 5, 1, PMC_BLK_DIRTY);
	check(c);
	pmc_cache_close(c);
	printf("ok: volume removal refuses dirty data (live, after a crash, after a reopen)\n");
}

/* --- a power cut where only the superblock lands --- */

static char *g_img; /* the crash image taken at the last drain */

/* called at each drain, before it takes effect: image = what is durable,
 * plus the pending stores into the two superblock slots */
static void sb_lands(struct simpmem *s, void *arg)
{
	memcpy(g_img, s->dura, s->size);
	memcpy(g_img, s->live, (size_t)PMC_SB_COPIES * PMC_SB_SLOT);
}

static struct pmc_cache *open_image(struct pmc_pmem **pm)
{
	struct pmc_cache *c;

	T_EQ(pmc_pmem_wrap(g_img, sim.size, &simpmem_direct_ops, NULL, pm), 0);
	T_OK(pmc_cache_open(*pm, 0, &c, &err));
	return c;
}

static void test_sb_lands(void)
{
	struct simpmem rec;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_volume_info vi;
	uint32_t a, b, x;

	T_TRUE(simpmem_init(&rec, sim.size) == 0); /* recording ops */
	g_img = aligned_alloc(4096, rec.size);
	T_TRUE(g_img != NULL);

	/* close.counters: the last clean close had a: 1 dirty, b: 1 clean;
	 * now a: 1 clean, b: 1 dirty - the same totals, so the superblock's
	 * checksummed sums cannot tell stale per-volume counters from new */
	T_OK(pmc_cache_format(rec.pm, &(struct pmc_format_opts){.max_volumes = 4}, &err));
	T_OK(pmc_cache_open(rec.pm, 0, &c, &err));
	T_OK(pmc_cache_volume_add(c, "a", "/dev/a", 64 * BS, &a, &err));
	T_OK(pmc_cache_volume_add(c, "b", "/dev/b", 64 * BS, &b, &err));
	put(c, a, 1, 1);
	put(c, b, 2, 1);
	T_OK(pmc_cache_mark_clean(c, b, 2, blk_of(c, b, 2)));
	pmc_cache_close(c);
	T_OK(pmc_cache_open(rec.pm, 0, &c, &err));
	T_OK(pmc_cache_mark_clean(c, a, 1, blk_of(c, a, 1)));
	put(c, b, 2, 2);
	rec.on_drain = sb_lands;
	pmc_cache_close(c);
	rec.on_drain = NULL;
	c = open_image(&pm);
	T_OK(pmc_cache_volume_find(c, "b", &b));
	T_OK(pmc_cache_volume_info(c, b, &vi));
	if (vi.counts_valid && vi.nr_dirty != 1)
		T_FAIL("close.counters: after a power cut at close.sb, volume b counts %llu dirty "
		       "blocks, it has 1: its counter did not reach pmem before the superblock",
		       (unsigned long long)vi.nr_dirty);
	T_ERR(pmc_cache_volume_remove(c, b, &err), EBUSY, "volume b: 1 dirty blocks");
	expect(c, b, 2, 2, PMC_BLK_DIRTY);
	check(c);
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	printf("ok: sb_lands: a power cut where only close.sb lands keeps the counters right\n");

	/* format.meta: a cache with a volume is formatted again; the power
	 * fails when only copy 0 of the new superblock lands */
	rec.on_drain = sb_lands;
	T_OK(pmc_cache_format(rec.pm, &(struct pmc_format_opts){.max_volumes = 4}, &err));
	rec.on_drain = NULL;
	/* the last drain was format.sb1's: take copy 0 alone instead, as if
	 * the cut came at format.sb0 */
	memset(g_img + PMC_SB_SLOT, 0, PMC_SB_SLOT);
	c = open_image(&pm);
	if (pmc_cache_volume_find(c, "a", &x) == 0 || pmc_cache_volume_find(c, "b", &x) == 0)
		T_FAIL("format.meta: after a power cut at format.sb0 the new cache shows a volume "
		       "of the old one");
	check(c);
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	printf("ok: sb_lands: a power cut where only format.sb0 lands shows nothing old\n");
	free(g_img);
	simpmem_fini(&rec);
}

/* --- a descriptor whose key does not verify ---------------------------- */

/* every block but the one at x cached clean for a, then take blocks with
 * eviction as long as there are: is x handed out? (the others are put
 * back clean at the volume's far end, so each is reused in turn) */
static int handed_out(struct pmc_cache *c, uint32_t a, uint64_t x, uint64_t n)
{
	uint64_t got, far = 1000;
	int res;

	for (uint64_t i = 0; i < 3 * n; i++) {
		if (pmc_cache_alloc(c, PMC_ALLOC_EVICT, &got))
			return 0;
		if (got == x) {
			pmc_cache_unpin(c, got);
			return 1;
		}
		T_OK(pmc_cache_publish_n(c, a, &far, &got, 1, PMC_BLK_CLEAN, NULL, &res));
		T_EQ(res, 0);
		far++;
		pmc_cache_unpin(c, got);
	}
	return 0;
}

static void test_corrupt_key(void)
{
	struct pmc_cache_info info;
	struct pmc_check_report rep;
	struct pmc_cache *c;
	struct pmc_desc *d;
	uint32_t a;
	uint64_t x;

	for (int k = 0; k < 3; k++) {
		c = fresh();
		pmc_cache_get_info(c, &info);
		T_OK(pmc_cache_volume_add(c, "a", "/dev/a", 4096 * BS, &a, &err));
		for (uint64_t lba = 0; lba < info.nr_blocks; lba++)
			put(c, a, lba, 1);
		for (uint64_t lba = 0; lba < info.nr_blocks; lba++)
			T_OK(pmc_cache_mark_clean(c, a, lba, blk_of(c, a, lba)));
		x = blk_of(c, a, 5);
		pmc_cache_close(c);
		d = (struct pmc_desc *)(sim.live + ((struct pmc_sb *)sim.live)->desc_off) + x;
		if (k == 0)
			d->vol = 9999; /* out of range */
		else if (k == 1)
			d->lba ^= 1ull << 40; /* another bucket */
		else
			d->vol = a + 1; /* another (absent) volume */
		T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
		if (handed_out(c, a, x, info.nr_blocks))
			T_FAIL("corrupt_key %d: the allocator handed out block %llu, still linked", k,
			       (unsigned long long)x);
		T_ERR(pmc_cache_check(c, &rep, &err), EUCLEAN, "");
		pmc_cache_close(c);
	}
	/* a torn orphan (in no chain, its key not verifying) is reused */
	c = fresh();
	pmc_cache_get_info(c, &info);
	T_OK(pmc_cache_volume_add(c, "a", "/dev/a", 4096 * BS, &a, &err));
	put(c, a, 5, 1);
	x = blk_of(c, a, 5);
	T_OK(pmc_cache_invalidate(c, a, 5, 1));
	pmc_cache_close(c);
	d = (struct pmc_desc *)(sim.live + ((struct pmc_sb *)sim.live)->desc_off) + x;
	d->state = PMC_BLK_DIRTY; /* as a crash before the link leaves it */
	d->lba ^= 1ull << 40;
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	T_TRUE(handed_out(c, a, x, info.nr_blocks));
	check(c);
	pmc_cache_close(c);
	printf("ok: corrupt_key: a linked block whose key does not verify is never reused; a "
	       "torn orphan is\n");
}

int main(void)
{
	/* a plain buffer as pmem: 2 MiB of metadata and 48 blocks */
	T_TRUE(simpmem_init(&sim, (2u << 20) + 48 * BS) == 0);
	sim.pm->ops = &simpmem_direct_ops;
	test_mark_clean();
	alloc_race(RACE_INVALIDATE, "alloc_race: pinned and invalidated after the claim");
	alloc_race(RACE_UNREFERENCED, "alloc_race: pinned after the claim, reference bit clear");
	test_remove_dirty();
	test_sb_lands();
	test_corrupt_key();
	simpmem_fini(&sim);
	printf("PASS test_guards\n");
	return 0;
}
