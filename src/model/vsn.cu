/* vsn.cu: the Variable Selection Network on the GPU (float32 storage,
 * double accumulation), forward and backward; the C API is cuda/vsn_cuda.h
 * and the math that of model/vsn.c (DESIGN section 5):
 *     e_j   = s_j * embed_w[j] + embed_b[j]            [Dv] each, E [rows, P], P = F*Dv
 *     alpha = softmax(GRN_sel(E, c))                   [F], Hs = min(Dv, F)
 *     t_j   = GRN_j(e_j)                               [Dv]
 *     v     = sum_j alpha_j t_j                        [Dv]
 *     GRN(a, c) = LayerNorm(skip(a) + g1 sigma(g2)), [g1; g2] = glu(fc2(ELU(fc1(a) + ctx(c))))
 * s and c are read through their own row strides only (the regression of
 * DESIGN section 1: the window's rows are F+C wide, never F).
 *
 * E is never stored, forward or backward: the embedding is folded into
 * the three linears that read it (the per-variable fc1, the selection
 * GRN's fc1 and skip; cuda/vsn_fold_cuda.h), so those read s itself and
 * their parameter gradients, and the embedding's, come from small
 * reductions over s (model/vsn_fold.cu).
 *
 * For Dv in {8, 16, 32} the forward's per-variable GRNs and combine run as
 * one register-tiled kernel that writes only v (model/vsn_forward_fused.cu;
 * st_cuda_vsn_set_fused(ST_CUDA_VSN_UNFUSED) turns it off); what follows
 * describes the unfused path, which every other Dv and the backward's
 * recomputation run. Likewise the backward's per-variable GRNs (their
 * recomputation, dlog, the norm, gate and product backward and their row
 * reductions) run as one kernel for those Dv (model/
 * vsn_backward_fused.cu; st_cuda_vsn_set_fused_backward(0) turns it off),
 * which needs none of the P-wide activations below.
 * Every matrix product runs through cuBLAS (cuda/linear_cuda.h, in its
 * precision): the selection GRN's linears, and the F stacked per-variable
 * GRNs as strided-batched products over the variables. The rest are plain
 * kernels, each reading and writing rows contiguously: one thread per
 * element (the rank-one fc1, activations, gates), for the per-variable
 * norms and their backward a group of Dv/4 lanes per (row, variable)
 * holding 4 values each where Dv % 4 == 0 and Dv <= 32 (the *_lanes
 * kernels), else a warp per (row, variable) (the lanes walk the Dv values,
 * shuffles sum them), a warp per row for the unfused forward's gates,
 * norms and combine in one pass (gate_combine_kernel: it writes only v of
 * them) and for the softmax backward; the selection GRN's gate, norm and
 * softmax take 8 lanes a row for F <= 64 (sel_tail_group_kernel), else a
 * warp a row (sel_tail_kernel); the selection norm's input gradient is
 * the LayerNorm op's (cuda/layernorm_cuda.h, a warp per row).
 * Parameter gradients are reductions over all rows: the weight gradients
 * cuBLAS products (dW += dy^T x; for the stacked GRNs one launch of
 * st_cuda_grouped_dw over all variables in fp32 mode), the biases and the
 * LayerNorm weights column sums in double
 * (st_cuda_colsum_add, over per-row products for the norm weights): no
 * atomics, bit-identical run to run and independent of the callers'
 * strides. (Threads per weight summing rows serially, then a thread per
 * (row, variable) doing a whole GRN, were each half of a default-preset
 * training step: bench/NOTES.md.)
 *
 * Memory: `saved` (kept from the forward to the backward, for the whole
 * training step) holds only the selection GRN's state: sel_h1, sel_h2
 * [rows, Hs], sel_glu with sigma(g2) [rows, 2F], sel_x [rows, F],
 * sel_mean, sel_rstd [rows], alpha [rows, F]: 2Hs + 4F + 2 floats a row.
 * The per-variable GRNs' activations (h1, h2 [rows, P], glu with sigma(g2)
 * [rows, 2P], x [rows, P], mean, rstd [rows, F]: 5P + 2F a row, 13 GB at
 * 8,192 windows of the default preset) live in `work`, the scratch that
 * the model shares with every other op: the backward recomputes them (the
 * forward's own calls on the same buffers, so the same bits) before it
 * needs them. `work` holds dx, h1, h2 [rows, P], glu [rows, 2P], x [rows,
 * P], then mean, rstd, dlog (the backward's; the forward's logits for F >
 * 64), dxs [rows, F], dgls
 * [rows, 2F], dh2s, dh1s [rows, Hs], s (a contiguous copy of the
 * caller's, so that no product depends on its stride) [rows, F]: 6P + 7F
 * + 2Hs a row (the backward
 * reuses the P-wide slots as their contents die: var_backward says how),
 * and the folds (a few F x P values). */
#include "cuda/check.h"
#include "cuda/vsn_device.cuh"

extern "C" {
#include "cuda/grouped_dw_cuda.h"
#include "cuda/layernorm_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/vsn_backward_fused_cuda.h"
#include "cuda/vsn_cuda.h"
#include "cuda/vsn_fold_cuda.h"
#include "cuda/vsn_forward_fused_cuda.h"
#include "cuda/vsn_train_table_cuda.h"
#include "model/vsn.h"
}

#define VSN_THREADS 256

typedef st_vsn_weights_f32 vsn_w;
typedef st_vsn_grads_f32 vsn_g;

/* ---- layouts ------------------------------------------------------------ */

/* Device pointers into `saved`: the selection GRN's part of vsn.c's
 * layout, in its order and sizes. */
struct vsn_saved {
    float *sel_h1, *sel_h2, *sel_glu, *sel_x, *sel_mean, *sel_rstd, *alpha;
    size_t total;
};

static vsn_saved saved_at(float *base, int rows, int F, int Dv) {
    size_t R = (size_t)rows, Hs = (size_t)hidden_sel(F, Dv), o = 0;
    vsn_saved l;
#define VSN_TAKE(field, n) (l.field = base ? base + o : NULL, o += (n))
    VSN_TAKE(sel_h1, R * Hs);
    VSN_TAKE(sel_h2, R * Hs);
    VSN_TAKE(sel_glu, R * 2 * F);
    VSN_TAKE(sel_x, R * F);
    VSN_TAKE(sel_mean, R);
    VSN_TAKE(sel_rstd, R);
    VSN_TAKE(alpha, R * F);
    l.total = o;
    return l;
}

/* The per-variable GRNs' activations, made by var_forward (in `work`):
 * h1 = ELU(fc1 e), h2 = fc2 h1 less fc2's bias (folded into the glu's),
 * glu = [g1; sigma(g2)] [rows, 2P], x = e +
 * g1 sigma(g2) (the norms' input) and its statistics mean, rstd [rows, F]. */
struct vsn_var {
    float *h1, *h2, *glu, *x, *mean, *rstd;
};

/* Device pointers into `work`: dx (the per-variable skips' gradient, made
 * by the backward) and the GRNs' activations (their slots are reused by
 * the backward), the small per-row buffers, then the folded weights and
 * the backward's reductions (cuda/vsn_fold_cuda.h; sizes F and Dv only). */
struct vsn_work {
    float *dx;
    vsn_var a;
    float *dlog, *dxs, *dgls, *dh2s, *dh1s, *s;
    st_vsn_fold fo;
    st_vsn_fold_grads fr;
    size_t total;
};

static vsn_work work_at(float *base, int rows, int F, int Dv) {
    size_t R = (size_t)rows, P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv), o = 0;
    vsn_work l;
    VSN_TAKE(dx, R * P);
    VSN_TAKE(a.h1, R * P);
    VSN_TAKE(a.h2, R * P);
    VSN_TAKE(a.glu, R * 2 * P);
    VSN_TAKE(a.x, R * P);
    VSN_TAKE(a.mean, R * F);
    VSN_TAKE(a.rstd, R * F);
    VSN_TAKE(dlog, R * F);
    VSN_TAKE(dxs, R * F);
    VSN_TAKE(dgls, R * 2 * F);
    VSN_TAKE(dh2s, R * Hs);
    VSN_TAKE(dh1s, R * Hs);
    VSN_TAKE(s, R * F);
#undef VSN_TAKE
    l.fo = st_vsn_fold_at(base ? base + o : NULL, F, Dv);
    o += st_vsn_fold_count(F, Dv);
    l.fr = st_vsn_fold_grads_at(base ? base + o : NULL, F, Dv);
    o += st_vsn_fold_grads_count(F, Dv);
    l.total = o;
    return l;
}

extern "C" size_t st_cuda_vsn_saved_count(int rows, int F, int C, int Dv) {
    (void)C;
    if (rows <= 0 || F <= 0 || Dv <= 0) return 0;
    return saved_at(NULL, rows, F, Dv).total;
}

extern "C" size_t st_cuda_vsn_work_count(int rows, int F, int C, int Dv) {
    (void)C;
    if (rows <= 0 || F <= 0 || Dv <= 0) return 0;
    return work_at(NULL, rows, F, Dv).total;
}

/* Launches kernel over n elements (none when n == 0) with grid-stride loops. */
template <typename... Params, typename... Args>
static int launch_n(size_t n, cudaStream_t st, void (*kernel)(Params...), Args... args) {
    if (n == 0) return ST_OK;
    size_t blocks = (n + VSN_THREADS - 1) / VSN_THREADS;
    if (blocks > (1u << 30)) blocks = 1u << 30;
    kernel<<<(unsigned)blocks, VSN_THREADS, 0, st>>>(args...);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* ---- generic kernels ---------------------------------------------------- */

/* out[r, 0:n] = x[r, 0:n] (out contiguous). */
static __global__ void copy_rows_kernel(int rows, int n, const float *x, int x_stride, float *out) {
    GRID_LOOP(idx, (size_t)rows * n) out[idx] = x[idx / (size_t)n * (size_t)x_stride + idx % (size_t)n];
}

/* out[r, 0:n] = x[row[r], 0:n] (out contiguous): the same copy through a
 * row index (a window's rows named by their feature rows). */
static __global__ void gather_rows_kernel(int rows, int n, const float *x, int x_stride, const int *row, float *out) {
    GRID_LOOP(idx, (size_t)rows * n) out[idx] = x[(size_t)row[idx / (size_t)n] * (size_t)x_stride + idx % (size_t)n];
}

/* x = ELU(x) over n contiguous values. */
static __global__ void elu_kernel(size_t n, float *x) { GRID_LOOP(i, n) x[i] = dev_elu(x[i]); }

/* h[r, i] = ELU(h[r, i] + p[r / per, i]) over rows x n contiguous values:
 * a product formed once per `per` rows (a window's context term) added to
 * each of them, then the ELU. */
static __global__ void add_rows_elu_kernel(int rows, int n, int per, const float *p, float *h) {
    GRID_LOOP(i, (size_t)rows * n) {
        size_t r = i / (size_t)n;
        h[i] = dev_elu(h[i] + p[r / (size_t)per * (size_t)n + i % (size_t)n]);
    }
}

/* out[r, i] = xhat[r, i] dy[r, i]: the LayerNorm weight gradient's per-row
 * terms (their column sums are the gradient). */
static __global__ void ln_prod_kernel(int rows, int n, const float *x, int x_stride, const float *mean,
                                      const float *rstd, const float *dy, int dy_stride, float *out, int out_stride) {
    GRID_LOOP(idx, (size_t)rows * n) {
        size_t r = idx / (size_t)n, i = idx % (size_t)n;
        out[r * (size_t)out_stride + i] =
            xhat_of(x[r * (size_t)x_stride + i], mean[r], rstd[r]) * dy[r * (size_t)dy_stride + i];
    }
}

/* ---- the selection GRN's own steps -------------------------------------- */

/* d g1 = dx sg, d g2 = dx g1 sg (1 - sg), with gl holding [g1; sg]. */
static __global__ void sel_gate_bwd_kernel(int rows, int F, const float *gl, const float *dx, float *dgl) {
    GRID_LOOP(idx, (size_t)rows * F) {
        size_t r = idx / (size_t)F, i = idx % (size_t)F;
        const float *g = gl + r * 2 * (size_t)F;
        float sg = g[F + i], d = dx[idx];
        dgl[r * 2 * (size_t)F + i] = d * sg;
        dgl[r * 2 * (size_t)F + F + i] = d * g[i] * sg * (1.0f - sg);
    }
}

/* ---- the per-variable GRNs ---------------------------------------------- */

/* The F stacked GRNs' products are strided-batched cuBLAS calls over the
 * variables (variable j's Dv columns of a [rows, F*Dv] buffer are the
 * batch member j: leading dimension F*Dv, batch stride Dv); what lies
 * between them is element-wise, or a reduction over one variable's Dv
 * values, done by a warp per (row, variable) whose lanes walk k. Every
 * buffer is read and written row-contiguously (coalesced). */

/* Launches kernel with a warp per item, n items. */
template <typename... Params, typename... Args>
static int launch_warps(size_t n, cudaStream_t st, void (*kernel)(Params...), Args... args) {
    if (n == 0) return ST_OK;
    size_t per_block = VSN_THREADS / 32, blocks = (n + per_block - 1) / per_block;
    if (blocks > (1u << 30)) blocks = 1u << 30;
    kernel<<<(unsigned)blocks, VSN_THREADS, 0, st>>>(args...);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* The largest of v over the 32 lanes of a warp, every lane getting it. */
__device__ static inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The selection GRN's steps after its products, per row:
 *   the gate      x += g1 sigma(g2), gl rows [g1 (F); g2 (F)], g2 becoming
 *                 sigma(g2) and x kept for the norm's backward;
 *   the norm      logits = LN(x) (sel_norm_w, _b; its mean and rstd saved);
 *   the softmax   alpha = softmax(logits), max subtracted, the sum in
 *                 double, into the saved copy and (when given) the
 *                 caller's strided output.
 * The expressions of vsn.c's (double statistics, double exp and division);
 * the sums' order is the lanes' then the butterfly's. A NaN in the logits
 * reaches every alpha of its row through the sum (fmaxf skips it in the
 * max, exp does not).
 *
 * For F <= SEL_TAIL_G * SEL_TAIL_NV (64) a group of SEL_TAIL_G = 8 lanes
 * takes a row (4 rows a warp), lane q the values q, q + 8, ... held in
 * registers, each exp computed once, the butterflies 3 levels for the 4
 * rows at once (sel_tail_group_kernel; the logits stay in registers, no
 * longer stored to work: nothing read them). Before, a warp a row (the kernel
 * below, kept for larger F) walked F = 40 in 2 rounds with 8 of 32 lanes
 * in the second, computed every exp twice and re-read x and the logits
 * after storing them: ~226 FP64 warp instructions a row against ~70 now,
 * 433 us a call at 262,144 rows (H200; bench/notes-small-kernels.md).
 * The two kernels sum in other orders: the statistics may differ in the
 * last bit between them. (Three kernels before change 20, the norm and
 * the softmax a thread a row reading F-strided rows.) */
enum { SEL_TAIL_G = 8, SEL_TAIL_NV = 8 };

/* The largest (the sum) of v over the G lanes of an aligned group, every lane getting it. */
template <int G> __device__ static inline float group_max(float v) {
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <int G> __device__ static inline double group_sum(double v) {
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __global__ void sel_tail_group_kernel(int rows, int F, const float *ln_w, const float *ln_b, float *gl,
                                             float *x, float *mean, float *rstd, float *alpha_saved, float *alpha,
                                             int alpha_stride) {
    constexpr int G = SEL_TAIL_G, NV = SEL_TAIL_NV, PER_WARP = 32 / G;
    const int lane = threadIdx.x % 32, q = lane % G;
    const size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    /* the loop is the warp's (every lane runs the shuffles); a group past the last row idles in it */
    for (size_t r0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * PER_WARP; r0 < (size_t)rows;
         r0 += warps * PER_WARP) {
        const bool live = r0 + lane / G < (size_t)rows;
        const size_t r = live ? r0 + lane / G : r0;
        float *g = gl + r * 2 * (size_t)F, *xr = x + r * (size_t)F;
        float xv[NV], g1[NV], g2[NV];
        /* every load before any store: g and x could alias for all the compiler knows, so
         * interleaved they would wait out a memory latency each (3 NV in a row) */
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int i = q + k * G;
            xv[k] = 0.0f, g1[k] = 0.0f, g2[k] = 0.0f;
            if (live && i < F) xv[k] = xr[i], g1[k] = g[i], g2[k] = g[F + i];
        }
        double s = 0;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int i = q + k * G;
            if (live && i < F) {
                const float sg = dev_sigmoid(g2[k]);
                g[F + i] = sg;
                const float xi = xv[k] + g1[k] * sg;
                xr[i] = xi;
                xv[k] = xi;
                s += xi;
            }
        }
        const double mu = group_sum<G>(s) / F;
        double v = 0;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (live && q + k * G < F) v += ((double)xv[k] - mu) * ((double)xv[k] - mu);
        const double rs = 1.0 / sqrt(group_sum<G>(v) / F + VSN_EPS);
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int i = q + k * G;
            if (live && i < F) {
                const float y = (float)(((double)xv[k] - mu) * rs) * ln_w[i] + ln_b[i];
                xv[k] = y; /* x is dead: the slot holds the logit */
                m = fmaxf(m, y);
            }
        }
        m = group_max<G>(m);
        double ev[NV], e = 0;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            ev[k] = 0;
            if (live && q + k * G < F) {
                ev[k] = exp((double)xv[k] - m);
                e += ev[k];
            }
        }
        const double sum = group_sum<G>(e);
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int i = q + k * G;
            if (live && i < F) {
                const float a = (float)(ev[k] / sum);
                alpha_saved[r * (size_t)F + i] = a;
                if (alpha) alpha[r * (size_t)alpha_stride + i] = a;
            }
        }
        if (live && q == 0) mean[r] = (float)mu, rstd[r] = (float)rs;
    }
}

/* The same a warp a row (lane l over l, l + 32, ...; the row sums by
 * warp_sum, the same in every lane; a lane re-reads only what it wrote),
 * for F > 64. */
static __global__ void sel_tail_kernel(int rows, int F, const float *ln_w, const float *ln_b, float *gl, float *x,
                                       float *logits, float *mean, float *rstd, float *alpha_saved, float *alpha,
                                       int alpha_stride) {
    const int lane = threadIdx.x % 32;
    WARP_LOOP(r, (size_t)rows) {
        float *g = gl + r * 2 * (size_t)F, *xr = x + r * (size_t)F, *l = logits + r * (size_t)F;
        double s = 0;
        for (int i = lane; i < F; i += 32) {
            const float sg = dev_sigmoid(g[F + i]);
            g[F + i] = sg;
            const float xi = xr[i] + g[i] * sg;
            xr[i] = xi;
            s += xi;
        }
        const double mu = warp_sum(s) / F;
        double v = 0;
        for (int i = lane; i < F; i += 32)
            v += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        const double rs = 1.0 / sqrt(warp_sum(v) / F + VSN_EPS);
        float m = -INFINITY;
        for (int i = lane; i < F; i += 32) {
            const float y = (float)(((double)xr[i] - mu) * rs) * ln_w[i] + ln_b[i];
            l[i] = y;
            m = fmaxf(m, y);
        }
        m = warp_max(m);
        double e = 0;
        for (int i = lane; i < F; i += 32)
            e += exp((double)l[i] - m);
        const double sum = warp_sum(e);
        for (int i = lane; i < F; i += 32) {
            const float a = (float)(exp((double)l[i] - m) / sum);
            alpha_saved[r * (size_t)F + i] = a;
            if (alpha) alpha[r * (size_t)alpha_stride + i] = a;
        }
        if (lane == 0) mean[r] = (float)mu, rstd[r] = (float)rs;
    }
}

/* The selection tail over rows: 8-lane groups where F fits them, else a warp a row
 * (which alone stores the logits, into `logits`: scratch it re-reads). */
static int sel_tail(int rows, int F, const float *ln_w, const float *ln_b, float *gl, float *x, float *logits,
                    float *mean, float *rstd, float *alpha_saved, float *alpha, int alpha_stride, cudaStream_t st) {
    const size_t R = (size_t)rows, per_warp = 32 / SEL_TAIL_G;
    if (F <= SEL_TAIL_G * SEL_TAIL_NV)
        return launch_warps((R + per_warp - 1) / per_warp, st, sel_tail_group_kernel, rows, F, ln_w, ln_b, gl, x, mean,
                            rstd, alpha_saved, alpha, alpha_stride);
    return launch_warps(R, st, sel_tail_kernel, rows, F, ln_w, ln_b, gl, x, logits, mean, rstd, alpha_saved, alpha,
                        alpha_stride);
}

/* ---- lane groups: the gate kernels for Dv % 4 == 0, Dv <= 32 ------------- */

/* A warp per item (var_gate_kernel and its backward below) leaves 32 - Dv
 * lanes idle for Dv < 32, and every item costs two 5-level reductions of
 * doubles and a double sqrt behind its loads. Where Dv % 4 == 0 and
 * Dv <= 32 an item is a group of G lanes instead (G the power of two >=
 * Dv/4), lane q of the group holding values 4q..4q+3 as a float4 (the
 * lanes with 4q >= Dv idle: Dv = 12, 24...), so that a warp works on 32/G
 * items at once and each reduction is log2 G shuffle levels for all of
 * them. The items are (row, variable) pairs in order, it = r F + j, so an
 * item's values start at it Dv (x, dE) and it 2Dv (glu, g2 Dv later): the
 * warp's accesses are contiguous, and 16-byte aligned where `work` is (P
 * and the slots' offsets in it are multiples of 4 floats; the launchers
 * check the pointers, and read the weights and dv, whose offsets and
 * strides are the callers', as scalars where they are not aligned). A lane
 * sums its 4 values in double, then the group shuffles: another order
 * than the warp-per-item kernels' (and the forward's gate_combine_kernel:
 * the statistics may differ from its in the last bit), the same meanings
 * of every buffer. st_cuda_vsn_set_gate_lanes(0) keeps the warp-per-item
 * kernels, the path of every other Dv. */

static int vsn_gate_lanes = 1;
extern "C" void st_cuda_vsn_set_gate_lanes(int on) { vsn_gate_lanes = on != 0; }

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* 4 consecutive floats at p: one load where vec (p 16-byte aligned), else four. */
__device__ static inline float4 ld4(const float *p, bool vec) {
    if (vec) return *(const float4 *)p;
    return make_float4(p[0], p[1], p[2], p[3]);
}


extern "C" int st_cuda_vsn_gate_group(int rows, int F, int Dv) {
    if (!vsn_gate_lanes || rows <= 0 || F <= 0 || Dv <= 0 || Dv % 4 != 0 || Dv > 32 ||
        (size_t)rows * F > 0x7fffffffu) /* the kernels divide item numbers in 32 bits */
        return 0;
    int G = 1;
    while (4 * G < Dv)
        G *= 2;
    return G;
}

/* The lanes a group of the lane-group kernels, or 0 where they do not
 * apply (st_cuda_vsn_gate_group, or a's slots and dE not 16-byte aligned). */
static int gate_group(int rows, int F, int Dv, const vsn_var &a, const float *dE) {
    if (!aligned16(a.glu) || !aligned16(a.x) || (dE && !aligned16(dE))) return 0;
    return st_cuda_vsn_gate_group(rows, F, Dv);
}

/* var_gate_kernel's work (its comment) in lane groups: the glu's bias, the
 * gate x = e + g1 sigma(g2), sigma(g2) into gl, and x's statistics. Each
 * lane has U items (32/G apart) in flight; vw: the weights aligned. */
template <int G, int U>
static __global__ void var_gate_lanes_kernel(int rows, int F, int Dv, const float *s, int s_stride, const float *ew,
                                             const float *eb, const float *glu_b, bool vw, vsn_var a) {
    constexpr int IPW = 32 / G; /* items a warp for each u */
    const size_t n = (size_t)rows * F;
    const int lane = threadIdx.x & 31, q = lane % G, k = 4 * q;
    const bool on = k < Dv;
    const size_t step = (size_t)gridDim.x * blockDim.x / 32 * (IPW * U);
    for (size_t base = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * (IPW * U); base < n; base += step) {
        float xv[U][4];
        double sum[U], var[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t it = base + u * IPW + lane / G;
            sum[u] = 0;
#pragma unroll
            for (int c = 0; c < 4; c++)
                xv[u][c] = 0;
            if (it >= n || !on) continue; /* the same for the group, or an idle lane */
            const unsigned r = (unsigned)it / (unsigned)F, j = (unsigned)it % (unsigned)F;
            const size_t col = (size_t)j * Dv + k;
            float4 *gl = (float4 *)(a.glu + it * 2 * Dv + k);
            const float4 g1v = gl[0], g2v = gl[Dv / 4];
            const float4 b1 = ld4(glu_b + 2 * (size_t)j * Dv + k, vw),
                         b2 = ld4(glu_b + 2 * (size_t)j * Dv + Dv + k, vw);
            const float4 wv = ld4(ew + col, vw), bv = ld4(eb + col, vw);
            const float sj = s[(size_t)r * s_stride + j];
            const float g1i[4] = {g1v.x, g1v.y, g1v.z, g1v.w}, g2i[4] = {g2v.x, g2v.y, g2v.z, g2v.w};
            const float b1i[4] = {b1.x, b1.y, b1.z, b1.w}, b2i[4] = {b2.x, b2.y, b2.z, b2.w};
            const float wi[4] = {wv.x, wv.y, wv.z, wv.w}, bi[4] = {bv.x, bv.y, bv.z, bv.w};
            float g1o[4], sgo[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                g1o[c] = g1i[c] + b1i[c];
                sgo[c] = dev_sigmoid(g2i[c] + b2i[c]);
                xv[u][c] = (sj * wi[c] + bi[c]) + g1o[c] * sgo[c];
                sum[u] += xv[u][c];
            }
            gl[0] = make_float4(g1o[0], g1o[1], g1o[2], g1o[3]);
            gl[Dv / 4] = make_float4(sgo[0], sgo[1], sgo[2], sgo[3]);
            *(float4 *)(a.x + it * Dv + k) = make_float4(xv[u][0], xv[u][1], xv[u][2], xv[u][3]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            sum[u] = group_sum<G>(sum[u]) / Dv, var[u] = 0;
#pragma unroll
            for (int c = 0; c < 4; c++)
                if (on) var[u] += ((double)xv[u][c] - sum[u]) * ((double)xv[u][c] - sum[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            var[u] = group_sum<G>(var[u]);
            const size_t it = base + u * IPW + lane / G;
            if (q == 0 && it < n) {
                a.mean[it] = (float)sum[u];
                a.rstd[it] = (float)(1.0 / sqrt(var[u] / Dv + VSN_EPS));
            }
        }
    }
}

/* var_gate_bwd_kernel's work (its comment, in place as it is) in lane
 * groups: from dt = alpha_j dv, dE = dx (LayerNorm backward), glu -> dgl,
 * x -> pw. vw: ln_w aligned; vd: dv's rows (pointer and stride) aligned. */
template <int G, int U>
static __global__ void var_gate_bwd_lanes_kernel(int rows, int F, int Dv, const float *ln_w, bool vw, vsn_var va,
                                                 const float *alpha, const float *dv, int dv_stride, bool vd,
                                                 float *dE) {
    constexpr int IPW = 32 / G;
    const size_t n = (size_t)rows * F;
    const int lane = threadIdx.x & 31, q = lane % G, k = 4 * q;
    const bool on = k < Dv;
    const size_t step = (size_t)gridDim.x * blockDim.x / 32 * (IPW * U);
    for (size_t base = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * (IPW * U); base < n; base += step) {
        float xh[U][4], pa[U][4], g1[U][4], sgt[U][4], rsv[U];
        double gk[U][4], sg[U], sgx[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t it = base + u * IPW + lane / G;
            sg[u] = 0, sgx[u] = 0, rsv[u] = 0;
#pragma unroll
            for (int c = 0; c < 4; c++)
                xh[u][c] = 0, pa[u][c] = 0, g1[u][c] = 0, sgt[u][c] = 0, gk[u][c] = 0;
            if (it >= n || !on) continue; /* the same for the group, or an idle lane */
            const unsigned r = (unsigned)it / (unsigned)F, j = (unsigned)it % (unsigned)F;
            const float4 xv = *(const float4 *)(va.x + it * Dv + k);
            const float4 *gl = (const float4 *)(va.glu + it * 2 * Dv + k);
            const float4 g1v = gl[0], sgv = gl[Dv / 4];
            const float4 dvv = ld4(dv + (size_t)r * dv_stride + k, vd), lw = ld4(ln_w + (size_t)j * Dv + k, vw);
            const float mean = va.mean[it], rs = rsv[u] = va.rstd[it];
            const double a = alpha[it];
            const float xi[4] = {xv.x, xv.y, xv.z, xv.w}, di[4] = {dvv.x, dvv.y, dvv.z, dvv.w};
            const float wi[4] = {lw.x, lw.y, lw.z, lw.w};
            g1[u][0] = g1v.x, g1[u][1] = g1v.y, g1[u][2] = g1v.z, g1[u][3] = g1v.w;
            sgt[u][0] = sgv.x, sgt[u][1] = sgv.y, sgt[u][2] = sgv.z, sgt[u][3] = sgv.w;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const double ad = a * di[c];
                gk[u][c] = ad * wi[c];
                pa[u][c] = (float)ad;
                xh[u][c] = xhat_of(xi[c], mean, rs);
                sg[u] += gk[u][c];
                sgx[u] += gk[u][c] * xh[u][c];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            sg[u] = group_sum<G>(sg[u]) / Dv;
            sgx[u] = group_sum<G>(sgx[u]) / Dv;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t it = base + u * IPW + lane / G;
            if (it >= n || !on) continue;
            const float rs = rsv[u];
            float dx[4], d1[4], d2[4], pw[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                dx[c] = (float)((double)rs * (gk[u][c] - sg[u] - xh[u][c] * sgx[u]));
                d1[c] = dx[c] * sgt[u][c];
                d2[c] = dx[c] * g1[u][c] * sgt[u][c] * (1.0f - sgt[u][c]);
                pw[c] = pa[u][c] * xh[u][c];
            }
            float4 *gl = (float4 *)(va.glu + it * 2 * Dv + k);
            *(float4 *)(dE + it * Dv + k) = make_float4(dx[0], dx[1], dx[2], dx[3]);
            gl[0] = make_float4(d1[0], d1[1], d1[2], d1[3]);
            gl[Dv / 4] = make_float4(d2[0], d2[1], d2[2], d2[3]);
            *(float4 *)(va.x + it * Dv + k) = make_float4(pw[0], pw[1], pw[2], pw[3]);
        }
    }
}

/* dlog_kernel's work (its comment) in lane groups, a warp per row: the
 * 32/G groups take 32/G variables at a time (U such passes in flight),
 * each summing dv . t_j over its lanes; each group adds alpha_j dalpha_j
 * of its own variables, then the warp the groups' sums. vw: ln_w and ln_b
 * aligned; vd: dv's rows aligned. */
template <int G, int U>
static __global__ void __launch_bounds__(VSN_THREADS, 4)
    dlog_lanes_kernel(int rows, int F, int Dv, const float *ln_w, const float *ln_b, bool vw, vsn_var va,
                      const float *alpha, const float *dv, int dv_stride, bool vd, const float *dalpha,
                      int dalpha_stride, float *dlog) {
    constexpr int VPW = 32 / G; /* variables a warp for each u */
    const size_t P = (size_t)F * Dv;
    const int lane = threadIdx.x & 31, q = lane % G, k = 4 * q, grp = lane / G;
    const bool on = k < Dv;
    WARP_LOOP(r, (size_t)rows) {
        const float *a = alpha + r * F, *xr = va.x + r * P, *mr = va.mean + r * F, *rr = va.rstd + r * F;
        float *dl = dlog + r * F;
        float d[4] = {0, 0, 0, 0};
        if (on) {
            const float4 dvv = ld4(dv + r * (size_t)dv_stride + k, vd);
            d[0] = dvv.x, d[1] = dvv.y, d[2] = dvv.z, d[3] = dvv.w;
        }
        double dot = 0;
        for (int j0 = 0; j0 < F; j0 += VPW * U) {
            float4 xv[U], lw[U], lb[U];
            float mu[U], rs[U], aj[U], daj[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = j0 + u * VPW + grp;
                xv[u] = lw[u] = lb[u] = make_float4(0, 0, 0, 0), mu[u] = rs[u] = aj[u] = daj[u] = 0;
                if (j >= F) continue;
                aj[u] = a[j], daj[u] = dalpha ? dalpha[r * (size_t)dalpha_stride + j] : 0.0f;
                if (!on) continue;
                xv[u] = *(const float4 *)(xr + (size_t)j * Dv + k);
                lw[u] = ld4(ln_w + (size_t)j * Dv + k, vw), lb[u] = ld4(ln_b + (size_t)j * Dv + k, vw);
                mu[u] = mr[j], rs[u] = rr[j];
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = j0 + u * VPW + grp;
                const float xi[4] = {xv[u].x, xv[u].y, xv[u].z, xv[u].w};
                const float wi[4] = {lw[u].x, lw[u].y, lw[u].z, lw[u].w}, bi[4] = {lb[u].x, lb[u].y, lb[u].z, lb[u].w};
                double da = 0;
#pragma unroll
                for (int c = 0; c < 4; c++)
                    if (on) da += (double)d[c] * (double)(xhat_of(xi[c], mu[u], rs[u]) * wi[c] + bi[c]);
                da = group_sum<G>(da);
                if (j >= F) continue;
                da += dalpha ? (double)daj[u] : 0.0;
                if (q == 0) dl[j] = (float)da;
                dot += (double)aj[u] * da;
            }
        }
        /* the groups' sums (each group's lanes hold the same) */
#pragma unroll
        for (int o = G; o < 32; o <<= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, o);
        __syncwarp();
        for (int j = lane; j < F; j += 32)
            dl[j] = (float)((double)a[j] * ((double)dl[j] - dot));
        __syncwarp();
    }
}

/* Launches kernel<G, U> for the group width G (1, 2, 4 or 8). */
#define VSN_LANES_LAUNCH(kernel, U, items, ...)                                                                        \
    switch (G) {                                                                                                       \
    case 1: return launch_warps((items), st, kernel<1, U>, __VA_ARGS__);                                               \
    case 2: return launch_warps((items), st, kernel<2, U>, __VA_ARGS__);                                               \
    case 4: return launch_warps((items), st, kernel<4, U>, __VA_ARGS__);                                               \
    default: return launch_warps((items), st, kernel<8, U>, __VA_ARGS__);                                              \
    }

/* Items in flight a lane in the lane-group gate kernels. */
#define VAR_GATE_LANES_U 2
#define VAR_GATE_BWD_LANES_U 1
#define DLOG_LANES_U 2

/* Warp iterations for n items, ipl a lane at a time in groups of G. */
static size_t lane_warps(size_t n, int G, int ipl) {
    size_t per = (size_t)(32 / G) * ipl;
    return (n + per - 1) / per;
}

/* A warp per VAR_GATE_ITEMS (row r, variable j) items (j fastest): the
 * glu's bias, the gate and the identity skip, x = e + g1 sigma(g2) with
 * e = s_j ew_j + eb_j (made here: E is never stored), gl's second half
 * becoming sigma(g2), and the LayerNorm statistics of x (double sums, the
 * variance from the registers). Lane l holds k = l + 32 m, m < KM (Dv <=
 * 32 KM). The items' loads are issued before any shuffle and their sums
 * interleaved (one item per warp ran at 1.3 TB/s, 4 at 1.5: bench/NOTES.md
 * change 7). */
#define VAR_GATE_ITEMS 4
template <int KM>
static __global__ void var_gate_kernel(int rows, int F, int Dv, const float *s, int s_stride, const float *ew,
                                       const float *eb, const float *glu_b, vsn_var a) {
    const size_t P = (size_t)F * Dv, n = (size_t)rows * F;
    const int lane = threadIdx.x & 31;
    const size_t groups = (n + VAR_GATE_ITEMS - 1) / VAR_GATE_ITEMS;
    for (size_t grp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; grp < groups;
         grp += (size_t)gridDim.x * blockDim.x / 32) {
        float xv[VAR_GATE_ITEMS][KM];
        double sum[VAR_GATE_ITEMS], var[VAR_GATE_ITEMS];
#pragma unroll
        for (int u = 0; u < VAR_GATE_ITEMS; u++) {
            size_t it = grp * VAR_GATE_ITEMS + u;
            sum[u] = 0;
            if (it >= n) continue; /* the same for the whole warp */
            size_t r = it / (size_t)F, j = it % (size_t)F, col = j * (size_t)Dv;
            float *gl = a.glu + r * 2 * P + 2 * col, *x = a.x + r * P + col;
            const float sj = s[r * (size_t)s_stride + j], *gb = glu_b + 2 * col;
#pragma unroll
            for (int m = 0; m < KM; m++) {
                int k = lane + 32 * m;
                xv[u][m] = 0;
                if (k >= Dv) continue;
                float g1 = gl[k] + gb[k], sg = dev_sigmoid(gl[Dv + k] + gb[Dv + k]);
                gl[k] = g1;
                gl[Dv + k] = sg;
                xv[u][m] = (sj * ew[col + k] + eb[col + k]) + g1 * sg;
                x[k] = xv[u][m];
                sum[u] += xv[u][m];
            }
        }
#pragma unroll
        for (int u = 0; u < VAR_GATE_ITEMS; u++) {
            sum[u] = warp_sum(sum[u]) / Dv, var[u] = 0;
#pragma unroll
            for (int m = 0; m < KM; m++)
                if (lane + 32 * m < Dv) var[u] += ((double)xv[u][m] - sum[u]) * ((double)xv[u][m] - sum[u]);
        }
#pragma unroll
        for (int u = 0; u < VAR_GATE_ITEMS; u++) {
            var[u] = warp_sum(var[u]);
            size_t it = grp * VAR_GATE_ITEMS + u;
            if (lane == 0 && it < n) {
                a.mean[it] = (float)sum[u];
                a.rstd[it] = (float)(1.0 / sqrt(var[u] / Dv + VSN_EPS));
            }
        }
    }
}

/* var_gate_kernel at the register width Dv needs (Dv is at most
 * ST_CUDA_VSN_MAX_DV = 32 * 8 on the GPU: vsn_check_sizes). */
static int var_gate(int rows, int F, int Dv, const float *s, int s_stride, const vsn_w &w, const float *glu_b,
                    const vsn_var &a, cudaStream_t st) {
    const int G = gate_group(rows, F, Dv, a, NULL);
    if (G) {
        const bool vw = aligned16(w.embed_w) && aligned16(w.embed_b) && aligned16(glu_b);
        VSN_LANES_LAUNCH(var_gate_lanes_kernel, VAR_GATE_LANES_U, lane_warps((size_t)rows * F, G, VAR_GATE_LANES_U),
                         rows, F, Dv, s, s_stride, w.embed_w, w.embed_b, glu_b, vw, a);
    }
    size_t items = ((size_t)rows * F + VAR_GATE_ITEMS - 1) / VAR_GATE_ITEMS;
    if (Dv <= 32)
        return launch_warps(items, st, var_gate_kernel<1>, rows, F, Dv, s, s_stride, w.embed_w, w.embed_b, glu_b, a);
    if (Dv <= 64)
        return launch_warps(items, st, var_gate_kernel<2>, rows, F, Dv, s, s_stride, w.embed_w, w.embed_b, glu_b, a);
    if (Dv <= 128)
        return launch_warps(items, st, var_gate_kernel<4>, rows, F, Dv, s, s_stride, w.embed_w, w.embed_b, glu_b, a);
    return launch_warps(items, st, var_gate_kernel<8>, rows, F, Dv, s, s_stride, w.embed_w, w.embed_b, glu_b, a);
}

/* The F GRNs' products from s into a: h1 = ELU(fc1 e) = ELU(s_j U_j + V_j)
 * (the fold), h2 = fc2 h1 without its bias (folded into the glu's: fo.Vg),
 * gl = glu h2 (without that bias). */
static int var_products(int rows, int F, int Dv, const float *s, int s_stride, const vsn_w &w, const st_vsn_fold &fo,
                        const vsn_var &a, cudaStream_t st) {
    const int P = F * Dv;
    const long long DD = (long long)Dv * Dv;
    ST_TRY(st_cuda_vsn_rank1(rows, F, Dv, s, s_stride, fo.U, fo.V, 1, a.h1, P, st));
    ST_TRY(st_cuda_gemm_batched(0, 1, rows, Dv, Dv, 1.0f, a.h1, P, Dv, w.var_fc2_w, Dv, DD, 0.0f, a.h2, P, Dv, F, st));
    ST_TRY(st_cuda_gemm_batched(0, 1, rows, 2 * Dv, Dv, 1.0f, a.h2, P, Dv, w.var_glu_w, Dv, 2 * DD, 0.0f, a.glu, 2 * P,
                                2 * Dv, F, st));
    return ST_OK;
}

/* The backward's recomputation of the GRNs: the products, then
 * var_gate_kernel (the glu's bias, the gate, x and its statistics, all
 * kept in a for the backward). */
static int var_forward(int rows, int F, int Dv, const float *s, int s_stride, const vsn_w &w, const st_vsn_fold &fo,
                       const vsn_var &a, cudaStream_t st) {
    ST_TRY(var_products(rows, F, Dv, s, s_stride, w, fo, a, st));
    ST_TRY(var_gate(rows, F, Dv, s, s_stride, w, fo.Vg, a, st));
    return ST_OK;
}

/* The forward's end, a warp per row: for each variable j the gate and
 * statistics exactly as var_gate_kernel forms them (the same expressions:
 * the same bits), t_j = LN_j(x), and v = sum_j alpha_j t_j summed in
 * variable order in double as the backward's dlog_kernel reads t. Nothing
 * but v is written: the backward recomputes gl, x and the statistics
 * (var_forward), so the forward keeps none of the [rows, F Dv] buffers
 * var_gate_kernel would write and the combine would read again. The
 * loads of GATE_COMBINE_ITEMS variables go out before their shuffles. */
#define GATE_COMBINE_ITEMS 4
template <int KM>
static __global__ void gate_combine_kernel(int rows, int F, int Dv, const float *s, vsn_w w, const float *glu_b,
                                           const float *glu, const float *alpha, float *v, int v_stride) {
    const size_t P = (size_t)F * Dv;
    const int lane = threadIdx.x & 31;
    WARP_LOOP(r, (size_t)rows) {
        double acc[KM];
#pragma unroll
        for (int m = 0; m < KM; m++)
            acc[m] = 0;
        const float *gl_row = glu + r * 2 * P;
        for (int j0 = 0; j0 < F; j0 += GATE_COMBINE_ITEMS) {
            float xv[GATE_COMBINE_ITEMS][KM];
            double sum[GATE_COMBINE_ITEMS], var[GATE_COMBINE_ITEMS];
#pragma unroll
            for (int u = 0; u < GATE_COMBINE_ITEMS; u++) {
                const int j = j0 + u;
                sum[u] = 0;
#pragma unroll
                for (int m = 0; m < KM; m++)
                    xv[u][m] = 0;
                if (j >= F) continue; /* the same for the whole warp */
                const size_t col = (size_t)j * Dv;
                const float *gl = gl_row + 2 * col, *gb = glu_b + 2 * col;
                const float sj = s[r * (size_t)F + j];
#pragma unroll
                for (int m = 0; m < KM; m++) {
                    const int k = lane + 32 * m;
                    if (k >= Dv) continue;
                    const float g1 = gl[k] + gb[k], sg = dev_sigmoid(gl[Dv + k] + gb[Dv + k]);
                    xv[u][m] = (sj * w.embed_w[col + k] + w.embed_b[col + k]) + g1 * sg;
                    sum[u] += xv[u][m];
                }
            }
#pragma unroll
            for (int u = 0; u < GATE_COMBINE_ITEMS; u++) {
                sum[u] = warp_sum(sum[u]) / Dv, var[u] = 0;
#pragma unroll
                for (int m = 0; m < KM; m++)
                    if (lane + 32 * m < Dv) var[u] += ((double)xv[u][m] - sum[u]) * ((double)xv[u][m] - sum[u]);
            }
#pragma unroll
            for (int u = 0; u < GATE_COMBINE_ITEMS; u++) {
                const int j = j0 + u;
                var[u] = warp_sum(var[u]);
                if (j >= F) continue;
                const float mean = (float)sum[u], rstd = (float)(1.0 / sqrt(var[u] / Dv + VSN_EPS));
                const double aj = (double)alpha[r * F + j];
                const size_t col = (size_t)j * Dv;
#pragma unroll
                for (int m = 0; m < KM; m++) {
                    const int k = lane + 32 * m;
                    if (k >= Dv) continue;
                    const float t = xhat_of(xv[u][m], mean, rstd) * w.var_ln_w[col + k] + w.var_ln_b[col + k];
                    acc[m] += aj * (double)t;
                }
            }
        }
#pragma unroll
        for (int m = 0; m < KM; m++)
            if (lane + 32 * m < Dv) v[r * (size_t)v_stride + lane + 32 * m] = (float)acc[m];
    }
}

/* gate_combine_kernel at the register width Dv needs (Dv <= 32 * 8). */
static int gate_combine(int rows, int F, int Dv, const float *s, const vsn_w &w, const float *glu_b, const vsn_var &a,
                        const float *alpha, float *v, int v_stride, cudaStream_t st) {
    const size_t n = (size_t)rows;
    if (Dv <= 32)
        return launch_warps(n, st, gate_combine_kernel<1>, rows, F, Dv, s, w, glu_b, (const float *)a.glu, alpha, v,
                            v_stride);
    if (Dv <= 64)
        return launch_warps(n, st, gate_combine_kernel<2>, rows, F, Dv, s, w, glu_b, (const float *)a.glu, alpha, v,
                            v_stride);
    if (Dv <= 128)
        return launch_warps(n, st, gate_combine_kernel<4>, rows, F, Dv, s, w, glu_b, (const float *)a.glu, alpha, v,
                            v_stride);
    return launch_warps(n, st, gate_combine_kernel<8>, rows, F, Dv, s, w, glu_b, (const float *)a.glu, alpha, v,
                        v_stride);
}

/* t_j[k] of row r from the LayerNorm input and statistics. */
__device__ static float var_t(const vsn_w &w, const vsn_var &a, size_t r, int F, int Dv, int j, int k) {
    const size_t P = (size_t)F * Dv, col = (size_t)j * Dv;
    float xh = xhat_of(a.x[r * P + col + k], a.mean[r * F + j], a.rstd[r * F + j]);
    return xh * w.var_ln_w[col + k] + w.var_ln_b[col + k];
}

/* A warp per row: dalpha_j = dv . t_j (+ the caller's dalpha), then the
 * softmax backward dlog_j = alpha_j (dalpha_j - sum_i alpha_i dalpha_i). */
static __global__ void dlog_kernel(int rows, int F, int Dv, vsn_w w, vsn_var va, const float *alpha, const float *dv,
                                   int dv_stride, const float *dalpha, int dalpha_stride, float *dlog) {
    const int lane = threadIdx.x & 31;
    WARP_LOOP(r, (size_t)rows) {
        const float *dvr = dv + r * (size_t)dv_stride, *a = alpha + r * F;
        float *dl = dlog + r * F;
        double dot = 0;
        for (int j = 0; j < F; j++) {
            double da = 0;
            for (int k = lane; k < Dv; k += 32)
                da += (double)dvr[k] * (double)var_t(w, va, r, F, Dv, j, k);
            da = warp_sum(da) + (dalpha ? (double)dalpha[r * (size_t)dalpha_stride + j] : 0.0);
            float daf = (float)da;
            if (lane == 0) dl[j] = daf;
            dot += (double)a[j] * da;
        }
        __syncwarp();
        for (int j = lane; j < F; j += 32)
            dl[j] = (float)((double)a[j] * ((double)dl[j] - dot));
        __syncwarp();
    }
}

/* dlog_kernel, or its lane-group form where it applies (a warp a row either way). */
static int dlog(int rows, int F, int Dv, const vsn_w &w, const vsn_var &a, const float *alpha, const float *dv,
                int dv_stride, const float *dalpha, int dalpha_stride, float *dl, cudaStream_t st) {
    const int G = gate_group(rows, F, Dv, a, NULL);
    if (G) {
        const bool vw = aligned16(w.var_ln_w) && aligned16(w.var_ln_b), vd = aligned16(dv) && dv_stride % 4 == 0;
        VSN_LANES_LAUNCH(dlog_lanes_kernel, DLOG_LANES_U, (size_t)rows, rows, F, Dv, w.var_ln_w, w.var_ln_b, vw, a,
                         alpha, dv, dv_stride, vd, dalpha, dalpha_stride, dl);
    }
    return launch_warps((size_t)rows, st, dlog_kernel, rows, F, Dv, w, a, alpha, dv, dv_stride, dalpha, dalpha_stride,
                        dl);
}

/* A warp per VAR_GATE_ITEMS (row r, variable j) items (j fastest; lane l
 * holds k = l + 32 m, m < KM, as var_gate_kernel): the backward of norm j
 * and the gate from dt_j = alpha_j dv: LayerNorm -> dx (written to dE: the
 * gradient of e_j through the identity skip), dgl = [dx sg;
 * dx g1 sg (1 - sg)], and pw = dt xhat (the norm weight's per-row terms).
 * In place: va.glu ([g1; sg]) becomes dgl and va.x becomes pw, each lane
 * reading its own values before it overwrites them. */
template <int KM>
static __global__ void var_gate_bwd_kernel(int rows, int F, int Dv, const float *ln_w, vsn_var va, const float *alpha,
                                           const float *dv, int dv_stride, float *dE) {
    const size_t P = (size_t)F * Dv, n = (size_t)rows * F;
    const int lane = threadIdx.x & 31;
    const size_t groups = (n + VAR_GATE_ITEMS - 1) / VAR_GATE_ITEMS;
    for (size_t grp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; grp < groups;
         grp += (size_t)gridDim.x * blockDim.x / 32) {
        float xh[VAR_GATE_ITEMS][KM];
        double gk[VAR_GATE_ITEMS][KM], sg[VAR_GATE_ITEMS], sgx[VAR_GATE_ITEMS];
#pragma unroll
        for (int u = 0; u < VAR_GATE_ITEMS; u++) {
            size_t it = grp * VAR_GATE_ITEMS + u;
            sg[u] = 0, sgx[u] = 0;
            if (it >= n) continue; /* the same for the whole warp */
            size_t r = it / (size_t)F, col = it % (size_t)F * (size_t)Dv;
            const float *dvr = dv + r * (size_t)dv_stride, *x = va.x + r * P + col;
            const float mean = va.mean[it], rs = va.rstd[it];
            const double a = alpha[it];
#pragma unroll
            for (int m = 0; m < KM; m++) {
                int k = lane + 32 * m;
                xh[u][m] = 0, gk[u][m] = 0;
                if (k >= Dv) continue;
                gk[u][m] = a * dvr[k] * ln_w[col + k];
                xh[u][m] = xhat_of(x[k], mean, rs);
                sg[u] += gk[u][m];
                sgx[u] += gk[u][m] * xh[u][m];
            }
        }
#pragma unroll
        for (int u = 0; u < VAR_GATE_ITEMS; u++) {
            sg[u] = warp_sum(sg[u]) / Dv;
            sgx[u] = warp_sum(sgx[u]) / Dv;
        }
#pragma unroll
        for (int u = 0; u < VAR_GATE_ITEMS; u++) {
            size_t it = grp * VAR_GATE_ITEMS + u;
            if (it >= n) continue;
            size_t r = it / (size_t)F, col = it % (size_t)F * (size_t)Dv;
            const float *dvr = dv + r * (size_t)dv_stride;
            float *x = va.x + r * P + col, *gl = va.glu + r * 2 * P + 2 * col, *dEr = dE + r * P + col;
            const float rs = va.rstd[it];
            const double a = alpha[it];
#pragma unroll
            for (int m = 0; m < KM; m++) {
                int k = lane + 32 * m;
                if (k >= Dv) continue;
                float g1 = gl[k], sgt = gl[Dv + k];
                float dx = (float)((double)rs * (gk[u][m] - sg[u] - xh[u][m] * sgx[u]));
                dEr[k] = dx;
                gl[k] = dx * sgt;
                gl[Dv + k] = dx * g1 * sgt * (1.0f - sgt);
                x[k] = (float)(a * dvr[k]) * xh[u][m];
            }
        }
    }
}

/* var_gate_bwd_kernel at the register width Dv needs (as var_gate). */
static int var_gate_bwd(int rows, int F, int Dv, const vsn_w &w, const vsn_var &a, const float *alpha, const float *dv,
                        int dv_stride, float *dE, cudaStream_t st) {
    const int G = gate_group(rows, F, Dv, a, dE);
    if (G) {
        const bool vw = aligned16(w.var_ln_w), vd = aligned16(dv) && dv_stride % 4 == 0;
        VSN_LANES_LAUNCH(var_gate_bwd_lanes_kernel, VAR_GATE_BWD_LANES_U,
                         lane_warps((size_t)rows * F, G, VAR_GATE_BWD_LANES_U), rows, F, Dv, w.var_ln_w, vw, a, alpha,
                         dv, dv_stride, vd, dE);
    }
    size_t items = ((size_t)rows * F + VAR_GATE_ITEMS - 1) / VAR_GATE_ITEMS;
    if (Dv <= 32)
        return launch_warps(items, st, var_gate_bwd_kernel<1>, rows, F, Dv, w.var_ln_w, a, alpha, dv, dv_stride, dE);
    if (Dv <= 64)
        return launch_warps(items, st, var_gate_bwd_kernel<2>, rows, F, Dv, w.var_ln_w, a, alpha, dv, dv_stride, dE);
    if (Dv <= 128)
        return launch_warps(items, st, var_gate_bwd_kernel<4>, rows, F, Dv, w.var_ln_w, a, alpha, dv, dv_stride, dE);
    return launch_warps(items, st, var_gate_bwd_kernel<8>, rows, F, Dv, w.var_ln_w, a, alpha, dv, dv_stride, dE);
}

/* d[r, c] *= ELU'(h[r, c]) over [rows, n] (h the ELU's output). */
static __global__ void elu_bwd_kernel(int rows, int n, const float *h, float *d) {
    GRID_LOOP(idx, (size_t)rows * n) d[idx] *= elu_grad_from_out(h[idx]);
}

/* ---- host: forward ------------------------------------------------------- */

static int vsn_check_sizes(int rows, int F, int C, int Dv) {
    ST_REQUIRE(rows >= 0 && F > 0 && C >= 0 && Dv > 0, ST_ERR_INPUT,
               "VSN on the GPU: bad sizes rows=%d F=%d C=%d Dv=%d", rows, F, C, Dv);
    ST_REQUIRE(Dv <= ST_CUDA_VSN_MAX_DV, ST_ERR_INPUT,
               "VSN on the GPU: Dv = %d is larger than the %d its kernels hold in registers", Dv, ST_CUDA_VSN_MAX_DV);
    return ST_OK;
}

/* The selection GRN: s, c -> logits (in work) and alpha; its fc1 and skip
 * read s through the folded weights (wk.fo: F inputs instead of P).
 * c_per: the rows that share one context row (1: c is per row; K: c holds
 * a row per window of K rows, and the ctx product is formed once a window
 * into wk.dh1s, a backward slot the forward leaves free, then added to
 * each of its rows: K times fewer FLOPs, within fp32 rounding of the
 * per-row product but not its bits). */
static int sel_forward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c, int c_stride,
                       int c_per, const vsn_w &w, const vsn_saved &sv, const vsn_work &wk, float *alpha,
                       int alpha_stride, cudaStream_t st) {
    const int Hs = hidden_sel(F, Dv);
    const size_t R = (size_t)rows;
    /* fc1 (+ ctx, then ELU), fc2, glu and the skip: cuBLAS products */
    ST_TRY(st_cuda_linear_forward(rows, F, Hs, s, s_stride, wk.fo.T1, wk.fo.c1, sv.sel_h1, Hs, st));
    if (C > 0 && c_per > 1) {
        ST_TRY(st_cuda_gemm(0, 1, rows / c_per, Hs, C, 1.0f, c, c_stride, w.sel_ctx_w, C, 0.0f, wk.dh1s, Hs, st));
        ST_TRY(launch_n(R * Hs, st, add_rows_elu_kernel, rows, Hs, c_per, (const float *)wk.dh1s, sv.sel_h1));
    } else {
        if (C > 0) ST_TRY(st_cuda_gemm(0, 1, rows, Hs, C, 1.0f, c, c_stride, w.sel_ctx_w, C, 1.0f, sv.sel_h1, Hs, st));
        ST_TRY(launch_n(R * Hs, st, elu_kernel, R * Hs, sv.sel_h1));
    }
    ST_TRY(st_cuda_linear_forward(rows, Hs, Hs, sv.sel_h1, Hs, w.sel_fc2_w, w.sel_fc2_b, sv.sel_h2, Hs, st));
    ST_TRY(st_cuda_linear_forward(rows, Hs, 2 * F, sv.sel_h2, Hs, w.sel_glu_w, w.sel_glu_b, sv.sel_glu, 2 * F, st));
    ST_TRY(st_cuda_linear_forward(rows, F, F, s, s_stride, wk.fo.Tk, wk.fo.ck, sv.sel_x, F, st));
    ST_TRY(sel_tail(rows, F, w.sel_norm_w, w.sel_norm_b, sv.sel_glu, sv.sel_x, wk.dlog, sv.sel_mean, sv.sel_rstd,
                    sv.alpha, alpha, alpha_stride, st));
    return ST_OK;
}

/* Where the forward reads its rows: row r's s at s + r s_stride, or at
 * s + s_row[r] s_stride where s_row is given (a row index into a
 * market's features); its c at c + (r / c_per) c_stride. */
struct vsn_input {
    const float *s;
    int s_stride;
    const int *s_row;
    const float *c;
    int c_stride, c_per;
};

/* The forward; v from the bar table tab (row tab_row[r] for row r) when
 * tab is given, else from the per-variable GRNs run here. With a training
 * bar index ix, tab is filled here first (its compact bars from their
 * first rows' s) and v combined a compact bar at a time through the
 * index's CSR (tab_row unused: the sums of the row kernel through
 * ix->crow, the same bits). */
static int vsn_forward(int rows, int F, int C, int Dv, const vsn_input &in, const struct st_vsn_weights_f32 *w,
                       const st_vsn_bar_index *ix, float *tab, const int *tab_row, float *v, int v_stride, float *alpha,
                       int alpha_stride, float *saved, float *work, cudaStream_t st) {
    ST_TRY(vsn_check_sizes(rows, F, C, Dv));
    ST_REQUIRE(!tab || st_cuda_vsn_table_fits(F, Dv), ST_ERR_INPUT,
               "VSN through a bar table: Dv = %d is not 8, 16 or 32", Dv);
    if (rows == 0) return ST_OK;
    const size_t R = (size_t)rows;
    vsn_saved sv = saved_at(saved, rows, F, Dv);
    vsn_work wk = work_at(work, rows, F, Dv);
    if (in.s_row)
        ST_TRY(launch_n(R * F, st, gather_rows_kernel, rows, F, in.s, in.s_stride, in.s_row, wk.s));
    else
        ST_TRY(launch_n(R * F, st, copy_rows_kernel, rows, F, in.s, in.s_stride, wk.s));
    ST_TRY(st_cuda_vsn_fold(F, Dv, w, &wk.fo, st));
    ST_TRY(sel_forward(rows, F, C, Dv, wk.s, F, in.c, in.c_stride, in.c_per, *w, sv, wk, alpha, alpha_stride, st));
    if (ix) {
        ST_TRY(st_cuda_vsn_table_fill_rows(ix->cap < rows ? ix->cap : rows, ix->count, ix->first, F, Dv, wk.s, F, w,
                                           &wk.fo, tab, st));
        /* the rows a bar at a time (each table row read once); the bits of the row kernel below */
        return st_cuda_vsn_train_table_combine(ix, rows, F, Dv, tab, sv.alpha, F, v, v_stride, st);
    }
    if (tab) return st_cuda_vsn_table_combine(rows, F, Dv, sv.alpha, F, tab, tab_row, v, v_stride, st);
    /* the per-variable GRNs and the combine: one register-tiled kernel where Dv fits it
     * (vsn_forward_fused.cu), else the products and gate_combine_kernel */
    int fused = 0;
    ST_TRY(st_cuda_vsn_forward_fused(rows, F, Dv, wk.s, F, sv.alpha, F, w, &wk.fo, v, v_stride, st, &fused));
    if (fused) return ST_OK;
    ST_TRY(var_products(rows, F, Dv, wk.s, F, *w, wk.fo, wk.a, st));
    ST_TRY(gate_combine(rows, F, Dv, wk.s, *w, wk.fo.Vg, wk.a, sv.alpha, v, v_stride, st));
    return ST_OK;
}

extern "C" int st_cuda_vsn_forward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                   int c_stride, const struct st_vsn_weights_f32 *w, float *v, int v_stride,
                                   float *alpha, int alpha_stride, float *saved, float *work, void *stream) {
    vsn_input in = {s, s_stride, NULL, c, c_stride, 1};
    return vsn_forward(rows, F, C, Dv, in, w, NULL, NULL, NULL, v, v_stride, alpha, alpha_stride, saved, work,
                       (cudaStream_t)stream);
}

extern "C" int st_cuda_vsn_table_build(int rows, int F, int Dv, const float *s, int s_stride,
                                       const struct st_vsn_weights_f32 *w, float *tab, float *work, void *stream) {
    ST_TRY(vsn_check_sizes(rows, F, 0, Dv));
    st_vsn_fold fo = st_vsn_fold_at(work, F, Dv);
    ST_TRY(st_cuda_vsn_fold(F, Dv, w, &fo, stream));
    return st_cuda_vsn_table_fill(rows, F, Dv, s, s_stride, w, &fo, tab, stream);
}

extern "C" int st_cuda_vsn_forward_table(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                         int c_stride, const struct st_vsn_weights_f32 *w, const float *tab,
                                         const int *tab_row, float *v, int v_stride, float *alpha, int alpha_stride,
                                         float *saved, float *work, void *stream) {
    ST_REQUIRE(tab && tab_row, ST_ERR_INPUT, "VSN through a bar table: no table");
    vsn_input in = {s, s_stride, NULL, c, c_stride, 1};
    return vsn_forward(rows, F, C, Dv, in, w, NULL, (float *)tab, tab_row, v, v_stride, alpha, alpha_stride, saved,
                       work, (cudaStream_t)stream);
}

extern "C" int st_cuda_vsn_forward_rows(int rows, int K, int F, int C, int Dv, const float *feat, int feat_stride,
                                        const int *feat_row, const float *ctx, int ctx_stride,
                                        const struct st_vsn_weights_f32 *w, const float *tab, float *v, int v_stride,
                                        float *alpha, int alpha_stride, float *saved, float *work, void *stream) {
    ST_REQUIRE(K > 0 && rows % K == 0, ST_ERR_INPUT, "VSN from window rows: %d rows are not whole windows of K = %d",
               rows, K);
    ST_REQUIRE(feat && feat_row && feat_stride >= F, ST_ERR_INPUT,
               "VSN from window rows: no feature rows, or their stride %d < F = %d", feat_stride, F);
    ST_REQUIRE(C == 0 || (ctx && ctx_stride >= C), ST_ERR_INPUT,
               "VSN from window rows: no context, or its stride %d < C = %d", ctx_stride, C);
    vsn_input in = {feat, feat_stride, feat_row, ctx, ctx_stride, K};
    return vsn_forward(rows, F, C, Dv, in, w, NULL, (float *)tab, tab ? feat_row : NULL, v, v_stride, alpha,
                       alpha_stride, saved, work, (cudaStream_t)stream);
}

extern "C" int st_cuda_vsn_forward_train_table(int rows, int F, int C, int Dv, const float *s, int s_stride,
                                               const float *c, int c_stride, const struct st_vsn_weights_f32 *w,
                                               const st_vsn_bar_index *ix, float *tab, float *v, int v_stride,
                                               float *alpha, int alpha_stride, float *saved, float *work,
                                               void *stream) {
    ST_REQUIRE(ix && tab, ST_ERR_INPUT, "VSN forward through a training bar table: no index or no table");
    ST_REQUIRE(rows <= ix->rows_max, ST_ERR_INPUT,
               "VSN forward through a training bar table: %d rows, the index holds at most %d", rows, ix->rows_max);
    vsn_input in = {s, s_stride, NULL, c, c_stride, 1};
    return vsn_forward(rows, F, C, Dv, in, w, ix, tab, NULL, v, v_stride, alpha, alpha_stride, saved, work,
                       (cudaStream_t)stream);
}

/* ---- host: backward ------------------------------------------------------ */

/* The selection GRN's backward from dlog (in work): its parameter
 * gradients but those of fc1 and the skip, whose reductions over s go to
 * wk.fr (G, gs, Gk, gk) for st_cuda_vsn_fold_backward; dc (=|+=) the ctx
 * path. Leaves dxs (the skip's output gradient) and dh1s (fc1's, after the
 * ELU) in work for ds. */
static int sel_backward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c, int c_stride,
                        const vsn_w &w, const vsn_g &g, const vsn_saved &sv, const vsn_work &wk, float *dc,
                        int dc_stride, int dc_accumulate, cudaStream_t st) {
    const int Hs = hidden_sel(F, Dv);
    const size_t R = (size_t)rows;
    /* the norm's input gradient: the LayerNorm op's (its parameter gradients below, from the products) */
    ST_TRY(st_cuda_layernorm_backward(rows, F, sv.sel_x, F, w.sel_norm_w, sv.sel_mean, sv.sel_rstd, wk.dlog, F, wk.dxs,
                                      F, 0, NULL, NULL, st));
    /* the norm's parameters: dw += colsum(xhat dy) (the products in dgls, not yet used), db += colsum(dy) */
    ST_TRY(launch_n(R * F, st, ln_prod_kernel, rows, F, (const float *)sv.sel_x, F, (const float *)sv.sel_mean,
                    (const float *)sv.sel_rstd, (const float *)wk.dlog, F, wk.dgls, F));
    ST_TRY(st_cuda_colsum_add(rows, F, wk.dgls, F, g.sel_norm_w, st));
    ST_TRY(st_cuda_colsum_add(rows, F, wk.dlog, F, g.sel_norm_b, st));
    ST_TRY(
        launch_n(R * F, st, sel_gate_bwd_kernel, rows, F, (const float *)sv.sel_glu, (const float *)wk.dxs, wk.dgls));
    /* skip (folded): Gk = s^T dxs, gk = colsum(dxs) */
    ST_TRY(st_cuda_gemm(1, 0, F, F, rows, 1.0f, s, s_stride, wk.dxs, F, 0.0f, wk.fr.Gk, F, st));
    ST_TRY(st_cuda_colsum_add(rows, F, wk.dxs, F, wk.fr.gk, st));
    /* glu: dh2s = dgls W_glu */
    ST_TRY(st_cuda_linear_backward(rows, Hs, 2 * F, sv.sel_h2, Hs, w.sel_glu_w, wk.dgls, 2 * F, wk.dh2s, Hs, 0,
                                   g.sel_glu_w, g.sel_glu_b, st));
    /* fc2 and the ELU: dh1s = (dh2s W_fc2) ELU'(h1) */
    ST_TRY(st_cuda_linear_backward(rows, Hs, Hs, sv.sel_h1, Hs, w.sel_fc2_w, wk.dh2s, Hs, wk.dh1s, Hs, 0, g.sel_fc2_w,
                                   g.sel_fc2_b, st));
    ST_TRY(launch_n(R * Hs, st, elu_bwd_kernel, rows, Hs, (const float *)sv.sel_h1, wk.dh1s));
    /* fc1 (folded): G = s^T dh1s, gs = colsum(dh1s); ctx: dc (=|+=) dh1s W_ctx */
    ST_TRY(st_cuda_gemm(1, 0, F, Hs, rows, 1.0f, s, s_stride, wk.dh1s, Hs, 0.0f, wk.fr.G, Hs, st));
    ST_TRY(st_cuda_colsum_add(rows, Hs, wk.dh1s, Hs, wk.fr.gs, st));
    if (C > 0)
        ST_TRY(st_cuda_linear_backward(rows, C, Hs, c, c_stride, w.sel_ctx_w, wk.dh1s, Hs, dc, dc_stride, dc_accumulate,
                                       g.sel_ctx_w, (float *)NULL, st));
    return ST_OK;
}

/* The F GRNs backward from dv, alpha and the activations in wk.a (just
 * recomputed; the softmax backward has used them): every parameter
 * gradient of vsn.var but fc1's, and the reductions Q, Sx, q, X of
 * wk.fr that give fc1's and the embedding's (st_cuda_vsn_fold_backward).
 * The products are batched over the variables; the weight gradients
 * dW_j += dy_j^T x_j (inner dimension rows) one launch for all variables
 * (st_cuda_grouped_dw), the biases and norm weights column sums. The
 * slots of `work` are reused as their contents die, so that the backward
 * needs one P-wide slot (dx) more than the forward's activations:
 *   glu -> dgl (in place) -> the s-weighted terms of Q and Sx;
 *   x -> pw (in place) -> dh2;  h2 -> dh1.
 * Leaves dx and dh1 (at wk.a.h2) in work for ds. */
static int var_backward(int rows, int F, int Dv, const float *s, int s_stride, const float *dv, int dv_stride,
                        const vsn_w &w, const vsn_g &g, const vsn_saved &sv, const vsn_work &wk, cudaStream_t st) {
    const int P = F * Dv;
    const long long DD = (long long)Dv * Dv;
    const size_t R = (size_t)rows;
    const vsn_var &a = wk.a;
    float *dgl = a.glu, *pw = a.x, *dh2 = a.x, *dh1 = a.h2, *terms = a.glu;
    ST_TRY(var_gate_bwd(rows, F, Dv, w, a, (const float *)sv.alpha, dv, dv_stride, wk.dx, st));
    ST_TRY(st_cuda_colsum_add(rows, P, pw, P, g.var_ln_w, st));
    /* ln_b[j, k] += sum_r alpha[r, j] dv[r, k] */
    ST_TRY(st_cuda_gemm(1, 0, F, Dv, rows, 1.0f, sv.alpha, F, dv, dv_stride, 1.0f, g.var_ln_b, Dv, st));
    /* glu: dh2 = dgl W_glu (over pw, summed above) */
    ST_TRY(st_cuda_gemm_batched(0, 0, rows, Dv, 2 * Dv, 1.0f, dgl, 2 * P, 2 * Dv, w.var_glu_w, Dv, 2 * DD, 0.0f, dh2, P,
                                Dv, F, st));
    ST_TRY(st_cuda_grouped_dw(rows, F, Dv, 2 * Dv, dgl, 2 * P, 2 * Dv, a.h2, P, Dv, g.var_glu_w, st));
    ST_TRY(st_cuda_colsum_add(rows, 2 * P, dgl, 2 * P, wk.fr.gg, st)); /* glu_b, and glu_w's folded part */
    /* fc2 and the ELU: dh1 = (dh2 W_fc2) ELU'(h1) (over h2, used above) */
    ST_TRY(st_cuda_gemm_batched(0, 0, rows, Dv, Dv, 1.0f, dh2, P, Dv, w.var_fc2_w, Dv, DD, 0.0f, dh1, P, Dv, F, st));
    ST_TRY(launch_n(R * P, st, elu_bwd_kernel, rows, P, (const float *)a.h1, dh1));
    ST_TRY(st_cuda_grouped_dw(rows, F, Dv, Dv, dh2, P, Dv, a.h1, P, Dv, g.var_fc2_w, st));
    ST_TRY(st_cuda_colsum_add(rows, P, dh2, P, g.var_fc2_b, st));
    /* fc1 and the skips into e_j (folded): Q | Sx = colsum(s_j [dh1 | dx]), q = colsum(dh1), X = colsum(dx) */
    ST_TRY(st_cuda_vsn_scale2(rows, F, Dv, s, s_stride, dh1, P, wk.dx, P, terms, st));
    ST_TRY(st_cuda_colsum_add(rows, 2 * P, terms, 2 * P, wk.fr.Q, st));
    ST_TRY(st_cuda_colsum_add(rows, P, dh1, P, wk.fr.q, st));
    ST_TRY(st_cuda_colsum_add(rows, P, wk.dx, P, wk.fr.X, st));
    return ST_OK;
}

/* The backward's start: `saved` and `work` laid out, s copied, the folds
 * recomputed (the forward's calls) and their reductions zeroed. */
static int bwd_prepare(int rows, int F, int Dv, const float *s, int s_stride, const vsn_w *w, const float *saved,
                       float *work, cudaStream_t st, vsn_saved *sv, vsn_work *wk) {
    /* The kernels only read `saved` in the backward. */
    *sv = saved_at((float *)saved, rows, F, Dv);
    *wk = work_at(work, rows, F, Dv);
    ST_TRY(launch_n((size_t)rows * F, st, copy_rows_kernel, rows, F, s, s_stride, wk->s));
    ST_TRY(st_cuda_vsn_fold(F, Dv, w, &wk->fo, st));
    return st_cuda_vsn_fold_grads_zero(F, Dv, &wk->fr, st);
}

/* The fused paths' end, once dlog and the per-variable reductions are
 * made: ln_b's product, the selection GRN, the folds. */
static int bwd_finish(int rows, int F, int C, int Dv, const float *c, int c_stride, const vsn_w *w, const vsn_g *g,
                      const vsn_saved &sv, const vsn_work &wk, const float *dv, int dv_stride, float *dc, int dc_stride,
                      int dc_accumulate, cudaStream_t st) {
    ST_TRY(st_cuda_gemm(1, 0, F, Dv, rows, 1.0f, sv.alpha, F, dv, dv_stride, 1.0f, g->var_ln_b, Dv, st));
    ST_TRY(sel_backward(rows, F, C, Dv, wk.s, F, c, c_stride, *w, *g, sv, wk, dc, dc_stride, dc_accumulate, st));
    return st_cuda_vsn_fold_backward(F, Dv, w, &wk.fr, g, st);
}

extern "C" int st_cuda_vsn_backward_ex(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                       int c_stride, const struct st_vsn_weights_f32 *w, const float *saved,
                                       const float *dv, int dv_stride, const float *dalpha, int dalpha_stride,
                                       float *ds, int ds_stride, float *dc, int dc_stride, int dc_accumulate,
                                       const struct st_vsn_grads_f32 *g, float *work, void *stream) {
    ST_TRY(vsn_check_sizes(rows, F, C, Dv));
    if (rows == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t R = (size_t)rows;
    /* Recompute the folds (and below the per-variable GRNs' activations): the forward's calls. */
    vsn_saved sv;
    vsn_work wk;
    ST_TRY(bwd_prepare(rows, F, Dv, s, s_stride, w, saved, work, st, &sv, &wk));
    /* For Dv in {8, 16, 32}: the per-variable GRNs' recomputation and backward, dlog and their
     * reductions in one kernel (vsn_backward_fused.cu; its scratch the P-wide slots, dx .. x, 6P a
     * row), then ln_b's product, the selection GRN, the folds and ds */
    int fused = 0;
    ST_TRY(st_cuda_vsn_backward_fused(rows, F, Dv, wk.s, F, sv.alpha, F, dv, dv_stride, dalpha, dalpha_stride, w,
                                      &wk.fo, &wk.fr, g, wk.dlog, ds != NULL, wk.dx, 6 * R * (size_t)F * Dv, st,
                                      &fused));
    if (fused) {
        ST_TRY(bwd_finish(rows, F, C, Dv, c, c_stride, w, g, sv, wk, dv, dv_stride, dc, dc_stride, dc_accumulate, st));
        if (ds) ST_TRY(st_cuda_vsn_backward_fused_ds(rows, F, Dv, &wk.fo, wk.dx, wk.dh1s, wk.dxs, ds, ds_stride, st));
        return ST_OK;
    }
    ST_TRY(var_forward(rows, F, Dv, wk.s, F, *w, wk.fo, wk.a, st));
    ST_TRY(dlog(rows, F, Dv, *w, wk.a, (const float *)sv.alpha, dv, dv_stride, dalpha, dalpha_stride, wk.dlog, st));
    ST_TRY(var_backward(rows, F, Dv, wk.s, F, dv, dv_stride, *w, *g, sv, wk, st));
    ST_TRY(sel_backward(rows, F, C, Dv, wk.s, F, c, c_stride, *w, *g, sv, wk, dc, dc_stride, dc_accumulate, st));
    /* the embedding's, fc1's and the skip's parameter gradients from the reductions; ds */
    ST_TRY(st_cuda_vsn_fold_backward(F, Dv, w, &wk.fr, g, st));
    if (ds) ST_TRY(st_cuda_vsn_fold_ds(rows, F, Dv, w, &wk.fo, wk.dx, wk.a.h2, wk.dh1s, wk.dxs, ds, ds_stride, st));
    return ST_OK;
}

/* The training bar table's scratch in the P-wide slots of `work` (from
 * wk.dx, 6 P floats a row, which the table backward uses for nothing
 * else): dad [F][rows] doubles, the fused kernel's partials, then dT [cap,
 * P] floats. 0 when they do not fit. */
static size_t tt_scratch_floats(int rows, int F, int Dv, int cap) {
    const size_t dad = 2 * (size_t)F * rows, parts = 2 * st_cuda_vsn_backward_fused_table_doubles(cap, F, Dv);
    return dad + parts + (size_t)cap * F * Dv;
}

extern "C" int st_cuda_vsn_train_table_work_fits(int rows, int F, int Dv, int cap) {
    return tt_scratch_floats(rows, F, Dv, cap) <= 6 * (size_t)rows * F * Dv;
}

extern "C" int st_cuda_vsn_backward_train_table(int rows, int F, int C, int Dv, const float *s, int s_stride,
                                                const float *c, int c_stride, const struct st_vsn_weights_f32 *w,
                                                const float *saved, const float *dv, int dv_stride,
                                                const float *dalpha, int dalpha_stride, float *dc, int dc_stride,
                                                int dc_accumulate, const struct st_vsn_grads_f32 *g,
                                                const st_vsn_bar_index *ix, const float *tab, float *work,
                                                void *stream) {
    ST_TRY(vsn_check_sizes(rows, F, C, Dv));
    ST_REQUIRE(ix && tab, ST_ERR_INPUT, "VSN backward through a training bar table: no index or no table");
    ST_REQUIRE(rows <= ix->rows_max, ST_ERR_INPUT,
               "VSN backward through a training bar table: %d rows, the index holds at most %d", rows, ix->rows_max);
    /* a call's distinct bars are at most its rows: dT and the grid for min(cap, rows) */
    const int cap = ix->cap < rows ? ix->cap : rows;
    ST_REQUIRE(st_cuda_vsn_train_table_work_fits(rows, F, Dv, cap), ST_ERR_INPUT,
               "VSN backward through a training bar table: dT (%d bars x %d floats) and the partials do not fit the "
               "work slots of %d rows",
               cap, F * Dv, rows);
    if (rows == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t R = (size_t)rows;
    vsn_saved sv;
    vsn_work wk;
    ST_TRY(bwd_prepare(rows, F, Dv, s, s_stride, w, saved, work, st, &sv, &wk));
    /* dalpha per row and dT per bar, then the per-variable GRNs' backward over the bars from dT */
    double *dad = reinterpret_cast<double *>(wk.dx), *parts = dad + R * F;
    const size_t parts_d = st_cuda_vsn_backward_fused_table_doubles(cap, F, Dv);
    float *dT = reinterpret_cast<float *>(parts + parts_d);
    ST_TRY(st_cuda_vsn_train_table_grad(ix, rows, F, Dv, tab, sv.alpha, F, dv, dv_stride, dalpha, dalpha_stride, dad,
                                        dT, st));
    ST_TRY(st_cuda_vsn_backward_fused_table(cap, ix->count, ix->first, F, Dv, wk.s, F, dT, w, &wk.fo, &wk.fr, g,
                                            parts, parts_d, st));
    ST_TRY(st_cuda_vsn_backward_fused_dlog(rows, F, dad, sv.alpha, F, wk.dlog, st));
    /* as the fused path from here (no ds) */
    return bwd_finish(rows, F, C, Dv, c, c_stride, w, g, sv, wk, dv, dv_stride, dc, dc_stride, dc_accumulate, st);
}

extern "C" int st_cuda_vsn_backward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                    int c_stride, const struct st_vsn_weights_f32 *w, const float *saved,
                                    const float *dv, int dv_stride, float *ds, int ds_stride, float *dc, int dc_stride,
                                    int dc_accumulate, const struct st_vsn_grads_f32 *g, float *work, void *stream) {
    return st_cuda_vsn_backward_ex(rows, F, C, Dv, s, s_stride, c, c_stride, w, saved, dv, dv_stride, NULL, 0, ds,
                                   ds_stride, dc, dc_stride, dc_accumulate, g, work, stream);
}
