/* model.c: composition of the VSN, w_in, Mamba2 blocks and heads (model.h).
 *
 * The context c reaches the output along three paths (the VSN's selection
 * GRN, w_in and the heads), so its gradient is the sum of the three; the
 * heads see only the last row of each window.
 *
 * Tracer hooks (trace/trace.h) sit right after each labelled tensor is
 * written and before anything reads it, so an injected fault enters the
 * computation exactly there; with no tracer each hook is one NULL check. */
#include "core/real.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/linear.h"
#include "model/model.h"
#include "trace/trace.h"

#define W_(name) (m->w + st_param_offset(m->table, name))
#define G_(name) (m->g + st_param_offset(m->table, name))

static void bind_vsn(st_model *m) {
    st_vsn_weights *w = &m->vsn_w;
    st_vsn_grads *g = &m->vsn_g;
#define B(field, name)                                                                                         \
    w->field = W_(name);                                                                                       \
    g->field = G_(name)
    B(embed_w, "vsn.embed_w");
    B(embed_b, "vsn.embed_b");
    B(sel_skip_w, "vsn.sel.skip.weight");
    B(sel_skip_b, "vsn.sel.skip.bias");
    B(sel_fc1_w, "vsn.sel.fc1.weight");
    B(sel_fc1_b, "vsn.sel.fc1.bias");
    B(sel_ctx_w, "vsn.sel.ctx.weight");
    B(sel_fc2_w, "vsn.sel.fc2.weight");
    B(sel_fc2_b, "vsn.sel.fc2.bias");
    B(sel_glu_w, "vsn.sel.glu.weight");
    B(sel_glu_b, "vsn.sel.glu.bias");
    B(sel_norm_w, "vsn.sel.norm.weight");
    B(sel_norm_b, "vsn.sel.norm.bias");
    B(var_fc1_w, "vsn.var.fc1_w");
    B(var_fc1_b, "vsn.var.fc1_b");
    B(var_fc2_w, "vsn.var.fc2_w");
    B(var_fc2_b, "vsn.var.fc2_b");
    B(var_glu_w, "vsn.var.glu_w");
    B(var_glu_b, "vsn.var.glu_b");
    B(var_ln_w, "vsn.var.ln_w");
    B(var_ln_b, "vsn.var.ln_b");
#undef B
}

static void bind_mixer(st_model *m, int l) {
    st_mamba2_weights *w = &m->mix_w[l];
    st_mamba2_grads *g = &m->mix_g[l];
    char n[48];
#define B(field, fmt)                                                                                          \
    snprintf(n, sizeof n, fmt, l);                                                                             \
    w->field = W_(n);                                                                                          \
    g->field = G_(n)
    B(ln_w, "ln.%d.weight");
    B(ln_b, "ln.%d.bias");
    B(in_proj_w, "mix.%d.in_proj.weight");
    B(conv_w, "mix.%d.conv_w");
    B(conv_b, "mix.%d.conv_b");
    B(dt_bias, "mix.%d.dt_bias");
    B(A_log, "mix.%d.A_log");
    B(Dskip, "mix.%d.Dskip");
    B(norm_w, "mix.%d.norm_w");
    B(out_proj_w, "mix.%d.out_proj.weight");
#undef B
}

static void bind_heads(st_model *m) {
    st_heads_weights *w = &m->heads_w;
    st_heads_grads *g = &m->heads_g;
#define B(field, name)                                                                                         \
    w->field = W_(name);                                                                                       \
    g->field = G_(name)
    B(ln_w, "ln_f.weight");
    B(ln_b, "ln_f.bias");
    B(pi1_w, "pi1.weight");
    B(pi1_b, "pi1.bias");
    B(pi2_w, "pi2.weight");
    B(pi2_b, "pi2.bias");
    B(v1_w, "v1.weight");
    B(v1_b, "v1.bias");
    B(v2_w, "v2.weight");
    B(v2_b, "v2.bias");
#undef B
}

void st_model_bind(st_model *m, real *w, real *g) {
    m->w = w;
    m->g = g;
    bind_vsn(m);
    m->w_in_w = W_("w_in.weight");
    m->w_in_b = W_("w_in.bias");
    m->g_w_in_w = G_("w_in.weight");
    m->g_w_in_b = G_("w_in.bias");
    for (int l = 0; l < m->d.L; l++) bind_mixer(m, l);
    bind_heads(m);
}

static size_t max3(size_t a, size_t b, size_t c) {
    size_t x = a > b ? a : b;
    return x > c ? x : c;
}

/* Row strides of the activations: their widths, plus the poisoned padding. */
static void set_strides(st_model *m) {
    const st_dims *d = &m->d;
    m->v_stride = d->Dv + m->pad;
    m->alpha_stride = d->F + m->pad;
    m->vc_stride = d->Dv + d->C + m->pad;
    m->u_stride = d->D + m->pad;
    m->dc_stride = d->C + m->pad;
}

/* Carves every activation out of the arena (size pass when a->base is NULL). */
static size_t carve(st_model *m, st_arena *a) {
    const st_dims *d = &m->d;
    int n = m->max_windows, rows = n * d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D;
    size_t total = 0;
    set_strides(m);
#define TAKE(ptr, count)                                                                                       \
    do {                                                                                                       \
        size_t bytes_ = sizeof(real) * (size_t)(count);                                                        \
        total += st_arena_round(bytes_);                                                                       \
        if (a->base) (ptr) = st_arena_take(a, bytes_);                                                         \
    } while (0)
    TAKE(m->vsn_v, (size_t)rows * m->v_stride);
    TAKE(m->vsn_alpha, (size_t)rows * m->alpha_stride);
    TAKE(m->vsn_saved, st_vsn_saved_count(rows, F, C, Dv));
    TAKE(m->vc, (size_t)rows * m->vc_stride);
    for (int l = 0; l <= d->L; l++) TAKE(m->u[l], (size_t)rows * m->u_stride);
    for (int l = 0; l < d->L; l++) TAKE(m->mix_saved[l], st_mamba2_saved_count(d, n));
    TAKE(m->heads_saved, st_heads_saved_count(n, D, C, d->Hh));
    TAKE(m->du_a, (size_t)rows * m->u_stride);
    TAKE(m->du_b, (size_t)rows * m->u_stride);
    TAKE(m->dvc, (size_t)rows * m->vc_stride);
    TAKE(m->dc_rows, (size_t)rows * m->dc_stride);
    TAKE(m->dc_head, (size_t)n * C);
    TAKE(m->work, max3(st_vsn_work_count(rows, F, C, Dv), st_mamba2_work_count(d, n),
                       st_heads_work_count(n, D, C, d->Hh)));
#undef TAKE
    return total;
}

size_t st_model_activation_bytes(const st_dims *d, int max_windows) {
    st_model m;
    memset(&m, 0, sizeof m);
    m.d = *d;
    m.max_windows = max_windows;
    st_arena sizing = {0};
    return carve(&m, &sizing);
}

/* Fills the gap of every padded activation with the tracer's tag. */
static void poison(st_model *m) {
    const st_dims *d = &m->d;
    int64_t rows = (int64_t)m->max_windows * d->K;
    st_trace_poison_rows(m->vsn_v, rows, d->Dv, m->v_stride);
    st_trace_poison_rows(m->vsn_alpha, rows, d->F, m->alpha_stride);
    st_trace_poison_rows(m->vc, rows, d->Dv + d->C, m->vc_stride);
    for (int l = 0; l <= d->L; l++) st_trace_poison_rows(m->u[l], rows, d->D, m->u_stride);
    st_trace_poison_rows(m->du_a, rows, d->D, m->u_stride);
    st_trace_poison_rows(m->du_b, rows, d->D, m->u_stride);
    st_trace_poison_rows(m->dvc, rows, d->Dv + d->C, m->vc_stride);
    st_trace_poison_rows(m->dc_rows, rows, d->C, m->dc_stride);
}

int st_model_init(st_model *m, const st_dims *d, const st_param_table *t, int max_windows, real *w, real *g) {
    return st_model_init_padded(m, d, t, max_windows, w, g, 0);
}

int st_model_init_padded(st_model *m, const st_dims *d, const st_param_table *t, int max_windows, real *w, real *g,
                         int pad) {
    memset(m, 0, sizeof *m);
    ST_TRY(st_dims_validate(d));
    ST_REQUIRE(max_windows > 0, ST_ERR_INPUT, "the model needs room for at least one window");
    ST_REQUIRE(pad >= 0, ST_ERR_INPUT, "negative row padding %d", pad);
    m->d = *d;
    m->max_windows = max_windows;
    m->pad = pad;
    m->table = t;
    m->vsn_forward = st_vsn_forward;
    m->mix_w = calloc((size_t)d->L, sizeof *m->mix_w);
    m->mix_g = calloc((size_t)d->L, sizeof *m->mix_g);
    m->u = calloc((size_t)d->L + 1, sizeof *m->u);
    m->mix_saved = calloc((size_t)d->L, sizeof *m->mix_saved);
    if (!m->mix_w || !m->mix_g || !m->u || !m->mix_saved) {
        st_model_free(m);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for the model's tables");
    }
    st_arena sizing = {0};
    size_t bytes = carve(m, &sizing);
    int rc = st_arena_init(&m->arena, bytes);
    if (rc != ST_OK) {
        st_model_free(m);
        return rc;
    }
    carve(m, &m->arena);
    if (pad > 0) poison(m);
    st_model_bind(m, w, g);
    return ST_OK;
}

void st_model_free(st_model *m) {
    st_arena_free(&m->arena);
    free(m->mix_w);
    free(m->mix_g);
    free(m->u);
    free(m->mix_saved);
    memset(m, 0, sizeof *m);
}

void st_model_forward(st_model *m, int n, const real *X, int x_stride, real *logits, int logits_stride,
                      real *value) {
    const st_dims *d = &m->d;
    int K = d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D, rows = n * K, vcw = Dv + C;
    int vs = m->v_stride, vcs = m->vc_stride, us = m->u_stride;
    struct st_trace *tr = m->trace;
    m->n = n;
    m->x = X;
    m->x_stride = x_stride;
    m->vsn_forward(rows, F, C, Dv, X, x_stride, X + F, x_stride, &m->vsn_w, m->vsn_v, vs, m->vsn_alpha,
                   m->alpha_stride, m->vsn_saved, m->work);
    if (tr) {
        st_trace_fwd(tr, ST_TK_VSN_OUT, 0, m->vsn_v, rows, Dv, vs);
        st_trace_fwd(tr, ST_TK_VSN_ALPHA, 0, m->vsn_alpha, rows, F, m->alpha_stride);
    }
    for (int r = 0; r < rows; r++) {
        memcpy(m->vc + (size_t)r * vcs, m->vsn_v + (size_t)r * vs, sizeof(real) * Dv);
        memcpy(m->vc + (size_t)r * vcs + Dv, X + (size_t)r * x_stride + F, sizeof(real) * C);
    }
    if (tr) st_trace_fwd(tr, ST_TK_W_IN_IN, 0, m->vc, rows, vcw, vcs);
    st_linear_forward(rows, vcw, D, m->vc, vcs, m->w_in_w, m->w_in_b, m->u[0], us);
    if (tr) st_trace_fwd(tr, ST_TK_W_IN_OUT, 0, m->u[0], rows, D, us);
    for (int l = 0; l < d->L; l++) {
        st_mamba2_forward(d, n, &m->mix_w[l], m->u[l], us, m->u[l + 1], us, m->mix_saved[l], m->work);
        /* u_L's label is its last rows: what the heads read, and all the GPU's tail computes */
        if (tr && l == d->L - 1) st_trace_fwd(tr, ST_TK_MIX_OUT, l, m->u[l + 1] + (size_t)(K - 1) * us, n, D, K * us);
        else if (tr) st_trace_fwd(tr, ST_TK_MIX_OUT, l, m->u[l + 1], rows, D, us);
    }
    st_heads_forward(n, D, C, d->Hh, d->A, m->u[d->L] + (size_t)(K - 1) * us, K * us,
                     X + (size_t)(K - 1) * x_stride + F, K * x_stride, &m->heads_w, logits, logits_stride, value,
                     m->heads_saved);
    if (tr) {
        st_trace_fwd(tr, ST_TK_LOGITS, 0, logits, n, d->A, logits_stride);
        st_trace_fwd(tr, ST_TK_VALUE, 0, value, 1, n, n);
    }
}

void st_model_trace_saved(st_model *m) {
    struct st_trace *tr = m->trace;
    if (!tr) return;
    st_trace_saved_block(tr, ST_TK_VSN_SAVED, 0, -1, m->vsn_saved, m->n);
    for (int l = 0; l < m->d.L; l++)
        st_trace_saved_block(tr, ST_TK_MIX_SAVED, l * ST_MAMBA2_SAVED_NREGIONS, ST_MAMBA2_SAVED_NREGIONS,
                             m->mix_saved[l], m->n);
    st_trace_saved_block(tr, ST_TK_HEADS_SAVED, 0, -1, m->heads_saved, m->n);
}

/* Zeroes the logical part of rows x width (the padding keeps its tag). */
static void zero_rows(real *p, int rows, int width, int stride) {
    if (stride == width) {
        memset(p, 0, sizeof(real) * (size_t)rows * width);
        return;
    }
    for (int r = 0; r < rows; r++) memset(p + (size_t)r * stride, 0, sizeof(real) * width);
}

void st_model_backward(st_model *m, const real *dlogits, int dlogits_stride, const real *dvalue, real *dX,
                       int dx_stride) {
    const st_dims *d = &m->d;
    int n = m->n, K = d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D, rows = n * K, vcw = Dv + C;
    int us = m->u_stride, vcs = m->vc_stride;
    struct st_trace *tr = m->trace;
    /* Heads: only the last row of each window receives a gradient. */
    real *du = m->du_a, *du_next = m->du_b;
    zero_rows(du, rows, D, us);
    st_heads_backward(n, D, C, d->Hh, d->A, m->u[d->L] + (size_t)(K - 1) * us, K * us, &m->heads_w, m->heads_saved,
                      dlogits, dlogits_stride, dvalue, du + (size_t)(K - 1) * us, K * us, m->dc_head, C, 0,
                      &m->heads_g, m->work);
    if (tr) {
        st_trace_at(tr, ST_PHASE_BWD, ST_TK_DU, d->L, du, rows, D, us);
        st_trace_at(tr, ST_PHASE_BWD, ST_TK_DC_HEAD, 0, m->dc_head, n, C, C);
    }
    for (int l = d->L - 1; l >= 0; l--) {
        st_mamba2_backward(d, n, &m->mix_w[l], m->u[l], us, m->mix_saved[l], du, us, du_next, us, &m->mix_g[l],
                           m->work);
        if (tr) st_trace_at(tr, ST_PHASE_BWD, ST_TK_DU, l, du_next, rows, D, us);
        real *t = du;
        du = du_next;
        du_next = t;
    }
    st_linear_backward(rows, vcw, D, m->vc, vcs, m->w_in_w, du, us, m->dvc, vcs, 0, m->g_w_in_w, m->g_w_in_b);
    if (tr) st_trace_at(tr, ST_PHASE_BWD, ST_TK_DVC, 0, m->dvc, rows, vcw, vcs);
    /* VSN: the snapshot gradient goes to dX; the context gradient to dX's
     * context columns (or scratch), then the w_in and head paths add in. */
    real *dc = dX ? dX + F : m->dc_rows;
    int dc_stride = dX ? dx_stride : m->dc_stride;
    st_vsn_backward(rows, F, C, Dv, m->x, m->x_stride, m->x + F, m->x_stride, &m->vsn_w, m->vsn_saved, m->dvc, vcs,
                    dX, dx_stride, dc, dc_stride, 0, &m->vsn_g, m->work);
    for (int r = 0; r < rows; r++) {
        real *dst = dc + (size_t)r * dc_stride;
        const real *src = m->dvc + (size_t)r * vcs + Dv;
        for (int j = 0; j < C; j++) dst[j] += src[j];
    }
    for (int b = 0; b < n; b++) {
        real *dst = dc + ((size_t)b * K + K - 1) * dc_stride;
        for (int j = 0; j < C; j++) dst[j] += m->dc_head[(size_t)b * C + j];
    }
    if (tr) st_trace_at(tr, ST_PHASE_BWD, ST_TK_DC, 0, dc, rows, C, dc_stride);
}
