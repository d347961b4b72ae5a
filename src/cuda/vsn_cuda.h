/* vsn_cuda.h: the Variable Selection Network (model/vsn.h) on the GPU,
 * float32.
 *
 * Same arguments and semantics as st_vsn_forward / st_vsn_backward(_ex) of
 * the CPU op, with device pointers and a stream. Per row r: s [F] (row
 * stride s_stride), c [C] (c_stride); in the model both are views of one
 * window row (s = window, c = window + F, both with the window's stride
 * F+C): never assume s_stride == F.
 *     e_j = s_j embed_w[j] + embed_b[j];  alpha = softmax(GRN_sel(E, c));
 *     t_j = GRN_j(e_j);                   v = sum_j alpha_j t_j
 * The weights and gradients are st_vsn_weights_f32 / st_vsn_grads_f32 of
 * model/vsn.h (plain structs of float pointers) holding DEVICE pointers; the
 * structs themselves live on the host. Parameter gradients are added to
 * (+=, in a fixed order: bit-identical run to run); ds (may be NULL) is
 * written; dc (may be NULL) is written, or added to with dc_accumulate.
 *
 * `saved` (st_cuda_vsn_saved_count floats) is filled by the forward for the
 * backward; `work` (st_cuda_vsn_work_count floats) is scratch for both, and
 * nothing in it needs to survive from the forward to the backward: `saved`
 * keeps only the selection GRN's state and alpha (2 min(Dv, F) + 4F + 2
 * floats a row) and the backward recomputes the per-variable GRNs' [rows,
 * F*Dv] activations into `work` (vsn.cu). Both are device buffers.
 * `stream` is a cudaStream_t (NULL: default stream).
 * Returns ST_OK, ST_ERR_INPUT for bad sizes, or ST_ERR_DEVICE (message in
 * st_last_error()). Calls are asynchronous on the stream. */
#ifndef ST_VSN_CUDA_H
#define ST_VSN_CUDA_H

#include <stddef.h>

#include "cuda/vsn_train_table_cuda.h" /* st_vsn_bar_index */

/* Declared in model/vsn.h (in a float translation unit); named here by tag
 * so that this header does not depend on the includer's precision. */
struct st_vsn_weights_f32;
struct st_vsn_grads_f32;

/* The largest Dv the GPU kernels take (a warp holds a variable's Dv values
 * in registers, 8 a lane); the CPU op has no limit. */
#define ST_CUDA_VSN_MAX_DV 256

size_t st_cuda_vsn_saved_count(int rows, int F, int C, int Dv);
size_t st_cuda_vsn_work_count(int rows, int F, int C, int Dv);

/* v [rows, Dv] and alpha [rows, F] (alpha may be NULL). */
int st_cuda_vsn_forward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c, int c_stride,
                        const struct st_vsn_weights_f32 *w, float *v, int v_stride, float *alpha, int alpha_stride,
                        float *saved, float *work, void *stream);

/* The forward through a bar table (cuda/vsn_forward_fused_cuda.h): the
 * selection GRN as st_cuda_vsn_forward runs it, then v from the table's
 * t_j, tab_row [rows] naming each row's table row; the same v, alpha and
 * `saved` bits as st_cuda_vsn_forward where row r's s equals the s that
 * filled table row tab_row[r]. st_cuda_vsn_table_build fills tab
 * ([rows, F Dv] floats) from the s rows of `rows` bars with the current
 * weights; work: st_vsn_fold_count(F, Dv) floats or more. Both need
 * st_cuda_vsn_table_fits(F, Dv). */
int st_cuda_vsn_table_build(int rows, int F, int Dv, const float *s, int s_stride, const struct st_vsn_weights_f32 *w,
                            float *tab, float *work, void *stream);
int st_cuda_vsn_forward_table(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                              int c_stride, const struct st_vsn_weights_f32 *w, const float *tab, const int *tab_row,
                              float *v, int v_stride, float *alpha, int alpha_stride, float *saved, float *work,
                              void *stream);

/* The forward from a description of whole windows instead of their rows:
 * row r (window r / K) reads its s from feature row feat_row[r] of feat
 * (row stride feat_stride >= F, a market's features, device ints) and its
 * c from ctx row r / K (ctx_stride >= C): no [rows, F + C] window is read.
 * The selection GRN's ctx product is formed once a window ([rows / K, C] x
 * ctx_w^T) and added to each of its rows: the window forward's math,
 * within fp32 rounding of it (a cuBLAS product of another shape), not its
 * bits. tab: v from a bar table built from feat (row feat_row[r]), else
 * from the per-variable GRNs over the gathered s; the two give the same
 * bits (as st_cuda_vsn_forward_table and st_cuda_vsn_forward do). rows must
 * be a multiple of K. `saved` as st_cuda_vsn_forward's. */
int st_cuda_vsn_forward_rows(int rows, int K, int F, int C, int Dv, const float *feat, int feat_stride,
                             const int *feat_row, const float *ctx, int ctx_stride, const struct st_vsn_weights_f32 *w,
                             const float *tab, float *v, int v_stride, float *alpha, int alpha_stride, float *saved,
                             float *work, void *stream);

/* The training step's bar table (cuda/vsn_train_table_cuda.h; ix built
 * from the rows' bars by st_cuda_vsn_bar_index_build): the forward fills
 * tab [ix->cap, F Dv] for the minibatch's distinct bars (each from its
 * first row's s) and combines v per row from it; the same alpha and
 * `saved` as st_cuda_vsn_forward, v within fp32 rounding of it (the same
 * t_j expressions, not always the same bits: see the fused kernels). The
 * backward takes the forward's ix and tab (unchanged since) and adds the
 * same parameter gradients as st_cuda_vsn_backward_ex (to fp32 rounding:
 * the per-variable reductions run over bars, not rows) and dc; it forms
 * no snapshot gradient ds (the training step wants none). Both need
 * st_cuda_vsn_table_fits(F, Dv); the backward's dT and partials lie in
 * work's P-wide slots: st_cuda_vsn_train_table_work_fits(rows, F, Dv,
 * cap). */
int st_cuda_vsn_forward_train_table(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                    int c_stride, const struct st_vsn_weights_f32 *w, const st_vsn_bar_index *ix,
                                    float *tab, float *v, int v_stride, float *alpha, int alpha_stride, float *saved,
                                    float *work, void *stream);
int st_cuda_vsn_train_table_work_fits(int rows, int F, int Dv, int cap);
int st_cuda_vsn_backward_train_table(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                     int c_stride, const struct st_vsn_weights_f32 *w, const float *saved,
                                     const float *dv, int dv_stride, const float *dalpha, int dalpha_stride, float *dc,
                                     int dc_stride, int dc_accumulate, const struct st_vsn_grads_f32 *g,
                                     const st_vsn_bar_index *ix, const float *tab, float *work, void *stream);

int st_cuda_vsn_backward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c, int c_stride,
                         const struct st_vsn_weights_f32 *w, const float *saved, const float *dv, int dv_stride,
                         float *ds, int ds_stride, float *dc, int dc_stride, int dc_accumulate,
                         const struct st_vsn_grads_f32 *g, float *work, void *stream);

/* With a gradient dalpha [rows, F] for the alpha output as well (NULL: none). */
int st_cuda_vsn_backward_ex(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c, int c_stride,
                            const struct st_vsn_weights_f32 *w, const float *saved, const float *dv, int dv_stride,
                            const float *dalpha, int dalpha_stride, float *ds, int ds_stride, float *dc, int dc_stride,
                            int dc_accumulate, const struct st_vsn_grads_f32 *g, float *work, void *stream);

/* How the forward runs its per-variable GRNs and combine: as one
 * register-tiled kernel for Dv in {8, 16, 32} (model/vsn_forward_fused.cu)
 * with its tile picked by the row count (ST_CUDA_VSN_FUSED, the default)
 * or forced (_SMALL: 128-thread blocks, _LARGE: 256; the same bits, for
 * tests), or as the cuBLAS products and element-wise kernels that the
 * backward recomputes the activations with (ST_CUDA_VSN_UNFUSED; every
 * other Dv always). v within fp32 rounding either way; tests check all.
 * (In bf16 mode the fused kernel's products run on the tensor cores at Dv
 * 16 and 32, st_cuda_vsn_set_fused_tc in cuda/vsn_forward_fused_cuda.h:
 * v within bf16 rounding there.) Process-wide, read when a forward is enqueued (a captured graph keeps
 * the path it was captured with). */
#define ST_CUDA_VSN_UNFUSED 0
#define ST_CUDA_VSN_FUSED 1
#define ST_CUDA_VSN_FUSED_SMALL 2
#define ST_CUDA_VSN_FUSED_LARGE 3
void st_cuda_vsn_set_fused(int mode);

/* Whether the backward's gate, norm and softmax kernels (the recomputed
 * gates and statistics, their backward, dalpha) give each (row, variable)
 * a group of Dv/4 lanes holding 4 values each (1, the default, where Dv %
 * 4 == 0, Dv <= 32 and `work` is 16-byte aligned) or a warp (0; every
 * other Dv). The same results up to the order of their double sums; tests
 * check both. Process-wide. */
void st_cuda_vsn_set_gate_lanes(int on);

/* The lanes a (row, variable) group of those kernels for these sizes under
 * the current setting (1, 2, 4 or 8), 0 where a warp takes each: what a
 * backward with a 16-byte-aligned `work` runs (tests ask which path they
 * cover). */
int st_cuda_vsn_gate_group(int rows, int F, int Dv);

#endif
