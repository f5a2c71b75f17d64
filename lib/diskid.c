/* diskid.c - backing disk identities and their check at attach (see
 * diskid.h).
 *
 * NVMe namespaces are identified with Identify Namespace / Identify
 * Controller through libnvme on the disk's own descriptor; other block
 * devices through sysfs (/sys/dev/block/MAJ:MIN); files by device and
 * inode. No state; the recording itself is pmc_cache_volume_set_id()
 * (cache.c), which owns the crash protocol.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <nvme/ioctl.h>
#include <nvme/types.h>

#include "diskid.h"
#include "hash.h"
#include "log.h"

void pmc_disk_id_set_text(struct pmc_disk_id *id, const char *text)
{
	char buf[512];
	size_t n = 0;
	int space = 0;

	/* whitespace runs to one "_", none at either end; controls dropped */
	for (const char *p = text; *p && n < sizeof(buf) - 1; p++) {
		unsigned char ch = (unsigned char)*p;

		if (isspace(ch)) {
			space = n > 0;
			continue;
		}
		if (ch < 0x20 || ch == 0x7f)
			continue;
		if (space && n < sizeof(buf) - 2)
			buf[n++] = '_';
		space = 0;
		buf[n++] = (char)ch;
	}
	buf[n] = '\0';
	memset(id->text, 0, sizeof(id->text));
	if (n <= PMC_DISK_ID_MAX) {
		memcpy(id->text, buf, n);
		return;
	}
	/* head, "~", 16 hex digits of the whole */
	snprintf(id->text, sizeof(id->text), "%.*s~%016" PRIx64, PMC_DISK_ID_MAX - 17, buf,
		 pmc_fnv1a(buf));
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void hex(char *dst, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(dst + 2 * i, "%02x", p[i]);
}

/* the UUID in the namespace's identification descriptor list (NVMe 1.3;
 * Linux nvmet gives every namespace one, and no NGUID or EUI-64 unless
 * configured): 0 and its text in out, else -1 */
static int nvme_uuid(int fd, __u32 nsid, char *out, size_t len)
{
	uint8_t *buf = calloc(1, NVME_IDENTIFY_DATA_SIZE);
	size_t off = 0;
	int rc = -1;

	if (!buf || nvme_identify_ns_descs(fd, nsid, (struct nvme_ns_id_desc *)buf) != 0)
		goto out;
	while (off + sizeof(struct nvme_ns_id_desc) <= NVME_IDENTIFY_DATA_SIZE) {
		const struct nvme_ns_id_desc *d = (const void *)(buf + off);
		const uint8_t *u = d->nid;

		if (!d->nidt || off + sizeof(*d) + d->nidl > NVME_IDENTIFY_DATA_SIZE)
			break;
		if (d->nidt == NVME_NIDT_UUID && d->nidl == NVME_NIDT_UUID_LEN &&
		    !all_zero(u, NVME_NIDT_UUID_LEN)) {
			char h[2 * NVME_NIDT_UUID_LEN + 1];

			hex(h, u, NVME_NIDT_UUID_LEN);
			snprintf(out, len, "nvme.uuid-%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12,
				 h + 16, h + 20);
			rc = 0;
			break;
		}
		off += sizeof(*d) + d->nidl;
	}
out:
	free(buf);
	return rc;
}

/* NVMe: the namespace's NGUID, EUI-64, UUID, else controller serial +
 * nsid; legacy: without the UUID, as recorded before it was read */
static int nvme_id(int fd, int legacy, char *out, size_t len)
{
	struct nvme_id_ctrl *ctrl = calloc(1, sizeof(*ctrl));
	struct nvme_id_ns *ns = calloc(1, sizeof(*ns));
	__u32 nsid;
	int rc = -ENOTTY;

	if (!ctrl || !ns)
		goto out;
	if (nvme_get_nsid(fd, &nsid) < 0 || nvme_identify_ns(fd, nsid, ns) != 0)
		goto out;
	if (!all_zero(ns->nguid, sizeof(ns->nguid))) {
		char h[2 * sizeof(ns->nguid) + 1];

		hex(h, ns->nguid, sizeof(ns->nguid));
		snprintf(out, len, "nvme.nguid-%s", h);
		rc = 0;
	} else if (!all_zero(ns->eui64, sizeof(ns->eui64))) {
		char h[2 * sizeof(ns->eui64) + 1];

		hex(h, ns->eui64, sizeof(ns->eui64));
		snprintf(out, len, "nvme.eui64-%s", h);
		rc = 0;
	} else if (!legacy && nvme_uuid(fd, nsid, out, len) == 0) {
		rc = 0;
	} else if (nvme_identify_ctrl(fd, ctrl) == 0) {
		char sn[sizeof(ctrl->sn) + 1];

		memcpy(sn, ctrl->sn, sizeof(ctrl->sn));
		sn[sizeof(ctrl->sn)] = '\0';
		for (size_t e = strlen(sn); e > 0 && sn[e - 1] == ' '; e--)
			sn[e - 1] = '\0';
		if (sn[0]) {
			snprintf(out, len, "nvme.sn-%s-ns%u", sn + strspn(sn, " "), nsid);
			rc = 0;
		}
	}
out:
	free(ctrl);
	free(ns);
	return rc;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -1;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return buf[strspn(buf, " \t")] ? 0 : -1;
}

/* a block device other than a whole NVMe namespace: sysfs of dev (the
 * whole disk of a partition). Device-mapper (LVM, multipath), md and loop
 * devices have no WWID or serial but an identity of their own: the dm
 * UUID (LVM's names the VG and the LV), the array's UUID, the backing
 * file. Only a device with none of these is named by its number, which
 * can change at a reboot; legacy: the number for every device that has
 * no WWID or serial, as before those three were read (the upgrade check
 * of pmc_disk_id_attach) */
static void sysfs_id(dev_t dev, int legacy, char *out, size_t len)
{
	char p[160], v[256];
	const char *files[][2] = {
		{"wwid", "wwid-"},	      {"device/wwid", "wwid-"},
		{"device/serial", "serial-"}, {"serial", "serial-"},
		{"dm/uuid", "dm-uuid-"},      {"md/uuid", "md-uuid-"},
		{"loop/backing_file", "loop-"},
	};

	for (size_t i = 0; i < (legacy ? 4 : sizeof(files) / sizeof(files[0])); i++) {
		snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/%s", major(dev), minor(dev),
			 files[i][0]);
		if (read_line(p, v, sizeof(v)) == 0) {
			snprintf(out, len, "%s%s", files[i][1], v);
			return;
		}
	}
	snprintf(out, len, "devnum-%u:%u", major(dev), minor(dev));
}

/* the whole disk of a partition: its parent directory in sysfs */
static int partition_of(dev_t dev, dev_t *whole, unsigned *partno)
{
	char p[160], v[64];
	unsigned ma, mi;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/partition", major(dev), minor(dev));
	if (read_line(p, v, sizeof(v)) != 0)
		return 0;
	*partno = (unsigned)atoi(v);
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/../dev", major(dev), minor(dev));
	if (read_line(p, v, sizeof(v)) != 0 || sscanf(v, "%u:%u", &ma, &mi) != 2)
		return 0;
	*whole = makedev(ma, mi);
	return 1;
}

static int id_get(int fd, uint64_t size_bytes, int legacy, struct pmc_disk_id *id,
		  struct pmc_err *err)
{
	struct stat st;
	char text[400];

	memset(id, 0, sizeof(*id));
	if (fstat(fd, &st) != 0)
		return pmc_err_set(err, errno, "disk identity: stat: %s", strerror(errno));
	if (S_ISREG(st.st_mode)) {
		snprintf(text, sizeof(text), "file-%" PRIx64 ":%" PRIu64, (uint64_t)st.st_dev,
			 (uint64_t)st.st_ino);
	} else if (S_ISBLK(st.st_mode)) {
		dev_t whole = st.st_rdev;
		unsigned partno = 0;
		int part = partition_of(st.st_rdev, &whole, &partno);

		/* the NVMe ioctls answer on a whole namespace only */
		if (part || nvme_id(fd, legacy, text, sizeof(text)) != 0) {
			char p[160], v[32];

			snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/nsid", major(whole),
				 minor(whole));
			sysfs_id(whole, legacy, text, sizeof(text));
			if (part && read_line(p, v, sizeof(v)) == 0) {
				/* an NVMe partition: the namespace's sysfs ids */
				char q[160], w[128];

				snprintf(q, sizeof(q), "/sys/dev/block/%u:%u/device/serial",
					 major(whole), minor(whole));
				if (!strncmp(text, "devnum-", 7) && read_line(q, w, sizeof(w)) == 0)
					snprintf(text, sizeof(text), "nvme.sn-%s-ns%s", w, v);
			}
		}
		if (part) {
			size_t n = strlen(text);

			snprintf(text + n, sizeof(text) - n, "-p%u", partno);
		}
	} else {
		return pmc_err_set(err, EINVAL, "disk identity: neither a block device nor a file");
	}
	pmc_disk_id_set_text(id, text);
	id->disk_bytes = size_bytes;
	return 0;
}

int pmc_disk_id_get(int fd, uint64_t size_bytes, struct pmc_disk_id *id, struct pmc_err *err)
{
	return id_get(fd, size_bytes, 0, id, err);
}

int pmc_disk_id_get_legacy(int fd, uint64_t size_bytes, struct pmc_disk_id *id,
			   struct pmc_err *err)
{
	return id_get(fd, size_bytes, 1, id, err);
}

int pmc_disk_id_match(const struct pmc_disk_id *id, const struct pmc_disk_id *legacy,
		      const char *recorded)
{
	if (!strcmp(id->text, recorded))
		return PMC_DISK_ID_SAME;
	/* only the two forms a later pmcached reads a better identity for */
	if (strncmp(recorded, "devnum-", 7) && strncmp(recorded, "nvme.sn-", 8))
		return 0;
	if (legacy && !strcmp(legacy->text, recorded) && strcmp(legacy->text, id->text) &&
	    strncmp(id->text, "devnum-", 7))
		return PMC_DISK_ID_LEGACY;
	return 0;
}

void pmc_disk_ids_get(int fd, uint64_t size_bytes, struct pmc_disk_ids *ids)
{
	static const char *const newer[] = {"nvme.uuid-", "dm-uuid-", "md-uuid-", "loop-"};
	struct pmc_err lerr = {0};

	memset(ids, 0, sizeof(*ids));
	ids->rc = pmc_disk_id_get(fd, size_bytes, &ids->id, &ids->err);
	if (ids->rc)
		return;
	/* only the forms read since an older pmcached have another legacy
	 * one: the others are their own, read once */
	ids->legacy = ids->id;
	ids->has_legacy = 1;
	for (size_t i = 0; i < sizeof(newer) / sizeof(newer[0]); i++)
		if (!strncmp(ids->id.text, newer[i], strlen(newer[i]))) {
			ids->has_legacy = pmc_disk_id_get_legacy(fd, size_bytes, &ids->legacy,
								 &lerr) == 0;
			break;
		}
}

void pmc_disk_ids_read(const struct pmc_disk *disk, struct pmc_disk_ids *ids)
{
	/* a disk whose ops answer (a placeholder) says what its slot records */
	if (disk->ops && disk->ops->identify) {
		memset(ids, 0, sizeof(*ids));
		ids->rc = disk->ops->identify((struct pmc_disk *)disk, &ids->id, &ids->err);
		return;
	}
	pmc_disk_ids_get(disk->fd, disk->size, ids);
}

/* the identity read, or its error into err */
static int ids_get(const struct pmc_disk_ids *ids, struct pmc_disk_id *id, struct pmc_err *err)
{
	if (ids->rc) {
		*err = ids->err;
		return ids->rc;
	}
	*id = ids->id;
	return 0;
}

int pmc_disk_id_volume_add(struct pmc_cache *c, const char *name, const struct pmc_disk *disk,
			   const struct pmc_disk_ids *ids, uint64_t size_bytes, uint32_t *vol,
			   struct pmc_err *err)
{
	struct pmc_disk_id id;
	int rc = ids_get(ids, &id, err);

	if (rc)
		return rc;
	if (!strncmp(id.text, "devnum-", 7))
		pmc_log(LOG_WARNING,
			"volume %s: disk %s has no stable identity (no WWID, serial, NVMe id, "
			"device-mapper or md UUID, or loop file); "
			"recorded its device number %s, which may change at a reboot",
			name, disk->path, id.text + 7);
	return pmc_cache_volume_add_id(c, name, disk->path, size_bytes, &id, vol, err);
}

int pmc_disk_id_attach(struct pmc_cache *c, uint32_t vol, const char *name,
		       const struct pmc_disk *disk, const struct pmc_disk_ids *ids, unsigned flags,
		       struct pmc_err *err)
{
	struct pmc_volume_info vi;
	struct pmc_disk_id id;
	int rc;

	if (pmc_cache_volume_info(c, vol, &vi))
		return pmc_err_set(err, ENOENT, "volume %s: not in the cache", name);
	rc = ids_get(ids, &id, err);
	if (rc)
		return rc;
	if (flags & PMC_ATTACH_REPLACE_DISK) {
		if (disk->size < vi.size_bytes)
			return pmc_err_set(err, ENOSPC,
					   "volume %s: disk %s has %" PRIu64 " bytes, the volume has %"
					   PRIu64 "; not replacing its disk",
					   name, disk->path, disk->size, vi.size_bytes);
		if (vi.id_state < 0 && !(flags & PMC_ATTACH_DISCARD_DIRTY)) {
			/* a record torn by a power cut (its in-place rewrite at an
			 * attach): nothing says another disk was there, and the
			 * dirty blocks are acknowledged writes of the volume. The
			 * operator names this disk as the volume's: it is recorded
			 * and the blocks stay, to be written back to it. */
			if (!vi.counts_valid) {
				pmc_cache_recount(c);
				pmc_cache_volume_info(c, vol, &vi);
			}
			if (vi.nr_dirty) {
				rc = pmc_cache_volume_set_id(c, vol, &id, 0, 0, err);
				if (rc == 0)
					pmc_log(LOG_NOTICE,
						"volume %s: its disk identity record was unreadable; "
						"recorded %s (%s) as asked (--replace-disk): its %" PRIu64
						" dirty blocks are kept and written back to it",
						name, id.text, disk->path, vi.nr_dirty);
				return rc;
			}
		}
		rc = pmc_cache_volume_set_id(c, vol, &id, 1, !!(flags & PMC_ATTACH_DISCARD_DIRTY),
					     err);
		if (rc == 0)
			pmc_log(LOG_NOTICE,
				"volume %s: disk replaced: was %s, now %s (%s); its cached blocks "
				"were dropped",
				name,
				vi.id_state == 1 ? vi.disk_id.text
						 : vi.id_state < 0 ? "unreadable" : "unrecorded",
				id.text, disk->path);
		return rc;
	}
	if (vi.id_state == 0) {
		/* a volume of a 1.0 cache: the first attach records the disk */
		rc = pmc_cache_volume_set_id(c, vol, &id, 0, 0, err);
		if (rc == 0)
			pmc_log(LOG_NOTICE, "volume %s: recorded the identity of disk %s: %s", name,
				disk->path, id.text);
		return rc;
	}
	if (vi.id_state < 0)
		return pmc_err_set(err, EUCLEAN,
				   "volume %s: the recorded disk identity is unreadable (bad "
				   "checksum); found %s on %s; if that is the volume's disk, "
				   "attach it with --replace-disk (its dirty blocks are kept)",
				   name, id.text, disk->path);
	if (pmc_disk_id_match(&id, NULL, vi.disk_id.text) == PMC_DISK_ID_SAME)
		return 0;
	/* recorded by an older pmcached: by its number before the dm, md and
	 * loop identities were read, by controller serial and nsid before the
	 * NVMe UUID was: the same disk, as it was then; the identity read now
	 * is recorded from now on */
	if (ids->has_legacy &&
	    pmc_disk_id_match(&id, &ids->legacy, vi.disk_id.text) == PMC_DISK_ID_LEGACY) {
		rc = pmc_cache_volume_set_id(c, vol, &id, 0, 0, err);
		if (rc == 0)
			pmc_log(LOG_NOTICE,
				"volume %s: disk %s was recorded as %s by an older pmcached; "
				"recorded its identity %s",
				name, disk->path, vi.disk_id.text, id.text);
		return rc;
	}
	return pmc_err_set(err, EXDEV,
			   "volume %s: wrong disk: the cache recorded %s, %s is %s; "
			   "refusing to attach%s",
			   name, vi.disk_id.text, disk->path, id.text,
			   !strncmp(vi.disk_id.text, "nvme.uuid-", 10) &&
					   !strncmp(id.text, "nvme.uuid-", 10)
				   ? " (a namespace re-created at its target gets a new UUID "
				     "unless given the old one)"
				   : "");
}
