/* fuzz_open.c - libFuzzer target: opening a cache whose metadata is corrupt
 * must not crash, hang or write.
 *
 * Four small but real caches are built once (fz_open_base()): formatted and
 * used through the public API on a buffer (2 MiB head + 64 blocks of 4 KiB),
 * with volumes added and removed, blocks written, overwritten, invalidated,
 * marked clean and evicted, then closed cleanly or abandoned (a crash, with
 * a pin left behind). uuids and timestamps are then fixed, so an input means
 * the same image in every process. Each input (format in fuzz.h) picks one,
 * patches its metadata and optionally fixes checksums up. Then:
 *
 *  1. open PMC_OPEN_RDONLY on a pmem whose stores abort (simpmem's counting
 *     ops). On success: check, recount, check, info, every volume slot
 *     (and volume_find of its name), reads of each volume's first 96 and
 *     last 7 blocks, of every LBA a descriptor names (the only ones that
 *     can hit: reading all of a 1 GiB volume per input would be too slow)
 *     and past its end, a lookup_pin of each such LBA, the write calls (all
 *     must say -EROFS), close. The image must then be byte for byte
 *     unchanged: no store, not even to the volatile pin and hint words,
 *     which are plain atomics, not pmem ops.
 *  2. open read-write on a pmem whose ops count stores. A failed open must
 *     have made none and left the image unchanged. A successful one may
 *     only have committed the superblock copy it does not load from; the
 *     checker must say what it said read-only; and after abandoning it, a
 *     read-only open must find that commit (not clean, the new boot epoch).
 *
 * Every failed call must leave a one-line printable message in its
 * struct pmc_err, and its code must match the return value. Read-only and
 * read-write opens must agree: one fails where the other does, except that
 * unknown read-only-compatible features refuse only read-write (-EROFS).
 *
 * The pmem may be smaller than the image (mode bits 6-7); under ASan the
 * bytes beyond it are poisoned, so a read past the end of the pmem is
 * reported, and a guard page follows the image. Hangs are libFuzzer's
 * -timeout (and the replay driver's alarm). A failure prints what failed and
 * aborts.
 *
 * Single-threaded, like libFuzzer's loop; all state is static.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#include "cache.h"
#include "check.h"
#include "fuzz.h"
#include "simpmem.h"

#define PAGE 4096u
#define READ_BATCH 8u /* blocks per pmc_cache_read */
#define READ_HEAD 96u /* first blocks of each volume read */
#define READ_TAIL 7u  /* last blocks of each volume read */
#define MIN(a, b) ((a) < (b) ? (a) : (b))

int fz_verbose;

static struct fz_base bases[FZ_NR_BASES];
static int bases_built;
/* The cache is opened on works[base]: a copy of the base image whose cold
 * part (from hot_end on: the rest of the head and the data area, which no
 * input changes) is mapped read-only, so a store there faults at once,
 * followed by a guard page. Only [0, hot_end) is restored and compared per
 * input, which keeps the fuzzer fast. */
static char *works[FZ_NR_BASES];
static uint64_t hot_ends[FZ_NR_BASES];
static char *ref;    /* [0, hot_end) of this input's corrupted image */
static char *work;   /* works[] of this input's base */
static uint64_t hot; /* hot_ends[] of this input's base */

static void __attribute__((noreturn, format(printf, 3, 4)))
fz_fail(int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_open: check failed at fuzz_open.c:%d: %s: ", line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#define FZ_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fz_fail(__LINE__, #cond, __VA_ARGS__);                                     \
	} while (0)

/* --- building the base images --- */

static struct pmc_err berr;

#define BUILD(call)                                                                                \
	do {                                                                                       \
		int _rc;                                                                           \
		pmc_err_clear(&berr);                                                              \
		_rc = (call);                                                                      \
		FZ_CHECK(_rc >= 0, "building base images: %s: %d (%s)", #call, _rc, berr.msg);     \
	} while (0)

static void b_write(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n)
{
	static char buf[READ_BATCH * 8192];
	struct pmc_cache_info info;

	pmc_cache_get_info(c, &info);
	for (uint32_t i = 0; i < n; i++) {
		char *b = buf;

		for (uint32_t w = 0; w < info.block_size / 8; w++)
			((uint64_t *)b)[w] = (lba + i) * 0x100000001b3ull ^ vol ^ w;
		BUILD(pmc_cache_write(c, vol, lba + i, 1, buf, &berr));
	}
}

/* the engine's write-back: pin, (copy to disk), mark clean, unpin */
static void b_clean(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t blk;

		BUILD(pmc_cache_lookup_pin(c, vol, lba + i, &blk, NULL));
		BUILD(pmc_cache_mark_clean(c, vol, lba + i, blk));
		pmc_cache_unpin(c, blk);
	}
}

static struct pmc_cache *b_format_open(struct pmc_pmem *pm, uint32_t bs, uint32_t mv)
{
	struct pmc_format_opts o = {.block_size = bs, .max_volumes = mv};
	struct pmc_cache *c;

	BUILD(pmc_cache_format(pm, &o, &berr));
	BUILD(pmc_cache_open(pm, 0, &c, &berr));
	return c;
}

/* base 0 (and the start of base 1): 4 KiB blocks, 4 slots, closed cleanly */
static void build_4k(struct pmc_pmem *pm, int crash)
{
	struct pmc_cache *c = b_format_open(pm, 4096, 4);
	uint32_t v0, v1, v2, v3;
	uint64_t blk;

	BUILD(pmc_cache_volume_add(c, "vol0", "/dev/disk/by-id/a", 64 * 4096, &v0, &berr));
	BUILD(pmc_cache_volume_add(c, "vol1", "/dev/disk/by-id/b", 1ull << 30, &v1, &berr));
	BUILD(pmc_cache_volume_add(c, "vol2", "/dev/disk/by-id/c", 32 * 4096, &v2, &berr));
	b_write(c, v0, 0, 24);
	b_write(c, v1, 0, 1);
	b_write(c, v1, 7, 1);
	b_write(c, v1, (1ull << 30) / 4096 - 1, 1);
	b_write(c, v1, 1000, 10);
	b_write(c, v2, 0, 8);
	b_write(c, v0, 3, 4); /* overwrites */
	BUILD(pmc_cache_invalidate(c, v0, 10, 3));
	b_clean(c, v2, 0, 8);
	b_clean(c, v0, 0, 6);
	b_clean(c, v1, 7, 1);
	BUILD(pmc_cache_volume_remove(c, v2, &berr)); /* its blocks turn stale */
	BUILD(pmc_cache_volume_add(c, "vol3", "", 16 * 4096, &v3, &berr));
	FZ_CHECK(v3 == v2, "vol3 in slot %u, not %u", v3, v2);
	b_write(c, v3, 0, 4);
	b_write(c, v1, 2000, 20); /* reuses stale blocks */
	b_clean(c, v1, 2000, 10);
	pmc_cache_close(c);
	if (!crash)
		return;
	BUILD(pmc_cache_open(pm, 0, &c, &berr));
	b_write(c, v0, 30, 6);
	b_clean(c, v0, 30, 2);
	BUILD(pmc_cache_invalidate(c, v1, 0, 1));
	BUILD(pmc_cache_lookup_pin(c, v0, 7, &blk, NULL)); /* held at the crash */
	pmc_cache_abandon(c);
}

/* base 2: 8 KiB blocks (32 of them), one slot, closed cleanly */
static void build_8k(struct pmc_pmem *pm)
{
	struct pmc_cache *c = b_format_open(pm, 8192, 1);
	uint32_t v;

	BUILD(pmc_cache_volume_add(c, "solo", "/dev/sdz", 100 * 8192, &v, &berr));
	b_write(c, v, 0, 30);
	BUILD(pmc_cache_invalidate(c, v, 5, 2));
	b_clean(c, v, 0, 5);
	b_clean(c, v, 7, 5);
	b_write(c, v, 40, 5); /* evicts */
	pmc_cache_close(c);
}

/* base 3: a 1 MiB volume table (4096 slots), abandoned */
static void build_wide(struct pmc_pmem *pm)
{
	struct pmc_cache *c = b_format_open(pm, 4096, 4096);
	uint32_t a, b, cc, d;

	BUILD(pmc_cache_volume_add(c, "a", "x", 4096 * 4096, &a, &berr));
	BUILD(pmc_cache_volume_add(c, "b", "y", 4096 * 4096, &b, &berr));
	BUILD(pmc_cache_volume_add(c, "c", "z", 4096 * 4096, &cc, &berr));
	b_write(c, a, 0, 10);
	b_write(c, b, 100, 10);
	b_write(c, cc, 4095, 1);
	b_clean(c, a, 0, 10);
	BUILD(pmc_cache_volume_remove(c, a, &berr));
	BUILD(pmc_cache_volume_add(c, "d", "w", 8 * 4096, &d, &berr));
	b_write(c, d, 0, 4);
	pmc_cache_abandon(c);
}

/* fixed uuids and times, checksums recomputed where they were valid */
static void normalize(struct fz_base *b)
{
	const struct pmc_geom *g = &b->g;

	for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
		struct pmc_sb *sb = (struct pmc_sb *)(b->img + (size_t)i * PMC_SB_SLOT);

		if (sb->magic != PMC_SB_MAGIC || sb->csum != pmc_sb_csum(sb))
			continue;
		for (unsigned k = 0; k < sizeof(sb->uuid); k++)
			sb->uuid[k] = (uint8_t)(0xc0 + k);
		sb->format_time_ns = 1700000000000000000ull;
		sb->open_time_ns = 1700000000000000000ull + sb->seq;
		sb->csum = pmc_sb_csum(sb);
	}
	for (uint32_t i = 0; i < g->max_volumes; i++) {
		struct pmc_vol *v = (struct pmc_vol *)(b->img + g->vol_off) + i;

		if (v->gen_state == 0 || v->csum != pmc_vol_csum(v))
			continue;
		for (unsigned k = 0; k < sizeof(v->uuid); k++)
			v->uuid[k] = (uint8_t)(i * 16 + k);
		v->add_time_ns = 1700000000000000000ull + i;
		v->csum = pmc_vol_csum(v);
	}
	for (uint64_t i = 0; i < g->nr_blocks; i++) {
		struct pmc_desc *d = (struct pmc_desc *)(b->img + g->desc_off) + i;

		if (d->birth_ns == 0 || d->csum != pmc_desc_csum(d))
			continue;
		d->birth_ns = 1700000000000000000ull + i;
		d->csum = pmc_desc_csum(d);
	}
}

static void build_bases(void)
{
	static const char *const names[FZ_NR_BASES] = {"clean-4k", "crashed-4k", "clean-8k",
						       "crashed-4096-slots"};

	for (unsigned i = 0; i < FZ_NR_BASES; i++) {
		struct fz_base *b = &bases[i];
		struct pmc_pmem *pm;
		const struct pmc_sb *sb;

		b->name = names[i];
		b->img = aligned_alloc(4096, FZ_IMG_SIZE);
		FZ_CHECK(b->img != NULL, "out of memory");
		memset(b->img, 0, FZ_IMG_SIZE);
		BUILD(pmc_pmem_wrap(b->img, FZ_IMG_SIZE, &simpmem_direct_ops, NULL, &pm));
		switch (i) {
		case 0:
		case 1:
			build_4k(pm, i == 1);
			break;
		case 2:
			build_8k(pm);
			break;
		default:
			build_wide(pm);
			break;
		}
		pmc_pmem_close(pm);
		sb = (const struct pmc_sb *)b->img;
		BUILD(pmc_geom_compute(FZ_IMG_SIZE, sb->block_size, sb->max_volumes, &b->g, &berr));
		b->meta_end = b->g.index_off + b->g.nr_buckets * sizeof(pmc_bucket_t);
		normalize(b);
	}
	ref = aligned_alloc(4096, FZ_IMG_SIZE);
	FZ_CHECK(ref != NULL, "out of memory");
	for (unsigned i = 0; i < FZ_NR_BASES; i++) {
		char *w = mmap(NULL, FZ_IMG_SIZE + PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t h = (bases[i].meta_end + PAGE - 1) / PAGE * PAGE;

		FZ_CHECK(w != MAP_FAILED, "mmap: %s", strerror(errno));
		memcpy(w, bases[i].img, FZ_IMG_SIZE);
		FZ_CHECK(mprotect(w + h, FZ_IMG_SIZE - h, PROT_READ) == 0 &&
			     mprotect(w + FZ_IMG_SIZE, PAGE, PROT_NONE) == 0,
			 "mprotect: %s", strerror(errno));
		works[i] = w;
		hot_ends[i] = h;
	}
	if (getenv("PMC_FUZZ_VERBOSE") && atoi(getenv("PMC_FUZZ_VERBOSE")) > 0)
		fz_verbose = 1;
	bases_built = 1;
}

const struct fz_base *fz_open_base(unsigned i)
{
	if (!bases_built)
		build_bases();
	return i < FZ_NR_BASES ? &bases[i] : NULL;
}

/* --- applying an input --- */

static uint64_t get_off(const uint8_t *p, uint64_t end)
{
	return ((uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16) % end;
}

static size_t clip(size_t len, uint64_t off, uint64_t end)
{
	return len < end - off ? len : (size_t)(end - off);
}

static void apply_ops(char *img, const struct fz_base *b, const uint8_t *p, size_t n)
{
	uint64_t end = b->meta_end, off, src;
	size_t i = 0, len, left;

	while (i < n) {
		const uint8_t *a = p + i + 1;

		left = n - i - 1;
		switch (p[i] & 3) {
		case FZ_OP_WRITE:
			if (left < 4)
				return;
			off = get_off(a, end);
			len = a[3] < left - 4 ? a[3] : left - 4;
			memcpy(img + off, a + 4, clip(len, off, end));
			i += 5 + len;
			break;
		case FZ_OP_FILL:
			if (left < 6)
				return;
			off = get_off(a, end);
			len = (size_t)a[3] | (size_t)a[4] << 8;
			memset(img + off, a[5], clip(len, off, end));
			i += 7;
			break;
		case FZ_OP_COPY:
			if (left < 8)
				return;
			off = get_off(a, end);
			src = get_off(a + 3, end);
			len = (size_t)a[6] | (size_t)a[7] << 8;
			len = clip(clip(len, off, end), src, end);
			memmove(img + off, img + src, len);
			i += 9;
			break;
		default: /* FZ_OP_ADD64 */
			if (left < 4)
				return;
			off = get_off(a, end) & ~7ull;
			if (off + 8 <= end)
				*(uint64_t *)(img + off) += (uint64_t)(int64_t)(int8_t)a[3];
			i += 5;
			break;
		}
	}
}

static void fix_sums(char *img, const struct fz_base *b, unsigned mode)
{
	const struct pmc_geom *g = &b->g;

	if (mode & FZ_FIX_SB) {
		for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
			struct pmc_sb *sb = (struct pmc_sb *)(img + (size_t)i * PMC_SB_SLOT);

			if (sb->magic == PMC_SB_MAGIC)
				sb->csum = pmc_sb_csum(sb);
		}
	}
	if (mode & FZ_FIX_VOL) {
		for (uint32_t i = 0; i < g->max_volumes; i++) {
			struct pmc_vol *v = (struct pmc_vol *)(img + g->vol_off) + i;

			if (PMC_VOL_STATE(v->gen_state) != PMC_VOL_FREE)
				v->csum = pmc_vol_csum(v);
		}
	}
	if (mode & FZ_FIX_DESC) {
		for (uint64_t i = 0; i < g->nr_blocks; i++) {
			struct pmc_desc *d = (struct pmc_desc *)(img + g->desc_off) + i;

			d->csum = pmc_desc_csum(d);
		}
	}
}

static uint64_t pmem_size_of(unsigned mode)
{
	switch ((mode >> FZ_SIZE_SHIFT) & 3) {
	case FZ_SIZE_FULL:
		return FZ_IMG_SIZE;
	case FZ_SIZE_LESS:
		return FZ_IMG_SIZE - 4096;
	case FZ_SIZE_HEAD:
		return 256 * 1024;
	default:
		return 4096;
	}
}

/* --- oracles --- */

static void check_msg(const char *what, int rc, const struct pmc_err *err)
{
	FZ_CHECK(rc < 0, "%s: returned %d", what, rc);
	FZ_CHECK(err->code == -rc, "%s: returned %d but err.code is %d (%s)", what, rc, err->code,
		 err->msg);
	FZ_CHECK(err->msg[0] != '\0', "%s: failed with %d and an empty message", what, rc);
	for (const char *s = err->msg; *s; s++)
		FZ_CHECK(*s >= 0x20 && *s < 0x7f,
			 "%s: message has byte 0x%02x at %d (not one printable line): %s", what,
			 (unsigned char)*s, (int)(s - err->msg), err->msg);
}

/* what lies at off in the base layout, for messages */
static void where(const struct pmc_geom *g, uint64_t off, char *buf, size_t len)
{
	if (off < (uint64_t)PMC_SB_COPIES * PMC_SB_SLOT)
		snprintf(buf, len, "superblock copy %u byte %u", (unsigned)(off / PMC_SB_SLOT),
			 (unsigned)(off % PMC_SB_SLOT));
	else if (off >= g->vol_off && off < g->vol_off + g->max_volumes * sizeof(struct pmc_vol))
		snprintf(buf, len, "volume slot %u byte %u",
			 (unsigned)((off - g->vol_off) / sizeof(struct pmc_vol)),
			 (unsigned)((off - g->vol_off) % sizeof(struct pmc_vol)));
	else if (off >= g->desc_off && off < g->desc_off + g->nr_blocks * sizeof(struct pmc_desc))
		snprintf(buf, len, "descriptor %u byte %u",
			 (unsigned)((off - g->desc_off) / sizeof(struct pmc_desc)),
			 (unsigned)((off - g->desc_off) % sizeof(struct pmc_desc)));
	else if (off >= g->index_off && off < g->index_off + g->nr_buckets * 8)
		snprintf(buf, len, "bucket %u", (unsigned)((off - g->index_off) / 8));
	else
		snprintf(buf, len, "padding");
}

/* the image must not have changed: [0, hot) is compared, the rest is
 * read-only */
static void check_unchanged(const struct fz_base *b, const char *when)
{
	char what[64];
	size_t i;

	if (!memcmp(work, ref, hot))
		return;
	for (i = 0; i < hot && work[i] == ref[i]; i++)
		;
	where(&b->g, i, what, sizeof(what));
	FZ_CHECK(0, "%s: the image changed at offset %zu (%s): 0x%02x -> 0x%02x", when, i, what,
		 (unsigned char)ref[i], (unsigned char)work[i]);
}

struct fz_rw {
	uint64_t stores;
	uint64_t lo, hi; /* offsets stored to: [lo, hi), volume table aside */
	uint64_t vol_lo, vol_hi; /* the volume table */
	uint64_t vol_stores;	 /* stores into it (the conversion of a 1.0 cache) */
};

static void rw_note(struct pmc_pmem *pm, const void *dst, size_t len)
{
	struct fz_rw *r = pm->priv;
	uint64_t off = (uint64_t)((const char *)dst - pm->base);

	FZ_CHECK(off <= pm->size && len <= pm->size - off,
		 "a store of %zu bytes at offset %" PRId64 " is outside the %" PRIu64 "-byte pmem",
		 len, (int64_t)off, pm->size);
	if (off >= r->vol_lo && off + len <= r->vol_hi) {
		r->vol_stores++;
		return;
	}
	if (r->stores == 0 || off < r->lo)
		r->lo = off;
	if (r->stores == 0 || off + len > r->hi)
		r->hi = off + len;
	r->stores++;
}

static void rw_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	rw_note(pm, dst, len);
	memcpy(dst, src, len);
}

static void rw_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	rw_note(pm, dst, len);
	memset(dst, c, len);
}

static void rw_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	rw_note(pm, dst, 8);
	FZ_CHECK((uintptr_t)dst % 8 == 0, "unaligned 8-byte store at %p", (void *)dst);
	__atomic_store_n(dst, val, __ATOMIC_RELEASE);
}

static void rw_flush(struct pmc_pmem *pm, const void *addr, size_t len)
{
}

static void rw_drain(struct pmc_pmem *pm)
{
}

static const struct pmc_pmem_ops rw_ops = {
    .copy = rw_copy,
    .fill = rw_fill,
    .store8 = rw_store8,
    .flush = rw_flush,
    .drain = rw_drain,
};

static void read_range(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n, char *buf,
		       uint64_t blocks)
{
	uint8_t hit[READ_BATCH];
	int rc, found = 0;

	memset(hit, 0xee, sizeof(hit));
	rc = pmc_cache_read(c, vol, lba, n, buf, hit);
	if (lba > blocks || n > blocks - lba) {
		FZ_CHECK(rc == -EINVAL,
			 "read of slot %u blocks %" PRIu64 "+%u past its end (%" PRIu64 "): %d",
			 vol, lba, n, blocks, rc);
		return;
	}
	if (rc == -EIO) {
		/* only for a corrupt chain (a copy past its break is missed) */
		int corrupt = 0;

		for (uint32_t i = 0; i < n && !corrupt; i++) {
			uint64_t blk;
			int lrc = pmc_cache_lookup_pin(c, vol, lba + i, &blk, NULL);

			if (lrc == 0)
				pmc_cache_unpin(c, blk);
			corrupt = lrc == -EUCLEAN;
		}
		FZ_CHECK(corrupt, "read of slot %u blocks %" PRIu64 "+%u: EIO, no chain corrupt",
			 vol, lba, n);
		return;
	}
	FZ_CHECK(rc >= 0 && rc <= (int)n, "read of slot %u blocks %" PRIu64 "+%u: %d", vol, lba, n,
		 rc);
	for (uint32_t i = 0; i < n; i++) {
		FZ_CHECK(hit[i] <= 1, "read: hit[%u] is %u", i, hit[i]);
		found += hit[i];
	}
	FZ_CHECK(found == rc, "read of slot %u blocks %" PRIu64 "+%u: returned %d, %d hits", vol,
		 lba, n, rc, found);
}

static void lookup_one(struct pmc_cache *c, const struct pmc_cache_info *info, uint32_t vol,
		       uint64_t lba)
{
	enum pmc_block_state st = (enum pmc_block_state)99;
	uint64_t blk = PMC_BLK_NONE;
	int rc = pmc_cache_lookup_pin(c, vol, lba, &blk, &st);

	if (rc) {
		FZ_CHECK(rc == -ENOENT || rc == -EUCLEAN, "lookup of slot %u block %" PRIu64 ": %d",
			 vol, lba, rc);
		return;
	}
	FZ_CHECK(blk < info->nr_blocks, "lookup: block %" PRIu64 " of %" PRIu64, blk,
		 info->nr_blocks);
	/* the linked states: LOST (1.1) is linked too (lib/FORMAT.md) */
	FZ_CHECK(st == PMC_BLK_CLEAN || st == PMC_BLK_DIRTY || st == PMC_BLK_LOST,
		 "lookup: state %d", (int)st);
	FZ_CHECK((char *)pmc_cache_block_data(c, blk) ==
		     pmc_cache_pmem(c)->base + info->data_off + blk * info->block_size,
		 "block %" PRIu64 ": data address", blk);
	(void)pmc_cache_pins(c, blk);
	pmc_cache_unpin(c, blk);
}

/* every read-only call on an open read-only cache; none may store */
static void exercise_rdonly(struct pmc_cache *c, struct pmc_check_report *rep, int *check_rc)
{
	struct pmc_cache_info info;
	struct pmc_check_report rep2;
	struct pmc_volume_info vi;
	struct pmc_err err = {0};
	uint64_t blk;
	uint32_t found;
	char *buf;
	int rc;

	pmc_cache_get_info(c, &info);
	FZ_CHECK(info.rdonly == 1, "info.rdonly is %d", info.rdonly);
	FZ_CHECK(info.nr_blocks > 0 && info.block_size > 0 &&
		     info.data_off + info.nr_blocks * info.block_size <= pmc_cache_pmem(c)->size,
		 "info: %" PRIu64 " blocks of %u at %" PRIu64 " do not fit", info.nr_blocks,
		 info.block_size, info.data_off);

	*check_rc = pmc_cache_check(c, rep, &err);
	if (*check_rc)
		check_msg("check", *check_rc, &err);
	else
		FZ_CHECK(rep->linked + rep->free + rep->orphans + rep->bad == info.nr_blocks,
			 "check: %" PRIu64 " linked + %" PRIu64 " free + %" PRIu64 " orphans + %" PRIu64
			 " bad != %" PRIu64 " blocks",
			 rep->linked, rep->free, rep->orphans, rep->bad, info.nr_blocks);
	if (fz_verbose)
		printf("  check: %d %s\n", *check_rc, err.msg);
	pmc_cache_recount(c);
	pmc_err_clear(&err);
	rc = pmc_cache_check(c, &rep2, &err);
	if (rc)
		check_msg("check after recount", rc, &err);
	pmc_cache_get_info(c, &info);
	FZ_CHECK(info.counts_valid, "counts not valid after a recount");

	buf = malloc((size_t)READ_BATCH * info.block_size);
	FZ_CHECK(buf != NULL, "out of memory");
	for (uint32_t vol = 0; vol <= info.max_volumes; vol++) {
		uint64_t blocks, lba;

		if (pmc_cache_volume_info(c, vol, &vi)) {
			FZ_CHECK(pmc_cache_read(c, vol, 0, 1, buf, NULL) == -ENOENT,
				 "read of free slot %u", vol);
			continue;
		}
		FZ_CHECK(vol < info.max_volumes, "slot %u beyond %u is active", vol,
			 info.max_volumes);
		FZ_CHECK(memchr(vi.name, 0, sizeof(vi.name)) && memchr(vi.disk, 0, sizeof(vi.disk)),
			 "slot %u: name or disk not terminated", vol);
		FZ_CHECK(pmc_cache_volume_find(c, vi.name, &found) == 0 && found == vol,
			 "slot %u: volume_find('%s') does not find it", vol, vi.name);
		blocks = vi.size_bytes / info.block_size;
		for (lba = 0; lba < blocks && lba < READ_HEAD; lba += READ_BATCH)
			read_range(c, vol, lba, (uint32_t)MIN(READ_BATCH, blocks - lba), buf,
				   blocks);
		lba = blocks - MIN(READ_TAIL, blocks);
		if (lba < blocks)
			read_range(c, vol, lba, (uint32_t)(blocks - lba), buf, blocks);
		/* past the end: refused */
		read_range(c, vol, lba, READ_TAIL + 1, buf, blocks);
		read_range(c, vol, blocks, 1, buf, blocks);
		read_range(c, vol, UINT64_MAX, 2, buf, blocks);
		/* every LBA a descriptor names for this slot, hit or not */
		for (uint64_t i = 0; i < info.nr_blocks; i++) {
			const struct pmc_desc *d = &c->descs[i];

			if (d->vol != vol)
				continue;
			read_range(c, vol, d->lba, 1, buf, blocks);
			lookup_one(c, &info, vol, d->lba);
		}
		FZ_CHECK(pmc_cache_write(c, vol, 0, 1, buf, &err) == -EROFS, "write read-only");
		FZ_CHECK(pmc_cache_invalidate(c, vol, 0, 1) == -EROFS, "invalidate read-only");
		FZ_CHECK(pmc_cache_mark_clean(c, vol, 0, 0) == -EROFS, "mark_clean read-only");
		FZ_CHECK(pmc_cache_volume_remove(c, vol, &err) == -EROFS, "remove read-only");
	}
	free(buf);
	FZ_CHECK(pmc_cache_volume_info(c, UINT32_MAX, &vi) == -ENOENT, "slot UINT32_MAX");
	FZ_CHECK(pmc_cache_read(c, UINT32_MAX, 0, 1, NULL, NULL) == -ENOENT, "read of slot -1");
	FZ_CHECK(pmc_cache_alloc(c, 1, &blk) == -EROFS, "alloc read-only");
	FZ_CHECK(pmc_cache_volume_add(c, "fuzz", "", 1ull << 20, &found, &err) == -EROFS,
		 "volume_add read-only");
}

static int open_rdonly(uint64_t size, struct pmc_check_report *rep, int *check_rc)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c = (struct pmc_cache *)1;
	struct pmc_err err = {0};
	int rc;

	FZ_CHECK(pmc_pmem_wrap(work, size, &simpmem_counting_ops, NULL, &pm) == 0, "wrap");
	rc = pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err);
	if (fz_verbose)
		printf("  open read-only: %d %s\n", rc, err.msg);
	if (rc) {
		check_msg("read-only open", rc, &err);
		FZ_CHECK(c == NULL, "failed open left *out set");
	} else {
		FZ_CHECK(err.code == 0 && err.msg[0] == '\0',
			 "read-only open succeeded with an error set: %d %s", err.code, err.msg);
		exercise_rdonly(c, rep, check_rc);
		pmc_cache_close(c);
	}
	pmc_pmem_close(pm);
	return rc;
}

static void reopen_after_commit(uint64_t size, const struct pmc_cache_info *rw)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	struct pmc_err err = {0};
	int rc;

	FZ_CHECK(pmc_pmem_wrap(work, size, &simpmem_counting_ops, NULL, &pm) == 0, "wrap");
	rc = pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err);
	FZ_CHECK(rc == 0, "a read-only open after a read-write open and a crash fails: %d %s", rc,
		 err.msg);
	pmc_cache_get_info(c, &info);
	FZ_CHECK(!info.was_clean && info.boot_epoch == rw->boot_epoch,
		 "after a read-write open (boot epoch %" PRIu64
		 ") and a crash, the superblock loaded says clean %d, boot epoch %" PRIu64
		 ": the open's commit is lost",
		 rw->boot_epoch, info.was_clean, info.boot_epoch);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
}

static void open_rw(const struct fz_base *b, uint64_t size, int ro_rc,
		    const struct pmc_check_report *ro_rep, int ro_check_rc)
{
	struct fz_rw ctr = {0};
	struct pmc_pmem *pm;
	struct pmc_cache *c = (struct pmc_cache *)1;
	struct pmc_cache_info info;
	struct pmc_check_report rep;
	struct pmc_err err = {0};
	uint64_t slot_off;
	char what[64];
	int rc, check_rc;

	ctr.vol_lo = b->g.vol_off;
	ctr.vol_hi = b->g.vol_off + (uint64_t)b->g.max_volumes * sizeof(struct pmc_vol);
	FZ_CHECK(pmc_pmem_wrap(work, size, &rw_ops, &ctr, &pm) == 0, "wrap");
	rc = pmc_cache_open(pm, 0, &c, &err);
	if (fz_verbose)
		printf("  open read-write: %d %s\n", rc, err.msg);
	if (rc) {
		check_msg("read-write open", rc, &err);
		FZ_CHECK(c == NULL, "failed open left *out set");
		if (ctr.stores)
			where(&b->g, ctr.lo, what, sizeof(what));
		FZ_CHECK(ctr.stores == 0 && ctr.vol_stores == 0,
			 "a failed read-write open (%d: %s) made %" PRIu64
			 " stores, at offsets %" PRIu64 "..%" PRIu64 " (from %s)",
			 rc, err.msg, ctr.stores, ctr.lo, ctr.hi, what);
		FZ_CHECK(ro_rc == rc || rc == -EROFS,
			 "read-write open fails with %d (%s), read-only open with %d", rc, err.msg,
			 ro_rc);
		pmc_pmem_close(pm);
		ASAN_UNPOISON_MEMORY_REGION(work, FZ_IMG_SIZE);
		check_unchanged(b, "after a failed read-write open");
		return;
	}
	FZ_CHECK(ro_rc == 0, "read-write open succeeds where read-only open fails with %d", ro_rc);
	/* open commits the superblock into the copy it did not load from,
	 * and nothing else (crash point open.epoch, lib/FORMAT.md) */
	slot_off = (uint64_t)c->sb_slot * PMC_SB_SLOT;
	FZ_CHECK(ctr.stores > 0 && ctr.lo >= slot_off && ctr.hi <= slot_off + sizeof(struct pmc_sb),
		 "read-write open stored to %" PRIu64 "..%" PRIu64 ", not just superblock copy %u",
		 ctr.lo, ctr.hi, c->sb_slot);
	/* ... and the volume table only when it converts a 1.0 cache: the copy
	 * it loaded (the other one) had minor 0 (Conversion from 1.0) */
	{
		const struct pmc_sb *loaded =
			(const struct pmc_sb *)(ref + (uint64_t)(c->sb_slot ^ 1u) * PMC_SB_SLOT);

		FZ_CHECK(ctr.vol_stores == 0 || loaded->minor == 0,
			 "read-write open of a %u.%u cache stored %" PRIu64
			 " times into the volume table",
			 loaded->major, loaded->minor, ctr.vol_stores);
	}
	check_rc = pmc_cache_check(c, &rep, &err);
	FZ_CHECK(check_rc == ro_check_rc && !memcmp(&rep, ro_rep, sizeof(rep)),
		 "check says %d (%s, %" PRIu64 " linked) read-write, %d (%" PRIu64
		 " linked) read-only",
		 check_rc, err.msg, rep.linked, ro_check_rc, ro_rep->linked);
	pmc_cache_get_info(c, &info);
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	reopen_after_commit(size, &info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pmc_check_report rep = {0};
	const struct fz_base *b;
	unsigned mode = size ? data[0] : 0;
	uint64_t pm_size = pmem_size_of(mode);
	int ro_rc, check_rc = 0;

	if (!bases_built)
		build_bases();
	b = &bases[mode & FZ_BASE_MASK];
	work = works[mode & FZ_BASE_MASK];
	hot = hot_ends[mode & FZ_BASE_MASK];
	memcpy(ref, b->img, hot);
	if (size > 1 && (mode & FZ_RAW))
		memcpy(ref, data + 1, MIN(size - 1, b->meta_end));
	else if (size > 1)
		apply_ops(ref, b, data + 1, size - 1);
	fix_sums(ref, b, mode);
	memcpy(work, ref, hot);
	if (fz_verbose)
		printf("  base %s, pmem %" PRIu64 " bytes%s\n", b->name, pm_size,
		       mode & FZ_RAW ? ", raw" : "");

	/* beyond the pmem's size is not the pmem's */
	ASAN_POISON_MEMORY_REGION(work + pm_size, FZ_IMG_SIZE - pm_size);
	ro_rc = open_rdonly(pm_size, &rep, &check_rc);
	ASAN_UNPOISON_MEMORY_REGION(work, FZ_IMG_SIZE);
	check_unchanged(b, "after a read-only open");

	ASAN_POISON_MEMORY_REGION(work + pm_size, FZ_IMG_SIZE - pm_size);
	open_rw(b, pm_size, ro_rc, &rep, check_rc);
	ASAN_UNPOISON_MEMORY_REGION(work, FZ_IMG_SIZE);
	return 0;
}
