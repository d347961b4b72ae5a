/* vsn_backward_fused_tc.cu: the fused VSN backward (model/
 * vsn_backward_fused.cu) with its products on the tensor cores, for the
 * bf16 matmul precision (the API: cuda/vsn_backward_fused_cuda.h,
 * st_cuda_vsn_set_fused_backward_tc). The same math per row r and variable
 * j (see the fp32 kernel's comment), the same outputs: dalpha_j and the ds
 * part per row ([F][rows] doubles), a block's partial of NP doubles per
 * (split, variable) in bwd_part's layout, then the fp32 kernel's
 * bwd_finish_kernel, dlog and ds kernels as they are. Both modes: window
 * rows (alpha, dv, dalpha) and the training bar table (src_rows, dT).
 *
 * A block per (variable j, row split sp), T = 256 threads, walks its
 * split's tiles of R = 128 rows; warp w owns the tile's rows 16 w .. 16 w
 * + 15 (one m16n8k16 m-tile), lane (g, q) its rows g and g + 8 (lane = 4 g
 * + q). In registers, fragments as vsn_forward_fused_tc.cu's (its comment
 * gives the layouts; a lane holds columns c = 8 p + 2 q + e, e < 2, of
 * every Dv-wide n-tile set, "the accumulator layout"):
 *   h1 = ELU(s U + V) formed into P2's A (its fp32 values kept for ELU');
 *   P2 h2 = h1 W2^T;  P3 g = h2 Wg^T, h2's accumulators P3's A in place;
 *   the gate, the statistics (a row's Dv outputs in its quad: 2-step
 *     butterflies), t, dalpha_j, the norm and gate backward on P3's
 *     accumulators, dgl = [dx sg; dx g1 sg (1 - sg)] in their place;
 *   P4 dh2 = dgl Wg: dgl's n-tiles 2 kt, 2 kt + 1 are columns 16 kt ..
 *     16 kt + 15 of [dx sg, dx g1 sg'] (n-tile p < Dv / 8 is column 8 p +
 *     .., p >= Dv / 8 column Dv + 8 (p - Dv / 8) + .. = 8 p + ..): P4's A
 *     of k-tile kt in place, as P3's from h2;
 *   P5 dh1 = (dh2 W2) ELU'(h1): dh2's accumulators P5's A in place; P5's
 *     accumulator (g, 8 p + 2 q + e) is h1's A element of k-tile p / 2
 *     (columns 16 kt + 2 q + {0, 1, 8, 9}): ELU' from the kept fp32 h1.
 * B operands are the variable's weights, constant for the block: staged
 * once as bf16 in fragment order (bfrag: for product P, k-tile kt, n-tile
 * pair np, lane l, one uint4 {b0, b1 of n-tile 2 np, b0, b1 of 2 np + 1}),
 * one conflict-free LDS.128 (a warp's 512 contiguous bytes) per two mma.
 * The weight gradients are products over rows (K = the tile's 128 rows):
 * each warp stores its h1, h2 (P2's and P3's A), dgl and dh2 (P4's and
 * P5's A) as bf16 with stmatrix ([R][cols + 8] rows: 8 rows x 16 bytes of
 * a matrix in distinct banks), one barrier, then every warp forms its part
 * of dWg += dgl^T h2 and dW2 += dh2^T h1 over all 128 rows, A (dgl^T,
 * dh2^T) and B (h2, h1) by ldmatrix.trans: at Dv = 32 warp w one 16 x 16
 * block of dWg (m-tile w / 2, n-tiles 2 (w % 2) + {0, 1}) and one 16 x 8
 * of dW2 (m-tile w / 4, n-tile w % 4) over the 8 k-steps; at Dv = 16 the
 * 2 + 2 such units, the rows cut in 4 k-parts (warp w: unit w % 2, part w
 * / 2). 12 fp32 accumulators a lane for the whole split; two staging
 * buffers alternate by tile, so one barrier a tile (a buffer is rewritten
 * two tiles later, after every warp passed the barrier between).
 * Column sums: a lane adds its two rows, then the 8 lanes of a column
 * group (xor 16, 8, 4) by a transposing butterfly (each step keeps half
 * the values: 4 + 2 + 1 shuffles for 8), ending with one column a lane;
 * accumulated across tiles a lane (8 doubles), the warps added in order at
 * the end.
 *
 * Numbers:
 *   - the products round their operands to bf16 (nearest even): h1, h2,
 *     dgl, dh2 and the weights, and accumulate in fp32 (k in ascending
 *     order within an mma, the mma in ascending k-tiles; the weight
 *     gradients in ascending row steps across the split's tiles): the
 *     bf16 mode's contract (cuBLAS's bf16 products, the forward's tensor
 *     cores); outputs within bf16 product error of the fp32 kernel's;
 *   - h1, the gate, the statistics, xhat, t, dalpha_j, the norm and gate
 *     backward, ELU' and the ds part are the fp32 kernel's expressions in
 *     fp32 and double (its double row sums: 2 Dv / 8 values a lane, then
 *     the quad's butterfly);
 *   - the column sums ln_w, X, Sx, q, Q fp32 within a tile (the lane's
 *     two rows, the 8-lane butterfly; FS, the default) or double there
 *     too (st_cuda_vsn_set_fused_backward_tc_fsum(0)), double across the
 *     tiles, the warps in order and the splits in order; gg and fc2_b fp32
 *     within a tile and double across tiles, as the fp32 kernel's;
 *   - dWg and dW2 are fp32 over the split's rows (the mma's accumulators;
 *     the fp32 kernel: fp32 within a tile, double across), double across
 *     the splits (bwd_finish_kernel) and across k-parts (Dv = 16).
 * No atomics, no data-dependent order; the splits depend on rows and F
 * only: bit-identical run to run. Counted in bench/notes-vsntc.md. */
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "cuda/check.h"
#include "cuda/mma_bf16_device.cuh"
#include "cuda/vsn_backward_fused_device.cuh"
#include "cuda/vsn_device.cuh"
#include "cuda/vsn_quad_device.cuh"
#include "cuda/vsn_tile_device.cuh" /* row_sum */

extern "C" {
#include "cuda/linear_cuda.h" /* st_cuda_matmul_precision, st_rowsplit_range */
#include "cuda/vsn_backward_fused_cuda.h"
}

static int bwd_tc_on = 1; /* st_cuda_vsn_set_fused_backward_tc */
extern "C" void st_cuda_vsn_set_fused_backward_tc(int on) { bwd_tc_on = on != 0; }
static int bwd_tc_fsum = 1; /* st_cuda_vsn_set_fused_backward_tc_fsum */
extern "C" void st_cuda_vsn_set_fused_backward_tc_fsum(int on) { bwd_tc_fsum = on != 0; }

extern "C" int st_cuda_vsn_backward_fused_tc_takes(int Dv) {
    return st_cuda_matmul_precision() == ST_MATMUL_BF16 && bwd_tc_on && (Dv == 16 || Dv == 32);
}

#define BTC_THREADS 256

/* The tile's sizes and the shared-memory layout (bytes) for one Dv. */
template <int DV> struct bwd_tc_shape : bwd_part<DV> {
    static constexpr int T = BTC_THREADS, W = T / 32, R = 16 * W;
    static constexpr int NT = DV / 8, KT = DV / 16; /* n-tiles of a Dv-wide product, k-tiles of a Dv-deep one */
    /* bfrag (uint4 units): P2 (KT k-tiles x NT / 2 pairs), P3 (KT x NT), P4 (2 KT x NT / 2), P5 (KT x NT / 2) */
    static constexpr int F2 = 0, F3 = F2 + KT * (NT / 2) * 32, F4 = F3 + KT * NT * 32, F5 = F4 + KT * NT * 32,
                         NF = F5 + KT * (NT / 2) * 32;
    /* a staging buffer (bf16): dgl [R][LDD], h2, dh2, h1 [R][LDS] */
    static constexpr int LDD = 2 * DV + 8, LDS = DV + 8;
    static constexpr int SD = 0, SH2 = R * LDD, SD2 = SH2 + R * LDS, SH1 = SD2 + R * LDS, BUF = SH1 + R * LDS;
    static constexpr int VEC_AT = 16 * NF, STG_AT = VEC_AT + 4 * 8 * DV, BYTES = STG_AT + 2 * 2 * BUF;
    /* the weight gradients' units (dWg: a 16 x 16 block, dW2: a 16 x 8 one) and the rows' k-parts */
    static constexpr int NU = (2 * DV / 16) * (NT / 2), KP = W / NU, KSTEPS = R / 16 / KP;
    /* the end's exchange (in the staging buffers): dW accumulators [W][12][32] floats, column sums
     * [W][8][DV] doubles */
    static constexpr int XW_AT = STG_AT, XC_AT = XW_AT + 4 * W * 12 * 32;
    static_assert(DV == 16 || DV == 32, "a quad of lanes holds a row: Dv / 4 outputs a lane, at most 8");
    static_assert(NU == (DV / 16) * NT && W % NU == 0, "dWg's and dW2's units pair up over the warps");
    static_assert(XC_AT + 8 * W * 8 * DV <= BYTES && (LDD * 2) % 16 == 0 && (LDS * 2) % 16 == 0, "layout");
};

/* The sum of v[0..N) over the 8 lanes of the lane's column group (xor 16, 8, 4), each step
 * keeping half: lane (g, q) ends with value g / (8 / N)'s sum (lanes g, g ^ 1 the same when N =
 * 4). */
template <int N, int O = 16, typename X> __device__ static inline X col_reduce(X *v, int lane) {
    if constexpr (O < 4) {
        return v[0];
    } else if constexpr (N > 1) {
        const bool up = (lane & O) != 0;
#pragma unroll
        for (int i = 0; i < N / 2; i++) {
            const X send = up ? v[i] : v[i + N / 2], keep = up ? v[i + N / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
        }
        return col_reduce<N / 2, O / 2>(v, lane);
    } else {
        v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
        return col_reduce<1, O / 2>(v, lane);
    }
}

/* The accumulator-layout values of a 16-row m-tile's n-tiles into P's A of k-tile kt (n-tiles 2 kt,
 * 2 kt + 1), bf16. */
__device__ static inline void pack_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
    a[0] = bf16x2(lo[0], lo[1]), a[1] = bf16x2(lo[2], lo[3]), a[2] = bf16x2(hi[0], hi[1]), a[3] = bf16x2(hi[2], hi[3]);
}

/* d[n-tile] += A B over the product's NP n-tile pairs and KK k-tiles, B from bfrag at f. */
template <int NP2, int KK, int NN>
__device__ static inline void mma_frag(float (&d)[NN][4], const uint32_t (&a)[KK][4], const uint4 *f, int lane) {
#pragma unroll
    for (int kt = 0; kt < KK; kt++)
#pragma unroll
        for (int np = 0; np < NP2; np++) {
            const uint4 b = f[(kt * NP2 + np) * 32 + lane];
            mma_bf16(d[2 * np], a[kt], b.x, b.y);
            mma_bf16(d[2 * np + 1], a[kt], b.z, b.w);
        }
}

/* Store a warp's 16 x 16 block (P's A of one k-tile) at rows 0..15, columns col0.. of base [16][ld]. */
__device__ static inline void stage_a(__nv_bfloat16 *base, int ld, int col0, const uint32_t (&a)[4], int lane) {
    const int m = lane >> 3;
    stsm_x4(base + ((lane & 7) + 8 * (m & 1)) * ld + col0 + 8 * (m >> 1), a);
}

/* B(k, n) of product P (0: P2, 1: P3, 2: P4, 3: P5) from variable j's fp32 weights. */
template <int DV> __device__ static inline float bfrag_b(int P, const float *W2, const float *Wg, int k, int n) {
    return P == 0 ? W2[n * DV + k] : P == 1 ? Wg[n * DV + k] : P == 2 ? Wg[k * DV + n] : W2[k * DV + n];
}

/* __launch_bounds__: 128 registers a thread, two blocks an SM. TT: the table mode. FS: the column
 * sums ln_w, X, Sx, q, Q in fp32 within a tile (the lane's rows and the butterfly; double across
 * tiles), as gg and fc2_b: half the shuffles (st_cuda_vsn_set_fused_backward_tc_fsum). */
template <int DV, bool TT, bool FS>
static __global__ void __launch_bounds__(BTC_THREADS, 2) vsn_bwd_tc_kernel(bwd_args a) {
    typedef bwd_tc_shape<DV> S;
    typedef typename std::conditional<FS, float, double>::type CS; /* a tile's column-sum terms */
    constexpr int NT = S::NT, KT = S::KT, R = S::R, T = S::T, LDD = S::LDD, LDS = S::LDS;
    extern __shared__ uint4 btc_smem4[];
    unsigned char *smb = reinterpret_cast<unsigned char *>(btc_smem4);
    const uint4 *bfr = btc_smem4;
    float *vec = reinterpret_cast<float *>(smb + S::VEC_AT);
    __nv_bfloat16 *stg = reinterpret_cast<__nv_bfloat16 *>(smb + S::STG_AT);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int j = blockIdx.x, sp = blockIdx.y;
    /* the variable's weights as B fragments (bf16), its vectors */
    {
        const float *W2 = a.W2 + (size_t)j * DV * DV, *Wg = a.Wg + (size_t)j * 2 * DV * DV;
        uint32_t *bw = reinterpret_cast<uint32_t *>(btc_smem4);
        for (int i = tid; i < 4 * S::NF; i += T) {
            const int P = i < 4 * S::F3 ? 0 : i < 4 * S::F4 ? 1 : i < 4 * S::F5 ? 2 : 3;
            const int at = P == 0 ? S::F2 : P == 1 ? S::F3 : P == 2 ? S::F4 : S::F5, pairs = P == 1 ? NT : NT / 2;
            const int li = i - 4 * at, w = li & 3, l = (li >> 2) & 31, blk = li >> 7;
            const int kt = blk / pairs, pn = 2 * (blk % pairs) + (w >> 1);
            const int k = 16 * kt + 2 * (l & 3) + 8 * (w & 1), n = 8 * pn + (l >> 2);
            bw[i] = bf16x2(bfrag_b<DV>(P, W2, Wg, k, n), bfrag_b<DV>(P, W2, Wg, k + 1, n));
        }
        bwd_stage_vec<DV, T>(a, j, vec, tid);
    }
    const int rows = TT ? min(*a.nrows, a.rows) : a.rows;
    long t0, t1;
    st_rowsplit_range(((long)rows + R - 1) / R, a.splits, sp, &t0, &t1);
    const bool dv_pairs = ((uintptr_t)a.dv & 7) == 0 && a.dv_stride % 2 == 0 && a.dv_jstride % 2 == 0;
    /* the weight gradients' unit: dWg m-tile gm, n-tiles 2 gp, 2 gp + 1; dW2 m-tile wm, n-tile wn;
     * the rows' k-steps kp KSTEPS .. */
    const int unit = warp % S::NU, kp = warp / S::NU;
    const int gm = unit / (NT / 2), gp = unit % (NT / 2), wm = unit / NT, wn = unit % NT;
    float accw[3][4]; /* dWg n-tiles 2 gp, 2 gp + 1; dW2 */
    double csum[8];   /* column sums: ln_w, X, Sx, q, Q, gg (first Dv), gg (last Dv), fc2_b */
#pragma unroll
    for (int u = 0; u < 3; u++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            accw[u][c] = 0;
#pragma unroll
    for (int v = 0; v < 8; v++)
        csum[v] = 0;
    /* s of the lane's rows a tile ahead: the next tile's source rows (table mode) at a tile's
     * start, its s after P5, so neither dependent load waits at the tile's start */
    float sn[2];
    int srcn[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const size_t row = (size_t)t0 * R + 16 * warp + g + 8 * h;
        const bool in0 = t0 < t1 && row < (size_t)rows;
        const size_t src = TT && in0 ? (size_t)a.src_rows[row] : row;
        sn[h] = in0 ? a.s[src * (size_t)a.s_stride + j] : 0.0f;
    }
    __syncthreads(); /* the fragments and vectors staged */
    for (long tile = t0; tile < t1; tile++) {
        __nv_bfloat16 *buf = stg + ((tile - t0) & 1) * S::BUF;
        /* the lane's rows (h = 0: g, 1: g + 8) */
        float sj[2], aj[2], dal[2];
        size_t rowh[2];
        bool in[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const size_t row = (size_t)tile * R + 16 * warp + g + 8 * h, next = row + R;
            rowh[h] = row, in[h] = row < (size_t)rows;
            sj[h] = sn[h];
            srcn[h] = TT && tile + 1 < t1 && next < (size_t)rows ? a.src_rows[next] : 0;
            aj[h] = !in[h] ? 0.0f : TT ? 1.0f : a.alpha[row * (size_t)a.alpha_stride + j];
            dal[h] = !TT && in[h] && a.dalpha ? a.dalpha[row * (size_t)a.dalpha_stride + j] : 0.0f;
        }
        /* h1 into P2's A; ELU'(h1) in the accumulator layout (fp16 pairs, [p][h]: fewer live
         * registers; the h1 values of the A fragment's columns 16 kt + 2 q + {0, 1} are n-tile
         * p = 2 kt's, + {8, 9} n-tile 2 kt + 1's) */
        uint32_t a1[KT][4];
        __half2 eg[NT][2];
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
            const int k = 16 * kt + 2 * q;
            const float2 U0 = lds2(vec + S::U * DV + k), V0 = lds2(vec + S::V * DV + k);
            const float2 U8 = lds2(vec + S::U * DV + k + 8), V8 = lds2(vec + S::V * DV + k + 8);
            float hf[2][4]; /* n-tiles 2 kt, 2 kt + 1: [row g, g + 8][e] as an accumulator */
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    hf[0][2 * h + e] = dev_elu(sj[h] * comp(U0, e) + comp(V0, e));
                    hf[1][2 * h + e] = dev_elu(sj[h] * comp(U8, e) + comp(V8, e));
                }
            pack_a(a1[kt], hf[0], hf[1]);
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    eg[2 * kt + u][h] =
                        __floats2half2_rn(elu_grad_from_out(hf[u][2 * h]), elu_grad_from_out(hf[u][2 * h + 1]));
        }
        /* P2: h2 = h1 W2^T; P3: g = h2 Wg^T */
        float h2[NT][4], gq[2 * NT][4];
#pragma unroll
        for (int p = 0; p < NT; p++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                h2[p][c] = gq[p][c] = gq[NT + p][c] = 0;
        mma_frag<NT / 2, KT>(h2, a1, bfr + S::F2, lane);
        uint32_t a2[KT][4];
#pragma unroll
        for (int kt = 0; kt < KT; kt++)
            pack_a(a2[kt], h2[2 * kt], h2[2 * kt + 1]);
        mma_frag<NT, KT>(gq, a2, bfr + S::F3, lane);
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
            stage_a(buf + S::SH1 + 16 * warp * LDS, LDS, 16 * kt, a1[kt], lane);
            stage_a(buf + S::SH2 + 16 * warp * LDS, LDS, 16 * kt, a2[kt], lane);
        }
        /* dv of the lane's rows and columns (loaded here: fewer live registers in P2 and P3) */
        float dvr[2][2 * NT];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float *dvp = a.dv + rowh[h] * (size_t)a.dv_stride + (TT ? (size_t)j * a.dv_jstride : 0) + 2 * q;
#pragma unroll
            for (int p = 0; p < NT; p++) {
                if (!in[h]) {
                    dvr[h][2 * p] = dvr[h][2 * p + 1] = 0.0f;
                } else if (dv_pairs) {
                    const float2 d = __ldg(reinterpret_cast<const float2 *>(dvp + 8 * p));
                    dvr[h][2 * p] = d.x, dvr[h][2 * p + 1] = d.y;
                } else {
                    dvr[h][2 * p] = __ldg(dvp + 8 * p), dvr[h][2 * p + 1] = __ldg(dvp + 8 * p + 1);
                }
            }
        }
        /* per row: the gate, the statistics, t, dalpha_j, the norm and gate backward (the fp32
         * kernel's expressions); dgl into P4's A (a row's half of each register pair), the row's
         * column sums of pw, dx, s dx (double) and dgl (gg: fp32 within the tile) */
        uint32_t a3[2 * KT][4];
        double exr[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float x[2 * NT], sg[2 * NT];
            quad_gate_x<NT>(gq, h, q, sj[h], vec + S::B1 * DV, vec + S::B2 * DV, vec + S::EW * DV, vec + S::EB * DV, x,
                            sg);
            double sum = 0;
#pragma unroll
            for (int c = 0; c < 2 * NT; c++)
                sum += x[c];
            sum = row_sum<4>(sum) / DV;
            double var = 0;
#pragma unroll
            for (int c = 0; c < 2 * NT; c++)
                var += ((double)x[c] - sum) * ((double)x[c] - sum);
            var = row_sum<4>(var);
            const float mean = (float)sum, rs = (float)(1.0 / sqrt(var / DV + VSN_EPS));
            const double ajd = (double)aj[h];
            double da = 0, sgk = 0, sgx = 0;
            CS v[2 * NT];
#pragma unroll
            for (int p = 0; p < NT; p++) {
                const int o = 8 * p + 2 * q;
                const float2 lw2 = lds2(vec + S::LNW * DV + o), lb2 = lds2(vec + S::LNB * DV + o);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int c = 2 * p + e;
                    const float lw = comp(lw2, e), xh = xhat_of(x[c], mean, rs);
                    const float t = xh * lw + comp(lb2, e);
                    da += (double)dvr[h][c] * (double)t;
                    const double ad = ajd * dvr[h][c], gk = ad * lw;
                    sgk += gk;
                    sgx += gk * xh;
                    v[c] = (CS)((float)ad * xh);
                }
            }
            csum[0] += (double)col_reduce<2 * NT>(v, lane);
            da = row_sum<4>(da) + (double)dal[h];
            sgk = row_sum<4>(sgk) / DV;
            sgx = row_sum<4>(sgx) / DV;
            double ex = 0;
            CS w[2 * NT];
#pragma unroll
            for (int p = 0; p < NT; p++) {
                const int o = 8 * p + 2 * q;
                const float2 lw2 = lds2(vec + S::LNW * DV + o), ew2 = lds2(vec + S::EW * DV + o);
                const float2 b1 = lds2(vec + S::B1 * DV + o);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int c = 2 * p + e;
                    const float g1 = gq[p][2 * h + e] + comp(b1, e); /* again: fewer live registers */
                    const double gk = ajd * dvr[h][c] * comp(lw2, e);
                    const float xh = xhat_of(x[c], mean, rs);
                    const float dx = (float)((double)rs * (gk - sgk - xh * sgx));
                    gq[p][2 * h + e] = dx * sg[c];
                    gq[NT + p][2 * h + e] = dx * g1 * sg[c] * (1.0f - sg[c]);
                    v[c] = (CS)dx;
                    w[c] = (CS)(sj[h] * dx);
                    ex += (double)dx * comp(ew2, e);
                }
            }
            csum[1] += (double)col_reduce<2 * NT>(v, lane);
            csum[2] += (double)col_reduce<2 * NT>(w, lane);
            exr[h] = row_sum<4>(ex);
            if (!TT && q == 0 && in[h]) a.dad[(size_t)j * a.rows + rowh[h]] = da;
            /* the row's dgl: its halves of P4's A registers, its gg column sums */
            float lo[2 * NT], hi[2 * NT];
#pragma unroll
            for (int p = 0; p < NT; p++)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    lo[2 * p + e] = gq[p][2 * h + e], hi[2 * p + e] = gq[NT + p][2 * h + e];
#pragma unroll
            for (int kt = 0; kt < 2 * KT; kt++) {
                a3[kt][h] = bf16x2(gq[2 * kt][2 * h], gq[2 * kt][2 * h + 1]);
                a3[kt][2 + h] = bf16x2(gq[2 * kt + 1][2 * h], gq[2 * kt + 1][2 * h + 1]);
            }
            csum[5] += (double)col_reduce<2 * NT>(lo, lane);
            csum[6] += (double)col_reduce<2 * NT>(hi, lane);
        }
#pragma unroll
        for (int kt = 0; kt < 2 * KT; kt++)
            stage_a(buf + S::SD + 16 * warp * LDD, LDD, 16 * kt, a3[kt], lane);
        /* P4: dh2 = dgl Wg; fc2_b's column sums; dh2 into P5's A and the staging */
        float d2[NT][4], d1[NT][4];
#pragma unroll
        for (int p = 0; p < NT; p++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                d2[p][c] = d1[p][c] = 0;
        mma_frag<NT / 2, 2 * KT>(d2, a3, bfr + S::F4, lane);
        {
            float v[2 * NT];
#pragma unroll
            for (int p = 0; p < NT; p++)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    v[2 * p + e] = d2[p][e] + d2[p][2 + e];
            csum[7] += (double)col_reduce<2 * NT>(v, lane);
        }
        uint32_t a4[KT][4];
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
            pack_a(a4[kt], d2[2 * kt], d2[2 * kt + 1]);
            stage_a(buf + S::SD2 + 16 * warp * LDS, LDS, 16 * kt, a4[kt], lane);
        }
        /* P5: dh1 = (dh2 W2) ELU'(h1); q, Q (double) and the ds part */
        mma_frag<NT / 2, KT>(d1, a4, bfr + S::F5, lane);
        {
            CS v[2 * NT], w[2 * NT];
            double e0 = 0, e1 = 0;
#pragma unroll
            for (int p = 0; p < NT; p++) {
                const float2 U2 = lds2(vec + S::U * DV + 8 * p + 2 * q);
                const float2 eg0 = __half22float2(eg[p][0]), eg1 = __half22float2(eg[p][1]);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int c = 2 * p + e;
                    const float dh0 = d1[p][e] * comp(eg0, e), dh1 = d1[p][2 + e] * comp(eg1, e);
                    v[c] = (CS)dh0 + (CS)dh1;
                    w[c] = (CS)(sj[0] * dh0) + (CS)(sj[1] * dh1);
                    e0 += (double)dh0 * comp(U2, e);
                    e1 += (double)dh1 * comp(U2, e);
                }
            }
            e0 = row_sum<4>(e0);
            e1 = row_sum<4>(e1);
            if (!TT && q == 0 && a.dsv) {
                if (in[0]) a.dsv[(size_t)j * a.rows + rowh[0]] = exr[0] + e0;
                if (in[1]) a.dsv[(size_t)j * a.rows + rowh[1]] = exr[1] + e1;
            }
            csum[3] += (double)col_reduce<2 * NT>(v, lane);
            csum[4] += (double)col_reduce<2 * NT>(w, lane);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) { /* the next tile's s */
            const size_t next = rowh[h] + R;
            const bool inn = tile + 1 < t1 && next < (size_t)rows;
            sn[h] = inn ? a.s[(TT ? (size_t)srcn[h] : next) * (size_t)a.s_stride + j] : 0.0f;
        }
        __syncthreads(); /* the tile's staging complete (and the other buffer's last readers done) */
        /* dWg += dgl^T h2, dW2 += dh2^T h1 over the tile's rows (this warp's unit and k-part) */
        {
            const int m = lane >> 3, rr = lane & 7;
#pragma unroll
            for (int ks = 0; ks < S::KSTEPS; ks++) {
                const int r0 = 16 * (kp * S::KSTEPS + ks);
                uint32_t ag[4], bg[4], a2w[4], b2w[2];
                ldsm_x4_trans(ag, buf + S::SD + (r0 + rr + 8 * (m >> 1)) * LDD + 16 * gm + 8 * (m & 1));
                ldsm_x4_trans(bg, buf + S::SH2 + (r0 + rr + 8 * (m & 1)) * LDS + 16 * gp + 8 * (m >> 1));
                ldsm_x4_trans(a2w, buf + S::SD2 + (r0 + rr + 8 * (m >> 1)) * LDS + 16 * wm + 8 * (m & 1));
                ldsm_x2_trans(b2w, buf + S::SH1 + (r0 + rr + 8 * (m & 1)) * LDS + 8 * wn);
                mma_bf16(accw[0], ag, bg[0], bg[1]);
                mma_bf16(accw[1], ag, bg[2], bg[3]);
                mma_bf16(accw[2], a2w, b2w[0], b2w[1]);
            }
        }
    }
    /* the end: the warps' accumulators through shared memory, added in order into the partial */
    __syncthreads();
    float *xw = reinterpret_cast<float *>(smb + S::XW_AT);
    double *xc = reinterpret_cast<double *>(smb + S::XC_AT);
#pragma unroll
    for (int i = 0; i < 12; i++)
        xw[(warp * 12 + i) * 32 + lane] = accw[i / 4][i % 4];
    constexpr int REP = 8 / (2 * NT); /* lanes g holding the same column */
    if (g % REP == 0) {
        const int c = g / REP, o = 8 * (c / 2) + 2 * q + c % 2;
#pragma unroll
        for (int v = 0; v < 8; v++)
            xc[(warp * 8 + v) * DV + o] = csum[v];
    }
    __syncthreads();
    double *part = a.parts + ((size_t)sp * a.F + j) * S::NP;
    for (int i = tid; i < S::NP; i += T) {
        double t = 0;
        if (i < S::GG) { /* dWg [2 DV][DV], then dW2 [DV][DV]: (unit, register, lane) */
            const bool w2 = i >= S::NWG;
            const int o = (w2 ? i - S::NWG : i) / DV, k = (w2 ? i - S::NWG : i) % DV;
            const int u = w2 ? (o / 16) * NT + k / 8 : (o / 16) * (NT / 2) + k / 16;
            const int reg = (w2 ? 8 : 4 * ((k % 16) / 8)) + 2 * ((o % 16) / 8) + k % 2;
            const int l = 4 * (o % 8) + (k % 8) / 2;
            for (int p = 0; p < S::KP; p++)
                t += (double)xw[((u + S::NU * p) * 12 + reg) * 32 + l];
        } else { /* column sums: csum's vector v, column o */
            int v, o;
            if (i < S::FB)
                v = i - S::GG < DV ? 5 : 6, o = (i - S::GG) % DV;
            else if (i < S::NACC)
                v = 7, o = i - S::FB;
            else
                v = (i - S::NACC) / DV, o = (i - S::NACC) % DV; /* CLNW, CX, CSX, CQ1, CQS: csum 0..4 */
            for (int w = 0; w < S::W; w++)
                t += xc[(w * 8 + v) * DV + o];
        }
        part[i] = t;
    }
}

template <int DV, bool TT, bool FS> static int tc_launch_fs(const bwd_args &a, cudaStream_t st) {
    typedef bwd_tc_shape<DV> S;
    ST_CUDA_TRY(cudaFuncSetAttribute(vsn_bwd_tc_kernel<DV, TT, FS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)S::BYTES));
    vsn_bwd_tc_kernel<DV, TT, FS><<<dim3((unsigned)a.F, (unsigned)a.splits), S::T, S::BYTES, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

template <int DV, bool TT> static int tc_launch(const bwd_args &a, cudaStream_t st) {
    return bwd_tc_fsum ? tc_launch_fs<DV, TT, true>(a, st) : tc_launch_fs<DV, TT, false>(a, st);
}

int vsn_bwd_tc_launch(const bwd_args &a, int Dv, bool tt, cudaStream_t st) {
    ST_REQUIRE(Dv == 16 || Dv == 32, ST_ERR_INTERNAL, "VSN tensor-core backward: Dv = %d is not 16 or 32", Dv);
    if (tt) return Dv == 16 ? tc_launch<16, true>(a, st) : tc_launch<32, true>(a, st);
    return Dv == 16 ? tc_launch<16, false>(a, st) : tc_launch<32, false>(a, st);
}
