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
 * in order (ssd_scan.cu, st_cuda_ssd_set_scan; in bf16 matrix-product mode
 * its TF32 tensor-core variant, ssd_scan_tc.cu, st_cuda_ssd_set_scan_tc);
 * otherwise three launches:
 *   1. chunk_summary  (one block per (b, h, chunk)): the chunk's own state
 *      X^T diag(w) B and its total decay e[L-1];
 *   2. state_pass     (a thread per (b, h, state element)): S_in of every
 *      chunk by the recurrence S_in[c+1] = e_c[L-1] S_in[c] + local[c], in
 *      place; only for more than SSD_FUSE_MAX_CHUNKS chunks, or without
 *      staging: otherwise each chunk kernel runs the same recurrence over
 *      the chunks before it as it stages S_in (stage_state), which reads
 *      less than the pass and saves a launch;
 *   3. chunk_forward  (one block per (b, h, chunk)): Y of the chunk.
 * Backward, in bf16 matrix-product mode with windows of K <= 64 rows, one
 * kernel a (b, group) that takes the window as one chunk in the quadratic
 * form and writes dB, dC itself (ssd_scan_quad_backward.cu,
 * st_cuda_ssd_set_scan_quad_backward), then step 5 with one partial a
 * (b, h). Otherwise, where the shape fits, one kernel a (b, h) that walks
 * the chunks forward for S_in and back for dS_out and runs steps 1-3 below
 * per chunk with chunk_backward's code (ssd_scan_backward.cu,
 * st_cuda_ssd_set_scan_backward), then steps 4 and 5; otherwise,
 * mirroring the forward (formulas as in ssd.c):
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
#include "cuda/ssd_chunk_device.cuh"
#include "cuda/ssd_scan_cuda.h"
#include "cuda/ssd_scan_quad_cuda.h"
#include "cuda/ssd_shape.cuh"

/* The default dynamic shared memory limit; more needs an opt-in. */
#define SSD_SMEM_DEFAULT 49152

/* C_t . B_s over N (float accumulation, as every product over N or P). */
__device__ static float cb_dot(const ssd_dev_args &a, const ssd_chunk &k, int t, int s) {
    float g = 0;
    for (int n = 0; n < a.N; n++)
        g += c_at(a, k, t, n) * b_at(a, k, s, n);
    return g;
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

/* Shared bytes of chunk_forward and chunk_summary, with (stage) or without
 * the staged rows (chunk_backward's: bwd_smem_bytes). */
static size_t fwd_smem_bytes(int Q, int P, int N, int stage) {
    return sizeof(double) * 3 * (size_t)Q +
           sizeof(float) * ((size_t)Q * (size_t)Q + (stage ? stage_floats(Q, P, N, 1, 0, 1) : 0));
}
static size_t sum_smem_bytes(int Q, int P, int N, int stage, int with_grad) {
    return sizeof(double) * 4 * (size_t)Q + (stage ? sizeof(float) * stage_floats(Q, P, N, with_grad, with_grad) : 0);
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
    bwd_steps(a, k, m, Sin, sin_ld, dSo, dso_ld);
    __syncthreads();
    bwd_decay_grads(a, k, m);
    __syncthreads();
    bwd_partials(k, m, partA, partD, blockIdx.x);
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

static int ssd_fixed_on = 1;
extern "C" void st_cuda_ssd_set_scan_fixed_shape(int on) { ssd_fixed_on = on != 0; }
int ssd_fixed_shape_on(void) { return ssd_fixed_on; }

int ssd_fixed_shape_of(int K, int P, int N, int Q) {
    if (!ssd_fixed_on || Q <= 0 || K % Q != 0) return SSD_FIXED_NONE;
    if (ssd_shape_fixed<SSD_SHAPE_DEFAULT, SSD_THREADS>::takes(Q, P, N)) return SSD_FIXED_DEFAULT;
    if (ssd_shape_fixed<SSD_SHAPE_TINY, SSD_THREADS>::takes(Q, P, N)) return SSD_FIXED_TINY;
    return SSD_FIXED_NONE;
}

extern "C" int st_cuda_ssd_scan_fixed_shape_takes(int K, int P, int N, int Q) {
    const int Qc = Q < 1 ? 1 : (Q < K ? Q : K); /* clamped as the op does */
    return ssd_fixed_shape_of(K, P, N, Qc) != SSD_FIXED_NONE;
}

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

extern "C" int st_cuda_ssd_forward_is_scan_tc(int Bsz, int K, int H, int P, int G, int N, int Q) {
    size_t optin = 0;
    if (Bsz <= 0 || K <= 0 || ssd_check_sizes(Bsz, K, H, P, G, N) != ST_OK || smem_optin(&optin) != ST_OK) {
        st_clear_error();
        return 0;
    }
    return st_cuda_ssd_scan_tc_fits(Bsz, H, P, N, clamp_q(Q, K), optin);
}

extern "C" int st_cuda_ssd_backward_is_scan_quad(int Bsz, int K, int H, int P, int G, int N, int Q) {
    (void)Q;
    size_t optin = 0;
    if (Bsz <= 0 || K <= 0 || ssd_check_sizes(Bsz, K, H, P, G, N) != ST_OK || smem_optin(&optin) != ST_OK) {
        st_clear_error();
        return 0;
    }
    return st_cuda_ssd_scan_quad_fits(Bsz, K, H, P, G, N, optin);
}

extern "C" int st_cuda_ssd_backward_is_scan(int Bsz, int K, int H, int P, int G, int N, int Q) {
    size_t optin = 0;
    if (Bsz <= 0 || K <= 0 || smem_optin(&optin) != ST_OK) return 0;
    if (st_cuda_ssd_backward_is_scan_quad(Bsz, K, H, P, G, N, Q)) return 0; /* the quad backward takes it first */
    return st_cuda_ssd_scan_backward_fits(Bsz, K, H, P, N, clamp_q(Q, K), optin);
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
    int quad = 0; /* bf16 mode, K <= 64: the window as one chunk, a block a (b, g) (ssd_scan_quad_backward.cu) */
    ST_TRY(st_cuda_ssd_scan_quad_backward(a, dB, dB_stride, dC, dC_stride, work + lay.partA, work + lay.partD, optin,
                                          stream, &quad));
    if (quad) { /* dB, dC written; one dA, dD partial a (b, h) */
        ssd_dev_args one = a;
        one.nc = 1;
        reduce_head_kernel<<<H, SSD_THREADS, 0, st>>>(one, work + lay.partA, work + lay.partD, dA, dD);
        ST_CUDA_LAUNCHED();
        return ST_OK;
    }
    int taken = 0; /* one kernel a (b, h) walking the chunks, where the shape fits (ssd_scan_backward.cu) */
    ST_TRY(st_cuda_ssd_scan_backward(a, work + lay.states, work + lay.dBp, work + lay.dCp, work + lay.partA,
                                     work + lay.partD, optin, stream, &taken));
    if (!taken) {
        a.stage = bwd_smem_bytes(a.Q, P, N, 1) <= optin;
        a.fused = a.stage && a.nc <= SSD_FUSE_MAX_CHUNKS;
        ST_TRY(launch_states(a, lay, work, 1, st));
        size_t bytes = bwd_smem_bytes(a.Q, P, N, a.stage);
        ST_TRY(allow_smem(chunk_backward_kernel, bytes, a.Q));
        chunk_backward_kernel<<<Bsz * H * a.nc, SSD_THREADS, bytes, st>>>(
            a, work + lay.states, work + lay.dstates, work + lay.decay, work + lay.dBp, work + lay.dCp,
            work + lay.partA, work + lay.partD);
        ST_CUDA_LAUNCHED();
    }
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
