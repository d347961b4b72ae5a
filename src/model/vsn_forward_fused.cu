/* vsn_forward_fused.cu: the GPU VSN forward's F per-variable GRNs and the
 * combine as one kernel (the API: cuda/vsn_forward_fused_cuda.h). Per row r
 * and variable j (DESIGN section 5, with the embedding folded as
 * cuda/vsn_fold_cuda.h says: U_j, V_j, Vg_j):
 *     h1   = ELU(s[r, j] U_j + V_j)                      [Dv]
 *     h2   = W2_j h1                                     [Dv]   (fc2; its bias is in Vg_j)
 *     g    = Wg_j h2 + Vg_j = [g1; g2]                   [2Dv]
 *     x    = (s[r, j] ew_j + eb_j) + g1 sigma(g2)        [Dv]   (the identity skip e_j)
 *     t_j  = LN_j(x) = xhat ln_w_j + ln_b_j              [Dv]
 *     v[r] = sum_j alpha[r, j] t_j                       [Dv]
 * with W2_j = vsn.var.fc2_w[j] [Dv, Dv], Wg_j = vsn.var.glu_w[j] [2Dv, Dv].
 * Nothing but v is written: no [rows, F Dv] buffer (the unfused forward,
 * vsn.cu's var_products + gate_combine, writes h1, h2 [rows, F Dv] and the
 * glu's [rows, 2 F Dv] and reads them back: 6.8 ms of the 19.4 ms action
 * step at 4,096 environments, memory- and latency-bound).
 *
 * Tiling. A block of T = 256 threads owns R = 4 T / (Dv / 4) rows (128 at
 * Dv = 32; T = 128 and half the rows where the rows would not fill a wave:
 * fused_dispatch) and walks the variables j in order. Thread (rg, cg),
 * cg < CG = Dv / 4, rg < RG = T / CG, owns rows rg + RG i and columns
 * cg + CG c (i, c < 4) of every [R, Dv] product, and columns cg + CG c and
 * Dv + cg + CG c of the glu's, so that g1 and g2 of an output meet in one
 * thread. Per j:
 *   1. h1 [R, Dv] into shared memory (a float4 of one row a thread-step);
 *   2. h2 = h1 W2_j^T as 4 x 4 register tiles: for each 4 inputs k, one
 *      float4 of each of the thread's 4 rows of h1 and one of each of its 4
 *      rows of W2_j, 16 multiply-adds per pair: 8 shared loads per 64 FMAs;
 *      h2 to shared memory;
 *   3. g = h2 Wg_j^T the same way over 8 weight rows: 12 loads per 128 FMAs
 *      (its loop over k is not unrolled: unrolled, ptxas hoists the next
 *      step's loads and spills past the 128 registers a thread that
 *      __launch_bounds__ leaves);
 *   4. the gate, the norm's statistics (the CG threads of a row, adjacent
 *      lanes, add theirs by shuffles), t and acc += alpha t in registers.
 * W2_j, Wg_j and the per-variable vectors (U, V, Vg, ew, eb, ln_w, ln_b)
 * and the tile's s[., j], alpha[., j] are copied by cp.async into one of
 * two stages while variable j-1 computes (the weights are 12 KB a
 * variable, L2-resident). Padded row strides: weight rows Dv + 4 (the CG
 * consecutive rows a warp reads for one column tile fall in distinct
 * 16-byte bank groups), activation rows Dv + 8 at Dv = 32 (else Dv + 4):
 * the 4 rows x 8 columns of one scalar h2 store hit 32 distinct banks and
 * the 4 rows of a float4 load distinct bank groups. The previous fused
 * attempt (bench/NOTES.md change 8: a lane per output, a shuffle and a
 * shared load per FMA) was LDS/shuffle-bound at 8.5 ms; here the inner
 * loops are FMA-bound, one vector load per ~10 FMAs (the kernel as a whole
 * is issue-bound by the ELU, sigmoid and double norm arithmetic besides:
 * the count is in bench/NOTES.md, change 12).
 *
 * Numbers, and how they relate to the unfused path (which the backward
 * still runs to recompute the activations, vsn.cu var_forward):
 *   - h1 is the same expression as st_cuda_vsn_rank1's: the same bits;
 *   - the products are fp32 FMAs summed over k in ascending order (no
 *     tensor cores): within fp32 rounding of cuBLAS's fp32 products, not
 *     their bits. That is every call in fp32 mode; in bf16 mode, where
 *     st_cuda_vsn_fused_tc_takes(Dv) (Dv 16 or 32, the switch on), both
 *     modes below run vsn_fused_tc_kernel instead (model/
 *     vsn_forward_fused_tc.cu: the products on the tensor cores with bf16
 *     operands, as cuBLAS's bf16 mode rounds them), and this kernel only
 *     at Dv = 8 or with the switch off, where its t is the more accurate
 *     one and the backward's recomputed t differ from it by the bf16
 *     products' error (~1e-3 relative), not just in the last bits;
 *   - the gate, statistics (double, two passes over the registers) and t
 *     are gate_combine_kernel's expressions, but the statistics' double
 *     sums run in a different order (4 columns a thread, then a butterfly)
 *     and rstd is a double rsqrt, not 1 / sqrt;
 *   - acc is double, summed in variable order as gate_combine_kernel does
 *     (fp32 over 40 terms of O(1) would lose up to ~40 ulp; double costs
 *     32 registers and one DFMA per output a variable, ~1% of the FMAs).
 * No atomics, no data-dependent order: bit-identical run to run and
 * independent of the callers' strides.
 *
 * The table mode (TAB, st_cuda_vsn_table_fill) runs the same steps over a
 * market's bars and stores each t_j (float, as step 4 forms it) instead
 * of combining; table_combine_kernel then adds alpha_j t_j over j in
 * order in double for each window row from its bar's table row: the
 * combine above, term for term, so v has the one-pass kernel's bits. */
#include <stdint.h>
#include <string.h>

#include "cuda/check.h"
#include "cuda/vsn_device.cuh"
#include "cuda/vsn_fused_device.cuh"
#include "cuda/vsn_tile_device.cuh"

extern "C" {
#include "cuda/vsn_cuda.h"
#include "cuda/vsn_forward_fused_cuda.h"
#include "model/vsn.h"
}

static int fused_mode = ST_CUDA_VSN_FUSED; /* st_cuda_vsn_set_fused */
extern "C" void st_cuda_vsn_set_fused(int mode) { fused_mode = mode; }

/* The tile's sizes and shared-memory layout for one Dv (a multiple of 4
 * that divides 128: CG = Dv / 4 threads share a row, within a warp) and T
 * threads a block (256, or 128 where the rows fill less than a wave of
 * 256-thread blocks: fused_dispatch). */
template <int DV, int T> struct fused_shape : fused_vec_rows {
    static constexpr int dv = DV, threads = T;
    static constexpr int CG = DV / 4;                  /* column groups: threads a row */
    static constexpr int RG = T / CG;                  /* row groups */
    static constexpr int R = 4 * RG;                   /* rows a block */
    static constexpr int LDW = DV + 4;                 /* weight row stride (floats) */
    static constexpr int LDH = DV == 32 ? 40 : DV + 4; /* activation row stride */
    /* one stage: W2 [DV][LDW], Wg [2DV][LDW], vec [8][DV], s [R], alpha [R] */
    static constexpr int W2 = 0, WG = DV * LDW, VEC = 3 * DV * LDW, S = VEC + 8 * DV, A = S + R, STAGE = A + R;
    /* floats: two stages, then h1 and h2 [R][LDH] */
    static constexpr int H1 = 2 * STAGE, H2 = H1 + R * LDH, TOTAL = H2 + R * LDH;
    static_assert(DV % 4 == 0 && 32 % CG == 0, "a row's threads must be adjacent lanes of one warp");
    static_assert(STAGE % 4 == 0 && LDW % 4 == 0 && LDH % 4 == 0, "float4 rows need 16-byte alignment");
};

/* __launch_bounds__: 128 registers a thread, 512 threads an SM (two 256-thread blocks, four of 128).
 * TAB: the table mode (st_cuda_vsn_table_build): each t_j stored, no combine. */
template <int DV, int T, bool TAB> static __global__ void __launch_bounds__(T, 512 / T) vsn_fused_kernel(fused_args a) {
    typedef fused_shape<DV, T> S;
    constexpr int CG = S::CG, RG = S::RG, LDW = S::LDW, LDH = S::LDH;
    extern __shared__ float4 fused_smem4[];
    float *sm = reinterpret_cast<float *>(fused_smem4);
    float *h1s = sm + S::H1, *h2s = sm + S::H2;
    const int tid = threadIdx.x, cg = tid % CG, rg = tid / CG;
    const size_t row0 = (size_t)blockIdx.x * S::R;
    const int rows = TAB ? fused_rows(a) : 0; /* v mode: a.rows wherever it is read, as before */
    if (TAB && row0 >= (size_t)rows) return; /* past the device count: the whole block */
    double acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[i][c] = 0;
    fused_stage<S, TAB>(a, rows, 0, row0, sm);
    for (int j = 0; j < a.F; j++) {
        const float *st = sm + (j & 1) * S::STAGE, *vec = st + S::VEC;
        fused_next<S, TAB>(a, rows, j, row0, sm); /* j-1's stage, h1 and h2 may be overwritten */
        /* 1. h1 = ELU(s U + V) */
        vsn_tile_h1<DV, T, LDH>(st + S::S, vec + S::U * DV, vec + S::V * DV, h1s, tid);
        __syncthreads();
        /* 2. h2 = h1 W2^T: rows rg + RG i, columns cg + CG c */
        vsn_tile_h2<DV, RG, LDH, LDW>(h1s, st + S::W2, h2s, rg, cg);
        __syncthreads();
        /* 3. g = h2 Wg^T: g[i][q] is column cg + CG q (q < 4, g1) or Dv + cg + CG (q - 4) (its g2),
         * then the gate x = e + g1 sigma(g2) (gate_combine_kernel's expression) */
        float x[4][4];
        {
            float g[4][8];
            vsn_tile_g<DV, RG, LDH, LDW>(h2s, st + S::WG, rg, cg, g);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float sj = st[S::S + rg + RG * i];
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int o = cg + CG * c;
                    const float g1 = g[i][c] + vec[S::B1 * DV + o];
                    const float sg = sigmoid_one_div(g[i][4 + c] + vec[S::B2 * DV + o]);
                    x[i][c] = (sj * vec[S::EW * DV + o] + vec[S::EB * DV + o]) + g1 * sg;
                }
            }
        }
        /* 4. the norm's statistics (double, the CG threads of a row by shuffles), t and the combine */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            double sum = 0;
#pragma unroll
            for (int c = 0; c < 4; c++)
                sum += x[i][c];
            sum = row_sum<CG>(sum) * (1.0 / DV); /* Dv a power of two: the same bits as / Dv */
            double var = 0;
#pragma unroll
            for (int c = 0; c < 4; c++)
                var += ((double)x[i][c] - sum) * ((double)x[i][c] - sum);
            var = row_sum<CG>(var);
            /* rsqrt, not 1.0 / sqrt (a double division and square root a row): within an ulp in
             * double, so the same float as gate_combine_kernel's except where that lies within an ulp of
             * a rounding boundary (~2^-29 of rows, and then one float ulp of rstd) */
            const float mean = (float)sum, rstd = (float)rsqrt(var * (1.0 / DV) + VSN_EPS);
            const double aj = TAB ? 0.0 : (double)st[S::A + rg + RG * i];
            const size_t row = row0 + rg + RG * i;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int o = cg + CG * c;
                const float t = xhat_of(x[i][c], mean, rstd) * vec[S::LNW * DV + o] + vec[S::LNB * DV + o];
                if (!TAB)
                    acc[i][c] += aj * (double)t;
                else if (row < (size_t)(TAB ? rows : a.rows))
                    a.tab[row * (size_t)a.F * DV + (size_t)j * DV + o] = t;
            }
        }
    }
    if (!TAB) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const size_t row = row0 + rg + RG * i;
            if (row >= (size_t)a.rows) continue;
#pragma unroll
            for (int c = 0; c < 4; c++)
                a.v[row * (size_t)a.v_stride + cg + CG * c] = (float)acc[i][c];
        }
    }
}

template <int DV, int T, bool TAB = false> static int fused_launch(const fused_args &a, cudaStream_t st) {
    typedef fused_shape<DV, T> S;
    const size_t bytes = sizeof(float) * (size_t)S::TOTAL;
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(vsn_fused_kernel<DV, T, TAB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes));
    const size_t blocks = ((size_t)a.rows + S::R - 1) / S::R;
    vsn_fused_kernel<DV, T, TAB><<<(unsigned)blocks, T, bytes, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* 256-thread blocks where they make at least one wave of two an SM; else
 * 128-thread blocks of half the rows, so that a small batch (8,192 rows at
 * Dv = 32: 64 blocks of 128 rows, or 128 of 64) still reaches every SM.
 * The same expressions in the same order either way: the same bits. */
template <int DV> static int fused_dispatch(const fused_args &a, int mode, cudaStream_t st) {
    int large = 0;
    ST_TRY(fused_large(a.rows, fused_shape<DV, 256>::R, mode, &large));
    return large ? fused_launch<DV, 256>(a, st) : fused_launch<DV, 128>(a, st);
}

extern "C" int st_cuda_vsn_forward_fused(int rows, int F, int Dv, const float *s, int s_stride, const float *alpha,
                                         int alpha_stride, const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo,
                                         float *v, int v_stride, void *stream, int *taken) {
    *taken = 0;
    const int mode = fused_mode;
    if (mode == ST_CUDA_VSN_UNFUSED || (Dv != 8 && Dv != 16 && Dv != 32) || F <= 0) return ST_OK;
    *taken = 1;
    if (rows <= 0) return ST_OK;
    fused_args a;
    a.rows = rows, a.F = F, a.s_stride = s_stride, a.alpha_stride = alpha_stride, a.v_stride = v_stride;
    a.s = s, a.alpha = alpha, a.W2 = w->var_fc2_w, a.Wg = w->var_glu_w, a.U = fo->U, a.V = fo->V, a.Vg = fo->Vg;
    a.ew = w->embed_w, a.eb = w->embed_b, a.lnw = w->var_ln_w, a.lnb = w->var_ln_b, a.v = v;
    cudaStream_t st = (cudaStream_t)stream;
    if (st_cuda_vsn_fused_tc_takes(Dv)) return vsn_fused_tc_launch(a, Dv, 0, mode, st);
    if (Dv == 8) return fused_dispatch<8>(a, mode, st);
    if (Dv == 16) return fused_dispatch<16>(a, mode, st);
    return fused_dispatch<32>(a, mode, st);
}

/* ---- the bar table (cuda/vsn_forward_fused_cuda.h) ----------------------- */

extern "C" int st_cuda_vsn_table_fits(int F, int Dv) {
    return fused_mode != ST_CUDA_VSN_UNFUSED && (Dv == 8 || Dv == 16 || Dv == 32) && F > 0;
}

/* The table mode over rows table rows (stopping at *nrows where given),
 * row r's s at s row src_rows[r] (NULL: r). */
static int table_fill(int rows, const int *nrows, const int *src_rows, int F, int Dv, const float *s, int s_stride,
                      const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo, float *tab, cudaStream_t st) {
    ST_REQUIRE(st_cuda_vsn_table_fits(F, Dv), ST_ERR_INPUT,
               "VSN bar table: Dv = %d is not 8, 16 or 32 (or the fused kernel is off)", Dv);
    if (rows <= 0) return ST_OK;
    fused_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.F = F, a.s_stride = s_stride, a.src_rows = src_rows, a.nrows = nrows;
    a.s = s, a.W2 = w->var_fc2_w, a.Wg = w->var_glu_w, a.U = fo->U, a.V = fo->V, a.Vg = fo->Vg;
    a.ew = w->embed_w, a.eb = w->embed_b, a.lnw = w->var_ln_w, a.lnb = w->var_ln_b, a.tab = tab;
    if (st_cuda_vsn_fused_tc_takes(Dv))
        return vsn_table_fill_j_on() ? vsn_table_fill_j_launch(a, Dv, st)
                                     : vsn_fused_tc_launch(a, Dv, 1, fused_mode, st);
    if (Dv == 8) return fused_launch<8, 256, true>(a, st);
    if (Dv == 16) return fused_launch<16, 256, true>(a, st);
    return fused_launch<32, 256, true>(a, st);
}

extern "C" int st_cuda_vsn_table_fill(int rows, int F, int Dv, const float *s, int s_stride,
                                      const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo, float *tab,
                                      void *stream) {
    return table_fill(rows, NULL, NULL, F, Dv, s, s_stride, w, fo, tab, (cudaStream_t)stream);
}

extern "C" int st_cuda_vsn_table_fill_rows(int cap, const int *nrows, const int *src_rows, int F, int Dv,
                                           const float *s, int s_stride, const struct st_vsn_weights_f32 *w,
                                           const st_vsn_fold *fo, float *tab, void *stream) {
    ST_REQUIRE(nrows && src_rows, ST_ERR_INPUT,
               "VSN training bar table fill: no device count or no source rows (the bar index's count and first)");
    return table_fill(cap, nrows, src_rows, F, Dv, s, s_stride, w, fo, tab, (cudaStream_t)stream);
}

/* A warp per row, lane c < Dv its column (Dv <= 32): acc += alpha[r, j]
 * t[j][c] over j in order, in double, as vsn_fused_kernel's combine; the
 * warp reads alpha[r, j] (one address) and Dv contiguous floats of the
 * table a variable. The fallback of table_combine4_kernel (a Dv it has no
 * lane layout for, or a table not 16-byte aligned). */
static __global__ void table_combine_kernel(int rows, int F, int Dv, const float *alpha, int alpha_stride,
                                            const float *tab, const int *tab_row, float *v, int v_stride) {
    const int lane = threadIdx.x % 32;
    WARP_LOOP(r, (size_t)rows) {
        if (lane >= Dv) continue;
        const float *t = tab + (size_t)tab_row[r] * (size_t)F * Dv + lane, *al = alpha + r * (size_t)alpha_stride;
        double acc = 0;
        for (int j = 0; j < F; j++)
            acc += (double)al[j] * (double)t[(size_t)j * Dv];
        v[r * (size_t)v_stride + lane] = (float)acc;
    }
}

/* The same sums with DV / 4 lanes a row (32 / (DV / 4) rows a warp), lane
 * q owning columns 4q..4q+3 through one float4 of each t_j; the variables
 * in blocks of TC_UNROLL whose loads all issue before their DFMAs. The old
 * kernel kept ~4 loads of 4 bytes a lane in flight (2.5 TB/s measured on
 * the 5 KB table rows it gathers); this keeps 8 of 16 bytes, and converts
 * alpha 8 times a row, not 32 (bench/notes-tt-kernels.md). Per column the
 * same exact products alpha_j t_j (float x float is exact in double) added
 * in the same order j = 0..F-1 to the same double: the same bits. */
#define TC_UNROLL 8
template <int DV>
static __global__ void __launch_bounds__(256) table_combine4_kernel(int rows, int F, const float *alpha, int alpha_stride,
                                                                     const float *tab, const int *tab_row, float *v,
                                                                     int v_stride) {
    constexpr int LPR = DV / 4, RPW = 32 / LPR;
    static_assert(DV % 4 == 0 && 32 % LPR == 0, "a row's lanes must tile the warp");
    const int lane = threadIdx.x % 32, q = lane % LPR;
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const size_t step = (size_t)gridDim.x * blockDim.x / 32 * RPW;
    for (size_t r = warp * RPW + lane / LPR; r < (size_t)rows; r += step) {
        const float4 *t = reinterpret_cast<const float4 *>(tab) + (size_t)tab_row[r] * (size_t)F * LPR + q;
        const float *al = alpha + r * (size_t)alpha_stride;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        int j = 0;
        for (; j + TC_UNROLL <= F; j += TC_UNROLL) {
            float4 tv[TC_UNROLL];
            float ak[TC_UNROLL];
#pragma unroll
            for (int k = 0; k < TC_UNROLL; k++) {
                tv[k] = __ldg(t + (size_t)(j + k) * LPR);
                ak[k] = al[j + k];
            }
#pragma unroll
            for (int k = 0; k < TC_UNROLL; k++) {
                const double a = (double)ak[k];
                a0 += a * (double)tv[k].x;
                a1 += a * (double)tv[k].y;
                a2 += a * (double)tv[k].z;
                a3 += a * (double)tv[k].w;
            }
        }
        for (; j < F; j++) {
            const float4 tv = __ldg(t + (size_t)j * LPR);
            const double a = (double)al[j];
            a0 += a * (double)tv.x;
            a1 += a * (double)tv.y;
            a2 += a * (double)tv.z;
            a3 += a * (double)tv.w;
        }
        float *o = v + r * (size_t)v_stride + 4 * q;
        o[0] = (float)a0, o[1] = (float)a1, o[2] = (float)a2, o[3] = (float)a3;
    }
}

template <int DV>
static int combine4_launch(int rows, int F, const float *alpha, int alpha_stride, const float *tab, const int *tab_row,
                           float *v, int v_stride, cudaStream_t st) {
    const size_t per_block = 256 / 32 * (32 / (DV / 4));
    size_t blocks = ((size_t)rows + per_block - 1) / per_block;
    if (blocks > (1u << 30)) blocks = 1u << 30;
    table_combine4_kernel<DV><<<(unsigned)blocks, 256, 0, st>>>(rows, F, alpha, alpha_stride, tab, tab_row, v,
                                                                 v_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_vsn_table_combine(int rows, int F, int Dv, const float *alpha, int alpha_stride,
                                         const float *tab, const int *tab_row, float *v, int v_stride, void *stream) {
    ST_REQUIRE(Dv > 0 && Dv <= 32 && F > 0, ST_ERR_INPUT, "VSN bar table combine: bad sizes F=%d Dv=%d", F, Dv);
    if (rows <= 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    /* the float4 kernel where its lane layout exists and the table rows are 16-byte aligned (Dv a
     * multiple of 4 keeps every t_j's start aligned once the base is) */
    if (((uintptr_t)tab & 15) == 0) {
        if (Dv == 32) return combine4_launch<32>(rows, F, alpha, alpha_stride, tab, tab_row, v, v_stride, st);
        if (Dv == 16) return combine4_launch<16>(rows, F, alpha, alpha_stride, tab, tab_row, v, v_stride, st);
        if (Dv == 8) return combine4_launch<8>(rows, F, alpha, alpha_stride, tab, tab_row, v, v_stride, st);
    }
    const int threads = 256;
    size_t blocks = ((size_t)rows + threads / 32 - 1) / (threads / 32);
    if (blocks > (1u << 30)) blocks = 1u << 30;
    table_combine_kernel<<<(unsigned)blocks, threads, 0, st>>>(rows, F, Dv, alpha, alpha_stride, tab, tab_row, v,
                                                               v_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
