/* ssd_scan_backward.cu: the SSD backward (ssd.cu's math) as one kernel, a
 * block per (window b, head h) that walks the window's chunks forward for
 * the states entering them and then backward for the gradients, carrying
 * the state gradient between chunks in registers, in double:
 *     forward, c = 0 .. nc-2:   S_in[c+1] = e_c[L-1] S_in[c] + X^T diag(w) B
 *     backward, c = nc-1 .. 0:  chunk_backward's steps 2-7 on chunk c with
 *                               S_in[c] and dS_out[c] (dx, ddt, this head's
 *                               dB, dC rows, the dA, dD partials), then
 *                               dS_out[c-1] = e_c[L-1] dS_out[c] + U[c],
 *                               U[c] = dY^T diag(e) C (not for c = 0)
 * with e, w, Lm as at the top of ssd.cu. The chunk-parallel path launches
 * chunk_summary (own states and U of every chunk, to global memory) and
 * chunk_backward over (b, h, chunk), each block recomputing its boundary
 * states from the other chunks' (or a state pass doing it): every chunk's
 * rows are staged twice and every state goes through global memory. Here
 * each chunk's x, B, C, dy rows are staged once for the backward (x, B once
 * more for the forward walk), no summary runs, and only the states entering
 * chunks 1 .. nc-2 go through global memory (the `states` slab of ssd.cu's
 * work, written and read back by the same thread; none at nc = 2), the last
 * one staying in shared memory.
 * The chunk's steps are the same code as chunk_backward's
 * (cuda/ssd_chunk_device.cuh); the own states and U sum in float in the
 * order of chunk_summary's 2 x 2 tiles, the recurrences run in double in the
 * state pass's order and round to float where it does: the same bits as the
 * chunk-parallel kernels. dB, dC (per head) and the partials land in the
 * same work slabs; ssd.cu's reduce_group and reduce_head then run as today.
 * Shared memory: chunk_backward's layout with its rows and both boundary
 * states staged (bwd_smem_bytes(Q, P, N, 1), 74 KB at Q = 32, P = 32, N =
 * 64); the forward walk reuses it (w in xds, each own state in the dS_out
 * slot, S_in[nc-1] left in the S_in slot), and U takes the S_in slot once
 * step 4 has read S_in.
 * Taken when the shape fits (P N <= SSD_THREADS x 8 state elements, the
 * shared memory within the device's opt-in limit, staging on) and
 * st_cuda_ssd_set_scan_backward is on; otherwise ssd.cu runs its
 * chunk-parallel kernels.
 * In the bf16 precision mode (cuda/linear_cuda.h), with
 * st_cuda_ssd_set_scan_backward_tc on, the kernel's TC variant runs every
 * product (G, dM, X dS_out, dY S_in, dX, dC, dB, U and the forward walk's
 * own states) as TF32 WMMA tiles on the tensor cores
 * (cuda/ssd_chunk_tc.cuh: its rule, layout and phases) where Q, P, N are
 * multiples of 16 and K of Q, and its shared memory (ssd_tc_smem_bytes, 75
 * KB at the default shape) fits; it also stages the rows by cp.async,
 * forms the decays from one prefix a chunk (Lm in float; the forward
 * walk's w and decay too), runs steps 3 and 6's sums over all warps and
 * steps 4's row dots and 5's row prefixes a warp a row, and sums the
 * partials as a warp's tree (ssd_chunk_tc.cuh), the other elementwise work
 * in double being the SIMT steps' own code. fp32
 * mode and other shapes run the SIMT variant, whose code is unchanged.
 * The TC variant is also compiled for the default and tiny presets' (Q, P,
 * N) (cuda/ssd_shape.cuh), taken for those calls unless
 * st_cuda_ssd_set_scan_fixed_shape(0): the same source and bits with its
 * index math by constants (bench/notes-scan-shape.md). */
#include <limits.h>
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_device.cuh"
#include "cuda/ssd_chunk_device.cuh"
#include "cuda/ssd_chunk_tc.cuh"
#include "cuda/ssd_scan_cuda.h"

extern "C" {
#include "cuda/linear_cuda.h"
}

/* The most state elements a thread carries in registers. */
#define SCAN_BWD_MAX_SPT 8

/* Blocks an SM the register budget is cut for: 3 (80 registers; the SIMT
 * variant spills ~100 bytes at SPT 8, chiefly the carried dS_out, read
 * twice a chunk, the TC variants none), as chunk_backward's bound; 74 KB
 * of shared memory a block allows 3 too. At 2 the kernel takes 128
 * registers and spills nothing. */
#define SCAN_BWD_MIN_BLOCKS 3

/* Into own (P x N, row stride N + 1) the chunk's X^T diag(w) B as
 * chunk_summary's 2 x 2 tiles form it: rows p0, p0 + p2, columns n0,
 * n0 + n2, each sum over t in order. */
__device__ static void scan_bwd_own(const ssd_dev_args &a, const ssd_chunk &k, const float *w, float *own) {
    const int p2 = (a.P + 1) / 2, n2 = (a.N + 1) / 2, ld = a.N + 1;
    for (int idx = threadIdx.x; idx < p2 * n2; idx += blockDim.x) {
        const int p0 = idx / n2, n0 = idx % n2, p1 = p0 + p2, n1 = n0 + n2;
        const int q1 = min(p1, a.P - 1), m1 = min(n1, a.N - 1); /* clamped reads; writes guarded */
        float s00 = 0, s01 = 0, s10 = 0, s11 = 0;
        for (int t = 0; t < k.L; t++) {
            const float xw0 = x_at(a, k, t, p0) * w[t], xw1 = x_at(a, k, t, q1) * w[t];
            const float b0 = b_at(a, k, t, n0), b1 = b_at(a, k, t, m1);
            s00 += xw0 * b0, s01 += xw0 * b1, s10 += xw1 * b0, s11 += xw1 * b1;
        }
        const int r0 = p0 * ld, r1 = p1 * ld;
        own[r0 + n0] = s00;
        if (n1 < a.N) own[r0 + n1] = s01;
        if (p1 < a.P) own[r1 + n0] = s10;
        if (p1 < a.P && n1 < a.N) own[r1 + n1] = s11;
    }
}

/* Into U (P x N, row stride N + 1) the chunk's dY^T diag(e) C, e rounded to
 * float, as chunk_summary's tiles form it (after step 2 has formed m.e). */
__device__ static void scan_bwd_u(const ssd_dev_args &a, const ssd_chunk &k, const ssd_bwd_smem &m, float *U) {
    const int p2 = (a.P + 1) / 2, n2 = (a.N + 1) / 2, ld = a.N + 1;
    for (int idx = threadIdx.x; idx < p2 * n2; idx += blockDim.x) {
        const int p0 = idx / n2, n0 = idx % n2, p1 = p0 + p2, n1 = n0 + n2;
        const int q1 = min(p1, a.P - 1), m1 = min(n1, a.N - 1);
        float u00 = 0, u01 = 0, u10 = 0, u11 = 0;
        for (int t = 0; t < k.L; t++) {
            const float et = (float)m.e[t];
            const float ye0 = dy_at(a, k, t, p0) * et, ye1 = dy_at(a, k, t, q1) * et;
            const float c0 = c_at(a, k, t, n0), c1 = c_at(a, k, t, m1);
            u00 += ye0 * c0, u01 += ye0 * c1, u10 += ye1 * c0, u11 += ye1 * c1;
        }
        const int r0 = p0 * ld, r1 = p1 * ld;
        U[r0 + n0] = u00;
        if (n1 < a.N) U[r0 + n1] = u01;
        if (p1 < a.P) U[r1 + n0] = u10;
        if (p1 < a.P && n1 < a.N) U[r1 + n1] = u11;
    }
}

/* SPT: state elements per thread (P N <= SSD_THREADS x SPT), element
 * tid + j SSD_THREADS of the row-major P x N state in slot j. TC: the
 * products on the tensor cores (cuda/ssd_chunk_tc.cuh: its layout, states
 * at row stride N + 4; only for shapes ssd_tc_shape_fits takes), else the
 * SIMT steps of chunk_backward (layout bwd_smem, states at N + 1). S: the
 * TC variant's shape policy (cuda/ssd_shape.cuh: the call's sizes, or a
 * compile-time shape with the same bits); the SIMT variant takes the
 * call's. */
template <int SPT, bool TC, class S = ssd_shape_any>
static __global__ void __launch_bounds__(SSD_THREADS, SCAN_BWD_MIN_BLOCKS)
    scan_backward_kernel(ssd_dev_args a, float *states, float *dBp, float *dCp, float *partA, float *partD) {
    extern __shared__ __align__(128) double sm_sbwd[]; /* 128 bytes: the TC layout's tiles need 32 */
    const int N = S::N(a), ld = TC ? N + SSD_TC_PAD : N + 1, pn = S::P(a) * N;
    const size_t bh = blockIdx.x, kn = (size_t)a.K * (size_t)N;
    ssd_bwd_smem m = bwd_smem(sm_sbwd, S::Q(a), N);
    const ssd_tc_rows r = tc_rows(m, S::Q(a), S::P(a), N); /* read only when TC */
    float *Sin = TC ? r.Sin : stage_end(a, m.stage, 1, 1), *dSo = TC ? r.dSo : Sin + (size_t)S::P(a) * ld;
    const size_t first = bh * (size_t)a.nc; /* chunk c's partials at first + c, its state at (first + c) P N */

    /* forward: the states entering chunks 1 .. nc-1 */
    {
        double st[SPT];
#pragma unroll
        for (int j = 0; j < SPT; j++)
            st[j] = 0;
        for (int c = 0; c + 1 < a.nc; c++) {
            ssd_chunk k = chunk_at(a, bh, c);
            if (TC)
                tc_stage_chunk<S>(a, k, r, 0, 0);
            else
                stage_chunk(a, k, m.stage, 0, 0);
            load_decays(a, k, m.ai, m.dtv);
            if (TC) tc_stage_wait();
            __syncthreads();
            float *w = m.xds; /* [L] floats, as chunk_summary's w */
            if (TC) { /* warp 0: w from the chunk's prefix (tc_decays: last[i] = exp(cum[L-1] - cum[i])), e for the decay */
                tc_decays<S>(k, m);
                if (threadIdx.x < 32)
                    for (int i = threadIdx.x; i < S::L(k); i += 32) /* last[i] was written by this lane */
                        w[i] = (float)(m.last[i] * m.dtv[i]);
            } else {
                for (int i = threadIdx.x; i < k.L; i += blockDim.x)
                    w[i] = (float)(exp(segment(m.ai, k.L - 1, i)) * m.dtv[i]);
            }
            __syncthreads();
            if (TC)
                tc_own<S>(a, k, w, r, dSo);
            else
                scan_bwd_own(a, k, w, dSo);
            __syncthreads();
            const double decay = TC ? (double)(float)m.e[S::L(k) - 1] /* exp(cum[L-1]), ~1e-16 from the SIMT's */
                                    : (double)(float)exp(prefix(m.ai, k.L - 1)); /* chunk_summary's decay[] */
            float *to = c + 2 < a.nc ? states + (first + (size_t)c + 1) * (size_t)pn : NULL;
#pragma unroll
            for (int j = 0; j < SPT; j++) {
                const int idx = threadIdx.x + j * SSD_THREADS;
                if (idx >= pn) continue;
                const int at = (idx / N) * ld + idx % N;
                st[j] = decay * st[j] + (double)dSo[at];
                if (to)
                    to[idx] = (float)st[j];
                else
                    Sin[at] = (float)st[j]; /* S_in[nc-1]: the backward's first chunk reads it there */
            }
            __syncthreads(); /* the next chunk's rows, decays, w and own overwrite these */
        }
    }

    /* backward: dS_out[c] in registers, from dS_out[nc-1] = 0 */
    double ds[SPT];
#pragma unroll
    for (int j = 0; j < SPT; j++)
        ds[j] = 0;
    for (int c = a.nc - 1; c >= 0; c--) {
        ssd_chunk k = chunk_at(a, bh, c);
        if (TC)
            tc_stage_chunk<S>(a, k, r, 1, 1);
        else
            stage_chunk(a, k, m.stage, 1, 1);
        if (c + 1 < a.nc) { /* S_in[c] (c > 0) from the slab, dS_out[c] from the registers */
            const float *from = states + (first + (size_t)c) * (size_t)pn;
#pragma unroll
            for (int j = 0; j < SPT; j++) {
                const int idx = threadIdx.x + j * SSD_THREADS;
                if (idx >= pn) continue;
                const int at = (idx / N) * ld + idx % N;
                if (c > 0) Sin[at] = from[idx]; /* written by this thread in the forward walk */
                dSo[at] = (float)ds[j];
            }
        }
        if (TC) { /* U forms in step 7's phases (ssd_chunk_tc.cuh), into the S_in slot */
            tc_steps<S>(a, k, m, r);
            __syncthreads();
            tc_decay_grads<S>(a, k, m);
            __syncthreads();
            tc_partials<S>(k, m, partA, partD, first + (size_t)c);
            tc_outputs<S>(a, k, m, r, dBp + bh * kn, dCp + bh * kn, Sin);
        } else {
            bwd_steps(a, k, m, Sin, ld, dSo, ld);
            if (c > 0) scan_bwd_u(a, k, m, Sin); /* S_in is read: U takes its slot */
            __syncthreads();
            bwd_decay_grads(a, k, m);
            __syncthreads();
            bwd_partials(k, m, partA, partD, first + (size_t)c);
            bwd_outputs(a, k, m, dSo, ld, dBp + bh * kn, dCp + bh * kn);
        }
        const double decay = (double)(float)m.e[S::L(k) - 1]; /* chunk_summary's decay[] */
        __syncthreads();                                      /* step 7 has read dS_out and the rows; U is complete */
        if (c == 0) break;
#pragma unroll
        for (int j = 0; j < SPT; j++) {
            const int idx = threadIdx.x + j * SSD_THREADS;
            if (idx < pn) ds[j] = decay * ds[j] + (double)Sin[(idx / N) * ld + idx % N];
        }
    }
}

static int scan_bwd_on = 1;
extern "C" void st_cuda_ssd_set_scan_backward(int on) { scan_bwd_on = on != 0; }

extern "C" int st_cuda_ssd_scan_backward_fits(int Bsz, int K, int H, int P, int N, int Q, size_t smem_optin) {
    if (!scan_bwd_on || Bsz <= 0 || K <= 0 || Q <= 0) return 0;
    const size_t pn = (size_t)P * (size_t)N, nc = ((size_t)K + (size_t)Q - 1) / (size_t)Q;
    return pn <= (size_t)SSD_THREADS * SCAN_BWD_MAX_SPT && bwd_smem_bytes(Q, P, N, 1) <= smem_optin &&
           (size_t)Bsz * (size_t)H * nc <= (size_t)INT_MAX;
}

static int scan_bwd_tc_on = 1;
extern "C" void st_cuda_ssd_set_scan_backward_tc(int on) { scan_bwd_tc_on = on != 0; }

/* 1 when the scan backward (already known to fit) runs its TC variant. */
static int scan_bwd_tc_fits(int K, int P, int N, int Q, size_t smem_optin) {
    return scan_bwd_tc_on && st_cuda_matmul_precision() == ST_MATMUL_BF16 && ssd_tc_shape_fits(K, P, N, Q) &&
           ssd_tc_smem_bytes(Q, P, N) <= smem_optin;
}

extern "C" int st_cuda_ssd_backward_is_scan_tc(int Bsz, int K, int H, int P, int G, int N, int Q) {
    if (!st_cuda_ssd_backward_is_scan(Bsz, K, H, P, G, N, Q)) return 0;
    int dev = 0, v = 0; /* is_scan held: staging is on, so the limit is the device's opt-in */
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return 0;
    const int Qc = Q < 1 ? 1 : (Q < K ? Q : K); /* clamped as ssd.cu does */
    return scan_bwd_tc_fits(K, P, N, Qc, (size_t)v);
}

template <int SPT, bool TC, class S = ssd_shape_any>
static int scan_bwd_launch(const ssd_dev_args &a, size_t bytes, float *states, float *dBp, float *dCp, float *partA,
                           float *partD, cudaStream_t st) {
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(scan_backward_kernel<SPT, TC, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes));
    scan_backward_kernel<SPT, TC, S>
        <<<(unsigned)((size_t)a.Bsz * a.H), SSD_THREADS, bytes, st>>>(a, states, dBp, dCp, partA, partD);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

int st_cuda_ssd_scan_backward(const ssd_dev_args &args, float *states, float *dBp, float *dCp, float *partA,
                              float *partD, size_t smem_optin, void *stream, int *taken) {
    *taken = 0;
    if (!st_cuda_ssd_scan_backward_fits(args.Bsz, args.K, args.H, args.P, args.N, args.Q, smem_optin)) return ST_OK;
    ssd_dev_args a = args;
    a.stage = 1, a.fused = 0; /* the steps read the staged rows (row strides P + 1, N + 1) */
    cudaStream_t st = (cudaStream_t)stream;
    const int small = (size_t)a.P * a.N <= (size_t)SSD_THREADS * 2;
    if (scan_bwd_tc_fits(a.K, a.P, a.N, a.Q, smem_optin)) { /* bf16 mode: the products on the tensor cores */
        const size_t bytes = ssd_tc_smem_bytes(a.Q, a.P, a.N);
        const int fixed = ssd_fixed_shape_of(a.K, a.P, a.N, a.Q); /* the same bits, no runtime index math */
        if (fixed == SSD_FIXED_DEFAULT)
            ST_TRY((scan_bwd_launch<SCAN_BWD_MAX_SPT, true, ssd_shape_fixed<SSD_SHAPE_DEFAULT, SSD_THREADS>>(
                a, bytes, states, dBp, dCp, partA, partD, st)));
        else if (fixed == SSD_FIXED_TINY)
            ST_TRY((scan_bwd_launch<2, true, ssd_shape_fixed<SSD_SHAPE_TINY, SSD_THREADS>>(a, bytes, states, dBp, dCp,
                                                                                           partA, partD, st)));
        else if (small)
            ST_TRY((scan_bwd_launch<2, true>(a, bytes, states, dBp, dCp, partA, partD, st)));
        else
            ST_TRY((scan_bwd_launch<SCAN_BWD_MAX_SPT, true>(a, bytes, states, dBp, dCp, partA, partD, st)));
    } else {
        const size_t bytes = bwd_smem_bytes(a.Q, a.P, a.N, 1);
        if (small)
            ST_TRY((scan_bwd_launch<2, false>(a, bytes, states, dBp, dCp, partA, partD, st)));
        else
            ST_TRY((scan_bwd_launch<SCAN_BWD_MAX_SPT, false>(a, bytes, states, dBp, dCp, partA, partD, st)));
    }
    *taken = 1;
    return ST_OK;
}
