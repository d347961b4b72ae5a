/* rmsnorm_gated.cu: out = RMSNorm(y * SiLU(z)) * w on the GPU
 * (cuda/rmsnorm_gated_cuda.h).
 *
 * forward:  g = y SiLU(z); rstd = 1/sqrt(mean(g^2) + eps); out = g rstd w
 * backward: ghat = g rstd; dghat = dout w;
 *           dg = rstd (dghat - ghat mean(dghat ghat));
 *           dy = dg SiLU(z);  dz = dg y SiLU'(z);  dw += sum_r dout ghat.
 * One warp per row (lane l owns columns l, l+32, ...), row sums in double by
 * an xor butterfly (same bits in every lane and run); g is recomputed where
 * needed rather than stored, with the rounding of the CPU op. */
#include "cuda/check.h"

extern "C" {
#include "cuda/linear_cuda.h"
#include "cuda/rmsnorm_gated_cuda.h"
}

enum { ST_RMS_WARPS = 8, ST_COL_TILE = 32, ST_ROW_LANES = 16 };

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

static __global__ void rms_forward_kernel(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                          const float *w, float eps, float *out, int out_stride, float *rstd) {
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
    if (lane == 0 && rstd) rstd[r] = (float)rs;
}

extern "C" int st_cuda_rmsnorm_gated_forward(int rows, int n, const float *y, int y_stride, const float *z,
                                             int z_stride, const float *w, float eps, float *out, int out_stride,
                                             float *rstd, void *stream) {
    if (rows <= 0 || n <= 0) return ST_OK;
    rms_forward_kernel<<<blocks_for(rows, ST_RMS_WARPS), 32 * ST_RMS_WARPS, 0, (cudaStream_t)stream>>>(
        rows, n, y, y_stride, z, z_stride, w, eps, out, out_stride, rstd);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void rms_backward_kernel(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                           const float *w, const float *rstd, const float *dout, int dout_stride,
                                           float *dy, int dy_stride, float *dz, int dz_stride) {
    long r = (long)blockIdx.x * ST_RMS_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float *yr = y + (size_t)r * y_stride;
    const float *zr = z + (size_t)r * z_stride;
    const float *gr = dout + (size_t)r * dout_stride;
    float *dyr = dy + (size_t)r * dy_stride;
    float *dzr = dz + (size_t)r * dz_stride;
    double rs = rstd[r];
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
                                         const float *rstd, const float *dout, int dout_stride, int splits,
                                         double *parts, float *dw) {
    __shared__ double part[ST_ROW_LANES][ST_COL_TILE];
    int i = blockIdx.x * ST_COL_TILE + threadIdx.x;
    long r0, r1;
    st_rowsplit_range(rows, splits, blockIdx.y, &r0, &r1);
    double acc = 0;
    if (i < n)
        for (long r = r0 + threadIdx.y; r < r1; r += ST_ROW_LANES) {
            float g = y[(size_t)r * y_stride + i] * siluf_st(z[(size_t)r * z_stride + i]);
            float ghat = (float)((double)g * (double)rstd[r]); /* as the forward rounds it */
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

extern "C" int st_cuda_rmsnorm_gated_backward(int rows, int n, const float *y, int y_stride, const float *z,
                                              int z_stride, const float *w, const float *rstd, const float *dout,
                                              int dout_stride, float *dy, int dy_stride, float *dz, int dz_stride,
                                              float *dw, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (rows <= 0 || n <= 0) return ST_OK;
    rms_backward_kernel<<<blocks_for(rows, ST_RMS_WARPS), 32 * ST_RMS_WARPS, 0, s>>>(
        rows, n, y, y_stride, z, z_stride, w, rstd, dout, dout_stride, dy, dy_stride, dz, dz_stride);
    ST_CUDA_LAUNCHED();
    if (dw) {
        st_rowsplit plan;
        ST_TRY(st_cuda_rowsplit_plan(rows, n, stream, &plan));
        dim3 block(ST_COL_TILE, ST_ROW_LANES), grid(blocks_for(n, ST_COL_TILE), (unsigned)plan.splits);
        rms_grad_w_kernel<<<grid, block, 0, s>>>(rows, n, y, y_stride, z, z_stride, rstd, dout, dout_stride,
                                                 plan.splits, plan.parts, dw);
        ST_CUDA_LAUNCHED();
        ST_TRY(st_cuda_rowsplit_finish(n, plan.parts, n, plan.splits, dw, stream));
    }
    return ST_OK;
}
