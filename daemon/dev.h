/* dev.h - one exported ublk block device per attached volume, with one
 * thread and one io_uring per ublk queue carrying both the ublk commands
 * and the engine's disk I/O. */
#ifndef PMCD_DEV_H
#define PMCD_DEV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine.h"
#include "ublk.h"

/* the unit's RuntimeDirectory: device names for the udev rule, the
 * default control socket */
#define PMCD_RUN_DIR "/run/pmcache"

struct pmcd_dev;

struct pmcd_queue {
	struct pmcd_dev *dev;
	uint16_t q_id;
	struct pmc_queue *q;
	struct ublksrv_io_desc *iods;
	char *bufs;		/* depth * max_io, 4 KiB aligned; NULL with user copy */
	struct pmc_req *reqs;	/* [depth] */
	uint8_t *busy;		/* [depth]: tag held by the engine */
	unsigned aborted;	/* tags the driver gave back (device stopping) */
	unsigned fetched;	/* tags with a FETCH or COMMIT outstanding */
	pthread_t thread;
	int started;
	atomic_int ready;	/* every tag fetched once */
	atomic_int stop;
	atomic_int leave;	/* finish what the engine holds, then exit (pmcd_dev_leave) */
	atomic_int failed;
	int hold_new;		/* leaving: new requests stay with the driver */
	unsigned left;		/* requests left to the next daemon */
	struct pmc_err err;
};

struct pmcd_dev_conf {
	const char *name;	/* volume name */
	uint32_t vol;		/* engine volume slot */
	int dev_id;		/* ublk device id, -1 any */
	uint16_t nr_queues;
	uint16_t depth;
	uint32_t max_io;	/* bytes */
	uint64_t size;		/* bytes */
	int volatile_cache;	/* advertise a volatile write cache (+FUA) */
	int discard;		/* advertise discard */
	const char *disk_id;	/* identity of the volume's disk ("" unknown) */
	/* the identity recorded before this attach moved it to disk_id (an
	 * older pmcached's form, diskid.h), or NULL: a device that older
	 * process left quiesced recorded it, and is this volume's */
	const char *disk_id_was;
};

/*
 * Is a device left quiesced, whose record names volume name of size bytes
 * on disk id, not the one conf describes? 1 with the reason in why (the
 * device is left alone and a fresh one made), 0 to take it over. Its
 * disk must be conf's, or conf's disk_id_was (recorded by an older
 * pmcached before this attach moved it).
 */
int pmcd_takeover_mismatch(const struct pmcd_dev_conf *conf, const char *name, uint64_t size,
			   const char *id, char *why, size_t len);

struct pmcd_dev {
	struct pmcd_dev_conf conf;
	struct pmc_engine *e;
	struct pmc_ublk_ctrl *ctrl;
	struct ublksrv_ctrl_dev_info info; /* info.dev_id: the device's number */
	int cdev_fd;
	int recovered;		/* reattached to an existing device */
	int user_copy;		/* UBLK_F_USER_COPY: data through the cdev, no tag buffers */
	struct pmcd_queue *queues;
	char name[64];
};

/*
 * Export volume conf->vol: reattach to an existing quiesced device of that
 * id left by a previous daemon (user recovery) if its record (the
 * ublkbN.volume file: volume, size, disk identity) matches, or add a new
 * one (of any free id when the quiesced one belongs to something else,
 * which is left alone); start
 * the queue threads; start or end recovery. Blocking; main thread only.
 */
int pmcd_dev_start(struct pmc_ublk_ctrl *ctrl, struct pmc_engine *e,
		   const struct pmcd_dev_conf *conf, struct pmcd_dev **out, struct pmc_err *err);
/* Graceful: STOP_DEV (the kernel drains in-flight I/O through the queue
 * threads), join them, DEL_DEV, free. */
void pmcd_dev_stop(struct pmcd_dev *d);
/* Restart path: finish the requests the engine holds, commit them, close
 * the rings and the char device without STOP_DEV: the driver keeps
 * /dev/ublkbN quiesced (user recovery) for the next daemon. Frees d. */
void pmcd_dev_leave(struct pmcd_dev *d);

/* Is /dev/ublkbN in use? 0 if not; else 1 and a description of the holder
 * in buf: "mounted on /mnt/a", "held by dm-0", "open by process 42 (fio)",
 * or "claimed exclusively" when only O_EXCL tells. Main thread. */
int pmcd_dev_holder(uint32_t dev_id, char *buf, size_t len);
/* pmcd_dev_stop(d) unless /dev/ublkbN is in use (then 1, the holder in
 * buf, d untouched); claims the device exclusively meanwhile, so that no
 * mount starts between the check and STOP_DEV. */
int pmcd_dev_stop_unused(struct pmcd_dev *d, char *buf, size_t len);

#endif
