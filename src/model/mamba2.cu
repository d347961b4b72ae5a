/* mamba2.cu: the Mamba2 block on the GPU (cuda/mamba2_cuda.h; the math of
 * model/mamba2.h), composed of the CUDA ops exactly as model/mamba2.c
 * composes the CPU ones, call for call:
 *
 * Forward:  a = LN(u); zx = a in_proj^T; xBC = SiLU(conv(zx[xBC]));
 *           dt = softplus(zx[dt_raw] + dt_bias); A = -exp(A_log);
 *           y = SSD(x, dt, A, B, C, Dskip); gated = RMSNorm(y SiLU(z)) norm_w;
 *           u_out = u + gated out_proj^T  (one product reading u as its C:
 *           st_cuda_linear_forward_res)
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
 * work, each rounded up to 16 floats (64-byte aligned).
 *
 * The last block's tail (st_cuda_mamba2_forward_last / _backward_last):
 * the heads read u_L at row K-1 alone, and every op after the SSD is per
 * row, so the tail runs LayerNorm, in_proj, conv and dt over every row and
 * then the SSD at the last rows (cuda/ssd_last_row_cuda.h), the gated
 * RMSNorm, out_proj and the residual over the n last rows only (views of
 * n rows at strides K times the widths, at their natural positions in
 * saved). Its backward: out_proj, RMSNorm and the SSD's backward from the
 * last rows; conv, dt and the LayerNorm over every row; in_proj's backward
 * split by columns ([xBC, dt_raw] over every row, z over the last rows:
 * dz is zero elsewhere, so nothing zeroes or reads it). */
#include "cuda/check.h"

extern "C" {
#include "cuda/conv1d_cuda.h"
#include "cuda/layernorm_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/mamba2_cuda.h"
#include "cuda/rmsnorm_gated_cuda.h"
#include "cuda/ssd_cuda.h"
#include "cuda/ssd_last_row_cuda.h"
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
    size_t ssd = st_cuda_ssd_work_count(s->Bsz, s->K, s->H, s->P, s->G, s->N, s->Q);
    size_t ssd_last = st_cuda_ssd_last_row_work_count(s->Bsz, s->K, s->H); /* the tail's (below) */
    w.ssd = m2_carve(base, &off, ssd > ssd_last ? ssd : ssd_last);
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

/* What the full block and the tail share before the SSD: [z, xBC, dt_raw]
 * = a in_proj^T, xBC = SiLU(conv), dt = softplus(dt_raw + dt_bias), A.
 * z_last_only (the tail): z, which only the gated norm reads, at the last
 * row of each window only (its other rows are not written): in_proj as
 * [xBC, dt_raw] over every row (in_proj_w's rows d_inner..) and z over the
 * last rows (its first d_inner rows); 40% fewer bytes stored at the
 * default preset (d_inner 256 of in_out 648 columns). And C's conv (xBC's
 * last G N columns, which the last-row SSD reads at row K-1 alone) at the
 * last rows only: its other rows are not written. */
static int m2_forward_pre_ssd(const m2_sizes &s, const st_cuda_mamba2_weights *w, const m2_saved &sv, const m2_work &wk,
                              int z_last_only, cudaStream_t st) {
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, R = s.R, K = s.K;
    if (z_last_only) {
        const size_t last = (size_t)(K - 1);
        ST_TRY(st_cuda_linear_forward(R, s.D, cd + s.H, sv.a, s.D, w->in_proj_w + (size_t)di * s.D, NULL, sv.zx + di,
                                      io, st));
        ST_TRY(st_cuda_linear_forward(s.Bsz, s.D, di, sv.a + last * s.D, K * s.D, w->in_proj_w, NULL,
                                      sv.zx + last * io, K * io, st));
    } else {
        ST_TRY(st_cuda_linear_forward(R, s.D, io, sv.a, s.D, w->in_proj_w, NULL, sv.zx, io, st));
    }
    if (z_last_only) { /* C: read by the last-row SSD at row K-1 alone */
        const int xb = cd - s.GN;
        ST_TRY(st_cuda_conv1d_forward(s.Bsz, s.K, xb, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, sv.xBC, cd, st));
        ST_TRY(st_cuda_conv1d_forward_last(s.Bsz, s.K, s.GN, s.W, sv.zx + di + xb, io, w->conv_w + (size_t)xb * s.W,
                                           w->conv_b + xb, 1, sv.xBC + xb, cd, st));
    } else {
        ST_TRY(st_cuda_conv1d_forward(s.Bsz, s.K, cd, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, sv.xBC, cd, st));
    }
    m2_dt_forward_kernel<<<m2_blocks((long)R * s.H), M2_THREADS, 0, st>>>(R, s.H, sv.zx, io, di + cd, w->dt_bias,
                                                                          sv.dt, s.H);
    ST_CUDA_LAUNCHED();
    return m2_A(s.H, w->A_log, wk.A, st);
}

/* What both backwards share after the SSD's: the conv backward (d_xBC ->
 * the xBC_raw columns of d_zx), ddt -> ddt_raw in place, d dt_bias, d A_log. */
static int m2_backward_post_ssd(const m2_sizes &s, const st_cuda_mamba2_weights *w, const m2_saved &sv,
                                const m2_work &wk, const st_cuda_mamba2_grads *g, cudaStream_t st) {
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, R = s.R, H = s.H;
    ST_TRY(st_cuda_conv1d_backward(s.Bsz, s.K, cd, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, wk.d_xBC, cd,
                                   wk.d_zx + di, io, g->conv_w, g->conv_b, wk.conv, st));
    m2_dt_backward_kernel<<<m2_blocks((long)R * H), M2_THREADS, 0, st>>>(R, H, sv.zx, io, di + cd, w->dt_bias,
                                                                         wk.d_zx, io);
    ST_CUDA_LAUNCHED();
    ST_TRY(st_cuda_colsum_add(R, H, wk.d_zx + di + cd, io, g->dt_bias, st)); /* rows in order, in double */
    m2_dA_log_kernel<<<m2_blocks(H), M2_THREADS, 0, st>>>(H, wk.dA, wk.A, g->A_log);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_mamba2_forward(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u,
                                      int u_stride, float *u_out, int u_out_stride, float *saved, float *work,
                                      void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    m2_sizes s = m2_sizes_of(d, Bsz);
    if (s.R <= 0) return ST_OK;
    m2_saved sv = m2_saved_at(d, Bsz, saved);
    m2_work wk = m2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, R = s.R;

    ST_TRY(st_cuda_layernorm_forward(R, s.D, u, u_stride, w->ln_w, w->ln_b, M2_EPS, sv.a, s.D, sv.mean, sv.rstd, st));
    ST_TRY(m2_forward_pre_ssd(s, w, sv, wk, 0, st));
    ST_TRY(st_cuda_ssd_forward_chunked(Bsz, s.K, s.H, s.P, s.G, s.N, s.Q, sv.xBC, cd, sv.dt, s.H, wk.A, sv.xBC + di,
                                       cd, sv.xBC + di + s.GN, cd, w->Dskip, sv.y, di, wk.ssd, st));
    ST_TRY(st_cuda_rmsnorm_gated_forward(R, di, sv.y, di, sv.zx, io, w->norm_w, M2_EPS, sv.gated, di, sv.rms, st));
    /* Residual: u_out = u + gated out_proj_w^T, u read as the product's C (u is the caller's,
     * outside saved and work: intact until here) */
    ST_TRY(st_cuda_linear_forward_res(R, di, s.D, sv.gated, di, w->out_proj_w, u, u_stride, u_out, u_out_stride, st));
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
    ST_TRY(m2_backward_post_ssd(s, w, sv, wk, g, st));

    float *d_a = wk.d_gated; /* dead since the gated RMSNorm backward; sized for max(D, d_inner) */
    ST_TRY(st_cuda_linear_backward(R, s.D, io, sv.a, s.D, w->in_proj_w, wk.d_zx, io, d_a, s.D, 0, g->in_proj_w, NULL,
                                   st));
    /* du = du_out (the residual path) + the norm's dx, in one pass */
    ST_TRY(st_cuda_layernorm_backward_res(R, s.D, u, u_stride, w->ln_w, sv.mean, sv.rstd, d_a, s.D, du_out,
                                          du_out_stride, du, du_stride, g->ln_w, g->ln_b, st));
    return ST_OK;
}

/* ---- the last block's tail ---------------------------------------------------- */

/* dst[b * dst_stride + c] += src[b * src_stride + c], c < D: the residual
 * path of the tail's last rows. */
static __global__ void m2_add_rows_kernel(int rows, int D, const float *src, int src_stride, float *dst,
                                          int dst_stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * D) return;
    int r = (int)(i / D), c = (int)(i % D);
    dst[(size_t)r * dst_stride + c] += src[(size_t)r * src_stride + c];
}

/* Row K-1 of every window, as a view of Bsz rows: offset (K-1) stride, stride K stride. */
static size_t m2_last(const m2_sizes &s, int stride) { return (size_t)(s.K - 1) * (size_t)stride; }

extern "C" int st_cuda_mamba2_last_fits(const st_dims *d) {
    return st_cuda_ssd_last_row_fits(d->K, st_heads(d), d->headdim, d->G, d->N);
}

extern "C" int st_cuda_mamba2_forward_last(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w, const float *u,
                                           int u_stride, float *u_out, int u_out_stride, float *saved, float *work,
                                           void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    m2_sizes s = m2_sizes_of(d, Bsz);
    if (s.R <= 0) return ST_OK;
    m2_saved sv = m2_saved_at(d, Bsz, saved);
    m2_work wk = m2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, K = s.K;

    ST_TRY(st_cuda_layernorm_forward(s.R, s.D, u, u_stride, w->ln_w, w->ln_b, M2_EPS, sv.a, s.D, sv.mean, sv.rstd,
                                     st));
    ST_TRY(m2_forward_pre_ssd(s, w, sv, wk, 1, st));
    /* from here on the last rows only, at their natural positions in saved */
    float *y = sv.y + m2_last(s, di), *gated = sv.gated + m2_last(s, di);
    ST_TRY(st_cuda_ssd_last_row_forward(Bsz, K, s.H, s.P, s.G, s.N, sv.xBC, cd, sv.dt, s.H, wk.A, sv.xBC + di, cd,
                                        sv.xBC + di + s.GN, cd, w->Dskip, y, K * di, st));
    ST_TRY(st_cuda_rmsnorm_gated_forward_rs(Bsz, di, y, K * di, sv.zx + m2_last(s, io), K * io, w->norm_w, M2_EPS, gated,
                                            K * di, sv.rms + (K - 1), K, st));
    /* Residual at the last rows: u_out = u + gated out_proj_w^T there. */
    ST_TRY(st_cuda_linear_forward_res(Bsz, di, s.D, gated, K * di, w->out_proj_w, u + m2_last(s, u_stride),
                                      K * u_stride, u_out + m2_last(s, u_out_stride), K * u_out_stride, st));
    return ST_OK;
}

extern "C" int st_cuda_mamba2_backward_last(const st_dims *d, int Bsz, const st_cuda_mamba2_weights *w,
                                            const float *u, int u_stride, const float *saved, const float *du_out,
                                            int du_out_stride, float *du, int du_stride, const st_cuda_mamba2_grads *g,
                                            float *work, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    m2_sizes s = m2_sizes_of(d, Bsz);
    if (s.R <= 0) return ST_OK;
    m2_saved sv = m2_saved_at(d, Bsz, saved);
    m2_work wk = m2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, GN = s.GN, R = s.R, H = s.H, K = s.K, D = s.D;
    const float *du_last = du_out + m2_last(s, du_out_stride), *y = sv.y + m2_last(s, di);
    const float *zx_last = sv.zx + m2_last(s, io);
    float *dz_last = wk.d_zx + m2_last(s, io);

    /* out_proj and the gated RMSNorm over the last rows: d_gated and d_ssd_y compact [Bsz, d_inner];
     * dz into d_zx's z columns at the last rows (its other rows are never read: see in_proj below) */
    ST_TRY(st_cuda_linear_backward(Bsz, di, D, sv.gated + m2_last(s, di), K * di, w->out_proj_w, du_last,
                                   K * du_out_stride, wk.d_gated, di, 0, g->out_proj_w, NULL, st));
    ST_TRY(st_cuda_rmsnorm_gated_backward_rs(Bsz, di, y, K * di, zx_last, K * io, w->norm_w, sv.rms + (K - 1), K,
                                             wk.d_gated, di, wk.d_ssd_y, di, dz_last, K * io, g->norm_w, st));
    ST_TRY(m2_A(H, w->A_log, wk.A, st));
    ST_CUDA_TRY(cudaMemsetAsync(wk.dA, 0, sizeof(float) * (size_t)H, st)); /* the SSD adds to dA */
    /* dx, dB, dC (zero but at the last rows), ddt at every row */
    ST_TRY(st_cuda_ssd_last_row_backward(Bsz, K, H, s.P, s.G, s.N, sv.xBC, cd, sv.dt, H, wk.A, sv.xBC + di, cd,
                                         sv.xBC + di + GN, cd, w->Dskip, wk.d_ssd_y, di, wk.d_xBC, cd,
                                         wk.d_zx + di + cd, io, wk.dA, wk.d_xBC + di, cd, wk.d_xBC + di + GN, cd,
                                         g->Dskip, wk.ssd, st));
    ST_TRY(m2_backward_post_ssd(s, w, sv, wk, g, st));

    /* in_proj in two parts, so that dz's rows < K-1 (zero) are neither written nor read: the
     * [xBC, dt_raw] columns (in_proj_w's rows d_inner..) over every row, then the z columns
     * (its first d_inner rows) over the last rows, added into d_a there */
    float *d_a = wk.d_gated; /* dead since the gated RMSNorm backward; sized for max(D, d_inner) rows R */
    const size_t wz = (size_t)di * D;
    ST_TRY(st_cuda_linear_backward(R, D, cd + H, sv.a, D, w->in_proj_w + wz, wk.d_zx + di, io, d_a, D, 0,
                                   g->in_proj_w + wz, NULL, st));
    ST_TRY(st_cuda_linear_backward(Bsz, D, di, sv.a + m2_last(s, D), K * D, w->in_proj_w, dz_last, K * io,
                                   d_a + m2_last(s, D), K * D, 1, g->in_proj_w, NULL, st));
    /* du = the norm's dx at every row, plus du_out at the last rows (its other rows are not read);
     * where du is du_out, its last rows are kept aside first (d_ssd_y is dead by now) */
    const float *res = du_last;
    int res_stride = K * du_out_stride;
    if (du == du_out) {
        ST_CUDA_TRY(cudaMemcpy2DAsync(wk.d_ssd_y, sizeof(float) * D, du_last, sizeof(float) * res_stride,
                                      sizeof(float) * D, Bsz, cudaMemcpyDeviceToDevice, st));
        res = wk.d_ssd_y, res_stride = D;
    }
    ST_TRY(st_cuda_layernorm_backward(R, D, u, u_stride, w->ln_w, sv.mean, sv.rstd, d_a, D, du, du_stride, 0, g->ln_w,
                                      g->ln_b, st));
    m2_add_rows_kernel<<<m2_blocks((long)Bsz * D), M2_THREADS, 0, st>>>(Bsz, D, res, res_stride,
                                                                        du + m2_last(s, du_stride), K * du_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
