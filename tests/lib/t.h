/* t.h - minimal assertions for test programs: a failed check prints both
 * sides and the location, and the test exits 1. */
#ifndef PMC_TEST_T_H
#define PMC_TEST_T_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_FAIL(...)                                                                                \
	do {                                                                                       \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

#define T_TRUE(cond)                                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			T_FAIL("%s", #cond);                                                       \
	} while (0)

#define T_EQ(a, b)                                                                                 \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a != _b)                                                                      \
			T_FAIL("%s == %s: %lld != %lld", #a, #b, _a, _b);                          \
	} while (0)

/* a call returning 0 or -errno, with a struct pmc_err named err in scope */
#define T_OK(call)                                                                                 \
	do {                                                                                       \
		memset(&err, 0, sizeof(err));                                                      \
		int _rc = (call);                                                                  \
		if (_rc)                                                                           \
			T_FAIL("%s: %d (%s)", #call, _rc, err.msg);                                \
	} while (0)

/* the call fails with -code and a message containing text */
#define T_ERR(call, code, text)                                                                    \
	do {                                                                                       \
		memset(&err, 0, sizeof(err));                                                      \
		int _rc = (call);                                                                  \
		if (_rc != -(code))                                                                \
			T_FAIL("%s: returned %d, expected %d (%s)", #call, _rc, -(code), err.msg); \
		if (!strstr(err.msg, (text)) || strchr(err.msg, '\n'))                             \
			T_FAIL("%s: message '%s' lacks '%s'", #call, err.msg, (text));             \
		printf("ok: refused: %s\n", err.msg);                                              \
	} while (0)

#endif
