/* pmc-vm-probe.c - guest side of the vm tests for lib/ublk_probe and
 * lib/nvme_info: runs the library probes on real (emulated) devices and
 * checks them against what the runner set up.
 *
 * usage: pmc-vm-probe ublk [FLAG...]
 *          probe /dev/ublk-control, print the features by name; fail when
 *          the probe fails or a named FLAG (e.g. USER_RECOVERY) is missing
 *        pmc-vm-probe nvme SERIAL:BYTES...
 *          list the NVMe namespaces; fail unless each SERIAL appears exactly
 *          once with exactly BYTES, and no other namespace exists
 * Exit: 0 pass, 1 fail, 2 usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nvme_info.h"
#include "ublk_probe.h"

static int probe_ublk(int argc, char **argv)
{
	struct pmc_err err = {0};
	struct pmc_ublk_features f;
	char names[1024];
	int i, fail = 0, ret;

	ret = pmc_ublk_probe(NULL, &f, &err);
	if (ret) {
		printf("FAIL: ublk probe: %d (%s)\n", ret, err.msg);
		return 1;
	}
	pmc_ublk_flags_str(f.flags, names, sizeof(names));
	printf("ublk: features 0x%" PRIx64 " %s\n", f.flags, names);
	printf("ublk: features from %s (GET_FEATURES result %d)\n",
	       f.flags_probed ? "GET_FEATURES" : "the 6.1 baseline (assumed)", f.get_features_res);
	printf("ublk: ioctl-encoded opcodes %s, legacy opcodes %s\n",
	       f.ioctl_opcodes ? "yes" : "unknown/no", f.legacy_opcodes ? "yes" : "no");
	for (i = 0; i < argc; i++) {
		unsigned bit;

		for (bit = 0; bit < 64; bit++) {
			const char *name = pmc_ublk_flag_name(bit);

			if (name && !strcmp(name, argv[i]))
				break;
		}
		if (bit == 64) {
			printf("FAIL: unknown flag name %s\n", argv[i]);
			fail = 1;
		} else if (!(f.flags & (1ULL << bit))) {
			printf("FAIL: required feature %s (bit %u) missing: have 0x%" PRIx64 "\n",
			       argv[i], bit, f.flags);
			fail = 1;
		} else {
			printf("ublk: has %s\n", argv[i]);
		}
	}
	return fail;
}

static int probe_nvme(int argc, char **argv)
{
	struct pmc_err err = {0};
	struct pmc_nvme_ns *list;
	size_t nr, i;
	int a, fail = 0, ret;

	ret = pmc_nvme_list(&list, &nr, &err);
	if (ret) {
		printf("FAIL: nvme list: %d (%s)\n", ret, err.msg);
		return 1;
	}
	printf("%-10s %-6s %-5s %-4s %-20s %-24s %-8s %12s %5s %s\n", "device", "ctrl", "trans",
	       "nsid", "serial", "model", "firmware", "bytes", "lba", "source");
	for (i = 0; i < nr; i++) {
		const struct pmc_nvme_ns *n = &list[i];

		printf("%-10s %-6s %-5s %-4u %-20s %-24s %-8s %12" PRIu64 " %5u %s\n", n->name,
		       n->ctrl, n->transport, n->nsid, n->serial, n->model, n->firmware,
		       n->size_bytes, n->lba_bytes, n->identified ? "identify" : "sysfs");
		if (!n->identified) {
			printf("FAIL: %s: Identify commands failed, sysfs values used\n", n->path);
			fail = 1;
		}
	}
	for (a = 0; a < argc; a++) {
		char serial[64];
		const char *colon = strchr(argv[a], ':');
		uint64_t want;
		int seen = 0;

		if (!colon || colon == argv[a] || (size_t)(colon - argv[a]) >= sizeof(serial)) {
			printf("FAIL: bad argument %s (want SERIAL:BYTES)\n", argv[a]);
			fail = 1;
			continue;
		}
		memcpy(serial, argv[a], (size_t)(colon - argv[a]));
		serial[colon - argv[a]] = '\0';
		want = strtoull(colon + 1, NULL, 0);
		for (i = 0; i < nr; i++)
			seen += !strcmp(list[i].serial, serial);
		if (seen != 1) {
			printf("FAIL: serial %s: found %d times, expected once\n", serial, seen);
			fail = 1;
			continue;
		}
		const struct pmc_nvme_ns *n = pmc_nvme_find_serial(list, nr, serial);

		if (n->size_bytes != want) {
			printf("FAIL: serial %s (%s): size %" PRIu64 " bytes, expected %" PRIu64 "\n",
			       serial, n->path, n->size_bytes, want);
			fail = 1;
		} else {
			printf("nvme: serial %s is %s, %" PRIu64 " bytes, model '%s', firmware '%s'\n",
			       serial, n->path, n->size_bytes, n->model, n->firmware);
		}
	}
	if ((size_t)argc != nr) {
		printf("FAIL: %zu namespaces found, expected %d\n", nr, argc);
		fail = 1;
	}
	pmc_nvme_list_free(list);
	return fail;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "ublk"))
		return probe_ublk(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "nvme"))
		return probe_nvme(argc - 2, argv + 2);
	fprintf(stderr, "usage: pmc-vm-probe ublk [FLAG...] | nvme SERIAL:BYTES...\n");
	return 2;
}
