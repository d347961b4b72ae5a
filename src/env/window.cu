/* window.cu: the window builder of cuda/window_cuda.h on the GPU.
 *
 * win[(b*K + k) * win_stride + j] = feat_b[(bar[b] - K + 1 + k) * feat_stride + j]   j < F
 *                                 = ctx[b * ctx_stride + j - F]                     F <= j < F + C
 * One thread per window value (b, k, j < F + C), adjacent threads on
 * adjacent columns; nothing beyond column F + C of a row is touched. */
#include <stdlib.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/window_cuda.h"
}

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

/* Value (b, k, j) of the window; src is bar 0 of pair b's instrument. */
static __device__ void window_value(long idx, int K, int F, int C, const float *src, int feat_stride, int bar,
                                    const float *ctx, int ctx_stride, float *win, int win_stride) {
    int w = F + C;
    long r = idx / w; /* window row b*K + k */
    int j = (int)(idx % w), k = (int)(r % K);
    long b = r / K;
    float v = j < F ? src[(ptrdiff_t)(bar - K + 1 + k) * feat_stride + j] : ctx[(size_t)b * ctx_stride + (j - F)];
    win[(size_t)r * win_stride + j] = v;
}

static __global__ void window_rows_kernel(int B, int K, int F, int C, const float *const *feat, int feat_stride,
                                          const int *bar, const float *ctx, int ctx_stride, float *win,
                                          int win_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * K * (F + C)) return;
    long b = idx / ((long)K * (F + C));
    window_value(idx, K, F, C, feat[b], feat_stride, bar[b], ctx, ctx_stride, win, win_stride);
}

static __global__ void window_inst_kernel(int B, int K, int F, int C, const float *const *inst_feat, int feat_stride,
                                          const int *inst, const int *bar, const float *ctx, int ctx_stride, float *win,
                                          int win_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)B * K * (F + C)) return;
    long b = idx / ((long)K * (F + C));
    window_value(idx, K, F, C, inst_feat[inst[b]], feat_stride, bar[b], ctx, ctx_stride, win, win_stride);
}

extern "C" int st_cuda_window_build_rows(int B, int K, int F, int C, const float *const *feat, int feat_stride,
                                         const int *bar, const float *ctx, int ctx_stride, float *win, int win_stride,
                                         void *stream) {
    long count = (long)B * K * (F + C);
    if (count <= 0) return ST_OK;
    window_rows_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(B, K, F, C, feat, feat_stride, bar,
                                                                                 ctx, ctx_stride, win, win_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_window_build(int B, int K, int F, int C, const float *const *inst_feat, int feat_stride,
                                    const int *inst, const int *bar, const float *ctx, int ctx_stride, float *win,
                                    int win_stride, void *stream) {
    long count = (long)B * K * (F + C);
    if (count <= 0) return ST_OK;
    window_inst_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(
        B, K, F, C, inst_feat, feat_stride, inst, bar, ctx, ctx_stride, win, win_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* Row b K + k: the row of base that window row k of pair b copies. */
static __global__ void window_feature_rows_kernel(int B, int K, const float *const *inst_feat, const float *base,
                                                  int feat_stride, const int *inst, const int *bar, int *rows) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= (long)B * K) return;
    long b = r / K;
    int k = (int)(r % K);
    rows[r] = (int)((inst_feat[inst[b]] - base) / feat_stride + bar[b] - K + 1 + k);
}

extern "C" int st_cuda_window_feature_rows(int B, int K, const st_cuda_features *f, const int *inst, const int *bar,
                                           int *rows, void *stream) {
    long count = (long)B * K;
    if (count <= 0) return ST_OK;
    window_feature_rows_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(B, K, f->inst, f->data, f->F,
                                                                                         inst, bar, rows);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" void st_cuda_features_free(st_cuda_features *f) {
    cudaFree(f->data);
    cudaFree((void *)f->inst);
    f->data = NULL;
    f->inst = NULL;
    f->n_inst = 0;
    f->rows = 0;
}

/* Copies every instrument's rows into data and the pointer table into out->inst. */
static int features_fill(const st_market *m, st_cuda_features *out, const float **host_ptrs) {
    size_t at = 0;
    for (int i = 0; i < m->n_inst; i++) {
        size_t count = (size_t)m->inst[i].n * (size_t)m->F;
        ST_CUDA_TRY(cudaMemcpy(out->data + at, m->inst[i].features, sizeof(float) * count, cudaMemcpyHostToDevice));
        host_ptrs[i] = out->data + at;
        at += count;
    }
    ST_CUDA_TRY(cudaMemcpy((void *)out->inst, host_ptrs, sizeof(float *) * (size_t)m->n_inst, cudaMemcpyHostToDevice));
    return ST_OK;
}

extern "C" int st_cuda_features_upload(const st_market *m, st_cuda_features *out) {
    out->n_inst = m->n_inst;
    out->F = m->F;
    out->data = NULL;
    out->inst = NULL;
    out->rows = 0;
    size_t total = 0;
    for (int i = 0; i < m->n_inst; i++) {
        total += (size_t)m->inst[i].n * (size_t)m->F;
        out->rows += m->inst[i].n;
    }
    const float **host_ptrs = (const float **)malloc(sizeof(float *) * (size_t)(m->n_inst > 0 ? m->n_inst : 1));
    if (!host_ptrs) return ST_FAIL(ST_ERR_MEMORY, "features upload: no memory for %d pointers", m->n_inst);
    cudaError_t e = cudaMalloc((void **)&out->data, sizeof(float) * (total ? total : 1));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&out->inst, sizeof(float *) * (size_t)(m->n_inst > 0 ? m->n_inst : 1));
    int rc = e == cudaSuccess ? features_fill(m, out, host_ptrs)
                              : ST_FAIL(ST_ERR_DEVICE, "features upload: cudaMalloc: %s", cudaGetErrorString(e));
    free(host_ptrs);
    if (rc != ST_OK) st_cuda_features_free(out);
    return rc;
}
