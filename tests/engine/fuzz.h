/* fuzz.h - what the fuzz targets of tests/config share with their plain-C
 * replay driver (fuzz_replay.c). */
#ifndef PMC_CONFIG_FUZZ_H
#define PMC_CONFIG_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define FZ_MAX_INPUT 8192u /* as run-fuzz.sh's -max_len; longer inputs are cut */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the target's dictionary: tokens the replay driver splices into inputs */
extern const char *const fz_tokens[];

#endif
