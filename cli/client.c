/* client.c - the control-socket client: connect, send one request line,
 * read reply lines (bounded by PMC_CTL_MAX_REPLY) and decode them, never
 * waiting for the daemon longer than --timeout at a time.
 *
 * A daemon with every connection taken answers one "daemon busy" error
 * line and closes: that line is the reply, even when the request could
 * not be sent any more.
 */
#include <errno.h>
#include <poll.h>
#include <sys/time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"

int pmc_client_open(struct pmc_client *c, const char *path, double timeout_s,
		    struct pmc_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {0};

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->timeout_ms = timeout_s > 0 ? (int)(timeout_s * 1000) : -1;
	if (timeout_s > 0) {
		tv.tv_sec = (time_t)timeout_s;
		tv.tv_usec = (suseconds_t)((timeout_s - (double)tv.tv_sec) * 1e6);
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	if (strlen(path) >= sizeof(sa.sun_path))
		return pmc_err_set(err, EINVAL, "%s: socket path too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return pmc_err_set(err, errno, "socket: %s", strerror(errno));
	/* a full backlog makes connect wait: as long as the timeout */
	if (timeout_s > 0)
		setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		close(c->fd);
		c->fd = -1;
		if (e == EAGAIN || e == EINPROGRESS || e == ETIMEDOUT)
			return pmc_err_set(err, EBUSY,
					   "daemon busy: %s accepted no connection within %g s "
					   "(--timeout)",
					   path, timeout_s);
		if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR)
			return pmc_err_set(err, ECONNREFUSED,
					   "daemon not running: cannot connect to %s (%s)", path,
					   strerror(e));
		if (e == EACCES || e == EPERM)
			return pmc_err_set(err, EACCES,
					   "permission denied: %s (run as root or as a member of "
					   "control.group)",
					   path);
		return pmc_err_set(err, e, "%s: connect: %s", path, strerror(e));
	}
	return 0;
}

void pmc_client_close(struct pmc_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

int pmc_client_send(struct pmc_client *c, const struct pmc_ctl_req *req, struct pmc_err *err)
{
	char *line = pmc_ctl_encode_req(req);
	size_t off = 0, len;

	if (!line)
		return pmc_err_set(err, EINVAL, "cannot encode the request");
	len = strlen(line);
	while (off < len) {
		ssize_t n = send(c->fd, line + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EPIPE;
			struct pmc_ctl_reply r;
			struct pmc_err rerr = {0};

			free(line);
			/* refused (busy) before the request got there: say so */
			if (!pmc_client_recv(c, &r, &rerr) && r.kind == PMC_CTL_REPLY_ERROR) {
				int rc = pmc_err_set(err, r.errnum, "%s", r.error);

				pmc_ctl_reply_free(&r);
				return rc;
			}
			if (!rerr.code)
				pmc_ctl_reply_free(&r);
			return pmc_err_set(err, ECONNABORTED,
					   "%s: the daemon closed the connection: %s", c->path,
					   strerror(e));
		}
		off += (size_t)n;
	}
	free(line);
	return 0;
}

int pmc_client_recv(struct pmc_client *c, struct pmc_ctl_reply *r, struct pmc_err *err)
{
	for (;;) {
		char *nl = c->buf ? memchr(c->buf, '\n', c->len) : NULL;
		ssize_t n;

		if (nl) {
			size_t linelen = (size_t)(nl - c->buf) + 1;
			int rc = pmc_ctl_decode_reply(c->buf, linelen, r, err);

			memmove(c->buf, c->buf + linelen, c->len - linelen);
			c->len -= linelen;
			return rc;
		}
		if (c->len >= PMC_CTL_MAX_REPLY)
			return pmc_err_set(err, EMSGSIZE, "%s: reply longer than %u bytes", c->path,
					   PMC_CTL_MAX_REPLY);
		if (c->cap - c->len < 4096) {
			size_t cap = c->cap ? 2 * c->cap : 65536;
			char *b;

			if (cap > PMC_CTL_MAX_REPLY + 4096)
				cap = PMC_CTL_MAX_REPLY + 4096;
			b = realloc(c->buf, cap);
			if (!b)
				return pmc_err_set(err, ENOMEM, "out of memory");
			c->buf = b;
			c->cap = cap;
		}
		{
			struct pollfd p = {.fd = c->fd, .events = POLLIN};
			int pr = poll(&p, 1, c->timeout_ms);

			if (pr < 0 && errno == EINTR)
				return pmc_err_set(err, EINTR, "interrupted");
			if (pr == 0)
				return pmc_err_set(err, ETIMEDOUT,
						   "%s: no word from the daemon for %g s (--timeout; 0 "
						   "waits forever)",
						   c->path, c->timeout_ms / 1000.0);
		}
		n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n < 0 && errno == EINTR)
			return pmc_err_set(err, EINTR, "interrupted");
		if (n <= 0)
			return pmc_err_set(err, ECONNABORTED,
					   "%s: the daemon closed the connection without a reply",
					   c->path);
		c->len += (size_t)n;
	}
}
