/* test_lock.c - one owner per cache: a pmem locked by another process is
 * refused with a message naming that process's pid; shared locks coexist
 * with each other but not with an exclusive one; a lock dies with its
 * process; the pid lock refuses a second taker, naming the first. */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lock.h"
#include "pmem.h"
#include "t.h"

static struct pmc_err err;

/* a child that holds path locked in mode until killed; returns its pid once
 * the lock is taken */
static pid_t holder(const char *path, enum pmc_lock_mode mode)
{
	int p[2];
	char c;
	pid_t pid, parent;

	T_TRUE(pipe(p) == 0);
	parent = getpid();
	pid = fork();
	T_TRUE(pid >= 0);
	if (pid == 0) {
		struct pmc_pmem *pm;
		struct pmc_err e = {0};

		/* a failed check exits the test: the holder must not outlive it
		 * (it would keep ctest waiting on its output) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(1);

		if (pmc_pmem_open(path, 0, &pm, &e) || pmc_pmem_lock(pm, mode, NULL, &e))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	T_TRUE(read(p[0], &c, 1) == 1);
	close(p[0]);
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int main(void)
{
	char dir[] = "/tmp/pmc-lockXXXXXX", pmem[64], pidf[64], want[64];
	struct pmc_pmem *pm, *pm2;
	pid_t pid, who;
	int fd, fd2;

	T_TRUE(mkdtemp(dir));
	snprintf(pmem, sizeof(pmem), "%s/pmem", dir);
	T_OK(pmc_pmem_open(pmem, 8 << 20, &pm, &err));

	/* an exclusive holder: both modes refused, the pid named */
	pid = holder(pmem, PMC_LOCK_EXCLUSIVE);
	snprintf(want, sizeof(want), "(pid %ld)", (long)pid);
	T_ERR(pmc_pmem_lock(pm, PMC_LOCK_EXCLUSIVE, &who, &err), EBUSY, want);
	T_EQ(who, pid);
	T_ERR(pmc_pmem_lock(pm, PMC_LOCK_SHARED, &who, &err), EBUSY, want);
	T_EQ(pmc_lock_holder(pm->fd), pid);
	/* the kernel drops the lock of a dead process: no stale lock */
	reap(pid);
	T_OK(pmc_pmem_lock(pm, PMC_LOCK_EXCLUSIVE, &who, &err));
	T_EQ(who, 0);
	/* held here now: another descriptor of this process is refused too */
	T_OK(pmc_pmem_open(pmem, 0, &pm2, &err));
	snprintf(want, sizeof(want), "(pid %ld)", (long)getpid());
	T_ERR(pmc_pmem_lock(pm2, PMC_LOCK_SHARED, NULL, &err), EBUSY, want);
	pmc_pmem_close(pm2);
	pmc_pmem_close(pm);

	/* readers share; a writer is refused while one reads */
	pid = holder(pmem, PMC_LOCK_SHARED);
	T_OK(pmc_pmem_open(pmem, 0, &pm, &err));
	T_OK(pmc_pmem_lock(pm, PMC_LOCK_SHARED, NULL, &err));
	pmc_pmem_close(pm);
	T_OK(pmc_pmem_open(pmem, 0, &pm, &err));
	snprintf(want, sizeof(want), "(pid %ld)", (long)pid);
	T_ERR(pmc_pmem_lock(pm, PMC_LOCK_EXCLUSIVE, NULL, &err), EBUSY, want);
	pmc_pmem_close(pm);
	reap(pid);

	/* the pid lock */
	pmc_pidfile_for_socket("/run/pmcache/pmcached.sock", pidf, sizeof(pidf));
	T_TRUE(!strcmp(pidf, "/run/pmcache/pmcached.pid"));
	pmc_pidfile_for_socket("/tmp/ctl", pidf, sizeof(pidf));
	T_TRUE(!strcmp(pidf, "/tmp/ctl.pid"));
	snprintf(pidf, sizeof(pidf), "%s/pmcached.pid", dir);
	T_OK(pmc_pidfile_take(pidf, &fd, &who, &err));
	snprintf(want, sizeof(want), "(pid %ld,", (long)getpid());
	T_ERR(pmc_pidfile_take(pidf, &fd2, &who, &err), EBUSY, want);
	T_EQ(who, getpid());
	T_EQ(fd2, -1);
	pmc_pidfile_release(pidf, fd);
	T_TRUE(access(pidf, F_OK) != 0);
	T_OK(pmc_pidfile_take(pidf, &fd, &who, &err));
	pmc_pidfile_release(pidf, fd);

	/* root writes the pid file in the socket's directory: a symbolic link
	 * or a FIFO planted there is refused, its target left as it was (it
	 * was truncated to the pid, or the open hung) */
	{
		char target[300];
		struct stat st;
		FILE *f;

		snprintf(target, sizeof(target), "%s/precious", dir);
		f = fopen(target, "w");
		T_TRUE(f && fputs("keep me\n", f) >= 0);
		fclose(f);
		T_TRUE(symlink(target, pidf) == 0);
		T_ERR(pmc_pidfile_take(pidf, &fd, &who, &err), ELOOP, "a symbolic link; refused");
		T_TRUE(stat(target, &st) == 0 && st.st_size == 8);
		T_TRUE(pmc_fopen_new(pidf, 0644) == NULL && errno == ELOOP);
		T_TRUE(stat(target, &st) == 0 && st.st_size == 8);
		T_TRUE(unlink(pidf) == 0 && mkfifo(pidf, 0600) == 0);
		T_ERR(pmc_pidfile_take(pidf, &fd, &who, &err), EINVAL, "not a regular file; refused");
		T_TRUE(unlink(pidf) == 0 && unlink(target) == 0);
		printf("ok: a symbolic link or FIFO at the pid file's path is refused\n");
	}

	/* a short write of the pid (here the file size limit: two bytes) is
	 * an error, not a success without the lock (it set no errno) */
	pid = fork();
	T_TRUE(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {2, 2};
		struct pmc_err e = {0};
		int f = -2;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(2);
		errno = 0; /* nothing left over to stand in for the missing one */
		_exit(pmc_pidfile_take(pidf, &f, NULL, &e) != 0 && e.code != 0 ? 0 : 1);
	}
	{
		int status;

		T_EQ(waitpid(pid, &status, 0), pid);
		T_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		printf("ok: a short write of the pid file is an error\n");
	}
	unlink(pidf);

	unlink(pmem);
	rmdir(dir);
	printf("test_lock: ok\n");
	return 0;
}
