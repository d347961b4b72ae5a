/* ssd_scan.cu: the SSD forward (ssd.cu's math, y only) as one kernel, a
 * block per (window b, head h) that walks the window's chunks in order and
 * carries the state between them in registers, in double:
 *     for each chunk (rows t0 .. t0+L-1):
 *         M[t,s] = (C_t . B_s) Lm[t,s] dt_s            (s <= t)
 *         Y      = M X + diag(e) C S_in^T + D X
 *         S_in  <- e[L-1] S_in + X^T diag(w) B         (not after the last)
 * with Lm, e, w as at the top of ssd.cu (segment sums of a_i = dt_i A taken
 * directly, in double; those sums and the row staging are ssd.cu's, in
 * cuda/ssd_device.cuh). The chunk-parallel path of ssd.cu launches a
 * summary kernel, an optional state pass and a forward kernel over (b, h,
 * chunk) and stages every chunk's B, C rows and states twice; here each is
 * read once, no state goes through global memory, and each thread forms a
 * 2 x 2 tile of M or Y (two rows of one operand, two of the other) whose
 * operands come from shared memory as float4s (float2s for X's pair of
 * columns): 4 vector loads per 16 multiply-adds instead of one scalar
 * load per multiply-add, which had left the kernel bound by the
 * shared-memory pipe at a quarter of the FMA rate. The state update
 * X^T diag(w) B reads XW = X diag(w), formed once a chunk, a thread
 * holding consecutive p of one n where the shape allows (see state_elem).
 * The float products sum in the order of ssd.cu's kernels (the vector
 * loads only group the terms' operands; the zero pad columns add 0 * 0),
 * and the state is carried in double and rounded to float where they
 * round it, so results match theirs bit for bit.
 * Shared memory (row strides in scan_layout, multiples of 4):
 *     doubles ai, dtv, e [Q]; floats Bs, Cs [Q][ldn], Xs, XW [Q][lx],
 *     M [Q][lm], S [P][ldn] (the state entering the chunk), w [Q].
 * Taken when the shape fits (P N <= 256 x 32 state elements, the shared
 * memory within the device's opt-in limit) and st_cuda_ssd_set_scan is on;
 * otherwise ssd.cu runs its chunk-parallel kernels. In bf16 matrix-product
 * mode the tensor-core variant (ssd_scan_tc.cu: TF32 products, float
 * state, within 2e-2 rather than the bits; windows of at most 64 rows as
 * one chunk, ssd_scan_quad.cu) runs instead wherever its shared memory
 * fits, unless st_cuda_ssd_set_scan_tc(0); this kernel stays the fp32
 * (parity) path. */
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/linear_cuda.h"
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_device.cuh"
#include "cuda/ssd_scan_cuda.h"
#include "cuda/ssd_scan_tc.cuh"

/* The shared-memory row strides. ldn (B, C, S rows) is N rounded up to a
 * multiple of 4, plus 4 when that is an even number of float4s: the pad
 * columns hold zeros, so the products over n run in float4 steps
 * (the extra terms are 0 * 0: the sums keep their bits; the loops stop at
 * N rounded up to 4, before the bank padding), and 8 threads
 * reading 8 consecutive rows' float4s hit 8 different bank groups. lx (X
 * and XW = X diag(w) rows) and lm (M rows) are P and Q rounded up to a
 * multiple of 4, for the float2/float4 loads along them. */
struct scan_layout {
    int ldn, lx, lm;
};

__host__ __device__ static inline int round4(int n) { return (n + 3) & ~3; }

__host__ __device__ static inline scan_layout layout_of(int Q, int P, int N) {
    scan_layout l;
    l.ldn = round4(N);
    if ((l.ldn / 4) % 2 == 0) l.ldn += 4;
    l.lx = round4(P), l.lm = round4(Q);
    return l;
}

/* `rows` rows of `cols` floats (row stride ld) into dst at row stride
 * dst_ld, the columns [cols, dst_ld) set to 0. */
__device__ static inline void stage_padded(const float *src, int ld, int rows, int cols, float *dst, int dst_ld) {
    for (int idx = threadIdx.x; idx < rows * dst_ld; idx += blockDim.x) {
        const int r = idx / dst_ld, k = idx % dst_ld;
        dst[idx] = k < cols ? src[(size_t)r * ld + k] : 0.0f;
    }
}

/* M's 2 x 2 tiles (rows t, t+1; columns s, s+1) on or below the diagonal;
 * entries above it inside a tile are 0 (Y's loop reads row t at s = t+1
 * never, but the tile writes it). The sum over n reads float4s of both
 * operands (4 loads per 16 multiply-adds) and adds in n order. */
__device__ static void scan_m(const scan_args &a, const scan_layout &l, int L, const float *Bs, const float *Cs,
                              const double *ai, const double *dtv, float *M) {
    const int n2 = (L + 1) / 2, nq = round4(a.N) / 4;
    for (int idx = threadIdx.x; idx < n2 * n2; idx += blockDim.x) {
        const int ti = idx / n2, si = idx % n2;
        if (si > ti) continue; /* wholly above the diagonal: never read */
        const int t0 = 2 * ti, s0 = 2 * si, t1 = min(t0 + 1, L - 1), s1 = min(s0 + 1, L - 1);
        const float4 *c0p = (const float4 *)(Cs + t0 * l.ldn), *c1p = (const float4 *)(Cs + t1 * l.ldn);
        const float4 *b0p = (const float4 *)(Bs + s0 * l.ldn), *b1p = (const float4 *)(Bs + s1 * l.ldn);
        float g00 = 0, g01 = 0, g10 = 0, g11 = 0;
        for (int q = 0; q < nq; q++) {
            const float4 c0 = c0p[q], c1 = c1p[q], b0 = b0p[q], b1 = b1p[q];
            g00 += c0.x * b0.x, g01 += c0.x * b1.x, g10 += c1.x * b0.x, g11 += c1.x * b1.x;
            g00 += c0.y * b0.y, g01 += c0.y * b1.y, g10 += c1.y * b0.y, g11 += c1.y * b1.y;
            g00 += c0.z * b0.z, g01 += c0.z * b1.z, g10 += c1.z * b0.z, g11 += c1.z * b1.z;
            g00 += c0.w * b0.w, g01 += c0.w * b1.w, g10 += c1.w * b0.w, g11 += c1.w * b1.w;
        }
        const float g[2][2] = {{g00, g01}, {g10, g11}};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                const int t = t0 + i, s = s0 + j;
                if (t >= L || s >= L) continue;
                M[t * l.lm + s] = s <= t ? (float)(g[i][j] * exp(segment(ai, t, s)) * dtv[s]) : 0.0f;
            }
    }
}

/* One step s of Y's M X sum for the tile: x0, x1 = X[s][p0], X[s][p1]
 * from one float2 (p1 = p0 + 1, or p1 = p0 at an odd P's last column). */
__device__ static inline void mx_step(float m0, float m1, const float *xrow, int p0, int p1, float &y00, float &y01,
                                      float &y10, float &y11) {
    const float2 xv = *(const float2 *)(xrow + p0);
    const float x0 = xv.x, x1 = p1 > p0 ? xv.y : xv.x;
    y00 += m0 * x0, y01 += m0 * x1, y10 += m1 * x0, y11 += m1 * x1;
}

/* Y's 2 x 2 tiles (rows t, t+1; columns p, p+1), written to a.y. M X sums
 * s = 0 .. t0 in order (M's rows read as float4s, X's pair of columns as a
 * float2), then row t1's term s = t1; C S_in^T sums n in order over
 * float4s of C and S (zeros past N). */
__device__ static void scan_y(const scan_args &a, const scan_layout &l, int L, int first, size_t row0, int h,
                              const float *Xs, const float *Cs, const float *M, const float *S, const double *e,
                              float D) {
    const int t2 = (L + 1) / 2, p2 = (a.P + 1) / 2, lx = l.lx, lm = l.lm, nq = round4(a.N) / 4;
    for (int idx = threadIdx.x; idx < t2 * p2; idx += blockDim.x) {
        const int t0 = 2 * (idx / p2), p0 = 2 * (idx % p2);
        const int t1 = min(t0 + 1, L - 1), p1 = min(p0 + 1, a.P - 1);
        float y00 = 0, y01 = 0, y10 = 0, y11 = 0;
        const int s4 = (t0 + 1) & ~3; /* s < s4 in float4 steps of M, then the rest one at a time */
        for (int s = 0; s < s4; s += 4) {
            const float4 m0 = *(const float4 *)(M + t0 * lm + s), m1 = *(const float4 *)(M + t1 * lm + s);
            mx_step(m0.x, m1.x, Xs + s * lx, p0, p1, y00, y01, y10, y11);
            mx_step(m0.y, m1.y, Xs + (s + 1) * lx, p0, p1, y00, y01, y10, y11);
            mx_step(m0.z, m1.z, Xs + (s + 2) * lx, p0, p1, y00, y01, y10, y11);
            mx_step(m0.w, m1.w, Xs + (s + 3) * lx, p0, p1, y00, y01, y10, y11);
        }
        for (int s = s4; s <= t0; s++)
            mx_step(M[t0 * lm + s], M[t1 * lm + s], Xs + s * lx, p0, p1, y00, y01, y10, y11);
        if (t1 > t0) { /* row t1's last term, s = t1 */
            const float m1 = M[t1 * lm + t1];
            y10 += m1 * Xs[t1 * lx + p0], y11 += m1 * Xs[t1 * lx + p1];
        }
        if (!first) {
            const float4 *c0p = (const float4 *)(Cs + t0 * l.ldn), *c1p = (const float4 *)(Cs + t1 * l.ldn);
            const float4 *s0p = (const float4 *)(S + p0 * l.ldn), *s1p = (const float4 *)(S + p1 * l.ldn);
            float c00 = 0, c01 = 0, c10 = 0, c11 = 0;
            for (int q = 0; q < nq; q++) {
                const float4 c0 = c0p[q], c1 = c1p[q], s0 = s0p[q], s1 = s1p[q];
                c00 += c0.x * s0.x, c01 += c0.x * s1.x, c10 += c1.x * s0.x, c11 += c1.x * s1.x;
                c00 += c0.y * s0.y, c01 += c0.y * s1.y, c10 += c1.y * s0.y, c11 += c1.y * s1.y;
                c00 += c0.z * s0.z, c01 += c0.z * s1.z, c10 += c1.z * s0.z, c11 += c1.z * s1.z;
                c00 += c0.w * s0.w, c01 += c0.w * s1.w, c10 += c1.w * s0.w, c11 += c1.w * s1.w;
            }
            y00 += (float)e[t0] * c00, y01 += (float)e[t0] * c01;
            y10 += (float)e[t1] * c10, y11 += (float)e[t1] * c11;
        }
        y00 += D * Xs[t0 * lx + p0], y01 += D * Xs[t0 * lx + p1];
        y10 += D * Xs[t1 * lx + p0], y11 += D * Xs[t1 * lx + p1];
        float *r0 = a.y + (row0 + (size_t)t0) * (size_t)a.y_stride + (size_t)h * a.P;
        float *r1 = a.y + (row0 + (size_t)t1) * (size_t)a.y_stride + (size_t)h * a.P;
        r0[p0] = y00;
        if (p1 > p0) r0[p1] = y01;
        if (t1 > t0) {
            r1[p0] = y10;
            if (p1 > p0) r1[p1] = y11;
        }
    }
}

/* The state element j of this thread: (p, n). Where N divides the block
 * and the block's rows of N threads times SPT cover P exactly (the default
 * and large presets), a thread holds SPT consecutive p of one n, so the
 * update reads its XW values as float4s; otherwise the flat order
 * tid + j * SCAN_THREADS. */
template <int SPT> __device__ static inline void state_elem(int rowmap, int P, int N, int j, int &p, int &n) {
    if (rowmap) {
        p = (threadIdx.x / N) * SPT + j, n = threadIdx.x % N;
    } else {
        const int idx = threadIdx.x + j * SCAN_THREADS;
        p = idx / N, n = idx % N;
        if (p >= P) p = P; /* past the state: the caller skips it */
    }
}

/* SPT: state elements per thread (P N <= SCAN_THREADS x SPT), in registers.
 * SPT = 8 (the default preset's 32 x 64 state) is held to 64 registers, 4
 * blocks an SM (128 registers, 2 blocks, unbounded; 24 bytes of spills so
 * bounded). */
#define SCAN_MIN_BLOCKS(SPT) ((SPT) <= 8 ? 4 : 1)
template <int SPT>
static __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS(SPT)) scan_forward_kernel(scan_args a) {
    extern __shared__ double sm_scan[];
    const int Q = a.Q, P = a.P, N = a.N;
    const scan_layout l = layout_of(Q, P, N);
    const int ldn = l.ldn, lx = l.lx;
    double *ai = sm_scan, *dtv = ai + Q, *e = dtv + Q;
    /* the float region starts 16-byte aligned (3 Q doubles, rounded up to an even count) */
    float *Bs = (float *)(sm_scan + ((3 * Q + 1) & ~1)), *Cs = Bs + (size_t)Q * ldn, *Xs = Cs + (size_t)Q * ldn;
    float *XW = Xs + (size_t)Q * lx, *M = XW + (size_t)Q * lx, *S = M + (size_t)Q * l.lm, *w = S + (size_t)P * ldn;
    const int h = blockIdx.x % a.H, b = blockIdx.x / a.H, g = h / (a.H / a.G);
    const int rowmap = SCAN_THREADS % N == 0 && (SCAN_THREADS / N) * SPT == P;
    const double A = (double)a.A[h];
    const float D = a.Dskip ? a.Dskip[h] : 0.0f;
    for (int i = threadIdx.x; i < P * ldn; i += blockDim.x)
        S[i] = 0;   /* the pad columns stay 0 */
    double st[SPT]; /* the state entering the chunk: element j is (p, n) of state_elem */
#pragma unroll
    for (int j = 0; j < SPT; j++)
        st[j] = 0;
    for (int c = 0; c < a.nc; c++) {
        const int t0 = c * Q, L = min(Q, a.K - t0);
        const size_t row0 = (size_t)b * a.K + t0;
        stage_padded(a.Bm + row0 * a.B_stride + (size_t)g * N, a.B_stride, L, N, Bs, ldn);
        stage_padded(a.Cm + row0 * a.C_stride + (size_t)g * N, a.C_stride, L, N, Cs, ldn);
        stage_padded(a.x + row0 * a.x_stride + (size_t)h * P, a.x_stride, L, P, Xs, lx);
        for (int i = threadIdx.x; i < L; i += blockDim.x) {
            dtv[i] = (double)a.dt[(row0 + i) * a.dt_stride + h];
            ai[i] = dtv[i] * A;
        }
        if (c > 0) {
#pragma unroll
            for (int j = 0; j < SPT; j++) {
                int p, n;
                state_elem<SPT>(rowmap, P, N, j, p, n);
                if (p < P) S[p * ldn + n] = (float)st[j];
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < L; i += blockDim.x) {
            e[i] = exp(prefix(ai, i));
            w[i] = (float)(exp(segment(ai, L - 1, i)) * dtv[i]);
        }
        scan_m(a, l, L, Bs, Cs, ai, dtv, M);
        __syncthreads();
        scan_y(a, l, L, c == 0, row0, h, Xs, Cs, M, S, e, D);
        if (c == a.nc - 1) break; /* the state leaving the window is not an output */
        /* XW = X diag(w), the product ssd.cu's summary forms first in
         * X w B (so the update below keeps its bits) */
        for (int i = threadIdx.x; i < L * lx; i += blockDim.x)
            XW[i] = Xs[i] * w[i / lx];
        __syncthreads();
        /* S_in <- e[L-1] S_in + X^T diag(w) B, the decay rounded to float
         * and the chunk's own state summed in float as ssd.cu's summary */
        const double decay = (double)(float)exp(prefix(ai, L - 1));
        float own[SPT];
#pragma unroll
        for (int j = 0; j < SPT; j++)
            own[j] = 0;
        if (rowmap) {
            const int n = threadIdx.x % N, pb = (threadIdx.x / N) * SPT;
            for (int t = 0; t < L; t++) {
                const float bt = Bs[t * ldn + n];
                const float4 *xw = (const float4 *)(XW + t * lx + pb);
#pragma unroll
                for (int q = 0; q < SPT / 4; q++) {
                    const float4 v = xw[q];
                    own[4 * q] += v.x * bt, own[4 * q + 1] += v.y * bt;
                    own[4 * q + 2] += v.z * bt, own[4 * q + 3] += v.w * bt;
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < SPT; j++) {
                int p, n;
                state_elem<SPT>(rowmap, P, N, j, p, n);
                if (p >= P) continue;
                for (int t = 0; t < L; t++)
                    own[j] += XW[t * lx + p] * Bs[t * ldn + n];
            }
        }
#pragma unroll
        for (int j = 0; j < SPT; j++)
            st[j] = decay * st[j] + (double)own[j];
        __syncthreads(); /* the next chunk's staging overwrites Bs, Xs and S */
    }
}

static int scan_on = 1, scan_tc_on = 1;
extern "C" void st_cuda_ssd_set_scan(int on) { scan_on = on != 0; }
extern "C" void st_cuda_ssd_set_scan_tc(int on) { scan_tc_on = on != 0; }

/* The tensor-core rule: bf16 matrix-product mode, both switches on, and
 * the padded shared memory within the opt-in limit (any Q, P, N: the
 * kernel pads them to multiples of 16 with zeros). */
static int tc_fits(int Bsz, int H, int P, int N, int Q, size_t smem_optin) {
    return scan_on && scan_tc_on && st_cuda_matmul_precision() == ST_MATMUL_BF16 &&
           scan_tc_smem_bytes(Q, P, N) <= smem_optin && (size_t)Bsz * H <= 0x7fffffffu;
}

extern "C" int st_cuda_ssd_scan_tc_fits(int Bsz, int H, int P, int N, int Q, size_t smem_optin) {
    return tc_fits(Bsz, H, P, N, Q, smem_optin);
}

static size_t scan_smem_bytes(int Q, int P, int N) {
    const scan_layout l = layout_of(Q, P, N);
    return sizeof(double) * (size_t)((3 * Q + 1) & ~1) +
           sizeof(float) * ((size_t)Q * (2 * (size_t)l.ldn + 2 * (size_t)l.lx + l.lm + 1) + (size_t)P * l.ldn);
}

template <int SPT> static int scan_launch(const scan_args &a, int Bsz, size_t bytes, cudaStream_t st) {
    if (bytes > 49152)
        ST_CUDA_TRY(
            cudaFuncSetAttribute(scan_forward_kernel<SPT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    scan_forward_kernel<SPT><<<(unsigned)((size_t)Bsz * a.H), SCAN_THREADS, bytes, st>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_ssd_scan_forward(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x, int x_stride,
                                        const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                                        const float *Cm, int C_stride, const float *Dskip, float *y, int y_stride,
                                        size_t smem_optin, void *stream, int *taken) {
    *taken = 0;
    const size_t pn = (size_t)P * (size_t)N, bytes = scan_smem_bytes(Q, P, N);
    const int tc = tc_fits(Bsz, H, P, N, Q, smem_optin);
    if (!tc && (!scan_on || pn > (size_t)SCAN_THREADS * 32 || bytes > smem_optin || (size_t)Bsz * H > 0x7fffffffu))
        return ST_OK;
    scan_args a;
    memset(&a, 0, sizeof a);
    a.K = K, a.H = H, a.P = P, a.G = G, a.N = N, a.Q = Q, a.nc = (K + Q - 1) / Q;
    a.x = x, a.x_stride = x_stride, a.dt = dt, a.dt_stride = dt_stride, a.A = A;
    a.Bm = Bm, a.B_stride = B_stride, a.Cm = Cm, a.C_stride = C_stride, a.Dskip = Dskip;
    a.y = y, a.y_stride = y_stride;
    cudaStream_t st = (cudaStream_t)stream;
    if (tc)
        ST_TRY(scan_tc_launch(a, Bsz, smem_optin, st));
    else if (pn <= (size_t)SCAN_THREADS * 8)
        ST_TRY(scan_launch<8>(a, Bsz, bytes, st));
    else
        ST_TRY(scan_launch<32>(a, Bsz, bytes, st));
    *taken = 1;
    return ST_OK;
}
