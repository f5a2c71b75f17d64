/* log.c - see log.h. The sink and level are set once at start-up, before
 * threads run; formatting uses a stack buffer, so logging is thread-safe. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "log.h"

static void stderr_sink(int prio, const char *line)
{
	fprintf(stderr, "<%d>%s\n", prio, line);
}

static pmc_log_fn sink = stderr_sink;
static int level = LOG_INFO;

void pmc_log_set_sink(pmc_log_fn fn)
{
	sink = fn ? fn : stderr_sink;
}

void pmc_log_set_level(int max_prio)
{
	level = max_prio;
}

static void vlog(int prio, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void vlog(int prio, const char *fmt, va_list ap)
{
	char line[512];

	if (prio > level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	sink(prio, line);
}

void pmc_log(int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(prio, fmt, ap);
	va_end(ap);
}

void pmc_log_ratelimited(struct pmc_ratelimit *rl, int prio, const char *fmt, ...)
{
	struct timespec ts;
	uint64_t now;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (now - rl->window_start_ns > PMC_RATELIMIT_INTERVAL_NS) {
		if (rl->suppressed)
			pmc_log(prio, "%u similar messages suppressed", rl->suppressed);
		rl->window_start_ns = now;
		rl->printed = 0;
		rl->suppressed = 0;
	}
	if (rl->printed >= PMC_RATELIMIT_BURST) {
		rl->suppressed++;
		return;
	}
	rl->printed++;
	va_start(ap, fmt);
	vlog(prio, fmt, ap);
	va_end(ap);
}
