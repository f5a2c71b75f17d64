/* state.h - the volume state file: for each volume, whether the cache may
 * hold dirty data of it. It lives outside the pmem (the daemon keeps it in
 * its state directory) so that, when the pmem cannot be mapped at start,
 * the daemon can tell volumes whose every acknowledged write is on their
 * disk (they may run pass-through) from volumes with writes only in the
 * unreachable pmem (they must refuse to start, by name).
 *
 * The engine marks a volume dirty, durably, before the first write that
 * makes it dirty is acknowledged, and marks it clean only when it has no
 * dirty block and no such write in progress. A volume the file does not
 * name counts as dirty.
 *
 * A clean volume served without the cache (the pmem did not map) is
 * recorded "bypassed" before it is served: its disk then holds data newer
 * than the cache's clean copies, which the next attach through the cache
 * drops (and refuses the volume if the cache holds dirty blocks of it).
 * A volume recorded bypassed may run pass-through as a clean one.
 *
 * A record also names the identity of the volume's disk (diskid.h) once
 * the engine knew it when it wrote the record: without the pmem, a volume
 * is served pass-through only on that disk.
 *
 * File format (text, one record a line):
 *   pmcache-state 2 <cache uuid>
 *   <volume name> dirty|clean|bypassed [<disk identity>]
 * Version 1 (the same records) is read too; 2 is written, so that a
 * pmcached reading version 1 without knowing "bypassed" or the identity
 * (a rollback) refuses the file instead of misreading it.
 * Records are in the order of their last change. At 4096 records a new
 * one replaces the clean record changed longest ago (most likely a volume
 * removed long ago: forgotten, it counts as dirty, which is safe).
 * Updates write a new file, fsync it, rename it over the old one and fsync
 * the directory. Locking: a mutex per state object; calls block on fsync.
 */
#ifndef PMC_STATE_H
#define PMC_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct pmc_state;

/* Read path, or start empty if it does not exist. A file that does not
 * parse is refused with its line number. */
int pmc_state_open(const char *path, struct pmc_state **out, struct pmc_err *err);
void pmc_state_close(struct pmc_state *st);
enum {
	PMC_STATE_CLEAN = 0,
	PMC_STATE_DIRTY = 1,
	PMC_STATE_BYPASSED = 2,
};

/* PMC_STATE_*, or -ENOENT not named (or not known since a save failed
 * after replacing the file: the next pmc_state_set saves again) */
int pmc_state_get(struct pmc_state *st, const char *volume);
/* how many volumes the file records as dirty (or not known), their names
 * in buf ("vol0, vol1"; cut at len) */
unsigned pmc_state_dirty_names(struct pmc_state *st, char *buf, size_t len);
/* value: PMC_STATE_*; durable on return 0 */
int pmc_state_set(struct pmc_state *st, const char *volume, int value, struct pmc_err *err);
/* ... recording the identity of the volume's disk too (id NULL or "": the
 * one recorded stays) */
int pmc_state_record(struct pmc_state *st, const char *volume, int value, const char *id,
		     struct pmc_err *err);
/* the disk identity recorded for volume into buf; -ENOENT if none */
int pmc_state_get_id(struct pmc_state *st, const char *volume, char *buf, size_t len);
/* the cache uuid recorded (zeroes if none) and setting it */
void pmc_state_uuid(struct pmc_state *st, uint8_t uuid[16]);
int pmc_state_set_uuid(struct pmc_state *st, const uint8_t uuid[16], struct pmc_err *err);
/* The file describes another cache than c (the caller checked that none
 * of its volumes is dirty there) or none: make it describe c. With another
 * cache, every volume c holds is recorded bypassed first (its disk was
 * served through the other cache since: c's copies are older). */
struct pmc_cache;
int pmc_state_rebuild(struct pmc_state *st, struct pmc_cache *c, struct pmc_err *err);

#endif
