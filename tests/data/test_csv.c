/* test_csv.c: the CSV loader, its error messages, the binary cache and the
 * two real data files (DESIGN section 3).
 *
 * Bad input: one small CSV per class of error (random valid bars from Philox
 * with one bad cell on a random line), each asserting ST_ERR_INPUT and a
 * message "FILE:LINE: column 'NAME'". Cache: the second load comes from the
 * cache, and an edit that keeps the size and the modification time (so only
 * the hash of the bytes can see it) is re-parsed. Fuzzer regressions
 * (fuzz/fuzz_csv.c): each crashing input, inline, with what it must give. */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <time.h>
#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/philox.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/features.h"
#include "data/splits.h"
#include "test.h"

static char tmpdir[64];

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Random valid bars: a log random walk, open/high/low around it, volume. */
typedef struct {
    int n;
    double o[512], h[512], l[512], c[512], v[512];
} bars;

static void random_bars(uint64_t seed, int n, bars *b) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    double lc = log(50.0);
    b->n = n;
    for (int t = 0; t < n; t++) {
        double lo = lc + 0.002 * st_rng_normal(&r);
        lc = lo + 0.01 * st_rng_normal(&r);
        b->o[t] = exp(lo);
        b->c[t] = exp(lc);
        b->h[t] = fmax(b->o[t], b->c[t]) * exp(0.005 * fabs(st_rng_normal(&r)));
        b->l[t] = fmin(b->o[t], b->c[t]) * exp(-0.005 * fabs(st_rng_normal(&r)));
        b->v[t] = floor(1e6 * exp(0.5 * st_rng_normal(&r)));
    }
}

/* Writes bars as CSV; on file line bad_line (the header is line 1) column
 * bad_col gets bad_text, or, when bad_text is NULL, the row stops before
 * bad_col. Returns the path. */
static const char *write_csv(const char *name, const bars *b, int bad_line, int bad_col, const char *bad_text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    fprintf(f, "timestamp,open,high,low,close,volume\n");
    for (int t = 0; t < b->n; t++) {
        char cell[6][64];
        int64_t ts = 946857600 + (int64_t)t * 86400; /* 2000-01-03 on */
        if (t + 2 == bad_line && bad_col == 0 && bad_text && strcmp(bad_text, "=prev") == 0) ts -= 86400;
        char when[40];
        st_format_time(ts, when, sizeof when);
        snprintf(cell[0], 64, "%.10s", when);
        snprintf(cell[1], 64, "%.10g", b->o[t]);
        snprintf(cell[2], 64, "%.10g", b->h[t]);
        snprintf(cell[3], 64, "%.10g", b->l[t]);
        snprintf(cell[4], 64, "%.10g", b->c[t]);
        snprintf(cell[5], 64, "%.10g", b->v[t]);
        int ncell = 6;
        if (t + 2 == bad_line) {
            if (!bad_text)
                ncell = bad_col;
            else if (strcmp(bad_text, "=prev") != 0)
                snprintf(cell[bad_col], 64, "%s", bad_text);
        }
        for (int k = 0; k < ncell; k++)
            fprintf(f, "%s%s", k ? "," : "", cell[k]);
        fputc('\n', f);
    }
    fclose(f);
    return path;
}

static st_data_opts opts(int K) {
    st_data_opts o = st_data_opts_default(K);
    return o;
}

/* Expects ST_ERR_INPUT and "NAME:LINE: column 'COL'" in the message. */
static void expect_cell_error(const char *what, const char *name, int line, const char *col, const bars *b, int bad_col,
                              const char *bad_text) {
    const char *path = write_csv(name, b, line, bad_col, bad_text);
    st_market m;
    st_data_opts o = opts(16);
    o.use_cache = 0;
    int rc = st_market_load(path, &o, &m);
    char want[160];
    snprintf(want, sizeof want, "%s:%d: column '%s'", name, line, col);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), want), "%s: rc %d, message '%s' lacks '%s'", what, rc,
          st_last_error(), want);
    printf("  %-22s %s\n", what, strstr(st_last_error(), name) ? strstr(st_last_error(), name) : st_last_error());
    if (rc == ST_OK) st_market_free(&m);
}

static void test_bad_inputs(void) {
    bars *b = malloc(sizeof *b);
    random_bars(11, 400, b);
    st_rng r = st_rng_make(12, ST_STREAM_TEST);
    /* Lines 3..401: a random data row (not the first, so "previous" exists). */
#define LINE() (3 + (int)st_rng_below(&r, 399))
    int L;
    L = LINE();
    expect_cell_error("unparsable number", "bad_number.csv", L, "high", b, 2, "12.3.4");
    L = LINE();
    expect_cell_error("empty field", "bad_empty.csv", L, "close", b, 4, "");
    L = LINE();
    expect_cell_error("missing field", "bad_missing.csv", L, "volume", b, 5, NULL);
    L = LINE();
    expect_cell_error("NaN", "bad_nan.csv", L, "low", b, 3, "nan");
    L = LINE();
    expect_cell_error("Inf", "bad_inf.csv", L, "open", b, 1, "inf");
    L = LINE();
    expect_cell_error("overflow to Inf", "bad_huge.csv", L, "volume", b, 5, "1e999");
    L = LINE();
    expect_cell_error("repeated timestamp", "bad_repeat.csv", L, "timestamp", b, 0, "=prev");
    L = LINE();
    expect_cell_error("decreasing timestamp", "bad_decrease.csv", L, "timestamp", b, 0, "1999-12-31");
    L = LINE();
    expect_cell_error("unparsable date", "bad_date.csv", L, "timestamp", b, 0, "2001-02-30");
    L = LINE();
    char txt[64];
    snprintf(txt, sizeof txt, "%.10g", fmax(b->o[L - 2], b->c[L - 2]) * 0.99);
    expect_cell_error("high < max(open,close)", "bad_high.csv", L, "high", b, 2, txt);
    L = LINE();
    snprintf(txt, sizeof txt, "%.10g", fmin(b->o[L - 2], b->c[L - 2]) * 1.01);
    expect_cell_error("low > min(open,close)", "bad_low.csv", L, "low", b, 3, txt);
    L = LINE();
    expect_cell_error("negative price", "bad_negative.csv", L, "close", b, 4, "-3.5");
    L = LINE();
    expect_cell_error("zero price", "bad_zero.csv", L, "open", b, 1, "0");
    L = LINE();
    expect_cell_error("negative volume", "bad_volume.csv", L, "volume", b, 5, "-100");
#undef LINE

    /* A header without close: line 1, column 'close'. */
    char path[256];
    snprintf(path, sizeof path, "%s/bad_header.csv", tmpdir);
    FILE *f = fopen(path, "w");
    fprintf(f, "date,open,price\n2000-01-03,1,2\n");
    fclose(f);
    st_market m;
    st_data_opts o = opts(16);
    o.use_cache = 0;
    int rc = st_market_load(path, &o, &m);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "bad_header.csv:1: column 'close'"), "no close: %d %s", rc,
          st_last_error());

    /* Too few rows: 300 rows are enough for K = 16 but not for K = 64, and
     * the message says how many are needed. */
    bars *small = malloc(sizeof *small);
    random_bars(13, 300, small);
    const char *p = write_csv("short.csv", small, -1, 0, "");
    rc = st_market_load(p, &o, &m);
    CHECK(rc == ST_OK, "300 rows with K = 16: %s", st_last_error());
    if (rc == ST_OK) st_market_free(&m);
    o.K = 64;
    int needed = st_split_rows_needed(ST_FEATURE_WARMUP, 64, o.train_frac, o.val_frac);
    char want[96];
    snprintf(want, sizeof want, "300 rows, too few: K = 64 needs at least %d rows", needed);
    rc = st_market_load(p, &o, &m);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), want) && strstr(st_last_error(), "short.csv"),
          "too few rows: %d '%s'", rc, st_last_error());
    if (rc == ST_OK) st_market_free(&m);
    free(small);
    free(b);
}

static void test_times(void) {
    struct {
        const char *s;
        int64_t ts;
    } good[] = {{"2000-09-27", 970012800},
                {"2000-09-27T14:30:00", 970065000},
                {"2000-09-27 14:30:00Z", 970065000},
                {"2000-09-27T14:30", 970065000},
                {"2000-09-27T14:30:00.250Z", 970065000},
                {"2000-09-27T16:30:00+02:00", 970065000},
                {"970065000", 970065000},
                {"1969-12-31", -86400},
                {"2000-02-29", 951782400},
                {"1900-03-01", -2203891200LL}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ts = 0;
        int rc = st_parse_time(good[i].s, strlen(good[i].s), &ts);
        CHECK(rc == 0 && ts == good[i].ts, "time '%s': rc %d, %lld != %lld", good[i].s, rc, (long long)ts,
              (long long)good[i].ts);
    }
    const char *bad[] = {"2000-13-01", "1999-02-29",  "2000-09-27T24:00",     "2000-9-27", "abc", "",
                         "12.5",       "2000-09-27X", "2000-09-27T14:30:00+2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ts;
        CHECK(st_parse_time(bad[i], strlen(bad[i]), &ts) != 0, "'%s' parsed as a time", bad[i]);
    }
    /* Round trip of random times through the writer's format. */
    st_rng r = st_rng_make(21, ST_STREAM_TEST);
    int bad_trips = 0;
    for (int i = 0; i < 20000; i++) {
        int64_t ts = -2000000000LL + (int64_t)(st_rng_uniform(&r) * 6e9), back = 0;
        char s[40];
        st_format_time(ts, s, sizeof s);
        if (st_parse_time(s, strlen(s), &back) != 0 || back != ts) bad_trips++;
    }
    CHECK(bad_trips == 0, "%d of 20000 random times do not survive format -> parse", bad_trips);
}

/* Close-only files derive open/high/low; columns may come in any order. */
static void test_derived_columns(void) {
    bars *b = malloc(sizeof *b);
    random_bars(31, 300, b);
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s/close_only.csv", tmpdir);
    snprintf(p2, sizeof p2, "%s/shuffled.csv", tmpdir);
    FILE *f1 = fopen(p1, "w"), *f2 = fopen(p2, "w");
    fprintf(f1, "Date,Close\n");
    fprintf(f2, "close,Volume,adj_close,time,LOW,high,open\n");
    for (int t = 0; t < b->n; t++) {
        char when[40];
        st_format_time(946857600 + (int64_t)t * 86400, when, sizeof when);
        fprintf(f1, "%.10s,%.10g\r\n", when, b->c[t]);
        fprintf(f2, "%.10g,%.10g,1,\"%s\",%.10g,%.10g,%.10g\n", b->c[t], b->v[t], when, b->l[t], b->h[t], b->o[t]);
    }
    fprintf(f1, "\n\n");
    fclose(f1);
    fclose(f2);
    st_instrument a, s;
    int rc1 = st_csv_load(p1, 0, &a), rc2 = st_csv_load(p2, 0, &s);
    CHECK(rc1 == ST_OK && rc2 == ST_OK, "loads: %d %d %s", rc1, rc2, st_last_error());
    if (rc1 != ST_OK || rc2 != ST_OK) return;
    int bad_derive = 0, bad_order = 0;
    for (int t = 0; t < b->n; t++) {
        double want_open = t > 0 ? a.close[t - 1] : a.close[0];
        if (a.open[t] != want_open || a.high[t] != fmax(want_open, a.close[t]) ||
            a.low[t] != fmin(want_open, a.close[t]) || a.volume[t] != 0)
            bad_derive++;
        /* The same text parses to the same double, so equality is exact. */
        if (s.close[t] != a.close[t] || s.ts[t] != a.ts[t] || fabs(s.open[t] / b->o[t] - 1) > 5e-10 ||
            fabs(s.high[t] / b->h[t] - 1) > 5e-10 || fabs(s.low[t] / b->l[t] - 1) > 5e-10 || s.volume[t] != b->v[t])
            bad_order++;
    }
    CHECK(a.n == 300 && !a.has_volume && strcmp(a.name, "close_only") == 0, "close-only: n %d vol %d name %s", a.n,
          a.has_volume, a.name);
    CHECK(bad_derive == 0, "%d bars with wrongly derived open/high/low/volume", bad_derive);
    CHECK(s.n == 300 && s.has_volume && bad_order == 0, "shuffled columns: n %d, %d bars differ", s.n, bad_order);
    st_instrument_free(&a);
    st_instrument_free(&s);
    free(b);
}

static const char *real_file(const char *name) {
    static char path[2][256];
    static int k;
    k ^= 1;
    snprintf(path[k], sizeof path[k], "../shared/data/%s", name);
    if (access(path[k], R_OK) != 0) snprintf(path[k], sizeof path[k], "/work/shared/data/%s", name);
    return path[k];
}

static void check_splits(const st_instrument *in, int K, const char *what) {
    int ok = in->split_begin[0] >= in->warmup + K - 1 && in->split_end[2] == in->n;
    for (int s = 0; s < ST_SPLITS; s++)
        ok = ok && in->split_end[s] - in->split_begin[s] >= ST_MIN_SPLIT_BARS;
    for (int s = 0; s + 1 < ST_SPLITS; s++)
        ok = ok && in->split_begin[s + 1] == in->split_end[s] + K;
    CHECK(ok, "%s splits: [%d,%d) [%d,%d) [%d,%d) of %d, warmup %d, K %d", what, in->split_begin[0], in->split_end[0],
          in->split_begin[1], in->split_end[1], in->split_begin[2], in->split_end[2], in->n, in->warmup, K);
}

static void test_real_files(void) {
    st_market m;
    st_data_opts o = opts(64);
    int rc = st_market_load(real_file("djia_daily_1980_2012.csv"), &o, &m);
    CHECK(rc == ST_OK, "djia: %s", st_last_error());
    if (rc == ST_OK) {
        const st_instrument *in = &m.inst[0];
        int bad = 0;
        for (int t = in->warmup; t < in->n; t++)
            for (int j = 0; j < m.F; j++)
                bad += !isfinite(in->features[(size_t)t * m.F + j]);
        for (int t = 0; t < in->n; t++)
            bad += !(in->atr[t] > 0 && isfinite(in->atr[t]));
        CHECK(m.n_inst == 1 && in->n == 8610 && in->has_volume == 0 && m.F == 40, "djia: %d inst, %d rows, volume %d",
              m.n_inst, in->n, in->has_volume);
        CHECK(bad == 0, "djia: %d non-finite features or ATR", bad);
        check_splits(in, 64, "djia");
        printf("  djia: %d bars, warmup %d, splits [%d,%d) [%d,%d) [%d,%d)\n", in->n, in->warmup, in->split_begin[0],
               in->split_end[0], in->split_begin[1], in->split_end[1], in->split_begin[2], in->split_end[2]);
        st_market_free(&m);
    }
    /* msft, 249 rows: K = 64 cannot make three splits, K = 16 can. */
    int needed = st_split_rows_needed(ST_FEATURE_WARMUP, 64, o.train_frac, o.val_frac);
    rc = st_market_load(real_file("msft_daily_ohlcv.csv"), &o, &m);
    char want[96];
    snprintf(want, sizeof want, "249 rows, too few: K = 64 needs at least %d rows", needed);
    CHECK(rc == ST_ERR_INPUT && needed == 362 && strstr(st_last_error(), want), "msft K=64: rc %d '%s'", rc,
          st_last_error());
    printf("  msft K=64: %s\n", strstr(st_last_error(), "msft") ? strstr(st_last_error(), "msft") : "?");
    o = opts(16);
    rc = st_market_load(real_file("msft_daily_ohlcv.csv"), &o, &m);
    CHECK(rc == ST_OK && m.inst[0].n == 249 && m.inst[0].has_volume == 1, "msft K=16: %s", st_last_error());
    if (rc == ST_OK) {
        check_splits(&m.inst[0], 16, "msft");
        st_market_free(&m);
    }
}

static int count_files(const char *dir) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static int same_bars(const st_instrument *a, const st_instrument *b) {
    if (a->n != b->n || a->has_volume != b->has_volume) return 0;
    size_t n = (size_t)a->n;
    return !memcmp(a->ts, b->ts, n * 8) && !memcmp(a->open, b->open, n * 8) && !memcmp(a->high, b->high, n * 8) &&
           !memcmp(a->low, b->low, n * 8) && !memcmp(a->close, b->close, n * 8) && !memcmp(a->volume, b->volume, n * 8);
}

static void test_cache(void) {
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    setenv("SSMTRADE_CACHE", cache, 1);
    bars *b = malloc(sizeof *b);
    random_bars(41, 400, b);
    const char *path = write_csv("cached.csv", b, -1, 0, "");
    st_instrument first, second, third;
    int rc = st_csv_load(path, 1, &first);
    CHECK(rc == ST_OK && first.from_cache == 0, "first load: rc %d from_cache %d", rc, first.from_cache);
    rc = st_csv_load(path, 1, &second);
    CHECK(rc == ST_OK && second.from_cache == 1, "second load: rc %d from_cache %d", rc, second.from_cache);
    CHECK(same_bars(&first, &second) && strcmp(second.name, "cached") == 0, "cached bars differ from parsed ones");

    /* Edit one digit of a close, keep the size and restore the mtime: only the
     * hash of the bytes can tell, and it must. */
    struct stat sb;
    stat(path, &sb);
    FILE *f = fopen(path, "r+");
    char *text = malloc((size_t)sb.st_size + 1);
    size_t got = fread(text, 1, (size_t)sb.st_size, f);
    char *row = strstr(text, "\n2000-06-01");
    char *close = row;
    for (int k = 0; k < 5 && close; k++)
        close = strchr(close + 1, ',');
    int pos = close ? (int)(close - text) - 1 : -1; /* last digit of the close */
    CHECK(got == (size_t)sb.st_size && pos > 0 && text[pos] >= '0' && text[pos] <= '9', "setup of the edit");
    if (pos > 0) {
        text[pos] = text[pos] == '1' ? '2' : '1';
        fseek(f, 0, SEEK_SET);
        fwrite(text, 1, got, f);
    }
    fclose(f);
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    utimensat(AT_FDCWD, path, times, 0);
    struct stat sb2;
    stat(path, &sb2);
    CHECK(sb2.st_size == sb.st_size && sb2.st_mtim.tv_sec == sb.st_mtim.tv_sec &&
              sb2.st_mtim.tv_nsec == sb.st_mtim.tv_nsec,
          "setup: size and mtime restored");
    rc = st_csv_load(path, 1, &third);
    int changed = 0;
    for (int t = 0; rc == ST_OK && t < third.n; t++)
        changed += third.close[t] != first.close[t];
    CHECK(rc == ST_OK && third.from_cache == 0 && changed == 1, "edited CSV: from_cache %d, %d closes changed",
          third.from_cache, changed);
    st_instrument_free(&third);
    rc = st_csv_load(path, 1, &third);
    CHECK(rc == ST_OK && third.from_cache == 1, "edited CSV, second load: from_cache %d", third.from_cache);
    st_instrument_free(&first);
    st_instrument_free(&second);
    st_instrument_free(&third);
    free(text);

    /* The real files' folder is read-only: the cache goes to the cache folder
     * (a fresh one, so that the first load misses) and nothing is written
     * beside the CSVs. */
    char fresh[140];
    snprintf(fresh, sizeof fresh, "%s/cache_real", tmpdir);
    setenv("SSMTRADE_CACHE", fresh, 1);
    const char *djia = real_file("djia_daily_1980_2012.csv");
    char folder[256];
    snprintf(folder, sizeof folder, "%s", djia);
    *strrchr(folder, '/') = '\0';
    int before = count_files(folder);
    st_market m;
    st_data_opts o = opts(64);
    rc = st_market_load(djia, &o, &m);
    int from1 = rc == ST_OK ? m.inst[0].from_cache : -1;
    if (rc == ST_OK) st_market_free(&m);
    rc = st_market_load(djia, &o, &m);
    int from2 = rc == ST_OK ? m.inst[0].from_cache : -1;
    if (rc == ST_OK) st_market_free(&m);
    CHECK(from1 == 0 && from2 == 1, "djia through the cache: from_cache %d then %d", from1, from2);
    CHECK(count_files(folder) == before && before > 0, "files beside the CSVs: %d -> %d", before, count_files(folder));

    /* A cache folder that cannot exist (below a regular file): no cache, no error. */
    char impossible[200];
    snprintf(impossible, sizeof impossible, "%s/sub", path);
    setenv("SSMTRADE_CACHE", impossible, 1);
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        rc = st_csv_load(path, 1, &first);
        ok = ok && rc == ST_OK && first.from_cache == 0;
        if (rc == ST_OK) st_instrument_free(&first);
    }
    CHECK(ok, "unwritable cache folder: loads must work without the cache");
    setenv("SSMTRADE_CACHE", cache, 1);
    free(b);
}

/* A folder of CSVs loads sorted by name, one instrument each. */
static void test_folder(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/folder", tmpdir);
    mkdir(dir, 0755);
    bars *b = malloc(sizeof *b);
    const char *names[3] = {"b.csv", "a.CSV", "c.csv"};
    for (int i = 0; i < 3; i++) {
        random_bars(51 + i, 300, b);
        char sub[200];
        snprintf(sub, sizeof sub, "folder/%s", names[i]);
        write_csv(sub, b, -1, 0, "");
    }
    char other[160];
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    FILE *f = fopen(other, "w");
    fputs("not data\n", f);
    fclose(f);
    st_market m;
    st_data_opts o = opts(16);
    int rc = st_market_load(dir, &o, &m);
    CHECK(rc == ST_OK && m.n_inst == 3, "folder: rc %d %s", rc, st_last_error());
    if (rc == ST_OK) {
        CHECK(!strcmp(m.inst[0].name, "a") && !strcmp(m.inst[1].name, "b") && !strcmp(m.inst[2].name, "c"),
              "folder order: %s %s %s", m.inst[0].name, m.inst[1].name, m.inst[2].name);
        st_market_free(&m);
    }
    char empty[160];
    snprintf(empty, sizeof empty, "%s/empty", tmpdir);
    mkdir(empty, 0755);
    rc = st_market_load(empty, &o, &m);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "no .csv files"), "empty folder: %d %s", rc, st_last_error());
    rc = st_market_load("/nonexistent/data.csv", &o, &m);
    CHECK(rc == ST_ERR_IO, "missing file: %d %s", rc, st_last_error());
    free(b);
}

/* Inputs that made fuzz/fuzz_csv.c fail, kept as bytes. */
static void test_fuzz_regressions(void) {
    /* Timeout (a hang): 18-digit unix seconds are legal times, and
     * st_format_time walked from 1970 one year at a time to name them, which
     * took minutes for the "not after the previous row's" message. The
     * fuzzer's input was the first line alone; the same time in a file: */
    static const char hang[] = "timestamp,close\n100000000000000000,1\n1,2\n";
    clock_t t0 = clock();
    st_instrument in;
    memset(&in, 0, sizeof in);
    int rc = st_csv_parse("fuzz.csv", hang, strlen(hang), &in);
    CHECK(rc == ST_ERR_INPUT &&
              strstr(st_last_error(),
                     "fuzz.csv:3: column 'timestamp': '1' is not after the previous row's 3168875820-09-06T09:46:40Z"),
          "18-digit time: rc %d '%s'", rc, st_last_error());
    /* Both ends of int64 and of what the parser reads, against Python's
     * datetime on the same instant shifted by whole 400-year cycles. */
    struct {
        int64_t ts;
        const char *s;
    } far[] = {{100000000000000000LL, "3168875820-09-06T09:46:40Z"},
               {999999999999999999LL, "31688740476-10-23T01:46:39Z"},
               {-999999999999999999LL, "-31688736537-03-10T22:13:21Z"},
               {INT64_MIN, "-292277022657-01-27T08:29:52Z"},
               {INT64_MAX, "292277026596-12-04T15:30:07Z"},
               {-1, "1969-12-31T23:59:59Z"},
               {-62135596800LL, "0001-01-01T00:00:00Z"},
               {253402300799LL, "9999-12-31T23:59:59Z"}};
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
        char s[64];
        st_format_time(far[i].ts, s, sizeof s);
        CHECK(strcmp(s, far[i].s) == 0, "st_format_time(%lld) = '%s', expected '%s'", (long long)far[i].ts, s,
              far[i].s);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(secs < 1.0, "formatting far times took %.1f s (must be constant time)", secs);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/st_test_csv_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    setenv("SSMTRADE_CACHE", cache, 1);
    test_times();
    test_fuzz_regressions();
    test_bad_inputs();
    test_derived_columns();
    test_real_files();
    test_cache();
    test_folder();
    nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    TEST_MAIN_END();
}
