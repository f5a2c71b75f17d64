/* path.h - the path monitor of NVMe-oF volumes: a thread that watches each
 * volume's controller, clears the volume's sticky error when its path comes
 * back (write-back resumes at once, without waiting out its back-off),
 * reconnects a controller the kernel gave up on, and re-points the
 * volume's disk at the namespace's new block device when it reappears
 * under another name - once its identity matches the one recorded. */
#ifndef PMCD_PATH_H
#define PMCD_PATH_H

#include <pthread.h>
#include <stdatomic.h>

#include "err.h"

struct pmcd;

/* reconnect attempts of a lost path: the back-off doubles from this to 60 s */
#define PMCD_PATH_BACKOFF_MIN_MS 1000u

struct pmcd_path {
	pthread_t thread;
	int started;
	atomic_int stop;
	atomic_int kick; /* check now, and reconnect lost paths without waiting */
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

int pmcd_path_start(struct pmcd *d, struct pmc_err *err);
void pmcd_path_stop(struct pmcd *d);
/* wake the monitor; reconnect lost paths now (pmcachectl volume reconnect) */
void pmcd_path_kick(struct pmcd *d);

#endif
