/* ssd_last_row.cu: the SSD at the last row of each window, forward and
 * backward (cuda/ssd_last_row_cuda.h; the math and its derivation are
 * model/ssd_last_row.c's, which this mirrors step for step).
 *
 * A block of LR_THREADS per window b, every head, in phases separated by
 * barriers, everything of the window in shared memory:
 *   Ld[h][s] = L_s         one thread a head, s from K-1 down (double)
 *   q[g][s]  = B_s . C_l   a warp a (g, s), lanes over n, xor butterfly
 *   e[h][s]  = dy . x_s    (backward) a warp a (h, s), lanes over p
 *   w[h][s]  = exp(A Ld) dt_s, then the per-(h, s) terms, a thread each
 * Forward: y[h, p] = sum_s (w q)[h][s] x_s[h, p] + D x_{K-1}[h, p], a
 * thread a (h, p), s ascending, in double.
 * Backward: dQ[g][s] = sum_{h in g} e w (heads in order); then a thread an
 * element of dx (w q dy, + D dy at K-1), of dB (dQ C_l), of dC (0, or at
 * the last row sum_s dQ B_s in double); one thread a head walks s
 * ascending for ddt_s = dw exp(A Ld) + A sum_{s'<s} dw w and its dA
 * partial sum_s dw w Ld; dD's partial is e[h][K-1]. A second kernel, a
 * block a head, adds the partials over windows into dA, dD (double, thread
 * t taking windows t, t + T, ..., then a fixed tree). Every sum has one
 * owner and one order: bit-identical run to run.
 *
 * The reads of x and B are a window's rows, each row's values across
 * consecutive threads (coalesced); the serial per-head walks are K double
 * adds (the exponentials run in the parallel phases). */
#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_last_row_cuda.h"
}

#define LR_THREADS 256
#define LR_WARPS (LR_THREADS / 32)

struct lr_args {
    int Bsz, K, H, P, G, N;
    const float *x, *dt, *A, *Bm, *Cm, *Dskip, *dy;
    int x_stride, dt_stride, B_stride, C_stride, dy_stride;
    float *y, *dx, *ddt, *dB, *dC;
    int y_stride, dx_stride, ddt_stride, dB_stride, dC_stride;
};

/* The shared arrays of one window (offsets in floats after Ld's doubles). */
struct lr_smem {
    double *Ld;                         /* [H K] */
    float *Cl, *dy, *q, *e, *w, *ww, *dQ; /* [GN], [HP], [GK], [HK] x 3, [GK] */
};

static size_t lr_smem_bytes(int K, int H, int P, int G, int N, int backward) {
    size_t hk = (size_t)H * K, gk = (size_t)G * K;
    size_t floats = (size_t)G * N + gk + hk + (backward ? (size_t)H * P + 2 * hk + gk : 0);
    return sizeof(double) * hk + sizeof(float) * floats;
}

static __device__ lr_smem lr_smem_at(double *base, const lr_args &a, int backward) {
    lr_smem m;
    size_t hk = (size_t)a.H * a.K, gk = (size_t)a.G * a.K;
    m.Ld = base;
    m.Cl = (float *)(base + hk);
    m.q = m.Cl + (size_t)a.G * a.N;
    m.w = m.q + gk; /* the forward keeps w q here */
    m.dy = m.e = m.ww = m.dQ = NULL;
    if (backward) {
        m.e = m.w + hk;
        m.ww = m.e + hk;
        m.dQ = m.ww + hk;
        m.dy = m.dQ + gk;
    }
    return m;
}

/* sum_i u[i] v[i] over a warp's lanes (i = lane, lane + 32, ...), float,
 * the xor butterfly: the same bits in every lane and run. */
static __device__ float lr_warp_dot(const float *u, const float *v, int n, int lane) {
    float s = 0;
    for (int i = lane; i < n; i += 32)
        s += u[i] * v[i];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

/* The phases both directions share: C_l (and dy) staged, then L_s per head
 * and q_s per (group, row); with e (backward) e_s per (head, row). */
static __device__ void lr_common(const lr_args &a, const lr_smem &m, int b, int backward) {
    const int K = a.K, GN = a.G * a.N, HP = a.H * a.P, tid = threadIdx.x;
    const size_t r0 = (size_t)b * K, last = r0 + K - 1;
    for (int i = tid; i < GN; i += blockDim.x)
        m.Cl[i] = a.Cm[last * a.C_stride + i];
    if (backward)
        for (int i = tid; i < HP; i += blockDim.x)
            m.dy[i] = a.dy[(size_t)b * a.dy_stride + i];
    __syncthreads();
    for (int h = tid; h < a.H; h += blockDim.x) {
        double L = 0;
        for (int s = K - 1; s >= 0; s--) {
            m.Ld[(size_t)h * K + s] = L;
            L += (double)a.dt[(r0 + s) * a.dt_stride + h];
        }
    }
    const int warp = tid / 32, lane = tid % 32, nw = blockDim.x / 32;
    for (int t = warp; t < a.G * K; t += nw) { /* warp-uniform: every lane takes the shuffles */
        const int g = t / K, s = t % K;
        m.q[t] = lr_warp_dot(a.Bm + (r0 + s) * a.B_stride + (size_t)g * a.N, m.Cl + (size_t)g * a.N, a.N, lane);
    }
    if (backward)
        for (int t = warp; t < a.H * K; t += nw) {
            const int h = t / K, s = t % K;
            m.e[t] = lr_warp_dot(a.x + (r0 + s) * a.x_stride + (size_t)h * a.P, m.dy + (size_t)h * a.P, a.P, lane);
        }
    __syncthreads();
}

/* w_s = exp(A L_s) dt_s of (h, s) = t, as both directions round it. */
static __device__ double lr_w(const lr_args &a, const lr_smem &m, int b, int t) {
    const int h = t / a.K, s = t % a.K;
    const double dts = a.dt[((size_t)b * a.K + s) * a.dt_stride + h];
    return exp((double)a.A[h] * m.Ld[t]) * dts;
}

static __global__ void __launch_bounds__(LR_THREADS) lr_forward_kernel(lr_args a) {
    extern __shared__ double lr_sm_fwd[];
    const int b = blockIdx.x, K = a.K, HP = a.H * a.P, hg = a.H / a.G;
    lr_smem m = lr_smem_at(lr_sm_fwd, a, 0);
    lr_common(a, m, b, 0);
    for (int t = threadIdx.x; t < a.H * K; t += blockDim.x) {
        const int g = (t / K) / hg, s = t % K;
        m.w[t] = (float)(lr_w(a, m, b, t) * (double)m.q[(size_t)g * K + s]);
    }
    __syncthreads();
    const size_t r0 = (size_t)b * K;
    for (int j = threadIdx.x; j < HP; j += blockDim.x) {
        const int h = j / a.P;
        const float *c = m.w + (size_t)h * K;
        double acc = 0;
        for (int s = 0; s < K; s++)
            acc += (double)c[s] * (double)a.x[(r0 + s) * a.x_stride + j];
        const double D = a.Dskip ? (double)a.Dskip[h] : 0.0;
        acc += D * (double)a.x[(r0 + K - 1) * a.x_stride + j];
        a.y[(size_t)b * a.y_stride + j] = (float)acc;
    }
}

static __global__ void __launch_bounds__(LR_THREADS) lr_backward_kernel(lr_args a, float *partA, float *partD) {
    extern __shared__ double lr_sm_bwd[];
    const int b = blockIdx.x, K = a.K, H = a.H, P = a.P, N = a.N, GN = a.G * N, HP = H * P, hg = H / a.G;
    const size_t r0 = (size_t)b * K;
    lr_smem m = lr_smem_at(lr_sm_bwd, a, 1);
    lr_common(a, m, b, 1);
    for (int t = threadIdx.x; t < H * K; t += blockDim.x)
        m.w[t] = (float)lr_w(a, m, b, t);
    __syncthreads();
    /* dQ = the group's sum of dq = e w, heads in order; ww = dw w with dw = e q; e -> dw exp(A L) */
    for (int t = threadIdx.x; t < a.G * K; t += blockDim.x) {
        const int g = t / K, s = t % K;
        double sum = 0;
        for (int h = g * hg; h < (g + 1) * hg; h++)
            sum += (double)m.e[(size_t)h * K + s] * (double)m.w[(size_t)h * K + s];
        m.dQ[t] = (float)sum;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < H * K; t += blockDim.x) {
        const int h = t / K, s = t % K, g = h / hg;
        const double dw = (double)m.e[t] * (double)m.q[(size_t)g * K + s];
        if (s == K - 1) partD[(size_t)b * H + h] = m.e[t]; /* dD = dy . x_{K-1} */
        m.ww[t] = (float)(dw * (double)m.w[t]);
        m.e[t] = (float)(dw * exp((double)a.A[h] * m.Ld[t])); /* ddt's own term; e is dead past here */
    }
    __syncthreads();
    for (int i = threadIdx.x; i < K * HP; i += blockDim.x) {
        const int s = i / HP, j = i % HP, h = j / P, g = h / hg;
        const float dyj = m.dy[j];
        float v = m.w[(size_t)h * K + s] * m.q[(size_t)g * K + s] * dyj;
        if (s == K - 1 && a.Dskip) v += a.Dskip[h] * dyj;
        a.dx[(r0 + s) * a.dx_stride + j] = v;
    }
    for (int i = threadIdx.x; i < K * GN; i += blockDim.x) {
        const int s = i / GN, j = i % GN, g = j / N;
        a.dB[(r0 + s) * a.dB_stride + j] = m.dQ[(size_t)g * K + s] * m.Cl[j];
        float c = 0;
        if (s == K - 1) {
            double sum = 0;
            for (int s2 = 0; s2 < K; s2++)
                sum += (double)m.dQ[(size_t)g * K + s2] * (double)a.Bm[(r0 + s2) * a.B_stride + j];
            c = (float)sum;
        }
        a.dC[(r0 + s) * a.dC_stride + j] = c;
    }
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        const double Ah = a.A[h];
        double run = 0, sA = 0; /* run = sum_{s'<s} dw w */
        for (int s = 0; s < K; s++) {
            const size_t t = (size_t)h * K + s;
            a.ddt[(r0 + s) * a.ddt_stride + h] = (float)((double)m.e[t] + Ah * run);
            run += (double)m.ww[t];
            sA += (double)m.ww[t] * m.Ld[t];
        }
        partA[(size_t)b * H + h] = (float)sA;
    }
}

/* A block a head: dA[h] += sum_b partA[b, h] (and dD): thread t sums
 * windows t, t + T, ... in order, then a fixed tree over the threads. */
static __global__ void __launch_bounds__(LR_THREADS)
    lr_reduce_kernel(int Bsz, int H, const float *partA, const float *partD, float *dA, float *dD) {
    __shared__ double sA[LR_THREADS], sD[LR_THREADS];
    const int h = blockIdx.x;
    double tA = 0, tD = 0;
    for (int b = threadIdx.x; b < Bsz; b += LR_THREADS) {
        tA += (double)partA[(size_t)b * H + h];
        tD += (double)partD[(size_t)b * H + h];
    }
    sA[threadIdx.x] = tA, sD[threadIdx.x] = tD;
    __syncthreads();
    for (int half = LR_THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) sA[threadIdx.x] += sA[threadIdx.x + half], sD[threadIdx.x] += sD[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    dA[h] += (float)sA[0];
    if (dD) dD[h] += (float)sD[0];
}

/* ---- host side ------------------------------------------------------------ */

extern "C" size_t st_cuda_ssd_last_row_work_count(int Bsz, int K, int H) {
    (void)K;
    if (Bsz <= 0 || H <= 0) return 0;
    return 2 * (size_t)Bsz * (size_t)H;
}

/* Whether the backward's (the larger) per-window shared memory fits the
 * current device: what the model asks before it runs the tail, so that a
 * window too long for these kernels falls back to the full block. */
extern "C" int st_cuda_ssd_last_row_fits(int K, int H, int P, int G, int N) {
    if (K < 0 || H <= 0 || P <= 0 || N <= 0 || G <= 0 || H % G != 0) return 0;
    size_t bytes = lr_smem_bytes(K, H, P, G, N, 1);
    if (bytes <= 49152) return 1;
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError(); /* no sticky error left for the next launch check */
        return 0;
    }
    return bytes <= (size_t)optin;
}

/* Checks the sizes and lets `kernel` take its shared memory, or says why not. */
template <typename T> static int lr_prepare(T *kernel, const lr_args &a, int backward, size_t *bytes) {
    ST_REQUIRE(a.Bsz >= 0 && a.K >= 0 && a.H > 0 && a.P > 0 && a.N > 0 && a.G > 0 && a.H % a.G == 0, ST_ERR_INPUT,
               "SSD last row on the GPU: bad sizes Bsz=%d K=%d H=%d P=%d G=%d N=%d (G must divide H)", a.Bsz, a.K, a.H,
               a.P, a.G, a.N);
    *bytes = lr_smem_bytes(a.K, a.H, a.P, a.G, a.N, backward);
    if (*bytes <= 49152) return ST_OK;
    int dev = 0, optin = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    ST_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    ST_REQUIRE(*bytes <= (size_t)optin, ST_ERR_INPUT,
               "SSD last row on the GPU: a window of K=%d rows with H=%d P=%d G=%d N=%d needs %zu bytes of shared "
               "memory, the device allows %d",
               a.K, a.H, a.P, a.G, a.N, *bytes, optin);
    ST_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*bytes));
    return ST_OK;
}

static lr_args lr_args_of(int Bsz, int K, int H, int P, int G, int N, const float *x, int x_stride, const float *dt,
                          int dt_stride, const float *A, const float *Bm, int B_stride, const float *Cm, int C_stride,
                          const float *Dskip) {
    lr_args a = {};
    a.Bsz = Bsz, a.K = K, a.H = H, a.P = P, a.G = G, a.N = N;
    a.x = x, a.x_stride = x_stride, a.dt = dt, a.dt_stride = dt_stride, a.A = A;
    a.Bm = Bm, a.B_stride = B_stride, a.Cm = Cm, a.C_stride = C_stride, a.Dskip = Dskip;
    return a;
}

extern "C" int st_cuda_ssd_last_row_forward(int Bsz, int K, int H, int P, int G, int N, const float *x, int x_stride,
                                            const float *dt, int dt_stride, const float *A, const float *Bm,
                                            int B_stride, const float *Cm, int C_stride, const float *Dskip, float *y,
                                            int y_stride, void *stream) {
    lr_args a = lr_args_of(Bsz, K, H, P, G, N, x, x_stride, dt, dt_stride, A, Bm, B_stride, Cm, C_stride, Dskip);
    a.y = y, a.y_stride = y_stride;
    size_t bytes = 0;
    ST_TRY(lr_prepare(lr_forward_kernel, a, 0, &bytes));
    if (Bsz == 0 || K == 0) return ST_OK;
    lr_forward_kernel<<<Bsz, LR_THREADS, bytes, (cudaStream_t)stream>>>(a);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_ssd_last_row_backward(int Bsz, int K, int H, int P, int G, int N, const float *x, int x_stride,
                                             const float *dt, int dt_stride, const float *A, const float *Bm,
                                             int B_stride, const float *Cm, int C_stride, const float *Dskip,
                                             const float *dy, int dy_stride, float *dx, int dx_stride, float *ddt,
                                             int ddt_stride, float *dA, float *dB, int dB_stride, float *dC,
                                             int dC_stride, float *dD, float *work, void *stream) {
    lr_args a = lr_args_of(Bsz, K, H, P, G, N, x, x_stride, dt, dt_stride, A, Bm, B_stride, Cm, C_stride, Dskip);
    a.dy = dy, a.dy_stride = dy_stride, a.dx = dx, a.dx_stride = dx_stride, a.ddt = ddt, a.ddt_stride = ddt_stride;
    a.dB = dB, a.dB_stride = dB_stride, a.dC = dC, a.dC_stride = dC_stride;
    size_t bytes = 0;
    ST_TRY(lr_prepare(lr_backward_kernel, a, 1, &bytes));
    if (Bsz == 0 || K == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    float *partA = work, *partD = work + (size_t)Bsz * H;
    lr_backward_kernel<<<Bsz, LR_THREADS, bytes, st>>>(a, partA, partD);
    ST_CUDA_LAUNCHED();
    lr_reduce_kernel<<<H, LR_THREADS, 0, st>>>(Bsz, H, partA, partD, dA, dD);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
