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
 * Products run through cuBLAS in plain fp32 (CUBLAS_DEFAULT_MATH, no TF32)
 * so that they stay within 1e-5 of the CPU op; one cuBLAS handle per device
 * is created on first use and kept for the life of the process. Column sums
 * (db) run in a fixed order: results are bit-identical from run to run. */
#ifndef ST_LINEAR_CUDA_H
#define ST_LINEAR_CUDA_H

/* Row-major C[M, N] = alpha op(A) op(B) + beta C with leading dimensions
 * (op = transpose when trans_* is set): the twin of st_gemm. beta == 0
 * never reads C (NaN there does not propagate). Kd <= 0 gives C = beta C. */
int st_cuda_gemm(int trans_a, int trans_b, int M, int N, int Kd, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc, void *stream);

/* y[r, 0:out] = x[r, 0:in] . W^T + b   (b may be NULL; rows may be 0) */
int st_cuda_linear_forward(int rows, int in, int out, const float *x, int x_stride, const float *W, const float *b,
                           float *y, int y_stride, void *stream);

/* dx[r, 0:in] (=|+=) dy[r] . W;  dW += dy^T x;  db += sum_r dy[r].
 * dx, dW, db may each be NULL when not wanted. */
int st_cuda_linear_backward(int rows, int in, int out, const float *x, int x_stride, const float *W, const float *dy,
                            int dy_stride, float *dx, int dx_stride, int dx_accumulate, float *dW, float *db,
                            void *stream);

/* sum[c] += sum_r x[r, c] for c < cols, rows summed in a fixed order in
 * double (deterministic, stride-independent): the bias gradient. */
int st_cuda_colsum_add(int rows, int cols, const float *x, int x_stride, float *sum, void *stream);

#endif
