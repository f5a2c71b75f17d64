/* placeholder.h - a disk that stands in for a known volume's disk while
 * that disk cannot be reached (an NVMe-oF target down when the daemon
 * starts), so that the volume can be attached and served from the cache:
 * hits are served, writes are absorbed while free blocks last, and every
 * I/O that reaches the disk (a read miss, write-back, a flush, a discard)
 * fails with the errno given at open, which the engine counts and keeps
 * as the volume's sticky error.
 *
 * Its size and identity are the ones the cache recorded in the volume's
 * slot, so the attach's identity check passes for it (the disk is not
 * there to be identified); the real disk is identified when it is swapped
 * in (pmc_placeholder_swap), and refused when it is another one. A swapped
 * placeholder passes every I/O to the real disk from then on, and may be
 * swapped again (the namespace moving to another block device).
 */
#ifndef PMC_PLACEHOLDER_H
#define PMC_PLACEHOLDER_H

#include <stdint.h>

#include "cache.h"
#include "disk.h"
#include "err.h"

/*
 * A placeholder for volume `name`, which c must know with a recorded
 * identity; fail_errno (positive) is what its I/O fails with until the
 * swap. label names the missing disk in messages (its path field).
 * Refused (-ENOENT, -ENODATA) naming the volume when the cache has no such
 * volume or no identity for it. Closed with pmc_disk_close().
 */
int pmc_placeholder_open(struct pmc_cache *c, const char *name, const char *label, int fail_errno,
			 struct pmc_disk **out, struct pmc_err *err);

/* whether d was made by pmc_placeholder_open() */
int pmc_placeholder_is(const struct pmc_disk *d);
/* whether its real disk is in (I/O goes to it) */
int pmc_placeholder_swapped(const struct pmc_disk *d);
/* the identity it stands for (the one recorded in the volume slot) */
const char *pmc_placeholder_id(const struct pmc_disk *d);

/*
 * Put the block device or file open on fd (read-write, O_DIRECT), called
 * dev in messages, behind placeholder d: it must be at least the volume's
 * size, have a logical block size dividing block_size, and have the
 * recorded identity; else refused with one line naming the volume, dev
 * and both identities (-EXDEV), and nothing changes. On success fd is
 * duplicated onto d's own descriptor (the caller still closes fd) and I/O
 * submitted from then on, from any thread, goes to it.
 */
int pmc_placeholder_swap(struct pmc_disk *d, int fd, const char *dev, uint32_t block_size,
			 struct pmc_err *err);
/* the same with fd's identity already read (pmc_disk_id_get; legacy:
 * pmc_disk_id_get_legacy, or NULL): the caller may hold a lock that must
 * not wait for an NVMe Identify */
int pmc_placeholder_swap_id(struct pmc_disk *d, int fd, const char *dev, uint32_t block_size,
			    const struct pmc_disk_id *id, const struct pmc_disk_id *legacy,
			    struct pmc_err *err);

#endif
