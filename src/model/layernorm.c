/* layernorm.c: LayerNorm forward and backward on the CPU.
 *
 * xhat = (x - mean) / sqrt(var + eps), var the biased variance; y = xhat w + b.
 * backward: dxhat = dy w; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
 * Statistics are accumulated in double whatever `real` is. */
#include "core/real.h"

#include <math.h>
#include <stddef.h>

#include "model/layernorm.h"

void st_layernorm_forward(int rows, int n, const real *x, int x_stride, const real *w, const real *b, real eps,
                          real *y, int y_stride, real *mean, real *rstd) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const real *xr = x + (size_t)r * x_stride;
        real *yr = y + (size_t)r * y_stride;
        double s = 0;
        for (int i = 0; i < n; i++) s += xr[i];
        double mu = s / n;
        double v = 0;
        for (int i = 0; i < n; i++) v += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        double rs = 1.0 / sqrt(v / n + (double)eps);
        for (int i = 0; i < n; i++) yr[i] = (real)(((double)xr[i] - mu) * rs) * w[i] + b[i];
        if (mean) mean[r] = (real)mu;
        if (rstd) rstd[r] = (real)rs;
    }
}

void st_layernorm_backward(int rows, int n, const real *x, int x_stride, const real *w, const real *mean,
                           const real *rstd, const real *dy, int dy_stride, real *dx, int dx_stride,
                           int dx_accumulate, real *dw, real *db) {
    if (dx) {
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            const real *xr = x + (size_t)r * x_stride;
            const real *gr = dy + (size_t)r * dy_stride;
            real *dxr = dx + (size_t)r * dx_stride;
            double mu = mean[r], rs = rstd[r];
            double sg = 0, sgx = 0;
            for (int i = 0; i < n; i++) {
                double xh = ((double)xr[i] - mu) * rs;
                double g = (double)gr[i] * w[i];
                sg += g;
                sgx += g * xh;
            }
            sg /= n;
            sgx /= n;
            for (int i = 0; i < n; i++) {
                double xh = ((double)xr[i] - mu) * rs;
                double g = (double)gr[i] * w[i];
                real v = (real)(rs * (g - sg - xh * sgx));
                dxr[i] = dx_accumulate ? dxr[i] + v : v;
            }
        }
    }
    if (dw || db) {
        /* Column sums in row order: deterministic and stride-independent. */
        for (int r = 0; r < rows; r++) {
            const real *xr = x + (size_t)r * x_stride;
            const real *gr = dy + (size_t)r * dy_stride;
            double mu = mean[r], rs = rstd[r];
            for (int i = 0; i < n; i++) {
                if (dw) dw[i] += (real)(((double)xr[i] - mu) * rs) * gr[i];
                if (db) db[i] += gr[i];
            }
        }
    }
}
