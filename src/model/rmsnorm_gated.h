/* rmsnorm_gated.h: the gated RMSNorm that closes the Mamba2 mixer (DESIGN
 * section 5): out = RMSNorm(y * SiLU(z)) * w over the n values of each row.
 *
 *     g = y * SiLU(z);  rstd = 1 / sqrt(mean_i g_i^2 + eps);  out = g rstd w
 * y, z, out [rows, n], each with its own row stride (z is typically a column
 * slice of the in_proj output row); w [n]. The forward saves rstd per row.
 * Backward: dy and dz are written, dw is added to. */
#ifndef ST_RMSNORM_GATED_H
#define ST_RMSNORM_GATED_H

#include "core/real.h"

#define st_rmsnorm_gated_forward ST_R(st_rmsnorm_gated_forward)
#define st_rmsnorm_gated_backward ST_R(st_rmsnorm_gated_backward)

/* out[r, 0:n] as above; rstd[r] written (may be NULL). */
void st_rmsnorm_gated_forward(int rows, int n, const real *y, int y_stride, const real *z, int z_stride, const real *w,
                              real eps, real *out, int out_stride, real *rstd);

/* rstd is the forward's. dy[r, 0:n], dz[r, 0:n] written; dw [n] += (may be NULL). */
void st_rmsnorm_gated_backward(int rows, int n, const real *y, int y_stride, const real *z, int z_stride, const real *w,
                               const real *rstd, const real *dout, int dout_stride, real *dy, int dy_stride, real *dz,
                               int dz_stride, real *dw);

#endif
