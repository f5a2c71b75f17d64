/* ring.c - see ring.h.
 *
 * Owns one io_uring, the FIFO backlog of I/O waiting for a free slot, and
 * a short list of deferred work (fault injection: delayed submissions and
 * completions). Invariants: inflight <= depth; an io is in at most one of
 * {the kernel, the backlog, the deferred list}; callbacks run only from
 * pmc_ring_poll().
 *
 * Submission is batched: preparing an SQE never enters the kernel. Each
 * pmc_ring_poll() starts with one io_uring_enter that submits everything
 * prepared since the last one and, when it may wait and nothing is
 * completed yet, waits for a completion in the same call (kublk, SPDK).
 * The clock is read once per poll, after that call (pmc_ring_now()).
 *
 * The ring is made with IORING_SETUP_COOP_TASKRUN, SINGLE_ISSUER and
 * DEFER_TASKRUN where the kernel has them (each dropped in turn when it
 * refuses), and disabled (R_DISABLED) until its first use, so that the
 * thread that uses it becomes its single issuer whichever thread made it.
 * With DEFER_TASKRUN completions reach the CQ only from an io_uring_enter
 * with GETEVENTS, which every poll makes when something is in flight.
 *
 * Locking: none. A ring belongs to one thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "log.h"
#include "pmem.h"
#include "ring.h"

#define FIXED_CHUNK (1ull << 30) /* io_uring's largest registered buffer */
#define FIXED_MAX 16384u

#define RING_FILES_MAX 4u

struct ring_extra {
	char *base;
	uint64_t len;
	unsigned slot;
};

struct pmc_ring {
	struct io_uring uring;
	unsigned depth;
	unsigned inflight;
	unsigned setup_flags;	/* IORING_SETUP_* in force */
	int enabled;		/* R_DISABLED lifted by the using thread */
	uint64_t now_ns;	/* CLOCK_MONOTONIC as of the last poll */
	int files[RING_FILES_MAX]; /* registered: fd of fixed file i */
	unsigned nfiles;
	struct pmc_io *backlog, *backlog_tail;
	unsigned nbacklog;
	struct pmc_io *deferred;
	unsigned ndeferred;
	char *fixed_base;
	uint64_t fixed_len;
	/* DRAM buffers registered after the pmem (pmc_ring_add_buffer), in
	 * the slots from extra_first on, listed by address */
	struct ring_extra *extra;
	unsigned nextra, extra_max, extra_first;
	int fixed;
	int fixed_err;
	uint64_t fixed_ios, split_ios, parts;
	uint64_t submitted, short_retries, eagain_retries, enters;
	int sqe128;
	void (*foreign)(void *arg, uint64_t user_data, int res);
	void *foreign_arg;
	unsigned nforeign;	/* foreign commands in flight (not in inflight) */
};

#define HUGE_SZ (2ull << 20)

void *pmc_ring_buf_alloc(size_t len)
{
	/* a huge page less a page more than asked, to cut an aligned range
	 * out of (room enough for any page-aligned start; not a multiple of
	 * 2 MiB, so no kernel aligns it by itself and this path always runs) */
	size_t want = (len + HUGE_SZ - 1) & ~(HUGE_SZ - 1), span = want + HUGE_SZ - 4096;
	char *p, *a;

	if (!len || want < len || span < want)
		return errno = EINVAL, NULL;
	p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + want < p + span)
		munmap(a + want, (size_t)(p + span - (a + want)));
	/* where THP is "madvise" only; "never" leaves 4 KiB pages */
	(void)madvise(a, want, MADV_HUGEPAGE);
	return a;
}

void pmc_ring_buf_free(void *p, size_t len)
{
	if (p)
		munmap(p, (len + HUGE_SZ - 1) & ~(HUGE_SZ - 1));
}

uint64_t pmc_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* the fixed buffers the pmem takes: one per FIXED_CHUNK */
static unsigned pmem_chunks(const struct pmc_pmem *pm)
{
	return (unsigned)((pm->size + FIXED_CHUNK - 1) / FIXED_CHUNK);
}

/* the pmem as fixed buffers 0..n-1, into the sparse table (sparse) or
 * as the whole table */
static void register_pmem(struct pmc_ring *r, struct pmc_pmem *pm, int sparse)
{
	unsigned n = pmem_chunks(pm);
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
	if (sparse) {
		rc = io_uring_register_buffers_update_tag(&r->uring, 0, iov, NULL, n);
		if (rc >= 0 && rc != (int)n) {
			/* some chunks only: empty the slots again */
			memset(iov, 0, n * sizeof(*iov));
			io_uring_register_buffers_update_tag(&r->uring, 0, iov, NULL, (unsigned)rc);
			rc = -EFAULT;
		}
		rc = rc < 0 ? rc : 0;
	} else {
		rc = io_uring_register_buffers(&r->uring, iov, n);
	}
	free(iov);
	if (rc) {
		r->fixed_err = -rc;
		return;
	}
	r->fixed = 1;
	r->fixed_base = pm->base;
	r->fixed_len = pm->size;
}

/*
 * A sparse table of fixed buffers (Linux 5.19): the pmem's chunks, then
 * one slot per ring entry for the DRAM buffers pmc_ring_add_buffer adds
 * later. An older kernel gets the pmem alone, as one table.
 */
static void register_buffers(struct pmc_ring *r, struct pmc_pmem *pm)
{
	unsigned n = pm ? pmem_chunks(pm) : 0;
	unsigned extra = r->depth;

	if (n > FIXED_MAX)
		n = 0; /* register_pmem says E2BIG */
	if (n + extra > FIXED_MAX)
		extra = FIXED_MAX - n;
	r->extra = calloc(extra, sizeof(*r->extra));
	if (!r->extra || io_uring_register_buffers_sparse(&r->uring, n + extra)) {
		free(r->extra);
		r->extra = NULL;
		if (pm)
			register_pmem(r, pm, 0);
		return;
	}
	r->extra_max = extra;
	r->extra_first = n;
	if (pm)
		register_pmem(r, pm, 1);
}

unsigned pmc_ring_add_buffer(struct pmc_ring *r, void *base, uint64_t len)
{
	struct iovec iov = {.iov_base = base, .iov_len = len};
	unsigned slot = r->extra_first + r->nextra, at = r->nextra;

	if (r->nextra >= r->extra_max || !len || len > FIXED_CHUNK)
		return 0;
	/* the memlock limit of an unprivileged caller, or memory the kernel
	 * cannot pin long-term: the buffer stays a plain one */
	if (io_uring_register_buffers_update_tag(&r->uring, slot, &iov, NULL, 1) != 1)
		return 0;
	while (at > 0 && r->extra[at - 1].base > (char *)base) {
		r->extra[at] = r->extra[at - 1];
		at--;
	}
	r->extra[at] = (struct ring_extra){.base = base, .len = len, .slot = slot};
	r->nextra++;
	return 1;
}

/* the registered DRAM buffer holding [p, p + len), or -1 */
static int extra_index(const struct pmc_ring *r, const char *p, uint64_t len)
{
	unsigned lo = 0, hi = r->nextra;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (r->extra[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	const struct ring_extra *x = &r->extra[lo - 1];

	if (p + len > x->base + x->len)
		return -1;
	return (int)x->slot;
}

/* the setup flags a queue ring wants, most first; each one the kernel
 * refuses (-EINVAL: older than 5.19, 6.0, 6.1) is dropped in turn */
static const unsigned want_flags[] = {
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SINGLE_ISSUER |
	IORING_SETUP_DEFER_TASKRUN,
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SINGLE_ISSUER,
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
    0,
};

static int ring_init(struct pmc_ring *r, unsigned entries, unsigned base)
{
	int rc = -EINVAL;

	for (unsigned i = 0; i < sizeof(want_flags) / sizeof(want_flags[0]); i++) {
		unsigned f = base | want_flags[i];

		/* disabled until the using thread enables it: it is then the
		 * single issuer */
		if (f & IORING_SETUP_SINGLE_ISSUER)
			f |= IORING_SETUP_R_DISABLED;
		rc = io_uring_queue_init(entries, &r->uring, f);
		if (rc != -EINVAL)
			break;
	}
	if (rc)
		return rc;
	r->setup_flags = r->uring.flags;
	r->enabled = !(r->setup_flags & IORING_SETUP_R_DISABLED);
	return 0;
}

unsigned pmc_ring_setup_flags(struct pmc_ring *r)
{
	return r->setup_flags & ~IORING_SETUP_R_DISABLED;
}

uint64_t pmc_ring_now(struct pmc_ring *r)
{
	return r->now_ns;
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
	rc = ring_init(r, entries, r->sqe128 ? IORING_SETUP_SQE128 : 0);
	if (rc) {
		free(r);
		return pmc_err_set(err, -rc, "io_uring: cannot set up a ring of %u: %s", depth,
				   strerror(-rc));
	}
	if (o && o->nfiles) {
		rc = o->nfiles > RING_FILES_MAX ? -E2BIG
						: io_uring_register_files(&r->uring, o->files, o->nfiles);
		if (rc) {
			io_uring_queue_exit(&r->uring);
			free(r);
			return pmc_err_set(err, -rc, "io_uring: cannot register %u files: %s",
					   o->nfiles, strerror(-rc));
		}
		memcpy(r->files, o->files, o->nfiles * sizeof(*o->files));
		r->nfiles = o->nfiles;
	}
	register_buffers(r, pm);
	r->now_ns = pmc_mono_ns();
	*out = r;
	return 0;
}

void pmc_ring_destroy(struct pmc_ring *r)
{
	if (!r)
		return;
	io_uring_queue_exit(&r->uring);
	free(r->extra);
	free(r);
}

unsigned pmc_ring_waitable(struct pmc_ring *r)
{
	return pmc_ring_busy(r) + r->nforeign;
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
	info->dram_slots = r->extra_max;
	info->dram_buffers = r->nextra;
	info->submitted = r->submitted;
	info->fixed_ios = r->fixed_ios;
	info->split_ios = r->split_ios;
	info->parts = r->parts;
	info->short_retries = r->short_retries;
	info->eagain_retries = r->eagain_retries;
	info->enters = r->enters;
	info->setup_flags = pmc_ring_setup_flags(r);
}

/* the length of the one span of memory io's segments make up, one after
 * the other; 0 when there is a gap (cache blocks taken one after the other
 * are often neighbours in the pmem) */
static uint64_t iov_span(const struct pmc_io *io)
{
	const struct iovec *v = io->iov;
	uint64_t len;

	if (io->iovcnt < 1)
		return 0;
	len = v[0].iov_len;
	for (int i = 1; i < io->iovcnt; i++) {
		if ((const char *)v[i].iov_base != (const char *)v[0].iov_base + len)
			return 0;
		len += v[i].iov_len;
	}
	return len;
}

/* fixed buffer index for the span [p, p + len) inside one registered
 * chunk of the pmem or one registered DRAM buffer, or -1: then the kernel
 * pins the pages for each I/O */
static int fixed_index(struct pmc_ring *r, const char *p, uint64_t len)
{
	uint64_t off;

	if (len > UINT32_MAX)
		return -1;
	if (!r->fixed || p < r->fixed_base || p >= r->fixed_base + r->fixed_len)
		return extra_index(r, p, len);
	off = (uint64_t)(p - r->fixed_base);
	if (off + len > r->fixed_len || off / FIXED_CHUNK != (off + len - 1) / FIXED_CHUNK)
		return -1;
	return (int)(off / FIXED_CHUNK);
}

/* a read or write of io: len bytes at buf through fixed buffer idx (>= 0),
 * else the cnt segments at iov, else (iov NULL) len bytes at buf */
static void prep_rw(struct io_uring_sqe *sqe, const struct pmc_io *io, char *buf, uint64_t len,
		    struct iovec *iov, int cnt, uint64_t off, int idx)
{
	int fd = io->disk->fd, rd = io->op == PMC_IO_READ;

	if (idx >= 0 && rd)
		io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)len, off, idx);
	else if (idx >= 0)
		io_uring_prep_write_fixed(sqe, fd, buf, (unsigned)len, off, idx);
	else if (iov && rd)
		io_uring_prep_readv(sqe, fd, iov, (unsigned)cnt, off);
	else if (iov)
		io_uring_prep_writev(sqe, fd, iov, (unsigned)cnt, off);
	else if (rd)
		io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
	else
		io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
	sqe->rw_flags = io->rw_flags;
}

static void prep(struct pmc_ring *r, struct io_uring_sqe *sqe, struct pmc_io *io)
{
	int fd = io->disk->fd, idx;
	uint64_t off = io->off + io->done, span;

	switch (io->op) {
	case PMC_IO_READ:
	case PMC_IO_WRITE:
		span = iov_span(io);
		idx = span ? fixed_index(r, io->iov->iov_base, span) : -1;
		r->fixed_ios += idx >= 0;
		prep_rw(sqe, io, io->iov->iov_base, span, io->iov, io->iovcnt, off, idx);
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

static void ring_enable(struct pmc_ring *r)
{
	/* liburing 2.3 declares io_uring_enable_rings() but does not export it */
	if (!r->enabled) {
		syscall(__NR_io_uring_register, r->uring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL,
			0);
		r->enabled = 1;
	}
}

/* submit what is prepared, without waiting */
int pmc_ring_flush(struct pmc_ring *r)
{
	if (!io_uring_sq_ready(&r->uring))
		return 0;
	ring_enable(r);
	r->enters++;
	return io_uring_submit(&r->uring);
}

/* a free SQE; the SQ is flushed first if prepared entries fill it */
static struct io_uring_sqe *get_sqe(struct pmc_ring *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->uring);

	if (!sqe && pmc_ring_flush(r) > 0)
		sqe = io_uring_get_sqe(&r->uring);
	return sqe;
}

/* --- I/O larger than the disk takes whole: parts --- */

/* the most one part may carry (whole pages, within both of the disk's
 * limits), or 0: no limit. The limits are read unlocked: a path switch
 * may change them under a submission, and a stale one only costs the
 * kernel's worker thread for that I/O */
static uint64_t part_max(const struct pmc_disk *d, unsigned *segs)
{
	uint64_t b = __atomic_load_n(&d->max_bytes, __ATOMIC_RELAXED);

	*segs = __atomic_load_n(&d->max_segs, __ATOMIC_RELAXED);
	if (*segs && (!b || (uint64_t)*segs * 4096 < b))
		b = (uint64_t)*segs * 4096;
	return b & ~4095ull;
}

/* one part of io; the ring has room for it (submit_parts) */
static void prep_part(struct pmc_ring *r, struct pmc_io *io, char *buf, uint64_t len,
		      struct iovec *iov, int cnt, uint64_t off, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->uring);

	prep_rw(sqe, io, buf, len, iov, cnt, off, idx);
	io_uring_sqe_set_data(sqe, io);
}

/*
 * The parts of io, at most lim bytes and segs segments (0: any) each:
 * a fixed span (idx >= 0) in pieces of lim; otherwise runs of whole
 * segments, and a segment larger than lim alone in pieces of it. Counts
 * them, and with prep also prepares them. Segment lengths are multiples
 * of the disk's logical block, and lim of the page, so every part is
 * aligned for O_DIRECT.
 */
static unsigned walk_parts(struct pmc_ring *r, struct pmc_io *io, uint64_t lim, unsigned segs,
			   int idx, uint64_t span, int prep)
{
	uint64_t off = io->off, at, len;
	unsigned n = 0;
	int i = 0, j;

	if (idx >= 0) {
		for (at = 0; at < span; at += lim, n++)
			if (prep)
				prep_part(r, io, (char *)io->iov->iov_base + at,
					  span - at < lim ? span - at : lim, NULL, 0, off + at, idx);
		return n;
	}
	while (i < io->iovcnt) {
		struct iovec *v = &io->iov[i];

		if (v->iov_len > lim) {
			for (at = 0; at < v->iov_len; at += lim, n++)
				if (prep)
					prep_part(r, io, (char *)v->iov_base + at,
						  v->iov_len - at < lim ? v->iov_len - at : lim,
						  NULL, 0, off + at, -1);
			off += v->iov_len;
			i++;
			continue;
		}
		for (j = i, len = 0; j < io->iovcnt && io->iov[j].iov_len <= lim - len &&
				     (!segs || (unsigned)(j - i) < segs);
		     j++)
			len += io->iov[j].iov_len;
		if (prep)
			prep_part(r, io, NULL, len, v, j - i, off, -1);
		n++;
		off += len;
		i = j;
	}
	return n;
}

/* issue io in parts if it is larger than its disk takes whole: 1 when it
 * went (or waits in the backlog), 0 when it goes as one I/O */
static int submit_parts(struct pmc_ring *r, struct pmc_io *io)
{
	uint64_t lim, span;
	unsigned segs, n;
	int idx;

	if ((io->op != PMC_IO_READ && io->op != PMC_IO_WRITE) || io->done ||
	    !(lim = part_max(io->disk, &segs)) ||
	    (io->len <= lim && (!segs || io->iovcnt <= (int)segs)))
		return 0;
	span = iov_span(io);
	idx = span ? fixed_index(r, io->iov->iov_base, span) : -1;
	n = walk_parts(r, io, lim, segs, idx, span, 0);
	/* more parts than half the ring takes: one I/O, split by the
	 * kernel's worker thread */
	if (n < 2 || n > r->depth / 2)
		return 0;
	if (io_uring_sq_space_left(&r->uring) < n)
		pmc_ring_flush(r);
	if (r->inflight + n > r->depth || io_uring_sq_space_left(&r->uring) < n)
		return -1;
	io->parts = n;
	io->part_err = 0;
	walk_parts(r, io, lim, segs, idx, span, 1);
	r->fixed_ios += idx >= 0 ? n : 0;
	r->split_ios++;
	r->parts += n;
	r->inflight += n;
	r->submitted += n;
	return 1;
}

/* io to the kernel now: 0, or -1 when the ring has no room for it */
static int try_submit(struct pmc_ring *r, struct pmc_io *io)
{
	struct io_uring_sqe *sqe = NULL;
	int rc = submit_parts(r, io);

	if (rc)
		return rc > 0 ? 0 : -1;
	if (r->inflight < r->depth)
		sqe = get_sqe(r);
	if (!sqe)
		return -1;
	prep(r, sqe, io);
	r->inflight++;
	r->submitted++;
	return 0;
}

void pmc_ring_submit_raw(struct pmc_ring *r, struct pmc_io *io)
{
	/* behind what waits already: the backlog is FIFO */
	if (!r->backlog && try_submit(r, io) == 0)
		return;
	io->next = NULL;
	if (r->backlog_tail)
		r->backlog_tail->next = io;
	else
		r->backlog = io;
	r->backlog_tail = io;
	r->nbacklog++;
}

int pmc_ring_uring_cmd(struct pmc_ring *r, int fd, uint32_t cmd_op, const void *payload,
		       unsigned len, uint64_t user_data)
{
	struct io_uring_sqe *sqe;

	if (!r->sqe128 || len > 80 || !(user_data & 1))
		return -EINVAL;
	sqe = get_sqe(r);
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	for (unsigned i = 0; i < r->nfiles; i++) {
		if (r->files[i] == fd) {
			sqe->fd = (int)i;
			sqe->flags |= IOSQE_FIXED_FILE;
			break;
		}
	}
	sqe->cmd_op = cmd_op;
	memcpy(sqe->cmd, payload, len);
	sqe->user_data = user_data;
	r->nforeign++;
	r->submitted++;
	return 0;
}

void pmc_ring_submit(struct pmc_ring *r, struct pmc_io *io)
{
	io->done = 0;
	io->short_rounds = 0;
	io->again_rounds = 0;
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

/* one part of a split io completed (res: its bytes or -errno); 1 when
 * that was the last and io's callback ran */
/* reissues of a split io whose parts came back short, before it fails */
#define PMC_RING_SHORT_ROUNDS 8u
/* reissues after EAGAIN at once; later ones wait PMC_RING_AGAIN_NS each
 * (a disk that keeps answering EAGAIN spun the thread) */
#define PMC_RING_AGAIN_ROUNDS 8u
#define PMC_RING_AGAIN_NS 1000000ull

static void again(struct pmc_ring *r, struct pmc_io *io)
{
	r->eagain_retries++;
	if (++io->again_rounds > PMC_RING_AGAIN_ROUNDS)
		pmc_ring_submit_later(r, io, PMC_RING_AGAIN_NS);
	else
		pmc_ring_submit_raw(r, io);
}

static int handle_part(struct pmc_ring *r, struct pmc_io *io, int res)
{
	if (res == 0)
		res = -EIO; /* no progress: past the end of the disk */
	if (res < 0 && (!io->part_err || io->part_err == -EAGAIN))
		io->part_err = res;
	else if (res > 0)
		io->done += (uint64_t)res;
	if (--io->parts)
		return 0;
	res = io->part_err;
	/* a part short every time (its disk shrank under it: the block layer
	 * cuts what passes the end) makes no progress: an error, as for an
	 * io in one piece, not a reissue for ever */
	if (!res && io->done < io->len && ++io->short_rounds > PMC_RING_SHORT_ROUNDS)
		res = -EIO;
	if (res == -EAGAIN || (!res && io->done < io->len)) {
		/* a part refused or short: the whole io again */
		io->done = 0;
		if (res) {
			again(r, io);
		} else {
			r->short_retries++;
			pmc_ring_submit_raw(r, io);
		}
		return 0;
	}
	io->cb(io, res);
	return 1;
}

/* one raw completion; returns 1 when io's callback ran */
static int handle(struct pmc_ring *r, struct pmc_io *io, int res)
{
	if (io->disk->ops->complete)
		res = io->disk->ops->complete(io->disk, io, res);
	if (io->parts)
		return handle_part(r, io, res);
	if (res == -EAGAIN) {
		again(r, io);
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
	/* in order: the head waits until the ring has room for all its parts */
	while (r->backlog && r->inflight < r->depth) {
		struct pmc_io *io = r->backlog;

		if (try_submit(r, io))
			break;
		r->backlog = io->next;
		if (!r->backlog)
			r->backlog_tail = NULL;
		r->nbacklog--;
	}
}

/* the next CQE the kernel posted, or NULL; never enters the kernel (as
 * io_uring_peek_cqe does when IORING_SQ_TASKRUN is up): enter() decides
 * when to */
static struct io_uring_cqe *next_cqe(struct io_uring *u)
{
	struct io_uring_cqe *cqe;
	unsigned head;

	io_uring_for_each_cqe(u, head, cqe)
	{
		return cqe;
	}
	return NULL;
}

/* run the callback of every completion in the CQ */
static int reap(struct pmc_ring *r)
{
	struct io_uring_cqe *cqe;
	int ran = 0;

	while ((cqe = next_cqe(&r->uring))) {
		uint64_t ud = cqe->user_data;
		int res = cqe->res;

		/* consume before the callback: it may prepare more */
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
	return ran;
}

/*
 * The one io_uring_enter of a poll: submit what is prepared and, with
 * wait_ns, wait up to that long for a completion; without, collect the
 * completions the kernel has (DEFER_TASKRUN posts them only here). With
 * nothing prepared or in flight, a call only when the kernel holds task
 * work for this thread (IORING_SQ_TASKRUN) or overflowed completions:
 * the last reference of a request that ran in an io_uring worker (a sync)
 * can be dropped after its completion was reaped, and the request, with
 * the file it holds, is then freed by task work that only an enter runs.
 * An idle ring that never entered again kept a closed disk open: a block
 * device removed from a volume stayed claimed (O_EXCL) for good.
 */
static int enter(struct pmc_ring *r, uint64_t wait_ns)
{
	int busy = r->inflight || r->nforeign;
	int rc;

	if (!io_uring_sq_ready(&r->uring) && !busy) {
		if (r->enabled && (IO_URING_READ_ONCE(*r->uring.sq.kflags) &
				   (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
			r->enters++;
			rc = io_uring_get_events(&r->uring);
			if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
				return rc;
		}
		return 0;
	}
	if (!io_uring_sq_ready(&r->uring) && !wait_ns && io_uring_cq_ready(&r->uring))
		return 0;
	ring_enable(r);
	r->enters++;
	if (wait_ns && busy && !io_uring_cq_ready(&r->uring)) {
		struct __kernel_timespec ts = {.tv_sec = (long long)(wait_ns / 1000000000ull),
					       .tv_nsec = (long long)(wait_ns % 1000000000ull)};
		struct io_uring_cqe *cqe;

		rc = io_uring_submit_and_wait_timeout(&r->uring, &cqe, 1, &ts, NULL);
	} else {
		rc = busy ? io_uring_submit_and_get_events(&r->uring) : io_uring_submit(&r->uring);
	}
	if (rc == -ETIME || rc == -EINTR || rc == -EAGAIN || rc == -EBUSY)
		return 0;
	return rc < 0 ? rc : 0;
}

int pmc_ring_poll(struct pmc_ring *r, int wait, uint64_t timeout_ns)
{
	uint64_t start = 0, next_due = UINT64_MAX, wait_ns = 0;
	int ran = 0, rc;

	/* wait in the first enter already, unless deferred work has a due time */
	if (wait && !r->ndeferred)
		wait_ns = timeout_ns ? timeout_ns : 1000000000ull;
	for (;;) {
		rc = enter(r, wait_ns);
		if (rc)
			return rc;
		r->now_ns = pmc_mono_ns();
		if (!start)
			start = r->now_ns;
		ran += reap(r);
		next_due = UINT64_MAX;
		if (r->ndeferred)
			ran += run_deferred(r, r->now_ns, &next_due);
		drain_backlog(r);
		if (ran || !wait)
			return ran;
		if (timeout_ns && r->now_ns - start >= timeout_ns)
			return 0;
		if (!r->inflight && !r->ndeferred && !r->nbacklog && !r->nforeign)
			return 0; /* nothing could ever complete */
		wait_ns = timeout_ns ? timeout_ns - (r->now_ns - start) : 1000000000ull;
		if (next_due != UINT64_MAX && next_due - r->now_ns < wait_ns)
			wait_ns = next_due > r->now_ns ? next_due - r->now_ns : 1;
		if (!r->inflight && !r->nforeign) {
			/* only deferred work: nothing in the kernel to wait for */
			struct timespec sl = {.tv_sec = (time_t)(wait_ns / 1000000000ull),
					      .tv_nsec = (long)(wait_ns % 1000000000ull)};

			nanosleep(&sl, NULL);
			wait_ns = 0;
		}
	}
}
