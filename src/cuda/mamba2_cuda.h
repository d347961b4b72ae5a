/* mamba2_cuda.h: one pre-norm residual Mamba2 block on the GPU, float32 (the
 * CUDA twin of model/mamba2.h, DESIGN section 5), composed of the CUDA ops
 * (cuBLAS linear, LayerNorm, causal conv + SiLU, chunked SSD, gated RMSNorm).
 *
 * Bsz windows of K rows (r = b*K + k); sizes from st_dims: D, d_inner =
 * expand*D, P = headdim, H = d_inner/P, N, G, W, Q; conv_dim = d_inner + 2GN.
 * Per row:
 *     a = LayerNorm(u; ln_w, ln_b)                        [D]
 *     [z, xBC, dt_raw] = a in_proj_w^T                    [d_inner | conv_dim | H]
 *     xBC = SiLU(causal depthwise conv(xBC; conv_w [conv_dim, W], conv_b))
 *     [x, B, C] = xBC                                     [d_inner | GN | GN]
 *     dt = softplus(dt_raw + dt_bias);  A = -exp(A_log)   [H]
 *     y = SSD(x, dt, A, B, C, Dskip)  (chunked, chunk Q)  [d_inner]
 *     y = RMSNorm(y * SiLU(z)) * norm_w                   [d_inner]
 *     u_out = u + y out_proj_w^T                          [D]
 * eps 1e-5 for both norms; no biases in the projections.
 *
 * Same arguments and semantics as st_mamba2_forward / st_mamba2_backward,
 * with device pointers and a stream: `saved` has exactly the CPU block's
 * layout (st_mamba2_saved_layout: the same named regions at the same
 * offsets, so the tracer labels them alike) and st_cuda_mamba2_saved_count
 * floats; `work` (st_cuda_mamba2_work_count floats) is scratch, nothing kept
 * between calls. u_out may be u with the same stride (in-place residual);
 * du may be du_out with the same stride. du is written (residual path
 * included); parameter gradients are added to, in a fixed order
 * (bit-identical run to run). The weight and gradient structs live on the
 * host and hold device pointers. stream is a cudaStream_t (NULL: default).
 * Returns ST_OK, or ST_ERR_INPUT / ST_ERR_DEVICE from the ops (message in
 * st_last_error()). Calls are asynchronous on the stream. */
#ifndef ST_MAMBA2_CUDA_H
#define ST_MAMBA2_CUDA_H

#include <stddef.h>

#include "core/config.h"

/* Device pointers to one block's parameters (shapes of DESIGN section 5,
 * fields in the order of model/mamba2.h's st_mamba2_weights). */
typedef struct {
    const float *ln_w, *ln_b, *in_proj_w, *conv_w, *conv_b, *dt_bias, *A_log, *Dskip, *norm_w, *out_proj_w;
} st_cuda_mamba2_weights;
/* Device pointers to their gradients (added to). */
typedef struct {
    float *ln_w, *ln_b, *in_proj_w, *conv_w, *conv_b, *dt_bias, *A_log, *Dskip, *norm_w, *out_proj_w;
} st_cuda_mamba2_grads;

size_t st_cuda_mamba2_saved_count(const st_dims *d, int Bsz); /* floats kept by forward for backward */
size_t st_cuda_mamba2_work_count(const st_dims *d, int Bsz);  /* scratch floats (forward or backward) */

int st_cuda_mamba2_forward(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u, int u_stride,
                           float *u_out, int u_out_stride, float *saved, float *work, void *stream);

int st_cuda_mamba2_backward(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u, int u_stride,
                            const float *saved, const float *du_out, int du_out_stride, float *du, int du_stride,
                            const st_cuda_mamba2_grads *g, float *work, void *stream);

/* The last block's tail: the same block for a caller that reads u_out at
 * row K-1 of each window only (the heads, DESIGN section 5). Forward:
 * u_out written at rows b*K + K-1 alone (its other rows untouched); saved
 * has the full layout, its ssd_y, gated and rms_rstd regions written at
 * those rows alone (the rest as the full block). Backward: reads du_out
 * at rows K-1 alone (the rest taken as zero, which is what the heads
 * leave there) and writes du at every row; every parameter gradient is
 * the full block's given du_out zero but at the last rows (within fp32
 * rounding: other sums in other orders). The same work count. */
/* Whether the tail takes d's sizes on the current device (its SSD keeps a
 * window in shared memory: cuda/ssd_last_row_cuda.h); where not, the caller
 * runs the full block (the same results). */
int st_cuda_mamba2_last_fits(const st_dims *d);

int st_cuda_mamba2_forward_last(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u,
                                int u_stride, float *u_out, int u_out_stride, float *saved, float *work, void *stream);

int st_cuda_mamba2_backward_last(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u,
                                 int u_stride, const float *saved, const float *du_out, int du_out_stride, float *du,
                                 int du_stride, const st_cuda_mamba2_grads *g, float *work, void *stream);

#endif
