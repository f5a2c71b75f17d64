/* pmcached.h - the daemon's state, shared by its modules. */
#ifndef PMCD_H
#define PMCD_H

#include <ev.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "config.h"
#include "dev.h"
#include "engine.h"
#include "path.h"
#include "state.h"
#include "ublk.h"
#include "wb.h"

#define PMCD_MAX_VOLUMES 64

struct pmcd_volume {
	int used;
	uint32_t vol;		/* engine slot */
	struct pmcd_dev *dev;
	struct pmc_config_volume conf;
	char disk_id[PMC_DISK_ID_MAX + 1]; /* pmcd_volume_disk_id() */
	struct pmc_disk *disk;		   /* the engine's, while attached */
	/* an NVMe-oF disk's path (daemon/path.c), written under d->lock */
	char path_state[24];   /* the controller's state, "lost" (none), "wrong-disk"; "" local */
	char path_ctrl[32];    /* "nvme3" */
	char path_dev[64];     /* the block device the disk's fd is on */
	char path_addr[288];   /* the controller's address */
	uint32_t path_reconnects; /* connects by the daemon after the first */
	int path_down;	       /* not live since the last check that was */
	uint64_t path_retry_ns;	  /* next reconnect attempt (CLOCK_MONOTONIC) */
	uint32_t path_backoff_ms; /* doubling to 60 s */
	int removing;		  /* volume-remove under way: a reload leaves it be (d->lock) */
	uint64_t gen;		  /* which add put it in its slot (d->vol_gen then) */
};

struct pmcd {
	struct pmc_config conf;
	char conf_path[4096];
	struct ev_loop *loop;
	struct pmc_pmem *pm;
	struct pmc_cache *cache;	/* NULL: running without the pmem */
	struct pmc_state *state;
	struct pmc_engine *e;
	struct pmc_ublk_ctrl *ctrl;
	struct pmcd_wb wb;
	struct pmcd_path path;		/* path monitor of NVMe-oF volumes */
	uint64_t vol_gen;		/* volume adds so far (d->lock) */
	/* vols[]: changed by the control worker (ctlsrv.c) under lock, read by
	 * the loop under lock; the worker reads names without it */
	pthread_mutex_t lock;
	/* NVMe-oF controllers: a connect and the claim of what it found, or
	 * the check that nobody uses a controller and its disconnect, happen
	 * under this lock, taken before lock (never the other way) */
	pthread_mutex_t fabric_lock;
	char claim_ctrl[32]; /* the controller a volume add in progress uses */
	struct pmcd_volume vols[PMCD_MAX_VOLUMES];
	int stopping;
	int remove_devices;		/* shutdown --remove-devices */
	uint64_t start_ns;		/* CLOCK_MONOTONIC at start */
	uint32_t max_io_start;		/* writeback.max_io at start: sizes the engine */
	void *ctlsrv;			/* control socket (ctlsrv.c) */
	char pid_path[4096 + 8];	/* pid lock next to the control socket */
	int pid_fd;			/* holds the pid lock; -1 none */
};

/* volumes at run time (pmcached.c) */
/* flags: PMC_ATTACH_* (diskid.h) */
/* disconnect the NVMe-oF controller made (a name) for volume name unless a
 * served volume's path uses it; why goes in the log line */
/* disconnect the controller made unless a volume uses it or an add claims
 * it; with d->fabric_lock held */
void pmcd_nvmf_release(struct pmcd *d, const char *made, const char *name, const char *why);
int pmcd_volume_add(struct pmcd *d, const struct pmc_config_volume *vc, unsigned flags,
		    struct pmc_err *err);
int pmcd_volume_remove(struct pmcd *d, const char *name, int force, struct pmc_err *err);
/* the served volume called name, or NULL (inline: ctlsrv_stress links
 * ctlsrv.c without pmcached.c) */
static inline struct pmcd_volume *pmcd_volume_find(struct pmcd *d, const char *name)
{
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		if (d->vols[i].used && !strcmp(d->vols[i].conf.name, name))
			return &d->vols[i];
	return NULL;
}
void pmcd_status(struct pmcd *d, char *buf, size_t len);

/* the identity the cache recorded for the volume's disk; "" none (inline:
 * the control server's stress test links ctlsrv.c without pmcached.c) */
static inline const char *pmcd_volume_disk_id(struct pmcd *d, struct pmcd_volume *v)
{
	struct pmc_volume_info vi;

	if (!d->cache) {
		/* served without the cache: the identity it was attached with */
		pmc_engine_volume_disk_id(d->e, v->vol, v->disk_id, sizeof(v->disk_id));
		return v->disk_id;
	}
	if (pmc_cache_volume_info(d->cache, v->vol, &vi) || vi.id_state != 1)
		return "";
	snprintf(v->disk_id, sizeof(v->disk_id), "%s", vi.disk_id.text);
	return v->disk_id;
}
/* stop the loop; devices in use are left quiesced for the next daemon */
void pmcd_shutdown(struct pmcd *d);
/* the same, removing every device: -EBUSY naming the holder if one is in
 * use (nothing changes then) */
int pmcd_shutdown_remove(struct pmcd *d, struct pmc_err *err);

#endif
