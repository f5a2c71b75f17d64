/* ring.h - one io_uring per thread, moving data between backing disks and
 * the pmem mapping (or request buffers) with O_DIRECT.
 *
 * A ring is owned by the thread that created it; every call here is made
 * from that thread. At most `depth` I/Os are in flight; more wait in a FIFO
 * backlog. Short transfers are continued and -EAGAIN is retried, so a
 * completion callback sees either the whole length or a negative errno.
 * Completions are delivered only from pmc_ring_poll(), never from inside
 * a submit call. Submitting only prepares SQEs: the next pmc_ring_poll()
 * (or pmc_ring_flush()) hands everything prepared to the kernel in one
 * io_uring_enter, which also waits for completions when the poll may wait.
 * A caller that stops polling with work prepared must pmc_ring_flush().
 *
 * A read or write larger than its disk takes whole (pmc_disk.max_bytes,
 * max_segs: a block device's queue limits) goes to the kernel as several
 * SQEs, its parts, submitted together: io_uring issues a read or write
 * without blocking first, and the block layer refuses to split an I/O so
 * issued, so one larger than the device's limits would be handed to an
 * io_uring worker thread (a context switch, and the pages pinned twice).
 * The callback runs once, when every part completed: 0, or the first
 * part's error; a part that came back short has the whole I/O issued
 * again, a part that moved nothing fails it with -EIO. A disk's
 * ops->complete sees each part's raw completion.
 *
 * Where the kernel allows long-term pins of the pmem mapping (devdax,
 * shmem), the ring registers it as fixed buffers and single-segment
 * transfers into it use READ_FIXED / WRITE_FIXED; elsewhere (a file on
 * ext4: EFAULT) it uses plain vectored reads and writes. The table of
 * fixed buffers is sparse (Linux 5.19), with a slot per ring entry more
 * for DRAM buffers its thread adds (pmc_ring_add_buffer: the requests'
 * bounce buffers), so a transfer from one of those pins no page either.
 */
#ifndef PMC_RING_H
#define PMC_RING_H

#include <stdint.h>
#include <sys/uio.h>

#include "err.h"

struct pmc_ring;
struct pmc_disk;
struct pmc_pmem;

enum pmc_io_op {
	PMC_IO_READ,
	PMC_IO_WRITE,
	PMC_IO_FSYNC,	/* fdatasync of the disk */
	PMC_IO_DISCARD, /* punch a hole / discard the range */
};

struct pmc_io {
	/* set by the submitter */
	enum pmc_io_op op;
	struct pmc_disk *disk;
	uint64_t off;		/* bytes into the disk */
	uint64_t len;		/* bytes; READ/WRITE: sum of iov lengths */
	struct iovec *iov;	/* READ/WRITE; the ring may advance it in place */
	int iovcnt;
	int rw_flags;		/* e.g. RWF_DSYNC for FUA */
	void (*cb)(struct pmc_io *io, int res); /* res: 0 or -errno */
	void *priv;
	uint32_t epoch;		/* the submitter's: the engine stamps its volume's error epoch */
	/* owned by the ring */
	uint64_t done;		/* bytes transferred so far */
	unsigned parts;		/* parts in the kernel, when split (else 0) */
	int part_err;		/* the first error of a part */
	unsigned short_rounds;	/* split: whole reissues after a short part */
	unsigned again_rounds;	/* reissues after EAGAIN (the later ones deferred) */
	uint64_t due_ns;	/* deferred work: when */
	int defer_res;		/* deferred completion result, or 1 = submit */
	struct pmc_io *next;
};

struct pmc_ring_info {
	unsigned depth;
	int fixed;		/* pmem registered as fixed buffers */
	int fixed_err;		/* errno of the failed registration, or 0 */
	unsigned dram_slots;	/* room for pmc_ring_add_buffer (0: no sparse table) */
	unsigned dram_buffers;	/* ... buffers it added */
	uint64_t submitted;	/* SQEs */
	uint64_t fixed_ios;	/* reads and writes through the fixed buffers */
	uint64_t split_ios;	/* reads and writes issued in parts */
	uint64_t parts;		/* ... the parts they were issued in */
	uint64_t short_retries;
	uint64_t eagain_retries;
	uint64_t enters;	/* io_uring_enter calls */
	unsigned setup_flags;	/* IORING_SETUP_* the kernel accepted */
};

/* pm may be NULL (no fixed buffers). */
int pmc_ring_create(unsigned depth, struct pmc_pmem *pm, struct pmc_ring **out,
		    struct pmc_err *err);

/*
 * A ring that also carries another protocol's commands (the ublk server's
 * uring_cmds, which need 128-byte SQEs): their user_data has bit 0 set and
 * their completions go to foreign(arg, user_data, res) from pmc_ring_poll.
 */
struct pmc_ring_opts {
	int sqe128;
	void (*foreign)(void *arg, uint64_t user_data, int res);
	void *arg;
	const int *files;	/* registered as fixed files; commands on them use them */
	unsigned nfiles;	/* at most 4 */
};
int pmc_ring_create_opts(unsigned depth, struct pmc_pmem *pm, const struct pmc_ring_opts *o,
			 struct pmc_ring **out, struct pmc_err *err);
/*
 * Queue an IORING_OP_URING_CMD (ring made with sqe128) on fd with cmd_op and
 * up to 80 bytes of payload; user_data must have bit 0 set. A registered
 * fd (pmc_ring_opts.files) is used as its fixed file. Prepared only: the
 * next poll submits it. -EBUSY when the SQ is full.
 */
int pmc_ring_uring_cmd(struct pmc_ring *r, int fd, uint32_t cmd_op, const void *payload,
		       unsigned len, uint64_t user_data);
/* In-flight I/O must have completed (pmc_ring_idle()). */
void pmc_ring_destroy(struct pmc_ring *r);

/* Start io through its disk's ops (which may inject faults or delay). */
void pmc_ring_submit(struct pmc_ring *r, struct pmc_io *io);
/* Start io on the real disk now (used by disk ops). */
void pmc_ring_submit_raw(struct pmc_ring *r, struct pmc_io *io);
/* Complete io with res after delay_ns, from a later poll. */
void pmc_ring_complete_later(struct pmc_ring *r, struct pmc_io *io, int res, uint64_t delay_ns);
/* Submit io raw after delay_ns, from a later poll. */
void pmc_ring_submit_later(struct pmc_ring *r, struct pmc_io *io, uint64_t delay_ns);

/* Submit what is prepared, reap completions and run callbacks, in one
 * io_uring_enter per round. With wait, block until at least one callback
 * ran or timeout_ns passed (0 = no limit). Returns the number of callbacks
 * run or -errno. Reads the clock once per round (pmc_ring_now). */
int pmc_ring_poll(struct pmc_ring *r, int wait, uint64_t timeout_ns);
/* Submit what is prepared now, without waiting; >= 0 or -errno. */
int pmc_ring_flush(struct pmc_ring *r);
/* CLOCK_MONOTONIC ns as read by the last poll (at creation before any):
 * the time of everything the current loop iteration handles */
uint64_t pmc_ring_now(struct pmc_ring *r);
/* IORING_SETUP_* flags the ring was made with (COOP_TASKRUN, ...) */
unsigned pmc_ring_setup_flags(struct pmc_ring *r);
/* I/Os submitted and not yet completed (including deferred and backlog) */
unsigned pmc_ring_busy(struct pmc_ring *r);
/* ... plus the other protocol's commands outstanding: something to wait for */
unsigned pmc_ring_waitable(struct pmc_ring *r);
void pmc_ring_get_info(struct pmc_ring *r, struct pmc_ring_info *info);
/* Register [base, base + len), DRAM that outlives the ring and is never
 * freed before it, as a fixed buffer: a transfer of one segment within it
 * then goes as READ_FIXED / WRITE_FIXED, and the kernel pins no page per
 * I/O (request bounce buffers: the user copy reads a whole write into one,
 * which then goes to the disk). At most one per ring entry. Returns 1, or
 * 0 when the ring cannot (no free slot, a kernel before 5.19, the memlock
 * limit of an unprivileged process): the buffer is then used as before.
 * Called by the ring's thread. */
unsigned pmc_ring_add_buffer(struct pmc_ring *r, void *base, uint64_t len);

/*
 * DRAM for I/O buffers: len bytes of anonymous memory (rounded up to
 * 2 MiB), aligned to 2 MiB and advised for transparent huge pages, reserved
 * but not committed: pages come on first touch, so a buffer never used
 * costs nothing. The kernel pins the pages of every user copy of ublk
 * (and of every transfer not from a fixed buffer), one 4 KiB page at a
 * time unless a huge page backs them. NULL (errno set) when it cannot be
 * mapped. Freed with pmc_ring_buf_free(p, len), len as given.
 */
void *pmc_ring_buf_alloc(size_t len);
void pmc_ring_buf_free(void *p, size_t len);

uint64_t pmc_mono_ns(void);

#endif
