/* poison.c - SIGBUS-safe copies out of pmem and the quarantine of
 * poisoned cache blocks (see poison.h).
 *
 * The recovery point is thread-local: armed (a sigjmp_buf and the source
 * range) only for the duration of one copy. The handler runs with
 * SA_NODEFER so that the jump out of it leaves SIGBUS unblocked without a
 * signal-mask syscall per copy (sigsetjmp saves no mask).
 *
 * Quarantine changes a descriptor under its bucket's stripe lock, with the
 * same one-store steps as invalidation (FORMAT.md, "Quarantine").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

#include <inttypes.h>
#include <libpmem2.h>

#include "cache_internal.h"
#include "log.h"
#include "poison.h"

static struct sigaction old_bus;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc;

static __thread sigjmp_buf *volatile armed;
static __thread const char *armed_lo, *armed_hi;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr, lo = (uintptr_t)armed_lo;

	/* a machine check reports the start of the poisoned page (of
	 * 2^si_addr_lsb bytes), which may lie before the copy's first byte */
	if ((si->si_code == BUS_MCEERR_AR || si->si_code == BUS_MCEERR_AO) &&
	    si->si_addr_lsb > 0 && si->si_addr_lsb < 64)
		lo &= ~(((uintptr_t)1 << si->si_addr_lsb) - 1);
	if (armed && a >= lo && a < (uintptr_t)armed_hi) {
		sigjmp_buf *jb = armed;

		armed = NULL;
		siglongjmp(*jb, 1);
	}
	/* not ours: what SIGBUS did before */
	if ((old_bus.sa_flags & SA_SIGINFO) && old_bus.sa_sigaction) {
		old_bus.sa_sigaction(sig, si, uc);
		return;
	}
	if (old_bus.sa_handler != SIG_IGN && old_bus.sa_handler != SIG_DFL) {
		old_bus.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

static void init_once(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	init_rc = sigaction(SIGBUS, &sa, &old_bus) ? -errno : 0;
}

int pmc_poison_init(void)
{
	pthread_once(&once, init_once);
	return init_rc;
}

/* the copy of an armed window: a call the compiler cannot move out of it
 * (between the signal fences) */
static void copy_bytes(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

int pmc_poison_copy(void *dst, const void *src, size_t len)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0))
		return -EIO;
	armed_lo = src;
	armed_hi = (const char *)src + len;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	armed = &jb;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	copy_bytes(dst, src, len);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	armed = NULL;
	return 0;
}

int pmc_poison_probe(const void *src, size_t len)
{
	sigjmp_buf jb;
	const volatile char *p = src;
	char sink = 0;

	if (sigsetjmp(jb, 0))
		return -EIO;
	armed_lo = src;
	armed_hi = (const char *)src + len;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	armed = &jb;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* one load per 64-byte line: poison is per line */
	for (size_t i = 0; i < len; i += 64)
		sink ^= p[i];
	if (len)
		sink ^= p[len - 1];
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	armed = NULL;
	(void)sink;
	return 0;
}

int pmc_cache_quarantine(struct pmc_cache *c, uint32_t vol, uint64_t lba, uint64_t blk,
			 enum pmc_block_state *was)
{
	uint64_t b = pmc_index_bucket(c, vol, lba), cur, st, *link;
	uint32_t s = pmc_stripe_of(c, b);
	struct pmc_desc *d = &c->descs[blk];
	int rc;

	if (c->rdonly)
		return -EROFS;
	pthread_mutex_lock(&c->stripe[s]);
	rc = pmc_index_find_blk_locked(c, b, blk, &link);
	cur = rc == 0 && d->vol == vol && d->lba == lba && pmc_desc_live(c, d);
	if (!cur) {
		/* a newer write (or an invalidation) replaced the block after
		 * the caller pinned it: its data is not the volume's any more,
		 * but its media is bad. Unlinked (in no chain, FREE) and pinned
		 * by the caller, so nobody can take it: retired now, or the
		 * allocator would hand it out for new data */
		if (rc == -ENOENT && (pmc_load64(&d->state) & 0xff) == PMC_BLK_FREE &&
		    pmc_cache_pins(c, blk)) {
			pmc_pmem_store8(c->pm, &d->state, PMC_BLK_BAD);
			pmc_pmem_persist(c->pm, &d->state, sizeof(uint64_t));
		}
		pthread_mutex_unlock(&c->stripe[s]);
		return -ESTALE;
	}
	st = pmc_load64(&d->state) & 0xff;
	if (was)
		*was = (enum pmc_block_state)st;
	if (st == PMC_BLK_DIRTY) {
		/* crash point quarantine.lost: one store; the block stays the
		 * volume's copy, so the disk's older data is never served */
		pmc_pmem_store8(c->pm, &d->state, PMC_BLK_LOST);
		pmc_pmem_persist(c->pm, &d->state, sizeof(uint64_t));
		pmc_count_adj(c, s, vol, PMC_BLK_DIRTY, -1);
		pmc_count_adj(c, s, vol, PMC_BLK_LOST, +1);
	} else if (st == PMC_BLK_CLEAN) {
		/* crash point quarantine.unlink: as invalidation, then BAD */
		pmc_pmem_store8(c->pm, link, pmc_load64(&d->next));
		pmc_pmem_persist(c->pm, link, sizeof(*link));
		pmc_pmem_store8(c->pm, &d->state, PMC_BLK_BAD);
		pmc_pmem_persist(c->pm, &d->state, sizeof(uint64_t));
		pmc_count_adj(c, s, vol, PMC_BLK_CLEAN, -1);
		atomic_fetch_add(&c->fill_seq[s], 1);
	}
	pthread_mutex_unlock(&c->stripe[s]);
	return 0;
}

/* block blk lies in a bad range: quarantine what it holds */
static void bad_block(struct pmc_cache *c, uint64_t blk)
{
	struct pmc_desc *d = &c->descs[blk];
	enum pmc_block_state was = PMC_BLK_FREE;
	uint64_t st = pmc_load64(&d->state) & 0xff;

	if (st == PMC_BLK_BAD || st == PMC_BLK_LOST)
		return;
	/* a quarantine changes the counts of a clean close, which this open
	 * trusts: "not clean" first, so that a crash before the open.epoch
	 * commit leaves the next open counting the index (crash point
	 * open.quarantine) */
	if ((st == PMC_BLK_CLEAN || st == PMC_BLK_DIRTY) && c->sb.clean) {
		c->sb.clean = 0;
		pmc_sb_commit(c);
	}
	if ((st == PMC_BLK_CLEAN || st == PMC_BLK_DIRTY) && pmc_desc_live(c, d) &&
	    pmc_cache_quarantine(c, d->vol, d->lba, blk, &was) == 0) {
		if (was == PMC_BLK_DIRTY)
			pmc_log(LOG_ERR,
				"pmem %s: bad block in cache block %" PRIu64 ": volume %s block %"
				PRIu64 " (bytes %" PRIu64 "+%u): its dirty data is lost; reads of "
				"it fail with EIO until it is written again",
				c->pm->path, blk, c->vols[d->vol].name, d->lba,
				d->lba * c->block_size, c->block_size);
		return;
	}
	/* free, an orphan or stale: retire it (in no chain; an unlinked
	 * descriptor is the allocator's, and nothing runs yet) */
	if (st != PMC_BLK_FREE) {
		uint64_t b = pmc_index_bucket(c, d->vol < c->max_volumes ? d->vol : 0, d->lba), *link;

		if (d->vol < c->max_volumes && pmc_index_find_blk_locked(c, b, blk, &link) == 0) {
			pmc_pmem_store8(c->pm, link, pmc_load64(&d->next));
			pmc_pmem_persist(c->pm, link, sizeof(*link));
		}
	}
	pmc_pmem_store8(c->pm, &d->state, PMC_BLK_BAD);
	pmc_pmem_persist(c->pm, &d->state, sizeof(uint64_t));
}

/* the namespace's bad ranges: one below data_off (the metadata) refuses
 * (-EIO); the cache blocks of the others are quarantined */
static int scan(struct pmc_pmem *pm, uint64_t data_off, struct pmc_cache *c,
		struct pmc_err *err)
{
	struct pmem2_badblock_context *ctx = NULL;
	struct pmem2_badblock bb;
	uint64_t n = 0;
	int rc;

	if (!pm->src)
		return 0;
	/* a file on any file system lists its bad blocks (none, mostly): a
	 * failure here is the device's bad-block list that cannot be read */
	rc = pmem2_badblock_context_new(&ctx, pm->src);
	if (rc) {
		pmc_log(LOG_WARNING, "pmem %s: its bad blocks cannot be read (%s): not checked",
			pm->path, pmem2_errormsg());
		return 0;
	}
	while ((rc = pmem2_badblock_next(ctx, &bb)) == 0) {
		uint64_t first, end;

		if (bb.offset < data_off) {
			pmem2_badblock_context_delete(&ctx);
			return pmc_err_set(err, EIO,
					   "pmem %s: bad block at offset %zu (+%zu bytes) in the "
					   "metadata; the cache cannot be trusted",
					   pm->path, bb.offset, bb.length);
		}
		first = (bb.offset - data_off) / c->block_size;
		end = (bb.offset + bb.length - data_off + c->block_size - 1) / c->block_size;
		for (uint64_t blk = first; blk < end && blk < c->nr_blocks; blk++, n++)
			bad_block(c, blk);
	}
	if (rc != PMEM2_E_NO_BAD_BLOCK_FOUND)
		pmc_log(LOG_WARNING, "pmem %s: its bad-block list could not be read to its end "
			"(%s): the rest not checked",
			pm->path, pmem2_errormsg());
	pmem2_badblock_context_delete(&ctx);
	if (n)
		pmc_log(LOG_WARNING, "pmem %s: %" PRIu64 " cache blocks in bad ranges quarantined",
			pm->path, n);
	return 0;
}

int pmc_cache_badblocks(struct pmc_cache *c, struct pmc_err *err)
{
	return c->rdonly ? 0 : scan(c->pm, c->sb.data_off, c, err);
}

int pmc_pmem_first_bad(struct pmc_pmem *pm, uint64_t off, uint64_t len, uint64_t *at,
		       uint64_t *at_len)
{
	struct pmem2_badblock_context *ctx = NULL;
	struct pmem2_badblock bb;
	uint64_t lo = UINT64_MAX, lo_len = 0;

	if (!pm->src || pmem2_badblock_context_new(&ctx, pm->src))
		return 0; /* not listed: as scan() */
	while (pmem2_badblock_next(ctx, &bb) == 0)
		if (bb.offset < off + len && bb.offset + bb.length > off && bb.offset < lo) {
			lo = bb.offset;
			lo_len = bb.length;
		}
	pmem2_badblock_context_delete(&ctx);
	if (at)
		*at = lo;
	if (at_len)
		*at_len = lo_len;
	return lo != UINT64_MAX;
}

int pmc_pmem_meta_badblocks(struct pmc_pmem *pm, uint64_t data_off, struct pmc_err *err)
{
	uint64_t at, len;

	if (!pmc_pmem_first_bad(pm, 0, data_off, &at, &len))
		return 0;
	return pmc_err_set(err, EIO,
			   "pmem %s: bad block at offset %" PRIu64 " (+%" PRIu64 " bytes) in the "
			   "metadata; the cache cannot be trusted",
			   pm->path, at, len);
}
