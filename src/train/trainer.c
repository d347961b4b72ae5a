/* trainer.c: rollout, GAE and the PPO update on the CPU (trainer.h).
 *
 * The tracer's hooks (trace_*) sit right after each labelled tensor is
 * produced and before it is consumed; without a tracer they are one
 * NULL check each. */
#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/philox.h"
#include "env/window.h"
#include "train/adamw.h"
#include "train/gae.h"
#include "train/schedule.h"
#include "trace/trace.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void st_select_actions(int n, int A, const float *logits, const double *u, int greedy, int *action, float *logp) {
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * A;
        double mx = z[0];
        int best = 0;
        for (int j = 1; j < A; j++)
            if (z[j] > mx) mx = z[j], best = j;
        double s = 0;
        for (int j = 0; j < A; j++) s += exp((double)z[j] - mx);
        int a = best;
        if (!greedy) {
            /* inverse CDF; the last action takes any rounding remainder */
            double target = u[i] * s, acc = 0;
            a = A - 1;
            for (int j = 0; j < A; j++) {
                acc += exp((double)z[j] - mx);
                if (target < acc) {
                    a = j;
                    break;
                }
            }
        }
        action[i] = a;
        if (logp) logp[i] = (float)((double)z[a] - mx - log(s));
    }
}

st_env_config st_trainer_env_config(const st_train_config *c) {
    st_env_config e = st_env_config_default();
    e.H = c->episode_length;
    e.k_stop = c->k_stop;
    e.slippage_bps = c->slippage_bps;
    e.commission_bps = c->commission_bps;
    e.risk_fraction = c->risk_fraction;
    e.split = ST_SPLIT_TRAIN;
    e.seed = (uint64_t)c->seed;
    e.auto_reset = 1;
    return e;
}

#define ALLOC(p, n)                                                                                            \
    do {                                                                                                       \
        (p) = calloc((size_t)(n) > 0 ? (size_t)(n) : 1, sizeof *(p));                                          \
        if (!(p)) return ST_FAIL(ST_ERR_MEMORY, "out of memory for the trainer (%s)", #p);                     \
    } while (0)

/* Every buffer; with_model = 0 leaves out the window and the model's
 * inputs and outputs (a GPU trainer's host side never runs the CPU model). */
static int alloc_buffers(st_trainer *t, int with_model) {
    const st_dims *d = &t->cfg.dims;
    int B = d->B, C = d->C, A = d->A, N = t->N, mw = B > t->mb ? B : t->mb;
    size_t P = t->table.total;
    ALLOC(t->w, P);
    ALLOC(t->g, P);
    ALLOC(t->adam_m, P);
    ALLOC(t->adam_v, P);
    ALLOC(t->r_inst, N);
    ALLOC(t->r_bar, N);
    ALLOC(t->r_action, N);
    ALLOC(t->r_ctx, (size_t)N * C);
    ALLOC(t->r_logp, N);
    ALLOC(t->r_value, N);
    ALLOC(t->r_reward, N);
    ALLOC(t->adv, N);
    ALLOC(t->ret, N);
    ALLOC(t->r_done, N);
    ALLOC(t->ctx, (size_t)B * C);
    ALLOC(t->last_value, B);
    ALLOC(t->perm, N);
    if (!with_model) return ST_OK;
    ALLOC(t->mb_inst, mw);
    ALLOC(t->mb_bar, mw);
    ALLOC(t->mb_action, mw);
    ALLOC(t->mb_ctx, (size_t)mw * C);
    ALLOC(t->mb_logp, mw);
    ALLOC(t->mb_adv, mw);
    ALLOC(t->mb_value, mw);
    ALLOC(t->mb_ret, mw);
    ALLOC(t->win, (size_t)mw * d->K * t->win_stride);
    ALLOC(t->logits, (size_t)mw * A);
    ALLOC(t->value, mw);
    ALLOC(t->dlogits, (size_t)mw * A);
    ALLOC(t->dvalue, mw);
    return ST_OK;
}

static int init_common(st_trainer *t, const st_train_config *cfg, const st_market *m, int pad, int with_model);

int st_trainer_init(st_trainer *t, const st_train_config *cfg, const st_market *m) {
    return st_trainer_init_padded(t, cfg, m, 0);
}

int st_trainer_init_padded(st_trainer *t, const st_train_config *cfg, const st_market *m, int pad) {
    return init_common(t, cfg, m, pad, 1);
}

int st_trainer_init_host(st_trainer *t, const st_train_config *cfg, const st_market *m) {
    return init_common(t, cfg, m, 0, 0);
}

static int init_common(st_trainer *t, const st_train_config *cfg, const st_market *m, int pad, int with_model) {
    memset(t, 0, sizeof *t);
    ST_REQUIRE(pad >= 0, ST_ERR_INPUT, "negative row padding %d", pad);
    ST_TRY(st_train_config_validate(cfg));
    ST_REQUIRE(m->F == cfg->dims.F, ST_ERR_INPUT, "the data has %d features per bar, the model expects %d", m->F,
               cfg->dims.F);
    t->cfg = *cfg; /* strings stay owned by the caller's config */
    t->m = m;
    const st_dims *d = &t->cfg.dims;
    t->N = d->T * d->B;
    t->mb = t->N / cfg->minibatches;
    t->pad = pad;
    t->win_stride = d->F + d->C + pad;
    ST_TRY(st_param_table_build(d, &t->table));
    ST_TRY(alloc_buffers(t, with_model));
    st_params_init_f32(&t->table, (uint64_t)cfg->seed, t->w);
    int mw = d->B > t->mb ? d->B : t->mb;
    if (pad > 0) st_trace_poison_rows(t->win, (int64_t)mw * d->K, d->F + d->C, t->win_stride);
    if (with_model) ST_TRY(st_model_init_padded(&t->model, d, &t->table, mw, t->w, t->g, pad));
    st_env_config ec = st_trainer_env_config(cfg);
    ST_TRY(st_env_create(&t->env, m, d->B, &ec));
    st_env_out out = {.ctx = t->ctx, .ctx_stride = d->C};
    st_env_reset(&t->env, &out);
    return ST_OK;
}

void st_trainer_set_trace(st_trainer *t, struct st_trace *tr) {
    t->trace = tr;
    t->model.trace = tr;
}

/* A contiguous float tensor of the current pass as label (phase, kind, 0). */
static void trace_f32(st_trainer *t, st_trace_phase ph, st_trace_kind k, float *p, int64_t rows, int64_t width) {
    if (t->trace) st_trace_at(t->trace, ph, k, 0, p, rows, width, width);
}

void st_trainer_free(st_trainer *t) {
    st_model_free(&t->model);
    st_env_free(&t->env);
    st_param_table_free(&t->table);
    void *bufs[] = {t->w, t->g, t->adam_m, t->adam_v, t->r_inst, t->r_bar, t->r_action, t->r_ctx, t->r_logp,
                    t->r_value, t->r_reward, t->adv, t->ret, t->r_done, t->ctx, t->last_value, t->perm,
                    t->mb_inst, t->mb_bar, t->mb_action, t->mb_ctx, t->mb_logp, t->mb_adv, t->mb_value,
                    t->mb_ret, t->win, t->logits, t->value, t->dlogits, t->dvalue};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(t, 0, sizeof *t);
}

/* Windows of n (instrument, bar, context) triples, then the model forward. */
static int forward_windows(st_trainer *t, int n, const int *inst, const int *bar, const float *ctx) {
    const st_dims *d = &t->cfg.dims;
    int ws = t->win_stride;
    ST_TRY(st_window_build(t->m, n, d->K, inst, bar, ctx, d->C, d->C, t->win, ws));
    if (t->trace) st_trace_fwd(t->trace, ST_TK_WINDOW, 0, t->win, (int64_t)n * d->K, d->F + d->C, ws);
    st_model_forward(&t->model, n, t->win, ws, t->logits, d->A, t->value);
    return ST_OK;
}

static int rollout(st_trainer *t, st_update_stats *s) {
    const st_dims *d = &t->cfg.dims;
    int B = d->B, C = d->C, T = d->T;
    double u[B > 0 ? B : 1];
    double rsum = 0, vsum = 0, ep_sum = 0;
    int episodes = 0;
    for (int step = 0; step < T; step++) {
        size_t o = (size_t)step * B;
        if (t->trace) st_trace_position(t->trace, ST_PHASE_ACT, step);
        trace_f32(t, ST_PHASE_ENV, ST_TK_CONTEXT, t->ctx, B, C);
        memcpy(t->r_inst + o, t->env.inst, sizeof(int) * B);
        memcpy(t->r_bar + o, t->env.bar, sizeof(int) * B);
        memcpy(t->r_ctx + o * C, t->ctx, sizeof(float) * (size_t)B * C);
        ST_TRY(forward_windows(t, B, t->env.inst, t->env.bar, t->ctx));
        uint64_t base = ((uint64_t)t->update * T + (uint64_t)step) * (uint64_t)B;
        for (int b = 0; b < B; b++) {
            st_philox4 r = st_philox_draw((uint64_t)t->cfg.seed, ST_STREAM_ACTION, base + (uint64_t)b);
            u[b] = st_u01d(r.v[0], r.v[1]);
        }
        st_select_actions(B, d->A, t->logits, u, 0, t->r_action + o, t->r_logp + o);
        trace_f32(t, ST_PHASE_ACT, ST_TK_LOGP, t->r_logp + o, 1, B);
        memcpy(t->r_value + o, t->value, sizeof(float) * B);
        st_env_out out = {.reward = t->r_reward + o, .done = t->r_done + o, .ctx = t->ctx, .ctx_stride = C};
        ST_TRY(st_env_step(&t->env, t->r_action + o, &out));
        trace_f32(t, ST_PHASE_ENV, ST_TK_REWARD, t->r_reward + o, 1, B);
        for (int b = 0; b < B; b++) {
            rsum += t->r_reward[o + b];
            vsum += t->r_value[o + b];
            if (t->r_done[o + b]) {
                ep_sum += t->env.last_ep_R[b];
                episodes++;
            }
        }
    }
    if (t->trace) st_trace_position(t->trace, ST_PHASE_ACT, T); /* the bootstrap forward */
    ST_TRY(forward_windows(t, B, t->env.inst, t->env.bar, t->ctx));
    memcpy(t->last_value, t->value, sizeof(float) * B);
    t->env_steps += (long)T * B;
    s->mean_reward = rsum / t->N;
    s->mean_value = vsum / t->N;
    s->episodes = episodes;
    s->mean_episode_R = episodes ? ep_sum / episodes : NAN;
    return ST_OK;
}

/* Fisher-Yates over the N / S segments from a counter-based stream, each
 * then spread in place into its S samples: segment q = tb B + e is steps
 * tb S .. tb S + S - 1 of environment e (samples t B + e, in time order).
 * Written back to front, segment i's S places (from i S >= i) never cover
 * a segment not yet read. S = 1 is the plain permutation of the samples. */
void st_trainer_permutation(st_trainer *t, int epoch) {
    int N = t->N, S = t->cfg.segment > 0 ? t->cfg.segment : 1, B = t->cfg.dims.B, NS = N / S;
    uint64_t base = ((uint64_t)t->update * (uint64_t)t->cfg.epochs + (uint64_t)epoch) * (uint64_t)N;
    for (int i = 0; i < NS; i++) t->perm[i] = i;
    for (int i = NS - 1; i > 0; i--) {
        st_philox4 r = st_philox_draw((uint64_t)t->cfg.seed, ST_STREAM_MINIBATCH, base + (uint64_t)i);
        int j = (int)(((uint64_t)r.v[0] * (uint64_t)(i + 1)) >> 32);
        int tmp = t->perm[i];
        t->perm[i] = t->perm[j];
        t->perm[j] = tmp;
    }
    if (S == 1) return;
    for (int i = NS - 1; i >= 0; i--) {
        int q = t->perm[i], tb = q / B, e = q % B;
        for (int u = S - 1; u >= 0; u--) t->perm[(size_t)i * S + u] = (tb * S + u) * B + e;
    }
}

static void gather(st_trainer *t, const int *idx) {
    int C = t->cfg.dims.C;
    double mean = 0, var = 0;
    for (int i = 0; i < t->mb; i++) {
        int k = idx[i];
        t->mb_inst[i] = t->r_inst[k];
        t->mb_bar[i] = t->r_bar[k];
        t->mb_action[i] = t->r_action[k];
        memcpy(t->mb_ctx + (size_t)i * C, t->r_ctx + (size_t)k * C, sizeof(float) * C);
        t->mb_logp[i] = t->r_logp[k];
        t->mb_value[i] = t->r_value[k];
        t->mb_ret[i] = t->ret[k];
        mean += t->adv[k];
    }
    mean /= t->mb;
    for (int i = 0; i < t->mb; i++) var += (t->adv[idx[i]] - mean) * (t->adv[idx[i]] - mean);
    double sd = sqrt(var / (t->mb > 1 ? t->mb - 1 : 1)) + 1e-8;
    for (int i = 0; i < t->mb; i++) t->mb_adv[i] = (float)((t->adv[idx[i]] - mean) / sd);
}

double st_explained_variance(const float *value, const float *ret, int n) {
    double mr = 0, md = 0;
    for (int i = 0; i < n; i++) mr += ret[i], md += ret[i] - value[i];
    mr /= n, md /= n;
    double vr = 0, vd = 0;
    for (int i = 0; i < n; i++) {
        vr += (ret[i] - mr) * (ret[i] - mr);
        vd += (ret[i] - value[i] - md) * (ret[i] - value[i] - md);
    }
    return vr > 0 ? 1 - vd / vr : 0;
}

/* The tracer's view of the step's start: weights and moments. */
static void trace_step_entry(st_trainer *t) {
    st_trace *tr = t->trace;
    if (!tr) return;
    st_trace_begin_step(tr, t->update);
    st_trace_params(tr, ST_PHASE_STEP_ENTRY, ST_TK_PARAM, &t->table, t->w);
    st_trace_params(tr, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_M, &t->table, t->adam_m);
    st_trace_params(tr, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_V, &t->table, t->adam_v);
}

static void trace_optim(st_trainer *t) {
    st_trace *tr = t->trace;
    if (!tr) return;
    st_trace_params(tr, ST_PHASE_OPTIM, ST_TK_ADAM_M, &t->table, t->adam_m);
    st_trace_params(tr, ST_PHASE_OPTIM, ST_TK_ADAM_V, &t->table, t->adam_v);
    st_trace_params(tr, ST_PHASE_OPTIM, ST_TK_PARAM, &t->table, t->w);
}

int st_trainer_update(st_trainer *t, st_update_stats *s) {
    const st_train_config *c = &t->cfg;
    const st_dims *d = &c->dims;
    st_trace *tr = t->trace;
    double t0 = now_seconds();
    memset(s, 0, sizeof *s);
    trace_step_entry(t);
    ST_TRY(rollout(t, s));
    st_gae(d->T, d->B, t->r_reward, t->r_value, t->r_done, t->last_value, c->gamma, c->gae_lambda, t->adv, t->ret);
    if (tr) st_trace_position(tr, ST_PHASE_TRAIN, -1);
    trace_f32(t, ST_PHASE_TRAIN, ST_TK_GAE_ADV, t->adv, d->T, d->B);
    trace_f32(t, ST_PHASE_TRAIN, ST_TK_GAE_RET, t->ret, d->T, d->B);
    s->explained_var = st_explained_variance(t->r_value, t->ret, t->N);

    st_sched_kind kind;
    st_sched_parse(c->schedule, &kind);
    double lr = st_sched_lr(kind, c->lr, c->lr_min_frac, c->warmup, (int)t->update, c->updates);
    st_adamw_hparams h = {lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay};
    st_ppo_coefs k = {c->clip, c->value_clip, c->vf_coef, c->ent_coef};
    double gn_sum = 0;
    int steps = 0;
    for (int e = 0; e < c->epochs; e++) {
        st_trainer_permutation(t, e);
        st_ppo_stats acc = {0};
        for (int b = 0; b < c->minibatches; b++) {
            gather(t, t->perm + (size_t)b * t->mb);
            if (tr) st_trace_position(tr, ST_PHASE_TRAIN, e * c->minibatches + b);
            trace_f32(t, ST_PHASE_TRAIN, ST_TK_MB_ADV, t->mb_adv, 1, t->mb);
            ST_TRY(forward_windows(t, t->mb, t->mb_inst, t->mb_bar, t->mb_ctx));
            st_ppo_stats ls;
            st_ppo_loss(t->mb, d->A, t->logits, d->A, t->mb_action, t->mb_logp, t->mb_adv, t->value, t->mb_value,
                        t->mb_ret, &k, &ls, t->dlogits, d->A, t->dvalue);
            if (tr) {
                double terms[6] = {ls.loss, ls.policy, ls.value, ls.entropy, ls.approx_kl, ls.clipfrac};
                st_trace_tensor_f64v(tr, ST_PHASE_TRAIN, ST_TK_LOSS, 0, terms, 6);
                ls = (st_ppo_stats){terms[0], terms[1], terms[2], terms[3], terms[4], terms[5]};
                st_model_trace_saved(&t->model);
            }
            trace_f32(t, ST_PHASE_BWD, ST_TK_DLOGITS, t->dlogits, t->mb, d->A);
            trace_f32(t, ST_PHASE_BWD, ST_TK_DVALUE, t->dvalue, 1, t->mb);
            memset(t->g, 0, sizeof(float) * t->table.total);
            st_model_backward(&t->model, t->dlogits, d->A, t->dvalue, NULL, 0);
            if (tr) st_trace_params(tr, ST_PHASE_GRAD, ST_TK_PARAM, &t->table, t->g);
            double gn = st_grad_norm(t->table.total, t->g);
            if (tr) st_trace_tensor_f64v(tr, ST_PHASE_GRAD, ST_TK_GRAD_NORM, 0, &gn, 1);
            /* Under a tracer a non-finite value is its business (it names the first label). */
            ST_REQUIRE((tr && tr->mode != ST_TRACE_OFF) || (isfinite(gn) && isfinite(ls.loss)), ST_ERR_NUMERIC,
                       "update %ld epoch %d minibatch %d: non-finite loss %g or gradient norm %g", t->update + 1, e,
                       b, ls.loss, gn);
            if (gn > c->max_grad_norm) st_grad_scale(t->table.total, t->g, c->max_grad_norm / gn);
            st_adamw_step(&t->table, t->w, t->g, t->adam_m, t->adam_v, &h, t->update * c->epochs * c->minibatches +
                                                                                 steps + 1);
            trace_optim(t);
            gn_sum += gn;
            steps++;
            acc.loss += ls.loss, acc.policy += ls.policy, acc.value += ls.value, acc.entropy += ls.entropy;
            acc.approx_kl += ls.approx_kl, acc.clipfrac += ls.clipfrac;
        }
        double inv = 1.0 / c->minibatches;
        s->loss = (st_ppo_stats){acc.loss * inv, acc.policy * inv, acc.value * inv, acc.entropy * inv,
                                 acc.approx_kl * inv, acc.clipfrac * inv};
    }
    t->update++;
    s->update = t->update;
    s->env_steps = t->env_steps;
    s->lr = lr;
    s->grad_norm = gn_sum / steps;
    s->seconds = now_seconds() - t0;
    return ST_OK;
}
