/* wb.h - the write-back thread: its own engine queue, stepping write-back
 * and running flush-everything requests handed over by the main thread. */
#ifndef PMCD_WB_H
#define PMCD_WB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine.h"

struct pmcd_wb {
	struct pmc_engine *e;
	struct pmc_queue *q;
	pthread_t thread;
	int started;
	atomic_int stop;
	/* a flush request: volume slot or UINT32_MAX for all; -1 none */
	atomic_llong flush_vol;
	atomic_int flush_busy;
	atomic_uint_fast64_t flush_left;  /* dirty blocks left, as last seen */
	int flush_res;			  /* valid once flush_busy drops to 0 */
	struct pmc_err flush_err;
	pthread_mutex_t lock;		  /* flush_res, flush_err */
};

int pmcd_wb_start(struct pmcd_wb *wb, struct pmc_engine *e, struct pmc_err *err);
void pmcd_wb_stop(struct pmcd_wb *wb);
/* hand a flush of vol (or UINT32_MAX) to the thread; -EBUSY if one runs */
int pmcd_wb_flush(struct pmcd_wb *wb, uint32_t vol);

#endif
