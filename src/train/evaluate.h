/* evaluate.h: the trained agent as a backtest policy (env/backtest.h).
 *
 * At each bar the policy builds the K-bar windows of every walking
 * instrument with the same window builder the trainer uses, runs the model
 * forward and acts greedily (argmax) or by sampling. A sampled draw at
 * (instrument i, bar t) is Philox(seed ^ ST_AGENT_SALT, ST_STREAM_EVAL,
 * (i << 32) | t), so it does not depend on the order of the walk. It also
 * accumulates the VSN selection weights of every row it evaluates: their
 * mean is the variable importance of the report. */
#ifndef ST_EVALUATE_H
#define ST_EVALUATE_H

#include <stdint.h>

#include "env/backtest.h"
#include "model/model.h"

#define ST_AGENT_SALT 0xA6E7A6E7ULL

typedef struct {
    st_model *model; /* sized for at least the instruments of the market */
    const st_market *m;
    int greedy;
    uint64_t seed;
    float *win, *logits, *value; /* scratch, sized for m->n_inst windows */
    double *importance;          /* [F] sums of alpha */
    long importance_rows;
} st_agent;

/* Allocates the scratch of an agent over model (float, max_windows >= m->n_inst). */
int st_agent_init(st_agent *a, st_model *model, const st_market *m, int greedy, uint64_t seed);
void st_agent_free(st_agent *a);
/* The st_policy_fn; user is an st_agent *. */
int st_agent_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions);

/* The host half of an agent's step, shared by the CPU agent and the GPU
 * one (train/evaluate_cuda.h): the draws and the rule for the e->B windows'
 * logits [B, A], and the importance sums of the walking instruments' rows
 * of alpha ([B*K, F], row stride alpha_stride). */
void st_agent_decide(const st_dims *d, const st_env *e, const float *logits, const float *alpha, int alpha_stride,
                     uint64_t seed, int greedy, int *actions, double *importance, long *importance_rows);

#endif
