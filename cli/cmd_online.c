/* cmd_online.c - the commands served by the running pmcached: status,
 * stats, volume add/remove/list, set, get, flush, shutdown. Each sends one request
 * and renders the final reply (flush also the progress lines).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"

typedef void (*progress_fn)(void *arg, uint64_t dirty_blocks);

/* one request; on success *payload is the final reply's (json_object_put) */
static int rpc(struct pmc_client *cl, const struct pmc_ctl_req *req, struct json_object **payload,
	       progress_fn progress, void *arg, struct pmc_err *err)
{
	struct pmc_ctl_reply r;
	int rc;

	rc = pmc_client_send(cl, req, err);
	if (rc)
		return rc;
	for (;;) {
		memset(&r, 0, sizeof(r));
		rc = pmc_client_recv(cl, &r, err);
		if (rc)
			return rc;
		switch (r.kind) {
		case PMC_CTL_REPLY_PROGRESS:
			if (progress)
				progress(arg, r.dirty_blocks);
			pmc_ctl_reply_free(&r);
			continue;
		case PMC_CTL_REPLY_ERROR:
			rc = pmc_err_set(err, r.errnum ? r.errnum : EIO, "%s", r.error);
			pmc_ctl_reply_free(&r);
			return rc;
		case PMC_CTL_REPLY_OK:
			*payload = r.payload;
			r.payload = NULL;
			pmc_ctl_reply_free(&r);
			if (!*payload)
				*payload = json_object_new_object();
			return 0;
		}
	}
}

/* exit code of a failed request: the connection is up by then, so a
 * connection refused is the daemon's (an NVMe-oF connect), not "daemon not
 * running" */
static int exit_of_err(const struct pmc_err *err)
{
	return err->code == ECONNREFUSED ? PMC_EXIT_FAIL : pmc_cli_exit_of(err->code);
}

static uint64_t get_u64(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_uint64(v) : 0;
}

static const char *get_str(struct json_object *o, const char *key, const char *def)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : def;
}

/* ... and def for an empty string too (a path not connected has no
 * controller, address or device) */
static const char *get_str_set(struct json_object *o, const char *key, const char *def)
{
	const char *s = get_str(o, key, def);

	return s[0] ? s : def;
}

static int get_bool(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static const char *vol_state(struct json_object *v)
{
	if (get_u64(v, "lost_blocks"))
		return "lost-data";
	if (get_u64(v, "error"))
		return "failed";
	if (get_bool(v, "draining"))
		return "draining";
	if (get_bool(v, "recovered"))
		return "recovered";
	return "ok";
}

static void print_volumes(struct json_object *vols, uint64_t block_size)
{
	static const char *const head[] = {"VOLUME", "MODE",  "STATE", "DEVICE", "DISK",
					   "DISK ID", "SIZE", "DIRTY", "CLEAN",  "ERROR"};
	static const int right[] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 0};
	struct pmc_tab t;

	pmc_tab_init(&t, 10, head, right);
	for (size_t i = 0; vols && i < json_object_array_length(vols); i++) {
		struct json_object *v = json_object_array_get_idx(vols, i);
		char size[24], dirty[24], clean[24];
		const char *row[10];
		const char *id = get_str(v, "disk_id", "");
		const char *etext = get_str(v, "error_text", "");
		struct json_object *cv;
		/* false while the daemon recounts after a crash: the counts are
		 * partial then, none is shown (absent: an older daemon) */
		int counts_valid = !json_object_object_get_ex(v, "counts_valid", &cv) ||
				   json_object_get_boolean(cv);

		pmc_fmt_bytes(get_u64(v, "size_bytes"), size, sizeof(size));
		pmc_fmt_bytes(get_u64(v, "dirty_blocks") * block_size, dirty, sizeof(dirty));
		pmc_fmt_bytes(get_u64(v, "clean_blocks") * block_size, clean, sizeof(clean));
		row[0] = get_str(v, "name", "?");
		row[1] = get_str(v, "mode", "?");
		row[2] = vol_state(v);
		row[3] = get_str(v, "device", "");
		row[4] = get_str(v, "disk", "");
		row[5] = *id ? id : "-";
		row[6] = size;
		row[7] = counts_valid ? dirty : "counting";
		row[8] = counts_valid ? clean : "counting";
		row[9] = *etext ? etext : "-";
		pmc_tab_row(&t, row);
	}
	if (t.rows)
		pmc_tab_print(&t, stdout);
	else
		puts("no volumes");
	pmc_tab_free(&t);
	/* NVMe-oF disks: where each one's path is */
	for (size_t i = 0; vols && i < json_object_array_length(vols); i++) {
		struct json_object *v = json_object_array_get_idx(vols, i), *p;

		if (!json_object_object_get_ex(v, "path", &p))
			continue;
		printf("%s: path %s %s %s (%s): %s, %" PRIu64 " reconnects\n",
		       get_str(v, "name", "?"), get_str(p, "transport", "?"),
		       get_str_set(p, "address", "-"), get_str_set(p, "controller", "-"),
		       get_str_set(p, "device", "-"), get_str_set(p, "state", "?"),
		       get_u64(p, "reconnects"));
	}
}

static void print_status(struct json_object *o)
{
	struct json_object *vols = NULL;
	uint64_t bs = get_u64(o, "block_size");

	json_object_object_get_ex(o, "volumes", &vols);
	if (get_str(o, "version", NULL))
		printf("pmcached %s, pid %" PRIu64 "\n", get_str(o, "version", ""), get_u64(o, "pid"));
	if (get_bool(o, "pmem_unavailable")) {
		printf("pmem        %s: UNAVAILABLE, clean volumes served pass-through\n",
		       get_str(o, "pmem", "?"));
	} else {
		uint64_t nb = get_u64(o, "nr_blocks"), d = get_u64(o, "dirty_blocks"),
			 c = get_u64(o, "clean_blocks");
		char cap[24], db[24], cb[24], fb[24], bsz[24];

		pmc_fmt_bytes(nb * bs, cap, sizeof(cap));
		pmc_fmt_bytes(d * bs, db, sizeof(db));
		pmc_fmt_bytes(c * bs, cb, sizeof(cb));
		pmc_fmt_bytes((nb > d + c ? nb - d - c : 0) * bs, fb, sizeof(fb));
		pmc_fmt_bytes(bs, bsz, sizeof(bsz));
		printf("pmem        %s  uuid %s\n", get_str(o, "pmem", "?"), get_str(o, "uuid", "?"));
		printf("capacity    %s in %" PRIu64 " blocks of %s; store granularity %s\n", cap, nb,
		       bsz, get_str(o, "store_granularity", "?"));
		if (get_bool(o, "counts_valid"))
			printf("occupancy   dirty %s (%.1f%%), clean %s (%.1f%%), free %s\n", db,
			       nb ? 100.0 * (double)d / (double)nb : 0.0, cb,
			       nb ? 100.0 * (double)c / (double)nb : 0.0, fb);
		else /* partial counts: none shown */
			printf("occupancy   dirty and clean blocks being counted after a crash "
			       "(recount pending)\n");
		printf("last start  after a %s shutdown, boot epoch %" PRIu64 "\n",
		       !strcmp(get_str(o, "last_restart", ""), "clean") ? "clean" : "crash or kill",
		       get_u64(o, "boot_epoch"));
	}
	putchar('\n');
	print_volumes(vols, bs ? bs : 4096);
}

/* --- flush progress --- */
struct flush_prog {
	int tty, json;
	uint64_t total; /* dirty blocks at the start (the largest seen) */
	int drawn;
	const char *start; /* the starting line, printed once the daemon took the flush */
};

static void flush_started(struct flush_prog *p)
{
	if (p->start) {
		fputs(p->start, stdout);
		p->start = NULL;
	}
}

static void flush_progress(void *arg, uint64_t left)
{
	struct flush_prog *p = arg;
	char bar[160];

	if (left > p->total)
		p->total = left;
	flush_started(p);
	if (p->json) {
		printf("{\"progress\":{\"dirty_blocks\":%" PRIu64 "}}\n", left);
		fflush(stdout);
		return;
	}
	if (p->tty) {
		pmc_fmt_bar(p->total - left, p->total, 40, bar, sizeof(bar));
		fprintf(stderr, "\r%s", bar);
		p->drawn = 1;
	} else {
		printf("flush: %" PRIu64 " dirty blocks left of %" PRIu64 "\n", left, p->total);
	}
	fflush(p->tty ? stderr : stdout);
}

static volatile sig_atomic_t stop;
static void on_sigint(int sig)
{
	stop = 1;
}

static int do_stats(struct pmc_cli_ctx *ctx, struct pmc_client *cl, const struct pmc_ctl_req *req,
		    struct pmc_err *err)
{
	const struct pmc_cli_args *a = ctx->a;
	int tty = isatty(STDOUT_FILENO), rc;

	if (a->watch) {
		struct sigaction sa = {.sa_handler = on_sigint};

		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	for (int n = 0; !stop; n++) {
		struct json_object *o = NULL;

		if (n > 0) {
			/* a connection per refresh: the daemon closes one idle
			 * for control.idle_timeout, which an interval may pass */
			pmc_client_close(cl);
			if (pmc_client_open(cl, ctx->socket, a->timeout_s, err))
				return pmc_cli_exit_of(err->code);
		}
		rc = rpc(cl, req, &o, NULL, NULL, err);
		if (rc)
			return stop && err->code == EINTR ? 0 : exit_of_err(err);
		if (a->watch && tty && !a->json && !a->prometheus)
			fputs("\033[H\033[2J", stdout); /* home, clear: refresh in place */
		if (a->prometheus) {
			pmc_render_prometheus(o, stdout);
		} else if (a->json) {
			pmc_print_json(o, 1, a->watch);
		} else {
			if (a->watch) {
				char ts[32];
				time_t now = time(NULL);

				strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
				printf("pmcache stats at %s, every %gs (Ctrl-C stops)\n\n", ts,
				       a->interval_s);
			}
			pmc_render_stats(o, a->histograms, stdout);
		}
		json_object_put(o);
		fflush(stdout);
		if (!a->watch || (a->count && n + 1 >= a->count))
			break;
		{
			struct timespec ts = {(time_t)a->interval_s,
					      (long)((a->interval_s - (double)(time_t)a->interval_s) *
						     1e9)};

			nanosleep(&ts, NULL);
		}
		if (!a->json && !a->prometheus && !tty)
			putchar('\n');
	}
	return 0;
}

int pmc_cmd_online(struct pmc_cli_ctx *ctx, struct pmc_err *err)
{
	const struct pmc_cli_args *a = ctx->a;
	struct pmc_client cl;
	struct pmc_ctl_req req;
	struct json_object *o = NULL;
	int rc, ex = 0;

	if (pmc_cli_build_req(a, &req, err))
		return err->code == EPERM ? PMC_EXIT_PERM : PMC_EXIT_USAGE;
	req.id.kind = PMC_CTL_ID_INT;
	req.id.num = getpid();
	if (pmc_client_open(&cl, ctx->socket, a->timeout_s, err))
		return pmc_cli_exit_of(err->code);
	if (a->cmd == PMC_CLI_STATS) {
		ex = do_stats(ctx, &cl, &req, err);
		pmc_client_close(&cl);
		return ex;
	}
	if (a->cmd == PMC_CLI_FLUSH) {
		struct flush_prog p = {.tty = isatty(STDERR_FILENO) && !a->json, .json = a->json};
		struct pmc_ctl_req sreq = {.cmd = PMC_CTL_STATUS};
		int found = !a->volume;

		/* the starting amount, for the bar */
		if (!rpc(&cl, &sreq, &o, NULL, NULL, err)) {
			struct json_object *vols;

			if (!a->volume) {
				p.total = get_u64(o, "dirty_blocks");
			} else if (json_object_object_get_ex(o, "volumes", &vols)) {
				for (size_t i = 0; i < json_object_array_length(vols); i++) {
					struct json_object *v = json_object_array_get_idx(vols, i);

					if (!strcmp(get_str(v, "name", ""), a->volume)) {
						p.total = get_u64(v, "dirty_blocks");
						found = 1;
					}
				}
			}
			json_object_put(o);
			o = NULL;
		}
		/* printed when the daemon answers: not before a refusal */
		char start[PMC_VOLUME_NAME_MAX + 64];

		snprintf(start, sizeof(start), "flush: %" PRIu64 " dirty blocks%s%s\n", p.total,
			 a->volume ? " in volume " : "", a->volume ? a->volume : "");
		if (!a->json && !p.tty && found)
			p.start = start;
		rc = rpc(&cl, &req, &o, flush_progress, &p, err);
		if (!rc)
			flush_started(&p);
		if (p.tty) {
			if (!rc) {
				char bar[160];

				pmc_fmt_bar(p.total, p.total, 40, bar, sizeof(bar));
				fprintf(stderr, "\r%s\n", bar);
			} else if (p.drawn) {
				fputc('\n', stderr);
			}
		}
		if (rc) {
			pmc_client_close(&cl);
			return exit_of_err(err);
		}
		if (a->json) {
			pmc_print_json(o, 1, 1);
		} else
			printf("flush: done, every dirty block%s%s is on its disk\n",
			       a->volume ? " of " : "", a->volume ? a->volume : "");
		json_object_put(o);
		pmc_client_close(&cl);
		return 0;
	}
	rc = rpc(&cl, &req, &o, NULL, NULL, err);
	pmc_client_close(&cl);
	if (rc)
		return exit_of_err(err);
	if (a->json) {
		pmc_print_json(o, 1, 0);
		json_object_put(o);
		return 0;
	}
	switch (a->cmd) {
	case PMC_CLI_STATUS:
		print_status(o);
		break;
	case PMC_CLI_VOLUME_LIST:
		print_volumes(json_object_object_get_ex(o, "volumes", NULL)
				      ? json_object_object_get(o, "volumes")
				      : NULL,
			      4096);
		break;
	case PMC_CLI_VOLUME_ADD: {
		struct json_object *vols = json_object_object_get(o, "volumes");

		printf("volume %s added\n", a->pos[0]);
		for (size_t i = 0; vols && i < json_object_array_length(vols); i++) {
			struct json_object *v = json_object_array_get_idx(vols, i);

			if (!strcmp(get_str(v, "name", ""), a->pos[0]))
				printf("device %s on disk %s, mode %s\n", get_str(v, "device", "?"),
				       get_str(v, "disk", "?"), get_str(v, "mode", "?"));
		}
		break;
	}
	case PMC_CLI_VOLUME_REMOVE:
		printf("volume %s removed\n", a->pos[0]);
		break;
	case PMC_CLI_VOLUME_RECONNECT:
		printf("volume %s: reconnecting; pmcachectl status shows its path\n", a->pos[0]);
		break;
	case PMC_CLI_VOLUME_CLEAR_ERROR: {
		int was = (int)get_u64(o, "was"), now = (int)get_u64(o, "error");

		if (now)
			printf("volume %s: error kept: %s (dirty data lost to pmem media errors; "
			       "reads of it fail until it is written again)\n",
			       a->pos[0], get_str(o, "error_text", "?"));
		else if (was)
			printf("volume %s: error cleared (was: %s); write-back tries at once\n",
			       a->pos[0], strerror(was));
		else
			printf("volume %s: had no error\n", a->pos[0]);
		break;
	}
	case PMC_CLI_SHUTDOWN:
		if (a->remove_devices)
			printf("pmcached: stopping; every device is removed\n");
		else
			printf("pmcached: stopping; devices in use stay, quiesced, until it starts "
			       "again; the others are removed\n");
		break;
	case PMC_CLI_SET:
		printf("%s%s%s = %s\n", a->volume ? a->volume : "", a->volume ? ": " : "",
		       req.key->key, a->pos[1]);
		break;
	case PMC_CLI_GET: {
		struct json_object *v = json_object_object_get(o, "value");
		char buf[32];

		if (v && json_object_is_type(v, json_type_int) && req.key->type == PMC_CONFIG_T_SIZE) {
			pmc_config_size_format((uint64_t)json_object_get_int64(v), buf, sizeof(buf));
			printf("%s\n", buf);
		} else {
			printf("%s\n", v ? json_object_get_string(v) : "");
		}
		break;
	}
	default:
		break;
	}
	json_object_put(o);
	return ex;
}
