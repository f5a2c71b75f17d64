/* pmem.c - mapping pmem with libpmem2 and the store/flush/drain API.
 *
 * Owns: the file descriptor, the libpmem2 source and map, and the default
 * ops table, which forwards to libpmem2's own memcpy/flush/drain for the
 * store granularity the mapping reports (byte, cache line or page). A file
 * on a normal file system reports page granularity: flush is msync there.
 *
 * Thread safety: open/close are single-threaded; the ops are safe from any
 * thread for distinct ranges, as libpmem2's functions are.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpmem2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "pmem.h"

struct pmc_pmem_fns {
	pmem2_memcpy_fn memcpy;
	pmem2_memset_fn memset;
	pmem2_flush_fn flush;
	pmem2_drain_fn drain;
	unsigned copy_flags;
};

static void lp_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	struct pmc_pmem_fns *f = pm->priv;

	f->memcpy(dst, src, len, f->copy_flags);
}

static void lp_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	struct pmc_pmem_fns *f = pm->priv;

	f->memset(dst, c, len, f->copy_flags);
}

static void lp_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	__atomic_store_n(dst, val, __ATOMIC_RELEASE);
}

static void lp_flush(struct pmc_pmem *pm, const void *addr, size_t len)
{
	struct pmc_pmem_fns *f = pm->priv;

	f->flush(addr, len);
}

static void lp_drain(struct pmc_pmem *pm)
{
	struct pmc_pmem_fns *f = pm->priv;

	f->drain();
}

static const struct pmc_pmem_ops pmem2_ops = {
	.copy = lp_copy,
	.fill = lp_fill,
	.store8 = lp_store8,
	.flush = lp_flush,
	.drain = lp_drain,
};

const char *pmc_pmem_gran_name(enum pmc_pmem_gran g)
{
	switch (g) {
	case PMC_PMEM_GRAN_BYTE:
		return "byte";
	case PMC_PMEM_GRAN_CACHE_LINE:
		return "cache-line";
	case PMC_PMEM_GRAN_PAGE:
		return "page";
	}
	return "unknown";
}

/* libpmem2 reports a negative errno, or one of its own codes at or below
 * PMEM2_E_UNKNOWN, plus a thread-local message (copied here at once). The
 * library's pmem2_err_to_errno() is declared but not exported in 1.12. */
static int pmem2_fail(struct pmc_err *err, const char *path, const char *what, int rc)
{
	int e = rc < 0 && rc > PMEM2_E_UNKNOWN ? -rc : EINVAL;


	const char *m = pmem2_errormsg();

	if (m && *m)
		return pmc_err_set(err, e, "pmem %s: %s: %s", path, what, m);
	return pmc_err_set(err, e, "pmem %s: %s", path, what);
}

/* create or size a regular file as asked; refuses an existing other size */
static int prepare_file(int fd, const char *path, const struct stat *st, uint64_t create_size,
			struct pmc_err *err)
{
	int rc;

	if (create_size == 0 || (uint64_t)st->st_size == create_size)
		return 0;
	if (st->st_size != 0)
		return pmc_err_set(err, EEXIST,
				   "pmem %s: file exists with %lld bytes, asked to create %llu bytes",
				   path, (long long)st->st_size, (unsigned long long)create_size);
	/* allocated, not sparse: a store into a hole that the file system
	 * cannot fill (it is full) raises SIGBUS, long after this succeeded */
	rc = posix_fallocate(fd, 0, (off_t)create_size);
	if (rc) {
		/* back to the empty file it was; the error below says why */
		(void)!ftruncate(fd, 0);
		return pmc_err_set(err, rc, "pmem %s: cannot allocate %llu bytes: %s", path,
				   (unsigned long long)create_size, strerror(rc));
	}
	return 0;
}

/*
 * The namespace's unsafe shutdown count and device id (libpmem2): the id
 * joins the ids of every DIMM of the region, 21 characters each, so an
 * interleave set of 4 or more outgrows the superblock's 64 bytes; then
 * dev_id is "fnv1a64:" and a 64-bit FNV-1a hash of the whole id, which
 * still names the device. 0, or -1 when the device reports neither.
 */
static int device_id(struct pmc_pmem *pm)
{
	size_t len = 0;
	char *id;
	int rc = -1;

	if (pmem2_source_device_usc(pm->src, &pm->usc) ||
	    pmem2_source_device_id(pm->src, NULL, &len) || len < 2 || !(id = calloc(1, len)))
		return -1;
	if (pmem2_source_device_id(pm->src, id, &len) == 0 && id[0]) {
		size_t n = strnlen(id, len);

		if (n < sizeof(pm->dev_id)) {
			memcpy(pm->dev_id, id, n);
			pm->dev_id[n] = '\0';
		} else {
			snprintf(pm->dev_id, sizeof(pm->dev_id), "fnv1a64:%016" PRIx64,
				 pmc_fnv1a(id));
		}
		rc = 0;
	}
	free(id);
	return rc;
}

/* remove the file this open created, if it is still the one at its path */
static void unlink_ours(struct pmc_pmem *pm)
{
	struct stat a, b;

	if (pm->fd >= 0 && fstat(pm->fd, &a) == 0 && lstat(pm->path, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(pm->path);
}

static int open_map(const char *path, uint64_t create_size, int ro, struct pmc_pmem **out,
		    struct pmc_err *err)
{
	struct pmc_pmem *pm;
	struct pmc_pmem_fns *fns;
	struct pmem2_config *cfg = NULL;
	struct stat st;
	int rc;

	*out = NULL;
	pm = calloc(1, sizeof(*pm));
	fns = calloc(1, sizeof(*fns));
	if (!pm || !fns) {
		rc = pmc_err_set(err, ENOMEM, "pmem %s: out of memory", path);
		goto err_free;
	}
	snprintf(pm->path, sizeof(pm->path), "%s", path);
	/* created only when this open makes the file: a file another process
	 * creates meanwhile is opened as found, never counted as ours */
	if (create_size && !ro) {
		pm->fd = open(path, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, 0600);
		pm->created = pm->fd >= 0;
		if (pm->fd < 0 && errno == EEXIST)
			pm->fd = open(path, O_RDWR | O_CLOEXEC);
	} else {
		pm->fd = open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	}
	if (pm->fd < 0) {
		rc = pmc_err_set(err, errno, "pmem %s: cannot open: %s", path, strerror(errno));
		goto err_free;
	}
	if (fstat(pm->fd, &st) != 0) {
		rc = pmc_err_set(err, errno, "pmem %s: cannot stat: %s", path, strerror(errno));
		goto err_close;
	}
	if (S_ISCHR(st.st_mode)) {
		pm->is_devdax = 1;
	} else if (S_ISREG(st.st_mode)) {
		rc = prepare_file(pm->fd, path, &st, create_size, err);
		if (rc)
			goto err_close;
	} else {
		rc = pmc_err_set(err, EINVAL,
				 "pmem %s: neither a devdax character device nor a regular file",
				 path);
		goto err_close;
	}

	rc = pmem2_source_from_fd(&pm->src, pm->fd);
	if (rc) {
		rc = pmem2_fail(err, path,
				pm->is_devdax ? "character device is not a devdax namespace"
					      : "not usable as pmem",
				rc);
		goto err_close;
	}
	rc = pmem2_config_new(&cfg);
	if (rc) {
		rc = pmem2_fail(err, path, "config", rc);
		goto err_source;
	}
	rc = pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE);
	if (!rc && ro)
		rc = pmem2_config_set_protection(cfg, PMEM2_PROT_READ);
	if (!rc)
		rc = pmem2_map_new(&pm->map, cfg, pm->src);
	pmem2_config_delete(&cfg);
	if (rc) {
		rc = pmem2_fail(err, path, "cannot map", rc);
		goto err_source;
	}

	/* media health, best effort: a file has neither */
	pm->usc_valid = device_id(pm) == 0;
	if (!pm->usc_valid)
		pm->dev_id[0] = '\0';
	pm->base = pmem2_map_get_address(pm->map);
	pm->size = pmem2_map_get_size(pm->map);
	switch (pmem2_map_get_store_granularity(pm->map)) {
	case PMEM2_GRANULARITY_BYTE:
		pm->gran = PMC_PMEM_GRAN_BYTE;
		break;
	case PMEM2_GRANULARITY_CACHE_LINE:
		pm->gran = PMC_PMEM_GRAN_CACHE_LINE;
		break;
	default:
		pm->gran = PMC_PMEM_GRAN_PAGE;
		break;
	}
	fns->memcpy = pmem2_get_memcpy_fn(pm->map);
	fns->memset = pmem2_get_memset_fn(pm->map);
	fns->flush = pmem2_get_flush_fn(pm->map);
	fns->drain = pmem2_get_drain_fn(pm->map);
	/* page granularity: copy plainly and msync on flush; otherwise let
	 * libpmem2 pick temporal or non-temporal stores and flush as it goes */
	fns->copy_flags = pm->gran == PMC_PMEM_GRAN_PAGE ? PMEM2_F_MEM_NOFLUSH : PMEM2_F_MEM_NODRAIN;
	pm->copy_flushes = pm->gran != PMC_PMEM_GRAN_PAGE;
	pm->ops = &pmem2_ops;
	pm->priv = fns;
	*out = pm;
	return 0;

err_source:
	pmem2_source_delete(&pm->src);
err_close:
	/* a file it made stays, empty (prepare_file): unlinked here, without
	 * the lock, it might be one another process opened meanwhile */
	close(pm->fd);
err_free:
	free(fns);
	free(pm);
	return rc;
}

int pmc_pmem_may_create(const char *path, const char *how, struct pmc_err *err)
{
	if (!strncmp(path, "/dev/", 5) && strncmp(path, "/dev/shm/", 9))
		return pmc_err_set(err, ENODEV,
				   "pmem %s: no such device (%s makes a pmem file only outside "
				   "/dev: is the namespace there, in devdax mode?)",
				   path, how);
	return 0;
}

int pmc_pmem_open(const char *path, uint64_t create_size, struct pmc_pmem **out,
		  struct pmc_err *err)
{
	return open_map(path, create_size, 0, out, err);
}

int pmc_pmem_open_ro(const char *path, struct pmc_pmem **out, struct pmc_err *err)
{
	return open_map(path, 0, 1, out, err);
}

int pmc_pmem_wrap(void *base, uint64_t size, const struct pmc_pmem_ops *ops, void *priv,
		  struct pmc_pmem **out)
{
	struct pmc_pmem *pm = calloc(1, sizeof(*pm));

	*out = NULL;
	if (!pm)
		return -ENOMEM;
	pm->base = base;
	pm->size = size;
	pm->ops = ops;
	pm->priv = priv;
	pm->gran = PMC_PMEM_GRAN_CACHE_LINE;
	pm->fd = -1;
	snprintf(pm->path, sizeof(pm->path), "(buffer)");
	*out = pm;
	return 0;
}

void pmc_pmem_discard(struct pmc_pmem *pm)
{
	if (pm && pm->created)
		unlink_ours(pm);
	pmc_pmem_close(pm);
}

void pmc_pmem_close(struct pmc_pmem *pm)
{
	if (!pm)
		return;
	if (pm->map) {
		pmem2_map_delete(&pm->map);
		free(pm->priv);
	}
	if (pm->src)
		pmem2_source_delete(&pm->src);
	if (pm->fd >= 0)
		close(pm->fd);
	free(pm);
}
