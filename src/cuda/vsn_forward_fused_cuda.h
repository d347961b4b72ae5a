/* vsn_forward_fused_cuda.h: the GPU VSN forward's per-variable GRNs and
 * combine as one register-tiled kernel (model/vsn_forward_fused.cu), for
 * model/vsn.cu's st_cuda_vsn_forward:
 *     v[r] = sum_j alpha[r, j] LN_j(e_j + g1 sigma(g2)),
 *     [g1; g2] = Wg_j W2_j ELU(s[r, j] U_j + V_j) + Vg_j,  e_j = s[r, j] ew_j + eb_j
 * with the folds U, V, Vg of cuda/vsn_fold_cuda.h. s [rows, F] (row stride
 * s_stride), alpha [rows, F] (alpha_stride), v [rows, Dv] (v_stride);
 * device pointers. *taken = 1 when it enqueued the product; 0 (nothing
 * enqueued) when Dv is not one it is built for (8, 16, 32) or
 * st_cuda_vsn_set_fused(0) turned it off, and the caller runs the
 * unfused sequence. */
#ifndef ST_VSN_FORWARD_FUSED_CUDA_H
#define ST_VSN_FORWARD_FUSED_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "cuda/vsn_fold_cuda.h" /* st_vsn_fold (a C header without its own extern "C") */

struct st_vsn_weights_f32;

int st_cuda_vsn_forward_fused(int rows, int F, int Dv, const float *s, int s_stride, const float *alpha,
                              int alpha_stride, const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo, float *v,
                              int v_stride, void *stream, int *taken);

#ifdef __cplusplus
}
#endif

#endif
