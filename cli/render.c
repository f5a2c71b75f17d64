/* render.c - human output of pmcachectl: binary units, microseconds,
 * aligned tables, the progress bar, the stats tables and the Prometheus
 * text exposition. Pure functions of their input (unit-tested).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "stats.h"

void pmc_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	unsigned u = 0;
	double v = (double)bytes;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (v < 10)
		snprintf(buf, len, "%.2f %s", v, units[u]);
	else if (v < 100)
		snprintf(buf, len, "%.1f %s", v, units[u]);
	else
		snprintf(buf, len, "%.0f %s", v, units[u]);
}

void pmc_fmt_us(uint64_t us, char *buf, size_t len)
{
	if (us < 1000)
		snprintf(buf, len, "%" PRIu64 " \u00b5s", us);
	else if (us < 1000000)
		snprintf(buf, len, "%.1f ms", (double)us / 1e3);
	else
		snprintf(buf, len, "%.2f s", (double)us / 1e6);
}

void pmc_fmt_duration_s(uint64_t s, char *buf, size_t len)
{
	if (s >= 86400)
		snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", s / 86400,
			 s / 3600 % 24, s / 60 % 60);
	else if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", s / 3600,
			 s / 60 % 60, s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, len, "%" PRIu64 "s", s);
}

size_t pmc_utf8_width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

void pmc_tab_init(struct pmc_tab *t, unsigned ncols, const char *const *head, const int *right)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols < PMC_TAB_COLS ? ncols : PMC_TAB_COLS;
	for (unsigned c = 0; c < t->ncols; c++) {
		t->head[c] = head[c];
		t->right[c] = right ? right[c] : 0;
	}
}

int pmc_tab_row(struct pmc_tab *t, const char *const *cells)
{
	if (t->rows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char **n = realloc(t->cells, cap * t->ncols * sizeof(*n));

		if (!n)
			return -1;
		t->cells = n;
		t->cap = cap;
	}
	for (unsigned c = 0; c < t->ncols; c++)
		t->cells[t->rows * t->ncols + c] = strdup(cells[c] ? cells[c] : "");
	t->rows++;
	return 0;
}

static void put_cell(FILE *f, const char *s, size_t width, int right, int last)
{
	size_t w = pmc_utf8_width(s);

	if (right)
		for (size_t i = w; i < width; i++)
			fputc(' ', f);
	fputs(s, f);
	if (!right && !last)
		for (size_t i = w; i < width; i++)
			fputc(' ', f);
}

void pmc_tab_print(const struct pmc_tab *t, FILE *f)
{
	size_t width[PMC_TAB_COLS];
	char *line = NULL;
	size_t len = 0;

	for (unsigned c = 0; c < t->ncols; c++) {
		width[c] = pmc_utf8_width(t->head[c]);
		for (size_t r = 0; r < t->rows; r++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t w = pmc_utf8_width(s ? s : "");

			if (w > width[c])
				width[c] = w;
		}
	}
	for (size_t r = 0; r <= t->rows; r++) {
		FILE *m = open_memstream(&line, &len);

		if (!m)
			return;
		for (unsigned c = 0; c < t->ncols; c++) {
			const char *s = r ? t->cells[(r - 1) * t->ncols + c] : t->head[c];

			if (c)
				fputs("  ", m);
			put_cell(m, s ? s : "", width[c], t->right[c], c + 1 == t->ncols);
		}
		fclose(m);
		while (len && line[len - 1] == ' ')
			line[--len] = '\0';
		fprintf(f, "%s\n", line);
		free(line);
		line = NULL;
	}
}

void pmc_tab_free(struct pmc_tab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->rows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

void pmc_fmt_bar(uint64_t done, uint64_t total, unsigned width, char *buf, size_t len)
{
	unsigned fill, pct;
	size_t off = 0;

	if (width > 200)
		width = 200;
	if (total == 0 || done > total)
		done = total;
	pct = total ? (unsigned)(done * 100 / total) : 100;
	fill = total ? (unsigned)(done * width / total) : width;
	if (len == 0)
		return;
	buf[0] = '\0';
	if (len < width + 3)
		return;
	buf[off++] = '[';
	for (unsigned i = 0; i < width; i++)
		buf[off++] = i < fill ? '#' : '-';
	buf[off++] = ']';
	buf[off] = '\0';
	snprintf(buf + off, len - off, " %3u%%  %" PRIu64 " of %" PRIu64 " blocks written back",
		 pct, done, total);
}

static int ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

const char *pmc_counter_unit(const char *name)
{
	if (ends(name, "_bytes"))
		return "bytes";
	if (ends(name, "_blocks") || !strcmp(name, "evictions"))
		return "blocks";
	if (ends(name, "_ms"))
		return "ms";
	return "";
}

int pmc_counter_is_gauge(const char *name)
{
	return !strcmp(name, "dirty_blocks") || !strcmp(name, "clean_blocks") ||
	       !strcmp(name, "lost_blocks") ||
	       !strcmp(name, "dirty_bytes") || !strcmp(name, "oldest_dirty_age_ms") ||
	       !strcmp(name, "error");
}

static void fmt_counter(const char *name, uint64_t v, char *buf, size_t len)
{
	const char *unit = pmc_counter_unit(name);

	if (!strcmp(unit, "bytes"))
		pmc_fmt_bytes(v, buf, len);
	else if (!strcmp(unit, "ms"))
		v < 1000 ? (void)snprintf(buf, len, "%" PRIu64 " ms", v)
			 : pmc_fmt_us(v * 1000, buf, len);
	else
		snprintf(buf, len, "%" PRIu64, v);
}

/* the stats objects in display order: total first, then the volumes */
static size_t stats_objs(struct json_object *stats, struct json_object **objs, size_t max)
{
	struct json_object *tot, *vols;
	size_t n = 0;

	if (json_object_object_get_ex(stats, "total", &tot) && n < max)
		objs[n++] = tot;
	if (json_object_object_get_ex(stats, "volumes", &vols) &&
	    json_object_is_type(vols, json_type_array))
		for (size_t i = 0; i < json_object_array_length(vols) && n < max; i++)
			objs[n++] = json_object_array_get_idx(vols, i);
	return n;
}

static const char *obj_name(struct json_object *o)
{
	struct json_object *n;

	return json_object_object_get_ex(o, "name", &n) ? json_object_get_string(n) : "?";
}

static uint64_t hist_total(struct json_object *h, uint64_t *hist)
{
	uint64_t n = 0;

	for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++) {
		struct json_object *e = json_object_array_get_idx(h, b);

		hist[b] = e ? (uint64_t)json_object_get_uint64(e) : 0;
		n += hist[b];
	}
	return n;
}

/* the counters of objs[0..n) (at most PMC_TAB_COLS - 1), a column each */
static void counter_table(struct json_object **objs, size_t n, FILE *f)
{
	const char *head[PMC_TAB_COLS];
	int right[PMC_TAB_COLS];
	struct pmc_tab t;
	char cells[PMC_TAB_COLS][80];
	const char *row[PMC_TAB_COLS];

	head[0] = "COUNTER";
	right[0] = 0;
	for (size_t i = 0; i < n; i++) {
		head[i + 1] = obj_name(objs[i]);
		right[i + 1] = 1;
	}
	pmc_tab_init(&t, (unsigned)n + 1, head, right);
	json_object_object_foreach(objs[0], key, val)
	{
		if (!json_object_is_type(val, json_type_int) || !strcmp(key, "error"))
			continue;
		snprintf(cells[0], sizeof(cells[0]), "%s", key);
		row[0] = cells[0];
		for (size_t i = 0; i < n; i++) {
			struct json_object *v;

			if (json_object_object_get_ex(objs[i], key, &v))
				fmt_counter(key, json_object_get_uint64(v), cells[i + 1],
					    sizeof(cells[i + 1]));
			else
				snprintf(cells[i + 1], sizeof(cells[i + 1]), "-");
			row[i + 1] = cells[i + 1];
		}
		pmc_tab_row(&t, row);
	}
	snprintf(cells[0], sizeof(cells[0]), "error");
	row[0] = cells[0];
	for (size_t i = 0; i < n; i++) {
		struct json_object *v;
		int e = json_object_object_get_ex(objs[i], "error", &v) ? json_object_get_int(v) : 0;

		snprintf(cells[i + 1], sizeof(cells[i + 1]), "%s", e ? strerror(e) : "none");
		row[i + 1] = cells[i + 1];
	}
	pmc_tab_row(&t, row);
	pmc_tab_print(&t, f);
	pmc_tab_free(&t);
}

void pmc_render_stats(struct json_object *stats, int histograms, FILE *f)
{
	/* the total and every volume: as many tables of counters as their
	 * columns need (10 to a table) */
	struct json_object *objs[1 + PMC_CONFIG_VOLUMES_MAX];
	size_t n = stats_objs(stats, objs, 1 + PMC_CONFIG_VOLUMES_MAX);
	char cells[8][80];
	const char *row[8];

	if (!n)
		return;
	for (size_t first = 0; first < n; first += PMC_TAB_COLS - 2) {
		if (first)
			fputc('\n', f);
		counter_table(objs + first,
			      n - first < PMC_TAB_COLS - 2 ? n - first : PMC_TAB_COLS - 2, f);
	}

	/* latency: one row per volume and path that saw requests */
	{
		static const char *const lh[] = {"LATENCY",	"VOLUME", "OPS",  "P50",
						 "P90",		"P99",	  "P99.9", "MAX"};
		static const int lr[] = {0, 0, 1, 1, 1, 1, 1, 1};
		struct pmc_tab lt;

		pmc_tab_init(&lt, 8, lh, lr);
		for (size_t i = 0; i < n; i++) {
			struct json_object *lat;

			if (!json_object_object_get_ex(objs[i], "latency_log2_us", &lat))
				continue;
			json_object_object_foreach(lat, path, h)
			{
				uint64_t hist[PMC_HIST_BUCKETS], ops = hist_total(h, hist);
				static const double pct[] = {50, 90, 99, 99.9};
				unsigned top = 0;

				if (!ops)
					continue;
				snprintf(cells[0], sizeof(cells[0]), "%s", path);
				snprintf(cells[1], sizeof(cells[1]), "%s", obj_name(objs[i]));
				snprintf(cells[2], sizeof(cells[2]), "%" PRIu64, ops);
				for (unsigned p = 0; p < 4; p++) {
					char us[24];

					pmc_fmt_us(pmc_hist_percentile_us(hist, pct[p]), us,
						   sizeof(us));
					snprintf(cells[3 + p], sizeof(cells[3 + p]), "<%s", us);
				}
				for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++)
					if (hist[b])
						top = b;
				{
					char us[24];

					pmc_fmt_us(2ull << top, us, sizeof(us));
					snprintf(cells[7], sizeof(cells[7]), "<%s", us);
				}
				for (unsigned c = 0; c < 8; c++)
					row[c] = cells[c];
				pmc_tab_row(&lt, row);
				if (histograms) {
					for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++) {
						char lo[24], hi[24];

						if (!hist[b])
							continue;
						pmc_fmt_us(b ? 1ull << b : 0, lo, sizeof(lo));
						pmc_fmt_us(2ull << b, hi, sizeof(hi));
						snprintf(cells[0], sizeof(cells[0]), "  %s..%s", lo,
							 hi);
						snprintf(cells[2], sizeof(cells[2]), "%" PRIu64,
							 hist[b]);
						row[1] = "";
						for (unsigned c = 3; c < 8; c++)
							row[c] = "";
						pmc_tab_row(&lt, row);
						row[1] = cells[1];
					}
				}
			}
		}
		if (lt.rows) {
			fputc('\n', f);
			pmc_tab_print(&lt, f);
		}
		pmc_tab_free(&lt);
	}
}

/* a label value with \ " and newline escaped */
static void prom_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*s, f);
	}
}

void pmc_render_prometheus(struct json_object *stats, FILE *f)
{
	struct json_object *objs[1 + 4096];
	size_t n = stats_objs(stats, objs, sizeof(objs) / sizeof(objs[0]));
	struct json_object *lat0;

	if (!n)
		return;
	/* counters: one family per counter, one series per volume, "_total" the cache */
	json_object_object_foreach(objs[0], key, val)
	{
		int gauge = pmc_counter_is_gauge(key);

		if (!json_object_is_type(val, json_type_int))
			continue;
		fprintf(f, "# HELP pmcache_%s%s pmcache %s%s%s%s\n", key, gauge ? "" : "_total", key,
			*pmc_counter_unit(key) ? " (" : "", pmc_counter_unit(key),
			*pmc_counter_unit(key) ? ")" : "");
		fprintf(f, "# TYPE pmcache_%s%s %s\n", key, gauge ? "" : "_total",
			gauge ? "gauge" : "counter");
		for (size_t i = 0; i < n; i++) {
			struct json_object *v;

			if (!json_object_object_get_ex(objs[i], key, &v))
				continue;
			fprintf(f, "pmcache_%s%s{volume=\"", key, gauge ? "" : "_total");
			prom_label(f, i ? obj_name(objs[i]) : "_total");
			if (!strcmp(key, "error"))
				fprintf(f, "\"} %d\n", json_object_get_int(v));
			else
				fprintf(f, "\"} %" PRIu64 "\n", (uint64_t)json_object_get_uint64(v));
		}
	}
	if (!json_object_object_get_ex(objs[0], "latency_log2_us", &lat0))
		return;
	fputs("# HELP pmcache_latency_seconds request latency by path (log2 buckets; _sum "
	      "approximated from the buckets)\n"
	      "# TYPE pmcache_latency_seconds histogram\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		struct json_object *lat;

		if (!json_object_object_get_ex(objs[i], "latency_log2_us", &lat))
			continue;
		json_object_object_foreach(lat, path, h)
		{
			uint64_t hist[PMC_HIST_BUCKETS], total = hist_total(h, hist), cum = 0;
			double sum_us = 0;

			for (unsigned b = 0; b < PMC_HIST_BUCKETS; b++) {
				cum += hist[b];
				/* bucket 0 is [0, 2) us, bucket b [2^b, 2^(b+1)) us */
				sum_us += (double)hist[b] * (b ? 1.5 * (double)(1ull << b) : 1.0);
				fputs("pmcache_latency_seconds_bucket{volume=\"", f);
				prom_label(f, i ? obj_name(objs[i]) : "_total");
				fprintf(f, "\",path=\"%s\",le=\"%g\"} %" PRIu64 "\n", path,
					(double)(2ull << b) / 1e6, cum);
			}
			fputs("pmcache_latency_seconds_bucket{volume=\"", f);
			prom_label(f, i ? obj_name(objs[i]) : "_total");
			fprintf(f, "\",path=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", path, total);
			fputs("pmcache_latency_seconds_sum{volume=\"", f);
			prom_label(f, i ? obj_name(objs[i]) : "_total");
			fprintf(f, "\",path=\"%s\"} %g\n", path, sum_us / 1e6);
			fputs("pmcache_latency_seconds_count{volume=\"", f);
			prom_label(f, i ? obj_name(objs[i]) : "_total");
			fprintf(f, "\",path=\"%s\"} %" PRIu64 "\n", path, total);
		}
	}
}

void pmc_print_json(struct json_object *o, int ok, int one_line)
{
	int flags = JSON_C_TO_STRING_NOSLASHESCAPE;

	/* every document a command prints says whether it succeeded */
	json_object_object_add(o, "ok", json_object_new_boolean(ok));

	flags |= one_line ? JSON_C_TO_STRING_PLAIN
			  : JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED;
	puts(json_object_to_json_string_ext(o, flags));
}
