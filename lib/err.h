/* err.h - errors that travel as data.
 *
 * Every fallible call returns 0 or -errno and, when given a struct pmc_err,
 * fills it with one line naming the object and the failed check
 * ("superblock copy 1: bad checksum"). The message is plain data, so it can
 * cross the control socket; there are no thread-local strings.
 */
#ifndef PMC_ERR_H
#define PMC_ERR_H

#define PMC_ERR_MSG_MAX 256

struct pmc_err {
	int code;		  /* positive errno of the first failure */
	char msg[PMC_ERR_MSG_MAX]; /* one line, no trailing newline */
};

/* Record the failure (first one wins) and return -code. err may be NULL. */
int pmc_err_set(struct pmc_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Reset to "no error". err may be NULL. */
void pmc_err_clear(struct pmc_err *err);

#endif
