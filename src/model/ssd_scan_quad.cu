/* ssd_scan_quad.cu: the scan forward for windows of at most 64 rows in bf16
 * matrix-product mode as ONE chunk in the quadratic (attention-like) form,
 * with no state at all: a block of 8 warps a (window b, group g), TF32 WMMA
 * m16n16k8 with float accumulators (ssd_scan_tc.cu's tile helpers, in
 * cuda/ssd_scan_tc_tile.cuh). For the window's K rows:
 *     G   = C B^T                 [K x K] over N, lower 16 x 16 tiles, once
 *     M_h = G o L_h o dt_h        L_h[t, s] = exp(cum_h[t] - cum_h[s]), s <= t
 *     Y_h = D_h X_h + M_h X_h     (M X over s up to the row tile's diagonal)
 * for each head h of the group, with cum_h[t] = sum_{i<=t} dt[i, h] A[h] in
 * double (a warp's shuffle scan: non-increasing, so every exponent is <= 0
 * and none overflows), the difference rounded to float and its expf as the
 * other TC kernels take theirs (decay_tile's expression). The window is the
 * pair kernel's chunk 0 with Q = K (its Y tile, pair_y_tile, as is): the
 * state term of a second chunk never arises. Within TF32 rounding of the
 * pair and heads kernels, not their bits (other sums).
 * Shared memory (floats; ldn = N + 4, lm = K + 4, lx = P + 8, ly = P + 4,
 * the TC kernels' bank strides): B, C [K][ldn] (phases 0 and 1), in whose
 * place M1 [K][lm] and Ys [K][ly] follow; M0, G [K][lm]; X two buffers
 * [K][lx] (head i in buffer i mod 2); cum [H/G][K] doubles; dt [H/G][K].
 * 96,256 bytes at K = 64, P = 32, N = 64, H/G = 8: 2 blocks an SM.
 * Phases (bench/notes-scan-quad.md):
 *     0. B, C and the first head's X by cp.async, the second head's X as a
 *        second group; meanwhile warp w scans heads w, w + 8, ... (their dt
 *        from global memory, tc_decay_prefix) into cum and dt;
 *     1. G's lower tiles, a warp a tile: stored raw into G and into M0,
 *        then on M0's copy the first head's decays (decay_tile);
 *     per head i: cp.async of head i+1's X into the buffer head i-1 read
 *        (from i = 1); Y tiles, a warp a tile (pair_y_tile: D X + M X,
 *        copied out by their warp); every thread builds M_{i+1} from G in
 *        the other M buffer (quad_decays); the copies waited for, a barrier
 *        (none after the last head).
 * 2 + H/G - 1 barriers and one staging wait a block; each buffer is written
 * only after the barrier that ends its last read.
 * Taken (scan_quad_takes) in the TC forward's mode (bf16, the scan and TC
 * switches on, staging on) where K <= 64 and K, P, N are multiples of 16
 * (whole tiles, no pads), the shared memory fits the device's opt-in limit
 * and st_cuda_ssd_set_scan_tc_quad is on; before the pair kernel. */
#include <cuda_pipeline.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_scan_tc.cuh"
#include "cuda/ssd_scan_tc_tile.cuh"
#include "cuda/ssd_shape.cuh"

/* The most rows a window may have (two columns of M a lane in quad_decays). */
#define QUAD_MAX_K 64

/* Row strides and the float offsets of the buffers. */
struct quad_layout {
    int ldn, lm, lx, ly;
    int B, C, M1, Ys, M0, G, X, cum, dt, total; /* floats; cum: H/G K doubles from there */
};

__host__ __device__ static inline quad_layout quad_layout_of(int K, int P, int N, int HG) {
    quad_layout l;
    l.ldn = N + 4, l.lm = K + 4, l.lx = P + 8, l.ly = P + 4;
    const int bc = 2 * K * l.ldn, my = K * l.lm + K * l.ly;
    l.B = 0, l.C = K * l.ldn;
    l.M1 = 0, l.Ys = K * l.lm;
    l.M0 = bc > my ? bc : my;
    l.G = l.M0 + K * l.lm;
    l.X = l.G + K * l.lm;
    l.cum = l.X + 2 * K * l.lx; /* every size above a multiple of 16 floats (K is): 32-byte aligned */
    l.dt = l.cum + 2 * HG * K;
    l.total = l.dt + HG * K;
    return l;
}

static size_t quad_smem_bytes(int K, int P, int N, int HG) {
    return sizeof(float) * (size_t)quad_layout_of(K, P, N, HG).total;
}

/* M = G o L o dt on every lower tile (decay_tile's expression), 0 above
 * the diagonal inside the diagonal tiles; the tiles above them are never
 * read. Warp w takes rows w, w + 8, ..., lanes along s (s = lane, lane +
 * 32): G's and M's rows without bank conflicts, cum[t] a broadcast, a
 * lane's cum[s] and dt[s] loaded once; every warp has as many rows of
 * each tile row. All of a lane's loads come before its stores (M and G
 * may alias as far as the compiler knows: else each row's loads would
 * wait for the row before's stores). */
__device__ static inline void quad_decays(float *M, const float *G, int lm, int K, const double *cum, const float *dtf,
                                          int warp, int lane) {
    enum { ROWS = QUAD_MAX_K / TC_WARPS, COLS = QUAD_MAX_K / 32 };
    double cs[COLS], ct[ROWS];
    float ds[COLS], g[ROWS][COLS];
#pragma unroll
    for (int c = 0; c < COLS; c++) {
        const int s = lane + 32 * c;
        cs[c] = s < K ? cum[s] : 0.0;
        ds[c] = s < K ? dtf[s] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < ROWS; j++) {
        const int t = warp + TC_WARPS * j;
        ct[j] = t < K ? cum[t] : 0.0;
#pragma unroll
        for (int c = 0; c < COLS; c++) {
            const int s = lane + 32 * c;
            g[j][c] = t < K && s <= t ? G[t * lm + s] : 0.0f;
        }
    }
#pragma unroll
    for (int j = 0; j < ROWS; j++) {
        const int t = warp + TC_WARPS * j, end = (t | 15) + 1; /* the row's last tile ends at end */
#pragma unroll
        for (int c = 0; c < COLS; c++) {
            const int s = lane + 32 * c;
            if (t < K && s < end) M[t * lm + s] = s <= t ? g[j][c] * expf((float)(ct[j] - cs[c])) * ds[c] : 0.0f;
        }
    }
}

/* 2 blocks an SM (as its shared memory allows at the default shape). */
static __global__ void __launch_bounds__(SCAN_THREADS, 2) scan_quad_kernel(scan_args a) {
    extern __shared__ __align__(128) float sm_q[];
    const int K = a.K, P = a.P, N = a.N, HG = a.H / a.G;
    const quad_layout l = quad_layout_of(K, P, N, HG);
    const int ldn = l.ldn, lm = l.lm, lx = l.lx, ly = l.ly, Kt = K / 16, Pt = P / 16, nk = N / 8, xbuf = K * lx;
    float *Bs = sm_q + l.B, *Cs = sm_q + l.C, *M0 = sm_q + l.M0, *M1 = sm_q + l.M1, *Gs = sm_q + l.G;
    float *Ys = sm_q + l.Ys, *Xb = sm_q + l.X, *dts = sm_q + l.dt;
    double *cum = (double *)(sm_q + l.cum);
    const tc_block k = tc_group_block_of(a);
    const int h0 = k.g * HG, warp = k.warp, lane = k.lane;
    const size_t row0 = (size_t)k.b * K;
    /* 0. B, C and the first head's X (one group), the second head's X (a
     * second group, waited for at the end of head 0); the heads' prefixes
     * meanwhile */
    stage_async<ssd_shape_any>(a.Bm + row0 * a.B_stride + (size_t)k.g * N, a.B_stride, K, N, Bs, ldn, k.vec_b);
    stage_async<ssd_shape_any>(a.Cm + row0 * a.C_stride + (size_t)k.g * N, a.C_stride, K, N, Cs, ldn, k.vec_c);
    stage_async<ssd_shape_any>(a.x + row0 * a.x_stride + (size_t)h0 * P, a.x_stride, K, P, Xb, lx, k.vec_x);
    __pipeline_commit();
    if (HG > 1)
        stage_async<ssd_shape_any>(a.x + row0 * a.x_stride + (size_t)(h0 + 1) * P, a.x_stride, K, P, Xb + xbuf, lx,
                                   k.vec_x);
    __pipeline_commit();
    for (int i = warp; i < HG; i += TC_WARPS)
        tc_decay_prefix(a.dt + row0 * a.dt_stride + h0 + i, a.dt_stride, K, K, (double)a.A[h0 + i], cum + i * K,
                        dts + i * K, lane);
    __pipeline_wait_prior(1);
    __syncthreads();
    /* 1. G's lower tiles, raw into G and into M0, then on M0's copy the first head's decays */
    for (int task = warp; task < Kt * (Kt + 1) / 2; task += TC_WARPS) {
        int ti, tj;
        tri_index(task, ti, tj);
        const int at = 16 * ti * lm + 16 * tj;
        tc_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        mma_steps<wmma::row_major, wmma::col_major>(acc, Cs + 16 * ti * ldn, ldn, 8, Bs + 16 * tj * ldn, ldn, 8, nk);
        wmma::store_matrix_sync(Gs + at, acc, lm, wmma::mem_row_major);
        wmma::store_matrix_sync(M0 + at, acc, lm, wmma::mem_row_major);
        __syncwarp();
        decay_tile(M0, lm, ti, tj, K, cum, dts, lane);
    }
    __syncthreads();
    const int ny = Kt * Pt;
#pragma unroll 1
    for (int i = 0; i < HG; i++) {
        const int h = h0 + i;
        const float D = a.Dskip ? a.Dskip[h] : 0.0f;
        const float *X = Xb + (i & 1) * xbuf, *M = i & 1 ? M1 : M0;
        /* head i+1's X into the buffer head i-1 read (head 1's came in phase 0) */
        if (i >= 1 && i + 1 < HG)
            stage_async<ssd_shape_any>(a.x + row0 * a.x_stride + (size_t)(h + 1) * P, a.x_stride, K, P,
                                       Xb + ((i + 1) & 1) * xbuf, lx, k.vec_x);
        __pipeline_commit();
        for (int task = warp; task < ny; task += TC_WARPS)
            pair_y_tile<ssd_shape_any>(a, X, lx, M, lm, Ys, ly, K, Pt, K / 8, 0, task, D, row0, h, k);
        if (i + 1 == HG) break;
        quad_decays(i & 1 ? M0 : M1, Gs, lm, K, cum + (i + 1) * K, dts + (i + 1) * K, warp, lane);
        __pipeline_wait_prior(0);
        __syncthreads();
    }
}

static int quad_on = 1;
extern "C" void st_cuda_ssd_set_scan_tc_quad(int on) { quad_on = on != 0; }

int scan_quad_takes(int K, int P, int N, int HG, size_t smem_optin) {
    return quad_on && K > 0 && K <= QUAD_MAX_K && K % 16 == 0 && P % 16 == 0 && N % 16 == 0 && HG > 0 &&
           quad_smem_bytes(K, P, N, HG) <= smem_optin;
}

int scan_quad_launch(const scan_args &a, int Bsz, cudaStream_t st) {
    return tc_launch(scan_quad_kernel, a, quad_smem_bytes(a.K, a.P, a.N, a.H / a.G), (unsigned)((size_t)Bsz * a.G), st);
}
