/* bench_train.c: one PPO training step over n windows, as a CUDA graph per
 * input set (cli/bench.h): window build + forward + PPO loss + zero grads +
 * backward + grad norm + clip + AdamW. */
#include "cli/bench.h"

#ifdef ST_HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_gpu.h"
#include "core/error.h"
#include "core/device.h"
#include "cuda/adamw_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/model_cuda.h"
#include "cuda/ppo_loss_cuda.h"
#include "cuda/window_cuda.h"
#include "model/params.h"
#include "train/train_config.h"

/* ======================================================================= */
/* train                                                                   */

typedef struct {
    int *inst, *bar, *action;
    float *ctx, *old_logp, *adv, *old_value, *ret;
} train_inputs;

typedef struct {
    const st_dims *d;
    int n, sets;
    size_t P;
    const st_cuda_features *feat;
    st_cuda_model model;
    int model_ok;
    st_bench_pool pool;
    float *w, *g, *m, *v;
    unsigned char *decay;
    float *win, *logits, *value, *dlogits, *dvalue;
    int *bar_rows; /* [n K] each row's feature row, where the training bar table is on (else NULL) */
    double *loss_work, *norm_work, *gnorm;
    st_ppo_stats *stats;
    train_inputs in[ST_BENCH_MAX_SETS];
    st_adamw_hparams hp;
    st_ppo_coefs pc;
    double max_norm;
} train_bench;

static int train_step(void *ctx, int k, cudaStream_t s) {
    train_bench *t = ctx;
    const st_dims *d = t->d;
    const train_inputs *in = &t->in[k % t->sets];
    int n = t->n, ws = st_row_width(d);
    ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)t->feat->inst, t->feat->F, in->inst, in->bar,
                                in->ctx, d->C, t->win, ws, s));
    if (t->bar_rows) { /* the trainer's forward_windows: the training bar table */
        ST_TRY(st_cuda_window_feature_rows(n, d->K, t->feat, in->inst, in->bar, t->bar_rows, s));
        ST_TRY(st_cuda_model_forward_train_table(&t->model, n, t->win, ws, t->bar_rows, t->logits, d->A, t->value));
    } else
        ST_TRY(st_cuda_model_forward(&t->model, n, t->win, ws, t->logits, d->A, t->value));
    ST_TRY(st_cuda_ppo_loss(n, d->A, t->logits, d->A, in->action, in->old_logp, in->adv, t->value, in->old_value,
                            in->ret, &t->pc, t->stats, t->dlogits, d->A, t->dvalue, t->loss_work, s));
    BCU(cudaMemsetAsync(t->g, 0, sizeof(float) * t->P, s));
    ST_TRY(st_cuda_model_backward(&t->model, t->dlogits, d->A, t->dvalue, NULL, 0));
    ST_TRY(st_cuda_grad_norm(t->P, t->g, t->gnorm, t->norm_work, s));
    ST_TRY(st_cuda_grad_clip(t->P, t->g, t->gnorm, t->max_norm, s));
    ST_TRY(st_cuda_adamw_step(t->P, t->w, t->g, t->m, t->v, t->decay, &t->hp, 1, s));
    return ST_OK;
}

static void train_free(train_bench *t) {
    if (t->model_ok) st_cuda_model_free(&t->model);
    t->model_ok = 0;
    st_bench_pool_free(&t->pool);
}

/* Buffers, model and `sets` random input sets for n windows. */
static int train_setup(train_bench *t, const st_bench_opts *o, const st_param_table *table, int n, cudaStream_t s) {
    const st_dims *d = t->d;
    st_bench_pool *pl = &t->pool;
    size_t P = t->P;
    int C = d->C, A = d->A;
    t->n = n;
    ST_TRY(PALLOC(pl, t->w, P));
    ST_TRY(PALLOC(pl, t->g, P));
    ST_TRY(PALLOC(pl, t->m, P));
    ST_TRY(PALLOC(pl, t->v, P));
    ST_TRY(PALLOC(pl, t->decay, P));
    ST_TRY(PALLOC(pl, t->win, (size_t)n * d->K * st_row_width(d)));
    ST_TRY(PALLOC(pl, t->logits, (size_t)n * A));
    ST_TRY(PALLOC(pl, t->dlogits, (size_t)n * A));
    ST_TRY(PALLOC(pl, t->value, n));
    ST_TRY(PALLOC(pl, t->dvalue, n));
    ST_TRY(PALLOC(pl, t->loss_work, st_cuda_ppo_loss_work_count(n)));
    ST_TRY(PALLOC(pl, t->norm_work, st_cuda_grad_norm_work_count(P)));
    ST_TRY(PALLOC(pl, t->gnorm, 1));
    ST_TRY(PALLOC(pl, t->stats, 1));
    ST_TRY(st_cuda_adamw_decay_mask(table, t->decay));
    ST_TRY(st_cuda_model_init(&t->model, d, table, n, t->w, t->g));
    t->model_ok = 1;
    t->model.stream = (void *)s;
    if (st_cuda_model_train_table_wanted(d, n, t->feat->rows)) { /* as the trainer decides */
        ST_TRY(PALLOC(pl, t->bar_rows, (size_t)n * d->K));
        ST_TRY(st_cuda_model_train_table_init(&t->model, t->feat->rows, NULL, 0));
    }
    int *hi = malloc(sizeof(int) * (size_t)n * 3);
    float *hf = malloc(sizeof(float) * (size_t)n * (C + 4));
    int rc = hi && hf ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of host memory for the training inputs");
    for (int k = 0; k < t->sets && rc == ST_OK; k++) {
        train_inputs *in = &t->in[k];
        uint32_t salt = 100 + 10 * (uint32_t)k;
        int *inst = hi, *bar = hi + n, *act = hi + 2 * n;
        float *ctx = hf, *olp = hf + (size_t)n * C, *adv = olp + n, *ov = adv + n, *ret = ov + n;
        st_bench_draw_segments(o->market, n, o->segment, o->episode_length, o->seed, salt, inst, bar);
        st_bench_draw_actions(n, A, o->seed, salt + 1, act);
        st_bench_fill_normal(ctx, (size_t)n * C, 0.5, o->seed, salt + 2);
        st_bench_fill_normal(olp, (size_t)n, 0.1, o->seed, salt + 3);
        for (int b = 0; b < n; b++)
            olp[b] += (float)-log((double)A); /* near the initial uniform policy */
        st_bench_fill_normal(adv, (size_t)n, 1.0, o->seed, salt + 4);
        st_bench_fill_normal(ov, (size_t)n, 0.5, o->seed, salt + 5);
        st_bench_fill_normal(ret, (size_t)n, 1.0, o->seed, salt + 6);
        rc = PALLOC(pl, in->inst, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->bar, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->action, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->ctx, (size_t)n * C);
        if (rc == ST_OK) rc = PALLOC(pl, in->old_logp, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->adv, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->old_value, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->ret, n);
        if (rc == ST_OK) rc = st_bench_upload(in->inst, inst, sizeof(int) * n);
        if (rc == ST_OK) rc = st_bench_upload(in->bar, bar, sizeof(int) * n);
        if (rc == ST_OK) rc = st_bench_upload(in->action, act, sizeof(int) * n);
        if (rc == ST_OK) rc = st_bench_upload(in->ctx, ctx, sizeof(float) * (size_t)n * C);
        if (rc == ST_OK) rc = st_bench_upload(in->old_logp, olp, sizeof(float) * n);
        if (rc == ST_OK) rc = st_bench_upload(in->adv, adv, sizeof(float) * n);
        if (rc == ST_OK) rc = st_bench_upload(in->old_value, ov, sizeof(float) * n);
        if (rc == ST_OK) rc = st_bench_upload(in->ret, ret, sizeof(float) * n);
    }
    free(hi);
    free(hf);
    if (rc == ST_OK) rc = st_bench_settle();
    return rc;
}

/* Fresh weights and zero moments (the same start for every precision). */
static int train_reset(train_bench *t, const float *w0, cudaStream_t s) {
    ST_TRY(st_bench_upload(t->w, w0, sizeof(float) * t->P));
    BCU(cudaMemsetAsync(t->m, 0, sizeof(float) * t->P, s));
    BCU(cudaMemsetAsync(t->v, 0, sizeof(float) * t->P, s));
    return st_bench_settle();
}

/* One precision at n windows: an eager step (creates the cuBLAS handle,
 * reports errors outside capture), graphs, timing, finite check. */
static int train_measure(train_bench *t, const st_bench_opts *o, const float *w0, cudaStream_t s, st_bench_times *tm,
                         double *loss, double *gnorm) {
    ST_TRY(train_reset(t, w0, s));
    ST_TRY(train_step(t, 0, s));
    BCU(cudaStreamSynchronize(s));
    ST_TRY(st_bench_capture_and_time(train_step, t, t->sets, o, s, tm));
    st_ppo_stats st;
    BCU(cudaMemcpy(&st, t->stats, sizeof st, cudaMemcpyDeviceToHost));
    BCU(cudaMemcpy(gnorm, t->gnorm, sizeof *gnorm, cudaMemcpyDeviceToHost));
    *loss = st.loss;
    ST_REQUIRE(isfinite(st.loss) && isfinite(*gnorm), ST_ERR_NUMERIC,
               "training step at %d windows: non-finite loss %g or gradient norm %g after the timed replays", t->n,
               st.loss, *gnorm);
    return ST_OK;
}

int st_bench_train(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "train");
    const st_dims *d = &o->d;
    printf("\n== train: window build + forward + PPO loss + zero grads + backward + grad norm + clip + AdamW;\n"
           "   one CUDA graph per input set (%d sets, rotated), median of %d replays after %d warm-up;\n"
           "   the windows a minibatch of segments of %d steps of one environment (--segment)\n",
           o->sets, o->repeats, o->warmup, o->segment);
    printf("  %7s %5s %9s %9s %9s %11s %8s %9s %9s %9s\n", "windows", "prec", "median ms", "p10 ms", "p90 ms",
           "windows/s", "TFLOP/s", "GB/s est", "held GiB", "used GiB");
    fflush(stdout);
    int failed = 0;
    st_train_config cfg;
    memset(&cfg, 0, sizeof cfg);
    st_bench_setup su;
    memset(&su, 0, sizeof su);
    int rc = st_train_config_default(&cfg, o->preset);
    if (rc == ST_OK) cfg.dims = *d;
    if (rc == ST_OK) rc = st_bench_setup_init(&su, o, 1);
    const st_param_table *table = &su.table;
    const float *w0 = su.w0;
    cudaStream_t s = su.s;
    if (rc != ST_OK) {
        st_bench_record_error(cJSON_AddObjectToObject(out, "train_setup"), "train setup");
        failed++;
    }
    for (int i = 0; i < o->windows.n && rc == ST_OK; i++) {
        int n = o->windows.v[i];
        train_bench t;
        memset(&t, 0, sizeof t);
        t.d = d, t.sets = o->sets, t.P = table->total, t.feat = &su.feat;
        t.hp = (st_adamw_hparams){cfg.lr, cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay};
        t.pc = (st_ppo_coefs){cfg.clip, cfg.value_clip, cfg.vf_coef, cfg.ent_coef};
        t.max_norm = cfg.max_grad_norm;
        size_t free0 = st_bench_mem_free();
        int r = train_setup(&t, o, table, n, s);
        char setup_error[512] = "";
        if (r != ST_OK) snprintf(setup_error, sizeof setup_error, "%s", st_last_error());
        if (r == ST_OK)
            printf("  %7d windows: the VSN's per-variable GRNs %s\n", n,
                   t.bar_rows ? "once a distinct bar (the training bar table)" : "once a window row");
        st_bench_cost cost = st_bench_train_cost(d, n, table->total);
        double held = (double)t.pool.bytes + (double)(t.model_ok ? t.model.arena_bytes : 0) +
                      (double)(t.model_ok ? st_cuda_model_train_table_bytes(&t.model) : 0) +
                      st_bench_features_bytes(o->market);
        for (int k = 0; k < o->precision.n; k++) {
            int p = o->precision.v[k];
            cJSON *row = st_bench_row(arr, "windows", n, p);
            cJSON_AddNumberToObject(row, "sets", o->sets);
            cJSON_AddNumberToObject(row, "train_table", t.bar_rows != NULL);
            cJSON_AddNumberToObject(row, "segment", o->segment);
            char what[64];
            snprintf(what, sizeof what, "train %d windows %s", n, st_bench_precision_name(p));
            if (r != ST_OK) {
                st_fail(__FILE__, __LINE__, r, "setup of %d windows: %s", n, setup_error); /* one message per row */
                st_bench_record_error(row, what);
                failed++;
                continue;
            }
            st_bench_times tm;
            double loss = NAN, gn = NAN;
            st_cuda_set_matmul_precision((st_matmul_precision)p);
            int e = train_measure(&t, o, w0, s, &tm, &loss, &gn);
            st_cuda_set_matmul_precision(ST_MATMUL_FP32);
            size_t free1 = st_bench_mem_free();
            if (e != ST_OK) {
                st_bench_record_error(row, what);
                failed++;
                continue;
            }
            double sec = tm.median * 1e-3, used = free0 > free1 ? (double)(free0 - free1) : 0;
            st_bench_add_times(row, &tm);
            cJSON_AddNumberToObject(row, "windows_per_s", n / sec);
            cJSON_AddNumberToObject(row, "flops", cost.flops);
            cJSON_AddNumberToObject(row, "bytes_est", cost.bytes);
            cJSON_AddNumberToObject(row, "TFLOPs", cost.flops / sec / 1e12);
            cJSON_AddNumberToObject(row, "GBps_est", cost.bytes / sec / 1e9);
            cJSON_AddNumberToObject(row, "activation_bytes", cost.act_bytes);
            cJSON_AddNumberToObject(row, "held_bytes", held);
            cJSON_AddNumberToObject(row, "memgetinfo_delta_bytes", used);
            cJSON_AddNumberToObject(row, "loss", loss);
            cJSON_AddNumberToObject(row, "grad_norm", gn);
            printf("  %7d %5s %9.3f %9.3f %9.3f %11.4g %8.2f %9.1f %9.2f %9.2f\n", n, st_bench_precision_name(p),
                   tm.median, tm.p10, tm.p90, n / sec, cost.flops / sec / 1e12, cost.bytes / sec / 1e9,
                   st_bench_gib(held), st_bench_gib(used));
            fflush(stdout);
        }
        train_free(&t);
        (void)cudaGetLastError();
    }
    st_bench_setup_free(&su);
    st_train_config_free(&cfg);
    return failed;
}

#endif
