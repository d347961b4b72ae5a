/* test_env.c: the trading environment on scripted price paths (env.h).
 *
 * One hand-built instrument whose bars are chosen so that each execution
 * rule fires at a known step: entry at the next open with costs, a stop
 * inside a bar (filled at the stop), re-entry after the stop, a flip long ->
 * short at one open (two fills), a gap through the stop (filled at the
 * open), liquidation at the episode's end. Expected values are written out
 * by hand from the bars below (costs 1 + 1 bps, k_stop 2, risk 1%, H 10).
 * Then: the reward identity, every context feature at a chosen step,
 * auto-reset at H and at the end of the split, and the reset draws as a
 * pure function of (seed, env, episode). */
#include <stdint.h>

#include "core/error.h"
#include "core/philox.h"
#include "env/env.h"
#include "test.h"

/* Tolerances: state is double and the expected values are the same
 * arithmetic in another order, so 1e-12 absolute bounds the rounding of a
 * handful of operations on numbers of order 100. Float outputs are
 * checked against float rounding of values below 10 (1e-6). */
#define TOL 1e-12
#define FTOL 1e-6

enum { NB = 16, F = 3 };

/*                      open   high   low    close  atr */
static const double bars[NB][5] = {
    {100.0, 101.0, 99.0, 100.0, 1.0},  /* 0 */
    {100.0, 101.0, 99.0, 100.0, 1.0},  /* 1 */
    {100.0, 101.0, 99.0, 100.0, 1.0},  /* 2  episode start */
    {100.5, 101.5, 99.5, 101.0, 1.0},  /* 3  long filled at 100.5, R 2, stop 98.5 */
    {100.8, 101.2, 98.0, 99.0, 1.2},   /* 4  low 98 <= 98.5: stopped at 98.5 */
    {99.0, 100.0, 98.5, 99.5, 1.1},    /* 5  re-entry long at 99, R 2.4, stop 96.6 */
    {100.0, 102.0, 99.5, 101.5, 1.5},  /* 6  held */
    {101.0, 103.0, 100.0, 102.0, 2.0}, /* 7  flip: long out at 101, short in at 101, R 3, stop 104 */
    {105.0, 106.0, 104.5, 105.5, 2.0}, /* 8  opens at 105 above the stop: gap exit at 105 */
    {105.0, 106.0, 104.0, 104.0, 2.0}, /* 9  short re-entered at 105 */
    {104.0, 105.0, 103.0, 103.0, 2.0}, /* 10 */
    {103.0, 104.0, 102.0, 102.0, 2.0}, /* 11 */
    {102.0, 103.0, 101.0, 101.0, 2.0}, /* 12 last bar of a 10-step episode from 2 */
    {101.0, 102.0, 100.0, 100.0, 2.0}, /* 13 */
    {100.0, 101.0, 99.0, 99.0, 2.0},   /* 14 */
    {99.0, 100.0, 98.0, 98.0, 2.0},    /* 15 last bar of the split */
};

typedef struct {
    double open[NB], high[NB], low[NB], close[NB], vol[NB], atr[NB];
    float feat[NB * F];
    st_instrument inst;
    st_market m;
} scripted;

static void make_scripted(scripted *s) {
    memset(s, 0, sizeof *s);
    for (int t = 0; t < NB; t++) {
        s->open[t] = bars[t][0];
        s->high[t] = bars[t][1];
        s->low[t] = bars[t][2];
        s->close[t] = bars[t][3];
        s->atr[t] = bars[t][4];
        for (int j = 0; j < F; j++)
            s->feat[t * F + j] = (float)(t + 0.1 * j);
    }
    st_instrument *I = &s->inst;
    snprintf(I->name, sizeof I->name, "scripted");
    I->n = NB;
    I->open = s->open;
    I->high = s->high;
    I->low = s->low;
    I->close = s->close;
    I->volume = s->vol;
    I->atr = s->atr;
    I->features = s->feat;
    for (int k = 0; k < ST_SPLITS; k++) {
        I->split_begin[k] = 2;
        I->split_end[k] = NB;
    }
    s->m.n_inst = 1;
    s->m.inst = I;
    s->m.F = F;
}

static st_env_config scripted_cfg(void) {
    st_env_config c = st_env_config_default();
    c.H = 10;
    c.seed = 11;
    return c;
}

/* One step of the single instance; returns the double reward. */
static double step1(st_env *e, int action, uint8_t *done, float *ctx, st_trade_log *log) {
    float r;
    int inst = -1, bar = -1;
    st_env_out out = {&r, done, ctx, ST_CTX_COUNT + 3, &inst, &bar, log};
    int rc = st_env_step(e, &action, &out);
    CHECK(inst == e->inst[0] && bar == e->bar[0], "instrument/bar outputs %d %d vs %d %d", inst, bar, e->inst[0],
          e->bar[0]);
    CHECK(rc == ST_OK, "step failed: %s", st_last_error());
    CHECK(fabs((double)r - e->step_reward[0]) <= FTOL * (1 + fabs(r)), "float reward %g vs %g", r, e->step_reward[0]);
    return e->step_reward[0];
}

static const double cf = 2e-4; /* (1 + 1) bps per fill */

static void test_scripted_path(void) {
    scripted s;
    make_scripted(&s);
    st_env_config cfg = scripted_cfg();
    st_env e;
    CHECK(st_env_create(&e, &s.m, 1, &cfg) == ST_OK, "create: %s", st_last_error());
    float ctx[ST_CTX_COUNT + 3]; /* row stride 19: the last 3 are padding, NaN */
    for (int j = 0; j < ST_CTX_COUNT + 3; j++)
        ctx[j] = NAN;
    st_trade tr[8];
    st_trade_log log = {tr, 8, 0, 0};
    uint8_t done;
    double sum = 0, eq[8];
    st_env_out start = {.ctx = ctx, .ctx_stride = ST_CTX_COUNT + 3};
    CHECK(st_env_start_at(&e, 0, 0, 2, &start) == ST_OK, "start_at");

    /* step 1 (bar 2 -> 3), long: filled at open[3] = 100.5 with 1R = 2 * ATR(2) = 2 */
    double ec1 = cf * 100.5 / 2.0;
    sum += step1(&e, 2, &done, ctx, &log);
    eq[1] = (101.0 - 100.5) / 2.0 - ec1;
    CHECK(e.pos[0] == 1 && e.entry[0] == 100.5 && e.r_unit[0] == 2.0 && e.stop[0] == 98.5,
          "entry: pos %d entry %g R %g stop %g", e.pos[0], e.entry[0], e.r_unit[0], e.stop[0]);
    CHECK(fabs(e.entry_cost_R[0] - ec1) < TOL, "entry cost in R %.15g vs %.15g", e.entry_cost_R[0], ec1);
    CHECK(fabs(sum - eq[1]) < TOL && !done && e.bar[0] == 3, "step 1 reward %.15g vs %.15g", sum, eq[1]);

    /* step 2 (-> 4), long held: low 98 touches the stop 98.5: filled at the stop */
    double R1 = (98.5 - 100.5) / 2.0 - cf * (100.5 + 98.5) / 2.0;
    sum += step1(&e, 2, &done, ctx, &log);
    eq[2] = R1;
    CHECK(log.n == 1 && tr[0].exit_reason == ST_EXIT_STOP && tr[0].exit == 98.5 && tr[0].exit_bar == 4 &&
              tr[0].entry_bar == 3 && tr[0].side == 1 && tr[0].bars == 2,
          "stop trade: n %d reason %d exit %g bar %d bars %d", log.n, tr[0].exit_reason, tr[0].exit, tr[0].exit_bar,
          tr[0].bars);
    CHECK(fabs(tr[0].R - R1) < TOL && fabs(tr[0].cost_R - cf * 199.0 / 2.0) < TOL, "stop trade R %.15g vs %.15g",
          tr[0].R, R1);
    CHECK(fabs(tr[0].money_pnl - 0.01 * R1) < TOL && fabs(e.cash[0] - (1 + 0.01 * R1)) < TOL, "money of trade 1");
    CHECK(e.pos[0] == 0 && fabs(sum - eq[2]) < TOL, "flat after the stop, equity %.15g vs %.15g", sum, eq[2]);
    CHECK(fabs(tr[0].mae - -1.0) < TOL && fabs(tr[0].mfe - 0.5) < TOL, "excursions of trade 1: %g %g", tr[0].mfe,
          tr[0].mae);

    /* step 3 (-> 5), long still the target: re-entered at open[5] = 99, 1R = 2 * ATR(4) = 2.4 */
    double ec2 = cf * 99.0 / 2.4;
    sum += step1(&e, 2, &done, ctx, &log);
    eq[3] = R1 + (99.5 - 99.0) / 2.4 - ec2;
    CHECK(e.pos[0] == 1 && e.entry[0] == 99.0 && fabs(e.r_unit[0] - 2.4) < TOL && fabs(e.stop[0] - 96.6) < TOL,
          "re-entry: pos %d entry %g R %g", e.pos[0], e.entry[0], e.r_unit[0]);
    CHECK(fabs(sum - eq[3]) < TOL, "step 3 equity %.15g vs %.15g", sum, eq[3]);

    /* step 4 (-> 6) held */
    sum += step1(&e, 2, &done, ctx, &log);
    eq[4] = R1 + (101.5 - 99.0) / 2.4 - ec2;
    CHECK(fabs(sum - eq[4]) < TOL, "step 4 equity %.15g vs %.15g", sum, eq[4]);

    /* step 5 (-> 7), short: flip at open[7] = 101: the long closes and the short opens at the same price */
    double R2 = (101.0 - 99.0) / 2.4 - cf * (99.0 + 101.0) / 2.4;
    double ec3 = cf * 101.0 / 3.0;
    int before = log.n;
    double r5 = step1(&e, 0, &done, ctx, &log);
    sum += r5;
    eq[5] = R1 + R2 + (101.0 - 102.0) / 3.0 - ec3;
    CHECK(log.n == before + 1 && tr[1].exit_reason == ST_EXIT_SIGNAL && tr[1].exit == 101.0 && tr[1].exit_bar == 7,
          "flip closes the long at the open: reason %d exit %g", tr[1].exit_reason, tr[1].exit);
    CHECK(fabs(tr[1].R - R2) < TOL && tr[1].bars == 2, "flip trade R %.15g vs %.15g, bars %d", tr[1].R, R2, tr[1].bars);
    CHECK(e.pos[0] == -1 && e.entry[0] == 101.0 && e.r_unit[0] == 3.0 && e.stop[0] == 104.0 && e.entry_bar[0] == 7,
          "flip opens the short at the same open: pos %d entry %g R %g stop %g", e.pos[0], e.entry[0], e.r_unit[0],
          e.stop[0]);
    CHECK(fabs(sum - eq[5]) < TOL, "step 5 equity %.15g vs %.15g", sum, eq[5]);
    /* money: trade 2 risked 1% of the cash after trade 1; the short 1% of the cash after trade 2 */
    double cash2 = (1 + 0.01 * R1) * (1 + 0.01 * R2);
    CHECK(fabs(e.cash[0] - cash2) < TOL, "cash after 2 trades %.15g vs %.15g", e.cash[0], cash2);
    double unreal5 = (101.0 - 102.0) / 3.0 - ec3;
    CHECK(fabs(e.equity_money[0] - (cash2 + unreal5 * 0.01 * cash2)) < TOL, "money equity marked at the close");

    /* every context feature at bar 7, by hand (H_norm = H = 10) */
    double want[ST_CTX_COUNT] = {
        -1.0,                  /* position */
        unreal5,               /* unrealized_R */
        1.0 / 10,              /* bars in trade: bar 7 only */
        (101.0 - 100.0) / 3.0, /* MFE: entry - low[7] */
        (101.0 - 103.0) / 3.0, /* MAE: entry - high[7] */
        2.0 / 1.5,             /* ATR(7) / ATR(6) */
        R1 + R2,               /* realised R */
        eq[1] - eq[5],         /* peak (step 1) - equity */
        0.0,                   /* the flip's exit was at bar 7 */
        3.0 / 10,              /* three entries */
        5.0 / 10,              /* five steps */
        1,
        0,
        0,                            /* previous target short */
        eq[5] - eq[4],                /* previous reward */
        (102.0 - 101.0) * -1.0 / 2.0, /* drift: (close - entry) * side / ATR(7) */
    };
    double raw[ST_CTX_COUNT];
    st_env_context_raw(&e, 0, raw);
    for (int j = 0; j < ST_CTX_COUNT; j++) {
        CHECK(fabs(raw[j] - want[j]) < TOL, "context %d (%s): %.15g, by hand %.15g", j, st_ctx_table[j].name, raw[j],
              want[j]);
        double L = st_ctx_table[j].L, c = st_ctx_table[j].centre;
        double clipped = L > 0 ? c + L * tanh((want[j] - c) / L) : want[j];
        CHECK(fabs(ctx[j] - clipped) < FTOL, "clipped context %d (%s): %.9g vs %.9g", j, st_ctx_table[j].name, ctx[j],
              clipped);
    }
    CHECK(isnan(ctx[ST_CTX_COUNT]) && isnan(ctx[ST_CTX_COUNT + 2]), "the context row's padding was written");

    /* step 6 (-> 8), short held: open 105 is above the stop 104: gap, filled at the open */
    double R3 = (105.0 - 101.0) * -1.0 / 3.0 - cf * (101.0 + 105.0) / 3.0;
    sum += step1(&e, 0, &done, ctx, &log);
    CHECK(log.n == 3 && tr[2].exit_reason == ST_EXIT_GAP && tr[2].exit == 105.0 && tr[2].bars == 1,
          "gap exit at the open: n %d reason %d exit %g", log.n, tr[2].exit_reason, tr[2].exit);
    CHECK(fabs(tr[2].R - R3) < TOL && R3 < -1.0, "gap trade R %.15g vs %.15g (worse than -1R)", tr[2].R, R3);
    CHECK(fabs(sum - (R1 + R2 + R3)) < TOL && e.pos[0] == 0, "after the gap, equity %.15g", sum);

    /* steps 7..10 (-> 12 = 2 + H): short re-entered at 105, liquidated at close[12] at the end */
    double R4 = (101.0 - 105.0) * -1.0 / 4.0 - cf * (105.0 + 101.0) / 4.0; /* 1R = 2 * ATR(8) = 4 */
    for (int k = 7; k <= 10; k++) {
        sum += step1(&e, 0, &done, ctx, &log);
        CHECK((done != 0) == (k == 10), "done at step %d: %d", k, done);
    }
    CHECK(log.n == 4 && tr[3].exit_reason == ST_EXIT_END && tr[3].exit == 101.0 && tr[3].exit_bar == 12,
          "liquidation at the last close: n %d reason %d exit %g", log.n, tr[3].exit_reason, tr[3].exit);
    CHECK(fabs(tr[3].R - R4) < TOL, "last trade R %.15g vs %.15g", tr[3].R, R4);
    double final = R1 + R2 + R3 + R4;
    CHECK(fabs(e.last_ep_R[0] - final) < TOL && fabs(sum - final) < TOL,
          "sum of rewards %.15g == final equity_R %.15g == sum of trade R %.15g", sum, e.last_ep_R[0], final);
    /* auto-reset: episode 1 of instance 0 is the draw (seed, 0, 1) */
    int di, db;
    st_env_draw_start(&e, 0, 1, &di, &db);
    CHECK(e.episode[0] == 1 && e.inst[0] == di && e.bar[0] == db && e.ep_step[0] == 0 && e.pos[0] == 0 &&
              e.equity_R[0] == 0,
          "auto-reset at H: episode %u bar %d (draw %d)", e.episode[0], e.bar[0], db);
    CHECK(ctx[ST_CTX_PROGRESS] == 0 && ctx[ST_CTX_PREV_FLAT] == 1 && ctx[ST_CTX_POSITION] == 0,
          "context after reset is the new episode's first");
    printf("  scripted path: trades R %.4f %.4f %.4f %.4f, episode R %.6f, money %.6f\n", R1, R2, R3, R4, final,
           e.last_ep_money[0]);
    st_env_free(&e);
}

/* The episode ends at the split's last bar when that comes before H. */
static void test_end_of_data(void) {
    scripted s;
    make_scripted(&s);
    st_env_config cfg = scripted_cfg();
    st_env e;
    CHECK(st_env_create(&e, &s.m, 1, &cfg) == ST_OK, "create");
    st_env_start_at(&e, 0, 0, 11, NULL);
    uint8_t done = 0;
    int steps = 0;
    double sum = 0;
    while (!done && steps < 20) {
        sum += step1(&e, 2, &done, NULL, NULL);
        steps++;
    }
    CHECK(steps == 4, "episode from bar 11 should end at bar 15 after 4 steps, took %d", steps);
    CHECK(fabs(sum - e.last_ep_R[0]) < TOL, "reward identity at the end of data: %.15g vs %.15g", sum, e.last_ep_R[0]);
    CHECK(st_env_start_at(&e, 0, 0, 15, NULL) != ST_OK, "a start at the last bar must be refused");
    CHECK(st_env_start_at(&e, 0, 0, 1, NULL) != ST_OK, "a start before the split must be refused");
    int bad = 3;
    CHECK(st_env_step(&e, &bad, NULL) == ST_ERR_INPUT, "action 3 must be refused");
    st_env_free(&e);
}

/* A market of n_inst random-walk instruments of different lengths. */
typedef struct {
    int n_inst;
    st_instrument inst[4];
    double *buf[4];
    float *feat[4];
    st_market m;
} walk_market;

static void make_walks(walk_market *w, uint64_t seed) {
    static const int lens[4] = {300, 50, 120, 900};
    memset(w, 0, sizeof *w);
    w->n_inst = 4;
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    for (int i = 0; i < 4; i++) {
        int n = lens[i];
        double *p = w->buf[i] = malloc(sizeof(double) * 6 * (size_t)n);
        st_instrument *I = &w->inst[i];
        snprintf(I->name, sizeof I->name, "walk%d", i);
        I->n = n;
        I->open = p;
        I->high = p + n;
        I->low = p + 2 * n;
        I->close = p + 3 * n;
        I->volume = p + 4 * n;
        I->atr = p + 5 * n;
        double c = 50 + 10 * i;
        for (int t = 0; t < n; t++) {
            double o = c * exp(0.005 * st_rng_normal(&r));
            c = o * exp(0.01 * st_rng_normal(&r));
            I->open[t] = o;
            I->close[t] = c;
            I->high[t] = fmax(o, c) * (1 + 0.004 * fabs(st_rng_normal(&r)));
            I->low[t] = fmin(o, c) * (1 - 0.004 * fabs(st_rng_normal(&r)));
            I->volume[t] = 0;
            I->atr[t] = 0.012 * c;
        }
        w->feat[i] = calloc((size_t)n, sizeof(float));
        I->features = w->feat[i];
        I->split_begin[ST_SPLIT_TRAIN] = 5;
        I->split_end[ST_SPLIT_TRAIN] = n;
    }
    w->m.n_inst = 4;
    w->m.inst = w->inst;
    w->m.F = 1;
}

static void free_walks(walk_market *w) {
    for (int i = 0; i < 4; i++) {
        free(w->buf[i]);
        free(w->feat[i]);
    }
}

/* Rewards sum to each episode's final equity_R, over many random episodes. */
static void test_reward_identity(void) {
    walk_market w;
    make_walks(&w, 3);
    st_env_config cfg = st_env_config_default();
    cfg.H = 40;
    cfg.seed = 5;
    enum { B = 8 };
    st_env e;
    CHECK(st_env_create(&e, &w.m, B, &cfg) == ST_OK, "create: %s", st_last_error());
    st_env_reset(&e, NULL);
    double sum[B] = {0};
    float fsum[B] = {0};
    int act[B], episodes = 0;
    uint8_t done[B];
    float rew[B];
    double worst = 0, worst_f = 0;
    st_rng r = st_rng_make(9, ST_STREAM_TEST);
    for (int k = 0; k < 2000; k++) {
        for (int b = 0; b < B; b++)
            act[b] = (int)st_rng_below(&r, 3);
        st_env_out out = {.reward = rew, .done = done};
        st_env_step(&e, act, &out);
        for (int b = 0; b < B; b++) {
            sum[b] += e.step_reward[b];
            fsum[b] += rew[b];
            if (done[b]) {
                worst = fmax(worst, fabs(sum[b] - e.last_ep_R[b]));
                worst_f = fmax(worst_f, fabs(fsum[b] - e.last_ep_R[b]) / (1 + fabs(e.last_ep_R[b])));
                sum[b] = fsum[b] = 0;
                episodes++;
            }
        }
    }
    /* double rewards telescope to rounding of ~40 additions (1e-12);
     * float rewards carry 2^-24 relative per step over <= 40 steps (1e-4) */
    printf("  reward identity over %d episodes: max |sum - equity| %.3g (double), %.3g (float, relative)\n", episodes,
           worst, worst_f);
    CHECK(episodes > 300, "only %d episodes finished", episodes);
    CHECK(worst < 1e-10, "double rewards do not sum to the final equity: %g", worst);
    CHECK(worst_f < 1e-4, "float rewards do not sum to the final equity: %g", worst_f);
    st_env_free(&e);
    free_walks(&w);
}

/* Reset draws are a pure function of (seed, env, episode): the same for
 * any B, reproduced by st_env_draw_start, spread over all start pairs. */
static void test_reset_draws(void) {
    walk_market w;
    make_walks(&w, 4);
    st_env_config cfg = st_env_config_default();
    cfg.H = 3;
    cfg.seed = 77;
    st_env a, b;
    CHECK(st_env_create(&a, &w.m, 3, &cfg) == ST_OK && st_env_create(&b, &w.m, 7, &cfg) == ST_OK, "create");
    st_env_reset(&a, NULL);
    st_env_reset(&b, NULL);
    int act3[3] = {2, 0, 1}, act7[7] = {1, 1, 1, 2, 0, 2, 0}, mismatch = 0, draw_mismatch = 0, ends = 0;
    uint8_t da[3], db[7];
    for (int k = 0; k < 300; k++) {
        st_env_out oa = {.done = da}, ob = {.done = db};
        st_env_step(&a, act3, &oa);
        st_env_step(&b, act7, &ob);
        for (int i = 0; i < 3; i++) {
            /* instance i has done the same number of episodes in both only if the starts agreed */
            if (a.episode[i] != b.episode[i] || a.inst[i] != b.inst[i] || a.ep_start[i] != b.ep_start[i]) mismatch++;
            int di, dbar;
            st_env_draw_start(&a, i, a.episode[i], &di, &dbar);
            if (di != a.inst[i] || dbar != a.ep_start[i]) draw_mismatch++;
            ends += da[i];
        }
    }
    CHECK(ends > 200 && mismatch == 0, "instances of B=3 and B=7 diverged %d times (%d episode ends)", mismatch, ends);
    CHECK(draw_mismatch == 0, "%d episode starts differ from st_env_draw_start", draw_mismatch);
    /* the documented formula, which a GPU kernel must reproduce: word 0 of
     * Philox(seed, ST_STREAM_ENV_RESET, (b << 32) | episode) scaled to the pairs */
    int formula_mismatch = 0;
    for (int i = 0; i < 3; i++)
        for (uint32_t ep = 0; ep < 50; ep++) {
            st_philox4 d = st_philox_draw(77, ST_STREAM_ENV_RESET, ((uint64_t)i << 32) | ep);
            int64_t k = (int64_t)(((uint64_t)d.v[0] * (uint64_t)a.start_total) >> 32), inst = 0;
            while (k >= (int64_t)(w.inst[inst].split_end[0] - 1 - w.inst[inst].split_begin[0])) {
                k -= w.inst[inst].split_end[0] - 1 - w.inst[inst].split_begin[0];
                inst++;
            }
            int di, dbar;
            st_env_draw_start(&a, i, ep, &di, &dbar);
            formula_mismatch += di != inst || dbar != w.inst[inst].split_begin[0] + k;
        }
    CHECK(formula_mismatch == 0, "%d of 150 draws differ from the documented Philox formula", formula_mismatch);
    /* a different seed draws different starts */
    st_env c;
    cfg.seed = 78;
    st_env_create(&c, &w.m, 3, &cfg);
    int same = 0;
    for (uint32_t ep = 0; ep < 200; ep++) {
        int i1, b1, i2, b2;
        st_env_draw_start(&a, 1, ep, &i1, &b1);
        st_env_draw_start(&c, 1, ep, &i2, &b2);
        same += i1 == i2 && b1 == b2;
    }
    CHECK(same < 5, "seeds 77 and 78 share %d of 200 starts", same);
    /* uniform over pairs: each instrument's share of 40000 draws ~ its share of starts
     * (binomial sd <= 0.0025; bound 0.01 = 4 sd) */
    int count[4] = {0}, outside = 0;
    for (uint32_t ep = 0; ep < 10000; ep++)
        for (int i = 0; i < 4; i++) {
            int di, dbar;
            st_env_draw_start(&a, i, ep, &di, &dbar);
            count[di]++;
            outside += dbar < w.inst[di].split_begin[0] || dbar > w.inst[di].split_end[0] - 2;
        }
    CHECK(outside == 0, "%d of 40000 starts outside [split_begin, split_end - 2]", outside);
    for (int i = 0; i < 4; i++) {
        double want = (double)(w.inst[i].split_end[0] - 1 - w.inst[i].split_begin[0]) / (double)a.start_total;
        double got = count[i] / 40000.0;
        CHECK(fabs(got - want) < 0.01, "instrument %d drawn %.4f of the time, its share of starts is %.4f", i, got,
              want);
    }
    st_env_free(&a);
    st_env_free(&b);
    st_env_free(&c);
    free_walks(&w);
}

int main(void) {
    test_scripted_path();
    test_end_of_data();
    test_reward_identity();
    test_reset_draws();
    TEST_MAIN_END();
}
