/* test_cli_args.c - pmcachectl's command line: every command parses, bad
 * input is refused with one clear line, requests carry what was asked. */
#include <errno.h>
#include <stdarg.h>

#include "cli.h"
#include "config.h"
#include "t.h"

static int parse(struct pmc_cli_args *a, struct pmc_err *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	char *s;

	va_start(ap, err);
	while ((s = va_arg(ap, char *)) && argc < 32)
		argv[argc++] = s;
	va_end(ap);
	return pmc_cli_parse(argc, argv, a, err);
}
#define P(...) parse(&a, &err, __VA_ARGS__, (char *)NULL)

int main(void)
{
	struct pmc_cli_args a;
	struct pmc_err err;
	struct pmc_ctl_req req;

	T_OK(P("status"));
	T_EQ(a.cmd, PMC_CLI_STATUS);
	T_TRUE(!a.json);
	T_OK(P("--json", "status"));
	T_TRUE(a.json);
	T_OK(P("status", "-j", "-s", "/tmp/x.sock"));
	T_TRUE(a.json && !strcmp(a.socket, "/tmp/x.sock"));
	T_OK(P("--socket=/tmp/y.sock", "volume", "list"));
	T_EQ(a.cmd, PMC_CLI_VOLUME_LIST);
	T_TRUE(!strcmp(a.socket, "/tmp/y.sock"));

	/* --timeout: 30 s unless given; 0 waits forever */
	T_TRUE(a.timeout_s == PMC_CLI_TIMEOUT_S);
	T_OK(P("--timeout", "2.5", "status"));
	T_TRUE(a.timeout_s == 2.5);
	T_OK(P("status", "-t", "0"));
	T_TRUE(a.timeout_s == 0);
	T_OK(P("--timeout=600", "flush"));
	T_TRUE(a.timeout_s == 600);
	T_ERR(P("--timeout", "-1", "status"), EINVAL, "--timeout: expects seconds");
	T_ERR(P("--timeout=0.01", "status"), EINVAL, "--timeout: expects seconds");
	T_ERR(P("--timeout=1e9", "status"), EINVAL, "--timeout: expects seconds");
	T_ERR(P("status", "--timeout"), EINVAL, "needs a value");

	T_OK(P("stats", "vol0", "--watch=0.5", "-n", "3"));
	T_EQ(a.cmd, PMC_CLI_STATS);
	T_TRUE(a.watch && a.interval_s == 0.5 && a.count == 3 && !strcmp(a.volume, "vol0"));
	T_OK(P("stats", "--prometheus"));
	T_TRUE(a.prometheus && !a.volume);
	T_ERR(P("stats", "--prometheus", "--json"), EINVAL, "exclude");
	T_ERR(P("status", "--watch"), EINVAL, "only for stats");
	/* a pace without --watch would be ignored: refused, named */
	T_ERR(P("stats", "-n", "3"), EINVAL, "-n: only with stats --watch");
	T_ERR(P("stats", "--interval=2"), EINVAL, "--interval: only with stats --watch");
	T_ERR(P("stats", "vol0", "-i", "2"), EINVAL, "-i: only with stats --watch");
	T_OK(P("stats", "-i", "2", "--watch"));
	T_TRUE(a.watch && a.interval_s == 2);
	T_ERR(P("stats", "--watch=0"), EINVAL, "seconds");
	T_ERR(P("stats", "a", "b"), EINVAL, "expects 0 to 1");
	/* one word more than the array of arguments holds (it was written
	 * past its end before the count was checked) */
	T_ERR(P("status", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14",
		"15", "16", "17"),
	      EINVAL, "status: 17 arguments given, expects 0 to 0");
	T_ERR(P("stats", "bad/name"), EINVAL, "volume");

	T_OK(P("volume", "add", "v1", "/dev/nvme0n1", "mode=write-through", "seq_cutoff=1M",
	       "ublk_id=7"));
	T_EQ(a.cmd, PMC_CLI_VOLUME_ADD);
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_EQ(req.cmd, PMC_CTL_VOLUME_ADD);
	T_TRUE(!strcmp(req.add.name, "v1") && !strcmp(req.add.disk, "/dev/nvme0n1"));
	T_EQ(req.add.ublk_id, 7);
	T_EQ(req.add.vc.seq_cutoff_bytes, 1u << 20);
	{
		char *line = pmc_ctl_encode_req(&req);

		T_TRUE(line && strstr(line, "\"mode\":\"write-through\""));
		printf("ok: %s", line);
		free(line);
	}
	T_OK(P("volume", "add", "v1", "/dev/x", "mode=fast"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "mode");
	T_OK(P("volume", "add", "v1", "/dev/x", "colour=red"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "not a volume option");
	T_OK(P("volume", "add", "v1", "dev/x"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "absolute");
	T_ERR(P("volume", "add", "v1"), EINVAL, "expects 2 to");
	T_ERR(P("volume"), EINVAL, "add, remove, list, reconnect or clear-error");
	T_ERR(P("volume", "rename"), EINVAL, "add, remove, list, reconnect or clear-error");

	/* an NVMe-oF namespace: DISK nvmf and the disk.* keys */
	T_OK(P("volume", "add", "net", "nvmf", "disk.transport=tcp", "disk.traddr=10.0.0.2",
	       "disk.subsysnqn=nqn.2014-08.org.example:d", "disk.nsid=3", "disk.ctrl_loss_tmo=-1"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(pmc_config_volume_is_nvmf(&req.add) && !req.add.disk[0]);
	T_EQ(req.add.nvmf.nsid, 3u);
	T_EQ(req.add.nvmf.ctrl_loss_tmo, -1);
	{
		char *line = pmc_ctl_encode_req(&req);

		T_TRUE(line && strstr(line, "\"disk.traddr\":\"10.0.0.2\"") &&
		       !strstr(line, "\"disk\":"));
		printf("ok: %s", line);
		free(line);
	}
	T_OK(P("volume", "add", "net", "nvmf", "disk.transport=tcp",
	       "disk.subsysnqn=nqn.2014-08.x:d", "disk.nsid=1"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL,
	      "volume add: volume \"net\" disk.traddr: missing (required for transport tcp)");
	T_OK(P("volume", "add", "net", "nvmf"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "disk nvmf: name the namespace");
	T_OK(P("volume", "add", "net", "/dev/x", "disk.traddr=10.0.0.2"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "disk.traddr: only with the disk nvmf");
	T_OK(P("volume", "reconnect", "net"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(req.cmd == PMC_CTL_VOLUME_RECONNECT && !strcmp(req.volume, "net"));
	T_ERR(P("volume", "reconnect"), EINVAL, "expects 1");
	T_OK(P("volume", "clear-error", "v0"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(req.cmd == PMC_CTL_VOLUME_CLEAR_ERROR && !strcmp(req.volume, "v0"));
	T_ERR(P("volume", "clear-error"), EINVAL, "expects 1");
	T_ERR(P("volume", "clear-error", "a", "b"), EINVAL, "expects 1");
	T_OK(P("volume", "clear-error", "bad/name"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "volume");

	T_OK(P("volume", "remove", "v1", "--force"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_EQ(req.cmd, PMC_CTL_VOLUME_REMOVE);
	T_TRUE(req.force && !strcmp(req.volume, "v1"));

	T_OK(P("shutdown"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(req.cmd == PMC_CTL_SHUTDOWN && !req.remove_devices);
	T_OK(P("shutdown", "--remove-devices"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(req.cmd == PMC_CTL_SHUTDOWN && req.remove_devices);
	T_ERR(P("status", "--remove-devices"), EINVAL, "--remove-devices: only for shutdown");
	T_ERR(P("shutdown", "now"), EINVAL, "expects 0 to 0");

	T_OK(P("set", "-v", "vol0", "mode", "write-around"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_EQ(req.cmd, PMC_CTL_SET);
	T_TRUE(!strcmp(req.key->key, "mode") && !strcmp(req.volume, "vol0"));
	T_OK(P("set", "writeback.max_io", "2M"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_EQ(req.value, 2 << 20);
	T_OK(P("set", "writeback.high_pct", "60"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_EQ(req.value, 60);
	T_OK(P("set", "writeback.high_pct", "160"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "maximum");
	T_OK(P("set", "mode", "write-back"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "-v VOLUME");
	T_OK(P("set", "-v", "vol0", "writeback.high_pct", "50"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "global key");
	T_OK(P("set", "no.such", "1"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "no such key");
	T_OK(P("set", "pmem.path", "/dev/dax1.0"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EPERM, "run time");
	T_OK(P("set", "pmem.block_size", "8K"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EPERM, "run time");
	T_OK(P("get", "log.level"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_EQ(req.cmd, PMC_CTL_GET);
	T_OK(P("get", "volumes"));
	T_ERR(pmc_cli_build_req(&a, &req, &err), EINVAL, "no such key");

	T_OK(P("flush"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(req.cmd == PMC_CTL_FLUSH && !req.volume[0]);
	T_OK(P("flush", "vol1"));
	T_OK(pmc_cli_build_req(&a, &req, &err));
	T_TRUE(!strcmp(req.volume, "vol1"));

	T_OK(P("check", "/dev/dax0.0", "--repair"));
	T_TRUE(a.cmd == PMC_CLI_CHECK && a.repair && !strcmp(a.pos[0], "/dev/dax0.0"));
	T_ERR(P("status", "--repair"), EINVAL, "only for check");
	T_OK(P("format", "/tmp/p", "--force", "--block-size", "4K", "--max-volumes=8", "--size",
	       "1G"));
	T_TRUE(a.force && a.block_size == 4096 && a.max_volumes == 8 && a.size == 1ull << 30);
	T_ERR(P("format", "--block-size", "3000"), EINVAL, "only 4K");
	/* a 64K cache was formatted, and pmcached then refused to start on it */
	T_ERR(P("format", "--block-size", "64K"), EINVAL, "only 4K (pmcached serves 4 KiB blocks)");
	T_OK(P("dump", "--all", "--limit", "5"));
	T_TRUE(a.all && a.limit == 5);
	T_OK(P("disks"));
	T_OK(P("version"));
	T_OK(P("--help"));
	T_TRUE(a.help);
	T_OK(P("status", "--help"));
	T_TRUE(a.help);

	T_ERR(P(""), EINVAL, "unknown command");
	T_ERR(P("frobnicate"), EINVAL, "unknown command \"frobnicate\"");
	T_ERR(P("status", "--bogus"), EINVAL, "unknown option --bogus");
	T_ERR(P("status", "-s"), EINVAL, "needs a value");
	T_ERR(P("status", "extra"), EINVAL, "expects 0 to 0");
	{
		char *argv[] = {NULL};

		T_ERR(pmc_cli_parse(0, argv, &a, &err), EINVAL, "no command");
	}

	T_EQ(pmc_cli_exit_of(ENOENT), PMC_EXIT_NOVOLUME);
	T_EQ(pmc_cli_exit_of(EBUSY), PMC_EXIT_BUSY);
	T_EQ(pmc_cli_exit_of(EACCES), PMC_EXIT_PERM);
	T_EQ(pmc_cli_exit_of(ECONNREFUSED), PMC_EXIT_NODAEMON);
	T_EQ(pmc_cli_exit_of(EIO), PMC_EXIT_FAIL);
	puts("test_cli_args: ok");
	return 0;
}
