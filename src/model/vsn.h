/* vsn.h: the Variable Selection Network (TFT style) of DESIGN section 5.
 *
 * Per row r: s = snapshot [F], c = context [C] (in the model both are views
 * of one window row, so each comes with its own pointer and row stride).
 *     e_j   = s_j * embed_w[j] + embed_b[j]                 [Dv] each, E = concat_j e_j [F*Dv]
 *     alpha = softmax(GRN_sel(E, c))                        [F]   (max subtracted)
 *     t_j   = GRN_j(e_j)                                    [Dv]
 *     v     = sum_j alpha_j t_j                             [Dv]
 * GRN(a, c): h = ELU(fc1(a) + ctx(c)); h = fc2(h); [g1; g2] = glu(h);
 *            out = LayerNorm(skip(a) + g1 * sigmoid(g2))   (eps 1e-5)
 * GRN_sel: input F*Dv, hidden Hs = min(Dv, F), output F, linear skip.
 * GRN_j:   Dv -> Dv -> Dv, no context, identity skip, weights stacked over j.
 * Weight shapes (row-major [out, in]) are in the struct below.
 *
 * The forward saves st_vsn_saved_count() reals for the backward; both use
 * st_vsn_work_count() reals of scratch. The backward writes ds (if not NULL)
 * and dc (or adds to dc when dc_accumulate is set; the gradient reaches c
 * only through sel.ctx) and adds to every parameter gradient. */
#ifndef ST_VSN_H
#define ST_VSN_H

#include <stddef.h>

#include "core/real.h"

#define st_vsn_weights ST_R(st_vsn_weights)
#define st_vsn_grads ST_R(st_vsn_grads)
#define st_vsn_saved_count ST_R(st_vsn_saved_count)
#define st_vsn_work_count ST_R(st_vsn_work_count)
#define st_vsn_forward ST_R(st_vsn_forward)
#define st_vsn_backward ST_R(st_vsn_backward)
#define st_vsn_backward_ex ST_R(st_vsn_backward_ex)

/* P = F*Dv, Hs = min(Dv, F). */
typedef struct st_vsn_weights {
    const real *embed_w, *embed_b;       /* [F, Dv], [F, Dv] */
    const real *sel_skip_w, *sel_skip_b; /* [F, P], [F] */
    const real *sel_fc1_w, *sel_fc1_b;   /* [Hs, P], [Hs] */
    const real *sel_ctx_w;               /* [Hs, C] (no bias) */
    const real *sel_fc2_w, *sel_fc2_b;   /* [Hs, Hs], [Hs] */
    const real *sel_glu_w, *sel_glu_b;   /* [2F, Hs], [2F] */
    const real *sel_norm_w, *sel_norm_b; /* [F], [F] */
    const real *var_fc1_w, *var_fc1_b;   /* [F, Dv, Dv], [F, Dv] */
    const real *var_fc2_w, *var_fc2_b;   /* [F, Dv, Dv], [F, Dv] */
    const real *var_glu_w, *var_glu_b;   /* [F, 2Dv, Dv], [F, 2Dv] */
    const real *var_ln_w, *var_ln_b;     /* [F, Dv], [F, Dv] */
} st_vsn_weights;

/* Parameter gradients, same names and shapes; always added to (+=). */
typedef struct st_vsn_grads {
    real *embed_w, *embed_b;
    real *sel_skip_w, *sel_skip_b, *sel_fc1_w, *sel_fc1_b, *sel_ctx_w, *sel_fc2_w, *sel_fc2_b, *sel_glu_w, *sel_glu_b,
        *sel_norm_w, *sel_norm_b;
    real *var_fc1_w, *var_fc1_b, *var_fc2_w, *var_fc2_b, *var_glu_w, *var_glu_b, *var_ln_w, *var_ln_b;
} st_vsn_grads;

/* Reals the forward saves for the backward. */
size_t st_vsn_saved_count(int rows, int F, int C, int Dv);
/* Reals of scratch used by the forward and the backward. */
size_t st_vsn_work_count(int rows, int F, int C, int Dv);

/* v [rows, Dv] and alpha [rows, F] (alpha may be NULL) from s [rows, F] and
 * c [rows, C]; fills saved. */
void st_vsn_forward(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c, int c_stride,
                    const st_vsn_weights *w, real *v, int v_stride, real *alpha, int alpha_stride, real *saved,
                    real *work);

/* Gradients for dv [rows, Dv]; s, c, w and saved as given to the forward.
 * ds may be NULL; dc may be NULL. */
void st_vsn_backward(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c, int c_stride,
                     const st_vsn_weights *w, const real *saved, const real *dv, int dv_stride, real *ds, int ds_stride,
                     real *dc, int dc_stride, int dc_accumulate, st_vsn_grads *g, real *work);

/* The same with a gradient dalpha [rows, F] for the alpha output as well
 * (NULL: none, which is st_vsn_backward). For losses on the selection
 * weights themselves (and for checking that output's gradient). */
void st_vsn_backward_ex(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c, int c_stride,
                        const st_vsn_weights *w, const real *saved, const real *dv, int dv_stride, const real *dalpha,
                        int dalpha_stride, real *ds, int ds_stride, real *dc, int dc_stride, int dc_accumulate,
                        st_vsn_grads *g, real *work);

#endif
