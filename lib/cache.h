/* cache.h - the metadata core: format, open/recover, volumes, the index
 * from (volume, LBA) to cache blocks, pins, and the cache-level write and
 * read-hit API (no disk I/O; the engine adds the disks).
 *
 * Units: an LBA here is a cache-block number within a volume (byte offset /
 * block_size). Block numbers ("blk") index the descriptor table and the
 * data area.
 *
 * Thread safety: every call may be made from any thread at once, except
 * format/open/close/abandon, which own the cache exclusively. See cache.c
 * for the locking rules.
 */
#ifndef PMC_CACHE_H
#define PMC_CACHE_H

#include <stdint.h>

#include "err.h"
#include "pmem.h"

#define PMC_BLOCK_SIZE_DEFAULT 4096u
#define PMC_MAX_VOLUMES_DEFAULT 64u
#define PMC_VOLUME_NAME_MAX 63u	 /* bytes, without the NUL */
#define PMC_VOLUME_DISK_MAX 127u /* bytes, without the NUL (the slot keeps 64) */
#define PMC_DISK_ID_MAX 51u	 /* bytes of a disk identity, without the NUL */

/* the identity of a backing disk (diskid.h) as a volume slot records it */
struct pmc_disk_id {
	char text[PMC_DISK_ID_MAX + 1]; /* "" none */
	uint64_t disk_bytes;		 /* size of the disk when recorded */
};

struct pmc_cache;

struct pmc_format_opts {
	uint32_t block_size;  /* bytes, power of two, 4 KiB..1 MiB; 0 = 4 KiB */
	uint32_t max_volumes; /* 1..4096; 0 = 64 */
};

enum pmc_open_flags {
	/* validate and load without a single store to pmem (check, dump,
	 * fuzzing); write calls then fail with -EROFS */
	PMC_OPEN_RDONLY = 1u << 0,
};

/* block states as stored in the descriptor (lib/FORMAT.md) */
enum pmc_block_state {
	PMC_BLK_FREE = 0,
	PMC_BLK_CLEAN = 1,
	PMC_BLK_DIRTY = 2,
	/* 1.1 (poison.h): linked, its dirty data lost to a media error: reads
	 * fail with -EIO, write-back skips it */
	PMC_BLK_LOST = 3,
	/* 1.1: unlinked, its media is bad: never allocated again */
	PMC_BLK_BAD = 4,
};

struct pmc_volume_info {
	uint32_t vol;		/* slot number */
	uint32_t gen;		/* slot generation (low 32 bits) */
	uint64_t size_bytes;	/* size of the backing volume */
	uint64_t add_time_ns;	/* CLOCK_REALTIME at volume_add */
	uint8_t uuid[16];
	char name[PMC_VOLUME_NAME_MAX + 1];
	char disk[PMC_VOLUME_DISK_MAX + 1];
	uint64_t nr_dirty;	/* blocks; valid when counts_valid */
	uint64_t nr_clean;	/* blocks; valid when counts_valid */
	uint64_t nr_lost;	/* LOST blocks (dirty data lost to media errors); ditto */
	int counts_valid;	/* 0 while a recount after a crash is pending */
	int refs;		/* holders of pmc_cache_volume_get() */
	struct pmc_disk_id disk_id; /* valid when id_state == 1 */
	int id_state;		/* 1 recorded, 0 none (1.0 cache), -1 unreadable */
};

struct pmc_cache_info {
	uint64_t pmem_size;	/* bytes */
	uint32_t block_size;	/* bytes */
	uint32_t max_volumes;
	uint64_t nr_blocks;
	uint64_t nr_buckets;
	uint64_t data_off;	/* bytes from the start of pmem */
	uint64_t boot_epoch;
	uint64_t nr_dirty;	/* linked dirty blocks; valid when counts_valid */
	uint64_t nr_clean;	/* linked clean blocks; valid when counts_valid */
	int counts_valid;
	uint64_t evictions;	/* clean blocks evicted since open */
	int was_clean;		/* the last close was clean (no crash recovery) */
	int rdonly;
	uint8_t uuid[16];
	const char *gran;	/* store granularity of the pmem */
};

/* a cache's uuid as 32 hex digits (len >= 33) */
void pmc_uuid_str(const uint8_t uuid[16], char *buf, size_t len);

/* Write a new, empty cache over the whole pmem. Destroys what was there. */
int pmc_cache_format(struct pmc_pmem *pm, const struct pmc_format_opts *opts,
		     struct pmc_err *err);

/*
 * Validate the superblocks and geometry, then (unless PMC_OPEN_RDONLY) start a
 * new boot epoch, which voids every pin left by a crash. O(1) in the cache
 * size after a clean close and after a crash alike: nothing is scanned.
 * Refuses without writing: no superblock, foreign data, corrupt copies, a
 * newer format or unknown incompatible features, a size that does not match.
 */
int pmc_cache_open(struct pmc_pmem *pm, unsigned flags, struct pmc_cache **out,
		   struct pmc_err *err);

/* Record a clean shutdown (counters, clean flag) and free. Pins must be 0. */
void pmc_cache_close(struct pmc_cache *c);

/* Free the DRAM state without writing anything (a simulated crash). */
void pmc_cache_abandon(struct pmc_cache *c);

void pmc_cache_get_info(struct pmc_cache *c, struct pmc_cache_info *info);

/* The dirty and clean blocks of every volume slot (dirty, clean:
 * [max_volumes] each, 0 for a free slot; any pointer may be NULL) and their
 * totals as one snapshot: a block moving between volumes or states counts
 * once, so the sums never pass nr_blocks (pmc_cache_get_info() and
 * pmc_cache_volume_info() read the counters one by one and may count a
 * moving block twice). Holds every stripe lock while it reads: for status,
 * not for a hot path. Returns counts_valid (0: partial, a recount after a
 * crash is pending). */
int pmc_cache_counts_snapshot(struct pmc_cache *c, uint64_t *dirty, uint64_t *clean,
			      uint64_t *tot_dirty, uint64_t *tot_clean);

/* After a crash the dirty/clean counters are unknown; this walks the index
 * (not the data area) to recount them. Safe while I/O runs. */
void pmc_cache_recount(struct pmc_cache *c);

/* Forget the counters a clean close kept, so that pmc_cache_close()
 * recounts them from the index and keeps those: the repair of counters
 * that disagree with a sound index (pmcachectl check --repair). Only while
 * nothing else uses the cache, opened writable. */
void pmc_cache_counts_forget(struct pmc_cache *c);

/* --- volumes --- */
int pmc_cache_volume_add(struct pmc_cache *c, const char *name, const char *disk,
			 uint64_t size_bytes, uint32_t *vol, struct pmc_err *err);
/* ... recording the identity of its disk (id may be NULL: none) */
int pmc_cache_volume_add_id(struct pmc_cache *c, const char *name, const char *disk,
			    uint64_t size_bytes, const struct pmc_disk_id *id, uint32_t *vol,
			    struct pmc_err *err);
/*
 * Record the identity of vol's disk. With renew, the volume's disk is being
 * replaced: every cached block of the volume is dropped first (a new slot
 * generation, one atomic store), refused with -EBUSY while it has dirty
 * blocks unless discard_dirty. Refused while the volume has references.
 */
int pmc_cache_volume_set_id(struct pmc_cache *c, uint32_t vol, const struct pmc_disk_id *id,
			    int renew, int discard_dirty, struct pmc_err *err);
/* Drop every cached block of vol (a new slot generation, as a renew of
 * set_id), keeping the volume and its disk's identity. Refused while the
 * volume has references or dirty blocks (-EBUSY, *ndirty of them). */
int pmc_cache_volume_drop(struct pmc_cache *c, uint32_t vol, uint64_t *ndirty,
			  struct pmc_err *err);
/* Refuses while the volume has references or dirty blocks (-EBUSY); its
 * clean blocks become free in O(1) and are reclaimed lazily. */
int pmc_cache_volume_remove(struct pmc_cache *c, uint32_t vol, struct pmc_err *err);
int pmc_cache_volume_find(struct pmc_cache *c, const char *name, uint32_t *vol);
int pmc_cache_volume_info(struct pmc_cache *c, uint32_t vol, struct pmc_volume_info *out);
/* references held by in-flight I/O; a referenced volume cannot be removed */
int pmc_cache_volume_get(struct pmc_cache *c, uint32_t vol);
void pmc_cache_volume_put(struct pmc_cache *c, uint32_t vol);

/* --- cache-level data API (no disk I/O) --- */

/*
 * Write nblocks whole blocks from buf for (vol, lba...) as dirty data. On
 * return 0 every block is durable in pmem (acknowledgeable). Each block is
 * replaced atomically: after a crash a block holds either its old or its new
 * contents, never a mix. -ENOSPC when no free or clean unpinned block is left
 * (the blocks before the failing one are written).
 */
int pmc_cache_write(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks,
		    const void *buf, struct pmc_err *err);

/* Copy the cached blocks of (vol, lba...) into buf. hit[i] (optional) is set
 * to 1 for a block found, 0 for a miss (its part of buf is left alone).
 * Returns the number of blocks found; -EIO when a lookup meets a corrupt
 * index chain (a copy past its break would be missed). */
int pmc_cache_read(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks, void *buf,
		   uint8_t *hit);

/* Drop cached copies (clean or dirty) of the range. Returns 0. */
int pmc_cache_invalidate(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks);
/* The same for every copy but a DIRTY or LOST one, which stays: kept[i] (kept may
 * be NULL) is its block, else UINT64_MAX. Like pmc_cache_invalidate, every key of the
 * range, cached or not, keeps a fill in flight from landing. Returns 0, or
 * -errno (a corrupt chain: that key is left alone, the rest still done up
 * to PMC_BATCH_MAX keys; -EROFS on a read-only cache, nothing done). */
int pmc_cache_invalidate_clean(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t nblocks,
			       uint64_t *kept);

/* --- block-level API for the engine --- */

/* Start fetching the index entries of the n keys (vol, lba..lba+n-1)
 * into the CPU cache, so that the lookups which follow wait for memory
 * together rather than one after the other. A hint only: nothing is
 * locked or changed, and any n is fine. */
void pmc_cache_prefetch(const struct pmc_cache *c, uint32_t vol, uint64_t lba, uint32_t n);
/* Find and pin the block caching (vol, lba); -ENOENT on a miss. */
int pmc_cache_lookup_pin(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t *blk,
			 enum pmc_block_state *state);
/* Take one more pin on a block the caller already pins. */
void pmc_cache_pin(struct pmc_cache *c, uint64_t blk);
void pmc_cache_unpin(struct pmc_cache *c, uint64_t blk);
/* pins held on blk in this boot epoch */
uint32_t pmc_cache_pins(struct pmc_cache *c, uint64_t blk);
void *pmc_cache_block_data(struct pmc_cache *c, uint64_t blk);

/* what pmc_cache_alloc may take besides free blocks, orphans and stale ones */
enum pmc_alloc_mode {
	PMC_ALLOC_FREE = 0,  /* nothing else */
	PMC_ALLOC_EVICT = 1, /* clean unpinned blocks (CLOCK: a referenced one gets
			      * a second chance) */
	PMC_ALLOC_FILL = 2,  /* a read-miss fill: clean blocks not referenced
			      * since the hand last passed, within a short look
			      * (PMC_ALLOC_FILL_LOOK blocks): a miss is not worth
			      * evicting a block in use, nor a long search */
};
#define PMC_ALLOC_FILL_LOOK 64u

/* A free (or reclaimed clean/orphan) block, pinned once for the caller and
 * linked nowhere; mode (enum pmc_alloc_mode) says what may be evicted.
 * Dirty blocks are never taken, and the hand passes them at the cost of a
 * bitmap load (cache_internal.h), not a claim. -ENOSPC when none is found. */
int pmc_cache_alloc(struct pmc_cache *c, int mode, uint64_t *blk);

/*
 * Make blk (allocated and pinned by the caller, its data already stored with
 * pmc_pmem_copy) the cached copy of (vol, lba) in the given state, replacing
 * any older copy atomically. Persists the data and metadata. The caller keeps
 * its pin. -ESTALE if the volume was removed meanwhile.
 */
int pmc_cache_publish(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
		      enum pmc_block_state state);

/*
 * The same for n blocks at once, with one persist barrier for all their
 * descriptors and one for all their links (FORMAT.md): blk[i] becomes the
 * copy of (vol, lba[i]). The caller has stored AND flushed every block's
 * data (pmc_pmem_copy_flush, or pmc_pmem_flush after its own stores) and
 * pins them. snap NULL: writes, replacing older copies; else fills, each
 * published only under the rule of pmc_cache_publish_fill with snap[i].
 * res[i] is each block's result (0, -EEXIST, -ESTALE, -EUCLEAN). Returns 0,
 * or -ESTALE / -EINVAL for the volume (then nothing was published).
 */
int pmc_cache_publish_n(struct pmc_cache *c, uint32_t vol, const uint64_t *lba,
			const uint64_t *blk, uint32_t n, enum pmc_block_state state,
			const uint32_t *snap, int *res);
/* ... writes of the keys lba, lba + 1, ..., lba + n - 1 */
int pmc_cache_publish_range(struct pmc_cache *c, uint32_t vol, uint64_t lba, const uint64_t *blk,
			    uint32_t n, enum pmc_block_state state, int *res);

/*
 * Read-miss fills: take a snapshot before reading the disk, then publish the
 * block CLEAN only if no copy appeared and no write or invalidation touched
 * the key's stripe meanwhile (-EEXIST, -ESTALE: nothing changed, the caller
 * keeps its pin and frees the block by unpinning it). A writer that
 * bypasses the cache drops the CLEAN copies (invalidate, which also moves
 * the snapshot on) before its disk write, and the engine admits no fill of
 * blocks such a write has in flight, so a fill that read old data can never
 * be published once the new data may be on the disk (lib/ORDERING.md).
 */
uint32_t pmc_cache_fill_seq(struct pmc_cache *c, uint32_t vol, uint64_t lba);
int pmc_cache_publish_fill(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
			   uint32_t snap);

/* After write-back of blk's data is durable on the disk: mark it clean if it
 * is still the current copy of (vol, lba). Returns 0, or -ESTALE when blk was
 * replaced or invalidated meanwhile (nothing changed). */
int pmc_cache_mark_clean(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk);
/* ... for n blocks with one persist barrier; res[i] as above per block */
int pmc_cache_mark_clean_n(struct pmc_cache *c, uint32_t vol, const uint64_t *lba,
			   const uint64_t *blk, uint32_t n, int *res);
int pmc_cache_mark_clean_range(struct pmc_cache *c, uint32_t vol, uint64_t lba, const uint64_t *blk,
			       uint32_t n, int *res);

/*
 * Dirty blocks by block number, from a DRAM bitmap (1 bit per block) that
 * every publish, clean and invalidation keeps. After an open it lacks the
 * dirty blocks of the previous boot until pmc_cache_dirty_rebuild() has
 * passed over every descriptor once (in steps of at most max descriptors,
 * while I/O runs; returns 1 once complete, 0 while not; complete at once
 * when the counts are valid and no block is dirty). Then
 * pmc_cache_dirty_next() finds each dirty block at the cost of one load per
 * 64 blocks: write-back then costs what the dirty blocks cost, not what
 * the cache size does. dirty_next: the first block >= *from marked dirty,
 * -ENOENT past the end. A marked block may turn out not to be dirty (an
 * orphan left by a crash, or a race): check it under its pin, and drop
 * the mark of a block that is not the live copy of its key with
 * pmc_cache_dirty_forget().
 */
int pmc_cache_dirty_rebuild(struct pmc_cache *c, uint64_t max);
int pmc_cache_dirty_next(struct pmc_cache *c, uint64_t from, uint64_t *blk);
void pmc_cache_dirty_forget(struct pmc_cache *c, uint64_t blk);

/* The pmem under the cache (for data copies by the engine). */
struct pmc_pmem *pmc_cache_pmem(struct pmc_cache *c);

#endif
