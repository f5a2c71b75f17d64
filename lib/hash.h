/* hash.h - the 64-bit FNV-1a hash of a text: a long identity kept short
 * (disk identities, diskid.c; the pmem's device id, pmem.c). Stored on
 * media, so it never changes. */
#ifndef PMC_HASH_H
#define PMC_HASH_H

#include <stdint.h>

static inline uint64_t pmc_fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

#endif
