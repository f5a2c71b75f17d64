/* check.c - the whole-metadata consistency checker (see check.h).
 * Used by the crash simulator after every recovery and by the admin CLI.
 * Locking: none; the caller guarantees exclusive use.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cache_internal.h"
#include "check.h"

static int check_desc(struct pmc_cache *c, uint64_t b, uint64_t blk, struct pmc_err *err)
{
	const struct pmc_desc *d = &c->descs[blk];
	uint64_t st = pmc_load64(&d->state);

	if (d->csum != pmc_desc_csum(d))
		return pmc_err_set(err, EUCLEAN, "descriptor %" PRIu64 " (bucket %" PRIu64
				   "): bad checksum", blk, b);
	if (st != PMC_BLK_CLEAN && st != PMC_BLK_DIRTY && st != PMC_BLK_LOST)
		return pmc_err_set(err, EUCLEAN, "descriptor %" PRIu64 ": linked in state %" PRIu64,
				   blk, st);
	if (d->reserved0)
		return pmc_err_set(err, EUCLEAN, "descriptor %" PRIu64 ": reserved bytes not zero",
				   blk);
	if (d->vol >= c->max_volumes)
		return pmc_err_set(err, EUCLEAN, "descriptor %" PRIu64 ": volume slot %u out of range",
				   blk, d->vol);
	if (pmc_index_bucket(c, d->vol, d->lba) != b)
		return pmc_err_set(err, EUCLEAN, "descriptor %" PRIu64 ": in bucket %" PRIu64
				   " but its key hashes elsewhere", blk, b);
	/* a live copy's block is within its volume (write-back would write
	 * it past the volume's end) */
	if (pmc_desc_live(c, d) && d->lba >= c->vols[d->vol].size_bytes / c->block_size)
		return pmc_err_set(err, EUCLEAN,
				   "descriptor %" PRIu64 ": block %" PRIu64
				   " past the end of volume %s (%" PRIu64 " blocks)",
				   blk, d->lba, c->vols[d->vol].name,
				   c->vols[d->vol].size_bytes / c->block_size);
	return 0;
}

/* per volume slot: the live blocks the index holds in each state */
struct vol_counts {
	uint64_t dirty, clean, lost;
};

static int check_chain(struct pmc_cache *c, uint64_t b, uint64_t *seen,
		       struct pmc_check_report *rep, struct vol_counts *vc, struct pmc_err *err)
{
	uint64_t v = pmc_load64(&c->buckets[b]), len = 0;
	int rc;

	while (v) {
		uint64_t blk = v - 1;
		const struct pmc_desc *d;

		if (v > c->nr_blocks)
			return pmc_err_set(err, EUCLEAN, "bucket %" PRIu64 ": chain points at block %"
					   PRIu64 " beyond %" PRIu64, b, blk, c->nr_blocks);
		if (seen[blk / 64] & (1ull << (blk % 64)))
			return pmc_err_set(err, EUCLEAN, "bucket %" PRIu64 ": block %" PRIu64
					   " is linked twice (loop or shared chain)", b, blk);
		seen[blk / 64] |= 1ull << (blk % 64);
		rc = check_desc(c, b, blk, err);
		if (rc)
			return rc;
		d = &c->descs[blk];
		rep->linked++;
		len++;
		if (pmc_desc_live(c, d)) {
			/* a live key appears once: look for a twin later in the chain */
			for (uint64_t w = pmc_load64(&d->next), n = 0; w && w <= c->nr_blocks &&
			     n < c->nr_blocks; w = pmc_load64(&c->descs[w - 1].next), n++) {
				const struct pmc_desc *e = &c->descs[w - 1];

				if (e->vol == d->vol && e->lba == d->lba && pmc_desc_live(c, e))
					return pmc_err_set(err, EUCLEAN,
							   "volume slot %u block %" PRIu64
							   ": cached twice (blocks %" PRIu64 " and %"
							   PRIu64 ")", d->vol, d->lba, blk, w - 1);
			}
			if (pmc_load64(&d->state) == PMC_BLK_DIRTY) {
				rep->live_dirty++;
				vc[d->vol].dirty++;
			} else if (pmc_load64(&d->state) == PMC_BLK_LOST) {
				rep->lost++;
				vc[d->vol].lost++;
			} else {
				rep->live_clean++;
				vc[d->vol].clean++;
			}
		} else {
			rep->stale++;
		}
		v = pmc_load64(&d->next);
	}
	if (len > rep->max_chain)
		rep->max_chain = len;
	return 0;
}

int pmc_cache_check(struct pmc_cache *c, struct pmc_check_report *rep, struct pmc_err *err)
{
	uint64_t *seen;
	struct vol_counts *vc;
	int rc = 0;

	memset(rep, 0, sizeof(*rep));
	seen = calloc((c->nr_blocks + 63) / 64, sizeof(*seen));
	vc = calloc(c->max_volumes, sizeof(*vc));
	if (!seen || !vc) {
		rc = pmc_err_set(err, ENOMEM, "check: out of memory");
		goto out;
	}
	for (uint64_t b = 0; b <= c->bucket_mask && rc == 0; b++)
		rc = check_chain(c, b, seen, rep, vc, err);
	if (rc)
		goto out;
	for (uint64_t blk = 0; blk < c->nr_blocks; blk++) {
		if (seen[blk / 64] & (1ull << (blk % 64)))
			continue;
		if (pmc_load64(&c->descs[blk].state) == PMC_BLK_FREE)
			rep->free++;
		else if (pmc_load64(&c->descs[blk].state) == PMC_BLK_BAD)
			rep->bad++;
		else
			rep->orphans++;
	}
	if (atomic_load(&c->counts_valid)) {
		for (uint32_t i = 0; i < c->max_volumes; i++) {
			struct pmc_volume_info vi;

			if (pmc_cache_volume_info(c, i, &vi))
				continue;
			/* too few lost, and its removal would serve the disk's
			 * older data where reads must fail; too many hold it for
			 * ever. Every volume is compared (counts_bad), the first
			 * disagreement named */
			if (vi.nr_dirty != vc[i].dirty || vi.nr_clean != vc[i].clean) {
				rep->counts_bad++;
				if (!rc)
					rc = pmc_err_set(err, EUCLEAN,
							 "volume %s: counters say %" PRIu64
							 " dirty %" PRIu64 " clean, the index has %"
							 PRIu64 " and %" PRIu64,
							 vi.name, vi.nr_dirty, vi.nr_clean,
							 vc[i].dirty, vc[i].clean);
			} else if (vi.nr_lost != vc[i].lost) {
				rep->counts_bad++;
				if (!rc)
					rc = pmc_err_set(err, EUCLEAN,
							 "volume %s: counters say %" PRIu64
							 " lost blocks, the index has %" PRIu64,
							 vi.name, vi.nr_lost, vc[i].lost);
			}
		}
	}
out:
	free(seen);
	free(vc);
	return rc;
}
