/* ctl.c - the control protocol codec (see ctl.h for the protocol).
 *
 * Owns: turning request lines into struct pmc_ctl_req and back, building
 * reply lines, and decoding them on the client side.
 *
 * Requests come from any local user allowed on the socket, so decoding is
 * strict and bounded: the length is checked before json-c sees a byte, the
 * nesting depth is capped by the tokener, NUL bytes (raw or as \u0000),
 * duplicate fields, trailing text and unknown fields are refused, and each
 * field is checked for type and range with the config table's rules
 * (config.h), so "set" accepts exactly what the file would. The decoded
 * request holds copies, never a pointer into a json-c object.
 *
 * Invariant (the fuzz target checks it): a request pmc_ctl_decode accepts,
 * re-encoded with pmc_ctl_encode_req, decodes to the same request.
 * Stateless; every function may run on any thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static const char *const cmd_names[PMC_CTL_CMD_NR] = {
    [PMC_CTL_STATUS] = "status",
    [PMC_CTL_STATS] = "stats",
    [PMC_CTL_VOLUME_ADD] = "volume-add",
    [PMC_CTL_VOLUME_REMOVE] = "volume-remove",
    [PMC_CTL_VOLUME_LIST] = "volume-list",
    [PMC_CTL_SET] = "set",
    [PMC_CTL_GET] = "get",
    [PMC_CTL_FLUSH] = "flush",
    [PMC_CTL_SHUTDOWN] = "shutdown",
    [PMC_CTL_VOLUME_RECONNECT] = "volume-reconnect",
    [PMC_CTL_VOLUME_CLEAR_ERROR] = "volume-clear-error",
};

/* fields each command takes besides "cmd" and "id" ("volume-add" takes the
 * volume keys of the config table instead) */
static const char *const cmd_fields[PMC_CTL_CMD_NR][4] = {
    [PMC_CTL_STATS] = {"volume"},
    [PMC_CTL_VOLUME_REMOVE] = {"name", "force"},
    [PMC_CTL_SET] = {"volume", "key", "value"},
    [PMC_CTL_GET] = {"volume", "key"},
    [PMC_CTL_FLUSH] = {"volume"},
    [PMC_CTL_SHUTDOWN] = {"remove_devices"},
    [PMC_CTL_VOLUME_RECONNECT] = {"name"},
    [PMC_CTL_VOLUME_CLEAR_ERROR] = {"name"},
};

#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
#define REPLY_DEPTH 32

const char *pmc_ctl_cmd_name(enum pmc_ctl_cmd cmd)
{
	return (unsigned)cmd < PMC_CTL_CMD_NR ? cmd_names[cmd] : NULL;
}

static const char *jtype_name(struct json_object *j)
{
	switch (json_object_get_type(j)) {
	case json_type_null:
		return "null";
	case json_type_boolean:
		return "a boolean";
	case json_type_double:
		return "a number with a fraction or exponent";
	case json_type_int:
		return "an integer";
	case json_type_object:
		return "an object";
	case json_type_array:
		return "an array";
	case json_type_string:
		return "a string";
	}
	return "something unknown";
}

/* --- parsing a line --- */

/*
 * Over valid JSON text: count the members of the top-level object (json-c
 * keeps only the last of duplicate names) and look for \u0000 in strings.
 */
static void raw_scan(const char *p, size_t len, size_t *members, int *nul, int *ctl)
{
	int depth = 0;

	*members = 0;
	*nul = 0;
	*ctl = 0;
	for (size_t i = 0; i < len; i++) {
		char c = p[i];

		if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			depth--;
		} else if (c == '"') {
			for (i++; i < len && p[i] != '"'; i++) {
				if ((unsigned char)p[i] < 0x20)
					*ctl = 1; /* json-c takes them; JSON does not */
				if (p[i] != '\\')
					continue;
				if (i + 5 < len && p[i + 1] == 'u' &&
				    !strncmp(p + i + 2, "0000", 4))
					*nul = 1;
				i++; /* the escaped character; \uXXXX's digits are plain */
			}
			if (depth != 1)
				continue;
			for (size_t j = i + 1; j < len; j++) {
				if (p[j] == ' ' || p[j] == '\t' || p[j] == '\n' || p[j] == '\r')
					continue;
				if (p[j] == ':')
					(*members)++;
				break;
			}
		}
	}
}

static size_t blank_span(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	return i;
}

/* Parse a line into an object. what: "request" or "reply". */
static int parse_line(const char *buf, size_t len, size_t max, int depth, const char *what,
		      int code, struct json_object **out, struct pmc_err *err)
{
	struct json_tokener *tok;
	struct json_object *o;
	enum json_tokener_error jerr;
	size_t members, end;
	int nul, ctl;

	*out = NULL;
	if (len > max)
		return pmc_err_set(err, EMSGSIZE, "%s: %zu bytes, longer than the limit of %zu",
				   what, len, max);
	if (len && buf[len - 1] == '\n')
		len--;
	if (memchr(buf, '\0', len))
		return pmc_err_set(err, code, "%s: contains a NUL byte", what);
	if (memchr(buf, '\n', len))
		return pmc_err_set(err, code, "%s: more than one line", what);
	if (len > INT32_MAX)
		return pmc_err_set(err, EMSGSIZE, "%s: too long", what);
	if (blank_span(buf, len) == len)
		return pmc_err_set(err, code, "%s: the line is empty", what);
	tok = json_tokener_new_ex(depth);
	if (!tok)
		return pmc_err_set(err, ENOMEM, "%s: out of memory", what);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (!o && jerr == json_tokener_continue) {
		/* a top-level number ends only at the end of the text: say so */
		o = json_tokener_parse_ex(tok, "", 1);
		jerr = json_tokener_get_error(tok);
		end = len;
		if (jerr != json_tokener_success)
			jerr = json_tokener_continue;
	}
	json_tokener_free(tok);
	if (jerr == json_tokener_success && !o) /* JSON's null is NULL */
		return pmc_err_set(err, code, "%s: not a JSON object but null", what);
	if (jerr != json_tokener_success) {
		json_object_put(o);
		if (jerr == json_tokener_continue || jerr == json_tokener_error_parse_eof)
			return pmc_err_set(err, code, "%s: not JSON: the text ends early", what);
		if (jerr == json_tokener_error_depth)
			return pmc_err_set(err, code, "%s: nested deeper than %d levels", what,
					   depth);
		return pmc_err_set(err, code, "%s: not JSON: %s at byte %zu", what,
				   json_tokener_error_desc(jerr), end);
	}
	if (end < len && blank_span(buf + end, len - end) < len - end) {
		json_object_put(o);
		return pmc_err_set(err, code, "%s: text after the JSON value at byte %zu", what,
				   end);
	}
	if (!json_object_is_type(o, json_type_object)) {
		int rc =
		    pmc_err_set(err, code, "%s: not a JSON object but %s", what, jtype_name(o));

		json_object_put(o);
		return rc;
	}
	raw_scan(buf, len, &members, &nul, &ctl);
	if (nul) {
		json_object_put(o);
		return pmc_err_set(err, code, "%s: a string contains \\u0000", what);
	}
	if (ctl) {
		json_object_put(o);
		return pmc_err_set(err, code, "%s: a string contains a raw control character",
				   what);
	}
	if (members != (size_t)json_object_object_length(o)) {
		json_object_put(o);
		return pmc_err_set(err, code, "%s: a field appears more than once", what);
	}
	*out = o;
	return 0;
}

static int ctl_char_ok(unsigned char c)
{
	return c >= 0x20 && c != 0x7f;
}

/* length of the valid UTF-8 sequence at p (not a control character), 0 if none */
static size_t utf8_seq(const unsigned char *p)
{
	unsigned c = p[0], cp;
	size_t n;

	if (c < 0x80)
		return ctl_char_ok((unsigned char)c) ? 1 : 0;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0))
		return 0;
	return n;
}

/* p as one line of valid UTF-8 into out (cap bytes with the NUL, cut at a
 * character): control characters (C0, DEL, C1) become spaces, bytes of no
 * valid sequence '?'. The text's length. */
static size_t text_clean(const unsigned char *p, char *out, size_t cap)
{
	size_t n = 0;

	while (*p && n + 1 < cap) {
		size_t l = utf8_seq(p);

		if (!l && p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0) {
			out[n++] = ' '; /* a C1 control, two bytes */
			p += 2;
			continue;
		}
		if (!l) {
			out[n++] = *p < 0x80 ? ' ' : '?';
			p++;
			continue;
		}
		if (n + l >= cap)
			break;
		memcpy(out + n, p, l);
		n += l;
		p += l;
	}
	out[n] = '\0';
	return n;
}

/* every string in o (a reply) made one line of valid UTF-8, as
 * text_clean: a disk's identity, path or serial may hold any byte (a
 * reply a client cannot parse would break status for every client) */
static void clean_strings(struct json_object *o, int depth)
{
	if (depth > REPLY_DEPTH)
		return;
	switch (json_object_get_type(o)) {
	case json_type_string: {
		const unsigned char *p = (const unsigned char *)json_object_get_string(o);
		size_t len = (size_t)json_object_get_string_len(o), i = 0;
		char *out;

		while (i < len) {
			size_t l = utf8_seq(p + i);

			if (!l)
				break;
			i += l;
		}
		if (i == len)
			return;
		out = malloc(len + 1);
		if (out) {
			text_clean(p, out, len + 1);
			json_object_set_string(o, out);
			free(out);
		} else {
			json_object_set_string(o, "?");
		}
		return;
	}
	case json_type_object: {
		json_object_object_foreach(o, key, val)
		{
			(void)key;
			clean_strings(val, depth + 1);
		}
		return;
	}
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			clean_strings(json_object_array_get_idx(o, i), depth + 1);
		return;
	default:
		return;
	}
}

static int id_decode(struct json_object *j, struct pmc_ctl_id *id, const char *what, int code,
		     struct pmc_err *err)
{
	const char *s;
	size_t len;

	if (json_object_is_type(j, json_type_int)) {
		id->num = json_object_get_int64(j);
		if (id->num == INT64_MAX && json_object_get_uint64(j) > INT64_MAX)
			return pmc_err_set(err, code, "%s id: above %" PRId64, what, INT64_MAX);
		id->kind = PMC_CTL_ID_INT;
		return 0;
	}
	if (!json_object_is_type(j, json_type_string))
		return pmc_err_set(err, code, "%s id: expected an integer or a string, got %s",
				   what, jtype_name(j));
	s = json_object_get_string(j);
	len = (size_t)json_object_get_string_len(j);
	if (len > PMC_CTL_ID_MAX)
		return pmc_err_set(err, code, "%s id: %zu bytes long, the limit is %u", what, len,
				   PMC_CTL_ID_MAX);
	for (size_t i = 0, n; i < len; i += n) {
		n = utf8_seq((const unsigned char *)s + i);
		if (!n)
			return pmc_err_set(err, code,
					   "%s id: contains a control character or invalid UTF-8",
					   what);
	}
	memcpy(id->str, s, len);
	id->str[len] = '\0';
	id->kind = PMC_CTL_ID_STR;
	return 0;
}

/* a JSON value as the config table takes values */
static void jvalue(struct json_object *j, struct pmc_config_value *v)
{
	memset(v, 0, sizeof(*v));
	switch (json_object_get_type(j)) {
	case json_type_int:
		v->kind = PMC_CONFIG_V_INT;
		v->i = json_object_get_int64(j);
		return;
	case json_type_string:
		v->kind = PMC_CONFIG_V_STRING;
		v->s = json_object_get_string(j);
		return;
	default:
		v->kind = PMC_CONFIG_V_OTHER;
		v->what = jtype_name(j);
		return;
	}
}

static int field_allowed(enum pmc_ctl_cmd cmd, const char *name)
{
	if (!strcmp(name, "cmd") || !strcmp(name, "id"))
		return 1;
	if (cmd == PMC_CTL_VOLUME_ADD) {
		const struct pmc_config_key *k = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, name);

		return k != NULL || !strcmp(name, "replace_disk") || !strcmp(name, "discard_dirty");
	}
	for (unsigned i = 0; i < 4 && cmd_fields[cmd][i]; i++)
		if (!strcmp(cmd_fields[cmd][i], name))
			return 1;
	return 0;
}

static int volume_field(struct json_object *j, const char *cmd, const char *field, char *dst,
			struct pmc_err *err)
{
	char what[64];
	int rc;

	snprintf(what, sizeof(what), "%s %s", cmd, field);
	if (!json_object_is_type(j, json_type_string))
		return pmc_err_set(err, EINVAL, "%s: expected a string, got %s", what,
				   jtype_name(j));
	rc = pmc_config_name_check(json_object_get_string(j), what, err);
	if (rc)
		return rc;
	snprintf(dst, PMC_VOLUME_NAME_MAX + 1, "%s", json_object_get_string(j));
	return 0;
}

/* "key" of set/get: the table entry, checked against the command and "volume" */
static int key_field(struct json_object *o, struct pmc_ctl_req *r, const char *cmd,
		     struct pmc_err *err)
{
	struct json_object *j;
	const struct pmc_config_key *k;
	const char *name;

	if (!json_object_object_get_ex(o, "key", &j))
		return pmc_err_set(err, EINVAL, "%s: missing \"key\"", cmd);
	if (!json_object_is_type(j, json_type_string))
		return pmc_err_set(err, EINVAL, "%s key: expected a string, got %s", cmd,
				   jtype_name(j));
	name = json_object_get_string(j);
	k = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, name);
	if (!k)
		k = pmc_config_key_find(PMC_CONFIG_SCOPE_TOP, name);
	if (!k || k->type == PMC_CONFIG_T_LIST) {
		char q[80];

		pmc_config_quote(name, q, sizeof(q));
		return pmc_err_set(err, EINVAL, "%s key: unknown key %s", cmd, q);
	}
	if (r->cmd == PMC_CTL_SET && !(k->flags & PMC_CONFIG_RUNTIME))
		return pmc_err_set(err, EINVAL,
				   "set %s: cannot change at run time (edit the config and "
				   "restart pmcached)",
				   k->key);
	if (k->scope == PMC_CONFIG_SCOPE_VOLUME && !r->volume[0])
		return pmc_err_set(err, EINVAL, "%s %s: a volume's key: give \"volume\"", cmd,
				   k->key);
	if (k->scope == PMC_CONFIG_SCOPE_TOP && r->volume[0])
		return pmc_err_set(err, EINVAL, "%s %s: not a volume's key: drop \"volume\"", cmd,
				   k->key);
	r->key = k;
	return 0;
}

static int decode_fields(struct json_object *o, struct pmc_ctl_req *r, struct pmc_err *err)
{
	const char *cmd = cmd_names[r->cmd];
	struct json_object *j;
	struct pmc_config_value v;
	char where[96];
	int rc;

	json_object_object_foreach(o, name, unused)
	{
		(void)unused;
		if (!field_allowed(r->cmd, name)) {
			pmc_config_quote(name, where, sizeof(where));
			return pmc_err_set(err, EINVAL, "%s: unknown field %s", cmd, where);
		}
	}
	switch (r->cmd) {
	case PMC_CTL_STATUS:
	case PMC_CTL_VOLUME_LIST:
		return 0;
	case PMC_CTL_SHUTDOWN:
		if (json_object_object_get_ex(o, "remove_devices", &j)) {
			if (!json_object_is_type(j, json_type_boolean))
				return pmc_err_set(err, EINVAL,
						   "%s remove_devices: expected a boolean, got %s",
						   cmd, jtype_name(j));
			r->remove_devices = json_object_get_boolean(j) ? 1 : 0;
		}
		return 0;
	case PMC_CTL_STATS:
	case PMC_CTL_FLUSH:
		if (json_object_object_get_ex(o, "volume", &j))
			return volume_field(j, cmd, "volume", r->volume, err);
		return 0;
	case PMC_CTL_VOLUME_RECONNECT:
	case PMC_CTL_VOLUME_CLEAR_ERROR:
		if (!json_object_object_get_ex(o, "name", &j))
			return pmc_err_set(err, EINVAL, "%s: missing \"name\"", cmd);
		return volume_field(j, cmd, "name", r->volume, err);
	case PMC_CTL_VOLUME_REMOVE:
		if (!json_object_object_get_ex(o, "name", &j))
			return pmc_err_set(err, EINVAL, "%s: missing \"name\"", cmd);
		rc = volume_field(j, cmd, "name", r->volume, err);
		if (rc)
			return rc;
		if (json_object_object_get_ex(o, "force", &j)) {
			if (!json_object_is_type(j, json_type_boolean))
				return pmc_err_set(err, EINVAL,
						   "%s force: expected a boolean, got %s", cmd,
						   jtype_name(j));
			r->force = json_object_get_boolean(j) ? 1 : 0;
		}
		return 0;
	case PMC_CTL_VOLUME_ADD:
		pmc_config_volume_default(&r->add);
		if (!json_object_object_get_ex(o, "name", &j))
			return pmc_err_set(err, EINVAL, "%s: missing \"name\"", cmd);
		if (!json_object_object_get_ex(o, "disk", &j) &&
		    !json_object_object_get_ex(o, "disk.transport", &j))
			return pmc_err_set(err, EINVAL,
					   "%s: missing \"disk\" (or \"disk.transport\" and the "
					   "other disk.* of an NVMe-oF namespace)",
					   cmd);
		json_object_object_foreach(o, key, jv)
		{
			const struct pmc_config_key *k =
			    pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, key);

			if (!k && (!strcmp(key, "replace_disk") || !strcmp(key, "discard_dirty"))) {
				if (!json_object_is_type(jv, json_type_boolean))
					return pmc_err_set(err, EINVAL,
							   "%s %s: expected a boolean, got %s", cmd,
							   key, jtype_name(jv));
				*(key[0] == 'r' ? &r->replace_disk : &r->discard_dirty) =
				    json_object_get_boolean(jv) ? 1 : 0;
				continue;
			}
			if (!k)
				continue; /* cmd, id */
			snprintf(where, sizeof(where), "%s %s", cmd, key);
			jvalue(jv, &v);
			rc = pmc_config_key_assign(k, &r->add, &v, where, err);
			if (rc)
				return rc;
		}
		if (r->discard_dirty && !r->replace_disk)
			return pmc_err_set(err, EINVAL, "%s: discard_dirty needs replace_disk", cmd);
		return pmc_config_volume_check(&r->add, cmd, err);
	case PMC_CTL_SET:
	case PMC_CTL_GET:
		if (json_object_object_get_ex(o, "volume", &j)) {
			rc = volume_field(j, cmd, "volume", r->volume, err);
			if (rc)
				return rc;
		}
		rc = key_field(o, r, cmd, err);
		if (rc || r->cmd == PMC_CTL_GET)
			return rc;
		if (!json_object_object_get_ex(o, "value", &j))
			return pmc_err_set(err, EINVAL, "set %s: missing \"value\"", r->key->key);
		snprintf(where, sizeof(where), "set %s", r->key->key);
		jvalue(j, &v);
		return pmc_config_key_parse(r->key, &v, where, &r->value, err);
	case PMC_CTL_CMD_NR:
		break;
	}
	return pmc_err_set(err, EINVAL, "request: bad command");
}

int pmc_ctl_decode(const char *buf, size_t len, struct pmc_ctl_req *out, struct pmc_err *err)
{
	struct json_object *o, *j;
	const char *name;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = parse_line(buf, len, PMC_CTL_MAX_LINE, PMC_CTL_MAX_DEPTH, "request", EINVAL, &o, err);
	if (rc)
		return rc;
	if (json_object_object_get_ex(o, "id", &j)) {
		rc = id_decode(j, &out->id, "request", EINVAL, err);
		if (rc)
			goto out;
	}
	if (!json_object_object_get_ex(o, "cmd", &j)) {
		rc = pmc_err_set(err, EINVAL, "request: missing \"cmd\"");
		goto out;
	}
	if (!json_object_is_type(j, json_type_string)) {
		rc = pmc_err_set(err, EINVAL, "request cmd: expected a string, got %s",
				 jtype_name(j));
		goto out;
	}
	name = json_object_get_string(j);
	for (out->cmd = 0; out->cmd < PMC_CTL_CMD_NR; out->cmd++)
		if (!strcmp(cmd_names[out->cmd], name))
			break;
	if (out->cmd == PMC_CTL_CMD_NR) {
		char q[80];

		pmc_config_quote(name, q, sizeof(q));
		rc = pmc_err_set(err, EINVAL, "request: unknown command %s", q);
		goto out;
	}
	rc = decode_fields(o, out, err);
out:
	json_object_put(o);
	if (rc) {
		struct pmc_ctl_id id = out->id;

		memset(out, 0, sizeof(*out));
		out->id = id;
	}
	return rc;
}

/* --- building lines --- */

static int add(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return -ENOMEM;
	if (json_object_object_add(o, key, v)) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static int add_id(struct json_object *o, const struct pmc_ctl_id *id)
{
	if (!id || id->kind == PMC_CTL_ID_NONE)
		return 0;
	if (id->kind == PMC_CTL_ID_INT)
		return add(o, "id", json_object_new_int64(id->num));
	return add(o, "id", json_object_new_string(id->str));
}

/* a numeric key's value as JSON: words as strings, the rest as integers */
static struct json_object *jnum(const struct pmc_config_key *k, int64_t n)
{
	if (k->type == PMC_CONFIG_T_WORD) {
		for (int64_t i = 0; k->words[i]; i++)
			if (i == n)
				return json_object_new_string(k->words[i]);
	}
	return json_object_new_int64(n);
}

/* the object as a line; puts o */
static char *finish(struct json_object *o, int rc)
{
	const char *s;
	char *line = NULL;
	size_t len;

	if (!rc) {
		s = json_object_to_json_string_ext(o, JSON_FLAGS);
		len = s ? strlen(s) : 0;
		line = s ? malloc(len + 2) : NULL;
		if (line) {
			memcpy(line, s, len);
			line[len] = '\n';
			line[len + 1] = '\0';
		}
	}
	json_object_put(o);
	return line;
}

static int encode_fields(struct json_object *o, const struct pmc_ctl_req *r)
{
	struct pmc_config_volume def;
	int rc = 0;

	switch (r->cmd) {
	case PMC_CTL_STATS:
	case PMC_CTL_FLUSH:
	case PMC_CTL_SET:
	case PMC_CTL_GET:
		if (r->volume[0])
			rc = add(o, "volume", json_object_new_string(r->volume));
		if (!rc && (r->cmd == PMC_CTL_SET || r->cmd == PMC_CTL_GET))
			rc = r->key ? add(o, "key", json_object_new_string(r->key->key)) : -EINVAL;
		if (!rc && r->cmd == PMC_CTL_SET)
			rc = add(o, "value", jnum(r->key, r->value));
		return rc;
	case PMC_CTL_VOLUME_RECONNECT:
	case PMC_CTL_VOLUME_CLEAR_ERROR:
		return add(o, "name", json_object_new_string(r->volume));
	case PMC_CTL_VOLUME_REMOVE:
		rc = add(o, "name", json_object_new_string(r->volume));
		if (!rc && r->force)
			rc = add(o, "force", json_object_new_boolean(1));
		return rc;
	case PMC_CTL_SHUTDOWN:
		return r->remove_devices ? add(o, "remove_devices", json_object_new_boolean(1)) : 0;
	case PMC_CTL_VOLUME_ADD:
		pmc_config_volume_default(&def);
		for (size_t i = 0; !rc && i < pmc_config_table_len; i++) {
			const struct pmc_config_key *k = &pmc_config_table[i];
			const char *s = (const char *)&r->add + k->off;
			int64_t n;

			if (k->scope != PMC_CONFIG_SCOPE_VOLUME)
				continue;
			if (k->type == PMC_CONFIG_T_PATH || k->type == PMC_CONFIG_T_NAME ||
			    k->type == PMC_CONFIG_T_GROUP || k->type == PMC_CONFIG_T_TEXT) {
				if (!memchr(s, '\0', k->size))
					return -EINVAL;
				/* unset strings (and an NVMe-oF volume's "disk") are left out */
				if (!s[0] && !(k->flags & PMC_CONFIG_REQUIRED))
					continue;
				if (!s[0] && pmc_config_volume_is_nvmf(&r->add))
					continue;
				rc = add(o, k->key, json_object_new_string(s));
				continue;
			}
			n = pmc_config_key_load(k, &r->add);
			if (n != pmc_config_key_load(k, &def))
				rc = add(o, k->key, jnum(k, n));
		}
		if (!rc && r->replace_disk)
			rc = add(o, "replace_disk", json_object_new_boolean(1));
		if (!rc && r->discard_dirty)
			rc = add(o, "discard_dirty", json_object_new_boolean(1));
		return rc;
	default:
		return 0;
	}
}

char *pmc_ctl_encode_req(const struct pmc_ctl_req *req)
{
	struct json_object *o;
	struct pmc_ctl_req check;
	char *line;
	int rc;

	if ((unsigned)req->cmd >= PMC_CTL_CMD_NR)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	rc = add(o, "cmd", json_object_new_string(cmd_names[req->cmd]));
	if (!rc)
		rc = add_id(o, &req->id);
	if (!rc)
		rc = encode_fields(o, req);
	line = finish(o, rc);
	/* never hand the CLI a line the daemon would refuse */
	if (line && pmc_ctl_decode(line, strlen(line), &check, NULL)) {
		free(line);
		line = NULL;
	}
	return line;
}

static struct json_object *reply_new(const struct pmc_ctl_id *id)
{
	struct json_object *o = json_object_new_object();

	if (o && (add(o, "v", json_object_new_int(PMC_CTL_VERSION)) || add_id(o, id))) {
		json_object_put(o);
		o = NULL;
	}
	return o;
}

char *pmc_ctl_reply_ok(const struct pmc_ctl_id *id, struct json_object *payload)
{
	struct json_object *o = reply_new(id);
	int rc;

	if (!o) {
		json_object_put(payload);
		return NULL;
	}
	rc = add(o, "ok", json_object_new_boolean(1));
	if (!rc && payload && json_object_is_type(payload, json_type_object)) {
		json_object_object_foreach(payload, key, val)
		{
			if (!rc && strcmp(key, "id") && strcmp(key, "ok") && strcmp(key, "v"))
				rc = add(o, key, json_object_get(val));
		}
	} else if (!rc && payload) {
		rc = add(o, "value", json_object_get(payload));
	}
	json_object_put(payload);
	if (!rc)
		clean_strings(o, 0);
	return finish(o, rc);
}

char *pmc_ctl_reply_error(const struct pmc_ctl_id *id, int errnum, const char *msg)
{
	struct json_object *o = reply_new(id);
	char line[PMC_CTL_ERROR_MAX];
	int rc;

	if (!o)
		return NULL;
	text_clean((const unsigned char *)(msg ? msg : ""), line, sizeof(line));
	if (errnum < 0)
		errnum = -errnum;
	if (errnum == 0 || errnum > 4095)
		errnum = EIO;
	rc = add(o, "ok", json_object_new_boolean(0));
	if (!rc)
		rc = add(o, "errno", json_object_new_int(errnum));
	if (!rc)
		rc = add(o, "error", json_object_new_string(line));
	return finish(o, rc);
}

char *pmc_ctl_reply_progress(const struct pmc_ctl_id *id, uint64_t dirty_blocks)
{
	struct json_object *o = reply_new(id), *p;
	int rc;

	if (!o)
		return NULL;
	p = json_object_new_object();
	rc = add(o, "progress", p);
	if (!rc)
		rc = add(p, "dirty_blocks", json_object_new_uint64(dirty_blocks));
	return finish(o, rc);
}

char *pmc_ctl_reply_value(const struct pmc_ctl_id *id, const char *volume,
			  const struct pmc_config_key *k, const void *base)
{
	struct json_object *o = reply_new(id), *v;
	int rc;

	if (!o)
		return NULL;
	rc = add(o, "ok", json_object_new_boolean(1));
	if (!rc)
		rc = add(o, "key", json_object_new_string(k->key));
	if (!rc && volume)
		rc = add(o, "volume", json_object_new_string(volume));
	if ((k->flags & PMC_CONFIG_SECRET) && ((const char *)base + k->off)[0])
		v = json_object_new_string("(set, not shown)");
	else if (k->type == PMC_CONFIG_T_PATH || k->type == PMC_CONFIG_T_NAME ||
		 k->type == PMC_CONFIG_T_GROUP || k->type == PMC_CONFIG_T_TEXT)
		v = json_object_new_string_len((const char *)base + k->off,
					       (int)strnlen((const char *)base + k->off, k->size));
	else
		v = jnum(k, pmc_config_key_load(k, base));
	if (!rc)
		rc = add(o, "value", v);
	else
		json_object_put(v);
	if (!rc)
		clean_strings(o, 0);
	return finish(o, rc);
}

/* --- decoding replies --- */

int pmc_ctl_decode_reply(const char *buf, size_t len, struct pmc_ctl_reply *out,
			 struct pmc_err *err)
{
	struct json_object *o, *j, *ok, *prog;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = parse_line(buf, len, PMC_CTL_MAX_REPLY, REPLY_DEPTH, "reply", EPROTO, &o, err);
	if (rc)
		return rc;
	if (json_object_object_get_ex(o, "id", &j)) {
		rc = id_decode(j, &out->id, "reply", EPROTO, err);
		if (rc)
			goto fail;
	}
	if (json_object_object_get_ex(o, "v", &j)) {
		if (!json_object_is_type(j, json_type_int) || json_object_get_int64(j) < 1 ||
		    json_object_get_int64(j) > 1000000) {
			rc = pmc_err_set(err, EPROTO, "reply v: expected a protocol version >= 1");
			goto fail;
		}
		out->version = (int)json_object_get_int64(j);
		if (out->version != PMC_CTL_VERSION) {
			rc = pmc_err_set(err, EPROTO,
					 "reply: the daemon speaks protocol version %d, this client "
					 "version %d",
					 out->version, PMC_CTL_VERSION);
			goto fail;
		}
	}
	if (!json_object_object_get_ex(o, "ok", &ok)) {
		if (!json_object_object_get_ex(o, "progress", &prog)) {
			rc = pmc_err_set(err, EPROTO, "reply: neither \"ok\" nor \"progress\"");
			goto fail;
		}
		if (!json_object_is_type(prog, json_type_object) ||
		    !json_object_object_get_ex(prog, "dirty_blocks", &j) ||
		    !json_object_is_type(j, json_type_int) || json_object_get_int64(j) < 0) {
			rc = pmc_err_set(err, EPROTO,
					 "reply progress: expected {\"dirty_blocks\": N >= 0}");
			goto fail;
		}
		out->kind = PMC_CTL_REPLY_PROGRESS;
		out->dirty_blocks = json_object_get_uint64(j);
		json_object_put(o);
		return 0;
	}
	if (!json_object_is_type(ok, json_type_boolean)) {
		rc = pmc_err_set(err, EPROTO, "reply ok: expected a boolean, got %s",
				 jtype_name(ok));
		goto fail;
	}
	if (!json_object_get_boolean(ok)) {
		int64_t e;

		if (!json_object_object_get_ex(o, "errno", &j) ||
		    !json_object_is_type(j, json_type_int) || (e = json_object_get_int64(j)) < 1 ||
		    e > 4095) {
			rc = pmc_err_set(err, EPROTO, "reply errno: expected an integer 1..4095");
			goto fail;
		}
		out->errnum = (int)e;
		if (!json_object_object_get_ex(o, "error", &j) ||
		    !json_object_is_type(j, json_type_string)) {
			rc = pmc_err_set(err, EPROTO, "reply error: expected a string");
			goto fail;
		}
		snprintf(out->error, sizeof(out->error), "%s", json_object_get_string(j));
		out->kind = PMC_CTL_REPLY_ERROR;
		json_object_put(o);
		return 0;
	}
	out->kind = PMC_CTL_REPLY_OK;
	out->payload = json_object_new_object();
	if (!out->payload) {
		rc = pmc_err_set(err, ENOMEM, "reply: out of memory");
		goto fail;
	}
	json_object_object_foreach(o, key, val)
	{
		if (!strcmp(key, "id") || !strcmp(key, "ok") || !strcmp(key, "v"))
			continue;
		if (add(out->payload, key, json_object_get(val))) {
			rc = pmc_err_set(err, ENOMEM, "reply: out of memory");
			goto fail;
		}
	}
	json_object_put(o);
	return 0;
fail:
	json_object_put(o);
	pmc_ctl_reply_free(out);
	return rc;
}

void pmc_ctl_reply_free(struct pmc_ctl_reply *r)
{
	if (!r)
		return;
	json_object_put(r->payload);
	memset(r, 0, sizeof(*r));
}
