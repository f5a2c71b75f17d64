/* test_ctl.c - the control protocol codec (lib/ctl.c).
 *
 * Round trips of every command through pmc_ctl_encode_req and
 * pmc_ctl_decode (with the exact lines on the wire), every kind of
 * malformed request with its message, the reply builders and the client's
 * reply decoder.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "t.h"

static void req_print(const char *what, const struct pmc_ctl_req *r)
{
	fprintf(stderr,
		"  %s: cmd %d id %d/%lld/'%s' volume '%s' add '%s' '%s' mode %d "
		"admit %u cutoff %llu nospace %d ublk %d force %d key %s value %lld\n",
		what, r->cmd, r->id.kind, (long long)r->id.num, r->id.str, r->volume, r->add.name,
		r->add.disk, r->add.vc.mode, r->add.vc.admit_after_misses,
		(unsigned long long)r->add.vc.seq_cutoff_bytes, r->add.vc.nospace, r->add.ublk_id,
		r->force, r->key ? r->key->key : "-", (long long)r->value);
}

static int req_equal(const struct pmc_ctl_req *a, const struct pmc_ctl_req *b)
{
	if (a->cmd != b->cmd || a->id.kind != b->id.kind ||
	    (a->id.kind == PMC_CTL_ID_INT && a->id.num != b->id.num) ||
	    (a->id.kind == PMC_CTL_ID_STR && strcmp(a->id.str, b->id.str)) ||
	    strcmp(a->volume, b->volume) || a->force != b->force ||
	    a->remove_devices != b->remove_devices || a->key != b->key ||
	    a->value != b->value)
		return 0;
	if (a->cmd != PMC_CTL_VOLUME_ADD)
		return 1;
	return !strcmp(a->add.name, b->add.name) && !strcmp(a->add.disk, b->add.disk) &&
	       !memcmp(&a->add.nvmf, &b->add.nvmf, sizeof(a->add.nvmf)) &&
	       a->add.vc.mode == b->add.vc.mode &&
	       a->add.vc.admit_after_misses == b->add.vc.admit_after_misses &&
	       a->add.vc.seq_cutoff_bytes == b->add.vc.seq_cutoff_bytes &&
	       a->add.vc.nospace == b->add.vc.nospace && a->add.ublk_id == b->add.ublk_id;
}

/* encode r, expect the line `want`, decode it back to r */
static void round_trip(int line, const struct pmc_ctl_req *r, const char *want)
{
	struct pmc_ctl_req back;
	struct pmc_err err = {0};
	char *s = pmc_ctl_encode_req(r);

	if (!s)
		T_FAIL("line %d: encode returned NULL", line);
	if (strcmp(s, want))
		T_FAIL("line %d: encoded\n  %s expected\n  %s", line, s, want);
	if (pmc_ctl_decode(s, strlen(s), &back, &err))
		T_FAIL("line %d: decode of %s: %s", line, s, err.msg);
	if (!req_equal(r, &back)) {
		req_print("sent", r);
		req_print("got ", &back);
		T_FAIL("line %d: round trip of %s differs", line, s);
	}
	/* without the newline too */
	if (pmc_ctl_decode(s, strlen(s) - 1, &back, &err) || !req_equal(r, &back))
		T_FAIL("line %d: decode without the newline", line);
	printf("ok: %s", s);
	free(s);
}
#define ROUND_TRIP(r, want) round_trip(__LINE__, r, want)

static void req_init(struct pmc_ctl_req *r, enum pmc_ctl_cmd cmd)
{
	memset(r, 0, sizeof(*r));
	r->cmd = cmd;
}

static const struct pmc_config_key *key(enum pmc_config_scope s, const char *name)
{
	const struct pmc_config_key *k = pmc_config_key_find(s, name);

	T_TRUE(k != NULL);
	return k;
}

static void test_round_trips(void)
{
	struct pmc_ctl_req r;

	for (int c = 0; c < PMC_CTL_CMD_NR; c++)
		T_TRUE(pmc_ctl_cmd_name((enum pmc_ctl_cmd)c) != NULL);
	T_TRUE(pmc_ctl_cmd_name(PMC_CTL_CMD_NR) == NULL);

	req_init(&r, PMC_CTL_STATUS);
	ROUND_TRIP(&r, "{\"cmd\":\"status\"}\n");
	r.id.kind = PMC_CTL_ID_INT;
	r.id.num = 42;
	ROUND_TRIP(&r, "{\"cmd\":\"status\",\"id\":42}\n");
	r.id.num = -9223372036854775807ll - 1;
	ROUND_TRIP(&r, "{\"cmd\":\"status\",\"id\":-9223372036854775808}\n");
	r.id.kind = PMC_CTL_ID_STR;
	strcpy(r.id.str, "cli-1/\"x\" \xc3\xa9");
	ROUND_TRIP(&r, "{\"cmd\":\"status\",\"id\":\"cli-1/\\\"x\\\" \xc3\xa9\"}\n");
	memset(r.id.str, 'i', PMC_CTL_ID_MAX);
	r.id.str[PMC_CTL_ID_MAX] = '\0';
	{
		char want[256];

		snprintf(want, sizeof(want), "{\"cmd\":\"status\",\"id\":\"%s\"}\n", r.id.str);
		ROUND_TRIP(&r, want);
	}

	req_init(&r, PMC_CTL_STATS);
	ROUND_TRIP(&r, "{\"cmd\":\"stats\"}\n");
	strcpy(r.volume, "db");
	ROUND_TRIP(&r, "{\"cmd\":\"stats\",\"volume\":\"db\"}\n");

	req_init(&r, PMC_CTL_VOLUME_ADD);
	pmc_config_volume_default(&r.add);
	strcpy(r.add.name, "db");
	strcpy(r.add.disk, "/dev/disk/by-id/nvme-x");
	ROUND_TRIP(
	    &r, "{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/disk/by-id/nvme-x\"}\n");
	r.add.vc.mode = PMC_MODE_WRITE_AROUND;
	r.add.vc.admit_after_misses = 3;
	r.add.vc.seq_cutoff_bytes = 1 << 20;
	r.add.vc.nospace = PMC_NOSPACE_AROUND;
	r.add.ublk_id = 7;
	r.id.kind = PMC_CTL_ID_INT;
	r.id.num = 1;
	ROUND_TRIP(&r,
		   "{\"cmd\":\"volume-add\",\"id\":1,\"name\":\"db\",\"disk\":\"/dev/disk/by-id/"
		   "nvme-x\",\"mode\":\"write-around\",\"admit_after_misses\":3,"
		   "\"seq_cutoff\":1048576,\"nospace\":\"around\",\"ublk_id\":7}\n");

	req_init(&r, PMC_CTL_VOLUME_REMOVE);
	strcpy(r.volume, "db");
	ROUND_TRIP(&r, "{\"cmd\":\"volume-remove\",\"name\":\"db\"}\n");
	r.force = 1;
	ROUND_TRIP(&r, "{\"cmd\":\"volume-remove\",\"name\":\"db\",\"force\":true}\n");

	req_init(&r, PMC_CTL_VOLUME_LIST);
	ROUND_TRIP(&r, "{\"cmd\":\"volume-list\"}\n");

	req_init(&r, PMC_CTL_SET);
	r.key = key(PMC_CONFIG_SCOPE_TOP, "writeback.high_pct");
	r.value = 70;
	ROUND_TRIP(&r, "{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":70}\n");
	r.key = key(PMC_CONFIG_SCOPE_TOP, "writeback.max_io");
	r.value = 2 << 20;
	ROUND_TRIP(&r, "{\"cmd\":\"set\",\"key\":\"writeback.max_io\",\"value\":2097152}\n");
	r.key = key(PMC_CONFIG_SCOPE_TOP, "log.level");
	r.value = 7;
	ROUND_TRIP(&r, "{\"cmd\":\"set\",\"key\":\"log.level\",\"value\":\"debug\"}\n");
	strcpy(r.volume, "db");
	r.key = key(PMC_CONFIG_SCOPE_VOLUME, "mode");
	r.value = PMC_MODE_PASS_THROUGH;
	ROUND_TRIP(
	    &r,
	    "{\"cmd\":\"set\",\"volume\":\"db\",\"key\":\"mode\",\"value\":\"pass-through\"}\n");
	r.key = key(PMC_CONFIG_SCOPE_VOLUME, "seq_cutoff");
	r.value = 0;
	ROUND_TRIP(&r, "{\"cmd\":\"set\",\"volume\":\"db\",\"key\":\"seq_cutoff\",\"value\":0}\n");

	req_init(&r, PMC_CTL_GET);
	r.key = key(PMC_CONFIG_SCOPE_TOP, "pmem.path");
	ROUND_TRIP(&r, "{\"cmd\":\"get\",\"key\":\"pmem.path\"}\n");
	r.key = key(PMC_CONFIG_SCOPE_TOP, "queues.count");
	ROUND_TRIP(&r, "{\"cmd\":\"get\",\"key\":\"queues.count\"}\n");
	strcpy(r.volume, "db");
	r.key = key(PMC_CONFIG_SCOPE_VOLUME, "disk");
	ROUND_TRIP(&r, "{\"cmd\":\"get\",\"volume\":\"db\",\"key\":\"disk\"}\n");

	req_init(&r, PMC_CTL_FLUSH);
	ROUND_TRIP(&r, "{\"cmd\":\"flush\"}\n");
	strcpy(r.volume, "a.b_c-d");
	ROUND_TRIP(&r, "{\"cmd\":\"flush\",\"volume\":\"a.b_c-d\"}\n");

	req_init(&r, PMC_CTL_SHUTDOWN);
	ROUND_TRIP(&r, "{\"cmd\":\"shutdown\"}\n");
	r.remove_devices = 1;
	ROUND_TRIP(&r, "{\"cmd\":\"shutdown\",\"remove_devices\":true}\n");

	/* what the daemon would refuse is not encoded at all */
	req_init(&r, PMC_CTL_CMD_NR);
	T_TRUE(pmc_ctl_encode_req(&r) == NULL);
	req_init(&r, PMC_CTL_VOLUME_ADD); /* no name, no disk */
	T_TRUE(pmc_ctl_encode_req(&r) == NULL);
	req_init(&r, PMC_CTL_SET); /* no key */
	T_TRUE(pmc_ctl_encode_req(&r) == NULL);
	r.key = key(PMC_CONFIG_SCOPE_TOP, "queues.count"); /* not at run time */
	r.value = 4;
	T_TRUE(pmc_ctl_encode_req(&r) == NULL);
	r.key = key(PMC_CONFIG_SCOPE_TOP, "writeback.high_pct");
	r.value = 101;
	T_TRUE(pmc_ctl_encode_req(&r) == NULL);
	req_init(&r, PMC_CTL_VOLUME_REMOVE);
	strcpy(r.volume, "a b");
	T_TRUE(pmc_ctl_encode_req(&r) == NULL);
}

/* decoding what a client sends in other shapes */
static void test_decode_forms(void)
{
	struct pmc_ctl_req r;
	struct pmc_err err;
	const char *s;

	s = "  {\"id\":\"x\", \"cmd\" : \"volume-add\",\t\"disk\":\"/dev/sdb\",\"name\":\"db\","
	    "\"seq_cutoff\":\"4M\",\"mode\":\"write-through\"}  \r\n";
	T_OK(pmc_ctl_decode(s, strlen(s), &r, &err));
	T_EQ(r.cmd, PMC_CTL_VOLUME_ADD);
	T_EQ(r.id.kind, PMC_CTL_ID_STR);
	T_TRUE(!strcmp(r.id.str, "x"));
	T_EQ(r.add.vc.seq_cutoff_bytes, 4 << 20);
	T_EQ(r.add.vc.mode, PMC_MODE_WRITE_THROUGH);
	T_EQ(r.add.vc.admit_after_misses, 1); /* defaults for the rest */
	T_EQ(r.add.ublk_id, -1);

	s = "{\"cmd\":\"set\",\"volume\":\"db\",\"key\":\"seq_cutoff\",\"value\":\"1G\"}";
	T_OK(pmc_ctl_decode(s, strlen(s), &r, &err));
	T_EQ(r.value, 1 << 30);
	s = "{\"cmd\":\"volume-remove\",\"name\":\"db\",\"force\":false}";
	T_OK(pmc_ctl_decode(s, strlen(s), &r, &err));
	T_EQ(r.force, 0);
	/* escapes in names decode before the checks */
	s = "{\"cmd\":\"stats\",\"volume\":\"\\u0064b\"}";
	T_OK(pmc_ctl_decode(s, strlen(s), &r, &err));
	T_TRUE(!strcmp(r.volume, "db"));
	/* the decoder reads only len bytes */
	s = "{\"cmd\":\"status\"}garbage";
	T_OK(pmc_ctl_decode(s, 16, &r, &err));
	/* a line of exactly the limit, with its newline */
	{
		char *big = malloc(PMC_CTL_MAX_LINE + 1);

		memset(big, ' ', PMC_CTL_MAX_LINE);
		memcpy(big, "{\"cmd\":\"status\"}", 16);
		big[PMC_CTL_MAX_LINE - 1] = '\n';
		T_OK(pmc_ctl_decode(big, PMC_CTL_MAX_LINE, &r, &err));
		big[PMC_CTL_MAX_LINE] = '\n';
		T_ERR(pmc_ctl_decode(big, PMC_CTL_MAX_LINE + 1, &r, &err), EMSGSIZE,
		      "request: 65537 bytes, longer than the limit of 65536");
		free(big);
	}
	printf("ok: decode forms\n");
}

static void bad(int line, const char *s, size_t len, int code, const char *want)
{
	struct pmc_ctl_req r;
	struct pmc_err err = {0};
	int rc;

	memset(&r, 0x5a, sizeof(r));
	rc = pmc_ctl_decode(s, len, &r, &err);
	if (rc != -code)
		T_FAIL("line %d: %.*s: returned %d, expected %d (%s)", line, (int)len, s, rc, -code,
		       err.msg);
	if (!strstr(err.msg, want) || strchr(err.msg, '\n'))
		T_FAIL("line %d: message\n  '%s'\nlacks\n  '%s'", line, err.msg, want);
	if (r.key || r.volume[0] || r.cmd)
		T_FAIL("line %d: the request is not cleared after an error", line);
	printf("ok: refused: %s\n", err.msg);
}
#define BAD(s, code, want) bad(__LINE__, s, strlen(s), code, want)
#define BADN(s, len, code, want) bad(__LINE__, s, len, code, want)

static void test_malformed(void)
{
	char buf[512];

	/* not a request at all */
	BAD("", EINVAL, "request: the line is empty");
	BAD("\n", EINVAL, "request: the line is empty");
	BAD(" \t \n", EINVAL, "request: the line is empty");
	BAD("status\n", EINVAL, "request: not JSON: ");
	BAD("{\"cmd\":\"status\"", EINVAL, "request: not JSON: the text ends early");
	BAD("{'cmd':'status'}", EINVAL, "request: not JSON: ");
	BAD("{\"cmd\":\"status\",}", EINVAL, "request: not JSON: ");
	BAD("{cmd:\"status\"}", EINVAL, "request: not JSON: ");
	BAD("{\"cmd\":\"status\"} x", EINVAL, "request: not JSON: unexpected character");
	BAD("{\"cmd\":\"status\"}{\"cmd\":\"status\"}", EINVAL, "request: not JSON:");
	BAD("{\"cmd\":\"status\"}\n{\"cmd\":\"status\"}\n", EINVAL, "request: more than one line");
	BAD("{\"cmd\":\n\"status\"}", EINVAL, "request: more than one line");
	BAD("{\"cmd\":\"stats\",\"volume\":\"d\tb\"}", EINVAL,
	    "request: a string contains a raw control character");
	BAD("{\"cmd\":\"stats\",\"vol\x01\":\"db\"}", EINVAL,
	    "request: a string contains a raw control character");
	BAD("{\"cmd\":\"stats\",\"\\\"\\n\\u00e9\":\"db\"}", EINVAL,
	    "stats: unknown field \"\\\"\\x0a\\xc3\\xa9\"");
	BAD("{\"cmd\":\"a\\nb\"}", EINVAL, "request: unknown command \"a\\x0ab\"");
	BAD("[{\"cmd\":\"status\"}]", EINVAL, "request: not a JSON object but an array");
	BAD("\"status\"", EINVAL, "request: not a JSON object but a string");
	BAD("42", EINVAL, "request: not a JSON object but an integer");
	BAD("null", EINVAL, "request: not a JSON object but null");
	BADN("{\"cmd\":\"status\"}\0", 17, EINVAL, "request: contains a NUL byte");
	BADN("{\"cmd\":\"st\0tus\"}", 16, EINVAL, "request: contains a NUL byte");
	BAD("{\"cmd\":\"stats\",\"volume\":\"db\\u0000x\"}", EINVAL,
	    "request: a string contains \\u0000");
	BAD("{\"cmd\\u0000x\":\"status\"}", EINVAL, "request: a string contains \\u0000");
	BAD("{\"cmd\":\"stats\",\"volume\":\"\xff\"}", EINVAL, "request: not JSON: invalid utf-8");
	/* json-c lets overlong forms through; the checks after it do not */
	BAD("{\"cmd\":\"stats\",\"volume\":\"\xc0\xaf\"}", EINVAL,
	    "stats volume: name has byte 0xc0");
	BAD("{\"cmd\":\"status\",\"id\":\"\xc0\xaf\"}", EINVAL,
	    "request id: contains a control character or invalid UTF-8");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"d\",\"disk\":\"/\xe0\x80\xaf\"}", EINVAL,
	    "volume-add disk: the path is not valid UTF-8");
	BAD("{\"cmd\":\"status\",\"cmd\":\"shutdown\"}", EINVAL,
	    "request: a field appears more than once");
	BAD("{\"cmd\":\"status\",\"\\u0063md\":\"shutdown\"}", EINVAL,
	    "request: a field appears more than once");
	BAD("{\"cmd\":\"status\",\"x\":[[[[[[[[[[[[1]]]]]]]]]]]]}", EINVAL,
	    "request: nested deeper than 8 levels");
	{
		char *big = malloc(PMC_CTL_MAX_LINE * 2);

		memset(big, '[', PMC_CTL_MAX_LINE * 2);
		BADN(big, PMC_CTL_MAX_LINE * 2, EMSGSIZE,
		     "request: 131072 bytes, longer than the limit of 65536");
		BADN(big, PMC_CTL_MAX_LINE, EINVAL, "request: nested deeper than 8 levels");
		free(big);
	}

	/* the command */
	BAD("{}", EINVAL, "request: missing \"cmd\"");
	BAD("{\"id\":1}", EINVAL, "request: missing \"cmd\"");
	BAD("{\"cmd\":5}", EINVAL, "request cmd: expected a string, got an integer");
	BAD("{\"cmd\":null}", EINVAL, "request cmd: expected a string, got null");
	BAD("{\"cmd\":[\"status\"]}", EINVAL, "request cmd: expected a string, got an array");
	BAD("{\"cmd\":\"frobnicate\"}", EINVAL, "request: unknown command \"frobnicate\"");
	BAD("{\"cmd\":\"STATUS\"}", EINVAL, "request: unknown command \"STATUS\"");

	/* the id */
	BAD("{\"cmd\":\"status\",\"id\":1.5}", EINVAL,
	    "request id: expected an integer or a string, got a number with a fraction or "
	    "exponent");
	BAD("{\"cmd\":\"status\",\"id\":{\"a\":1}}", EINVAL,
	    "request id: expected an integer or a string, got an object");
	BAD("{\"cmd\":\"status\",\"id\":18446744073709551615}", EINVAL,
	    "request id: above 9223372036854775807");
	BAD("{\"cmd\":\"status\",\"id\":\"a\\nb\"}", EINVAL,
	    "request id: contains a control character");
	snprintf(buf, sizeof(buf), "{\"cmd\":\"status\",\"id\":\"%065d\"}", 0);
	BAD(buf, EINVAL, "request id: 65 bytes long, the limit is 64");

	/* fields */
	BAD("{\"cmd\":\"status\",\"volume\":\"db\"}", EINVAL, "status: unknown field \"volume\"");
	BAD("{\"cmd\":\"volume-list\",\"x\":1}", EINVAL, "volume-list: unknown field \"x\"");
	BAD("{\"cmd\":\"shutdown\",\"force\":true}", EINVAL, "shutdown: unknown field \"force\"");
	BAD("{\"cmd\":\"shutdown\",\"remove_devices\":1}", EINVAL,
	    "shutdown remove_devices: expected a boolean, got an integer");
	BAD("{\"cmd\":\"get\",\"key\":\"mode\",\"volume\":\"db\",\"value\":1}", EINVAL,
	    "get: unknown field \"value\"");
	BAD("{\"cmd\":\"stats\",\"volume\":5}", EINVAL,
	    "stats volume: expected a string, got an integer");
	BAD("{\"cmd\":\"stats\",\"volume\":{\"a\":{\"b\":[1]}}}", EINVAL,
	    "stats volume: expected a string, got an object");
	BAD("{\"cmd\":\"flush\",\"volume\":\"a b\"}", EINVAL, "flush volume: name \"a b\" has ' '");
	BAD("{\"cmd\":\"flush\",\"volume\":\"\"}", EINVAL, "flush volume: the name is empty");
	BAD("{\"cmd\":\"flush\",\"volume\":\"..\"}", EINVAL,
	    "flush volume: \"..\" cannot be a name");
	BAD("{\"cmd\":\"flush\",\"volume\":\"-f\"}", EINVAL,
	    "flush volume: name \"-f\" starts with '-'");
	BAD("{\"cmd\":\"stats\",\"volume\":\"a\\tb\"}", EINVAL, "stats volume: name has byte 0x09");
	snprintf(buf, sizeof(buf), "{\"cmd\":\"stats\",\"volume\":\"%064d\"}", 0);
	BAD(buf, EINVAL, "stats volume: name is 64 bytes long, the limit is 63");

	/* volume-add */
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\"}", EINVAL, "volume-add: missing \"disk\"");
	/* a transport of "none" is no disk either (it passed, and the daemon
	 * answered "disk : No such file or directory") */
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk.transport\":\"none\"}", EINVAL,
	    "volume \"db\": no disk");
	BAD("{\"cmd\":\"volume-add\",\"disk\":\"/dev/sdb\"}", EINVAL,
	    "volume-add: missing \"name\"");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"dev/sdb\"}", EINVAL,
	    "volume-add disk: \"dev/sdb\" is not an absolute path");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/sdb\",\"mode\":\"fast\"}",
	    EINVAL,
	    "volume-add mode: \"fast\" is not one of write-back, write-through, write-around, "
	    "pass-through");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/"
	    "sdb\",\"admit_after_misses\":256}",
	    ERANGE, "volume-add admit_after_misses: 256 is above the maximum 255");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/sdb\",\"seq_cutoff\":\"1X\"}",
	    EINVAL, "volume-add seq_cutoff: \"1X\" is not a size");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/sdb\",\"seq_cutoff\":1.5}",
	    EINVAL,
	    "volume-add seq_cutoff: expected a size (an integer, or a string such as \"512K\"), "
	    "got "
	    "a number with a fraction or exponent");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/sdb\",\"ublk_id\":\"3\"}",
	    EINVAL, "volume-add ublk_id: expected an integer, got a string");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/sdb\",\"nospace\":true}",
	    EINVAL, "volume-add nospace: expected a string, got a boolean");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"db\",\"disk\":\"/dev/sdb\",\"high_pct\":5}", EINVAL,
	    "volume-add: unknown field \"high_pct\"");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"d b\",\"disk\":\"/dev/sdb\"}", EINVAL,
	    "volume-add name: name \"d b\" has ' '");

	/* volume-remove */
	BAD("{\"cmd\":\"volume-remove\"}", EINVAL, "volume-remove: missing \"name\"");
	BAD("{\"cmd\":\"volume-remove\",\"name\":\"db\",\"force\":\"yes\"}", EINVAL,
	    "volume-remove force: expected a boolean, got a string");
	BAD("{\"cmd\":\"volume-remove\",\"name\":\"db\",\"force\":1}", EINVAL,
	    "volume-remove force: expected a boolean, got an integer");
	BAD("{\"cmd\":\"volume-remove\",\"volume\":\"db\"}", EINVAL,
	    "volume-remove: unknown field \"volume\"");

	/* set and get */
	BAD("{\"cmd\":\"set\",\"value\":1}", EINVAL, "set: missing \"key\"");
	BAD("{\"cmd\":\"get\"}", EINVAL, "get: missing \"key\"");
	BAD("{\"cmd\":\"set\",\"key\":5,\"value\":1}", EINVAL,
	    "set key: expected a string, got an integer");
	BAD("{\"cmd\":\"set\",\"key\":\"bogus\",\"value\":1}", EINVAL,
	    "set key: unknown key \"bogus\"");
	BAD("{\"cmd\":\"get\",\"key\":\"volumes\"}", EINVAL, "get key: unknown key \"volumes\"");
	BAD("{\"cmd\":\"set\",\"key\":\"queues.count\",\"value\":4}", EINVAL,
	    "set queues.count: cannot change at run time (edit the config and restart pmcached)");
	BAD("{\"cmd\":\"set\",\"volume\":\"db\",\"key\":\"ublk_id\",\"value\":4}", EINVAL,
	    "set ublk_id: cannot change at run time");
	BAD("{\"cmd\":\"set\",\"key\":\"mode\",\"value\":\"write-back\"}", EINVAL,
	    "set mode: a volume's key: give \"volume\"");
	BAD("{\"cmd\":\"get\",\"key\":\"disk\"}", EINVAL,
	    "get disk: a volume's key: give \"volume\"");
	BAD("{\"cmd\":\"set\",\"volume\":\"db\",\"key\":\"writeback.high_pct\",\"value\":60}",
	    EINVAL, "set writeback.high_pct: not a volume's key: drop \"volume\"");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\"}", EINVAL,
	    "set writeback.high_pct: missing \"value\"");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":120}", ERANGE,
	    "set writeback.high_pct: 120 is above the maximum 100");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":-1}", ERANGE,
	    "set writeback.high_pct: -1 is below the minimum 0");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":99999999999999999999}",
	    ERANGE, "set writeback.high_pct: 9223372036854775807 is above the maximum 100");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":\"50\"}", EINVAL,
	    "set writeback.high_pct: expected an integer, got a string");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":50.0}", EINVAL,
	    "set writeback.high_pct: expected an integer, got a number with a fraction or "
	    "exponent");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":{\"v\":50}}", EINVAL,
	    "set writeback.high_pct: expected an integer, got an object");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":[50]}", EINVAL,
	    "got an array");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.high_pct\",\"value\":null}", EINVAL, "got null");
	BAD("{\"cmd\":\"set\",\"key\":\"writeback.max_io\",\"value\":5000}", EINVAL,
	    "set writeback.max_io: 5000 is not a multiple of 4K");
	BAD("{\"cmd\":\"set\",\"key\":\"log.level\",\"value\":7}", EINVAL,
	    "set log.level: expected a string, got an integer");
	BAD("{\"cmd\":\"set\",\"volume\":\"db\",\"key\":\"mode\",\"value\":\"fast\"}", EINVAL,
	    "set mode: \"fast\" is not one of");

	/* a refused request still yields its id, for the error reply */
	{
		struct pmc_ctl_req r;
		struct pmc_err err;
		const char *s = "{\"id\":7,\"cmd\":\"bogus\"}";

		T_ERR(pmc_ctl_decode(s, strlen(s), &r, &err), EINVAL, "unknown command");
		T_EQ(r.id.kind, PMC_CTL_ID_INT);
		T_EQ(r.id.num, 7);
		s = "{\"cmd\":\"set\",\"key\":\"x\",\"id\":\"req-9\"}";
		T_ERR(pmc_ctl_decode(s, strlen(s), &r, &err), EINVAL, "unknown key");
		T_EQ(r.id.kind, PMC_CTL_ID_STR);
		T_TRUE(!strcmp(r.id.str, "req-9"));
	}
	/* lone surrogates: refused or decoded, cleanly either way */
	{
		struct pmc_ctl_req r;
		struct pmc_err err = {0};
		const char *s = "{\"cmd\":\"stats\",\"volume\":\"\\ud800\"}";
		int rc = pmc_ctl_decode(s, strlen(s), &r, &err);

		printf("ok: lone surrogate: %d %s\n", rc, err.msg);
		T_TRUE(rc == 0 || rc == -EINVAL);
	}
}

/* one line, ending in exactly one newline */
static void one_line(const char *s)
{
	size_t len;

	T_TRUE(s != NULL);
	len = strlen(s);
	T_TRUE(len > 1 && s[len - 1] == '\n');
	if (strchr(s, '\n') != s + len - 1)
		T_FAIL("not one line: %s", s);
}

static void expect_line(int line, char *s, const char *want)
{
	one_line(s);
	if (strcmp(s, want))
		T_FAIL("line %d: built\n  %s expected\n  %s", line, s, want);
}
#define EXPECT_LINE(s, want) expect_line(__LINE__, s, want)

static void test_replies(void)
{
	struct pmc_ctl_id id7 = {.kind = PMC_CTL_ID_INT, .num = 7};
	struct pmc_ctl_id ids = {.kind = PMC_CTL_ID_STR, .str = "abc"};
	struct pmc_ctl_reply rep;
	struct pmc_err err;
	struct json_object *p, *j;
	char *s;

	s = pmc_ctl_reply_ok(NULL, NULL);
	EXPECT_LINE(s, "{\"v\":1,\"ok\":true}\n");
	T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
	T_EQ(rep.kind, PMC_CTL_REPLY_OK);
	T_EQ(rep.id.kind, PMC_CTL_ID_NONE);
	T_EQ(json_object_object_length(rep.payload), 0);
	pmc_ctl_reply_free(&rep);
	free(s);

	p = json_object_new_object();
	json_object_object_add(p, "volume", json_object_new_string("db"));
	json_object_object_add(p, "device", json_object_new_string("/dev/ublkb0"));
	json_object_object_add(p, "ublk_id", json_object_new_int(0));
	json_object_object_add(p, "ok", json_object_new_boolean(0)); /* not the payload's */
	json_object_object_add(p, "id", json_object_new_int(99));
	s = pmc_ctl_reply_ok(&id7, p);
	EXPECT_LINE(s, "{\"v\":1,\"id\":7,\"ok\":true,\"volume\":\"db\",\"device\":\"/dev/ublkb0\","
		       "\"ublk_id\":0}\n");
	T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
	T_EQ(rep.kind, PMC_CTL_REPLY_OK);
	T_EQ(rep.id.kind, PMC_CTL_ID_INT);
	T_EQ(rep.id.num, 7);
	T_TRUE(json_object_object_get_ex(rep.payload, "device", &j));
	T_TRUE(!strcmp(json_object_get_string(j), "/dev/ublkb0"));
	T_TRUE(!json_object_object_get_ex(rep.payload, "ok", &j));
	T_TRUE(!json_object_object_get_ex(rep.payload, "id", &j));
	pmc_ctl_reply_free(&rep);
	pmc_ctl_reply_free(&rep); /* twice is fine */
	free(s);

	s = pmc_ctl_reply_error(&ids, -ENOENT, "stats volume: no volume \"x\"");
	EXPECT_LINE(s,
		    "{\"v\":1,\"id\":\"abc\",\"ok\":false,\"errno\":2,\"error\":\"stats volume: no volume "
		    "\\\"x\\\"\"}\n");
	T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
	T_EQ(rep.kind, PMC_CTL_REPLY_ERROR);
	T_EQ(rep.errnum, ENOENT);
	T_TRUE(!strcmp(rep.error, "stats volume: no volume \"x\""));
	T_TRUE(!strcmp(rep.id.str, "abc"));
	T_TRUE(rep.payload == NULL);
	free(s);

	/* a message made safe: one line of valid UTF-8, bounded */
	s = pmc_ctl_reply_error(NULL, EIO, "disk \xff failed:\nline two\tcaf\xc3\xa9 \xed\xa0\x80");
	EXPECT_LINE(s, "{\"v\":1,\"ok\":false,\"errno\":5,\"error\":\"disk ? failed: line two caf\xc3\xa9 "
		       "???\"}\n");
	free(s);
	s = pmc_ctl_reply_error(NULL, 0, NULL);
	EXPECT_LINE(s, "{\"v\":1,\"ok\":false,\"errno\":5,\"error\":\"\"}\n");
	free(s);
	{
		char *big = malloc(5000);

		memset(big, 'x', 4999);
		big[4999] = '\0';
		big[1022] = '\xc3'; /* a 2-byte sequence across the limit is dropped whole */
		big[1023] = '\xa9';
		s = pmc_ctl_reply_error(NULL, EINVAL, big);
		one_line(s);
		T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
		T_EQ(strlen(rep.error), 1022);
		free(s);
		free(big);
	}

	/* an ok reply's strings made safe alike, however deep: a disk's
	 * identity or serial may hold any byte, and one reply the clients
	 * cannot parse broke status for all of them */
	{
		json_object *o = json_object_new_object(), *a = json_object_new_array(),
			    *v = json_object_new_object();

		json_object_object_add(v, "disk_id",
				       json_object_new_string("file-caf\xc3\xa9\xff\xc3-\x1b[31m\xc2\x9b"));
		json_object_object_add(v, "name", json_object_new_string("v0"));
		json_object_array_add(a, v);
		json_object_object_add(o, "volumes", a);
		s = pmc_ctl_reply_ok(NULL, o);
		EXPECT_LINE(s, "{\"v\":1,\"ok\":true,\"volumes\":[{\"disk_id\":\"file-caf\xc3\xa9?\?- "
			       "[31m \",\"name\":\"v0\"}]}\n");
		T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
		pmc_ctl_reply_free(&rep);
		free(s);
	}

	s = pmc_ctl_reply_progress(&id7, 123456789012ull);
	EXPECT_LINE(s, "{\"v\":1,\"id\":7,\"progress\":{\"dirty_blocks\":123456789012}}\n");
	T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
	T_EQ(rep.kind, PMC_CTL_REPLY_PROGRESS);
	T_EQ(rep.dirty_blocks, 123456789012ull);
	T_EQ(rep.id.num, 7);
	free(s);

	/* get's replies, from the config structs */
	{
		struct pmc_config c;
		struct pmc_config_volume v;

		pmc_config_default(&c);
		strcpy(c.pmem_path, "/dev/dax0.0");
		c.wb.max_io_bytes = 2 << 20;
		pmc_config_volume_default(&v);
		strcpy(v.disk, "/dev/sdb");
		v.vc.mode = PMC_MODE_WRITE_THROUGH;
		s = pmc_ctl_reply_value(NULL, NULL, key(PMC_CONFIG_SCOPE_TOP, "writeback.max_io"),
					&c);
		EXPECT_LINE(s, "{\"v\":1,\"ok\":true,\"key\":\"writeback.max_io\",\"value\":2097152}\n");
		free(s);
		s = pmc_ctl_reply_value(&id7, NULL, key(PMC_CONFIG_SCOPE_TOP, "log.level"), &c);
		EXPECT_LINE(s, "{\"v\":1,\"id\":7,\"ok\":true,\"key\":\"log.level\",\"value\":\"info\"}\n");
		free(s);
		s = pmc_ctl_reply_value(NULL, NULL, key(PMC_CONFIG_SCOPE_TOP, "pmem.path"), &c);
		EXPECT_LINE(s, "{\"v\":1,\"ok\":true,\"key\":\"pmem.path\",\"value\":\"/dev/dax0.0\"}\n");
		free(s);
		s = pmc_ctl_reply_value(NULL, "db", key(PMC_CONFIG_SCOPE_VOLUME, "mode"), &v);
		EXPECT_LINE(s, "{\"v\":1,\"ok\":true,\"key\":\"mode\",\"volume\":\"db\",\"value\":"
			       "\"write-through\"}\n");
		free(s);
		s = pmc_ctl_reply_value(NULL, "db", key(PMC_CONFIG_SCOPE_VOLUME, "ublk_id"), &v);
		EXPECT_LINE(s,
			    "{\"v\":1,\"ok\":true,\"key\":\"ublk_id\",\"volume\":\"db\",\"value\":-1}\n");
		T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
		T_TRUE(json_object_object_get_ex(rep.payload, "value", &j));
		T_EQ(json_object_get_int(j), -1);
		pmc_ctl_reply_free(&rep);
		free(s);
	}
	printf("ok: replies\n");
}

static void bad_reply(int line, const char *s, size_t len, int code, const char *want)
{
	struct pmc_ctl_reply rep;
	struct pmc_err err = {0};
	int rc;

	rc = pmc_ctl_decode_reply(s, len, &rep, &err);
	if (rc != -code)
		T_FAIL("line %d: %s: returned %d, expected %d (%s)", line, s, rc, -code, err.msg);
	if (!strstr(err.msg, want) || strchr(err.msg, '\n'))
		T_FAIL("line %d: message\n  '%s'\nlacks\n  '%s'", line, err.msg, want);
	T_TRUE(rep.payload == NULL);
	printf("ok: refused: %s\n", err.msg);
}
#define BAD_REPLY(s, code, want) bad_reply(__LINE__, s, strlen(s), code, want)

static void test_bad_replies(void)
{
	BAD_REPLY("", EPROTO, "reply: the line is empty");
	BAD_REPLY("ok", EPROTO, "reply: not JSON");
	BAD_REPLY("[true]", EPROTO, "reply: not a JSON object but an array");
	BAD_REPLY("{}", EPROTO, "reply: neither \"ok\" nor \"progress\"");
	BAD_REPLY("{\"ok\":1}", EPROTO, "reply ok: expected a boolean, got an integer");
	BAD_REPLY("{\"v\":2,\"ok\":true}", EPROTO, "the daemon speaks protocol version 2");
	BAD_REPLY("{\"v\":\"1\",\"ok\":true}", EPROTO, "reply v: expected a protocol version");
	BAD_REPLY("{\"v\":0,\"ok\":true}", EPROTO, "reply v: expected a protocol version");
	BAD_REPLY("{\"ok\":false}", EPROTO, "reply errno: expected an integer 1..4095");
	BAD_REPLY("{\"ok\":false,\"errno\":0,\"error\":\"x\"}", EPROTO, "reply errno");
	BAD_REPLY("{\"ok\":false,\"errno\":\"EIO\",\"error\":\"x\"}", EPROTO, "reply errno");
	BAD_REPLY("{\"ok\":false,\"errno\":5}", EPROTO, "reply error: expected a string");
	BAD_REPLY("{\"ok\":false,\"errno\":5,\"error\":5}", EPROTO,
		  "reply error: expected a string");
	BAD_REPLY("{\"progress\":5}", EPROTO,
		  "reply progress: expected {\"dirty_blocks\": N >= 0}");
	BAD_REPLY("{\"progress\":{\"dirty_blocks\":-1}}", EPROTO, "reply progress");
	BAD_REPLY("{\"progress\":{}}", EPROTO, "reply progress");
	BAD_REPLY("{\"id\":[1],\"ok\":true}", EPROTO,
		  "reply id: expected an integer or a string, got an array");
	BAD_REPLY("{\"ok\":true,\"ok\":true}", EPROTO, "reply: a field appears more than once");
	{
		size_t n = PMC_CTL_MAX_REPLY + 1;
		char *big = malloc(n);

		memset(big, ' ', n);
		bad_reply(__LINE__, big, n, EMSGSIZE,
			  "reply: 4194305 bytes, longer than the limit");
		free(big);
	}
	/* unknown members of a reply are the client's to ignore */
	{
		struct pmc_ctl_reply rep;
		struct pmc_err err;
		const char *s = "{\"ok\":false,\"errno\":22,\"error\":\"x\",\"hint\":\"y\"}";

		T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
		s = "{\"id\":1,\"progress\":{\"dirty_blocks\":3,\"eta_s\":5}}\n";
		T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
		T_EQ(rep.dirty_blocks, 3);
		T_EQ(rep.version, 0); /* no "v": a daemon before protocol 1 */
		s = "{\"v\":1,\"ok\":true,\"x\":1}\n";
		T_OK(pmc_ctl_decode_reply(s, strlen(s), &rep, &err));
		T_EQ(rep.version, PMC_CTL_VERSION);
		T_TRUE(!json_object_object_get_ex(rep.payload, "v", NULL));
		T_TRUE(json_object_object_get_ex(rep.payload, "x", NULL));
		pmc_ctl_reply_free(&rep);
	}
	printf("ok: bad replies\n");
}

/* NVMe-oF: volume-add with disk.*, volume-reconnect, a secret never shown */
static void test_nvmf(void)
{
	struct pmc_ctl_req r;
	struct pmc_config_volume v;
	struct pmc_err err = {0};
	char *s;

	req_init(&r, PMC_CTL_VOLUME_ADD);
	pmc_config_volume_default(&r.add);
	strcpy(r.add.name, "net");
	r.add.nvmf.transport = PMC_CONFIG_TR_TCP;
	strcpy(r.add.nvmf.traddr, "10.0.0.2");
	strcpy(r.add.nvmf.subsysnqn, "nqn.2014-08.org.example:d");
	r.add.nvmf.nsid = 7;
	ROUND_TRIP(&r, "{\"cmd\":\"volume-add\",\"name\":\"net\",\"disk.transport\":\"tcp\","
		       "\"disk.traddr\":\"10.0.0.2\",\"disk.subsysnqn\":"
		       "\"nqn.2014-08.org.example:d\",\"disk.nsid\":7}\n");
	strcpy(r.add.nvmf.trsvcid, "4421");
	r.add.nvmf.discovery = 1;
	r.add.nvmf.ctrl_loss_tmo = -1;
	ROUND_TRIP(&r, "{\"cmd\":\"volume-add\",\"name\":\"net\",\"disk.transport\":\"tcp\","
		       "\"disk.traddr\":\"10.0.0.2\",\"disk.trsvcid\":\"4421\",\"disk.subsysnqn\":"
		       "\"nqn.2014-08.org.example:d\",\"disk.nsid\":7,\"disk.discovery\":\"yes\","
		       "\"disk.ctrl_loss_tmo\":-1}\n");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"net\",\"disk.transport\":\"tcp\","
	    "\"disk.subsysnqn\":\"nqn.2014-08.org.example:d\",\"disk.nsid\":1}",
	    EINVAL, "volume-add: volume \"net\" disk.traddr: missing (required for transport tcp)");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"net\",\"disk.transport\":\"udp\"}", EINVAL,
	    "volume-add disk.transport: \"udp\" is not one of none, tcp, rdma, fc, loop");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"net\",\"disk\":\"/dev/sdb\","
	    "\"disk.traddr\":\"10.0.0.2\"}",
	    EINVAL, "volume \"net\" disk.traddr: only for an NVMe-oF disk (set disk.transport)");
	BAD("{\"cmd\":\"volume-add\",\"name\":\"net\"}", EINVAL,
	    "volume-add: missing \"disk\" (or \"disk.transport\"");

	req_init(&r, PMC_CTL_VOLUME_RECONNECT);
	strcpy(r.volume, "net");
	ROUND_TRIP(&r, "{\"cmd\":\"volume-reconnect\",\"name\":\"net\"}\n");
	BAD("{\"cmd\":\"volume-reconnect\"}", EINVAL, "volume-reconnect: missing \"name\"");
	BAD("{\"cmd\":\"volume-reconnect\",\"name\":\"net\",\"force\":true}", EINVAL,
	    "force");
	req_init(&r, PMC_CTL_VOLUME_CLEAR_ERROR);
	strcpy(r.volume, "v0");
	ROUND_TRIP(&r, "{\"cmd\":\"volume-clear-error\",\"name\":\"v0\"}\n");
	BAD("{\"cmd\":\"volume-clear-error\"}", EINVAL, "volume-clear-error: missing \"name\"");
	BAD("{\"cmd\":\"volume-clear-error\",\"name\":\"a/b\"}", EINVAL, "name");

	/* get of a secret: set or not, never the value */
	pmc_config_volume_default(&v);
	strcpy(v.nvmf.dhchap_key, "DHHC-1:00:c2VjcmV0:");
	s = pmc_ctl_reply_value(NULL, "net", key(PMC_CONFIG_SCOPE_VOLUME, "disk.dhchap_key"), &v);
	T_TRUE(s && strstr(s, "(set, not shown)") && !strstr(s, "c2VjcmV0"));
	printf("ok: %s", s);
	free(s);
	(void)err;
	printf("ok: nvmf\n");
}

int main(void)
{
	test_round_trips();
	test_nvmf();
	test_decode_forms();
	test_malformed();
	test_replies();
	test_bad_replies();
	printf("test_ctl: all passed\n");
	return 0;
}
