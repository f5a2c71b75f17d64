/* wb.c - see wb.h. The thread owns its queue; the main thread only sets
 * the atomics and reads the flush result under lock once flush_busy is 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "wb.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

static void progress(uint64_t left, void *arg)
{
	struct pmcd_wb *wb = arg;

	atomic_store(&wb->flush_left, left);
}

static void *wb_main(void *arg)
{
	struct pmcd_wb *wb = arg;

	prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);
	while (!atomic_load(&wb->stop)) {
		long long vol = atomic_exchange(&wb->flush_vol, -1);

		if (vol >= 0) {
			struct pmc_err err = {0};
			int rc = pmc_engine_flush_all(wb->e, wb->q, (uint32_t)vol, progress, wb,
						      &err);

			pthread_mutex_lock(&wb->lock);
			wb->flush_res = rc;
			wb->flush_err = err;
			pthread_mutex_unlock(&wb->lock);
			atomic_store(&wb->flush_busy, 0);
			continue;
		}
		if (pmc_engine_writeback_step(wb->e, wb->q) == 0 && pmc_queue_busy(wb->q) == 0 &&
		    !pmc_engine_wb_rebuilding(wb->e)) {
			/* nothing to do: pace the sweeps (not the dirty map's
			 * rebuild: until it completes, write-back sweeps the
			 * descriptor table). The poll lets the ring free what
			 * its io_uring workers finished last (the syncs), so a
			 * disk closed since is released (lib/ring.c enter()). */
			struct timespec ts = {0, 10000000};

			pmc_queue_poll(wb->q, 0, 0);
			nanosleep(&ts, NULL);
			continue;
		}
		pmc_queue_poll(wb->q, 1, 10000000ull);
	}
	while (pmc_queue_busy(wb->q))
		pmc_queue_poll(wb->q, 1, 10000000ull);
	return NULL;
}

int pmcd_wb_start(struct pmcd_wb *wb, struct pmc_engine *e, struct pmc_err *err)
{
	int rc;

	memset(wb, 0, sizeof(*wb));
	wb->e = e;
	atomic_store(&wb->flush_vol, -1);
	pthread_mutex_init(&wb->lock, NULL);
	rc = pmc_queue_create(e, 64, &wb->q, err);
	if (rc)
		return rc;
	rc = pthread_create(&wb->thread, NULL, wb_main, wb);
	if (rc) {
		pmc_queue_destroy(wb->q);
		return pmc_err_set(err, rc, "write-back thread: %s", strerror(rc));
	}
	wb->started = 1;
	pthread_setname_np(wb->thread, "pmc-writeback");
	return 0;
}

void pmcd_wb_stop(struct pmcd_wb *wb)
{
	if (!wb->started)
		return;
	atomic_store(&wb->stop, 1);
	pthread_join(wb->thread, NULL);
	pmc_queue_destroy(wb->q);
	pthread_mutex_destroy(&wb->lock);
	wb->started = 0;
}

int pmcd_wb_flush(struct pmcd_wb *wb, uint32_t vol)
{
	int idle = 0;

	if (!atomic_compare_exchange_strong(&wb->flush_busy, &idle, 1))
		return -EBUSY;
	atomic_store(&wb->flush_left, UINT64_MAX);
	atomic_store(&wb->flush_vol, (long long)vol);
	return 0;
}
