/* gae_cuda.h: GAE and the rollout's statistics on the GPU (the CUDA twins
 * of train/gae.h and of the host trainer's rollout sums).
 *
 * st_cuda_gae: the recursion of gae.h, one thread per environment, in
 * double without FMA contraction (explicit __dadd_rn/__dmul_rn intrinsics,
 * in the host's order of operations): the host's bits. T = 0 or B = 0 is a
 * no-op.
 *
 * st_cuda_rollout_stats_compute over the N = T*B samples of a rollout (into
 * the struct st_cuda_rollout_stats; C has one name space for types and
 * functions, so the function cannot share the type's name), in double,
 * each sum in a fixed order (per-block trees, then one tree over the block
 * partials):
 * the same bits from run to run, within rounding of the host's sequential
 * sums:
 *   reward_sum = sum reward;  value_sum = sum value
 *   episodes = number of done;  ep_R_sum = sum of ep_R where done
 *   explained_var = 1 - Var(ret - value) / Var(ret)  (0 when Var(ret) = 0),
 *   the two-pass formula of st_explained_variance.
 * The arrays are [N] (the rollout's [T, B] flattened); ep_R[i] is the
 * return of the episode that ended with sample i, read only where done[i]
 * (elsewhere it may hold anything, NaN included). N >= 1. out is one device
 * struct, every field written. Four launches (two passes, each a grid of
 * block trees then one block over the block partials), no atomics, no
 * host read: capturable in a CUDA graph.
 * Device pointers; stream a cudaStream_t (NULL: default). Return ST_OK,
 * ST_ERR_INTERNAL (bad sizes) or ST_ERR_DEVICE. */
#ifndef ST_GAE_CUDA_H
#define ST_GAE_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double reward_sum, value_sum, ep_R_sum, explained_var;
    int64_t episodes;
} st_cuda_rollout_stats;

int st_cuda_gae(int T, int B, const float *reward, const float *value, const uint8_t *done, const float *last_value,
                double gamma, double lambda, float *adv, float *ret, void *stream);

/* Device doubles of the work buffer for N samples. */
size_t st_cuda_rollout_stats_work_count(int N);
int st_cuda_rollout_stats_compute(int N, const float *reward, const float *value, const uint8_t *done,
                                  const float *ep_R, const float *ret, st_cuda_rollout_stats *out, double *work,
                                  void *stream);

#endif
