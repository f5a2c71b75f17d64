/* config.c - the configuration table, and loading, checking and writing
 * configurations with it (see config.h).
 *
 * Owns: pmc_config_table[] - the one description of every key - and the
 * code that turns libconfig settings (or control-protocol values, through
 * struct pmc_config_value) into a struct pmc_config.
 *
 * Loading is: refuse @include (a config must not read other files, and a
 * fuzzed one must not read /dev/zero), note plain integers that do not fit
 * in 32 bits (libconfig 1.5 truncates them without a word), parse with
 * libconfig, then walk the settings in file order against the table: each
 * setting is a known key, a group on the way to one, or an error. Then the
 * required keys and the rules between keys. The first error wins and
 * carries file, line and key; on any error the output is freed and zeroed.
 *
 * Invariants: a loaded config passes pmc_config_check(); every default in
 * the table parses and passes its own key's checks (test_config asserts
 * both). No state, no locking: everything works on the caller's structs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "config.h"

/* --- the table --- */

static const char *const format_words[] = {"if-blank", "never", NULL};
/* index = syslog priority */
static const char *const level_words[] = {"emerg",  "alert", "crit",  "err", "warning",
					  "notice", "info",  "debug", NULL};
/* index = enum pmc_mode; test_config checks them against pmc_mode_name() */
static const char *const mode_words[] = {"write-back", "write-through", "write-around",
					 "pass-through", NULL};
/* index = enum pmc_config_transport */
static const char *const transport_words[] = {"none", "tcp", "rdma", "fc", "loop", NULL};
static const char *const yesno_words[] = {"no", "yes", NULL};
/* index = enum pmc_nospace */
static const char *const nospace_words[] = {"wait", "around", NULL};

#define KIB 1024ll
#define MIB (1024ll * KIB)
#define GIB (1024ll * MIB)
#define TIB (1024ll * GIB)

/* clang-format off: one key per entry reads better than one field per line */
#define TOP(f)                                                                                     \
	.scope = PMC_CONFIG_SCOPE_TOP, .off = offsetof(struct pmc_config, f),                      \
	.size = sizeof(((struct pmc_config *)0)->f)
#define VOL(f)                                                                                     \
	.scope = PMC_CONFIG_SCOPE_VOLUME, .off = offsetof(struct pmc_config_volume, f),            \
	.size = sizeof(((struct pmc_config_volume *)0)->f)

const struct pmc_config_key pmc_config_table[] = {
    {.key = "pmem.path",
     TOP(pmem_path),
     .type = PMC_CONFIG_T_PATH,
     .flags = PMC_CONFIG_REQUIRED,
     .max = PMC_CONFIG_PATH_MAX - 1,
     .doc = "the pmem: a devdax device (/dev/daxX.Y) or a file"},
    {.key = "pmem.size",
     TOP(pmem_size),
     .type = PMC_CONFIG_T_SIZE,
     .def = "0",
     .min = 0,
     .max = 1024 * TIB,
     .align = 4 * KIB,
     .unit = "bytes",
     .doc = "0: use the device or file as it is; a file that does not exist, or is empty, is "
	    "made this size (never under /dev, except /dev/shm: a missing device is refused); "
	    "ignored for a devdax device and for a file that is not empty"},
    {.key = "pmem.format",
     TOP(pmem_format),
     .type = PMC_CONFIG_T_WORD,
     .def = "if-blank",
     .words = format_words,
     .doc = "if-blank: format a pmem whose header is blank (all zero) and that holds no file system, swap, RAID or partition signature; never: refuse it"},
    {.key = "pmem.block_size",
     TOP(pmem_block_size),
     .type = PMC_CONFIG_T_SIZE,
     .def = "4K",
     .min = 4 * KIB,
     .max = 4 * KIB,
     .unit = "bytes",
     .doc = "cache block size when formatting (only 4K for now)"},
    {.key = "state_dir",
     TOP(state_dir),
     .type = PMC_CONFIG_T_PATH,
     .def = "/var/lib/pmcache",
     /* with "/volumes.state.lock" the lock file's path fits PATH_MAX */
     .max = PMC_CONFIG_PATH_MAX - 1 - (sizeof("/volumes.state.lock") - 1),
     .doc = "directory of the volume state file, volumes.state (which volumes may have dirty "
	    "data in the pmem), and of its lock, volumes.state.lock: one pmcached per directory"},
    {.key = "control.socket",
     TOP(control_socket),
     .type = PMC_CONFIG_T_PATH,
     .def = "/run/pmcache/pmcached.sock",
     .max = PMC_CONFIG_SOCKET_MAX - 1,
     .doc = "Unix socket of the control protocol (pmcachectl)"},
    {.key = "control.group",
     TOP(control_group),
     .type = PMC_CONFIG_T_GROUP,
     .def = "",
     .max = PMC_CONFIG_GROUP_MAX,
     .doc = "group whose members may use the control socket, for the read-only commands "
	    "(status, stats, get, volume list); \"\": root only"},
    {.key = "control.admin_group",
     TOP(control_admin_group),
     .type = PMC_CONFIG_T_GROUP,
     .def = "",
     .max = PMC_CONFIG_GROUP_MAX,
     .doc = "group whose members may also change things (volume add, remove and reconnect, "
	    "set, flush, shutdown); \"\": root only"},
    {.key = "control.allowed_disks",
     TOP(control_allowed_disks),
     .type = PMC_CONFIG_T_PATH,
     .def = "/dev/*",
     .max = PMC_CONFIG_PATH_MAX - 1,
     .doc = "shell patterns, separated by spaces, of the block devices volume add may "
	    "attach, matched against the device node's own path, links resolved (with udev the "
	    "kernel's name: /dev/sdb, /dev/dm-3, /dev/rbd0), so patterns of links such as "
	    "/dev/disk/by-id/... or /dev/mapper/... never match; the volume records that path; "
	    "not for NVMe-oF disks"},
    {.key = "control.idle_timeout",
     TOP(control_idle_s),
     .type = PMC_CONFIG_T_INT,
     .def = "60",
     .min = 1,
     .max = 86400,
     .unit = "s",
     .doc = "close a control connection idle for this long"},
    {.key = "log.level",
     TOP(log_level),
     .type = PMC_CONFIG_T_WORD,
     .def = "info",
     .flags = PMC_CONFIG_RUNTIME,
     .words = level_words,
     .doc = "the least important syslog priority that is logged"},
    {.key = "queues.count",
     TOP(queues_count),
     .type = PMC_CONFIG_T_INT,
     .def = "2",
     .min = 1,
     .max = 64,
     .doc = "ublk queues per device, each served by its own thread"},
    {.key = "queues.depth",
     TOP(queues_depth),
     .type = PMC_CONFIG_T_INT,
     .def = "128",
     .min = 1,
     .max = 1024,
     .unit = "requests",
     .doc = "requests in flight per queue"},
    {.key = "queues.max_io",
     TOP(wb.max_req_bytes),
     .type = PMC_CONFIG_T_SIZE,
     .def = "1M",
     .min = 4 * KIB,
     .max = 1 * MIB,
     .align = 4 * KIB,
     .unit = "bytes",
     .doc = "largest request a device accepts"},
    {.key = "writeback.high_pct",
     TOP(wb.high_pct),
     .type = PMC_CONFIG_T_INT,
     .def = "50",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 0,
     .max = 100,
     .unit = "%",
     .doc = "start writing back when more than this share of the cache is dirty"},
    {.key = "writeback.low_pct",
     TOP(wb.low_pct),
     .type = PMC_CONFIG_T_INT,
     .def = "30",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 0,
     .max = 100,
     .unit = "%",
     .doc = "stop below this share (at most high_pct)"},
    {.key = "writeback.max_age_ms",
     TOP(wb.max_age_ms),
     .type = PMC_CONFIG_T_INT,
     .def = "30000",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 0,
     .max = 86400000,
     .unit = "ms",
     .doc = "write back data dirty for longer than this, however little is dirty"},
    {.key = "writeback.max_io",
     TOP(wb.max_io_bytes),
     .type = PMC_CONFIG_T_SIZE,
     .def = "1M",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 4 * KIB,
     .max = 16 * MIB,
     .align = 4 * KIB,
     .unit = "bytes",
     .doc = "merge neighbouring dirty blocks into disk writes up to this size, and at most "
	    "1024 blocks (4M with 4K blocks: more has no effect); at run time it can be lowered "
	    "and raised again up to its value at start, above that only by a restart"},
    {.key = "writeback.max_inflight",
     TOP(wb.max_inflight),
     .type = PMC_CONFIG_T_INT,
     .def = "32",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 1,
     .max = 1024,
     .unit = "writes",
     .doc = "write-back writes in flight while no other request runs, or while writes wait "
	    "for free blocks"},
    {.key = "writeback.busy_inflight",
     TOP(wb.busy_inflight),
     .type = PMC_CONFIG_T_INT,
     .def = "4",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 1,
     .max = 1024,
     .unit = "writes",
     .doc = "... while requests run (at most max_inflight)"},
    {.key = "writeback.idle_ms",
     TOP(wb.idle_ms),
     .type = PMC_CONFIG_T_INT,
     .def = "100",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 0,
     .max = 60000,
     .unit = "ms",
     .doc = "no request for this long counts as idle"},
    {.key = "writeback.retry_ms",
     TOP(wb.retry_ms),
     .type = PMC_CONFIG_T_INT,
     .def = "1000",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 1,
     .max = 60000,
     .unit = "ms",
     .doc = "first wait after a disk error, doubling up to 60 s"},
    {.key = "writeback.stall_ms",
     TOP(wb.stall_ms),
     .type = PMC_CONFIG_T_INT,
     .def = "10000",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 100,
     .max = 600000,
     .unit = "ms",
     .doc = "a volume whose write-back writes complete nothing for this long (a disk or "
	    "fabric path that stopped answering) no longer counts against max_inflight and "
	    "gets no more write-back until one completes, so the other volumes' dirty data "
	    "still drains"},
    {.key = "volumes",
     .scope = PMC_CONFIG_SCOPE_TOP,
     .type = PMC_CONFIG_T_LIST,
     .flags = PMC_CONFIG_REQUIRED,
     .min = 1,
     .max = PMC_CONFIG_VOLUMES_MAX,
     .unit = "volumes",
     .doc = "the backing disks, a group each; each is served as /dev/ublkbN"},
    {.key = "name",
     VOL(name),
     .type = PMC_CONFIG_T_NAME,
     .flags = PMC_CONFIG_REQUIRED,
     .max = PMC_VOLUME_NAME_MAX,
     .doc = "the volume's name, unique; also /dev/pmcache/<name>"},
    {.key = "disk",
     VOL(disk),
     .type = PMC_CONFIG_T_PATH,
     .flags = PMC_CONFIG_REQUIRED,
     .max = PMC_VOLUME_DISK_MAX,
     .doc = "the backing disk (block device or file), unique; or a group naming an NVMe-oF "
	    "namespace: disk = { transport = \"tcp\"; traddr = ...; subsysnqn = ...; nsid = 1; }"},
    {.key = "disk.transport",
     VOL(nvmf.transport),
     .type = PMC_CONFIG_T_WORD,
     .def = "none",
     .words = transport_words,
     .doc = "NVMe-oF: the transport (required in a disk group; rdma and fc are passed to "
	    "the kernel untested)"},
    {.key = "disk.traddr",
     VOL(nvmf.traddr),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = PMC_CONFIG_TRADDR_MAX,
     .doc = "NVMe-oF: the target's address (an IP address for tcp and rdma); required but "
	    "for loop"},
    {.key = "disk.trsvcid",
     VOL(nvmf.trsvcid),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = 31,
     .doc = "NVMe-oF: the target's port; \"\": 4420, or 8009 with discovery"},
    {.key = "disk.host_traddr",
     VOL(nvmf.host_traddr),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = PMC_CONFIG_TRADDR_MAX,
     .doc = "NVMe-oF: the local address to connect from; \"\": any"},
    {.key = "disk.host_iface",
     VOL(nvmf.host_iface),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = 63,
     .doc = "NVMe-oF: the local interface to connect from (tcp); \"\": any"},
    {.key = "disk.subsysnqn",
     VOL(nvmf.subsysnqn),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = PMC_CONFIG_NQN_MAX,
     .doc = "NVMe-oF: the subsystem's NQN (required in a disk group)"},
    {.key = "disk.nsid",
     VOL(nvmf.nsid),
     .type = PMC_CONFIG_T_INT,
     .def = "0",
     .min = 0,
     .max = 0xfffffffeLL,
     .doc = "NVMe-oF: the namespace id; 0: name the namespace by nguid or uuid"},
    {.key = "disk.nguid",
     VOL(nvmf.nguid),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = 32,
     .doc = "NVMe-oF: the namespace's NGUID, 32 hex digits; \"\": by nsid or uuid"},
    {.key = "disk.uuid",
     VOL(nvmf.uuid),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = 36,
     .doc = "NVMe-oF: the namespace's UUID; \"\": by nsid or nguid"},
    {.key = "disk.hostnqn",
     VOL(nvmf.hostnqn),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = PMC_CONFIG_NQN_MAX,
     .doc = "NVMe-oF: the host NQN to connect as; \"\": the host's (/etc/nvme/hostnqn)"},
    {.key = "disk.hostid",
     VOL(nvmf.hostid),
     .type = PMC_CONFIG_T_TEXT,
     .def = "",
     .max = 36,
     .doc = "NVMe-oF: the host id (a UUID); \"\": the host's (/etc/nvme/hostid)"},
    {.key = "disk.dhchap_key",
     VOL(nvmf.dhchap_key),
     .type = PMC_CONFIG_T_TEXT,
     .flags = PMC_CONFIG_SECRET,
     .def = "",
     .max = PMC_CONFIG_KEY_MAX,
     .doc = "NVMe-oF: the host's DH-HMAC-CHAP secret (DHHC-1:...); \"\": none; never shown"},
    {.key = "disk.dhchap_ctrl_key",
     VOL(nvmf.dhchap_ctrl_key),
     .type = PMC_CONFIG_T_TEXT,
     .flags = PMC_CONFIG_SECRET,
     .def = "",
     .max = PMC_CONFIG_KEY_MAX,
     .doc = "NVMe-oF: the controller's secret, for bidirectional authentication (not with "
	    "discovery); \"\": none; never shown"},
    {.key = "disk.discovery",
     VOL(nvmf.discovery),
     .type = PMC_CONFIG_T_WORD,
     .def = "no",
     .words = yesno_words,
     .doc = "NVMe-oF: yes: traddr is a discovery controller, whose log page gives the "
	    "subsystem's address"},
    {.key = "disk.ctrl_loss_tmo",
     VOL(nvmf.ctrl_loss_tmo),
     .type = PMC_CONFIG_T_INT,
     .def = "600",
     .min = -1,
     .max = 86400,
     .unit = "s",
     .doc = "NVMe-oF: how long the kernel tries to reconnect a lost controller; -1: "
	    "forever; then pmcached retries"},
    {.key = "disk.fast_io_fail_tmo",
     VOL(nvmf.fast_io_fail_tmo),
     .type = PMC_CONFIG_T_INT,
     .def = "5",
     .min = -1,
     .max = 86400,
     .unit = "s",
     .doc = "NVMe-oF: I/O fails after this long without a path (the cache keeps serving "
	    "hits and absorbing writes); -1: it waits for the reconnect"},
    {.key = "disk.reconnect_delay",
     VOL(nvmf.reconnect_delay),
     .type = PMC_CONFIG_T_INT,
     .def = "10",
     .min = 1,
     .max = 3600,
     .unit = "s",
     .doc = "NVMe-oF: the wait between the kernel's reconnect attempts"},
    {.key = "mode",
     VOL(vc.mode),
     .type = PMC_CONFIG_T_WORD,
     .def = "write-back",
     .flags = PMC_CONFIG_RUNTIME,
     .words = mode_words,
     .doc = "cache mode"},
    {.key = "admit_after_misses",
     VOL(vc.admit_after_misses),
     .type = PMC_CONFIG_T_INT,
     .def = "1",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 0,
     .max = 255,
     .unit = "misses",
     .doc = "cache a block read from the disk on its Nth miss; 0 and 1: on the first"},
    {.key = "seq_cutoff",
     VOL(vc.seq_cutoff_bytes),
     .type = PMC_CONFIG_T_SIZE,
     .def = "4M",
     .flags = PMC_CONFIG_RUNTIME,
     .min = 0,
     .max = 1 * TIB,
     .unit = "bytes",
     .doc = "a sequential stream longer than this goes around the cache: reads are not "
	    "cached, write-back writes go to the disk (dropping what they overwrite); 0: off"},
    {.key = "nospace",
     VOL(vc.nospace),
     .type = PMC_CONFIG_T_WORD,
     .def = "wait",
     .flags = PMC_CONFIG_RUNTIME,
     .words = nospace_words,
     .doc = "a write finding every block dirty waits for write-back, or goes around to the "
	    "disk"},
    {.key = "ublk_id",
     VOL(ublk_id),
     .type = PMC_CONFIG_T_INT,
     .def = "-1",
     .min = -1,
     .max = 1023,
     .doc = "device number N of /dev/ublkbN, unique; -1: any free one"},
};
/* clang-format on */

const size_t pmc_config_table_len = sizeof(pmc_config_table) / sizeof(pmc_config_table[0]);

#define TABLE_MAX 64 /* keys; sizes the line arrays of a load */
_Static_assert(sizeof(pmc_config_table) / sizeof(pmc_config_table[0]) <= TABLE_MAX,
	       "raise TABLE_MAX");

static size_t key_index(const struct pmc_config_key *k)
{
	return (size_t)(k - pmc_config_table);
}

const struct pmc_config_key *pmc_config_key_find(enum pmc_config_scope scope, const char *key)
{
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->scope == scope && !strcmp(k->key, key))
			return k;
	}
	return NULL;
}

static const struct pmc_config_key *key_by_field(enum pmc_config_scope scope, size_t off)
{
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->scope == scope && k->type != PMC_CONFIG_T_LIST && k->off == off)
			return k;
	}
	return NULL;
}

static int is_string_type(enum pmc_config_type t)
{
	return t == PMC_CONFIG_T_PATH || t == PMC_CONFIG_T_NAME || t == PMC_CONFIG_T_GROUP ||
	       t == PMC_CONFIG_T_TEXT;
}

/* --- sizes --- */

static const char size_units[] = "KMGT";

int pmc_config_size_parse(const char *s, uint64_t *bytes)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (*p) {
		const char *u = strchr(size_units, *p >= 'a' && *p <= 'z' ? *p - 32 : *p);

		if (!u || !*u || p[1])
			return -EINVAL;
		mul = 1ull << (10 * (u - size_units + 1));
		if (v > UINT64_MAX / mul)
			return -ERANGE;
	}
	*bytes = v * mul;
	return 0;
}

void pmc_config_size_format(uint64_t bytes, char *buf, size_t len)
{
	int u = 0;

	while (bytes && u < 4 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	if (u)
		snprintf(buf, len, "%" PRIu64 "%c", bytes, size_units[u - 1]);
	else
		snprintf(buf, len, "%" PRIu64, bytes);
}

/* --- messages --- */

void pmc_config_quote(const char *s, char *buf, size_t len)
{
	size_t n = 0, i;

	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return;
	}
	buf[n++] = '"';
	for (i = 0; s[i] && i < 64 && n + 6 < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else if (c >= 0x20 && c < 0x7f) {
			buf[n++] = (char)c;
		} else {
			n += (size_t)snprintf(buf + n, len - n, "\\x%02x", c);
		}
	}
	if (s[i] && n + 4 < len) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n++] = '"';
	buf[n] = '\0';
}

/* "file:line: path", "file: path" or "path"; "..." at the end if cut */
static void where_fmt(char *buf, size_t len, const char *file, unsigned line, const char *path)
{
	int n;

	if (file && line)
		n = snprintf(buf, len, "%s:%u: %s", file, line, path);
	else if (file)
		n = snprintf(buf, len, "%s: %s", file, path);
	else
		n = snprintf(buf, len, "%s", path);
	if ((n < 0 || (size_t)n >= len) && len > 4)
		memcpy(buf + len - 4, "...", 4);
}

/* a number of key k for a message: sizes in units where exact */
static void num_fmt(const struct pmc_config_key *k, int64_t v, char *buf, size_t len)
{
	if (k->type == PMC_CONFIG_T_SIZE && v >= 0)
		pmc_config_size_format((uint64_t)v, buf, len);
	else
		snprintf(buf, len, "%" PRId64, v);
}

/* the value as given, for messages: "\"2M\"" or "2097152" */
static void given_fmt(const struct pmc_config_value *v, char *buf, size_t len)
{
	if (v->kind == PMC_CONFIG_V_STRING)
		pmc_config_quote(v->s, buf, len);
	else
		snprintf(buf, len, "%" PRId64, v->i);
}

static const char *vkind_name(const struct pmc_config_value *v)
{
	switch (v->kind) {
	case PMC_CONFIG_V_INT:
		return "an integer";
	case PMC_CONFIG_V_STRING:
		return "a string";
	case PMC_CONFIG_V_OTHER:
		break;
	}
	return v->what ? v->what : "something else";
}

static const char *type_want(const struct pmc_config_key *k)
{
	switch (k->type) {
	case PMC_CONFIG_T_PATH:
	case PMC_CONFIG_T_NAME:
	case PMC_CONFIG_T_GROUP:
	case PMC_CONFIG_T_WORD:
	case PMC_CONFIG_T_TEXT:
		return "a string";
	case PMC_CONFIG_T_INT:
		return "an integer";
	case PMC_CONFIG_T_SIZE:
		return "a size (an integer, or a string such as \"512K\")";
	case PMC_CONFIG_T_LIST:
		return "a list of groups ( { ... }, ... )";
	}
	return "?";
}

/* "a, b, c" */
static void words_fmt(const char *const *w, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (; *w && n < len; w++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", *w);
}

/* --- strings --- */

/* 0 if s is valid UTF-8 without control characters; else the problem */
static const char *string_problem(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned c = *p, n, cp;

		if (c < 0x20 || c == 0x7f)
			return "contains a control character";
		if (c < 0x80) {
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return "is not valid UTF-8";
		}
		for (unsigned i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return "is not valid UTF-8";
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return "is not valid UTF-8";
		if (cp >= 0x80 && cp < 0xa0)
			return "contains a control character";
		p += n + 1;
	}
	return NULL;
}

static int name_char(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '_' || ch == '-';
}

/* a name or group name: chars, length, leading '-' */
static int word_check(const char *s, size_t max, const char *what, const char *kind,
		      struct pmc_err *err)
{
	size_t len = strlen(s);
	char q[80];

	if (len > max)
		return pmc_err_set(err, EINVAL, "%s: %s is %zu bytes long, the limit is %zu", what,
				   kind, len, max);
	pmc_config_quote(s, q, sizeof(q));
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!name_char((char)ch)) {
			if (ch >= 0x20 && ch < 0x7f)
				return pmc_err_set(err, EINVAL,
						   "%s: %s %s has '%c': use A-Z a-z 0-9 . _ -",
						   what, kind, q, ch);
			return pmc_err_set(err, EINVAL,
					   "%s: %s has byte 0x%02x: use A-Z a-z 0-9 . _ -", what,
					   kind, ch);
		}
	}
	if (s[0] == '-')
		return pmc_err_set(err, EINVAL, "%s: %s %s starts with '-'", what, kind, q);
	return 0;
}

int pmc_config_name_check(const char *name, const char *what, struct pmc_err *err)
{
	if (!name[0])
		return pmc_err_set(err, EINVAL, "%s: the name is empty", what);
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return pmc_err_set(err, EINVAL, "%s: \"%s\" cannot be a name", what, name);
	return word_check(name, PMC_VOLUME_NAME_MAX, what, "name", err);
}

static int parse_str(const struct pmc_config_key *k, const struct pmc_config_value *v,
		     const char *where, char *dst, struct pmc_err *err)
{
	const char *why;
	size_t len;
	int rc;

	if (v->kind != PMC_CONFIG_V_STRING)
		return pmc_err_set(err, EINVAL, "%s: expected %s, got %s", where, type_want(k),
				   vkind_name(v));
	len = strlen(v->s);
	switch (k->type) {
	case PMC_CONFIG_T_PATH:
		if (!len)
			return pmc_err_set(err, EINVAL, "%s: the path is empty", where);
		if (len > (size_t)k->max)
			return pmc_err_set(err, ENAMETOOLONG,
					   "%s: the path is %zu bytes long, the limit is %" PRId64,
					   where, len, k->max);
		why = string_problem(v->s);
		if (why)
			return pmc_err_set(err, EINVAL, "%s: the path %s", where, why);
		if (v->s[0] != '/') {
			char q[80];

			pmc_config_quote(v->s, q, sizeof(q));
			return pmc_err_set(err, EINVAL, "%s: %s is not an absolute path", where, q);
		}
		break;
	case PMC_CONFIG_T_NAME:
		rc = pmc_config_name_check(v->s, where, err);
		if (rc)
			return rc;
		break;
	case PMC_CONFIG_T_GROUP:
		rc = word_check(v->s, (size_t)k->max, where, "group name", err);
		if (rc)
			return rc;
		break;
	case PMC_CONFIG_T_TEXT:
		if (len > (size_t)k->max)
			return pmc_err_set(err, ENAMETOOLONG,
					   "%s: %zu bytes long, the limit is %" PRId64, where, len,
					   k->max);
		for (size_t i = 0; i < len; i++) {
			unsigned char ch = (unsigned char)v->s[i];

			/* no comma: these go to the kernel's nvme-fabrics options,
			 * which a comma separates (it would add options) */
			if (ch <= 0x20 || ch >= 0x7f || ch == ',')
				return pmc_err_set(err, EINVAL,
						   "%s: has byte 0x%02x: printable ASCII without "
						   "blanks or commas only",
						   where, ch);
		}
		break;
	default:
		return pmc_err_set(err, EINVAL, "%s: not a string key", where);
	}
	memset(dst, 0, k->size);
	memcpy(dst, v->s, len);
	return 0;
}

/* --- numbers --- */

int pmc_config_key_parse(const struct pmc_config_key *k, const struct pmc_config_value *v,
			 const char *where, int64_t *num, struct pmc_err *err)
{
	char given[80], lim[32], all[160];
	int64_t n;

	given_fmt(v, given, sizeof(given));
	switch (k->type) {
	case PMC_CONFIG_T_WORD:
		if (v->kind != PMC_CONFIG_V_STRING)
			return pmc_err_set(err, EINVAL, "%s: expected %s, got %s", where,
					   type_want(k), vkind_name(v));
		for (n = 0; k->words[n]; n++) {
			if (!strcmp(k->words[n], v->s)) {
				*num = n;
				return 0;
			}
		}
		words_fmt(k->words, all, sizeof(all));
		return pmc_err_set(err, EINVAL, "%s: %s is not one of %s", where, given, all);
	case PMC_CONFIG_T_INT:
		if (v->kind != PMC_CONFIG_V_INT)
			return pmc_err_set(err, EINVAL, "%s: expected %s, got %s", where,
					   type_want(k), vkind_name(v));
		n = v->i;
		break;
	case PMC_CONFIG_T_SIZE:
		if (v->kind == PMC_CONFIG_V_INT) {
			n = v->i;
		} else if (v->kind == PMC_CONFIG_V_STRING) {
			uint64_t u;
			int rc = pmc_config_size_parse(v->s, &u);

			if (rc == -ERANGE || (!rc && u > INT64_MAX))
				return pmc_err_set(err, ERANGE, "%s: %s is too large", where,
						   given);
			if (rc)
				return pmc_err_set(err, EINVAL,
						   "%s: %s is not a size (an integer, or digits "
						   "with K, M, G or T such as \"512K\")",
						   where, given);
			n = (int64_t)u;
		} else {
			return pmc_err_set(err, EINVAL, "%s: expected %s, got %s", where,
					   type_want(k), vkind_name(v));
		}
		break;
	default:
		return pmc_err_set(err, EINVAL, "%s: not a numeric key", where);
	}
	if (k->min == k->max && n != k->min) {
		num_fmt(k, k->min, lim, sizeof(lim));
		return pmc_err_set(err, ERANGE, "%s: %s is not supported (only %s)", where, given,
				   lim);
	}
	if (n < k->min) {
		num_fmt(k, k->min, lim, sizeof(lim));
		return pmc_err_set(err, ERANGE, "%s: %s is below the minimum %s", where, given,
				   lim);
	}
	if (n > k->max) {
		num_fmt(k, k->max, lim, sizeof(lim));
		return pmc_err_set(err, ERANGE, "%s: %s is above the maximum %s", where, given,
				   lim);
	}
	if (k->align > 1 && n % k->align) {
		num_fmt(k, k->align, lim, sizeof(lim));
		return pmc_err_set(err, EINVAL, "%s: %s is not a multiple of %s", where, given,
				   lim);
	}
	*num = n;
	return 0;
}

void pmc_config_key_store(const struct pmc_config_key *k, void *base, int64_t num)
{
	char *p = (char *)base + k->off;

	switch (k->size) {
	case 1: {
		uint8_t v = (uint8_t)num;
		memcpy(p, &v, 1);
		break;
	}
	case 2: {
		uint16_t v = (uint16_t)num;
		memcpy(p, &v, 2);
		break;
	}
	case 4: {
		uint32_t v = (uint32_t)num;
		memcpy(p, &v, 4);
		break;
	}
	case 8: {
		uint64_t v = (uint64_t)num;
		memcpy(p, &v, 8);
		break;
	}
	default:
		abort(); /* a table entry with a field size no key has */
	}
}

int64_t pmc_config_key_load(const struct pmc_config_key *k, const void *base)
{
	const char *p = (const char *)base + k->off;
	int sig = k->min < 0;

	switch (k->size) {
	case 1: {
		uint8_t v;
		memcpy(&v, p, 1);
		return sig ? (int64_t)(int8_t)v : (int64_t)v;
	}
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return sig ? (int64_t)(int16_t)v : (int64_t)v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, p, 4);
		return sig ? (int64_t)(int32_t)v : (int64_t)v;
	}
	case 8: {
		uint64_t v;
		memcpy(&v, p, 8);
		return (int64_t)v;
	}
	default:
		abort();
	}
}

int pmc_config_key_assign(const struct pmc_config_key *k, void *base,
			  const struct pmc_config_value *v, const char *where, struct pmc_err *err)
{
	int64_t n;
	int rc;

	if (k->type == PMC_CONFIG_T_LIST)
		return pmc_err_set(err, EINVAL, "%s: expected %s", where, type_want(k));
	if (is_string_type(k->type))
		return parse_str(k, v, where, (char *)base + k->off, err);
	rc = pmc_config_key_parse(k, v, where, &n, err);
	if (rc)
		return rc;
	pmc_config_key_store(k, base, n);
	return 0;
}

void *pmc_config_key_base(const struct pmc_config_key *k, struct pmc_config *c, uint32_t vol)
{
	if (k->scope == PMC_CONFIG_SCOPE_VOLUME)
		return vol < c->nr_volumes ? &c->volumes[vol] : NULL;
	return c;
}

/* --- defaults --- */

static void apply_defaults(enum pmc_config_scope scope, void *base)
{
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		struct pmc_config_value v = {.kind = PMC_CONFIG_V_STRING, .s = k->def};
		struct pmc_err err = {0};

		if (k->scope != scope || k->type == PMC_CONFIG_T_LIST)
			continue;
		if (!k->def) {
			memset((char *)base + k->off, 0, k->size);
			continue;
		}
		if (k->type == PMC_CONFIG_T_INT) {
			v.kind = PMC_CONFIG_V_INT;
			v.i = strtoll(k->def, NULL, 10);
		}
		if (pmc_config_key_assign(k, base, &v, k->key, &err)) {
			fprintf(stderr, "pmc_config_table: bad default: %s\n", err.msg);
			abort();
		}
	}
}

void pmc_config_default(struct pmc_config *c)
{
	memset(c, 0, sizeof(*c));
	pmc_wb_conf_default(&c->wb); /* fields the table does not name */
	apply_defaults(PMC_CONFIG_SCOPE_TOP, c);
}

void pmc_config_volume_default(struct pmc_config_volume *v)
{
	memset(v, 0, sizeof(*v));
	pmc_volume_conf_default(&v->vc);
	apply_defaults(PMC_CONFIG_SCOPE_VOLUME, v);
}

void pmc_config_free(struct pmc_config *c)
{
	if (!c)
		return;
	free(c->volumes);
	memset(c, 0, sizeof(*c));
}

int pmc_config_copy(struct pmc_config *dst, const struct pmc_config *src, struct pmc_err *err)
{
	struct pmc_config_volume *v = NULL;

	if (src->nr_volumes) {
		v = calloc(src->nr_volumes, sizeof(*v));
		if (!v)
			return pmc_err_set(err, ENOMEM, "config: out of memory for %u volumes",
					   src->nr_volumes);
		memcpy(v, src->volumes, src->nr_volumes * sizeof(*v));
	}
	*dst = *src;
	dst->volumes = v;
	return 0;
}

/* --- NVMe-oF disks --- */

const char *pmc_config_transport_name(int transport)
{
	int nr = (int)(sizeof(transport_words) / sizeof(transport_words[0])) - 1;

	if (transport < 0 || transport >= nr)
		return "?";
	return transport_words[transport];
}

static int is_disk_sub(const struct pmc_config_key *k)
{
	return k->scope == PMC_CONFIG_SCOPE_VOLUME && !strncmp(k->key, "disk.", 5);
}

static int all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F')))
			return 0;
	return s[n] == '\0';
}

/* 8-4-4-4-12 hex digits */
static int is_uuid(const char *s)
{
	static const int dash[] = {8, 13, 18, 23};

	if (strlen(s) != 36)
		return 0;
	for (int i = 0, d = 0; i < 36; i++) {
		if (d < 4 && i == dash[d]) {
			if (s[i] != '-')
				return 0;
			d++;
		} else if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
			     (s[i] >= 'A' && s[i] <= 'F'))) {
			return 0;
		}
	}
	return 1;
}

int pmc_config_volume_check(const struct pmc_config_volume *v, const char *where,
			    struct pmc_err *err)
{
	const struct pmc_config_nvmf *n = &v->nvmf;
	const char *tr = pmc_config_transport_name(n->transport);
	char q[80];

	if (!where)
		where = "volume";
	if (!pmc_config_volume_is_nvmf(v)) {
		struct pmc_config_volume def;

		pmc_config_volume_default(&def);
		for (size_t i = 0; i < pmc_config_table_len; i++) {
			const struct pmc_config_key *k = &pmc_config_table[i];
			char a[PMC_CONFIG_KEY_MAX + 8], b[PMC_CONFIG_KEY_MAX + 8];

			if (!is_disk_sub(k))
				continue;
			pmc_config_key_format(k, v, a, sizeof(a));
			pmc_config_key_format(k, &def, b, sizeof(b));
			if (strcmp(a, b))
				return pmc_err_set(err, EINVAL,
						   "%s: volume \"%s\" %s: only for an NVMe-oF disk "
						   "(set disk.transport)",
						   where, v->name, k->key);
		}
		if (!v->disk[0])
			return pmc_err_set(err, EINVAL,
					   "%s: volume \"%s\": no disk (a path, or an NVMe-oF "
					   "disk.transport)",
					   where, v->name);
		return 0;
	}
	if (v->disk[0]) {
		pmc_config_quote(v->disk, q, sizeof(q));
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk: both a path %s and an NVMe-oF transport",
				   where, v->name, q);
	}
	if (!n->subsysnqn[0])
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.subsysnqn: missing (required for an "
				   "NVMe-oF disk)",
				   where, v->name);
	if (strncmp(n->subsysnqn, "nqn.", 4)) {
		pmc_config_quote(n->subsysnqn, q, sizeof(q));
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.subsysnqn: %s is not an NQN "
				   "(nqn.<yyyy-mm>.<domain>:<name>)",
				   where, v->name, q);
	}
	if (n->hostnqn[0] && strncmp(n->hostnqn, "nqn.", 4)) {
		pmc_config_quote(n->hostnqn, q, sizeof(q));
		return pmc_err_set(err, EINVAL, "%s: volume \"%s\" disk.hostnqn: %s is not an NQN",
				   where, v->name, q);
	}
	if (!n->traddr[0] && n->transport != PMC_CONFIG_TR_LOOP)
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.traddr: missing (required for "
				   "transport %s)",
				   where, v->name, tr);
	if (n->traddr[0] &&
	    (n->transport == PMC_CONFIG_TR_TCP || n->transport == PMC_CONFIG_TR_RDMA)) {
		/* the kernel takes a numeric address only (libnvme resolves
		 * host_traddr, not traddr): a host name fails every connect
		 * with "invalid arguments" */
		unsigned char a[sizeof(struct in6_addr)];

		if (inet_pton(AF_INET, n->traddr, a) != 1 && inet_pton(AF_INET6, n->traddr, a) != 1) {
			pmc_config_quote(n->traddr, q, sizeof(q));
			return pmc_err_set(err, EINVAL,
					   "%s: volume \"%s\" disk.traddr: %s is not an IPv4 or IPv6 "
					   "address (transport %s takes no host name)",
					   where, v->name, q, tr);
		}
	}
	if (n->trsvcid[0] && (n->transport == PMC_CONFIG_TR_TCP ||
			      n->transport == PMC_CONFIG_TR_RDMA)) {
		char *end;
		unsigned long port = strtoul(n->trsvcid, &end, 10);

		if (*end || port < 1 || port > 65535 || n->trsvcid[0] == '0') {
			pmc_config_quote(n->trsvcid, q, sizeof(q));
			return pmc_err_set(err, EINVAL,
					   "%s: volume \"%s\" disk.trsvcid: %s is not a port (1 "
					   "to 65535)",
					   where, v->name, q);
		}
	}
	if (n->nguid[0] && (strlen(n->nguid) != 32 || !all_hex(n->nguid, 32))) {
		pmc_config_quote(n->nguid, q, sizeof(q));
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.nguid: %s is not 32 hex digits", where,
				   v->name, q);
	}
	if (n->uuid[0] && !is_uuid(n->uuid)) {
		pmc_config_quote(n->uuid, q, sizeof(q));
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.uuid: %s is not a UUID "
				   "(8-4-4-4-12 hex digits)",
				   where, v->name, q);
	}
	if (n->hostid[0] && !is_uuid(n->hostid)) {
		pmc_config_quote(n->hostid, q, sizeof(q));
		return pmc_err_set(err, EINVAL, "%s: volume \"%s\" disk.hostid: %s is not a UUID",
				   where, v->name, q);
	}
	if (!n->nsid && !n->nguid[0] && !n->uuid[0])
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.nsid: missing (name the namespace by "
				   "nsid, nguid or uuid)",
				   where, v->name);
	if (n->dhchap_key[0] && strncmp(n->dhchap_key, "DHHC-1:", 7))
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.dhchap_key: not a DH-HMAC-CHAP secret "
				   "(DHHC-1:...)",
				   where, v->name);
	if (n->dhchap_ctrl_key[0] && strncmp(n->dhchap_ctrl_key, "DHHC-1:", 7))
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.dhchap_ctrl_key: not a DH-HMAC-CHAP "
				   "secret (DHHC-1:...)",
				   where, v->name);
	if (n->dhchap_ctrl_key[0] && !n->dhchap_key[0])
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.dhchap_ctrl_key: needs disk.dhchap_key",
				   where, v->name);
	/* a controller found through the discovery log is connected by
	 * libnvme from the log entry, which takes no controller key: it would
	 * connect without the bidirectional authentication asked for */
	if (n->dhchap_ctrl_key[0] && n->discovery)
		return pmc_err_set(err, EINVAL,
				   "%s: volume \"%s\" disk.dhchap_ctrl_key: not with disk.discovery "
				   "(a discovered controller is connected without it); give the "
				   "subsystem's own port as traddr",
				   where, v->name);
	return 0;
}

void pmc_config_nvmf_label(const struct pmc_config_nvmf *n, char *buf, size_t len)
{
	char ns[48];

	if (n->nsid)
		snprintf(ns, sizeof(ns), "ns%u", n->nsid);
	else if (n->nguid[0])
		snprintf(ns, sizeof(ns), "nguid-%s", n->nguid);
	else
		snprintf(ns, sizeof(ns), "uuid-%s", n->uuid);
	snprintf(buf, len, "nvmf:%s:%s%s%s:%s:%s", pmc_config_transport_name(n->transport),
		 n->traddr[0] ? n->traddr : "-", n->trsvcid[0] ? ":" : "", n->trsvcid,
		 n->subsysnqn, ns);
}

/* two NVMe-oF disks that name the same namespace of the same subsystem */
static int same_nvmf(const struct pmc_config_nvmf *a, const struct pmc_config_nvmf *b)
{
	if (strcmp(a->subsysnqn, b->subsysnqn))
		return 0;
	if (a->nsid && b->nsid)
		return a->nsid == b->nsid;
	if (a->nguid[0] && b->nguid[0])
		return !strcasecmp(a->nguid, b->nguid);
	if (a->uuid[0] && b->uuid[0])
		return !strcasecmp(a->uuid, b->uuid);
	return 0; /* named differently: the daemon's identity check decides */
}

/* --- rules between keys, shared by the loader and pmc_config_check --- */

struct lines {
	unsigned top[TABLE_MAX]; /* line of each TOP key, 0 if not in the file */
	struct vlines *vol;	 /* per volume, or NULL */
};

struct vlines {
	unsigned group;		 /* line of the volume's group */
	unsigned key[TABLE_MAX]; /* line of each VOLUME key, 0 if not set */
};

static unsigned top_line(const struct lines *ln, const struct pmc_config_key *k)
{
	return ln ? ln->top[key_index(k)] : 0;
}

static unsigned vol_line(const struct lines *ln, uint32_t i, const struct pmc_config_key *k)
{
	if (!ln || !ln->vol)
		return 0;
	if (k && ln->vol[i].key[key_index(k)])
		return ln->vol[i].key[key_index(k)];
	return ln->vol[i].group;
}

#define WHERE_MAX 192

/* a <= b for two TOP keys; the message blames the one set in the file (a if both) */
static int order_check(const struct pmc_config *c, const struct lines *ln, const char *file,
		       size_t off_a, size_t off_b, struct pmc_err *err)
{
	const struct pmc_config_key *a = key_by_field(PMC_CONFIG_SCOPE_TOP, off_a);
	const struct pmc_config_key *b = key_by_field(PMC_CONFIG_SCOPE_TOP, off_b);
	int64_t va = pmc_config_key_load(a, c), vb = pmc_config_key_load(b, c);
	char where[WHERE_MAX];

	if (va <= vb)
		return 0;
	if (top_line(ln, b) && !top_line(ln, a)) {
		where_fmt(where, sizeof(where), file, top_line(ln, b), b->key);
		return pmc_err_set(err, EINVAL,
				   "%s: %" PRId64 " is below %s (%" PRId64 ", the default)", where,
				   vb, a->key, va);
	}
	where_fmt(where, sizeof(where), file, top_line(ln, a), a->key);
	return pmc_err_set(err, EINVAL, "%s: %" PRId64 " is above %s (%" PRId64 "%s)", where, va,
			   b->key, vb, top_line(ln, b) || !ln ? "" : ", the default");
}

/* do two paths name the same device or file? Resolved by the kernel
 * (st_rdev of block devices, st_dev + st_ino of files), never by the
 * strings: a by-id link and /dev/nvme0n1 are one disk. 0 when either path
 * does not exist (yet). */
int pmc_config_same_device(const char *a, const char *b)
{
	struct stat sa, sb;

	if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
		return 0;
	if ((S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) ||
	    (S_ISCHR(sa.st_mode) && S_ISCHR(sb.st_mode)))
		return sa.st_rdev == sb.st_rdev;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* volume i against volumes 0..i-1 and pmem.path */
static int volume_cross(const struct pmc_config *c, uint32_t i, const struct lines *ln,
			const char *file, struct pmc_err *err)
{
	const struct pmc_config_volume *v = &c->volumes[i];
	const struct pmc_config_key *kn = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, "name");
	const struct pmc_config_key *kd = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, "disk");
	const struct pmc_config_key *ku = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, "ublk_id");
	char where[WHERE_MAX], path[48], q[80];
	int rc;

	snprintf(path, sizeof(path), "volumes.[%u]", i);
	where_fmt(where, sizeof(where), file, vol_line(ln, i, kd), path);
	rc = pmc_config_volume_check(v, where, err);
	if (rc)
		return rc;
	for (uint32_t j = 0; j < i; j++) {
		const struct pmc_config_volume *w = &c->volumes[j];
		int nv = pmc_config_volume_is_nvmf(v), nw = pmc_config_volume_is_nvmf(w);

		if (!strcmp(v->name, w->name)) {
			where_fmt(where, sizeof(where), file, vol_line(ln, i, kn), "volumes");
			return pmc_err_set(err, EEXIST, "%s: two volumes named \"%s\"", where,
					   v->name);
		}
		if (nv && nw && same_nvmf(&v->nvmf, &w->nvmf)) {
			char lv[160];

			pmc_config_nvmf_label(&v->nvmf, lv, sizeof(lv));
			where_fmt(where, sizeof(where), file, vol_line(ln, i, kd), "volumes");
			return pmc_err_set(err, EEXIST,
					   "%s: two volumes on the NVMe-oF namespace %s (\"%s\" and "
					   "\"%s\")",
					   where, lv, w->name, v->name);
		}
		if (!nv && !nw && !strcmp(v->disk, w->disk)) {
			pmc_config_quote(v->disk, q, sizeof(q));
			where_fmt(where, sizeof(where), file, vol_line(ln, i, kd), "volumes");
			return pmc_err_set(err, EEXIST,
					   "%s: two volumes on disk %s (\"%s\" and \"%s\")", where,
					   q, w->name, v->name);
		}
		if (!nv && !nw && pmc_config_same_device(v->disk, w->disk)) {
			char q2[80];

			pmc_config_quote(v->disk, q, sizeof(q));
			pmc_config_quote(w->disk, q2, sizeof(q2));
			where_fmt(where, sizeof(where), file, vol_line(ln, i, kd), "volumes");
			return pmc_err_set(err, EEXIST,
					   "%s: %s and %s are the same disk (volumes \"%s\" and "
					   "\"%s\")",
					   where, q, q2, w->name, v->name);
		}
		if (v->ublk_id >= 0 && v->ublk_id == w->ublk_id) {
			snprintf(path, sizeof(path), "volumes.[%u].ublk_id", i);
			where_fmt(where, sizeof(where), file, vol_line(ln, i, ku), path);
			return pmc_err_set(err, EEXIST, "%s: %d is also the id of volume \"%s\"",
					   where, v->ublk_id, w->name);
		}
	}
	if (c->pmem_path[0] && v->disk[0] &&
	    (!strcmp(v->disk, c->pmem_path) || pmc_config_same_device(v->disk, c->pmem_path))) {
		pmc_config_quote(v->disk, q, sizeof(q));
		snprintf(path, sizeof(path), "volumes.[%u].disk", i);
		where_fmt(where, sizeof(where), file, vol_line(ln, i, kd), path);
		return pmc_err_set(err, EINVAL, "%s: %s is also pmem.path", where, q);
	}
	return 0;
}

static int cross_check(const struct pmc_config *c, const struct lines *ln, const char *file,
		       struct pmc_err *err)
{
	int rc;

	rc = order_check(c, ln, file, offsetof(struct pmc_config, wb.low_pct),
			 offsetof(struct pmc_config, wb.high_pct), err);
	if (!rc)
		rc = order_check(c, ln, file, offsetof(struct pmc_config, wb.busy_inflight),
				 offsetof(struct pmc_config, wb.max_inflight), err);
	for (uint32_t i = 0; !rc && i < c->nr_volumes; i++)
		rc = volume_cross(c, i, ln, file, err);
	return rc;
}

/* --- checking a config in memory --- */

/* key k of base, re-parsed from its stored value */
static int key_recheck(const struct pmc_config_key *k, const void *base, const char *where,
		       struct pmc_err *err)
{
	struct pmc_config_value v = {.kind = PMC_CONFIG_V_INT};
	char tmp[PMC_CONFIG_PATH_MAX];
	const char *s;
	int64_t n;

	if (is_string_type(k->type)) {
		s = (const char *)base + k->off;
		if (!memchr(s, '\0', k->size))
			return pmc_err_set(err, EINVAL, "%s: not NUL-terminated", where);
		if (k->type == PMC_CONFIG_T_GROUP && !s[0])
			return 0;
		if (!s[0] && (k->flags & PMC_CONFIG_REQUIRED))
			return pmc_err_set(err, EINVAL, "%s: missing (required)", where);
		v.kind = PMC_CONFIG_V_STRING;
		v.s = s;
		return parse_str(k, &v, where, tmp, err);
	}
	n = pmc_config_key_load(k, base);
	if (k->type == PMC_CONFIG_T_WORD) {
		for (int64_t i = 0; k->words[i]; i++)
			if (i == n)
				return 0;
		return pmc_err_set(err, EINVAL, "%s: %" PRId64 " is not a valid choice", where, n);
	}
	v.i = n;
	return pmc_config_key_parse(k, &v, where, &n, err);
}

int pmc_config_check(const struct pmc_config *c, struct pmc_err *err)
{
	char where[WHERE_MAX];
	int rc;

	if (c->nr_volumes < 1 || c->nr_volumes > PMC_CONFIG_VOLUMES_MAX || !c->volumes)
		return pmc_err_set(err, EINVAL, "volumes: %u volumes, need 1 to %u", c->nr_volumes,
				   PMC_CONFIG_VOLUMES_MAX);
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->type == PMC_CONFIG_T_LIST)
			continue;
		if (k->scope == PMC_CONFIG_SCOPE_TOP) {
			rc = key_recheck(k, c, k->key, err);
			if (rc)
				return rc;
			continue;
		}
		for (uint32_t j = 0; j < c->nr_volumes; j++) {
			if (pmc_config_volume_is_nvmf(&c->volumes[j]) && !strcmp(k->key, "disk") &&
			    !c->volumes[j].disk[0])
				continue; /* pmc_config_volume_check's */
			snprintf(where, sizeof(where), "volumes.[%u].%s", j, k->key);
			rc = key_recheck(k, &c->volumes[j], where, err);
			if (rc)
				return rc;
		}
	}
	return cross_check(c, NULL, NULL, err);
}

/* --- loading --- */

#define MAX_BIG_INTS 8

struct load {
	const char *file; /* for messages */
	struct pmc_config *c;
	struct lines ln;
	struct pmc_err *err;
	/* plain integers libconfig truncated to 32 bits */
	struct {
		unsigned line;
		int32_t stored; /* what libconfig made of it */
		char text[24];
	} big[MAX_BIG_INTS];
	unsigned nr_big;
};

static void value_of(const config_setting_t *s, struct pmc_config_value *v)
{
	memset(v, 0, sizeof(*v));
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		v->kind = PMC_CONFIG_V_INT;
		v->i = config_setting_get_int64(s);
		return;
	case CONFIG_TYPE_STRING:
		v->kind = PMC_CONFIG_V_STRING;
		v->s = config_setting_get_string(s);
		if (!v->s)
			v->s = "";
		return;
	case CONFIG_TYPE_FLOAT:
		v->what = "a float";
		break;
	case CONFIG_TYPE_BOOL:
		v->what = "a boolean";
		break;
	case CONFIG_TYPE_GROUP:
		v->what = "a group";
		break;
	case CONFIG_TYPE_ARRAY:
		v->what = "an array";
		break;
	case CONFIG_TYPE_LIST:
		v->what = "a list";
		break;
	default:
		v->what = "something unknown";
		break;
	}
	v->kind = PMC_CONFIG_V_OTHER;
}

/* edit distance of two short strings, capped: for "did you mean" */
static unsigned edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[65];

	if (la > 64 || lb > 64)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0];

		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static int unknown_key(struct load *ld, unsigned line, const char *path, const char *rel,
		       enum pmc_config_scope scope)
{
	const struct pmc_config_key *best = NULL;
	unsigned bd = 3;
	size_t blen = 0;
	char where[WHERE_MAX];

	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		unsigned d;

		const char *dot = strchr(k->key, '.');

		if (k->scope != scope)
			continue;
		d = edit_distance(rel, k->key);
		if (d < bd) {
			bd = d;
			best = k;
			blen = strlen(k->key);
		}
		if (dot && !strchr(rel, '.')) { /* a group's name */
			char group[64];

			snprintf(group, sizeof(group), "%.*s", (int)(dot - k->key), k->key);
			d = edit_distance(rel, group);
			if (d < bd) {
				bd = d;
				best = k;
				blen = (size_t)(dot - k->key);
			}
		}
	}
	where_fmt(where, sizeof(where), ld->file, line, path);
	if (best)
		return pmc_err_set(ld->err, EINVAL, "%s: unknown key (did you mean %.*s?)", where,
				   (int)blen, best->key);
	return pmc_err_set(ld->err, EINVAL, "%s: unknown key", where);
}

/* libconfig truncated a plain integer of this setting */
static int big_int_check(struct load *ld, const struct pmc_config_key *k, const config_setting_t *s,
			 const char *where)
{
	if (config_setting_type(s) != CONFIG_TYPE_INT)
		return 0;
	for (unsigned i = 0; i < ld->nr_big; i++) {
		if (ld->big[i].line == config_setting_source_line(s) &&
		    ld->big[i].stored == config_setting_get_int(s))
			return pmc_err_set(
			    ld->err, ERANGE, "%s: %s does not fit in 32 bits: write %sL%s", where,
			    ld->big[i].text, ld->big[i].text,
			    k->type == PMC_CONFIG_T_SIZE ? ", or a size such as \"4G\"" : "");
	}
	return 0;
}

static int assign_setting(struct load *ld, const struct pmc_config_key *k, void *base,
			  const config_setting_t *s, const char *where)
{
	struct pmc_config_value v;
	int rc;

	rc = big_int_check(ld, k, s, where);
	if (rc)
		return rc;
	value_of(s, &v);
	return pmc_config_key_assign(k, base, &v, where, ld->err);
}

/* disk = { transport = ...; ... }: the disk.* keys of volume i */
static int load_disk_group(struct load *ld, const config_setting_t *g, uint32_t i)
{
	struct pmc_config_volume *v = &ld->c->volumes[i];
	const config_setting_t *vg = config_setting_parent(g);
	const char *vname = NULL;
	char path[WHERE_MAX], where[WHERE_MAX], rel[64], named[96] = "";
	int n = config_setting_length(g), rc;

	/* name the volume in messages when the file does */
	if (vg && config_setting_lookup_string(vg, "name", &vname) == CONFIG_TRUE &&
	    !pmc_config_name_check(vname, "", &(struct pmc_err){0}))
		snprintf(named, sizeof(named), " (volume \"%s\")", vname);
	for (int j = 0; j < n; j++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)j);
		const char *name = config_setting_name(s);
		const struct pmc_config_key *k = NULL;
		unsigned line = config_setting_source_line(s);

		snprintf(rel, sizeof(rel), "disk.%s", name ? name : "?");
		snprintf(path, sizeof(path), "volumes.[%u].%s%s", i, rel, named);
		if (name)
			k = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, rel);
		if (!k || !is_disk_sub(k))
			return unknown_key(ld, line, path, rel, PMC_CONFIG_SCOPE_VOLUME);
		where_fmt(where, sizeof(where), ld->file, line, path);
		rc = assign_setting(ld, k, v, s, where);
		if (rc)
			return rc;
		ld->ln.vol[i].key[key_index(k)] = line;
	}
	if (!pmc_config_volume_is_nvmf(v)) {
		snprintf(path, sizeof(path), "volumes.[%u].disk.transport%s", i, named);
		where_fmt(where, sizeof(where), ld->file, config_setting_source_line(g), path);
		return pmc_err_set(ld->err, EINVAL,
				   "%s: missing (required in a disk group: tcp, rdma, fc or loop)",
				   where);
	}
	return 0;
}

static int load_volume(struct load *ld, const config_setting_t *g, uint32_t i)
{
	struct pmc_config_volume *v = &ld->c->volumes[i];
	struct vlines *vl = &ld->ln.vol[i];
	char path[WHERE_MAX], where[WHERE_MAX];
	int rc, n;

	pmc_config_volume_default(v);
	vl->group = config_setting_source_line(g);
	snprintf(path, sizeof(path), "volumes.[%u]", i);
	if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
		struct pmc_config_value val;

		value_of(g, &val);
		where_fmt(where, sizeof(where), ld->file, vl->group, path);
		return pmc_err_set(ld->err, EINVAL,
				   "%s: expected a group { name = ...; disk = ...; }, got %s",
				   where, vkind_name(&val));
	}
	n = config_setting_length(g);
	for (int j = 0; j < n; j++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)j);
		const char *name = config_setting_name(s);
		const struct pmc_config_key *k;
		unsigned line = config_setting_source_line(s);

		snprintf(path, sizeof(path), "volumes.[%u].%s", i, name ? name : "?");
		k = name ? pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, name) : NULL;
		if (!k)
			return unknown_key(ld, line, path, name ? name : "?",
					   PMC_CONFIG_SCOPE_VOLUME);
		if (!strcmp(name, "disk") && config_setting_type(s) == CONFIG_TYPE_GROUP) {
			rc = load_disk_group(ld, s, i);
			if (rc)
				return rc;
			vl->key[key_index(k)] = line;
			continue;
		}
		where_fmt(where, sizeof(where), ld->file, line, path);
		rc = assign_setting(ld, k, v, s, where);
		if (rc)
			return rc;
		vl->key[key_index(k)] = line;
	}
	for (size_t j = 0; j < pmc_config_table_len; j++) {
		const struct pmc_config_key *k = &pmc_config_table[j];

		if (k->scope != PMC_CONFIG_SCOPE_VOLUME || !(k->flags & PMC_CONFIG_REQUIRED) ||
		    vl->key[j])
			continue;
		snprintf(path, sizeof(path), "volumes.[%u].%s", i, k->key);
		where_fmt(where, sizeof(where), ld->file, vl->group, path);
		return pmc_err_set(ld->err, EINVAL, "%s: missing (required)", where);
	}
	return 0;
}

static int load_volumes(struct load *ld, const struct pmc_config_key *k, const config_setting_t *s)
{
	unsigned line = config_setting_source_line(s);
	char where[WHERE_MAX];
	int n, rc;

	where_fmt(where, sizeof(where), ld->file, line, k->key);
	if (config_setting_type(s) != CONFIG_TYPE_LIST) {
		struct pmc_config_value v;

		value_of(s, &v);
		return pmc_err_set(ld->err, EINVAL, "%s: expected %s, got %s", where, type_want(k),
				   vkind_name(&v));
	}
	n = config_setting_length(s);
	if (n < k->min)
		return pmc_err_set(ld->err, EINVAL,
				   "%s: the list is empty: name at least one "
				   "volume",
				   where);
	if (n > k->max)
		return pmc_err_set(ld->err, E2BIG, "%s: %d volumes, the limit is %" PRId64, where,
				   n, k->max);
	ld->c->volumes = calloc((size_t)n, sizeof(*ld->c->volumes));
	ld->ln.vol = calloc((size_t)n, sizeof(*ld->ln.vol));
	if (!ld->c->volumes || !ld->ln.vol)
		return pmc_err_set(ld->err, ENOMEM, "%s: out of memory for %d volumes", where, n);
	ld->c->nr_volumes = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		rc = load_volume(ld, config_setting_get_elem(s, (unsigned)i), (uint32_t)i);
		if (rc)
			return rc;
	}
	return 0;
}

/* is prefix the path of a group that holds keys ("pmem")? */
static int is_group_path(const char *prefix)
{
	size_t len = strlen(prefix);

	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->scope == PMC_CONFIG_SCOPE_TOP && !strncmp(k->key, prefix, len) &&
		    k->key[len] == '.')
			return 1;
	}
	return 0;
}

static int walk_group(struct load *ld, const config_setting_t *g, const char *prefix)
{
	int n = config_setting_length(g), rc;

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(s);
		const struct pmc_config_key *k = NULL;
		unsigned line = config_setting_source_line(s);
		char path[WHERE_MAX], where[WHERE_MAX];
		int len;

		if (!name)
			name = "?";
		len = snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", name);
		if (len < 0 || (size_t)len >= sizeof(path))
			return unknown_key(ld, line, path, path, PMC_CONFIG_SCOPE_TOP);
		k = pmc_config_key_find(PMC_CONFIG_SCOPE_TOP, path);
		if (!k) {
			if (!is_group_path(path))
				return unknown_key(ld, line, path, path, PMC_CONFIG_SCOPE_TOP);
			if (config_setting_type(s) != CONFIG_TYPE_GROUP) {
				struct pmc_config_value v;

				value_of(s, &v);
				where_fmt(where, sizeof(where), ld->file, line, path);
				return pmc_err_set(ld->err, EINVAL,
						   "%s: expected a group { ... }, got %s", where,
						   vkind_name(&v));
			}
			rc = walk_group(ld, s, path);
			if (rc)
				return rc;
			continue;
		}
		ld->ln.top[key_index(k)] = line;
		if (k->type == PMC_CONFIG_T_LIST) {
			rc = load_volumes(ld, k, s);
		} else {
			where_fmt(where, sizeof(where), ld->file, line, path);
			rc = assign_setting(ld, k, ld->c, s, where);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* what libconfig 1.5 stores for a plain integer literal: strtoll (decimal)
 * or strtoull (hex), saturating, then truncated to an int */
static int32_t libconfig_int(uint64_t v, int neg, int hex, int big)
{
	int64_t s;

	if (hex)
		return (int32_t)(uint32_t)(big ? UINT64_MAX : v);
	if (neg)
		s = big || v > (uint64_t)INT64_MAX + 1 ? INT64_MIN
		    : v == (uint64_t)INT64_MAX + 1     ? INT64_MIN
						       : -(int64_t)v;
	else
		s = big || v > INT64_MAX ? INT64_MAX : (int64_t)v;
	return (int32_t)(uint32_t)(uint64_t)s;
}

/*
 * Before libconfig sees the text: refuse @include (libconfig would open the
 * file), and note plain integer literals that do not fit in 32 bits, which
 * libconfig 1.5 truncates; the walk reports them by key. A small lexer of
 * libconfig's syntax: comments, strings, names, numbers.
 */
static int prescan(struct load *ld, const char *t)
{
	unsigned line = 1;
	int bol = 1; /* only blanks since the start of the line */
	const char *p = t;

	while (*p) {
		char ch = *p;

		if (ch == '\n') {
			line++;
			bol = 1;
			p++;
			continue;
		}
		if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
			p++;
			continue;
		}
		if (bol && !strncmp(p, "@include", 8))
			return pmc_err_set(ld->err, EINVAL, "%s:%u: @include is not supported",
					   ld->file, line);
		bol = 0;
		if (ch == '#' || (ch == '/' && p[1] == '/')) {
			while (*p && *p != '\n')
				p++;
			continue;
		}
		if (ch == '/' && p[1] == '*') {
			for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
				line += *p == '\n';
			p += *p ? 2 : 0;
			continue;
		}
		if (ch == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1])
					p++;
				line += *p == '\n';
			}
			p += *p ? 1 : 0;
			continue;
		}
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '*') {
			while (name_char(*p) || *p == '*')
				p++;
			continue;
		}
		if ((ch >= '0' && ch <= '9') ||
		    ((ch == '-' || ch == '+') && p[1] >= '0' && p[1] <= '9')) {
			const char *s = p, *d;
			int neg = ch == '-', hex, big = 0;
			uint64_t v = 0;
			size_t len;

			if (ch == '-' || ch == '+')
				p++;
			hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
			while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
			       (*p >= 'A' && *p <= 'Z') || *p == '.' ||
			       (!hex && (*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E')))
				p++;
			len = (size_t)(p - s);
			if (memchr(s, 'L', len) || memchr(s, '.', len) ||
			    (!hex && (memchr(s, 'e', len) || memchr(s, 'E', len))))
				continue; /* 64-bit, float or not a number: libconfig's business */
			for (d = s + (neg || *s == '+') + (hex ? 2 : 0); d < p; d++) {
				unsigned dig;

				if (*d >= '0' && *d <= '9')
					dig = (unsigned)(*d - '0');
				else if (hex && *d >= 'a' && *d <= 'f')
					dig = (unsigned)(*d - 'a' + 10);
				else if (hex && *d >= 'A' && *d <= 'F')
					dig = (unsigned)(*d - 'A' + 10);
				else
					break;
				if (hex ? v > UINT64_MAX >> 4 : v > (UINT64_MAX - dig) / 10)
					big = 1; /* keep scanning: is it a number at all? */
				else
					v = v * (hex ? 16 : 10) + dig;
			}
			if (d != p)
				continue; /* not a number */
			if (!big && (neg ? v <= 0x80000000ull : v <= 0x7fffffffull))
				continue;
			if (ld->nr_big == MAX_BIG_INTS)
				return pmc_err_set(ld->err, ERANGE,
						   "%s:%u: %.*s does not fit in 32 bits: write it "
						   "with an L suffix",
						   ld->file, line, (int)(len < 23 ? len : 23), s);
			ld->big[ld->nr_big].line = line;
			ld->big[ld->nr_big].stored = libconfig_int(v, neg, hex, big);
			snprintf(ld->big[ld->nr_big].text, sizeof(ld->big[0].text), "%.*s",
				 (int)(len < 23 ? len : 23), s);
			ld->nr_big++;
			continue;
		}
		p++;
	}
	return 0;
}

int pmc_config_load_string(const char *text, const char *name, struct pmc_config *out,
			   struct pmc_err *err)
{
	struct load ld = {.file = name ? name : "config", .c = out, .err = err};
	char where[WHERE_MAX];
	config_t cf;
	int rc;

	pmc_config_default(out);
	rc = prescan(&ld, text);
	if (rc)
		goto fail;
	config_init(&cf);
	if (config_read_string(&cf, text) != CONFIG_TRUE) {
		rc = pmc_err_set(err, EINVAL, "%s:%d: %s", ld.file, config_error_line(&cf),
				 config_error_text(&cf) ? config_error_text(&cf) : "syntax error");
		goto destroy;
	}
	rc = walk_group(&ld, config_root_setting(&cf), "");
	if (rc)
		goto destroy;
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];

		if (k->scope != PMC_CONFIG_SCOPE_TOP || !(k->flags & PMC_CONFIG_REQUIRED) ||
		    ld.ln.top[i])
			continue;
		where_fmt(where, sizeof(where), ld.file, 0, k->key);
		rc = pmc_err_set(err, EINVAL, "%s: missing (required%s)", where,
				 k->type == PMC_CONFIG_T_LIST ? "; name at least one volume" : "");
		goto destroy;
	}
	if (ld.nr_big) {
		/* a truncated integer the walk did not meet (not a scalar key) */
		rc = pmc_err_set(err, ERANGE, "%s:%u: %s does not fit in 32 bits: write %sL",
				 ld.file, ld.big[0].line, ld.big[0].text, ld.big[0].text);
		goto destroy;
	}
	rc = cross_check(out, &ld.ln, ld.file, err);
destroy:
	config_destroy(&cf);
fail:
	free(ld.ln.vol);
	if (rc)
		pmc_config_free(out);
	return rc;
}

int pmc_config_load(const char *path, struct pmc_config *out, struct pmc_err *err)
{
	struct stat st;
	char *text;
	size_t got = 0;
	ssize_t n;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pmc_err_set(err, errno, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		rc = pmc_err_set(err, errno, "%s: cannot stat: %s", path, strerror(errno));
		goto close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = pmc_err_set(err, EINVAL, "%s: not a regular file", path);
		goto close;
	}
	if (st.st_size > PMC_CONFIG_FILE_MAX) {
		rc = pmc_err_set(err, EFBIG, "%s: %lld bytes, the limit is %u", path,
				 (long long)st.st_size, PMC_CONFIG_FILE_MAX);
		goto close;
	}
	text = malloc(PMC_CONFIG_FILE_MAX + 1);
	if (!text) {
		rc = pmc_err_set(err, ENOMEM, "%s: out of memory", path);
		goto close;
	}
	while (got < PMC_CONFIG_FILE_MAX + 1) {
		n = read(fd, text + got, PMC_CONFIG_FILE_MAX + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = pmc_err_set(err, errno, "%s: cannot read: %s", path, strerror(errno));
			goto free;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > PMC_CONFIG_FILE_MAX) {
		rc = pmc_err_set(err, EFBIG, "%s: longer than the limit of %u bytes", path,
				 PMC_CONFIG_FILE_MAX);
		goto free;
	}
	if (memchr(text, '\0', got)) {
		rc = pmc_err_set(err, EINVAL, "%s: contains a NUL byte", path);
		goto free;
	}
	text[got] = '\0';
	rc = pmc_config_load_string(text, path, out, err);
free:
	free(text);
close:
	close(fd);
	return rc;
}

/* --- writing --- */

static int string_fmt(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	if (len < 3)
		return -1;
	buf[n++] = '"';
	for (; *s && n + 3 < len; s++) {
		if (*s == '"' || *s == '\\')
			buf[n++] = '\\';
		buf[n++] = *s;
	}
	buf[n++] = '"';
	buf[n] = '\0';
	return (int)n;
}

int pmc_config_key_format(const struct pmc_config_key *k, const void *base, char *buf, size_t len)
{
	char tmp[32];
	int64_t n;

	if (is_string_type(k->type))
		return string_fmt((const char *)base + k->off, buf, len);
	if (k->type == PMC_CONFIG_T_LIST)
		return snprintf(buf, len, "( ... )");
	n = pmc_config_key_load(k, base);
	if (k->type == PMC_CONFIG_T_WORD) {
		for (int64_t i = 0; k->words[i]; i++)
			if (i == n)
				return snprintf(buf, len, "\"%s\"", k->words[i]);
		return snprintf(buf, len, "%" PRId64, n);
	}
	if (k->type == PMC_CONFIG_T_SIZE && n > 0) {
		pmc_config_size_format((uint64_t)n, tmp, sizeof(tmp));
		if (tmp[strlen(tmp) - 1] > '9')
			return snprintf(buf, len, "\"%s\"", tmp);
	}
	if (n > INT32_MAX || n < INT32_MIN)
		return snprintf(buf, len, "%" PRId64 "L", n);
	return snprintf(buf, len, "%" PRId64, n);
}

int pmc_config_key_describe(const struct pmc_config_key *k, char *buf, size_t len)
{
	char a[32], b[32], al[32], all[160];
	const char *rt = k->flags & PMC_CONFIG_RUNTIME ? "; can change at run time" : "";
	const char *unit = k->unit ? k->unit : "";
	const char *sp = k->unit ? " " : "";
	int n;

	if (k->def && is_string_type(k->type))
		n = snprintf(buf, len, "default: \"%s\"; ", k->def);
	else if (k->def)
		n = snprintf(buf, len, "default: %s; ", k->def);
	else
		n = snprintf(buf, len, "required; ");
	if (n < 0 || (size_t)n >= len)
		return n;
	buf += n;
	len -= (size_t)n;
	switch (k->type) {
	case PMC_CONFIG_T_PATH:
		return n + snprintf(buf, len, "an absolute path of at most %" PRId64 " bytes%s",
				    k->max, rt);
	case PMC_CONFIG_T_NAME:
		return n +
		       snprintf(buf, len, "1 to %" PRId64 " of A-Z a-z 0-9 . _ -%s", k->max, rt);
	case PMC_CONFIG_T_GROUP:
		return n + snprintf(buf, len, "a group name, or \"\"%s", rt);
	case PMC_CONFIG_T_TEXT:
		return n + snprintf(buf, len,
				    "printable ASCII but space and \",\", at most %" PRId64 " bytes%s",
				    k->max, rt);
	case PMC_CONFIG_T_WORD:
		words_fmt(k->words, all, sizeof(all));
		return n + snprintf(buf, len, "one of %s%s", all, rt);
	case PMC_CONFIG_T_INT:
		return n + snprintf(buf, len, "%" PRId64 " to %" PRId64 "%s%s%s", k->min, k->max,
				    sp, unit, rt);
	case PMC_CONFIG_T_SIZE:
		num_fmt(k, k->min, a, sizeof(a));
		num_fmt(k, k->max, b, sizeof(b));
		if (k->min == k->max)
			return n + snprintf(buf, len, "only %s%s%s%s", a, sp, unit, rt);
		pmc_config_size_format((uint64_t)k->align, al, sizeof(al));
		return n + snprintf(buf, len, "%s to %s%s%s%s%s, K/M/G/T suffixes%s", a, b, sp,
				    unit, k->align > 1 ? ", a multiple of " : "",
				    k->align > 1 ? al : "", rt);
	case PMC_CONFIG_T_LIST:
		return n + snprintf(buf, len, "%" PRId64 " to %" PRId64 " %s%s", k->min, k->max,
				    unit, rt);
	}
	return n;
}

static void write_key(FILE *f, const struct pmc_config_key *k, const void *base, const char *indent,
		      unsigned flags)
{
	char val[PMC_CONFIG_PATH_MAX + 64], desc[256];
	const char *leaf = strrchr(k->key, '.');

	leaf = leaf ? leaf + 1 : k->key;
	if (flags & PMC_CONFIG_WRITE_DOCS) {
		pmc_config_key_describe(k, desc, sizeof(desc));
		fprintf(f, "%s# %s\n%s# %s\n", indent, k->doc, indent, desc);
	}
	pmc_config_key_format(k, base, val, sizeof(val));
	fprintf(f, "%s%s = %s;\n", indent, leaf, val);
	if (flags & PMC_CONFIG_WRITE_DOCS)
		fputc('\n', f);
}

int pmc_config_write(FILE *f, const struct pmc_config *c, unsigned flags)
{
	char group[64] = "";

	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		const char *dot = strchr(k->key, '.');
		size_t glen = dot ? (size_t)(dot - k->key) : 0;

		if (k->scope != PMC_CONFIG_SCOPE_TOP)
			continue;
		if (group[0] && (glen != strlen(group) || strncmp(group, k->key, glen))) {
			fprintf(f, "};\n\n");
			group[0] = '\0';
		}
		if (dot && !group[0]) {
			snprintf(group, sizeof(group), "%.*s", (int)glen, k->key);
			fprintf(f, "%s = {\n", group);
		}
		if (k->type != PMC_CONFIG_T_LIST) {
			write_key(f, k, c, group[0] ? "\t" : "", flags);
			continue;
		}
		if (flags & PMC_CONFIG_WRITE_DOCS) {
			char desc[256];

			pmc_config_key_describe(k, desc, sizeof(desc));
			fprintf(f, "# %s\n# %s\n", k->doc, desc);
		}
		fprintf(f, "volumes = (\n");
		for (uint32_t j = 0; j < c->nr_volumes; j++) {
			const struct pmc_config_volume *v = &c->volumes[j];

			fprintf(f, "\t{\n");
			for (size_t m = 0; m < pmc_config_table_len; m++) {
				const struct pmc_config_key *vk = &pmc_config_table[m];

				if (vk->scope != PMC_CONFIG_SCOPE_VOLUME || is_disk_sub(vk))
					continue;
				if (strcmp(vk->key, "disk") || !pmc_config_volume_is_nvmf(v)) {
					write_key(f, vk, v, "\t\t", flags);
					continue;
				}
				/* an NVMe-oF disk: its group */
				if (flags & PMC_CONFIG_WRITE_DOCS) {
					char desc[256];

					pmc_config_key_describe(vk, desc, sizeof(desc));
					fprintf(f, "\t\t# %s\n\t\t# %s\n", vk->doc, desc);
				}
				fprintf(f, "\t\tdisk = {\n");
				for (size_t d = 0; d < pmc_config_table_len; d++)
					if (is_disk_sub(&pmc_config_table[d]))
						write_key(f, &pmc_config_table[d], v, "\t\t\t",
							  flags);
				fprintf(f, "\t\t};\n%s", flags & PMC_CONFIG_WRITE_DOCS ? "\n" : "");
			}
			fprintf(f, "\t}%s\n", j + 1 < c->nr_volumes ? "," : "");
		}
		fprintf(f, ");\n");
	}
	if (group[0])
		fprintf(f, "};\n");
	return ferror(f) ? -EIO : 0;
}
