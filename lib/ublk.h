/* ublk.h - the ublk server protocol: control commands on /dev/ublk-control
 * and the per-queue FETCH / COMMIT_AND_FETCH commands on /dev/ublkcN.
 *
 * Control commands are synchronous (a private SQE128 ring) and may block:
 * START_DEV waits until every tag of every queue has a FETCH outstanding, so
 * it must be sent from a thread other than the queue threads. Opcodes are
 * the ioctl-encoded ones where the driver accepts them, else the legacy
 * numbers (probed once, see ublk_probe.h). Queue commands go through the
 * queue thread's own ring (ring.h, pmc_ring_uring_cmd).
 */
#ifndef PMC_UBLK_H
#define PMC_UBLK_H

#include <stdint.h>

#include "err.h"
#include "ublk_probe.h"

struct pmc_ring;

struct pmc_ublk_ctrl {
	int fd;
	void *ring;		/* struct io_uring, private */
	struct pmc_ublk_features feat;
	int use_ioctl;		/* ioctl-encoded opcodes */
};

int pmc_ublk_ctrl_open(struct pmc_ublk_ctrl **out, struct pmc_err *err);
void pmc_ublk_ctrl_close(struct pmc_ublk_ctrl *c);

/*
 * ADD_DEV: dev_id -1 lets the driver choose. flags are UBLK_F_*; the
 * ioctl-encoding flag is added when used. info is filled from the driver.
 */
int pmc_ublk_add(struct pmc_ublk_ctrl *c, int dev_id, uint16_t nr_queues, uint16_t depth,
		 uint32_t max_io_bytes, uint64_t flags, struct ublksrv_ctrl_dev_info *info,
		 struct pmc_err *err);
int pmc_ublk_get_info(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct ublksrv_ctrl_dev_info *info,
		      struct pmc_err *err);
int pmc_ublk_set_params(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct ublk_params *p,
			struct pmc_err *err);
int pmc_ublk_start(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err);
int pmc_ublk_stop(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err);
int pmc_ublk_del(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err);
int pmc_ublk_start_recovery(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err);
int pmc_ublk_end_recovery(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err);

/* open /dev/ublkcN, waiting up to timeout_ms for it to appear */
int pmc_ublk_open_cdev(uint32_t dev_id, unsigned timeout_ms, int *fd, struct pmc_err *err);

/* the queue's request descriptors, shared with the driver (read-only) */
struct ublksrv_io_desc *pmc_ublk_map_descs(int cdev_fd, uint16_t q_id, uint16_t depth,
					   struct pmc_err *err);
void pmc_ublk_unmap_descs(struct ublksrv_io_desc *d, uint16_t depth);

/* FETCH_REQ (result ignored) or COMMIT_AND_FETCH_REQ on the queue's ring;
 * user_data carries (tag << 1) | 1 */
int pmc_ublk_queue_cmd(struct pmc_ring *r, int cdev_fd, int use_ioctl, int commit, uint16_t q_id,
		       uint16_t tag, int32_t result, void *buf);

#endif
