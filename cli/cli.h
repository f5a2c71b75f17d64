/* cli.h - pmcachectl's modules: argument parsing (args.c), rendering of
 * units and tables (render.c), the control-socket client (client.c) and the
 * commands (cmd_online.c: through the daemon; cmd_offline.c: on the pmem or
 * the disks directly). Only main() in pmcachectl.c prints the final error.
 *
 * Exit codes (documented in pmcachectl(8)):
 */
#ifndef PMC_CLI_H
#define PMC_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl.h"
#include "err.h"

enum pmc_cli_exit {
	PMC_EXIT_OK = 0,
	PMC_EXIT_FAIL = 1,	 /* the operation failed (message says why) */
	PMC_EXIT_USAGE = 2,	 /* bad command line */
	PMC_EXIT_NODAEMON = 3,	 /* daemon not running: no socket, or refused */
	PMC_EXIT_PERM = 4,	 /* permission denied (socket, device, run-time key) */
	PMC_EXIT_NOVOLUME = 5,	 /* unknown volume */
	PMC_EXIT_BUSY = 6,	 /* device busy (open device, running daemon, running flush) */
	PMC_EXIT_CORRUPT = 7,	 /* check: the metadata is inconsistent */
	PMC_EXIT_SIGNATURE = 8,	 /* format: the target holds data; --force overrides */
};

enum pmc_cli_cmd {
	PMC_CLI_NONE = 0,
	PMC_CLI_STATUS,
	PMC_CLI_STATS,
	PMC_CLI_VOLUME_ADD,
	PMC_CLI_VOLUME_REMOVE,
	PMC_CLI_VOLUME_LIST,
	PMC_CLI_SET,
	PMC_CLI_GET,
	PMC_CLI_FLUSH,
	PMC_CLI_SHUTDOWN,
	PMC_CLI_CHECK,
	PMC_CLI_FORMAT,
	PMC_CLI_DUMP,
	PMC_CLI_DISKS,
	PMC_CLI_VERSION,
	PMC_CLI_HELP,
	PMC_CLI_VOLUME_RECONNECT,
	PMC_CLI_VOLUME_CLEAR_ERROR,
};

#define PMC_CLI_POS_MAX 16
#define PMC_CLI_TIMEOUT_S 30.0 /* --timeout default */

struct pmc_cli_args {
	enum pmc_cli_cmd cmd;
	const char *socket; /* -s; NULL: from the config, else the default */
	const char *config; /* -c */
	double timeout_s;   /* --timeout: silence from the daemon before giving up; 0 never */
	int json, help;
	int watch;	     /* stats --watch */
	double interval_s;   /* stats --watch=SEC, -i SEC; default 1 */
	int count;	     /* stats --watch: refreshes, 0 = until interrupted */
	int prometheus;	     /* stats */
	int histograms;	     /* stats -H */
	int force;	     /* volume remove, format */
	int remove_devices;  /* shutdown */
	int replace_disk;    /* volume add: record a new disk for a known volume */
	int discard_dirty;   /* volume add --replace-disk: drop its dirty blocks */
	int repair;	     /* check */
	int all;	     /* dump: every volume slot and descriptor */
	uint64_t limit;	     /* dump: descriptors shown; default 32 */
	uint32_t block_size; /* format; 0 default */
	uint32_t max_volumes;
	uint64_t size;	     /* format: create a pmem file of this size */
	const char *volume;  /* -v, or the positional volume of stats/flush */
	const char *pos[PMC_CLI_POS_MAX];
	int npos;
};

/* Parse argv (without argv[0]). On failure err has one line and the return
 * is -EINVAL (exit PMC_EXIT_USAGE). "--help" anywhere sets help. */
int pmc_cli_parse(int argc, char *const *argv, struct pmc_cli_args *a, struct pmc_err *err);
const char *pmc_cli_cmd_name(enum pmc_cli_cmd cmd);
void pmc_cli_usage(FILE *f);

/* Build the control request for an online command (status, stats, volume
 * add/remove/list, set, get, flush). -EINVAL with err for a bad key/value. */
int pmc_cli_build_req(const struct pmc_cli_args *a, struct pmc_ctl_req *req, struct pmc_err *err);

/* positive errno -> exit code */
int pmc_cli_exit_of(int errnum);

/* --- render.c --- */

/* "0 B", "512 B", "4.0 KiB", "1.50 MiB", "2.0 GiB": binary units */
void pmc_fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* "850 µs", "12.0 ms", "3.20 s" */
void pmc_fmt_us(uint64_t us, char *buf, size_t len);
/* "1h 02m 03s", "45s" */
void pmc_fmt_duration_s(uint64_t s, char *buf, size_t len);
/* display width of UTF-8 text (code points) */
size_t pmc_utf8_width(const char *s);

#define PMC_TAB_COLS 12
struct pmc_tab {
	unsigned ncols;
	const char *head[PMC_TAB_COLS];
	int right[PMC_TAB_COLS]; /* 1: right-aligned (numbers) */
	char **cells;		 /* rows * ncols, malloc'ed strings */
	size_t rows, cap;
};
void pmc_tab_init(struct pmc_tab *t, unsigned ncols, const char *const *head, const int *right);
/* add a row of ncols cells, each printf-formatted from the given strings */
int pmc_tab_row(struct pmc_tab *t, const char *const *cells);
/* print aligned, two spaces between columns, no trailing spaces */
void pmc_tab_print(const struct pmc_tab *t, FILE *f);
void pmc_tab_free(struct pmc_tab *t);

/* a progress bar line (no newline): "[#####-----]  50%  1234 blocks left" */
void pmc_fmt_bar(uint64_t done, uint64_t total, unsigned width, char *buf, size_t len);

/* the unit of a stats counter, from its name: "bytes", "blocks", "ms" or "" */
const char *pmc_counter_unit(const char *name);
/* 1 for counters Prometheus should see as gauges (sampled state) */
int pmc_counter_is_gauge(const char *name);

struct json_object;
/* Prometheus text exposition of a stats reply ({"total":O,"volumes":[O...]}) */
void pmc_render_prometheus(struct json_object *stats, FILE *f);
/* the human stats tables */
void pmc_render_stats(struct json_object *stats, int histograms, FILE *f);

/* --- client.c --- */
struct pmc_client {
	int fd;
	int timeout_ms; /* per wait for the daemon; -1 forever */
	char *buf; /* reply lines */
	size_t len, cap;
	char path[108];
};
/* connect; -ECONNREFUSED: daemon not running, -EACCES, -EBUSY: no
 * connection within timeout_s (0: wait forever); every later wait for a
 * reply line gives up with -ETIMEDOUT after timeout_s too */
int pmc_client_open(struct pmc_client *c, const char *path, double timeout_s,
		    struct pmc_err *err);
void pmc_client_close(struct pmc_client *c);
int pmc_client_send(struct pmc_client *c, const struct pmc_ctl_req *req, struct pmc_err *err);
/* next reply line decoded into r (caller frees with pmc_ctl_reply_free);
 * -ETIMEDOUT, -ECONNABORTED: closed without a reply */
int pmc_client_recv(struct pmc_client *c, struct pmc_ctl_reply *r, struct pmc_err *err);

/* --- commands: return an exit code; on failure err holds the message --- */
struct pmc_cli_ctx {
	const struct pmc_cli_args *a;
	char socket[108];
	char pmem[4096]; /* from the config, for check/format/dump; "" unknown */
	int printed;	 /* the command printed its JSON document, which says
			    what went wrong: main() prints no second one */
};
int pmc_cmd_online(struct pmc_cli_ctx *ctx, struct pmc_err *err);
int pmc_cmd_check(struct pmc_cli_ctx *ctx, struct pmc_err *err);
int pmc_cmd_format(struct pmc_cli_ctx *ctx, struct pmc_err *err);
int pmc_cmd_dump(struct pmc_cli_ctx *ctx, struct pmc_err *err);
int pmc_cmd_disks(struct pmc_cli_ctx *ctx, struct pmc_err *err);

/* print a JSON object on stdout, pretty unless one_line */
/* print o with "ok": ok (the command succeeded) added */
void pmc_print_json(struct json_object *o, int ok, int one_line);

#endif
