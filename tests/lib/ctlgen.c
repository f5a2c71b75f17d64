/* ctlgen.c - random control-protocol lines (ctlgen.h). */
#include <stdlib.h>
#include <string.h>

#include "ctlgen.h"

void pmc_ctlgen_line(char *buf, size_t cap, const char *const *pieces, size_t npieces,
		     unsigned max_raw)
{
	size_t len = 0;
	int n = (int)(random() % 24);

	if (random() % 4 == 0) {
		/* raw bytes, no newline */
		n = (int)(random() % max_raw);
		for (int i = 0; i < n && len + 2 < cap; i++) {
			char ch = (char)(random() % 256);

			buf[len++] = ch == '\n' || ch == '\0' ? ' ' : ch;
		}
	} else {
		for (int i = 0; i < n; i++) {
			const char *p = pieces[random() % npieces];

			if (len + strlen(p) + 2 >= cap)
				break;
			memcpy(buf + len, p, strlen(p));
			len += strlen(p);
		}
	}
	buf[len++] = '\n';
	buf[len] = '\0';
}
