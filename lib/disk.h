/* disk.h - a backing disk: a block device or a file, opened O_DIRECT.
 *
 * All I/O to a disk goes through its ops table, so tests can plug in a disk
 * that injects errors, short transfers and latency. Hooks are called on the
 * thread that owns the ring the I/O runs on.
 */
#ifndef PMC_DISK_H
#define PMC_DISK_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "ring.h"

struct pmc_disk;
struct pmc_disk_id;

struct pmc_disk_ops {
	/* required: start io; the default is pmc_ring_submit_raw() */
	void (*submit)(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io);
	/* optional: see each raw completion first and return the result to use
	 * (bytes or -errno): a smaller count makes a short transfer */
	int (*complete)(struct pmc_disk *d, struct pmc_io *io, int res);
	/* optional: the disk's identity (diskid.h), 0 or -errno; the default
	 * reads it from the device. Tests that recover onto a copy of a disk
	 * image say that it stands for the original. Called at attach. */
	int (*identify)(struct pmc_disk *d, struct pmc_disk_id *id, struct pmc_err *err);
	/* optional: make every completed write durable now, synchronously and
	 * outside any ring (the engine's syncs at shutdown and when a volume
	 * stops being volatile); 0 or -errno; the default is fdatasync */
	int (*sync)(struct pmc_disk *d);
};

struct pmc_disk {
	int fd;
	uint64_t size;		/* bytes */
	uint32_t lbs;		/* logical block size: O_DIRECT alignment */
	uint32_t pbs;		/* physical block size */
	int is_blkdev;
	int can_discard;
	/* the most one read or write may carry for the kernel to issue it
	 * without a worker thread (a block device's queue/max_sectors_kb and
	 * max_segments; 0: no limit, as for a file); the ring issues a larger
	 * one in parts (ring.h). Read at open and again when the fd is found
	 * on another device (pmc_disk_write_through); atomic loads and stores */
	uint32_t max_bytes;
	uint32_t max_segs;
	/* the queue/write_cache attribute in sysfs of the block device the
	 * fd is on, opened at the first sync and read at each one
	 * (pmc_disk_write_through), opened again when the fd is on another
	 * device (a path switch dup2()s one onto it); wc_fd > 2 when open,
	 * else none; under wc_lock, which pmc_disk_open sets up
	 * (wc_lock_init: disks built by hand have none) */
	int wc_fd;
	dev_t wc_rdev;
	pthread_mutex_t wc_lock;
	int wc_lock_init;
	char path[256];
	const struct pmc_disk_ops *ops;
	void *priv;		/* owned by whoever set ops */
};

extern const struct pmc_disk_ops pmc_disk_default_ops;

/*
 * Open path read-write with O_DIRECT. A block device is opened O_EXCL: one
 * that is mounted or held by another driver is refused (-EBUSY). A file is
 * used as is. min_size > 0 refuses a disk smaller than that many bytes.
 */
int pmc_disk_open(const char *path, uint64_t min_size, struct pmc_disk **out,
		  struct pmc_err *err);
void pmc_disk_close(struct pmc_disk *d);
/* size, logical and physical block size of an open block device or file
 * (a file: its length, 512 and 4096); 0 or -errno */
int pmc_disk_geometry(int fd, uint64_t *size, uint32_t *lbs, uint32_t *pbs);
/* ops->sync, or fdatasync: 0 or -errno */
int pmc_disk_sync(struct pmc_disk *d);
/*
 * 1 when the kernel says now that the block device has no volatile write
 * cache ("write through" in its queue/write_cache): the block layer then
 * completes a flush at once without sending it, so a completed write is
 * already durable and a sync has nothing to do. 0 for a file, for "write
 * back", or when it cannot be read.
 */
int pmc_disk_write_through(struct pmc_disk *d);

#endif
