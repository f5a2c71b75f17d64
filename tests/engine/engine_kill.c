/* engine_kill.c - the engine's process killed (SIGKILL) with I/O in flight.
 *
 * Round after round, a child process opens the cache (a pmem file, as the
 * daemon maps it) and runs writes of 1..8 blocks, reads and write-back
 * steps on two volumes (write-back and write-through; in odd rounds the
 * first switches to write-around and back every 30 ms), several requests
 * in flight. Before submitting a write it records the version in flight, and
 * in the completion the acknowledged one, in memory shared with the parent.
 * The parent kills it at a random moment, waits for the dead process's
 * I/O to settle, and recovers: pmc_cache_open, pmc_cache_check, an engine
 * on the same disks. Every block must read as its acknowledged version or
 * the one in flight (or, while that one was being written to the disk, a
 * word-by-word mix of the two: a disk write cut short); after flush_all
 * the disk files hold exactly what the engine reads. The next round goes on
 * from there.
 *
 * Unlike pmc_cache_abandon in engine_model, the crash here hits requests,
 * fills and write-back I/O in the middle; unlike engine_crash, every store
 * the process made stays (a process crash, not a power cut).
 * Usage: engine_kill [--seed S] [--rounds N]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etest.h"
#include "t.h"

#define NV 2
#define NB 384
#define MAXN 8
#define INFLIGHT 8

struct shared {
	atomic_uint_fast64_t want[NV][NB]; /* acknowledged version */
	atomic_uint_fast64_t pend[NV][NB]; /* version of the write in flight, 0 none */
	atomic_uint_fast64_t next_ver;
	atomic_uint_fast64_t acked;	   /* writes acknowledged this round */
	atomic_int ready;		   /* the child is running requests */
	char fail[512];			   /* the child's failure, if any */
};

static struct shared *g_sh;
static uint64_t g_seed;
static struct et g_t;
static struct et_vol g_v[NV];

struct kreq {
	struct pmc_req req;
	int busy;
	unsigned v;
	uint64_t lba, n, ver;
	char *buf;
};

static uint8_t g_busy[NV][NB];
static struct kreq g_req[INFLIGHT];
static unsigned g_inflight;

static void child_fail(const char *msg) __attribute__((noreturn));
static void child_fail(const char *msg)
{
	snprintf(g_sh->fail, sizeof(g_sh->fail), "%s", msg);
	_exit(1);
}

static void child_cb(struct pmc_req *req, int res)
{
	struct kreq *r = req->priv;
	char msg[256];

	if (res) {
		snprintf(msg, sizeof(msg), "%s of vol %u blocks %" PRIu64 "+%" PRIu64 " failed: %d",
			 req->op == PMC_REQ_READ ? "read" : "write", r->v, r->lba, r->n, res);
		child_fail(msg);
	}
	for (uint64_t i = 0; i < r->n; i++) {
		uint64_t lba = r->lba + i;

		if (req->op == PMC_REQ_WRITE) {
			atomic_store(&g_sh->want[r->v][lba], r->ver);
			atomic_store(&g_sh->pend[r->v][lba], 0);
		} else {
			uint64_t got = et_version(r->buf + i * BS, g_v[r->v].tag, lba);
			uint64_t want = atomic_load(&g_sh->want[r->v][lba]);

			if (got != want) {
				snprintf(msg, sizeof(msg),
					 "live read of vol %u block %" PRIu64 ": version %" PRIu64
					 ", expected %" PRIu64,
					 r->v, lba, got, want);
				child_fail(msg);
			}
		}
		g_busy[r->v][lba] = 0;
	}
	if (req->op == PMC_REQ_WRITE)
		atomic_fetch_add(&g_sh->acked, 1);
	r->busy = 0;
	g_inflight--;
}

static int child_issue(uint64_t *rng, struct pmc_queue *q)
{
	struct kreq *r = NULL;
	struct pmc_err err;
	unsigned v = (unsigned)(et_rand(rng) % NV);
	int write = et_rand(rng) % 100 < 70;
	uint64_t n = 1 + et_rand(rng) % MAXN, lba = et_rand(rng) % (NB - n + 1);

	for (unsigned i = 0; i < INFLIGHT && !r; i++)
		if (!g_req[i].busy)
			r = &g_req[i];
	if (!r)
		return 0;
	for (uint64_t i = lba; i < lba + n; i++)
		if (g_busy[v][i])
			return 0;
	r->v = v;
	r->lba = lba;
	r->n = n;
	r->ver = write ? atomic_fetch_add(&g_sh->next_ver, 1) + 1 : 0;
	for (uint64_t i = 0; i < n; i++) {
		g_busy[v][lba + i] = 1;
		if (write) {
			et_fill(r->buf + i * BS, g_v[v].tag, lba + i, r->ver);
			atomic_store(&g_sh->pend[v][lba + i], r->ver); /* before the submit */
		}
	}
	memset(&r->req, 0, sizeof(r->req));
	r->req.op = write ? PMC_REQ_WRITE : PMC_REQ_READ;
	r->req.vol = g_v[v].vol;
	r->req.off = lba * BS;
	r->req.len = n * BS;
	r->req.buf = r->buf;
	r->req.cb = child_cb;
	r->req.priv = r;
	r->busy = 1;
	g_inflight++;
	memset(&err, 0, sizeof(err));
	if (pmc_queue_submit(q, &r->req, &err))
		child_fail(err.msg);
	return 1;
}

/* runs until killed (or 10 s) */
static void child(unsigned round)
{
	struct pmc_volume_conf vc;
	struct pmc_queue *q;
	uint64_t rng = g_seed * 1000003 + round, t0, last;

	et_open(&g_t, round == 0);
	pmc_volume_conf_default(&vc);
	for (unsigned v = 0; v < NV; v++) {
		vc.mode = v ? PMC_MODE_WRITE_THROUGH : PMC_MODE_WRITE_BACK;
		et_attach(&g_t, &g_v[v], &vc, NULL, NULL);
	}
	q = et_queue(g_t.e, 32);
	for (unsigned i = 0; i < INFLIGHT; i++)
		g_req[i].buf = et_alloc(MAXN * BS);
	atomic_store(&g_sh->ready, 1);
	t0 = pmc_mono_ns();
	last = t0;
	while (pmc_mono_ns() - t0 < 10000000000ull) {
		while (g_inflight < INFLIGHT && child_issue(&rng, q))
			;
		/* odd rounds: volume k0 switches between write-back and
		 * write-around every 30 ms (a drain with dirty data) */
		if (round % 2 && pmc_mono_ns() - last > 30000000ull) {
			struct pmc_err err;
			enum pmc_mode m;

			pmc_engine_get_mode(g_t.e, g_v[0].vol, &m, NULL);
			if (pmc_engine_set_mode(g_t.e, g_v[0].vol,
						m == PMC_MODE_WRITE_BACK ? PMC_MODE_WRITE_AROUND
									 : PMC_MODE_WRITE_BACK,
						&err))
				child_fail(err.msg);
			last = pmc_mono_ns();
		}
		pmc_engine_writeback_step(g_t.e, q);
		if (pmc_queue_poll(q, 1, 1000000ull) < 0)
			child_fail("poll failed");
	}
	child_fail("not killed within 10 s");
}

/* b is want, pend, or a word-by-word mix of the two */
static int allowed(const void *b, uint32_t tag, uint64_t lba, uint64_t want, uint64_t pend,
		   uint64_t *got)
{
	static char r1[BS], r2[BS];

	*got = et_version(b, tag, lba);
	if (*got == want || (pend && *got == pend))
		return 1;
	if (!pend || *got != EV_BAD)
		return 0;
	et_fill(r1, tag, lba, want);
	et_fill(r2, tag, lba, pend);
	for (size_t i = 0; i < BS / 8; i++)
		if (((const uint64_t *)b)[i] != ((uint64_t *)r1)[i] &&
		    ((const uint64_t *)b)[i] != ((uint64_t *)r2)[i])
			return 0;
	return 1;
}

static void verify(unsigned round, uint64_t kill_ms)
{
	struct pmc_queue *q;
	char *buf = et_alloc(64 * BS), *d = et_alloc(BS);
	uint64_t pending = 0, landed = 0;

	et_open(&g_t, 0);
	et_check_cache(&g_t);
	for (unsigned v = 0; v < NV; v++)
		et_attach(&g_t, &g_v[v], NULL, NULL, NULL);
	q = et_queue(g_t.e, 16);
	for (unsigned v = 0; v < NV; v++) {
		for (uint64_t lba = 0; lba < NB; lba += 64) {
			T_EQ(et_io(g_t.e, q, q, PMC_REQ_READ, g_v[v].vol, lba, 64, buf, 0), 0);
			for (uint64_t i = 0; i < 64; i++) {
				uint64_t want = atomic_load(&g_sh->want[v][lba + i]);
				uint64_t pend = atomic_load(&g_sh->pend[v][lba + i]), got;
				char g[64], dd[256];

				if (!allowed(buf + i * BS, g_v[v].tag, lba + i, want, pend, &got))
					T_FAIL("seed %" PRIu64 " round %u (killed after %" PRIu64
					       " ms): vol %s block %" PRIu64 " reads as %s, acknowledged "
					       "version %" PRIu64 ", in flight %" PRIu64 "; block: %s",
					       g_seed, round, kill_ms, g_v[v].name, lba + i,
					       et_vstr(got, g, sizeof(g)), want, pend,
					       et_describe(buf + i * BS, g_v[v].tag, lba + i, want, dd,
							   sizeof(dd)));
			}
		}
	}
	et_flush_all(&g_t, q, NULL);
	for (unsigned v = 0; v < NV; v++) {
		for (uint64_t lba = 0; lba < NB; lba++) {
			uint64_t pend = atomic_load(&g_sh->pend[v][lba]), got;

			et_disk_read(g_v[v].path, lba, d);
			T_EQ(et_io(g_t.e, q, q, PMC_REQ_READ, g_v[v].vol, lba, 1, buf, 0), 0);
			if (memcmp(buf, d, BS))
				T_FAIL("seed %" PRIu64 " round %u: vol %s block %" PRIu64
				       ": the disk differs from what the engine reads after flush_all",
				       g_seed, round, g_v[v].name, lba);
			/* the next round starts from what is there now */
			got = et_version(d, g_v[v].tag, lba);
			if (pend) {
				pending++;
				landed += got == pend;
			}
			if (got == EV_BAD) {
				/* a torn disk write of the version in flight: make it whole */
				char *w = et_alloc(BS);

				et_fill(w, g_v[v].tag, lba, atomic_load(&g_sh->want[v][lba]));
				T_EQ(et_io(g_t.e, q, q, PMC_REQ_WRITE, g_v[v].vol, lba, 1, w, 0), 0);
				free(w);
				got = atomic_load(&g_sh->want[v][lba]);
			}
			atomic_store(&g_sh->want[v][lba], got);
			atomic_store(&g_sh->pend[v][lba], 0);
		}
	}
	et_flush_all(&g_t, q, NULL);
	pmc_queue_destroy(q);
	et_check_cache(&g_t);
	et_close(&g_t, 0);
	printf("round %u: killed after %" PRIu64 " ms, %" PRIu64 " writes acknowledged, %" PRIu64
	       " blocks in flight (%" PRIu64 " of them landed): all there\n",
	       round, kill_ms, (uint64_t)atomic_load(&g_sh->acked), pending, landed);
	free(buf);
	free(d);
}

int main(int argc, char **argv)
{
	unsigned rounds = 6;
	uint64_t rng;

	g_seed = et_seed_arg(argc, argv, NULL);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned)strtoul(argv[i + 1], NULL, 0);
	printf("seed: %" PRIu64 "\n", g_seed);
	rng = g_seed;
	g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_TRUE(g_sh != MAP_FAILED);
	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	unlink(g_t.pmem_path);
	g_t.pmem_size = et_pmem_size(128);
	pmc_wb_conf_default(&g_t.wb);
	g_t.wb.high_pct = 30;
	g_t.wb.low_pct = 10;
	g_t.wb.max_age_ms = 20;
	g_t.wb.max_io_bytes = 64 << 10;
	g_t.wb.idle_ms = 1;
	for (unsigned v = 0; v < NV; v++) {
		snprintf(g_v[v].name, sizeof(g_v[v].name), "k%u", v);
		et_path(g_v[v].path, sizeof(g_v[v].path), g_v[v].name);
		g_v[v].tag = v + 1;
		g_v[v].nblocks = NB;
		et_disk_create(g_v[v].path, g_v[v].tag, NB);
	}
	for (unsigned round = 0; round < rounds; round++) {
		uint64_t kill_ms = 20 + et_rand(&rng) % 300, t0;
		int status;
		pid_t pid;

		atomic_store(&g_sh->ready, 0);
		atomic_store(&g_sh->acked, 0);
		fflush(stdout);
		pid = fork();
		T_TRUE(pid >= 0);
		if (pid == 0)
			child(round);
		t0 = pmc_mono_ns();
		while (!atomic_load(&g_sh->ready)) {
			if (waitpid(pid, &status, WNOHANG) == pid)
				T_FAIL("round %u: the child died before running: %s", round,
				       g_sh->fail[0] ? g_sh->fail : "(no message)");
			if (pmc_mono_ns() - t0 > 10000000000ull)
				T_FAIL("round %u: the child did not start", round);
			usleep(1000);
		}
		usleep((useconds_t)kill_ms * 1000);
		kill(pid, SIGKILL);
		T_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status))
			T_FAIL("round %u: the child exited (status %d) before the kill: %s", round,
			       status, g_sh->fail[0] ? g_sh->fail : "(no message)");
		usleep(100000); /* the dead process's io_uring I/O settles */
		verify(round, kill_ms);
	}
	munmap(g_sh, sizeof(*g_sh));
	return et_exit("engine_kill", g_seed);
}
