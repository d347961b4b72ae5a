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
 * 2 x 2 tile of M or Y (two rows of one operand, two of the other, a
 * shared-memory read per multiply-add instead of two). The float products
 * sum in the order of ssd.cu's kernels and the state is carried in double
 * and rounded to float where they round it, so results match theirs.
 * Shared memory, row strides odd (no bank conflicts down a column):
 *     doubles ai, dtv, e [Q]; floats Bs, Cs [Q][N+1], Xs [Q][P+1],
 *     M [Q][Q+1], S [P][N+1] (the state entering the chunk), w [Q].
 * Taken when the shape fits (P N <= 256 x 32 state elements, the shared
 * memory within the device's opt-in limit) and st_cuda_ssd_set_scan is on;
 * otherwise ssd.cu runs its chunk-parallel kernels. */
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_device.cuh"
#include "cuda/ssd_scan_cuda.h"

#define SCAN_THREADS 256

struct scan_args {
    int K, H, P, G, N, Q, nc;
    const float *x, *dt, *A, *Bm, *Cm, *Dskip;
    int x_stride, dt_stride, B_stride, C_stride;
    float *y;
    int y_stride;
};

/* M's 2 x 2 tiles (rows t, t+1; columns s, s+1) on or below the diagonal;
 * entries above it inside a tile are 0 (Y's loop reads row t at s = t+1
 * never, but the tile writes it). */
__device__ static void scan_m(const scan_args &a, int L, const float *Bs, const float *Cs, const double *ai,
                              const double *dtv, float *M) {
    const int n2 = (L + 1) / 2, ld = a.N + 1, lm = a.Q + 1;
    for (int idx = threadIdx.x; idx < n2 * n2; idx += blockDim.x) {
        const int ti = idx / n2, si = idx % n2;
        if (si > ti) continue; /* wholly above the diagonal: never read */
        const int t0 = 2 * ti, s0 = 2 * si, t1 = min(t0 + 1, L - 1), s1 = min(s0 + 1, L - 1);
        float g00 = 0, g01 = 0, g10 = 0, g11 = 0;
        for (int n = 0; n < a.N; n++) {
            const float c0 = Cs[t0 * ld + n], c1 = Cs[t1 * ld + n], b0 = Bs[s0 * ld + n], b1 = Bs[s1 * ld + n];
            g00 += c0 * b0, g01 += c0 * b1, g10 += c1 * b0, g11 += c1 * b1;
        }
        const float g[2][2] = {{g00, g01}, {g10, g11}};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                const int t = t0 + i, s = s0 + j;
                if (t >= L || s >= L) continue;
                M[t * lm + s] = s <= t ? (float)(g[i][j] * exp(segment(ai, t, s)) * dtv[s]) : 0.0f;
            }
    }
}

/* Y's 2 x 2 tiles (rows t, t+1; columns p, p+1), written to a.y. */
__device__ static void scan_y(const scan_args &a, int L, int first, size_t row0, int h, const float *Xs,
                              const float *Cs, const float *M, const float *S, const double *e, float D) {
    const int t2 = (L + 1) / 2, p2 = (a.P + 1) / 2, lx = a.P + 1, ld = a.N + 1, lm = a.Q + 1;
    for (int idx = threadIdx.x; idx < t2 * p2; idx += blockDim.x) {
        const int t0 = 2 * (idx / p2), p0 = 2 * (idx % p2);
        const int t1 = min(t0 + 1, L - 1), p1 = min(p0 + 1, a.P - 1);
        float y00 = 0, y01 = 0, y10 = 0, y11 = 0;
        for (int s = 0; s <= t0; s++) {
            const float m0 = M[t0 * lm + s], m1 = M[t1 * lm + s], x0 = Xs[s * lx + p0], x1 = Xs[s * lx + p1];
            y00 += m0 * x0, y01 += m0 * x1, y10 += m1 * x0, y11 += m1 * x1;
        }
        if (t1 > t0) { /* row t1's last term, s = t1 */
            const float m1 = M[t1 * lm + t1];
            y10 += m1 * Xs[t1 * lx + p0], y11 += m1 * Xs[t1 * lx + p1];
        }
        if (!first) {
            float c00 = 0, c01 = 0, c10 = 0, c11 = 0;
            for (int n = 0; n < a.N; n++) {
                const float c0 = Cs[t0 * ld + n], c1 = Cs[t1 * ld + n], s0 = S[p0 * ld + n], s1 = S[p1 * ld + n];
                c00 += c0 * s0, c01 += c0 * s1, c10 += c1 * s0, c11 += c1 * s1;
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

/* SPT: state elements per thread (P N <= SCAN_THREADS x SPT), in registers. */
template <int SPT> static __global__ void __launch_bounds__(SCAN_THREADS) scan_forward_kernel(scan_args a) {
    extern __shared__ double sm_scan[];
    const int Q = a.Q, P = a.P, N = a.N, ld = N + 1, lx = P + 1;
    double *ai = sm_scan, *dtv = ai + Q, *e = dtv + Q;
    float *Bs = (float *)(e + Q), *Cs = Bs + (size_t)Q * ld, *Xs = Cs + (size_t)Q * ld;
    float *M = Xs + (size_t)Q * lx, *S = M + (size_t)Q * (Q + 1), *w = S + (size_t)P * ld;
    const int h = blockIdx.x % a.H, b = blockIdx.x / a.H, g = h / (a.H / a.G), pn = P * N;
    const double A = (double)a.A[h];
    const float D = a.Dskip ? a.Dskip[h] : 0.0f;
    double st[SPT]; /* the state entering the chunk, elements tid + j * SCAN_THREADS */
#pragma unroll
    for (int j = 0; j < SPT; j++)
        st[j] = 0;
    for (int c = 0; c < a.nc; c++) {
        const int t0 = c * Q, L = min(Q, a.K - t0);
        const size_t row0 = (size_t)b * a.K + t0;
        stage_rows(a.Bm + row0 * a.B_stride + (size_t)g * N, a.B_stride, L, N, Bs);
        stage_rows(a.Cm + row0 * a.C_stride + (size_t)g * N, a.C_stride, L, N, Cs);
        stage_rows(a.x + row0 * a.x_stride + (size_t)h * P, a.x_stride, L, P, Xs);
        for (int i = threadIdx.x; i < L; i += blockDim.x) {
            dtv[i] = (double)a.dt[(row0 + i) * a.dt_stride + h];
            ai[i] = dtv[i] * A;
        }
        if (c > 0) {
#pragma unroll
            for (int j = 0; j < SPT; j++) {
                const int idx = threadIdx.x + j * SCAN_THREADS;
                if (idx < pn) S[(idx / N) * ld + idx % N] = (float)st[j];
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < L; i += blockDim.x) {
            e[i] = exp(prefix(ai, i));
            w[i] = (float)(exp(segment(ai, L - 1, i)) * dtv[i]);
        }
        scan_m(a, L, Bs, Cs, ai, dtv, M);
        __syncthreads();
        scan_y(a, L, c == 0, row0, h, Xs, Cs, M, S, e, D);
        if (c == a.nc - 1) break; /* the state leaving the window is not an output */
        __syncthreads();
        /* S_in <- e[L-1] S_in + X^T diag(w) B, the decay rounded to float
         * and the chunk's own state summed in float as ssd.cu's summary */
        const double decay = (double)(float)exp(prefix(ai, L - 1));
#pragma unroll
        for (int j = 0; j < SPT; j++) {
            const int idx = threadIdx.x + j * SCAN_THREADS;
            if (idx >= pn) continue;
            const int p = idx / N, n = idx % N;
            float own = 0;
            for (int t = 0; t < L; t++)
                own += Xs[t * lx + p] * w[t] * Bs[t * ld + n];
            st[j] = decay * st[j] + (double)own;
        }
        __syncthreads(); /* the next chunk's staging overwrites Bs, Xs and S */
    }
}

static int scan_on = 1;
extern "C" void st_cuda_ssd_set_scan(int on) { scan_on = on != 0; }

static size_t scan_smem_bytes(int Q, int P, int N) {
    return sizeof(double) * 3 * (size_t)Q +
           sizeof(float) * ((size_t)Q * (2 * (size_t)(N + 1) + (P + 1) + (Q + 1) + 1) + (size_t)P * (N + 1));
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
    if (!scan_on || pn > (size_t)SCAN_THREADS * 32 || bytes > smem_optin || (size_t)Bsz * H > 0x7fffffffu) return ST_OK;
    scan_args a;
    memset(&a, 0, sizeof a);
    a.K = K, a.H = H, a.P = P, a.G = G, a.N = N, a.Q = Q, a.nc = (K + Q - 1) / Q;
    a.x = x, a.x_stride = x_stride, a.dt = dt, a.dt_stride = dt_stride, a.A = A;
    a.Bm = Bm, a.B_stride = B_stride, a.Cm = Cm, a.C_stride = C_stride, a.Dskip = Dskip;
    a.y = y, a.y_stride = y_stride;
    cudaStream_t st = (cudaStream_t)stream;
    if (pn <= (size_t)SCAN_THREADS * 8)
        ST_TRY(scan_launch<8>(a, Bsz, bytes, st));
    else
        ST_TRY(scan_launch<32>(a, Bsz, bytes, st));
    *taken = 1;
    return ST_OK;
}
