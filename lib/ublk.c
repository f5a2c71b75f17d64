/* ublk.c - see ublk.h.
 *
 * Owns the control fd and its private ring. Control calls may be made from
 * any one thread at a time (the daemon's main thread); queue commands from
 * the queue's own thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"
#include "ublk.h"
#include "ublk_probe.h"

#define IOD_BUF_MAX (UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc))

static const struct {
	uint32_t legacy;
	uint32_t ioctl;
	const char *name;
} ops[] = {
	{UBLK_CMD_GET_DEV_INFO, UBLK_U_CMD_GET_DEV_INFO, "GET_DEV_INFO"},
	{UBLK_CMD_ADD_DEV, UBLK_U_CMD_ADD_DEV, "ADD_DEV"},
	{UBLK_CMD_DEL_DEV, UBLK_U_CMD_DEL_DEV, "DEL_DEV"},
	{UBLK_CMD_START_DEV, UBLK_U_CMD_START_DEV, "START_DEV"},
	{UBLK_CMD_STOP_DEV, UBLK_U_CMD_STOP_DEV, "STOP_DEV"},
	{UBLK_CMD_SET_PARAMS, UBLK_U_CMD_SET_PARAMS, "SET_PARAMS"},
	{UBLK_CMD_START_USER_RECOVERY, UBLK_U_CMD_START_USER_RECOVERY, "START_USER_RECOVERY"},
	{UBLK_CMD_END_USER_RECOVERY, UBLK_U_CMD_END_USER_RECOVERY, "END_USER_RECOVERY"},
};

int pmc_ublk_ctrl_open(struct pmc_ublk_ctrl **out, struct pmc_err *err)
{
	struct pmc_ublk_ctrl *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return pmc_err_set(err, ENOMEM, "ublk: out of memory");
	c->ring = calloc(1, sizeof(struct io_uring));
	if (!c->ring) {
		free(c);
		return pmc_err_set(err, ENOMEM, "ublk: out of memory");
	}
	rc = pmc_ublk_probe(NULL, &c->feat, err);
	if (rc)
		goto err_free;
	c->use_ioctl = c->feat.ioctl_opcodes;
	c->fd = open(PMC_UBLK_CONTROL, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		rc = pmc_err_set(err, errno, "ublk: %s: %s", PMC_UBLK_CONTROL, strerror(errno));
		goto err_free;
	}
	rc = io_uring_queue_init(4, c->ring, IORING_SETUP_SQE128);
	if (rc) {
		close(c->fd);
		rc = pmc_err_set(err, -rc, "ublk: control ring: %s", strerror(-rc));
		goto err_free;
	}
	*out = c;
	return 0;

err_free:
	free(c->ring);
	free(c);
	return rc;
}

void pmc_ublk_ctrl_close(struct pmc_ublk_ctrl *c)
{
	if (!c)
		return;
	io_uring_queue_exit(c->ring);
	close(c->fd);
	free(c->ring);
	free(c);
}

/* one synchronous control command: the driver's result */
static int cmd(struct pmc_ublk_ctrl *c, unsigned op, uint32_t dev_id, void *buf, uint16_t len,
	       uint64_t data0)
{
	struct ublksrv_ctrl_cmd cc = {
		.dev_id = dev_id,
		.queue_id = (uint16_t)-1,
		.len = len,
		.addr = (uint64_t)(uintptr_t)buf,
		.data = {data0},
	};
	struct io_uring_sqe *sqe = io_uring_get_sqe(c->ring);

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = c->fd;
	sqe->cmd_op = c->use_ioctl ? ops[op].ioctl : ops[op].legacy;
	memcpy(sqe->cmd, &cc, sizeof(cc));
	return pmc_ublk_ctrl_submit_wait(c->ring);
}

enum { OP_INFO, OP_ADD, OP_DEL, OP_START, OP_STOP, OP_PARAMS, OP_REC_START, OP_REC_END };

static int check(int rc, unsigned op, uint32_t dev_id, struct pmc_err *err)
{
	if (rc >= 0)
		return 0;
	if ((int)dev_id < 0)
		return pmc_err_set(err, -rc, "ublk: %s: %s", ops[op].name, strerror(-rc));
	return pmc_err_set(err, -rc, "ublk device %u: %s: %s", dev_id, ops[op].name,
			   strerror(-rc));
}

int pmc_ublk_add(struct pmc_ublk_ctrl *c, int dev_id, uint16_t nr_queues, uint16_t depth,
		 uint32_t max_io_bytes, uint64_t flags, struct ublksrv_ctrl_dev_info *info,
		 struct pmc_err *err)
{
	memset(info, 0, sizeof(*info));
	info->nr_hw_queues = nr_queues;
	info->queue_depth = depth;
	info->max_io_buf_bytes = max_io_bytes;
	info->dev_id = (uint32_t)dev_id;
	info->ublksrv_pid = getpid();
	info->flags = flags | (c->use_ioctl ? UBLK_F_CMD_IOCTL_ENCODE : 0);
	return check(cmd(c, OP_ADD, (uint32_t)dev_id, info, sizeof(*info), 0), OP_ADD,
		     (uint32_t)dev_id, err);
}

int pmc_ublk_get_info(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct ublksrv_ctrl_dev_info *info,
		      struct pmc_err *err)
{
	memset(info, 0, sizeof(*info));
	return check(cmd(c, OP_INFO, dev_id, info, sizeof(*info), 0), OP_INFO, dev_id, err);
}

int pmc_ublk_set_params(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct ublk_params *p,
			struct pmc_err *err)
{
	p->len = sizeof(*p);
	return check(cmd(c, OP_PARAMS, dev_id, p, sizeof(*p), 0), OP_PARAMS, dev_id, err);
}

int pmc_ublk_start(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err)
{
	return check(cmd(c, OP_START, dev_id, NULL, 0, (uint64_t)getpid()), OP_START, dev_id, err);
}

int pmc_ublk_stop(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err)
{
	return check(cmd(c, OP_STOP, dev_id, NULL, 0, 0), OP_STOP, dev_id, err);
}

int pmc_ublk_del(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err)
{
	return check(cmd(c, OP_DEL, dev_id, NULL, 0, 0), OP_DEL, dev_id, err);
}

int pmc_ublk_start_recovery(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err)
{
	return check(cmd(c, OP_REC_START, dev_id, NULL, 0, 0), OP_REC_START, dev_id, err);
}

int pmc_ublk_end_recovery(struct pmc_ublk_ctrl *c, uint32_t dev_id, struct pmc_err *err)
{
	return check(cmd(c, OP_REC_END, dev_id, NULL, 0, (uint64_t)getpid()), OP_REC_END, dev_id,
		     err);
}

int pmc_ublk_open_cdev(uint32_t dev_id, unsigned timeout_ms, int *fd, struct pmc_err *err)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/ublkc%u", dev_id);
	for (unsigned waited = 0;; waited += 10) {
		*fd = open(path, O_RDWR | O_CLOEXEC);
		if (*fd >= 0)
			return 0;
		if (errno != ENOENT || waited >= timeout_ms)
			return pmc_err_set(err, errno, "ublk: %s: %s", path, strerror(errno));
		usleep(10000);
	}
}

struct ublksrv_io_desc *pmc_ublk_map_descs(int cdev_fd, uint16_t q_id, uint16_t depth,
					   struct pmc_err *err)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t max = (IOD_BUF_MAX + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	size_t len = (depth * sizeof(struct ublksrv_io_desc) + (size_t)pg - 1) / (size_t)pg *
		     (size_t)pg;
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, cdev_fd,
		       (off_t)(UBLKSRV_CMD_BUF_OFFSET + q_id * max));

	if (p == MAP_FAILED) {
		pmc_err_set(err, errno, "ublk: queue %u: cannot map its descriptors: %s", q_id,
			    strerror(errno));
		return NULL;
	}
	return p;
}

void pmc_ublk_unmap_descs(struct ublksrv_io_desc *d, uint16_t depth)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (depth * sizeof(struct ublksrv_io_desc) + (size_t)pg - 1) / (size_t)pg *
		     (size_t)pg;

	if (d)
		munmap(d, len);
}

int pmc_ublk_queue_cmd(struct pmc_ring *r, int cdev_fd, int use_ioctl, int commit, uint16_t q_id,
		       uint16_t tag, int32_t result, void *buf)
{
	struct ublksrv_io_cmd ic = {
		.q_id = q_id,
		.tag = tag,
		.result = result,
		.addr = (uint64_t)(uintptr_t)buf,
	};
	uint32_t op = commit ? (use_ioctl ? UBLK_U_IO_COMMIT_AND_FETCH_REQ
					  : UBLK_IO_COMMIT_AND_FETCH_REQ)
			     : (use_ioctl ? UBLK_U_IO_FETCH_REQ : UBLK_IO_FETCH_REQ);

	return pmc_ring_uring_cmd(r, cdev_fd, op, &ic, sizeof(ic), ((uint64_t)tag << 1) | 1);
}
