/* bench_gpu_util.c: the shared pieces of the GPU benchmarks (cli/bench_gpu.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cli/bench.h"

#ifdef ST_HAVE_CUDA
#include "cli/bench_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/philox.h"

/* ---- checked CUDA calls ------------------------------------------------ */

int st_bench_cu_status(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return ST_OK;
    return st_fail(file, line, ST_ERR_DEVICE, "%s: %s", what, cudaGetErrorString(e));
}

int st_bench_blas_status(cublasStatus_t s, const char *what, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return ST_OK;
    return st_fail(file, line, ST_ERR_DEVICE, "%s: cuBLAS status %d", what, (int)s);
}

double st_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t st_bench_mem_free(void) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) return 0;
    return f;
}

double st_bench_gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

/* A failed configuration: its message on the console and in the JSON. */
void st_bench_record_error(cJSON *row, const char *what) {
    const char *msg = st_last_error();
    printf("  %s: FAILED: %s\n", what, msg[0] ? msg : "(no message)");
    fflush(stdout);
    cJSON_AddStringToObject(row, "error", msg[0] ? msg : "failed");
    /* a non-sticky CUDA error must not leak into the next configuration */
    (void)cudaGetLastError();
    st_clear_error();
}

/* ---- device buffers with their byte count ------------------------------ */

int st_bench_pool_alloc(st_bench_pool *pl, void **out, size_t bytes) {
    *out = NULL;
    ST_REQUIRE(pl->n < ST_BENCH_POOL_MAX, ST_ERR_INTERNAL, "bench: more than %d device buffers", ST_BENCH_POOL_MAX);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return ST_FAIL(ST_ERR_DEVICE, "cudaMalloc of %zu bytes (%.2f GiB held by the benchmark already): %s", bytes,
                       st_bench_gib((double)pl->bytes), cudaGetErrorString(e));
    pl->p[pl->n++] = p;
    pl->bytes += bytes;
    *out = p;
    return ST_OK;
}

void st_bench_pool_free(st_bench_pool *pl) {
    for (int i = 0; i < pl->n; i++)
        cudaFree(pl->p[i]);
    memset(pl, 0, sizeof *pl);
}

/* A synchronous upload on the legacy stream. From pageable memory it may
 * return before the DMA lands, and our streams are non-blocking: every
 * setup ends with st_bench_settle() before work is enqueued on them. */
int st_bench_upload(void *dst, const void *src, size_t bytes) {
    BCU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return ST_OK;
}

int st_bench_settle(void) { return CUS(cudaDeviceSynchronize()); }

/* ---- what a measurement's setup shares ------------------------------------ */

int st_bench_setup_init(st_bench_setup *b, const st_bench_opts *o, int weights) {
    memset(b, 0, sizeof *b);
    int rc = ST_OK;
    if (weights) {
        rc = st_param_table_build(&o->d, &b->table);
        if (rc == ST_OK)
            rc = (b->w0 = malloc(sizeof(float) * b->table.total)) ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "no memory");
        if (rc == ST_OK) st_params_init_f32(&b->table, o->seed, b->w0);
    }
    if (rc == ST_OK) rc = st_cuda_features_upload(o->market, &b->feat);
    if (rc == ST_OK) rc = CUS(cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking));
    if (rc == ST_OK) rc = st_bench_settle();
    return rc;
}

void st_bench_setup_free(st_bench_setup *b) {
    if (b->s) cudaStreamDestroy(b->s);
    if (b->feat.data || b->feat.inst) st_cuda_features_free(&b->feat);
    free(b->w0);
    st_param_table_free(&b->table);
    memset(b, 0, sizeof *b);
}

/* ---- timing ------------------------------------------------------------- */

/* warmup untimed runs, then `repeats` runs each between two events. */
int st_bench_time_launches(st_bench_launch_fn fn, void *ctx, int warmup, int repeats, cudaStream_t s,
                           st_bench_times *out) {
    for (int i = 0; i < warmup; i++)
        ST_TRY(fn(ctx, i, s));
    BCU(cudaStreamSynchronize(s));
    cudaEvent_t *ev = calloc((size_t)2 * repeats, sizeof *ev);
    double *ms = calloc((size_t)repeats, sizeof *ms);
    int rc = ev && ms ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of memory for %d timing events", 2 * repeats);
    int made = 0;
    for (; rc == ST_OK && made < 2 * repeats; made++)
        rc = CUS(cudaEventCreate(&ev[made]));
    if (rc != ST_OK && made > 0) made--; /* the failed one was not created */
    for (int i = 0; rc == ST_OK && i < repeats; i++) {
        rc = CUS(cudaEventRecord(ev[2 * i], s));
        if (rc == ST_OK) rc = fn(ctx, warmup + i, s);
        if (rc == ST_OK) rc = CUS(cudaEventRecord(ev[2 * i + 1], s));
    }
    if (rc == ST_OK) rc = CUS(cudaStreamSynchronize(s));
    for (int i = 0; rc == ST_OK && i < repeats; i++) {
        float f = 0;
        rc = CUS(cudaEventElapsedTime(&f, ev[2 * i], ev[2 * i + 1]));
        ms[i] = f;
    }
    if (rc == ST_OK) *out = st_bench_summarize(ms, repeats);
    for (int k = 0; k < made; k++)
        cudaEventDestroy(ev[k]);
    free(ev);
    free(ms);
    return rc;
}

int st_bench_capture_graph(st_bench_step_fn fn, void *ctx, int k, cudaStream_t s, cudaGraphExec_t *exec) {
    cudaGraph_t g = NULL;
    *exec = NULL;
    BCU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    int rc = fn(ctx, k, s);
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (rc == ST_OK && e != cudaSuccess)
        rc = ST_FAIL(ST_ERR_DEVICE, "capturing the step as a CUDA graph: %s", cudaGetErrorString(e));
    if (rc == ST_OK) rc = CUS(cudaGraphInstantiate(exec, g, 0));
    if (g) cudaGraphDestroy(g);
    if (rc != ST_OK) {
        *exec = NULL;
        (void)cudaGetLastError();
    }
    return rc;
}

typedef struct {
    cudaGraphExec_t exec[ST_BENCH_MAX_SETS];
    int n;
} graph_set;

static int replay(void *ctx, int i, cudaStream_t s) {
    graph_set *g = ctx;
    return CUS(cudaGraphLaunch(g->exec[i % g->n], s));
}

/* One graph per input set k < n of fn; then warm-up and timed replays. */
int st_bench_capture_and_time(st_bench_step_fn fn, void *ctx, int n, const st_bench_opts *o, cudaStream_t s,
                              st_bench_times *t) {
    graph_set g;
    memset(&g, 0, sizeof g);
    int rc = ST_OK;
    for (int k = 0; k < n && rc == ST_OK; k++) {
        rc = st_bench_capture_graph(fn, ctx, k, s, &g.exec[k]);
        if (rc == ST_OK) g.n++;
    }
    if (rc == ST_OK) rc = st_bench_time_launches(replay, &g, o->warmup, o->repeats, s, t);
    for (int k = 0; k < g.n; k++)
        cudaGraphExecDestroy(g.exec[k]);
    return rc;
}

/* ---- random host inputs (Philox test stream) ---------------------------- */

void st_bench_fill_normal(float *x, size_t n, double scale, uint64_t seed, uint32_t salt) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    r.index = (uint64_t)salt << 40;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * st_rng_normal(&r));
}

/* (instrument, bar) pairs uniform over the training split of m. */
void st_bench_draw_pairs(const st_market *m, int n, uint64_t seed, uint32_t salt, int *inst, int *bar) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    r.index = (uint64_t)salt << 40;
    for (int b = 0; b < n; b++) {
        int i = (int)st_rng_below(&r, (uint32_t)m->n_inst);
        const st_instrument *in = &m->inst[i];
        int lo = in->split_begin[ST_SPLIT_TRAIN], hi = in->split_end[ST_SPLIT_TRAIN];
        inst[b] = i;
        bar[b] = lo + (int)st_rng_below(&r, (uint32_t)(hi - lo));
    }
}

void st_bench_draw_segments(const st_market *m, int n, int S, int H, uint64_t seed, uint32_t salt, int *inst,
                            int *bar) {
    if (S <= 1) {
        st_bench_draw_pairs(m, n, seed, salt, inst, bar);
        return;
    }
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    r.index = (uint64_t)salt << 40;
    for (int b0 = 0; b0 < n; b0 += S) {
        int i = 0, at = 0, lo = 0, hi = 0, phase = (int)st_rng_below(&r, (uint32_t)H);
        for (int u = 0; u < S && b0 + u < n; u++, at++, phase++) {
            if (u == 0 || phase >= H || at >= hi) { /* the environment's (next) episode starts */
                i = (int)st_rng_below(&r, (uint32_t)m->n_inst);
                lo = m->inst[i].split_begin[ST_SPLIT_TRAIN], hi = m->inst[i].split_end[ST_SPLIT_TRAIN];
                at = lo + (int)st_rng_below(&r, (uint32_t)(hi - lo));
                if (u > 0) phase = 0;
            }
            inst[b0 + u] = i;
            bar[b0 + u] = at;
        }
    }
}

void st_bench_draw_actions(int n, int A, uint64_t seed, uint32_t salt, int *a) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    r.index = (uint64_t)salt << 40;
    for (int b = 0; b < n; b++)
        a[b] = (int)st_rng_below(&r, (uint32_t)A);
}

size_t st_bench_features_bytes(const st_market *m) {
    size_t b = sizeof(float *) * (size_t)m->n_inst;
    for (int i = 0; i < m->n_inst; i++)
        b += sizeof(float) * (size_t)m->inst[i].n * (size_t)m->F;
    return b;
}

cJSON *st_bench_row(cJSON *arr, const char *size_key, int size, int precision) {
    cJSON *row = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, row);
    cJSON_AddNumberToObject(row, size_key, size);
    cJSON_AddStringToObject(row, "precision", st_bench_precision_name(precision));
    return row;
}

void st_bench_add_times(cJSON *row, const st_bench_times *t) {
    cJSON_AddNumberToObject(row, "median_ms", t->median);
    cJSON_AddNumberToObject(row, "p10_ms", t->p10);
    cJSON_AddNumberToObject(row, "p90_ms", t->p90);
    cJSON_AddNumberToObject(row, "repeats", t->count);
}

#endif
