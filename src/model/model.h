/* model.h: the whole encoder and heads of DESIGN section 5, on the CPU.
 *
 *   window X [n, K, F+C] (row stride x_stride >= F+C)
 *   -> VSN over s = X[:, :, 0:F] with context c = X[:, :, F:F+C]   -> v [rows, Dv]
 *   -> u0 = w_in([v; c])                                           [rows, D]
 *   -> u_{l+1} = Mamba2 block l (u_l), l = 0..L-1
 *   -> heads on ln_f(u_L[row K-1]) and c[row K-1]: logits [n, A], value [n]
 * Parameters and gradients live in caller-owned flat buffers laid out by the
 * parameter table (params.h); activations live in one arena owned here,
 * sized for up to max_windows windows. */
#ifndef ST_MODEL_H
#define ST_MODEL_H

#include <stddef.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/real.h"
#include "model/heads.h"
#include "model/mamba2.h"
#include "model/params.h"
#include "model/vsn.h"

#define st_model ST_R(st_model)
#define st_model_init ST_R(st_model_init)
#define st_model_free ST_R(st_model_free)
#define st_model_bind ST_R(st_model_bind)
#define st_model_forward ST_R(st_model_forward)
#define st_model_backward ST_R(st_model_backward)

typedef struct {
    st_dims d;
    int max_windows;
    const st_param_table *table;
    real *w, *g; /* flat parameters and gradients (not owned) */
    /* views into w and g */
    st_vsn_weights vsn_w;
    st_vsn_grads vsn_g;
    const real *w_in_w, *w_in_b;
    real *g_w_in_w, *g_w_in_b;
    st_mamba2_weights *mix_w; /* [L] */
    st_mamba2_grads *mix_g;   /* [L] */
    st_heads_weights heads_w;
    st_heads_grads heads_g;
    /* activations of the last forward (one arena) */
    st_arena arena;
    int n;             /* windows of the last forward */
    const real *x;     /* its input window */
    int x_stride;
    real *vsn_v;       /* [rows, Dv] VSN output */
    real *vsn_alpha;   /* [rows, F] selection weights */
    real *vsn_saved;
    real *vc;          /* [rows, Dv+C] input of w_in */
    real **u;          /* [L+1] each [rows, D] */
    real **mix_saved;  /* [L] */
    real *heads_saved;
    /* backward scratch */
    real *du_a, *du_b; /* [rows, D] */
    real *dvc;         /* [rows, Dv+C] */
    real *dc_rows;     /* [rows, C] context gradient when the caller wants no dX */
    real *dc_head;     /* [n, C] */
    real *work;
} st_model;

#define st_model_activation_bytes ST_R(st_model_activation_bytes)
/* Bytes of the activation arena for up to max_windows windows. */
size_t st_model_activation_bytes(const st_dims *d, int max_windows);

/* Lays out the activations for up to max_windows windows and binds w, g. */
int st_model_init(st_model *m, const st_dims *d, const st_param_table *t, int max_windows, real *w, real *g);
void st_model_free(st_model *m);
/* Points the model at other parameter/gradient buffers of the same layout. */
void st_model_bind(st_model *m, real *w, real *g);

/* Forward over n <= max_windows windows; logits [n, A] (stride logits_stride), value [n].
 * X must stay unchanged until the matching backward. */
void st_model_forward(st_model *m, int n, const real *X, int x_stride, real *logits, int logits_stride, real *value);

/* Backward of the last forward: parameter gradients are added to m->g;
 * dX (the window's gradient, same shape as X, may be NULL) is written. */
void st_model_backward(st_model *m, const real *dlogits, int dlogits_stride, const real *dvalue, real *dX,
                       int dx_stride);

#endif
