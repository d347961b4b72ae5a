/* rmsnorm_gated_cuda.h: the gated RMSNorm closing the Mamba2 mixer on the GPU,
 * float32 (the CUDA twin of model/rmsnorm_gated.h, DESIGN section 5):
 *
 *   g = y SiLU(z);  rstd = 1/sqrt(mean_i g_i^2 + eps);  out = g rstd w
 *   backward: ghat = g rstd; dg = rstd (dout w - ghat mean(dout w ghat));
 *             dy = dg SiLU(z);  dz = dg y SiLU'(z);  dw += sum_r dout ghat
 * y, z, out, dout, dy, dz [rows, n], each with its own row stride (z is
 * typically a column slice of the in_proj output row); w, dw [n]; rstd
 * [rows]. Device pointers; stream a cudaStream_t (NULL: default). One warp
 * per row with row sums in double, dw summed over rows in a fixed order
 * (bit-identical from run to run, and whether or not the buffers allow
 * 16-byte loads). dw's partial sums use linear_cuda.h's row-split scratch
 * (its rules hold: one uncaptured call first, one reduction at a time per
 * device). Returns ST_OK or ST_ERR_DEVICE. */
#ifndef ST_RMSNORM_GATED_CUDA_H
#define ST_RMSNORM_GATED_CUDA_H

/* out[r, 0:n] as above; rstd[r] written when not NULL. */
int st_cuda_rmsnorm_gated_forward(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                  const float *w, float eps, float *out, int out_stride, float *rstd, void *stream);

/* rstd is the forward's. dy, dz written; dw added to (may be NULL). */
int st_cuda_rmsnorm_gated_backward(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                   const float *w, const float *rstd, const float *dout, int dout_stride, float *dy,
                                   int dy_stride, float *dz, int dz_stride, float *dw, void *stream);

/* The same with rstd[r * rstd_stride] (>= 1): a strided view of rows,
 * e.g. the last row of each window (rows n, strides K times the widths and
 * K for rstd), keeps rstd at its rows' natural positions. */
int st_cuda_rmsnorm_gated_forward_rs(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                     const float *w, float eps, float *out, int out_stride, float *rstd,
                                     int rstd_stride, void *stream);
int st_cuda_rmsnorm_gated_backward_rs(int rows, int n, const float *y, int y_stride, const float *z, int z_stride,
                                      const float *w, const float *rstd, int rstd_stride, const float *dout,
                                      int dout_stride, float *dy, int dy_stride, float *dz, int dz_stride, float *dw,
                                      void *stream);

#endif
