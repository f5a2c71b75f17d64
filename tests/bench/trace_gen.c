/* trace_gen.c - pmc-trace-gen: a block trace with the structure of a VM's
 * disk traffic, as a fio iolog (version 2) for the replay job of the peer
 * benchmark (`fio --read_iolog=FILE --replay_redirect=DEV --replay_no_stall`).
 *
 * The model, all drawn from one seeded xorshift generator, so a seed gives
 * the same trace on every machine:
 * - skewed reuse: the footprint is cut into 64 KiB chunks whose popularity
 *   follows a Zipf law (exponent -z, default 0.9) over a random permutation
 *   of the chunks, so hot data is scattered over the disk; a random request
 *   picks a chunk by popularity and a 4 KiB-aligned offset inside it;
 * - sequential runs: while no stream is open, each request opens one with
 *   probability 1/-r (default 1/12), at a uniformly drawn place (this brings
 *   cold data in); the stream then gets one request in 10, interleaved
 *   with random requests, for a geometric number of requests (mean 16) of
 *   one size (64, 128 or 256 KiB) and one direction;
 * - a mix of request sizes for random requests: 4 KiB 55 %, 8 KiB 15 %,
 *   16 KiB 10 %, 32 KiB 8 %, 64 KiB 8 %, 128 KiB 4 %;
 * - writes: each random request and each stream is a write with
 *   probability -w (default 0.59).
 * The defaults (seed 13, 1000 MiB, 100000 requests) give 735733 block
 * accesses, 57.3 % of them writes, touching 867 MiB.
 * Requests never cross the footprint's end. Statistics (requests, block
 * accesses, write share of them, blocks touched) go to stderr.
 *
 * usage: pmc-trace-gen [-s SEED] [-f FOOTPRINT_MIB] [-n REQUESTS] [-w WRITE]
 *                      [-z ZIPF] [-r SEQ_EVERY] [-o FILE]
 * Exit 0, 1 on a write error, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK ((uint64_t)4096)
#define CHUNK_BLOCKS ((uint64_t)16) /* 64 KiB */
#define STREAM_MEAN 16.0
#define STREAM_SHARE 10 /* one request in 10 goes to the open stream */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, 1) */
static double rnd01(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

/* a random request's size in blocks */
static uint64_t rnd_size(void)
{
	static const struct {
		unsigned pct, blocks;
	} mix[] = {{55, 1}, {15, 2}, {10, 4}, {8, 8}, {8, 16}, {4, 32}};
	unsigned x = (unsigned)rnd_below(100), acc = 0;

	for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
		acc += mix[i].pct;
		if (x < acc)
			return mix[i].blocks;
	}
	return 1;
}

static int parse_num(const char *s, double min, double max, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return errno || end == s || *end || *v < min || *v > max ? -1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: pmc-trace-gen [-s SEED] [-f FOOTPRINT_MIB] [-n REQUESTS] [-w WRITE]"
			" [-z ZIPF] [-r SEQ_EVERY] [-o FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double seed = 13, fp_mib = 1000, nreq = 100000, wr = 0.59, zipf = 0.9, seq_every = 12;
	const char *path = NULL;
	uint64_t nblocks, nchunks, *perm, touched = 0, accesses = 0, waccesses = 0, reqs = 0;
	double *cdf, sum = 0;
	uint8_t *seen;
	FILE *f = stdout;
	/* the stream: next block, blocks per request, requests left, write */
	uint64_t s_next = 0, s_size = 0, s_left = 0;
	int s_write = 0, o;

	while ((o = getopt(argc, argv, "s:f:n:w:z:r:o:")) != -1) {
		switch (o) {
		case 's':
			if (parse_num(optarg, 0, 4e9, &seed))
				usage();
			break;
		case 'f':
			if (parse_num(optarg, 4, 1 << 20, &fp_mib))
				usage();
			break;
		case 'n':
			if (parse_num(optarg, 1, 1e9, &nreq))
				usage();
			break;
		case 'w':
			if (parse_num(optarg, 0, 1, &wr))
				usage();
			break;
		case 'z':
			if (parse_num(optarg, 0, 3, &zipf))
				usage();
			break;
		case 'r':
			if (parse_num(optarg, 1, 1e6, &seq_every))
				usage();
			break;
		case 'o':
			path = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	rng_state = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
	nblocks = (uint64_t)fp_mib * (1 << 20) / BLOCK;
	nchunks = nblocks / CHUNK_BLOCKS;
	perm = malloc(nchunks * sizeof(*perm));
	cdf = malloc(nchunks * sizeof(*cdf));
	seen = calloc(nblocks, 1);
	if (!perm || !cdf || !seen) {
		fprintf(stderr, "pmc-trace-gen: out of memory for %" PRIu64 " blocks\n", nblocks);
		return 1;
	}
	/* popularity rank r has weight 1/(r+1)^z; rank r is chunk perm[r] */
	for (uint64_t i = 0; i < nchunks; i++) {
		perm[i] = i;
		sum += pow((double)(i + 1), -zipf);
		cdf[i] = sum;
	}
	for (uint64_t i = nchunks - 1; i > 0; i--) {
		uint64_t j = rnd_below(i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	if (path && !(f = fopen(path, "w"))) {
		fprintf(stderr, "pmc-trace-gen: %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(f, "fio version 2 iolog\ntrace add\ntrace open\n");
	for (uint64_t n = 0; n < (uint64_t)nreq; n++) {
		uint64_t blk, len;
		int write;

		if (!s_left && rnd_below((uint64_t)seq_every) == 0) {
			s_size = (uint64_t)16 << rnd_below(3); /* 64, 128 or 256 KiB */
			s_next = rnd_below(nblocks - s_size) & ~(s_size - 1);
			s_left = 1 + (uint64_t)(-log(1 - rnd01()) * STREAM_MEAN);
			s_write = rnd01() < wr;
		}
		if (s_left && rnd_below(STREAM_SHARE) == 0) {
			if (s_next + s_size > nblocks)
				s_next = 0;
			blk = s_next;
			len = s_size;
			write = s_write;
			s_next += s_size;
			s_left--;
		} else {
			double x = rnd01() * sum;
			uint64_t lo = 0, hi = nchunks - 1;

			while (lo < hi) {
				uint64_t mid = (lo + hi) / 2;

				if (cdf[mid] < x)
					lo = mid + 1;
				else
					hi = mid;
			}
			blk = perm[lo] * CHUNK_BLOCKS + rnd_below(CHUNK_BLOCKS);
			len = rnd_size();
			if (blk + len > nblocks)
				blk = nblocks - len;
			write = rnd01() < wr;
		}
		for (uint64_t b = blk; b < blk + len; b++) {
			touched += !seen[b];
			seen[b] = 1;
		}
		accesses += len;
		waccesses += write ? len : 0;
		reqs++;
		fprintf(f, "trace %s %" PRIu64 " %" PRIu64 "\n", write ? "write" : "read",
			blk * BLOCK, len * BLOCK);
	}
	fprintf(f, "trace close\n");
	if (fflush(f) || (path && fclose(f))) {
		fprintf(stderr, "pmc-trace-gen: %s: %s\n", path ? path : "stdout", strerror(errno));
		return 1;
	}
	fprintf(stderr,
		"pmc-trace-gen: seed %.0f footprint %.0f MiB: %" PRIu64 " requests, %" PRIu64
		" block accesses (%.1f %% writes), %" PRIu64 " blocks touched (%.1f MiB)\n",
		seed, fp_mib, reqs, accesses, 100.0 * (double)waccesses / (double)accesses, touched,
		(double)touched * BLOCK / (1 << 20));
	free(perm);
	free(cdf);
	free(seen);
	return 0;
}
