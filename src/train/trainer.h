/* trainer.h: PPO on the CPU backend (DESIGN section 6).
 *
 * One update = a rollout of T steps of B environments (the action step:
 * window build -> model forward -> sample -> environment step), GAE, then
 * E epochs of M minibatches of the clipped PPO loss with advantage
 * normalisation, global grad-norm clipping and AdamW under the schedule.
 * The rollout stores per step the (instrument, bar) of each environment and
 * its 16 context values, never the window: the training step rebuilds the
 * windows with the same builder the action step uses.
 *
 * Randomness is counter-based (Philox), so a run is a pure function of its
 * state: action draw (update u, step t, env b) is Philox(seed, ACTION,
 * (u*T + t)*B + b); epoch e's minibatch permutation draws from
 * Philox(seed, MINIBATCH, (u*E + e)*N + i). Resuming from a checkpoint of
 * (weights, moments, environment state, update counter) continues
 * bit-identically.
 *
 * NaN/Inf tracer (trace/trace.h): with a tracer attached the update calls
 * its hooks at every labelled tensor, in execution order (step_entry, then
 * per rollout step env/act, then GAE and per minibatch train, saved, bwd,
 * grad, optim), and a non-finite loss or gradient norm no longer aborts the
 * update: the tracer's driver (trace/guard.h) decides. Without one (the
 * default) each hook is a NULL check. */
#ifndef ST_TRAINER_H
#define ST_TRAINER_H

#include <stdint.h>

#include "data/market.h"
#include "env/env.h"
#include "model/model.h"
#include "model/params.h"
#include "train/ppo_loss.h"
#include "train/train_config.h"

struct st_trace;

typedef struct {
    long update;        /* 1-based number of the update just done */
    long env_steps;     /* environment steps so far */
    double lr;
    st_ppo_stats loss;  /* means over the minibatches of the last epoch */
    double grad_norm;   /* mean pre-clip global norm over all minibatches */
    double mean_reward; /* mean step reward of the rollout (R) */
    double mean_episode_R; /* mean final equity_R of the episodes that ended (NaN when none) */
    int episodes;       /* episodes that ended in the rollout */
    double mean_value;  /* mean value prediction of the rollout */
    double explained_var; /* 1 - Var(ret - value) / Var(ret) */
    double seconds;     /* wall time of the update */
} st_update_stats;

typedef struct {
    st_train_config cfg;
    const st_market *m;
    st_param_table table;
    float *w, *g, *adam_m, *adam_v; /* flat, table layout */
    st_model model;
    st_env env;
    long update;    /* updates done */
    long env_steps;
    int N, mb;      /* samples per rollout (T*B), minibatch size */
    /* rollout [T, B] */
    int *r_inst, *r_bar, *r_action;
    float *r_ctx; /* [T*B, C] */
    float *r_logp, *r_value, *r_reward, *adv, *ret;
    uint8_t *r_done;
    float *ctx;   /* [B, C] the environments' current context */
    float *last_value;
    /* minibatch / action-step scratch */
    int *perm, *mb_inst, *mb_bar, *mb_action;
    float *mb_ctx, *mb_logp, *mb_adv, *mb_value, *mb_ret;
    float *win;   /* [max(B, mb) * K, F + C], row stride win_stride */
    int win_stride; /* F + C, wider under poisoned padding */
    int pad;        /* poisoned padding of the window and the model's activations (0: none) */
    struct st_trace *trace; /* NaN/Inf tracer; NULL: off */
    float *logits, *value, *dlogits, *dvalue;
} st_trainer;

/* Builds the model, optimiser state and environments on the training split
 * of m (which must outlive t); weights initialised from cfg->seed. */
int st_trainer_init(st_trainer *t, const st_train_config *cfg, const st_market *m);
/* The same with the window and every model activation pad elements wider
 * than their rows, the gap holding the tracer's tagged NaN (poisoned
 * padding, DESIGN section 8); pad = 0 is st_trainer_init. */
int st_trainer_init_padded(st_trainer *t, const st_train_config *cfg, const st_market *m, int pad);
/* The host side of a GPU trainer: config, parameter table, weights (from
 * cfg->seed), AdamW moments, environments and the rollout arrays, but no
 * CPU model, window or minibatch buffers (st_trainer_update must not be
 * called on it; st_checkpoint_save / restore work). */
int st_trainer_init_host(st_trainer *t, const st_train_config *cfg, const st_market *m);
/* Attaches a tracer (NULL detaches) to the trainer and its model. */
void st_trainer_set_trace(st_trainer *t, struct st_trace *tr);
void st_trainer_free(st_trainer *t);
/* One rollout and PPO update. */
int st_trainer_update(st_trainer *t, st_update_stats *s);

/* Epoch e's minibatch permutation of the rollout into t->perm:
 * Fisher-Yates with Philox(seed, MINIBATCH, (u*E + e)*N + i) over the
 * rollout's segments (cfg.segment = S consecutive steps of one
 * environment; S = 1: the samples themselves), each segment's samples
 * then in time order. Shared by the CPU and GPU trainers so both visit the
 * same minibatches. */
void st_trainer_permutation(st_trainer *t, int epoch);
/* 1 - Var(ret - value) / Var(ret) (0 when Var(ret) is 0). */
double st_explained_variance(const float *value, const float *ret, int n);

/* The training environments' config of c: episode length, stop, costs,
 * risk, the training split, the run's seed, auto-reset. */
st_env_config st_trainer_env_config(const st_train_config *c);

/* Actions of n windows from their logits: greedy (argmax) or sampled with
 * the uniforms u[i] in [0, 1). logp[i] (may be NULL) = log pi(action). */
void st_select_actions(int n, int A, const float *logits, const double *u, int greedy, int *action, float *logp);

#endif
