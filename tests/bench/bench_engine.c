/* bench_engine.c - `pmcache-bench engine`: the DRAM the engine costs per
 * cache block with it running, and its pmem-hit throughput against a plain
 * memcpy from the same mapping, at two cache sizes (default 1 GiB and
 * 8 GiB, file-backed in /dev/shm).
 *
 * For each size a fresh child process (fork) creates the pmem file and a
 * sparse backing-disk file of the volume's size, formats and opens the
 * cache, starts the engine (write-back held off: high watermark 100 %, no
 * age limit) with one queue, attaches one volume as large as the cache,
 * and then:
 *   fill   writes every cache block once with 256 KiB write-back requests
 *          (acknowledged from pmem), timed;
 *   read   reads them all back (every block a pmem hit), timed;
 *   copy   the baseline: memcpy of the same bytes from the data area of the
 *          mapping into the same buffer, timed;
 * then reads RssAnon. dram_bytes_per_block_engine = (RssAnon large -
 * RssAnon small) / (blocks large - blocks small), as measured.
 * Single-threaded; the files are removed by the child and, on a signal or
 * a failed child, by the parent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cache.h"
#include "engine.h"

#define REQ_BYTES (256u << 10)
#define DEPTH 16u

struct eng_result {
	int rc;
	char msg[PMC_ERR_MSG_MAX + 64];
	uint64_t nr_blocks;
	long anon_kib;
	double fill_s, read_s, copy_s;
	int fixed;
};

static char g_pmem[PATH_MAX], g_disk[PATH_MAX];

static void cleanup(int sig)
{
	unlink(g_pmem);
	unlink(g_disk);
	if (sig)
		_exit(128 + sig);
}

static int efail(struct eng_result *r, int code, const char *what, const struct pmc_err *err)
{
	r->rc = -code;
	snprintf(r->msg, sizeof(r->msg), "%.100s: %.200s", what,
		 err && err->msg[0] ? err->msg : strerror(code));
	return r->rc;
}

static unsigned g_done;
static int g_res;

static void done_cb(struct pmc_req *req, int res)
{
	g_done++;
	if (res && !g_res)
		g_res = res;
}

/* n requests of op over the whole volume, DEPTH at a time */
static int run_all(struct pmc_queue *q, uint32_t vol, enum pmc_req_op op, char *bufs,
		   uint64_t bytes)
{
	struct pmc_req reqs[DEPTH];
	struct pmc_err err = {0};
	uint64_t off = 0, nreq = bytes / REQ_BYTES;
	unsigned issued = 0;

	g_done = 0;
	g_res = 0;
	while (g_done < nreq && !g_res) {
		while (issued < nreq && issued - g_done < DEPTH) {
			struct pmc_req *r = &reqs[issued % DEPTH];

			memset(r, 0, sizeof(*r));
			r->op = op;
			r->vol = vol;
			r->off = off;
			r->len = REQ_BYTES;
			r->buf = bufs + (size_t)(issued % DEPTH) * REQ_BYTES;
			r->cb = done_cb;
			if (pmc_queue_submit(q, r, &err))
				return -EIO;
			off += REQ_BYTES;
			issued++;
		}
		pmc_queue_poll(q, 1, 0);
	}
	while (pmc_queue_busy(q))
		pmc_queue_poll(q, 1, 0);
	return g_res;
}

static int child(uint64_t size, struct eng_result *r)
{
	struct pmc_err err = {0};
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info ci;
	struct pmc_engine *e;
	struct pmc_queue *q;
	struct pmc_disk *d;
	uint32_t vol;
	uint64_t bytes, t0;
	char *bufs = aligned_alloc(4096, (size_t)DEPTH * REQ_BYTES);
	int fd, rc;

	if (!bufs)
		return efail(r, ENOMEM, "buffers", NULL);
	memset(bufs, 0x5a, (size_t)DEPTH * REQ_BYTES);
	rc = pmc_pmem_open(g_pmem, size, &pm, &err);
	if (!rc)
		rc = pmc_cache_format(pm, NULL, &err);
	if (!rc)
		rc = pmc_cache_open(pm, 0, &c, &err);
	if (rc)
		return efail(r, -rc, "cache", &err);
	pmc_cache_get_info(c, &ci);
	r->nr_blocks = ci.nr_blocks;
	bytes = ci.nr_blocks * ci.block_size / REQ_BYTES * REQ_BYTES;
	fd = open(g_disk, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)(ci.nr_blocks * ci.block_size)))
		return efail(r, errno, g_disk, NULL);
	close(fd);
	pmc_wb_conf_default(&wb);
	wb.high_pct = 100;
	wb.low_pct = 100;
	wb.max_age_ms = UINT64_MAX / 2000000;
	pmc_volume_conf_default(&vc);
	rc = pmc_engine_create(c, &wb, &e, &err);
	if (!rc)
		rc = pmc_disk_open(g_disk, 0, &d, &err);
	if (!rc)
		rc = pmc_engine_attach(e, "bench", d, &vc, &vol, &err);
	if (!rc)
		rc = pmc_queue_create(e, DEPTH, &q, &err);
	if (rc)
		return efail(r, -rc, "engine", &err);
	r->fixed = pmc_queue_fixed_buffers(q);

	t0 = bench_now_ns();
	rc = run_all(q, vol, PMC_REQ_WRITE, bufs, bytes);
	r->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "fill", NULL);
	t0 = bench_now_ns();
	rc = run_all(q, vol, PMC_REQ_READ, bufs, bytes);
	r->read_s = (double)(bench_now_ns() - t0) / 1e9;
	if (rc)
		return efail(r, -rc, "read", NULL);
	t0 = bench_now_ns();
	for (uint64_t off = 0; off < bytes; off += REQ_BYTES)
		memcpy(bufs + (size_t)(off / REQ_BYTES % DEPTH) * REQ_BYTES,
		       pm->base + ci.data_off + off, REQ_BYTES);
	r->copy_s = (double)(bench_now_ns() - t0) / 1e9;
	r->anon_kib = bench_status_kib("RssAnon");
	pmc_queue_destroy(q);
	pmc_engine_destroy(e);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	cleanup(0);
	return 0;
}

static int run_size(const char *dir, uint64_t size, struct eng_result *out)
{
	int p[2];
	pid_t pid;
	int st;

	snprintf(g_pmem, sizeof(g_pmem), "%s/pmcache-bench-%d-engine.pmem", dir, getpid());
	snprintf(g_disk, sizeof(g_disk), "%s/pmcache-bench-%d-engine.disk", dir, getpid());
	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid == 0) {
		struct eng_result r;

		memset(&r, 0, sizeof(r));
		close(p[0]);
		child(size, &r);
		if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	memset(out, 0, sizeof(*out));
	if (read(p[0], out, sizeof(*out)) != (ssize_t)sizeof(*out))
		out->rc = -EIO, snprintf(out->msg, sizeof(out->msg), "the child died");
	close(p[0]);
	waitpid(pid, &st, 0);
	cleanup(0);
	return out->rc;
}

int bench_engine(int argc, char **argv)
{
	const char *dir = "/dev/shm";
	uint64_t size[2] = {1ull << 30, 8ull << 30};
	struct eng_result r[2];
	char tag[2][32];
	int opt;

	while ((opt = getopt(argc, argv, "d:s:h")) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 's': {
			char *comma = strchr(optarg, ',');

			if (!comma || bench_parse_size(optarg, &size[0]) ||
			    bench_parse_size(comma + 1, &size[1])) {
				fprintf(stderr, "pmcache-bench engine: --sizes SMALL,LARGE\n");
				return 2;
			}
			break;
		}
		default:
			fprintf(stderr, "usage: pmcache-bench engine [-d DIR] [-s SMALL,LARGE]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	signal(SIGINT, cleanup);
	signal(SIGTERM, cleanup);
	bench_header_start("engine");
	printf("%u KiB write-back requests, %u in flight, one queue\n", REQ_BYTES >> 10, DEPTH);
	for (int i = 0; i < 2; i++) {
		bench_size_tag(size[i], tag[i], sizeof(tag[i]));
		fprintf(stderr, "pmcache-bench engine: %s ...\n", tag[i]);
		if (run_size(dir, size[i], &r[i])) {
			fprintf(stderr, "pmcache-bench engine: %s: %s\n", tag[i], r[i].msg);
			return 1;
		}
	}
	for (int i = 0; i < 2; i++) {
		char name[128];
		double mib = (double)(r[i].nr_blocks * 4096) / (1 << 20);

		snprintf(name, sizeof(name), "blocks_%s", tag[i]);
		bench_figure(name, "blocks", "%llu", (unsigned long long)r[i].nr_blocks);
		snprintf(name, sizeof(name), "rss_anon_kib_engine_%s", tag[i]);
		bench_figure(name, "KiB", "%ld", r[i].anon_kib);
		snprintf(name, sizeof(name), "write_pmem_mib_s_%s", tag[i]);
		bench_figure(name, "MiB/s", "%.0f", mib / r[i].fill_s);
		snprintf(name, sizeof(name), "read_hit_mib_s_%s", tag[i]);
		bench_figure(name, "MiB/s", "%.0f", mib / r[i].read_s);
		snprintf(name, sizeof(name), "memcpy_baseline_mib_s_%s", tag[i]);
		bench_figure(name, "MiB/s", "%.0f", mib / r[i].copy_s);
		snprintf(name, sizeof(name), "read_hit_vs_memcpy_%s", tag[i]);
		bench_figure(name, "x", "%.2f", r[i].copy_s / r[i].read_s);
	}
	bench_figure("fixed_buffers", "", "%d", r[1].fixed);
	bench_figure("dram_bytes_per_block_engine", "B/block", "%.1f",
		     (double)(r[1].anon_kib - r[0].anon_kib) * 1024.0 /
			     (double)(r[1].nr_blocks - r[0].nr_blocks));
	return 0;
}
