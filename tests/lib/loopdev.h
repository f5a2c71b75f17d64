/* loopdev.h - a loop device over a new file in /dev/shm, for tests that
 * need a real block device (root and /dev/loop-control). */
#ifndef PMC_TEST_LOOPDEV_H
#define PMC_TEST_LOOPDEV_H

#include <stdint.h>

struct t_loop {
	char file[80]; /* the backing file */
	char dev[32];  /* /dev/loopN */
	int fd;	       /* the device, open read-write; -1 none */
};

/* l over a new file of bytes named after tag and i; 0, or -1 when loop
 * devices are not to be had (the caller skips) */
int t_loop_make(struct t_loop *l, const char *tag, unsigned i, uint64_t bytes);
/* detach, close and remove the file; nothing when l has no device */
void t_loop_free(struct t_loop *l);

#endif
