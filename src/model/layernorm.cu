/* layernorm.cu: LayerNorm forward and backward on the GPU (cuda/layernorm_cuda.h).
 *
 * xhat = (x - mean) / sqrt(var + eps), var the biased variance; y = xhat w + b.
 * backward: dxhat = dy w; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));
 *           dw += sum_r dy xhat; db += sum_r dy.
 * Rows: one warp each, lane l owning columns l, l+32, ...; its sums reduce by
 * an xor butterfly, whose result is the same bits in every lane and every
 * run. Row statistics in double, as the CPU op, so both round alike.
 * A residual block's copy rides along the backward (the _res entry
 * point): it adds the residual's gradient res to dx as it writes it, so
 * that no separate copy kernel reads and writes the rows again (mamba2.cu's
 * residual: bench/notes-small-kernels.md). The forward's copy of x went
 * the other way: out_proj reads u as its C (st_cuda_linear_forward_res).
 * dw and db ride along the dx pass on the register path (the fused
 * backward below): the rows are read once, not once for dx and again for
 * the parameter sums (bench/notes-small.md). */
#include "cuda/check.h"
#include "cuda/rowsplit_device.cuh"

extern "C" {
#include "cuda/layernorm_cuda.h"
#include "cuda/linear_cuda.h"
}

enum { ST_LN_WARPS = 8, ST_COL_TILE = 32, ST_ROW_LANES = 16 };
/* Rows up to ST_LN_REG_COLS columns (D of the tiny, odd and default
 * presets, F of all) take the register path: up to 4 columns a lane. */
enum { ST_LN_REG_COLS = 128 };

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

/* The sum of v over the warp, identical in all lanes (a + b == b + a). */
static __device__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* A warp's row. K = 0: any n, three passes over x (the last two from L1),
 * w and b read in the third. K > 0, n <= 32 K <= ST_LN_REG_COLS: the row in
 * registers (lane l owns columns l + 32 k), x, w and b loaded before the
 * first sum; the same expressions, each lane's sums in column order, the
 * same butterflies: the same bits, one DRAM round trip a row. */
template <int K>
static __global__ void ln_forward_kernel(int rows, int n, const float *x, int x_stride, const float *w, const float *b,
                                         float eps, float *y, int y_stride, float *mean, float *rstd) {
    long r = (long)blockIdx.x * ST_LN_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return; /* a whole warp leaves together: the shuffles stay full */
    const float *xr = x + (size_t)r * x_stride;
    float *yr = y + (size_t)r * y_stride;
    double s = 0, mu, v = 0, rs;
    if constexpr (K == 0) {
        for (int i = lane; i < n; i += 32)
            s += xr[i];
        mu = warp_sum(s) / n;
        for (int i = lane; i < n; i += 32)
            v += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        rs = 1.0 / sqrt(warp_sum(v) / n + (double)eps);
        for (int i = lane; i < n; i += 32)
            yr[i] = (float)(((double)xr[i] - mu) * rs) * w[i] + b[i];
    } else {
        float xv[K], wv[K], bv[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            int i = lane + 32 * k;
            xv[k] = i < n ? xr[i] : 0.f, wv[k] = i < n ? w[i] : 0.f, bv[k] = i < n ? b[i] : 0.f;
        }
#pragma unroll
        for (int k = 0; k < K; k++)
            if (lane + 32 * k < n) s += xv[k];
        mu = warp_sum(s) / n;
#pragma unroll
        for (int k = 0; k < K; k++)
            if (lane + 32 * k < n) v += ((double)xv[k] - mu) * ((double)xv[k] - mu);
        rs = 1.0 / sqrt(warp_sum(v) / n + (double)eps);
#pragma unroll
        for (int k = 0; k < K; k++)
            if (lane + 32 * k < n) yr[lane + 32 * k] = (float)(((double)xv[k] - mu) * rs) * wv[k] + bv[k];
    }
    if (lane == 0) {
        if (mean) mean[r] = (float)mu;
        if (rstd) rstd[r] = (float)rs;
    }
}

/* The register path's instance for n <= ST_LN_REG_COLS: K = 1, 2 or 4
 * columns a lane. */
template <typename Kernel> static Kernel *of_width(int n, Kernel *k1, Kernel *k2, Kernel *k4) {
    return n <= 32 ? k1 : n <= 64 ? k2 : k4;
}

extern "C" int st_cuda_layernorm_forward(int rows, int n, const float *x, int x_stride, const float *w, const float *b,
                                         float eps, float *y, int y_stride, float *mean, float *rstd, void *stream) {
    if (rows <= 0 || n <= 0) return ST_OK;
    dim3 grid(blocks_for(rows, ST_LN_WARPS)), block(32 * ST_LN_WARPS);
    cudaStream_t s = (cudaStream_t)stream;
    auto *k = n > ST_LN_REG_COLS ? ln_forward_kernel<0>
                                 : of_width(n, ln_forward_kernel<1>, ln_forward_kernel<2>, ln_forward_kernel<4>);
    k<<<grid, block, 0, s>>>(rows, n, x, x_stride, w, b, eps, y, y_stride, mean, rstd);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* One element's terms of the dx passes, in double: xhat and g = dy w. */
__device__ static inline void ln_dx_terms(float x, float dy, float w, double mu, double rs, double &xh, double &g) {
    xh = ((double)x - mu) * rs;
    g = (double)dy * w;
}

/* Row r's values of lane `lane` (zeros past n): x, dy, res (0 without), mean and rstd. */
template <int K>
static __device__ __forceinline__ void ln_row_load(long r, int lane, int n, const float *x, int x_stride,
                                                   const float *mean, const float *rstd, const float *dy,
                                                   int dy_stride, const float *res, int res_stride, float (&xv)[K],
                                                   float (&gv)[K], float (&rv)[K], float &mu, float &rs) {
    const float *xr = x + (size_t)r * x_stride, *gr = dy + (size_t)r * dy_stride;
    const float *resr = res ? res + (size_t)r * res_stride : NULL;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int i = lane + 32 * k;
        xv[k] = i < n ? xr[i] : 0.f, gv[k] = i < n ? gr[i] : 0.f, rv[k] = resr && i < n ? resr[i] : 0.f;
    }
    mu = mean[r], rs = rstd[r];
}

/* dx of a row in registers (lane l's columns l + 32 k, zeros past n; rv
 * the residual's, added where has_res): the register path's two passes.
 * SUMS: the lane's dy xhat (xhat rounded to float, as ln_param_grad_kernel
 * rounds it) and dy added into sw[32 k], sb[32 k] too. */
template <int K, bool SUMS>
static __device__ __forceinline__ void ln_row_dx(int lane, int n, const float (&xv)[K], const float (&gv)[K],
                                                 const float (&wv)[K], const float (&rv)[K], bool has_res, double mu,
                                                 double rs, float *dxr, double *sw, double *sb) {
    double sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < K; k++)
        if (lane + 32 * k < n) {
            double xh, g;
            ln_dx_terms(xv[k], gv[k], wv[k], mu, rs, xh, g);
            sg += g;
            sgx += g * xh;
            if constexpr (SUMS) sw[32 * k] += (double)(float)xh * gv[k], sb[32 * k] += gv[k];
        }
    sg = warp_sum(sg) / n;
    sgx = warp_sum(sgx) / n;
#pragma unroll
    for (int k = 0; k < K; k++)
        if (lane + 32 * k < n) {
            double xh, g;
            ln_dx_terms(xv[k], gv[k], wv[k], mu, rs, xh, g);
            float v = (float)(rs * (g - sg - xh * sgx));
            dxr[lane + 32 * k] = has_res ? rv[k] + v : v;
        }
}

/* dx of a warp's row. K = 0: any n, the loops below (x, dy, w read again
 * in the second pass, res only there). K > 0, n <= 32 K <= ST_LN_REG_COLS:
 * the row in registers, lane l owning columns l + 32 k, every load of the
 * row (res's too) issued before the first sum, so a row costs one DRAM
 * round trip, not two; the same expressions in the same orders (each
 * lane's sums in column order), the second pass's xhat and g the first's.
 * res may be dx itself: a lane reads res only at the columns it writes,
 * before writing them. */
template <int K>
static __global__ void ln_backward_dx_kernel(int rows, int n, const float *x, int x_stride, const float *w,
                                             const float *mean, const float *rstd, const float *dy, int dy_stride,
                                             const float *res, int res_stride, float *dx, int dx_stride) {
    long r = (long)blockIdx.x * ST_LN_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * x_stride;
    const float *gr = dy + (size_t)r * dy_stride;
    float *dxr = dx + (size_t)r * dx_stride;
    const float *resr = res ? res + (size_t)r * res_stride : NULL; /* may be dxr itself */
    if constexpr (K == 0) {
        double mu = mean[r], rs = rstd[r], sg = 0, sgx = 0;
        for (int i = lane; i < n; i += 32) {
            double xh, g;
            ln_dx_terms(xr[i], gr[i], w[i], mu, rs, xh, g);
            sg += g;
            sgx += g * xh;
        }
        sg = warp_sum(sg) / n;
        sgx = warp_sum(sgx) / n;
        for (int i = lane; i < n; i += 32) {
            double xh, g;
            ln_dx_terms(xr[i], gr[i], w[i], mu, rs, xh, g);
            float v = (float)(rs * (g - sg - xh * sgx));
            dxr[i] = resr ? resr[i] + v : v;
        }
    } else {
        float xv[K], gv[K], wv[K], rv[K], mu, rs;
        ln_row_load<K>(r, lane, n, x, x_stride, mean, rstd, dy, dy_stride, res, res_stride, xv, gv, rv, mu, rs);
#pragma unroll
        for (int k = 0; k < K; k++)
            wv[k] = lane + 32 * k < n ? w[lane + 32 * k] : 0.f;
        ln_row_dx<K, false>(lane, n, xv, gv, wv, rv, res != NULL, mu, rs, dxr, NULL, NULL);
    }
}

/* dw[i] += sum_r dy[r, i] xhat[r, i], db[i] += sum_r dy[r, i]: a block owns
 * ST_COL_TILE columns, its row lanes sum every ST_ROW_LANES-th row in double
 * and lane 0 adds the lanes in order (the order depends on rows alone).
 * With tickets (a counter a column tile), the tile's last block adds the
 * splits in order into dw and db, as st_cuda_rowsplit_finish would. */
static __global__ void ln_param_grad_kernel(int rows, int n, const float *x, int x_stride, const float *mean,
                                            const float *rstd, const float *dy, int dy_stride, int splits,
                                            double *parts, unsigned *tickets, float *dw, float *db) {
    __shared__ double pw[ST_ROW_LANES][ST_COL_TILE], pb[ST_ROW_LANES][ST_COL_TILE];
    int i = blockIdx.x * ST_COL_TILE + threadIdx.x;
    long r0, r1;
    st_rowsplit_range(rows, splits, blockIdx.y, &r0, &r1);
    double aw = 0, ab = 0;
    if (i < n)
        for (long r = r0 + threadIdx.y; r < r1; r += ST_ROW_LANES) {
            float g = dy[(size_t)r * dy_stride + i];
            float xh = (float)(((double)x[(size_t)r * x_stride + i] - (double)mean[r]) * (double)rstd[r]);
            aw += (double)xh * g;
            ab += g;
        }
    pw[threadIdx.y][threadIdx.x] = aw;
    pb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && i < n) {
        double tw = 0, tb = 0;
        for (int l = 0; l < ST_ROW_LANES; l++) {
            tw += pw[l][threadIdx.x];
            tb += pb[l][threadIdx.x];
        }
        if (parts) { /* [split][w 0..n-1, b 0..n-1] */
            parts[(size_t)blockIdx.y * 2 * n + i] = tw;
            parts[(size_t)blockIdx.y * 2 * n + n + i] = tb;
        } else {
            if (dw) dw[i] += (float)tw;
            if (db) db[i] += (float)tb;
        }
    }
    if (!parts || !tickets || !st_rowsplit_last_block(tickets + blockIdx.x, (unsigned)splits)) return;
    const double tw = st_rowsplit_add_splits<ST_ROW_LANES, ST_COL_TILE>(parts, 2 * n, splits, i < n ? i : -1, pw);
    const double tb = st_rowsplit_add_splits<ST_ROW_LANES, ST_COL_TILE>(parts, 2 * n, splits, i < n ? n + i : -1, pw);
    if (threadIdx.y == 0 && i < n) {
        if (dw) dw[i] += (float)tw;
        if (db) db[i] += (float)tb;
    }
}

/* ---- dx, dw and db in one pass (the register path) ------------------------
 * Block sp owns the rows of row split sp (ST_LN_SPLIT_ROWS rows, the last
 * shorter: st_rowsplit_range); warp k takes rows r0 + k, r0 + k +
 * ST_LN_WARPS, ..., each as ln_backward_dx_kernel<K> does (the same dx
 * bits), loading the next row's values before it works on this one. Lane
 * l adds dy xhat and dy for its columns l + 32 j over its warp's rows in
 * double (xhat rounded to float as ln_param_grad_kernel rounds it); the
 * block adds its warps in order into parts[sp][w 0..n-1, b 0..n-1]. The
 * splits are added in groups of ST_LN_GROUP: the last block of a group to
 * write (tickets[group]) adds the group's splits in order into
 * gparts[group], the last group to finish (tickets[groups]) adds the
 * groups in order into dw and db. One split: the block adds into dw, db;
 * one group: its last block does. The order depends on rows alone:
 * deterministic, though not ln_param_grad_kernel's order (the last bits
 * of dw and db may differ from the two-kernel way's). */
enum { ST_LN_SPLIT_ROWS = 128, ST_LN_GROUP = 32, ST_LN_MAX_SPLITS = 2048 };

template <int K>
static __global__ void __launch_bounds__(32 * ST_LN_WARPS, 3)
    ln_backward_fused_kernel(int rows, int n, const float *x, int x_stride, const float *w, const float *mean,
                             const float *rstd, const float *dy, int dy_stride, const float *res, int res_stride,
                             float *dx, int dx_stride, int splits, double *parts, unsigned *tickets, float *dw,
                             float *db) {
    __shared__ double acc[ST_LN_WARPS][2][32 * K]; /* [warp][w, b][column] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sp = blockIdx.x;
    long r0, r1;
    st_rowsplit_range(rows, splits, sp, &r0, &r1);
    float wv[K];
#pragma unroll
    for (int k = 0; k < K; k++)
        wv[k] = lane + 32 * k < n ? w[lane + 32 * k] : 0.f;
    /* the lane's sums in its own slots of acc (no barrier until the block's sum; registers are what
     * limits the warps in flight, as in rmsnorm_gated.cu) */
#pragma unroll
    for (int k = 0; k < K; k++)
        acc[warp][0][lane + 32 * k] = 0, acc[warp][1][lane + 32 * k] = 0;
    float xv[K], gv[K], rv[K], mu = 0, rs = 0;
    long r = r0 + warp;
    if (r < r1) ln_row_load<K>(r, lane, n, x, x_stride, mean, rstd, dy, dy_stride, res, res_stride, xv, gv, rv, mu, rs);
    for (; r < r1; r += ST_LN_WARPS) { /* whole warps: the shuffles stay full */
        float xn[K], gn[K], rn[K], mun = 0, rsn = 0;
#pragma unroll
        for (int k = 0; k < K; k++)
            xn[k] = 0.f, gn[k] = 0.f, rn[k] = 0.f;
        if (r + ST_LN_WARPS < r1)
            ln_row_load<K>(r + ST_LN_WARPS, lane, n, x, x_stride, mean, rstd, dy, dy_stride, res, res_stride, xn, gn,
                           rn, mun, rsn);
        ln_row_dx<K, true>(lane, n, xv, gv, wv, rv, res != NULL, mu, rs, dx + (size_t)r * dx_stride,
                           &acc[warp][0][lane], &acc[warp][1][lane]);
#pragma unroll
        for (int k = 0; k < K; k++)
            xv[k] = xn[k], gv[k] = gn[k], rv[k] = rn[k];
        mu = mun, rs = rsn;
    }
    __syncthreads();
    /* thread j < 2 n: column j of the partials (w's columns, then b's) */
    const int j = threadIdx.x, which = j < n ? 0 : 1, col = j - which * n;
    const bool live = j < 2 * n;
    float *out = which ? db : dw;
    double t = 0;
    if (live)
        for (int k = 0; k < ST_LN_WARPS; k++)
            t += acc[k][which][col];
    if (splits == 1) {
        if (live && out) out[col] += (float)t;
        return;
    }
    const int n2 = 2 * n, groups = (splits + ST_LN_GROUP - 1) / ST_LN_GROUP, g = sp / ST_LN_GROUP;
    const int members = min(ST_LN_GROUP, splits - g * ST_LN_GROUP);
    if (live) parts[(size_t)sp * n2 + j] = t;
    if (!st_rowsplit_last_block(tickets + g, (unsigned)members)) return;
    t = live ? st_rowsplit_add_run(parts + (size_t)g * ST_LN_GROUP * n2 + j, n2, members) : 0;
    if (groups == 1) {
        if (live && out) out[col] += (float)t;
        return;
    }
    double *gparts = parts + (size_t)splits * n2; /* [group][2 n], past the splits' */
    if (live) gparts[(size_t)g * n2 + j] = t;
    if (!st_rowsplit_last_block(tickets + groups, (unsigned)groups)) return;
    t = live ? st_rowsplit_add_run(gparts + j, n2, groups) : 0;
    if (live && out) out[col] += (float)t;
}

static int ln_fused_on = 1;
extern "C" void st_cuda_layernorm_set_fused_grad(int on) { ln_fused_on = on != 0; }

/* The fused backward where it applies (dx and a parameter gradient wanted,
 * n on the register path, the scratch and tickets at hand): *done = 1. */
static int ln_backward_fused(int rows, int n, const float *x, int x_stride, const float *w, const float *mean,
                             const float *rstd, const float *dy, int dy_stride, const float *res, int res_stride,
                             float *dx, int dx_stride, float *dw, float *db, cudaStream_t s, int *done) {
    *done = 0;
    if (!ln_fused_on || !dx || !(dw || db) || n > ST_LN_REG_COLS) return ST_OK;
    long per = ((long)rows + ST_LN_MAX_SPLITS - 1) / ST_LN_MAX_SPLITS; /* rows a split: at least ST_LN_SPLIT_ROWS */
    if (per < ST_LN_SPLIT_ROWS) per = ST_LN_SPLIT_ROWS;
    const int splits = (int)((rows + per - 1) / per), groups = (splits + ST_LN_GROUP - 1) / ST_LN_GROUP;
    st_rowsplit plan = {NULL, 1, NULL};
    if (splits > 1) {
        /* room for the splits' partials and the groups' after them, 2 n columns each */
        ST_TRY(st_cuda_rowsplit_plan_n(rows, 2 * n, splits + groups, s, &plan));
        if (plan.splits < splits + groups || !plan.tickets || groups + 1 > ST_ROWSPLIT_TICKETS) return ST_OK;
    }
    dim3 grid((unsigned)splits), block(32 * ST_LN_WARPS);
    auto *k = of_width(n, ln_backward_fused_kernel<1>, ln_backward_fused_kernel<2>, ln_backward_fused_kernel<4>);
    k<<<grid, block, 0, s>>>(rows, n, x, x_stride, w, mean, rstd, dy, dy_stride, res, res_stride, dx, dx_stride,
                             splits, plan.parts, plan.tickets, dw, db);
    ST_CUDA_LAUNCHED();
    *done = 1;
    return ST_OK;
}

/* dx = res + LN'(dy) (res NULL: dx = LN'(dy)), then dw, db. */
static int ln_backward(int rows, int n, const float *x, int x_stride, const float *w, const float *mean,
                       const float *rstd, const float *dy, int dy_stride, const float *res, int res_stride, float *dx,
                       int dx_stride, float *dw, float *db, cudaStream_t s) {
    if (rows <= 0 || n <= 0) return ST_OK;
    int fused = 0;
    ST_TRY(ln_backward_fused(rows, n, x, x_stride, w, mean, rstd, dy, dy_stride, res, res_stride, dx, dx_stride, dw,
                             db, s, &fused));
    if (fused) return ST_OK;
    if (dx) {
        dim3 grid(blocks_for(rows, ST_LN_WARPS)), block(32 * ST_LN_WARPS);
        auto *k = n > ST_LN_REG_COLS
                      ? ln_backward_dx_kernel<0>
                      : of_width(n, ln_backward_dx_kernel<1>, ln_backward_dx_kernel<2>, ln_backward_dx_kernel<4>);
        k<<<grid, block, 0, s>>>(rows, n, x, x_stride, w, mean, rstd, dy, dy_stride, res, res_stride, dx, dx_stride);
        ST_CUDA_LAUNCHED();
    }
    if (dw || db) {
        st_rowsplit plan;
        ST_TRY(st_cuda_rowsplit_plan(rows, 2 * n, s, &plan));
        dim3 block(ST_COL_TILE, ST_ROW_LANES), grid(blocks_for(n, ST_COL_TILE), (unsigned)plan.splits);
        unsigned *tickets = grid.x <= ST_ROWSPLIT_TICKETS ? plan.tickets : NULL; /* a counter a column tile */
        ln_param_grad_kernel<<<grid, block, 0, s>>>(rows, n, x, x_stride, mean, rstd, dy, dy_stride, plan.splits,
                                                    plan.parts, tickets, dw, db);
        ST_CUDA_LAUNCHED();
        if (plan.parts && !tickets && dw) ST_TRY(st_cuda_rowsplit_finish(n, plan.parts, 2 * n, plan.splits, dw, s));
        if (plan.parts && !tickets && db)
            ST_TRY(st_cuda_rowsplit_finish(n, plan.parts + n, 2 * n, plan.splits, db, s));
    }
    return ST_OK;
}

extern "C" int st_cuda_layernorm_backward(int rows, int n, const float *x, int x_stride, const float *w,
                                          const float *mean, const float *rstd, const float *dy, int dy_stride,
                                          float *dx, int dx_stride, int dx_accumulate, float *dw, float *db,
                                          void *stream) {
    return ln_backward(rows, n, x, x_stride, w, mean, rstd, dy, dy_stride, dx_accumulate ? dx : NULL, dx_stride, dx,
                       dx_stride, dw, db, (cudaStream_t)stream);
}

extern "C" int st_cuda_layernorm_backward_res(int rows, int n, const float *x, int x_stride, const float *w,
                                              const float *mean, const float *rstd, const float *dy, int dy_stride,
                                              const float *res, int res_stride, float *dx, int dx_stride, float *dw,
                                              float *db, void *stream) {
    return ln_backward(rows, n, x, x_stride, w, mean, rstd, dy, dy_stride, res, res_stride, dx, dx_stride, dw, db,
                       (cudaStream_t)stream);
}
