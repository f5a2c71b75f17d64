/* nvmf.c - NVMe-oF disks through libnvme (see nvmf.h).
 *
 * Owns nothing across calls: each call builds a libnvme topology tree
 * (nvme_scan_topology, which reads sysfs), walks it and frees it. The
 * namespace's NGUID and UUID are read from the block device's sysfs
 * attributes, not from libnvme's namespace object: libnvme fills those by
 * an Identify command, which fails while the controller has no path, and a
 * namespace must still be recognised then (its block device stays).
 *
 * Thread-safe as far as libnvme is: no globals here. libnvme's messages go
 * to /dev/null; failures come back as errno and are named in err.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <libnvme.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "nvmf.h"

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

static int str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

const char *pmc_nvmf_default_trsvcid(const struct pmc_config_nvmf *n)
{
	if (n->transport != PMC_CONFIG_TR_TCP && n->transport != PMC_CONFIG_TR_RDMA)
		return "";
	return n->discovery ? "8009" : "4420";
}

static const char *trsvcid_of(const struct pmc_config_nvmf *n)
{
	return n->trsvcid[0] ? n->trsvcid : pmc_nvmf_default_trsvcid(n);
}

/* a tree of the kernel's NVMe topology; NULL with err set */
static nvme_root_t scan(FILE **sink, struct pmc_err *err)
{
	nvme_root_t r;

	*sink = fopen("/dev/null", "w");
	r = nvme_create_root(*sink, LOG_EMERG);
	if (!r) {
		pmc_err_set(err, ENOMEM, "libnvme: cannot create the topology root");
		goto fail;
	}
	errno = 0;
	if (nvme_scan_topology(r, NULL, NULL) < 0 && errno != ENOENT) {
		int e = errno ? errno : EIO;

		pmc_err_set(err, e, "libnvme: scanning the NVMe topology in sysfs: %s",
			    strerror(e));
		nvme_free_tree(r);
		goto fail;
	}
	return r;
fail:
	if (*sink)
		fclose(*sink);
	*sink = NULL;
	return NULL;
}

static void scan_free(nvme_root_t r, FILE *sink)
{
	nvme_free_tree(r);
	if (sink)
		fclose(sink);
}

/* a sysfs attribute of block device name, trimmed; "" if absent */
static void blk_attr(const char *name, const char *attr, char *buf, size_t len)
{
	char p[128];
	FILE *f;

	buf[0] = '\0';
	snprintf(p, sizeof(p), "/sys/block/%s/%s", name, attr);
	f = fopen(p, "r");
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

/* hex digits of s, dashes skipped, lower case, into out (len bytes) */
static void hex_only(const char *s, char *out, size_t len)
{
	size_t n = 0;

	for (; *s && n + 1 < len; s++) {
		if (*s == '-')
			continue;
		out[n++] = (char)(*s >= 'A' && *s <= 'F' ? *s - 'A' + 'a' : *s);
	}
	out[n] = '\0';
}

static int ns_matches(nvme_ns_t ns, const struct pmc_config_nvmf *n)
{
	const char *name = nvme_ns_get_name(ns);
	char got[64], a[40], b[40];

	if (!name)
		return 0;
	if (n->nsid) {
		blk_attr(name, "nsid", got, sizeof(got));
		if (strtoul(got, NULL, 10) != n->nsid && (uint32_t)nvme_ns_get_nsid(ns) != n->nsid)
			return 0;
	}
	if (n->nguid[0]) {
		blk_attr(name, "nguid", got, sizeof(got));
		hex_only(got, a, sizeof(a));
		hex_only(n->nguid, b, sizeof(b));
		if (strcmp(a, b))
			return 0;
	}
	if (n->uuid[0]) {
		blk_attr(name, "uuid", got, sizeof(got));
		hex_only(got, a, sizeof(a));
		hex_only(n->uuid, b, sizeof(b));
		if (strcmp(a, b))
			return 0;
	}
	return 1;
}

static int ctrl_matches(nvme_ctrl_t c, const struct pmc_config_nvmf *n)
{
	if (!str_eq(nvme_ctrl_get_transport(c), pmc_config_transport_name(n->transport)))
		return 0;
	if (nvme_ctrl_is_discovery_ctrl(c) ||
	    str_eq(nvme_ctrl_get_subsysnqn(c), NVME_DISC_SUBSYS_NAME))
		return 0;
	if (n->discovery) /* the address came from the discovery log */
		return 1;
	if (n->traddr[0] && !str_eq(nvme_ctrl_get_traddr(c), n->traddr))
		return 0;
	if (trsvcid_of(n)[0] && !str_eq(nvme_ctrl_get_trsvcid(c), trsvcid_of(n)))
		return 0;
	return 1;
}

static void fill_path(struct pmc_nvmf_path *p, nvme_ctrl_t c, nvme_ns_t ns)
{
	copy_str(p->ctrl, sizeof(p->ctrl), nvme_ctrl_get_name(c));
	copy_str(p->state, sizeof(p->state), nvme_ctrl_get_state(c));
	copy_str(p->address, sizeof(p->address), nvme_ctrl_get_address(c));
	p->dev[0] = '\0';
	if (ns && nvme_ns_get_name(ns))
		snprintf(p->dev, sizeof(p->dev), "/dev/%s", nvme_ns_get_name(ns));
}

/* the best controller of the subsystem and its namespace: a live one first */
static int find_in(nvme_root_t r, const struct pmc_config_nvmf *n, struct pmc_nvmf_path *p)
{
	nvme_host_t h;
	nvme_subsystem_t s;
	nvme_ctrl_t c;
	nvme_ns_t ns;
	int found = 0, found_live = 0;

	nvme_for_each_host(r, h)
	{
		if (n->hostnqn[0] && !str_eq(nvme_host_get_hostnqn(h), n->hostnqn))
			continue;
		nvme_for_each_subsystem(h, s)
		{
			nvme_ns_t head = NULL;

			if (!str_eq(nvme_subsystem_get_nqn(s), n->subsysnqn))
				continue;
			/* native multipath: the block device is the subsystem's */
			nvme_subsystem_for_each_ns(s, ns)
			{
				if (ns_matches(ns, n)) {
					head = ns;
					break;
				}
			}
			nvme_subsystem_for_each_ctrl(s, c)
			{
				nvme_ns_t own = NULL;
				int live;

				if (!ctrl_matches(c, n))
					continue;
				nvme_ctrl_for_each_ns(c, ns)
				{
					if (ns_matches(ns, n)) {
						own = ns;
						break;
					}
				}
				live = str_eq(nvme_ctrl_get_state(c), "live");
				if (found && (found_live || !live))
					continue;
				fill_path(p, c, head ? head : own);
				found = 1;
				found_live = live;
			}
		}
	}
	return found;
}

int pmc_nvmf_find(const struct pmc_config_nvmf *n, struct pmc_nvmf_path *p, struct pmc_err *err)
{
	FILE *sink;
	nvme_root_t r;
	int found;

	memset(p, 0, sizeof(*p));
	r = scan(&sink, err);
	if (!r)
		return -err->code;
	found = find_in(r, n, p);
	scan_free(r, sink);
	return found ? 0 : -ENOENT;
}

static void fabrics_config(const struct pmc_config_nvmf *n, struct nvme_fabrics_config *cfg)
{
	nvmf_default_config(cfg);
	cfg->ctrl_loss_tmo = n->ctrl_loss_tmo;
	cfg->fast_io_fail_tmo = n->fast_io_fail_tmo;
	cfg->reconnect_delay = n->reconnect_delay;
	cfg->host_traddr = n->host_traddr[0] ? (char *)n->host_traddr : NULL;
	cfg->host_iface = n->host_iface[0] ? (char *)n->host_iface : NULL;
}

static const char *or_null(const char *s)
{
	return s && s[0] ? s : NULL;
}

/* libnvme's connect errors (ENVME_CONNECT_*, from 1000 up) as an errno */
static int connect_errno(int e)
{
	switch (e) {
	case ENVME_CONNECT_ALREADY:
		return EALREADY;
	case ENVME_CONNECT_CONNREFUSED:
		return ECONNREFUSED;
	case ENVME_CONNECT_ADDRINUSE:
		return EADDRINUSE;
	case ENVME_CONNECT_INVAL:
	case ENVME_CONNECT_INVAL_TR:
	case ENVME_CONNECT_TARG:
	case ENVME_CONNECT_AARG:
	case ENVME_CONNECT_ADDRFAM:
		return EINVAL;
	case ENVME_CONNECT_NODEV:
		return ENODEV;
	case ENVME_CONNECT_OPNOTSUPP:
		return EOPNOTSUPP;
	default:
		return e > 0 && e < 1000 ? e : EIO;
	}
}

static const char *connect_strerror(int e)
{
	return e >= 1000 ? nvme_errno_to_string(e) : strerror(e ? e : EIO);
}

/*
 * The host to connect as: disk.hostnqn/hostid, else /etc/nvme/hostnqn and
 * /etc/nvme/hostid. Without a host id, the UUID of a
 * "nqn.2014-08.org.nvmexpress:uuid:<uuid>" host NQN: the kernel would
 * otherwise pair the NQN with its own default host's id and refuse the
 * connect ("found same hostid but different hostnqn").
 */
static nvme_host_t host_of(nvme_root_t r, const struct pmc_config_nvmf *n)
{
	char *nqn = n->hostnqn[0] ? strdup(n->hostnqn) : nvmf_hostnqn_from_file();
	char *id = n->hostid[0] ? strdup(n->hostid) : nvmf_hostid_from_file();
	const char *u;
	nvme_host_t h = NULL;

	if (!nqn)
		nqn = nvmf_hostnqn_generate();
	if (!nqn)
		goto out;
	u = strstr(nqn, ":uuid:");
	if (!id && u && strlen(u + 6) == 36)
		id = strdup(u + 6);
	h = nvme_lookup_host(r, nqn, id);
out:
	free(nqn);
	free(id);
	return h;
}

/* the subsystem's entry in the discovery log of the controller at
 * traddr:trsvcid, connected; the discovery controller is disconnected */
static int connect_discovered(nvme_root_t r, nvme_host_t h, const struct pmc_config_nvmf *n,
			      const struct nvme_fabrics_config *cfg, const char *label,
			      char *made, size_t made_len, struct pmc_err *err)
{
	const char *tr = pmc_config_transport_name(n->transport);
	struct nvme_fabrics_config dcfg = *cfg;
	struct nvmf_discovery_log *log = NULL;
	nvme_ctrl_t dc, c = NULL;
	uint64_t nr;
	int rc, matched = 0;

	dc = nvme_create_ctrl(r, NVME_DISC_SUBSYS_NAME, tr, or_null(n->traddr),
			      or_null(n->host_traddr), or_null(n->host_iface),
			      or_null(trsvcid_of(n)));
	if (!dc)
		return pmc_err_set(err, ENOMEM, "%s: out of memory", label);
	dcfg.ctrl_loss_tmo = 0; /* a discovery controller is only asked once */
	errno = 0;
	if (nvmf_add_ctrl(h, dc, &dcfg) < 0) {
		int e = errno;

		nvme_free_ctrl(dc);
		return pmc_err_set(err, connect_errno(e),
				   "%s: connecting the discovery controller at %s:%s: %s", label,
				   n->traddr, trsvcid_of(n), connect_strerror(e));
	}
	if (nvmf_get_discovery_log(dc, &log, 4) < 0 || !log) {
		rc = errno ? errno : EIO;
		pmc_err_set(err, rc, "%s: reading the discovery log at %s:%s: %s", label, n->traddr,
			    trsvcid_of(n), strerror(rc));
		goto disconnect;
	}
	nr = le64toh(log->numrec);
	rc = ENOENT;
	for (uint64_t i = 0; i < nr && i < 1024; i++) {
		struct nvmf_disc_log_entry *e = &log->entries[i];
		char nqn[NVME_NQN_LENGTH + 1];
		bool discover = false;

		snprintf(nqn, sizeof(nqn), "%.*s", NVME_NQN_LENGTH, e->subnqn);
		nqn[strcspn(nqn, " ")] = '\0';
		if (strcmp(nqn, n->subsysnqn) || !str_eq(nvmf_trtype_str(e->trtype), tr))
			continue;
		matched++;
		errno = 0;
		c = nvmf_connect_disc_entry(h, e, cfg, &discover);
		if (c)
			copy_str(made, made_len, nvme_ctrl_get_name(c));
		if (c || connect_errno(errno) == EALREADY) {
			rc = 0;
			break;
		}
		rc = connect_errno(errno);
	}
	if (rc == ENOENT && !matched)
		pmc_err_set(err, ENOENT,
			    "%s: the discovery log at %s:%s has no %s entry for the subsystem",
			    label, n->traddr, trsvcid_of(n), tr);
	else if (rc)
		pmc_err_set(err, rc, "%s: connecting the discovered controller: %s", label,
			    strerror(rc));
disconnect:
	free(log);
	if (nvme_disconnect_ctrl(dc))
		pmc_log(LOG_WARNING, "%s: the discovery controller %s stays connected: %s", label,
			nvme_ctrl_get_name(dc), strerror(errno));
	return -rc;
}

int pmc_nvmf_connect(const struct pmc_config_nvmf *n, const char *volume, unsigned wait_ms,
		     struct pmc_nvmf_path *p, struct pmc_err *err)
{
	const char *tr = pmc_config_transport_name(n->transport);
	struct nvme_fabrics_config cfg;
	struct timespec ts = {0, 100 * 1000 * 1000};
	char label[PMC_CONFIG_NQN_MAX + PMC_CONFIG_TRADDR_MAX + 128],
	    desc[PMC_CONFIG_NQN_MAX + 300];
	nvme_root_t r;
	nvme_host_t h;
	nvme_ctrl_t c;
	FILE *sink;
	int rc;

	char made[sizeof(p->made)] = "";

	pmc_config_nvmf_label(n, desc, sizeof(desc));
	snprintf(label, sizeof(label), "volume %s: %s", volume, desc);
	rc = pmc_nvmf_find(n, p, err);
	if (rc == 0 && p->dev[0])
		return 0;
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == -ENOENT) {
		r = scan(&sink, err);
		if (!r)
			return -err->code;
		h = host_of(r, n);
		if (!h) {
			scan_free(r, sink);
			return pmc_err_set(err, EINVAL,
					   "%s: no host NQN (set disk.hostnqn, or "
					   "write /etc/nvme/hostnqn)",
					   label);
		}
		if (n->dhchap_key[0])
			nvme_host_set_dhchap_key(h, n->dhchap_key);
		fabrics_config(n, &cfg);
		rc = 0;
		if (n->discovery) {
			rc = connect_discovered(r, h, n, &cfg, label, made, sizeof(made), err);
		} else {
			c = nvme_create_ctrl(r, n->subsysnqn, tr, or_null(n->traddr),
					     or_null(n->host_traddr), or_null(n->host_iface),
					     or_null(trsvcid_of(n)));
			if (!c) {
				rc = pmc_err_set(err, ENOMEM, "%s: out of memory", label);
			} else {
				if (n->dhchap_key[0])
					nvme_ctrl_set_dhchap_host_key(c, n->dhchap_key);
				if (n->dhchap_ctrl_key[0])
					nvme_ctrl_set_dhchap_key(c, n->dhchap_ctrl_key);
				errno = 0;
				if (nvmf_add_ctrl(h, c, &cfg) < 0) {
					int e = errno;

					nvme_free_ctrl(c);
					rc = connect_errno(e) == EALREADY
						 ? 0
						 : pmc_err_set(err, connect_errno(e),
							       "%s: connect: %s", label,
							       connect_strerror(e));
				} else {
					copy_str(made, sizeof(made), nvme_ctrl_get_name(c));
				}
			}
		}
		scan_free(r, sink);
		if (rc)
			return rc;
	}
	/* the namespace's block device appears once the kernel scanned it */
	for (unsigned waited = 0;; waited += 100) {
		rc = pmc_nvmf_find(n, p, err);
		copy_str(p->made, sizeof(p->made), made);
		if (rc == 0 && p->dev[0])
			return 0;
		if (rc && rc != -ENOENT)
			return rc;
		if (waited >= wait_ms)
			break;
		nanosleep(&ts, NULL);
	}
	if (rc == -ENOENT)
		return pmc_err_set(err, ENOENT,
				   "%s: connected, but no controller of the "
				   "subsystem at that address appeared",
				   label);
	return pmc_err_set(err, ENOENT, "%s: controller %s (%s) has no such namespace", label,
			   p->ctrl, p->state);
}

int pmc_nvmf_disconnect(const char *ctrl, struct pmc_err *err)
{
	nvme_root_t r;
	nvme_ctrl_t c;
	FILE *sink;
	int rc = -ENOENT;

	r = scan(&sink, err);
	if (!r)
		return -err->code;
	c = nvme_scan_ctrl(r, ctrl); /* from /sys/class/nvme/<ctrl> */
	if (c) {
		errno = 0;
		rc = nvme_disconnect_ctrl(c) ? -(errno ? errno : EIO) : 0;
	}
	scan_free(r, sink);
	if (rc == -ENOENT)
		return pmc_err_set(err, ENOENT, "controller %s: not found", ctrl);
	if (rc)
		return pmc_err_set(err, -rc, "controller %s: disconnect: %s", ctrl, strerror(-rc));
	return 0;
}

int pmc_nvmf_list(struct pmc_nvmf_ctrl **out, size_t *nr, struct pmc_err *err)
{
	struct pmc_nvmf_ctrl *v = NULL, *grown;
	size_t cap = 0, n = 0;
	nvme_root_t r;
	nvme_host_t h;
	nvme_subsystem_t s;
	nvme_ctrl_t c;
	nvme_ns_t ns;
	FILE *sink;

	*out = NULL;
	*nr = 0;
	r = scan(&sink, err);
	if (!r)
		return -err->code;
	nvme_for_each_host(r, h)
	{
		nvme_for_each_subsystem(h, s)
		{
			nvme_subsystem_for_each_ctrl(s, c)
			{
				struct pmc_nvmf_ctrl *e;
				size_t used = 0;

				if (str_eq(nvme_ctrl_get_transport(c), "pcie"))
					continue;
				if (n == cap) {
					cap = cap ? 2 * cap : 4;
					grown = realloc(v, cap * sizeof(*v));
					if (!grown) {
						free(v);
						scan_free(r, sink);
						return pmc_err_set(
						    err, ENOMEM,
						    "listing fabric controllers: out "
						    "of memory");
					}
					v = grown;
				}
				e = &v[n++];
				memset(e, 0, sizeof(*e));
				copy_str(e->name, sizeof(e->name), nvme_ctrl_get_name(c));
				copy_str(e->transport, sizeof(e->transport),
					 nvme_ctrl_get_transport(c));
				copy_str(e->address, sizeof(e->address), nvme_ctrl_get_address(c));
				copy_str(e->state, sizeof(e->state), nvme_ctrl_get_state(c));
				copy_str(e->subsysnqn, sizeof(e->subsysnqn),
					 nvme_ctrl_get_subsysnqn(c));
				/* its namespaces: the subsystem's (multipath) or its own */
				nvme_subsystem_for_each_ns(s, ns)
				{
					int k = snprintf(e->namespaces + used,
							 sizeof(e->namespaces) - used, "%s%s",
							 used ? " " : "", nvme_ns_get_name(ns));
					if (k > 0 && used + (size_t)k < sizeof(e->namespaces))
						used += (size_t)k;
				}
				nvme_ctrl_for_each_ns(c, ns)
				{
					int k = snprintf(e->namespaces + used,
							 sizeof(e->namespaces) - used, "%s%s",
							 used ? " " : "", nvme_ns_get_name(ns));
					if (k > 0 && used + (size_t)k < sizeof(e->namespaces))
						used += (size_t)k;
				}
			}
		}
	}
	scan_free(r, sink);
	*out = v;
	*nr = n;
	return 0;
}
