/* ublk_ceiling.c - pmc-ublk-ceiling: a minimal RAM-backed ublk target, the
 * ceiling of the ublk transport in the peer benchmark (tests/bench/peers).
 *
 * It does what any ublk server must do and nothing else: a READ copies from
 * a RAM array into the tag's buffer, a WRITE copies the other way, FLUSH
 * returns at once. So a ublk cache can at best approach its IOPS on the same
 * kernel and fio jobs; pmcache's ratio to it is pmcache's own cost.
 *
 * The queue loop has the shape of the best ublk servers (kublk, SPDK): one
 * thread and one io_uring per queue, the ublk char device registered as a
 * fixed file, the ring made with COOP_TASKRUN | SINGLE_ISSUER |
 * DEFER_TASKRUN where the kernel has them; every completion reaped is
 * handled by preparing its COMMIT_AND_FETCH only, then one
 * io_uring_submit_and_wait for all of them. Data moves as pmcached's does:
 * with UBLK_F_USER_COPY where the driver has it (one pread or pwrite of
 * /dev/ublkcN straight between the request and the RAM: one copy, no tag
 * buffer, no page pinning per request), else through per-tag buffers (-b
 * forces them, as PMCACHED_NO_USER_COPY=1 does for pmcached).
 *
 * The RAM is an anonymous mapping of the device size, allocated by the
 * kernel on first touch (MAP_NORESERVE), as are the tag buffers. Nothing
 * is persistent: a benchmark device, not a disk. Control commands use
 * lib/ublk.h.
 *
 * With -F DISK it is instead the floor of any ublk server in front of that
 * disk (a plain ublk loop target, "ublkloop" in the peer benchmark): every
 * request is forwarded to DISK with io_uring, O_DIRECT, through the tag's
 * buffer (a READ reads the disk into it and then hands it to the request,
 * a WRITE takes the request's data into it and then writes the disk; with
 * user copy each hand-over is one pwrite or pread of /dev/ublkcN), a FUA
 * write is RWF_DSYNC and a FLUSH an fdatasync, both through the same ring;
 * the device advertises a volatile cache and FUA, as the disk has them.
 * Nothing is cached: what a ublk cache in front of DISK costs beyond it is
 * its own work.
 *
 * usage: pmc-ublk-ceiling [-d ID] [-s MIB] [-q QUEUES] [-D DEPTH] [-m KIB] [-b]
 *   -d ID      ublk device id (default: the driver chooses)
 *   -s MIB     device size (default 1024)
 *   -q QUEUES  hardware queues, one thread each (default 2, as pmcached)
 *   -D DEPTH   tags per queue (default 128, as pmcached)
 *   -m KIB     largest request (default 1024)
 *   -b         tag buffers even where the driver has user copy
 *   -F DISK    forward every request to DISK (a block device or a file)
 *              instead of serving it from RAM; the device size defaults to
 *              DISK's
 *   -M MIB:PATH the RAM is a shared mapping of MIB MiB of PATH (a devdax
 *              device: what page pinning costs on pmem against anonymous
 *              memory); device offsets wrap at MIB, so data is not kept
 * Prints "ready: /dev/ublkbN queues Q depth D max_io K KiB ring flags F
 * copy user|tag-buffers[ forward DISK]"
 * once the device is live, serves until SIGTERM or SIGINT, then stops and
 * deletes it and prints the requests served per queue. Exit 0, or 1 with
 * one line naming what failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "err.h"
#include "ublk.h"

struct ceil_queue {
	uint16_t q_id;
	pthread_t thread;
	struct io_uring ring;
	struct ublksrv_io_desc *descs; /* shared with the driver, read-only */
	char *bufs;		       /* depth tag buffers of max_io bytes */
	unsigned ring_flags;	       /* IORING_SETUP_* in use */
	uint64_t served;	       /* requests committed */
	int ready;		       /* 1 once every FETCH was submitted, -errno on failure */
	char msg[160];
};

static struct {
	int cdev_fd;
	int use_ioctl;
	int user_copy;
	uint32_t dev_id;
	uint16_t nr_queues;
	uint16_t depth;
	uint32_t max_io;
	uint64_t size;
	char *ram;
	uint64_t ram_len; /* g.size, or the -M mapping's length (offsets wrap) */
	int disk_fd;	  /* -F: the disk every request goes to, fixed file 1; else -1 */
	volatile int stopping;
	struct ceil_queue *q;
} g = {.cdev_fd = -1,
       .disk_fd = -1,
       .nr_queues = 2,
       .depth = 128,
       .max_io = 1 << 20,
       .size = 1ULL << 30};

/* the tag's buffer (tag buffers or -F), or NULL with user copy and RAM */
static char *tag_buf(const struct ceil_queue *q, uint16_t tag)
{
	return q->bufs ? q->bufs + (size_t)tag * g.max_io : NULL;
}

/* one FETCH or COMMIT_AND_FETCH of tag on the queue's ring, on fixed file 0 */
static void prep_io_cmd(struct ceil_queue *q, int commit, uint16_t tag, int32_t result)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct ublksrv_io_cmd ic = {
	    .q_id = q->q_id,
	    .tag = tag,
	    .result = result,
	    .addr = g.user_copy ? 0 : (uint64_t)(uintptr_t)tag_buf(q, tag),
	};

	/* the ring has depth entries and a tag has at most one command out */
	if (!sqe)
		abort();
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = 0;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->cmd_op = commit ? (g.use_ioctl ? UBLK_U_IO_COMMIT_AND_FETCH_REQ
					    : UBLK_IO_COMMIT_AND_FETCH_REQ)
			     : (g.use_ioctl ? UBLK_U_IO_FETCH_REQ : UBLK_IO_FETCH_REQ);
	sqe->user_data = tag;
	memcpy(sqe->cmd, &ic, sizeof(ic));
}

/* the request of tag: its result (bytes or -errno) */
static int32_t serve(struct ceil_queue *q, uint16_t tag)
{
	const struct ublksrv_io_desc *d = &q->descs[tag];
	uint64_t off = d->start_sector << 9, len = (uint64_t)d->nr_sectors << 9;
	char *buf = tag_buf(q, tag); /* NULL with user copy */
	uint8_t op = ublksrv_get_op(d);
	off_t pos = (off_t)pmc_ublk_user_copy_pos(q->q_id, tag);

	if (op == UBLK_IO_OP_FLUSH)
		return 0;
	if (off > g.size || len > g.size - off)
		return -EIO;
	/* -M: a smaller mapping serves the device's offsets wrapped */
	if (g.ram_len < g.size)
		off = off % g.ram_len + len <= g.ram_len ? off % g.ram_len : 0;
	switch (op) {
	case UBLK_IO_OP_READ:
		if (len > g.max_io)
			return -EIO;
		if (!buf)
			return pwrite(g.cdev_fd, g.ram + off, len, pos) == (ssize_t)len ? (int32_t)len
										 : -EIO;
		memcpy(buf, g.ram + off, len);
		return (int32_t)len;
	case UBLK_IO_OP_WRITE:
		if (len > g.max_io)
			return -EIO;
		if (!buf)
			return pread(g.cdev_fd, g.ram + off, len, pos) == (ssize_t)len ? (int32_t)len
										: -EIO;
		memcpy(g.ram + off, buf, len);
		return (int32_t)len;
	case UBLK_IO_OP_DISCARD:
	case UBLK_IO_OP_WRITE_ZEROES:
		memset(g.ram + off, 0, len);
		return (int32_t)len;
	default:
		return -EOPNOTSUPP;
	}
}

/* -F: a disk I/O's user_data is its tag with this bit; a ublk command's
 * is the tag alone */
#define UD_DISK (1u << 16)

/* -F: start forwarding the request of tag to the disk. Returns 0 once its
 * disk I/O is prepared (the commit comes with its completion), else the
 * request's result to commit now. */
static int32_t fwd_start(struct ceil_queue *q, uint16_t tag)
{
	const struct ublksrv_io_desc *d = &q->descs[tag];
	uint64_t off = d->start_sector << 9, len = (uint64_t)d->nr_sectors << 9;
	char *buf = tag_buf(q, tag);
	uint8_t op = ublksrv_get_op(d);
	struct io_uring_sqe *sqe;

	if (op != UBLK_IO_OP_FLUSH && op != UBLK_IO_OP_READ && op != UBLK_IO_OP_WRITE)
		return -EOPNOTSUPP;
	if (op != UBLK_IO_OP_FLUSH && (off > g.size || len > g.size - off || len > g.max_io))
		return -EIO;
	/* the request's data into the tag buffer before the disk write */
	if (op == UBLK_IO_OP_WRITE && g.user_copy &&
	    pread(g.cdev_fd, buf, len, (off_t)pmc_ublk_user_copy_pos(q->q_id, tag)) != (ssize_t)len)
		return -EIO;
	/* the ring has room for a disk I/O of every tag beside its command */
	sqe = io_uring_get_sqe(&q->ring);
	if (!sqe)
		abort();
	if (op == UBLK_IO_OP_FLUSH) {
		io_uring_prep_fsync(sqe, 1, IORING_FSYNC_DATASYNC);
	} else if (op == UBLK_IO_OP_READ) {
		io_uring_prep_read(sqe, 1, buf, (unsigned)len, off);
	} else {
		io_uring_prep_write(sqe, 1, buf, (unsigned)len, off);
		if (ublksrv_get_flags(d) & (UBLK_IO_F_FUA >> 8))
			sqe->rw_flags = RWF_DSYNC;
	}
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = tag | UD_DISK;
	return 0;
}

/* -F: the disk I/O of tag completed with res: the request's result */
static int32_t fwd_done(struct ceil_queue *q, uint16_t tag, int32_t res)
{
	const struct ublksrv_io_desc *d = &q->descs[tag];
	uint64_t len = (uint64_t)d->nr_sectors << 9;
	uint8_t op = ublksrv_get_op(d);

	if (res < 0)
		return res;
	if (op == UBLK_IO_OP_FLUSH)
		return 0;
	if ((uint64_t)res != len)
		return -EIO;
	/* the data read from the disk to the request */
	if (op == UBLK_IO_OP_READ && g.user_copy &&
	    pwrite(g.cdev_fd, tag_buf(q, tag), len, (off_t)pmc_ublk_user_copy_pos(q->q_id, tag)) !=
		(ssize_t)len)
		return -EIO;
	return res;
}

static int ring_init(struct ceil_queue *q)
{
	static const unsigned tries[] = {
		IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
			IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_SQE128,
	};
	int rc = -EINVAL;

	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct io_uring_params p = {.flags = tries[i]};

		/* -F: a disk I/O per tag beside its command */
		rc = io_uring_queue_init_params(g.disk_fd >= 0 ? 2u * g.depth : g.depth, &q->ring,
						&p);
		if (!rc) {
			q->ring_flags = tries[i];
			return 0;
		}
		if (rc != -EINVAL)
			break;
	}
	snprintf(q->msg, sizeof(q->msg), "queue %u: io_uring_queue_init: %s", q->q_id,
		 strerror(-rc));
	return rc;
}

static void *queue_main(void *arg)
{
	struct ceil_queue *q = arg;
	struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
	unsigned outstanding = g.depth, idle = 0;
	int fds[2] = {g.cdev_fd, g.disk_fd};
	int rc;

	rc = ring_init(q);
	if (rc) {
		__atomic_store_n(&q->ready, rc, __ATOMIC_RELEASE);
		return NULL;
	}
	rc = io_uring_register_files(&q->ring, fds, g.disk_fd >= 0 ? 2 : 1);
	if (rc) {
		snprintf(q->msg, sizeof(q->msg), "queue %u: register /dev/ublkc%u%s: %s", q->q_id,
			 g.dev_id, g.disk_fd >= 0 ? " and the disk" : "", strerror(-rc));
		io_uring_queue_exit(&q->ring);
		__atomic_store_n(&q->ready, rc, __ATOMIC_RELEASE);
		return NULL;
	}
	for (uint16_t t = 0; t < g.depth; t++)
		prep_io_cmd(q, 0, t, -1);
	__atomic_store_n(&q->ready, 1, __ATOMIC_RELEASE);

	/* a tag's command completes with a request (OK) or with ABORT once the
	 * device stops; the loop ends when no tag has a command outstanding */
	while (outstanding) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		rc = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);
		if (rc == -ETIME || rc == -EINTR) {
			/* kernels that cancel the commands only on ring exit */
			if (g.stopping && ++idle > 20)
				break;
			continue;
		}
		if (rc < 0) {
			snprintf(q->msg, sizeof(q->msg), "queue %u: io_uring wait: %s", q->q_id,
				 strerror(-rc));
			break;
		}
		io_uring_for_each_cqe(&q->ring, head, cqe)
		{
			uint16_t tag = (uint16_t)cqe->user_data;
			int32_t res;

			n++;
			if (cqe->user_data & UD_DISK) {
				res = fwd_done(q, tag, cqe->res);
			} else if (cqe->res != UBLK_IO_RES_OK) {
				outstanding--; /* ABORT: the device is going away */
				continue;
			} else if (g.disk_fd < 0) {
				res = serve(q, tag);
			} else if ((res = fwd_start(q, tag)) == 0) {
				continue; /* committed when its disk I/O completes */
			}
			prep_io_cmd(q, 1, tag, res);
			q->served++;
		}
		io_uring_cq_advance(&q->ring, n);
	}
	io_uring_queue_exit(&q->ring);
	return NULL;
}

static int parse_u(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end || *v < min || *v > max ? -1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pmc-ublk-ceiling [-d ID] [-s MIB] [-q QUEUES] [-D DEPTH] [-m KIB] [-b]\n"
		"                        [-M MIB:PATH | -F DISK]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct pmc_err err = {0};
	struct pmc_ublk_ctrl *ctrl = NULL;
	struct ublksrv_ctrl_dev_info info;
	struct ublk_params p;
	int dev_id = -1, o, rc = 1, started = 0;
	uint16_t nq_started = 0;
	uint64_t v;
	int tag_bufs = 0;
	const char *mem_path = NULL, *disk_path = NULL;
	int size_given = 0;
	sigset_t ss;

	while ((o = getopt(argc, argv, "d:s:q:D:m:bM:F:")) != -1) {
		switch (o) {
		case 'F':
			disk_path = optarg;
			break;
		case 'M': {
			char *colon = strchr(optarg, ':');

			if (!colon)
				usage();
			*colon = '\0';
			if (parse_u(optarg, 2, 1 << 20, &v))
				usage();
			g.ram_len = v << 20;
			mem_path = colon + 1;
			break;
		}
		case 'b':
			tag_bufs = 1;
			break;
		case 'd':
			if (parse_u(optarg, 0, 1 << 20, &v))
				usage();
			dev_id = (int)v;
			break;
		case 's':
			if (parse_u(optarg, 1, 1 << 20, &v))
				usage();
			g.size = v << 20;
			size_given = 1;
			break;
		case 'q':
			if (parse_u(optarg, 1, 64, &v))
				usage();
			g.nr_queues = (uint16_t)v;
			break;
		case 'D':
			if (parse_u(optarg, 1, UBLK_MAX_QUEUE_DEPTH, &v))
				usage();
			g.depth = (uint16_t)v;
			break;
		case 'm':
			if (parse_u(optarg, 4, 1 << 20, &v) || v % 4)
				usage();
			g.max_io = (uint32_t)(v << 10);
			break;
		default:
			usage();
		}
	}
	if (optind != argc || (mem_path && disk_path))
		usage();

	if (disk_path) {
		off_t end;

		g.disk_fd = open(disk_path, O_RDWR | O_DIRECT);
		end = g.disk_fd < 0 ? -1 : lseek(g.disk_fd, 0, SEEK_END);
		if (end < 0) {
			fprintf(stderr, "pmc-ublk-ceiling: %s: %s\n", disk_path, strerror(errno));
			return 1;
		}
		if (!size_given)
			g.size = (uint64_t)end & ~4095ULL;
		if (g.size == 0 || g.size > (uint64_t)end) {
			fprintf(stderr,
				"pmc-ublk-ceiling: %s: %" PRIu64
				" bytes, not enough for a device of %" PRIu64 " MiB\n",
				disk_path, (uint64_t)end, g.size >> 20);
			return 1;
		}
	} else if (mem_path) {
		int fd = open(mem_path, O_RDWR);

		g.ram = fd < 0 ? MAP_FAILED
			       : mmap(NULL, g.ram_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (g.ram == MAP_FAILED) {
			fprintf(stderr, "pmc-ublk-ceiling: %s: %s\n", mem_path, strerror(errno));
			return 1;
		}
		close(fd); /* the mapping keeps the device */
	} else {
		g.ram_len = g.size;
		g.ram = mmap(NULL, g.size, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	g.q = calloc(g.nr_queues, sizeof(*g.q));
	if (g.ram == MAP_FAILED || !g.q) {
		fprintf(stderr, "pmc-ublk-ceiling: %" PRIu64 " MiB of RAM: %s\n", g.size >> 20,
			strerror(errno));
		return 1;
	}
	/* signals go to sigwait below, not to the queue threads */
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);

	if (pmc_ublk_ctrl_open(&ctrl, &err))
		goto out;
	g.use_ioctl = ctrl->use_ioctl;
	g.user_copy = (ctrl->feat.flags & UBLK_F_USER_COPY) && !tag_bufs;
	if (pmc_ublk_add(ctrl, dev_id, g.nr_queues, g.depth, g.max_io,
			 g.user_copy ? UBLK_F_USER_COPY : 0, &info, &err))
		goto out;
	g.dev_id = info.dev_id;
	memset(&p, 0, sizeof(p));
	p.types = UBLK_PARAM_TYPE_BASIC;
	p.basic.logical_bs_shift = 12; /* as pmcached's devices */
	p.basic.physical_bs_shift = 12;
	p.basic.io_min_shift = 12;
	p.basic.io_opt_shift = 12;
	p.basic.max_sectors = g.max_io >> 9;
	p.basic.dev_sectors = g.size >> 9;
	if (g.disk_fd >= 0) /* flushes and FUA pass to the disk */
		p.basic.attrs = UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA;
	if (pmc_ublk_set_params(ctrl, g.dev_id, &p, &err) ||
	    pmc_ublk_open_cdev(g.dev_id, 5000, &g.cdev_fd, &err))
		goto out_del;
	for (uint16_t i = 0; i < g.nr_queues; i++) {
		struct ceil_queue *q = &g.q[i];

		q->q_id = i;
		q->descs = pmc_ublk_map_descs(g.cdev_fd, i, g.depth, &err);
		if (!q->descs)
			goto out_stop;
		if (g.user_copy && g.disk_fd < 0)
			q->bufs = NULL; /* the data moves by pread/pwrite of the device */
		else
			/* -F: faulted in now, so that no request pays a page
			 * fault the servers it is the floor of do not */
			q->bufs = mmap(NULL, (size_t)g.depth * g.max_io, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS |
					   (g.disk_fd >= 0 ? MAP_POPULATE : MAP_NORESERVE),
				       -1, 0);
		if (q->bufs == MAP_FAILED) {
			q->bufs = NULL;
			pmc_err_set(&err, errno, "queue %u: tag buffers: %s", i, strerror(errno));
			goto out_stop;
		}
		if (pthread_create(&q->thread, NULL, queue_main, q)) {
			pmc_err_set(&err, EAGAIN, "queue %u: no thread", i);
			goto out_stop;
		}
		nq_started++;
		while (!__atomic_load_n(&q->ready, __ATOMIC_ACQUIRE))
			usleep(1000);
		if (q->ready < 0) {
			pmc_err_set(&err, -q->ready, "%s", q->msg);
			goto out_stop;
		}
	}
	/* START_DEV returns once every tag of every queue has its FETCH */
	if (pmc_ublk_start(ctrl, g.dev_id, &err))
		goto out_stop;
	started = 1;
	printf("ready: /dev/ublkb%u queues %u depth %u max_io %u KiB ring flags 0x%x copy %s%s%s\n",
	       g.dev_id, g.nr_queues, g.depth, g.max_io >> 10, g.q[0].ring_flags,
	       g.user_copy ? "user" : "tag-buffers", disk_path ? " forward " : "",
	       disk_path ? disk_path : "");
	fflush(stdout);
	sigwait(&ss, &o);
	rc = 0;

out_stop:
	/* a started device aborts every outstanding FETCH on STOP_DEV; one
	 * never started has none to abort, so its threads time out */
	if (pmc_ublk_stop(ctrl, g.dev_id, started ? &err : &(struct pmc_err){0}) && started)
		rc = 1;
	g.stopping = 1;
	for (uint16_t i = 0; i < nq_started; i++) {
		pthread_join(g.q[i].thread, NULL);
		if (g.q[i].msg[0] && g.q[i].ready > 0) {
			fprintf(stderr, "pmc-ublk-ceiling: %s\n", g.q[i].msg);
			rc = 1;
		}
		printf("queue %u: %" PRIu64 " requests\n", i, g.q[i].served);
	}
	for (uint16_t i = 0; i < g.nr_queues; i++) {
		pmc_ublk_unmap_descs(g.q[i].descs, g.depth);
		if (g.q[i].bufs)
			munmap(g.q[i].bufs, (size_t)g.depth * g.max_io);
	}
	/* DEL_DEV waits until nothing holds /dev/ublkcN open */
	if (g.cdev_fd >= 0)
		close(g.cdev_fd);
	if (g.disk_fd >= 0)
		close(g.disk_fd);
out_del:
	if (pmc_ublk_del(ctrl, g.dev_id, rc ? &(struct pmc_err){0} : &err))
		rc = 1;
out:
	if (err.msg[0]) {
		fprintf(stderr, "pmc-ublk-ceiling: %s\n", err.msg);
		rc = 1;
	}
	pmc_ublk_ctrl_close(ctrl);
	return rc;
}
