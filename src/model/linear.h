/* linear.h: y = x W^T + b over rows, through BLAS (DESIGN section 5 weights
 * are row-major [out, in], PyTorch's Linear convention).
 *
 * Every buffer comes with its row stride (elements between row starts),
 * which may exceed its width. Activation gradients are written (or added
 * when dx_accumulate is set); parameter gradients are always added to. */
#ifndef ST_LINEAR_H
#define ST_LINEAR_H

#include "core/real.h"

#define st_linear_forward ST_R(st_linear_forward)
#define st_linear_backward ST_R(st_linear_backward)
#define st_gemm ST_R(st_gemm)

/* y[r, 0:out] = x[r, 0:in] . W^T + b   (b may be NULL; rows may be 0) */
void st_linear_forward(int rows, int in, int out, const real *x, int x_stride, const real *W, const real *b,
                       real *y, int y_stride);

/* dx[r, 0:in] (=|+=) dy[r] . W;  dW += dy^T x;  db += sum_r dy[r].
 * dx, dW, db may each be NULL when not wanted. */
void st_linear_backward(int rows, int in, int out, const real *x, int x_stride, const real *W, const real *dy,
                        int dy_stride, real *dx, int dx_stride, int dx_accumulate, real *dW, real *db);

/* Row-major C[M,N] = alpha op(A) op(B) + beta C, with leading dimensions:
 * the one BLAS entry point of the CPU backend. */
void st_gemm(int trans_a, int trans_b, int M, int N, int Kd, real alpha, const real *A, int lda, const real *B,
             int ldb, real beta, real *C, int ldc);

#endif
