/* trainer_cuda.c: the PPO update with the model, loss and optimiser on the
 * GPU and the environments on the CPU (train/trainer_cuda.h). Host C over
 * the CUDA C APIs; the only kernel of its own is the minibatch gather
 * (train/rollout.cu). Everything runs on the default stream, so the
 * synchronous copies order themselves after the kernels. */
#include "train/trainer_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "core/error.h"

#ifdef ST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/philox.h"
#include "cuda/adamw_cuda.h"
#include "cuda/ppo_loss_cuda.h"
#include "cuda/rollout_cuda.h"
#include "train/gae.h"
#include "train/schedule.h"

#define CU(call)                                                                                               \
    do {                                                                                                       \
        cudaError_t st_e_ = (call);                                                                            \
        if (st_e_ != cudaSuccess) return ST_FAIL(ST_ERR_DEVICE, "%s: %s", #call, cudaGetErrorString(st_e_));  \
    } while (0)

#define DALLOC(p, n) CU(cudaMalloc((void **)&(p), sizeof *(p) * ((size_t)(n) > 0 ? (size_t)(n) : 1)))

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int up(void *dst, const void *src, size_t bytes) {
    CU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return ST_OK;
}

static int down(void *dst, const void *src, size_t bytes) {
    CU(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return ST_OK;
}

static int alloc_device(st_cuda_trainer *t) {
    const st_train_config *c = &t->host.cfg;
    const st_dims *d = &c->dims;
    size_t P = t->host.table.total;
    int N = t->host.N, mw = t->mw, steps = c->epochs * c->minibatches;
    DALLOC(t->w, P);
    DALLOC(t->g, P);
    DALLOC(t->adam_m, P);
    DALLOC(t->adam_v, P);
    DALLOC(t->decay, P);
    DALLOC(t->r_inst, N);
    DALLOC(t->r_bar, N);
    DALLOC(t->r_action, N);
    DALLOC(t->perm, N);
    DALLOC(t->r_ctx, (size_t)N * d->C);
    DALLOC(t->r_logp, N);
    DALLOC(t->r_value, N);
    DALLOC(t->adv, N);
    DALLOC(t->ret, N);
    DALLOC(t->mb_inst, mw);
    DALLOC(t->mb_bar, mw);
    DALLOC(t->mb_action, mw);
    DALLOC(t->mb_ctx, (size_t)mw * d->C);
    DALLOC(t->mb_logp, mw);
    DALLOC(t->mb_value, mw);
    DALLOC(t->mb_ret, mw);
    DALLOC(t->mb_adv, mw);
    DALLOC(t->win, (size_t)mw * d->K * st_row_width(d));
    DALLOC(t->logits, (size_t)mw * d->A);
    DALLOC(t->value, mw);
    DALLOC(t->dlogits, (size_t)mw * d->A);
    DALLOC(t->dvalue, mw);
    DALLOC(t->loss_work, st_cuda_ppo_loss_work_count(t->host.mb));
    DALLOC(t->norm_work, st_cuda_grad_norm_work_count(P));
    DALLOC(t->stats, steps);
    DALLOC(t->gnorm, steps);
    t->h_logits = calloc((size_t)d->B * d->A, sizeof(float));
    if (!t->h_logits) return ST_FAIL(ST_ERR_MEMORY, "out of memory for the GPU trainer's logits");
    return ST_OK;
}

int st_cuda_trainer_init(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m) {
    memset(t, 0, sizeof *t);
    ST_REQUIRE(st_cuda_devices() > 0, ST_ERR_DEVICE, "no CUDA device: %s", st_cuda_describe());
    ST_TRY(st_trainer_init(&t->host, cfg, m));
    const st_dims *d = &t->host.cfg.dims;
    t->mw = d->B > t->host.mb ? d->B : t->host.mb;
    ST_TRY(alloc_device(t));
    size_t P = t->host.table.total;
    ST_TRY(st_cuda_features_upload(m, &t->feat));
    ST_TRY(up(t->w, t->host.w, sizeof(float) * P));
    CU(cudaMemset(t->g, 0, sizeof(float) * P));
    CU(cudaMemset(t->adam_m, 0, sizeof(float) * P));
    CU(cudaMemset(t->adam_v, 0, sizeof(float) * P));
    ST_TRY(st_cuda_adamw_decay_mask(&t->host.table, t->decay));
    ST_TRY(st_cuda_model_init(&t->model, d, &t->host.table, t->mw, t->w, t->g));
    return ST_OK;
}

void st_cuda_trainer_free(st_cuda_trainer *t) {
    if (t->model.views || t->model.arena) st_cuda_model_free(&t->model);
    if (t->feat.data || t->feat.inst) st_cuda_features_free(&t->feat);
    void *bufs[] = {t->w, t->g, t->adam_m, t->adam_v, t->decay, t->r_inst, t->r_bar, t->r_action, t->perm,
                    t->r_ctx, t->r_logp, t->r_value, t->adv, t->ret, t->mb_inst, t->mb_bar, t->mb_action,
                    t->mb_ctx, t->mb_logp, t->mb_value, t->mb_ret, t->mb_adv, t->win, t->logits, t->value,
                    t->dlogits, t->dvalue, t->loss_work, t->norm_work, t->stats, t->gnorm};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    free(t->h_logits);
    st_trainer_free(&t->host);
    memset(t, 0, sizeof *t);
}

/* Windows of n device (instrument, bar, context) triples, then the forward
 * into t->logits [n, A] and t->value [n]. */
static int forward_windows(st_cuda_trainer *t, int n, const int *inst, const int *bar, const float *ctx) {
    const st_dims *d = &t->host.cfg.dims;
    int ws = st_row_width(d);
    ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)t->feat.inst, t->feat.F, inst, bar, ctx,
                                d->C, t->win, ws, NULL));
    ST_TRY(st_cuda_model_forward(&t->model, n, t->win, ws, t->logits, d->A, t->value));
    return ST_OK;
}

/* The B current (instrument, bar, context) of the environments go up into
 * the device rollout at sample offset o, and the model acts on them; the
 * logits and values come back to the host. */
static int act_forward(st_cuda_trainer *t, size_t o, float *value_out) {
    st_trainer *h = &t->host;
    const st_dims *d = &h->cfg.dims;
    int B = d->B, C = d->C;
    ST_TRY(up(t->r_inst + o, h->env.inst, sizeof(int) * B));
    ST_TRY(up(t->r_bar + o, h->env.bar, sizeof(int) * B));
    ST_TRY(up(t->r_ctx + o * C, h->ctx, sizeof(float) * (size_t)B * C));
    ST_TRY(forward_windows(t, B, t->r_inst + o, t->r_bar + o, t->r_ctx + o * C));
    ST_TRY(down(t->h_logits, t->logits, sizeof(float) * (size_t)B * d->A));
    ST_TRY(down(value_out, t->value, sizeof(float) * B));
    return ST_OK;
}

static int rollout(st_cuda_trainer *t, st_update_stats *s) {
    st_trainer *h = &t->host;
    const st_dims *d = &h->cfg.dims;
    int B = d->B, C = d->C, T = d->T;
    double u[B > 0 ? B : 1];
    double rsum = 0, vsum = 0, ep_sum = 0;
    int episodes = 0;
    for (int step = 0; step < T; step++) {
        size_t o = (size_t)step * B;
        /* the host keeps its copy of the rollout too (checkpoints, tests) */
        memcpy(h->r_inst + o, h->env.inst, sizeof(int) * B);
        memcpy(h->r_bar + o, h->env.bar, sizeof(int) * B);
        memcpy(h->r_ctx + o * C, h->ctx, sizeof(float) * (size_t)B * C);
        ST_TRY(act_forward(t, o, h->r_value + o));
        uint64_t base = ((uint64_t)h->update * T + (uint64_t)step) * (uint64_t)B;
        for (int b = 0; b < B; b++) {
            st_philox4 r = st_philox_draw((uint64_t)h->cfg.seed, ST_STREAM_ACTION, base + (uint64_t)b);
            u[b] = st_u01d(r.v[0], r.v[1]);
        }
        st_select_actions(B, d->A, t->h_logits, u, 0, h->r_action + o, h->r_logp + o);
        st_env_out out = {.reward = h->r_reward + o, .done = h->r_done + o, .ctx = h->ctx, .ctx_stride = C};
        ST_TRY(st_env_step(&h->env, h->r_action + o, &out));
        for (int b = 0; b < B; b++) {
            rsum += h->r_reward[o + b];
            vsum += h->r_value[o + b];
            if (h->r_done[o + b]) {
                ep_sum += h->env.last_ep_R[b];
                episodes++;
            }
        }
    }
    /* the bootstrap forward: its pairs go to the (free) minibatch scratch */
    ST_TRY(up(t->mb_inst, h->env.inst, sizeof(int) * B));
    ST_TRY(up(t->mb_bar, h->env.bar, sizeof(int) * B));
    ST_TRY(up(t->mb_ctx, h->ctx, sizeof(float) * (size_t)B * C));
    ST_TRY(forward_windows(t, B, t->mb_inst, t->mb_bar, t->mb_ctx));
    ST_TRY(down(h->last_value, t->value, sizeof(float) * B));
    h->env_steps += (long)T * B;
    s->mean_reward = rsum / h->N;
    s->mean_value = vsum / h->N;
    s->episodes = episodes;
    s->mean_episode_R = episodes ? ep_sum / episodes : NAN;
    return ST_OK;
}

/* The rollout's actions, old log-probabilities and values, advantages and
 * returns go up (the pairs and contexts went up step by step). */
static int upload_rollout(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    size_t n = (size_t)h->N;
    ST_TRY(up(t->r_action, h->r_action, sizeof(int) * n));
    ST_TRY(up(t->r_logp, h->r_logp, sizeof(float) * n));
    ST_TRY(up(t->r_value, h->r_value, sizeof(float) * n));
    ST_TRY(up(t->adv, h->adv, sizeof(float) * n));
    ST_TRY(up(t->ret, h->ret, sizeof(float) * n));
    return ST_OK;
}

/* One minibatch (samples perm[first .. first+mb) on the device): gather,
 * forward, loss, backward, norm, clip, AdamW; the stats and the pre-clip
 * norm land in slot k of the device arrays. */
static int train_minibatch(st_cuda_trainer *t, int first, int k, const st_adamw_hparams *hp, const st_ppo_coefs *pc,
                           long step) {
    st_trainer *h = &t->host;
    const st_train_config *c = &h->cfg;
    const st_dims *d = &c->dims;
    int mb = h->mb;
    size_t P = h->table.total;
    ST_TRY(st_cuda_rollout_gather(mb, d->C, t->perm + first, t->r_inst, t->r_bar, t->r_action, t->r_ctx, t->r_logp,
                                  t->r_value, t->ret, t->adv, t->mb_inst, t->mb_bar, t->mb_action, t->mb_ctx,
                                  t->mb_logp, t->mb_value, t->mb_ret, t->mb_adv, NULL));
    ST_TRY(forward_windows(t, mb, t->mb_inst, t->mb_bar, t->mb_ctx));
    ST_TRY(st_cuda_ppo_loss(mb, d->A, t->logits, d->A, t->mb_action, t->mb_logp, t->mb_adv, t->value, t->mb_value,
                            t->mb_ret, pc, t->stats + k, t->dlogits, d->A, t->dvalue, t->loss_work, NULL));
    CU(cudaMemset(t->g, 0, sizeof(float) * P));
    ST_TRY(st_cuda_model_backward(&t->model, t->dlogits, d->A, t->dvalue, NULL, 0));
    ST_TRY(st_cuda_grad_norm(P, t->g, t->gnorm + k, t->norm_work, NULL));
    ST_TRY(st_cuda_grad_clip(P, t->g, t->gnorm + k, c->max_grad_norm, NULL));
    ST_TRY(st_cuda_adamw_step(P, t->w, t->g, t->adam_m, t->adam_v, t->decay, hp, step, NULL));
    return ST_OK;
}

/* Means of the last epoch's losses and of every pre-clip norm, read back
 * once; ST_ERR_NUMERIC on the first non-finite one. */
static int collect_stats(st_cuda_trainer *t, st_update_stats *s) {
    const st_train_config *c = &t->host.cfg;
    int E = c->epochs, M = c->minibatches, n = E * M;
    st_ppo_stats ls[n];
    double gn[n];
    ST_TRY(down(ls, t->stats, sizeof ls));
    ST_TRY(down(gn, t->gnorm, sizeof gn));
    st_ppo_stats acc = {0};
    double gn_sum = 0;
    for (int k = 0; k < n; k++) {
        ST_REQUIRE(isfinite(gn[k]) && isfinite(ls[k].loss), ST_ERR_NUMERIC,
                   "update %ld epoch %d minibatch %d (GPU): non-finite loss %g or gradient norm %g",
                   t->host.update + 1, k / M, k % M, ls[k].loss, gn[k]);
        gn_sum += gn[k];
        if (k / M != E - 1) continue;
        acc.loss += ls[k].loss, acc.policy += ls[k].policy, acc.value += ls[k].value;
        acc.entropy += ls[k].entropy, acc.approx_kl += ls[k].approx_kl, acc.clipfrac += ls[k].clipfrac;
    }
    double inv = 1.0 / M;
    s->loss = (st_ppo_stats){acc.loss * inv, acc.policy * inv, acc.value * inv, acc.entropy * inv,
                             acc.approx_kl * inv, acc.clipfrac * inv};
    s->grad_norm = gn_sum / n;
    return ST_OK;
}

int st_cuda_trainer_update(st_cuda_trainer *t, st_update_stats *s) {
    st_trainer *h = &t->host;
    const st_train_config *c = &h->cfg;
    const st_dims *d = &c->dims;
    double t0 = now_seconds();
    memset(s, 0, sizeof *s);
    ST_TRY(rollout(t, s));
    st_gae(d->T, d->B, h->r_reward, h->r_value, h->r_done, h->last_value, c->gamma, c->gae_lambda, h->adv, h->ret);
    s->explained_var = st_explained_variance(h->r_value, h->ret, h->N);
    ST_TRY(upload_rollout(t));

    st_sched_kind kind;
    st_sched_parse(c->schedule, &kind);
    double lr = st_sched_lr(kind, c->lr, c->lr_min_frac, c->warmup, (int)h->update, c->updates);
    st_adamw_hparams hp = {lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay};
    st_ppo_coefs pc = {c->clip, c->value_clip, c->vf_coef, c->ent_coef};
    long step0 = h->update * c->epochs * c->minibatches;
    for (int e = 0; e < c->epochs; e++) {
        st_trainer_permutation(h, e);
        /* synchronous: the previous epoch's gathers have read perm */
        ST_TRY(up(t->perm, h->perm, sizeof(int) * (size_t)h->N));
        for (int b = 0; b < c->minibatches; b++) {
            int k = e * c->minibatches + b;
            ST_TRY(train_minibatch(t, b * h->mb, k, &hp, &pc, step0 + k + 1));
        }
    }
    ST_TRY(collect_stats(t, s));
    h->update++;
    s->update = h->update;
    s->env_steps = h->env_steps;
    s->lr = lr;
    s->seconds = now_seconds() - t0;
    return ST_OK;
}

int st_cuda_trainer_download(const st_cuda_trainer *t, float *w, float *adam_m, float *adam_v) {
    size_t bytes = sizeof(float) * t->host.table.total;
    if (w) ST_TRY(down(w, t->w, bytes));
    if (adam_m) ST_TRY(down(adam_m, t->adam_m, bytes));
    if (adam_v) ST_TRY(down(adam_v, t->adam_v, bytes));
    return ST_OK;
}

int st_cuda_trainer_upload(st_cuda_trainer *t, const float *w, const float *adam_m, const float *adam_v) {
    size_t bytes = sizeof(float) * t->host.table.total;
    if (w) ST_TRY(up(t->w, w, bytes));
    if (adam_m) ST_TRY(up(t->adam_m, adam_m, bytes));
    if (adam_v) ST_TRY(up(t->adam_v, adam_v, bytes));
    return ST_OK;
}

#else /* no CUDA backend */

int st_cuda_trainer_init(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m) {
    (void)cfg, (void)m;
    memset(t, 0, sizeof *t);
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend (nvcc was not found)");
}

void st_cuda_trainer_free(st_cuda_trainer *t) { memset(t, 0, sizeof *t); }

int st_cuda_trainer_update(st_cuda_trainer *t, st_update_stats *s) {
    (void)t, (void)s;
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend");
}

int st_cuda_trainer_download(const st_cuda_trainer *t, float *w, float *adam_m, float *adam_v) {
    (void)t, (void)w, (void)adam_m, (void)adam_v;
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend");
}

int st_cuda_trainer_upload(st_cuda_trainer *t, const float *w, const float *adam_m, const float *adam_v) {
    (void)t, (void)w, (void)adam_m, (void)adam_v;
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend");
}

#endif

int st_cuda_trainer_sync_host(st_cuda_trainer *t) {
    return st_cuda_trainer_download(t, t->host.w, t->host.adam_m, t->host.adam_v);
}

int st_cuda_trainer_push_host(st_cuda_trainer *t) {
    return st_cuda_trainer_upload(t, t->host.w, t->host.adam_m, t->host.adam_v);
}
