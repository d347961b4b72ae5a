/* ssd_scan_quad_backward.cu: the SSD backward (ssd.cu's math) with the
 * whole window as one chunk, in the quadratic (attention-like) form, a
 * block a (window b, group g) that runs the group's heads in order, its
 * products on the tensor cores (TF32 WMMA: quad_mma, cuda/ssd_chunk_tc.cuh's
 * mma with two accumulator chains, bench/notes-quadbwd.md), head j's dX
 * beside head j+1's dW (bench/notes-quadbwd2.md). Two paths
 * (st_cuda_ssd_set_scan_quad_backward_mma): the mma path (default) forms
 * each product as raw mma.sync m16n8k8 with LDS at lane offsets
 * (quad_raw_mma) and stores dX, dC, dB from the accumulators straight to
 * global, at the default preset's shape with its sizes as constants
 * (quad_shape_default); the WMMA path (changes 47, 51) goes through WMMA's
 * generic loads and stages dX, dC, dB in shared memory (X3 below) first.
 * Same layout, phases and deals (bench/notes-quad3.md).
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
 * Shared memory (quad_smem; 112,960 B at the default shape: 2 blocks an
 * SM), every region on 32 bytes, WMMA row strides 4 mod 32 floats:
 *     W0, W1 [K, K+4] (head j's dW, then W + D I, in W[j & 1]; G in W1
 *     before head 0; dG in W[hg & 1] after the last head); the region:
 *     ring slots r = 0, 1, 2 of (X, dY) [K, P+4] each (head j in slot
 *     j % 3), dX [K, P+4] after them; in the prologue slot 0, B, C [K,
 *     N+4] over slots 1, 2 (and dX); in the epilogue B, C, dC, dB [K, N+4]
 *     from its start (B, C below dX when they fit there, else above it:
 *     quad_epilogue_floats); cum [H/G, K] doubles (times log2 e), dt [H/G,
 *     K], the column sums' warp shares [8, K], rowsum Z [K], the dD warp
 *     shares [8]. B and C are not resident: staged for G, staged again
 *     for dC, dB.
 * Each thread keeps G and the group's dG at its 8 x 2 elements (rows
 * warp + 8i, columns lane + 32j) in registers for the whole block.
 * Phases, each ended by a barrier (2 + 2 a head + 2; bench/notes-quadbwd2.md):
 *     P0: stage B, C, head 0 (slot 0), dt of every head; wait  | b0
 *     P1: cum of each head (a warp a head); G's lower tiles into W1 and
 *       head 0's dW lower tiles into W0, one deal  | b1
 *     E(j): head 1 (j = 0) and head j+2 issued into their slots; dX(j-1)
 *       to global; head j's dD shares; G to registers (j = 0); the
 *       elementwise pass on W[j & 1]; wait for head j+1's rows  | e_j
 *     M(j): dX(j)'s tiles (W[j & 1], slot j's dY) and head j+1's dW lower
 *       tiles (slot j+1, into W[(j+1) & 1]), one deal; warp
 *       QUAD_VEC_WARP the head's vectors (dd, da, ddt to global, the dA,
 *       dD partials); at the last head dG into W[hg & 1]  | m_j
 *     X1: B, C staged again (over the slots); the last dX to global;
 *       wait  | x1;  X2: dC, dB tiles (over dX)  | x2;  X3: dC, dB to global.
 * Every buffer is written after the barrier that ends its last read:
 * slot (j+2) % 3 (written from E(j) to e_{j+1}) was last read by head
 * j-1 in M(j-1); W[(j+1) & 1] (M(j)) by dX(j-1) in M(j-1) (W1's G: E(0));
 * dX (M(j)) by its store in E(j); the shares (E(j)) by head j-1's vectors
 * in M(j-1); the epilogue's B, C by M(hg-1), and they miss dX (read in
 * X1); dC, dB (X2) over dX, read in X1.
 * Deterministic: every output has one owner and a fixed summation order
 * (no atomics); the partials reach dA, dD through ssd.cu's reduce_head.
 * Taken (st_cuda_ssd_scan_quad_fits) in bf16 matrix-product mode with
 * st_cuda_ssd_set_scan_quad_backward on, K <= 64 and K, P, N multiples of
 * 16, staging on and its shared memory within the device's opt-in limit;
 * otherwise ssd.cu runs the scan backward or the chunk-parallel kernels
 * as before. Within TF32 rounding of the float64 recurrence (bf16 mode's
 * bound 2e-2; bench/notes-scan-quad-backward.md).
 * bench/emu_scan_quad_backward.py emulates this file's layout, phases,
 * tile deals, k-ranges and lane mappings in float64 against central
 * differences of the recurrence (and with TF32 rounding: ~4e-4 relative),
 * with a racecheck of the phases at warp granularity; keep it in step with
 * this file. */
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
#include "cuda/ssd_scan_quad_fwd.cuh"
#include "cuda/ssd_shape.cuh"

/* The longest window the block takes as one chunk, and the register tile
 * of the elementwise pass: rows warp + 8 i (i < QUAD_ROWS), columns
 * lane + 32 j (j < QUAD_COLS). */
#define QUAD_MAX_K 64
#define QUAD_ROWS (QUAD_MAX_K / SSD_TC_WARPS)
#define QUAD_COLS (QUAD_MAX_K / 32)

#define QUAD_LOG2E 1.4426950408889634 /* log2(e) */

/* The kernel's paths (st_cuda_ssd_set_scan_quad_backward_mma's modes). */
enum { QUAD_WMMA, QUAD_MMA, QUAD_MMA_IADD };

/* The kernel's sizes as a policy (cuda/ssd_shape.cuh's idea, with the
 * window's K in place of a chunk's Q): quad_shape_any reads K, P, N from
 * the call, quad_shape_fixed has them as constants, so that every stride,
 * offset and trip count derived from them folds (no division by a runtime
 * size, no 64-bit product an address): the same arithmetic in the same
 * order, the same bits. `stage` is the staging copies' policy. */
struct quad_shape_any {
    __device__ static int K(const ssd_dev_args &a) { return a.K; }
    __device__ static int P(const ssd_dev_args &a) { return a.P; }
    __device__ static int N(const ssd_dev_args &a) { return a.N; }
    typedef ssd_shape_any stage;
};
template <int K_, int P_, int N_> struct quad_shape_fixed {
    __device__ static constexpr int K(const ssd_dev_args &) { return K_; }
    __device__ static constexpr int P(const ssd_dev_args &) { return P_; }
    __device__ static constexpr int N(const ssd_dev_args &) { return N_; }
    typedef ssd_shape_fixed<K_, P_, N_, SSD_THREADS> stage;
    static int takes(int K, int P, int N) { return K == K_ && P == P_ && N == N_; }
};
/* The default preset's shape, the one compiled with constants. */
typedef quad_shape_fixed<64, 32, 64> quad_shape_default;

/* Where the layout's regions lie (offsets in floats, see the top). */
struct quad_smem {
    float *W;   /* W0; W1 K lw further (quad_w) */
    float *rows; /* the region: ring slot r's X at rows + 2 r K lx, its dY K lx further (quad_x, quad_dy) */
    float *dX, *pB, *pC, *eB, *eC, *dCo, *dBo; /* dX, the prologue's B, C, the epilogue's B, C, dC, dB */
    double *cum, *dpart;
    float *dt, *colpart, *rowz;
    int lbc, lw, lx; /* row strides: B and C (and dC, dB), W, X and dY (and dX) */
};

/* Where the epilogue's B lies in the region: below dX (at 6 K lx) when B
 * and C fit there, else above it. */
static inline __host__ __device__ size_t quad_epilogue_floats(int K, int P, int N) {
    const size_t x = (size_t)K * (size_t)(P + SSD_TC_PAD), bc = (size_t)K * (size_t)(N + SSD_TC_PAD);
    return 2 * bc <= 6 * x ? 0 : 7 * x;
}

/* Floats of the region: the heads' ring of three (X, dY) slots and dX,
 * the prologue's slot 0, B, C, the epilogue's B, C, dC, dB. */
static inline __host__ __device__ size_t quad_region_floats(int K, int P, int N) {
    const size_t x = (size_t)K * (size_t)(P + SSD_TC_PAD), bc = (size_t)K * (size_t)(N + SSD_TC_PAD);
    const size_t heads = 7 * x, pro = 2 * x + 2 * bc, epi = quad_epilogue_floats(K, P, N) + 4 * bc;
    const size_t m = heads > pro ? heads : pro;
    return m > epi ? m : epi;
}

static inline __host__ __device__ size_t quad_smem_floats(int K, int hg, int P, int N) {
    const size_t k = (size_t)K, w = k * (size_t)(K + SSD_TC_PAD);
    return 2 * w + quad_region_floats(K, P, N) + 2 * (size_t)hg * k /* cum */ + (size_t)hg * k + SSD_TC_WARPS * k +
           k + 2 * SSD_TC_WARPS /* dpart */;
}

__device__ static inline quad_smem quad_smem_of(float *base, int K, int hg, int P, int N) {
    quad_smem m;
    m.lbc = N + SSD_TC_PAD, m.lw = K + SSD_TC_PAD, m.lx = P + SSD_TC_PAD;
    const size_t bc = (size_t)K * m.lbc, x = (size_t)K * m.lx;
    m.W = base;
    m.rows = m.W + 2 * (size_t)K * m.lw;
    m.dX = m.rows + 6 * x;
    m.pB = m.rows + 2 * x, m.pC = m.pB + bc;
    m.eB = m.rows + quad_epilogue_floats(K, P, N), m.eC = m.eB + bc, m.dCo = m.eC + bc, m.dBo = m.dCo + bc;
    m.cum = (double *)(m.rows + quad_region_floats(K, P, N));
    m.dt = (float *)(m.cum + (size_t)hg * K);
    m.colpart = m.dt + (size_t)hg * K;
    m.rowz = m.colpart + (size_t)SSD_TC_WARPS * K;
    m.dpart = (double *)(m.rowz + K);
    return m;
}

/* W buffer buf (0, 1), slot `slot`'s X and dY (0, 1, 2): offsets, not
 * arrays of pointers indexed at run time (that puts the whole struct in
 * local memory). */
__device__ static inline float *quad_w(const quad_smem &m, int K, int buf) {
    return m.W + (size_t)buf * K * m.lw;
}
__device__ static inline float *quad_x(const quad_smem &m, int K, int slot) {
    return m.rows + (size_t)(2 * slot) * K * m.lx;
}
__device__ static inline float *quad_dy(const quad_smem &m, int K, int slot) {
    return quad_x(m, K, slot) + (size_t)K * m.lx;
}

/* Where the kernel writes besides ssd_dev_args' dx, ddt. */
struct quad_out {
    float *dB, *dC, *partA, *partD;
    int dB_stride, dC_stride;
    int vec2; /* dx, dB, dC and their strides on 8 bytes: the mma path's float2 stores */
};

/* Head h's rows of x and dy into ring slot `slot` by cp.async (one
 * committed group). */
template <class S>
__device__ static inline void quad_stage_head(const ssd_dev_args &a, const quad_smem &m, size_t row0, int h, int slot) {
    const int K = S::K(a), P = S::P(a);
    const size_t col = (size_t)h * (size_t)P;
    tc_stage_rows<typename S::stage>(a.x + row0 * (size_t)a.x_stride + col, a.x_stride, K, P, quad_x(m, K, slot), m.lx);
    tc_stage_rows<typename S::stage>(a.dy + row0 * (size_t)a.dy_stride + col, a.dy_stride, K, P, quad_dy(m, K, slot),
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

/* x as an mma operand's TF32 bits: cvt.rna (qf_tf32, wmma::__float_to_tf32's
 * rounding), or where IADD the bits plus half of the 13 bits the tensor
 * core does not read (one integer add: for a finite x the same upper 19
 * bits as cvt.rna, round half away from zero; cvt.rna's guard for NaN and
 * infinity left out). The mma path's mode 2 (bench/notes-quad3.md). */
template <bool IADD> __device__ static inline uint32_t quad_tf32(float x) {
    return IADD ? __float_as_uint(x) + 0x1000u : qf_tf32(x);
}

/* The mma path (st_cuda_ssd_set_scan_quad_backward_mma): a 16 x 16 product
 * as two n8 halves of raw TF32 mma.sync m16n8k8 (cuda/ssd_scan_quad_fwd.cuh's
 * qf_mma, qf_tf32: the fragment layouts there), its operands loaded with
 * LDS from a lane's base address at offsets that fold to constants at a
 * fixed shape, instead of WMMA's generic loads and their 64-bit address
 * arithmetic. acc = A B over k < kn (a multiple of 16), A (i, k) at a[i ai
 * + k ak], B (k, n) at b[k bk + n bn]; as quad_mma, a trip takes two
 * k-steps of 8, the even one's products into acc and the odd one's into
 * another chain, then acc += odd. PERM: logical k = q of a step at its
 * row 2q and k = q + 4 at 2q + 1 (the forward's permutation), for operands
 * stored k-major (ak or bk the row stride, 4 mod 32 floats): banks 8q + g,
 * no conflict; without it, for operands along k (ak = bk = 1): banks 4g +
 * q. The sum over a step's 8 products is the same either way. */
template <bool PERM, bool IADD>
__device__ static inline void quad_raw_mma(float (&acc)[2][4], const float *a, int ai, int ak, const float *b, int bk,
                                           int bn, int kn) {
    const int lane = ssd_tc::lane(), g = lane >> 2, q = lane & 3;
    const int k0 = PERM ? 2 * q : q, dk = PERM ? 1 : 4; /* the row of logical k = q, and k = q + 4's after it */
    const float *pa = a + g * ai + k0 * ak, *pb = b + g * bn + k0 * bk;
    float odd[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            acc[nt][i] = 0.0f, odd[nt][i] = 0.0f;
#pragma unroll 1
    for (int k = 0; k < kn; k += 16, pa += 16 * ak, pb += 16 * bk) {
        uint32_t fa[2][4], fb[2][2][2]; /* [k-step][...]: the trip's two steps */
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float *sa = pa + 8 * e * ak, *sb = pb + 8 * e * bk;
            fa[e][0] = quad_tf32<IADD>(sa[0]), fa[e][1] = quad_tf32<IADD>(sa[8 * ai]);
            fa[e][2] = quad_tf32<IADD>(sa[dk * ak]), fa[e][3] = quad_tf32<IADD>(sa[8 * ai + dk * ak]);
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
                fb[e][nt][0] = quad_tf32<IADD>(sb[8 * nt * bn]),
                fb[e][nt][1] = quad_tf32<IADD>(sb[8 * nt * bn + dk * bk]);
        }
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
            qf_mma(acc[nt], fa[0], fb[0][nt][0], fb[0][nt][1]);
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
            qf_mma(odd[nt], fa[1], fb[1][nt][0], fb[1][nt][1]);
    }
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            acc[nt][i] += odd[nt][i];
}

/* A 16 x 16 accumulator (quad_raw_mma's) to out (row stride lo): the
 * lane's rows g, g + 8, columns 8 nt + 2q, 2q + 1, as float2 where vec2
 * (out on 8 bytes, lo even), else one float at a time. */
__device__ static inline void quad_raw_store(const float (&acc)[2][4], float *out, size_t lo, int vec2) {
    const int lane = ssd_tc::lane(), g = lane >> 2, q = lane & 3;
    float *o0 = out + (size_t)g * lo + 2 * q, *o1 = o0 + 8 * lo;
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        if (vec2) {
            *(float2 *)(o0 + 8 * nt) = make_float2(acc[nt][0], acc[nt][1]);
            *(float2 *)(o1 + 8 * nt) = make_float2(acc[nt][2], acc[nt][3]);
        } else {
            o0[8 * nt] = acc[nt][0], o0[8 * nt + 1] = acc[nt][1];
            o1[8 * nt] = acc[nt][2], o1[8 * nt + 1] = acc[nt][3];
        }
    }
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
        const double v = warp_prefix_step(i < K ? (double)dt[i] * A : 0.0, carry, lane);
        if (i < K) cum[i] = v * QUAD_LOG2E;
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
                                                const float *dt, size_t row0, size_t bh, int h, int K) {
    const int lane = ssd_tc::lane();
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

/* Head h's elementwise pass over the thread's register tile, dW in W (the
 * head's buffer) on entry and W + D I there on exit (0 above the
 * diagonal), each element rewritten by the thread that reads it: dG += dW L dt_s;
 * Z = dW G L dt_s, its row sums (quad_rows_sum) into rowz and its column
 * sums (dt_s left out: dd) as the warp's shares into colpart. */
__device__ static inline void quad_elementwise(const quad_smem &m, float *W, int K, const double *cum, const float *dt,
                                               float D,
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
            float *at = W + (size_t)t * m.lw + s;
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

/* Lower 16 x 16 tile `tile` (in row order: (0, 0), (1, 0), (1, 1), ...)
 * of out = a b^T (a, b [K, kn] at row stride ld; out at row stride lo). */
template <int PATH>
__device__ static inline void quad_abt_tile(const float *a, const float *b, int ld, int kn, int tile, float *out,
                                            int lo) {
    using namespace ssd_tc;
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= tile)
        ti++;
    const int si = tile - ti * (ti + 1) / 2;
    if constexpr (PATH != QUAD_WMMA) { /* A (i, k) = a[i ld + k], B (k, n) = b[n ld + k]: both along k */
        float acc[2][4];
        quad_raw_mma<false, PATH == QUAD_MMA_IADD>(acc, a + (size_t)16 * ti * ld, ld, 1, b + (size_t)16 * si * ld, 1,
                                                   ld, kn);
        quad_raw_store(acc, out + (size_t)16 * ti * lo + 16 * si, (size_t)lo, 1);
        return;
    }
    acc_t acc; /* b^T as B col-major */
    quad_mma<true, false>(acc, a + (size_t)16 * ti * ld, ld, b + (size_t)16 * si * ld, ld, kn);
    wmma::store_matrix_sync(out + (size_t)16 * ti * lo + 16 * si, acc, lo, wmma::mem_row_major);
}

/* dX tile `tile`: dX[s, p] = sum_{t>=s} W'[t, s] dY[t, p] (W' = W + D I
 * in W), the last row tiles (the shortest sums) first; into m.dX, or on
 * the mma path into dx (the head's column 0 of the window's row 0, row
 * stride ldx; float2 stores where vec2). */
template <int PATH>
__device__ static inline void quad_dx_tile(const quad_smem &m, const float *W, const float *dY, int K, int p16,
                                           int tile, float *dx, size_t ldx, int vec2) {
    using namespace ssd_tc;
    const int si = K / 16 - 1 - tile / p16, pi = tile % p16, t0 = 16 * si;
    if constexpr (PATH != QUAD_WMMA) { /* A (s, t) = W[t lw + s], B (t, p) = dY[t lx + p]: both k-major */
        float acc[2][4];
        quad_raw_mma<true, PATH == QUAD_MMA_IADD>(acc, W + (size_t)t0 * m.lw + t0, 1, m.lw,
                                                  dY + (size_t)t0 * m.lx + 16 * pi, m.lx, 1, K - t0);
        quad_raw_store(acc, dx + (size_t)t0 * ldx + 16 * pi, ldx, vec2);
        return;
    }
    acc_t acc;
    quad_mma<false, true>(acc, W + (size_t)t0 * m.lw + t0, m.lw, dY + (size_t)t0 * m.lx + 16 * pi, m.lx, K - t0);
    wmma::store_matrix_sync(m.dX + (size_t)t0 * m.lx + 16 * pi, acc, m.lx, wmma::mem_row_major);
}

/* The warp that takes the head's vectors in phase M: one of the two with
 * the fewest k-steps there at the default shape (dX's 4 and one dW tile;
 * bench/notes-quadbwd2.md). */
#define QUAD_VEC_WARP 2
static_assert(QUAD_VEC_WARP < SSD_TC_WARPS, "the vectors' warp exists");

/* S: the shape policy (quad_shape_any, or quad_shape_default's constants);
 * PATH: the mma path (quad_raw_mma, dX, dC, dB straight from the
 * accumulators to global; QUAD_MMA_IADD: its operands rounded by quad_tf32's
 * integer add) or WMMA's (QUAD_WMMA, changes 47, 51: quad_mma, dX through
 * shared memory). */
template <class S, int PATH>
static __global__ void __launch_bounds__(SSD_THREADS, 2) scan_quad_backward_kernel(ssd_dev_args a, quad_out o) {
    using namespace ssd_tc;
    extern __shared__ __align__(128) float sm_quad[];
    const int K = S::K(a), P = S::P(a), N = S::N(a), hg = a.H / a.G, l16 = K / 16, p16 = P / 16, n16 = N / 16;
    const int ntri = l16 * (l16 + 1) / 2, ndx = l16 * p16; /* lower tiles of G, dW; dX's tiles */
    const int b = (int)(blockIdx.x / (unsigned)a.G), g = (int)(blockIdx.x % (unsigned)a.G), h0 = g * hg;
    const int w = warp_id(), lane = ssd_tc::lane();
    const size_t row0 = (size_t)b * (size_t)K;
    const quad_smem m = quad_smem_of(sm_quad, K, hg, P, N);

    /* P0: B, C (over slots 1, 2 and dX), head 0 into slot 0, dt */
    tc_stage_rows<typename S::stage>(a.Bm + row0 * (size_t)a.B_stride + (size_t)g * N, a.B_stride, K, N, m.pB, m.lbc);
    tc_stage_rows<typename S::stage>(a.Cm + row0 * (size_t)a.C_stride + (size_t)g * N, a.C_stride, K, N, m.pC, m.lbc);
    quad_stage_head<S>(a, m, row0, h0, 0);
    for (int i = threadIdx.x; i < hg * K; i += SSD_THREADS) { /* consecutive threads along a row's heads */
        const int t = i / hg, j = i % hg;
        m.dt[j * K + t] = a.dt[(row0 + (size_t)t) * (size_t)a.dt_stride + (size_t)(h0 + j)];
    }
    tc_stage_wait();
    __syncthreads(); /* b0 */
    /* P1: cum; G[t, s] = C_t . B_s into W1 and head 0's dW[t, s] = dY_t . X_s
     * into W0, their lower tiles dealt as one list */
    for (int j = w; j < hg; j += SSD_TC_WARPS)
        quad_cum(m.dt + (size_t)j * K, (double)a.A[h0 + j], K, m.cum + (size_t)j * K);
    for (int task = w; task < 2 * ntri; task += SSD_TC_WARPS) {
        if (task < ntri)
            quad_abt_tile<PATH>(m.pC, m.pB, m.lbc, N, task, quad_w(m, K, 1), m.lw);
        else
            quad_abt_tile<PATH>(quad_dy(m, K, 0), quad_x(m, K, 0), m.lx, P, task - ntri, quad_w(m, K, 0), m.lw);
    }
    __syncthreads(); /* b1 */

    float G[QUAD_ROWS][QUAD_COLS], dG[QUAD_ROWS][QUAD_COLS];
    for (int j = 0, slot = 0; j < hg; j++, slot = slot == 2 ? 0 : slot + 1) {
        const int h = h0 + j, next = slot == 2 ? 0 : slot + 1, later = next == 2 ? 0 : next + 1;
        float *Wj = quad_w(m, K, j & 1), *Wn = quad_w(m, K, (j + 1) & 1);
        const float *dt = m.dt + (size_t)j * K;
        /* E(j): heads j+1 (j = 0; later heads come a head earlier) and j+2 in
         * flight; dX(j-1) out; head j's dD shares and elementwise pass */
        if (j == 0 && hg > 1) quad_stage_head<S>(a, m, row0, h + 1, next);
        if (j + 2 < hg) quad_stage_head<S>(a, m, row0, h + 2, later);
        if (PATH == QUAD_WMMA && j > 0) /* the mma path stored it in M(j-1) */
            quad_store_rows(m.dX, m.lx, K, P, a.dx + row0 * (size_t)a.dx_stride + (size_t)(h - 1) * P, a.dx_stride);
        const double pd = quad_warp_sum((double)quad_dd_share(quad_x(m, K, slot), quad_dy(m, K, slot), m.lx, K, P));
        if (lane == 0) m.dpart[w] = pd; /* dD's: a lane's P K / 256 terms */
        if (j == 0) {
            const float *Gs = quad_w(m, K, 1);
#pragma unroll
            for (int i = 0; i < QUAD_ROWS; i++)
#pragma unroll
                for (int c = 0; c < QUAD_COLS; c++) {
                    const int t = w + SSD_TC_WARPS * i, s = lane + 32 * c;
                    G[i][c] = t < K && s <= t ? Gs[(size_t)t * m.lw + s] : 0.0f, dG[i][c] = 0;
                }
        }
        quad_elementwise(m, Wj, K, m.cum + (size_t)j * K, dt, a.Dskip ? a.Dskip[h] : 0.0f, G, dG);
        if (j + 2 < hg) /* head j+1's copies (all groups but head j+2's) */
            __pipeline_wait_prior(1);
        else
            tc_stage_wait();
        __syncthreads(); /* e_j */
        /* M(j): dX(j) from W[j & 1] beside dW(j+1) into W[(j+1) & 1], one
         * deal; the head's vectors; at the last head dG into the free W */
        for (int task = w; task < ndx + (j + 1 < hg ? ntri : 0); task += SSD_TC_WARPS) {
            if (task < ndx)
                quad_dx_tile<PATH>(m, Wj, quad_dy(m, K, slot), K, p16, task,
                                   a.dx + row0 * (size_t)a.dx_stride + (size_t)h * P, (size_t)a.dx_stride, o.vec2);
            else
                quad_abt_tile<PATH>(quad_dy(m, K, next), quad_x(m, K, next), m.lx, P, task - ndx, Wn, m.lw);
        }
        if (w == QUAD_VEC_WARP) quad_head_vectors(a, o, m, dt, row0, (size_t)b * a.H + (size_t)h, h, K);
        if (j == hg - 1) {
#pragma unroll
            for (int i = 0; i < QUAD_ROWS; i++)
#pragma unroll
                for (int c = 0; c < QUAD_COLS; c++) {
                    const int t = w + SSD_TC_WARPS * i, s = lane + 32 * c;
                    if (t < K && s < K) Wn[(size_t)t * m.lw + s] = dG[i][c]; /* 0 above the diagonal */
                }
        }
        __syncthreads(); /* m_j */
    }

    /* X1: B, C again (over the slots, not dX); the last dX out */
    tc_stage_rows<typename S::stage>(a.Bm + row0 * (size_t)a.B_stride + (size_t)g * N, a.B_stride, K, N, m.eB, m.lbc);
    tc_stage_rows<typename S::stage>(a.Cm + row0 * (size_t)a.C_stride + (size_t)g * N, a.C_stride, K, N, m.eC, m.lbc);
    __pipeline_commit();
    if (PATH == QUAD_WMMA)
        quad_store_rows(m.dX, m.lx, K, P, a.dx + row0 * (size_t)a.dx_stride + (size_t)(h0 + hg - 1) * P, a.dx_stride);
    tc_stage_wait();
    __syncthreads(); /* x1 */
    /* X2: dC, dB tiles (over dX; the mma path's straight to global, no X3) */
    const float *dGs = quad_w(m, K, hg & 1);
    if constexpr (PATH != QUAD_WMMA) {
        float *dC = o.dC + row0 * (size_t)o.dC_stride + (size_t)g * N,
              *dB = o.dB + row0 * (size_t)o.dB_stride + (size_t)g * N;
        for (int tile = w; tile < 2 * l16 * n16; tile += SSD_TC_WARPS) {
            float acc[2][4];
            if (tile < l16 * n16) { /* dC: A (t, s) = dG[t lw + s] along k, B (s, n) = B[s lbc + n] */
                const int ti = tile / n16, ni = tile % n16;
                quad_raw_mma<false, PATH == QUAD_MMA_IADD>(acc, dGs + (size_t)16 * ti * m.lw, m.lw, 1, m.eB + 16 * ni,
                                                           m.lbc, 1, 16 * (ti + 1));
                quad_raw_store(acc, dC + (size_t)16 * ti * o.dC_stride + 16 * ni, (size_t)o.dC_stride, o.vec2);
            } else { /* dB: A (s, t) = dG[t lw + s], B (t, n) = C[t lbc + n]: both k-major */
                const int k = tile - l16 * n16, si = k / n16, ni = k % n16, t0 = 16 * si;
                quad_raw_mma<true, PATH == QUAD_MMA_IADD>(acc, dGs + (size_t)t0 * m.lw + t0, 1, m.lw,
                                                          m.eC + (size_t)t0 * m.lbc + 16 * ni, m.lbc, 1, K - t0);
                quad_raw_store(acc, dB + (size_t)t0 * o.dB_stride + 16 * ni, (size_t)o.dB_stride, o.vec2);
            }
        }
    } else {
        for (int tile = w; tile < 2 * l16 * n16; tile += SSD_TC_WARPS) {
            acc_t acc;
            if (tile < l16 * n16) { /* dC[t, n] = sum_{s<=t} dG[t, s] B[s, n] */
                const int ti = tile / n16, ni = tile % n16;
                quad_mma<true, true>(acc, dGs + (size_t)16 * ti * m.lw, m.lw, m.eB + 16 * ni, m.lbc, 16 * (ti + 1));
                wmma::store_matrix_sync(m.dCo + (size_t)16 * ti * m.lbc + 16 * ni, acc, m.lbc, wmma::mem_row_major);
            } else { /* dB[s, n] = sum_{t>=s} dG[t, s] C[t, n]: dG^T as A col-major */
                const int k = tile - l16 * n16, si = k / n16, ni = k % n16, t0 = 16 * si;
                quad_mma<false, true>(acc, dGs + (size_t)t0 * m.lw + t0, m.lw, m.eC + (size_t)t0 * m.lbc + 16 * ni,
                                      m.lbc, K - t0);
                wmma::store_matrix_sync(m.dBo + (size_t)t0 * m.lbc + 16 * ni, acc, m.lbc, wmma::mem_row_major);
            }
        }
        __syncthreads(); /* x2 */
        /* X3 */
        quad_store_rows(m.dCo, m.lbc, K, N, o.dC + row0 * (size_t)o.dC_stride + (size_t)g * N, o.dC_stride);
        quad_store_rows(m.dBo, m.lbc, K, N, o.dB + row0 * (size_t)o.dB_stride + (size_t)g * N, o.dB_stride);
    }
}

static int quad_on = 1, quad_mma_on = 2;
extern "C" void st_cuda_ssd_set_scan_quad_backward(int on) { quad_on = on != 0; }
extern "C" void st_cuda_ssd_set_scan_quad_backward_mma(int mode) { quad_mma_on = mode >= 0 && mode <= 2 ? mode : 2; }

/* Which kernel a call of these sizes runs (when the quad backward runs at
 * all): the WMMA path, the mma path at the runtime shape, or at the default
 * preset's constants (under st_cuda_ssd_set_scan_fixed_shape). */
extern "C" int st_cuda_ssd_scan_quad_backward_variant(int K, int P, int N) {
    if (!quad_mma_on) return ST_SSD_QUAD_WMMA;
    return ssd_fixed_shape_on() && quad_shape_default::takes(K, P, N) ? ST_SSD_QUAD_MMA_FIXED : ST_SSD_QUAD_MMA;
}

static size_t quad_smem_bytes(int K, int H, int P, int G, int N) {
    return sizeof(float) * quad_smem_floats(K, H / G, P, N);
}

int st_cuda_ssd_scan_quad_fits(int Bsz, int K, int H, int P, int G, int N, size_t smem_optin) {
    if (!quad_on || st_cuda_matmul_precision() != ST_MATMUL_BF16 || Bsz <= 0 || G <= 0 || H % G != 0) return 0;
    if (K <= 0 || K > QUAD_MAX_K || K % 16 != 0 || P <= 0 || P % 16 != 0 || N <= 0 || N % 16 != 0) return 0;
    return quad_smem_bytes(K, H, P, G, N) <= smem_optin && (size_t)Bsz * (size_t)G <= (size_t)INT_MAX;
}

template <class S, int PATH>
static int quad_launch(const ssd_dev_args &a, const quad_out &o, size_t bytes, cudaStream_t stream) {
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(scan_quad_backward_kernel<S, PATH>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    scan_quad_backward_kernel<S, PATH><<<(unsigned)((size_t)a.Bsz * a.G), SSD_THREADS, bytes, stream>>>(a, o);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* 1 when p and a row stride of `stride` floats put every row on 8 bytes. */
static int quad_on8(const float *p, int stride) { return ((uintptr_t)p & 7) == 0 && stride % 2 == 0; }

int st_cuda_ssd_scan_quad_backward(const ssd_dev_args &a, float *dB, int dB_stride, float *dC, int dC_stride,
                                   float *partA, float *partD, size_t smem_optin, void *stream, int *taken) {
    *taken = 0;
    if (!st_cuda_ssd_scan_quad_fits(a.Bsz, a.K, a.H, a.P, a.G, a.N, smem_optin)) return ST_OK;
    const size_t bytes = quad_smem_bytes(a.K, a.H, a.P, a.G, a.N);
    quad_out o;
    o.dB = dB, o.dC = dC, o.partA = partA, o.partD = partD, o.dB_stride = dB_stride, o.dC_stride = dC_stride;
    o.vec2 = quad_on8(a.dx, a.dx_stride) && quad_on8(dB, dB_stride) && quad_on8(dC, dC_stride); /* P, N even */
    const cudaStream_t s = (cudaStream_t)stream;
    const int variant = st_cuda_ssd_scan_quad_backward_variant(a.K, a.P, a.N), iadd = quad_mma_on == 2;
    if (variant == ST_SSD_QUAD_MMA_FIXED && iadd)
        ST_TRY((quad_launch<quad_shape_default, QUAD_MMA_IADD>(a, o, bytes, s)));
    else if (variant == ST_SSD_QUAD_MMA_FIXED)
        ST_TRY((quad_launch<quad_shape_default, QUAD_MMA>(a, o, bytes, s)));
    else if (variant == ST_SSD_QUAD_MMA && iadd)
        ST_TRY((quad_launch<quad_shape_any, QUAD_MMA_IADD>(a, o, bytes, s)));
    else if (variant == ST_SSD_QUAD_MMA)
        ST_TRY((quad_launch<quad_shape_any, QUAD_MMA>(a, o, bytes, s)));
    else
        ST_TRY((quad_launch<quad_shape_any, QUAD_WMMA>(a, o, bytes, s)));
    *taken = 1;
    return ST_OK;
}
