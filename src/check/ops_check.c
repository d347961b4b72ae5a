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
#include "model/conv1d.h"
#include "model/heads.h"
#include "model/mamba2.h"
#include "model/params.h"
#include "model/rmsnorm_gated.h"
#include "model/ssd.h"
#include "model/vsn.h"
#include "train/ppo_loss.h"
#include "model/layernorm.h"
#include "model/linear.h"

#define MAX_IN 40
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
    st_param_table table; /* for ops whose inputs are model parameters */
    double *init;         /* the table's initial values */
    int rows;             /* rows (windows x K) of the window-shaped inputs */
    int *ints;            /* integer inputs (actions) */
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

/* A model parameter as an input: its initial value plus noise (so norm
 * weights are not exactly 1 and biases not exactly 0). */
static double *param_input(op_case *c, const char *name) {
    if (!c->init) {
        st_param_table_build(c->d, &c->table);
        c->init = fresh(c, (long)c->table.total, 0);
        st_params_init_f64(&c->table, c->seed, c->init);
    }
    const st_param *p = st_param_find(&c->table, name);
    int rows = p->ndim == 1 ? 1 : p->shape[0], cols = (int)(p->count / (size_t)rows);
    double *x = input(c, p->name, rows, cols, 0.05, 0);
    for (size_t i = 0; i < p->count; i++) x[i] += c->init[p->offset + i];
    return x;
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
    st_param_table_free(&c->table);
    free(c->ints);
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


/* ---- VSN: inputs s, c and the 21 vsn.* parameters; outputs v and alpha ---- */
enum { VSN_ROWS = 5 };
static const char *const vsn_params[] = {
    "vsn.embed_w", "vsn.embed_b", "vsn.sel.skip.weight", "vsn.sel.skip.bias", "vsn.sel.fc1.weight",
    "vsn.sel.fc1.bias", "vsn.sel.ctx.weight", "vsn.sel.fc2.weight", "vsn.sel.fc2.bias", "vsn.sel.glu.weight",
    "vsn.sel.glu.bias", "vsn.sel.norm.weight", "vsn.sel.norm.bias", "vsn.var.fc1_w", "vsn.var.fc1_b",
    "vsn.var.fc2_w", "vsn.var.fc2_b", "vsn.var.glu_w", "vsn.var.glu_b", "vsn.var.ln_w", "vsn.var.ln_b"};
#define VSN_NP (int)(sizeof vsn_params / sizeof vsn_params[0])
/* st_vsn_weights and st_vsn_grads are structs of pointers in exactly the
 * order of vsn_params, so they are filled as arrays (likewise mix_params). */
static st_vsn_weights vsn_w(op_case *c) {
    st_vsn_weights w;
    const double **f = (const double **)&w;
    for (int i = 0; i < VSN_NP; i++) f[i] = c->in[2 + i].x;
    return w;
}
static void vsn_fwd(op_case *c) {
    const st_dims *d = c->d;
    st_vsn_weights w = vsn_w(c);
    st_vsn_forward(VSN_ROWS, d->F, d->C, d->Dv, c->in[0].x, d->F, c->in[1].x, d->C, &w, c->out[0].y, d->Dv,
                   c->out[1].y, d->F, c->scratch[0], c->scratch[1]);
}
static void vsn_bwd(op_case *c) {
    const st_dims *d = c->d;
    st_vsn_weights w = vsn_w(c);
    st_vsn_grads g;
    double **f = (double **)&g;
    for (int i = 0; i < VSN_NP; i++) f[i] = c->in[2 + i].g;
    st_vsn_backward_ex(VSN_ROWS, d->F, d->C, d->Dv, c->in[0].x, d->F, c->in[1].x, d->C, &w, c->scratch[0],
                       c->out[0].R, d->Dv, c->out[1].R, d->F, c->in[0].g, d->F, c->in[1].g, d->C, 0, &g,
                       c->scratch[1]);
}
static void vsn_case(op_case *c) {
    const st_dims *d = c->d;
    c->name = "vsn";
    input(c, "s", VSN_ROWS, d->F, 1, 0);
    input(c, "c", VSN_ROWS, d->C, 1, 0);
    for (int i = 0; i < VSN_NP; i++) param_input(c, vsn_params[i]);
    output(c, VSN_ROWS, d->Dv);
    output(c, VSN_ROWS, d->F);
    c->scratch[0] = fresh(c, (long)st_vsn_saved_count(VSN_ROWS, d->F, d->C, d->Dv), 0);
    c->scratch[1] = fresh(c, (long)st_vsn_work_count(VSN_ROWS, d->F, d->C, d->Dv), 0);
    c->forward = vsn_fwd;
    c->backward = vsn_bwd;
}

/* ---- causal depthwise conv + SiLU over 2 windows ---- */
static void conv_fwd(op_case *c) {
    const st_dims *d = c->d;
    int ch = st_conv_dim(d);
    st_conv1d_forward(2, d->K, ch, d->W, c->in[0].x, ch, c->in[1].x, c->in[2].x, 1, c->out[0].y, ch);
}
static void conv_bwd(op_case *c) {
    const st_dims *d = c->d;
    int ch = st_conv_dim(d);
    st_conv1d_backward(2, d->K, ch, d->W, c->in[0].x, ch, c->in[1].x, c->in[2].x, 1, c->out[0].R, ch, c->in[0].g,
                       ch, c->in[1].g, c->in[2].g, c->scratch[0]);
}
static void conv_case(op_case *c) {
    const st_dims *d = c->d;
    int ch = st_conv_dim(d);
    c->name = "conv1d";
    input(c, "x", 2 * d->K, ch, 1, 0);
    input(c, "weight", ch, d->W, 0.5, 0);
    input(c, "bias", 1, ch, 0.5, 0);
    output(c, 2 * d->K, ch);
    c->scratch[0] = fresh(c, (long)st_conv1d_work_count(2, d->K, ch), 0);
    c->forward = conv_fwd;
    c->backward = conv_bwd;
}

/* ---- gated RMSNorm ---- */
static void rms_fwd(op_case *c) {
    int n = st_d_inner(c->d);
    st_rmsnorm_gated_forward(LIN_ROWS, n, c->in[0].x, n, c->in[1].x, n, c->in[2].x, 1e-5, c->out[0].y, n,
                             c->scratch[0]);
}
static void rms_bwd(op_case *c) {
    int n = st_d_inner(c->d);
    st_rmsnorm_gated_backward(LIN_ROWS, n, c->in[0].x, n, c->in[1].x, n, c->in[2].x, c->scratch[0], c->out[0].R, n,
                              c->in[0].g, n, c->in[1].g, n, c->in[2].g);
}
static void rms_case(op_case *c) {
    int n = st_d_inner(c->d);
    c->name = "rmsnorm_gated";
    input(c, "y", LIN_ROWS, n, 1, 0);
    input(c, "z", LIN_ROWS, n, 1, 0);
    input(c, "weight", 1, n, 0.3, 1);
    output(c, LIN_ROWS, n);
    c->scratch[0] = fresh(c, LIN_ROWS, 0);
    c->forward = rms_fwd;
    c->backward = rms_bwd;
}

/* ---- SSD (chunked), 2 windows ---- */
static void ssd_dims(const st_dims *d, int *H, int *P, int *G, int *N) {
    *H = st_heads(d), *P = d->headdim, *G = d->G, *N = d->N;
}
static void ssd_fwd(op_case *c) {
    int H, P, G, N;
    ssd_dims(c->d, &H, &P, &G, &N);
    st_ssd_forward_chunked(2, c->d->K, H, P, G, N, c->d->Q, c->in[0].x, H * P, c->in[1].x, H, c->in[2].x,
                           c->in[3].x, G * N, c->in[4].x, G * N, c->in[5].x, c->out[0].y, H * P, c->scratch[0]);
}
static void ssd_bwd(op_case *c) {
    int H, P, G, N;
    ssd_dims(c->d, &H, &P, &G, &N);
    st_ssd_backward_chunked(2, c->d->K, H, P, G, N, c->d->Q, c->in[0].x, H * P, c->in[1].x, H, c->in[2].x,
                            c->in[3].x, G * N, c->in[4].x, G * N, c->in[5].x, c->out[0].R, H * P, c->in[0].g, H * P,
                            c->in[1].g, H, c->in[2].g, c->in[3].g, G * N, c->in[4].g, G * N, c->in[5].g,
                            c->scratch[0]);
}
static void ssd_case(op_case *c) {
    int H, P, G, N, K = c->d->K;
    ssd_dims(c->d, &H, &P, &G, &N);
    c->name = "ssd";
    input(c, "x", 2 * K, H * P, 1, 0);
    double *dt = input(c, "dt", 2 * K, H, 0.02, 0.05); /* positive, softplus range */
    double *A = input(c, "A", 1, H, 0.5, -2);           /* negative */
    input(c, "B", 2 * K, G * N, 1, 0);
    input(c, "C", 2 * K, G * N, 1, 0);
    input(c, "Dskip", 1, H, 0.3, 1);
    for (int i = 0; i < 2 * K * H; i++) dt[i] = dt[i] > 1e-3 ? dt[i] : 1e-3;
    for (int h = 0; h < H; h++) A[h] = A[h] < -0.1 ? A[h] : -0.1;
    output(c, 2 * K, H * P);
    c->scratch[0] = fresh(c, (long)st_ssd_work_count(2, K, H, P, G, N, c->d->Q), 0);
    c->forward = ssd_fwd;
    c->backward = ssd_bwd;
}

/* ---- one Mamba2 block (layer 0's parameters), 2 windows ---- */
static const char *const mix_params[] = {"ln.0.weight",  "ln.0.bias",     "mix.0.in_proj.weight", "mix.0.conv_w",
                                         "mix.0.conv_b", "mix.0.dt_bias", "mix.0.A_log",          "mix.0.Dskip",
                                         "mix.0.norm_w", "mix.0.out_proj.weight"};
static void mix_fwd(op_case *c) {
    const double **f;
    st_mamba2_weights w;
    f = (const double **)&w;
    for (int i = 0; i < 10; i++) f[i] = c->in[1 + i].x;
    int D = c->d->D;
    st_mamba2_forward(c->d, 2, &w, c->in[0].x, D, c->out[0].y, D, c->scratch[0], c->scratch[1]);
}
static void mix_bwd(op_case *c) {
    st_mamba2_weights w;
    st_mamba2_grads g;
    const double **f = (const double **)&w;
    double **gf = (double **)&g;
    for (int i = 0; i < 10; i++) f[i] = c->in[1 + i].x, gf[i] = c->in[1 + i].g;
    int D = c->d->D;
    st_mamba2_backward(c->d, 2, &w, c->in[0].x, D, c->scratch[0], c->out[0].R, D, c->in[0].g, D, &g,
                       c->scratch[1]);
}
static void mix_case(op_case *c) {
    c->name = "mamba2";
    input(c, "u", 2 * c->d->K, c->d->D, 1, 0);
    for (int i = 0; i < 10; i++) param_input(c, mix_params[i]);
    output(c, 2 * c->d->K, c->d->D);
    c->scratch[0] = fresh(c, (long)st_mamba2_saved_count(c->d, 2), 0);
    c->scratch[1] = fresh(c, (long)st_mamba2_work_count(c->d, 2), 0);
    c->forward = mix_fwd;
    c->backward = mix_bwd;
}

/* ---- PPO loss of logits and values (the scalar is the output) ---- */
enum { PPO_N = 16 };
static void ppo_fwd(op_case *c) {
    const st_ppo_coefs k = {0.2, 0.2, 0.5, 0.01};
    st_ppo_stats s;
    st_ppo_loss(PPO_N, c->d->A, c->in[0].x, c->d->A, c->ints, c->scratch[0], c->scratch[1], c->in[1].x,
                c->scratch[2], c->scratch[3], &k, &s, c->scratch[4], c->d->A, c->scratch[5]);
    c->out[0].y[0] = s.loss;
}
static void ppo_bwd(op_case *c) {
    ppo_fwd(c); /* gradients come out of the forward pass, for R = out[0].R[0] */
    double r = c->out[0].R[0];
    for (int i = 0; i < PPO_N * c->d->A; i++) c->in[0].g[i] = r * c->scratch[4][i];
    for (int i = 0; i < PPO_N; i++) c->in[1].g[i] = r * c->scratch[5][i];
}
static void ppo_case(op_case *c) {
    int A = c->d->A;
    c->name = "ppo_loss";
    input(c, "logits", PPO_N, A, 1, 0);
    input(c, "value", 1, PPO_N, 1, 0);
    c->scratch[0] = fresh(c, PPO_N, 0.3);   /* old log-prob noise */
    for (int i = 0; i < PPO_N; i++) c->scratch[0][i] -= 1.1;
    c->scratch[1] = fresh(c, PPO_N, 1.0);   /* advantages */
    c->scratch[2] = fresh(c, PPO_N, 0.5);   /* old values */
    c->scratch[3] = fresh(c, PPO_N, 1.0);   /* returns */
    c->scratch[4] = fresh(c, PPO_N * A, 0); /* dlogits */
    c->scratch[5] = fresh(c, PPO_N, 0);     /* dvalue */
    c->ints = malloc(sizeof(int) * PPO_N);
    for (int i = 0; i < PPO_N; i++) c->ints[i] = i % A;
    output(c, 1, 1);
    c->forward = ppo_fwd;
    c->backward = ppo_bwd;
}

int st_gradcheck_ops(const st_dims *d, uint64_t seed, int max_checks, st_gc_table *out) {
    ST_TRY(st_dims_validate(d));
    void (*cases[])(op_case *) = {linear_case, ln_case, vsn_case, conv_case, rms_case,
                                  ssd_case,    mix_case, heads_case, ppo_case};
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
