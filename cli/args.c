/* args.c - pmcachectl's command line: global options anywhere, one
 * subcommand ("volume" takes a second word), its positional arguments, and
 * the control request built from them. No I/O but the usage text.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"

static const struct {
	const char *name;
	enum pmc_cli_cmd cmd;
	int min_pos, max_pos; /* positional arguments after the command word(s) */
} cmds[] = {
	{"status", PMC_CLI_STATUS, 0, 0},
	{"stats", PMC_CLI_STATS, 0, 1},
	{"volume add", PMC_CLI_VOLUME_ADD, 2, PMC_CLI_POS_MAX},
	{"volume remove", PMC_CLI_VOLUME_REMOVE, 1, 1},
	{"volume list", PMC_CLI_VOLUME_LIST, 0, 0},
	{"volume reconnect", PMC_CLI_VOLUME_RECONNECT, 1, 1},
	{"volume clear-error", PMC_CLI_VOLUME_CLEAR_ERROR, 1, 1},
	{"set", PMC_CLI_SET, 2, 2},
	{"get", PMC_CLI_GET, 1, 1},
	{"flush", PMC_CLI_FLUSH, 0, 1},
	{"shutdown", PMC_CLI_SHUTDOWN, 0, 0},
	{"check", PMC_CLI_CHECK, 0, 1},
	{"format", PMC_CLI_FORMAT, 0, 1},
	{"dump", PMC_CLI_DUMP, 0, 1},
	{"disks", PMC_CLI_DISKS, 0, 0},
	{"version", PMC_CLI_VERSION, 0, 0},
	{"help", PMC_CLI_HELP, 0, 1},
};

const char *pmc_cli_cmd_name(enum pmc_cli_cmd cmd)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (cmds[i].cmd == cmd)
			return cmds[i].name;
	return NULL;
}

void pmc_cli_usage(FILE *f)
{
	fputs("usage: pmcachectl [-s SOCKET] [-c CONFIG] [-t SEC] [--json] COMMAND [ARGS]\n"
	      "\n"
	      "commands (through the running pmcached):\n"
	      "  status                        cache and volumes at a glance\n"
	      "  stats [VOLUME] [--watch[=SEC]] [-i SEC] [-n COUNT] [-H|--histograms]\n"
	      "        [--prometheus]          counters and latency, per volume and total\n"
	      "  volume add NAME DISK [KEY=VALUE...] [--replace-disk [--discard-dirty]]\n"
	      "                                attach a disk (mode=, seq_cutoff=, ...); a known\n"
	      "                                volume only to the disk the cache recorded; DISK\n"
	      "                                nvmf: an NVMe-oF namespace (disk.transport=,\n"
	      "                                disk.traddr=, disk.subsysnqn=, disk.nsid=, ...)\n"
	      "  volume remove NAME [--force]  write back, stop and detach a volume\n"
	      "  volume list                   the volumes served\n"
	      "  volume reconnect NAME         connect a lost NVMe-oF volume's controller now\n"
	      "  volume clear-error NAME       its disk works again: clear the volume's error\n"
	      "                                and write-back back-off\n"
	      "  set [-v VOLUME] KEY VALUE     change a run-time tunable or a volume's mode\n"
	      "  get [-v VOLUME] KEY           read a configuration key\n"
	      "  flush [VOLUME]                write back all dirty data, with progress\n"
	      "  shutdown [--remove-devices]   stop pmcached; devices in use stay, quiesced,\n"
	      "                                for the next start (--remove-devices: remove\n"
	      "                                every device, refused while one is in use)\n"
	      "commands (offline, on the pmem or the disks):\n"
	      "  check [PMEM] [--repair]       consistency check of the pmem metadata\n"
	      "  format [PMEM] [--force] [--block-size N] [--max-volumes N] [--size N]\n"
	      "                                write an empty cache; refuses existing data\n"
	      "  dump [PMEM] [--all] [--limit N]   decoded superblock, volumes, descriptors\n"
	      "  disks                         backing disk health (NVMe SMART, sysfs)\n"
	      "  version                       versions of pmcachectl and the daemon\n"
	      "\n"
	      "options:\n"
	      "  -s, --socket PATH   control socket (default: from the config, else "
	      "/run/pmcache/pmcached.sock)\n"
	      "  -c, --config PATH   pmcached.conf for the socket and the pmem path\n"
	      "  -t, --timeout SEC   give up when the daemon says nothing for SEC seconds\n"
	      "                      (default 30; 0 waits forever)\n"
	      "  -j, --json          machine-readable output\n"
	      "  -h, --help          this text\n"
	      "\n"
	      "exit codes: 0 ok, 1 failed, 2 usage, 3 daemon not running, 4 permission denied,\n"
	      "5 unknown volume, 6 busy (device, daemon or operation), 7 inconsistent metadata, 8 target holds data\n"
	      "(see pmcachectl(8)).\n",
	      f);
}

static int parse_u64(const char *opt, const char *s, uint64_t *out, struct pmc_err *err)
{
	if (!s || pmc_config_size_parse(s, out))
		return pmc_err_set(err, EINVAL, "%s: expects a number or a size like 64M, not \"%s\"",
				   opt, s ? s : "");
	return 0;
}

static int parse_interval(const char *opt, const char *s, double *out, struct pmc_err *err)
{
	char *end;
	double v;

	errno = 0;
	v = s ? strtod(s, &end) : 0;
	if (!s || !*s || *end || errno || !(v >= 0.05 && v <= 3600))
		return pmc_err_set(err, EINVAL, "%s: expects seconds between 0.05 and 3600, not \"%s\"",
				   opt, s ? s : "");
	*out = v;
	return 0;
}

/* the value of an option: "--opt=V", "--opt V", "-o V" */
static const char *opt_value(int argc, char *const *argv, int *i, const char *eq)
{
	if (eq)
		return eq + 1;
	if (*i + 1 < argc)
		return argv[++*i];
	return NULL;
}

static int is(const char *arg, size_t n, const char *s, const char *l)
{
	return (s && strlen(s) == n && !strncmp(arg, s, n)) ||
	       (l && strlen(l) == n && !strncmp(arg, l, n));
}

int pmc_cli_parse(int argc, char *const *argv, struct pmc_cli_args *a, struct pmc_err *err)
{
	const char *words[PMC_CLI_POS_MAX + 2];
	const char *paced = NULL; /* -i or -n given: only with --watch */
	int nwords = 0, opts_done = 0;
	uint64_t u;

	memset(a, 0, sizeof(*a));
	a->interval_s = 1.0;
	a->timeout_s = PMC_CLI_TIMEOUT_S;
	a->limit = 32;
	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i], *eq, *v;
		size_t n;

		if (opts_done || arg[0] != '-' || !arg[1]) {
			if (nwords == PMC_CLI_POS_MAX + 2)
				return pmc_err_set(err, EINVAL, "too many arguments");
			words[nwords++] = arg;
			continue;
		}
		if (!strcmp(arg, "--")) {
			opts_done = 1;
			continue;
		}
		eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
		n = eq ? (size_t)(eq - arg) : strlen(arg);
		if (is(arg, n, "-h", "--help")) {
			a->help = 1;
		} else if (is(arg, n, "-j", "--json")) {
			a->json = 1;
		} else if (is(arg, n, NULL, "--prometheus")) {
			a->prometheus = 1;
		} else if (is(arg, n, "-H", "--histograms")) {
			a->histograms = 1;
		} else if (is(arg, n, "-f", "--force")) {
			a->force = 1;
		} else if (is(arg, n, NULL, "--remove-devices")) {
			a->remove_devices = 1;
		} else if (is(arg, n, NULL, "--replace-disk")) {
			a->replace_disk = 1;
		} else if (is(arg, n, NULL, "--discard-dirty")) {
			a->discard_dirty = 1;
		} else if (is(arg, n, NULL, "--repair")) {
			a->repair = 1;
		} else if (is(arg, n, "-a", "--all")) {
			a->all = 1;
		} else if (is(arg, n, "-w", "--watch")) {
			a->watch = 1;
			if (eq && parse_interval("--watch", eq + 1, &a->interval_s, err))
				return -EINVAL;
		} else if (is(arg, n, "-s", "--socket") || is(arg, n, "-c", "--config") ||
			   is(arg, n, "-v", "--volume") || is(arg, n, "-i", "--interval") ||
			   is(arg, n, "-n", "--count") || is(arg, n, NULL, "--limit") ||
			   is(arg, n, NULL, "--block-size") || is(arg, n, NULL, "--max-volumes") ||
			   is(arg, n, NULL, "--size") || is(arg, n, "-t", "--timeout")) {
			char opt[32];

			snprintf(opt, sizeof(opt), "%.*s", (int)n, arg);
			v = opt_value(argc, argv, &i, eq);
			if (!v)
				return pmc_err_set(err, EINVAL, "%s: needs a value", opt);
			if (is(arg, n, "-s", "--socket")) {
				if (!*v || strlen(v) >= sizeof(((struct pmc_cli_ctx *)0)->socket))
					return pmc_err_set(err, EINVAL,
							   "%s: a socket path of 1 to 107 bytes", opt);
				a->socket = v;
			} else if (is(arg, n, "-c", "--config")) {
				a->config = v;
			} else if (is(arg, n, "-v", "--volume")) {
				if (pmc_config_name_check(v, "volume", err))
					return -EINVAL;
				a->volume = v;
			} else if (is(arg, n, "-t", "--timeout")) {
				char *end;

				errno = 0;
				a->timeout_s = strtod(v, &end);
				if (!*v || *end || errno || !(a->timeout_s >= 0) ||
				    a->timeout_s > 86400 ||
				    (a->timeout_s > 0 && a->timeout_s < 0.05))
					return pmc_err_set(err, EINVAL,
							   "%s: expects seconds, 0.05 to 86400 (0: "
							   "wait forever), not \"%s\"",
							   opt, v);
			} else if (is(arg, n, "-i", "--interval")) {
				if (parse_interval(opt, v, &a->interval_s, err))
					return -EINVAL;
				paced = opt[1] == '-' ? "--interval" : "-i";
			} else {
				if (parse_u64(opt, v, &u, err))
					return -EINVAL;
				if (is(arg, n, "-n", "--count")) {
					if (u < 1 || u > 1000000)
						return pmc_err_set(err, EINVAL, "%s: 1 to 1000000", opt);
					a->count = (int)u;
					paced = opt[1] == '-' ? "--count" : "-n";
				} else if (is(arg, n, NULL, "--limit")) {
					a->limit = u;
				} else if (is(arg, n, NULL, "--block-size")) {
					/* what pmcached serves (its engine moves 4 KiB
					 * blocks); a cache of other blocks would not start */
					if (u != 4096)
						return pmc_err_set(err, EINVAL,
								   "%s: only 4K (pmcached serves 4 KiB "
								   "blocks)",
								   opt);
					a->block_size = (uint32_t)u;
				} else if (is(arg, n, NULL, "--max-volumes")) {
					if (u < 1 || u > 4096)
						return pmc_err_set(err, EINVAL, "%s: 1 to 4096", opt);
					a->max_volumes = (uint32_t)u;
				} else {
					if (u == 0)
						return pmc_err_set(err, EINVAL, "%s: must not be 0", opt);
					a->size = u;
				}
			}
		} else {
			return pmc_err_set(err, EINVAL, "unknown option %s (see pmcachectl --help)",
					   arg);
		}
	}
	if (nwords == 0) {
		if (a->help) {
			a->cmd = PMC_CLI_HELP;
			return 0;
		}
		return pmc_err_set(err, EINVAL, "no command given (see pmcachectl --help)");
	}
	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
		const char *name = cmds[c].name, *sp = strchr(name, ' ');
		int used;

		if (sp) {
			if (strncmp(words[0], name, (size_t)(sp - name)) ||
			    words[0][sp - name] != '\0')
				continue;
			if (nwords < 2)
				return pmc_err_set(err, EINVAL,
						   "volume: needs add, remove, list, reconnect or "
						   "clear-error");
			if (strcmp(words[1], sp + 1))
				continue;
			used = 2;
		} else {
			if (strcmp(words[0], name))
				continue;
			used = 1;
		}
		a->cmd = cmds[c].cmd;
		a->npos = nwords - used;
		if (a->npos > PMC_CLI_POS_MAX)
			return pmc_err_set(err, EINVAL, "%s: %d arguments given, expects %d to %d",
					   name, a->npos, cmds[c].min_pos, cmds[c].max_pos);
		for (int p = 0; p < a->npos; p++)
			a->pos[p] = words[used + p];
		if (a->help)
			return 0;
		if (a->npos < cmds[c].min_pos || a->npos > cmds[c].max_pos)
			return pmc_err_set(err, EINVAL, "%s: %d argument%s given, expects %d to %d",
					   name, a->npos, a->npos == 1 ? "" : "s", cmds[c].min_pos,
					   cmds[c].max_pos);
		if ((a->cmd == PMC_CLI_STATS || a->cmd == PMC_CLI_FLUSH) && a->npos == 1) {
			if (a->volume && strcmp(a->volume, a->pos[0]))
				return pmc_err_set(err, EINVAL, "%s: two different volumes given", name);
			if (pmc_config_name_check(a->pos[0], "volume", err))
				return -EINVAL;
			a->volume = a->pos[0];
		}
		if (a->cmd == PMC_CLI_VOLUME_REMOVE &&
		    pmc_config_name_check(a->pos[0], "volume", err))
			return -EINVAL;
		if (a->prometheus && a->cmd != PMC_CLI_STATS)
			return pmc_err_set(err, EINVAL, "--prometheus: only for stats");
		if (a->watch && a->cmd != PMC_CLI_STATS)
			return pmc_err_set(err, EINVAL, "--watch: only for stats");
		/* a pace for a single read would be ignored: say so */
		if (paced && !a->watch)
			return pmc_err_set(err, EINVAL, "%s: only with stats --watch", paced);
		if (a->prometheus && a->json)
			return pmc_err_set(err, EINVAL, "--prometheus and --json exclude each other");
		if (a->remove_devices && a->cmd != PMC_CLI_SHUTDOWN)
			return pmc_err_set(err, EINVAL, "--remove-devices: only for shutdown");
		if (a->repair && a->cmd != PMC_CLI_CHECK)
			return pmc_err_set(err, EINVAL, "--repair: only for check");
		return 0;
	}
	if (!strcmp(words[0], "volume"))
		return pmc_err_set(err, EINVAL,
				   "volume %s: unknown; use add, remove, list, reconnect or clear-error",
				   words[1]);
	return pmc_err_set(err, EINVAL, "unknown command \"%s\" (see pmcachectl --help)",
			   words[0]);
}

/* key for set/get: a volume key with -v, a global one without */
static int find_key(const struct pmc_cli_args *a, const char *name,
		    const struct pmc_config_key **out, struct pmc_err *err)
{
	const struct pmc_config_key *k = pmc_config_key_find(PMC_CONFIG_SCOPE_TOP, name);

	if (!k || k->type == PMC_CONFIG_T_LIST)
		k = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, name);
	if (!k || k->type == PMC_CONFIG_T_LIST)
		return pmc_err_set(err, EINVAL, "%s: no such key (see pmcached.conf(5))", name);
	if (k->scope == PMC_CONFIG_SCOPE_VOLUME && !a->volume)
		return pmc_err_set(err, EINVAL, "%s: a volume key; name the volume with -v VOLUME",
				   name);
	if (k->scope == PMC_CONFIG_SCOPE_TOP && a->volume)
		return pmc_err_set(err, EINVAL, "%s: a global key; -v does not apply", name);
	*out = k;
	return 0;
}

int pmc_cli_build_req(const struct pmc_cli_args *a, struct pmc_ctl_req *req, struct pmc_err *err)
{
	memset(req, 0, sizeof(*req));
	if (a->volume)
		snprintf(req->volume, sizeof(req->volume), "%s", a->volume);
	switch (a->cmd) {
	case PMC_CLI_STATUS:
		req->cmd = PMC_CTL_STATUS;
		break;
	case PMC_CLI_STATS:
		req->cmd = PMC_CTL_STATS;
		break;
	case PMC_CLI_VOLUME_LIST:
		req->cmd = PMC_CTL_VOLUME_LIST;
		req->volume[0] = '\0';
		break;
	case PMC_CLI_FLUSH:
		req->cmd = PMC_CTL_FLUSH;
		break;
	case PMC_CLI_SHUTDOWN:
		req->cmd = PMC_CTL_SHUTDOWN;
		req->remove_devices = a->remove_devices;
		break;
	case PMC_CLI_VOLUME_RECONNECT:
	case PMC_CLI_VOLUME_CLEAR_ERROR:
		req->cmd = a->cmd == PMC_CLI_VOLUME_RECONNECT ? PMC_CTL_VOLUME_RECONNECT
							       : PMC_CTL_VOLUME_CLEAR_ERROR;
		if (pmc_config_name_check(a->pos[0], "volume", err))
			return -EINVAL;
		snprintf(req->volume, sizeof(req->volume), "%s", a->pos[0]);
		break;
	case PMC_CLI_VOLUME_REMOVE:
		req->cmd = PMC_CTL_VOLUME_REMOVE;
		snprintf(req->volume, sizeof(req->volume), "%s", a->pos[0]);
		req->force = a->force;
		break;
	case PMC_CLI_VOLUME_ADD: {
		struct pmc_config_volume *v = &req->add;

		req->cmd = PMC_CTL_VOLUME_ADD;
		req->volume[0] = '\0';
		pmc_config_volume_default(v);
		if (pmc_config_name_check(a->pos[0], "volume", err))
			return -EINVAL;
		snprintf(v->name, sizeof(v->name), "%s", a->pos[0]);
		/* "nvmf": an NVMe-oF namespace, named by the disk.* options */
		if (strcmp(a->pos[1], "nvmf") &&
		    (a->pos[1][0] != '/' || strlen(a->pos[1]) > PMC_VOLUME_DISK_MAX))
			return pmc_err_set(err, EINVAL,
					   "%s: the disk must be an absolute path of at most %u "
					   "bytes, or nvmf",
					   a->pos[1], PMC_VOLUME_DISK_MAX);
		if (strcmp(a->pos[1], "nvmf"))
			snprintf(v->disk, sizeof(v->disk), "%s", a->pos[1]);
		if (a->discard_dirty && !a->replace_disk)
			return pmc_err_set(err, EINVAL, "--discard-dirty: only with --replace-disk");
		req->replace_disk = a->replace_disk;
		req->discard_dirty = a->discard_dirty;
		for (int p = 2; p < a->npos; p++) {
			const char *eq = strchr(a->pos[p], '=');
			const struct pmc_config_key *k;
			struct pmc_config_value val = {.kind = PMC_CONFIG_V_STRING};
			char name[64], where[80];
			char *endp;

			if (!eq || eq == a->pos[p] || (size_t)(eq - a->pos[p]) >= sizeof(name))
				return pmc_err_set(err, EINVAL, "%s: expected KEY=VALUE", a->pos[p]);
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a->pos[p]), a->pos[p]);
			k = pmc_config_key_find(PMC_CONFIG_SCOPE_VOLUME, name);
			if (!k || !strcmp(name, "name") || !strcmp(name, "disk"))
				return pmc_err_set(err, EINVAL,
						   "%s: not a volume option (mode, admit_after_misses, "
						   "seq_cutoff, nospace, ublk_id, disk.*)",
						   name);
			if (!strncmp(name, "disk.", 5) && strcmp(a->pos[1], "nvmf"))
				return pmc_err_set(err, EINVAL, "%s: only with the disk nvmf", name);
			val.s = eq + 1;
			/* an integer key takes a plain number */
			if (k->type == PMC_CONFIG_T_INT) {
				errno = 0;
				val.i = strtoll(eq + 1, &endp, 10);
				if (eq[1] && !*endp && !errno)
					val.kind = PMC_CONFIG_V_INT;
			}
			snprintf(where, sizeof(where), "volume add %s", name);
			if (pmc_config_key_assign(k, v, &val, where, err))
				return -EINVAL;
		}
		if (!strcmp(a->pos[1], "nvmf") && !pmc_config_volume_is_nvmf(v))
			return pmc_err_set(err, EINVAL,
					   "disk nvmf: name the namespace with disk.transport=tcp "
					   "disk.traddr=ADDR disk.subsysnqn=NQN disk.nsid=N");
		if (pmc_config_volume_check(v, "volume add", err))
			return -EINVAL;
		break;
	}
	case PMC_CLI_SET:
	case PMC_CLI_GET: {
		const struct pmc_config_key *k = NULL;

		req->cmd = a->cmd == PMC_CLI_SET ? PMC_CTL_SET : PMC_CTL_GET;
		if (find_key(a, a->pos[0], &k, err))
			return -EINVAL;
		req->key = k;
		if (a->cmd == PMC_CLI_SET) {
			struct pmc_config_value val = {.kind = PMC_CONFIG_V_STRING, .s = a->pos[1]};
			char *endp;

			if (!(k->flags & PMC_CONFIG_RUNTIME) ||
			    (k->type != PMC_CONFIG_T_INT && k->type != PMC_CONFIG_T_SIZE &&
			     k->type != PMC_CONFIG_T_WORD))
				return pmc_err_set(err, EPERM,
						   "%s: cannot change at run time; edit the "
						   "configuration file and restart",
						   k->key);
			if (k->type == PMC_CONFIG_T_INT) {
				errno = 0;
				val.i = strtoll(a->pos[1], &endp, 10);
				if (a->pos[1][0] && !*endp && !errno)
					val.kind = PMC_CONFIG_V_INT;
			}
			if (pmc_config_key_parse(k, &val, k->key, &req->value, err))
				return -EINVAL;
		}
		break;
	}
	default:
		return pmc_err_set(err, EINVAL, "%s: not a daemon command", pmc_cli_cmd_name(a->cmd));
	}
	return 0;
}

int pmc_cli_exit_of(int errnum)
{
	switch (errnum) {
	case 0:
		return PMC_EXIT_OK;
	case ENOENT:
		return PMC_EXIT_NOVOLUME;
	case EBUSY:
		return PMC_EXIT_BUSY;
	case EACCES:
	case EPERM:
	case EROFS:
		return PMC_EXIT_PERM;
	case ECONNREFUSED:
		return PMC_EXIT_NODAEMON;
	case EUCLEAN:
		return PMC_EXIT_CORRUPT;
	case EEXIST:
	default:
		return PMC_EXIT_FAIL;
	}
}
