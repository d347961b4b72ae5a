/* layernorm_cuda.h: LayerNorm over the first n values of each row on the GPU,
 * float32 (the CUDA twin of model/layernorm.h; DESIGN eps = 1e-5).
 *
 *   xhat = (x - mean) rstd,  rstd = 1/sqrt(var + eps) (biased var);  y = xhat w + b
 *   backward: dxhat = dy w;  dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));
 *             dw += sum_r dy xhat;  db += sum_r dy
 * x, y, dy, dx [rows, n] with their own row strides; w, b, dw, db [n];
 * mean, rstd [rows]. Device pointers; stream a cudaStream_t (NULL: default).
 * One warp per row, statistics in double as on the CPU; dw/db summed over
 * rows in a fixed order (bit-identical from run to run). Returns ST_OK or
 * ST_ERR_DEVICE; nothing synchronises. */
#ifndef ST_LAYERNORM_CUDA_H
#define ST_LAYERNORM_CUDA_H

/* y = LN(x) w + b; mean[r], rstd[r] written when not NULL. */
int st_cuda_layernorm_forward(int rows, int n, const float *x, int x_stride, const float *w, const float *b, float eps,
                              float *y, int y_stride, float *mean, float *rstd, void *stream);

/* dx (=|+=, dx_accumulate) as above, skipped when dx is NULL; dw, db added
 * to (either may be NULL). mean and rstd are the forward's. */
int st_cuda_layernorm_backward(int rows, int n, const float *x, int x_stride, const float *w, const float *mean,
                               const float *rstd, const float *dy, int dy_stride, float *dx, int dx_stride,
                               int dx_accumulate, float *dw, float *db, void *stream);

/* A residual block's copy in the same pass (no kernel of its own): _res
 * is st_cuda_layernorm_backward with dx = res + LN'(dy), res [rows, n]
 * with its own stride (res may be dx itself with dx's stride: the
 * accumulating form; else it must not overlap dx). It gives the bits of
 * the copy followed by the plain call. (The forward's copy of u for the
 * residual is gone: out_proj reads u as its C, linear_cuda.h's
 * st_cuda_linear_forward_res.) */
int st_cuda_layernorm_backward_res(int rows, int n, const float *x, int x_stride, const float *w, const float *mean,
                                   const float *rstd, const float *dy, int dy_stride, const float *res, int res_stride,
                                   float *dx, int dx_stride, float *dw, float *db, void *stream);

/* 1 (the default): where dx and dw or db are wanted and n <= 128, one
 * kernel reads the rows once for dx and the parameter sums (their last
 * blocks adding the row splits: deterministic, an order of its own, so dw
 * and db may differ in the last bit from the other way's); 0: the dx
 * kernel, then the parameter-sum kernel reading x and dy again. dx's bits
 * are the same either way. */
void st_cuda_layernorm_set_fused_grad(int on);

#endif
