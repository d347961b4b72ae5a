/* evaluate_cuda.c: the model on the GPU as a policy of the backtest
 * (train/evaluate_cuda.h). Host C over the CUDA runtime API: per bar one
 * upload of the (instrument, bar, context) triples, the window build and
 * the forward on the default stream, one download of the logits and the
 * selection weights, then st_agent_act's host logic. */
#include "train/evaluate_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/error.h"

#ifdef ST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/host_check.h"

#include "core/philox.h"
#include "train/trainer.h"


/* Bytes of the upload area: inst [max_B], bar [max_B] (int), ctx [max_B, C] (float). */
static size_t io_bytes(int max_B, int C) {
    return sizeof(int) * 2 * (size_t)max_B + sizeof(float) * (size_t)max_B * (size_t)C;
}

static void io_carve(void *base, int max_B, int **inst, int **bar, float **ctx) {
    int *p = base;
    *inst = p;
    *bar = p + max_B;
    *ctx = (float *)(p + 2 * (size_t)max_B);
}

static int agent_alloc(st_cuda_agent *a, const st_param_table *t, const float *w_host) {
    const st_dims *d = &a->d;
    int n = a->max_B, rows = n * d->K;
    size_t P = t->total, io = io_bytes(n, d->C);
    ST_CU(cudaMalloc((void **)&a->w, sizeof(float) * (P ? P : 1)));
    ST_CU(cudaMalloc((void **)&a->g, sizeof(float) * (P ? P : 1)));
    ST_CU(cudaMemcpy(a->w, w_host, sizeof(float) * P, cudaMemcpyHostToDevice));
    ST_CU(cudaMemset(a->g, 0, sizeof(float) * (P ? P : 1)));
    ST_CU(cudaMalloc(&a->d_io, io));
    io_carve(a->d_io, n, &a->d_inst, &a->d_bar, &a->d_ctx);
    ST_CU(cudaMalloc((void **)&a->d_win, sizeof(float) * (size_t)rows * st_row_width(d)));
    ST_CU(cudaMalloc((void **)&a->d_logits, sizeof(float) * (size_t)n * d->A));
    ST_CU(cudaMalloc((void **)&a->d_value, sizeof(float) * (size_t)n));
    ST_CU(cudaMallocHost(&a->h_io, io));
    io_carve(a->h_io, n, &a->h_inst, &a->h_bar, &a->h_ctx);
    ST_CU(cudaMallocHost((void **)&a->logits, sizeof(float) * (size_t)n * d->A));
    ST_CU(cudaMallocHost((void **)&a->alpha, sizeof(float) * (size_t)rows * d->F));
    a->importance = calloc((size_t)d->F, sizeof(double));
    ST_REQUIRE(a->importance, ST_ERR_MEMORY, "GPU agent: out of memory");
    ST_TRY(st_cuda_features_upload(a->m, &a->feat));
    a->have_feat = 1;
    ST_TRY(st_cuda_model_init(&a->model, d, t, n, a->w, a->g));
    a->have_model = 1;
    return ST_OK;
}

int st_cuda_agent_init(st_cuda_agent *a, const st_dims *d, const st_param_table *t, const float *w_host,
                       const st_market *m, int greedy, uint64_t seed) {
    memset(a, 0, sizeof *a);
    ST_REQUIRE(st_cuda_devices() > 0, ST_ERR_DEVICE, "GPU agent: %s", st_cuda_describe());
    ST_TRY(st_dims_validate(d));
    ST_REQUIRE(d->F == m->F, ST_ERR_INPUT, "GPU agent: the model reads %d snapshot features, the market has %d", d->F,
               m->F);
    ST_REQUIRE(m->n_inst > 0, ST_ERR_INPUT, "GPU agent: the market has no instruments");
    a->d = *d;
    a->m = m;
    a->greedy = greedy;
    a->seed = seed;
    a->max_B = m->n_inst;
    int rc = agent_alloc(a, t, w_host);
    if (rc != ST_OK) st_cuda_agent_free(a);
    return rc;
}

void st_cuda_agent_free(st_cuda_agent *a) {
    if (a->have_model) st_cuda_model_free(&a->model);
    if (a->have_feat) st_cuda_features_free(&a->feat);
    /* statuses of a teardown have nowhere to go */
    void *dev[] = {a->w, a->g, a->d_io, a->d_win, a->d_logits, a->d_value};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) (void)cudaFree(dev[i]);
    void *pinned[] = {a->h_io, a->logits, a->alpha};
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
        if (pinned[i]) (void)cudaFreeHost(pinned[i]);
    free(a->importance);
    memset(a, 0, sizeof *a);
}

/* The pair checks of st_window_build (the device builder takes bars as valid). */
static int check_pairs(const st_cuda_agent *a, const st_env *e) {
    const st_market *m = a->m;
    int K = a->d.K;
    for (int b = 0; b < e->B; b++) {
        ST_REQUIRE(e->inst[b] >= 0 && e->inst[b] < m->n_inst, ST_ERR_INPUT, "GPU agent: pair %d: no instrument %d", b,
                   e->inst[b]);
        const st_instrument *I = &m->inst[e->inst[b]];
        ST_REQUIRE(e->bar[b] >= K - 1 && e->bar[b] < I->n, ST_ERR_INPUT,
                   "GPU agent: pair %d: bar %d of %s leaves no room for K = %d bars (n = %d)", b, e->bar[b], I->name,
                   K, I->n);
    }
    return ST_OK;
}

/* Logits and selection weights of the B windows of e into a->logits, a->alpha. */
static int forward(st_cuda_agent *a, const st_env *e, const float *ctx, int ctx_stride) {
    const st_dims *d = &a->d;
    int B = e->B, C = d->C, ws = st_row_width(d);
    memcpy(a->h_inst, e->inst, sizeof(int) * (size_t)B);
    memcpy(a->h_bar, e->bar, sizeof(int) * (size_t)B);
    for (int b = 0; b < B; b++) memcpy(a->h_ctx + (size_t)b * C, ctx + (size_t)b * ctx_stride, sizeof(float) * C);
    ST_CU(cudaMemcpy(a->d_io, a->h_io, io_bytes(a->max_B, C), cudaMemcpyHostToDevice));
    ST_TRY(st_cuda_window_build(B, d->K, d->F, C, (const float *const *)a->feat.inst, a->feat.F, a->d_inst, a->d_bar,
                                a->d_ctx, C, a->d_win, ws, NULL));
    ST_TRY(st_cuda_model_forward(&a->model, B, a->d_win, ws, a->d_logits, d->A, a->d_value));
    ST_CU(cudaMemcpy(a->logits, a->d_logits, sizeof(float) * (size_t)B * d->A, cudaMemcpyDeviceToHost));
    ST_CU(cudaMemcpy(a->alpha, a->model.vsn_alpha, sizeof(float) * (size_t)B * d->K * d->F, cudaMemcpyDeviceToHost));
    ST_CU(cudaGetLastError());
    return ST_OK;
}

int st_cuda_agent_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions) {
    st_cuda_agent *a = user;
    const st_dims *d = &a->d;
    int B = e->B;
    ST_REQUIRE(B > 0 && B <= a->max_B, ST_ERR_INTERNAL, "GPU agent: %d instances, room for 1..%d", B, a->max_B);
    ST_REQUIRE(ctx_stride >= d->C, ST_ERR_INPUT, "GPU agent: context stride %d < C = %d", ctx_stride, d->C);
    ST_TRY(check_pairs(a, e));
    ST_TRY(forward(a, e, ctx, ctx_stride));
    /* from here on: the CPU agent's host logic */
    st_agent_decide(d, e, a->logits, a->alpha, d->F, a->seed, a->greedy, actions, a->importance,
                    &a->importance_rows);
    return ST_OK;
}

#else /* no CUDA backend */

int st_cuda_agent_init(st_cuda_agent *a, const st_dims *d, const st_param_table *t, const float *w_host,
                       const st_market *m, int greedy, uint64_t seed) {
    (void)d, (void)t, (void)w_host, (void)m, (void)greedy, (void)seed;
    memset(a, 0, sizeof *a);
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend (nvcc was not found)");
}

void st_cuda_agent_free(st_cuda_agent *a) { memset(a, 0, sizeof *a); }

int st_cuda_agent_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions) {
    (void)user, (void)e, (void)ctx, (void)ctx_stride, (void)actions;
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend (nvcc was not found)");
}

#endif

void st_cuda_agent_importance(const st_cuda_agent *a, double *mean) {
    for (int j = 0; j < a->d.F; j++)
        mean[j] = a->importance_rows && a->importance ? a->importance[j] / (double)a->importance_rows : 0;
}
