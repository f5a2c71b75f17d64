/* state.c - see state.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cache.h"
#include "lock.h"
#include "log.h"
#include "state.h"

#define MAX_VOLS 4096
/* a record whose last save failed after its rename: the file may say
 * either value (pmc_state_get reports it as not named) */
#define STATE_UNKNOWN (-1)

struct pmc_state {
	pthread_mutex_t lock;
	int lock_fd; /* PATH.lock, flock()ed: one process per file */
	char path[PATH_MAX];
	uint8_t uuid[16];
	unsigned n;
	struct state_rec {
		char name[PMC_VOLUME_NAME_MAX + 1];
		int dirty; /* PMC_STATE_*, or STATE_UNKNOWN */
		int asked; /* STATE_UNKNOWN: the value whose save may not be durable */
		char id[PMC_DISK_ID_MAX + 1]; /* its disk's identity, "" unknown */
	} v[MAX_VOLS]; /* in the order of their last change */
};

static int parse_uuid(const char *s, uint8_t uuid[16])
{
	for (int i = 0; i < 16; i++) {
		unsigned b;

		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return -1;
		uuid[i] = (uint8_t)b;
	}
	return s[32] == '\0' ? 0 : -1;
}

/* written; 1 is read too (the same records). 2 keeps out every pmcached
 * that reads version 1 without knowing "bypassed" or the identity column:
 * one would serve a bypassed volume's stale clean copies, or drop its
 * identity */
#define STATE_VERSION 2u

static int load(struct pmc_state *st, FILE *f, struct pmc_err *err)
{
	char line[256], name[128], word[16], uuid[64], id[128];
	unsigned lineno = 0, version;
	int k;

	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (lineno == 1) {
			if (sscanf(line, "pmcache-state %u %63s", &version, uuid) != 2 ||
			    version < 1 || version > STATE_VERSION || parse_uuid(uuid, st->uuid))
				return pmc_err_set(err, EINVAL,
						   "state file %s: line 1: not a pmcache state file "
						   "of version 1 to %u (one of a newer pmcached?)",
						   st->path, STATE_VERSION);
			continue;
		}
		id[0] = '\0';
		k = sscanf(line, "%127s %15s %127s", name, word, id);
		if (k < 2 || strlen(name) > PMC_VOLUME_NAME_MAX || strlen(id) > PMC_DISK_ID_MAX ||
		    (strcmp(word, "dirty") && strcmp(word, "clean") && strcmp(word, "bypassed")))
			return pmc_err_set(err, EINVAL, "state file %s: line %u: malformed record",
					   st->path, lineno);
		if (st->n == MAX_VOLS)
			return pmc_err_set(err, EINVAL, "state file %s: line %u: too many volumes",
					   st->path, lineno);
		for (unsigned i = 0; i < st->n; i++)
			if (!strcmp(st->v[i].name, name))
				return pmc_err_set(err, EINVAL,
						   "state file %s: line %u: volume %s recorded twice",
						   st->path, lineno, name);
		snprintf(st->v[st->n].name, sizeof(st->v[st->n].name), "%s", name);
		snprintf(st->v[st->n].id, sizeof(st->v[st->n].id), "%s", id);
		st->v[st->n].dirty = !strcmp(word, "dirty")	 ? PMC_STATE_DIRTY
				     : !strcmp(word, "bypassed") ? PMC_STATE_BYPASSED
								 : PMC_STATE_CLEAN;
		st->n++;
	}
	if (lineno == 0)
		return pmc_err_set(err, EINVAL, "state file %s: empty", st->path);
	return 0;
}

int pmc_state_open(const char *path, struct pmc_state **out, struct pmc_err *err)
{
	struct pmc_state *st;
	FILE *f;
	int rc = 0;

	*out = NULL;
	/* with ".new" or ".lock" appended, the name fits PATH_MAX too */
	if (strlen(path) + sizeof(".lock") > PATH_MAX)
		return pmc_err_set(err, ENAMETOOLONG, "state file %.64s...: path too long (%zu bytes)",
				   path, strlen(path));
	st = calloc(1, sizeof(*st));
	if (!st)
		return pmc_err_set(err, ENOMEM, "state file %s: out of memory", path);
	pthread_mutex_init(&st->lock, NULL);
	st->lock_fd = -1;
	snprintf(st->path, sizeof(st->path), "%s", path);
	{
		/* two processes saving one file would each write the other's
		 * records as they last read them: a dirty mark could go */
		char lk[PATH_MAX];

		snprintf(lk, sizeof(lk), "%s.lock", path);
		st->lock_fd = pmc_open_new(lk, 1, 0600);
		if (st->lock_fd < 0)
			rc = pmc_err_set(err, errno, "state file %s: %s", lk, strerror(errno));
		else if (flock(st->lock_fd, LOCK_EX | LOCK_NB))
			rc = pmc_err_set(err, errno == EWOULDBLOCK ? EBUSY : errno,
					 "state file %s: %s", path,
					 errno == EWOULDBLOCK ? "in use by another process (another "
								"pmcached with this state_dir?)"
							      : strerror(errno));
		if (rc) {
			pmc_state_close(st);
			return rc;
		}
	}
	f = fopen(path, "r");
	if (f) {
		rc = load(st, f, err);
		fclose(f);
	} else if (errno != ENOENT) {
		rc = pmc_err_set(err, errno, "state file %s: %s", path, strerror(errno));
	}
	if (rc) {
		pmc_state_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void pmc_state_close(struct pmc_state *st)
{
	if (!st)
		return;
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

int pmc_state_get(struct pmc_state *st, const char *volume)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&st->lock);
	/* a record whose last save may not be durable (its directory's fsync
	 * failed): the file says either the old value or the one asked.
	 * Clean or bypassed asked is the truth when it was asked (no dirty
	 * data for it in the pmem), and the file's older value errs only to
	 * dirty; a dirty one asked stays unknown, as if not named */
	for (unsigned i = 0; i < st->n; i++) {
		if (strcmp(st->v[i].name, volume))
			continue;
		if (st->v[i].dirty != STATE_UNKNOWN)
			rc = st->v[i].dirty;
		else if (st->v[i].asked == PMC_STATE_CLEAN || st->v[i].asked == PMC_STATE_BYPASSED)
			rc = st->v[i].asked;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int pmc_state_get_id(struct pmc_state *st, const char *volume, char *buf, size_t len)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&st->lock);
	for (unsigned i = 0; i < st->n; i++)
		if (!strcmp(st->v[i].name, volume) && st->v[i].id[0]) {
			snprintf(buf, len, "%s", st->v[i].id);
			rc = 0;
		}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

unsigned pmc_state_dirty_names(struct pmc_state *st, char *buf, size_t len)
{
	unsigned n = 0;
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	pthread_mutex_lock(&st->lock);
	for (unsigned i = 0; i < st->n; i++) {
		int k;

		if (st->v[i].dirty == PMC_STATE_CLEAN || st->v[i].dirty == PMC_STATE_BYPASSED)
			continue;
		n++;
		k = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", st->v[i].name);
		if (k > 0 && used + (size_t)k < len)
			used += (size_t)k;
	}
	pthread_mutex_unlock(&st->lock);
	return n;
}

void pmc_state_uuid(struct pmc_state *st, uint8_t uuid[16])
{
	pthread_mutex_lock(&st->lock);
	memcpy(uuid, st->uuid, 16);
	pthread_mutex_unlock(&st->lock);
}

/* write the whole file anew; under st->lock. *renamed: the new file took
 * the old one's place (a failure after that leaves the file new, but
 * perhaps not durable) */
static int save(struct pmc_state *st, int *renamed, struct pmc_err *err)
{
	char tmp[PATH_MAX + sizeof(".new")], dir[PATH_MAX];
	FILE *f;
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.new", st->path);
	f = pmc_fopen_new(tmp, 0600);
	if (!f)
		return pmc_err_set(err, errno, "state file %s: %s", tmp, strerror(errno));
	fprintf(f, "pmcache-state %u ", STATE_VERSION);
	for (int i = 0; i < 16; i++)
		fprintf(f, "%02x", st->uuid[i]);
	fputc('\n', f);
	for (unsigned i = 0; i < st->n; i++) {
		/* unknown is written dirty, or bypassed when that was asked:
		 * the volume's disk was written without the cache, and dirty
		 * would let the cache's older clean copies be served again */
		int v = st->v[i].dirty != STATE_UNKNOWN		    ? st->v[i].dirty
			: st->v[i].asked == PMC_STATE_BYPASSED ? PMC_STATE_BYPASSED
							       : PMC_STATE_DIRTY;

		fprintf(f, "%s %s%s%s\n", st->v[i].name,
			v == PMC_STATE_CLEAN	      ? "clean"
			: v == PMC_STATE_BYPASSED ? "bypassed"
						  : "dirty",
			st->v[i].id[0] ? " " : "", st->v[i].id);
	}
	/* a record lost to a failed write (ENOSPC) must not be renamed in */
	if (ferror(f) || fflush(f) || fsync(fileno(f)))
		rc = pmc_err_set(err, errno, "state file %s: %s", tmp, strerror(errno));
	if (fclose(f) && !rc)
		rc = pmc_err_set(err, errno, "state file %s: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, st->path))
		rc = pmc_err_set(err, errno, "state file %s: %s", st->path, strerror(errno));
	if (rc) {
		unlink(tmp);
		return rc;
	}
	*renamed = 1;
	snprintf(dir, sizeof(dir), "%s", st->path);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pmc_err_set(err, errno, "state file %s: directory: %s", st->path,
				   strerror(errno));
	if (fsync(fd))
		rc = pmc_err_set(err, errno, "state file %s: directory fsync: %s", st->path,
				 strerror(errno));
	close(fd);
	return rc;
}

/* move record from to position to (the others keep their order) */
static void move_record(struct pmc_state *st, unsigned from, unsigned to)
{
	struct state_rec r = st->v[from];

	if (from < to)
		memmove(&st->v[from], &st->v[from + 1], (to - from) * sizeof(r));
	else if (from > to)
		memmove(&st->v[to + 1], &st->v[to], (from - to) * sizeof(r));
	st->v[to] = r;
}

int pmc_state_set(struct pmc_state *st, const char *volume, int value, struct pmc_err *err)
{
	return pmc_state_record(st, volume, value, NULL, err);
}

int pmc_state_record(struct pmc_state *st, const char *volume, int value, const char *id,
		     struct pmc_err *err)
{
	unsigned i, was = 0, gone = 0;
	int rc, added = 0, renamed = 0, forgot = 0, prev = 0;
	struct state_rec old;
	char prev_id[PMC_DISK_ID_MAX + 1] = "";

	if (id && (!id[0] || strlen(id) > PMC_DISK_ID_MAX || strpbrk(id, " \t\n")))
		id = NULL; /* none known (or not one a record can hold) */

	pthread_mutex_lock(&st->lock);
	for (i = 0; i < st->n; i++)
		if (!strcmp(st->v[i].name, volume))
			break;
	if (i == st->n) {
		if (st->n == MAX_VOLS) {
			/* full: forget the clean record changed longest ago
			 * (a removed volume's, most likely). Not named, it
			 * counts as dirty: safe, but without the pmem that
			 * volume would be refused rather than run pass-through */
			for (gone = 0; gone < st->n && st->v[gone].dirty != PMC_STATE_CLEAN; gone++)
				;
			if (gone == st->n) {
				pthread_mutex_unlock(&st->lock);
				return pmc_err_set(err, ENOSPC,
						   "state file %s: %u volumes recorded, none clean",
						   st->path, st->n);
			}
			old = st->v[gone];
			move_record(st, gone, st->n - 1);
			st->n--;
			forgot = 1;
			i = st->n;
		}
		snprintf(st->v[i].name, sizeof(st->v[i].name), "%s", volume);
		st->v[i].id[0] = '\0';
		st->n++;
		added = 1;
	} else if (st->v[i].dirty == value && (!id || !strcmp(st->v[i].id, id))) {
		pthread_mutex_unlock(&st->lock);
		return 0;
	} else {
		/* records stay in the order of their last change */
		was = i;
		prev = st->v[i].dirty;
		memcpy(prev_id, st->v[i].id, sizeof(prev_id));
		move_record(st, i, st->n - 1);
		i = st->n - 1;
	}
	st->v[i].dirty = value;
	if (id)
		snprintf(st->v[i].id, sizeof(st->v[i].id), "%s", id);
	rc = save(st, &renamed, err);
	if (rc && renamed) {
		/* the file says the new value, but perhaps not durably (the
		 * directory's fsync failed): unknown, so that the next call
		 * of either value saves again; a forgotten record may still
		 * be in the file, which is safe (it said clean) */
		st->v[i].asked = value;
		st->v[i].dirty = STATE_UNKNOWN;
	} else if (rc && added) {
		/* the copy in memory stays what the file says, so that the
		 * next call saves again instead of taking the change as made */
		st->n--;
		if (forgot) {
			st->v[st->n++] = old;
			move_record(st, st->n - 1, gone);
		}
	} else if (rc) {
		st->v[i].dirty = prev; /* unknown stays unknown */
		memcpy(st->v[i].id, prev_id, sizeof(prev_id));
		move_record(st, i, was);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int pmc_state_set_uuid(struct pmc_state *st, const uint8_t uuid[16], struct pmc_err *err)
{
	uint8_t was[16];
	int rc, renamed = 0;

	pthread_mutex_lock(&st->lock);
	if (!memcmp(st->uuid, uuid, 16)) {
		pthread_mutex_unlock(&st->lock);
		return 0;
	}
	memcpy(was, st->uuid, 16);
	memcpy(st->uuid, uuid, 16);
	rc = save(st, &renamed, err);
	if (rc && !renamed)
		memcpy(st->uuid, was, 16);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int pmc_state_rebuild(struct pmc_state *st, struct pmc_cache *c, struct pmc_err *err)
{
	struct pmc_cache_info ci;
	struct pmc_volume_info vi;
	uint8_t was[16], zero[16] = {0};
	int rc, none;

	pmc_cache_get_info(c, &ci);
	pmc_state_uuid(st, was);
	if (!memcmp(was, ci.uuid, 16))
		return 0;
	none = !memcmp(was, zero, 16);
	if (none)
		pmc_cache_recount(c); /* (nothing to do once counted) */
	/* the disks were served through the other cache since this one last
	 * ran: what this one holds is older than they are. With no file (lost,
	 * or removed as pmcached's refusal says) the history is unknown: a
	 * volume with nothing dirty here loses only its clean copies, which may
	 * be older than its disk; one with dirty blocks keeps them as its
	 * newest data (refusing it would strand acknowledged writes) and is
	 * named. A crash before the new uuid is saved leaves this to redo */
	for (uint32_t i = 0; i < ci.max_volumes; i++) {
		if (pmc_cache_volume_info(c, i, &vi))
			continue;
		if (none && (vi.nr_dirty || vi.nr_lost)) {
			pmc_log(LOG_WARNING,
				"state file %s: none for this cache: volume %s keeps its %" PRIu64
				" dirty blocks here as its newest data (if its disk was served "
				"through another cache since, leave it out of the configuration "
				"and add it with volume add --replace-disk --discard-dirty)",
				st->path, vi.name, vi.nr_dirty + vi.nr_lost);
			continue;
		}
		rc = pmc_state_record(st, vi.name, PMC_STATE_BYPASSED,
				      vi.id_state == 1 ? vi.disk_id.text : NULL, err);
		if (rc)
			return rc;
	}
	return pmc_state_set_uuid(st, ci.uuid, err);
}
