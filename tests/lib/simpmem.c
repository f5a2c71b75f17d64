/* simpmem.c - see simpmem.h. Single-threaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simpmem.h"

uint64_t sim_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static struct simpmem *sim_of(struct pmc_pmem *pm)
{
	return pm->priv;
}

static void mark(struct simpmem *s, const void *addr, size_t len)
{
	size_t off = (size_t)((const char *)addr - s->live);

	if (off >= s->size || len > s->size - off) {
		fprintf(stderr, "simpmem: store outside the mapping (off %zu len %zu)\n", off, len);
		abort();
	}
	s->stores++;
	for (size_t w = off / 8; w < (off + len + 7) / 8; w++) {
		if (s->word[w] == 0) {
			if (s->nlist == s->caplist) {
				s->caplist = s->caplist ? 2 * s->caplist : 4096;
				s->list = realloc(s->list, s->caplist * sizeof(*s->list));
				if (!s->list)
					abort();
			}
			s->list[s->nlist++] = w;
		}
		s->word[w] = 1;
	}
}

static void rec_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
	mark(sim_of(pm), dst, len);
}

static void rec_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	memset(dst, c, len);
	mark(sim_of(pm), dst, len);
}

static void rec_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	if ((uintptr_t)dst % 8) {
		fprintf(stderr, "simpmem: unaligned 8-byte store\n");
		abort();
	}
	__atomic_store_n(dst, val, __ATOMIC_RELEASE);
	mark(sim_of(pm), dst, 8);
}

static void rec_flush(struct pmc_pmem *pm, const void *addr, size_t len)
{
	struct simpmem *s = sim_of(pm);
	size_t off = (size_t)((const char *)addr - s->live);

	for (size_t w = off / 8; w < (off + len + 7) / 8 && w < s->size / 8; w++)
		if (s->word[w] == 1)
			s->word[w] = 2;
}

static void rec_drain(struct pmc_pmem *pm)
{
	struct simpmem *s = sim_of(pm);
	size_t j = 0;

	s->drains++;
	if (s->on_drain)
		s->on_drain(s, s->arg);
	for (size_t i = 0; i < s->nlist; i++) {
		uint64_t w = s->list[i];

		if (s->word[w] == 2) {
			memcpy(s->dura + w * 8, s->live + w * 8, 8);
			s->word[w] = 0;
		} else {
			s->list[j++] = w;
		}
	}
	s->nlist = j;
}

static const struct pmc_pmem_ops rec_ops = {
	.copy = rec_copy,
	.fill = rec_fill,
	.store8 = rec_store8,
	.flush = rec_flush,
	.drain = rec_drain,
};

int simpmem_init(struct simpmem *s, size_t size)
{
	memset(s, 0, sizeof(*s));
	s->size = size;
	s->live = aligned_alloc(4096, size);
	s->dura = aligned_alloc(4096, size);
	s->word = calloc(size / 8, 1);
	if (!s->live || !s->dura || !s->word)
		return -1;
	memset(s->live, 0, size);
	memset(s->dura, 0, size);
	return pmc_pmem_wrap(s->live, size, &rec_ops, s, &s->pm);
}

void simpmem_fini(struct simpmem *s)
{
	pmc_pmem_close(s->pm);
	free(s->live);
	free(s->dura);
	free(s->word);
	free(s->list);
}

void simpmem_crash_image(const struct simpmem *s, char *image, int mode, uint64_t *rng)
{
	memcpy(image, s->dura, s->size);
	for (size_t i = 0; i < s->nlist; i++) {
		uint64_t w = s->list[i];

		if (mode == 1 || (mode == 2 && (sim_rand(rng) & 1)))
			memcpy(image + w * 8, s->live + w * 8, 8);
	}
}

static void d_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

static void d_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	memset(dst, c, len);
}

/* release, as the real store8 is: loads of the word acquire */
static void d_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	__atomic_store_n(dst, val, __ATOMIC_RELEASE);
}

static void d_flush(struct pmc_pmem *pm, const void *addr, size_t len)
{
}

static void d_drain(struct pmc_pmem *pm)
{
}

const struct pmc_pmem_ops simpmem_direct_ops = {
	.copy = d_copy,
	.fill = d_fill,
	.store8 = d_store8,
	.flush = d_flush,
	.drain = d_drain,
};

static void fail_store(void)
{
	fprintf(stderr, "simpmem: a store to pmem where none is allowed\n");
	abort();
}

static void c_copy(struct pmc_pmem *pm, void *dst, const void *src, size_t len)
{
	fail_store();
}

static void c_fill(struct pmc_pmem *pm, void *dst, int c, size_t len)
{
	fail_store();
}

static void c_store8(struct pmc_pmem *pm, uint64_t *dst, uint64_t val)
{
	fail_store();
}

const struct pmc_pmem_ops simpmem_counting_ops = {
	.copy = c_copy,
	.fill = c_fill,
	.store8 = c_store8,
	.flush = d_flush,
	.drain = d_drain,
};
