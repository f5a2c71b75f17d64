/* ublk_probe.c - probe the kernel's ublk driver (see ublk_probe.h).
 *
 * Owns nothing past the call: one control fd and one small SQE128 ring,
 * both closed before returning. Each command is a synchronous uring_cmd
 * filled by hand (liburing 2.3 has no uring_cmd prep helper).
 *
 * How answers are read, by kernel:
 * - >= 6.5: GET_FEATURES returns the mask; the opcode check runs before the
 *   device lookup, so a legacy GET_DEV_INFO for a missing device returns
 *   -ENODEV when legacy opcodes are built in and -EOPNOTSUPP when not.
 * - 6.1 .. 6.4: GET_FEATURES is unknown. The device lookup runs before the
 *   opcode switch, so a missing device answers -ENODEV to any opcode and
 *   the encodings cannot be told apart: report the legacy opcodes (always
 *   present there) and the 6.1 feature baseline, flagged as assumed.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ublk_probe.h"

/* kernel-internal ENOTSUPP, which old drivers leak to user space */
#define PMC_ENOTSUPP 524

/* a device id no driver will have allocated */
#define PROBE_DEV_ID 0x7ffffffeu

static const char *const flag_names[] = {
	"SUPPORT_ZERO_COPY",	 "URING_CMD_COMP_IN_TASK", "NEED_GET_DATA",
	"USER_RECOVERY",	 "USER_RECOVERY_REISSUE",  "UNPRIVILEGED_DEV",
	"CMD_IOCTL_ENCODE",	 "USER_COPY",		   "ZONED",
	"USER_RECOVERY_FAIL_IO", "UPDATE_SIZE",		   "AUTO_BUF_REG",
	"QUIESCE",		 "PER_IO_DAEMON",	   "BUF_REG_OFF_DAEMON",
	"BATCH_IO",		 "INTEGRITY",		   "SAFE_STOP_DEV",
	"NO_AUTO_PART_SCAN",	 "SHMEM_ZC",
};

const char *pmc_ublk_flag_name(unsigned bit)
{
	if (bit >= sizeof(flag_names) / sizeof(flag_names[0]))
		return NULL;
	return flag_names[bit];
}

int pmc_ublk_flags_str(uint64_t flags, char *buf, size_t len)
{
	size_t used = 0;
	unsigned bit;
	int n;

	if (len)
		buf[0] = '\0';
	if (!flags)
		return snprintf(buf, len, "none");
	for (bit = 0; bit < 64; bit++) {
		const char *name = pmc_ublk_flag_name(bit);

		if (!(flags & (1ULL << bit)))
			continue;
		if (name)
			n = snprintf(buf + (used < len ? used : len), used < len ? len - used : 0,
				     "%s%s", used ? "|" : "", name);
		else
			n = snprintf(buf + (used < len ? used : len), used < len ? len - used : 0,
				     "%sbit%u", used ? "|" : "", bit);
		if (n < 0)
			return n;
		used += (size_t)n;
	}
	return (int)used;
}

/* One synchronous control command; returns the driver's result or the
 * negative errno of the ring. */
static int ctrl_cmd(struct io_uring *ring, int fd, uint32_t op, uint32_t dev_id, void *buf,
		    uint16_t len)
{
	struct ublksrv_ctrl_cmd cmd;
	struct io_uring_sqe *sqe;

	memset(&cmd, 0, sizeof(cmd));
	cmd.dev_id = dev_id;
	cmd.queue_id = (uint16_t)-1;
	cmd.len = len;
	cmd.addr = (uint64_t)(uintptr_t)buf;

	sqe = io_uring_get_sqe(ring);
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* an SQE128 slot */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	sqe->user_data = op;
	_Static_assert(sizeof(cmd) <= 80, "ublksrv_ctrl_cmd fits the SQE128 payload");
	memcpy(sqe->cmd, &cmd, sizeof(cmd));

	return pmc_ublk_ctrl_submit_wait(ring);
}

int pmc_ublk_ctrl_submit_wait(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int ret;

	do
		ret = io_uring_submit(ring);
	while (ret == -EINTR || (ret == 0 && io_uring_sq_ready(ring)));
	if (ret < 0)
		return ret;
	do
		ret = io_uring_wait_cqe(ring, &cqe);
	while (ret == -EINTR);
	if (ret < 0)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

static int not_understood(int res)
{
	return res == -EOPNOTSUPP || res == -PMC_ENOTSUPP || res == -EINVAL || res == -ENOTTY ||
	       res == -ENODEV;
}

int pmc_ublk_probe(const char *ctrl_path, struct pmc_ublk_features *out, struct pmc_err *err)
{
	struct pmc_ublk_features f;
	struct ublksrv_ctrl_dev_info info;
	struct io_uring ring;
	uint64_t mask = 0;
	int fd, ret, res;

	if (!ctrl_path)
		ctrl_path = PMC_UBLK_CONTROL;
	memset(&f, 0, sizeof(f));

	fd = open(ctrl_path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = errno;
		if (ret == ENOENT || ret == ENXIO || ret == ENODEV)
			return pmc_err_set(err, ENODEV,
					   "%s: no such device (ublk_drv not loaded, or a kernel "
					   "without CONFIG_BLK_DEV_UBLK such as Debian 12's 6.1)",
					   ctrl_path);
		return pmc_err_set(err, ret, "%s: open: %s", ctrl_path, strerror(ret));
	}

	ret = io_uring_queue_init(4, &ring, IORING_SETUP_SQE128);
	if (ret < 0) {
		if (ret == -EINVAL)
			ret = pmc_err_set(err, EOPNOTSUPP,
					  "io_uring without IORING_SETUP_SQE128 (kernel < 5.19)");
		else
			ret = pmc_err_set(err, -ret, "io_uring_queue_init: %s", strerror(-ret));
		goto out_close;
	}

	res = ctrl_cmd(&ring, fd, UBLK_U_CMD_GET_FEATURES, PROBE_DEV_ID, &mask, sizeof(mask));
	f.get_features_res = res;
	if (res == 0) {
		f.flags = mask;
		f.flags_probed = 1;
		f.ioctl_opcodes = 1; /* GET_FEATURES is itself ioctl-encoded */
		memset(&info, 0, sizeof(info));
		res = ctrl_cmd(&ring, fd, UBLK_CMD_GET_DEV_INFO, PROBE_DEV_ID, &info,
			       sizeof(info));
		if (res == -ENODEV)
			f.legacy_opcodes = 1;
		else if (res != -EOPNOTSUPP && res != -PMC_ENOTSUPP) {
			ret = pmc_err_set(err, EPROTO,
					  "%s: legacy GET_DEV_INFO of a missing device: "
					  "unexpected result %d",
					  ctrl_path, res);
			goto out_ring;
		}
	} else if (res == -EPERM || res == -EACCES) {
		ret = pmc_err_set(err, -res, "%s: GET_FEATURES: %s (needs CAP_SYS_ADMIN here)",
				  ctrl_path, strerror(-res));
		goto out_ring;
	} else if (not_understood(res)) {
		/* before 6.5: only the legacy encoding is known to work */
		f.flags = PMC_UBLK_F_BASELINE;
		f.flags_probed = 0;
		f.legacy_opcodes = 1;
		memset(&info, 0, sizeof(info));
		res = ctrl_cmd(&ring, fd, UBLK_CMD_GET_DEV_INFO, PROBE_DEV_ID, &info,
			       sizeof(info));
		if (res != -ENODEV) {
			ret = pmc_err_set(err, EPROTO,
					  "%s: neither GET_FEATURES (%d) nor legacy GET_DEV_INFO "
					  "(%d) is understood",
					  ctrl_path, f.get_features_res, res);
			goto out_ring;
		}
	} else {
		ret = pmc_err_set(err, res < 0 ? -res : EPROTO, "%s: GET_FEATURES: %s", ctrl_path,
				  res < 0 ? strerror(-res) : "positive result");
		goto out_ring;
	}
	*out = f;
	ret = 0;
out_ring:
	io_uring_queue_exit(&ring);
out_close:
	close(fd);
	return ret;
}
