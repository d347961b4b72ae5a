/* ssd_last_row.c: the SSD output at the last row of each window only, and
 * its backward (ssd.h's st_ssd_last_row_*; the CPU reference of
 * ssd_last_row.cu, which the last Mamba2 block uses on the GPU).
 *
 * At t = K-1 the recurrence S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T
 * unrolls to S_{K-1} = sum_s exp(A L_s) dt_s x_s B_s^T with the suffix sums
 * L_s = sum_{s<r<K} dt_r, so with w_s = exp(A L_s) dt_s and q_s = B_s . C_{K-1}
 *     y = S_{K-1} C_{K-1} + D x_{K-1} = sum_s w_s q_s x_s + D x_{K-1}:
 * O(K (N + P)) a (window, head) instead of the scan's O(K P N).
 * Backward (dy given at the last row): y is linear in x and in w_s q_s, so
 * dx_s = w_s q_s dy (+ D dy at K-1) and, with e_s = dy . x_s, dq_s = e_s w_s,
 * dw_s = e_s q_s. w_s depends on dt_s through its factor (d/d dt_s:
 * exp(A L_s)) and on every later dt_r through L_s (d/d dt_r: A w_s, r > s),
 * so ddt_r = dw_r exp(A L_r) + A sum_{s<r} dw_s w_s; d w_s / dA = L_s w_s.
 * q_s = B_s . C_{K-1} gives dB_s = dq_s C_{K-1}, dC_{K-1} = sum_s dq_s B_s,
 * summed over the heads of a group.
 *
 * Windows are independent: threads split them, each writing only its own
 * rows; dA and dD go through per-(b, h) partials summed over b in order,
 * so results do not depend on the thread count. */
#include "core/real.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "model/ssd.h"

/* Threads pay off above about this many multiply-adds (as ssd.c). */
#define SSD_LR_MIN_PARALLEL_WORK 65536.0

static double dot_lr(const real *u, const real *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)u[i] * (double)v[i];
    return s;
}

/* work = [dA partials (Bsz H) | dD partials (Bsz H) | a slab per window:
 * w, dw and ddt's first term, K each]. */
size_t st_ssd_last_row_work_count(int Bsz, int K, int H) {
    if (Bsz <= 0 || K <= 0 || H <= 0) return 0;
    return 2 * (size_t)Bsz * (size_t)H + (size_t)Bsz * 3 * (size_t)K;
}

void st_ssd_last_row_forward(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride, const real *dt,
                             int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm, int C_stride,
                             const real *Dskip, real *y, int y_stride) {
    if (Bsz <= 0 || K <= 0) return;
    const int hg = H / G;
#pragma omp parallel for schedule(static) if ((double)Bsz * K * H * (P + N) >= SSD_LR_MIN_PARALLEL_WORK)
    for (int b = 0; b < Bsz; b++) {
        const size_t r0 = (size_t)b * (size_t)K, last = r0 + (size_t)K - 1;
        for (int h = 0; h < H; h++) {
            const int g = h / hg;
            const real *Cl = Cm + last * (size_t)C_stride + (size_t)g * N;
            const double Ah = (double)A[h], D = Dskip ? (double)Dskip[h] : 0.0;
            real *yr = y + (size_t)b * (size_t)y_stride + (size_t)h * P;
            for (int p = 0; p < P; p++)
                yr[p] = (real)(D * (double)x[last * (size_t)x_stride + (size_t)h * P + p]);
            double L = 0; /* L_s, from s = K-1 (empty sum) down */
            for (int s = K - 1; s >= 0; s--) {
                const size_t r = r0 + (size_t)s;
                const double dts = dt[r * (size_t)dt_stride + h];
                const double q = dot_lr(Bm + r * (size_t)B_stride + (size_t)g * N, Cl, N);
                const double c = exp(Ah * L) * dts * q;
                const real *xs = x + r * (size_t)x_stride + (size_t)h * P;
                for (int p = 0; p < P; p++)
                    yr[p] = (real)((double)yr[p] + c * (double)xs[p]);
                L += dts;
            }
        }
    }
}

/* One window's backward (every head), its dA, dD partials into pA, pD [H]. */
static void last_row_backward_window(int b, int K, int H, int P, int G, int N, const real *x, int x_stride,
                                     const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride,
                                     const real *Cm, int C_stride, const real *Dskip, const real *dy, int dy_stride,
                                     real *dx, int dx_stride, real *ddt, int ddt_stride, real *dB, int dB_stride,
                                     real *dC, int dC_stride, real *pA, real *pD, real *slab) {
    const int hg = H / G;
    const size_t r0 = (size_t)b * (size_t)K, last = r0 + (size_t)K - 1;
    real *wv = slab, *dwv = slab + K, *t1 = slab + 2 * (size_t)K;
    for (int s = 0; s < K; s++) { /* dB, dC are sums over the group's heads: start from 0 */
        memset(dB + (r0 + (size_t)s) * (size_t)dB_stride, 0, sizeof(real) * (size_t)G * N);
        memset(dC + (r0 + (size_t)s) * (size_t)dC_stride, 0, sizeof(real) * (size_t)G * N);
    }
    for (int h = 0; h < H; h++) {
        const int g = h / hg;
        const real *Cl = Cm + last * (size_t)C_stride + (size_t)g * N;
        real *dCl = dC + last * (size_t)dC_stride + (size_t)g * N;
        const real *dyh = dy + (size_t)b * (size_t)dy_stride + (size_t)h * P;
        const double Ah = (double)A[h], D = Dskip ? (double)Dskip[h] : 0.0;
        double L = 0, sA = 0;
        for (int s = K - 1; s >= 0; s--) {
            const size_t r = r0 + (size_t)s;
            const double dts = dt[r * (size_t)dt_stride + h], decay = exp(Ah * L), w = decay * dts;
            const real *Bs = Bm + r * (size_t)B_stride + (size_t)g * N;
            const real *xs = x + r * (size_t)x_stride + (size_t)h * P;
            const double q = dot_lr(Bs, Cl, N), e = dot_lr(dyh, xs, P);
            const double dq = e * w, dw = e * q, c = w * q + (s == K - 1 ? D : 0.0);
            real *dxs = dx + r * (size_t)dx_stride + (size_t)h * P;
            for (int p = 0; p < P; p++)
                dxs[p] = (real)(c * (double)dyh[p]);
            real *dBs = dB + r * (size_t)dB_stride + (size_t)g * N;
            for (int n = 0; n < N; n++) {
                dBs[n] = (real)((double)dBs[n] + dq * (double)Cl[n]);
                dCl[n] = (real)((double)dCl[n] + dq * (double)Bs[n]);
            }
            sA += dw * w * L;
            wv[s] = (real)w, dwv[s] = (real)dw, t1[s] = (real)(dw * decay);
            if (s == K - 1) pD[h] = (real)e; /* dD = dy . x_{K-1} */
            L += dts;
        }
        double run = 0; /* sum_{s'<s} dw_s' w_s' */
        for (int s = 0; s < K; s++) {
            ddt[(r0 + (size_t)s) * (size_t)ddt_stride + h] = (real)((double)t1[s] + Ah * run);
            run += (double)dwv[s] * (double)wv[s];
        }
        pA[h] = (real)sA;
    }
}

void st_ssd_last_row_backward(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride, const real *dt,
                              int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm, int C_stride,
                              const real *Dskip, const real *dy, int dy_stride, real *dx, int dx_stride, real *ddt,
                              int ddt_stride, real *dA, real *dB, int dB_stride, real *dC, int dC_stride, real *dD,
                              real *work) {
    if (Bsz <= 0 || K <= 0) return;
    const size_t pairs = (size_t)Bsz * (size_t)H;
    real *partA = work, *partD = work + pairs, *slabs = work + 2 * pairs;
#pragma omp parallel for schedule(static) if ((double)Bsz * K * H * (P + N) >= SSD_LR_MIN_PARALLEL_WORK)
    for (int b = 0; b < Bsz; b++)
        last_row_backward_window(b, K, H, P, G, N, x, x_stride, dt, dt_stride, A, Bm, B_stride, Cm, C_stride, Dskip,
                                 dy, dy_stride, dx, dx_stride, ddt, ddt_stride, dB, dB_stride, dC, dC_stride,
                                 partA + (size_t)b * H, partD + (size_t)b * H, slabs + (size_t)b * 3 * (size_t)K);
    for (int h = 0; h < H; h++) {
        double sA = 0, sD = 0;
        for (int b = 0; b < Bsz; b++)
            sA += (double)partA[(size_t)b * H + h], sD += (double)partD[(size_t)b * H + h];
        dA[h] += (real)sA;
        if (dD) dD[h] += (real)sD;
    }
}
