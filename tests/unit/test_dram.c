/* test_dram.c - what README.md says of DRAM: one bit per cache block (the
 * dirty-block map that the allocator and write-back share) and nothing
 * else per block; all other metadata lives in the pmem.
 *
 * A child process opens a cache and an engine on a pmem file of 64 MiB,
 * another on one of 1 GiB, and each reports how much private memory
 * (VmData: heap and anonymous mappings, touched or not; the pmem file's
 * shared mapping is not in it) the open added. The difference per block
 * of the larger must stay within one bit plus a quarter byte of slack.
 * The numbers are printed either way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "engine.h"
#include "pmem.h"
#include "t.h"

static long vm_data_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	T_TRUE(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmData:", 7))
			kib = strtol(line + 7, NULL, 10);
	fclose(f);
	T_TRUE(kib > 0);
	return kib;
}

/* in a child: KiB of private memory a cache and engine on size bytes of
 * pmem hold, and its number of blocks */
static void measure(const char *path, uint64_t size, long *kib, uint64_t *blocks)
{
	int pfd[2];
	pid_t pid;
	struct {
		long kib;
		uint64_t blocks;
	} r;

	T_TRUE(pipe(pfd) == 0);
	pid = fork();
	T_TRUE(pid >= 0);
	if (pid == 0) {
		struct pmc_err err = {0};
		struct pmc_cache_info ci;
		struct pmc_pmem *pm;
		struct pmc_cache *c;
		struct pmc_engine *e;
		long before;

		unlink(path);
		T_OK(pmc_pmem_open(path, size, &pm, &err));
		T_OK(pmc_cache_format(pm, NULL, &err));
		before = vm_data_kib();
		T_OK(pmc_cache_open(pm, 0, &c, &err));
		T_OK(pmc_engine_create(c, NULL, &e, &err));
		r.kib = vm_data_kib() - before;
		pmc_cache_get_info(c, &ci);
		r.blocks = ci.nr_blocks;
		pmc_engine_destroy(e);
		pmc_cache_close(c);
		pmc_pmem_close(pm);
		unlink(path);
		T_TRUE(write(pfd[1], &r, sizeof(r)) == (ssize_t)sizeof(r));
		_exit(0);
	}
	close(pfd[1]);
	T_TRUE(read(pfd[0], &r, sizeof(r)) == (ssize_t)sizeof(r));
	close(pfd[0]);
	{
		int st;

		T_TRUE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	*kib = r.kib;
	*blocks = r.blocks;
	printf("%" PRIu64 " MiB of pmem: %" PRIu64 " blocks, %ld KiB of DRAM\n", size >> 20,
	       r.blocks, r.kib);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[256];
	long k_small, k_large;
	uint64_t n_small, n_large;
	double per_block;

	snprintf(path, sizeof(path), "%s/pmc-dram-%d.pmem", tmp, getpid());
	measure(path, 64ull << 20, &k_small, &n_small);
	measure(path, 4ull << 30, &k_large, &n_large);
	T_TRUE(n_large > 8 * n_small);
	per_block = (double)(k_large - k_small) * 1024.0 / (double)(n_large - n_small);
	printf("DRAM per cache block: %.3f bytes (README: one bit, 0.125)\n", per_block);
	if (per_block > 0.125 + 0.25)
		T_FAIL("%.3f bytes of DRAM per cache block: more than one bit and slack", per_block);
	puts("PASS test_dram");
	return 0;
}
