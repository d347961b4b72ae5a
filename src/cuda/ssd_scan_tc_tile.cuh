/* ssd_scan_tc_tile.cuh: the tile helpers of the TF32 scan forwards
 * (model/ssd_scan_tc.cu: the walk, the pair and heads kernels;
 * model/ssd_scan_quad.cu: the quad kernel): TF32 WMMA k-steps, the lower
 * triangle of tiles, the rows' staging, a chunk's decay prefix and decays,
 * a G tile's decays, a Y tile and its copy-out, and what a block knows of
 * itself and its rows' alignment. CUDA sources only. */
#ifndef ST_SSD_SCAN_TC_TILE_CUH
#define ST_SSD_SCAN_TC_TILE_CUH

#include <stdint.h>

#include <mma.h>

#include "cuda/ssd_device.cuh"
#include "cuda/ssd_scan_tc.cuh"
#include "cuda/ssd_shape.cuh"

using namespace nvcuda;

#define TC_WARPS (SCAN_THREADS / 32)

typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> tc_acc;

__host__ __device__ static inline int round16(int n) { return (n + 15) & ~15; }

/* `rows` rows of `cols` floats of src (row stride ld) into dst (row stride
 * dst_ld) by cp.async: all of this thread's copies are issued before any
 * is waited for (a plain copy loop's shared store waits on its load: one
 * global round trip in flight a warp, serial over the loop). vec: 16-byte
 * copies (cols and ld multiples of 4, src 16-byte aligned), else 4-byte.
 * A copy's (row, column) steps by the block's stride: the divisions once
 * a call (constants at a fixed shape Sh), none a copy. The caller commits,
 * waits and synchronises. */
template <class Sh>
__device__ static inline void stage_async(const float *src, int ld, int rows, int cols, float *dst, int dst_ld,
                                          int vec) {
    ssd_copy_rows_async<Sh>(src, ld, rows, cols, dst, dst_ld, vec ? 4 : 1);
}

__device__ static inline int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* acc += A B over `steps` k-steps of 8: A [16 x 8k] from a (leading
 * dimension lda, a_step floats between k-steps), B [8k x 16] from b
 * likewise; both rounded to TF32 after the load. */
template <typename LA, typename LB>
__device__ static inline void mma_steps(tc_acc &acc, const float *a, int lda, int a_step, const float *b, int ldb,
                                        int b_step, int steps) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LB> fb;
    for (int k = 0; k < steps; k++) {
        wmma::load_matrix_sync(fa, a + k * a_step, lda);
        wmma::load_matrix_sync(fb, b + k * b_step, ldb);
#pragma unroll
        for (int i = 0; i < fa.num_elements; i++)
            fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
#pragma unroll
        for (int i = 0; i < fb.num_elements; i++)
            fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

/* The k-th element (t, s), s <= t, of a lower triangle in row order. */
__device__ static inline void tri_index(int k, int &t, int &s) {
    t = (int)((sqrtf(8.0f * (float)k + 1.0f) - 1.0f) * 0.5f);
    while (t * (t + 1) / 2 > k)
        t--;
    while ((t + 1) * (t + 2) / 2 <= k)
        t++;
    s = k - t * (t + 1) / 2;
}

/* A warp: cum[i] = sum_{j<=i} a_j, a_j = dt_j A (rows past L add 0), in
 * double by an inclusive shuffle scan over 32 rows a step with a carry,
 * and dtf[i] = dt_i, for i < Qp; returns cum[Qp-1] (the carry). dth: the
 * head's dt of row 0, ld floats a row (global or shared memory). */
__device__ static inline double tc_decay_prefix(const float *dth, size_t ld, int L, int Qp, double A, double *cum,
                                                float *dtf, int lane) {
    double carry = 0;
    for (int i0 = 0; i0 < Qp; i0 += 32) {
        const int i = i0 + lane;
        const float dt = i < L ? dth[(size_t)i * ld] : 0.0f;
        const double v = warp_prefix_step((double)dt * A, carry, lane);
        if (i < Qp) cum[i] = v, dtf[i] = dt;
    }
    return carry;
}

/* Warp 0: the chunk's dt and decays. cum[i] = sum_{j<=i} a_j (rows past L
 * add 0) in double by an inclusive shuffle scan over 32 rows a step with a
 * carry; dtf[i] = dt_i; e[i] = exp(cum[i]) and w[i] = exp(cum[L-1] -
 * cum[i]) dt_i in double, rounded to float as the fp32 kernel uses them;
 * e, w are 0 past L. cum[L-1] there is the scan's last value (the sum with
 * the zero rows past L, whose shuffle tree can group the terms otherwise
 * when L is not a multiple of 32: ~1e-16 apart, below float's rounding).
 * dth: the head's dt of the chunk's row 0, ld floats a row (global memory,
 * or the heads kernel's copy in shared memory: the same values). The dt
 * loads are issued after the thread's copies, so their round trip
 * overlaps them. */
__device__ static inline void chunk_decays(const float *dth, size_t ld, int L, int Qp, double A, double *cum, float *dtf,
                                           float *e, float *w, int lane) {
    const double carry = tc_decay_prefix(dth, ld, L, Qp, A, cum, dtf, lane);
    for (int i = lane; i < Qp; i += 32) { /* cum[i] and dtf[i] were written by this lane */
        const double c = cum[i];
        e[i] = i < L ? (float)exp(c) : 0.0f;
        w[i] = i < L ? (float)(exp(carry - c) * (double)dtf[i]) : 0.0f;
    }
}

/* The row of a 16 x 16 tile that element j (0..7) of a lane takes: a lane
 * keeps one column (lane % 16); the warp's two halves take rows r and r +
 * 4, which the strides Qp + 4 and Pp + 4 put in other banks. */
__device__ static inline int tile_row(int j, int lane) { return (j / 4) * 8 + j % 4 + 4 * (lane / 16); }

/* The G tile (ti, tj) of M, after its store, into M = G o Lm o dt on
 * s <= t < L (Lm = expf of the prefix difference in float), 0 elsewhere. */
__device__ static inline void decay_tile(float *M, int lm, int ti, int tj, int L, const double *cum, const float *dtf,
                                         int lane) {
    const int s = 16 * tj + lane % 16;
    const double cs = cum[s];
    const float ds = dtf[s];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int t = 16 * ti + tile_row(j, lane);
        float *m = M + t * lm + s;
        *m = s <= t && t < L ? *m * expf((float)(cum[t] - cs)) * ds : 0.0f;
    }
}

/* Rows < L, columns < P of the 16 x 16 tile at (r0, c0) of Ys (stride ly)
 * into y rows row0 + r0 .. (stride y_stride, this head's columns). vec: P,
 * y_stride multiples of 4 and y 16-byte aligned (float4 stores). */
template <class Sh>
__device__ static inline void tile_out(const scan_args &a, const float *Ys, int ly, int r0, int c0, int L, size_t row0,
                                       int h, int vec, int lane) {
    const int P = Sh::P(a);
    float *yh = a.y + row0 * (size_t)a.y_stride + (size_t)h * P;
    if (vec) {
        for (int i = lane; i < 64; i += 32) {
            const int t = r0 + i / 4, p = c0 + 4 * (i % 4);
            if (t < L && p < P) *(float4 *)(yh + (size_t)t * a.y_stride + p) = *(const float4 *)(Ys + t * ly + p);
        }
    } else {
        for (int i = lane; i < 256; i += 32) {
            const int t = r0 + i / 16, p = c0 + i % 16;
            if (t < L && p < P) yh[(size_t)t * a.y_stride + p] = Ys[t * ly + p];
        }
    }
}

/* What a block of a TC kernel knows of itself: its window b, head h and
 * group g, its warp and lane, the head's A and D, and which rows allow
 * 16-byte copies (B, C, X) and float4 stores (y). */
struct tc_block {
    int h, b, g, warp, lane, vec_b, vec_c, vec_x, vec_y;
    double A;
    float D;
};

__device__ static inline void tc_vecs_of(const scan_args &a, tc_block &k) {
    k.vec_b = (a.N & 3) == 0 && (a.B_stride & 3) == 0 && aligned16(a.Bm);
    k.vec_c = (a.N & 3) == 0 && (a.C_stride & 3) == 0 && aligned16(a.Cm);
    k.vec_x = (a.P & 3) == 0 && (a.x_stride & 3) == 0 && aligned16(a.x);
    k.vec_y = (a.P & 3) == 0 && (a.y_stride & 3) == 0 && aligned16(a.y);
}

/* A block a (window b, group g) of the kernels that walk the group's heads
 * (the heads and quad kernels); h, A and D are the loop's, per head. */
__device__ static inline tc_block tc_group_block_of(const scan_args &a) {
    tc_block k;
    k.h = 0, k.A = 0, k.D = 0;
    k.b = (int)(blockIdx.x / (unsigned)a.G), k.g = (int)(blockIdx.x % (unsigned)a.G);
    k.warp = threadIdx.x / 32, k.lane = threadIdx.x % 32;
    tc_vecs_of(a, k);
    return k;
}

/* Chunk c's Y tile j (of Q/16 x Pt) of head h: D Xc + Mc Xc into Ys0 or
 * Ys1 (X1, M1, Ys1 follow X0, M0, Ys0 by Q rows); chunk 0's copied out
 * (the quad kernel's window: chunk 0 with Q = K). */
template <class Sh>
__device__ static inline void pair_y_tile(const scan_args &a, const float *X0, int lx, const float *M0, int lm,
                                          float *Ys0, int ly, int Q, int Pt, int lk, int c, int j, float D,
                                          size_t row0, int h, const tc_block &k) {
    const int ti = j / Pt, pj = j % Pt;
    const float *Xc = X0 + c * Q * lx, *Mc = M0 + c * Q * lm;
    float *yt = Ys0 + c * Q * ly + 16 * ti * ly + 16 * pj;
    tc_acc acc;
    wmma::load_matrix_sync(acc, Xc + 16 * ti * lx + 16 * pj, lx, wmma::mem_row_major);
#pragma unroll
    for (int jj = 0; jj < acc.num_elements; jj++)
        acc.x[jj] *= D; /* D x, elementwise: the layout of the fragment does not matter */
    mma_steps<wmma::row_major, wmma::row_major>(acc, Mc + 16 * ti * lm, lm, 8, Xc + 16 * pj, lx, 8 * lx,
                                                min(2 * (ti + 1), lk));
    wmma::store_matrix_sync(yt, acc, ly, wmma::mem_row_major);
    if (!c) {
        __syncwarp();
        tile_out<Sh>(a, Ys0, ly, 16 * ti, 16 * pj, Q, row0, h, k.vec_y, k.lane);
    }
}

#endif
