/* metrics.h: the metrics of an evaluation (DESIGN section 4), declared once.
 *
 * ST_METRICS is the single table (name, printf format, definition) that the
 * struct, the CLI table, the JSON output and reports are generated from.
 * Inputs are what a backtest (backtest.h) collects: the closed trades, the
 * per-step portfolio money returns at fixed-fractional risk, the per-step
 * sum of rewards in R, and the number of instrument-bars walked.
 * Every metric is finite by construction: where a metric is undefined
 * (no trades, zero variance, no drawdown) it is 0, as its line says. */
#ifndef ST_METRICS_H
#define ST_METRICS_H

#include "env/env.h"

/* Annualisation default: daily bars. */
#define ST_BARS_PER_YEAR 252.0

#define ST_METRICS(X)                                                                                                  \
    X(total_R, "%.2f", "sum of the R of every trade, costs included")                                                  \
    X(R_per_bar, "%.5f", "total_R / instrument-bars walked")                                                           \
    X(expectancy, "%.4f", "mean R per trade (0 without trades)")                                                       \
    X(sqn, "%.3f", "sqrt(n) * mean / std of trade R, sample std (0 with fewer than 2 trades or std 0)")                \
    X(win_rate, "%.3f", "share of trades with R > 0 (0 without trades)")                                               \
    X(trades, "%.0f", "number of trades")                                                                              \
    X(avg_hold, "%.2f", "mean bars per trade (0 without trades)")                                                      \
    X(turnover, "%.4f", "fills (entries + exits; a flip is 2) per instrument-bar")                                     \
    X(exposure, "%.3f", "share of instrument-bars spent in a position")                                                \
    X(sharpe, "%.3f", "mean / std of per-bar portfolio returns x sqrt(bars per year) (0 when std is 0)")               \
    X(sortino, "%.3f", "mean / downside deviation sqrt(mean(min(r, 0)^2)) x sqrt(bars per year) (0 when 0)")           \
    X(cagr, "%.4f", "final_equity^(bars per year / bars) - 1 (-1 when the equity is gone)")                            \
    X(max_dd, "%.4f", "max drawdown of the money equity curve, as a fraction of its peak")                             \
    X(max_dd_R, "%.2f", "max drawdown of the cumulative R curve (sum over instruments)")                               \
    X(calmar, "%.3f", "cagr / max_dd (0 without drawdown)")                                                            \
    X(final_equity, "%.4f", "money equity at the end from 1: product of (1 + per-bar portfolio return)")

typedef struct {
#define ST_METRIC_FIELD(name, fmt, what) double name;
    ST_METRICS(ST_METRIC_FIELD)
#undef ST_METRIC_FIELD
} st_metrics;

enum {
#define ST_METRIC_ENUM(name, fmt, what) ST_METRIC_##name,
    ST_METRICS(ST_METRIC_ENUM)
#undef ST_METRIC_ENUM
        ST_METRIC_COUNT
};

typedef struct {
    const char *name;
    const char *fmt;
    const char *what;
} st_metric_info;

extern const st_metric_info st_metric_table[ST_METRIC_COUNT];

/* Value of metric i (ST_METRIC_*) of m. */
double st_metric_value(const st_metrics *m, int i);

/* Computes every metric. ret[n_steps]: per-step portfolio money return;
 * R_step[n_steps]: per-step reward summed over instruments; inst_bars:
 * instrument-bars walked (>= 1 is assumed for the per-bar metrics, 0 gives
 * zeros); bars_per_year <= 0 means ST_BARS_PER_YEAR. */
void st_metrics_compute(const st_trade *trades, int n_trades, const double *ret, const double *R_step, int n_steps,
                        long inst_bars, double bars_per_year, st_metrics *out);

#endif
