/* engine_model.c - the engine against a reference model, in every mode.
 *
 * A seeded random workload (tests/engine/etest.c: reads and writes of 1..64
 * blocks, discards, flushes, several requests in flight, reads overlapping
 * writes) runs over three volumes whose disks are 6x the cache, so blocks
 * are evicted all the time. It runs in write-back, write-through,
 * write-around and pass-through in turn, then with modes, volume settings
 * and write-back settings changed at random while requests are in flight.
 * Write-back steps run on the request queue or on a second queue. Every
 * read is checked block by block against the model; at the end flush_all,
 * then every block is read through the engine and straight from the disk
 * files. The cache is then closed cleanly and reopened, and abandoned (a
 * process crash) and reopened, and checked again each time.
 *
 * Also: API odds and ends (mode names, refused requests, histogram
 * buckets), n-miss admission and the sequential cutoff seen through the
 * stats, exact write accounting per mode, the consistency of the stats with
 * what the model submitted, and their text and JSON renderings (parsed with
 * json-c).
 *
 * Usage: engine_model [--seed S] [--ops N]   (N: requests per segment)
 * A failure names the seed; --seed S replays the same workload (the
 * interleaving of disk completions may still differ).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etest.h"
#include "t.h"

#define NV 3 /* model volumes */

static struct pmc_err err;
static uint64_t g_seed;
static struct et g_t;
static struct et_vol g_vols[NV + 2]; /* the model's, then D (admission) and E (cutoff) */
static struct pmc_queue *g_q, *g_wbq;
static int g_wbq_separate;

/* --- API odds and ends --- */

static void test_names_and_buckets(void)
{
	for (int m = PMC_MODE_WRITE_BACK; m <= PMC_MODE_PASS_THROUGH; m++) {
		enum pmc_mode got = (enum pmc_mode)-1;
		const char *name = pmc_mode_name((enum pmc_mode)m);

		T_EQ(pmc_mode_parse(name, &got), 0);
		T_EQ(got, m);
	}
	{
		enum pmc_mode got;

		T_TRUE(pmc_mode_parse("writeback-ish", &got) < 0);
		T_TRUE(pmc_mode_parse("", &got) < 0);
	}
	/* bucket 0: < 2 us; bucket i: [2^i, 2^(i+1)) us */
	T_EQ(pmc_hist_bucket(0), 0);
	T_EQ(pmc_hist_bucket(1999), 0);
	T_EQ(pmc_hist_bucket(2000), 1);
	T_EQ(pmc_hist_bucket(3999), 1);
	T_EQ(pmc_hist_bucket(4000), 2);
	T_EQ(pmc_hist_bucket(1024000), 10);
	T_EQ(pmc_hist_bucket(UINT64_MAX), PMC_HIST_BUCKETS - 1);
	{
		uint64_t h[PMC_HIST_BUCKETS] = {0};

		T_EQ(pmc_hist_percentile_us(h, 50), 0);
		h[3] = 99; /* [8, 16) us */
		h[10] = 1; /* [1024, 2048) us */
		T_EQ(pmc_hist_percentile_us(h, 50), 16);
		T_EQ(pmc_hist_percentile_us(h, 99), 16);
		T_EQ(pmc_hist_percentile_us(h, 100), 2048);
	}
	printf("ok: mode names, histogram buckets and percentiles\n");
}

static int g_cb_called;

static void never_cb(struct pmc_req *req, int res)
{
	g_cb_called++;
}

/* a request that must be refused at submit, its callback never called */
static void refuse(struct pmc_queue *q, enum pmc_req_op op, uint32_t vol, uint64_t off,
		   uint64_t len, void *buf, const char *text)
{
	struct pmc_req r = {.op = op, .vol = vol, .off = off, .len = len, .buf = buf,
			    .cb = never_cb};

	T_ERR(pmc_queue_submit(q, &r, &err), EINVAL, text);
	pmc_queue_poll(q, 0, 0);
	T_EQ(g_cb_called, 0);
}

static void test_refusals(void)
{
	struct et_vol *v = &g_vols[NV]; /* not one of the model's: stats stay its own */
	char *buf = et_alloc(8 * BS);
	uint64_t end = v->nblocks * BS;
	struct pmc_req r = {.op = PMC_REQ_READ, .vol = 4000, .off = 0, .len = BS, .buf = buf,
			    .cb = never_cb};

	refuse(g_q, PMC_REQ_READ, v->vol, 512, BS, buf, "aligned");
	refuse(g_q, PMC_REQ_WRITE, v->vol, 0, BS + 512, buf, "aligned");
	refuse(g_q, PMC_REQ_READ, v->vol, 0, 0, buf, "aligned");
	refuse(g_q, PMC_REQ_READ, v->vol, end - BS, 2 * BS, buf, "past its end");
	refuse(g_q, PMC_REQ_WRITE, v->vol, end, BS, buf, "past its end");
	refuse(g_q, PMC_REQ_DISCARD, v->vol, end - BS, 2 * BS, NULL, "past its end");
	refuse(g_q, PMC_REQ_READ, v->vol, UINT64_MAX - BS + 1, BS, buf, "past its end");
	refuse(g_q, PMC_REQ_WRITE, v->vol, 0, BS, buf + 512, "aligned");
	refuse(g_q, PMC_REQ_READ, v->vol, 0, 2u << 20, buf, "larger");
	memset(&err, 0, sizeof(err));
	T_TRUE(pmc_queue_submit(g_q, &r, &err) < 0);
	T_TRUE(err.msg[0] != '\0');
	printf("ok: refused: %s\n", err.msg);
	pmc_queue_poll(g_q, 0, 0);
	T_EQ(g_cb_called, 0);
	/* settings out of range */
	{
		struct pmc_volume_conf vc;
		struct pmc_wb_conf wb;
		struct pmc_engine *e2;
		struct pmc_queue *q2;

		pmc_volume_conf_default(&vc);
		vc.mode = (enum pmc_mode)7;
		T_ERR(pmc_engine_set_volume_conf(g_t.e, v->vol, &vc, &err), EINVAL, "mode");
		pmc_volume_conf_default(&vc);
		vc.admit_after_misses = 100000;
		T_ERR(pmc_engine_set_volume_conf(g_t.e, v->vol, &vc, &err), EINVAL,
		      "admit_after_misses");
		T_ERR(pmc_engine_set_mode(g_t.e, v->vol, (enum pmc_mode)9, &err), EINVAL, "mode");
		T_ERR(pmc_engine_set_mode(g_t.e, 4000, PMC_MODE_WRITE_BACK, &err), ENOENT, "4000");
		pmc_wb_conf_default(&wb);
		wb.low_pct = 80;
		wb.high_pct = 60;
		T_ERR(pmc_engine_create(g_t.c, &wb, &e2, &err), EINVAL, "low");
		pmc_wb_conf_default(&wb);
		wb.max_io_bytes = 1000;
		T_ERR(pmc_engine_create(g_t.c, &wb, &e2, &err), EINVAL, "max_io_bytes");
		T_ERR(pmc_queue_create(g_t.e, 0, &q2, &err), EINVAL, "depth");
		T_TRUE(pmc_engine_volume_error(g_t.e, 4000) == 0);
		T_TRUE(pmc_engine_flush_all(g_t.e, g_q, 4000, NULL, NULL, &err) < 0);
	}
	/* the last block, exactly, is fine */
	T_EQ(et_io(g_t.e, g_q, g_wbq, PMC_REQ_READ, v->vol, v->nblocks - 1, 1, buf, 0), 0);
	T_EQ(et_version(buf, v->tag, v->nblocks - 1), 0);
	free(buf);
}

/* --- stats helpers --- */

struct counter {
	const char *name;
	size_t off;
};

#define CTR(f) {#f, offsetof(struct pmc_vol_stats, f)}
static const struct counter counters[] = {
	CTR(reads),	       CTR(writes),		CTR(flushes),
	CTR(discards),	       CTR(read_bytes),		CTR(write_bytes),
	CTR(discard_bytes),    CTR(read_hits),		CTR(read_partial_misses),
	CTR(read_full_misses), CTR(read_hit_blocks),	CTR(read_miss_blocks),
	CTR(bypass_blocks),    CTR(admit_blocks),	CTR(write_pmem_blocks),
	CTR(write_disk_blocks), CTR(nospace_waits),	CTR(wb_ios),
	CTR(wb_bytes),	       CTR(wb_blocks),		CTR(wb_merged_blocks),
	CTR(read_errors),      CTR(write_errors),	CTR(wb_errors),
	CTR(dirty_blocks),     CTR(clean_blocks),	CTR(dirty_bytes),
	CTR(oldest_dirty_age_ms), CTR(evictions),
};
#define NCTR (sizeof(counters) / sizeof(counters[0]))

static uint64_t ctr(const struct pmc_vol_stats *s, const struct counter *c)
{
	uint64_t v;

	memcpy(&v, (const char *)s + c->off, sizeof(v));
	return v;
}

static void stats_of(struct et_vol *v, struct pmc_vol_stats *s)
{
	et_stats(g_t.e, v->vol, s);
}

/* after - before, for one named counter, must be want */
#define DELTA_EQ(v, before, after, field, want)                                                    \
	do {                                                                                       \
		uint64_t _d = (after).field - (before).field, _w = (uint64_t)(want);               \
		if (_d != _w)                                                                      \
			ET_SOFT_FAIL("vol %s: %s went up by %" PRIu64 ", expected %" PRIu64,       \
				     (v)->name, #field, _d, _w);                                   \
	} while (0)

static void read_expect(struct et_vol *v, uint64_t lba, uint64_t n, uint64_t ver, char *buf)
{
	int rc = et_io(g_t.e, g_q, g_wbq, PMC_REQ_READ, v->vol, lba, n, buf, 0);

	if (rc)
		T_FAIL("vol %s: read %" PRIu64 "+%" PRIu64 ": %d", v->name, lba, n, rc);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got = et_version(buf + i * BS, v->tag, lba + i);
		char g[64];

		if (got != ver)
			T_FAIL("vol %s block %" PRIu64 ": read %s, expected version %" PRIu64,
			       v->name, lba + i, et_vstr(got, g, sizeof(g)), ver);
	}
}

/* wait for a mode switch to finish: leaving write-back drains first */
static void settle(struct et_vol *v, enum pmc_mode mode)
{
	enum pmc_mode got;
	int draining;

	et_quiesce(g_q, g_wbq);
	T_OK(pmc_engine_flush_all(g_t.e, g_q, v->vol, NULL, NULL, &err));
	for (int i = 0; i < 1000; i++) {
		T_EQ(pmc_engine_get_mode(g_t.e, v->vol, &got, &draining), 0);
		if (got == mode && !draining)
			return;
		et_run(g_t.e, g_q, g_q, 2);
	}
	T_FAIL("vol %s: mode %s, draining %d, 2 s after switching to %s and flush_all",
	       v->name, pmc_mode_name(got), draining, pmc_mode_name(mode));
}

static void switch_mode(struct et_vol *v, enum pmc_mode mode)
{
	T_OK(pmc_engine_set_mode(g_t.e, v->vol, mode, &err));
	settle(v, mode);
}

/* --- n-miss admission and sequential cutoff --- */

static void set_conf(struct et_vol *v, enum pmc_mode mode, uint32_t admit, uint64_t cutoff,
		     enum pmc_nospace nospace)
{
	struct pmc_volume_conf vc = {.mode = mode, .admit_after_misses = admit,
				     .seq_cutoff_bytes = cutoff, .nospace = nospace};

	T_OK(pmc_engine_set_volume_conf(g_t.e, v->vol, &vc, &err));
}

static void test_admission(void)
{
	struct et_vol *v = &g_vols[NV];
	struct pmc_vol_stats s0, s1;
	char *buf = et_alloc(64 * BS);
	uint64_t lba;

	/* admit on the 3rd miss: two bypassed misses, an admitted one, a hit */
	set_conf(v, PMC_MODE_WRITE_BACK, 3, 0, PMC_NOSPACE_WAIT);
	stats_of(v, &s0);
	for (unsigned k = 0; k < 8; k++) {
		lba = 5 + k * 9;
		for (int i = 0; i < 4; i++)
			read_expect(v, lba, 1, 0, buf);
	}
	stats_of(v, &s1);
	DELTA_EQ(v, s0, s1, reads, 32);
	DELTA_EQ(v, s0, s1, read_full_misses, 24);
	DELTA_EQ(v, s0, s1, read_miss_blocks, 24);
	DELTA_EQ(v, s0, s1, bypass_blocks, 16);
	DELTA_EQ(v, s0, s1, admit_blocks, 8);
	DELTA_EQ(v, s0, s1, read_hits, 8);
	DELTA_EQ(v, s0, s1, read_hit_blocks, 8);
	/* the same 8 blocks once more: all hits now */
	for (unsigned k = 0; k < 8; k++)
		read_expect(v, 5 + k * 9, 1, 0, buf);
	stats_of(v, &s0);
	DELTA_EQ(v, s1, s0, read_hits, 8);
	DELTA_EQ(v, s1, s0, admit_blocks, 0);

	/* 1 and 0 both mean: admit at the first miss */
	for (uint32_t admit = 0; admit <= 1; admit++) {
		set_conf(v, PMC_MODE_WRITE_BACK, admit, 0, PMC_NOSPACE_WAIT);
		stats_of(v, &s0);
		for (unsigned k = 0; k < 8; k++) {
			lba = 100 + admit * 100 + k * 7;
			read_expect(v, lba, 1, 0, buf);
			read_expect(v, lba, 1, 0, buf);
		}
		stats_of(v, &s1);
		DELTA_EQ(v, s0, s1, admit_blocks, 8);
		DELTA_EQ(v, s0, s1, bypass_blocks, 0);
		DELTA_EQ(v, s0, s1, read_hits, 8);
	}

	/* pass-through admits nothing */
	set_conf(v, PMC_MODE_PASS_THROUGH, 1, 0, PMC_NOSPACE_WAIT);
	settle(v, PMC_MODE_PASS_THROUGH);
	stats_of(v, &s0);
	for (unsigned k = 0; k < 8; k++) {
		lba = 320 + k * 5;
		read_expect(v, lba, 1, 0, buf);
		read_expect(v, lba, 1, 0, buf);
	}
	stats_of(v, &s1);
	DELTA_EQ(v, s0, s1, admit_blocks, 0);
	DELTA_EQ(v, s0, s1, bypass_blocks, 16);
	DELTA_EQ(v, s0, s1, read_miss_blocks, 16);
	set_conf(v, PMC_MODE_WRITE_BACK, 1, 0, PMC_NOSPACE_WAIT);
	printf("ok: n-miss admission (3rd miss, first miss, pass-through)\n");

	/* sequential cutoff of 64 KiB, reads of 16 KiB from block 0 on:
	 * the first 64 KiB are admitted, the rest of the run is not */
	v = &g_vols[NV + 1];
	set_conf(v, PMC_MODE_WRITE_BACK, 1, 64 << 10, PMC_NOSPACE_WAIT);
	stats_of(v, &s0);
	for (lba = 0; lba < 128; lba += 4)
		read_expect(v, lba, 4, 0, buf);
	stats_of(v, &s1);
	DELTA_EQ(v, s0, s1, read_miss_blocks, 128);
	if (s1.admit_blocks - s0.admit_blocks < 16 - 4 ||
	    s1.admit_blocks - s0.admit_blocks > 16 + 4)
		T_FAIL("vol %s: a sequential run of 128 blocks with a 16-block cutoff admitted "
		       "%" PRIu64 " blocks, expected 16 (+-4)",
		       v->name, s1.admit_blocks - s0.admit_blocks);
	DELTA_EQ(v, s0, s1, bypass_blocks, 128 - (s1.admit_blocks - s0.admit_blocks));
	/* scattered reads after it are admitted again */
	stats_of(v, &s0);
	for (unsigned k = 0; k < 16; k++)
		read_expect(v, 300 - k * 5, 1, 0, buf);
	stats_of(v, &s1);
	DELTA_EQ(v, s0, s1, admit_blocks, 16);
	DELTA_EQ(v, s0, s1, bypass_blocks, 0);
	/* cutoff off: a long run is admitted whole */
	set_conf(v, PMC_MODE_WRITE_BACK, 1, 0, PMC_NOSPACE_WAIT);
	stats_of(v, &s0);
	for (lba = 320; lba < 384; lba += 16)
		read_expect(v, lba, 16, 0, buf);
	stats_of(v, &s1);
	DELTA_EQ(v, s0, s1, admit_blocks, 64);
	printf("ok: sequential cutoff (admitted %" PRIu64 " of a 128-block run)\n",
	       s1.admit_blocks - s0.admit_blocks);
	free(buf);
}

static void test_write_accounting(void)
{
	struct et_vol *v = &g_vols[NV];
	struct pmc_vol_stats s0, s1;
	char *buf = et_alloc(8 * BS);
	uint64_t ver = 1000000;

	for (int mode = PMC_MODE_WRITE_BACK; mode <= PMC_MODE_PASS_THROUGH; mode++) {
		uint64_t lba = 400 + (uint64_t)mode * 16;
		int to_pmem = mode <= PMC_MODE_WRITE_THROUGH;
		int to_disk = mode != PMC_MODE_WRITE_BACK;

		switch_mode(v, (enum pmc_mode)mode);
		ver++;
		for (unsigned i = 0; i < 5; i++)
			et_fill(buf + i * BS, v->tag, lba + i, ver);
		stats_of(v, &s0);
		T_EQ(et_io(g_t.e, g_q, NULL, PMC_REQ_WRITE, v->vol, lba, 5, buf, 0), 0);
		stats_of(v, &s1);
		DELTA_EQ(v, s0, s1, writes, 1);
		DELTA_EQ(v, s0, s1, write_bytes, 5 * BS);
		DELTA_EQ(v, s0, s1, write_pmem_blocks, to_pmem ? 5 : 0);
		DELTA_EQ(v, s0, s1, write_disk_blocks, to_disk ? 5 : 0);
		if (et_hist_sum(s1.lat[PMC_LAT_WRITE_PMEM]) - et_hist_sum(s0.lat[PMC_LAT_WRITE_PMEM]) !=
		    (mode == PMC_MODE_WRITE_BACK))
			ET_SOFT_FAIL("vol %s, %s: write_pmem latency not counted once", v->name,
			       pmc_mode_name((enum pmc_mode)mode));
		if (et_hist_sum(s1.lat[PMC_LAT_WRITE_DISK]) - et_hist_sum(s0.lat[PMC_LAT_WRITE_DISK]) !=
		    (mode != PMC_MODE_WRITE_BACK))
			ET_SOFT_FAIL("vol %s, %s: write_disk latency not counted once", v->name,
			       pmc_mode_name((enum pmc_mode)mode));
		if (mode == PMC_MODE_WRITE_BACK)
			T_TRUE(s1.dirty_blocks >= 5);
		/* written through or around: on the disk already */
		for (unsigned i = 0; to_disk && i < 5; i++) {
			char d[BS] __attribute__((aligned(8)));
			uint64_t got;
			char g[64];

			et_disk_read(v->path, lba + i, d);
			got = et_version(d, v->tag, lba + i);
			if (got != ver)
				T_FAIL("vol %s, %s: block %" PRIu64 " on the disk is %s right after "
				       "the write completed, expected version %" PRIu64,
				       v->name, pmc_mode_name((enum pmc_mode)mode), lba + i,
				       et_vstr(got, g, sizeof(g)), ver);
		}
		read_expect(v, lba, 5, ver, buf);
	}
	switch_mode(v, PMC_MODE_WRITE_BACK);
	/* the write-back block made it to the disk with the drain */
	for (unsigned i = 0; i < 5; i++) {
		char d[BS] __attribute__((aligned(8)));

		et_disk_read(v->path, 400 + i, d);
		T_EQ(et_version(d, v->tag, 400 + i), 1000001);
	}
	printf("ok: write accounting in the four modes\n");
	free(buf);
}

/* --- renderings --- */

static void check_renderings(struct et_vol *v)
{
	struct pmc_vol_stats s;
	char *text, small[16];
	int n;
	char *js;
	json_object *o, *x, *lat;

	stats_of(v, &s);
	n = pmc_stats_render_text(&s, v->name, NULL, 0);
	T_TRUE(n > 0);
	text = malloc((size_t)n + 1);
	T_TRUE(text);
	T_EQ(pmc_stats_render_text(&s, v->name, text, (size_t)n + 1), n);
	T_EQ(strlen(text), n);
	T_EQ(pmc_stats_render_text(&s, v->name, small, sizeof(small)), n);
	T_TRUE(strlen(small) == sizeof(small) - 1);
	T_TRUE(strstr(text, v->name) != NULL);
	for (size_t i = 0; i < NCTR; i++) {
		const char *p = text;
		int found = 0;

		while (p && *p && !found) {
			char name[64];
			unsigned long long val;

			if (sscanf(p, " %63s %llu", name, &val) == 2 &&
			    !strcmp(name, counters[i].name) && val == ctr(&s, &counters[i]))
				found = 1;
			p = strchr(p, '\n');
			p = p ? p + 1 : NULL;
		}
		if (!found)
			T_FAIL("text stats: no line '%s %" PRIu64 "' in:\n%s", counters[i].name,
			       ctr(&s, &counters[i]), text);
	}

	js = pmc_stats_render_json(&s, v->name);
	T_TRUE(js != NULL);
	o = json_tokener_parse(js);
	if (!o || !json_object_is_type(o, json_type_object))
		T_FAIL("JSON stats do not parse as an object: %s", js);
	T_TRUE(json_object_object_get_ex(o, "name", &x));
	if (strcmp(json_object_get_string(x), v->name))
		T_FAIL("JSON stats: name '%s', expected '%s'", json_object_get_string(x), v->name);
	for (size_t i = 0; i < NCTR; i++) {
		if (!json_object_object_get_ex(o, counters[i].name, &x))
			T_FAIL("JSON stats: no member %s in %s", counters[i].name, js);
		if (!json_object_is_type(x, json_type_int) ||
		    json_object_get_uint64(x) != ctr(&s, &counters[i]))
			T_FAIL("JSON stats: %s = %s, expected %" PRIu64, counters[i].name,
			       json_object_to_json_string(x), ctr(&s, &counters[i]));
	}
	T_TRUE(json_object_object_get_ex(o, "error", &x));
	T_EQ(json_object_get_int(x), s.error);
	/* the histograms, somewhere: arrays of PMC_HIST_BUCKETS summing to
	 * the request counts */
	lat = NULL;
	json_object_object_foreach(o, key, val)
	{
		if (json_object_is_type(val, json_type_object))
			lat = val;
		(void)key;
	}
	if (!lat)
		T_FAIL("JSON stats: no latency histograms in %s", js);
	for (int p = 0; p < PMC_LAT_NR; p++) {
		const char *pn = pmc_lat_path_name((enum pmc_lat_path)p);
		uint64_t sum = 0;

		if (!json_object_object_get_ex(lat, pn, &x) ||
		    !json_object_is_type(x, json_type_array))
			T_FAIL("JSON stats: no histogram '%s'", pn);
		T_EQ(json_object_array_length(x), PMC_HIST_BUCKETS);
		for (size_t b = 0; b < PMC_HIST_BUCKETS; b++)
			sum += json_object_get_uint64(json_object_array_get_idx(x, b));
		T_EQ(sum, et_hist_sum(s.lat[p]));
	}
	json_object_put(o);
	printf("ok: stats of %s rendered as text (%d bytes) and JSON (%zu bytes)\n", v->name, n,
	       strlen(js));
	free(js);
	free(text);
}

/* --- the model runs --- */

static const char *mode_names_now(char *buf, size_t len)
{
	size_t off = 0;

	for (unsigned i = 0; i < NV; i++) {
		enum pmc_mode m;
		int d = 0;

		pmc_engine_get_mode(g_t.e, g_vols[i].vol, &m, &d);
		off += (size_t)snprintf(buf + off, len - off, "%s%s=%s%s", i ? " " : "",
					g_vols[i].name, pmc_mode_name(m), d ? "(draining)" : "");
	}
	return buf;
}

static void random_wb_conf(uint64_t *rng, struct pmc_wb_conf *wb)
{
	static const uint32_t high[] = {0, 10, 50, 90};
	static const uint32_t io[] = {4096, 16384, 65536, 1u << 20};
	static const uint32_t infl[] = {1, 2, 8, 32};

	pmc_wb_conf_default(wb);
	wb->high_pct = high[et_rand(rng) % 4];
	wb->low_pct = wb->high_pct / 2;
	wb->max_age_ms = et_rand(rng) % 2 ? 20 : 30000;
	wb->max_io_bytes = io[et_rand(rng) % 4];
	wb->max_inflight = infl[et_rand(rng) % 4];
	wb->busy_inflight = 1 + (uint32_t)(et_rand(rng) % wb->max_inflight);
	wb->idle_ms = et_rand(rng) % 2 ? 1 : 100;
	wb->retry_ms = 10;
}

/* the model's hook: change a volume's mode or settings, or write-back's */
static void shake(struct et_model *m)
{
	uint64_t x = et_rand(&m->rng);
	struct et_vol *v = &g_vols[x % NV];

	switch ((x >> 8) % 4) {
	case 0:
	case 1:
		T_OK(pmc_engine_set_mode(g_t.e, v->vol, (enum pmc_mode)((x >> 16) % 4), &err));
		break;
	case 2: {
		static const uint64_t cut[] = {0, 0, 64 << 10, 256 << 10};
		enum pmc_mode mode;
		int draining;

		/* keep the mode (or the switch in progress) as it is */
		T_EQ(pmc_engine_get_mode(g_t.e, v->vol, &mode, &draining), 0);
		if (draining)
			break;
		set_conf(v, mode, (uint32_t)((x >> 16) % 4), cut[(x >> 20) % 4],
			 (enum pmc_nospace)((x >> 24) % 2));
		break;
	}
	case 3: {
		struct pmc_wb_conf wb;

		random_wb_conf(&m->rng, &wb);
		pmc_engine_set_wb_conf(g_t.e, &wb);
		break;
	}
	}
}

static void all_modes(struct et_model *m, enum pmc_mode mode)
{
	for (unsigned i = 0; i < NV; i++)
		T_OK(pmc_engine_set_mode(g_t.e, g_vols[i].vol, mode, &err));
	(void)m;
}

static void open_queues(uint64_t *rng)
{
	static const unsigned depths[] = {2, 4, 32, 32};

	g_q = et_queue(g_t.e, depths[et_rand(rng) % 4]);
	g_wbq = g_wbq_separate ? et_queue(g_t.e, 16) : g_q;
}

static void close_queues(void)
{
	if (g_wbq != g_q)
		pmc_queue_destroy(g_wbq);
	pmc_queue_destroy(g_q);
	g_q = g_wbq = NULL;
}

static void check_totals(void)
{
	uint32_t ids[NV + 2];

	for (unsigned i = 0; i < NV + 2; i++)
		ids[i] = g_vols[i].vol;
	et_check_total_stats(g_t.e, ids, NV + 2, 1);
}

static void reattach(struct et_model *m, uint64_t *rng)
{
	for (unsigned i = 0; i < NV + 2; i++)
		et_attach(&g_t, &g_vols[i], NULL, NULL, NULL);
	open_queues(rng);
	m->q = g_q;
	m->wbq = g_wbq;
	for (unsigned i = 0; i < NV; i++) {
		struct et_mvol *mv = &m->mv[i];

		mv->reads = mv->writes = mv->flushes = mv->discards = 0;
		mv->read_bytes = mv->write_bytes = mv->discard_bytes = 0;
	}
}

int main(int argc, char **argv)
{
	uint64_t ops = 800, rng;
	struct et_model m;
	struct pmc_vol_stats all;
	unsigned wb_every;
	char modes[256];
	static const char *names[NV + 2] = {"alpha", "beta", "gamma", "admit", "seq"};
	static const uint64_t sizes[NV + 2] = {768, 512, 320, 512, 512};

	g_seed = et_seed_arg(argc, argv, NULL);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = strtoull(argv[i + 1], NULL, 0);
	printf("seed: %" PRIu64 "\n", g_seed);
	fflush(stdout);
	rng = g_seed;

	test_names_and_buckets();
	et_model_selftest();

	/* 256 cache blocks for 2624 volume blocks */
	et_path(g_t.pmem_path, sizeof(g_t.pmem_path), "pmem");
	g_t.pmem_size = et_pmem_size(256);
	random_wb_conf(&rng, &g_t.wb);
	g_wbq_separate = (int)(et_rand(&rng) % 2);
	wb_every = (unsigned[]){1, 3, 10}[et_rand(&rng) % 3];
	printf("write-back: high %u%% low %u%% max_age %" PRIu64 " ms, io %u bytes, inflight "
	       "%u/%u; steps every %u turns on %s queue\n",
	       g_t.wb.high_pct, g_t.wb.low_pct, g_t.wb.max_age_ms, g_t.wb.max_io_bytes,
	       g_t.wb.busy_inflight, g_t.wb.max_inflight, wb_every,
	       g_wbq_separate ? "a second" : "the request");
	unlink(g_t.pmem_path);
	et_open(&g_t, 1);
	T_EQ(g_t.nr_blocks, 256);
	for (unsigned i = 0; i < NV + 2; i++) {
		struct et_vol *v = &g_vols[i];

		snprintf(v->name, sizeof(v->name), "%s", names[i]);
		et_path(v->path, sizeof(v->path), names[i]);
		v->tag = i + 1;
		v->nblocks = sizes[i];
		et_disk_create(v->path, v->tag, v->nblocks);
		et_attach(&g_t, v, NULL, NULL, NULL);
	}
	open_queues(&rng);

	test_refusals();
	test_admission();
	test_write_accounting();

	/* the model: each mode in turn, then changes while requests fly */
	et_model_init(&m, &g_t, g_vols, NV, g_seed);
	m.q = g_q;
	m.wbq = g_wbq;
	for (int mode = PMC_MODE_WRITE_BACK; mode <= PMC_MODE_PASS_THROUGH; mode++) {
		all_modes(&m, (enum pmc_mode)mode);
		et_model_run(&m, ops, wb_every);
		printf("model: %" PRIu64 " requests in %s (now %s)\n", ops,
		       pmc_mode_name((enum pmc_mode)mode), mode_names_now(modes, sizeof(modes)));
		fflush(stdout);
	}
	all_modes(&m, PMC_MODE_WRITE_BACK);
	m.hook = shake;
	m.hook_every = 25;
	et_model_run(&m, 6 * ops, wb_every);
	printf("model: %" PRIu64 " requests with changes every %u (now %s), %" PRIu64
	       " reads overlapped writes\n",
	       6 * ops, m.hook_every, mode_names_now(modes, sizeof(modes)), m.overlapped_reads);
	m.hook = NULL;
	et_flush_all(&g_t, g_q, g_wbq);
	et_model_verify_engine(&m, "after flush_all");
	et_model_verify_disks(&m, "after flush_all");
	et_model_check_stats(&m);
	check_totals();
	et_stats(g_t.e, UINT32_MAX, &all);
	if (!all.evictions)
		T_FAIL("no evictions with 2624 volume blocks over 256 cache blocks");
	T_EQ(all.dirty_blocks, 0);
	printf("ok: model in every mode: %" PRIu64 " requests, %" PRIu64 " evictions, %" PRIu64
	       " write-back writes (%" PRIu64 " blocks, %" PRIu64 " merged)\n",
	       m.ops_done, all.evictions, all.wb_ios, all.wb_blocks, all.wb_merged_blocks);
	check_renderings(&g_vols[0]);
	{
		/* the whole cache renders too */
		char *js = pmc_stats_render_json(&all, "cache");
		json_object *o = js ? json_tokener_parse(js) : NULL;

		T_TRUE(o != NULL);
		json_object_put(o);
		free(js);
	}

	/* clean restart with dirty data in the cache */
	all_modes(&m, PMC_MODE_WRITE_BACK);
	et_model_run(&m, ops, 0);
	et_model_verify_engine(&m, "before a clean close");
	close_queues();
	et_close(&g_t, 0);
	et_open(&g_t, 0);
	et_check_cache(&g_t);
	reattach(&m, &rng);
	et_model_verify_engine(&m, "after a clean close and reopen");
	et_model_run(&m, ops, wb_every);
	et_model_verify_engine(&m, "after a clean reopen and more requests");
	et_model_check_stats(&m);
	check_totals();
	printf("ok: clean close and reopen\n");

	/* a process crash: the cache is abandoned, every store made stays */
	et_model_run(&m, ops, 0);
	close_queues();
	et_close(&g_t, 1);
	et_open(&g_t, 0);
	et_check_cache(&g_t);
	reattach(&m, &rng);
	et_model_verify_engine(&m, "after a crash and reopen");
	et_model_run(&m, ops, wb_every);
	et_flush_all(&g_t, g_q, g_wbq);
	et_model_verify_engine(&m, "after a crash, more requests and flush_all");
	et_model_verify_disks(&m, "after a crash, more requests and flush_all");
	et_model_check_stats(&m);
	check_totals();
	printf("ok: crash (abandon) and reopen\n");

	close_queues();
	et_close(&g_t, 0);
	et_model_fini(&m);
	return et_exit("engine_model", g_seed);
}
