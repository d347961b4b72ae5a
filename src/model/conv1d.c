/* conv1d.c: causal depthwise convolution (+ fused SiLU) on the CPU.
 *
 * forward:  pre[t, ch] = b[ch] + sum_i w[ch, i] x[t-W+1+i, ch] (x[<0] = 0),
 *           y = SiLU(pre) or pre                     x, y [Bsz*K, Ch], w [Ch, W]
 * backward: g = dy * SiLU'(pre) (pre recomputed) or dy;
 *           dx[s, ch] = sum_i w[ch, i] g[s+W-1-i, ch] over s+W-1-i < K;
 *           dw[ch, i] += sum_{b,t} g[t, ch] x[t-W+1+i, ch];  db[ch] += sum g.
 * Rows are split over threads for activations, channels for parameters; every
 * sum runs in a fixed order, so results do not depend on the thread count or
 * on the row strides. */
#include "core/real.h"

#include <stddef.h>

#include "model/act.h"
#include "model/conv1d.h"

/* Below this many elements a loop runs on one thread: forking costs more than
 * it saves, and small calls (gradient checks, tiny batches) stay cheap when
 * the cores are shared. The split never changes the bits (rows are independent). */
#define ST_OMP_MIN_WORK 32768L

size_t st_conv1d_work_count(int Bsz, int K, int Ch) { return (size_t)Bsz * (size_t)K * (size_t)Ch; }

/* pre[0:Ch] of row t of the window starting at xw. One definition, used by
 * the forward and by the backward's recomputation, so both see equal bits. */
static void conv_pre_row(int t, int Ch, int W, const real *xw, int x_stride, const real *w, const real *b, real *pre) {
    for (int ch = 0; ch < Ch; ch++)
        pre[ch] = b[ch];
    for (int i = 0; i < W; i++) {
        int s = t - W + 1 + i;
        if (s < 0) continue; /* causal zero padding before the window */
        const real *xs = xw + (size_t)s * x_stride;
        for (int ch = 0; ch < Ch; ch++)
            pre[ch] += w[(size_t)ch * W + i] * xs[ch];
    }
}

void st_conv1d_forward(int Bsz, int K, int Ch, int W, const real *x, int x_stride, const real *w, const real *b,
                       int silu, real *y, int y_stride) {
    long rows = (long)Bsz * K;
#pragma omp parallel for schedule(static) if (rows * Ch >= ST_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % K);
        const real *xw = x + (size_t)(r - t) * x_stride;
        real *yr = y + (size_t)r * y_stride;
        conv_pre_row(t, Ch, W, xw, x_stride, w, b, yr);
        if (silu)
            for (int ch = 0; ch < Ch; ch++)
                yr[ch] = st_silu(yr[ch]);
    }
}

/* g[r] = dy[r] * SiLU'(pre[r]) (or dy[r]) into the contiguous work rows. */
static void conv_grad_pre(int Bsz, int K, int Ch, int W, const real *x, int x_stride, const real *w, const real *b,
                          int silu, const real *dy, int dy_stride, real *g) {
    long rows = (long)Bsz * K;
#pragma omp parallel for schedule(static) if (rows * Ch >= ST_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % K);
        const real *dyr = dy + (size_t)r * dy_stride;
        real *gr = g + (size_t)r * Ch;
        if (!silu) {
            for (int ch = 0; ch < Ch; ch++)
                gr[ch] = dyr[ch];
            continue;
        }
        conv_pre_row(t, Ch, W, x + (size_t)(r - t) * x_stride, x_stride, w, b, gr);
        for (int ch = 0; ch < Ch; ch++)
            gr[ch] = dyr[ch] * st_silu_grad(gr[ch]);
    }
}

/* dx[s] = sum over the outputs t = s+W-1-i (< K) that read x[s]. */
static void conv_grad_x(int Bsz, int K, int Ch, int W, const real *w, const real *g, real *dx, int dx_stride) {
    long rows = (long)Bsz * K;
#pragma omp parallel for schedule(static) if (rows * Ch >= ST_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        int s = (int)(r % K);
        const real *gw = g + (size_t)(r - s) * Ch;
        real *dxr = dx + (size_t)r * dx_stride;
        for (int ch = 0; ch < Ch; ch++)
            dxr[ch] = 0;
        for (int i = 0; i < W; i++) {
            int t = s + W - 1 - i;
            if (t >= K) continue; /* that output lies beyond the window */
            const real *gt = gw + (size_t)t * Ch;
            for (int ch = 0; ch < Ch; ch++)
                dxr[ch] += w[(size_t)ch * W + i] * gt[ch];
        }
    }
}

/* dw, db: one thread per channel, sums over (b, t) in order, in double. */
static void conv_grad_params(int Bsz, int K, int Ch, int W, const real *x, int x_stride, const real *g, real *dw,
                             real *db) {
#pragma omp parallel for schedule(static) if ((long)Bsz * K * Ch * W >= ST_OMP_MIN_WORK)
    for (int ch = 0; ch < Ch; ch++) {
        if (db) {
            double acc = 0;
            for (long r = 0; r < (long)Bsz * K; r++)
                acc += g[(size_t)r * Ch + ch];
            db[ch] += (real)acc;
        }
        if (!dw) continue;
        for (int i = 0; i < W; i++) {
            double acc = 0;
            for (int bb = 0; bb < Bsz; bb++) {
                const real *xw = x + (size_t)bb * K * x_stride;
                const real *gw = g + (size_t)bb * K * Ch;
                for (int t = 0; t < K; t++) {
                    int s = t - W + 1 + i;
                    if (s >= 0) acc += (double)gw[(size_t)t * Ch + ch] * xw[(size_t)s * x_stride + ch];
                }
            }
            dw[(size_t)ch * W + i] += (real)acc;
        }
    }
}

void st_conv1d_backward(int Bsz, int K, int Ch, int W, const real *x, int x_stride, const real *w, const real *b,
                        int silu, const real *dy, int dy_stride, real *dx, int dx_stride, real *dw, real *db,
                        real *work) {
    conv_grad_pre(Bsz, K, Ch, W, x, x_stride, w, b, silu, dy, dy_stride, work);
    conv_grad_x(Bsz, K, Ch, W, w, work, dx, dx_stride);
    if (dw || db) conv_grad_params(Bsz, K, Ch, W, x, x_stride, work, dw, db);
}
