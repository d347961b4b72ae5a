/* model_io.h: the run shared by the model_io tools (model_io.c in double,
 * model_io_f32.c in float): read DIR/weights.safetensors and
 * DIR/batch.safetensors, run the whole model of DESIGN section 5 forward,
 * the PPO loss of train/ppo_loss.h, and the backward, and write every
 * output and gradient to one safetensors file (always F64, whatever the
 * precision of the run) for scripts/torch_parity.py.
 *
 *   weights:  every parameter under its DESIGN name, F64; metadata holds the
 *             sizes (K, F, C, Dv, D, L, expand, headdim, N, G, W, Q, Hh, A)
 *   batch:    window [n, K, F+C], action [n] I32, old_logp, adv, old_value,
 *             ret [n], all F64 except action
 *   outputs:  logits [n, A], value [n], grad.logits [n, A], grad.value [n]
 *             (the loss's gradient at the model outputs), loss, loss.policy,
 *             loss.value, loss.entropy, loss.approx_kl, loss.clipfrac [1],
 *             grad.<name> for every parameter, grad.window [n, K, F+C]
 * The loss coefficients are fixed: clip 0.2, vclip 0.2, vf 0.5, ent 0.01.
 *
 * Precision: include this after defining ST_REAL_BITS (the translation unit
 * has one precision); inputs are converted from double to `real` on the
 * way in and results back to double on the way out. Functions are static
 * inline: each tool is one translation unit and need not use them all. */
#ifndef ST_TOOLS_MODEL_IO_H
#define ST_TOOLS_MODEL_IO_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/real.h"
#include "core/safetensors.h"
#include "model/model.h"
#include "model/params.h"
#include "train/ppo_loss.h"

#define MIO_NDIMS 14
#define MIO_PATH 4096

static const st_ppo_coefs mio_coefs = {.clip = 0.2, .vclip = 0.2, .vf_coef = 0.5, .ent_coef = 0.01};

/* The sizes that travel in the weights file's metadata (B and T do not
 * shape the model). */
static inline int *mio_dim_field(st_dims *d, int i, const char **key) {
    static const char *const keys[MIO_NDIMS] = {"K", "F", "C", "Dv", "D", "L", "expand",
                                                "headdim", "N", "G", "W", "Q", "Hh", "A"};
    int *const fields[MIO_NDIMS] = {&d->K, &d->F, &d->C, &d->Dv, &d->D, &d->L, &d->expand,
                                    &d->headdim, &d->N, &d->G, &d->W, &d->Q, &d->Hh, &d->A};
    *key = keys[i];
    return fields[i];
}

/* The sizes as metadata entries; text holds the values' strings. */
static inline void mio_dims_meta(const st_dims *d, char text[MIO_NDIMS][16], st_st_meta *meta) {
    st_dims c = *d;
    for (int i = 0; i < MIO_NDIMS; i++) {
        int *v = mio_dim_field(&c, i, &meta[i].key);
        snprintf(text[i], 16, "%d", *v);
        meta[i].value = text[i];
    }
}

/* The sizes back from a weights file's metadata (B and T set to 1). */
static inline int mio_dims_read(const st_safetensors *f, st_dims *d) {
    memset(d, 0, sizeof *d);
    d->B = d->T = 1;
    for (int i = 0; i < MIO_NDIMS; i++) {
        const char *key;
        int *v = mio_dim_field(d, i, &key);
        const char *s = st_safetensors_meta(f, key);
        ST_REQUIRE(s, ST_ERR_INPUT, "%s: no size '%s' in the metadata", f->path, key);
        char *end;
        long x = strtol(s, &end, 10);
        ST_REQUIRE(*end == '\0' && x > 0 && x < 1000000, ST_ERR_INPUT, "%s: size %s = '%s' is not a positive integer",
                   f->path, key, s);
        *v = (int)x;
    }
    return st_dims_validate(d);
}

/* A tensor entry of the writer's list. */
static inline st_st_tensor mio_tensor(const char *name, st_dtype dt, int ndim, int64_t s0, int64_t s1, int64_t s2,
                               const void *data) {
    st_st_tensor t = {.name = name, .dtype = dt, .ndim = ndim, .data = data};
    t.shape[0] = s0, t.shape[1] = s1, t.shape[2] = s2;
    return t;
}

/* A parameter's shape as the safetensors writer wants it. */
static inline st_st_tensor mio_param_tensor(const st_param *p, const char *name, const void *data) {
    return mio_tensor(name, ST_DT_F64, p->ndim, p->shape[0], p->shape[1], p->shape[2], data);
}

/* "DIR/file" */
static inline void mio_join(char *out, const char *dir, const char *file) { snprintf(out, MIO_PATH, "%s/%s", dir, file); }

/* The PPO batch and window, in double as stored. */
typedef struct {
    int n;
    double *X; /* [n, K, F+C] contiguous */
    int *action;
    double *old_logp, *adv, *old_value, *ret; /* [n] each */
} mio_batch;

static inline void mio_batch_free(mio_batch *b) {
    free(b->X), free(b->action), free(b->old_logp), free(b->adv), free(b->old_value), free(b->ret);
    memset(b, 0, sizeof *b);
}

static inline int mio_batch_alloc(mio_batch *b, const st_dims *d, int n) {
    memset(b, 0, sizeof *b);
    b->n = n;
    size_t xs = (size_t)n * d->K * (d->F + d->C);
    b->X = malloc(sizeof(double) * xs);
    b->action = malloc(sizeof(int) * (size_t)n);
    b->old_logp = malloc(sizeof(double) * (size_t)n);
    b->adv = malloc(sizeof(double) * (size_t)n);
    b->old_value = malloc(sizeof(double) * (size_t)n);
    b->ret = malloc(sizeof(double) * (size_t)n);
    if (!b->X || !b->action || !b->old_logp || !b->adv || !b->old_value || !b->ret) {
        mio_batch_free(b);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for a batch of %d windows", n);
    }
    return ST_OK;
}

/* Reads the batch file written by model_io (n from the window's shape). */
static inline int mio_batch_read(const char *path, const st_dims *d, mio_batch *b) {
    st_safetensors f;
    ST_TRY(st_safetensors_open(path, &f));
    st_dtype dt;
    int nd;
    int64_t sh[4];
    const void *data;
    size_t bytes;
    int rc = st_safetensors_find(&f, "window", &dt, &nd, sh, &data, &bytes);
    if (rc == ST_OK && (nd != 3 || sh[0] < 1 || sh[1] != d->K || sh[2] != d->F + d->C))
        rc = ST_FAIL(ST_ERR_INPUT, "%s: the window is not [n, %d, %d]", path, d->K, d->F + d->C);
    if (rc == ST_OK) rc = mio_batch_alloc(b, d, (int)sh[0]);
    if (rc == ST_OK) {
        int64_t n = b->n;
        rc = st_safetensors_read(&f, "window", ST_DT_F64, 3, sh, b->X);
        if (rc == ST_OK) rc = st_safetensors_read(&f, "action", ST_DT_I32, 1, &n, b->action);
        if (rc == ST_OK) rc = st_safetensors_read(&f, "old_logp", ST_DT_F64, 1, &n, b->old_logp);
        if (rc == ST_OK) rc = st_safetensors_read(&f, "adv", ST_DT_F64, 1, &n, b->adv);
        if (rc == ST_OK) rc = st_safetensors_read(&f, "old_value", ST_DT_F64, 1, &n, b->old_value);
        if (rc == ST_OK) rc = st_safetensors_read(&f, "ret", ST_DT_F64, 1, &n, b->ret);
        for (int i = 0; rc == ST_OK && i < b->n; i++)
            if (b->action[i] < 0 || b->action[i] >= d->A)
                rc = ST_FAIL(ST_ERR_INPUT, "%s: action %d of sample %d is outside [0, %d)", path, b->action[i], i, d->A);
        if (rc != ST_OK) mio_batch_free(b);
    }
    st_safetensors_close(&f);
    return rc;
}

/* Reads every parameter of t from the weights file into w (double). */
static inline int mio_weights_read(const st_safetensors *f, const st_param_table *t, double *w) {
    for (int i = 0; i < t->n; i++) {
        const st_param *p = &t->p[i];
        int64_t sh[3] = {p->shape[0], p->shape[1], p->shape[2]};
        ST_TRY(st_safetensors_read(f, p->name, ST_DT_F64, p->ndim, sh, w + p->offset));
    }
    return ST_OK;
}

/* A `real` copy of n doubles (NULL when out of memory). */
static inline real *mio_to_real(const double *x, size_t n) {
    real *r = malloc(sizeof(real) * (n ? n : 1));
    if (r)
        for (size_t i = 0; i < n; i++) r[i] = (real)x[i];
    return r;
}

/* A double copy of n reals (NULL when out of memory). */
static inline double *mio_to_double(const real *x, size_t n) {
    double *r = malloc(sizeof(double) * (n ? n : 1));
    if (r)
        for (size_t i = 0; i < n; i++) r[i] = (double)x[i];
    return r;
}

/* What one run produces, in double for writing. */
typedef struct {
    double *logits, *value, *dlogits, *dvalue; /* [n, A], [n], [n, A], [n] */
    double *g;                                 /* [t->total] parameter gradients */
    double *dX;                                /* [n, K, F+C] */
    st_ppo_stats s;
} mio_out;

static inline void mio_out_free(mio_out *o) {
    free(o->logits), free(o->value), free(o->dlogits), free(o->dvalue), free(o->g), free(o->dX);
    memset(o, 0, sizeof *o);
}

/* The model in `real` on the batch: forward, PPO loss, backward. */
static inline int mio_run(const st_dims *d, const st_param_table *t, const double *w64, const mio_batch *b, mio_out *o) {
    memset(o, 0, sizeof *o);
    int n = b->n, A = d->A, row = d->F + d->C;
    size_t xs = (size_t)n * d->K * row, na = (size_t)n * A;
    real *w = mio_to_real(w64, t->total), *g = calloc(t->total, sizeof(real)), *X = mio_to_real(b->X, xs);
    real *dX = malloc(sizeof(real) * xs), *buf = malloc(sizeof(real) * (2 * na + 6 * (size_t)n));
    int rc = ST_OK;
    if (!w || !g || !X || !dX || !buf) {
        rc = ST_FAIL(ST_ERR_MEMORY, "out of memory for the model run");
        goto done;
    }
    real *logits = buf, *dlogits = logits + na, *value = dlogits + na, *dvalue = value + n;
    real *old_logp = dvalue + n, *adv = old_logp + n, *old_value = adv + n, *ret = old_value + n;
    for (int i = 0; i < n; i++) {
        old_logp[i] = (real)b->old_logp[i], adv[i] = (real)b->adv[i];
        old_value[i] = (real)b->old_value[i], ret[i] = (real)b->ret[i];
    }
    st_model m;
    rc = st_model_init(&m, d, t, n, w, g);
    if (rc != ST_OK) goto done;
    st_model_forward(&m, n, X, row, logits, A, value);
    st_ppo_loss(n, A, logits, A, b->action, old_logp, adv, value, old_value, ret, &mio_coefs, &o->s, dlogits, A,
                dvalue);
    st_model_backward(&m, dlogits, A, dvalue, dX, row);
    st_model_free(&m);
    o->logits = mio_to_double(logits, na), o->dlogits = mio_to_double(dlogits, na);
    o->value = mio_to_double(value, (size_t)n), o->dvalue = mio_to_double(dvalue, (size_t)n);
    o->g = mio_to_double(g, t->total), o->dX = mio_to_double(dX, xs);
    if (!o->logits || !o->dlogits || !o->value || !o->dvalue || !o->g || !o->dX) {
        mio_out_free(o);
        rc = ST_FAIL(ST_ERR_MEMORY, "out of memory for the model's outputs");
    }
done:
    free(w), free(g), free(X), free(dX), free(buf);
    return rc;
}

/* Writes the outputs file (layout at the top). */
static inline int mio_write_outputs(const char *path, const st_dims *d, const st_param_table *t, int n, const mio_out *o) {
    int nt = t->n + 12, k = 0;
    st_st_tensor *ts = calloc((size_t)nt, sizeof *ts);
    char(*names)[64] = calloc((size_t)t->n, sizeof *names);
    if (!ts || !names) {
        free(ts), free(names);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for the outputs' header");
    }
    ts[k++] = mio_tensor("logits", ST_DT_F64, 2, n, d->A, 1, o->logits);
    ts[k++] = mio_tensor("value", ST_DT_F64, 1, n, 1, 1, o->value);
    ts[k++] = mio_tensor("grad.logits", ST_DT_F64, 2, n, d->A, 1, o->dlogits);
    ts[k++] = mio_tensor("grad.value", ST_DT_F64, 1, n, 1, 1, o->dvalue);
    ts[k++] = mio_tensor("loss", ST_DT_F64, 1, 1, 1, 1, &o->s.loss);
    ts[k++] = mio_tensor("loss.policy", ST_DT_F64, 1, 1, 1, 1, &o->s.policy);
    ts[k++] = mio_tensor("loss.value", ST_DT_F64, 1, 1, 1, 1, &o->s.value);
    ts[k++] = mio_tensor("loss.entropy", ST_DT_F64, 1, 1, 1, 1, &o->s.entropy);
    ts[k++] = mio_tensor("loss.approx_kl", ST_DT_F64, 1, 1, 1, 1, &o->s.approx_kl);
    ts[k++] = mio_tensor("loss.clipfrac", ST_DT_F64, 1, 1, 1, 1, &o->s.clipfrac);
    ts[k++] = mio_tensor("grad.window", ST_DT_F64, 3, n, d->K, d->F + d->C, o->dX);
    for (int i = 0; i < t->n; i++) {
        snprintf(names[i], sizeof names[i], "grad.%s", t->p[i].name);
        ts[k++] = mio_param_tensor(&t->p[i], names[i], o->g + t->p[i].offset);
    }
    st_st_meta meta[] = {{"precision", ST_REAL_NAME}, {"format", "ssmtrade model_io outputs"}};
    int rc = st_safetensors_write(path, ts, k, meta, 2);
    free(ts), free(names);
    return rc;
}

/* The whole run of a tool: DIR's weights and batch in, DIR/out_file out. */
static inline int mio_run_dir(const char *dir, const char *out_file, int verbose) {
    char path[MIO_PATH];
    st_safetensors wf;
    mio_join(path, dir, "weights.safetensors");
    ST_TRY(st_safetensors_open(path, &wf));
    st_dims d;
    st_param_table t = {0};
    mio_batch b = {0};
    mio_out o = {0};
    double *w = NULL;
    int rc = mio_dims_read(&wf, &d);
    if (rc == ST_OK) rc = st_param_table_build(&d, &t);
    if (rc == ST_OK && !(w = malloc(sizeof(double) * t.total))) rc = ST_FAIL(ST_ERR_MEMORY, "out of memory");
    if (rc == ST_OK) rc = mio_weights_read(&wf, &t, w);
    st_safetensors_close(&wf);
    mio_join(path, dir, "batch.safetensors");
    if (rc == ST_OK) rc = mio_batch_read(path, &d, &b);
    if (rc == ST_OK) rc = mio_run(&d, &t, w, &b, &o);
    mio_join(path, dir, out_file);
    if (rc == ST_OK) rc = mio_write_outputs(path, &d, &t, b.n, &o);
    if (rc == ST_OK && verbose)
        printf("model_io (%s): %d windows, %zu parameters: loss %.15g (policy %.6g, value %.6g, entropy %.6g) -> %s\n",
               ST_REAL_NAME, b.n, t.total, o.s.loss, o.s.policy, o.s.value, o.s.entropy, path);
    mio_out_free(&o);
    mio_batch_free(&b);
    free(w);
    st_param_table_free(&t);
    return rc;
}

#endif
