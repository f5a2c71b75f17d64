/* test_disk_wc.c - syncs of a disk whose kernel write cache mode is "write
 * through" complete at once (lib/disk.h pmc_disk_write_through).
 *
 * Two loop devices over files stand for disks (root and /dev/loop-control
 * needed, else skipped with 77). Their queue/write_cache is switched
 * through sysfs as an operator would. Checks, with the ring's count of
 * submitted SQEs:
 *   - "write back": a sync is submitted (an fdatasync);
 *   - "write through": a sync completes with 0 and nothing is submitted;
 *   - the mode is read at each sync: switched back, syncs are issued again;
 *   - another device dup2()'ed onto the disk's fd (as a path switch does):
 *     the mode followed is the new device's, not the old one's;
 *   - a disk that is a file always syncs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "disk.h"
#include "loopdev.h"
#include "ring.h"
#include "t.h"

#define LOOP_BYTES (8u << 20)

struct loopdev {
	struct t_loop l;
	char wc[128]; /* its queue/write_cache */
};

static struct pmc_err err;
static struct loopdev g_loop[2];

/* a loop device over a new file; 0, or -1 when loop devices are not to be had */
static int loop_make(struct loopdev *d, unsigned i)
{
	struct stat st;

	if (t_loop_make(&d->l, "wc", i, LOOP_BYTES))
		return -1;
	T_EQ(fstat(d->l.fd, &st), 0);
	snprintf(d->wc, sizeof(d->wc), "/sys/dev/block/%u:%u/queue/write_cache",
		 major(st.st_rdev), minor(st.st_rdev));
	return 0;
}

static void loops_free(void)
{
	t_loop_free(&g_loop[0].l);
	t_loop_free(&g_loop[1].l);
}

static void set_wc(struct loopdev *l, const char *mode)
{
	int fd = open(l->wc, O_WRONLY | O_CLOEXEC);

	T_TRUE(fd >= 0);
	if (write(fd, mode, strlen(mode)) != (ssize_t)strlen(mode))
		T_FAIL("%s: cannot set '%s': %s", l->wc, mode, strerror(errno));
	close(fd);
}

static void sync_done(struct pmc_io *io, int res)
{
	int *out = io->priv;

	*out = res;
}

/* one sync of d through the ring: SQEs it submitted; its result in *res */
static uint64_t one_sync(struct pmc_ring *r, struct pmc_disk *d, int *res)
{
	struct pmc_ring_info a, b;
	struct pmc_io io;
	int got = 1;

	memset(&io, 0, sizeof(io));
	io.op = PMC_IO_FSYNC;
	io.disk = d;
	io.cb = sync_done;
	io.priv = &got;
	pmc_ring_get_info(r, &a);
	pmc_ring_submit(r, &io);
	for (int k = 0; k < 1000 && got == 1; k++)
		pmc_ring_poll(r, 1, 10000000ull);
	if (got == 1)
		T_FAIL("a sync of %s did not complete", d->path);
	pmc_ring_get_info(r, &b);
	*res = got;
	return b.submitted - a.submitted;
}

int main(void)
{
	struct pmc_ring *r;
	struct pmc_disk *d, *f;
	char path[64];
	int res;

	if (geteuid() != 0) {
		printf("skip: loop devices need root\n");
		return 77;
	}
	g_loop[0].l.fd = g_loop[1].l.fd = -1;
	if (loop_make(&g_loop[0], 0) || loop_make(&g_loop[1], 1)) {
		loops_free();
		printf("skip: no loop device to be had\n");
		return 77;
	}
	atexit(loops_free);
	T_OK(pmc_ring_create(8, NULL, &r, &err));
	T_OK(pmc_disk_open(g_loop[0].l.dev, 0, &d, &err));

	set_wc(&g_loop[0], "write back");
	T_EQ(pmc_disk_write_through(d), 0);
	T_EQ(one_sync(r, d, &res), 1);
	T_EQ(res, 0);
	printf("ok: %s in write-back mode: the sync was submitted\n", d->path);

	set_wc(&g_loop[0], "write through");
	T_EQ(pmc_disk_write_through(d), 1);
	T_EQ(one_sync(r, d, &res), 0);
	T_EQ(res, 0);
	printf("ok: %s in write-through mode: the sync completed with nothing submitted\n",
	       d->path);

	set_wc(&g_loop[0], "write back");
	T_EQ(one_sync(r, d, &res), 1);
	printf("ok: switched back to write-back: the sync was submitted again\n");

	/* a path switch puts another device on the fd: its mode counts */
	set_wc(&g_loop[0], "write through");
	set_wc(&g_loop[1], "write back");
	T_TRUE(dup2(g_loop[1].l.fd, d->fd) == d->fd);
	T_EQ(pmc_disk_write_through(d), 0);
	T_EQ(one_sync(r, d, &res), 1);
	set_wc(&g_loop[1], "write through");
	T_EQ(one_sync(r, d, &res), 0);
	printf("ok: with %s dup2()'ed onto the fd its mode is followed, not %s's\n",
	       g_loop[1].l.dev, g_loop[0].l.dev);
	pmc_disk_close(d);

	/* a file syncs whatever a write cache file would say */
	snprintf(path, sizeof(path), "/dev/shm/pmc-test-wc-%d-file", (int)getpid());
	{
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		T_TRUE(fd >= 0);
		T_EQ(ftruncate(fd, LOOP_BYTES), 0);
		close(fd);
	}
	T_OK(pmc_disk_open(path, 0, &f, &err));
	T_EQ(pmc_disk_write_through(f), 0);
	T_EQ(one_sync(r, f, &res), 1);
	T_EQ(res, 0);
	printf("ok: a disk that is a file: the sync was submitted\n");
	pmc_disk_close(f);
	unlink(path);
	pmc_ring_destroy(r);
	printf("PASS test_disk_wc\n");
	return 0;
}
