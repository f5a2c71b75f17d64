/* pmcached.c - the pmcache daemon: maps the pmem, opens (or formats) the
 * cache, attaches the configured volumes to the engine and exports each as
 * a ublk block device, runs write-back, and serves the control socket.
 *
 * Threads: the main thread runs the libev loop (signals, control socket,
 * timers); the control server's worker runs volume add and remove (and
 * flush) so the loop never waits for them (ctlsrv.c, d->lock); one thread
 * per ublk queue serves I/O (dev.c); one thread runs write-back (wb.c).
 *
 * Start-up when the pmem cannot be mapped: volumes the state file records
 * as clean are served pass-through; the others are refused by name, and
 * the daemon exits non-zero if none can run. A volume whose NVMe-oF
 * namespace cannot be connected is served on a placeholder disk when the
 * cache knows it (attach_placeholder), and refused when it does not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "ctlsrv.h"
#include "diskid.h"
#include "nvmf.h"
#include "signature.h"
#include "lock.h"
#include "log.h"
#include "placeholder.h"
#include "pmcached.h"

static struct pmcd daemon_state;

static void usage(FILE *f)
{
	fprintf(f, "usage: pmcached [-c FILE] [--check-config] [--reload PID] [--version]\n"
		   "  -c, --config FILE   configuration (default " PMC_CONFIG_DEFAULT_PATH ")\n"
		   "  --check-config      validate the configuration and exit\n"
		   "  --reload PID        make the daemon PID reload its configuration, wait,\n"
		   "                      print the result; exit 1 if it applied not all of it\n");
}

/* 1 when it made dir itself, 0 when it was there, or -errno */
static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];

	/* the configuration takes paths up to PMC_CONFIG_PATH_MAX: never cut */
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0755) && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	}
	if (mkdir(buf, 0755) == 0)
		return 1;
	return errno == EEXIST ? 0 : -errno;
}

/*
 * Keep the daemon's memory in RAM: I/O to its devices waits for it, so a
 * page of its heap or stack swapped out under memory pressure would stall
 * the devices, or deadlock when swap or the page cache writes to them.
 * MCL_ONFAULT: pages are locked as they are touched, so the queue buffers
 * cost only what is used; the pmem mapping is unlocked again once mapped
 * (unlock_pmem): devdax is not RAM, and locking a file used as pmem would
 * pin the whole file in the page cache.
 */
static void lock_memory(void)
{
	struct rlimit rl = {0};
	char limit[32] = "unknown";
	int e;

	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0)
		return;
	e = errno;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			snprintf(limit, sizeof(limit), "unlimited");
		else
			snprintf(limit, sizeof(limit), "%llu KiB",
				 (unsigned long long)rl.rlim_cur >> 10);
	}
	pmc_log(LOG_WARNING,
		"mlockall: %s (RLIMIT_MEMLOCK %s): the daemon's memory may be swapped out, and "
		"I/O to its devices then waits for swap; run it as root or with "
		"LimitMEMLOCK=infinity (the unit does)",
		strerror(e), limit);
}

/* is path on a file system in RAM (tmpfs, ramfs; devtmpfs is tmpfs)? */
static int in_ram(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/* DH-HMAC-CHAP secrets are never shown by get or status: say so when the
 * file that holds them lets every user read them */
static void secrets_check(const char *path, const struct pmc_config *c)
{
	struct stat st;

	for (unsigned i = 0; i < c->nr_volumes; i++) {
		const struct pmc_config_volume *v = &c->volumes[i];

		if (!v->nvmf.dhchap_key[0] && !v->nvmf.dhchap_ctrl_key[0])
			continue;
		if (stat(path, &st) == 0 && (st.st_mode & S_IROTH))
			pmc_log(LOG_WARNING,
				"%s holds DH-HMAC-CHAP secrets (volume %s) and every user may "
				"read it (mode %04o): chmod o-r it",
				path, v->name, (unsigned)(st.st_mode & 07777));
		return;
	}
}

static void unlock_pmem(struct pmcd *d)
{
	if (d->pm && d->pm->base && munlock(d->pm->base, d->pm->size))
		pmc_log(LOG_DEBUG, "munlock of the pmem mapping: %s", strerror(errno));
}

static int open_cache(struct pmcd *d, struct pmc_err *err)
{
	struct pmc_config *c = &d->conf;
	struct stat st;
	uint64_t create = 0;
	int rc;

	if (stat(c->pmem_path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0))
		create = c->pmem_size;
	/* a devdax namespace that did not appear is not a file to make */
	if (create && (rc = pmc_pmem_may_create(c->pmem_path, "pmem.size", err)))
		return rc;
	rc = pmc_pmem_open(c->pmem_path, create, &d->pm, err);
	if (rc)
		return rc;
	/* a pmem file in RAM (tmpfs, /dev/shm, devtmpfs: a devdax name made
	 * a file by hand) keeps nothing across a power cut */
	if (stat(c->pmem_path, &st) == 0 && S_ISREG(st.st_mode) && in_ram(c->pmem_path))
		pmc_log(LOG_CRIT,
			"pmem %s is a file in RAM (tmpfs): every acknowledged write in it is "
			"lost at a power cut or reboot; for tests only",
			c->pmem_path);
	/* one owner per cache: a second daemon or an offline command holding
	 * the pmem makes this one exit, never run beside it */
	rc = pmc_pmem_lock(d->pm, PMC_LOCK_EXCLUSIVE, NULL, err);
	if (rc) {
		pmc_pmem_close(d->pm);
		d->pm = NULL;
		return rc;
	}
	rc = pmc_cache_open(d->pm, 0, &d->cache, err);
	if (rc == -ENODATA && c->pmem_format == PMC_CONFIG_FORMAT_IF_BLANK &&
	    strstr(err->msg, "blank")) {
		/* blank where the superblocks go is not blank: a file system,
		 * swap or partition table there is someone's data (a wrong
		 * pmem.path), which only "pmcachectl format --force" overwrites */
		char what[160] = "";
		int sig = pmc_pmem_signature(c->pmem_path, d->pm, what, sizeof(what));

		pmc_err_clear(err);
		if (sig < 0) {
			rc = pmc_err_set(err, -sig,
					 "pmem %s: no pmcache superblock, and it cannot be probed "
					 "for other data: %s; not formatted",
					 c->pmem_path, strerror(-sig));
		} else if (sig) {
			rc = pmc_err_set(err, EEXIST,
					 "pmem %s: no pmcache superblock, but %s; not formatted "
					 "(if-blank): check pmem.path, or \"pmcachectl format "
					 "--force\" it",
					 c->pmem_path, what);
		} else {
			pmc_log(LOG_NOTICE, "pmem %s: blank: formatting a new cache", c->pmem_path);
			rc = pmc_cache_format(d->pm, NULL, err);
			if (!rc)
				rc = pmc_cache_open(d->pm, 0, &d->cache, err);
		}
	}
	if (rc == -ENODATA && c->pmem_format == PMC_CONFIG_FORMAT_NEVER && strstr(err->msg, "blank")) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		pmc_err_clear(err);
		pmc_err_set(err, ENODATA,
			    "%s; pmem.format is \"never\": format it with \"pmcachectl format %s\"",
			    msg, c->pmem_path);
	}
	if (rc) {
		pmc_pmem_close(d->pm);
		d->pm = NULL;
		return rc;
	}
	return 0;
}

/* the control socket's group: control.group, else the admins' (ctlsrv.c);
 * "" none */
static const char *sock_group(const struct pmcd *d, const char **key)
{
	*key = d->conf.control_group[0] ? "control.group" : "control.admin_group";
	return d->conf.control_group[0] ? d->conf.control_group : d->conf.control_admin_group;
}

/* dir to root and the socket's group, 0750 */
static int give_dir(struct pmcd *d, const char *dir)
{
	const char *key, *name = sock_group(d, &key);
	struct group *g = name[0] ? getgrnam(name) : NULL;

	if (!g)
		return -ENOENT;
	if (chown(dir, 0, g->gr_gid) || chmod(dir, 0750)) {
		int e = errno;

		pmc_log(LOG_WARNING, "%s: cannot give it to group %s (%s): %s", dir, name, key,
			strerror(e));
		return -e;
	}
	return 0;
}

/* the pid lock next to the control socket: one daemon per socket */
static int take_pidfile(struct pmcd *d, struct pmc_err *err)
{
	char dir[sizeof(d->pid_path)], *slash;

	pmc_pidfile_for_socket(d->conf.control_socket, d->pid_path, sizeof(d->pid_path));
	snprintf(dir, sizeof(dir), "%s", d->pid_path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		/* made now: given to the socket's group at once (0700 under the
		 * unit's umask, and a start that fails before the socket is
		 * made would leave it so for the next) */
		if (mkdir_p(dir) == 1)
			give_dir(d, dir);
	}
	return pmc_pidfile_take(d->pid_path, &d->pid_fd, NULL, err);
}

/* the shipped file's example volume names this disk until the operator
 * edits it (etc/pmcached.conf) */
#define PMCD_DISK_PLACEHOLDER "CHANGE-ME"

/* a configuration still as shipped serves nothing and must not start */
_Static_assert(PMC_CONFIG_VOLUMES_MAX <= PMCD_MAX_VOLUMES, "the config takes what pmcached serves");
static int check_edited(const char *path, const struct pmc_config *c, struct pmc_err *err)
{
	for (unsigned i = 0; i < c->nr_volumes; i++) {
		const char *base = strrchr(c->volumes[i].disk, '/');
		const char *nqn = c->volumes[i].nvmf.subsysnqn;
		size_t n = strlen(nqn), p = strlen(PMCD_DISK_PLACEHOLDER);

		if (n >= p && !strcmp(nqn + n - p, PMCD_DISK_PLACEHOLDER))
			return pmc_err_set(err, EINVAL,
					   "edit %s: volume %s names the example NVMe-oF subsystem "
					   "%s",
					   path, c->volumes[i].name, nqn);
		base = base ? base + 1 : c->volumes[i].disk;
		if (!strcmp(base, PMCD_DISK_PLACEHOLDER))
			return pmc_err_set(err, EINVAL,
					   "edit %s: no volume configured (volume %s names the "
					   "example disk %s)",
					   path, c->volumes[i].name, c->volumes[i].disk);
	}
	return 0;
}

/* the control socket's groups exist: checked before anything is served
 * or taken over (and by --check-config), not when the socket is made */
static int check_groups(const char *path, const struct pmc_config *c, struct pmc_err *err)
{
	struct pmc_err gerr = {0};
	int rc = pmcd_ctlsrv_check_groups(c, &gerr);

	return rc ? pmc_err_set(err, gerr.code, "%s: %s", path, gerr.msg) : 0;
}

static int ublk_id_for(const struct pmc_config_volume *vc, uint32_t slot)
{
	return vc->ublk_id >= 0 ? vc->ublk_id : (int)slot;
}

/*
 * An NVMe-oF volume whose namespace cannot be connected now, or whose
 * controller is not live (err says why):
 * a placeholder disk (lib/placeholder.h) when the cache knows the volume's
 * size and identity, so that it is served from the pmem while the path
 * monitor reconnects it and swaps the namespace in once its identity
 * matches; np is set to what the kernel shows of its controller (state
 * "lost" when there is none, and no device: the monitor rebinds). A volume
 * the cache does not know is refused with err.
 */
static int attach_placeholder(struct pmcd *d, const struct pmc_config_volume *vc,
			      const char *label, struct pmc_nvmf_path *np, struct pmc_disk **disk,
			      struct pmc_err *err)
{
	struct pmc_err perr = {0};
	int rc, code = err->code ? err->code : EIO;

	rc = pmc_placeholder_open(d->cache, vc->name, label, ENOTCONN, disk, &perr);
	if (rc == -ENOENT)
		return -code; /* a new volume: the connect error says it all */
	if (rc) {
		pmc_err_clear(err);
		return pmc_err_set(err, -rc, "%s", perr.msg);
	}
	pmc_log(LOG_WARNING,
		"%s; served from the cache without its disk (hits served, writes absorbed; "
		"read misses and write-back fail) until the namespace is back with the "
		"recorded identity %s",
		err->msg, pmc_placeholder_id(*disk));
	pmc_err_clear(err);
	memset(np, 0, sizeof(*np));
	if (pmc_nvmf_find(&vc->nvmf, np, NULL) != 0)
		snprintf(np->state, sizeof(np->state), "lost");
	np->dev[0] = '\0'; /* the disk is not on it yet */
	return 0;
}

static int volume_add(struct pmcd *d, const struct pmc_config_volume *vc, unsigned flags,
		      struct pmc_nvmf_path *pnp, struct pmc_err *err);

void pmcd_nvmf_release(struct pmcd *d, const char *made, const char *name, const char *why)
{
	struct pmc_err derr = {0};
	int used = 0;

	/* fabric_lock held: no add can take it between this check and the
	 * disconnect (an add claims what its connect found), and no path
	 * monitor step can bind it */
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		used |= d->vols[i].used && !strcmp(d->vols[i].path_ctrl, made);
	used |= !strcmp(d->claim_ctrl, made);
	pthread_mutex_unlock(&d->lock);
	if (used)
		return;
	if (pmc_nvmf_disconnect(made, &derr))
		pmc_log(LOG_WARNING, "volume %s: %s; its %s", name, why, derr.msg);
	else
		pmc_log(LOG_INFO, "volume %s: %s; controller %s, which it connected, is "
				  "disconnected", name, why, made);
}

/*
 * A refused add leaves the host's fabric connections as they were: the
 * controller its connect made is disconnected again, unless a served
 * volume's path took it meanwhile (the path monitor binds any controller of
 * its subsystem).
 */
int pmcd_volume_add(struct pmcd *d, const struct pmc_config_volume *vc, unsigned flags,
		    struct pmc_err *err)
{
	struct pmc_nvmf_path np = {0};
	int rc = volume_add(d, vc, flags, &np, err);

	/* a local disk claimed no controller and made none: it does not wait
	 * for the path monitor's reconnects of other volumes */
	if (!pmc_config_volume_is_nvmf(vc))
		return rc;
	pthread_mutex_lock(&d->fabric_lock);
	pthread_mutex_lock(&d->lock);
	d->claim_ctrl[0] = '\0'; /* added: the volume's path_ctrl holds it now */
	pthread_mutex_unlock(&d->lock);
	if (rc && np.made[0])
		pmcd_nvmf_release(d, np.made, vc->name, "refused");
	pthread_mutex_unlock(&d->fabric_lock);
	return rc;
}

/*
 * Detach a volume from the engine, removing it from the cache with remove.
 * A removal refused (dirty blocks, a pmem error) detaches it all the same
 * with its record and data kept in the pmem: its device is gone, and a
 * slot still attached would hold its disk open and refuse the next add.
 */
static int volume_detach(struct pmcd *d, uint32_t vol, const char *name, int remove,
			 struct pmc_err *err)
{
	struct pmc_err kerr = {0};
	char why[sizeof(err->msg)];
	int rc = pmc_engine_detach(d->e, vol, remove, err);

	if (rc == 0 || !remove)
		return rc;
	if (pmc_engine_detach(d->e, vol, 0, &kerr)) {
		pmc_log(LOG_ERR, "volume %s: %s", name, kerr.msg);
		return rc;
	}
	snprintf(why, sizeof(why), "%s", err->msg);
	pmc_err_set(err, -rc, "%s; detached, kept in the pmem until it is added again", why);
	pmc_log(LOG_WARNING, "volume %s: %s", name, err->msg);
	return rc;
}

static int volume_add(struct pmcd *d, const struct pmc_config_volume *vc, unsigned flags,
		      struct pmc_nvmf_path *pnp, struct pmc_err *err)
{
	struct pmcd_volume *v = NULL;
	struct pmcd_dev_conf dc;
	struct pmc_volume_info was;
	struct pmc_disk *disk;
	struct pmc_nvmf_path np = {0};
	char label[PMC_CONFIG_NQN_MAX + PMC_CONFIG_TRADDR_MAX + 96];
	const char *path;
	uint32_t slot;
	int rc, absent = 0, fresh = 0;

	if (pmcd_volume_find(d, vc->name))
		return pmc_err_set(err, EEXIST, "volume %s: already served", vc->name);
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		if (!d->vols[i].used) {
			v = &d->vols[i];
			break;
		}
	}
	if (!v)
		return pmc_err_set(err, ENOSPC, "volume %s: the daemon serves %u volumes at most",
				   vc->name, PMCD_MAX_VOLUMES);
	path = vc->disk;
	if (pmc_config_volume_is_nvmf(vc)) {
		/* the namespace's block device; its identity is checked at attach */
		pmc_config_nvmf_label(&vc->nvmf, label, sizeof(label));
		/* what the connect found is claimed before anyone may
		 * disconnect it: the path monitor releases what its own
		 * reconnects made for volumes gone meanwhile */
		pthread_mutex_lock(&d->fabric_lock);
		rc = pmc_nvmf_connect(&vc->nvmf, vc->name, 10000, &np, err);
		if (rc == 0) {
			pthread_mutex_lock(&d->lock);
			snprintf(d->claim_ctrl, sizeof(d->claim_ctrl), "%s", np.ctrl);
			pthread_mutex_unlock(&d->lock);
		}
		pthread_mutex_unlock(&d->fabric_lock);
		snprintf(pnp->made, sizeof(pnp->made), "%s", np.made);
		if (rc && (flags || !d->cache))
			return rc;
		if (rc == 0 && strcmp(np.state, "live")) {
			/* the namespace is there but its controller is not live
			 * (the kernel is reconnecting): its identity cannot be read
			 * now (Identify fails; the sysfs ids are another form of
			 * it, which a later attach would refuse as another disk).
			 * A volume the cache knows is served without its disk
			 * until it is live; any other add is refused. */
			struct pmc_err nerr = {0};

			pmc_err_set(&nerr, ENOTCONN,
				    "volume %s: %s: controller %s is %s: the namespace's identity "
				    "cannot be read now; try again once it is live",
				    vc->name, label, np.ctrl, np.state);
			absent = !flags && d->cache &&
				 attach_placeholder(d, vc, label, &np, &disk, &nerr) == 0;
			if (!absent) {
				*err = nerr;
				return -(nerr.code ? nerr.code : ENOTCONN);
			}
		}
		if (rc) {
			rc = attach_placeholder(d, vc, label, &np, &disk, err);
			if (rc)
				return rc;
			absent = 1;
		} else if (!absent) {
			path = np.dev;
			pmc_log(LOG_INFO, "volume %s: %s is %s (controller %s, %s)", vc->name,
				label, np.dev, np.ctrl, np.state);
		}
	}
	rc = absent ? 0 : pmc_disk_open(path, 0, &disk, err);
	if (rc)
		return rc;
	/* a volume new to the cache is recorded by the attach: a failure
	 * after it removes it again, so a refused add leaves no trace */
	if (d->cache && pmc_cache_volume_find(d->cache, vc->name, &slot) != 0)
		fresh = 1;
	/* the identity its slot records now: the attach may move an older
	 * pmcached's form to the current one (diskid.h) */
	memset(&was, 0, sizeof(was));
	if (d->cache && !fresh)
		pmc_cache_volume_info(d->cache, slot, &was);
	rc = pmc_engine_attach_flags(d->e, vc->name, disk, &vc->vc, flags, &v->vol, err);
	if (rc) {
		pmc_disk_close(disk);
		return rc;
	}
	memset(&dc, 0, sizeof(dc));
	dc.name = vc->name;
	dc.vol = v->vol;
	dc.dev_id = ublk_id_for(vc, v->vol);
	dc.nr_queues = (uint16_t)d->conf.queues_count;
	dc.depth = (uint16_t)d->conf.queues_depth;
	dc.max_io = d->conf.wb.max_req_bytes;
	dc.size = pmc_engine_volume_size(d->e, v->vol);
	dc.disk_id = pmcd_volume_disk_id(d, v);
	if (was.id_state == 1 && strcmp(was.disk_id.text, dc.disk_id))
		dc.disk_id_was = was.disk_id.text;
	/* acknowledged writes of write-through are durable: no volatile cache
	 * to flush. Write-back volumes advertise one (and FUA) so that the
	 * sequential streams they send around the cache may be plain disk
	 * writes made durable by the next FLUSH (lib/ORDERING.md); their
	 * cached writes are durable anyway, and a FLUSH with no plain write
	 * since the last sync completes at once. */
	dc.volatile_cache = vc->vc.mode != PMC_MODE_WRITE_THROUGH || !d->cache;
	dc.discard = 1;
	rc = pmcd_dev_start(d->ctrl, d->e, &dc, &v->dev, err);
	if ((rc == -EBUSY || rc == -EEXIST) && vc->ublk_id < 0) {
		/* "any free one": the slot's number is taken (a volume given
		 * that number, another ublk server): the driver picks one */
		pmc_log(LOG_NOTICE, "volume %s: %s; taking any free ublk device number", vc->name,
			err->msg);
		pmc_err_clear(err);
		dc.dev_id = -1;
		rc = pmcd_dev_start(d->ctrl, d->e, &dc, &v->dev, err);
	}
	if (rc) {
		struct pmc_err derr = {0};

		volume_detach(d, v->vol, vc->name, fresh, &derr);
		return rc;
	}
	pthread_mutex_lock(&d->lock);
	v->conf = *vc;
	v->disk = disk;
	snprintf(v->path_state, sizeof(v->path_state), "%s", np.state);
	snprintf(v->path_ctrl, sizeof(v->path_ctrl), "%s", np.ctrl);
	snprintf(v->path_dev, sizeof(v->path_dev), "%s", np.dev);
	snprintf(v->path_addr, sizeof(v->path_addr), "%s", np.address);
	v->path_reconnects = 0;
	v->path_down = absent;
	v->path_backoff_ms = absent ? PMCD_PATH_BACKOFF_MIN_MS : 0;
	v->path_retry_ns = absent ? pmc_mono_ns() + PMCD_PATH_BACKOFF_MIN_MS * 1000000ull : 0;
	v->gen = ++d->vol_gen;
	v->used = 1;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* with force, a volume whose disk fails write-back is detached anyway, its
 * dirty data kept in the pmem for the next attach; an open device is
 * never removed. May run on the control worker (ctlsrv.c). */
static int volume_remove(struct pmcd *d, struct pmcd_volume *v, const char *name, int force,
			 struct pmc_err *err);

int pmcd_volume_remove(struct pmcd *d, const char *name, int force, struct pmc_err *err)
{
	struct pmcd_volume *v = pmcd_volume_find(d, name);
	char holder[200];
	int rc;

	if (!v)
		return pmc_err_set(err, ENOENT, "volume %s: not served", name);
	if (pmcd_dev_holder(v->dev->info.dev_id, holder, sizeof(holder)))
		return pmc_err_set(err, EBUSY, "volume %s: /dev/ublkb%u is in use: %s; unmount "
					       "or close it first",
				   name, v->dev->info.dev_id, holder);
	/* a reload meanwhile must not put the volume back in write-back mode */
	pthread_mutex_lock(&d->lock);
	v->removing = 1;
	pthread_mutex_unlock(&d->lock);
	rc = volume_remove(d, v, name, force, err);
	pthread_mutex_lock(&d->lock);
	v->removing = 0;
	pthread_mutex_unlock(&d->lock);
	return rc;
}

/* pmcd_volume_remove() once the device was found unused */
static int volume_remove(struct pmcd *d, struct pmcd_volume *v, const char *name, int force,
			 struct pmc_err *err)
{
	struct pmcd_dev *dev;
	char holder[200];
	int rc, kept = 0;

	/* no new dirty data, then everything to the disk */
	pmc_engine_set_mode(d->e, v->vol, PMC_MODE_WRITE_AROUND, NULL);
	if (d->cache) {
		while (pmcd_wb_flush(&d->wb, v->vol) == -EBUSY)
			usleep(10000);
		while (atomic_load(&d->wb.flush_busy))
			usleep(10000);
		pthread_mutex_lock(&d->wb.lock);
		rc = d->wb.flush_res;
		if (rc)
			*err = d->wb.flush_err;
		pthread_mutex_unlock(&d->wb.lock);
		/* cancelled (the daemon stops): not a failing disk that --force
		 * detaches anyway; the volume stays as it was. A disk that does
		 * not answer neither: a detach waits for the writes in flight */
		if (rc == -ETIMEDOUT && force) {
			char msg[sizeof(err->msg)];

			snprintf(msg, sizeof(msg), "%s", err->msg);
			pmc_err_clear(err);
			pmc_err_set(err, ETIMEDOUT,
				    "%s; not removed, even with --force: its writes in flight "
				    "hold it until the disk answers",
				    msg);
		}
		if (rc && (!force || rc == -ECANCELED || rc == -ETIMEDOUT)) {
			pmc_engine_set_mode(d->e, v->vol, v->conf.vc.mode, NULL);
			return rc;
		}
		if (rc) {
			pmc_log(LOG_WARNING,
				"volume %s: %s; detaching anyway (force): its dirty data stays "
				"in the pmem until it is added again",
				name, err->msg);
			pmc_err_clear(err);
			kept = 1;
		}
	}
	/* the write-back may have taken minutes: the device is checked again
	 * and stopped under an exclusive claim, so that nothing mounted or
	 * opened it meanwhile loses it */
	pthread_mutex_lock(&d->lock);
	dev = v->dev;
	v->dev = NULL;
	pthread_mutex_unlock(&d->lock);
	if (pmcd_dev_stop_unused(dev, holder, sizeof(holder))) {
		pthread_mutex_lock(&d->lock);
		v->dev = dev;
		pthread_mutex_unlock(&d->lock);
		pmc_engine_set_mode(d->e, v->vol, v->conf.vc.mode, NULL);
		return pmc_err_set(err, EBUSY,
				   "volume %s: /dev/ublkb%u came into use during the removal: %s; "
				   "it is served as before",
				   name, dev->info.dev_id, holder);
	}
	pthread_mutex_lock(&d->lock);
	v->used = 0;
	v->disk = NULL;
	pthread_mutex_unlock(&d->lock);
	rc = volume_detach(d, v->vol, name, !kept, err);
	if (rc)
		return rc; /* its device is gone: the error says what became of it */
	if (kept)
		pmc_log(LOG_WARNING, "volume %s: detached with dirty data kept in the pmem", name);
	else
		pmc_log(LOG_INFO, "volume %s: removed; all its data is on %s", name,
			v->conf.disk[0] ? v->conf.disk : v->path_dev);
	return 0;
}

void pmcd_status(struct pmcd *d, char *buf, size_t len)
{
	struct pmc_cache_info ci;
	unsigned n = 0;

	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		n += d->vols[i].used;
	if (!d->cache) {
		snprintf(buf, len, "pmem unavailable: %u volumes pass-through", n);
		return;
	}
	pmc_cache_get_info(d->cache, &ci);
	if (!ci.counts_valid) /* partial until the recount after a crash is done */
		snprintf(buf, len, "%u volumes; cache %" PRIu64 " MiB, dirty and clean blocks "
			 "being counted (after a crash)",
			 n, ci.nr_blocks * ci.block_size >> 20);
	else
		snprintf(buf, len, "%u volumes; cache %" PRIu64 " MiB, %" PRIu64 " dirty, %" PRIu64
			 " clean blocks",
			 n, ci.nr_blocks * ci.block_size >> 20, ci.nr_dirty, ci.nr_clean);
}

void pmcd_shutdown(struct pmcd *d)
{
	d->stopping = 1;
	ev_break(d->loop, EVBREAK_ALL);
}

int pmcd_shutdown_remove(struct pmcd *d, struct pmc_err *err)
{
	char holder[200];

	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		struct pmcd_volume *v = &d->vols[i];

		if (v->used && v->dev && pmcd_dev_holder(v->dev->info.dev_id, holder, sizeof(holder)))
			return pmc_err_set(err, EBUSY,
					   "volume %s: /dev/ublkb%u is in use: %s; unmount or close "
					   "it first, or shut down without removing the devices",
					   v->conf.name, v->dev->info.dev_id, holder);
	}
	d->remove_devices = 1;
	pmc_log(LOG_NOTICE, "shutdown: removing every device");
	pmcd_shutdown(d);
	return 0;
}

/* Stop serving: a device in use (mounted, held, open) is left quiesced for
 * the next daemon, which takes it over with no error seen above it (the
 * restart and upgrade path); the others are removed. Nothing is removed
 * under a holder, even when removal was asked for: it may have come after
 * the check of pmcd_shutdown_remove(). */
static void stop_devices(struct pmcd *d)
{
	unsigned left = 0;

	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		struct pmcd_volume *v = &d->vols[i];
		char holder[200];

		if (!v->used || !v->dev)
			continue;
		if (pmcd_dev_stop_unused(v->dev, holder, sizeof(holder))) {
			pmc_log(d->remove_devices ? LOG_WARNING : LOG_NOTICE,
				"volume %s: /dev/ublkb%u is in use (%s): leaving it to the next "
				"pmcached",
				v->conf.name, v->dev->info.dev_id, holder);
			pmcd_dev_leave(v->dev);
			left++;
		}
		v->dev = NULL;
	}
	if (left)
		pmc_log(LOG_NOTICE,
			"%u device%s quiesced: I/O to %s waits for the next pmcached (to remove "
			"%s: unmount, start pmcached, \"pmcachectl shutdown --remove-devices\")",
			left, left == 1 ? "" : "s", left == 1 ? "it" : "them", left == 1 ? "it" : "them");
}

static void on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
	pmc_log(LOG_NOTICE, "signal %d: stopping", w->signum);
	pmcd_shutdown(&daemon_state);
}

/*
 * Reload (SIGHUP; "systemctl reload" runs pmcached --reload, which sends it
 * and waits for the result): re-read the file, apply the keys that can
 * change at run time, and report what it could not apply - a file that
 * does not load, a key that needs a restart, a volume added to or missing
 * from the file (pmcachectl volume add/remove changes those at run time).
 * The result goes to the journal, to systemd (RELOADING=1 ... READY=1 with
 * STATUS=) and to PMCD_RELOAD_FILE for pmcached --reload: "PID SEQ ok|fail
 * message".
 */
#define PMCD_RELOAD_FILE PMCD_RUN_DIR "/reload"
#define PMCD_RELOAD_WAIT_S 60

struct reload_report {
	char msg[2048];
	size_t len;
	unsigned missed;	/* changes not applied */
};

static void report(struct reload_report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void report(struct reload_report *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->len + 4 >= sizeof(r->msg))
		return;
	if (r->len)
		r->len += (size_t)snprintf(r->msg + r->len, sizeof(r->msg) - r->len, "; ");
	va_start(ap, fmt);
	n = vsnprintf(r->msg + r->len, sizeof(r->msg) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len = r->len + (size_t)n < sizeof(r->msg) ? r->len + (size_t)n : sizeof(r->msg) - 1;
	r->missed++;
}

/* keys that differ between the running configuration and the file but
 * cannot change at run time; volumes in one and not the other */
static void reload_diff(struct pmcd *d, struct pmc_config *nc, struct reload_report *r)
{
	char was[PMC_CONFIG_PATH_MAX + 8], now[PMC_CONFIG_PATH_MAX + 8];

	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->scope != PMC_CONFIG_SCOPE_TOP || k->type == PMC_CONFIG_T_LIST ||
		    (k->flags & PMC_CONFIG_RUNTIME))
			continue;
		pmc_config_key_format(k, pmc_config_key_base(k, &d->conf, 0), was, sizeof(was));
		pmc_config_key_format(k, pmc_config_key_base(k, nc, 0), now, sizeof(now));
		if (strcmp(was, now))
			report(r, "%s %s -> %s needs a restart", k->key, was, now);
	}
	for (unsigned i = 0; i < nc->nr_volumes; i++) {
		const struct pmc_config_volume *nv = &nc->volumes[i];
		struct pmcd_volume *v = pmcd_volume_find(d, nv->name);

		if (!v) {
			report(r, "volume %s is not served (pmcachectl volume add, or a restart)",
			       nv->name);
			continue;
		}
		for (size_t j = 0; j < pmc_config_table_len; j++) {
			const struct pmc_config_key *k = &pmc_config_table[j];

			if (k->scope != PMC_CONFIG_SCOPE_VOLUME || (k->flags & PMC_CONFIG_RUNTIME))
				continue;
			pmc_config_key_format(k, &v->conf, was, sizeof(was));
			pmc_config_key_format(k, nv, now, sizeof(now));
			/* a run-time add records the node a link resolved to: the
			 * file may name the same disk by its stable link */
			if (!strcmp(k->key, "disk") && strcmp(was, now) &&
			    pmc_config_same_device(v->conf.disk, nv->disk))
				continue;
			if (strcmp(was, now) && (k->flags & PMC_CONFIG_SECRET))
				report(r, "volume %s: %s changed (not shown); that needs a restart",
				       nv->name, k->key);
			else if (strcmp(was, now))
				report(r, "volume %s: %s %s -> %s needs a restart", nv->name, k->key,
				       was, now);
		}
	}
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		const struct pmcd_volume *v = &d->vols[i];
		int found = 0;

		for (unsigned j = 0; v->used && j < nc->nr_volumes; j++)
			found |= !strcmp(nc->volumes[j].name, v->conf.name);
		if (v->used && !found)
			report(r, "volume %s is served but not in the file (pmcachectl volume remove)",
			       v->conf.name);
	}
}

/* apply the run-time keys of the file; the report says what was left */
static int reload(struct pmcd *d, struct reload_report *r)
{
	struct pmc_config *nc = calloc(1, sizeof(*nc));
	struct pmc_err err = {0};

	if (!nc) {
		report(r, "out of memory");
		return -ENOMEM;
	}
	if (pmc_config_load(d->conf_path, nc, &err)) {
		report(r, "%s; keeping the running configuration", err.msg);
		free(nc);
		return -EINVAL;
	}
	/* the volume table under lock: the control worker may add or remove
	 * volumes meanwhile (lock order: d->lock, then the engine's) */
	pthread_mutex_lock(&d->lock);
	reload_diff(d, nc, r);
	/* the engine's write-back I/O was sized at start (as for "set") */
	if (nc->wb.max_io_bytes > d->max_io_start) {
		report(r, "writeback.max_io %u above its value at start (%u) needs a restart",
		       nc->wb.max_io_bytes, d->max_io_start);
		nc->wb.max_io_bytes = d->conf.wb.max_io_bytes;
	}
	/* queues.max_io sized the engine and the devices at start (reported
	 * above as needing a restart): a device added later must not take
	 * requests the engine refuses */
	nc->wb.max_req_bytes = d->conf.wb.max_req_bytes;
	pmc_engine_set_wb_conf(d->e, &nc->wb);
	pmc_log_set_level(nc->log_level);
	for (unsigned i = 0; i < nc->nr_volumes; i++) {
		struct pmcd_volume *v = pmcd_volume_find(d, nc->volumes[i].name);

		if (!v)
			continue;
		if (v->removing) {
			/* its remove decides what becomes of it: if the remove
			 * fails it keeps its settings, not the file's */
			report(r, "volume %s: being removed; its settings in the file not applied",
			       v->conf.name);
			continue;
		}
		pmc_err_clear(&err);
		if (pmc_engine_set_volume_conf(d->e, v->vol, &nc->volumes[i].vc, &err))
			report(r, "%s", err.msg);
		else
			v->conf.vc = nc->volumes[i].vc;
	}
	pthread_mutex_unlock(&d->lock);
	d->conf.wb = nc->wb;
	d->conf.log_level = nc->log_level;
	pmc_config_free(nc);
	free(nc);
	return r->missed ? -EINVAL : 0;
}

/* PMCD_RELOAD_FILE, replaced whole (rename) */
static void reload_publish(int ok, const char *msg)
{
	static unsigned seq;
	char text[sizeof(((struct reload_report *)0)->msg) + 64];
	int rc;

	mkdir(PMCD_RUN_DIR, 0750);
	snprintf(text, sizeof(text), "%d %u %s %s\n", (int)getpid(), ++seq, ok ? "ok" : "fail",
		 msg);
	rc = pmc_file_replace(PMCD_RELOAD_FILE, text, 0600);
	/* pmcached --reload then waits its 60 s and says no answer came: the
	 * journal says why */
	if (rc)
		pmc_log(LOG_WARNING, "%s: %s (pmcached --reload sees no answer)", PMCD_RELOAD_FILE,
			strerror(-rc));
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct pmcd *d = &daemon_state;
	struct reload_report r = {0};
	struct timespec now;
	char status[160];
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &now);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
		   (unsigned long long)now.tv_sec * 1000000ull + (unsigned long long)now.tv_nsec / 1000);
	rc = reload(d, &r);
	if (rc) {
		pmc_log(LOG_ERR, "reload of %s: not applied: %s", d->conf_path, r.msg);
		reload_publish(0, r.msg);
	} else {
		pmc_log(LOG_NOTICE, "reloaded run-time tunables from %s", d->conf_path);
		reload_publish(1, "reloaded");
	}
	pmcd_status(d, status, sizeof(status));
	sd_notifyf(0, "READY=1\nSTATUS=%s%s%s", rc ? "reload failed: " : "",
		   rc ? r.msg : "", rc ? "" : status);
}

/* pmcached --reload PID: SIGHUP to the daemon, then wait for its result */
static int reload_client(const char *pid_arg)
{
	char before[4096] = "", line[4096];
	char *end;
	long pid = strtol(pid_arg, &end, 10);
	FILE *f;

	if (!*pid_arg || *end || pid <= 0) {
		fprintf(stderr, "pmcached: --reload: expects the daemon's pid, not \"%s\"\n",
			pid_arg);
		return 2;
	}
	f = fopen(PMCD_RELOAD_FILE, "re");
	if (f) {
		if (!fgets(before, sizeof(before), f))
			before[0] = '\0';
		fclose(f);
	}
	if (kill((pid_t)pid, SIGHUP)) {
		fprintf(stderr, "pmcached: --reload: process %ld: %s\n", pid, strerror(errno));
		return 1;
	}
	for (int i = 0; i < PMCD_RELOAD_WAIT_S * 10; i++) {
		long got_pid;
		unsigned seq;
		char state[8];
		int off = 0;

		usleep(100000);
		f = fopen(PMCD_RELOAD_FILE, "re");
		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
		if (!strcmp(line, before) ||
		    sscanf(line, "%ld %u %7s %n", &got_pid, &seq, state, &off) != 3 || got_pid != pid)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(state, "ok")) {
			printf("pmcached: %s\n", line + off);
			return 0;
		}
		fprintf(stderr, "pmcached: reload not applied: %s\n", line + off);
		return 1;
	}
	fprintf(stderr, "pmcached: --reload: no answer from process %ld in %d s\n", pid,
		PMCD_RELOAD_WAIT_S);
	return 1;
}

/* The unit's RuntimeDirectory /run/pmcache is root's (0750): when the
 * socket is in it, the socket's group (control.group, else
 * control.admin_group) must be able to reach it. Other directories are
 * the operator's and stay as they are. */
static int run_dir_share(struct pmcd *d, struct pmc_err *err)
{
	const char *sock = d->conf.control_socket;
	const char *key, *name = sock_group(d, &key);
	char dir[sizeof(d->pid_path)], *slash;
	struct group *g;
	int rc;

	snprintf(dir, sizeof(dir), "%s", sock);
	slash = strrchr(dir, '/');
	if (!name[0] || !slash || slash == dir)
		return 0;
	*slash = '\0';
	g = getgrnam(name);
	if (!g)
		return pmc_err_set(err, ENOENT, "%s: no group named %s", key, name);
	if (!strcmp(dir, PMCD_RUN_DIR)) {
		/* the unit's RuntimeDirectory: the daemon's own */
		if (mkdir(dir, 0750) && errno != EEXIST)
			return pmc_err_set(err, errno, "%s: %s", dir, strerror(errno));
		rc = give_dir(d, dir);
		return rc ? pmc_err_set(err, -rc, "%s: cannot give it to group %s: %s", dir, name,
					strerror(-rc))
			  : 0;
	}
	/* another directory is the operator's (one the daemon made was given
	 * to the group then, take_pidfile): said, not changed, when the
	 * group cannot get through it or a parent */
	while (*dir) {
		struct stat st;

		if (stat(dir, &st) == 0 && !(st.st_mode & S_IXOTH) &&
		    !(st.st_gid == g->gr_gid && (st.st_mode & S_IXGRP))) {
			pmc_log(LOG_WARNING,
				"control socket %s: group %s (%s) cannot reach it: %s is mode "
				"%03o, group %u",
				sock, name, key, dir, (unsigned)(st.st_mode & 0777),
				(unsigned)st.st_gid);
			break;
		}
		*strrchr(dir, '/') = '\0';
	}
	return 0;
}

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct pmcd *d = &daemon_state;
	char status[160];

	pmcd_status(d, status, sizeof(status));
	sd_notifyf(0, "WATCHDOG=1\nSTATUS=%s", status);
}

/* volumes of the cache with dirty data that the configuration does not
 * list (added at run time, or taken out of the file): their disks lack
 * those writes until they are added again */
static void warn_unlisted(struct pmcd *d)
{
	struct pmc_cache_info ci;
	struct pmc_volume_info vi;

	if (!d->cache)
		return;
	pmc_cache_get_info(d->cache, &ci);
	for (uint32_t i = 0; i < ci.max_volumes; i++) {
		unsigned j = 0;

		if (pmc_cache_volume_info(d->cache, i, &vi) ||
		    (vi.counts_valid && !vi.nr_dirty && !vi.nr_lost))
			continue;
		while (j < d->conf.nr_volumes && strcmp(d->conf.volumes[j].name, vi.name))
			j++;
		if (j < d->conf.nr_volumes)
			continue;
		/* after a crash the counts come later (write-back's recount):
		 * the warning cannot wait for them */
		if (!vi.counts_valid)
			pmc_log(LOG_WARNING,
				"volume %s: in the pmem, but the configuration does not list it, "
				"and its dirty blocks are not counted yet: if it has any, its "
				"disk %s lacks those writes until it is served again",
				vi.name, vi.disk);
		else
			pmc_log(LOG_WARNING,
				"volume %s: %" PRIu64 " dirty blocks in the pmem (%" PRIu64 " of "
				"them lost to media errors), but the configuration does not list "
				"it: its disk %s lacks those writes until it is served again",
				vi.name, vi.nr_dirty + vi.nr_lost, vi.nr_lost, vi.disk);
	}
}

static int start(struct pmcd *d, struct pmc_err *err)
{
	struct pmc_config *c = &d->conf;
	char path[PMC_CONFIG_PATH_MAX + 32];
	unsigned served = 0;
	int rc;

	rc = mkdir_p(c->state_dir);
	if (rc < 0)
		return pmc_err_set(err, -rc, "state directory %s: %s", c->state_dir, strerror(-rc));
	{
		/* gone at the next boot: every start is then one without its
		 * file (README, "The systemd unit") */
		if (in_ram(c->state_dir))
			pmc_log(LOG_WARNING,
				"state directory %s is in RAM (tmpfs): its volume state is lost "
				"at every reboot, and each start then drops the cache's clean "
				"copies and serves no volume without the pmem",
				c->state_dir);
	}
	snprintf(path, sizeof(path), "%s/volumes.state", c->state_dir);
	/* the pmem first: its lock names the pmcached that holds it */
	rc = open_cache(d, err);
	if (rc == -EBUSY)
		return rc; /* held by another process: not ours to serve */
	unlock_pmem(d);
	{
		/* the state file decides what runs without the pmem too */
		struct pmc_err serr = {0};
		int src = pmc_state_open(path, &d->state, &serr);

		if (src) {
			pmc_err_clear(err);
			return pmc_err_set(err, src, "%s", serr.msg);
		}
	}
	if (rc) {
		pmc_log(LOG_CRIT, "%s; serving only volumes with no data in the cache, "
				  "pass-through",
			err->msg);
		pmc_err_clear(err);
	} else {
		struct pmc_cache_info ci;
		uint8_t su[16], zero[16] = {0};

		pmc_cache_get_info(d->cache, &ci);
		pmc_state_uuid(d->state, su);
		if (memcmp(su, ci.uuid, 16)) {
			char names[256], was[40], now[40];

			/* the file's volumes recorded dirty have acknowledged
			 * writes in that other cache, which this one does not
			 * have: serving them from their disks would lose them
			 * (and that cache, back later, would write its old data
			 * over the newer) */
			if (memcmp(su, zero, 16) &&
			    pmc_state_dirty_names(d->state, names, sizeof(names))) {
				pmc_uuid_str(su, was, sizeof(was));
				pmc_uuid_str(ci.uuid, now, sizeof(now));
				pmc_log(LOG_NOTICE,
					"if cache %s is lost: remove %s, and leave %s out of the "
					"configuration until added with pmcachectl volume add "
					"--replace-disk --discard-dirty (this cache's copies of them "
					"are older than their disks)",
					was, path, names);
				return pmc_err_set(err, EEXIST,
						   "pmem %s is cache %s; state file %s says cache "
						   "%s holds acknowledged writes of %s: set "
						   "pmem.path to it (if it is lost, remove the "
						   "file)",
						   c->pmem_path, now, path, was, names);
			}
			if (memcmp(su, zero, 16)) {
				pmc_log(LOG_WARNING,
					"state file %s describes another cache, with no volume "
					"dirty in it: rebuilding it (what this cache holds of its "
					"volumes is older than their disks)", path);
			}
			rc = pmc_state_rebuild(d->state, d->cache, err);
			if (rc)
				return rc;
		}
		pmc_log(LOG_INFO,
			"pmem %s: cache of %" PRIu64 " blocks, %s restart (epoch %" PRIu64 "), "
			"store granularity %s",
			c->pmem_path, ci.nr_blocks, ci.was_clean ? "clean" : "crash",
			ci.boot_epoch, ci.gran);
	}
	rc = pmc_engine_create(d->cache, &c->wb, &d->e, err);
	if (rc)
		return rc;
	pmc_engine_set_state(d->e, d->state);
	rc = pmc_ublk_ctrl_open(&d->ctrl, err);
	if (rc)
		return rc;
	rc = pmcd_wb_start(&d->wb, d->e, err);
	if (rc)
		return rc;
	for (unsigned i = 0; i < c->nr_volumes; i++) {
		struct pmc_err verr = {0};

		if (pmcd_volume_add(d, &c->volumes[i], 0, &verr))
			pmc_log(LOG_ERR, "%s", verr.msg);
		else
			served++;
	}
	warn_unlisted(d);
	rc = pmcd_path_start(d, err);
	if (rc)
		return rc;
	if (!served && c->nr_volumes)
		return pmc_err_set(err, EIO, "no volume could be served");
	return 0;
}

static void stop(struct pmcd *d)
{
	int unsynced;

	pmcd_path_stop(d);
	stop_devices(d);
	pmcd_wb_stop(&d->wb);
	unsynced = pmc_engine_destroy(d->e); /* closes the disks; marks clean volumes */
	if (!d->e && d->cache) {
		/* refused before the engine: nothing of this run to record,
		 * and a crash before it stays a crash (no volume was synced) */
		struct pmc_cache_info ci;

		pmc_cache_get_info(d->cache, &ci);
		unsynced = !ci.was_clean;
	}
	d->e = NULL;
	pmc_ublk_ctrl_close(d->ctrl);
	if (d->cache && unsynced) {
		pmc_log(LOG_ERR, "a disk could not be synced (or, after an unclean stop, a volume of "
				 "the cache was not served): the cache is left as after a crash, so "
				 "that read misses are cached only after a disk sync succeeds");
		pmc_cache_abandon(d->cache);
	} else if (d->cache) {
		pmc_cache_close(d->cache); /* records a clean shutdown */
	}
	pmc_pmem_close(d->pm);
	pmc_state_close(d->state);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"check-config", no_argument, NULL, 'C'},
		{"reload", required_argument, NULL, 'R'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	struct pmcd *d = &daemon_state;
	const char *conf = PMC_CONFIG_DEFAULT_PATH;
	struct pmc_err err = {0};
	const char *reload_pid = NULL;
	int check = 0, opt, rc;
	ev_signal sig_term, sig_int, sig_hup;
	ev_timer watchdog;
	uint64_t wd_usec = 0;

	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf = optarg;
			break;
		case 'C':
			check = 1;
			break;
		case 'R':
			reload_pid = optarg;
			break;
		case 'V':
			printf("pmcached %s\n", PMC_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->fabric_lock, NULL);
	snprintf(d->conf_path, sizeof(d->conf_path), "%s", conf);
	if (reload_pid)
		return reload_client(reload_pid);
	rc = pmc_config_load(conf, &d->conf, &err);
	if (!rc)
		rc = check_edited(conf, &d->conf, &err);
	if (!rc)
		rc = check_groups(conf, &d->conf, &err);
	if (rc) {
		fprintf(stderr, "pmcached: %s\n", err.msg);
		return 1;
	}
	if (check) {
		printf("pmcached: %s: configuration is valid (%u volumes)\n", conf,
		       d->conf.nr_volumes);
		return 0;
	}
	pmc_log_set_level(d->conf.log_level);
	secrets_check(conf, &d->conf);
	rc = take_pidfile(d, &err);
	if (rc) {
		fprintf(stderr, "pmcached: %s\n", err.msg);
		return 1;
	}
	pmc_log(LOG_INFO, "pmcached %s starting (pid %d, %s)", PMC_VERSION, (int)getpid(), conf);
	d->start_ns = pmc_mono_ns();
	d->max_io_start = d->conf.wb.max_io_bytes;
	d->loop = ev_default_loop(0);
	signal(SIGPIPE, SIG_IGN);
	/* before start(), which may take long (NVMe-oF connects, takeovers):
	 * a SIGTERM or SIGHUP meanwhile is kept for the loop (a stop or a
	 * reload once serving), not the default action's death with devices
	 * made */
	ev_signal_init(&sig_term, on_stop, SIGTERM);
	ev_signal_init(&sig_int, on_stop, SIGINT);
	ev_signal_init(&sig_hup, on_hup, SIGHUP);
	ev_signal_start(d->loop, &sig_term);
	ev_signal_start(d->loop, &sig_int);
	ev_signal_start(d->loop, &sig_hup);
	lock_memory();
	rc = start(d, &err);
	if (rc) {
		pmc_log(LOG_ERR, "%s", err.msg);
		sd_notifyf(0, "STATUS=failed: %s", err.msg);
		stop(d);
		pmc_pidfile_release(d->pid_path, d->pid_fd);
		return 1;
	}
	rc = run_dir_share(d, &err);
	if (!rc)
		rc = pmcd_ctlsrv_start(d, &err);
	if (rc) {
		pmc_log(LOG_ERR, "%s", err.msg);
		stop(d);
		pmc_pidfile_release(d->pid_path, d->pid_fd);
		return 1;
	}
	if (sd_watchdog_enabled(0, &wd_usec) > 0) {
		ev_timer_init(&watchdog, on_watchdog, 0, (double)wd_usec / 2e6);
		ev_timer_start(d->loop, &watchdog);
	}
	{
		char status[160];

		pmcd_status(d, status, sizeof(status));
		sd_notifyf(0, "READY=1\nSTATUS=%s", status);
		pmc_log(LOG_NOTICE, "ready: %s", status);
	}
	ev_run(d->loop, 0);
	sd_notify(0, "STOPPING=1");
	pmcd_ctlsrv_stop(d);
	stop(d);
	pmc_pidfile_release(d->pid_path, d->pid_fd);
	pmc_log(LOG_NOTICE, "stopped cleanly");
	return 0;
}
