/* evaluate_cuda.h: the trained agent as a backtest policy with the model on
 * the GPU (the CUDA twin of train/evaluate.h, used by `ssmtrade eval
 * --device cuda`).
 *
 * At each bar of the walk the B (instrument, bar) pairs and their context
 * rows go up to the device (B = the instruments walked: a few hundred bytes),
 * the K-bar windows are built there from the market's features (uploaded
 * once, cuda/window_cuda.h), the GPU model runs its forward (float32
 * products: cuda/linear_cuda.h's default precision; this file leaves the
 * precision switch alone), and the logits [B, A] and the VSN selection
 * weights [B*K, F] come back. Everything after that is st_agent_act's host
 * code, unchanged: the draw at (instrument i, bar t) is
 * Philox(seed ^ ST_AGENT_SALT, ST_STREAM_EVAL, (i << 32) | t), the actions
 * come from st_select_actions, and the selection weights of the rows of
 * walking instruments are summed in double in the same order. So the GPU
 * agent takes the CPU agent's decisions wherever two logits (or a logit
 * and a draw's threshold) are not within float rounding of each other.
 *
 * One synchronisation per bar (the download). Without the CUDA backend,
 * or without a device, init returns ST_ERR_DEVICE and act is never
 * reached. */
#ifndef ST_EVALUATE_CUDA_H
#define ST_EVALUATE_CUDA_H

#include <stdint.h>

#include "cuda/model_cuda.h"
#include "cuda/window_cuda.h"
#include "env/backtest.h"
#include "model/params.h"
#include "train/evaluate.h" /* ST_AGENT_SALT */

typedef struct {
    st_dims d;
    const st_market *m;
    int greedy;
    uint64_t seed;
    int max_B; /* instances one call may hold: m->n_inst */
    st_cuda_model model;
    st_cuda_features feat;
    int have_model, have_feat;
    /* device: parameters (a copy of the host weights) and the gradient
     * buffer the model binds (never written by a forward) */
    float *w, *g;
    /* device: one upload area [inst max_B | bar max_B | ctx max_B * C] */
    void *d_io;
    int *d_inst, *d_bar;
    float *d_ctx;
    float *d_win;    /* [max_B * K, F + C], row stride F + C */
    float *d_logits; /* [max_B, A] */
    float *d_value;  /* [max_B] */
    /* host (pinned): the upload staging, same layout as d_io */
    void *h_io;
    int *h_inst, *h_bar;
    float *h_ctx;
    /* host (pinned): the last call's downloads */
    float *logits; /* [max_B, A] */
    float *alpha;  /* [max_B * K, F] VSN selection weights */
    double *importance; /* [F] sums of alpha over the rows of walking instruments (host) */
    long importance_rows;
} st_cuda_agent;

/* Uploads the market's features and the weights w_host (t->total floats in
 * the layout of parameter table t; t must outlive the agent) and sizes the
 * GPU model and buffers for m->n_inst windows. d must be t's sizes and
 * d->F must equal m->F. ST_ERR_DEVICE when there is no usable GPU (or no
 * CUDA backend), ST_ERR_INPUT on mismatched sizes. On failure the agent
 * holds nothing (st_cuda_agent_free is still safe). */
int st_cuda_agent_init(st_cuda_agent *a, const st_dims *d, const st_param_table *t, const float *w_host,
                       const st_market *m, int greedy, uint64_t seed);
void st_cuda_agent_free(st_cuda_agent *a);

/* The st_policy_fn; user is an st_cuda_agent *. */
int st_cuda_agent_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions);

/* mean[j] = the mean selection weight of variable j over the rows seen so
 * far (importance[j] / importance_rows; 0 before any row): the variable
 * importance of the report, as cmd_eval computes it from an st_agent. */
void st_cuda_agent_importance(const st_cuda_agent *a, double *mean);

#endif
