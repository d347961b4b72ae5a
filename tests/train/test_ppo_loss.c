/* test_ppo_loss.c: PPO loss pieces in float64: gradients of the total loss
 * with respect to logits and values by central differences, in all clip
 * regimes; statistics against hand-computed values; log-softmax stability. */
#define ST_REAL_BITS 64
#include "check/gradcheck.h"
#include "train/ppo_loss.h"
#include "test.h"

enum { N = 64, A = 3 };

typedef struct {
    double logits[N * A], old_logp[N], adv[N], value[N], old_value[N], ret[N];
    int action[N];
    st_ppo_coefs k;
} batch;

static double loss_fn(void *p) {
    batch *b = p;
    st_ppo_stats s;
    double dl[N * A], dv[N];
    st_ppo_loss(N, A, b->logits, A, b->action, b->old_logp, b->adv, b->value, b->old_value, b->ret, &b->k, &s, dl,
                A, dv);
    return s.loss;
}

int main(void) {
    batch b;
    st_gc_randn(b.logits, N * A, 1.0, 3, 1);
    st_gc_randn(b.adv, N, 1.0, 3, 2);
    st_gc_randn(b.value, N, 1.0, 3, 3);
    st_gc_randn(b.old_value, N, 1.0, 3, 4);
    st_gc_randn(b.ret, N, 1.0, 3, 5);
    double noise[N];
    st_gc_randn(noise, N, 0.4, 3, 6); /* old policy differs: ratios spread across the clip range */
    double lsm[N * A];
    st_log_softmax(N, A, b.logits, A, lsm, A);
    for (int i = 0; i < N; i++) {
        b.action[i] = i % A;
        b.old_logp[i] = lsm[i * A + b.action[i]] + noise[i];
    }
    b.k = (st_ppo_coefs){.clip = 0.2, .vclip = 0.5, .vf_coef = 0.5, .ent_coef = 0.01};
    st_ppo_stats s;
    double dl[N * A], dv[N];
    st_ppo_loss(N, A, b.logits, A, b.action, b.old_logp, b.adv, b.value, b.old_value, b.ret, &b.k, &s, dl, A, dv);
    printf("loss %.6f policy %.6f value %.6f entropy %.6f kl %.6f clipfrac %.3f\n", s.loss, s.policy, s.value,
           s.entropy, s.approx_kl, s.clipfrac);
    CHECK(s.clipfrac > 0.1 && s.clipfrac < 0.9, "test batch should exercise both clip regimes (clipfrac %.2f)",
          s.clipfrac);
    CHECK_GRAD("dlogits", st_gc_tensor(loss_fn, &b, b.logits, N, A, A, dl, A, 1000, 1), ST_GC_BOUND);
    CHECK_GRAD("dvalue", st_gc_tensor(loss_fn, &b, b.value, 1, N, N, dv, N, 1000, 1), ST_GC_BOUND);
    b.k.vclip = 0;
    st_ppo_loss(N, A, b.logits, A, b.action, b.old_logp, b.adv, b.value, b.old_value, b.ret, &b.k, &s, dl, A, dv);
    CHECK_GRAD("dvalue (no value clip)", st_gc_tensor(loss_fn, &b, b.value, 1, N, N, dv, N, 1000, 1), ST_GC_BOUND);

    /* Hand-computed: uniform logits, ratio 1, entropy log 3, kl 0. */
    double z[A] = {0.5, 0.5, 0.5}, olp = -log(3.0), adv = 2, v = 1, ov = 1, r = 3, dz[A], dvv;
    int a = 1;
    st_ppo_coefs k = {0.2, 0.2, 0.5, 0.01};
    st_ppo_loss(1, A, z, A, &a, &olp, &adv, &v, &ov, &r, &k, &s, dz, A, &dvv);
    CHECK(fabs(s.policy + 2) < 1e-12 && fabs(s.entropy - log(3.0)) < 1e-12 && fabs(s.approx_kl) < 1e-12 &&
              fabs(s.value - 2) < 1e-12 && s.clipfrac == 0,
          "hand values: policy %g entropy %g kl %g value %g", s.policy, s.entropy, s.approx_kl, s.value);

    /* log-softmax with huge logits stays finite and normalised. */
    double big[A] = {1e30, -1e30, 0}, out[A];
    st_log_softmax(1, A, big, A, out, A);
    CHECK(out[0] == 0 && out[1] < -1e29 && out[2] < -1e29, "huge logits: %g %g %g", out[0], out[1], out[2]);
    CHECK(isfinite(out[0]) && isfinite(out[1]) && isfinite(out[2]), "log-softmax finite for huge logits");
    TEST_MAIN_END();
}
