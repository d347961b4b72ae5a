/* vsn_table_fill_tc.cu: the VSN bar table's fill on the tensor cores (bf16
 * mode) with a block per (variable j, row split), for both table fills
 * (st_cuda_vsn_table_fill, _fill_rows in model/vsn_forward_fused.cu; the
 * switch st_cuda_vsn_set_table_fill_j in cuda/vsn_forward_fused_cuda.h).
 * Per table row r and variable j, as vsn_fused_tc_kernel's table mode
 * (model/vsn_forward_fused_tc.cu; its comment gives the mma.m16n8k16
 * fragment layouts this file uses):
 *     h1 = ELU(s[r, j] U_j + V_j), h2 = h1 W2_j^T, [g1; g2] = h2 Wg_j^T + Vg_j,
 *     x = (s[r, j] ew_j + eb_j) + g1 sigma(g2),  tab[r, j Dv ..] = LN_j(x).
 *
 * Why another kernel: vsn_fused_tc_kernel's block owns rows and walks
 * every variable, re-staging the variable's fp32 weights by cp.async (a
 * barrier a variable, 17.4 KB of L2 reads a block and variable) and
 * converting each B operand to bf16 at its mma. Here the weights are
 * constant for a block: staged once, as bf16 in fragment order (bfrag, the
 * layout of model/vsn_backward_fused_tc.cu: for product P, k-tile kt,
 * n-tile pair np, lane l one uint4 {b0, b1 of n-tile 2 np, b0, b1 of
 * 2 np + 1}; P2 W2 (B[k][n] = W2[n][k]), P3 Wg likewise), one
 * conflict-free LDS.128 (a warp's 512 contiguous bytes) per two mma, with
 * the eight vectors (fp32 [8][Dv]); 7 KB at Dv = 32. One barrier a block,
 * after the staging; none in the tile loop.
 *
 * Tiling. Grid (F, splits), T = FJ_THREADS = 128 threads (W = 4 warps).
 * The rows (ending at the device count where there is one) are cut into
 * block tiles of R = 16 W rows, split by st_rowsplit_range over blockIdx.y;
 * warp w owns the 16 rows 16 w .. 16 w + 15 of each of its split's block
 * tiles (one m-tile), lane (g, q) rows g and g + 8. Each warp walks its
 * tiles alone: s of its next tile is loaded at a tile's start (its source
 * row, table row src_rows[r] for the training table, one tile further
 * ahead), so neither dependent load waits. The splits (fill_j_splits) are
 * chosen on the host from the rows the grid is sized for (cap) and the
 * blocks the SMs hold, the F x splits blocks filling whole waves best.
 *
 * Numbers: the same bits as vsn_fused_tc_kernel's table mode for every t:
 * h1_pair's expression rounded to bf16 as there, the weights rounded to
 * bf16 (nearest even) from the same fp32 values, each accumulator's mma in
 * ascending k-tiles, product 1's accumulators packed into product 2's A
 * in place as there, then quad_gate_x, quad_stats and t's expression
 * (cuda/vsn_quad_device.cuh), shared with that kernel. A row's values
 * depend on its own A rows and the block's B alone (mma rows are
 * independent), not on the tile, the split or the block. No atomics.
 * Counted and predicted in bench/notes-fill-j.md. */
#include <stdint.h>

#include "cuda/check.h"
#include "cuda/mma_bf16_device.cuh"
#include "cuda/vsn_backward_fused_device.cuh" /* bwd_stage_vec, bwd_part */
#include "cuda/vsn_device.cuh"
#include "cuda/vsn_fused_device.cuh"
#include "cuda/vsn_quad_device.cuh" /* h1_pair, quad_gate_x, quad_stats */

extern "C" {
#include "cuda/linear_cuda.h" /* st_rowsplit_range */
#include "cuda/vsn_forward_fused_cuda.h"
}

static int fill_j_on = 1; /* st_cuda_vsn_set_table_fill_j */
extern "C" void st_cuda_vsn_set_table_fill_j(int on) { fill_j_on = on != 0; }
int vsn_table_fill_j_on(void) { return fill_j_on; }

#define FJ_THREADS 128
#define FJ_BLOCKS_SM 8 /* __launch_bounds__' minimum blocks an SM: at most 64 registers a thread */
#define FJ_MIN_TILES 4 /* block tiles a split at the least (cap's rows), so the staging stays small */
#define FJ_MAX_WAVES 4 /* of F x splits blocks over the SMs' slots */

/* The tile's sizes and the shared memory's layout for one Dv; the vectors' rows U .. LNB in
 * bwd_stage_vec's order (bwd_part's). */
template <int DV> struct fill_j_shape : bwd_part<DV> {
    static constexpr int T = FJ_THREADS, W = T / 32, R = 16 * W;
    static constexpr int NT = DV / 8, KT = DV / 16; /* n-tiles of h2 (of g: 2 NT), k-tiles of either product */
    /* bfrag (uint4 units): P2 (KT k-tiles x NT / 2 n-tile pairs), then P3 (KT x NT) */
    static constexpr int F2 = 0, F3 = F2 + KT * (NT / 2) * 32, NF = F3 + KT * NT * 32;
    static_assert(DV == 16 || DV == 32, "a quad of lanes holds a row: Dv / 4 outputs a lane, at most 8");
};

/* Word i < 4 of bfrag unit u (lane l of product P's k-tile kt, n-tile pair np) from the fp32
 * weight Wt [n][DV] (B[k][n] = Wt[n][k]): rows k, k + 1 of column n, bf16x2. */
template <int DV> __device__ static inline uint32_t bfrag_word(const float *Wt, int kt, int np, int l, int i) {
    const int n = 8 * (2 * np + (i >> 1)) + (l >> 2), k = 16 * kt + 2 * (l & 3) + 8 * (i & 1);
    return bf16x2(__ldg(Wt + n * DV + k), __ldg(Wt + n * DV + k + 1));
}

/* d[2 np + u] += a B over k-tile kt's NP n-tile pairs, B from the product's bfrag f. */
template <int NP, int NN>
__device__ static inline void mma_ktile(float (&d)[NN][4], const uint32_t (&a)[4], const uint4 *f, int kt, int lane) {
#pragma unroll
    for (int np = 0; np < NP; np++) {
        const uint4 b = f[(kt * NP + np) * 32 + lane];
        mma_bf16(d[2 * np], a, b.x, b.y);
        mma_bf16(d[2 * np + 1], a, b.z, b.w);
    }
}

/* The source rows (s rows) of table rows row (h = 0) and row + 8 (h = 1) of a warp tile: src_rows'
 * entries, the rows themselves without, -1 past the count or where the tile is not live. */
__device__ static inline void fill_j_src(const fused_args &a, size_t row, int rows, bool live, int (&src)[2]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const size_t r = row + 8 * h;
        src[h] = live && r < (size_t)rows ? (a.src_rows ? a.src_rows[r] : (int)r) : -1;
    }
}
/* s[src, j] of those rows, 0 for -1 (rows that are computed and never stored). */
__device__ static inline void fill_j_s(const fused_args &a, int j, const int (&src)[2], float (&s)[2]) {
#pragma unroll
    for (int h = 0; h < 2; h++)
        s[h] = src[h] >= 0 ? a.s[(size_t)src[h] * (size_t)a.s_stride + j] : 0.0f;
}

/* __launch_bounds__: FJ_BLOCKS_SM blocks of 4 warps an SM (32 warps), 64 registers a thread. */
template <int DV> static __global__ void __launch_bounds__(FJ_THREADS, FJ_BLOCKS_SM) vsn_fill_j_kernel(fused_args a) {
    typedef fill_j_shape<DV> S;
    constexpr int NT = S::NT, KT = S::KT, R = S::R;
    __shared__ uint4 bfr[S::NF];
    __shared__ __align__(16) float vec[8 * DV]; /* float2 loads */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int j = blockIdx.x, rows = fused_rows(a);
    long t0, t1;
    st_rowsplit_range(((long)rows + R - 1) / R, (int)gridDim.y, (int)blockIdx.y, &t0, &t1);
    if (t0 >= t1) return; /* an empty split (past the device count): the whole block, before its barrier */
    {
        const float *W2 = a.W2 + (size_t)j * DV * DV, *Wg = a.Wg + (size_t)j * 2 * DV * DV;
        for (int u = tid; u < S::NF; u += FJ_THREADS) {
            const bool p3 = u >= S::F3;
            const int l = (p3 ? u - S::F3 : u) & 31, blk = (p3 ? u - S::F3 : u) >> 5, pairs = p3 ? NT : NT / 2;
            const float *Wt = p3 ? Wg : W2;
            const int kt = blk / pairs, np = blk % pairs;
            bfr[u] = make_uint4(bfrag_word<DV>(Wt, kt, np, l, 0), bfrag_word<DV>(Wt, kt, np, l, 1),
                                bfrag_word<DV>(Wt, kt, np, l, 2), bfrag_word<DV>(Wt, kt, np, l, 3));
        }
        bwd_stage_vec<DV, FJ_THREADS>(a, j, vec, tid);
    }
    const bool tab_pairs = ((uintptr_t)a.tab & 7) == 0; /* float2 stores (F Dv, j Dv, o all even) */
    /* the warp's tiles t0 + i (i < t1 - t0), its rows 16 warp + g (+ 8) of each: s of the first,
     * the source rows of the second */
    const size_t wrow = (size_t)16 * warp + g;
    int src[2];
    float sc[2];
    fill_j_src(a, (size_t)t0 * R + wrow, rows, true, src);
    fill_j_s(a, j, src, sc);
    fill_j_src(a, (size_t)(t0 + 1) * R + wrow, rows, t0 + 1 < t1, src);
    __syncthreads(); /* the fragments and vectors staged */
    for (long tile = t0; tile < t1; tile++) {
        const size_t row = (size_t)tile * R + wrow; /* the lane's rows row (h = 0) and row + 8 */
        /* the next tile's s (its source rows were loaded a tile ago), the one after's sources */
        float sn[2];
        fill_j_s(a, j, src, sn);
        fill_j_src(a, row + 2 * R, rows, tile + 2 < t1, src);
        /* P2: h2 = h1 W2^T, h1 formed into A a k-tile at a time */
        float h2[NT][4] = {}, gq[2 * NT][4] = {}; /* the products' accumulators from zero */
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
            const int k = 16 * kt + 2 * q;
            const float2 U0 = lds2(vec + S::U * DV + k), V0 = lds2(vec + S::V * DV + k);
            const float2 U8 = lds2(vec + S::U * DV + k + 8), V8 = lds2(vec + S::V * DV + k + 8);
            const uint32_t a1[4] = {h1_pair(sc[0], U0, V0), h1_pair(sc[1], U0, V0), h1_pair(sc[0], U8, V8),
                                    h1_pair(sc[1], U8, V8)};
            mma_ktile<NT / 2>(h2, a1, bfr + S::F2, kt, lane);
        }
        /* P3: g = h2 Wg^T, A of k-tile kt from h2's n-tiles 2 kt and 2 kt + 1 in place */
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
            const float *lo = h2[2 * kt], *hi = h2[2 * kt + 1];
            const uint32_t a2[4] = {bf16x2(lo[0], lo[1]), bf16x2(lo[2], lo[3]), bf16x2(hi[0], hi[1]),
                                    bf16x2(hi[2], hi[3])};
            mma_ktile<NT>(gq, a2, bfr + S::F3, kt, lane);
        }
        /* per row: the gate, the statistics, t stored (vsn_fused_tc_kernel's expressions) */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float x[2 * NT], sg[2 * NT], mean, rstd;
            quad_gate_x<NT>(gq, h, q, sc[h], vec + S::B1 * DV, vec + S::B2 * DV, vec + S::EW * DV, vec + S::EB * DV, x,
                            sg);
            quad_stats<NT>(x, mean, rstd);
            const size_t r = row + 8 * h;
            float *dst = a.tab + r * (size_t)a.F * DV + (size_t)j * DV + 2 * q;
#pragma unroll
            for (int p = 0; p < NT; p++) {
                const float2 lw = lds2(vec + S::LNW * DV + 8 * p + 2 * q), lb = lds2(vec + S::LNB * DV + 8 * p + 2 * q);
                float t[2];
#pragma unroll
                for (int e = 0; e < 2; e++)
                    t[e] = xhat_of(x[2 * p + e], mean, rstd) * comp(lw, e) + comp(lb, e);
                if (r >= (size_t)rows)
                    continue;
                else if (tab_pairs)
                    *reinterpret_cast<float2 *>(dst + 8 * p) = make_float2(t[0], t[1]);
                else
                    dst[8 * p] = t[0], dst[8 * p + 1] = t[1];
            }
        }
        sc[0] = sn[0], sc[1] = sn[1];
    }
}

/* The splits for a grid sized for rows: of those giving every split FJ_MIN_TILES block tiles or
 * more, the one whose F x splits blocks fill whole waves of the SMs' slots best (at most
 * FJ_MAX_WAVES waves; ties: fewer splits, less staging). */
template <int DV> static int fill_j_splits(int rows, int F, int *splits) {
    typedef fill_j_shape<DV> S;
    int dev = 0, sms = 0, per_sm = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    ST_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ST_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, vsn_fill_j_kernel<DV>, S::T, 0));
    const long slots = (long)sms * (per_sm > 0 ? per_sm : 1), tiles = ((long)rows + S::R - 1) / S::R;
    const long most = tiles / FJ_MIN_TILES > 1 ? tiles / FJ_MIN_TILES : 1;
    long best = 1;
    double best_fill = 0;
    for (long sp = 1; sp <= most; sp++) {
        const long blocks = (long)F * sp, waves = (blocks + slots - 1) / slots;
        if (waves > FJ_MAX_WAVES) break;
        const double fill = (double)blocks / (double)(waves * slots);
        if (fill > best_fill) best = sp, best_fill = fill;
    }
    *splits = (int)best;
    return ST_OK;
}

template <int DV> static int fill_j_launch(const fused_args &a, cudaStream_t st) {
    int splits = 1;
    ST_TRY(fill_j_splits<DV>(a.rows, a.F, &splits));
    vsn_fill_j_kernel<DV><<<dim3((unsigned)a.F, (unsigned)splits), FJ_THREADS, 0, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

int vsn_table_fill_j_launch(const fused_args &a, int Dv, cudaStream_t st) {
    ST_REQUIRE(Dv == 16 || Dv == 32, ST_ERR_INTERNAL, "VSN table fill by variable: Dv = %d is not 16 or 32", Dv);
    return Dv == 16 ? fill_j_launch<16>(a, st) : fill_j_launch<32>(a, st);
}
