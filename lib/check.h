/* check.h - whole-metadata consistency check of an open cache. */
#ifndef PMC_CHECK_H
#define PMC_CHECK_H

#include <stdint.h>

#include "cache.h"

struct pmc_check_report {
	uint64_t linked;  /* descriptors reachable from the index */
	uint64_t live_dirty;
	uint64_t live_clean;
	uint64_t stale;	  /* linked, of a removed volume */
	uint64_t orphans; /* unlinked, not FREE: reclaimed lazily */
	uint64_t free;	  /* unlinked and FREE */
	uint64_t lost;	  /* linked LOST: dirty data lost to a media error */
	uint64_t bad;	  /* unlinked BAD: retired, bad media */
	uint64_t max_chain;
	uint32_t counts_bad; /* volumes whose kept counters disagree with the index */
};

/*
 * Check every invariant of lib/FORMAT.md: chains stay in the table and do
 * not loop or share blocks, every linked descriptor has a good checksum, a
 * valid state and hashes to its bucket, no key is cached twice, and (when
 * they are known) the counters match. Reads only; allocates one bit per
 * block for the duration (an offline tool, not the I/O path). Run it while
 * nothing else uses the cache. Returns 0 or -EUCLEAN with the first problem;
 * counters are compared last, so a sound index whose counters disagree
 * returns -EUCLEAN with counts_bad > 0 (pmc_cache_counts_forget() and a
 * close repair them).
 */
int pmc_cache_check(struct pmc_cache *c, struct pmc_check_report *rep, struct pmc_err *err);

#endif
