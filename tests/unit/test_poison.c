/* test_poison.c (ctest pmem_poison) - pmem media errors survived.
 *
 * The pmem is a plain file; cutting its tail off with ftruncate() while it
 * is mapped makes every load from the cut pages raise SIGBUS, as a poisoned
 * line of a devdax namespace does. The cache is filled so that every block
 * is in use, some clean and some dirty; then the last blocks are cut off.
 * Checked: reads of the blocks whose data was cut fail with EIO and the
 * engine keeps serving every other block with its data; a dirty block's
 * loss is the volume's sticky error and stays: it reads EIO again, also
 * after a restart, never the disk's older data; write-back of a cut dirty
 * block (io_uring cannot read its source) quarantines it instead of
 * failing the disk; a clean cut block is dropped and the next read gets
 * the disk's data; a whole-block write heals a lost block; no cut block is
 * ever allocated again; the checker counts lost and retired blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cache_internal.h"
#include "check.h"
#include "engine.h"
#include "poison.h"
#include "state.h"
#include "t.h"
#include "tcache.h"

#define BS 4096
#define NCUT 12u /* blocks cut off the end of the data area */

static struct pmc_err err;
static int ndone, last;

static void cb(struct pmc_req *r, int res)
{
	ndone++;
	last = res;
}

static int run(struct pmc_queue *q, enum pmc_req_op op, uint32_t vol, uint64_t lba, void *buf)
{
	struct pmc_req r = {.op = op, .vol = vol, .off = lba * BS, .len = BS, .buf = buf, .cb = cb};
	int before = ndone;

	T_OK(pmc_queue_submit(q, &r, &err));
	while (ndone == before)
		pmc_queue_poll(q, 1, 0);
	return last;
}

static void fill(char *b, uint64_t lba, unsigned ver)
{
	for (unsigned i = 0; i < BS / 8; i++)
		((uint64_t *)b)[i] = lba << 16 | ver << 8 | i;
}

/*
 * A block found poisoned after a newer write replaced it: a reader pinned
 * it, a whole-block write published a new copy (the old one unlinked,
 * FREE), then the reader's copy faulted. Quarantine reports it stale (no
 * data lost) and retires it all the same: the allocator never hands it
 * out again (it did, and new acknowledged data went onto bad media).
 */
static void stale_poison(void)
{
	char path[256], *buf = aligned_alloc(BS, BS);
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct pmc_cache_info ci;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	enum pmc_block_state st;
	uint64_t x, y, b;
	uint32_t v;

	snprintf(path, sizeof(path), "%s/pmc-stale-poison-%d.pmem", tmp, getpid());
	t_cache_new(path, 64, &pm, &c, &v);
	pmc_cache_get_info(c, &ci);
	memset(buf, 1, BS);
	T_OK(pmc_cache_write(c, v, 0, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, v, 0, &x, &st)); /* the reader */
	memset(buf, 2, BS);
	T_OK(pmc_cache_write(c, v, 0, 1, buf, &err)); /* the newer write */
	T_OK(pmc_cache_lookup_pin(c, v, 0, &y, &st));
	pmc_cache_unpin(c, y);
	T_TRUE(x != y);
	T_EQ(pmc_cache_quarantine(c, v, 0, x, NULL), -ESTALE);
	T_EQ(pmc_load64(&c->descs[x].state) & 0xff, PMC_BLK_BAD);
	pmc_cache_unpin(c, x);
	/* write more blocks than the cache has: every one is allocated (the
	 * clean ones evicted), never x */
	for (uint64_t lba = 1; lba < 2 * ci.nr_blocks; lba++) {
		memset(buf, 3, BS);
		if (pmc_cache_write(c, v, lba, 1, buf, &err))
			break;
		T_OK(pmc_cache_lookup_pin(c, v, lba, &b, &st));
		pmc_cache_unpin(c, b);
		if (b == x)
			T_FAIL("the retired block %" PRIu64 " holds volume block %" PRIu64, x, lba);
	}
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	unlink(path);
	free(buf);
	printf("ok: a block found poisoned after a newer write replaced it is retired\n");
}

/*
 * A LOST block replaced by a write is unlinked durably, then stored BAD
 * with no drain (index.c retire_old): a power cut between leaves it LOST
 * in no chain. The allocator must retire it, not reclaim it as an
 * ordinary orphan and put new acknowledged data on bad media.
 */
static void lost_orphan(void)
{
	char path[256], *buf = aligned_alloc(BS, BS);
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	enum pmc_block_state st, was;
	uint64_t x, blk, n = 0;
	uint32_t v;

	snprintf(path, sizeof(path), "%s/pmc-lost-orphan-%d.pmem", tmp, getpid());
	t_cache_new(path, 64, &pm, &c, &v);
	memset(buf, 7, BS);
	T_OK(pmc_cache_write(c, v, 3, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, v, 3, &x, &st));
	pmc_cache_unpin(c, x);
	T_OK(pmc_cache_quarantine(c, v, 3, x, &was)); /* its media failed: LOST */
	T_EQ(was, PMC_BLK_DIRTY);
	T_OK(pmc_cache_write(c, v, 3, 1, buf, &err)); /* replaced: unlinked, BAD */
	T_EQ(pmc_load64(&c->descs[x].state) & 0xff, PMC_BLK_BAD);
	c->descs[x].state = PMC_BLK_LOST; /* the crash lost the BAD store */
	pmc_cache_abandon(c);
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	while (pmc_cache_alloc(c, PMC_ALLOC_EVICT, &blk) == 0) {
		n++;
		if (blk == x)
			T_FAIL("the LOST orphan (block %" PRIu64 ", bad media) was allocated", x);
	}
	T_EQ(pmc_load64(&c->descs[x].state) & 0xff, PMC_BLK_BAD);
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	unlink(path);
	free(buf);
	printf("ok: a LOST orphan is retired, not allocated (%" PRIu64 " others were)\n", n);
}

/*
 * LOST blocks are counted per volume, across a clean restart (the slot's
 * clean_nr_lost) and a crash (the recount): a volume holding one cannot be
 * removed (its reads would then return the disk's older data) until a
 * write replaces it.
 */
static void lost_counts(void)
{
	char path[256], *buf = aligned_alloc(BS, BS);
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct pmc_volume_info vi;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	enum pmc_block_state st;
	uint64_t x;
	uint32_t v;

	snprintf(path, sizeof(path), "%s/pmc-lost-counts-%d.pmem", tmp, getpid());
	t_cache_new(path, 64, &pm, &c, &v);
	memset(buf, 7, BS);
	T_OK(pmc_cache_write(c, v, 3, 1, buf, &err));
	T_OK(pmc_cache_write(c, v, 4, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, v, 3, &x, &st));
	pmc_cache_unpin(c, x);
	T_OK(pmc_cache_quarantine(c, v, 3, x, NULL));
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_lost, 1);
	T_EQ(vi.nr_dirty, 1);
	T_OK(pmc_cache_lookup_pin(c, v, 4, &x, &st));
	pmc_cache_unpin(c, x);
	T_OK(pmc_cache_mark_clean(c, v, 4, x));
	T_ERR(pmc_cache_volume_remove(c, v, &err), EBUSY, "1 blocks lost to pmem media errors");
	pmc_cache_close(c);
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.counts_valid, 1);
	T_EQ(vi.nr_lost, 1);
	{
		/* the count kept at a clean close, damaged: the checker says so
		 * (it trusted it: a volume with a LOST block could be removed) */
		struct pmc_check_report rep;
		uint32_t *kept = &c->vols[v].clean_nr_lost;

		T_OK(pmc_cache_check(c, &rep, &err));
		pmc_cache_close(c);
		*kept = 0;
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		T_ERR(pmc_cache_check(c, &rep, &err), EUCLEAN,
		      "counters say 0 lost blocks, the index has 1");
	}
	pmc_cache_abandon(c);
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_recount(c);
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_lost, 1);
	T_ERR(pmc_cache_volume_remove(c, v, &err), EBUSY, "lost to pmem media errors");
	T_OK(pmc_cache_write(c, v, 3, 1, buf, &err)); /* replaced */
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.nr_lost, 0);
	T_OK(pmc_cache_lookup_pin(c, v, 3, &x, &st));
	pmc_cache_unpin(c, x);
	T_OK(pmc_cache_mark_clean(c, v, 3, x));
	T_OK(pmc_cache_volume_remove(c, v, &err));
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	unlink(path);
	free(buf);
	printf("ok: LOST blocks counted across a clean restart and a crash; removal refused "
	       "until replaced\n");
}

/*
 * The LOST counts a clean close keeps are trusted only if that close wrote
 * lost_epoch: a build that knew both as reserved bytes kept them as they
 * were, so after its session a count could be wrong either way (here: one
 * LOST block it replaced still counted, so the volume could never be
 * removed; the other way round, removed with a LOST block in it).
 */
static void lost_epoch(void)
{
	char path[256], *buf = aligned_alloc(BS, BS);
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct pmc_volume_info vi;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_vol *vols;
	struct pmc_sb *sb[PMC_SB_COPIES];
	enum pmc_block_state st;
	uint32_t v, kept_epoch;
	unsigned n;
	uint64_t x;

	snprintf(path, sizeof(path), "%s/pmc-lost-epoch-%d.pmem", tmp, getpid());
	t_cache_new(path, 64, &pm, &c, &v);
	memset(buf, 7, BS);
	T_OK(pmc_cache_write(c, v, 3, 1, buf, &err));
	T_OK(pmc_cache_lookup_pin(c, v, 3, &x, &st));
	pmc_cache_unpin(c, x);
	T_OK(pmc_cache_quarantine(c, v, 3, x, NULL));
	pmc_cache_close(c);
	/* the older build's session: a new epoch, the LOST block replaced */
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_TRUE(vi.counts_valid && vi.nr_lost == 1);
	kept_epoch = c->sb.lost_epoch;
	vols = c->vols;
	T_OK(pmc_cache_write(c, v, 3, 1, buf, &err));
	pmc_cache_close(c);
	/* ... whose close left clean_nr_lost and lost_epoch as they were */
	vols[v].clean_nr_lost = 1;
	pmc_pmem_persist(pm, &vols[v], sizeof(vols[v]));
	for (unsigned i = 0; i < PMC_SB_COPIES; i++)
		sb[i] = (struct pmc_sb *)(pm->base + (uint64_t)i * PMC_SB_SLOT);
	n = sb[0]->seq > sb[1]->seq ? 0 : 1;
	T_TRUE(sb[n]->lost_epoch != kept_epoch);
	sb[n]->lost_epoch = kept_epoch;
	sb[n]->csum = pmc_sb_csum(sb[n]);
	pmc_pmem_persist(pm, sb[n], sizeof(*sb[n]));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_EQ(vi.counts_valid, 0);
	pmc_cache_recount(c);
	T_OK(pmc_cache_volume_info(c, v, &vi));
	T_TRUE(vi.counts_valid && vi.nr_lost == 0 && vi.nr_dirty == 1);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	unlink(path);
	free(buf);
	printf("ok: LOST counts kept by an older build's close are recounted\n");
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char pmem[256], disk[256], statef[272];
	struct pmc_state *stf;
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_engine *e;
	struct pmc_queue *q;
	struct pmc_disk *d;
	struct pmc_cache_info ci;
	struct pmc_check_report rep;
	struct pmc_vol_stats vs;
	uint64_t n, cut, size, *blk_of;
	uint8_t *state_of, *lost;
	uint32_t vol;
	unsigned nclean = 0, ndirty = 0, nread_dirty = 0;
	char *buf = aligned_alloc(BS, BS), *want = aligned_alloc(BS, BS);
	int fd;

	snprintf(pmem, sizeof(pmem), "%s/pmc-poison-%d.pmem", tmp, getpid());
	snprintf(disk, sizeof(disk), "%s/pmc-poison-%d.disk", tmp, getpid());
	snprintf(statef, sizeof(statef), "%s/pmc-poison-%d.state", tmp, getpid());
	unlink(pmem);
	size = (2u << 20) + 256 * BS;
	T_OK(pmc_pmem_open(pmem, size, &pm, &err));
	T_OK(pmc_cache_format(pm, NULL, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	pmc_cache_get_info(c, &ci);
	n = ci.nr_blocks;
	T_TRUE(n > 4 * NCUT);
	fd = open(disk, O_CREAT | O_TRUNC | O_RDWR, 0600);
	T_TRUE(fd >= 0 && ftruncate(fd, (off_t)(4 * n * BS)) == 0);
	for (uint64_t lba = 0; lba < n; lba++) {
		fill(buf, lba, 0);
		T_EQ(pwrite(fd, buf, BS, (off_t)(lba * BS)), BS);
	}
	close(fd);
	T_OK(pmc_engine_create(c, NULL, &e, &err));
	unlink(statef);
	T_OK(pmc_state_open(statef, &stf, &err));
	pmc_engine_set_state(e, stf);
	T_OK(pmc_disk_open(disk, 0, &d, &err));
	T_OK(pmc_engine_attach(e, "v", d, NULL, &vol, &err));
	T_OK(pmc_queue_create(e, 4, &q, &err));

	/* every block in use: the first n - 8 written and written back
	 * (clean), the last 8 dirty */
	for (uint64_t lba = 0; lba < n; lba++) {
		if (lba == n - 8)
			T_OK(pmc_engine_flush_all(e, q, UINT32_MAX, NULL, NULL, &err));
		fill(buf, lba, 1);
		T_EQ(run(q, PMC_REQ_WRITE, vol, lba, buf), 0);
	}
	blk_of = calloc(n, sizeof(*blk_of));
	state_of = calloc(n, 1);
	lost = calloc(n, 1);
	cut = n - NCUT;
	for (uint64_t lba = 0; lba < n; lba++) {
		enum pmc_block_state st;

		T_OK(pmc_cache_lookup_pin(c, vol, lba, &blk_of[lba], &st));
		pmc_cache_unpin(c, blk_of[lba]);
		state_of[lba] = (uint8_t)st;
		if (blk_of[lba] >= cut) {
			nclean += st == PMC_BLK_CLEAN;
			ndirty += st == PMC_BLK_DIRTY;
		}
	}
	printf("%" PRIu64 " blocks; the last %u cut off: %u clean, %u dirty\n", n, NCUT, nclean,
	       ndirty);
	T_TRUE(nclean > 0 && ndirty > 1 && nclean + ndirty == NCUT);

	/* the media error: the data area's last NCUT blocks vanish */
	T_EQ(truncate(pmem, (off_t)(ci.data_off + cut * BS)), 0);

	/* half the cut dirty blocks are read: EIO, quarantined as LOST */
	for (uint64_t lba = 0; lba < n; lba++) {
		int rc;

		if (blk_of[lba] < cut || state_of[lba] != PMC_BLK_DIRTY || nread_dirty >= ndirty / 2)
			continue;
		rc = run(q, PMC_REQ_READ, vol, lba, buf);
		T_EQ(rc, -EIO);
		lost[lba] = 1;
		nread_dirty++;
	}
	T_EQ(pmc_engine_volume_error(e, vol), EIO);
	printf("ok: %u poisoned dirty blocks read: EIO, the volume's error is EIO\n", nread_dirty);
	/* the other half: write-back cannot read them, quarantines them and
	 * finishes; the disk keeps its older data, no disk error is recorded */
	/* a LOST block keeps the volume's error: no disk holds its data */
	T_EQ(pmc_engine_clear_error(e, vol), EIO);
	T_EQ(pmc_engine_volume_error(e, vol), EIO);
	T_OK(pmc_engine_flush_all(e, q, UINT32_MAX, NULL, NULL, &err));
	T_EQ(pmc_engine_volume_error(e, vol), EIO); /* the loss, not a disk failure */
	T_OK(pmc_engine_stats(e, vol, &vs));
	T_EQ(vs.wb_errors, 0);
	T_EQ(vs.lost_blocks, ndirty);
	for (uint64_t lba = 0; lba < n; lba++) {
		if (blk_of[lba] >= cut && state_of[lba] == PMC_BLK_DIRTY && !lost[lba]) {
			lost[lba] = 1;
			fd = open(disk, O_RDONLY);
			T_EQ(pread(fd, buf, BS, (off_t)(lba * BS)), BS);
			close(fd);
			fill(want, lba, 0);
			T_TRUE(!memcmp(buf, want, BS)); /* nothing was written from a cut block */
		}
	}
	printf("ok: write-back quarantined the other poisoned dirty blocks\n");
	/* nothing dirty left, but LOST blocks stand for acknowledged writes
	 * the disk does not have: the state file keeps the volume dirty (a
	 * start without the pmem would serve the disk's older data there),
	 * and a remove is refused */
	T_EQ(pmc_state_get(stf, "v"), PMC_STATE_DIRTY);
	T_ERR(pmc_engine_detach(e, vol, 1, &err), EBUSY, "lost to pmem media errors");
	printf("ok: LOST blocks keep the volume dirty in the state file and refuse its removal\n");

	/* every block: lost ones EIO (again), cut clean ones EIO once, then the
	 * disk's data; all others their data */
	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t lba = 0; lba < n; lba++) {
			int rc = run(q, PMC_REQ_READ, vol, lba, buf);

			if (lost[lba]) {
				T_EQ(rc, -EIO);
				continue;
			}
			if (blk_of[lba] >= cut && pass == 0) {
				T_EQ(rc, -EIO);
				continue;
			}
			T_EQ(rc, 0);
			fill(want, lba, 1);
			if (memcmp(buf, want, BS))
				T_FAIL("pass %d: block %" PRIu64 " (cache block %" PRIu64
				       ") has wrong data", pass, lba, blk_of[lba]);
		}
	}
	printf("ok: lost blocks read EIO, cut clean blocks dropped, every other block served\n");

	/* a whole-block write heals a lost block; nothing lands in a cut block
	 * (a store there would kill the test with SIGBUS) */
	for (uint64_t lba = 0; lba < n; lba++) {
		if (!lost[lba])
			continue;
		fill(buf, lba, 2);
		T_EQ(run(q, PMC_REQ_WRITE, vol, lba, buf), 0);
		T_EQ(run(q, PMC_REQ_READ, vol, lba, buf), 0);
		fill(want, lba, 2);
		T_TRUE(!memcmp(buf, want, BS));
		lost[lba] = 0;
		break;
	}
	for (uint64_t lba = 0; lba < n; lba++) {
		fill(buf, lba, 3);
		if (lost[lba])
			continue;
		T_EQ(run(q, PMC_REQ_WRITE, vol, lba, buf), 0);
	}
	printf("ok: a rewrite heals a lost block; %" PRIu64 " more writes never touched a cut block\n",
	       n);
	T_OK(pmc_cache_check(c, &rep, &err));
	T_EQ(rep.lost + rep.bad, NCUT);
	T_EQ(rep.lost, ndirty - 1);
	printf("ok: check: %" PRIu64 " lost, %" PRIu64 " retired\n", rep.lost, rep.bad);

	/* restart over the repaired file: the loss is remembered */
	pmc_queue_destroy(q);
	pmc_engine_destroy(e);
	pmc_state_close(stf);
	unlink(statef);
	strcat(statef, ".lock");
	unlink(statef);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	T_EQ(truncate(pmem, (off_t)size), 0);
	T_OK(pmc_pmem_open(pmem, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_OK(pmc_engine_create(c, NULL, &e, &err));
	T_OK(pmc_disk_open(disk, 0, &d, &err));
	T_OK(pmc_engine_attach(e, "v", d, NULL, &vol, &err));
	/* the new process knows the loss before any read of it: the
	 * volume's error and its count, which a clear keeps */
	T_EQ(pmc_engine_volume_error(e, vol), EIO);
	T_OK(pmc_engine_stats(e, vol, &vs));
	T_EQ(vs.lost_blocks, ndirty - 1);
	T_EQ(pmc_engine_clear_error(e, vol), EIO);
	T_OK(pmc_queue_create(e, 4, &q, &err));
	for (uint64_t lba = 0; lba < n; lba++)
		if (lost[lba])
			T_EQ(run(q, PMC_REQ_READ, vol, lba, buf), -EIO);
	T_EQ(pmc_engine_volume_error(e, vol), EIO);
	/* every lost block written again: nothing lost, the error clears */
	for (uint64_t lba = 0; lba < n; lba++) {
		if (!lost[lba])
			continue;
		fill(buf, lba, 4);
		T_EQ(run(q, PMC_REQ_WRITE, vol, lba, buf), 0);
	}
	T_OK(pmc_engine_stats(e, vol, &vs));
	T_EQ(vs.lost_blocks, 0);
	T_EQ(pmc_engine_volume_error(e, vol), EIO);
	T_EQ(pmc_engine_clear_error(e, vol), 0);
	T_EQ(pmc_engine_volume_error(e, vol), 0);
	pmc_queue_destroy(q);
	pmc_engine_destroy(e);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	printf("ok: after a restart the lost blocks still read EIO\n");
	unlink(pmem);
	unlink(disk);
	free(blk_of);
	free(state_of);
	free(lost);
	free(buf);
	free(want);
	stale_poison();
	lost_orphan();
	lost_counts();
	lost_epoch();
	printf("PASS pmem_poison\n");
	return 0;
}
