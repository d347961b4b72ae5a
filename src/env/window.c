/* window.c: the window builder of window.h on the CPU.
 *
 * win[(b*K + k) * win_stride + j] = feat[b][(bar[b] - K + 1 + k) * feat_stride + j]   j < F
 *                                 = ctx[b * ctx_stride + j - F]                      F <= j < F + C
 * Pure copies, one window per OpenMP iteration: the result does not depend
 * on the thread count. */
#include "core/real.h"

#include <stddef.h>

#include "core/error.h"
#include "env/window.h"

/* One window: K rows of features ending at `bar`, each followed by the context. */
static void build_one(int K, int F, int C, const float *feat, int feat_stride, int bar, const float *c, real *win,
                      int win_stride) {
    const float *src = feat + (ptrdiff_t)(bar - K + 1) * feat_stride;
    for (int k = 0; k < K; k++) {
        const float *s = src + (size_t)k * feat_stride;
        real *w = win + (size_t)k * win_stride;
        for (int j = 0; j < F; j++)
            w[j] = (real)s[j];
        for (int j = 0; j < C; j++)
            w[F + j] = (real)c[j];
    }
}

void st_window_build_rows(int B, int K, int F, int C, const float *const *feat, int feat_stride, const int *bar,
                          const float *ctx, int ctx_stride, real *win, int win_stride) {
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++)
        build_one(K, F, C, feat[b], feat_stride, bar[b], ctx + (size_t)b * ctx_stride, win + (size_t)b * K * win_stride,
                  win_stride);
}

int st_window_build(const st_market *m, int B, int K, const int *inst, const int *bar, const float *ctx, int C,
                    int ctx_stride, real *win, int win_stride) {
    ST_REQUIRE(B >= 0 && K > 0 && C >= 0, ST_ERR_INPUT, "window: bad sizes B=%d K=%d C=%d", B, K, C);
    ST_REQUIRE(win_stride >= m->F + C && ctx_stride >= C, ST_ERR_INPUT,
               "window: row stride %d < F + C = %d or context stride %d < C = %d", win_stride, m->F + C, ctx_stride, C);
    for (int b = 0; b < B; b++) {
        ST_REQUIRE(inst[b] >= 0 && inst[b] < m->n_inst, ST_ERR_INPUT, "window: pair %d: no instrument %d", b, inst[b]);
        const st_instrument *I = &m->inst[inst[b]];
        ST_REQUIRE(bar[b] >= K - 1 && bar[b] < I->n, ST_ERR_INPUT,
                   "window: pair %d: bar %d of %s leaves no room for K = %d bars (n = %d)", b, bar[b], I->name, K,
                   I->n);
    }
    const int feat_stride = m->F; /* market.h's layout: rows of the features array are m->F apart */
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++)
        build_one(K, m->F, C, m->inst[inst[b]].features, feat_stride, bar[b], ctx + (size_t)b * ctx_stride,
                  win + (size_t)b * K * win_stride, win_stride);
    return ST_OK;
}
