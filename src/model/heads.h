/* heads.h: final LayerNorm, policy head and value head (DESIGN section 5).
 *
 *   h = ln_f(u[row K-1])      [n, D]   (only the last row of each window)
 *   g = [h; c]                [n, D+C]
 *   logits = pi2(tanh(pi1(g)))  [n, A]
 *   value  = v2(tanh(v1(g)))    [n]
 * u_last and c point at the last row of the first window; their row strides
 * step from window to window (K rows of the window buffer). */
#ifndef ST_HEADS_H
#define ST_HEADS_H

#include <stddef.h>

#include "core/real.h"

#define st_heads_weights ST_R(st_heads_weights)
#define st_heads_grads ST_R(st_heads_grads)
#define st_heads_saved_count ST_R(st_heads_saved_count)
#define st_heads_work_count ST_R(st_heads_work_count)
#define st_heads_forward ST_R(st_heads_forward)
#define st_heads_backward ST_R(st_heads_backward)

typedef struct {
    const real *ln_w, *ln_b, *pi1_w, *pi1_b, *pi2_w, *pi2_b, *v1_w, *v1_b, *v2_w, *v2_b;
} st_heads_weights;
typedef struct {
    real *ln_w, *ln_b, *pi1_w, *pi1_b, *pi2_w, *pi2_b, *v1_w, *v1_b, *v2_w, *v2_b;
} st_heads_grads;

/* Reals the forward saves for the backward / scratch of the backward. */
size_t st_heads_saved_count(int n, int D, int C, int Hh);
size_t st_heads_work_count(int n, int D, int C, int Hh);

void st_heads_forward(int n, int D, int C, int Hh, int A, const real *u_last, int u_stride, const real *c,
                      int c_stride, const st_heads_weights *w, real *logits, int logits_stride, real *value,
                      real *saved);

/* du_last and dc are written (rows with the same strides as the inputs'
 * gradients); dc is added to when dc_accumulate is set. Parameter grads +=. */
void st_heads_backward(int n, int D, int C, int Hh, int A, const real *u_last, int u_stride,
                       const st_heads_weights *w, const real *saved, const real *dlogits, int dlogits_stride,
                       const real *dvalue, real *du_last, int du_stride, real *dc, int dc_stride, int dc_accumulate,
                       st_heads_grads *g, real *work);

#endif
