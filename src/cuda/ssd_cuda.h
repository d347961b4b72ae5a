/* ssd_cuda.h: the Mamba2 SSD scan (model/ssd.h) on the GPU, float32.
 *
 * Same arguments and semantics as st_ssd_forward_chunked /
 * st_ssd_backward_chunked of the CPU op, with device pointers and a stream:
 * rows r = b*K + t; x [H*P], B and C [G*N], dt [H] (> 0), y [H*P] per row,
 * each buffer with its own row stride (x, B and C may be views of one xBC
 * row); A [H] (< 0), Dskip [H] (may be NULL: no skip). Per (b, h):
 *     S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T,   y_t = S_t C_t + Dskip x_t
 * computed chunk by chunk (chunk length Q, clamped to [1, K] as on the CPU).
 * Backward: dx, ddt, dB, dC are written; dA and dD are added to (+=), summed
 * in a fixed order (bit-identical run to run).
 *
 * `work` is a device buffer of st_cuda_ssd_work_count() floats (scratch,
 * nothing carries from the forward to the backward). `stream` is a
 * cudaStream_t (NULL: the default stream). Returns ST_OK, ST_ERR_INPUT for
 * sizes the kernels cannot take, or ST_ERR_DEVICE (message in
 * st_last_error()). Calls are asynchronous on the stream. */
#ifndef ST_SSD_CUDA_H
#define ST_SSD_CUDA_H

#include <stddef.h>

/* Floats of `work` for the forward or the backward with these sizes. */
size_t st_cuda_ssd_work_count(int Bsz, int K, int H, int P, int G, int N, int Q);

int st_cuda_ssd_forward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x, int x_stride,
                                const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                                const float *Cm, int C_stride, const float *Dskip, float *y, int y_stride, float *work,
                                void *stream);

int st_cuda_ssd_backward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x, int x_stride,
                                 const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                                 const float *Cm, int C_stride, const float *Dskip, const float *dy, int dy_stride,
                                 float *dx, int dx_stride, float *ddt, int ddt_stride, float *dA, float *dB,
                                 int dB_stride, float *dC, int dC_stride, float *dD, float *work, void *stream);

/* Whether the chunk kernels copy each chunk's rows of x, B, C and dy into
 * shared memory before their products (1, the default: where the shape's
 * rows fit the device's shared memory) or read them from global memory
 * (0; the large preset's backward always does). The same results either
 * way; tests use 0 to check the unstaged path. Process-wide. */
void st_cuda_ssd_set_staging(int on);

/* Whether the forward runs as one kernel a (window, head) that walks its
 * chunks in order, the state in registers (1, the default, where the shape
 * fits: model/ssd_scan.cu), or as the chunk-parallel summary, state pass
 * and forward kernels (0). The same results either way; tests check both.
 * Process-wide. */
void st_cuda_ssd_set_scan(int on);

/* Whether the scan forward, in bf16 matrix-product mode
 * (st_cuda_set_matmul_precision(ST_MATMUL_BF16)), runs its products on the
 * tensor cores in TF32 with the state carried in float (1, the default:
 * model/ssd_scan_tc.cu, any Q, P, N whose padded shared memory fits; y
 * within TF32 rounding, ~1e-3, of the fp32 path) or as the fp32 kernel
 * (0). fp32 mode always runs the fp32 kernel. Process-wide. */
void st_cuda_ssd_set_scan_tc(int on);

/* 1 when st_cuda_ssd_forward_chunked with these sizes would run the
 * tensor-core scan forward on the current device under the current
 * switches and matrix-product precision (for the tests). */
int st_cuda_ssd_forward_is_scan_tc(int Bsz, int K, int H, int P, int G, int N, int Q);

/* Whether the tensor-core scan forward takes windows of exactly two full
 * chunks (K = 2Q, Q a multiple of 16: the default preset) with its pair
 * kernel, both chunks' intra-chunk work at once and the state term last
 * (1, the default, where its shared memory fits), or walks the chunks in
 * order as for other shapes (0). Within TF32 rounding of each other, not
 * the same bits. Process-wide. */
void st_cuda_ssd_set_scan_tc_pair(int on);

/* 1 when st_cuda_ssd_forward_chunked with these sizes would run the pair
 * kernel (for the tests). */
int st_cuda_ssd_forward_is_scan_tc_pair(int Bsz, int K, int H, int P, int G, int N, int Q);

/* Whether the pair kernel runs as one block a (window, group) that stages
 * the group's B and C and forms its G = C B^T tiles once for all its H/G
 * heads, then does each head's remaining work, or as one block a (window,
 * head): 1 (the default) the first where its shared memory fits and the
 * batch makes at least 4 blocks an SM, 2 the first wherever it fits (the
 * tests), 0 never. The same bits either way (tests compare them).
 * Process-wide. */
void st_cuda_ssd_set_scan_tc_heads(int mode);

/* 1 when st_cuda_ssd_forward_chunked with these sizes would run the pair
 * kernel a (window, group) (for the tests). */
int st_cuda_ssd_forward_is_scan_tc_heads(int Bsz, int K, int H, int P, int G, int N, int Q);

/* Whether the tensor-core scan forward takes a window of at most 64 rows
 * (K, P, N multiples of 16) as one chunk in the quadratic form, one block a
 * (window, group), or a (window, group, slice of its heads) at small batch
 * (st_cuda_ssd_set_scan_tc_quad_split): G = C B^T once a block, then for
 * each of its heads y =
 * (G o L o dt) x + D x, L[t, s] = exp(cum[t] - cum[s]), no state (1, the
 * default, where its shared memory fits: model/ssd_scan_quad.cu; it takes
 * precedence over the pair and heads kernels), or leaves those shapes to
 * them (0). Within TF32 rounding of them, not the same bits. Process-wide. */
void st_cuda_ssd_set_scan_tc_quad(int on);

/* 1 when st_cuda_ssd_forward_chunked with these sizes would run the quad
 * kernel (for the tests). */
int st_cuda_ssd_forward_is_scan_tc_quad(int Bsz, int K, int H, int P, int G, int N, int Q);

/* How the quad kernel divides a group's H/G heads among blocks: 0 (the
 * default) as the batch asks: one block a (window, group) where there are
 * at least 2 an SM, else the head slices (a block a (window, group, slice)
 * of ceil(H/G / n) heads, each forming G itself) whose estimated time is
 * least for the SM count and each plan's blocks an SM; 1 never split; n >= 2
 * n slices (at most H/G) at every batch (the tests, the benchmarks). The
 * same bits whatever the slices. Process-wide. */
void st_cuda_ssd_set_scan_tc_quad_split(int slices);

/* The number of blocks a (window, group) the quad kernel would run with
 * these sizes on the current device under the switches (0 where it does
 * not run; for the tests). */
int st_cuda_ssd_forward_scan_tc_quad_slices(int Bsz, int K, int H, int P, int G, int N, int Q);

/* The same for the backward: one kernel a (window, head) that walks its
 * chunks forward for the states and back for the gradients (1, the
 * default, where the shape fits: model/ssd_scan_backward.cu), or the
 * chunk-parallel summary, state pass and backward kernels (0). The same
 * results either way; tests check both. Process-wide. */
void st_cuda_ssd_set_scan_backward(int on);

/* 1 when st_cuda_ssd_backward_chunked with these sizes would run as the
 * scan backward on the current device under the current switches (for the
 * tests, which check that the path they compare is the one taken). */
int st_cuda_ssd_backward_is_scan(int Bsz, int K, int H, int P, int G, int N, int Q);

/* In the bf16 precision mode (st_cuda_matmul_precision() == ST_MATMUL_BF16,
 * cuda/linear_cuda.h) the scan backward runs its products on the tensor
 * cores in TF32 (1, the default; cuda/ssd_chunk_tc.cuh) where the shape
 * allows it (Q, P, N multiples of 16, K a multiple of Q), or keeps the
 * SIMT fp32 products (0). fp32 mode always keeps them. Gradients within
 * ~1e-3 relative of fp32 (bound 2e-2); deterministic either way.
 * Process-wide. */
void st_cuda_ssd_set_scan_backward_tc(int on);

/* 1 when st_cuda_ssd_backward_chunked with these sizes would run the scan
 * backward's TC variant on the current device under the current switches
 * and precision (for the tests). */
int st_cuda_ssd_backward_is_scan_tc(int Bsz, int K, int H, int P, int G, int N, int Q);

/* In the bf16 precision mode, whether the backward of windows of K <= 64
 * rows (K, P, N multiples of 16) runs as one kernel a (window, group) that
 * takes the whole window as one chunk in the quadratic form on the tensor
 * cores (TF32), sums dB and dC over the group's heads itself and writes
 * them (1, the default, where its shared memory fits and staging is on:
 * model/ssd_scan_quad_backward.cu), or as the scan backward above (0).
 * Q is not read on that path. Gradients within TF32 rounding of the fp32
 * path (bound 2e-2), not the same bits; deterministic either way. fp32
 * mode never takes it. Process-wide. */
void st_cuda_ssd_set_scan_quad_backward(int on);

/* Where the quad backward runs, its products as raw TF32 mma.sync m16n8k8
 * with shared loads, dX, dC and dB stored from the accumulators straight
 * to global memory, and at the default preset's (K, P, N) = (64, 32, 64)
 * its sizes as constants under st_cuda_ssd_set_scan_fixed_shape (1, the
 * default: bench/notes-quad3.md), or its products through WMMA, dX, dC,
 * dB through shared memory (0: changes 47 and 51, their bits). 2 (the
 * default since 2026-12-04): the mma path with its operands rounded to
 * TF32 by one integer add instead of cvt.rna (the same upper 19 bits for
 * finite values, the ones the tensor cores read: test_cuda_ssd finds mode
 * 1's bits on every gradient; ~0.04 ms a training step faster at 2,048
 * windows). Deterministic each. Process-wide; another value means 2. */
void st_cuda_ssd_set_scan_quad_backward_mma(int mode);

/* Which kernel the quad backward runs at these sizes under the switches
 * above (for the tests; whether it runs at all is
 * st_cuda_ssd_backward_is_scan_quad's answer). */
enum { ST_SSD_QUAD_WMMA, ST_SSD_QUAD_MMA, ST_SSD_QUAD_MMA_FIXED };
int st_cuda_ssd_scan_quad_backward_variant(int K, int P, int N);

/* 1 when st_cuda_ssd_backward_chunked with these sizes would run the quad
 * backward on the current device under the current switches and precision
 * (for the tests; st_cuda_ssd_backward_is_scan and _is_scan_tc then say
 * 0: it is taken before them). */
int st_cuda_ssd_backward_is_scan_quad(int Bsz, int K, int H, int P, int G, int N, int Q);

/* Whether the tensor-core scan kernels (the scan backward's TC variant and
 * the pair forward) run their compile-time-shape instantiations where a
 * call's (Q, P, N) is one they are compiled for, the default preset's
 * (32, 32, 64) and the tiny preset's (16, 16, 16), with every chunk full
 * (1, the default: cuda/ssd_shape.cuh, no division by a runtime size in
 * their loops), or the runtime-shape code for every shape (0). The same
 * bits either way (tests compare them). Process-wide. */
void st_cuda_ssd_set_scan_fixed_shape(int on);

/* 1 when the switch above is on and these sizes (Q clamped) have a
 * compile-time instantiation; whether the TC kernels run at all is
 * st_cuda_ssd_backward_is_scan_tc's and ..._forward_is_scan_tc_pair's
 * answer (for the tests). */
int st_cuda_ssd_scan_fixed_shape_takes(int K, int P, int N, int Q);

#endif
