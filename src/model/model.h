/* model.h: the whole encoder and heads of DESIGN section 5, on the CPU.
 *
 *   window X [n, K, F+C] (row stride x_stride >= F+C)
 *   -> VSN over s = X[:, :, 0:F] with context c = X[:, :, F:F+C]   -> v [rows, Dv]
 *   -> u0 = w_in([v; c])                                           [rows, D]
 *   -> u_{l+1} = Mamba2 block l (u_l), l = 0..L-1
 *   -> heads on ln_f(u_L[row K-1]) and c[row K-1]: logits [n, A], value [n]
 * Parameters and gradients live in caller-owned flat buffers laid out by the
 * parameter table (params.h); activations live in one arena owned here,
 * sized for up to max_windows windows.
 *
 * Activation rows have strides of their own (v_stride, u_stride, ...): the
 * width, or wider by `pad` under the tracer's poisoned padding, where the
 * gap holds a tagged NaN that only a read across a row boundary can see.
 * When a tracer is attached (m->trace) the forward and backward call its
 * hooks at each labelled tensor (trace/trace.h); NULL costs one branch. */
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
#define st_model_init_padded ST_R(st_model_init_padded)
#define st_model_trace_saved ST_R(st_model_trace_saved)
#define st_vsn_forward_fn ST_R(st_vsn_forward_fn)
#define st_model_free ST_R(st_model_free)
#define st_model_bind ST_R(st_model_bind)
#define st_model_forward ST_R(st_model_forward)
#define st_model_backward ST_R(st_model_backward)

struct st_trace;

/* The VSN kernel the forward calls (st_vsn_forward); a test swaps in a
 * deliberately broken variant to prove the tracer catches it. */
typedef void (*st_vsn_forward_fn)(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c,
                                  int c_stride, const st_vsn_weights *w, real *v, int v_stride, real *alpha,
                                  int alpha_stride, real *saved, real *work);

typedef struct {
    st_dims d;
    int max_windows;
    int pad;                 /* extra row-stride elements of the activations (0: contiguous) */
    struct st_trace *trace;  /* NaN/Inf tracer hooks; NULL: off */
    st_vsn_forward_fn vsn_forward;
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
    real *vsn_v;       /* [rows, Dv] VSN output (row stride v_stride) */
    real *vsn_alpha;   /* [rows, F] selection weights (alpha_stride) */
    real *vsn_saved;
    real *vc;          /* [rows, Dv+C] input of w_in (vc_stride) */
    real **u;          /* [L+1] each [rows, D] (u_stride) */
    real **mix_saved;  /* [L] */
    real *heads_saved;
    /* backward scratch */
    real *du_a, *du_b; /* [rows, D] (u_stride) */
    real *dvc;         /* [rows, Dv+C] (vc_stride) */
    real *dc_rows;     /* [rows, C] context gradient when the caller wants no dX (dc_stride) */
    real *dc_head;     /* [n, C] */
    real *work;
    int v_stride, alpha_stride, vc_stride, u_stride, dc_stride;
} st_model;

#define st_model_activation_bytes ST_R(st_model_activation_bytes)
/* Bytes of the activation arena for up to max_windows windows. */
size_t st_model_activation_bytes(const st_dims *d, int max_windows);

/* Lays out the activations for up to max_windows windows and binds w, g. */
int st_model_init(st_model *m, const st_dims *d, const st_param_table *t, int max_windows, real *w, real *g);
/* The same with activation rows pad elements wider than their width, the
 * gap filled with the tracer's tagged NaN (poisoned padding; pad >= 0). */
int st_model_init_padded(st_model *m, const st_dims *d, const st_param_table *t, int max_windows, real *w, real *g,
                         int pad);
void st_model_free(st_model *m);
/* Points the model at other parameter/gradient buffers of the same layout. */
void st_model_bind(st_model *m, real *w, real *g);

/* Forward over n <= max_windows windows; logits [n, A] (stride logits_stride), value [n].
 * X must stay unchanged until the matching backward. */
void st_model_forward(st_model *m, int n, const real *X, int x_stride, real *logits, int logits_stride, real *value);

/* Hooks the saved blocks of the last forward into the tracer (phase
 * saved); the trainer calls it between the loss and the backward. */
void st_model_trace_saved(st_model *m);

/* Backward of the last forward: parameter gradients are added to m->g;
 * dX (the window's gradient, same shape as X, may be NULL) is written. */
void st_model_backward(st_model *m, const real *dlogits, int dlogits_stride, const real *dvalue, real *dX,
                       int dx_stride);

#endif
