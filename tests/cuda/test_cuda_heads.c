/* test_cuda_heads.c: the GPU final LayerNorm + policy and value heads
 * (cuda/heads_cuda.h) against the CPU float op (model/heads.h), reading the
 * last row of each window straight out of window-shaped buffers (row
 * strides of K rows, as the model calls it) for the tiny and odd presets and
 * a 64-window batch:
 *  - forward logits, value and every saved value within 1e-5 relative;
 *  - backward du_last, dc (written, or added to) within 1e-4 and the ten
 *    parameter gradients (added to from the same random start, measured
 *    against the increment) within 1e-4;
 *  - every value of the window buffers but the last rows' is poison: never
 *    read (no NaN in results) and, in the gradient buffers, never written;
 *  - two GPU runs give the same bits.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "model/heads.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/heads_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
static float *host_randn(size_t n, float scale, float shift, uint64_t seed, uint32_t salt) {
    float *p = malloc(sizeof(float) * (n + 1));
    st_gc_randnf(p, (long)n, scale, seed, salt);
    for (size_t i = 0; i < n; i++)
        p[i] += shift;
    return p;
}

/* A window-shaped buffer: n windows of K rows of `stride` values, poison
 * everywhere but `width` random values at column `col` of each window's
 * last row. */
static float *host_last_rows(int n, int K, int stride, int col, int width, uint64_t seed, uint32_t salt) {
    size_t total = (size_t)n * K * stride;
    float *p = host_poisoned(total), *v = host_randn((size_t)n * width, 1.0f, 0.0f, seed, salt);
    for (int b = 0; b < n; b++)
        for (int j = 0; j < width; j++)
            p[((size_t)b * K + K - 1) * stride + col + j] = v[(size_t)b * width + j] + (float)(b % 5) - 2.0f;
    free(v);
    return p;
}

/* Values of a window-shaped buffer outside the last rows' [col, col + width) not poison. */
static long outside_written(const float *h, int n, int K, int stride, int col, int width) {
    long bad = 0;
    for (int b = 0; b < n; b++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < stride; j++) {
                if (k == K - 1 && j >= col && j < col + width) continue;
                bad += !is_poison(h[((size_t)b * K + k) * stride + j]);
            }
    return bad;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* The ten parameter tensors, in the structs' order. */
enum { P_LN_W, P_LN_B, P_PI1_W, P_PI1_B, P_PI2_W, P_PI2_B, P_V1_W, P_V1_B, P_V2_W, P_V2_B, NP };
static const char *const PNAME[NP] = {"ln_w",  "ln_b", "pi1_w", "pi1_b", "pi2_w",
                                      "pi2_b", "v1_w", "v1_b",  "v2_w",  "v2_b"};

typedef struct {
    const char *name;
    int n, K, D, C, F, Hh, A, dc_acc, pad;
} heads_case;

/* Host inputs of a case and its derived sizes. */
typedef struct {
    int us, ws, ls; /* row strides: u rows, window rows, logits */
    size_t nu, nw, cnt[NP], nsaved, nwork;
    float *u, *win, *dlogits, *dvalue, *dc0, *p[NP], *g0[NP];
} heads_data;

typedef struct {
    float *logits, *value, *saved, *du, *dc, *g[NP];
} heads_out;

static void param_counts(const heads_case *c, size_t *cnt) {
    int gw = c->D + c->C;
    size_t v[NP] = {(size_t)c->D, (size_t)c->D,       (size_t)c->Hh * gw, (size_t)c->Hh, (size_t)c->A * c->Hh,
                    (size_t)c->A, (size_t)c->Hh * gw, (size_t)c->Hh,      (size_t)c->Hh, 1};
    memcpy(cnt, v, sizeof v);
}

static void heads_gpu(const heads_case *c, const heads_data *h, heads_out *o) {
    int n = c->n, K = c->K, D = c->D, C = c->C, F = c->F;
    float *u = dev_upload(h->u, h->nu), *win = dev_upload(h->win, h->nw);
    float *dlogits = dev_upload(h->dlogits, (size_t)n * h->ls), *dvalue = dev_upload(h->dvalue, n);
    float *logits = dev_poisoned((size_t)n * h->ls), *value = dev_poisoned(n), *saved = dev_poisoned(h->nsaved);
    float *work = dev_poisoned(h->nwork), *du = dev_poisoned(h->nu);
    float *dc = c->dc_acc ? dev_upload(h->dc0, h->nw) : dev_poisoned(h->nw);
    float *p[NP], *g[NP];
    for (int k = 0; k < NP; k++)
        p[k] = dev_upload(h->p[k], h->cnt[k]), g[k] = dev_upload(h->g0[k], h->cnt[k]);
    st_cuda_heads_weights w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
    st_cuda_heads_grads gr = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]};
    const float *u_last = u + (size_t)(K - 1) * h->us, *c_last = win + (size_t)(K - 1) * h->ws + F;
    int rc = st_cuda_heads_forward(n, D, C, c->Hh, c->A, u_last, K * h->us, c_last, K * h->ws, &w, logits, h->ls, value,
                                   saved, NULL);
    CHECK(rc == ST_OK, "%s: forward: %s", c->name, st_last_error());
    rc = st_cuda_heads_backward(n, D, C, c->Hh, c->A, u_last, K * h->us, &w, saved, dlogits, h->ls, dvalue,
                                du + (size_t)(K - 1) * h->us, K * h->us, dc + (size_t)(K - 1) * h->ws + F, K * h->ws,
                                c->dc_acc, &gr, work, NULL);
    CHECK(rc == ST_OK, "%s: backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->logits = dev_download_new(logits, (size_t)n * h->ls), o->value = dev_download_new(value, n);
    o->saved = dev_download_new(saved, h->nsaved), o->du = dev_download_new(du, h->nu);
    o->dc = dev_download_new(dc, h->nw);
    for (int k = 0; k < NP; k++)
        o->g[k] = dev_download_new(g[k], h->cnt[k]), dev_free(p[k]), dev_free(g[k]);
    dev_free(u), dev_free(win), dev_free(dlogits), dev_free(dvalue), dev_free(logits), dev_free(value);
    dev_free(saved), dev_free(work), dev_free(du), dev_free(dc);
}

static void heads_out_free(heads_out *o) {
    free(o->logits), free(o->value), free(o->saved), free(o->du), free(o->dc);
    for (int k = 0; k < NP; k++)
        free(o->g[k]);
}

static void heads_case_run(const heads_case *c, uint64_t seed) {
    int n = c->n, K = c->K, D = c->D, C = c->C, F = c->F, gw = D + C, pad = c->pad;
    heads_data h;
    memset(&h, 0, sizeof h);
    h.us = D + 3 * pad, h.ws = F + C + 5 * pad, h.ls = c->A + 2 * pad;
    h.nu = (size_t)n * K * h.us, h.nw = (size_t)n * K * h.ws;
    h.nsaved = st_heads_saved_count(n, D, C, c->Hh), h.nwork = st_heads_work_count(n, D, C, c->Hh);
    CHECK(h.nsaved == st_cuda_heads_saved_count(n, D, C, c->Hh) && h.nwork == st_cuda_heads_work_count(n, D, C, c->Hh),
          "%s: GPU saved/work counts differ from the CPU op's", c->name);
    param_counts(c, h.cnt);
    h.u = host_last_rows(n, K, h.us, 0, D, seed, 1);
    h.win = host_last_rows(n, K, h.ws, F, C, seed, 2);
    h.dc0 = host_last_rows(n, K, h.ws, F, C, seed, 3);
    h.dlogits = host_randn((size_t)n * h.ls, 1.0f, 0.0f, seed, 4);
    for (int i = 0; i < n; i++)
        for (int j = c->A; j < h.ls; j++)
            h.dlogits[(size_t)i * h.ls + j] = poison();
    h.dvalue = host_randn(n, 1.0f, 0.0f, seed, 5);
    const float scale[NP] = {0.2f,
                             0.5f,
                             (float)(1 / sqrt(gw)),
                             0.3f,
                             (float)(1 / sqrt(c->Hh)),
                             0.3f,
                             (float)(1 / sqrt(gw)),
                             0.3f,
                             (float)(1 / sqrt(c->Hh)),
                             0.3f};
    for (int k = 0; k < NP; k++) {
        h.p[k] = host_randn(h.cnt[k], scale[k], k == P_LN_W ? 1.0f : 0.0f, seed, 10 + k);
        h.g0[k] = host_randn(h.cnt[k], 1.0f, 0.0f, seed, 30 + k);
    }

    /* CPU reference, on the same window-shaped buffers. */
    float *logits = host_poisoned((size_t)n * h.ls), *value = host_poisoned(n), *saved = host_poisoned(h.nsaved);
    float *work = host_poisoned(h.nwork), *du = host_poisoned(h.nu);
    float *dc = c->dc_acc ? host_copy(h.dc0, h.nw) : host_poisoned(h.nw), *g[NP];
    for (int k = 0; k < NP; k++)
        g[k] = host_copy(h.g0[k], h.cnt[k]);
    st_heads_weights w = {h.p[0], h.p[1], h.p[2], h.p[3], h.p[4], h.p[5], h.p[6], h.p[7], h.p[8], h.p[9]};
    st_heads_grads gr = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]};
    const float *u_last = h.u + (size_t)(K - 1) * h.us, *c_last = h.win + (size_t)(K - 1) * h.ws + F;
    st_heads_forward(n, D, C, c->Hh, c->A, u_last, K * h.us, c_last, K * h.ws, &w, logits, h.ls, value, saved);
    st_heads_backward(n, D, C, c->Hh, c->A, u_last, K * h.us, &w, saved, h.dlogits, h.ls, h.dvalue,
                      du + (size_t)(K - 1) * h.us, K * h.us, dc + (size_t)(K - 1) * h.ws + F, K * h.ws, c->dc_acc, &gr,
                      work);

    heads_out o[2];
    heads_gpu(c, &h, &o[0]);
    heads_gpu(c, &h, &o[1]);
    printf("%s: n %d K %d D %d C %d Hh %d A %d dc_acc %d, strides u %d window %d logits %d\n", c->name, n, K, D, C,
           c->Hh, c->A, c->dc_acc, h.us, h.ws, h.ls);
    char what[96];
#define PARITY(label, err, bound)                                                                                      \
    do {                                                                                                               \
        snprintf(what, sizeof what, "%s %s", c->name, (label));                                                        \
        CHECK_PARITY(what, (err), (bound));                                                                            \
    } while (0)
    PARITY("logits", rel_err_rows(o[0].logits, h.ls, logits, h.ls, n, c->A), 1e-5);
    PARITY("value", rel_err(o[0].value, value, n), 1e-5);
    PARITY("saved", rel_err(o[0].saved, saved, h.nsaved), 1e-5);
    const float *dul = o[0].du + (size_t)(K - 1) * h.us, *cdul = du + (size_t)(K - 1) * h.us;
    PARITY("du_last", rel_err_rows(dul, K * h.us, cdul, K * h.us, n, D), 1e-4);
    size_t at = (size_t)(K - 1) * h.ws + F;
    double edc = c->dc_acc ? rel_err_added_rows(o[0].dc + at, dc + at, h.dc0 + at, n, C, K * h.ws)
                           : rel_err_rows(o[0].dc + at, K * h.ws, dc + at, K * h.ws, n, C);
    PARITY(c->dc_acc ? "dc (+=)" : "dc", edc, 1e-4);
    for (int k = 0; k < NP; k++) {
        char label[32];
        snprintf(label, sizeof label, "d%s (+=)", PNAME[k]);
        PARITY(label, rel_err_added_rows(o[0].g[k], g[k], h.g0[k], 1, (int)h.cnt[k], (int)h.cnt[k]), 1e-4);
    }
#undef PARITY
    long gdu = outside_written(o[0].du, n, K, h.us, 0, D);
    long gdc = outside_written(o[0].dc, n, K, h.ws, F, C); /* dc0 is poison there too */
    long glg = 0;
    for (int i = 0; i < n; i++)
        for (int j = c->A; j < h.ls; j++)
            glg += !is_poison(o[0].logits[(size_t)i * h.ls + j]);
    CHECK(gdu == 0 && gdc == 0 && glg == 0, "%s: written outside their rows: du %ld dc %ld logits gaps %ld", c->name,
          gdu, gdc, glg);
    int same = same_bits(o[0].logits, o[1].logits, (size_t)n * h.ls) && same_bits(o[0].value, o[1].value, n) &&
               same_bits(o[0].saved, o[1].saved, h.nsaved) && same_bits(o[0].du, o[1].du, h.nu) &&
               same_bits(o[0].dc, o[1].dc, h.nw);
    for (int k = 0; k < NP; k++)
        same &= same_bits(o[0].g[k], o[1].g[k], h.cnt[k]);
    CHECK(same, "%s: two GPU runs differ", c->name);
    heads_out_free(&o[0]), heads_out_free(&o[1]);
    free(logits), free(value), free(saved), free(work), free(du), free(dc);
    for (int k = 0; k < NP; k++)
        free(g[k]), free(h.p[k]), free(h.g0[k]);
    free(h.u), free(h.win), free(h.dc0), free(h.dlogits), free(h.dvalue);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_dims t, o, d;
    st_dims_preset("tiny", &t);
    st_dims_preset("odd", &o);
    st_dims_preset("default", &d);
    const heads_case cases[] = {
        {"tiny", 2, t.K, t.D, t.C, t.F, t.Hh, t.A, 0, 0},
        {"tiny padded (dc +=)", 2, t.K, t.D, t.C, t.F, t.Hh, t.A, 1, 1},
        {"odd", o.B, o.K, o.D, o.C, o.F, o.Hh, o.A, 0, 1},
        {"odd (dc +=)", 10, o.K, o.D, o.C, o.F, o.Hh, o.A, 1, 1},
        {"default", 4, d.K, d.D, d.C, d.F, d.Hh, d.A, 0, 1},
        {"64 windows", 64, t.K, t.D, t.C, t.F, t.Hh, t.A, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        heads_case_run(&cases[i], 5000 + i);
#endif
    TEST_MAIN_END();
}
