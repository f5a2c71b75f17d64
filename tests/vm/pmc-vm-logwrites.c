/* pmc-vm-logwrites.c - guest helper of vm-logwrites: a writer that
 * records when each write and flush was acknowledged, and a replayer of a
 * dm-log-writes log that checks, at every FLUSH/FUA entry and every mark,
 * what a power cut at that instant would have left on the disk.
 *
 *   pmc-vm-logwrites write DEV DMNAME JOURNAL BLOCKS OPS SEED
 *	4 threads write 4 KiB blocks of [0, BLOCKS) of DEV (O_DIRECT; thread
 *	t owns the blocks with lba % 4 == t), OPS writes in all; 10 % of them
 *	with RWF_DSYNC (FUA), and after 1 in 12 an fdatasync (FLUSH); FUA
 *	writes and FLUSHes one at a time (see g_flush_lock). After
 *	each completed FUA write and FLUSH it inserts a mark in the log of the
 *	dm-log-writes device DMNAME ("u<seq>", "f<n>"). The journal lists
 *	every write (lba, version, acknowledgement number, FUA) and every
 *	flush (number, acknowledgements counted when it was issued).
 *   pmc-vm-logwrites check LOGDEV JOURNAL BLOCKS strict|final
 *	Replays the log (format: the kernel's
 *	Documentation/admin-guide/device-mapper/log-writes.rst) into an image
 *	of the blocks, zeroes at first. At every entry each block written is
 *	one whole version written to that block, never older than the one
 *	before (disk writes of a block land in order). strict (write-around,
 *	pass-through, write-through): at mark f<n> every write acknowledged
 *	before flush n was issued is there (its version or a newer one), at
 *	u<seq> that FUA write is. Both: at mark "final" (after the daemon
 *	stopped) every block holds the last version written.
 *
 * Block contents: words 0..2 = magic, lba, version; the rest a pattern of
 * (lba, version), so a torn or misplaced block is recognised.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/dm-ioctl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#define BS 4096u
#define NTHREADS 4
#define MAGIC 0x6c6f677772697465ull /* "logwrite" */
#define VER_ZERO 0		    /* an all-zero block: never written */
#define VER_BAD UINT64_MAX

/* dm-log-writes, on-disk (little-endian, as the kernel writes it) */
#define LOG_FLUSH_FLAG (1u << 0)
#define LOG_FUA_FLAG (1u << 1)
#define LOG_DISCARD_FLAG (1u << 2)
#define LOG_MARK_FLAG (1u << 3)
#define WRITE_LOG_MAGIC 0x6a736677736872ull

struct log_super {
	uint64_t magic, version, nr_entries;
	uint32_t sectorsize;
};

struct log_entry {
	uint64_t sector, nr_sectors, flags, data_len;
};

struct jw { /* a write */
	uint64_t lba, ver, ack;
	int fua;
};

struct jf { /* a flush */
	uint64_t n, issued_ack;
};

static int g_fd, g_ctl = -1;
static const char *g_dm;
static uint64_t g_blocks, g_ops, g_seed;
static atomic_uint_fast64_t g_ver, g_ack, g_done_ops, g_nflush, g_nfua;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* one FLUSH or FUA write at a time (an RWF_DSYNC write reaches the disk
 * as a FUA write and a flush): dm-log-writes puts the writes completed
 * before a flush's arrival in front of that flush's entry when the flush
 * completes, so two flushes completing out of order would log writes after
 * a later flush that did make them durable */
static pthread_mutex_t g_flush_lock = PTHREAD_MUTEX_INITIALIZER;
static struct jw *g_w;
static struct jf *g_f;
static size_t g_nw, g_nf;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("pmc-vm-logwrites: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill(uint64_t *w, uint64_t lba, uint64_t ver)
{
	uint64_t s = (ver * 0x9e3779b97f4a7c15ull) ^ (lba << 20) ^ 1;

	w[0] = MAGIC;
	w[1] = lba;
	w[2] = ver;
	for (unsigned i = 3; i < BS / 8; i++)
		w[i] = rnd(&s);
}

/* the version b holds as block lba, VER_ZERO or VER_BAD */
static uint64_t version(const uint64_t *w, uint64_t lba)
{
	static __thread uint64_t ref[BS / 8];
	unsigned i;

	for (i = 0; i < BS / 8 && !w[i]; i++)
		;
	if (i == BS / 8)
		return VER_ZERO;
	if (w[0] != MAGIC || w[1] != lba || !w[2] || w[2] == VER_BAD)
		return VER_BAD;
	fill(ref, lba, w[2]);
	return memcmp(ref, w, BS) ? VER_BAD : w[2];
}

/* dmsetup message DMNAME 0 TEXT, without a fork */
static void mark(const char *text)
{
	char buf[sizeof(struct dm_ioctl) + 256] __attribute__((aligned(8)));
	struct dm_ioctl *io = (struct dm_ioctl *)buf;
	struct dm_target_msg *m = (struct dm_target_msg *)(buf + sizeof(*io));

	memset(buf, 0, sizeof(buf));
	io->version[0] = DM_VERSION_MAJOR;
	io->version[1] = 0;
	io->version[2] = 0;
	io->data_size = sizeof(buf);
	io->data_start = sizeof(*io);
	snprintf(io->name, sizeof(io->name), "%s", g_dm);
	m->sector = 0;
	snprintf(m->message, sizeof(buf) - sizeof(*io) - sizeof(*m), "mark %s", text);
	if (ioctl(g_ctl, DM_TARGET_MSG, io))
		die("mark %s on %s: %s", text, g_dm, strerror(errno));
}

static void *writer(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t s = g_seed * 4 + t + 1, *b = aligned_alloc(BS, BS);
	uint64_t mine = (g_blocks - t + NTHREADS - 1) / NTHREADS;

	if (!b)
		die("out of memory");
	while (atomic_fetch_add(&g_done_ops, 1) < g_ops) {
		uint64_t lba = (rnd(&s) % mine) * NTHREADS + t, ver = atomic_fetch_add(&g_ver, 1) + 1;
		int fua = rnd(&s) % 100 < 10;
		struct iovec iov = {b, BS};
		char name[32];

		fill(b, lba, ver);
		if (fua)
			pthread_mutex_lock(&g_flush_lock);
		if (pwritev2(g_fd, &iov, 1, (off_t)(lba * BS), fua ? RWF_DSYNC : 0) != BS)
			die("write of block %" PRIu64 ": %s", lba, strerror(errno));
		pthread_mutex_lock(&g_lock);
		g_w[g_nw++] = (struct jw){lba, ver, atomic_fetch_add(&g_ack, 1) + 1, fua};
		if (fua) {
			atomic_fetch_add(&g_nfua, 1);
			snprintf(name, sizeof(name), "u%" PRIu64, ver);
			mark(name);
		}
		pthread_mutex_unlock(&g_lock);
		if (fua)
			pthread_mutex_unlock(&g_flush_lock);
		if (rnd(&s) % 12 == 0) {
			uint64_t issued;

			pthread_mutex_lock(&g_flush_lock);
			issued = atomic_load(&g_ack);
			if (fdatasync(g_fd))
				die("fdatasync: %s", strerror(errno));
			pthread_mutex_lock(&g_lock);
			g_f[g_nf] = (struct jf){atomic_fetch_add(&g_nflush, 1) + 1, issued};
			snprintf(name, sizeof(name), "f%" PRIu64, g_f[g_nf].n);
			mark(name);
			g_nf++;
			pthread_mutex_unlock(&g_lock);
			pthread_mutex_unlock(&g_flush_lock);
		}
	}
	free(b);
	return NULL;
}

static int cmd_write(char **a)
{
	pthread_t th[NTHREADS];
	FILE *j;

	g_fd = open(a[0], O_RDWR | O_DIRECT);
	if (g_fd < 0)
		die("open %s: %s", a[0], strerror(errno));
	g_ctl = open("/dev/mapper/control", O_RDWR);
	if (g_ctl < 0)
		die("open /dev/mapper/control: %s", strerror(errno));
	g_dm = a[1];
	g_blocks = strtoull(a[3], NULL, 0);
	g_ops = strtoull(a[4], NULL, 0);
	g_seed = strtoull(a[5], NULL, 0);
	if (g_blocks < NTHREADS)
		die("too few blocks");
	g_w = calloc(g_ops, sizeof(*g_w));
	g_f = calloc(g_ops, sizeof(*g_f));
	if (!g_w || !g_f)
		die("out of memory");
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_create(&th[t], NULL, writer, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	j = fopen(a[2], "w");
	if (!j)
		die("create %s: %s", a[2], strerror(errno));
	for (size_t i = 0; i < g_nw; i++)
		fprintf(j, "W %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n", g_w[i].lba, g_w[i].ver,
			g_w[i].ack, g_w[i].fua);
	for (size_t i = 0; i < g_nf; i++)
		fprintf(j, "F %" PRIu64 " %" PRIu64 "\n", g_f[i].n, g_f[i].issued_ack);
	if (fclose(j))
		die("write %s: %s", a[2], strerror(errno));
	printf("pmc-vm-logwrites: %zu writes (%" PRIu64 " FUA), %zu flushes\n", g_nw,
	       (uint64_t)atomic_load(&g_nfua), g_nf);
	close(g_fd);
	close(g_ctl);
	return 0;
}

/* --- the replayer --- */

static int cmp_ack(const void *x, const void *y)
{
	const struct jw *a = x, *b = y;

	return a->ack < b->ack ? -1 : a->ack > b->ack;
}

static int cmd_check(char **a)
{
	int fd = open(a[0], O_RDONLY), strict = !strcmp(a[3], "strict");
	FILE *j = fopen(a[1], "r");
	uint64_t blocks = strtoull(a[2], NULL, 0), *cur, *last, *need, nmarks = 0;
	uint64_t nchecked = 0, next_w = 0, errors = 0, fua_seen = 0, flush_seen = 0;
	char line[128], *sec, *img;
	struct log_super sb;
	uint64_t pos;
	int final_seen = 0;

	if (fd < 0 || !j)
		die("open %s or %s: %s", a[0], a[1], strerror(errno));
	g_w = calloc(1u << 20, sizeof(*g_w));
	g_f = calloc(1u << 20, sizeof(*g_f));
	cur = calloc(blocks, 8);	/* version in the image */
	last = calloc(blocks, 8);	/* last version written */
	need = calloc(blocks, 8);	/* must be there by the current mark */
	img = aligned_alloc(BS, blocks * BS);
	if (!g_w || !g_f || !cur || !last || !need || !img)
		die("out of memory");
	memset(img, 0, blocks * BS);
	while (fgets(line, sizeof(line), j)) {
		struct jw w;
		struct jf f;

		if (sscanf(line, "W %" SCNu64 " %" SCNu64 " %" SCNu64 " %d", &w.lba, &w.ver, &w.ack,
			   &w.fua) == 4) {
			if (w.lba >= blocks || g_nw >= (1u << 20))
				die("journal: bad write line %s", line);
			g_w[g_nw++] = w;
			if (w.ver > last[w.lba])
				last[w.lba] = w.ver;
		} else if (sscanf(line, "F %" SCNu64 " %" SCNu64, &f.n, &f.issued_ack) == 2) {
			if (f.n == 0 || f.n > (1u << 20))
				die("journal: bad flush line %s", line);
			g_f[f.n - 1] = f;
			g_nf = f.n > g_nf ? f.n : g_nf;
		}
	}
	fclose(j);
	qsort(g_w, g_nw, sizeof(*g_w), cmp_ack);
	if (pread(fd, line, sizeof(sb), 0) != sizeof(sb))
		die("read the log super block");
	memcpy(&sb, line, sizeof(sb));
	if (sb.magic != WRITE_LOG_MAGIC || sb.version != 1 || sb.sectorsize < 512 ||
	    sb.sectorsize > BS || BS % sb.sectorsize)
		die("%s: not a dm-log-writes log (magic %#" PRIx64 ", version %" PRIu64
		    ", sector size %u)", a[0], sb.magic, sb.version, sb.sectorsize);
	sec = aligned_alloc(BS, 64u << 20);
	if (!sec)
		die("out of memory");
	pos = sb.sectorsize;
	for (uint64_t e = 0; e < sb.nr_entries; e++) {
		struct log_entry le;
		uint64_t len;

		if (pread(fd, sec, sb.sectorsize, (off_t)pos) != (ssize_t)sb.sectorsize)
			die("log entry %" PRIu64 ": short read", e);
		memcpy(&le, sec, sizeof(le));
		pos += sb.sectorsize;
		if (le.flags & LOG_MARK_FLAG) {
			char name[64];
			uint64_t n;

			len = le.data_len < sizeof(name) - 1 ? le.data_len : sizeof(name) - 1;
			memcpy(name, sec + sizeof(le), len);
			name[len] = 0;
			nmarks++;
			if (!strcmp(name, "final")) {
				for (uint64_t b = 0; b < blocks; b++)
					need[b] = last[b];
				final_seen = 1;
			} else if (strict && name[0] == 'f' && sscanf(name + 1, "%" SCNu64, &n) == 1 &&
				   n >= 1 && n <= g_nf) {
				while (next_w < g_nw && g_w[next_w].ack <= g_f[n - 1].issued_ack) {
					struct jw *w = &g_w[next_w++];

					if (w->ver > need[w->lba])
						need[w->lba] = w->ver;
				}
			} else if (strict && name[0] == 'u' && sscanf(name + 1, "%" SCNu64, &n) == 1) {
				for (uint64_t i = 0; i < g_nw; i++)
					if (g_w[i].ver == n && n > need[g_w[i].lba])
						need[g_w[i].lba] = n;
			} else {
				continue;
			}
			for (uint64_t b = 0; b < blocks; b++) {
				if (cur[b] >= need[b])
					continue;
				if (errors++ < 10)
					printf("FAIL: at mark %s (log entry %" PRIu64 ") block %" PRIu64
					       " holds version %" PRIu64 ", expected at least %" PRIu64
					       "%s\n",
					       name, e, b, cur[b], need[b],
					       final_seen ? " (the last written)"
							  : " (acknowledged before that flush or FUA)");
			}
			nchecked++;
			continue;
		}
		fua_seen += !!(le.flags & LOG_FUA_FLAG);
		flush_seen += !!(le.flags & LOG_FLUSH_FLAG);
		if (le.flags & LOG_DISCARD_FLAG) {
			uint64_t off = le.sector * sb.sectorsize, n = le.nr_sectors * sb.sectorsize;

			for (uint64_t b = off / BS; b < (off + n + BS - 1) / BS && b < blocks; b++)
				if (errors++ < 10)
					printf("FAIL: log entry %" PRIu64 ": a discard of block %" PRIu64
					       " (the writer discards nothing)\n", e, b);
			continue;
		}
		len = le.nr_sectors * sb.sectorsize;
		if (!len)
			continue;
		if (len > (64u << 20))
			die("log entry %" PRIu64 ": %" PRIu64 " bytes", e, len);
		if (pread(fd, sec, len, (off_t)pos) != (ssize_t)len)
			die("log entry %" PRIu64 ": short data", e);
		pos += len;
		{
			uint64_t off = le.sector * sb.sectorsize;

			if (off + len > blocks * BS)
				continue; /* outside the blocks the writer uses */
			memcpy(img + off, sec, len);
			for (uint64_t b = off / BS; b < (off + len + BS - 1) / BS; b++) {
				uint64_t v = version((uint64_t *)(img + b * BS), b);

				if (v == VER_BAD || (v != VER_ZERO && v > last[b]) ||
				    (v == VER_ZERO && cur[b])) {
					if (errors++ < 10)
						printf("FAIL: log entry %" PRIu64 ": block %" PRIu64
						       " is not a whole version written to it "
						       "(header version %" PRIu64 ")\n",
						       e, b, ((uint64_t *)(img + b * BS))[2]);
					continue;
				}
				if (v < cur[b] && errors++ < 10)
					printf("FAIL: log entry %" PRIu64 ": block %" PRIu64 " went back "
					       "from version %" PRIu64 " to %" PRIu64
					       " (an older write landed after a newer one)\n",
					       e, b, cur[b], v);
				cur[b] = v;
			}
		}
	}
	if (!final_seen && errors++ < 10)
		printf("FAIL: the log has no mark \"final\"\n");
	printf("%s: %" PRIu64 " log entries (%" PRIu64 " FLUSH, %" PRIu64 " FUA, %" PRIu64
	       " marks), %zu writes, %zu flushes journaled, %" PRIu64 " marks checked (%s), "
	       "%" PRIu64 " failures\n",
	       errors ? "FAIL" : "OK", sb.nr_entries, flush_seen, fua_seen, nmarks, g_nw, g_nf,
	       nchecked, strict ? "strict" : "final only", errors);
	return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 8 && !strcmp(argv[1], "write"))
		return cmd_write(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "check"))
		return cmd_check(argv + 2);
	fprintf(stderr, "usage: pmc-vm-logwrites write DEV DMNAME JOURNAL BLOCKS OPS SEED\n"
			"       pmc-vm-logwrites check LOGDEV JOURNAL BLOCKS strict|final\n");
	return 2;
}
