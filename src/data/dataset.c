/* dataset.c: an st_market from CSV files or from the synthetic market.
 *
 * Both paths end in st_market_prepare: bars -> causal features and ATR
 * (features.h) -> splits (splits.h) -> normalisation fitted on the training
 * splits -> normalised, clipped float features that the environment reads. */
#define _POSIX_C_SOURCE 200809L
#include "data/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "data/csv.h"
#include "data/features.h"
#include "data/splits.h"
#include "data/synthetic.h"

st_data_opts st_data_opts_default(int K) {
    st_data_opts o = {K, 0.70, 0.15, 5.0f, 1};
    return o;
}

static int check_opts(const st_data_opts *o) {
    ST_REQUIRE(o, ST_ERR_INPUT, "no data options");
    ST_REQUIRE(o->K >= 1 && o->K <= 1 << 20, ST_ERR_INPUT, "window length K = %d must be at least 1", o->K);
    ST_REQUIRE(o->clip > 0 && isfinite(o->clip), ST_ERR_INPUT, "feature clip %g must be positive", (double)o->clip);
    return st_split_fracs_check(o->train_frac, o->val_frac);
}

int st_instrument_alloc(st_instrument *in, int n) {
    memset(in, 0, sizeof *in);
    ST_REQUIRE(n >= 0, ST_ERR_INTERNAL, "instrument of %d bars", n);
    size_t m = n > 0 ? (size_t)n : 1;
    in->ts = calloc(m, sizeof *in->ts);
    in->open = calloc(m, sizeof(double));
    in->high = calloc(m, sizeof(double));
    in->low = calloc(m, sizeof(double));
    in->close = calloc(m, sizeof(double));
    in->volume = calloc(m, sizeof(double));
    if (!in->ts || !in->open || !in->high || !in->low || !in->close || !in->volume) {
        st_instrument_free(in);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for %d bars", n);
    }
    return ST_OK;
}

void st_instrument_free(st_instrument *in) {
    free(in->ts);
    free(in->open);
    free(in->high);
    free(in->low);
    free(in->close);
    free(in->volume);
    free(in->atr);
    free(in->features);
    free(in->oracle);
    memset(in, 0, sizeof *in);
}

void st_market_free(st_market *m) {
    if (!m) return;
    for (int i = 0; i < m->n_inst && m->inst; i++)
        st_instrument_free(&m->inst[i]);
    free(m->inst);
    free(m->norm_mean);
    free(m->norm_std);
    memset(m, 0, sizeof *m);
}

/* ST_ERR_INPUT when `label` has too few bars for three splits with these options. */
static int check_rows(const char *label, int n, const st_data_opts *o) {
    int needed = st_split_rows_needed(ST_FEATURE_WARMUP, o->K, o->train_frac, o->val_frac);
    ST_REQUIRE(n >= needed, ST_ERR_INPUT,
               "%s: %d rows, too few: K = %d needs at least %d rows (%d of feature warm-up, K - 1 = %d more for "
               "the first window, 2 gaps of K bars between the splits, and %d for train / validation / test of at "
               "least %d bars each with train_frac %.2f, val_frac %.2f)",
               label, n, o->K, needed, ST_FEATURE_WARMUP, o->K - 1, needed - ST_FEATURE_WARMUP - 3 * o->K + 1,
               ST_MIN_SPLIT_BARS, o->train_frac, o->val_frac);
    return ST_OK;
}

/* Raw features and ATR of every instrument, in parallel over instruments
 * (each is independent, so the result does not depend on the threads). */
static int compute_features(st_market *m, int F) {
    int rc = ST_OK;
    for (int i = 0; i < m->n_inst; i++) {
        st_instrument *in = &m->inst[i];
        if (!in->atr) in->atr = malloc(sizeof(double) * (size_t)in->n);
        if (!in->features) in->features = malloc(sizeof(float) * (size_t)in->n * (size_t)F);
        if (!in->atr || !in->features) return ST_FAIL(ST_ERR_MEMORY, "out of memory for the features of %s", in->name);
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < m->n_inst; i++) {
        st_instrument *in = &m->inst[i];
        int r = st_features_compute(in->n, in->ts, in->open, in->high, in->low, in->close, in->volume, in->has_volume,
                                    in->features, F, in->atr);
        if (r != ST_OK) {
#pragma omp critical(st_data_rc)
            rc = r;
        }
        in->warmup = ST_FEATURE_WARMUP;
    }
    /* Messages are per thread: say it again on this one. */
    return rc == ST_OK ? ST_OK : ST_FAIL(rc, "the features could not be computed (out of memory)");
}

/* A guard against our own bugs: every raw feature and ATR must be finite. */
static int check_finite(const st_market *m, int F) {
    for (int i = 0; i < m->n_inst; i++) {
        const st_instrument *in = &m->inst[i];
        for (int t = 0; t < in->n; t++) {
            ST_REQUIRE(isfinite(in->atr[t]) && in->atr[t] > 0, ST_ERR_NUMERIC, "%s: bar %d: ATR %g", in->name, t,
                       in->atr[t]);
            for (int j = 0; j < F; j++)
                ST_REQUIRE(isfinite(in->features[(size_t)t * F + j]), ST_ERR_NUMERIC,
                           "%s: bar %d: feature %d (%s) is not finite", in->name, t, j, st_feature_name(j));
        }
    }
    return ST_OK;
}

int st_market_prepare(st_market *m, const st_data_opts *o) {
    ST_TRY(check_opts(o));
    ST_REQUIRE(m->n_inst >= 1 && m->inst, ST_ERR_INPUT, "a market without instruments");
    const int F = ST_SNAPSHOT_FEATURES;
    for (int i = 0; i < m->n_inst; i++) {
        st_instrument *in = &m->inst[i];
        ST_TRY(check_rows(in->name, in->n, o));
        st_splits_make(in->n, ST_FEATURE_WARMUP, o->K, o->train_frac, o->val_frac, in->split_begin, in->split_end);
    }
    ST_TRY(compute_features(m, F));
    ST_TRY(check_finite(m, F));
    if (!m->norm_mean) m->norm_mean = malloc(sizeof(float) * F);
    if (!m->norm_std) m->norm_std = malloc(sizeof(float) * F);
    ST_REQUIRE(m->norm_mean && m->norm_std, ST_ERR_MEMORY, "out of memory");
    st_norm_fit(m, F, F, m->norm_mean, m->norm_std);
    for (int i = 0; i < m->n_inst; i++)
        st_norm_apply(&m->inst[i], F, F, m->norm_mean, m->norm_std, o->clip);
    m->F = F;
    m->clip = o->clip;
    m->K = o->K;
    return ST_OK;
}

/* ---- CSV datasets ----------------------------------------------------- */

static int has_csv_suffix(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".csv") == 0;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The *.csv files of folder dir, sorted by name, as full paths. */
static int list_folder(const char *dir, char ***out, int *count) {
    DIR *d = opendir(dir);
    if (!d) return ST_FAIL(ST_ERR_IO, "cannot open the folder %s: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = ST_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!has_csv_suffix(e->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, sizeof *names * (size_t)cap);
            if (!grown) {
                rc = ST_FAIL(ST_ERR_MEMORY, "out of memory listing %s", dir);
                break;
            }
            names = grown;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = ST_FAIL(ST_ERR_MEMORY, "out of memory listing %s", dir);
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (rc == ST_OK && n == 0) rc = ST_FAIL(ST_ERR_INPUT, "no .csv files in the folder %s", dir);
    if (rc != ST_OK) {
        free_names(names, n);
        return rc;
    }
    qsort(names, (size_t)n, sizeof *names, compare_names);
    *out = names;
    *count = n;
    return ST_OK;
}

static int list_csvs(const char *path, char ***out, int *count) {
    struct stat sb;
    if (stat(path, &sb) != 0) return ST_FAIL(ST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return list_folder(path, out, count);
    char **names = malloc(sizeof *names);
    if (!names || !(names[0] = strdup(path))) {
        free(names);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory");
    }
    *out = names;
    *count = 1;
    return ST_OK;
}

/* Says once per load which files lack volume (DESIGN: "said once"). */
static void note_missing_volume(const st_market *m, char **files) {
    int missing = 0, first = -1;
    for (int i = 0; i < m->n_inst; i++)
        if (!m->inst[i].has_volume) {
            missing++;
            if (first < 0) first = i;
        }
    if (missing == 1)
        fprintf(stderr, "ssmtrade: note: %s has no volume column: its volume features are 0\n", files[first]);
    else if (missing > 1)
        fprintf(stderr,
                "ssmtrade: note: %d of %d files have no volume column (the first: %s): their volume "
                "features are 0\n",
                missing, m->n_inst, files[first]);
}

static int load_files(char **files, int count, const st_data_opts *o, st_market *m) {
    m->inst = calloc((size_t)count, sizeof *m->inst);
    ST_REQUIRE(m->inst, ST_ERR_MEMORY, "out of memory");
    m->n_inst = count;
    for (int i = 0; i < count; i++) {
        ST_TRY(st_csv_load(files[i], o->use_cache, &m->inst[i]));
        ST_TRY(check_rows(files[i], m->inst[i].n, o));
    }
    note_missing_volume(m, files);
    return st_market_prepare(m, o);
}

int st_market_load(const char *path, const st_data_opts *o, st_market *m) {
    memset(m, 0, sizeof *m);
    ST_TRY(check_opts(o));
    ST_REQUIRE(path && path[0], ST_ERR_INPUT, "no data path given");
    char **files = NULL;
    int count = 0;
    ST_TRY(list_csvs(path, &files, &count));
    int rc = load_files(files, count, o, m);
    free_names(files, count);
    if (rc != ST_OK) st_market_free(m);
    return rc;
}

/* ---- the synthetic market --------------------------------------------- */

int st_market_synthetic(uint64_t seed, int n_inst, int n_bars, const st_data_opts *o, st_market *m) {
    memset(m, 0, sizeof *m);
    ST_TRY(check_opts(o));
    ST_REQUIRE(n_inst >= 1 && n_inst <= 1 << 16, ST_ERR_INPUT, "synthetic market: %d instruments (1 to 65536)", n_inst);
    ST_TRY(check_rows("synthetic market", n_bars, o));
    m->inst = calloc((size_t)n_inst, sizeof *m->inst);
    ST_REQUIRE(m->inst, ST_ERR_MEMORY, "out of memory");
    m->n_inst = n_inst;
    m->synthetic = 1;
    m->seed = seed;
    int rc = ST_OK;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n_inst; i++) {
        int r = st_synthetic_instrument(seed, i, n_bars, &m->inst[i]);
        if (r != ST_OK) {
#pragma omp critical(st_data_rc)
            rc = r;
        }
    }
    if (rc != ST_OK) rc = ST_FAIL(rc, "synthetic market: out of memory for %d x %d bars", n_inst, n_bars);
    if (rc == ST_OK) rc = st_market_prepare(m, o);
    if (rc != ST_OK) st_market_free(m);
    return rc;
}
