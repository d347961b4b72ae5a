/* vsn.c: the Variable Selection Network on the CPU (math in vsn.h).
 *
 * Shapes, with P = F*Dv and Hs = min(Dv, F):
 *   s [rows, F] (s_stride), c [rows, C] (c_stride)  ->  v [rows, Dv], alpha [rows, F]
 *   E [rows, P]: variable j at columns j*Dv .. j*Dv+Dv-1
 * Large products go through BLAS over all rows at once: the selection GRN's
 * linears on E, and for the per-variable GRNs one gemm per variable on its
 * Dv columns (row stride P). The stacked per-variable biases [F, Dv] are, once
 * flattened, exactly one row of the [rows, P] activations, so they are laid
 * down with one copy per row before the gemms accumulate (beta = 1), and
 * their gradients are column sums. Elementwise work runs in OpenMP loops
 * over rows; parameter-gradient sums run over rows in a fixed order, split
 * over threads by column only, so results are bit-identical run to run,
 * whatever the thread count and whatever the callers' row strides.
 *
 * Saved for the backward (row-major, all contiguous):
 *   sel_h1  [rows, Hs]  ELU(fc1(E) + ctx(c))             var_h1  [rows, P]   ELU(fc1_j(e_j))
 *   sel_h2  [rows, Hs]  fc2 output                       var_h2  [rows, P]
 *   sel_glu [rows, 2F]  [g1; sigma(g2)]                  var_glu [rows, 2P]  j: [g1_j; sigma(g2_j)]
 *   sel_x   [rows, F]   LayerNorm input                  var_x   [rows, P]
 *   sel_mean, sel_rstd [rows]                            var_mean, var_rstd [rows, F]
 *   alpha   [rows, F]
 * Keeping ELU outputs (ELU'(x) = 1 if ELU(x) > 0, else ELU(x) + 1) and
 * sigma(g2) instead of their inputs spares the backward every exp; E and
 * t_j are recomputed (cheap) to keep the saved block small. */
#include "core/real.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "model/act.h"
#include "model/layernorm.h"
#include "model/linear.h"
#include "model/vsn.h"

#define ST_VSN_EPS 1e-5

static int hidden_sel(int F, int Dv) { return Dv < F ? Dv : F; }

/* Loops over fewer elements than this run on one thread: waking a team
 * costs more than the work (and a lot more on a busy machine). The split
 * never changes results, only who computes them. */
static int worth_threads(size_t elements) { return elements >= 16384; }

/* Offsets (in reals) of the saved tensors. */
typedef struct {
    size_t sel_h1, sel_h2, sel_glu, sel_x, sel_mean, sel_rstd, alpha;
    size_t var_h1, var_h2, var_glu, var_x, var_mean, var_rstd, total;
} saved_layout;

static saved_layout saved_at(int rows, int F, int Dv) {
    size_t R = (size_t)rows, P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv);
    saved_layout l;
    size_t o = 0;
    l.sel_h1 = o, o += R * Hs;
    l.sel_h2 = o, o += R * Hs;
    l.sel_glu = o, o += R * 2 * F;
    l.sel_x = o, o += R * F;
    l.sel_mean = o, o += R;
    l.sel_rstd = o, o += R;
    l.alpha = o, o += R * F;
    l.var_h1 = o, o += R * P;
    l.var_h2 = o, o += R * P;
    l.var_glu = o, o += R * 2 * P;
    l.var_x = o, o += R * P;
    l.var_mean = o, o += R * F;
    l.var_rstd = o, o += R * F;
    l.total = o;
    return l;
}

size_t st_vsn_saved_count(int rows, int F, int C, int Dv) {
    (void)C;
    return saved_at(rows, F, Dv).total;
}

/* Backward scratch: E [R,P], dE [R,P], dgl [R,2P] (later reused for dh1
 * [R,P]), dh2 [R,P], dlog [R,F], dxs [R,F], dgls [R,2F], dh2s, dh1s [R,Hs].
 * The forward uses E and logits [R,F] within the same size. */
size_t st_vsn_work_count(int rows, int F, int C, int Dv) {
    (void)C;
    size_t R = (size_t)rows, P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv);
    return R * (5 * P + 4 * (size_t)F + 2 * Hs);
}

/* ---------------------------------------------------------------- helpers */

/* E[r, j*Dv+k] = s[r, j] * ew[j, k] + eb[j, k] */
static void embed_forward(int rows, int F, int Dv, const real *s, int s_stride, const real *ew, const real *eb,
                          real *E) {
    const size_t P = (size_t)F * Dv;
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * P))
    for (int r = 0; r < rows; r++) {
        const real *sr = s + (size_t)r * s_stride;
        real *Er = E + (size_t)r * P;
        for (int j = 0; j < F; j++)
            for (int k = 0; k < Dv; k++)
                Er[j * Dv + k] = sr[j] * ew[j * Dv + k] + eb[j * Dv + k];
    }
}

/* Every row of y [rows, n] (contiguous) = b [n]. */
static void fill_rows(int rows, int n, const real *b, real *y) {
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * n))
    for (int r = 0; r < rows; r++)
        memcpy(y + (size_t)r * n, b, sizeof(real) * (size_t)n);
}

/* x = ELU(x) in place over rows x n contiguous. */
static void elu_rows(int rows, int n, real *x) {
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * n))
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++)
            x[(size_t)r * n + i] = st_elu(x[(size_t)r * n + i]);
}

/* d *= ELU'(x) given h = ELU(x): 1 where h > 0, else e^x = h + 1. */
static void elu_backward_rows(int rows, int n, const real *h, real *d) {
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * n))
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) {
            real hi = h[(size_t)r * n + i];
            if (hi <= 0) d[(size_t)r * n + i] *= hi + (real)1;
        }
}

/* out[i] += sum_r x[r, i] over rows x n (row stride x_stride): threads own
 * column blocks and add rows in order, so the sums do not depend on them. */
static void colsum_add(int rows, int n, const real *x, int x_stride, real *out) {
    enum { BLK = 128 };
    const int nblk = (n + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * n))
    for (int b = 0; b < nblk; b++) {
        const int i0 = b * BLK, w = n - i0 < BLK ? n - i0 : BLK;
        double acc[BLK] = {0};
        for (int r = 0; r < rows; r++) {
            const real *xr = x + (size_t)r * x_stride + i0;
#pragma omp simd
            for (int i = 0; i < w; i++)
                acc[i] += xr[i];
        }
        for (int i = 0; i < w; i++)
            out[i0 + i] += (real)acc[i];
    }
}

/* The gate's backward with sg = sigma(g2) saved in place of g2 (g = [g1; sg]):
 * d g1 = dx sg, d g2 = dx g1 sg (1 - sg). */
static inline void gate_backward(int n, const real *g, const real *dx, real *dg) {
    for (int i = 0; i < n; i++) {
        real sg = g[n + i];
        dg[i] = dx[i] * sg;
        dg[n + i] = dx[i] * g[i] * sg * ((real)1 - sg);
    }
}

/* x[r, i] += g1 * sigma(g2) for the selection GRN (gl rows [g1 (F); g2 (F)]);
 * g2 is replaced by sigma(g2) for the backward. */
static void sel_gate_add(int rows, int F, real *gl, real *x) {
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * F))
    for (int r = 0; r < rows; r++) {
        real *g = gl + (size_t)r * 2 * F, *xr = x + (size_t)r * F;
        for (int i = 0; i < F; i++) {
            g[F + i] = st_sigmoid(g[F + i]);
            xr[i] += g[i] * g[F + i];
        }
    }
}

/* alpha = softmax(logits) per row with the max subtracted, into the saved
 * copy and (when given) the caller's strided output. */
static void softmax_rows(int rows, int F, const real *logits, real *alpha_saved, real *alpha, int alpha_stride) {
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * F))
    for (int r = 0; r < rows; r++) {
        const real *l = logits + (size_t)r * F;
        real *a = alpha_saved + (size_t)r * F;
        double m = l[0];
        for (int j = 1; j < F; j++)
            m = l[j] > m ? l[j] : m;
        double sum = 0;
        for (int j = 0; j < F; j++)
            sum += exp((double)l[j] - m);
        for (int j = 0; j < F; j++)
            a[j] = (real)(exp((double)l[j] - m) / sum);
        if (alpha) memcpy(alpha + (size_t)r * alpha_stride, a, sizeof(real) * (size_t)F);
    }
}

/* xhat of variable j's LayerNorm, as the forward computed it. */
static inline real var_xhat(real x, real mean, real rstd) { return (real)(((double)x - mean) * rstd); }

/* ---------------------------------------------------------------- forward */

/* Selection GRN: E, c -> alpha (saved and output). */
static void sel_forward(int rows, int F, int C, int Dv, const real *E, const real *c, int c_stride,
                        const st_vsn_weights *w, real *saved, const saved_layout *sl, real *logits, real *alpha,
                        int alpha_stride) {
    const int P = F * Dv, Hs = hidden_sel(F, Dv);
    real *h1 = saved + sl->sel_h1, *h2 = saved + sl->sel_h2, *gl = saved + sl->sel_glu, *x = saved + sl->sel_x;
    st_linear_forward(rows, P, Hs, E, P, w->sel_fc1_w, w->sel_fc1_b, h1, Hs);
    st_gemm(0, 1, rows, Hs, C, 1, c, c_stride, w->sel_ctx_w, C, 1, h1, Hs);
    elu_rows(rows, Hs, h1);
    st_linear_forward(rows, Hs, Hs, h1, Hs, w->sel_fc2_w, w->sel_fc2_b, h2, Hs);
    st_linear_forward(rows, Hs, 2 * F, h2, Hs, w->sel_glu_w, w->sel_glu_b, gl, 2 * F);
    st_linear_forward(rows, P, F, E, P, w->sel_skip_w, w->sel_skip_b, x, F);
    sel_gate_add(rows, F, gl, x);
    st_layernorm_forward(rows, F, x, F, w->sel_norm_w, w->sel_norm_b, (real)ST_VSN_EPS, logits, F, saved + sl->sel_mean,
                         saved + sl->sel_rstd);
    softmax_rows(rows, F, logits, saved + sl->alpha, alpha, alpha_stride);
}

/* The per-variable GRNs' linears: biases laid down per row, then one gemm
 * per variable over all rows adds W_j x_j. */
static void var_linears_forward(int rows, int F, int Dv, const real *E, const st_vsn_weights *w, real *saved,
                                const saved_layout *sl) {
    const int P = F * Dv, DD = Dv * Dv;
    real *h1 = saved + sl->var_h1, *h2 = saved + sl->var_h2, *gl = saved + sl->var_glu;
    fill_rows(rows, P, w->var_fc1_b, h1);
    for (int j = 0; j < F; j++)
        st_gemm(0, 1, rows, Dv, Dv, 1, E + j * Dv, P, w->var_fc1_w + j * DD, Dv, 1, h1 + j * Dv, P);
    elu_rows(rows, P, h1);
    fill_rows(rows, P, w->var_fc2_b, h2);
    for (int j = 0; j < F; j++)
        st_gemm(0, 1, rows, Dv, Dv, 1, h1 + j * Dv, P, w->var_fc2_w + j * DD, Dv, 1, h2 + j * Dv, P);
    fill_rows(rows, 2 * P, w->var_glu_b, gl);
    for (int j = 0; j < F; j++)
        st_gemm(0, 1, rows, 2 * Dv, Dv, 1, h2 + j * Dv, P, w->var_glu_w + j * 2 * DD, Dv, 1, gl + j * 2 * Dv, 2 * P);
}

/* Per row: x_j = e_j + g1 sigma(g2) (sigma(g2) kept), t_j = LN_j(x_j),
 * v = sum_j alpha_j t_j (summed in variable order). */
static void var_combine_forward(int rows, int F, int Dv, const real *E, const st_vsn_weights *w, real *saved,
                                const saved_layout *sl, real *v, int v_stride) {
    const size_t P = (size_t)F * Dv;
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * P))
    for (int r = 0; r < rows; r++) {
        const real *a = saved + sl->alpha + (size_t)r * F;
        real *vr = v + (size_t)r * v_stride;
        for (int k = 0; k < Dv; k++)
            vr[k] = 0;
        for (int j = 0; j < F; j++) {
            const real *e = E + r * P + (size_t)j * Dv;
            real *g = saved + sl->var_glu + r * 2 * P + (size_t)j * 2 * Dv;
            real *x = saved + sl->var_x + r * P + (size_t)j * Dv;
            double sum = 0;
            for (int k = 0; k < Dv; k++) {
                g[Dv + k] = st_sigmoid(g[Dv + k]);
                x[k] = e[k] + g[k] * g[Dv + k];
                sum += x[k];
            }
            double mu = sum / Dv, var = 0;
            for (int k = 0; k < Dv; k++)
                var += ((double)x[k] - mu) * ((double)x[k] - mu);
            real mean = (real)mu, rstd = (real)(1.0 / sqrt(var / Dv + ST_VSN_EPS));
            saved[sl->var_mean + (size_t)r * F + j] = mean;
            saved[sl->var_rstd + (size_t)r * F + j] = rstd;
            const real *lw = w->var_ln_w + (size_t)j * Dv, *lb = w->var_ln_b + (size_t)j * Dv;
            for (int k = 0; k < Dv; k++)
                vr[k] += a[j] * (var_xhat(x[k], mean, rstd) * lw[k] + lb[k]);
        }
    }
}

void st_vsn_forward(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c, int c_stride,
                    const st_vsn_weights *w, real *v, int v_stride, real *alpha, int alpha_stride, real *saved,
                    real *work) {
    if (rows <= 0) return;
    const saved_layout sl = saved_at(rows, F, Dv);
    real *E = work, *logits = E + (size_t)rows * F * Dv;
    embed_forward(rows, F, Dv, s, s_stride, w->embed_w, w->embed_b, E);
    sel_forward(rows, F, C, Dv, E, c, c_stride, w, saved, &sl, logits, alpha, alpha_stride);
    var_linears_forward(rows, F, Dv, E, w, saved, &sl);
    var_combine_forward(rows, F, Dv, E, w, saved, &sl, v, v_stride);
}

/* ---------------------------------------------------------------- backward */

/* Per row: dalpha_j = dv . t_j (+ the caller's dalpha), the softmax backward
 * into dlog, then for each variable dt_j = alpha_j dv through LN_j into
 * dx_j, written to dE (identity skip) and through the gate into dgl. */
static void var_combine_backward(int rows, int F, int Dv, const st_vsn_weights *w, const real *saved,
                                 const saved_layout *sl, const real *dv, int dv_stride, const real *dalpha,
                                 int dalpha_stride, real *dlog, real *dE, real *dgl) {
    const size_t P = (size_t)F * Dv;
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * P))
    for (int r = 0; r < rows; r++) {
        const real *a = saved + sl->alpha + (size_t)r * F;
        const real *x = saved + sl->var_x + r * P;
        const real *mean = saved + sl->var_mean + (size_t)r * F, *rstd = saved + sl->var_rstd + (size_t)r * F;
        const real *dvr = dv + (size_t)r * dv_stride;
        real *dl = dlog + (size_t)r * F;
        double dot = 0;
        for (int j = 0; j < F; j++) {
            const real *lw = w->var_ln_w + (size_t)j * Dv, *lb = w->var_ln_b + (size_t)j * Dv;
            const real *xj = x + (size_t)j * Dv;
            double da = dalpha ? dalpha[(size_t)r * dalpha_stride + j] : 0;
            for (int k = 0; k < Dv; k++)
                da += (double)dvr[k] * (var_xhat(xj[k], mean[j], rstd[j]) * lw[k] + lb[k]);
            dl[j] = (real)da;
            dot += (double)a[j] * da;
        }
        for (int j = 0; j < F; j++)
            dl[j] = (real)((double)a[j] * ((double)dl[j] - dot));
        for (int j = 0; j < F; j++) {
            const real *lw = w->var_ln_w + (size_t)j * Dv, *xj = x + (size_t)j * Dv;
            real *dx = dE + r * P + (size_t)j * Dv;
            double rs = rstd[j], sg = 0, sgx = 0;
            for (int k = 0; k < Dv; k++) {
                double gk = (double)a[j] * dvr[k] * lw[k];
                sg += gk;
                sgx += gk * var_xhat(xj[k], mean[j], rstd[j]);
            }
            sg /= Dv;
            sgx /= Dv;
            for (int k = 0; k < Dv; k++) {
                double gk = (double)a[j] * dvr[k] * lw[k];
                dx[k] = (real)(rs * (gk - sg - var_xhat(xj[k], mean[j], rstd[j]) * sgx));
            }
            gate_backward(Dv, saved + sl->var_glu + r * 2 * P + (size_t)j * 2 * Dv, dx,
                          dgl + r * 2 * P + (size_t)j * 2 * Dv);
        }
    }
}

/* var_ln_w[j,k] += sum_r dt xhat, var_ln_b[j,k] += sum_r dt with
 * dt = alpha[r,j] dv[r,k]: threads split variables, rows summed in order. */
static void var_ln_param_grads(int rows, int F, int Dv, const real *saved, const saved_layout *sl, const real *dv,
                               int dv_stride, real *gw, real *gb) {
    const size_t P = (size_t)F * Dv;
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * P))
    for (int j = 0; j < F; j++) {
        for (int r = 0; r < rows; r++) {
            const real *xj = saved + sl->var_x + r * P + (size_t)j * Dv;
            real a = saved[sl->alpha + (size_t)r * F + j];
            real mean = saved[sl->var_mean + (size_t)r * F + j], rstd = saved[sl->var_rstd + (size_t)r * F + j];
            const real *dvr = dv + (size_t)r * dv_stride;
            for (int k = 0; k < Dv; k++) {
                real dt = a * dvr[k];
                gw[(size_t)j * Dv + k] += dt * var_xhat(xj[k], mean, rstd);
                gb[(size_t)j * Dv + k] += dt;
            }
        }
    }
}

/* Selection GRN backward from dlog [rows, F]: parameter grads, dE += the
 * skip and fc1 paths, dc (=|+=) through ctx. */
static void sel_backward(int rows, int F, int C, int Dv, const real *E, const real *c, int c_stride,
                         const st_vsn_weights *w, const real *saved, const saved_layout *sl, const real *dlog, real *dE,
                         real *dc, int dc_stride, int dc_accumulate, st_vsn_grads *g, real *dxs, real *dgls, real *dh2,
                         real *dh1) {
    const int P = F * Dv, Hs = hidden_sel(F, Dv);
    const real *h1 = saved + sl->sel_h1, *h2 = saved + sl->sel_h2, *gl = saved + sl->sel_glu;
    st_layernorm_backward(rows, F, saved + sl->sel_x, F, w->sel_norm_w, saved + sl->sel_mean, saved + sl->sel_rstd,
                          dlog, F, dxs, F, 0, g->sel_norm_w, g->sel_norm_b);
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * F))
    for (int r = 0; r < rows; r++)
        gate_backward(F, gl + (size_t)r * 2 * F, dxs + (size_t)r * F, dgls + (size_t)r * 2 * F);
    st_linear_backward(rows, P, F, E, P, w->sel_skip_w, dxs, F, dE, P, 1, g->sel_skip_w, g->sel_skip_b);
    st_linear_backward(rows, Hs, 2 * F, h2, Hs, w->sel_glu_w, dgls, 2 * F, dh2, Hs, 0, g->sel_glu_w, g->sel_glu_b);
    st_linear_backward(rows, Hs, Hs, h1, Hs, w->sel_fc2_w, dh2, Hs, dh1, Hs, 0, g->sel_fc2_w, g->sel_fc2_b);
    elu_backward_rows(rows, Hs, h1, dh1);
    st_linear_backward(rows, P, Hs, E, P, w->sel_fc1_w, dh1, Hs, dE, P, 1, g->sel_fc1_w, g->sel_fc1_b);
    st_linear_backward(rows, C, Hs, c, c_stride, w->sel_ctx_w, dh1, Hs, dc, dc_stride, dc_accumulate, g->sel_ctx_w,
                       NULL);
}

/* The per-variable linears' backward, one gemm set per variable, biases as
 * column sums; dE += the fc1 path. dgl is consumed first, then its space
 * holds dh1. */
static void var_linears_backward(int rows, int F, int Dv, const real *E, const st_vsn_weights *w, const real *saved,
                                 const saved_layout *sl, real *dgl, real *dh2, real *dE, st_vsn_grads *g) {
    const int P = F * Dv, DD = Dv * Dv;
    const real *h1 = saved + sl->var_h1, *h2 = saved + sl->var_h2;
    /* dh2 and dh1 are zeroed whole and accumulated into: with beta = 0 the
     * BLAS would clear each variable's [rows, Dv] block row by row. */
    memset(dh2, 0, sizeof(real) * (size_t)rows * P);
    for (int j = 0; j < F; j++)
        st_linear_backward(rows, Dv, 2 * Dv, h2 + j * Dv, P, w->var_glu_w + j * 2 * DD, dgl + j * 2 * Dv, 2 * P,
                           dh2 + j * Dv, P, 1, g->var_glu_w + j * 2 * DD, NULL);
    colsum_add(rows, 2 * P, dgl, 2 * P, g->var_glu_b);
    real *dh1 = dgl;
    memset(dh1, 0, sizeof(real) * (size_t)rows * P);
    for (int j = 0; j < F; j++)
        st_linear_backward(rows, Dv, Dv, h1 + j * Dv, P, w->var_fc2_w + j * DD, dh2 + j * Dv, P, dh1 + j * Dv, P, 1,
                           g->var_fc2_w + j * DD, NULL);
    colsum_add(rows, P, dh2, P, g->var_fc2_b);
    elu_backward_rows(rows, P, h1, dh1);
    for (int j = 0; j < F; j++)
        st_linear_backward(rows, Dv, Dv, E + j * Dv, P, w->var_fc1_w + j * DD, dh1 + j * Dv, P, dE + j * Dv, P, 1,
                           g->var_fc1_w + j * DD, NULL);
    colsum_add(rows, P, dh1, P, g->var_fc1_b);
}

/* Embedding backward from dE: ds[r,j] = dE[r,j,:] . embed_w[j];
 * embed_w[j,k] += sum_r dE s, embed_b[j,k] += sum_r dE (rows in order). */
static void embed_backward(int rows, int F, int Dv, const real *s, int s_stride, const real *ew, const real *dE,
                           real *ds, int ds_stride, real *gw, real *gb) {
    const size_t P = (size_t)F * Dv;
    if (ds) {
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * P))
        for (int r = 0; r < rows; r++) {
            const real *d = dE + (size_t)r * P;
            real *dsr = ds + (size_t)r * ds_stride;
            for (int j = 0; j < F; j++) {
                real acc = 0;
                for (int k = 0; k < Dv; k++)
                    acc += d[j * Dv + k] * ew[j * Dv + k];
                dsr[j] = acc;
            }
        }
    }
#pragma omp parallel for schedule(static) if (worth_threads((size_t)rows * P))
    for (int j = 0; j < F; j++) {
        for (int r = 0; r < rows; r++) {
            const real *d = dE + (size_t)r * P + (size_t)j * Dv;
            real sj = s[(size_t)r * s_stride + j];
            for (int k = 0; k < Dv; k++)
                gw[(size_t)j * Dv + k] += d[k] * sj;
        }
    }
    colsum_add(rows, (int)P, dE, (int)P, gb);
}

void st_vsn_backward_ex(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c, int c_stride,
                        const st_vsn_weights *w, const real *saved, const real *dv, int dv_stride, const real *dalpha,
                        int dalpha_stride, real *ds, int ds_stride, real *dc, int dc_stride, int dc_accumulate,
                        st_vsn_grads *g, real *work) {
    if (rows <= 0) return;
    const size_t R = (size_t)rows, P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv);
    const saved_layout sl = saved_at(rows, F, Dv);
    real *E = work, *dE = E + R * P, *dgl = dE + R * P, *dh2 = dgl + 2 * R * P;
    real *dlog = dh2 + R * P, *dxs = dlog + R * F, *dgls = dxs + R * F;
    real *dh2s = dgls + 2 * R * F, *dh1s = dh2s + R * Hs;
    embed_forward(rows, F, Dv, s, s_stride, w->embed_w, w->embed_b, E);
    var_combine_backward(rows, F, Dv, w, saved, &sl, dv, dv_stride, dalpha, dalpha_stride, dlog, dE, dgl);
    var_ln_param_grads(rows, F, Dv, saved, &sl, dv, dv_stride, g->var_ln_w, g->var_ln_b);
    sel_backward(rows, F, C, Dv, E, c, c_stride, w, saved, &sl, dlog, dE, dc, dc_stride, dc_accumulate, g, dxs, dgls,
                 dh2s, dh1s);
    var_linears_backward(rows, F, Dv, E, w, saved, &sl, dgl, dh2, dE, g);
    embed_backward(rows, F, Dv, s, s_stride, w->embed_w, dE, ds, ds_stride, g->embed_w, g->embed_b);
}

void st_vsn_backward(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c, int c_stride,
                     const st_vsn_weights *w, const real *saved, const real *dv, int dv_stride, real *ds, int ds_stride,
                     real *dc, int dc_stride, int dc_accumulate, st_vsn_grads *g, real *work) {
    st_vsn_backward_ex(rows, F, C, Dv, s, s_stride, c, c_stride, w, saved, dv, dv_stride, NULL, 0, ds, ds_stride, dc,
                       dc_stride, dc_accumulate, g, work);
}
