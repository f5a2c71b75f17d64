/* test_diskid.c - the right disk behind every volume:
 *  - identity texts: normalised, bounded, long ones hashed;
 *  - a volume attaches only to the disk whose identity it recorded: the
 *    wrong disk is refused (naming the volume and both identities) and
 *    nothing is written to it, dirty data or not;
 *  - --replace-disk is refused while dirty blocks remain, unless they are
 *    discarded; it drops clean blocks too (never served as the new disk's);
 *  - a 1.0 cache opens read-only as 1.0, is converted by a read-write open
 *    (also after a conversion cut short), and records the identity at the
 *    first attach; a torn identity record refuses the attach;
 *  - a loop device is identified by its backing file, and a volume that an
 *    older pmcached recorded by the device number moves to that identity;
 *    the match rule alone: an NVMe namespace recorded by controller serial
 *    and nsid moves to its UUID, a re-created namespace (another UUID) is
 *    another disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include "cache_internal.h"
#include "diskid.h"
#include "loopdev.h"
#include "engine.h"
#include "t.h"

#define BS 4096
#define DISK_BYTES (1u << 20)

static struct pmc_err err;
static int ndone, last;
static char pmem[256], disk_a[256], disk_b[256];

static void cb(struct pmc_req *r, int res)
{
	ndone++;
	last = res;
}

static int run(struct pmc_queue *q, enum pmc_req_op op, uint32_t vol, uint64_t off, uint64_t len,
	       void *buf)
{
	struct pmc_req r = {.op = op, .vol = vol, .off = off, .len = len, .buf = buf, .cb = cb};
	int before = ndone;

	T_OK(pmc_queue_submit(q, &r, &err));
	while (ndone == before)
		pmc_queue_poll(q, 1, 0);
	return last;
}

static void make_disk(const char *path, int fill)
{
	char *b = malloc(DISK_BYTES);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);

	T_TRUE(fd >= 0 && b);
	memset(b, fill, DISK_BYTES);
	T_EQ(pwrite(fd, b, DISK_BYTES, 0), DISK_BYTES);
	close(fd);
	free(b);
}

static uLong file_crc(const char *path)
{
	char *b = malloc(DISK_BYTES);
	int fd = open(path, O_RDONLY);
	uLong c;

	T_TRUE(fd >= 0 && b);
	T_EQ(pread(fd, b, DISK_BYTES, 0), DISK_BYTES);
	close(fd);
	c = crc32(0, (const Bytef *)b, DISK_BYTES);
	free(b);
	return c;
}

static void id_of(const char *path, struct pmc_disk_id *id)
{
	int fd = open(path, O_RDONLY);

	T_TRUE(fd >= 0);
	T_OK(pmc_disk_id_get(fd, DISK_BYTES, id, &err));
	close(fd);
}

struct rig {
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_engine *e;
	struct pmc_queue *q;
};

static void up(struct rig *r, unsigned open_flags)
{
	T_OK(pmc_pmem_open(pmem, 0, &r->pm, &err));
	T_OK(pmc_cache_open(r->pm, open_flags, &r->c, &err));
	r->e = NULL;
	r->q = NULL;
	if (!(open_flags & PMC_OPEN_RDONLY)) {
		T_OK(pmc_engine_create(r->c, NULL, &r->e, &err));
		T_OK(pmc_queue_create(r->e, 8, &r->q, &err));
	}
}

/* crash: no write-back, no clean close */
static void down(struct rig *r, int crash)
{
	pmc_queue_destroy(r->q);
	pmc_engine_destroy(r->e);
	if (crash)
		pmc_cache_abandon(r->c);
	else
		pmc_cache_close(r->c);
	pmc_pmem_close(r->pm);
}

static int attach(struct rig *r, const char *path, unsigned flags, uint32_t *vol)
{
	struct pmc_disk *d;
	int rc;

	T_OK(pmc_disk_open(path, 0, &d, &err));
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_attach_flags(r->e, "v", d, NULL, flags, vol, &err);
	if (rc)
		pmc_disk_close(d);
	return rc;
}

static void test_text(void)
{
	struct pmc_disk_id a, b, c;
	char long1[200], long2[200];

	pmc_disk_id_set_text(&a, "  t10.ATA     QEMU HARDDISK \t QM00005  ");
	T_TRUE(!strcmp(a.text, "t10.ATA_QEMU_HARDDISK_QM00005"));
	memset(long1, 'x', sizeof(long1) - 1);
	long1[sizeof(long1) - 1] = '\0';
	memcpy(long2, long1, sizeof(long2));
	long2[150] = 'y';
	pmc_disk_id_set_text(&a, long1);
	pmc_disk_id_set_text(&b, long1);
	pmc_disk_id_set_text(&c, long2);
	T_EQ(strlen(a.text), PMC_DISK_ID_MAX);
	T_TRUE(!strcmp(a.text, b.text));
	T_TRUE(strcmp(a.text, c.text)); /* same head, another disk */
	T_TRUE(a.text[PMC_DISK_ID_MAX - 17] == '~');
	id_of(disk_a, &a);
	id_of(disk_b, &b);
	T_TRUE(!strncmp(a.text, "file-", 5));
	T_TRUE(strcmp(a.text, b.text));
	printf("ok: identity texts (%s)\n", a.text);
}

/* the match rule: the same text, or a devnum- / nvme.sn- record an older
 * pmcached made that the disk's legacy identity still gives */
static void test_match(void)
{
	struct pmc_disk_id uuid, uuid2, sn, sn2, dev, wwid;
	const char *rec_sn = "nvme.sn-pmcnvmf0001-ns1";

	pmc_disk_id_set_text(&uuid, "nvme.uuid-6f0b1a52-1c1e-4e0e-9d0c-2f3b5f0e7a11");
	pmc_disk_id_set_text(&uuid2, "nvme.uuid-0d9d8e7b-5a44-4b6f-8a0e-3c2d1b0a9f88");
	pmc_disk_id_set_text(&sn, rec_sn);
	pmc_disk_id_set_text(&sn2, "nvme.sn-pmcnvmf0001-ns2");
	pmc_disk_id_set_text(&dev, "devnum-259:3");
	pmc_disk_id_set_text(&wwid, "wwid-naa.5000c500a1b2c3d4");

	T_EQ(pmc_disk_id_match(&uuid, NULL, uuid.text), PMC_DISK_ID_SAME);
	T_EQ(pmc_disk_id_match(&uuid, &sn, uuid.text), PMC_DISK_ID_SAME);
	/* a namespace re-created at the same nsid: another UUID, same serial */
	T_EQ(pmc_disk_id_match(&uuid2, &sn, uuid.text), 0);
	/* recorded by serial + nsid by an older pmcached: the same namespace */
	T_EQ(pmc_disk_id_match(&uuid, &sn, rec_sn), PMC_DISK_ID_LEGACY);
	T_EQ(pmc_disk_id_match(&uuid, NULL, rec_sn), 0); /* legacy not read */
	T_EQ(pmc_disk_id_match(&uuid, &sn2, rec_sn), 0); /* another nsid */
	T_EQ(pmc_disk_id_match(&sn2, &sn2, rec_sn), 0);
	/* a device number upgraded to a stable identity, never to another
	 * number, and no other form is taken as an older one */
	T_EQ(pmc_disk_id_match(&wwid, &dev, dev.text), PMC_DISK_ID_LEGACY);
	T_EQ(pmc_disk_id_match(&dev, &dev, dev.text), PMC_DISK_ID_SAME);
	T_EQ(pmc_disk_id_match(&uuid, &wwid, wwid.text), 0);
	T_EQ(pmc_disk_id_match(&uuid2, &uuid, uuid.text), 0);
	{
		struct pmc_disk_id dev2;

		pmc_disk_id_set_text(&dev2, "devnum-259:4");
		T_EQ(pmc_disk_id_match(&dev2, &dev, dev.text), 0);
	}
	printf("ok: the identity match rule (same text; devnum- and nvme.sn- records upgraded)\n");
}

/* the wrong disk, with dirty data in the cache: refused, untouched */
static void test_wrong_disk(void)
{
	struct pmc_disk_id ida, idb;
	struct pmc_volume_info vi;
	struct rig r;
	uint32_t vol;
	char want[512];
	char *buf = aligned_alloc(BS, 4 * BS), *rb = aligned_alloc(BS, 4 * BS);
	uLong crc_b;

	id_of(disk_a, &ida);
	id_of(disk_b, &idb);
	up(&r, 0);
	T_OK(attach(&r, disk_a, 0, &vol));
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_EQ(vi.id_state, 1);
	T_TRUE(!strcmp(vi.disk_id.text, ida.text));
	T_EQ(vi.disk_id.disk_bytes, DISK_BYTES);
	memset(buf, 0x5a, 4 * BS);
	T_EQ(run(r.q, PMC_REQ_WRITE, vol, 0, 4 * BS, buf), 0); /* dirty in the cache */
	down(&r, 1);

	crc_b = file_crc(disk_b);
	up(&r, 0);
	snprintf(want, sizeof(want), "volume v: wrong disk: the cache recorded %s, %s is %s",
		 ida.text, disk_b, idb.text);
	T_ERR(attach(&r, disk_b, 0, &vol), EXDEV, want);
	/* write-back has nothing to write to: the volume is not attached */
	for (int i = 0; i < 10; i++)
		pmc_engine_writeback_step(r.e, r.q);
	T_EQ(file_crc(disk_b), crc_b);
	/* replacing the disk would lose the dirty blocks */
	T_ERR(attach(&r, disk_b, PMC_ATTACH_REPLACE_DISK, &vol), EBUSY, "4 dirty blocks");
	T_EQ(file_crc(disk_b), crc_b);
	/* the right disk still attaches, and the data is there */
	T_OK(attach(&r, disk_a, 0, &vol));
	T_EQ(run(r.q, PMC_REQ_READ, vol, 0, 4 * BS, rb), 0);
	T_TRUE(!memcmp(buf, rb, 4 * BS));
	T_OK(pmc_engine_flush_all(r.e, r.q, UINT32_MAX, NULL, NULL, &err));
	T_OK(pmc_engine_detach(r.e, vol, 0, &err));
	/* clean blocks of disk A: replacing drops them too */
	T_OK(attach(&r, disk_b, PMC_ATTACH_REPLACE_DISK, &vol));
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_TRUE(!strcmp(vi.disk_id.text, idb.text));
	T_EQ(vi.nr_clean, 0);
	T_EQ(run(r.q, PMC_REQ_READ, vol, 0, 4 * BS, rb), 0);
	memset(buf, 0xbb, 4 * BS);
	T_TRUE(!memcmp(buf, rb, 4 * BS)); /* disk B's contents, not A's cached ones */
	T_OK(pmc_engine_detach(r.e, vol, 0, &err));
	/* and now disk A is the wrong one */
	T_ERR(attach(&r, disk_a, 0, &vol), EXDEV, "wrong disk");
	/* dirty data of B discarded on request */
	T_OK(attach(&r, disk_b, 0, &vol));
	memset(buf, 0x77, 4 * BS);
	T_EQ(run(r.q, PMC_REQ_WRITE, vol, 0, 4 * BS, buf), 0);
	T_OK(pmc_engine_detach(r.e, vol, 0, &err));
	crc_b = file_crc(disk_b);
	T_OK(attach(&r, disk_a, PMC_ATTACH_REPLACE_DISK | PMC_ATTACH_DISCARD_DIRTY, &vol));
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_EQ(vi.nr_dirty, 0);
	T_EQ(run(r.q, PMC_REQ_READ, vol, 0, 4 * BS, rb), 0);
	memset(buf, 0x5a, 4 * BS); /* what was flushed to A before */
	T_TRUE(!memcmp(buf, rb, 4 * BS));
	T_OK(pmc_engine_flush_all(r.e, r.q, UINT32_MAX, NULL, NULL, &err));
	T_EQ(file_crc(disk_b), crc_b); /* the discarded blocks never went anywhere */
	down(&r, 0);
	free(buf);
	free(rb);
	printf("ok: wrong disk refused, replace and discard\n");
}

static void sb_rewrite(struct pmc_pmem *pm, void (*edit)(struct pmc_sb *))
{
	for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
		struct pmc_sb *sb = (struct pmc_sb *)(pm->base + (size_t)i * PMC_SB_SLOT);

		edit(sb);
		sb->csum = pmc_sb_csum(sb);
	}
}

static void to_v10(struct pmc_sb *sb)
{
	sb->minor = 0;
	sb->ro_compat = 0;
}

/* a 1.0 cache with one volume whose configured path is 100 bytes long */
static void make_v10(const char *path100, int half_converted)
{
	struct pmc_pmem *pm;
	struct pmc_vol *v;

	T_OK(pmc_pmem_open(pmem, 0, &pm, &err));
	T_OK(pmc_cache_format(pm, NULL, &err));
	v = (struct pmc_vol *)(pm->base + PMC_VOL_OFF);
	memset((char *)v + 8, 0, sizeof(*v) - 8);
	v->size_bytes = DISK_BYTES;
	snprintf(v->name, sizeof(v->name), "v");
	memcpy((char *)v + offsetof(struct pmc_vol, disk), path100, strlen(path100));
	v->csum = half_converted ? pmc_vol_csum(v) : pmc_vol_csum_v10(v);
	v->gen_state = PMC_VOL_GS(0, PMC_VOL_ACTIVE);
	sb_rewrite(pm, to_v10);
	pmc_pmem_close(pm);
}

static void test_v10(int half)
{
	struct pmc_volume_info vi;
	struct pmc_disk_id ida;
	struct rig r;
	char path100[101];
	uint32_t vol;

	memset(path100, 'p', 100);
	path100[0] = '/';
	path100[100] = '\0';
	id_of(disk_a, &ida);
	make_v10(path100, half);

	/* read-only: a 1.0 cache read as 1.0, nothing stored */
	up(&r, PMC_OPEN_RDONLY);
	T_EQ(r.c->sb.minor, 0);
	T_OK(pmc_cache_volume_find(r.c, "v", &vol));
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	if (!half)
		T_TRUE(!strcmp(vi.disk, path100));
	T_EQ(vi.id_state, 0);
	pmc_cache_close(r.c);
	pmc_pmem_close(r.pm);

	/* read-write: converted to 1.1, no identity yet */
	up(&r, 0);
	T_EQ(r.c->sb.minor, 1);
	T_EQ(r.c->sb.ro_compat, PMC_FEAT_RO_COMPAT_DISK_ID | PMC_FEAT_RO_COMPAT_QUARANTINE);
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_EQ(vi.id_state, 0);
	T_TRUE(!strncmp(vi.disk, path100, 64) && strlen(vi.disk) == 64);
	/* the first attach records the disk */
	T_OK(attach(&r, disk_a, 0, &vol));
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_EQ(vi.id_state, 1);
	T_TRUE(!strcmp(vi.disk_id.text, ida.text));
	down(&r, 1);
	up(&r, 0);
	T_ERR(attach(&r, disk_b, 0, &vol), EXDEV, ida.text);
	T_OK(attach(&r, disk_a, 0, &vol));
	down(&r, 0);
	printf("ok: 1.0 cache%s: opened, converted, identity recorded at first attach\n",
	       half ? " (conversion cut short)" : "");
}

/* a torn identity record is never read as an identity */
static void test_torn(void)
{
	struct pmc_volume_info vi;
	struct rig r;
	uint32_t vol;
	char *buf = aligned_alloc(BS, BS);

	up(&r, 0);
	T_OK(attach(&r, disk_a, 0, &vol));
	memset(buf, 0x5c, BS);
	T_EQ(run(r.q, PMC_REQ_WRITE, vol, 7 * BS, BS, buf), 0); /* acknowledged, dirty */
	down(&r, 1); /* a power cut while the record was rewritten (the devnum- upgrade) */
	T_OK(pmc_pmem_open(pmem, 0, &r.pm, &err));
	((struct pmc_vol *)(r.pm->base + PMC_VOL_OFF))[vol].disk_id[3] ^= 1;
	pmc_pmem_close(r.pm);
	up(&r, 0);
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_EQ(vi.id_state, -1);
	T_ERR(attach(&r, disk_a, 0, &vol), EUCLEAN,
	      "recorded disk identity is unreadable (bad checksum); found");
	T_TRUE(strstr(err.msg, "attach it with --replace-disk (its dirty blocks are kept)") != NULL);
	/* the operator names the disk: recorded, and the dirty block stays,
	 * to be written back to it (it was refused while dirty blocks
	 * remained: only --discard-dirty, which drops them, got it back) */
	T_OK(attach(&r, disk_a, PMC_ATTACH_REPLACE_DISK, &vol));
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_EQ(vi.id_state, 1);
	T_EQ(vi.nr_dirty, 1);
	memset(buf, 0, BS);
	T_EQ(run(r.q, PMC_REQ_READ, vol, 7 * BS, BS, buf), 0);
	T_TRUE(buf[0] == 0x5c && buf[BS - 1] == 0x5c);
	down(&r, 0);
	free(buf);
	printf("ok: torn identity record refused, recorded on request with its dirty blocks\n");
}

/*
 * A loop device is identified by its backing file (device-mapper and md
 * devices likewise by their UUIDs), not by its device number, which can
 * change at a reboot. A volume recorded by the number (before those
 * identities were read) attaches to the device of that number, and its
 * stable identity is recorded then, its blocks kept; another number is
 * refused.
 */
static void test_loop_id(void)
{
	struct pmc_volume_info vi;
	struct pmc_disk_id id, old;
	struct t_loop l = {.fd = -1};
	struct stat st;
	struct rig r;
	char *buf = aligned_alloc(BS, BS);
	uint32_t vol;

	if (geteuid() != 0 || t_loop_make(&l, "diskid", 0, DISK_BYTES)) {
		printf("skip: no loop device to be had: the loop identity is not checked\n");
		free(buf);
		return;
	}
	id_of(l.dev, &id);
	if (strncmp(id.text, "loop-", 5) || !strstr(id.text, "pmc-test-diskid"))
		T_FAIL("loop device %s: identity %s, not its backing file %s", l.dev, id.text,
		       l.file);
	up(&r, 0);
	T_OK(attach(&r, l.dev, 0, &vol));
	memset(buf, 0x11, BS);
	T_EQ(run(r.q, PMC_REQ_WRITE, vol, 0, BS, buf), 0); /* dirty, kept throughout */
	down(&r, 0);
	/* the record an older pmcached made: the device number */
	T_EQ(fstat(l.fd, &st), 0);
	memset(&old, 0, sizeof(old));
	snprintf(old.text, sizeof(old.text), "devnum-%u:%u", major(st.st_rdev),
		 minor(st.st_rdev) + 1);
	old.disk_bytes = DISK_BYTES;
	up(&r, 0);
	T_OK(pmc_cache_volume_set_id(r.c, vol, &old, 0, 0, &err));
	T_ERR(attach(&r, l.dev, 0, &vol), EXDEV, "wrong disk"); /* another number */
	snprintf(old.text, sizeof(old.text), "devnum-%u:%u", major(st.st_rdev),
		 minor(st.st_rdev));
	T_OK(pmc_cache_volume_set_id(r.c, vol, &old, 0, 0, &err));
	T_OK(attach(&r, l.dev, 0, &vol)); /* its number: the same disk */
	T_OK(pmc_cache_volume_info(r.c, vol, &vi));
	T_TRUE(!strcmp(vi.disk_id.text, id.text));
	T_EQ(vi.nr_dirty, 1);
	memset(buf, 0, BS);
	T_EQ(run(r.q, PMC_REQ_READ, vol, 0, BS, buf), 0);
	T_EQ((unsigned char)buf[0], 0x11);
	down(&r, 0);
	t_loop_free(&l);
	free(buf);
	printf("ok: a loop device by its backing file; a record by number upgraded\n");
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct pmc_pmem *pm;

	snprintf(pmem, sizeof(pmem), "%s/pmc-diskid-%d.pmem", tmp, getpid());
	snprintf(disk_a, sizeof(disk_a), "%s/pmc-diskid-%d.a", tmp, getpid());
	snprintf(disk_b, sizeof(disk_b), "%s/pmc-diskid-%d.b", tmp, getpid());
	make_disk(disk_a, 0xaa);
	make_disk(disk_b, 0xbb);
	unlink(pmem);
	T_OK(pmc_pmem_open(pmem, (4u << 20) + 64 * BS, &pm, &err));
	T_OK(pmc_cache_format(pm, NULL, &err));
	pmc_pmem_close(pm);

	test_text();
	test_match();
	test_wrong_disk();
	T_OK(pmc_pmem_open(pmem, 0, &pm, &err));
	T_OK(pmc_cache_format(pm, NULL, &err));
	pmc_pmem_close(pm);
	test_torn();
	test_v10(0);
	test_v10(1);
	T_OK(pmc_pmem_open(pmem, 0, &pm, &err));
	T_OK(pmc_cache_format(pm, NULL, &err));
	pmc_pmem_close(pm);
	test_loop_id();
	unlink(pmem);
	unlink(disk_a);
	unlink(disk_b);
	printf("PASS test_diskid\n");
	return 0;
}
