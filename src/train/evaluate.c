/* evaluate.c: the model as a policy of the backtest (evaluate.h). */
#include "train/evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/philox.h"
#include "env/window.h"
#include "train/trainer.h"

int st_agent_init(st_agent *a, st_model *model, const st_market *m, int greedy, uint64_t seed) {
    memset(a, 0, sizeof *a);
    const st_dims *d = &model->d;
    int n = m->n_inst;
    ST_REQUIRE(model->max_windows >= n, ST_ERR_INTERNAL, "agent: the model holds %d windows, the market has %d",
               model->max_windows, n);
    a->model = model;
    a->m = m;
    a->greedy = greedy;
    a->seed = seed;
    a->win = malloc(sizeof(float) * (size_t)n * d->K * (d->F + d->C));
    a->logits = malloc(sizeof(float) * (size_t)n * d->A);
    a->value = malloc(sizeof(float) * (size_t)n);
    a->importance = calloc((size_t)d->F, sizeof(double));
    ST_REQUIRE(a->win && a->logits && a->value && a->importance, ST_ERR_MEMORY, "agent: out of memory");
    return ST_OK;
}

void st_agent_free(st_agent *a) {
    free(a->win);
    free(a->logits);
    free(a->value);
    free(a->importance);
    memset(a, 0, sizeof *a);
}

int st_agent_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions) {
    st_agent *a = user;
    const st_dims *d = &a->model->d;
    int B = e->B, row = d->F + d->C;
    ST_REQUIRE(B <= a->model->max_windows, ST_ERR_INTERNAL, "agent: %d instances exceed the model's %d windows",
               B, a->model->max_windows);
    ST_TRY(st_window_build(a->m, B, d->K, e->inst, e->bar, ctx, d->C, ctx_stride, a->win, row));
    st_model_forward(a->model, B, a->win, row, a->logits, d->A, a->value);
    st_agent_decide(d, e, a->logits, a->model->vsn_alpha, a->model->alpha_stride, a->seed, a->greedy, actions,
                    a->importance, &a->importance_rows);
    return ST_OK;
}

void st_agent_decide(const st_dims *d, const st_env *e, const float *logits, const float *alpha, int alpha_stride,
                     uint64_t seed, int greedy, int *actions, double *importance, long *importance_rows) {
    int B = e->B;
    double u[B > 0 ? B : 1];
    u[0] = 0; /* B >= 1 always; says so to the compiler */
    for (int b = 0; b < B; b++) {
        uint64_t idx = ((uint64_t)(uint32_t)e->inst[b] << 32) | (uint32_t)e->bar[b];
        st_philox4 r = st_philox_draw(seed ^ ST_AGENT_SALT, ST_STREAM_EVAL, idx);
        u[b] = st_u01d(r.v[0], r.v[1]);
    }
    st_select_actions(B, d->A, logits, u, greedy, actions, NULL);
    /* importance: the selection weights of the rows of walking instruments */
    for (int b = 0; b < B; b++) {
        if (!e->active[b]) continue;
        for (int k = 0; k < d->K; k++) {
            const float *al = alpha + ((size_t)b * d->K + (size_t)k) * (size_t)alpha_stride;
            for (int j = 0; j < d->F; j++) importance[j] += al[j];
        }
        *importance_rows += d->K;
    }
}
