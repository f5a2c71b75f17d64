/* fuzz_replay.c - runs a fuzz target of tests/config (fuzz_config.c or
 * fuzz_ctl.c, chosen at build time by FZ_TARGET) without libFuzzer, so the
 * normal (gcc) build checks it as a regression test (ctest label fuzz).
 *
 * Every file of the corpus (FZ_CORPUS unless paths are given) goes through
 * LLVMFuzzerTestOneInput, then N inputs made from a seeded random
 * generator by mutating corpus files: bit flips, random bytes, the target's
 * dictionary tokens spliced in, cuts, duplications, crossovers with another
 * file, boundary numbers. The seed is printed first; --seed replays a run.
 * A failure (the target aborts, a sanitizer reports, or an input runs over
 * the alarm) prints the input's name, saves it as <target>-fail-*.bin in the
 * working directory (add it to the corpus once fixed) and exits 1.
 *
 * LeakSanitizer reports leaks at exit, for no input in particular;
 * --leak-each checks after every input instead (slow) to name the one.
 *
 * Usage: <target>_replay [--seed S] [--runs N] [--leak-each] [-v] [FILE|DIR]...
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_SANITIZER_DEATH_CALLBACK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_SANITIZER_DEATH_CALLBACK 1
#endif
#endif
#ifdef HAVE_SANITIZER_DEATH_CALLBACK
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

#include "fuzz.h"

#ifndef FZ_TARGET
#define FZ_TARGET "fuzz"
#endif
#ifndef FZ_CORPUS
#define FZ_CORPUS "corpus"
#endif

#define ALARM_SECONDS 20u
#define DEFAULT_RUNS 50000u
#define MAX_FILES 1024u

struct input {
	char name[256];
	uint8_t *buf;
	size_t len;
};

static struct input corpus[MAX_FILES];
static unsigned nr_corpus;

/* the input running now, for the failure handlers */
static char cur_name[300];
static uint8_t cur_buf[FZ_MAX_INPUT];
static size_t cur_len;
static char cur_save[128];

static void put(const char *s)
{
	ssize_t rc = write(2, s, strlen(s));

	(void)rc;
}

/* async-signal-safe: name the input, save it */
static void report_failure(void)
{
	int fd;

	put(FZ_TARGET "_replay: FAIL on input ");
	put(cur_name);
	put("\n");
	fd = open(cur_save, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		ssize_t rc = write(fd, cur_buf, cur_len);

		(void)rc;
		close(fd);
		put(FZ_TARGET "_replay: input saved as ");
		put(cur_save);
		put(" (replay: " FZ_TARGET "_replay -v FILE)\n");
	}
}

static void on_signal(int sig)
{
	if (sig == SIGALRM)
		put(FZ_TARGET "_replay: the input runs too long (a hang?)\n");
	report_failure();
	signal(sig, SIG_DFL);
	raise(sig == SIGALRM ? SIGABRT : sig);
}

#ifdef HAVE_SANITIZER_DEATH_CALLBACK
static void on_sanitizer_death(void)
{
	report_failure();
}
#endif

static int verbose;
static int leak_each; /* check for leaks after every input (slow) */

static void run(const char *name, const uint8_t *buf, size_t len)
{
	if (len > FZ_MAX_INPUT)
		len = FZ_MAX_INPUT;
	snprintf(cur_name, sizeof(cur_name), "%s", name);
	memcpy(cur_buf, buf, len);
	cur_len = len;
	if (verbose)
		printf("%s (%zu bytes)\n", name, len);
	alarm(ALARM_SECONDS);
	LLVMFuzzerTestOneInput(cur_buf, cur_len);
	alarm(0);
#ifdef HAVE_SANITIZER_DEATH_CALLBACK
	if (leak_each && __lsan_do_recoverable_leak_check()) {
		put(FZ_TARGET "_replay: the input leaks\n");
		report_failure();
		exit(1);
	}
#endif
}

static int read_file(const char *path, struct input *in)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f)
		return -errno;
	buf = malloc(FZ_MAX_INPUT);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(buf, 1, FZ_MAX_INPUT, f);
	fclose(f);
	snprintf(in->name, sizeof(in->name), "%s", path);
	in->buf = buf;
	in->len = n;
	return 0;
}

static int add_path(const char *path)
{
	struct stat st;
	struct dirent **names;
	char sub[512];
	int n;

	if (stat(path, &st)) {
		fprintf(stderr, FZ_TARGET "_replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (nr_corpus == MAX_FILES)
			return 0;
		if (read_file(path, &corpus[nr_corpus])) {
			fprintf(stderr, FZ_TARGET "_replay: %s: cannot read\n", path);
			return -1;
		}
		nr_corpus++;
		return 0;
	}
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, FZ_TARGET "_replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (names[i]->d_name[0] != '.') {
			snprintf(sub, sizeof(sub), "%s/%s", path, names[i]->d_name);
			if (add_path(sub)) {
				while (i < n)
					free(names[i++]);
				free(names);
				return -1;
			}
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

/* --- the random inputs --- */

static uint64_t rng;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

static size_t below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static size_t nr_tokens(void)
{
	size_t n = 0;

	while (fz_tokens[n])
		n++;
	return n;
}

/* insert len bytes at off, as room allows */
static void insert(uint8_t *buf, size_t *len, size_t off, const void *src, size_t n)
{
	if (*len + n > FZ_MAX_INPUT)
		n = FZ_MAX_INPUT - *len;
	memmove(buf + off + n, buf + off, *len - off);
	memcpy(buf + off, src, n);
	*len += n;
}

static void mutate(uint8_t *buf, size_t *len)
{
	static const char *const numbers[] = {
		"0", "-1", "1", "255", "256", "1023", "1024", "4095", "4096", "65536",
		"2147483647", "2147483648", "-2147483649", "4294967295", "4294967296",
		"9223372036854775807", "9223372036854775808", "18446744073709551616",
		"1e309", "0x7fffffff", "0x80000000",
	};
	size_t n = 1 + below(8), off, cut, tok = nr_tokens();

	for (size_t m = 0; m < n; m++) {
		off = below(*len + 1);
		switch (below(9)) {
		case 0: /* flip a bit */
			if (*len)
				buf[below(*len)] ^= (uint8_t)(1u << below(8));
			break;
		case 1: { /* a random byte */
			uint8_t b = (uint8_t)rnd();

			insert(buf, len, off, &b, 1);
			break;
		}
		case 2: /* a token */
		case 3: {
			const char *t = fz_tokens[below(tok)];

			insert(buf, len, off, t, t[0] ? strlen(t) : 1);
			break;
		}
		case 4: /* cut a range */
			cut = below(*len - off + 1);
			if (cut > 16)
				cut = below(17);
			memmove(buf + off, buf + off + cut, *len - off - cut);
			*len -= cut;
			break;
		case 5: { /* duplicate a range */
			uint8_t tmp[64];

			cut = below(*len - off + 1);
			if (cut > sizeof(tmp))
				cut = sizeof(tmp);
			memcpy(tmp, buf + off, cut);
			insert(buf, len, below(*len + 1), tmp, cut);
			break;
		}
		case 6: { /* a piece of another corpus file */
			const struct input *o = &corpus[below(nr_corpus)];
			size_t from = below(o->len + 1), l = below(o->len - from + 1);

			if (nr_corpus)
				insert(buf, len, off, o->buf + from, l);
			break;
		}
		case 7: { /* a boundary number in place of a digit run */
			const char *num = numbers[below(sizeof(numbers) / sizeof(numbers[0]))];
			size_t s = off;

			while (s < *len && !(buf[s] >= '0' && buf[s] <= '9'))
				s++;
			cut = 0;
			while (s + cut < *len && buf[s + cut] >= '0' && buf[s + cut] <= '9')
				cut++;
			memmove(buf + s, buf + s + cut, *len - s - cut);
			*len -= cut;
			insert(buf, len, s, num, strlen(num));
			break;
		}
		case 8: /* truncate */
			*len = off;
			break;
		}
	}
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	unsigned long runs = DEFAULT_RUNS;
	uint8_t *buf;
	size_t len;
	int npaths = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "-v")) {
			verbose = 1;
		} else if (!strcmp(argv[i], "--leak-each")) {
			leak_each = 1;
		} else if (argv[i][0] == '-') {
			fprintf(stderr,
				"usage: %s [--seed S] [--runs N] [--leak-each] [-v] [FILE|DIR]...\n", argv[0]);
			return 2;
		} else {
			if (add_path(argv[i]))
				return 1;
			npaths++;
		}
	}
	if (!npaths && add_path(FZ_CORPUS))
		return 1;
	signal(SIGABRT, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGILL, on_signal);
	signal(SIGALRM, on_signal);
#ifdef HAVE_SANITIZER_DEATH_CALLBACK
	__sanitizer_set_death_callback(on_sanitizer_death);
#endif
	printf(FZ_TARGET "_replay: seed %" PRIu64 " (replay: --seed %" PRIu64 "), %u corpus "
			 "inputs, %lu random ones\n",
	       seed, seed, nr_corpus, npaths ? 0ul : runs);
	fflush(stdout);

	snprintf(cur_save, sizeof(cur_save), FZ_TARGET "-fail-corpus.bin");
	for (unsigned i = 0; i < nr_corpus; i++)
		run(corpus[i].name, corpus[i].buf, corpus[i].len);
	if (npaths) /* replaying given files only */
		runs = 0;

	rng = seed ? seed : 1;
	buf = malloc(FZ_MAX_INPUT);
	if (!buf)
		return 1;
	for (unsigned long r = 0; r < runs; r++) {
		char name[96];

		len = 0;
		if (nr_corpus && below(16)) {
			const struct input *o = &corpus[below(nr_corpus)];

			memcpy(buf, o->buf, o->len);
			len = o->len;
		}
		mutate(buf, &len);
		snprintf(name, sizeof(name), "random #%lu of seed %" PRIu64, r, seed);
		snprintf(cur_save, sizeof(cur_save), FZ_TARGET "-fail-%" PRIu64 "-%lu.bin", seed,
			 r);
		run(name, buf, len);
	}
	free(buf);
	for (unsigned i = 0; i < nr_corpus; i++)
		free(corpus[i].buf);
	/* LeakSanitizer checks at exit: a leak then is no one input's */
	snprintf(cur_name, sizeof(cur_name),
		 "(none: a leak found at exit; rerun with --seed %" PRIu64 " --leak-each)", seed);
	cur_len = 0;
	snprintf(cur_save, sizeof(cur_save), "/dev/null");
	printf(FZ_TARGET "_replay: all passed\n");
	return 0;
}
