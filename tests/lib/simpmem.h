/* simpmem.h - a simulated pmem for tests: a volatile view the code works on
 * and a durable image, with every store, flush and drain recorded through
 * the pmc_pmem ops table. At a crash, each 8-byte word stored but not yet
 * drained independently lands or not.
 */
#ifndef PMC_TEST_SIMPMEM_H
#define PMC_TEST_SIMPMEM_H

#include <stddef.h>
#include <stdint.h>

#include "pmem.h"

struct simpmem {
	size_t size;	 /* bytes, multiple of 8 */
	char *live;	 /* what loads see */
	char *dura;	 /* what survives a power cut for sure */
	uint8_t *word;	 /* per 8-byte word: 0 durable, 1 stored, 2 flushed */
	uint64_t *list;	 /* words in state 1 or 2 */
	size_t nlist, caplist;
	uint64_t drains; /* persist points so far */
	uint64_t stores; /* store operations so far */
	/* called at every drain, before it takes effect */
	void (*on_drain)(struct simpmem *s, void *arg);
	void *arg;
	struct pmc_pmem *pm; /* wrapper using the recording ops */
};

int simpmem_init(struct simpmem *s, size_t size);
void simpmem_fini(struct simpmem *s);
/* image := durable contents + a random subset of undrained words
 * (mode 0: none land, 1: all land, 2: each with probability 1/2) */
void simpmem_crash_image(const struct simpmem *s, char *image, int mode, uint64_t *rng);
/* ops that write straight through, for recovering a crash image */
extern const struct pmc_pmem_ops simpmem_direct_ops;
/* ops that count stores and fail the test on any (fuzzing "no write") */
extern const struct pmc_pmem_ops simpmem_counting_ops;

uint64_t sim_rand(uint64_t *state);

#endif
