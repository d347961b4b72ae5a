/* test_vsn_f32.c: the float build of the VSN op (the one training runs)
 * against float64 references.
 *
 * Inputs and weights are drawn in double and rounded to float once, so the
 * float op and the float64 oracle (vsn_ref.h) see the same numbers.
 * - forward: v and alpha against the oracle;
 * - backward: every weight tensor, s and c against central differences of
 *   the float64 oracle for L = sum(v * R) + sum(alpha * R2);
 * - a 1e4 logit gives finite alpha summing to 1 in float as well.
 * The bounds are float round-off with margin: float carries 6e-8 relative,
 * and the sums here (over 320 embeddings, LayerNorms, a softmax) amplify it
 * to ~1e-7..1e-6 (printed), so 1e-5 fails on any real error. */
#include "core/real.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/gradcheck.h"
#include "model/vsn.h"
#include "test.h"
#include "vsn_ref.h"

#define F32_FWD_BOUND 1e-5
#define F32_GRAD_BOUND 1e-5

/* n fresh N(0, sd^2) draws rounded to float: the double copy d holds the
 * float values exactly, f the floats. */
static void draw_pair(long n, double sd, uint64_t seed, uint32_t salt, double *d, float *f) {
    st_gc_randn(d, n, sd, seed, salt);
    for (long i = 0; i < n; i++)
        f[i] = (float)d[i], d[i] = f[i];
}

static double *to_double(const float *f, long n) {
    double *d = malloc(sizeof(double) * (size_t)n);
    for (long i = 0; i < n; i++)
        d[i] = f[i];
    return d;
}

/* The float64 oracle's loss, for the numeric gradients. */
typedef struct {
    const vsn_layout *L;
    int rows;
    double *s, *c, *p, *R, *R2, *v, *alpha;
} ref_ctx;

static double ref_loss(void *vctx) {
    ref_ctx *x = vctx;
    vsn_ref_forward(x->L, x->rows, x->s, x->L->F, x->c, x->L->C, x->p, x->v, x->alpha);
    return st_gc_dot(x->v, x->rows, x->L->Dv, x->L->Dv, x->R) + st_gc_dot(x->alpha, x->rows, x->L->F, x->L->F, x->R2);
}

static void test_against_f64(int F, int C, int Dv, int rows, uint64_t seed, int max_checks) {
    printf("float build vs float64 oracle F=%d C=%d Dv=%d rows=%d\n", F, C, Dv, rows);
    vsn_layout L = vsn_layout_make(F, C, Dv);
    ref_ctx x = {&L, rows, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    const long nS = (long)rows * F, nC = (long)rows * C, nV = (long)rows * Dv;
    x.s = malloc(sizeof(double) * nS), x.c = malloc(sizeof(double) * nC), x.p = malloc(sizeof(double) * L.total);
    x.R = malloc(sizeof(double) * nV), x.R2 = malloc(sizeof(double) * nS);
    x.v = malloc(sizeof(double) * nV), x.alpha = malloc(sizeof(double) * nS);
    float *s = malloc(sizeof(float) * nS), *c = malloc(sizeof(float) * nC), *p = malloc(sizeof(float) * L.total);
    float *R = malloc(sizeof(float) * nV), *R2 = malloc(sizeof(float) * nS);
    draw_pair(nS, 1.0, seed, 1, x.s, s);
    draw_pair(nC, 1.0, seed, 2, x.c, c);
    draw_pair(nV, 1.0, seed, 3, x.R, R);
    draw_pair(nS, 1.0, seed, 4, x.R2, R2);
    vsn_fill_params(&L, x.p, seed);
    for (size_t i = 0; i < L.total; i++)
        p[i] = (float)x.p[i], x.p[i] = p[i];

    float *v = malloc(sizeof(float) * nV), *alpha = malloc(sizeof(float) * nS);
    float *ds = malloc(sizeof(float) * nS), *dc = malloc(sizeof(float) * nC), *g = calloc(L.total, sizeof(float));
    float *saved = malloc(sizeof(float) * st_vsn_saved_count(rows, F, C, Dv));
    float *work = malloc(sizeof(float) * st_vsn_work_count(rows, F, C, Dv));
    st_vsn_weights w = vsn_bind_w(&L, p);
    st_vsn_grads gg = vsn_bind_g(&L, g);
    st_vsn_forward(rows, F, C, Dv, s, F, c, C, &w, v, Dv, alpha, F, saved, work);
    st_vsn_backward_ex(rows, F, C, Dv, s, F, c, C, &w, saved, R, Dv, R2, F, ds, F, dc, C, 0, &gg, work);

    double *vd = to_double(v, nV), *ad = to_double(alpha, nS);
    ref_loss(&x);
    double ev = vsn_rel_diff(vd, x.v, nV), ea = vsn_rel_diff(ad, x.alpha, nS);
    printf("  forward: v rel %.2e, alpha rel %.2e\n", ev, ea);
    CHECK(ev <= F32_FWD_BOUND && ea <= F32_FWD_BOUND, "float forward off: v %.3e alpha %.3e", ev, ea);

    double *gd = to_double(g, (long)L.total), *dsd = to_double(ds, nS), *dcd = to_double(dc, nC);
    for (int i = 0; i < VSN_NT; i++) {
        const vsn_tensor *t = &L.t[i];
        st_gc_result r = st_gc_tensor(ref_loss, &x, x.p + L.off[i], t->rows, t->cols, t->cols, gd + L.off[i], t->cols,
                                      max_checks, seed + (uint64_t)i);
        CHECK_GRAD(t->name, r, F32_GRAD_BOUND);
    }
    st_gc_result rs = st_gc_tensor(ref_loss, &x, x.s, rows, F, F, dsd, F, max_checks, seed + 100);
    CHECK_GRAD("s (snapshot)", rs, F32_GRAD_BOUND);
    st_gc_result rc = st_gc_tensor(ref_loss, &x, x.c, rows, C, C, dcd, C, max_checks, seed + 101);
    CHECK_GRAD("c (context)", rc, F32_GRAD_BOUND);

    free(x.s), free(x.c), free(x.p), free(x.R), free(x.R2), free(x.v), free(x.alpha);
    free(s), free(c), free(p), free(R), free(R2), free(v), free(alpha), free(ds), free(dc), free(g);
    free(saved), free(work), free(vd), free(ad), free(gd), free(dsd), free(dcd);
}

/* exp(1e4) overflows float long before double: the max must be subtracted. */
static void test_softmax_stability_f32(void) {
    const int F = 40, C = 16, Dv = 8, rows = 8, big = 3;
    printf("float softmax stability (logit %d ~ 1e4)\n", big);
    vsn_layout L = vsn_layout_make(F, C, Dv);
    double *pd = malloc(sizeof(double) * L.total), *sd = malloc(sizeof(double) * rows * F);
    double *cd = malloc(sizeof(double) * rows * C), *dvd = malloc(sizeof(double) * rows * Dv);
    float *p = malloc(sizeof(float) * L.total), *s = malloc(sizeof(float) * rows * F);
    float *c = malloc(sizeof(float) * rows * C), *dv = malloc(sizeof(float) * rows * Dv);
    vsn_fill_params(&L, pd, 0xF32);
    for (size_t i = 0; i < L.total; i++)
        p[i] = (float)pd[i];
    p[L.off[VT_NORM_B] + big] = 1e4f;
    draw_pair((long)rows * F, 1, 0xF32, 1, sd, s);
    draw_pair((long)rows * C, 1, 0xF32, 2, cd, c);
    draw_pair((long)rows * Dv, 1, 0xF32, 3, dvd, dv);
    float *v = malloc(sizeof(float) * rows * Dv), *alpha = malloc(sizeof(float) * rows * F);
    float *ds = malloc(sizeof(float) * rows * F), *dc = malloc(sizeof(float) * rows * C);
    float *g = calloc(L.total, sizeof(float));
    float *saved = malloc(sizeof(float) * st_vsn_saved_count(rows, F, C, Dv));
    float *work = malloc(sizeof(float) * st_vsn_work_count(rows, F, C, Dv));
    st_vsn_weights w = vsn_bind_w(&L, p);
    st_vsn_grads gg = vsn_bind_g(&L, g);
    st_vsn_forward(rows, F, C, Dv, s, F, c, C, &w, v, Dv, alpha, F, saved, work);
    st_vsn_backward(rows, F, C, Dv, s, F, c, C, &w, saved, dv, Dv, ds, F, dc, C, 0, &gg, work);
    int finite = 1;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        double sum = 0;
        for (int j = 0; j < F; j++)
            finite &= isfinite(alpha[r * F + j]) != 0, sum += alpha[r * F + j];
        worst = fmax(worst, fabs(sum - 1));
    }
    for (int i = 0; i < rows * Dv; i++)
        finite &= isfinite(v[i]) != 0;
    for (int i = 0; i < rows * F; i++)
        finite &= isfinite(ds[i]) != 0;
    for (int i = 0; i < rows * C; i++)
        finite &= isfinite(dc[i]) != 0;
    for (size_t i = 0; i < L.total; i++)
        finite &= isfinite(g[i]) != 0;
    printf("  max |sum alpha - 1| %.2e\n", worst);
    CHECK(finite, "float: non-finite output or gradient with a 1e4 logit");
    CHECK(worst <= 1e-6, "float: alpha sums to 1 +- %.3e", worst);
    free(pd), free(sd), free(cd), free(dvd), free(p), free(s), free(c), free(dv), free(v), free(alpha);
    free(ds), free(dc), free(g), free(saved), free(work);
}

int main(void) {
    test_against_f64(40, 16, 8, 6, 0xF3201, 48);
    test_against_f64(37, 11, 5, 5, 0xF3202, 48);
    test_softmax_stability_f32();
    TEST_MAIN_END();
}
