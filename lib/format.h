/* format.h - on-pmem format v1.1: every on-media struct, with the offsets
 * lib/FORMAT.md documents. Fixed-width little-endian fields, explicit
 * padding, reserved bytes zero; no bool, enum, pointer, size_t or
 * bit-field. Change this file and FORMAT.md in the same commit.
 */
#ifndef PMC_FORMAT_H
#define PMC_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pmcache stores little-endian fields and is built for little-endian hosts only"
#endif

#define PMC_SB_MAGIC 0x3165686361636d70ull /* the bytes "pmcache1" */
#define PMC_FORMAT_MAJOR 1u
#define PMC_FORMAT_MINOR 1u

/* feature masks. 1.1 adds two read-only compatible features: a build that
 * does not know them must not write the cache (it would store volume slots
 * without a disk identity, or free quarantined blocks); a 1.0 build cannot
 * read it correctly either (the volume slot checksum moved in 1.1: its
 * check calls every slot's checksum bad), so its offline tools' verdict on
 * a 1.1 cache means nothing */
#define PMC_FEAT_RO_COMPAT_DISK_ID (UINT64_C(1) << 0)    /* volume slot layout 1.1 */
#define PMC_FEAT_RO_COMPAT_QUARANTINE (UINT64_C(1) << 1) /* LOST and BAD blocks */
#define PMC_FEAT_COMPAT_KNOWN UINT64_C(0)
#define PMC_FEAT_RO_COMPAT_KNOWN (PMC_FEAT_RO_COMPAT_DISK_ID | PMC_FEAT_RO_COMPAT_QUARANTINE)
#define PMC_FEAT_INCOMPAT_KNOWN UINT64_C(0)

/* region map */
#define PMC_SB_COPIES 2u
#define PMC_SB_SLOT 4096u	   /* bytes reserved per superblock copy */
#define PMC_VOL_OFF 8192u	   /* volume table after the two copies */
#define PMC_META_ALIGN 4096u	   /* volume table, descriptors, index */
#define PMC_DATA_ALIGN (2u << 20) /* data area: 2 MiB (devdax mapping unit) */

/* superblock: copy i at i * PMC_SB_SLOT; the rest of the slot is zero */
struct pmc_sb {
	uint64_t magic;		 /*   0 PMC_SB_MAGIC */
	uint32_t major;		 /*   8 format major version */
	uint32_t minor;		 /*  12 format minor version */
	uint64_t compat;	 /*  16 compatible features */
	uint64_t ro_compat;	 /*  24 read-only compatible features */
	uint64_t incompat;	 /*  32 incompatible features */
	uint8_t uuid[16];	 /*  40 cache uuid, same in both copies */
	uint64_t seq;		 /*  56 write sequence; newest valid copy wins */
	uint64_t pmem_size;	 /*  64 bytes of pmem at format */
	uint32_t block_size;	 /*  72 bytes per cache block */
	uint32_t max_volumes;	 /*  76 slots in the volume table */
	uint64_t nr_blocks;	 /*  80 descriptors = data blocks */
	uint64_t nr_buckets;	 /*  88 index buckets, power of two */
	uint64_t vol_off;	 /*  96 bytes from pmem start */
	uint64_t desc_off;	 /* 104 */
	uint64_t index_off;	 /* 112 */
	uint64_t data_off;	 /* 120 multiple of PMC_DATA_ALIGN */
	uint64_t boot_epoch;	 /* 128 bumped by every read-write open */
	uint32_t clean;		 /* 136 1: closed cleanly, counters valid */
	uint32_t lost_epoch;	 /* 140 low 32 bits of boot_epoch when clean_nr_lost was kept */
	uint64_t format_time_ns; /* 144 CLOCK_REALTIME at format */
	uint64_t open_time_ns;	 /* 152 CLOCK_REALTIME at the last open/close */
	uint64_t clean_nr_dirty; /* 160 linked dirty blocks at clean close */
	uint64_t clean_nr_clean; /* 168 linked clean blocks at clean close */
	uint64_t pmem_usc;	 /* 176 unsafe shutdown count at the last open (1.1) */
	char pmem_id[64];	 /* 184 device id of the namespace, NUL-padded; "" none (1.1) */
	uint8_t reserved[256];	 /* 248 zero */
	uint32_t csum;		 /* 504 crc32 of bytes 0..503 */
	uint32_t reserved1;	 /* 508 zero */
};

#define PMC_VOL_FREE 0u
#define PMC_VOL_ACTIVE 1u
#define PMC_VOL_STATE(gs) ((uint32_t)((gs) & 0xff))
#define PMC_VOL_GEN(gs) ((gs) >> 8)
#define PMC_VOL_GS(gen, state) (((uint64_t)(gen) << 8) | (state))

/* volume table slot */
struct pmc_vol {
	uint64_t gen_state;	 /*   0 bits 0-7 state, 8-63 generation */
	uint64_t size_bytes;	 /*   8 backing volume size */
	uint64_t add_time_ns;	 /*  16 CLOCK_REALTIME at add */
	uint8_t uuid[16];	 /*  24 volume uuid */
	char name[64];		 /*  40 NUL-terminated, NUL-padded */
	char disk[64];		 /* 104 backing disk as configured, NUL-padded; 64
				  * bytes without a NUL: truncated (1.0: 128 bytes) */
	/* 1.1: the backing disk's identity; all zero = not recorded */
	uint64_t disk_bytes;	 /* 168 size of the disk when recorded */
	char disk_id[52];	 /* 176 identity text, NUL-terminated (diskid.c) */
	uint32_t id_csum;	 /* 228 crc32 of bytes 168..227 */
	uint32_t csum;		 /* 232 crc32 of bytes 8..167 (1.0: 8..231) */
	uint32_t clean_nr_lost;	 /* 236 at clean close; valid if sb.clean (1.0: 0) */
	uint64_t clean_nr_dirty; /* 240 at clean close; valid if sb.clean */
	uint64_t clean_nr_clean; /* 248 at clean close; valid if sb.clean */
};

/* block descriptor, one per data block; one cache line */
struct pmc_desc {
	uint64_t lba;	   /*  0 block number within the volume */
	uint32_t vol;	   /*  8 volume slot */
	uint32_t vol_gen;  /* 12 low 32 bits of the slot generation */
	uint64_t birth_ns; /* 16 CLOCK_REALTIME when the contents were stored */
	uint32_t csum;	   /* 24 crc32 of bytes 0..23 */
	uint32_t reserved0; /* 28 zero */
	uint64_t state;	   /* 32 bits 0-7 PMC_BLK_*, rest zero */
	uint64_t next;	   /* 40 next block in the bucket chain + 1; 0 ends */
	uint64_t ref;	   /* 48 volatile: bits 32-63 boot epoch, 0-31 pins */
	uint64_t hint;	   /* 56 volatile: bit 0 CLOCK reference */
};

/* index bucket: head of a chain, block + 1; 0 is empty */
typedef uint64_t pmc_bucket_t;

#define PMC_REF_EPOCH(r) ((uint32_t)((r) >> 32))
#define PMC_REF_PINS(r) ((uint32_t)(r))
/* pins are bounded by the requests in flight; a count this large can only
 * be a word damaged outside this boot, and counts as no pin */
#define PMC_REF_PINS_BOGUS (1u << 31)
#define PMC_REF(epoch, pins) (((uint64_t)(uint32_t)(epoch) << 32) | (uint32_t)(pins))
#define PMC_HINT_REFERENCED 1ull

#define PMC_ASSERT_OFF(type, field, off) \
	_Static_assert(offsetof(struct type, field) == (off), #type "." #field " offset")

_Static_assert(sizeof(struct pmc_sb) == 512, "pmc_sb size");
PMC_ASSERT_OFF(pmc_sb, magic, 0);
PMC_ASSERT_OFF(pmc_sb, major, 8);
PMC_ASSERT_OFF(pmc_sb, minor, 12);
PMC_ASSERT_OFF(pmc_sb, compat, 16);
PMC_ASSERT_OFF(pmc_sb, ro_compat, 24);
PMC_ASSERT_OFF(pmc_sb, incompat, 32);
PMC_ASSERT_OFF(pmc_sb, uuid, 40);
PMC_ASSERT_OFF(pmc_sb, seq, 56);
PMC_ASSERT_OFF(pmc_sb, pmem_size, 64);
PMC_ASSERT_OFF(pmc_sb, block_size, 72);
PMC_ASSERT_OFF(pmc_sb, max_volumes, 76);
PMC_ASSERT_OFF(pmc_sb, nr_blocks, 80);
PMC_ASSERT_OFF(pmc_sb, nr_buckets, 88);
PMC_ASSERT_OFF(pmc_sb, vol_off, 96);
PMC_ASSERT_OFF(pmc_sb, desc_off, 104);
PMC_ASSERT_OFF(pmc_sb, index_off, 112);
PMC_ASSERT_OFF(pmc_sb, data_off, 120);
PMC_ASSERT_OFF(pmc_sb, boot_epoch, 128);
PMC_ASSERT_OFF(pmc_sb, clean, 136);
PMC_ASSERT_OFF(pmc_sb, lost_epoch, 140);
PMC_ASSERT_OFF(pmc_sb, format_time_ns, 144);
PMC_ASSERT_OFF(pmc_sb, open_time_ns, 152);
PMC_ASSERT_OFF(pmc_sb, clean_nr_dirty, 160);
PMC_ASSERT_OFF(pmc_sb, clean_nr_clean, 168);
PMC_ASSERT_OFF(pmc_sb, pmem_usc, 176);
PMC_ASSERT_OFF(pmc_sb, pmem_id, 184);
PMC_ASSERT_OFF(pmc_sb, reserved, 248);
PMC_ASSERT_OFF(pmc_sb, csum, 504);
PMC_ASSERT_OFF(pmc_sb, reserved1, 508);

_Static_assert(sizeof(struct pmc_vol) == 256, "pmc_vol size");
PMC_ASSERT_OFF(pmc_vol, gen_state, 0);
PMC_ASSERT_OFF(pmc_vol, size_bytes, 8);
PMC_ASSERT_OFF(pmc_vol, add_time_ns, 16);
PMC_ASSERT_OFF(pmc_vol, uuid, 24);
PMC_ASSERT_OFF(pmc_vol, name, 40);
PMC_ASSERT_OFF(pmc_vol, disk, 104);
PMC_ASSERT_OFF(pmc_vol, disk_bytes, 168);
PMC_ASSERT_OFF(pmc_vol, disk_id, 176);
PMC_ASSERT_OFF(pmc_vol, id_csum, 228);
PMC_ASSERT_OFF(pmc_vol, csum, 232);
PMC_ASSERT_OFF(pmc_vol, clean_nr_lost, 236);
PMC_ASSERT_OFF(pmc_vol, clean_nr_dirty, 240);
PMC_ASSERT_OFF(pmc_vol, clean_nr_clean, 248);

_Static_assert(sizeof(struct pmc_desc) == 64, "pmc_desc size");
PMC_ASSERT_OFF(pmc_desc, lba, 0);
PMC_ASSERT_OFF(pmc_desc, vol, 8);
PMC_ASSERT_OFF(pmc_desc, vol_gen, 12);
PMC_ASSERT_OFF(pmc_desc, birth_ns, 16);
PMC_ASSERT_OFF(pmc_desc, csum, 24);
PMC_ASSERT_OFF(pmc_desc, reserved0, 28);
PMC_ASSERT_OFF(pmc_desc, state, 32);
PMC_ASSERT_OFF(pmc_desc, next, 40);
PMC_ASSERT_OFF(pmc_desc, ref, 48);
PMC_ASSERT_OFF(pmc_desc, hint, 56);

_Static_assert(sizeof(pmc_bucket_t) == 8, "bucket size");
_Static_assert(2 * PMC_SB_SLOT <= PMC_VOL_OFF, "superblocks overlap the volume table");

/* crc32 of a superblock copy up to its csum field (lib/super.c) */
uint32_t pmc_sb_csum(const struct pmc_sb *sb);

#endif
