/* pmcached.c - the pmcache daemon: maps the pmem, opens (or formats) the
 * cache, attaches the configured volumes to the engine and exports each as
 * a ublk block device, runs write-back, and serves the control socket.
 *
 * Threads: the main thread runs the libev loop (signals, control socket,
 * timers) and every control operation; one thread per ublk queue serves
 * I/O (dev.c); one thread runs write-back (wb.c).
 *
 * Start-up when the pmem cannot be mapped: volumes the state file records
 * as clean are served pass-through; the others are refused by name, and
 * the daemon exits non-zero if none can run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "ctlsrv.h"
#include "diskid.h"
#include "lock.h"
#include "log.h"
#include "pmcached.h"

static struct pmcd daemon_state;

static void usage(FILE *f)
{
	fprintf(f, "usage: pmcached [-c FILE] [--check-config] [--version]\n"
		   "  -c, --config FILE   configuration (default " PMC_CONFIG_DEFAULT_PATH ")\n"
		   "  --check-config      validate the configuration and exit\n");
}

static int mkdir_p(const char *dir)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0755) && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int open_cache(struct pmcd *d, struct pmc_err *err)
{
	struct pmc_config *c = &d->conf;
	struct stat st;
	uint64_t create = 0;
	int rc;

	if (stat(c->pmem_path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0))
		create = c->pmem_size;
	rc = pmc_pmem_open(c->pmem_path, create, &d->pm, err);
	if (rc)
		return rc;
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
		pmc_log(LOG_NOTICE, "pmem %s: blank: formatting a new cache", c->pmem_path);
		pmc_err_clear(err);
		rc = pmc_cache_format(d->pm, NULL, err);
		if (!rc)
			rc = pmc_cache_open(d->pm, 0, &d->cache, err);
	}
	if (rc) {
		pmc_pmem_close(d->pm);
		d->pm = NULL;
		return rc;
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
		mkdir_p(dir);
	}
	return pmc_pidfile_take(d->pid_path, &d->pid_fd, NULL, err);
}

static int ublk_id_for(const struct pmc_config_volume *vc, uint32_t slot)
{
	return vc->ublk_id >= 0 ? vc->ublk_id : (int)slot;
}

const char *pmcd_volume_disk_id(struct pmcd *d, struct pmcd_volume *v)
{
	struct pmc_volume_info vi;

	if (!d->cache || pmc_cache_volume_info(d->cache, v->vol, &vi) || vi.id_state != 1)
		return "";
	snprintf(v->disk_id, sizeof(v->disk_id), "%s", vi.disk_id.text);
	return v->disk_id;
}

int pmcd_volume_add(struct pmcd *d, const struct pmc_config_volume *vc, unsigned flags,
		    struct pmc_err *err)
{
	struct pmcd_volume *v = NULL;
	struct pmcd_dev_conf dc;
	struct pmc_disk *disk;
	int rc;

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
	rc = pmc_disk_open(vc->disk, 0, &disk, err);
	if (rc)
		return rc;
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
	/* acknowledged writes of write-back and write-through are durable: no
	 * volatile cache to flush; the other modes write the disk directly */
	dc.volatile_cache = vc->vc.mode == PMC_MODE_WRITE_AROUND ||
			    vc->vc.mode == PMC_MODE_PASS_THROUGH || !d->cache;
	dc.discard = 1;
	rc = pmcd_dev_start(d->ctrl, d->e, &dc, &v->dev, err);
	if (rc) {
		struct pmc_err ignore = {0};

		pmc_engine_detach(d->e, v->vol, 0, &ignore);
		return rc;
	}
	v->conf = *vc;
	v->used = 1;
	return 0;
}

struct pmcd_volume *pmcd_volume_find(struct pmcd *d, const char *name)
{
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++)
		if (d->vols[i].used && !strcmp(d->vols[i].conf.name, name))
			return &d->vols[i];
	return NULL;
}

/* does any process hold path open? (a plain open is invisible to O_EXCL) */
static int held_open(const char *path)
{
	struct dirent *p, *f;
	DIR *proc = opendir("/proc");
	int found = 0;

	if (!proc)
		return 0;
	while (!found && (p = readdir(proc))) {
		char dir[300], link[600], target[256];
		DIR *fds;
		ssize_t n;

		if (p->d_name[0] < '0' || p->d_name[0] > '9' || atoi(p->d_name) == getpid())
			continue;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", p->d_name);
		fds = opendir(dir);
		if (!fds)
			continue;
		while (!found && (f = readdir(fds))) {
			snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
			n = readlink(link, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = '\0';
				found = !strcmp(target, path);
			}
		}
		closedir(fds);
	}
	closedir(proc);
	return found;
}

/* is /dev/ublkbN in use: mounted or held (O_EXCL tells), or open anywhere? */
static int bdev_busy(uint32_t dev_id)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/ublkb%u", dev_id);
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0)
		return errno == EBUSY;
	close(fd);
	return held_open(path);
}

int pmcd_volume_remove(struct pmcd *d, const char *name, int force, struct pmc_err *err)
{
	struct pmcd_volume *v = pmcd_volume_find(d, name);
	int rc;

	if (!v)
		return pmc_err_set(err, ENOENT, "volume %s: not served", name);
	if (!force && bdev_busy(v->dev->dev_id))
		return pmc_err_set(err, EBUSY,
				   "volume %s: /dev/ublkb%u is in use (mounted or held open); "
				   "unmount it or force",
				   name, v->dev->dev_id);
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
		if (rc) {
			pmc_engine_set_mode(d->e, v->vol, v->conf.vc.mode, NULL);
			return rc;
		}
	}
	pmcd_dev_stop(v->dev);
	v->dev = NULL;
	rc = pmc_engine_detach(d->e, v->vol, 1, err);
	v->used = 0;
	if (rc)
		return rc;
	pmc_log(LOG_INFO, "volume %s: removed; all its data is on %s", name, v->conf.disk);
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
	snprintf(buf, len, "%u volumes; cache %" PRIu64 " MiB, %" PRIu64 " dirty, %" PRIu64
		 " clean blocks",
		 n, ci.nr_blocks * ci.block_size >> 20, ci.nr_dirty, ci.nr_clean);
}

void pmcd_shutdown(struct pmcd *d)
{
	d->stopping = 1;
	ev_break(d->loop, EVBREAK_ALL);
}

static void on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
	pmc_log(LOG_NOTICE, "signal %d: stopping", w->signum);
	pmcd_shutdown(&daemon_state);
}

/* HUP: re-read the file and apply what can change at run time */
static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct pmcd *d = &daemon_state;
	struct pmc_config *nc = calloc(1, sizeof(*nc));
	struct pmc_err err = {0};

	if (!nc)
		return;
	if (pmc_config_load(d->conf_path, nc, &err)) {
		pmc_log(LOG_ERR, "reload: %s; keeping the running configuration", err.msg);
		free(nc);
		return;
	}
	pmc_engine_set_wb_conf(d->e, &nc->wb);
	pmc_log_set_level(nc->log_level);
	for (unsigned i = 0; i < nc->nr_volumes; i++) {
		struct pmcd_volume *v = pmcd_volume_find(d, nc->volumes[i].name);

		if (!v)
			continue;
		if (pmc_engine_set_volume_conf(d->e, v->vol, &nc->volumes[i].vc, &err))
			pmc_log(LOG_ERR, "reload: %s", err.msg);
		else
			v->conf.vc = nc->volumes[i].vc;
	}
	d->conf.wb = nc->wb;
	d->conf.log_level = nc->log_level;
	pmc_log(LOG_NOTICE, "reloaded run-time tunables from %s", d->conf_path);
	pmc_config_free(nc);
	free(nc);
}

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct pmcd *d = &daemon_state;
	char status[160];

	pmcd_status(d, status, sizeof(status));
	sd_notifyf(0, "WATCHDOG=1\nSTATUS=%s", status);
}

static int start(struct pmcd *d, struct pmc_err *err)
{
	struct pmc_config *c = &d->conf;
	char path[PMC_CONFIG_PATH_MAX + 32];
	unsigned served = 0;
	int rc;

	rc = mkdir_p(c->state_dir);
	if (rc)
		return pmc_err_set(err, -rc, "state directory %s: %s", c->state_dir, strerror(-rc));
	snprintf(path, sizeof(path), "%s/volumes.state", c->state_dir);
	rc = pmc_state_open(path, &d->state, err);
	if (rc)
		return rc;
	rc = open_cache(d, err);
	if (rc == -EBUSY)
		return rc; /* held by another process: not ours to serve */
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
			if (memcmp(su, zero, 16))
				pmc_log(LOG_WARNING,
					"state file %s describes another cache: rebuilding it", path);
			rc = pmc_state_set_uuid(d->state, ci.uuid, err);
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
	if (!served && c->nr_volumes)
		return pmc_err_set(err, EIO, "no volume could be served");
	return 0;
}

static void stop(struct pmcd *d)
{
	for (unsigned i = 0; i < PMCD_MAX_VOLUMES; i++) {
		if (d->vols[i].used) {
			pmcd_dev_stop(d->vols[i].dev);
			d->vols[i].dev = NULL;
		}
	}
	pmcd_wb_stop(&d->wb);
	pmc_engine_destroy(d->e); /* closes the disks; marks clean volumes */
	d->e = NULL;
	pmc_ublk_ctrl_close(d->ctrl);
	if (d->cache)
		pmc_cache_close(d->cache); /* records a clean shutdown */
	pmc_pmem_close(d->pm);
	pmc_state_close(d->state);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"check-config", no_argument, NULL, 'C'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	struct pmcd *d = &daemon_state;
	const char *conf = PMC_CONFIG_DEFAULT_PATH;
	struct pmc_err err = {0};
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
	snprintf(d->conf_path, sizeof(d->conf_path), "%s", conf);
	rc = pmc_config_load(conf, &d->conf, &err);
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
	rc = take_pidfile(d, &err);
	if (rc) {
		fprintf(stderr, "pmcached: %s\n", err.msg);
		return 1;
	}
	d->start_ns = pmc_mono_ns();
	d->max_io_start = d->conf.wb.max_io_bytes;
	d->loop = ev_default_loop(0);
	signal(SIGPIPE, SIG_IGN);
	rc = start(d, &err);
	if (rc) {
		pmc_log(LOG_ERR, "%s", err.msg);
		sd_notifyf(0, "STATUS=failed: %s", err.msg);
		stop(d);
		pmc_pidfile_release(d->pid_path, d->pid_fd);
		return 1;
	}
	rc = pmcd_ctlsrv_start(d, &err);
	if (rc) {
		pmc_log(LOG_ERR, "%s", err.msg);
		stop(d);
		pmc_pidfile_release(d->pid_path, d->pid_fd);
		return 1;
	}
	ev_signal_init(&sig_term, on_stop, SIGTERM);
	ev_signal_init(&sig_int, on_stop, SIGINT);
	ev_signal_init(&sig_hup, on_hup, SIGHUP);
	ev_signal_start(d->loop, &sig_term);
	ev_signal_start(d->loop, &sig_int);
	ev_signal_start(d->loop, &sig_hup);
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
