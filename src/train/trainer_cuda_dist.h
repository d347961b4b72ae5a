/* trainer_cuda_dist.h: the data-parallel parts of the GPU trainer
 * (train/trainer_cuda.h, issue 8), used by trainer_cuda.c only.
 *
 * Layout. Rank r steps the global instances [r*Bl, (r+1)*Bl) and writes its
 * rollout [T][Bl] at r*Nl of the device rollout arrays (Nl = T*Bl); after
 * the rollout one all-gather per array gives every rank all of them, laid
 * out [rank][T][Bl]. The minibatch permutations are over the global sample
 * numbers t*B + b of one GPU, so the host maps each to its place in that
 * layout (st_cuda_dist_place) before the upload: the ranks gather the same
 * minibatches one GPU does. */
#ifndef ST_TRAINER_CUDA_DIST_H
#define ST_TRAINER_CUDA_DIST_H

#include "dist/dist.h"
#include "train/trainer_cuda.h"

/* ST_ERR_INPUT naming the flag when cfg's B or minibatch does not split
 * over dist's ranks; ST_OK for NULL or one rank. */
int st_cuda_dist_check(const st_train_config *cfg, const st_dist *dist);

/* Where global sample g = t*B + b lies in the gathered rollout. */
static inline int st_cuda_dist_place(const st_cuda_trainer *t, int g) {
    int B = t->host.cfg.dims.B, step = g / B, b = g % B;
    return (b / t->Bl) * t->Nl + step * t->Bl + b % t->Bl;
}

/* Every rank's rollout (instances, bars, contexts, actions, log-probs,
 * values, rewards, dones, episode R, advantages, returns) on every rank;
 * enqueued on the trainer's stream. */
int st_cuda_dist_gather_rollout(st_cuda_trainer *t);

/* This rank's slice of host.env and host.ctx to the device (no collective). */
int st_cuda_dist_push_env(st_cuda_trainer *t);
/* Every rank's instances and contexts into host.env and host.ctx
 * (collective; synchronous). */
int st_cuda_dist_pull_env(st_cuda_trainer *t);

/* The tracer's agreement (collective): *any = 1 when some rank's tracer
 * has tripped labels, *first_rank = the rank whose first trip is earliest
 * in (step, scan order counted from seq0, the tracer's scan count when the
 * update began: an injecting rank scans one label more per pass), the
 * lowest such rank on a tie. */
int st_cuda_dist_trips(st_cuda_trainer *t, int64_t seq0, int *any, int *first_rank);

/* *any = whether `mine` is nonzero on some rank (collective; synchronous;
 * *any = mine without ranks): the ranks stop together on a signal that
 * reached only some of them. */
int st_cuda_trainer_any(st_cuda_trainer *t, int mine, int *any);

#endif
