/* ppo_loss.h: the PPO loss pieces, forward and backward in one pass
 * (DESIGN section 6). Per sample i of a minibatch of n:
 *   logp = log_softmax(logits)[a];  ratio = exp(logp - old_logp)
 *   policy  = -min(ratio adv, clip(ratio, 1-clip, 1+clip) adv)
 *   entropy = -sum_j p_j log p_j
 *   value   = 0.5 max((v - ret)^2, (v_clip - ret)^2),
 *             v_clip = old_v + clip(v - old_v, -vclip, vclip)  (plain 0.5 (v-ret)^2 when vclip <= 0)
 *   loss = mean(policy) + vf_coef mean(value) - ent_coef mean(entropy)
 * Advantages arrive already normalised. dlogits and dvalue are written with
 * the gradient of `loss` (the 1/n included). */
#ifndef ST_PPO_LOSS_H
#define ST_PPO_LOSS_H

#include "core/real.h"

#define st_log_softmax ST_R(st_log_softmax)
#define st_ppo_loss ST_R(st_ppo_loss)

typedef struct {
    double clip;     /* policy ratio clip epsilon (0.2) */
    double vclip;    /* value clip (0.2; <= 0 disables) */
    double vf_coef;  /* value loss weight (0.5) */
    double ent_coef; /* entropy bonus weight (0.01) */
} st_ppo_coefs;

typedef struct {
    double loss, policy, value, entropy;
    double approx_kl; /* mean((ratio - 1) - log ratio), always >= 0 */
    double clipfrac;  /* share of samples with |ratio - 1| > clip */
} st_ppo_stats;

/* out[i, j] = logits[i, j] - logsumexp(logits[i, :]) (max subtracted). */
void st_log_softmax(int n, int A, const real *logits, int logits_stride, real *out, int out_stride);

void st_ppo_loss(int n, int A, const real *logits, int logits_stride, const int *action, const real *old_logp,
                 const real *adv, const real *value, const real *old_value, const real *ret, const st_ppo_coefs *k,
                 st_ppo_stats *stats, real *dlogits, int dlogits_stride, real *dvalue);

#endif
