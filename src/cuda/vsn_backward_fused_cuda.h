/* vsn_backward_fused_cuda.h: the GPU VSN backward's per-variable GRNs as
 * one register-tiled kernel (model/vsn_backward_fused.cu), for
 * model/vsn.cu's st_cuda_vsn_backward_ex. From s, alpha, dv (and dalpha)
 * it recomputes each variable's GRN and forms, without any [rows, F Dv]
 * buffer:
 *   dlog [rows, F]   the softmax backward's logits gradient (row stride F);
 *   g                var_glu_w, var_fc2_w, var_fc2_b, var_ln_w += their
 *                    gradients over all rows (var_ln_b and the folded
 *                    parts are not touched: the caller adds ln_b's
 *                    product and st_cuda_vsn_fold_backward the rest);
 *   fr               gg, Q, Sx, q, X += their row sums (cuda/vsn_fold_cuda.h;
 *                    zeroed by the caller first);
 *   and, when want_ds, each (row, variable)'s own part of ds, which
 *   st_cuda_vsn_backward_fused_ds completes with the selection GRN's
 *   terms once sel_backward has made dh1s and dxs.
 * scratch (scratch_floats floats, 8-byte aligned, device; the backward's
 * P-wide slots of `work`) holds the kernel's per-row doubles and per-block
 * partials until the finish; the ds part stays there for
 * st_cuda_vsn_backward_fused_ds. *taken = 1 when it enqueued the work; 0
 * (nothing enqueued) when Dv is not 8, 16 or 32, the switch is off, or
 * scratch is too small or misaligned, and the caller runs the unfused
 * sequence. Every pointer is a device pointer. */
#ifndef ST_VSN_BACKWARD_FUSED_CUDA_H
#define ST_VSN_BACKWARD_FUSED_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

#include "cuda/vsn_fold_cuda.h" /* st_vsn_fold, st_vsn_fold_grads */

struct st_vsn_weights_f32;
struct st_vsn_grads_f32;

int st_cuda_vsn_backward_fused(int rows, int F, int Dv, const float *s, int s_stride, const float *alpha,
                               int alpha_stride, const float *dv, int dv_stride, const float *dalpha,
                               int dalpha_stride, const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo,
                               const st_vsn_fold_grads *fr, const struct st_vsn_grads_f32 *g, float *dlog,
                               int want_ds, float *scratch, size_t scratch_floats, void *stream, int *taken);

/* ds[r, j] = the kernel's part (dx_j . ew_j + dh1_j . U_j, in scratch)
 * + dh1s[r] . T1[:, j] + dxs[r] . Tk[:, j] (dh1s [rows, Hs], dxs [rows,
 * F], contiguous): st_cuda_vsn_fold_ds's sum. Only after a
 * st_cuda_vsn_backward_fused call that took the work with want_ds, with
 * the same rows, F, Dv and scratch. */
int st_cuda_vsn_backward_fused_ds(int rows, int F, int Dv, const st_vsn_fold *fo, const float *scratch,
                                  const float *dh1s, const float *dxs, float *ds, int ds_stride, void *stream);

/* The training step's bar table (cuda/vsn_train_table_cuda.h): the same
 * kernel over table rows b < min(cap, *nrows) (nrows a device int), row
 * b's s at s row src_rows[b], with dT [cap, F Dv] (contiguous) as t_j's
 * upstream gradient in place of alpha_j dv (alpha = 1, no dalpha, no ds
 * part): adds var_glu_w, var_fc2_w, var_fc2_b, var_ln_w (g) and gg, Q,
 * Sx, q, X (fr) over the table rows, as st_cuda_vsn_backward_fused does
 * over window rows. parts: 8-byte aligned device scratch of
 * st_cuda_vsn_backward_fused_table_doubles(cap, F, Dv) doubles or more.
 * Dv 8, 16 or 32 (not subject to st_cuda_vsn_set_fused_backward). */
size_t st_cuda_vsn_backward_fused_table_doubles(int cap, int F, int Dv);
int st_cuda_vsn_backward_fused_table(int cap, const int *nrows, const int *src_rows, int F, int Dv, const float *s,
                                     int s_stride, const float *dT, const struct st_vsn_weights_f32 *w,
                                     const st_vsn_fold *fo, const st_vsn_fold_grads *fr,
                                     const struct st_vsn_grads_f32 *g, double *parts, size_t parts_doubles,
                                     void *stream);

/* dlog [rows, F] (row stride F) = the softmax backward from dad [F][rows]
 * doubles (dalpha_j of each row) and alpha: the fused backward's last
 * step, for a caller that formed dad itself (the training bar table). */
int st_cuda_vsn_backward_fused_dlog(int rows, int F, const double *dad, const float *alpha, int alpha_stride,
                                    float *dlog, void *stream);

/* 1 when st_cuda_vsn_backward_fused takes these sizes with scratch_floats
 * floats of aligned scratch under the current switch (tests ask which
 * path they cover). */
int st_cuda_vsn_backward_fused_fits(int rows, int F, int Dv, size_t scratch_floats);

/* 1 (the default): the backward runs the fused kernel where it fits; 0:
 * the unfused sequence always (the test compares the two). Process-wide,
 * read when a backward is enqueued. */
void st_cuda_vsn_set_fused_backward(int on);

/* In bf16 mode (st_cuda_matmul_precision() == ST_MATMUL_BF16) at Dv 16 or
 * 32, both calls above (window rows and the bar table) may run the
 * kernel's products on the tensor cores (model/vsn_backward_fused_tc.cu:
 * bf16 operands, fp32 accumulation, the same outputs' layout and the same
 * finishing kernels). 1 (the default): where st_cuda_vsn_backward_fused_tc_takes(Dv);
 * 0: the fp32 kernel always. Process-wide, read when a
 * backward is enqueued. */
void st_cuda_vsn_set_fused_backward_tc(int on);

/* 1 (the default): that kernel adds a tile's column sums of ln_w, X, Sx,
 * q and Q in fp32 (double across tiles), as it does gg and fc2_b's (half
 * its shuffles: 855 -> 774 us a call at 2,048 windows); 0: double
 * throughout. Process-wide, read when a backward is enqueued. */
void st_cuda_vsn_set_fused_backward_tc_fsum(int on);

/* 1 when the fused backward at this Dv runs the tensor-core kernel under
 * the current precision and switch. */
int st_cuda_vsn_backward_fused_tc_takes(int Dv);

#ifdef __cplusplus
}
#endif

#endif
