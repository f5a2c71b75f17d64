/* err.c - see err.h. Owns nothing but the formatting of messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

int pmc_err_set(struct pmc_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (code < 0)
		code = -code;
	if (err && err->code == 0) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -code;
}

void pmc_err_clear(struct pmc_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
