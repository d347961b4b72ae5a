/* test_features.c: the causal feature engine (data/features.h).
 *
 * - Causality: for several bars t of a synthetic instrument and of both real
 *   files, every bar after t is changed (prices and volume, by large random
 *   factors) and the 40 raw features and ATR at bars <= t must stay
 *   bit-identical (and a bar after t must change, or the test proves nothing).
 *   Normalisation is a fixed affine map fitted on the training split
 *   (test_synthetic checks that), so causality of the raw features is what
 *   makes the normalised ones causal.
 * - Formulas: a dozen features and ATR recomputed naively at random bars.
 * - Constant prices and zero volume: finite features, ATR > 0.
 * - Row stride: a padded output equals the contiguous one and keeps its gap. */
#include <stdint.h>

#include "core/error.h"
#include "core/philox.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/features.h"
#include "data/synthetic.h"
#include "test.h"

enum { F = ST_SNAPSHOT_FEATURES };

typedef struct {
    float *feat;
    double *atr;
} feats;

static feats compute(const st_instrument *in) {
    feats f = {malloc(sizeof(float) * F * (size_t)in->n), malloc(sizeof(double) * (size_t)in->n)};
    st_features_compute(in->n, in->ts, in->open, in->high, in->low, in->close, in->volume, in->has_volume, f.feat, F,
                        f.atr);
    return f;
}

static void feats_free(feats *f) {
    free(f->feat);
    free(f->atr);
}

static void copy_bars(const st_instrument *src, st_instrument *dst) {
    st_instrument_alloc(dst, src->n);
    size_t n = (size_t)src->n * sizeof(double);
    memcpy(dst->ts, src->ts, (size_t)src->n * sizeof(int64_t));
    memcpy(dst->open, src->open, n);
    memcpy(dst->high, src->high, n);
    memcpy(dst->low, src->low, n);
    memcpy(dst->close, src->close, n);
    memcpy(dst->volume, src->volume, n);
    dst->n = src->n;
    dst->has_volume = src->has_volume;
}

/* Changes every bar after t by large random factors, keeping bars valid. */
static void perturb_after(st_instrument *in, int t, st_rng *r) {
    for (int s = t + 1; s < in->n; s++) {
        double o = in->open[s] * exp(0.3 * st_rng_normal(r)), c = in->close[s] * exp(0.3 * st_rng_normal(r));
        in->open[s] = o;
        in->close[s] = c;
        in->high[s] = fmax(o, c) * exp(0.1 * fabs(st_rng_normal(r)));
        in->low[s] = fmin(o, c) * exp(-0.1 * fabs(st_rng_normal(r)));
        in->volume[s] = floor(in->volume[s] * exp(st_rng_normal(r)) + 1000 * st_rng_uniform(r));
    }
}

static void check_causal(const char *what, const st_instrument *in, st_rng *r) {
    feats base = compute(in);
    int ts_list[] = {0, 1, 13, 40, 63, 64, 65, 100, in->n / 2, in->n - 2};
    int bad = 0, unchanged_after = 0, tried = 0;
    for (size_t k = 0; k < sizeof ts_list / sizeof ts_list[0]; k++) {
        int t = ts_list[k];
        if (t < 0 || t >= in->n - 1) continue;
        st_instrument alt;
        copy_bars(in, &alt);
        perturb_after(&alt, t, r);
        feats f = compute(&alt);
        size_t rows = (size_t)t + 1;
        if (memcmp(f.feat, base.feat, rows * F * sizeof(float)) || memcmp(f.atr, base.atr, rows * sizeof(double))) {
            bad++;
            fprintf(stderr, "  %s: features at bars <= %d changed when bars > %d did\n", what, t, t);
        }
        /* The next bar must see the change, or nothing was tested. */
        if (!memcmp(f.feat + rows * F, base.feat + rows * F, F * sizeof(float)) && f.atr[t + 1] == base.atr[t + 1])
            unchanged_after++;
        tried++;
        feats_free(&f);
        st_instrument_free(&alt);
    }
    CHECK(bad == 0 && tried >= 8, "%s: %d of %d cut points leak the future", what, bad, tried);
    CHECK(unchanged_after == 0, "%s: %d cut points where bar t+1 did not change", what, unchanged_after);
    printf("  causality %-22s %d bars, %d cut points, bit-identical before each\n", what, in->n, tried);
    feats_free(&base);
}

static const char *real_file(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "../shared/data/%s", name);
    FILE *f = fopen(path, "r");
    if (f)
        fclose(f);
    else
        snprintf(path, sizeof path, "/work/shared/data/%s", name);
    return path;
}

static void test_causality(void) {
    st_rng r = st_rng_make(101, ST_STREAM_TEST);
    for (int i = 0; i < 2; i++) {
        st_instrument in;
        st_synthetic_instrument(st_rng_next4(&r).v[0], i, 700, &in);
        check_causal(i == 0 ? "synthetic syn0" : "synthetic syn1", &in, &r);
        st_instrument_free(&in);
    }
    const char *files[2] = {"msft_daily_ohlcv.csv", "djia_daily_1980_2012.csv"};
    for (int i = 0; i < 2; i++) {
        st_instrument in;
        int rc = st_csv_load(real_file(files[i]), 0, &in);
        CHECK(rc == ST_OK, "%s: %s", files[i], st_last_error());
        if (rc != ST_OK) continue;
        check_causal(files[i], &in, &r);
        st_instrument_free(&in);
    }
}

/* Random bars with hourly timestamps and occasional gaps of hours or days. */
static void random_instrument(uint64_t seed, int n, st_instrument *in) {
    st_instrument_alloc(in, n);
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    double lc = log(80.0);
    int64_t ts = 1577836800;
    for (int t = 0; t < n; t++) {
        ts += 3600 * (1 + (st_rng_uniform(&r) < 0.1 ? (int)st_rng_below(&r, 60) : 0));
        double lo = lc + 0.003 * st_rng_normal(&r);
        lc = lo + 0.01 * st_rng_normal(&r);
        in->ts[t] = ts;
        in->open[t] = exp(lo);
        in->close[t] = exp(lc);
        in->high[t] = fmax(in->open[t], in->close[t]) * exp(0.004 * fabs(st_rng_normal(&r)));
        in->low[t] = fmin(in->open[t], in->close[t]) * exp(-0.004 * fabs(st_rng_normal(&r)));
        in->volume[t] = floor(5e5 * exp(0.6 * st_rng_normal(&r)));
    }
    in->n = n;
    in->has_volume = 1;
}

static double naive_mean(const double *x, int t, int w) {
    double s = 0;
    for (int i = t - w + 1; i <= t; i++)
        s += x[i];
    return s / w;
}

/* Reference values of some features at bar t >= 64, written from the table
 * in features.h without the engine's code. */
static void reference(const st_instrument *in, int t, double *atr_out, double ref[F], int have[F]) {
    const double *c = in->close, *h = in->high, *l = in->low, *o = in->open;
    int n = t + 1;
    double *tr = malloc(sizeof(double) * n), *r = malloc(sizeof(double) * n), *lv = malloc(sizeof(double) * n);
    double atr = 0, G = 0, L = 0, e12 = c[0], e26 = c[0], sig = 0;
    for (int i = 0; i < n; i++) {
        tr[i] = i == 0 ? h[0] - l[0] : fmax(h[i] - l[i], fmax(fabs(h[i] - c[i - 1]), fabs(l[i] - c[i - 1])));
        r[i] = i == 0 ? 0 : log(c[i] / c[i - 1]);
        lv[i] = log(1 + in->volume[i]);
        if (i < 14)
            atr = (atr * i + tr[i]) / (i + 1); /* plain mean of the first bars */
        else
            atr = (13 * atr + tr[i]) / 14; /* Wilder */
        if (i >= 1) {
            double g = fmax(c[i] - c[i - 1], 0), d = fmax(c[i - 1] - c[i], 0);
            if (i <= 14)
                G = (G * (i - 1) + g) / i, L = (L * (i - 1) + d) / i;
            else
                G = (13 * G + g) / 14, L = (13 * L + d) / 14;
            e12 = e12 + 2.0 / 13 * (c[i] - e12);
            e26 = e26 + 2.0 / 27 * (c[i] - e26);
            sig = sig + 0.2 * (e12 - e26 - sig);
        }
    }
    double A = fmax(atr, 1e-4 * c[t]);
    *atr_out = A;
    memset(have, 0, sizeof(int) * F);
#define SET(j, v) (ref[j] = (v), have[j] = 1)
    SET(3, log(c[t] / c[t - 8]));
    SET(6, log(c[t] / c[t - 64]));
    double ms = 0;
    for (int i = t - 19; i <= t; i++)
        ms += r[i] * r[i];
    SET(9, sqrt(ms / 20));
    SET(13, (h[t] - l[t]) / A);
    SET(15, (h[t] - fmax(o[t], c[t])) / A);
    SET(17, (o[t] - c[t - 1]) / A);
    double m = naive_mean(lv, t, 20), v = 0;
    for (int i = t - 19; i <= t; i++)
        v += (lv[i] - m) * (lv[i] - m);
    SET(19, (lv[t] - m) / fmax(sqrt(v / 20), 0.01));
    SET(24, (c[t] - naive_mean(c, t, 32)) / A);
    double hi = -1e300, lo = 1e300;
    for (int i = t - 63; i <= t; i++)
        hi = fmax(hi, h[i]);
    for (int i = t - 19; i <= t; i++)
        lo = fmin(lo, l[i]);
    SET(28, (c[t] - hi) / A);
    SET(27, (c[t] - lo) / A);
    SET(30, (G - L) / (G + L));
    SET(31, (e12 - e26) / A);
    SET(33, (e12 - e26 - sig) / A);
    double mr = naive_mean(r, t, 20), m2 = 0, m3 = 0;
    for (int i = t - 19; i <= t; i++)
        m2 += pow(r[i] - mr, 2) / 20, m3 += pow(r[i] - mr, 3) / 20;
    SET(34, m3 / pow(m2, 1.5));
#undef SET
    free(tr);
    free(r);
    free(lv);
}

static void test_formulas(void) {
    st_instrument in;
    random_instrument(201, 900, &in);
    feats f = compute(&in);
    st_rng r = st_rng_make(202, ST_STREAM_TEST);
    double worst = 0;
    int worst_j = -1, atr_bad = 0;
    for (int k = 0; k < 40; k++) {
        int t = 64 + (int)st_rng_below(&r, (uint32_t)(in.n - 64));
        double ref[F], A;
        int have[F];
        reference(&in, t, &A, ref, have);
        if (fabs(f.atr[t] / A - 1) > 1e-12) atr_bad++;
        for (int j = 0; j < F; j++) {
            if (!have[j]) continue;
            /* Stored as float: 6e-8 relative rounding; 1e-6 leaves room for
             * the engine's different (double) summation order. */
            double err = fabs(f.feat[(size_t)t * F + j] - ref[j]) / fmax(1.0, fabs(ref[j]));
            if (err > worst) worst = err, worst_j = j;
        }
    }
    CHECK(atr_bad == 0, "%d bars where ATR differs from the Wilder reference", atr_bad);
    CHECK(worst < 1e-6, "feature %d (%s) differs from its reference by %.3e", worst_j, st_feature_name(worst_j), worst);
    printf("  formulas: 13 features and ATR at 40 random bars, worst rel err %.2e\n", worst);

    /* Time features: 2000-09-27T14:30:00Z is a Wednesday (day 2 from Monday). */
    int64_t ts = 970065000;
    double o = 10, at;
    float g[F];
    st_features_compute(1, &ts, &o, &o, &o, &o, NULL, 0, g, F, &at);
    double tod = 6.283185307179586 * (14.5 / 24), dow = 6.283185307179586 * 2 / 7;
    CHECK(fabsf(g[36] - (float)sin(tod)) < 1e-6f && fabsf(g[37] - (float)cos(tod)) < 1e-6f &&
              fabsf(g[38] - (float)sin(dow)) < 1e-6f && fabsf(g[39] - (float)cos(dow)) < 1e-6f,
          "time features %g %g %g %g", g[36], g[37], g[38], g[39]);

    /* Names: 40 distinct. */
    int dup = 0;
    for (int a = 0; a < F; a++)
        for (int b = 0; b < a; b++)
            dup += !strcmp(st_feature_name(a), st_feature_name(b));
    CHECK(dup == 0 && strcmp(st_feature_name(F), "?") == 0, "%d duplicate feature names", dup);
    feats_free(&f);
    st_instrument_free(&in);
}

/* Constant prices and zero (or constant) volume: every divisor is floored. */
static void test_constant(void) {
    const int n = 400;
    for (int variant = 0; variant < 3; variant++) {
        st_instrument in;
        st_instrument_alloc(&in, n);
        for (int t = 0; t < n; t++) {
            in.ts[t] = 946857600 + (int64_t)t * 86400;
            in.open[t] = in.high[t] = in.low[t] = in.close[t] = 123.45;
            in.volume[t] = variant == 1 ? 5000 : 0;
        }
        in.n = n;
        in.has_volume = variant != 2;
        snprintf(in.name, sizeof in.name, "const%d", variant);
        feats f = compute(&in);
        int nonfinite = 0, nonzero = 0, atr_bad = 0;
        double biggest = 0;
        for (int t = 0; t < n; t++) {
            atr_bad += !(f.atr[t] > 0) || f.atr[t] != 1e-4 * 123.45;
            for (int j = 0; j < F; j++) {
                float v = f.feat[(size_t)t * F + j];
                nonfinite += !isfinite(v);
                /* Only atr_pct (log 1e-4) and the calendar may be far from 0;
                 * the rest may show rounding: a mean of k equal doubles can
                 * miss them by an ulp (1e-14 c), / ATR (1e-4 c) -> ~1e-10. */
                if (j != 12 && j < 36) {
                    nonzero += fabsf(v) > 1e-8f;
                    biggest = fmax(biggest, fabsf(v));
                }
            }
        }
        CHECK(nonfinite == 0 && atr_bad == 0, "constant variant %d: %d non-finite, %d bad ATR", variant, nonfinite,
              atr_bad);
        CHECK(nonzero == 0, "constant variant %d: %d price/volume features above 1e-8 (largest %g)", variant, nonzero,
              biggest);
        feats_free(&f);

        /* And through the whole pipeline (normalised with a floored std). */
        st_market m = {0};
        m.n_inst = 1;
        m.inst = malloc(sizeof in);
        m.inst[0] = in;
        st_data_opts o = st_data_opts_default(16);
        int rc = st_market_prepare(&m, &o);
        int bad = 0;
        for (int t = 0; rc == ST_OK && t < n; t++)
            for (int j = 0; j < F; j++)
                bad += !isfinite(m.inst[0].features[(size_t)t * F + j]);
        CHECK(rc == ST_OK && bad == 0, "constant market: rc %d (%s), %d non-finite", rc, st_last_error(), bad);
        st_market_free(&m);
    }
}

/* A padded output (stride > 40, gap poisoned with NaN) equals the contiguous one. */
static void test_stride(void) {
    st_instrument in;
    random_instrument(301, 300, &in);
    feats f = compute(&in);
    const int stride = 47;
    float *p = malloc(sizeof(float) * stride * (size_t)in.n);
    for (long i = 0; i < (long)stride * in.n; i++)
        p[i] = NAN;
    double *atr = malloc(sizeof(double) * in.n);
    st_features_compute(in.n, in.ts, in.open, in.high, in.low, in.close, in.volume, 1, p, stride, atr);
    int diff = 0, gap = 0;
    for (int t = 0; t < in.n; t++) {
        diff += memcmp(p + (size_t)t * stride, f.feat + (size_t)t * F, F * sizeof(float)) != 0;
        for (int j = F; j < stride; j++)
            gap += !isnan(p[(size_t)t * stride + j]);
    }
    CHECK(diff == 0 && gap == 0, "stride %d: %d rows differ, %d gap values written", stride, diff, gap);
    free(p);
    free(atr);
    feats_free(&f);
    st_instrument_free(&in);
}

int main(void) {
    test_causality();
    test_formulas();
    test_constant();
    test_stride();
    TEST_MAIN_END();
}
