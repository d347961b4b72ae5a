/* conv1d.h: the causal depthwise convolution of the Mamba2 block (DESIGN
 * section 5), optionally followed by SiLU, over Bsz windows of K rows.
 *
 * Rows r = b*K + t. Per channel ch in [0, Ch) and window b, with x[<0] = 0
 * (time before the window start is zero, windows never see each other):
 *     pre[t, ch] = b[ch] + sum_{i=0}^{W-1} w[ch, i] * x[t-W+1+i, ch]
 *     y[t, ch]   = silu ? SiLU(pre[t, ch]) : pre[t, ch]
 * w is [Ch, W] row-major, b is [Ch]. W may exceed K.
 *
 * SiLU is fused (flag `silu`): the forward does not keep the pre-activation,
 * the backward recomputes it from x (W multiply-adds per element), so the
 * caller saves only x and y. Every buffer with rows has its own row stride;
 * x is typically a column slice of a wider row (the in_proj output).
 * Backward: dx is written, dw and db are added to. */
#ifndef ST_CONV1D_H
#define ST_CONV1D_H

#include <stddef.h>

#include "core/real.h"

#define st_conv1d_work_count ST_R(st_conv1d_work_count)
#define st_conv1d_forward ST_R(st_conv1d_forward)
#define st_conv1d_backward ST_R(st_conv1d_backward)

/* Scratch reals the backward needs (the gradient at the pre-activation). */
size_t st_conv1d_work_count(int Bsz, int K, int Ch);

/* y[r, 0:Ch] = (SiLU of) the causal conv of x, as above. */
void st_conv1d_forward(int Bsz, int K, int Ch, int W, const real *x, int x_stride, const real *w, const real *b,
                       int silu, real *y, int y_stride);

/* dy is the gradient at y (after SiLU when silu is set). dx[r, 0:Ch] written;
 * dw [Ch, W] and db [Ch] added to (either may be NULL); work holds
 * st_conv1d_work_count(Bsz, K, Ch) reals. */
void st_conv1d_backward(int Bsz, int K, int Ch, int W, const real *x, int x_stride, const real *w, const real *b,
                        int silu, const real *dy, int dy_stride, real *dx, int dx_stride, real *dw, real *db,
                        real *work);

#endif
