/* engine.c - requests served from pmem or the backing disks: volumes,
 * queues, request dispatch and statistics.
 *
 * Owns: the attached volumes (disk, mode, tunables, sticky error), the
 * queues (one per thread: ring, request contexts, statistics) and the
 * state file markers. The metadata decisions stay in the core (cache.h):
 * the engine allocates, pins, publishes and invalidates through it. The
 * data paths have files of their own, sharing the request state of
 * engine_internal.h:
 *  - engine_read.c: reads (hits, fills, admission, sequential bypass) and
 *    the user-copy transfers of ublk;
 *  - engine_write.c: writes in every mode, flushes and discards;
 *  - engine_order.c: the order of disk writes and flush generations
 *    (lib/ORDERING.md);
 *  - engine_wb.c: write-back.
 *
 * Locking: a queue, its ring, its contexts and statistics belong to its
 * thread (statistics are read by others with relaxed atomics). Volume
 * settings are atomics. e->lock serialises attach and mode changes.
 * Write-back state belongs to the thread running writeback_step (one at a
 * time: wb_lock, also taken by write-back completions, which may run on
 * any queue: a queue with writes waiting for free blocks kicks write-back
 * itself). No lock is held across a ring poll; ring submissions never run
 * callbacks, so holding wb_lock while submitting cannot deadlock.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

void (*pmc_test_wb_pinned)(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n);

/* --- small helpers --- */

const char *pmc_mode_name(enum pmc_mode m)
{
	switch (m) {
	case PMC_MODE_WRITE_BACK:
		return "write-back";
	case PMC_MODE_WRITE_THROUGH:
		return "write-through";
	case PMC_MODE_WRITE_AROUND:
		return "write-around";
	case PMC_MODE_PASS_THROUGH:
		return "pass-through";
	}
	return "unknown";
}

int pmc_mode_parse(const char *s, enum pmc_mode *m)
{
	for (int i = PMC_MODE_WRITE_BACK; i <= PMC_MODE_PASS_THROUGH; i++) {
		if (!strcmp(s, pmc_mode_name((enum pmc_mode)i))) {
			*m = (enum pmc_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

void pmc_wb_conf_default(struct pmc_wb_conf *wb)
{
	wb->high_pct = 50;
	wb->low_pct = 30;
	wb->max_age_ms = 30000;
	wb->max_io_bytes = 1u << 20;
	wb->max_inflight = 32;
	wb->busy_inflight = 4;
	wb->idle_ms = 100;
	wb->retry_ms = 1000;
	wb->stall_ms = 10000;
	wb->max_req_bytes = 1u << 20;
}

void pmc_volume_conf_default(struct pmc_volume_conf *vc)
{
	vc->mode = PMC_MODE_WRITE_BACK;
	vc->admit_after_misses = 1;
	vc->seq_cutoff_bytes = 0;
	vc->nospace = PMC_NOSPACE_WAIT;
}


static int wb_conf_check(const struct pmc_wb_conf *wb, struct pmc_err *err)
{
	if (wb->low_pct > wb->high_pct || wb->high_pct > 100)
		return pmc_err_set(err, EINVAL,
				   "write-back watermarks: low %u%% and high %u%% must satisfy "
				   "low <= high <= 100",
				   wb->low_pct, wb->high_pct);
	if (wb->max_io_bytes < 4096 || wb->max_io_bytes > (16u << 20) ||
	    wb->max_io_bytes % 4096)
		return pmc_err_set(err, EINVAL,
				   "write-back max_io_bytes %u: not a multiple of 4 KiB between "
				   "4 KiB and 16 MiB",
				   wb->max_io_bytes);
	if (wb->max_req_bytes < 4096 || wb->max_req_bytes > (16u << 20) ||
	    wb->max_req_bytes % 4096)
		return pmc_err_set(err, EINVAL,
				   "max_req_bytes %u: not a multiple of 4 KiB between 4 KiB and "
				   "16 MiB",
				   wb->max_req_bytes);
	if (!wb->max_inflight || !wb->busy_inflight || wb->max_inflight > 1024 ||
	    wb->busy_inflight > wb->max_inflight)
		return pmc_err_set(err, EINVAL,
				   "write-back in-flight limits %u (idle) and %u (busy): need "
				   "1 <= busy <= idle <= 1024",
				   wb->max_inflight, wb->busy_inflight);
	return 0;
}

/* drop cached copies; nothing to do without a cache */
void pmc_eng_inval(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint32_t n)
{
	if (e->c)
		pmc_cache_invalidate(e->c, vol, lba, n);
}

/* --- engine --- */

int pmc_engine_create(struct pmc_cache *c, const struct pmc_wb_conf *wb, struct pmc_engine **out,
		      struct pmc_err *err)
{
	struct pmc_engine *e;
	struct pmc_wb_conf def;
	uint32_t nvols = c ? c->max_volumes : PMC_MAX_VOLUMES_DEFAULT;
	int rc;

	*out = NULL;
	if (!wb) {
		pmc_wb_conf_default(&def);
		wb = &def;
	}
	if (c && c->rdonly)
		return pmc_err_set(err, EROFS, "engine: the cache is open read-only");
	if (c && pmc_poison_init())
		return pmc_err_set(err, errno, "engine: cannot install the SIGBUS handler");
	if (c && c->block_size != 4096)
		return pmc_err_set(err, EINVAL,
				   "engine: cache block size %u; the engine serves 4 KiB blocks only",
				   c->block_size);
	rc = wb_conf_check(wb, err);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e)
		return pmc_err_set(err, ENOMEM, "engine: out of memory");
	e->vols = calloc(nvols, sizeof(*e->vols));
	e->wb_oldest = calloc(nvols, sizeof(*e->wb_oldest));
	e->items = calloc(WB_BATCH, sizeof(*e->items));
	e->retired = calloc(nvols, sizeof(*e->retired));
	if (!e->vols || !e->wb_oldest || !e->items || !e->retired) {
		free(e->retired);
		free(e->vols);
		free(e->wb_oldest);
		free(e->items);
		free(e);
		return pmc_err_set(err, ENOMEM, "engine: out of memory");
	}
	e->c = c;
	e->nvols = nvols;
	e->pm = c ? pmc_cache_pmem(c) : NULL;
	e->bs = c ? c->block_size : PMC_BLOCK_SIZE_DEFAULT;
	e->wb = *wb;
	e->wb_max_io_cap = wb->max_io_bytes;
	e->max_req_blocks = wb->max_req_bytes / e->bs;
	/* a write-back write is one iovec per cache block, and one writev
	 * takes IOV_MAX of them (a disk with no segment limit gets it whole):
	 * merges stop there (4 MiB of 4 KiB blocks) */
	e->max_io_blocks = wb->max_io_bytes / e->bs;
	if (e->max_io_blocks > IOV_MAX)
		e->max_io_blocks = IOV_MAX;
	e->wb_force_vol = UINT32_MAX;
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->wb_lock, NULL);
	pthread_mutex_init(&e->dw_lock, NULL);
	for (uint32_t i = 0; i < nvols; i++)
		e->wb_oldest[i] = UINT64_MAX;
	/* a new or cleanly closed cache without dirty blocks needs no rebuild
	 * of its dirty map: complete before the first write marks a block */
	if (c)
		pmc_cache_dirty_rebuild(c, 0);
	*out = e;
	return 0;
}

void pmc_engine_set_state(struct pmc_engine *e, struct pmc_state *st)
{
	e->state = st;
}

/*
 * v's disk is about to be closed, with no I/O of it in flight: sync the
 * plain writes not yet synced, so that a clean stop (or a detach) leaves
 * none and the next attach may admit fills at once; after a failure they
 * stay unsynced, which the next attach of the slot sees
 */
/* v has plain writes not known durable (ORDERING.md flush generations) */
static int plain_unsynced(struct pmc_evol *v)
{
	return atomic_load(&v->wr_synced) < atomic_load(&v->wr_done) &&
	       atomic_load(&v->wr_done) > WR_GEN_FRESH;
}

static void sync_plain(struct pmc_evol *v, struct pmc_disk *disk, const char *when)
{
	uint64_t gen = atomic_load(&v->wr_done);
	int rc;

	if (!plain_unsynced(v))
		return;
	rc = pmc_disk_sync(disk);
	if (rc == 0)
		pmc_eng_synced_advance(v, gen);
	else
		pmc_log(LOG_ERR, "volume %s: disk %s: sync at %s failed: %s", v->name, disk->path,
			when, strerror(-rc));
}

int pmc_engine_destroy(struct pmc_engine *e)
{
	int unsynced = 0;

	if (!e)
		return 0;
	pmc_eng_wb_drop_open(e);
	pmc_eng_state_mark_clean(e);
	for (uint32_t i = 0; i < e->nvols; i++) {
		if (e->vols[i].disk) {
			sync_plain(&e->vols[i], e->vols[i].disk, "shutdown");
			pmc_disk_close(e->vols[i].disk);
			if (e->c)
				pmc_cache_volume_put(e->c, i);
		}
		/* this sync failed, or the one of the slot's last detach */
		unsynced |= plain_unsynced(&e->vols[i]);
	}
	if (e->c) {
		/* after an unclean stop every volume of the cache may have
		 * plain writes in its disk's volatile cache: one never attached
		 * in this process was never synced, and a clean close would let
		 * the next attach admit fills at once (ORDERING.md) */
		struct pmc_cache_info ci;
		struct pmc_volume_info vi;

		pmc_cache_get_info(e->c, &ci);
		for (uint32_t i = 0; !ci.was_clean && i < ci.max_volumes; i++)
			if (pmc_cache_volume_info(e->c, i, &vi) == 0 &&
			    (i >= e->nvols || !e->vols[i].attached_once))
				unsynced = 1;
	}
	while (e->wb_free) {
		struct wb_io *w = e->wb_free;

		e->wb_free = w->next;
		free(w->blk);
		free(w->iov);
		free(w);
	}
	while (e->wb_round_free) {
		struct wb_round *r = e->wb_round_free;

		e->wb_round_free = r->next;
		free(r);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->wb_lock);
	pthread_mutex_destroy(&e->dw_lock);
	free(e->retired);
	free(e->vols);
	free(e->wb_oldest);
	free(e->items);
	free(e);
	return unsynced;
}

static void apply_conf(struct pmc_evol *v, const struct pmc_volume_conf *vc)
{
	atomic_store(&v->admit_after, vc->admit_after_misses);
	atomic_store(&v->seq_cutoff, vc->seq_cutoff_bytes);
	atomic_store(&v->nospace, (int)vc->nospace);
}

static int conf_check(const struct pmc_volume_conf *vc, struct pmc_err *err)
{
	if ((unsigned)vc->mode > PMC_MODE_PASS_THROUGH)
		return pmc_err_set(err, EINVAL, "volume: mode %d unknown", (int)vc->mode);
	if ((unsigned)vc->nospace > PMC_NOSPACE_AROUND)
		return pmc_err_set(err, EINVAL, "volume: no-space policy %d unknown",
				   (int)vc->nospace);
	if (vc->admit_after_misses > 255)
		return pmc_err_set(err, EINVAL, "volume: admit_after_misses %u is above 255",
				   vc->admit_after_misses);
	return 0;
}

/* without a cache: only a volume the state file calls clean may run */
static int attach_nocache(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
			  const struct pmc_disk_ids *ids, uint32_t *slot, struct pmc_volume_info *vi,
			  char *id, struct pmc_err *err)
{
	int state = e->state ? pmc_state_get(e->state, name) : -ENOENT;
	uint32_t i, free_slot = UINT32_MAX;
	int rc;

	if (state != PMC_STATE_CLEAN && state != PMC_STATE_BYPASSED)
		return pmc_err_set(err, EIO,
				   "volume %s: the unreachable pmem may hold its acknowledged "
				   "writes (%s); refusing to serve it from the disk alone",
				   name,
				   state == PMC_STATE_DIRTY ? "state file says dirty"
							    : "the state file does not name it");
	for (i = 0; i < e->nvols; i++) {
		if (e->vols[i].disk && !strcmp(e->vols[i].name, name))
			return pmc_err_set(err, EBUSY, "volume %s: already attached", name);
		if (!e->vols[i].disk && free_slot == UINT32_MAX)
			free_slot = i;
	}
	if (free_slot == UINT32_MAX)
		return pmc_err_set(err, ENOSPC, "volume %s: no free volume slot", name);
	/* the disk must be the volume's, as with the cache (diskid.c): its
	 * identity recorded in the state file, where the file has one; the
	 * identity found is the volume's from now on (an NVMe-oF path that
	 * comes back under another name is checked against it, and the state
	 * file records it); also as an older pmcached recorded it (the
	 * record stays; the next attach through the cache moves it) */
	id[0] = '\0';
	{
		int recorded = pmc_state_get_id(e->state, name, id, PMC_DISK_ID_MAX + 1) == 0;

		if (ids->rc) {
			/* unreadable: refused if there is a record to compare
			 * with; else the volume's identity stays "" */
			if (recorded) {
				*err = ids->err;
				return ids->rc;
			}
		} else if (!recorded)
			snprintf(id, PMC_DISK_ID_MAX + 1, "%s", ids->id.text);
		else if (!pmc_disk_id_match(&ids->id, ids->has_legacy ? &ids->legacy : NULL, id))
			return pmc_err_set(err, EXDEV,
					   "volume %s: disk %s is %s, but the state file records "
					   "%s for the volume; refusing to serve another disk as it",
					   name, disk->path, ids->id.text, id);
	}
	/* its disk is about to change behind the cache's clean copies: the
	 * next attach through the cache must drop them (state_unbypass) */
	rc = pmc_state_set(e->state, name, PMC_STATE_BYPASSED, err);
	if (rc)
		return rc;
	memset(vi, 0, sizeof(*vi));
	vi->size_bytes = disk->size / e->bs * e->bs;
	vi->counts_valid = 1;
	*slot = free_slot;
	return 0;
}

/* record that the cache may hold dirty data of vol; under e->lock */
static int state_mark_dirty_locked(struct pmc_engine *e, struct pmc_evol *v, const char *name,
				   struct pmc_err *err)
{
	int rc;

	if (!e->state || atomic_load(&v->marked))
		return 0;
	rc = pmc_state_record(e->state, name, 1, v->disk_id, err);
	if (rc == 0)
		atomic_store(&v->marked, 1);
	return rc;
}

/*
 * Attaching through the cache a volume that was served without it (state
 * file: bypassed): its disk may hold newer data than the cache's clean
 * copies, which are dropped; dirty blocks, older than the disk too, refuse
 * the volume (written back they would overwrite newer data). Then the
 * record is clean again. Under e->lock, before the volume is referenced.
 */
static int state_unbypass(struct pmc_engine *e, uint32_t slot, const char *name, int created,
			  int *bypassed, struct pmc_err *err)
{
	uint64_t ndirty;
	int rc;

	if (!e->state || pmc_state_get(e->state, name) != PMC_STATE_BYPASSED)
		return 0;
	*bypassed = 1;
	if (!created) {
		rc = pmc_cache_volume_drop(e->c, slot, &ndirty, err);
		if (rc == -EBUSY && ndirty) {
			pmc_err_clear(err);
			return pmc_err_set(err, EEXIST,
					   "volume %s: served without this cache since (state file: "
					   "bypassed), so its %" PRIu64 " dirty blocks here are older "
					   "than its disk; refusing to write them back (to drop them: "
					   "volume add --replace-disk --discard-dirty)",
					   name, ndirty);
		}
		if (rc)
			return rc;
		pmc_log(LOG_NOTICE,
			"volume %s: served without this cache since it last ran: its clean "
			"blocks dropped",
			name);
	}
	{
		struct pmc_volume_info vi;

		return pmc_state_record(e->state, name, PMC_STATE_CLEAN,
					!created && pmc_cache_volume_info(e->c, slot, &vi) == 0 &&
							vi.id_state == 1
						? vi.disk_id.text
						: NULL,
					err);
	}
}

/* on attach: make the state file agree with what the cache holds */
static int state_attach(struct pmc_engine *e, uint32_t slot, const char *name,
			const struct pmc_volume_info *vi, struct pmc_err *err)
{
	struct pmc_evol *v = &e->vols[slot];
	int dirty;

	atomic_store(&v->marked, 0);
	atomic_store(&v->dirtying, 0);
	if (!e->state || !e->c)
		return 0;
	dirty = pmc_state_get(e->state, name);
	if (dirty >= 0 && v->disk_id[0]) {
		/* the record names the disk the cache knows (its disk was
		 * replaced, or the record is older than identities) */
		char had[PMC_DISK_ID_MAX + 1] = "";
		int rc;

		pmc_state_get_id(e->state, name, had, sizeof(had));
		if (strcmp(had, v->disk_id)) {
			rc = pmc_state_record(e->state, name, dirty, v->disk_id, err);
			if (rc)
				return rc;
		}
	}
	if (dirty == 1) {
		atomic_store(&v->marked, 1);
		return 0;
	}
	/* a LOST block stands for an acknowledged write not on the disk */
	if (!vi->counts_valid || vi->nr_dirty || vi->nr_lost)
		return state_mark_dirty_locked(e, v, name, err);
	return 0;
}

/* before a write may create dirty blocks; 0 or -errno (then go around) */
int pmc_eng_state_begin_dirty(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = &e->vols[vol];
	struct pmc_err err = {0};
	int rc;

	atomic_fetch_add(&v->dirtying, 1);
	if (!e->state || atomic_load(&v->marked))
		return 0;
	pthread_mutex_lock(&e->lock);
	rc = state_mark_dirty_locked(e, v, v->name, &err);
	pthread_mutex_unlock(&e->lock);
	if (rc) {
		atomic_fetch_sub(&v->dirtying, 1);
		pmc_log_ratelimited(&v->rl, LOG_ERR, "volume %s: %s; writing around the cache",
				    v->name, err.msg);
	}
	return rc;
}

void pmc_eng_state_end_dirty(struct pmc_engine *e, uint32_t vol)
{
	atomic_fetch_sub(&e->vols[vol].dirtying, 1);
}

/* mark clean every attached volume with no dirty block and no write that
 * could make one; called after flush_all and at shutdown */
void pmc_eng_state_mark_clean(struct pmc_engine *e)
{
	if (!e->state || !e->c)
		return;
	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < e->nvols; i++) {
		struct pmc_evol *v = &e->vols[i];
		struct pmc_volume_info vi;
		struct pmc_err err = {0};

		if (!v->disk || !atomic_load(&v->marked))
			continue;
		/* unmark first: a writer arriving now must take e->lock */
		atomic_store(&v->marked, 0);
		if (atomic_load(&v->dirtying) || pmc_cache_volume_info(e->c, i, &vi) ||
		    !vi.counts_valid || vi.nr_dirty || vi.nr_lost) {
			atomic_store(&v->marked, 1);
			continue;
		}
		/* a failed save leaves it unmarked: the file may say clean now
		 * (lib/state.c), so the next dirtying write records it again */
		if (pmc_state_record(e->state, v->name, 0, v->disk_id, &err))
			pmc_log(LOG_ERR, "volume %s: %s", v->name, err.msg);
	}
	pthread_mutex_unlock(&e->lock);
}

int pmc_engine_attach(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
		      const struct pmc_volume_conf *vc, uint32_t *vol, struct pmc_err *err)
{
	return pmc_engine_attach_flags(e, name, disk, vc, 0, vol, err);
}

int pmc_engine_attach_flags(struct pmc_engine *e, const char *name, struct pmc_disk *disk,
			    const struct pmc_volume_conf *vc, unsigned flags, uint32_t *vol,
			    struct pmc_err *err)
{
	struct pmc_volume_conf def, pt = {.mode = PMC_MODE_PASS_THROUGH,
					  .nospace = PMC_NOSPACE_AROUND};
	struct pmc_volume_info vi;
	struct pmc_disk_ids ids;
	struct pmc_evol *v;
	uint32_t slot;
	int rc, clean_stop = 1, created = 0, bypassed = 0;
	char nid[PMC_DISK_ID_MAX + 1] = "";

	if (!vc) {
		pmc_volume_conf_default(&def);
		vc = &def;
	}
	rc = conf_check(vc, err);
	if (rc)
		return rc;
	if (disk->lbs > e->bs || e->bs % disk->lbs)
		return pmc_err_set(err, EINVAL,
				   "disk %s: logical block size %u does not divide the cache block "
				   "size %u",
				   disk->path, disk->lbs, e->bs);
	/* before e->lock: an NVMe Identify may wait for a stalled path (the
	 * control loop, write-back and the queues need e->lock meanwhile) */
	pmc_disk_ids_read(disk, &ids);
	pthread_mutex_lock(&e->lock);
	if (!e->c) {
		rc = attach_nocache(e, name, disk, &ids, &slot, &vi, nid, err);
		if (rc) {
			pthread_mutex_unlock(&e->lock);
			return rc;
		}
		vc = &pt;
	} else if (pmc_cache_volume_find(e->c, name, &slot) == 0) {
		struct pmc_cache_info ci;

		/* the disk must be the one the volume's data belongs to (diskid.c),
		 * checked first: another disk is refused as such, whatever its size */
		rc = e->vols[slot].disk ? 0 : pmc_disk_id_attach(e->c, slot, name, disk, &ids, flags, err);
		if (!rc && !e->vols[slot].disk)
			rc = state_unbypass(e, slot, name, 0, &bypassed, err);
		if (rc) {
			pthread_mutex_unlock(&e->lock);
			return rc;
		}
		pmc_cache_get_info(e->c, &ci);
		clean_stop = ci.was_clean;
		pmc_cache_volume_info(e->c, slot, &vi);
		if (disk->size < vi.size_bytes) {
			pthread_mutex_unlock(&e->lock);
			return pmc_err_set(err, ENOSPC,
					   "volume %s: disk %s has %" PRIu64
					   " bytes, the cache holds a volume of %" PRIu64 " bytes",
					   name, disk->path, disk->size, vi.size_bytes);
		}
	} else {
		uint64_t size = disk->size / e->bs * e->bs;

		rc = state_unbypass(e, 0, name, 1, &bypassed, err);
		if (!rc)
			rc = pmc_disk_id_volume_add(e->c, name, disk, &ids, size, &slot, err);
		if (rc) {
			pthread_mutex_unlock(&e->lock);
			return rc;
		}
		created = 1;
		pmc_cache_volume_info(e->c, slot, &vi);
	}
	v = &e->vols[slot];
	if (v->disk) {
		pthread_mutex_unlock(&e->lock);
		return pmc_err_set(err, EBUSY, "volume %s: already attached to %s", name,
				   v->disk->path);
	}
	/* the identity of its disk, for the state file's records */
	snprintf(v->disk_id, sizeof(v->disk_id), "%s",
		 !e->c ? nid : vi.id_state == 1 ? vi.disk_id.text : "");
	rc = e->c ? pmc_cache_volume_get(e->c, slot) : 0; /* held while attached */
	if (rc) {
		pthread_mutex_unlock(&e->lock);
		return pmc_err_set(err, -rc, "volume %s: vanished while attaching", name);
	}
	rc = state_attach(e, slot, name, &vi, err);
	if (rc) {
		if (e->c)
			pmc_cache_volume_put(e->c, slot);
		/* a refused attach of a new volume leaves no record of it (it
		 * took a volume slot of the cache for good, and the disk's
		 * identity, refusing another disk under that name) */
		if (created) {
			struct pmc_err rerr = {0};

			if (pmc_cache_volume_remove(e->c, slot, &rerr))
				pmc_log(LOG_ERR, "volume %s: %s", name, rerr.msg);
		}
		pthread_mutex_unlock(&e->lock);
		return rc;
	}
	snprintf(v->name, sizeof(v->name), "%s", name);
	memset(&v->rl, 0, sizeof(v->rl));
	v->blocks = vi.size_bytes / e->bs;
	atomic_store(&v->mode, (int)vc->mode);
	atomic_store(&v->target, (int)vc->mode);
	atomic_store(&v->draining, 0);
	atomic_store(&v->error, 0);
	atomic_store(&v->wb_corrupt, 0);
	atomic_store(&v->backoff_ms, 0);
	atomic_store(&v->retry_at_ns, 0);
	/* After an unclean stop the last process may have left acknowledged
	 * plain writes in the disk's volatile cache: the first flush syncs,
	 * and no fill is admitted until a sync (ORDERING.md). After a clean
	 * stop (which synced the disk) of the last process that served the
	 * volume through this cache, nothing is owed: a flush before any plain
	 * write syncs nothing (a volume served on a placeholder, whose disk
	 * cannot sync, would otherwise fail every flush). A new volume, or one
	 * served without the cache since (bypassed), syncs at its first. */
	if (plain_unsynced(v))
		clean_stop = 0; /* the slot's last detach could not sync */
	atomic_store(&v->wr_synced, e->c && clean_stop && !created && !bypassed ? WR_GEN_FRESH : 0);
	atomic_store(&v->sync_lost, 0);
	atomic_store(&v->wr_done, WR_GEN_FRESH + !clean_stop);
	atomic_store(&v->plain_flying, 0);
	apply_conf(v, vc);
	memset(&v->stats_base, 0, sizeof(v->stats_base));
	for (struct pmc_queue *q = e->queues; q; q = q->next)
		pmc_stats_add(&v->stats_base, &q->stats[slot]);
	pmc_stats_add(&v->stats_base, &e->retired[slot]);
	atomic_store(&v->oldest_birth_ns, 0);
	v->disk = disk;
	v->attached_once = 1;
	/* dirty data an earlier process lost to pmem media errors: the
	 * volume's error from the start, as it was in that process */
	if (e->c && vi.counts_valid && vi.nr_lost) {
		atomic_store(&v->error, EIO);
		pmc_log(LOG_ERR,
			"volume %s: %" PRIu64 " blocks of its dirty data were lost to pmem media "
			"errors; reads of them fail with EIO until they are written again",
			name, vi.nr_lost);
	}
	pthread_mutex_unlock(&e->lock);
	/* a volume attached in another mode may still hold dirty data */
	if (vc->mode != PMC_MODE_WRITE_BACK)
		pmc_engine_set_mode(e, slot, vc->mode, NULL);
	*vol = slot;
	return 0;
}

struct pmc_evol *pmc_eng_evol(struct pmc_engine *e, uint32_t vol)
{
	return vol < e->nvols && e->vols[vol].disk ? &e->vols[vol] : NULL;
}

int pmc_engine_find(struct pmc_engine *e, const char *name, uint32_t *vol)
{
	for (uint32_t i = 0; i < e->nvols; i++) {
		if (e->vols[i].disk && !strcmp(e->vols[i].name, name)) {
			*vol = i;
			return 0;
		}
	}
	return -ENOENT;
}

const char *pmc_engine_volume_name(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);

	return v ? v->name : NULL;
}

void pmc_engine_volume_disk_id(struct pmc_engine *e, uint32_t vol, char *buf, size_t len)
{
	pthread_mutex_lock(&e->lock);
	snprintf(buf, len, "%s", pmc_eng_evol(e, vol) ? e->vols[vol].disk_id : "");
	pthread_mutex_unlock(&e->lock);
}

const char *pmc_engine_volume_disk(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);

	return v ? v->disk->path : NULL;
}

uint64_t pmc_engine_volume_size(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);

	return v ? v->blocks * e->bs : 0;
}

int pmc_engine_detach(struct pmc_engine *e, uint32_t vol, int remove, struct pmc_err *err)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);
	struct pmc_disk *disk;
	char name[PMC_VOLUME_NAME_MAX + 1];
	int rc;

	if (!v)
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	/* write-back reads v->disk under wb_lock (and takes e->lock inside it):
	 * once both are held, no write-back I/O of the volume can start */
	pthread_mutex_lock(&e->wb_lock);
	pthread_mutex_lock(&e->lock);
	snprintf(name, sizeof(name), "%s", v->name);
	if (remove && e->c) {
		struct pmc_volume_info vi;

		if (!atomic_load(&e->c->counts_valid))
			pmc_cache_recount(e->c);
		pmc_cache_volume_info(e->c, vol, &vi);
		if (vi.nr_dirty) {
			pthread_mutex_unlock(&e->lock);
			pthread_mutex_unlock(&e->wb_lock);
			return pmc_err_set(err, EBUSY,
					   "volume %s: %" PRIu64 " dirty blocks not yet written back",
					   name, vi.nr_dirty);
		}
	}
	disk = v->disk;
	v->disk = NULL;
	if (e->c)
		pmc_cache_volume_put(e->c, vol);
	rc = remove && e->c ? pmc_cache_volume_remove(e->c, vol, err) : 0;
	/* without the cache the record stays bypassed: the cache, back, may
	 * still hold blocks of it */
	if (rc == 0 && remove && e->state && e->c) {
		struct pmc_err serr = {0};

		if (pmc_state_record(e->state, name, 0, v->disk_id, &serr))
			pmc_log(LOG_ERR, "volume %s: %s", name, serr.msg);
	}
	if (rc) {
		/* still in the cache: keep serving it */
		v->disk = disk;
		if (e->c)
			pmc_cache_volume_get(e->c, vol);
		pthread_mutex_unlock(&e->lock);
		pthread_mutex_unlock(&e->wb_lock);
		return rc;
	}
	pthread_mutex_unlock(&e->lock);
	pmc_eng_wb_detach_locked(e, vol);
	pthread_mutex_unlock(&e->wb_lock);
	/* write-back I/O started before holds the disk (its writes, a round's
	 * sync): the threads whose rings it is on complete it; a write that
	 * fails now is not the volume's error, its blocks stay dirty */
	for (unsigned waited_ms = 0; pmc_eng_wb_busy(e, vol); waited_ms++) {
		if (waited_ms == 5000)
			pmc_log(LOG_WARNING,
				"volume %s: detach waits for %u write-back I/Os in flight on %s",
				name, pmc_eng_wb_busy(e, vol), disk->path);
		usleep(1000);
	}
	/* its plain writes: durable before the disk is let go, or the next
	 * attach of the slot admits no fill until a sync */
	sync_plain(v, disk, "detach");
	pmc_disk_close(disk);
	return 0;
}

int pmc_engine_set_mode(struct pmc_engine *e, uint32_t vol, enum pmc_mode mode,
			struct pmc_err *err)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);

	if (!v)
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	if ((unsigned)mode > PMC_MODE_PASS_THROUGH)
		return pmc_err_set(err, EINVAL, "mode %d unknown", (int)mode);
	if (!e->c && mode != PMC_MODE_PASS_THROUGH)
		return pmc_err_set(err, EIO, "volume %s: the pmem is unavailable: pass-through only",
				   v->name);
	pthread_mutex_lock(&e->lock);
	atomic_store(&v->target, (int)mode);
	if (mode == PMC_MODE_WRITE_BACK) {
		atomic_store(&v->draining, 0);
		atomic_store(&v->mode, (int)mode);
	} else {
		/* no new dirty data from now on; write-back finishes the switch */
		atomic_store(&v->draining, 1);
	}
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int pmc_engine_get_mode(struct pmc_engine *e, uint32_t vol, enum pmc_mode *mode, int *draining)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);

	if (!v)
		return -ENOENT;
	*mode = (enum pmc_mode)atomic_load(&v->mode);
	if (draining)
		*draining = atomic_load(&v->draining);
	return 0;
}

int pmc_engine_set_volume_conf(struct pmc_engine *e, uint32_t vol,
			       const struct pmc_volume_conf *vc, struct pmc_err *err)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);
	int rc = conf_check(vc, err);

	if (rc)
		return rc;
	if (!v)
		return pmc_err_set(err, ENOENT, "volume slot %u: not attached", vol);
	apply_conf(v, vc);
	if ((int)vc->mode != atomic_load(&v->target))
		return pmc_engine_set_mode(e, vol, vc->mode, err);
	return 0;
}

void pmc_engine_set_wb_conf(struct pmc_engine *e, const struct pmc_wb_conf *wb)
{
	pthread_mutex_lock(&e->lock);
	/* request and merge sizes are fixed at create: they size the arrays */
	uint32_t req = e->wb.max_req_bytes, io = e->wb.max_io_bytes;

	e->wb = *wb;
	e->wb.max_req_bytes = req;
	/* up to the size at create again after a lower value */
	if (wb->max_io_bytes > e->wb_max_io_cap || wb->max_io_bytes < 4096)
		e->wb.max_io_bytes = io;
	pthread_mutex_unlock(&e->lock);
}

void pmc_engine_set_volatile(struct pmc_engine *e, uint32_t vol, int volatile_cache)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);
	uint64_t gen;
	int rc;

	if (!v)
		return;
	atomic_store(&v->no_volatile, !volatile_cache);
	if (volatile_cache)
		return;
	/* every disk write is RWF_DSYNC from now on and no flush will come:
	 * sync what earlier plain writes (of this process or the last) left
	 * in the disk's volatile cache, so that fills may be admitted */
	gen = atomic_load(&v->wr_done);
	rc = pmc_disk_sync(v->disk);
	if (rc == 0) {
		pmc_eng_synced_advance(v, gen);
	} else {
		/* the next FLUSH fails with it, but a device without a volatile
		 * cache may get none: the volume's error shows it (status) */
		pmc_eng_sync_lost(v, gen, rc);
		pmc_eng_volume_failed(e, vol, rc,
				      "sync before write-through (plain writes acknowledged before "
				      "may be lost; read misses stay uncached until a flush succeeds)",
				      atomic_load(&v->err_epoch));
	}
}

int pmc_engine_volume_error(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);

	return v ? atomic_load(&v->error) : 0;
}

int pmc_engine_clear_error(struct pmc_engine *e, uint32_t vol)
{
	struct pmc_evol *v = pmc_eng_evol(e, vol);
	struct pmc_volume_info vi;

	if (!v)
		return 0;
	/* I/O started before this point fails as the old path's */
	atomic_fetch_add_explicit(&v->err_epoch, 1, memory_order_release);
	atomic_store(&v->retry_at_ns, 0);
	atomic_store(&v->backoff_ms, 0);
	atomic_store(&v->error, 0);
	/* LOST blocks are data no disk holds: their error is not the disk's
	 * to clear (looked at after the store: a block lost meanwhile sets it
	 * again in pmc_eng_media_error, or is counted here) */
	if (e->c && pmc_cache_volume_info(e->c, vol, &vi) == 0 && vi.nr_lost) {
		atomic_store(&v->error, EIO);
		return EIO;
	}
	return 0;
}

int pmc_eng_volume_failed(struct pmc_engine *e, uint32_t vol, int res, const char *what,
			  uint32_t epoch)
{
	struct pmc_evol *v = &e->vols[vol];
	int zero = 0;

	/* a write-back I/O of a volume being detached (pmc_engine_detach):
	 * its blocks stay dirty in the pmem, the volume has no disk to fail */
	if (!v->disk)
		return 0;
	if (epoch != atomic_load_explicit(&v->err_epoch, memory_order_acquire)) {
		pmc_log_ratelimited(&v->rl, LOG_WARNING,
				    "volume %s: disk %s: %s started before the volume's error was "
				    "cleared failed: %s (not the volume's error)",
				    v->name, v->disk->path, what, strerror(-res));
		return 0;
	}
	atomic_compare_exchange_strong(&v->error, &zero, -res);
	pmc_log_ratelimited(&v->rl, LOG_ERR, "volume %s: disk %s: %s failed: %s", v->name,
			    v->disk->path, what, strerror(-res));
	return 1;
}

/* --- pmem media errors (poison.h) --- */

/* blk of (vol, lba) is poisoned: quarantine it; a dirty one's loss is the
 * volume's sticky error, logged with the block */
void pmc_eng_media_error(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t blk)
{
	struct pmc_evol *v = &e->vols[vol];
	enum pmc_block_state was = PMC_BLK_FREE;
	int zero = 0;

	if (pmc_cache_quarantine(e->c, vol, lba, blk, &was))
		return; /* no longer this block's copy */
	if (was == PMC_BLK_CLEAN) {
		pmc_log_ratelimited(&v->rl, LOG_WARNING,
				    "volume %s: block %" PRIu64 ": pmem media error in cache block "
				    "%" PRIu64 "; clean copy dropped, the block is retired",
				    v->name, lba, blk);
		return;
	}
	atomic_compare_exchange_strong(&v->error, &zero, EIO);
	pmc_log_ratelimited(&v->rl, LOG_ERR,
			    "volume %s: block %" PRIu64 " (bytes %" PRIu64 "+%u): pmem media error "
			    "in cache block %" PRIu64 ": its dirty data is lost; reads of it fail "
			    "with EIO until it is written again",
			    v->name, lba, lba * e->bs, e->bs, blk);
}

/* copy a cached block out for a read: -EIO for a LOST block or a poisoned
 * one (then quarantined), never the disk's older data */
int pmc_eng_hit_copy(struct pmc_engine *e, uint32_t vol, uint64_t lba, uint64_t blk,
		    enum pmc_block_state st, void *dst)
{
	if (st == PMC_BLK_LOST) {
		int zero = 0;

		atomic_compare_exchange_strong(&e->vols[vol].error, &zero, EIO);
		return -EIO;
	}
	if (pmc_poison_copy(dst, pmc_cache_block_data(e->c, blk), e->bs) == 0)
		return 0;
	pmc_eng_media_error(e, vol, lba, blk);
	return -EIO;
}

/* a failed disk write from pmem blocks: which of them are poisoned (the
 * kernel could not read them)? Quarantines those; returns their count */
unsigned pmc_eng_write_poisoned(struct pmc_engine *e, uint32_t vol, uint64_t lba,
			       const uint64_t *blk, uint32_t n)
{
	unsigned bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (pmc_poison_probe(pmc_cache_block_data(e->c, blk[i]), e->bs) == 0)
			continue;
		pmc_eng_media_error(e, vol, lba + i, blk[i]);
		bad++;
	}
	return bad;
}

/* --- queues --- */

static void ctx_free_arrays(struct pmc_req_ctx *x)
{
	free(x->blk);
	free(x->snap);
	free(x->ioseq);
	free(x->io);
	free(x->iov);
}

int pmc_queue_create(struct pmc_engine *e, unsigned depth, struct pmc_queue **out,
		     struct pmc_err *err)
{
	return pmc_queue_create_opts(e, depth, NULL, out, err);
}

struct pmc_ring *pmc_queue_ring(struct pmc_queue *q)
{
	return q->ring;
}

int pmc_queue_create_opts(struct pmc_engine *e, unsigned depth, const struct pmc_ring_opts *ro,
			  struct pmc_queue **out, struct pmc_err *err)
{
	struct pmc_queue *q;
	unsigned n = e->max_req_blocks;
	int rc;

	*out = NULL;
	if (depth < 1 || depth > 1024)
		return pmc_err_set(err, EINVAL, "queue depth %u: not between 1 and 1024", depth);
	q = calloc(1, sizeof(*q));
	if (!q)
		return pmc_err_set(err, ENOMEM, "queue: out of memory");
	q->e = e;
	q->depth = depth;
	q->pub_tail = &q->pub;
	q->ctxs = calloc(depth, sizeof(*q->ctxs));
	q->pending = calloc(depth * 4, sizeof(*q->pending));
	q->stats = calloc(e->nvols, sizeof(*q->stats));
	q->dirtying = calloc(e->nvols, sizeof(*q->dirtying));
	q->gap_sink = aligned_alloc(4096, e->bs);
	if (!q->ctxs || !q->pending || !q->stats || !q->dirtying || !q->gap_sink) {
		rc = pmc_err_set(err, ENOMEM, "queue: out of memory");
		goto err_free;
	}
	/* address space only (pages come as requests use them), but with
	 * mlockall(MCL_FUTURE) a memlock limit counts all of it */
	q->bounces = pmc_ring_buf_alloc(pmc_eng_bounces_len(e, depth));
	if (!q->bounces) {
		int en = errno;

		rc = pmc_err_set(err, en, "queue: bounce buffers (%u x %zu KiB): %s", depth,
				 pmc_eng_bounce_len(e) >> 10, strerror(en));
		goto err_free;
	}
	for (unsigned i = 0; i < depth; i++) {
		struct pmc_req_ctx *x = &q->ctxs[i];

		x->q = q;
		x->blk = calloc(n, sizeof(*x->blk));
		x->snap = calloc(n, sizeof(*x->snap));
		x->ioseq = calloc(n, sizeof(*x->ioseq));
		x->io = calloc(n, sizeof(*x->io));
		x->iov = calloc(n, sizeof(*x->iov));
		if (!x->blk || !x->snap || !x->io || !x->iov || !x->ioseq) {
			rc = pmc_err_set(err, ENOMEM, "queue: out of memory");
			goto err_free;
		}
		x->next = q->free;
		q->free = x;
	}
	/* a ring slot per block of every context, plus write-back */
	rc = pmc_ring_create_opts(depth * 2 + 64 > 4096 ? 4096 : depth * 2 + 64, e->pm, ro, &q->ring,
				  err);
	if (rc)
		goto err_free;
	pthread_mutex_lock(&e->lock);
	q->next = e->queues;
	e->queues = q;
	if (!e->told_fixed && e->pm) {
		struct pmc_ring_info ri;

		pmc_ring_get_info(q->ring, &ri);
		if (ri.fixed)
			pmc_log(LOG_INFO, "pmem %s: registered as io_uring fixed buffers",
				e->pm->path);
		else
			pmc_log(LOG_INFO,
				"pmem %s: no io_uring fixed buffers (%s): plain reads and writes",
				e->pm->path, strerror(ri.fixed_err));
		e->told_fixed = 1;
	}
	pthread_mutex_unlock(&e->lock);
	*out = q;
	return 0;

err_free:
	if (q->ctxs)
		for (unsigned i = 0; i < depth; i++)
			ctx_free_arrays(&q->ctxs[i]);
	free(q->ctxs);
	free(q->pending);
	free(q->stats);
	free(q->dirtying);
	free(q->gap_sink);
	pmc_ring_buf_free(q->bounces, pmc_eng_bounces_len(e, depth));
	free(q);
	return rc;
}

unsigned pmc_queue_busy(struct pmc_queue *q)
{
	return q->busy + q->npending + pmc_ring_busy(q->ring);
}

int pmc_queue_fixed_buffers(struct pmc_queue *q)
{
	struct pmc_ring_info ri;

	pmc_ring_get_info(q->ring, &ri);
	return ri.fixed;
}

void pmc_queue_destroy(struct pmc_queue *q)
{
	struct pmc_engine *e;
	struct pmc_queue **pp;

	if (!q)
		return;
	e = q->e;
	while (pmc_queue_busy(q))
		pmc_queue_poll(q, 1, 100000000ull);
	pthread_mutex_lock(&e->lock);
	for (pp = &e->queues; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	/* keep what this queue counted */
	for (uint32_t i = 0; i < e->nvols; i++)
		pmc_stats_add(&e->retired[i], &q->stats[i]);
	pthread_mutex_unlock(&e->lock);
	pmc_ring_destroy(q->ring);
	for (unsigned i = 0; i < q->depth; i++)
		ctx_free_arrays(&q->ctxs[i]);
	free(q->ctxs);
	free(q->pending);
	free(q->stats);
	free(q->dirtying);
	free(q->gap_sink);
	/* after the ring: no fixed buffer registered in it any more */
	pmc_ring_buf_free(q->bounces, pmc_eng_bounces_len(e, q->depth));
	free(q);
}

/* --- request completion --- */

void pmc_eng_req_finish(struct pmc_req_ctx *x)
{
	struct pmc_queue *q = x->q;

	if (x->ucopy_out)
		pmc_eng_ucopy_finish(x);
	pmc_eng_around_leave(x);
	x->next = q->done;
	q->done = x;
}

/* --- submission --- */

void pmc_eng_start(struct pmc_req_ctx *x)
{
	struct pmc_req *req = x->req;
	struct pmc_vol_stats *st = &x->q->stats[req->vol];

	x->lba = req->off / x->q->e->bs;
	x->n = (uint32_t)(req->len / x->q->e->bs);
	x->cursor = 0;
	x->nio = 0;
	x->res = 0;
	x->buf = req->flags & PMC_REQ_UCOPY ? NULL : req->buf;
	x->ucopy_out = 0;
	x->start_ns = pmc_eng_queue_now(x->q);
	/* shared by every queue: written at most once per millisecond, and
	 * never back (another queue's loop time can be later than this one's) */
	if (x->start_ns > atomic_load_explicit(&x->q->e->last_fg_ns, memory_order_relaxed) + 1000000ull)
		atomic_store_explicit(&x->q->e->last_fg_ns, x->start_ns, memory_order_relaxed);
	switch (req->op) {
	case PMC_REQ_READ:
		STAT_ADD(st, reads, 1);
		STAT_ADD(st, read_bytes, req->len);
		pmc_eng_start_read(x);
		break;
	case PMC_REQ_WRITE:
		STAT_ADD(st, writes, 1);
		STAT_ADD(st, write_bytes, req->len);
		pmc_eng_start_write(x);
		break;
	case PMC_REQ_FLUSH:
		STAT_ADD(st, flushes, 1);
		pmc_eng_start_flush(x);
		break;
	case PMC_REQ_DISCARD:
		STAT_ADD(st, discards, 1);
		STAT_ADD(st, discard_bytes, req->len);
		pmc_eng_start_discard(x);
		break;
	}
}

static int validate(struct pmc_queue *q, struct pmc_req *req, struct pmc_err *err)
{
	struct pmc_engine *e = q->e;
	struct pmc_evol *v = pmc_eng_evol(e, req->vol);
	const char *name;

	if (!v)
		return pmc_err_set(err, ENOENT, "request: volume slot %u is not attached",
				   req->vol);
	name = e->vols[req->vol].name;
	if ((unsigned)req->op > PMC_REQ_DISCARD)
		return pmc_err_set(err, EINVAL, "volume %s: request op %d unknown", name,
				   (int)req->op);
	if (req->op == PMC_REQ_FLUSH)
		return 0;
	if (req->off % e->bs || req->len % e->bs || req->len == 0)
		return pmc_err_set(err, EINVAL,
				   "volume %s: request %" PRIu64 "+%" PRIu64
				   " is not aligned to %u bytes",
				   name, req->off, req->len, e->bs);
	if (req->off / e->bs > v->blocks || req->len / e->bs > v->blocks - req->off / e->bs)
		return pmc_err_set(err, EINVAL,
				   "volume %s: request %" PRIu64 "+%" PRIu64 " runs past its end (%" PRIu64
				   " bytes)",
				   name, req->off, req->len, v->blocks * e->bs);
	if (req->op != PMC_REQ_DISCARD && req->len > (uint64_t)e->max_req_blocks * e->bs)
		return pmc_err_set(err, EINVAL,
				   "volume %s: request of %" PRIu64 " bytes is larger than %u",
				   name, req->len, e->max_req_blocks * e->bs);
	if (req->op == PMC_REQ_DISCARD && req->len / e->bs > UINT32_MAX)
		return pmc_err_set(err, EINVAL, "volume %s: discard too large", name);
	if ((req->op == PMC_REQ_READ || req->op == PMC_REQ_WRITE) && !(req->flags & PMC_REQ_UCOPY) &&
	    ((uintptr_t)req->buf % 4096 || !req->buf))
		return pmc_err_set(err, EINVAL, "volume %s: request buffer not 4 KiB aligned",
				   name);
	return 0;
}

static void dispatch(struct pmc_queue *q, struct pmc_req *req)
{
	struct pmc_req_ctx *x = q->free;

	q->free = x->next;
	q->busy++;
	x->req = req;
	req->ctx = x;
	pmc_eng_start(x);
}

int pmc_queue_submit(struct pmc_queue *q, struct pmc_req *req, struct pmc_err *err)
{
	int rc = validate(q, req, err);

	if (rc)
		return rc;
	if (q->free && !q->npending) {
		dispatch(q, req);
		return 0;
	}
	if (q->npending == q->depth * 4)
		return pmc_err_set(err, EAGAIN, "queue: %u requests pending", q->npending);
	q->pending[(q->pend_head + q->npending++) % (q->depth * 4)] = req;
	return 0;
}

static int run_done(struct pmc_queue *q)
{
	int n = 0;

	while (q->done) {
		struct pmc_req_ctx *x = q->done;
		struct pmc_req *req = x->req;

		q->done = x->next;
		pmc_eng_stat_lat(q, &q->stats[req->vol], x->path, x->start_ns);
		x->next = q->free;
		q->free = x;
		q->busy--;
		req->ctx = NULL;
		req->cb(req, x->res);
		n++;
	}
	while (q->free && q->npending) {
		struct pmc_req *req = q->pending[q->pend_head];

		q->pend_head = (q->pend_head + 1) % (q->depth * 4);
		q->npending--;
		dispatch(q, req);
	}
	return n;
}

/* in order; once one must wait again, the later ones wait behind it */
static void retry_waiting(struct pmc_queue *q)
{
	struct pmc_req_ctx *x = q->waiting;

	q->waiting = q->waiting_tail = NULL;
	while (x) {
		struct pmc_req_ctx *next = x->next;

		if (q->waiting)
			pmc_eng_park(x);
		else
			pmc_eng_resume_write(x);
		x = next;
	}
}

/*
 * One loop iteration of the queue's thread: retry what waits, then one ring
 * poll (one io_uring_enter: what callbacks prepared goes in, completions
 * come out), then complete what finished. The ring's clock read of that
 * poll is the time of everything handled in the iteration.
 */
int pmc_queue_poll(struct pmc_queue *q, int wait, uint64_t timeout_ns)
{
	uint64_t start = 0;
	int n;

	q->in_poll = 1;
	for (;;) {
		if (q->held) {
			pmc_eng_retry_held(q);
			if (atomic_load(&q->e->wb_seal_asked))
				pmc_eng_wb_seal_asked(q->e, q);
		}
		if (q->waiting) {
			/* writes wait for free blocks: make sure write-back runs */
			pmc_engine_writeback_step(q->e, q);
			retry_waiting(q);
		}
		/* writes submitted since the last poll, published together */
		pmc_eng_publish_deferred(q);
		/* finished requests complete without waiting on the ring */
		n = pmc_ring_poll(q->ring, wait && !q->done,
				  timeout_ns ? timeout_ns : 10000000ull);
		if (n < 0)
			break;
		/* ... and those of the requests that came in with it */
		pmc_eng_publish_deferred(q);
		n += run_done(q);
		if (n || !wait)
			break;
		if (!start)
			start = pmc_ring_now(q->ring);
		else if (timeout_ns && pmc_ring_now(q->ring) - start >= timeout_ns)
			break;
		if ((q->waiting || q->held) && !pmc_ring_busy(q->ring)) {
			/* only free blocks can wake these: look again shortly */
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
			continue;
		}
		if (!pmc_ring_waitable(q->ring) && !q->done)
			break;
	}
	q->in_poll = 0;
	return n;
}

/* --- statistics --- */

static void sample_volume(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *out,
			  uint64_t now_rt)
{
	struct pmc_volume_info vi;
	uint64_t oldest = atomic_load(&e->vols[vol].oldest_birth_ns);
	int error = atomic_load(&e->vols[vol].error);

	if (e->c && pmc_cache_volume_info(e->c, vol, &vi) == 0) {
		out->dirty_blocks += vi.nr_dirty;
		out->clean_blocks += vi.nr_clean;
		out->lost_blocks += vi.nr_lost;
		out->dirty_bytes += vi.nr_dirty * e->bs;
	}
	if (oldest && oldest != UINT64_MAX && oldest < now_rt &&
	    (now_rt - oldest) / 1000000ull > out->oldest_dirty_age_ms)
		out->oldest_dirty_age_ms = (now_rt - oldest) / 1000000ull;
	if (error && !out->error)
		out->error = error;
}

int pmc_engine_stats(struct pmc_engine *e, uint32_t vol, struct pmc_vol_stats *out)
{
	uint64_t now_rt = pmc_now_ns();

	memset(out, 0, sizeof(*out));
	if (vol != UINT32_MAX && !pmc_eng_evol(e, vol))
		return -ENOENT;
	pthread_mutex_lock(&e->lock);
	for (struct pmc_queue *q = e->queues; q; q = q->next) {
		for (uint32_t i = 0; i < e->nvols; i++)
			if (vol == UINT32_MAX || vol == i)
				pmc_stats_add(out, &q->stats[i]);
	}
	for (uint32_t i = 0; i < e->nvols; i++)
		if (vol == UINT32_MAX || vol == i)
			pmc_stats_add(out, &e->retired[i]);
	/* one volume's: not those of the volumes that held its slot before */
	if (vol != UINT32_MAX)
		pmc_stats_sub(out, &e->vols[vol].stats_base);
	pthread_mutex_unlock(&e->lock);
	for (uint32_t i = 0; i < e->nvols; i++)
		if (e->vols[i].disk && (vol == UINT32_MAX || vol == i))
			sample_volume(e, i, out, now_rt);
	if (vol == UINT32_MAX && e->c)
		out->evictions = atomic_load(&e->c->evictions);
	return 0;
}
