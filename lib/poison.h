/* poison.h - pmem media errors survived.
 *
 * A load from a poisoned pmem line (an uncorrectable media error on a
 * devdax mapping, or a page of a file-backed mapping beyond the file's
 * end) raises SIGBUS. Copies out of pmem on the request paths go through
 * pmc_poison_copy(), which arms a per-thread recovery point: the SIGBUS
 * handler jumps back to it when the faulting address lies in the armed
 * range, and the copy fails with -EIO instead of killing the daemon. A
 * SIGBUS anywhere else gets the previous disposition (the process dies as
 * before). io_uring reads pmem itself for a disk write; a poisoned source
 * makes the write fail (-EIO or -EFAULT): pmc_poison_probe() then tells
 * which blocks are poisoned.
 *
 * A poisoned cache block is quarantined (pmc_cache_quarantine): a clean
 * one is dropped from the index and retired (state BAD: never allocated
 * again); a dirty one becomes LOST: it stays the volume's copy of that
 * block, so reads of it fail with -EIO instead of returning the older data
 * on the disk, and write-back skips it; a later whole-block write or a
 * discard replaces it (the block itself is then retired).
 */
#ifndef PMC_POISON_H
#define PMC_POISON_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"

/* Install the process-wide SIGBUS handler (once; later calls do nothing).
 * 0 or -errno. pmc_engine_create() calls it. */
int pmc_poison_init(void);

/* memcpy out of pmem; -EIO when a line of src is poisoned (dst is then
 * partly written) */
int pmc_poison_copy(void *dst, const void *src, size_t len);

/* read every byte of src; -EIO when a line of it is poisoned */
int pmc_poison_probe(const void *src, size_t len);

/*
 * Quarantine blk, found poisoned while it cached (vol, lba): CLEAN ->
 * unlinked and BAD; DIRTY -> LOST. *was (optional) is the state before.
 * -ESTALE when blk is no longer the block of (vol, lba): no data is lost,
 * and a block already unlinked (FREE) that the caller holds pinned is
 * retired (BAD), never handed out again.
 */
int pmc_cache_quarantine(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
			 enum pmc_block_state *was);

/*
 * At a read-write open, after the refusal below (before any load of the
 * tables): the namespace's bad blocks (libpmem2). A bad range in the
 * metadata refuses the open (-EIO); a block of the data area in a bad
 * range is quarantined (clean dropped, dirty LOST, free retired), each
 * dirty one logged as lost. A device that cannot list bad blocks (a file)
 * has none.
 */
int pmc_cache_badblocks(struct pmc_cache *c, struct pmc_err *err);
/* 1 when a listed bad range overlaps [off, off + len), the lowest such in
 * *at and *at_len (either may be NULL); one read of the list.
 * pmc_cache_open() asks it once, before it reads a superblock copy or any
 * table (a poisoned line raises SIGBUS). */
int pmc_pmem_first_bad(struct pmc_pmem *pm, uint64_t off, uint64_t len, uint64_t *at,
		       uint64_t *at_len);
/* -EIO naming the range when one lies below data_off (the metadata), for
 * a pmem no cache could be opened on (pmcachectl dump) */
int pmc_pmem_meta_badblocks(struct pmc_pmem *pm, uint64_t data_off, struct pmc_err *err);

#endif
