/* pmc-vm-cache.c - guest side of the vm power-cut test: the cache on a real
 * devdax namespace, killed mid-run, must come back with every acknowledged
 * write.
 *
 * usage: pmc-vm-cache write DEV DISK DISK_BYTES SEED N
 *          map DEV (/dev/dax0.0) through the pmem layer, format a cache,
 *          add volume "vol0" (DISK, DISK_BYTES), write N blocks at N
 *          distinct seeded LBAs (generation 1), print PMC_WRITTEN; then keep
 *          overwriting the same blocks in order (write k hits block k % N
 *          with generation 2 + k / N), printing "PMC_ACK k" after every 256th
 *          write returned, until killed. Never closes the cache.
 *        pmc-vm-cache verify DEV SEED N ACKED
 *          open the cache (it must report a crash: was_clean == 0), read
 *          the N blocks and check that each is whole (header and seeded
 *          payload agree) and that together they are exactly the state
 *          after some write K >= ACKED (the last "PMC_ACK k" the host saw,
 *          -1 for none): writes return in order and each is durable when it
 *          returns, so every write up to K is there and none after it. Then
 *          close cleanly, reopen, expect was_clean == 1 and the same data.
 *        pmc-vm-cache set-id DEV NAME TEXT
 *          record TEXT as the disk identity of volume NAME, as an older
 *          pmcached would have (vm-nvmf: a record by serial and nsid).
 * Exit: 0 pass, 1 fail, 2 usage. Mismatches print both sides.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "err.h"
#include "pmem.h"

#define BLOCK 4096u
#define MAGIC UINT64_C(0x4b4c424d56434d50) /* "PMCVMBLK" */
#define ACK_EVERY 256 /* rarely: the serial console is slow under TCG */
#define MAX_OVERWRITES (1u << 22) /* a bound on the run; the host kills sooner */

struct blk_head {
	uint64_t magic;
	uint64_t seed;
	uint64_t lba;
	uint64_t gen;
};

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* LBA of block i: an odd stride walks a power-of-two range without repeats */
static uint64_t lba_of(uint64_t seed, uint64_t i, uint64_t range)
{
	uint64_t stride = mix64(seed) | 1, start = mix64(seed ^ 0x5555);

	return (start + i * stride) & (range - 1);
}

static void fill(void *buf, uint64_t seed, uint64_t lba, uint64_t gen)
{
	struct blk_head *h = buf;
	uint64_t *w = buf, x = mix64(seed ^ mix64(lba ^ mix64(gen)));
	size_t i;

	h->magic = MAGIC;
	h->seed = seed;
	h->lba = lba;
	h->gen = gen;
	for (i = sizeof(*h) / 8; i < BLOCK / 8; i++)
		w[i] = x = mix64(x);
}

/* 0 when buf is a whole block of (seed, lba, some gen); the gen in *gen */
static int check_block(const void *buf, uint64_t seed, uint64_t lba, uint64_t *gen)
{
	static uint64_t want[BLOCK / 8];
	const struct blk_head *h = buf;
	const uint64_t *w = buf;
	size_t i;

	if (h->magic != MAGIC || h->seed != seed || h->lba != lba) {
		printf("FAIL: lba %" PRIu64 ": header magic %#" PRIx64 " seed %" PRIu64
		       " lba %" PRIu64 ", expected magic %#" PRIx64 " seed %" PRIu64 " lba %" PRIu64
		       "\n",
		       lba, h->magic, h->seed, h->lba, MAGIC, seed, lba);
		return -1;
	}
	fill(want, seed, lba, h->gen);
	for (i = 0; i < BLOCK / 8; i++) {
		if (w[i] != want[i]) {
			printf("FAIL: lba %" PRIu64 " gen %" PRIu64 ": word %zu is %#" PRIx64
			       ", expected %#" PRIx64 " (torn block)\n",
			       lba, h->gen, i, w[i], want[i]);
			return -1;
		}
	}
	*gen = h->gen;
	return 0;
}

/* generation block i holds after writes ..K of the overwrite phase */
static uint64_t gen_after(int64_t k, uint64_t i, uint64_t n)
{
	if (k < (int64_t)i)
		return 1;
	return 2 + ((uint64_t)k - i) / n;
}

static void print_info(struct pmc_cache *c, const char *when)
{
	struct pmc_cache_info info;

	pmc_cache_get_info(c, &info);
	printf("cache %s: pmem %" PRIu64 " bytes (%s), block %u, %" PRIu64
	       " blocks, was_clean %d, boot_epoch %" PRIu64 "\n",
	       when, info.pmem_size, info.gran, info.block_size, info.nr_blocks, info.was_clean,
	       info.boot_epoch);
}

static int do_write(const char *dev, const char *disk, uint64_t disk_bytes, uint64_t seed,
		    uint64_t n)
{
	struct pmc_err err = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	uint64_t range = disk_bytes / BLOCK, i, k;
	uint32_t vol;
	static uint64_t buf[BLOCK / 8];
	double t0;

	if (range & (range - 1) || n > range) {
		printf("FAIL: DISK_BYTES/4096 must be a power of two >= N\n");
		return 1;
	}
	t0 = now_s();
	if (pmc_pmem_open(dev, 0, &pm, &err) || pmc_cache_format(pm, &(struct pmc_format_opts){0}, &err)) {
		printf("FAIL: %s: %s\n", dev, err.msg);
		return 1;
	}
	printf("format: %.2f s\n", now_s() - t0);
	if (pmc_cache_open(pm, 0, &c, &err) ||
	    pmc_cache_volume_add(c, "vol0", disk, disk_bytes, &vol, &err)) {
		printf("FAIL: %s: %s\n", dev, err.msg);
		return 1;
	}
	print_info(c, "formatted");
	t0 = now_s();
	for (i = 0; i < n; i++) {
		uint64_t lba = lba_of(seed, i, range);

		fill(buf, seed, lba, 1);
		if (pmc_cache_write(c, vol, lba, 1, buf, &err)) {
			printf("FAIL: write %" PRIu64 " (lba %" PRIu64 "): %s\n", i, lba, err.msg);
			return 1;
		}
	}
	printf("PMC_WRITTEN n=%" PRIu64 " seed=%" PRIu64 " in %.2f s\n", n, seed, now_s() - t0);
	fflush(stdout);

	for (k = 0; k < MAX_OVERWRITES; k++) {
		uint64_t idx = k % n, lba = lba_of(seed, idx, range);

		fill(buf, seed, lba, gen_after((int64_t)k, idx, n));
		if (pmc_cache_write(c, vol, lba, 1, buf, &err)) {
			printf("PMC_WRITER_ERROR overwrite %" PRIu64 " (lba %" PRIu64 "): %s\n", k,
			       lba, err.msg);
			fflush(stdout);
			break;
		}
		if (k % ACK_EVERY == ACK_EVERY - 1) {
			printf("PMC_ACK %" PRIu64 "\n", k);
			fflush(stdout);
		}
	}
	printf("PMC_IDLE after %" PRIu64 " overwrites\n", k);
	fflush(stdout);
	for (;;)
		pause(); /* power is cut here at the latest; no close */
}

/* read and check every block; *kmax is the newest write they show */
static int read_all(struct pmc_cache *c, uint32_t vol, uint64_t seed, uint64_t n,
		    uint64_t range, uint64_t *gens, int64_t *kmax)
{
	static uint64_t buf[BLOCK / 8];
	uint64_t i;
	int fail = 0;

	*kmax = -1;
	for (i = 0; i < n; i++) {
		uint64_t lba = lba_of(seed, i, range), gen;
		uint8_t hit = 0;

		if (pmc_cache_read(c, vol, lba, 1, buf, &hit) != 1 || !hit) {
			printf("FAIL: block %" PRIu64 " (lba %" PRIu64 "): not in the cache\n", i,
			       lba);
			fail = 1;
			gens[i] = 0;
			continue;
		}
		if (check_block(buf, seed, lba, &gen)) {
			fail = 1;
			gens[i] = 0;
			continue;
		}
		gens[i] = gen;
		if (gen >= 2 && (int64_t)(i + (gen - 2) * n) > *kmax)
			*kmax = (int64_t)(i + (gen - 2) * n);
	}
	return fail;
}

static int do_verify(const char *dev, uint64_t seed, uint64_t n, int64_t acked)
{
	struct pmc_err err = {0};
	struct pmc_cache_info info;
	struct pmc_volume_info vi;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	uint64_t *gens, *gens2, i, range, bad = 0;
	int64_t kmax, kmax2;
	uint32_t vol;
	int fail = 0;
	double t0;

	gens = calloc(n, sizeof(*gens));
	gens2 = calloc(n, sizeof(*gens2));
	if (!gens || !gens2)
		return 1;
	t0 = now_s();
	if (pmc_pmem_open(dev, 0, &pm, &err) || pmc_cache_open(pm, 0, &c, &err)) {
		printf("FAIL: open %s after the power cut: %s\n", dev, err.msg);
		return 1;
	}
	printf("open after power cut: %.3f s\n", now_s() - t0);
	print_info(c, "recovered");
	pmc_cache_get_info(c, &info);
	if (info.was_clean != 0) {
		printf("FAIL: was_clean is %d after a power cut, expected 0\n", info.was_clean);
		fail = 1;
	}
	if (pmc_cache_volume_find(c, "vol0", &vol) || pmc_cache_volume_info(c, vol, &vi)) {
		printf("FAIL: volume vol0 not found after the power cut\n");
		return 1;
	}
	range = vi.size_bytes / BLOCK;
	printf("volume vol0: slot %u, disk %s, %" PRIu64 " bytes\n", vol, vi.disk, vi.size_bytes);

	fail |= read_all(c, vol, seed, n, range, gens, &kmax);
	printf("blocks show writes up to overwrite %" PRId64 "; the host saw PMC_ACK %" PRId64 "\n",
	       kmax, acked);
	if (kmax < acked) {
		printf("FAIL: acknowledged overwrite %" PRId64 " lost: newest present is %" PRId64
		       "\n",
		       acked, kmax);
		fail = 1;
	}
	for (i = 0; i < n; i++) {
		uint64_t want = gen_after(kmax, i, n);

		if (gens[i] && gens[i] != want && bad++ < 10)
			printf("FAIL: block %" PRIu64 ": generation %" PRIu64 ", expected %" PRIu64
			       " (state after overwrite %" PRId64 ")\n",
			       i, gens[i], want, kmax);
	}
	if (bad) {
		printf("FAIL: %" PRIu64 " blocks do not match the state after overwrite %" PRId64 "\n",
		       bad, kmax);
		fail = 1;
	}
	if (!fail)
		printf("PMC_VERIFIED %" PRIu64 " blocks, state after overwrite %" PRId64
		       " (acked %" PRId64 ")\n",
		       n, kmax, acked);

	/* a clean close must now be recorded as one */
	pmc_cache_close(c);
	if (pmc_cache_open(pm, 0, &c, &err)) {
		printf("FAIL: reopen after a clean close: %s\n", err.msg);
		return 1;
	}
	pmc_cache_get_info(c, &info);
	if (info.was_clean != 1) {
		printf("FAIL: was_clean is %d after a clean close, expected 1\n", info.was_clean);
		fail = 1;
	}
	if (pmc_cache_volume_find(c, "vol0", &vol)) {
		printf("FAIL: volume vol0 lost by a clean close\n");
		return 1;
	}
	fail |= read_all(c, vol, seed, n, range, gens2, &kmax2);
	if (memcmp(gens, gens2, n * sizeof(*gens)) || kmax2 != kmax) {
		printf("FAIL: data changed across a clean close and reopen (newest write %" PRId64
		       " then %" PRId64 ")\n",
		       kmax, kmax2);
		fail = 1;
	} else {
		printf("clean close and reopen: was_clean 1, same %" PRIu64 " blocks\n", n);
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	free(gens);
	free(gens2);
	return fail;
}

static int do_set_id(const char *dev, const char *name, const char *text)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_volume_info vi;
	struct pmc_disk_id id;
	struct pmc_err err;
	uint32_t vol;
	int rc;

	if (pmc_pmem_open(dev, 0, &pm, &err) || pmc_cache_open(pm, 0, &c, &err)) {
		printf("FAIL: open %s: %s\n", dev, err.msg);
		return 1;
	}
	rc = pmc_cache_volume_find(c, name, &vol) || pmc_cache_volume_info(c, vol, &vi);
	if (rc) {
		printf("FAIL: volume %s: not in the cache\n", name);
	} else {
		memset(&id, 0, sizeof(id));
		snprintf(id.text, sizeof(id.text), "%s", text);
		id.disk_bytes = vi.disk_id.disk_bytes;
		rc = pmc_cache_volume_set_id(c, vol, &id, 0, 0, &err);
		if (rc)
			printf("FAIL: volume %s: set its identity: %s\n", name, err.msg);
		else
			printf("volume %s: identity %s recorded (was %s)\n", name, id.text,
			       vi.disk_id.text);
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	return !!rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 7 && !strcmp(argv[1], "write"))
		return do_write(argv[2], argv[3], strtoull(argv[4], NULL, 0),
				strtoull(argv[5], NULL, 0), strtoull(argv[6], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "verify"))
		return do_verify(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
				 strtoll(argv[5], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "set-id"))
		return do_set_id(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: pmc-vm-cache write DEV DISK DISK_BYTES SEED N\n"
			"       pmc-vm-cache verify DEV SEED N ACKED\n"
			"       pmc-vm-cache set-id DEV NAME TEXT\n");
	return 2;
}
