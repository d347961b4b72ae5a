/* ssd_last_row.cu: the SSD at the last row of each window, forward and
 * backward (cuda/ssd_last_row_cuda.h; the math and its derivation are
 * model/ssd_last_row.c's, which this mirrors term for term).
 *
 * A block of LR_THREADS (8 warps) per window b, every head, in phases
 * separated by barriers, the window's per-(h, s) values in shared memory:
 *   dt     staged once, transposed to [h][s] (coalesced reads)
 *   q[g][s] = B_s . C_l    a warp a row s, lanes over n, xor butterfly
 *   e[h][s] = dy . x_s     (backward) the same, lanes over p
 *   a warp a head h for every per-(h, s) term: lane l owns the rows
 *   [l seg, (l+1) seg), seg = ceil(K / 32); L_s = sum_{r>s} dt_r by the
 *   lane's segment sum, a shfl_down suffix scan and a walk down the
 *   segment, then w_s = exp(A L_s) dt_s, one exp a (h, s).
 * Forward: c = w q in place of dt, then y[h, p] = sum_s c[h][s] x_s[h, p]
 * + D x_{K-1}[h, p], a thread a (h, p), s ascending, in double.
 * Backward: the head's warp also forms dw = e q, ww = dw w (in place of
 * dt), ddt's own term dw exp(A L), dA's partial sum_s ww L_s (a
 * butterfly) and ddt_s = dw exp(A L_s) + A sum_{s'<s} ww by a shfl_up
 * prefix scan; dD's partial is e[h][K-1]. Then dQ[g][s] = sum_{h in g} e w
 * (heads in order), dx = w q dy (+ D dy at K-1), ddt stored coalesced;
 * then dB = dQ C_l, dC = 0 but at the last row, where a thread's double
 * partial over its rows s0, s0 + rows, ... is summed over the `rows`
 * partials in order. A second kernel, a block a head, adds the partials
 * over windows into dA, dD (double, thread t taking windows t, t + T, ...,
 * then a fixed tree). Every sum has one owner and one order: bit-identical
 * run to run (no atomics).
 *
 * No runtime division in an element loop: a (row, column) phase splits the
 * block once into rows x cols threads (lr_tile_of: one division a thread),
 * a thread walks its columns j (the head j / P once a column) and rows s0,
 * s0 + rows, ... with row pointers stepped by rows x stride. Loads are
 * unrolled ahead of their use. At small batches (x under LR_PREFETCH_BYTES)
 * the forward prefetches the window's x rows to L2 first, so the y phase's
 * loads hit L2 while the earlier phases run (bench/notes-lr-kernels.md). */
#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_last_row_cuda.h"
}

#define LR_THREADS 256
#define LR_WARPS (LR_THREADS / 32)
#define LR_FULL 0xffffffffu
/* The forward prefetches x to L2 when the batch's x rows take at most this
 * many bytes: a third of sm_90's 50 MB L2 (128 windows of the default shape
 * take 8 MiB); bigger batches are bound by bandwidth, not latency. */
#define LR_PREFETCH_BYTES (16.0 * 1024 * 1024)

struct lr_args {
    int Bsz, K, H, P, G, N, prefetch;
    const float *x, *dt, *A, *Bm, *Cm, *Dskip, *dy;
    int x_stride, dt_stride, B_stride, C_stride, dy_stride;
    float *y, *dx, *ddt, *dB, *dC;
    int y_stride, dx_stride, ddt_stride, dB_stride, dC_stride;
};

/* Rows of the block's split of a phase over a window's rows x `width`
 * columns: cols = min(width, LR_THREADS) threads a row, this many rows. */
static __host__ __device__ int lr_rows_of(int width) { return LR_THREADS / (width < LR_THREADS ? width : LR_THREADS); }

/* Shared memory of a window. Forward: dt -> c [H K], q [G K]. Backward:
 * dC's partials [rows(GN) GN] (double), dt -> ww [H K], q [G K], e, w,
 * t1 -> ddt [H K] each, dQ [G K]. */
static size_t lr_smem_bytes(int K, int H, int P, int G, int N, int backward) {
    (void)P;
    size_t hk = (size_t)H * K, gk = (size_t)G * K, gn = (size_t)G * N;
    if (!backward) return sizeof(float) * (hk + gk);
    return sizeof(double) * (size_t)lr_rows_of(G * N) * gn + sizeof(float) * (4 * hk + 2 * gk);
}

/* A thread's place in a rows x cols split of the block (s0 >= rows: idle). */
struct lr_tile {
    int j0, cols, s0, rows;
};

static __device__ lr_tile lr_tile_of(int width) {
    lr_tile t;
    t.cols = width < LR_THREADS ? width : LR_THREADS;
    t.rows = LR_THREADS / t.cols;
    t.s0 = (int)threadIdx.x / t.cols;
    t.j0 = (int)threadIdx.x - t.s0 * t.cols;
    return t;
}

/* LR_ROWS dot products at once: out[r ostride] = u_r . v for the rows u_r =
 * u + r ustep, r < nr, over a warp's lanes (i = lane, lane + 32, ...), in
 * float, then the xor butterfly: the same bits in every lane and run. The
 * rows' loads are independent, so they are in flight together. The lane
 * loop (1-2 rounds at the default shape) and the per-lane segment walks
 * below stay rolled: unrolled by the compiler they took the kernels from
 * 48 registers to 64-80 with spills. */
#define LR_ROWS 8
static __device__ __forceinline__ void lr_warp_dots(const float *u, size_t ustep, int nr, const float *v, int n,
                                                    int lane, float *out, int ostride) {
    float acc[LR_ROWS];
#pragma unroll
    for (int r = 0; r < LR_ROWS; r++)
        acc[r] = 0;
#pragma unroll 1
    for (int i = lane; i < n; i += 32) {
        const float vi = v[i];
#pragma unroll
        for (int r = 0; r < LR_ROWS; r++)
            if (r < nr) acc[r] += u[r * ustep + i] * vi;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < LR_ROWS; r++)
            acc[r] += __shfl_xor_sync(LR_FULL, acc[r], o);
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < LR_ROWS; r++)
            if (r < nr) out[r * ostride] = acc[r];
}

static __device__ double lr_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(LR_FULL, v, o);
    return v;
}

/* sum_{l' > lane} v_l' (a fixed Kogge-Stone order). */
static __device__ double lr_suffix_excl(double v, int lane) {
    for (int o = 1; o < 32; o <<= 1) {
        const double u = __shfl_down_sync(LR_FULL, v, o);
        if (lane + o < 32) v += u;
    }
    const double next = __shfl_down_sync(LR_FULL, v, 1);
    return lane == 31 ? 0.0 : next;
}

/* sum_{l' < lane} v_l'. */
static __device__ double lr_prefix_excl(double v, int lane) {
    for (int o = 1; o < 32; o <<= 1) {
        const double u = __shfl_up_sync(LR_FULL, v, o);
        if (lane >= o) v += u;
    }
    const double prev = __shfl_up_sync(LR_FULL, v, 1);
    return lane == 0 ? 0.0 : prev;
}

/* A lane's rows [*sb, *se) of a window of K rows, and the suffix sum L of
 * dt over the rows after them: the start of the walk down the segment. */
static __device__ double lr_segment(const float *dth, int K, int lane, int *sb, int *se) {
    const int seg = (K + 31) >> 5, b = min(lane * seg, K), e = min(b + seg, K);
    double part = 0;
#pragma unroll 1
    for (int s = b; s < e; s++)
        part += (double)dth[s];
    *sb = b, *se = e;
    return lr_suffix_excl(part, lane);
}

/* dt of the window's K rows into dts[h][s], every thread. */
static __device__ void lr_stage_dt(const lr_args &a, size_t r0, float *dts) {
    const lr_tile t = lr_tile_of(a.H);
    if (t.s0 >= t.rows) return;
    const size_t step = (size_t)t.rows * a.dt_stride;
    for (int h = t.j0; h < a.H; h += t.cols) {
        const float *p = a.dt + (r0 + t.s0) * a.dt_stride + h;
        float *d = dts + (size_t)h * a.K;
#pragma unroll 4
        for (int s = t.s0; s < a.K; s += t.rows, p += step)
            d[s] = *p;
    }
}

/* out[s] = u_s . v for the window's K rows u_s = u + s ustride: warp w takes
 * the rows w, w + 8, ..., LR_ROWS of them at once. */
static __device__ __forceinline__ void lr_rows_dot(const float *u, int ustride, int K, const float *v, int n,
                                                   float *out, int warp, int lane) {
    const size_t step = (size_t)LR_WARPS * ustride;
    for (int s = warp; s < K; s += LR_WARPS * LR_ROWS, u += LR_ROWS * step)
        lr_warp_dots(u + (size_t)warp * ustride, step, (K - s + LR_WARPS - 1) / LR_WARPS, v, n, lane, out + s,
                     LR_WARPS);
}

/* q[g][s] = B_s[g] . C_{K-1}[g]. */
static __device__ void lr_q(const lr_args &a, size_t r0, float *q, int warp, int lane) {
    const float *Cl = a.Cm + (r0 + a.K - 1) * a.C_stride;
    for (int g = 0; g < a.G; g++)
        lr_rows_dot(a.Bm + r0 * a.B_stride + (size_t)g * a.N, a.B_stride, a.K, Cl + (size_t)g * a.N, a.N,
                    q + (size_t)g * a.K, warp, lane);
}

/* Prefetches rows [r0, r0 + K) x [0, width) of x to L2: a row's lines are
 * those of its floats 0, 32, ... and of its last one. */
static __device__ void lr_prefetch_rows(const float *x, int stride, size_t r0, int K, int width) {
    const int lines = ((width + 31) >> 5) + 1;
    const lr_tile t = lr_tile_of(lines);
    if (t.s0 >= t.rows) return;
    for (int l = t.j0; l < lines; l += t.cols) {
        const float *p = x + (r0 + t.s0) * stride + min(32 * l, width - 1);
        for (int s = t.s0; s < K; s += t.rows, p += (size_t)t.rows * stride)
            asm volatile("prefetch.L2 [%0];" ::"l"(p));
    }
}

static __global__ void __launch_bounds__(LR_THREADS) lr_forward_kernel(lr_args a) {
    extern __shared__ double lr_sm_fwd[];
    const int b = blockIdx.x, K = a.K, H = a.H, P = a.P, HP = H * P, hg = H / a.G;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const size_t r0 = (size_t)b * K;
    float *c = (float *)lr_sm_fwd, *q = c + (size_t)H * K; /* c starts as dt */
    if (a.prefetch) lr_prefetch_rows(a.x, a.x_stride, r0, K, HP);
    lr_stage_dt(a, r0, c);
    lr_q(a, r0, q, warp, lane);
    __syncthreads();
    for (int h = warp; h < H; h += LR_WARPS) { /* a warp a head: c = exp(A L_s) dt_s q_s */
        float *ch = c + (size_t)h * K;
        const float *qg = q + (size_t)(h / hg) * K;
        const double Ah = a.A[h];
        int sb, se;
        double L = lr_segment(ch, K, lane, &sb, &se);
#pragma unroll 1
        for (int s = se - 1; s >= sb; s--) {
            const double dts = ch[s];
            ch[s] = (float)(exp(Ah * L) * dts * (double)qg[s]);
            L += dts;
        }
    }
    __syncthreads();
    for (int j = (int)threadIdx.x; j < HP; j += LR_THREADS) {
        const int h = j / P;
        const float *ch = c + (size_t)h * K, *xp = a.x + r0 * a.x_stride + j;
        double acc = 0;
#pragma unroll 16
        for (int s = 0; s < K; s++, xp += a.x_stride)
            acc += (double)ch[s] * (double)*xp;
        const double D = a.Dskip ? (double)a.Dskip[h] : 0.0;
        acc += D * (double)a.x[(r0 + K - 1) * a.x_stride + j];
        a.y[(size_t)b * a.y_stride + j] = (float)acc;
    }
}

/* The backward's shared arrays of one window. */
struct lr_bwd_smem {
    double *dCp;                     /* [rows(GN) GN] */
    float *ww, *q, *e, *w, *t1, *dQ; /* ww starts as dt; t1 ends as ddt */
};

static __device__ lr_bwd_smem lr_bwd_smem_at(double *base, const lr_args &a) {
    const size_t hk = (size_t)a.H * a.K, gk = (size_t)a.G * a.K;
    lr_bwd_smem m;
    m.dCp = base;
    m.ww = (float *)(base + (size_t)lr_rows_of(a.G * a.N) * a.G * a.N);
    m.q = m.ww + hk, m.e = m.q + gk, m.w = m.e + hk, m.t1 = m.w + hk, m.dQ = m.t1 + hk;
    return m;
}

/* A warp a head: w, and from e, q: ww, ddt (into t1) and the dA, dD partials. */
static __device__ void lr_head_backward(const lr_args &a, const lr_bwd_smem &m, int b, int h, int lane, float *partA,
                                        float *partD) {
    const int K = a.K;
    const size_t o = (size_t)h * K;
    float *ww = m.ww + o, *w = m.w + o, *t1 = m.t1 + o;
    const float *e = m.e + o, *qg = m.q + (size_t)(h / (a.H / a.G)) * K;
    const double Ah = a.A[h];
    int sb, se;
    double L = lr_segment(ww, K, lane, &sb, &se), sA = 0, wws = 0;
#pragma unroll 1
    for (int s = se - 1; s >= sb; s--) {
        const double dts = ww[s], decay = exp(Ah * L);
        const float wf = (float)(decay * dts);
        const double dw = (double)e[s] * (double)qg[s];
        const float wwf = (float)(dw * (double)wf);
        w[s] = wf, ww[s] = wwf, t1[s] = (float)(dw * decay); /* ddt's own term; dt is dead past here */
        sA += (double)wwf * L, wws += (double)wwf;
        L += dts;
    }
    double run = lr_prefix_excl(wws, lane); /* sum_{s'<s} dw w, s = sb */
#pragma unroll 1
    for (int s = sb; s < se; s++) {
        t1[s] = (float)((double)t1[s] + Ah * run);
        run += (double)ww[s];
    }
    sA = lr_warp_sum(sA);
    if (lane == 0)
        partA[(size_t)b * a.H + h] = (float)sA, partD[(size_t)b * a.H + h] = e[K - 1]; /* dD = dy . x_{K-1} */
}

/* dx = w q dy (+ D dy at K-1) and ddt from t1, both stored row by row. */
static __device__ void lr_store_dx_ddt(const lr_args &a, const lr_bwd_smem &m, int b, size_t r0) {
    const int K = a.K, P = a.P, HP = a.H * P, hg = a.H / a.G;
    const lr_tile t = lr_tile_of(HP);
    if (t.s0 < t.rows) {
        const size_t step = (size_t)t.rows * a.dx_stride;
        for (int j = t.j0; j < HP; j += t.cols) {
            const int h = j / P;
            const float *w = m.w + (size_t)h * K, *qg = m.q + (size_t)(h / hg) * K;
            const float dyj = a.dy[(size_t)b * a.dy_stride + j];
            float *dp = a.dx + (r0 + t.s0) * a.dx_stride + j;
#pragma unroll 4
            for (int s = t.s0; s < K; s += t.rows, dp += step) {
                float v = w[s] * qg[s] * dyj;
                if (s == K - 1 && a.Dskip) v += a.Dskip[h] * dyj;
                *dp = v;
            }
        }
    }
    const lr_tile u = lr_tile_of(a.H);
    if (u.s0 >= u.rows) return;
    const size_t step = (size_t)u.rows * a.ddt_stride;
    for (int h = u.j0; h < a.H; h += u.cols) {
        const float *t1 = m.t1 + (size_t)h * K;
        float *dp = a.ddt + (r0 + u.s0) * a.ddt_stride + h;
        for (int s = u.s0; s < K; s += u.rows, dp += step)
            *dp = t1[s];
    }
}

/* dB = dQ C_l at every row; dC = 0 but at the last row, whose sum over s
 * goes through the per-thread partials dCp[s0][j] (rows s0, s0 + rows, ...). */
static __device__ void lr_store_dB_dC(const lr_args &a, const lr_bwd_smem &m, size_t r0) {
    const int K = a.K, N = a.N, GN = a.G * N;
    const lr_tile t = lr_tile_of(GN);
    if (t.s0 >= t.rows) return;
    const float *Cl = a.Cm + (r0 + K - 1) * a.C_stride;
    const size_t sB = (size_t)t.rows * a.B_stride, sdB = (size_t)t.rows * a.dB_stride,
                 sdC = (size_t)t.rows * a.dC_stride;
    for (int j = t.j0; j < GN; j += t.cols) {
        const float *dQ = m.dQ + (size_t)(j / N) * K;
        const float clj = Cl[j];
        const float *bp = a.Bm + (r0 + t.s0) * a.B_stride + j;
        float *dbp = a.dB + (r0 + t.s0) * a.dB_stride + j, *dcp = a.dC + (r0 + t.s0) * a.dC_stride + j;
        double part = 0;
#pragma unroll 4
        for (int s = t.s0; s < K; s += t.rows, bp += sB, dbp += sdB, dcp += sdC) {
            const float dq = dQ[s];
            *dbp = dq * clj;
            part += (double)dq * (double)*bp;
            if (s != K - 1) *dcp = 0.0f;
        }
        m.dCp[(size_t)t.s0 * GN + j] = part;
    }
}

static __global__ void __launch_bounds__(LR_THREADS) lr_backward_kernel(lr_args a, float *partA, float *partD) {
    extern __shared__ double lr_sm_bwd[];
    const int b = blockIdx.x, K = a.K, H = a.H, P = a.P, GN = a.G * a.N, hg = H / a.G;
    const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const size_t r0 = (size_t)b * K;
    const lr_bwd_smem m = lr_bwd_smem_at(lr_sm_bwd, a);
    lr_stage_dt(a, r0, m.ww);
    lr_q(a, r0, m.q, warp, lane);
    for (int h = 0; h < H; h++) /* e[h][s] = dy . x_s */
        lr_rows_dot(a.x + r0 * a.x_stride + (size_t)h * P, a.x_stride, K,
                    a.dy + (size_t)b * a.dy_stride + (size_t)h * P, P, m.e + (size_t)h * K, warp, lane);
    __syncthreads();
    for (int h = warp; h < H; h += LR_WARPS)
        lr_head_backward(a, m, b, h, lane, partA, partD);
    __syncthreads();
    for (int g = 0; g < a.G; g++) /* dQ = the group's sum of dq = e w, heads in order */
        for (int s = tid; s < K; s += LR_THREADS) {
            double sum = 0;
            for (int h = g * hg; h < (g + 1) * hg; h++)
                sum += (double)m.e[(size_t)h * K + s] * (double)m.w[(size_t)h * K + s];
            m.dQ[(size_t)g * K + s] = (float)sum;
        }
    lr_store_dx_ddt(a, m, b, r0);
    __syncthreads();
    lr_store_dB_dC(a, m, r0);
    __syncthreads();
    const int rows = lr_rows_of(GN);
    for (int j = tid; j < GN; j += LR_THREADS) { /* dC_{K-1}: the partials in row order */
        double sum = 0;
        for (int r = 0; r < rows; r++)
            sum += m.dCp[(size_t)r * GN + j];
        a.dC[(r0 + K - 1) * a.dC_stride + j] = (float)sum;
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
    a.prefetch = (double)Bsz * K * H * P * sizeof(float) <= LR_PREFETCH_BYTES;
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
