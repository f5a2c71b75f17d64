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
 * File format (text, one record a line):
 *   pmcache-state 1 <cache uuid>
 *   <volume name> dirty|clean
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
/* 1 dirty, 0 clean, -ENOENT not named (or not known since a save failed
 * after replacing the file: the next pmc_state_set saves again) */
int pmc_state_get(struct pmc_state *st, const char *volume);
/* how many volumes the file records as dirty (or not known), their names
 * in buf ("vol0, vol1"; cut at len) */
unsigned pmc_state_dirty_names(struct pmc_state *st, char *buf, size_t len);
/* durable on return 0 */
int pmc_state_set(struct pmc_state *st, const char *volume, int dirty, struct pmc_err *err);
/* the cache uuid recorded (zeroes if none) and setting it */
void pmc_state_uuid(struct pmc_state *st, uint8_t uuid[16]);
int pmc_state_set_uuid(struct pmc_state *st, const uint8_t uuid[16], struct pmc_err *err);

#endif
