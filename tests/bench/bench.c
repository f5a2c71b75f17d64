/* bench.c - pmcache-bench: the benchmark program, its subcommand table and
 * the helpers the subcommands share (clock, /proc readers, median, sizes,
 * output lines).
 *
 * A benchmark, not a test: it is not registered with CTest and judges
 * nothing; it prints figures ("name: value unit", one per line, after '#'
 * comment lines that say where and when they were taken) for a reader or a
 * script to compare against the targets. Each subcommand parses its own
 * options. New subcommands go into cmds[] below.
 *
 * Single-threaded. The helpers allocate nothing, so a subcommand that forks
 * measuring children can keep its own heap identical from one child to the
 * next.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#ifndef PMC_BENCH_BUILD_TYPE
#define PMC_BENCH_BUILD_TYPE "unknown"
#endif

static const struct bench_cmd cmds[] = {
	{"core", "DRAM per cache block and restart times of the metadata core (1 GiB vs 8 GiB)",
	 bench_core},
	{"engine", "DRAM per cache block with the engine running; pmem-hit throughput vs memcpy",
	 bench_engine},
};

#define NR_CMDS (sizeof(cmds) / sizeof(cmds[0]))

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* read a small /proc file into buf (NUL-terminated); bytes read or -1 */
static ssize_t read_proc(const char *path, char *buf, size_t len)
{
	ssize_t n, got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((size_t)got < len - 1) {
		n = read(fd, buf + got, len - 1 - (size_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	buf[got] = '\0';
	return got;
}

static long field_kib(const char *path, const char *field)
{
	char buf[8192];
	size_t flen = strlen(field);
	const char *p;

	if (read_proc(path, buf, sizeof(buf)) <= 0)
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, field, flen) && p[flen] == ':')
			return strtol(p + flen + 1, NULL, 10);
	}
	return -1;
}

long bench_status_kib(const char *field)
{
	return field_kib("/proc/self/status", field);
}

long bench_meminfo_kib(const char *field)
{
	return field_kib("/proc/meminfo", field);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, unsigned n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] != '\0')
		return -EINVAL;
	if (v == 0 || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

void bench_size_tag(uint64_t bytes, char *buf, size_t len)
{
	if (bytes % (1ull << 30) == 0)
		snprintf(buf, len, "%llug", (unsigned long long)(bytes >> 30));
	else if (bytes % (1ull << 20) == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(bytes >> 20));
	else if (bytes % (1ull << 10) == 0)
		snprintf(buf, len, "%lluk", (unsigned long long)(bytes >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
}

/* the first "model name" of /proc/cpuinfo, or "unknown cpu" */
static void cpu_model(char *out, size_t len)
{
	char buf[8192];
	const char *p, *e;

	snprintf(out, len, "unknown cpu");
	if (read_proc("/proc/cpuinfo", buf, sizeof(buf)) <= 0)
		return;
	p = strstr(buf, "model name");
	if (!p || !(p = strchr(p, ':')))
		return;
	p++;
	while (*p == ' ' || *p == '\t')
		p++;
	e = strchr(p, '\n');
	snprintf(out, len, "%.*s", (int)(e ? e - p : (ptrdiff_t)strlen(p)), p);
}

void bench_header_start(const char *cmd)
{
	char date[64], cpu[256];
	struct utsname u;
	time_t t = time(NULL);
	struct tm tm;
	const char *san = "";

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	san = " WITH SANITIZERS (figures are not representative)";
#endif
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cpu_model(cpu, sizeof(cpu));
	if (uname(&u) != 0)
		snprintf(u.release, sizeof(u.release), "?");
	printf("# pmcache-bench %s: %s, %s x %ld cpus, Linux %s, %s build%s, ", cmd, date, cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), u.release, PMC_BENCH_BUILD_TYPE, san);
}

void bench_figure(const char *name, const char *unit, const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" %s\n", unit);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pmcache-bench <subcommand> [options]   (<subcommand> --help for its options)\n"
		   "subcommands:\n");
	for (size_t i = 0; i < NR_CMDS; i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < NR_CMDS; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "pmcache-bench: unknown subcommand '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

int bench_pmem_open(const char *path, uint64_t size, struct pmc_pmem **pm, struct pmc_err *err)
{
	int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		return pmc_err_set(err, errno, "pmem %s: %s", path, strerror(errno));
	if (ftruncate(fd, (off_t)size)) {
		int e = errno;

		close(fd);
		return pmc_err_set(err, e, "pmem %s: cannot size it: %s", path, strerror(e));
	}
	close(fd);
	return pmc_pmem_open(path, 0, pm, err);
}
