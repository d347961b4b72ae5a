/* html.h: the self-contained HTML evaluation report (DESIGN section 10).
 *
 * One .html file with inline CSS and inline SVG charts, no scripts, fonts or
 * images from anywhere: a header with the headline numbers, the metrics table
 * against baselines, equity in R (with an optional baseline) and in money,
 * drawdown, the R-multiple histogram of trades, VSN variable importance, and
 * the training curves. Fill an st_report with pointers to arrays you already
 * have; every array is only read. Any chart's array may be NULL (or its count
 * 0): that chart then says there is nothing to show. NaN and Inf entries are
 * skipped in charts and print as "n/a" in the table. */
#ifndef ST_HTML_H
#define ST_HTML_H

/* Charts in every report, whatever is empty: equity R, equity money,
 * drawdown, R-multiple histogram, variable importance, four training curves. */
#define ST_REPORT_N_CHARTS 9

typedef struct {
    const char *title;    /* e.g. "ssmtrade evaluation: run X, test split" */
    const char *subtitle; /* free text: checkpoint, data, split, date, git revision */
    /* metrics table: rows = metrics, columns = policies (greedy, sampled, flat,
     * buy-and-hold, random, oracle) */
    int n_metrics, n_columns;
    const char *const *metric_names;   /* [n_metrics] */
    const char *const *column_names;   /* [n_columns] */
    const double *metric_values;       /* [n_metrics * n_columns], row-major; NaN prints "n/a" */
    const char *const *metric_formats; /* [n_metrics] one printf conversion of a double ("%.3f",
                                          "%.1f%%"); NULL or an unusable one prints "%.4g" */
    /* equity curves over bars */
    int n_bars;
    const double *equity_R;          /* [n_bars] cumulative R */
    const double *equity_money;      /* [n_bars] money equity, starting at 1 */
    const double *drawdown_R;        /* [n_bars] >= 0, drawn below 0 */
    const double *baseline_equity_R; /* [n_bars] or NULL */
    const char *baseline_name;       /* e.g. "buy-and-hold"; NULL: "baseline" */
    /* trades: the R-multiple of each closed trade */
    int n_trades;
    const double *trade_R;
    /* VSN variable importance: mean selection weight per feature */
    int n_features;
    const char *const *feature_names;
    const double *importance;
    /* training curves, one point per update (n_updates may be 0) */
    int n_updates;
    const double *update_step; /* x of each point (env steps or update index); NULL: 0..n-1 */
    const double *value_loss, *policy_loss, *entropy, *mean_episode_R;
} st_report;

/* Writes the report to path atomically (a temporary file beside it, fsync,
 * rename), so a reader never sees half a report. */
int st_report_write_html(const char *path, const st_report *r);

#endif
