/* nvme_health.h - the SMART / Health Information log page of an NVMe
 * controller (Get Log Page 02h through libnvme), decoded.
 */
#ifndef PMC_NVME_HEALTH_H
#define PMC_NVME_HEALTH_H

#include <stdint.h>

#include "err.h"

struct pmc_nvme_health {
	uint8_t critical_warning; /* bit mask, NVMe 1.4 figure 194; 0 = none */
	int temperature_c;	  /* composite temperature, degrees Celsius */
	uint8_t avail_spare_pct;
	uint8_t spare_thresh_pct;
	uint8_t percent_used;	  /* of the rated endurance; may exceed 100 */
	uint64_t media_errors;	  /* saturated at UINT64_MAX */
	uint64_t power_on_hours;
	uint64_t unsafe_shutdowns;
	uint64_t power_cycles;
	uint64_t data_units_written; /* in 1000 * 512 bytes */
};

/* Read the controller-wide SMART log through path (a controller "/dev/nvme0"
 * or a namespace block device). -errno and err on failure. */
int pmc_nvme_health_read(const char *path, struct pmc_nvme_health *out, struct pmc_err *err);

/* the set bits of critical_warning as words ("spare,temperature"); "none" */
void pmc_nvme_crit_text(uint8_t cw, char *buf, unsigned len);

#endif
