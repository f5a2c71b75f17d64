/* pmc-vm-ctl.c - send one control request to pmcached and print the reply
 * lines (progress lines, then the final one). A test tool for the guest,
 * where busybox has no Unix-socket client.
 * usage: pmc-vm-ctl SOCKET 'JSON'    exit 0 if the final reply is ok
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* all len bytes of p to fd; 0, or -1 with errno (EPIPE without a signal) */
static int send_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[1 << 16];
	size_t len = 0;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: pmc-vm-ctl SOCKET JSON\n");
		return 2;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror(argv[1]);
		return 1;
	}
	/* the daemon may answer and close before all of a request it refuses
	 * (one over the size limit) is sent: then the reply is read all the
	 * same, as pmcachectl does, and not lost to SIGPIPE */
	if (send_all(fd, argv[2], strlen(argv[2])) || send_all(fd, "\n", 1))
		perror("send");
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		char *nl;

		if (n <= 0)
			return 1;
		len += (size_t)n;
		while ((nl = memchr(buf, '\n', len))) {
			*nl = '\0';
			puts(buf);
			if (!strstr(buf, "\"progress\""))
				return strstr(buf, "\"ok\":true") ? 0 : 1;
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
		}
	}
}
