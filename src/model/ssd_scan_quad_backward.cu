/* ssd_scan_quad_backward.cu: the SSD backward (ssd.cu's math) with the
 * whole window as one chunk, in the quadratic (attention-like) form, a
 * block a (window b, group g) that runs the group's heads in order, its
 * products on the tensor cores (TF32 WMMA: quad_mma, cuda/ssd_chunk_tc.cuh's
 * mma with two accumulator chains, bench/notes-quadbwd.md).
 * A window of K <= 64 rows has no state to carry: no chunk walk, no state
 * gradients, and dB, dC, summed over the group's heads inside the block,
 * are written straight to dB, dC (no per-head partials, no reduce_group).
 *
 * Per head h of the group, rows t, s in [0, K), a_t = dt_t A (<= 0),
 * cum[t] = sum_{i<=t} a_i (double), L[t,s] = exp(cum[t] - cum[s]) for
 * s <= t (an exponent <= 0), else 0; G = C B^T (once a block):
 *     W = G o L o dt_s,  dW = dY X^T,  Z = dW o W,   dX = (W + D I)^T dY
 *     dG += dW o L o dt_s  (over the heads, in order; dC = dG B, dB = dG^T C)
 *     dd[s] = sum_t Z[t,s] / dt_s = sum_t dW o G o L   (ddt's direct part)
 *     da[s] = sum_{t>=s} (rowsum_t Z - dt_t dd[t])     (cum's gradient summed)
 *     ddt[s] = dd[s] + A da[s],  dD part = sum dY o X,
 *     dA part = sum_s dt_s da[s] = sum_t (rowsum_t Z - dt_t dd[t]) sum_{s<=t} dt_s
 * which is ssd.c's chunk backward at one chunk: its da_i = sum over
 * (t, s) with s < i <= t of R[t,s], R = Z below the diagonal, is the
 * column sums minus the row sums of Z, summed from the bottom.
 *
 * Shared memory (quad_smem; 104 KB at the default shape: 2 blocks an SM),
 * every region on 32 bytes, WMMA row strides 4 mod 32 floats:
 *     B, C [K, N+4]; W [K, K+4] (G, then each head's dW, then W + D I, at
 *     the end dG); the region: dX [K, P+4] and two (X, dY) pairs [K, P+4]
 *     (head h+1's come by cp.async during head h), at the end dC, dB
 *     [K, N+4] over them; cum [H/G, K] doubles (times log2 e), dt [H/G, K], the column
 *     sums' warp shares [8, K], rowsum Z [K], the dD warp shares [8].
 * Each thread keeps G and the group's dG at its 8 x 2 elements (rows
 * warp + 8i, columns lane + 32j) in registers for the whole block.
 * Phases (barriers: 2, then 3 a head, then 3):
 *     prologue: stage B, C, head 0's X, dY; dt of every head; | cum of
 *       each head (a warp a head), G's lower tiles into W; | G to registers
 *     head h: | head h+1's X, dY issued; head h-1's dX to global; dD's
 *       shares; dW's lower tiles into W; | the elementwise pass (dG, row
 *       and column sums of Z, W + D I into W); | dX's tiles; warp 0
 *       the head's vectors (dd, da, ddt to global, the dA, dD partials)
 *     epilogue: | the last dX to global, dG into W; | dC, dB tiles; | dC,
 *       dB to global.
 * Deterministic: every output has one owner and a fixed summation order
 * (no atomics); the partials reach dA, dD through ssd.cu's reduce_head.
 * Taken (st_cuda_ssd_scan_quad_fits) in bf16 matrix-product mode with
 * st_cuda_ssd_set_scan_quad_backward on, K <= 64 and K, P, N multiples of
 * 16, staging on and its shared memory within the device's opt-in limit;
 * otherwise ssd.cu runs the scan backward or the chunk-parallel kernels
 * as before. Within TF32 rounding of the float64 recurrence (bf16 mode's
 * bound 2e-2; bench/notes-scan-quad-backward.md).
 * bench/emu_scan_quad_backward.py emulates this file's layout, tile deals,
 * k-ranges and lane mappings in float64 against central differences of
 * the recurrence (and with TF32 rounding: ~4e-4 relative); keep it in step
 * with this file. */
#include <limits.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/linear_cuda.h"
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_device.cuh"
#include "cuda/ssd_chunk_device.cuh"
#include "cuda/ssd_chunk_tc.cuh"
#include "cuda/ssd_scan_quad_cuda.h"

/* The longest window the block takes as one chunk, and the register tile
 * of the elementwise pass: rows warp + 8 i (i < QUAD_ROWS), columns
 * lane + 32 j (j < QUAD_COLS). */
#define QUAD_MAX_K 64
#define QUAD_ROWS (QUAD_MAX_K / SSD_TC_WARPS)
#define QUAD_COLS (QUAD_MAX_K / 32)

#define QUAD_LOG2E 1.4426950408889634 /* log2(e) */

/* Where the layout's regions lie (offsets in floats, see the top). */
struct quad_smem {
    float *B, *C, *W, *dX, *dCo, *dBo;
    float *rows; /* the (X, dY) pairs: pair j's X at rows + 2 j K lx, its dY K lx further (quad_x, quad_dy) */
    double *cum, *dpart;
    float *dt, *colpart, *rowz;
    int lbc, lw, lx; /* row strides: B and C (and dC, dB), W, X and dY (and dX) */
};

/* Floats of the region that holds dX and the (X, dY) pairs, then dC, dB. */
static inline __host__ __device__ size_t quad_region_floats(int K, int P, int N) {
    const size_t rows = 5 * (size_t)K * (size_t)(P + SSD_TC_PAD), outs = 2 * (size_t)K * (size_t)(N + SSD_TC_PAD);
    return rows > outs ? rows : outs;
}

static inline __host__ __device__ size_t quad_smem_floats(int K, int hg, int P, int N) {
    const size_t k = (size_t)K, bc = k * (size_t)(N + SSD_TC_PAD), w = k * (size_t)(K + SSD_TC_PAD);
    return 2 * bc + w + quad_region_floats(K, P, N) + 2 * (size_t)hg * k /* cum */ + (size_t)hg * k + SSD_TC_WARPS * k +
           k + 2 * SSD_TC_WARPS /* dpart */;
}

__device__ static inline quad_smem quad_smem_of(float *base, int K, int hg, int P, int N) {
    quad_smem m;
    m.lbc = N + SSD_TC_PAD, m.lw = K + SSD_TC_PAD, m.lx = P + SSD_TC_PAD;
    const size_t bc = (size_t)K * m.lbc, x = (size_t)K * m.lx;
    m.B = base;
    m.C = m.B + bc;
    m.W = m.C + bc;
    m.dX = m.W + (size_t)K * m.lw;
    m.rows = m.dX + x;
    m.dCo = m.dX, m.dBo = m.dCo + bc;
    m.cum = (double *)(m.dX + quad_region_floats(K, P, N));
    m.dt = (float *)(m.cum + (size_t)hg * K);
    m.colpart = m.dt + (size_t)hg * K;
    m.rowz = m.colpart + (size_t)SSD_TC_WARPS * K;
    m.dpart = (double *)(m.rowz + K);
    return m;
}

/* Buffer buf's X and dY (an offset, not an array of pointers indexed at
 * run time: that puts the whole struct in local memory). */
__device__ static inline float *quad_x(const quad_smem &m, int K, int buf) {
    return m.rows + (size_t)(2 * buf) * K * m.lx;
}
__device__ static inline float *quad_dy(const quad_smem &m, int K, int buf) {
    return quad_x(m, K, buf) + (size_t)K * m.lx;
}

/* Where the kernel writes besides ssd_dev_args' dx, ddt. */
struct quad_out {
    float *dB, *dC, *partA, *partD;
    int dB_stride, dC_stride;
};

/* Head h's rows of x and dy into buffer `buf` by cp.async (committed). */
__device__ static inline void quad_stage_head(const ssd_dev_args &a, const quad_smem &m, size_t row0, int h, int buf) {
    const size_t col = (size_t)h * (size_t)a.P;
    tc_stage_rows<ssd_shape_any>(a.x + row0 * (size_t)a.x_stride + col, a.x_stride, a.K, a.P, quad_x(m, a.K, buf),
                                 m.lx);
    tc_stage_rows<ssd_shape_any>(a.dy + row0 * (size_t)a.dy_stride + col, a.dy_stride, a.K, a.P, quad_dy(m, a.K, buf),
                                 m.lx);
    __pipeline_commit();
}

/* rows (<= QUAD_MAX_K) x cols of src (row stride ls) to global dst (row
 * stride ld), a warp its rows warp + 8 i, lanes along them: for each slice
 * of 32 columns the thread's QUAD_ROWS loads first, then its stores (all
 * of them in flight at once, not one a trip of a rolled loop). */
__device__ static inline void quad_store_rows(const float *src, int ls, int rows, int cols, float *dst, int ld) {
    static_assert(QUAD_ROWS * SSD_TC_WARPS == QUAD_MAX_K, "a warp's rows warp + 8 i cover the window");
    const int w = ssd_tc::warp_id();
    for (int c = ssd_tc::lane(); c < cols; c += 32) {
        float v[QUAD_ROWS];
#pragma unroll
        for (int i = 0; i < QUAD_ROWS; i++) {
            const int t = w + SSD_TC_WARPS * i;
            v[i] = t < rows ? src[(size_t)t * ls + c] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < QUAD_ROWS; i++) {
            const int t = w + SSD_TC_WARPS * i;
            if (t < rows) dst[(size_t)t * (size_t)ld + (size_t)c] = v[i];
        }
    }
}

/* dD's share of the thread: sum of dY o X over its rows warp + 8 i and
 * columns lane + 32 c, in float, c outer and rows in order (at P <= 32
 * the order of a row loop with the columns inside), each slice's loads
 * issued before its FMAs. */
__device__ static inline float quad_dd_share(const float *X, const float *dY, int ld, int K, int P) {
    const int w = ssd_tc::warp_id();
    float pf = 0;
    for (int p = ssd_tc::lane(); p < P; p += 32) {
        float xv[QUAD_ROWS], yv[QUAD_ROWS];
#pragma unroll
        for (int i = 0; i < QUAD_ROWS; i++) {
            const int t = w + SSD_TC_WARPS * i;
            xv[i] = t < K ? X[(size_t)t * ld + p] : 0.0f, yv[i] = t < K ? dY[(size_t)t * ld + p] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < QUAD_ROWS; i++)
            if (w + SSD_TC_WARPS * i < K) pf += yv[i] * xv[i];
    }
    return pf;
}

/* acc = A B over k = 0 .. kn-1 (kn a multiple of 16: K, P, N are, and
 * every k-range here starts on a 16-row block), the operands' views and
 * TF32 rounding (cvt.rna) as ssd_tc::mma's, with two chains instead of
 * one: a trip of the (rolled) loop loads the fragments of two k-steps of
 * 8 at once, the even one's product into acc, the odd one's into another
 * accumulator (one load latency and two independent HMMA chains a pair,
 * not one a k-step); then acc += odd. A fixed order (each chain in k
 * order, then their sum): deterministic; within TF32 rounding of the one
 * chain's sum. */
template <bool A_ROW, bool B_ROW>
__device__ static inline void quad_mma(ssd_tc::acc_t &acc, const float *a, int lda, const float *b, int ldb, int kn) {
    using namespace ssd_tc;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, typename layout<A_ROW>::type> a0, a1;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, typename layout<B_ROW>::type> b0, b1;
    const size_t ka = A_ROW ? 8 : (size_t)8 * (size_t)lda, kb = B_ROW ? (size_t)8 * (size_t)ldb : 8; /* a k-step */
    acc_t odd;
    wmma::fill_fragment(acc, 0.0f);
    wmma::fill_fragment(odd, 0.0f);
#pragma unroll 1
    for (int k0 = 0; k0 < kn; k0 += 16, a += 2 * ka, b += 2 * kb) {
        wmma::load_matrix_sync(a0, a, lda);
        wmma::load_matrix_sync(b0, b, ldb);
        wmma::load_matrix_sync(a1, a + ka, lda);
        wmma::load_matrix_sync(b1, b + kb, ldb);
#pragma unroll
        for (int i = 0; i < a0.num_elements; i++)
            a0.x[i] = wmma::__float_to_tf32(a0.x[i]), a1.x[i] = wmma::__float_to_tf32(a1.x[i]);
#pragma unroll
        for (int i = 0; i < b0.num_elements; i++)
            b0.x[i] = wmma::__float_to_tf32(b0.x[i]), b1.x[i] = wmma::__float_to_tf32(b1.x[i]);
        wmma::mma_sync(acc, a0, b0, acc);
        wmma::mma_sync(odd, a1, b1, odd);
    }
#pragma unroll
    for (int i = 0; i < acc.num_elements; i++)
        acc.x[i] += odd.x[i];
}

/* cum[t] = sum_{i<=t} dt_i A over the window, in double, by one warp (a
 * shuffle scan over segments of 32 rows with a carry, as tc_decays),
 * stored times log2(e): L = exp2f of a difference, MUFU.EX2 and a scaling
 * instead of expf's range reduction (both within 2 ulp). */
__device__ static inline void quad_cum(const float *dt, double A, int K, double *cum) {
    const int lane = ssd_tc::lane();
    double carry = 0;
    for (int i0 = 0; i0 < K; i0 += 32) {
        const int i = i0 + lane;
        double v = i < K ? (double)dt[i] * A : 0.0;
        for (int o = 1; o < 32; o *= 2) {
            const double u = __shfl_up_sync(0xffffffffu, v, o);
            if (lane >= o) v += u;
        }
        v += carry;
        if (i < K) cum[i] = v * QUAD_LOG2E;
        carry = __shfl_sync(0xffffffffu, v, 31);
    }
}

__device__ static inline double quad_warp_sum(double v) {
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The head's vectors by one warp, after the elementwise pass's barrier:
 * lane l takes s = 2l, 2l+1; dd[s] = the column's warp shares in warp
 * order; dcum[t] = rowsum_t Z - dt_t dd[t]; da[s] = sum_{t>=s} dcum[t]
 * (the lane's pair, then a suffix scan over the lanes); ddt to global;
 * the dA partial sum_s dt_s da[s], summed the other way round as
 * sum_t dcum[t] T[t] with T[t] = sum_{s<=t} dt_s (a prefix scan of dt,
 * which needs none of Z: it runs while the shares load), by a fixed xor
 * tree beside the suffix scan instead of after it; the dD partial the
 * warps' shares in order, summed beside them too. All in double. */
__device__ static inline void quad_head_vectors(const ssd_dev_args &a, const quad_out &o, const quad_smem &m,
                                                const float *dt, size_t row0, size_t bh, int h) {
    const int K = a.K, lane = ssd_tc::lane();
    double pD = 0, dts[2], dd[2], dc[2], T[2]; /* pD: every lane, lane 0 stores it */
    for (int w = 0; w < SSD_TC_WARPS; w++)
        pD += m.dpart[w];
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const int s = 2 * lane + q;
        dts[q] = s < K ? (double)dt[s] : 0.0;
    }
    double pre = dts[0] + dts[1]; /* sum of the pairs of lanes <= this one */
    for (int d = 1; d < 32; d *= 2) {
        const double u = __shfl_up_sync(0xffffffffu, pre, d);
        if (lane >= d) pre += u;
    }
    double before = __shfl_up_sync(0xffffffffu, pre, 1);
    if (lane == 0) before = 0;
    T[0] = before + dts[0], T[1] = T[0] + dts[1];
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const int s = 2 * lane + q;
        dd[q] = 0, dc[q] = 0;
        if (s < K) {
            for (int w = 0; w < SSD_TC_WARPS; w++)
                dd[q] += (double)m.colpart[w * K + s];
            dc[q] = (double)m.rowz[s] - dts[q] * dd[q];
        }
    }
    const double pA = quad_warp_sum(dc[0] * T[0] + dc[1] * T[1]);
    const double v1 = dc[1], v0 = dc[0] + dc[1];
    double incl = v0; /* sum of the pairs of lanes >= this one */
    for (int d = 1; d < 32; d *= 2) {
        const double u = __shfl_down_sync(0xffffffffu, incl, d);
        if (lane + d < 32) incl += u;
    }
    double after = __shfl_down_sync(0xffffffffu, incl, 1);
    if (lane == 31) after = 0;
    const double da[2] = {v0 + after, v1 + after}, A = (double)a.A[h];
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const int s = 2 * lane + q;
        if (s < K) a.ddt[(row0 + (size_t)s) * (size_t)a.ddt_stride + (size_t)h] = (float)(dd[q] + A * da[q]);
    }
    if (lane == 0) o.partA[bh] = (float)pA, o.partD[bh] = (float)pD;
}

/* The sums over the warp's 32 lanes of v[i] for its 8 rows i, by halving:
 * each step a lane keeps half of its rows and adds its partner's share of
 * them (4 + 2 + 1 shuffles, not 8 x 5), then a 4-lane xor tree: lane l
 * ends with row (l >> 2)'s sum. A fixed order: deterministic. */
__device__ static inline float quad_rows_sum(float (&v)[QUAD_ROWS]) {
    static_assert(QUAD_ROWS == 8, "the halving steps take 8 rows over 32 lanes");
    const int lane = ssd_tc::lane();
#pragma unroll
    for (int half = QUAD_ROWS / 2, o = 16; half > 0; half /= 2, o /= 2) {
        const bool up = (lane & o) != 0;
#pragma unroll
        for (int k = 0; k < half; k++) {
            const float send = up ? v[k] : v[k + half], keep = up ? v[k + half] : v[k];
            v[k] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
    float r = v[0];
    r += __shfl_xor_sync(0xffffffffu, r, 2);
    r += __shfl_xor_sync(0xffffffffu, r, 1);
    return r;
}

/* Head h's elementwise pass over the thread's register tile, dW in W on
 * entry and W + D I there on exit (0 above the diagonal): dG += dW L dt_s;
 * Z = dW G L dt_s, its row sums (quad_rows_sum) into rowz and its column
 * sums (dt_s left out: dd) as the warp's shares into colpart. */
__device__ static inline void quad_elementwise(const quad_smem &m, int K, const double *cum, const float *dt, float D,
                                               const float (&G)[QUAD_ROWS][QUAD_COLS],
                                               float (&dG)[QUAD_ROWS][QUAD_COLS]) {
    const int w = ssd_tc::warp_id(), lane = ssd_tc::lane();
    double cs[QUAD_COLS];
    float dts[QUAD_COLS], colz[QUAD_COLS], rz[QUAD_ROWS];
#pragma unroll
    for (int j = 0; j < QUAD_COLS; j++) {
        const int s = lane + 32 * j;
        cs[j] = s < K ? cum[s] : 0.0, dts[j] = s < K ? dt[s] : 0.0f, colz[j] = 0;
    }
#pragma unroll
    for (int i = 0; i < QUAD_ROWS; i++) {
        const int t = w + SSD_TC_WARPS * i;
        rz[i] = 0;
        if (t >= K) continue; /* the whole warp: t is the warp's */
        const double ct = cum[t];
#pragma unroll
        for (int j = 0; j < QUAD_COLS; j++) {
            const int s = lane + 32 * j;
            if (s >= K) continue;
            float *at = m.W + (size_t)t * m.lw + s;
            if (s > t) {
                *at = 0.0f;
                continue;
            }
            const float l = exp2f((float)(ct - cs[j])), d = *at, gl = G[i][j] * l, zq = d * gl;
            dG[i][j] += d * (l * dts[j]);
            colz[j] += zq;
            rz[i] += zq * dts[j];
            *at = gl * dts[j] + (s == t ? D : 0.0f);
        }
    }
    const float row = quad_rows_sum(rz);
    const int t = w + SSD_TC_WARPS * (lane >> 2);
    if ((lane & 3) == 0 && t < K) m.rowz[t] = row;
#pragma unroll
    for (int j = 0; j < QUAD_COLS; j++) {
        const int s = lane + 32 * j;
        if (s < K) m.colpart[w * K + s] = colz[j];
    }
}

/* The lower 16 x 16 tiles (si <= ti) of out = a b^T (a, b [l16 16, kn] at
 * row stride ld; out at row stride lo), dealt out over the warps in row
 * order; the tiles above the diagonal are not written. */
__device__ static inline void quad_lower_abt(const float *a, const float *b, int ld, int kn, int l16, float *out,
                                             int lo) {
    using namespace ssd_tc;
    int tile = 0;
    for (int ti = 0; ti < l16; ti++)
        for (int si = 0; si <= ti; si++, tile++) {
            if (tile % SSD_TC_WARPS != warp_id()) continue;
            acc_t acc; /* b^T as B col-major */
            quad_mma<true, false>(acc, a + (size_t)16 * ti * ld, ld, b + (size_t)16 * si * ld, ld, kn);
            wmma::store_matrix_sync(out + (size_t)16 * ti * lo + 16 * si, acc, lo, wmma::mem_row_major);
        }
}

static __global__ void __launch_bounds__(SSD_THREADS, 2) scan_quad_backward_kernel(ssd_dev_args a, quad_out o) {
    using namespace ssd_tc;
    extern __shared__ __align__(128) float sm_quad[];
    const int K = a.K, P = a.P, N = a.N, hg = a.H / a.G, l16 = K / 16, p16 = P / 16, n16 = N / 16;
    const int b = (int)(blockIdx.x / (unsigned)a.G), g = (int)(blockIdx.x % (unsigned)a.G), h0 = g * hg;
    const int w = warp_id(), lane = ssd_tc::lane();
    const size_t row0 = (size_t)b * (size_t)K;
    const quad_smem m = quad_smem_of(sm_quad, K, hg, P, N);

    /* prologue */
    tc_stage_rows<ssd_shape_any>(a.Bm + row0 * (size_t)a.B_stride + (size_t)g * N, a.B_stride, K, N, m.B, m.lbc);
    tc_stage_rows<ssd_shape_any>(a.Cm + row0 * (size_t)a.C_stride + (size_t)g * N, a.C_stride, K, N, m.C, m.lbc);
    quad_stage_head(a, m, row0, h0, 0);
    for (int i = threadIdx.x; i < hg * K; i += SSD_THREADS) { /* consecutive threads along a row's heads */
        const int t = i / hg, j = i % hg;
        m.dt[j * K + t] = a.dt[(row0 + (size_t)t) * (size_t)a.dt_stride + (size_t)(h0 + j)];
    }
    tc_stage_wait();
    __syncthreads();
    for (int j = w; j < hg; j += SSD_TC_WARPS)
        quad_cum(m.dt + (size_t)j * K, (double)a.A[h0 + j], K, m.cum + (size_t)j * K);
    quad_lower_abt(m.C, m.B, m.lbc, N, l16, m.W, m.lw); /* G[t, s] = C_t . B_s */
    __syncthreads();
    float G[QUAD_ROWS][QUAD_COLS], dG[QUAD_ROWS][QUAD_COLS];
#pragma unroll
    for (int i = 0; i < QUAD_ROWS; i++)
#pragma unroll
        for (int j = 0; j < QUAD_COLS; j++) {
            const int t = w + SSD_TC_WARPS * i, s = lane + 32 * j;
            G[i][j] = t < K && s <= t ? m.W[(size_t)t * m.lw + s] : 0.0f, dG[i][j] = 0;
        }

    for (int j = 0; j < hg; j++) {
        const int h = h0 + j, buf = j & 1;
        const float *X = quad_x(m, K, buf), *dY = quad_dy(m, K, buf), *dt = m.dt + (size_t)j * K;
        tc_stage_wait(); /* head j's rows (issued a head ago; the prologue's for j = 0) */
        __syncthreads(); /* they are everyone's; the last head's dX is complete, its W and rows read */
        if (j + 1 < hg) quad_stage_head(a, m, row0, h + 1, buf ^ 1);
        if (j > 0)
            quad_store_rows(m.dX, m.lx, K, P, a.dx + row0 * (size_t)a.dx_stride + (size_t)(h - 1) * P, a.dx_stride);
        const double pd = quad_warp_sum((double)quad_dd_share(X, dY, m.lx, K, P)); /* dD's: a lane's P K / 256 terms */
        if (lane == 0) m.dpart[w] = pd;
        quad_lower_abt(dY, X, m.lx, P, l16, m.W, m.lw); /* dW[t, s] = dY_t . X_s */
        __syncthreads();
        quad_elementwise(m, K, m.cum + (size_t)j * K, dt, a.Dskip ? a.Dskip[h] : 0.0f, G, dG);
        __syncthreads();
        /* dX[s, p] = sum_{t>=s} W'[t, s] dY[t, p], the last row tiles (the
         * shortest sums) first: to warp 0, which has the most dW tiles and
         * the head's vectors */
        for (int tile = w; tile < l16 * p16; tile += SSD_TC_WARPS) {
            const int si = l16 - 1 - tile / p16, pi = tile % p16, t0 = 16 * si;
            acc_t acc;
            quad_mma<false, true>(acc, m.W + (size_t)t0 * m.lw + t0, m.lw, dY + (size_t)t0 * m.lx + 16 * pi, m.lx,
                                  K - t0);
            wmma::store_matrix_sync(m.dX + (size_t)t0 * m.lx + 16 * pi, acc, m.lx, wmma::mem_row_major);
        }
        if (w == 0) quad_head_vectors(a, o, m, dt, row0, (size_t)b * a.H + (size_t)h, h);
    }

    /* epilogue */
    __syncthreads(); /* the last dX is complete, W read */
    quad_store_rows(m.dX, m.lx, K, P, a.dx + row0 * (size_t)a.dx_stride + (size_t)(h0 + hg - 1) * P, a.dx_stride);
#pragma unroll
    for (int i = 0; i < QUAD_ROWS; i++)
#pragma unroll
        for (int j = 0; j < QUAD_COLS; j++) {
            const int t = w + SSD_TC_WARPS * i, s = lane + 32 * j;
            if (t < K && s < K) m.W[(size_t)t * m.lw + s] = dG[i][j]; /* 0 above the diagonal */
        }
    __syncthreads();
    for (int tile = w; tile < 2 * l16 * n16; tile += SSD_TC_WARPS) {
        acc_t acc;
        if (tile < l16 * n16) { /* dC[t, n] = sum_{s<=t} dG[t, s] B[s, n] */
            const int ti = tile / n16, ni = tile % n16;
            quad_mma<true, true>(acc, m.W + (size_t)16 * ti * m.lw, m.lw, m.B + 16 * ni, m.lbc, 16 * (ti + 1));
            wmma::store_matrix_sync(m.dCo + (size_t)16 * ti * m.lbc + 16 * ni, acc, m.lbc, wmma::mem_row_major);
        } else { /* dB[s, n] = sum_{t>=s} dG[t, s] C[t, n]: dG^T as A col-major */
            const int k = tile - l16 * n16, si = k / n16, ni = k % n16, t0 = 16 * si;
            quad_mma<false, true>(acc, m.W + (size_t)t0 * m.lw + t0, m.lw, m.C + (size_t)t0 * m.lbc + 16 * ni, m.lbc,
                                  K - t0);
            wmma::store_matrix_sync(m.dBo + (size_t)t0 * m.lbc + 16 * ni, acc, m.lbc, wmma::mem_row_major);
        }
    }
    __syncthreads();
    quad_store_rows(m.dCo, m.lbc, K, N, o.dC + row0 * (size_t)o.dC_stride + (size_t)g * N, o.dC_stride);
    quad_store_rows(m.dBo, m.lbc, K, N, o.dB + row0 * (size_t)o.dB_stride + (size_t)g * N, o.dB_stride);
}

static int quad_on = 1;
extern "C" void st_cuda_ssd_set_scan_quad_backward(int on) { quad_on = on != 0; }

static size_t quad_smem_bytes(int K, int H, int P, int G, int N) {
    return sizeof(float) * quad_smem_floats(K, H / G, P, N);
}

int st_cuda_ssd_scan_quad_fits(int Bsz, int K, int H, int P, int G, int N, size_t smem_optin) {
    if (!quad_on || st_cuda_matmul_precision() != ST_MATMUL_BF16 || Bsz <= 0 || G <= 0 || H % G != 0) return 0;
    if (K <= 0 || K > QUAD_MAX_K || K % 16 != 0 || P <= 0 || P % 16 != 0 || N <= 0 || N % 16 != 0) return 0;
    return quad_smem_bytes(K, H, P, G, N) <= smem_optin && (size_t)Bsz * (size_t)G <= (size_t)INT_MAX;
}

int st_cuda_ssd_scan_quad_backward(const ssd_dev_args &a, float *dB, int dB_stride, float *dC, int dC_stride,
                                   float *partA, float *partD, size_t smem_optin, void *stream, int *taken) {
    *taken = 0;
    if (!st_cuda_ssd_scan_quad_fits(a.Bsz, a.K, a.H, a.P, a.G, a.N, smem_optin)) return ST_OK;
    const size_t bytes = quad_smem_bytes(a.K, a.H, a.P, a.G, a.N);
    if (bytes > 49152)
        ST_CUDA_TRY(
            cudaFuncSetAttribute(scan_quad_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    quad_out o;
    o.dB = dB, o.dC = dC, o.partA = partA, o.partD = partD, o.dB_stride = dB_stride, o.dC_stride = dC_stride;
    scan_quad_backward_kernel<<<(unsigned)((size_t)a.Bsz * a.G), SSD_THREADS, bytes, (cudaStream_t)stream>>>(a, o);
    ST_CUDA_LAUNCHED();
    *taken = 1;
    return ST_OK;
}
