/* params.c: the parameter table and its initialisation. */
#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/philox.h"

typedef struct {
    st_param_table *t;
    int cap;
} builder;

static int add(builder *b, const char *name, int ndim, int s0, int s1, int s2, int decay, st_init_rule init,
               int fan_in) {
    st_param_table *t = b->t;
    if (t->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        st_param *p = realloc(t->p, sizeof *p * (size_t)cap);
        if (!p) return ST_FAIL(ST_ERR_MEMORY, "cannot grow the parameter table");
        t->p = p;
        b->cap = cap;
    }
    st_param *p = &t->p[t->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->shape[0] = s0;
    p->shape[1] = ndim > 1 ? s1 : 1;
    p->shape[2] = ndim > 2 ? s2 : 1;
    p->count = (size_t)p->shape[0] * p->shape[1] * p->shape[2];
    p->offset = t->total;
    p->decay = decay;
    p->init = init;
    p->fan_in = fan_in;
    t->total += p->count;
    return ST_OK;
}

/* A Linear layer "<name>.weight" [out, in] and, when bias, "<name>.bias". */
static int linear(builder *b, const char *name, int out, int in, int bias, st_init_rule rule) {
    char n[48];
    snprintf(n, sizeof n, "%s.weight", name);
    ST_TRY(add(b, n, 2, out, in, 1, 1, rule, in));
    if (bias) {
        snprintf(n, sizeof n, "%s.bias", name);
        ST_TRY(add(b, n, 1, out, 1, 1, 0, ST_INIT_FANIN, in));
    }
    return ST_OK;
}

static int norm(builder *b, const char *name, int n_feat) {
    char n[48];
    snprintf(n, sizeof n, "%s.weight", name);
    ST_TRY(add(b, n, 1, n_feat, 1, 1, 0, ST_INIT_ONE, 0));
    snprintf(n, sizeof n, "%s.bias", name);
    return add(b, n, 1, n_feat, 1, 1, 0, ST_INIT_ZERO, 0);
}

static int build(const st_dims *d, builder *b) {
    int F = d->F, C = d->C, Dv = d->Dv, D = d->D, Hs = st_sel_hidden(d);
    int di = st_d_inner(d), H = st_heads(d), cd = st_conv_dim(d);
    /* VSN: embeddings, selection GRN, stacked per-variable GRNs. */
    ST_TRY(add(b, "vsn.embed_w", 2, F, Dv, 1, 1, ST_INIT_FANIN, 1));
    ST_TRY(add(b, "vsn.embed_b", 2, F, Dv, 1, 0, ST_INIT_ZERO, 0));
    ST_TRY(linear(b, "vsn.sel.skip", F, F * Dv, 1, ST_INIT_FANIN));
    ST_TRY(linear(b, "vsn.sel.fc1", Hs, F * Dv, 1, ST_INIT_FANIN));
    ST_TRY(linear(b, "vsn.sel.ctx", Hs, C, 0, ST_INIT_FANIN));
    ST_TRY(linear(b, "vsn.sel.fc2", Hs, Hs, 1, ST_INIT_FANIN));
    ST_TRY(linear(b, "vsn.sel.glu", 2 * F, Hs, 1, ST_INIT_FANIN));
    ST_TRY(norm(b, "vsn.sel.norm", F));
    ST_TRY(add(b, "vsn.var.fc1_w", 3, F, Dv, Dv, 1, ST_INIT_FANIN, Dv));
    ST_TRY(add(b, "vsn.var.fc1_b", 2, F, Dv, 1, 0, ST_INIT_FANIN, Dv));
    ST_TRY(add(b, "vsn.var.fc2_w", 3, F, Dv, Dv, 1, ST_INIT_FANIN, Dv));
    ST_TRY(add(b, "vsn.var.fc2_b", 2, F, Dv, 1, 0, ST_INIT_FANIN, Dv));
    ST_TRY(add(b, "vsn.var.glu_w", 3, F, 2 * Dv, Dv, 1, ST_INIT_FANIN, Dv));
    ST_TRY(add(b, "vsn.var.glu_b", 2, F, 2 * Dv, 1, 0, ST_INIT_FANIN, Dv));
    ST_TRY(add(b, "vsn.var.ln_w", 2, F, Dv, 1, 0, ST_INIT_ONE, 0));
    ST_TRY(add(b, "vsn.var.ln_b", 2, F, Dv, 1, 0, ST_INIT_ZERO, 0));
    ST_TRY(linear(b, "w_in", D, Dv + C, 1, ST_INIT_FANIN));
    for (int l = 0; l < d->L; l++) {
        char n[48];
        snprintf(n, sizeof n, "ln.%d", l);
        ST_TRY(norm(b, n, D));
        snprintf(n, sizeof n, "mix.%d.in_proj", l);
        ST_TRY(linear(b, n, st_in_proj_out(d), D, 0, ST_INIT_FANIN));
        snprintf(n, sizeof n, "mix.%d.conv_w", l);
        ST_TRY(add(b, n, 2, cd, d->W, 1, 1, ST_INIT_FANIN, d->W));
        snprintf(n, sizeof n, "mix.%d.conv_b", l);
        ST_TRY(add(b, n, 1, cd, 1, 1, 0, ST_INIT_FANIN, d->W));
        snprintf(n, sizeof n, "mix.%d.dt_bias", l);
        ST_TRY(add(b, n, 1, H, 1, 1, 0, ST_INIT_DT_BIAS, 0));
        snprintf(n, sizeof n, "mix.%d.A_log", l);
        ST_TRY(add(b, n, 1, H, 1, 1, 0, ST_INIT_A_LOG, 0));
        snprintf(n, sizeof n, "mix.%d.Dskip", l);
        ST_TRY(add(b, n, 1, H, 1, 1, 0, ST_INIT_ONE, 0));
        snprintf(n, sizeof n, "mix.%d.norm_w", l);
        ST_TRY(add(b, n, 1, di, 1, 1, 0, ST_INIT_ONE, 0));
        snprintf(n, sizeof n, "mix.%d.out_proj", l);
        ST_TRY(linear(b, n, D, di, 0, ST_INIT_FANIN));
    }
    ST_TRY(norm(b, "ln_f", D));
    ST_TRY(linear(b, "pi1", d->Hh, D + C, 1, ST_INIT_FANIN));
    ST_TRY(linear(b, "pi2", d->A, d->Hh, 1, ST_INIT_FANIN_001));
    ST_TRY(linear(b, "v1", d->Hh, D + C, 1, ST_INIT_FANIN));
    ST_TRY(linear(b, "v2", 1, d->Hh, 1, ST_INIT_FANIN));
    return ST_OK;
}

int st_param_table_build(const st_dims *d, st_param_table *t) {
    memset(t, 0, sizeof *t);
    ST_TRY(st_dims_validate(d));
    builder b = {t, 0};
    int rc = build(d, &b);
    if (rc != ST_OK) st_param_table_free(t);
    return rc;
}

void st_param_table_free(st_param_table *t) {
    free(t->p);
    memset(t, 0, sizeof *t);
}

const st_param *st_param_find(const st_param_table *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->p[i].name, name) == 0) return &t->p[i];
    return NULL;
}

size_t st_param_offset(const st_param_table *t, const char *name) {
    const st_param *p = st_param_find(t, name);
    if (!p) {
        fprintf(stderr, "ssmtrade: internal error: no parameter named '%s'\n", name);
        abort();
    }
    return p->offset;
}

void st_param_shape_str(const st_param *p, char *buf, size_t n) {
    if (p->ndim == 1) snprintf(buf, n, "[%d]", p->shape[0]);
    else if (p->ndim == 2) snprintf(buf, n, "[%d, %d]", p->shape[0], p->shape[1]);
    else snprintf(buf, n, "[%d, %d, %d]", p->shape[0], p->shape[1], p->shape[2]);
}

/* One value of rule p, element i: a pure function of (seed, parameter, element). */
static double init_value(const st_param *p, uint64_t seed, size_t i) {
    st_philox4 r = st_philox_draw(seed, ST_STREAM_INIT, (uint64_t)p->offset + i);
    double u = st_u01d(r.v[0], r.v[1]);
    double bound = p->fan_in > 0 ? 1.0 / sqrt((double)p->fan_in) : 0;
    switch (p->init) {
    case ST_INIT_ZERO: return 0;
    case ST_INIT_ONE: return 1;
    case ST_INIT_FANIN: return (2 * u - 1) * bound;
    case ST_INIT_FANIN_001: return 0.01 * (2 * u - 1) * bound;
    case ST_INIT_DT_BIAS: {
        double dt = exp(log(1e-3) + u * (log(1e-1) - log(1e-3)));
        if (dt < 1e-4) dt = 1e-4;
        return dt + log(-expm1(-dt)); /* softplus^-1(dt) */
    }
    case ST_INIT_A_LOG: return log(1 + 15 * u);
    }
    return 0;
}

void st_params_init_f32(const st_param_table *t, uint64_t seed, float *w) {
    for (int k = 0; k < t->n; k++)
        for (size_t i = 0; i < t->p[k].count; i++) w[t->p[k].offset + i] = (float)init_value(&t->p[k], seed, i);
}

void st_params_init_f64(const st_param_table *t, uint64_t seed, double *w) {
    for (int k = 0; k < t->n; k++)
        for (size_t i = 0; i < t->p[k].count; i++) w[t->p[k].offset + i] = init_value(&t->p[k], seed, i);
}
