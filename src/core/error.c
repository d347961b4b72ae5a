/* error.c: the per-thread last-error message behind error.h. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char st_msg[1024];

int st_fail(const char *file, int line, int code, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    /* Keep "src/dir/file.c" rather than the build machine's absolute path. */
    const char *src = strstr(file, "src/");
    const char *shown = src ? src : (base ? base + 1 : file);
    int n = snprintf(st_msg, sizeof st_msg, "%s:%d: ", shown, line);
    if (n < 0 || (size_t)n >= sizeof st_msg) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st_msg + n, sizeof st_msg - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

const char *st_last_error(void) { return st_msg; }

void st_clear_error(void) { st_msg[0] = '\0'; }

const char *st_status_name(int code) {
    switch (code) {
    case ST_OK: return "ok";
    case ST_ERR_INPUT: return "bad input";
    case ST_ERR_IO: return "i/o error";
    case ST_ERR_MEMORY: return "out of memory";
    case ST_ERR_NUMERIC: return "numeric error";
    case ST_ERR_DEVICE: return "device error";
    case ST_ERR_INTERNAL: return "internal error";
    default: return "unknown error";
    }
}
