/* fuzz_config.c - fuzz target: any bytes given to pmc_config_load_string().
 *
 * Must hold for every input: no crash, no leak, no sanitizer report, and
 *   - a refusal returns -errno with err.code = errno and one line that
 *     starts with the file's name, and leaves the output zeroed;
 *   - an accepted config passes pmc_config_check(), and written back with
 *     pmc_config_write() it loads again to the same values.
 * A violation aborts, which libFuzzer and the replay driver report.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

const char *const fz_tokens[] = {
    "pmem",
    "path",
    "size",
    "format",
    "block_size",
    "state_dir",
    "control",
    "socket",
    "group",
    "log",
    "level",
    "queues",
    "count",
    "depth",
    "max_io",
    "writeback",
    "high_pct",
    "low_pct",
    "max_age_ms",
    "max_inflight",
    "busy_inflight",
    "idle_ms",
    "retry_ms",
    "stall_ms",
    "volumes",
    "name",
    "disk",
    "mode",
    "admit_after_misses",
    "seq_cutoff",
    "nospace",
    "ublk_id",
    " = ",
    ": ",
    ";",
    ",",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "\"",
    "\"/dev/sdb\"",
    "\"/dev/dax0.0\"",
    "\"db\"",
    "\"write-back\"",
    "\"pass-through\"",
    "\"around\"",
    "\"never\"",
    "\"debug\"",
    "\"512K\"",
    "\"1G\"",
    "\"4T\"",
    "0",
    "-1",
    "4096",
    "100",
    "1023",
    "2147483648",
    "4294967296",
    "99999999999999999999",
    "0xffffffff",
    "L",
    "1.5",
    "true",
    "#",
    "//",
    "/*",
    "*/",
    "\n",
    "@include ",
    "\\x00",
    "\\n",
    "\xc3\xa9",
    "\xff",
    NULL,
};

/*
 * libconfig 1.5 (Debian 12's) leaks the scanner's string token that a
 * syntax error makes the parser discard (hyperrealm/libconfig issue #142,
 * fixed upstream by pull request #155): only for text refused anyway, and
 * at most its own size. Not ours to fix, so LeakSanitizer is told to ignore
 * leaks allocated by libconfig's scanner, and only those: a setting we
 * forgot to free would still be reported (it is allocated by the parser).
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:strbuf_append\nleak:libconfig_yylex\n";
}

const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "print_suppressions=0";
}

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_config: %s: %s\n", what, detail);
	abort();
}

static void same(const struct pmc_config *a, struct pmc_config *b)
{
	char x[PMC_CONFIG_PATH_MAX + 8], y[PMC_CONFIG_PATH_MAX + 8];

	if (a->nr_volumes != b->nr_volumes)
		fail("written back", "a different number of volumes");
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		uint32_t n = k->scope == PMC_CONFIG_SCOPE_TOP ? 1 : a->nr_volumes;

		if (k->type == PMC_CONFIG_T_LIST)
			continue;
		for (uint32_t j = 0; j < n; j++) {
			pmc_config_key_format(k, pmc_config_key_base(k, (struct pmc_config *)a, j),
					      x, sizeof(x));
			pmc_config_key_format(k, pmc_config_key_base(k, b, j), y, sizeof(y));
			if (strcmp(x, y))
				fail("written back", k->key);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct pmc_config zero;
	struct pmc_config c, d;
	struct pmc_err err = {0};
	char *text, *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (size > FZ_MAX_INPUT)
		size = FZ_MAX_INPUT;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&c, 0xa5, sizeof(c));
	rc = pmc_config_load_string(text, "fuzz.conf", &c, &err);
	free(text);
	if (rc) {
		if (rc >= 0 || err.code != -rc)
			fail("refusal", "return code and err.code disagree");
		if (strncmp(err.msg, "fuzz.conf", 9) || strchr(err.msg, '\n'))
			fail("refusal message", err.msg);
		if (memcmp(&c, &zero, sizeof(c)))
			fail("refusal", "the output is not zeroed");
		return 0;
	}
	if (pmc_config_check(&c, &err))
		fail("accepted config fails pmc_config_check", err.msg);
	f = open_memstream(&buf, &len);
	if (!f)
		abort();
	if (pmc_config_write(f, &c, PMC_CONFIG_WRITE_DOCS))
		fail("write", "failed");
	fclose(f);
	memset(&err, 0, sizeof(err));
	if (pmc_config_load_string(buf, "fuzz.conf", &d, &err))
		fail("the written config does not load", err.msg);
	same(&c, &d);
	pmc_config_free(&d);
	pmc_config_free(&c);
	free(buf);
	return 0;
}
