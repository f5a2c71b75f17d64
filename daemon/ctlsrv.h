/* ctlsrv.h - the control socket server (protocol: lib/ctl.h). */
#ifndef PMCD_CTLSRV_H
#define PMCD_CTLSRV_H

#include "err.h"

struct pmcd;

int pmcd_ctlsrv_start(struct pmcd *d, struct pmc_err *err);
void pmcd_ctlsrv_stop(struct pmcd *d);

#endif
