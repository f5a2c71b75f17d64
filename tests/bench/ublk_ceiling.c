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
 * usage: pmc-ublk-ceiling [-d ID] [-s MIB] [-q QUEUES] [-D DEPTH] [-m KIB] [-b]
 *   -d ID      ublk device id (default: the driver chooses)
 *   -s MIB     device size (default 1024)
 *   -q QUEUES  hardware queues, one thread each (default 2, as pmcached)
 *   -D DEPTH   tags per queue (default 128, as pmcached)
 *   -m KIB     largest request (default 1024)
 *   -b         tag buffers even where the driver has user copy
 *   -M MIB:PATH the RAM is a shared mapping of MIB MiB of PATH (a devdax
 *              device: what page pinning costs on pmem against anonymous
 *              memory); device offsets wrap at MIB, so data is not kept
 * Prints "ready: /dev/ublkbN queues Q depth D max_io K KiB ring flags F
 * copy user|tag-buffers"
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
	volatile int stopping;
	struct ceil_queue *q;
} g = {.cdev_fd = -1, .nr_queues = 2, .depth = 128, .max_io = 1 << 20, .size = 1ULL << 30};

/* one FETCH or COMMIT_AND_FETCH of tag on the queue's ring, on fixed file 0 */
static void prep_io_cmd(struct ceil_queue *q, int commit, uint16_t tag, int32_t result)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct ublksrv_io_cmd ic = {
		.q_id = q->q_id,
		.tag = tag,
		.result = result,
		.addr = g.user_copy ? 0 : (uint64_t)(uintptr_t)(q->bufs + (size_t)tag * g.max_io),
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
	char *buf = g.user_copy ? NULL : q->bufs + (size_t)tag * g.max_io;
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

		rc = io_uring_queue_init_params(g.depth, &q->ring, &p);
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
	int rc;

	rc = ring_init(q);
	if (rc) {
		__atomic_store_n(&q->ready, rc, __ATOMIC_RELEASE);
		return NULL;
	}
	rc = io_uring_register_files(&q->ring, &g.cdev_fd, 1);
	if (rc) {
		snprintf(q->msg, sizeof(q->msg), "queue %u: register /dev/ublkc%u: %s", q->q_id,
			 g.dev_id, strerror(-rc));
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

			n++;
			if (cqe->res != UBLK_IO_RES_OK) {
				outstanding--; /* ABORT: the device is going away */
				continue;
			}
			prep_io_cmd(q, 1, tag, serve(q, tag));
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
		"                        [-M MIB:PATH]\n");
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
	const char *mem_path = NULL;
	sigset_t ss;

	while ((o = getopt(argc, argv, "d:s:q:D:m:bM:")) != -1) {
		switch (o) {
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
	if (optind != argc)
		usage();

	if (mem_path) {
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
	if (pmc_ublk_set_params(ctrl, g.dev_id, &p, &err) ||
	    pmc_ublk_open_cdev(g.dev_id, 5000, &g.cdev_fd, &err))
		goto out_del;
	for (uint16_t i = 0; i < g.nr_queues; i++) {
		struct ceil_queue *q = &g.q[i];

		q->q_id = i;
		q->descs = pmc_ublk_map_descs(g.cdev_fd, i, g.depth, &err);
		if (!q->descs)
			goto out_stop;
		if (g.user_copy)
			q->bufs = NULL; /* the data moves by pread/pwrite of the device */
		else
			q->bufs = mmap(NULL, (size_t)g.depth * g.max_io, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
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
	printf("ready: /dev/ublkb%u queues %u depth %u max_io %u KiB ring flags 0x%x copy %s\n",
	       g.dev_id, g.nr_queues, g.depth, g.max_io >> 10, g.q[0].ring_flags,
	       g.user_copy ? "user" : "tag-buffers");
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
