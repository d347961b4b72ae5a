/* adamw.cu: AdamW update and gradient-norm clipping on the GPU (math in
 * cuda/adamw_cuda.h). The update is elementwise, one thread per element,
 * with the CPU op's float arithmetic (bias corrections folded into lr1 and
 * rbc2 in double on the host). The norm: a fixed grid whose size depends on
 * n alone, each thread summing a grid-stride slice in double, a fixed
 * shared-memory tree per block, the blocks added in order by one thread. */
#include <math.h>
#include <stdlib.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/adamw_cuda.h"
}

enum { ST_ADAM_THREADS = 256, ST_NORM_THREADS = 256, ST_NORM_MAX_BLOCKS = 1024 };

static unsigned blocks_for(size_t n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

extern "C" int st_cuda_adamw_decay_mask(const st_param_table *t, unsigned char *decay) {
    if (t->total == 0) return ST_OK;
    unsigned char *host = (unsigned char *)malloc(t->total);
    if (!host) return ST_FAIL(ST_ERR_MEMORY, "AdamW decay mask: no memory for %zu bytes", t->total);
    for (int k = 0; k < t->n; k++)
        for (size_t i = 0; i < t->p[k].count; i++)
            host[t->p[k].offset + i] = t->p[k].decay ? 1 : 0;
    cudaError_t e = cudaMemcpy(decay, host, t->total, cudaMemcpyHostToDevice);
    free(host);
    ST_CUDA_TRY(e);
    return ST_OK;
}

/* Hyper-parameters as the CPU op rounds them to float. */
typedef struct {
    float b1, b2, lr1, rbc2, eps, wd;
} adam_consts;

static __global__ void adamw_kernel(size_t n, float *w, const float *g, float *m, float *v, const unsigned char *decay,
                                    adam_consts c) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float wd = decay && decay[i] ? c.wd : 0.0f;
    float gi = g[i];
    float mi = c.b1 * m[i] + (1 - c.b1) * gi;
    float vi = c.b2 * v[i] + (1 - c.b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= c.lr1 * mi / (sqrtf(vi) * c.rbc2 + c.eps) + wd * w[i]; /* sqrtf is correctly rounded, as (float)sqrt */
}

extern "C" int st_cuda_adamw_step(size_t n, float *w, const float *g, float *m, float *v, const unsigned char *decay,
                                  const st_adamw_hparams *h, long step, void *stream) {
    if (n == 0) return ST_OK;
    double bc1 = 1 - pow(h->beta1, (double)step), bc2 = 1 - pow(h->beta2, (double)step);
    adam_consts c;
    c.b1 = (float)h->beta1;
    c.b2 = (float)h->beta2;
    c.lr1 = (float)(h->lr / bc1);
    c.rbc2 = (float)(1 / sqrt(bc2));
    c.eps = (float)h->eps;
    c.wd = (float)(h->lr * h->weight_decay);
    adamw_kernel<<<blocks_for(n, ST_ADAM_THREADS), ST_ADAM_THREADS, 0, (cudaStream_t)stream>>>(n, w, g, m, v, decay, c);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static unsigned norm_blocks(size_t n) {
    unsigned b = blocks_for(n, ST_NORM_THREADS);
    if (b == 0) return 1;
    return b < (unsigned)ST_NORM_MAX_BLOCKS ? b : (unsigned)ST_NORM_MAX_BLOCKS;
}

extern "C" size_t st_cuda_grad_norm_work_count(size_t n) { return norm_blocks(n); }

static __global__ void sumsq_kernel(size_t n, const float *g, double *partials) {
    __shared__ double red[ST_NORM_THREADS];
    int tid = threadIdx.x;
    double s = 0;
    for (size_t i = (size_t)blockIdx.x * ST_NORM_THREADS + tid; i < n; i += (size_t)gridDim.x * ST_NORM_THREADS)
        s += (double)g[i] * (double)g[i];
    red[tid] = s;
    __syncthreads();
    for (int h = ST_NORM_THREADS / 2; h > 0; h >>= 1) {
        if (tid < h) red[tid] += red[tid + h];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = red[0];
}

static __global__ void norm_finish_kernel(int blocks, const double *partials, double *norm) {
    double s = 0;
    for (int b = 0; b < blocks; b++)
        s += partials[b];
    *norm = sqrt(s);
}

extern "C" int st_cuda_grad_norm(size_t n, const float *g, double *norm, double *work, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    unsigned blocks = norm_blocks(n);
    sumsq_kernel<<<blocks, ST_NORM_THREADS, 0, s>>>(n, g, work);
    ST_CUDA_LAUNCHED();
    norm_finish_kernel<<<1, 1, 0, s>>>((int)blocks, work, norm);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void scale_kernel(size_t n, float *g, float f) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) g[i] *= f;
}

extern "C" int st_cuda_grad_scale(size_t n, float *g, double s, void *stream) {
    if (n == 0) return ST_OK;
    scale_kernel<<<blocks_for(n, ST_ADAM_THREADS), ST_ADAM_THREADS, 0, (cudaStream_t)stream>>>(n, g, (float)s);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void clip_kernel(size_t n, float *g, const double *norm, double max_norm) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double gn = *norm;
    if (i < n && gn > max_norm) g[i] *= (float)(max_norm / gn);
}

extern "C" int st_cuda_grad_clip(size_t n, float *g, const double *norm, double max_norm, void *stream) {
    if (n == 0) return ST_OK;
    clip_kernel<<<blocks_for(n, ST_ADAM_THREADS), ST_ADAM_THREADS, 0, (cudaStream_t)stream>>>(n, g, norm, max_norm);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
