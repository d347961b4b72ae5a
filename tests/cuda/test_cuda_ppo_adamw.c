/* test_cuda_ppo_adamw.c: the GPU PPO loss (cuda/ppo_loss_cuda.h) and AdamW
 * with grad-norm clipping (cuda/adamw_cuda.h) against the CPU float ops
 * (train/ppo_loss.h, train/adamw.h).
 * PPO, for minibatches of 10 to 4096 samples (1 to 16 blocks), value clip
 * on and off, padded logits rows, A = 3 and A = 5:
 *  - dlogits and dvalue within 1e-4 relative (both in double, rounded to
 *    float once: in practice equal or an ulp apart);
 *  - the six statistics within 1e-9 relative (sums of the same doubles in
 *    another order: ~1e-15), and the case does clip some samples;
 *  - log_softmax within 1e-5;
 *  - no write into the logits gradient's row gaps; two runs, same bits.
 * AdamW over the parameter tables of the tiny, odd and default presets
 * (22k to 551k elements), two consecutive steps from a random state:
 *  - w, m, v within 1e-5 relative, and the change of w within 1e-4 of the
 *    CPU's change (an ulp of w over a step of lr ~ 1e-2: ~1e-5);
 *  - the decay mask follows the table (weight decay 0.1 is visible: a
 *    wrong mask moves w by ~10% of its step);
 *  - the grad norm within 1e-10 (double sums in another order: the CPU's
 *    sequential sum of 5e5 squares is ~sqrt(n) eps ~ 1e-13 off); clipping
 *    with a bound below the norm within 1e-6 of the CPU's scaling (the
 *    factor may round an ulp apart), above the norm bit-identical (no-op);
 *    grad_scale bit-identical; two runs, same bits.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/params.h"
#include "train/adamw.h"
#include "train/ppo_loss.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/adamw_cuda.h"
#include "cuda/ppo_loss_cuda.h"
#endif

#ifdef ST_HAVE_CUDA

static int same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* |a - b| / |b| (absolute below 1e-300). */
static double rel_diff(double a, double b) { return fabs(b) > 1e-300 ? fabs(a - b) / fabs(b) : fabs(a - b); }

/* norm(gpu - cpu) / norm(cpu - init) over n values: the error of a change. */
static double rel_err_change(const float *gpu, const float *cpu, const float *init, size_t n) {
    double d = 0, s = 0;
    for (size_t k = 0; k < n; k++) {
        if (gpu[k] != gpu[k]) return INFINITY;
        d += ((double)gpu[k] - cpu[k]) * ((double)gpu[k] - cpu[k]);
        s += ((double)cpu[k] - init[k]) * ((double)cpu[k] - init[k]);
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* ---- PPO loss ---- */

typedef struct {
    const char *name;
    int n, A, pad;
    double vclip;
} ppo_case;

typedef struct {
    int ls;
    float *logits, *old_logp, *adv, *value, *old_value, *ret;
    int *action;
} ppo_data;

typedef struct {
    float *dlogits, *dvalue, *logp;
    st_ppo_stats stats;
} ppo_out;

static void ppo_gpu(const ppo_case *c, const ppo_data *h, const st_ppo_coefs *k, ppo_out *o) {
    int n = c->n;
    size_t nl = (size_t)n * h->ls;
    float *logits = dev_upload(h->logits, nl), *old_logp = dev_upload(h->old_logp, n), *adv = dev_upload(h->adv, n);
    float *value = dev_upload(h->value, n), *old_value = dev_upload(h->old_value, n), *ret = dev_upload(h->ret, n);
    int *action = dev_bytes(h->action, sizeof(int) * n);
    float *dlogits = dev_poisoned(nl), *dvalue = dev_poisoned(n), *logp = dev_poisoned(nl);
    double *work = dev_bytes(NULL, sizeof(double) * st_cuda_ppo_loss_work_count(n));
    st_ppo_stats *stats = dev_bytes(NULL, sizeof(st_ppo_stats));
    cudaMemset(stats, 0xFF, sizeof(st_ppo_stats)); /* NaN until written */
    int rc = st_cuda_ppo_loss(n, c->A, logits, h->ls, action, old_logp, adv, value, old_value, ret, k, stats, dlogits,
                              h->ls, dvalue, work, NULL);
    CHECK(rc == ST_OK, "%s: ppo loss: %s", c->name, st_last_error());
    rc = st_cuda_log_softmax(n, c->A, logits, h->ls, logp, h->ls, NULL);
    CHECK(rc == ST_OK, "%s: log_softmax: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->dlogits = dev_download_new(dlogits, nl), o->dvalue = dev_download_new(dvalue, n);
    o->logp = dev_download_new(logp, nl);
    cudaMemcpy(&o->stats, stats, sizeof(st_ppo_stats), cudaMemcpyDeviceToHost);
    dev_free(logits), dev_free(old_logp), dev_free(adv), dev_free(value), dev_free(old_value), dev_free(ret);
    dev_free(action), dev_free(dlogits), dev_free(dvalue), dev_free(logp), dev_free(work), dev_free(stats);
}

static long gaps_written(const float *h, int n, int A, int stride) {
    long bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = A; j < stride; j++) {
            uint32_t u;
            memcpy(&u, &h[(size_t)i * stride + j], sizeof u);
            bad += u != POISON_BITS;
        }
    return bad;
}

static void ppo_case_run(const ppo_case *c, uint64_t seed) {
    int n = c->n, A = c->A;
    ppo_data h;
    h.ls = A + 2 * c->pad;
    size_t nl = (size_t)n * h.ls;
    h.logits = host_randn_scaled(nl, 1.5f, seed, 1);
    for (int i = 0; i < n; i++)
        for (int j = A; j < h.ls; j++)
            h.logits[(size_t)i * h.ls + j] = poison();
    h.action = malloc(sizeof(int) * n);
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    for (int i = 0; i < n; i++)
        h.action[i] = (int)st_rng_below(&r, (uint32_t)A);
    /* old log-probabilities near the current ones: ratios around 1, some clipped */
    float *lp = malloc(sizeof(float) * nl), *noise = host_randn_scaled(n, 0.25f, seed, 2);
    st_log_softmax(n, A, h.logits, h.ls, lp, h.ls);
    h.old_logp = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++)
        h.old_logp[i] = lp[(size_t)i * h.ls + h.action[i]] + noise[i];
    h.adv = host_randn_scaled(n, 1.0f, seed, 3), h.value = host_randn_scaled(n, 1.0f, seed, 4), h.ret = host_randn_scaled(n, 1.0f, seed, 5);
    h.old_value = host_randn_scaled(n, 0.3f, seed, 6);
    for (int i = 0; i < n; i++)
        h.old_value[i] += h.value[i];
    st_ppo_coefs k = {0.2, c->vclip, 0.5, 0.01};

    float *dlogits = malloc(sizeof(float) * nl), *dvalue = malloc(sizeof(float) * n);
    for (size_t i = 0; i < nl; i++)
        dlogits[i] = poison();
    st_ppo_stats cs;
    st_ppo_loss(n, A, h.logits, h.ls, h.action, h.old_logp, h.adv, h.value, h.old_value, h.ret, &k, &cs, dlogits, h.ls,
                dvalue);

    ppo_out o[2];
    ppo_gpu(c, &h, &k, &o[0]);
    ppo_gpu(c, &h, &k, &o[1]);
    printf("PPO %s: n %d A %d vclip %.1f logits stride %d; CPU loss %.6f clipfrac %.3f kl %.4f\n", c->name, n, A,
           c->vclip, h.ls, cs.loss, cs.clipfrac, cs.approx_kl);
    char what[96];
    snprintf(what, sizeof what, "%s dlogits", c->name);
    CHECK_PARITY(what, rel_err_rows(o[0].dlogits, h.ls, dlogits, h.ls, n, A), 1e-4);
    snprintf(what, sizeof what, "%s dvalue", c->name);
    CHECK_PARITY(what, rel_err(o[0].dvalue, dvalue, n), 1e-4);
    snprintf(what, sizeof what, "%s log_softmax", c->name);
    CHECK_PARITY(what, rel_err_rows(o[0].logp, h.ls, lp, h.ls, n, A), 1e-5);
    const double gs[6] = {o[0].stats.loss,    o[0].stats.policy,    o[0].stats.value,
                          o[0].stats.entropy, o[0].stats.approx_kl, o[0].stats.clipfrac};
    const double cv[6] = {cs.loss, cs.policy, cs.value, cs.entropy, cs.approx_kl, cs.clipfrac};
    const char *sn[6] = {"loss", "policy", "value", "entropy", "approx_kl", "clipfrac"};
    for (int s = 0; s < 6; s++) {
        snprintf(what, sizeof what, "%s stat %s", c->name, sn[s]);
        CHECK_PARITY(what, gs[s] == gs[s] ? rel_diff(gs[s], cv[s]) : INFINITY, 1e-9);
    }
    CHECK(cs.clipfrac > 0 && cs.clipfrac < 1, "%s: the inputs should clip some samples (clipfrac %.3f)", c->name,
          cs.clipfrac);
    CHECK(gaps_written(o[0].dlogits, n, A, h.ls) == 0, "%s: dlogits row gaps written", c->name);
    CHECK(same_bits(o[0].dlogits, o[1].dlogits, sizeof(float) * nl) &&
              same_bits(o[0].dvalue, o[1].dvalue, sizeof(float) * n) &&
              same_bits(&o[0].stats, &o[1].stats, sizeof(st_ppo_stats)),
          "%s: two GPU runs differ", c->name);
    for (int i = 0; i < 2; i++)
        free(o[i].dlogits), free(o[i].dvalue), free(o[i].logp);
    free(dlogits), free(dvalue), free(lp), free(noise), free(h.logits), free(h.action), free(h.old_logp), free(h.adv);
    free(h.value), free(h.ret), free(h.old_value);
}

/* ---- AdamW ---- */

typedef struct {
    float *w, *m, *v, *g_clipped, *g_scaled;
    double norm;
} adam_out;

static void adam_gpu(const st_param_table *t, const float *w0, const float *g0, const float *m0, const float *v0,
                     const st_adamw_hparams *h, double max_norm, adam_out *o) {
    size_t n = t->total;
    float *w = dev_upload(w0, n), *g = dev_upload(g0, n), *m = dev_upload(m0, n), *v = dev_upload(v0, n);
    float *g2 = dev_upload(g0, n);
    unsigned char *mask = dev_bytes(NULL, n);
    double *norm = dev_bytes(NULL, sizeof(double)),
           *work = dev_bytes(NULL, sizeof(double) * st_cuda_grad_norm_work_count(n));
    CHECK(st_cuda_adamw_decay_mask(t, mask) == ST_OK, "decay mask: %s", st_last_error());
    int rc = st_cuda_adamw_step(n, w, g, m, v, mask, h, 1, NULL);
    if (rc == ST_OK) rc = st_cuda_adamw_step(n, w, g, m, v, mask, h, 2, NULL); /* from the evolved state */
    CHECK(rc == ST_OK, "adamw step: %s", st_last_error());
    rc = st_cuda_grad_norm(n, g, norm, work, NULL);
    if (rc == ST_OK) rc = st_cuda_grad_clip(n, g, norm, max_norm, NULL);
    if (rc == ST_OK) rc = st_cuda_grad_scale(n, g2, 0.25, NULL);
    CHECK(rc == ST_OK, "grad norm/clip/scale: %s", st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "AdamW kernels failed: %s", cudaGetErrorString(cudaGetLastError()));
    o->w = dev_download_new(w, n), o->m = dev_download_new(m, n), o->v = dev_download_new(v, n);
    o->g_clipped = dev_download_new(g, n), o->g_scaled = dev_download_new(g2, n);
    cudaMemcpy(&o->norm, norm, sizeof(double), cudaMemcpyDeviceToHost);
    dev_free(w), dev_free(g), dev_free(m), dev_free(v), dev_free(g2), dev_free(mask), dev_free(norm), dev_free(work);
}

static void adam_out_free(adam_out *o) { free(o->w), free(o->m), free(o->v), free(o->g_clipped), free(o->g_scaled); }

/* clip_ratio: max_norm / norm (< 1 clips, > 1 leaves g alone). */
static void adam_case_run(const char *preset, double clip_ratio, uint64_t seed) {
    st_dims d;
    st_param_table t;
    st_dims_preset(preset, &d);
    CHECK(st_param_table_build(&d, &t) == ST_OK, "%s: param table: %s", preset, st_last_error());
    size_t n = t.total;
    float *w0 = host_randn_scaled(n, 1.0f, seed, 1), *g0 = host_randn_scaled(n, 1.0f, seed, 2), *m0 = host_randn_scaled(n, 0.1f, seed, 3);
    float *v0 = host_randn_scaled(n, 0.1f, seed, 4);
    for (size_t i = 0; i < n; i++)
        v0[i] *= v0[i]; /* second moments are squares */
    st_adamw_hparams h = {1e-2, 0.9, 0.999, 1e-8, 0.1};
    float *w = host_copy(w0, n), *m = host_copy(m0, n), *v = host_copy(v0, n), *g = host_copy(g0, n);
    float *g2 = host_copy(g0, n);
    st_adamw_step(&t, w, g, m, v, &h, 1);
    st_adamw_step(&t, w, g, m, v, &h, 2);
    double gn = st_grad_norm(n, g), max_norm = clip_ratio * gn;
    if (gn > max_norm) st_grad_scale(n, g, max_norm / gn);
    st_grad_scale(n, g2, 0.25);

    adam_out o[2];
    adam_gpu(&t, w0, g0, m0, v0, &h, max_norm, &o[0]);
    adam_gpu(&t, w0, g0, m0, v0, &h, max_norm, &o[1]);
    printf("AdamW %s: %zu elements in %d tensors, 2 steps, clip to %.2f x norm %.3f\n", preset, n, t.n, clip_ratio, gn);
    char what[96];
    snprintf(what, sizeof what, "adamw %s w", preset);
    CHECK_PARITY(what, rel_err(o[0].w, w, n), 1e-5);
    snprintf(what, sizeof what, "adamw %s w change", preset);
    CHECK_PARITY(what, rel_err_change(o[0].w, w, w0, n), 1e-4);
    snprintf(what, sizeof what, "adamw %s m", preset);
    CHECK_PARITY(what, rel_err(o[0].m, m, n), 1e-5);
    snprintf(what, sizeof what, "adamw %s v", preset);
    CHECK_PARITY(what, rel_err(o[0].v, v, n), 1e-5);
    snprintf(what, sizeof what, "adamw %s grad norm", preset);
    CHECK_PARITY(what, rel_diff(o[0].norm, gn), 1e-10);
    snprintf(what, sizeof what, "adamw %s clipped g", preset);
    CHECK_PARITY(what, rel_err(o[0].g_clipped, g, n), 1e-6);
    if (clip_ratio >= 1)
        CHECK(same_bits(o[0].g_clipped, g0, sizeof(float) * n), "%s: clip above the norm changed g", preset);
    CHECK(same_bits(o[0].g_scaled, g2, sizeof(float) * n), "%s: grad_scale differs from the CPU's bits", preset);
    CHECK(same_bits(o[0].w, o[1].w, sizeof(float) * n) && same_bits(o[0].m, o[1].m, sizeof(float) * n) &&
              same_bits(o[0].v, o[1].v, sizeof(float) * n) && same_bits(&o[0].norm, &o[1].norm, sizeof(double)) &&
              same_bits(o[0].g_clipped, o[1].g_clipped, sizeof(float) * n),
          "%s: two GPU runs differ", preset);
    adam_out_free(&o[0]), adam_out_free(&o[1]);
    free(w0), free(g0), free(m0), free(v0), free(w), free(m), free(v), free(g), free(g2);
    st_param_table_free(&t);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    const ppo_case ppo[] = {
        {"n=64", 64, 3, 0, 0.2},
        {"n=10 padded", 10, 3, 1, 0.2},
        {"n=1000 padded", 1000, 3, 1, 0.2},
        {"n=4096 no vclip", 4096, 3, 1, 0.0},
        {"n=300 A=5", 300, 5, 1, 0.2},
    };
    for (size_t i = 0; i < sizeof ppo / sizeof ppo[0]; i++)
        ppo_case_run(&ppo[i], 6000 + i);
    adam_case_run("tiny", 0.5, 7001);
    adam_case_run("odd", 2.0, 7002);
    adam_case_run("default", 0.3, 7003);
#endif
    TEST_MAIN_END();
}
