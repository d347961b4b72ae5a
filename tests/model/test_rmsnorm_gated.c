/* test_rmsnorm_gated.c: out = RMSNorm(y * SiLU(z)) * w of the Mamba2 block.
 *
 * 1. forward (and the saved rstd) against the DESIGN formula written out;
 * 2. float64 central-difference gradients of y, z and w (rel err <= 1e-6,
 *    the harness bound; truncation error of the 1e-5 step is ~1e-10);
 * 3. dw is added to, dy and dz are written;
 * 4. padded, NaN-poisoned row strides on every buffer, y and z as slices of
 *    one wider row as in the block: bit-identical to contiguous, no NaN. */
#define ST_REAL_BITS 64
#include "core/real.h"

#include <omp.h>
#include <stdint.h>

#include "check/gradcheck.h"
#include "model/rmsnorm_gated.h"
#include "test.h"

#define EPS 1e-5

typedef struct {
    int rows, n;
    double *y, *z, *w, *out, *rstd;
    int y_stride, z_stride, out_stride;
    const double *R; /* loss weights [rows, n] */
} rms_case;

static double rms_loss(void *p) {
    rms_case *c = p;
    st_rmsnorm_gated_forward(c->rows, c->n, c->y, c->y_stride, c->z, c->z_stride, c->w, EPS, c->out, c->out_stride,
                             c->rstd);
    return st_gc_dot(c->out, c->rows, c->n, c->out_stride, c->R);
}

static double *randn(long n, double scale, double shift, uint64_t seed, uint32_t salt) {
    double *p = malloc(sizeof(double) * (size_t)n);
    st_gc_randn(p, n, scale, seed, salt);
    for (long i = 0; i < n; i++)
        p[i] += shift;
    return p;
}

static void check_forward(int rows, int n, uint64_t seed) {
    double *y = randn((long)rows * n, 1, 0, seed, 1), *z = randn((long)rows * n, 1.5, 0, seed, 2);
    double *w = randn(n, 0.2, 1, seed, 3), *out = malloc(sizeof(double) * rows * n);
    double *rstd = malloc(sizeof(double) * rows);
    st_rmsnorm_gated_forward(rows, n, y, n, z, n, w, EPS, out, n, rstd);
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < n; i++) {
            double g = y[r * n + i] * z[r * n + i] / (1 + exp(-z[r * n + i]));
            ss += g * g;
        }
        double rs = 1 / sqrt(ss / n + EPS);
        worst = fmax(worst, fabs(rs - rstd[r]) / rs);
        for (int i = 0; i < n; i++) {
            double o = y[r * n + i] * z[r * n + i] / (1 + exp(-z[r * n + i])) * rs * w[i];
            worst = fmax(worst, fabs(o - out[r * n + i]) / (fabs(o) + 1e-300));
        }
    }
    printf("  forward vs formula (rows %d n %d): max rel err %.2e\n", rows, n, worst);
    /* Only rounding differs (exp form of the sigmoid, product order). */
    CHECK(worst <= 1e-13, "gated RMSNorm forward differs from the formula: %.3e", worst);
    free(y), free(z), free(w), free(out), free(rstd);
}

/* y and z live in one row of width 2n + 3, as z and y do in the block. */
static void check_grads(int rows, int n, uint64_t seed) {
    int rs = 2 * n + 3, os = n + 2;
    double *buf = randn((long)rows * rs, 1.5, 0, seed, 1);
    rms_case c = {rows,
                  n,
                  buf + n + 3,
                  buf,
                  randn(n, 0.2, 1, seed, 3),
                  malloc(sizeof(double) * rows * os),
                  malloc(sizeof(double) * rows),
                  rs,
                  rs,
                  os,
                  randn((long)rows * n, 1, 0, seed, 4)};
    double *dy = malloc(sizeof(double) * rows * n), *dz = malloc(sizeof(double) * rows * n);
    double *dw = calloc(n, sizeof(double));
    rms_loss(&c); /* rstd for the backward */
    st_rmsnorm_gated_backward(rows, n, c.y, rs, c.z, rs, c.w, c.rstd, c.R, n, dy, n, dz, n, dw);

    char name[64];
    snprintf(name, sizeof name, "rmsnorm_gated y (n %d)", n);
    CHECK_GRAD(name, st_gc_tensor(rms_loss, &c, c.y, rows, n, rs, dy, n, 400, seed + 11), ST_GC_BOUND);
    snprintf(name, sizeof name, "rmsnorm_gated z (n %d)", n);
    CHECK_GRAD(name, st_gc_tensor(rms_loss, &c, c.z, rows, n, rs, dz, n, 400, seed + 12), ST_GC_BOUND);
    snprintf(name, sizeof name, "rmsnorm_gated w (n %d)", n);
    CHECK_GRAD(name, st_gc_tensor(rms_loss, &c, c.w, 1, n, n, dw, n, 400, seed + 13), ST_GC_BOUND);

    /* A second backward doubles dw exactly (added to) and rewrites dy, dz. */
    double *dw1 = malloc(sizeof(double) * n), *dy1 = malloc(sizeof(double) * rows * n);
    memcpy(dw1, dw, sizeof(double) * n), memcpy(dy1, dy, sizeof(double) * rows * n);
    rms_loss(&c);
    st_rmsnorm_gated_backward(rows, n, c.y, rs, c.z, rs, c.w, c.rstd, c.R, n, dy, n, dz, n, dw);
    int bad = memcmp(dy, dy1, sizeof(double) * rows * n) != 0;
    for (int i = 0; i < n; i++)
        bad += dw[i] != 2 * dw1[i];
    CHECK(bad == 0, "gated RMSNorm backward: dw not added to or dy not overwritten (%d mismatches)", bad);
    free(buf), free(c.w), free(c.out), free(c.rstd), free((void *)c.R), free(dy), free(dz), free(dw);
    free(dw1), free(dy1);
}

static double *padded_copy(const double *src, int rows, int width, int stride) {
    double *p = test_padded(rows, width, stride);
    for (int r = 0; r < rows; r++)
        memcpy(p + (size_t)r * stride, src + (size_t)r * width, sizeof(double) * width);
    return p;
}

static void check_strides(int rows, int n, uint64_t seed) {
    long e = (long)rows * n;
    double *y = randn(e, 1, 0, seed, 1), *z = randn(e, 1.5, 0, seed, 2), *w = randn(n, 0.2, 1, seed, 3);
    double *dout = randn(e, 1, 0, seed, 4), *out = malloc(sizeof(double) * e), *rstd = malloc(sizeof(double) * rows);
    double *dy = malloc(sizeof(double) * e), *dz = malloc(sizeof(double) * e), *dw = calloc(n, sizeof(double));
    st_rmsnorm_gated_forward(rows, n, y, n, z, n, w, EPS, out, n, rstd);
    st_rmsnorm_gated_backward(rows, n, y, n, z, n, w, rstd, dout, n, dy, n, dz, n, dw);

    int ys = n + 3, zs = n + 1, os = n + 4, gs = n + 5, dys = n + 2, dzs = n + 7;
    double *py = padded_copy(y, rows, n, ys), *pz = padded_copy(z, rows, n, zs), *pg = padded_copy(dout, rows, n, gs);
    double *pout = test_padded(rows, n, os), *pdy = test_padded(rows, n, dys), *pdz = test_padded(rows, n, dzs);
    double *prstd = malloc(sizeof(double) * rows), *pdw = calloc(n, sizeof(double));
    st_rmsnorm_gated_forward(rows, n, py, ys, pz, zs, w, EPS, pout, os, prstd);
    st_rmsnorm_gated_backward(rows, n, py, ys, pz, zs, w, prstd, pg, gs, pdy, dys, pdz, dzs, pdw);

    int diff = 0, nan = 0;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) {
            double a = pout[r * os + i], b = pdy[r * dys + i], c = pdz[r * dzs + i];
            nan += isnan(a) + isnan(b) + isnan(c);
            diff += (memcmp(&a, &out[r * n + i], 8) != 0) + (memcmp(&b, &dy[r * n + i], 8) != 0) +
                    (memcmp(&c, &dz[r * n + i], 8) != 0);
        }
    diff += memcmp(rstd, prstd, sizeof(double) * rows) != 0;
    diff += memcmp(dw, pdw, sizeof(double) * n) != 0;
    printf("  strides (rows %d n %d): %d differing values, %d NaN\n", rows, n, diff, nan);
    CHECK(diff == 0 && nan == 0, "gated RMSNorm with padded strides: %d values differ, %d NaN", diff, nan);
    free(y), free(z), free(w), free(dout), free(out), free(rstd), free(dy), free(dz), free(dw);
    free(py), free(pz), free(pg), free(pout), free(pdy), free(pdz), free(prstd), free(pdw);
}

/* Forward and backward once per thread count; all outputs must match bitwise. */
static void check_threads(int rows, int n, uint64_t seed) {
    long e = (long)rows * n;
    double *y = randn(e, 1, 0, seed, 1), *z = randn(e, 1.5, 0, seed, 2), *w = randn(n, 0.2, 1, seed, 3);
    double *dout = randn(e, 1, 0, seed, 4), *o[2][5];
    int keep = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        o[k][0] = malloc(sizeof(double) * e), o[k][1] = malloc(sizeof(double) * rows);
        o[k][2] = malloc(sizeof(double) * e), o[k][3] = malloc(sizeof(double) * e), o[k][4] = calloc(n, sizeof(double));
        st_rmsnorm_gated_forward(rows, n, y, n, z, n, w, EPS, o[k][0], n, o[k][1]);
        st_rmsnorm_gated_backward(rows, n, y, n, z, n, w, o[k][1], dout, n, o[k][2], n, o[k][3], n, o[k][4]);
    }
    omp_set_num_threads(keep);
    const long len[5] = {e, rows, e, e, n};
    int diff = 0;
    for (int i = 0; i < 5; i++)
        diff += memcmp(o[0][i], o[1][i], sizeof(double) * len[i]) != 0;
    printf("  threads (rows %d n %d): 1 vs 2 threads, %d differing tensors\n", rows, n, diff);
    CHECK(diff == 0, "gated RMSNorm: 1 and 2 threads give %d differing tensors", diff);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 5; i++)
            free(o[k][i]);
    free(y), free(z), free(w), free(dout);
}

int main(void) {
    const uint64_t seed = 0x125C0;
    /* {rows, n}: the tiny preset's d_inner, an odd width across the 16-wide
     * column blocks of the dw sum, and a single value per row. */
    const int cases[][2] = {{12, 64}, {9, 37}, {5, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        check_forward(cases[k][0], cases[k][1], seed + k);
        check_grads(cases[k][0], cases[k][1], seed + k);
        check_strides(cases[k][0], cases[k][1], seed + k);
    }
    check_threads(1024, 64, seed + 7); /* the tiny preset's B*K rows x d_inner: split over threads */
    TEST_MAIN_END();
}
