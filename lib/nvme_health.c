/* nvme_health.c - the SMART log of an NVMe controller via libnvme's
 * nvme_get_log_smart() (nsid 0xffffffff: the controller as a whole).
 * Kept apart from nvme_info.c, which identifies; this reads health.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libnvme.h>

#include "nvme_health.h"

/* a 128-bit little-endian counter, saturated to 64 bits */
static uint64_t le128(const uint8_t *p)
{
	uint64_t lo = 0;

	for (int i = 15; i >= 8; i--)
		if (p[i])
			return UINT64_MAX;
	for (int i = 7; i >= 0; i--)
		lo = lo << 8 | p[i];
	return lo;
}

int pmc_nvme_health_read(const char *path, struct pmc_nvme_health *out, struct pmc_err *err)
{
	struct nvme_smart_log log;
	int fd, ret;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pmc_err_set(err, errno, "%s: %s", path, strerror(errno));
	memset(&log, 0, sizeof(log));
	ret = nvme_get_log_smart(fd, NVME_NSID_ALL, false, &log);
	close(fd);
	if (ret < 0)
		return pmc_err_set(err, errno ? errno : EIO, "%s: SMART log: %s", path,
				   strerror(errno ? errno : EIO));
	if (ret > 0)
		return pmc_err_set(err, EIO, "%s: SMART log: NVMe status 0x%x", path, ret);
	out->critical_warning = log.critical_warning;
	out->temperature_c = (int)(log.temperature[0] | log.temperature[1] << 8) - 273;
	out->avail_spare_pct = log.avail_spare;
	out->spare_thresh_pct = log.spare_thresh;
	out->percent_used = log.percent_used;
	out->media_errors = le128(log.media_errors);
	out->power_on_hours = le128(log.power_on_hours);
	out->unsafe_shutdowns = le128(log.unsafe_shutdowns);
	out->power_cycles = le128(log.power_cycles);
	out->data_units_written = le128(log.data_units_written);
	return 0;
}

void pmc_nvme_crit_text(uint8_t cw, char *buf, unsigned len)
{
	static const char *const bits[] = {"spare",	"temperature", "reliability", "read-only",
					   "volatile-backup", "pmr-read-only"};
	size_t off = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (!cw) {
		snprintf(buf, len, "none");
		return;
	}
	for (unsigned b = 0; b < 8; b++) {
		int n;

		if (!(cw & (1u << b)))
			continue;
		n = snprintf(buf + off, off < len ? len - off : 0, "%s%s", off ? "," : "",
			     b < 6 ? bits[b] : "bit");
		if (n > 0)
			off += (size_t)n;
	}
}
