/* nvme_info.c - NVMe namespace enumeration and identification (see
 * nvme_info.h).
 *
 * Owns no state across calls: one libnvme tree per pmc_nvme_list(), freed
 * before returning; one fd per identified namespace. libnvme's own log
 * goes to /dev/null, so lib/ prints nothing. Identify data are fixed-size,
 * space-padded fields: copied with a length bound and trimmed.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <nvme/ioctl.h>
#include <nvme/tree.h>
#include <nvme/types.h>

#include "nvme_info.h"

/* Copy a space-padded field of n bytes into dst (size > n), trimmed. */
static void copy_trim(char *dst, size_t size, const char *src, size_t n)
{
	size_t b = 0, e;

	if (!src) {
		dst[0] = '\0';
		return;
	}
	e = strnlen(src, n);
	while (b < e && (src[b] == ' ' || src[b] == '\0'))
		b++;
	while (e > b && (src[e - 1] == ' ' || src[e - 1] == '\0'))
		e--;
	if (e - b >= size)
		e = b + size - 1;
	memcpy(dst, src + b, e - b);
	dst[e - b] = '\0';
}

static void copy_str(char *dst, size_t size, const char *src)
{
	copy_trim(dst, size, src, src ? strlen(src) : 0);
}

int pmc_nvme_identify(const char *path, struct pmc_nvme_ns *out, struct pmc_err *err)
{
	struct nvme_id_ctrl *ctrl;
	struct nvme_id_ns *ns;
	struct pmc_nvme_ns r;
	const char *base;
	unsigned fmt;
	__u32 nsid;
	int fd, ret;

	memset(&r, 0, sizeof(r));
	/* identify buffers are 4 KiB each; keep them off the stack */
	ctrl = calloc(1, sizeof(*ctrl));
	ns = calloc(1, sizeof(*ns));
	if (!ctrl || !ns) {
		ret = pmc_err_set(err, ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = pmc_err_set(err, errno, "%s: open: %s", path, strerror(errno));
		goto out_free;
	}
	if (nvme_get_nsid(fd, &nsid) < 0) {
		ret = errno ? errno : ENOTTY;
		ret = pmc_err_set(err, ret, "%s: not an NVMe namespace (get nsid: %s)", path,
				  strerror(ret));
		goto out_close;
	}
	ret = nvme_identify_ctrl(fd, ctrl);
	if (ret) {
		ret = ret < 0 ? errno : EIO;
		ret = pmc_err_set(err, ret, "%s: Identify Controller: %s", path,
				  ret == EIO ? "NVMe status error" : strerror(ret));
		goto out_close;
	}
	ret = nvme_identify_ns(fd, nsid, ns);
	if (ret) {
		ret = ret < 0 ? errno : EIO;
		ret = pmc_err_set(err, ret, "%s: Identify Namespace %u: %s", path, nsid,
				  ret == EIO ? "NVMe status error" : strerror(ret));
		goto out_close;
	}
	fmt = (ns->flbas & NVME_NS_FLBAS_LOWER_MASK) | ((ns->flbas & NVME_NS_FLBAS_HIGHER_MASK) >> 1);
	if (fmt > ns->nlbaf || ns->lbaf[fmt].ds < 9 || ns->lbaf[fmt].ds > 31) {
		ret = pmc_err_set(err, EPROTO, "%s: namespace %u: bad LBA format %u (ds %u)", path,
				  nsid, fmt, fmt < 64 ? ns->lbaf[fmt].ds : 0);
		goto out_close;
	}
	copy_trim(r.model, sizeof(r.model), ctrl->mn, sizeof(ctrl->mn));
	copy_trim(r.serial, sizeof(r.serial), ctrl->sn, sizeof(ctrl->sn));
	copy_trim(r.firmware, sizeof(r.firmware), ctrl->fr, sizeof(ctrl->fr));
	r.nsid = nsid;
	r.lba_bytes = 1u << ns->lbaf[fmt].ds;
	r.nr_lbas = le64toh(ns->nsze);
	r.size_bytes = r.nr_lbas * r.lba_bytes;
	r.identified = 1;
	base = strrchr(path, '/');
	copy_str(r.name, sizeof(r.name), base ? base + 1 : path);
	copy_str(r.path, sizeof(r.path), path);
	*out = r;
	ret = 0;
out_close:
	close(fd);
out_free:
	free(ns);
	free(ctrl);
	return ret;
}

struct ns_vec {
	struct pmc_nvme_ns *v;
	size_t nr, cap;
};

/* Add namespace n (found under controller c, which may be NULL) unless its
 * block device is missing or already listed. */
static int add_ns(struct ns_vec *vec, nvme_ns_t n, nvme_ctrl_t c)
{
	struct pmc_nvme_ns r, *grown;
	struct stat st;
	const char *name = nvme_ns_get_name(n);
	char path[64];
	size_t i;

	if (!name || strlen(name) >= sizeof(r.name))
		return 0;
	snprintf(path, sizeof(path), "/dev/%s", name);
	if (stat(path, &st) || !S_ISBLK(st.st_mode))
		return 0; /* a multipath path device (nvmeXcYnZ) has none */
	for (i = 0; i < vec->nr; i++)
		if (!strcmp(vec->v[i].name, name))
			return 0;

	if (pmc_nvme_identify(path, &r, NULL)) {
		/* refused (permissions, a fabrics quirk): what sysfs says */
		memset(&r, 0, sizeof(r));
		copy_str(r.name, sizeof(r.name), name);
		copy_str(r.path, sizeof(r.path), path);
		copy_str(r.model, sizeof(r.model), nvme_ns_get_model(n));
		copy_str(r.serial, sizeof(r.serial), nvme_ns_get_serial(n));
		copy_str(r.firmware, sizeof(r.firmware), nvme_ns_get_firmware(n));
		r.nsid = (uint32_t)nvme_ns_get_nsid(n);
		r.lba_bytes = (uint32_t)nvme_ns_get_lba_size(n);
		r.nr_lbas = nvme_ns_get_lba_count(n);
		r.size_bytes = r.nr_lbas * r.lba_bytes;
	}
	if (!c)
		c = nvme_ns_get_ctrl(n);
	if (c) {
		copy_str(r.ctrl, sizeof(r.ctrl), nvme_ctrl_get_name(c));
		copy_str(r.transport, sizeof(r.transport), nvme_ctrl_get_transport(c));
	}
	if (vec->nr == vec->cap) {
		size_t cap = vec->cap ? 2 * vec->cap : 8;

		grown = realloc(vec->v, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		vec->v = grown;
		vec->cap = cap;
	}
	vec->v[vec->nr++] = r;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	const struct pmc_nvme_ns *x = a, *y = b;
	size_t lx = strlen(x->name), ly = strlen(y->name);

	/* nvme2n1 before nvme10n1 */
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

int pmc_nvme_list(struct pmc_nvme_ns **out, size_t *nr, struct pmc_err *err)
{
	struct ns_vec vec = {0};
	nvme_root_t root;
	nvme_host_t h;
	nvme_subsystem_t s;
	nvme_ctrl_t c;
	nvme_ns_t n;
	FILE *sink;
	int ret = 0;

	*out = NULL;
	*nr = 0;
	sink = fopen("/dev/null", "w");
	root = nvme_create_root(sink, LOG_EMERG);
	if (!root) {
		ret = pmc_err_set(err, ENOMEM, "libnvme: cannot create the topology root");
		goto out_sink;
	}
	errno = 0;
	if (nvme_scan_topology(root, NULL, NULL) < 0) {
		ret = errno ? errno : EIO;
		if (ret == ENOENT) {
			ret = 0; /* no nvme class in sysfs: no NVMe at all */
			goto out_root;
		}
		ret = pmc_err_set(err, ret, "libnvme: scanning the NVMe topology in sysfs: %s",
				  strerror(ret));
		goto out_root;
	}
	nvme_for_each_host(root, h)
	{
		nvme_for_each_subsystem(h, s)
		{
			nvme_subsystem_for_each_ctrl(s, c)
			{
				nvme_ctrl_for_each_ns(c, n)
				{
					if ((ret = add_ns(&vec, n, c)))
						goto fail;
				}
			}
			/* native multipath: the block device is the subsystem's */
			nvme_subsystem_for_each_ns(s, n)
			{
				if ((ret = add_ns(&vec, n, nvme_subsystem_first_ctrl(s))))
					goto fail;
			}
		}
	}
	if (vec.nr)
		qsort(vec.v, vec.nr, sizeof(vec.v[0]), cmp_name);
	*out = vec.v;
	*nr = vec.nr;
	goto out_root;
fail:
	free(vec.v);
	ret = pmc_err_set(err, -ret, "listing NVMe namespaces: %s", strerror(-ret));
out_root:
	nvme_free_tree(root);
out_sink:
	if (sink)
		fclose(sink);
	return ret;
}

void pmc_nvme_list_free(struct pmc_nvme_ns *list)
{
	free(list);
}

const struct pmc_nvme_ns *pmc_nvme_find_serial(const struct pmc_nvme_ns *list, size_t nr,
					       const char *serial)
{
	char want[sizeof(list->serial)];
	size_t i;

	copy_str(want, sizeof(want), serial);
	for (i = 0; i < nr; i++)
		if (!strcmp(list[i].serial, want))
			return &list[i];
	return NULL;
}
