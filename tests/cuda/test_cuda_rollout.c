/* test_cuda_rollout.c: the GPU rollout pieces against their host twins:
 * action selection (cuda/select_cuda.h vs st_select_actions), GAE
 * (cuda/gae_cuda.h vs st_gae), the rollout statistics (vs the host
 * trainer's sequential sums and st_explained_variance) and the minibatch
 * gather (cuda/rollout_cuda.h vs the CPU trainer's gather, restated here).
 * Inputs are fresh Philox normals (ST_STREAM_TEST), outputs are poisoned
 * before each run, every case runs twice and must give the same bits.
 *  - select, n = 1 to 65,539, A = 3 and 5, logits rows padded with NaN in
 *    the gap, logits spread so that sampling is non-trivial, rows with ties
 *    at the maximum (greedy takes the first) and near-deterministic rows,
 *    draw_base NULL or a device word (above 2^32 too): 0 action mismatches;
 *    logp at most 1 float ulp from the host (CUDA's exp/log vs glibc's,
 *    each within an ulp in double; the count and the maximum are printed);
 *  - GAE, T x B from 1 x 1 to 64 x 4096 with random dones: bit-identical;
 *  - statistics, N = 1 to 1,048,576: episodes exact; the three sums within
 *    1e-13 of the sum of magnitudes (another order of the same doubles:
 *    ~1e-15); explained variance within 1e-12 relative; ep_R is NaN where
 *    not done (only done samples may be read);
 *  - gather, mb = 1, 1000, 65,536 with C = 16 and 11, slices k = 0 (k_dev
 *    NULL and a device 0) and k = 3: copies exact; the moments in work
 *    within 1e-13 of the host's sequential ones (mean relative to sd); the
 *    normalised advantages exactly (float)((adv - mean) / denom) of the
 *    device's moments, so within ~1e-15 of the host's before the final
 *    rounding and at most 1 float ulp after it (count printed); the
 *    one-block st_cuda_rollout_gather gives the same bits as gather_at;
 *  - a CUDA graph capturing select, GAE, the statistics and the gather,
 *    replayed twice with the device words (draw_base, k) changed in
 *    between, equals direct calls with the same words, bit for bit.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/error.h"
#include "core/philox.h"
#include "train/gae.h"
#include "train/trainer.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/gae_cuda.h"
#include "cuda/rollout_cuda.h"
#include "cuda/select_cuda.h"
#endif

#ifdef ST_HAVE_CUDA

/* bytes of device memory filled with 0xFF (NaN floats and doubles, -1 ints). */
static void *dev_poison_bytes(size_t bytes) {
    void *d = dev_bytes(NULL, bytes);
    if (d) cudaMemset(d, 0xFF, bytes ? bytes : 1);
    return d;
}

static int synced(const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    CHECK(e == cudaSuccess, "%s: kernels failed: %s", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

static void down(void *host, const void *dev, size_t bytes) {
    cudaDeviceSynchronize();
    cudaError_t e = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
    CHECK(e == cudaSuccess, "download of %zu bytes: %s", bytes, cudaGetErrorString(e));
}

static void *host_down_new(const void *dev, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    down(h, dev, bytes);
    return h;
}

/* Elements (of elem bytes) where a and b differ; *first the first, or -1. */
static long count_diff(const void *a, const void *b, size_t n, size_t elem, long *first) {
    long bad = 0;
    *first = -1;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * elem, (const char *)b + i * elem, elem) != 0) {
            if (bad == 0) *first = (long)i;
            bad++;
        }
    return bad;
}

/* Distance in float ulps (huge for a NaN). */
static int64_t ulp_diff(float a, float b) {
    if (a != a || b != b) return INT64_MAX;
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua), memcpy(&ub, &b, sizeof ub);
    int64_t ia = ua & 0x80000000u ? -(int64_t)(ua & 0x7FFFFFFFu) : (int64_t)ua;
    int64_t ib = ub & 0x80000000u ? -(int64_t)(ub & 0x7FFFFFFFu) : (int64_t)ub;
    return ia > ib ? ia - ib : ib - ia;
}

/* ---- action selection ---- */

typedef struct {
    const char *name;
    int n, A, pad, greedy, with_base, with_logp;
    uint64_t base;
} select_case;

/* Logits [n, A] (row stride A + pad, NaN in the gap): normals of sd 2, every
 * 5th row with its maximum repeated at 1 and A - 1, every 13th row all equal,
 * every 17th row scaled by 20 (a near-deterministic policy). */
static float *select_logits(const select_case *c, uint64_t seed) {
    int n = c->n, A = c->A, ls = A + c->pad;
    float *z = host_randn_scaled((size_t)n * ls, 2.0f, seed, 1);
    for (int i = 0; i < n; i++) {
        float *r = z + (size_t)i * ls;
        float mx = r[0];
        for (int j = 1; j < A; j++)
            mx = r[j] > mx ? r[j] : mx;
        if (i % 5 == 0) r[1 % A] = mx, r[A - 1] = mx;
        if (i % 13 == 0)
            for (int j = 1; j < A; j++)
                r[j] = r[0];
        if (i % 17 == 0)
            for (int j = 0; j < A; j++)
                r[j] *= 20.0f;
        for (int j = A; j < ls; j++)
            r[j] = poison();
    }
    return z;
}

static void select_case_run(const select_case *c, uint64_t seed) {
    int n = c->n, A = c->A, ls = A + c->pad;
    float *z = select_logits(c, seed);
    float *zc = malloc(sizeof(float) * (size_t)n * A);
    for (int i = 0; i < n; i++)
        memcpy(zc + (size_t)i * A, z + (size_t)i * ls, sizeof(float) * A);
    uint64_t base = c->with_base ? c->base : 0;
    double *u = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        st_philox4 r = st_philox_draw(seed, ST_STREAM_ACTION, base + (uint64_t)i);
        u[i] = st_u01d(r.v[0], r.v[1]);
    }
    int *act = malloc(sizeof(int) * n), *greedy_act = malloc(sizeof(int) * n);
    float *logp = malloc(sizeof(float) * n);
    st_select_actions(n, A, zc, u, c->greedy, act, logp);
    st_select_actions(n, A, zc, u, 1, greedy_act, NULL);

    float *dz = dev_upload(z, (size_t)n * ls);
    uint64_t *dbase = c->with_base ? dev_bytes(&c->base, sizeof(uint64_t)) : NULL;
    int *gact[2];
    float *glogp[2];
    for (int run = 0; run < 2; run++) {
        int *da = dev_poison_bytes(sizeof(int) * n);
        float *dl = c->with_logp ? dev_poisoned(n) : NULL;
        int rc = st_cuda_select_actions(n, A, dz, ls, seed, ST_STREAM_ACTION, dbase, c->greedy, da, dl, NULL);
        CHECK(rc == ST_OK, "%s: select: %s", c->name, st_last_error());
        synced(c->name);
        gact[run] = host_down_new(da, sizeof(int) * n);
        glogp[run] = dl ? host_down_new(dl, sizeof(float) * n) : NULL;
        dev_free(da), dev_free(dl);
    }
    long first, mism = count_diff(gact[0], act, n, sizeof(int), &first);
    printf("select %s: n %d A %d stride %d %s draw_base %s%llu\n", c->name, n, A, ls, c->greedy ? "greedy" : "sampled",
           c->with_base ? "device " : "NULL ", (unsigned long long)base);
    printf("  action mismatches %ld", mism);
    if (mism) printf(" (first at window %ld: GPU %d, CPU %d)", first, gact[0][first], act[first]);
    printf("\n");
    CHECK(mism == 0, "%s: %ld actions differ from the CPU's, the first at window %ld", c->name, mism, first);
    if (c->with_logp) {
        int64_t maxu = 0;
        long nu = 0, worst = -1;
        for (int i = 0; i < n; i++) {
            int64_t d = ulp_diff(glogp[0][i], logp[i]);
            if (d) nu++;
            if (d > maxu) maxu = d, worst = i;
        }
        printf("  logp: %ld of %d differ from the CPU's, max %lld ulp", nu, n,
               (long long)(maxu == INT64_MAX ? -1 : maxu));
        if (worst >= 0) printf(" (window %ld: GPU %.9g CPU %.9g)", worst, glogp[0][worst], logp[worst]);
        printf("\n");
        CHECK(maxu <= 1, "%s: logp %lld ulp from the CPU's at window %ld", c->name, (long long)maxu, worst);
        CHECK(memcmp(glogp[0], glogp[1], sizeof(float) * n) == 0, "%s: two GPU runs differ (logp)", c->name);
    }
    CHECK(memcmp(gact[0], gact[1], sizeof(int) * n) == 0, "%s: two GPU runs differ (actions)", c->name);
    if (!c->greedy && n >= 1000) { /* sampling must be non-trivial */
        long off_greedy = 0, count[8] = {0};
        for (int i = 0; i < n; i++)
            off_greedy += act[i] != greedy_act[i], count[act[i] & 7]++;
        printf("  %ld of %d sampled actions are not the argmax\n", off_greedy, n);
        CHECK(off_greedy > n / 10, "%s: only %ld sampled actions differ from greedy", c->name, off_greedy);
        for (int j = 0; j < A; j++)
            CHECK(count[j] > 0, "%s: action %d never sampled", c->name, j);
    }
    for (int run = 0; run < 2; run++)
        free(gact[run]), free(glogp[run]);
    dev_free(dz), dev_free(dbase);
    free(z), free(zc), free(u), free(act), free(greedy_act), free(logp);
}

/* ---- GAE ---- */

/* done with probability p, from the test stream. */
static uint8_t *random_done(size_t n, double p, uint64_t seed, uint32_t salt) {
    uint8_t *d = malloc(n + 1);
    st_rng r = st_rng_make(seed ^ ((uint64_t)salt << 32), ST_STREAM_TEST);
    for (size_t i = 0; i < n; i++)
        d[i] = st_rng_uniform(&r) < p;
    return d;
}

static void gae_case_run(int T, int B, uint64_t seed) {
    size_t N = (size_t)T * B;
    float *reward = host_randn_scaled(N, 0.5f, seed, 1), *value = host_randn_scaled(N, 1.0f, seed, 2);
    float *last = host_randn_scaled(B, 1.0f, seed, 3);
    uint8_t *done = random_done(N, 0.05, seed, 4);
    double gamma = 0.99, lambda = 0.95;
    float *adv = host_poisoned(N), *ret = host_poisoned(N);
    st_gae(T, B, reward, value, done, last, gamma, lambda, adv, ret);

    float *dr = dev_upload(reward, N), *dv = dev_upload(value, N), *dl = dev_upload(last, B);
    uint8_t *dd = dev_bytes(done, N);
    float *gadv[2], *gret[2];
    for (int run = 0; run < 2; run++) {
        float *da = dev_poisoned(N), *dt = dev_poisoned(N);
        int rc = st_cuda_gae(T, B, dr, dv, dd, dl, gamma, lambda, da, dt, NULL);
        CHECK(rc == ST_OK, "GAE %dx%d: %s", T, B, st_last_error());
        synced("GAE");
        gadv[run] = dev_download_new(da, N), gret[run] = dev_download_new(dt, N);
        dev_free(da), dev_free(dt);
    }
    long fa, fr, na = count_diff(gadv[0], adv, N, sizeof(float), &fa),
                 nr = count_diff(gret[0], ret, N, sizeof(float), &fr);
    printf("GAE T %d B %d: %ld advantages and %ld returns differ from the CPU's bits\n", T, B, na, nr);
    if (na) printf("  first adv at (t %ld, b %ld): GPU %.9g CPU %.9g\n", fa / B, fa % B, gadv[0][fa], adv[fa]);
    if (nr) printf("  first ret at (t %ld, b %ld): GPU %.9g CPU %.9g\n", fr / B, fr % B, gret[0][fr], ret[fr]);
    CHECK(na == 0 && nr == 0, "GAE %dx%d: not bit-identical to st_gae (%ld adv, %ld ret)", T, B, na, nr);
    CHECK(memcmp(gadv[0], gadv[1], sizeof(float) * N) == 0 && memcmp(gret[0], gret[1], sizeof(float) * N) == 0,
          "GAE %dx%d: two GPU runs differ", T, B);
    for (int run = 0; run < 2; run++)
        free(gadv[run]), free(gret[run]);
    dev_free(dr), dev_free(dv), dev_free(dl), dev_free(dd);
    free(reward), free(value), free(last), free(done), free(adv), free(ret);
}

/* ---- rollout statistics ---- */

/* The host trainer's sums, sequential in sample order. */
static void host_stats(int N, const float *reward, const float *value, const uint8_t *done, const float *ep_R,
                       const float *ret, st_cuda_rollout_stats *s, double mag[3]) {
    memset(s, 0, sizeof *s);
    mag[0] = mag[1] = mag[2] = 0;
    for (int i = 0; i < N; i++) {
        s->reward_sum += reward[i], mag[0] += fabs(reward[i]);
        s->value_sum += value[i], mag[1] += fabs(value[i]);
        if (done[i]) s->ep_R_sum += ep_R[i], mag[2] += fabs(ep_R[i]), s->episodes++;
    }
    s->explained_var = st_explained_variance(value, ret, N);
}

static double rel_diff(double a, double b) { return fabs(b) > 1e-300 ? fabs(a - b) / fabs(b) : fabs(a - b); }

static void stats_case_run(int N, uint64_t seed) {
    float *reward = host_randn_scaled(N, 0.1f, seed, 1), *value = host_randn_scaled(N, 1.0f, seed, 2);
    float *ret = host_randn_scaled(N, 0.5f, seed, 3), *ep_R = host_randn_scaled(N, 3.0f, seed, 4);
    uint8_t *done = random_done(N, 0.03, seed, 5);
    if (N == 1) done[0] = 1;
    for (int i = 0; i < N; i++) {
        reward[i] += 0.01f;
        ret[i] += value[i]; /* explained variance ~0.8 */
        if (!done[i]) ep_R[i] = NAN;
    }
    st_cuda_rollout_stats h;
    double mag[3];
    host_stats(N, reward, value, done, ep_R, ret, &h, mag);

    float *dr = dev_upload(reward, N), *dv = dev_upload(value, N), *dt = dev_upload(ret, N), *de = dev_upload(ep_R, N);
    uint8_t *dd = dev_bytes(done, N);
    size_t wc = st_cuda_rollout_stats_work_count(N);
    st_cuda_rollout_stats g[2];
    for (int run = 0; run < 2; run++) {
        st_cuda_rollout_stats *dout = dev_poison_bytes(sizeof *dout);
        double *work = dev_poison_bytes(sizeof(double) * wc);
        int rc = st_cuda_rollout_stats_compute(N, dr, dv, dd, de, dt, dout, work, NULL);
        CHECK(rc == ST_OK, "stats N %d: %s", N, st_last_error());
        synced("stats");
        down(&g[run], dout, sizeof *dout);
        dev_free(dout), dev_free(work);
    }
    double er = fabs(g[0].reward_sum - h.reward_sum) / (mag[0] > 0 ? mag[0] : 1);
    double ev = fabs(g[0].value_sum - h.value_sum) / (mag[1] > 0 ? mag[1] : 1);
    double ee = fabs(g[0].ep_R_sum - h.ep_R_sum) / (mag[2] > 0 ? mag[2] : 1);
    double ex = rel_diff(g[0].explained_var, h.explained_var);
    printf("stats N %d (%zu work doubles): episodes GPU %lld CPU %lld; explained var GPU %.17g CPU %.17g\n", N, wc,
           (long long)g[0].episodes, (long long)h.episodes, g[0].explained_var, h.explained_var);
    printf("  reward sum rel %.3e, value sum rel %.3e, ep_R sum rel %.3e (of the sums of magnitudes); "
           "plain rel %.3e %.3e %.3e; explained var rel %.3e\n",
           er, ev, ee, rel_diff(g[0].reward_sum, h.reward_sum), rel_diff(g[0].value_sum, h.value_sum),
           rel_diff(g[0].ep_R_sum, h.ep_R_sum), ex);
    CHECK(g[0].episodes == h.episodes, "stats N %d: %lld episodes, CPU %lld", N, (long long)g[0].episodes,
          (long long)h.episodes);
    CHECK(er <= 1e-13 && ev <= 1e-13 && ee <= 1e-13, "stats N %d: sums off (%.3e %.3e %.3e > 1e-13)", N, er, ev, ee);
    CHECK(ex <= 1e-12, "stats N %d: explained variance rel err %.3e > 1e-12", N, ex);
    CHECK(memcmp(&g[0], &g[1], sizeof g[0]) == 0, "stats N %d: two GPU runs differ", N);
    dev_free(dr), dev_free(dv), dev_free(dt), dev_free(de), dev_free(dd);
    free(reward), free(value), free(ret), free(ep_R), free(done);
}

/* ---- minibatch gather ---- */

typedef struct {
    int N, C;
    int *inst, *bar, *action, *perm;
    float *ctx, *logp, *value, *ret, *adv;
} rollout_data;

typedef struct {
    int *inst, *bar, *action;
    float *ctx, *logp, *value, *ret, *adv;
} mb_out;

static void rollout_make(rollout_data *r, int N, int C, uint64_t seed) {
    r->N = N, r->C = C;
    r->inst = malloc(sizeof(int) * N), r->bar = malloc(sizeof(int) * N), r->action = malloc(sizeof(int) * N);
    r->perm = malloc(sizeof(int) * N);
    st_rng g = st_rng_make(seed, ST_STREAM_TEST);
    for (int i = 0; i < N; i++) {
        r->inst[i] = (int)st_rng_below(&g, 7), r->bar[i] = (int)st_rng_below(&g, 100000);
        r->action[i] = (int)st_rng_below(&g, 3), r->perm[i] = i;
    }
    for (int i = N - 1; i > 0; i--) {
        int j = (int)st_rng_below(&g, (uint32_t)(i + 1)), t = r->perm[i];
        r->perm[i] = r->perm[j], r->perm[j] = t;
    }
    r->ctx = host_randn_scaled((size_t)N * C, 1.0f, seed, 1), r->logp = host_randn_scaled(N, 1.0f, seed, 2);
    r->value = host_randn_scaled(N, 1.0f, seed, 3), r->ret = host_randn_scaled(N, 1.0f, seed, 4);
    r->adv = host_randn_scaled(N, 1.5f, seed, 5);
    for (int i = 0; i < N; i++)
        r->adv[i] += 0.3f; /* a mean to subtract */
}

static void rollout_free(rollout_data *r) {
    free(r->inst), free(r->bar), free(r->action), free(r->perm), free(r->ctx), free(r->logp), free(r->value);
    free(r->ret), free(r->adv);
}

/* The CPU trainer's gather (train/trainer.c), restated: its moments and
 * normalised advantages, sequential in index order. */
static void host_gather(const rollout_data *r, int mb, const int *idx, mb_out *o, double *mean_out, double *denom_out) {
    int C = r->C;
    double mean = 0, var = 0;
    for (int i = 0; i < mb; i++) {
        int k = idx[i];
        o->inst[i] = r->inst[k], o->bar[i] = r->bar[k], o->action[i] = r->action[k];
        memcpy(o->ctx + (size_t)i * C, r->ctx + (size_t)k * C, sizeof(float) * C);
        o->logp[i] = r->logp[k], o->value[i] = r->value[k], o->ret[i] = r->ret[k];
        mean += r->adv[k];
    }
    mean /= mb;
    for (int i = 0; i < mb; i++)
        var += (r->adv[idx[i]] - mean) * (r->adv[idx[i]] - mean);
    double sd = sqrt(var / (mb > 1 ? mb - 1 : 1)) + 1e-8;
    for (int i = 0; i < mb; i++)
        o->adv[i] = (float)((r->adv[idx[i]] - mean) / sd);
    *mean_out = mean, *denom_out = sd;
}

static void mb_alloc_host(mb_out *o, int mb, int C) {
    o->inst = malloc(sizeof(int) * mb), o->bar = malloc(sizeof(int) * mb), o->action = malloc(sizeof(int) * mb);
    o->ctx = malloc(sizeof(float) * ((size_t)mb * C + 1)), o->logp = malloc(sizeof(float) * mb);
    o->value = malloc(sizeof(float) * mb), o->ret = malloc(sizeof(float) * mb), o->adv = malloc(sizeof(float) * mb);
}

static void mb_alloc_dev(mb_out *o, int mb, int C) {
    o->inst = dev_poison_bytes(sizeof(int) * mb), o->bar = dev_poison_bytes(sizeof(int) * mb);
    o->action = dev_poison_bytes(sizeof(int) * mb), o->ctx = dev_poisoned((size_t)mb * C);
    o->logp = dev_poisoned(mb), o->value = dev_poisoned(mb), o->ret = dev_poisoned(mb), o->adv = dev_poisoned(mb);
}

static void mb_poison_dev(mb_out *o, int mb, int C) {
    cudaMemset(o->inst, 0xFF, sizeof(int) * mb), cudaMemset(o->bar, 0xFF, sizeof(int) * mb);
    cudaMemset(o->action, 0xFF, sizeof(int) * mb), cudaMemset(o->ctx, 0xFF, sizeof(float) * (size_t)mb * C);
    cudaMemset(o->logp, 0xFF, sizeof(float) * mb), cudaMemset(o->value, 0xFF, sizeof(float) * mb);
    cudaMemset(o->ret, 0xFF, sizeof(float) * mb), cudaMemset(o->adv, 0xFF, sizeof(float) * mb);
    cudaDeviceSynchronize(); /* done before work on any other stream */
}

static void mb_download(mb_out *h, const mb_out *d, int mb, int C) {
    down(h->inst, d->inst, sizeof(int) * mb), down(h->bar, d->bar, sizeof(int) * mb);
    down(h->action, d->action, sizeof(int) * mb), down(h->ctx, d->ctx, sizeof(float) * (size_t)mb * C);
    down(h->logp, d->logp, sizeof(float) * mb), down(h->value, d->value, sizeof(float) * mb);
    down(h->ret, d->ret, sizeof(float) * mb), down(h->adv, d->adv, sizeof(float) * mb);
}

static void mb_free(mb_out *o, int dev) {
    void *p[] = {o->inst, o->bar, o->action, o->ctx, o->logp, o->value, o->ret, o->adv};
    for (int i = 0; i < 8; i++) {
        if (dev)
            dev_free(p[i]);
        else
            free(p[i]);
    }
}

/* Bit equality of two host minibatches, every field (adv too when with_adv);
 * prints the first difference. */
static long mb_compare(const char *what, const mb_out *a, const mb_out *b, int mb, int C, int with_adv) {
    struct {
        const char *name;
        const void *x, *y;
        size_t n, elem;
        int width;
    } f[] = {
        {"inst", a->inst, b->inst, (size_t)mb, sizeof(int), 1},
        {"bar", a->bar, b->bar, (size_t)mb, sizeof(int), 1},
        {"action", a->action, b->action, (size_t)mb, sizeof(int), 1},
        {"ctx", a->ctx, b->ctx, (size_t)mb * C, sizeof(float), C},
        {"logp", a->logp, b->logp, (size_t)mb, sizeof(float), 1},
        {"value", a->value, b->value, (size_t)mb, sizeof(float), 1},
        {"ret", a->ret, b->ret, (size_t)mb, sizeof(float), 1},
        {"adv", a->adv, b->adv, (size_t)mb, sizeof(float), 1},
    };
    long total = 0;
    for (int k = 0; k < (with_adv ? 8 : 7); k++) {
        long first, n = count_diff(f[k].x, f[k].y, f[k].n, f[k].elem, &first);
        if (n)
            printf("  %s: %ld %s values differ, first at sample %ld column %ld\n", what, n, f[k].name,
                   first / f[k].width, first % f[k].width);
        total += n;
    }
    return total;
}

typedef struct {
    int *inst, *bar, *action, *perm;
    float *ctx, *logp, *value, *ret, *adv;
} rollout_dev;

static void rollout_upload(rollout_dev *d, const rollout_data *r) {
    int N = r->N;
    d->inst = dev_bytes(r->inst, sizeof(int) * N), d->bar = dev_bytes(r->bar, sizeof(int) * N);
    d->action = dev_bytes(r->action, sizeof(int) * N), d->perm = dev_bytes(r->perm, sizeof(int) * N);
    d->ctx = dev_upload(r->ctx, (size_t)N * r->C), d->logp = dev_upload(r->logp, N);
    d->value = dev_upload(r->value, N), d->ret = dev_upload(r->ret, N), d->adv = dev_upload(r->adv, N);
}

static void rollout_dev_free(rollout_dev *d) {
    void *p[] = {d->inst, d->bar, d->action, d->perm, d->ctx, d->logp, d->value, d->ret, d->adv};
    for (int i = 0; i < 9; i++)
        dev_free(p[i]);
}

static int gather_at(const rollout_dev *r, int mb, int C, const int32_t *k_dev, mb_out *o, double *work, void *stream) {
    return st_cuda_rollout_gather_at(mb, C, r->perm, k_dev, r->inst, r->bar, r->action, r->ctx, r->logp, r->value,
                                     r->ret, r->adv, o->inst, o->bar, o->action, o->ctx, o->logp, o->value, o->ret,
                                     o->adv, work, stream);
}

static void gather_case_run(int mb, int C, uint64_t seed) {
    const int M = 4; /* minibatches in the rollout */
    rollout_data r;
    rollout_make(&r, mb * M, C, seed);
    rollout_dev dr;
    rollout_upload(&dr, &r);
    int32_t zero = 0, three = 3;
    int32_t *dk0 = dev_bytes(&zero, sizeof zero), *dk3 = dev_bytes(&three, sizeof three);
    size_t wc = st_cuda_rollout_gather_work_count();
    CHECK(wc >= 2, "gather work count %zu < 2", wc);
    double *work = dev_poison_bytes(sizeof(double) * wc);
    mb_out dev_o, got, got2, ref;
    mb_alloc_dev(&dev_o, mb, C), mb_alloc_host(&got, mb, C), mb_alloc_host(&got2, mb, C), mb_alloc_host(&ref, mb, C);
    printf("gather mb %d C %d from N %d\n", mb, C, r.N);
    struct {
        const char *name;
        const int32_t *k_dev;
        int k;
    } v[] = {{"k_dev NULL", NULL, 0}, {"k_dev = 0", dk0, 0}, {"k_dev = 3", dk3, 3}};
    for (int t = 0; t < 3; t++) {
        const int *idx = r.perm + (size_t)v[t].k * mb;
        double hmean, hden, moments[2];
        host_gather(&r, mb, idx, &ref, &hmean, &hden);
        mb_poison_dev(&dev_o, mb, C);
        cudaMemset(work, 0xFF, sizeof(double) * wc);
        int rc = gather_at(&dr, mb, C, v[t].k_dev, &dev_o, work, NULL);
        CHECK(rc == ST_OK, "gather %s: %s", v[t].name, st_last_error());
        synced("gather_at");
        mb_download(&got, &dev_o, mb, C);
        down(moments, work, sizeof moments);
        char what[96];
        snprintf(what, sizeof what, "mb %d C %d %s", mb, C, v[t].name);
        long bad = mb_compare(what, &got, &ref, mb, C, 0);
        CHECK(bad == 0, "%s: %ld copied values differ from the CPU's", what, bad);
        /* the device's normalisation from its own moments, exactly */
        long nexact = 0, nflip = 0, first = -1;
        int64_t maxu = 0;
        for (int i = 0; i < mb; i++) {
            float want = (float)((r.adv[idx[i]] - moments[0]) / moments[1]);
            if (memcmp(&want, &got.adv[i], sizeof want) != 0 && nexact++ == 0) first = i;
            int64_t d = ulp_diff(got.adv[i], ref.adv[i]);
            nflip += d != 0;
            maxu = d > maxu ? d : maxu;
        }
        double emean = fabs(moments[0] - hmean) / hden, eden = rel_diff(moments[1], hden);
        printf("  %-12s mean %.17g (CPU %.17g, off %.3e sd), sd+1e-8 rel %.3e; mb_adv %ld differ from the CPU's, "
               "max %lld ulp\n",
               v[t].name, moments[0], hmean, emean, eden, nflip, (long long)(maxu == INT64_MAX ? -1 : maxu));
        CHECK(emean <= 1e-13 && eden <= 1e-13, "%s: moments off the CPU's (mean %.3e sd, sd %.3e > 1e-13)", what, emean,
              eden);
        CHECK(nexact == 0, "%s: %ld mb_adv are not (adv - mean) / denom of the device's moments (first sample %ld)",
              what, nexact, first);
        CHECK(maxu <= 1, "%s: mb_adv %lld ulp from the CPU's", what, (long long)maxu);
        if (v[t].k == 3) {
            /* rerun: same bits; then the one-block form on explicit indices: same bits */
            mb_poison_dev(&dev_o, mb, C);
            rc = gather_at(&dr, mb, C, v[t].k_dev, &dev_o, work, NULL);
            CHECK(rc == ST_OK, "gather rerun: %s", st_last_error());
            synced("gather_at rerun");
            mb_download(&got2, &dev_o, mb, C);
            CHECK(mb_compare("rerun", &got2, &got, mb, C, 1) == 0, "%s: two GPU runs differ", what);
            mb_poison_dev(&dev_o, mb, C);
            rc = st_cuda_rollout_gather(mb, C, dr.perm + (size_t)3 * mb, dr.inst, dr.bar, dr.action, dr.ctx, dr.logp,
                                        dr.value, dr.ret, dr.adv, dev_o.inst, dev_o.bar, dev_o.action, dev_o.ctx,
                                        dev_o.logp, dev_o.value, dev_o.ret, dev_o.adv, NULL);
            CHECK(rc == ST_OK, "one-block gather: %s", st_last_error());
            synced("one-block gather");
            mb_download(&got2, &dev_o, mb, C);
            CHECK(mb_compare("one-block gather", &got2, &got, mb, C, 1) == 0,
                  "%s: st_cuda_rollout_gather differs from gather_at", what);
        }
    }
    mb_free(&dev_o, 1), mb_free(&got, 0), mb_free(&got2, 0), mb_free(&ref, 0);
    dev_free(dk0), dev_free(dk3), dev_free(work);
    rollout_dev_free(&dr);
    rollout_free(&r);
}

/* ---- one CUDA graph over all four, replayed with changed device words ---- */

enum { G_N = 4099, G_A = 3, G_LS = 4, G_T = 16, G_B = 257, G_MB = 1000, G_C = 16 };

typedef struct {
    uint64_t *base;
    int32_t *k;
    float *logits, *reward, *value, *last, *ep_R, *logp, *adv, *ret;
    uint8_t *done;
    int *action;
    st_cuda_rollout_stats *stats;
    double *stats_work, *gather_work;
    rollout_dev r;
    mb_out mb;
} graph_bufs;

typedef struct {
    int *action;
    float *logp, *adv, *ret;
    st_cuda_rollout_stats stats;
    mb_out mb;
} graph_result;

static int graph_ops(graph_bufs *g, cudaStream_t s) {
    int N = G_T * G_B;
    ST_TRY(st_cuda_select_actions(G_N, G_A, g->logits, G_LS, 77, ST_STREAM_ACTION, g->base, 0, g->action, g->logp, s));
    ST_TRY(st_cuda_gae(G_T, G_B, g->reward, g->value, g->done, g->last, 0.99, 0.95, g->adv, g->ret, s));
    ST_TRY(st_cuda_rollout_stats_compute(N, g->reward, g->value, g->done, g->ep_R, g->ret, g->stats, g->stats_work, s));
    ST_TRY(gather_at(&g->r, G_MB, G_C, g->k, &g->mb, g->gather_work, s));
    return ST_OK;
}

static void graph_poison(graph_bufs *g) {
    int N = G_T * G_B;
    cudaMemset(g->action, 0xFF, sizeof(int) * G_N), cudaMemset(g->logp, 0xFF, sizeof(float) * G_N);
    cudaMemset(g->adv, 0xFF, sizeof(float) * N), cudaMemset(g->ret, 0xFF, sizeof(float) * N);
    cudaMemset(g->stats, 0xFF, sizeof *g->stats);
    mb_poison_dev(&g->mb, G_MB, G_C); /* synchronises */
}

static void graph_set_words(graph_bufs *g, uint64_t base, int32_t k) {
    cudaDeviceSynchronize();
    CHECK(cudaMemcpy(g->base, &base, sizeof base, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(g->k, &k, sizeof k, cudaMemcpyHostToDevice) == cudaSuccess,
          "graph: setting the device words failed");
}

static void graph_fetch(graph_bufs *g, graph_result *o) {
    int N = G_T * G_B;
    o->action = host_down_new(g->action, sizeof(int) * G_N), o->logp = host_down_new(g->logp, sizeof(float) * G_N);
    o->adv = host_down_new(g->adv, sizeof(float) * N), o->ret = host_down_new(g->ret, sizeof(float) * N);
    down(&o->stats, g->stats, sizeof o->stats);
    mb_alloc_host(&o->mb, G_MB, G_C);
    mb_download(&o->mb, &g->mb, G_MB, G_C);
}

static void graph_result_free(graph_result *o) {
    free(o->action), free(o->logp), free(o->adv), free(o->ret);
    mb_free(&o->mb, 0);
}

static long graph_compare(const char *what, const graph_result *a, const graph_result *b) {
    int N = G_T * G_B;
    long first, bad = 0, n;
    if ((n = count_diff(a->action, b->action, G_N, sizeof(int), &first)))
        printf("  %s: %ld actions differ, first at %ld\n", what, n, first);
    bad += n;
    if ((n = count_diff(a->logp, b->logp, G_N, sizeof(float), &first)))
        printf("  %s: %ld logp differ, first at %ld\n", what, n, first);
    bad += n;
    if ((n = count_diff(a->adv, b->adv, N, sizeof(float), &first)))
        printf("  %s: %ld GAE adv differ, first at %ld\n", what, n, first);
    bad += n;
    if ((n = count_diff(a->ret, b->ret, N, sizeof(float), &first)))
        printf("  %s: %ld GAE ret differ, first at %ld\n", what, n, first);
    bad += n;
    if (memcmp(&a->stats, &b->stats, sizeof a->stats) != 0) printf("  %s: the statistics differ\n", what), bad++;
    bad += mb_compare(what, &a->mb, &b->mb, G_MB, G_C, 1);
    return bad;
}

static void graph_case_run(uint64_t seed) {
    int N = G_T * G_B;
    graph_bufs g;
    memset(&g, 0, sizeof g);
    select_case sc = {"graph", G_N, G_A, G_LS - G_A, 0, 1, 1, 0};
    float *z = select_logits(&sc, seed);
    float *reward = host_randn_scaled(N, 0.5f, seed, 11), *value = host_randn_scaled(N, 1.0f, seed, 12);
    float *last = host_randn_scaled(G_B, 1.0f, seed, 13), *ep_R = host_randn_scaled(N, 3.0f, seed, 14);
    uint8_t *done = random_done(N, 0.05, seed, 15);
    rollout_data r;
    rollout_make(&r, G_MB * 4, G_C, seed + 1);
    g.base = dev_bytes(NULL, sizeof(uint64_t)), g.k = dev_bytes(NULL, sizeof(int32_t));
    g.logits = dev_upload(z, (size_t)G_N * G_LS), g.reward = dev_upload(reward, N), g.value = dev_upload(value, N);
    g.last = dev_upload(last, G_B), g.ep_R = dev_upload(ep_R, N), g.done = dev_bytes(done, N);
    g.action = dev_poison_bytes(sizeof(int) * G_N), g.logp = dev_poisoned(G_N);
    g.adv = dev_poisoned(N), g.ret = dev_poisoned(N), g.stats = dev_poison_bytes(sizeof *g.stats);
    g.stats_work = dev_poison_bytes(sizeof(double) * st_cuda_rollout_stats_work_count(N));
    g.gather_work = dev_poison_bytes(sizeof(double) * st_cuda_rollout_gather_work_count());
    rollout_upload(&g.r, &r);
    mb_alloc_dev(&g.mb, G_MB, G_C);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "graph: stream creation failed");
    const uint64_t base[2] = {12345, ((uint64_t)1 << 33) + 4099};
    const int32_t kk[2] = {1, 3};

    graph_result direct[2], replay[2];
    for (int w = 0; w < 2; w++) {
        graph_set_words(&g, base[w], kk[w]);
        graph_poison(&g);
        CHECK(graph_ops(&g, s) == ST_OK, "graph: direct calls: %s", st_last_error());
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph: direct calls failed: %s",
              cudaGetErrorString(cudaGetLastError()));
        graph_fetch(&g, &direct[w]);
    }
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    CHECK(e == cudaSuccess, "graph: begin capture: %s", cudaGetErrorString(e));
    int rc = graph_ops(&g, s);
    e = cudaStreamEndCapture(s, &graph);
    CHECK(rc == ST_OK, "graph: calls under capture: %s", st_last_error());
    CHECK(e == cudaSuccess, "graph: end capture: %s", cudaGetErrorString(e));
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    CHECK(e == cudaSuccess, "graph: instantiate: %s", cudaGetErrorString(e));
    size_t nodes = 0;
    if (graph) cudaGraphGetNodes(graph, NULL, &nodes);
    int ok = e == cudaSuccess;
    for (int w = 0; w < 2 && ok; w++) {
        graph_set_words(&g, base[w], kk[w]);
        graph_poison(&g);
        cudaDeviceSynchronize();
        e = cudaGraphLaunch(exec, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        CHECK(e == cudaSuccess, "graph: replay %d: %s", w, cudaGetErrorString(e));
        graph_fetch(&g, &replay[w]);
    }
    printf("graph: %zu nodes (select, GAE, statistics, gather), replayed with draw_base %llu, k %d then %llu, k %d\n",
           nodes, (unsigned long long)base[0], kk[0], (unsigned long long)base[1], kk[1]);
    if (ok) {
        for (int w = 0; w < 2; w++) {
            char what[64];
            snprintf(what, sizeof what, "replay %d vs direct", w);
            long bad = graph_compare(what, &replay[w], &direct[w]);
            printf("  %-24s %ld values differ\n", what, bad);
            CHECK(bad == 0, "graph: %s: %ld values differ", what, bad);
        }
        long first;
        long da = count_diff(direct[0].action, direct[1].action, G_N, sizeof(int), &first);
        long dm = count_diff(direct[0].mb.inst, direct[1].mb.inst, G_MB, sizeof(int), &first);
        printf("  the changed words moved %ld of %d actions and %ld of %d minibatch samples\n", da, G_N, dm, G_MB);
        CHECK(da > 0 && dm > 0, "graph: changing draw_base / k changed nothing (%ld actions, %ld samples)", da, dm);
        for (int w = 0; w < 2; w++)
            graph_result_free(&replay[w]);
    }
    for (int w = 0; w < 2; w++)
        graph_result_free(&direct[w]);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    void *p[] = {g.base,   g.k,    g.logits, g.reward, g.value, g.last,       g.ep_R,       g.done,
                 g.action, g.logp, g.adv,    g.ret,    g.stats, g.stats_work, g.gather_work};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        dev_free(p[i]);
    rollout_dev_free(&g.r);
    mb_free(&g.mb, 1);
    rollout_free(&r);
    free(z), free(reward), free(value), free(last), free(ep_R), free(done);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    const select_case sel[] = {
        {"n=1", 1, 3, 0, 0, 0, 1, 0},
        {"n=7 greedy padded", 7, 3, 2, 1, 0, 1, 0},
        {"n=1000 A=5 padded", 1000, 5, 1, 0, 1, 1, 987654321},
        {"n=65539 padded", 65539, 3, 1, 0, 1, 1, ((uint64_t)1 << 33) + 5},
        {"n=65539 greedy padded", 65539, 3, 1, 1, 1, 1, 42},
        {"n=4096 no logp", 4096, 3, 0, 0, 1, 0, 4096},
    };
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++)
        select_case_run(&sel[i], 8100 + i);
    const int gae[][2] = {{1, 1}, {7, 33}, {3, 1000}, {64, 4096}};
    for (size_t i = 0; i < sizeof gae / sizeof gae[0]; i++)
        gae_case_run(gae[i][0], gae[i][1], 8200 + i);
    const int stats_n[] = {1, 777, 262144, 1048576};
    for (size_t i = 0; i < sizeof stats_n / sizeof stats_n[0]; i++)
        stats_case_run(stats_n[i], 8300 + i);
    const int gather[][2] = {{1, 16}, {1000, 11}, {65536, 16}};
    for (size_t i = 0; i < sizeof gather / sizeof gather[0]; i++)
        gather_case_run(gather[i][0], gather[i][1], 8400 + i);
    graph_case_run(8500);
#endif
    TEST_MAIN_END();
}
