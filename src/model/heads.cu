/* heads.cu: final LayerNorm, policy and value heads on the GPU
 * (cuda/heads_cuda.h), composed from the linear and LayerNorm kernels.
 *
 * saved: mean [n], rstd [n], g [n, D+C], p = tanh(pi1 g) [n, Hh], q = tanh(v1 g) [n, Hh]
 * backward: dp = dlogits pi2 (1 - p^2); dq = dvalue v2 (1 - q^2);
 *           dg = dp pi1 + dq v1; dh = dg[:, :D] -> ln_f backward; dc = dg[:, D:].
 * The same sequence of steps as the CPU op, so intermediate buffers agree. */
#include "cuda/check.h"

extern "C" {
#include "cuda/heads_cuda.h"
#include "cuda/layernorm_cuda.h"
#include "cuda/linear_cuda.h"
}

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

typedef struct {
    float *mean, *rstd, *g, *p, *q;
} saved_view;

static saved_view saved_at(float *s, int n, int D, int C, int Hh) {
    saved_view v;
    v.mean = s;
    v.rstd = v.mean + n;
    v.g = v.rstd + n;
    v.p = v.g + (size_t)n * (D + C);
    v.q = v.p + (size_t)n * Hh;
    return v;
}

extern "C" size_t st_cuda_heads_saved_count(int n, int D, int C, int Hh) { return (size_t)n * (2 + D + C + 2 * Hh); }

extern "C" size_t st_cuda_heads_work_count(int n, int D, int C, int Hh) { return (size_t)n * (D + C + 2 * Hh); }

/* Copies rows [n, cols] of src (stride ss) into dst (stride ds), or adds them. */
static __global__ void copy_rows_kernel(int n, int cols, const float *src, int ss, float *dst, int ds, int accumulate) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)n * cols) return;
    long r = idx / cols;
    int j = (int)(idx % cols);
    float v = src[(size_t)r * ss + j];
    float *d = dst + (size_t)r * ds + j;
    *d = accumulate ? *d + v : v;
}

static int copy_rows(int n, int cols, const float *src, int ss, float *dst, int ds, int accumulate, cudaStream_t s) {
    if (n <= 0 || cols <= 0) return ST_OK;
    copy_rows_kernel<<<blocks_for((long)n * cols, 256), 256, 0, s>>>(n, cols, src, ss, dst, ds, accumulate);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* x = tanh(x) over count contiguous values (in double, as the CPU op). */
static __global__ void tanh_kernel(long count, float *x) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) x[i] = (float)tanh((double)x[i]);
}

/* d *= 1 - t^2 (through tanh), count contiguous values. */
static __global__ void tanh_grad_kernel(long count, const float *t, float *d) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) d[i] *= 1.0f - t[i] * t[i];
}

static int tanh_rows(long count, float *x, cudaStream_t s) {
    if (count <= 0) return ST_OK;
    tanh_kernel<<<blocks_for(count, 256), 256, 0, s>>>(count, x);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static int tanh_back(long count, const float *t, float *d, cudaStream_t s) {
    if (count <= 0) return ST_OK;
    tanh_grad_kernel<<<blocks_for(count, 256), 256, 0, s>>>(count, t, d);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_heads_forward(int n, int D, int C, int Hh, int A, const float *u_last, int u_stride,
                                     const float *c, int c_stride, const st_cuda_heads_weights *w, float *logits,
                                     int logits_stride, float *value, float *saved, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    if (n <= 0) return ST_OK;
    saved_view s = saved_at(saved, n, D, C, Hh);
    int gw = D + C;
    ST_TRY(st_cuda_layernorm_forward(n, D, u_last, u_stride, w->ln_w, w->ln_b, 1e-5f, s.g, gw, s.mean, s.rstd, stream));
    ST_TRY(copy_rows(n, C, c, c_stride, s.g + D, gw, 0, st));
    ST_TRY(st_cuda_linear_forward(n, gw, Hh, s.g, gw, w->pi1_w, w->pi1_b, s.p, Hh, stream));
    ST_TRY(tanh_rows((long)n * Hh, s.p, st));
    ST_TRY(st_cuda_linear_forward(n, Hh, A, s.p, Hh, w->pi2_w, w->pi2_b, logits, logits_stride, stream));
    ST_TRY(st_cuda_linear_forward(n, gw, Hh, s.g, gw, w->v1_w, w->v1_b, s.q, Hh, stream));
    ST_TRY(tanh_rows((long)n * Hh, s.q, st));
    ST_TRY(st_cuda_linear_forward(n, Hh, 1, s.q, Hh, w->v2_w, w->v2_b, value, 1, stream));
    return ST_OK;
}

extern "C" int st_cuda_heads_backward(int n, int D, int C, int Hh, int A, const float *u_last, int u_stride,
                                      const st_cuda_heads_weights *w, const float *saved, const float *dlogits,
                                      int dlogits_stride, const float *dvalue, float *du_last, int du_stride, float *dc,
                                      int dc_stride, int dc_accumulate, const st_cuda_heads_grads *g, float *work,
                                      void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    if (n <= 0) return ST_OK;
    saved_view s = saved_at((float *)saved, n, D, C, Hh);
    int gw = D + C;
    float *dg = work, *dp = dg + (size_t)n * gw, *dq = dp + (size_t)n * Hh;
    /* Policy branch. */
    ST_TRY(st_cuda_linear_backward(n, Hh, A, s.p, Hh, w->pi2_w, dlogits, dlogits_stride, dp, Hh, 0, g->pi2_w, g->pi2_b,
                                   stream));
    ST_TRY(tanh_back((long)n * Hh, s.p, dp, st));
    ST_TRY(st_cuda_linear_backward(n, gw, Hh, s.g, gw, w->pi1_w, dp, Hh, dg, gw, 0, g->pi1_w, g->pi1_b, stream));
    /* Value branch, accumulated into dg. */
    ST_TRY(st_cuda_linear_backward(n, Hh, 1, s.q, Hh, w->v2_w, dvalue, 1, dq, Hh, 0, g->v2_w, g->v2_b, stream));
    ST_TRY(tanh_back((long)n * Hh, s.q, dq, st));
    ST_TRY(st_cuda_linear_backward(n, gw, Hh, s.g, gw, w->v1_w, dq, Hh, dg, gw, 1, g->v1_w, g->v1_b, stream));
    /* Split dg into the LayerNorm'd state and the context. */
    ST_TRY(copy_rows(n, C, dg + D, gw, dc, dc_stride, dc_accumulate, st));
    ST_TRY(st_cuda_layernorm_backward(n, D, u_last, u_stride, w->ln_w, s.mean, s.rstd, dg, gw, du_last, du_stride, 0,
                                      g->ln_w, g->ln_b, stream));
    return ST_OK;
}
