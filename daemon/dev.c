/* dev.c - a ublk device over one volume of the engine.
 *
 * Queue threads: each owns a pmc_queue whose ring also carries the ublk
 * FETCH / COMMIT_AND_FETCH commands of its tags. A fetched tag becomes an
 * engine request on the tag's buffer; its completion commits the result and
 * fetches the next request in the same command. A request never blocks its
 * thread on disk I/O: the engine completes it from the ring. Commits go to
 * the kernel with the loop's next io_uring_enter, all of them in one call.
 *
 * Where the driver has UBLK_F_USER_COPY (Linux >= 6.5) the tags have no
 * buffers: the engine reads a write's data from /dev/ublkcN straight into
 * pmem and writes a read hit there straight from pmem (PMC_REQ_UCOPY).
 * PMCACHED_NO_USER_COPY=1 in the environment keeps the tag buffers (tests
 * of that path on a newer kernel). A recovered device keeps the flags it
 * was made with.
 *
 * Surviving a crash of the daemon: devices are created with
 * UBLK_F_USER_RECOVERY (and _REISSUE), so when this process dies the driver
 * quiesces /dev/ublkbN instead of removing it, and requests in flight are
 * reissued to the next daemon. Start-up therefore first asks for the
 * configured device id: a quiesced device is taken over with
 * START_USER_RECOVERY, fresh fetches on every tag, END_USER_RECOVERY.
 *
 * Leaving a device for the next daemon (pmcd_dev_leave, the restart and
 * live-upgrade path): the queue threads stop taking requests, finish those
 * the engine holds, commit them, and close their rings without STOP_DEV or
 * DEL_DEV. The driver then treats the device as it does after a crash: it
 * quiesces /dev/ublkbN, requeues what it had dispatched to us and not got
 * back (UBLK_F_USER_RECOVERY_REISSUE), and waits for the next daemon. The
 * file system on it sees a pause, never an error.
 *
 * Locking: a queue's state belongs to its thread; the main thread only
 * starts, stops and joins them (ready/stop/leave/failed are atomics).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"
#include "lock.h"
#include "log.h"
#include "ring.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

static int use_ioctl(struct pmcd_dev *d)
{
	return d->ctrl->use_ioctl;
}

/* the tag's buffer, or NULL with user copy */
static void *tag_buf(struct pmcd_queue *uq, uint16_t tag)
{
	return uq->bufs ? uq->bufs + (size_t)tag * uq->dev->conf.max_io : NULL;
}

static void commit(struct pmcd_queue *uq, uint16_t tag, int32_t res)
{
	struct pmcd_dev *d = uq->dev;
	int rc = pmc_ublk_queue_cmd(pmc_queue_ring(uq->q), d->cdev_fd, use_ioctl(d), 1, uq->q_id,
				    tag, res, tag_buf(uq, tag));

	if (rc)
		pmc_log(LOG_CRIT, "%s: queue %u tag %u: cannot commit: %s", d->name, uq->q_id, tag,
			strerror(-rc));
}

static void req_done(struct pmc_req *req, int res)
{
	struct pmcd_queue *uq = req->priv;
	uint16_t tag = (uint16_t)(req - uq->reqs);

	uq->busy[tag] = 0;
	if (res == 0 && (req->op == PMC_REQ_READ || req->op == PMC_REQ_WRITE))
		res = (int)req->len;
	commit(uq, tag, res);
}

/* a request from the driver on tag: hand it to the engine */
static void handle(struct pmcd_queue *uq, uint16_t tag)
{
	struct pmcd_dev *d = uq->dev;
	const struct ublksrv_io_desc *iod = &uq->iods[tag];
	struct pmc_req *req = &uq->reqs[tag];
	struct pmc_err err = {0};
	int rc;

	memset(req, 0, sizeof(*req));
	switch (ublksrv_get_op(iod)) {
	case UBLK_IO_OP_READ:
		req->op = PMC_REQ_READ;
		break;
	case UBLK_IO_OP_WRITE:
		req->op = PMC_REQ_WRITE;
		break;
	case UBLK_IO_OP_FLUSH:
		req->op = PMC_REQ_FLUSH;
		break;
	case UBLK_IO_OP_DISCARD:
		req->op = PMC_REQ_DISCARD;
		break;
	default:
		commit(uq, tag, -EOPNOTSUPP);
		return;
	}
	req->vol = d->conf.vol;
	/* a sector past 2^55 would wrap into the volume (the engine checks
	 * the byte range): refused as past the end. Not a flush's: it has
	 * no range, and the block layer leaves its sector at -1 */
	if (req->op != PMC_REQ_FLUSH && iod->start_sector > UINT64_MAX >> 9) {
		commit(uq, tag, -EINVAL);
		return;
	}
	req->off = iod->start_sector << 9;
	req->len = (uint64_t)iod->nr_sectors << 9;
	req->buf = tag_buf(uq, tag);
	req->flags = (ublksrv_get_flags(iod) & (UBLK_IO_F_FUA >> 8)) ? PMC_REQ_FUA : 0;
	if (d->user_copy) {
		req->flags |= PMC_REQ_UCOPY;
		req->ucopy_fd = d->cdev_fd;
		req->ucopy_off = pmc_ublk_user_copy_pos(uq->q_id, tag);
	}
	req->cb = req_done;
	req->priv = uq;
	uq->busy[tag] = 1;
	rc = pmc_queue_submit(uq->q, req, &err);
	if (rc) {
		static struct pmc_ratelimit rl;

		uq->busy[tag] = 0;
		pmc_log_ratelimited(&rl, LOG_ERR, "%s: %s", d->name, err.msg);
		commit(uq, tag, rc);
	}
}

/* completion of a ublk command on this queue's ring */
static void ublk_cqe(void *arg, uint64_t user_data, int res)
{
	struct pmcd_queue *uq = arg;
	uint16_t tag = (uint16_t)(user_data >> 1);

	uq->fetched--;
	if (res == UBLK_IO_RES_OK && uq->hold_new) {
		/* leaving: the driver gives this request to the next daemon */
		uq->left++;
		return;
	}
	if (res == UBLK_IO_RES_OK) {
		uq->fetched++; /* the commit that answers it fetches again */
		handle(uq, tag);
		return;
	}
	/* -ENODEV: the device is going away; anything else is a driver error */
	uq->aborted++;
	if (res != UBLK_IO_RES_ABORT)
		pmc_log(LOG_ERR, "%s: queue %u tag %u: ublk command failed: %s", uq->dev->name,
			uq->q_id, tag, strerror(-res));
}

/*
 * Leaving: from when on are new requests left to the driver? At once when
 * the device was made with UBLK_F_USER_RECOVERY_REISSUE (the driver hands
 * them to the next daemon). Without it the driver would fail them, so they
 * are served until the queue is idle for a moment, for PMCD_LEAVE_SERVE_NS
 * at most; what arrives after that fails with EIO.
 */
#define PMCD_LEAVE_SERVE_NS (5 * 1000000000ull)

static void leave_hold_new(struct pmcd_queue *uq, uint64_t *since_ns)
{
	struct pmcd_dev *d = uq->dev;

	if (d->info.flags & UBLK_F_USER_RECOVERY_REISSUE) {
		uq->hold_new = 1;
		return;
	}
	if (!*since_ns)
		*since_ns = pmc_mono_ns();
	else if (pmc_mono_ns() - *since_ns > PMCD_LEAVE_SERVE_NS) {
		uq->hold_new = 1;
		pmc_log(LOG_WARNING,
			"%s: queue %u: no idle moment in %llu s and the device cannot reissue: "
			"requests from now on fail until the next daemon starts",
			d->name, uq->q_id, PMCD_LEAVE_SERVE_NS / 1000000000ull);
	}
}

static void *queue_main(void *arg)
{
	struct pmcd_queue *uq = arg;
	struct pmcd_dev *d = uq->dev;
	unsigned depth = d->conf.depth;
	uint64_t leave_ns = 0;
	int rc;

	prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);
	for (uint16_t t = 0; t < depth; t++) {
		rc = pmc_ublk_queue_cmd(pmc_queue_ring(uq->q), d->cdev_fd, use_ioctl(d), 0, uq->q_id,
					t, -1, tag_buf(uq, t));
		if (rc) {
			pmc_err_set(&uq->err, -rc, "%s: queue %u: cannot fetch tag %u: %s", d->name,
				    uq->q_id, t, strerror(-rc));
			atomic_store(&uq->failed, 1);
			return NULL;
		}
		uq->fetched++;
	}
	atomic_store(&uq->ready, 1);
	/* serve until every tag came back aborted, or we were told to stop
	 * (or to leave) and the engine has nothing of ours in flight */
	while (uq->aborted < depth) {
		int held = 0;

		pmc_queue_poll(uq->q, 1, 100000000ull);
		if (!atomic_load(&uq->stop) && !atomic_load(&uq->leave))
			continue;
		if (atomic_load(&uq->leave) && !uq->hold_new)
			leave_hold_new(uq, &leave_ns);
		for (unsigned t = 0; t < depth; t++)
			held |= uq->busy[t];
		if (held || pmc_queue_busy(uq->q))
			continue;
		/* every request is done (its commit flushed below): the tags
		 * are the driver's then, or hold a request left for the next
		 * daemon */
		if (atomic_load(&uq->leave)) {
			uq->hold_new = 1;
			break;
		}
		/* newer kernels cancel fetches only when the ring closes */
		if (uq->fetched == depth - uq->aborted)
			break;
	}
	/* the last poll's callbacks may have prepared commits after its
	 * io_uring_enter: they go in now, or the driver never got those
	 * results (the next daemon would reissue the requests, or an older
	 * device fail them with EIO) */
	pmc_ring_flush(pmc_queue_ring(uq->q));
	/* every tag aborted (STOP_DEV) ends the loop above whatever else the
	 * ring carries: write-back writes and round syncs of any volume that
	 * this thread started or sealed. The ring is this thread's alone
	 * (SINGLE_ISSUER, DEFER_TASKRUN): only it can reap them, and
	 * pmc_queue_destroy() on another thread never could */
	while (pmc_queue_busy(uq->q))
		pmc_queue_poll(uq->q, 1, 100000000ull);
	return NULL;
}

static void queue_free(struct pmcd_queue *uq)
{
	if (!uq->dev)
		return; /* never set up, or released already */
	if (uq->q)
		pmc_queue_destroy(uq->q);
	pmc_ublk_unmap_descs(uq->iods, uq->dev->conf.depth);
	pmc_ring_buf_free(uq->bufs, (size_t)uq->dev->conf.depth * uq->dev->conf.max_io);
	free(uq->reqs);
	free(uq->busy);
}

static int queue_init(struct pmcd_dev *d, struct pmcd_queue *uq, uint16_t q_id,
		      struct pmc_err *err)
{
	/* /dev/ublkcN as the ring's fixed file 0: its commands skip the fd lookup */
	struct pmc_ring_opts ro = {
		.sqe128 = 1, .foreign = ublk_cqe, .arg = uq, .files = &d->cdev_fd, .nfiles = 1};
	unsigned depth = d->conf.depth;
	int rc;

	uq->dev = d;
	uq->q_id = q_id;
	uq->bufs = d->user_copy ? NULL : pmc_ring_buf_alloc((size_t)depth * d->conf.max_io);
	uq->reqs = calloc(depth, sizeof(*uq->reqs));
	uq->busy = calloc(depth, 1);
	if ((!d->user_copy && !uq->bufs) || !uq->reqs || !uq->busy)
		return pmc_err_set(err, ENOMEM, "%s: queue %u: out of memory", d->name, q_id);
	uq->iods = pmc_ublk_map_descs(d->cdev_fd, q_id, (uint16_t)depth, err);
	if (!uq->iods)
		return -err->code;
	rc = pmc_queue_create_opts(d->e, depth, &ro, &uq->q, err);
	if (rc)
		return rc;
	return 0;
}

static void set_params(struct pmcd_dev *d, struct ublk_params *p)
{
	memset(p, 0, sizeof(*p));
	p->types = UBLK_PARAM_TYPE_BASIC;
	p->basic.attrs = d->conf.volatile_cache ? UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA : 0;
	p->basic.logical_bs_shift = 12;
	p->basic.physical_bs_shift = 12;
	p->basic.io_min_shift = 12;
	p->basic.io_opt_shift = 12;
	p->basic.max_sectors = d->conf.max_io >> 9;
	p->basic.dev_sectors = d->conf.size >> 9;
	if (d->conf.discard) {
		p->types |= UBLK_PARAM_TYPE_DISCARD;
		p->discard.discard_granularity = 4096;
		p->discard.max_discard_sectors = UINT32_MAX >> 9 & ~7u;
		p->discard.max_discard_segments = 1;
	}
}

/* the record of /dev/ublkbN written when it was made (name_file) */
static int record_read(int dev_id, char *name, size_t nlen, uint64_t *size, char *id, size_t ilen)
{
	char path[96], line[256];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), PMCD_RUN_DIR "/ublkb%d.volume", dev_id);
	f = fopen(path, "re");
	if (!f)
		return -1;
	name[0] = id[0] = '\0';
	*size = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (n == 0)
			snprintf(name, nlen, "%.*s", (int)nlen - 1, line);
		else if (!strncmp(line, "size=", 5))
			*size = strtoull(line + 5, NULL, 10);
		else if (!strncmp(line, "disk_id=", 8))
			snprintf(id, ilen, "%.*s", (int)ilen - 1, line + 8);
		n++;
	}
	fclose(f);
	return n ? 0 : -1;
}

int pmcd_takeover_mismatch(const struct pmcd_dev_conf *conf, const char *name, uint64_t size,
			   const char *id, char *why, size_t len)
{
	const char *want_id = conf->disk_id ? conf->disk_id : "";

	if (strcmp(name, conf->name)) {
		snprintf(why, len, "it served volume %.64s", name);
		return 1;
	}
	if (size != conf->size) {
		snprintf(why, len, "it was %" PRIu64 " bytes, the volume is %" PRIu64, size,
			 conf->size);
		return 1;
	}
	if (strcmp(id, want_id) && !(conf->disk_id_was && !strcmp(id, conf->disk_id_was))) {
		snprintf(why, len, "it served disk %.52s, the volume's disk is %.52s",
			 id[0] ? id : "(unknown)", want_id[0] ? want_id : "(unknown)");
		return 1;
	}
	return 0;
}

/* 1 with the reason in why when the quiesced device conf.dev_id is not
 * this volume's: no record, or another volume, size or disk identity */
static int takeover_mismatch(struct pmcd_dev *d, char *why, size_t len)
{
	char name[128], id[128];
	uint64_t size;

	if (record_read(d->conf.dev_id, name, sizeof(name), &size, id, sizeof(id))) {
		snprintf(why, len, "no record of what it served");
		return 1;
	}
	return pmcd_takeover_mismatch(&d->conf, name, size, id, why, len);
}

/* a device of this id left quiesced by a previous daemon, to recover */
static int find_quiesced(struct pmcd_dev *d, struct pmc_err *err)
{
	struct ublksrv_ctrl_dev_info info;
	struct pmc_err gerr = {0};

	uint64_t limit_ms = 5000, io_timeout_ms = 0;
	char path[96];
	FILE *f;

	if (d->conf.dev_id < 0)
		return 0;
	/* the driver quiesces a device a little after its daemon died; but a
	 * queue whose every tag the dead daemon held has no fetch to cancel,
	 * and the driver aborts it only when its requests time out (6.12's
	 * ublk_timeout): wait that long too */
	snprintf(path, sizeof(path), "/sys/block/ublkb%d/queue/io_timeout", d->conf.dev_id);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%" SCNu64, &io_timeout_ms) == 1 && io_timeout_ms < 600000)
			limit_ms = io_timeout_ms + 5000 > limit_ms ? io_timeout_ms + 5000 : limit_ms;
		fclose(f);
	}
	for (uint64_t waited = 0; waited <= limit_ms; waited += 100) {
		if (waited == 5000)
			pmc_log(LOG_NOTICE,
				"%s: ublk device %d not quiesced yet: waiting up to %" PRIu64
				" s for the driver (a queue full at the last daemon's end is "
				"aborted when its requests time out)",
				d->name, d->conf.dev_id, limit_ms / 1000);
		if (pmc_ublk_get_info(d->ctrl, (uint32_t)d->conf.dev_id, &info, &gerr))
			return 0; /* no such device */
		if (info.state == UBLK_S_DEV_QUIESCED) {
			char why[200];

			if (takeover_mismatch(d, why, sizeof(why))) {
				/* another volume's device (or unknown): its I/O
				 * must never reach this volume's disk */
				pmc_log(LOG_WARNING,
					"%s: not taking over quiesced /dev/ublkb%d: %s; leaving it "
					"alone, a fresh device is made",
					d->name, d->conf.dev_id, why);
				d->conf.dev_id = -1;
				return 0;
			}
			d->info = info;
			return 1;
		}
		if (info.ublksrv_pid > 0 && kill(info.ublksrv_pid, 0) == 0)
			return pmc_err_set(err, EBUSY,
					   "%s: ublk device %d is served by live process %d", d->name,
					   d->conf.dev_id, info.ublksrv_pid);
		usleep(100000);
	}
	return pmc_err_set(err, EBUSY,
			   "%s: ublk device %d exists but is neither quiesced nor recoverable "
			   "(state %u)",
			   d->name, d->conf.dev_id, info.state);
}

/* /run/pmcache/ublkbN.volume: the udev rule names /dev/pmcache/<volume> */
static void name_file(struct pmcd_dev *d, int create)
{
	char path[96], text[PMC_VOLUME_NAME_MAX + PMC_DISK_ID_MAX + 64];
	int rc;

	snprintf(path, sizeof(path), PMCD_RUN_DIR "/ublkb%u.volume", d->info.dev_id);
	if (!create) {
		unlink(path);
		return;
	}
	mkdir(PMCD_RUN_DIR, 0755);
	/* whole or not at all (a takeover reads it: a torn one would leave the
	 * quiesced device to nobody); a failure is said, the device works
	 * without a name. Line 1 the volume (the udev rule reads it); then
	 * what a takeover compares */
	snprintf(text, sizeof(text), "%s\nsize=%" PRIu64 "\ndisk_id=%s\n", d->conf.name,
		 d->conf.size, d->conf.disk_id ? d->conf.disk_id : "");
	rc = pmc_file_replace(path, text, 0644);
	if (rc)
		pmc_log(LOG_WARNING, "%s: %s: %s (no /dev/pmcache name, no takeover record)",
			d->name, path, strerror(-rc));
}

static int start_queues(struct pmcd_dev *d, struct pmc_err *err)
{
	char name[16];
	int rc;

	for (uint16_t i = 0; i < d->conf.nr_queues; i++) {
		rc = queue_init(d, &d->queues[i], i, err);
		if (rc)
			return rc;
	}
	for (uint16_t i = 0; i < d->conf.nr_queues; i++) {
		rc = pthread_create(&d->queues[i].thread, NULL, queue_main, &d->queues[i]);
		if (rc)
			return pmc_err_set(err, rc, "%s: cannot start queue thread: %s", d->name,
					   strerror(rc));
		d->queues[i].started = 1;
		/* named for top -H and perf: ublk device and queue */
		snprintf(name, sizeof(name), "ublk%u-q%u", d->info.dev_id, i);
		pthread_setname_np(d->queues[i].thread, name);
	}
	for (uint16_t i = 0; i < d->conf.nr_queues; i++) {
		while (!atomic_load(&d->queues[i].ready)) {
			if (atomic_load(&d->queues[i].failed)) {
				*err = d->queues[i].err;
				return -err->code;
			}
			usleep(1000);
		}
	}
	return 0;
}

static void join_queues(struct pmcd_dev *d)
{
	for (uint16_t i = 0; i < d->conf.nr_queues; i++) {
		atomic_store(&d->queues[i].stop, 1);
		if (d->queues[i].started)
			pthread_join(d->queues[i].thread, NULL);
		d->queues[i].started = 0;
	}
}

/* drop every reference this process holds on /dev/ublkcN (queue rings with
 * their commands, descriptor mappings, the fd): DEL_DEV waits for that */
static void release(struct pmcd_dev *d)
{
	if (d->queues) {
		join_queues(d);
		for (uint16_t i = 0; i < d->conf.nr_queues; i++)
			queue_free(&d->queues[i]);
		memset(d->queues, 0, d->conf.nr_queues * sizeof(*d->queues));
	}
	if (d->cdev_fd >= 0)
		close(d->cdev_fd);
	d->cdev_fd = -1;
}

static void dev_free(struct pmcd_dev *d)
{
	if (!d)
		return;
	release(d);
	free(d->queues);
	free(d);
}

/*
 * The driver gives a device at most as many queues as the kernel has
 * possible CPUs (ADD_DEV caps nr_hw_queues at nr_cpu_ids): n, or that
 * count when it is smaller (/sys/devices/system/cpu/possible, "0-N").
 */
static uint16_t queues_cap(uint16_t n)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	unsigned lo = 0, hi = 0;
	int k = f ? fscanf(f, "%u-%u", &lo, &hi) : 0;

	if (f)
		fclose(f);
	if (k == 1)
		hi = lo;
	if (k < 1 || hi + 1 >= n)
		return n;
	return (uint16_t)(hi + 1);
}

int pmcd_dev_start(struct pmc_ublk_ctrl *ctrl, struct pmc_engine *e,
		   const struct pmcd_dev_conf *conf, struct pmcd_dev **out, struct pmc_err *err)
{
	struct pmcd_dev *d;
	struct ublk_params p;
	int rc, added = 0, named = 0;

	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return pmc_err_set(err, ENOMEM, "%s: out of memory", conf->name);
	d->conf = *conf;
	d->conf.nr_queues = queues_cap(conf->nr_queues);
	if (d->conf.nr_queues < conf->nr_queues)
		pmc_log(LOG_WARNING,
			"volume %s: queues.count %u, but the kernel has %u possible CPUs and the "
			"ublk driver as many queues: %u queues",
			conf->name, conf->nr_queues, d->conf.nr_queues, d->conf.nr_queues);
	d->e = e;
	d->ctrl = ctrl;
	d->cdev_fd = -1;
	snprintf(d->name, sizeof(d->name), "volume %s", conf->name);
	d->queues = calloc(d->conf.nr_queues, sizeof(*d->queues));
	if (!d->queues) {
		free(d);
		return pmc_err_set(err, ENOMEM, "%s: out of memory", conf->name);
	}
	rc = find_quiesced(d, err);
	if (rc < 0)
		goto err_free;
	d->recovered = rc;
	if (d->recovered) {
		/* the device keeps the queues, depth and I/O size it was made
		 * with (the driver sends requests up to them): serve it with
		 * them, the configured ones apply when it is next made; only
		 * requests larger than the engine takes (queues.max_io at this
		 * start) cannot be served. Refusing would leave a mounted file
		 * system waiting after a restart with a changed queues.* */
		if (d->info.max_io_buf_bytes > conf->max_io || !d->info.nr_hw_queues ||
		    !d->info.queue_depth) {
			rc = pmc_err_set(err, EINVAL,
					 "%s: ublk device %u was made with %u queues of depth %u "
					 "and %u-byte I/O, more than queues.max_io (%u bytes) "
					 "takes now; start with queues.max_io at least that",
					 d->name, d->info.dev_id, d->info.nr_hw_queues,
					 d->info.queue_depth, d->info.max_io_buf_bytes, conf->max_io);
			goto err_free;
		}
		if (d->info.nr_hw_queues != d->conf.nr_queues || d->info.queue_depth != conf->depth ||
		    d->info.max_io_buf_bytes != conf->max_io) {
			struct pmcd_queue *nq = calloc(d->info.nr_hw_queues, sizeof(*nq));

			if (!nq) {
				rc = pmc_err_set(err, ENOMEM, "%s: out of memory", conf->name);
				goto err_free;
			}
			pmc_log(LOG_NOTICE,
				"%s: /dev/ublkb%u keeps %u queues of depth %u and %u-byte I/O, "
				"as it was made (the configuration's %u, %u, %u apply when it "
				"is made again)",
				d->name, d->info.dev_id, d->info.nr_hw_queues, d->info.queue_depth,
				d->info.max_io_buf_bytes, d->conf.nr_queues, conf->depth,
				conf->max_io);
			free(d->queues);
			d->queues = nq;
			d->conf.nr_queues = d->info.nr_hw_queues;
			d->conf.depth = d->info.queue_depth;
			d->conf.max_io = d->info.max_io_buf_bytes;
		}
		d->user_copy = !!(d->info.flags & UBLK_F_USER_COPY);
		rc = pmc_ublk_start_recovery(ctrl, d->info.dev_id, err);
		if (rc)
			goto err_free;
	} else {
		uint64_t flags = UBLK_F_USER_RECOVERY;
		const char *no_uc = getenv("PMCACHED_NO_USER_COPY");

		if (ctrl->feat.flags & UBLK_F_USER_RECOVERY_REISSUE)
			flags |= UBLK_F_USER_RECOVERY_REISSUE;
		d->user_copy = (ctrl->feat.flags & UBLK_F_USER_COPY) && !(no_uc && *no_uc == '1');
		if (d->user_copy)
			flags |= UBLK_F_USER_COPY;
		rc = pmc_ublk_add(ctrl, d->conf.dev_id, d->conf.nr_queues, conf->depth, conf->max_io,
				  flags, &d->info, err);
		if (rc)
			goto err_free;
		added = 1;
		if (d->info.nr_hw_queues != d->conf.nr_queues) {
			rc = pmc_err_set(err, EINVAL,
					 "%s: the ublk driver made device %u with %u queues, not "
					 "%u",
					 d->name, d->info.dev_id, d->info.nr_hw_queues,
					 d->conf.nr_queues);
			goto err_del;
		}
		set_params(d, &p);
		rc = pmc_ublk_set_params(ctrl, d->info.dev_id, &p, err);
		if (rc)
			goto err_del;
	}
	name_file(d, 1);
	named = 1;
	rc = pmc_ublk_open_cdev(d->info.dev_id, 5000, &d->cdev_fd, err);
	if (rc)
		goto err_del;
	/* before the first request can come (END_USER_RECOVERY dispatches
	 * the requeued ones at once): a recovered device keeps the attributes
	 * it was made with, which may say "no volatile cache" (an older
	 * configuration); then the kernel sends no FLUSH, and every disk write
	 * must be durable from the first */
	pmc_engine_set_volatile(e, conf->vol, d->recovered ? 0 : conf->volatile_cache);
	rc = start_queues(d, err);
	if (rc)
		goto err_del;
	rc = d->recovered ? pmc_ublk_end_recovery(ctrl, d->info.dev_id, err)
			  : pmc_ublk_start(ctrl, d->info.dev_id, err);
	if (rc)
		goto err_del;
	pmc_log(LOG_INFO, "%s: %s /dev/ublkb%u (%u queues of %u, %" PRIu64 " bytes, %s)", d->name,
		d->recovered ? "recovered" : "serving", d->info.dev_id, d->conf.nr_queues, d->conf.depth,
		conf->size, d->user_copy ? "user copy" : "tag buffers");
	*out = d;
	return 0;

err_del:
	if (added) {
		struct pmc_err ignore = {0};

		pmc_ublk_stop(ctrl, d->info.dev_id, &ignore);
		release(d);
		pmc_ublk_del(ctrl, d->info.dev_id, &ignore);
		/* its record too: the udev rule would give /dev/pmcache/<name>
		 * to whatever ublk device takes the number next */
		if (named)
			name_file(d, 0);
	}
err_free:
	dev_free(d);
	return rc;
}

/* stop and delete; claim: an fd of ours on /dev/ublkbN, closed after
 * STOP_DEV (DEL_DEV waits until the block device is closed everywhere) */
static void dev_stop(struct pmcd_dev *d, int claim)
{
	struct pmc_err err = {0};

	/* the kernel drains in-flight I/O through the queues, then aborts the
	 * fetches */
	if (pmc_ublk_stop(d->ctrl, d->info.dev_id, &err))
		pmc_log(LOG_ERR, "%s", err.msg);
	if (claim >= 0)
		close(claim);
	release(d);
	if (pmc_ublk_del(d->ctrl, d->info.dev_id, &err))
		pmc_log(LOG_ERR, "%s", err.msg);
	name_file(d, 0);
	pmc_log(LOG_INFO, "%s: /dev/ublkb%u removed", d->name, d->info.dev_id);
	dev_free(d);
}

void pmcd_dev_stop(struct pmcd_dev *d)
{
	if (d)
		dev_stop(d, -1);
}

void pmcd_dev_leave(struct pmcd_dev *d)
{
	unsigned left = 0;

	if (!d)
		return;
	for (uint16_t i = 0; i < d->conf.nr_queues; i++)
		atomic_store(&d->queues[i].leave, 1);
	join_queues(d);
	for (uint16_t i = 0; i < d->conf.nr_queues; i++)
		left += d->queues[i].left;
	release(d);
	/* the name file stays: the device and its /dev/pmcache link stay */
	pmc_log(LOG_NOTICE,
		"%s: /dev/ublkb%u left quiesced for the next pmcached (%u requests handed "
		"back to the driver)",
		d->name, d->info.dev_id, left);
	dev_free(d);
}

/* the mount point of block device rdev in our mount namespace, if any */
static int holder_mount(dev_t rdev, char *buf, size_t len)
{
	char line[4096], want[32];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = 0;

	if (!f)
		return 0;
	snprintf(want, sizeof(want), "%u:%u", major(rdev), minor(rdev));
	/* "36 35 98:0 / /mnt/a rw,..." : the third field, then root, mount point */
	while (!found && fgets(line, sizeof(line), f)) {
		char id[32], root[1024], mnt[1024];

		if (sscanf(line, "%*s %*s %31s %1023s %1023s", id, root, mnt) == 3 &&
		    !strcmp(id, want)) {
			snprintf(buf, len, "mounted on %s", mnt);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

/* a stacked device (dm, md, bcache) holding it: /sys/block/X/holders */
static int holder_sysfs(uint32_t dev_id, char *buf, size_t len)
{
	char dir[64];
	struct dirent *e;
	DIR *h;
	int found = 0;

	snprintf(dir, sizeof(dir), "/sys/block/ublkb%u/holders", dev_id);
	h = opendir(dir);
	if (!h)
		return 0;
	while (!found && (e = readdir(h))) {
		char path[320], name[128] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/dm/name", e->d_name);
		f = fopen(path, "re");
		if (f) {
			if (fgets(name, sizeof(name), f))
				name[strcspn(name, "\n")] = '\0';
			fclose(f);
		}
		if (name[0])
			snprintf(buf, len, "held by %s (device-mapper %s)", e->d_name, name);
		else
			snprintf(buf, len, "held by %s", e->d_name);
		found = 1;
	}
	closedir(h);
	return found;
}

/* a process other than us with path open (a plain open is invisible to
 * O_EXCL) */
static int holder_process(const char *path, char *buf, size_t len)
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
		if (found) {
			char comm[64] = "?";
			FILE *c;

			snprintf(link, sizeof(link), "/proc/%s/comm", p->d_name);
			c = fopen(link, "re");
			if (c) {
				if (fgets(comm, sizeof(comm), c))
					comm[strcspn(comm, "\n")] = '\0';
				fclose(c);
			}
			snprintf(buf, len, "open by process %s (%s)", p->d_name, comm);
		}
	}
	closedir(proc);
	return found;
}

/* the holder of /dev/ublkbN other than an exclusive claim of ours (claim:
 * our O_EXCL fd, or -1 to test for a claim by someone else) */
static int holder(uint32_t dev_id, int claim, char *buf, size_t len)
{
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/dev/ublkb%u", dev_id);
	if (stat(path, &st) || !S_ISBLK(st.st_mode))
		return 0;
	if (holder_mount(st.st_rdev, buf, len) || holder_sysfs(dev_id, buf, len))
		return 1;
	if (claim < 0) {
		fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
		if (fd < 0 && errno == EBUSY) {
			snprintf(buf, len,
				 "claimed exclusively (mounted in another mount namespace, "
				 "swap, or a RAID member)");
			return 1;
		}
		if (fd >= 0)
			close(fd);
	}
	return holder_process(path, buf, len);
}

int pmcd_dev_holder(uint32_t dev_id, char *buf, size_t len)
{
	return holder(dev_id, -1, buf, len);
}

int pmcd_dev_stop_unused(struct pmcd_dev *d, char *buf, size_t len)
{
	char path[64];
	int claim;

	snprintf(path, sizeof(path), "/dev/ublkb%u", d->info.dev_id);
	/* claimed for the time of the check and the stop: no mount starts */
	claim = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (claim < 0 && errno == EBUSY) {
		if (!holder(d->info.dev_id, -1, buf, len))
			snprintf(buf, len, "claimed exclusively");
		return 1;
	}
	if (holder(d->info.dev_id, claim, buf, len)) {
		if (claim >= 0)
			close(claim);
		return 1;
	}
	dev_stop(d, claim);
	return 0;
}
