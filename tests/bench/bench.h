/* bench.h - helpers shared by the pmcache-bench subcommands.
 *
 * A subcommand prints comment lines starting with '#' and then one figure
 * per line, "name: value unit", on stdout; progress and errors go to stderr.
 */
#ifndef PMC_BENCH_H
#define PMC_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "pmem.h"

struct bench_cmd {
	const char *name;
	const char *summary; /* one line for the usage text */
	/* argv[0] is the subcommand name; returns the exit status */
	int (*run)(int argc, char **argv);
};

/* subcommands */
int bench_core(int argc, char **argv);
int bench_engine(int argc, char **argv);

/* In a child process: a cache of size bytes in dir, every block read once
 * (clean), then BENCH_WBT_ROUNDS times: 64 MiB of 4 KiB blocks scattered
 * over it written (dirty, other blocks each round) and the time
 * pmc_engine_flush_all takes to write them back into round_s[k], and after
 * it the time of as many reads of one word from random cache blocks
 * (touch_s[k]: the machine's part, no engine); *secs is the median round,
 * *blocks and *ios what all rounds wrote. 0 or -errno with a message
 * (bench_engine.c). */
#define BENCH_WBT_ROUNDS 9
int bench_writeback_time(const char *dir, uint64_t size, double *secs, double *round_s,
			 double *touch_s, uint64_t *blocks, uint64_t *ios, char *msg,
			 size_t msg_len);

/* CLOCK_MONOTONIC in nanoseconds */
uint64_t bench_now_ns(void);

/* A "Field:   N kB" line of /proc/self/status, in KiB. Reads with a stack
 * buffer and no stdio, so it allocates nothing. -1 when absent. */
long bench_status_kib(const char *field);

/* A "Field:   N kB" line of /proc/meminfo, in KiB; -1 when absent. */
long bench_meminfo_kib(const char *field);

/* Sorts v[0..n) and returns its median (mean of the middle two for even n). */
double bench_median(double *v, unsigned n);

/* "4096", "512k", "64m", "8g" (powers of 1024); 0 or -EINVAL */
int bench_parse_size(const char *s, uint64_t *out);

/* the pmem stand-in at path, size bytes: a sparse file (a devdax
 * namespace allocates nothing either), then mapped. pmc_pmem_open would
 * allocate a file it creates (posix_fallocate, so that a full file system
 * cannot raise SIGBUS later); on tmpfs that allocation changes the
 * kernel's costs on that memory (write-back of 64 MiB from an 8 GiB cache
 * took 0.18-0.23 s against 0.044-0.05 s), which a devdax namespace does
 * not have. 0 or -errno */
int bench_pmem_open(const char *path, uint64_t size, struct pmc_pmem **pm, struct pmc_err *err);

/* "8g", "512m", "64k" or the byte count: the suffix of figure names */
void bench_size_tag(uint64_t bytes, char *buf, size_t len);

/* "# pmcache-bench <cmd>: <UTC date>, <cpu> x <n>, Linux <release>, <build>, " */
void bench_header_start(const char *cmd);

/* one figure line, "name: value unit", flushed at once */
void bench_figure(const char *name, const char *unit, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
