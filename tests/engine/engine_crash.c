/* engine_crash.c - power cuts while the engine writes, fills, flushes and
 * writes back, in every mode, with the backing disks' volatile caches.
 *
 * The cache lives on a simulated pmem (tests/lib/simpmem.c) that records
 * every store, flush and drain; each backing disk is the volatile-cache
 * model of etest.h (et_vdisk): a plain write is durable only once a sync
 * issued after it completed has finished, an RWF_DSYNC write when it
 * completes. A seeded workload runs through the engine: writes of 1..8
 * blocks (some FUA), reads that fill the cache, FLUSHes, write-back steps,
 * write-back on one volume and write-through on the other, a drain from
 * write-back while most of the cache is dirty, then every mode on both
 * volumes with mode switches every few requests, then flush_all and a
 * clean close. Disk reads into pmem bypass the pmem ops (the kernel writes
 * the mapping), so the disk's complete hook records them as stores, as
 * the DMA they model would be: not durable until the engine flushes them.
 *
 * At chosen persist points (drains) the simulator builds crash images: the
 * durable contents plus, for each 8-byte word stored and not yet drained,
 * that word landing or not (none, all, a random half); each disk loses
 * none, all or a random subset of its writes that are not durable. Each
 * image is recovered (pmc_cache_open, pmc_cache_check) and every block of
 * every volume is checked (lib/ORDERING.md): what the cache holds, or on a
 * miss what the disk holds, is one whole version no older than the newest
 * that must have survived (acknowledged in write-back or write-through
 * mode, FUA, or acknowledged before a FLUSH that completed); a CLEAN cached
 * block equals the disk, always (else it would change value at eviction).
 * Every image counts as a disk_cache_crash_point. A sample of crash points
 * is also recovered end to end, later: an engine on the image and on the
 * disks as the power cut left them, flush_all, and the disks must then
 * hold such versions and read the same through the engine.
 *
 * Crash points: 1 in N (--every, default 20) of the persist points while
 * writing and filling, 1 in N/8 while writing around a volume that still
 * holds dirty data and while switching modes, every one during flush_all
 * and the clean close.
 * Usage: engine_crash [--seed S] [--every N] [--ops N] [--serial] [--only-point K]
 * A failure prints the seed and the drain; --seed S --only-point K crashes
 * there only. With --serial (one I/O at a time) the run is the same every
 * time and the replay exact; without, disk completion timing may shift the
 * numbering.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "diskid.h"
#include "etest.h"
#include "simpmem.h"
#include "t.h"

#define NV 2
#define CACHE_BLOCKS 96
#define MAXN 8		/* blocks per request */
#define INFLIGHT 4
#define NSAMPLES 8	/* end-to-end recoveries */

struct cvol {
	struct et_vol v;
	struct et_vdisk *vd;
	uint64_t *want;	/* newest version that must survive a power cut */
	uint64_t *acked; /* last acknowledged version (live reads return it) */
	uint64_t *pend;	/* version of the write in flight, 0 none */
	uint8_t *busy;	/* a request in flight covers the block */
	enum pmc_mode mode; /* as last set */
	uint64_t epoch;	/* mode changes */
};

struct creq {
	struct pmc_req req;
	int busy;
	unsigned cv;
	uint64_t lba, n, ver;
	uint64_t epoch;	/* write: cvol epoch at submit */
	uint64_t *snap;	/* flush: acked[] at submit */
	char *buf;
};

struct sample {
	uint64_t drain;
	char *image;
	char *disk[NV];
	uint64_t *want[NV], *pend[NV];
};

static uint64_t g_seed, g_rng, g_check_rng;
static struct simpmem g_sim;
static struct et g_t;
static struct cvol g_cv[NV];
static struct creq g_req[INFLIGHT];
static unsigned g_inflight;
static uint64_t g_next_ver;
static struct pmc_queue *g_q;
static char *g_image, *g_blk;
static int g_armed;
static uint64_t g_only_point, g_every = 20, g_stride;
static uint64_t g_checks, g_images, g_seen_drains;
static uint64_t g_disk_lost;	/* crash images in which a disk lost a write */
static uint64_t g_flushes, g_mode_switches;
/* write-back writes (from pmem, plain: made durable by a sync of their
 * round), syncs the disks completed, and of those the ones that completed
 * while no FLUSH request was in flight (so a write-back round's: a FLUSH
 * covered by a round's sync issues none of its own, so the total says
 * nothing about rounds) */
static uint64_t g_wb_plain, g_syncs, g_round_syncs;
static unsigned g_flush_inflight;
static unsigned g_pct_flush = 6, g_pct_fua = 10;
static int g_full; /* default run: must reach its count of crash points */
static char *g_dimg[NV];	/* a disk's crash image */
static const char *g_phase = "setup";
static struct sample g_samples[NSAMPLES];
/* --serial: one request or write-back write at a time, each finished
 * before the next starts, so the same seed stores and drains in the same
 * order every time and --only-point replays a failure exactly */
static int g_serial;
static unsigned g_nsamples;

/* --- the disk: reads into pmem are stores the simulator must see --- */

static int rec_complete(struct pmc_disk *d, struct pmc_io *io, int res)
{
	uint64_t left;

	res = et_vdisk_complete(d, io, res);
	left = res > 0 ? (uint64_t)res : 0;
	if (io->op == PMC_IO_FSYNC && res == 0) {
		g_syncs++;
		g_round_syncs += g_flush_inflight == 0;
	}
	if (io->op == PMC_IO_WRITE && !(io->rw_flags & RWF_DSYNC) && io->iovcnt > 0 &&
	    (char *)io->iov[0].iov_base >= g_sim.live &&
	    (char *)io->iov[0].iov_base < g_sim.live + g_sim.size)
		g_wb_plain++;
	if (io->op != PMC_IO_READ)
		return res;
	for (int i = 0; i < io->iovcnt && left; i++) {
		char *p = io->iov[i].iov_base;
		uint64_t n = io->iov[i].iov_len < left ? io->iov[i].iov_len : left;

		left -= n;
		if (p < g_sim.live || p + n > g_sim.live + g_sim.size)
			continue; /* a request buffer */
		for (uint64_t o = 0; o < n; o += BS) {
			uint64_t k = n - o < BS ? n - o : BS;

			memcpy(g_blk, p + o, k);
			pmc_pmem_copy(g_sim.pm, p + o, g_blk, k);
		}
	}
	return res;
}

static const struct pmc_disk_ops rec_ops = {
	.submit = et_vdisk_submit,
	.complete = rec_complete,
};

/* --- checking a crash image --- */

static void fail_at(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail_at(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "FAIL [seed %" PRIu64 " drain %" PRIu64 " phase %s]: ", g_seed,
		g_sim.drains, g_phase);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  replay: engine_crash --seed %" PRIu64 "%s --only-point %" PRIu64 "%s\n",
		g_seed, g_serial ? " --serial" : "", g_sim.drains,
		g_serial ? "" : " (without --serial, disk timing may shift the point)");
	exit(1);
}

/* b is one whole version of the block, no older than want (the newest
 * that must survive); versions only grow, and each carries its block's
 * tag and LBA, so any such version was written to this block */
static int allowed(const void *b, uint32_t tag, uint64_t lba, uint64_t want, uint64_t *got)
{
	*got = et_version(b, tag, lba);
	return *got < EV_ANY && *got >= want;
}

static const char *land_name(enum et_land how)
{
	return how == ET_LAND_NONE ? "none" : how == ET_LAND_ALL ? "all" : "random";
}

/* disks as a power cut now leaves them: g_dimg[] */
static void disk_images(enum et_land how)
{
	struct et_vdisk_stats st;
	int lost = 0;

	for (unsigned i = 0; i < NV; i++) {
		et_vdisk_crash_image(g_cv[i].vd, g_dimg[i], how, &g_check_rng);
		et_vdisk_get_stats(g_cv[i].vd, &st);
		lost |= st.volatile_blocks && how != ET_LAND_ALL;
	}
	g_disk_lost += lost;
}

static void verify_image(char *image, int mode, enum et_land how)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_err err = {0};
	struct pmc_check_report rep;

	T_EQ(pmc_pmem_wrap(image, g_sim.size, &simpmem_direct_ops, NULL, &pm), 0);
	if (pmc_cache_open(pm, 0, &c, &err))
		fail_at("recovery (landing mode %d) failed: %s", mode, err.msg);
	if (pmc_cache_check(c, &rep, &err))
		fail_at("check after recovery (landing mode %d): %s", mode, err.msg);
	for (unsigned i = 0; i < NV; i++) {
		struct cvol *cv = &g_cv[i];
		uint32_t slot;

		if (pmc_cache_volume_find(c, cv->v.name, &slot))
			fail_at("volume %s missing after recovery", cv->v.name);
		for (uint64_t lba = 0; lba < cv->v.nblocks; lba++) {
			uint64_t want = cv->want[lba], pend = cv->pend[lba], blk, got, dgot;
			enum pmc_block_state st;
			char g[64], d[256];

			const char *dbuf = g_dimg[i] + lba * BS;

			if (pmc_cache_lookup_pin(c, slot, lba, &blk, &st) == 0) {
				const char *data = pmc_cache_block_data(c, blk);

				if (!allowed(data, cv->v.tag, lba, want, &got))
					fail_at("(landing mode %d, disk writes landing: %s) vol %s "
						"block %" PRIu64 ": the %s cached block is %s, must be "
						"at least version %" PRIu64 " (acknowledged %" PRIu64
						", in flight %" PRIu64 "); block: %s",
						mode, land_name(how), cv->v.name, lba,
						st == PMC_BLK_DIRTY ? "dirty" : "clean",
						et_vstr(got, g, sizeof(g)), want, cv->acked[lba], pend,
						et_describe(data, cv->v.tag, lba, want, d, sizeof(d)));
				/* no waiver: a CLEAN copy that differs from the disk
				 * would change value at eviction */
				if (st == PMC_BLK_CLEAN) {
					dgot = et_version(dbuf, cv->v.tag, lba);
					if (dgot != got)
						fail_at("(landing mode %d, disk writes landing: %s) vol %s "
							"block %" PRIu64 ": clean in the cache with "
							"version %" PRIu64 ", but the disk has %s (in "
							"flight %" PRIu64 ")",
							mode, land_name(how), cv->v.name, lba, got,
							et_vstr(dgot, g, sizeof(g)), pend);
				}
				pmc_cache_unpin(c, blk);
			} else if (!allowed(dbuf, cv->v.tag, lba, want, &got)) {
				fail_at("(landing mode %d, disk writes landing: %s) vol %s block %" PRIu64
					": not cached, and the disk has %s; must be at least version "
					"%" PRIu64 " (acknowledged %" PRIu64 ", in flight %" PRIu64
					"); block: %s",
					mode, land_name(how), cv->v.name, lba, et_vstr(got, g, sizeof(g)),
					want, cv->acked[lba], pend,
					et_describe(dbuf, cv->v.tag, lba, want, d, sizeof(d)));
			}
		}
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	g_images++;
}

static void take_sample(void)
{
	struct sample *s = &g_samples[g_nsamples++];

	s->drain = g_sim.drains;
	s->image = et_alloc(g_sim.size);
	simpmem_crash_image(&g_sim, s->image, 2, &g_check_rng);
	for (unsigned i = 0; i < NV; i++) {
		uint64_t n = g_cv[i].v.nblocks;

		s->disk[i] = et_alloc(n * BS);
		et_vdisk_crash_image(g_cv[i].vd, s->disk[i], ET_LAND_RANDOM, &g_check_rng);
		s->want[i] = malloc(n * sizeof(uint64_t));
		s->pend[i] = malloc(n * sizeof(uint64_t));
		T_TRUE(s->want[i] && s->pend[i]);
		memcpy(s->want[i], g_cv[i].want, n * sizeof(uint64_t));
		memcpy(s->pend[i], g_cv[i].pend, n * sizeof(uint64_t));
	}
}

static void on_drain(struct simpmem *s, void *arg)
{
	(void)arg;
	if (!g_armed)
		return;
	g_seen_drains++;
	if (g_only_point ? s->drains != g_only_point : et_rand(&g_check_rng) % g_stride)
		return;
	g_checks++;
	for (int mode = 0; mode < 3; mode++) {
		enum et_land how = (enum et_land)((g_checks + (uint64_t)mode) % 3);

		simpmem_crash_image(s, g_image, mode, &g_check_rng);
		disk_images(how);
		verify_image(g_image, mode, how);
	}
	if (g_nsamples < NSAMPLES && (g_only_point || g_checks % 40 == 7))
		take_sample();
}

/* --- the workload --- */

static void req_cb(struct pmc_req *req, int res)
{
	struct creq *r = req->priv;
	struct cvol *cv = &g_cv[r->cv];

	if (!r->busy)
		fail_at("a completion for a request not in flight");
	if (res)
		fail_at("%s of vol %s blocks %" PRIu64 "+%" PRIu64 " failed: %d",
			req->op == PMC_REQ_READ ? "read" : req->op == PMC_REQ_WRITE ? "write" : "flush",
			cv->v.name, r->lba, r->n, res);
	if (req->op == PMC_REQ_FLUSH) {
		/* what was acknowledged before it arrived must survive now */
		for (uint64_t lba = 0; lba < cv->v.nblocks; lba++)
			if (r->snap[lba] > cv->want[lba] && r->snap[lba] < EV_ANY)
				cv->want[lba] = r->snap[lba];
		g_flushes++;
		g_flush_inflight--;
	}
	for (uint64_t i = 0; i < r->n; i++) {
		uint64_t lba = r->lba + i;

		if (req->op == PMC_REQ_WRITE) {
			cv->acked[lba] = r->ver;
			cv->pend[lba] = 0;
			/* durable at completion: FUA, or write-back/write-through
			 * in force all along (ORDERING.md) */
			if ((req->flags & PMC_REQ_FUA) ||
			    (r->epoch == cv->epoch && cv->mode <= PMC_MODE_WRITE_THROUGH))
				cv->want[lba] = r->ver;
		} else {
			uint64_t got = et_version(r->buf + i * BS, cv->v.tag, lba);
			char g[64];

			if (got != cv->acked[lba])
				fail_at("live read of vol %s block %" PRIu64 ": %s, expected version "
					"%" PRIu64,
					cv->v.name, lba, et_vstr(got, g, sizeof(g)), cv->acked[lba]);
		}
		cv->busy[lba] = 0;
	}
	r->busy = 0;
	g_inflight--;
}

static int issue(void)
{
	struct creq *r = NULL;
	struct pmc_err err;
	unsigned cvi = (unsigned)(et_rand(&g_rng) % NV);
	struct cvol *cv = &g_cv[cvi];
	uint64_t x = et_rand(&g_rng) % 100;
	int write = x < 60, flush = x >= 60 && x < 60 + g_pct_flush;
	int fua = write && et_rand(&g_rng) % 100 < g_pct_fua;
	uint64_t n = 1 + et_rand(&g_rng) % MAXN;
	uint64_t lba = et_rand(&g_rng) % (cv->v.nblocks - n + 1);

	for (unsigned i = 0; i < INFLIGHT && !r; i++)
		if (!g_req[i].busy)
			r = &g_req[i];
	if (!r)
		return 0;
	if (flush) {
		n = 0;
		lba = 0;
		memcpy(r->snap, cv->acked, cv->v.nblocks * sizeof(uint64_t));
	}
	for (uint64_t i = lba; i < lba + n; i++)
		if (cv->busy[i])
			return 0;
	r->cv = cvi;
	r->lba = lba;
	r->n = n;
	r->epoch = cv->epoch;
	r->ver = write ? ++g_next_ver : 0;
	for (uint64_t i = 0; i < n; i++) {
		cv->busy[lba + i] = 1;
		if (write) {
			et_fill(r->buf + i * BS, cv->v.tag, lba + i, r->ver);
			cv->pend[lba + i] = r->ver;
		}
	}
	memset(&r->req, 0, sizeof(r->req));
	r->req.op = flush ? PMC_REQ_FLUSH : write ? PMC_REQ_WRITE : PMC_REQ_READ;
	r->req.vol = cv->v.vol;
	r->req.off = lba * BS;
	r->req.len = n * BS;
	r->req.buf = flush ? NULL : r->buf;
	r->req.flags = fua ? PMC_REQ_FUA : 0;
	r->req.cb = req_cb;
	r->req.priv = r;
	r->busy = 1;
	g_inflight++;
	g_flush_inflight += flush;
	memset(&err, 0, sizeof(err));
	if (pmc_queue_submit(g_q, &r->req, &err))
		fail_at("submit refused: %s", err.msg);
	return 1;
}

/* crash at 1 in `stride` persist points of the phase */
static void phase(const char *name, uint64_t stride)
{
	static uint64_t last_drains, last_checks;

	if (g_armed && strcmp(g_phase, "setup"))
		printf("phase %-18s %6" PRIu64 " persist points, %4" PRIu64 " crashed at\n", g_phase,
		       g_sim.drains - last_drains, g_checks - last_checks);
	last_drains = g_sim.drains;
	last_checks = g_checks;
	g_phase = name;
	g_stride = stride ? stride : 1;
}

static void quiesce(void)
{
	while (pmc_queue_busy(g_q))
		if (pmc_queue_poll(g_q, 1, 2000000ull) < 0)
			fail_at("poll failed");
}

static void run(uint64_t ops, unsigned wb_every)
{
	uint64_t started = 0, turns = 0;

	if (g_serial) {
		for (; started < ops; started++) {
			if (!issue())
				fail_at("serial: a request could not be placed");
			quiesce();
			if (wb_every && ++turns % wb_every == 0) {
				pmc_engine_writeback_step(g_t.e, g_q);
				quiesce();
			}
		}
		return;
	}
	while (started < ops || g_inflight) {
		while (started < ops && g_inflight < INFLIGHT && issue())
			started++;
		if (wb_every && ++turns % wb_every == 0)
			pmc_engine_writeback_step(g_t.e, g_q);
		if (pmc_queue_poll(g_q, g_inflight > 0, 2000000ull) < 0)
			fail_at("poll failed");
	}
}

/* the test's own idea of the mode: writes acknowledged while it was
 * write-back or write-through all along must be durable */
static void set_mode(unsigned cvi, enum pmc_mode mode)
{
	struct pmc_err err;
	struct cvol *cv = &g_cv[cvi];

	memset(&err, 0, sizeof(err));
	if (pmc_engine_set_mode(g_t.e, cv->v.vol, mode, &err))
		fail_at("set mode of %s: %s", cv->v.name, err.msg);
	cv->mode = mode;
	cv->epoch++;
	g_mode_switches++;
}

/* --- end-to-end recovery of a sample --- */

/* a copy of a crashed disk's image carries the identity of that disk */
static int copy_identify(struct pmc_disk *d, struct pmc_disk_id *id, struct pmc_err *err)
{
	int fd = open(d->priv, O_RDONLY), rc;

	if (fd < 0)
		return pmc_err_set(err, errno, "%s: %s", (const char *)d->priv, strerror(errno));
	rc = pmc_disk_id_get(fd, d->size, id, err);
	close(fd);
	return rc;
}

static void copy_submit(struct pmc_disk *d, struct pmc_ring *r, struct pmc_io *io)
{
	pmc_disk_default_ops.submit(d, r, io);
}

static const struct pmc_disk_ops copy_ops = {
	.submit = copy_submit,
	.identify = copy_identify,
};

static void recover_sample(struct sample *s)
{
	struct et t;
	struct et_vol v[NV];
	struct pmc_queue *q;
	struct pmc_err err;
	char *buf = et_alloc(MAXN * BS);

	memset(&t, 0, sizeof(t));
	T_EQ(pmc_pmem_wrap(s->image, g_sim.size, &simpmem_direct_ops, NULL, &t.pm), 0);
	memset(&err, 0, sizeof(err));
	if (pmc_cache_open(t.pm, 0, &t.c, &err))
		T_FAIL("sample at drain %" PRIu64 ": recovery failed: %s", s->drain, err.msg);
	pmc_wb_conf_default(&t.wb);
	T_OK(pmc_engine_create(t.c, &t.wb, &t.e, &err));
	for (unsigned i = 0; i < NV; i++) {
		char what[32];
		int fd;

		v[i] = g_cv[i].v;
		snprintf(what, sizeof(what), "copy%u", i);
		et_path(v[i].path, sizeof(v[i].path), what);
		fd = open(v[i].path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || pwrite(fd, s->disk[i], v[i].nblocks * BS, 0) !=
				      (ssize_t)(v[i].nblocks * BS))
			T_FAIL("cannot write %s", v[i].path);
		close(fd);
		/* the copy stands for the disk the crash left behind */
		et_attach(&t, &v[i], NULL, &copy_ops, g_cv[i].v.path);
	}
	q = et_queue(t.e, 8);
	et_flush_all(&t, q, NULL);
	for (unsigned i = 0; i < NV; i++) {
		for (uint64_t lba = 0; lba < v[i].nblocks; lba++) {
			uint64_t want = s->want[i][lba], pend = s->pend[i][lba], got;
			char g[64];

			et_disk_read(v[i].path, lba, buf);
			if (!allowed(buf, v[i].tag, lba, want, &got))
				T_FAIL("seed %" PRIu64 ": crash at drain %" PRIu64 ", recovered by an "
				       "engine and flushed: vol %s block %" PRIu64 " on the disk is %s, "
				       "must be at least version %" PRIu64 ", in flight %" PRIu64,
				       g_seed, s->drain, v[i].name, lba, et_vstr(got, g, sizeof(g)),
				       want, pend);
			T_EQ(et_io(t.e, q, q, PMC_REQ_READ, v[i].vol, lba, 1, buf + BS, 0), 0);
			if (memcmp(buf, buf + BS, BS))
				T_FAIL("seed %" PRIu64 ": crash at drain %" PRIu64 ": vol %s block %" PRIu64
				       " reads differently through the engine than from the disk after "
				       "flush_all",
				       g_seed, s->drain, v[i].name, lba);
		}
	}
	pmc_queue_destroy(q);
	pmc_engine_destroy(t.e);
	pmc_cache_close(t.c);
	pmc_pmem_close(t.pm);
	free(buf);
}

int main(int argc, char **argv)
{
	struct pmc_err err;
	uint64_t ops = 600;
	struct pmc_volume_conf vc;

	g_seed = et_seed_arg(argc, argv, NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--every") && i + 1 < argc)
			g_every = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--only-point") && i + 1 < argc)
			g_only_point = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--serial"))
			g_serial = 1;
	}
	g_full = !g_only_point && ops == 600 && g_every == 20 && !g_serial;
	printf("seed: %" PRIu64 "%s\n", g_seed, g_serial ? " (serial)" : "");
	g_rng = g_seed;
	g_check_rng = ~g_seed;

	T_EQ(simpmem_init(&g_sim, et_pmem_size(CACHE_BLOCKS)), 0);
	g_sim.on_drain = on_drain;
	g_image = et_alloc(g_sim.size);
	g_blk = et_alloc(BS);
	for (unsigned i = 0; i < INFLIGHT; i++)
		g_req[i].buf = et_alloc(MAXN * BS);
	T_OK(pmc_cache_format(g_sim.pm, NULL, &err));
	T_OK(pmc_cache_open(g_sim.pm, 0, &g_t.c, &err));
	g_t.pm = g_sim.pm;
	pmc_wb_conf_default(&g_t.wb);
	/* a policy that does not depend on time: the same seed crashes at
	 * the same operations */
	g_t.wb.high_pct = 40;
	g_t.wb.low_pct = 20;
	g_t.wb.max_age_ms = 600000;
	g_t.wb.max_io_bytes = 32 << 10;
	g_t.wb.max_inflight = g_serial ? 1 : 8;
	g_t.wb.busy_inflight = g_t.wb.max_inflight;
	T_OK(pmc_engine_create(g_t.c, &g_t.wb, &g_t.e, &err));
	pmc_volume_conf_default(&vc);
	for (unsigned i = 0; i < NV; i++) {
		struct cvol *cv = &g_cv[i];

		snprintf(cv->v.name, sizeof(cv->v.name), "c%u", i);
		et_path(cv->v.path, sizeof(cv->v.path), cv->v.name);
		cv->v.tag = i + 1;
		cv->v.nblocks = i ? 128 : 256;
		et_disk_create(cv->v.path, cv->v.tag, cv->v.nblocks);
		cv->want = calloc(cv->v.nblocks, sizeof(uint64_t));
		cv->acked = calloc(cv->v.nblocks, sizeof(uint64_t));
		cv->pend = calloc(cv->v.nblocks, sizeof(uint64_t));
		cv->busy = calloc(cv->v.nblocks, 1);
		T_TRUE(cv->want && cv->acked && cv->pend && cv->busy);
		cv->vd = et_vdisk_new(cv->v.path, cv->v.nblocks);
		g_dimg[i] = et_alloc(cv->v.nblocks * BS);
		vc.mode = i ? PMC_MODE_WRITE_THROUGH : PMC_MODE_WRITE_BACK;
		cv->mode = vc.mode;
		et_attach(&g_t, &cv->v, &vc, &rec_ops, cv->vd);
	}
	for (unsigned i = 0; i < INFLIGHT; i++) {
		g_req[i].snap = calloc(256, sizeof(uint64_t));
		T_TRUE(g_req[i].snap != NULL);
	}
	g_q = et_queue(g_t.e, 16);
	printf("fixed buffers: %s\n", pmc_queue_fixed_buffers(g_q) ? "yes" : "no");

	g_armed = 1;
	phase("writes and fills", g_every);
	run(ops, 4);
	/* leave write-back while most of the cache is dirty (write-back
	 * only above 90 %): the volume drains (writes go around) over blocks
	 * still dirty */
	{
		struct pmc_wb_conf wb = g_t.wb;

		wb.high_pct = 90;
		wb.low_pct = 80;
		pmc_engine_set_wb_conf(g_t.e, &wb);
		run(ops / 4, 4);
		phase("write-around", g_every / 8);
		set_mode(0, PMC_MODE_WRITE_AROUND);
		run(ops / 4, 4);
		pmc_engine_set_wb_conf(g_t.e, &g_t.wb);
	}
	/* every mode on both volumes, switching every few requests */
	phase("mode switches", g_every / 8);
	for (uint64_t k = 0; k < ops / 25; k++) {
		set_mode((unsigned)(et_rand(&g_rng) % NV),
			 (enum pmc_mode)(et_rand(&g_rng) % (PMC_MODE_PASS_THROUGH + 1)));
		run(25, 4);
	}
	phase("write-back again", g_every);
	set_mode(0, PMC_MODE_WRITE_BACK);
	set_mode(1, PMC_MODE_WRITE_THROUGH);
	run(ops / 2, 4);
	/* how many persist points a run meets depends on disk timing (a loaded
	 * machine completes disk writes in other orders): go on writing until
	 * the floor below is met, boundedly, rather than fail for the timing */
	for (unsigned more = 0; g_full && g_images < 5200 && more < 40; more++)
		run(ops / 8 + 1, 4);
	phase("flush_all", 1);
	et_flush_all(&g_t, g_q, NULL);
	phase("clean close", 1);
	pmc_queue_destroy(g_q);
	pmc_engine_destroy(g_t.e);
	et_check_cache(&g_t);
	pmc_cache_close(g_t.c);
	phase("after a clean close", 1);
	g_armed = 0;
	disk_images(ET_LAND_NONE);
	verify_image(g_sim.dura, 0, ET_LAND_NONE);
	printf("%" PRIu64 " persist points seen, %" PRIu64 " crashed at, %" PRIu64
	       " crash images recovered and checked\n",
	       g_seen_drains, g_checks, g_images);
	printf("%" PRIu64 " flushes, %" PRIu64 " mode switches; %" PRIu64 " images with disk "
	       "writes lost\n", g_flushes, g_mode_switches, g_disk_lost);
	/* every image is a power cut of the pmem and of the disks' caches,
	 * all modes together */
	printf("disk_cache_crash_points: %" PRIu64 "\n", g_images);
	/* write-back's path on a volatile disk cache: plain writes, then a
	 * sync of the round, then clean (ORDERING.md) */
	printf("%" PRIu64 " write-back writes without RWF_DSYNC, %" PRIu64 " syncs completed, "
	       "%" PRIu64 " of them with no FLUSH request in flight (%" PRIu64 " FLUSH requests)\n",
	       g_wb_plain, g_syncs, g_round_syncs, g_flushes);
	if (!g_wb_plain || !g_round_syncs)
		T_FAIL("write-back did not take its batched path (plain writes, a sync per "
		       "round) on the volatile-cache disks");
	if (g_checks < (g_only_point ? 1 : 50))
		T_FAIL("only %" PRIu64 " crash points checked", g_checks);
	if (g_full && g_images < 5000)
		T_FAIL("only %" PRIu64 " disk cache crash points checked, expected 5000", g_images);

	for (unsigned i = 0; i < g_nsamples; i++) {
		recover_sample(&g_samples[i]);
		free(g_samples[i].image);
		for (unsigned k = 0; k < NV; k++) {
			free(g_samples[i].disk[k]);
			free(g_samples[i].want[k]);
			free(g_samples[i].pend[k]);
		}
	}
	printf("ok: %u crash points recovered end to end (engine, flush_all, disks)\n",
	       g_nsamples);
	for (unsigned i = 0; i < NV; i++) {
		free(g_cv[i].want);
		free(g_cv[i].acked);
		free(g_cv[i].pend);
		free(g_cv[i].busy);
		free(g_dimg[i]);
		et_vdisk_free(g_cv[i].vd);
	}
	for (unsigned i = 0; i < INFLIGHT; i++) {
		free(g_req[i].buf);
		free(g_req[i].snap);
	}
	free(g_image);
	free(g_blk);
	simpmem_fini(&g_sim);
	return et_exit("engine_crash", g_seed);
}
