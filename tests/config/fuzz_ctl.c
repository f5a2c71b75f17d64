/* fuzz_ctl.c - fuzz target: any bytes as a control request line, as a
 * reply line, and as an error message.
 *
 * Must hold for every input: no crash, no leak, no sanitizer report, and
 *   - pmc_ctl_decode() refuses with -errno and one line, or accepts; what it
 *     accepts re-encodes (pmc_ctl_encode_req) to a line that decodes to the
 *     same request;
 *   - pmc_ctl_decode_reply() refuses cleanly or accepts (payload freed);
 *   - an error reply built with the bytes as its message decodes as an
 *     error reply with the same errno and id.
 * A violation aborts, which libFuzzer and the replay driver report.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "fuzz.h"

const char *const fz_tokens[] = {
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\"cmd\":",
    "\"id\":",
    "\"status\"",
    "\"stats\"",
    "\"volume-add\"",
    "\"volume-remove\"",
    "\"volume-list\"",
    "\"set\"",
    "\"get\"",
    "\"flush\"",
    "\"shutdown\"",
    "\"volume\":",
    "\"name\":",
    "\"disk\":",
    "\"mode\":",
    "\"force\":",
    "\"key\":",
    "\"value\":",
    "\"seq_cutoff\":",
    "\"nospace\":",
    "\"ublk_id\":",
    "\"admit_after_misses\":",
    "\"writeback.high_pct\"",
    "\"log.level\"",
    "\"queues.count\"",
    "\"mode\"",
    "\"db\"",
    "\"/dev/sdb\"",
    "\"write-through\"",
    "\"1M\"",
    "\"ok\":",
    "\"errno\":",
    "\"error\":",
    "\"progress\":",
    "\"dirty_blocks\":",
    "true",
    "false",
    "null",
    "0",
    "-1",
    "1e3",
    "1.5",
    "9223372036854775807",
    "18446744073709551616",
    "\\u0000",
    "\\u00e9",
    "\\ud800",
    "\\\"",
    "\n",
    "\xc3\xa9",
    "\xff",
    "\0",
    NULL,
};

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_ctl: %s: %s\n", what, detail);
	abort();
}

static int id_equal(const struct pmc_ctl_id *a, const struct pmc_ctl_id *b)
{
	if (a->kind != b->kind)
		return 0;
	if (a->kind == PMC_CTL_ID_INT)
		return a->num == b->num;
	if (a->kind == PMC_CTL_ID_STR)
		return !strcmp(a->str, b->str);
	return 1;
}

static int req_equal(const struct pmc_ctl_req *a, const struct pmc_ctl_req *b)
{
	if (a->cmd != b->cmd || !id_equal(&a->id, &b->id) || strcmp(a->volume, b->volume) ||
	    a->force != b->force || a->key != b->key || a->value != b->value ||
	    a->replace_disk != b->replace_disk || a->discard_dirty != b->discard_dirty)
		return 0;
	if (a->cmd != PMC_CTL_VOLUME_ADD)
		return 1;
	if (strcmp(a->add.name, b->add.name) || strcmp(a->add.disk, b->add.disk))
		return 0;
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->scope != PMC_CONFIG_SCOPE_VOLUME || k->type == PMC_CONFIG_T_NAME ||
		    k->type == PMC_CONFIG_T_PATH)
			continue;
		if (k->type == PMC_CONFIG_T_TEXT) {
			if (strcmp((const char *)&a->add + k->off, (const char *)&b->add + k->off))
				return 0;
			continue;
		}
		if (pmc_config_key_load(k, &a->add) != pmc_config_key_load(k, &b->add))
			return 0;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pmc_ctl_req req, again;
	struct pmc_ctl_reply rep;
	struct pmc_err err = {0};
	char *line, *msg;
	int rc;

	/* as a request */
	rc = pmc_ctl_decode((const char *)data, size, &req, &err);
	if (rc) {
		if (rc >= 0 || err.code != -rc || !err.msg[0] || strchr(err.msg, '\n'))
			fail("request refusal", err.msg);
	} else {
		line = pmc_ctl_encode_req(&req);
		if (!line)
			fail("re-encoding an accepted request", "NULL");
		memset(&err, 0, sizeof(err));
		if (pmc_ctl_decode(line, strlen(line), &again, &err))
			fail("the re-encoded request is refused", err.msg);
		if (!req_equal(&req, &again))
			fail("the re-encoded request differs", line);
		free(line);
	}

	/* as a reply */
	memset(&err, 0, sizeof(err));
	rc = pmc_ctl_decode_reply((const char *)data, size, &rep, &err);
	if (rc) {
		if (rc >= 0 || err.code != -rc || strchr(err.msg, '\n') || rep.payload)
			fail("reply refusal", err.msg);
	} else {
		pmc_ctl_reply_free(&rep);
	}

	/* as an error message, echoed with the request's id if it had one */
	msg = malloc(size + 1);
	if (!msg)
		return 0;
	memcpy(msg, data, size);
	msg[size] = '\0';
	line = pmc_ctl_reply_error(&req.id, -(int)(size % 200) - 1, msg);
	free(msg);
	if (!line)
		fail("reply_error", "NULL");
	memset(&err, 0, sizeof(err));
	if (pmc_ctl_decode_reply(line, strlen(line), &rep, &err))
		fail("an error reply does not decode", err.msg);
	if (rep.kind != PMC_CTL_REPLY_ERROR || rep.errnum != (int)(size % 200) + 1 ||
	    !id_equal(&rep.id, &req.id) || strchr(rep.error, '\n'))
		fail("the error reply decodes wrong", line);
	free(line);
	return 0;
}
