/* lock.h - one owner per cache: an advisory lock on the pmem and a pid
 * lock next to the control socket, shared by pmcached and the offline
 * commands of pmcachectl.
 *
 * The pmem lock is flock(2) on the mapping's file descriptor: exclusive
 * for pmcached and format, shared for the read-only check and dump. It
 * lives as long as the descriptor (pmc_pmem_close() drops it), and the
 * kernel drops it when the process dies, so a crashed daemon never leaves
 * a stale lock. The holder's pid is read from /proc/locks.
 */
#ifndef PMC_LOCK_H
#define PMC_LOCK_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "err.h"
#include "pmem.h"

enum pmc_lock_mode {
	PMC_LOCK_SHARED = 0,	/* readers: check, dump */
	PMC_LOCK_EXCLUSIVE = 1, /* the daemon, format */
};

/*
 * Lock pm without waiting. -EBUSY when another process holds it; then
 * *holder is its pid (0 if unknown) and err says "pmem P: in use by NAME
 * (pid N)". A wrapped test buffer (no descriptor) always succeeds.
 */
int pmc_pmem_lock(struct pmc_pmem *pm, enum pmc_lock_mode mode, pid_t *holder,
		  struct pmc_err *err);

/* the pid holding a flock on fd's file, from /proc/locks; 0 if none found */
pid_t pmc_lock_holder(int fd);

/* the command name of pid ("pmcached"), "" if unknown */
void pmc_proc_name(pid_t pid, char *buf, size_t len);

/*
 * The pid lock of a daemon: path is locked (exclusive flock) and holds the
 * pid. -EBUSY with *holder set when another live process holds it. The
 * returned fd keeps the lock; pmc_pidfile_release() unlinks and closes.
 */
int pmc_pidfile_take(const char *path, int *fd, pid_t *holder, struct pmc_err *err);
void pmc_pidfile_release(const char *path, int fd);

/*
 * Open path to write (rw: and read), as root may in a directory others
 * could write: created with mode if missing, never through a symbolic link
 * at path (ELOOP), and only a regular file (else EINVAL); not truncated.
 * -1 with errno set. pmc_fopen_new: the same, truncated, as a stdio stream
 * ("w"), NULL with errno set.
 */
int pmc_open_new(const char *path, int rw, mode_t mode);
FILE *pmc_fopen_new(const char *path, mode_t mode);

/* Replace path with text whole or not at all: written to path.new
 * (pmc_fopen_new), synced, renamed over path. 0 or -errno; path.new does
 * not stay. */
int pmc_file_replace(const char *path, const char *text, mode_t mode);

/* the pid file that goes with a control socket: ".sock" becomes ".pid",
 * anything else gets ".pid" appended */
void pmc_pidfile_for_socket(const char *socket, char *buf, size_t len);

#endif
