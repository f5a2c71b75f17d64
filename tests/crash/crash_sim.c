/* crash_sim.c - crash the cache at its persist points and check recovery.
 *
 * A seeded workload of writes (new and overwrites, several blocks at a
 * time), invalidations, write-back (disk copy + mark clean), eviction
 * through allocation pressure, read-miss fills of evicted blocks (the
 * disk's version published clean, one block at a time: the single-block
 * publish path), and volume removal and re-adding runs on a
 * simulated pmem (tests/lib/simpmem.c) that records every store, flush and
 * drain. At a chosen drain the simulator builds a crash image: the durable
 * contents plus, for each 8-byte word stored but not yet drained, that word
 * landing or not. The image is then recovered (pmc_cache_open), checked
 * whole (pmc_cache_check), and every key of the model is read back:
 *   - a hit must hold exactly the last acknowledged version, or, for a key
 *     the interrupted operation touched, its new version, whole;
 *   - a miss is fine only if nothing is cached for the key by the model or
 *     the disk model holds the acknowledged version (written back, evicted);
 *   - every block read must be one untorn version (header + pattern).
 * The recovered cache then takes more writes, which must read back.
 *
 * Phase 1 crashes a small workload (from format on) at every persist
 * point with three landing modes each (none, all, random). Phase 2 crashes
 * a larger one at N random persist points (default 10000).
 * Usage: crash_sim [--seed S] [--points N] [--ops N] [--only-point K]
 * A failure prints the seed and point; --seed S --only-point K replays it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "check.h"
#include "simpmem.h"

#define BS 4096u
#define MAXV 4
#define INVALID UINT64_MAX

enum op_kind { OP_NONE, OP_FORMAT, OP_WRITE, OP_INVAL, OP_CLEAN, OP_FILL, OP_VOL_REMOVE, OP_VOL_ADD };

struct model {
	uint32_t nvols;
	uint64_t nlba;		/* blocks per volume */
	uint64_t *want;		/* [v * nlba + lba]: acknowledged version or INVALID */
	uint64_t *disk;		/* [v * nlba + lba]: version on the disk model (0: none) */
	int present[MAXV];	/* volume exists (acknowledged) */
	char names[MAXV][16];
	uint64_t next_version;
	/* the operation in flight */
	enum op_kind op;
	uint32_t op_vol;
	uint64_t op_lba, op_n, op_version;
};

struct run {
	struct simpmem sim;
	struct model m;
	struct pmc_cache *c;
	uint64_t seed, rng;
	uint64_t check_rng;	/* crash landings and post-recovery writes */
	char *image;
	/* which drains to crash at */
	uint64_t only_point;	/* 0: use the selection below */
	int every_point;	/* phase 1 */
	uint8_t *pick;		/* phase 2: pick[drain] */
	uint64_t npick;
	uint64_t crash_points, crash_images, failures;
	uint64_t fills;		/* read-miss fills published */
	const char *phase;
};

static int g_fail_fast = 1;

static void fill_block(char *b, uint32_t vol, uint64_t lba, uint64_t version)
{
	uint64_t st = version * 0x9e3779b97f4a7c15ull ^ ((uint64_t)vol << 40) ^ lba;
	uint64_t *w = (uint64_t *)b;

	w[0] = version;
	w[1] = ((uint64_t)vol << 48) | lba;
	for (size_t i = 2; i < BS / 8; i++)
		w[i] = sim_rand(&st);
}

/* the version a block holds, or INVALID if it is not one whole version */
static uint64_t block_version(const char *b, uint32_t vol, uint64_t lba)
{
	static char ref[BS];
	uint64_t v;

	memcpy(&v, b, 8);
	fill_block(ref, vol, lba, v);
	return memcmp(ref, b, BS) ? INVALID : v;
}

static void report(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct run *r, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL [%s seed %" PRIu64 " drain %" PRIu64 " op %d vol %u lba %" PRIu64
		"+%" PRIu64 "]: ", r->phase, r->seed, r->sim.drains, r->m.op, r->m.op_vol,
		r->m.op_lba, r->m.op_n);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  replay: crash_sim --seed %" PRIu64 " --only-point %" PRIu64 "\n",
		r->seed, r->sim.drains);
	r->failures++;
	if (g_fail_fast)
		exit(1);
}

static int in_op_range(const struct model *m, uint32_t v, uint64_t lba)
{
	return v == m->op_vol && lba >= m->op_lba && lba < m->op_lba + m->op_n;
}

/* check one key of volume v (slot) in the recovered cache */
static void check_key(struct run *r, struct pmc_cache *c, uint32_t v, int have_vol, uint32_t slot,
		      uint64_t lba, char *buf)
{
	struct model *m = &r->m;
	uint64_t want = m->want[v * m->nlba + lba];
	uint64_t disk = m->disk[v * m->nlba + lba];
	uint64_t alt = want; /* the in-flight op's outcome for this key */
	uint8_t hit = 0;
	uint64_t got;

	if (m->op == OP_WRITE && in_op_range(m, v, lba))
		alt = m->op_version;
	else if (m->op == OP_INVAL && in_op_range(m, v, lba))
		alt = INVALID;
	else if (m->op == OP_VOL_REMOVE && v == m->op_vol)
		alt = INVALID;
	if (have_vol && pmc_cache_read(c, slot, lba, 1, buf, &hit) < 0)
		report(r, "read of vol %u lba %" PRIu64 " failed", v, lba);
	if (!hit) {
		if ((want == INVALID || disk == want) && (alt == INVALID || disk == alt || alt == want))
			return;
		if (want == INVALID || disk == want || alt == INVALID || disk == alt)
			return;
		report(r, "vol %u lba %" PRIu64 ": acknowledged version %" PRIu64
		       " lost (miss, disk has %" PRIu64 ")", v, lba, want, disk);
		return;
	}
	got = block_version(buf, v, lba);
	if (got == INVALID)
		report(r, "vol %u lba %" PRIu64 ": torn or foreign block", v, lba);
	else if (got != want && got != alt)
		report(r, "vol %u lba %" PRIu64 ": holds version %" PRIu64 ", acknowledged %" PRIu64
		       " (in flight %" PRIu64 ")", v, lba, got, want, alt);
}

static void verify_image(struct run *r, char *image)
{
	struct model *m = &r->m;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_err err = {0};
	struct pmc_check_report rep;
	static char buf[BS];
	int rc;

	pmc_pmem_wrap(image, r->sim.size, &simpmem_direct_ops, NULL, &pm);
	rc = pmc_cache_open(pm, 0, &c, &err);
	if (rc) {
		/* only a format cut short may leave no cache (blank or torn
		 * superblocks, refused with a message) */
		if (!(m->op == OP_FORMAT && (rc == -ENODATA || rc == -EUCLEAN)))
			report(r, "recovery failed: %s", err.msg);
		pmc_pmem_close(pm);
		return;
	}
	if (pmc_cache_check(c, &rep, &err))
		report(r, "check after recovery: %s", err.msg);
	for (uint32_t v = 0; v < m->nvols; v++) {
		uint32_t slot = 0;
		int have = pmc_cache_volume_find(c, m->names[v], &slot) == 0;

		if (m->op == OP_NONE || m->op == OP_WRITE || m->op == OP_INVAL || m->op == OP_CLEAN) {
			if (have != m->present[v])
				report(r, "volume %s: present %d after recovery, expected %d",
				       m->names[v], have, m->present[v]);
		}
		for (uint64_t lba = 0; lba < m->nlba; lba++)
			check_key(r, c, v, have, slot, lba, buf);
	}
	/* the recovered cache must go on working: orphans get reclaimed */
	for (uint32_t v = 0; v < m->nvols; v++) {
		uint32_t slot;
		static char w[BS];

		if (pmc_cache_volume_find(c, m->names[v], &slot))
			continue;
		for (uint64_t k = 0; k < 3; k++) {
			uint64_t lba = sim_rand(&r->check_rng) % m->nlba;

			fill_block(w, v, lba, 1000000000ull + k);
			rc = pmc_cache_write(c, slot, lba, 1, w, &err);
			if (rc == -ENOSPC)
				continue;
			if (rc)
				report(r, "write after recovery: %s", err.msg);
			else if (pmc_cache_read(c, slot, lba, 1, buf, NULL) != 1 ||
				 memcmp(buf, w, BS))
				report(r, "write after recovery did not read back");
		}
	}
	if (pmc_cache_check(c, &rep, &err))
		report(r, "check after writes on the recovered cache: %s", err.msg);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
}

static void on_drain(struct simpmem *s, void *arg)
{
	struct run *r = arg;
	uint64_t d = s->drains;

	if (r->only_point ? d != r->only_point
			  : !(r->every_point || (d < r->npick && r->pick[d])))
		return;
	r->crash_points++;
	for (int mode = r->every_point || r->only_point ? 0 : 2; mode < 3; mode++) {
		simpmem_crash_image(s, r->image, mode, &r->check_rng);
		verify_image(r, r->image);
		r->crash_images++;
	}
}

/* --- the workload --- */

static void begin(struct run *r, enum op_kind op, uint32_t v, uint64_t lba, uint64_t n)
{
	r->m.op = op;
	r->m.op_vol = v;
	r->m.op_lba = lba;
	r->m.op_n = n;
}

static void end(struct run *r)
{
	r->m.op = OP_NONE;
}

static uint32_t slot_of(struct run *r, uint32_t v)
{
	uint32_t slot;

	if (pmc_cache_volume_find(r->c, r->m.names[v], &slot)) {
		fprintf(stderr, "FAIL: volume %s vanished\n", r->m.names[v]);
		exit(1);
	}
	return slot;
}

static void do_write(struct run *r, uint32_t v, uint64_t lba, uint64_t n)
{
	struct model *m = &r->m;
	static char buf[8 * BS];
	struct pmc_err err = {0};
	uint64_t ver = ++m->next_version;
	int rc;

	for (uint64_t i = 0; i < n; i++)
		fill_block(buf + i * BS, v, lba + i, ver);
	begin(r, OP_WRITE, v, lba, n);
	m->op_version = ver;
	rc = pmc_cache_write(r->c, slot_of(r, v), lba, (uint32_t)n, buf, &err);
	if (rc == -ENOSPC) {
		/* blocks before the failing one were written: learn which */
		for (uint64_t i = 0; i < n; i++) {
			uint8_t hit;
			static char rb[BS];

			pmc_cache_read(r->c, slot_of(r, v), lba + i, 1, rb, &hit);
			if (hit && block_version(rb, v, lba + i) == ver)
				m->want[v * m->nlba + lba + i] = ver;
		}
	} else if (rc) {
		fprintf(stderr, "FAIL: write: %s\n", err.msg);
		exit(1);
	} else {
		for (uint64_t i = 0; i < n; i++)
			m->want[v * m->nlba + lba + i] = ver;
	}
	end(r);
}

static void do_inval(struct run *r, uint32_t v, uint64_t lba, uint64_t n)
{
	begin(r, OP_INVAL, v, lba, n);
	if (pmc_cache_invalidate(r->c, slot_of(r, v), lba, (uint32_t)n)) {
		fprintf(stderr, "FAIL: invalidate\n");
		exit(1);
	}
	for (uint64_t i = 0; i < n; i++)
		r->m.want[v * r->m.nlba + lba + i] = INVALID;
	end(r);
}

/* write-back of one key: data to the disk model first, then mark clean */
static void do_clean(struct run *r, uint32_t v, uint64_t lba, int overwrite_between)
{
	struct model *m = &r->m;
	uint32_t slot = slot_of(r, v);
	enum pmc_block_state st;
	uint64_t blk, ver;
	int rc;

	if (pmc_cache_lookup_pin(r->c, slot, lba, &blk, &st))
		return;
	ver = block_version(pmc_cache_block_data(r->c, blk), v, lba);
	if (ver == INVALID) {
		fprintf(stderr, "FAIL: torn block in the live cache\n");
		exit(1);
	}
	m->disk[v * m->nlba + lba] = ver;
	if (overwrite_between) {
		do_write(r, v, lba, 1);
		/* a full cache may refuse the overwrite */
		overwrite_between = m->want[v * m->nlba + lba] == m->next_version;
	}
	begin(r, OP_CLEAN, v, lba, 1);
	rc = pmc_cache_mark_clean(r->c, slot, lba, blk);
	if (overwrite_between ? rc != -ESTALE : (rc != 0 && !(rc == -ESTALE && st == PMC_BLK_CLEAN))) {
		fprintf(stderr, "FAIL: mark_clean returned %d (overwritten: %d)\n", rc,
			overwrite_between);
		exit(1);
	}
	end(r);
	pmc_cache_unpin(r->c, blk);
}

/* write-back of a run of blocks marked clean together (one barrier) */
static void do_clean_run(struct run *r, uint32_t v, uint64_t lba, uint64_t n)
{
	struct model *m = &r->m;
	uint32_t slot = slot_of(r, v);
	uint64_t blk[4], lbas[4];
	enum pmc_block_state st[4];
	int res[4];
	uint32_t k = 0;

	for (uint64_t i = 0; i < n && k < 4; i++) {
		uint64_t ver;

		if (pmc_cache_lookup_pin(r->c, slot, lba + i, &blk[k], &st[k]))
			continue;
		ver = block_version(pmc_cache_block_data(r->c, blk[k]), v, lba + i);
		if (ver == INVALID) {
			fprintf(stderr, "FAIL: torn block in the live cache\n");
			exit(1);
		}
		m->disk[v * m->nlba + lba + i] = ver;
		lbas[k++] = lba + i;
	}
	if (!k)
		return;
	begin(r, OP_CLEAN, v, lba, n);
	if (pmc_cache_mark_clean_n(r->c, slot, lbas, blk, k, res)) {
		fprintf(stderr, "FAIL: mark_clean_n refused\n");
		exit(1);
	}
	for (uint32_t i = 0; i < k; i++) {
		if (res[i] != 0 && !(res[i] == -ESTALE && st[i] == PMC_BLK_CLEAN)) {
			fprintf(stderr, "FAIL: mark_clean_n block %u returned %d\n", i, res[i]);
			exit(1);
		}
	}
	end(r);
	for (uint32_t i = 0; i < k; i++)
		pmc_cache_unpin(r->c, blk[i]);
}

/* read misses of [lba, lba + n) whose version is on the disk model
 * (written back, then evicted): the disk's data copied into a new block,
 * not flushed, and published clean as a fill */
static void do_fill(struct run *r, uint32_t v, uint64_t lba, uint64_t n)
{
	struct model *m = &r->m;
	uint32_t slot = slot_of(r, v);
	static char buf[BS];

	for (uint64_t i = 0; i < n; i++) {
		uint64_t key = v * m->nlba + lba + i, blk;
		enum pmc_block_state st;
		uint32_t snap;
		int rc;

		if (m->want[key] == INVALID || m->disk[key] != m->want[key])
			continue;
		snap = pmc_cache_fill_seq(r->c, slot, lba + i);
		if (pmc_cache_lookup_pin(r->c, slot, lba + i, &blk, &st) == 0) {
			pmc_cache_unpin(r->c, blk);
			continue;
		}
		if (pmc_cache_alloc(r->c, PMC_ALLOC_FILL, &blk))
			continue;
		fill_block(buf, v, lba + i, m->disk[key]);
		pmc_pmem_copy(r->sim.pm, pmc_cache_block_data(r->c, blk), buf, BS);
		begin(r, OP_FILL, v, lba + i, 1);
		rc = pmc_cache_publish_fill(r->c, slot, lba + i, blk, snap);
		if (rc) {
			fprintf(stderr, "FAIL: publish_fill of vol %u lba %" PRIu64 " returned %d\n", v,
				lba + i, rc);
			exit(1);
		}
		end(r);
		pmc_cache_unpin(r->c, blk);
		r->fills++;
	}
}

static void do_vol_cycle(struct run *r, uint32_t v)
{
	struct model *m = &r->m;
	struct pmc_err err = {0};
	uint32_t slot;

	for (uint64_t lba = 0; lba < m->nlba; lba++)
		do_clean(r, v, lba, 0);
	begin(r, OP_VOL_REMOVE, v, 0, m->nlba);
	if (pmc_cache_volume_remove(r->c, slot_of(r, v), &err)) {
		fprintf(stderr, "FAIL: volume remove: %s\n", err.msg);
		exit(1);
	}
	m->present[v] = 0;
	for (uint64_t lba = 0; lba < m->nlba; lba++)
		m->want[v * m->nlba + lba] = INVALID;
	end(r);
	begin(r, OP_VOL_ADD, v, 0, 0);
	if (pmc_cache_volume_add(r->c, m->names[v], "/dev/sim", m->nlba * BS, &slot, &err)) {
		fprintf(stderr, "FAIL: volume add: %s\n", err.msg);
		exit(1);
	}
	m->present[v] = 1;
	end(r);
}

static void workload(struct run *r, uint64_t nblocks_pmem, uint32_t nvols, uint64_t nlba,
		     uint64_t ops)
{
	struct model *m = &r->m;
	struct pmc_err err = {0};
	size_t size = (2u << 20) + nblocks_pmem * BS;
	uint32_t slot;

	memset(m, 0, sizeof(*m));
	m->nvols = nvols;
	m->nlba = nlba;
	m->want = malloc(nvols * nlba * sizeof(uint64_t));
	m->disk = calloc(nvols * nlba, sizeof(uint64_t));
	for (uint64_t i = 0; i < nvols * nlba; i++)
		m->want[i] = INVALID;
	if (simpmem_init(&r->sim, size)) {
		fprintf(stderr, "FAIL: out of memory\n");
		exit(1);
	}
	r->image = aligned_alloc(4096, size);
	r->sim.on_drain = on_drain;
	r->sim.arg = r;

	begin(r, OP_FORMAT, 0, 0, 0);
	if (pmc_cache_format(r->sim.pm, &(struct pmc_format_opts){.max_volumes = 8}, &err) ||
	    pmc_cache_open(r->sim.pm, 0, &r->c, &err)) {
		fprintf(stderr, "FAIL: format/open: %s\n", err.msg);
		exit(1);
	}
	end(r);
	for (uint32_t v = 0; v < nvols; v++) {
		snprintf(m->names[v], sizeof(m->names[v]), "vol%u", v);
		begin(r, OP_VOL_ADD, v, 0, 0);
		if (pmc_cache_volume_add(r->c, m->names[v], "/dev/sim", nlba * BS, &slot, &err)) {
			fprintf(stderr, "FAIL: volume add: %s\n", err.msg);
			exit(1);
		}
		m->present[v] = 1;
		end(r);
	}
	for (uint64_t i = 0; i < ops; i++) {
		uint64_t x = sim_rand(&r->rng);
		uint32_t v = (uint32_t)(x % nvols);
		uint64_t lba = (x >> 8) % nlba;
		uint64_t n = 1 + (x >> 32) % 4;
		unsigned what = (unsigned)((x >> 40) % 100);

		if (lba + n > nlba)
			n = nlba - lba;
		if (what < 50)
			do_write(r, v, lba, n);
		else if (what < 62)
			do_inval(r, v, lba, n);
		else if (what < 75 && n > 1)
			do_clean_run(r, v, lba, n);
		else if (what < 96)
			do_clean(r, v, lba, what >= 93);
		else if (what == 96 && i % 7 == 0)
			do_vol_cycle(r, v);
		else if (what >= 96)
			do_fill(r, v, lba, n);
		else
			do_write(r, v, lba, 1);
	}
	/* the end state, too: close cleanly (its persist points are crash
	 * points like any other) and reopen */
	{
		struct pmc_check_report rep;

		if (pmc_cache_check(r->c, &rep, &err)) {
			fprintf(stderr, "FAIL: live check: %s\n", err.msg);
			exit(1);
		}
	}
	pmc_cache_close(r->c);
	verify_image(r, r->sim.dura);
	simpmem_fini(&r->sim);
	free(r->image);
	free(m->want);
	free(m->disk);
}

int main(int argc, char **argv)
{
	struct run r = {0};
	uint64_t points = 10000, ops = 9000;
	uint64_t small_ops = 150;
	struct timespec t0, t1;

	r.seed = (uint64_t)time(NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			r.seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--points") && i + 1 < argc)
			points = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--only-point") && i + 1 < argc)
			r.only_point = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--keep-going"))
			g_fail_fast = 0;
		else {
			fprintf(stderr, "usage: crash_sim [--seed S] [--points N] [--ops N] "
					"[--only-point K] [--keep-going]\n");
			return 2;
		}
	}
	printf("seed: %" PRIu64 "\n", r.seed);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	/* phase 1: every persist point of a small workload, three landings each */
	r.phase = "exhaustive";
	r.rng = r.seed;
	r.check_rng = ~r.seed;
	r.every_point = !r.only_point;
	workload(&r, 24, 2, 20, small_ops);
	printf("exhaustive: %" PRIu64 " persist points, %" PRIu64 " crash images\n",
	       r.crash_points, r.crash_images);
	fflush(stdout);

	/* phase 2: a larger workload, random points; a dry run counts drains */
	if (!r.only_point) {
		uint64_t p1 = r.crash_points, i1 = r.crash_images, total;
		struct run dry = {0};

		dry.phase = "count";
		dry.seed = r.seed;
		dry.rng = r.seed ^ 0x5151;
		dry.only_point = UINT64_MAX;
		workload(&dry, 96, 3, 64, ops);
		total = dry.sim.drains;
		if (total < points) {
			fprintf(stderr, "FAIL: the large workload has %" PRIu64
				" persist points, fewer than %" PRIu64 "; raise --ops\n", total, points);
			return 1;
		}
		r.phase = "random";
		r.every_point = 0;
		r.rng = r.seed ^ 0x5151;
		r.npick = total + 1;
		r.pick = calloc(r.npick, 1);
		{
			uint64_t st = r.seed ^ 0xabcdef, chosen = 0;

			while (chosen < points) {
				uint64_t d = 1 + sim_rand(&st) % total;

				if (!r.pick[d]) {
					r.pick[d] = 1;
					chosen++;
				}
			}
		}
		workload(&r, 96, 3, 64, ops);
		printf("random: %" PRIu64 " of %" PRIu64 " persist points, %" PRIu64
		       " crash images\n", r.crash_points - p1, total, r.crash_images - i1);
		free(r.pick);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("crash_points: %" PRIu64 "\n", r.crash_points);
	printf("crash_images: %" PRIu64 "\n", r.crash_images);
	printf("fills: %" PRIu64 "\n", r.fills);
	printf("failures: %" PRIu64 "\n", r.failures);
	if (!r.only_point && !r.fills) {
		fprintf(stderr, "FAIL: the workload made no fill: the fill path went untested\n");
		return 1;
	}
	printf("seed: %" PRIu64 "\n", r.seed);
	printf("elapsed_s: %.1f\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return r.failures ? 1 : 0;
}
