/* trainer_step_cuda.h: the GPU trainer's own small kernels (the glue of
 * train/trainer_cuda.c's CUDA graphs) and the device control block they
 * read.
 *
 * The action-step and training-step graphs are captured once and replayed
 * many times, so whatever changes between replays (the rollout step t, the
 * minibatch k, the Philox draw index, the learning rate and AdamW step) is
 * not a kernel argument but a word of st_cuda_ctrl in device memory: the
 * host writes it once per update (one async copy), and the graphs advance
 * it themselves with a one-thread kernel at their end.
 *
 *   record:  r_inst[t*B + b] = inst[b], r_bar[...] = bar[b],
 *            r_ctx[t*B + b, :] = ctx[b, :]     (the state the action sees)
 *   commit:  r_action, r_logp, r_value, r_reward, r_done, r_epR at t*B + b
 *            from the step's [B] outputs
 *   advance_act:   t += 1, draw_base += B, sub = t
 *   begin_train:   sub = k
 *   commit_train:  stats[k] = *stats1, gnorm[k] = *gnorm1, k += 1, opt_step += 1
 *   set_sub:       sub = value
 * All pointers are device pointers; stream a cudaStream_t (NULL: default).
 * Return ST_OK or ST_ERR_DEVICE. */
#ifndef ST_TRAINER_STEP_CUDA_H
#define ST_TRAINER_STEP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "train/adamw.h"    /* st_adamw_hparams */
#include "train/ppo_loss.h" /* st_ppo_stats */

typedef struct {
    int64_t update;     /* updates done before this one: the tracer's step */
    int32_t t;          /* rollout step of the next action-step replay */
    int32_t k;          /* minibatch (epoch * M + b) of the next training-step replay */
    int32_t sub;        /* the tracer's pass word (rollout step, minibatch, -1 or T) */
    int32_t pad_;
    uint64_t draw_base; /* Philox ACTION index of environment 0 at step t: (update*T + t)*B */
    double lr;          /* learning rate of this update */
    int64_t opt_step;   /* AdamW step count (from 1) of minibatch k */
} st_cuda_ctrl;

int st_cuda_step_record(int B, int C, const st_cuda_ctrl *ctrl, const int *inst, const int *bar, const float *ctx,
                        int ctx_stride, int *r_inst, int *r_bar, float *r_ctx, void *stream);

int st_cuda_step_commit(int B, const st_cuda_ctrl *ctrl, const int *action, const float *logp, const float *value,
                        const float *reward, const uint8_t *done, const float *ep_R, int *r_action, float *r_logp,
                        float *r_value, float *r_reward, uint8_t *r_done, float *r_epR, void *stream);

int st_cuda_step_advance_act(int B, st_cuda_ctrl *ctrl, void *stream);
int st_cuda_step_begin_train(st_cuda_ctrl *ctrl, void *stream);
int st_cuda_step_commit_train(st_cuda_ctrl *ctrl, const st_ppo_stats *stats1, const double *gnorm1,
                              st_ppo_stats *stats, double *gnorm, void *stream);
int st_cuda_step_set_sub(st_cuda_ctrl *ctrl, int32_t value, void *stream);

/* AdamW with the global-norm clip folded in, its learning rate and step
 * read from ctrl at run time (h gives betas, eps and weight decay; its lr
 * is ignored): per element, g' = g * (float)(max_norm / norm) when
 * *norm > max_norm (else g), then st_cuda_adamw_step's update with g'.
 * The gradient buffer is left unclipped (the tracer's grad labels are
 * pre-clip). The same bits as st_cuda_grad_clip then st_cuda_adamw_step. */
int st_cuda_adamw_clip_step(size_t n, float *w, const float *g, float *m, float *v, const unsigned char *decay,
                            const st_adamw_hparams *h, double max_norm, const double *norm, const st_cuda_ctrl *ctrl,
                            void *stream);

#endif
