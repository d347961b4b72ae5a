/* smoke.h: many seeds with full scans, the first bad label of each run
 * (DESIGN section 8, `ssmtrade smoke`).
 *
 * Run i trains a fresh model with seed seed0 + i for `steps` updates on
 * the same market, with the tracer in full mode (and the given injection
 * and poisoned padding), stopping at its first trip. The table lists run,
 * seed, status, first label, step, index and coordinates; the summary
 * line says what the failing runs have in common. */
#ifndef ST_TRACE_SMOKE_H
#define ST_TRACE_SMOKE_H

#include <stdio.h>

#include "data/market.h"
#include "train/train_config.h"

enum { ST_SMOKE_CLEAN = 0, ST_SMOKE_TRIPPED = 1, ST_SMOKE_ERROR = 2 };

typedef struct {
    int run;
    long long seed;
    int status;     /* ST_SMOKE_* */
    char first[64]; /* first non-finite label ("" when clean) */
    long long step, index;
    char coords[96]; /* "b 0, k 1, j 0" */
    char kind[8];    /* NaN, +Inf, -Inf */
    int tagged;      /* the first bad value is the padding tag */
    int steps_done;
    double seconds;
    char error[200]; /* ST_SMOKE_ERROR: the message */
} st_smoke_row;

typedef struct {
    int runs;
    long long seed0;
    int steps;
    const char *inject; /* NULL: none */
    int pad;            /* poisoned padding (0: off) */
} st_smoke_opts;

/* Runs the smoke; prints the table to out (may be NULL) as rows finish.
 * rows holds o->runs entries. Errors of a run are its row's status, not
 * the return value (ST_OK unless the options are unusable). */
int st_smoke_run(const st_train_config *base, const st_market *m, const st_smoke_opts *o, FILE *out,
                 st_smoke_row *rows);
/* "in all 3 failing runs the first non-finite label is train_vsn_out at index 40", ... */
void st_smoke_summary(const st_smoke_row *rows, int n, char *buf, size_t len);

#endif
