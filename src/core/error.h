/* error.h: checked errors that say where and why.
 *
 * Library functions that can fail return an int status (ST_OK = 0) and record
 * one human sentence prefixed with file:line. Nothing in the library calls
 * exit(); the CLI prints st_last_error() and chooses the exit status. */
#ifndef ST_ERROR_H
#define ST_ERROR_H

enum {
    ST_OK = 0,
    ST_ERR_INPUT = 1,    /* bad user input: data, flags, config, files */
    ST_ERR_IO = 2,       /* the file system said no */
    ST_ERR_MEMORY = 3,   /* an allocation failed */
    ST_ERR_NUMERIC = 4,  /* a non-finite value or a failed numeric check */
    ST_ERR_DEVICE = 5,   /* CUDA, cuBLAS, NCCL */
    ST_ERR_INTERNAL = 6, /* a broken invariant: a bug of ours */
};

/* Records "file:line: message" and returns code. */
int st_fail(const char *file, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The last recorded message ("" when none); per thread. */
const char *st_last_error(void);
void st_clear_error(void);
/* A short name of a status code ("bad input", "i/o error", ...). */
const char *st_status_name(int code);

#define ST_FAIL(code, ...) st_fail(__FILE__, __LINE__, (code), __VA_ARGS__)
/* Return code with a message when cond does not hold. */
#define ST_REQUIRE(cond, code, ...)                                            \
    do {                                                                       \
        if (!(cond)) return ST_FAIL((code), __VA_ARGS__);                      \
    } while (0)
/* Propagate a failing status unchanged. */
#define ST_TRY(expr)                                                           \
    do {                                                                       \
        int st_try_rc_ = (expr);                                               \
        if (st_try_rc_ != ST_OK) return st_try_rc_;                            \
    } while (0)

#endif
