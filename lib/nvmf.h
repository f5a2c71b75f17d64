/* nvmf.h - a volume's disk as an NVMe-oF namespace (config.h struct
 * pmc_config_nvmf): find its controller and block device in the kernel's
 * NVMe topology, connect it (directly or through a discovery controller),
 * and list the fabric controllers. All through libnvme; no state kept
 * between calls (one topology tree per call, freed before it returns).
 *
 * The namespace is matched by its subsystem NQN, the controller by
 * transport, traddr and trsvcid (any controller of the subsystem with that
 * transport when the address came from a discovery controller), and the
 * namespace by nsid, NGUID or UUID, whichever the config names (all that
 * it names must match). Whether it is the disk the volume's cached data
 * belongs to is not decided here: the caller compares its identity
 * (diskid.h) with the one recorded in the volume slot.
 *
 * Calls may block: a connect waits for the kernel's fabrics connect (TCP
 * connect and the admin queue's setup) and then up to wait_ms for the
 * namespace's block device. Call them off the I/O path.
 */
#ifndef PMC_NVMF_H
#define PMC_NVMF_H

#include <stddef.h>

#include "config.h"
#include "err.h"

/* where a namespace is now */
struct pmc_nvmf_path {
	char ctrl[32];	   /* controller, "nvme3"; "" none */
	char dev[64];	   /* its namespace's block device, "/dev/nvme3n1"; "" none */
	char state[24];	   /* the controller's: "live", "connecting", "resetting",
			      "deleting", ...; "" none */
	char address[288]; /* the controller's address, "traddr=...,trsvcid=..." */
	char made[32];	   /* the controller pmc_nvmf_connect() made itself, "" none
			      (set whether it then returned 0 or not) */
};

/* the default port of a transport: "4420", "8009" for discovery; "" for loop and fc */
const char *pmc_nvmf_default_trsvcid(const struct pmc_config_nvmf *n);

/*
 * Find the namespace without connecting anything: 0 and *p filled when a
 * controller of the subsystem at that address exists (p->dev is "" while
 * the namespace has no block device, e.g. before the first connect
 * finished); -ENOENT when none does.
 */
int pmc_nvmf_find(const struct pmc_config_nvmf *n, struct pmc_nvmf_path *p, struct pmc_err *err);

/*
 * pmc_nvmf_find(), else connect the controller (through the discovery
 * controller at traddr when n->discovery) and wait up to wait_ms for the
 * namespace's block device. err names the volume. 0: p->dev is set.
 */
int pmc_nvmf_connect(const struct pmc_config_nvmf *n, const char *volume, unsigned wait_ms,
		     struct pmc_nvmf_path *p, struct pmc_err *err);

/*
 * Disconnect controller ctrl ("nvme3"): what a refused volume-add does with
 * the controller its pmc_nvmf_connect() made (p->made), so that a refusal
 * leaves the host's fabric connections as they were.
 */
int pmc_nvmf_disconnect(const char *ctrl, struct pmc_err *err);
/* one fabric controller (pmcachectl disks) */
struct pmc_nvmf_ctrl {
	char name[32];	   /* "nvme3" */
	char transport[8]; /* "tcp", "rdma", "fc", "loop" */
	char address[288]; /* "traddr=10.0.0.2,trsvcid=4420" */
	char state[24];
	char subsysnqn[224];
	char namespaces[160]; /* block devices, space separated: "nvme3n1 nvme3n2" */
};

/* every controller whose transport is not pcie; *out malloc'ed (free()) */
int pmc_nvmf_list(struct pmc_nvmf_ctrl **out, size_t *nr, struct pmc_err *err);

#endif
