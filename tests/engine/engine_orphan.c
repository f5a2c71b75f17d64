/* engine_orphan.c - a DIRTY orphan left by a crash is reclaimed.
 *
 * A dirty block overwritten is unlinked durably and stored FREE without a
 * flush (lib/FORMAT.md, publish.free_old): after a power cut the old copy
 * may read DIRTY while in no chain, an orphan nobody reads. Such a block
 * must come back to the allocator. The dirty map's rebuild at open marked
 * it (it looked at the state, not at the chains), write-back never
 * forgot the mark (it checks the state and the volume), and the
 * allocator's hand passes marked blocks by: the block was lost to the
 * cache for good, again after every open with dirty data.
 *
 * Here: two writes of block 0 (the first copy becomes the orphan, its
 * FREE store undone by hand as a lost store would leave it), a crash, an
 * open, write-back of everything; then the allocator must hand out every
 * block of the cache, the orphan among them, and the map must not mark it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_internal.h"
#include "etest.h"
#include "t.h"

static struct et g_t;

static int wr(struct pmc_queue *q, struct et_vol *v, uint64_t lba, uint64_t ver)
{
	char *buf = et_alloc(BS);
	int rc;

	et_fill(buf, v->tag, lba, ver);
	rc = et_io(g_t.e, q, NULL, PMC_REQ_WRITE, v->vol, lba, 1, buf, 0);
	free(buf);
	return rc;
}

int main(void)
{
	struct et_vol v = {.name = "orphan", .tag = 1, .nblocks = 256};
	struct pmc_queue *q;
	enum pmc_block_state st;
	uint64_t x, y, blk, n = 0, from, *held;
	struct pmc_err err; /* T_OK's */
	int got_x = 0;

	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	g_t.pmem_size = et_pmem_size(64);
	pmc_wb_conf_default(&g_t.wb);
	et_open(&g_t, 1);
	et_path(v.path, sizeof(v.path), "disk");
	et_disk_create(v.path, v.tag, v.nblocks);
	et_attach(&g_t, &v, NULL, NULL, NULL);
	q = et_queue(g_t.e, 8);

	T_EQ(wr(q, &v, 0, 1), 0);
	T_OK(pmc_cache_lookup_pin(g_t.c, v.vol, 0, &x, &st));
	pmc_cache_unpin(g_t.c, x);
	T_EQ(st, PMC_BLK_DIRTY);
	T_EQ(wr(q, &v, 0, 2), 0); /* x unlinked, stored FREE unflushed */
	T_EQ(wr(q, &v, 1, 1), 0); /* dirty data at the crash: the map is rebuilt */
	T_OK(pmc_cache_lookup_pin(g_t.c, v.vol, 0, &y, &st));
	pmc_cache_unpin(g_t.c, y);
	T_TRUE(x != y);
	pmc_queue_destroy(q);
	/* the power cut lost x's FREE store: DIRTY, in no chain */
	g_t.c->descs[x].state = PMC_BLK_DIRTY;
	et_close(&g_t, 1);

	et_open(&g_t, 0);
	et_attach(&g_t, &v, NULL, NULL, NULL);
	q = et_queue(g_t.e, 8);
	et_flush_all(&g_t, q, NULL); /* write-back runs, the rebuild completes */
	T_TRUE(!pmc_engine_wb_rebuilding(g_t.e));
	for (from = 0; pmc_cache_dirty_next(g_t.c, from, &blk) == 0; from = blk + 1)
		if (blk == x)
			T_FAIL("the orphan (block %llu) is marked dirty after a flush of "
			       "everything",
			       (unsigned long long)x);
	/* every block of the cache, all clean now, the orphan too */
	held = calloc(g_t.nr_blocks, sizeof(*held));
	T_TRUE(held != NULL);
	while (n < g_t.nr_blocks && pmc_cache_alloc(g_t.c, PMC_ALLOC_EVICT, &blk) == 0) {
		got_x |= blk == x;
		held[n++] = blk;
	}
	if (n != g_t.nr_blocks || !got_x)
		T_FAIL("the allocator gave %llu of %llu blocks, the orphan (block %llu) %s",
		       (unsigned long long)n, (unsigned long long)g_t.nr_blocks,
		       (unsigned long long)x, got_x ? "among them" : "not among them");
	for (uint64_t i = 0; i < n; i++)
		pmc_cache_unpin(g_t.c, held[i]);
	free(held);
	printf("ok: the orphan is reclaimed (%llu of %llu blocks allocated)\n",
	       (unsigned long long)n, (unsigned long long)g_t.nr_blocks);
	pmc_queue_destroy(q);
	et_close(&g_t, 0);
	printf("PASS engine_orphan\n");
	return 0;
}
