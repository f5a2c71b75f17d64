/* nvme_info.h - find NVMe namespaces and say what they are.
 *
 * Enumeration walks libnvme's sysfs tree (hosts, subsystems, controllers,
 * namespaces; with native multipath the block device belongs to the
 * subsystem). Each namespace is then identified with Identify Controller
 * and Identify Namespace admin commands through libnvme, so model, serial,
 * firmware and size are what the drive reports; sysfs values are the
 * fallback when the commands are refused (identified = 0).
 *
 * Device names (nvme0n1, ...) follow probe order, not slot or command-line
 * order: callers select a disk by serial.
 */
#ifndef PMC_NVME_INFO_H
#define PMC_NVME_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct pmc_nvme_ns {
	char name[32];	     /* block device name, "nvme0n1" */
	char path[48];	     /* "/dev/nvme0n1" */
	char ctrl[32];	     /* controller, "nvme0"; "" when unknown */
	char transport[16];  /* "pcie", "tcp", "rdma", "fc", "loop"; "" when unknown */
	char model[41];	     /* trimmed, NUL-terminated */
	char serial[21];
	char firmware[9];
	uint32_t nsid;
	uint32_t lba_bytes;  /* bytes per logical block in the current format */
	uint64_t nr_lbas;    /* namespace size in logical blocks */
	uint64_t size_bytes; /* nr_lbas * lba_bytes */
	int identified;	     /* 1: from Identify commands; 0: from sysfs */
};

/*
 * All NVMe namespaces that have a block device, sorted by name. On success
 * *out is a malloc'ed array of *nr entries (NULL when there are none) that
 * the caller frees with pmc_nvme_list_free(). -errno and err on failure.
 */
int pmc_nvme_list(struct pmc_nvme_ns **out, size_t *nr, struct pmc_err *err);

void pmc_nvme_list_free(struct pmc_nvme_ns *list);

/* Identify the namespace block device at path (Identify Controller and
 * Identify Namespace); fills model, serial, firmware, nsid, sizes, name and
 * path. -errno and err on failure (-ENOTTY: not an NVMe namespace). */
int pmc_nvme_identify(const char *path, struct pmc_nvme_ns *out, struct pmc_err *err);

/* The first entry with that serial (compared trimmed), or NULL. */
const struct pmc_nvme_ns *pmc_nvme_find_serial(const struct pmc_nvme_ns *list, size_t nr,
					       const char *serial);

#endif
