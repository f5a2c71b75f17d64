/* pmc-torture.c - the workload and checker of the torture campaign
 * (tests/vm/torture.sh, guest half tests/vm/guest/t-torture.sh).
 *
 * Writes self-verifying 4 KiB blocks at random to several volumes at queue
 * depth > 1 (one O_DIRECT thread per outstanding write), and logs every
 * acknowledged write to a log device that does not go through pmcache,
 * with O_DIRECT|O_DSYNC, before it counts as acknowledged. The log holds
 * one 512-byte entry per (volume, block): the newest acknowledged
 * generation. A power cut between a write's acknowledgement and its log
 * entry leaves an older generation in the log, which only weakens the
 * check for that block, never makes it fail wrongly.
 *
 * Block (4096 bytes, little-endian): magic "PMCTBLK1", volume, block
 * number, generation, then a pattern drawn from (volume, block,
 * generation), and a CRC-32C over bytes 0..4091 in the last 4 bytes.
 * Generations are (epoch << 32) | counter; the epoch is raised in the log
 * header (synchronously) each time "write" starts, so a generation never
 * repeats, even after a power cut lost the counters.
 *
 * Log device: sector 0 header (magic "PMCTLOG1", epoch, volumes, blocks,
 * CRC-32C), then entry (v * blocks + b) in sector 1 + v * blocks + b.
 *
 * usage:
 *   pmc-torture init   LOGDEV VOLS BLOCKS
 *   pmc-torture write  LOGDEV SECONDS SEED THREADS CTLFILE
 *   pmc-torture verify LOGDEV DEV0 [DEV1...]   (one device per volume)
 * write takes its volumes from CTLFILE, polled every 50 ms:
 *   seq N          bumped by the writer of the file; CTLFILE.ack says
 *                  "N ACKED FAILED" (writes so far) once every line below
 *                  is in effect, and is rewritten every 50 ms
 *   dev V PATH     volume V is PATH; "-" pauses it: no I/O, fd closed
 *   weight V W     relative share of writes to volume V (default 1)
 * write stops at SECONDS (0: never) or at SIGTERM/SIGINT and prints
 * "write: acked=N failed=V:N,... epoch=E"; I/O errors of a volume are
 * counted (a failing disk), not fatal; an error of the log device is fatal.
 * verify prints "verify: VOL blocks=N acked=A verified=A ok lost=L torn=T
 * newer=W", one FAIL line for each of the first bad blocks, and exits 1 on
 * any lost or torn block.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096u
#define SECT 512u
#define MAX_VOLS 8
#define MAX_THREADS 64
#define BLK_MAGIC 0x314b4c4254434d50ull /* "PMCTBLK1" */
#define LOG_MAGIC 0x31474f4c54434d50ull /* "PMCTLOG1" */
#define ENT_MAGIC 0x31544e4554434d50ull /* "PMCTENT1" */
#define SHOW_MAX 10

struct blk_head {
	uint64_t magic;
	uint32_t vol;
	uint32_t pad;
	uint64_t block;
	uint64_t gen;
};

struct log_head {
	uint64_t magic;
	uint64_t epoch;
	uint32_t vols;
	uint32_t blocks;
	uint32_t pad;
	uint32_t crc;
};

struct log_ent {
	uint64_t magic;
	uint32_t vol;
	uint32_t pad;
	uint64_t block;
	uint64_t gen;
	uint32_t pad2;
	uint32_t crc;
};

static uint32_t crc_tab[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[i] = c;
	}
}

static uint32_t crc32c(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = ~0u;

	while (n--)
		c = crc_tab[(c ^ *b++) & 0xff] ^ (c >> 8);
	return ~c;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("pmc-torture: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static void *xalloc(size_t n)
{
	void *p;

	if (posix_memalign(&p, BLK, n))
		die("out of memory (%zu bytes)", n);
	memset(p, 0, n);
	return p;
}

static void fill_block(uint8_t *b, uint32_t vol, uint64_t block, uint64_t gen)
{
	struct blk_head h = {.magic = BLK_MAGIC, .vol = vol, .block = block, .gen = gen};
	uint64_t s = mix64(gen ^ mix64(block * 31 + vol));
	uint32_t crc;

	memcpy(b, &h, sizeof(h));
	for (size_t o = sizeof(h); o + 8 <= BLK - 4; o += 8) {
		s = mix64(s + 0x9e3779b97f4a7c15ull);
		memcpy(b + o, &s, 8);
	}
	memset(b + BLK - 12, 0xa5, 8);
	crc = crc32c(b, BLK - 4);
	memcpy(b + BLK - 4, &crc, 4);
}

static int full_io(int write, int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write ? pwrite(fd, (char *)buf + done, len - done, (off_t)(off + done))
				  : pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

/* --- the log device --- */

struct logdev {
	int fd;
	struct log_head h;
};

static void log_open(struct logdev *l, const char *path, int sync)
{
	struct log_head *h = xalloc(SECT);
	int rc;

	l->fd = open(path, O_RDWR | O_DIRECT | (sync ? O_DSYNC : 0));
	if (l->fd < 0)
		die("log device %s: %s", path, strerror(errno));
	if ((rc = full_io(0, l->fd, h, SECT, 0)))
		die("log device %s: reading the header: %s", path, strerror(-rc));
	if (h->magic != LOG_MAGIC || h->crc != crc32c(h, offsetof(struct log_head, crc)))
		die("log device %s: no valid header (run pmc-torture init)", path);
	l->h = *h;
	free(h);
}

static void log_put_head(struct logdev *l, const char *path)
{
	struct log_head *h = xalloc(SECT);
	int rc;

	*h = l->h;
	h->crc = crc32c(h, offsetof(struct log_head, crc));
	if ((rc = full_io(1, l->fd, h, SECT, 0)))
		die("log device %s: writing the header: %s", path, strerror(-rc));
	free(h);
}

static int cmd_init(int argc, char **argv)
{
	struct logdev l = {0};
	size_t chunk = 1u << 20;
	uint64_t total;
	void *z;
	int rc;

	if (argc != 5)
		die("usage: pmc-torture init LOGDEV VOLS BLOCKS");
	l.h.magic = LOG_MAGIC;
	l.h.vols = (uint32_t)atoi(argv[3]);
	l.h.blocks = (uint32_t)atoi(argv[4]);
	if (l.h.vols < 1 || l.h.vols > MAX_VOLS || l.h.blocks < 1)
		die("init: bad volume or block count");
	l.fd = open(argv[2], O_RDWR | O_DIRECT | O_DSYNC);
	if (l.fd < 0)
		die("log device %s: %s", argv[2], strerror(errno));
	total = SECT * (1 + (uint64_t)l.h.vols * l.h.blocks);
	z = xalloc(chunk);
	for (uint64_t o = 0; o < total; o += chunk)
		if ((rc = full_io(1, l.fd, z, total - o < chunk ? total - o : chunk, o)))
			die("log device %s: zeroing: %s", argv[2], strerror(-rc));
	log_put_head(&l, argv[2]);
	printf("init: log %s, %u volumes of %u blocks\n", argv[2], l.h.vols, l.h.blocks);
	free(z);
	close(l.fd);
	return 0;
}

/* --- write --- */

struct vol {
	atomic_int fd;		/* -1: paused */
	atomic_int inflight;
	atomic_int paused;
	atomic_uint weight;
	atomic_ulong failed;
	atomic_ulong acked;
	int last_errno;
	char path[256];
};

static struct {
	struct logdev log;
	const char *log_path;
	struct vol vols[MAX_VOLS];
	atomic_int stop;
	atomic_ulong counter;
	unsigned threads;
	uint64_t seed;
	const char *ctl;
} W;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&W.stop, 1);
}

static uint64_t rnd(uint64_t *s)
{
	*s = mix64(*s + 0x9e3779b97f4a7c15ull);
	return *s;
}

/* pick a volume by weight among the unpaused ones; -1 if none */
static int pick_vol(uint64_t *s)
{
	unsigned w[MAX_VOLS], sum = 0;

	for (unsigned v = 0; v < W.log.h.vols; v++) {
		w[v] = atomic_load(&W.vols[v].paused) ? 0 : atomic_load(&W.vols[v].weight);
		sum += w[v];
	}
	if (!sum)
		return -1;
	unsigned x = (unsigned)(rnd(s) % sum);
	for (unsigned v = 0; v < W.log.h.vols; v++) {
		if (x < w[v])
			return (int)v;
		x -= w[v];
	}
	return -1;
}

static void *writer(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t s = mix64(W.seed * 131 + t);
	uint8_t *b = xalloc(BLK);
	struct log_ent *e = xalloc(SECT);
	uint64_t per = (W.log.h.blocks + W.threads - 1 - t) / W.threads;

	if (!per)
		return NULL;
	while (!atomic_load(&W.stop)) {
		int v = pick_vol(&s);
		struct vol *vp;
		uint64_t blk, gen;
		int fd, rc;

		if (v < 0) {
			usleep(20000);
			continue;
		}
		vp = &W.vols[v];
		atomic_fetch_add(&vp->inflight, 1);
		fd = atomic_load(&vp->fd);
		if (atomic_load(&vp->paused) || fd < 0) {
			atomic_fetch_sub(&vp->inflight, 1);
			continue;
		}
		/* thread t owns the blocks b with b % threads == t: no block has
		 * two writes in flight, so the log entry order is the write order */
		blk = (rnd(&s) % per) * W.threads + t;
		gen = (W.log.h.epoch << 32) | (atomic_fetch_add(&W.counter, 1) + 1);
		fill_block(b, (uint32_t)v, blk, gen);
		rc = full_io(1, fd, b, BLK, blk * BLK);
		atomic_fetch_sub(&vp->inflight, 1);
		if (rc) {
			vp->last_errno = -rc;
			atomic_fetch_add(&vp->failed, 1);
			usleep(1000);
			continue;
		}
		*e = (struct log_ent){.magic = ENT_MAGIC, .vol = (uint32_t)v, .block = blk, .gen = gen};
		e->crc = crc32c(e, offsetof(struct log_ent, crc));
		rc = full_io(1, W.log.fd, e, SECT,
			     SECT * (1 + (uint64_t)v * W.log.h.blocks + blk));
		if (rc) {
			fprintf(stderr, "pmc-torture: log device %s: %s\n", W.log_path, strerror(-rc));
			fflush(stdout);
			_exit(2);
		}
		atomic_fetch_add(&vp->acked, 1);
	}
	free(b);
	free(e);
	return NULL;
}

/* apply CTLFILE: returns its seq, or -1 when it cannot be read */
static long ctl_apply(void)
{
	char line[512], path[256];
	long seq = -1;
	unsigned v, w;
	FILE *f = fopen(W.ctl, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "seq %ld", &seq) == 1)
			continue;
		if (sscanf(line, "weight %u %u", &v, &w) == 2 && v < W.log.h.vols) {
			atomic_store(&W.vols[v].weight, w);
			continue;
		}
		if (sscanf(line, "dev %u %255s", &v, path) == 2 && v < W.log.h.vols) {
			struct vol *vp = &W.vols[v];

			if (!strcmp(path, vp->path))
				continue;
			/* pause: no new I/O, wait for the I/O in flight, close */
			atomic_store(&vp->paused, 1);
			while (atomic_load(&vp->inflight))
				usleep(1000);
			if (atomic_load(&vp->fd) >= 0)
				close(atomic_exchange(&vp->fd, -1));
			snprintf(vp->path, sizeof(vp->path), "%s", path);
			if (strcmp(path, "-")) {
				int fd = open(path, O_RDWR | O_DIRECT);

				if (fd < 0) {
					fprintf(stderr, "pmc-torture: volume %u: %s: %s\n", v, path,
						strerror(errno));
					vp->path[0] = '\0'; /* retry at the next poll */
					seq = -1;
					continue;
				}
				atomic_store(&vp->fd, fd);
				atomic_store(&vp->paused, 0);
			}
		}
	}
	fclose(f);
	return seq;
}

static int cmd_write(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	struct sigaction sa = {.sa_handler = on_signal};
	struct timespec t0, t1;
	double secs, limit;
	long seq;
	char ackp[300], tmpp[310];

	if (argc != 7)
		die("usage: pmc-torture write LOGDEV SECONDS SEED THREADS CTLFILE");
	W.log_path = argv[2];
	limit = atof(argv[3]);
	W.seed = strtoull(argv[4], NULL, 0);
	W.threads = (unsigned)atoi(argv[5]);
	W.ctl = argv[6];
	if (W.threads < 2 || W.threads > MAX_THREADS)
		die("write: THREADS must be 2..%d (queue depth > 1)", MAX_THREADS);
	snprintf(ackp, sizeof(ackp), "%s.ack", W.ctl);
	snprintf(tmpp, sizeof(tmpp), "%s.tmp", ackp);
	log_open(&W.log, W.log_path, 1);
	W.log.h.epoch++;
	log_put_head(&W.log, W.log_path);
	for (unsigned v = 0; v < W.log.h.vols; v++) {
		atomic_store(&W.vols[v].fd, -1);
		atomic_store(&W.vols[v].paused, 1);
		atomic_store(&W.vols[v].weight, 1);
		strcpy(W.vols[v].path, "-");
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if ((seq = ctl_apply()) < 0)
		die("write: control file %s: unreadable or a device did not open", W.ctl);
	printf("write: epoch %" PRIu64 ", %u threads, seed %" PRIu64 "\n", W.log.h.epoch,
	       W.threads, W.seed);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned t = 0; t < W.threads; t++)
		if (pthread_create(&th[t], NULL, writer, (void *)(uintptr_t)t))
			die("write: pthread_create failed");
	for (;;) {
		if (seq >= 0) {
			unsigned long a = 0, f = 0;
			FILE *fp = fopen(tmpp, "w");

			for (unsigned v = 0; v < W.log.h.vols; v++) {
				a += atomic_load(&W.vols[v].acked);
				f += atomic_load(&W.vols[v].failed);
			}
			if (fp) {
				fprintf(fp, "%ld %lu %lu\n", seq, a, f);
				fclose(fp);
				rename(tmpp, ackp);
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (atomic_load(&W.stop) || (limit > 0 && secs >= limit))
			break;
		usleep(50000);
		long s = ctl_apply();
		if (s >= 0)
			seq = s;
	}
	atomic_store(&W.stop, 1);
	for (unsigned t = 0; t < W.threads; t++)
		pthread_join(th[t], NULL);
	printf("write: acked=");
	unsigned long total = 0;
	for (unsigned v = 0; v < W.log.h.vols; v++) {
		printf("%s%u:%lu", v ? "," : "", v, atomic_load(&W.vols[v].acked));
		total += atomic_load(&W.vols[v].acked);
	}
	printf(" total=%lu failed=", total);
	for (unsigned v = 0; v < W.log.h.vols; v++)
		printf("%s%u:%lu%s%s", v ? "," : "", v, atomic_load(&W.vols[v].failed),
		       W.vols[v].last_errno ? "/" : "",
		       W.vols[v].last_errno ? strerrorname_np(W.vols[v].last_errno) : "");
	printf(" epoch=%" PRIu64 " secs=%.1f\n", W.log.h.epoch, secs);
	return 0;
}

/* --- verify --- */

static int cmd_verify(int argc, char **argv)
{
	struct logdev l;
	size_t chunk = 1u << 20;
	uint8_t *buf = xalloc(chunk);
	struct log_ent *ents;
	uint64_t nent;
	int bad_all = 0, rc;

	if (argc < 4)
		die("usage: pmc-torture verify LOGDEV DEV0 [DEV1...]");
	log_open(&l, argv[2], 0);
	if ((unsigned)(argc - 3) != l.h.vols)
		die("verify: the log has %u volumes, %d devices given", l.h.vols, argc - 3);
	nent = (uint64_t)l.h.vols * l.h.blocks;
	ents = xalloc(nent * SECT);
	if ((rc = full_io(0, l.fd, ents, nent * SECT, SECT)))
		die("log device %s: reading the entries: %s", argv[2], strerror(-rc));
	for (unsigned v = 0; v < l.h.vols; v++) {
		const char *dev = argv[3 + v];
		uint64_t acked = 0, ok = 0, lost = 0, torn = 0, newer = 0, logbad = 0;
		int shown = 0, fd = open(dev, O_RDONLY | O_DIRECT);

		if (fd < 0)
			die("verify: %s: %s", dev, strerror(errno));
		for (uint64_t b0 = 0; b0 < l.h.blocks; b0 += chunk / BLK) {
			uint64_t n = l.h.blocks - b0 < chunk / BLK ? l.h.blocks - b0 : chunk / BLK;

			if ((rc = full_io(0, fd, buf, n * BLK, b0 * BLK)))
				die("verify: %s: reading blocks %" PRIu64 "..%" PRIu64 ": %s", dev, b0,
				    b0 + n - 1, strerror(-rc));
			for (uint64_t i = 0; i < n; i++) {
				uint64_t b = b0 + i, want = 0;
				const struct log_ent *e =
					(const void *)((const char *)ents + ((uint64_t)v * l.h.blocks + b) * SECT);
				const uint8_t *p = buf + i * BLK;
				struct blk_head h;
				uint32_t crc;
				int zero = 1;

				if (e->magic == ENT_MAGIC) {
					if (e->crc != crc32c(e, offsetof(struct log_ent, crc)) || e->vol != v ||
					    e->block != b)
						logbad++;
					else
						want = e->gen;
				} else if (e->magic) {
					logbad++;
				}
				for (size_t k = 0; k < BLK; k += 8)
					if (*(const uint64_t *)(p + k)) {
						zero = 0;
						break;
					}
				if (want)
					acked++;
				if (zero) {
					if (want) {
						lost++;
						if (shown++ < SHOW_MAX)
							printf("FAIL: volume %u block %" PRIu64 ": zero, acknowledged generation %" PRIu64 ".%" PRIu64 "\n",
							       v, b, want >> 32, want & 0xffffffff);
					}
					continue;
				}
				memcpy(&h, p, sizeof(h));
				memcpy(&crc, p + BLK - 4, 4);
				if (h.magic != BLK_MAGIC || crc != crc32c(p, BLK - 4) || h.vol != v ||
				    h.block != b || (h.gen >> 32) > l.h.epoch) {
					torn++;
					if (shown++ < SHOW_MAX)
						printf("FAIL: volume %u block %" PRIu64 ": torn or misplaced (magic %s, crc %s, says volume %u block %" PRIu64 " generation %" PRIu64 ".%" PRIu64 ")\n",
						       v, b, h.magic == BLK_MAGIC ? "ok" : "bad",
						       crc == crc32c(p, BLK - 4) ? "ok" : "bad", h.vol, h.block,
						       h.gen >> 32, h.gen & 0xffffffff);
					continue;
				}
				if (h.gen < want) {
					lost++;
					if (shown++ < SHOW_MAX)
						printf("FAIL: volume %u block %" PRIu64 ": generation %" PRIu64 ".%" PRIu64 " older than the acknowledged %" PRIu64 ".%" PRIu64 "\n",
						       v, b, h.gen >> 32, h.gen & 0xffffffff, want >> 32,
						       want & 0xffffffff);
					continue;
				}
				if (h.gen > want)
					newer++;
				if (want)
					ok++;
			}
		}
		close(fd);
		printf("verify: volume %u %s blocks=%u acked=%" PRIu64 " verified=%" PRIu64
		       " lost=%" PRIu64 " torn=%" PRIu64 " newer=%" PRIu64 " logbad=%" PRIu64 "\n",
		       v, dev, l.h.blocks, acked, ok, lost, torn, newer, logbad);
		if (lost || torn || logbad)
			bad_all = 1;
	}
	free(ents);
	free(buf);
	close(l.fd);
	return bad_all;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	crc_init();
	if (argc >= 2 && !strcmp(argv[1], "init"))
		return cmd_init(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "write"))
		return cmd_write(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "verify"))
		return cmd_verify(argc, argv);
	die("usage: pmc-torture init|write|verify ... (see the head of pmc-torture.c)");
}
