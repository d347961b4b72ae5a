/* rmsnorm_gated.c: out = RMSNorm(y * SiLU(z)) * w on the CPU.
 *
 * forward:  g = y SiLU(z); rstd = 1/sqrt(mean(g^2) + eps); out = g rstd w
 * backward: ghat = g rstd; dghat = dout w;
 *           dg = rstd (dghat - ghat mean(dghat ghat));
 *           dy = dg SiLU(z);  dz = dg y SiLU'(z);  dw += sum_r dout ghat.
 * Row statistics are accumulated in double whatever `real` is; dw sums run
 * over rows in order (deterministic, stride-independent). */
#include "core/real.h"

#include <math.h>
#include <stddef.h>

#include "model/act.h"
#include "model/rmsnorm_gated.h"

/* Below this many elements a loop runs on one thread: forking costs more than
 * it saves, and small calls (gradient checks, tiny batches) stay cheap when
 * the cores are shared. The split never changes the bits (rows are independent). */
#define ST_OMP_MIN_WORK 32768L

void st_rmsnorm_gated_forward(int rows, int n, const real *y, int y_stride, const real *z, int z_stride, const real *w,
                              real eps, real *out, int out_stride, real *rstd) {
#pragma omp parallel for schedule(static) if ((long)rows * n >= ST_OMP_MIN_WORK)
    for (int r = 0; r < rows; r++) {
        const real *yr = y + (size_t)r * y_stride;
        const real *zr = z + (size_t)r * z_stride;
        real *orow = out + (size_t)r * out_stride;
        double ss = 0;
        for (int i = 0; i < n; i++) {
            real g = yr[i] * st_silu(zr[i]);
            orow[i] = g; /* keep g; scaled below once rstd is known */
            ss += (double)g * g;
        }
        double rs = 1.0 / sqrt(ss / n + (double)eps);
        for (int i = 0; i < n; i++)
            orow[i] = (real)(orow[i] * rs) * w[i];
        if (rstd) rstd[r] = (real)rs;
    }
}

/* dw[i] += sum_r dout[r, i] ghat[r, i]: threads own blocks of columns and
 * sum rows in order in double, so the result is thread-count independent. */
#define ST_RMS_COLS 16
static void rmsnorm_gated_grad_w(int rows, int n, const real *y, int y_stride, const real *z, int z_stride,
                                 const real *rstd, const real *dout, int dout_stride, real *dw) {
    int blocks = (n + ST_RMS_COLS - 1) / ST_RMS_COLS;
#pragma omp parallel for schedule(static) if ((long)rows * n >= ST_OMP_MIN_WORK)
    for (int blk = 0; blk < blocks; blk++) {
        int i0 = blk * ST_RMS_COLS, i1 = i0 + ST_RMS_COLS < n ? i0 + ST_RMS_COLS : n;
        double acc[ST_RMS_COLS] = {0};
        for (int r = 0; r < rows; r++) {
            const real *yr = y + (size_t)r * y_stride;
            const real *zr = z + (size_t)r * z_stride;
            const real *gr = dout + (size_t)r * dout_stride;
            double rs = rstd[r];
            for (int i = i0; i < i1; i++) {
                real ghat = (real)((double)(yr[i] * st_silu(zr[i])) * rs); /* as the forward rounds it */
                acc[i - i0] += (double)ghat * gr[i];
            }
        }
        for (int i = i0; i < i1; i++)
            dw[i] += (real)acc[i - i0];
    }
}

void st_rmsnorm_gated_backward(int rows, int n, const real *y, int y_stride, const real *z, int z_stride, const real *w,
                               const real *rstd, const real *dout, int dout_stride, real *dy, int dy_stride, real *dz,
                               int dz_stride, real *dw) {
#pragma omp parallel for schedule(static) if ((long)rows * n >= ST_OMP_MIN_WORK)
    for (int r = 0; r < rows; r++) {
        const real *yr = y + (size_t)r * y_stride;
        const real *zr = z + (size_t)r * z_stride;
        const real *gr = dout + (size_t)r * dout_stride;
        real *dyr = dy + (size_t)r * dy_stride;
        real *dzr = dz + (size_t)r * dz_stride;
        double rs = rstd[r];
        double m = 0; /* mean(dghat * ghat) */
        for (int i = 0; i < n; i++)
            m += (double)gr[i] * w[i] * ((double)(yr[i] * st_silu(zr[i])) * rs);
        m /= n;
        for (int i = 0; i < n; i++) {
            double gate = st_silu(zr[i]);
            double ghat = (double)(yr[i] * (real)gate) * rs;
            double dg = rs * ((double)gr[i] * w[i] - ghat * m);
            dyr[i] = (real)(dg * gate);
            dzr[i] = (real)(dg * yr[i] * st_silu_grad(zr[i]));
        }
    }
    if (dw) rmsnorm_gated_grad_w(rows, n, y, y_stride, z, z_stride, rstd, dout, dout_stride, dw);
}
