/* ctlsrv.h - the control socket server (protocol: lib/ctl.h). */
#ifndef PMCD_CTLSRV_H
#define PMCD_CTLSRV_H

#include "err.h"

struct pmcd;
struct pmc_config;

int pmcd_ctlsrv_start(struct pmcd *d, struct pmc_err *err);
/* control.group and control.admin_group of c name groups that exist (or
 * are ""): 0, or an error naming the key and the group */
int pmcd_ctlsrv_check_groups(const struct pmc_config *c, struct pmc_err *err);
void pmcd_ctlsrv_stop(struct pmcd *d);

#endif
