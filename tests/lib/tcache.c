/* tcache.c - see tcache.h */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "t.h"
#include "tcache.h"

void t_cache_new(const char *path, uint64_t blocks, struct pmc_pmem **pm, struct pmc_cache **c,
		 uint32_t *vol)
{
	struct pmc_err err = {0};

	unlink(path);
	T_OK(pmc_pmem_open(path, (2u << 20) + blocks * 4096, pm, &err));
	T_OK(pmc_cache_format(*pm, NULL, &err));
	T_OK(pmc_cache_open(*pm, 0, c, &err));
	T_OK(pmc_cache_volume_add(*c, "v", "/dev/x", 1ull << 30, vol, &err));
}

void t_file_copy(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	char *b = malloc(1 << 20);
	ssize_t n;

	T_TRUE(in >= 0 && out >= 0 && b);
	while ((n = read(in, b, 1 << 20)) > 0)
		T_EQ(write(out, b, (size_t)n), n);
	T_EQ(n, 0);
	free(b);
	close(in);
	close(out);
}
