/* lock.c - the pmem lock and the daemon's pid lock (see lock.h).
 *
 * Owns no state: every lock is a flock on a descriptor the caller keeps.
 * /proc/locks lists flock holders as "N: FLOCK ADVISORY WRITE PID
 * MAJ:MIN:INODE 0 EOF" (major and minor in hex); a lock is matched to a
 * file by device and inode.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lock.h"

pid_t pmc_lock_holder(int fd)
{
	struct stat st;
	char line[256];
	pid_t found = 0;
	FILE *f;

	if (fstat(fd, &st) != 0)
		return 0;
	f = fopen("/proc/locks", "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char type[16], adv[16], rw[16];
		unsigned maj, min;
		unsigned long long ino;
		long pid;
		char *p = strchr(line, ':');

		if (!p)
			continue;
		p++;
		if (strstr(p, "->"))
			continue; /* a waiter, not a holder */
		if (sscanf(p, " %15s %15s %15s %ld %x:%x:%llu", type, adv, rw, &pid, &maj, &min,
			   &ino) != 7)
			continue;
		if (strcmp(type, "FLOCK") || pid <= 0)
			continue;
		if (maj == major(st.st_dev) && min == minor(st.st_dev) &&
		    ino == (unsigned long long)st.st_ino)
			found = (pid_t)pid;
	}
	fclose(f);
	return found;
}

void pmc_proc_name(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	buf[0] = '\0';
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	else
		buf[0] = '\0';
	fclose(f);
}

int pmc_pmem_lock(struct pmc_pmem *pm, enum pmc_lock_mode mode, pid_t *holder,
		  struct pmc_err *err)
{
	char name[32];
	pid_t pid;

	if (holder)
		*holder = 0;
	if (pm->fd < 0)
		return 0;
	if (flock(pm->fd, (mode == PMC_LOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK)
		return pmc_err_set(err, errno, "pmem %s: cannot lock: %s", pm->path,
				   strerror(errno));
	pid = pmc_lock_holder(pm->fd);
	if (holder)
		*holder = pid;
	pmc_proc_name(pid, name, sizeof(name));
	if (pid > 0)
		return pmc_err_set(err, EBUSY, "pmem %s: in use by %s (pid %ld)", pm->path,
				   name[0] ? name : "another process", (long)pid);
	return pmc_err_set(err, EBUSY, "pmem %s: in use by another process", pm->path);
}

void pmc_pidfile_for_socket(const char *socket, char *buf, size_t len)
{
	size_t n = strlen(socket);

	if (n > 5 && !strcmp(socket + n - 5, ".sock"))
		snprintf(buf, len, "%.*s.pid", (int)(n - 5), socket);
	else
		snprintf(buf, len, "%s.pid", socket);
}

static pid_t read_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return (pid_t)atol(buf);
}

int pmc_open_new(const char *path, int rw, mode_t mode)
{
	struct stat st;
	/* O_NONBLOCK: a FIFO planted at path does not hang the open */
	int fd = open(path, (rw ? O_RDWR : O_WRONLY) | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
		      mode);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

FILE *pmc_fopen_new(const char *path, mode_t mode)
{
	int fd = pmc_open_new(path, 0, mode);
	FILE *f;

	if (fd < 0)
		return NULL;
	if (ftruncate(fd, 0) != 0 || !(f = fdopen(fd, "w"))) {
		int e = errno;

		close(fd);
		errno = e;
		return NULL;
	}
	return f;
}

int pmc_file_replace(const char *path, const char *text, mode_t mode)
{
	char tmp[PATH_MAX + 8];
	FILE *f;
	int bad, e;

	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = pmc_fopen_new(tmp, mode);
	if (!f)
		return -errno;
	errno = 0;
	bad = fputs(text, f) < 0 || ferror(f) || fflush(f) || fsync(fileno(f));
	e = errno;
	bad |= fclose(f) != 0;
	if (!bad && rename(tmp, path) == 0)
		return 0;
	e = e ? e : errno ? errno : EIO;
	unlink(tmp);
	return -e;
}

int pmc_pidfile_take(const char *path, int *out, pid_t *holder, struct pmc_err *err)
{
	char buf[32];
	struct stat a, b;
	int fd, n;

	*out = -1;
	if (holder)
		*holder = 0;
	/* a lock on a file another process unlinked meanwhile is no lock:
	 * retry until the locked file is the one at path */
	for (int tries = 0; tries < 10; tries++) {
		fd = pmc_open_new(path, 1, 0644);
		if (fd < 0)
			return pmc_err_set(err, errno, "pid file %s: %s", path,
					   errno == ELOOP    ? "a symbolic link; refused"
					   : errno == EINVAL ? "not a regular file; refused"
							     : strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			pid_t pid = read_pid(fd);

			close(fd);
			if (e != EWOULDBLOCK)
				return pmc_err_set(err, e, "pid file %s: cannot lock: %s", path,
						   strerror(e));
			if (holder)
				*holder = pid;
			return pmc_err_set(err, EBUSY,
					   "pmcached already runs (pid %ld, pid file %s)",
					   (long)pid, path);
		}
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		return pmc_err_set(err, EAGAIN, "pid file %s: keeps being replaced", path);
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	errno = 0;
	if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
		int e = errno ? errno : ENOSPC; /* a short write sets none */

		close(fd);
		return pmc_err_set(err, e, "pid file %s: cannot write: %s", path, strerror(e));
	}
	*out = fd;
	return 0;
}

void pmc_pidfile_release(const char *path, int fd)
{
	if (fd < 0)
		return;
	/* unlinked while still locked: a newcomer either fails on this lock
	 * or finds the path gone and creates a new file */
	unlink(path);
	close(fd);
}
