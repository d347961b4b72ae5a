/* linear.cu: linear layers on the GPU (math and shapes in cuda/linear_cuda.h).
 *
 * forward:  y = x W^T + b            x [rows, in], W [out, in], y [rows, out]
 * backward: dx = dy W, dW += dy^T x, db += column sums of dy
 * Row-major products go to column-major cuBLAS by the usual identity: a
 * row-major matrix with row stride ld is, read column-major with leading
 * dimension ld, its transpose; so row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T, i.e. cuBLAS called with the operands swapped.
 * Products run in the process-wide precision (st_cuda_set_matmul_precision):
 * fp32 through cublasSgemm (no TF32), or bf16 operands with fp32
 * accumulation through cublasGemmEx; bias and column sums are fp32/double
 * kernels of ours in either mode. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <cublasLt.h>

#include "cuda/check.h"
#include "cuda/rowsplit_device.cuh"

extern "C" {
#include "cuda/linear_cuda.h"
}

/* One handle per device, made on first use (creation costs milliseconds and
 * allocates; a handle per call would dominate small layers). Not guarded
 * for concurrent first use from several host threads.
 *
 * Graph capture: each handle owns an explicit workspace (cublasSetWorkspace)
 * allocated with it, so cuBLAS never allocates (no cudaMallocAsync memory
 * nodes, which child graphs cannot hold) while a stream is captured. The
 * cuBLAS guide recommends 32 MiB on Hopper (4 MiB elsewhere; more is
 * harmless). cublasSetStream resets the handle to cuBLAS's own workspace
 * pool, so the workspace is set again after every cublasSetStream. alpha and
 * beta stay host scalars (CUBLAS_POINTER_MODE_HOST, the default): a capture
 * records their values. The handle is created outside any capture (a first
 * call inside one is refused with a message), since creation allocates.
 * A user workspace also makes cuBLAS's choice of kernels independent of
 * other streams (the guide's reproducibility section); calls on two streams
 * must still not overlap in time, as they share this one workspace. */
enum { ST_BLAS_MAX_DEVICES = 64 };
static const size_t ST_BLAS_WORKSPACE_BYTES = (size_t)32 << 20;

/* Column sums split their rows over up to ST_COLSUM_SPLITS blocks per
 * column tile; the partial sums (double) live in the device's scratch. */
enum { ST_COLSUM_SPLITS = 64, ST_COLSUM_MIN_ROWS = 1024 };
/* st_cuda_colsum_set_fill(1): the blocks a narrow column sum aims at (~4 an SM of the H200's 132) and
 * the rows a split keeps at least */
enum { ST_COLSUM_FILL_BLOCKS = 512, ST_COLSUM_FILL_ROWS = 256 };
static const size_t ST_COLSUM_SCRATCH_DOUBLES = (size_t)1 << 20; /* 8 MiB */

typedef struct {
    cublasHandle_t handle;
    cublasLtHandle_t lt;  /* the bias epilogue's products (st_cuda_linear_forward) */
    void *workspace;      /* ST_BLAS_WORKSPACE_BYTES of device memory */
    double *colsum_parts; /* ST_COLSUM_SCRATCH_DOUBLES, the column sums' partials */
    unsigned *tickets;    /* ST_ROWSPLIT_TICKETS counters, zero between reductions */
} st_blas;
static st_blas st_blas_devs[ST_BLAS_MAX_DEVICES];

/* The process-wide matrix-product precision (linear_cuda.h). Read once per
 * product when it is enqueued; set it between steps, not while another host
 * thread enqueues products. */
static st_matmul_precision st_matmul_mode = ST_MATMUL_FP32;

extern "C" void st_cuda_set_matmul_precision(st_matmul_precision p) {
    st_matmul_mode = p == ST_MATMUL_BF16 ? ST_MATMUL_BF16 : ST_MATMUL_FP32;
}

extern "C" st_matmul_precision st_cuda_matmul_precision(void) { return st_matmul_mode; }

/* Creates device dev's handle and workspace (dev is current). */
static int blas_create(int dev, cudaStream_t stream, st_blas *b) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    ST_CUDA_TRY(cudaStreamIsCapturing(stream, &cap));
    if (cap != cudaStreamCaptureStatusNone)
        return ST_FAIL(ST_ERR_DEVICE,
                       "cuBLAS: the first matrix product on device %d is inside a stream capture; creating the "
                       "handle allocates, so make one uncaptured linear/gemm call on this device before capturing",
                       dev);
    cublasHandle_t h = NULL;
    ST_CUBLAS_TRY(cublasCreate(&h));
    /* Plain fp32 for cublasSgemm: TF32 would put the products ~1e-3 away
     * from the CPU's. The bf16 path names its compute type per call. */
    cublasStatus_t s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        ST_CUBLAS_TRY(s);
    }
    cublasLtHandle_t lt = NULL;
    s = cublasLtCreate(&lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        ST_CUBLAS_TRY(s);
    }
    void *ws = NULL;
    cudaError_t e = cudaMalloc(&ws, ST_BLAS_WORKSPACE_BYTES); /* 256-byte aligned, as cuBLAS requires */
    if (e != cudaSuccess) {
        cublasLtDestroy(lt);
        cublasDestroy(h);
        return ST_FAIL(ST_ERR_DEVICE, "cuBLAS workspace: cudaMalloc of %zu bytes on device %d: %s",
                       ST_BLAS_WORKSPACE_BYTES, dev, cudaGetErrorString(e));
    }
    void *parts = NULL;
    e = cudaMalloc(&parts, ST_COLSUM_SCRATCH_DOUBLES * sizeof(double));
    if (e != cudaSuccess) {
        cudaFree(ws);
        cublasLtDestroy(lt);
        cublasDestroy(h);
        return ST_FAIL(ST_ERR_DEVICE, "column-sum scratch: cudaMalloc of %zu bytes on device %d: %s",
                       ST_COLSUM_SCRATCH_DOUBLES * sizeof(double), dev, cudaGetErrorString(e));
    }
    void *tk = NULL;
    e = cudaMalloc(&tk, ST_ROWSPLIT_TICKETS * sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMemset(tk, 0, ST_ROWSPLIT_TICKETS * sizeof(unsigned)); /* uncaptured: see above */
    if (e != cudaSuccess) {
        cudaFree(tk);
        cudaFree(parts);
        cudaFree(ws);
        cublasLtDestroy(lt);
        cublasDestroy(h);
        return ST_FAIL(ST_ERR_DEVICE, "row-split tickets: %zu bytes on device %d: %s",
                       ST_ROWSPLIT_TICKETS * sizeof(unsigned), dev, cudaGetErrorString(e));
    }
    b->handle = h, b->lt = lt, b->workspace = ws, b->colsum_parts = (double *)parts, b->tickets = (unsigned *)tk;
    return ST_OK;
}

/* The current device's st_blas, created on first use. */
static int blas_of_device(cudaStream_t stream, st_blas **out) {
    int dev = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    if (dev < 0 || dev >= ST_BLAS_MAX_DEVICES)
        return ST_FAIL(ST_ERR_DEVICE, "cuBLAS: device %d beyond the %d handles kept", dev, ST_BLAS_MAX_DEVICES);
    st_blas *b = &st_blas_devs[dev];
    if (!b->handle) ST_TRY(blas_create(dev, stream, b));
    *out = b;
    return ST_OK;
}

/* The current device's handle, bound to stream and to its own workspace. */
static int blas_handle(cudaStream_t stream, cublasHandle_t *out) {
    st_blas *b = NULL;
    ST_TRY(blas_of_device(stream, &b));
    ST_CUBLAS_TRY(cublasSetStream(b->handle, stream));
    ST_CUBLAS_TRY(cublasSetWorkspace(b->handle, b->workspace, ST_BLAS_WORKSPACE_BYTES)); /* after SetStream */
    *out = b->handle;
    return ST_OK;
}

static unsigned blocks_for(long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

/* C[M, N] = beta C (a product with an empty inner dimension). */
static __global__ void scale_rows_kernel(int M, int N, float beta, float *C, int ldc) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)M * N) return;
    float *c = C + (size_t)(idx / N) * ldc + idx % N;
    *c = beta == 0.0f ? 0.0f : beta * *c;
}

extern "C" int st_cuda_gemm(int trans_a, int trans_b, int M, int N, int Kd, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (M <= 0 || N <= 0) return ST_OK;
    if (Kd <= 0) {
        scale_rows_kernel<<<blocks_for((long)M * N, 256), 256, 0, s>>>(M, N, beta, C, ldc);
        ST_CUDA_LAUNCHED();
        return ST_OK;
    }
    cublasHandle_t h = NULL;
    ST_TRY(blas_handle(s, &h));
    /* Column-major C^T [N, M] = op(B)^T [N, Kd] . op(A)^T [Kd, M]. */
    cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (st_matmul_mode == ST_MATMUL_BF16) {
        /* fp32 in memory, bf16 operands on the tensor cores, fp32 accumulate
         * and fp32 alpha/beta. 32F_FAST_16BF *allows* down-conversion: for
         * some shapes cuBLAS may pick a TF32 or plain fp32 kernel instead
         * (never less precise than bf16). Any transpose, leading dimension
         * and alignment is legal; tensor cores run best with 16-byte
         * aligned rows and sizes that are multiples of 8. The algorithm is
         * CUBLAS_GEMM_DEFAULT (heuristics): the deprecated DEFAULT_TENSOR_OP
         * is documented as also allowing fp16 (32F_FAST_16F) kernels. */
        ST_CUBLAS_TRY(cublasGemmEx(h, ob, oa, N, M, Kd, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C,
                                   CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
    } else {
        ST_CUBLAS_TRY(cublasSgemm(h, ob, oa, N, M, Kd, &alpha, B, ldb, A, lda, &beta, C, ldc));
    }
    return ST_OK;
}

extern "C" int st_cuda_gemm_batched(int trans_a, int trans_b, int M, int N, int Kd, float alpha, const float *A,
                                    int lda, long long stride_a, const float *B, int ldb, long long stride_b,
                                    float beta, float *C, int ldc, long long stride_c, int batch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (M <= 0 || N <= 0 || batch <= 0) return ST_OK;
    if (Kd <= 0) {
        for (int i = 0; i < batch; i++)
            ST_TRY(st_cuda_gemm(trans_a, trans_b, M, N, Kd, alpha, A, lda, B, ldb, beta, C + (size_t)i * stride_c,
                                ldc, stream));
        return ST_OK;
    }
    cublasHandle_t h = NULL;
    ST_TRY(blas_handle(s, &h));
    cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (st_matmul_mode == ST_MATMUL_BF16) {
        ST_CUBLAS_TRY(cublasGemmStridedBatchedEx(h, ob, oa, N, M, Kd, &alpha, B, CUDA_R_32F, ldb, stride_b, A,
                                                 CUDA_R_32F, lda, stride_a, &beta, C, CUDA_R_32F, ldc, stride_c, batch,
                                                 CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
    } else {
        ST_CUBLAS_TRY(cublasSgemmStridedBatched(h, ob, oa, N, M, Kd, &alpha, B, ldb, stride_b, A, lda, stride_a, &beta,
                                                C, ldc, stride_c, batch));
    }
    return ST_OK;
}

/* y[r, :] = b (the product is then added with beta = 1, as the CPU op does).
 * A block fills a tile of BIAS_TILE_ROWS rows, its threads walking the
 * tile's (row, column) pairs in order with a step of BIAS_THREADS: one
 * division a thread, none an element. (A thread an element with a 64-bit
 * `idx / out` and `idx % out` each made this kernel integer-bound: 24 us a
 * call for ~10 us of stores at 262,144 rows, H200; bench/notes-small-kernels.md.) */
enum { BIAS_THREADS = 256, BIAS_TILE_ROWS = 64 };
/* The widest row the walk indexes in int: a tile's n = 64 out and the last step's j + 256 stay below 2^31. */
#define BIAS_MAX_OUT ((INT_MAX - BIAS_THREADS) / BIAS_TILE_ROWS)

static __global__ void bias_rows_kernel(int rows, int out, const float *b, float *y, int y_stride) {
    const long r0 = (long)blockIdx.x * BIAS_TILE_ROWS;
    const int tile_rows = rows - r0 < BIAS_TILE_ROWS ? (int)(rows - r0) : BIAS_TILE_ROWS;
    const int n = tile_rows * out; /* n + BIAS_THREADS < 2^31: the launcher checks out */
    const int step_r = BIAS_THREADS / out, step_c = BIAS_THREADS % out;
    int r = (int)threadIdx.x / out, c = (int)threadIdx.x % out;
    for (int j = threadIdx.x; j < n; j += BIAS_THREADS) {
        y[(size_t)(r0 + r) * y_stride + c] = b[c];
        r += step_r, c += step_c; /* step_c < out, so one carry at most */
        if (c >= out) c -= out, r++;
    }
}

/* ---- the bias in the product's epilogue (cublasLt) ----------------------------
 * y = x W^T + b as one cublasLt product with CUBLASLT_EPILOGUE_BIAS: the
 * bias is added to the accumulators before the one store of y. The old way
 * (bias_rows_kernel writes b into every row of y, then the product with
 * beta = 1 reads y back) moves y through memory three times instead of
 * once: at the action step's 262,144 rows the five biased layers' extra
 * traffic was ~1 GB a step. Same math as the product with beta = 1 over
 * y = b (fp32 accumulators, one fp32 add of the bias), in the same
 * precision mode (CUBLAS_COMPUTE_32F: no TF32; 32F_FAST_16BF in bf16 mode);
 * the kernels differ, so the bits may too (within fp32 rounding).
 * A plan per (device, sizes, strides, alignments, precision) holds the
 * descriptors and the heuristic's algorithm, made on first use (no device
 * work, so inside a capture too) and kept for the process; the bias
 * pointer is set on the descriptor at each call. Taken when the bias is
 * 16-byte aligned (cublasLt's epilogue wants it), a plan slot is free and
 * the heuristic offers an algorithm; else the old way. Plans are not
 * guarded for concurrent use from several host threads (as the handle). */
enum { LT_PLANS = 128 };
enum { LT_BIAS = 0, LT_RES = 1 }; /* the plan's kind: y = x W^T + b, or y = res + x W^T (below) */
typedef struct {
    int used, ok, kind, dev, rows, in, out, xs, ys, rs, mode, ax, aw, ay, ar;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t A, B, C, D; /* C: y (LT_BIAS) or res (LT_RES); D: y */
    cublasLtMatmulAlgo_t algo;
    st_blas *bl; /* the device's handles (st_blas_devs[dev]: fixed for the process) */
} lt_plan;
static lt_plan lt_plans[LT_PLANS];
static int lt_bias_on = 1, lt_res_on = 1;

extern "C" void st_cuda_linear_set_bias_epilogue(int on) { lt_bias_on = on != 0; }
extern "C" void st_cuda_linear_set_res_lt(int on) { lt_res_on = on != 0; }

/* The alignment in bytes (16, 8 or 4) of every row start of a matrix at p, row stride `stride` floats. */
static int lt_align(const void *p, int stride) {
    const uintptr_t a = (uintptr_t)p | ((uintptr_t)stride * sizeof(float));
    return (a & 15) == 0 ? 16 : (a & 7) == 0 ? 8 : 4;
}

/* The descriptors and algorithm of plan p (its key fields set), ok = 0 where cublasLt offers none.
 * Column-major, as cuBLAS sees the row-major operands: D [out, rows] = W^T' x' (+ C), W' = W read
 * column-major [in, out] (ld in, transposed), x' [in, rows] (ld xs), C [out, rows] (ld ys for the
 * bias's kind, where C is D; rs for the residual's), D [out, rows] (ld ys). */
static int lt_plan_make(cublasLtHandle_t lt, const float *bias, lt_plan *p) {
    const cublasComputeType_t ct = p->mode == ST_MATMUL_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t ep = p->kind == LT_BIAS ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    ST_CUBLAS_TRY(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    ST_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    ST_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    ST_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    if (p->kind == LT_BIAS)
        ST_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    ST_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->A, CUDA_R_32F, p->in, p->out, p->in));
    ST_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->B, CUDA_R_32F, p->in, p->rows, p->xs));
    ST_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->C, CUDA_R_32F, p->out, p->rows, p->rs));
    ST_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->D, CUDA_R_32F, p->out, p->rows, p->ys));
    cublasLtMatmulPreference_t pref = NULL;
    ST_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const size_t wsb = ST_BLAS_WORKSPACE_BYTES;
    const uint32_t aa = (uint32_t)p->aw, ab = (uint32_t)p->ax, ac = (uint32_t)p->ar, ad = (uint32_t)p->ay;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                            sizeof wsb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->A, p->B, p->C, p->D, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    /* no algorithm for this shape is not an error: the old way runs it */
    p->ok = s == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (p->ok) p->algo = res.algo;
    return ST_OK;
}

/* The plan for this call (kind LT_BIAS: c is the bias; LT_RES: c is res,
 * row stride cs), made on first use; NULL: the old way. */
static int lt_plan_for(int kind, int rows, int in, int out, const float *x, int x_stride, const float *W,
                       const float *c, int cs, float *y, int y_stride, cudaStream_t stream, lt_plan **out_plan) {
    *out_plan = NULL;
    if (kind == LT_BIAS && (!lt_bias_on || !c || ((uintptr_t)c & 15) != 0)) return ST_OK;
    if (kind == LT_RES && !lt_res_on) return ST_OK;
    st_blas *bl = NULL;
    ST_TRY(blas_of_device(stream, &bl));
    int dev = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    lt_plan key;
    memset(&key, 0, sizeof key);
    key.used = 1, key.kind = kind, key.dev = dev, key.rows = rows, key.in = in, key.out = out, key.xs = x_stride;
    key.ys = y_stride, key.rs = kind == LT_RES ? cs : y_stride, key.mode = (int)st_matmul_mode;
    key.ax = lt_align(x, x_stride), key.aw = lt_align(W, in), key.ay = lt_align(y, y_stride);
    key.ar = kind == LT_RES ? lt_align(c, cs) : key.ay;
    for (int i = 0; i < LT_PLANS; i++) {
        lt_plan *p = &lt_plans[i];
        if (!p->used) {
            *p = key;
            p->bl = bl;
            ST_TRY(lt_plan_make(bl->lt, kind == LT_BIAS ? c : NULL, p));
            *out_plan = p->ok ? p : NULL;
            return ST_OK;
        }
        if (p->kind == kind && p->dev == dev && p->rows == rows && p->in == in && p->out == out &&
            p->xs == x_stride && p->ys == y_stride && p->rs == key.rs && p->mode == key.mode && p->ax == key.ax &&
            p->aw == key.aw && p->ay == key.ay && p->ar == key.ar) {
            *out_plan = p->ok ? p : NULL;
            return ST_OK;
        }
    }
    return ST_OK; /* every slot taken: the old way */
}

/* D = alpha W^T' x' + beta C through plan p (the bias's kind: its pointer set on the descriptor first). */
static int lt_run(lt_plan *p, const float *x, const float *W, const float *bias, const float *C, float beta, float *y,
                  cudaStream_t stream) {
    const float one = 1.0f;
    if (p->kind == LT_BIAS)
        ST_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    ST_CUBLAS_TRY(cublasLtMatmul(p->bl->lt, p->op, &one, W, p->A, x, p->B, &beta, C, p->C, y, p->D, &p->algo,
                                 p->bl->workspace, ST_BLAS_WORKSPACE_BYTES, stream));
    return ST_OK;
}

extern "C" int st_cuda_linear_bias_epilogue_takes(int rows, int in, int out, const float *x, int x_stride,
                                                  const float *W, const float *b, float *y, int y_stride,
                                                  void *stream) {
    lt_plan *p = NULL;
    if (rows <= 0 || out <= 0 || in <= 0) return 0;
    if (lt_plan_for(LT_BIAS, rows, in, out, x, x_stride, W, b, 0, y, y_stride, (cudaStream_t)stream, &p) != ST_OK)
        return 0;
    return p != NULL;
}

extern "C" int st_cuda_linear_forward(int rows, int in, int out, const float *x, int x_stride, const float *W,
                                      const float *b, float *y, int y_stride, void *stream) {
    if (rows <= 0 || out <= 0) return ST_OK;
    lt_plan *p = NULL;
    if (in > 0)
        ST_TRY(lt_plan_for(LT_BIAS, rows, in, out, x, x_stride, W, b, 0, y, y_stride, (cudaStream_t)stream, &p));
    if (p) return lt_run(p, x, W, b, y, 0.0f, y, (cudaStream_t)stream);
    if (b) {
        ST_REQUIRE(out <= BIAS_MAX_OUT, ST_ERR_INPUT,
                   "linear forward with a bias: %d outputs, more than the %d its broadcast indexes in 32 bits", out,
                   BIAS_MAX_OUT);
        bias_rows_kernel<<<blocks_for(rows, BIAS_TILE_ROWS), BIAS_THREADS, 0, (cudaStream_t)stream>>>(rows, out, b, y,
                                                                                                     y_stride);
        ST_CUDA_LAUNCHED();
    }
    return st_cuda_gemm(0, 1, rows, out, in, 1.0f, x, x_stride, W, in, b ? 1.0f : 0.0f, y, y_stride, stream);
}

/* ---- the residual as the product's C (cublasLt, C != D) -------------------------
 * y = res + x W^T, a residual block's out_proj: cublasGemmEx has C = D, so
 * y = res took a copy of res into y first (the copy rode on the block's
 * LayerNorm pass: a store of [rows, out] more than needed, 134 MB at the
 * action step's first block). cublasLt reads C and writes D through
 * separate layouts: one product, res read and y written once. beta = 1,
 * the same compute type as the bias's plans; the product with beta = 1
 * over a copy of res is the same math. In place (res == y, same stride) a
 * plain product with beta = 1. */
static int lt_res_plan(int rows, int in, int out, const float *x, int x_stride, const float *W, const float *res,
                       int res_stride, float *y, int y_stride, cudaStream_t stream, lt_plan **p) {
    *p = NULL;
    if (rows <= 0 || out <= 0 || in <= 0 || (res == y && res_stride == y_stride)) return ST_OK;
    return lt_plan_for(LT_RES, rows, in, out, x, x_stride, W, res, res_stride, y, y_stride, stream, p);
}

extern "C" int st_cuda_linear_res_lt_takes(int rows, int in, int out, const float *x, int x_stride, const float *W,
                                           const float *res, int res_stride, float *y, int y_stride, void *stream) {
    lt_plan *p = NULL;
    if (lt_res_plan(rows, in, out, x, x_stride, W, res, res_stride, y, y_stride, (cudaStream_t)stream, &p) != ST_OK)
        return 0;
    return p != NULL;
}

extern "C" int st_cuda_linear_forward_res(int rows, int in, int out, const float *x, int x_stride, const float *W,
                                          const float *res, int res_stride, float *y, int y_stride, void *stream) {
    if (rows <= 0 || out <= 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    lt_plan *p = NULL;
    ST_TRY(lt_res_plan(rows, in, out, x, x_stride, W, res, res_stride, y, y_stride, st, &p));
    if (p) return lt_run(p, x, W, NULL, res, 1.0f, y, st);
    if (res != y || res_stride != y_stride)
        ST_CUDA_TRY(cudaMemcpy2DAsync(y, sizeof(float) * (size_t)y_stride, res, sizeof(float) * (size_t)res_stride,
                                      sizeof(float) * (size_t)out, (size_t)rows, cudaMemcpyDeviceToDevice, st));
    return st_cuda_gemm(0, 1, rows, out, in, 1.0f, x, x_stride, W, in, 1.0f, y, y_stride, stream);
}

/* Column sums in two steps, in an order that depends only on `rows` (so
 * deterministic and stride-independent): the rows are cut into `splits`
 * equal ranges; block (tile, split) sums its range of ST_COL_TILE columns
 * over ST_ROW_LANES row lanes in double and adds the lanes in lane order
 * into parts[split, c]; then the splits are added in order: by the last
 * block of the column tile to write its partials (tickets: the plan's
 * counter per tile, cuda/rowsplit_device.cuh), or else by a thread per
 * column in colsum_finish_kernel. The same sums in the same order either
 * way. With one split (few rows, or more columns than the scratch holds)
 * the first step adds straight into sum. */
enum { ST_COL_TILE = 32, ST_ROW_LANES = 16 };

static __global__ void colsum_part_kernel(int rows, int cols, int splits, const float *x, int x_stride,
                                          double *parts, unsigned *tickets, float *sum) {
    __shared__ double part[ST_ROW_LANES][ST_COL_TILE];
    int c = blockIdx.x * ST_COL_TILE + threadIdx.x, sp = blockIdx.y;
    long r0, r1;
    st_rowsplit_range(rows, splits, sp, &r0, &r1);
    double acc = 0;
    if (c < cols)
        for (long r = r0 + threadIdx.y; r < r1; r += ST_ROW_LANES)
            acc += x[(size_t)r * x_stride + c];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        double t = 0;
        for (int l = 0; l < ST_ROW_LANES; l++)
            t += part[l][threadIdx.x];
        if (parts)
            parts[(size_t)sp * cols + c] = t;
        else
            sum[c] += (float)t;
    }
    if (!parts || !tickets || !st_rowsplit_last_block(tickets + blockIdx.x, (unsigned)splits)) return;
    const double t = st_rowsplit_add_splits<ST_ROW_LANES, ST_COL_TILE>(parts, cols, splits, c < cols ? c : -1, part);
    if (threadIdx.y == 0 && c < cols) sum[c] += (float)t;
}

static __global__ void colsum_finish_kernel(int cols, int ld, int splits, const double *parts, float *sum) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double t = 0;
    for (int sp = 0; sp < splits; sp++)
        t += parts[(size_t)sp * ld + c];
    sum[c] += (float)t;
}

static int rowsplit_tickets_on = 1;
extern "C" void st_cuda_rowsplit_set_tickets(int on) { rowsplit_tickets_on = on != 0; }
static int colsum_fill_on = 1;
extern "C" void st_cuda_colsum_set_fill(int on) { colsum_fill_on = on != 0; }

extern "C" int st_cuda_rowsplit_plan_n(int rows, int cols, int want, void *stream, st_rowsplit *plan) {
    plan->parts = NULL, plan->splits = 1, plan->tickets = NULL;
    if (rows <= 0 || cols <= 0) return ST_OK;
    st_blas *b = NULL;
    ST_TRY(blas_of_device((cudaStream_t)stream, &b));
    long splits = want < rows ? want : rows;
    if (splits > (long)(ST_COLSUM_SCRATCH_DOUBLES / (size_t)cols)) splits = (long)(ST_COLSUM_SCRATCH_DOUBLES / cols);
    if (splits > 1) plan->parts = b->colsum_parts, plan->splits = (int)splits;
    if (splits > 1 && rowsplit_tickets_on) plan->tickets = b->tickets;
    return ST_OK;
}

extern "C" int st_cuda_rowsplit_plan(int rows, int cols, void *stream, st_rowsplit *plan) {
    long splits = rows / ST_COLSUM_MIN_ROWS;
    return st_cuda_rowsplit_plan_n(rows, cols, splits > ST_COLSUM_SPLITS ? ST_COLSUM_SPLITS : (int)splits, stream,
                                   plan);
}

extern "C" int st_cuda_rowsplit_finish(int cols, const double *parts, int parts_ld, int splits, float *sum,
                                       void *stream) {
    if (cols <= 0 || !parts) return ST_OK;
    colsum_finish_kernel<<<blocks_for(cols, 256), 256, 0, (cudaStream_t)stream>>>(cols, parts_ld, splits, parts, sum);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_colsum_add(int rows, int cols, const float *x, int x_stride, float *sum, void *stream) {
    if (rows <= 0 || cols <= 0) return ST_OK;
    cudaStream_t s = (cudaStream_t)stream;
    st_rowsplit plan;
    const long tiles = blocks_for(cols, ST_COL_TILE);
    if (colsum_fill_on) { /* ~ST_COLSUM_FILL_BLOCKS blocks in all, >= 64 a tile, >= ST_COLSUM_FILL_ROWS rows a split */
        long want = (ST_COLSUM_FILL_BLOCKS + tiles - 1) / tiles, most = rows / ST_COLSUM_FILL_ROWS;
        if (want < ST_COLSUM_SPLITS) want = ST_COLSUM_SPLITS;
        if (want > most) want = most;
        ST_TRY(st_cuda_rowsplit_plan_n(rows, cols, (int)want, stream, &plan));
    } else {
        ST_TRY(st_cuda_rowsplit_plan(rows, cols, stream, &plan));
    }
    dim3 block(ST_COL_TILE, ST_ROW_LANES), grid((unsigned)tiles, (unsigned)plan.splits);
    unsigned *tickets = grid.x <= ST_ROWSPLIT_TICKETS ? plan.tickets : NULL; /* a counter a column tile */
    colsum_part_kernel<<<grid, block, 0, s>>>(rows, cols, plan.splits, x, x_stride, plan.parts, tickets, sum);
    ST_CUDA_LAUNCHED();
    return tickets ? ST_OK : st_cuda_rowsplit_finish(cols, plan.parts, cols, plan.splits, sum, stream);
}

extern "C" int st_cuda_linear_backward(int rows, int in, int out, const float *x, int x_stride, const float *W,
                                       const float *dy, int dy_stride, float *dx, int dx_stride, int dx_accumulate,
                                       float *dW, float *db, void *stream) {
    if (rows <= 0) return ST_OK;
    if (dx)
        ST_TRY(st_cuda_gemm(0, 0, rows, in, out, 1.0f, dy, dy_stride, W, in, dx_accumulate ? 1.0f : 0.0f, dx, dx_stride,
                            stream));
    if (dW) ST_TRY(st_cuda_gemm(1, 0, out, in, rows, 1.0f, dy, dy_stride, x, x_stride, 1.0f, dW, in, stream));
    if (db) ST_TRY(st_cuda_colsum_add(rows, out, dy, dy_stride, db, stream));
    return ST_OK;
}
