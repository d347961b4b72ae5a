/* html.c: the self-contained HTML evaluation report of html.h.
 *
 * The page, top to bottom: title and subtitle; headline numbers (final R,
 * money return, max drawdown, trades, expectancy, baseline, top feature);
 * the metrics table (metrics x policies); equity in R with the baseline,
 * equity in money and the drawdown; the R-multiple histogram and the VSN
 * variable importance; the four training curves (raw, and an EMA when there
 * are enough points). The charts are drawn by svg.c. No timestamps are
 * added, so the same inputs give the same bytes. */
#include "report/html.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "report/svg.h"

#define W_FULL 1120
#define W_HALF 550
#define COLOR_AGENT "#1f5fbf"
#define COLOR_BASE "#8a8a8a"
#define COLOR_MONEY "#2e9e5b"
#define COLOR_DD "#d64541"
/* Smoothing of the training curves: the TensorBoard-style debiased EMA. */
#define EMA_ALPHA 0.9
#define EMA_MIN_POINTS 20

static const char page_css[] =
    "*{box-sizing:border-box}"
    "body{margin:0;background:#f4f5f7;color:#222;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
    "Helvetica,Arial,sans-serif}"
    "main{max-width:1180px;margin:0 auto;padding:24px}"
    "h1{font-size:22px;margin:0 0 4px}"
    "h2{font-size:16px;margin:28px 0 10px;color:#333;border-bottom:1px solid #ddd;padding-bottom:4px}"
    ".sub{color:#666;margin:0 0 18px;white-space:pre-wrap}"
    ".panel{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:8px}"
    ".grid2{display:grid;grid-template-columns:1fr 1fr;gap:14px;align-items:start}"
    "@media (max-width:900px){.grid2{grid-template-columns:1fr}}"
    "svg.chart{width:100%;height:auto;display:block}"
    ".kpis{display:flex;flex-wrap:wrap;gap:10px}"
    ".kpi{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:10px 14px;min-width:150px}"
    ".kpi .k{color:#666;font-size:12px;text-transform:uppercase;letter-spacing:.04em}"
    ".kpi .v{font-size:21px;font-weight:600;font-variant-numeric:tabular-nums}"
    ".kpi .d{color:#777;font-size:12px}"
    ".pos{color:#1e7d45}.neg{color:#c0392b}"
    "table{border-collapse:collapse;background:#fff;font-variant-numeric:tabular-nums;width:100%}"
    "th,td{padding:5px 12px;border-bottom:1px solid #eceef1}"
    "thead th{background:#f0f2f5;text-align:right;font-weight:600}"
    "thead th:first-child,tbody th{text-align:left;font-weight:500}"
    "td{text-align:right;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}"
    "tbody tr:nth-child(even){background:#fafbfc}"
    "td.c0,th.c0{background:#eef4fd}"
    ".na{color:#aaa}"
    ".tablewrap{overflow-x:auto;border:1px solid #e2e4e8;border-radius:8px}"
    "table.stats th,table.stats td{border-bottom:1px solid #f0f1f3;padding:4px 10px}"
    "table.stats th{text-align:left;color:#555;font-weight:500}"
    "footer{color:#888;font-size:12px;margin-top:28px}";

/* --- small helpers --------------------------------------------------------- */

static void esc(FILE *f, const char *s) { st_xml_escape(f, s); }

/* Last drawable value of v[n], NAN when none. */
static double last_ok(const double *v, int n) {
    for (int i = n - 1; v && i >= 0; i--)
        if (st_svg_ok(v[i])) return v[i];
    return NAN;
}

static double max_ok(const double *v, int n) {
    double m = NAN;
    for (int i = 0; v && i < n; i++)
        if (st_svg_ok(v[i]) && !(v[i] <= m)) m = v[i];
    return m;
}

/* Is fmt exactly one floating-point conversion (flags, width and precision
 * of at most two digits each), with any other '%' written as "%%"? Formats
 * come from tables in code, but a wrong one must not read a missing vararg. */
static int fmt_ok(const char *fmt) {
    if (!fmt || strlen(fmt) > 32) return 0;
    int convs = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') continue;
        p++;
        if (*p == '%') continue;
        while (*p && strchr("-+ #0", *p))
            p++;
        for (int d = 0; d < 2 && *p >= '0' && *p <= '9'; d++)
            p++;
        if (*p == '.') {
            p++;
            for (int d = 0; d < 2 && *p >= '0' && *p <= '9'; d++)
                p++;
        }
        if (!*p || !strchr("fFeEgG", *p)) return 0;
        convs++;
    }
    return convs == 1;
}

/* --- header and headline numbers ------------------------------------------- */

static void write_head(FILE *f, const st_report *r) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    esc(f, r->title ? r->title : "ssmtrade evaluation");
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n<h1>", page_css);
    esc(f, r->title ? r->title : "ssmtrade evaluation");
    fputs("</h1>\n", f);
    if (r->subtitle) {
        fputs("<p class=\"sub\">", f);
        esc(f, r->subtitle);
        fputs("</p>\n", f);
    }
}

/* One headline box; value_class colours the number by its sign. */
static void kpi(FILE *f, const char *key, const char *value, const char *value_class, const char *detail) {
    fputs("<div class=\"kpi\"><div class=\"k\">", f);
    esc(f, key);
    fprintf(f, "</div><div class=\"v %s\">", value_class ? value_class : "");
    esc(f, value);
    fputs("</div>", f);
    if (detail) {
        fputs("<div class=\"d\">", f);
        esc(f, detail);
        fputs("</div>", f);
    }
    fputs("</div>\n", f);
}

static const char *sign_class(double v) { return v > 0 ? "pos" : v < 0 ? "neg" : ""; }

static void write_trade_kpis(FILE *f, const st_report *r) {
    int m = 0, wins = 0;
    double sum = 0;
    for (int i = 0; r->trade_R && i < r->n_trades; i++) {
        if (!st_svg_ok(r->trade_R[i])) continue;
        m++;
        wins += r->trade_R[i] > 0;
        sum += r->trade_R[i];
    }
    char v[64], d[96];
    snprintf(v, sizeof v, "%d", m);
    if (m > 0) snprintf(d, sizeof d, "win rate %.1f%%", 100.0 * wins / m);
    kpi(f, "Trades", v, NULL, m > 0 ? d : "no trades");
    if (m == 0) return;
    snprintf(v, sizeof v, "%+.3f R", sum / m);
    kpi(f, "Expectancy", v, sign_class(sum), "mean R per trade");
}

static void write_top_feature(FILE *f, const st_report *r) {
    int best = -1;
    for (int i = 0; r->importance && r->feature_names && i < r->n_features; i++)
        if (st_svg_ok(r->importance[i]) && (best < 0 || r->importance[i] > r->importance[best])) best = i;
    if (best < 0) return;
    char d[64];
    snprintf(d, sizeof d, "weight %.3f (uniform %.3f)", r->importance[best], 1.0 / r->n_features);
    kpi(f, "Top variable", r->feature_names[best] ? r->feature_names[best] : "?", NULL, d);
}

static void write_kpis(FILE *f, const st_report *r) {
    char v[64], d[128];
    fputs("<div class=\"kpis\">\n", f);
    double R = last_ok(r->equity_R, r->n_bars);
    if (!isnan(R)) {
        snprintf(v, sizeof v, "%+.2f R", R);
        snprintf(d, sizeof d, "over %d bars", r->n_bars);
        kpi(f, "Total R", v, sign_class(R), d);
    }
    double money = last_ok(r->equity_money, r->n_bars);
    if (!isnan(money)) {
        snprintf(v, sizeof v, "%+.1f%%", 100.0 * (money - 1));
        snprintf(d, sizeof d, "equity %.4f from 1", money);
        kpi(f, "Money return", v, sign_class(money - 1), d);
    }
    double dd = max_ok(r->drawdown_R, r->n_bars);
    if (!isnan(dd)) {
        snprintf(v, sizeof v, "%.2f R", dd);
        kpi(f, "Max drawdown", v, dd > 0 ? "neg" : NULL, "from the equity peak");
    }
    write_trade_kpis(f, r);
    double base = last_ok(r->baseline_equity_R, r->n_bars);
    if (!isnan(base)) {
        snprintf(v, sizeof v, "%+.2f R", base);
        snprintf(d, sizeof d, "agent minus baseline %+.2f R", isnan(R) ? 0.0 : R - base);
        kpi(f, r->baseline_name ? r->baseline_name : "baseline", v, sign_class(base), d);
    }
    write_top_feature(f, r);
    fputs("</div>\n", f);
}

/* --- metrics table --------------------------------------------------------- */

static void write_cell(FILE *f, double v, const char *fmt, int col) {
    char buf[96];
    const char *cls = col == 0 ? "c0" : "";
    if (isnan(v)) {
        fprintf(f, "<td class=\"na %s\">n/a</td>", cls);
        return;
    }
    if (isinf(v)) {
        fprintf(f, "<td class=\"%s\">%s&infin;</td>", cls, v < 0 ? "&minus;" : "");
        return;
    }
    snprintf(buf, sizeof buf, fmt_ok(fmt) ? fmt : "%.4g", v);
    fprintf(f, "<td class=\"%s%s\">", cls, v < 0 ? " neg" : "");
    esc(f, buf);
    fputs("</td>", f);
}

static void write_metrics(FILE *f, const st_report *r) {
    fputs("<h2>Metrics against baselines</h2>\n", f);
    if (r->n_metrics <= 0 || r->n_columns <= 0 || !r->metric_values) {
        fputs("<p class=\"sub\">no metrics recorded</p>\n", f);
        return;
    }
    fputs("<div class=\"tablewrap\"><table>\n<thead><tr><th>metric</th>", f);
    for (int c = 0; c < r->n_columns; c++) {
        fprintf(f, "<th class=\"%s\">", c == 0 ? "c0" : "");
        esc(f, r->column_names ? r->column_names[c] : "");
        fputs("</th>", f);
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int m = 0; m < r->n_metrics; m++) {
        fputs("<tr><th>", f);
        esc(f, r->metric_names ? r->metric_names[m] : "");
        fputs("</th>", f);
        const char *fmt = r->metric_formats ? r->metric_formats[m] : NULL;
        for (int c = 0; c < r->n_columns; c++)
            write_cell(f, r->metric_values[(size_t)m * (size_t)r->n_columns + (size_t)c], fmt, c);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

/* --- charts ---------------------------------------------------------------- */

static void panel_open(FILE *f) { fputs("<div class=\"panel\">\n", f); }
static void panel_close(FILE *f) { fputs("</div>\n", f); }

/* A legend label "name (final +x.xx R)", or the name alone without data. */
static void final_label(char *buf, size_t cap, const char *name, const double *v, int n) {
    double last = last_ok(v, n);
    if (isnan(last))
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%s (final %+.2f R)", name, last);
}

static void write_equity(FILE *f, const st_report *r, const double *neg_dd) {
    char agent[96], base[160];
    final_label(agent, sizeof agent, "agent", r->equity_R, r->n_bars);
    final_label(base, sizeof base, r->baseline_name ? r->baseline_name : "baseline", r->baseline_equity_R, r->n_bars);
    st_svg_series eq[2] = {{agent, NULL, r->equity_R, r->n_bars, COLOR_AGENT, 0, 0},
                           {base, NULL, r->baseline_equity_R, r->n_bars, COLOR_BASE, 1, 0}};
    st_svg_line_chart c = {.title = "Equity in R",
                           .x_label = "bar",
                           .y_label = "cumulative R",
                           .width = W_FULL,
                           .height = 340,
                           .series = eq,
                           .n_series = r->baseline_equity_R ? 2 : 1,
                           .has_ref = 1,
                           .ref = 0,
                           .x_integer = 1,
                           .empty = "no equity curve recorded"};
    fputs("<h2>Performance</h2>\n", f);
    panel_open(f);
    st_svg_line(f, &c);
    panel_close(f);

    fputs("<div class=\"grid2\" style=\"margin-top:14px\">\n", f);
    st_svg_series money = {NULL, NULL, r->equity_money, r->n_bars, COLOR_MONEY, 0, 0};
    st_svg_line_chart cm = {.title = "Equity in money (fixed-fractional risk)",
                            .x_label = "bar",
                            .y_label = "equity (start = 1)",
                            .width = W_HALF,
                            .height = 280,
                            .series = &money,
                            .n_series = 1,
                            .has_ref = 1,
                            .ref = 1.0,
                            .x_integer = 1,
                            .empty = "no money equity recorded"};
    panel_open(f);
    st_svg_line(f, &cm);
    panel_close(f);
    st_svg_series dd = {NULL, NULL, neg_dd, neg_dd ? r->n_bars : 0, COLOR_DD, 0, 0};
    st_svg_line_chart cd = {.title = "Drawdown from peak",
                            .x_label = "bar",
                            .y_label = "drawdown (R)",
                            .width = W_HALF,
                            .height = 280,
                            .series = &dd,
                            .n_series = 1,
                            .area = 1,
                            .has_ref = 1,
                            .ref = 0,
                            .x_integer = 1,
                            .empty = "no drawdown recorded"};
    panel_open(f);
    st_svg_line(f, &cd);
    panel_close(f);
    fputs("</div>\n", f);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of sorted v[n] by linear interpolation between order statistics. */
static double quantile(const double *v, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void stat_row(FILE *f, const char *k1, const char *v1, const char *k2, const char *v2) {
    fprintf(f, "<tr><th>%s</th><td>%s</td><th>%s</th><td>%s</td></tr>\n", k1, v1, k2, v2);
}

/* The distribution of trade R in numbers, beside the histogram: what a
 * researcher reads off first (payoff, profit factor, tails). */
static void write_trade_stats(FILE *f, const st_report *r) {
    double *v = r->trade_R && r->n_trades > 0 ? malloc(sizeof(double) * (size_t)r->n_trades) : NULL;
    int n = 0, wins = 0;
    double sum = 0, win_sum = 0, loss_sum = 0, sq = 0;
    for (int i = 0; v && i < r->n_trades; i++) {
        double x = r->trade_R[i];
        if (!st_svg_ok(x)) continue;
        v[n++] = x;
        sum += x;
        if (x > 0)
            wins++, win_sum += x;
        else
            loss_sum += x;
    }
    if (n == 0) {
        free(v);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (v[i] - mean) * (v[i] - mean);
    double sd = n > 1 ? sqrt(sq / (n - 1)) : 0, avg_win = wins ? win_sum / wins : 0;
    double avg_loss = n > wins ? loss_sum / (n - wins) : 0;
    char a[48], b[48];
    fputs("<div class=\"panel\" style=\"margin-top:14px\"><table class=\"stats\">\n", f);
    snprintf(a, sizeof a, "%d", n);
    snprintf(b, sizeof b, "%.1f%%", 100.0 * wins / n);
    stat_row(f, "trades", a, "win rate", b);
    snprintf(a, sizeof a, "%+.3f", mean);
    snprintf(b, sizeof b, "%+.3f", quantile(v, n, 0.5));
    stat_row(f, "mean R", a, "median R", b);
    if (wins > 0)
        snprintf(a, sizeof a, "%+.3f", avg_win);
    else
        snprintf(a, sizeof a, "n/a");
    if (n > wins)
        snprintf(b, sizeof b, "%+.3f", avg_loss);
    else
        snprintf(b, sizeof b, "n/a");
    stat_row(f, "avg win", a, "avg loss", b);
    if (wins > 0 && avg_loss < 0)
        snprintf(a, sizeof a, "%.2f", avg_win / -avg_loss);
    else
        snprintf(a, sizeof a, "n/a");
    if (loss_sum < 0)
        snprintf(b, sizeof b, "%.2f", win_sum / -loss_sum);
    else
        snprintf(b, sizeof b, "n/a");
    stat_row(f, "payoff ratio", a, "profit factor", b);
    snprintf(a, sizeof a, "%.3f", sd);
    snprintf(b, sizeof b, "%.2f", sd > 0 ? sqrt((double)n) * mean / sd : 0.0);
    stat_row(f, "std R", a, "SQN", b);
    snprintf(a, sizeof a, "%+.2f", v[0]);
    snprintf(b, sizeof b, "%+.2f", v[n - 1]);
    stat_row(f, "worst", a, "best", b);
    snprintf(a, sizeof a, "%+.2f", quantile(v, n, 0.05));
    snprintf(b, sizeof b, "%+.2f", quantile(v, n, 0.95));
    stat_row(f, "5th pct", a, "95th pct", b);
    fputs("</table></div>\n", f);
    free(v);
}

static void write_trades_and_vsn(FILE *f, const st_report *r) {
    fputs("<h2>Trades and variable selection</h2>\n<div class=\"grid2\">\n<div>\n", f);
    panel_open(f);
    st_svg_histogram(f, "R-multiples of closed trades", "R-multiple", "R", r->trade_R, r->trade_R ? r->n_trades : 0,
                     W_HALF, 300, "no trades");
    panel_close(f);
    write_trade_stats(f, r);
    fputs("</div>\n", f);
    panel_open(f);
    st_svg_hbars(f, "VSN variable importance (mean selection weight)", r->feature_names, r->importance,
                 r->importance ? r->n_features : 0, W_HALF, 1, "no variable importance recorded");
    panel_close(f);
    fputs("</div>\n", f);
}

/* Debiased EMA of v into out; non-finite samples are skipped (out is NaN
 * there) so one bad update does not erase the curve. */
static void ema(const double *v, int n, double *out) {
    double s = 0, w = 0;
    for (int i = 0; i < n; i++) {
        if (!st_svg_ok(v[i])) {
            out[i] = NAN;
            continue;
        }
        s = EMA_ALPHA * s + (1 - EMA_ALPHA) * v[i];
        w = EMA_ALPHA * w + (1 - EMA_ALPHA);
        out[i] = s / w;
    }
}

static void write_curve(FILE *f, const st_report *r, const char *title, const double *v, const char *color,
                        double *smooth) {
    int n = v ? r->n_updates : 0;
    int smoothed = smooth && n >= EMA_MIN_POINTS;
    st_svg_series s[2] = {{smoothed ? "raw" : NULL, r->update_step, v, n, color, 0, smoothed ? 0.35 : 0},
                          {"EMA 0.9", r->update_step, smooth, n, color, 0, 0}};
    if (smoothed) ema(v, n, smooth);
    st_svg_line_chart c = {.title = title,
                           .x_label = "step",
                           .width = W_HALF,
                           .height = 240,
                           .series = s,
                           .n_series = smoothed ? 2 : 1,
                           .x_integer = 1,
                           .empty = "no training curve recorded"};
    panel_open(f);
    st_svg_line(f, &c);
    panel_close(f);
}

static void write_training(FILE *f, const st_report *r, double *smooth) {
    fputs("<h2>Training</h2>\n<div class=\"grid2\">\n", f);
    write_curve(f, r, "Value loss", r->value_loss, "#1f5fbf", smooth);
    write_curve(f, r, "Policy loss", r->policy_loss, "#e07b00", smooth);
    write_curve(f, r, "Entropy", r->entropy, "#7d4cb0", smooth);
    write_curve(f, r, "Mean episode R", r->mean_episode_R, "#2e9e5b", smooth);
    fputs("</div>\n", f);
}

static void write_footer(FILE *f) {
#ifdef ST_GIT_REV
    fputs("<footer>written by ssmtrade " ST_GIT_REV, f);
#else
    fputs("<footer>written by ssmtrade", f);
#endif
    fputs(". Charts skip missing (NaN/Inf) samples; long curves show the min and max of each of "
          "1000 buckets.</footer>\n</main>\n</body>\n</html>\n",
          f);
}

/* --- the file ---------------------------------------------------------------- */

static int check_report(const st_report *r) {
    ST_REQUIRE(r, ST_ERR_INTERNAL, "no report given");
    ST_REQUIRE(r->n_metrics >= 0 && r->n_columns >= 0 && r->n_bars >= 0 && r->n_trades >= 0 && r->n_features >= 0 &&
                   r->n_updates >= 0,
               ST_ERR_INPUT, "report with a negative count");
    return ST_OK;
}

static void write_page(FILE *f, const st_report *r, const double *neg_dd, double *smooth) {
    write_head(f, r);
    write_kpis(f, r);
    write_metrics(f, r);
    write_equity(f, r, neg_dd);
    write_trades_and_vsn(f, r);
    write_training(f, r, smooth);
    write_footer(f);
}

int st_report_write_html(const char *path, const st_report *r) {
    ST_TRY(check_report(r));
    ST_REQUIRE(path && path[0], ST_ERR_INPUT, "no report path given");
    /* The drawdown is drawn under the zero line, the EMA needs scratch. */
    double *neg_dd = r->drawdown_R && r->n_bars > 0 ? malloc(sizeof(double) * (size_t)r->n_bars) : NULL;
    double *smooth = r->n_updates > 0 ? malloc(sizeof(double) * (size_t)r->n_updates) : NULL;
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    int rc = ST_OK;
    if ((r->drawdown_R && r->n_bars > 0 && !neg_dd) || (r->n_updates > 0 && !smooth) || !tmp) {
        rc = ST_FAIL(ST_ERR_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    for (int i = 0; neg_dd && i < r->n_bars; i++)
        neg_dd[i] = -r->drawdown_R[i];
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        rc = ST_FAIL(ST_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    write_page(f, r, neg_dd, smooth);
    if (ferror(f) || fflush(f) != 0) rc = ST_FAIL(ST_ERR_IO, "writing %s: %s", tmp, strerror(errno));
    if (rc == ST_OK && fsync(fileno(f)) != 0) rc = ST_FAIL(ST_ERR_IO, "fsync %s: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && rc == ST_OK) rc = ST_FAIL(ST_ERR_IO, "closing %s: %s", tmp, strerror(errno));
    if (rc == ST_OK && rename(tmp, path) != 0)
        rc = ST_FAIL(ST_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != ST_OK) unlink(tmp);
out:
    free(tmp);
    free(smooth);
    free(neg_dd);
    return rc;
}
