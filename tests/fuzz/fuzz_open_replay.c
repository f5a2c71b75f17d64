/* fuzz_open_replay.c - runs the fuzz_open target without libFuzzer, so the
 * normal (gcc) build checks it as a regression test (ctest label fuzz).
 *
 * Every file of the corpus (tests/fuzz/corpus/ unless paths are given) goes
 * through LLVMFuzzerTestOneInput, then N inputs made from a seeded random
 * generator: structured patches of the superblocks, volume slots,
 * descriptors and buckets (aimed at their fields, with boundary values),
 * bit flips of corpus files, raw superblock-like headers and plain noise.
 * A failure (the target aborts, a sanitizer reports, or one input runs
 * longer than the alarm) prints the input's name and the seed, saves the
 * input as fuzz_open-fail-*.bin in the working directory (add it to the
 * corpus once fixed) and exits 1.
 *
 * --write-seeds DIR writes the seed corpus: one small named input per kind
 * of corruption the open must refuse or survive. Regenerate it when the
 * base images or the on-media layout change.
 *
 * Usage: fuzz_open_replay [--seed S] [--runs N] [--write-seeds DIR] [-v]
 *                         [FILE|DIR]...
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* with ASan, name the input before a sanitizer report ends the process */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_SANITIZER_DEATH_CALLBACK 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_SANITIZER_DEATH_CALLBACK 1
#endif
#ifdef HAVE_SANITIZER_DEATH_CALLBACK
#include <sanitizer/common_interface_defs.h>
#endif

#include "fuzz.h"
#include "simpmem.h"

#define FZ_MAX_INPUT 4096u /* as run-fuzz.sh's -max_len */
#define ALARM_SECONDS 20u  /* one input; a hang otherwise */
#define DEFAULT_RUNS 10000u

#ifndef PMC_FUZZ_CORPUS
#define PMC_FUZZ_CORPUS "tests/fuzz/corpus"
#endif

/* the input running now, for the failure handlers */
static char cur_name[512];
static uint8_t cur_buf[FZ_MAX_INPUT];
static size_t cur_len;
static char cur_save[128]; /* where report_failure() saves it */

static void put(const char *s)
{
	ssize_t rc = write(2, s, strlen(s));

	(void)rc;
}

/* async-signal-safe: name the input, save it, and leave */
static void report_failure(void)
{
	int fd;

	put("fuzz_open_replay: FAIL on input ");
	put(cur_name);
	put("\n");
	fd = open(cur_save, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		ssize_t rc = write(fd, cur_buf, cur_len);

		(void)rc;
		close(fd);
		put("fuzz_open_replay: input saved as ");
		put(cur_save);
		put(" (replay: fuzz_open_replay -v FILE)\n");
	}
}

static void on_signal(int sig)
{
	if (sig == SIGALRM)
		put("fuzz_open_replay: input runs too long (a hang?)\n");
	report_failure();
	_exit(1);
}

#ifdef HAVE_SANITIZER_DEATH_CALLBACK
static void on_sanitizer_death(void)
{
	report_failure();
}
#endif

static void run_one(const char *name, const char *save, const uint8_t *data, size_t len)
{
	snprintf(cur_name, sizeof(cur_name), "%s", name);
	snprintf(cur_save, sizeof(cur_save), "fuzz_open-fail-%s.bin", save);
	cur_len = len < FZ_MAX_INPUT ? len : FZ_MAX_INPUT;
	memcpy(cur_buf, data, cur_len);
	if (fz_verbose)
		printf("%s (%zu bytes)\n", name, cur_len);
	alarm(ALARM_SECONDS);
	LLVMFuzzerTestOneInput(cur_buf, cur_len);
	alarm(0);
}

/* --- the corpus --- */

struct corpus {
	uint8_t **data;
	size_t *len;
	size_t n;
};

static void run_file(struct corpus *cp, const char *path)
{
	uint8_t *buf = malloc(FZ_MAX_INPUT);
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f || !buf) {
		fprintf(stderr, "fuzz_open_replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	n = fread(buf, 1, FZ_MAX_INPUT, f);
	fclose(f);
	run_one(path, "corpus", buf, n);
	cp->data = realloc(cp->data, (cp->n + 1) * sizeof(*cp->data));
	cp->len = realloc(cp->len, (cp->n + 1) * sizeof(*cp->len));
	if (!cp->data || !cp->len)
		exit(1);
	cp->data[cp->n] = buf;
	cp->len[cp->n++] = n;
}

static int not_hidden(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

static void run_path(struct corpus *cp, const char *path)
{
	struct dirent **ents;
	struct stat st;
	char sub[1024];
	int n;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "fuzz_open_replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (!S_ISDIR(st.st_mode)) {
		run_file(cp, path);
		return;
	}
	n = scandir(path, &ents, not_hidden, alphasort);
	if (n < 0) {
		fprintf(stderr, "fuzz_open_replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s/%s", path, ents[i]->d_name);
		if (stat(sub, &st) == 0 && S_ISREG(st.st_mode))
			run_file(cp, sub);
		free(ents[i]);
	}
	free(ents);
}

/* --- building inputs (seeds and random ones) --- */

struct in {
	uint8_t b[FZ_MAX_INPUT];
	size_t n;
};

static void in_mode(struct in *x, unsigned mode)
{
	x->b[0] = (uint8_t)mode;
	x->n = 1;
}

static void in_bytes(struct in *x, const void *p, size_t len)
{
	if (x->n + len > sizeof(x->b))
		len = sizeof(x->b) - x->n;
	memcpy(x->b + x->n, p, len);
	x->n += len;
}

static void in_off(struct in *x, uint64_t off)
{
	uint8_t o[3] = {(uint8_t)off, (uint8_t)(off >> 8), (uint8_t)(off >> 16)};

	in_bytes(x, o, 3);
}

static void in_write(struct in *x, uint64_t off, const void *p, size_t len)
{
	uint8_t op = FZ_OP_WRITE, l = (uint8_t)len;

	in_bytes(x, &op, 1);
	in_off(x, off);
	in_bytes(x, &l, 1);
	in_bytes(x, p, l);
}

static void in_u64(struct in *x, uint64_t off, uint64_t v)
{
	in_write(x, off, &v, 8);
}

static void in_u32(struct in *x, uint64_t off, uint32_t v)
{
	in_write(x, off, &v, 4);
}

static void in_fill(struct in *x, uint64_t off, size_t len, uint8_t c)
{
	uint8_t op = FZ_OP_FILL, a[3] = {(uint8_t)len, (uint8_t)(len >> 8), c};

	in_bytes(x, &op, 1);
	in_off(x, off);
	in_bytes(x, a, 3);
}

static void in_copy(struct in *x, uint64_t dst, uint64_t src, size_t len)
{
	uint8_t op = FZ_OP_COPY, l[2] = {(uint8_t)len, (uint8_t)(len >> 8)};

	in_bytes(x, &op, 1);
	in_off(x, dst);
	in_off(x, src);
	in_bytes(x, l, 2);
}

static void in_add(struct in *x, uint64_t off, int8_t delta)
{
	uint8_t op = FZ_OP_ADD64;

	in_bytes(x, &op, 1);
	in_off(x, off);
	in_bytes(x, &delta, 1);
}

#define SB_FIELD(copy, f) ((uint64_t)(copy)*PMC_SB_SLOT + offsetof(struct pmc_sb, f))
#define VOL_FIELD(g, i, f)                                                                         \
	((g)->vol_off + (uint64_t)(i) * sizeof(struct pmc_vol) + offsetof(struct pmc_vol, f))
#define DESC_FIELD(g, i, f)                                                                        \
	((g)->desc_off + (uint64_t)(i) * sizeof(struct pmc_desc) + offsetof(struct pmc_desc, f))
#define BUCKET(g, i) ((g)->index_off + (uint64_t)(i) * sizeof(pmc_bucket_t))

static uint64_t img_u64(const struct fz_base *b, uint64_t off)
{
	uint64_t v;

	memcpy(&v, b->img + off, 8);
	return v;
}

/* the n-th non-empty bucket of the base image (modulo their number), or
 * for n < 0 the first empty one */
static uint64_t bucket_pick(const struct fz_base *b, long n)
{
	const struct pmc_geom *g = &b->g;
	uint64_t used = 0, i;

	for (i = 0; i < g->nr_buckets; i++)
		used += img_u64(b, BUCKET(g, i)) != 0;
	for (i = 0; i < g->nr_buckets; i++) {
		uint64_t v = img_u64(b, BUCKET(g, i));

		if (n < 0 ? v == 0 : v != 0 && n-- % (long)used == 0)
			return i;
	}
	return 0;
}

/* the last block of bucket i's chain in the base image */
static uint64_t chain_tail(const struct fz_base *b, uint64_t i)
{
	const struct pmc_geom *g = &b->g;
	uint64_t v = img_u64(b, BUCKET(g, i)), last = v - 1;

	for (uint64_t steps = 0; v && steps < g->nr_blocks; steps++) {
		last = v - 1;
		v = img_u64(b, DESC_FIELD(g, last, next));
	}
	return last;
}

static void write_seed(const char *dir, const char *name, const struct in *x)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/open-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(x->b, 1, x->n, f) != x->n || fclose(f) != 0) {
		fprintf(stderr, "fuzz_open_replay: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	printf("%s: %zu bytes\n", path, x->n);
}

#define FIX_ALL (FZ_FIX_SB | FZ_FIX_VOL | FZ_FIX_DESC)

static void write_seeds(const char *dir)
{
	const struct fz_base *b0 = fz_open_base(0), *b1 = fz_open_base(1);
	const struct pmc_geom *g = &b0->g;
	struct in x;
	uint64_t bk, head, tail;
	static const char elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
	char foreign[1024];
	uint64_t epoch;

	in_mode(&x, 0);
	write_seed(dir, "valid-clean", &x);
	in_mode(&x, 1);
	write_seed(dir, "valid-crashed", &x);
	in_mode(&x, 2);
	write_seed(dir, "valid-8k", &x);
	in_mode(&x, 3);
	write_seed(dir, "valid-4096-slots", &x);

	/* superblocks */
	in_mode(&x, 0);
	in_fill(&x, 0, 2 * PMC_SB_SLOT, 0);
	write_seed(dir, "sb-blank", &x);
	memset(foreign, 0, sizeof(foreign));
	memcpy(foreign, elf, sizeof(elf));
	for (size_t i = 64; i < sizeof(foreign); i++)
		foreign[i] = (char)(i * 7);
	in_mode(&x, FZ_RAW);
	in_bytes(&x, foreign, sizeof(foreign));
	write_seed(dir, "sb-foreign-copy0-raw", &x);
	in_mode(&x, 1);
	in_fill(&x, 0, 512, 0xa5);
	in_fill(&x, PMC_SB_SLOT, 512, 0xa5);
	write_seed(dir, "sb-foreign-both", &x);
	in_mode(&x, 0);
	in_u32(&x, SB_FIELD(0, csum), 0xdeadbeef);
	write_seed(dir, "sb-csum-copy0", &x);
	in_mode(&x, 1);
	in_u32(&x, SB_FIELD(1, csum), 0xdeadbeef);
	write_seed(dir, "sb-csum-copy1", &x);
	in_mode(&x, 0);
	in_add(&x, SB_FIELD(0, seq), 1);
	in_add(&x, SB_FIELD(1, seq), 1);
	write_seed(dir, "sb-csum-both", &x);
	in_mode(&x, 0);
	in_fill(&x, SB_FIELD(0, magic), 8, 0);
	in_add(&x, SB_FIELD(1, uuid), 1);
	write_seed(dir, "sb-blank0-csum1", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u32(&x, SB_FIELD(0, major), PMC_FORMAT_MAJOR + 1);
	in_u32(&x, SB_FIELD(1, major), PMC_FORMAT_MAJOR + 1);
	write_seed(dir, "sb-major-newer", &x);
	in_mode(&x, FZ_FIX_SB | 1);
	in_u32(&x, SB_FIELD(0, major), 0);
	in_u32(&x, SB_FIELD(1, major), 0);
	write_seed(dir, "sb-major-older", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u32(&x, SB_FIELD(0, major), PMC_FORMAT_MAJOR + 1);
	write_seed(dir, "sb-major-newer-copy0", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u64(&x, SB_FIELD(0, incompat), 1ull << 63);
	in_u64(&x, SB_FIELD(1, incompat), 1);
	write_seed(dir, "sb-incompat", &x);
	in_mode(&x, FZ_FIX_SB | 1);
	in_u64(&x, SB_FIELD(0, ro_compat), 2);
	in_u64(&x, SB_FIELD(1, ro_compat), 2);
	write_seed(dir, "sb-ro-compat", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u64(&x, SB_FIELD(0, compat), ~0ull);
	in_u64(&x, SB_FIELD(1, compat), ~0ull);
	write_seed(dir, "sb-compat", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u64(&x, SB_FIELD(0, pmem_size), FZ_IMG_SIZE + 4096);
	in_u64(&x, SB_FIELD(1, pmem_size), FZ_IMG_SIZE + 4096);
	write_seed(dir, "size-field", &x);
	in_mode(&x, FZ_SIZE_LESS << FZ_SIZE_SHIFT);
	write_seed(dir, "size-smaller", &x);
	in_mode(&x, FZ_SIZE_HEAD << FZ_SIZE_SHIFT | 2);
	write_seed(dir, "size-head", &x);
	in_mode(&x, FZ_SIZE_TINY << FZ_SIZE_SHIFT);
	write_seed(dir, "size-tiny", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u32(&x, SB_FIELD(0, block_size), 3000);
	in_u32(&x, SB_FIELD(1, block_size), 3000);
	write_seed(dir, "geom-block-size", &x);
	in_mode(&x, FZ_FIX_SB | 3);
	in_u32(&x, SB_FIELD(0, max_volumes), 0);
	in_u32(&x, SB_FIELD(1, max_volumes), 5000);
	write_seed(dir, "geom-max-volumes", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u64(&x, SB_FIELD(0, desc_off), g->desc_off + 4096);
	in_u64(&x, SB_FIELD(1, nr_buckets), g->nr_buckets * 2);
	write_seed(dir, "geom-fields", &x);
	in_mode(&x, FZ_FIX_SB | 2);
	in_u32(&x, SB_FIELD(0, block_size), 4096);
	in_u32(&x, SB_FIELD(1, block_size), 4096);
	write_seed(dir, "geom-8k-as-4k", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u32(&x, SB_FIELD(0, clean), 2);
	in_u32(&x, SB_FIELD(1, clean), 7);
	write_seed(dir, "sb-clean-flag", &x);
	in_mode(&x, FZ_FIX_SB);
	in_u64(&x, SB_FIELD(0, seq), UINT64_MAX);
	write_seed(dir, "sb-seq-max", &x);
	in_mode(&x, FZ_FIX_SB | 1);
	in_u64(&x, SB_FIELD(1, seq), UINT64_MAX);
	write_seed(dir, "sb-seq-max-copy1", &x);
	in_mode(&x, FZ_FIX_SB | 1);
	in_u64(&x, SB_FIELD(0, boot_epoch), UINT32_MAX);
	in_u64(&x, SB_FIELD(1, boot_epoch), UINT32_MAX);
	write_seed(dir, "sb-epoch-wrap", &x);
	in_mode(&x, FZ_FIX_SB | FZ_RAW);
	in_bytes(&x, b0->img + PMC_SB_SLOT, 512);
	write_seed(dir, "sb-raw-copy1-as-copy0", &x);

	/* volume table */
	in_mode(&x, FZ_FIX_VOL);
	in_u64(&x, VOL_FIELD(g, 1, gen_state), PMC_VOL_GS(0, 7));
	write_seed(dir, "vol-bad-state", &x);
	in_mode(&x, 0);
	in_add(&x, VOL_FIELD(g, 0, size_bytes), 1);
	write_seed(dir, "vol-bad-csum", &x);
	in_mode(&x, FZ_FIX_VOL);
	in_write(&x, VOL_FIELD(g, 0, name), "a/b\n", 5);
	write_seed(dir, "vol-bad-name", &x);
	in_mode(&x, FZ_FIX_VOL);
	in_write(&x, VOL_FIELD(g, 3, name), "z", 2);
	in_fill(&x, VOL_FIELD(g, 3, disk), 128, 'd');
	in_u64(&x, VOL_FIELD(g, 3, gen_state), PMC_VOL_GS(3, PMC_VOL_ACTIVE));
	write_seed(dir, "vol-unterminated", &x);
	in_mode(&x, 0);
	in_copy(&x, VOL_FIELD(g, 2, gen_state), VOL_FIELD(g, 0, gen_state), sizeof(struct pmc_vol));
	write_seed(dir, "vol-dup-name", &x);
	in_mode(&x, FZ_FIX_VOL);
	in_u64(&x, VOL_FIELD(g, 0, size_bytes), UINT64_MAX);
	in_u64(&x, VOL_FIELD(g, 1, size_bytes), 4095);
	write_seed(dir, "vol-sizes", &x);
	in_mode(&x, 0);
	in_u64(&x, VOL_FIELD(g, 0, clean_nr_dirty), 12345);
	in_u64(&x, VOL_FIELD(g, 1, clean_nr_clean), UINT64_MAX);
	write_seed(dir, "vol-counters", &x);
	in_mode(&x, 0); /* slot 2 back to vol2's generation: vol3's blocks stale */
	in_u64(&x, VOL_FIELD(g, 2, gen_state), PMC_VOL_GS(0, PMC_VOL_ACTIVE));
	write_seed(dir, "vol-generation", &x);
	in_mode(&x, FZ_FIX_VOL | 3);
	in_u64(&x, VOL_FIELD(&fz_open_base(3)->g, 4095, gen_state), PMC_VOL_GS(9, 1));
	in_write(&x, VOL_FIELD(&fz_open_base(3)->g, 4095, name), "b", 2);
	write_seed(dir, "vol-last-slot-dup", &x);

	/* index chains */
	bk = bucket_pick(b0, 0);
	head = img_u64(b0, BUCKET(g, bk)) - 1;
	tail = chain_tail(b0, bk);
	in_mode(&x, 0);
	in_u64(&x, DESC_FIELD(g, head, next), head + 1);
	write_seed(dir, "chain-self-loop", &x);
	in_mode(&x, 0);
	in_u64(&x, DESC_FIELD(g, tail, next), head + 1);
	write_seed(dir, "chain-loop", &x);
	in_mode(&x, 1);
	bk = bucket_pick(b1, 3);
	in_u64(&x, DESC_FIELD(&b1->g, chain_tail(b1, bk), next), img_u64(b1, BUCKET(&b1->g, bk)));
	write_seed(dir, "chain-loop-crashed", &x);
	in_mode(&x, 0);
	in_u64(&x, BUCKET(g, bucket_pick(b0, 1)), g->nr_blocks + 1);
	in_u64(&x, DESC_FIELD(g, tail, next), UINT64_MAX);
	write_seed(dir, "chain-out-of-range", &x);
	in_mode(&x, 0);
	in_u64(&x, BUCKET(g, bucket_pick(b0, -1)), g->nr_blocks);
	write_seed(dir, "chain-last-block", &x);
	in_mode(&x, 0);
	in_u64(&x, BUCKET(g, bucket_pick(b0, -1)), head + 1);
	write_seed(dir, "chain-shared", &x);
	in_mode(&x, FZ_FIX_DESC);
	in_u32(&x, DESC_FIELD(g, head, vol), UINT32_MAX);
	in_u64(&x, DESC_FIELD(g, tail, lba), 1);
	write_seed(dir, "desc-vol-lba", &x);
	in_mode(&x, 0);
	in_u64(&x, DESC_FIELD(g, head, state), 0x102);
	in_add(&x, DESC_FIELD(g, tail, birth_ns), 1);
	write_seed(dir, "desc-state-csum", &x);
	in_mode(&x, FZ_FIX_DESC);
	in_copy(&x, DESC_FIELD(g, tail, lba), DESC_FIELD(g, head, lba), 40);
	write_seed(dir, "desc-twin", &x);
	in_mode(&x, 1); /* pins of this epoch and of the next one */
	epoch = img_u64(b1, SB_FIELD(0, boot_epoch));
	if (img_u64(b1, SB_FIELD(1, boot_epoch)) > epoch)
		epoch = img_u64(b1, SB_FIELD(1, boot_epoch));
	for (uint64_t i = 0; i < b1->g.nr_blocks; i += 2)
		in_u64(&x, DESC_FIELD(&b1->g, i, ref),
		       PMC_REF(epoch + i % 4 / 2, UINT32_MAX - i % 3));
	write_seed(dir, "desc-pins", &x);
	in_mode(&x, FZ_FIX_DESC | FZ_FIX_VOL);
	in_fill(&x, g->desc_off, g->nr_blocks * sizeof(struct pmc_desc), 0);
	write_seed(dir, "desc-all-zero", &x);
	in_mode(&x, 2);
	in_fill(&x, fz_open_base(2)->g.index_off, 64 * 8, 0x01);
	write_seed(dir, "index-all-one", &x);
}

/* --- random inputs --- */

static uint64_t rnd(uint64_t *s, uint64_t n)
{
	return n ? sim_rand(s) % n : 0;
}

/* a value that tends to matter for a field */
static uint64_t interesting(uint64_t *s, const struct pmc_geom *g)
{
	static const uint64_t fixed[] = {
	    0,	       1,	  2, 3, 7, 0xff, 0x100, 4096, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
	    INT64_MAX, UINT64_MAX};

	switch (rnd(s, 4)) {
	case 0:
		return fixed[rnd(s, sizeof(fixed) / sizeof(fixed[0]))];
	case 1:
		return g->nr_blocks + rnd(s, 3) - 1;
	case 2:
		return rnd(s, g->nr_blocks + 1);
	default:
		return sim_rand(s);
	}
}

/* an offset aimed at a field of some structure */
static uint64_t target(uint64_t *s, const struct pmc_geom *g)
{
	switch (rnd(s, 4)) {
	case 0:
		return rnd(s, 2) * PMC_SB_SLOT + rnd(s, sizeof(struct pmc_sb) / 8) * 8;
	case 1:
		return VOL_FIELD(g, rnd(s, g->max_volumes < 8 ? g->max_volumes : 8), gen_state) +
		       rnd(s, sizeof(struct pmc_vol) / 8) * 8;
	case 2:
		return DESC_FIELD(g, rnd(s, g->nr_blocks), lba) +
		       rnd(s, sizeof(struct pmc_desc) / 8) * 8;
	default:
		return BUCKET(g, rnd(s, g->nr_buckets));
	}
}

static void gen(uint64_t *s, const struct corpus *cp, struct in *x)
{
	unsigned kind = (unsigned)rnd(s, 8), mode = (unsigned)rnd(s, 4);
	const struct fz_base *b;

	if (kind <= 3) { /* structured patches, mostly with fixed checksums */
		mode |= rnd(s, 4) ? FIX_ALL : (unsigned)rnd(s, 8) << 3;
		if (rnd(s, 16) == 0)
			mode |= (unsigned)rnd(s, 4) << FZ_SIZE_SHIFT;
		in_mode(x, mode);
		b = fz_open_base(mode & FZ_BASE_MASK);
		for (uint64_t k = 1 + rnd(s, 6); k > 0; k--) {
			uint64_t off = target(s, &b->g);

			switch (rnd(s, 5)) {
			case 0:
				in_add(x, off, (int8_t)(rnd(s, 5) - 2));
				break;
			case 1:
				in_u32(x, off + 4 * rnd(s, 2), (uint32_t)interesting(s, &b->g));
				break;
			case 2:
				in_copy(x, off, target(s, &b->g), 8 * (1 + rnd(s, 8)));
				break;
			default:
				in_u64(x, off, interesting(s, &b->g));
				break;
			}
		}
	} else if (kind <= 5 && cp->n) { /* bit flips of a corpus file */
		size_t i = (size_t)rnd(s, cp->n);

		memcpy(x->b, cp->data[i], cp->len[i]);
		x->n = cp->len[i];
		if (x->n == 0)
			x->b[x->n++] = 0;
		for (uint64_t k = 1 + rnd(s, 8); k > 0; k--)
			x->b[rnd(s, x->n)] ^= (uint8_t)(1u << rnd(s, 8));
	} else if (kind == 6) { /* raw: a real superblock, slightly off */
		b = fz_open_base(mode);
		in_mode(x, mode | FZ_RAW | (rnd(s, 4) ? FZ_FIX_SB : 0));
		in_bytes(x, b->img, rnd(s, 2) ? sizeof(struct pmc_sb) : FZ_MAX_INPUT);
		for (uint64_t k = 1 + rnd(s, 4); k > 0; k--)
			x->b[1 + rnd(s, 512)] = (uint8_t)sim_rand(s);
	} else { /* noise */
		x->n = (size_t)rnd(s, 600);
		for (size_t i = 0; i < x->n; i++)
			x->b[i] = (uint8_t)sim_rand(s);
	}
}

int main(int argc, char **argv)
{
	struct corpus cp = {0};
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32), runs = DEFAULT_RUNS;
	const char *seeds_dir = NULL;
	int npaths = 0;
	struct in x;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--write-seeds") && i + 1 < argc) {
			seeds_dir = argv[++i];
		} else if (!strcmp(argv[i], "-v")) {
			fz_verbose = 1;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: fuzz_open_replay [--seed S] [--runs N] "
					"[--write-seeds DIR] [-v] [FILE|DIR]...\n");
			return 2;
		} else {
			argv[++npaths] = argv[i];
		}
	}
	fz_open_base(0);
	if (seeds_dir) {
		write_seeds(seeds_dir);
		return 0;
	}
	signal(SIGABRT, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGILL, on_signal);
	signal(SIGALRM, on_signal);
#ifdef HAVE_SANITIZER_DEATH_CALLBACK
	__sanitizer_set_death_callback(on_sanitizer_death);
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("seed: %" PRIu64 "\n", seed);
	if (npaths == 0)
		run_path(&cp, PMC_FUZZ_CORPUS);
	for (int i = 1; i <= npaths; i++)
		run_path(&cp, argv[i]);
	printf("corpus: %zu inputs passed\n", cp.n);

	for (uint64_t i = 0; i < runs; i++) {
		uint64_t s = seed + i * 0x9e3779b97f4a7c15ull;
		char name[96], save[64];

		memset(&x, 0, sizeof(x));
		gen(&s, &cp, &x);
		snprintf(name, sizeof(name), "random #%" PRIu64 " of seed %" PRIu64, i, seed);
		snprintf(save, sizeof(save), "%" PRIu64 "-%" PRIu64, seed, i);
		run_one(name, save, x.b, x.n);
	}
	printf("random: %" PRIu64 " inputs passed (seed %" PRIu64 ")\n", runs, seed);
	for (size_t i = 0; i < cp.n; i++)
		free(cp.data[i]);
	free(cp.data);
	free(cp.len);
	return 0;
}
