/* test_conv1d.c: the causal depthwise conv (+ SiLU) of the Mamba2 block.
 *
 * 1. forward against a direct evaluation of the DESIGN formula;
 * 2. float64 central-difference gradients of x, w and b (rel err <= 1e-6,
 *    the harness bound: the step 1e-5 leaves a truncation error ~1e-10);
 * 3. parameter gradients are added to, dx is written;
 * 4. padded, NaN-poisoned row strides on every buffer: bit-identical to the
 *    contiguous run and no NaN in valid outputs;
 * with SiLU on and off, and a window shorter than the kernel (W > K);
 * 5. one and two threads give the same bits on a size that is split. */
#define ST_REAL_BITS 64
#include "core/real.h"

#include <omp.h>
#include <stdint.h>

#include "check/gradcheck.h"
#include "model/act.h"
#include "model/conv1d.h"
#include "test.h"

typedef struct {
    int Bsz, K, Ch, W, silu;
    double *x, *w, *b, *y;
    int x_stride, y_stride;
    const double *R; /* loss weights [Bsz*K, Ch] */
} conv_case;

static double conv_loss(void *p) {
    conv_case *c = p;
    st_conv1d_forward(c->Bsz, c->K, c->Ch, c->W, c->x, c->x_stride, c->w, c->b, c->silu, c->y, c->y_stride);
    return st_gc_dot(c->y, c->Bsz * c->K, c->Ch, c->y_stride, c->R);
}

static double *randn(long n, double scale, uint64_t seed, uint32_t salt) {
    double *p = malloc(sizeof(double) * (size_t)n);
    st_gc_randn(p, n, scale, seed, salt);
    return p;
}

/* A rows x width copy of a contiguous matrix in a NaN-padded stride. */
static double *padded_copy(const double *src, int rows, int width, int stride) {
    double *p = test_padded(rows, width, stride);
    for (int r = 0; r < rows; r++)
        memcpy(p + (size_t)r * stride, src + (size_t)r * width, sizeof(double) * width);
    return p;
}

/* Forward against y[t] = b + sum_i w[i] x[t-W+1+i] written out directly. */
static void check_forward(int Bsz, int K, int Ch, int W, int silu, uint64_t seed) {
    int rows = Bsz * K;
    double *x = randn((long)rows * Ch, 1.0, seed, 1), *w = randn((long)Ch * W, 0.5, seed, 2);
    double *b = randn(Ch, 0.3, seed, 3), *y = malloc(sizeof(double) * rows * Ch);
    st_conv1d_forward(Bsz, K, Ch, W, x, Ch, w, b, silu, y, Ch);
    double worst = 0;
    for (int bb = 0; bb < Bsz; bb++)
        for (int t = 0; t < K; t++)
            for (int ch = 0; ch < Ch; ch++) {
                double acc = b[ch];
                for (int i = 0; i < W; i++) {
                    int s = t - W + 1 + i;
                    if (s >= 0) acc += w[ch * W + i] * x[(bb * K + s) * Ch + ch];
                }
                if (silu) acc = acc / (1 + exp(-acc));
                double e = fabs(acc - y[(bb * K + t) * Ch + ch]) / (fabs(acc) + 1e-300);
                if (e > worst) worst = e;
            }
    printf("  forward vs formula (Bsz %d K %d Ch %d W %d silu %d): max rel err %.2e\n", Bsz, K, Ch, W, silu, worst);
    /* Same sums in a different order and exp vs the act.h sigmoid: a few ulps. */
    CHECK(worst <= 1e-13, "conv forward differs from the formula: %.3e", worst);
    free(x), free(w), free(b), free(y);
}

/* Gradient check of x (strided, a column slice of wider rows), w and b. */
static void check_grads(int Bsz, int K, int Ch, int W, int silu, uint64_t seed) {
    int rows = Bsz * K, xs = Ch + 3, ys = Ch + 2;
    conv_case c = {Bsz,
                   K,
                   Ch,
                   W,
                   silu,
                   randn((long)rows * xs, 1.0, seed, 1),
                   randn((long)Ch * W, 0.5, seed, 2),
                   randn(Ch, 0.3, seed, 3),
                   malloc(sizeof(double) * rows * ys),
                   xs,
                   ys,
                   randn((long)rows * Ch, 1.0, seed, 4)};
    double *dx = malloc(sizeof(double) * rows * Ch), *work = malloc(sizeof(double) * st_conv1d_work_count(Bsz, K, Ch));
    double *dw = calloc((size_t)Ch * W, sizeof(double)), *db = calloc(Ch, sizeof(double));
    st_conv1d_backward(Bsz, K, Ch, W, c.x, xs, c.w, c.b, silu, c.R, Ch, dx, Ch, dw, db, work);

    char name[96];
    snprintf(name, sizeof name, "conv x (K %d W %d silu %d)", K, W, silu);
    CHECK_GRAD(name, st_gc_tensor(conv_loss, &c, c.x, rows, Ch, xs, dx, Ch, 400, seed + 11), ST_GC_BOUND);
    snprintf(name, sizeof name, "conv w (K %d W %d silu %d)", K, W, silu);
    CHECK_GRAD(name, st_gc_tensor(conv_loss, &c, c.w, Ch, W, W, dw, W, 400, seed + 12), ST_GC_BOUND);
    snprintf(name, sizeof name, "conv b (K %d W %d silu %d)", K, W, silu);
    CHECK_GRAD(name, st_gc_tensor(conv_loss, &c, c.b, 1, Ch, Ch, db, Ch, 400, seed + 13), ST_GC_BOUND);

    /* Parameter gradients accumulate: a second call exactly doubles them
     * (same sums, and x + x is exact), while dx is overwritten. */
    double *dw1 = malloc(sizeof(double) * Ch * W), *db1 = malloc(sizeof(double) * Ch);
    memcpy(dw1, dw, sizeof(double) * Ch * W), memcpy(db1, db, sizeof(double) * Ch);
    double *dx1 = malloc(sizeof(double) * rows * Ch);
    memcpy(dx1, dx, sizeof(double) * rows * Ch);
    st_conv1d_backward(Bsz, K, Ch, W, c.x, xs, c.w, c.b, silu, c.R, Ch, dx, Ch, dw, db, work);
    int bad = memcmp(dx, dx1, sizeof(double) * rows * Ch) != 0;
    for (int i = 0; i < Ch * W; i++)
        bad += dw[i] != 2 * dw1[i];
    for (int i = 0; i < Ch; i++)
        bad += db[i] != 2 * db1[i];
    CHECK(bad == 0, "conv backward: dw/db not added to or dx not overwritten (%d mismatches)", bad);
    free(c.x), free(c.w), free(c.b), free(c.y), free((void *)c.R), free(dx), free(work), free(dw), free(db);
    free(dw1), free(db1), free(dx1);
}

/* Everything once with contiguous rows, once with NaN-padded strides. */
static void check_strides(int Bsz, int K, int Ch, int W, int silu, uint64_t seed) {
    int rows = Bsz * K, n = rows * Ch;
    double *x = randn(n, 1.0, seed, 1), *w = randn((long)Ch * W, 0.5, seed, 2), *b = randn(Ch, 0.3, seed, 3);
    double *dy = randn(n, 1.0, seed, 4), *work = malloc(sizeof(double) * st_conv1d_work_count(Bsz, K, Ch));
    double *y = malloc(sizeof(double) * n), *dx = malloc(sizeof(double) * n);
    double *dw = calloc((size_t)Ch * W, sizeof(double)), *db = calloc(Ch, sizeof(double));
    st_conv1d_forward(Bsz, K, Ch, W, x, Ch, w, b, silu, y, Ch);
    st_conv1d_backward(Bsz, K, Ch, W, x, Ch, w, b, silu, dy, Ch, dx, Ch, dw, db, work);

    int xs = Ch + 3, ys = Ch + 2, dys = Ch + 5, dxs = Ch + 1;
    double *px = padded_copy(x, rows, Ch, xs), *pdy = padded_copy(dy, rows, Ch, dys);
    double *py = test_padded(rows, Ch, ys), *pdx = test_padded(rows, Ch, dxs);
    double *pdw = calloc((size_t)Ch * W, sizeof(double)), *pdb = calloc(Ch, sizeof(double));
    st_conv1d_forward(Bsz, K, Ch, W, px, xs, w, b, silu, py, ys);
    st_conv1d_backward(Bsz, K, Ch, W, px, xs, w, b, silu, pdy, dys, pdx, dxs, pdw, pdb, work);

    int diff = 0, nan = 0;
    for (int r = 0; r < rows; r++)
        for (int ch = 0; ch < Ch; ch++) {
            double a = py[r * ys + ch], g = pdx[r * dxs + ch];
            nan += isnan(a) + isnan(g);
            diff += memcmp(&a, &y[r * Ch + ch], sizeof a) != 0;
            diff += memcmp(&g, &dx[r * Ch + ch], sizeof g) != 0;
        }
    diff += memcmp(dw, pdw, sizeof(double) * Ch * W) != 0;
    diff += memcmp(db, pdb, sizeof(double) * Ch) != 0;
    printf("  strides (K %d W %d silu %d): %d differing values, %d NaN\n", K, W, silu, diff, nan);
    CHECK(diff == 0 && nan == 0, "conv with padded strides: %d values differ from contiguous, %d NaN", diff, nan);
    free(x), free(w), free(b), free(dy), free(work), free(y), free(dx), free(dw), free(db);
    free(px), free(pdy), free(py), free(pdx), free(pdw), free(pdb);
}

/* Forward and backward once per thread count; all outputs must match bitwise. */
static void check_threads(int Bsz, int K, int Ch, int W, uint64_t seed) {
    long n = (long)Bsz * K * Ch;
    double *x = randn(n, 1.0, seed, 1), *w = randn((long)Ch * W, 0.5, seed, 2), *b = randn(Ch, 0.3, seed, 3);
    double *dy = randn(n, 1.0, seed, 4), *work = malloc(sizeof(double) * st_conv1d_work_count(Bsz, K, Ch));
    double *out[2][4];
    int keep = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        out[k][0] = malloc(sizeof(double) * n), out[k][1] = malloc(sizeof(double) * n);
        out[k][2] = calloc((size_t)Ch * W, sizeof(double)), out[k][3] = calloc(Ch, sizeof(double));
        st_conv1d_forward(Bsz, K, Ch, W, x, Ch, w, b, 1, out[k][0], Ch);
        st_conv1d_backward(Bsz, K, Ch, W, x, Ch, w, b, 1, dy, Ch, out[k][1], Ch, out[k][2], out[k][3], work);
    }
    omp_set_num_threads(keep);
    int diff = (memcmp(out[0][0], out[1][0], sizeof(double) * n) != 0) +
               (memcmp(out[0][1], out[1][1], sizeof(double) * n) != 0) +
               (memcmp(out[0][2], out[1][2], sizeof(double) * Ch * W) != 0) +
               (memcmp(out[0][3], out[1][3], sizeof(double) * Ch) != 0);
    printf("  threads (Bsz %d K %d Ch %d): 1 vs 2 threads, %d differing tensors\n", Bsz, K, Ch, diff);
    CHECK(diff == 0, "conv: 1 and 2 threads give %d differing tensors", diff);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++)
            free(out[k][i]);
    free(x), free(w), free(b), free(dy), free(work);
}

int main(void) {
    const uint64_t seed = 0xC0DE1D;
    /* {Bsz, K, Ch, W}: the usual shape, and a kernel longer than the window. */
    const int cases[][4] = {{3, 7, 5, 4}, {2, 3, 4, 5}, {2, 1, 3, 4}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int silu = 0; silu <= 1; silu++) {
            const int *s = cases[k];
            uint64_t sd = seed + 100 * k + silu;
            check_forward(s[0], s[1], s[2], s[3], silu, sd);
            check_grads(s[0], s[1], s[2], s[3], silu, sd);
            check_strides(s[0], s[1], s[2], s[3], silu, sd);
        }
    check_threads(8, 64, 96, 4, seed + 7); /* 49152 elements: above the split threshold */
    TEST_MAIN_END();
}
