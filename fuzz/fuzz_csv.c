/* fuzz_csv.c: libFuzzer harness of the CSV loader (data/csv.h).
 *
 * The input is the text of one CSV file. st_csv_parse must either accept it,
 * giving bars that keep the loader's promises (times strictly increasing,
 * prices positive and finite, low <= min(open, close) <= max(open, close) <=
 * high, volume >= 0 and all zero without a volume column), or reject it with
 * ST_ERR_INPUT and a message "fuzz.csv:LINE: column ..." naming a line of
 * the file. Every parsed time goes through st_format_time, and those of
 * years 1..9999 must parse back to themselves. The first line, taken alone,
 * also goes to st_parse_time and st_format_time. Accepted bars then go
 * through st_market_prepare (ATR, the 40 features, splits, normalisation)
 * with K = 4, which may only refuse too few rows: its guard against
 * non-finite features (ST_ERR_NUMERIC) firing on bars the loader accepted is a
 * bug. A broken promise aborts, which libFuzzer reports as a crash. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/csv.h"
#include "data/dataset.h"

#define FUZZ_NAME "fuzz_csv"
#include "fuzz_assert.h"

/* Years 1..9999 are what st_parse_time reads back: [0001-01-01, 10000-01-01). */
static const int64_t ts_min = -62135596800LL, ts_end = 253402300800LL;

static void check_time_round_trip(int64_t ts) {
    char buf[64];
    st_format_time(ts, buf, sizeof buf);
    if (ts < ts_min || ts >= ts_end) return;
    int64_t back = 0;
    FUZZ_ASSERT(st_parse_time(buf, strlen(buf), &back) == 0 && back == ts, "time %lld formats as '%s', reads %lld",
                (long long)ts, buf, (long long)back);
}

static void check_bars(const st_instrument *in, size_t lines) {
    FUZZ_ASSERT(in->n >= 0 && (size_t)in->n <= lines, "%d bars from %zu lines", in->n, lines);
    for (int t = 0; t < in->n; t++) {
        double o = in->open[t], h = in->high[t], l = in->low[t], c = in->close[t], v = in->volume[t];
        FUZZ_ASSERT(t == 0 || in->ts[t] > in->ts[t - 1], "bar %d: time %lld after %lld", t, (long long)in->ts[t],
                    (long long)in->ts[t - 1]);
        FUZZ_ASSERT(isfinite(o) && isfinite(h) && isfinite(l) && isfinite(c) && isfinite(v), "bar %d: not finite",
                    t);
        FUZZ_ASSERT(o > 0 && c > 0 && l > 0, "bar %d: price <= 0 (o %g l %g c %g)", t, o, l, c);
        FUZZ_ASSERT(l <= fmin(o, c) && fmax(o, c) <= h, "bar %d: o %.17g h %.17g l %.17g c %.17g", t, o, h, l, c);
        FUZZ_ASSERT(v >= 0 && (in->has_volume || v == 0), "bar %d: volume %g (has_volume %d)", t, v, in->has_volume);
        check_time_round_trip(in->ts[t]);
    }
}

/* A rejection names the file, a line inside it and a column. */
static void check_message(size_t lines) {
    const char *msg = st_last_error();
    const char *at = strstr(msg, "fuzz.csv:");
    FUZZ_ASSERT(at, "message without the file name: '%s'", msg);
    char *end = NULL;
    long line = strtol(at + strlen("fuzz.csv:"), &end, 10);
    FUZZ_ASSERT(line >= 1 && (size_t)line <= lines && strncmp(end, ": column ", 9) == 0,
                "message without 'LINE: column' of a line in 1..%zu: '%s'", lines, msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';

    /* The first line as one time field. */
    const char *nl = memchr(text, '\n', size);
    size_t first = nl ? (size_t)(nl - text) : size;
    int64_t ts = 0;
    if (st_parse_time(text, first, &ts) == 0) check_time_round_trip(ts);

    st_instrument in;
    memset(&in, 0, sizeof in);
    st_clear_error();
    int rc = st_csv_parse("fuzz.csv", text, size, &in);
    if (rc == ST_OK) {
        check_bars(&in, lines);
        st_market m;
        memset(&m, 0, sizeof m);
        m.n_inst = 1;
        m.inst = &in;
        st_data_opts o = st_data_opts_default(4);
        o.use_cache = 0;
        rc = st_market_prepare(&m, &o);
        FUZZ_ASSERT(rc == ST_OK || (rc == ST_ERR_INPUT && strstr(st_last_error(), "too few")),
                    "st_market_prepare of accepted bars: status %d: %s", rc, st_last_error());
        free(m.norm_mean);
        free(m.norm_std);
        st_instrument_free(&in);
    } else {
        FUZZ_ASSERT(rc == ST_ERR_INPUT, "status %d: %s", rc, st_last_error());
        check_message(lines);
        FUZZ_ASSERT(in.n == 0 && in.ts == NULL, "a rejected file leaves bars behind");
    }
    return 0;
}
