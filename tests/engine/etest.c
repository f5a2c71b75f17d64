/* etest.c - see etest.h.
 *
 * Owns the list of test files (removed at exit) and nothing else global.
 * The model keeps, per block, the acknowledged version (want), the newest
 * version submitted (issued) and whether requests in flight cover it; a
 * read must return, per block, one whole version between what was
 * acknowledged when it was submitted and the newest one submitted when it
 * completed (exactly want when no write overlapped it). A block that a
 * write overlapped may also read as a mix, word by word, of the versions
 * in that range (the disk does not order a read against a concurrent write
 * of the same sectors; an injected short transfer makes that visible):
 * counted in torn_reads, not a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "etest.h"
#include "simpmem.h"
#include "t.h"

#define ET_MAGIC 0x706d63656e67696eull /* "pmcengin" */

/* --- files --- */

static char g_dir[200];
static char g_files[64][256];
static unsigned g_nfiles;

static void remove_files(void)
{
	if (getenv("PMC_TEST_KEEP")) {
		for (unsigned i = 0; i < g_nfiles; i++)
			fprintf(stderr, "kept %s\n", g_files[i]);
		return;
	}
	for (unsigned i = 0; i < g_nfiles; i++)
		unlink(g_files[i]);
}

static int odirect_works(const char *dir)
{
	char p[256];
	void *b = NULL;
	int fd, ok = 0;

	snprintf(p, sizeof(p), "%s/pmc-odirect-%d", dir, (int)getpid());
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 0;
	if (ftruncate(fd, 2 * BS) == 0) {
		int dfd = open(p, O_RDWR | O_DIRECT);

		b = aligned_alloc(BS, BS);
		if (dfd >= 0 && b) {
			memset(b, 0x5a, BS);
			ok = pwrite(dfd, b, BS, BS) == BS && pread(dfd, b, BS, 0) == BS;
		}
		if (dfd >= 0)
			close(dfd);
	}
	free(b);
	close(fd);
	unlink(p);
	return ok;
}

const char *et_dir(void)
{
	const char *cand[] = {getenv("TMPDIR"), "/dev/shm", "/tmp", "/var/tmp"};

	if (g_dir[0])
		return g_dir;
	for (unsigned i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		if (cand[i] && cand[i][0] && odirect_works(cand[i])) {
			snprintf(g_dir, sizeof(g_dir), "%s", cand[i]);
			atexit(remove_files);
			return g_dir;
		}
	}
	printf("SKIP: no directory where O_DIRECT works ($TMPDIR, /dev/shm, /tmp, /var/tmp)\n");
	exit(77);
}

void et_path(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "%s/pmc-etest-%d-%s", et_dir(), (int)getpid(), what);
	for (unsigned i = 0; i < g_nfiles; i++)
		if (!strcmp(g_files[i], buf))
			return;
	T_TRUE(g_nfiles < sizeof(g_files) / sizeof(g_files[0]));
	snprintf(g_files[g_nfiles++], sizeof(g_files[0]), "%s", buf);
}

void et_disk_create(const char *path, uint32_t tag, uint64_t nblocks)
{
	char *b = et_alloc(64 * BS);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		T_FAIL("create %s: %s", path, strerror(errno));
	for (uint64_t lba = 0; lba < nblocks; lba += 64) {
		uint64_t n = nblocks - lba < 64 ? nblocks - lba : 64;

		for (uint64_t i = 0; i < n; i++)
			et_fill(b + i * BS, tag, lba + i, 0);
		if (pwrite(fd, b, n * BS, (off_t)(lba * BS)) != (ssize_t)(n * BS))
			T_FAIL("write %s: %s", path, strerror(errno));
	}
	close(fd);
	free(b);
}

void et_disk_read(const char *path, uint64_t lba, void *buf)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		T_FAIL("open %s: %s", path, strerror(errno));
	if (pread(fd, buf, BS, (off_t)(lba * BS)) != BS)
		T_FAIL("read %s block %" PRIu64 ": short or failed", path, lba);
	close(fd);
}

/* --- blocks --- */

uint64_t et_rand(uint64_t *state)
{
	return sim_rand(state);
}

void et_fill(void *b, uint32_t tag, uint64_t lba, uint64_t ver)
{
	uint64_t *w = b;
	uint64_t st = ver * 0x9e3779b97f4a7c15ull ^ ((uint64_t)tag << 48) ^ lba;

	w[0] = ver;
	w[1] = ((uint64_t)tag << 48) | lba;
	w[2] = ET_MAGIC ^ ver ^ w[1];
	for (size_t i = 3; i < BS / 8; i++)
		w[i] = sim_rand(&st);
}

uint64_t et_version(const void *b, uint32_t tag, uint64_t lba)
{
	const uint64_t *w = b;
	uint64_t st, v = w[0];
	size_t i;

	for (i = 0; i < BS / 8 && !w[i]; i++)
		;
	if (i == BS / 8)
		return EV_ZERO;
	if (w[1] != (((uint64_t)tag << 48) | lba) || w[2] != (ET_MAGIC ^ v ^ w[1]) ||
	    v >= EV_ANY)
		return EV_BAD;
	st = v * 0x9e3779b97f4a7c15ull ^ ((uint64_t)tag << 48) ^ lba;
	for (i = 3; i < BS / 8; i++)
		if (w[i] != sim_rand(&st))
			return EV_BAD;
	return v;
}

const char *et_describe(const void *b, uint32_t tag, uint64_t lba, uint64_t want, char *buf,
			size_t len)
{
	static char ref[BS];
	const uint64_t *w = b, *r = (const uint64_t *)ref;
	uint64_t ctag = w[1] >> 48, clba = w[1] & ((1ull << 48) - 1), cv;
	size_t first = BS, last = 0, zero = 0, ndiff = 0;

	cv = et_version(b, (uint32_t)ctag, clba);
	if ((ctag != tag || clba != lba) && cv < EV_ANY) {
		snprintf(buf, len, "a whole copy of block %" PRIu64 " of tag %" PRIu64
			 " version %" PRIu64 " (misplaced)", clba, ctag, cv);
		return buf;
	}
	et_fill(ref, tag, lba, want < EV_ANY ? want : w[0]);
	for (size_t i = 0; i < BS / 8; i++) {
		if (w[i] == r[i])
			continue;
		ndiff++;
		zero += !w[i];
		first = i * 8 < first ? i * 8 : first;
		last = i * 8 + 8;
	}
	snprintf(buf, len, "header (version %" PRIu64 ", tag %" PRIu64 ", block %" PRIu64
		 "); differs from version %" PRIu64 " in bytes %zu..%zu (%zu words, %zu of them zero)",
		 w[0], ctag, clba, want < EV_ANY ? want : w[0], first, last, ndiff, zero);
	return buf;
}

const char *et_vstr(uint64_t v, char *buf, size_t len)
{
	if (v == EV_BAD)
		snprintf(buf, len, "garbage (not one whole version of this block)");
	else if (v == EV_ZERO)
		snprintf(buf, len, "zeroes");
	else if (v == EV_ANY)
		snprintf(buf, len, "any (discarded)");
	else
		snprintf(buf, len, "version %" PRIu64, v);
	return buf;
}

void *et_alloc(size_t len)
{
	void *p = aligned_alloc(BS, (len + BS - 1) / BS * BS);

	if (!p)
		T_FAIL("out of memory (%zu bytes)", len);
	memset(p, 0, len);
	return p;
}

uint64_t et_seed_arg(int argc, char **argv, int *argi)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);

	setvbuf(stdout, NULL, _IOLBF, 0); /* progress reaches a log even on a hang */

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoull(argv[i + 1], NULL, 0);
			if (argi)
				*argi = i;
		}
	}
	return seed;
}

static unsigned g_soft_failures;

void et_soft_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	g_soft_failures++;
}

int et_exit(const char *test, uint64_t seed)
{
	if (g_soft_failures) {
		printf("FAILED %s seed %" PRIu64 ": %u checks failed (see FAIL lines)\n", test, seed,
		       g_soft_failures);
		return 1;
	}
	printf("PASS %s seed %" PRIu64 "\n", test, seed);
	return 0;
}

/* --- engine set-up --- */

void et_open(struct et *t, int format)
{
	struct pmc_err err;
	struct pmc_cache_info ci;

	/* a new cache in a file named by this process: one of that name is
	 * left by a killed run of another pid (of another size: refused) */
	if (format)
		unlink(t->pmem_path);
	T_OK(pmc_pmem_open(t->pmem_path, t->pmem_size, &t->pm, &err));
	if (format)
		T_OK(pmc_cache_format(t->pm, NULL, &err));
	T_OK(pmc_cache_open(t->pm, 0, &t->c, &err));
	pmc_cache_get_info(t->c, &ci);
	t->nr_blocks = ci.nr_blocks;
	T_OK(pmc_engine_create(t->c, &t->wb, &t->e, &err));
}

void et_attach(struct et *t, struct et_vol *v, const struct pmc_volume_conf *vc,
	       const struct pmc_disk_ops *ops, void *ops_priv)
{
	struct pmc_err err;
	struct pmc_disk *d;

	T_OK(pmc_disk_open(v->path, 0, &d, &err));
	if (ops) {
		d->ops = ops;
		d->priv = ops_priv;
	}
	memset(&err, 0, sizeof(err));
	int rc = pmc_engine_attach(t->e, v->name, d, vc, &v->vol, &err);
	if (rc) {
		pmc_disk_close(d);
		T_FAIL("attach %s: %d (%s)", v->name, rc, err.msg);
	}
}

void et_close(struct et *t, int crash)
{
	/* as pmcached's stop: no clean shutdown recorded when a disk could
	 * not be synced */
	if (pmc_engine_destroy(t->e))
		crash = 1;
	t->e = NULL;
	if (crash)
		pmc_cache_abandon(t->c);
	else
		pmc_cache_close(t->c);
	t->c = NULL;
	pmc_pmem_close(t->pm);
	t->pm = NULL;
}

void et_check_cache(struct et *t)
{
	struct pmc_err err;
	struct pmc_check_report rep;

	T_OK(pmc_cache_check(t->c, &rep, &err));
}

struct pmc_queue *et_queue(struct pmc_engine *e, unsigned depth)
{
	struct pmc_err err;
	struct pmc_queue *q;

	T_OK(pmc_queue_create(e, depth, &q, &err));
	return q;
}

/* --- requests --- */

static uint64_t now_ms(void)
{
	return pmc_mono_ns() / 1000000ull;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)us * 1000};

	nanosleep(&ts, NULL);
}

/* one turn: a write-back step and polls; returns callbacks run */
static int turn(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, int wait)
{
	int ran = 0, rc;

	if (wbq)
		pmc_engine_writeback_step(e, wbq);
	rc = pmc_queue_poll(q, 0, 0);
	if (rc < 0)
		T_FAIL("pmc_queue_poll: %d", rc);
	ran += rc;
	if (wbq && wbq != q) {
		rc = pmc_queue_poll(wbq, 0, 0);
		if (rc < 0)
			T_FAIL("pmc_queue_poll (write-back queue): %d", rc);
		ran += rc;
	}
	if (!ran && wait) {
		uint64_t t0 = pmc_mono_ns();

		rc = pmc_queue_poll(q, 1, 1000000ull);
		if (rc < 0)
			T_FAIL("pmc_queue_poll: %d", rc);
		ran += rc;
		/* nothing in flight on q: do not spin */
		if (!rc && pmc_mono_ns() - t0 < 200000ull)
			sleep_us(200);
	}
	return ran;
}

void et_wait(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, const int *done,
	     unsigned timeout_ms, const char *what)
{
	uint64_t t0 = now_ms();

	while (!*done) {
		turn(e, q, wbq, 1);
		if (!*done && now_ms() - t0 > timeout_ms)
			T_FAIL("%s: not completed after %u ms (busy %u)", what, timeout_ms,
			       pmc_queue_busy(q));
	}
}

static void et_req_cb(struct pmc_req *req, int res)
{
	struct et_req *r = req->priv;

	if (r->done)
		T_FAIL("request completed twice (op %d off %" PRIu64 ")", req->op, req->off);
	r->done = 1;
	r->res = res;
}

void et_submit(struct pmc_queue *q, struct et_req *r, enum pmc_req_op op, uint32_t vol,
	       uint64_t lba, uint64_t nblocks, void *buf, unsigned flags)
{
	struct pmc_err err;

	memset(r, 0, sizeof(*r));
	r->req.op = op;
	r->req.vol = vol;
	r->req.off = lba * BS;
	r->req.len = nblocks * BS;
	r->req.buf = buf;
	r->req.flags = flags;
	r->req.cb = et_req_cb;
	r->req.priv = r;
	memset(&err, 0, sizeof(err));
	int rc = pmc_queue_submit(q, &r->req, &err);
	if (rc)
		T_FAIL("submit op %d vol %u blocks %" PRIu64 "+%" PRIu64 ": refused %d (%s)", op,
		       vol, lba, nblocks, rc, err.msg);
}

int et_io(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, enum pmc_req_op op,
	  uint32_t vol, uint64_t lba, uint64_t nblocks, void *buf, unsigned flags)
{
	struct et_req r;
	char what[96];

	et_submit(q, &r, op, vol, lba, nblocks, buf, flags);
	snprintf(what, sizeof(what), "request op %d vol %u blocks %" PRIu64 "+%" PRIu64, op, vol,
		 lba, nblocks);
	et_wait(e, q, wbq, &r.done, 15000, what);
	return r.res;
}

void et_run(struct pmc_engine *e, struct pmc_queue *q, struct pmc_queue *wbq, unsigned ms)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < ms)
		turn(e, q, wbq, 1);
}

void et_quiesce(struct pmc_queue *q, struct pmc_queue *other)
{
	uint64_t t0 = now_ms();

	while (pmc_queue_busy(q) || (other && pmc_queue_busy(other))) {
		pmc_queue_poll(q, 0, 0);
		if (other)
			pmc_queue_poll(other, 0, 0);
		if (now_ms() - t0 > 15000)
			T_FAIL("queues still busy after 15 s (%u, %u)", pmc_queue_busy(q),
			       other ? pmc_queue_busy(other) : 0);
		sleep_us(100);
	}
}

void et_flush_all(struct et *t, struct pmc_queue *q, struct pmc_queue *other)
{
	struct pmc_err err;

	/* flush_all polls only q: write-back I/O in flight on another queue
	 * must complete first (here, one thread owns both) */
	if (other && other != q)
		et_quiesce(q, other);

	T_OK(pmc_engine_flush_all(t->e, q, UINT32_MAX, NULL, NULL, &err));
}

void et_stats(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *s)
{
	int rc = pmc_engine_stats(e, vol, s);

	if (rc)
		T_FAIL("pmc_engine_stats(vol %u): %d", vol, rc);
}

uint64_t et_hist_sum(const uint64_t *hist)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < PMC_HIST_BUCKETS; i++)
		n += hist[i];
	return n;
}

/* --- a disk with a volatile write cache --- */

/* a write (or discard) not yet durable in all its blocks */
struct vd_write {
	uint64_t lba, n;	/* blocks */
	char *data;		/* n blocks; NULL: zeroes (a discard) */
	uint8_t *live;		/* per block: may still land */
	struct pmc_io *io;	/* in flight, or NULL once completed */
	int dsync;
	uint64_t done_seq;	/* order of completion, 0 in flight */
};

#define VD_SYNCS 64

struct et_vdisk {
	pthread_mutex_t lock;
	char path[256];
	uint64_t nblocks;
	char *durable;		/* nblocks * BS */
	uint64_t *dseq;		/* per block: done_seq of the durable contents */
	struct vd_write *w;	/* in submission order */
	unsigned nw, cap;
	struct {
		struct pmc_io *io;
		uint64_t mark;	/* covers writes with done_seq <= mark */
	} sync[VD_SYNCS];	/* syncs in flight */
	uint64_t next_done;
	uint64_t delay_ns[PMC_IO_DISCARD + 1];
	int fail[PMC_IO_DISCARD + 1];
	struct et_vdisk_stats st;
};

struct et_vdisk *et_vdisk_new(const char *path, uint64_t nblocks)
{
	struct et_vdisk *d = calloc(1, sizeof(*d));
	int fd = open(path, O_RDONLY);

	T_TRUE(d != NULL);
	if (fd < 0)
		T_FAIL("open %s: %s", path, strerror(errno));
	pthread_mutex_init(&d->lock, NULL);
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->nblocks = nblocks;
	d->durable = et_alloc(nblocks * BS);
	d->dseq = calloc(nblocks, sizeof(*d->dseq));
	T_TRUE(d->dseq != NULL);
	if (pread(fd, d->durable, nblocks * BS, 0) != (ssize_t)(nblocks * BS))
		T_FAIL("read %s: short or failed", path);
	close(fd);
	return d;
}

static void vd_drop(struct vd_write *w)
{
	free(w->data);
	free(w->live);
}

void et_vdisk_free(struct et_vdisk *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < d->nw; i++)
		vd_drop(&d->w[i]);
	free(d->w);
	free(d->durable);
	free(d->dseq);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* forget writes none of whose blocks can land any more; lock held */
static void vd_compact(struct et_vdisk *d)
{
	unsigned k = 0;

	for (unsigned i = 0; i < d->nw; i++) {
		struct vd_write *w = &d->w[i];
		int live = 0;

		for (uint64_t b = 0; b < w->n && !live; b++)
			live = w->live[b];
		if (!live && !w->io) {
			vd_drop(w);
			continue;
		}
		d->w[k++] = *w;
	}
	d->nw = k;
}

/* write i is durable: its live blocks become the disk's, and no write
 * that completed before it can land over them any more; lock held */
static void vd_make_durable(struct et_vdisk *d, unsigned i)
{
	struct vd_write *w = &d->w[i];

	for (uint64_t b = 0; b < w->n; b++) {
		if (!w->live[b])
			continue;
		/* a write that completed later is durable there already */
		if (w->done_seq > d->dseq[w->lba + b]) {
			if (w->data)
				memcpy(d->durable + (w->lba + b) * BS, w->data + b * BS, BS);
			else
				memset(d->durable + (w->lba + b) * BS, 0, BS);
			d->dseq[w->lba + b] = w->done_seq;
		}
		w->live[b] = 0;
		d->st.volatile_blocks--;
		for (unsigned j = 0; j < d->nw; j++) {
			struct vd_write *o = &d->w[j];
			uint64_t lba = w->lba + b;

			if (o->done_seq && o->done_seq < w->done_seq && lba >= o->lba && lba < o->lba + o->n && o->live[lba - o->lba]) {
				o->live[lba - o->lba] = 0;
				d->st.volatile_blocks--;
			}
		}
	}
}

static void vd_record(struct et_vdisk *d, struct pmc_io *io)
{
	struct vd_write *w;
	uint64_t off = 0;

	if (d->nw == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 64;
		d->w = realloc(d->w, d->cap * sizeof(*d->w));
		T_TRUE(d->w != NULL);
	}
	w = &d->w[d->nw++];
	memset(w, 0, sizeof(*w));
	w->lba = io->off / BS;
	w->n = io->len / BS;
	if (io->off % BS || io->len % BS || w->lba + w->n > d->nblocks)
		T_FAIL("disk model %s: I/O %" PRIu64 "+%" PRIu64 " is not whole blocks inside "
		       "the disk", d->path, io->off, io->len);
	w->live = malloc(w->n);
	T_TRUE(w->live != NULL);
	memset(w->live, 1, w->n);
	d->st.volatile_blocks += w->n;
	w->io = io;
	w->dsync = io->op == PMC_IO_WRITE && (io->rw_flags & RWF_DSYNC);
	if (io->op == PMC_IO_WRITE) {
		w->data = malloc(w->n * BS);
		T_TRUE(w->data != NULL);
		for (int i = 0; i < io->iovcnt; i++) {
			memcpy(w->data + off, io->iov[i].iov_base, io->iov[i].iov_len);
			off += io->iov[i].iov_len;
		}
		T_TRUE(off == io->len);
	}
}

void et_vdisk_submit(struct pmc_disk *disk, struct pmc_ring *r, struct pmc_io *io)
{
	struct et_vdisk *d = disk->priv;
	uint64_t delay;
	int fail;

	pthread_mutex_lock(&d->lock);
	delay = d->delay_ns[io->op];
	fail = d->fail[io->op];
	d->delay_ns[io->op] = 0;
	d->fail[io->op] = 0;
	if (fail) {
		d->st.failed++;
		pthread_mutex_unlock(&d->lock);
		pmc_ring_complete_later(r, io, -fail, 0);
		return;
	}
	switch (io->op) {
	case PMC_IO_READ:
		break;
	case PMC_IO_WRITE:
	case PMC_IO_DISCARD:
		vd_record(d, io);
		if (io->op == PMC_IO_DISCARD)
			d->st.discards++;
		else if (io->rw_flags & RWF_DSYNC)
			d->st.dsync_writes++;
		else
			d->st.writes++;
		break;
	case PMC_IO_FSYNC: {
		unsigned k;

		/* covers what completed before it was issued */
		for (k = 0; k < VD_SYNCS && d->sync[k].io; k++)
			;
		T_TRUE(k < VD_SYNCS);
		d->sync[k].io = io;
		d->sync[k].mark = d->next_done;
		d->st.syncs++;
		break;
	}
	}
	pthread_mutex_unlock(&d->lock);
	if (delay)
		pmc_ring_submit_later(r, io, delay);
	else
		pmc_ring_submit_raw(r, io);
}

int et_vdisk_complete(struct pmc_disk *disk, struct pmc_io *io, int res)
{
	struct et_vdisk *d = disk->priv;

	pthread_mutex_lock(&d->lock);
	if (io->op == PMC_IO_FSYNC) {
		unsigned k;

		for (k = 0; k < VD_SYNCS && d->sync[k].io != io; k++)
			;
		T_TRUE(k < VD_SYNCS);
		for (unsigned i = 0; res >= 0 && i < d->nw; i++)
			if (d->w[i].done_seq && d->w[i].done_seq <= d->sync[k].mark)
				vd_make_durable(d, i);
		d->sync[k].io = NULL;
		vd_compact(d);
	} else if (io->op == PMC_IO_WRITE || io->op == PMC_IO_DISCARD) {
		/* the last piece of it (short transfers come back in pieces) */
		int last = res < 0 || io->op == PMC_IO_DISCARD || io->done + (uint64_t)res >= io->len;

		for (unsigned i = 0; last && i < d->nw; i++) {
			if (d->w[i].io != io)
				continue;
			d->w[i].io = NULL;
			d->w[i].done_seq = ++d->next_done;
			if (d->w[i].dsync && res >= 0)
				vd_make_durable(d, i);
			break;
		}
		vd_compact(d);
	}
	pthread_mutex_unlock(&d->lock);
	return res;
}

int et_vdisk_sync(struct pmc_disk *disk)
{
	struct et_vdisk *d = disk->priv;
	int fail;

	/* a failure injected for the next sync (et_vdisk_fail_next) fails this
	 * synchronous one as it would one through the ring */
	pthread_mutex_lock(&d->lock);
	fail = d->fail[PMC_IO_FSYNC];
	d->fail[PMC_IO_FSYNC] = 0;
	if (fail)
		d->st.failed++;
	pthread_mutex_unlock(&d->lock);
	if (fail)
		return -fail;
	if (fdatasync(disk->fd))
		return -errno;
	/* every write completed so far is durable */
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->nw; i++)
		if (d->w[i].done_seq)
			vd_make_durable(d, i);
	vd_compact(d);
	d->st.syncs++;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

const struct pmc_disk_ops et_vdisk_ops = {
	.submit = et_vdisk_submit,
	.complete = et_vdisk_complete,
	.sync = et_vdisk_sync,
};

void et_vdisk_crash_image(struct et_vdisk *d, char *out, enum et_land how, uint64_t *rng)
{
	pthread_mutex_lock(&d->lock);
	memcpy(out, d->durable, d->nblocks * BS);
	if (how != ET_LAND_NONE) {
		/* per block, walk the writes newest first: ALL takes the first
		 * live one; RANDOM stops at each with probability 1/2 */
		for (uint64_t lba = 0; lba < d->nblocks; lba++) {
			for (unsigned i = d->nw; i-- > 0;) {
				struct vd_write *w = &d->w[i];

				if (lba < w->lba || lba >= w->lba + w->n || !w->live[lba - w->lba])
					continue;
				if (how == ET_LAND_RANDOM && et_rand(rng) % 2)
					continue;
				if (w->data)
					memcpy(out + lba * BS, w->data + (lba - w->lba) * BS, BS);
				else
					memset(out + lba * BS, 0, BS);
				break;
			}
		}
	}
	pthread_mutex_unlock(&d->lock);
}

void et_vdisk_power_cut(struct et_vdisk *d, enum et_land how, uint64_t *rng)
{
	char *img = et_alloc(d->nblocks * BS);
	int fd;

	et_vdisk_crash_image(d, img, how, rng);
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->nw; i++) {
		if (d->w[i].io)
			T_FAIL("disk model %s: power cut with I/O in flight", d->path);
		vd_drop(&d->w[i]);
	}
	d->nw = 0;
	d->st.volatile_blocks = 0;
	memcpy(d->durable, img, d->nblocks * BS);
	fd = open(d->path, O_WRONLY);
	if (fd < 0 || pwrite(fd, img, d->nblocks * BS, 0) != (ssize_t)(d->nblocks * BS))
		T_FAIL("power cut: cannot write %s", d->path);
	close(fd);
	pthread_mutex_unlock(&d->lock);
	free(img);
}

void et_vdisk_delay_next(struct et_vdisk *d, enum pmc_io_op op, uint64_t delay_ns)
{
	pthread_mutex_lock(&d->lock);
	d->delay_ns[op] = delay_ns;
	pthread_mutex_unlock(&d->lock);
}

void et_vdisk_fail_next(struct et_vdisk *d, enum pmc_io_op op, int err)
{
	pthread_mutex_lock(&d->lock);
	d->fail[op] = err;
	pthread_mutex_unlock(&d->lock);
}

void et_vdisk_get_stats(struct et_vdisk *d, struct et_vdisk_stats *s)
{
	pthread_mutex_lock(&d->lock);
	*s = d->st;
	pthread_mutex_unlock(&d->lock);
}

/* --- the model --- */

static struct et_mreq *free_slot(struct et_model *m)
{
	for (unsigned i = 0; i < m->max_inflight; i++)
		if (!m->slot[i].busy)
			return &m->slot[i];
	return NULL;
}

void et_model_init(struct et_model *m, struct et *t, struct et_vol *vols, unsigned nvols,
		   uint64_t seed)
{
	const char *tr = getenv("ET_TRACE");

	memset(m, 0, sizeof(*m));
	T_TRUE(nvols <= ET_MAXV);
	m->t = t;
	m->seed = seed;
	m->rng = seed ^ 0x6d6f64656cull;
	m->trace_vol = UINT32_MAX;
	if (tr && sscanf(tr, "%u:%" SCNu64, &m->trace_vol, &m->trace_lba) != 2)
		m->trace_vol = UINT32_MAX;
	m->nvols = nvols;
	m->max_inflight = 8;
	m->pct_write = 45;
	m->pct_discard = 6;
	m->pct_flush = 4;
	m->pct_fua = 10;
	m->rw_overlap = 1;
	for (unsigned i = 0; i < nvols; i++) {
		struct et_mvol *mv = &m->mv[i];
		uint64_t n = vols[i].nblocks;

		mv->v = &vols[i];
		mv->want = calloc(n, sizeof(*mv->want));
		mv->issued = calloc(n, sizeof(*mv->issued));
		mv->hist = calloc(n, sizeof(*mv->hist));
		mv->wbusy = calloc(n, 1);
		mv->rbusy = calloc(n, sizeof(*mv->rbusy));
		T_TRUE(mv->want && mv->issued && mv->hist && mv->wbusy && mv->rbusy);
	}
	for (unsigned i = 0; i < ET_MAX_INFLIGHT; i++) {
		m->slot[i].buf = et_alloc(ET_MAX_REQ_BLOCKS * BS);
		m->slot[i].snap = calloc(ET_MAX_REQ_BLOCKS, sizeof(uint64_t));
		T_TRUE(m->slot[i].snap);
	}
}

void et_model_fini(struct et_model *m)
{
	for (unsigned i = 0; i < m->nvols; i++) {
		free(m->mv[i].want);
		free(m->mv[i].issued);
		free(m->mv[i].hist);
		free(m->mv[i].wbusy);
		free(m->mv[i].rbusy);
	}
	for (unsigned i = 0; i < ET_MAX_INFLIGHT; i++) {
		free(m->slot[i].buf);
		free(m->slot[i].snap);
	}
}

/* remember ver among a block's last n versions h[0..n): versions only grow,
 * so the oldest remembered one (or an empty slot) makes room. Keyed by the
 * block's own history, not by the global version number: two versions of a
 * block n numbers apart must not share a slot. Atomic accesses: other
 * threads may read h meanwhile (engine_threads) */
void et_hist_add(uint64_t *h, unsigned n, uint64_t ver)
{
	unsigned old = 0;

	for (unsigned i = 1; i < n; i++)
		if (__atomic_load_n(&h[i], __ATOMIC_SEQ_CST) <
		    __atomic_load_n(&h[old], __ATOMIC_SEQ_CST))
			old = i;
	__atomic_store_n(&h[old], ver, __ATOMIC_SEQ_CST);
}

static const char *op_name(enum pmc_req_op op)
{
	switch (op) {
	case PMC_REQ_READ:
		return "read";
	case PMC_REQ_WRITE:
		return "write";
	case PMC_REQ_FLUSH:
		return "flush";
	case PMC_REQ_DISCARD:
		return "discard";
	}
	return "?";
}

/* every 8-byte word of b is that word of one of the versions of block lba
 * (tag) in lo..hi that its history h[0..n) still knows (lo itself
 * included), or zero when zero_ok (a discarded block). No static state:
 * request threads call it at once (engine_threads) */
int et_mixed_of(const uint64_t *h, unsigned n, uint32_t tag, uint64_t lba, uint64_t lo, uint64_t hi,
		const void *b, int zero_ok)
{
	uint64_t cand[ET_HIST + 1], ref[BS / 8];
	uint8_t match[BS / 8] = {0};
	unsigned nc = 0;
	const uint64_t *w = b;

	T_TRUE(n <= ET_HIST);
	cand[nc++] = lo;
	for (unsigned i = 0; i < n; i++) {
		uint64_t v = __atomic_load_n(&h[i], __ATOMIC_SEQ_CST);

		if (v > lo && v <= hi)
			cand[nc++] = v;
	}
	if (nc < 2)
		return 0;
	for (unsigned k = 0; k < nc; k++) {
		et_fill(ref, tag, lba, cand[k]);
		for (size_t i = 0; i < BS / 8; i++)
			match[i] |= w[i] == ref[i];
	}
	for (size_t i = 0; i < BS / 8; i++)
		if (!match[i] && !(zero_ok && w[i] == 0))
			return 0;
	return 1;
}

/* the model's check: block lba of mv */
static int mixed_of(struct et_mvol *mv, uint64_t lba, uint64_t lo, uint64_t hi, const void *b,
		    int zero_ok)
{
	return et_mixed_of(mv->hist[lba], ET_HIST, mv->v->tag, lba, lo, hi, b, zero_ok);
}

/* a block made of sectors of versions a (sectors < cut) and b */
static void mix_fill(char *b, uint32_t tag, uint64_t lba, uint64_t a, uint64_t vb, unsigned cut)
{
	static char tmp[BS];

	et_fill(b, tag, lba, a);
	et_fill(tmp, tag, lba, vb);
	memcpy(b + cut * 512, tmp + cut * 512, BS - cut * 512);
}

void et_model_selftest(void)
{
	static uint64_t hist[1][ET_HIST];
	static char b[BS];
	struct et_vol v = {.tag = 7, .nblocks = 1};
	struct et_mvol mv = {.v = &v, .hist = hist};
	uint64_t last = 0;

	/* versions 7 and 23 of one block (16 apart, as the global counter
	 * runs over other blocks' writes): both remembered */
	et_hist_add(hist[0], ET_HIST, 7);
	et_hist_add(hist[0], ET_HIST, 23);
	mix_fill(b, v.tag, 0, 0, 7, 6);
	T_TRUE(mixed_of(&mv, 0, 0, 23, b, 0));
	mix_fill(b, v.tag, 0, 7, 23, 3);
	T_TRUE(mixed_of(&mv, 0, 0, 23, b, 0));
	/* a version never written to the block, or outside (lo, hi]: refused */
	mix_fill(b, v.tag, 0, 0, 5, 6);
	T_TRUE(!mixed_of(&mv, 0, 0, 23, b, 0));
	mix_fill(b, v.tag, 0, 0, 23, 6);
	T_TRUE(!mixed_of(&mv, 0, 0, 22, b, 0));
	/* the last ET_HIST versions are kept, whatever their numbers */
	for (uint64_t i = 0; i < 3 * ET_HIST; i++)
		et_hist_add(hist[0], ET_HIST, last = 100 + 16 * i);
	for (uint64_t i = 0; i < ET_HIST; i++) {
		mix_fill(b, v.tag, 0, 0, last - 16 * i, 6);
		T_TRUE(mixed_of(&mv, 0, 0, last, b, 0));
	}
	mix_fill(b, v.tag, 0, 0, last - 16 * ET_HIST, 6);
	T_TRUE(!mixed_of(&mv, 0, 0, last, b, 0));
	printf("ok: the model's history of versions\n");
}

/* check block i of a read; lo: acknowledged at submit (or EV_ANY) */
static void check_read_block(struct et_model *m, struct et_mvol *mv, uint64_t lba, uint64_t lo,
			     const void *b, const char *what)
{
	uint64_t got = et_version(b, mv->v->tag, lba), hi = mv->issued[lba];
	char g[64], w[64], d[256];

	if (got == EV_BAD)
		et_describe(b, mv->v->tag, lba, lo, d, sizeof(d));
	else
		d[0] = '\0';
	if (lo == EV_ANY) {
		/* discarded (or a failed write): zeroes or one whole version
		 * written to the block; a mix only with a write that overlapped
		 * the read (in flight now, or completed since it was submitted) */
		if (got == EV_ZERO || (got != EV_BAD && got <= hi))
			return;
		if (got == EV_BAD && (mv->wbusy[lba] || mv->want[lba] != EV_ANY) &&
		    mixed_of(mv, lba, 0, hi, b, 1)) {
			m->torn_reads++;
			return;
		}
	} else if (got != EV_BAD && got != EV_ZERO && got >= lo && got <= hi) {
		return;
	} else if (lo != hi && got == EV_BAD && mixed_of(mv, lba, lo, hi, b, 0)) {
		m->torn_reads++;
		return;
	}
	if (lo != EV_ANY && lo != hi)
		T_FAIL("seed %" PRIu64 ": %s: vol %s block %" PRIu64 ": read %s, expected a version "
		       "from %" PRIu64 " (acknowledged) to %" PRIu64 " (newest written)%s%s",
		       m->seed, what, mv->v->name, lba, et_vstr(got, g, sizeof(g)), lo, hi,
		       d[0] ? "; block: " : "", d);
	T_FAIL("seed %" PRIu64 ": %s: vol %s block %" PRIu64 ": read %s, expected %s%s%s", m->seed,
	       what, mv->v->name, lba, et_vstr(got, g, sizeof(g)), et_vstr(lo, w, sizeof(w)),
	       d[0] ? "; block: " : "", d);
}

/* ET_TRACE=v:lba prints every request of model volume v covering lba */
static void trace(struct et_model *m, struct et_mreq *s, const char *ev, int res)
{
	enum pmc_mode mode = PMC_MODE_WRITE_BACK;
	int draining = 0;

	if (s->mv != m->trace_vol || m->trace_lba < s->lba || m->trace_lba >= s->lba + s->n)
		return;
	pmc_engine_get_mode(m->t->e, m->mv[s->mv].v->vol, &mode, &draining);
	printf("trace: %s %s %" PRIu64 "+%" PRIu64 " ver %" PRIu64 " res %d want %" PRIu64
	       " issued %" PRIu64 " (%s%s)\n",
	       ev, s->req.op == PMC_REQ_READ ? "read" : s->req.op == PMC_REQ_WRITE ? "write"
		   : s->req.op == PMC_REQ_DISCARD ? "discard" : "flush",
	       s->lba, s->n, s->ver, res, m->mv[s->mv].want[m->trace_lba],
	       m->mv[s->mv].issued[m->trace_lba], pmc_mode_name(mode),
	       draining ? ", draining" : "");
}

static void model_cb(struct pmc_req *req, int res)
{
	struct et_mreq *s = req->priv;
	struct et_model *m = s->m;
	struct et_mvol *mv = &m->mv[s->mv];
	char what[128];

	if (!s->busy || req != &s->req)
		T_FAIL("seed %" PRIu64 ": a completion (res %d) for a request not in flight: %s "
		       "of vol slot %u, bytes %" PRIu64 "+%" PRIu64 " (completed twice?)",
		       m->seed, res, op_name(req->op), req->vol, req->off, req->len);
	trace(m, s, "done", res);
	snprintf(what, sizeof(what), "%s of blocks %" PRIu64 "+%" PRIu64 " (op #%" PRIu64 ")",
		 op_name(req->op), s->lba, s->n, m->ops_done);
	if (res && !m->allow_errors)
		T_FAIL("seed %" PRIu64 ": vol %s: %s failed: %d", m->seed, mv->v->name, what, res);
	if (res)
		mv->errors++;
	switch (req->op) {
	case PMC_REQ_READ:
		for (uint64_t i = 0; i < s->n; i++) {
			if (!res)
				check_read_block(m, mv, s->lba + i, s->snap[i],
						 (char *)s->buf + i * BS, what);
			mv->rbusy[s->lba + i]--;
		}
		if (!res) {
			mv->reads++;
			mv->read_bytes += s->n * BS;
		}
		break;
	case PMC_REQ_WRITE:
		for (uint64_t i = 0; i < s->n; i++) {
			mv->want[s->lba + i] = res ? EV_ANY : s->ver;
			mv->wbusy[s->lba + i] = 0;
		}
		if (!res) {
			mv->writes++;
			mv->write_bytes += s->n * BS;
		}
		break;
	case PMC_REQ_DISCARD:
		for (uint64_t i = 0; i < s->n; i++) {
			mv->want[s->lba + i] = EV_ANY;
			mv->wbusy[s->lba + i] = 0;
		}
		if (!res) {
			mv->discards++;
			mv->discard_bytes += s->n * BS;
		}
		break;
	case PMC_REQ_FLUSH:
		if (!res)
			mv->flushes++;
		break;
	}
	s->busy = 0;
	m->inflight--;
	m->ops_done++;
}

static uint64_t pick_len(struct et_model *m, uint64_t max)
{
	uint64_t x = et_rand(&m->rng) % 100, n;

	if (x < 50)
		n = 1 + et_rand(&m->rng) % 4;
	else if (x < 80)
		n = 5 + et_rand(&m->rng) % 12;
	else if (x < 95)
		n = 17 + et_rand(&m->rng) % 48;
	else
		n = ET_MAX_REQ_BLOCKS;
	return n < max ? n : max;
}

/* can op run on blocks lba..+n of mv now? */
static int range_free(struct et_model *m, struct et_mvol *mv, enum pmc_req_op op, uint64_t lba,
		      uint64_t n)
{
	for (uint64_t i = lba; i < lba + n; i++) {
		if (mv->wbusy[i])
			return 0; /* nothing overlaps a write or discard, except... */
		if (mv->rbusy[i] && (op == PMC_REQ_DISCARD || !m->rw_overlap))
			return 0;
	}
	return 1;
}

/* ...a read may overlap a write in flight when rw_overlap: */
static int read_free(struct et_model *m, struct et_mvol *mv, uint64_t lba, uint64_t n,
		     int *overlaps)
{
	*overlaps = 0;
	for (uint64_t i = lba; i < lba + n; i++) {
		if (!mv->wbusy[i])
			continue;
		if (!m->rw_overlap)
			return 0;
		*overlaps = 1;
	}
	/* a discard in flight: never */
	for (unsigned k = 0; k < m->max_inflight; k++) {
		struct et_mreq *s = &m->slot[k];

		if (s->busy && s->req.op == PMC_REQ_DISCARD && &m->mv[s->mv] == mv &&
		    s->lba < lba + n && lba < s->lba + s->n)
			return 0;
	}
	return 1;
}

/* issue one random request; 0 if none could be placed this turn */
static int issue(struct et_model *m)
{
	struct et_mreq *s = free_slot(m);
	uint64_t x = et_rand(&m->rng) % 100;
	enum pmc_req_op op;
	unsigned vi = (unsigned)(et_rand(&m->rng) % m->nvols);
	struct et_mvol *mv = &m->mv[vi];
	uint64_t lba = 0, n = 0;
	int overlaps = 0, ok = 0;
	unsigned flags = 0;
	struct pmc_err err;

	if (!s)
		return 0;
	if (x < m->pct_write)
		op = PMC_REQ_WRITE;
	else if (x < m->pct_write + m->pct_discard)
		op = PMC_REQ_DISCARD;
	else if (x < m->pct_write + m->pct_discard + m->pct_flush)
		op = PMC_REQ_FLUSH;
	else
		op = PMC_REQ_READ;
	if (op != PMC_REQ_FLUSH) {
		for (int tries = 0; tries < 4 && !ok; tries++) {
			n = pick_len(m, mv->v->nblocks);
			lba = et_rand(&m->rng) % (mv->v->nblocks - n + 1);
			ok = op == PMC_REQ_READ ? read_free(m, mv, lba, n, &overlaps)
						: range_free(m, mv, op, lba, n);
		}
		if (!ok)
			return 0;
	}
	memset(&s->req, 0, sizeof(s->req));
	s->m = m;
	s->mv = vi;
	s->lba = lba;
	s->n = n;
	s->ver = 0;
	switch (op) {
	case PMC_REQ_WRITE:
		s->ver = ++m->next_ver;
		for (uint64_t i = 0; i < n; i++) {
			et_fill((char *)s->buf + i * BS, mv->v->tag, lba + i, s->ver);
			mv->issued[lba + i] = s->ver;
			et_hist_add(mv->hist[lba + i], ET_HIST, s->ver);
			mv->wbusy[lba + i] = 1;
		}
		if (et_rand(&m->rng) % 100 < m->pct_fua)
			flags |= PMC_REQ_FUA;
		break;
	case PMC_REQ_DISCARD:
		for (uint64_t i = 0; i < n; i++)
			mv->wbusy[lba + i] = 1;
		break;
	case PMC_REQ_READ:
		memset(s->buf, 0xee, n * BS);
		for (uint64_t i = 0; i < n; i++) {
			s->snap[i] = mv->want[lba + i];
			mv->rbusy[lba + i]++;
		}
		m->overlapped_reads += overlaps;
		break;
	case PMC_REQ_FLUSH:
		break;
	}
	s->req.op = op;
	s->req.vol = mv->v->vol;
	s->req.off = lba * BS;
	s->req.len = n * BS;
	s->req.buf = op == PMC_REQ_READ || op == PMC_REQ_WRITE ? s->buf : NULL;
	s->req.flags = flags;
	s->req.cb = model_cb;
	s->req.priv = s;
	s->busy = 1;
	m->inflight++;
	trace(m, s, "submit", 0);
	memset(&err, 0, sizeof(err));
	int rc = pmc_queue_submit(m->q, &s->req, &err);
	if (rc)
		T_FAIL("seed %" PRIu64 ": submit %s vol %s blocks %" PRIu64 "+%" PRIu64
		       ": refused %d (%s)",
		       m->seed, op_name(op), mv->v->name, lba, n, rc, err.msg);
	return 1;
}

void et_model_run(struct et_model *m, uint64_t ops, unsigned wb_every)
{
	uint64_t issued = 0, turns = 0, t0 = pmc_mono_ns(), last_done = m->ops_done;
	uint64_t last_progress = t0;

	T_TRUE(m->max_inflight >= 1 && m->max_inflight <= ET_MAX_INFLIGHT);
	while (issued < ops || m->inflight) {
		int ran;

		turns++;
		while (issued < ops && m->inflight < m->max_inflight && issue(m)) {
			issued++;
			if (m->hook && m->hook_every && issued % m->hook_every == 0)
				m->hook(m);
		}
		ran = turn(m->t->e, m->q, wb_every && turns % wb_every == 0 ? m->wbq : NULL,
			   m->inflight > 0);
		/* the write-back queue must be polled even between steps */
		if (m->wbq && m->wbq != m->q && pmc_queue_poll(m->wbq, 0, 0) < 0)
			T_FAIL("poll of the write-back queue failed");
		if (m->ops_done != last_done) {
			last_done = m->ops_done;
			last_progress = pmc_mono_ns();
		} else if (!ran && pmc_mono_ns() - last_progress > 15000000000ull) {
			T_FAIL("seed %" PRIu64 ": no request completed for 15 s (%u in flight, "
			       "%" PRIu64 " done)",
			       m->seed, m->inflight, m->ops_done);
		}
	}
}

void et_model_drain(struct et_model *m)
{
	et_model_run(m, 0, 1);
}

void et_model_verify_engine(struct et_model *m, const char *when)
{
	char *buf = et_alloc(ET_MAX_REQ_BLOCKS * BS);
	char what[128];

	et_model_drain(m);
	for (unsigned vi = 0; vi < m->nvols; vi++) {
		struct et_mvol *mv = &m->mv[vi];

		for (uint64_t lba = 0; lba < mv->v->nblocks; lba += ET_MAX_REQ_BLOCKS) {
			uint64_t n = mv->v->nblocks - lba;
			int rc;

			n = n < ET_MAX_REQ_BLOCKS ? n : ET_MAX_REQ_BLOCKS;
			memset(buf, 0xee, n * BS);
			rc = et_io(m->t->e, m->q, m->wbq, PMC_REQ_READ, mv->v->vol, lba, n, buf, 0);
			if (rc)
				T_FAIL("seed %" PRIu64 ": %s: read of vol %s blocks %" PRIu64
				       "+%" PRIu64 " failed: %d",
				       m->seed, when, mv->v->name, lba, n, rc);
			mv->reads++;
			mv->read_bytes += n * BS;
			snprintf(what, sizeof(what), "%s, read through the engine", when);
			for (uint64_t i = 0; i < n; i++)
				check_read_block(m, mv, lba + i, mv->want[lba + i], buf + i * BS,
						 what);
		}
	}
	free(buf);
}

void et_model_verify_disks(struct et_model *m, const char *when)
{
	char *buf = et_alloc(BS);
	char what[128];

	et_model_drain(m);
	snprintf(what, sizeof(what), "%s, read from the disk file", when);
	for (unsigned vi = 0; vi < m->nvols; vi++) {
		struct et_mvol *mv = &m->mv[vi];
		int fd = open(mv->v->path, O_RDONLY);

		if (fd < 0)
			T_FAIL("open %s: %s", mv->v->path, strerror(errno));
		for (uint64_t lba = 0; lba < mv->v->nblocks; lba++) {
			if (pread(fd, buf, BS, (off_t)(lba * BS)) != BS)
				T_FAIL("read %s block %" PRIu64 " failed", mv->v->path, lba);
			check_read_block(m, mv, lba, mv->want[lba], buf, what);
		}
		close(fd);
	}
	free(buf);
}

/* got == want, or the test fails naming both expressions and values */
#define VAL_EQ(name, got, want)                                                                    \
	do {                                                                                       \
		uint64_t _g = (uint64_t)(got), _w = (uint64_t)(want);                              \
		if (_g != _w)                                                                      \
			ET_SOFT_FAIL("vol %s: stats: %s = %" PRIu64 ", expected %s = %" PRIu64,    \
				     (name), #got, _g, #want, _w);                                 \
	} while (0)

/* identities every error-free stats snapshot satisfies */
static void stats_identities(const struct pmc_vol_stats *s, const char *name)
{
	VAL_EQ(name, s->read_hits + s->read_partial_misses + s->read_full_misses, s->reads);
	VAL_EQ(name, s->read_hit_blocks + s->read_miss_blocks, s->read_bytes / BS);
	VAL_EQ(name, s->admit_blocks + s->bypass_blocks, s->read_miss_blocks);
	VAL_EQ(name, s->wb_bytes, s->wb_blocks * BS);
	VAL_EQ(name, s->dirty_bytes, s->dirty_blocks * BS);
	VAL_EQ(name, et_hist_sum(s->lat[PMC_LAT_READ_HIT]), s->read_hits);
	VAL_EQ(name, et_hist_sum(s->lat[PMC_LAT_READ_MISS]),
	       s->read_partial_misses + s->read_full_misses);
	VAL_EQ(name,
	       et_hist_sum(s->lat[PMC_LAT_WRITE_PMEM]) + et_hist_sum(s->lat[PMC_LAT_WRITE_DISK]),
	       s->writes);
	VAL_EQ(name, et_hist_sum(s->lat[PMC_LAT_FLUSH]), s->flushes);
	VAL_EQ(name, et_hist_sum(s->lat[PMC_LAT_DISCARD]), s->discards);
	VAL_EQ(name, et_hist_sum(s->lat[PMC_LAT_WRITEBACK]), s->wb_ios);
	if (s->wb_merged_blocks > s->wb_blocks)
		ET_SOFT_FAIL("vol %s: wb_merged_blocks %" PRIu64 " > wb_blocks %" PRIu64, name,
		       s->wb_merged_blocks, s->wb_blocks);
	if (s->write_pmem_blocks + s->write_disk_blocks < s->write_bytes / BS)
		ET_SOFT_FAIL("vol %s: write_pmem_blocks %" PRIu64 " + write_disk_blocks %" PRIu64
		       " < blocks written %" PRIu64,
		       name, s->write_pmem_blocks, s->write_disk_blocks, s->write_bytes / BS);
}

void et_model_check_stats(struct et_model *m)
{
	struct pmc_vol_stats s;

	et_model_drain(m);
	for (unsigned vi = 0; vi < m->nvols; vi++) {
		struct et_mvol *mv = &m->mv[vi];
		const char *name = mv->v->name;

		et_stats(m->t->e, mv->v->vol, &s);
		VAL_EQ(name, s.reads, mv->reads);
		VAL_EQ(name, s.writes, mv->writes);
		VAL_EQ(name, s.flushes, mv->flushes);
		VAL_EQ(name, s.discards, mv->discards);
		VAL_EQ(name, s.read_bytes, mv->read_bytes);
		VAL_EQ(name, s.write_bytes, mv->write_bytes);
		VAL_EQ(name, s.discard_bytes, mv->discard_bytes);
		if (!m->allow_errors) {
			VAL_EQ(name, s.read_errors, 0);
			VAL_EQ(name, s.write_errors, 0);
			VAL_EQ(name, s.wb_errors, 0);
			VAL_EQ(name, s.error, 0);
			stats_identities(&s, name);
		}
	}
}

void et_check_total_stats(struct pmc_engine *e, const uint32_t *vols, unsigned n, int identities)
{
	struct pmc_vol_stats s, all, sum;
	const char *name = "(whole cache)";

	memset(&sum, 0, sizeof(sum));
	for (unsigned i = 0; i < n; i++) {
		et_stats(e, vols[i], &s);
		pmc_stats_add(&sum, &s);
	}
	et_stats(e, UINT32_MAX, &all);
	VAL_EQ(name, all.reads, sum.reads);
	VAL_EQ(name, all.writes, sum.writes);
	VAL_EQ(name, all.flushes, sum.flushes);
	VAL_EQ(name, all.discards, sum.discards);
	VAL_EQ(name, all.read_bytes, sum.read_bytes);
	VAL_EQ(name, all.write_bytes, sum.write_bytes);
	VAL_EQ(name, all.wb_blocks, sum.wb_blocks);
	VAL_EQ(name, all.dirty_blocks, sum.dirty_blocks);
	VAL_EQ(name, all.clean_blocks, sum.clean_blocks);
	if (identities)
		stats_identities(&all, name);
}
