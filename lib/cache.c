/* cache.c - format, open and close of a cache, its volumes, and the
 * cache-level write and read-hit API.
 *
 * Owns the DRAM side of an open cache (struct pmc_cache), which is fixed
 * in size: DRAM use does not grow with the number of cache blocks.
 *
 * Open is O(1) in the cache size after a clean close and after a crash: the
 * index is consistent at every instant (index.c), pins are voided by a new
 * boot epoch (block.c), orphans are reclaimed lazily by the allocator, and
 * only the dirty/clean counters are unknown after a crash until
 * pmc_cache_recount() has walked the index (not the data area).
 *
 * Locking: vol_lock serialises volume add/remove and superblock commits
 * after open; volume removal also takes every stripe lock so that no
 * counter update or eviction races with the generation change. Reference
 * counts of volumes are atomics. Lock order: vol_lock, then stripes in
 * ascending order.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cache_internal.h"
#include "check.h"
#include "log.h"
#include "poison.h"

/*
 * Index stripes in use (a power of two). ThreadSanitizer's deadlock
 * detector tracks at most 64 locks held by one thread, and a batch holds
 * the lock of every stripe it touches (a publish or a mark clean of up to
 * PMC_BATCH_MAX keys), some paths every stripe, with libpmem2's flush
 * taking a lock of its own under them: its builds use 32 stripes.
 */
#ifdef PMC_TSAN_BUILD
#define STRIPES_USED 32u
#else
#define STRIPES_USED PMC_STRIPES_MAX
#endif

void (*pmc_test_open_committing)(struct pmc_cache *c);
void (*pmc_test_counts_snapshot)(void);

static void random_uuid(uint8_t uuid[16])
{
	uint64_t a = pmc_now_ns();

	if (getrandom(uuid, 16, 0) != 16) {
		for (int i = 0; i < 16; i++)
			uuid[i] = (uint8_t)(a >> (i % 8 * 8)) ^ (uint8_t)i;
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
}

int pmc_cache_format(struct pmc_pmem *pm, const struct pmc_format_opts *opts,
		     struct pmc_err *err)
{
	struct pmc_geom g;
	struct pmc_sb sb = {0};
	struct pmc_err gerr = {0};
	uint32_t bs = opts && opts->block_size ? opts->block_size : PMC_BLOCK_SIZE_DEFAULT;
	uint32_t mv = opts && opts->max_volumes ? opts->max_volumes : PMC_MAX_VOLUMES_DEFAULT;
	int rc;

	rc = pmc_geom_compute(pm->size, bs, mv, &g, &gerr);
	if (rc)
		return pmc_err_set(err, -rc, "pmem %s: %s", pm->path, gerr.msg);
	/* crash points format.wipe_old, format.wipe: old superblocks gone
	 * first, so a cut format never leaves an old cache over new zeroes;
	 * the older copy before the newer, each with its own barrier, so a
	 * cut between leaves the cache as it was, never its older copy (a
	 * clean close's, whose counts and pins would be taken as current) */
	{
		unsigned newest = 0;
		uint64_t seq[PMC_SB_COPIES] = {0};

		pmc_poison_init();
		for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
			struct pmc_sb old;

			/* a copy that cannot be read or does not verify is
			 * no one's newest */
			if (pmc_poison_copy(&old, pm->base + (size_t)i * PMC_SB_SLOT, sizeof(old)) ==
				    0 &&
			    old.magic == PMC_SB_MAGIC && old.csum == pmc_sb_csum(&old))
				seq[i] = old.seq;
			if (seq[i] > seq[newest])
				newest = i;
		}
		for (unsigned k = 0; k < PMC_SB_COPIES; k++) {
			unsigned i = k == PMC_SB_COPIES - 1 ? newest : (k < newest ? k : k + 1);
			char *dst = pm->base + (size_t)i * PMC_SB_SLOT;

			pmc_pmem_fill(pm, dst, 0, PMC_SB_SLOT);
			pmc_pmem_persist(pm, dst, PMC_SB_SLOT);
		}
	}
	/* crash point format.meta: volume table, descriptors, index zeroed */
	pmc_pmem_fill(pm, pm->base + g.vol_off, 0, g.data_off - g.vol_off);
	pmc_pmem_persist(pm, pm->base + g.vol_off, g.data_off - g.vol_off);

	sb.magic = PMC_SB_MAGIC;
	sb.major = PMC_FORMAT_MAJOR;
	sb.minor = PMC_FORMAT_MINOR;
	sb.ro_compat = PMC_FEAT_RO_COMPAT_DISK_ID | PMC_FEAT_RO_COMPAT_QUARANTINE;
	random_uuid(sb.uuid);
	sb.pmem_size = g.pmem_size;
	sb.block_size = g.block_size;
	sb.max_volumes = g.max_volumes;
	sb.nr_blocks = g.nr_blocks;
	sb.nr_buckets = g.nr_buckets;
	sb.vol_off = g.vol_off;
	sb.desc_off = g.desc_off;
	sb.index_off = g.index_off;
	sb.data_off = g.data_off;
	sb.clean = 1;
	sb.format_time_ns = sb.open_time_ns = pmc_now_ns();
	/* crash point format.sb0, format.sb1: copy 0 makes the cache */
	for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
		char *dst = pm->base + (size_t)i * PMC_SB_SLOT;

		sb.seq = i + 1;
		sb.csum = pmc_sb_csum(&sb);
		pmc_pmem_copy(pm, dst, &sb, sizeof(sb));
		pmc_pmem_persist(pm, dst, sizeof(sb));
	}
	return 0;
}

static void cache_free(struct pmc_cache *c)
{
	if (!c)
		return;
	for (uint32_t s = 0; s < PMC_STRIPES_MAX; s++)
		pthread_mutex_destroy(&c->stripe[s]);
	pthread_mutex_destroy(&c->vol_lock);
	free(c->dirty_map);
	free(c->vrt);
	free(c);
}

static int valid_name(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n == 0 || n > max)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'))
			return 0;
	}
	return 1;
}

/* every active slot: checksum, names, no duplicates; no stores */
static int volumes_check(struct pmc_cache *c, struct pmc_err *err)
{
	for (uint32_t i = 0; i < c->max_volumes; i++) {
		const struct pmc_vol *v = &c->vols[i];
		uint32_t st = PMC_VOL_STATE(v->gen_state);

		if (st == PMC_VOL_FREE)
			continue;
		if (st != PMC_VOL_ACTIVE)
			return pmc_err_set(err, EUCLEAN, "pmem %s: volume slot %u: bad state %u", c->pm->path, i, st);
		/* a 1.0 cache: slots of the 1.0 layout, or converted before a
		 * crash cut the conversion short (vol_convert) */
		if (v->csum != pmc_vol_csum(v) &&
		    (c->sb.minor >= 1 || v->csum != pmc_vol_csum_v10(v)))
			return pmc_err_set(err, EUCLEAN, "pmem %s: volume slot %u: bad checksum", c->pm->path, i);
		if (!valid_name(v->name, PMC_VOLUME_NAME_MAX) ||
		    (c->sb.minor == 0 && v->csum == pmc_vol_csum_v10(v) &&
		     memchr((const char *)v + offsetof(struct pmc_vol, disk), 0,
			    offsetof(struct pmc_vol, csum) - offsetof(struct pmc_vol, disk)) == NULL))
			return pmc_err_set(err, EUCLEAN, "pmem %s: volume slot %u: malformed name or disk",
					   c->pm->path, i);
		for (uint32_t j = 0; j < i; j++)
			if (PMC_VOL_STATE(c->vols[j].gen_state) == PMC_VOL_ACTIVE &&
			    !strcmp(c->vols[j].name, v->name))
				return pmc_err_set(err, EUCLEAN,
						   "pmem %s: volume slots %u and %u: both named '%s'",
						   c->pm->path, j, i, v->name);
	}
	return 0;
}

/* the per-volume counters of a clean close sit outside any checksum: trust
 * them only if they add up to the checksummed totals of the superblock
 * (else the counters are recounted, as after a crash) */
static int clean_counts_agree(struct pmc_cache *c)
{
	uint64_t d = 0, k = 0;

	for (uint32_t i = 0; i < c->max_volumes; i++) {
		if (PMC_VOL_STATE(c->vols[i].gen_state) != PMC_VOL_ACTIVE)
			continue;
		if (c->vols[i].clean_nr_dirty > c->nr_blocks || c->vols[i].clean_nr_clean > c->nr_blocks ||
		    c->vols[i].clean_nr_lost > c->nr_blocks)
			return 0;
		d += c->vols[i].clean_nr_dirty;
		k += c->vols[i].clean_nr_clean;
	}
	return d == c->sb.clean_nr_dirty && k == c->sb.clean_nr_clean && d + k <= c->nr_blocks;
}

/*
 * A 1.0 cache opened read-write: every active slot to the 1.1 layout (its
 * checksum over bytes 8..167, one aligned 8-byte store; then the identity
 * record zeroed: "not recorded"), then the superblock says 1.1 in the
 * open.epoch commit. Each step is idempotent: a crash anywhere leaves a
 * 1.0 superblock whose slots are valid in either form, converted again
 * at the next open.
 */
static void vol_convert(struct pmc_cache *c)
{
	const size_t id_off = offsetof(struct pmc_vol, disk_bytes);
	const size_t id_len = offsetof(struct pmc_vol, csum) - id_off;

	for (uint32_t i = 0; i < c->max_volumes; i++) {
		struct pmc_vol *v = &c->vols[i];
		uint32_t sum = pmc_vol_csum(v);

		if (PMC_VOL_STATE(v->gen_state) != PMC_VOL_ACTIVE)
			continue;
		/* crash point convert.csum */
		if (v->csum != sum) {
			pmc_pmem_store8(c->pm, (uint64_t *)&v->csum, sum);
			pmc_pmem_persist(c->pm, &v->csum, sizeof(uint64_t));
		}
		/* crash point convert.id */
		pmc_pmem_fill(c->pm, (char *)v + id_off, 0, id_len);
		pmc_pmem_persist(c->pm, (char *)v + id_off, id_len);
	}
	c->sb.minor = PMC_FORMAT_MINOR;
	c->sb.ro_compat |= PMC_FEAT_RO_COMPAT_DISK_ID | PMC_FEAT_RO_COMPAT_QUARANTINE;
}

/*
 * A read-write open: after an unsafe shutdown of the namespace (its count
 * moved since the last open of this cache on the same device) lines the
 * ADR should have drained may be lost: the whole metadata is checked
 * before anything is served, and the open refused if it fails. Then the
 * bad blocks are quarantined, and the count and device id recorded (the
 * open.epoch commit writes them).
 */
static int media_check(struct pmc_cache *c, struct pmc_err *err)
{
	struct pmc_pmem *pm = c->pm;
	int rc;

	if (pm->usc_valid && c->sb.pmem_id[0] &&
	    !strncmp(c->sb.pmem_id, pm->dev_id, sizeof(c->sb.pmem_id)) &&
	    c->sb.pmem_usc != pm->usc) {
		struct pmc_check_report rep;
		struct pmc_err cerr = {0};

		pmc_log(LOG_WARNING,
			"pmem %s: unsafe shutdown (count %" PRIu64 " -> %" PRIu64 "): checking the "
			"whole metadata before serving",
			pm->path, c->sb.pmem_usc, pm->usc);
		rc = pmc_cache_check(c, &rep, &cerr);
		/* counters kept at a clean close that disagree with a sound
		 * index (their lines lost, or written by an older build):
		 * counted again from the index, as after a crash */
		if (rc && rep.counts_bad) {
			pmc_log(LOG_WARNING, "pmem %s: %s: the counters are recounted", pm->path,
				cerr.msg);
			pmc_cache_counts_forget(c);
		} else if (rc) {
			return pmc_err_set(err, EUCLEAN,
					   "pmem %s: after an unsafe shutdown the metadata check "
					   "failed: %s",
					   pm->path, cerr.msg);
		}
	}
	rc = pmc_cache_badblocks(c, err);
	if (rc)
		return rc;
	if (pm->usc_valid) {
		c->sb.pmem_usc = pm->usc;
		memset(c->sb.pmem_id, 0, sizeof(c->sb.pmem_id));
		memcpy(c->sb.pmem_id, pm->dev_id, strnlen(pm->dev_id, sizeof(c->sb.pmem_id) - 1));
	}
	return 0;
}

int pmc_cache_open(struct pmc_pmem *pm, unsigned flags, struct pmc_cache **out,
		   struct pmc_err *err)
{
	struct pmc_cache *c;
	struct pmc_sb sb;
	unsigned slot;
	uint64_t bad, bad_len;
	int rc;

	*out = NULL;
	/* the namespace's bad ranges, read once: one over a superblock copy
	 * refuses before either is read (a commit would go to that copy
	 * next), one below data_off before the tables are (a poisoned line
	 * raises SIGBUS) */
	if (!pmc_pmem_first_bad(pm, 0, pm->size, &bad, &bad_len))
		bad = UINT64_MAX;
	if (bad < PMC_SB_COPIES * PMC_SB_SLOT)
		return pmc_err_set(err, EIO,
				   "pmem %s: bad block in superblock copy %u (offset %u) in the "
				   "metadata; the cache cannot be trusted",
				   pm->path, (unsigned)(bad / PMC_SB_SLOT),
				   (unsigned)(bad / PMC_SB_SLOT * PMC_SB_SLOT));
	rc = pmc_sb_load(pm, &sb, &slot, err);
	if (rc)
		return rc;
	if (!(flags & PMC_OPEN_RDONLY) && (sb.ro_compat & ~PMC_FEAT_RO_COMPAT_KNOWN))
		return pmc_err_set(err, EROFS,
				   "pmem %s: superblock has unknown read-only features 0x%" PRIx64
				   "; open it read-only",
				   pm->path, sb.ro_compat & ~PMC_FEAT_RO_COMPAT_KNOWN);
	c = calloc(1, sizeof(*c));
	if (!c)
		return pmc_err_set(err, ENOMEM, "cache: out of memory");
	c->vrt = calloc(sb.max_volumes, sizeof(*c->vrt));
	c->dirty_map = calloc(sb.nr_blocks / 64 + 1, sizeof(*c->dirty_map));
	if (!c->vrt || !c->dirty_map) {
		free(c->vrt);
		free(c->dirty_map);
		free(c);
		return pmc_err_set(err, ENOMEM, "cache: out of memory");
	}
	pthread_mutex_init(&c->vol_lock, NULL);
	for (uint32_t s = 0; s < PMC_STRIPES_MAX; s++)
		pthread_mutex_init(&c->stripe[s], NULL);
	c->pm = pm;
	c->sb = sb;
	c->sb_slot = slot;
	c->vols = (struct pmc_vol *)(pm->base + sb.vol_off);
	c->descs = (struct pmc_desc *)(pm->base + sb.desc_off);
	c->buckets = (pmc_bucket_t *)(pm->base + sb.index_off);
	c->data = pm->base + sb.data_off;
	c->nr_blocks = sb.nr_blocks;
	c->bucket_mask = sb.nr_buckets - 1;
	c->block_size = sb.block_size;
	c->max_volumes = sb.max_volumes;
	c->nr_stripes = sb.nr_buckets < STRIPES_USED ? (uint32_t)sb.nr_buckets : STRIPES_USED;
	c->rdonly = !!(flags & PMC_OPEN_RDONLY);
	c->was_clean = (int)sb.clean;

	if (bad < sb.data_off) {
		cache_free(c);
		return pmc_err_set(err, EIO,
				   "pmem %s: bad block at offset %" PRIu64 " (+%" PRIu64 " bytes) in "
				   "the metadata; the cache cannot be trusted",
				   pm->path, bad, bad_len);
	}
	rc = volumes_check(c, err);
	if (rc) {
		cache_free(c);
		return rc;
	}
	/* the kept lost counts are of the session that closed last only if
	 * it wrote lost_epoch (an older build kept both as they were) */
	if (c->was_clean && clean_counts_agree(c) && sb.lost_epoch == (uint32_t)sb.boot_epoch) {
		for (uint32_t i = 0; i < c->max_volumes; i++) {
			if (PMC_VOL_STATE(c->vols[i].gen_state) != PMC_VOL_ACTIVE)
				continue;
			atomic_store(&c->vrt[i].nr_dirty, (int64_t)c->vols[i].clean_nr_dirty);
			atomic_fetch_add(&c->tot_dirty, (int64_t)c->vols[i].clean_nr_dirty);
			atomic_store(&c->vrt[i].nr_clean, (int64_t)c->vols[i].clean_nr_clean);
			atomic_store(&c->vrt[i].nr_lost, (int64_t)c->vols[i].clean_nr_lost);
		}
		memset(c->counted, 1, sizeof(c->counted));
		atomic_store(&c->counts_valid, 1);
	}
	/* what may refuse the open goes first: a refused open writes nothing
	 * (a 1.0 cache converted, then refused, could no longer be opened by
	 * the build that wrote it) */
	if (!c->rdonly) {
		rc = media_check(c, err);
		if (rc) {
			cache_free(c);
			return rc;
		}
	}
	if (!c->rdonly && c->sb.minor == 0)
		vol_convert(c);
	if (!c->rdonly) {
		if (pmc_test_open_committing)
			pmc_test_open_committing(c);
		/* crash point open.epoch: a new epoch voids old pins; not clean
		 * until the next close */
		do
			c->sb.boot_epoch++;
		while ((uint32_t)c->sb.boot_epoch == 0);
		c->sb.clean = 0;
		c->sb.open_time_ns = pmc_now_ns();
		pmc_sb_commit(c);
	}
	c->epoch = (uint32_t)c->sb.boot_epoch;
	*out = c;
	return 0;
}

void pmc_cache_close(struct pmc_cache *c)
{
	struct pmc_pmem *pm;
	uint64_t dirty = 0, clean = 0;

	if (!c)
		return;
	pm = c->pm;
	if (!c->rdonly) {
		if (!atomic_load(&c->counts_valid))
			pmc_cache_recount(c);
		/* crash point close.counters, then close.sb */
		for (uint32_t i = 0; i < c->max_volumes; i++) {
			struct pmc_vol *v = &c->vols[i];
			uint64_t d = 0, k = 0;
			uint32_t l = 0;

			if (PMC_VOL_STATE(v->gen_state) == PMC_VOL_ACTIVE) {
				d = (uint64_t)atomic_load(&c->vrt[i].nr_dirty);
				k = (uint64_t)atomic_load(&c->vrt[i].nr_clean);
				l = (uint32_t)atomic_load(&c->vrt[i].nr_lost);
			}
			if (v->clean_nr_dirty != d || v->clean_nr_clean != k || v->clean_nr_lost != l) {
				pmc_pmem_store8(pm, &v->clean_nr_dirty, d);
				pmc_pmem_store8(pm, &v->clean_nr_clean, k);
				pmc_pmem_copy(pm, &v->clean_nr_lost, &l, sizeof(l));
				pmc_pmem_flush(pm, &v->clean_nr_lost, 4 + 2 * sizeof(uint64_t));
			}
			dirty += d;
			clean += k;
		}
		pmc_pmem_drain(pm);
		c->sb.clean = 1;
		c->sb.lost_epoch = (uint32_t)c->sb.boot_epoch;
		c->sb.clean_nr_dirty = dirty;
		c->sb.clean_nr_clean = clean;
		c->sb.open_time_ns = pmc_now_ns();
		pmc_sb_commit(c);
	}
	cache_free(c);
}

void pmc_cache_counts_forget(struct pmc_cache *c)
{
	memset(c->counted, 0, sizeof(c->counted));
	atomic_store(&c->counts_valid, 0);
	atomic_store(&c->tot_dirty, 0);
	for (uint32_t i = 0; i < c->max_volumes; i++) {
		atomic_store(&c->vrt[i].nr_dirty, 0);
		atomic_store(&c->vrt[i].nr_clean, 0);
		atomic_store(&c->vrt[i].nr_lost, 0);
	}
}

void pmc_cache_abandon(struct pmc_cache *c)
{
	cache_free(c);
}

struct pmc_pmem *pmc_cache_pmem(struct pmc_cache *c)
{
	return c->pm;
}

void pmc_uuid_str(const uint8_t uuid[16], char *buf, size_t len)
{
	for (int i = 0; i < 16 && 2 * (size_t)i + 2 < len; i++)
		snprintf(buf + 2 * i, 3, "%02x", uuid[i]);
}

void pmc_cache_get_info(struct pmc_cache *c, struct pmc_cache_info *info)
{
	memset(info, 0, sizeof(*info));
	info->pmem_size = c->sb.pmem_size;
	info->block_size = c->block_size;
	info->max_volumes = c->max_volumes;
	info->nr_blocks = c->nr_blocks;
	info->nr_buckets = c->bucket_mask + 1;
	info->data_off = c->sb.data_off;
	info->boot_epoch = c->sb.boot_epoch;
	info->counts_valid = atomic_load(&c->counts_valid);
	info->evictions = atomic_load(&c->evictions);
	info->was_clean = c->was_clean;
	info->rdonly = c->rdonly;
	memcpy(info->uuid, c->sb.uuid, sizeof(info->uuid));
	info->gran = pmc_pmem_gran_name(c->pm->gran);
	for (uint32_t i = 0; i < c->max_volumes; i++) {
		if (PMC_VOL_STATE(pmc_load64(&c->vols[i].gen_state)) != PMC_VOL_ACTIVE)
			continue;
		info->nr_dirty += (uint64_t)atomic_load(&c->vrt[i].nr_dirty);
		info->nr_clean += (uint64_t)atomic_load(&c->vrt[i].nr_clean);
	}
}

int pmc_cache_counts_snapshot(struct pmc_cache *c, uint64_t *dirty, uint64_t *clean,
			      uint64_t *tot_dirty, uint64_t *tot_clean)
{
	uint64_t td = 0, tc = 0;
	int valid;

	if (pmc_test_counts_snapshot)
		pmc_test_counts_snapshot();

	/* every count changes under the lock of the stripe whose chain the
	 * block is in: with all of them held, a block that moves between
	 * volumes (evicted from one, taken by another) or between states is
	 * seen in one place only */
	for (uint32_t s = 0; s < c->nr_stripes; s++)
		pthread_mutex_lock(&c->stripe[s]);
	valid = atomic_load(&c->counts_valid);
	for (uint32_t i = 0; i < c->max_volumes; i++) {
		uint64_t d = 0, k = 0;

		if (PMC_VOL_STATE(pmc_load64(&c->vols[i].gen_state)) == PMC_VOL_ACTIVE) {
			d = (uint64_t)atomic_load(&c->vrt[i].nr_dirty);
			k = (uint64_t)atomic_load(&c->vrt[i].nr_clean);
		}
		if (dirty)
			dirty[i] = d;
		if (clean)
			clean[i] = k;
		td += d;
		tc += k;
	}
	for (uint32_t s = c->nr_stripes; s-- > 0;)
		pthread_mutex_unlock(&c->stripe[s]);
	if (tot_dirty)
		*tot_dirty = td;
	if (tot_clean)
		*tot_clean = tc;
	return valid;
}

/* --- volumes --- */

static int vol_active(struct pmc_cache *c, uint32_t vol)
{
	return vol < c->max_volumes &&
	       PMC_VOL_STATE(pmc_load64(&c->vols[vol].gen_state)) == PMC_VOL_ACTIVE;
}

int pmc_cache_volume_add(struct pmc_cache *c, const char *name, const char *disk,
			 uint64_t size_bytes, uint32_t *vol, struct pmc_err *err)
{
	return pmc_cache_volume_add_id(c, name, disk, size_bytes, NULL, vol, err);
}

/* the identity record of a slot image: disk_bytes, disk_id, id_csum */
static void id_fill(struct pmc_vol *img, const struct pmc_disk_id *id)
{
	img->disk_bytes = id->disk_bytes;
	memset(img->disk_id, 0, sizeof(img->disk_id));
	memcpy(img->disk_id, id->text, strnlen(id->text, PMC_DISK_ID_MAX));
	img->id_csum = pmc_vol_id_csum(img);
}

int pmc_cache_volume_add_id(struct pmc_cache *c, const char *name, const char *disk,
			    uint64_t size_bytes, const struct pmc_disk_id *id, uint32_t *vol,
			    struct pmc_err *err)
{
	struct pmc_vol img, *v = NULL;
	uint32_t i, slot = 0;
	uint64_t gen;

	if (c->rdonly)
		return pmc_err_set(err, EROFS, "volume %s: cache is open read-only", name);
	if (!valid_name(name, PMC_VOLUME_NAME_MAX))
		return pmc_err_set(err, EINVAL,
				   "volume name '%.64s': use 1 to %u of A-Z a-z 0-9 . _ -", name,
				   PMC_VOLUME_NAME_MAX);
	if (!disk || strlen(disk) > PMC_VOLUME_DISK_MAX)
		return pmc_err_set(err, EINVAL, "volume %s: disk name missing or longer than %u",
				   name, PMC_VOLUME_DISK_MAX);
	if (size_bytes < c->block_size || size_bytes % c->block_size)
		return pmc_err_set(err, EINVAL,
				   "volume %s: size %" PRIu64 " is not a positive multiple of the "
				   "block size %u",
				   name, size_bytes, c->block_size);
	pthread_mutex_lock(&c->vol_lock);
	for (i = 0; i < c->max_volumes; i++) {
		if (vol_active(c, i)) {
			if (!strcmp(c->vols[i].name, name)) {
				pthread_mutex_unlock(&c->vol_lock);
				return pmc_err_set(err, EEXIST, "volume %s: already exists (slot %u)",
						   name, i);
			}
		} else if (!v) {
			v = &c->vols[i];
			slot = i;
		}
	}
	if (!v) {
		pthread_mutex_unlock(&c->vol_lock);
		return pmc_err_set(err, ENOSPC, "volume %s: volume table is full (%u slots)", name,
				   c->max_volumes);
	}
	gen = PMC_VOL_GEN(v->gen_state);
	memset(&img, 0, sizeof(img));
	img.size_bytes = size_bytes;
	img.add_time_ns = pmc_now_ns();
	random_uuid(img.uuid);
	snprintf(img.name, sizeof(img.name), "%s", name);
	/* the path as configured, truncated to the slot's 64 bytes */
	memcpy(img.disk, disk, strnlen(disk, sizeof(img.disk)));
	if (id && id->text[0])
		id_fill(&img, id);
	img.csum = pmc_vol_csum(&img);
	/* crash point volume_add.fields: a free slot's fields, then one store */
	pmc_pmem_copy(c->pm, (char *)v + 8, (char *)&img + 8, sizeof(img) - 8);
	pmc_pmem_persist(c->pm, (char *)v + 8, sizeof(img) - 8);
	atomic_store(&c->vrt[slot].nr_dirty, 0);
	atomic_store(&c->vrt[slot].nr_clean, 0);
	atomic_store(&c->vrt[slot].refs, 0);
	atomic_store(&c->vrt[slot].removing, 0);
	/* crash point volume_add.state */
	pmc_pmem_store8(c->pm, &v->gen_state, PMC_VOL_GS(gen, PMC_VOL_ACTIVE));
	pmc_pmem_persist(c->pm, &v->gen_state, sizeof(uint64_t));
	pthread_mutex_unlock(&c->vol_lock);
	*vol = slot;
	return 0;
}

/*
 * A new slot generation, in state (ACTIVE: the volume's disk is renewed,
 * FREE: the volume is removed): every cached block of vol stale in one
 * store. Under vol_lock, with no reference. Only when the volume holds no
 * dirty or LOST block (a LOST one stands for an acknowledged write), or
 * force: returns the dirty blocks found, *lost the LOST ones.
 */
static int64_t volume_next_gen(struct pmc_cache *c, uint32_t vol, uint64_t state, int force,
			       int64_t *lost)
{
	struct pmc_vol *v = &c->vols[vol];
	int64_t dirty;

	if (!atomic_load(&c->counts_valid))
		pmc_cache_recount(c);
	for (uint32_t s = 0; s < c->nr_stripes; s++)
		pthread_mutex_lock(&c->stripe[s]);
	dirty = atomic_load(&c->vrt[vol].nr_dirty);
	*lost = atomic_load(&c->vrt[vol].nr_lost);
	if ((dirty == 0 && *lost == 0) || force) {
		/* crash points set_id.renew and volume_remove.state: one
		 * store. A renew does it before the new identity is recorded
		 * (a crash between leaves the old identity: the new disk is
		 * refused, and no blocks); a removed volume's blocks are
		 * reclaimed lazily */
		pmc_pmem_store8(c->pm, &v->gen_state,
				PMC_VOL_GS(PMC_VOL_GEN(v->gen_state) + 1, state));
		pmc_pmem_persist(c->pm, &v->gen_state, sizeof(uint64_t));
		atomic_fetch_sub(&c->tot_dirty, dirty);
		atomic_store(&c->vrt[vol].nr_dirty, 0);
		atomic_store(&c->vrt[vol].nr_clean, 0);
		atomic_store(&c->vrt[vol].nr_lost, 0);
	}
	for (uint32_t s = c->nr_stripes; s-- > 0;)
		pthread_mutex_unlock(&c->stripe[s]);
	return dirty;
}

/* the disk of vol renewed: returns the dirty and LOST blocks found */
static int64_t volume_renew(struct pmc_cache *c, uint32_t vol, int discard_dirty)
{
	int64_t lost, dirty = volume_next_gen(c, vol, PMC_VOL_ACTIVE, discard_dirty, &lost);

	return dirty + lost;
}

int pmc_cache_volume_remove(struct pmc_cache *c, uint32_t vol, struct pmc_err *err)
{
	struct pmc_vol *v;
	int refs;
	int64_t dirty, lost;

	if (c->rdonly)
		return pmc_err_set(err, EROFS, "volume slot %u: cache is open read-only", vol);
	pthread_mutex_lock(&c->vol_lock);
	if (!vol_active(c, vol)) {
		pthread_mutex_unlock(&c->vol_lock);
		return pmc_err_set(err, ENOENT, "volume slot %u: no such volume", vol);
	}
	v = &c->vols[vol];
	atomic_store(&c->vrt[vol].removing, 1);
	refs = atomic_load(&c->vrt[vol].refs);
	if (refs) {
		atomic_store(&c->vrt[vol].removing, 0);
		pthread_mutex_unlock(&c->vol_lock);
		return pmc_err_set(err, EBUSY, "volume %s: %d references held (I/O in flight)",
				   v->name, refs);
	}
	dirty = volume_next_gen(c, vol, PMC_VOL_FREE, 0, &lost);
	atomic_store(&c->vrt[vol].removing, 0);
	pthread_mutex_unlock(&c->vol_lock);
	if (dirty)
		return pmc_err_set(err, EBUSY,
				   "volume %s: %" PRId64 " dirty blocks not yet written back",
				   v->name, dirty);
	if (lost)
		return pmc_err_set(err, EBUSY,
				   "volume %s: %" PRId64 " blocks lost to pmem media errors (reads "
				   "of them fail; removed, the disk's older data would be read "
				   "there): write or discard them first",
				   v->name, lost);
	return 0;
}

int pmc_cache_volume_find(struct pmc_cache *c, const char *name, uint32_t *vol)
{
	for (uint32_t i = 0; i < c->max_volumes; i++) {
		if (vol_active(c, i) && !strncmp(c->vols[i].name, name, sizeof(c->vols[i].name))) {
			*vol = i;
			return 0;
		}
	}
	return -ENOENT;
}

/* the identity record of a 1.1 slot: none (all zero), valid, or unreadable */
static void vol_id_read(const struct pmc_vol *v, struct pmc_volume_info *out)
{
	const unsigned char *p = (const unsigned char *)&v->disk_bytes;
	size_t len = offsetof(struct pmc_vol, csum) - offsetof(struct pmc_vol, disk_bytes);
	size_t i;

	for (i = 0; i < len && !p[i]; i++)
		;
	if (i == len) {
		out->id_state = 0;
		return;
	}
	if (v->id_csum != pmc_vol_id_csum(v) || !v->disk_id[0] ||
	    !memchr(v->disk_id, 0, sizeof(v->disk_id))) {
		out->id_state = -1;
		return;
	}
	out->id_state = 1;
	out->disk_id.disk_bytes = v->disk_bytes;
	memcpy(out->disk_id.text, v->disk_id, sizeof(v->disk_id));
}

/* vol_lock taken on an active slot that nobody references (0), or an
 * error and no lock */
static int volume_lock_unused(struct pmc_cache *c, uint32_t vol, struct pmc_err *err)
{
	int refs;

	if (c->rdonly)
		return pmc_err_set(err, EROFS, "volume slot %u: cache is open read-only", vol);
	pthread_mutex_lock(&c->vol_lock);
	if (!vol_active(c, vol)) {
		pthread_mutex_unlock(&c->vol_lock);
		return pmc_err_set(err, ENOENT, "volume slot %u: no such volume", vol);
	}
	refs = atomic_load(&c->vrt[vol].refs);
	if (refs) {
		pthread_mutex_unlock(&c->vol_lock);
		return pmc_err_set(err, EBUSY, "volume %s: attached or in use (%d references)",
				   c->vols[vol].name, refs);
	}
	return 0;
}

int pmc_cache_volume_drop(struct pmc_cache *c, uint32_t vol, uint64_t *ndirty,
			  struct pmc_err *err)
{
	int64_t dirty;
	int rc;

	*ndirty = 0;
	rc = volume_lock_unused(c, vol, err);
	if (rc)
		return rc;
	dirty = volume_renew(c, vol, 0);
	pthread_mutex_unlock(&c->vol_lock);
	*ndirty = (uint64_t)dirty;
	if (dirty)
		return pmc_err_set(err, EBUSY, "volume %s: %" PRId64 " dirty or lost blocks",
				   c->vols[vol].name, dirty);
	return 0;
}

int pmc_cache_volume_set_id(struct pmc_cache *c, uint32_t vol, const struct pmc_disk_id *id,
			    int renew, int discard_dirty, struct pmc_err *err)
{
	const size_t id_off = offsetof(struct pmc_vol, disk_bytes);
	const size_t id_len = offsetof(struct pmc_vol, csum) - id_off;
	struct pmc_vol img, *v;
	int64_t dirty = 0;
	int rc;

	if (!id->text[0] || strnlen(id->text, sizeof(id->text)) > PMC_DISK_ID_MAX)
		return pmc_err_set(err, EINVAL, "volume slot %u: empty or overlong disk identity",
				   vol);
	rc = volume_lock_unused(c, vol, err);
	if (rc)
		return rc;
	v = &c->vols[vol];
	if (renew) {
		dirty = volume_renew(c, vol, discard_dirty);
		if (dirty && !discard_dirty) {
			pthread_mutex_unlock(&c->vol_lock);
			return pmc_err_set(err, EBUSY,
					   "volume %s: %" PRId64 " dirty blocks of the old disk are "
					   "not written back; replacing the disk would lose them "
					   "(attach the old disk and flush, or discard them)",
					   v->name, dirty);
		}
	}
	/* crash point set_id.record: the identity record, with its own
	 * checksum (a torn record reads as unreadable, never as another disk) */
	img = *v;
	id_fill(&img, id);
	pmc_pmem_copy(c->pm, (char *)v + id_off, (char *)&img + id_off, id_len);
	pmc_pmem_persist(c->pm, (char *)v + id_off, id_len);
	pthread_mutex_unlock(&c->vol_lock);
	return 0;
}

int pmc_cache_volume_info(struct pmc_cache *c, uint32_t vol, struct pmc_volume_info *out)
{
	const struct pmc_vol *v;

	if (!vol_active(c, vol))
		return -ENOENT;
	v = &c->vols[vol];
	memset(out, 0, sizeof(*out));
	out->vol = vol;
	out->nr_lost = (uint64_t)atomic_load(&c->vrt[vol].nr_lost);
	out->gen = (uint32_t)PMC_VOL_GEN(v->gen_state);
	out->size_bytes = v->size_bytes;
	out->add_time_ns = v->add_time_ns;
	memcpy(out->uuid, v->uuid, sizeof(out->uuid));
	memcpy(out->name, v->name, sizeof(out->name));
	if (c->sb.minor == 0) {
		/* 1.0 layout: a 128-byte disk field, no identity */
		memcpy(out->disk, (const char *)v + offsetof(struct pmc_vol, disk),
		       offsetof(struct pmc_vol, csum) - offsetof(struct pmc_vol, disk));
	} else {
		memcpy(out->disk, v->disk, sizeof(v->disk));
		vol_id_read(v, out);
	}
	out->name[PMC_VOLUME_NAME_MAX] = '\0';
	out->disk[PMC_VOLUME_DISK_MAX] = '\0';
	out->counts_valid = atomic_load(&c->counts_valid);
	out->nr_dirty = (uint64_t)atomic_load(&c->vrt[vol].nr_dirty);
	out->nr_clean = (uint64_t)atomic_load(&c->vrt[vol].nr_clean);
	out->refs = atomic_load(&c->vrt[vol].refs);
	return 0;
}

int pmc_cache_volume_get(struct pmc_cache *c, uint32_t vol)
{
	if (vol >= c->max_volumes)
		return -ENOENT;
	atomic_fetch_add(&c->vrt[vol].refs, 1);
	if (atomic_load(&c->vrt[vol].removing) || !vol_active(c, vol)) {
		atomic_fetch_sub(&c->vrt[vol].refs, 1);
		return -ENOENT;
	}
	return 0;
}

void pmc_cache_volume_put(struct pmc_cache *c, uint32_t vol)
{
	int old = atomic_fetch_sub(&c->vrt[vol].refs, 1);

	PMC_BUG_ON(old <= 0, "volume slot %u: reference count underflow", vol);
}

/* --- cache-level data API --- */

static int range_check(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n,
		       struct pmc_err *err)
{
	uint64_t blocks = c->vols[vol].size_bytes / c->block_size;

	if (lba > blocks || n > blocks - lba)
		return pmc_err_set(err, EINVAL,
				   "volume %s: blocks %" PRIu64 "+%u beyond its end (%" PRIu64
				   " blocks)",
				   c->vols[vol].name, lba, n, blocks);
	return 0;
}

int pmc_cache_write(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks,
		    const void *buf, struct pmc_err *err)
{
	uint64_t blk[PMC_BATCH_MAX], lbas[PMC_BATCH_MAX];
	int res[PMC_BATCH_MAX];
	int rc;

	if (c->rdonly)
		return pmc_err_set(err, EROFS, "cache: open read-only");
	if (pmc_cache_volume_get(c, vol))
		return pmc_err_set(err, ENOENT, "volume slot %u: no such volume", vol);
	rc = range_check(c, vol, lba, nblocks, err);
	/* a batch at a time: copy every block, then publish them together */
	for (uint32_t i = 0; i < nblocks && rc == 0;) {
		uint32_t n = 0;

		while (n < PMC_BATCH_MAX && i + n < nblocks) {
			rc = pmc_cache_alloc(c, PMC_ALLOC_EVICT, &blk[n]);
			if (rc) {
				pmc_err_set(err, -rc,
					    "volume %s: block %" PRIu64 ": no free or clean cache block",
					    c->vols[vol].name, lba + i + n);
				break;
			}
			lbas[n] = lba + i + n;
			pmc_pmem_copy_flush(c->pm, pmc_cache_block_data(c, blk[n]),
					    (const char *)buf + (size_t)(i + n) * c->block_size,
					    c->block_size);
			n++;
		}
		if (n) {
			int prc = pmc_cache_publish_n(c, vol, lbas, blk, n, PMC_BLK_DIRTY, NULL, res);

			for (uint32_t k = 0; k < n; k++) {
				if (!prc && res[k])
					prc = res[k];
				pmc_cache_unpin(c, blk[k]);
			}
			if (prc && !rc)
				rc = pmc_err_set(err, -prc, "volume %s: block %" PRIu64 ": publish failed",
						 c->vols[vol].name, lba + i);
		}
		i += n;
	}
	pmc_cache_volume_put(c, vol);
	return rc;
}

int pmc_cache_read(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks, void *buf,
		   uint8_t *hit)
{
	int found = 0;

	if (pmc_cache_volume_get(c, vol))
		return -ENOENT;
	if (range_check(c, vol, lba, nblocks, NULL)) {
		pmc_cache_volume_put(c, vol);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < nblocks; i++) {
		uint64_t blk;
		int rc = pmc_cache_lookup_pin(c, vol, lba + i, &blk, NULL);

		if (rc == -EUCLEAN) { /* a copy past the chain's break is not seen */
			pmc_cache_volume_put(c, vol);
			return -EIO;
		}
		if (hit)
			hit[i] = rc == 0;
		if (rc)
			continue;
		memcpy((char *)buf + (size_t)i * c->block_size, pmc_cache_block_data(c, blk),
		       c->block_size);
		pmc_cache_unpin(c, blk);
		found++;
	}
	pmc_cache_volume_put(c, vol);
	return found;
}
