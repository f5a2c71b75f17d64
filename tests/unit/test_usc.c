/* test_usc.c - the unsafe-shutdown check at open (lib/FORMAT.md "Open").
 *
 * After a power cut the namespace's unsafe shutdown count has moved, and
 * lines the platform should have drained may hold garbage: the open then
 * checks the whole metadata before serving. A plain file reports neither
 * the count nor a device id, so this test stands in for the device: it
 * defines libpmem2's pmem2_source_device_usc() and
 * pmem2_source_device_id() itself (the executable's definitions win),
 * reporting a count it sets and the id of a region of N DIMMs (21
 * characters per DIMM, joined, as libpmem2 builds it).
 *
 * Checks, for a region of 3 DIMMs (an id of 63 characters, stored as it
 * is) and of 6 (126: more than the superblock's 64 bytes; it is stored
 * hashed, and the check used to be dropped without a word): a count that
 * moved with an index line damaged refuses the open, naming the unsafe
 * shutdown; a count that moved with sound metadata opens; the id recorded
 * in the superblock is the region's, or its hash.
 */
#include <errno.h>
#include <libpmem2.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cache_internal.h"
#include "pmem.h"
#include "t.h"

static int g_ndimm;
static uint64_t g_usc;

int pmem2_source_device_usc(const struct pmem2_source *src, uint64_t *usc)
{
	(void)src;
	*usc = g_usc;
	return 0;
}

int pmem2_source_device_id(const struct pmem2_source *src, char *id, size_t *len)
{
	size_t need = 1 + 21 * (size_t)g_ndimm;

	(void)src;
	if (!id) {
		*len = need;
		return 0;
	}
	if (*len < need)
		return PMEM2_E_BUFFER_TOO_SMALL;
	id[0] = '\0';
	for (int i = 0; i < g_ndimm; i++) {
		char one[32];

		snprintf(one, sizeof(one), "8089-a2-1837-%08x", 0x1000 + i);
		strcat(id, one);
	}
	return 0;
}

static struct pmc_err err;

/* a cache on path, formatted and opened at count 7, then a crash; damage:
 * an index line garbled by it */
static void crash(const char *path, int damage)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;

	unlink(path);
	g_usc = 7;
	T_OK(pmc_pmem_open(path, (2u << 20) + 256 * 4096, &pm, &err));
	T_TRUE(pm->usc_valid);
	T_OK(pmc_cache_format(pm, NULL, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	if (g_ndimm <= 3)
		T_EQ(strlen(c->sb.pmem_id), 21u * (unsigned)g_ndimm);
	else
		T_TRUE(!strncmp(c->sb.pmem_id, "fnv1a64:", 8) && strlen(c->sb.pmem_id) == 24);
	if (damage)
		((uint64_t *)(pm->base + c->sb.index_off))[0] = c->nr_blocks + 1000;
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
}

static void region(int ndimm, const char *path)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;

	g_ndimm = ndimm;
	/* the count moved, an index line is garbage: refused */
	crash(path, 1);
	g_usc = 8;
	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_ERR(pmc_cache_open(pm, 0, &c, &err), EUCLEAN, "unsafe shutdown");
	pmc_pmem_close(pm);
	/* the count moved, the metadata is sound: checked and served */
	crash(path, 0);
	g_usc = 8;
	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	T_EQ(c->sb.pmem_usc, 8);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	/* the count moved after a clean close whose counters did not all
	 * land: the index is sound, so the open recounts them (it refused
	 * the cache, and check --repair, which opens it the same way) */
	g_usc = 8;
	T_OK(pmc_pmem_open(path, 0, &pm, &err));
	T_OK(pmc_cache_open(pm, 0, &c, &err));
	{
		uint32_t v;
		struct pmc_volume_info vi;
		char *buf = aligned_alloc(4096, 4096);
		struct pmc_vol *vols = c->vols;

		memset(buf, 3, 4096);
		T_OK(pmc_cache_volume_add(c, "v", "/dev/pmc-usc-v", 1 << 20, &v, &err));
		T_OK(pmc_cache_write(c, v, 0, 1, buf, &err));
		pmc_cache_close(c);
		vols[v].clean_nr_lost = 2; /* not in the superblock's sums */
		pmc_pmem_persist(pm, &vols[v], sizeof(vols[v]));
		pmc_pmem_close(pm);
		g_usc = 9;
		T_OK(pmc_pmem_open(path, 0, &pm, &err));
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		pmc_cache_recount(c);
		T_OK(pmc_cache_volume_info(c, v, &vi));
		T_TRUE(vi.counts_valid && vi.nr_lost == 0 && vi.nr_dirty == 1);
		pmc_cache_close(c);
		free(buf);
	}
	pmc_pmem_close(pm);
	printf("ok: a region of %d DIMMs: the unsafe shutdown is checked\n", ndimm);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[256];

	snprintf(path, sizeof(path), "%s/pmc-usc-%d.pmem", tmp, getpid());
	region(3, path);
	region(6, path);
	unlink(path);
	printf("PASS test_usc\n");
	return 0;
}
