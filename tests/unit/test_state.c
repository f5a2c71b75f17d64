/* test_state.c - the volume state file and the pmem-failure behaviour:
 * a write that makes a volume dirty marks it dirty in the state file before
 * it completes, and flush_all leaves it dirty while a write that may still
 * make dirty blocks is in progress; flush_all marks it clean again; with the pmem unavailable
 * (an engine without a cache) a clean volume runs pass-through and a dirty
 * or unknown one is refused by name; a file naming a volume twice is
 * refused; a save whose directory fsync fails leaves the record unknown,
 * so that the next change saves again; a state file under a long
 * state_dir is saved where it is named, one past PATH_MAX refused; a new
 * volume whose attach the state file refuses leaves no record in the
 * cache; a full file (4096 records) forgets its clean record changed
 * longest ago for a new volume, never a dirty one; a volume served without
 * the cache is recorded bypassed before its first request, and when the
 * cache is back its clean copies are dropped (they are older than the
 * disk) and its dirty ones refuse it; a file rebuilt for another cache
 * records that cache's volumes bypassed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine.h"
#include "diskid.h"
#include "state.h"
#include "t.h"

#define BS 4096

static struct pmc_err err;
static int ndone, last, fail_dir_fsync;

/* the state file's fsync of its directory fails when asked (the library
 * is linked statically: its fsync() is this one) */
int fsync(int fd)
{
	struct stat sb;

	if (fail_dir_fsync && fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_fsync, fd);
}

/* line 2 of the state file (its first record), "" if none */
static void record(const char *path, char *line, size_t len)
{
	FILE *f = fopen(path, "r");

	line[0] = '\0';
	if (f && fgets(line, (int)len, f) && !fgets(line, (int)len, f))
		line[0] = '\0';
	if (f)
		fclose(f);
}

static void cb(struct pmc_req *r, int res)
{
	ndone++;
	last = res;
}

static int run(struct pmc_queue *q, enum pmc_req_op op, uint32_t vol, uint64_t off, uint64_t len,
	       void *buf)
{
	struct pmc_req r = {.op = op, .vol = vol, .off = off, .len = len, .buf = buf, .cb = cb};
	int before = ndone;

	T_OK(pmc_queue_submit(q, &r, &err));
	while (ndone == before)
		pmc_queue_poll(q, 1, 0);
	return last;
}

static void make_disk(const char *path, uint64_t size)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);

	T_TRUE(fd >= 0);
	T_EQ(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char pmem[256], disk0[256], disk1[256], state[272], line[256];
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_engine *e;
	struct pmc_queue *q;
	struct pmc_disk *d;
	struct pmc_state *st;
	uint32_t v0, v1;
	char *buf = aligned_alloc(BS, 16 * BS), *rb = aligned_alloc(BS, 16 * BS);
	FILE *f;

	snprintf(pmem, sizeof(pmem), "%s/pmc-state-%d.pmem", tmp, getpid());
	snprintf(disk0, sizeof(disk0), "%s/pmc-state-%d.d0", tmp, getpid());
	snprintf(disk1, sizeof(disk1), "%s/pmc-state-%d.d1", tmp, getpid());
	snprintf(state, sizeof(state), "%s/pmc-state-%d.state", tmp, getpid());
	unlink(pmem);
	unlink(state);
	make_disk(disk0, 1 << 20);
	make_disk(disk1, 1 << 20);

	/* a malformed state file is refused with its line */
	f = fopen(state, "w");
	fprintf(f, "pmcache-state 1 00000000000000000000000000000000\nvol0 maybe\n");
	fclose(f);
	T_ERR(pmc_state_open(state, &st, &err), EINVAL, "line 2: malformed record");
	/* ... and so is one that names a volume twice (which record would
	 * count?) */
	f = fopen(state, "w");
	fprintf(f, "pmcache-state 1 00000000000000000000000000000000\nvol0 dirty\nvol0 clean\n");
	fclose(f);
	T_ERR(pmc_state_open(state, &st, &err), EINVAL, "line 3: volume vol0 recorded twice");
	/* a newer version than this pmcached writes: refused, said so */
	f = fopen(state, "w");
	fprintf(f, "pmcache-state 3 00000000000000000000000000000000\nvol0 clean\n");
	fclose(f);
	T_ERR(pmc_state_open(state, &st, &err), EINVAL, "version 1 to 2 (one of a newer pmcached?)");
	/* version 1 (an older pmcached's) and 2 are read */
	for (int ver = 1; ver <= 2; ver++) {
		f = fopen(state, "w");
		fprintf(f, "pmcache-state %d 00000000000000000000000000000000\nvol0 bypassed "
			   "file-1:2\nvol1 clean\n",
			ver);
		fclose(f);
		T_OK(pmc_state_open(state, &st, &err));
		T_EQ(pmc_state_get(st, "vol0"), PMC_STATE_BYPASSED);
		T_EQ(pmc_state_get(st, "vol1"), PMC_STATE_CLEAN);
		pmc_state_close(st);
	}
	unlink(state);
	/* one process per state file: a second open is refused while the
	 * first holds it (each would save the other's records as it last
	 * read them), and goes through once it is closed */
	{
		struct pmc_state *st2;

		T_OK(pmc_state_open(state, &st, &err));
		T_ERR(pmc_state_open(state, &st2, &err), EBUSY, "in use by another process");
		pmc_state_close(st);
		T_OK(pmc_state_open(state, &st2, &err));
		pmc_state_close(st2);
		printf("ok: a state file in use is refused to a second opener\n");
	}
	/* a long state_dir (any the configuration takes, up to PATH_MAX): the
	 * file is saved where it is named (the path was cut at 511 bytes),
	 * and a longer one is refused */
	{
		char deep[1024], *name = malloc(PATH_MAX + 16);
		size_t n = (size_t)snprintf(deep, sizeof(deep), "%s/pmc-state-%d", tmp, getpid());

		T_TRUE(name && mkdir(deep, 0700) == 0);
		for (int k = 0; k < 3; k++) {
			n += (size_t)snprintf(deep + n, sizeof(deep) - n, "/%0200d", k);
			T_TRUE(mkdir(deep, 0700) == 0);
		}
		snprintf(name, PATH_MAX + 16, "%s/volumes.state", deep);
		T_OK(pmc_state_open(name, &st, &err));
		T_OK(pmc_state_set(st, "vol9", 1, &err));
		pmc_state_close(st);
		f = fopen(name, "r");
		T_TRUE(f && fgets(line, sizeof(line), f) && fgets(line, sizeof(line), f));
		fclose(f);
		T_TRUE(!strcmp(line, "vol9 dirty\n"));
		unlink(name);
		strcat(name, ".lock");
		unlink(name);
		for (int k = 3; k >= 0; k--) {
			T_TRUE(rmdir(deep) == 0);
			*strrchr(deep, '/') = '\0';
		}
		memset(name, 'x', PATH_MAX + 8);
		name[0] = '/';
		name[PATH_MAX + 8] = '\0';
		T_ERR(pmc_state_open(name, &st, &err), ENAMETOOLONG, "path too long");
		free(name);
		printf("ok: a state file %zu bytes deep is saved where named; a longer path is refused\n",
		       n + 14);
	}
	/* a full file (4096 records): a new volume replaces the clean record
	 * changed longest ago, never a dirty one (new volumes were refused a
	 * record for good); a failed save puts the forgotten one back; with
	 * no clean record the new one is refused */
	{
		char tmpname[300];
		unsigned n;

		f = fopen(state, "w");
		fprintf(f, "pmcache-state 1 00000000000000000000000000000000\nd0 dirty\nc1 clean\n");
		for (int k = 2; k < 4096; k++)
			fprintf(f, "v%04d clean\n", k);
		fclose(f);
		T_OK(pmc_state_open(state, &st, &err));
		T_OK(pmc_state_set(st, "c1", 1, &err)); /* changed: now the newest */
		T_OK(pmc_state_set(st, "c1", 0, &err));
		T_OK(pmc_state_set(st, "new1", 1, &err));
		T_EQ(pmc_state_get(st, "v0002"), -ENOENT);
		T_EQ(pmc_state_get(st, "d0"), 1);
		T_EQ(pmc_state_get(st, "c1"), 0);
		T_EQ(pmc_state_get(st, "v0003"), 0);
		T_EQ(pmc_state_get(st, "new1"), 1);
		/* the save fails before its rename: nothing changes */
		snprintf(tmpname, sizeof(tmpname), "%s.new", state);
		T_TRUE(mkdir(tmpname, 0700) == 0);
		T_TRUE(pmc_state_set(st, "new2", 1, &err) != 0);
		T_EQ(pmc_state_get(st, "new2"), -ENOENT);
		T_EQ(pmc_state_get(st, "v0003"), 0);
		T_TRUE(pmc_state_set(st, "v0004", 1, &err) != 0);
		T_EQ(pmc_state_get(st, "v0004"), 0);
		T_TRUE(rmdir(tmpname) == 0);
		pmc_state_close(st);
		/* the order of last change survives a reopen */
		T_OK(pmc_state_open(state, &st, &err));
		T_OK(pmc_state_set(st, "new2", 1, &err));
		T_EQ(pmc_state_get(st, "v0003"), -ENOENT);
		T_EQ(pmc_state_get(st, "v0004"), 0);
		T_EQ(pmc_state_get(st, "c1"), 0);
		f = fopen(state, "r");
		n = 0;
		while (f && fgets(line, sizeof(line), f))
			n++;
		fclose(f);
		T_EQ(n, 4097);
		T_TRUE(!strcmp(line, "new2 dirty\n"));
		pmc_state_close(st);
		f = fopen(state, "w");
		fprintf(f, "pmcache-state 1 00000000000000000000000000000000\n");
		for (int k = 0; k < 4096; k++)
			fprintf(f, "v%04d dirty\n", k);
		fclose(f);
		T_OK(pmc_state_open(state, &st, &err));
		T_ERR(pmc_state_set(st, "new3", 1, &err), ENOSPC, "4096 volumes recorded, none clean");
		pmc_state_close(st);
		unlink(state);
		printf("ok: a full state file forgets its oldest clean record for a new volume, "
		       "none dirty\n");
	}

	T_OK(pmc_pmem_open(pmem, (2u << 20) + 64 * BS, &pm, &err));
	T_OK(pmc_cache_format(pm, NULL, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_OK(pmc_state_open(state, &st, &err));
	T_OK(pmc_engine_create(c, NULL, &e, &err));
	pmc_engine_set_state(e, st);
	T_OK(pmc_disk_open(disk0, 0, &d, &err));
	T_OK(pmc_engine_attach(e, "vol0", d, NULL, &v0, &err));
	T_OK(pmc_disk_open(disk1, 0, &d, &err));
	T_OK(pmc_engine_attach(e, "vol1", d, NULL, &v1, &err));
	T_OK(pmc_queue_create(e, 8, &q, &err));
	T_EQ(pmc_state_get(st, "vol0"), -ENOENT); /* nothing dirty yet: not recorded */

	/* the first dirtying write records vol0 dirty, durably, in the file */
	memset(buf, 0xab, 16 * BS);
	T_EQ(run(q, PMC_REQ_WRITE, v0, 0, 16 * BS, buf), 0);
	T_EQ(pmc_state_get(st, "vol0"), 1);
	f = fopen(state, "r");
	T_TRUE(f && fgets(line, sizeof(line), f) && fgets(line, sizeof(line), f));
	fclose(f);
	/* ... naming its disk (a file: its device and inode) */
	T_TRUE(!strncmp(line, "vol0 dirty file-", 16));
	/* vol1 only read (its disk is all zeroes): stays unrecorded */
	memset(rb, 0x77, 16 * BS);
	T_EQ(run(q, PMC_REQ_READ, v1, 0, 4 * BS, rb), 0);
	for (size_t i = 0; i < 4 * BS; i++)
		if (rb[i])
			T_FAIL("vol1 byte %zu reads %#x, the disk holds zeroes", i, (unsigned char)rb[i]);
	T_EQ(pmc_state_get(st, "vol1"), -ENOENT);
	/* vol0's write reads back */
	memset(rb, 0, 16 * BS);
	T_EQ(run(q, PMC_REQ_READ, v0, 0, 16 * BS, rb), 0);
	T_TRUE(!memcmp(rb, buf, 16 * BS));
	/* flush_all: vol0 clean again */
	T_OK(pmc_engine_flush_all(e, q, UINT32_MAX, NULL, NULL, &err));
	T_EQ(pmc_state_get(st, "vol0"), 0);
	{
		/* ... because its data is on the disk */
		int fd = open(disk0, O_RDONLY);

		T_TRUE(fd >= 0);
		memset(rb, 0, 16 * BS);
		T_EQ(pread(fd, rb, 16 * BS, 0), 16 * BS);
		close(fd);
		T_TRUE(!memcmp(rb, buf, 16 * BS));
	}
	{
		/* a write submitted but not yet published (the queue publishes
		 * the writes of a loop iteration when it polls) may still make
		 * dirty blocks: flush_all from another queue leaves vol0 dirty */
		struct pmc_req r = {.op = PMC_REQ_WRITE, .vol = v0, .off = 32 * BS, .len = 4 * BS,
				    .buf = buf, .cb = cb};
		struct pmc_queue *q2;
		int before = ndone;

		T_OK(pmc_queue_create(e, 8, &q2, &err));
		T_OK(pmc_queue_submit(q, &r, &err));
		T_EQ(pmc_state_get(st, "vol0"), 1);
		T_OK(pmc_engine_flush_all(e, q2, UINT32_MAX, NULL, NULL, &err));
		T_EQ(pmc_state_get(st, "vol0"), 1);
		while (ndone == before)
			pmc_queue_poll(q, 1, 0);
		T_EQ(last, 0);
		T_EQ(pmc_state_get(st, "vol0"), 1);
		pmc_queue_destroy(q2);
	}
	/* flush_all's clean mark fails after the new file replaced the old
	 * (its directory's fsync): the file says clean, so the next dirtying
	 * write must record vol0 dirty again (the engine kept it as marked
	 * and wrote dirty data under a "clean" file) */
	fail_dir_fsync = 1;
	T_OK(pmc_engine_flush_all(e, q, UINT32_MAX, NULL, NULL, &err));
	fail_dir_fsync = 0;
	record(state, line, sizeof(line));
	T_TRUE(!strncmp(line, "vol0 clean file-", 16));
	/* saved as version 2: a pmcached that reads version 1 without
	 * knowing "bypassed" or the identity column refuses it */
	{
		FILE *h = fopen(state, "r");
		char first[128] = "";

		T_TRUE(h && fgets(first, sizeof(first), h));
		fclose(h);
		if (strncmp(first, "pmcache-state 2 ", 16))
			T_FAIL("the state file's first line is %s, not version 2", first);
	}
	T_EQ(run(q, PMC_REQ_WRITE, v0, 40 * BS, 4 * BS, buf), 0);
	record(state, line, sizeof(line));
	if (strncmp(line, "vol0 dirty file-", 16))
		T_FAIL("a write after a failed clean mark left the state file saying %s", line);
	/* dirty again, and left dirty by a "crash" of the daemon */
	T_EQ(run(q, PMC_REQ_WRITE, v0, 16 * BS, 4 * BS, buf), 0);
	T_EQ(pmc_state_get(st, "vol0"), 1);
	T_OK(pmc_state_set(st, "vol1", 0, &err));
	pmc_queue_destroy(q);
	pmc_engine_set_state(e, NULL); /* a crash records nothing more */
	pmc_engine_destroy(e);
	pmc_state_close(st);
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);

	/* the pmem is gone: vol1 (clean) runs pass-through, vol0 (dirty) and
	 * an unknown volume are refused, naming the volume */
	T_OK(pmc_state_open(state, &st, &err));
	T_EQ(pmc_state_get(st, "vol0"), 1);
	T_OK(pmc_engine_create(NULL, NULL, &e, &err));
	pmc_engine_set_state(e, st);
	T_OK(pmc_disk_open(disk0, 0, &d, &err));
	T_ERR(pmc_engine_attach(e, "vol0", d, NULL, &v0, &err), EIO,
	      "volume vol0: the unreachable pmem may hold its acknowledged writes (state file says "
	      "dirty)");
	T_ERR(pmc_engine_attach(e, "other", d, NULL, &v0, &err), EIO, "does not name it");
	/* vol1 clean, its record naming disk1: another disk is refused as
	 * vol1 (device names swapped at the same boot), naming both */
	{
		struct pmc_disk_id id1;
		struct pmc_disk *d1;

		T_OK(pmc_disk_open(disk1, 0, &d1, &err));
		T_OK(pmc_disk_id_get(d1->fd, d1->size, &id1, &err));
		pmc_disk_close(d1);
		T_OK(pmc_state_record(st, "vol1", PMC_STATE_CLEAN, id1.text, &err));
		T_ERR(pmc_engine_attach(e, "vol1", d, NULL, &v1, &err), EXDEV,
		      "but the state file records");
		T_EQ(pmc_state_get(st, "vol1"), PMC_STATE_CLEAN);
	}
	pmc_disk_close(d);
	T_OK(pmc_disk_open(disk1, 0, &d, &err));
	/* its bypassed mark renamed in, but the directory's fsync failed:
	 * the attach fails, and the next one is not refused as if the file
	 * did not name vol1 (it was, until the daemon restarted); a save of
	 * any other record writes vol1 bypassed, not dirty (a dirty record
	 * let the cache's older clean copies be served when it is back) */
	fail_dir_fsync = 1;
	T_TRUE(pmc_engine_attach(e, "vol1", d, NULL, &v1, &err) != 0);
	fail_dir_fsync = 0;
	pmc_err_clear(&err);
	pmc_disk_close(d); /* a refused attach leaves it the caller's */
	T_EQ(pmc_state_get(st, "vol1"), PMC_STATE_BYPASSED);
	T_OK(pmc_state_set(st, "vol-x", PMC_STATE_CLEAN, &err));
	{
		FILE *sf = fopen(state, "r");
		char l[256];
		int seen = 0;

		T_TRUE(sf != NULL);
		while (fgets(l, sizeof(l), sf))
			seen |= !strncmp(l, "vol1 bypassed", 13);
		fclose(sf);
		T_TRUE(seen);
	}
	T_OK(pmc_disk_open(disk1, 0, &d, &err));
	T_OK(pmc_engine_attach(e, "vol1", d, NULL, &v1, &err));
	/* recorded before its first request: its disk changes behind the
	 * cache's clean copies from now on */
	T_EQ(pmc_state_get(st, "vol1"), PMC_STATE_BYPASSED);
	/* the identity a path that comes back is checked against (path.c):
	 * the state file's; for a record without one, the disk's found at
	 * attach (it was "", and every rebind was refused) */
	{
		char have[PMC_DISK_ID_MAX + 1];
		struct pmc_disk_id id0;
		struct pmc_disk *d0;
		uint32_t vx;

		pmc_engine_volume_disk_id(e, v1, have, sizeof(have));
		T_TRUE(!strncmp(have, "file-", 5));
		T_OK(pmc_disk_open(disk0, 0, &d0, &err));
		T_OK(pmc_disk_id_get(d0->fd, d0->size, &id0, &err));
		T_OK(pmc_engine_attach(e, "vol-x", d0, NULL, &vx, &err));
		pmc_engine_volume_disk_id(e, vx, have, sizeof(have));
		if (strcmp(have, id0.text))
			T_FAIL("vol-x served without the cache knows its disk as '%s', not %s", have,
			       id0.text);
		T_OK(pmc_engine_detach(e, vx, 1, &err)); /* closes d0 */
	}
	T_OK(pmc_queue_create(e, 8, &q, &err));
	{
		enum pmc_mode m;

		T_OK(pmc_engine_get_mode(e, v1, &m, NULL));
		T_EQ(m, PMC_MODE_PASS_THROUGH);
		T_ERR(pmc_engine_set_mode(e, v1, PMC_MODE_WRITE_BACK, &err), EIO,
		      "pass-through only");
	}
	memset(buf, 0x5c, 16 * BS);
	T_EQ(run(q, PMC_REQ_WRITE, v1, 8 * BS, 8 * BS, buf), 0);
	memset(rb, 0, 16 * BS);
	T_EQ(run(q, PMC_REQ_READ, v1, 8 * BS, 8 * BS, rb), 0);
	T_TRUE(!memcmp(buf, rb, 8 * BS));
	T_EQ(run(q, PMC_REQ_FLUSH, v1, 0, 0, NULL), 0);
	{
		struct pmc_vol_stats s;

		T_OK(pmc_engine_stats(e, v1, &s));
		T_EQ(s.writes, 1);
		T_EQ(s.write_disk_blocks, 8);
		T_EQ(s.bypass_blocks, 8);
	}
	pmc_queue_destroy(q);
	pmc_engine_destroy(e);
	pmc_state_close(st);

	/* the pmem back: the clean copies it holds of vol1 (its blocks 0-3,
	 * zeroes, filled by the read above) are older than vol1's disk, which
	 * the pass-through run wrote: dropped at attach (they were served);
	 * and a volume recorded bypassed whose dirty blocks are here is
	 * refused, those being older than its disk too, unless dropped */
	{
		int fd = open(disk1, O_WRONLY);

		memset(buf, 0x3e, 4 * BS);
		T_TRUE(fd >= 0 && pwrite(fd, buf, 4 * BS, 0) == 4 * BS && fsync(fd) == 0);
		close(fd);
		T_OK(pmc_pmem_open(pmem, (2u << 20) + 64 * BS, &pm, &err));
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		T_OK(pmc_state_open(state, &st, &err));
		T_OK(pmc_engine_create(c, NULL, &e, &err));
		pmc_engine_set_state(e, st);
		T_OK(pmc_disk_open(disk1, 0, &d, &err));
		T_OK(pmc_engine_attach(e, "vol1", d, NULL, &v1, &err));
		T_EQ(pmc_state_get(st, "vol1"), PMC_STATE_CLEAN);
		T_OK(pmc_queue_create(e, 8, &q, &err));
		memset(rb, 0, 4 * BS);
		T_EQ(run(q, PMC_REQ_READ, v1, 0, 4 * BS, rb), 0);
		if (memcmp(rb, buf, 4 * BS))
			T_FAIL("vol1 reads %#x, its disk holds %#x: a stale copy served",
			       (unsigned char)rb[0], (unsigned char)buf[0]);
		T_OK(pmc_state_set(st, "vol0", PMC_STATE_BYPASSED, &err));
		T_OK(pmc_disk_open(disk0, 0, &d, &err));
		T_ERR(pmc_engine_attach(e, "vol0", d, NULL, &v0, &err), EEXIST,
		      "dirty blocks here are older than its disk");
		T_EQ(pmc_state_get(st, "vol0"), PMC_STATE_BYPASSED);
		T_OK(pmc_engine_attach_flags(e, "vol0", d, NULL,
					     PMC_ATTACH_REPLACE_DISK | PMC_ATTACH_DISCARD_DIRTY, &v0,
					     &err));
		T_EQ(pmc_state_get(st, "vol0"), PMC_STATE_CLEAN);
		pmc_queue_destroy(q);
		T_OK(pmc_engine_detach(e, v0, 0, &err));
		T_OK(pmc_engine_detach(e, v1, 0, &err));
		pmc_engine_destroy(e);
		pmc_state_close(st);
		pmc_cache_close(c);
		pmc_pmem_close(pm);
		printf("ok: a volume served without the cache: its clean copies dropped when the "
		       "cache is back, dirty ones refused\n");
	}
	/* the file describes another cache: rebuilt for this one, whose
	 * volumes (vol0, vol1) are recorded bypassed (their disks were served
	 * through the other); a file that described none marks nothing */
	{
		uint8_t u[16];

		T_OK(pmc_pmem_open(pmem, (2u << 20) + 64 * BS, &pm, &err));
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		unlink(state);
		f = fopen(state, "w");
		fprintf(f, "pmcache-state 1 0123456789abcdef0123456789abcdef\nvol1 clean\nx dirty\n");
		fclose(f);
		T_OK(pmc_state_open(state, &st, &err));
		T_OK(pmc_state_rebuild(st, c, &err));
		T_EQ(pmc_state_get(st, "vol0"), PMC_STATE_BYPASSED);
		T_EQ(pmc_state_get(st, "vol1"), PMC_STATE_BYPASSED);
		pmc_state_uuid(st, u);
		{
			struct pmc_cache_info ci;

			pmc_cache_get_info(c, &ci);
			T_TRUE(!memcmp(u, ci.uuid, 16));
		}
		pmc_state_close(st);
		/* no file (lost, or removed as pmcached's refusal says): a
		 * volume with nothing dirty here is recorded bypassed (its
		 * clean copies may be older than its disk: they were served as
		 * hits); one with dirty blocks keeps them as its newest data */
		{
			struct pmc_volume_info vi;
			uint32_t s1 = UINT32_MAX;

			for (uint32_t i = 0; i < 64 && s1 == UINT32_MAX; i++)
				if (pmc_cache_volume_info(c, i, &vi) == 0 && !strcmp(vi.name, "vol1"))
					s1 = i;
			T_TRUE(s1 != UINT32_MAX);
			memset(buf, 0x6b, BS);
			T_OK(pmc_cache_write(c, s1, 9, 1, buf, &err));
		}
		unlink(state);
		T_OK(pmc_state_open(state, &st, &err));
		T_OK(pmc_state_rebuild(st, c, &err));
		T_EQ(pmc_state_get(st, "vol0"), PMC_STATE_BYPASSED);
		T_EQ(pmc_state_get(st, "vol1"), -ENOENT);
		pmc_state_close(st);
		unlink(state);
		pmc_cache_close(c);
		pmc_pmem_close(pm);
		printf("ok: a state file of another cache is rebuilt with this cache's volumes "
		       "bypassed; with none, the volumes with nothing dirty\n");
	}

	/* a save that fails changes nothing: the call after it saves again
	 * (the copy in memory took the change before the save, so the retry
	 * returned 0 with the file still saying clean while the engine went
	 * on to make dirty data) */
	unlink(state);
	T_OK(pmc_state_open(state, &st, &err));
	T_TRUE(mkdir(state, 0700) == 0); /* the rename onto it fails */
	T_TRUE(pmc_state_set(st, "vol-a", 1, &err) != 0);
	T_EQ(pmc_state_get(st, "vol-a"), -ENOENT);
	T_TRUE(rmdir(state) == 0);
	T_OK(pmc_state_set(st, "vol-a", 1, &err));
	T_OK(pmc_state_set(st, "vol-a", 0, &err));
	T_TRUE(unlink(state) == 0 && mkdir(state, 0700) == 0);
	T_TRUE(pmc_state_set(st, "vol-a", 1, &err) != 0);
	T_EQ(pmc_state_get(st, "vol-a"), 0);
	T_TRUE(pmc_state_set(st, "vol-a", 1, &err) != 0); /* tried again, not taken as made */
	T_TRUE(rmdir(state) == 0);
	T_OK(pmc_state_set(st, "vol-a", 1, &err));
	pmc_state_close(st);
	T_OK(pmc_state_open(state, &st, &err));
	T_EQ(pmc_state_get(st, "vol-a"), 1);
	/* the directory's fsync fails after the new file replaced the old:
	 * the file says clean now, perhaps not durably; the record is not
	 * known, and the next "dirty" saves again (it was taken as made, the
	 * file left clean). Read, it is the clean asked (the truth when it
	 * was asked; the file's older value errs only to dirty) */
	fail_dir_fsync = 1;
	T_TRUE(pmc_state_set(st, "vol-a", 0, &err) != 0);
	fail_dir_fsync = 0;
	record(state, line, sizeof(line));
	T_TRUE(!strcmp(line, "vol-a clean\n"));
	T_EQ(pmc_state_get(st, "vol-a"), PMC_STATE_CLEAN);
	T_OK(pmc_state_set(st, "vol-a", 1, &err));
	record(state, line, sizeof(line));
	T_TRUE(!strcmp(line, "vol-a dirty\n"));
	T_EQ(pmc_state_get(st, "vol-a"), 1);
	/* a save failing before its rename after one that left the record
	 * unknown: still unknown, read as the clean asked (it became the
	 * opposite of the value asked, "dirty" here, while the file says
	 * clean) */
	{
		char tmpname[300];

		fail_dir_fsync = 1;
		T_TRUE(pmc_state_set(st, "vol-a", 0, &err) != 0);
		fail_dir_fsync = 0;
		snprintf(tmpname, sizeof(tmpname), "%s.new", state);
		T_TRUE(mkdir(tmpname, 0700) == 0);
		T_TRUE(pmc_state_set(st, "vol-a", 0, &err) != 0);
		T_TRUE(rmdir(tmpname) == 0);
		T_EQ(pmc_state_get(st, "vol-a"), PMC_STATE_CLEAN);
		T_OK(pmc_state_set(st, "vol-a", 1, &err));
		record(state, line, sizeof(line));
		T_TRUE(!strcmp(line, "vol-a dirty\n"));
	}
	{
		char names[64];

		T_OK(pmc_state_set(st, "vol-b", 0, &err));
		T_EQ(pmc_state_dirty_names(st, names, sizeof(names)), 1);
		T_TRUE(!strcmp(names, "vol-a"));
	}
	pmc_state_close(st);

	/* an attach of a volume new to the cache that is refused because the
	 * state file cannot record it (after a crash, counts unknown, every
	 * attach marks its volume) leaves no record of it in the cache */
	{
		struct pmc_cache_info ci;

		unlink(pmem);
		unlink(state);
		T_OK(pmc_pmem_open(pmem, (2u << 20) + 64 * BS, &pm, &err));
		T_OK(pmc_cache_format(pm, NULL, &err));
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		pmc_cache_abandon(c); /* a crash */
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		pmc_cache_get_info(c, &ci);
		T_EQ(ci.counts_valid, 0);
		T_OK(pmc_state_open(state, &st, &err));
		T_TRUE(mkdir(state, 0700) == 0); /* every save fails at its rename */
		T_OK(pmc_engine_create(c, NULL, &e, &err));
		pmc_engine_set_state(e, st);
		T_OK(pmc_disk_open(disk0, 0, &d, &err));
		T_TRUE(pmc_engine_attach(e, "volnew", d, NULL, &v0, &err) != 0);
		pmc_disk_close(d);
		T_EQ(pmc_cache_volume_find(c, "volnew", &v0), -ENOENT);
		T_TRUE(rmdir(state) == 0);
		/* once the file can be saved, the same add goes through */
		T_OK(pmc_disk_open(disk0, 0, &d, &err));
		T_OK(pmc_engine_attach(e, "volnew", d, NULL, &v0, &err));
		T_OK(pmc_cache_volume_find(c, "volnew", &v1));
		T_EQ(v1, v0);
		/* removed, its slot taken by another volume: that one's
		 * statistics start from zero (it showed the removed one's) */
		{
			struct pmc_vol_stats s;

			T_OK(pmc_queue_create(e, 8, &q, &err));
			memset(buf, 0x11, 4 * BS);
			T_EQ(run(q, PMC_REQ_WRITE, v0, 0, 4 * BS, buf), 0);
			T_OK(pmc_engine_stats(e, v0, &s));
			T_EQ(s.writes, 1);
			T_OK(pmc_engine_flush_all(e, q, UINT32_MAX, NULL, NULL, &err));
			T_OK(pmc_engine_detach(e, v0, 1, &err));
			T_OK(pmc_disk_open(disk1, 0, &d, &err));
			T_OK(pmc_engine_attach(e, "volnext", d, NULL, &v1, &err));
			T_EQ(v1, v0);
			T_OK(pmc_engine_stats(e, v1, &s));
			T_EQ(s.writes, 0);
			T_EQ(s.write_bytes, 0);
			T_EQ(s.wb_blocks, 0);
			T_EQ(run(q, PMC_REQ_WRITE, v1, 0, 4 * BS, buf), 0);
			T_OK(pmc_engine_stats(e, v1, &s));
			T_EQ(s.writes, 1);
			printf("ok: a volume in a slot another left starts its statistics from zero\n");
			/* writeback.max_io lowered, then raised back to its value at
			 * start: merges are 1 MiB again (it stayed at the lower) */
			{
				struct pmc_wb_conf wc;
				char *big = aligned_alloc(BS, 64 * BS);

				pmc_wb_conf_default(&wc);
				wc.max_io_bytes = 16 * BS;
				pmc_engine_set_wb_conf(e, &wc);
				wc.max_io_bytes = 1u << 20;
				pmc_engine_set_wb_conf(e, &wc);
				memset(big, 0x12, 64 * BS);
				T_EQ(run(q, PMC_REQ_WRITE, v1, 4 * BS, 64 * BS, big), 0);
				T_OK(pmc_engine_flush_all(e, q, UINT32_MAX, NULL, NULL, &err));
				T_OK(pmc_engine_stats(e, v1, &s));
				T_EQ(s.wb_blocks, 68);
				T_TRUE(s.wb_ios <= 2); /* 68 blocks (a run may end at a 64-block region of the dirty map) */
				free(big);
				printf("ok: writeback.max_io raised back after a lower value\n");
			}
			pmc_queue_destroy(q);
		}
		T_OK(pmc_engine_detach(e, v0, 0, &err));
		pmc_engine_destroy(e);
		pmc_state_close(st);
		pmc_cache_close(c);
		pmc_pmem_close(pm);
		printf("ok: a new volume whose attach the state file refuses is not left in the cache\n");
	}

	unlink(pmem);
	unlink(disk0);
	unlink(disk1);
	unlink(state);
	strcat(state, ".lock");
	unlink(state);
	free(buf);
	free(rb);
	printf("PASS test_state\n");
	return 0;
}
