/* signature.c - see signature.h */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkid.h>

#include "format.h"
#include "poison.h"
#include "signature.h"

/* the first signature blkid finds in fd (or a copy of the mapping), or "" */
static int blkid_sig(blkid_probe pr, char *what, size_t len)
{
	const char *type = NULL, *usage = NULL;
	int rc;

	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	rc = blkid_do_safeprobe(pr);
	if (rc == -2) {
		snprintf(what, len, "more than one signature (ambivalent)");
		return 1;
	}
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (!blkid_probe_lookup_value(pr, "TYPE", &type, NULL)) {
		blkid_probe_lookup_value(pr, "USAGE", &usage, NULL);
		snprintf(what, len, "a signature of %s (%s)", type, usage ? usage : "known");
		return 1;
	}
	if (!blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL)) {
		snprintf(what, len, "a %s partition table", type);
		return 1;
	}
	return 0;
}

/* a devdax device cannot be read(), so its head is copied to a memfd */
int pmc_pmem_signature(const char *path, const struct pmc_pmem *pm, char *what, size_t len)
{
	blkid_probe pr;
	struct stat st;
	int found;

	if (pm->size >= 2 * PMC_SB_SLOT) {
		/* read through the poison guard: a media error there must be
		 * a refusal naming it, not a SIGBUS */
		int magic = 0, unreadable = 0;

		pmc_poison_init();
		for (unsigned i = 0; i < 2; i++) {
			uint64_t m;

			if (pmc_poison_copy(&m, pm->base + (size_t)i * PMC_SB_SLOT, sizeof(m)))
				unreadable = 1;
			else if (m == PMC_SB_MAGIC)
				magic = 1;
		}
		if (magic || unreadable) {
			snprintf(what, len, "%s",
				 magic ? "a pmcache superblock"
				       : "a superblock area that cannot be read (media error)");
			return 1;
		}
	}
	if (stat(path, &st) == 0 && !S_ISCHR(st.st_mode)) {
		pr = blkid_new_probe_from_filename(path);
		if (!pr)
			return -errno ? -errno : -EIO;
		found = blkid_sig(pr, what, len);
		blkid_free_probe(pr);
	} else {
		/* 64 MiB covers the superblocks of every file system blkid knows
		 * at the head of a device; the tail ones are copied too */
		uint64_t head = pm->size < (64u << 20) ? pm->size : (64u << 20);
		uint64_t tail = pm->size > head ? (pm->size - head < (1u << 20) ? pm->size - head
									 : (1u << 20))
						: 0;
		int fd = memfd_create("pmcachectl-probe", MFD_CLOEXEC);

		if (fd < 0)
			return -errno;
		if (ftruncate(fd, (off_t)pm->size) ||
		    pwrite(fd, pm->base, head, 0) != (ssize_t)head ||
		    (tail && pwrite(fd, pm->base + pm->size - tail, tail,
				    (off_t)(pm->size - tail)) != (ssize_t)tail)) {
			close(fd);
			return -EIO;
		}
		pr = blkid_new_probe();
		if (!pr || blkid_probe_set_device(pr, fd, 0, (blkid_loff_t)pm->size)) {
			if (pr)
				blkid_free_probe(pr);
			close(fd);
			return -EIO;
		}
		found = blkid_sig(pr, what, len);
		blkid_free_probe(pr);
		close(fd);
	}
	return found < 0 ? -EIO : found;
}
