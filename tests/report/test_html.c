/* test_html.c: the HTML evaluation report from synthetic Philox data.
 *
 * Checks: the file is written atomically (no temporary left), holds one
 * <svg> per chart, never a "nan"/"inf" inside an SVG although the inputs
 * carry NaN and Inf, escapes every string (a "<script>" title, a feature
 * name with & < >), references nothing outside itself, keeps every polyline
 * under the point budget on a long series, sorts the importance bars,
 * counts every finite trade once in the histogram, and writes empty and
 * constant reports too. With ST_REPORT_EXAMPLE=path set it also leaves the
 * full synthetic report there, for a screenshot. */
#include "core/error.h"
#include "core/philox.h"
#include "report/html.h"
#include "report/svg.h"
#include "test.h"

#include <ctype.h>
#include <dirent.h>
#include <unistd.h>

#define F 40 /* snapshot variables, as in DESIGN section 2 */

static const char *feature_names[F] = {
    "ret_1",      "ret_2",      "ret_5",       "ret_10",    "ret_20",      "ret_60",    "logvol_z", "atr_14_pct",
    "atr_ratio",  "rsi_14",     "rsi_2",       "macd",      "macd_sig",    "macd_hist", "bb_pos",   "bb_width",
    "sma20_dist", "sma50_dist", "sma200_dist", "ema_slope", "hl_range<&>", "close_pos", "gap_open", "body_pct",
    "upper_wick", "lower_wick", "vol_ratio",   "obv_slope", "adx_14",      "di_diff",   "stoch_k",  "stoch_d",
    "cci_20",     "roc_12",     "zscore_20",   "skew_20",   "kurt_20",     "dow_sin",   "dow_cos",  "trend_60"};

static const char *metric_names[] = {"total_R", "expectancy", "win rate", "sharpe", "max_dd", "calmar", "bad fmt"};
static const char *metric_fmts[] = {"%.2f", "%.4f", "%.1f%%", "%.3f", "%.4f", "%.3f", "%s"};
static const char *columns[] = {"greedy", "sampled", "flat", "buy-and-hold", "random", "oracle"};
#define N_METRICS 7
#define N_COLUMNS 6

/* Owns the synthetic arrays behind one st_report. */
typedef struct {
    double *eq, *money, *dd, *base, *trades, *imp, *step, *vloss, *ploss, *ent, *epR, *metrics;
} synth;

static void synth_free(synth *s) {
    double **p[] = {&s->eq,   &s->money, &s->dd,    &s->base, &s->trades, &s->imp,
                    &s->step, &s->vloss, &s->ploss, &s->ent,  &s->epR,    &s->metrics};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(*p[i]);
}

static double *alloc(int n) { return malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)); }

/* A random-walk agent with an edge, a baseline without, NaN/Inf sprinkled. */
static void synth_equity(synth *s, int n, st_rng *r) {
    s->eq = alloc(n), s->money = alloc(n), s->dd = alloc(n), s->base = alloc(n);
    double e = 0, b = 0, m = 1, peak = 0;
    for (int t = 0; t < n; t++) {
        double step = 0.02 + 0.3 * st_rng_normal(r);
        e += step;
        b += 0.005 + 0.35 * st_rng_normal(r);
        m *= 1 + 0.005 * step;
        peak = fmax(peak, e);
        s->eq[t] = e, s->base[t] = b, s->money[t] = m, s->dd[t] = peak - e;
    }
    if (n > 100) {
        s->eq[n / 3] = NAN;
        s->eq[n / 3 + 1] = INFINITY;
        s->money[n / 2] = -INFINITY;
        s->dd[n / 4] = NAN;
        s->base[10] = 1e308;
    }
}

static void synth_rest(synth *s, int n_trades, int n_updates, st_rng *r) {
    s->trades = alloc(n_trades);
    for (int i = 0; i < n_trades; i++)
        s->trades[i] = 0.1 + 1.2 * st_rng_normal(r);
    if (n_trades > 10) s->trades[3] = NAN, s->trades[4] = -INFINITY;
    s->imp = alloc(F);
    double z = 0;
    for (int i = 0; i < F; i++)
        z += s->imp[i] = exp(0.8 * st_rng_normal(r));
    for (int i = 0; i < F; i++)
        s->imp[i] /= z;
    s->imp[17] = NAN;
    s->step = alloc(n_updates), s->vloss = alloc(n_updates), s->ploss = alloc(n_updates);
    s->ent = alloc(n_updates), s->epR = alloc(n_updates);
    for (int i = 0; i < n_updates; i++) {
        double u = (double)i / (n_updates > 1 ? n_updates - 1 : 1);
        s->step[i] = 8192.0 * (i + 1);
        s->vloss[i] = 0.2 + 2.0 * exp(-4 * u) + 0.15 * st_rng_normal(r);
        s->ploss[i] = -0.01 + 0.02 * st_rng_normal(r);
        s->ent[i] = 1.0986 - 0.5 * u + 0.03 * st_rng_normal(r);
        s->epR[i] = -1 + 4 * u + 0.8 * st_rng_normal(r);
    }
    if (n_updates > 10) s->vloss[5] = NAN, s->epR[7] = INFINITY;
    s->metrics = alloc(N_METRICS * N_COLUMNS);
    for (int i = 0; i < N_METRICS * N_COLUMNS; i++)
        s->metrics[i] = 10 * st_rng_normal(r);
    s->metrics[1 * N_COLUMNS + 2] = NAN; /* flat has no trades: expectancy n/a */
    s->metrics[5 * N_COLUMNS + 5] = INFINITY;
}

static st_report make_report(synth *s, int n_bars, int n_trades, int n_updates, uint64_t seed) {
    memset(s, 0, sizeof *s);
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    synth_equity(s, n_bars, &r);
    synth_rest(s, n_trades, n_updates, &r);
    st_report rep = {.title = "ssmtrade evaluation: <script>alert(1)</script> run A&B, test split",
                     .subtitle = "checkpoint runs/a/ckpt_000400.safetensors | synthetic market, seed 7 | test split | "
                                 "2025-01-01 | rev 1b4d2e5",
                     .n_metrics = N_METRICS,
                     .n_columns = N_COLUMNS,
                     .metric_names = metric_names,
                     .column_names = columns,
                     .metric_values = s->metrics,
                     .metric_formats = metric_fmts,
                     .n_bars = n_bars,
                     .equity_R = s->eq,
                     .equity_money = s->money,
                     .drawdown_R = s->dd,
                     .baseline_equity_R = s->base,
                     .baseline_name = "buy-and-hold",
                     .n_trades = n_trades,
                     .trade_R = s->trades,
                     .n_features = F,
                     .feature_names = feature_names,
                     .importance = s->imp,
                     .n_updates = n_updates,
                     .update_step = s->step,
                     .value_loss = s->vloss,
                     .policy_loss = s->ploss,
                     .entropy = s->ent,
                     .mean_episode_R = s->epR};
    return rep;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* The i-th <svg ...>...</svg> of html as a new lower-cased string. */
static char *svg_block(const char *html, int i) {
    const char *p = html;
    for (int k = 0; k <= i && p; k++)
        p = strstr(k ? p + 1 : p, "<svg");
    if (!p) return NULL;
    const char *e = strstr(p, "</svg>");
    if (!e) return NULL;
    size_t n = (size_t)(e - p);
    char *b = malloc(n + 1);
    for (size_t k = 0; k < n; k++)
        b[k] = (char)tolower((unsigned char)p[k]);
    b[n] = '\0';
    return b;
}

/* Most drawing commands (M or L) in any one path's d="..." of html. */
static int max_path_points(const char *html) {
    int worst = 0;
    for (const char *p = html; (p = strstr(p, " d=\"")); p += 4) {
        int n = 0;
        for (const char *q = p + 4; *q && *q != '"'; q++)
            n += *q == 'M' || *q == 'L';
        if (n > worst) worst = n;
    }
    return worst;
}

/* Checks every report must pass; returns the file's text for more checks. */
static char *check_common(const char *path, const char *what) {
    char *html = slurp(path);
    CHECK(html != NULL, "%s: report not written", what);
    if (!html) return NULL;
    int n_svg = count(html, "<svg");
    CHECK(n_svg == ST_REPORT_N_CHARTS, "%s: %d <svg> elements, want %d", what, n_svg, ST_REPORT_N_CHARTS);
    int bad = 0;
    for (int i = 0; i < n_svg; i++) {
        char *b = svg_block(html, i);
        if (!b || strstr(b, "nan") || strstr(b, "inf")) bad++;
        free(b);
    }
    CHECK(bad == 0, "%s: %d SVG blocks contain nan/inf", what, bad);
    CHECK(count(html, "</svg>") == n_svg, "%s: unbalanced <svg>", what);
    CHECK(strstr(html, "</html>") != NULL, "%s: truncated page", what);
    /* Self-contained: nothing fetched from anywhere. */
    CHECK(!strstr(html, "<script") && !strstr(html, "<link") && !strstr(html, "src=") && !strstr(html, "href=") &&
              !strstr(html, "url(") && !strstr(html, "@import"),
          "%s: the page references something outside itself", what);
    return html;
}

static int tmp_files_left(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* Sum of the bar counts in the histogram's tooltips "[a, b): count". */
static int histogram_total(const char *html) {
    int total = 0;
    for (const char *p = html; (p = strstr(p, "): ")); p += 3) {
        const char *t = p + 3;
        if (strncmp(strchr(t, '<') ? strchr(t, '<') : "", "</title></rect>", 15) == 0) total += atoi(t);
    }
    return total;
}

static void test_full(const char *dir) {
    synth s;
    st_report r = make_report(&s, 3000, 300, 200, 11);
    char path[512];
    snprintf(path, sizeof path, "%s/full.html", dir);
    int rc = st_report_write_html(path, &r);
    CHECK(rc == 0, "full report: %s", st_last_error());
    char *html = check_common(path, "full");
    if (html) {
        CHECK(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt; run A&amp;B") != NULL, "title not escaped");
        CHECK(strstr(html, "hl_range&lt;&amp;&gt;") && !strstr(html, "hl_range<"), "feature name not escaped");
        CHECK(strstr(html, "n/a") != NULL, "a NaN metric must print n/a");
        CHECK(strstr(html, "%</td>") != NULL, "the %%.1f%%%% format lost its percent sign");
        CHECK(strstr(html, "buy-and-hold (final") != NULL, "the baseline is not in the equity legend");
        CHECK(strstr(html, "EMA 0.9") != NULL, "training curves are not smoothed");
        int finite = 0;
        for (int i = 0; i < r.n_trades; i++)
            finite += isfinite(s.trades[i]);
        int h = histogram_total(html);
        CHECK(h == finite, "histogram holds %d trades, want %d finite ones", h, finite);
        /* Sorted: the largest weight's label comes before the second's. */
        int a = -1, b = -1;
        for (int i = 0; i < F; i++) {
            if (!isfinite(s.imp[i])) continue;
            if (a < 0 || s.imp[i] > s.imp[a])
                b = a, a = i;
            else if (b < 0 || s.imp[i] > s.imp[b])
                b = i;
        }
        char la[64], lb[64];
        snprintf(la, sizeof la, ">%s</text>", feature_names[a]);
        snprintf(lb, sizeof lb, ">%s</text>", feature_names[b]);
        const char *pa = strstr(html, la), *pb = strstr(html, lb);
        CHECK(pa && pb && pa < pb, "importance bars not sorted: %s before %s", feature_names[a], feature_names[b]);
        printf("  full report: %zu bytes, %d charts, %d trades binned\n", strlen(html), count(html, "<svg"), h);
    }
    CHECK(tmp_files_left(dir) == 0, "a temporary file was left behind");
    /* Same inputs, same bytes: the report carries no hidden timestamp. */
    char path2[512];
    snprintf(path2, sizeof path2, "%s/full2.html", dir);
    CHECK(st_report_write_html(path2, &r) == 0, "second write: %s", st_last_error());
    char *html2 = slurp(path2);
    CHECK(html && html2 && strcmp(html, html2) == 0, "two writes of one report differ");
    const char *ex = getenv("ST_REPORT_EXAMPLE");
    if (ex && ex[0]) {
        CHECK(st_report_write_html(ex, &r) == 0, "example: %s", st_last_error());
        printf("  example report written to %s\n", ex);
    }
    free(html);
    free(html2);
    synth_free(&s);
}

static void test_long_series(const char *dir) {
    synth s;
    int n = 200000;
    st_report r = make_report(&s, n, 5000, 20000, 12);
    char path[512];
    snprintf(path, sizeof path, "%s/long.html", dir);
    CHECK(st_report_write_html(path, &r) == 0, "long report: %s", st_last_error());
    char *html = check_common(path, "long");
    if (html) {
        /* An area path adds one M and one closing L per unbroken run. */
        int worst = max_path_points(html);
        CHECK(worst <= ST_SVG_MAX_POINTS + 8, "a path has %d points over %d samples (budget %d)", worst, n,
              ST_SVG_MAX_POINTS);
        CHECK(worst >= ST_SVG_MAX_POINTS / 2, "only %d points drawn of %d samples", worst, n);
        printf("  long report: %d bars -> at most %d points per path, %zu bytes\n", n, worst, strlen(html));
    }
    free(html);
    synth_free(&s);
}

static void test_empty(const char *dir) {
    st_report r = {.title = "empty run"};
    char path[512];
    snprintf(path, sizeof path, "%s/empty.html", dir);
    CHECK(st_report_write_html(path, &r) == 0, "empty report: %s", st_last_error());
    char *html = check_common(path, "empty");
    if (html) {
        CHECK(strstr(html, "no trades") != NULL, "an empty report must say \"no trades\"");
        CHECK(strstr(html, "no metrics recorded") != NULL, "an empty table must say so");
    }
    free(html);
    /* Trades present but every one non-finite: still "no trades". */
    double bad[3] = {NAN, INFINITY, -INFINITY};
    r.n_trades = 3;
    r.trade_R = bad;
    CHECK(st_report_write_html(path, &r) == 0, "non-finite trades: %s", st_last_error());
    html = check_common(path, "non-finite trades");
    if (html) CHECK(strstr(html, "no trades") != NULL, "all-NaN trades must say \"no trades\"");
    free(html);
}

static void test_constant(const char *dir) {
    enum { N = 500 };
    static double eq[N], money[N], dd[N], one_trade[1] = {-1.0}, imp[1] = {1.0}, loss[N];
    for (int i = 0; i < N; i++)
        eq[i] = 2.5, money[i] = 1.0, dd[i] = 0.0, loss[i] = 0.0;
    const char *names[1] = {"ret_1"};
    st_report r = {.title = "constant",
                   .n_bars = N,
                   .equity_R = eq,
                   .equity_money = money,
                   .drawdown_R = dd,
                   .n_trades = 1,
                   .trade_R = one_trade,
                   .n_features = 1,
                   .feature_names = names,
                   .importance = imp,
                   .n_updates = N,
                   .value_loss = loss,
                   .policy_loss = loss,
                   .entropy = loss,
                   .mean_episode_R = loss};
    char path[512];
    snprintf(path, sizeof path, "%s/constant.html", dir);
    CHECK(st_report_write_html(path, &r) == 0, "constant report: %s", st_last_error());
    free(check_common(path, "constant"));
}

static void test_errors(const char *dir) {
    st_report r = {.title = "x"};
    char path[512];
    snprintf(path, sizeof path, "%s/missing/dir/r.html", dir);
    int rc = st_report_write_html(path, &r);
    CHECK(rc == ST_ERR_IO && strstr(st_last_error(), "missing"), "write into a missing dir: rc %d '%s'", rc,
          st_last_error());
    CHECK(access(path, F_OK) != 0, "a failed write left a file");
    r.n_bars = -1;
    CHECK(st_report_write_html(path, &r) == ST_ERR_INPUT, "a negative count must be refused");
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

int main(void) {
    char dir[] = "/tmp/st_html_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_full(dir);
    test_long_series(dir);
    test_empty(dir);
    test_constant(dir);
    test_errors(dir);
    remove_dir(dir);
    TEST_MAIN_END();
}
