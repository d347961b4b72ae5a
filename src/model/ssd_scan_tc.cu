/* ssd_scan_tc.cu: the scan forward of ssd_scan.cu (a block of 8 warps per
 * (window b, head h) walking the chunks, same math) with its four products
 * on the tensor cores, TF32 WMMA m16n16k8 with float accumulators, for
 * bf16 matrix-product mode (cuda/linear_cuda.h: products at bf16/TF32
 * precision, 2e-2 against the CPU). Per chunk of L rows:
 *     G  = C B^T                  [L x L] over N   (lower 16 x 16 tiles only)
 *     M  = G o Lm o dt            elementwise, the decays in double as there
 *     Y  = diag(e) (C S_in^T) + D X + M X          (M X over s <= the tile's)
 *     S_in <- e[L-1] S_in + XW^T B, XW = X diag(w)  (not after the last chunk)
 * Operands are rounded to TF32 after each fragment load
 * (wmma::__float_to_tf32); every sum accumulates in float. The state is
 * carried in float in shared memory (an accumulator tile loaded, scaled by
 * the decay rounded to float, the chunk's own products added, stored back;
 * DESIGN: fp32 SSD state), not in double registers as the fp32 kernel does:
 * results are within TF32 rounding of the fp32 path, not its bits.
 * Q, P and N are padded to multiples of 16 in shared memory with zero rows
 * and columns (B, C, X rows past L, columns past N or P; XW rows past L; M
 * above the diagonal and past L), so every shape runs; the pads add 0 * 0.
 * Phases a chunk, each ended by a barrier as in the fp32 kernel (4):
 *     0. stage B, C, X (zero pads), dt, a = dt A;
 *     1. warps: G tiles into M, C S_in^T tiles into Ys; the top threads e, w;
 *     2. all threads: M's decays (double), M's zeros, Ys = e C S^T + D X,
 *        XW = X diag(w);
 *     3. warps: Y tiles (Ys + M X, then copied out, rows < L, columns < P),
 *        state tiles.
 * Shared memory (floats, row strides Np + 4, Pp + 8, Qp + 4, Pp + 4: every
 * tile pointer 32-byte aligned, strides multiples of 4 as WMMA needs; the
 * +4 strides put a row-major operand's 8 rows x 4 columns a load touches in
 * 32 banks, the +8 stride does so for X and XW, read along their rows as
 * k): Bs, Cs [Qp][ldn], S [Pp][ldn], Xs, XW [Qp][lx], M [Qp][lm],
 * Ys [Qp][ly], w [Qp]; doubles ai, dtv, e [Qp]. 46,464 bytes at Q = P =
 * 32, N = 64 (4 blocks an SM; 170.8 KiB at the large preset's 64, 64, 128). */
#include <stdint.h>

#include <mma.h>

#include "cuda/check.h"
#include "cuda/ssd_device.cuh"
#include "cuda/ssd_scan_tc.cuh"

using namespace nvcuda;

#define TC_WARPS (SCAN_THREADS / 32)

typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> tc_acc;

__host__ __device__ static inline int round16(int n) { return (n + 15) & ~15; }

/* Padded sizes, row strides and the float offsets of the buffers. */
struct tc_layout {
    int Qp, Pp, Np, ldn, lx, lm, ly;
    int Bs, Cs, S, Xs, XW, M, Ys, w, dbl, total; /* floats; dbl: 3 Qp doubles from there */
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
    l.dbl = l.w + l.Qp; /* every size above is a multiple of 64 floats or Qp: 32-byte aligned */
    l.total = l.dbl + 2 * 3 * l.Qp;
    return l;
}

size_t scan_tc_smem_bytes(int Q, int P, int N) { return sizeof(float) * (size_t)tc_layout_of(Q, P, N).total; }

/* rows_pad rows of dst (stride dst_ld): the first `rows` copy `cols`
 * floats of src (row stride ld), every other element 0. vec: cols and ld
 * multiples of 4 and src 16-byte aligned (float4 copies). */
__device__ static inline void stage_tile(const float *src, int ld, int rows, int cols, int rows_pad, float *dst,
                                         int dst_ld, int vec) {
    if (vec) {
        const int q4 = dst_ld / 4;
        for (int idx = threadIdx.x; idx < rows_pad * q4; idx += blockDim.x) {
            const int r = idx / q4, k = 4 * (idx % q4);
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < rows && k < cols) v = *(const float4 *)(src + (size_t)r * ld + k);
            *(float4 *)(dst + r * dst_ld + k) = v;
        }
    } else {
        for (int idx = threadIdx.x; idx < rows_pad * dst_ld; idx += blockDim.x) {
            const int r = idx / dst_ld, k = idx % dst_ld;
            dst[idx] = r < rows && k < cols ? src[(size_t)r * ld + k] : 0.0f;
        }
    }
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

/* Rows < L, columns < P of the 16 x 16 tile at (r0, c0) of Ys (stride ly)
 * into y rows row0 + r0 .. (stride y_stride, this head's columns). vec: P,
 * y_stride multiples of 4 and y 16-byte aligned (float4 stores). */
__device__ static inline void tile_out(const scan_args &a, const float *Ys, int ly, int r0, int c0, int L, size_t row0,
                                       int h, int vec, int lane) {
    float *yh = a.y + row0 * (size_t)a.y_stride + (size_t)h * a.P;
    if (vec) {
        for (int i = lane; i < 64; i += 32) {
            const int t = r0 + i / 4, p = c0 + 4 * (i % 4);
            if (t < L && p < a.P) *(float4 *)(yh + (size_t)t * a.y_stride + p) = *(const float4 *)(Ys + t * ly + p);
        }
    } else {
        for (int i = lane; i < 256; i += 32) {
            const int t = r0 + i / 16, p = c0 + i % 16;
            if (t < L && p < a.P) yh[(size_t)t * a.y_stride + p] = Ys[t * ly + p];
        }
    }
}

/* 4 blocks an SM (as the shared memory allows at the default shape): held
 * to 64 registers (8 bytes of spills; 80 unbounded, 3 blocks). */
static __global__ void __launch_bounds__(SCAN_THREADS, 4) scan_tc_kernel(scan_args a) {
    extern __shared__ __align__(128) float sm_tc[];
    const int P = a.P, N = a.N;
    const tc_layout l = tc_layout_of(a.Q, P, N);
    const int ldn = l.ldn, lx = l.lx, lm = l.lm, ly = l.ly, Pt = l.Pp / 16, Nt = l.Np / 16, nk = (N + 7) / 8;
    float *Bs = sm_tc + l.Bs, *Cs = sm_tc + l.Cs, *S = sm_tc + l.S, *Xs = sm_tc + l.Xs, *XW = sm_tc + l.XW;
    float *M = sm_tc + l.M, *Ys = sm_tc + l.Ys, *w = sm_tc + l.w;
    double *ai = (double *)(sm_tc + l.dbl), *dtv = ai + l.Qp, *e = dtv + l.Qp;
    const int h = blockIdx.x % a.H, b = blockIdx.x / a.H, g = h / (a.H / a.G);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const double A = (double)a.A[h];
    const float D = a.Dskip ? a.Dskip[h] : 0.0f;
    const int vec_b = (N & 3) == 0 && (a.B_stride & 3) == 0 && aligned16(a.Bm);
    const int vec_c = (N & 3) == 0 && (a.C_stride & 3) == 0 && aligned16(a.Cm);
    const int vec_x = (P & 3) == 0 && (a.x_stride & 3) == 0 && aligned16(a.x);
    const int vec_y = (P & 3) == 0 && (a.y_stride & 3) == 0 && aligned16(a.y);
    for (int c = 0; c < a.nc; c++) {
        const int t0 = c * a.Q, L = min(a.Q, a.K - t0), first = c == 0, last = c == a.nc - 1;
        const int Lt = (L + 15) / 16, R = 16 * Lt, lk = (L + 7) / 8; /* tiles, rows and k-steps of 8 in use */
        const size_t row0 = (size_t)b * a.K + t0;
        /* 0. staging (rows past L and columns past N or P zero) */
        stage_tile(a.Bm + row0 * a.B_stride + (size_t)g * N, a.B_stride, L, N, l.Qp, Bs, ldn, vec_b);
        stage_tile(a.Cm + row0 * a.C_stride + (size_t)g * N, a.C_stride, L, N, l.Qp, Cs, ldn, vec_c);
        stage_tile(a.x + row0 * a.x_stride + (size_t)h * P, a.x_stride, L, P, l.Qp, Xs, lx, vec_x);
        for (int i = threadIdx.x; i < l.Qp; i += blockDim.x) {
            dtv[i] = i < L ? (double)a.dt[(row0 + i) * a.dt_stride + h] : 0.0;
            ai[i] = dtv[i] * A;
        }
        __syncthreads();
        /* 1. G's lower tiles into M; C S_in^T into Ys (S_in = 0 in the
         * first chunk: skipped); e and w by the threads from the top (the
         * warps past the tile tasks where there are fewer than 8). */
        const int ng = Lt * (Lt + 1) / 2, ncs = first ? 0 : Lt * Pt;
        for (int task = warp; task < ng + ncs; task += TC_WARPS) {
            tc_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            if (task < ng) {
                int ti, tj;
                tri_index(task, ti, tj);
                mma_steps<wmma::row_major, wmma::col_major>(acc, Cs + 16 * ti * ldn, ldn, 8, Bs + 16 * tj * ldn, ldn, 8,
                                                            nk);
                wmma::store_matrix_sync(M + 16 * ti * lm + 16 * tj, acc, lm, wmma::mem_row_major);
            } else {
                const int ti = (task - ng) / Pt, pj = (task - ng) % Pt;
                mma_steps<wmma::row_major, wmma::col_major>(acc, Cs + 16 * ti * ldn, ldn, 8, S + 16 * pj * ldn, ldn, 8,
                                                            nk);
                wmma::store_matrix_sync(Ys + 16 * ti * ly + 16 * pj, acc, ly, wmma::mem_row_major);
            }
        }
        for (int i = (int)blockDim.x - 1 - (int)threadIdx.x; i < 2 * L; i += blockDim.x) {
            if (i < L)
                e[i] = exp(prefix(ai, i));
            else
                w[i - L] = (float)(exp(segment(ai, L - 1, i - L)) * dtv[i - L]);
        }
        __syncthreads();
        /* 2. the elementwise steps: M = G o Lm o dt on s <= t < L (as the
         * fp32 kernel forms it), 0 elsewhere in the lower tiles */
        for (int k = threadIdx.x; k < L * (L + 1) / 2; k += blockDim.x) {
            int t, s;
            tri_index(k, t, s);
            M[t * lm + s] = (float)(M[t * lm + s] * exp(segment(ai, t, s)) * dtv[s]);
        }
        for (int k = threadIdx.x; k < R * R; k += blockDim.x) {
            const int t = k / R, s = k % R;
            if (s / 16 <= t / 16 && (s > t || t >= L)) M[t * lm + s] = 0.0f;
        }
        for (int k = threadIdx.x; k < R * l.Pp; k += blockDim.x) {
            const int t = k / l.Pp, p = k % l.Pp;
            const float cs = first ? 0.0f : (float)e[t < L ? t : 0] * Ys[t * ly + p];
            Ys[t * ly + p] = t < L ? cs + D * Xs[t * lx + p] : 0.0f;
            if (!last) XW[t * lx + p] = t < L ? Xs[t * lx + p] * w[t] : 0.0f;
        }
        __syncthreads();
        /* 3. Y tiles (Ys + M X over the s-tiles up to the diagonal), copied
         * out by their warp; then the state tiles (not after the last chunk) */
        const int ny = Lt * Pt, ns = last ? 0 : Pt * Nt;
        const float decay = (float)e[L - 1];
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
                tile_out(a, Ys, ly, 16 * ti, 16 * pj, L, row0, h, vec_y, lane);
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
        __syncthreads(); /* the next chunk's staging overwrites Bs, Xs, Ys; its phase 1 reads S */
    }
}

int scan_tc_launch(const scan_args &a, int Bsz, size_t bytes, cudaStream_t st) {
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(scan_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    scan_tc_kernel<<<(unsigned)((size_t)Bsz * a.H), SCAN_THREADS, bytes, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
