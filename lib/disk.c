/* disk.c - opening a backing disk and learning its geometry. Owns the file
 * descriptor. No locking: a disk is opened and closed by one thread; its fd
 * is then used from any ring. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "disk.h"

static void default_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	pmc_ring_submit_raw(r, io);
}

const struct pmc_disk_ops pmc_disk_default_ops = {
	.submit = default_submit,
};

int pmc_disk_sync(struct pmc_disk *d)
{
	if (d->ops && d->ops->sync)
		return d->ops->sync(d);
	return fdatasync(d->fd) ? -errno : 0;
}

static int blkdev_can_discard(dev_t rdev)
{
	char p[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/discard_max_bytes", major(rdev),
		 minor(rdev));
	f = fopen(p, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v > 0;
}

int pmc_disk_open(const char *path, uint64_t min_size, struct pmc_disk **out,
		  struct pmc_err *err)
{
	struct pmc_disk *d;
	struct stat st;
	int rc, fd, flags = O_RDWR | O_DIRECT | O_CLOEXEC;

	*out = NULL;
	if (stat(path, &st) != 0)
		return pmc_err_set(err, errno, "disk %s: %s", path, strerror(errno));
	if (S_ISBLK(st.st_mode))
		flags |= O_EXCL;
	else if (!S_ISREG(st.st_mode))
		return pmc_err_set(err, EINVAL, "disk %s: neither a block device nor a file", path);
	fd = open(path, flags);
	if (fd < 0) {
		if (errno == EBUSY)
			return pmc_err_set(err, EBUSY,
					   "disk %s: in use (mounted, or held by another driver)",
					   path);
		return pmc_err_set(err, errno, "disk %s: cannot open O_DIRECT: %s", path,
				   strerror(errno));
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(fd);
		return pmc_err_set(err, ENOMEM, "disk %s: out of memory", path);
	}
	d->fd = fd;
	d->ops = &pmc_disk_default_ops;
	snprintf(d->path, sizeof(d->path), "%s", path);
	if (S_ISBLK(st.st_mode)) {
		int lbs = 0;
		unsigned int pbs = 0;

		d->is_blkdev = 1;
		if (ioctl(fd, BLKGETSIZE64, &d->size) != 0 || ioctl(fd, BLKSSZGET, &lbs) != 0) {
			rc = pmc_err_set(err, errno, "disk %s: cannot read its size: %s", path,
					 strerror(errno));
			goto err_close;
		}
		if (ioctl(fd, BLKPBSZGET, &pbs) != 0)
			pbs = (unsigned int)lbs;
		d->lbs = (uint32_t)lbs;
		d->pbs = pbs;
		d->can_discard = blkdev_can_discard(st.st_rdev);
	} else {
		d->size = (uint64_t)st.st_size;
		d->lbs = 512;
		d->pbs = 4096;
		d->can_discard = 1; /* fallocate(PUNCH_HOLE); refused ones are ignored */
	}
	if (min_size && d->size < min_size) {
		rc = pmc_err_set(err, ENOSPC,
				 "disk %s: %" PRIu64 " bytes is smaller than the volume's %" PRIu64
				 " bytes",
				 path, d->size, min_size);
		goto err_close;
	}
	*out = d;
	return 0;

err_close:
	close(fd);
	free(d);
	return rc;
}

void pmc_disk_close(struct pmc_disk *d)
{
	if (!d)
		return;
	close(d->fd);
	free(d);
}
