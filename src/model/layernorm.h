/* layernorm.h: LayerNorm over the last n values of each row (eps from the
 * caller; DESIGN uses 1e-5). Saves mean and rstd per row for backward. */
#ifndef ST_LAYERNORM_H
#define ST_LAYERNORM_H

#include "core/real.h"

#define st_layernorm_forward ST_R(st_layernorm_forward)
#define st_layernorm_backward ST_R(st_layernorm_backward)

/* y = (x - mean) * rstd * w + b; mean[r], rstd[r] written (may be NULL). */
void st_layernorm_forward(int rows, int n, const real *x, int x_stride, const real *w, const real *b, real eps,
                          real *y, int y_stride, real *mean, real *rstd);

/* dx (=|+=) d LN / dx . dy;  dw += sum dy * xhat;  db += sum dy.
 * mean and rstd are those saved by the forward. dw/db may be NULL. */
void st_layernorm_backward(int rows, int n, const real *x, int x_stride, const real *w, const real *mean,
                           const real *rstd, const real *dy, int dy_stride, real *dx, int dx_stride,
                           int dx_accumulate, real *dw, real *db);

#endif
