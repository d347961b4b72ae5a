/* rmsnorm_gated.cu: out = RMSNorm(y * SiLU(z)) * w on the GPU
 * (cuda/rmsnorm_gated_cuda.h).
 *
 * forward:  g = y SiLU(z); rstd = 1/sqrt(mean(g^2) + eps); out = g rstd w
 * backward: ghat = g rstd; dghat = dout w;
 *           dg = rstd (dghat - ghat mean(dghat ghat));
 *           dy = dg SiLU(z);  dz = dg y SiLU'(z);  dw += sum_r dout ghat.
 * One warp per row, row sums in double by an xor butterfly (same bits in
 * every lane and run), with the rounding of the CPU op.
 *
 * Rows up to ST_RMS_REG_COLS columns (d_inner of every preset) take the
 * register path: lane l owns the chunks of four columns 4k..4k+3, k = l +
 * 32 j, j < J = ceil(n / 128), loaded once (one 16-byte load a chunk where
 * the tensor's rows allow, else four scalar loads: same arithmetic, same
 * bits), with SiLU's sigmoid formed once a value. The backward also sums
 * dw in the same pass: a block per row split adds dout ghat over its rows
 * per column (double, warps in order) into the row-split scratch, and a
 * finish kernel adds the splits in order; y, z, dout are read once.
 * Wider rows take the loops below (g recomputed where needed, dw by a
 * separate row-split reduction). No atomics: every sum has a fixed order
 * that depends on rows and n only. */
#include <stdint.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/linear_cuda.h"
#include "cuda/rmsnorm_gated_cuda.h"
}

enum { ST_RMS_WARPS = 8, ST_COL_TILE = 32, ST_ROW_LANES = 16 };
/* The register path: up to 4 chunks of 4 columns a lane; the backward's
 * row splits: about ST_RMS_SPLIT_ROWS rows each, at most ST_RMS_MAX_SPLITS. */
enum { ST_RMS_MAX_J = 4, ST_RMS_REG_COLS = 128 * ST_RMS_MAX_J, ST_RMS_SPLIT_ROWS = 128, ST_RMS_MAX_SPLITS = 1024 };
/* Which tensors' chunks are read or written as one float4 (bits of `vec`). */
enum {
    ST_RMS_VY = 1,
    ST_RMS_VZ = 2,
    ST_RMS_VW = 4,
    ST_RMS_VOUT = 8,
    ST_RMS_VDOUT = 16,
    ST_RMS_VDY = 32,
    ST_RMS_VDZ = 64
};

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

static __device__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* model/act.h's float sigmoid, SiLU and SiLU', branch for branch (finite
 * for any finite input: no exp of a large positive argument). */
static __device__ float sigmoidf_st(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static __device__ float siluf_st(float x) { return x * sigmoidf_st(x); }
static __device__ float silu_gradf_st(float x) {
    float s = sigmoidf_st(x);
    return s * (1.0f + x * (1.0f - s));
}

/* A tensor's chunks may be float4s when its base is 16-byte aligned and
 * every row start stays so (stride and n multiples of 4). */
static unsigned vec_bit(const float *p, int stride, int n, unsigned bit) {
    return (uintptr_t)p % 16 == 0 && stride % 4 == 0 && n % 4 == 0 ? bit : 0;
}

/* Chunk k of a row (columns 4k..4k+3) into v, zeros past n. With vec, n is
 * a multiple of 4: a chunk is either whole or past the end. */
static __device__ __forceinline__ void load4(const float *__restrict__ row, int k, int n, bool vec, float v[4]) {
    int i = 4 * k;
    if (vec) {
        float4 q = i < n ? __ldg((const float4 *)(row + i)) : make_float4(0.f, 0.f, 0.f, 0.f);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
        for (int c = 0; c < 4; c++)
            v[c] = i + c < n ? __ldg(row + i + c) : 0.f;
    }
}
static __device__ __forceinline__ void store4(float *__restrict__ row, int k, int n, bool vec, const float v[4]) {
    int i = 4 * k;
    if (vec) {
        if (i < n) *(float4 *)(row + i) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (i + c < n) row[i + c] = v[c];
    }
}

/* The forward with the row in registers: J chunks a lane (n <= 128 J). */
template <int J>
static __global__ void __launch_bounds__(32 * ST_RMS_WARPS)
    rms_forward_regs_kernel(int rows, int n, const float *__restrict__ y, int y_stride, const float *__restrict__ z,
                            int z_stride, const float *__restrict__ w, float eps, float *__restrict__ out,
                            int out_stride, float *__restrict__ rstd, int rstd_stride, unsigned vec) {
    long r = (long)blockIdx.x * ST_RMS_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return; /* whole warps leave together */
    const float *yr = y + (size_t)r * y_stride, *zr = z + (size_t)r * z_stride;
    float *orow = out + (size_t)r * out_stride;
    float g[J][4];
#pragma unroll
    for (int j = 0; j < J; j++) {
        float zv[4];
        load4(yr, lane + 32 * j, n, vec & ST_RMS_VY, g[j]);
        load4(zr, lane + 32 * j, n, vec & ST_RMS_VZ, zv);
#pragma unroll
        for (int c = 0; c < 4; c++)
            g[j][c] *= siluf_st(zv[c]); /* past n: 0 * SiLU(0) = 0, adds nothing below */
    }
    double ss = 0;
#pragma unroll
    for (int j = 0; j < J; j++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            ss += (double)g[j][c] * g[j][c];
    double rs = 1.0 / sqrt(warp_sum(ss) / n + (double)eps);
#pragma unroll
    for (int j = 0; j < J; j++) {
        float wv[4], o[4];
        load4(w, lane + 32 * j, n, vec & ST_RMS_VW, wv);
#pragma unroll
        for (int c = 0; c < 4; c++)
            o[c] = (float)(g[j][c] * rs) * wv[c];
        store4(orow, lane + 32 * j, n, vec & ST_RMS_VOUT, o);
    }
    if (lane == 0 && rstd) rstd[(size_t)r * rstd_stride] = (float)rs;
}

/* The backward with the row in registers, a block per row split (rows
 * r0 + warp, r0 + warp + ST_RMS_WARPS, ... of st_rowsplit_range). With dw,
 * each lane adds dout ghat for its columns over its warp's rows in double,
 * in shared memory (its own slots: column 4k + c at acc[warp][c][k], no
 * bank conflicts; registers are what limits the warps in flight), then
 * the block adds its warps in order into parts[split, column], or into dw
 * itself when parts is NULL (one split).
 * What the second pass shares with the first it takes from there, not
 * computing it again (the same bits, fewer instructions of the pipes that
 * bind: bench/notes-norms.md): up to J = 2 (d_inner <= 256), each value's
 * sigmoid (sig) and ghat (ghk), in the lane's own slots (no barrier); w comes
 * as the block's doubles (wd, read once a block, one conversion a column
 * instead of two a value a row). The sigmoid was most of the issue slots:
 * act.h's branch on the sign runs both sides in a warp of mixed signs. */
template <int J>
static __global__ void __launch_bounds__(32 * ST_RMS_WARPS, J <= 2 ? 4 : 3)
    rms_backward_regs_kernel(int rows, int n, const float *__restrict__ y, int y_stride, const float *__restrict__ z,
                             int z_stride, const float *__restrict__ w, const float *__restrict__ rstd,
                             int rstd_stride, const float *__restrict__ dout, int dout_stride, float *__restrict__ dy, int dy_stride,
                             float *__restrict__ dz, int dz_stride, int splits, double *__restrict__ parts,
                             float *__restrict__ dw, unsigned vec) {
    constexpr bool KEEP = J <= 2;         /* within the 48 KB of static shared memory */
    constexpr int K1 = KEEP ? 32 * J : 1; /* sig, ghk, wd: slots a (warp, c) */
    __shared__ double acc[ST_RMS_WARPS][4][32 * J];
    __shared__ float sig[ST_RMS_WARPS][4][K1];  /* the row's sigmoid(z) */
    __shared__ double ghk[ST_RMS_WARPS][4][K1]; /* the row's ghat */
    __shared__ double wd[4][K1];                /* (double)w, the block's */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    long r0, r1;
    st_rowsplit_range(rows, splits, blockIdx.x, &r0, &r1);
#pragma unroll
    for (int j = 0; j < J; j++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[warp][c][lane + 32 * j] = 0;
    if constexpr (KEEP) {
        for (int i = threadIdx.x; i < 128 * J; i += 32 * ST_RMS_WARPS)
            wd[i % 4][i / 4] = i < n ? (double)__ldg(w + i) : 0.0; /* load4's value, zero past n */
        __syncthreads();
    }
    for (long r = r0 + warp; r < r1; r += ST_RMS_WARPS) {
        const float *yr = y + (size_t)r * y_stride, *zr = z + (size_t)r * z_stride;
        const float *gr = dout + (size_t)r * dout_stride;
        float yv[J][4], zv[J][4], gv[J][4];
#pragma unroll
        for (int j = 0; j < J; j++) {
            load4(yr, lane + 32 * j, n, vec & ST_RMS_VY, yv[j]);
            load4(zr, lane + 32 * j, n, vec & ST_RMS_VZ, zv[j]);
            load4(gr, lane + 32 * j, n, vec & ST_RMS_VDOUT, gv[j]);
        }
        float rsf = rstd[(size_t)r * rstd_stride];
        double rs = rsf;
        double m = 0; /* mean(dghat * ghat) */
#pragma unroll
        for (int j = 0; j < J; j++) {
            float wv[4];
            if constexpr (!KEEP) load4(w, lane + 32 * j, n, vec & ST_RMS_VW, wv);
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int k = lane + 32 * j;
                float x = zv[j][c], sx = sigmoidf_st(x), g = yv[j][c] * (x * sx); /* siluf_st(x) = x sx */
                double ghat = (double)g * rs;
                if constexpr (KEEP) {
                    sig[warp][c][k] = sx, ghk[warp][c][k] = ghat;
                    m += (double)gv[j][c] * wd[c][k] * ghat;
                    /* (float)ghat as the forward rounds it: g rstd is exact
                     * in double, so its float rounding is the float product's. */
                    if (dw) acc[warp][c][k] += (double)__fmul_rn(g, rsf) * gv[j][c];
                } else {
                    m += (double)gv[j][c] * wv[c] * ghat;
                    if (dw) acc[warp][c][k] += (double)(float)ghat * gv[j][c]; /* as the forward rounds it */
                }
            }
        }
        m = warp_sum(m) / n;
#pragma unroll
        for (int j = 0; j < J; j++) {
            float wv[4], dyv[4], dzv[4];
            if constexpr (!KEEP) load4(w, lane + 32 * j, n, vec & ST_RMS_VW, wv);
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int k = lane + 32 * j;
                float x = zv[j][c], s = KEEP ? sig[warp][c][k] : sigmoidf_st(x); /* SiLU' = s (1 + x (1 - s)) */
                double gate = x * s;
                double ghat = KEEP ? ghk[warp][c][k] : (double)(yv[j][c] * (float)gate) * rs;
                double dg = rs * ((double)gv[j][c] * (KEEP ? wd[c][k] : (double)wv[c]) - ghat * m);
                dyv[c] = (float)(dg * gate);
                dzv[c] = (float)(dg * yv[j][c] * (s * (1.0f + x * (1.0f - s))));
            }
            store4(dy + (size_t)r * dy_stride, lane + 32 * j, n, vec & ST_RMS_VDY, dyv);
            store4(dz + (size_t)r * dz_stride, lane + 32 * j, n, vec & ST_RMS_VDZ, dzv);
        }
    }
    if (!dw) return; /* the whole block */
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += 32 * ST_RMS_WARPS) {
        double t = 0;
        for (int k = 0; k < ST_RMS_WARPS; k++)
            t += acc[k][i % 4][i / 4];
        if (parts)
            parts[(size_t)blockIdx.x * n + i] = t;
        else
            dw[i] += (float)t;
    }
}

/* dw[i] += sum over splits of parts[split, i]: a warp per column, lane l
 * adding splits l, l + 32, ... in order, then the lanes by the butterfly
 * (many splits: no thread walks them all in sequence). */
static __global__ void rms_dw_finish_kernel(int n, int splits, const double *__restrict__ parts, float *dw) {
    int i = blockIdx.x * ST_RMS_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (i >= n) return; /* whole warps */
    double t = 0;
    for (int sp = lane; sp < splits; sp += 32)
        t += parts[(size_t)sp * n + i];
    t = warp_sum(t);
    if (lane == 0) dw[i] += (float)t;
}

static __global__ void rms_forward_kernel(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                          const float *w, float eps, float *out, int out_stride, float *rstd,
                                          int rstd_stride) {
    long r = (long)blockIdx.x * ST_RMS_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return; /* whole warps leave together */
    const float *yr = y + (size_t)r * y_stride;
    const float *zr = z + (size_t)r * z_stride;
    float *orow = out + (size_t)r * out_stride;
    double ss = 0;
    for (int i = lane; i < n; i += 32) {
        float g = yr[i] * siluf_st(zr[i]);
        ss += (double)g * g;
    }
    double rs = 1.0 / sqrt(warp_sum(ss) / n + (double)eps);
    for (int i = lane; i < n; i += 32) {
        float g = yr[i] * siluf_st(zr[i]);
        orow[i] = (float)(g * rs) * w[i];
    }
    if (lane == 0 && rstd) rstd[(size_t)r * rstd_stride] = (float)rs;
}

/* The register path's instance for rows of n <= ST_RMS_REG_COLS columns:
 * k[J - 1], J = ceil(n / 128) values a lane (1..4). */
template <typename Kernel> static Kernel *of_width(int n, Kernel *k1, Kernel *k2, Kernel *k3, Kernel *k4) {
    const int J = (n + 127) / 128;
    return J <= 1 ? k1 : J == 2 ? k2 : J == 3 ? k3 : k4;
}

extern "C" int st_cuda_rmsnorm_gated_forward_rs(int rows, int n, const float *y, int y_stride, const float *z,
                                                int z_stride, const float *w, float eps, float *out, int out_stride,
                                                float *rstd, int rstd_stride, void *stream) {
    if (rows <= 0 || n <= 0) return ST_OK;
    cudaStream_t s = (cudaStream_t)stream;
    dim3 grid(blocks_for(rows, ST_RMS_WARPS)), block(32 * ST_RMS_WARPS);
    unsigned vec = vec_bit(y, y_stride, n, ST_RMS_VY) | vec_bit(z, z_stride, n, ST_RMS_VZ) |
                   vec_bit(w, 0, n, ST_RMS_VW) | vec_bit(out, out_stride, n, ST_RMS_VOUT);
    if (n > ST_RMS_REG_COLS)
        rms_forward_kernel<<<grid, block, 0, s>>>(rows, n, y, y_stride, z, z_stride, w, eps, out, out_stride, rstd,
                                                  rstd_stride);
    else
        of_width(n, rms_forward_regs_kernel<1>, rms_forward_regs_kernel<2>, rms_forward_regs_kernel<3>,
                 rms_forward_regs_kernel<4>)<<<grid, block, 0, s>>>(rows, n, y, y_stride, z, z_stride, w, eps, out,
                                                                     out_stride, rstd, rstd_stride, vec);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_rmsnorm_gated_forward(int rows, int n, const float *y, int y_stride, const float *z,
                                             int z_stride, const float *w, float eps, float *out, int out_stride,
                                             float *rstd, void *stream) {
    return st_cuda_rmsnorm_gated_forward_rs(rows, n, y, y_stride, z, z_stride, w, eps, out, out_stride, rstd, 1,
                                            stream);
}

static __global__ void rms_backward_kernel(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                           const float *w, const float *rstd, int rstd_stride, const float *dout,
                                           int dout_stride,
                                           float *dy, int dy_stride, float *dz, int dz_stride) {
    long r = (long)blockIdx.x * ST_RMS_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float *yr = y + (size_t)r * y_stride;
    const float *zr = z + (size_t)r * z_stride;
    const float *gr = dout + (size_t)r * dout_stride;
    float *dyr = dy + (size_t)r * dy_stride;
    float *dzr = dz + (size_t)r * dz_stride;
    double rs = rstd[(size_t)r * rstd_stride];
    double m = 0; /* mean(dghat * ghat) */
    for (int i = lane; i < n; i += 32)
        m += (double)gr[i] * w[i] * ((double)(yr[i] * siluf_st(zr[i])) * rs);
    m = warp_sum(m) / n;
    for (int i = lane; i < n; i += 32) {
        double gate = siluf_st(zr[i]);
        double ghat = (double)(yr[i] * (float)gate) * rs;
        double dg = rs * ((double)gr[i] * w[i] - ghat * m);
        dyr[i] = (float)(dg * gate);
        dzr[i] = (float)(dg * yr[i] * silu_gradf_st(zr[i]));
    }
}

/* dw[i] += sum_r dout[r, i] ghat[r, i]: ST_COL_TILE columns a block, row
 * lanes summing every ST_ROW_LANES-th row in double, lanes added in order. */
static __global__ void rms_grad_w_kernel(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                         const float *rstd, int rstd_stride, const float *dout, int dout_stride,
                                         int splits, double *parts, float *dw) {
    __shared__ double part[ST_ROW_LANES][ST_COL_TILE];
    int i = blockIdx.x * ST_COL_TILE + threadIdx.x;
    long r0, r1;
    st_rowsplit_range(rows, splits, blockIdx.y, &r0, &r1);
    double acc = 0;
    if (i < n)
        for (long r = r0 + threadIdx.y; r < r1; r += ST_ROW_LANES) {
            float g = y[(size_t)r * y_stride + i] * siluf_st(z[(size_t)r * z_stride + i]);
            float ghat = (float)((double)g * (double)rstd[(size_t)r * rstd_stride]); /* as the forward rounds it */
            acc += (double)ghat * dout[(size_t)r * dout_stride + i];
        }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || i >= n) return;
    double t = 0;
    for (int l = 0; l < ST_ROW_LANES; l++)
        t += part[l][threadIdx.x];
    if (parts)
        parts[(size_t)blockIdx.y * n + i] = t;
    else
        dw[i] += (float)t;
}

/* The register path's backward: a block per row split; the splits' dw
 * partials added by rms_dw_finish_kernel. */
static int rms_backward_regs(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                             const float *w, const float *rstd, int rstd_stride, const float *dout, int dout_stride, float *dy,
                             int dy_stride, float *dz, int dz_stride, float *dw, cudaStream_t s) {
    long want = (rows + ST_RMS_SPLIT_ROWS - 1) / ST_RMS_SPLIT_ROWS;
    st_rowsplit plan = {NULL, want < ST_RMS_MAX_SPLITS ? (int)want : ST_RMS_MAX_SPLITS, NULL};
    if (dw) ST_TRY(st_cuda_rowsplit_plan_n(rows, n, plan.splits, s, &plan)); /* without dw: no scratch needed */
    unsigned vec = vec_bit(y, y_stride, n, ST_RMS_VY) | vec_bit(z, z_stride, n, ST_RMS_VZ) |
                   vec_bit(w, 0, n, ST_RMS_VW) | vec_bit(dout, dout_stride, n, ST_RMS_VDOUT) |
                   vec_bit(dy, dy_stride, n, ST_RMS_VDY) | vec_bit(dz, dz_stride, n, ST_RMS_VDZ);
    dim3 grid((unsigned)plan.splits), block(32 * ST_RMS_WARPS);
    of_width(n, rms_backward_regs_kernel<1>, rms_backward_regs_kernel<2>, rms_backward_regs_kernel<3>,
             rms_backward_regs_kernel<4>)<<<grid, block, 0, s>>>(rows, n, y, y_stride, z, z_stride, w, rstd,
                                                                  rstd_stride, dout,
                                                                  dout_stride, dy, dy_stride, dz, dz_stride,
                                                                  plan.splits, plan.parts, dw, vec);
    ST_CUDA_LAUNCHED();
    if (dw && plan.parts) {
        rms_dw_finish_kernel<<<blocks_for(n, ST_RMS_WARPS), 32 * ST_RMS_WARPS, 0, s>>>(n, plan.splits, plan.parts, dw);
        ST_CUDA_LAUNCHED();
    }
    return ST_OK;
}

extern "C" int st_cuda_rmsnorm_gated_backward_rs(int rows, int n, const float *y, int y_stride, const float *z,
                                                 int z_stride, const float *w, const float *rstd, int rstd_stride,
                                                 const float *dout, int dout_stride, float *dy, int dy_stride,
                                                 float *dz, int dz_stride, float *dw, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (rows <= 0 || n <= 0) return ST_OK;
    if (n <= ST_RMS_REG_COLS)
        return rms_backward_regs(rows, n, y, y_stride, z, z_stride, w, rstd, rstd_stride, dout, dout_stride, dy,
                                 dy_stride, dz, dz_stride, dw, s);
    rms_backward_kernel<<<blocks_for(rows, ST_RMS_WARPS), 32 * ST_RMS_WARPS, 0, s>>>(
        rows, n, y, y_stride, z, z_stride, w, rstd, rstd_stride, dout, dout_stride, dy, dy_stride, dz, dz_stride);
    ST_CUDA_LAUNCHED();
    if (dw) {
        st_rowsplit plan;
        ST_TRY(st_cuda_rowsplit_plan(rows, n, stream, &plan));
        dim3 block(ST_COL_TILE, ST_ROW_LANES), grid(blocks_for(n, ST_COL_TILE), (unsigned)plan.splits);
        rms_grad_w_kernel<<<grid, block, 0, s>>>(rows, n, y, y_stride, z, z_stride, rstd, rstd_stride, dout,
                                                 dout_stride, plan.splits, plan.parts, dw);
        ST_CUDA_LAUNCHED();
        ST_TRY(st_cuda_rowsplit_finish(n, plan.parts, n, plan.splits, dw, stream));
    }
    return ST_OK;
}

extern "C" int st_cuda_rmsnorm_gated_backward(int rows, int n, const float *y, int y_stride, const float *z,
                                              int z_stride, const float *w, const float *rstd, const float *dout,
                                              int dout_stride, float *dy, int dy_stride, float *dz, int dz_stride,
                                              float *dw, void *stream) {
    return st_cuda_rmsnorm_gated_backward_rs(rows, n, y, y_stride, z, z_stride, w, rstd, 1, dout, dout_stride, dy,
                                             dy_stride, dz, dz_stride, dw, stream);
}
