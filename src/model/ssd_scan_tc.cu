/* ssd_scan_tc.cu: the scan forward of ssd_scan.cu (a block of 8 warps per
 * (window b, head h) walking the chunks, same math) with its four products
 * on the tensor cores, TF32 WMMA m16n16k8 with float accumulators, for
 * bf16 matrix-product mode (cuda/linear_cuda.h: products at bf16/TF32
 * precision, 2e-2 against the CPU). Per chunk of L rows, with cum[i] =
 * sum_{j<=i} a_j, a_j = dt_j A:
 *     G  = C B^T                  [L x L] over N   (lower 16 x 16 tiles only)
 *     M  = G o Lm o dt,  Lm[t, s] = exp(cum[t] - cum[s])      (s <= t)
 *     Y  = diag(e) (C S_in^T) + D X + M X          (M X over s <= the tile's)
 *     S_in <- e[L-1] S_in + XW^T B, XW = X diag(w)  (not after the last chunk)
 * e[i] = exp(cum[i]), w[i] = exp(cum[L-1] - cum[i]) dt_i.
 * Operands are rounded to TF32 after each fragment load
 * (wmma::__float_to_tf32); every sum accumulates in float. The state is
 * carried in float in shared memory (an accumulator tile loaded, scaled by
 * the decay rounded to float, the chunk's own products added, stored back;
 * DESIGN: fp32 SSD state), not in double registers as the fp32 kernel does:
 * results are within TF32 rounding of the fp32 path, not its bits. The
 * decays come from one double prefix a chunk (a warp's shuffle scan, not
 * the fp32 kernel's segment sums: ~1e-16 apart); e and w are double
 * exponentials rounded to float, Lm is expf of the prefix difference
 * rounded to float (<= 6e-6 relative, against TF32's 5e-4 an operand;
 * bench/notes-scan-forward-latency.md).
 * Q, P and N are padded to multiples of 16 in shared memory with zero rows
 * and columns (B, C, X rows past L, columns past N or P; XW rows past L; M
 * above the diagonal and past L), so every shape runs; the pads add 0 * 0.
 * The pad columns are zeroed once, the rows past L in the chunks that have
 * them; the copies write only rows < L, columns < N or P.
 * Phases a chunk, each ended by a barrier (3; the fp32 kernel has 4):
 *     0. B, C, X rows by cp.async (16 bytes a copy where the rows start on
 *        16 bytes, else 4; all of a thread's copies in flight at once);
 *        warp 0 meanwhile loads dt and forms cum, e, w, dt (float);
 *     1. warps, a 16 x 16 tile a task: G tiles into M, then on the same
 *        tile its decays and zeros; "prep" tiles (ti, pj): C S_in^T into Ys
 *        (not in the first chunk), then on the same tile Ys = e o C S^T +
 *        D X and XW = X diag(w) (a __syncwarp between: the warp reads what
 *        its own tile store wrote);
 *     2. warps: Y tiles (Ys + M X, then copied out, rows < L, columns < P),
 *        state tiles.
 * Shared memory (floats, row strides Np + 4, Pp + 8, Qp + 4, Pp + 4: every
 * tile pointer 32-byte aligned, strides multiples of 4 as WMMA needs; the
 * +4 strides put a row-major operand's 8 rows x 4 columns a load touches in
 * 32 banks, the +8 stride does so for X and XW, read along their rows as
 * k): Bs, Cs [Qp][ldn], S [Pp][ldn], Xs, XW [Qp][lx], M [Qp][lm],
 * Ys [Qp][ly], w, e, dtf [Qp]; doubles cum [Qp]. 46,208 bytes at Q = P =
 * 32, N = 64 (4 blocks an SM; 170.3 KiB at the large preset's 64, 64, 128).
 * Windows of exactly two full chunks (K = 2Q, Q a multiple of 16: the
 * default preset) run scan_tc_pair_kernel below instead (both chunks'
 * intra-chunk work at once, chunk 1's state term last: 3 barriers and one
 * staging wait a block; st_cuda_ssd_set_scan_tc_pair(0) keeps the walk),
 * compiled also for the default and tiny presets' (Q, P, N)
 * (cuda/ssd_shape.cuh: the same bits, index math by constants; unless
 * st_cuda_ssd_set_scan_fixed_shape(0)). There, at batches of at least
 * 4 blocks an SM (st_cuda_ssd_set_scan_tc_heads), scan_tc_heads_kernel
 * runs one block a (window, group) instead: the group's B, C and raw G
 * tiles once, then each of its H/G heads' pair work on them (X
 * double-buffered by cp.async, 2 barriers a head; the pair kernel's bits;
 * 113,664 bytes at the default shape, 2 blocks an SM; the pair kernel
 * where that does not fit). Measured (H200, bf16): 4,096 windows -46 us
 * an action step, 8,192 -0.13 ms a training step; 128 windows (128 blocks,
 * each walking its 8 heads) +10 us, hence the batch rule. Windows of at
 * most 64 rows (K, P, N multiples of 16) run ssd_scan_quad.cu's kernel
 * before any of these (the window as one chunk, no state;
 * st_cuda_ssd_set_scan_tc_quad); the tile helpers they share are in
 * cuda/ssd_scan_tc_tile.cuh. */
#include <cuda_pipeline.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_scan_tc.cuh"
#include "cuda/ssd_scan_tc_tile.cuh"
#include "cuda/ssd_shape.cuh"

/* Padded sizes, row strides and the float offsets of the buffers. */
struct tc_layout {
    int Qp, Pp, Np, ldn, lx, lm, ly;
    int Bs, Cs, S, Xs, XW, M, Ys, w, e, dtf, cum, total; /* floats; cum: Qp doubles from there */
};

__host__ __device__ static inline tc_layout tc_layout_of(int Q, int P, int N) {
    tc_layout l;
    l.Qp = round16(Q), l.Pp = round16(P), l.Np = round16(N);
    l.ldn = l.Np + 4, l.lx = l.Pp + 8, l.lm = l.Qp + 4, l.ly = l.Pp + 4;
    l.Bs = 0;
    l.Cs = l.Bs + l.Qp * l.ldn;
    l.S = l.Cs + l.Qp * l.ldn;
    l.Xs = l.S + l.Pp * l.ldn;
    l.XW = l.Xs + l.Qp * l.lx;
    l.M = l.XW + l.Qp * l.lx;
    l.Ys = l.M + l.Qp * l.lm;
    l.w = l.Ys + l.Qp * l.ly;
    l.e = l.w + l.Qp;
    l.dtf = l.e + l.Qp;
    l.cum = l.dtf + l.Qp; /* every size above is a multiple of 16 floats: 32-byte aligned */
    l.total = l.cum + 2 * l.Qp;
    return l;
}

size_t scan_tc_smem_bytes(int Q, int P, int N) { return sizeof(float) * (size_t)tc_layout_of(Q, P, N).total; }

/* Zeros rows [r0, r1) x columns [k0, k1) of dst (row stride ld). */
template <class Sh> __device__ static inline void zero_block(float *dst, int ld, int r0, int r1, int k0, int k1) {
    const int w = k1 - k0;
#pragma unroll
    for (int idx = threadIdx.x; idx < (r1 - r0) * w; idx += Sh::threads())
        dst[(r0 + idx / w) * ld + k0 + idx % w] = 0.0f;
}

/* The prep tile (ti, pj), after its C S_in^T store into Ys (none in the
 * first chunk): Ys = e o C S^T + D X on rows < L (0 past L), and unless
 * `last` XW = X diag(w) (0 past L). */
__device__ static inline void prep_tile(float *Ys, int ly, const float *Xs, float *XW, int lx, int ti, int pj, int L,
                                        const float *e, const float *w, float D, int first, int last, int lane) {
    const int p = 16 * pj + lane % 16;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int t = 16 * ti + tile_row(j, lane);
        const float x = Xs[t * lx + p];
        const float cs = first ? 0.0f : e[t] * Ys[t * ly + p];
        Ys[t * ly + p] = t < L ? cs + D * x : 0.0f;
        if (!last) XW[t * lx + p] = t < L ? x * w[t] : 0.0f;
    }
}

__device__ static inline void tc_vecs_of(const scan_args &a, tc_block &k);

__device__ static inline tc_block tc_block_of(const scan_args &a) {
    tc_block k;
    k.h = blockIdx.x % a.H, k.b = blockIdx.x / a.H, k.g = k.h / (a.H / a.G);
    k.warp = threadIdx.x / 32, k.lane = threadIdx.x % 32;
    k.A = (double)a.A[k.h];
    k.D = a.Dskip ? a.Dskip[k.h] : 0.0f;
    tc_vecs_of(a, k);
    return k;
}

/* Head h's chunk-1 Y tiles: Ys1 + Ce1 S^T over n, copied out (Ce1 = C1
 * e1; the pair kernels' last phase). */
template <class Sh>
__device__ static inline void pair_y1_state(const scan_args &a, float *Ys1, int ly, const float *Ce1, const float *S,
                                            int ldn, int Q, int Pt, int nk, size_t row0, int h, const tc_block &k) {
    const int ny = Q / 16 * Pt;
    for (int task = k.warp; task < ny; task += TC_WARPS) {
        const int ti = task / Pt, pj = task % Pt;
        float *yt = Ys1 + 16 * ti * ly + 16 * pj;
        tc_acc acc;
        wmma::load_matrix_sync(acc, yt, ly, wmma::mem_row_major);
        mma_steps<wmma::row_major, wmma::col_major>(acc, Ce1 + 16 * ti * ldn, ldn, 8, S + 16 * pj * ldn, ldn, 8, nk);
        wmma::store_matrix_sync(yt, acc, ly, wmma::mem_row_major);
        __syncwarp();
        tile_out<Sh>(a, Ys1, ly, 16 * ti, 16 * pj, Q, row0 + Q, h, k.vec_y, k.lane);
    }
}

/* 4 blocks an SM (as the shared memory allows at the default shape): held
 * to 64 registers. */
static __global__ void __launch_bounds__(SCAN_THREADS, 4) scan_tc_kernel(scan_args a) {
    extern __shared__ __align__(128) float sm_tc[];
    const int P = a.P, N = a.N;
    const tc_layout l = tc_layout_of(a.Q, P, N);
    const int ldn = l.ldn, lx = l.lx, lm = l.lm, ly = l.ly, Pt = l.Pp / 16, Nt = l.Np / 16, nk = (N + 7) / 8;
    float *Bs = sm_tc + l.Bs, *Cs = sm_tc + l.Cs, *S = sm_tc + l.S, *Xs = sm_tc + l.Xs, *XW = sm_tc + l.XW;
    float *M = sm_tc + l.M, *Ys = sm_tc + l.Ys, *w = sm_tc + l.w, *e = sm_tc + l.e, *dtf = sm_tc + l.dtf;
    double *cum = (double *)(sm_tc + l.cum);
    const tc_block k = tc_block_of(a);
    const int h = k.h, b = k.b, g = k.g, warp = k.warp, lane = k.lane;
    const double A = k.A;
    const float D = k.D;
    const int vec_b = k.vec_b, vec_c = k.vec_c, vec_x = k.vec_x, vec_y = k.vec_y;
    /* the pad columns, never copied into: zero for every chunk (the first
     * barrier orders these stores before any read) */
    zero_block<ssd_shape_any>(Bs, ldn, 0, l.Qp, N, ldn);
    zero_block<ssd_shape_any>(Cs, ldn, 0, l.Qp, N, ldn);
    zero_block<ssd_shape_any>(Xs, lx, 0, l.Qp, P, lx);
    for (int c = 0; c < a.nc; c++) {
        const int t0 = c * a.Q, L = min(a.Q, a.K - t0), first = c == 0, last = c == a.nc - 1;
        const int Lt = (L + 15) / 16, lk = (L + 7) / 8; /* tiles and k-steps of 8 in use */
        const size_t row0 = (size_t)b * a.K + t0;
        /* 0. the rows by cp.async; rows L .. Qp zero (other places than
         * the copies'); dt and the decays by warp 0 meanwhile */
        stage_async<ssd_shape_any>(a.Bm + row0 * a.B_stride + (size_t)g * N, a.B_stride, L, N, Bs, ldn, vec_b);
        stage_async<ssd_shape_any>(a.Cm + row0 * a.C_stride + (size_t)g * N, a.C_stride, L, N, Cs, ldn, vec_c);
        stage_async<ssd_shape_any>(a.x + row0 * a.x_stride + (size_t)h * P, a.x_stride, L, P, Xs, lx, vec_x);
        __pipeline_commit();
        if (L < l.Qp) {
            zero_block<ssd_shape_any>(Bs, ldn, L, l.Qp, 0, N);
            zero_block<ssd_shape_any>(Cs, ldn, L, l.Qp, 0, N);
            zero_block<ssd_shape_any>(Xs, lx, L, l.Qp, 0, P);
        }
        if (warp == 0) chunk_decays(a.dt + row0 * a.dt_stride + h, a.dt_stride, L, l.Qp, A, cum, dtf, e, w, lane);
        __pipeline_wait_prior(0);
        __syncthreads();
        /* 1. a 16 x 16 tile a task: G's lower tiles into M, then their
         * decays; the prep tiles: C S_in^T into Ys (S_in = 0 in the first
         * chunk: skipped), then Ys and XW's elementwise steps */
        const int ng = Lt * (Lt + 1) / 2, np = Lt * Pt;
        for (int task = warp; task < ng + np; task += TC_WARPS) {
            tc_acc acc;
            if (task < ng) {
                int ti, tj;
                tri_index(task, ti, tj);
                wmma::fill_fragment(acc, 0.0f);
                mma_steps<wmma::row_major, wmma::col_major>(acc, Cs + 16 * ti * ldn, ldn, 8, Bs + 16 * tj * ldn, ldn, 8,
                                                            nk);
                wmma::store_matrix_sync(M + 16 * ti * lm + 16 * tj, acc, lm, wmma::mem_row_major);
                __syncwarp();
                decay_tile(M, lm, ti, tj, L, cum, dtf, lane);
            } else {
                const int ti = (task - ng) / Pt, pj = (task - ng) % Pt;
                if (!first) {
                    wmma::fill_fragment(acc, 0.0f);
                    mma_steps<wmma::row_major, wmma::col_major>(acc, Cs + 16 * ti * ldn, ldn, 8, S + 16 * pj * ldn, ldn,
                                                                8, nk);
                    wmma::store_matrix_sync(Ys + 16 * ti * ly + 16 * pj, acc, ly, wmma::mem_row_major);
                    __syncwarp();
                }
                prep_tile(Ys, ly, Xs, XW, lx, ti, pj, L, e, w, D, first, last, lane);
            }
        }
        __syncthreads();
        /* 2. Y tiles (Ys + M X over the s-tiles up to the diagonal), copied
         * out by their warp; then the state tiles (not after the last chunk) */
        const int ny = Lt * Pt, ns = last ? 0 : Pt * Nt;
        const float decay = e[L - 1];
        for (int task = warp; task < ny + ns; task += TC_WARPS) {
            tc_acc acc;
            if (task < ny) {
                const int ti = task / Pt, pj = task % Pt, steps = min(2 * (ti + 1), lk);
                float *yt = Ys + 16 * ti * ly + 16 * pj;
                wmma::load_matrix_sync(acc, yt, ly, wmma::mem_row_major);
                mma_steps<wmma::row_major, wmma::row_major>(acc, M + 16 * ti * lm, lm, 8, Xs + 16 * pj, lx, 8 * lx,
                                                            steps);
                wmma::store_matrix_sync(yt, acc, ly, wmma::mem_row_major);
                __syncwarp();
                tile_out<ssd_shape_any>(a, Ys, ly, 16 * ti, 16 * pj, L, row0, h, vec_y, lane);
            } else {
                const int pi = (task - ny) / Nt, nj = (task - ny) % Nt;
                float *st = S + 16 * pi * ldn + 16 * nj;
                if (first) {
                    wmma::fill_fragment(acc, 0.0f);
                } else {
                    wmma::load_matrix_sync(acc, st, ldn, wmma::mem_row_major);
#pragma unroll
                    for (int i = 0; i < acc.num_elements; i++)
                        acc.x[i] *= decay;
                }
                /* XW^T (p x t) is XW read column-major; B (t x n) row-major */
                mma_steps<wmma::col_major, wmma::row_major>(acc, XW + 16 * pi, lx, 8 * lx, Bs + 16 * nj, ldn, 8 * ldn,
                                                            lk);
                wmma::store_matrix_sync(st, acc, ldn, wmma::mem_row_major);
            }
        }
        if (last) break;
        __syncthreads(); /* the next chunk's staging overwrites Bs, Cs, Xs, cum, e, w; its phase 1 reads S */
    }
}

/* ---- Both chunks at once (nc = 2, K = 2Q, Q a multiple of 16) ----
 * The state entering chunk 1 is chunk 0's own X0^T diag(w0) B0 (the state
 * entering chunk 0 is 0), so a window of two full chunks needs no serial
 * walk: one staging of all its rows, the intra-chunk work of both chunks
 * side by side, and chunk 1's C S^T term last
 * (bench/notes-scan-next.md: 3 barriers and 1 staging wait a block instead
 * of 5 and 2):
 *     0. B, C, X rows of both chunks by cp.async; warp 0 forms chunk 0's
 *        cum, w, dt, warp 1 chunk 1's cum, e, dt (chunk_decays);
 *     1. the G tiles of both chunks, each then its decays: M0, M1;
 *     2. state tasks (a column tile nj of B0 scaled by w0 in place, then
 *        S[pi, nj] = X0^T (w0 B0) for every pi); Y0 tiles (acc = D X0 +
 *        M0 X0, copied out); Y1 tiles (acc = D X1 + M1 X1 into Ys1); then
 *        every thread: C1's rows scaled by e1 in place;
 *     3. Y1 tiles: Ys1 + (e1 C1) S^T, copied out.
 * Chunk 0's y are the walk's sums in the walk's order (its prep's D x is
 * the accumulator's start here; S_in = 0 adds nothing); chunk 1's differ
 * by rounding only (e1 and w0 scale an operand before the TF32 rounding
 * instead of the product or X after it).
 * Layout (floats; ldn, lx, lm, ly as tc_layout, Qp = Q): B0, B1 [Q][ldn]
 * consecutive (one staging of 2Q rows), B1 then S [Pp][ldn] (so max(Q, Pp)
 * rows); C0 [Q][ldn], then Ys0, Ys1 [Q][ly] (so Q max(ldn, 2 ly)); C1
 * [Q][ldn]; X0, X1 [Q][lx] consecutive; M0, M1 [Q][lm]; w, e, dtf [2Q];
 * cum [2Q] doubles. Each reuse starts after the barrier that ends the last
 * read of what it overwrites (B1 and C0: phase 1's G tiles). 56,064 bytes
 * at Q = P = 32, N = 64 (4 blocks an SM, as the walk). */
struct tc_pair_layout {
    int Pp, Np, ldn, lx, lm, ly;
    int B0, C0, C1, X0, M0, w, e, dtf, cum, total; /* floats; cum: 2Q doubles from there */
};

__host__ __device__ static inline tc_pair_layout tc_pair_layout_of(int Q, int P, int N) {
    tc_pair_layout l;
    l.Pp = round16(P), l.Np = round16(N);
    l.ldn = l.Np + 4, l.lx = l.Pp + 8, l.lm = Q + 4, l.ly = l.Pp + 4;
    l.B0 = 0;
    l.C0 = l.B0 + Q * l.ldn + (Q > l.Pp ? Q : l.Pp) * l.ldn;
    l.C1 = l.C0 + Q * (l.ldn > 2 * l.ly ? l.ldn : 2 * l.ly);
    l.X0 = l.C1 + Q * l.ldn;
    l.M0 = l.X0 + 2 * Q * l.lx;
    l.w = l.M0 + 2 * Q * l.lm;
    l.e = l.w + 2 * Q;
    l.dtf = l.e + 2 * Q;
    l.cum = l.dtf + 2 * Q; /* every size above is a multiple of 16 floats (Q is): 32-byte aligned */
    l.total = l.cum + 4 * Q;
    return l;
}

/* 1 when the pair kernel's rule takes the (clamped) shape. */
static inline int tc_pair_shape(int K, int Q) { return Q > 0 && Q % 16 == 0 && K == 2 * Q; }

static size_t scan_tc_pair_smem_bytes(int Q, int P, int N) {
    return sizeof(float) * (size_t)tc_pair_layout_of(Q, P, N).total;
}

/* 4 blocks an SM (as the shared memory allows at the default shape): held
 * to 64 registers. Sh: the shape policy (cuda/ssd_shape.cuh: the call's
 * sizes, or a compile-time shape with the same bits). */
template <class Sh> static __global__ void __launch_bounds__(SCAN_THREADS, 4) scan_tc_pair_kernel(scan_args a) {
    extern __shared__ __align__(128) float sm_tp[];
    const int P = Sh::P(a), N = Sh::N(a), Q = Sh::Q(a);
    const tc_pair_layout l = tc_pair_layout_of(Q, P, N);
    const int ldn = l.ldn, lx = l.lx, lm = l.lm, ly = l.ly, Lt = Q / 16, Pt = l.Pp / 16, Nt = l.Np / 16;
    const int nk = (N + 7) / 8, lk = Q / 8;
    float *B0 = sm_tp + l.B0, *B1 = B0 + Q * ldn, *S = B1, *C0 = sm_tp + l.C0, *C1 = sm_tp + l.C1;
    float *Ys0 = C0, *Ys1 = C0 + Q * ly, *X0 = sm_tp + l.X0, *M0 = sm_tp + l.M0, *M1 = M0 + Q * lm;
    float *w = sm_tp + l.w, *e = sm_tp + l.e, *dtf = sm_tp + l.dtf;
    double *cum = (double *)(sm_tp + l.cum);
    const tc_block k = tc_block_of(a);
    const int h = k.h, warp = k.warp, lane = k.lane;
    const size_t row0 = (size_t)k.b * a.K; /* chunk 1 starts at row0 + Q */
    /* 0. the pad columns zero (places no copy writes; the barrier orders
     * them before any read), every row by cp.async, the decays by warps 0
     * (chunk 0) and 1 (chunk 1) meanwhile */
    zero_block<Sh>(B0, ldn, 0, 2 * Q, N, ldn);
    zero_block<Sh>(C0, ldn, 0, Q, N, ldn);
    zero_block<Sh>(C1, ldn, 0, Q, N, ldn);
    zero_block<Sh>(X0, lx, 0, 2 * Q, P, lx);
    stage_async<Sh>(a.Bm + row0 * a.B_stride + (size_t)k.g * N, a.B_stride, 2 * Q, N, B0, ldn, k.vec_b);
    stage_async<Sh>(a.Cm + row0 * a.C_stride + (size_t)k.g * N, a.C_stride, Q, N, C0, ldn, k.vec_c);
    stage_async<Sh>(a.Cm + (row0 + Q) * a.C_stride + (size_t)k.g * N, a.C_stride, Q, N, C1, ldn, k.vec_c);
    stage_async<Sh>(a.x + row0 * a.x_stride + (size_t)h * P, a.x_stride, 2 * Q, P, X0, lx, k.vec_x);
    __pipeline_commit();
    if (warp < 2)
        chunk_decays(a.dt + (row0 + (size_t)warp * Q) * a.dt_stride + h, a.dt_stride, Q, Q, k.A, cum + warp * Q,
                     dtf + warp * Q, e + warp * Q, w + warp * Q, lane);
    __pipeline_wait_prior(0);
    __syncthreads();
    /* 1. the G tiles of both chunks into M0, M1, then their decays */
    const int ng = Lt * (Lt + 1) / 2;
    for (int task = warp; task < 2 * ng; task += TC_WARPS) {
        const int c = task >= ng;
        int ti, tj;
        tri_index(task - c * ng, ti, tj);
        const float *Cc = c ? C1 : C0, *Bc = c ? B1 : B0;
        float *Mc = c ? M1 : M0;
        tc_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        mma_steps<wmma::row_major, wmma::col_major>(acc, Cc + 16 * ti * ldn, ldn, 8, Bc + 16 * tj * ldn, ldn, 8, nk);
        wmma::store_matrix_sync(Mc + 16 * ti * lm + 16 * tj, acc, lm, wmma::mem_row_major);
        __syncwarp();
        decay_tile(Mc, lm, ti, tj, Q, cum + c * Q, dtf + c * Q, lane);
    }
    __syncthreads();
    /* 2. the state tasks (nj < Nt), then the Y0 and Y1 tiles; in rounds of
     * 8 tasks, every other round in reverse warp order, so that the warps
     * with the cheaper tasks of one round take the next */
    const int ny = Lt * Pt, n2 = Nt + 2 * ny;
#pragma unroll 1
    for (int round = 0; round * TC_WARPS < n2; round++) {
        const int task = round * TC_WARPS + (round & 1 ? TC_WARPS - 1 - warp : warp);
        if (task >= n2) continue;
        tc_acc acc;
        if (task < Nt) { /* B0's columns nj (rows < Q) by w0, then S[pi, nj] = X0^T (w0 B0) */
            const int col = 16 * task + lane % 16;
            for (int t = lane / 16; t < Q; t += 2)
                B0[t * ldn + col] *= w[t];
            __syncwarp();
#pragma unroll 1
            for (int pi = 0; pi < Pt; pi++) { /* X0^T (p x t) is X0 read column-major; B0 (t x n) row-major */
                wmma::fill_fragment(acc, 0.0f);
                mma_steps<wmma::col_major, wmma::row_major>(acc, X0 + 16 * pi, lx, 8 * lx, B0 + 16 * task, ldn,
                                                            8 * ldn, lk);
                wmma::store_matrix_sync(S + 16 * pi * ldn + 16 * task, acc, ldn, wmma::mem_row_major);
            }
        } else {
            const int c = task >= Nt + ny;
            pair_y_tile<Sh>(a, X0, lx, M0, lm, Ys0, ly, Q, Pt, lk, c, task - Nt - c * ny, k.D, row0, h, k);
        }
    }
    /* C1's rows by e1 (C1's last reader before phase 3 was phase 1), float4s */
#pragma unroll
    for (int idx = threadIdx.x, q4 = l.Np / 4; idx < Q * q4; idx += Sh::threads()) {
        const int t = idx / q4;
        float4 *v = (float4 *)(C1 + t * ldn + 4 * (idx - t * q4));
        const float et = e[Q + t];
        v->x *= et, v->y *= et, v->z *= et, v->w *= et;
    }
    __syncthreads();
    /* 3. chunk 1's Y tiles: Ys1 + (e1 C1) S^T over n, copied out */
    pair_y1_state<Sh>(a, Ys1, ly, C1, S, ldn, Q, Pt, nk, row0, h, k);
}

/* ---- The pair kernel a (window, group) ----
 * B, C (and so G = C B^T) are the group's, shared by its H/G heads: one
 * block a (window b, group g) stages B, C of both chunks once and keeps
 * both chunks' raw G tiles, then per head h of the group does the pair
 * kernel's remaining work with its expressions in its order (y the same
 * bits): M = G's decays on a copy of the raw tiles, Bw0 = B0 w0 and Ce1 =
 * C1 e1 as copies (B0, C1 stay raw for the next head), S = X0^T Bw0, Y0 =
 * D X0 + M0 X0, Y1 = D X1 + M1 X1 + Ce1 S^T. Phases (bench/notes-scan-heads.md):
 *     0. B, C, X of the first head, the group's dt [2Q][H/G] by cp.async;
 *     1. both chunks' G tiles, raw; the first head's decays (from dt in
 *        shared memory: chunk_decays's values);
 *     per head i: A. cp.async of head i+1's X into the other buffer;
 *        warps: head i-1's Y1 += Ce1 S^T, copied out; every thread: M,
 *        Bw0 of head i; B. every thread: Ce1; warps: S, Y0 (copied out),
 *        Y1 into Ys1, head i+1's decays into the other decay buffer;
 *     last: the last head's Y1 += Ce1 S^T.
 * 2 + 2 H/G barriers a block; each buffer is written only after the
 * barrier that ends its last read (X, decays: double buffers by head).
 * Layout (floats): B0, B1 and C0, C1 [Q][ldn] consecutive; G0, G1 and
 * M0, M1 [Q][lm]; Bw0, Ce1 [Q][ldn]; S [Pp][ldn]; X two buffers of X0, X1
 * [Q][lx]; Ys0, Ys1 [Q][ly]; two decay buffers (w, e, dtf [2Q], cum [2Q]
 * doubles); dt [2Q][H/G]. 113,664 bytes at Q = P = 32, N = 64, H/G = 8 (2
 * blocks an SM). */
struct tc_heads_layout {
    int Pp, Np, ldn, lx, lm, ly;
    int B, C, G, M, Bw, Ce, S, X, Ys, dec, dt, total; /* floats; dec: 2 buffers of 10Q */
};

__host__ __device__ static inline tc_heads_layout tc_heads_layout_of(int Q, int P, int N, int HG) {
    tc_heads_layout l;
    l.Pp = round16(P), l.Np = round16(N);
    l.ldn = l.Np + 4, l.lx = l.Pp + 8, l.lm = Q + 4, l.ly = l.Pp + 4;
    l.B = 0;
    l.C = l.B + 2 * Q * l.ldn;
    l.G = l.C + 2 * Q * l.ldn;
    l.M = l.G + 2 * Q * l.lm;
    l.Bw = l.M + 2 * Q * l.lm;
    l.Ce = l.Bw + Q * l.ldn;
    l.S = l.Ce + Q * l.ldn;
    l.X = l.S + l.Pp * l.ldn;
    l.Ys = l.X + 4 * Q * l.lx;
    l.dec = l.Ys + 2 * Q * l.ly; /* every size above a multiple of 16 floats (Q is): 32-byte aligned */
    l.dt = l.dec + 20 * Q;
    l.total = l.dt + 2 * Q * HG;
    return l;
}

static size_t scan_tc_heads_smem_bytes(int Q, int P, int N, int HG) {
    return sizeof(float) * (size_t)tc_heads_layout_of(Q, P, N, HG).total;
}

/* Head i of the group (head h), chunk c: its decays into decay buffer dec
 * (w, e, dtf, cum at 0, 2Q, 4Q, 6Q floats), from dt in shared memory. */
__device__ static inline void heads_decays(const scan_args &a, const float *dts, int HG, int i, int h, int c, int Q,
                                           float *dec, int lane) {
    chunk_decays(dts + (size_t)c * Q * HG + i, (size_t)HG, Q, Q, (double)a.A[h], (double *)(dec + 6 * Q) + c * Q,
                 dec + 4 * Q + c * Q, dec + 2 * Q + c * Q, dec + c * Q, lane);
}

/* 2 blocks an SM (as its shared memory allows at the default shape). */
template <class Sh> static __global__ void __launch_bounds__(SCAN_THREADS, 2) scan_tc_heads_kernel(scan_args a) {
    extern __shared__ __align__(128) float sm_th[];
    const int P = Sh::P(a), N = Sh::N(a), Q = Sh::Q(a), HG = a.H / a.G;
    const tc_heads_layout l = tc_heads_layout_of(Q, P, N, HG);
    const int ldn = l.ldn, lx = l.lx, lm = l.lm, ly = l.ly, Lt = Q / 16, Pt = l.Pp / 16, Nt = l.Np / 16;
    const int nk = (N + 7) / 8, lk = Q / 8, xbuf = 2 * Q * lx, decbuf = 10 * Q;
    float *B0 = sm_th + l.B, *C0 = sm_th + l.C, *C1 = C0 + Q * ldn, *G0 = sm_th + l.G, *M0 = sm_th + l.M;
    float *Bw0 = sm_th + l.Bw, *Ce1 = sm_th + l.Ce, *S = sm_th + l.S, *Xb = sm_th + l.X;
    float *Ys0 = sm_th + l.Ys, *Ys1 = Ys0 + Q * ly, *decs = sm_th + l.dec, *dts = sm_th + l.dt;
    const tc_block k = tc_group_block_of(a);
    const int h0 = k.g * HG, warp = k.warp, lane = k.lane;
    const size_t row0 = (size_t)k.b * a.K;
    /* 0. pad columns zero (both X buffers), B, C, the first head's X and
     * the group's dt by cp.async */
    zero_block<Sh>(B0, ldn, 0, 2 * Q, N, ldn);
    zero_block<Sh>(C0, ldn, 0, 2 * Q, N, ldn);
    zero_block<Sh>(Xb, lx, 0, 4 * Q, P, lx);
    stage_async<Sh>(a.Bm + row0 * a.B_stride + (size_t)k.g * N, a.B_stride, 2 * Q, N, B0, ldn, k.vec_b);
    stage_async<Sh>(a.Cm + row0 * a.C_stride + (size_t)k.g * N, a.C_stride, 2 * Q, N, C0, ldn, k.vec_c);
    stage_async<Sh>(a.x + row0 * a.x_stride + (size_t)h0 * P, a.x_stride, 2 * Q, P, Xb, lx, k.vec_x);
    ssd_copy_rows_async<Sh>(a.dt + row0 * a.dt_stride + h0, a.dt_stride, 2 * Q, HG, dts, HG, 1);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    /* 1. the raw G tiles of both chunks; the first head's decays */
    const int ng = Lt * (Lt + 1) / 2;
    for (int task = warp; task < 2 * ng + 2; task += TC_WARPS) {
        if (task >= 2 * ng) {
            heads_decays(a, dts, HG, 0, h0, task - 2 * ng, Q, decs, lane);
            continue;
        }
        const int c = task >= ng;
        int ti, tj;
        tri_index(task - c * ng, ti, tj);
        const float *Cc = C0 + c * Q * ldn, *Bc = B0 + c * Q * ldn;
        tc_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        mma_steps<wmma::row_major, wmma::col_major>(acc, Cc + 16 * ti * ldn, ldn, 8, Bc + 16 * tj * ldn, ldn, 8, nk);
        wmma::store_matrix_sync(G0 + c * Q * lm + 16 * ti * lm + 16 * tj, acc, lm, wmma::mem_row_major);
    }
    __syncthreads();
    const int ny = Lt * Pt, q4 = l.Np / 4;
#pragma unroll 1
    for (int i = 0; i < HG; i++) {
        const int h = h0 + i;
        const float D = a.Dskip ? a.Dskip[h] : 0.0f;
        const float *X0 = Xb + (i & 1) * xbuf, *dec = decs + (i & 1) * decbuf;
        const float *w = dec, *e = dec + 2 * Q, *dtf = dec + 4 * Q;
        const double *cum = (const double *)(dec + 6 * Q);
        /* A. head i+1's X (its buffer's last reader: head i-1's phase B);
         * head i-1's state term; M and Bw0 of head i */
        if (i + 1 < HG)
            stage_async<Sh>(a.x + row0 * a.x_stride + (size_t)(h + 1) * P, a.x_stride, 2 * Q, P,
                            Xb + ((i + 1) & 1) * xbuf, lx, k.vec_x);
        __pipeline_commit();
        if (i > 0) pair_y1_state<Sh>(a, Ys1, ly, Ce1, S, ldn, Q, Pt, nk, row0, h - 1, k);
        /* decay_tile's expression on a copy of the raw tile (s <= t < L = Q;
         * 0 above the diagonal, never read past the diagonal tile) */
#pragma unroll 1
        for (int idx = threadIdx.x; idx < 2 * Q * Q; idx += Sh::threads()) {
            const int c = idx / (Q * Q), r = idx - c * Q * Q, t = r / Q, s = r - t * Q;
            const double *cc = cum + c * Q;
            const int at = c * Q * lm + t * lm + s;
            const double cs = cc[s];
            const float ds = dtf[c * Q + s];
            M0[at] = s <= t ? G0[at] * expf((float)(cc[t] - cs)) * ds : 0.0f;
        }
#pragma unroll
        for (int idx = threadIdx.x; idx < Q * q4; idx += Sh::threads()) {
            const int t = idx / q4, at = t * ldn + 4 * (idx - t * q4);
            const float4 v = *(const float4 *)(B0 + at);
            const float wt = w[t];
            *(float4 *)(Bw0 + at) = make_float4(v.x * wt, v.y * wt, v.z * wt, v.w * wt);
        }
        __pipeline_wait_prior(1); /* head i's X (committed a head ago, or in phase 0) */
        __syncthreads();
        /* B. Ce1; the state tasks, Y0 and Y1 tiles, head i+1's decays: in
         * rounds of 8 tasks, every other round in reverse warp order */
#pragma unroll
        for (int idx = threadIdx.x; idx < Q * q4; idx += Sh::threads()) {
            const int t = idx / q4, at = t * ldn + 4 * (idx - t * q4);
            const float4 v = *(const float4 *)(C1 + at);
            const float et = e[Q + t];
            *(float4 *)(Ce1 + at) = make_float4(v.x * et, v.y * et, v.z * et, v.w * et);
        }
        const int nd = i + 1 < HG ? 2 : 0, n2 = Nt + 2 * ny + nd;
#pragma unroll 1
        for (int round = 0; round * TC_WARPS < n2; round++) {
            const int task = round * TC_WARPS + (round & 1 ? TC_WARPS - 1 - warp : warp);
            if (task >= n2) continue;
            tc_acc acc;
            if (task < Nt) { /* S[pi, nj] = X0^T (w0 B0) */
#pragma unroll 1
                for (int pi = 0; pi < Pt; pi++) {
                    wmma::fill_fragment(acc, 0.0f);
                    mma_steps<wmma::col_major, wmma::row_major>(acc, X0 + 16 * pi, lx, 8 * lx, Bw0 + 16 * task, ldn,
                                                                8 * ldn, lk);
                    wmma::store_matrix_sync(S + 16 * pi * ldn + 16 * task, acc, ldn, wmma::mem_row_major);
                }
            } else if (task < Nt + 2 * ny) {
                const int c = task >= Nt + ny;
                pair_y_tile<Sh>(a, X0, lx, M0, lm, Ys0, ly, Q, Pt, lk, c, task - Nt - c * ny, D, row0, h, k);
            } else { /* head i+1's decays (that buffer's last reader: head i-1's phase B) */
                heads_decays(a, dts, HG, i + 1, h + 1, task - Nt - 2 * ny, Q, decs + ((i + 1) & 1) * decbuf, lane);
            }
        }
        __syncthreads();
    }
    pair_y1_state<Sh>(a, Ys1, ly, Ce1, S, ldn, Q, Pt, nk, row0, h0 + HG - 1, k);
}

static int tc_pair_on = 1, tc_heads_mode = 1;
extern "C" void st_cuda_ssd_set_scan_tc_heads(int mode) { tc_heads_mode = mode < 0 ? 0 : mode > 2 ? 2 : mode; }
extern "C" void st_cuda_ssd_set_scan_tc_pair(int on) { tc_pair_on = on != 0; }

/* 1 when scan_tc_launch takes the pair kernel (or the heads kernel) for this call. */
static int tc_pair_takes(int K, int Q, int P, int N, size_t smem_optin) {
    return tc_pair_on && tc_pair_shape(K, Q) && scan_tc_pair_smem_bytes(Q, P, N) <= smem_optin;
}

int tc_sms(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    return v;
}

/* 1 when it takes the heads kernel (HG = H/G heads a group, Bsz G blocks):
 * mode 2 always, mode 1 where the blocks make at least 4 an SM (2 waves of
 * 2: a smaller batch leaves SMs idle while each block walks its heads). */
static int tc_heads_takes(int Bsz, int G, int K, int Q, int P, int N, int HG, size_t smem_optin) {
    if (tc_heads_mode == 0 || !tc_pair_takes(K, Q, P, N, smem_optin) || HG <= 0 ||
        scan_tc_heads_smem_bytes(Q, P, N, HG) > smem_optin)
        return 0;
    return tc_heads_mode == 2 || (size_t)Bsz * (size_t)G >= 4 * (size_t)tc_sms();
}

/* The current device's opt-in shared memory a block (0 on failure). */
static size_t tc_smem_optin(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return 0;
    return (size_t)v;
}

extern "C" int st_cuda_ssd_forward_is_scan_tc_quad(int Bsz, int K, int H, int P, int G, int N, int Q) {
    if (G < 1 || !st_cuda_ssd_forward_is_scan_tc(Bsz, K, H, P, G, N, Q)) return 0;
    return scan_quad_takes(K, P, N, H / G, tc_smem_optin());
}

/* The pair and heads kernels: not where the quad kernel takes the call. */
extern "C" int st_cuda_ssd_forward_is_scan_tc_pair(int Bsz, int K, int H, int P, int G, int N, int Q) {
    if (!st_cuda_ssd_forward_is_scan_tc(Bsz, K, H, P, G, N, Q) ||
        st_cuda_ssd_forward_is_scan_tc_quad(Bsz, K, H, P, G, N, Q))
        return 0;
    const int Qc = Q < 1 ? 1 : (Q < K ? Q : K); /* clamped as ssd.cu does */
    return tc_pair_takes(K, Qc, P, N, tc_smem_optin());
}

extern "C" int st_cuda_ssd_forward_is_scan_tc_heads(int Bsz, int K, int H, int P, int G, int N, int Q) {
    if (G < 1 || !st_cuda_ssd_forward_is_scan_tc_pair(Bsz, K, H, P, G, N, Q)) return 0;
    const int Qc = Q < 1 ? 1 : (Q < K ? Q : K);
    return tc_heads_takes(Bsz, G, K, Qc, P, N, H / G, tc_smem_optin());
}

int tc_launch(void (*kernel)(scan_args), const scan_args &a, size_t bytes, unsigned blocks, cudaStream_t st) {
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    kernel<<<blocks, SCAN_THREADS, bytes, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* Two full chunks: the heads kernel over Bsz G blocks, or the pair kernel over Bsz H. */
template <class Sh> static int tc_two_chunks_launch(const scan_args &a, int Bsz, int heads, cudaStream_t st) {
    if (heads)
        return tc_launch(scan_tc_heads_kernel<Sh>, a, scan_tc_heads_smem_bytes(a.Q, a.P, a.N, a.H / a.G),
                         (unsigned)((size_t)Bsz * a.G), st);
    return tc_launch(scan_tc_pair_kernel<Sh>, a, scan_tc_pair_smem_bytes(a.Q, a.P, a.N), (unsigned)((size_t)Bsz * a.H),
                     st);
}

int scan_tc_launch(const scan_args &a, int Bsz, size_t smem_optin, cudaStream_t st) {
    if (scan_quad_takes(a.K, a.P, a.N, a.H / a.G, smem_optin)) return scan_quad_launch(a, Bsz, st);
    if (tc_pair_takes(a.K, a.Q, a.P, a.N, smem_optin)) {
        const int heads = tc_heads_takes(Bsz, a.G, a.K, a.Q, a.P, a.N, a.H / a.G, smem_optin);
        switch (ssd_fixed_shape_of(a.K, a.P, a.N, a.Q)) { /* the same bits, no runtime index math */
        case SSD_FIXED_DEFAULT:
            return tc_two_chunks_launch<ssd_shape_fixed<SSD_SHAPE_DEFAULT, SCAN_THREADS>>(a, Bsz, heads, st);
        case SSD_FIXED_TINY:
            return tc_two_chunks_launch<ssd_shape_fixed<SSD_SHAPE_TINY, SCAN_THREADS>>(a, Bsz, heads, st);
        default: return tc_two_chunks_launch<ssd_shape_any>(a, Bsz, heads, st);
        }
    }
    return tc_launch(scan_tc_kernel, a, scan_tc_smem_bytes(a.Q, a.P, a.N), (unsigned)((size_t)Bsz * a.H), st);
}
