/* test_threads.c - the core driven by several threads at once: writers
 * (each owning a set of keys), readers of every key, a write-back thread
 * marking blocks clean, and eviction under allocation pressure. Readers must
 * only ever see whole versions (pins keep a block from being reused under
 * them); at the end every key holds its owner's last acknowledged version,
 * in the cache or (written back, then evicted) on the disk model.
 * Run under ThreadSanitizer in CI. Usage: test_threads [seed]
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "check.h"
#include "simpmem.h"
#include "t.h"

#define BS 4096
#define WRITERS 3
#define KEYS 384
#define OPS 4000
#define NONE UINT64_MAX

static struct pmc_cache *c;
static uint32_t vol;
static uint64_t seed;
static _Atomic uint64_t want[KEYS]; /* acknowledged version, NONE = not cached */
static _Atomic uint64_t disk[KEYS]; /* version on the disk model */
static atomic_int writers_done;

static void fill(char *b, uint64_t key, uint64_t ver)
{
	uint64_t st = key * 7919 + ver;

	((uint64_t *)b)[0] = key;
	((uint64_t *)b)[1] = ver;
	for (int i = 2; i < BS / 8; i++)
		((uint64_t *)b)[i] = sim_rand(&st);
}

static int whole(const char *b, uint64_t key)
{
	static _Thread_local char ref[BS];

	fill(ref, key, ((const uint64_t *)b)[1]);
	return ((const uint64_t *)b)[0] == key && !memcmp(ref, b, BS);
}

static void *writer(void *arg)
{
	uint64_t t = (uint64_t)(uintptr_t)arg, rng = seed + t, ver = 0;
	char buf[BS];
	struct pmc_err err;

	for (int i = 0; i < OPS; i++) {
		uint64_t key = (sim_rand(&rng) % (KEYS / WRITERS)) * WRITERS + t;
		unsigned what = (unsigned)(sim_rand(&rng) % 10);

		if (what < 8) {
			ver++;
			fill(buf, key, ver + (t << 40));
			memset(&err, 0, sizeof(err));
			int rc = pmc_cache_write(c, vol, key, 1, buf, &err);
			if (rc == 0)
				atomic_store(&want[key], ver + (t << 40));
			else if (rc != -ENOSPC)
				T_FAIL("write: %s", err.msg);
		} else {
			T_EQ(pmc_cache_invalidate(c, vol, key, 1), 0);
			atomic_store(&want[key], NONE);
		}
	}
	atomic_fetch_add(&writers_done, 1);
	return NULL;
}

static void *reader(void *arg)
{
	uint64_t rng = seed ^ 0x77;
	char buf[BS];
	uint64_t reads = 0;

	while (atomic_load(&writers_done) < WRITERS) {
		uint64_t key = sim_rand(&rng) % KEYS;
		uint8_t hit;

		T_TRUE(pmc_cache_read(c, vol, key, 1, buf, &hit) >= 0);
		if (hit && !whole(buf, key))
			T_FAIL("reader saw a torn or foreign block for key %llu",
			       (unsigned long long)key);
		reads++;
	}
	printf("reader: %llu reads\n", (unsigned long long)reads);
	return NULL;
}

static void *writeback(void *arg)
{
	uint64_t rng = seed ^ 0x99, cleaned = 0, stale = 0;

	while (atomic_load(&writers_done) < WRITERS) {
		uint64_t key = sim_rand(&rng) % KEYS, blk;
		enum pmc_block_state st;
		const char *d;
		int rc;

		if (pmc_cache_lookup_pin(c, vol, key, &blk, &st))
			continue;
		d = pmc_cache_block_data(c, blk);
		if (!whole(d, key))
			T_FAIL("write-back saw a torn block for key %llu", (unsigned long long)key);
		if (st == PMC_BLK_DIRTY) {
			atomic_store(&disk[key], ((const uint64_t *)d)[1]);
			rc = pmc_cache_mark_clean(c, vol, key, blk);
			if (rc == 0)
				cleaned++;
			else if (rc == -ESTALE)
				stale++;
			else
				T_FAIL("mark_clean: %d", rc);
		}
		pmc_cache_unpin(c, blk);
	}
	printf("write-back: %llu cleaned, %llu stale\n", (unsigned long long)cleaned,
	       (unsigned long long)stale);
	return NULL;
}

int main(int argc, char **argv)
{
	struct simpmem sim;
	struct pmc_err err;
	struct pmc_check_report rep;
	pthread_t th[WRITERS + 2];
	char buf[BS];

	seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
	printf("seed: %llu\n", (unsigned long long)seed);
	/* a plain buffer as pmem: 128 blocks for 384 keys forces eviction */
	T_TRUE(simpmem_init(&sim, (2u << 20) + 128 * BS) == 0);
	sim.pm->ops = &simpmem_direct_ops;
	T_OK(pmc_cache_format(sim.pm, NULL, &err));
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	T_OK(pmc_cache_volume_add(c, "v", "/dev/sim", KEYS * BS, &vol, &err));
	for (int k = 0; k < KEYS; k++) {
		atomic_store(&want[k], NONE);
		atomic_store(&disk[k], NONE);
	}
	for (uintptr_t t = 0; t < WRITERS; t++)
		T_EQ(pthread_create(&th[t], NULL, writer, (void *)t), 0);
	T_EQ(pthread_create(&th[WRITERS], NULL, reader, NULL), 0);
	T_EQ(pthread_create(&th[WRITERS + 1], NULL, writeback, NULL), 0);
	for (int t = 0; t < WRITERS + 2; t++)
		pthread_join(th[t], NULL);

	T_OK(pmc_cache_check(c, &rep, &err));
	printf("linked %llu (dirty %llu clean %llu), orphans %llu, free %llu\n",
	       (unsigned long long)rep.linked, (unsigned long long)rep.live_dirty,
	       (unsigned long long)rep.live_clean, (unsigned long long)rep.orphans,
	       (unsigned long long)rep.free);
	for (uint64_t k = 0; k < KEYS; k++) {
		uint8_t hit;
		uint64_t w = atomic_load(&want[k]);

		T_TRUE(pmc_cache_read(c, vol, k, 1, buf, &hit) >= 0);
		if (hit) {
			if (w == NONE || ((uint64_t *)buf)[1] != w || !whole(buf, k))
				T_FAIL("key %llu: holds version %llx, acknowledged %llx",
				       (unsigned long long)k, (unsigned long long)((uint64_t *)buf)[1],
				       (unsigned long long)w);
		} else if (w != NONE && atomic_load(&disk[k]) != w) {
			T_FAIL("key %llu: acknowledged version %llx lost (disk has %llx)",
			       (unsigned long long)k, (unsigned long long)w,
			       (unsigned long long)atomic_load(&disk[k]));
		}
	}
	pmc_cache_close(c);
	simpmem_fini(&sim);
	printf("PASS test_threads\n");
	return 0;
}
