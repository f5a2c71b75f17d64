/* test_ring_idle.c - a ring that went idle still releases what its io_uring
 * workers finished: a sync runs in an io_uring worker, whose reference to
 * the request can outlive the completion the ring reaped; the request, and
 * the file it holds, are then freed by task work that only an
 * io_uring_enter of the ring's thread runs. pmc_ring_poll with nothing in
 * flight made no call, so a disk closed after its last sync could stay
 * open for good (a block device removed from a volume stayed claimed, and
 * adding it again failed with EBUSY).
 *
 * The file's release is seen through an flock: taken on the disk's open
 * file, it goes only when the last reference to that file does. Each round
 * opens the file as a disk, locks it, syncs it through the ring, closes it,
 * then polls the idle ring (no wait) until another open of the file can take
 * the lock, for 200 ms at most. The race is the kernel's and rare (one
 * sync in 3000 to 20000 on a 2-core machine, varying from run to run), so
 * the test runs ROUNDS of them: a ring that never enters when idle failed
 * 20 of 20 runs here; with the idle call no run can fail, so it has no
 * mutant (one that survived now and then would fail the mutant gate).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "disk.h"
#include "ring.h"
#include "t.h"

#define ROUNDS 20000

static int g_done;

static void sync_done(struct pmc_io *io, int res)
{
	T_EQ(res, 0);
	(void)io;
	g_done = 1;
}

/* can a new open of path take the lock? */
static int lock_free(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC), ok;

	if (fd < 0)
		T_FAIL("%s: %s", path, strerror(errno));
	ok = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return ok;
}

int main(void)
{
	struct pmc_err err = {0};
	struct pmc_ring *r;
	char path[] = "/tmp/pmc-ring-idle.XXXXXX";
	int fd = mkstemp(path), late = 0;

	T_TRUE(fd >= 0);
	T_EQ(ftruncate(fd, 1 << 20), 0);
	close(fd);
	T_OK(pmc_ring_create(8, NULL, &r, &err));
	for (int i = 0; i < ROUNDS; i++) {
		struct pmc_disk *d;
		struct pmc_io io = {0};
		int ms;

		T_OK(pmc_disk_open(path, 0, &d, &err));
		if (flock(d->fd, LOCK_EX | LOCK_NB))
			T_FAIL("round %d: %s still locked by the last round's file", i, path);
		io.op = PMC_IO_FSYNC;
		io.disk = d;
		io.cb = sync_done;
		g_done = 0;
		pmc_ring_submit(r, &io);
		/* polled without waiting: the completion is reaped as soon as
		 * the worker posts it, often before the worker let go */
		while (!g_done)
			pmc_ring_poll(r, 0, 0);
		pmc_disk_close(d);
		for (ms = 0; ms < 200; ms++) {
			pmc_ring_poll(r, 0, 0);
			if (lock_free(path))
				break;
			usleep(1000);
		}
		if (ms == 200)
			T_FAIL("round %d: the disk's file is still open 200 ms after its close and "
			       "its "
			       "last sync, the ring idle and polled",
			       i);
		late += ms > 0;
	}
	pmc_ring_destroy(r);
	unlink(path);
	printf("ok: %d syncs: every closed disk released; %d of them only by an idle poll\n",
	       ROUNDS, late);
	return 0;
}
