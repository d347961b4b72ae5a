/* ppo_loss.c: clipped surrogate, clipped value loss and entropy with their
 * gradients (see ppo_loss.h for the math). Sums run in sample order in
 * double, so the statistics are deterministic. */
#include "core/real.h"

#include <math.h>

#include "train/ppo_loss.h"

void st_log_softmax(int n, int A, const real *logits, int logits_stride, real *out, int out_stride) {
    for (int i = 0; i < n; i++) {
        const real *z = logits + (size_t)i * logits_stride;
        real *o = out + (size_t)i * out_stride;
        double mx = z[0];
        for (int j = 1; j < A; j++) mx = z[j] > mx ? z[j] : mx;
        double s = 0;
        for (int j = 0; j < A; j++) s += exp((double)z[j] - mx);
        double lse = mx + log(s);
        for (int j = 0; j < A; j++) o[j] = (real)((double)z[j] - lse);
    }
}

void st_ppo_loss(int n, int A, const real *logits, int logits_stride, const int *action, const real *old_logp,
                 const real *adv, const real *value, const real *old_value, const real *ret, const st_ppo_coefs *k,
                 st_ppo_stats *stats, real *dlogits, int dlogits_stride, real *dvalue) {
    double sp = 0, sv = 0, se = 0, skl = 0, sclip = 0, inv = 1.0 / n;
    for (int i = 0; i < n; i++) {
        const real *z = logits + (size_t)i * logits_stride;
        real *dz = dlogits + (size_t)i * dlogits_stride;
        /* log-probabilities, max subtracted */
        double mx = z[0];
        for (int j = 1; j < A; j++) mx = z[j] > mx ? z[j] : mx;
        double s = 0;
        for (int j = 0; j < A; j++) s += exp((double)z[j] - mx);
        double lse = mx + log(s), ent = 0;
        for (int j = 0; j < A; j++) {
            double lp = (double)z[j] - lse;
            ent -= exp(lp) * lp;
        }
        int a = action[i];
        double logp = (double)z[a] - lse;
        double lr = logp - (double)old_logp[i], ratio = exp(lr), A_i = adv[i];
        double rc = ratio < 1 - k->clip ? 1 - k->clip : (ratio > 1 + k->clip ? 1 + k->clip : ratio);
        double unclipped = ratio * A_i, clipped = rc * A_i;
        sp += -(unclipped < clipped ? unclipped : clipped);
        /* d min / d ratio: adv where the unclipped term is the min or the ratio is inside the clip range */
        double dratio = (unclipped <= clipped || (ratio >= 1 - k->clip && ratio <= 1 + k->clip)) ? A_i : 0;
        double dlogp = -dratio * ratio * inv;
        skl += (ratio - 1) - lr;
        sclip += fabs(ratio - 1) > k->clip;
        se += ent;
        for (int j = 0; j < A; j++) {
            double lp = (double)z[j] - lse, p = exp(lp);
            double g = dlogp * ((j == a) - p);
            g += k->ent_coef * inv * p * (lp + ent); /* d(-ent_coef H)/dz_j = ent_coef p_j (log p_j + H) */
            dz[j] = (real)g;
        }
        /* value loss */
        double v = value[i], r = ret[i], dv;
        if (k->vclip > 0) {
            double dlt = v - (double)old_value[i];
            int inside = dlt > -k->vclip && dlt < k->vclip;
            double vc = inside ? v : (double)old_value[i] + (dlt < 0 ? -k->vclip : k->vclip);
            double e1 = (v - r) * (v - r), e2 = (vc - r) * (vc - r);
            if (e1 >= e2) {
                sv += 0.5 * e1;
                dv = v - r;
            } else {
                sv += 0.5 * e2;
                dv = inside ? vc - r : 0;
            }
        } else {
            sv += 0.5 * (v - r) * (v - r);
            dv = v - r;
        }
        dvalue[i] = (real)(k->vf_coef * inv * dv);
    }
    stats->policy = sp * inv;
    stats->value = sv * inv;
    stats->entropy = se * inv;
    stats->approx_kl = skl * inv;
    stats->clipfrac = sclip * inv;
    stats->loss = stats->policy + k->vf_coef * stats->value - k->ent_coef * stats->entropy;
}
