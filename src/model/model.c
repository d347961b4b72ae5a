/* model.c: composition of the VSN, w_in, Mamba2 blocks and heads (model.h).
 *
 * The context c reaches the output along three paths (the VSN's selection
 * GRN, w_in and the heads), so its gradient is the sum of the three; the
 * heads see only the last row of each window. */
#include "core/real.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/linear.h"
#include "model/model.h"

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

/* Carves every activation out of the arena (size pass when a->base is NULL). */
static size_t carve(st_model *m, st_arena *a) {
    const st_dims *d = &m->d;
    int n = m->max_windows, rows = n * d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D;
    size_t total = 0;
#define TAKE(ptr, count)                                                                                       \
    do {                                                                                                       \
        size_t bytes_ = sizeof(real) * (size_t)(count);                                                        \
        total += st_arena_round(bytes_);                                                                       \
        if (a->base) (ptr) = st_arena_take(a, bytes_);                                                         \
    } while (0)
    TAKE(m->vsn_v, (size_t)rows * Dv);
    TAKE(m->vsn_alpha, (size_t)rows * F);
    TAKE(m->vsn_saved, st_vsn_saved_count(rows, F, C, Dv));
    TAKE(m->vc, (size_t)rows * (Dv + C));
    for (int l = 0; l <= d->L; l++) TAKE(m->u[l], (size_t)rows * D);
    for (int l = 0; l < d->L; l++) TAKE(m->mix_saved[l], st_mamba2_saved_count(d, n));
    TAKE(m->heads_saved, st_heads_saved_count(n, D, C, d->Hh));
    TAKE(m->du_a, (size_t)rows * D);
    TAKE(m->du_b, (size_t)rows * D);
    TAKE(m->dvc, (size_t)rows * (Dv + C));
    TAKE(m->dc_rows, (size_t)rows * C);
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

int st_model_init(st_model *m, const st_dims *d, const st_param_table *t, int max_windows, real *w, real *g) {
    memset(m, 0, sizeof *m);
    ST_TRY(st_dims_validate(d));
    ST_REQUIRE(max_windows > 0, ST_ERR_INPUT, "the model needs room for at least one window");
    m->d = *d;
    m->max_windows = max_windows;
    m->table = t;
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
    m->n = n;
    m->x = X;
    m->x_stride = x_stride;
    st_vsn_forward(rows, F, C, Dv, X, x_stride, X + F, x_stride, &m->vsn_w, m->vsn_v, Dv, m->vsn_alpha, F,
                   m->vsn_saved, m->work);
    for (int r = 0; r < rows; r++) {
        memcpy(m->vc + (size_t)r * vcw, m->vsn_v + (size_t)r * Dv, sizeof(real) * Dv);
        memcpy(m->vc + (size_t)r * vcw + Dv, X + (size_t)r * x_stride + F, sizeof(real) * C);
    }
    st_linear_forward(rows, vcw, D, m->vc, vcw, m->w_in_w, m->w_in_b, m->u[0], D);
    for (int l = 0; l < d->L; l++)
        st_mamba2_forward(d, n, &m->mix_w[l], m->u[l], D, m->u[l + 1], D, m->mix_saved[l], m->work);
    st_heads_forward(n, D, C, d->Hh, d->A, m->u[d->L] + (size_t)(K - 1) * D, K * D,
                     X + (size_t)(K - 1) * x_stride + F, K * x_stride, &m->heads_w, logits, logits_stride, value,
                     m->heads_saved);
}

void st_model_backward(st_model *m, const real *dlogits, int dlogits_stride, const real *dvalue, real *dX,
                       int dx_stride) {
    const st_dims *d = &m->d;
    int n = m->n, K = d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D, rows = n * K, vcw = Dv + C;
    /* Heads: only the last row of each window receives a gradient. */
    real *du = m->du_a, *du_next = m->du_b;
    memset(du, 0, sizeof(real) * (size_t)rows * D);
    st_heads_backward(n, D, C, d->Hh, d->A, m->u[d->L] + (size_t)(K - 1) * D, K * D, &m->heads_w, m->heads_saved,
                      dlogits, dlogits_stride, dvalue, du + (size_t)(K - 1) * D, K * D, m->dc_head, C, 0,
                      &m->heads_g, m->work);
    for (int l = d->L - 1; l >= 0; l--) {
        st_mamba2_backward(d, n, &m->mix_w[l], m->u[l], D, m->mix_saved[l], du, D, du_next, D, &m->mix_g[l],
                           m->work);
        real *t = du;
        du = du_next;
        du_next = t;
    }
    st_linear_backward(rows, vcw, D, m->vc, vcw, m->w_in_w, du, D, m->dvc, vcw, 0, m->g_w_in_w, m->g_w_in_b);
    /* VSN: the snapshot gradient goes to dX; the context gradient to dX's
     * context columns (or scratch), then the w_in and head paths add in. */
    real *dc = dX ? dX + F : m->dc_rows;
    int dc_stride = dX ? dx_stride : C;
    st_vsn_backward(rows, F, C, Dv, m->x, m->x_stride, m->x + F, m->x_stride, &m->vsn_w, m->vsn_saved, m->dvc, vcw,
                    dX, dx_stride, dc, dc_stride, 0, &m->vsn_g, m->work);
    for (int r = 0; r < rows; r++) {
        real *dst = dc + (size_t)r * dc_stride;
        const real *src = m->dvc + (size_t)r * vcw + Dv;
        for (int j = 0; j < C; j++) dst[j] += src[j];
    }
    for (int b = 0; b < n; b++) {
        real *dst = dc + ((size_t)b * K + K - 1) * dc_stride;
        for (int j = 0; j < C; j++) dst[j] += m->dc_head[(size_t)b * C + j];
    }
}
