/* pmcachectl.c - the admin CLI of pmcache: parses the command line, finds
 * the control socket (-s, else control.socket of -c CONFIG, else the
 * default), runs one command and turns its failure into one line on
 * stderr and a documented exit code (cli.h, pmcachectl(8)).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"
#include "config.h"

#ifndef PMC_VERSION
#define PMC_VERSION "0.0.0"
#endif

static int version(struct pmc_cli_ctx *ctx)
{
	struct pmc_client cl;
	struct pmc_ctl_req req = {.cmd = PMC_CTL_STATUS};
	struct pmc_ctl_reply r;
	struct pmc_err e = {0};
	const char *dver = NULL, *state = "not running";
	struct json_object *v;

	memset(&r, 0, sizeof(r));
	if (!pmc_client_open(&cl, ctx->socket, ctx->a->timeout_s, &e)) {
		if (!pmc_client_send(&cl, &req, &e) && !pmc_client_recv(&cl, &r, &e) &&
		    r.kind == PMC_CTL_REPLY_OK) {
			state = "running";
			if (r.payload && json_object_object_get_ex(r.payload, "version", &v))
				dver = json_object_get_string(v);
		} else if (e.code == EBUSY || e.code == ETIMEDOUT ||
			   (r.kind == PMC_CTL_REPLY_ERROR && r.errnum == EBUSY)) {
			state = "running, busy";
		}
		pmc_client_close(&cl);
	} else if (e.code == EACCES) {
		state = "permission denied";
	} else if (e.code == EBUSY) {
		state = "running, busy";
	}
	if (ctx->a->json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "pmcachectl", json_object_new_string(PMC_VERSION));
		json_object_object_add(o, "daemon", json_object_new_string(state));
		json_object_object_add(o, "daemon_version",
				       dver ? json_object_new_string(dver) : NULL);
		json_object_object_add(o, "socket", json_object_new_string(ctx->socket));
		pmc_print_json(o, 1, 0);
		json_object_put(o);
	} else {
		printf("pmcachectl %s\n", PMC_VERSION);
		printf("pmcached   %s%s%s (%s)\n", state, dver ? ", version " : "", dver ? dver : "",
		       ctx->socket);
	}
	pmc_ctl_reply_free(&r);
	return 0;
}

/* a failure: one line on stderr, and with json the error object on stdout
 * (unless the command printed its document already) */
static int fail(int json, int printed, int ex, const struct pmc_err *err)
{
	fprintf(stderr, "pmcachectl: %s\n", err->msg);
	if (json && !printed) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "errno", json_object_new_int(err->code));
		json_object_object_add(o, "error", json_object_new_string(err->msg));
		json_object_object_add(o, "exit", json_object_new_int(ex));
		pmc_print_json(o, 0, 1);
		json_object_put(o);
	}
	return ex;
}

int main(int argc, char **argv)
{
	struct pmc_cli_args a;
	struct pmc_err err = {0};
	struct pmc_cli_ctx ctx;
	int ex;

	if (pmc_cli_parse(argc - 1, argv + 1, &a, &err)) {
		/* --json anywhere: the parse may have stopped before it */
		int json = 0;

		for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
			json |= !strcmp(argv[i], "--json") || !strcmp(argv[i], "-j");
		return fail(json, 0, PMC_EXIT_USAGE, &err);
	}
	if (a.help || a.cmd == PMC_CLI_HELP) {
		pmc_cli_usage(stdout);
		return 0;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.a = &a;
	snprintf(ctx.socket, sizeof(ctx.socket), "%s", "/run/pmcache/pmcached.sock");
	{
		const char *conf = a.config;

		/* the default config is read when it exists and -s is not given */
		if (!conf && access(PMC_CONFIG_DEFAULT_PATH, R_OK) == 0)
			conf = PMC_CONFIG_DEFAULT_PATH;
		if (conf) {
			struct pmc_config c;

			if (pmc_config_load(conf, &c, &err)) {
				if (a.config)
					return fail(a.json, 0,
						    err.code == EACCES ? PMC_EXIT_PERM
								       : PMC_EXIT_USAGE,
						    &err);
				/* the defaults then: say why, they may not be the
				 * daemon's (a socket set in the file) */
				fprintf(stderr, "pmcachectl: warning: %s; using the default socket\n",
					err.msg);
				pmc_err_clear(&err);
			} else {
				snprintf(ctx.socket, sizeof(ctx.socket), "%s", c.control_socket);
				snprintf(ctx.pmem, sizeof(ctx.pmem), "%s", c.pmem_path);
				pmc_config_free(&c);
			}
		}
	}
	if (a.socket)
		snprintf(ctx.socket, sizeof(ctx.socket), "%s", a.socket);

	switch (a.cmd) {
	case PMC_CLI_CHECK:
		ex = pmc_cmd_check(&ctx, &err);
		break;
	case PMC_CLI_FORMAT:
		ex = pmc_cmd_format(&ctx, &err);
		break;
	case PMC_CLI_DUMP:
		ex = pmc_cmd_dump(&ctx, &err);
		break;
	case PMC_CLI_DISKS:
		ex = pmc_cmd_disks(&ctx, &err);
		break;
	case PMC_CLI_VERSION:
		ex = version(&ctx);
		break;
	default:
		ex = pmc_cmd_online(&ctx, &err);
		break;
	}
	if (ex && err.msg[0])
		return fail(a.json, ctx.printed, ex, &err);
	return ex;
}
