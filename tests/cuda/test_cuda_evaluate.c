/* test_cuda_evaluate.c: the GPU agent (train/evaluate_cuda.h) against the CPU
 * agent (train/evaluate.h) in whole backtests of the test split of a small
 * synthetic market (3 instruments x 1500 bars, 600 in quick mode; K of
 * the preset), at the tiny and default presets, greedy and sampled, with
 * the initial weights (st_params_init_f32) and with those weights nudged
 * by N(0, 0.2) noise (the initial policy head is scaled by 0.01, so its
 * greedy policy is one constant action; the nudge makes greedy decisions
 * vary: all three actions occur at both presets at 1500 bars).
 *
 * A recorder wraps each agent: it hands the agent its context in a padded
 * buffer (row stride C + 5, NaN in the gaps), poisons the agent's outputs
 * (the GPU agent's device logits and selection weights, the host copies of
 * both agents' logits) with NaN before every call, and logs every decision
 * of a walking instrument: (instrument, bar, action, logits). Checks:
 *  - the number of decisions whose action differs is 0 (printed, with the
 *    first one's coordinates, logits and draw); actions can only differ
 *    where two logits, or the draw and a CDF step, are within float
 *    rounding: the closest call of each run is printed beside the largest
 *    logit difference so a reader can tell a tie from a bug;
 *  - logits within 1e-5 relative (the forward bound) over the decisions
 *    before any differing one, none non-finite, no selection weight
 *    non-finite;
 *  - with equal actions: total R equal within 1e-9 relative, the same
 *    number of trades; the mean VSN importance within 1e-5 relative, over
 *    the same number of rows;
 *  - a second GPU backtest gives the same bits (logits, importance).
 * Both backtests are timed (printed). Skips (77) without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "data/dataset.h"
#include "model/model.h"
#include "model/params.h"
#include "train/evaluate.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "train/evaluate_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
#define LOGIT_BOUND 1e-5
#define IMPORTANCE_BOUND 1e-5
#define TOTAL_R_BOUND 1e-9
#define NUDGE 0.2f
#define CTX_PAD 5

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wraps an agent's policy function and logs its decisions. */
typedef struct {
    st_policy_fn fn;
    void *user;
    float *logits;       /* the agent's host logits [max_B, A] of the last call */
    int max_B, A, C;
    st_cuda_agent *gpu;  /* its device outputs are poisoned before each call (NULL: CPU agent) */
    float *ctx_pad;      /* [max_B, C + CTX_PAD], gaps NaN */
    int n, cap;          /* decisions logged */
    int *inst, *bar, *action;
    float *lg; /* [cap, A] */
    long nonfinite_logits, nonfinite_alpha;
    int failed_poison;
} recorder;

static void rec_init(recorder *r, st_policy_fn fn, void *user, float *logits, int max_B, int A, int C,
                     st_cuda_agent *gpu) {
    memset(r, 0, sizeof *r);
    r->fn = fn, r->user = user, r->logits = logits, r->max_B = max_B, r->A = A, r->C = C, r->gpu = gpu;
    int cs = C + CTX_PAD;
    r->ctx_pad = host_poisoned((size_t)max_B * cs);
}

static void rec_free(recorder *r) {
    free(r->ctx_pad), free(r->inst), free(r->bar), free(r->action), free(r->lg);
    memset(r, 0, sizeof *r);
}

static int rec_grow(recorder *r, int more) {
    if (r->n + more <= r->cap) return 1;
    int cap = r->cap ? 2 * r->cap : 1024;
    while (cap < r->n + more) cap *= 2;
    int *i = realloc(r->inst, sizeof(int) * cap), *b = i ? realloc(r->bar, sizeof(int) * cap) : NULL;
    if (i) r->inst = i;
    if (b) r->bar = b;
    int *a = b ? realloc(r->action, sizeof(int) * cap) : NULL;
    if (a) r->action = a;
    float *l = a ? realloc(r->lg, sizeof(float) * (size_t)cap * r->A) : NULL;
    if (!l) return 0;
    r->lg = l;
    r->cap = cap;
    return 1;
}

static int rec_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions) {
    recorder *r = user;
    int B = e->B, A = r->A, C = r->C, cs = C + CTX_PAD;
    ST_REQUIRE(B <= r->max_B, ST_ERR_INTERNAL, "recorder: %d instances > %d", B, r->max_B);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < cs; j++)
            r->ctx_pad[(size_t)b * cs + j] = j < C ? ctx[(size_t)b * ctx_stride + j] : poison();
    for (int i = 0; i < r->max_B * A; i++)
        r->logits[i] = poison();
    if (r->gpu) {
        const st_dims *d = &r->gpu->d;
        size_t nl = (size_t)r->gpu->max_B * d->A, na = (size_t)r->gpu->max_B * d->K * d->F;
        if (cudaMemset(r->gpu->d_logits, 0xFF, sizeof(float) * nl) != cudaSuccess ||
            cudaMemset(r->gpu->model.vsn_alpha, 0xFF, sizeof(float) * na) != cudaSuccess)
            r->failed_poison = 1;
        for (size_t i = 0; i < na; i++)
            r->gpu->alpha[i] = poison();
    }
    ST_TRY(r->fn(r->user, e, r->ctx_pad, cs, actions));
    if (!rec_grow(r, B)) return ST_FAIL(ST_ERR_MEMORY, "recorder: out of memory");
    for (int b = 0; b < B; b++) {
        if (!e->active[b]) continue;
        const float *z = r->logits + (size_t)b * A;
        for (int j = 0; j < A; j++)
            r->nonfinite_logits += !isfinite(z[j]);
        if (r->gpu) {
            const st_dims *d = &r->gpu->d;
            const float *al = r->gpu->alpha + (size_t)b * d->K * d->F;
            for (int i = 0; i < d->K * d->F; i++)
                r->nonfinite_alpha += !isfinite(al[i]);
        }
        r->inst[r->n] = e->inst[b], r->bar[r->n] = e->bar[b], r->action[r->n] = actions[b];
        memcpy(r->lg + (size_t)r->n * A, z, sizeof(float) * A);
        r->n++;
    }
    return ST_OK;
}

/* The draw st_agent_act uses at (instrument, bar). */
static double agent_u(uint64_t seed, int inst, int bar) {
    uint64_t idx = ((uint64_t)(uint32_t)inst << 32) | (uint32_t)bar;
    st_philox4 r = st_philox_draw(seed ^ ST_AGENT_SALT, ST_STREAM_EVAL, idx);
    return st_u01d(r.v[0], r.v[1]);
}

/* How close a decision came to flipping: greedy, the gap between the two
 * largest logits; sampled, the distance of the draw from the nearest CDF
 * step (a probability). */
static double closest_call(const float *z, int A, int greedy, double u) {
    if (greedy) {
        double t1 = -INFINITY, t2 = -INFINITY;
        for (int j = 0; j < A; j++)
            if (z[j] > t1) t2 = t1, t1 = z[j];
            else if (z[j] > t2) t2 = z[j];
        return t1 - t2;
    }
    double mx = z[0], s = 0, acc = 0, best = INFINITY;
    for (int j = 1; j < A; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < A; j++) s += exp((double)z[j] - mx);
    for (int j = 0; j < A - 1; j++) {
        acc += exp((double)z[j] - mx) / s;
        best = fmin(best, fabs(u - acc));
    }
    return best;
}

static double rel_err_d(const double *a, const double *b, int n) {
    double d = 0, s = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] != a[i]) return INFINITY;
        d += (a[i] - b[i]) * (a[i] - b[i]);
        s += b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

typedef struct {
    recorder rec;
    st_backtest_result res;
    double seconds;
    double *importance; /* [F] mean */
    double *importance_sum; /* [F] sums (GPU reruns compare bits) */
    long importance_rows;
    int rc;
} bt_run;

static void bt_free(bt_run *b) {
    rec_free(&b->rec);
    st_backtest_free(&b->res);
    free(b->importance), free(b->importance_sum);
}

static st_backtest_opts bt_opts(void) {
    st_backtest_opts o = st_backtest_opts_default(ST_SPLIT_TEST);
    o.env.H_norm = 256;
    return o;
}

static void run_cpu(const st_market *m, st_model *model, int greedy, uint64_t seed, bt_run *out) {
    memset(out, 0, sizeof *out);
    const st_dims *d = &model->d;
    st_agent ag;
    out->rc = st_agent_init(&ag, model, m, greedy, seed);
    CHECK(out->rc == ST_OK, "CPU agent init: %s", st_last_error());
    if (out->rc != ST_OK) return;
    rec_init(&out->rec, st_agent_act, &ag, ag.logits, m->n_inst, d->A, d->C, NULL);
    st_backtest_opts o = bt_opts();
    double t0 = now_seconds();
    out->rc = st_backtest_run(m, &o, rec_act, &out->rec, &out->res);
    out->seconds = now_seconds() - t0;
    CHECK(out->rc == ST_OK, "CPU backtest: %s", st_last_error());
    out->importance = calloc((size_t)d->F, sizeof(double));
    out->importance_sum = calloc((size_t)d->F, sizeof(double));
    for (int j = 0; j < d->F; j++) {
        out->importance_sum[j] = ag.importance[j];
        out->importance[j] = ag.importance_rows ? ag.importance[j] / ag.importance_rows : 0;
    }
    out->importance_rows = ag.importance_rows;
    st_agent_free(&ag);
}

static void run_gpu(const st_market *m, const st_dims *d, const st_param_table *t, const float *w, int greedy,
                    uint64_t seed, bt_run *out) {
    memset(out, 0, sizeof *out);
    st_cuda_agent ag;
    out->rc = st_cuda_agent_init(&ag, d, t, w, m, greedy, seed);
    CHECK(out->rc == ST_OK, "GPU agent init: %s", st_last_error());
    if (out->rc != ST_OK) return;
    rec_init(&out->rec, st_cuda_agent_act, &ag, ag.logits, m->n_inst, d->A, d->C, &ag);
    st_backtest_opts o = bt_opts();
    double t0 = now_seconds();
    out->rc = st_backtest_run(m, &o, rec_act, &out->rec, &out->res);
    out->seconds = now_seconds() - t0;
    CHECK(out->rc == ST_OK, "GPU backtest: %s", st_last_error());
    CHECK(!out->rec.failed_poison, "GPU: cudaMemset of the poison failed: %s", cudaGetErrorString(cudaGetLastError()));
    out->importance = calloc((size_t)d->F, sizeof(double));
    out->importance_sum = calloc((size_t)d->F, sizeof(double));
    st_cuda_agent_importance(&ag, out->importance);
    memcpy(out->importance_sum, ag.importance, sizeof(double) * d->F);
    out->importance_rows = ag.importance_rows;
    st_cuda_agent_free(&ag);
    out->rec.gpu = NULL; /* the agent is gone */
}

/* One case: CPU vs GPU backtests (and a GPU rerun) of one weight set, greedy or sampled. */
static void compare_case(const char *name, const st_market *m, st_model *model, const st_param_table *t,
                         const float *w, int greedy, uint64_t seed) {
    const st_dims *d = &model->d;
    int A = d->A;
    bt_run cpu, gpu, again;
    run_cpu(m, model, greedy, seed, &cpu);
    run_gpu(m, d, t, w, greedy, seed, &gpu);
    run_gpu(m, d, t, w, greedy, seed, &again);
    if (cpu.rc != ST_OK || gpu.rc != ST_OK || again.rc != ST_OK) {
        bt_free(&cpu), bt_free(&gpu), bt_free(&again);
        return;
    }
    const recorder *rc = &cpu.rec, *rg = &gpu.rec;
    CHECK(rc->n == rg->n && rc->n > 0, "%s: %d CPU decisions, %d GPU decisions", name, rc->n, rg->n);
    int n = rc->n < rg->n ? rc->n : rg->n;
    /* decisions: (instrument, bar) must line up, actions may differ only at ties */
    int differ = 0, first = -1, misaligned = 0;
    long counts[3] = {0, 0, 0};
    double closest = INFINITY, dl = 0, sl = 0, max_dl = 0;
    for (int i = 0; i < n; i++) {
        if (rc->inst[i] != rg->inst[i] || rc->bar[i] != rg->bar[i]) {
            if (!misaligned)
                fprintf(stderr, "%s: decision %d is (instrument %d, bar %d) on the CPU, (%d, %d) on the GPU\n", name,
                        i, rc->inst[i], rc->bar[i], rg->inst[i], rg->bar[i]);
            misaligned++;
        }
        if (rc->action[i] != rg->action[i]) {
            if (first < 0) first = i;
            differ++;
        }
        if (rc->action[i] >= 0 && rc->action[i] < 3) counts[rc->action[i]]++;
        if (first < 0) { /* same states so far: same windows, logits within rounding */
            const float *zc = rc->lg + (size_t)i * A, *zg = rg->lg + (size_t)i * A;
            for (int j = 0; j < A; j++) {
                double e = (double)zg[j] - zc[j];
                dl += e * e, sl += (double)zc[j] * zc[j];
                max_dl = fmax(max_dl, fabs(e));
            }
            closest = fmin(closest, closest_call(zc, A, greedy, agent_u(seed, rc->inst[i], rc->bar[i])));
        }
    }
    double lerr = sl > 0 ? sqrt(dl / sl) : sqrt(dl);
    printf("%s: %d decisions (short %ld, flat %ld, long %ld on the CPU), %d differ; CPU %.3f s, GPU %.3f s "
           "(rerun %.3f s)\n",
           name, n, counts[0], counts[1], counts[2], differ, cpu.seconds, gpu.seconds, again.seconds);
    printf("  closest call %.3e (%s), largest |logit difference| %.3e\n", closest,
           greedy ? "gap of the two largest logits" : "draw to the nearest CDF step", max_dl);
    CHECK(misaligned == 0, "%s: %d decisions at different (instrument, bar)", name, misaligned);
    if (first >= 0) {
        const float *zc = rc->lg + (size_t)first * A, *zg = rg->lg + (size_t)first * A;
        fprintf(stderr,
                "%s: first differing decision %d: instrument %d bar %d: CPU action %d logits (%.9g %.9g %.9g), GPU "
                "action %d logits (%.9g %.9g %.9g), draw u %.17g\n",
                name, first, rc->inst[first], rc->bar[first], rc->action[first], zc[0], zc[1], zc[2],
                rg->action[first], zg[0], zg[1], zg[2], agent_u(seed, rc->inst[first], rc->bar[first]));
    }
    CHECK(differ == 0, "%s: %d of %d decisions differ", name, differ, n);
    CHECK(rc->nonfinite_logits == 0 && rg->nonfinite_logits == 0,
          "%s: non-finite logits (poison left?): CPU %ld, GPU %ld", name, rc->nonfinite_logits,
          rg->nonfinite_logits);
    CHECK(rg->nonfinite_alpha == 0, "%s: %ld non-finite GPU selection weights (poison left?)", name,
          rg->nonfinite_alpha);
    CHECK_PARITY("logits (decisions before any differing)", lerr, LOGIT_BOUND);
    if (differ == 0) {
        double Rc = cpu.res.metrics.total_R, Rg = gpu.res.metrics.total_R;
        double rel = fabs(Rg - Rc) / fmax(fabs(Rc), 1e-300);
        printf("  total R CPU %.6f GPU %.6f, trades %d / %d\n", Rc, Rg, cpu.res.n_trades, gpu.res.n_trades);
        CHECK(Rg == Rc || rel <= TOTAL_R_BOUND, "%s: total R %.12g (GPU) vs %.12g (CPU)", name, Rg, Rc);
        CHECK(cpu.res.n_trades == gpu.res.n_trades, "%s: %d GPU trades, %d CPU trades", name, gpu.res.n_trades,
              cpu.res.n_trades);
        CHECK(cpu.importance_rows == gpu.importance_rows, "%s: importance over %ld GPU rows, %ld CPU rows", name,
              gpu.importance_rows, cpu.importance_rows);
        CHECK_PARITY("VSN importance", rel_err_d(gpu.importance, cpu.importance, d->F), IMPORTANCE_BOUND);
    }
    /* rerun: same bits */
    int same = again.rec.n == rg->n && memcmp(again.rec.action, rg->action, sizeof(int) * rg->n) == 0 &&
               memcmp(again.rec.lg, rg->lg, sizeof(float) * (size_t)rg->n * A) == 0 &&
               memcmp(again.importance_sum, gpu.importance_sum, sizeof(double) * d->F) == 0 &&
               again.importance_rows == gpu.importance_rows;
    CHECK(same, "%s: a second GPU backtest differs from the first", name);
    printf("  GPU rerun: %s\n", same ? "same bits" : "DIFFERENT");
    bt_free(&cpu), bt_free(&gpu), bt_free(&again);
}

/* Cases base .. base + 3 (SSMTRADE_TEST_PART, tests/test.h): init and
 * nudged weights, greedy and sampled. */
static void preset_case(const char *preset, uint64_t seed, int base) {
    st_dims d;
    st_param_table t;
    CHECK(st_dims_preset(preset, &d) == ST_OK, "preset %s", preset);
    CHECK(st_param_table_build(&d, &t) == ST_OK, "table: %s", st_last_error());
    st_market m;
    st_data_opts o = st_data_opts_default(d.K);
    /* quick (the sanitizer runs, where racecheck ran past 350 s a part): 600 bars, a test split of 90 */
    const int bars = test_quick() ? 600 : 1500;
    int rc = st_market_synthetic(seed, 3, bars, &o, &m);
    CHECK(rc == ST_OK, "market: %s", st_last_error());
    if (rc != ST_OK) {
        st_param_table_free(&t);
        return;
    }
    printf("%s preset: K %d, %zu parameters, 3 instruments x %d bars, test split\n", preset, d.K, t.total, bars);
    float *w = malloc(sizeof(float) * t.total), *g = calloc(t.total, sizeof(float));
    for (int nudged = 0; nudged < 2; nudged++) {
        st_params_init_f32(&t, seed, w);
        if (nudged) {
            float *z = malloc(sizeof(float) * t.total);
            st_gc_randnf(z, (long)t.total, NUDGE, seed, 7);
            for (size_t i = 0; i < t.total; i++)
                w[i] += z[i];
            free(z);
        }
        st_model model;
        rc = st_model_init(&model, &d, &t, m.n_inst, w, g);
        CHECK(rc == ST_OK, "CPU model: %s", st_last_error());
        if (rc != ST_OK) continue;
        for (int greedy = 1; greedy >= 0; greedy--) {
            if (!test_part(base + 2 * nudged + (1 - greedy))) continue;
            char name[96];
            snprintf(name, sizeof name, "%s %s %s", preset, nudged ? "nudged" : "init", greedy ? "greedy" : "sampled");
            compare_case(name, &m, &model, &t, w, greedy, seed + 100);
        }
        st_model_free(&model);
    }
    free(w), free(g);
    st_market_free(&m);
    st_param_table_free(&t);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    preset_case("tiny", 7, 0);
    /* SSMTRADE_TEST_QUICK (the sanitizer runs): the tiny preset only (the
     * default preset's CPU backtests dominate the run time) */
    if (!test_quick()) preset_case("default", 7, 4);
#endif
    TEST_MAIN_END();
}
