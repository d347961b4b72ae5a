/* linear_cuda.h: linear layers on the GPU through cuBLAS, float32 (the CUDA
 * twin of model/linear.h; DESIGN section 5 weights are row-major [out, in]).
 *
 *   forward:  y = x W^T + b             x [rows, in], W [out, in], y [rows, out]
 *   backward: dx (=|+=) dy W;  dW += dy^T x;  db += column sums of dy
 * Every pointer is a device pointer; every buffer with rows comes with its
 * row stride in elements (>= its width; padding is never read or written).
 * W and dW are contiguous ([out, in], row stride in), as in the CPU op.
 * stream is a cudaStream_t (NULL: the default stream); functions return
 * ST_OK or ST_ERR_DEVICE (core/error.h) and do not synchronise.
 *
 * Products run through cuBLAS, by default in plain fp32 (CUBLAS_DEFAULT_MATH,
 * no TF32) so that they stay within 1e-5 of the CPU op, or in bf16 when
 * st_cuda_set_matmul_precision says so (below). One cuBLAS handle per device
 * is created on the first call (outside any stream capture) with its own
 * 32 MiB workspace, and kept for the life of the process. Column sums (db)
 * run in a fixed order: results are bit-identical from run to run.
 *
 * CUDA graphs: every call may be captured on a non-default stream (cuBLAS
 * then uses the handle's workspace and allocates nothing; alpha and beta are
 * host values recorded at capture). Make one uncaptured call per device
 * first: it creates the handle. Calls on different streams must not run at
 * the same time (they share the device's one workspace). */
#ifndef ST_LINEAR_CUDA_H
#define ST_LINEAR_CUDA_H

/* Row-major C[M, N] = alpha op(A) op(B) + beta C with leading dimensions
 * (op = transpose when trans_* is set): the twin of st_gemm. beta == 0
 * never reads C (NaN there does not propagate). Kd <= 0 gives C = beta C. */
int st_cuda_gemm(int trans_a, int trans_b, int M, int N, int Kd, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc, void *stream);

/* batch products C_i = alpha op(A_i) op(B_i) + beta C_i, i < batch, with
 * A_i = A + i stride_a (and so B_i, C_i; strides in elements): the
 * stacked per-variable GRNs of the VSN as one call (cuBLAS strided batched).
 * Same rules and precision as st_cuda_gemm. */
int st_cuda_gemm_batched(int trans_a, int trans_b, int M, int N, int Kd, float alpha, const float *A, int lda,
                         long long stride_a, const float *B, int ldb, long long stride_b, float beta, float *C,
                         int ldc, long long stride_c, int batch, void *stream);

/* y[r, 0:out] = x[r, 0:in] . W^T + b   (b may be NULL; rows may be 0).
 * With a bias (16-byte aligned) the product is one cublasLt matmul that
 * adds b in its epilogue (y stored once); otherwise b is broadcast into y
 * and the product added with beta = 1. Same precision either way, bits
 * within fp32 rounding of each other (linear.cu). */
int st_cuda_linear_forward(int rows, int in, int out, const float *x, int x_stride, const float *W, const float *b,
                           float *y, int y_stride, void *stream);

/* The bias epilogue on (1, the default) or off (0: the broadcast and beta = 1
 * always), and whether a call with these arguments takes it (1) or not. */
void st_cuda_linear_set_bias_epilogue(int on);
int st_cuda_linear_bias_epilogue_takes(int rows, int in, int out, const float *x, int x_stride, const float *W,
                                       const float *b, float *y, int y_stride, void *stream);

/* y[r, 0:out] = res[r, 0:out] + x[r, 0:in] . W^T: a residual block's
 * output product. One cublasLt product reading res as its C and writing y
 * as its D where cublasLt offers an algorithm for the shape and
 * alignments; else res copied into y, then the product added with beta =
 * 1. res may be y with y's stride (in place: the product with beta = 1);
 * else it must not overlap y. No bias. */
int st_cuda_linear_forward_res(int rows, int in, int out, const float *x, int x_stride, const float *W,
                               const float *res, int res_stride, float *y, int y_stride, void *stream);

/* The residual's cublasLt product on (1, the default) or off (0: the copy
 * and beta = 1 always), and whether a call with these arguments takes it. */
void st_cuda_linear_set_res_lt(int on);
int st_cuda_linear_res_lt_takes(int rows, int in, int out, const float *x, int x_stride, const float *W,
                                const float *res, int res_stride, float *y, int y_stride, void *stream);

/* dx[r, 0:in] (=|+=) dy[r] . W;  dW += dy^T x;  db += sum_r dy[r].
 * dx, dW, db may each be NULL when not wanted. */
int st_cuda_linear_backward(int rows, int in, int out, const float *x, int x_stride, const float *W, const float *dy,
                            int dy_stride, float *dx, int dx_stride, int dx_accumulate, float *dW, float *db,
                            void *stream);

/* sum[c] += sum_r x[r, c] for c < cols, rows summed in a fixed order in
 * double (deterministic, stride-independent): the bias gradient. Blocks
 * share a column's rows (partials in an 8 MiB per-device scratch made with
 * the cuBLAS handle), so the same rule holds: make one uncaptured call
 * first, and calls on two streams must not overlap. The split count
 * depends on rows and cols only: up to 64 a column tile of 32 columns, or
 * with st_cuda_colsum_set_fill(1) (the default) enough for ~512 blocks in
 * all when the columns are few (a narrow sum's 64 blocks left most SMs
 * idle), at least 256 rows a split. */
int st_cuda_colsum_add(int rows, int cols, const float *x, int x_stride, float *sum, void *stream);
/* 1 (the default): the column sums' splits as above; 0: 64 a tile at most,
 * at least 1,024 rows a split, as before (other bits: another order). */
void st_cuda_colsum_set_fill(int on);

/* Row-split reductions (column sums over many rows, as the parameter
 * gradients of the norms and the conv are): the rows are cut into
 * plan.splits equal ranges (st_rowsplit_range), a block per (column tile,
 * split) sums its range into parts[split * ld + column] (double, ld >= the
 * columns), then st_rowsplit_finish adds the splits in order into the
 * float sums. The order depends on rows only: deterministic. With
 * plan.splits == 1 (under 2,048 rows, or more columns than the scratch
 * holds) parts is NULL and the kernel adds into the sums itself. parts is
 * the device's one scratch (8 MiB, made with the cuBLAS handle): one
 * reduction at a time per device, finished before the next begins. */
typedef struct {
    double *parts;
    int splits;
    /* With parts: the device's ST_ROWSPLIT_TICKETS counters (zero between
     * reductions) for a kernel that finishes the sums in its last block
     * (cuda/rowsplit_device.cuh) instead of st_rowsplit_finish; NULL when
     * switched off (st_cuda_rowsplit_set_tickets) or without parts. */
    unsigned *tickets;
} st_rowsplit;
enum { ST_ROWSPLIT_TICKETS = 32768 };
int st_cuda_rowsplit_plan(int rows, int cols, void *stream, st_rowsplit *plan);
/* The same with the caller's split count: min(want, rows, what the scratch
 * holds for cols columns); parts NULL and splits 1 when that is under 2. */
int st_cuda_rowsplit_plan_n(int rows, int cols, int want, void *stream, st_rowsplit *plan);
/* sum[c] += sum over s < splits of parts[s * ld + c], c < cols, in order;
 * nothing when parts is NULL. */
int st_cuda_rowsplit_finish(int cols, const double *parts, int ld, int splits, float *sum, void *stream);
/* 1 (the default): plans carry the tickets, and the kernels that can
 * finish their sums in their last block do (the column sums here, the
 * LayerNorm's parameter sums); 0: every finish is its own kernel, as
 * before (the same bits; the A/B and the tests compare the two). */
void st_cuda_rowsplit_set_tickets(int on);
#ifdef __CUDACC__
/* Rows [r0, r1) of split sp. */
static __host__ __device__ inline void st_rowsplit_range(long rows, int splits, int sp, long *r0, long *r1) {
    long per = (rows + splits - 1) / splits;
    *r0 = sp * per;
    *r1 = *r0 + per < rows ? *r0 + per : rows;
}
#endif

/* Matrix-product precision of every later st_cuda_gemm / linear call in
 * this process (read when a call is enqueued, so a captured CUDA graph
 * keeps the precision it was captured with):
 *   ST_MATMUL_FP32  plain fp32 (the default; the parity path: 1e-5 forward,
 *                   1e-4 gradients against the CPU)
 *   ST_MATMUL_BF16  bf16 operands on the tensor cores with fp32
 *                   accumulation and fp32 inputs/outputs in memory
 *                   (cuBLAS compute type 32F_FAST_16BF): weights stay fp32
 *                   masters, activations stay fp32 between ops; products
 *                   within ~5e-3 relative of fp32 (issue 6 bound 2e-2).
 *                   cuBLAS may still run a shape in TF32 or fp32 (the
 *                   compute type allows, not forces, bf16). Bias adds and
 *                   column sums (db) are not products: fp32/double in both.
 * The setting is process-wide and not synchronised: change it between
 * steps, from the thread that enqueues. Other values read as FP32. */
typedef enum { ST_MATMUL_FP32 = 0, ST_MATMUL_BF16 = 1 } st_matmul_precision;
void st_cuda_set_matmul_precision(st_matmul_precision p);
st_matmul_precision st_cuda_matmul_precision(void);

#endif
