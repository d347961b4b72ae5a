/* trainer_cuda.c: PPO with the whole step on the GPU through three CUDA
 * graphs (train/trainer_cuda.h). Host C over the CUDA C APIs: this file
 * allocates, captures the graphs, writes the control block, replays, and
 * reads the statistics back once per update. Every launch goes to one
 * stream (t->stream), so stream order is the only ordering needed. */
#include "train/trainer_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "core/error.h"

#ifdef ST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/host_check.h"

#include "core/philox.h"
#include "cuda/adamw_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/ppo_loss_cuda.h"
#include "cuda/rollout_cuda.h"
#include "cuda/select_cuda.h"
#include "dist/dist.h"
#include "train/schedule.h"
#include "train/trainer_cuda_dist.h"
#include "trace/trace.h"


#define DALLOC(p, n) ST_CU(cudaMalloc((void **)&(p), sizeof *(p) * ((size_t)(n) > 0 ? (size_t)(n) : 1)))
#define HALLOC(p, n) ST_CU(cudaMallocHost((void **)&(p), sizeof *(p) * ((size_t)(n) > 0 ? (size_t)(n) : 1)))

enum { G_ACT = 0, G_POST = 1, G_TRAIN = 2, G_OPT = 3 };
enum { SCAN_NONE = 0, SCAN_SENTINEL = 1, SCAN_FULL = 2 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static cudaStream_t stream_of(const st_cuda_trainer *t) { return (cudaStream_t)t->stream; }

static int up(const st_cuda_trainer *t, void *dst, const void *src, size_t bytes) {
    ST_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(t)));
    ST_CU(cudaStreamSynchronize(stream_of(t)));
    return ST_OK;
}

static int down(const st_cuda_trainer *t, void *dst, const void *src, size_t bytes) {
    ST_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(t)));
    ST_CU(cudaStreamSynchronize(stream_of(t)));
    return ST_OK;
}

/* ---- the tracer's scans -------------------------------------------------------------- */

/* The labels of the sentinel level: the scalars the CPU guard checks, and
 * the weights and moments after each optimiser step. */
static int sentinel_label(const st_label *l) {
    switch (l->kind) {
    case ST_TK_REWARD:
    case ST_TK_LOSS:
    case ST_TK_GRAD_NORM:
        return 1;
    case ST_TK_VALUE:
        return l->phase == ST_PHASE_ACT;
    case ST_TK_PARAM:
    case ST_TK_ADAM_M:
    case ST_TK_ADAM_V:
        return l->phase == ST_PHASE_OPTIM;
    default:
        return 0;
    }
}

/* Whether label id is scanned in graphs of the level being captured: all
 * at full, the sentinel set at sentinel, and the injected label at any
 * level (an injection fires even with the tracer off, as on the CPU). */
static int scanned(const st_cuda_trainer *t, int id) {
    if (!t->trace || id < 0) return 0;
    if (t->trace->inject.armed && t->trace->inject.label == id) return 1;
    if (t->scan_level == SCAN_FULL) return 1;
    return t->scan_level == SCAN_SENTINEL && sentinel_label(&t->trace->labels.l[id]);
}

static int scan_items(st_cuda_trainer *t, int n, const st_cuda_scan_item *items) {
    return n > 0 ? st_cuda_trace_scan(&t->dtrace, n, items, t->stream) : ST_OK;
}

static int scan_label(st_cuda_trainer *t, int phase, int kind, int index, const void *p, int64_t rows, int64_t width,
                      int64_t stride, int f64) {
    if (!t->trace) return ST_OK;
    int id = st_labels_slot(&t->trace->labels, (st_trace_phase)phase, (st_trace_kind)kind, index);
    if (!scanned(t, id)) return ST_OK;
    st_cuda_scan_item it = {id, f64, p, rows, width, stride};
    return scan_items(t, 1, &it);
}

/* The model's hook (cuda/model_cuda.h). */
static int model_scan(void *ctx, int phase, int kind, int index, const float *p, int64_t rows, int64_t width,
                      int64_t stride) {
    return scan_label((st_cuda_trainer *)ctx, phase, kind, index, p, rows, width, stride, 0);
}

/* Every parameter-shaped tensor of a flat device buffer as labels (phase, kind, i), in one batch. */
static int scan_params(st_cuda_trainer *t, int phase, int kind, const float *base) {
    if (!t->trace) return ST_OK;
    const st_param_table *pt = &t->host.table;
    st_cuda_scan_item items[pt->n > 0 ? pt->n : 1];
    int n = 0;
    for (int i = 0; i < pt->n; i++) {
        int id = st_labels_slot(&t->trace->labels, (st_trace_phase)phase, (st_trace_kind)kind, i);
        if (!scanned(t, id)) continue;
        const st_label *l = &t->trace->labels.l[id];
        items[n++] = (st_cuda_scan_item){id, 0, base + pt->p[i].offset, l->rows, l->width, l->stride};
    }
    return scan_items(t, n, items);
}

/* ---- the three graph bodies ------------------------------------------------------------ */

/* Whether label (phase, kind, index) is scanned in the graphs being captured. */
static int label_scanned(const st_cuda_trainer *t, int phase, int kind, int index) {
    return t->trace &&
           scanned(t, st_labels_slot(&t->trace->labels, (st_trace_phase)phase, (st_trace_kind)kind, index));
}

/* The forward of n device (instrument, bar, context) triples into
 * t->logits [n, A] and t->value [n], scans under phase. The training
 * phase builds the windows and runs the window forward (its backward needs
 * them), through the training bar table where it has one (mb_rows,
 * alloc_train_table). The action phase builds none: the windows'
 * feature-row index (n K ints), then the forward from it and ctx
 * (st_cuda_model_forward_rows), through the bar table once run_update has
 * built it (the same bits with and without). Its act_window label has no
 * buffer of its own any more: where that label is scanned (full mode, or
 * an injection at it) the window is built here for the scan alone, the
 * same values the forward reads (an injection into it trips the label but
 * reaches no later one). */
static int forward_windows(st_cuda_trainer *t, int phase, int n, const int *inst, const int *bar, const float *ctx) {
    const st_dims *d = &t->host.cfg.dims;
    int ws = st_row_width(d);
    int act = phase == ST_PHASE_ACT;
    if (!act || label_scanned(t, phase, ST_TK_WINDOW, 0)) {
        ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)t->feat.inst, t->feat.F, inst, bar,
                                    ctx, d->C, t->win, ws, t->stream));
        ST_TRY(scan_label(t, phase, ST_TK_WINDOW, 0, t->win, (int64_t)n * d->K, ws, ws, 0));
    }
    t->model.scan_phase = phase;
    /* each window row's feature row: the action step's observation, or the training table's bars */
    int *rows = act ? t->act_row : t->mb_rows;
    if (rows) ST_TRY(st_cuda_window_feature_rows(n, d->K, &t->feat, inst, bar, rows, t->stream));
    if (act)
        return st_cuda_model_forward_rows(&t->model, n, t->feat.data, t->feat.F, rows, ctx, d->C,
                                          t->tab_built ? t->tab : NULL, t->logits, d->A, t->value);
    if (rows) return st_cuda_model_forward_train_table(&t->model, n, t->win, ws, rows, t->logits, d->A, t->value);
    return st_cuda_model_forward(&t->model, n, t->win, ws, t->logits, d->A, t->value);
}

/* This rank's B = t->Bl instances step; the rollout slot t of the rank's
 * part of the rollout (t->roff) keeps them; the draw index advances by the
 * global B, so instance b draws what instance b0 + b of one GPU draws. */
static int body_act(st_cuda_trainer *t) {
    const st_dims *d = &t->host.cfg.dims;
    int B = t->Bl, C = d->C;
    size_t o = (size_t)t->roff;
    const st_env *e = &t->env.dev;
    /* the context is scanned (and an injection lands) before the rollout keeps its copy, as on the CPU */
    ST_TRY(scan_label(t, ST_PHASE_ENV, ST_TK_CONTEXT, 0, t->ctx, B, C, C, 0));
    ST_TRY(st_cuda_step_record(B, C, t->ctrl, e->inst, e->bar, t->ctx, C, t->r_inst + o, t->r_bar + o,
                               t->r_ctx + o * C, t->stream));
    ST_TRY(forward_windows(t, ST_PHASE_ACT, B, e->inst, e->bar, t->ctx));
    ST_TRY(st_cuda_select_actions(B, d->A, t->logits, d->A, (uint64_t)t->host.cfg.seed, ST_STREAM_ACTION,
                                  &t->ctrl->draw_base, 0, t->a_action, t->a_logp, t->stream));
    ST_TRY(scan_label(t, ST_PHASE_ACT, ST_TK_LOGP, 0, t->a_logp, 1, B, B, 0));
    st_cuda_env_out out = {.reward = t->a_reward, .done = t->a_done, .ep_R = t->a_epR, .ctx = t->ctx, .ctx_stride = C};
    ST_TRY(st_cuda_env_step(&t->env, t->a_action, &out, t->stream));
    ST_TRY(scan_label(t, ST_PHASE_ENV, ST_TK_REWARD, 0, t->a_reward, 1, B, B, 0));
    ST_TRY(st_cuda_step_commit(B, t->ctrl, t->a_action, t->a_logp, t->value, t->a_reward, t->a_done, t->a_epR,
                               t->r_action + o, t->r_logp + o, t->r_value + o, t->r_reward + o, t->r_done + o,
                               t->r_epR + o, t->stream));
    return st_cuda_step_advance_act(d->B, t->ctrl, t->stream);
}

/* The rollout's statistics over all N samples (every rank's, once gathered). */
static int rollout_stats(st_cuda_trainer *t) {
    return st_cuda_rollout_stats_compute(t->host.N, t->r_reward, t->r_value, t->r_done, t->r_epR, t->ret, t->rstats,
                                         t->stats_work, t->stream);
}

static int body_post(st_cuda_trainer *t) {
    const st_train_config *c = &t->host.cfg;
    const st_dims *d = &c->dims;
    int B = t->Bl, T = d->T;
    size_t o = (size_t)t->roff;
    const st_env *e = &t->env.dev;
    ST_TRY(st_cuda_step_set_sub(t->ctrl, T, t->stream)); /* the bootstrap forward is act pass T */
    ST_TRY(forward_windows(t, ST_PHASE_ACT, B, e->inst, e->bar, t->ctx));
    ST_CU(cudaMemcpyAsync(t->last_value, t->value, sizeof(float) * B, cudaMemcpyDeviceToDevice, stream_of(t)));
    ST_TRY(st_cuda_gae(T, B, t->r_reward + o, t->r_value + o, t->r_done + o, t->last_value, c->gamma, c->gae_lambda,
                       t->adv + o, t->ret + o, t->stream));
    ST_TRY(st_cuda_step_set_sub(t->ctrl, -1, t->stream));
    ST_TRY(scan_label(t, ST_PHASE_TRAIN, ST_TK_GAE_ADV, 0, t->adv + o, T, B, B, 0));
    ST_TRY(scan_label(t, ST_PHASE_TRAIN, ST_TK_GAE_RET, 0, t->ret + o, T, B, B, 0));
    /* with ranks the statistics wait for the gathered rollout (run_update) */
    return t->dist ? ST_OK : rollout_stats(t);
}

/* The (averaged) gradient's scans, global norm, the clip and AdamW. */
static int body_opt(st_cuda_trainer *t) {
    const st_train_config *c = &t->host.cfg;
    size_t P = t->host.table.total;
    st_adamw_hparams hp = {0, c->beta1, c->beta2, c->adam_eps, c->weight_decay};
    ST_TRY(scan_params(t, ST_PHASE_GRAD, ST_TK_PARAM, t->g));
    ST_TRY(st_cuda_grad_norm(P, t->g, t->gnorm1, t->norm_work, t->stream));
    ST_TRY(scan_label(t, ST_PHASE_GRAD, ST_TK_GRAD_NORM, 0, t->gnorm1, 1, 1, 1, 1));
    ST_TRY(st_cuda_adamw_clip_step(P, t->w, t->g, t->adam_m, t->adam_v, t->decay, &hp, c->max_grad_norm, t->gnorm1,
                                   t->ctrl, t->stream));
    ST_TRY(scan_params(t, ST_PHASE_OPTIM, ST_TK_ADAM_M, t->adam_m));
    ST_TRY(scan_params(t, ST_PHASE_OPTIM, ST_TK_ADAM_V, t->adam_v));
    ST_TRY(scan_params(t, ST_PHASE_OPTIM, ST_TK_PARAM, t->w));
    return st_cuda_step_commit_train(t->ctrl, t->stats1, t->gnorm1, t->stats, t->gnorm, t->stream);
}

/* Minibatch k up to its gradient: the whole global minibatch is gathered
 * (and its advantages normalised) on every rank; this rank's windows are
 * its ml = mb / world of them from rank * ml (all of them on one GPU). */
static int body_train(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    const st_train_config *c = &h->cfg;
    const st_dims *d = &c->dims;
    int mb = h->mb, n = t->ml;
    size_t o = (size_t)t->rank * (size_t)n;
    size_t P = h->table.total;
    st_ppo_coefs pc = {c->clip, c->value_clip, c->vf_coef, c->ent_coef};
    ST_TRY(st_cuda_step_begin_train(t->ctrl, t->stream));
    ST_TRY(st_cuda_rollout_gather_at(mb, d->C, t->perm, &t->ctrl->k, t->r_inst, t->r_bar, t->r_action, t->r_ctx,
                                     t->r_logp, t->r_value, t->ret, t->adv, t->mb_inst, t->mb_bar, t->mb_action,
                                     t->mb_ctx, t->mb_logp, t->mb_value, t->mb_ret, t->mb_adv, t->gather_work,
                                     t->stream));
    ST_TRY(scan_label(t, ST_PHASE_TRAIN, ST_TK_MB_ADV, 0, t->mb_adv, 1, mb, mb, 0));
    ST_TRY(forward_windows(t, ST_PHASE_TRAIN, n, t->mb_inst + o, t->mb_bar + o, t->mb_ctx + o * d->C));
    ST_TRY(st_cuda_ppo_loss(n, d->A, t->logits, d->A, t->mb_action + o, t->mb_logp + o, t->mb_adv + o, t->value,
                            t->mb_value + o, t->mb_ret + o, &pc, t->stats1, t->dlogits, d->A, t->dvalue, t->loss_work,
                            t->stream));
    ST_TRY(scan_label(t, ST_PHASE_TRAIN, ST_TK_LOSS, 0, t->stats1, 1, 6, 6, 1));
    ST_TRY(scan_label(t, ST_PHASE_BWD, ST_TK_DLOGITS, 0, t->dlogits, n, d->A, d->A, 0));
    ST_TRY(scan_label(t, ST_PHASE_BWD, ST_TK_DVALUE, 0, t->dvalue, 1, n, n, 0));
    ST_CU(cudaMemsetAsync(t->g, 0, sizeof(float) * P, stream_of(t)));
    ST_TRY(st_cuda_model_backward(&t->model, t->dlogits, d->A, t->dvalue, NULL, 0));
    /* with ranks the gradients are averaged between this graph and the next (run_update) */
    return t->dist ? ST_OK : body_opt(t);
}

/* ---- capture and replay ---------------------------------------------------------------- */

static void destroy_graphs(st_cuda_trainer *t) {
    for (int l = 0; l < 3; l++)
        for (int g = 0; g < 4; g++)
            if (t->exec[l][g]) {
                cudaGraphExecDestroy((cudaGraphExec_t)t->exec[l][g]);
                t->exec[l][g] = NULL;
            }
}

/* Captures body into graph g of scan level `level` (once). The body's
 * launches are recorded, not run; a failure inside ends the capture. */
static int capture(st_cuda_trainer *t, int level, int g) {
    if (t->exec[level][g]) return ST_OK;
    static int (*const bodies[4])(st_cuda_trainer *) = {body_act, body_post, body_train, body_opt};
    st_cuda_set_matmul_precision(t->bf16 ? ST_MATMUL_BF16 : ST_MATMUL_FP32);
    t->scan_level = level;
    ST_CU(cudaStreamBeginCapture(stream_of(t), cudaStreamCaptureModeThreadLocal));
    int rc = bodies[g](t);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(stream_of(t), &graph);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    if (rc != ST_OK) {
        if (graph) cudaGraphDestroy(graph);
        return rc;
    }
    static const char *const names[4] = {"action-step", "post-rollout", "training-step", "optimiser-step"};
    if (e != cudaSuccess) return ST_FAIL(ST_ERR_DEVICE, "capturing the %s graph: %s", names[g], cudaGetErrorString(e));
    cudaGraphExec_t exec = NULL;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) return ST_FAIL(ST_ERR_DEVICE, "instantiating a CUDA graph: %s", cudaGetErrorString(e));
    t->exec[level][g] = exec;
    return ST_OK;
}

static int launch(st_cuda_trainer *t, int level, int g) {
    ST_TRY(capture(t, level, g));
    ST_CU(cudaGraphLaunch((cudaGraphExec_t)t->exec[level][g], stream_of(t)));
    return ST_OK;
}

/* ---- setup ----------------------------------------------------------------------------- */

static int alloc_device(st_cuda_trainer *t) {
    const st_train_config *c = &t->host.cfg;
    const st_dims *d = &c->dims;
    size_t P = t->host.table.total;
    int N = t->host.N, B = t->Bl, mw = t->mw, steps = c->epochs * c->minibatches;
    int mbw = t->host.mb > mw ? t->host.mb : mw; /* the gathered minibatch is the global one */
    DALLOC(t->ctrl, 1);
    HALLOC(t->h_ctrl, 1);
    DALLOC(t->w, P);
    DALLOC(t->g, P);
    DALLOC(t->adam_m, P);
    DALLOC(t->adam_v, P);
    DALLOC(t->decay, P);
    DALLOC(t->r_inst, N);
    DALLOC(t->r_bar, N);
    DALLOC(t->r_action, N);
    DALLOC(t->perm, (size_t)c->epochs * N);
    DALLOC(t->r_ctx, (size_t)N * d->C);
    DALLOC(t->r_logp, N);
    DALLOC(t->r_value, N);
    DALLOC(t->r_reward, N);
    DALLOC(t->r_epR, N);
    DALLOC(t->r_done, N);
    DALLOC(t->adv, N);
    DALLOC(t->ret, N);
    DALLOC(t->ctx, (size_t)B * d->C);
    DALLOC(t->a_action, B);
    DALLOC(t->a_logp, B);
    DALLOC(t->a_reward, B);
    DALLOC(t->a_epR, B);
    DALLOC(t->a_done, B);
    DALLOC(t->last_value, B);
    DALLOC(t->mb_inst, mbw);
    DALLOC(t->mb_bar, mbw);
    DALLOC(t->mb_action, mbw);
    DALLOC(t->mb_ctx, (size_t)mbw * d->C);
    DALLOC(t->mb_logp, mbw);
    DALLOC(t->mb_value, mbw);
    DALLOC(t->mb_ret, mbw);
    DALLOC(t->mb_adv, mbw);
    DALLOC(t->win, (size_t)mw * d->K * st_row_width(d));
    DALLOC(t->act_row, (size_t)B * d->K);
    DALLOC(t->logits, (size_t)mw * d->A);
    DALLOC(t->value, mw);
    DALLOC(t->dlogits, (size_t)mw * d->A);
    DALLOC(t->dvalue, mw);
    DALLOC(t->loss_work, st_cuda_ppo_loss_work_count(t->host.mb));
    DALLOC(t->norm_work, st_cuda_grad_norm_work_count(P));
    DALLOC(t->gather_work, st_cuda_rollout_gather_work_count());
    DALLOC(t->stats_work, st_cuda_rollout_stats_work_count(N));
    DALLOC(t->stats1, 1);
    DALLOC(t->stats, steps);
    DALLOC(t->gnorm1, 1);
    DALLOC(t->gnorm, steps);
    DALLOC(t->rstats, 1);
    HALLOC(t->h_perm, (size_t)c->epochs * N);
    HALLOC(t->h_stats, steps);
    HALLOC(t->h_gnorm, steps);
    HALLOC(t->h_rstats, 1);
    if (t->dist) DALLOC(t->g_word, (size_t)t->world * 4);
    return ST_OK;
}

/* The device bytes a trainer of cfg needs, roughly (model activations
 * dominate), against the free memory: a clear message instead of an
 * out-of-memory error deep in a cudaMalloc. */
static int check_memory(const st_cuda_trainer *t) {
    const st_train_config *c = &t->host.cfg;
    const st_dims *d = &c->dims;
    double act = (double)st_cuda_model_activation_bytes(d, t->mw);
    double per_sample = 4.0 * (12 + d->C) + 4.0 * c->epochs;
    double need = act + per_sample * t->host.N + 4.0 * (double)t->mw * d->K * st_row_width(d) +
                  20.0 * (double)t->host.table.total;
    size_t free_b = 0, total_b = 0;
    ST_CU(cudaMemGetInfo(&free_b, &total_b));
    double gib = 1024.0 * 1024.0 * 1024.0;
    ST_REQUIRE(need < 0.95 * (double)free_b, ST_ERR_INPUT,
               "the GPU trainer needs about %.1f GiB (activations of a minibatch of %d windows: %.1f GiB) but the GPU "
               "has %.1f GiB free: raise --minibatches (now %d) or lower --batch / --rollout",
               need / gib, t->host.mb, act / gib, (double)free_b / gib, c->minibatches);
    return ST_OK;
}

/* The action step's bar table ([bars, F Dv] floats, the market's bars):
 * allocated where the model can use one (st_cuda_model_table_fits), the
 * switch is on and it takes at most a quarter of the free memory and 8 GiB
 * (else the action step runs the whole VSN a window row over the gathered
 * features; the results are the same bits either way). */
static int bar_table_on = 1;
void st_cuda_trainer_set_bar_table(int on) { bar_table_on = on != 0; }

static int alloc_bar_table(st_cuda_trainer *t) {
    const st_dims *d = &t->host.cfg.dims;
    if (!bar_table_on || !st_cuda_model_table_fits(&t->model) || t->feat.rows <= 0 || t->feat.rows >= INT_MAX / d->K)
        return ST_OK;
    size_t free_b = 0, total_b = 0;
    ST_CU(cudaMemGetInfo(&free_b, &total_b));
    double bytes = 4.0 * (double)t->feat.rows * d->F * d->Dv;
    if (bytes > 0.25 * (double)free_b || bytes > 8.0 * 1024 * 1024 * 1024) return ST_OK;
    DALLOC(t->tab, (size_t)t->feat.rows * d->F * d->Dv);
    return ST_OK;
}

/* The training step's bar table where st_cuda_model_train_table_wanted
 * says so, lent the action step's table where there is one (the training
 * step overwrites it; run_update builds it again before each rollout).
 * Decided from the global minibatch (h->mb), not this rank's ml = mb /
 * world windows: every rank count takes the same path (the same
 * reductions, per bar or per row), as one GPU does, so test_cuda_dist's
 * N ranks against one GPU compare like with like. */
static int alloc_train_table(st_cuda_trainer *t) {
    const st_dims *d = &t->host.cfg.dims;
    if (!st_cuda_model_train_table_wanted(d, t->host.mb, t->feat.rows)) return ST_OK;
    DALLOC(t->mb_rows, (size_t)t->mw * d->K);
    size_t tab_floats = t->tab ? (size_t)t->feat.rows * d->F * d->Dv : 0;
    return st_cuda_model_train_table_init(&t->model, t->feat.rows, t->tab, tab_floats);
}

int st_cuda_trainer_init(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m) {
    return st_cuda_trainer_init_dist(t, cfg, m, NULL);
}

int st_cuda_trainer_init_dist(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m,
                              struct st_dist *dist) {
    memset(t, 0, sizeof *t);
    ST_REQUIRE(st_cuda_devices() > 0, ST_ERR_DEVICE, "no CUDA device: %s", st_cuda_describe());
    ST_TRY(st_cuda_dist_check(cfg, dist));
    ST_TRY(st_trainer_init_host(&t->host, cfg, m));
    const st_train_config *c = &t->host.cfg;
    const st_dims *d = &c->dims;
    t->dist = dist && dist->world > 1 ? dist : NULL;
    t->world = t->dist ? dist->world : 1;
    t->rank = t->dist ? dist->rank : 0;
    t->Bl = d->B / t->world;
    t->b0 = t->rank * t->Bl;
    t->Nl = d->T * t->Bl;
    t->roff = t->rank * t->Nl;
    t->ml = t->host.mb / t->world;
    t->bf16 = strcmp(c->precision, "bf16") == 0;
    t->mw = t->Bl > t->ml ? t->Bl : t->ml;
    ST_TRY(check_memory(t));
    cudaStream_t s = NULL;
    ST_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    t->stream = s;
    ST_TRY(alloc_device(t));
    size_t P = t->host.table.total;
    ST_TRY(st_cuda_features_upload(m, &t->feat));
    ST_REQUIRE(t->feat.rows < INT_MAX, ST_ERR_INPUT,
               "the GPU trainer's action step names each window row by its feature row as an int: the market's %ld "
               "bars (all instruments) must stay below 2^31",
               t->feat.rows);
    st_env_config ec = t->host.env.cfg;
    ST_TRY(st_cuda_env_create(&t->env, m, t->Bl, &ec));
    t->env.dev.b0 = t->b0;
    ST_TRY(st_cuda_trainer_push_host(t)); /* weights, zero moments, the reset environments and their context */
    ST_CU(cudaMemsetAsync(t->g, 0, sizeof(float) * P, s));
    ST_TRY(st_cuda_adamw_decay_mask(&t->host.table, t->decay));
    ST_TRY(st_cuda_model_init(&t->model, d, &t->host.table, t->mw, t->w, t->g));
    t->model.stream = t->stream;
    t->model.scan = model_scan;
    t->model.scan_ctx = t;
    ST_TRY(alloc_bar_table(t));
    ST_TRY(alloc_train_table(t));
    /* One eager forward before any capture: the cuBLAS handle and its
     * workspace are made on first use, which a capture cannot record. */
    ST_TRY(forward_windows(t, ST_PHASE_ACT, t->Bl, t->env.dev.inst, t->env.dev.bar, t->ctx));
    ST_CU(cudaStreamSynchronize(s));
    return ST_OK;
}

static void free_snapshot(st_cuda_trainer *t) {
    void *bufs[] = {t->snap_w, t->snap_m, t->snap_v, t->snap_ctx, t->snap_env};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    t->snap_w = t->snap_m = t->snap_v = t->snap_ctx = NULL;
    t->snap_env = NULL;
}

void st_cuda_trainer_free(st_cuda_trainer *t) {
    destroy_graphs(t);
    if (t->trace) st_cuda_trace_free(&t->dtrace);
    free_snapshot(t);
    if (t->model.views || t->model.arena) st_cuda_model_free(&t->model);
    if (t->feat.data || t->feat.inst) st_cuda_features_free(&t->feat);
    if (t->env.dev.block) st_cuda_env_free(&t->env);
    void *bufs[] = {t->ctrl,      t->w,        t->g,         t->adam_m,    t->adam_v,   t->decay,    t->r_inst,
                    t->r_bar,     t->r_action, t->perm,      t->r_ctx,     t->r_logp,   t->r_value,  t->r_reward,
                    t->r_epR,     t->r_done,   t->adv,       t->ret,       t->ctx,      t->a_action, t->a_logp,
                    t->a_reward,  t->a_epR,    t->a_done,    t->last_value, t->mb_inst, t->mb_bar,   t->mb_action,
                    t->mb_ctx,    t->mb_logp,  t->mb_value,  t->mb_ret,    t->mb_adv,   t->win,      t->logits,
                    t->value,     t->dlogits,  t->dvalue,    t->loss_work, t->norm_work, t->gather_work,
                    t->stats_work, t->stats1,  t->stats,     t->gnorm1,    t->gnorm,    t->rstats,
                    t->g_env,     t->g_ctx,    t->g_word,    t->tab,      t->act_row,
                    t->mb_rows};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    void *pinned[] = {t->h_ctrl, t->h_perm, t->h_stats, t->h_gnorm, t->h_rstats};
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
        if (pinned[i]) cudaFreeHost(pinned[i]);
    if (t->stream) cudaStreamDestroy(stream_of(t));
    st_trainer_free(&t->host);
    memset(t, 0, sizeof *t);
}

/* ---- the update ------------------------------------------------------------------------ */

/* Means of the last epoch's losses and of every pre-clip norm, from the
 * pinned readback; ST_ERR_NUMERIC on the first non-finite one unless a
 * tracer in sentinel or full mode is attached (it decides). */
static int collect_stats(st_cuda_trainer *t, st_update_stats *s) {
    const st_train_config *c = &t->host.cfg;
    int E = c->epochs, M = c->minibatches, n = E * M;
    st_ppo_stats acc = {0};
    double gn_sum = 0;
    for (int k = 0; k < n; k++) {
        const st_ppo_stats *ls = &t->h_stats[k];
        ST_REQUIRE((t->trace && t->trace->mode != ST_TRACE_OFF) || (isfinite(t->h_gnorm[k]) && isfinite(ls->loss)),
                   ST_ERR_NUMERIC,
                   "update %ld epoch %d minibatch %d (GPU): non-finite loss %g or gradient norm %g",
                   t->host.update + 1, k / M, k % M, ls->loss, t->h_gnorm[k]);
        gn_sum += t->h_gnorm[k];
        if (k / M != E - 1) continue;
        acc.loss += ls->loss, acc.policy += ls->policy, acc.value += ls->value;
        acc.entropy += ls->entropy, acc.approx_kl += ls->approx_kl, acc.clipfrac += ls->clipfrac;
    }
    double inv = 1.0 / M;
    s->loss = (st_ppo_stats){acc.loss * inv, acc.policy * inv, acc.value * inv, acc.entropy * inv,
                             acc.approx_kl * inv, acc.clipfrac * inv};
    s->grad_norm = gn_sum / n;
    const st_cuda_rollout_stats *r = t->h_rstats;
    s->mean_reward = r->reward_sum / t->host.N;
    s->mean_value = r->value_sum / t->host.N;
    s->episodes = (int)r->episodes;
    s->mean_episode_R = r->episodes ? r->ep_R_sum / (double)r->episodes : NAN;
    s->explained_var = r->explained_var;
    return ST_OK;
}

/* One update's graphs at scan level `level`, and the readback. */
static int run_update(st_cuda_trainer *t, int level, double lr) {
    st_trainer *h = &t->host;
    const st_train_config *c = &h->cfg;
    const st_dims *d = &c->dims;
    int T = d->T, B = d->B, E = c->epochs, M = c->minibatches, N = h->N; /* global B and N */
    cudaStream_t s = stream_of(t);
    *t->h_ctrl = (st_cuda_ctrl){.update = h->update,
                                .t = 0,
                                .k = 0,
                                .sub = -1,
                                .draw_base = (uint64_t)h->update * (uint64_t)T * (uint64_t)B + (uint64_t)t->b0,
                                .lr = lr,
                                .opt_step = h->update * E * M + 1};
    ST_CU(cudaMemcpyAsync(t->ctrl, t->h_ctrl, sizeof *t->ctrl, cudaMemcpyHostToDevice, s));
    if (t->trace) {
        ST_TRY(scan_params(t, ST_PHASE_STEP_ENTRY, ST_TK_PARAM, t->w));
        ST_TRY(scan_params(t, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_M, t->adam_m));
        ST_TRY(scan_params(t, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_V, t->adam_v));
    }
    /* the weights are fixed until the first training step: the rollout's bar table */
    if (t->tab) {
        ST_TRY(st_cuda_model_table_build(&t->model, t->feat.rows, t->feat.data, t->feat.F, t->tab));
        t->tab_built = 1;
    }
    for (int step = 0; step < T; step++) ST_TRY(launch(t, level, G_ACT));
    ST_TRY(launch(t, level, G_POST));
    if (t->dist) { /* every rank's rollout on every rank, then its statistics */
        ST_TRY(st_cuda_dist_gather_rollout(t));
        ST_TRY(rollout_stats(t));
    }
    /* The permutations on the host while the rollout runs on the device;
     * the pinned buffer is free: the last update synchronised. With ranks a
     * global sample's place is in the gathered layout (st_cuda_dist_place). */
    for (int e = 0; e < E; e++) {
        st_trainer_permutation(h, e);
        int *dst = t->h_perm + (size_t)e * N;
        if (t->dist)
            for (int i = 0; i < N; i++) dst[i] = st_cuda_dist_place(t, h->perm[i]);
        else
            memcpy(dst, h->perm, sizeof(int) * (size_t)N);
    }
    ST_CU(cudaMemcpyAsync(t->perm, t->h_perm, sizeof(int) * (size_t)E * N, cudaMemcpyHostToDevice, s));
    for (int k = 0; k < E * M; k++) {
        ST_TRY(launch(t, level, G_TRAIN));
        if (!t->dist) continue;
        ST_TRY(st_dist_allreduce(t->dist, t->g, h->table.total, ST_DIST_F32, ST_DIST_MEAN, t->stream));
        ST_TRY(launch(t, level, G_OPT));
    }
    /* each rank's loss statistics are over its windows: their mean is the minibatch's */
    if (t->dist)
        ST_TRY(st_dist_allreduce(t->dist, t->stats, sizeof(st_ppo_stats) / sizeof(double) * (size_t)E * M, ST_DIST_F64,
                                 ST_DIST_MEAN, t->stream));
    ST_CU(cudaMemcpyAsync(t->h_stats, t->stats, sizeof(st_ppo_stats) * (size_t)E * M, cudaMemcpyDeviceToHost, s));
    ST_CU(cudaMemcpyAsync(t->h_gnorm, t->gnorm, sizeof(double) * (size_t)E * M, cudaMemcpyDeviceToHost, s));
    ST_CU(cudaMemcpyAsync(t->h_rstats, t->rstats, sizeof *t->h_rstats, cudaMemcpyDeviceToHost, s));
    ST_CU(cudaStreamSynchronize(s));
    return st_cuda_env_check(&t->env);
}

/* The pre-step state on the device (sentinel and full modes). */
static int snapshot(st_cuda_trainer *t, int restore) {
    size_t P = t->host.table.total, pb = sizeof(float) * P;
    size_t cb = sizeof(float) * (size_t)t->Bl * t->host.cfg.dims.C;
    cudaStream_t s = stream_of(t);
    if (!t->snap_w) {
        DALLOC(t->snap_w, P);
        DALLOC(t->snap_m, P);
        DALLOC(t->snap_v, P);
        DALLOC(t->snap_ctx, (size_t)t->Bl * t->host.cfg.dims.C);
        ST_CU(cudaMalloc(&t->snap_env, t->env.block_bytes));
    }
    const void *src[5] = {t->w, t->adam_m, t->adam_v, t->ctx, t->env.dev.block};
    void *dst[5] = {t->snap_w, t->snap_m, t->snap_v, t->snap_ctx, t->snap_env};
    size_t bytes[5] = {pb, pb, pb, cb, t->env.block_bytes};
    for (int i = 0; i < 5; i++) {
        if (restore) ST_CU(cudaMemcpyAsync((void *)src[i], dst[i], bytes[i], cudaMemcpyDeviceToDevice, s));
        else ST_CU(cudaMemcpyAsync(dst[i], src[i], bytes[i], cudaMemcpyDeviceToDevice, s));
    }
    return ST_OK;
}

int st_cuda_trainer_update(st_cuda_trainer *t, st_update_stats *s) {
    st_trainer *h = &t->host;
    const st_train_config *c = &h->cfg;
    const st_dims *d = &c->dims;
    double t0 = now_seconds();
    memset(s, 0, sizeof *s);
    st_sched_kind kind;
    st_sched_parse(c->schedule, &kind);
    double lr = st_sched_lr(kind, c->lr, c->lr_min_frac, c->warmup, (int)h->update, c->updates);
    st_trace *tr = t->trace;
    int level = !tr ? SCAN_NONE : tr->mode == ST_TRACE_FULL ? SCAN_FULL : tr->mode == ST_TRACE_SENTINEL ? SCAN_SENTINEL
                                                                                                     : SCAN_NONE;
    if (tr && level != SCAN_NONE) ST_TRY(snapshot(t, 0));
    int64_t seq0 = tr ? tr->seq : 0; /* the ranks compare scan order from the update's start */
    ST_TRY(run_update(t, level, lr));
    if (tr && level != SCAN_NONE) { /* off: the injection fired, nothing is recorded (as on the CPU) */
        ST_TRY(st_cuda_trace_download(&t->dtrace, tr));
        /* with ranks they all decide together (a replay's collectives need every rank) */
        int any = tr->ntrip > 0, first_rank = t->rank;
        if (t->dist) ST_TRY(st_cuda_dist_trips(t, seq0, &any, &first_rank));
        if (any && level == SCAN_SENTINEL) {
            /* Replay the same update with every label scanned: runs are
             * bit-identical, so it trips again and names the first label. */
            int first = st_trace_first(tr);
            tr->sentinel_tripped = 1;
            snprintf(tr->sentinel_what, sizeof tr->sentinel_what, "%s",
                     first >= 0 ? tr->labels.l[first].name : "a sentinel label");
            ST_TRY(snapshot(t, 1));
            ST_TRY(st_cuda_trace_reset(&t->dtrace, t->stream));
            seq0 = tr->seq;
            ST_TRY(run_update(t, SCAN_FULL, lr));
            ST_TRY(st_cuda_trace_download(&t->dtrace, tr));
            any = tr->ntrip > 0, first_rank = t->rank;
            if (t->dist) ST_TRY(st_cuda_dist_trips(t, seq0, &any, &first_rank));
        }
        if (any) {
            ST_TRY(snapshot(t, 1));
            ST_CU(cudaStreamSynchronize(stream_of(t)));
            tr->tripped = 1;
            int first = st_trace_first(tr);
            tr->trip_step = first >= 0 ? tr->rec[first].step : h->update;
            if (!t->dist)
                return ST_FAIL(ST_ERR_NUMERIC, "NaN/Inf tracer (GPU): first non-finite label %s at step %ld",
                               first >= 0 ? tr->labels.l[first].name : "?", h->update);
            if (first < 0)
                return ST_FAIL(ST_ERR_NUMERIC,
                               "NaN/Inf tracer (GPU rank %d of %d): nothing non-finite here at step %ld; the first "
                               "non-finite value appeared on rank %d",
                               t->rank, t->world, h->update, first_rank);
            return ST_FAIL(ST_ERR_NUMERIC,
                           "NaN/Inf tracer (GPU rank %d of %d): first non-finite label %s at step %ld; the first "
                           "non-finite value of all ranks appeared on rank %d",
                           t->rank, t->world, tr->labels.l[first].name, h->update, first_rank);
        }
    }
    ST_TRY(collect_stats(t, s));
    h->env_steps += (long)d->T * d->B;
    h->update++;
    s->update = h->update;
    s->env_steps = h->env_steps;
    s->lr = lr;
    s->seconds = now_seconds() - t0;
    return ST_OK;
}

/* ---- tracer ---------------------------------------------------------------------------- */

void st_cuda_trainer_label_sizes(const st_cuda_trainer *t, st_label_sizes *z) {
    memset(z, 0, sizeof *z);
    z->d = t->host.cfg.dims;
    z->d.B = t->Bl;  /* this rank's instances */
    z->mb = t->ml;   /* and its windows of a minibatch */
    z->pad = 0;
}

int st_cuda_trainer_set_trace(st_cuda_trainer *t, st_trace *tr) {
    destroy_graphs(t);
    if (t->trace) st_cuda_trace_free(&t->dtrace);
    t->trace = NULL;
    if (!tr) return ST_OK;
    const st_cuda_ctrl *ctrl = t->ctrl;
    ST_TRY(st_cuda_trace_init(&t->dtrace, tr, &ctrl->update, &ctrl->sub));
    /* the graphs' scan level decides which labels are scanned; every scan in them records */
    st_cuda_trace_set_scanning(&t->dtrace, 1);
    t->trace = tr;
    return ST_OK;
}

/* ---- host <-> device ------------------------------------------------------------------- */

int st_cuda_trainer_download(const st_cuda_trainer *t, float *w, float *adam_m, float *adam_v) {
    size_t bytes = sizeof(float) * t->host.table.total;
    if (w) ST_TRY(down(t, w, t->w, bytes));
    if (adam_m) ST_TRY(down(t, adam_m, t->adam_m, bytes));
    if (adam_v) ST_TRY(down(t, adam_v, t->adam_v, bytes));
    return ST_OK;
}

int st_cuda_trainer_upload(st_cuda_trainer *t, const float *w, const float *adam_m, const float *adam_v) {
    size_t bytes = sizeof(float) * t->host.table.total;
    if (w) ST_TRY(up(t, t->w, w, bytes));
    if (adam_m) ST_TRY(up(t, t->adam_m, adam_m, bytes));
    if (adam_v) ST_TRY(up(t, t->adam_v, adam_v, bytes));
    return ST_OK;
}

int st_cuda_trainer_sync_host(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    ST_TRY(st_cuda_trainer_download(t, h->w, h->adam_m, h->adam_v));
    if (t->dist) return st_cuda_dist_pull_env(t); /* every rank's instances and contexts */
    ST_TRY(st_cuda_env_download(&t->env, &h->env));
    return down(t, h->ctx, t->ctx, sizeof(float) * (size_t)h->cfg.dims.B * h->cfg.dims.C);
}

int st_cuda_trainer_push_host(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    ST_TRY(st_cuda_trainer_upload(t, h->w, h->adam_m, h->adam_v));
    if (t->dist) return st_cuda_dist_push_env(t); /* this rank's instances and contexts */
    ST_TRY(st_cuda_env_upload(&t->env, &h->env));
    return up(t, t->ctx, h->ctx, sizeof(float) * (size_t)h->cfg.dims.B * h->cfg.dims.C);
}

int st_cuda_trainer_download_rollout(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    size_t N = (size_t)h->N, B = (size_t)t->Bl;
    ST_TRY(down(t, h->r_inst, t->r_inst, sizeof(int) * N));
    ST_TRY(down(t, h->r_bar, t->r_bar, sizeof(int) * N));
    ST_TRY(down(t, h->r_ctx, t->r_ctx, sizeof(float) * N * (size_t)h->cfg.dims.C));
    ST_TRY(down(t, h->r_action, t->r_action, sizeof(int) * N));
    ST_TRY(down(t, h->r_logp, t->r_logp, sizeof(float) * N));
    ST_TRY(down(t, h->r_value, t->r_value, sizeof(float) * N));
    ST_TRY(down(t, h->r_reward, t->r_reward, sizeof(float) * N));
    ST_TRY(down(t, h->r_done, t->r_done, N));
    ST_TRY(down(t, h->adv, t->adv, sizeof(float) * N));
    ST_TRY(down(t, h->ret, t->ret, sizeof(float) * N));
    return down(t, h->last_value, t->last_value, sizeof(float) * B);
}

#else /* no CUDA backend */

static int no_cuda(void) { return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend (nvcc was not found)"); }

int st_cuda_trainer_init(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m) {
    (void)cfg, (void)m;
    memset(t, 0, sizeof *t);
    return no_cuda();
}

int st_cuda_trainer_init_dist(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m,
                              struct st_dist *dist) {
    (void)dist;
    return st_cuda_trainer_init(t, cfg, m);
}

void st_cuda_trainer_free(st_cuda_trainer *t) { memset(t, 0, sizeof *t); }

int st_cuda_trainer_update(st_cuda_trainer *t, st_update_stats *s) {
    (void)t, (void)s;
    return no_cuda();
}

int st_cuda_trainer_set_trace(st_cuda_trainer *t, struct st_trace *tr) {
    (void)t, (void)tr;
    return no_cuda();
}

void st_cuda_trainer_label_sizes(const st_cuda_trainer *t, st_label_sizes *z) {
    memset(z, 0, sizeof *z);
    z->d = t->host.cfg.dims;
    z->mb = t->host.mb;
}

int st_cuda_trainer_download(const st_cuda_trainer *t, float *w, float *adam_m, float *adam_v) {
    (void)t, (void)w, (void)adam_m, (void)adam_v;
    return no_cuda();
}

int st_cuda_trainer_upload(st_cuda_trainer *t, const float *w, const float *adam_m, const float *adam_v) {
    (void)t, (void)w, (void)adam_m, (void)adam_v;
    return no_cuda();
}

int st_cuda_trainer_sync_host(st_cuda_trainer *t) {
    (void)t;
    return no_cuda();
}

int st_cuda_trainer_push_host(st_cuda_trainer *t) {
    (void)t;
    return no_cuda();
}

int st_cuda_trainer_download_rollout(st_cuda_trainer *t) {
    (void)t;
    return no_cuda();
}

#endif
