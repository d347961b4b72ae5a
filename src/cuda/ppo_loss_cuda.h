/* ppo_loss_cuda.h: the PPO loss pieces and their gradients on the GPU (the
 * CUDA twin of train/ppo_loss.h, DESIGN section 6). Per sample i of n:
 *   logp = log_softmax(logits)[a];  ratio = exp(logp - old_logp)
 *   policy  = -min(ratio adv, clip(ratio, 1-clip, 1+clip) adv)
 *   entropy = -sum_j p_j log p_j
 *   value   = 0.5 max((v - ret)^2, (v_clip - ret)^2),
 *             v_clip = old_v + clip(v - old_v, -vclip, vclip)  (plain 0.5 (v-ret)^2 when vclip <= 0)
 *   loss = mean(policy) + vf_coef mean(value) - ent_coef mean(entropy)
 * dlogits [n, A] (row stride) and dvalue [n] are written with the gradient
 * of `loss` (the 1/n included). One thread per sample, in double as the CPU
 * op; the statistics are per-block sums in a fixed tree, then one ordered
 * sum of the blocks: bit-identical from run to run. logits has a row stride;
 * action, old_logp, adv, value, old_value, ret are contiguous [n]. All
 * pointers are device pointers, including stats (one st_ppo_stats, written
 * on the device so that no host synchronisation is needed); the coefficients
 * are read on the host at the call. n > 0 (the means divide by it; n <= 0 is
 * ST_ERR_INTERNAL). Returns ST_OK or ST_ERR_DEVICE. */
#ifndef ST_PPO_LOSS_CUDA_H
#define ST_PPO_LOSS_CUDA_H

#include <stddef.h>

#include "train/ppo_loss.h" /* st_ppo_coefs, st_ppo_stats (precision-free structs) */

/* Device doubles of the work buffer for a minibatch of n samples. */
size_t st_cuda_ppo_loss_work_count(int n);

/* out[i, j] = logits[i, j] - logsumexp(logits[i, :]) (max subtracted). */
int st_cuda_log_softmax(int n, int A, const float *logits, int logits_stride, float *out, int out_stride, void *stream);

int st_cuda_ppo_loss(int n, int A, const float *logits, int logits_stride, const int *action, const float *old_logp,
                     const float *adv, const float *value, const float *old_value, const float *ret,
                     const st_ppo_coefs *k, st_ppo_stats *stats, float *dlogits, int dlogits_stride, float *dvalue,
                     double *work, void *stream);

#endif
