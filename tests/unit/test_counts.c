/* test_counts.c - the block counts as status shows them, read while
 * blocks move between two volumes and between states: writers of both
 * volumes fill a small cache (eviction hands one volume's clean blocks to
 * the other), a cleaner marks dirty blocks clean, and a sampler takes
 * pmc_cache_counts_snapshot() all along. Every snapshot must add up: dirty
 * + clean <= nr_blocks, per volume and in total, and the totals are the
 * sums of the volumes. Reading the counters volume by volume, as status
 * did, counts a block that moves between the reads twice (shown first,
 * single-threaded; seen by the torture campaign as "volumes hold dirty
 * 11213 + clean 57 > 11264").
 * Run under ThreadSanitizer in CI. Usage: test_counts [seed]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "cache.h"
#include "check.h"
#include "simpmem.h"
#include "t.h"

#define BS 4096
#define BLOCKS 64
#define KEYS 48 /* per volume: 96 keys on 64 blocks */
#define OPS 20000
#define EVICTIONS 1000
#define VOLS 2

static struct pmc_cache *c;
static uint32_t vols[VOLS];
static uint64_t seed;
static atomic_int writers_done;

static time_t t_end;

static uint64_t evictions(void)
{
	struct pmc_cache_info ci;

	pmc_cache_get_info(c, &ci);
	return ci.evictions;
}

static void *writer(void *arg)
{
	uint64_t t = (uint64_t)(uintptr_t)arg, rng = seed + t;
	char buf[BS];
	struct pmc_err err;

	memset(buf, (int)t, sizeof(buf));
	/* OPS writes, and on until blocks changed hands EVICTIONS times (the
	 * threads' timing decides how often), at most 30 s */
	for (int i = 0; i < OPS || (evictions() < EVICTIONS && time(NULL) < t_end); i++) {
		uint64_t key = sim_rand(&rng) % KEYS;
		int rc;

		/* a full cache: wait for the cleaner, then take a clean block
		 * (of either volume) */
		for (int tries = 0;; tries++) {
			memset(&err, 0, sizeof(err));
			rc = pmc_cache_write(c, vols[t], key, 1, buf, &err);
			if (rc != -ENOSPC || tries == 100000)
				break;
			sched_yield();
		}
		if (rc && rc != -ENOSPC)
			T_FAIL("write: %s", err.msg);
	}
	atomic_fetch_add(&writers_done, 1);
	return NULL;
}

static void *cleaner(void *arg)
{
	uint64_t rng = seed ^ 0x99;

	while (atomic_load(&writers_done) < VOLS) {
		uint32_t v = vols[sim_rand(&rng) % VOLS];
		uint64_t key = sim_rand(&rng) % KEYS, blk;
		enum pmc_block_state st;

		if (pmc_cache_lookup_pin(c, v, key, &blk, &st))
			continue;
		if (st == PMC_BLK_DIRTY)
			pmc_cache_mark_clean(c, v, key, blk);
		pmc_cache_unpin(c, blk);
	}
	return NULL;
}

/* why one snapshot: read volume by volume around a block that changes
 * hands, the counts pass nr_blocks */
static void sequential_reads(uint64_t nr_blocks)
{
	struct pmc_volume_info va, vb;
	struct pmc_err err;
	uint64_t td, tc, blk;
	enum pmc_block_state st;
	char buf[BS];

	memset(buf, 0xa, sizeof(buf));
	/* a full cache of a's clean blocks */
	for (uint64_t key = 0; key < nr_blocks; key++) {
		T_OK(pmc_cache_write(c, vols[0], key, 1, buf, &err));
		T_OK(pmc_cache_lookup_pin(c, vols[0], key, &blk, &st));
		T_OK(pmc_cache_mark_clean(c, vols[0], key, blk));
		pmc_cache_unpin(c, blk);
	}
	T_EQ(pmc_cache_counts_snapshot(c, NULL, NULL, &td, &tc), 1);
	T_EQ(td + tc, nr_blocks);
	T_OK(pmc_cache_volume_info(c, vols[0], &va));
	/* b's write takes one of a's blocks */
	T_OK(pmc_cache_write(c, vols[1], 0, 1, buf, &err));
	T_OK(pmc_cache_volume_info(c, vols[1], &vb));
	printf("read one by one around an eviction: a %llu + b %llu blocks of %llu\n",
	       (unsigned long long)(va.nr_dirty + va.nr_clean),
	       (unsigned long long)(vb.nr_dirty + vb.nr_clean), (unsigned long long)nr_blocks);
	T_EQ(va.nr_dirty + va.nr_clean + vb.nr_dirty + vb.nr_clean, nr_blocks + 1);
	T_EQ(pmc_cache_counts_snapshot(c, NULL, NULL, &td, &tc), 1);
	T_EQ(td + tc, nr_blocks);
}

int main(int argc, char **argv)
{
	struct simpmem sim;
	struct pmc_err err;
	struct pmc_cache_info ci;
	struct pmc_check_report rep;
	pthread_t th[VOLS + 1];
	uint64_t *dirty, *clean, samples = 0, moved = 0;

	seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
	printf("seed: %llu\n", (unsigned long long)seed);
	T_TRUE(simpmem_init(&sim, (2u << 20) + BLOCKS * BS) == 0);
	sim.pm->ops = &simpmem_direct_ops;
	T_OK(pmc_cache_format(sim.pm, NULL, &err));
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	T_OK(pmc_cache_volume_add(c, "a", "/dev/sim-a", 2 * BLOCKS * BS, &vols[0], &err));
	T_OK(pmc_cache_volume_add(c, "b", "/dev/sim-b", KEYS * BS, &vols[1], &err));
	pmc_cache_get_info(c, &ci);
	printf("%llu blocks, %d keys per volume\n", (unsigned long long)ci.nr_blocks, KEYS);
	dirty = calloc(ci.max_volumes, sizeof(*dirty));
	clean = calloc(ci.max_volumes, sizeof(*clean));
	T_TRUE(dirty && clean);
	sequential_reads(ci.nr_blocks);
	t_end = time(NULL) + 30;
	for (uintptr_t t = 0; t < VOLS; t++)
		T_EQ(pthread_create(&th[t], NULL, writer, (void *)t), 0);
	T_EQ(pthread_create(&th[VOLS], NULL, cleaner, NULL), 0);
	/* the sampler: this thread, until the writers are done */
	while (atomic_load(&writers_done) < VOLS) {
		uint64_t td, tc, sd = 0, sc = 0;

		T_EQ(pmc_cache_counts_snapshot(c, dirty, clean, &td, &tc), 1);
		for (uint32_t i = 0; i < ci.max_volumes; i++) {
			if (dirty[i] + clean[i] > ci.nr_blocks)
				T_FAIL("snapshot %llu: volume slot %u: dirty %llu + clean %llu > %llu "
				       "blocks", (unsigned long long)samples, i,
				       (unsigned long long)dirty[i], (unsigned long long)clean[i],
				       (unsigned long long)ci.nr_blocks);
			sd += dirty[i];
			sc += clean[i];
		}
		if (sd != td || sc != tc)
			T_FAIL("snapshot %llu: totals dirty %llu clean %llu, volumes %llu and %llu",
			       (unsigned long long)samples, (unsigned long long)td,
			       (unsigned long long)tc, (unsigned long long)sd, (unsigned long long)sc);
		if (td + tc > ci.nr_blocks)
			T_FAIL("snapshot %llu: dirty %llu + clean %llu > %llu blocks",
			       (unsigned long long)samples, (unsigned long long)td,
			       (unsigned long long)tc, (unsigned long long)ci.nr_blocks);
		moved += td + tc == ci.nr_blocks; /* a full cache: blocks change hands */
		samples++;
	}
	for (int t = 0; t < VOLS + 1; t++)
		pthread_join(th[t], NULL);
	pmc_cache_get_info(c, &ci);
	printf("%llu snapshots, %llu of a full cache; evictions %llu\n",
	       (unsigned long long)samples, (unsigned long long)moved,
	       (unsigned long long)ci.evictions);
	if (ci.evictions < EVICTIONS / 4)
		T_FAIL("%llu evictions: blocks hardly changed hands, the test proves nothing",
		       (unsigned long long)ci.evictions);
	T_OK(pmc_cache_check(c, &rep, &err));
	free(dirty);
	free(clean);
	pmc_cache_close(c);
	simpmem_fini(&sim);
	printf("PASS test_counts\n");
	return 0;
}
