/* fuzz_assert.h: FUZZ_ASSERT(cond, fmt, ...) of the libFuzzer harnesses: a
 * broken promise prints "FUZZ_NAME: broken promise: ..." and aborts, which
 * libFuzzer reports as a crash with the input that caused it. Each harness
 * defines FUZZ_NAME before including this. */
#ifndef ST_FUZZ_ASSERT_H
#define ST_FUZZ_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ASSERT(cond, ...)                                                                                  \
    do {                                                                                                        \
        if (!(cond)) {                                                                                          \
            fprintf(stderr, FUZZ_NAME ": broken promise: " __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                                                \
            abort();                                                                                            \
        }                                                                                                       \
    } while (0)

#endif
