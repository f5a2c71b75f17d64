/* ctl.h - the control protocol between pmcached and pmcachectl: decoding
 * and encoding of its lines (json-c). No I/O here; the daemon and the CLI
 * own the socket.
 *
 * TRANSPORT
 *   A Unix stream socket (control.socket in the config; root and
 *   control.group may connect). The client writes requests, one JSON object
 *   per line ending in "\n". For each request, in order, the daemon writes
 *   zero or more progress lines and then exactly one final line. Requests
 *   on one connection are served one after the other.
 *
 * LIMITS
 *   A request line is at most PMC_CTL_MAX_LINE (64 KiB) bytes with its
 *   newline; the daemon answers a longer one with an EMSGSIZE error and
 *   closes the connection. A reply line is at most PMC_CTL_MAX_REPLY
 *   (4 MiB). Lines are UTF-8 without NUL bytes (not even as \u0000 in a
 *   string). Requests nest no deeper than PMC_CTL_MAX_DEPTH.
 *
 * REQUESTS
 *   Every request is an object with "cmd" (string) and optionally "id"
 *   (an integer, or a string of at most PMC_CTL_ID_MAX bytes), which every
 *   reply line to it echoes. Fields not listed for a command are refused.
 *   A volume name is 1 to 63 of A-Z a-z 0-9 . _ - (not "." or "..", not
 *   starting with '-'), as in the config.
 *
 *   {"cmd":"status"}
 *       -> {"ok":true,"version":"0.1.0","pid":N,"uptime_s":N,
 *           "pmem":{"path":S,"size_bytes":N,"block_size":N,"blocks":N,
 *                   "dirty_blocks":N,"clean_blocks":N,"clean_start":B} or null
 *                   (running without pmem: every volume pass-through),
 *           "volumes":N}
 *   {"cmd":"stats","volume":S?}
 *       -> with volume: {"ok":true,"stats":O}, O as pmc_stats_render_json()
 *          without: {"ok":true,"stats":O (whole cache, "name":""),
 *                    "volumes":[O, ...]}
 *   {"cmd":"volume-add","name":S,"disk":S,"mode":S?,"admit_after_misses":N?,
 *    "seq_cutoff":N|S?,"nospace":S?,"ublk_id":N?}
 *       Attach a disk as a new volume; the options are the volume keys of
 *       the config, with the same types, ranges and defaults.
 *       -> {"ok":true,"volume":S,"device":"/dev/ublkbN","ublk_id":N}
 *   {"cmd":"volume-remove","name":S,"force":B?}
 *       Write back the volume's dirty data (progress lines), stop its device
 *       and detach it. Refused with EBUSY while the device is open. With
 *       force, a volume whose disk fails write-back is detached anyway; its
 *       dirty data stays in the pmem until the volume is added again.
 *       -> {"ok":true}
 *   {"cmd":"volume-list"}
 *       -> {"ok":true,"volumes":[{"name":S,"disk":S,"device":S,"ublk_id":N,
 *           "mode":S,"draining":B,"size_bytes":N,"dirty_blocks":N,
 *           "error":N (sticky disk errno, 0 if none)}, ...]}
 *   {"cmd":"set","volume":S?,"key":S,"value":N|S}
 *       Change a key marked PMC_CONFIG_RUNTIME in the config table: a volume
 *       key (mode, admit_after_misses, seq_cutoff, nospace) needs "volume",
 *       a global one (writeback.*, log.level) refuses it. Words are strings,
 *       sizes an integer or a string ("1M"), other numbers integers. The
 *       rules between keys (low_pct <= high_pct ...) are the daemon's to
 *       check (pmc_config_check on the changed copy).
 *       -> {"ok":true}
 *   {"cmd":"get","volume":S?,"key":S}
 *       Any key of the table but "volumes"; "volume" as for set.
 *       -> {"ok":true,"key":S,"volume":S (volume keys),"value":N|S}
 *          (words and strings as strings, numbers and sizes as integers)
 *   {"cmd":"flush","volume":S?}
 *       Write back every dirty block (of one volume, or of all) and wait.
 *       -> progress lines, then {"ok":true}
 *   {"cmd":"shutdown","remove_devices":B?}
 *       -> {"ok":true}; the daemon then finishes the requests in flight,
 *       writes its state and exits. A device in use (mounted, held by
 *       another device, open) is left quiesced: the next daemon takes it
 *       over and the file system on it sees no error. The others are
 *       removed. With remove_devices, refused with EBUSY naming the holder
 *       of a device in use ("volume V: /dev/ublkbN is in use: mounted on
 *       /mnt"); else every device is removed.
 *
 * REPLIES
 *   final, success:  {"id":..,"ok":true, payload members...}
 *   final, failure:  {"id":..,"ok":false,"errno":N,"error":"one line"}
 *                    errno is a positive Linux errno: EINVAL (malformed or
 *                    invalid request), EMSGSIZE (line too long), ENOENT (no
 *                    such volume), EEXIST, EBUSY, EIO, ENOSPC...; the error
 *                    names the object and the problem.
 *   progress:        {"id":..,"progress":{"dirty_blocks":N}}
 *   "id" is present iff the request had one (a request too malformed to
 *   read its id gets a reply without one). Clients ignore reply members
 *   they do not know.
 */
#ifndef PMC_CTL_H
#define PMC_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

struct json_object;

#define PMC_CTL_MAX_LINE (64u * 1024) /* bytes of a request line, with its newline */
#define PMC_CTL_MAX_REPLY (4u << 20)  /* bytes of a reply line, with its newline */
#define PMC_CTL_MAX_DEPTH 8	      /* of a request's JSON nesting */
#define PMC_CTL_ID_MAX 64u	      /* bytes of a string id */
#define PMC_CTL_ERROR_MAX 1024u	      /* bytes of a decoded error message, with the NUL */

enum pmc_ctl_cmd {
	PMC_CTL_STATUS,
	PMC_CTL_STATS,
	PMC_CTL_VOLUME_ADD,
	PMC_CTL_VOLUME_REMOVE,
	PMC_CTL_VOLUME_LIST,
	PMC_CTL_SET,
	PMC_CTL_GET,
	PMC_CTL_FLUSH,
	PMC_CTL_SHUTDOWN,
	PMC_CTL_CMD_NR,
};

/* "status", "volume-add"...; NULL out of range */
const char *pmc_ctl_cmd_name(enum pmc_ctl_cmd cmd);

enum pmc_ctl_id_kind {
	PMC_CTL_ID_NONE,
	PMC_CTL_ID_INT,
	PMC_CTL_ID_STR,
};

struct pmc_ctl_id {
	enum pmc_ctl_id_kind kind;
	int64_t num;		      /* ID_INT */
	char str[PMC_CTL_ID_MAX + 1]; /* ID_STR */
};

/* A decoded request. Owns no memory; strings are copies. */
struct pmc_ctl_req {
	enum pmc_ctl_cmd cmd;
	struct pmc_ctl_id id;
	/* stats, set, get, flush: "volume"; volume-remove: "name"; "" if absent */
	char volume[PMC_VOLUME_NAME_MAX + 1];
	/* volume-add: name, disk and options, the absent ones at their defaults */
	struct pmc_config_volume add;
	int force;			  /* volume-remove */
	int remove_devices;		  /* shutdown */
	const struct pmc_config_key *key; /* set, get: an entry of pmc_config_table */
	int64_t value;			  /* set: the number, or a word's index */
};

/*
 * Decode one request line (the trailing "\n" may be included or not).
 * Strict: see the header comment. On failure err names the field and the
 * problem, returns -EINVAL (or -EMSGSIZE for a line too long), and out->id
 * holds the request's id if it could be read, for the error reply.
 */
int pmc_ctl_decode(const char *buf, size_t len, struct pmc_ctl_req *out, struct pmc_err *err);

/* The request as a line ending in "\n" (malloc'ed; NULL: out of memory or
 * a request pmc_ctl_decode would refuse). Options of volume-add that equal
 * their defaults are left out. */
char *pmc_ctl_encode_req(const struct pmc_ctl_req *req);

/* --- replies (the daemon); each a malloc'ed line ending in "\n", NULL on
 * out of memory. id may be NULL (no id). --- */

/* payload: an object whose members are added to the reply, or NULL; the
 * reference is consumed either way */
char *pmc_ctl_reply_ok(const struct pmc_ctl_id *id, struct json_object *payload);
/* errnum positive or negative; msg is made one line of valid UTF-8 */
char *pmc_ctl_reply_error(const struct pmc_ctl_id *id, int errnum, const char *msg);
char *pmc_ctl_reply_progress(const struct pmc_ctl_id *id, uint64_t dirty_blocks);
/* the reply to get: key k read from base (its scope's struct); volume may be NULL */
char *pmc_ctl_reply_value(const struct pmc_ctl_id *id, const char *volume,
			  const struct pmc_config_key *k, const void *base);

/* --- replies (the client) --- */

enum pmc_ctl_reply_kind {
	PMC_CTL_REPLY_OK,
	PMC_CTL_REPLY_ERROR,
	PMC_CTL_REPLY_PROGRESS,
};

struct pmc_ctl_reply {
	enum pmc_ctl_reply_kind kind;
	struct pmc_ctl_id id;
	int errnum;		       /* ERROR: positive errno */
	char error[PMC_CTL_ERROR_MAX]; /* ERROR: the message, maybe truncated */
	uint64_t dirty_blocks;	       /* PROGRESS */
	struct json_object *payload;   /* OK: the reply without "id" and "ok" */
};

/* Decode one reply line. On success an OK reply's payload is the caller's
 * (pmc_ctl_reply_free). On failure nothing is held. */
int pmc_ctl_decode_reply(const char *buf, size_t len, struct pmc_ctl_reply *out,
			 struct pmc_err *err);
void pmc_ctl_reply_free(struct pmc_ctl_reply *r);

#endif
