/* engine_placeholder.c - a known volume served on a placeholder disk
 * (lib/placeholder.h) while its real disk cannot be reached, then the real
 * disk swapped in.
 *
 * A volume on a disk file gets clean blocks (written back) and dirty ones
 * (write-back never runs), and the cache is closed. Reopened, the volume is
 * attached on a placeholder: its size is the recorded one, its identity
 * passes the attach's check, its sync fails; hits (clean and dirty) are
 * served, a read miss fails with the placeholder's errno, writes are
 * absorbed, write-back and flush_all fail and set the sticky error, the
 * dirty blocks stay; with nospace=around, once the cache is full of dirty
 * data a write fails instead of being absorbed. Swaps refused: another
 * file (both identities named), a disk smaller than the volume; nothing
 * changes. Then the real disk file is swapped in: reads of the disk work,
 * flush_all drains every dirty block, and the disk holds every
 * acknowledged version. A new volume name is refused a placeholder.
 * Usage: engine_placeholder [--seed S] (the test is not random; the seed
 * only names the files' contents)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diskid.h"
#include "etest.h"
#include "placeholder.h"
#include "t.h"

#define CACHE_BLOCKS 256u
#define VOL_BLOCKS 1024u
#define FILL_MAX 400u /* single-block writes tried to fill the cache */

static struct pmc_err err;
static struct et g_t;
static struct et_vol g_v;
static struct pmc_queue *g_q;

static int write_ver(uint64_t lba, uint64_t n, uint64_t ver)
{
	char *buf = et_alloc(n * BS);
	int rc;

	for (uint64_t i = 0; i < n; i++)
		et_fill(buf + i * BS, g_v.tag, lba + i, ver);
	rc = et_io(g_t.e, g_q, NULL, PMC_REQ_WRITE, g_v.vol, lba, n, buf, 0);
	free(buf);
	return rc;
}

/* read lba..+n through the engine: the request's result; each block must
 * then be version ver */
static int read_ver(uint64_t lba, uint64_t n, uint64_t ver, const char *when)
{
	char *buf = et_alloc(n * BS);
	int rc = et_io(g_t.e, g_q, NULL, PMC_REQ_READ, g_v.vol, lba, n, buf, 0);

	for (uint64_t i = 0; rc == 0 && i < n; i++) {
		uint64_t got = et_version(buf + i * BS, g_v.tag, lba + i);
		char g[64];

		if (got != ver)
			T_FAIL("%s: block %" PRIu64 " reads as %s, expected version %" PRIu64, when,
			       lba + i,
			       et_describe(buf + i * BS, g_v.tag, lba + i, ver, g, sizeof(g)), ver);
	}
	free(buf);
	return rc;
}

static void expect_disk(uint64_t lba, uint64_t n, uint64_t ver, const char *when)
{
	char *buf = et_alloc(BS);

	for (uint64_t i = 0; i < n; i++) {
		char g[64];

		et_disk_read(g_v.path, lba + i, buf);
		if (et_version(buf, g_v.tag, lba + i) != ver)
			T_FAIL("%s: block %" PRIu64 " on the disk is %s, expected version %" PRIu64,
			       when, lba + i, et_describe(buf, g_v.tag, lba + i, ver, g, sizeof(g)),
			       ver);
	}
	free(buf);
}

static int open_direct(const char *path)
{
	int fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);

	if (fd < 0)
		T_FAIL("open %s: %s", path, strerror(errno));
	return fd;
}

int main(int argc, char **argv)
{
	struct pmc_volume_conf vc = {.mode = PMC_MODE_WRITE_BACK, .nospace = PMC_NOSPACE_AROUND};
	char other[256], small[256];
	struct pmc_volume_info vi;
	struct pmc_vol_stats s;
	struct pmc_disk *ph, *none;
	uint64_t seed = et_seed_arg(argc, argv, NULL), filled = 0;
	int rc, fd, fill_rc = 0;

	printf("seed: %" PRIu64 "\n", seed);
	memset(&g_t, 0, sizeof(g_t));
	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	unlink(g_t.pmem_path);
	g_t.pmem_size = et_pmem_size(CACHE_BLOCKS);
	pmc_wb_conf_default(&g_t.wb);
	g_t.wb.high_pct = 0; /* write back whatever is dirty, at the first step */
	g_t.wb.low_pct = 0;
	g_t.wb.max_age_ms = 0;
	g_t.wb.retry_ms = 20;
	g_t.wb.idle_ms = 1;
	et_open(&g_t, 1);
	snprintf(g_v.name, sizeof(g_v.name), "net");
	et_path(g_v.path, sizeof(g_v.path), "disk");
	g_v.tag = 1 + (uint32_t)(seed % 1000);
	g_v.nblocks = VOL_BLOCKS;
	et_disk_create(g_v.path, g_v.tag, g_v.nblocks);
	et_attach(&g_t, &g_v, &vc, NULL, NULL);
	g_q = et_queue(g_t.e, 32);

	/* blocks 0..31 clean in the cache (version 1 on the disk), 100..131
	 * dirty (version 2, only in the pmem) */
	T_EQ(write_ver(0, 32, 1), 0);
	et_flush_all(&g_t, g_q, NULL);
	T_EQ(write_ver(100, 32, 2), 0);
	et_stats(g_t.e, g_v.vol, &s);
	T_EQ(s.dirty_blocks, 32);
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	expect_disk(100, 32, 0, "dirty data not written back");

	/* --- the disk cannot be reached: the placeholder --- */
	et_open(&g_t, 0);
	T_ERR(pmc_placeholder_open(g_t.c, "new-vol", "nqn.x:ns1", ENOTCONN, &none, &err), ENOENT,
	      "volume new-vol: nqn.x:ns1 cannot be reached and the cache holds no volume");
	T_OK(pmc_placeholder_open(g_t.c, g_v.name, "nqn.x:ns1", ENOTCONN, &ph, &err));
	T_TRUE(pmc_placeholder_is(ph) && !pmc_placeholder_swapped(ph));
	T_EQ(ph->size, (uint64_t)VOL_BLOCKS * BS);
	T_EQ(pmc_disk_sync(ph), -ENOTCONN);
	{
		uint32_t slot;

		T_EQ(pmc_cache_volume_find(g_t.c, g_v.name, &slot), 0);
		T_EQ(pmc_cache_volume_info(g_t.c, slot, &vi), 0);
		if (strcmp(vi.disk_id.text, pmc_placeholder_id(ph)))
			T_FAIL("placeholder identity %s, the slot recorded %s",
			       pmc_placeholder_id(ph), vi.disk_id.text);
	}
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_attach(g_t.e, g_v.name, ph, &vc, &g_v.vol, &err);
	if (rc) {
		pmc_disk_close(ph);
		T_FAIL("attach on the placeholder: %d (%s)", rc, err.msg);
	}
	T_EQ(pmc_engine_volume_size(g_t.e, g_v.vol), (uint64_t)VOL_BLOCKS * BS);
	g_q = et_queue(g_t.e, 32);
	printf("ok: attached on a placeholder of %" PRIu64 " bytes standing for %s\n", ph->size,
	       pmc_placeholder_id(ph));

	T_EQ(read_ver(100, 32, 2, "dirty hits"), 0);
	T_EQ(read_ver(0, 32, 1, "clean hits"), 0);
	rc = read_ver(900, 1, 0, "read miss");
	if (rc >= 0)
		T_FAIL("a read miss on the placeholder returned %d, expected an error", rc);
	printf("ok: hits served, a read miss fails with %d\n", rc);
	T_EQ(write_ver(200, 16, 3), 0);
	T_EQ(read_ver(200, 16, 3, "absorbed write"), 0);
	/* the last stop was clean and synced the disk, and what was
	 * acknowledged since is in the pmem: a FLUSH owes the disk nothing (it
	 * used to sync first, which the placeholder fails: every FLUSH failed,
	 * and a mounted file system with it) */
	pmc_engine_clear_error(g_t.e, g_v.vol); /* the read miss's */
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0), 0);
	T_EQ(pmc_engine_volume_error(g_t.e, g_v.vol), 0); /* no sync tried */
	printf("ok: a FLUSH after a clean stop succeeds without the disk\n");

	/* write-back fails: sticky error, the data stays dirty */
	et_run(g_t.e, g_q, g_q, 200);
	T_EQ(pmc_engine_volume_error(g_t.e, g_v.vol), ENOTCONN);
	et_stats(g_t.e, g_v.vol, &s);
	T_EQ(s.dirty_blocks, 48);
	T_TRUE(s.wb_errors >= 1);
	T_EQ(s.wb_blocks, 0);
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_flush_all(g_t.e, g_q, UINT32_MAX, NULL, NULL, &err);
	if (rc >= 0)
		T_FAIL("flush_all without the disk returned %d", rc);
	printf("ok: write-back fails (sticky %d, %" PRIu64 " failed steps), flush_all: %s\n",
	       pmc_engine_volume_error(g_t.e, g_v.vol), s.wb_errors, err.msg);

	/* absorbed while free blocks last, then nospace=around: to the disk,
	 * which fails the write */
	for (uint64_t i = 0; i < FILL_MAX; i++) {
		fill_rc = write_ver(300 + i, 1, 4);
		if (fill_rc)
			break;
		filled++;
	}
	et_stats(g_t.e, g_v.vol, &s);
	printf("ok: %" PRIu64 " more blocks absorbed, then a write returned %d; %" PRIu64
	       " dirty\n",
	       filled, fill_rc, s.dirty_blocks);
	if (!fill_rc || filled + 48 < CACHE_BLOCKS * 3 / 4 || s.dirty_blocks != 48 + filled)
		T_FAIL("filling a %u-block cache without the disk: %" PRIu64 " absorbed, then %d; "
		       "%" PRIu64 " dirty",
		       CACHE_BLOCKS, filled, fill_rc, s.dirty_blocks);
	T_EQ(read_ver(300, filled, 4, "absorbed to full"), 0);

	/* --- swaps refused: nothing changes --- */
	et_path(other, sizeof(other), "other");
	et_disk_create(other, g_v.tag, VOL_BLOCKS);
	fd = open_direct(other);
	T_ERR(pmc_placeholder_swap(ph, fd, other, BS, &err), EXDEV, vi.disk_id.text);
	if (!strstr(err.msg, "volume net: ") || !strstr(err.msg, " is disk file-"))
		T_FAIL("the refusal does not name the volume and the other identity: %s", err.msg);
	close(fd);
	et_path(small, sizeof(small), "small");
	et_disk_create(small, g_v.tag, VOL_BLOCKS / 2);
	fd = open_direct(small);
	T_ERR(pmc_placeholder_swap(ph, fd, small, BS, &err), ENOSPC, "bytes, the volume has");
	close(fd);
	T_TRUE(!pmc_placeholder_swapped(ph));
	if (read_ver(900, 1, 0, "read miss after refused swaps") >= 0)
		T_FAIL("a read miss succeeded after a refused swap");
	expect_disk(900, 1, 0, "after refused swaps");

	/* --- the real disk is back --- */
	fd = open_direct(g_v.path);
	T_OK(pmc_placeholder_swap(ph, fd, g_v.path, BS, &err));
	close(fd);
	T_TRUE(pmc_placeholder_swapped(ph));
	T_EQ(pmc_disk_sync(ph), 0);
	T_EQ(read_ver(900, 1, 0, "read miss after the swap"), 0);
	pmc_engine_clear_error(g_t.e, g_v.vol);
	et_flush_all(&g_t, g_q, NULL);
	et_stats(g_t.e, g_v.vol, &s);
	T_EQ(s.dirty_blocks, 0);
	T_EQ(pmc_engine_volume_error(g_t.e, g_v.vol), 0);
	expect_disk(0, 32, 1, "drained");
	expect_disk(100, 32, 2, "drained");
	expect_disk(200, 16, 3, "drained");
	expect_disk(300, filled, 4, "drained");
	T_EQ(read_ver(100, 32, 2, "after the drain"), 0);
	printf("ok: swapped in, %" PRIu64 " blocks drained to the disk\n", 48 + filled);

	/* after a crash the last process may have left acknowledged plain
	 * writes in the disk's volatile cache: a FLUSH without the disk fails */
	pmc_queue_destroy(g_q);
	et_check_cache(&g_t);
	et_close(&g_t, 1);
	et_open(&g_t, 0);
	T_OK(pmc_placeholder_open(g_t.c, g_v.name, "nqn.x:ns1", ENOTCONN, &ph, &err));
	memset(&err, 0, sizeof(err));
	rc = pmc_engine_attach(g_t.e, g_v.name, ph, &vc, &g_v.vol, &err);
	if (rc) {
		pmc_disk_close(ph);
		T_FAIL("attach on the placeholder after a crash: %d (%s)", rc, err.msg);
	}
	g_q = et_queue(g_t.e, 32);
	T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_FLUSH, g_v.vol, 0, 0, NULL, 0), -ENOTCONN);
	printf("ok: a FLUSH after a crash fails without the disk\n");
	pmc_queue_destroy(g_q);
	et_close(&g_t, 0);
	return et_exit("engine_placeholder", seed);
}
