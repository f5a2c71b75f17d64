/* test_ring_buf.c - pmc_ring_buf_alloc: DRAM for I/O buffers aligned to
 * 2 MiB (so that huge pages can back it), reserved but not committed (a
 * bounce buffer never used costs no memory), and gone once freed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ring.h"
#include "t.h"

#define MIB (1ull << 20)

/* the smaps field (kB) of the mapping that holds p; -1 if none does */
static long smaps_kb(void *p, const char *field)
{
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	size_t flen = strlen(field);
	unsigned long lo, hi;
	int in = 0;
	long kb = -1;

	if (!f)
		T_FAIL("/proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		/* a mapping's header: "lo-hi perms ..."; then its fields */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = lo <= (uintptr_t)p && (uintptr_t)p < hi;
			continue;
		}
		if (in && strncmp(line, field, flen) == 0 && line[flen] == ':') {
			kb = strtol(line + flen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

int main(void)
{
	size_t len = 5 * MIB + 4096;
	char *p = pmc_ring_buf_alloc(len), *q;
	long rss, huge;

	T_TRUE(p != NULL);
	T_EQ((uintptr_t)p % (2 * MIB), 0);
	/* reserved, not committed: nothing resident before the first touch */
	rss = smaps_kb(p, "Rss");
	T_TRUE(rss >= 0);
	T_EQ(rss, 0);
	p[0] = 1;
	rss = smaps_kb(p, "Rss");
	huge = smaps_kb(p, "AnonHugePages");
	/* one touch brings one page: 4 KiB, or a 2 MiB huge page */
	T_TRUE(rss == 4 || rss == 2048);
	printf("ok: one touch: %ld kB resident, %ld kB in huge pages\n", rss, huge);
	/* the whole length is usable */
	memset(p + len - 4096, 0x5a, 4096);
	T_EQ(p[len - 1], 0x5a);
	T_EQ(p[0], 1);
	pmc_ring_buf_free(p, len);
	T_EQ(smaps_kb(p, "Rss"), -1);

	/* two buffers do not overlap, and a length of 0 is refused */
	p = pmc_ring_buf_alloc(MIB);
	q = pmc_ring_buf_alloc(MIB);
	T_TRUE(p && q && p != q);
	T_TRUE(q >= p + 2 * MIB || p >= q + 2 * MIB);
	pmc_ring_buf_free(p, MIB);
	pmc_ring_buf_free(q, MIB);
	errno = 0;
	T_TRUE(pmc_ring_buf_alloc(0) == NULL);
	T_EQ(errno, EINVAL);
	pmc_ring_buf_free(NULL, 0);
	printf("ok: aligned, reserved not committed, freed\n");
	return 0;
}
