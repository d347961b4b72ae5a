/* synthetic.h: the built-in synthetic market (DESIGN section 3), the data
 * `train` uses when it is given none.
 *
 * Deterministic from the seed: instrument i draws from Philox stream
 * ST_STREAM_MARKET under its own key, a mix of (seed, i), so instruments are
 * independent and adding one never changes another.
 *
 * Bars: hourly, around the clock, from 2020-01-01T00:00:00Z.
 * Per instrument (drawn once): a volatility scale s_i, log-uniform in
 * [0.75, 1.25]; a start price, 100 exp(U(-1, 1)); a volume scale V_i,
 * log-uniform in [2e5, 2e6].
 *
 * Two hidden Markov chains per instrument, both moving at every bar:
 *  - volatility regime q in {calm, normal, wild}, sigma_q = s_i x {0.25%,
 *    0.5%, 1%} per bar (log-return scale); stays with probability 0.995
 *    (mean run 200 bars), else jumps to one of the other two (equally likely).
 *  - trend state z in {-1 down, 0 flat, +1 up}: the PLANTED STRUCTURE. It
 *    stays with probability 0.99 (mean run 100 bars), else jumps to one of the
 *    other two; the bar's log-return drift is mu = z x 0.15 x sigma_q, a
 *    small fraction of the volatility (weak: one bar's return has the drift's
 *    sign only ~58% of the time), but persistent, so the past returns of a
 *    trend (ret_32, distances to moving averages...) partly reveal it.
 *
 * One bar: open = previous close x exp(g), g ~ N(0, (0.1 sigma_q)^2) (the
 * first bar opens at the start price); then a path of 8 sub-steps from the
 * open, each mu / 8 + sigma_q w z_k / sqrt(8), z_k ~ N(0, 1), with one scale
 * w = sqrt(2 / X), X ~ chi-square(4), shared by the bar: the bar's return is
 * Student-t with 4 degrees of freedom and unit variance times sigma_q (fat
 * tails, and whole bars are calm or wild). close = the path's end; high / low
 * = the path's max / min (open included) pushed out by 0.3 sigma_q w |z| /
 * sqrt(8) each (the extremes between sub-steps). Volume = V_i (sigma_q /
 * sigma_normal)^0.5 (0.4 + 0.6 |path return - mu| / sigma_q) exp(0.3 z),
 * rounded to whole units: it rises with the regime and the bar's activity.
 *
 * Oracle: oracle[t] = z_t, the TRUE hidden trend state at bar t (not a causal
 * estimate: it sees the hidden chain). Since z stays with probability 0.99,
 * z_t is the best guess of the next bar's drift, so holding z_t from the open
 * of t+1 is the (infeasible) upper bound a causal agent can approach by
 * inferring the trend from features. */
#ifndef ST_SYNTHETIC_H
#define ST_SYNTHETIC_H

#include <stdint.h>
#include <stdio.h>

#include "data/market.h"

#define ST_SYN_EPOCH 1577836800 /* 2020-01-01T00:00:00Z */
#define ST_SYN_BAR_SECONDS 3600
#define ST_SYN_TREND_STAY 0.99
#define ST_SYN_DRIFT_FRAC 0.15
#define ST_SYN_VOL_STAY 0.995

/* Generates the bars and oracle of instrument i (0-based) of the market with
 * this seed: allocates its arrays, names it "syn<i>". */
int st_synthetic_instrument(uint64_t seed, int i, int n_bars, st_instrument *in);

/* Writes a Markdown description of the market and its planted structure
 * (for the README that gen-data writes). */
void st_synthetic_describe(FILE *f, uint64_t seed, int n_inst, int n_bars);

#endif
