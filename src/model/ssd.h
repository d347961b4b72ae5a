/* ssd.h: the Mamba2 selective state-space scan (SSD), per head.
 *
 * Rows r = b*K + t (b in [0,Bsz), t in [0,K)). Per row: x [H*P] (head h at
 * x + h*P), B and C [G*N] (group g at + g*N), dt [H] (already softplus'd,
 * > 0), y [H*P]. A [H] (negative) and Dskip [H] per head. Head h reads group
 * g = h / (H/G). With S_{-1} = 0 and S_t [P, N] per (b, h):
 *     S_t = exp(dt_t A_h) S_{t-1} + dt_t x_t B_t^T
 *     y_t = S_t C_t + Dskip_h x_t
 * The sequential recurrence is the definition and the test oracle; the
 * chunked algorithm (chunk length Q; K need not be a multiple of Q) splits
 * time into chunks: the quadratic intra-chunk part plus states passed
 * between chunks. Backward: dx, ddt, dB, dC are written; dA and dD are added
 * to (parameter-like, [H]). `work` holds st_ssd_work_count() reals. */
#ifndef ST_SSD_H
#define ST_SSD_H

#include <stddef.h>

#include "core/real.h"

#define st_ssd_work_count ST_R(st_ssd_work_count)
#define st_ssd_forward_sequential ST_R(st_ssd_forward_sequential)
#define st_ssd_forward_chunked ST_R(st_ssd_forward_chunked)
#define st_ssd_backward_sequential ST_R(st_ssd_backward_sequential)
#define st_ssd_backward_chunked ST_R(st_ssd_backward_chunked)
#define st_ssd_last_row_work_count ST_R(st_ssd_last_row_work_count)
#define st_ssd_last_row_forward ST_R(st_ssd_last_row_forward)
#define st_ssd_last_row_backward ST_R(st_ssd_last_row_backward)

/* Reals of `work` for any of the four functions below with these sizes and
 * chunk length Q >= 1 (the sequential backward's needs are included; the
 * forwards need no more than the backwards). Work is scratch: nothing in it
 * carries from a forward to a backward, which recomputes what it needs. */
size_t st_ssd_work_count(int Bsz, int K, int H, int P, int G, int N, int Q);

void st_ssd_forward_sequential(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride,
                               const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride,
                               const real *Cm, int C_stride, const real *Dskip, real *y, int y_stride);

void st_ssd_forward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const real *x, int x_stride,
                            const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride,
                            const real *Cm, int C_stride, const real *Dskip, real *y, int y_stride, real *work);

void st_ssd_backward_sequential(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride,
                                const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride,
                                const real *Cm, int C_stride, const real *Dskip, const real *dy, int dy_stride,
                                real *dx, int dx_stride, real *ddt, int ddt_stride, real *dA, real *dB,
                                int dB_stride, real *dC, int dC_stride, real *dD, real *work);

void st_ssd_backward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const real *x, int x_stride,
                             const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride,
                             const real *Cm, int C_stride, const real *Dskip, const real *dy, int dy_stride,
                             real *dx, int dx_stride, real *ddt, int ddt_stride, real *dA, real *dB, int dB_stride,
                             real *dC, int dC_stride, real *dD, real *work);

/* The last row of each window only (what the heads read of the last
 * block). Unrolling the recurrence at t = K-1, per (b, h), g = h / (H/G):
 *     L_s = sum_{s<r<K} dt_r,  w_s = exp(A L_s) dt_s,  q_s = B_s[g] . C_{K-1}[g]
 *     y[p] = sum_s w_s q_s x_s[p] + Dskip x_{K-1}[p]
 * x, dt, B, C (and dx, ddt, dB, dC) have rows r = b*K + t as above (only
 * C's rows K-1 are read); y and dy have one row a window (row b, their own
 * strides). Backward with dy at the last rows (the rest taken as zero):
 *     e_s = dy . x_s;  dx_s = w_s q_s dy (+ Dskip dy at s = K-1)
 *     dq_s = e_s w_s;  dw_s = e_s q_s
 *     dB_s[g] = sum_{h in g} dq_s C_{K-1}[g];  dC_{K-1}[g] = sum_{h in g} sum_s dq_s B_s[g]
 *     ddt_s = dw_s exp(A L_s) + A sum_{s'<s} dw_s' w_s';  dA += sum_s dw_s w_s L_s;
 *     dD += dy . x_{K-1}
 * dx, ddt, dB and dC are written at every row (dC zero at rows < K-1),
 * dA and dD added to, summed over windows in order. The sums run in double
 * (real in the stored outputs). `work` holds st_ssd_last_row_work_count()
 * reals. */
size_t st_ssd_last_row_work_count(int Bsz, int K, int H);

void st_ssd_last_row_forward(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride, const real *dt,
                             int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm, int C_stride,
                             const real *Dskip, real *y, int y_stride);

void st_ssd_last_row_backward(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride, const real *dt,
                              int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm, int C_stride,
                              const real *Dskip, const real *dy, int dy_stride, real *dx, int dx_stride, real *ddt,
                              int ddt_stride, real *dA, real *dB, int dB_stride, real *dC, int dC_stride, real *dD,
                              real *work);

#endif
