/* policies.h: the baseline policies of an evaluation (DESIGN section 4).
 *
 *   flat     always 1 (no position): the zero line, costs nothing
 *   buyhold  always 2 (long): long with a 1R stop, re-entered at the open
 *            after each stop (env.h: a stop does not change the target)
 *   random   uniform over {0, 1, 2} at every bar; the draw at (instrument i,
 *            bar t) is Philox(seed, ST_STREAM_EVAL, ((uint64)i << 32) | t),
 *            so it does not depend on B or on the order of the walk
 *   oracle   oracle[t] + 1 of the synthetic market (the planted structure's
 *            target position); unavailable when the data has no oracle
 * Each is an st_policy_fn (backtest.h) with an st_baseline as its user data. */
#ifndef ST_POLICIES_H
#define ST_POLICIES_H

#include <stdint.h>

#include "env/backtest.h"

enum { ST_BASELINE_FLAT = 0, ST_BASELINE_BUYHOLD, ST_BASELINE_RANDOM, ST_BASELINE_ORACLE, ST_BASELINE_COUNT };

typedef struct {
    int policy;    /* ST_BASELINE_* */
    uint64_t seed; /* random policy draws */
} st_baseline;

/* "flat", "buyhold", "random", "oracle". */
const char *st_baseline_name(int policy);
/* The ST_BASELINE_* of name, or -1. */
int st_baseline_parse(const char *name);
/* 1 when the policy can run on m (the oracle needs every instrument's oracle). */
int st_baseline_available(int policy, const st_market *m);
/* The st_policy_fn of every baseline; user is a const st_baseline *. */
int st_baseline_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions);

#endif
