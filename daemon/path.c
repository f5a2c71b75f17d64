/* path.c - see path.h.
 *
 * Once a second (or when kicked) the thread looks up each NVMe-oF volume's
 * namespace in the kernel's topology (lib/nvmf.c) and compares it with what
 * the volume's path fields say:
 *   - the controller is there but not live (the kernel is reconnecting):
 *     the state is shown; I/O that reaches the disk fails after
 *     disk.fast_io_fail_tmo and the engine keeps the data dirty with its
 *     sticky error and back-off, serves hits, absorbs writes;
 *   - it is live again: if the namespace's block device is another one
 *     than the disk's fd is on, the new one is opened O_EXCL, its identity
 *     compared with the one recorded in the volume slot, and dup2()'ed
 *     onto the disk's fd (every ring sees the new device from its next
 *     submission on; I/O in flight keeps its old file). Then the volume's
 *     sticky error is cleared, which also ends its back-off: write-back
 *     resumes at once; a live controller that shows no block device of the
 *     namespace (removed or disabled at the target) is "no-namespace", the
 *     error stays;
 *   - there is no controller any more (ctrl_loss_tmo ran out, or someone
 *     disconnected it): "lost"; the thread reconnects it, at once and then
 *     with a back-off doubling from 1 s to 60 s, or at once when kicked.
 * A volume whose namespace could not be connected when it was added runs
 * on a placeholder disk (lib/placeholder.h, pmcached.c) and starts "lost"
 * with no device: once its namespace shows a block device, the placeholder
 * checks its size and identity and takes it as its disk, as above; a live
 * controller without the namespace is "no-namespace". Until then the
 * volume's sticky error stays, and is cleared with the swap.
 *
 * Locking: the volume's fields and its disk's fd change under d->lock, so a
 * volume being removed (which clears `used` under the same lock before it
 * detaches and closes the disk) is never rebound half-way. Connecting and
 * scanning run without it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "diskid.h"
#include "log.h"
#include "path.h"
#include "pmcached.h"
#include "nvmf.h"
#include "placeholder.h"

#define PATH_BACKOFF_MAX_MS 60000u
#define PATH_CONNECT_WAIT_MS 5000u

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* a block device that may be a volume's namespace, opened and identified
 * without d->lock: an NVMe Identify of a target that stalls now waits for
 * the admin timeout (60 s), which the control loop and the watchdog must
 * not wait for */
struct probe {
	int fd; /* -1: not opened */
	uint64_t size;
	struct pmc_disk_ids ids;
	int rc; /* of reading size and identity */
	struct pmc_err err;
};

static void probe_open(const char *name, const char *dev, struct probe *pr)
{
	memset(pr, 0, sizeof(*pr));
	pr->fd = open(dev, O_RDWR | O_DIRECT | O_CLOEXEC | O_EXCL);
	if (pr->fd < 0) {
		pr->rc = pmc_err_set(&pr->err, errno, "volume %s: %s: cannot open: %s", name, dev,
				     strerror(errno));
		return;
	}
	if (ioctl(pr->fd, BLKGETSIZE64, &pr->size) != 0)
		pr->size = 0;
	pmc_disk_ids_get(pr->fd, pr->size, &pr->ids);
	pr->rc = pr->ids.rc;
	pr->err = pr->ids.err;
}

static void probe_close(struct probe *pr)
{
	if (pr->fd >= 0)
		close(pr->fd);
	pr->fd = -1;
}

/* put v's disk on dev if dev, probed as pr, is its namespace; d->lock held */
static int rebind(struct pmcd *d, struct pmcd_volume *v, const char *dev, const struct probe *pr,
		  struct pmc_err *err)
{
	const char *want = pmcd_volume_disk_id(d, v);
	int fd = pr->fd, rc;

	if (pr->rc) {
		*err = pr->err;
		return pr->rc;
	}
	if (pmc_placeholder_is(v->disk)) {
		/* served without its disk since it was added: the placeholder
		 * checks size and identity against the volume slot */
		struct pmc_cache_info ci;
		int first = !pmc_placeholder_swapped(v->disk);

		pmc_cache_get_info(d->cache, &ci);
		rc = pmc_placeholder_swap_id(v->disk, fd, dev, ci.block_size, &pr->ids.id, pr->ids.has_legacy ? &pr->ids.legacy : NULL,
					     err);
		if (rc == 0)
			pmc_log(LOG_NOTICE, "volume %s: %s %s (identity %s matches)", v->conf.name,
				first ? "its disk is in: the namespace is" : "its namespace is now",
				dev, pmc_placeholder_id(v->disk));
		goto done;
	}
	if (pr->size != v->disk->size)
		return pmc_err_set(err, ENOSPC,
				   "volume %s: %s: %" PRIu64 " bytes, the disk had %" PRIu64 ": not used",
				   v->conf.name, dev, pr->size, v->disk->size);
	if (!want[0] || !pmc_disk_id_match(&pr->ids.id, pr->ids.has_legacy ? &pr->ids.legacy : NULL, want))
		return pmc_err_set(err, EXDEV,
				   "volume %s: %s is disk %s, the cache recorded %s: not used",
				   v->conf.name, dev, pr->ids.id.text, want[0] ? want : "(none)");
	if (dup2(fd, v->disk->fd) < 0)
		return pmc_err_set(err, errno, "volume %s: dup2: %s", v->conf.name,
				   strerror(errno));
	pmc_log(LOG_NOTICE, "volume %s: its namespace is now %s (identity %s matches)",
		v->conf.name, dev, pr->ids.id.text);
	rc = 0;
done:
	if (rc == 0)
		snprintf(v->path_dev, sizeof(v->path_dev), "%s", dev);
	return rc;
}

/* slot v still holds the volume check_volume() copied (conf, disk) before
 * an unlocked stretch: a remove and an add may have put another volume
 * in it since; d->lock held */
static int same_volume(const struct pmcd_volume *v, const struct pmc_config_volume *conf,
		       uint64_t gen)
{
	/* not the disk's address: a remove and an add of the same name may
	 * get a new disk at the old one's address */
	return v->used && v->gen == gen && !strcmp(v->conf.name, conf->name);
}

/* what the scan found of v's path (p; pr: p's device probed when it is not
 * the one the disk is on), under d->lock */
static void path_update(struct pmcd *d, struct pmcd_volume *v,
			const struct pmc_config_volume *conf, uint64_t gen,
			const struct pmc_nvmf_path *p, const struct probe *pr)
{
	struct pmc_err err = {0};
	int live = !strcmp(p->state, "live");

	pthread_mutex_lock(&d->lock);
	if (!same_volume(v, conf, gen)) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	if (strcmp(v->path_state, p->state) && strcmp(v->path_state, "wrong-disk"))
		pmc_log(live ? LOG_NOTICE : LOG_WARNING, "volume %s: controller %s %s -> %s",
			conf->name, p->ctrl, v->path_state[0] ? v->path_state : "-", p->state);
	snprintf(v->path_ctrl, sizeof(v->path_ctrl), "%s", p->ctrl);
	snprintf(v->path_addr, sizeof(v->path_addr), "%s", p->address);
	if (!live) {
		snprintf(v->path_state, sizeof(v->path_state), "%s", p->state);
		v->path_down = 1;
		pthread_mutex_unlock(&d->lock);
		return;
	}
	if (!p->dev[0]) {
		/* live, but the namespace has no block device (yet, or any
		 * more: removed or disabled at the target): not the path back,
		 * the volume's error and back-off stay */
		if (strcmp(v->path_state, "no-namespace"))
			pmc_log(LOG_WARNING,
				"volume %s: controller %s is live but shows no namespace of the "
				"volume: %s",
				conf->name, p->ctrl,
				pmc_placeholder_is(v->disk) && !pmc_placeholder_swapped(v->disk)
				    ? "still served without its disk"
				    : "its dirty data stays in the pmem until the namespace is back");
		snprintf(v->path_state, sizeof(v->path_state), "no-namespace");
		v->path_down = 1;
		pthread_mutex_unlock(&d->lock);
		return;
	}
	if (p->dev[0] && strcmp(p->dev, v->path_dev)) {
		if (pr->fd < 0 && !pr->rc) {
			/* its device changed since it was probed: next time */
			pthread_mutex_unlock(&d->lock);
			return;
		}
		if (rebind(d, v, p->dev, pr, &err)) {
			if (strcmp(v->path_state, "wrong-disk"))
				pmc_log(LOG_ERR, "%s", err.msg);
			snprintf(v->path_state, sizeof(v->path_state), "wrong-disk");
			v->path_down = 1;
			pthread_mutex_unlock(&d->lock);
			return;
		}
	}
	snprintf(v->path_state, sizeof(v->path_state), "live");
	if (v->path_down) {
		v->path_down = 0;
		pmc_engine_clear_error(d->e, v->vol);
		pmc_log(LOG_NOTICE, "volume %s: path back (%s on %s): write-back resumes",
			conf->name, v->path_dev, p->ctrl);
	}
	pthread_mutex_unlock(&d->lock);
}

static void check_volume_fabric(struct pmcd *d, unsigned i, int kicked)
{
	struct pmcd_volume *v = &d->vols[i];
	struct pmc_config_volume conf;
	uint64_t gen;
	struct pmc_nvmf_path p;
	struct pmc_err err = {0};
	struct probe pr = {.fd = -1};
	char path_dev[sizeof(v->path_dev)];
	uint64_t now = mono_ns();
	int rc;

	pthread_mutex_lock(&d->lock);
	if (!v->used || !pmc_config_volume_is_nvmf(&v->conf) || !v->disk) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	conf = v->conf;
	gen = v->gen;
	snprintf(path_dev, sizeof(path_dev), "%s", v->path_dev);
	pthread_mutex_unlock(&d->lock);

	rc = pmc_nvmf_find(&conf.nvmf, &p, &err);
	if (rc == -ENOENT) {
		int attempt;

		pthread_mutex_lock(&d->lock);
		if (!same_volume(v, &conf, gen)) {
			pthread_mutex_unlock(&d->lock);
			return;
		}
		if (strcmp(v->path_state, "lost")) {
			pmc_log(LOG_WARNING,
				"volume %s: controller %s is gone (the kernel stopped "
				"reconnecting): dirty data stays in the pmem; reconnecting",
				conf.name, v->path_ctrl);
			snprintf(v->path_state, sizeof(v->path_state), "lost");
			v->path_down = 1;
			v->path_retry_ns = now;
			v->path_backoff_ms = 0;
		}
		attempt = kicked || now >= v->path_retry_ns;
		pthread_mutex_unlock(&d->lock);
		if (!attempt)
			return;
		rc = pmc_nvmf_connect(&conf.nvmf, conf.name, PATH_CONNECT_WAIT_MS, &p, &err);
		pthread_mutex_lock(&d->lock);
		if (!same_volume(v, &conf, gen)) {
			/* removed (or added again) meanwhile: a controller this
			 * connect made belongs to no volume */
			pthread_mutex_unlock(&d->lock);
			if (rc == 0 && p.made[0])
				pmcd_nvmf_release(d, p.made, conf.name, "removed while reconnecting");
			return;
		}
		if (rc) {
			uint32_t b = v->path_backoff_ms;

			b = b ? (b * 2 > PATH_BACKOFF_MAX_MS ? PATH_BACKOFF_MAX_MS : b * 2)
			      : PMCD_PATH_BACKOFF_MIN_MS;
			v->path_backoff_ms = b;
			v->path_retry_ns = mono_ns() + (uint64_t)b * 1000000ull;
			pmc_log(LOG_WARNING, "%s; next attempt in %u s", err.msg, b / 1000);
			pthread_mutex_unlock(&d->lock);
			return;
		}
		v->path_reconnects++;
		v->path_backoff_ms = 0;
		pmc_log(LOG_NOTICE, "volume %s: reconnected: controller %s, %s", conf.name, p.ctrl,
			p.dev);
		pthread_mutex_unlock(&d->lock);
	} else if (rc) {
		pmc_log(LOG_WARNING, "volume %s: %s", conf.name, err.msg);
		return;
	}

	/* the device it comes back on is opened and identified unlocked */
	if (!strcmp(p.state, "live") && p.dev[0] && strcmp(p.dev, path_dev))
		probe_open(conf.name, p.dev, &pr);
	path_update(d, v, &conf, gen, &p, &pr);
	probe_close(&pr);
}

/* one volume's step under fabric_lock: what it connects or finds cannot
 * be disconnected by a refused add meanwhile, nor what an add claims by
 * its release of a controller made for a volume gone (pmcd_nvmf_release) */
static void check_volume(struct pmcd *d, unsigned i, int kicked)
{
	pthread_mutex_lock(&d->fabric_lock);
	check_volume_fabric(d, i, kicked);
	pthread_mutex_unlock(&d->fabric_lock);
}

static void *monitor_main(void *arg)
{
	struct pmcd *d = arg;
	struct pmcd_path *m = &d->path;

	while (!atomic_load(&m->stop)) {
		int kicked = atomic_exchange(&m->kick, 0);
		struct timespec until;

		for (unsigned i = 0; i < PMCD_MAX_VOLUMES && !atomic_load(&m->stop); i++)
			check_volume(d, i, kicked);
		clock_gettime(CLOCK_MONOTONIC, &until); /* the cond's clock */
		until.tv_sec += 1;
		pthread_mutex_lock(&m->lock);
		while (!atomic_load(&m->stop) && !atomic_load(&m->kick))
			if (pthread_cond_timedwait(&m->cond, &m->lock, &until) == ETIMEDOUT)
				break;
		pthread_mutex_unlock(&m->lock);
	}
	return NULL;
}

int pmcd_path_start(struct pmcd *d, struct pmc_err *err)
{
	struct pmcd_path *m = &d->path;
	int rc;

	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	{
		/* the wait's deadline on the monotonic clock: a wall clock set
		 * back (NTP at boot) must not stop reconnects for as long */
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&m->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	rc = pthread_create(&m->thread, NULL, monitor_main, d);
	if (rc)
		return pmc_err_set(err, rc, "NVMe-oF path monitor: %s", strerror(rc));
	m->started = 1;
	pthread_setname_np(m->thread, "pmc-path");
	return 0;
}

void pmcd_path_stop(struct pmcd *d)
{
	struct pmcd_path *m = &d->path;

	if (!m->started)
		return;
	pthread_mutex_lock(&m->lock);
	atomic_store(&m->stop, 1);
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->thread, NULL);
	m->started = 0;
}

void pmcd_path_kick(struct pmcd *d)
{
	struct pmcd_path *m = &d->path;

	if (!m->started)
		return;
	pthread_mutex_lock(&m->lock);
	atomic_store(&m->kick, 1);
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}
