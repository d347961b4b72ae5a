/* features.h: the causal feature engine: 40 snapshot features and ATR per bar
 * (DESIGN section 3).
 *
 * Every value at bar t is computed from bars 0..t only (tests/data/
 * test_features.c changes every bar after t and checks bit-identity). Raw
 * features come out here; normalisation with the training split's statistics
 * and clipping happen in splits.h.
 *
 * Notation at bar t: o, h, l, c, v the bar's open, high, low, close, volume;
 * r_t = log(c_t / c_{t-1}) (r_0 = 0); lv_t = log(1 + v_t); A = ATR(t) below;
 * mean_w / std_w / max_w / min_w over the w bars t-w+1..t (population
 * moments). Before the warm-up, windows are shortened to the bars that exist
 * and returns reach back to bar 0 at most, so every value is finite, but only
 * bars >= ST_FEATURE_WARMUP are fully defined (the dataset zeroes the rest).
 *
 * ATR(t), in price: true range TR_t = max(h - l, |h - c_{t-1}|, |l - c_{t-1}|)
 * (TR_0 = h_0 - l_0), averaged as ATR_t = ATR_{t-1} + (TR_t - ATR_{t-1}) /
 * min(t + 1, 14): the plain mean for the first 14 bars, then Wilder's
 * 14-bar smoothing; then floored at 1e-4 * c_t so that 1R never reaches zero.
 *
 * Every divisor is floored, so constant prices and zero volume give finite
 * values (mostly 0).
 *
 * |  # | name          | formula                                                    |
 * |---:|---------------|------------------------------------------------------------|
 * |  0 | ret_1         | log(c_t / c_{t-1})                                         |
 * |  1 | ret_2         | log(c_t / c_{t-2})                                         |
 * |  2 | ret_4         | log(c_t / c_{t-4})                                         |
 * |  3 | ret_8         | log(c_t / c_{t-8})                                         |
 * |  4 | ret_16        | log(c_t / c_{t-16})                                        |
 * |  5 | ret_32        | log(c_t / c_{t-32})                                        |
 * |  6 | ret_64        | log(c_t / c_{t-64})                                        |
 * |  7 | rvol_5        | sqrt(mean_5(r^2))  realised volatility                     |
 * |  8 | rvol_10       | sqrt(mean_10(r^2))                                         |
 * |  9 | rvol_20       | sqrt(mean_20(r^2))                                         |
 * | 10 | rvol_64       | sqrt(mean_64(r^2))                                         |
 * | 11 | rvol_ratio    | log((rvol_5 + 1e-8) / (rvol_64 + 1e-8))                    |
 * | 12 | atr_pct       | log(A / c)                                                 |
 * | 13 | range_atr     | (h - l) / A                                                |
 * | 14 | body_atr      | (c - o) / A                                                |
 * | 15 | upper_wick    | (h - max(o, c)) / A                                        |
 * | 16 | lower_wick    | (min(o, c) - l) / A                                        |
 * | 17 | gap_atr       | (o - c_{t-1}) / A                                          |
 * | 18 | close_loc     | (2c - h - l) / max(h - l, 1e-9 c)   in [-1, 1]             |
 * | 19 | volume_z20    | (lv - mean_20(lv)) / max(std_20(lv), 0.01)                 |
 * | 20 | volume_z64    | (lv - mean_64(lv)) / max(std_64(lv), 0.01)                 |
 * | 21 | volume_trend  | mean_5(lv) - mean_20(lv)                                   |
 * | 22 | dist_sma8     | (c - mean_8(c)) / A                                        |
 * | 23 | dist_sma16    | (c - mean_16(c)) / A                                       |
 * | 24 | dist_sma32    | (c - mean_32(c)) / A                                       |
 * | 25 | dist_sma64    | (c - mean_64(c)) / A                                       |
 * | 26 | dist_high20   | (c - max_20(h)) / A   (<= 0)                               |
 * | 27 | dist_low20    | (c - min_20(l)) / A   (>= 0)                               |
 * | 28 | dist_high64   | (c - max_64(h)) / A                                        |
 * | 29 | dist_low64    | (c - min_64(l)) / A                                        |
 * | 30 | rsi_14        | (G - L) / max(G + L, 1e-10 c) = (RSI - 50) / 50, with G, L  |
 * |    |               | Wilder means (as ATR) of the gains / losses c_t - c_{t-1}  |
 * | 31 | macd          | (E12 - E26) / A, E_s = EMA of c, alpha 2/(s+1), E_0 = c_0  |
 * | 32 | macd_signal   | S / A, S = EMA_9 of (E12 - E26), S_0 = 0                   |
 * | 33 | macd_hist     | (E12 - E26 - S) / A                                        |
 * | 34 | skew_20       | m3 / max(m2, 1e-14)^1.5, central moments of r over 20 bars |
 * | 35 | skew_64       | the same over 64 bars                                      |
 * | 36 | tod_sin       | sin(2 pi s / 86400), s = seconds since UTC midnight        |
 * | 37 | tod_cos       | cos(2 pi s / 86400)                                        |
 * | 38 | dow_sin       | sin(2 pi d / 7), d = UTC day of week, Monday = 0           |
 * | 39 | dow_cos       | cos(2 pi d / 7)                                            |
 *
 * Volume features (19-21) are 0 when the data has no volume column.
 * Warm-up: ret_64 needs c_{t-64} and the 64-bar windows of r need r_{t-63},
 * so bar 64 is the first with every window full; the recursive averages (ATR,
 * RSI, EMAs) start at bar 0 and have then seen 65 bars, more than twice their
 * longest span (26). */
#ifndef ST_FEATURES_H
#define ST_FEATURES_H

#include <stdint.h>

enum {
    ST_SNAPSHOT_FEATURES = 40, /* F */
    ST_FEATURE_WARMUP = 64,    /* the first bar whose features are fully defined */
    ST_ATR_BARS = 14,
};

/* Indices of the features other code refers to by name. */
enum {
    ST_FEAT_RET_1 = 0,
    ST_FEAT_RET_32 = 5,
    ST_FEAT_VOLUME_Z20 = 19,
    ST_FEAT_VOLUME_TREND = 21,
};

/* The name of feature j (0 <= j < 40), as in the table above. */
const char *st_feature_name(int j);

/* Raw features of n bars: feat[t * feat_stride + j] for j < 40 (feat_stride
 * >= 40; the gap is not touched), and atr[t]. Volume may be NULL or ignored
 * (has_volume = 0): the volume features are then 0. The bars must be valid
 * (positive prices, low <= open, close <= high). Returns ST_ERR_MEMORY when its
 * scratch space cannot be allocated, else ST_OK. */
int st_features_compute(int n, const int64_t *ts, const double *open, const double *high, const double *low,
                        const double *close, const double *volume, int has_volume, float *feat, int feat_stride,
                        double *atr);

#endif
