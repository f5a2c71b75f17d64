/* test_cli_render.c - units, tables, the progress bar, the stats tables
 * and the Prometheus exposition of a canned stats reply. */
#define _GNU_SOURCE
#include <json-c/json.h>

#include "cli.h"
#include "stats.h"
#include "t.h"

#define T_STR(got, want)                                                                           \
	do {                                                                                       \
		if (strcmp((got), (want)))                                                         \
			T_FAIL("'%s' != '%s'", (got), (want));                                     \
	} while (0)

static char *capture(void (*fn)(FILE *, void *), void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, arg);
	fclose(f);
	return buf;
}

static void tab_fn(FILE *f, void *arg)
{
	pmc_tab_print(arg, f);
}
static void prom_fn(FILE *f, void *arg)
{
	pmc_render_prometheus(arg, f);
}
static void stats_fn(FILE *f, void *arg)
{
	pmc_render_stats(arg, 1, f);
}

int main(void)
{
	char b[128];

	pmc_fmt_bytes(0, b, sizeof(b));
	T_STR(b, "0 B");
	pmc_fmt_bytes(1023, b, sizeof(b));
	T_STR(b, "1023 B");
	pmc_fmt_bytes(4096, b, sizeof(b));
	T_STR(b, "4.00 KiB");
	pmc_fmt_bytes(1536ull << 10, b, sizeof(b));
	T_STR(b, "1.50 MiB");
	pmc_fmt_bytes(100ull << 30, b, sizeof(b));
	T_STR(b, "100 GiB");
	pmc_fmt_bytes(UINT64_MAX, b, sizeof(b));
	T_STR(b, "16.0 EiB");
	pmc_fmt_us(850, b, sizeof(b));
	T_STR(b, "850 \u00b5s");
	pmc_fmt_us(12000, b, sizeof(b));
	T_STR(b, "12.0 ms");
	pmc_fmt_us(3200000, b, sizeof(b));
	T_STR(b, "3.20 s");
	pmc_fmt_duration_s(3723, b, sizeof(b));
	T_STR(b, "1h 02m 03s");
	T_EQ(pmc_utf8_width("850 \u00b5s"), 6);
	pmc_fmt_bar(50, 100, 10, b, sizeof(b));
	T_STR(b, "[#####-----]  50%  50 of 100 blocks written back");
	pmc_fmt_bar(0, 0, 4, b, sizeof(b));
	T_STR(b, "[####] 100%  0 of 0 blocks written back");
	pmc_fmt_bar(5, 10, 40, b, 8); /* too short: empty, no overflow */
	T_STR(b, "");
	T_STR(pmc_counter_unit("read_bytes"), "bytes");
	T_STR(pmc_counter_unit("wb_blocks"), "blocks");
	T_STR(pmc_counter_unit("reads"), "");
	T_TRUE(pmc_counter_is_gauge("dirty_blocks") && !pmc_counter_is_gauge("reads"));

	{
		static const char *const h[] = {"NAME", "SIZE", "LAT"};
		static const int r[] = {0, 1, 1};
		const char *r1[] = {"a", "4.00 KiB", "850 \u00b5s"};
		const char *r2[] = {"longname", "0 B", "1.0 ms"};
		struct pmc_tab t;
		char *out;

		pmc_tab_init(&t, 3, h, r);
		pmc_tab_row(&t, r1);
		pmc_tab_row(&t, r2);
		out = capture(tab_fn, &t);
		fputs(out, stdout);
		T_STR(out, "NAME          SIZE     LAT\n"
			   "a         4.00 KiB  850 \u00b5s\n"
			   "longname       0 B  1.0 ms\n");
		free(out);
		pmc_tab_free(&t);
	}

	{
		struct pmc_vol_stats s;
		char *tot, *v0, *js, *out;
		struct json_object *o;

		memset(&s, 0, sizeof(s));
		s.reads = 10;
		s.read_bytes = 40960;
		s.dirty_blocks = 3;
		s.lat[PMC_LAT_READ_HIT][3] = 8; /* [8, 16) us */
		s.lat[PMC_LAT_READ_HIT][10] = 2;
		v0 = pmc_stats_render_json(&s, "vol\"0");
		s.evictions = 5;
		tot = pmc_stats_render_json(&s, "total");
		T_TRUE(asprintf(&js, "{\"total\":%s,\"volumes\":[%s]}", tot, v0) > 0);
		o = json_tokener_parse(js);
		T_TRUE(o);
		out = capture(prom_fn, o);
		T_TRUE(strstr(out, "# TYPE pmcache_reads_total counter\n"));
		T_TRUE(strstr(out, "pmcache_reads_total{volume=\"_total\"} 10\n"));
		T_TRUE(strstr(out, "pmcache_reads_total{volume=\"vol\\\"0\"} 10\n"));
		T_TRUE(strstr(out, "# TYPE pmcache_dirty_blocks gauge\n"));
		T_TRUE(strstr(out, "# TYPE pmcache_latency_seconds histogram\n"));
		T_TRUE(strstr(out, "pmcache_latency_seconds_bucket{volume=\"_total\",path=\"read_hit\",le=\"1.6e-05\"} 8\n"));
		T_TRUE(strstr(out, "pmcache_latency_seconds_bucket{volume=\"_total\",path=\"read_hit\",le=\"+Inf\"} 10\n"));
		T_TRUE(strstr(out, "pmcache_latency_seconds_count{volume=\"_total\",path=\"read_hit\"} 10\n"));
		free(out);
		out = capture(stats_fn, o);
		fputs(out, stdout);
		T_TRUE(strstr(out, "COUNTER"));
		T_TRUE(strstr(out, "40.0 KiB"));
		T_TRUE(strstr(out, "read_hit"));
		T_TRUE(strstr(out, "<16 \u00b5s")); /* p50 */
		free(out);
		json_object_put(o);
		free(js);
		free(tot);
		free(v0);
	}
	{
		/* every volume has its column: 20 volumes and the total take three
		 * tables of counters (the 10th volume on was left out) */
		char js[8192], *out;
		size_t n = (size_t)snprintf(js, sizeof(js),
					    "{\"total\":{\"name\":\"_total\",\"reads\":1},"
					    "\"volumes\":[");
		json_object *o;

		for (int i = 0; i < 20; i++)
			n += (size_t)snprintf(js + n, sizeof(js) - n,
					      "%s{\"name\":\"vol%02d\",\"reads\":%d}", i ? "," : "",
					      i, 100 + i);
		snprintf(js + n, sizeof(js) - n, "]}");
		o = json_tokener_parse(js);
		T_TRUE(o);
		out = capture(stats_fn, o);
		for (int i = 0; i < 20; i++) {
			char name[16], val[16];

			snprintf(name, sizeof(name), "vol%02d", i);
			snprintf(val, sizeof(val), "%d", 100 + i);
			if (!strstr(out, name) || !strstr(out, val))
				T_FAIL("stats of 20 volumes: %s or its count %s missing:\n%s", name,
				       val, out);
		}
		free(out);
		json_object_put(o);
	}
	puts("test_cli_render: ok");
	return 0;
}
