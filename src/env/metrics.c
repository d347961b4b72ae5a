/* metrics.c: the evaluation metrics of metrics.h.
 *
 * Trade metrics come from the trade list; return metrics from the per-step
 * portfolio returns r_k (an equal-weight portfolio of one account per
 * instrument, rebalanced every bar): equity_k = prod_{i<=k} (1 + r_i).
 * Sums run in a fixed order in double. */
#include "env/metrics.h"

#include <math.h>
#include <stddef.h>

const st_metric_info st_metric_table[ST_METRIC_COUNT] = {
#define ST_METRIC_ROW(name, fmt, what) {#name, fmt, what},
    ST_METRICS(ST_METRIC_ROW)
#undef ST_METRIC_ROW
};

double st_metric_value(const st_metrics *m, int i) {
    static const size_t offset[ST_METRIC_COUNT] = {
#define ST_METRIC_OFFSET(name, fmt, what) offsetof(st_metrics, name),
        ST_METRICS(ST_METRIC_OFFSET)
#undef ST_METRIC_OFFSET
    };
    return *(const double *)((const char *)m + offset[i]);
}

static void trade_metrics(const st_trade *t, int n, long inst_bars, st_metrics *o) {
    double s = 0, wins = 0, bars = 0;
    for (int i = 0; i < n; i++) {
        s += t[i].R;
        wins += t[i].R > 0;
        bars += t[i].bars;
    }
    o->trades = n;
    o->total_R = s;
    o->expectancy = n > 0 ? s / n : 0;
    o->win_rate = n > 0 ? wins / n : 0;
    o->avg_hold = n > 0 ? bars / n : 0;
    o->R_per_bar = inst_bars > 0 ? s / (double)inst_bars : 0;
    o->turnover = inst_bars > 0 ? 2.0 * n / (double)inst_bars : 0;
    o->exposure = inst_bars > 0 ? bars / (double)inst_bars : 0;
    double v = 0;
    for (int i = 0; i < n; i++)
        v += (t[i].R - o->expectancy) * (t[i].R - o->expectancy);
    double sd = n > 1 ? sqrt(v / (n - 1)) : 0;
    o->sqn = sd > 1e-12 ? sqrt((double)n) * o->expectancy / sd : 0;
}

static void return_metrics(const double *r, const double *R_step, int n, double bpy, st_metrics *o) {
    double s = 0, down = 0, eq = 1, peak = 1, dd = 0, cum_R = 0, peak_R = 0, dd_R = 0;
    for (int k = 0; k < n; k++) {
        s += r[k];
        down += r[k] < 0 ? r[k] * r[k] : 0;
        eq *= 1 + r[k];
        if (eq > peak) peak = eq;
        if (peak > 0 && 1 - eq / peak > dd) dd = 1 - eq / peak;
        cum_R += R_step[k];
        if (cum_R > peak_R) peak_R = cum_R;
        if (peak_R - cum_R > dd_R) dd_R = peak_R - cum_R;
    }
    double mean = n > 0 ? s / n : 0, v = 0;
    for (int k = 0; k < n; k++)
        v += (r[k] - mean) * (r[k] - mean);
    double sd = n > 1 ? sqrt(v / (n - 1)) : 0, dsd = n > 0 ? sqrt(down / n) : 0;
    o->sharpe = sd > 1e-15 ? mean / sd * sqrt(bpy) : 0;
    o->sortino = dsd > 1e-15 ? mean / dsd * sqrt(bpy) : 0;
    o->final_equity = eq;
    /* the exponent is capped so that a short, lucky run cannot overflow */
    o->cagr = n > 0 ? (eq > 0 ? exp(fmin(log(eq) * bpy / n, 700.0)) - 1 : -1) : 0;
    o->max_dd = dd;
    o->max_dd_R = dd_R;
    o->calmar = dd > 1e-15 ? o->cagr / dd : 0;
}

void st_metrics_compute(const st_trade *trades, int n_trades, const double *ret, const double *R_step, int n_steps,
                        long inst_bars, double bars_per_year, st_metrics *out) {
    double bpy = bars_per_year > 0 ? bars_per_year : ST_BARS_PER_YEAR;
    trade_metrics(trades, n_trades, inst_bars, out);
    return_metrics(ret, R_step, n_steps, bpy, out);
}
