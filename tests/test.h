/* test.h: the few macros every test program uses.
 *
 * CHECK(cond, fmt, ...) counts a pass or prints the failure with file:line;
 * TEST_MAIN_END prints "N passed, N failed" and returns non-zero on any
 * failure, so a test can only pass by running its checks. */
#ifndef ST_TEST_H
#define ST_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int st_test_pass, st_test_fail;

#define CHECK(cond, ...)                                                                                        \
    do {                                                                                                        \
        if (cond) {                                                                                             \
            st_test_pass++;                                                                                     \
        } else {                                                                                                \
            st_test_fail++;                                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                                                       \
            fputc('\n', stderr);                                                                                \
        }                                                                                                       \
    } while (0)

/* Checks a float64 relative gradient error against the bound and prints it. */
#define CHECK_GRAD(name, res, bound)                                                                            \
    do {                                                                                                        \
        printf("  %-40s rel err %.3e  (%d elems)\n", (name), (res).rel_err, (res).checked);                    \
        CHECK((res).rel_err <= (bound) && (res).checked > 0, "%s: gradient rel err %.3e > %.1e", (name),       \
              (res).rel_err, (double)(bound));                                                                  \
    } while (0)

#define TEST_MAIN_END()                                                                                         \
    do {                                                                                                        \
        printf("%d passed, %d failed\n", st_test_pass, st_test_fail);                                           \
        return st_test_fail == 0 && st_test_pass > 0 ? 0 : 1;                                                   \
    } while (0)

/* SSMTRADE_TEST_PART=k/n: a program whose cases are numbered 0, 1, ...
 * runs only those with number % n == k (scripts/gpu-check.sh splits a slow
 * program over n processes under the sanitizers); unset: every case. */
static inline int test_part(int index) {
    const char *v = getenv("SSMTRADE_TEST_PART");
    int k = 0, n = 1;
    if (!v || sscanf(v, "%d/%d", &k, &n) != 2 || n < 1) return 1;
    return index % n == k;
}

/* SSMTRADE_TEST_QUICK set (scripts/gpu-check.sh's sanitizer runs, whose
 * kernels run ~100x slower): programs shrink their long loops. */
static inline int test_quick(void) { return getenv("SSMTRADE_TEST_QUICK") != NULL; }

/* A buffer of rows x width with row stride `stride`, the gap filled with NaN. */
static inline double *test_padded(int rows, int width, int stride) {
    double *p = malloc(sizeof(double) * (size_t)rows * (size_t)stride + sizeof(double));
    for (long i = 0; i < (long)rows * stride; i++) p[i] = NAN;
    (void)width;
    return p;
}

#endif
