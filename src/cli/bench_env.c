/* bench_env.c: the action step (observation + forward + sampling +
 * environment step) and the environment + observation builder alone
 * (cli/bench.h). The action step's observation is, as in the trainer, the
 * windows' feature-row index with the environments' context (the forward
 * reads features through it: st_cuda_model_forward_rows); --act-window 1
 * times the materialised window and the window forward instead. envwin
 * times the environment step with the materialised window (the builder)
 * and with the row index (what the action step now builds). */
#include "cli/bench.h"

#ifdef ST_HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_gpu.h"
#include "core/error.h"
#include "core/device.h"
#include "core/philox.h"
#include "cuda/env_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/model_cuda.h"
#include "cuda/select_cuda.h"
#include "cuda/window_cuda.h"
#include "env/env.h"
#include "model/params.h"
#include "train/train_config.h"
#include "train/trainer.h"

/* ======================================================================= */
/* act and envwin: the environments on the device                          */

typedef struct {
    const st_dims *d;
    int n, mode; /* envwin: 0 env + window, 1 env only, 2 window only, 3 env + row index */
    int act_window; /* act: the materialised window and the window forward */
    uint64_t seed;
    const st_cuda_features *feat;
    st_cuda_model model;
    int model_ok;
    st_cuda_env env;
    int env_ok;
    st_cuda_env_out out;
    st_bench_pool pool;
    int *action;
    float *logp, *win, *logits, *value;
    float *tab;    /* act: the bar table [feat rows, F Dv] (NULL: none) */
    int *feat_row; /* [n K]: each window row's feature row (and table row) */
    int *actions[ST_BENCH_MAX_SETS]; /* envwin: pre-drawn */
} env_bench;

static void env_bench_free(env_bench *b) {
    if (b->model_ok) st_cuda_model_free(&b->model);
    if (b->env_ok) st_cuda_env_free(&b->env);
    b->model_ok = b->env_ok = 0;
    st_bench_pool_free(&b->pool);
}

/* The environments of n instances, reset, with their output buffers, the window and the row index. */
static int env_setup(env_bench *b, const st_bench_opts *o, int n, cudaStream_t s) {
    const st_dims *d = b->d;
    st_bench_pool *pl = &b->pool;
    st_train_config cfg;
    ST_TRY(st_train_config_default(&cfg, o->preset));
    cfg.seed = (long long)o->seed;
    st_env_config ec = st_trainer_env_config(&cfg);
    st_train_config_free(&cfg);
    b->n = n;
    ST_TRY(st_cuda_env_create(&b->env, o->market, n, &ec));
    b->env_ok = 1;
    st_cuda_env_out *e = &b->out;
    memset(e, 0, sizeof *e);
    e->ctx_stride = d->C;
    ST_TRY(PALLOC(pl, e->reward, n));
    ST_TRY(PALLOC(pl, e->done, n));
    ST_TRY(PALLOC(pl, e->ep_R, n));
    ST_TRY(PALLOC(pl, e->ctx, (size_t)n * d->C));
    ST_TRY(PALLOC(pl, e->inst, n));
    ST_TRY(PALLOC(pl, e->bar, n));
    ST_TRY(PALLOC(pl, b->win, (size_t)n * d->K * st_row_width(d)));
    ST_TRY(PALLOC(pl, b->feat_row, (size_t)n * d->K));
    ST_TRY(st_bench_settle()); /* the environment's inputs went up synchronously */
    ST_TRY(st_cuda_env_reset(&b->env, e, s));
    BCU(cudaStreamSynchronize(s));
    return ST_OK;
}

static int act_step(void *ctx, int k, cudaStream_t s) {
    (void)k;
    env_bench *b = ctx;
    const st_dims *d = b->d;
    int n = b->n, ws = st_row_width(d);
    /* the observation: each window row's feature row (the bar table's row too) */
    if (!b->act_window || b->tab)
        ST_TRY(st_cuda_window_feature_rows(n, d->K, b->feat, b->out.inst, b->out.bar, b->feat_row, s));
    if (!b->act_window) { /* the trainer's action step: no window */
        ST_TRY(st_cuda_model_forward_rows(&b->model, n, b->feat->data, b->feat->F, b->feat_row, b->out.ctx,
                                          b->out.ctx_stride, b->tab, b->logits, d->A, b->value));
    } else {
        ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)b->feat->inst, b->feat->F,
                                    b->out.inst, b->out.bar, b->out.ctx, b->out.ctx_stride, b->win, ws, s));
        if (b->tab)
            ST_TRY(st_cuda_model_forward_table(&b->model, n, b->win, ws, b->tab, b->feat_row, b->logits, d->A,
                                               b->value));
        else
            ST_TRY(st_cuda_model_forward(&b->model, n, b->win, ws, b->logits, d->A, b->value));
    }
    ST_TRY(st_cuda_select_actions(n, d->A, b->logits, d->A, b->seed, ST_STREAM_ACTION, NULL, 0, b->action, b->logp, s));
    ST_TRY(st_cuda_env_step(&b->env, b->action, &b->out, s));
    return ST_OK;
}

/* The bar table's build (once a rollout: the weights change only between rollouts). */
static int table_step(void *ctx, int k, cudaStream_t s) {
    (void)k, (void)s;
    env_bench *b = ctx;
    return st_cuda_model_table_build(&b->model, b->feat->rows, b->feat->data, b->feat->F, b->tab);
}

int st_bench_act(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "act");
    const st_dims *d = &o->d;
    printf("\n== act: %s + forward + action sampling + environment step, one CUDA graph,\n"
           "   median of %d replays after %d warm-up (the environments advance)%s\n",
           o->act_window ? "window build (--act-window 1)" : "feature-row index (no window)", o->repeats, o->warmup,
           o->bar_table ? ";\n   the VSN's per-variable GRNs through the rollout's bar table, its build (once a "
                          "rollout of T steps)\n   timed apart: 'with build/T' adds its share to a step, env steps/s "
                          "counts it"
                        : "");
    printf("  %7s %5s %9s %9s %9s %12s %10s %12s\n", "envs", "prec", "median us", "p10 us", "p90 us", "env steps/s",
           "table ms", "with build/T");
    fflush(stdout);
    int failed = 0;
    st_bench_setup su;
    float *wd = NULL, *gd = NULL; /* gd: the model binds a gradient buffer; the action step never writes it */
    int rc = st_bench_setup_init(&su, o, 1);
    cudaStream_t s = su.s;
    size_t P = su.table.total;
    if (rc == ST_OK) rc = CUS(cudaMalloc((void **)&wd, sizeof(float) * P));
    if (rc == ST_OK) rc = CUS(cudaMalloc((void **)&gd, sizeof(float) * P));
    if (rc == ST_OK) rc = st_bench_upload(wd, su.w0, sizeof(float) * P);
    if (rc == ST_OK) rc = st_bench_settle();
    if (rc != ST_OK) {
        st_bench_record_error(cJSON_AddObjectToObject(out, "act_setup"), "act setup");
        failed++;
    }
    for (int i = 0; i < o->envs.n && rc == ST_OK; i++) {
        int n = o->envs.v[i];
        for (int k = 0; k < o->precision.n; k++) {
            int p = o->precision.v[k];
            cJSON *row = st_bench_row(arr, "envs", n, p);
            char what[64];
            snprintf(what, sizeof what, "act %d envs %s", n, st_bench_precision_name(p));
            /* fresh environments per precision: both start from the same state */
            env_bench b;
            memset(&b, 0, sizeof b);
            b.d = d, b.feat = &su.feat, b.seed = o->seed, b.act_window = o->act_window;
            int r = env_setup(&b, o, n, s);
            if (r == ST_OK) r = PALLOC(&b.pool, b.action, n);
            if (r == ST_OK) r = PALLOC(&b.pool, b.logp, n);
            if (r == ST_OK) r = PALLOC(&b.pool, b.logits, (size_t)n * d->A);
            if (r == ST_OK) r = PALLOC(&b.pool, b.value, n);
            if (r == ST_OK) r = st_cuda_model_init(&b.model, d, &su.table, n, wd, gd);
            if (r == ST_OK) b.model_ok = 1, b.model.stream = (void *)s;
            if (r == ST_OK && o->bar_table && st_cuda_model_table_fits(&b.model))
                r = PALLOC(&b.pool, b.tab, (size_t)su.feat.rows * d->F * d->Dv);
            st_bench_times tm, tb;
            memset(&tb, 0, sizeof tb);
            st_cuda_set_matmul_precision((st_matmul_precision)p);
            if (r == ST_OK && b.tab) r = st_bench_capture_and_time(table_step, &b, 1, o, s, &tb); /* leaves it built */
            if (r == ST_OK) r = act_step(&b, 0, s); /* eager: errors outside capture, cuBLAS handle made */
            if (r == ST_OK) r = CUS(cudaStreamSynchronize(s));
            if (r == ST_OK) r = st_bench_capture_and_time(act_step, &b, 1, o, s, &tm);
            st_cuda_set_matmul_precision(ST_MATMUL_FP32);
            if (r == ST_OK) r = st_cuda_env_check(&b.env);
            if (r == ST_OK) {
                const double step = tm.median + (b.tab ? tb.median / d->T : 0); /* ms, the build's share added */
                st_bench_add_times(row, &tm);
                cJSON_AddNumberToObject(row, "bar_table", b.tab != NULL);
                cJSON_AddNumberToObject(row, "act_window", b.act_window);
                if (b.tab) cJSON_AddNumberToObject(row, "table_build_ms", tb.median);
                cJSON_AddNumberToObject(row, "median_with_build_ms", step);
                cJSON_AddNumberToObject(row, "env_steps_per_s", n / (step * 1e-3));
                printf("  %7d %5s %9.1f %9.1f %9.1f %12.4g %10.3f %12.1f\n", n, st_bench_precision_name(p),
                       tm.median * 1e3, tm.p10 * 1e3, tm.p90 * 1e3, n / (step * 1e-3), b.tab ? tb.median : 0.0,
                       step * 1e3);
                fflush(stdout);
            } else {
                st_bench_record_error(row, what);
                failed++;
            }
            env_bench_free(&b);
        }
    }
    if (wd) cudaFree(wd);
    if (gd) cudaFree(gd);
    st_bench_setup_free(&su);
    return failed;
}

static int envwin_step(void *ctx, int k, cudaStream_t s) {
    env_bench *b = ctx;
    const st_dims *d = b->d;
    int n = b->n, ws = st_row_width(d);
    if (b->mode != 2) ST_TRY(st_cuda_env_step(&b->env, b->actions[k], &b->out, s));
    if (b->mode == 0 || b->mode == 2)
        ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)b->feat->inst, b->feat->F, b->out.inst,
                                    b->out.bar, b->out.ctx, b->out.ctx_stride, b->win, ws, s));
    if (b->mode == 3) /* the action step's observation: the row index (the env wrote the context itself) */
        ST_TRY(st_cuda_window_feature_rows(n, d->K, b->feat, b->out.inst, b->out.bar, b->feat_row, s));
    return ST_OK;
}

int st_bench_envwin(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "envwin");
    const st_dims *d = &o->d;
    int n = o->envwin_envs;
    printf("\n== envwin: environment step (pre-drawn random actions, %d buffers, one graph each) + window build,\n"
           "   %d environments, median of %d replays after %d warm-up; env_and_row_index: the env step plus what\n"
           "   the action step now builds for its observation (n K feature-row ints; the forward reads the\n"
           "   features through them, in the forward's own time)\n",
           o->sets, n, o->repeats, o->warmup);
    printf("  %-22s %9s %9s %9s %12s %10s\n", "what", "median us", "p10 us", "p90 us", "env steps/s", "obs GB/s");
    fflush(stdout);
    int failed = 0;
    st_bench_setup su;
    int rc = st_bench_setup_init(&su, o, 0);
    cudaStream_t s = su.s;
    env_bench b;
    memset(&b, 0, sizeof b);
    b.d = d, b.feat = &su.feat, b.seed = o->seed;
    if (rc == ST_OK) rc = env_setup(&b, o, n, s);
    int *ha = malloc(sizeof(int) * (size_t)n);
    if (rc == ST_OK && !ha) rc = ST_FAIL(ST_ERR_MEMORY, "out of host memory for the actions");
    for (int k = 0; k < o->sets && rc == ST_OK; k++) {
        st_bench_draw_actions(n, d->A, o->seed, 300 + (uint32_t)k, ha);
        rc = PALLOC(&b.pool, b.actions[k], n);
        if (rc == ST_OK) rc = st_bench_upload(b.actions[k], ha, sizeof(int) * (size_t)n);
    }
    free(ha);
    if (rc == ST_OK) rc = st_bench_settle();
    /* window bytes: features read (F per row) and the row written (F + C);
     * row index bytes: inst and bar read a window, an int written a row */
    double wbytes = (double)n * d->K * (2.0 * d->F + d->C) * sizeof(float);
    double ibytes = (double)n * d->K * sizeof(int) + 2.0 * n * sizeof(int);
    const char *names[4] = {"env_and_window", "env_only", "window_only", "env_and_row_index"};
    for (int mode = 0; mode < 4; mode++) {
        double obytes = mode == 1 ? 0 : mode == 3 ? ibytes : wbytes;
        cJSON *row = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, row);
        cJSON_AddStringToObject(row, "what", names[mode]);
        cJSON_AddNumberToObject(row, "envs", n);
        cJSON_AddNumberToObject(row, "window_bytes", mode == 0 || mode == 2 ? wbytes : 0);
        cJSON_AddNumberToObject(row, "obs_bytes", obytes);
        if (rc != ST_OK) {
            st_bench_record_error(row, names[mode]);
            failed++;
            continue;
        }
        b.mode = mode;
        st_bench_times tm;
        int r = envwin_step(&b, 0, s); /* eager once */
        if (r == ST_OK) r = CUS(cudaStreamSynchronize(s));
        if (r == ST_OK) r = st_bench_capture_and_time(envwin_step, &b, o->sets, o, s, &tm);
        if (r == ST_OK) r = st_cuda_env_check(&b.env);
        if (r == ST_OK) {
            double sec = tm.median * 1e-3, gbs = obytes / sec / 1e9;
            st_bench_add_times(row, &tm);
            cJSON_AddNumberToObject(row, "env_steps_per_s", n / sec);
            cJSON_AddNumberToObject(row, "window_GBps", mode == 0 || mode == 2 ? gbs : 0);
            cJSON_AddNumberToObject(row, "obs_GBps", gbs);
            printf("  %-22s %9.1f %9.1f %9.1f %12.4g %10.1f\n", names[mode], tm.median * 1e3, tm.p10 * 1e3,
                   tm.p90 * 1e3, n / sec, gbs);
            fflush(stdout);
        } else {
            st_bench_record_error(row, names[mode]);
            failed++;
        }
    }
    env_bench_free(&b);
    st_bench_setup_free(&su);
    return failed;
}

#endif
