/* diskid.h - the identity of a backing disk, recorded in its volume slot
 * (format 1.1) and compared at every attach, so that a volume's cached
 * data never reaches, and is never served as, another disk.
 *
 * The identity is a short text, stable across reboots and device renames:
 *   nvme.nguid-<32 hex>        an NVMe namespace with an NGUID
 *   nvme.eui64-<16 hex>        ... else with an EUI-64
 *   nvme.uuid-<8-4-4-4-12 hex> ... else with a UUID (its identification
 *                              descriptor list; a volume recorded by
 *                              serial + nsid by an older pmcached takes
 *                              it at the next attach)
 *   nvme.sn-<serial>-ns<nsid>  ... else its controller's serial + namespace id
 *   wwid-<wwid>                another block device with a WWID (sysfs)
 *   serial-<serial>            ... else with a serial (sysfs)
 *   dm-uuid-<uuid>             ... else a device-mapper device's UUID (LVM)
 *   md-uuid-<uuid>             ... else an md array's UUID
 *   loop-<backing file>        ... else a loop device's backing file
 *   devnum-<maj>:<min>         ... else its device number (not stable: a
 *                              warning is logged when it is recorded; a
 *                              volume recorded so by an older pmcached
 *                              takes the device's identity above at the
 *                              next attach of the same number)
 *   file-<st_dev hex>:<st_ino> a regular file
 * A partition adds "-p<N>". Whitespace runs become "_"; a text longer than
 * PMC_DISK_ID_MAX keeps its head and ends in "~" and a 64-bit hash of the
 * whole, so equal disks still give equal texts.
 */
#ifndef PMC_DISKID_H
#define PMC_DISKID_H

#include <stdint.h>

#include "cache.h"
#include "disk.h"
#include "err.h"

/* identify an open disk (fd of a block device or a regular file) */
int pmc_disk_id_get(int fd, uint64_t size_bytes, struct pmc_disk_id *id, struct pmc_err *err);

/* the identity an older pmcached recorded for the disk: no NVMe UUID, no
 * device-mapper, md or loop identity */
int pmc_disk_id_get_legacy(int fd, uint64_t size_bytes, struct pmc_disk_id *id,
			   struct pmc_err *err);

#define PMC_DISK_ID_SAME 1   /* the recorded identity is the disk's */
#define PMC_DISK_ID_LEGACY 2 /* ... as an older pmcached recorded it */

/*
 * Does recorded name the disk whose identity is id and whose legacy
 * identity (pmc_disk_id_get_legacy) is legacy (NULL: not read)?
 * PMC_DISK_ID_SAME; PMC_DISK_ID_LEGACY when recorded is the legacy text of
 * a devnum- or nvme.sn- form and the disk now has a better identity (the
 * caller may record id); 0: another disk.
 */
int pmc_disk_id_match(const struct pmc_disk_id *id, const struct pmc_disk_id *legacy,
		      const char *recorded);

/* what pmc_disk_id_get() makes of sysfs values: normalise and bound */
void pmc_disk_id_set_text(struct pmc_disk_id *id, const char *text);

/*
 * What an attach compares and records, read before any lock is taken (an
 * NVMe Identify waits up to the kernel's admin timeout, 60 s, on a stalled
 * fabric path): the disk's identity (its ops may answer for it: rc and err
 * when it cannot be read), and its legacy one (has_legacy: read, and the
 * disk is not one whose ops answer).
 */
struct pmc_disk_ids {
	int rc;
	struct pmc_err err;
	struct pmc_disk_id id;
	int has_legacy;
	struct pmc_disk_id legacy;
};
void pmc_disk_ids_read(const struct pmc_disk *disk, struct pmc_disk_ids *ids);
/* the same for the block device or file open on fd, whose ops are not
 * known (a path being probed): the legacy identity is read again only
 * for the forms that have another one */
void pmc_disk_ids_get(int fd, uint64_t size_bytes, struct pmc_disk_ids *ids);

/* attach flags */
#define PMC_ATTACH_REPLACE_DISK 1u  /* the volume's disk was replaced: record the new one */
#define PMC_ATTACH_DISCARD_DIRTY 2u /* ... and drop its dirty blocks (they are lost) */

/*
 * At attach of volume vol (known to the cache) on disk: compare the disk's
 * identity with the recorded one. Records it when none is (a volume of a
 * 1.0 cache). A mismatch is refused (-EXDEV) with one line naming the
 * volume, the recorded and the found identity, unless flags has
 * PMC_ATTACH_REPLACE_DISK: then the volume's cached blocks are dropped
 * (refused with -EBUSY while it has dirty ones, unless
 * PMC_ATTACH_DISCARD_DIRTY) and the new identity is recorded.
 */
int pmc_disk_id_attach(struct pmc_cache *c, uint32_t vol, const char *name,
		       const struct pmc_disk *disk, const struct pmc_disk_ids *ids, unsigned flags,
		       struct pmc_err *err);

/* a new volume on disk: pmc_cache_volume_add with the disk's identity */
int pmc_disk_id_volume_add(struct pmc_cache *c, const char *name, const struct pmc_disk *disk,
			   const struct pmc_disk_ids *ids, uint64_t size_bytes, uint32_t *vol,
			   struct pmc_err *err);

#endif
