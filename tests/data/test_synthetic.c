/* test_synthetic.c: the built-in synthetic market (data/synthetic.h), the
 * splits and the training-split normalisation (data/splits.h).
 *
 * - Determinism: same seed -> identical bars, features and oracle; another
 *   seed -> different bars; an instrument does not depend on its neighbours.
 * - Valid bars (high >= max(open, close), low <= min(open, close), volume >=
 *   0, times increasing), finite clipped features, zeros before the warm-up.
 * - Normalised training-split features: mean ~0, std ~1.
 * - The stylised facts the market promises: fat tails, volume rising with
 *   activity, and the planted structure: the oracle's sign agrees with the
 *   next bar's return well above 50%, and a causal momentum rule (sign of
 *   ret_32) does better than 50% too, so the trend is learnable from features.
 * - Normalisation sees the training split only.
 * - CSVs as gen-data writes them load back to the same bars. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <time.h>

#include "core/error.h"
#include "core/philox.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/features.h"
#include "data/splits.h"
#include "data/synthetic.h"
#include "test.h"

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int same_instrument(const st_instrument *a, const st_instrument *b, int F) {
    size_t n = (size_t)a->n, d = n * sizeof(double);
    return a->n == b->n && !memcmp(a->ts, b->ts, n * sizeof(int64_t)) && !memcmp(a->open, b->open, d) &&
           !memcmp(a->high, b->high, d) && !memcmp(a->low, b->low, d) && !memcmp(a->close, b->close, d) &&
           !memcmp(a->volume, b->volume, d) && !memcmp(a->oracle, b->oracle, n) &&
           (!a->features || !memcmp(a->features, b->features, n * (size_t)F * sizeof(float))) &&
           (!a->atr || !memcmp(a->atr, b->atr, d));
}

static void test_determinism(void) {
    st_data_opts o = st_data_opts_default(32);
    st_rng r = st_rng_make(401, ST_STREAM_TEST);
    st_philox4 d = st_rng_next4(&r);
    uint64_t seed = ((uint64_t)d.v[0] << 32) | d.v[1];
    st_market a, b, c;
    int rc = st_market_synthetic(seed, 3, 3000, &o, &a) | st_market_synthetic(seed, 3, 3000, &o, &b) |
             st_market_synthetic(seed + 1, 3, 3000, &o, &c);
    CHECK(rc == ST_OK, "synthetic: %s", st_last_error());
    if (rc != ST_OK) return;
    int same = 1;
    for (int i = 0; i < 3; i++)
        same = same && same_instrument(&a.inst[i], &b.inst[i], a.F);
    same = same && !memcmp(a.norm_mean, b.norm_mean, sizeof(float) * a.F) &&
           !memcmp(a.norm_std, b.norm_std, sizeof(float) * a.F);
    CHECK(same, "same seed, different market");
    long differ = 0, total = 0;
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < a.inst[i].n; t++, total++)
            differ += a.inst[i].close[t] != c.inst[i].close[t];
    CHECK(differ > total * 99 / 100, "seed + 1 differs on only %ld of %ld closes", differ, total);
    CHECK(a.synthetic == 1 && a.seed == seed && a.K == 32 && !strcmp(a.inst[2].name, "syn2"), "market fields");

    /* Instrument 1 alone, and a shorter market, are the same bars. */
    st_instrument one, shorter;
    st_synthetic_instrument(seed, 1, 3000, &one);
    st_synthetic_instrument(seed, 1, 1000, &shorter);
    CHECK(same_instrument(&one, &a.inst[1], a.F), "instrument 1 depends on the others");
    st_instrument prefix = one;
    prefix.n = 1000;
    CHECK(same_instrument(&shorter, &prefix, a.F), "a 1000-bar market is not the prefix of a 3000-bar one");
    st_instrument_free(&one);
    st_instrument_free(&shorter);
    st_market_free(&a);
    st_market_free(&b);
    st_market_free(&c);

    /* Too few bars: the message says how many. */
    o = st_data_opts_default(64);
    rc = st_market_synthetic(seed, 2, 300, &o, &a);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "needs at least 362 rows"), "300 bars: %d %s", rc,
          st_last_error());
}

static void test_bars_and_features(const st_market *m) {
    long bad_bar = 0, bad_feat = 0, early = 0;
    for (int i = 0; i < m->n_inst; i++) {
        const st_instrument *in = &m->inst[i];
        for (int t = 0; t < in->n; t++) {
            double o = in->open[t], h = in->high[t], l = in->low[t], c = in->close[t], v = in->volume[t];
            bad_bar += !(h >= fmax(o, c) && l <= fmin(o, c) && l > 0 && v >= 0 && v == floor(v) && isfinite(h)) ||
                       (t > 0 && in->ts[t] != in->ts[t - 1] + ST_SYN_BAR_SECONDS) ||
                       !(in->oracle[t] >= -1 && in->oracle[t] <= 1) || !(in->atr[t] > 0);
            for (int j = 0; j < m->F; j++) {
                float f = in->features[(size_t)t * m->F + j];
                bad_feat += !isfinite(f) || fabsf(f) > m->clip;
                early += t < in->warmup && f != 0;
            }
        }
    }
    CHECK(bad_bar == 0, "%ld invalid bars", bad_bar);
    CHECK(bad_feat == 0, "%ld non-finite or unclipped features", bad_feat);
    CHECK(early == 0, "%ld non-zero features before the warm-up", early);
}

/* Normalised training-split features: mean ~0 and std ~1. Clipping at 5 and
 * float rounding move them a little: a fat-tailed feature loses some
 * variance beyond 5 std (t4 returns lose ~3%), and the mean moves by at most
 * that mass times a few std. */
static void test_normalised(const st_market *m) {
    double worst_mean = 0, worst_std = 0;
    int wm = -1, ws = -1;
    for (int j = 0; j < m->F; j++) {
        double s = 0, s2 = 0;
        long n = 0;
        for (int i = 0; i < m->n_inst; i++) {
            const st_instrument *in = &m->inst[i];
            for (int t = in->split_begin[0]; t < in->split_end[0]; t++, n++) {
                double f = in->features[(size_t)t * m->F + j];
                s += f;
                s2 += f * f;
            }
        }
        double mean = s / n, sd = sqrt(fmax(s2 / n - mean * mean, 0));
        if (fabs(mean) > worst_mean) worst_mean = fabs(mean), wm = j;
        if (fabs(sd - 1) > worst_std) worst_std = fabs(sd - 1), ws = j;
    }
    CHECK(worst_mean < 0.03, "normalised training feature %d (%s) has mean %.4f", wm, st_feature_name(wm), worst_mean);
    CHECK(worst_std < 0.08, "normalised training feature %d (%s) has |std - 1| = %.4f", ws, st_feature_name(ws),
          worst_std);
    printf("  normalised train features: worst |mean| %.4f (%s), worst |std-1| %.4f (%s)\n", worst_mean,
           st_feature_name(wm), worst_std, st_feature_name(ws));
}

static void test_structure(const st_market *m) {
    long agree = 0, votes = 0, mom_agree = 0, mom_votes = 0, runs = 0, run_bars = 0, counts[3] = {0, 0, 0};
    double s = 0, s2 = 0, s4 = 0, n = 0, sxy = 0, sx = 0, sy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < m->n_inst; i++) {
        const st_instrument *in = &m->inst[i];
        for (int t = 1; t < in->n; t++) {
            double r = log(in->close[t] / in->close[t - 1]);
            s += r, s2 += r * r, s4 += r * r * r * r, n++;
            double x = fabs(r), y = log(1 + in->volume[t]);
            sx += x, sy += y, sxy += x * y, sxx += x * x, syy += y * y;
            counts[in->oracle[t] + 1]++;
            run_bars++;
            if (in->oracle[t] != in->oracle[t - 1]) runs++;
        }
        for (int t = in->warmup; t + 1 < in->n; t++) {
            double next = log(in->close[t + 1] / in->close[t]);
            if (in->oracle[t] != 0 && next != 0) votes++, agree += (next > 0) == (in->oracle[t] > 0);
            /* The causal guess: the sign of the raw 32-bar return. */
            double ret32 = log(in->close[t] / in->close[t - 32]);
            if (ret32 != 0 && next != 0) mom_votes++, mom_agree += (next > 0) == (ret32 > 0);
        }
    }
    double oracle_rate = (double)agree / votes, mom_rate = (double)mom_agree / mom_votes;
    double var = s2 / n - (s / n) * (s / n), kurt = (s4 / n) / (var * var);
    double corr = (sxy / n - sx / n * sy / n) / sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
    double mean_run = (double)run_bars / (runs + m->n_inst);
    /* Expected: oracle ~0.576 (drift 0.15 sigma, t4 noise), standard error
     * 0.5/sqrt(votes) ~0.0015; momentum ~0.525, s.e. ~0.0013. */
    CHECK(oracle_rate > 0.55, "oracle agrees with the next bar's sign only %.4f of %ld bars", oracle_rate, votes);
    CHECK(mom_rate > 0.51, "causal momentum agrees only %.4f of %ld bars: the trend is not learnable", mom_rate,
          mom_votes);
    CHECK(counts[0] > run_bars / 5 && counts[1] > run_bars / 5 && counts[2] > run_bars / 5,
          "trend states: %ld down, %ld flat, %ld up", counts[0], counts[1], counts[2]);
    CHECK(mean_run > 70 && mean_run < 140, "mean trend run %.1f bars (expected 100)", mean_run);
    CHECK(kurt > 5, "1-bar returns have kurtosis %.2f: not fat-tailed (normal = 3)", kurt);
    CHECK(corr > 0.2, "volume vs |return| correlation %.3f", corr);
    printf("  oracle sign agreement %.4f over %ld bars; causal momentum %.4f; mean trend run %.1f bars\n", oracle_rate,
           votes, mom_rate, mean_run);
    printf("  1-bar return kurtosis %.2f; corr(|r|, log volume) %.3f\n", kurt, corr);
}

/* Changing validation/test bars leaves the normalisation unchanged (bit for
 * bit); changing a training bar changes it (so the check can fail). */
static void test_train_only_norm(void) {
    st_data_opts o = st_data_opts_default(64);
    st_market m;
    int rc = st_market_synthetic(77, 2, 4000, &o, &m);
    CHECK(rc == ST_OK, "market: %s", st_last_error());
    if (rc != ST_OK) return;
    float mean[64], sd[64];
    memcpy(mean, m.norm_mean, sizeof(float) * m.F);
    memcpy(sd, m.norm_std, sizeof(float) * m.F);
    st_rng r = st_rng_make(78, ST_STREAM_TEST);
    for (int i = 0; i < m.n_inst; i++) {
        st_instrument *in = &m.inst[i];
        for (int t = in->split_end[ST_SPLIT_TRAIN]; t < in->n; t++) {
            double k = exp(0.5 * st_rng_normal(&r));
            in->open[t] *= k, in->high[t] *= k * 1.01, in->low[t] *= k * 0.99, in->close[t] *= k;
            in->volume[t] *= 3;
        }
    }
    rc = st_market_prepare(&m, &o);
    int same =
        rc == ST_OK && !memcmp(mean, m.norm_mean, sizeof(float) * m.F) && !memcmp(sd, m.norm_std, sizeof(float) * m.F);
    CHECK(same, "changing validation/test bars changed the normalisation (rc %d)", rc);
    int t = m.inst[1].split_begin[ST_SPLIT_TRAIN] + 100;
    m.inst[1].close[t] *= 1.2;
    m.inst[1].high[t] = fmax(m.inst[1].high[t], m.inst[1].close[t]);
    rc = st_market_prepare(&m, &o);
    CHECK(rc == ST_OK && memcmp(mean, m.norm_mean, sizeof(float) * m.F) != 0,
          "changing a training bar did not change the normalisation");
    st_market_free(&m);
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* The CSVs gen-data writes load back to the same bars (10 digits). */
static void test_csv_round_trip(void) {
    char dir[64] = "/tmp/st_test_syn_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    st_data_opts o = st_data_opts_default(64);
    o.use_cache = 0;
    st_market m, back;
    int rc = st_market_synthetic(2024, 3, 1500, &o, &m);
    for (int i = 0; rc == ST_OK && i < m.n_inst; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s.csv", dir, m.inst[i].name);
        rc = st_csv_write(path, &m.inst[i]);
    }
    if (rc == ST_OK) rc = st_market_load(dir, &o, &back);
    CHECK(rc == ST_OK, "round trip: %s", st_last_error());
    if (rc != ST_OK) return;
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < m.n_inst; i++) {
        const st_instrument *a = &m.inst[i], *b = &back.inst[i];
        bad += a->n != b->n || strcmp(a->name, b->name) != 0 || b->has_volume != 1;
        for (int t = 0; t < a->n && t < b->n; t++) {
            bad += a->ts[t] != b->ts[t] || a->volume[t] != b->volume[t];
            const double pa[4] = {a->open[t], a->high[t], a->low[t], a->close[t]};
            const double pb[4] = {b->open[t], b->high[t], b->low[t], b->close[t]};
            for (int k = 0; k < 4; k++)
                worst = fmax(worst, fabs(pb[k] / pa[k] - 1));
        }
    }
    /* 10 significant digits: at most half a unit of the 10th, 5e-10 relative. */
    CHECK(bad == 0 && worst <= 5e-10, "round trip: %d mismatches, worst price rel err %.2e", bad, worst);
    printf("  gen-data CSV round trip: %d instruments, worst price rel err %.2e\n", m.n_inst, worst);
    st_market_free(&m);
    st_market_free(&back);
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    test_determinism();
    st_data_opts o = st_data_opts_default(64);
    st_market m;
    double t0 = wall(), c0 = (double)clock() / CLOCKS_PER_SEC;
    int rc = st_market_synthetic(1, 8, 20000, &o, &m);
    double took = wall() - t0, cpu = (double)clock() / CLOCKS_PER_SEC - c0;
    CHECK(rc == ST_OK, "8 x 20000: %s", st_last_error());
    /* Typically ~0.3 s of CPU; the bound only catches a gross slowdown on a
     * shared machine. */
    CHECK(took < 5.0, "8 instruments x 20000 bars took %.2f s", took);
    printf("  synthetic 8 x 20000 bars (features, splits, normalisation): %.3f s wall, %.3f s cpu\n", took, cpu);
    if (rc == ST_OK) {
        test_bars_and_features(&m);
        test_normalised(&m);
        test_structure(&m);
        st_market_free(&m);
    }
    test_train_only_norm();
    test_csv_round_trip();
    TEST_MAIN_END();
}
