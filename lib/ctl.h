/* ctl.h - the control protocol between pmcached and pmcachectl: decoding
 * and encoding of its lines (json-c). No I/O here; the daemon and the CLI
 * own the socket.
 *
 * TRANSPORT
 *   A Unix stream socket (control.socket in the config). The client writes
 *   requests, one JSON object per line ending in "\n". For each request, in
 *   order, the daemon writes zero or more progress lines and then exactly
 *   one final line. Requests on one connection are served one after the
 *   other: the next is read once the previous one's final line is queued.
 *
 * WHO
 *   Root and members of control.admin_group may send every request;
 *   members of control.group only status, stats, get and volume-list (the
 *   others get EPERM). Any other peer gets one EACCES line and is closed.
 *   Every mutating request is logged with the caller's uid and pid.
 *
 * LIMITS
 *   A request line is at most PMC_CTL_MAX_LINE (64 KiB) bytes with its
 *   newline; the daemon answers a longer one with an EMSGSIZE error and
 *   closes the connection. A reply line is at most PMC_CTL_MAX_REPLY
 *   (4 MiB). Lines are UTF-8 without NUL bytes (not even as \u0000 in a
 *   string). Requests nest no deeper than PMC_CTL_MAX_DEPTH.
 *   The daemon serves 64 connections at most, the last 8 kept for
 *   control.admin_group and root, the last one of them for root, and 16
 *   of one user that is only in control.group; a connection over a limit gets one EBUSY line ("daemon busy") and is
 *   closed. It stops reading a client that leaves 256 KiB of replies
 *   unread, drops one that leaves 4.25 MiB, and closes a connection idle
 *   for control.idle_timeout seconds (unless its request is running).
 *
 * REQUESTS
 *   Every request is an object with "cmd" (string) and optionally "id"
 *   (an integer, or a string of at most PMC_CTL_ID_MAX bytes), which every
 *   reply line to it echoes. Fields not listed for a command are refused.
 *   A volume name is 1 to 63 of A-Z a-z 0-9 . _ - (not "." or "..", not
 *   starting with '-'), as in the config. The success reply of each is
 *   the shape of its name under REPLY SHAPES.
 *
 *   {"cmd":"status"}
 *       The daemon, the cache (absent members: running without the pmem,
 *       every volume pass-through; then "pmem_unavailable" is true) and the
 *       volumes.
 *   {"cmd":"stats","volume":S?}
 *       Counters of the whole cache ("total") and of each volume, or of the
 *       one named; objects as pmc_stats_render_json() writes them.
 *   {"cmd":"volume-add","name":S,"disk":S,"mode":S?,"admit_after_misses":N?,
 *    "seq_cutoff":N|S?,"nospace":S?,"ublk_id":N?,"replace_disk":B?,
 *    "discard_dirty":B?}
 *       Attach a block device as a new volume; the options are the volume
 *       keys of the config, with the same types, ranges and defaults. The
 *       disk must be a block device whose name under /dev matches
 *       control.allowed_disks (the volume records that name); it is opened
 *       O_EXCL. An NVMe-oF namespace comes as "disk.transport" and the
 *       other disk.* keys instead of "disk" (the config's disk group): the
 *       daemon connects its controller (control.allowed_disks does not
 *       apply) and opens the namespace's block device. Callers other than
 *       root are told only that a disk is not one they may add, never why. A volume the cache knows attaches only
 *       to the disk whose identity it recorded; replace_disk records the
 *       new disk's identity instead and drops the volume's cached blocks
 *       (refused while it has dirty ones, unless discard_dirty, which needs
 *       replace_disk; over an unreadable identity record the dirty ones are
 *       kept). The reply lists every volume.
 *   {"cmd":"volume-remove","name":S,"force":B?}
 *       Write back the volume's dirty data (progress lines), stop its device
 *       and detach it. Refused with EBUSY while the device is open (force
 *       or not). With force, a volume whose disk fails write-back is
 *       detached anyway; its dirty data stays in the pmem until the volume
 *       is added again.
 *   {"cmd":"volume-reconnect","name":S}
 *       An NVMe-oF volume: connect its controller again now if it is lost
 *       (the daemon otherwise retries with a back-off up to 60 s); the
 *       reply comes at once, status shows the path. EINVAL for a volume
 *       whose disk is a path.
 *   {"cmd":"volume-clear-error","name":S}
 *       The volume's disk works again: clear its error (status) and its
 *       write-back back-off, so write-back tries at once. I/O started
 *       before fails as before without setting the error again. While the
 *       volume has LOST blocks (dirty data lost to pmem media errors) its
 *       error stays EIO: the reply's "error" says what stands after the
 *       clear, "was" what stood before (0: none).
 *   {"cmd":"volume-list"}
 *       The volumes, as in status.
 *   {"cmd":"set","volume":S?,"key":S,"value":N|S}
 *       Change a key marked PMC_CONFIG_RUNTIME in the config table: a volume
 *       key (mode, admit_after_misses, seq_cutoff, nospace) needs "volume",
 *       a global one (writeback.*, log.level) refuses it. Words are strings,
 *       sizes an integer or a string ("1M"), other numbers integers. The
 *       rules between keys (low_pct <= high_pct ...) are the daemon's to
 *       check (pmc_config_check on the changed copy).
 *   {"cmd":"get","volume":S?,"key":S}
 *       Any key of the table but "volumes"; "volume" as for set. Words and
 *       strings come as strings, numbers and sizes as integers.
 *   {"cmd":"flush","volume":S?}
 *       Write back every dirty block (of one volume, or of all) and wait;
 *       progress lines meanwhile.
 *   {"cmd":"shutdown","remove_devices":B?}
 *       The daemon replies, then finishes the requests in flight, writes
 *       its state and exits. A device in use (mounted, held by another
 *       device, open) is left quiesced: the next daemon takes it over and
 *       the file system on it sees no error. The others are removed. With
 *       remove_devices, refused with EBUSY naming the holder of a device in
 *       use ("volume V: /dev/ublkbN is in use: mounted on /mnt"); else
 *       every device is removed.
 *
 *   volume-add, volume-remove and flush run one at a time, off the
 *   daemon's event loop: the others get EBUSY ("another operation is
 *   running") meanwhile, and so do set and flush on the volume being added
 *   or removed. While write-back runs for one, its client gets a progress
 *   line at least every second.
 *
 * REPLIES
 *   Every line begins with "v", the protocol version (PMC_CTL_VERSION),
 *   then "id" if the request had one (a request too malformed to read its
 *   id gets a reply without one). Clients refuse another version and
 *   ignore members they do not know; everything else below is exact.
 *     final, failure: errno is a positive Linux errno: EINVAL (malformed or
 *       invalid request), EMSGSIZE (line too long), EPERM (not allowed for
 *       the caller), ENOENT (no such volume), EEXIST, EBUSY (daemon busy,
 *       an operation running, device open), EIO, ENOSPC...; the error names
 *       the object and the problem in one line.
 *
 * REPLY SHAPES (tests/ctlsrv/ctlsrv_stress.c checks every reply of the
 * daemon against these lines)
 *   S a string, N an integer >= 0, I any integer, B a boolean, O any
 *   object, [X] an array of X, X|Y either; a member whose value ends in ?
 *   may be absent; a NAME in capitals stands for its shape. "v":N and
 *   "id":I|S? come first in every one.
 *
 *   @error {"ok":false,"errno":N,"error":S}
 *   @progress {"progress":{"dirty_blocks":N}}
 *   @status {"ok":true,"version":S,"pid":N,"uptime_s":N,"pmem":S,"uuid":S?,
 *       "block_size":N?,"nr_blocks":N?,"dirty_blocks":N?,"clean_blocks":N?,
 *       "counts_valid":B?,"last_restart":S?,"boot_epoch":N?,
 *       "store_granularity":S?,"pmem_unavailable":B?,"volumes":[VOLUME]}
 *   @VOLUME {"name":S,"disk":S,"path":PATH?,"disk_id":S,"device":S,"mode":S,
 *       "draining":B,"size_bytes":N,"dirty_blocks":N,"clean_blocks":N,
 *       "lost_blocks":N,"counts_valid":B,
 *       "oldest_dirty_age_ms":N,"error":N,"error_text":S,"recovered":B}
 *   @PATH {"transport":S,"address":S,"controller":S,"device":S,"state":S,
 *       "reconnects":N}
 *       (an NVMe-oF disk: "disk" is its label, nvmf:<transport>:<traddr>:
 *       <trsvcid>:<subsysnqn>:ns<nsid>; state is the controller's - live,
 *       connecting, resetting... - or "lost" (no controller: the daemon
 *       reconnects it) or "wrong-disk" (the namespace now there has another
 *       identity than the one recorded: not used))
 *   @stats {"ok":true,"total":O,"volumes":[O]}
 *   @volume-add {"ok":true,"volumes":[VOLUME]}
 *   @volume-remove {"ok":true}
 *   @volume-reconnect {"ok":true}
 *   @volume-clear-error {"ok":true,"was":N,"error":N,"error_text":S}
 *   @volume-list {"ok":true,"volumes":[VOLUME]}
 *   @set {"ok":true}
 *   @get {"ok":true,"key":S,"volume":S?,"value":I|S}
 *   @flush {"ok":true}
 *   @shutdown {"ok":true}
 */
#ifndef PMC_CTL_H
#define PMC_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

struct json_object;

#define PMC_CTL_VERSION 1	      /* "v" of every reply */
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
	PMC_CTL_VOLUME_RECONNECT,
	PMC_CTL_VOLUME_CLEAR_ERROR,
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
	/* stats, set, get, flush: "volume"; volume-remove, volume-reconnect,
	 * volume-clear-error: "name"; "" if absent */
	char volume[PMC_VOLUME_NAME_MAX + 1];
	/* volume-add: name, disk and options, the absent ones at their defaults */
	struct pmc_config_volume add;
	int force;			  /* volume-remove */
	int remove_devices;		  /* shutdown */
	int replace_disk, discard_dirty;  /* volume-add */
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
	int version;		       /* "v"; 0: a reply without one (a daemon before protocol 1) */
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
