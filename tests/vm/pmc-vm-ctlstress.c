/* pmc-vm-ctlstress.c - hostile clients against a live pmcached's control
 * socket, for SECONDS: requests pipelined then abandoned, clients that never
 * read, random and malformed lines, lines past the limit, bursts of 100
 * connections of a control.group member; between any two of them root asks
 * for status and must get it within ROOT_MS. Every reply line must decode
 * (lib/ctl.c) and carry protocol version 1.
 *
 * usage: pmc-vm-ctlstress SOCKET SECONDS GID [SEED]
 * Runs as root; the member clients connect as uid 65534 with egid GID.
 * Exit 0: root always got in, every reply well formed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctlgen.h"
#include "ring.h"

#define ROOT_MS 10000 /* generous: TCG runs the daemon some 50 times slower */
#define HELD_MAX 8 /* never-reading clients held open at once */

static struct sockaddr_un sa = {.sun_family = AF_UNIX};
static gid_t member_gid;
static unsigned long n_lines, n_busy, n_bad, n_root, n_emsgsize, n_eperm;
static uint64_t root_worst_ns;

static int conn(int member)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	if (member && (setegid(member_gid) || seteuid(65534))) {
		perror("seteuid");
		exit(1);
	}
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (member && (seteuid(0) || setegid(0))) {
		perror("seteuid back");
		exit(1);
	}
	if (rc) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_str(int fd, const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}

/* one reply line within ms; its length, 0 closed, -1 timeout */
static ssize_t recv_line(int fd, char *buf, size_t cap, int ms)
{
	size_t len = 0;
	uint64_t end = pmc_mono_ns() + (uint64_t)ms * 1000000ull;

	while (len + 1 < cap) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = (int64_t)(end - pmc_mono_ns()) / 1000000;
		ssize_t n;
		char *nl;

		if (left < 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		n = recv(fd, buf + len, cap - 1 - len, MSG_PEEK);
		if (n <= 0)
			return len ? (ssize_t)len : 0;
		nl = memchr(buf + len, '\n', (size_t)n);
		if (nl)
			n = nl - (buf + len) + 1;
		n = recv(fd, buf + len, (size_t)n, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		if (nl)
			break;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

/* a reply line: decodes, version 1; returns its kind or -1 */
static int check_line(const char *buf, ssize_t n, const char *what)
{
	struct pmc_ctl_reply r;
	struct pmc_err err = {0};
	int kind;

	if (n <= 0) {
		printf("FAIL: %s: no reply (%zd)\n", what, n);
		n_bad++;
		return -1;
	}
	if (pmc_ctl_decode_reply(buf, (size_t)n, &r, &err) || r.version != PMC_CTL_VERSION) {
		printf("FAIL: %s: bad reply (%s): %.200s\n", what, err.msg, buf);
		n_bad++;
		return -1;
	}
	kind = r.kind;
	if (kind == PMC_CTL_REPLY_ERROR && r.errnum == EBUSY)
		n_busy++;
	if (kind == PMC_CTL_REPLY_ERROR && r.errnum == EMSGSIZE)
		n_emsgsize++;
	pmc_ctl_reply_free(&r);
	n_lines++;
	return kind;
}

static char big[1 << 20];

/* root gets status within ROOT_MS, whatever the others do */
static void root_status(const char *during)
{
	uint64_t t0 = pmc_mono_ns(), dt;
	int fd = conn(0);
	ssize_t n = -1;

	if (fd >= 0) {
		send_str(fd, "{\"cmd\":\"status\"}\n");
		n = recv_line(fd, big, sizeof(big), ROOT_MS);
		close(fd);
	}
	dt = pmc_mono_ns() - t0;
	if (dt > root_worst_ns)
		root_worst_ns = dt;
	if (fd < 0 || check_line(big, n, "root status") != PMC_CTL_REPLY_OK) {
		printf("FAIL: root status during %s: %s\n", during,
		       fd < 0 ? strerror(errno) : "no ok reply");
		n_bad++;
	}
	n_root++;
}

static void early_close(void)
{
	char buf[4096];
	size_t len = 0;
	int fd = conn(0);

	if (fd < 0)
		return;
	while (len + 40 < sizeof(buf))
		len += (size_t)snprintf(buf + len, sizeof(buf) - len,
					"{\"cmd\":\"status\",\"id\":%zu}\n", len);
	send_str(fd, buf);
	close(fd);
}

static int held[HELD_MAX];
static unsigned nheld;

static void never_reading(void)
{
	static const char req[] = "{\"cmd\":\"volume-list\"}\n";
	int fd = conn(1);
	size_t sent = 0;

	if (fd < 0)
		return;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (sent < (16u << 20)) {
		ssize_t n = send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	if (sent >= (16u << 20)) {
		printf("FAIL: the daemon read 16 MiB of requests from a client reading nothing\n");
		n_bad++;
	}
	if (nheld == HELD_MAX) {
		close(held[0]);
		memmove(held, held + 1, sizeof(held) - sizeof(held[0]));
		nheld--;
	}
	held[nheld++] = fd;
}

static void random_line(char *buf, size_t cap)
{
	static const char *const pieces[] = {
	    "{", "}", "[", "]", "\"cmd\"", ":", ",", "\"status\"", "\"stats\"", "\"get\"",
	    "\"volume-list\"", "\"key\"", "\"log.level\"", "\"volume\"", "\"vol0\"", "\"id\"",
	    "12345678901234567890", "-1", "1e999", "null", "true", "\"\\u0000\"", "\"set\"",
	    "\"value\"", "\"shutdown\"", "\"flush\"", "\"volume-remove\"", "\"name\"", " ",
	};

	pmc_ctlgen_line(buf, cap, pieces, sizeof(pieces) / sizeof(pieces[0]), 300);
}

/* a member: random lines, one reply each (mutating ones refused: EPERM) */
static void flood(void)
{
	char line[1024];
	int fd = conn(1);

	if (fd < 0)
		return;
	static const char *const changes[] = {
	    "{\"cmd\":\"shutdown\"}\n",
	    "{\"cmd\":\"volume-remove\",\"name\":\"vol0\",\"force\":true}\n",
	    "{\"cmd\":\"set\",\"volume\":\"vol0\",\"key\":\"mode\",\"value\":\"pass-through\"}\n",
	    "{\"cmd\":\"flush\"}\n",
	    "{\"cmd\":\"volume-add\",\"name\":\"x\",\"disk\":\"/dev/nvme1n1\"}\n",
	};

	for (int i = 0; i < 100; i++) {
		if (i % 10 == 0) {
			/* a member may not change anything */
			const char *c = changes[random() % 5];

			send_str(fd, c);
			if (check_line(big, recv_line(fd, big, sizeof(big), 10000), c) !=
				PMC_CTL_REPLY_ERROR ||
			    !strstr(big, "permission denied")) {
				printf("FAIL: a member's %s got: %.200s\n", c, big);
				n_bad++;
			}
			n_eperm++;
			continue;
		}
		random_line(line, sizeof(line));
		send_str(fd, line);
		if (check_line(big, recv_line(fd, big, sizeof(big), 10000), line) < 0)
			break;
	}
	close(fd);
}

static void oversized(void)
{
	int fd = conn(1);

	if (fd < 0)
		return;
	memset(big, 'x', (64u << 10) + 100);
	send(fd, big, (64u << 10) + 100, MSG_NOSIGNAL);
	if (check_line(big, recv_line(fd, big, sizeof(big), 10000), "oversized line") !=
	    PMC_CTL_REPLY_ERROR) {
		printf("FAIL: a line past 64 KiB was not refused\n");
		n_bad++;
	}
	close(fd);
}

/* 100 member connections at once, each with a request; root meanwhile */
static void burst(void)
{
	int fds[100];

	for (int i = 0; i < 100; i++) {
		fds[i] = conn(1);
		if (fds[i] >= 0)
			send_str(fds[i], "{\"cmd\":\"stats\"}\n");
	}
	root_status("100 member connections");
	for (int i = 0; i < 100; i++) {
		if (fds[i] < 0)
			continue;
		check_line(big, recv_line(fds[i], big, sizeof(big), 20000), "burst connection");
		close(fds[i]);
	}
}

int main(int argc, char **argv)
{
	unsigned seed;
	uint64_t end;

	if (argc < 4) {
		fprintf(stderr, "usage: pmc-vm-ctlstress SOCKET SECONDS GID [SEED]\n");
		return 2;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	end = pmc_mono_ns() + strtoull(argv[2], NULL, 10) * 1000000000ull;
	member_gid = (gid_t)strtoul(argv[3], NULL, 10);
	seed = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : (unsigned)time(NULL);
	printf("pmc-vm-ctlstress: seed %u\n", seed);
	srandom(seed);
	signal(SIGPIPE, SIG_IGN);
	if (setgroups(1, &member_gid)) {
		perror("setgroups");
		return 1;
	}
	while (pmc_mono_ns() < end) {
		switch (random() % 6) {
		case 0:
			early_close();
			root_status("early close");
			break;
		case 1:
			never_reading();
			root_status("never-reading clients");
			break;
		case 2:
			flood();
			root_status("a flood");
			break;
		case 3:
			oversized();
			break;
		case 4:
			burst();
			break;
		default:
			root_status("nothing");
			break;
		}
	}
	for (unsigned i = 0; i < nheld; i++)
		close(held[i]);
	printf("pmc-vm-ctlstress: %lu reply lines checked, %lu busy, %lu EMSGSIZE, %lu changes "
	       "by a member refused, root served %lu times (slowest %llu ms), %lu failures\n",
	       n_lines, n_busy, n_emsgsize, n_eperm, n_root,
	       (unsigned long long)(root_worst_ns / 1000000), n_bad);
	return n_bad ? 1 : 0;
}
