/* test_cli_man.c CONF_MAN CTL_MAN PMCACHECTL - the man pages are complete:
 * pmcached.conf(5) names every key of the config table, pmcachectl(8)
 * every subcommand and exit code, and `pmcachectl --help` every
 * subcommand. */
#include <stdio.h>

#include "cli.h"
#include "config.h"
#include "t.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		T_FAIL("%s: cannot open", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	T_TRUE(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	return buf;
}

/* roff writes '-' as "\-" */
static void roffify(const char *s, char *out, size_t len)
{
	size_t o = 0;

	for (; *s && o + 3 < len; s++) {
		if (*s == '-')
			out[o++] = '\\';
		out[o++] = *s;
	}
	out[o] = '\0';
}

/* page has an entry for command c: a line after ".TP" that sets it in
 * bold (".B c", ".BR c ...", ".BI \"c ...") (any stray mention of the word
 * passed before) */
static int tp_entry(const char *page, const char *cmd)
{
	char c[64];
	size_t n;

	roffify(cmd, c, sizeof(c)); /* "clear\-error" as the page has it */
	n = strlen(c);

	for (const char *l = strstr(page, "\n.TP\n"); l; l = strstr(l + 1, "\n.TP\n")) {
		const char *e = l + 5;

		if (!strncmp(e, ".BR ", 4) || !strncmp(e, ".BI ", 4))
			e += 4;
		else if (!strncmp(e, ".B ", 3))
			e += 3;
		else
			continue;
		if (*e == '"')
			e++;
		if (!strncmp(e, c, n) && (e[n] == ' ' || e[n] == '\n' || e[n] == '"'))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {"status",
					   "stats",
					   "volume add",
					   "volume remove",
					   "volume list",
					   "volume reconnect",
					   "volume clear-error",
					   "set",
					   "get",
					   "flush",
					   "shutdown",
					   "check",
					   "format",
					   "dump",
					   "disks",
					   "version"};
	char *conf, *ctl, *help, cmd[512], pat[256];
	FILE *p;
	size_t n;

	if (argc != 4)
		T_FAIL("usage: test_cli_man CONF_MAN CTL_MAN PMCACHECTL");
	conf = slurp(argv[1]);
	ctl = slurp(argv[2]);
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		snprintf(pat, sizeof(pat), ".B ");
		roffify(pmc_config_table[i].key, pat + 3, sizeof(pat) - 3);
		strcat(pat, "\n");
		if (!strstr(conf, pat))
			T_FAIL("pmcached.conf(5) lacks key %s", pmc_config_table[i].key);
	}
	snprintf(cmd, sizeof(cmd), "%s --help", argv[3]);
	p = popen(cmd, "r");
	T_TRUE(p);
	help = calloc(1, 65536);
	n = fread(help, 1, 65535, p);
	T_EQ(pclose(p), 0);
	T_TRUE(n > 0);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *c = cmds[i], *sp = strchr(c, ' ');

		if (!strstr(help, c))
			T_FAIL("--help lacks %s", c);
		(void)sp;
		if (!tp_entry(ctl, c))
			T_FAIL("pmcachectl(8) has no entry (.TP, then .B/.BR/.BI %s) for %s", c, c);
	}
	for (int e = 0; e <= 8; e++) {
		snprintf(pat, sizeof(pat), ".B %d\n", e);
		if (!strstr(ctl, pat))
			T_FAIL("pmcachectl(8) does not document exit code %d", e);
	}
	puts("test_cli_man: ok");
	free(conf);
	free(ctl);
	free(help);
	return 0;
}
