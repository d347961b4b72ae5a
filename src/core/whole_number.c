/* whole_number.c: see whole_number.h. */
#include "core/whole_number.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"

int st_parse_whole(const char *name, const char *text, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end != text && *end == 0) {
        ST_REQUIRE(errno == 0, ST_ERR_INPUT, "--%s: '%s' is out of range (at most %lld)", name, text, LLONG_MAX);
        *out = v;
        return ST_OK;
    }
    errno = 0;
    double d = strtod(text, &end);
    /* the range first: converting a double outside long long (or NaN) is undefined (found by fuzz/fuzz_config.c) */
    ST_REQUIRE(end != text && *end == 0 && errno == 0 && isfinite(d) && d == floor(d), ST_ERR_INPUT,
               "--%s: '%s' is not a whole number", name, text);
    ST_REQUIRE(fabs(d) < ST_EXACT_DOUBLE_MAX, ST_ERR_INPUT,
               "--%s: '%s' is 2^53 or more written as a double (1e16, or a number in a JSON file), which may "
               "have lost its last digits: write the digits (in a JSON file, as a string)",
               name, text);
    *out = (long long)d;
    return ST_OK;
}

void st_json_number_text(double v, char *buf, unsigned n) {
    if (isfinite(v) && v == floor(v) && fabs(v) >= ST_EXACT_DOUBLE_MAX)
        snprintf(buf, n, "%.16e", v); /* not digits: st_parse_whole takes it for the double it is */
    else
        snprintf(buf, n, "%.17g", v);
}
