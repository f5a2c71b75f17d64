/* log.h - the library's one log line sink.
 *
 * Lines carry a syslog priority; the default sink writes "<prio>message"
 * to stderr, which journald turns into priorities. The daemon may install
 * its own sink. pmc_log_ratelimited() is for the I/O path: at most `burst`
 * lines per interval per call site, then a count of what was suppressed.
 */
#ifndef PMC_LOG_H
#define PMC_LOG_H

#include <stdint.h>
#include <syslog.h>

typedef void (*pmc_log_fn)(int prio, const char *line);

void pmc_log_set_sink(pmc_log_fn fn);
void pmc_log_set_level(int max_prio); /* drop lines above it; default LOG_INFO */
void pmc_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct pmc_ratelimit {
	uint64_t window_start_ns;
	uint32_t printed;
	uint32_t suppressed;
};

#define PMC_RATELIMIT_INTERVAL_NS 5000000000ull
#define PMC_RATELIMIT_BURST 10u

/* log unless this site already logged PMC_RATELIMIT_BURST lines in the
 * current interval; thread-safe enough for counters (races only lose counts) */
void pmc_log_ratelimited(struct pmc_ratelimit *rl, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
