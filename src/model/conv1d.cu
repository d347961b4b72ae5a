/* conv1d.cu: causal depthwise convolution (+ fused SiLU) on the GPU
 * (cuda/conv1d_cuda.h).
 *
 * forward:  pre[t, ch] = b[ch] + sum_i w[ch, i] x[t-W+1+i, ch] (x[<0] = 0),
 *           y = SiLU(pre) or pre                     x, y [Bsz*K, Ch], w [Ch, W]
 * backward: g = dy SiLU'(pre) (pre recomputed) or dy, into work [Bsz*K, Ch];
 *           dx[s, ch] = sum_i w[ch, i] g[s+W-1-i, ch] over s+W-1-i < K;
 *           dw[ch, i] += sum_{b,t} g[t, ch] x[t-W+1+i, ch];  db[ch] += sum g.
 * One thread per (row, channel) for activations, adjacent threads on adjacent
 * channels (coalesced). Parameter gradients: a block owns a tile of the
 * Ch*(W+1) parameter columns (i = W is db), row lanes sum rows in double and
 * are added in lane order: deterministic. */
#include "cuda/check.h"

extern "C" {
#include "cuda/conv1d_cuda.h"
#include "cuda/linear_cuda.h"
}

enum { ST_COL_TILE = 32, ST_ROW_LANES = 16 };

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

/* model/act.h's float sigmoid, SiLU and SiLU', branch for branch. */
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

extern "C" size_t st_cuda_conv1d_work_count(int Bsz, int K, int Ch) { return (size_t)Bsz * (size_t)K * (size_t)Ch; }

/* pre at (row r = window start + t, channel ch), the taps added in the CPU's order. */
static __device__ float conv_pre(int t, int ch, int W, const float *xw, int x_stride, const float *w, const float *b) {
    float pre = b[ch];
    for (int i = 0; i < W; i++) {
        int s = t - W + 1 + i;
        if (s >= 0) pre += w[(size_t)ch * W + i] * xw[(size_t)s * x_stride + ch];
    }
    return pre;
}

static __global__ void conv_forward_kernel(long rows, int K, int Ch, int W, const float *x, int x_stride,
                                           const float *w, const float *b, int silu, float *y, int y_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * Ch) return;
    long r = idx / Ch;
    int ch = (int)(idx % Ch), t = (int)(r % K);
    float pre = conv_pre(t, ch, W, x + (size_t)(r - t) * x_stride, x_stride, w, b);
    y[(size_t)r * y_stride + ch] = silu ? siluf_st(pre) : pre;
}

extern "C" int st_cuda_conv1d_forward(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w,
                                      const float *b, int silu, float *y, int y_stride, void *stream) {
    long rows = (long)Bsz * K;
    if (rows <= 0 || Ch <= 0) return ST_OK;
    conv_forward_kernel<<<blocks_for(rows * Ch, 256), 256, 0, (cudaStream_t)stream>>>(rows, K, Ch, W, x, x_stride, w, b,
                                                                                      silu, y, y_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* g[r, ch] = dy[r, ch] SiLU'(pre[r, ch]) (or dy) into contiguous rows of Ch. */
static __global__ void conv_grad_pre_kernel(long rows, int K, int Ch, int W, const float *x, int x_stride,
                                            const float *w, const float *b, int silu, const float *dy, int dy_stride,
                                            float *g) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * Ch) return;
    long r = idx / Ch;
    int ch = (int)(idx % Ch), t = (int)(r % K);
    float d = dy[(size_t)r * dy_stride + ch];
    if (silu) d *= silu_gradf_st(conv_pre(t, ch, W, x + (size_t)(r - t) * x_stride, x_stride, w, b));
    g[idx] = d;
}

/* dx[s] = sum over the outputs t = s+W-1-i (< K) that read x[s]. */
static __global__ void conv_grad_x_kernel(long rows, int K, int Ch, int W, const float *w, const float *g, float *dx,
                                          int dx_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * Ch) return;
    long r = idx / Ch;
    int ch = (int)(idx % Ch), s = (int)(r % K);
    const float *gw = g + (size_t)(r - s) * Ch;
    float acc = 0;
    for (int i = 0; i < W; i++) {
        int t = s + W - 1 - i;
        if (t < K) acc += w[(size_t)ch * W + i] * gw[(size_t)t * Ch + ch];
    }
    dx[(size_t)r * dx_stride + ch] = acc;
}

/* Parameter column c < Ch*(W+1): tap i = c / Ch of channel ch = c % Ch
 * (i == W: the bias). Lanes sum rows r = lane, lane + ST_ROW_LANES, ... */
static __global__ void conv_grad_params_kernel(long rows, int K, int Ch, int W, const float *x, int x_stride,
                                               const float *g, int splits, double *parts, float *dw, float *db) {
    __shared__ double part[ST_ROW_LANES][ST_COL_TILE];
    long c = (long)blockIdx.x * ST_COL_TILE + threadIdx.x;
    int i = (int)(c / Ch), ch = (int)(c % Ch);
    int live = c < (long)Ch * (W + 1) && (i < W ? dw != NULL : db != NULL);
    long r0, r1;
    st_rowsplit_range(rows, splits, blockIdx.y, &r0, &r1);
    double acc = 0;
    if (live)
        for (long r = r0 + threadIdx.y; r < r1; r += ST_ROW_LANES) {
            double gv = g[(size_t)r * Ch + ch];
            if (i == W) {
                acc += gv;
                continue;
            }
            int s = (int)(r % K) - W + 1 + i; /* the input time this tap read */
            if (s >= 0) acc += gv * x[(size_t)(r - W + 1 + i) * x_stride + ch];
        }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || !live) return;
    double t = 0;
    for (int l = 0; l < ST_ROW_LANES; l++)
        t += part[l][threadIdx.x];
    if (parts) /* [split][dw as [Ch, W], then db [Ch]] */
        parts[(size_t)blockIdx.y * Ch * (W + 1) + (i < W ? (size_t)ch * W + i : (size_t)Ch * W + ch)] = t;
    else if (i < W)
        dw[(size_t)ch * W + i] += (float)t;
    else
        db[ch] += (float)t;
}

extern "C" int st_cuda_conv1d_backward(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w,
                                       const float *b, int silu, const float *dy, int dy_stride, float *dx,
                                       int dx_stride, float *dw, float *db, float *work, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    long rows = (long)Bsz * K;
    if (rows <= 0 || Ch <= 0) return ST_OK;
    unsigned grid = blocks_for(rows * Ch, 256);
    conv_grad_pre_kernel<<<grid, 256, 0, st>>>(rows, K, Ch, W, x, x_stride, w, b, silu, dy, dy_stride, work);
    ST_CUDA_LAUNCHED();
    conv_grad_x_kernel<<<grid, 256, 0, st>>>(rows, K, Ch, W, w, work, dx, dx_stride);
    ST_CUDA_LAUNCHED();
    if (dw || db) {
        const int cols = Ch * (W + 1);
        st_rowsplit plan;
        ST_TRY(st_cuda_rowsplit_plan((int)rows, cols, stream, &plan));
        dim3 block(ST_COL_TILE, ST_ROW_LANES), grid(blocks_for(cols, ST_COL_TILE), (unsigned)plan.splits);
        conv_grad_params_kernel<<<grid, block, 0, st>>>(rows, K, Ch, W, x, x_stride, work, plan.splits, plan.parts, dw,
                                                        db);
        ST_CUDA_LAUNCHED();
        if (plan.parts && dw) ST_TRY(st_cuda_rowsplit_finish(Ch * W, plan.parts, cols, plan.splits, dw, stream));
        if (plan.parts && db)
            ST_TRY(st_cuda_rowsplit_finish(Ch, plan.parts + (size_t)Ch * W, cols, plan.splits, db, stream));
    }
    return ST_OK;
}
