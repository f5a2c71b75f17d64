/* test_config.c - the configuration table and loader (lib/config.c).
 *
 * Checks the table itself (unique keys, canonical defaults that pass their
 * own checks, words that match the engine's enums), good configs and their
 * defaults, sizes, every kind of refusal with its exact file:line: key
 * message, that a refused config leaves the output zeroed (ASan checks
 * nothing leaks), loading from files, writing a config back, and the
 * in-memory check used for run-time changes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "config.h"
#include "t.h"

#define NAME "pmcached.conf"
#define PMEM "pmem = { path = \"/dev/dax0.0\"; };\n"
#define VOL1 "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; } );\n"

static const struct pmc_config zero;

static void load_ok(int line, const char *text, struct pmc_config *c)
{
	struct pmc_err err = {0};
	int rc = pmc_config_load_string(text, NAME, c, &err);

	if (rc)
		T_FAIL("line %d: load: %d (%s)\n--- config:\n%s---", line, rc, err.msg, text);
}
#define LOAD_OK(text, c) load_ok(__LINE__, text, c)

/* the text is refused with -code and a message containing want; out zeroed */
static void bad(int line, const char *text, int code, const char *want)
{
	struct pmc_config c;
	struct pmc_err err = {0};
	int rc;

	memset(&c, 0xa5, sizeof(c));
	rc = pmc_config_load_string(text, NAME, &c, &err);
	if (rc != -code)
		T_FAIL("line %d: returned %d, expected %d (%s)\n--- config:\n%s---", line, rc,
		       -code, err.msg, text);
	if (!strstr(err.msg, want) || strchr(err.msg, '\n'))
		T_FAIL("line %d: message\n  '%s'\nlacks\n  '%s'", line, err.msg, want);
	if (err.code != code)
		T_FAIL("line %d: err.code %d, expected %d", line, err.code, code);
	if (memcmp(&c, &zero, sizeof(c)))
		T_FAIL("line %d: the output is not zeroed after an error", line);
	printf("ok: refused: %s\n", err.msg);
}
#define BAD(text, code, want) bad(__LINE__, text, code, want)

static void test_table(void)
{
	struct pmc_config c;
	struct pmc_config_volume v;
	struct pmc_wb_conf wb;
	struct pmc_volume_conf vc;
	int lists = 0;

	T_TRUE(pmc_config_table_len <= 64);
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		const char *dot = strchr(k->key, '.');

		T_TRUE(k->doc && k->doc[0] && !strchr(k->doc, '\n'));
		/* one level of groups; volume keys have none but disk.* (NVMe-oF) */
		if (dot)
			T_TRUE(!strchr(dot + 1, '.') &&
			       (k->scope == PMC_CONFIG_SCOPE_TOP || !strncmp(k->key, "disk.", 5)));
		T_TRUE(pmc_config_key_find(k->scope, k->key) == k); /* unique */
		if (k->flags & PMC_CONFIG_REQUIRED)
			T_TRUE(k->def == NULL);
		else
			T_TRUE(k->def != NULL);
		if (k->flags & PMC_CONFIG_RUNTIME) /* set takes numbers and words */
			T_TRUE(k->type == PMC_CONFIG_T_INT || k->type == PMC_CONFIG_T_SIZE ||
			       k->type == PMC_CONFIG_T_WORD);
		if (k->type == PMC_CONFIG_T_LIST) {
			lists++;
			continue;
		}
		if (k->type == PMC_CONFIG_T_WORD)
			T_TRUE(k->words && k->words[0]);
		if (k->type == PMC_CONFIG_T_INT || k->type == PMC_CONFIG_T_SIZE)
			T_TRUE(k->min <= k->max);
		T_TRUE(k->size > 0);
	}
	T_EQ(lists, 1);

	/* defaults are canonical: written back exactly as in the table */
	pmc_config_default(&c);
	pmc_config_volume_default(&v);
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		const void *base = k->scope == PMC_CONFIG_SCOPE_TOP ? (void *)&c : (void *)&v;
		char buf[256], want[256];

		if (!k->def)
			continue;
		pmc_config_key_format(k, base, buf, sizeof(buf));
		if (k->type == PMC_CONFIG_T_INT || (k->type == PMC_CONFIG_T_SIZE &&
						    strspn(k->def, "0123456789") == strlen(k->def)))
			snprintf(want, sizeof(want), "%s", k->def);
		else
			snprintf(want, sizeof(want), "\"%s\"", k->def);
		if (strcmp(buf, want))
			T_FAIL("%s: default written as %s, table says %s", k->key, buf, want);
	}

	/* the table's defaults agree with the engine's where the brief says so */
	pmc_wb_conf_default(&wb);
	T_EQ(c.wb.high_pct, wb.high_pct);
	T_EQ(c.wb.low_pct, wb.low_pct);
	T_EQ(c.wb.max_age_ms, wb.max_age_ms);
	T_EQ(c.wb.max_io_bytes, wb.max_io_bytes);
	T_EQ(c.wb.max_inflight, wb.max_inflight);
	T_EQ(c.wb.busy_inflight, wb.busy_inflight);
	T_EQ(c.wb.idle_ms, wb.idle_ms);
	T_EQ(c.wb.retry_ms, wb.retry_ms);
	T_EQ(c.wb.stall_ms, wb.stall_ms);
	T_EQ(c.wb.max_req_bytes, wb.max_req_bytes); /* queues.max_io: 1 MiB */
	pmc_volume_conf_default(&vc);
	T_EQ(v.vc.mode, vc.mode);
	T_EQ(v.vc.admit_after_misses, vc.admit_after_misses);
	T_EQ(v.vc.seq_cutoff_bytes, 4 << 20); /* pmcached's default; the engine's is off */
	T_EQ(v.vc.nospace, vc.nospace);
	T_EQ(v.ublk_id, -1);
	T_EQ(c.log_level, LOG_INFO);
	T_EQ(c.queues_count, 2);
	T_EQ(c.queues_depth, 128);
	T_EQ(c.pmem_block_size, 4096);
	T_TRUE(!strcmp(c.state_dir, "/var/lib/pmcache"));
	T_TRUE(!strcmp(c.control_socket, "/run/pmcache/pmcached.sock"));
	T_TRUE(!strcmp(c.control_group, ""));

	/* words are the enums' names, in the enums' order */
	const struct pmc_config_key *km = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, "mode");
	for (int m = PMC_MODE_WRITE_BACK; m <= PMC_MODE_PASS_THROUGH; m++)
		T_TRUE(!strcmp(km->words[m], pmc_mode_name((enum pmc_mode)m)));
	T_TRUE(km->words[PMC_MODE_PASS_THROUGH + 1] == NULL);
	const struct pmc_config_key *kl = pmc_config_key_find(PMC_CONFIG_SCOPE_TOP, "log.level");
	T_TRUE(!strcmp(kl->words[LOG_EMERG], "emerg") && !strcmp(kl->words[LOG_ERR], "err") &&
	       !strcmp(kl->words[LOG_WARNING], "warning") &&
	       !strcmp(kl->words[LOG_DEBUG], "debug"));
	const struct pmc_config_key *kn = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, "nospace");
	T_TRUE(!strcmp(kn->words[PMC_NOSPACE_WAIT], "wait") &&
	       !strcmp(kn->words[PMC_NOSPACE_AROUND], "around"));
	printf("ok: table (%zu keys)\n", pmc_config_table_len);
}

static void test_good(void)
{
	struct pmc_config c;
	struct pmc_err err;

	/* the least a config needs: every other key at its default */
	LOAD_OK(PMEM VOL1, &c);
	T_TRUE(!strcmp(c.pmem_path, "/dev/dax0.0"));
	T_EQ(c.pmem_size, 0);
	T_EQ(c.pmem_format, PMC_CONFIG_FORMAT_IF_BLANK);
	T_EQ(c.nr_volumes, 1);
	T_TRUE(!strcmp(c.volumes[0].name, "db"));
	T_TRUE(!strcmp(c.volumes[0].disk, "/dev/sdb"));
	T_EQ(c.volumes[0].vc.mode, PMC_MODE_WRITE_BACK);
	T_EQ(c.volumes[0].vc.admit_after_misses, 1);
	T_EQ(c.volumes[0].ublk_id, -1);
	T_EQ(c.wb.high_pct, 50);
	T_EQ(c.wb.max_req_bytes, 1024 * 1024);
	T_OK(pmc_config_check(&c, NULL));
	pmc_config_free(&c);
	T_TRUE(!memcmp(&c, &zero, sizeof(c)));
	pmc_config_free(&c); /* twice is fine */
	pmc_config_free(NULL);

	/* everything set, in both assignment styles, comments of all kinds */
	LOAD_OK(
	    "# comment\n"
	    "pmem: { path = \"/mnt/pmem/cache\"; size = \"2G\"; format = \"never\"; "
	    "block_size = 4096; };\n"
	    "state_dir = \"/srv/pmc\"; // comment\n"
	    "control = { socket = \"/run/p.sock\"; group = \"pmcache-admin\"; };\n"
	    "log = { level = \"debug\"; };\n"
	    "/* a\n   block comment */\n"
	    "queues = { count = 64; depth = 1024; max_io = \"1M\"; };\n"
	    "writeback = { high_pct = 100; low_pct = 0; max_age_ms = 0; max_io = \"16M\";\n"
	    "  max_inflight = 1024; busy_inflight = 1024; idle_ms = 60000; retry_ms = 1;\n"
	    "  stall_ms = 600000; };\n"
	    "volumes = (\n"
	    "  { name = \"db\"; disk = \"/dev/sdb\"; mode = \"write-through\";\n"
	    "    admit_after_misses = 255; seq_cutoff = \"4M\"; nospace = \"around\"; ublk_id = 0; "
	    "},\n"
	    "  { name = \"logs.2_x-y\"; disk = \"/dev/disk/by-id/nvme-x\"; mode = \"pass-through\";"
	    " ublk_id = 1023; },\n"
	    "  { name = \"w\"; disk = \"/dev/sdd\"; mode = \"write-around\"; seq_cutoff = 8192L; "
	    "}\n"
	    ");\n",
	    &c);
	T_TRUE(!strcmp(c.pmem_path, "/mnt/pmem/cache"));
	T_EQ(c.pmem_size, 2ull << 30);
	T_EQ(c.pmem_format, PMC_CONFIG_FORMAT_NEVER);
	T_TRUE(!strcmp(c.state_dir, "/srv/pmc"));
	T_TRUE(!strcmp(c.control_socket, "/run/p.sock"));
	T_TRUE(!strcmp(c.control_group, "pmcache-admin"));
	T_EQ(c.log_level, LOG_DEBUG);
	T_EQ(c.queues_count, 64);
	T_EQ(c.queues_depth, 1024);
	T_EQ(c.wb.max_req_bytes, 1 << 20);
	T_EQ(c.wb.high_pct, 100);
	T_EQ(c.wb.low_pct, 0);
	T_EQ(c.wb.max_age_ms, 0);
	T_EQ(c.wb.max_io_bytes, 16 << 20);
	T_EQ(c.wb.max_inflight, 1024);
	T_EQ(c.wb.busy_inflight, 1024);
	T_EQ(c.wb.idle_ms, 60000);
	T_EQ(c.wb.retry_ms, 1);
	T_EQ(c.wb.stall_ms, 600000);
	T_EQ(c.nr_volumes, 3);
	T_EQ(c.volumes[0].vc.mode, PMC_MODE_WRITE_THROUGH);
	T_EQ(c.volumes[0].vc.admit_after_misses, 255);
	T_EQ(c.volumes[0].vc.seq_cutoff_bytes, 4 << 20);
	T_EQ(c.volumes[0].vc.nospace, PMC_NOSPACE_AROUND);
	T_EQ(c.volumes[0].ublk_id, 0);
	T_TRUE(!strcmp(c.volumes[1].name, "logs.2_x-y"));
	T_EQ(c.volumes[1].vc.mode, PMC_MODE_PASS_THROUGH);
	T_EQ(c.volumes[1].vc.nospace, PMC_NOSPACE_WAIT);
	T_EQ(c.volumes[1].ublk_id, 1023);
	T_EQ(c.volumes[2].vc.mode, PMC_MODE_WRITE_AROUND);
	T_EQ(c.volumes[2].vc.seq_cutoff_bytes, 8192);
	T_EQ(c.volumes[2].ublk_id, -1);
	pmc_config_free(&c);

	/* a name of 63 bytes, a disk path of 127, a socket path of 107 */
	{
		char text[1024], name[64], disk[128], sock[108];

		memset(name, 'n', 63);
		name[63] = '\0';
		memset(disk, 'd', 127);
		disk[0] = '/';
		disk[127] = '\0';
		memset(sock, 's', 107);
		sock[0] = '/';
		sock[107] = '\0';
		snprintf(text, sizeof(text),
			 PMEM "control = { socket = \"%s\"; };\n"
			      "volumes = ( { name = \"%s\"; disk = \"%s\"; } );\n",
			 sock, name, disk);
		LOAD_OK(text, &c);
		T_EQ(strlen(c.volumes[0].name), 63);
		T_EQ(strlen(c.volumes[0].disk), 127);
		T_EQ(strlen(c.control_socket), 107);
		pmc_config_free(&c);
	}
	/* what a message quotes stays one line of ASCII */
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; mode = "
		 "\"w\\nb\\x01\xc3\xa9\\\"\"; } );\n",
	    EINVAL, NAME ":2: volumes.[0].mode: \"w\\x0ab\\x01\\xc3\\xa9\\\"\" is not one of");
	BAD("pmem = { path = "
	    "\"dax\\n0123456789012345678901234567890123456789012345678901234567890123456789\"; "
	    "};\n" VOL1,
	    EINVAL, NAME ":1: pmem.path: the path contains a control character");
	BAD("pmem = { path = "
	    "\"dax01234567890123456789012345678901234567890123456789012345678901234567890123456789"
	    "\"; };\n" VOL1,
	    EINVAL,
	    NAME ":1: pmem.path: "
		 "\"dax0123456789012345678901234567890123456789012345678901234567890...\" is not "
		 "an absolute path");
	/* UTF-8 in a path is fine */
	LOAD_OK(PMEM "state_dir = \"/srv/caf\xc3\xa9\";\n" VOL1, &c);
	pmc_config_free(&c);
	printf("ok: good configs\n");
}

static void test_sizes(void)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} ok[] = {
	    {"0", 0},
	    {"4096", 4096},
	    {"\"4096\"", 4096},
	    {"\"4K\"", 4096},
	    {"\"4k\"", 4096},
	    {"\"1M\"", 1 << 20},
	    {"\"3m\"", 3 << 20},
	    {"\"1G\"", 1ull << 30},
	    {"\"2g\"", 2ull << 30},
	    {"\"1T\"", 1ull << 40},
	    {"\"1024T\"", 1ull << 50},
	    {"4294967296L", 1ull << 32},
	    {"0x1000", 4096},
	};
	static const struct {
		const char *text;
		int code;
		const char *msg;
	} no[] = {
	    {"\"12X\"", EINVAL,
	     "pmem.size: \"12X\" is not a size (an integer, or digits with K, "
	     "M, G or T such as \"512K\")"},
	    {"\"K\"", EINVAL, "pmem.size: \"K\" is not a size"},
	    {"\"1.5M\"", EINVAL, "pmem.size: \"1.5M\" is not a size"},
	    {"\"-4K\"", EINVAL, "pmem.size: \"-4K\" is not a size"},
	    {"\" 4K\"", EINVAL, "pmem.size: \" 4K\" is not a size"},
	    {"\"4KB\"", EINVAL, "pmem.size: \"4KB\" is not a size"},
	    {"\"4K \"", EINVAL, "pmem.size: \"4K \" is not a size"},
	    {"\"\"", EINVAL, "pmem.size: \"\" is not a size"},
	    {"\"99999999999999999999\"", ERANGE,
	     "pmem.size: \"99999999999999999999\" is too "
	     "large"},
	    {"\"99999999T\"", ERANGE, "pmem.size: \"99999999T\" is too large"},
	    {"\"8388608T\"", ERANGE, "pmem.size: \"8388608T\" is too large"},
	    {"\"1025T\"", ERANGE, "pmem.size: \"1025T\" is above the maximum 1024T"},
	    {"-4096", ERANGE, "pmem.size: -4096 is below the minimum 0"},
	    {"4097", EINVAL, "pmem.size: 4097 is not a multiple of 4K"},
	    {"\"1023\"", EINVAL, "pmem.size: \"1023\" is not a multiple of 4K"},
	    {"1.5", EINVAL,
	     "pmem.size: expected a size (an integer, or a string such as "
	     "\"512K\"), got a float"},
	    {"true", EINVAL,
	     "pmem.size: expected a size (an integer, or a string such as "
	     "\"512K\"), got a boolean"},
	    {"[1]", EINVAL, "got an array"},
	    {"(1)", EINVAL, "got a list"},
	    {"{ a = 1; }", EINVAL, "got a group"},
	    {"4294967296", ERANGE,
	     "pmcached.conf:1: pmem.size: 4294967296 does not fit in 32 "
	     "bits: write 4294967296L, or a size such as \"4G\""},
	    {"0x100000000", ERANGE, "pmem.size: 0x100000000 does not fit in 32 bits"},
	    {"99999999999999999999", ERANGE, "pmem.size: 99999999999999999999 does not fit"},
	};
	struct pmc_config c;
	char text[512], buf[32];
	uint64_t b;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(text, sizeof(text), "pmem = { path = \"/x\"; size = %s; };\n" VOL1,
			 ok[i].text);
		LOAD_OK(text, &c);
		if (c.pmem_size != ok[i].bytes)
			T_FAIL("size %s: %llu, expected %llu", ok[i].text,
			       (unsigned long long)c.pmem_size, (unsigned long long)ok[i].bytes);
		pmc_config_free(&c);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		snprintf(text, sizeof(text), "pmem = { path = \"/x\"; size = %s; };\n" VOL1,
			 no[i].text);
		bad(__LINE__, text, no[i].code, no[i].msg);
	}
	/* the parser and formatter on their own */
	T_EQ(pmc_config_size_parse("18446744073709551615", &b), 0);
	T_TRUE(b == UINT64_MAX);
	T_EQ(pmc_config_size_parse("18446744073709551616", &b), -ERANGE);
	T_EQ(pmc_config_size_parse("16777216T", &b), -ERANGE);
	T_EQ(pmc_config_size_parse("16777215T", &b), 0);
	pmc_config_size_format(0, buf, sizeof(buf));
	T_TRUE(!strcmp(buf, "0"));
	pmc_config_size_format(4097, buf, sizeof(buf));
	T_TRUE(!strcmp(buf, "4097"));
	pmc_config_size_format(3ull << 40, buf, sizeof(buf));
	T_TRUE(!strcmp(buf, "3T"));
	pmc_config_size_format(1ull << 60, buf, sizeof(buf));
	T_TRUE(!strcmp(buf, "1048576T"));
	pmc_config_size_format(1536 * 1024, buf, sizeof(buf));
	T_TRUE(!strcmp(buf, "1536K"));
	printf("ok: sizes\n");
}

static void test_errors(void)
{
	/* syntax, from libconfig, with its line */
	BAD(PMEM "volumes = (\n{ name = = \"db\"; disk = \"/dev/sdb\"; }\n);\n", EINVAL,
	    NAME ":3: syntax error");
	BAD("pmem = {\n  path = \"/x\";\n  size = ;\n};\n" VOL1, EINVAL, NAME ":3: syntax error");
	BAD(PMEM "pmem = { size = 0; };\n" VOL1, EINVAL, NAME ":2: duplicate setting name");
	BAD("pmem = { path = \"/x\n", EINVAL, NAME ":");
	BAD("", EINVAL, NAME ": pmem.path: missing (required)");
	BAD("@include \"/etc/passwd\"\n", EINVAL, NAME ":1: @include is not supported");
	BAD(PMEM "  \t@include \"/dev/zero\"\n" VOL1, EINVAL, NAME ":2: @include is not supported");

	/* ranges, with file:line: key */
	BAD(PMEM "writeback = {\n\thigh_pct = 120;\n};\n" VOL1, ERANGE,
	    NAME ":3: writeback.high_pct: 120 is above the maximum 100");
	BAD(PMEM "queues = { count = 0; };\n" VOL1, ERANGE,
	    NAME ":2: queues.count: 0 is below the minimum 1");
	BAD(PMEM "queues = { count = 65; };\n" VOL1, ERANGE,
	    NAME ":2: queues.count: 65 is above the maximum 64");
	BAD(PMEM "queues = { depth = 1025; };\n" VOL1, ERANGE,
	    NAME ":2: queues.depth: 1025 is above the maximum 1024");
	BAD(PMEM "queues = { max_io = \"2M\"; };\n" VOL1, ERANGE,
	    NAME ":2: queues.max_io: \"2M\" is above the maximum 1M");
	BAD(PMEM "queues = { max_io = 2048; };\n" VOL1, ERANGE,
	    NAME ":2: queues.max_io: 2048 is below the minimum 4K");
	BAD(PMEM "queues = { max_io = 5000; };\n" VOL1, EINVAL,
	    NAME ":2: queues.max_io: 5000 is not a multiple of 4K");
	BAD(PMEM "writeback = { max_io = \"32M\"; };\n" VOL1, ERANGE,
	    NAME ":2: writeback.max_io: \"32M\" is above the maximum 16M");
	BAD(PMEM "writeback = { max_inflight = 0; };\n" VOL1, ERANGE,
	    NAME ":2: writeback.max_inflight: 0 is below the minimum 1");
	BAD(PMEM "writeback = { max_age_ms = -1; };\n" VOL1, ERANGE,
	    NAME ":2: writeback.max_age_ms: -1 is below the minimum 0");
	BAD(PMEM "writeback = { retry_ms = 0; };\n" VOL1, ERANGE,
	    NAME ":2: writeback.retry_ms: 0 is below the minimum 1");
	BAD(PMEM "writeback = { stall_ms = 99; };\n" VOL1, ERANGE,
	    NAME ":2: writeback.stall_ms: 99 is below the minimum 100");
	BAD(PMEM "writeback = { idle_ms = 60001; };\n" VOL1, ERANGE,
	    NAME ":2: writeback.idle_ms: 60001 is above the maximum 60000");
	BAD("pmem = { path = \"/x\"; block_size = 8192; };\n" VOL1, ERANGE,
	    NAME ":1: pmem.block_size: 8192 is not supported (only 4K)");
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; admit_after_misses = 256; } "
		 ");\n",
	    ERANGE, NAME ":2: volumes.[0].admit_after_misses: 256 is above the maximum 255");
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; seq_cutoff = \"2T\"; } );\n",
	    ERANGE, NAME ":2: volumes.[0].seq_cutoff: \"2T\" is above the maximum 1T");
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; ublk_id = 1024; } );\n", ERANGE,
	    NAME ":2: volumes.[0].ublk_id: 1024 is above the maximum 1023");
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; ublk_id = -2; } );\n", ERANGE,
	    NAME ":2: volumes.[0].ublk_id: -2 is below the minimum -1");
	BAD(PMEM "queues = {\n count = 2; depth = 3000000000; };\n" VOL1, ERANGE,
	    NAME ":3: queues.depth: 3000000000 does not fit in 32 bits: write 3000000000L");
	BAD(PMEM "queues = { depth = 3000000000L; };\n" VOL1, ERANGE,
	    NAME ":2: queues.depth: 3000000000 is above the maximum 1024");

	/* words */
	BAD(PMEM "volumes = (\n"
		 "  { name = \"db\"; disk = \"/dev/sdb\"; },\n"
		 "  { name = \"logs\"; disk = \"/dev/sdc\";\n"
		 "    mode = \"fast\"; }\n"
		 ");\n",
	    EINVAL,
	    NAME ":5: volumes.[1].mode: \"fast\" is not one of write-back, write-through, "
		 "write-around, pass-through");
	BAD(PMEM "log = { level = \"verbose\"; };\n" VOL1, EINVAL,
	    NAME
	    ":2: log.level: \"verbose\" is not one of emerg, alert, crit, err, warning, notice, "
	    "info, debug");
	BAD(PMEM "log = { level = \"INFO\"; };\n" VOL1, EINVAL,
	    "log.level: \"INFO\" is not one of");
	BAD("pmem = { path = \"/x\"; format = \"always\"; };\n" VOL1, EINVAL,
	    NAME ":1: pmem.format: \"always\" is not one of if-blank, never");
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; nospace = 1; } );\n", EINVAL,
	    NAME ":2: volumes.[0].nospace: expected a string, got an integer");

	/* types */
	BAD("pmem = { path = 5; };\n" VOL1, EINVAL,
	    NAME ":1: pmem.path: expected a string, got an integer");
	BAD(PMEM "writeback = { high_pct = \"50\"; };\n" VOL1, EINVAL,
	    NAME ":2: writeback.high_pct: expected an integer, got a string");
	BAD(PMEM "writeback = { high_pct = 50.0; };\n" VOL1, EINVAL,
	    NAME ":2: writeback.high_pct: expected an integer, got a float");
	BAD(PMEM "writeback = { high_pct = true; };\n" VOL1, EINVAL,
	    NAME ":2: writeback.high_pct: expected an integer, got a boolean");
	BAD(PMEM "writeback = { high_pct = { x = 1; }; };\n" VOL1, EINVAL,
	    NAME ":2: writeback.high_pct: expected an integer, got a group");
	BAD("pmem = \"/dev/dax0.0\";\n" VOL1, EINVAL,
	    NAME ":1: pmem: expected a group { ... }, got a string");
	BAD(PMEM "volumes = 5;\n", EINVAL,
	    NAME ":2: volumes: expected a list of groups ( { ... }, ... ), got an integer");
	BAD(PMEM "volumes = { name = \"db\"; disk = \"/dev/sdb\"; };\n", EINVAL,
	    NAME ":2: volumes: expected a list of groups ( { ... }, ... ), got a group");
	BAD(PMEM "volumes = [ \"db\" ];\n", EINVAL, NAME ":2: volumes: expected a list of groups");
	BAD(PMEM "volumes = (\n { name = \"db\"; disk = \"/dev/sdb\"; },\n \"x\" );\n", EINVAL,
	    NAME ":4: volumes.[1]: expected a group { name = ...; disk = ...; }, got a string");
	BAD(PMEM "volumes = ( );\n", EINVAL,
	    NAME ":2: volumes: the list is empty: name at least one volume");
	BAD(PMEM "state_dir = (\"/a\");\n" VOL1, EINVAL,
	    NAME ":2: state_dir: expected a string, got a list");

	/* unknown keys: typos are not ignored */
	BAD(PMEM "writeback = {\n  hihg_pct = 60;\n};\n" VOL1, EINVAL,
	    NAME ":3: writeback.hihg_pct: unknown key (did you mean writeback.high_pct?)");
	BAD(PMEM "writebak = { high_pct = 60; };\n" VOL1, EINVAL,
	    NAME ":2: writebak: unknown key (did you mean writeback?)");
	BAD(PMEM "statedir = \"/x\";\n" VOL1, EINVAL,
	    NAME ":2: statedir: unknown key (did you mean state_dir?)");
	BAD(PMEM "frobnicate = 1;\n" VOL1, EINVAL, NAME ":2: frobnicate: unknown key");
	BAD("pmem = {\n path = \"/x\";\n huge = 1; };\n" VOL1, EINVAL,
	    NAME ":3: pmem.huge: unknown key");
	BAD("pmem = { path = \"/x\"; sub = { path = \"/y\"; }; };\n" VOL1, EINVAL,
	    NAME ":1: pmem.sub: unknown key");
	BAD(PMEM "volumes = (\n { name = \"db\"; disk = \"/dev/sdb\";\n   modee = \"write-back\"; "
		 "}\n);\n",
	    EINVAL, NAME ":4: volumes.[0].modee: unknown key (did you mean mode?)");
	BAD(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; high_pct = 5; } );\n", EINVAL,
	    NAME ":2: volumes.[0].high_pct: unknown key");
	BAD(PMEM "name = \"db\";\n" VOL1, EINVAL, NAME ":2: name: unknown key");

	/* missing required keys */
	BAD("pmem = { size = 0; };\n" VOL1, EINVAL, NAME ": pmem.path: missing (required)");
	BAD(PMEM, EINVAL, NAME ": volumes: missing (required; name at least one volume)");
	BAD(PMEM "volumes = (\n { name = \"db\"; disk = \"/dev/sdb\"; },\n { disk = \"/dev/sdc\"; "
		 "}\n);\n",
	    EINVAL, NAME ":4: volumes.[1].name: missing (required)");
	BAD(PMEM "volumes = (\n { name = \"db\"; }\n);\n", EINVAL,
	    NAME ":3: volumes.[0].disk: missing (required)");

	/* unique names, disks and ids */
	BAD(PMEM "volumes = (\n"
		 " { name = \"db\"; disk = \"/dev/sdb\"; },\n"
		 " { name = \"logs\"; disk = \"/dev/sdc\"; },\n"
		 " { disk = \"/dev/sdd\";\n"
		 "   name = \"db\"; }\n"
		 ");\n",
	    EEXIST, NAME ":6: volumes: two volumes named \"db\"");
	BAD(PMEM "volumes = (\n"
		 " { name = \"db\"; disk = \"/dev/sdb\"; },\n"
		 " { name = \"logs\";\n"
		 "   disk = \"/dev/sdb\"; }\n"
		 ");\n",
	    EEXIST, NAME ":5: volumes: two volumes on disk \"/dev/sdb\" (\"db\" and \"logs\")");
	BAD(PMEM "volumes = (\n"
		 " { name = \"db\"; disk = \"/dev/sdb\"; ublk_id = 3; },\n"
		 " { name = \"logs\"; disk = \"/dev/sdc\"; ublk_id = -1; },\n"
		 " { name = \"w\"; disk = \"/dev/sdd\"; ublk_id = -1; },\n"
		 " { name = \"x\"; disk = \"/dev/sde\";\n"
		 "   ublk_id = 3; }\n"
		 ");\n",
	    EEXIST, NAME ":7: volumes.[3].ublk_id: 3 is also the id of volume \"db\"");
	BAD(PMEM "volumes = (\n { name = \"db\";\n disk = \"/dev/dax0.0\"; }\n);\n", EINVAL,
	    NAME ":4: volumes.[0].disk: \"/dev/dax0.0\" is also pmem.path");

	/* two paths of one disk (a link and its target; a by-id link and
	 * /dev/nvme0n1 alike): compared by the kernel's identity, not by string */
	{
		char dir[] = "/tmp/pmc-cfgXXXXXX", disk[64], link[64], text[512], want[400];
		int fd;

		T_TRUE(mkdtemp(dir));
		snprintf(disk, sizeof(disk), "%s/disk", dir);
		snprintf(link, sizeof(link), "%s/by-id-link", dir);
		fd = open(disk, O_CREAT | O_RDWR, 0600);
		T_TRUE(fd >= 0);
		close(fd);
		T_TRUE(symlink(disk, link) == 0);
		snprintf(text, sizeof(text),
			 PMEM "volumes = (\n { name = \"a\"; disk = \"%s\"; },\n"
			      " { name = \"b\";\n   disk = \"%s\"; }\n);\n",
			 disk, link);
		snprintf(want, sizeof(want),
			 NAME ":5: volumes: \"%s\" and \"%s\" are the same disk (volumes \"a\" "
			      "and \"b\")",
			 link, disk);
		BAD(text, EEXIST, want);
		snprintf(text, sizeof(text),
			 "pmem = { path = \"%s\"; };\nvolumes = (\n { name = \"a\";\n"
			 " disk = \"%s\"; }\n);\n",
			 disk, link);
		snprintf(want, sizeof(want), NAME ":4: volumes.[0].disk: \"%s\" is also pmem.path",
			 link);
		BAD(text, EINVAL, want);
		unlink(link);
		unlink(disk);
		rmdir(dir);
	}

	/* rules between keys: the message blames the key set in the file */
	BAD(PMEM "writeback = {\n high_pct = 40;\n low_pct = 60;\n};\n" VOL1, EINVAL,
	    NAME ":4: writeback.low_pct: 60 is above writeback.high_pct (40)");
	BAD(PMEM "writeback = {\n high_pct = 20;\n};\n" VOL1, EINVAL,
	    NAME ":3: writeback.high_pct: 20 is below writeback.low_pct (30, the default)");
	BAD(PMEM "writeback = {\n low_pct = 51;\n};\n" VOL1, EINVAL,
	    NAME ":3: writeback.low_pct: 51 is above writeback.high_pct (50, the default)");
	BAD(PMEM "writeback = { max_inflight = 2; };\n" VOL1, EINVAL,
	    NAME ":2: writeback.max_inflight: 2 is below writeback.busy_inflight (4, the default)");
	BAD(PMEM "writeback = { max_inflight = 8; busy_inflight = 9; };\n" VOL1, EINVAL,
	    NAME ":2: writeback.busy_inflight: 9 is above writeback.max_inflight (8)");

	/* names */
	BAD(PMEM "volumes = ( { name = \"my db\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    NAME ":2: volumes.[0].name: name \"my db\" has ' ': use A-Z a-z 0-9 . _ -");
	BAD(PMEM "volumes = ( { name = \"a/b\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    "volumes.[0].name: name \"a/b\" has '/'");
	BAD(PMEM "volumes = ( { name = \"caf\xc3\xa9\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    "volumes.[0].name: name has byte 0xc3: use A-Z a-z 0-9 . _ -");
	BAD(PMEM "volumes = ( { name = \"\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    NAME ":2: volumes.[0].name: the name is empty");
	BAD(PMEM "volumes = ( { name = \".\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    NAME ":2: volumes.[0].name: \".\" cannot be a name");
	BAD(PMEM "volumes = ( { name = \"..\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    NAME ":2: volumes.[0].name: \"..\" cannot be a name");
	BAD(PMEM "volumes = ( { name = \"-db\"; disk = \"/dev/sdb\"; } );\n", EINVAL,
	    NAME ":2: volumes.[0].name: name \"-db\" starts with '-'");
	BAD(PMEM "volumes = ( { name = "
		 "\"a123456789012345678901234567890123456789012345678901234567890123\"; "
		 "disk = \"/dev/sdb\"; } );\n",
	    EINVAL, NAME ":2: volumes.[0].name: name is 64 bytes long, the limit is 63");
	BAD(PMEM "control = { group = \"wheel users\"; };\n" VOL1, EINVAL,
	    NAME ":2: control.group: group name \"wheel users\" has ' '");
	BAD(PMEM "control = { group = \"abcdefghijabcdefghijabcdefghijabc\"; };\n" VOL1, EINVAL,
	    NAME ":2: control.group: group name is 33 bytes long, the limit is 32");

	/* paths */
	BAD("pmem = { path = \"dax0.0\"; };\n" VOL1, EINVAL,
	    NAME ":1: pmem.path: \"dax0.0\" is not an absolute path");
	BAD("pmem = { path = \"\"; };\n" VOL1, EINVAL, NAME ":1: pmem.path: the path is empty");
	BAD(PMEM "state_dir = \"/var/\\x01lib\";\n" VOL1, EINVAL,
	    NAME ":2: state_dir: the path contains a control character");
	BAD(PMEM "state_dir = \"/var/lib\\n\";\n" VOL1, EINVAL,
	    NAME ":2: state_dir: the path contains a control character");
	BAD(PMEM "state_dir = \"/var/\\xff\";\n" VOL1, EINVAL,
	    NAME ":2: state_dir: the path is not valid UTF-8");
	BAD(PMEM "state_dir = \"/var/\xc0\xaf\";\n" VOL1, EINVAL,
	    NAME ":2: state_dir: the path is not valid UTF-8");
	BAD(PMEM "state_dir = \"/var/\xed\xa0\x80\";\n" VOL1, EINVAL,
	    NAME ":2: state_dir: the path is not valid UTF-8");
	BAD(PMEM "control = { socket = \"/run/"
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		 "aaaaaaaaaaaaaaaaaaaaaaaaa\"; };\n" VOL1,
	    ENAMETOOLONG, NAME ":2: control.socket: the path is 109 bytes long, the limit is 107");
	{
		char text[256 + PMC_VOLUME_DISK_MAX];
		char disk[PMC_VOLUME_DISK_MAX + 2];

		memset(disk, 'd', sizeof(disk) - 1);
		disk[0] = '/';
		disk[sizeof(disk) - 1] = '\0';
		snprintf(text, sizeof(text),
			 PMEM "volumes = ( { name = \"db\"; disk = \"%s\"; } );\n", disk);
		BAD(text, ENAMETOOLONG,
		    NAME ":2: volumes.[0].disk: the path is 128 bytes long, the limit is 127");
	}
	printf("ok: errors\n");
}

/* loading from a file: its name in messages, and what is not a config file */
static void test_files(void)
{
	char dir[] = "/tmp/pmc-test-config-XXXXXX", path[64];
	struct pmc_config c;
	struct pmc_err err;
	FILE *f;

	T_TRUE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/pmcached.conf", dir);
	f = fopen(path, "w");
	T_TRUE(f != NULL);
	fputs(PMEM "\n" VOL1 "writeback = { low_pct = 70; };\n", f);
	fclose(f);
	memset(&c, 0x5a, sizeof(c));
	T_ERR(pmc_config_load(path, &c, &err), EINVAL, ":4: writeback.low_pct: 70 is above");
	T_TRUE(!strncmp(err.msg, path, strlen(path)));
	T_TRUE(!memcmp(&c, &zero, sizeof(c)));

	f = fopen(path, "w");
	fputs(PMEM VOL1, f);
	fclose(f);
	T_OK(pmc_config_load(path, &c, &err));
	T_TRUE(!strcmp(c.volumes[0].name, "db"));
	pmc_config_free(&c);

	f = fopen(path, "w");
	fputs(PMEM, f);
	fputc('\0', f);
	fputs(VOL1, f);
	fclose(f);
	T_ERR(pmc_config_load(path, &c, &err), EINVAL, "pmcached.conf: contains a NUL byte");

	f = fopen(path, "w");
	fputs(PMEM VOL1, f);
	for (int i = 0; i < (1 << 20) / 16; i++)
		fputs("# padding......\n", f);
	fclose(f);
	T_ERR(pmc_config_load(path, &c, &err), EFBIG, "bytes, the limit is 1048576");

	T_ERR(pmc_config_load(dir, &c, &err), EINVAL, "not a regular file");
	unlink(path);
	T_ERR(pmc_config_load(path, &c, &err), ENOENT, "pmcached.conf: cannot open: No such file");
	rmdir(dir);
	printf("ok: files\n");
}

/* field-by-field equality through the table */
static void expect_same(const struct pmc_config *a, const struct pmc_config *b)
{
	char x[PMC_CONFIG_PATH_MAX + 8], y[PMC_CONFIG_PATH_MAX + 8];

	T_EQ(a->nr_volumes, b->nr_volumes);
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		for (uint32_t j = 0; j < (k->scope == PMC_CONFIG_SCOPE_TOP ? 1 : a->nr_volumes);
		     j++) {
			if (k->type == PMC_CONFIG_T_LIST)
				continue;
			pmc_config_key_format(k, pmc_config_key_base(k, (struct pmc_config *)a, j),
					      x, sizeof(x));
			pmc_config_key_format(k, pmc_config_key_base(k, (struct pmc_config *)b, j),
					      y, sizeof(y));
			if (strcmp(x, y))
				T_FAIL("%s [%u]: %s != %s", k->key, j, x, y);
		}
	}
}

static void test_write(void)
{
	struct pmc_config c, d;
	struct pmc_err err;
	char *buf;
	size_t len;
	FILE *f;

	LOAD_OK("pmem = { path = \"/srv/\\\"quoted\\\\\"; size = 5368709120L; };\n"
		"queues = { max_io = 8192; };\n"
		"writeback = { max_age_ms = 86400000; max_io = 12288; };\n"
		"volumes = (\n"
		" { name = \"a\"; disk = \"/dev/sdb\"; seq_cutoff = 4100; },\n"
		" { name = \"b\"; disk = \"/dev/sdc\"; mode = \"write-around\"; ublk_id = 7; }\n"
		");\n",
		&c);
	T_TRUE(!strcmp(c.pmem_path, "/srv/\"quoted\\"));
	for (unsigned docs = 0; docs < 2; docs++) {
		f = open_memstream(&buf, &len);
		T_TRUE(f != NULL);
		T_OK(pmc_config_write(f, &c, docs ? PMC_CONFIG_WRITE_DOCS : 0));
		fclose(f);
		if (pmc_config_load_string(buf, "written", &d, &err))
			T_FAIL("the written config does not load: %s\n%s", err.msg, buf);
		expect_same(&c, &d);
		if (docs)
			T_TRUE(strstr(buf, "# default: 50; 0 to 100 %; can change at run time\n"));
		pmc_config_free(&d);
		free(buf);
	}
	pmc_config_free(&c);
	printf("ok: write\n");
}

static void test_check(void)
{
	struct pmc_config c, d;
	struct pmc_err err;
	const struct pmc_config_key *k;
	struct pmc_config_value v = {.kind = PMC_CONFIG_V_INT, .i = 80};
	char buf[64];

	LOAD_OK(PMEM "volumes = ( { name = \"db\"; disk = \"/dev/sdb\"; }, { name = \"x\"; disk = "
		     "\"/dev/sdc\"; } );\n",
		&c);
	T_OK(pmc_config_copy(&d, &c, &err));
	T_TRUE(d.volumes != c.volumes);

	/* a run-time change: assign, then check the whole copy */
	k = pmc_config_key_find(PMC_CONFIG_SCOPE_TOP, "writeback.low_pct");
	T_OK(pmc_config_key_assign(k, &d, &v, "set writeback.low_pct", &err));
	T_EQ(d.wb.low_pct, 80);
	T_ERR(pmc_config_check(&d, &err), EINVAL,
	      "writeback.low_pct: 80 is above writeback.high_pct (50)");
	v.i = 101;
	T_ERR(pmc_config_key_assign(k, &d, &v, "set writeback.low_pct", &err), ERANGE,
	      "set writeback.low_pct: 101 is above the maximum 100");
	T_EQ(d.wb.low_pct, 80); /* unchanged by a refusal */

	k = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, "mode");
	v.kind = PMC_CONFIG_V_STRING;
	v.s = "write-around";
	T_OK(pmc_config_key_assign(k, pmc_config_key_base(k, &d, 1), &v, "x", &err));
	T_EQ(d.volumes[1].vc.mode, PMC_MODE_WRITE_AROUND);
	T_TRUE(pmc_config_key_base(k, &d, 2) == NULL);
	pmc_config_key_format(k, &d.volumes[1], buf, sizeof(buf));
	T_TRUE(!strcmp(buf, "\"write-around\""));
	v.kind = PMC_CONFIG_V_OTHER;
	v.what = "an object";
	T_ERR(pmc_config_key_assign(k, &d.volumes[1], &v, "set mode", &err), EINVAL,
	      "set mode: expected a string, got an object");

	/* what only a broken caller can produce is still caught */
	pmc_config_free(&d);
	T_OK(pmc_config_copy(&d, &c, &err));
	strcpy(d.volumes[1].name, "db");
	T_ERR(pmc_config_check(&d, &err), EEXIST, "volumes: two volumes named \"db\"");
	strcpy(d.volumes[1].name, "x");
	d.volumes[1].vc.mode = (enum pmc_mode)9;
	T_ERR(pmc_config_check(&d, &err), EINVAL, "volumes.[1].mode: 9 is not a valid choice");
	d.volumes[1].vc.mode = PMC_MODE_WRITE_BACK;
	d.queues_depth = 0;
	T_ERR(pmc_config_check(&d, &err), ERANGE, "queues.depth: 0 is below the minimum 1");
	d.queues_depth = 1;
	d.control_group[0] = '-';
	T_ERR(pmc_config_check(&d, &err), EINVAL,
	      "control.group: group name \"-\" starts with '-'");
	d.control_group[0] = '\0';
	d.pmem_path[0] = '\0';
	T_ERR(pmc_config_check(&d, &err), EINVAL, "pmem.path: missing (required)");
	strcpy(d.pmem_path, "/dev/sdc");
	T_ERR(pmc_config_check(&d, &err), EINVAL,
	      "volumes.[1].disk: \"/dev/sdc\" is also pmem.path");
	strcpy(d.pmem_path, "/dev/dax1.0");
	T_OK(pmc_config_check(&d, &err));
	d.nr_volumes = 0;
	T_ERR(pmc_config_check(&d, &err), EINVAL, "volumes: 0 volumes, need 1 to 64");
	d.nr_volumes = 2;
	pmc_config_free(&d);

	/* names as the control protocol checks them */
	T_OK(pmc_config_name_check("db-1_x.y", "n", &err));
	T_ERR(pmc_config_name_check("db\n", "stats volume", &err), EINVAL,
	      "stats volume: name has byte 0x0a");
	pmc_config_free(&c);
	printf("ok: check\n");
}

/* many volumes: the limit, and the quadratic uniqueness check stays fast */
static void test_many(void)
{
	size_t cap = 200 * (PMC_CONFIG_VOLUMES_MAX + 1) + 64, n;
	char *text = malloc(cap);
	struct pmc_config c;
	struct pmc_err err;

	T_TRUE(text != NULL);
	n = (size_t)snprintf(text, cap, PMEM "volumes = (\n");
	for (unsigned i = 0; i < PMC_CONFIG_VOLUMES_MAX; i++)
		n += (size_t)snprintf(
		    text + n, cap - n, "{ name = \"v%u\"; disk = \"/dev/d%u\"; ublk_id = %d; }%s\n",
		    i, i, i < 1024 ? (int)i : -1, i + 1 < PMC_CONFIG_VOLUMES_MAX ? "," : "");
	snprintf(text + n, cap - n, ");\n");
	LOAD_OK(text, &c);
	T_EQ(c.nr_volumes, PMC_CONFIG_VOLUMES_MAX);
	T_OK(pmc_config_check(&c, &err));
	pmc_config_free(&c);

	/* one more is refused */
	n = (size_t)snprintf(text, cap, PMEM "volumes = (\n");
	for (unsigned i = 0; i <= PMC_CONFIG_VOLUMES_MAX; i++)
		n += (size_t)snprintf(text + n, cap - n,
				      "{ name = \"v%u\"; disk = \"/dev/d%u\"; }%s\n", i, i,
				      i < PMC_CONFIG_VOLUMES_MAX ? "," : "");
	snprintf(text + n, cap - n, ");\n");
	BAD(text, E2BIG, NAME ":2: volumes: 65 volumes, the limit is 64");
	free(text);
	printf("ok: many volumes\n");
}

/* a volume whose disk is an NVMe-oF namespace: disk = { ... } */
#define NVMF_VOL(extra)                                                                            \
	PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\"; traddr = "             \
	     "\"10.0.0.2\"; subsysnqn = \"nqn.2014-08.org.example:disk1\"; nsid = 1; " extra     \
	     " }; } );\n"

static void test_nvmf(void)
{
	struct pmc_config c, d;
	struct pmc_err err = {0};
	char label[160], *buf;
	size_t len;
	FILE *f;

	LOAD_OK(NVMF_VOL(""), &c);
	T_TRUE(pmc_config_volume_is_nvmf(&c.volumes[0]));
	T_EQ(c.volumes[0].nvmf.transport, PMC_CONFIG_TR_TCP);
	T_TRUE(!strcmp(c.volumes[0].nvmf.traddr, "10.0.0.2"));
	T_EQ(c.volumes[0].nvmf.nsid, 1u);
	T_TRUE(c.volumes[0].disk[0] == '\0');
	T_EQ(c.volumes[0].nvmf.ctrl_loss_tmo, 600);
	T_EQ(c.volumes[0].nvmf.fast_io_fail_tmo, 5);
	pmc_config_nvmf_label(&c.volumes[0].nvmf, label, sizeof(label));
	T_TRUE(!strcmp(label, "nvmf:tcp:10.0.0.2:nqn.2014-08.org.example:disk1:ns1"));
	T_OK(pmc_config_check(&c, &err));
	pmc_config_free(&c);

	/* every key, written back and loaded again */
	LOAD_OK(PMEM "volumes = ( { name = \"a\"; disk = \"/dev/sdb\"; },\n"
		     " { name = \"net\"; mode = \"write-through\";\n"
		     "   disk = { transport = \"tcp\"; traddr = \"fd00::2\"; trsvcid = \"4421\";\n"
		     "     host_traddr = \"fd00::1\"; host_iface = \"eth1\";\n"
		     "     subsysnqn = \"nqn.2014-08.org.example:disk1\";\n"
		     "     nguid = \"0123456789abcdef0123456789ABCDEF\";\n"
		     "     uuid = \"01234567-89ab-cdef-0123-456789abcdef\";\n"
		     "     hostnqn = \"nqn.2014-08.org.example:host\";\n"
		     "     hostid = \"11111111-2222-3333-4444-555555555555\";\n"
		     "     dhchap_key = \"DHHC-1:00:c2VjcmV0:\"; dhchap_ctrl_key = \"DHHC-1:00:Y3RybA==:\";\n"
		     "     ctrl_loss_tmo = -1; fast_io_fail_tmo = 2;\n"
		     "     reconnect_delay = 1; }; },\n"
		     " { name = \"lo\"; disk = { transport = \"loop\";\n"
		     "     subsysnqn = \"nqn.2014-08.org.example:disk1\"; nsid = 2; }; },\n"
		     " { name = \"disc\"; disk = { transport = \"tcp\"; traddr = \"fd00::3\";\n"
		     "     subsysnqn = \"nqn.2014-08.org.example:disk3\"; nsid = 3;\n"
		     "     dhchap_key = \"DHHC-1:00:c2VjcmV0:\"; discovery = \"yes\"; }; } );\n",
		&c);
	T_EQ(c.volumes[1].nvmf.discovery, 0);
	T_EQ(c.volumes[3].nvmf.discovery, 1);
	T_EQ(c.volumes[1].nvmf.ctrl_loss_tmo, -1);
	T_EQ(c.volumes[2].nvmf.transport, PMC_CONFIG_TR_LOOP);
	for (unsigned docs = 0; docs < 2; docs++) {
		f = open_memstream(&buf, &len);
		T_TRUE(f != NULL);
		T_OK(pmc_config_write(f, &c, docs ? PMC_CONFIG_WRITE_DOCS : 0));
		fclose(f);
		if (pmc_config_load_string(buf, "written", &d, &err))
			T_FAIL("the written config does not load: %s\n%s", err.msg, buf);
		expect_same(&c, &d);
		T_OK(pmc_config_check(&d, &err));
		pmc_config_free(&d);
		free(buf);
	}
	pmc_config_free(&c);

	/* refusals: one line naming the volume and the field */
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\";\n"
		 " subsysnqn = \"nqn.2014-08.org.example:disk1\"; nsid = 1; }; } );\n",
	    EINVAL,
	    NAME ":2: volumes.[0]: volume \"net\" disk.traddr: missing (required for transport "
		 "tcp)");
	BAD(PMEM "volumes = ( { name = \"net\";\n disk = { transport = \"tpc\"; }; } );\n", EINVAL,
	    NAME ":3: volumes.[0].disk.transport (volume \"net\"): \"tpc\" is not one of none, tcp, "
		 "rdma, fc, loop");
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { traddr = \"10.0.0.2\"; }; } );\n", EINVAL,
	    "volumes.[0].disk.transport (volume \"net\"): missing (required in a disk group");
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\"; tradr = \"x\"; }; "
		 "} );\n",
	    EINVAL, "volumes.[0].disk.tradr (volume \"net\"): unknown key (did you mean disk.traddr?)");
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\"; traddr = \"10.0.0.2\"; "
		 "subsysnqn = \"nqn.2014-08.org.example:d\"; }; } );\n",
	    EINVAL,
	    "volume \"net\" disk.nsid: missing (name the namespace by nsid, nguid or uuid)");
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\"; traddr = \"10.0.0.2\"; "
		 "subsysnqn = \"disk1\"; nsid = 1; }; } );\n",
	    EINVAL, "volume \"net\" disk.subsysnqn: \"disk1\" is not an NQN");
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\"; traddr = \"10.0.0.2\"; "
		 "nsid = 1; }; } );\n",
	    EINVAL, "volume \"net\" disk.subsysnqn: missing (required for an NVMe-oF disk)");
	BAD(NVMF_VOL("nguid = \"0123\";"), EINVAL, "volume \"net\" disk.nguid: \"0123\" is not 32 hex "
						   "digits");
	BAD(NVMF_VOL("uuid = \"0123456789ab-cdef-0123-456789abcdef0\";"), EINVAL,
	    "volume \"net\" disk.uuid: \"0123456789ab-cdef-0123-456789abcdef0\" is not a UUID");
	/* the kernel takes no host name there (libnvme resolves host_traddr
	 * only): every connect would fail with "invalid arguments" */
	BAD(PMEM "volumes = ( { name = \"net\"; disk = { transport = \"tcp\"; traddr = "
		 "\"array1.example.com\"; subsysnqn = \"nqn.2014-08.org.example:d\"; nsid = 1; }; } );\n",
	    EINVAL,
	    "volume \"net\" disk.traddr: \"array1.example.com\" is not an IPv4 or IPv6 address "
	    "(transport tcp takes no host name)");
	BAD(NVMF_VOL("trsvcid = \"99999\";"), EINVAL,
	    "volume \"net\" disk.trsvcid: \"99999\" is not a port");
	BAD(NVMF_VOL("host_traddr = \"10.0.0.1 \";"), EINVAL,
	    "disk.host_traddr (volume \"net\"): has byte 0x20");
	/* a comma would add an option to the kernel's nvme-fabrics string */
	BAD(NVMF_VOL("host_iface = \"eth0,ctrl_loss_tmo=-1\";"), EINVAL,
	    "disk.host_iface (volume \"net\"): has byte 0x2c");
	BAD(NVMF_VOL("dhchap_key = \"secret\";"), EINVAL,
	    "volume \"net\" disk.dhchap_key: not a DH-HMAC-CHAP secret (DHHC-1:...)");
	BAD(NVMF_VOL("dhchap_ctrl_key = \"DHHC-1:00:x:\";"), EINVAL,
	    "volume \"net\" disk.dhchap_ctrl_key: needs disk.dhchap_key");
	BAD(NVMF_VOL("dhchap_key = \"DHHC-1:00:c2VjcmV0:\"; dhchap_ctrl_key = \"DHHC-1:00:Y3RybA==:\"; "
		     "discovery = \"yes\";"),
	    EINVAL, "volume \"net\" disk.dhchap_ctrl_key: not with disk.discovery");
	BAD(NVMF_VOL("ctrl_loss_tmo = -2;"), ERANGE, "disk.ctrl_loss_tmo (volume \"net\"): -2 is below "
						     "the minimum -1");
	BAD(PMEM "volumes = ( { name = \"a\"; disk = { transport = \"tcp\"; traddr = \"10.0.0.2\"; "
		 "subsysnqn = \"nqn.2014-08.org.example:d\"; nsid = 1; }; },\n"
		 " { name = \"b\"; disk = { transport = \"rdma\"; traddr = \"10.0.0.3\"; "
		 "subsysnqn = \"nqn.2014-08.org.example:d\"; nsid = 1; }; } );\n",
	    EEXIST,
	    "two volumes on the NVMe-oF namespace nvmf:rdma:10.0.0.3:nqn.2014-08.org.example:d:ns1 "
	    "(\"a\" and \"b\")");
	/* another namespace of the same subsystem is another disk */
	LOAD_OK(PMEM "volumes = ( { name = \"a\"; disk = { transport = \"tcp\"; traddr = \"10.0.0.2\"; "
		     "subsysnqn = \"nqn.2014-08.org.example:d\"; nsid = 1; }; },\n"
		     " { name = \"b\"; disk = { transport = \"tcp\"; traddr = \"10.0.0.2\"; "
		     "subsysnqn = \"nqn.2014-08.org.example:d\"; nsid = 2; }; } );\n",
		&c);
	pmc_config_free(&c);

	/* in memory: disk.* without a transport, a path and a transport */
	LOAD_OK(PMEM VOL1, &c);
	snprintf(c.volumes[0].nvmf.traddr, sizeof(c.volumes[0].nvmf.traddr), "10.0.0.2");
	T_ERR(pmc_config_check(&c, &err), EINVAL,
	      "volume \"db\" disk.traddr: only for an NVMe-oF disk (set disk.transport)");
	c.volumes[0].nvmf.transport = PMC_CONFIG_TR_TCP;
	snprintf(c.volumes[0].nvmf.subsysnqn, sizeof(c.volumes[0].nvmf.subsysnqn),
		 "nqn.2014-08.org.example:d");
	c.volumes[0].nvmf.nsid = 1;
	T_ERR(pmc_config_check(&c, &err), EINVAL,
	      "volume \"db\" disk: both a path \"/dev/sdb\" and an NVMe-oF transport");
	c.volumes[0].disk[0] = '\0';
	T_OK(pmc_config_check(&c, &err));
	pmc_config_free(&c);
	printf("ok: nvmf\n");
}

int main(void)
{
	test_table();
	test_good();
	test_sizes();
	test_errors();
	test_files();
	test_write();
	test_check();
	test_many();
	test_nvmf();
	printf("test_config: all passed\n");
	return 0;
}
