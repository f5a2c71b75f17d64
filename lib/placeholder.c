/* placeholder.c - a stand-in for a known volume's unreachable disk (see
 * placeholder.h).
 *
 * The disk and its state are one allocation (struct pdisk, the pmc_disk
 * first), so pmc_disk_close() frees both. Until the swap its fd is
 * /dev/null, which no I/O reaches: the submit hook completes every I/O
 * with -fail_errno from the ring's next poll. The swap dup2()s the real
 * disk onto that fd and then sets `swapped` (release); the submit hook
 * reads it (acquire) on each I/O, so a queue thread that sees it set
 * submits on the real disk's file. I/O completed before the swap keeps
 * its error. Swaps are serialised by the caller (the daemon's path
 * monitor, under its lock); nothing else is written after open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diskid.h"
#include "placeholder.h"

struct pdisk {
	struct pmc_disk disk; /* first: pmc_disk_close() frees the whole */
	atomic_int swapped;   /* the real disk is on disk.fd */
	int fail_errno;	      /* positive; I/O fails with it until the swap */
	char name[PMC_VOLUME_NAME_MAX + 1];
	struct pmc_disk_id id; /* recorded in the volume slot */
};

static void ph_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io);
static int ph_identify(struct pmc_disk *d, struct pmc_disk_id *id, struct pmc_err *err);
static int ph_sync(struct pmc_disk *d);

static const struct pmc_disk_ops ph_ops = {
	.submit = ph_submit,
	.identify = ph_identify,
	.sync = ph_sync,
};

static struct pdisk *pd_of(const struct pmc_disk *d)
{
	return (struct pdisk *)d;
}

static void ph_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	struct pdisk *p = pd_of(d);

	if (atomic_load_explicit(&p->swapped, memory_order_acquire))
		pmc_ring_submit_raw(r, io);
	else
		pmc_ring_complete_later(r, io, -p->fail_errno, 0);
}

/* at attach: the recorded identity, so that the check passes for it */
static int ph_identify(struct pmc_disk *d, struct pmc_disk_id *id, struct pmc_err *err)
{
	struct pdisk *p = pd_of(d);

	if (atomic_load_explicit(&p->swapped, memory_order_acquire))
		return pmc_disk_id_get(d->fd, d->size, id, err);
	*id = p->id;
	return 0;
}

static int ph_sync(struct pmc_disk *d)
{
	struct pdisk *p = pd_of(d);

	if (!atomic_load_explicit(&p->swapped, memory_order_acquire))
		return -p->fail_errno;
	return fdatasync(d->fd) ? -errno : 0;
}

int pmc_placeholder_open(struct pmc_cache *c, const char *name, const char *label, int fail_errno,
			 struct pmc_disk **out, struct pmc_err *err)
{
	struct pmc_volume_info vi;
	struct pdisk *p;
	uint32_t vol;
	int fd;

	*out = NULL;
	if (!c || pmc_cache_volume_find(c, name, &vol) || pmc_cache_volume_info(c, vol, &vi))
		return pmc_err_set(err, ENOENT,
				   "volume %s: %s cannot be reached and the cache holds no "
				   "volume of that name: not served",
				   name, label);
	if (vi.id_state != 1 || !vi.disk_id.text[0] || !vi.size_bytes)
		return pmc_err_set(err, ENODATA,
				   "volume %s: %s cannot be reached and the cache recorded no "
				   "identity for its disk: not served",
				   name, label);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return pmc_err_set(err, errno, "volume %s: placeholder disk: /dev/null: %s", name,
				   strerror(errno));
	p = calloc(1, sizeof(*p));
	if (!p) {
		close(fd);
		return pmc_err_set(err, ENOMEM, "volume %s: placeholder disk: out of memory", name);
	}
	p->disk.fd = fd;
	p->disk.size = vi.size_bytes;
	p->disk.lbs = 512;
	p->disk.pbs = 4096;
	p->disk.is_blkdev = 1;
	p->disk.can_discard = 1; /* a discard the real disk refuses clears it */
	p->disk.ops = &ph_ops;
	p->disk.priv = p;
	snprintf(p->disk.path, sizeof(p->disk.path), "%s", label);
	atomic_init(&p->swapped, 0);
	p->fail_errno = fail_errno > 0 ? fail_errno : EIO;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->id = vi.disk_id;
	*out = &p->disk;
	return 0;
}

int pmc_placeholder_is(const struct pmc_disk *d)
{
	return d && d->ops == &ph_ops;
}

int pmc_placeholder_swapped(const struct pmc_disk *d)
{
	return pmc_placeholder_is(d) &&
	       atomic_load_explicit(&pd_of(d)->swapped, memory_order_acquire);
}

const char *pmc_placeholder_id(const struct pmc_disk *d)
{
	return pmc_placeholder_is(d) ? pd_of(d)->id.text : "";
}

int pmc_placeholder_swap(struct pmc_disk *d, int fd, const char *dev, uint32_t block_size,
			 struct pmc_err *err)
{
	struct pmc_disk_ids ids;
	uint64_t size = 0;
	uint32_t lbs = 0, pbs = 0;

	memset(&ids, 0, sizeof(ids));
	/* what cannot be read here, pmc_placeholder_swap_id refuses first */
	if (pmc_placeholder_is(d) && pmc_disk_geometry(fd, &size, &lbs, &pbs) == 0) {
		pmc_disk_ids_get(fd, size, &ids);
		if (ids.rc) {
			*err = ids.err;
			return ids.rc;
		}
	}
	return pmc_placeholder_swap_id(d, fd, dev, block_size, &ids.id,
				       ids.has_legacy ? &ids.legacy : NULL, err);
}

int pmc_placeholder_swap_id(struct pmc_disk *d, int fd, const char *dev, uint32_t block_size,
			    const struct pmc_disk_id *id, const struct pmc_disk_id *legacy,
			    struct pmc_err *err)
{
	struct pdisk *p = pd_of(d);
	uint64_t size = 0;
	uint32_t lbs = 0, pbs = 0;
	int rc;

	if (!pmc_placeholder_is(d))
		return pmc_err_set(err, EINVAL, "disk %s: not a placeholder", d ? d->path : "-");
	rc = pmc_disk_geometry(fd, &size, &lbs, &pbs);
	if (rc)
		return pmc_err_set(err, -rc, "volume %s: %s: cannot read its size: %s", p->name,
				   dev, strerror(-rc));
	if (size < d->size)
		return pmc_err_set(err, ENOSPC,
				   "volume %s: %s has %" PRIu64 " bytes, the volume has %" PRIu64
				   ": not used",
				   p->name, dev, size, d->size);
	if (!lbs || lbs > block_size || block_size % lbs)
		return pmc_err_set(err, EINVAL,
				   "volume %s: %s: logical block size %u does not divide the cache "
				   "block size %u: not used",
				   p->name, dev, lbs, block_size);
	if (!pmc_disk_id_match(id, legacy, p->id.text))
		return pmc_err_set(err, EXDEV,
				   "volume %s: %s is disk %s, the cache recorded %s: not used",
				   p->name, dev, id->text, p->id.text);
	if (dup2(fd, d->fd) < 0)
		return pmc_err_set(err, errno, "volume %s: dup2: %s", p->name, strerror(errno));
	atomic_store_explicit(&p->swapped, 1, memory_order_release);
	return 0;
}
