/* super.c - geometry, checksums and the two superblock copies.
 *
 * The superblock is written only by pmc_sb_commit(), always into the copy
 * that does not hold the current one, with seq + 1: a crash while writing
 * leaves the other copy intact, and load picks the newest copy whose magic,
 * checksum and version are valid. Loading never stores to pmem.
 *
 * Locking: commits happen at open, close and in volume_add/remove (under
 * the cache's vol_lock); nothing else touches the superblock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "cache_internal.h"

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define MIN_BLOCKS 16u

void pmc_bug(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "<2>pmcache: BUG at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

uint64_t pmc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t crc(const void *p, size_t len)
{
	return (uint32_t)crc32(0L, p, (uInt)len);
}

uint32_t pmc_sb_csum(const struct pmc_sb *sb)
{
	return crc(sb, offsetof(struct pmc_sb, csum));
}

uint32_t pmc_vol_csum(const struct pmc_vol *v)
{
	return crc((const char *)v + offsetof(struct pmc_vol, size_bytes),
		   offsetof(struct pmc_vol, disk_bytes) - offsetof(struct pmc_vol, size_bytes));
}

uint32_t pmc_vol_csum_v10(const struct pmc_vol *v)
{
	return crc((const char *)v + offsetof(struct pmc_vol, size_bytes),
		   offsetof(struct pmc_vol, csum) - offsetof(struct pmc_vol, size_bytes));
}

uint32_t pmc_vol_id_csum(const struct pmc_vol *v)
{
	return crc((const char *)v + offsetof(struct pmc_vol, disk_bytes),
		   offsetof(struct pmc_vol, id_csum) - offsetof(struct pmc_vol, disk_bytes));
}

uint32_t pmc_desc_csum(const struct pmc_desc *d)
{
	return crc(d, offsetof(struct pmc_desc, csum));
}

static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t p = 64;

	while (p < n)
		p <<= 1;
	return p;
}

static void geom_for(struct pmc_geom *g, uint64_t n)
{
	g->nr_blocks = n;
	g->nr_buckets = pow2_at_least(n);
	g->vol_off = PMC_VOL_OFF;
	g->desc_off = ALIGN_UP(g->vol_off + (uint64_t)g->max_volumes * sizeof(struct pmc_vol),
			       PMC_META_ALIGN);
	g->index_off = ALIGN_UP(g->desc_off + n * sizeof(struct pmc_desc), PMC_META_ALIGN);
	g->data_off = ALIGN_UP(g->index_off + g->nr_buckets * sizeof(pmc_bucket_t), PMC_DATA_ALIGN);
}

int pmc_geom_compute(uint64_t pmem_size, uint32_t block_size, uint32_t max_volumes,
		     struct pmc_geom *g, struct pmc_err *err)
{
	uint64_t lo = 0, hi, mid;

	if (block_size < 4096 || block_size > (1u << 20) || (block_size & (block_size - 1)))
		return pmc_err_set(err, EINVAL,
				   "block size %u: not a power of two between 4 KiB and 1 MiB",
				   block_size);
	if (max_volumes < 1 || max_volumes > 4096)
		return pmc_err_set(err, EINVAL, "max volumes %u: not between 1 and 4096",
				   max_volumes);
	memset(g, 0, sizeof(*g));
	g->pmem_size = pmem_size;
	g->block_size = block_size;
	g->max_volumes = max_volumes;
	/* the largest n whose metadata and data fit; every region grows with n */
	hi = pmem_size / block_size;
	while (lo < hi) {
		mid = lo + (hi - lo + 1) / 2;
		geom_for(g, mid);
		if (g->data_off + mid * block_size <= pmem_size)
			lo = mid;
		else
			hi = mid - 1;
	}
	geom_for(g, lo);
	if (lo < MIN_BLOCKS)
		return pmc_err_set(err, ENOSPC,
				   "%" PRIu64 " bytes are too small: they hold %" PRIu64
				   " blocks of %u bytes, at least %u are needed",
				   pmem_size, lo, block_size, MIN_BLOCKS);
	return 0;
}

static int all_zero(const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i])
			return 0;
	return 1;
}

/* why copy i is unusable, or NULL when it is valid */
static const char *sb_copy_problem(const struct pmc_sb *sb, char *buf, size_t len)
{
	if (sb->magic != PMC_SB_MAGIC)
		return all_zero(sb, sizeof(*sb)) ? "blank" : "no pmcache magic";
	if (sb->csum != pmc_sb_csum(sb))
		return "bad checksum";
	if (sb->major > PMC_FORMAT_MAJOR) {
		snprintf(buf, len, "format version %u.%u is newer than this build supports (%u.x)",
			 sb->major, sb->minor, PMC_FORMAT_MAJOR);
		return buf;
	}
	if (sb->major != PMC_FORMAT_MAJOR) {
		snprintf(buf, len, "unsupported format version %u.%u", sb->major, sb->minor);
		return buf;
	}
	if (sb->incompat & ~PMC_FEAT_INCOMPAT_KNOWN) {
		snprintf(buf, len, "unknown incompatible features 0x%" PRIx64,
			 sb->incompat & ~PMC_FEAT_INCOMPAT_KNOWN);
		return buf;
	}
	return NULL;
}

static int geom_check(const struct pmc_sb *sb, const char *path, uint64_t pmem_size,
		      struct pmc_err *err)
{
	struct pmc_geom g;
	struct pmc_err gerr = {0};

	if (sb->pmem_size != pmem_size)
		return pmc_err_set(err, EINVAL,
				   "pmem %s: superblock records a size of %" PRIu64
				   " bytes but the device has %" PRIu64 " bytes",
				   path, sb->pmem_size, pmem_size);
	if (pmc_geom_compute(sb->pmem_size, sb->block_size, sb->max_volumes, &g, &gerr))
		return pmc_err_set(err, EINVAL, "pmem %s: superblock has a bad geometry: %s", path, gerr.msg);
#define GEOM_FIELD(f)                                                                              \
	if (sb->f != g.f)                                                                          \
		return pmc_err_set(err, EINVAL,                                                    \
				   "pmem %s: superblock field " #f " is %" PRIu64       \
				   ", geometry says %" PRIu64,                              \
				   path, (uint64_t)sb->f, (uint64_t)g.f);
	GEOM_FIELD(nr_blocks)
	GEOM_FIELD(nr_buckets)
	GEOM_FIELD(vol_off)
	GEOM_FIELD(desc_off)
	GEOM_FIELD(index_off)
	GEOM_FIELD(data_off)
#undef GEOM_FIELD
	if (sb->clean > 1)
		return pmc_err_set(err, EINVAL, "pmem %s: superblock clean flag is %u", path, sb->clean);
	return 0;
}

int pmc_sb_load(struct pmc_pmem *pm, struct pmc_sb *out, unsigned *slot, struct pmc_err *err)
{
	struct pmc_sb sb[PMC_SB_COPIES];
	const char *why[PMC_SB_COPIES];
	char buf[PMC_SB_COPIES][128];
	int best = -1;

	if (pm->size < PMC_VOL_OFF)
		return pmc_err_set(err, EINVAL, "pmem %s: %" PRIu64 " bytes is too small to hold a cache",
				   pm->path, pm->size);
	for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
		memcpy(&sb[i], pm->base + (size_t)i * PMC_SB_SLOT, sizeof(sb[i]));
		why[i] = sb_copy_problem(&sb[i], buf[i], sizeof(buf[i]));
		/* serial-number order: a commit after seq UINT64_MAX wraps to 0 */
		if (!why[i] && (best < 0 || (int64_t)(sb[i].seq - sb[best].seq) > 0))
			best = (int)i;
	}
	if (best < 0) {
		if (!strcmp(why[0], "blank") && !strcmp(why[1], "blank"))
			return pmc_err_set(err, ENODATA,
					   "pmem %s: no pmcache superblock (blank; format it first)",
					   pm->path);
		if (!strcmp(why[0], "no pmcache magic") && !strcmp(why[1], "no pmcache magic"))
			return pmc_err_set(err, ENODATA,
					   "pmem %s: no pmcache superblock (foreign data at offset 0)",
					   pm->path);
		if (!strcmp(why[0], why[1]))
			return pmc_err_set(err, EUCLEAN, "pmem %s: superblock (both copies): %s",
					   pm->path, why[0]);
		return pmc_err_set(err, EUCLEAN, "pmem %s: superblock copy 0: %s; copy 1: %s",
				   pm->path, why[0], why[1]);
	}
	*out = sb[best];
	*slot = (unsigned)best;
	return geom_check(out, pm->path, pm->size, err);
}

void pmc_sb_commit(struct pmc_cache *c)
{
	unsigned next = (c->sb_slot + 1) % PMC_SB_COPIES;
	char *dst = c->pm->base + (size_t)next * PMC_SB_SLOT;

	c->sb.seq++;
	c->sb.csum = pmc_sb_csum(&c->sb);
	pmc_pmem_copy(c->pm, dst, &c->sb, sizeof(c->sb));
	pmc_pmem_persist(c->pm, dst, sizeof(c->sb));
	c->sb_slot = next;
}
