/* trainer_cuda_dist.c: the data-parallel parts of the GPU trainer
 * (train/trainer_cuda_dist.h). */
#include "train/trainer_cuda_dist.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "trace/trace.h"

int st_cuda_dist_check(const st_train_config *cfg, const st_dist *dist) {
    if (!dist || dist->world <= 1) return ST_OK;
    const st_dims *d = &cfg->dims;
    int W = dist->world;
    ST_REQUIRE(d->B % W == 0, ST_ERR_INPUT,
               "--batch %d does not split over %d GPUs: make it a multiple of %d (each GPU steps B / GPUs "
               "environments)", d->B, W, W);
    long mb = cfg->minibatches > 0 ? (long)d->T * d->B / cfg->minibatches : 0;
    ST_REQUIRE(mb % W == 0, ST_ERR_INPUT,
               "the minibatch of %ld windows (--rollout %d x --batch %d / --minibatches %d) does not split over %d "
               "GPUs: each GPU trains on minibatch / GPUs windows", mb, d->T, d->B, cfg->minibatches, W);
    return ST_OK;
}

#ifdef ST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/host_check.h"

int st_cuda_dist_gather_rollout(st_cuda_trainer *t) {
    size_t n = (size_t)t->Nl, C = (size_t)t->host.cfg.dims.C;
    struct {
        void *p;
        size_t bytes;
    } parts[] = {
        {t->r_inst, sizeof(int) * n},     {t->r_bar, sizeof(int) * n},        {t->r_ctx, sizeof(float) * n * C},
        {t->r_action, sizeof(int) * n},   {t->r_logp, sizeof(float) * n},     {t->r_value, sizeof(float) * n},
        {t->r_reward, sizeof(float) * n}, {t->r_done, n},                     {t->r_epR, sizeof(float) * n},
        {t->adv, sizeof(float) * n},      {t->ret, sizeof(float) * n},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ST_TRY(st_dist_allgather(t->dist, parts[i].p, parts[i].bytes, t->stream));
    return ST_OK;
}

int st_cuda_dist_push_env(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    st_env slice;
    ST_TRY(st_env_create(&slice, h->m, t->Bl, &h->env.cfg));
    slice.b0 = t->b0;
    st_env_copy_instances(&slice, 0, &h->env, t->b0, t->Bl);
    int rc = st_cuda_env_upload(&t->env, &slice);
    st_env_free(&slice);
    ST_TRY(rc);
    size_t C = (size_t)h->cfg.dims.C;
    ST_CU(cudaMemcpy(t->ctx, h->ctx + (size_t)t->b0 * C, sizeof(float) * (size_t)t->Bl * C, cudaMemcpyHostToDevice));
    ST_CU(cudaDeviceSynchronize()); /* landed before the trainer's stream reads it */
    return ST_OK;
}

int st_cuda_dist_pull_env(st_cuda_trainer *t) {
    st_trainer *h = &t->host;
    cudaStream_t s = (cudaStream_t)t->stream;
    size_t C = (size_t)h->cfg.dims.C, W = (size_t)t->world;
    if (!t->g_env) {
        t->env_stride = (t->env.block_bytes + 255) / 256 * 256;
        ST_CU(cudaMalloc(&t->g_env, W * t->env_stride));
        ST_CU(cudaMalloc((void **)&t->g_ctx, sizeof(float) * (size_t)h->cfg.dims.B * C));
    }
    char *g = (char *)t->g_env;
    ST_CU(cudaMemcpyAsync(g + (size_t)t->rank * t->env_stride, t->env.dev.block, t->env.block_bytes,
                          cudaMemcpyDeviceToDevice, s));
    ST_TRY(st_dist_allgather(t->dist, g, t->env_stride, s));
    size_t ctx_bytes = sizeof(float) * (size_t)t->Bl * C;
    ST_CU(cudaMemcpyAsync(t->g_ctx + (size_t)t->b0 * C, t->ctx, ctx_bytes, cudaMemcpyDeviceToDevice, s));
    ST_TRY(st_dist_allgather(t->dist, t->g_ctx, ctx_bytes, s));
    ST_CU(cudaStreamSynchronize(s));
    char *host = aligned_alloc(64, W * t->env_stride);
    ST_REQUIRE(host, ST_ERR_MEMORY, "out of memory for the ranks' environment states");
    int rc = cudaMemcpy(host, g, W * t->env_stride, cudaMemcpyDeviceToHost) == cudaSuccess ? ST_OK
             : ST_FAIL(ST_ERR_DEVICE, "copying the ranks' environment states to the host");
    for (int r = 0; rc == ST_OK && r < t->world; r++) {
        st_env view = h->env; /* rank r's block, carved as its device twin was (B / world instances) */
        view.B = t->Bl;
        st_env_layout(&view, host + (size_t)r * t->env_stride, h->m->n_inst);
        st_env_copy_instances(&h->env, r * t->Bl, &view, 0, t->Bl);
    }
    free(host);
    ST_TRY(rc);
    ST_CU(cudaMemcpy(h->ctx, t->g_ctx, sizeof(float) * (size_t)h->cfg.dims.B * C, cudaMemcpyDeviceToHost));
    return ST_OK;
}

int st_cuda_dist_trips(st_cuda_trainer *t, int64_t seq0, int *any, int *first_rank) {
    const st_trace *tr = t->trace;
    int first = tr && tr->ntrip > 0 ? st_trace_first(tr) : -1;
    int64_t mine[4] = {first >= 0, first >= 0 ? tr->rec[first].step : INT64_MAX,
                       first >= 0 ? tr->rec[first].seq - seq0 : INT64_MAX, 0};
    cudaStream_t s = (cudaStream_t)t->stream;
    ST_CU(cudaMemcpyAsync(t->g_word + 4 * t->rank, mine, sizeof mine, cudaMemcpyHostToDevice, s));
    ST_TRY(st_dist_allgather(t->dist, t->g_word, sizeof mine, s));
    int W = t->world;
    int64_t *all = malloc(sizeof(int64_t) * 4 * (size_t)W);
    ST_REQUIRE(all, ST_ERR_MEMORY, "out of memory");
    int rc = cudaMemcpyAsync(all, t->g_word, sizeof(int64_t) * 4 * (size_t)W, cudaMemcpyDeviceToHost, s) ==
                     cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess
                 ? ST_OK
                 : ST_FAIL(ST_ERR_DEVICE, "reading the ranks' tracer words back");
    *any = 0;
    *first_rank = -1;
    for (int r = 0; r < W; r++) {
        const int64_t *w = all + 4 * r;
        if (!w[0]) continue;
        const int64_t *b = *first_rank >= 0 ? all + 4 * *first_rank : NULL;
        if (!b || w[1] < b[1] || (w[1] == b[1] && w[2] < b[2])) *first_rank = r;
        *any = 1;
    }
    free(all);
    return rc;
}

int st_cuda_trainer_any(st_cuda_trainer *t, int mine, int *any) {
    *any = mine != 0;
    if (!t->dist) return ST_OK;
    double v = mine != 0, *dv = (double *)(void *)t->g_word; /* 8 bytes of the tracer's words */
    cudaStream_t s = (cudaStream_t)t->stream;
    ST_CU(cudaMemcpyAsync(dv, &v, sizeof v, cudaMemcpyHostToDevice, s));
    ST_TRY(st_dist_allreduce(t->dist, dv, 1, ST_DIST_F64, ST_DIST_MAX, s));
    ST_CU(cudaMemcpyAsync(&v, dv, sizeof v, cudaMemcpyDeviceToHost, s));
    ST_CU(cudaStreamSynchronize(s));
    *any = v != 0;
    return ST_OK;
}

#else /* no CUDA backend: trainer_cuda.c never calls these */

int st_cuda_dist_gather_rollout(st_cuda_trainer *t) {
    (void)t;
    return ST_FAIL(ST_ERR_DEVICE, "this build has no CUDA backend");
}
int st_cuda_dist_push_env(st_cuda_trainer *t) { return st_cuda_dist_gather_rollout(t); }
int st_cuda_dist_pull_env(st_cuda_trainer *t) { return st_cuda_dist_gather_rollout(t); }
int st_cuda_trainer_any(st_cuda_trainer *t, int mine, int *any) {
    *any = mine != 0;
    (void)t;
    return ST_OK;
}
int st_cuda_dist_trips(st_cuda_trainer *t, int64_t seq0, int *any, int *first_rank) {
    (void)seq0;
    *any = 0, *first_rank = -1;
    return st_cuda_dist_gather_rollout(t);
}

#endif
