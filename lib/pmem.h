/* pmem.h - the persistent memory under the cache.
 *
 * A struct pmc_pmem is a mapping of a devdax namespace or of a plain file
 * (libpmem2 maps both) plus the narrow store/flush/drain API through which
 * every write to it goes. Reads are plain loads from pmc_pmem_base().
 *
 * A store is not durable until a flush of its range and a following drain
 * (pmc_pmem_persist() does both). Only aligned 8-byte stores are atomic with
 * respect to a power cut; larger copies may land torn, in 8-byte words.
 *
 * The ops table lets a test build replace the stores and barriers (the
 * crash simulator records them; the fuzz target counts them). All hooks are
 * required and are called by whichever thread writes; they must be
 * thread-safe for distinct ranges.
 */
#ifndef PMC_PMEM_H
#define PMC_PMEM_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct pmc_pmem;

struct pmc_pmem_ops {
	/* copy len bytes into the mapping; not durable until flush + drain */
	void (*copy)(struct pmc_pmem *pm, void *dst, const void *src, size_t len);
	/* fill len bytes of the mapping with byte c; not durable */
	void (*fill)(struct pmc_pmem *pm, void *dst, int c, size_t len);
	/* one aligned, atomic 8-byte store; not durable */
	void (*store8)(struct pmc_pmem *pm, uint64_t *dst, uint64_t val);
	/* start write-back of the cache lines (or pages) covering the range */
	void (*flush)(struct pmc_pmem *pm, const void *addr, size_t len);
	/* wait until every flush issued by this thread has reached the media */
	void (*drain)(struct pmc_pmem *pm);
};

enum pmc_pmem_gran {
	PMC_PMEM_GRAN_BYTE = 0,	 /* eADR: stores are durable once visible */
	PMC_PMEM_GRAN_CACHE_LINE, /* ADR: clwb/clflushopt + sfence */
	PMC_PMEM_GRAN_PAGE,	 /* a file: msync */
};

struct pmc_pmem {
	char *base;		    /* start of the mapping */
	uint64_t size;		    /* bytes mapped */
	const struct pmc_pmem_ops *ops;
	void *priv;		    /* owned by whoever set ops */
	enum pmc_pmem_gran gran;
	int copy_flushes;	    /* ops->copy leaves its range flushed (libpmem2's
				     * non-temporal or flushing memcpy) */
	int is_devdax;		    /* 1 for a character device (devdax) */
	int created;		    /* this open created the file (create_size) */
	char path[256];		    /* for messages */
	/* libpmem2 objects; NULL for a wrapped buffer */
	struct pmem2_map *map;
	struct pmem2_source *src;
	int fd;
	/* the namespace's unsafe shutdown count and device id, read at open
	 * (libpmem2); usc_valid 0 when the device does not report them (a
	 * file) */
	uint64_t usc;
	int usc_valid;
	char dev_id[64];
};

/*
 * May a missing or empty pmem file be made at path (pmc_pmem_open with a
 * create size)? Not under /dev but /dev/shm: a devdax namespace that did
 * not appear is not a file to make (one there lives in RAM, devtmpfs, and
 * loses every acknowledged write at the next power cut). 0, or -ENODEV
 * with one line naming path; how names the option that asked ("--size").
 */
int pmc_pmem_may_create(const char *path, const char *how, struct pmc_err *err);

/*
 * Map path. A character device is mapped whole (devdax). A regular file is
 * mapped whole; with create_size > 0 a missing or empty file is created and
 * sized to create_size bytes first, and an existing non-empty file of any
 * other size is refused. The mapping is shared and read-write.
 */
int pmc_pmem_open(const char *path, uint64_t create_size, struct pmc_pmem **out,
		  struct pmc_err *err);

/* Map path read-only (O_RDONLY, PROT_READ): for the offline readers (check,
 * dump), which then cannot change the cache whatever they do, and need no
 * write permission. Any store into the mapping faults. */
int pmc_pmem_open_ro(const char *path, struct pmc_pmem **out, struct pmc_err *err);

/* Wrap a caller-owned buffer with the given ops (tests). base stays the
 * caller's; pmc_pmem_close() frees only the wrapper. */
int pmc_pmem_wrap(void *base, uint64_t size, const struct pmc_pmem_ops *ops, void *priv,
		  struct pmc_pmem **out);

/* Unmap and free; NULL is fine. Does not persist anything. */
void pmc_pmem_close(struct pmc_pmem *pm);

/* pmc_pmem_close(), and remove the file if this open created it and it is
 * still the file at its path (a failed format --size leaves no file of
 * its own; never one another process created or put there meanwhile).
 * Only under the exclusive lock: a process that opened the new file
 * before the lock was taken may be using it. */
void pmc_pmem_discard(struct pmc_pmem *pm);

const char *pmc_pmem_gran_name(enum pmc_pmem_gran g);

static inline void pmc_pmem_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	pm->ops->copy(pm, dst, src, len);
}

/* copy and flush, not drained: a flush the copy did already is not repeated */
static inline void pmc_pmem_copy_flush(struct pmc_pmem *pm, void *dst, const void *src,
				       size_t len)
{
	pm->ops->copy(pm, dst, src, len);
	if (!pm->copy_flushes)
		pm->ops->flush(pm, dst, len);
}

static inline void pmc_pmem_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	pm->ops->fill(pm, dst, c, len);
}

static inline void pmc_pmem_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	pm->ops->store8(pm, dst, val);
}

static inline void pmc_pmem_flush(struct pmc_pmem *pm, const void *addr, size_t len)
{
	pm->ops->flush(pm, addr, len);
}

static inline void pmc_pmem_drain(struct pmc_pmem *pm)
{
	pm->ops->drain(pm);
}

/* flush + drain: the range is durable on return */
static inline void pmc_pmem_persist(struct pmc_pmem *pm, const void *addr, size_t len)
{
	pm->ops->flush(pm, addr, len);
	pm->ops->drain(pm);
}

#endif
