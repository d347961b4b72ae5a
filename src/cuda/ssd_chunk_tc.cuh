/* ssd_chunk_tc.cuh: the scan backward's chunk products on the tensor cores
 * (TF32 WMMA, m16n16k8, float accumulators) for the bf16 precision mode
 * (cuda/linear_cuda.h: products may be bf16/TF32, 2e-2 on gradients); the
 * SIMT steps of cuda/ssd_chunk_device.cuh stay the fp32 path, unchanged.
 * Besides the products, five things differ from the SIMT steps, each for
 * the chunk's latency chain (bench/notes-scan-backward-float.md,
 * bench/notes-scan-next.md): the rows come in by cp.async, all of a
 * thread's copies in flight at once; the decays come from one double
 * prefix a chunk (e, last in double, Lm as float exponentials of its
 * differences) instead of segment sums; step 3 runs over all warps; step
 * 4's per-row dots and step 5's row prefixes run a warp a row (lanes along
 * the row: no bank conflicts, shuffle trees and scans) instead of a lane a
 * row; step 6's column sums run over all warps; the dA, dD partials sum
 * as a warp's fixed tree; the forward walk's w and decay come from the
 * same prefix. The other elementwise work in double (the rest of steps 4
 * and 6) is the SIMT steps' code.
 * Used by model/ssd_scan_backward.cu only (chunk_backward in ssd.cu stays
 * SIMT).
 * CUDA sources only; include after cuda/ssd_chunk_device.cuh.
 *
 * Rule (ssd_tc_shape_fits): Q, P, N multiples of 16 and K a multiple of Q,
 * so that every chunk has L = Q rows and every product is whole 16 x 16
 * tiles with k-steps of 8; other shapes run the SIMT steps.
 *
 * Layout (ssd_tc_smem_bytes): bwd_smem's doubles, xds, dys [Q, N] (row
 * stride N), G, Lm, dM [Q, Q] (stride Q), then the staged rows X, dY at row
 * stride P + 4 and B, C at N + 4, and the two boundary states S_in, dS_out
 * [P, N + 4]. WMMA loads and stores need a row stride that is a multiple
 * of 4 floats and tile pointers on 32 bytes: every region starts on a
 * multiple of 8 floats from a 128-byte aligned base (7Q + 256 doubles, then
 * blocks of Q N, Q Q, Q (P + 4), Q (N + 4), P (N + 4) floats: multiples of
 * 64 floats under the rule), and tiles start at rows and columns that are
 * multiples of 8. Strides of 4 mod 32 put a fragment's 8 x 4 rows and
 * columns in 32 banks. No region beyond the SIMT layout's but the padding:
 * the epilogues run in place (75 KB at Q = 32, P = 32, N = 64: 3 blocks an
 * SM, as the SIMT variant).
 *
 * Each output tile has one warp that owns it: no atomics, every sum in a
 * fixed order (the WMMA's own), bit-identical run to run.
 *
 * Every step takes a shape policy S (cuda/ssd_shape.cuh): ssd_shape_any
 * indexes with the call's Q, P, N, L and blockDim.x, ssd_shape_fixed with
 * constants (no division in the elementwise loops, which unroll where
 * their trip counts are constants; the k-step loop stays rolled): the
 * same arithmetic in the same order, the same bits.
 * bench/emu_scan_backward_tc.py emulates the offsets, views, k-ranges and
 * phases below in float64 (and with TF32 rounding: ~3e-4 relative per
 * product at the default shape); keep it in step with this file. */
#ifndef ST_SSD_CHUNK_TC_CUH
#define ST_SSD_CHUNK_TC_CUH

#include <cuda_pipeline.h>
#include <mma.h>
#include <stdint.h>

#include "cuda/ssd_device.cuh"
#include "cuda/ssd_shape.cuh"

/* Row-stride padding of the TC layout's staged rows and states. */
#define SSD_TC_PAD 4

/* Warps of a block: the tiles of each product are dealt out over them. */
#define SSD_TC_WARPS (SSD_THREADS / 32)

/* 1 when the TC steps take the shape (Q already clamped to [1, K]). */
static inline int ssd_tc_shape_fits(int K, int P, int N, int Q) {
    return Q > 0 && Q % 16 == 0 && K % Q == 0 && P % 16 == 0 && N % 16 == 0;
}

/* Shared bytes of the TC layout (staged rows and both boundary states). */
static inline size_t ssd_tc_smem_bytes(int Q, int P, int N) {
    const size_t q = (size_t)Q, xp = (size_t)P + SSD_TC_PAD, bn = (size_t)N + SSD_TC_PAD;
    return sizeof(double) * (7 * q + SSD_THREADS) +
           sizeof(float) * (2 * q * (size_t)N + 3 * q * q + 2 * q * xp + 2 * q * bn + 2 * (size_t)P * bn);
}

/* Where the TC layout's staged rows and states lie (after bwd_smem's). */
struct ssd_tc_rows {
    float *X, *dY, *B, *C, *Sin, *dSo;
    int xs, bs, sld; /* row strides: X and dY, B and C, the states */
};

__device__ static inline ssd_tc_rows tc_rows(const ssd_bwd_smem &m, int Q, int P, int N) {
    ssd_tc_rows r;
    r.xs = P + SSD_TC_PAD, r.bs = N + SSD_TC_PAD, r.sld = N + SSD_TC_PAD;
    r.X = m.stage;
    r.dY = r.X + (size_t)Q * r.xs;
    r.B = r.dY + (size_t)Q * r.xs;
    r.C = r.B + (size_t)Q * r.bs;
    r.Sin = r.C + (size_t)Q * r.bs;
    r.dSo = r.Sin + (size_t)P * r.sld;
    return r;
}

/* rows x cols of src (row stride ld) into dst at row stride dld by cp.async,
 * every copy of the thread issued before any is waited for (the plain
 * loop's store waited on each load: one global round trip in flight a
 * warp). 16 bytes a copy where src and ld put every row start on 16 bytes
 * (cols and dld are multiples of 4 under the rule), else 4. The caller
 * waits (tc_stage_wait) before the barrier that precedes the first read. */
template <class S>
__device__ static inline void tc_stage_rows(const float *src, int ld, int rows, int cols, float *dst, int dld) {
    const int vec = (((uintptr_t)src | (uintptr_t)ld * sizeof(float)) & 15) == 0 ? 4 : 1;
    ssd_copy_rows_async<S>(src, ld, rows, cols, dst, dld, vec);
}

/* The chunk's rows of X, B (and C, dY when asked) into the TC layout by
 * cp.async, k pointing there afterwards (so that the SIMT steps' x_at etc.
 * read them); callers tc_stage_wait, then __syncthreads before reading, and
 * may issue other loads in between. */
template <class S>
__device__ static inline void tc_stage_chunk(const ssd_dev_args &a, ssd_chunk &k, const ssd_tc_rows &r, int want_c,
                                             int want_dy) {
    const int L = S::L(k), P = S::P(a), N = S::N(a);
    tc_stage_rows<S>(k.X, k.xs, L, P, r.X, r.xs), k.X = r.X, k.xs = r.xs;
    tc_stage_rows<S>(k.B, k.bs, L, N, r.B, r.bs), k.B = r.B, k.bs = r.bs;
    if (want_c) tc_stage_rows<S>(k.C, k.cs, L, N, r.C, r.bs), k.C = r.C, k.cs = r.bs;
    if (want_dy) tc_stage_rows<S>(k.dY, k.dys, L, P, r.dY, r.xs), k.dY = r.dY, k.dys = r.xs;
    __pipeline_commit();
}

/* This thread's copies of tc_stage_chunk complete (the barrier after makes
 * them everyone's). */
__device__ static inline void tc_stage_wait() { __pipeline_wait_prior(0); }

namespace ssd_tc {
using namespace nvcuda;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc_t;

/* The WMMA layout tag of a row-major (ROW) or column-major operand. */
template <bool ROW> struct layout { typedef wmma::row_major type; };
template <> struct layout<false> { typedef wmma::col_major type; };

/* acc += A B over k = 0 .. kn-1 in steps of 8 (kn a multiple of 8), the
 * operands' elements rounded to TF32 after loading. A is 16 x kn, B kn x 16,
 * row-major (A_ROW, B_ROW: element (i, j) at p[i ld + j]) or column-major
 * (at p[i + j ld]); a and b point at element (0, 0). */
template <bool A_ROW, bool B_ROW>
__device__ static inline void mma(acc_t &acc, const float *a, int lda, const float *b, int ldb, int kn) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, typename layout<A_ROW>::type> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, typename layout<B_ROW>::type> fb;
#pragma unroll 1 /* rolled: unrolled k-steps at a fixed shape cost the 80-register budget spills */
    for (int k0 = 0; k0 < kn; k0 += 8) {
        wmma::load_matrix_sync(fa, a + (A_ROW ? (size_t)k0 : (size_t)k0 * (size_t)lda), lda);
        wmma::load_matrix_sync(fb, b + (B_ROW ? (size_t)k0 * (size_t)ldb : (size_t)k0), ldb);
#pragma unroll
        for (int i = 0; i < fa.num_elements; i++)
            fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
#pragma unroll
        for (int i = 0; i < fb.num_elements; i++)
            fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

__device__ static inline int warp_id() { return (int)(threadIdx.x / 32); }
__device__ static inline int lane() { return (int)(threadIdx.x % 32); }
} // namespace ssd_tc

/* The chunk's decays from one prefix (warp 0; the other warps go on to the
 * products): cum[i] = sum_{j<=i} a_j into m.sa (free until step 6), in
 * double by a shuffle scan over segments of 32 rows with a carry; e[i] =
 * exp(cum[i]) and last[i] = exp(cum[L-1] - cum[i]) in double as the SIMT
 * step's (whose segment sums add the same terms in another order: ~1e-16
 * apart), de = 0. Lm then reads cum (after a barrier). */
template <class S> __device__ static inline void tc_decays(const ssd_chunk &k, ssd_bwd_smem &m) {
    if (ssd_tc::warp_id() != 0) return;
    const int L = S::L(k), lane = ssd_tc::lane();
    double carry = 0;
    for (int i0 = 0; i0 < L; i0 += 32) {
        const int i = i0 + lane;
        const double v = warp_prefix_step(i < L ? m.ai[i] : 0.0, carry, lane); /* rows past L add 0 */
        if (i < L) m.sa[i] = v; /* carry: cum[L-1] after the last segment */
    }
    for (int i = lane; i < L; i += 32) { /* sa[i] was written by this lane */
        m.e[i] = exp(m.sa[i]);
        m.last[i] = exp(carry - m.sa[i]);
        m.de[i] = 0;
    }
}

/* Step 2 on the tensor cores: G = C B^T and dM = dY X^T tile by tile (the
 * 16 x 16 tiles on or below the diagonal, a warp each) beside tc_decays,
 * then for s <= t Lm = expf(cum[t] - cum[s]) in float (the bf16 mode's
 * bound allows it: the difference of double prefixes rounded to float and
 * expf's 2 ulp give 6e-8 |d| + 2.4e-7 relative for a difference d: ~1e-6
 * at the test's dt, A, < 6e-6 before expf underflows, against TF32's 5e-4
 * an operand; bench/notes-scan-backward-float.md), everything above the
 * diagonal 0.
 * Contains a barrier: all threads call it. */
template <class S>
__device__ static inline void tc_products(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m,
                                          const ssd_tc_rows &r) {
    using namespace ssd_tc;
    const int L = S::L(k), l16 = L / 16;
    tc_decays<S>(k, m);
    for (int tile = warp_id(); tile < 2 * l16 * l16; tile += SSD_TC_WARPS) {
        const int which = tile / (l16 * l16), ti = (tile % (l16 * l16)) / l16, si = tile % l16;
        if (si > ti) continue; /* wholly above the diagonal: zeros, below */
        acc_t acc;
        wmma::fill_fragment(acc, 0.0f);
        if (which == 0) { /* G[t, s] = C_t . B_s: C row-major, B^T as B col-major */
            mma<true, false>(acc, r.C + (size_t)16 * ti * r.bs, r.bs, r.B + (size_t)16 * si * r.bs, r.bs, S::N(a));
            wmma::store_matrix_sync(m.G + (size_t)16 * ti * L + 16 * si, acc, L, wmma::mem_row_major);
        } else { /* dM[t, s] = dY_t . X_s */
            mma<true, false>(acc, r.dY + (size_t)16 * ti * r.xs, r.xs, r.X + (size_t)16 * si * r.xs, r.xs, S::P(a));
            wmma::store_matrix_sync(m.dM + (size_t)16 * ti * L + 16 * si, acc, L, wmma::mem_row_major);
        }
    }
    __syncthreads();
    for (int t = warp_id(); t < L; t += SSD_TC_WARPS) /* a warp a row: no division */
        for (int s = lane(); s < L; s += 32) {
            const int idx = t * L + s, on = s <= t;
            m.Lm[idx] = on ? expf((float)(m.sa[t] - m.sa[s])) : 0.0f;
            if (!on) m.G[idx] = 0.0f, m.dM[idx] = 0.0f;
        }
}

/* Each warp's v for column `lane` into red[32 w + lane], a barrier (all
 * threads call it), then warp 0's lanes that want it get their column's
 * SSD_TC_WARPS values added in warp order (the others 0). */
__device__ static inline double tc_warp_shares(double *red, double v, int want) {
    const int w = ssd_tc::warp_id(), lane = ssd_tc::lane();
    red[w * 32 + lane] = v;
    __syncthreads();
    double sum = 0;
    if (w == 0 && want)
        for (int j = 0; j < SSD_TC_WARPS; j++)
            sum += red[j * 32 + lane];
    return sum;
}

/* Step 3 (bwd_intra's math) over all warps instead of warp 0's 32 dependent
 * iterations: for each block of 32 columns, lane s of warp w updates rows t
 * = w, w + 8, ... (t >= s) of column s with bwd_intra's expressions (the
 * same bits of M, dG, R) and sums its q = dM o G o Lm into red[32 w + lane];
 * after a barrier the column's 8 sums add in warp order into dd[s] (another
 * order than bwd_intra's, ~1e-16 apart). Contains barriers; the caller
 * synchronises after (dd complete). */
template <class S> __device__ static inline void tc_intra(const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = S::L(k), lane = ssd_tc::lane(), w = ssd_tc::warp_id();
    for (int s0 = 0; s0 < L; s0 += 32) {
        if (s0 > 0) __syncthreads(); /* the last block's sums are read */
        const int s = s0 + lane;
        double acc = 0;
        if (s < L) {
            const double dts = m.dtv[s];
            for (int t = w; t < L; t += SSD_TC_WARPS) {
                if (t < s) continue;
                const int i = t * L + s;
                const double g = m.G[i], l = m.Lm[i], d = m.dM[i], q = d * g * l;
                acc += q;
                m.G[i] = (float)(g * l * dts);
                m.dM[i] = (float)(d * l * dts);
                m.Lm[i] = t > s ? (float)(q * dts) : 0.0f;
            }
        }
        const double dd = tc_warp_shares(m.red, acc, s < L);
        if (w == 0 && s < L) m.dd[s] = dd;
    }
}

/* Step 4 on the tensor cores: xds = X dS_out and dys = dY S_in ([L, N],
 * a warp a tile; zeros where the chunk has no such state), then the SIMT
 * step's sum(dS_out o S_in) and its per-row terms. Contains barriers. */
template <class S>
__device__ static inline void tc_boundary(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m,
                                          const ssd_tc_rows &r) {
    using namespace ssd_tc;
    const int L = S::L(k), N = S::N(a), P = S::P(a), has_in = k.c > 0, has_out = k.c + 1 < a.nc;
    const int l16 = L / 16, n16 = N / 16;
    const size_t pn = (size_t)P * (size_t)N;
    for (int tile = warp_id(); tile < 2 * l16 * n16; tile += SSD_TC_WARPS) {
        const int which = tile / (l16 * n16), ti = (tile % (l16 * n16)) / n16, ni = tile % n16;
        acc_t acc;
        wmma::fill_fragment(acc, 0.0f);
        if (which == 0) {
            if (has_out) mma<true, true>(acc, r.X + (size_t)16 * ti * r.xs, r.xs, r.dSo + 16 * ni, r.sld, P);
            wmma::store_matrix_sync(m.xds + (size_t)16 * ti * N + 16 * ni, acc, N, wmma::mem_row_major);
        } else {
            if (has_in) mma<true, true>(acc, r.dY + (size_t)16 * ti * r.xs, r.xs, r.Sin + 16 * ni, r.sld, P);
            wmma::store_matrix_sync(m.dys + (size_t)16 * ti * N + 16 * ni, acc, N, wmma::mem_row_major);
        }
    }
    double ddc = 0; /* as bwd_boundary: this thread's share of sum(dS_out o S_in), into red */
    if (has_in && has_out)
        for (size_t j = threadIdx.x; j < pn; j += S::threads()) {
            const size_t at = (j / N) * r.sld + j % N;
            ddc += (double)r.dSo[at] * (double)r.Sin[at];
        }
    m.red[threadIdx.x] = ddc;
    __syncthreads();
    /* bwd_boundary's per-row terms, a warp a row (lanes along n: 32
     * consecutive floats of B or C and of xds or dys, no bank conflicts; a
     * lane a row, as bwd_boundary, reads xds at stride N: 32-way at N = 64),
     * each dot a lane's N / 32 terms in order, then a fixed xor tree */
    const int ln = lane();
#pragma unroll 1
    for (int i = warp_id(); i < L; i += SSD_TC_WARPS) {
        double dw = 0, de = 0;
#pragma unroll
        for (int n0 = 0; n0 < N; n0 += 32) { /* n = n0 + ln: a constant trip count where N is */
            const int n = n0 + ln;
            if (n >= N) break;
            if (has_out) dw += (double)b_at(a, k, i, n) * m.xds[(size_t)i * N + n];
            if (has_in) de += (double)c_at(a, k, i, n) * m.dys[(size_t)i * N + n];
        }
        for (int o = 16; o > 0; o /= 2) {
            dw += __shfl_xor_sync(0xffffffffu, dw, o);
            de += __shfl_xor_sync(0xffffffffu, de, o);
        }
        if (i == L - 1 && has_in && has_out) { /* + sum(dS_out o S_in): red's shares, 8 a lane in order, a tree */
            double sr = 0;
            for (int j = ln * (SSD_THREADS / 32); j < (ln + 1) * (SSD_THREADS / 32); j++)
                sr += m.red[j];
            for (int o = 16; o > 0; o /= 2)
                sr += __shfl_xor_sync(0xffffffffu, sr, o);
            de += sr;
        }
        if (ln == 0) {
            if (has_out) {
                m.dd[i] += dw * m.last[i];
                if (i < L - 1) {
                    float *rr = &m.Lm[(L - 1) * L + i];
                    *rr = (float)((double)*rr + dw * m.last[i] * m.dtv[i]);
                }
            }
            if (has_in) m.de[i] = de;
        }
    }
}

/* Step 5 (bwd_prefix_rows' math) a warp a row instead of a lane a row (a
 * lane a row walks its row at stride L: 32 lanes in one bank at L = 32,
 * on the load and the store, 32 dependent iterations): row t's values
 * R[t, s] (s < t; 0 at s = t) along the lanes, an inclusive double shuffle
 * scan over 32-column segments with a carry seeded by e[t] de[t], each
 * lane storing its exclusive prefix (the lane below's, lane 0 the carry)
 * for s <= t. Another order than bwd_prefix_rows' serial sum (~1e-16
 * apart, double, rounded to float as it does). */
template <class S> __device__ static inline void tc_prefix_rows(const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = S::L(k), has_in = k.c > 0, ln = ssd_tc::lane();
#pragma unroll 1
    for (int t = ssd_tc::warp_id(); t < L; t += SSD_TC_WARPS) { /* t is the warp's: the shuffles see all lanes */
        float *Rt = m.Lm + (size_t)t * L;
        double carry = has_in ? m.e[t] * m.de[t] : 0.0;
        for (int s0 = 0; s0 <= t; s0 += 32) {
            const int s = s0 + ln;
            double v = s < t ? (double)Rt[s] : 0.0;
            for (int o = 1; o < 32; o *= 2) {
                const double u = __shfl_up_sync(0xffffffffu, v, o);
                if (ln >= o) v += u;
            }
            const double below = __shfl_up_sync(0xffffffffu, v, 1);
            if (s <= t) Rt[s] = (float)(ln == 0 ? carry : carry + below);
            carry += __shfl_sync(0xffffffffu, v, 31);
        }
    }
}

/* bwd_steps with steps 2 and 4 on the tensor cores, after tc_stage_chunk
 * (its copies are waited for after the dt loads). The caller synchronises
 * after. */
template <class S>
__device__ static inline void tc_steps(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m,
                                       const ssd_tc_rows &r) {
    load_decays(a, k, m.ai, m.dtv);
    tc_stage_wait();
    __syncthreads();
    tc_products<S>(a, k, m, r);
    __syncthreads();
    tc_intra<S>(k, m);
    __syncthreads();
    tc_boundary<S>(a, k, m, r);
    __syncthreads();
    tc_prefix_rows<S>(k, m);
}

/* Step 7's row factors as floats, formed once a row instead of once an
 * element: w_t = (float)(last[t] dt_t) and (float)e[t], in the 2Q floats
 * of m.ai (free once tc_decays has read it; the next chunk's decays
 * overwrite it after the chunk's last barrier). */
struct ssd_tc_scales {
    float *w, *e;
};
__device__ static inline ssd_tc_scales tc_scales(const ssd_bwd_smem &m, int Q) {
    ssd_tc_scales f;
    f.w = (float *)m.ai;
    f.e = f.w + Q;
    return f;
}

/* Step 6 (bwd_decay_grads' math) with da_i = sum_{t>=i} R[t, i] over the
 * warps instead of a lane's 32 dependent adds: for each block of 32
 * columns, lane i of warp w sums rows t = w, w + 8, ... (t >= i), the 8
 * shares added in warp order by warp 0 after a barrier (as tc_intra;
 * another order than the SIMT sum, ~1e-16 apart), warp 0 also forming
 * step 7's row factors (tc_scales); then, after another barrier, each
 * thread's share of sum dY o X into red (as the SIMT step). Contains
 * barriers; the caller synchronises after. */
template <class S>
__device__ static inline void tc_decay_grads(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = S::L(k), P = S::P(a), lane = ssd_tc::lane(), w = ssd_tc::warp_id();
    const ssd_tc_scales f = tc_scales(m, S::Q(a));
    double pd = 0;
#pragma unroll
    for (int idx = threadIdx.x; idx < L * P; idx += S::threads()) {
        const int t = idx / P, p = idx % P;
        pd += (double)dy_at(a, k, t, p) * (double)x_at(a, k, t, p);
    }
    for (int i0 = 0; i0 < L; i0 += 32) {
        if (i0 > 0) __syncthreads(); /* the last block's shares are read */
        const int i = i0 + lane;
        double part = 0;
        if (i < L)
            for (int t = w; t < L; t += SSD_TC_WARPS)
                if (t >= i) part += (double)m.Lm[t * L + i];
        const double da = tc_warp_shares(m.red, part, i < L);
        if (w == 0 && i < L) {
            a.ddt[(k.row0 + (size_t)i) * (size_t)a.ddt_stride + (size_t)k.h] = (float)(m.dd[i] + k.A * da);
            m.sa[i] = m.dtv[i] * da;
            f.w[i] = (float)(m.last[i] * m.dtv[i]), f.e[i] = (float)m.e[i];
        }
    }
    __syncthreads(); /* warp 0 has read the shares */
    m.red[threadIdx.x] = pd;
}

/* bwd_partials by warp 0 instead of thread 0's 288 serial adds: each lane
 * sums its sa[] rows and its SSD_THREADS / 32 consecutive red[] slots in
 * order, then a fixed xor tree (a + b = b + a: every lane the same sum).
 * Deterministic; another order than the SIMT sum (~1e-16 apart). */
template <class S>
__device__ static inline void tc_partials(const ssd_chunk &k, const ssd_bwd_smem &m, float *partA, float *partD,
                                          size_t at) {
    if (ssd_tc::warp_id() != 0) return;
    const int lane = ssd_tc::lane(), per = SSD_THREADS / 32;
    double sA = 0, sD = 0;
    for (int i = lane; i < S::L(k); i += 32)
        sA += m.sa[i];
    for (int j = lane * per; j < (lane + 1) * per; j++)
        sD += m.red[j];
    for (int o = 16; o > 0; o /= 2) {
        sA += __shfl_xor_sync(0xffffffffu, sA, o);
        sD += __shfl_xor_sync(0xffffffffu, sD, o);
    }
    if (lane == 0) partA[at] = (float)sA, partD[at] = (float)sD;
}

/* The forward walk's own state X^T diag(w) B into own (P x N, row stride
 * r.sld): XW = X diag(w) (floats, as scan_bwd_own's x w[t]) into the dY
 * slot (free in the forward walk), then XW^T B a warp a tile. Contains a
 * barrier; the caller synchronises after. */
template <class S>
__device__ static inline void tc_own(const ssd_dev_args &a, const ssd_chunk &k, const float *w, const ssd_tc_rows &r,
                                     float *own) {
    using namespace ssd_tc;
    const int L = S::L(k), P = S::P(a);
#pragma unroll
    for (int idx = threadIdx.x; idx < L * P; idx += S::threads()) {
        const int t = idx / P, p = idx % P;
        r.dY[(size_t)t * r.xs + p] = r.X[(size_t)t * r.xs + p] * w[t];
    }
    __syncthreads();
    const int p16 = P / 16, n16 = S::N(a) / 16;
    for (int tile = warp_id(); tile < p16 * n16; tile += SSD_TC_WARPS) {
        const int pi = tile / n16, ni = tile % n16;
        acc_t acc;
        wmma::fill_fragment(acc, 0.0f); /* own[p, n] = sum_t XW[t, p] B[t, n]: XW^T as A col-major */
        mma<false, true>(acc, r.dY + 16 * pi, r.xs, r.B + 16 * ni, r.bs, L);
        wmma::store_matrix_sync(own + (size_t)16 * pi * r.sld + 16 * ni, acc, r.sld, wmma::mem_row_major);
    }
}

/* Step 7 on the tensor cores, after step 6 (tc_decay_grads, which forms
 * the row factors of tc_scales) and its barrier, with U = dY^T diag(e) C
 * (c > 0) into U (the S_in slot, row stride r.sld). In place, so that
 * no region is added (each phase's barrier ends the last read of what the
 * next overwrites):
 *   1. G[s, s] += D (M' = M + D I: M'^T dY = M^T dY + D dY), dys *= e_t,
 *      xds *= w_t (floats, as the SIMT step rounds its terms: tc_scales);
 *   2. dC = dys + dG B into dys, dB = xds + dG^T C into xds, dX = M'^T dY
 *      into the X slot (X is read for the last time in step 6);
 *   3. dC, dB rows to dCh, dBh; B *= w_s, dY *= e_t in place (their last
 *      reads were in phase 2);
 *   4. dX += (w B) dS_out^T in the X slot; U = (e dY)^T C;
 *   5. dX rows to dx.
 * Contains barriers; the caller synchronises after (U complete). */
template <class S>
__device__ static inline void tc_outputs(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m,
                                         const ssd_tc_rows &r, float *dBh, float *dCh, float *U) {
    using namespace ssd_tc;
    const int L = S::L(k), has_in = k.c > 0, has_out = k.c + 1 < a.nc, N = S::N(a), P = S::P(a);
    const int l16 = L / 16, n16 = N / 16, p16 = P / 16, T = S::threads();
    const ssd_tc_scales f = tc_scales(m, S::Q(a));
    /* 1 */
    for (int i = threadIdx.x; i < L; i += T)
        m.G[(size_t)i * L + i] += (float)k.D;
#pragma unroll
    for (int idx = threadIdx.x; idx < L * N; idx += T) {
        const int t = idx / N;
        m.dys[idx] = has_in ? f.e[t] * m.dys[idx] : 0.0f;
        m.xds[idx] = has_out ? f.w[t] * m.xds[idx] : 0.0f;
    }
    __syncthreads();
    /* 2: dC's row t sums s <= t, dB's row s sums t >= s, dX's row s sums
     * t >= s (dG, M' are 0 above the diagonal): the k-ranges skip zeros */
    for (int tile = warp_id(); tile < 2 * l16 * n16 + l16 * p16; tile += SSD_TC_WARPS) {
        acc_t acc;
        if (tile < l16 * n16) { /* dC[t, n] = dys[t, n] + sum_s dG[t, s] B[s, n] */
            const int ti = tile / n16, ni = tile % n16;
            float *o = m.dys + (size_t)16 * ti * N + 16 * ni;
            wmma::load_matrix_sync(acc, o, N, wmma::mem_row_major);
            mma<true, true>(acc, m.dM + (size_t)16 * ti * L, L, r.B + 16 * ni, r.bs, 16 * (ti + 1));
            wmma::store_matrix_sync(o, acc, N, wmma::mem_row_major);
        } else if (tile < 2 * l16 * n16) { /* dB[s, n] = xds[s, n] + sum_t dG[t, s] C[t, n] */
            const int j = tile - l16 * n16, si = j / n16, ni = j % n16, t0 = 16 * si;
            float *o = m.xds + (size_t)16 * si * N + 16 * ni;
            wmma::load_matrix_sync(acc, o, N, wmma::mem_row_major);
            mma<false, true>(acc, m.dM + (size_t)t0 * L + t0, L, r.C + (size_t)t0 * r.bs + 16 * ni, r.bs, L - t0);
            wmma::store_matrix_sync(o, acc, N, wmma::mem_row_major);
        } else { /* dX[s, p] = sum_t M'[t, s] dY[t, p] */
            const int j = tile - 2 * l16 * n16, si = j / p16, pi = j % p16, t0 = 16 * si;
            wmma::fill_fragment(acc, 0.0f);
            mma<false, true>(acc, m.G + (size_t)t0 * L + t0, L, r.dY + (size_t)t0 * r.xs + 16 * pi, r.xs, L - t0);
            wmma::store_matrix_sync(r.X + (size_t)t0 * r.xs + 16 * pi, acc, r.xs, wmma::mem_row_major);
        }
    }
    __syncthreads();
    /* 3 */
#pragma unroll
    for (int idx = threadIdx.x; idx < L * N; idx += T) {
        const int t = idx / N, n = idx % N;
        const size_t o = (size_t)(k.t0 + t) * (size_t)N + (size_t)n;
        dCh[o] = m.dys[idx], dBh[o] = m.xds[idx];
        if (has_out) r.B[(size_t)t * r.bs + n] *= f.w[t];
    }
    if (has_in)
#pragma unroll
        for (int idx = threadIdx.x; idx < L * P; idx += T) {
            const int t = idx / P, p = idx % P;
            r.dY[(size_t)t * r.xs + p] *= f.e[t];
        }
    __syncthreads();
    /* 4 */
    const int n_dx = has_out ? l16 * p16 : 0, n_u = has_in ? p16 * n16 : 0;
    for (int tile = warp_id(); tile < n_dx + n_u; tile += SSD_TC_WARPS) {
        acc_t acc;
        if (tile < n_dx) { /* dX[s, p] += sum_n (w B)[s, n] dS_out[p, n]: dS_out^T as B col-major */
            const int si = tile / p16, pi = tile % p16;
            float *o = r.X + (size_t)16 * si * r.xs + 16 * pi;
            wmma::load_matrix_sync(acc, o, r.xs, wmma::mem_row_major);
            mma<true, false>(acc, r.B + (size_t)16 * si * r.bs, r.bs, r.dSo + (size_t)16 * pi * r.sld, r.sld, N);
            wmma::store_matrix_sync(o, acc, r.xs, wmma::mem_row_major);
        } else { /* U[p, n] = sum_t (e dY)[t, p] C[t, n]: (e dY)^T as A col-major */
            const int j = tile - n_dx, pi = j / n16, ni = j % n16;
            wmma::fill_fragment(acc, 0.0f);
            mma<false, true>(acc, r.dY + 16 * pi, r.xs, r.C + 16 * ni, r.bs, L);
            wmma::store_matrix_sync(U + (size_t)16 * pi * r.sld + 16 * ni, acc, r.sld, wmma::mem_row_major);
        }
    }
    __syncthreads();
    /* 5 */
#pragma unroll
    for (int idx = threadIdx.x; idx < L * P; idx += T) {
        const int s = idx / P, p = idx % P;
        a.dx[(k.row0 + (size_t)s) * (size_t)a.dx_stride + (size_t)k.h * (size_t)P + (size_t)p] =
            r.X[(size_t)s * r.xs + p];
    }
}

#endif
