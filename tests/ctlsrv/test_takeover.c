/* test_takeover.c - which device left quiesced a restarted pmcached takes
 * over (daemon/dev.c, pmcd_takeover_mismatch): only one whose record names
 * the volume, its size and its disk; the disk as the slot records it now,
 * or as it recorded it before this attach moved an older pmcached's form
 * to the current one (lib/diskid.h): a restart into a newer pmcached that
 * upgrades a volume's identity must still take over the device a mounted
 * file system waits on. Anything else is left alone, with the reason.
 */
#include <stdint.h>
#include <string.h>

#include "dev.h"
#include "t.h"

#define GIB (1ull << 30)

int main(void)
{
	const char *uuid = "nvme.uuid-6f0b1a52-1c1e-4e0e-9d0c-2f3b5f0e7a11";
	const char *sn = "nvme.sn-pmcnvmf0002-ns1";
	struct pmcd_dev_conf c;
	char why[200];

	memset(&c, 0, sizeof(c));
	c.name = "db";
	c.size = GIB;
	c.disk_id = uuid;
	T_EQ(pmcd_takeover_mismatch(&c, "db", GIB, uuid, why, sizeof(why)), 0);
	/* another volume, size or disk: left alone, said why */
	T_EQ(pmcd_takeover_mismatch(&c, "logs", GIB, uuid, why, sizeof(why)), 1);
	T_TRUE(strstr(why, "it served volume logs") != NULL);
	T_EQ(pmcd_takeover_mismatch(&c, "db", 2 * GIB, uuid, why, sizeof(why)), 1);
	T_TRUE(strstr(why, "bytes, the volume is") != NULL);
	T_EQ(pmcd_takeover_mismatch(&c, "db", GIB, sn, why, sizeof(why)), 1);
	T_TRUE(strstr(why, sn) && strstr(why, uuid));
	T_EQ(pmcd_takeover_mismatch(&c, "db", GIB, "", why, sizeof(why)), 1);
	/* the attach moved the slot from the older form: the device the older
	 * process made (its record has that form) is the volume's */
	c.disk_id_was = sn;
	T_EQ(pmcd_takeover_mismatch(&c, "db", GIB, sn, why, sizeof(why)), 0);
	T_EQ(pmcd_takeover_mismatch(&c, "db", GIB, uuid, why, sizeof(why)), 0);
	T_EQ(pmcd_takeover_mismatch(&c, "db", GIB, "nvme.sn-pmcnvmf0002-ns2", why, sizeof(why)),
	     1);
	T_EQ(pmcd_takeover_mismatch(&c, "logs", GIB, sn, why, sizeof(why)), 1);
	printf("ok: takeover: volume, size and disk, also as recorded before an identity upgrade\n");
	return 0;
}
