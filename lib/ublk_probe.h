/* ublk_probe.h - what the running kernel's ublk driver can do.
 *
 * pmcache never requires a ublk feature newer than Linux 6.1; it probes and
 * uses what is there. The probe opens /dev/ublk-control and sends control
 * commands as io_uring uring_cmds (IORING_SETUP_SQE128):
 * UBLK_U_CMD_GET_FEATURES (Linux >= 6.5) for the feature mask, and a
 * GET_DEV_INFO for a device that cannot exist in each opcode encoding to
 * learn which encodings the driver accepts (-ENODEV = understood).
 *
 * The 6.1 uapi header (Debian 12's linux-libc-dev) lacks the ioctl-encoded
 * UBLK_U_* opcodes and the UBLK_F_* flags after USER_RECOVERY_REISSUE; they
 * are defined here when missing, so the daemon can use the same names.
 */
#ifndef PMC_UBLK_PROBE_H
#define PMC_UBLK_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <linux/ioctl.h>
#include <linux/ublk_cmd.h>

#include "err.h"

#define PMC_UBLK_CONTROL "/dev/ublk-control"

/* ioctl-encoded control opcodes (Linux >= 6.4; GET_FEATURES >= 6.5) */
#ifndef UBLK_U_CMD_GET_QUEUE_AFFINITY
#define UBLK_U_CMD_GET_QUEUE_AFFINITY _IOR('u', 0x01, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_GET_DEV_INFO _IOR('u', 0x02, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_ADD_DEV _IOWR('u', 0x04, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_DEL_DEV _IOWR('u', 0x05, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_START_DEV _IOWR('u', 0x06, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_STOP_DEV _IOWR('u', 0x07, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_SET_PARAMS _IOWR('u', 0x08, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_GET_PARAMS _IOR('u', 0x09, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_START_USER_RECOVERY _IOWR('u', 0x10, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_END_USER_RECOVERY _IOWR('u', 0x11, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_GET_DEV_INFO2 _IOR('u', 0x12, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_GET_FEATURES
#define UBLK_U_CMD_GET_FEATURES _IOR('u', 0x13, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_DEL_DEV_ASYNC
#define UBLK_U_CMD_DEL_DEV_ASYNC _IOR('u', 0x14, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_UPDATE_SIZE
#define UBLK_U_CMD_UPDATE_SIZE _IOWR('u', 0x15, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_QUIESCE_DEV
#define UBLK_U_CMD_QUIESCE_DEV _IOWR('u', 0x16, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_IO_FETCH_REQ
#define UBLK_U_IO_FETCH_REQ _IOWR('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd)
#define UBLK_U_IO_COMMIT_AND_FETCH_REQ _IOWR('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd)
#define UBLK_U_IO_NEED_GET_DATA _IOWR('u', UBLK_IO_NEED_GET_DATA, struct ublksrv_io_cmd)
#endif
#ifndef UBLK_U_IO_REGISTER_IO_BUF
#define UBLK_U_IO_REGISTER_IO_BUF _IOWR('u', 0x23, struct ublksrv_io_cmd)
#define UBLK_U_IO_UNREGISTER_IO_BUF _IOWR('u', 0x24, struct ublksrv_io_cmd)
#endif

/* UBLK_F_USER_COPY: request data is read and written through /dev/ublkcN
 * at this offset (Linux >= 6.5 uapi; absent from the 6.1 header) */
#ifndef UBLK_TAG_OFF
#define UBLK_IO_BUF_OFF 0
#define UBLK_IO_BUF_BITS 25
#define UBLK_TAG_OFF UBLK_IO_BUF_BITS
#define UBLK_TAG_BITS 16
#define UBLK_QID_OFF (UBLK_TAG_OFF + UBLK_TAG_BITS)
#endif
static inline uint64_t pmc_ublk_user_copy_pos(uint16_t q_id, uint16_t tag)
{
	return UBLKSRV_IO_BUF_OFFSET + ((uint64_t)q_id << UBLK_QID_OFF) +
	       ((uint64_t)tag << UBLK_TAG_OFF);
}

/* feature flags after the 6.1 set (bits 0-4) */
#ifndef UBLK_F_UNPRIVILEGED_DEV
#define UBLK_F_UNPRIVILEGED_DEV (1ULL << 5)
#endif
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#endif
#ifndef UBLK_F_USER_COPY
#define UBLK_F_USER_COPY (1ULL << 7)
#endif
#ifndef UBLK_F_ZONED
#define UBLK_F_ZONED (1ULL << 8)
#endif
#ifndef UBLK_F_USER_RECOVERY_FAIL_IO
#define UBLK_F_USER_RECOVERY_FAIL_IO (1ULL << 9)
#endif
#ifndef UBLK_F_UPDATE_SIZE
#define UBLK_F_UPDATE_SIZE (1ULL << 10)
#endif
#ifndef UBLK_F_AUTO_BUF_REG
#define UBLK_F_AUTO_BUF_REG (1ULL << 11)
#endif
#ifndef UBLK_F_QUIESCE
#define UBLK_F_QUIESCE (1ULL << 12)
#endif
#ifndef UBLK_F_PER_IO_DAEMON
#define UBLK_F_PER_IO_DAEMON (1ULL << 13)
#endif
#ifndef UBLK_F_BUF_REG_OFF_DAEMON
#define UBLK_F_BUF_REG_OFF_DAEMON (1ULL << 14)
#endif

/* flags every ublk driver has had since Linux 6.1 (the assumed set when
 * the kernel predates GET_FEATURES) */
#define PMC_UBLK_F_BASELINE                                                                        \
	(UBLK_F_URING_CMD_COMP_IN_TASK | UBLK_F_NEED_GET_DATA | UBLK_F_USER_RECOVERY |          \
	 UBLK_F_USER_RECOVERY_REISSUE)

struct pmc_ublk_features {
	uint64_t flags;	       /* UBLK_F_* the driver supports */
	int flags_probed;      /* 1: flags came from GET_FEATURES; 0: the kernel
				* predates it and flags is PMC_UBLK_F_BASELINE */
	int ioctl_opcodes;     /* UBLK_U_CMD_* (ioctl-encoded) accepted */
	int legacy_opcodes;    /* UBLK_CMD_* (raw numbers) accepted */
	int get_features_res;  /* GET_FEATURES result: 0 or -errno */
};

/*
 * Probe the ublk driver through ctrl_path (NULL: /dev/ublk-control).
 * Returns 0 and fills *out, or -errno with a message in err:
 * -ENODEV no control node (ublk_drv not loaded or not built),
 * -EACCES/-EPERM not allowed, -EOPNOTSUPP io_uring lacks uring_cmd/SQE128,
 * -EPROTO the driver understands neither opcode encoding.
 */
int pmc_ublk_probe(const char *ctrl_path, struct pmc_ublk_features *out, struct pmc_err *err);

/* Submit the one control command prepared on ring and wait for its
 * completion, through signals: an interrupted wait would leave the command
 * in flight and hand its completion to the next one. Its res, or -errno
 * when it could not be submitted. */
struct io_uring;
int pmc_ublk_ctrl_submit_wait(struct io_uring *ring);

/* Name of feature bit 0..63 without the UBLK_F_ prefix ("USER_COPY"), or
 * NULL for a bit this build does not know. */
const char *pmc_ublk_flag_name(unsigned bit);

/* Write flags as names joined by '|' ("USER_RECOVERY|USER_COPY|bit40"),
 * "none" for 0. Returns the length it needed, like snprintf. */
int pmc_ublk_flags_str(uint64_t flags, char *buf, size_t len);

#endif
