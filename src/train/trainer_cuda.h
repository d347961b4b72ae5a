/* trainer_cuda.h: PPO entirely on the GPU (`--device cuda`, DESIGN sections
 * 6-8; issue 6): environments, windows, model, action sampling, GAE, loss,
 * backward, clipping and AdamW all run on the device, driven by three CUDA
 * graphs captured once and replayed:
 *   act    one rollout step: record the environments' (instrument, bar,
 *          context) into the rollout slot t, the B windows' feature-row
 *          index (no window is built), forward from it and the context,
 *          sample the actions (Philox ACTION stream, index (u*T + t)*B + b,
 *          the CPU trainer's rule), step the GPU environments, commit the
 *          step's actions, log-probabilities, values, rewards and dones to
 *          slot t, advance t.                            replayed T times
 *   post   the bootstrap value (the same forward at the state after the
 *          last step), GAE, the rollout's statistics.     replayed once
 *   train  one minibatch k: gather perm[k*mb .. (k+1)*mb) with advantage
 *          normalisation, rebuild the windows with the same builder,
 *          forward, PPO loss, zero and accumulate the gradients, global norm,
 *          AdamW with the clip folded in, keep the minibatch's loss
 *          statistics and norm in slot k, advance k.      replayed E*M times
 * With ranks (st_cuda_trainer_init_dist) the collectives run between graph
 * replays: the rollout's all-gathers (and then its statistics) after post,
 * and per minibatch the gradient's mean all-reduce between train, which
 * then ends at the gradient, and a fourth graph, opt (scans of the
 * gradient, global norm, clip and AdamW, the minibatch's slot).
 * What differs between replays lives in a device control block
 * (cuda/trainer_step_cuda.h), written once per update. The minibatch
 * permutations are the CPU trainer's (Philox MINIBATCH Fisher-Yates, host),
 * computed while the rollout runs and uploaded once per update. The host
 * synchronises once per update, to read the statistics back.
 *
 * Same seed, same machine: bit-identical runs (every device reduction has a
 * fixed order). Against the CPU trainer: the same draws and rules, so the
 * same actions except at float ties; weights within float rounding.
 *
 * The host side is a plain st_trainer made by st_trainer_init_host
 * (`host`: config, parameter table, environments, rollout arrays,
 * counters; no CPU model), so checkpoints and evaluation reuse the CPU code:
 *   save:    st_cuda_trainer_sync_host(&t); st_checkpoint_save(path, &t.host);
 *   restore: st_checkpoint_restore(f, &t.host); st_cuda_trainer_push_host(&t);
 * host.w / adam_m / adam_v / env / ctx are NOT kept current during training
 * (the device holds the truth); sync_host copies them down.
 *
 * Matrix products run in the precision of cfg->precision ("fp32" | "bf16",
 * cuda/linear_cuda.h), fixed when the graphs are captured.
 *
 * NaN/Inf tracer (st_cuda_trainer_set_trace): scans run on the device
 * inside the graphs (cuda/trace_cuda.h) and the records come back with the
 * statistics. full: every label the GPU step has (the CPU's, less the
 * `saved` regions, whose layout is the CPU model's); sentinel: the scalars
 * (rewards, values, loss, grad norm) and the weights and moments after each
 * optimiser step, with the pre-step state kept on the device so that a trip
 * replays the update with full scans and names the first label; off with
 * an --inject: only the injection. On a trip the trainer is back at its
 * pre-step state and the update returns ST_ERR_NUMERIC (tr->tripped = 1).
 * Without a tracer a non-finite loss or gradient norm is ST_ERR_NUMERIC
 * after the update. Without the CUDA backend every function but free
 * returns ST_ERR_DEVICE. */
#ifndef ST_TRAINER_CUDA_H
#define ST_TRAINER_CUDA_H

#include <stdint.h>

#include "cuda/env_cuda.h"
#include "cuda/gae_cuda.h"
#include "cuda/model_cuda.h"
#include "cuda/trace_cuda.h"
#include "cuda/trainer_step_cuda.h"
#include "cuda/window_cuda.h"
#include "train/trainer.h"

struct st_dist;

typedef struct {
    st_trainer host; /* config, table, environments, rollout arrays, counters */
    /* data parallel (NULL dist: one GPU, rank 0 of 1): this rank steps the
     * global instances [b0, b0 + Bl) (Bl = B / world), writes its rollout at
     * roff = rank * Nl (Nl = T * Bl) of the gathered arrays and trains on its
     * ml = mb / world windows of each global minibatch */
    struct st_dist *dist;
    int rank, world, Bl, b0, Nl, roff, ml;
    void *g_env;  /* device gather buffer of the ranks' environment blocks [world][env_stride] */
    size_t env_stride;
    float *g_ctx; /* [B, C] device gather buffer of the ranks' contexts */
    int64_t *g_word; /* [world * 4] device words of the tracer's agreement */
    st_cuda_model model;
    st_cuda_features feat;
    st_cuda_env env;
    int bf16;
    void *stream;                /* cudaStream_t of every launch and capture */
    void *exec[3][4];            /* cudaGraphExec_t [scan level][act, post, train, opt] */
    int mw;                      /* max(B, minibatch): windows the device buffers hold */
    st_cuda_ctrl *ctrl, *h_ctrl; /* device control block and its pinned host staging */
    /* flat device parameters, gradients, AdamW moments, decay mask */
    float *w, *g, *adam_m, *adam_v;
    unsigned char *decay;
    /* device rollout [T*B]; perm [E*N] */
    int *r_inst, *r_bar, *r_action, *perm;
    float *r_ctx, *r_logp, *r_value, *r_reward, *r_epR, *adv, *ret;
    uint8_t *r_done;
    /* the action step [B] */
    float *ctx; /* [B, C] the environments' current context */
    int *a_action;
    float *a_logp, *a_reward, *a_epR, *last_value;
    uint8_t *a_done;
    /* the action step's observation, no window: the feature row of each
     * of its windows' rows [B K] (st_cuda_window_feature_rows; the
     * forward reads features and context through it,
     * st_cuda_model_forward_rows); its bar table [feat.rows, F Dv]
     * (NULL: none, st_cuda_trainer_set_bar_table), indexed by the same
     * rows; tab_built: run_update has built it, so the action phase's
     * forwards read it */
    int *act_row;
    float *tab;
    int tab_built;
    /* the training step's bar table (cuda/model_cuda.h, st_cuda_model_train_table_wanted; it
     * borrows tab's storage where there is one): mb_rows [mw K] each minibatch row's feature
     * row, NULL when the training step runs the VSN a row */
    int *mb_rows;
    /* the minibatch [mw] */
    int *mb_inst, *mb_bar, *mb_action;
    float *mb_ctx, *mb_logp, *mb_value, *mb_ret, *mb_adv;
    float *win; /* [mw * K, F + C]: the training step's windows (the action step's only for its label's scan) */
    float *logits, *value, *dlogits, *dvalue;
    double *loss_work, *norm_work, *gather_work, *stats_work;
    st_ppo_stats *stats1, *stats; /* this minibatch's / [E*M] */
    double *gnorm1, *gnorm;       /* pre-clip norms, this minibatch's / [E*M] */
    st_cuda_rollout_stats *rstats;
    /* pinned host staging of the per-update readback and the permutations */
    int *h_perm;
    st_ppo_stats *h_stats;
    double *h_gnorm;
    st_cuda_rollout_stats *h_rstats;
    /* tracer */
    struct st_trace *trace; /* host tracer (labels, mode, report); NULL: none */
    st_cuda_trace dtrace;
    int scan_level;                   /* of the graph being captured: 0 none, 1 sentinel, 2 full */
    float *snap_w, *snap_m, *snap_v; /* pre-step state (sentinel / full) */
    float *snap_ctx;
    void *snap_env;
} st_cuda_trainer;

/* Host side (weights from cfg->seed, environments reset) and the device
 * state: features, environments (the same reset), weights (zero moments),
 * buffers. ST_ERR_INPUT when the minibatch's activations do not fit in the
 * GPU's free memory (the message says how many minibatches would). */
int st_cuda_trainer_init(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m);
/* The same as rank dist->rank of dist->world (data parallel, issue 8): the
 * host side is the whole run's (B instances, N = T*B samples, checkpoints
 * as one GPU's), the device steps this rank's B / world instances, and
 * every update all-gathers the rollout, averages each minibatch's gradient
 * over the ranks and the loss statistics, so every rank keeps the same
 * weights and the run equals one GPU's within float rounding (the same
 * draws, the same minibatches, each rank's share of a minibatch's windows).
 * ST_ERR_INPUT when B or the minibatch does not split evenly over the
 * ranks. dist NULL or of one rank: st_cuda_trainer_init. dist must outlive
 * t; every rank calls update, sync_host, push_host and set_trace at the
 * same points (they hold collectives); the tracer's ranks agree on a trip
 * and each names the rank where the first non-finite value appeared. */
int st_cuda_trainer_init_dist(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m,
                              struct st_dist *dist);
void st_cuda_trainer_free(st_cuda_trainer *t);

/* 1 (the default): trainers made after this call give the action step a
 * bar table where it fits (cuda/model_cuda.h); 0: none (the tests compare
 * the two: the same bits). */
void st_cuda_trainer_set_bar_table(int on);
/* One rollout and PPO update (the stats of st_trainer_update). */
int st_cuda_trainer_update(st_cuda_trainer *t, st_update_stats *s);

/* Attaches host tracer tr (st_trace_init with this trainer's label sizes:
 * st_cuda_trainer_label_sizes; NULL detaches). Graphs are recaptured. */
int st_cuda_trainer_set_trace(st_cuda_trainer *t, struct st_trace *tr);
/* Label sizes of this trainer (minibatch, no padding). */
void st_cuda_trainer_label_sizes(const st_cuda_trainer *t, st_label_sizes *z);

/* Copies the device weights and AdamW moments into host buffers of
 * table.total floats (any NULL: skipped), and back up. */
int st_cuda_trainer_download(const st_cuda_trainer *t, float *w, float *adam_m, float *adam_v);
int st_cuda_trainer_upload(st_cuda_trainer *t, const float *w, const float *adam_m, const float *adam_v);
/* host.w, adam_m, adam_v, env and ctx <- device (before a checkpoint or evaluation). */
int st_cuda_trainer_sync_host(st_cuda_trainer *t);
/* device <- host.w, adam_m, adam_v, env and ctx (after st_checkpoint_restore). */
int st_cuda_trainer_push_host(st_cuda_trainer *t);
/* host.r_* (inst, bar, ctx, action, logp, value, reward, done), adv, ret
 * and last_value <- the device rollout of the last update (tests). With
 * ranks the arrays are in the gathered layout [rank][T][B / world] and
 * last_value is this rank's B / world. */
int st_cuda_trainer_download_rollout(st_cuda_trainer *t);

#endif
