/* stats.c - summing, histogram helpers and rendering of statistics.
 * Counters are read with relaxed atomic loads: their owners (queue
 * threads) bump them concurrently. JSON is built with json-c. */
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

const char *pmc_lat_path_name(enum pmc_lat_path p)
{
	static const char *names[PMC_LAT_NR] = {
		[PMC_LAT_READ_HIT] = "read_hit",     [PMC_LAT_READ_MISS] = "read_miss",
		[PMC_LAT_WRITE_PMEM] = "write_pmem", [PMC_LAT_WRITE_DISK] = "write_disk",
		[PMC_LAT_FLUSH] = "flush",	     [PMC_LAT_DISCARD] = "discard",
		[PMC_LAT_WRITEBACK] = "writeback",
	};

	return (unsigned)p < PMC_LAT_NR ? names[p] : "unknown";
}

unsigned pmc_hist_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	while (us >= 2 && b < PMC_HIST_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

uint64_t pmc_hist_percentile_us(const uint64_t *hist, double pct)
{
	uint64_t total = 0, seen = 0;

	for (unsigned i = 0; i < PMC_HIST_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;
	for (unsigned i = 0; i < PMC_HIST_BUCKETS; i++) {
		seen += hist[i];
		if ((double)seen >= pct / 100.0 * (double)total)
			return 2ull << i; /* upper bound of bucket i */
	}
	return 2ull << (PMC_HIST_BUCKETS - 1);
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* the plain counters, in order: one table for add, text and JSON */
#define PMC_STATS_COUNTERS(X)                                                                      \
	X(reads, "requests")                                                                       \
	X(writes, "requests")                                                                      \
	X(flushes, "requests")                                                                     \
	X(discards, "requests")                                                                    \
	X(read_bytes, "bytes")                                                                     \
	X(write_bytes, "bytes")                                                                    \
	X(discard_bytes, "bytes")                                                                  \
	X(read_hits, "requests")                                                                   \
	X(read_partial_misses, "requests")                                                         \
	X(read_full_misses, "requests")                                                            \
	X(read_hit_blocks, "blocks")                                                               \
	X(read_miss_blocks, "blocks")                                                              \
	X(bypass_blocks, "blocks")                                                                 \
	X(admit_blocks, "blocks")                                                                  \
	X(write_pmem_blocks, "blocks")                                                             \
	X(write_disk_blocks, "blocks")                                                             \
	X(write_bypass_blocks, "blocks")                                                           \
	X(nospace_waits, "times")                                                                  \
	X(wb_ios, "writes")                                                                        \
	X(wb_bytes, "bytes")                                                                       \
	X(wb_blocks, "blocks")                                                                     \
	X(wb_merged_blocks, "blocks")                                                              \
	X(read_errors, "errors")                                                                   \
	X(write_errors, "errors")                                                                  \
	X(wb_errors, "errors")                                                                     \
	X(dirty_blocks, "blocks")                                                                  \
	X(clean_blocks, "blocks")                                                                  \
	X(lost_blocks, "blocks")                                                                   \
	X(dirty_bytes, "bytes")                                                                    \
	X(oldest_dirty_age_ms, "ms")                                                               \
	X(evictions, "blocks")

void pmc_stats_add(struct pmc_vol_stats *dst, const struct pmc_vol_stats *src)
{
#define ADD(f, unit) dst->f += LOAD(src->f);
	PMC_STATS_COUNTERS(ADD)
#undef ADD
	if (!dst->error)
		dst->error = src->error;
	for (unsigned p = 0; p < PMC_LAT_NR; p++)
		for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++)
			dst->lat[p][b] += LOAD(src->lat[p][b]);
}

void pmc_stats_sub(struct pmc_vol_stats *dst, const struct pmc_vol_stats *src)
{
#define SUB(f, unit) dst->f -= src->f;
	PMC_STATS_COUNTERS(SUB)
#undef SUB
	for (unsigned p = 0; p < PMC_LAT_NR; p++)
		for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++)
			dst->lat[p][b] -= src->lat[p][b];
}

int pmc_stats_render_text(const struct pmc_vol_stats *s, const char *name, char *buf, size_t len)
{
	size_t off = 0;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		int _n = snprintf(buf + off, off < len ? len - off : 0, __VA_ARGS__);              \
		if (_n > 0)                                                                        \
			off += (size_t)_n;                                                         \
	} while (0)
	PUT("%s\n", name);
#define TXT(f, unit) PUT("  %-22s %20" PRIu64 " %s\n", #f, s->f, unit);
	PMC_STATS_COUNTERS(TXT)
#undef TXT
	PUT("  %-22s %20d %s\n", "error", s->error, s->error ? strerror(s->error) : "none");
	for (unsigned p = 0; p < PMC_LAT_NR; p++) {
		uint64_t n = 0;

		for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++)
			n += s->lat[p][b];
		if (!n)
			continue;
		PUT("  latency %-14s %12" PRIu64 " ops  p50 <%" PRIu64 " us  p99 <%" PRIu64
		    " us  p99.9 <%" PRIu64 " us\n",
		    pmc_lat_path_name((enum pmc_lat_path)p), n,
		    pmc_hist_percentile_us(s->lat[p], 50), pmc_hist_percentile_us(s->lat[p], 99),
		    pmc_hist_percentile_us(s->lat[p], 99.9));
	}
#undef PUT
	return (int)off;
}

char *pmc_stats_render_json(const struct pmc_vol_stats *s, const char *name)
{
	json_object *o = json_object_new_object(), *lat = json_object_new_object();
	char *out;

	if (!o || !lat) {
		json_object_put(o);
		json_object_put(lat);
		return NULL;
	}
	json_object_object_add(o, "name", json_object_new_string(name));
#define JS(f, unit) json_object_object_add(o, #f, json_object_new_uint64(s->f));
	PMC_STATS_COUNTERS(JS)
#undef JS
	json_object_object_add(o, "error", json_object_new_int(s->error));
	for (unsigned p = 0; p < PMC_LAT_NR; p++) {
		json_object *h = json_object_new_array_ext(PMC_HIST_BUCKETS);

		for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++)
			json_object_array_add(h, json_object_new_uint64(s->lat[p][b]));
		json_object_object_add(lat, pmc_lat_path_name((enum pmc_lat_path)p), h);
	}
	json_object_object_add(o, "latency_log2_us", lat);
	out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return out;
}
