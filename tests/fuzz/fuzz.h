/* fuzz.h - what the fuzz target fuzz_open.c shares with its plain-C replay
 * driver (fuzz_open_replay.c): the libFuzzer entry point, the input format
 * and the base images that inputs corrupt.
 *
 * Input format of fuzz_open (see fuzz_open.c for what is done with it):
 *   byte 0   mode: FZ_BASE_MASK picks a base image, FZ_RAW, FZ_FIX_*, and
 *            bits 6-7 the size of the pmem the cache is opened on (FZ_SIZE_*)
 *   raw      (FZ_RAW) the remaining bytes overwrite the image from offset 0
 *            (at most up to meta_end)
 *   ops      (otherwise) a list of patches of the metadata region
 *            [0, meta_end): an op byte (low 2 bits FZ_OP_*), then its
 *            arguments; offsets are 3 bytes little-endian taken modulo
 *            meta_end, lengths are clipped to the region. A truncated op is
 *            dropped.
 * The checksum fix-ups run after the patches, so the fuzzer reaches what
 * lies behind a checksum (geometry, volume slots, descriptors).
 */
#ifndef PMC_FUZZ_H
#define PMC_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "cache_internal.h"

#define FZ_BASE_MASK 0x03u /* base image 0..3 */
#define FZ_RAW 0x04u	   /* rest of the input overwrites the image start */
#define FZ_FIX_SB 0x08u	   /* recompute the checksum of each copy with magic */
#define FZ_FIX_VOL 0x10u   /* recompute the checksum of each non-free slot */
#define FZ_FIX_DESC 0x20u  /* recompute every descriptor checksum */
#define FZ_SIZE_SHIFT 6	   /* bits 6-7: pmem size */
#define FZ_SIZE_FULL 0u	   /* the whole image */
#define FZ_SIZE_LESS 1u	   /* 4 KiB less than the image */
#define FZ_SIZE_HEAD 2u	   /* 256 KiB: less than the data offset */
#define FZ_SIZE_TINY 3u	   /* 4 KiB: less than two superblock slots */

#define FZ_OP_WRITE 0u /* off[3] len[1] bytes[len] */
#define FZ_OP_FILL 1u  /* off[3] len[2] byte[1] */
#define FZ_OP_COPY 2u  /* dst[3] src[3] len[2] (memmove) */
#define FZ_OP_ADD64 3u /* off[3] (aligned down to 8) delta[1] (signed) */

#define FZ_NR_BASES 4u

struct fz_base {
	const char *name;
	char *img;	   /* FZ_IMG_SIZE bytes, never changed after init */
	struct pmc_geom g; /* its geometry */
	uint64_t meta_end; /* end of the index: patches land below it */
};

#define FZ_IMG_BLOCKS 64u
#define FZ_IMG_SIZE ((size_t)PMC_DATA_ALIGN + FZ_IMG_BLOCKS * 4096u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* base image i (built on first use); NULL past the last */
const struct fz_base *fz_open_base(unsigned i);

/* 1: print the outcome of each input on stdout (seed corpus checks).
 * Also set by the environment variable PMC_FUZZ_VERBOSE=1. */
extern int fz_verbose;

#endif
