/* vsn_ref.h: test-only pieces shared by the VSN tests (tests/model/test_vsn.c,
 * test_vsn_f32.c, tests/cuda/test_cuda_vsn.c, test_cuda_vsn_gate.c).
 *
 * - The 21 VSN weight tensors in the order of st_vsn_weights, laid out one
 *   after another in a flat buffer (VSN_FIELDS binds a struct to it).
 * - A naive float64 VSN forward written straight from DESIGN section 5, one
 *   row and one formula at a time, sharing no code with src/model/vsn.c: the
 *   oracle for the forward values, and (through finite differences) for the
 *   float build's gradients.
 * Include after test.h and core/real.h (and model/vsn.h for the binders). */
#ifndef ST_TEST_VSN_REF_H
#define ST_TEST_VSN_REF_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "check/gradcheck.h"

enum { VSN_NT = 21 };

/* The st_vsn_weights / st_vsn_grads field names, in declaration order. */
#define VSN_FIELDS(X)                                                                                                  \
    X(embed_w)                                                                                                         \
    X(embed_b)                                                                                                         \
    X(sel_skip_w) X(sel_skip_b) X(sel_fc1_w) X(sel_fc1_b) X(sel_ctx_w) X(sel_fc2_w) X(sel_fc2_b) X(sel_glu_w)          \
        X(sel_glu_b) X(sel_norm_w) X(sel_norm_b) X(var_fc1_w) X(var_fc1_b) X(var_fc2_w) X(var_fc2_b) X(var_glu_w)      \
            X(var_glu_b) X(var_ln_w) X(var_ln_b)

enum {
    VT_EMBED_W,
    VT_EMBED_B,
    VT_SKIP_W,
    VT_SKIP_B,
    VT_FC1_W,
    VT_FC1_B,
    VT_CTX_W,
    VT_FC2_W,
    VT_FC2_B,
    VT_GLU_W,
    VT_GLU_B,
    VT_NORM_W,
    VT_NORM_B,
    VT_VFC1_W,
    VT_VFC1_B,
    VT_VFC2_W,
    VT_VFC2_B,
    VT_VGLU_W,
    VT_VGLU_B,
    VT_VLN_W,
    VT_VLN_B
};

/* kind: 0 a matrix (std from fan_in), 1 a bias or embedding, 2 a norm weight (around 1). */
typedef struct {
    const char *name;
    int rows, cols, kind, fan_in;
} vsn_tensor;

typedef struct {
    int F, C, Dv, Hs, P;
    vsn_tensor t[VSN_NT];
    size_t off[VSN_NT];
    size_t total;
} vsn_layout;

static inline vsn_layout vsn_layout_make(int F, int C, int Dv) {
    vsn_layout L;
    L.F = F, L.C = C, L.Dv = Dv, L.Hs = Dv < F ? Dv : F, L.P = F * Dv;
    int Hs = L.Hs, P = L.P;
    const vsn_tensor t[VSN_NT] = {
        {"vsn.embed_w", F, Dv, 1, 1},         {"vsn.embed_b", F, Dv, 1, 1},
        {"vsn.sel.skip.weight", F, P, 0, P},  {"vsn.sel.skip.bias", 1, F, 1, 1},
        {"vsn.sel.fc1.weight", Hs, P, 0, P},  {"vsn.sel.fc1.bias", 1, Hs, 1, 1},
        {"vsn.sel.ctx.weight", Hs, C, 0, C},  {"vsn.sel.fc2.weight", Hs, Hs, 0, Hs},
        {"vsn.sel.fc2.bias", 1, Hs, 1, 1},    {"vsn.sel.glu.weight", 2 * F, Hs, 0, Hs},
        {"vsn.sel.glu.bias", 1, 2 * F, 1, 1}, {"vsn.sel.norm.weight", 1, F, 2, 1},
        {"vsn.sel.norm.bias", 1, F, 1, 1},    {"vsn.var.fc1_w", F * Dv, Dv, 0, Dv},
        {"vsn.var.fc1_b", F, Dv, 1, 1},       {"vsn.var.fc2_w", F * Dv, Dv, 0, Dv},
        {"vsn.var.fc2_b", F, Dv, 1, 1},       {"vsn.var.glu_w", F * 2 * Dv, Dv, 0, Dv},
        {"vsn.var.glu_b", F, 2 * Dv, 1, 1},   {"vsn.var.ln_w", F, Dv, 2, 1},
        {"vsn.var.ln_b", F, Dv, 1, 1},
    };
    size_t o = 0;
    for (int i = 0; i < VSN_NT; i++) {
        L.t[i] = t[i];
        L.off[i] = o;
        o += (size_t)t[i].rows * t[i].cols;
    }
    L.total = o;
    return L;
}

#ifdef ST_VSN_H
/* The build's st_vsn_weights / st_vsn_grads (element type real) bound to
 * a flat buffer in layout L (for files that include model/vsn.h first). */
static inline st_vsn_weights vsn_bind_w(const vsn_layout *L, const real *p) {
    st_vsn_weights w;
    int i = 0;
#define VSN_BIND(f) w.f = p + L->off[i++];
    VSN_FIELDS(VSN_BIND)
#undef VSN_BIND
    return w;
}

static inline st_vsn_grads vsn_bind_g(const vsn_layout *L, real *g) {
    st_vsn_grads w;
    int i = 0;
#define VSN_BIND(f) w.f = g + L->off[i++];
    VSN_FIELDS(VSN_BIND)
#undef VSN_BIND
    return w;
}
#endif

/* Fresh Philox weights: matrices N(0, min(0.5, 1.5/sqrt(fan_in))^2) so that
 * the 320-wide selection inputs neither saturate ELU nor vanish; biases and
 * embeddings N(0, 0.5^2); norm weights 1 + N(0, 0.1^2). */
static inline void vsn_fill_params(const vsn_layout *L, double *p, uint64_t seed) {
    for (int i = 0; i < VSN_NT; i++) {
        const vsn_tensor *t = &L->t[i];
        long n = (long)t->rows * t->cols;
        double sd = t->kind == 0 ? fmin(0.5, 1.5 / sqrt((double)t->fan_in)) : t->kind == 1 ? 0.5 : 0.1;
        st_gc_randn(p + L->off[i], n, sd, seed, (uint32_t)(100 + i));
        if (t->kind == 2)
            for (long k = 0; k < n; k++)
                p[L->off[i] + k] += 1.0;
    }
}

static inline double vsn_ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline double vsn_ref_elu(double x) { return x > 0 ? x : expm1(x); }

/* y[o] = b[o] + sum_i W[o, i] x[i]  (b may be NULL) */
static inline void vsn_ref_linear(int in, int out, const double *W, const double *b, const double *x, double *y) {
    for (int o = 0; o < out; o++) {
        double acc = b ? b[o] : 0;
        for (int i = 0; i < in; i++)
            acc += W[(size_t)o * in + i] * x[i];
        y[o] = acc;
    }
}

/* In-place LayerNorm over n with weight w, bias b, eps 1e-5. */
static inline void vsn_ref_layernorm(int n, double *x, const double *w, const double *b) {
    double mu = 0, var = 0;
    for (int i = 0; i < n; i++)
        mu += x[i];
    mu /= n;
    for (int i = 0; i < n; i++)
        var += (x[i] - mu) * (x[i] - mu);
    double rs = 1.0 / sqrt(var / n + 1e-5);
    for (int i = 0; i < n; i++)
        x[i] = (x[i] - mu) * rs * w[i] + b[i];
}

/* v [rows, Dv] and alpha [rows, F], contiguous, from strided s and c and
 * the flat parameters p laid out by L. */
static inline void vsn_ref_forward(const vsn_layout *L, int rows, const double *s, int s_stride, const double *c,
                                   int c_stride, const double *p, double *v, double *alpha) {
    const int F = L->F, C = L->C, Dv = L->Dv, Hs = L->Hs, P = L->P;
    const double *W[VSN_NT];
    for (int i = 0; i < VSN_NT; i++)
        W[i] = p + L->off[i];
    double *E = malloc(sizeof(double) * P), *h = malloc(sizeof(double) * (Hs + Dv));
    double *h2 = malloc(sizeof(double) * (Hs + Dv)), *gl = malloc(sizeof(double) * 2 * (F + Dv));
    double *x = malloc(sizeof(double) * (F + Dv)), *hc = malloc(sizeof(double) * Hs);
    for (int r = 0; r < rows; r++) {
        const double *sr = s + (size_t)r * s_stride, *cr = c + (size_t)r * c_stride;
        for (int j = 0; j < F; j++)
            for (int k = 0; k < Dv; k++)
                E[j * Dv + k] = sr[j] * W[VT_EMBED_W][j * Dv + k] + W[VT_EMBED_B][j * Dv + k];
        /* selection GRN */
        vsn_ref_linear(P, Hs, W[VT_FC1_W], W[VT_FC1_B], E, h);
        vsn_ref_linear(C, Hs, W[VT_CTX_W], NULL, cr, hc);
        for (int i = 0; i < Hs; i++)
            h[i] = vsn_ref_elu(h[i] + hc[i]);
        vsn_ref_linear(Hs, Hs, W[VT_FC2_W], W[VT_FC2_B], h, h2);
        vsn_ref_linear(Hs, 2 * F, W[VT_GLU_W], W[VT_GLU_B], h2, gl);
        vsn_ref_linear(P, F, W[VT_SKIP_W], W[VT_SKIP_B], E, x);
        for (int i = 0; i < F; i++)
            x[i] += gl[i] * vsn_ref_sigmoid(gl[F + i]);
        vsn_ref_layernorm(F, x, W[VT_NORM_W], W[VT_NORM_B]);
        double m = x[0], sum = 0;
        for (int i = 1; i < F; i++)
            m = fmax(m, x[i]);
        for (int i = 0; i < F; i++)
            sum += exp(x[i] - m);
        double *a = alpha + (size_t)r * F;
        for (int i = 0; i < F; i++)
            a[i] = exp(x[i] - m) / sum;
        /* per-variable GRNs and the weighted sum */
        double *vr = v + (size_t)r * Dv;
        for (int k = 0; k < Dv; k++)
            vr[k] = 0;
        for (int j = 0; j < F; j++) {
            const double *e = E + j * Dv;
            vsn_ref_linear(Dv, Dv, W[VT_VFC1_W] + (size_t)j * Dv * Dv, W[VT_VFC1_B] + j * Dv, e, h);
            for (int k = 0; k < Dv; k++)
                h[k] = vsn_ref_elu(h[k]);
            vsn_ref_linear(Dv, Dv, W[VT_VFC2_W] + (size_t)j * Dv * Dv, W[VT_VFC2_B] + j * Dv, h, h2);
            vsn_ref_linear(Dv, 2 * Dv, W[VT_VGLU_W] + (size_t)j * 2 * Dv * Dv, W[VT_VGLU_B] + j * 2 * Dv, h2, gl);
            for (int k = 0; k < Dv; k++)
                x[k] = e[k] + gl[k] * vsn_ref_sigmoid(gl[Dv + k]);
            vsn_ref_layernorm(Dv, x, W[VT_VLN_W] + j * Dv, W[VT_VLN_B] + j * Dv);
            for (int k = 0; k < Dv; k++)
                vr[k] += a[j] * x[k];
        }
    }
    free(E), free(h), free(h2), free(gl), free(x), free(hc);
}

/* norm(a - b) / norm(b) over n contiguous values. */
static inline double vsn_rel_diff(const double *a, const double *b, long n) {
    double d = 0, nb = 0;
    for (long i = 0; i < n; i++) {
        d += (a[i] - b[i]) * (a[i] - b[i]);
        nb += b[i] * b[i];
    }
    return nb > 0 ? sqrt(d / nb) : sqrt(d);
}

#endif
