/* mamba2.cu: the Mamba2 block on the GPU (cuda/mamba2_cuda.h; the math of
 * model/mamba2.h), composed of the CUDA ops exactly as model/mamba2.c
 * composes the CPU ones, call for call:
 *
 * Forward:  a = LN(u); zx = a in_proj^T; xBC = SiLU(conv(zx[xBC]));
 *           dt = softplus(zx[dt_raw] + dt_bias); A = -exp(A_log);
 *           y = SSD(x, dt, A, B, C, Dskip); gated = RMSNorm(y SiLU(z)) norm_w;
 *           u_out = u + gated out_proj^T  (u copied to u_out by the LayerNorm's
 *           pass over u, then a gemm with beta = 1)
 * Backward, in reverse:
 *     d_gated = du_out out_proj_w;            d out_proj_w += du_out^T gated
 *     d_ssd_y, dz <- gated RMSNorm backward;  d norm_w
 *     dx, dB, dC, ddt <- SSD backward;        dA, d Dskip
 *     dxBC_raw <- conv backward;              d conv_w, d conv_b
 *     ddt_raw = ddt sigma(dt_raw + dt_bias);  d dt_bias = sum_r ddt_raw (rows in order, double)
 *     d A_log += dA * A                       (A = -exp(A_log))
 *     d_a = d[z, xBC, dt_raw] in_proj_w;      d in_proj_w
 *     du = du_out + LayerNorm backward(d_a);  d ln_w, d ln_b (du_out added by
 *           the LayerNorm backward as it writes du)
 * The gradients of z, xBC and dt_raw land in the column slices of one
 * [R, in_proj_out] buffer, which in_proj's backward reads as is.
 *
 * Only the small element-wise steps are kernels of this file (dt forward and
 * backward, A, dA_log), one thread per element, with the
 * rounding of the CPU's float build (model/act.h's branches). `saved` uses
 * the CPU block's layout (st_mamba2_saved_layout); `work` holds A [H], dA
 * [H], SSD work, d_gated [R, d_inner] (reused for d_a [R, D]: D <= d_inner),
 * d_ssd_y [R, d_inner], d_zx [R, in_proj_out], d_xBC [R, conv_dim], conv
 * work, each rounded up to 16 floats (64-byte aligned). */
#include "cuda/check.h"

extern "C" {
#include "cuda/conv1d_cuda.h"
#include "cuda/layernorm_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/mamba2_cuda.h"
#include "cuda/rmsnorm_gated_cuda.h"
#include "cuda/ssd_cuda.h"
#include "model/mamba2.h" /* st_mamba2_saved_layout (float build): the saved regions */
}

#define M2_THREADS 256
#define M2_EPS 1e-5f

static unsigned m2_blocks(long n) { return (unsigned)((n + M2_THREADS - 1) / M2_THREADS); }
static size_t m2_round16(size_t n) { return (n + 15) / 16 * 16; }

/* The sizes every function below needs, derived once from st_dims. */
struct m2_sizes {
    int Bsz, K, R, D, d_inner, P, H, N, G, W, Q, GN, conv_dim, in_out;
};

static m2_sizes m2_sizes_of(const st_dims *d, int Bsz) {
    m2_sizes s;
    s.Bsz = Bsz, s.K = d->K, s.R = Bsz * d->K, s.D = d->D, s.d_inner = st_d_inner(d), s.P = d->headdim;
    s.H = st_heads(d), s.N = d->N, s.G = d->G, s.W = d->W, s.Q = d->Q, s.GN = d->G * d->N;
    s.conv_dim = st_conv_dim(d), s.in_out = st_in_proj_out(d);
    return s;
}

/* ---- layouts ------------------------------------------------------------ */

/* Scratch of the backward (the forward uses A and the SSD work). */
struct m2_work {
    float *A, *dA, *ssd, *d_gated, *d_ssd_y, *d_zx, *d_xBC, *conv;
    size_t total;
};

/* n floats (rounded up to 16) carved out of base at *off; NULL when counting. */
static float *m2_carve(float *base, size_t *off, size_t n) {
    float *p = base ? base + *off : NULL;
    *off += m2_round16(n);
    return p;
}

static m2_work m2_work_layout(const m2_sizes *s, float *base) {
    size_t R = (size_t)s->R, off = 0;
    m2_work w;
    w.A = m2_carve(base, &off, (size_t)s->H);
    w.dA = m2_carve(base, &off, (size_t)s->H);
    w.ssd = m2_carve(base, &off, st_cuda_ssd_work_count(s->Bsz, s->K, s->H, s->P, s->G, s->N, s->Q));
    w.d_gated = m2_carve(base, &off, R * (size_t)(s->d_inner > s->D ? s->d_inner : s->D));
    w.d_ssd_y = m2_carve(base, &off, R * s->d_inner);
    w.d_zx = m2_carve(base, &off, R * s->in_out);
    w.d_xBC = m2_carve(base, &off, R * s->conv_dim);
    w.conv = m2_carve(base, &off, st_cuda_conv1d_work_count(s->Bsz, s->K, s->conv_dim, s->W));
    w.total = off;
    return w;
}

/* Device pointers to the saved regions (the CPU block's offsets). */
struct m2_saved {
    float *a, *mean, *rstd, *zx, *xBC, *dt, *y, *gated, *rms;
};

static m2_saved m2_saved_at(const st_dims *d, int Bsz, const float *saved) {
    st_mamba2_region reg[ST_MAMBA2_SAVED_NREGIONS];
    st_mamba2_saved_layout(d, Bsz, reg);
    float *b = (float *)saved; /* const again in the backward's use */
    m2_saved p = {b + reg[ST_MAMBA2_SAVED_LN_A].offset,    b + reg[ST_MAMBA2_SAVED_LN_MEAN].offset,
                  b + reg[ST_MAMBA2_SAVED_LN_RSTD].offset, b + reg[ST_MAMBA2_SAVED_IN_PROJ].offset,
                  b + reg[ST_MAMBA2_SAVED_CONV].offset,    b + reg[ST_MAMBA2_SAVED_DT].offset,
                  b + reg[ST_MAMBA2_SAVED_SSD_Y].offset,   b + reg[ST_MAMBA2_SAVED_GATED].offset,
                  b + reg[ST_MAMBA2_SAVED_RMS_RSTD].offset};
    return p;
}

extern "C" size_t st_cuda_mamba2_saved_count(const st_dims *d, int Bsz) { return st_mamba2_saved_layout(d, Bsz, NULL); }

extern "C" size_t st_cuda_mamba2_work_count(const st_dims *d, int Bsz) {
    m2_sizes s = m2_sizes_of(d, Bsz);
    return m2_work_layout(&s, NULL).total;
}

/* ---- element-wise kernels ------------------------------------------------ */

/* model/act.h's float sigmoid and softplus, branch for branch. */
static __device__ float m2_sigmoidf(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static __device__ float m2_softplusf(float x) { return (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x))); }

/* A[h] = -exp(A_log[h]), exp in double and rounded once, as mamba2.c. */
static __global__ void m2_A_kernel(int H, const float *A_log, float *A) {
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h < H) A[h] = -(float)exp((double)A_log[h]);
}

/* dt[r, h] = softplus(zx[r, off + h] + dt_bias[h]). */
static __global__ void m2_dt_forward_kernel(int R, int H, const float *zx, int zx_stride, int off,
                                            const float *dt_bias, float *dt, int dt_stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)R * H) return;
    int r = (int)(i / H), h = (int)(i % H);
    float x = zx[(size_t)r * zx_stride + off + h] + dt_bias[h];
    dt[(size_t)r * dt_stride + h] = m2_softplusf(x);
}

/* In place on the dt_raw slice of d_zx: ddt -> ddt sigma(dt_raw + dt_bias). */
static __global__ void m2_dt_backward_kernel(int R, int H, const float *zx, int zx_stride, int off,
                                             const float *dt_bias, float *d_zx, int d_zx_stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)R * H) return;
    int r = (int)(i / H), h = (int)(i % H);
    float x = zx[(size_t)r * zx_stride + off + h] + dt_bias[h];
    d_zx[(size_t)r * d_zx_stride + off + h] *= m2_sigmoidf(x);
}

/* g_A_log[h] += dA[h] A[h]  (d(-exp(A_log))/dA_log = A). */
static __global__ void m2_dA_log_kernel(int H, const float *dA, const float *A, float *g_A_log) {
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h < H) g_A_log[h] += dA[h] * A[h];
}

static int m2_A(int H, const float *A_log, float *A, cudaStream_t st) {
    m2_A_kernel<<<m2_blocks(H), M2_THREADS, 0, st>>>(H, A_log, A);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* ---- the block ------------------------------------------------------------ */

extern "C" int st_cuda_mamba2_forward(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u,
                                      int u_stride, float *u_out, int u_out_stride, float *saved, float *work,
                                      void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    m2_sizes s = m2_sizes_of(d, Bsz);
    if (s.R <= 0) return ST_OK;
    m2_saved sv = m2_saved_at(d, Bsz, saved);
    m2_work wk = m2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, R = s.R;

    /* the residual's u_out = u rides on the norm's pass over u (nothing when in place); u_out is
     * the caller's, outside saved and work, so nothing below touches it before the last product */
    ST_TRY(st_cuda_layernorm_forward_copy(R, s.D, u, u_stride, w->ln_w, w->ln_b, M2_EPS, sv.a, s.D, sv.mean, sv.rstd,
                                          u_out, u_out_stride, st));
    ST_TRY(st_cuda_linear_forward(R, s.D, io, sv.a, s.D, w->in_proj_w, NULL, sv.zx, io, st));
    ST_TRY(st_cuda_conv1d_forward(Bsz, s.K, cd, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, sv.xBC, cd, st));
    m2_dt_forward_kernel<<<m2_blocks((long)R * s.H), M2_THREADS, 0, st>>>(R, s.H, sv.zx, io, di + cd, w->dt_bias,
                                                                          sv.dt, s.H);
    ST_CUDA_LAUNCHED();
    ST_TRY(m2_A(s.H, w->A_log, wk.A, st));
    ST_TRY(st_cuda_ssd_forward_chunked(Bsz, s.K, s.H, s.P, s.G, s.N, s.Q, sv.xBC, cd, sv.dt, s.H, wk.A, sv.xBC + di,
                                       cd, sv.xBC + di + s.GN, cd, w->Dskip, sv.y, di, wk.ssd, st));
    ST_TRY(st_cuda_rmsnorm_gated_forward(R, di, sv.y, di, sv.zx, io, w->norm_w, M2_EPS, sv.gated, di, sv.rms, st));
    /* Residual: u_out (= u since the norm) += gated out_proj_w^T. */
    ST_TRY(st_cuda_gemm(0, 1, R, s.D, di, 1.0f, sv.gated, di, w->out_proj_w, di, 1.0f, u_out, u_out_stride, st));
    return ST_OK;
}

extern "C" int st_cuda_mamba2_backward(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u,
                                       int u_stride, const float *saved, const float *du_out, int du_out_stride,
                                       float *du, int du_stride, const st_cuda_mamba2_grads *g, float *work,
                                       void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    m2_sizes s = m2_sizes_of(d, Bsz);
    if (s.R <= 0) return ST_OK;
    m2_saved sv = m2_saved_at(d, Bsz, saved);
    m2_work wk = m2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, GN = s.GN, R = s.R, H = s.H;

    ST_TRY(st_cuda_linear_backward(R, di, s.D, sv.gated, di, w->out_proj_w, du_out, du_out_stride, wk.d_gated, di, 0,
                                   g->out_proj_w, NULL, st));
    ST_TRY(st_cuda_rmsnorm_gated_backward(R, di, sv.y, di, sv.zx, io, w->norm_w, sv.rms, wk.d_gated, di, wk.d_ssd_y,
                                          di, wk.d_zx, io, g->norm_w, st));
    ST_TRY(m2_A(H, w->A_log, wk.A, st));
    ST_CUDA_TRY(cudaMemsetAsync(wk.dA, 0, sizeof(float) * (size_t)H, st)); /* the SSD adds to dA */
    ST_TRY(st_cuda_ssd_backward_chunked(Bsz, s.K, H, s.P, s.G, s.N, s.Q, sv.xBC, cd, sv.dt, H, wk.A, sv.xBC + di, cd,
                                        sv.xBC + di + GN, cd, w->Dskip, wk.d_ssd_y, di, wk.d_xBC, cd,
                                        wk.d_zx + di + cd, io, wk.dA, wk.d_xBC + di, cd, wk.d_xBC + di + GN, cd,
                                        g->Dskip, wk.ssd, st));
    ST_TRY(st_cuda_conv1d_backward(Bsz, s.K, cd, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, wk.d_xBC, cd,
                                   wk.d_zx + di, io, g->conv_w, g->conv_b, wk.conv, st));
    m2_dt_backward_kernel<<<m2_blocks((long)R * H), M2_THREADS, 0, st>>>(R, H, sv.zx, io, di + cd, w->dt_bias,
                                                                         wk.d_zx, io);
    ST_CUDA_LAUNCHED();
    ST_TRY(st_cuda_colsum_add(R, H, wk.d_zx + di + cd, io, g->dt_bias, st)); /* rows in order, in double */
    m2_dA_log_kernel<<<m2_blocks(H), M2_THREADS, 0, st>>>(H, wk.dA, wk.A, g->A_log);
    ST_CUDA_LAUNCHED();

    float *d_a = wk.d_gated; /* dead since the gated RMSNorm backward; sized for max(D, d_inner) */
    ST_TRY(st_cuda_linear_backward(R, s.D, io, sv.a, s.D, w->in_proj_w, wk.d_zx, io, d_a, s.D, 0, g->in_proj_w, NULL,
                                   st));
    /* du = du_out (the residual path) + the norm's dx, in one pass */
    ST_TRY(st_cuda_layernorm_backward_res(R, s.D, u, u_stride, w->ln_w, sv.mean, sv.rstd, d_a, s.D, du_out,
                                          du_out_stride, du, du_stride, g->ln_w, g->ln_b, st));
    return ST_OK;
}
