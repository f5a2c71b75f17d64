/* test_format.c - format, open and every refusal of open: each refusal has
 * a one-line message naming the problem and leaves the pmem untouched. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cache.h"
#include "format.h"
#include "signature.h"
#include "simpmem.h"
#include "t.h"

static char path[256];
static struct pmc_err err;

static uLong file_crc(void)
{
	static char buf[1 << 16];
	uLong crc = crc32(0L, Z_NULL, 0);
	int fd = open(path, O_RDONLY);
	ssize_t n;

	T_TRUE(fd >= 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crc = crc32(crc, (const Bytef *)buf, (uInt)n);
	close(fd);
	return crc;
}

static void poke(off_t off, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY);

	T_TRUE(fd >= 0);
	T_EQ(pwrite(fd, p, len, off), (ssize_t)len);
	close(fd);
}

static void peek(off_t off, void *p, size_t len)
{
	int fd = open(path, O_RDONLY);

	T_TRUE(fd >= 0);
	T_EQ(pread(fd, p, len, off), (ssize_t)len);
	close(fd);
}

/* open must fail with code and text, and not change a byte of the file */
static void refused(int code, const char *text)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c = NULL;
	uLong before = file_crc();

	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_ERR(pmc_cache_open(pm, 0, &c, &err), code, text);
	T_TRUE(c == NULL);
	T_ERR(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err), code, text);
	pmc_pmem_close(pm);
	T_EQ(file_crc(), before);
}

static void fresh(uint64_t size)
{
	struct pmc_pmem *pm;

	struct stat st;

	unlink(path);
	T_OK(pmc_pmem_open(path, size, &pm, &err));
	/* allocated, not sparse: a store into a hole of a file system that
	 * has filled up since raises SIGBUS */
	T_TRUE(stat(path, &st) == 0 && (uint64_t)st.st_blocks * 512 >= size);
	T_OK(pmc_cache_format(pm, NULL, &err));
	pmc_pmem_close(pm);
}

/* rewrite superblock copy i through fn, fixing its checksum when asked */
static void edit_sb(unsigned i, void (*fn)(struct pmc_sb *), int fix_csum)
{
	struct pmc_sb sb;

	peek((off_t)i * PMC_SB_SLOT, &sb, sizeof(sb));
	fn(&sb);
	if (fix_csum)
		sb.csum = (uint32_t)crc32(0L, (const Bytef *)&sb, offsetof(struct pmc_sb, csum));
	poke((off_t)i * PMC_SB_SLOT, &sb, sizeof(sb));
}

static void flip_byte(struct pmc_sb *sb)
{
	sb->nr_blocks ^= 1;
}
static void newer_major(struct pmc_sb *sb)
{
	sb->major = 2;
	sb->minor = 0;
}
static void unknown_incompat(struct pmc_sb *sb)
{
	sb->incompat |= 1ull << 17;
}
static void unknown_ro_compat(struct pmc_sb *sb)
{
	sb->ro_compat |= 1ull << 3;
}
static void bad_geometry(struct pmc_sb *sb)
{
	sb->data_off += 2u << 20;
}

static uint64_t g_seq, g_epoch;
static uint64_t g_nr_blocks; /* of a fresh 16 MiB cache */

static void set_seq_epoch(struct pmc_sb *sb)
{
	sb->seq = g_seq;
	sb->boot_epoch = g_epoch;
}

/* give copy i a sequence number and a boot epoch of its own */
static void mark_copy(unsigned i, uint64_t seq, uint64_t epoch)
{
	g_seq = seq;
	g_epoch = epoch;
	edit_sb(i, set_seq_epoch, 1);
}

static void read_copy(unsigned i, struct pmc_sb *sb)
{
	peek((off_t)i * PMC_SB_SLOT, sb, sizeof(*sb));
	T_EQ(sb->csum, (uint32_t)crc32(0L, (const Bytef *)sb, offsetof(struct pmc_sb, csum)));
}

/* a read-only open is served by the copy holding boot epoch `epoch`; a
 * read-write open then commits epoch + 1 into the other copy, the one
 * not serving, with the next sequence number */
static void serves(uint64_t epoch, unsigned slot, uint64_t seq, const char *what)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	struct pmc_sb sb;

	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err));
	pmc_cache_get_info(c, &info);
	if (info.boot_epoch != epoch)
		T_FAIL("%s: served with boot epoch %llu, the copy that should serve holds %llu", what,
		       (unsigned long long)info.boot_epoch, (unsigned long long)epoch);
	T_EQ(info.nr_blocks, g_nr_blocks);
	pmc_cache_close(c);
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.boot_epoch, epoch + 1);
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	read_copy(1 - slot, &sb);
	if (sb.seq != seq + 1 || sb.boot_epoch != epoch + 1)
		T_FAIL("%s: the open committed seq %llu epoch %llu into copy %u, expected seq %llu "
		       "epoch %llu",
		       what, (unsigned long long)sb.seq, (unsigned long long)sb.boot_epoch, 1 - slot,
		       (unsigned long long)(seq + 1), (unsigned long long)(epoch + 1));
	printf("ok: %s: copy %u serves\n", what, slot);
}

/*
 * A format over a cache whose last stop was a crash (superblock copies: the
 * newest says not clean, the older is the clean close before it), cut at
 * each of its persist points with the words not yet drained landing or not
 * (all, none, those of one superblock copy only - the others' - then 16
 * random subsets): the pmem then holds no cache, the new
 * one, or the old one as it was (its newest copy) - never the older copy,
 * whose clean counts and pins would be taken as current.
 */
static uint8_t g_old_uuid[16];
static unsigned g_images, g_seen_old, g_seen_none, g_seen_new;
static char *g_img;
static uint64_t g_rng = 42;

static void format_cut(struct simpmem *s, void *arg)
{
	(void)arg;
	for (int k = 0; k < 20; k++) {
		struct pmc_pmem *pm;
		struct pmc_cache *c;
		struct pmc_cache_info ci;
		struct pmc_err e = {0};

		if (k == 2 || k == 3) {
			/* only the stores to copy k - 2 land */
			memcpy(g_img, s->dura, s->size);
			for (size_t i = 0; i < s->nlist; i++) {
				uint64_t off = s->list[i] * 8;

				if (off / PMC_SB_SLOT == (uint64_t)(k - 2))
					memcpy(g_img + off, s->live + off, 8);
			}
		} else {
			simpmem_crash_image(s, g_img, k < 2 ? k : 2, &g_rng);
		}
		T_EQ(pmc_pmem_wrap(g_img, s->size, &simpmem_direct_ops, NULL, &pm), 0);
		g_images++;
		if (pmc_cache_open(pm, 0, &c, &e)) {
			g_seen_none++;
			pmc_pmem_close(pm);
			continue;
		}
		pmc_cache_get_info(c, &ci);
		if (!memcmp(ci.uuid, g_old_uuid, 16)) {
			if (ci.was_clean)
				T_FAIL("drain %" PRIu64 ": a format cut there revived the old cache's "
				       "older superblock copy (clean)", s->drains);
			g_seen_old++;
		} else {
			g_seen_new++;
		}
		pmc_cache_abandon(c);
		pmc_pmem_close(pm);
	}
}

static void format_cut_keeps_newest(void)
{
	struct simpmem sim;
	struct pmc_cache *c;
	struct pmc_cache_info ci;

	T_TRUE(simpmem_init(&sim, (2u << 20) + 64 * 4096) == 0);
	g_img = aligned_alloc(4096, sim.size);
	T_OK(pmc_cache_format(sim.pm, NULL, &err));
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	pmc_cache_close(c); /* the older copy: a clean close */
	T_OK(pmc_cache_open(sim.pm, 0, &c, &err));
	pmc_cache_get_info(c, &ci);
	memcpy(g_old_uuid, ci.uuid, 16);
	pmc_cache_abandon(c); /* the newest: open, then a crash */
	sim.on_drain = format_cut;
	T_OK(pmc_cache_format(sim.pm, NULL, &err));
	sim.on_drain = NULL;
	T_TRUE(g_seen_old > 0 && g_seen_new > 0);
	printf("ok: a format cut at any of its persist points: %u images, %u the old cache as "
	       "it was, %u none, %u the new\n",
	       g_images, g_seen_old, g_seen_none, g_seen_new);
	free(g_img);
	simpmem_fini(&sim);
}

/* format's signature probe over superblock lines that cannot be read (a
 * media error; here pages of a mapping past its file's end): a refusal
 * naming it, not a SIGBUS */
static void signature_unreadable(void)
{
	char p[sizeof(path) + 8];
	char what[128];
	struct pmc_pmem *pm;
	size_t len = 2 * PMC_SB_SLOT;
	int fd;
	void *map;

	snprintf(p, sizeof(p), "%s.empty", path);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_TRUE(fd >= 0);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	T_TRUE(map != MAP_FAILED);
	T_EQ(pmc_pmem_wrap(map, len, &simpmem_direct_ops, NULL, &pm), 0);
	T_EQ(pmc_pmem_signature(p, pm, what, sizeof(what)), 1);
	T_TRUE(strstr(what, "cannot be read (media error)") != NULL);
	printf("ok: signature probe over unreadable superblocks: %s\n", what);
	pmc_pmem_close(pm);
	munmap(map, len);
	close(fd);
	unlink(p);
}

/*
 * pmc_pmem_discard (a failed format --size) removes only a file its open
 * created and that is still the one at the path: not one that was there
 * already, nor one another process put in its place meanwhile (the format
 * removed whatever was at the path when it had found none before).
 */
static void discard_only_ours(uint64_t size)
{
	char other[300];
	struct pmc_pmem *pm;
	struct stat st;
	int fd;

	/* there already: kept */
	T_OK(pmc_pmem_open(path, size, &pm, &err));
	T_EQ(pm->created, 0);
	pmc_pmem_discard(pm);
	T_OK(stat(path, &st));
	/* created, then replaced by another file: the other one is kept */
	T_OK(unlink(path));
	T_OK(pmc_pmem_open(path, size, &pm, &err));
	T_EQ(pm->created, 1);
	snprintf(other, sizeof(other), "%s.other", path);
	fd = open(other, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	T_TRUE(fd >= 0 && write(fd, "x", 1) == 1);
	close(fd);
	T_OK(rename(other, path));
	pmc_pmem_discard(pm);
	T_TRUE(stat(path, &st) == 0 && st.st_size == 1);
	/* created and still there: removed */
	T_OK(unlink(path));
	T_OK(pmc_pmem_open(path, size, &pm, &err));
	pmc_pmem_discard(pm);
	T_TRUE(stat(path, &st) != 0 && errno == ENOENT);
	/* the blank file the tests below start from */
	T_OK(pmc_pmem_open(path, size, &pm, &err));
	pmc_pmem_close(pm);
}

int main(void)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_cache_info info;
	const uint64_t size = 16u << 20;
	char junk[4096];

	snprintf(path, sizeof(path), "%s/pmc-test-format.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 getpid());

	/* a fresh file: blank */
	unlink(path);
	T_OK(pmc_pmem_open(path, size, &pm, &err));
	T_EQ(pm->size, size);
	T_EQ(pm->created, 1);
	pmc_pmem_close(pm);
	discard_only_ours(size);
	refused(ENODATA, "no pmcache superblock (blank");

	/* foreign data at the start */
	memset(junk, 0x5a, sizeof(junk));
	poke(0, junk, sizeof(junk));
	poke(PMC_SB_SLOT, junk, sizeof(junk));
	refused(ENODATA, "foreign data");

	/* format and open: geometry, clean state, epoch */
	fresh(size);
	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.block_size, 4096);
	T_EQ(info.data_off % (2u << 20), 0);
	T_TRUE(info.nr_blocks > 0 && info.data_off + info.nr_blocks * 4096 <= size);
	T_EQ(info.was_clean, 1);
	T_EQ(info.counts_valid, 1);
	T_EQ(info.boot_epoch, 1);
	g_nr_blocks = info.nr_blocks;
	printf("ok: 16 MiB holds %llu blocks, data at %llu\n", (unsigned long long)info.nr_blocks,
	       (unsigned long long)info.data_off);
	pmc_cache_abandon(c); /* a crash: not clean */
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.was_clean, 0);
	T_EQ(info.counts_valid, 0);
	T_EQ(info.boot_epoch, 2);
	pmc_cache_recount(c);
	pmc_cache_get_info(c, &info);
	T_EQ(info.counts_valid, 1);
	pmc_cache_close(c);
	T_OK(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err));
	pmc_cache_get_info(c, &info);
	T_EQ(info.was_clean, 1);
	T_EQ(info.rdonly, 1);
	{
		uint32_t vol;
		T_ERR(pmc_cache_volume_add(c, "v", "/dev/x", 1 << 20, &vol, &err), EROFS, "read-only");
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);

	/* one corrupt copy: the other one serves, with what it holds, whether
	 * the corrupt copy is the newer one or the older one */
	edit_sb(0, flip_byte, 0);
	edit_sb(1, flip_byte, 0);
	refused(EUCLEAN, "superblock (both copies): bad checksum");
	for (unsigned bad = 0; bad < 2; bad++) {
		for (unsigned newer = 0; newer < 2; newer++) {
			char what[96];

			fresh(size);
			mark_copy(newer, 8, 20 + newer);
			mark_copy(1 - newer, 7, 20 + (1 - newer));
			edit_sb(bad, flip_byte, 0);
			snprintf(what, sizeof(what), "copy %u corrupt, copy %u the newer", bad, newer);
			serves(20 + (1 - bad), 1 - bad, 1 - bad == newer ? 8 : 7, what);
		}
	}
	/* both valid: the newer serves */
	fresh(size);
	mark_copy(0, 9, 30);
	mark_copy(1, 8, 31);
	serves(30, 0, 9, "both valid, copy 0 the newer");

	/* seq is compared in serial-number order: past UINT64_MAX it wraps
	 * to 0, which is newer, and so on up */
	fresh(size);
	mark_copy(0, UINT64_MAX, 40);
	mark_copy(1, 0, 41);
	serves(41, 1, 0, "seq wrapped: copy 0 at 2^64-1, copy 1 at 0");
	fresh(size);
	mark_copy(0, 1, 50);
	mark_copy(1, UINT64_MAX - 1, 51);
	serves(50, 0, 1, "seq wrapped: copy 0 at 1, copy 1 at 2^64-2");
	fresh(size);
	mark_copy(0, UINT64_MAX - 1, 60);
	mark_copy(1, UINT64_MAX, 61);
	serves(61, 1, UINT64_MAX, "seq about to wrap: copy 1 at 2^64-1 commits 0");
	{
		struct pmc_sb sb;

		read_copy(0, &sb);
		T_EQ(sb.seq, 0);
		serves(62, 0, 0, "seq wrapped by a commit");
	}

	/* newer format, unknown features, inconsistent geometry */
	fresh(size);
	edit_sb(0, newer_major, 1);
	edit_sb(1, newer_major, 1);
	refused(EUCLEAN, "format version 2.0 is newer than this build supports (1.x)");
	fresh(size);
	edit_sb(0, unknown_incompat, 1);
	edit_sb(1, unknown_incompat, 1);
	refused(EUCLEAN, "unknown incompatible features 0x20000");
	fresh(size);
	edit_sb(0, bad_geometry, 1);
	edit_sb(1, bad_geometry, 1);
	refused(EINVAL, "superblock field data_off");
	fresh(size);
	edit_sb(0, unknown_ro_compat, 1);
	edit_sb(1, unknown_ro_compat, 1);
	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_ERR(pmc_cache_open(pm, 0, &c, &err), EROFS, "unknown read-only features");
	T_OK(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err));
	pmc_cache_close(c);
	pmc_pmem_close(pm);

	/* size that does not match the device */
	fresh(size);
	T_EQ(truncate(path, (off_t)size + (4u << 20)), 0);
	refused(EINVAL, "superblock records a size of 16777216 bytes but the device has 20971520 bytes");

	/* a volume slot with a bad checksum */
	fresh(size);
	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	{
		uint32_t vol;
		T_OK(pmc_cache_volume_add(c, "data0", "/dev/nvme0n1", 1 << 30, &vol, &err));
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	poke(PMC_VOL_OFF + offsetof(struct pmc_vol, name), "X", 1);
	refused(EUCLEAN, "volume slot 0: bad checksum");

	/* bad format requests */
	unlink(path);
	T_OK(pmc_pmem_open(path, 1u << 20, &pm, &err));
	T_ERR(pmc_cache_format(pm, NULL, &err), ENOSPC, "too small");
	T_ERR(pmc_cache_format(pm, &(struct pmc_format_opts){.block_size = 5000}, &err), EINVAL,
	      "block size 5000");
	pmc_pmem_close(pm);

	/* pmem layer: wrong sizes and kinds */
	T_ERR(pmc_pmem_open(path, 2u << 20, &pm, &err), EEXIST, "file exists with 1048576 bytes");
	T_ERR(pmc_pmem_open("/nonexistent/dir/pmem", 0, &pm, &err), ENOENT, "cannot open");
	T_ERR(pmc_pmem_open("/tmp", 0, &pm, &err), EISDIR, "cannot open");
	T_ERR(pmc_pmem_open("/dev/null", 0, &pm, &err), EINVAL, "/dev/null: character device is not a devdax namespace");
	unlink(path);
	format_cut_keeps_newest();
	signature_unreadable();
	printf("PASS test_format\n");
	return 0;
}
