/* grouped_dw_cuda.h: the weight gradients of F stacked linears in one
 * launch (model/grouped_dw.cu), for the VSN's per-variable GRNs:
 *     dW[g] += dy_g^T x_g,   g < groups,   dW[g] [out, in] contiguous,
 * dy_g = dy + g dy_goff (rows x out, row stride dy_stride) and
 * x_g = x + g x_goff (rows x in, row stride x_stride), summed over `rows`.
 * A cuBLAS product per group runs a split-K kernel and its reduction for a
 * 32 x 64 result over 131,072 rows (2 x 40 of each a training step at the
 * default preset: 2.4 ms of 44.5, bench/NOTES.md); here one launch covers
 * every group and row split. Deterministic: float sums within a row split
 * (st_rowsplit_range), the splits added in double in split order; the
 * order depends on rows only. In the fp32 precision mode, shapes with
 * out * in <= 2,048, out % 4 == 0 and in % 2 == 0 take the kernel; other
 * shapes, and every shape in bf16 mode (where cuBLAS's tensor-core
 * products are faster at 8,192 windows), a cuBLAS product per group
 * (st_cuda_gemm, the matrix-product precision). */
#ifndef ST_GROUPED_DW_CUDA_H
#define ST_GROUPED_DW_CUDA_H

int st_cuda_grouped_dw(int rows, int groups, int in, int out, const float *dy, int dy_stride, long dy_goff,
                       const float *x, int x_stride, long x_goff, float *dW, void *stream);

/* 1: the kernel where the shape fits (the default); 0: always the cuBLAS
 * products (the test compares the two). */
void st_cuda_grouped_dw_set_kernel(int on);

#endif
