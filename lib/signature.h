/* signature.h - does a pmem target hold data that is not a blank cache?
 * What "pmcachectl format" refuses without --force, and what pmcached's
 * pmem.format = "if-blank" never formats: a pmcache superblock, or any
 * file system, swap, RAID or partition-table signature libblkid knows.
 */
#ifndef PMC_SIGNATURE_H
#define PMC_SIGNATURE_H
#include <stddef.h>

#include "pmem.h"

/* 1 and what ("a filesystem signature (ext4)"), 0 none, -errno when it
 * cannot be probed; path names pm (a file, a block or a devdax device) */
int pmc_pmem_signature(const char *path, const struct pmc_pmem *pm, char *what, size_t len);
#endif
