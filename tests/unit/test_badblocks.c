/* test_badblocks.c - the namespace's bad ranges at open (lib/poison.c).
 *
 * A plain file lists no bad blocks, so this test stands in for the
 * device: it defines libpmem2's pmem2_badblock_context_new(), _next() and
 * _context_delete() itself (the executable's definitions win) and lists
 * the ranges it sets.
 *
 * Checked: a cache closed cleanly with two dirty blocks is opened with a
 * bad range over the data of one of them: the block is quarantined (LOST,
 * one dirty block left); a crash just before the open.epoch commit (the
 * pmem copied there, through the hook pmc_test_open_committing) leaves a
 * cache whose next open counts one dirty block and passes the checker
 * (the quarantine ran under the clean close's counters, which said two,
 * and a crash before the commit left them trusted); and a bad range in
 * the metadata refuses the open, also after an unsafe shutdown (whose
 * whole-metadata check must not read a poisoned line: one page is mapped
 * to raise SIGBUS), with the volume table or a superblock copy poisoned
 * (read by the open's first steps), and on a read-only open before any
 * walk.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "cache_internal.h"
#include "check.h"
#include "pmem.h"
#include "poison.h"
#include "t.h"
#include "tcache.h"

#define BS 4096

static struct pmem2_badblock g_bad[4];
static unsigned g_nbad, g_next;

int pmem2_badblock_context_new(struct pmem2_badblock_context **ctx,
			       const struct pmem2_source *src)
{
	(void)src;
	*ctx = (struct pmem2_badblock_context *)&g_next;
	g_next = 0;
	return 0;
}

int pmem2_badblock_next(struct pmem2_badblock_context *ctx, struct pmem2_badblock *bb)
{
	(void)ctx;
	if (g_next >= g_nbad)
		return PMEM2_E_NO_BAD_BLOCK_FOUND;
	*bb = g_bad[g_next++];
	return 0;
}

void pmem2_badblock_context_delete(struct pmem2_badblock_context **ctx)
{
	*ctx = NULL;
}

/* and the namespace's unsafe-shutdown count and id (test_usc.c) */
static uint64_t g_usc = 7;

int pmem2_source_device_usc(const struct pmem2_source *src, uint64_t *usc)
{
	(void)src;
	*usc = g_usc;
	return 0;
}

int pmem2_source_device_id(const struct pmem2_source *src, char *id, size_t *len)
{
	static const char s[] = "0001-02-0003-00000004";

	(void)src;
	if (!id) {
		*len = sizeof(s);
		return 0;
	}
	memcpy(id, s, sizeof(s));
	return 0;
}

static struct pmc_err err;
static char g_path[256], g_snap[256];

/* page off of the mapping reads as a machine check would: SIGBUS (an
 * empty file mapped over it: every page past its end) */
static void poison_page(struct pmc_pmem *pm, uint64_t off, const char *hole)
{
	int fd = open(hole, O_CREAT | O_TRUNC | O_RDWR, 0600);

	T_TRUE(fd >= 0);
	T_TRUE(mmap(pm->base + off, BS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) !=
	       MAP_FAILED);
	close(fd);
}

/* the crash: the pmem as it is now, copied (the mapping is shared) */
static void snapshot(struct pmc_cache *c)
{
	(void)c;
	t_file_copy(g_path, g_snap);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *buf = aligned_alloc(BS, BS);
	struct pmc_volume_info vi;
	struct pmc_check_report rep;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	enum pmc_block_state st;
	uint64_t x;
	uint32_t v;

	snprintf(g_path, sizeof(g_path), "%s/pmc-bb-%d.pmem", tmp, getpid());
	snprintf(g_snap, sizeof(g_snap), "%s/pmc-bb-%d.snap", tmp, getpid());
	t_cache_new(g_path, 64, &pm, &c, &v);
	memset(buf, 5, BS);
	T_OK(pmc_cache_write(c, v, 0, 1, buf, &err));
	T_OK(pmc_cache_write(c, v, 1, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, v, 0, &x, &st));
	pmc_cache_unpin(c, x);
	g_bad[0].offset = c->sb.data_off + x * BS;
	g_bad[0].length = BS;
	pmc_cache_close(c); /* clean: two dirty blocks counted */

	/* the bad range over block x's data; a crash before open.epoch */
	g_nbad = 1;
	pmc_test_open_committing = snapshot;
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_test_open_committing = NULL;
	T_EQ(pmc_load64(&c->descs[x].state) & 0xff, PMC_BLK_LOST);
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_dirty, 1);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	printf("ok: a bad range over a dirty block quarantines it\n");

	T_OK(pmc_pmem_open(g_snap, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	if (!atomic_load(&c->counts_valid))
		pmc_cache_recount(c);
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_dirty, 1);
	T_OK(pmc_cache_check(c, &rep, &err));
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	printf("ok: a crash after the quarantine, before open.epoch: the counts agree\n");

	/* a bad range in the metadata: refused */
	g_bad[0].offset = 0;
	T_OK(pmc_pmem_open(g_path, 0, &pm, &err));
	T_ERR(pmc_cache_open(pm, 0, &c, &err), EIO, "in the metadata");
	pmc_pmem_close(pm);

	/* ... also after an unsafe shutdown, whose whole-metadata check would
	 * read the poisoned line (SIGBUS) if it ran before the list is read;
	 * and a read-only open (pmcachectl check, dump) names it before any
	 * walk */
	{
		char hole[300];
		uint64_t off, voff;

		snprintf(hole, sizeof(hole), "%s.hole", g_path);
		g_nbad = 0;
		T_OK(pmc_pmem_open(g_path, 0, &pm, &err));
		T_OK(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err));
		off = c->sb.desc_off / BS * BS; /* the descriptor table's first page */
		voff = c->sb.vol_off / BS * BS; /* the volume table's */
		T_TRUE(c->sb.pmem_usc == g_usc && c->sb.pmem_id[0]);
		pmc_cache_abandon(c);
		pmc_pmem_close(pm);
		g_usc++; /* read at the pmem's open */
		T_OK(pmc_pmem_open(g_path, 0, &pm, &err));
		g_bad[0].offset = off;
		g_nbad = 1;
		poison_page(pm, off, hole);
		T_ERR(pmc_cache_open(pm, 0, &c, &err), EIO, "in the metadata");
		T_ERR(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err), EIO, "in the metadata");
		pmc_pmem_close(pm);
		/* the volume table poisoned: the open read it (its check, the
		 * clean close's counters) before the list, and died of SIGBUS */
		T_TRUE(voff != off && voff >= PMC_SB_COPIES * PMC_SB_SLOT);
		T_OK(pmc_pmem_open(g_path, 0, &pm, &err));
		g_bad[0].offset = voff;
		poison_page(pm, voff, hole);
		T_ERR(pmc_cache_open(pm, 0, &c, &err), EIO, "in the metadata");
		T_ERR(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err), EIO, "in the metadata");
		pmc_pmem_close(pm);
		/* a superblock copy poisoned: not read either (the other copy
		 * is good, but the next commit would go to this one) */
		T_OK(pmc_pmem_open(g_path, 0, &pm, &err));
		g_bad[0].offset = PMC_SB_SLOT;
		poison_page(pm, PMC_SB_SLOT, hole);
		T_ERR(pmc_cache_open(pm, 0, &c, &err), EIO, "superblock copy 1");
		T_ERR(pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, &err), EIO, "superblock copy 1");
		pmc_pmem_close(pm);
		unlink(hole);
		printf("ok: a poisoned metadata line (descriptors after an unsafe shutdown, the "
		       "volume table, a superblock copy): refused, not read\n");
	}
	/* a 1.0 cache whose read-write open is refused (a bad range in the
	 * metadata; the checker after an unsafe shutdown finding a corrupt
	 * descriptor) is left as it was: its volume slots were converted to
	 * 1.1 first, and the 1.0 build that wrote it could no longer read them */
	for (int how = 0; how < 2; how++) {
		struct pmc_sb *sb;
		struct pmc_vol *vs, saved;
		unsigned slot = 0;
		uint32_t vol;
		uint64_t blk;

		unlink(g_path);
		g_nbad = 0;
		T_OK(pmc_pmem_open(g_path, 16u << 20, &pm, &err));
		T_OK(pmc_cache_format(pm, NULL, &err));
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		T_OK(pmc_cache_volume_add(c, "db", "/dev/x", 1 << 20, &vol, &err));
		memset(buf, 0x5a, BS);
		T_OK(pmc_cache_write(c, vol, 0, 1, buf, &err));
		T_OK(pmc_cache_lookup_pin(c, vol, 0, &blk, NULL));
		pmc_cache_unpin(c, blk);
		pmc_cache_close(c);
		/* made 1.0 (lib/FORMAT.md): the disk path in 128 bytes at 104,
		 * the slot's checksum over bytes 8..231; no ro_compat bits */
		sb = (struct pmc_sb *)pm->base;
		if (((struct pmc_sb *)(pm->base + PMC_SB_SLOT))->seq > sb->seq) {
			sb = (struct pmc_sb *)(pm->base + PMC_SB_SLOT);
			slot = 1;
		}
		vs = (struct pmc_vol *)(pm->base + sb->vol_off + vol * sizeof(*vs));
		memset((char *)vs + 104, 0, 128);
		strcpy((char *)vs + 104, "/dev/disk/by-path/pci-0000:3b:00.0-sas-exp0x500605b0000272bf-"
					 "phy12-lun-0-part1");
		*(uint64_t *)((char *)vs + 232) = crc32(0L, (const Bytef *)vs + 8, 224);
		sb->minor = 0;
		sb->ro_compat = 0;
		sb->csum = (uint32_t)crc32(0L, (const Bytef *)sb, offsetof(struct pmc_sb, csum));
		memcpy(pm->base + (1 - slot) * PMC_SB_SLOT, sb, sizeof(*sb));
		saved = *vs;
		if (how == 0) {
			g_bad[0].offset = sb->desc_off;
			g_nbad = 1;
		} else {
			/* its checksum fails; the open checks everything after
			 * an unsafe shutdown (the count moved) */
			((struct pmc_desc *)(pm->base + sb->desc_off))[blk].birth_ns ^= 1;
			g_usc++;
		}
		pmc_pmem_close(pm);
		T_OK(pmc_pmem_open(g_path, 0, &pm, &err));
		if (how == 0)
			T_ERR(pmc_cache_open(pm, 0, &c, &err), EIO, "in the metadata");
		else
			T_ERR(pmc_cache_open(pm, 0, &c, &err), EUCLEAN, "bad checksum");
		sb = (struct pmc_sb *)(pm->base + slot * PMC_SB_SLOT);
		vs = (struct pmc_vol *)(pm->base + sb->vol_off + vol * sizeof(*vs));
		T_EQ(sb->minor, 0);
		if (memcmp(vs, &saved, sizeof(saved)))
			T_FAIL("a refused open of a 1.0 cache changed its volume slot");
		pmc_pmem_close(pm);
		printf("ok: a refused open of a 1.0 cache writes nothing (%s)\n",
		       how ? "the checker after an unsafe shutdown" : "a bad range");
	}
	unlink(g_path);
	unlink(g_snap);
	free(buf);
	printf("PASS test_badblocks\n");
	return 0;
}
