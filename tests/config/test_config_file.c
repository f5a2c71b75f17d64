/* test_config_file.c - etc/pmcached.conf agrees with the config table.
 *
 * Usage: test_config_file PATH (ctest passes etc/pmcached.conf)
 *
 * The file loads; every key of the table appears in it (a volume's keys in
 * its example volumes, disk.* in the NVMe-oF one) and every key in it is in the table; the comment
 * block above each key says "default: X" with X the table's default (or
 * "required" for a key without one); and each value written equals the
 * default, so the shipped file behaves exactly like an empty one would
 * where it sets nothing on purpose (pmem.path, the example volumes and the
 * NVMe-oF disk.* of the second) -
 * but for the keys of `shipped` below, which the package sets on purpose
 * and which must have exactly that value.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "t.h"

#define MAX_LINES 4096

/* the package's safe choices, where they differ from the defaults */
static const struct {
	const char *key, *value;
} shipped[] = {
    {"pmem.format", "\"never\""}, /* a blank pmem is formatted by pmcachectl format only */
};

static char *lines[MAX_LINES + 1]; /* 1-based */
static unsigned nr_lines;
static unsigned seen[64]; /* per table index: times found in the file */
static int failures;

static void read_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	char *l = NULL;
	size_t cap = 0;

	if (!f)
		T_FAIL("%s: cannot open", path);
	while (getline(&l, &cap, f) >= 0 && nr_lines < MAX_LINES) {
		l[strcspn(l, "\n")] = '\0';
		lines[++nr_lines] = strdup(l);
	}
	free(l);
	fclose(f);
}

static const char *skip_blank(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* the "default: X" or "required" of the comment block above line `at` */
static void check_comment(const struct pmc_config_key *k, const char *path, unsigned at)
{
	char got[256] = "";
	int required = 0, found = 0;

	for (unsigned l = at ? at - 1 : 0; l >= 1; l--) {
		const char *s = skip_blank(lines[l]), *d;

		if (s[0] != '#' && strncmp(s, "//", 2))
			break;
		if (strstr(s, "required"))
			required = 1;
		d = strstr(s, "default: ");
		if (d && !found) {
			d += strlen("default: ");
			if (*d == '"')
				snprintf(got, sizeof(got), "%.*s", (int)strcspn(d + 1, "\""),
					 d + 1);
			else
				snprintf(got, sizeof(got), "%.*s", (int)strcspn(d, "; \t,)"), d);
			found = 1;
		}
	}
	if (!k->def) {
		if (!required || found) {
			fprintf(stderr,
				"FAIL line %u: %s: the comment above should say \"required\" "
				"and give no default\n",
				at, path);
			failures++;
		}
		return;
	}
	if (!found) {
		fprintf(stderr, "FAIL line %u: %s: no \"default: %s\" in the comment above\n", at,
			path, k->def);
		failures++;
	} else if (strcmp(got, k->def)) {
		fprintf(stderr, "FAIL line %u: %s: the comment says default: %s, the table %s\n",
			at, path, got, k->def);
		failures++;
	}
}

static void found_key(const struct pmc_config_key *k, const char *path, unsigned line)
{
	if (!k) {
		fprintf(stderr, "FAIL line %u: %s is not in the config table\n", line, path);
		failures++;
		return;
	}
	seen[k - pmc_config_table]++;
	check_comment(k, path, line);
}

static void walk(const config_setting_t *g, const char *prefix)
{
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const struct pmc_config_key *k;
		char path[256];

		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "",
			 config_setting_name(s));
		k = pmc_config_key_find(PMC_CONFIG_SCOPE_TOP, path);
		if (!k && config_setting_is_group(s)) {
			walk(s, path);
			continue;
		}
		found_key(k, path, config_setting_source_line(s));
		if (!k || k->type != PMC_CONFIG_T_LIST)
			continue;
		for (int v = 0; v < config_setting_length(s); v++) {
			const config_setting_t *vg = config_setting_get_elem(s, (unsigned)v);

			for (int m = 0; m < config_setting_length(vg); m++) {
				const config_setting_t *vs =
				    config_setting_get_elem(vg, (unsigned)m);

				snprintf(path, sizeof(path), "volumes.[%d].%s", v,
					 config_setting_name(vs));
				found_key(pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME,
							      config_setting_name(vs)),
					  path, config_setting_source_line(vs));
				if (!config_setting_is_group(vs))
					continue;
				/* disk = { ... }: an NVMe-oF disk's keys, disk.* */
				for (int d = 0; d < config_setting_length(vs); d++) {
					const config_setting_t *ds =
					    config_setting_get_elem(vs, (unsigned)d);
					char rel[64];

					snprintf(rel, sizeof(rel), "%s.%s", config_setting_name(vs),
						 config_setting_name(ds));
					snprintf(path, sizeof(path), "volumes.[%d].%s", v, rel);
					found_key(pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, rel),
						  path, config_setting_source_line(ds));
				}
			}
		}
	}
}

int main(int argc, char **argv)
{
	struct pmc_config c, def;
	struct pmc_config_volume vdef;
	struct pmc_err err = {0};
	config_t cf;

	if (argc != 2) {
		fprintf(stderr, "usage: %s etc/pmcached.conf\n", argv[0]);
		return 1;
	}
	T_OK(pmc_config_load(argv[1], &c, &err));
	read_lines(argv[1]);
	config_init(&cf);
	if (config_read_file(&cf, argv[1]) != CONFIG_TRUE)
		T_FAIL("%s:%d: %s", argv[1], config_error_line(&cf), config_error_text(&cf));
	walk(config_root_setting(&cf), "");
	config_destroy(&cf);

	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (!seen[i]) {
			fprintf(stderr, "FAIL: %s%s is not in %s\n",
				k->scope == PMC_CONFIG_SCOPE_VOLUME ? "volumes.[0]." : "", k->key,
				argv[1]);
			failures++;
		}
	}

	/* the values are the defaults */
	pmc_config_default(&def);
	pmc_config_volume_default(&vdef);
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		char got[PMC_CONFIG_PATH_MAX + 8], want[PMC_CONFIG_PATH_MAX + 8];

		/* the example NVMe-oF disk names a target on purpose */
		if (!k->def || k->type == PMC_CONFIG_T_LIST || !strncmp(k->key, "disk.", 5))
			continue;
		for (uint32_t v = 0; v < (k->scope == PMC_CONFIG_SCOPE_TOP ? 1 : c.nr_volumes);
		     v++) {
			pmc_config_key_format(k, pmc_config_key_base(k, &c, v), got, sizeof(got));
			pmc_config_key_format(
			    k, k->scope == PMC_CONFIG_SCOPE_TOP ? (void *)&def : (void *)&vdef,
			    want, sizeof(want));
			for (size_t j = 0; j < sizeof(shipped) / sizeof(shipped[0]); j++)
				if (!strcmp(k->key, shipped[j].key))
					snprintf(want, sizeof(want), "%s", shipped[j].value);
			if (strcmp(got, want)) {
				fprintf(stderr, "FAIL: %s is %s in the file, the default is %s\n",
					k->key, got, want);
				failures++;
			}
		}
	}
	pmc_config_free(&c);
	for (unsigned l = 1; l <= nr_lines; l++)
		free(lines[l]);
	if (failures) {
		fprintf(stderr, "test_config_file: %d problems in %s\n", failures, argv[1]);
		return 1;
	}
	printf("test_config_file: %s agrees with the config table (%zu keys)\n", argv[1],
	       pmc_config_table_len);
	return 0;
}
