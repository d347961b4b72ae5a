/* ops_check.c: per-op float64 gradient checks for `ssmtrade gradcheck`.
 *
 * Each op is described by a case: its inputs (name, buffer, gradient,
 * shape), its outputs with fixed random weights R, a forward and a
 * backward that turns dout = R into input gradients. The checker runs
 * the backward once and compares every input by central differences of
 * L = sum_k <out_k, R_k>. */
#define ST_REAL_BITS 64
#include "check/model_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/gradcheck.h"
#include "core/error.h"
#include "model/heads.h"
#include "model/layernorm.h"
#include "model/linear.h"

#define MAX_IN 32
#define MAX_OUT 4

typedef struct op_case op_case;
typedef struct {
    const char *name;
    double *x, *g;
    int rows, cols;
} op_tensor;
typedef struct {
    double *y, *R;
    int rows, cols;
} op_output;
struct op_case {
    const char *name;
    int n_in, n_out;
    op_tensor in[MAX_IN];
    op_output out[MAX_OUT];
    const st_dims *d;
    void (*forward)(op_case *c);
    void (*backward)(op_case *c);
    double *scratch[8]; /* op-specific buffers */
    void *blobs[64];    /* every allocation, freed at the end */
    int n_blobs;
    uint64_t seed;
    uint32_t salt;
};

/* A fresh random buffer owned by the case. */
static double *fresh(op_case *c, long n, double scale) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (scale != 0) st_gc_randn(p, n, scale, c->seed, ++c->salt);
    c->blobs[c->n_blobs++] = p;
    return p;
}

static double *input(op_case *c, const char *name, int rows, int cols, double scale, double shift) {
    op_tensor *t = &c->in[c->n_in++];
    t->name = name;
    t->rows = rows;
    t->cols = cols;
    t->x = fresh(c, (long)rows * cols, scale);
    for (long i = 0; i < (long)rows * cols; i++) t->x[i] += shift;
    t->g = fresh(c, (long)rows * cols, 0);
    return t->x;
}

static double *output(op_case *c, int rows, int cols) {
    op_output *o = &c->out[c->n_out++];
    o->rows = rows;
    o->cols = cols;
    o->y = fresh(c, (long)rows * cols, 0);
    o->R = fresh(c, (long)rows * cols, 1.0);
    return o->y;
}

static double case_loss(void *p) {
    op_case *c = p;
    c->forward(c);
    double s = 0;
    for (int k = 0; k < c->n_out; k++) s += st_gc_dot(c->out[k].y, c->out[k].rows, c->out[k].cols, c->out[k].cols,
                                                      c->out[k].R);
    return s;
}

static void run_case(op_case *c, int max_checks, st_gc_table *out) {
    c->forward(c);
    for (int i = 0; i < c->n_in; i++) memset(c->in[i].g, 0, sizeof(double) * (size_t)c->in[i].rows * c->in[i].cols);
    c->backward(c);
    char name[64];
    for (int i = 0; i < c->n_in; i++) {
        op_tensor *t = &c->in[i];
        st_gc_result r = st_gc_tensor(case_loss, c, t->x, t->rows, t->cols, t->cols, t->g, t->cols, max_checks,
                                      c->seed + (uint64_t)i);
        snprintf(name, sizeof name, "%s/%s", c->name, t->name);
        st_gc_table_add(out, name, r.rel_err, r.checked);
    }
    for (int i = 0; i < c->n_blobs; i++) free(c->blobs[i]);
}

/* ---- linear: y = x W^T + b ---- */
enum { LIN_ROWS = 6, LIN_IN = 7, LIN_OUT = 5 };
static void linear_fwd(op_case *c) {
    st_linear_forward(LIN_ROWS, LIN_IN, LIN_OUT, c->in[0].x, LIN_IN, c->in[1].x, c->in[2].x, c->out[0].y, LIN_OUT);
}
static void linear_bwd(op_case *c) {
    st_linear_backward(LIN_ROWS, LIN_IN, LIN_OUT, c->in[0].x, LIN_IN, c->in[1].x, c->out[0].R, LIN_OUT, c->in[0].g,
                       LIN_IN, 0, c->in[1].g, c->in[2].g);
}
static void linear_case(op_case *c) {
    c->name = "linear";
    input(c, "x", LIN_ROWS, LIN_IN, 1, 0);
    input(c, "weight", LIN_OUT, LIN_IN, 0.5, 0);
    input(c, "bias", 1, LIN_OUT, 0.5, 0);
    output(c, LIN_ROWS, LIN_OUT);
    c->forward = linear_fwd;
    c->backward = linear_bwd;
}

/* ---- LayerNorm ---- */
static void ln_fwd(op_case *c) {
    int D = c->d->D;
    st_layernorm_forward(LIN_ROWS, D, c->in[0].x, D, c->in[1].x, c->in[2].x, 1e-5, c->out[0].y, D, c->scratch[0],
                         c->scratch[1]);
}
static void ln_bwd(op_case *c) {
    int D = c->d->D;
    st_layernorm_backward(LIN_ROWS, D, c->in[0].x, D, c->in[1].x, c->scratch[0], c->scratch[1], c->out[0].R, D,
                          c->in[0].g, D, 0, c->in[1].g, c->in[2].g);
}
static void ln_case(op_case *c) {
    int D = c->d->D;
    c->name = "layernorm";
    input(c, "x", LIN_ROWS, D, 1, 0);
    input(c, "weight", 1, D, 0.3, 1);
    input(c, "bias", 1, D, 0.3, 0);
    output(c, LIN_ROWS, D);
    c->scratch[0] = fresh(c, LIN_ROWS, 0);
    c->scratch[1] = fresh(c, LIN_ROWS, 0);
    c->forward = ln_fwd;
    c->backward = ln_bwd;
}

/* ---- heads: ln_f, policy and value MLPs ---- */
enum { HEADS_N = 4 };
static st_heads_weights heads_w(op_case *c) {
    st_heads_weights w = {c->in[2].x, c->in[3].x, c->in[4].x, c->in[5].x, c->in[6].x,
                          c->in[7].x, c->in[8].x, c->in[9].x, c->in[10].x, c->in[11].x};
    return w;
}
static void heads_fwd(op_case *c) {
    const st_dims *d = c->d;
    st_heads_weights w = heads_w(c);
    st_heads_forward(HEADS_N, d->D, d->C, d->Hh, d->A, c->in[0].x, d->D, c->in[1].x, d->C, &w, c->out[0].y, d->A,
                     c->out[1].y, c->scratch[0]);
}
static void heads_bwd(op_case *c) {
    const st_dims *d = c->d;
    st_heads_weights w = heads_w(c);
    st_heads_grads g = {c->in[2].g, c->in[3].g, c->in[4].g, c->in[5].g, c->in[6].g,
                        c->in[7].g, c->in[8].g, c->in[9].g, c->in[10].g, c->in[11].g};
    st_heads_backward(HEADS_N, d->D, d->C, d->Hh, d->A, c->in[0].x, d->D, &w, c->scratch[0], c->out[0].R, d->A,
                      c->out[1].R, c->in[0].g, d->D, c->in[1].g, d->C, 0, &g, c->scratch[1]);
}
static void heads_case(op_case *c) {
    const st_dims *d = c->d;
    int D = d->D, C = d->C, Hh = d->Hh, A = d->A, G = D + C;
    c->name = "heads";
    input(c, "u_last", HEADS_N, D, 1, 0);
    input(c, "context", HEADS_N, C, 1, 0);
    input(c, "ln_f.weight", 1, D, 0.2, 1);
    input(c, "ln_f.bias", 1, D, 0.2, 0);
    input(c, "pi1.weight", Hh, G, 0.3, 0);
    input(c, "pi1.bias", 1, Hh, 0.3, 0);
    input(c, "pi2.weight", A, Hh, 0.3, 0);
    input(c, "pi2.bias", 1, A, 0.3, 0);
    input(c, "v1.weight", Hh, G, 0.3, 0);
    input(c, "v1.bias", 1, Hh, 0.3, 0);
    input(c, "v2.weight", 1, Hh, 0.3, 0);
    input(c, "v2.bias", 1, 1, 0.3, 0);
    output(c, HEADS_N, A);
    output(c, HEADS_N, 1);
    c->scratch[0] = fresh(c, (long)st_heads_saved_count(HEADS_N, D, C, Hh), 0);
    c->scratch[1] = fresh(c, (long)st_heads_work_count(HEADS_N, D, C, Hh), 0);
    c->forward = heads_fwd;
    c->backward = heads_bwd;
}

int st_gradcheck_ops(const st_dims *d, uint64_t seed, int max_checks, st_gc_table *out) {
    ST_TRY(st_dims_validate(d));
    void (*cases[])(op_case *) = {linear_case, ln_case, heads_case};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        op_case c;
        memset(&c, 0, sizeof c);
        c.d = d;
        c.seed = seed + 1000 * i;
        cases[i](&c);
        run_case(&c, max_checks, out);
    }
    return ST_OK;
}
