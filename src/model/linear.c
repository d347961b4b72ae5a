/* linear.c: linear layers on the CPU through OpenBLAS.
 *
 * forward:  y = x W^T + b            x [rows, in], W [out, in], y [rows, out]
 * backward: dx = dy W, dW += dy^T x, db += column sums of dy
 * Bias sums run over rows in a fixed order so that results are bit-identical
 * from run to run and between contiguous and padded buffers. */
#include "core/real.h"

#include <cblas.h>
#include <string.h>

#include "model/linear.h"

void st_gemm(int trans_a, int trans_b, int M, int N, int Kd, real alpha, const real *A, int lda, const real *B,
             int ldb, real beta, real *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (Kd <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
        return;
    }
#if ST_REAL_BITS == 64
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, Kd,
                alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, Kd,
                alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

void st_linear_forward(int rows, int in, int out, const real *x, int x_stride, const real *W, const real *b,
                       real *y, int y_stride) {
    if (rows <= 0) return;
    if (b) {
        for (int r = 0; r < rows; r++) memcpy(y + (size_t)r * y_stride, b, sizeof(real) * (size_t)out);
    }
    st_gemm(0, 1, rows, out, in, 1, x, x_stride, W, in, b ? 1 : 0, y, y_stride);
}

void st_linear_backward(int rows, int in, int out, const real *x, int x_stride, const real *W, const real *dy,
                        int dy_stride, real *dx, int dx_stride, int dx_accumulate, real *dW, real *db) {
    if (rows <= 0) return;
    if (dx) st_gemm(0, 0, rows, in, out, 1, dy, dy_stride, W, in, dx_accumulate ? 1 : 0, dx, dx_stride);
    if (dW) st_gemm(1, 0, out, in, rows, 1, dy, dy_stride, x, x_stride, 1, dW, in);
    if (db) {
        for (int r = 0; r < rows; r++) {
            const real *g = dy + (size_t)r * dy_stride;
            for (int o = 0; o < out; o++) db[o] += g[o];
        }
    }
}
