/* config.h - pmcached's configuration file (libconfig syntax).
 *
 * One table, pmc_config_table[], describes every key: its dotted path,
 * type, default, range or allowed words, unit, a one-line doc and where
 * its value lives in struct pmc_config. Loading, validation, the defaults,
 * the documented example (etc/pmcached.conf, checked against the table by
 * tests/config/test_config_file.c) and the control protocol's get/set
 * (ctl.h) are all driven by it.
 *
 * The file:
 *
 *   pmem = { path = "/dev/dax0.0"; size = 0; format = "if-blank"; block_size = 4096; };
 *   state_dir = "/var/lib/pmcache";
 *   control = { socket = "/run/pmcache/pmcached.sock"; group = ""; admin_group = "";
 *               allowed_disks = "/dev/nvme*"; idle_timeout = 60; };
 *   log = { level = "info"; };
 *   queues = { count = 2; depth = 128; max_io = "512K"; };
 *   writeback = { high_pct = 50; low_pct = 30; max_age_ms = 30000; max_io = "1M";
 *                 max_inflight = 32; busy_inflight = 4; idle_ms = 100; retry_ms = 1000;
 *                 stall_ms = 10000; };
 *   volumes = ( { name = "db"; disk = "/dev/nvme1n1"; mode = "write-back";
 *                 admit_after_misses = 1; seq_cutoff = 0; nospace = "wait"; ublk_id = -1; } );
 *
 * Rules: unknown keys, missing required keys, values of the wrong type or
 * out of range are errors, reported as one line naming the file, the line
 * and the key: "pmcached.conf:12: writeback.high_pct: 120 is above the
 * maximum 100". Sizes are integers (bytes) or strings with a binary suffix
 * K, M, G or T ("512K" = 524288). Plain integers must fit in 32 bits
 * (libconfig would silently truncate them otherwise): larger ones need an
 * L suffix or a size string. Strings are valid UTF-8 without control
 * characters. @include is refused.
 *
 * Nothing here is thread-safe or needs to be: a struct pmc_config is a
 * plain value, loaded once and copied by whoever changes it.
 */
#ifndef PMC_CONFIG_H
#define PMC_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cache.h"
#include "engine.h"
#include "err.h"

#define PMC_CONFIG_PATH_MAX 4096u      /* bytes of a path, with the NUL (PATH_MAX) */
#define PMC_CONFIG_SOCKET_MAX 108u     /* bytes of the socket path, with the NUL (sun_path) */
#define PMC_CONFIG_GROUP_MAX 32u       /* bytes of a group name, without the NUL */
#define PMC_CONFIG_VOLUMES_MAX 64u     /* as many as pmcached serves (PMCD_MAX_VOLUMES) */
#define PMC_CONFIG_FILE_MAX (1u << 20) /* bytes of a configuration file */
/* SYSCONFDIR/pmcache/pmcached.conf: /etc with the default prefix /usr
 * (CMakeLists.txt passes PMC_SYSCONFDIR) */
#ifndef PMC_SYSCONFDIR
#define PMC_SYSCONFDIR "/etc"
#endif
#define PMC_CONFIG_DEFAULT_PATH PMC_SYSCONFDIR "/pmcache/pmcached.conf"

/* pmem.format */
enum pmc_config_format {
	PMC_CONFIG_FORMAT_IF_BLANK = 0, /* format the pmem only if it is blank (all zero header) */
	PMC_CONFIG_FORMAT_NEVER = 1,	/* refuse to start on a blank pmem */
};

/* disk.transport: an NVMe-oF disk's transport; NONE: the disk is a path */
enum pmc_config_transport {
	PMC_CONFIG_TR_NONE = 0,
	PMC_CONFIG_TR_TCP = 1,
	PMC_CONFIG_TR_RDMA = 2,
	PMC_CONFIG_TR_FC = 3,
	PMC_CONFIG_TR_LOOP = 4,
};

#define PMC_CONFIG_NQN_MAX 223u	 /* bytes of an NQN, without the NUL (NVMe base spec) */
#define PMC_CONFIG_TRADDR_MAX 255u /* bytes of a transport address, without the NUL */
#define PMC_CONFIG_KEY_MAX 255u	 /* bytes of a DH-HMAC-CHAP secret, without the NUL */

/*
 * A volume's disk given as an NVMe-oF namespace (the file's
 * `disk = { transport = "tcp"; traddr = ...; subsysnqn = ...; nsid = 1; }`,
 * the table's keys disk.*): the daemon connects the controller with
 * libnvme and serves the namespace's block device. Strings are "" when
 * unset.
 */
struct pmc_config_nvmf {
	int transport;				 /* enum pmc_config_transport */
	char traddr[PMC_CONFIG_TRADDR_MAX + 1];	 /* target address; "" only for loop */
	char trsvcid[32];			 /* port; "": 4420 (8009 with discovery) */
	char host_traddr[PMC_CONFIG_TRADDR_MAX + 1]; /* source address; "" any */
	char host_iface[64];			 /* source interface (tcp); "" any */
	char subsysnqn[PMC_CONFIG_NQN_MAX + 1];	 /* the subsystem; required */
	uint32_t nsid;				 /* the namespace; 0: by nguid or uuid */
	char nguid[33];				 /* 32 hex digits, or "" */
	char uuid[37];				 /* 8-4-4-4-12 hex digits, or "" */
	char hostnqn[PMC_CONFIG_NQN_MAX + 1];	 /* "": the host's (/etc/nvme/hostnqn) */
	char hostid[37];			 /* "": the host's (/etc/nvme/hostid) */
	char dhchap_key[PMC_CONFIG_KEY_MAX + 1];	 /* host secret (DHHC-1:...), "" none */
	char dhchap_ctrl_key[PMC_CONFIG_KEY_MAX + 1]; /* controller secret, "" none */
	int discovery;				 /* 1: traddr is a discovery controller */
	int32_t ctrl_loss_tmo;			 /* s the kernel reconnects; -1 forever */
	int32_t fast_io_fail_tmo;		 /* s until I/O fails while reconnecting */
	int32_t reconnect_delay;		 /* s between the kernel's reconnects */
};

struct pmc_config_volume {
	char name[PMC_VOLUME_NAME_MAX + 1]; /* [A-Za-z0-9._-], unique */
	char disk[PMC_VOLUME_DISK_MAX + 1]; /* absolute path of the backing disk, unique;
					       "" for an NVMe-oF disk (nvmf) */
	struct pmc_config_nvmf nvmf;	    /* disk.*: transport NONE unless NVMe-oF */
	struct pmc_volume_conf vc;	    /* mode, admit_after_misses, seq_cutoff, nospace */
	int32_t ublk_id;		    /* -1: any free id; else 0..1023, unique */
};

struct pmc_config {
	char pmem_path[PMC_CONFIG_PATH_MAX]; /* devdax device or file */
	uint64_t pmem_size;		     /* bytes; 0: the existing size */
	enum pmc_config_format pmem_format;
	uint32_t pmem_block_size;	     /* bytes; 4096 */
	char state_dir[PMC_CONFIG_PATH_MAX]; /* the volume state file lives here */
	char control_socket[PMC_CONFIG_SOCKET_MAX];
	char control_group[PMC_CONFIG_GROUP_MAX + 1]; /* "": root only */
	char control_admin_group[PMC_CONFIG_GROUP_MAX + 1]; /* "": root only */
	char control_allowed_disks[PMC_CONFIG_PATH_MAX];    /* fnmatch patterns */
	uint32_t control_idle_s;			    /* seconds */
	int log_level;				      /* syslog priority, LOG_EMERG..LOG_DEBUG */
	uint32_t queues_count;			      /* ublk queues (threads) per device */
	uint32_t queues_depth;			      /* requests in flight per queue */
	struct pmc_wb_conf wb;		   /* writeback.*, and queues.max_io as max_req_bytes */
	struct pmc_config_volume *volumes; /* malloc'ed, nr_volumes of them */
	uint32_t nr_volumes;
};

enum pmc_config_type {
	PMC_CONFIG_T_PATH,  /* absolute path; char[size] */
	PMC_CONFIG_T_NAME,  /* volume name; char[size] */
	PMC_CONFIG_T_GROUP, /* group name or ""; char[size] */
	PMC_CONFIG_T_WORD,  /* one of words[], stored as its index (an int-sized enum) */
	PMC_CONFIG_T_INT,   /* integer in min..max; stored in size bytes (signed if min < 0) */
	PMC_CONFIG_T_SIZE,  /* bytes, integer or "512K"; min..max, multiple of align */
	PMC_CONFIG_T_LIST,  /* the list of volume groups, min..max of them */
	PMC_CONFIG_T_TEXT,  /* printable ASCII without blanks or commas, at most max bytes; char[size] */
};

enum pmc_config_scope {
	PMC_CONFIG_SCOPE_TOP,	 /* off is into struct pmc_config */
	PMC_CONFIG_SCOPE_VOLUME, /* off is into struct pmc_config_volume */
};

#define PMC_CONFIG_REQUIRED (1u << 0) /* no default: the file must set it */
#define PMC_CONFIG_RUNTIME (1u << 1)  /* may be changed at run time (ctl "set") */
#define PMC_CONFIG_SECRET (1u << 2)   /* never shown by get, status or logs (a written
					 config keeps it: the file is root's) */

struct pmc_config_key {
	const char *key; /* dotted path; a volume's keys are relative ("mode") */
	enum pmc_config_scope scope;
	enum pmc_config_type type;
	unsigned flags;		  /* PMC_CONFIG_* */
	const char *def;	  /* default as written in the file; NULL if required */
	int64_t min, max;	  /* INT, SIZE: range; LIST: count; strings: max bytes in max */
	int64_t align;		  /* SIZE: a multiple of this; 0: any */
	const char *const *words; /* WORD: the allowed words, NULL-terminated */
	const char *unit;	  /* for docs: "bytes", "ms", "%" or NULL */
	const char *doc;	  /* one line */
	size_t off;		  /* of the field in its scope's struct */
	size_t size;		  /* bytes of the field */
};

extern const struct pmc_config_key pmc_config_table[];
extern const size_t pmc_config_table_len;

/* the key named `key` in scope, or NULL */
const struct pmc_config_key *pmc_config_key_find(enum pmc_config_scope scope, const char *key);

/* Every default; pmem_path is "" and there is no volume. */
void pmc_config_default(struct pmc_config *c);
/* A volume's defaults; name and disk are "". */
void pmc_config_volume_default(struct pmc_config_volume *v);

/*
 * Load and validate a file. out is overwritten (not freed first); on error
 * it is left zeroed with nothing allocated, and err names file, line and key.
 * The file is read whole (at most PMC_CONFIG_FILE_MAX bytes).
 */
int pmc_config_load(const char *path, struct pmc_config *out, struct pmc_err *err);
/* The same from a string; name is used in messages in place of a path. */
int pmc_config_load_string(const char *text, const char *name, struct pmc_config *out,
			   struct pmc_err *err);
/* Free what a load allocated and zero *c; NULL is fine. */
void pmc_config_free(struct pmc_config *c);
/* Deep copy (the daemon changes a copy, checks it, then swaps). */
int pmc_config_copy(struct pmc_config *dst, const struct pmc_config *src, struct pmc_err *err);

/* Validate a whole config in memory: every key against the table, and the
 * rules between keys (low_pct <= high_pct, busy_inflight <= max_inflight,
 * unique volume names, disks and ublk ids). Messages name the key. */
int pmc_config_check(const struct pmc_config *c, struct pmc_err *err);

/* --- one value, as it comes from the file or from a control request --- */

enum pmc_config_vkind {
	PMC_CONFIG_V_INT,
	PMC_CONFIG_V_STRING,
	PMC_CONFIG_V_OTHER, /* of a type no key takes; `what` names it */
};

struct pmc_config_value {
	enum pmc_config_vkind kind;
	int64_t i;	  /* V_INT */
	const char *s;	  /* V_STRING, NUL-terminated */
	const char *what; /* V_OTHER: "a float", "a boolean", "a group"... */
};

/*
 * Parse and check v for key k (not LIST) and store it into base, which is a
 * struct pmc_config or a struct pmc_config_volume according to k->scope.
 * A failure sets err to "<where>: <problem>" and leaves base unchanged.
 */
int pmc_config_key_assign(const struct pmc_config_key *k, void *base,
			  const struct pmc_config_value *v, const char *where, struct pmc_err *err);
/* The same for a numeric key (INT, SIZE, WORD: the word's index), without
 * storing: the value goes to *num. Cross-key rules are not checked. */
int pmc_config_key_parse(const struct pmc_config_key *k, const struct pmc_config_value *v,
			 const char *where, int64_t *num, struct pmc_err *err);
/* store/load a numeric key's value in base (no checks) */
void pmc_config_key_store(const struct pmc_config_key *k, void *base, int64_t num);
int64_t pmc_config_key_load(const struct pmc_config_key *k, const void *base);
/* k's value as written in a file: 50, "512K", "write-back", "/dev/dax0.0" (quoted
 * strings); returns as snprintf */
int pmc_config_key_format(const struct pmc_config_key *k, const void *base, char *buf, size_t len);
/* one line for docs: "default: 50; 0 to 100 %; can change at run time" */
int pmc_config_key_describe(const struct pmc_config_key *k, char *buf, size_t len);
/* the base of k's scope: c itself, or volume vol of c (vol < nr_volumes) */
void *pmc_config_key_base(const struct pmc_config_key *k, struct pmc_config *c, uint32_t vol);

/* Is the volume's disk an NVMe-oF namespace (disk.transport set)? */
static inline int pmc_config_volume_is_nvmf(const struct pmc_config_volume *v)
{
	return v->nvmf.transport != PMC_CONFIG_TR_NONE;
}

/*
 * The rules of a volume's disk: a path, or an NVMe-oF namespace with its
 * transport, its address (but for loop), its subsystem NQN and an nsid,
 * NGUID or UUID; the disk.* keys only with a transport. where prefixes the
 * message, which names the volume and the field: "<where>: volume "net"
 * disk.traddr: missing (required for transport tcp)".
 */
int pmc_config_volume_check(const struct pmc_config_volume *v, const char *where,
			    struct pmc_err *err);

/* "nvmf:tcp:10.0.0.2:4420:nqn.2014-08.org.example:disk1:ns1" (nsid, else
 * nguid-..., uuid-...), bounded by len: for messages and status */
void pmc_config_nvmf_label(const struct pmc_config_nvmf *n, char *buf, size_t len);

/* "tcp", "rdma", "fc", "loop"; "none" */
const char *pmc_config_transport_name(int transport);

/* A volume name: 1 to 63 of A-Z a-z 0-9 . _ -, not starting with '-',
 * not "." or "..". what names it in the message. */
int pmc_config_name_check(const char *name, const char *what, struct pmc_err *err);

/* A user's string for a message: in double quotes, at most 64 bytes of it
 * (then "..."), bytes outside printable ASCII as \xNN, so that a message
 * stays one line of ASCII whatever it quotes. */
void pmc_config_quote(const char *s, char *buf, size_t len);

/* Parse a size: decimal digits with an optional K, M, G or T (binary). */
int pmc_config_size_parse(const char *s, uint64_t *bytes);
/* "512K" when exact in a binary unit, else the decimal number */
void pmc_config_size_format(uint64_t bytes, char *buf, size_t len);

/* Write c as a configuration file that loads back to c; with docs, each
 * key is preceded by its doc and description as comments. */
#define PMC_CONFIG_WRITE_DOCS 1u
int pmc_config_write(FILE *f, const struct pmc_config *c, unsigned flags);

/* do paths a and b name one device (block or character: its number) or
 * one file (device and inode)? 0 when either cannot be stat'ed */
int pmc_config_same_device(const char *a, const char *b);

#endif
