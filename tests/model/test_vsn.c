/* test_vsn.c: the Variable Selection Network op in float64.
 *
 * 1. forward against the naive oracle (vsn_ref.h), and central-difference
 *    gradient checks of every weight tensor, s and c for the loss
 *    L = sum(v * R) + sum(alpha * R2), at (F, C, Dv) = (40, 16, 8), an odd
 *    size (37, 11, 5) and a size with Hs = F < Dv (3, 2, 7);
 * 2. strides: every strided buffer padded and the padding poisoned with NaN
 *    gives bit-identical results to contiguous buffers; results do not
 *    depend on the thread count; gradient conventions (write / accumulate);
 * 3. vsn_reads_snapshot_view_of_window: s and c as views of one [rows, 56]
 *    window buffer, row stride 56, against contiguous copies (DESIGN 1, 9);
 * 4. a huge logit (1e4) gives finite alpha summing to 1. */
#define ST_REAL_BITS 64
#include "core/real.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "check/gradcheck.h"
#include "model/vsn.h"
#include "test.h"
#include "vsn_ref.h"

static double *randn(long n, double sd, uint64_t seed, uint32_t salt) {
    double *x = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    st_gc_randn(x, n, sd, seed, salt);
    return x;
}

/* Every buffer of one forward + backward call, with its stride. */
typedef struct {
    const double *s, *c, *dv, *dalpha;
    int s_stride, c_stride, dv_stride, dalpha_stride;
    double *v, *alpha, *ds, *dc;
    int v_stride, alpha_stride, ds_stride, dc_stride, dc_acc;
    double *grads; /* flat as the layout, added to */
} vsn_io;

static void run_io(const vsn_layout *L, int rows, const double *p, vsn_io *x) {
    st_vsn_weights w = vsn_bind_w(L, p);
    st_vsn_grads g = vsn_bind_g(L, x->grads);
    double *saved = malloc(sizeof(double) * st_vsn_saved_count(rows, L->F, L->C, L->Dv));
    double *work = malloc(sizeof(double) * st_vsn_work_count(rows, L->F, L->C, L->Dv));
    st_vsn_forward(rows, L->F, L->C, L->Dv, x->s, x->s_stride, x->c, x->c_stride, &w, x->v, x->v_stride, x->alpha,
                   x->alpha_stride, saved, work);
    st_vsn_backward_ex(rows, L->F, L->C, L->Dv, x->s, x->s_stride, x->c, x->c_stride, &w, saved, x->dv, x->dv_stride,
                       x->dalpha, x->dalpha_stride, x->ds, x->ds_stride, x->dc, x->dc_stride, x->dc_acc, &g, work);
    free(saved), free(work);
}

/* ---------------------------------------------------------------- 1. gradients */

typedef struct {
    const vsn_layout *L;
    int rows;
    double *s, *c, *p, *R, *R2, *v, *alpha, *saved, *work;
} gc_ctx;

static double gc_loss(void *vctx) {
    gc_ctx *x = vctx;
    const vsn_layout *L = x->L;
    st_vsn_weights w = vsn_bind_w(L, x->p);
    st_vsn_forward(x->rows, L->F, L->C, L->Dv, x->s, L->F, x->c, L->C, &w, x->v, L->Dv, x->alpha, L->F, x->saved,
                   x->work);
    return st_gc_dot(x->v, x->rows, L->Dv, L->Dv, x->R) + st_gc_dot(x->alpha, x->rows, L->F, L->F, x->R2);
}

static void test_gradients(int F, int C, int Dv, int rows, uint64_t seed) {
    printf("gradient check F=%d C=%d Dv=%d rows=%d\n", F, C, Dv, rows);
    vsn_layout L = vsn_layout_make(F, C, Dv);
    gc_ctx x = {&L, rows, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    x.s = randn((long)rows * F, 1.0, seed, 1);
    x.c = randn((long)rows * C, 1.0, seed, 2);
    x.R = randn((long)rows * Dv, 1.0, seed, 3);
    x.R2 = randn((long)rows * F, 1.0, seed, 4);
    x.p = malloc(sizeof(double) * L.total);
    vsn_fill_params(&L, x.p, seed);
    x.v = malloc(sizeof(double) * (size_t)rows * Dv);
    x.alpha = malloc(sizeof(double) * (size_t)rows * F);
    x.saved = malloc(sizeof(double) * st_vsn_saved_count(rows, F, C, Dv));
    x.work = malloc(sizeof(double) * st_vsn_work_count(rows, F, C, Dv));
    double *grads = calloc(L.total, sizeof(double));
    double *ds = malloc(sizeof(double) * (size_t)rows * F), *dc = malloc(sizeof(double) * (size_t)rows * C);
    vsn_io io = {x.s, x.c, x.R, x.R2, F, C, Dv, F, x.v, x.alpha, ds, dc, Dv, F, F, C, 0, grads};
    run_io(&L, rows, x.p, &io);

    /* The forward against the oracle: only summation order differs, so the
     * difference is a few ulps of double. */
    double *vr = malloc(sizeof(double) * (size_t)rows * Dv), *ar = malloc(sizeof(double) * (size_t)rows * F);
    vsn_ref_forward(&L, rows, x.s, F, x.c, C, x.p, vr, ar);
    double ev = vsn_rel_diff(x.v, vr, (long)rows * Dv), ea = vsn_rel_diff(x.alpha, ar, (long)rows * F);
    printf("  forward vs oracle: v rel %.2e, alpha rel %.2e\n", ev, ea);
    CHECK(ev <= 1e-12 && ea <= 1e-12, "forward differs from the oracle: v %.3e alpha %.3e", ev, ea);

    /* Each tensor: up to 64 Philox-chosen elements (all when smaller). */
    for (int i = 0; i < VSN_NT; i++) {
        const vsn_tensor *t = &L.t[i];
        st_gc_result r = st_gc_tensor(gc_loss, &x, x.p + L.off[i], t->rows, t->cols, t->cols, grads + L.off[i], t->cols,
                                      64, seed + (uint64_t)i);
        CHECK_GRAD(t->name, r, ST_GC_BOUND);
    }
    st_gc_result rs = st_gc_tensor(gc_loss, &x, x.s, rows, F, F, ds, F, 64, seed + 100);
    CHECK_GRAD("s (snapshot)", rs, ST_GC_BOUND);
    st_gc_result rc = st_gc_tensor(gc_loss, &x, x.c, rows, C, C, dc, C, 64, seed + 101);
    CHECK_GRAD("c (context)", rc, ST_GC_BOUND);
    free(x.s), free(x.c), free(x.R), free(x.R2), free(x.p), free(x.v), free(x.alpha), free(x.saved), free(x.work);
    free(grads), free(ds), free(dc), free(vr), free(ar);
}

/* ---------------------------------------------------------------- 2. strides */

static double *padded_copy(const double *src, int rows, int width, int stride) {
    double *p = test_padded(rows, width, stride);
    for (int r = 0; r < rows; r++)
        memcpy(p + (size_t)r * stride, src + (size_t)r * width, sizeof(double) * width);
    return p;
}

/* Valid parts of a strided buffer equal (bitwise) a contiguous one. */
static int same_rows(const double *a, int a_stride, const double *b, int rows, int width) {
    for (int r = 0; r < rows; r++)
        if (memcmp(a + (size_t)r * a_stride, b + (size_t)r * width, sizeof(double) * width)) return 0;
    return 1;
}

/* Valid parts finite, padding still NaN (nothing written outside the rows). */
static int valid_finite_pad_nan(const double *a, int rows, int width, int stride) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < stride; i++) {
            double x = a[(size_t)r * stride + i];
            if (i < width ? !isfinite(x) : !isnan(x)) return 0;
        }
    return 1;
}

typedef struct {
    int rows;
    vsn_layout L;
    double *s, *c, *dv, *dalpha, *p;
} inputs;

static inputs make_inputs(int F, int C, int Dv, int rows, uint64_t seed) {
    inputs in;
    in.rows = rows;
    in.L = vsn_layout_make(F, C, Dv);
    in.s = randn((long)rows * F, 1.0, seed, 1);
    in.c = randn((long)rows * C, 1.0, seed, 2);
    in.dv = randn((long)rows * Dv, 1.0, seed, 3);
    in.dalpha = randn((long)rows * F, 1.0, seed, 4);
    in.p = malloc(sizeof(double) * in.L.total);
    vsn_fill_params(&in.L, in.p, seed);
    return in;
}

static void free_inputs(inputs *in) { free(in->s), free(in->c), free(in->dv), free(in->dalpha), free(in->p); }

/* Outputs of one contiguous run. */
typedef struct {
    double *v, *alpha, *ds, *dc, *grads;
} outputs;

static outputs run_contiguous(const inputs *in, int with_dalpha) {
    const int F = in->L.F, C = in->L.C, Dv = in->L.Dv, R = in->rows;
    outputs o = {malloc(sizeof(double) * R * Dv), malloc(sizeof(double) * R * F), malloc(sizeof(double) * R * F),
                 malloc(sizeof(double) * R * C), calloc(in->L.total, sizeof(double))};
    vsn_io io = {in->s, in->c, in->dv, with_dalpha ? in->dalpha : NULL, F, C, Dv, F, o.v, o.alpha, o.ds, o.dc, Dv, F, F,
                 C,     0,     o.grads};
    run_io(&in->L, R, in->p, &io);
    return o;
}

static int same_outputs(const inputs *in, const outputs *a, const outputs *b) {
    const int F = in->L.F, C = in->L.C, Dv = in->L.Dv, R = in->rows;
    return !memcmp(a->v, b->v, sizeof(double) * R * Dv) && !memcmp(a->alpha, b->alpha, sizeof(double) * R * F) &&
           !memcmp(a->ds, b->ds, sizeof(double) * R * F) && !memcmp(a->dc, b->dc, sizeof(double) * R * C) &&
           !memcmp(a->grads, b->grads, sizeof(double) * in->L.total);
}

static void free_outputs(outputs *o) { free(o->v), free(o->alpha), free(o->ds), free(o->dc), free(o->grads); }

static void test_strides(int F, int C, int Dv, int rows, uint64_t seed) {
    printf("stride test F=%d C=%d Dv=%d rows=%d\n", F, C, Dv, rows);
    inputs in = make_inputs(F, C, Dv, rows, seed);
    outputs ref = run_contiguous(&in, 1);
    /* Each stride wider than its row by a different amount. */
    const int ss = F + 3, cs = C + 2, vs = Dv + 3, as = F + 2, dvs = Dv + 1, das = F + 4, dss = F + 5, dcs = C + 4;
    double *s = padded_copy(in.s, rows, F, ss), *c = padded_copy(in.c, rows, C, cs);
    double *dv = padded_copy(in.dv, rows, Dv, dvs), *da = padded_copy(in.dalpha, rows, F, das);
    double *v = test_padded(rows, Dv, vs), *alpha = test_padded(rows, F, as);
    double *ds = test_padded(rows, F, dss), *dc = test_padded(rows, C, dcs);
    double *grads = calloc(in.L.total, sizeof(double));
    vsn_io io = {s, c, dv, da, ss, cs, dvs, das, v, alpha, ds, dc, vs, as, dss, dcs, 0, grads};
    run_io(&in.L, rows, in.p, &io);
    CHECK(same_rows(v, vs, ref.v, rows, Dv), "padded v differs from contiguous");
    CHECK(same_rows(alpha, as, ref.alpha, rows, F), "padded alpha differs from contiguous");
    CHECK(same_rows(ds, dss, ref.ds, rows, F), "padded ds differs from contiguous");
    CHECK(same_rows(dc, dcs, ref.dc, rows, C), "padded dc differs from contiguous");
    CHECK(!memcmp(grads, ref.grads, sizeof(double) * in.L.total), "parameter grads differ with padded inputs");
    int ok = 1;
    for (size_t i = 0; i < in.L.total; i++)
        ok &= isfinite(grads[i]) != 0;
    CHECK(ok, "non-finite parameter gradient");
    CHECK(valid_finite_pad_nan(v, rows, Dv, vs), "v: non-finite value or padding written");
    CHECK(valid_finite_pad_nan(alpha, rows, F, as), "alpha: non-finite value or padding written");
    CHECK(valid_finite_pad_nan(ds, rows, F, dss), "ds: non-finite value or padding written");
    CHECK(valid_finite_pad_nan(dc, rows, C, dcs), "dc: non-finite value or padding written");
    free(s), free(c), free(dv), free(da), free(v), free(alpha), free(ds), free(dc), free(grads);
    free_outputs(&ref);
    free_inputs(&in);
}

/* Same inputs, run twice and with 1 and 3 threads: bit-identical. */
static void test_determinism(int F, int C, int Dv, int rows, uint64_t seed) {
    printf("determinism F=%d C=%d Dv=%d rows=%d\n", F, C, Dv, rows);
    inputs in = make_inputs(F, C, Dv, rows, seed);
    outputs a = run_contiguous(&in, 1), b = run_contiguous(&in, 1);
    CHECK(same_outputs(&in, &a, &b), "two identical runs differ");
#ifdef _OPENMP
    int keep = omp_get_max_threads();
    omp_set_num_threads(1);
    outputs t1 = run_contiguous(&in, 1);
    omp_set_num_threads(3);
    outputs t3 = run_contiguous(&in, 1);
    omp_set_num_threads(keep);
    CHECK(same_outputs(&in, &t1, &a) && same_outputs(&in, &t3, &a), "results depend on the thread count");
    free_outputs(&t1), free_outputs(&t3);
#endif
    free_outputs(&a), free_outputs(&b);
    free_inputs(&in);
}

/* ds and dc are written (a second call gives the same), dc adds when asked,
 * parameter grads add (a second call doubles them), dalpha = NULL is the
 * plain backward. */
static void test_conventions(int F, int C, int Dv, int rows, uint64_t seed) {
    printf("gradient conventions F=%d C=%d Dv=%d rows=%d\n", F, C, Dv, rows);
    inputs in = make_inputs(F, C, Dv, rows, seed);
    vsn_layout *L = &in.L;
    outputs a = run_contiguous(&in, 0);
    st_vsn_weights w = vsn_bind_w(L, in.p);
    double *saved = malloc(sizeof(double) * st_vsn_saved_count(rows, F, C, Dv));
    double *work = malloc(sizeof(double) * st_vsn_work_count(rows, F, C, Dv));
    double *v = malloc(sizeof(double) * rows * Dv), *ds = randn((long)rows * F, 1, seed, 9);
    double *dc0 = randn((long)rows * C, 1, seed, 10), *dc = malloc(sizeof(double) * rows * C);
    memcpy(dc, dc0, sizeof(double) * rows * C);
    double *grads = malloc(sizeof(double) * L->total);
    memcpy(grads, a.grads, sizeof(double) * L->total);
    st_vsn_grads g = vsn_bind_g(L, grads);
    st_vsn_forward(rows, F, C, Dv, in.s, F, in.c, C, &w, v, Dv, NULL, 0, saved, work);
    st_vsn_backward(rows, F, C, Dv, in.s, F, in.c, C, &w, saved, in.dv, Dv, ds, F, dc, C, 1, &g, work);
    CHECK(!memcmp(ds, a.ds, sizeof(double) * rows * F), "ds is not overwritten");
    /* dc0 + dc: BLAS adds beta*C to the product, so allow a few ulps. */
    double err = 0;
    for (int i = 0; i < rows * C; i++)
        err = fmax(err, fabs(dc[i] - (dc0[i] + a.dc[i])) / (1 + fabs(dc0[i])));
    CHECK(err <= 1e-14, "dc_accumulate: dc != dc0 + grad (err %.3e)", err);
    double gerr = 0;
    for (size_t i = 0; i < L->total; i++)
        gerr = fmax(gerr, fabs(grads[i] - 2 * a.grads[i]) / (1 + fabs(a.grads[i])));
    CHECK(gerr <= 1e-13, "parameter grads are not added to (err %.3e)", gerr);
    free(saved), free(work), free(v), free(ds), free(dc0), free(dc), free(grads);
    free_outputs(&a);
    free_inputs(&in);
}

/* ---------------------------------------------------------------- 3. window view */

/* DESIGN section 1: the original bug read the 40-wide snapshot out of the
 * 56-wide window with stride 40. Here s and c are views of one window and
 * the gradients land in one window-shaped dX, all with stride F+C. */
static void vsn_reads_snapshot_view_of_window(void) {
    const int F = 40, C = 16, Dv = 8, rows = 12, W = F + C;
    printf("vsn_reads_snapshot_view_of_window (F=%d C=%d stride %d)\n", F, C, W);
    inputs in = make_inputs(F, C, Dv, rows, 0x57A7E);
    double *win = randn((long)rows * W, 1.0, 0x57A7E, 20);
    for (int r = 0; r < rows; r++) {
        memcpy(in.s + (size_t)r * F, win + (size_t)r * W, sizeof(double) * F);
        memcpy(in.c + (size_t)r * C, win + (size_t)r * W + F, sizeof(double) * C);
    }
    outputs ref = run_contiguous(&in, 0);
    double *dwin = test_padded(rows, W, W), *v = malloc(sizeof(double) * rows * Dv);
    double *alpha = malloc(sizeof(double) * rows * F), *grads = calloc(in.L.total, sizeof(double));
    st_vsn_weights w = vsn_bind_w(&in.L, in.p);
    st_vsn_grads g = vsn_bind_g(&in.L, grads);
    double *saved = malloc(sizeof(double) * st_vsn_saved_count(rows, F, C, Dv));
    double *work = malloc(sizeof(double) * st_vsn_work_count(rows, F, C, Dv));
    st_vsn_forward(rows, F, C, Dv, win, W, win + F, W, &w, v, Dv, alpha, F, saved, work);
    st_vsn_backward(rows, F, C, Dv, win, W, win + F, W, &w, saved, in.dv, Dv, dwin, W, dwin + F, W, 0, &g, work);
    CHECK(!memcmp(v, ref.v, sizeof(double) * rows * Dv), "window view: v differs from contiguous copies");
    CHECK(!memcmp(alpha, ref.alpha, sizeof(double) * rows * F), "window view: alpha differs");
    CHECK(same_rows(dwin, W, ref.ds, rows, F), "window view: ds differs");
    CHECK(same_rows(dwin + F, W, ref.dc, rows, C), "window view: dc differs");
    CHECK(!memcmp(grads, ref.grads, sizeof(double) * in.L.total), "window view: parameter grads differ");
    CHECK(valid_finite_pad_nan(dwin, rows, W, W), "window view: dX not fully written or not finite");
    free(win), free(dwin), free(v), free(alpha), free(grads), free(saved), free(work);
    free_outputs(&ref);
    free_inputs(&in);
}

/* ---------------------------------------------------------------- 4. softmax */

/* norm_b = 1e4 on one variable makes its logit ~1e4: exp overflows unless
 * the max is subtracted. Also -1e4 on another, and the backward stays finite. */
static void test_softmax_stability(void) {
    const int F = 40, C = 16, Dv = 8, rows = 8, big = 7, small = 21;
    printf("softmax stability (logit %d ~ +1e4, %d ~ -1e4)\n", big, small);
    inputs in = make_inputs(F, C, Dv, rows, 0xB16);
    in.p[in.L.off[VT_NORM_B] + big] = 1e4;
    in.p[in.L.off[VT_NORM_B] + small] = -1e4;
    outputs o = run_contiguous(&in, 1);
    int finite = 1;
    double worst_sum = 0, min_big = 1;
    for (int r = 0; r < rows; r++) {
        double sum = 0;
        for (int j = 0; j < F; j++) {
            finite &= isfinite(o.alpha[r * F + j]) != 0;
            sum += o.alpha[r * F + j];
        }
        worst_sum = fmax(worst_sum, fabs(sum - 1));
        min_big = fmin(min_big, o.alpha[r * F + big]);
    }
    for (int i = 0; i < rows * Dv; i++)
        finite &= isfinite(o.v[i]) != 0;
    for (int i = 0; i < rows * F; i++)
        finite &= isfinite(o.ds[i]) != 0;
    for (int i = 0; i < rows * C; i++)
        finite &= isfinite(o.dc[i]) != 0;
    for (size_t i = 0; i < in.L.total; i++)
        finite &= isfinite(o.grads[i]) != 0;
    printf("  max |sum alpha - 1| %.2e, min alpha[big] %.17g\n", worst_sum, min_big);
    CHECK(finite, "non-finite output or gradient with a 1e4 logit");
    CHECK(worst_sum <= 1e-12, "alpha sums to 1 +- %.3e", worst_sum);
    CHECK(min_big >= 1 - 1e-12, "the 1e4 logit should take all the weight (%.17g)", min_big);
    free_outputs(&o);
    free_inputs(&in);
}

int main(void) {
#ifdef _OPENMP
    /* The gradient checks run thousands of 6-row forwards: one thread, as a
     * team's wake-up would cost more than the work (results do not depend on
     * the thread count: test_determinism checks that at a size that splits). */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    test_gradients(40, 16, 8, 6, 0x5EED0001);
    test_gradients(37, 11, 5, 6, 0x5EED0002);
    test_gradients(3, 2, 7, 5, 0x5EED0003);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    test_strides(40, 16, 8, 9, 0x5EED0004);
    test_strides(37, 11, 5, 9, 0x5EED0005);
    test_determinism(37, 11, 5, 400, 0x5EED0006);
    test_conventions(37, 11, 5, 7, 0x5EED0007);
    vsn_reads_snapshot_view_of_window();
    test_softmax_stability();
    TEST_MAIN_END();
}
