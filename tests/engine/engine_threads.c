/* engine_threads.c - the engine driven by several threads at once.
 *
 * Three request threads, each with its own queue, write the stripes of 16
 * blocks they own (blocks b with (b / 16) % 3 == thread) and read anything,
 * several requests in flight each; a write-back thread runs write-back steps
 * on its own queue and every 100 ms changes the second volume's mode and
 * the write-back settings; the main thread samples stats meanwhile. The
 * volumes are 6x the cache, so blocks are evicted all the time.
 *
 * Every block read must be one whole version of that block (its header
 * names the block and version, the rest is a pattern from them), no older
 * than what its owner had acknowledged when the read was submitted and no
 * newer than what it had submitted when the read completed. (A block whose
 * owner was writing it meanwhile may read as a word-by-word mix of those
 * versions: the disk does not order a read against a concurrent write of
 * the same sectors. Counted, printed, not a failure.) At the end: flush_all,
 * then every block on the disk files and through the engine is its owner's
 * last acknowledged version, and the stats count every request.
 *
 * Runs under ThreadSanitizer in CI (label threads).
 * Usage: engine_threads [--seed S] [--ops N]   (N: requests per thread)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etest.h"
#include "t.h"

#define NT 3	   /* request threads */
#define NV 2	   /* volumes */
#define NB 768	   /* blocks per volume */
#define STRIPE 16  /* blocks per ownership stripe */
#define INFLIGHT 4 /* requests in flight per thread */
#define HIST 8	   /* versions remembered per block */

static uint64_t g_seed, g_ops = 4000;
static struct et g_t;
static struct et_vol g_vols[NV];
static atomic_uint_fast64_t g_ver;	       /* last version handed out */
static atomic_uint_fast64_t acked[NV][NB];     /* owner's last acknowledged version */
static atomic_uint_fast64_t issued[NV][NB];    /* owner's newest version submitted */
static uint64_t hist[NV][NB][HIST];	       /* owner's recent versions (et_hist_add) */
static atomic_int g_running;		       /* request threads still running */
static atomic_uint_fast64_t g_reads, g_writes, g_read_blocks, g_write_blocks, g_torn;

static unsigned owner(uint64_t lba)
{
	return (unsigned)((lba / STRIPE) % NT);
}

struct slot {
	struct pmc_req req;
	struct worker *w;
	int busy;
	unsigned v;
	uint64_t lba, n, ver;
	uint64_t lo[ET_MAX_REQ_BLOCKS]; /* read: acknowledged at submit */
	char *buf;
};

struct worker {
	unsigned id;
	pthread_t th;
	uint64_t rng;
	struct pmc_queue *q;
	struct slot slot[INFLIGHT];
	unsigned inflight;
	uint8_t busy[NV][NB]; /* own blocks with a write in flight */
	uint64_t done;
};

static void req_cb(struct pmc_req *req, int res)
{
	struct slot *s = req->priv;
	struct worker *w = s->w;
	struct et_vol *vol = &g_vols[s->v];

	if (!s->busy)
		T_FAIL("seed %" PRIu64 ": thread %u: a completion for a request not in flight",
		       g_seed, w->id);
	if (res)
		T_FAIL("seed %" PRIu64 ": thread %u: %s of vol %s blocks %" PRIu64 "+%" PRIu64
		       " failed: %d",
		       g_seed, w->id, req->op == PMC_REQ_READ ? "read" : "write", vol->name, s->lba,
		       s->n, res);
	if (req->op == PMC_REQ_WRITE) {
		for (uint64_t i = 0; i < s->n; i++) {
			atomic_store(&acked[s->v][s->lba + i], s->ver);
			w->busy[s->v][s->lba + i] = 0;
		}
		atomic_fetch_add(&g_writes, 1);
		atomic_fetch_add(&g_write_blocks, s->n);
	} else {
		for (uint64_t i = 0; i < s->n; i++) {
			uint64_t lba = s->lba + i, lo = s->lo[i];
			uint64_t hi = atomic_load(&issued[s->v][lba]);
			const char *b = s->buf + i * BS;
			uint64_t got = et_version(b, vol->tag, lba);
			char g[64], d[256];

			if (got != EV_BAD && got != EV_ZERO && got >= lo && got <= hi)
				continue;
			if (got == EV_BAD && lo != hi &&
			    et_mixed_of(hist[s->v][lba], HIST, vol->tag, lba, lo, hi, b, 0)) {
				atomic_fetch_add(&g_torn, 1);
				continue;
			}
			et_describe(b, vol->tag, lba, lo, d, sizeof(d));
			T_FAIL("seed %" PRIu64 ": thread %u: read of vol %s blocks %" PRIu64
			       "+%" PRIu64 ": block %" PRIu64 " (owner %u) is %s, expected a version "
			       "from %" PRIu64 " (acknowledged at submit) to %" PRIu64
			       " (submitted by now); block: %s",
			       g_seed, w->id, vol->name, s->lba, s->n, lba, owner(lba),
			       et_vstr(got, g, sizeof(g)), lo, hi, d);
		}
		atomic_fetch_add(&g_reads, 1);
		atomic_fetch_add(&g_read_blocks, s->n);
	}
	s->busy = 0;
	w->inflight--;
	w->done++;
}

static int issue(struct worker *w)
{
	struct slot *s = NULL;
	struct pmc_err err;
	unsigned v = (unsigned)(et_rand(&w->rng) % NV);
	int write = et_rand(&w->rng) % 2;
	uint64_t lba, n;

	for (unsigned i = 0; i < INFLIGHT && !s; i++)
		if (!w->slot[i].busy)
			s = &w->slot[i];
	if (!s)
		return 0;
	if (write) {
		/* within one of this thread's stripes */
		uint64_t stripe = (et_rand(&w->rng) % (NB / STRIPE / NT)) * NT + w->id;

		n = 1 + et_rand(&w->rng) % STRIPE;
		lba = stripe * STRIPE + et_rand(&w->rng) % (STRIPE - n + 1);
		for (uint64_t i = lba; i < lba + n; i++)
			if (w->busy[v][i])
				return 0;
		s->ver = atomic_fetch_add(&g_ver, 1) + 1;
		for (uint64_t i = 0; i < n; i++) {
			et_fill(s->buf + i * BS, g_vols[v].tag, lba + i, s->ver);
			w->busy[v][lba + i] = 1;
			et_hist_add(hist[v][lba + i], HIST, s->ver);
			atomic_store(&issued[v][lba + i], s->ver);
		}
	} else {
		n = 1 + et_rand(&w->rng) % ET_MAX_REQ_BLOCKS;
		lba = et_rand(&w->rng) % (NB - n + 1);
		for (uint64_t i = 0; i < n; i++)
			s->lo[i] = atomic_load(&acked[v][lba + i]);
		memset(s->buf, 0xee, n * BS);
	}
	memset(&s->req, 0, sizeof(s->req));
	s->req.op = write ? PMC_REQ_WRITE : PMC_REQ_READ;
	s->req.vol = g_vols[v].vol;
	s->req.off = lba * BS;
	s->req.len = n * BS;
	s->req.buf = s->buf;
	s->req.cb = req_cb;
	s->req.priv = s;
	s->w = w;
	s->v = v;
	s->lba = lba;
	s->n = n;
	s->busy = 1;
	w->inflight++;
	memset(&err, 0, sizeof(err));
	int rc = pmc_queue_submit(w->q, &s->req, &err);
	if (rc)
		T_FAIL("thread %u: submit refused: %d (%s)", w->id, rc, err.msg);
	return 1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t started = 0, t0 = pmc_mono_ns(), last = 0;

	w->q = et_queue(g_t.e, 16);
	for (unsigned i = 0; i < INFLIGHT; i++)
		w->slot[i].buf = et_alloc(ET_MAX_REQ_BLOCKS * BS);
	while (started < g_ops || w->inflight) {
		int n;

		while (started < g_ops && w->inflight < INFLIGHT && issue(w))
			started++;
		n = pmc_queue_poll(w->q, w->inflight > 0, 2000000ull);
		if (n < 0)
			T_FAIL("thread %u: poll: %d", w->id, n);
		if (w->done != last) {
			last = w->done;
			t0 = pmc_mono_ns();
		} else if (pmc_mono_ns() - t0 > 20000000000ull) {
			T_FAIL("seed %" PRIu64 ": thread %u: no request completed for 20 s (%u in "
			       "flight)",
			       g_seed, w->id, w->inflight);
		}
	}
	pmc_queue_destroy(w->q);
	for (unsigned i = 0; i < INFLIGHT; i++)
		free(w->slot[i].buf);
	atomic_fetch_sub(&g_running, 1);
	return NULL;
}

static void *writeback_main(void *arg)
{
	uint64_t rng = g_seed ^ 0xbac4, last_change = pmc_mono_ns(), changes = 0;
	struct pmc_queue *q = et_queue(g_t.e, 16);
	struct pmc_err err;

	(void)arg;
	while (atomic_load(&g_running) > 0) {
		pmc_engine_writeback_step(g_t.e, q);
		if (pmc_queue_poll(q, 1, 1000000ull) < 0)
			T_FAIL("write-back thread: poll failed");
		if (pmc_mono_ns() - last_change > 100000000ull) {
			struct pmc_wb_conf wb;

			T_OK(pmc_engine_set_mode(g_t.e, g_vols[1].vol,
						 (enum pmc_mode)(et_rand(&rng) % 4), &err));
			wb = g_t.wb;
			wb.high_pct = (uint32_t)(et_rand(&rng) % 60);
			wb.low_pct = wb.high_pct / 2;
			wb.busy_inflight = 1 + (uint32_t)(et_rand(&rng) % wb.max_inflight);
			pmc_engine_set_wb_conf(g_t.e, &wb);
			last_change = pmc_mono_ns();
			changes++;
		}
	}
	pmc_queue_destroy(q);
	printf("write-back thread: %" PRIu64 " changes of mode and settings\n", changes);
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[NT];
	pthread_t wb;
	struct pmc_err err;
	struct pmc_queue *q;
	struct pmc_vol_stats all;
	char *buf;
	uint64_t samples = 0;

	g_seed = et_seed_arg(argc, argv, NULL);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			g_ops = strtoull(argv[i + 1], NULL, 0);
	printf("seed: %" PRIu64 "\n", g_seed);

	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	unlink(g_t.pmem_path);
	g_t.pmem_size = et_pmem_size(256);
	pmc_wb_conf_default(&g_t.wb);
	g_t.wb.high_pct = 30;
	g_t.wb.low_pct = 10;
	g_t.wb.max_age_ms = 50;
	g_t.wb.max_io_bytes = 64 << 10;
	g_t.wb.max_inflight = 8;
	g_t.wb.idle_ms = 5;
	g_t.wb.retry_ms = 10;
	et_open(&g_t, 1);
	for (unsigned v = 0; v < NV; v++) {
		struct et_vol *vol = &g_vols[v];

		snprintf(vol->name, sizeof(vol->name), "t%u", v);
		et_path(vol->path, sizeof(vol->path), vol->name);
		vol->tag = v + 1;
		vol->nblocks = NB;
		et_disk_create(vol->path, vol->tag, NB);
		et_attach(&g_t, vol, NULL, NULL, NULL);
	}

	atomic_store(&g_running, NT);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < NT; i++) {
		w[i].id = i;
		w[i].rng = g_seed * 31 + i;
		T_EQ(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
	}
	T_EQ(pthread_create(&wb, NULL, writeback_main, NULL), 0);
	/* stats and modes are read from any thread */
	while (atomic_load(&g_running) > 0) {
		enum pmc_mode mode;
		int draining;

		et_stats(g_t.e, UINT32_MAX, &all);
		T_EQ(pmc_engine_get_mode(g_t.e, g_vols[1].vol, &mode, &draining), 0);
		(void)pmc_engine_volume_error(g_t.e, g_vols[0].vol);
		samples++;
		usleep(5000);
	}
	for (unsigned i = 0; i < NT; i++)
		pthread_join(w[i].th, NULL);
	pthread_join(wb, NULL);
	printf("requests: %" PRIu64 " reads (%" PRIu64 " blocks), %" PRIu64 " writes (%" PRIu64
	       " blocks); %" PRIu64 " stats samples; torn reads (a read overlapping a write): %" PRIu64
	       "\n",
	       (uint64_t)atomic_load(&g_reads), (uint64_t)atomic_load(&g_read_blocks),
	       (uint64_t)atomic_load(&g_writes), (uint64_t)atomic_load(&g_write_blocks), samples,
	       (uint64_t)atomic_load(&g_torn));

	/* the stats counted every request (queues gone: what they counted stays) */
	et_stats(g_t.e, UINT32_MAX, &all);
	if (all.reads != atomic_load(&g_reads) || all.writes != atomic_load(&g_writes) ||
	    all.read_bytes != atomic_load(&g_read_blocks) * BS ||
	    all.write_bytes != atomic_load(&g_write_blocks) * BS)
		ET_SOFT_FAIL("stats after the threads' queues are gone: reads %" PRIu64
			     " writes %" PRIu64 " read_bytes %" PRIu64 " write_bytes %" PRIu64
			     ", expected %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64,
			     all.reads, all.writes, all.read_bytes, all.write_bytes,
			     (uint64_t)atomic_load(&g_reads), (uint64_t)atomic_load(&g_writes),
			     (uint64_t)atomic_load(&g_read_blocks) * BS,
			     (uint64_t)atomic_load(&g_write_blocks) * BS);

	/* everything to the disks; then each block is its owner's last version */
	q = et_queue(g_t.e, 16);
	T_OK(pmc_engine_set_mode(g_t.e, g_vols[1].vol, PMC_MODE_WRITE_BACK, &err));
	et_flush_all(&g_t, q, NULL);
	buf = et_alloc(ET_MAX_REQ_BLOCKS * BS);
	for (unsigned v = 0; v < NV; v++) {
		struct et_vol *vol = &g_vols[v];

		for (uint64_t lba = 0; lba < NB; lba++) {
			uint64_t want = atomic_load(&acked[v][lba]), got;
			char g[64], d[256];

			et_disk_read(vol->path, lba, buf);
			got = et_version(buf, vol->tag, lba);
			if (got != want)
				T_FAIL("seed %" PRIu64 ": after flush_all, vol %s block %" PRIu64
				       " (owner %u) on the disk is %s, acknowledged version %" PRIu64
				       "; block: %s",
				       g_seed, vol->name, lba, owner(lba), et_vstr(got, g, sizeof(g)),
				       want, et_describe(buf, vol->tag, lba, want, d, sizeof(d)));
		}
		for (uint64_t lba = 0; lba < NB; lba += ET_MAX_REQ_BLOCKS) {
			T_EQ(et_io(g_t.e, q, q, PMC_REQ_READ, vol->vol, lba, ET_MAX_REQ_BLOCKS, buf, 0),
			     0);
			for (uint64_t i = 0; i < ET_MAX_REQ_BLOCKS; i++) {
				uint64_t want = atomic_load(&acked[v][lba + i]);
				uint64_t got = et_version(buf + i * BS, vol->tag, lba + i);
				char g[64];

				if (got != want)
					T_FAIL("seed %" PRIu64 ": after flush_all, vol %s block %" PRIu64
					       " reads as %s, acknowledged version %" PRIu64,
					       g_seed, vol->name, lba + i, et_vstr(got, g, sizeof(g)),
					       want);
			}
		}
	}
	et_stats(g_t.e, UINT32_MAX, &all);
	T_EQ(all.dirty_blocks, 0);
	printf("evictions %" PRIu64 ", write-back %" PRIu64 " writes (%" PRIu64 " blocks)\n",
	       all.evictions, all.wb_ios, all.wb_blocks);
	free(buf);
	pmc_queue_destroy(q);
	et_check_cache(&g_t);
	et_close(&g_t, 0);
	return et_exit("engine_threads", g_seed);
}
