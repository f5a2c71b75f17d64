/* ring.c - see ring.h.
 *
 * Owns one io_uring, its eventfd, the FIFO backlog of I/O waiting for a
 * free slot, and a short list of deferred work (fault injection: delayed
 * submissions and completions). Invariants: inflight <= depth; an io is in
 * at most one of {the kernel, the backlog, the deferred list}; callbacks run
 * only from pmc_ring_poll().
 *
 * Locking: none. A ring belongs to one thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "log.h"
#include "pmem.h"
#include "ring.h"

#define FIXED_CHUNK (1ull << 30) /* io_uring's largest registered buffer */
#define FIXED_MAX 16384u

struct pmc_ring {
	struct io_uring uring;
	unsigned depth;
	unsigned inflight;
	int efd;
	struct pmc_io *backlog, *backlog_tail;
	unsigned nbacklog;
	struct pmc_io *deferred;
	unsigned ndeferred;
	char *fixed_base;
	uint64_t fixed_len;
	int fixed;
	int fixed_err;
	uint64_t submitted, short_retries, eagain_retries;
	int sqe128;
	void (*foreign)(void *arg, uint64_t user_data, int res);
	void *foreign_arg;
	unsigned nforeign;	/* foreign commands in flight (not in inflight) */
};

uint64_t pmc_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void register_pmem(struct pmc_ring *r, struct pmc_pmem *pm)
{
	unsigned n = (unsigned)((pm->size + FIXED_CHUNK - 1) / FIXED_CHUNK);
	struct iovec *iov;
	int rc;

	if (n > FIXED_MAX) {
		r->fixed_err = E2BIG;
		return;
	}
	iov = calloc(n, sizeof(*iov));
	if (!iov) {
		r->fixed_err = ENOMEM;
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = (uint64_t)i * FIXED_CHUNK;

		iov[i].iov_base = pm->base + off;
		iov[i].iov_len = pm->size - off < FIXED_CHUNK ? pm->size - off : FIXED_CHUNK;
	}
	rc = io_uring_register_buffers(&r->uring, iov, n);
	free(iov);
	if (rc) {
		r->fixed_err = -rc;
		return;
	}
	r->fixed = 1;
	r->fixed_base = pm->base;
	r->fixed_len = pm->size;
}

int pmc_ring_create(unsigned depth, struct pmc_pmem *pm, struct pmc_ring **out,
		    struct pmc_err *err)
{
	return pmc_ring_create_opts(depth, pm, NULL, out, err);
}

int pmc_ring_create_opts(unsigned depth, struct pmc_pmem *pm, const struct pmc_ring_opts *o,
			 struct pmc_ring **out, struct pmc_err *err)
{
	struct pmc_ring *r;
	unsigned entries;
	int rc;

	*out = NULL;
	if (depth < 1 || depth > 4096)
		return pmc_err_set(err, EINVAL, "ring depth %u: not between 1 and 4096", depth);
	r = calloc(1, sizeof(*r));
	if (!r)
		return pmc_err_set(err, ENOMEM, "ring: out of memory");
	r->depth = depth;
	if (o) {
		r->sqe128 = o->sqe128;
		r->foreign = o->foreign;
		r->foreign_arg = o->arg;
	}
	/* foreign commands (one per ublk tag) sit in the ring beside the I/O */
	entries = r->foreign ? 2 * depth : depth;
	rc = io_uring_queue_init(entries, &r->uring, r->sqe128 ? IORING_SETUP_SQE128 : 0);
	if (rc) {
		free(r);
		return pmc_err_set(err, -rc, "io_uring: cannot set up a ring of %u: %s", depth,
				   strerror(-rc));
	}
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0 || io_uring_register_eventfd(&r->uring, r->efd) != 0) {
		rc = pmc_err_set(err, errno ? errno : EIO, "io_uring: cannot register an eventfd");
		if (r->efd >= 0)
			close(r->efd);
		io_uring_queue_exit(&r->uring);
		free(r);
		return rc;
	}
	if (pm)
		register_pmem(r, pm);
	*out = r;
	return 0;
}

void pmc_ring_destroy(struct pmc_ring *r)
{
	if (!r)
		return;
	io_uring_queue_exit(&r->uring);
	close(r->efd);
	free(r);
}

unsigned pmc_ring_waitable(struct pmc_ring *r)
{
	return pmc_ring_busy(r) + r->nforeign;
}

int pmc_ring_eventfd(struct pmc_ring *r)
{
	return r->efd;
}

unsigned pmc_ring_busy(struct pmc_ring *r)
{
	return r->inflight + r->nbacklog + r->ndeferred;
}

void pmc_ring_get_info(struct pmc_ring *r, struct pmc_ring_info *info)
{
	memset(info, 0, sizeof(*info));
	info->depth = r->depth;
	info->fixed = r->fixed;
	info->fixed_err = r->fixed_err;
	info->submitted = r->submitted;
	info->short_retries = r->short_retries;
	info->eagain_retries = r->eagain_retries;
}

/* fixed buffer index for a single segment inside one registered chunk */
static int fixed_index(struct pmc_ring *r, const struct iovec *iov)
{
	const char *p = iov->iov_base;
	uint64_t off;

	if (!r->fixed || p < r->fixed_base || p >= r->fixed_base + r->fixed_len)
		return -1;
	off = (uint64_t)(p - r->fixed_base);
	if (off / FIXED_CHUNK != (off + iov->iov_len - 1) / FIXED_CHUNK)
		return -1;
	return (int)(off / FIXED_CHUNK);
}

static void prep(struct pmc_ring *r, struct io_uring_sqe *sqe, struct pmc_io *io)
{
	int fd = io->disk->fd, idx;
	uint64_t off = io->off + io->done;

	switch (io->op) {
	case PMC_IO_READ:
	case PMC_IO_WRITE:
		idx = io->iovcnt == 1 ? fixed_index(r, io->iov) : -1;
		if (idx >= 0 && io->op == PMC_IO_READ)
			io_uring_prep_read_fixed(sqe, fd, io->iov->iov_base,
						 (unsigned)io->iov->iov_len, off, idx);
		else if (idx >= 0)
			io_uring_prep_write_fixed(sqe, fd, io->iov->iov_base,
						  (unsigned)io->iov->iov_len, off, idx);
		else if (io->op == PMC_IO_READ)
			io_uring_prep_readv(sqe, fd, io->iov, (unsigned)io->iovcnt, off);
		else
			io_uring_prep_writev(sqe, fd, io->iov, (unsigned)io->iovcnt, off);
		sqe->rw_flags = io->rw_flags;
		break;
	case PMC_IO_FSYNC:
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		break;
	case PMC_IO_DISCARD:
		io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)io->off, (off_t)io->len);
		break;
	}
	io_uring_sqe_set_data(sqe, io);
}

void pmc_ring_submit_raw(struct pmc_ring *r, struct pmc_io *io)
{
	struct io_uring_sqe *sqe = NULL;

	if (r->inflight < r->depth)
		sqe = io_uring_get_sqe(&r->uring);
	if (!sqe) {
		io->next = NULL;
		if (r->backlog_tail)
			r->backlog_tail->next = io;
		else
			r->backlog = io;
		r->backlog_tail = io;
		r->nbacklog++;
		return;
	}
	prep(r, sqe, io);
	r->inflight++;
	r->submitted++;
	io_uring_submit(&r->uring);
}

int pmc_ring_uring_cmd(struct pmc_ring *r, int fd, uint32_t cmd_op, const void *payload,
		       unsigned len, uint64_t user_data)
{
	struct io_uring_sqe *sqe;

	if (!r->sqe128 || len > 80 || !(user_data & 1))
		return -EINVAL;
	sqe = io_uring_get_sqe(&r->uring);
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	memcpy(sqe->cmd, payload, len);
	sqe->user_data = user_data;
	r->nforeign++;
	r->submitted++;
	io_uring_submit(&r->uring);
	return 0;
}

void pmc_ring_submit(struct pmc_ring *r, struct pmc_io *io)
{
	io->done = 0;
	io->disk->ops->submit(io->disk, r, io);
}

static void defer(struct pmc_ring *r, struct pmc_io *io, int res, uint64_t delay_ns)
{
	io->due_ns = pmc_mono_ns() + delay_ns;
	io->defer_res = res;
	io->next = r->deferred;
	r->deferred = io;
	r->ndeferred++;
}

void pmc_ring_complete_later(struct pmc_ring *r, struct pmc_io *io, int res, uint64_t delay_ns)
{
	defer(r, io, res > 0 ? 0 : res, delay_ns);
}

void pmc_ring_submit_later(struct pmc_ring *r, struct pmc_io *io, uint64_t delay_ns)
{
	defer(r, io, 1, delay_ns);
}

static void iov_advance(struct pmc_io *io, uint64_t n)
{
	while (n && io->iovcnt) {
		if (n >= io->iov->iov_len) {
			n -= io->iov->iov_len;
			io->iov++;
			io->iovcnt--;
		} else {
			io->iov->iov_base = (char *)io->iov->iov_base + n;
			io->iov->iov_len -= n;
			n = 0;
		}
	}
}

/* one raw completion; returns 1 when io's callback ran */
static int handle(struct pmc_ring *r, struct pmc_io *io, int res)
{
	if (io->disk->ops->complete)
		res = io->disk->ops->complete(io->disk, io, res);
	if (res == -EAGAIN) {
		r->eagain_retries++;
		pmc_ring_submit_raw(r, io);
		return 0;
	}
	if (io->op == PMC_IO_READ || io->op == PMC_IO_WRITE) {
		if (res == 0)
			res = -EIO; /* no progress: past the end of the disk */
		if (res > 0) {
			io->done += (uint64_t)res;
			if (io->done < io->len) {
				r->short_retries++;
				iov_advance(io, (uint64_t)res);
				pmc_ring_submit_raw(r, io);
				return 0;
			}
			res = 0;
		}
	} else if (io->op == PMC_IO_DISCARD && (res == -EOPNOTSUPP || res == -EINVAL)) {
		io->disk->can_discard = 0; /* advisory: the data is unwanted anyway */
		res = 0;
	} else if (res > 0) {
		res = 0;
	}
	io->cb(io, res);
	return 1;
}

static int run_deferred(struct pmc_ring *r, uint64_t now, uint64_t *next_due)
{
	struct pmc_io **pp = &r->deferred, *ready = NULL, *io;
	int ran = 0;

	/* unlink what is due first: callbacks may defer more */
	while ((io = *pp)) {
		if (io->due_ns <= now) {
			*pp = io->next;
			r->ndeferred--;
			io->next = ready;
			ready = io;
		} else {
			if (io->due_ns < *next_due)
				*next_due = io->due_ns;
			pp = &io->next;
		}
	}
	while ((io = ready)) {
		ready = io->next;
		if (io->defer_res == 1) {
			pmc_ring_submit_raw(r, io);
		} else {
			io->cb(io, io->defer_res);
			ran++;
		}
	}
	return ran;
}

static void drain_backlog(struct pmc_ring *r)
{
	while (r->backlog && r->inflight < r->depth) {
		struct pmc_io *io = r->backlog;

		r->backlog = io->next;
		if (!r->backlog)
			r->backlog_tail = NULL;
		r->nbacklog--;
		pmc_ring_submit_raw(r, io);
	}
}

int pmc_ring_poll(struct pmc_ring *r, int wait, uint64_t timeout_ns)
{
	uint64_t start = pmc_mono_ns();
	int ran = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		uint64_t now, next_due = UINT64_MAX;
		struct __kernel_timespec ts;
		uint64_t wait_ns;
		int rc;

		while (io_uring_peek_cqe(&r->uring, &cqe) == 0) {
			uint64_t ud = cqe->user_data;
			int res = cqe->res;

			/* consume before the callback: it may submit and reap */
			io_uring_cqe_seen(&r->uring, cqe);
			if (ud & 1) {
				r->nforeign--;
				r->foreign(r->foreign_arg, ud, res);
				ran++;
				continue;
			}
			r->inflight--;
			ran += handle(r, (struct pmc_io *)(uintptr_t)ud, res);
		}
		now = pmc_mono_ns();
		if (r->ndeferred)
			ran += run_deferred(r, now, &next_due);
		drain_backlog(r);
		if (io_uring_cq_ready(&r->uring))
			continue;
		if (ran || !wait)
			return ran;
		if (timeout_ns && now - start >= timeout_ns)
			return 0;
		if (!r->inflight && !r->ndeferred && !r->nbacklog && !r->nforeign)
			return 0; /* nothing could ever complete */
		wait_ns = timeout_ns ? timeout_ns - (now - start) : 1000000000ull;
		if (next_due != UINT64_MAX && next_due - now < wait_ns)
			wait_ns = next_due > now ? next_due - now : 0;
		if (!r->inflight && !r->nforeign) {
			struct timespec sl = {.tv_sec = (time_t)(wait_ns / 1000000000ull),
					      .tv_nsec = (long)(wait_ns % 1000000000ull)};
			nanosleep(&sl, NULL);
			continue;
		}
		ts.tv_sec = (long long)(wait_ns / 1000000000ull);
		ts.tv_nsec = (long long)(wait_ns % 1000000000ull);
		rc = io_uring_wait_cqe_timeout(&r->uring, &cqe, &ts);
		if (rc && rc != -ETIME && rc != -EINTR)
			return rc;
	}
}
