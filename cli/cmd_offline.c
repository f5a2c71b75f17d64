/* cmd_offline.c - commands that work on the pmem or the disks directly,
 * without the daemon: check, format, dump, disks. check and dump open the
 * cache read-only (PMC_OPEN_RDONLY: not a single store; check --repair
 * reopens it writable only to recount counters that disagree with a sound
 * index); format refuses a
 * target that holds a pmcache superblock or any signature libblkid knows,
 * unless --force. All three refuse a pmem the running daemon serves.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cache.h"
#include "check.h"
#include "cli.h"
#include "format.h"
#include "lock.h"
#include "nvme_health.h"
#include "nvme_info.h"
#include "nvmf.h"
#include "poison.h"
#include "signature.h"
#include "pmem.h"

/* exit code of an offline command's error: as the daemon's, but a path
 * that is not there is a failure, not 5 "unknown volume" (pmcachectl(8)) */
static int exit_of(const struct pmc_err *err)
{
	return err->code == ENOENT ? PMC_EXIT_FAIL : pmc_cli_exit_of(err->code);
}

/* the pmem to work on: the argument, else the config's pmem.path */
static int target(struct pmc_cli_ctx *ctx, const char **path, struct pmc_err *err)
{
	if (ctx->a->npos >= 1)
		*path = ctx->a->pos[0];
	else if (ctx->pmem[0])
		*path = ctx->pmem;
	else {
		pmc_err_set(err, EINVAL,
			    "%s: name the pmem (a devdax device or file), or give -c CONFIG",
			    pmc_cli_cmd_name(ctx->a->cmd));
		return PMC_EXIT_USAGE;
	}
	return 0;
}

/* refuse a pmem that the running daemon serves (its status names it, and
 * not as unavailable) */
static int not_served(struct pmc_cli_ctx *ctx, const char *path, struct pmc_err *err)
{
	struct pmc_client cl;
	struct pmc_ctl_req req = {.cmd = PMC_CTL_STATUS};
	struct pmc_ctl_reply r;
	struct pmc_err e = {0};
	char a[PATH_MAX], b[PATH_MAX];
	int64_t pid = 0;
	int busy = 0;

	if (pmc_client_open(&cl, ctx->socket, ctx->a->timeout_s, &e))
		return 0; /* no daemon answers there */
	memset(&r, 0, sizeof(r));
	if (!pmc_client_send(&cl, &req, &e) && !pmc_client_recv(&cl, &r, &e) &&
	    r.kind == PMC_CTL_REPLY_OK && r.payload) {
		struct json_object *p;

		struct json_object *u;

		/* a daemon that could not open its pmem runs pass-through and
		 * holds no lock on it: the lock decides (open_pmem) */
		if (json_object_object_get_ex(r.payload, "pmem", &p) &&
		    json_object_is_type(p, json_type_string) && realpath(path, a) &&
		    realpath(json_object_get_string(p), b) && !strcmp(a, b) &&
		    !(json_object_object_get_ex(r.payload, "pmem_unavailable", &u) &&
		      json_object_get_boolean(u))) {
			busy = 1;
			if (json_object_object_get_ex(r.payload, "pid", &p))
				pid = json_object_get_int64(p);
		}
	}
	pmc_ctl_reply_free(&r);
	pmc_client_close(&cl);
	if (busy)
		return pmc_err_set(err, EBUSY,
				   "%s: served by pmcached (pid %" PRId64 "); stop it or use the online "
				   "command",
				   path, pid);
	return 0;
}

/* map the pmem and lock it: shared and read-only to read (check, dump
 * cannot change it), exclusive and writable to format; a cache that
 * pmcached or another command holds is refused, naming the holder */
static int open_pmem(const char *path, uint64_t create, enum pmc_lock_mode mode,
		     struct pmc_pmem **pm, struct pmc_err *err)
{
	char name[32];
	pid_t pid;
	int rc = mode == PMC_LOCK_SHARED ? pmc_pmem_open_ro(path, pm, err)
					 : pmc_pmem_open(path, create, pm, err);

	if (rc == -EACCES || rc == -EPERM)
		pmc_err_set(err, EACCES, "%s: permission denied", path);
	if (rc)
		return rc;
	rc = pmc_pmem_lock(*pm, mode, &pid, err);
	if (rc) {
		pmc_pmem_close(*pm);
		*pm = NULL;
		pmc_proc_name(pid, name, sizeof(name));
		pmc_err_clear(err);
		if (rc == -EBUSY && !strcmp(name, "pmcached"))
			return pmc_err_set(err, EBUSY,
					   "%s: served by pmcached (pid %ld); stop it or use the "
					   "online command",
					   path, (long)pid);
		if (rc == -EBUSY)
			return pmc_err_set(err, EBUSY, "%s: in use by %s (pid %ld)", path,
					   name[0] ? name : "another process", (long)pid);
		return pmc_err_set(err, -rc, "%s: cannot lock", path);
	}
	return 0;
}

/* the exit code of a refused pmc_cache_open */
static int open_exit(int rc)
{
	return rc == -EACCES ? PMC_EXIT_PERM : PMC_EXIT_CORRUPT;
}

/* open the cache at path read-only, under a lock of mode (exclusive: the
 * pmem mapped writable, for a repair); the exit code of a refusal, else 0 */
static int check_open(const char *path, enum pmc_lock_mode mode, struct pmc_pmem **pm,
		      struct pmc_cache **c, struct pmc_err *err)
{
	int rc;

	if (open_pmem(path, 0, mode, pm, err))
		return exit_of(err);
	rc = pmc_cache_open(*pm, PMC_OPEN_RDONLY, c, err);
	if (rc) {
		pmc_pmem_close(*pm);
		*pm = NULL;
		return open_exit(rc);
	}
	/* (a bad range in the metadata refused the open: a poisoned line
	 * would end the walk with SIGBUS) */
	return 0;
}

/*
 * check --repair of counters a clean close kept that disagree with a sound
 * index (the only damage a repair can undo without guessing: the index is
 * the truth they are counted from). Under the exclusive lock the check runs
 * again on a read-only open; only if it still finds counters alone wrong is
 * the cache opened writable (which records it not clean until the close, so
 * a cut in between leaves it to the daemon's recount as after a crash), the
 * counters forgotten and the close counts them from the index and keeps
 * those. Returns the volumes repaired, or the exit code of a refusal as -ex.
 */
static int repair_counts(const char *path, struct pmc_err *err)
{
	struct pmc_pmem *pm;
	struct pmc_cache *c;
	struct pmc_check_report rep;
	int rc, ex;

	if ((ex = check_open(path, PMC_LOCK_EXCLUSIVE, &pm, &c, err)))
		return -ex;
	rc = pmc_cache_check(c, &rep, err);
	pmc_cache_abandon(c);
	pmc_err_clear(err);
	/* changed since the shared check: nothing or more than counters
	 * wrong; nothing written */
	if (rc == 0 || rep.counts_bad == 0) {
		pmc_pmem_close(pm);
		return 0;
	}
	rc = pmc_cache_open(pm, 0, &c, err);
	if (rc) {
		pmc_pmem_close(pm);
		return -open_exit(rc);
	}
	pmc_cache_counts_forget(c);
	pmc_cache_close(c);
	pmc_pmem_close(pm);
	return (int)rep.counts_bad;
}

int pmc_cmd_check(struct pmc_cli_ctx *ctx, struct pmc_err *err)
{
	const char *path;
	struct pmc_pmem *pm = NULL;
	struct pmc_cache *c = NULL;
	struct pmc_check_report rep = {0};
	struct pmc_cache_info ci;
	char found[sizeof(err->msg)] = "";
	int rc, ex, repaired = 0;

	if ((ex = target(ctx, &path, err)))
		return ex;
	if (not_served(ctx, path, err))
		return PMC_EXIT_BUSY;
	if ((ex = check_open(path, PMC_LOCK_SHARED, &pm, &c, err)))
		return ex;
	rc = pmc_cache_check(c, &rep, err);
	if (rc && rep.counts_bad && ctx->a->repair) {
		snprintf(found, sizeof(found), "%s", err->msg);
		pmc_cache_abandon(c);
		pmc_pmem_close(pm);
		pmc_err_clear(err);
		repaired = repair_counts(path, err);
		if (repaired < 0)
			return -repaired;
		if ((ex = check_open(path, PMC_LOCK_SHARED, &pm, &c, err)))
			return ex;
		rc = pmc_cache_check(c, &rep, err);
	}
	pmc_cache_get_info(c, &ci);
	if (ctx->a->json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "pmem", json_object_new_string(path));
		json_object_object_add(o, "consistent", json_object_new_boolean(rc == 0));
		if (rc)
			json_object_object_add(o, "problem", json_object_new_string(err->msg));
		json_object_object_add(o, "linked", json_object_new_uint64(rep.linked));
		json_object_object_add(o, "live_dirty", json_object_new_uint64(rep.live_dirty));
		json_object_object_add(o, "live_clean", json_object_new_uint64(rep.live_clean));
		json_object_object_add(o, "stale", json_object_new_uint64(rep.stale));
		json_object_object_add(o, "orphans", json_object_new_uint64(rep.orphans));
		json_object_object_add(o, "free", json_object_new_uint64(rep.free));
		json_object_object_add(o, "lost", json_object_new_uint64(rep.lost));
		json_object_object_add(o, "bad", json_object_new_uint64(rep.bad));
		json_object_object_add(o, "max_chain", json_object_new_uint64(rep.max_chain));
		json_object_object_add(o, "last_close_clean", json_object_new_boolean(ci.was_clean));
		json_object_object_add(o, "counters_compared",
				       json_object_new_boolean(ci.counts_valid));
		json_object_object_add(o, "repaired", json_object_new_uint64((uint64_t)repaired));
		if (repaired)
			json_object_object_add(o, "repaired_problem", json_object_new_string(found));
		pmc_print_json(o, rc == 0, 0);
		json_object_put(o);
		ctx->printed = 1;
	} else {
		printf("pmem         %s (%" PRIu64 " blocks of %u bytes)\n", path, ci.nr_blocks,
		       ci.block_size);
		printf("last close   %s\n", ci.was_clean ? "clean" : "not clean (crash or kill)");
		printf("linked       %" PRIu64 " (dirty %" PRIu64 ", clean %" PRIu64
		       ", of removed volumes %" PRIu64 ")\n",
		       rep.linked, rep.live_dirty, rep.live_clean, rep.stale);
		printf("unlinked     %" PRIu64 " free, %" PRIu64
		       " orphans (reclaimed lazily by the allocator)\n",
		       rep.free, rep.orphans);
		if (rep.lost || rep.bad)
			printf("media errors %" PRIu64 " blocks of dirty data lost (reads fail), %" PRIu64
			       " blocks retired\n",
			       rep.lost, rep.bad);
		printf("longest hash chain %" PRIu64 "\n", rep.max_chain);
		printf("counters     %s\n",
		       ci.counts_valid ? "as kept at the last close, compared with the index"
				       : "not compared: not kept by the last close (a crash, or an "
					 "older build's); the daemon counts them at start");
		if (repaired)
			printf("repaired     the counters of %d volume%s, recounted from the index "
			       "(found: %s)\n",
			       repaired, repaired == 1 ? "" : "s", found);
		printf("result       %s\n", rc ? "INCONSISTENT" : "consistent");
		if (ctx->a->repair && !repaired)
			printf("repair       nothing repaired: %s\n",
			       rc ? "an inconsistent index is not repaired automatically; keep the "
				    "pmem for analysis (pmcachectl dump)"
				  : "orphans and blocks of removed volumes are reclaimed lazily");
	}
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	return rc ? PMC_EXIT_CORRUPT : 0;
}

static int format_at(struct pmc_cli_ctx *ctx, const char *path, struct pmc_err *err);

int pmc_cmd_format(struct pmc_cli_ctx *ctx, struct pmc_err *err)
{
	const char *path;
	int ex;

	if ((ex = target(ctx, &path, err)))
		return ex;
	if (not_served(ctx, path, err))
		return PMC_EXIT_BUSY;
	return format_at(ctx, path, err);
}

/* a format that fails leaves no file it created (--size: the retry with
 * another size would be refused by the one left), and never removes one
 * another process made meanwhile (pmc_pmem_discard) */
static int format_at(struct pmc_cli_ctx *ctx, const char *path, struct pmc_err *err)
{
	const struct pmc_cli_args *a = ctx->a;
	struct pmc_format_opts opts = {.block_size = a->block_size, .max_volumes = a->max_volumes};
	struct pmc_pmem *pm = NULL;
	struct pmc_cache *c = NULL;
	struct pmc_cache_info ci;
	char what[160] = "";
	char uuid[40];
	int rc;

	if (a->size) {
		struct stat st;

		if ((stat(path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) &&
		    pmc_pmem_may_create(path, "--size", err))
			return PMC_EXIT_FAIL;
	}
	if (open_pmem(path, a->size, PMC_LOCK_EXCLUSIVE, &pm, err))
		return exit_of(err);
	rc = pmc_pmem_signature(path, pm, what, sizeof(what));
	if (rc < 0) {
		pmc_pmem_discard(pm);
		pmc_err_set(err, -rc, "%s: cannot probe for signatures: %s", path, strerror(-rc));
		return PMC_EXIT_FAIL;
	}
	if (rc > 0 && !a->force) {
		pmc_pmem_discard(pm);
		pmc_err_set(err, EEXIST, "%s: holds %s; not formatted (--force overwrites it)", path,
			    what);
		return PMC_EXIT_SIGNATURE;
	}
	if (pmc_cache_format(pm, &opts, err)) {
		pmc_pmem_discard(pm);
		return exit_of(err);
	}
	if (pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, err)) {
		pmc_pmem_discard(pm);
		return PMC_EXIT_FAIL;
	}
	pmc_cache_get_info(c, &ci);
	pmc_uuid_str(ci.uuid, uuid, sizeof(uuid));
	if (a->json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "pmem", json_object_new_string(path));
		json_object_object_add(o, "uuid", json_object_new_string(uuid));
		json_object_object_add(o, "block_size", json_object_new_uint64(ci.block_size));
		json_object_object_add(o, "nr_blocks", json_object_new_uint64(ci.nr_blocks));
		json_object_object_add(o, "max_volumes", json_object_new_uint64(ci.max_volumes));
		json_object_object_add(o, "overwrote", json_object_new_string(rc > 0 ? what : ""));
		pmc_print_json(o, 1, 0);
		json_object_put(o);
	} else {
		char cap[24];

		pmc_fmt_bytes(ci.nr_blocks * ci.block_size, cap, sizeof(cap));
		if (rc > 0)
			printf("%s: overwrote %s (--force)\n", path, what);
		printf("%s: formatted, uuid %s, %s in %" PRIu64 " blocks of %u bytes, %u volume slots\n",
		       path, uuid, cap, ci.nr_blocks, ci.block_size, ci.max_volumes);
	}
	pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	return 0;
}

static const char *blk_state(uint64_t s)
{
	switch (s & 0xff) {
	case PMC_BLK_FREE:
		return "free";
	case PMC_BLK_CLEAN:
		return "clean";
	case PMC_BLK_DIRTY:
		return "dirty";
	case PMC_BLK_LOST:
		return "lost";
	case PMC_BLK_BAD:
		return "retired";
	}
	return "invalid";
}

static struct json_object *sb_json(const struct pmc_sb *s)
{
	struct json_object *o = json_object_new_object();
	char u[40];

#define U(f) json_object_object_add(o, #f, json_object_new_uint64(s->f))
	json_object_object_add(o, "magic_ok", json_object_new_boolean(s->magic == PMC_SB_MAGIC));
	json_object_object_add(o, "csum_ok", json_object_new_boolean(s->csum == pmc_sb_csum(s)));
	U(major);
	U(minor);
	U(compat);
	U(ro_compat);
	U(incompat);
	pmc_uuid_str(s->uuid, u, sizeof(u));
	json_object_object_add(o, "uuid", json_object_new_string(u));
	U(seq);
	U(pmem_size);
	U(block_size);
	U(max_volumes);
	U(nr_blocks);
	U(nr_buckets);
	U(vol_off);
	U(desc_off);
	U(index_off);
	U(data_off);
	U(boot_epoch);
	U(clean);
	U(format_time_ns);
	U(open_time_ns);
	U(clean_nr_dirty);
	U(clean_nr_clean);
	U(csum);
#undef U
	return o;
}

int pmc_cmd_dump(struct pmc_cli_ctx *ctx, struct pmc_err *err)
{
	const struct pmc_cli_args *a = ctx->a;
	const char *path;
	struct pmc_pmem *pm = NULL;
	struct pmc_cache *c = NULL;
	struct json_object *o, *sbs, *vols, *descs;
	const struct pmc_sb *sb = NULL;
	int ex, rc, bad_meta = 0;

	if ((ex = target(ctx, &path, err)))
		return ex;
	if (not_served(ctx, path, err))
		return PMC_EXIT_BUSY;
	if (open_pmem(path, 0, PMC_LOCK_SHARED, &pm, err))
		return exit_of(err);
	if (pm->size < PMC_VOL_OFF) {
		pmc_pmem_close(pm);
		pmc_err_set(err, EINVAL, "%s: too small for a pmcache superblock", path);
		return PMC_EXIT_FAIL;
	}
	/* the superblock the library accepts; else the newest copy with the magic */
	rc = pmc_cache_open(pm, PMC_OPEN_RDONLY, &c, err);
	o = json_object_new_object();
	sbs = json_object_new_array();
	for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
		const struct pmc_sb *s = (const void *)(pm->base + i * PMC_SB_SLOT);

		if (pmc_pmem_first_bad(pm, (uint64_t)i * PMC_SB_SLOT, PMC_SB_SLOT, NULL, NULL)) {
			/* not read: a poisoned line raises SIGBUS */
			struct json_object *b = json_object_new_object();

			json_object_object_add(b, "media_error", json_object_new_boolean(1));
			json_object_array_add(sbs, b);
			bad_meta = 1;
			continue;
		}
		json_object_array_add(sbs, sb_json(s));
		/* the tables of the newest copy whose checksum holds (the one
		 * an open takes, unless its geometry is wrong); of the newest
		 * with the magic only when no checksum holds */
		if (s->magic != PMC_SB_MAGIC)
			continue;
		if (s->csum == pmc_sb_csum(s) &&
		    (!sb || sb->csum != pmc_sb_csum(sb) || s->seq > sb->seq))
			sb = s;
		else if (s->csum != pmc_sb_csum(s) && (!sb || (sb->csum != pmc_sb_csum(sb) &&
							       s->seq > sb->seq)))
			sb = s;
	}

	/* a bad range in the metadata: no table is walked (a poisoned line
	 * would end the dump with SIGBUS). The open refused one below the
	 * accepted superblock's data area; when the open failed, no copy's
	 * geometry is trusted: any bad range stops the walk */
	if (rc) {
		struct pmc_err merr = {0};
		char why[sizeof(err->msg)];

		if (pmc_pmem_meta_badblocks(pm, pm->size, &merr)) {
			bad_meta = 1;
			snprintf(why, sizeof(why), "%s", err->msg);
			if (rc != -EIO)
				pmc_err_set(err, -rc,
					    "%s; no table walked: the pmem lists bad ranges and no "
					    "superblock's geometry is trusted",
					    why);
		}
	}
	json_object_object_add(o, "pmem", json_object_new_string(path));
	json_object_object_add(o, "size_bytes", json_object_new_uint64(pm->size));
	json_object_object_add(o, "valid", json_object_new_boolean(rc == 0));
	if (rc)
		json_object_object_add(o, "problem", json_object_new_string(err->msg));
	json_object_object_add(o, "superblocks", sbs);
	if (sb)
		json_object_object_add(o, "tables_of_copy",
				       json_object_new_uint64(
					       (uint64_t)((const char *)sb - pm->base) / PMC_SB_SLOT));
	vols = json_object_new_array();
	descs = json_object_new_array();
	/* the tables of that copy, when they lie inside the pmem at aligned
	 * offsets (a damaged copy may say anything) */
	if (sb && !bad_meta && sb->vol_off <= pm->size && sb->vol_off % 8 == 0 &&
	    sb->max_volumes <= 4096 &&
	    sb->vol_off + (uint64_t)sb->max_volumes * sizeof(struct pmc_vol) <= pm->size) {
		for (uint32_t i = 0; i < sb->max_volumes; i++) {
			const struct pmc_vol *v =
				(const void *)(pm->base + sb->vol_off + i * sizeof(struct pmc_vol));
			struct json_object *vo;
			char u[40];

			if (PMC_VOL_STATE(v->gen_state) == PMC_VOL_FREE && !a->all &&
			    !PMC_VOL_GEN(v->gen_state))
				continue;
			vo = json_object_new_object();
			json_object_object_add(vo, "slot", json_object_new_uint64(i));
			json_object_object_add(vo, "state",
					       json_object_new_string(
						       PMC_VOL_STATE(v->gen_state) == PMC_VOL_ACTIVE
							       ? "active"
							       : PMC_VOL_STATE(v->gen_state) ? "bad"
											   : "free"));
			json_object_object_add(vo, "gen",
					       json_object_new_uint64(PMC_VOL_GEN(v->gen_state)));
			json_object_object_add(vo, "name",
					       json_object_new_string_len(v->name, (int)strnlen(v->name, sizeof(v->name))));
			json_object_object_add(vo, "disk",
					       json_object_new_string_len(v->disk, (int)strnlen(v->disk, sizeof(v->disk))));
			json_object_object_add(vo, "disk_id",
					       json_object_new_string_len(v->disk_id, (int)strnlen(v->disk_id, sizeof(v->disk_id))));
			json_object_object_add(vo, "disk_bytes", json_object_new_uint64(v->disk_bytes));
			json_object_object_add(vo, "size_bytes", json_object_new_uint64(v->size_bytes));
			pmc_uuid_str(v->uuid, u, sizeof(u));
			json_object_object_add(vo, "uuid", json_object_new_string(u));
			json_object_object_add(vo, "add_time_ns", json_object_new_uint64(v->add_time_ns));
			json_object_object_add(vo, "clean_nr_dirty",
					       json_object_new_uint64(v->clean_nr_dirty));
			json_object_object_add(vo, "clean_nr_clean",
					       json_object_new_uint64(v->clean_nr_clean));
			json_object_object_add(vo, "csum", json_object_new_uint64(v->csum));
			json_object_array_add(vols, vo);
		}
	}
	if (sb && !bad_meta && sb->desc_off <= pm->size && sb->desc_off % 8 == 0 &&
	    sb->nr_blocks <= (pm->size - sb->desc_off) / sizeof(struct pmc_desc)) {
		uint64_t shown = 0;

		for (uint64_t b = 0; b < sb->nr_blocks && (a->all || shown < a->limit); b++) {
			const struct pmc_desc *d =
				(const void *)(pm->base + sb->desc_off + b * sizeof(struct pmc_desc));
			struct json_object *dobj;

			if ((d->state & 0xff) == PMC_BLK_FREE && !d->next && !a->all)
				continue;
			dobj = json_object_new_object();
			json_object_object_add(dobj, "block", json_object_new_uint64(b));
			json_object_object_add(dobj, "state", json_object_new_string(blk_state(d->state)));
			json_object_object_add(dobj, "vol", json_object_new_uint64(d->vol));
			json_object_object_add(dobj, "vol_gen", json_object_new_uint64(d->vol_gen));
			json_object_object_add(dobj, "lba", json_object_new_uint64(d->lba));
			json_object_object_add(dobj, "next", json_object_new_uint64(d->next));
			json_object_object_add(dobj, "pins",
					       json_object_new_uint64(PMC_REF_PINS(d->ref)));
			json_object_object_add(dobj, "epoch",
					       json_object_new_uint64(PMC_REF_EPOCH(d->ref)));
			json_object_object_add(dobj, "birth_ns", json_object_new_uint64(d->birth_ns));
			json_object_object_add(dobj, "csum", json_object_new_uint64(d->csum));
			json_object_array_add(descs, dobj);
			shown++;
		}
	}
	json_object_object_add(o, "volumes", vols);
	json_object_object_add(o, "descriptors", descs);
	if (a->json) {
		pmc_print_json(o, rc == 0, 0);
		ctx->printed = 1;
	} else {
		printf("pmem %s, %" PRIu64 " bytes: %s%s\n", path, pm->size,
		       rc ? "NOT VALID: " : "valid cache", rc ? err->msg : "");
		for (unsigned i = 0; i < PMC_SB_COPIES; i++) {
			struct json_object *s = json_object_array_get_idx(sbs, i);

			printf("\nsuperblock copy %u\n", i);
			json_object_object_foreach(s, k, v)
			printf("  %-16s %s\n", k, json_object_get_string(v));
		}
		{
			static const char *const h[] = {"SLOT", "STATE",   "GEN",  "NAME",
							"DISK", "DISK ID", "SIZE", "UUID"};
			static const int r[] = {1, 0, 1, 0, 0, 0, 1, 0};
			struct pmc_tab t;

			pmc_tab_init(&t, 8, h, r);
			for (size_t i = 0; i < json_object_array_length(vols); i++) {
				struct json_object *v = json_object_array_get_idx(vols, i);
				char size[24];
				const char *row[8], *id;

				pmc_fmt_bytes(json_object_get_uint64(json_object_object_get(v, "size_bytes")),
					      size, sizeof(size));
				row[0] = json_object_get_string(json_object_object_get(v, "slot"));
				row[1] = json_object_get_string(json_object_object_get(v, "state"));
				row[2] = json_object_get_string(json_object_object_get(v, "gen"));
				row[3] = json_object_get_string(json_object_object_get(v, "name"));
				row[4] = json_object_get_string(json_object_object_get(v, "disk"));
				id = json_object_get_string(json_object_object_get(v, "disk_id"));
				row[5] = id && *id ? id : "-";
				row[6] = size;
				row[7] = json_object_get_string(json_object_object_get(v, "uuid"));
				pmc_tab_row(&t, row);
			}
			printf("\nvolume table (%zu slot%s shown", t.rows, t.rows == 1 ? "" : "s");
			if (sb)
				printf(", of superblock copy %u",
				       (unsigned)(((const char *)sb - pm->base) / PMC_SB_SLOT));
			printf(")\n");
			if (t.rows)
				pmc_tab_print(&t, stdout);
			pmc_tab_free(&t);
		}
		{
			static const char *const h[] = {"BLOCK", "STATE", "VOL",  "GEN",
							"LBA",	 "NEXT",  "PINS", "EPOCH"};
			static const int r[] = {1, 0, 1, 1, 1, 1, 1, 1};
			static const char *const keys[] = {"block", "state", "vol",  "vol_gen",
							   "lba",   "next",  "pins", "epoch"};
			struct pmc_tab t;

			pmc_tab_init(&t, 8, h, r);
			for (size_t i = 0; i < json_object_array_length(descs); i++) {
				struct json_object *d = json_object_array_get_idx(descs, i);
				const char *row[8];

				for (unsigned k = 0; k < 8; k++)
					row[k] = json_object_get_string(json_object_object_get(d, keys[k]));
				pmc_tab_row(&t, row);
			}
			printf("\ndescriptors in use (%zu shown%s)\n", t.rows,
			       a->all ? "" : "; --limit N or --all for more");
			if (t.rows)
				pmc_tab_print(&t, stdout);
			pmc_tab_free(&t);
		}
	}
	json_object_put(o);
	if (c)
		pmc_cache_abandon(c);
	pmc_pmem_close(pm);
	return rc ? PMC_EXIT_CORRUPT : 0;
}

static int read_sys(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	buf[0] = '\0';
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

int pmc_cmd_disks(struct pmc_cli_ctx *ctx, struct pmc_err *err)
{
	struct pmc_nvme_ns *list = NULL;
	size_t nr = 0;
	struct json_object *arr = json_object_new_array(), *ctrls;
	DIR *dir;
	struct dirent *de;
	int rc;

	rc = pmc_nvme_list(&list, &nr, err);
	if (rc && rc != -ENOENT) {
		json_object_put(arr);
		return exit_of(err);
	}
	for (size_t i = 0; i < nr; i++) {
		struct pmc_nvme_ns *ns = &list[i];
		struct pmc_nvme_health h;
		struct pmc_err he = {0};
		struct json_object *o = json_object_new_object();
		char ctrl[64], cw[96];

		snprintf(ctrl, sizeof(ctrl), "/dev/%s", ns->ctrl[0] ? ns->ctrl : ns->name);
		json_object_object_add(o, "device", json_object_new_string(ns->path));
		json_object_object_add(o, "type", json_object_new_string("nvme"));
		json_object_object_add(o, "model", json_object_new_string(ns->model));
		json_object_object_add(o, "serial", json_object_new_string(ns->serial));
		json_object_object_add(o, "firmware", json_object_new_string(ns->firmware));
		json_object_object_add(o, "size_bytes", json_object_new_uint64(ns->size_bytes));
		if (pmc_nvme_health_read(ctrl, &h, &he) && pmc_nvme_health_read(ns->path, &h, &he)) {
			json_object_object_add(o, "health_error", json_object_new_string(he.msg));
		} else {
			pmc_nvme_crit_text(h.critical_warning, cw, sizeof(cw));
			json_object_object_add(o, "temperature_c", json_object_new_int(h.temperature_c));
			json_object_object_add(o, "percent_used", json_object_new_int(h.percent_used));
			json_object_object_add(o, "media_errors", json_object_new_uint64(h.media_errors));
			json_object_object_add(o, "critical_warning",
					       json_object_new_int(h.critical_warning));
			json_object_object_add(o, "critical_warning_text", json_object_new_string(cw));
			json_object_object_add(o, "available_spare_pct",
					       json_object_new_int(h.avail_spare_pct));
			json_object_object_add(o, "power_on_hours",
					       json_object_new_uint64(h.power_on_hours));
			json_object_object_add(o, "unsafe_shutdowns",
					       json_object_new_uint64(h.unsafe_shutdowns));
		}
		json_object_array_add(arr, o);
	}
	pmc_nvme_list_free(list);
	/* other disks: sysfs basics */
	dir = opendir("/sys/block");
	while (dir && (de = readdir(dir))) {
		char p[512], model[64], size[32], rot[8], state[32];
		struct json_object *o;

		if (de->d_name[0] == '.' || !strncmp(de->d_name, "nvme", 4) ||
		    !strncmp(de->d_name, "loop", 4) || !strncmp(de->d_name, "ram", 3) ||
		    !strncmp(de->d_name, "zram", 4))
			continue;
		snprintf(p, sizeof(p), "/sys/block/%s/size", de->d_name);
		if (read_sys(p, size, sizeof(size)) || !strcmp(size, "0"))
			continue;
		snprintf(p, sizeof(p), "/sys/block/%s/device/model", de->d_name);
		read_sys(p, model, sizeof(model));
		snprintf(p, sizeof(p), "/sys/block/%s/queue/rotational", de->d_name);
		read_sys(p, rot, sizeof(rot));
		snprintf(p, sizeof(p), "/sys/block/%s/device/state", de->d_name);
		read_sys(p, state, sizeof(state));
		o = json_object_new_object();
		snprintf(p, sizeof(p), "/dev/%s", de->d_name);
		json_object_object_add(o, "device", json_object_new_string(p));
		json_object_object_add(o, "type",
				       json_object_new_string(!strncmp(de->d_name, "ublkb", 5) ? "ublk"
							      : !strncmp(de->d_name, "dm-", 3)  ? "dm"
							      : !strcmp(rot, "1")		? "hdd"
												: "block"));
		json_object_object_add(o, "model", json_object_new_string(model));
		json_object_object_add(o, "size_bytes",
				       json_object_new_uint64(strtoull(size, NULL, 10) * 512));
		json_object_object_add(o, "rotational", json_object_new_boolean(!strcmp(rot, "1")));
		json_object_object_add(o, "state", json_object_new_string(state[0] ? state : "-"));
		json_object_array_add(arr, o);
	}
	if (dir)
		closedir(dir);
	/* NVMe-oF controllers, beside the local NVMe */
	{
		struct pmc_nvmf_ctrl *fc = NULL;
		struct pmc_err fe = {0};
		size_t nfc = 0;

		ctrls = json_object_new_array();
		if (pmc_nvmf_list(&fc, &nfc, &fe) == 0) {
			for (size_t i = 0; i < nfc; i++) {
				struct json_object *o = json_object_new_object();

				json_object_object_add(o, "controller",
						       json_object_new_string(fc[i].name));
				json_object_object_add(o, "transport",
						       json_object_new_string(fc[i].transport));
				json_object_object_add(o, "address",
						       json_object_new_string(fc[i].address));
				json_object_object_add(o, "state",
						       json_object_new_string(fc[i].state));
				json_object_object_add(o, "subsysnqn",
						       json_object_new_string(fc[i].subsysnqn));
				json_object_object_add(o, "namespaces",
						       json_object_new_string(fc[i].namespaces));
				json_object_array_add(ctrls, o);
			}
			free(fc);
		}
	}
	if (ctx->a->json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "disks", arr);
		json_object_object_add(o, "fabric_controllers", ctrls);
		pmc_print_json(o, 1, 0);
		json_object_put(o);
		return 0;
	}
	{
		static const char *const h[] = {"DEVICE", "TYPE", "MODEL",   "SERIAL",	  "FIRMWARE",
						"SIZE",	  "TEMP", "USED",    "MEDIA_ERR", "WARNINGS"};
		static const int r[] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 0};
		struct pmc_tab t;

		pmc_tab_init(&t, 10, h, r);
		for (size_t i = 0; i < json_object_array_length(arr); i++) {
			struct json_object *o = json_object_array_get_idx(arr, i), *v;
			char size[24], temp[16] = "-", used[16] = "-", me[24] = "-";
			const char *row[10];
			int nvme = !strcmp(json_object_get_string(json_object_object_get(o, "type")), "nvme");

			pmc_fmt_bytes(json_object_get_uint64(json_object_object_get(o, "size_bytes")), size,
				      sizeof(size));
			if (json_object_object_get_ex(o, "temperature_c", &v))
				snprintf(temp, sizeof(temp), "%d \u00b0C", json_object_get_int(v));
			if (json_object_object_get_ex(o, "percent_used", &v))
				snprintf(used, sizeof(used), "%d%%", json_object_get_int(v));
			if (json_object_object_get_ex(o, "media_errors", &v))
				snprintf(me, sizeof(me), "%s", json_object_get_string(v));
			row[0] = json_object_get_string(json_object_object_get(o, "device"));
			row[1] = json_object_get_string(json_object_object_get(o, "type"));
			row[2] = json_object_get_string(json_object_object_get(o, "model"));
			row[3] = nvme ? json_object_get_string(json_object_object_get(o, "serial")) : "-";
			row[4] = nvme ? json_object_get_string(json_object_object_get(o, "firmware")) : "-";
			row[5] = size;
			row[6] = temp;
			row[7] = used;
			row[8] = me;
			row[9] = json_object_object_get_ex(o, "critical_warning_text", &v)
					 ? json_object_get_string(v)
				 : json_object_object_get_ex(o, "health_error", &v)
					 ? json_object_get_string(v)
					 : "-";
			if (!*row[2])
				row[2] = "-";
			pmc_tab_row(&t, row);
		}
		if (t.rows)
			pmc_tab_print(&t, stdout);
		else
			puts("no disks");
		pmc_tab_free(&t);
	}
	if (json_object_array_length(ctrls)) {
		static const char *const h[] = {"CONTROLLER", "TRANSPORT", "ADDRESS",
						"STATE",      "SUBSYSTEM", "NAMESPACES"};
		static const int r[] = {0, 0, 0, 0, 0, 0};
		struct pmc_tab t;

		pmc_tab_init(&t, 6, h, r);
		for (size_t i = 0; i < json_object_array_length(ctrls); i++) {
			struct json_object *o = json_object_array_get_idx(ctrls, i);
			const char *row[6];

			row[0] = json_object_get_string(json_object_object_get(o, "controller"));
			row[1] = json_object_get_string(json_object_object_get(o, "transport"));
			row[2] = json_object_get_string(json_object_object_get(o, "address"));
			row[3] = json_object_get_string(json_object_object_get(o, "state"));
			row[4] = json_object_get_string(json_object_object_get(o, "subsysnqn"));
			row[5] = json_object_get_string(json_object_object_get(o, "namespaces"));
			for (int k = 0; k < 6; k++)
				if (!row[k] || !*row[k])
					row[k] = "-";
			pmc_tab_row(&t, row);
		}
		puts("");
		puts("NVMe-oF controllers:");
		pmc_tab_print(&t, stdout);
		pmc_tab_free(&t);
	}
	json_object_put(ctrls);
	json_object_put(arr);
	return 0;
}
