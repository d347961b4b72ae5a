/* trainer_cuda.h: PPO with the model, the loss and the optimiser on the GPU
 * (`--device cuda`, DESIGN sections 6-7; issue 6, first increment).
 *
 * The same update as train/trainer.h, step for step and draw for draw:
 *  - rollout of T steps x B environments. The environments stay on the CPU
 *    (st_env); per step the B (instrument, bar) pairs and context rows go to
 *    the device, the windows are built there (st_cuda_window_build over the
 *    uploaded features), st_cuda_model_forward gives logits and values, the
 *    logits come back and the actions are drawn on the host with the CPU
 *    trainer's rule (st_select_actions) and uniforms (Philox ACTION stream,
 *    index (u*T + t)*B + b), then the CPU environment steps;
 *  - GAE on the host (st_gae; T*B floats), then the rollout goes up once;
 *  - E epochs x M minibatches entirely on the device: the minibatch gather
 *    with advantage normalisation (st_cuda_rollout_gather, indices from the
 *    CPU trainer's Philox MINIBATCH permutation, computed on the host and
 *    uploaded once per epoch), window rebuild with the same builder,
 *    forward, st_cuda_ppo_loss, backward, st_cuda_grad_norm + clip,
 *    st_cuda_adamw_step with the table's decay mask; the loss statistics and
 *    grad norms come back once per update.
 * Every device reduction has a fixed order, so two runs give the same bits.
 *
 * The host side is a plain st_trainer (`host`): its config, parameter
 * table, environments, rollout arrays and counters are the GPU trainer's
 * own, so checkpoints and evaluation reuse the CPU code unchanged:
 *   save:    st_cuda_trainer_sync_host(&t); st_checkpoint_save(path, &t.host);
 *   restore: st_checkpoint_restore(f, &t.host); st_cuda_trainer_push_host(&t);
 *   eval:    st_cuda_trainer_sync_host(&t); then t.host.w as the CPU weights.
 * host.w / host.adam_m / host.adam_v are NOT kept current during training
 * (the device holds the truth); sync_host copies them down. The host
 * trainer's CPU model is allocated but unused (its activation memory is the
 * price of reusing st_trainer_init; a later increment can drop it).
 *
 * A non-finite loss or gradient norm is reported (ST_ERR_NUMERIC) after the
 * update, since the statistics come back once per update; the CPU trainer
 * stops before the offending optimiser step. The NaN/Inf tracer is not
 * supported on this backend yet. Without the CUDA backend every function
 * but free returns ST_ERR_DEVICE. */
#ifndef ST_TRAINER_CUDA_H
#define ST_TRAINER_CUDA_H

#include "cuda/model_cuda.h"
#include "cuda/window_cuda.h"
#include "train/trainer.h"

typedef struct {
    st_trainer host; /* config, table, environments, rollout arrays, counters */
    st_cuda_model model;
    st_cuda_features feat;
    int mw; /* max(B, minibatch): windows the device buffers hold */
    /* flat device parameters, gradients, AdamW moments, decay mask */
    float *w, *g, *adam_m, *adam_v;
    unsigned char *decay;
    /* device rollout [T*B] */
    int *r_inst, *r_bar, *r_action, *perm;
    float *r_ctx, *r_logp, *r_value, *adv, *ret;
    /* device minibatch / action-step scratch [mw] */
    int *mb_inst, *mb_bar, *mb_action;
    float *mb_ctx, *mb_logp, *mb_value, *mb_ret, *mb_adv;
    float *win; /* [mw * K, F + C] */
    float *logits, *value, *dlogits, *dvalue;
    double *loss_work, *norm_work;
    st_ppo_stats *stats; /* [E*M] per minibatch (device) */
    double *gnorm;       /* [E*M] pre-clip grad norms (device) */
    float *h_logits;     /* host [B, A]: the action step's logits */
} st_cuda_trainer;

/* The CPU trainer's init (weights from cfg->seed, environments reset), then
 * the device copies: features, weights (zero moments), buffers. */
int st_cuda_trainer_init(st_cuda_trainer *t, const st_train_config *cfg, const st_market *m);
void st_cuda_trainer_free(st_cuda_trainer *t);
/* One rollout and PPO update (the stats of st_trainer_update). */
int st_cuda_trainer_update(st_cuda_trainer *t, st_update_stats *s);

/* Copies the device weights and AdamW moments into host buffers of
 * table.total floats (any NULL: skipped), and back up. */
int st_cuda_trainer_download(const st_cuda_trainer *t, float *w, float *adam_m, float *adam_v);
int st_cuda_trainer_upload(st_cuda_trainer *t, const float *w, const float *adam_m, const float *adam_v);
/* t->host.w, adam_m, adam_v <- device (before a checkpoint or evaluation). */
int st_cuda_trainer_sync_host(st_cuda_trainer *t);
/* device <- t->host.w, adam_m, adam_v (after st_checkpoint_restore). */
int st_cuda_trainer_push_host(st_cuda_trainer *t);

#endif
