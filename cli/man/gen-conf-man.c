/* gen-conf-man.c - build-time generator of pmcached.conf(5): copies the
 * template and replaces the lines @KEYS@ and @VOLUME_KEYS@ with one entry
 * per key of pmc_config_table (name, doc line, default, range, whether it
 * can change at run time), so the man page cannot miss a key.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"

/* text for roff: backslashes escaped, no line starting with . or ' */
static void roff(const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", stdout);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", stdout);
		else if (*s == '-')
			fputs("\\-", stdout);
		else
			putchar(*s);
	}
}

static void keys(enum pmc_config_scope scope)
{
	for (size_t i = 0; i < pmc_config_table_len; i++) {
		const struct pmc_config_key *k = &pmc_config_table[i];
		char desc[256];

		if (k->scope != scope)
			continue;
		pmc_config_key_describe(k, desc, sizeof(desc));
		fputs(".TP\n.B ", stdout);
		roff(k->key);
		fputs("\n", stdout);
		roff(k->doc ? k->doc : "");
		fputs("\n.br\n", stdout);
		roff(desc);
		fputs("\n", stdout);
	}
}

int main(int argc, char **argv)
{
	char line[4096];
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: %s TEMPLATE > pmcached.conf.5\n", argv[0]);
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (!strcmp(line, "@KEYS@\n"))
			keys(PMC_CONFIG_SCOPE_TOP);
		else if (!strcmp(line, "@VOLUME_KEYS@\n"))
			keys(PMC_CONFIG_SCOPE_VOLUME);
		else
			fputs(line, stdout);
	}
	fclose(f);
	return 0;
}
