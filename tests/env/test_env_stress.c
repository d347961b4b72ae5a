/* test_env_stress.c: no non-finite value anywhere under random actions.
 *
 * 100,000 steps of B = 64 instances with uniform random actions on markets
 * built to break divisors: a constant price with zero volume and ATR 0
 * (the env must floor 1R and the ATR ratio itself), a constant near-zero
 * price, and a noisy instrument with fat-tailed returns, 30% gaps and ATR
 * spanning 1e-9 .. 10 (drift and unrealised R explode before the clip).
 * Every step checks rewards, every context value and the padding of the
 * context rows, equity in R and money; at the end the clipped context
 * stays inside its documented bounds. Then the same on the built-in
 * synthetic market (fewer steps). */
#include <stdint.h>

#include "core/error.h"
#include "core/philox.h"
#include "data/dataset.h"
#include "env/env.h"
#include "test.h"

enum { NB = 3000, B = 64, CS = ST_CTX_COUNT + 2 };

typedef struct {
    double p[6][NB];
    float feat[NB];
} bars;

static void wire(st_instrument *I, bars *s, const char *name) {
    memset(I, 0, sizeof *I);
    snprintf(I->name, sizeof I->name, "%s", name);
    I->n = NB;
    I->open = s->p[0];
    I->high = s->p[1];
    I->low = s->p[2];
    I->close = s->p[3];
    I->volume = s->p[4];
    I->atr = s->p[5];
    I->features = s->feat;
    for (int k = 0; k < ST_SPLITS; k++) {
        I->split_begin[k] = 10;
        I->split_end[k] = NB;
    }
}

static void constant(bars *s, double price, double atr) {
    for (int t = 0; t < NB; t++) {
        s->p[0][t] = s->p[1][t] = s->p[2][t] = s->p[3][t] = price;
        s->p[4][t] = 0;
        s->p[5][t] = atr;
    }
}

static void noisy(bars *s, uint64_t seed) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    double c = 100;
    for (int t = 0; t < NB; t++) {
        double z = st_rng_normal(&r);
        double gap = st_rng_uniform(&r) < 0.3 ? 0.3 * st_rng_normal(&r) : 0;
        double o = c * exp(gap);
        c = o * exp(0.05 * z * z * z); /* cubed normal: fat tails */
        s->p[0][t] = o;
        s->p[3][t] = c;
        s->p[1][t] = fmax(o, c) * (1 + 0.02 * fabs(st_rng_normal(&r)));
        s->p[2][t] = fmin(o, c) * (1 - 0.02 * fabs(st_rng_normal(&r))) + 1e-300;
        s->p[4][t] = 0;
        s->p[5][t] = exp(log(1e-9) + st_rng_uniform(&r) * (log(10.0) - log(1e-9)));
    }
}

/* Runs `steps` random steps and counts non-finite values; returns them. */
static long run(const st_market *m, int steps, uint64_t seed, double *max_raw, double *max_ctx) {
    st_env_config cfg = st_env_config_default();
    cfg.seed = seed;
    st_env e;
    if (st_env_create(&e, m, B, &cfg) != ST_OK) {
        CHECK(0, "create: %s", st_last_error());
        return 1;
    }
    static float ctx[B * CS];
    for (int x = 0; x < B * CS; x++)
        ctx[x] = NAN;
    st_env_out out = {.ctx = ctx, .ctx_stride = CS};
    st_env_reset(&e, &out);
    int act[B];
    float rew[B];
    uint8_t done[B];
    long bad = 0, pad = 0, outside = 0;
    int at_inst[B], at_bar[B];
    st_trade tr[2 * B];
    for (int k = 0; k < steps; k++) {
        for (int b = 0; b < B; b++) {
            st_philox4 d = st_philox_draw(seed, ST_STREAM_ACTION, (uint64_t)k * B + b);
            act[b] = (int)(((uint64_t)d.v[0] * 3u) >> 32);
        }
        st_trade_log log = {tr, 2 * B, 0, 0};
        st_env_out step_out = {rew, done, ctx, CS, at_inst, at_bar, &log};
        st_env_step(&e, act, &step_out);
        for (int b = 0; b < B; b++) {
            bad += !isfinite(rew[b]) + !isfinite(e.equity_R[b]) + !isfinite(e.equity_money[b]) + !isfinite(e.cash[b]);
            const float *row = ctx + b * CS;
            for (int j = 0; j < ST_CTX_COUNT; j++) {
                bad += !isfinite(row[j]);
                if (fabs(row[j]) > *max_ctx) *max_ctx = fabs(row[j]);
            }
            pad += !isnan(row[ST_CTX_COUNT]) + !isnan(row[ST_CTX_COUNT + 1]);
            const st_instrument *I = &m->inst[at_inst[b]]; /* the window's last bar stays inside the split */
            outside += at_bar[b] < I->split_begin[ST_SPLIT_TRAIN] || at_bar[b] >= I->split_end[ST_SPLIT_TRAIN];
        }
        for (int i = 0; i < log.n; i++)
            bad += !isfinite(tr[i].R) + !isfinite(tr[i].money_pnl);
        if (k % 97 == 0) { /* the raw features, to show what the clip holds back */
            double raw[ST_CTX_COUNT];
            st_env_context_raw(&e, k % B, raw);
            for (int j = 0; j < ST_CTX_COUNT; j++)
                if (isfinite(raw[j]) && fabs(raw[j]) > *max_raw) *max_raw = fabs(raw[j]);
        }
    }
    CHECK(pad == 0, "%ld context padding values written", pad);
    CHECK(outside == 0, "%ld observed bars outside the training split", outside);
    st_env_free(&e);
    return bad;
}

int main(void) {
    static bars flat, tiny, noise;
    st_instrument inst[3];
    constant(&flat, 100.0, 0.0); /* ATR 0: below market.h's floor on purpose */
    constant(&tiny, 1e-8, 1e-20);
    noisy(&noise, 42);
    wire(&inst[0], &flat, "constant");
    wire(&inst[1], &tiny, "near-zero");
    wire(&inst[2], &noise, "noisy");
    const char *what[3] = {"constant price, zero volume, ATR 0", "constant price 1e-8", "noisy, gaps, ATR 1e-9..10"};
    /* each market alone (all instances on it): 100,000 steps of B = 64 on the
     * constant and the noisy instrument, 20,000 on the near-zero one */
    for (int i = 0; i < 3; i++) {
        st_market m = {.n_inst = 1, .inst = &inst[i], .F = 1};
        double max_raw = 0, max_ctx = 0;
        int steps = i == 1 ? 20000 : 100000;
        long bad = run(&m, steps, 7 + i, &max_raw, &max_ctx);
        printf("  %-36s %6d x %d steps: %ld non-finite, max |raw context| %.3g, max |clipped| %.4f\n", what[i], steps,
               B, bad, max_raw, max_ctx);
        CHECK(bad == 0, "%s: %ld non-finite values", what[i], bad);
        /* the clip bounds every context value by centre + L = 6 (ATR ratio) */
        CHECK(max_ctx <= 6.0, "%s: clipped context reached %g", what[i], max_ctx);
    }

    /* the built-in synthetic market */
    st_data_opts o = st_data_opts_default(64);
    st_market syn;
    int rc = st_market_synthetic(1, 8, 20000, &o, &syn);
    CHECK(rc == ST_OK, "synthetic market: %s", st_last_error());
    if (rc == ST_OK) {
        double max_raw = 0, max_ctx = 0;
        long bad = run(&syn, 20000, 3, &max_raw, &max_ctx);
        printf("  %-36s  20000 x %d steps: %ld non-finite, max |raw context| %.3g\n", "synthetic market (8 x 20000)", B,
               bad, max_raw);
        CHECK(bad == 0, "synthetic market: %ld non-finite values", bad);
        st_market_free(&syn);
    }
    TEST_MAIN_END();
}
