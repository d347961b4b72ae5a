/* rollout_cuda.h: the PPO minibatch gather on the GPU (the CUDA twin of the
 * CPU trainer's gather in train/trainer.c, DESIGN section 6). For the mb
 * rollout indices idx[0..mb) into rollout arrays of N = T*B samples:
 *   mb_inst[i] = r_inst[k], mb_bar[i] = r_bar[k], mb_action[i] = r_action[k],
 *   mb_ctx[i, 0:C] = r_ctx[k, 0:C], mb_logp[i] = r_logp[k],
 *   mb_value[i] = r_value[k], mb_ret[i] = ret[k],          k = idx[i]
 *   mb_adv[i] = (adv[k] - mean) / (sd + 1e-8), mean and sd (n - 1 in the
 *   denominator; 1 when mb = 1) of adv over the minibatch, in double.
 * The mean and variance are summed by one thread in index order, as the CPU
 * does, so the result is bit-identical from run to run. Context rows are
 * contiguous (row stride C) on both sides. Device pointers; stream a
 * cudaStream_t (NULL: default). Returns ST_OK or ST_ERR_DEVICE. */
#ifndef ST_ROLLOUT_CUDA_H
#define ST_ROLLOUT_CUDA_H

int st_cuda_rollout_gather(int mb, int C, const int *idx, const int *r_inst, const int *r_bar, const int *r_action,
                           const float *r_ctx, const float *r_logp, const float *r_value, const float *ret,
                           const float *adv, int *mb_inst, int *mb_bar, int *mb_action, float *mb_ctx,
                           float *mb_logp, float *mb_value, float *mb_ret, float *mb_adv, void *stream);

#endif
