/* vsn_backward_fused.cu: the GPU VSN backward's F per-variable GRNs as one
 * kernel (the API: cuda/vsn_backward_fused_cuda.h). Per row r and variable
 * j, with the forward's notation (model/vsn_forward_fused.cu):
 *   recompute  h1 = ELU(s U_j + V_j), h2 = W2_j h1, [g1; g2] = Wg_j h2 + Vg_j,
 *              x = e + g1 sg (sg = sigma(g2)), mean, rstd, xhat, t = xhat ln_w + ln_b;
 *   softmax    dalpha_j = t . dv (+ the caller's dalpha);
 *   norm, gate dt = alpha_j dv, gk = dt ln_w, dx = rstd (gk - mean(gk) - xhat mean(gk xhat)),
 *              dgl = [dx sg; dx g1 sg (1 - sg)], pw = dt xhat;
 *   products   dh2 = dgl Wg_j, dh1 = (dh2 W2_j) ELU'(h1);
 *   reductions dWg_j += dgl^T h2, dW2_j += dh2^T h1, gg_j += colsum dgl,
 *              fc2_b_j += colsum dh2, ln_w_j += colsum pw, X_j, Sx_j += colsum dx, s dx,
 *              q_j, Q_j += colsum dh1, s dh1;  ds part = dx . ew_j + dh1 . U_j.
 * This replaces vsn.cu's var_forward, dlog, var_backward (but ln_b's
 * product) and fold_ds's [rows, P] reads: ~47 [rows, P] buffer passes
 * (31 GB a training step at the default preset, bench/
 * notes-vsn-backward-fused.md) become ~0.2 GB.
 *
 * Loop order: a block per (variable j, row split sp) walks its split's row
 * tiles (st_rowsplit_range over the tiles): the variable's weights stay in
 * shared memory and its reductions accumulate there across tiles, one
 * partial of NP = 3 Dv^2 + 8 Dv doubles a block. (A block per row tile
 * walking the variables, as the forward, would need such a partial per
 * (tile, variable): 1.1 GB.) What needs every variable of a row goes out
 * per (row, variable) in double, [F, rows]: dalpha_j (bwd_dlog_kernel then
 * forms dlog a thread a row) and the ds part (bwd_ds_kernel adds the
 * selection GRN's terms after sel_backward). bwd_finish_kernel adds the
 * splits' partials in split order into the gradients.
 *
 * A tile is R = 4 T / (Dv / 4) rows (128 at Dv = 32), T = 256 threads.
 * Thread (rg, cg), cg < CG = Dv / 4, owns rows rg + RG i (i < 4) of the
 * [R, *] products: in P2/P3 (weights indexed by the output) columns cg +
 * CG c, in P4/P5 (weights indexed by the input) columns 4 cg + c, so that
 * each weight load is one float4 that the CG threads of a row take from
 * distinct bank groups. Per tile, between barriers:
 *   P1 h1 -> A (aliasing C);  P2 h2 = h1 W2^T -> B;
 *   P3 g = h2 Wg^T (4 x 8 register tiles), the gate, statistics, t,
 *      dalpha_j, the norm and gate backward, dgl -> C, the column sums of
 *      pw, dx, s dx and the row sums dx . ew;
 *   P4 dh2 = dgl Wg (4 x 4 tiles, kept in registers);  P6a dWg += dgl^T h2
 *      and gg += colsum dgl as 4 x 4 micro-tiles over the tile's rows;
 *   dh2 -> B, h1 recomputed -> C;
 *   P5 dh1 = (dh2 W2) ELU'(h1), the column sums of dh1, s dh1, the ds part;
 *      P6b dW2 += dh2^T h1, fc2_b += colsum dh2.
 * A micro-tile (4 outputs o x 4 inputs k) is summed by RS threads (the
 * largest power of two <= T / micro-tiles), rows rs, rs + RS, ...: lanes
 * 32/RS apart of one warp, combined by an xor butterfly.
 *
 * Numbers, and how the bits relate to the unfused backward:
 *   - h1, the gate and the statistics are var_gate_lanes_kernel's
 *     expressions (mean and rstd as floats of the double sums; rstd 1 /
 *     sqrt), the statistics' double sums in another order (4 columns a
 *     thread, then a butterfly), so within an ulp of its mean and rstd;
 *   - the products are fp32 FMAs summed over the inner index in ascending
 *     order, in both matmul precisions (no tensor cores): within fp32
 *     rounding of cuBLAS's fp32 products, not their bits; in bf16 mode the
 *     unfused path rounds their operands to bf16, so there the two differ
 *     by the bf16 products' error (this one the more accurate);
 *   - the norm and gate backward are var_gate_bwd_lanes_kernel's
 *     expressions, their double row sums in its order up to the butterfly;
 *   - the column sums of pw, dx, s dx, dh1, s dh1 (ln_w, X, Sx, q, Q) are
 *     double throughout: a thread's 4 rows, the warp's row groups by a
 *     butterfly, then a per-warp accumulator over the tiles, the warps in
 *     order, the splits in order (st_cuda_colsum_add: 64 row splits, then
 *     a column's rows in lane order): other orders of the same double sum;
 *   - dWg, dW2, gg and fc2_b are summed in fp32 within a tile (R / RS rows
 *     a thread, then the butterfly) and in double across tiles and splits
 *     (st_cuda_grouped_dw: fp32 within its row split, double across
 *     splits; cuBLAS: fp32 or bf16 with its own split-K);
 *   - dlog is dlog_kernel's (dalpha_j kept in double for the dot), ds is
 *     fold_ds_kernel's sum in another order, both in double.
 * No atomics, no data-dependent order; the splits depend on rows and F
 * only: bit-identical run to run, independent of the callers' strides. */
#include <string.h>

#include "cuda/check.h"
#include "cuda/vsn_backward_fused_device.cuh"
#include "cuda/vsn_device.cuh"
#include "cuda/vsn_tile_device.cuh"

extern "C" {
#include "cuda/linear_cuda.h" /* st_rowsplit_range */
#include "cuda/vsn_backward_fused_cuda.h"
#include "model/vsn.h"
}

static int fused_bwd_on = 1; /* st_cuda_vsn_set_fused_backward */
extern "C" void st_cuda_vsn_set_fused_backward(int on) { fused_bwd_on = on != 0; }

/* Row splits a variable's rows are cut into (at most; fewer where there
 * are fewer tiles or the scratch holds fewer partials): 32 x 40 = 1,280
 * blocks at the default preset, ~5 waves of two an SM. */
#define VSNB_SPLITS 32
#define VSNB_THREADS 256

static constexpr int pow2_at_most(int n) {
    return n >= 32 ? 32 : n >= 16 ? 16 : n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1;
}

/* The tile's sizes and shared-memory layout for one Dv (8, 16 or 32). */
template <int DV> struct bwd_shape {
    static constexpr int T = VSNB_THREADS, W = T / 32;
    static constexpr int CG = DV / 4, RG = T / CG, R = 4 * RG;
    static constexpr int LDW = DV + 4;                        /* weight rows */
    static constexpr int LDH = DV == 32 ? 40 : DV + 4;        /* A and B rows */
    static constexpr int LDG = 2 * DV + (DV == 32 ? 8 : 4);   /* C rows (dgl) */
    /* floats: W2 [DV][LDW], Wg [2DV][LDW], vec [8][DV], s, alpha, dalpha [R], B [R][LDH], C [R][LDG] */
    static constexpr int W2 = 0, WG = DV * LDW, VEC = 3 * DV * LDW, ROWS = VEC + 8 * DV;
    static constexpr int B = ROWS + 3 * R, C = B + R * LDH, FLOATS = C + R * LDG;
    using P = bwd_part<DV>; /* the partial's layout, the vectors' order */
    static constexpr int NWG = P::NWG, GG = P::GG, FB = P::FB, NACC = P::NACC, NCOL = P::NCOL, NP = P::NP;
    enum { U = P::U, V = P::V, B1 = P::B1, B2 = P::B2, EW = P::EW, EB = P::EB, LNW = P::LNW, LNB = P::LNB };
    enum { CLNW = P::CLNW, CX = P::CX, CSX = P::CSX, CQ1 = P::CQ1, CQS = P::CQS };
    /* doubles after the floats: acc [NACC], col [W][NCOL] (per warp), dsx [R] */
    static constexpr int DCOL = NACC, DDSX = DCOL + W * NCOL, DOUBLES = DDSX + R;
    static constexpr size_t BYTES = sizeof(float) * FLOATS + sizeof(double) * DOUBLES;
    /* the micro-tiles of dWg and dW2, and the threads (RS) sharing one */
    static constexpr int NTG = (2 * DV / 4) * (DV / 4), NT2 = (DV / 4) * (DV / 4);
    static constexpr int RSA = pow2_at_most(T / NTG), RSB = pow2_at_most(T / NT2);
    static_assert(DV % 4 == 0 && 32 % CG == 0, "a row's threads must be adjacent lanes of one warp");
    static_assert(FLOATS % 4 == 0 && LDW % 4 == 0 && LDH % 4 == 0 && LDG % 4 == 0, "float4 rows");
    static_assert(R % 32 == 0 && NTG <= W * (32 / RSA) && NT2 <= W * (32 / RSB), "micro-tiles fit the block");
};

/* Component u (a constant after unrolling) of v. */
__device__ static inline float comp(const float4 &v, int u) { return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w; }

/* v[c] (a thread's 4 rows of column first + step c) summed over the warp's
 * row groups (lanes CG apart) and added by lanes < CG to the warp's
 * accumulator dst. */
template <int CG> __device__ static inline void warp_cols_add(double (&v)[4], double *dst, int first, int step, int lane) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
#pragma unroll
        for (int o = CG; o < 32; o <<= 1)
            v[c] += __shfl_xor_sync(0xffffffffu, v[c], o);
        if (lane < CG) dst[first + step * c] += v[c];
    }
}

/* h1 = ELU(s U + V) of the tile into h ([R][LDH]). */
template <int DV> __device__ static inline void bwd_h1(const float *ss, const float *vec, float *h) {
    typedef bwd_shape<DV> S;
    vsn_tile_h1<DV, S::T, S::LDH>(ss, vec + S::U * DV, vec + S::V * DV, h, threadIdx.x);
}

/* acc[(4 oq + a) DV + 4 kq + b] += sum over the tile's rows of X[r][4 oq + a] Y[r][4 kq + b]
 * for the NT micro-tiles (oq, kq), and bsum[4 oq + a] += sum_r X[r][4 oq + a] (from the kq = 0
 * ones): RS threads a micro-tile (module comment), fp32 within the tile. */
template <int DV, int NT, int RS, int LDX, int LDY>
__device__ static inline void bwd_outer(const float *X, const float *Y, double *acc, double *bsum, int warp, int lane) {
    typedef bwd_shape<DV> S;
    constexpr int PW = 32 / RS, KQ = DV / 4;
    const int mt = warp * PW + lane % PW, rs = lane / PW;
    const bool on = mt < NT;
    const int oq = on ? mt / KQ : 0, kq = on ? mt % KQ : 0;
    float m[4][4], bs[4];
#pragma unroll
    for (int a = 0; a < 4; a++) {
        bs[a] = 0;
#pragma unroll
        for (int b = 0; b < 4; b++)
            m[a][b] = 0;
    }
#pragma unroll 4
    for (int r = rs; r < S::R; r += RS) {
        const float4 x = lds4(X + r * LDX + 4 * oq), y = lds4(Y + r * LDY + 4 * kq);
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const float xa = comp(x, a);
            bs[a] += xa;
#pragma unroll
            for (int b = 0; b < 4; b++)
                m[a][b] = fmaf(xa, comp(y, b), m[a][b]);
        }
    }
#pragma unroll
    for (int o = PW; o < 32; o <<= 1)
#pragma unroll
        for (int a = 0; a < 4; a++) {
            bs[a] += __shfl_xor_sync(0xffffffffu, bs[a], o);
#pragma unroll
            for (int b = 0; b < 4; b++)
                m[a][b] += __shfl_xor_sync(0xffffffffu, m[a][b], o);
        }
    if (!on || rs != 0) return;
#pragma unroll
    for (int a = 0; a < 4; a++) {
#pragma unroll
        for (int b = 0; b < 4; b++)
            acc[(4 * oq + a) * DV + 4 * kq + b] += (double)m[a][b];
        if (kq == 0) bsum[4 * oq + a] += (double)bs[a];
    }
}

/* __launch_bounds__: 128 registers a thread, two 256-thread blocks an SM.
 * TT: the training table's mode (bwd_args); false: the window rows, with
 * the expressions (and registers) the kernel had before that mode. */
template <int DV, bool TT>
static __global__ void __launch_bounds__(VSNB_THREADS, 2) vsn_bwd_fused_kernel(bwd_args a) {
    typedef bwd_shape<DV> S;
    constexpr int T = S::T, CG = S::CG, RG = S::RG, R = S::R, LDW = S::LDW, LDH = S::LDH, LDG = S::LDG;
    extern __shared__ float4 bwd_smem4[];
    float *sm = reinterpret_cast<float *>(bwd_smem4);
    double *dm = reinterpret_cast<double *>(sm + S::FLOATS);
    const float *W2s = sm + S::W2, *Wgs = sm + S::WG, *vec = sm + S::VEC;
    float *ss = sm + S::ROWS, *as = ss + R, *das = as + R, *Bs = sm + S::B, *Cs = sm + S::C;
    double *acc = dm, *col = dm + S::DCOL, *dsx = dm + S::DDSX;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, cg = tid % CG, rg = tid / CG;
    const int j = blockIdx.x, sp = blockIdx.y;
    double *colw = col + warp * S::NCOL;
    /* the variable's weights and vectors, for every tile; the accumulators zeroed */
    {
        const float *W2 = a.W2 + (size_t)j * DV * DV, *Wg = a.Wg + (size_t)j * 2 * DV * DV;
        for (int i = tid; i < 3 * DV * DV; i += T) { /* [W2; Wg] rows o < 3 DV, columns k */
            const int o = i / DV, k = i % DV;
            sm[S::W2 + o * LDW + k] = o < DV ? W2[i] : Wg[i - DV * DV];
        }
        bwd_stage_vec<DV, T>(a, j, sm + S::VEC, tid);
        for (int i = tid; i < S::NACC; i += T)
            acc[i] = 0;
        for (int i = tid; i < S::W * S::NCOL; i += T)
            col[i] = 0;
    }
    const int rows = TT ? min(*a.nrows, a.rows) : a.rows;
    long t0, t1;
    st_rowsplit_range(TT ? ((long)rows + R - 1) / R : a.ntiles, a.splits, sp, &t0, &t1);
    for (long tile = t0; tile < t1; tile++) {
        const size_t row0 = (size_t)tile * R;
        __syncthreads(); /* the previous tile is done with every buffer (the first: weights staged) */
        for (int i = tid; i < R; i += T) {
            const size_t row = row0 + i;
            const bool in = row < (size_t)(TT ? rows : a.rows);
            const size_t src = TT && in ? (size_t)a.src_rows[row] : row;
            ss[i] = in ? a.s[src * (size_t)a.s_stride + j] : 0.0f;
            as[i] = !in ? 0.0f : TT ? 1.0f : a.alpha[row * (size_t)a.alpha_stride + j];
            das[i] = in && a.dalpha ? a.dalpha[row * (size_t)a.dalpha_stride + j] : 0.0f;
        }
        __syncthreads();
        /* P1: h1 into A (the C region, rows LDH) */
        bwd_h1<DV>(ss, vec, Cs);
        __syncthreads();
        /* P2: h2 = h1 W2^T into B: rows rg + RG i, columns cg + CG c */
        vsn_tile_h2<DV, RG, LDH, LDW>(Cs, W2s, Bs, rg, cg);
        __syncthreads();
        /* P3: g = h2 Wg^T, the gate, the norm, dalpha_j, the norm and gate backward; dgl into C */
        {
            float g[4][8];
            vsn_tile_g<DV, RG, LDH, LDW>(Bs, Wgs, rg, cg, g);
            double cw[4] = {0, 0, 0, 0}, cx[4] = {0, 0, 0, 0}, csx[4] = {0, 0, 0, 0};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = rg + RG * i;
                const size_t row = row0 + r;
                const float sj = ss[r];
                float x[4], g1[4], sg[4], dvr[4]; /* dv of the row's columns, 0 past the end */
#pragma unroll
                for (int c = 0; c < 4; c++)
                    dvr[c] = row < (size_t)(TT ? rows : a.rows)
                                 ? __ldg(a.dv + row * (size_t)a.dv_stride + (TT ? (size_t)j * a.dv_jstride : 0) + cg +
                                         CG * c)
                                 : 0.0f;
                double sum = 0;
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int o = cg + CG * c;
                    g1[c] = g[i][c] + vec[S::B1 * DV + o];
                    sg[c] = dev_sigmoid(g[i][4 + c] + vec[S::B2 * DV + o]);
                    x[c] = (sj * vec[S::EW * DV + o] + vec[S::EB * DV + o]) + g1[c] * sg[c];
                    sum += x[c];
                }
                sum = row_sum<CG>(sum) / DV;
                double var = 0;
#pragma unroll
                for (int c = 0; c < 4; c++)
                    var += ((double)x[c] - sum) * ((double)x[c] - sum);
                var = row_sum<CG>(var);
                const float mean = (float)sum, rs = (float)(1.0 / sqrt(var / DV + VSN_EPS));
                const double aj = (double)as[r];
                float xh[4];
                double da = 0, sgk = 0, sgx = 0;
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int o = cg + CG * c;
                    const float lw = vec[S::LNW * DV + o];
                    xh[c] = xhat_of(x[c], mean, rs);
                    const float t = xh[c] * lw + vec[S::LNB * DV + o];
                    da += (double)dvr[c] * (double)t;
                    const double ad = aj * dvr[c], gk = ad * lw;
                    sgk += gk;
                    sgx += gk * xh[c];
                    cw[c] += (double)((float)ad * xh[c]);
                }
                da = row_sum<CG>(da) + (double)das[r];
                sgk = row_sum<CG>(sgk) / DV;
                sgx = row_sum<CG>(sgx) / DV;
                double ex = 0;
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int o = cg + CG * c;
                    const double gk = aj * dvr[c] * vec[S::LNW * DV + o]; /* again: fewer live registers */
                    const float dx = (float)((double)rs * (gk - sgk - xh[c] * sgx));
                    Cs[r * LDG + o] = dx * sg[c];
                    Cs[r * LDG + DV + o] = dx * g1[c] * sg[c] * (1.0f - sg[c]);
                    cx[c] += (double)dx;
                    csx[c] += (double)(sj * dx);
                    ex += (double)dx * vec[S::EW * DV + o];
                }
                ex = row_sum<CG>(ex);
                if (cg == 0) {
                    dsx[r] = ex;
                    if (!TT && row < (size_t)a.rows) a.dad[(size_t)j * a.rows + row] = da;
                }
            }
            warp_cols_add<CG>(cw, colw + S::CLNW * DV, cg, CG, lane);
            warp_cols_add<CG>(cx, colw + S::CX * DV, cg, CG, lane);
            warp_cols_add<CG>(csx, colw + S::CSX * DV, cg, CG, lane);
        }
        __syncthreads();
        /* P4: dh2 = dgl Wg (rows rg + RG i, columns 4 cg + b), kept until B is free */
        float d2[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int b = 0; b < 4; b++)
                d2[i][b] = 0;
#pragma unroll 1
        for (int o = 0; o < 2 * DV; o += 4) {
            float4 x[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                x[i] = lds4(Cs + (rg + RG * i) * LDG + o);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float4 w = lds4(Wgs + (o + u) * LDW + 4 * cg);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float xi = comp(x[i], u);
                    d2[i][0] = fmaf(xi, w.x, d2[i][0]);
                    d2[i][1] = fmaf(xi, w.y, d2[i][1]);
                    d2[i][2] = fmaf(xi, w.z, d2[i][2]);
                    d2[i][3] = fmaf(xi, w.w, d2[i][3]);
                }
            }
        }
        /* P6a: dWg += dgl^T h2, gg += colsum dgl */
        bwd_outer<DV, S::NTG, S::RSA, LDG, LDH>(Cs, Bs, acc, acc + S::GG, warp, lane);
        __syncthreads();
        /* dh2 into B, h1 again into C (rows LDH) */
#pragma unroll
        for (int i = 0; i < 4; i++)
            *reinterpret_cast<float4 *>(Bs + (rg + RG * i) * LDH + 4 * cg) =
                make_float4(d2[i][0], d2[i][1], d2[i][2], d2[i][3]);
        bwd_h1<DV>(ss, vec, Cs);
        __syncthreads();
        /* P5: dh1 = (dh2 W2) ELU'(h1), its column sums and the ds part */
        {
            float d1[4][4];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int b = 0; b < 4; b++)
                    d1[i][b] = 0;
#pragma unroll
            for (int o = 0; o < DV; o += 4) {
                float4 x[4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    x[i] = lds4(Bs + (rg + RG * i) * LDH + o);
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const float4 w = lds4(W2s + (o + u) * LDW + 4 * cg);
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float xi = comp(x[i], u);
                        d1[i][0] = fmaf(xi, w.x, d1[i][0]);
                        d1[i][1] = fmaf(xi, w.y, d1[i][1]);
                        d1[i][2] = fmaf(xi, w.z, d1[i][2]);
                        d1[i][3] = fmaf(xi, w.w, d1[i][3]);
                    }
                }
            }
            double cq[4] = {0, 0, 0, 0}, cqs[4] = {0, 0, 0, 0};
            const float4 Uk = lds4(vec + S::U * DV + 4 * cg);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = rg + RG * i;
                const float sj = ss[r];
                const float4 h = lds4(Cs + r * LDH + 4 * cg);
                double e = 0;
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    const float dh = d1[i][b] * elu_grad_from_out(comp(h, b));
                    cq[b] += (double)dh;
                    cqs[b] += (double)(sj * dh);
                    e += (double)dh * comp(Uk, b);
                }
                e = row_sum<CG>(e);
                const size_t row = row0 + r;
                if (!TT && cg == 0 && a.dsv && row < (size_t)a.rows) a.dsv[(size_t)j * a.rows + row] = dsx[r] + e;
            }
            warp_cols_add<CG>(cq, colw + S::CQ1 * DV, 4 * cg, 1, lane);
            warp_cols_add<CG>(cqs, colw + S::CQS * DV, 4 * cg, 1, lane);
        }
        /* P6b: dW2 += dh2^T h1, fc2_b += colsum dh2 */
        bwd_outer<DV, S::NT2, S::RSB, LDH, LDH>(Bs, Cs, acc + S::NWG, acc + S::FB, warp, lane);
    }
    __syncthreads();
    double *part = a.parts + ((size_t)sp * a.F + j) * S::NP;
    for (int i = tid; i < S::NACC; i += T)
        part[i] = acc[i];
    for (int i = tid; i < S::NCOL; i += T) {
        double t = 0;
        for (int w = 0; w < S::W; w++)
            t += col[w * S::NCOL + i];
        part[S::NACC + i] = t;
    }
}

/* The splits' partials added in split order, a thread per (variable,
 * value), into the gradients they belong to (the layout of bwd_shape). */
static __global__ void bwd_finish_kernel(int F, int Dv, int splits, const double *parts, st_vsn_grads_f32 g,
                                         st_vsn_fold_grads fr) {
    const int DD = Dv * Dv, NACC = 3 * DD + 3 * Dv, NP = NACC + 5 * Dv;
    GRID_LOOP(idx, (size_t)F * NP) {
        const int j = (int)(idx / NP), i = (int)(idx % NP);
        double t = 0;
        for (int sp = 0; sp < splits; sp++)
            t += parts[((size_t)sp * F + j) * NP + i];
        float *dst;
        if (i < 2 * DD)
            dst = g.var_glu_w + (size_t)j * 2 * DD + i;
        else if (i < 3 * DD)
            dst = g.var_fc2_w + (size_t)j * DD + (i - 2 * DD);
        else if (i < 3 * DD + 2 * Dv)
            dst = fr.gg + (size_t)j * 2 * Dv + (i - 3 * DD);
        else if (i < NACC)
            dst = g.var_fc2_b + (size_t)j * Dv + (i - 3 * DD - 2 * Dv);
        else {
            const int m = (i - NACC) / Dv, k = (i - NACC) % Dv; /* bwd_shape's CLNW, CX, CSX, CQ1, CQS */
            float *base = m == 0 ? g.var_ln_w : m == 1 ? fr.X : m == 2 ? fr.Sx : m == 3 ? fr.q : fr.Q;
            dst = base + (size_t)j * Dv + k;
        }
        *dst += (float)t;
    }
}

/* A thread a row: dlog_j = alpha_j (dalpha_j - sum_i alpha_i dalpha_i),
 * dlog_kernel's expressions (dalpha_j rounded to float in the first term
 * only). The fallback of bwd_dlog_tile_kernel (F too wide for its tile). */
static __global__ void bwd_dlog_kernel(int rows, int F, const double *dad, const float *alpha, int alpha_stride,
                                       float *dlog) {
    GRID_LOOP(r, (size_t)rows) {
        const float *al = alpha + r * (size_t)alpha_stride;
        double dot = 0;
        for (int j = 0; j < F; j++)
            dot += (double)al[j] * dad[(size_t)j * rows + r];
        for (int j = 0; j < F; j++)
            dlog[r * (size_t)F + j] = (float)((double)al[j] * ((double)(float)dad[(size_t)j * rows + r] - dot));
    }
}

/* bwd_dlog_kernel's rows, a warp a tile of 32: the tile's alpha rows come
 * in coalesced (lanes over a row's columns) to shared memory, thread i runs
 * row i's two loops exactly as bwd_dlog_kernel (dad [F][rows] is coalesced
 * across the 32 rows already) writing dlog over its alpha in place, and the
 * tile goes out coalesced. A thread a row reading and writing [rows, F]
 * directly touched 32 sectors a request (bench/notes-tt-kernels.md). The
 * same expressions in the same order: the same bits. Row stride in shared
 * memory F | 1 (odd: row i, column j in bank (i (F | 1) + j) mod 32, a
 * different bank for each of the 32 rows). */
#define DLOG_WARPS 4
static __host__ __device__ int dlog_ld(int F) { return F | 1; }
static __global__ void __launch_bounds__(DLOG_WARPS * 32)
    bwd_dlog_tile_kernel(int rows, int F, const double *dad, const float *alpha, int alpha_stride, float *dlog) {
    extern __shared__ float dlog_smem[];
    const int lane = threadIdx.x % 32, ld = dlog_ld(F);
    float *tile = dlog_smem + (size_t)(threadIdx.x / 32) * 32 * ld;
    const size_t ntiles = ((size_t)rows + 31) / 32;
    for (size_t tl = (size_t)blockIdx.x * DLOG_WARPS + threadIdx.x / 32; tl < ntiles;
         tl += (size_t)gridDim.x * DLOG_WARPS) {
        const size_t r0 = tl * 32;
        const int n = (size_t)rows - r0 < 32 ? (int)((size_t)rows - r0) : 32;
        for (int i = 0; i < n; i++)
            for (int j = lane; j < F; j += 32)
                tile[i * ld + j] = alpha[(r0 + i) * (size_t)alpha_stride + j];
        __syncwarp();
        if (lane < n) {
            const size_t r = r0 + lane;
            float *al = tile + lane * ld;
            double dot = 0;
            for (int j = 0; j < F; j++)
                dot += (double)al[j] * dad[(size_t)j * rows + r];
            for (int j = 0; j < F; j++)
                al[j] = (float)((double)al[j] * ((double)(float)dad[(size_t)j * rows + r] - dot));
        }
        __syncwarp();
        for (int i = 0; i < n; i++)
            for (int j = lane; j < F; j += 32)
                dlog[(r0 + i) * (size_t)F + j] = tile[i * ld + j];
        __syncwarp(); /* the tile is rewritten by the next round */
    }
}

/* A thread a row: ds[r, j] = part + dh1s . T1[:, j] + dxs . Tk[:, j] in double. */
static __global__ void bwd_ds_kernel(int rows, int F, int Hs, const double *dsv, const float *T1, const float *Tk,
                                     const float *dh1s, const float *dxs, float *ds, int ds_stride) {
    GRID_LOOP(r, (size_t)rows) {
        const float *h = dh1s + r * (size_t)Hs, *x = dxs + r * (size_t)F;
        for (int j = 0; j < F; j++) {
            double acc = dsv[(size_t)j * rows + r];
            for (int k = 0; k < Hs; k++)
                acc += (double)h[k] * T1[(size_t)k * F + j];
            for (int i = 0; i < F; i++)
                acc += (double)x[i] * Tk[(size_t)i * F + j];
            ds[r * (size_t)ds_stride + j] = (float)acc;
        }
    }
}

/* ---- host ------------------------------------------------------------------ */

/* Where the scratch's parts lie (in doubles): dad [F][rows], dsv [F][rows], parts. */
static size_t scratch_parts_at(int rows, int F) { return 2 * (size_t)rows * F; }

static size_t partial_doubles(int Dv) { return 3 * (size_t)Dv * Dv + 8 * (size_t)Dv; }

static long tile_rows(int Dv) { return 4L * VSNB_THREADS / (Dv / 4); }

/* The splits for these sizes within scratch_floats (0: it does not fit). */
static int bwd_splits(int rows, int F, int Dv, size_t scratch_floats) {
    const long ntiles = (rows + tile_rows(Dv) - 1) / tile_rows(Dv);
    const size_t have = scratch_floats / 2, fixed = scratch_parts_at(rows, F), per = (size_t)F * partial_doubles(Dv);
    if (have <= fixed) return 0;
    size_t fit = (have - fixed) / per;
    long sp = ntiles < VSNB_SPLITS ? ntiles : VSNB_SPLITS;
    if ((size_t)sp > fit) sp = (long)fit;
    return (int)sp;
}

extern "C" int st_cuda_vsn_backward_fused_fits(int rows, int F, int Dv, size_t scratch_floats) {
    if (!fused_bwd_on || (Dv != 8 && Dv != 16 && Dv != 32) || F <= 0 || rows <= 0) return 0;
    return bwd_splits(rows, F, Dv, scratch_floats) > 0;
}

template <int DV, bool TT = false> static int bwd_launch(const bwd_args &a, cudaStream_t st) {
    typedef bwd_shape<DV> S;
    const size_t bytes = S::BYTES;
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(vsn_bwd_fused_kernel<DV, TT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes));
    vsn_bwd_fused_kernel<DV, TT><<<dim3((unsigned)a.F, (unsigned)a.splits), S::T, bytes, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static unsigned blocks_of(size_t n) {
    size_t b = (n + 255) / 256;
    return (unsigned)(b > (1u << 30) ? (1u << 30) : (b ? b : 1));
}

extern "C" int st_cuda_vsn_backward_fused(int rows, int F, int Dv, const float *s, int s_stride, const float *alpha,
                                          int alpha_stride, const float *dv, int dv_stride, const float *dalpha,
                                          int dalpha_stride, const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo,
                                          const st_vsn_fold_grads *fr, const struct st_vsn_grads_f32 *g, float *dlog,
                                          int want_ds, float *scratch, size_t scratch_floats, void *stream,
                                          int *taken) {
    *taken = 0;
    if (((uintptr_t)scratch & 7) != 0 || !st_cuda_vsn_backward_fused_fits(rows, F, Dv, scratch_floats)) return ST_OK;
    *taken = 1;
    cudaStream_t st = (cudaStream_t)stream;
    double *sd = reinterpret_cast<double *>(scratch);
    bwd_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.F = F, a.s_stride = s_stride, a.alpha_stride = alpha_stride, a.dv_stride = dv_stride;
    a.dalpha_stride = dalpha_stride;
    a.ntiles = (rows + tile_rows(Dv) - 1) / tile_rows(Dv);
    a.splits = bwd_splits(rows, F, Dv, scratch_floats);
    a.s = s, a.alpha = alpha, a.dv = dv, a.dalpha = dalpha, a.W2 = w->var_fc2_w, a.Wg = w->var_glu_w;
    a.U = fo->U, a.V = fo->V, a.Vg = fo->Vg, a.ew = w->embed_w, a.eb = w->embed_b, a.lnw = w->var_ln_w;
    a.lnb = w->var_ln_b;
    a.dad = sd, a.dsv = want_ds ? sd + (size_t)rows * F : NULL, a.parts = sd + scratch_parts_at(rows, F);
    if (st_cuda_vsn_backward_fused_tc_takes(Dv))
        ST_TRY(vsn_bwd_tc_launch(a, Dv, false, st));
    else if (Dv == 8)
        ST_TRY(bwd_launch<8>(a, st));
    else if (Dv == 16)
        ST_TRY(bwd_launch<16>(a, st));
    else
        ST_TRY(bwd_launch<32>(a, st));
    bwd_finish_kernel<<<blocks_of((size_t)F * partial_doubles(Dv)), 256, 0, st>>>(F, Dv, a.splits, a.parts, *g, *fr);
    ST_CUDA_LAUNCHED();
    return st_cuda_vsn_backward_fused_dlog(rows, F, a.dad, alpha, alpha_stride, dlog, st);
}

extern "C" size_t st_cuda_vsn_backward_fused_table_doubles(int cap, int F, int Dv) {
    const long ntiles = (cap + tile_rows(Dv) - 1) / tile_rows(Dv);
    const long sp = ntiles < VSNB_SPLITS ? ntiles : VSNB_SPLITS;
    return (size_t)(sp > 0 ? sp : 1) * F * partial_doubles(Dv);
}

extern "C" int st_cuda_vsn_backward_fused_table(int cap, const int *nrows, const int *src_rows, int F, int Dv,
                                                const float *s, int s_stride, const float *dT,
                                                const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo,
                                                const st_vsn_fold_grads *fr, const struct st_vsn_grads_f32 *g,
                                                double *parts, size_t parts_doubles, void *stream) {
    ST_REQUIRE(Dv == 8 || Dv == 16 || Dv == 32, ST_ERR_INPUT,
               "VSN training bar table backward: Dv = %d is not 8, 16 or 32 (the fused kernel's tiles)", Dv);
    ST_REQUIRE(F > 0 && nrows && src_rows && dT && parts, ST_ERR_INPUT,
               "VSN training bar table backward: F=%d, or no device count, source rows, dT or partials", F);
    ST_REQUIRE(((uintptr_t)parts & 7) == 0, ST_ERR_INPUT,
               "VSN training bar table backward: the partials' scratch is not 8-byte aligned");
    const size_t need = st_cuda_vsn_backward_fused_table_doubles(cap, F, Dv);
    ST_REQUIRE(parts_doubles >= need, ST_ERR_INPUT,
               "VSN training bar table backward: %zu doubles of scratch for the partials, %zu needed", parts_doubles,
               need);
    if (cap <= 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    bwd_args a;
    memset(&a, 0, sizeof a);
    a.rows = cap, a.F = F, a.s_stride = s_stride, a.dv_stride = F * Dv, a.dv_jstride = Dv;
    a.ntiles = (cap + tile_rows(Dv) - 1) / tile_rows(Dv);
    a.splits = (int)(need / ((size_t)F * partial_doubles(Dv)));
    a.s = s, a.dv = dT, a.W2 = w->var_fc2_w, a.Wg = w->var_glu_w;
    a.U = fo->U, a.V = fo->V, a.Vg = fo->Vg, a.ew = w->embed_w, a.eb = w->embed_b, a.lnw = w->var_ln_w;
    a.lnb = w->var_ln_b;
    a.parts = parts, a.src_rows = src_rows, a.nrows = nrows;
    if (st_cuda_vsn_backward_fused_tc_takes(Dv))
        ST_TRY(vsn_bwd_tc_launch(a, Dv, true, st));
    else if (Dv == 8)
        ST_TRY((bwd_launch<8, true>(a, st)));
    else if (Dv == 16)
        ST_TRY((bwd_launch<16, true>(a, st)));
    else
        ST_TRY((bwd_launch<32, true>(a, st)));
    bwd_finish_kernel<<<blocks_of((size_t)F * partial_doubles(Dv)), 256, 0, st>>>(F, Dv, a.splits, a.parts, *g, *fr);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_vsn_backward_fused_dlog(int rows, int F, const double *dad, const float *alpha,
                                               int alpha_stride, float *dlog, void *stream) {
    if (rows <= 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t bytes = sizeof(float) * DLOG_WARPS * 32 * (size_t)dlog_ld(F);
    if (bytes <= 49152) { /* F <= 95: no opt-in needed */
        const size_t tiles = ((size_t)rows + 31) / 32;
        size_t blocks = (tiles + DLOG_WARPS - 1) / DLOG_WARPS;
        if (blocks > (1u << 30)) blocks = 1u << 30;
        bwd_dlog_tile_kernel<<<(unsigned)blocks, DLOG_WARPS * 32, bytes, st>>>(rows, F, dad, alpha, alpha_stride,
                                                                             dlog);
    } else {
        bwd_dlog_kernel<<<blocks_of((size_t)rows), 256, 0, st>>>(rows, F, dad, alpha, alpha_stride, dlog);
    }
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_vsn_backward_fused_ds(int rows, int F, int Dv, const st_vsn_fold *fo, const float *scratch,
                                             const float *dh1s, const float *dxs, float *ds, int ds_stride,
                                             void *stream) {
    if (rows <= 0) return ST_OK;
    const double *dsv = reinterpret_cast<const double *>(scratch) + (size_t)rows * F;
    bwd_ds_kernel<<<blocks_of((size_t)rows), 256, 0, (cudaStream_t)stream>>>(rows, F, hidden_sel(F, Dv), dsv, fo->T1,
                                                                            fo->Tk, dh1s, dxs, ds, ds_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
