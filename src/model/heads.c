/* heads.c: final LayerNorm, policy and value heads, forward and backward.
 *
 * saved: mean [n], rstd [n], g [n, D+C], p = tanh(pi1 g) [n, Hh], q = tanh(v1 g) [n, Hh]
 * backward: dp = dlogits pi2 (1 - p^2); dq = dvalue v2 (1 - q^2);
 *           dg = dp pi1 + dq v1; dh = dg[:, :D] -> ln_f backward; dc = dg[:, D:]. */
#include "core/real.h"

#include <math.h>
#include <string.h>

#include "model/heads.h"
#include "model/layernorm.h"
#include "model/linear.h"

typedef struct {
    real *mean, *rstd, *g, *p, *q;
} saved_view;

static saved_view saved_at(real *s, int n, int D, int C, int Hh) {
    saved_view v;
    v.mean = s;
    v.rstd = v.mean + n;
    v.g = v.rstd + n;
    v.p = v.g + (size_t)n * (D + C);
    v.q = v.p + (size_t)n * Hh;
    return v;
}

size_t st_heads_saved_count(int n, int D, int C, int Hh) { return (size_t)n * (2 + D + C + 2 * Hh); }

size_t st_heads_work_count(int n, int D, int C, int Hh) { return (size_t)n * (D + C + 2 * Hh); }

static void tanh_rows(int n, int w, real *x) {
    for (size_t i = 0; i < (size_t)n * w; i++) x[i] = (real)tanh((double)x[i]);
}

void st_heads_forward(int n, int D, int C, int Hh, int A, const real *u_last, int u_stride, const real *c,
                      int c_stride, const st_heads_weights *w, real *logits, int logits_stride, real *value,
                      real *saved) {
    saved_view s = saved_at(saved, n, D, C, Hh);
    int gw = D + C;
    st_layernorm_forward(n, D, u_last, u_stride, w->ln_w, w->ln_b, (real)1e-5, s.g, gw, s.mean, s.rstd);
    for (int i = 0; i < n; i++) memcpy(s.g + (size_t)i * gw + D, c + (size_t)i * c_stride, sizeof(real) * C);
    st_linear_forward(n, gw, Hh, s.g, gw, w->pi1_w, w->pi1_b, s.p, Hh);
    tanh_rows(n, Hh, s.p);
    st_linear_forward(n, Hh, A, s.p, Hh, w->pi2_w, w->pi2_b, logits, logits_stride);
    st_linear_forward(n, gw, Hh, s.g, gw, w->v1_w, w->v1_b, s.q, Hh);
    tanh_rows(n, Hh, s.q);
    st_linear_forward(n, Hh, 1, s.q, Hh, w->v2_w, w->v2_b, value, 1);
}

void st_heads_backward(int n, int D, int C, int Hh, int A, const real *u_last, int u_stride,
                       const st_heads_weights *w, const real *saved, const real *dlogits, int dlogits_stride,
                       const real *dvalue, real *du_last, int du_stride, real *dc, int dc_stride, int dc_accumulate,
                       st_heads_grads *g, real *work) {
    saved_view s = saved_at((real *)saved, n, D, C, Hh);
    int gw = D + C;
    real *dg = work, *dp = dg + (size_t)n * gw, *dq = dp + (size_t)n * Hh;
    /* Policy branch. */
    st_linear_backward(n, Hh, A, s.p, Hh, w->pi2_w, dlogits, dlogits_stride, dp, Hh, 0, g->pi2_w, g->pi2_b);
    for (size_t i = 0; i < (size_t)n * Hh; i++) dp[i] *= (real)1 - s.p[i] * s.p[i];
    st_linear_backward(n, gw, Hh, s.g, gw, w->pi1_w, dp, Hh, dg, gw, 0, g->pi1_w, g->pi1_b);
    /* Value branch, accumulated into dg. */
    st_linear_backward(n, Hh, 1, s.q, Hh, w->v2_w, dvalue, 1, dq, Hh, 0, g->v2_w, g->v2_b);
    for (size_t i = 0; i < (size_t)n * Hh; i++) dq[i] *= (real)1 - s.q[i] * s.q[i];
    st_linear_backward(n, gw, Hh, s.g, gw, w->v1_w, dq, Hh, dg, gw, 1, g->v1_w, g->v1_b);
    /* Split dg into the LayerNorm'd state and the context. */
    for (int i = 0; i < n; i++) {
        const real *src = dg + (size_t)i * gw + D;
        real *dst = dc + (size_t)i * dc_stride;
        for (int j = 0; j < C; j++) dst[j] = dc_accumulate ? dst[j] + src[j] : src[j];
    }
    st_layernorm_backward(n, D, u_last, u_stride, w->ln_w, s.mean, s.rstd, dg, gw, du_last, du_stride, 0, g->ln_w,
                          g->ln_b);
}
