/* vsn_forward_fused_tc.cu: the fused VSN forward (model/vsn_forward_fused.cu)
 * with its two per-variable products on the tensor cores, for the bf16
 * matmul precision (the API: cuda/vsn_forward_fused_cuda.h,
 * st_cuda_vsn_set_fused_tc). The same math per row r and variable j:
 *     h1 = ELU(s[r, j] U_j + V_j), h2 = W2_j h1, [g1; g2] = Wg_j h2 + Vg_j,
 *     x = (s[r, j] ew_j + eb_j) + g1 sigma(g2), t_j = LN_j(x),
 *     v[r] = sum_j alpha[r, j] t_j          (table mode: each t_j stored)
 * with h1 W2_j^T and h2 Wg_j^T as mma.sync m16n8k16 (bf16 operands, fp32
 * accumulators) instead of fp32 FMAs.
 *
 * Fragments (PTX ISA, mma.m16n8k16 with .bf16; lane = 4 g + q, g the
 * groupID, q the threadID_in_group). A's four registers hold (row,
 * columns) (g, 2q..2q+1), (g+8, 2q..2q+1), (g, 2q+8..2q+9), (g+8,
 * 2q+8..2q+9) of the 16 x 16 tile, the lower column in the low half; B's
 * two hold rows k = 2q..2q+1 and 2q+8..2q+9 of column n = g; the
 * accumulator's four (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1) of the
 * 16 x 8 tile. So:
 *   - h1 is formed into A: lane (g, q) evaluates the ELU at its rows g,
 *     g+8 and columns 16 kt + 2q + {0, 1, 8, 9} of each k-tile kt, from
 *     registers (no h1 in shared memory);
 *   - B of a weight's n-tile p, k-tile kt is W[8p + g][16 kt + 2q ..] and
 *     W[8p + g][16 kt + 2q + 8 ..]: a float2 of the fp32 stage each,
 *     converted to bf16x2;
 *   - product 1's n-tiles 2 kt and 2 kt + 1 (h2 columns 16 kt .. 16 kt +
 *     15) hold product 2's A of k-tile kt in place: (g, 2q..) and (g+8,
 *     2q..) are n-tile 2 kt's accumulators 0-1 and 2-3, (g, 2q+8..) and
 *     (g+8, 2q+8..) n-tile 2 kt + 1's; packed to bf16 with no shuffle;
 *   - product 2's n-tiles p and p + Dv / 8 are columns o = 8p + 2q + e
 *     and Dv + o: g1 and g2 of output o in the same lane. Lane (g, q)
 *     owns outputs o = 8p + 2q + e (p < Dv / 8, e < 2) of rows g and g+8;
 *     a row's Dv outputs lie in the 4 lanes of its quad, where the norm's
 *     shuffles (xor 2, 1) stay.
 *
 * Tiling. A warp owns MT = 32 / Dv m-tiles of 16 rows (1 at Dv = 32, 2 at
 * 16), a block of T threads T / 32 warps (T = 256; 128 for a v-mode batch
 * too small to fill a wave, fused_large), R = 16 MT T / 32 rows: 128 at
 * Dv = 32, 256 at 16. The block walks j in order through the fp32
 * kernel's two cp.async stages (fused_stage), one barrier a variable (the
 * stage j + 1 is written after every warp passed it, so none still reads
 * it). A stage: W2 [Dv][Dv + 8], Wg [2 Dv][Dv + 8] (fp32), the eight
 * vectors [8][Dv], s and alpha [R]: 17.4 KB at Dv = 32, 7.2 KB at 16;
 * two stages. Weight rows Dv + 8 floats apart: a B load's 8 rows g start
 * at banks 8 g (Dv = 32) or 24 g (Dv = 16) mod 32, so each half warp's
 * 4 rows x 4 float2 fall in 32 distinct banks.
 *
 * Numbers:
 *   - the products round h1, W2, h2 and Wg to bf16 (nearest even) and
 *     accumulate in fp32 (k-tiles in ascending order): cuBLAS's bf16
 *     mode; t within ~3e-3 relative of the fp32 kernel's;
 *   - the h1 expression, the gate, the statistics (double: Dv / 4 outputs
 *     a lane, then the quad's butterfly), rstd, xhat, t and the combine in
 *     double in variable order are the fp32 kernel's expressions;
 *   - a row's outputs come from its own warp's instructions, whatever the
 *     block size, the tile or the mode: the table mode's t_j are the bits
 *     the v mode combines, and table_combine's sum (the same order, in
 *     double) gives the v mode's v. No atomics: bit-identical run to run.
 * Counted, predicted and measured in bench/notes-vsn-tc.md. */
#include <cuda_bf16.h>
#include <stdint.h>

#include "cuda/check.h"
#include "cuda/mma_bf16_device.cuh" /* bf16x2, mma_bf16 */
#include "cuda/vsn_device.cuh"
#include "cuda/vsn_fused_device.cuh"
#include "cuda/vsn_quad_device.cuh" /* h1_pair, quad_gate_x, quad_stats */

extern "C" {
#include "cuda/linear_cuda.h" /* st_cuda_matmul_precision */
#include "cuda/vsn_forward_fused_cuda.h"
}

static int fused_tc_on = 1; /* st_cuda_vsn_set_fused_tc */
extern "C" void st_cuda_vsn_set_fused_tc(int on) { fused_tc_on = on != 0; }

extern "C" int st_cuda_vsn_fused_tc_takes(int Dv) {
    return st_cuda_matmul_precision() == ST_MATMUL_BF16 && fused_tc_on && (Dv == 16 || Dv == 32);
}

/* The tile's sizes and one stage's layout (floats) for Dv and T threads. */
template <int DV, int T> struct fused_tc_shape : fused_vec_rows {
    static constexpr int dv = DV, threads = T;
    static constexpr int MT = 32 / DV;              /* m-tiles of 16 rows a warp */
    static constexpr int R = T / 32 * 16 * MT;      /* rows a block */
    static constexpr int KT = DV / 16, NT = DV / 8; /* k-tiles of either product; n-tiles of h2 (g: 2 NT) */
    static constexpr int LDW = DV + 8;              /* weight row stride */
    static constexpr int W2 = 0, WG = DV * LDW, VEC = 3 * DV * LDW, S = VEC + 8 * DV, A = S + R, STAGE = A + R;
    static constexpr int TOTAL = 2 * STAGE;
    static_assert(DV == 16 || DV == 32, "a quad of lanes holds a row: Dv / 4 outputs a lane, at most 8");
    static_assert(STAGE % 4 == 0 && VEC % 2 == 0 && LDW % 2 == 0, "16-byte stages, 8-byte float2 loads");
    static_assert(sizeof(float) * TOTAL <= 49152, "two stages within the default shared memory");
};

/* d += a W^T over W's n-tile p, k-tile kt (W [n][LDW] fp32 in the stage,
 * B[k][n] = W[n][k]): lane (g, q) reads row 8p + g, columns 16 kt + 2q
 * and + 8. */
template <int LDW>
__device__ static inline void mma_w(float (&d)[4], const uint32_t (&a)[4], const float *W, int p, int kt, int g,
                                    int q) {
    const float *w = W + (8 * p + g) * LDW + 16 * kt + 2 * q;
    const float2 lo = lds2(w), hi = lds2(w + 8);
    mma_bf16(d, a, bf16x2(lo.x, lo.y), bf16x2(hi.x, hi.y));
}

/* __launch_bounds__: 128 registers a thread, 512 threads an SM (the fp32 kernel's).
 * TAB: the table mode (st_cuda_vsn_table_fill, _fill_rows): each t_j stored, no combine. */
template <int DV, int T, bool TAB>
static __global__ void __launch_bounds__(T, 512 / T) vsn_fused_tc_kernel(fused_args a) {
    typedef fused_tc_shape<DV, T> S;
    constexpr int MT = S::MT, KT = S::KT, NT = S::NT, LDW = S::LDW;
    extern __shared__ float4 fused_tc_smem4[];
    float *sm = reinterpret_cast<float *>(fused_tc_smem4);
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const int wrow = threadIdx.x / 32 * 16 * MT; /* the warp's first row in the tile */
    const size_t row0 = (size_t)blockIdx.x * S::R;
    const int rows = TAB ? fused_rows(a) : 0;                  /* v mode: a.rows, as the fp32 kernel */
    if (TAB && row0 >= (size_t)rows) return;                   /* past the device count: the whole block */
    const bool tab_pairs = TAB && ((uintptr_t)a.tab & 7) == 0; /* float2 stores (F Dv, j Dv, o all even) */
    double acc[MT][2][2 * NT]; /* [m-tile][row g, g + 8][output 8p + 2q + e at 2p + e] */
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int c = 0; c < 2 * NT; c++)
                acc[m][h][c] = 0;
    fused_stage<S, TAB>(a, rows, 0, row0, sm);
    for (int j = 0; j < a.F; j++) {
        const float *st = sm + (j & 1) * S::STAGE, *vec = st + S::VEC;
        fused_next<S, TAB>(a, rows, j, row0, sm); /* j-1's stage may be overwritten */
#pragma unroll
        for (int m = 0; m < MT; m++) {
            const int r = wrow + 16 * m + g; /* the lane's rows r and r + 8 of the tile */
            const float s0 = st[S::S + r], s1 = st[S::S + r + 8];
            /* 1. h2 = ELU(s U + V) W2^T, h1 formed into A */
            float h2[NT][4];
#pragma unroll
            for (int p = 0; p < NT; p++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    h2[p][c] = 0;
#pragma unroll
            for (int kt = 0; kt < KT; kt++) {
                const int k = 16 * kt + 2 * q;
                const float2 U0 = lds2(vec + S::U * DV + k), V0 = lds2(vec + S::V * DV + k);
                const float2 U8 = lds2(vec + S::U * DV + k + 8), V8 = lds2(vec + S::V * DV + k + 8);
                const uint32_t a1[4] = {h1_pair(s0, U0, V0), h1_pair(s1, U0, V0), h1_pair(s0, U8, V8),
                                        h1_pair(s1, U8, V8)};
#pragma unroll
                for (int p = 0; p < NT; p++)
                    mma_w<LDW>(h2[p], a1, st + S::W2, p, kt, g, q);
            }
            /* 2. g = h2 Wg^T, A of k-tile kt from h2's n-tiles 2 kt and 2 kt + 1 */
            float gg[2 * NT][4];
#pragma unroll
            for (int p = 0; p < 2 * NT; p++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    gg[p][c] = 0;
#pragma unroll
            for (int kt = 0; kt < KT; kt++) {
                const float *lo = h2[2 * kt], *hi = h2[2 * kt + 1];
                const uint32_t a2[4] = {bf16x2(lo[0], lo[1]), bf16x2(lo[2], lo[3]), bf16x2(hi[0], hi[1]),
                                        bf16x2(hi[2], hi[3])};
#pragma unroll
                for (int p = 0; p < 2 * NT; p++)
                    mma_w<LDW>(gg[p], a2, st + S::WG, p, kt, g, q);
            }
            /* 3. per row (g, then g + 8): the gate, the norm's statistics (double, the quad by
             * shuffles), t and the combine or the store: the fp32 kernel's expressions */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float sj = h ? s1 : s0;
                float x[2 * NT], sg[2 * NT];
                quad_gate_x<NT>(gg, h, q, sj, vec + S::B1 * DV, vec + S::B2 * DV, vec + S::EW * DV, vec + S::EB * DV, x,
                                sg);
                float mean, rstd;
                quad_stats<NT>(x, mean, rstd);
                const double aj = TAB ? 0.0 : (double)st[S::A + r + 8 * h];
                const size_t row = row0 + r + 8 * h;
#pragma unroll
                for (int p = 0; p < NT; p++) {
                    const int o = 8 * p + 2 * q;
                    const float2 lw = lds2(vec + S::LNW * DV + o), lb = lds2(vec + S::LNB * DV + o);
                    float t[2];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        t[e] = xhat_of(x[2 * p + e], mean, rstd) * comp(lw, e) + comp(lb, e);
                        if (!TAB) acc[m][h][2 * p + e] += aj * (double)t[e];
                    }
                    if (TAB && row < (size_t)rows) {
                        float *dst = a.tab + row * (size_t)a.F * DV + (size_t)j * DV + o;
                        if (tab_pairs)
                            *reinterpret_cast<float2 *>(dst) = make_float2(t[0], t[1]);
                        else
                            dst[0] = t[0], dst[1] = t[1];
                    }
                }
            }
        }
    }
    if (!TAB) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const size_t row = row0 + wrow + 16 * m + g + 8 * h;
                if (row >= (size_t)a.rows) continue;
#pragma unroll
                for (int c = 0; c < 2 * NT; c++)
                    a.v[row * (size_t)a.v_stride + 8 * (c / 2) + 2 * q + c % 2] = (float)acc[m][h][c];
            }
    }
}

template <int DV, int T, bool TAB> static int tc_launch(const fused_args &a, cudaStream_t st) {
    typedef fused_tc_shape<DV, T> S;
    const size_t blocks = ((size_t)a.rows + S::R - 1) / S::R;
    vsn_fused_tc_kernel<DV, T, TAB><<<(unsigned)blocks, T, sizeof(float) * (size_t)S::TOTAL, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

int vsn_fused_tc_launch(const fused_args &a, int Dv, int tab, int mode, cudaStream_t st) {
    ST_REQUIRE(Dv == 16 || Dv == 32, ST_ERR_INTERNAL, "VSN tensor-core forward: Dv = %d is not 16 or 32", Dv);
    if (tab) return Dv == 16 ? tc_launch<16, 256, true>(a, st) : tc_launch<32, 256, true>(a, st);
    int large = 0;
    ST_TRY(fused_large(a.rows, Dv == 16 ? fused_tc_shape<16, 256>::R : fused_tc_shape<32, 256>::R, mode, &large));
    if (Dv == 16) return large ? tc_launch<16, 256, false>(a, st) : tc_launch<16, 128, false>(a, st);
    return large ? tc_launch<32, 256, false>(a, st) : tc_launch<32, 128, false>(a, st);
}
