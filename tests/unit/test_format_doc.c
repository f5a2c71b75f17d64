/* test_format_doc.c - lib/FORMAT.md agrees with lib/format.h: every row of
 * the superblock, volume slot and descriptor tables names a field whose
 * offset and size match the struct, and every field of the structs has a
 * row. Usage: test_format_doc PATH/TO/FORMAT.md
 */
#include <stddef.h>

#include "format.h"
#include "t.h"

struct field {
	const char *table; /* heading that introduces the table */
	const char *name;
	size_t off, size;
	int seen;
};

#define F(tab, type, f)                                                                            \
	{                                                                                          \
		tab, #f, offsetof(struct type, f), sizeof(((struct type *)0)->f), 0                \
	}

static struct field fields[] = {
	F("## Superblock", pmc_sb, magic), F("## Superblock", pmc_sb, major),
	F("## Superblock", pmc_sb, minor), F("## Superblock", pmc_sb, compat),
	F("## Superblock", pmc_sb, ro_compat), F("## Superblock", pmc_sb, incompat),
	F("## Superblock", pmc_sb, uuid), F("## Superblock", pmc_sb, seq),
	F("## Superblock", pmc_sb, pmem_size), F("## Superblock", pmc_sb, block_size),
	F("## Superblock", pmc_sb, max_volumes), F("## Superblock", pmc_sb, nr_blocks),
	F("## Superblock", pmc_sb, nr_buckets), F("## Superblock", pmc_sb, vol_off),
	F("## Superblock", pmc_sb, desc_off), F("## Superblock", pmc_sb, index_off),
	F("## Superblock", pmc_sb, data_off), F("## Superblock", pmc_sb, boot_epoch),
	F("## Superblock", pmc_sb, clean), F("## Superblock", pmc_sb, lost_epoch),
	F("## Superblock", pmc_sb, format_time_ns), F("## Superblock", pmc_sb, open_time_ns),
	F("## Superblock", pmc_sb, clean_nr_dirty), F("## Superblock", pmc_sb, clean_nr_clean),
	F("## Superblock", pmc_sb, pmem_usc), F("## Superblock", pmc_sb, pmem_id),
	F("## Superblock", pmc_sb, reserved), F("## Superblock", pmc_sb, csum),
	F("## Superblock", pmc_sb, reserved1),
	F("## Volume slot", pmc_vol, gen_state), F("## Volume slot", pmc_vol, size_bytes),
	F("## Volume slot", pmc_vol, add_time_ns), F("## Volume slot", pmc_vol, uuid),
	F("## Volume slot", pmc_vol, name), F("## Volume slot", pmc_vol, disk),
	F("## Volume slot", pmc_vol, disk_bytes), F("## Volume slot", pmc_vol, disk_id),
	F("## Volume slot", pmc_vol, id_csum),
	F("## Volume slot", pmc_vol, csum), F("## Volume slot", pmc_vol, clean_nr_lost),
	F("## Volume slot", pmc_vol, clean_nr_dirty), F("## Volume slot", pmc_vol, clean_nr_clean),
	F("## Block descriptor", pmc_desc, lba), F("## Block descriptor", pmc_desc, vol),
	F("## Block descriptor", pmc_desc, vol_gen), F("## Block descriptor", pmc_desc, birth_ns),
	F("## Block descriptor", pmc_desc, csum), F("## Block descriptor", pmc_desc, reserved0),
	F("## Block descriptor", pmc_desc, state), F("## Block descriptor", pmc_desc, next),
	F("## Block descriptor", pmc_desc, ref), F("## Block descriptor", pmc_desc, hint),
};

int main(int argc, char **argv)
{
	char line[1024], table[1024] = "";
	size_t nf = sizeof(fields) / sizeof(fields[0]), rows = 0;
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: test_format_doc FORMAT.md\n");
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f)
		T_FAIL("cannot open %s", argv[1]);
	while (fgets(line, sizeof(line), f)) {
		unsigned long off, size;
		char name[64];

		if (!strncmp(line, "## ", 3)) {
			snprintf(table, sizeof(table), "%s", line);
			continue;
		}
		if (sscanf(line, "| %lu | %lu | %63[a-z0-9_] |", &off, &size, name) != 3)
			continue;
		if (strncmp(table, "## Superblock", 13) && strncmp(table, "## Volume slot", 14) &&
		    strncmp(table, "## Block descriptor", 19))
			continue;
		size_t i;
		for (i = 0; i < nf; i++)
			if (!strncmp(table, fields[i].table, strlen(fields[i].table)) &&
			    !strcmp(name, fields[i].name))
				break;
		if (i == nf)
			T_FAIL("FORMAT.md row '%s' under '%.40s' names no field of the struct", name,
			       table);
		if (fields[i].off != off || fields[i].size != size)
			T_FAIL("FORMAT.md %s: offset %lu size %lu, struct has offset %zu size %zu",
			       name, off, size, fields[i].off, fields[i].size);
		fields[i].seen++;
		rows++;
	}
	fclose(f);
	for (size_t i = 0; i < nf; i++)
		if (fields[i].seen != 1)
			T_FAIL("field %s (%s) has %d rows in FORMAT.md", fields[i].name,
			       fields[i].table, fields[i].seen);
	printf("PASS test_format_doc: %zu rows agree with format.h\n", rows);
	return 0;
}
