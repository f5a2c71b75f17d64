/* tcache.h - small caches in plain files for unit tests, and a copy of a
 * file (a crash image of a pmem mapped shared: its stores are in it). */
#ifndef PMC_TEST_TCACHE_H
#define PMC_TEST_TCACHE_H

#include <stdint.h>

#include "cache.h"
#include "pmem.h"

/* a new cache of blocks 4 KiB blocks in file path (created afresh),
 * formatted and opened, with volume "v" of 1 GiB */
void t_cache_new(const char *path, uint64_t blocks, struct pmc_pmem **pm, struct pmc_cache **c,
		 uint32_t *vol);
/* from copied to to, whole */
void t_file_copy(const char *from, const char *to);

#endif
