/* stats.h - statistics of the engine, per volume and for the whole cache,
 * and their rendering as text and JSON.
 *
 * Latency histograms have log2 buckets: bucket 0 counts requests that took
 * less than 2 us, bucket i (i > 0) those that took [2^i, 2^(i+1)) us.
 */
#ifndef PMC_STATS_H
#define PMC_STATS_H

#include <stddef.h>
#include <stdint.h>

#define PMC_HIST_BUCKETS 32

enum pmc_lat_path {
	PMC_LAT_READ_HIT,    /* read served entirely from pmem */
	PMC_LAT_READ_MISS,   /* read that needed the disk */
	PMC_LAT_WRITE_PMEM,  /* write acknowledged from pmem (write-back) */
	PMC_LAT_WRITE_DISK,  /* write that waited for the disk */
	PMC_LAT_FLUSH,
	PMC_LAT_DISCARD,
	PMC_LAT_WRITEBACK,   /* one write-back write to the disk */
	PMC_LAT_NR,
};

const char *pmc_lat_path_name(enum pmc_lat_path p);

struct pmc_vol_stats {
	/* requests */
	uint64_t reads, writes, flushes, discards;
	uint64_t read_bytes, write_bytes, discard_bytes;
	uint64_t read_hits;	      /* reads served entirely from pmem */
	uint64_t read_partial_misses; /* reads with some blocks from disk */
	uint64_t read_full_misses;    /* reads with every block from disk */
	uint64_t read_hit_blocks, read_miss_blocks;
	uint64_t bypass_blocks;	      /* missed blocks not admitted (mode, cutoff, n-miss rule) */
	uint64_t admit_blocks;	      /* missed blocks read into the cache */
	uint64_t write_pmem_blocks;   /* blocks written into the cache */
	uint64_t write_disk_blocks;   /* blocks written around or through to the disk */
	uint64_t write_bypass_blocks; /* write-back: blocks of sequential streams sent around */
	uint64_t nospace_waits;	      /* times a write waited for a free block */
	/* write-back */
	uint64_t wb_ios, wb_bytes, wb_blocks, wb_merged_blocks;
	/* errors */
	uint64_t read_errors, write_errors, wb_errors;
	int error;		      /* sticky first disk error (errno), 0 if none */
	/* state, sampled */
	uint64_t dirty_blocks, clean_blocks;
	uint64_t lost_blocks;	      /* dirty data lost to pmem media errors (LOST) */
	uint64_t dirty_bytes;
	uint64_t oldest_dirty_age_ms; /* as of the last write-back scan */
	uint64_t evictions;	      /* cache-wide only */
	uint64_t lat[PMC_LAT_NR][PMC_HIST_BUCKETS];
};

/* add src into dst (counters and histograms) */
void pmc_stats_add(struct pmc_vol_stats *dst, const struct pmc_vol_stats *src);
/* dst -= src, counters and histograms (a baseline taken with pmc_stats_add) */
void pmc_stats_sub(struct pmc_vol_stats *dst, const struct pmc_vol_stats *src);
unsigned pmc_hist_bucket(uint64_t ns);
/* approximate percentile (0..100) of a histogram, in us (bucket upper bound) */
uint64_t pmc_hist_percentile_us(const uint64_t *hist, double pct);

/* human text: aligned "name value unit" lines; returns bytes (as snprintf) */
int pmc_stats_render_text(const struct pmc_vol_stats *s, const char *name, char *buf, size_t len);
/* one JSON object; returns a malloc'ed string or NULL */
char *pmc_stats_render_json(const struct pmc_vol_stats *s, const char *name);

#endif
