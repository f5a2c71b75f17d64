/* loopdev.c - see loopdev.h */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "loopdev.h"
#include "t.h"

int t_loop_make(struct t_loop *l, const char *tag, unsigned i, uint64_t bytes)
{
	int ctl, n, bfd;

	l->fd = -1;
	snprintf(l->file, sizeof(l->file), "/dev/shm/pmc-test-%s-%d-%u", tag, (int)getpid(), i);
	bfd = open(l->file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	T_TRUE(bfd >= 0);
	T_EQ(ftruncate(bfd, (off_t)bytes), 0);
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	/* another process may take the free device first: try again */
	for (int tries = 0; tries < 8; tries++) {
		n = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			break;
		snprintf(l->dev, sizeof(l->dev), "/dev/loop%d", n);
		l->fd = open(l->dev, O_RDWR | O_CLOEXEC);
		if (l->fd >= 0 && ioctl(l->fd, LOOP_SET_FD, bfd) == 0)
			break;
		if (l->fd >= 0)
			close(l->fd);
		l->fd = -1;
		if (errno != EBUSY)
			break;
	}
	if (ctl >= 0)
		close(ctl);
	close(bfd);
	if (l->fd < 0) {
		unlink(l->file);
		return -1;
	}
	return 0;
}

void t_loop_free(struct t_loop *l)
{
	if (l->fd < 0)
		return;
	ioctl(l->fd, LOOP_CLR_FD, 0);
	close(l->fd);
	l->fd = -1;
	unlink(l->file);
}
