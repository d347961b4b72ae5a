/* ssd.cu: the Mamba2 SSD scan on the GPU (float32 storage; the products
 * over N and P accumulate in float, the decays, their segment sums and
 * exponentials and every sum over chunks or rows in double), forward and
 * backward; the C API is cuda/ssd_cuda.h and the
 * math that of model/ssd.c, which it mirrors chunk by chunk.
 *
 * Per (b, h), a_t = dt_t A (<= 0), S_{-1} = 0 (S is P x N):
 *     S_t = exp(a_t) S_{t-1} + dt_t x_t B_t^T,    y_t = S_t C_t + D x_t
 * In a chunk of length L (chunk length Q, the last may be shorter) with
 * local t, s in [0, L):
 *     Lm[t,s] = exp(sum_{s<i<=t} a_i) (s <= t),  e[t] = exp(sum_{i<=t} a_i),
 *     w_s = Lm[L-1,s] dt_s,  M = (C B^T) o Lm o dt_s
 *     Y = M X + diag(e) C S_in^T + D X,   S_out = e[L-1] S_in + X^T diag(w) B
 * Every exponent is a segment sum of a_i taken directly (never a difference
 * of cumulative sums), so it is <= 0 and nothing overflows.
 *
 * Forward, where the shape fits, one kernel a (b, h) that walks the chunks
 * in order (ssd_scan.cu, st_cuda_ssd_set_scan); otherwise three launches:
 *   1. chunk_summary  (one block per (b, h, chunk)): the chunk's own state
 *      X^T diag(w) B and its total decay e[L-1];
 *   2. state_pass     (a thread per (b, h, state element)): S_in of every
 *      chunk by the recurrence S_in[c+1] = e_c[L-1] S_in[c] + local[c], in
 *      place; only for more than SSD_FUSE_MAX_CHUNKS chunks, or without
 *      staging: otherwise each chunk kernel runs the same recurrence over
 *      the chunks before it as it stages S_in (stage_state), which reads
 *      less than the pass and saves a launch;
 *   3. chunk_forward  (one block per (b, h, chunk)): Y of the chunk.
 * Backward, mirroring it (formulas as in ssd.c):
 *   1. chunk_summary also forms U[c] = dY^T diag(e) C of each chunk;
 *   2. state_pass also runs the reverse recurrence for the gradient leaving
 *      each chunk: dS_out[c-1] = e_c[L-1] dS_out[c] + U[c], dS_out[last] = 0;
 *   3. chunk_backward (one block per (b, h, chunk)): dx and ddt of the chunk,
 *      this head's dB, dC rows, and the chunk's dA, dD partials;
 *   4. reduce_group: dB, dC = sum over the heads of a group, in head order;
 *   5. reduce_head: dA, dD += sum over (b, chunk) in order.
 * No atomics: every sum has one owner thread and a fixed order, so results
 * are bit-identical run to run and do not depend on the row strides.
 * The products over N, P or the chunk's rows run as 2 x 2 register tiles
 * (two rows of one operand against two of the other: one shared-memory
 * read per multiply-add instead of two), each tile element summing its
 * terms in the order the element's own loop would.
 * Shared memory: where the device allows it (st_cuda_ssd_set_staging), the
 * chunk kernels first copy the chunk's rows of x, B, C, dy and its boundary
 * states into shared memory at odd row strides (stage_chunk), and every
 * product then reads shared memory without bank conflicts (bench/NOTES.md
 * has what each step gained).
 *
 * Work (floats): states, dstates [Bsz H nc, P N]; decay [Bsz H nc];
 * dBp, dCp [Bsz H, K N]; dA and dD partials [Bsz H nc] each. */
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_device.cuh"
#include "cuda/ssd_scan_cuda.h"

/* Threads per block of every kernel; chunk_backward's ordered reduction
 * has one slot per thread, so its launches must use exactly this. */
#define SSD_THREADS 256

/* The default dynamic shared memory limit; more needs an opt-in. */
#define SSD_SMEM_DEFAULT 49152

/* Sizes, strides and pointers of one call, passed to kernels by value. */
struct ssd_dev_args {
    int Bsz, K, H, P, G, N, Q, nc;
    int stage; /* copy the chunk's rows of x, B, C (and dy) into shared memory first */
    int fused; /* (with stage) no state pass: each chunk forms its S_in / dS_out from the chunks' own states */
    const float *x, *dt, *A, *Bm, *Cm, *Dskip, *dy;
    int x_stride, dt_stride, B_stride, C_stride, dy_stride;
    float *y, *dx, *ddt;
    int y_stride, dx_stride, ddt_stride;
};

/* The chunk a block works on: rows t0 .. t0+L-1 of window b, head h, with
 * the head's (or its group's) column offset applied to each row pointer. */
struct ssd_chunk {
    int b, h, c, t0, L;
    size_t bh, row0;
    const float *X, *B, *C, *dt, *dY;
    int xs, bs, cs, dys; /* the row strides of X, B, C, dY (global, or shared once staged) */
    double A, D;
};

__device__ static ssd_chunk chunk_of(const ssd_dev_args &a, int blk) {
    ssd_chunk k;
    k.c = blk % a.nc;
    k.bh = (size_t)(blk / a.nc);
    k.h = (int)(k.bh % (size_t)a.H);
    k.b = (int)(k.bh / (size_t)a.H);
    int g = k.h / (a.H / a.G);
    k.t0 = k.c * a.Q;
    k.L = min(a.Q, a.K - k.t0);
    k.row0 = (size_t)k.b * (size_t)a.K + (size_t)k.t0;
    k.X = a.x + k.row0 * (size_t)a.x_stride + (size_t)k.h * (size_t)a.P;
    k.B = a.Bm + k.row0 * (size_t)a.B_stride + (size_t)g * (size_t)a.N;
    k.C = a.Cm + k.row0 * (size_t)a.C_stride + (size_t)g * (size_t)a.N;
    k.dt = a.dt + k.row0 * (size_t)a.dt_stride + (size_t)k.h;
    k.dY = a.dy ? a.dy + k.row0 * (size_t)a.dy_stride + (size_t)k.h * (size_t)a.P : NULL;
    k.xs = a.x_stride, k.bs = a.B_stride, k.cs = a.C_stride, k.dys = a.dy_stride;
    k.A = (double)a.A[k.h];
    k.D = a.Dskip ? (double)a.Dskip[k.h] : 0.0;
    return k;
}

/* Element accessors of a chunk's rows (local row t). */
__device__ static float x_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int p) {
    return (void)a, k.X[(size_t)t * k.xs + p];
}
__device__ static float b_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int n) {
    return (void)a, k.B[(size_t)t * k.bs + n];
}
__device__ static float c_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int n) {
    return (void)a, k.C[(size_t)t * k.cs + n];
}
__device__ static float dy_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int p) {
    return (void)a, k.dY[(size_t)t * k.dys + p];
}

/* C_t . B_s over N (float accumulation, as every product over N or P). */
__device__ static float cb_dot(const ssd_dev_args &a, const ssd_chunk &k, int t, int s) {
    float g = 0;
    for (int n = 0; n < a.N; n++)
        g += c_at(a, k, t, n) * b_at(a, k, s, n);
    return g;
}

/* a_i = dt_i A and dt_i of the chunk into shared memory. */
__device__ static void load_decays(const ssd_dev_args &a, const ssd_chunk &k, double *ai, double *dtv) {
    for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
        dtv[i] = (double)k.dt[(size_t)i * a.dt_stride];
        ai[i] = dtv[i] * k.A;
    }
}

/* With a.stage: the chunk's rows of X and B (and C, dY when asked) into
 * buf (floats: L*P, L*N, L*N, L*P in that order, only those asked), k
 * pointing there afterwards; callers __syncthreads before reading. Every
 * later read of the rows is a shared-memory read instead of a global one
 * (the products read each row L or N times). */
__device__ static void stage_chunk(const ssd_dev_args &a, ssd_chunk &k, float *buf, int want_c, int want_dy) {
    if (!a.stage) return;
    k.X = stage_rows(k.X, k.xs, k.L, a.P, buf), k.xs = a.P + 1, buf += (size_t)a.Q * (a.P + 1);
    k.B = stage_rows(k.B, k.bs, k.L, a.N, buf), k.bs = a.N + 1, buf += (size_t)a.Q * (a.N + 1);
    if (want_c) k.C = stage_rows(k.C, k.cs, k.L, a.N, buf), k.cs = a.N + 1, buf += (size_t)a.Q * (a.N + 1);
    if (want_dy) k.dY = stage_rows(k.dY, k.dys, k.L, a.P, buf), k.dys = a.P + 1;
}

/* Floats stage_chunk needs (states: that many P x N states more, padded
 * as the rows, that the caller stages after them). */
static size_t stage_floats(int Q, int P, int N, int want_c, int want_dy, int states = 0) {
    return (size_t)Q * ((size_t)(P + 1) * (1 + want_dy) + (size_t)(N + 1) * (1 + want_c)) +
           (size_t)states * (size_t)P * (N + 1);
}

/* Chunk counts up to which the chunk kernels form their boundary states
 * themselves (a.fused) instead of a state pass: chunk c reads the c (or
 * nc-1-c) other chunks' own states, which costs less than the pass's read
 * and write of every state while nc is small. */
#define SSD_FUSE_MAX_CHUNKS 8

/* Into dst (P x N, row stride N + 1) the state entering chunk c of (b, h)
 * = bh (forward: S_in[c]) or the gradient leaving it (dS_out[c]).
 * With a.fused, `own` holds each chunk's own state (its X^T diag(w) B, or
 * U = dY^T diag(e) C) and this runs the state pass's recurrence over the
 * chunks before (after) c, in the same order and in double: the same bits
 * as the pass. Otherwise the pass has run and own[c] is the state. */
__device__ static void stage_state(const ssd_dev_args &a, const float *own, const float *decay, size_t bh, int c,
                                   int forward, float *dst) {
    const size_t pn = (size_t)a.P * (size_t)a.N, first = bh * (size_t)a.nc;
    const float *dec = decay + first;
    for (size_t idx = threadIdx.x; idx < pn; idx += blockDim.x) {
        float v;
        if (!a.fused) {
            v = own[(first + (size_t)c) * pn + idx];
        } else {
            double S = 0;
            if (forward)
                for (int j = 0; j < c; j++)
                    S = (double)dec[j] * S + (double)own[(first + (size_t)j) * pn + idx];
            else
                for (int j = a.nc - 1; j > c; j--)
                    S = (double)dec[j] * S + (double)own[(first + (size_t)j) * pn + idx];
            v = (float)S;
        }
        dst[(idx / a.N) * (a.N + 1) + idx % a.N] = v;
    }
}

/* Where stage_chunk's rows end in buf. */
__device__ static float *stage_end(const ssd_dev_args &a, float *buf, int want_c, int want_dy) {
    return buf + (size_t)a.Q * ((size_t)(a.P + 1) * (1 + want_dy) + (size_t)(a.N + 1) * (1 + want_c));
}

/* ---- work layout ------------------------------------------------------- */

struct ssd_work {
    size_t states, dstates, decay, dBp, dCp, partA, partD, total;
};

static int clamp_q(int Q, int K) { return Q < 1 ? 1 : (Q < K ? Q : K); }

static ssd_work ssd_work_of(int Bsz, int K, int H, int P, int N, int Q) {
    int Qe = clamp_q(Q, K), nc = (K + Qe - 1) / Qe;
    size_t bh = (size_t)Bsz * (size_t)H, bhc = bh * (size_t)nc, pn = (size_t)P * (size_t)N;
    size_t kn = (size_t)K * (size_t)N;
    ssd_work w;
    w.states = 0;
    w.dstates = w.states + bhc * pn;
    w.decay = w.dstates + bhc * pn;
    w.dBp = w.decay + bhc;
    w.dCp = w.dBp + bh * kn;
    w.partA = w.dCp + bh * kn;
    w.partD = w.partA + bhc;
    w.total = w.partD + bhc;
    return w;
}

extern "C" size_t st_cuda_ssd_work_count(int Bsz, int K, int H, int P, int G, int N, int Q) {
    (void)G;
    if (Bsz <= 0 || K <= 0 || H <= 0 || P <= 0 || N <= 0) return 0;
    return ssd_work_of(Bsz, K, H, P, N, Q).total;
}

/* ---- kernels ----------------------------------------------------------- */

/* One block per (b, h, chunk): states[blk] = X^T diag(w) B, decay[blk] =
 * e[L-1]; with dstates, also dstates[blk] = dY^T diag(e) C.
 * Shared: ai, dtv [Q] doubles, w, e [Q] floats (in the space of 2Q doubles). */
static __global__ void chunk_summary_kernel(ssd_dev_args a, float *states, float *dstates, float *decay) {
    extern __shared__ double sm_sum[];
    const ssd_chunk k0 = chunk_of(a, blockIdx.x);
    double *ai = sm_sum, *dtv = ai + a.Q;
    float *w = (float *)(dtv + a.Q), *e = w + a.Q;
    ssd_chunk k = k0;
    stage_chunk(a, k, (float *)(sm_sum + 4 * (size_t)a.Q), dstates != NULL, dstates != NULL);
    load_decays(a, k, ai, dtv);
    __syncthreads();
    for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
        w[i] = (float)(exp(segment(ai, k.L - 1, i)) * dtv[i]);
        e[i] = (float)exp(prefix(ai, i));
    }
    if (threadIdx.x == 0) decay[blockIdx.x] = (float)exp(prefix(ai, k.L - 1));
    __syncthreads();
    const size_t pn = (size_t)a.P * (size_t)a.N;
    float *S = states + (size_t)blockIdx.x * pn;
    float *U = dstates ? dstates + (size_t)blockIdx.x * pn : NULL;
    /* 2 x 2 tiles: p0, p1 = p0 + p2 and n0, n1 = n0 + n2 (consecutive
     * threads take consecutive n: no bank conflicts), each sum over t in
     * order as one element's would be */
    const int p2 = (a.P + 1) / 2, n2 = (a.N + 1) / 2;
    for (int idx = threadIdx.x; idx < p2 * n2; idx += blockDim.x) {
        const int p0 = idx / n2, n0 = idx % n2, p1 = p0 + p2, n1 = n0 + n2;
        const int q1 = min(p1, a.P - 1), m1 = min(n1, a.N - 1); /* clamped reads; writes guarded */
        float s00 = 0, s01 = 0, s10 = 0, s11 = 0, u00 = 0, u01 = 0, u10 = 0, u11 = 0;
        for (int t = 0; t < k.L; t++) {
            const float xw0 = x_at(a, k, t, p0) * w[t], xw1 = x_at(a, k, t, q1) * w[t];
            const float b0 = b_at(a, k, t, n0), b1 = b_at(a, k, t, m1);
            s00 += xw0 * b0, s01 += xw0 * b1, s10 += xw1 * b0, s11 += xw1 * b1;
            if (U) {
                const float ye0 = dy_at(a, k, t, p0) * e[t], ye1 = dy_at(a, k, t, q1) * e[t];
                const float c0 = c_at(a, k, t, n0), c1 = c_at(a, k, t, m1);
                u00 += ye0 * c0, u01 += ye0 * c1, u10 += ye1 * c0, u11 += ye1 * c1;
            }
        }
        const size_t r0 = (size_t)p0 * a.N, r1 = (size_t)p1 * a.N;
        S[r0 + n0] = s00;
        if (n1 < a.N) S[r0 + n1] = s01;
        if (p1 < a.P) S[r1 + n0] = s10;
        if (p1 < a.P && n1 < a.N) S[r1 + n1] = s11;
        if (U) {
            U[r0 + n0] = u00;
            if (n1 < a.N) U[r0 + n1] = u01;
            if (p1 < a.P) U[r1 + n0] = u10;
            if (p1 < a.P && n1 < a.N) U[r1 + n1] = u11;
        }
    }
}

/* A thread per (b, h, state element): in place, the chunks' own states
 * become the state entering each chunk, and (with dstates) the chunks' U
 * become the gradient leaving each chunk. Carried in double. */
static __global__ void state_pass_kernel(ssd_dev_args a, float *states, float *dstates, const float *decay) {
    const size_t pn = (size_t)a.P * (size_t)a.N, total = (size_t)a.Bsz * a.H * pn;
    for (size_t gi = (size_t)blockIdx.x * blockDim.x + threadIdx.x; gi < total; gi += (size_t)gridDim.x * blockDim.x) {
        const size_t bh = gi / pn, idx = gi % pn, first = bh * (size_t)a.nc;
        const float *dec = decay + first;
        double S = 0;
        for (int c = 0; c < a.nc; c++) {
            float *slot = states + (first + (size_t)c) * pn + idx;
            double local = *slot;
            *slot = (float)S;
            S = (double)dec[c] * S + local;
        }
        if (!dstates) continue;
        double dS = 0;
        for (int c = a.nc - 1; c >= 0; c--) {
            float *slot = dstates + (first + (size_t)c) * pn + idx;
            double local = *slot;
            *slot = (float)dS;
            dS = (double)dec[c] * dS + local;
        }
    }
}

/* One block per (b, h, chunk): Y = M X + diag(e) C S_in^T + D X.
 * Shared: ai, dtv, e [Q] doubles, then M [L, L] floats. */
static __global__ void chunk_forward_kernel(ssd_dev_args a, const float *states, const float *decay) {
    extern __shared__ double sm_fwd[];
    ssd_chunk k = chunk_of(a, blockIdx.x);
    const int L = k.L;
    double *ai = sm_fwd, *dtv = ai + a.Q, *e = dtv + a.Q;
    float *M = (float *)(e + a.Q);
    stage_chunk(a, k, M + (size_t)a.Q * a.Q, 1, 0);
    const size_t pn = (size_t)a.P * (size_t)a.N;
    const float *Sin = states + (size_t)blockIdx.x * pn;
    int sin_ld = a.N; /* Sin's row stride: N in global memory, N + 1 once staged */
    if (a.stage && k.c > 0) {
        float *dst = stage_end(a, M + (size_t)a.Q * a.Q, 1, 0);
        stage_state(a, states, decay, k.bh, k.c, 1, dst);
        Sin = dst, sin_ld = a.N + 1;
    }
    load_decays(a, k, ai, dtv);
    __syncthreads();
    for (int i = threadIdx.x; i < L; i += blockDim.x)
        e[i] = exp(prefix(ai, i));
    for (int idx = threadIdx.x; idx < L * L; idx += blockDim.x) {
        int t = idx / L, s = idx % L;
        M[idx] = s <= t ? (float)(cb_dot(a, k, t, s) * exp(segment(ai, t, s)) * dtv[s]) : 0.0f;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < L * a.P; idx += blockDim.x) {
        int t = idx / a.P, p = idx % a.P;
        float acc = 0;
        for (int s = 0; s <= t; s++)
            acc += M[t * L + s] * x_at(a, k, s, p);
        if (k.c > 0) {
            float cs = 0;
            for (int n = 0; n < a.N; n++)
                cs += c_at(a, k, t, n) * Sin[(size_t)p * sin_ld + n];
            acc += (float)e[t] * cs;
        }
        acc += (float)k.D * x_at(a, k, t, p);
        a.y[(k.row0 + (size_t)t) * (size_t)a.y_stride + (size_t)k.h * (size_t)a.P + (size_t)p] = (float)acc;
    }
}

/* Shared memory of chunk_backward: the doubles first (8-byte aligned). */
struct ssd_bwd_smem {
    double *ai, *dtv, *e, *last, *dd, *de, *sa, *red;
    float *xds, *dys; /* [L, N]: (X dS_out)[i, n] and (dY S_in)[i, n] */
    float *G, *Lm, *dM, *stage;
};

__device__ static ssd_bwd_smem bwd_smem(double *base, int Q, int N) {
    ssd_bwd_smem m;
    m.ai = base;
    m.dtv = m.ai + Q;
    m.e = m.dtv + Q;
    m.last = m.e + Q;
    m.dd = m.last + Q;
    m.de = m.dd + Q;
    m.sa = m.de + Q;
    m.red = m.sa + Q;
    m.xds = (float *)(m.red + SSD_THREADS);
    m.dys = m.xds + (size_t)Q * N;
    m.G = m.dys + (size_t)Q * N;
    m.Lm = m.G + (size_t)Q * Q;
    m.dM = m.Lm + (size_t)Q * Q;
    m.stage = m.dM + (size_t)Q * Q;
    return m;
}

/* Shared bytes of each kernel, with (stage) or without the staged rows. */
static size_t bwd_smem_bytes(int Q, int P, int N, int stage) {
    return sizeof(double) * (7 * (size_t)Q + SSD_THREADS) +
           sizeof(float) *
               (2 * (size_t)Q * N + 3 * (size_t)Q * (size_t)Q + (stage ? stage_floats(Q, P, N, 1, 1, 2) : 0));
}
static size_t fwd_smem_bytes(int Q, int P, int N, int stage) {
    return sizeof(double) * 3 * (size_t)Q +
           sizeof(float) * ((size_t)Q * (size_t)Q + (stage ? stage_floats(Q, P, N, 1, 0, 1) : 0));
}
static size_t sum_smem_bytes(int Q, int P, int N, int stage, int with_grad) {
    return sizeof(double) * 4 * (size_t)Q + (stage ? sizeof(float) * stage_floats(Q, P, N, with_grad, with_grad) : 0);
}

/* Step 2 of chunk_backward: decays, e, last row, and for s <= t
 * G = C_t.B_s, Lm, dM = dY_t.X_s (all 0 above the diagonal). */
__device__ static void bwd_products(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L;
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        m.e[i] = exp(prefix(m.ai, i));
        m.last[i] = exp(segment(m.ai, L - 1, i));
        m.de[i] = 0;
    }
    /* 2 x 2 tiles (rows t, t+1; columns s, s+1) on or below the diagonal,
     * each dot product summed in order as one element's would be; tiles
     * wholly above it are never read by the later steps and not written */
    const int l2 = (L + 1) / 2;
    for (int idx = threadIdx.x; idx < l2 * l2; idx += blockDim.x) {
        const int ti = idx / l2, si = idx % l2;
        if (si > ti) continue;
        const int t0 = 2 * ti, s0 = 2 * si, t1 = min(t0 + 1, L - 1), s1 = min(s0 + 1, L - 1);
        float g00 = 0, g01 = 0, g10 = 0, g11 = 0, d00 = 0, d01 = 0, d10 = 0, d11 = 0;
        for (int n = 0; n < a.N; n++) {
            const float c0 = c_at(a, k, t0, n), c1 = c_at(a, k, t1, n), b0 = b_at(a, k, s0, n), b1 = b_at(a, k, s1, n);
            g00 += c0 * b0, g01 += c0 * b1, g10 += c1 * b0, g11 += c1 * b1;
        }
        for (int p = 0; p < a.P; p++) {
            const float y0 = dy_at(a, k, t0, p), y1 = dy_at(a, k, t1, p), x0 = x_at(a, k, s0, p),
                        x1 = x_at(a, k, s1, p);
            d00 += y0 * x0, d01 += y0 * x1, d10 += y1 * x0, d11 += y1 * x1;
        }
        const float g[2][2] = {{g00, g01}, {g10, g11}}, d[2][2] = {{d00, d01}, {d10, d11}};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                const int t = t0 + i, s = s0 + j, at = t * L + s;
                if (t >= L || s >= L) continue;
                const int on = s <= t;
                m.G[at] = on ? g[i][j] : 0.0f;
                m.Lm[at] = on ? (float)exp(segment(m.ai, t, s)) : 0.0f;
                m.dM[at] = on ? d[i][j] : 0.0f;
            }
    }
}

/* Step 3, one thread per column s (ssd.c's chunk_intra_grads): G becomes M,
 * dM becomes dG = dM o Lm o dt_s, Lm becomes R = dM o G o Lm o dt_s below
 * the diagonal (0 on it), dd[s] = sum_t dM o G o Lm (ddt's direct part). */
__device__ static void bwd_intra(const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L;
    for (int s = threadIdx.x; s < L; s += blockDim.x) {
        double dts = m.dtv[s], acc = 0;
        for (int t = s; t < L; t++) {
            int i = t * L + s;
            double g = m.G[i], l = m.Lm[i], d = m.dM[i], q = d * g * l;
            acc += q;
            m.G[i] = (float)(g * l * dts);
            m.dM[i] = (float)(d * l * dts);
            m.Lm[i] = t > s ? (float)(q * dts) : 0.0f;
        }
        m.dd[s] = acc;
    }
}

/* Step 4: the terms of S_out through w_i (into dd[i] and R's last row)
 * and of Y's S_in term (de[i]); row L-1 also takes S_out's decay of S_in,
 * sum(dS_out o S_in). First a thread per (i, n) forms xds = X dS_out and
 * dys = dY S_in (kept for step 7), then a thread per row i. */
__device__ static void bwd_boundary(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m, const float *Sin,
                                    int sin_ld, const float *dSo, int dso_ld) {
    const int L = k.L, has_in = k.c > 0, has_out = k.c + 1 < a.nc;
    const size_t pn = (size_t)a.P * (size_t)a.N;
    /* 2 x 2 tiles: rows i, i + 1 and columns n0, n1 = n0 + n2 (consecutive
     * threads, consecutive n), each sum over p in order */
    const int i2 = (L + 1) / 2, n2 = (a.N + 1) / 2;
    for (int idx = threadIdx.x; idx < i2 * n2; idx += blockDim.x) {
        const int i0 = 2 * (idx / n2), n0 = idx % n2, n1 = n0 + n2;
        const int i1 = min(i0 + 1, L - 1), m1 = min(n1, a.N - 1);
        float x00 = 0, x01 = 0, x10 = 0, x11 = 0, y00 = 0, y01 = 0, y10 = 0, y11 = 0;
        for (int p = 0; p < a.P; p++) {
            if (has_out) {
                const float u0 = x_at(a, k, i0, p), u1 = x_at(a, k, i1, p);
                const float v0 = dSo[(size_t)p * dso_ld + n0], v1 = dSo[(size_t)p * dso_ld + m1];
                x00 += u0 * v0, x01 += u0 * v1, x10 += u1 * v0, x11 += u1 * v1;
            }
            if (has_in) {
                const float u0 = dy_at(a, k, i0, p), u1 = dy_at(a, k, i1, p);
                const float v0 = Sin[(size_t)p * sin_ld + n0], v1 = Sin[(size_t)p * sin_ld + m1];
                y00 += u0 * v0, y01 += u0 * v1, y10 += u1 * v0, y11 += u1 * v1;
            }
        }
        const size_t r0 = (size_t)i0 * a.N, r1 = (size_t)i1 * a.N;
        m.xds[r0 + n0] = x00, m.dys[r0 + n0] = y00;
        if (n1 < a.N) m.xds[r0 + n1] = x01, m.dys[r0 + n1] = y01;
        if (i1 > i0) {
            m.xds[r1 + n0] = x10, m.dys[r1 + n0] = y10;
            if (n1 < a.N) m.xds[r1 + n1] = x11, m.dys[r1 + n1] = y11;
        }
    }
    double ddc = 0; /* this thread's share of sum(dS_out o S_in), into red */
    if (has_in && has_out)
        for (size_t j = threadIdx.x; j < pn; j += blockDim.x)
            ddc += (double)dSo[(j / a.N) * dso_ld + j % a.N] * (double)Sin[(j / a.N) * sin_ld + j % a.N];
    m.red[threadIdx.x] = ddc;
    __syncthreads();
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        if (has_out) { /* dw_i = B_i . (X dS_out)_i */
            double dw = 0;
            for (int n = 0; n < a.N; n++)
                dw += (double)b_at(a, k, i, n) * m.xds[(size_t)i * a.N + n];
            m.dd[i] += dw * m.last[i];
            if (i < L - 1) {
                float *r = &m.Lm[(L - 1) * L + i];
                *r = (float)((double)*r + dw * m.last[i] * m.dtv[i]);
            }
        }
        if (has_in) { /* de_i = C_i . (dY S_in)_i */
            double de = 0;
            for (int n = 0; n < a.N; n++)
                de += (double)c_at(a, k, i, n) * m.dys[(size_t)i * a.N + n];
            if (i == L - 1 && has_out)
                for (int j = 0; j < SSD_THREADS; j++)
                    de += m.red[j];
            m.de[i] = de;
        }
    }
}

/* Step 5, one thread per row t: R's row becomes its exclusive prefix sums
 * seeded by e[t] de[t], so that da_i = sum_{t>=i} R[t,i]. */
__device__ static void bwd_prefix_rows(const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L, has_in = k.c > 0;
    for (int t = threadIdx.x; t < L; t += blockDim.x) {
        float *Rt = m.Lm + t * L;
        double acc = has_in ? m.e[t] * m.de[t] : 0.0;
        for (int s = 0; s <= t; s++) {
            double here = s < t ? (double)Rt[s] : 0.0;
            Rt[s] = (float)acc;
            acc += here;
        }
    }
}

/* Step 6: ddt_i = direct_i + A da_i; sa[i] = dt_i da_i (for dA); each
 * thread's share of sum dY o X (for dD) into red[tid]. */
__device__ static void bwd_decay_grads(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L;
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        double da = 0;
        for (int t = i; t < L; t++)
            da += (double)m.Lm[t * L + i];
        a.ddt[(k.row0 + (size_t)i) * (size_t)a.ddt_stride + (size_t)k.h] = (float)(m.dd[i] + k.A * da);
        m.sa[i] = m.dtv[i] * da;
    }
    double pd = 0;
    for (int idx = threadIdx.x; idx < L * a.P; idx += blockDim.x) {
        int t = idx / a.P, p = idx % a.P;
        pd += (double)dy_at(a, k, t, p) * (double)x_at(a, k, t, p);
    }
    m.red[threadIdx.x] = pd;
}

/* Step 7: dX = M^T dY + diag(w) B dS_out^T + D dY (written to dx), and this
 * head's dC = dG B + diag(e) dY S_in, dB = dG^T C + diag(w) X dS_out (to
 * its slab of dBp/dCp). G holds M and dM holds dG since step 3. */
__device__ static void bwd_outputs(const ssd_dev_args &a, const ssd_chunk &k, const ssd_bwd_smem &m, const float *dSo,
                                   int dso_ld, float *dBh, float *dCh) {
    const int L = k.L, has_in = k.c > 0, has_out = k.c + 1 < a.nc;
    /* dX in 2 x 2 tiles: rows s0, s1 = s0 + 1 and columns p0, p1 = p0 + p2;
     * row s0's sum over t >= s0 takes its t = s0 term first, then the terms
     * both rows share, in order as one element's sum would */
    const int l2 = (L + 1) / 2, p2 = (a.P + 1) / 2, n2 = (a.N + 1) / 2;
    for (int idx = threadIdx.x; idx < l2 * p2; idx += blockDim.x) {
        const int s0 = 2 * (idx / p2), p0 = idx % p2, p1 = p0 + p2;
        const int s1 = min(s0 + 1, L - 1), q1 = min(p1, a.P - 1);
        float a00 = m.G[s0 * L + s0] * dy_at(a, k, s0, p0), a01 = m.G[s0 * L + s0] * dy_at(a, k, s0, q1);
        float a10 = 0, a11 = 0;
        for (int t = s0 + 1; t < L; t++) {
            const float y0 = dy_at(a, k, t, p0), y1 = dy_at(a, k, t, q1), g0 = m.G[t * L + s0], g1 = m.G[t * L + s1];
            a00 += g0 * y0, a01 += g0 * y1, a10 += g1 * y0, a11 += g1 * y1;
        }
        if (has_out) {
            float d00 = 0, d01 = 0, d10 = 0, d11 = 0;
            for (int n = 0; n < a.N; n++) {
                const float b0 = b_at(a, k, s0, n), b1 = b_at(a, k, s1, n);
                const float v0 = dSo[(size_t)p0 * dso_ld + n], v1 = dSo[(size_t)q1 * dso_ld + n];
                d00 += b0 * v0, d01 += b0 * v1, d10 += b1 * v0, d11 += b1 * v1;
            }
            const float w0 = (float)(m.last[s0] * m.dtv[s0]), w1 = (float)(m.last[s1] * m.dtv[s1]);
            a00 += w0 * d00, a01 += w0 * d01, a10 += w1 * d10, a11 += w1 * d11;
        }
        const float D = (float)k.D;
        a00 += D * dy_at(a, k, s0, p0), a01 += D * dy_at(a, k, s0, q1);
        a10 += D * dy_at(a, k, s1, p0), a11 += D * dy_at(a, k, s1, q1);
        float *r0 = a.dx + (k.row0 + (size_t)s0) * (size_t)a.dx_stride + (size_t)k.h * (size_t)a.P;
        float *r1 = a.dx + (k.row0 + (size_t)s1) * (size_t)a.dx_stride + (size_t)k.h * (size_t)a.P;
        r0[p0] = a00;
        if (p1 < a.P) r0[p1] = a01;
        if (s1 > s0) {
            r1[p0] = a10;
            if (p1 < a.P) r1[p1] = a11;
        }
    }
    /* dC, dB in 2 x 2 tiles: rows t0, t1 = t0 + 1 and columns n0, n1 = n0 +
     * n2. dC's row t sums s = 0 .. t (row t1's last term s = t1 after the
     * shared ones); dB's row t sums u = t .. L-1 (row t0's first term u = t0
     * before the shared ones): each in order as one element's sum would. */
    for (int idx = threadIdx.x; idx < l2 * n2; idx += blockDim.x) {
        const int t0 = 2 * (idx / n2), n0 = idx % n2, n1 = n0 + n2;
        const int t1 = min(t0 + 1, L - 1), m1 = min(n1, a.N - 1);
        float c00 = 0, c01 = 0, c10 = 0, c11 = 0;
        for (int s = 0; s <= t0; s++) {
            const float u0 = m.dM[t0 * L + s], u1 = m.dM[t1 * L + s], b0 = b_at(a, k, s, n0), b1 = b_at(a, k, s, m1);
            c00 += u0 * b0, c01 += u0 * b1, c10 += u1 * b0, c11 += u1 * b1;
        }
        if (t1 > t0) {
            const float u1 = m.dM[t1 * L + t1];
            c10 += u1 * b_at(a, k, t1, n0), c11 += u1 * b_at(a, k, t1, m1);
        }
        float b00 = m.dM[t0 * L + t0] * c_at(a, k, t0, n0), b01 = m.dM[t0 * L + t0] * c_at(a, k, t0, m1);
        float b10 = 0, b11 = 0;
        for (int u = t0 + 1; u < L; u++) { /* rows t0, t1 as the s index of dB */
            const float v0 = m.dM[u * L + t0], v1 = m.dM[u * L + t1], e0 = c_at(a, k, u, n0), e1 = c_at(a, k, u, m1);
            b00 += v0 * e0, b01 += v0 * e1, b10 += v1 * e0, b11 += v1 * e1;
        }
        if (has_in) {
            const float e0 = (float)m.e[t0], e1 = (float)m.e[t1];
            c00 += e0 * m.dys[(size_t)t0 * a.N + n0], c01 += e0 * m.dys[(size_t)t0 * a.N + m1];
            c10 += e1 * m.dys[(size_t)t1 * a.N + n0], c11 += e1 * m.dys[(size_t)t1 * a.N + m1];
        }
        if (has_out) {
            const float w0 = (float)(m.last[t0] * m.dtv[t0]), w1 = (float)(m.last[t1] * m.dtv[t1]);
            b00 += w0 * m.xds[(size_t)t0 * a.N + n0], b01 += w0 * m.xds[(size_t)t0 * a.N + m1];
            b10 += w1 * m.xds[(size_t)t1 * a.N + n0], b11 += w1 * m.xds[(size_t)t1 * a.N + m1];
        }
        const size_t o0 = (size_t)(k.t0 + t0) * (size_t)a.N, o1 = (size_t)(k.t0 + t1) * (size_t)a.N;
        dCh[o0 + n0] = c00, dBh[o0 + n0] = b00;
        if (n1 < a.N) dCh[o0 + n1] = c01, dBh[o0 + n1] = b01;
        if (t1 > t0) {
            dCh[o1 + n0] = c10, dBh[o1 + n0] = b10;
            if (n1 < a.N) dCh[o1 + n1] = c11, dBh[o1 + n1] = b11;
        }
    }
}

/* One block per (b, h, chunk), SSD_THREADS threads: the chunk's backward
 * (steps as in ssd.c's chunk_backward_one). */
static __global__ void __launch_bounds__(SSD_THREADS, 3)
    chunk_backward_kernel(ssd_dev_args a, const float *states, const float *dstates, const float *decay, float *dBp,
                          float *dCp, float *partA, float *partD) {
    extern __shared__ double sm_bwd[];
    ssd_chunk k = chunk_of(a, blockIdx.x);
    ssd_bwd_smem m = bwd_smem(sm_bwd, a.Q, a.N);
    stage_chunk(a, k, m.stage, 1, 1);
    const size_t pn = (size_t)a.P * (size_t)a.N, kn = (size_t)a.K * (size_t)a.N;
    const float *Sin = states + (size_t)blockIdx.x * pn, *dSo = dstates + (size_t)blockIdx.x * pn;
    int sin_ld = a.N, dso_ld = a.N; /* row strides: N in global memory, N + 1 once staged */
    if (a.stage) {
        float *dst = stage_end(a, m.stage, 1, 1);
        if (k.c > 0) stage_state(a, states, decay, k.bh, k.c, 1, dst), Sin = dst, sin_ld = a.N + 1;
        dst += (size_t)a.P * (a.N + 1);
        if (k.c + 1 < a.nc) stage_state(a, dstates, decay, k.bh, k.c, 0, dst), dSo = dst, dso_ld = a.N + 1;
    }
    load_decays(a, k, m.ai, m.dtv);
    __syncthreads();
    bwd_products(a, k, m);
    __syncthreads();
    bwd_intra(k, m);
    __syncthreads();
    bwd_boundary(a, k, m, Sin, sin_ld, dSo, dso_ld);
    __syncthreads();
    bwd_prefix_rows(k, m);
    __syncthreads();
    bwd_decay_grads(a, k, m);
    __syncthreads();
    if (threadIdx.x == 0) { /* fixed-order sums of the block's partials */
        double sA = 0, sD = 0;
        for (int i = 0; i < k.L; i++)
            sA += m.sa[i];
        for (int j = 0; j < SSD_THREADS; j++)
            sD += m.red[j];
        partA[blockIdx.x] = (float)sA;
        partD[blockIdx.x] = (float)sD;
    }
    bwd_outputs(a, k, m, dSo, dso_ld, dBp + k.bh * kn, dCp + k.bh * kn);
}

/* A thread per (row, group, n): dB and dC are the sums of the group's heads'
 * partials, in head order (written, not added). */
static __global__ void reduce_group_kernel(ssd_dev_args a, const float *dBp, const float *dCp, float *dB, int dB_stride,
                                           float *dC, int dC_stride) {
    const size_t total = (size_t)a.Bsz * a.K * a.G * a.N;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(idx % (size_t)a.N);
        size_t rest = idx / (size_t)a.N;
        int g = (int)(rest % (size_t)a.G);
        size_t r = rest / (size_t)a.G;
        size_t b = r / (size_t)a.K, t = r % (size_t)a.K;
        int hg = a.H / a.G;
        double sB = 0, sC = 0;
        for (int h = g * hg; h < (g + 1) * hg; h++) {
            size_t off = ((b * (size_t)a.H + (size_t)h) * (size_t)a.K + t) * (size_t)a.N + (size_t)n;
            sB += (double)dBp[off];
            sC += (double)dCp[off];
        }
        dB[r * (size_t)dB_stride + (size_t)g * a.N + n] = (float)sB;
        dC[r * (size_t)dC_stride + (size_t)g * a.N + n] = (float)sC;
    }
}

/* A block per head: dA[h] += sum over (b, chunk) of the partials, and the
 * same for dD (when given). Thread i sums the partials i, i + T, ... in
 * order, then a fixed tree adds the threads' sums: deterministic. */
static __global__ void reduce_head_kernel(ssd_dev_args a, const float *partA, const float *partD, float *dA,
                                          float *dD) {
    __shared__ double sA[SSD_THREADS], sD[SSD_THREADS];
    const int h = blockIdx.x;
    const size_t n = (size_t)a.Bsz * a.nc;
    double tA = 0, tD = 0;
    for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
        size_t b = j / (size_t)a.nc, c = j % (size_t)a.nc, i = (b * a.H + (size_t)h) * (size_t)a.nc + c;
        tA += (double)partA[i];
        tD += (double)partD[i];
    }
    sA[threadIdx.x] = tA, sD[threadIdx.x] = tD;
    __syncthreads();
    for (int half = SSD_THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            sA[threadIdx.x] += sA[threadIdx.x + half];
            sD[threadIdx.x] += sD[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    dA[h] += (float)sA[0];
    if (dD) dD[h] += (float)sD[0];
}

/* ---- host side ---------------------------------------------------------- */

static int ssd_check_sizes(int Bsz, int K, int H, int P, int G, int N) {
    ST_REQUIRE(Bsz >= 0 && K >= 0 && H > 0 && P > 0 && N > 0 && G > 0 && H % G == 0, ST_ERR_INPUT,
               "SSD on the GPU: bad sizes Bsz=%d K=%d H=%d P=%d G=%d N=%d (G must divide H)", Bsz, K, H, P, G, N);
    return ST_OK;
}

static int ssd_staging = 1;
extern "C" void st_cuda_ssd_set_staging(int on) { ssd_staging = on != 0; }

/* The shared memory a kernel may take to stage its rows: the device's
 * opt-in limit per block (0 when staging is off, so nothing fits). */
static int smem_optin(size_t *bytes) {
    int dev = 0, v = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    ST_CUDA_TRY(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    *bytes = ssd_staging ? (size_t)v : 0;
    return ST_OK;
}

/* Lets `kernel` use `bytes` of dynamic shared memory, or says why not. */
template <typename T> static int allow_smem(T *kernel, size_t bytes, int Q) {
    if (bytes <= SSD_SMEM_DEFAULT) return ST_OK;
    int dev = 0, max_optin = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    ST_CUDA_TRY(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    ST_REQUIRE(bytes <= (size_t)max_optin, ST_ERR_INPUT,
               "SSD on the GPU: chunk length Q=%d needs %zu bytes of shared memory per block, the device allows %d", Q,
               bytes, max_optin);
    ST_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return ST_OK;
}

static ssd_dev_args args_of(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x, int x_stride,
                            const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                            const float *Cm, int C_stride, const float *Dskip) {
    ssd_dev_args a;
    memset(&a, 0, sizeof a);
    a.Bsz = Bsz, a.K = K, a.H = H, a.P = P, a.G = G, a.N = N;
    a.Q = clamp_q(Q, K);
    a.nc = (K + a.Q - 1) / a.Q;
    a.x = x, a.x_stride = x_stride, a.dt = dt, a.dt_stride = dt_stride, a.A = A;
    a.Bm = Bm, a.B_stride = B_stride, a.Cm = Cm, a.C_stride = C_stride, a.Dskip = Dskip;
    return a;
}

/* Launches 1 and 2 of both directions: states (and dstates) per chunk. */
static int launch_states(const ssd_dev_args &a, const ssd_work &lay, float *work, int with_grad, cudaStream_t st) {
    /* a.fused: the chunk kernels that follow form the boundary states; no pass */
    int blocks = a.Bsz * a.H * a.nc;
    float *dstates = with_grad ? work + lay.dstates : NULL;
    ssd_dev_args as = a;
    size_t optin = 0;
    ST_TRY(smem_optin(&optin));
    as.stage = sum_smem_bytes(a.Q, a.P, a.N, 1, with_grad) <= optin;
    size_t bytes = sum_smem_bytes(a.Q, a.P, a.N, as.stage, with_grad);
    ST_TRY(allow_smem(chunk_summary_kernel, bytes, a.Q));
    chunk_summary_kernel<<<blocks, SSD_THREADS, bytes, st>>>(as, work + lay.states, dstates, work + lay.decay);
    ST_CUDA_LAUNCHED();
    size_t cells = (size_t)a.Bsz * a.H * a.P * a.N, sp_blocks = (cells + SSD_THREADS - 1) / SSD_THREADS;
    sp_blocks = sp_blocks < (1u << 30) ? sp_blocks : (1u << 30);
    if (!a.fused) {
        state_pass_kernel<<<(unsigned)sp_blocks, SSD_THREADS, 0, st>>>(a, work + lay.states, dstates, work + lay.decay);
        ST_CUDA_LAUNCHED();
    }
    return ST_OK;
}

extern "C" int st_cuda_ssd_forward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x,
                                           int x_stride, const float *dt, int dt_stride, const float *A,
                                           const float *Bm, int B_stride, const float *Cm, int C_stride,
                                           const float *Dskip, float *y, int y_stride, float *work, void *stream) {
    ST_TRY(ssd_check_sizes(Bsz, K, H, P, G, N));
    if (Bsz == 0 || K == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    ssd_dev_args a = args_of(Bsz, K, H, P, G, N, Q, x, x_stride, dt, dt_stride, A, Bm, B_stride, Cm, C_stride, Dskip);
    a.y = y, a.y_stride = y_stride;
    ssd_work lay = ssd_work_of(Bsz, K, H, P, N, Q);
    size_t optin = 0;
    ST_TRY(smem_optin(&optin));
    int taken = 0; /* one kernel a (b, h) walking the chunks, where the shape fits (ssd_scan.cu) */
    ST_TRY(st_cuda_ssd_scan_forward(Bsz, K, H, P, G, N, a.Q, x, x_stride, dt, dt_stride, A, Bm, B_stride, Cm, C_stride,
                                    Dskip, y, y_stride, optin, stream, &taken));
    if (taken) return ST_OK;
    a.stage = fwd_smem_bytes(a.Q, P, N, 1) <= optin;
    a.fused = a.stage && a.nc <= SSD_FUSE_MAX_CHUNKS;
    ST_TRY(launch_states(a, lay, work, 0, st));
    size_t bytes = fwd_smem_bytes(a.Q, P, N, a.stage);
    ST_TRY(allow_smem(chunk_forward_kernel, bytes, a.Q));
    chunk_forward_kernel<<<Bsz * H * a.nc, SSD_THREADS, bytes, st>>>(a, work + lay.states, work + lay.decay);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_ssd_backward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x,
                                            int x_stride, const float *dt, int dt_stride, const float *A,
                                            const float *Bm, int B_stride, const float *Cm, int C_stride,
                                            const float *Dskip, const float *dy, int dy_stride, float *dx,
                                            int dx_stride, float *ddt, int ddt_stride, float *dA, float *dB,
                                            int dB_stride, float *dC, int dC_stride, float *dD, float *work,
                                            void *stream) {
    ST_TRY(ssd_check_sizes(Bsz, K, H, P, G, N));
    if (Bsz == 0 || K == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    ssd_dev_args a = args_of(Bsz, K, H, P, G, N, Q, x, x_stride, dt, dt_stride, A, Bm, B_stride, Cm, C_stride, Dskip);
    a.dy = dy, a.dy_stride = dy_stride, a.dx = dx, a.dx_stride = dx_stride, a.ddt = ddt, a.ddt_stride = ddt_stride;
    ssd_work lay = ssd_work_of(Bsz, K, H, P, N, Q);
    size_t optin = 0;
    ST_TRY(smem_optin(&optin));
    a.stage = bwd_smem_bytes(a.Q, P, N, 1) <= optin;
    a.fused = a.stage && a.nc <= SSD_FUSE_MAX_CHUNKS;
    ST_TRY(launch_states(a, lay, work, 1, st));
    size_t bytes = bwd_smem_bytes(a.Q, P, N, a.stage);
    ST_TRY(allow_smem(chunk_backward_kernel, bytes, a.Q));
    chunk_backward_kernel<<<Bsz * H * a.nc, SSD_THREADS, bytes, st>>>(a, work + lay.states, work + lay.dstates,
                                                                      work + lay.decay, work + lay.dBp, work + lay.dCp,
                                                                      work + lay.partA, work + lay.partD);
    ST_CUDA_LAUNCHED();
    size_t cells = (size_t)Bsz * K * G * N;
    int blocks = (int)((cells + SSD_THREADS - 1) / SSD_THREADS);
    blocks = blocks < 65535 ? blocks : 65535; /* the kernel strides over the rest */
    reduce_group_kernel<<<blocks, SSD_THREADS, 0, st>>>(a, work + lay.dBp, work + lay.dCp, dB, dB_stride, dC,
                                                        dC_stride);
    ST_CUDA_LAUNCHED();
    reduce_head_kernel<<<H, SSD_THREADS, 0, st>>>(a, work + lay.partA, work + lay.partD, dA, dD);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
