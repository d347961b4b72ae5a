/* ssd_last_row_cuda.h: the SSD output at the last row of each window only,
 * and its backward, on the GPU, float32 (the CUDA twin of model/ssd.h's
 * st_ssd_last_row_*; kernels in model/ssd_last_row.cu). What the last
 * Mamba2 block needs: the heads read row K-1 alone (DESIGN section 5).
 *
 * Per window b and head h (group g = h / (H/G)):
 *     L_s = sum_{s<r<K} dt_r,  w_s = exp(A L_s) dt_s,  q_s = B_s[g] . C_{K-1}[g]
 *     y[p] = sum_s w_s q_s x_s[p] + Dskip x_{K-1}[p]
 * x, dt, B, C, dx, ddt, dB, dC: rows r = b*K + t (C read at t = K-1 only);
 * y, dy: one row a window (row b); every buffer with its own row stride.
 * Backward with dy at the last rows: dx, ddt, dB and dC written at every
 * row of every window (dC zero at rows < K-1, so that the conv backward
 * that follows may read every row); dA and dD [H] added to, the windows'
 * partials summed in double in window order (bit-identical run to run; no
 * atomics). Dskip and dD may be NULL.
 *
 * A block per window (every head: q_s is shared by a group's heads, and
 * dB, dC sum over them inside the block). Products over N and P (q_s, e_s
 * = dy . x_s) accumulate in float in a fixed order (as the chunked
 * kernels' products); the suffix sums, exponentials and every sum over
 * the window's rows (y, dC, ddt's prefix, dA) in double. Any K, P, N, H,
 * G with H % G == 0 whose per-window shared memory (4 (4 H K + 2 G K) +
 * 8 r G N bytes in the backward, r = 256 / min(G N, 256)) fits the
 * device: 138 KiB at K = 1024, H = 8, P = 32, N = 64; larger is refused
 * (ST_ERR_INPUT).
 * `work`: st_cuda_ssd_last_row_work_count floats (the backward's per-window
 * partials; the forward takes none). stream: a cudaStream_t (NULL:
 * default). Asynchronous, no allocation, capturable. */
#ifndef ST_SSD_LAST_ROW_CUDA_H
#define ST_SSD_LAST_ROW_CUDA_H

#include <stddef.h>

size_t st_cuda_ssd_last_row_work_count(int Bsz, int K, int H);

/* 1 when both kernels take these sizes on the current device (the
 * backward's shared memory, the larger, fits), else 0: the calls below
 * refuse exactly the sizes this says 0 to. */
int st_cuda_ssd_last_row_fits(int K, int H, int P, int G, int N);

int st_cuda_ssd_last_row_forward(int Bsz, int K, int H, int P, int G, int N, const float *x, int x_stride,
                                 const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                                 const float *Cm, int C_stride, const float *Dskip, float *y, int y_stride,
                                 void *stream);

int st_cuda_ssd_last_row_backward(int Bsz, int K, int H, int P, int G, int N, const float *x, int x_stride,
                                  const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                                  const float *Cm, int C_stride, const float *Dskip, const float *dy, int dy_stride,
                                  float *dx, int dx_stride, float *ddt, int ddt_stride, float *dA, float *dB,
                                  int dB_stride, float *dC, int dC_stride, float *dD, float *work, void *stream);

#endif
