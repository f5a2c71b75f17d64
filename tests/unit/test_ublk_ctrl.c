/* test_ublk_ctrl.c - a ublk control command waits for its own completion
 * through signals (pmc_ublk_ctrl_submit_wait): a wait cut by a signal
 * handler (a second SIGTERM, a SIGHUP during a stop) returned -EINTR with
 * the command still in flight, and the next command then took its
 * completion. A timeout stands in for a command the driver answers late;
 * SIGALRM interrupts the wait. No ublk driver is needed. */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#include "t.h"
#include "ublk_probe.h"

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

int main(void)
{
	struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};
	struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 50 * 1000}};
	struct sigaction sa;
	struct io_uring ring;
	struct io_uring_sqe *sqe;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: the wait sees EINTR */
	T_EQ(sigaction(SIGALRM, &sa, NULL), 0);
	T_EQ(io_uring_queue_init(4, &ring, 0), 0);

	/* "command" 1 completes after 300 ms, the signal comes at 50 */
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_timeout(sqe, &ts, 0, 0);
	T_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
	T_EQ(pmc_ublk_ctrl_submit_wait(&ring), -ETIME);
	T_TRUE(alarms == 1);
	/* "command" 2 gets its own result, not the first one's */
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_nop(sqe);
	T_EQ(pmc_ublk_ctrl_submit_wait(&ring), 0);
	T_EQ(io_uring_cq_ready(&ring), 0);
	io_uring_queue_exit(&ring);
	printf("PASS test_ublk_ctrl\n");
	return 0;
}
