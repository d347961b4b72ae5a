/* conv1d_cuda.h: the causal depthwise convolution of the Mamba2 block (+ fused
 * SiLU) on the GPU, float32 (the CUDA twin of model/conv1d.h, DESIGN section 5).
 *
 * Rows r = b*K + t of Bsz windows. Per channel ch < Ch, with x[<0] = 0 (no
 * window sees time before its start or another window):
 *     pre[t, ch] = b[ch] + sum_{i=0}^{W-1} w[ch, i] x[t-W+1+i, ch]
 *     y[t, ch]   = silu ? SiLU(pre[t, ch]) : pre[t, ch]
 * backward: g = dy SiLU'(pre) (pre recomputed from x) or dy;
 *           dx[s, ch] = sum_i w[ch, i] g[s+W-1-i, ch] over s+W-1-i < K;
 *           dw[ch, i] += sum_{b,t} g[t, ch] x[t-W+1+i, ch];  db[ch] += sum g.
 * x, y, dy, dx [Bsz*K, Ch] with their own row strides (x typically a column
 * slice of the in_proj output); w [Ch, W] row-major, b [Ch]. W may exceed K.
 * Device pointers; stream a cudaStream_t (NULL: default). Parameter sums run
 * over rows in double, in a fixed order (bit-identical from run to run; the
 * order depends on the shapes only, not on the strides). Returns ST_OK or
 * ST_ERR_DEVICE. */
#ifndef ST_CONV1D_CUDA_H
#define ST_CONV1D_CUDA_H

#include <stddef.h>

/* Device floats the backward's work buffer holds: for W <= 4 the double
 * partials of the parameter sums (about Bsz*K*Ch*(W+1)/128 floats), for
 * wider W g itself (contiguous [Bsz*K, Ch]). */
size_t st_cuda_conv1d_work_count(int Bsz, int K, int Ch, int W);

int st_cuda_conv1d_forward(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w, const float *b,
                           int silu, float *y, int y_stride, void *stream);

/* The forward at row K-1 of each window only (y's other rows untouched):
 * the bits of st_cuda_conv1d_forward's row K-1. The last block's C
 * columns, which its SSD reads at that row alone. */
int st_cuda_conv1d_forward_last(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w,
                                const float *b, int silu, float *y, int y_stride, void *stream);

/* dx written; dw [Ch, W] and db [Ch] added to (either may be NULL); work
 * holds st_cuda_conv1d_work_count(Bsz, K, Ch) device floats. */
int st_cuda_conv1d_backward(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w, const float *b,
                            int silu, const float *dy, int dy_stride, float *dx, int dx_stride, float *dw, float *db,
                            float *work, void *stream);

#endif
