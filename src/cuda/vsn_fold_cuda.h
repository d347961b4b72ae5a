/* vsn_fold_cuda.h: the VSN's embedding folded into the linears that read
 * it (model/vsn_fold.cu), for the GPU VSN (model/vsn.cu).
 *
 * The embedding is affine in each scalar input, e_j = s_j ew_j + eb_j
 * (DESIGN section 5), and three linears read E = [e_1 .. e_F] directly:
 * the per-variable fc1 (Dv -> Dv), the selection GRN's fc1 (P -> Hs) and
 * its skip (P -> F). Each is then a linear map of s itself:
 *     fc1_j(e_j)  = s_j U_j + V_j,   U_j = W1_j ew_j,  V_j = W1_j eb_j + b1_j
 *     sel_fc1(E)  = s T1 + c1,       T1[j, h] = Wsel1[h, j] . ew_j,  c1 = Wsel1 eb + bsel1
 *     sel_skip(E) = s Tk + ck        (the same with the skip's weights)
 * and fc2's bias moves into the glu's, glu_j(h2_j + b2_j) = Wg_j h2_j + Vg_j
 * with Vg_j = Wg_j b2_j + bg_j (its dW then gains colsum(dgl_j) b2_j^T).
 * So the forward never materialises E [rows, P]: the per-variable fc1 is a
 * rank-one update and an ELU, the selection GRN's two products have F
 * inputs instead of P. The backward's parameter gradients of those linears
 * and of the embedding reduce likewise to column sums over the rows of
 * products with s (G = s^T dh1s, Q = sum_r s_j dh1_j, ...; st_vsn_fold_grads)
 * followed by small products with the weights (st_cuda_vsn_fold_backward);
 * no dE [rows, P] either. The math is the CPU op's (model/vsn.c)
 * reassociated: within float rounding of it, not its bits.
 *
 * Every pointer is a device pointer; sizes: P = F Dv, Hs = min(Dv, F). */
#ifndef ST_VSN_FOLD_CUDA_H
#define ST_VSN_FOLD_CUDA_H

#include <stddef.h>

struct st_vsn_weights_f32;
struct st_vsn_grads_f32;

/* The folded weights (made from the weights each step). */
typedef struct {
    float *U, *V;   /* [F, Dv] each */
    float *T1, *c1; /* [Hs, F] (as a linear's [out, in]), [Hs] */
    float *Tk, *ck; /* [F, F], [F] */
    float *Vg;      /* [F, 2Dv]: the glu's bias with fc2's folded in */
} st_vsn_fold;

/* The backward's row reductions, all zeroed by st_cuda_vsn_fold_grads_zero
 * and added to (G and Gk are written by a product):
 *   G  [F, Hs]  sum_r s[r, j] dh1s[r, h]      gs [Hs]  sum_r dh1s[r, h]
 *   Gk [F, F]   sum_r s[r, j] dxs[r, i]       gk [F]   sum_r dxs[r, i]
 *   Q  [P]      sum_r s_j dh1[r, jk]          q  [P]   sum_r dh1[r, jk]
 *   Sx [P]      sum_r s_j dx[r, jk]           X  [P]   sum_r dx[r, jk]
 *   gg [2P]     sum_r dgl[r, :] (the glu's output gradient)
 * with dh1s the selection fc1's output gradient (after the ELU), dxs its
 * skip's, dh1 the per-variable fc1's and dx their identity skips'. Q and
 * Sx are adjacent (one column sum over [rows, 2P] fills both). */
typedef struct {
    float *G, *gs, *Gk, *gk, *Q, *Sx, *q, *X, *gg;
} st_vsn_fold_grads;

/* Floats of st_vsn_fold and of st_vsn_fold_grads, and their carving out of
 * one buffer (base may be NULL to count). */
size_t st_vsn_fold_count(int F, int Dv);
size_t st_vsn_fold_grads_count(int F, int Dv);
st_vsn_fold st_vsn_fold_at(float *base, int F, int Dv);
st_vsn_fold_grads st_vsn_fold_grads_at(float *base, int F, int Dv);

/* f from the weights (double sums, fixed order: the same bits each call). */
int st_cuda_vsn_fold(int F, int Dv, const struct st_vsn_weights_f32 *w, const st_vsn_fold *f, void *stream);

int st_cuda_vsn_fold_grads_zero(int F, int Dv, const st_vsn_fold_grads *r, void *stream);

/* out[r, jk] = act(s[r, j] U[jk] + V[jk]) over [rows, P] (act: ELU when
 * elu, else the identity): the per-variable fc1 (and its recomputation). */
int st_cuda_vsn_rank1(int rows, int F, int Dv, const float *s, int s_stride, const float *U, const float *V, int elu,
                      float *out, int out_stride, void *stream);

/* out[r, jk] = s[r, j] a[r, jk], out[r, P + jk] = s[r, j] b[r, jk]: the
 * terms of Q and Sx ([rows, 2P], row stride 2P). */
int st_cuda_vsn_scale2(int rows, int F, int Dv, const float *s, int s_stride, const float *a, int a_stride,
                       const float *b, int b_stride, float *out, void *stream);

/* g += the gradients of embed_w, embed_b, sel_fc1_w, sel_fc1_b,
 * sel_skip_w, sel_skip_b, var_fc1_w and var_fc1_b from the reductions r,
 * and the folded parts of var_glu_w and var_glu_b (gg b2^T, gg). */
int st_cuda_vsn_fold_backward(int F, int Dv, const struct st_vsn_weights_f32 *w, const st_vsn_fold_grads *r,
                              const struct st_vsn_grads_f32 *g, void *stream);

/* ds[r, j] = the gradient of s_j: dx_j . ew_j + dh1_j . U_j + dh1s . T1[:, j]
 * + dxs . Tk[:, j] (dx, dh1 [rows, P] at row stride P, dh1s [rows, Hs],
 * dxs [rows, F], both contiguous). */
int st_cuda_vsn_fold_ds(int rows, int F, int Dv, const struct st_vsn_weights_f32 *w, const st_vsn_fold *f,
                        const float *dx, const float *dh1, const float *dh1s, const float *dxs, float *ds,
                        int ds_stride, void *stream);

#endif
