/* rollout_cuda.h: the PPO minibatch gather on the GPU (the CUDA twin of the
 * CPU trainer's gather in train/trainer.c, DESIGN section 6). For the mb
 * rollout indices idx[0..mb) into rollout arrays of N = T*B samples:
 *   mb_inst[i] = r_inst[k], mb_bar[i] = r_bar[k], mb_action[i] = r_action[k],
 *   mb_ctx[i, 0:C] = r_ctx[k, 0:C], mb_logp[i] = r_logp[k],
 *   mb_value[i] = r_value[k], mb_ret[i] = ret[k],          k = idx[i]
 *   mb_adv[i] = (adv[k] - mean) / (sd + 1e-8), mean and sd (n - 1 in the
 *   denominator; 1 when mb = 1) of adv over the minibatch, in double.
 * The mean and variance are summed in double in a fixed parallel order (one
 * block of 1024 threads: strided per-thread sums in index order, then a
 * fixed tree; no FMA contraction): the same bits from run to run, within
 * rounding of the CPU's sequential sums. Context rows are contiguous (row
 * stride C) on both sides. st_cuda_rollout_gather takes explicit indices and
 * runs in one block (copies included): for tests and the old trainer; it
 * gives the same bits as st_cuda_rollout_gather_at on the same indices.
 * Device pointers; stream a cudaStream_t (NULL: default). Returns ST_OK,
 * ST_ERR_INTERNAL (mb < 1 or C < 0) or ST_ERR_DEVICE. */
#ifndef ST_ROLLOUT_CUDA_H
#define ST_ROLLOUT_CUDA_H

#include <stddef.h>
#include <stdint.h>

int st_cuda_rollout_gather(int mb, int C, const int *idx, const int *r_inst, const int *r_bar, const int *r_action,
                           const float *r_ctx, const float *r_logp, const float *r_value, const float *ret,
                           const float *adv, int *mb_inst, int *mb_bar, int *mb_action, float *mb_ctx,
                           float *mb_logp, float *mb_value, float *mb_ret, float *mb_adv, void *stream);

/* The graph-friendly form: the indices are perm + (*k_dev) * mb, with k_dev
 * a DEVICE int32 read when the kernels run (NULL: k = 0), so one captured
 * training-step graph serves every minibatch of an update. The mean and
 * the variance are summed in a fixed parallel order in double (per-thread
 * strided sums, then a tree): the same bits from run to run, within
 * rounding of the host's sequential sums. work holds
 * st_cuda_rollout_gather_work_count() device doubles; after the call
 * work[0] = mean and work[1] = sd + 1e-8 (the divisor). Two launches: the
 * moments (one block), then the copies (a thread per context value). */
size_t st_cuda_rollout_gather_work_count(void);
int st_cuda_rollout_gather_at(int mb, int C, const int *perm, const int32_t *k_dev, const int *r_inst,
                              const int *r_bar, const int *r_action, const float *r_ctx, const float *r_logp,
                              const float *r_value, const float *ret, const float *adv, int *mb_inst, int *mb_bar,
                              int *mb_action, float *mb_ctx, float *mb_logp, float *mb_value, float *mb_ret,
                              float *mb_adv, double *work, void *stream);

#endif
