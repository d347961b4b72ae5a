/* model_check.c: the whole-model gradient check (model_check.h).
 *
 * The scalar is the PPO loss of the model's logits and values with fixed
 * random actions, advantages, old log-probabilities and returns, so the
 * check covers the composition the trainer differentiates. Float64 only. */
#define ST_REAL_BITS 64
#include "check/model_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/gradcheck.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/model.h"
#include "train/ppo_loss.h"

void st_gc_table_add(st_gc_table *t, const char *name, double rel_err, int checked) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->rows = realloc(t->rows, sizeof *t->rows * (size_t)t->cap);
    }
    st_gc_row *r = &t->rows[t->n++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->rel_err = rel_err;
    r->checked = checked;
}

void st_gc_table_free(st_gc_table *t) {
    free(t->rows);
    memset(t, 0, sizeof *t);
}

int st_gc_table_failures(const st_gc_table *t) {
    int bad = 0;
    for (int i = 0; i < t->n; i++) bad += !(t->rows[i].rel_err <= ST_GC_BOUND) || t->rows[i].checked <= 0;
    return bad;
}

typedef struct {
    st_model *m;
    int n, A;
    double *X, *logits, *value, *dlogits, *dvalue;
    int *action;
    double *old_logp, *adv, *old_value, *ret;
    st_ppo_coefs k;
} model_ctx;

static double model_loss(void *p) {
    model_ctx *c = p;
    st_model_forward(c->m, c->n, c->X, c->m->d.F + c->m->d.C, c->logits, c->A, c->value);
    st_ppo_stats s;
    st_ppo_loss(c->n, c->A, c->logits, c->A, c->action, c->old_logp, c->adv, c->value, c->old_value, c->ret, &c->k,
                &s, c->dlogits, c->A, c->dvalue);
    return s.loss;
}

int st_gradcheck_model(const st_dims *d, int n, uint64_t seed, int max_checks, st_gc_table *out) {
    st_param_table t;
    ST_TRY(st_param_table_build(d, &t));
    int A = d->A, row = d->F + d->C;
    long xs = (long)n * d->K * row;
    double *w = malloc(sizeof(double) * t.total), *g = calloc(t.total, sizeof(double));
    double *X = malloc(sizeof(double) * (size_t)xs), *dX = malloc(sizeof(double) * (size_t)xs);
    double *buf = malloc(sizeof(double) * (size_t)n * (2 * A + 6));
    int *action = malloc(sizeof(int) * (size_t)n);
    st_model m;
    int rc = st_model_init(&m, d, &t, n, w, g);
    if (rc != ST_OK) goto done;
    /* Perturb every parameter away from its init (norm weights of exactly 1,
     * zero biases) so that every path carries a gradient. */
    st_params_init_f64(&t, seed, w);
    double *noise = malloc(sizeof(double) * t.total);
    st_gc_randn(noise, (long)t.total, 0.05, seed, 11);
    for (size_t i = 0; i < t.total; i++) w[i] += noise[i];
    free(noise);
    st_gc_randn(X, xs, 1.0, seed, 12);
    model_ctx c = {.m = &m, .n = n, .A = A, .X = X, .action = action};
    c.logits = buf;
    c.dlogits = buf + (size_t)n * A;
    c.value = c.dlogits + (size_t)n * A;
    c.dvalue = c.value + n;
    c.old_logp = c.dvalue + n;
    c.adv = c.old_logp + n;
    c.old_value = c.adv + n;
    c.ret = c.old_value + n;
    st_gc_randn(c.adv, n, 1.0, seed, 13);
    st_gc_randn(c.old_value, n, 0.5, seed, 14);
    st_gc_randn(c.ret, n, 1.0, seed, 15);
    st_gc_randn(c.old_logp, n, 0.3, seed, 16);
    for (int i = 0; i < n; i++) {
        action[i] = i % A;
        c.old_logp[i] -= 1.1; /* near log(1/3): ratios around 1, both clip regimes */
    }
    c.k = (st_ppo_coefs){.clip = 0.2, .vclip = 0.2, .vf_coef = 0.5, .ent_coef = 0.01};
    /* analytic */
    model_loss(&c);
    st_model_backward(&m, c.dlogits, A, c.dvalue, dX, row);
    char name[64];
    for (int i = 0; i < t.n; i++) {
        const st_param *p = &t.p[i];
        int cols = p->ndim == 1 ? p->shape[0] : (int)(p->count / (size_t)p->shape[0]);
        int rows = p->ndim == 1 ? 1 : p->shape[0];
        st_gc_result r = st_gc_tensor(model_loss, &c, w + p->offset, rows, cols, cols, g + p->offset, cols,
                                      max_checks, seed + (uint64_t)i);
        snprintf(name, sizeof name, "model/%s", p->name);
        st_gc_table_add(out, name, r.rel_err, r.checked);
    }
    st_gc_result r = st_gc_tensor(model_loss, &c, X, n * d->K, row, row, dX, row, 4 * max_checks, seed + 999);
    st_gc_table_add(out, "model/window", r.rel_err, r.checked);
    st_model_free(&m);
done:
    free(w), free(g), free(X), free(dX), free(buf), free(action);
    st_param_table_free(&t);
    return rc;
}
