/* ctlgen.h - random control-protocol lines for the control server's stress
 * tests (tests/ctlsrv/ctlsrv_stress.c on the host, tests/vm/pmc-vm-ctlstress.c
 * in the guest). */
#ifndef PMC_CTLGEN_H
#define PMC_CTLGEN_H

#include <stddef.h>

/*
 * One newline-terminated line into buf (cap bytes): a quarter of the time
 * up to max_raw random bytes (no newline or NUL among them), else up to 23
 * of the pieces joined. Uses random().
 */
void pmc_ctlgen_line(char *buf, size_t cap, const char *const *pieces, size_t npieces,
		     unsigned max_raw);

#endif
