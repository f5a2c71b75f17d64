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
#include <time.h>
#include <unistd.h>

#include "disk.h"

/* a sync of a disk without a volatile write cache completes at once, in
 * the ring's next poll: the fdatasync it stands for would go to an io_uring
 * worker thread (it cannot be issued without blocking) only for the block
 * layer to complete its flush unsent */
static void default_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	if (io->op == PMC_IO_FSYNC && pmc_disk_write_through(d)) {
		pmc_ring_complete_later(r, io, 0, 0);
		return;
	}
	pmc_ring_submit_raw(r, io);
}

const struct pmc_disk_ops pmc_disk_default_ops = {
	.submit = default_submit,
};

/* the path of the block device rdev's queue/NAME in sysfs */
static void queue_path(char *p, size_t len, dev_t rdev, const char *name)
{
	snprintf(p, len, "/sys/dev/block/%u:%u/queue/%s", major(rdev), minor(rdev), name);
}

/* a number in the block device rdev's queue/NAME, or 0 */
static unsigned long long queue_attr(dev_t rdev, const char *name)
{
	char p[128];
	unsigned long long v = 0;
	FILE *f;

	queue_path(p, sizeof(p), rdev, name);
	f = fopen(p, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* the largest read or write the block device rdev takes whole */
static void read_limits(struct pmc_disk *d, dev_t rdev)
{
	unsigned long long kb = queue_attr(rdev, "max_sectors_kb");
	unsigned long long segs = queue_attr(rdev, "max_segments");

	__atomic_store_n(&d->max_bytes, kb && kb < UINT32_MAX / 1024 ? (uint32_t)kb * 1024 : 0,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&d->max_segs, segs < UINT32_MAX ? (uint32_t)segs : 0, __ATOMIC_RELAXED);
}

/* point d's watch at the write_cache attribute of the block device rdev,
 * and take that device's limits; wc_lock held. None (syncs issued) if
 * sysfs has no such file */
static void watch_locked(struct pmc_disk *d, dev_t rdev)
{
	char p[128];
	int fd;

	read_limits(d, rdev);
	if (d->wc_fd > 2)
		close(d->wc_fd);
	d->wc_fd = 0;
	d->wc_rdev = rdev;
	queue_path(p, sizeof(p), rdev, "write_cache");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	/* above the standard streams: 0 in wc_fd means none */
	d->wc_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	if (d->wc_fd < 0)
		d->wc_fd = 0;
}

int pmc_disk_write_through(struct pmc_disk *d)
{
	struct stat st;
	char buf[32];
	ssize_t n = 0;

	if (!d->wc_lock_init || fstat(d->fd, &st) != 0 || !S_ISBLK(st.st_mode))
		return 0;
	pthread_mutex_lock(&d->wc_lock);
	/* the first sync (wc_rdev 0: no block device has 0:0), or another
	 * device on the fd now (a path switch): that device's attribute */
	if (st.st_rdev != d->wc_rdev)
		watch_locked(d, st.st_rdev);
	if (d->wc_fd > 2)
		n = pread(d->wc_fd, buf, sizeof(buf) - 1, 0);
	pthread_mutex_unlock(&d->wc_lock);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strncmp(buf, "write through", 13) == 0;
}

int pmc_disk_sync(struct pmc_disk *d)
{
	if (d->ops && d->ops->sync)
		return d->ops->sync(d);
	return fdatasync(d->fd) ? -errno : 0;
}

int pmc_disk_geometry(int fd, uint64_t *size, uint32_t *lbs, uint32_t *pbs)
{
	struct stat st;
	unsigned int p = 0;
	int l = 0;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		*lbs = 512;
		*pbs = 4096;
		return 0;
	}
	if (!S_ISBLK(st.st_mode))
		return -EINVAL;
	if (ioctl(fd, BLKGETSIZE64, size) != 0 || ioctl(fd, BLKSSZGET, &l) != 0)
		return -errno;
	if (ioctl(fd, BLKPBSZGET, &p) != 0)
		p = (unsigned int)l;
	*lbs = (uint32_t)l;
	*pbs = p;
	return 0;
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
	/* a disk this process closed a moment ago (a volume removed and added
	 * again) may still be claimed: an io_uring worker can let go of a
	 * sync's request after its completion was reaped, and the request,
	 * holding the file, is freed by the ring's next enter (the idle
	 * write-back thread's poll, every 10 ms: lib/ring.c enter()). Look
	 * again for a second before refusing. */
	for (int i = 0; fd < 0 && errno == EBUSY && i < 20; i++) {
		struct timespec ts = {0, 50000000};

		nanosleep(&ts, NULL);
		fd = open(path, flags);
	}
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
	pthread_mutex_init(&d->wc_lock, NULL);
	d->wc_lock_init = 1;
	snprintf(d->path, sizeof(d->path), "%s", path);
	rc = pmc_disk_geometry(fd, &d->size, &d->lbs, &d->pbs);
	if (rc) {
		rc = pmc_err_set(err, -rc, "disk %s: cannot read its size: %s", path, strerror(-rc));
		goto err_close;
	}
	d->is_blkdev = S_ISBLK(st.st_mode);
	/* a file: fallocate(PUNCH_HOLE); refused ones are ignored */
	d->can_discard = d->is_blkdev ? queue_attr(st.st_rdev, "discard_max_bytes") > 0 : 1;
	if (d->is_blkdev)
		read_limits(d, st.st_rdev);
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
	pthread_mutex_destroy(&d->wc_lock);
	close(fd);
	free(d);
	return rc;
}

void pmc_disk_close(struct pmc_disk *d)
{
	if (!d)
		return;
	if (d->wc_fd > 2)
		close(d->wc_fd);
	if (d->wc_lock_init)
		pthread_mutex_destroy(&d->wc_lock);
	close(d->fd);
	free(d);
}
