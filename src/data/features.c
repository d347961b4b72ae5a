/* features.c: the 40 causal snapshot features and ATR of features.h.
 *
 * One forward pass keeps the recursive averages (ATR, RSI, EMAs); windowed
 * statistics are recomputed from their window at each bar (one fused pass of
 * at most 64 bars back for the sums, one more for central moments) instead
 * of running sums, so that no rounding drift or cancellation carries from one
 * bar to the next: a constant series gives exact zeros, and the value at t is
 * the same whatever follows t. */
#include "data/features.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"

static const char *const feature_names[ST_SNAPSHOT_FEATURES] = {
    "ret_1",       "ret_2",      "ret_4",       "ret_8",      "ret_16",      "ret_32",       "ret_64",    "rvol_5",
    "rvol_10",     "rvol_20",    "rvol_64",     "rvol_ratio", "atr_pct",     "range_atr",    "body_atr",  "upper_wick",
    "lower_wick",  "gap_atr",    "close_loc",   "volume_z20", "volume_z64",  "volume_trend", "dist_sma8", "dist_sma16",
    "dist_sma32",  "dist_sma64", "dist_high20", "dist_low20", "dist_high64", "dist_low64",   "rsi_14",    "macd",
    "macd_signal", "macd_hist",  "skew_20",     "skew_64",    "tod_sin",     "tod_cos",      "dow_sin",   "dow_cos",
};

const char *st_feature_name(int j) { return j >= 0 && j < ST_SNAPSHOT_FEATURES ? feature_names[j] : "?"; }

static const double TWO_PI = 6.283185307179586476925;

/* Window lengths with a statistic; the fused pass records its running sums
 * as it reaches each of them. */
enum { N_WINDOWS = 7 };
static const int WINDOWS[N_WINDOWS] = {5, 8, 10, 16, 20, 32, 64};
enum { W5, W8, W10, W16, W20, W32, W64 };

typedef struct {
    double sr, sr2, sc, slv, maxh, minl;
    int count; /* bars in the window (fewer than its length before bar 63) */
} window_sums;

/* Sums over the windows ending at t, in one pass of at most 64 bars back. */
static void window_pass(int t, const double *r, const double *lv, const double *close, const double *high,
                        const double *low, window_sums w[N_WINDOWS]) {
    int last = t < 63 ? t : 63, next = 0;
    window_sums s = {0, 0, 0, 0, high[t], low[t], 0};
    for (int k = 0; k <= last; k++) {
        int i = t - k;
        s.sr += r[i];
        s.sr2 += r[i] * r[i];
        s.sc += close[i];
        s.slv += lv[i];
        s.maxh = fmax(s.maxh, high[i]);
        s.minl = fmin(s.minl, low[i]);
        s.count = k + 1;
        while (next < N_WINDOWS && (k + 1 == WINDOWS[next] || k == last))
            w[next++] = s;
    }
}

typedef struct {
    double skew20, skew64, std_lv20, std_lv64;
} central_moments;

/* Second pass: central moments (no cancellation, exact zeros when constant). */
static central_moments central_pass(int t, const double *r, const double *lv, const window_sums w[N_WINDOWS]) {
    int last = t < 63 ? t : 63;
    double mr20 = w[W20].sr / w[W20].count, mr64 = w[W64].sr / w[W64].count;
    double ml20 = w[W20].slv / w[W20].count, ml64 = w[W64].slv / w[W64].count;
    double r2_20 = 0, r3_20 = 0, r2_64 = 0, r3_64 = 0, l2_20 = 0, l2_64 = 0;
    for (int k = 0; k <= last; k++) {
        int i = t - k;
        double d64 = r[i] - mr64, e64 = lv[i] - ml64;
        r2_64 += d64 * d64;
        r3_64 += d64 * d64 * d64;
        l2_64 += e64 * e64;
        if (k < 20) {
            double d20 = r[i] - mr20, e20 = lv[i] - ml20;
            r2_20 += d20 * d20;
            r3_20 += d20 * d20 * d20;
            l2_20 += e20 * e20;
        }
    }
    double n20 = w[W20].count, n64 = w[W64].count;
    double m2_20 = fmax(r2_20 / n20, 1e-14), m2_64 = fmax(r2_64 / n64, 1e-14);
    central_moments c;
    c.skew20 = (r3_20 / n20) / (m2_20 * sqrt(m2_20));
    c.skew64 = (r3_64 / n64) / (m2_64 * sqrt(m2_64));
    c.std_lv20 = sqrt(l2_20 / n20);
    c.std_lv64 = sqrt(l2_64 / n64);
    return c;
}

/* The recursive state carried from bar to bar. */
typedef struct {
    double atr, gain, loss, ema12, ema26, signal;
} rec_state;

/* Advances the recursive averages to bar t (mean for the first bars, then
 * Wilder's smoothing; EMAs seeded with the first close). */
static void advance(rec_state *s, int t, const double *high, const double *low, const double *close) {
    double prev = t > 0 ? close[t - 1] : close[0];
    double tr = high[t] - low[t];
    if (t > 0) tr = fmax(tr, fmax(fabs(high[t] - prev), fabs(low[t] - prev)));
    double wa = 1.0 / (t + 1 < ST_ATR_BARS ? t + 1 : ST_ATR_BARS);
    s->atr = t == 0 ? tr : s->atr + (tr - s->atr) * wa;
    if (t == 0) {
        s->ema12 = s->ema26 = close[0];
        return;
    }
    double d = close[t] - prev, wg = 1.0 / (t < ST_ATR_BARS ? t : ST_ATR_BARS);
    s->gain += (fmax(d, 0) - s->gain) * wg;
    s->loss += (fmax(-d, 0) - s->loss) * wg;
    s->ema12 += (close[t] - s->ema12) * (2.0 / 13.0);
    s->ema26 += (close[t] - s->ema26) * (2.0 / 27.0);
    s->signal += (s->ema12 - s->ema26 - s->signal) * (2.0 / 10.0);
}

/* Day of week of unix time ts, Monday = 0 (1970-01-01 was a Thursday). */
static int day_of_week(int64_t ts) {
    int64_t days = ts >= 0 ? ts / 86400 : -((-ts + 86399) / 86400);
    int64_t d = (days + 3) % 7;
    return (int)(d < 0 ? d + 7 : d);
}

static double second_of_day(int64_t ts) {
    int64_t s = ts % 86400;
    return (double)(s < 0 ? s + 86400 : s);
}

/* Features of one bar, given the recursive state at t and r, lv up to t. */
static void bar_features(int t, const int64_t *ts, const double *open, const double *high, const double *low,
                         const double *close, const double *r, const double *lv, int has_volume, const rec_state *s,
                         double A, float *f) {
    double c = close[t], o = open[t], h = high[t], l = low[t];
    double prev = t > 0 ? close[t - 1] : close[0];
    window_sums w[N_WINDOWS] = {{0}}; /* every entry is filled by window_pass */
    window_pass(t, r, lv, close, high, low, w);
    central_moments cm = central_pass(t, r, lv, w);
    static const int lags[7] = {1, 2, 4, 8, 16, 32, 64};
    for (int k = 0; k < 7; k++)
        f[k] = (float)log(c / close[t - lags[k] > 0 ? t - lags[k] : 0]);
    static const int rvols[4] = {W5, W10, W20, W64};
    double rv[4];
    for (int k = 0; k < 4; k++)
        f[7 + k] = (float)(rv[k] = sqrt(w[rvols[k]].sr2 / w[rvols[k]].count));
    f[11] = (float)log((rv[0] + 1e-8) / (rv[3] + 1e-8));
    f[12] = (float)log(A / c);
    f[13] = (float)((h - l) / A);
    f[14] = (float)((c - o) / A);
    f[15] = (float)((h - fmax(o, c)) / A);
    f[16] = (float)((fmin(o, c) - l) / A);
    f[17] = (float)((o - prev) / A);
    f[18] = (float)((2 * c - h - l) / fmax(h - l, 1e-9 * c));
    if (has_volume) {
        double m20 = w[W20].slv / w[W20].count, m64 = w[W64].slv / w[W64].count;
        f[19] = (float)((lv[t] - m20) / fmax(cm.std_lv20, 0.01));
        f[20] = (float)((lv[t] - m64) / fmax(cm.std_lv64, 0.01));
        f[21] = (float)(w[W5].slv / w[W5].count - m20);
    } else {
        f[19] = f[20] = f[21] = 0;
    }
    static const int smas[4] = {W8, W16, W32, W64};
    for (int k = 0; k < 4; k++)
        f[22 + k] = (float)((c - w[smas[k]].sc / w[smas[k]].count) / A);
    f[26] = (float)((c - w[W20].maxh) / A);
    f[27] = (float)((c - w[W20].minl) / A);
    f[28] = (float)((c - w[W64].maxh) / A);
    f[29] = (float)((c - w[W64].minl) / A);
    f[30] = (float)((s->gain - s->loss) / fmax(s->gain + s->loss, 1e-10 * c));
    double macd = s->ema12 - s->ema26;
    f[31] = (float)(macd / A);
    f[32] = (float)(s->signal / A);
    f[33] = (float)((macd - s->signal) / A);
    f[34] = (float)cm.skew20;
    f[35] = (float)cm.skew64;
    double tod = TWO_PI * second_of_day(ts[t]) / 86400.0, dow = TWO_PI * day_of_week(ts[t]) / 7.0;
    f[36] = (float)sin(tod);
    f[37] = (float)cos(tod);
    f[38] = (float)sin(dow);
    f[39] = (float)cos(dow);
}

int st_features_compute(int n, const int64_t *ts, const double *open, const double *high, const double *low,
                        const double *close, const double *volume, int has_volume, float *feat, int feat_stride,
                        double *atr) {
    if (n <= 0) return ST_OK;
    has_volume = has_volume && volume;
    double *r = malloc(sizeof(double) * 2 * (size_t)n);
    if (!r) return ST_FAIL(ST_ERR_MEMORY, "out of memory for the features of %d bars", n);
    double *lv = r + n;
    rec_state s = {0, 0, 0, 0, 0, 0};
    for (int t = 0; t < n; t++) {
        r[t] = t > 0 ? log(close[t] / close[t - 1]) : 0;
        lv[t] = has_volume ? log1p(volume[t]) : 0;
        advance(&s, t, high, low, close);
        double A = fmax(s.atr, 1e-4 * close[t]);
        atr[t] = A;
        bar_features(t, ts, open, high, low, close, r, lv, has_volume, &s, A, feat + (size_t)t * feat_stride);
    }
    free(r);
    return ST_OK;
}
