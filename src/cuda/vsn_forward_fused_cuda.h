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

/* The bar table: the same kernel's t_j, not combined. The per-variable
 * GRNs read s[r, j] alone, so in a rollout (weights fixed for T steps,
 * each window K rows of bars that earlier windows held too) t_j can be
 * formed once a bar and combined per row with that row's alpha:
 *   st_cuda_vsn_table_fill    tab[r, j Dv + c] = t_j[c] of s row r (rows
 *                             x F Dv floats, contiguous), with the folds fo
 *                             of the current weights;
 *   st_cuda_vsn_table_combine v[r] = sum_j alpha[r, j] tab[tab_row[r], j]
 *                             over j in order in double, rounded once:
 *                             the combine of st_cuda_vsn_forward_fused,
 *                             so v has its bits (the same t_j, the same
 *                             sum) where s row r of the forward equals
 *                             table row tab_row[r].
 * st_cuda_vsn_table_fits: 1 when fill can run (Dv 8, 16 or 32 and the
 * fused kernel not switched off). */
int st_cuda_vsn_table_fits(int F, int Dv);
int st_cuda_vsn_table_fill(int rows, int F, int Dv, const float *s, int s_stride, const struct st_vsn_weights_f32 *w,
                           const st_vsn_fold *fo, float *tab, void *stream);
/* The training step's table (cuda/vsn_train_table_cuda.h): table row b <
 * min(cap, *nrows) (nrows a device int: the distinct bars of a minibatch,
 * unknown on the host when a graph is captured) from s row src_rows[b];
 * the grid is sized for cap, blocks past the count return at once. The
 * same t_j bits as st_cuda_vsn_table_fill of those s rows. */
int st_cuda_vsn_table_fill_rows(int cap, const int *nrows, const int *src_rows, int F, int Dv, const float *s,
                                int s_stride, const struct st_vsn_weights_f32 *w, const st_vsn_fold *fo, float *tab,
                                void *stream);
int st_cuda_vsn_table_combine(int rows, int F, int Dv, const float *alpha, int alpha_stride, const float *tab,
                              const int *tab_row, float *v, int v_stride, void *stream);

/* The products on the tensor cores (model/vsn_forward_fused_tc.cu): in the
 * bf16 matmul precision (cuda/linear_cuda.h, read when a call is enqueued)
 * st_cuda_vsn_forward_fused and both table fills run a variant of the
 * fused kernel whose two per-variable products are bf16 mma.sync with
 * fp32 accumulators (cuBLAS's own bf16 rounding of the operands; t within
 * ~3e-3 of the fp32 kernel's), the rest as before. Both paths take it
 * together, so the table and the one-pass forward keep each other's bits.
 *   st_cuda_vsn_set_fused_tc    1 (the default): the variant where it
 *                               takes; 0: the fp32 kernel in both
 *                               precisions. Process-wide, not
 *                               synchronised: set it between steps.
 *   st_cuda_vsn_fused_tc_takes  1 when a fused call with this Dv would run
 *                               the variant now: bf16 mode, the switch on
 *                               and Dv 16 or 32 (Dv 8 keeps the fp32
 *                               kernel). */
void st_cuda_vsn_set_fused_tc(int on);
int st_cuda_vsn_fused_tc_takes(int Dv);

/* The bar table's fill in bf16 mode (model/vsn_table_fill_tc.cu), where
 * st_cuda_vsn_fused_tc_takes(Dv): 1 (the default), a block per (variable,
 * row split) holding the variable's weights as bf16 fragments; 0, the
 * tensor-core kernel's table mode (a block per rows, walking the
 * variables). The same t bits either way. Process-wide, not
 * synchronised: set it between steps. */
void st_cuda_vsn_set_table_fill_j(int on);

#ifdef __cplusplus
}
#endif

#endif
