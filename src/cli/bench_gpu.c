/* bench_gpu.c: the measurements of `ssmtrade bench` (cli/bench.h, issue 7).
 *
 *  ceilings  device-to-device copy (bytes read + written per second); cuBLAS
 *            GEMM at M = N = K = gemm_size on random data: fp32 sgemm (no
 *            TF32), bf16 in/out with fp32 accumulation, and fp32 in/out on
 *            the bf16 tensor cores (COMPUTE_32F_FAST_16BF, the mode of our
 *            bf16 linears); TFLOP/s = 2 M N K / time.
 *  train     one PPO training step over n windows: window build from random
 *            (instrument, bar) pairs of the synthetic market's training
 *            split + forward + PPO loss + zero grads + backward + grad norm
 *            + clip + AdamW, one CUDA graph per input set, replays rotated.
 *  act       one action step over n environments: window build from the
 *            environments' (instrument, bar, context) + forward + action
 *            sampling + environment step, one graph; the environments
 *            advance from replay to replay.
 *  envwin    environment step with pre-drawn random actions (one graph per
 *            action buffer) + window build at B environments; also each
 *            half alone.
 *  e2e       full PPO updates through the GPU trainer (train/trainer_cuda.h):
 *            env steps/s = T B / median update seconds (wall clock, device
 *            synchronised).
 *
 * Hand count of a training step (st_bench_train_cost), per window row,
 * forward, 2 flops per multiply-add:
 *   VSN     2 F Dv (embeddings) + 2 F Dv (F + Hs) + 2 C Hs + 2 Hs^2 + 4 Hs F
 *           (selection GRN: skip, fc1, ctx, fc2, glu) + F (4 Dv^2 + 4 Dv^2)
 *           (per-variable GRNs: fc1, fc2, glu) + 2 F Dv (weighted sum)
 *   w_in    2 (Dv + C) D
 *   block   2 D (2 d_inner + 2 G N + H) (in_proj) + 2 W conv_dim
 *           + SSD: 2 Q G N (C.B in a chunk) + 2 Q H P (its product with x)
 *           + 4 H P N (chunk states, state outputs) + 2 d_inner D (out_proj)
 *   heads   per window: 4 (D + C) Hh + 2 Hh (A + 1)
 * backward = 2 x forward (input and weight gradient of every product);
 * element-wise work is not counted. Bytes (an estimate of DRAM traffic):
 * 3 x the model's activation arena (every activation written once forward,
 * read once backward, an equal-size gradient written once), 3 x the window
 * (features read and window written by the builder, read by the model),
 * 11 x 4 bytes per parameter (AdamW reads w, g, m, v and writes w, m, v;
 * zeroing, norm and clip touch g four times). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cli/bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

const char *st_bench_precision_name(int p) { return p == 1 ? "bf16" : "fp32"; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile_sorted(const double *x, int n, double q) {
    if (n <= 0) return NAN;
    double at = q * (n - 1);
    int lo = (int)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    return x[lo] + (at - lo) * (x[hi] - x[lo]);
}

st_bench_times st_bench_summarize(double *x, int n) {
    st_bench_times t = {NAN, NAN, NAN, n};
    if (n <= 0) return t;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    t.median = quantile_sorted(x, n, 0.5);
    t.p10 = quantile_sorted(x, n, 0.1);
    t.p90 = quantile_sorted(x, n, 0.9);
    return t;
}

#ifdef ST_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/device.h"
#include "core/philox.h"
#include "cuda/adamw_cuda.h"
#include "cuda/env_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/model_cuda.h"
#include "cuda/ppo_loss_cuda.h"
#include "cuda/select_cuda.h"
#include "cuda/window_cuda.h"
#include "env/env.h"
#include "model/params.h"
#include "train/train_config.h"
#include "train/trainer_cuda.h"

st_bench_cost st_bench_train_cost(const st_dims *d, int n, size_t params) {
    double F = d->F, C = d->C, Dv = d->Dv, D = d->D, Hs = st_sel_hidden(d), K = d->K;
    double di = st_d_inner(d), H = st_heads(d), P = d->headdim, N = d->N, G = d->G, W = d->W, Q = d->Q;
    double vsn = 2 * F * Dv + 2 * F * Dv * (F + Hs) + 2 * C * Hs + 2 * Hs * Hs + 4 * Hs * F + F * 8 * Dv * Dv +
                 2 * F * Dv;
    double w_in = 2 * (Dv + C) * D;
    double ssd = 2 * Q * G * N + 2 * Q * H * P + 4 * H * P * N;
    double block = 2 * D * st_in_proj_out(d) + 2 * W * st_conv_dim(d) + ssd + 2 * di * D;
    double heads = 4 * (D + C) * d->Hh + 2 * d->Hh * (d->A + 1);
    double fwd = (double)n * (K * (vsn + w_in + d->L * block) + heads);
    st_bench_cost c;
    c.flops = 3 * fwd;
    c.act_bytes = (double)st_cuda_model_activation_bytes(d, n);
    double window = (double)n * K * (F + C) * sizeof(float);
    c.bytes = 3 * c.act_bytes + 3 * window + 11.0 * sizeof(float) * (double)params;
    return c;
}

/* ---- checked CUDA calls ------------------------------------------------ */

static int cu_status(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return ST_OK;
    return st_fail(file, line, ST_ERR_DEVICE, "%s: %s", what, cudaGetErrorString(e));
}
#define CUS(call) cu_status((call), #call, __FILE__, __LINE__)
#define BCU(call) ST_TRY(CUS(call))

static int blas_status(cublasStatus_t s, const char *what, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return ST_OK;
    return st_fail(file, line, ST_ERR_DEVICE, "%s: cuBLAS status %d", what, (int)s);
}
#define BLAS(call) blas_status((call), #call, __FILE__, __LINE__)

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t mem_free(void) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) return 0;
    return f;
}

static double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

/* A failed configuration: its message on the console and in the JSON. */
static void record_error(cJSON *row, const char *what) {
    const char *msg = st_last_error();
    printf("  %s: FAILED: %s\n", what, msg[0] ? msg : "(no message)");
    fflush(stdout);
    cJSON_AddStringToObject(row, "error", msg[0] ? msg : "failed");
    /* a non-sticky CUDA error must not leak into the next configuration */
    (void)cudaGetLastError();
    st_clear_error();
}

/* ---- device buffers with their byte count ------------------------------ */

#define POOL_MAX 256
typedef struct {
    void *p[POOL_MAX];
    int n;
    size_t bytes;
} dev_pool;

static int pool_alloc(dev_pool *pl, void **out, size_t bytes) {
    *out = NULL;
    ST_REQUIRE(pl->n < POOL_MAX, ST_ERR_INTERNAL, "bench: more than %d device buffers", POOL_MAX);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return ST_FAIL(ST_ERR_DEVICE, "cudaMalloc of %zu bytes (%.2f GiB held by the benchmark already): %s", bytes,
                       gib((double)pl->bytes), cudaGetErrorString(e));
    pl->p[pl->n++] = p;
    pl->bytes += bytes;
    *out = p;
    return ST_OK;
}
#define PALLOC(pl, ptr, count) pool_alloc((pl), (void **)&(ptr), sizeof *(ptr) * (size_t)(count))

static void pool_free(dev_pool *pl) {
    for (int i = 0; i < pl->n; i++) cudaFree(pl->p[i]);
    memset(pl, 0, sizeof *pl);
}

/* A synchronous upload on the legacy stream. From pageable memory it may
 * return before the DMA lands, and our streams are non-blocking: every
 * setup ends with settle() before work is enqueued on them. */
static int up(void *dst, const void *src, size_t bytes) {
    BCU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return ST_OK;
}

static int settle(void) { return CUS(cudaDeviceSynchronize()); }

/* ---- timing ------------------------------------------------------------- */

/* Enqueues run i of a measurement on stream s. */
typedef int (*launch_fn)(void *ctx, int i, cudaStream_t s);

/* warmup untimed runs, then `repeats` runs each between two events. */
static int time_launches(launch_fn fn, void *ctx, int warmup, int repeats, cudaStream_t s, st_bench_times *out) {
    for (int i = 0; i < warmup; i++) ST_TRY(fn(ctx, i, s));
    BCU(cudaStreamSynchronize(s));
    cudaEvent_t *ev = calloc((size_t)2 * repeats, sizeof *ev);
    double *ms = calloc((size_t)repeats, sizeof *ms);
    int rc = ev && ms ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of memory for %d timing events", 2 * repeats);
    int made = 0;
    for (; rc == ST_OK && made < 2 * repeats; made++) rc = CUS(cudaEventCreate(&ev[made]));
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
    for (int k = 0; k < made; k++) cudaEventDestroy(ev[k]);
    free(ev);
    free(ms);
    return rc;
}

/* Enqueues one step (input set k) on s; captured into a graph below. */
typedef int (*step_fn)(void *ctx, int k, cudaStream_t s);

static int capture_graph(step_fn fn, void *ctx, int k, cudaStream_t s, cudaGraphExec_t *exec) {
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
static int capture_and_time(step_fn fn, void *ctx, int n, const st_bench_opts *o, cudaStream_t s,
                            st_bench_times *t) {
    graph_set g;
    memset(&g, 0, sizeof g);
    int rc = ST_OK;
    for (int k = 0; k < n && rc == ST_OK; k++) {
        rc = capture_graph(fn, ctx, k, s, &g.exec[k]);
        if (rc == ST_OK) g.n++;
    }
    if (rc == ST_OK) rc = time_launches(replay, &g, o->warmup, o->repeats, s, t);
    for (int k = 0; k < g.n; k++) cudaGraphExecDestroy(g.exec[k]);
    return rc;
}

/* ---- random host inputs (Philox test stream) ---------------------------- */

static void fill_normal(float *x, size_t n, double scale, uint64_t seed, uint32_t salt) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    r.index = (uint64_t)salt << 40;
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * st_rng_normal(&r));
}

/* (instrument, bar) pairs uniform over the training split of m. */
static void draw_pairs(const st_market *m, int n, uint64_t seed, uint32_t salt, int *inst, int *bar) {
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

static void draw_actions(int n, int A, uint64_t seed, uint32_t salt, int *a) {
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    r.index = (uint64_t)salt << 40;
    for (int b = 0; b < n; b++) a[b] = (int)st_rng_below(&r, (uint32_t)A);
}

static size_t features_bytes(const st_market *m) {
    size_t b = sizeof(float *) * (size_t)m->n_inst;
    for (int i = 0; i < m->n_inst; i++) b += sizeof(float) * (size_t)m->inst[i].n * (size_t)m->F;
    return b;
}

static void add_times(cJSON *row, const st_bench_times *t) {
    cJSON_AddNumberToObject(row, "median_ms", t->median);
    cJSON_AddNumberToObject(row, "p10_ms", t->p10);
    cJSON_AddNumberToObject(row, "p90_ms", t->p90);
    cJSON_AddNumberToObject(row, "repeats", t->count);
}

/* ======================================================================= */
/* ceilings                                                                */

typedef struct {
    cublasHandle_t h;
    int n, kind; /* 0 sgemm, 1 bf16 in/out, 2 fp32 in/out on bf16 tensor cores */
    float *A, *B, *C;
    uint16_t *A16, *B16, *C16;
    void *src, *dst;
    size_t copy_bytes;
} ceil_ctx;

static int run_copy(void *ctx, int i, cudaStream_t s) {
    (void)i;
    ceil_ctx *c = ctx;
    return CUS(cudaMemcpyAsync(c->dst, c->src, c->copy_bytes, cudaMemcpyDeviceToDevice, s));
}

static int run_gemm(void *ctx, int i, cudaStream_t s) {
    (void)i, (void)s; /* the handle is bound to s */
    ceil_ctx *c = ctx;
    const float one = 1.0f, zero = 0.0f;
    int n = c->n;
    if (c->kind == 0)
        return BLAS(cublasSgemm(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->A, n, c->B, n, &zero, c->C, n));
    if (c->kind == 1)
        return BLAS(cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->A16, CUDA_R_16BF, n, c->B16,
                                 CUDA_R_16BF, n, &zero, c->C16, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return BLAS(cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->A, CUDA_R_32F, n, c->B, CUDA_R_32F, n,
                             &zero, c->C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even (finite inputs) */
    return (uint16_t)(u >> 16);
}

/* Host matrices of n*n uniform values in [-1, 1): a random block of 2^22
 * values tiled with an offset per matrix (fresh Philox values, never zeros). */
static int gemm_inputs(ceil_ctx *c, dev_pool *pl, uint64_t seed) {
    size_t nn = (size_t)c->n * c->n, R = (size_t)1 << 22;
    float *blk = malloc(sizeof(float) * R), *h = malloc(sizeof(float) * nn);
    uint16_t *h16 = malloc(sizeof(uint16_t) * nn);
    int rc = blk && h && h16 ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of host memory for the GEMM inputs");
    if (rc == ST_OK) {
        st_rng r = st_rng_make(seed, ST_STREAM_TEST);
        for (size_t i = 0; i < R; i += 4) {
            st_philox4 d = st_rng_next4(&r);
            for (int k = 0; k < 4; k++) blk[i + k] = 2.0f * st_u01f(d.v[k]) - 1.0f;
        }
    }
    if (rc == ST_OK) rc = PALLOC(pl, c->A, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->B, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->C, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->A16, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->B16, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->C16, nn);
    for (int m = 0; m < 2 && rc == ST_OK; m++) {
        size_t off = m * 1234567u;
        for (size_t i = 0; i < nn; i++) h[i] = blk[(i + off) % R];
        for (size_t i = 0; i < nn; i++) h16[i] = to_bf16(h[i]);
        rc = up(m ? c->B : c->A, h, sizeof(float) * nn);
        if (rc == ST_OK) rc = up(m ? c->B16 : c->A16, h16, sizeof(uint16_t) * nn);
    }
    free(blk);
    free(h);
    free(h16);
    return rc;
}

int st_bench_ceilings(const st_bench_opts *o, cJSON *out) {
    cJSON *obj = cJSON_AddObjectToObject(out, "ceilings");
    printf("\n== ceilings: medians of %d runs after %d warm-up runs, CUDA events\n", o->repeats, o->warmup);
    fflush(stdout);
    cudaStream_t s = NULL;
    dev_pool pl;
    memset(&pl, 0, sizeof pl);
    ceil_ctx c;
    memset(&c, 0, sizeof c);
    int failed = 0;
    int rc = CUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* copy */
    c.copy_bytes = (size_t)o->copy_mib << 20;
    st_bench_times t;
    dev_pool cpl;
    memset(&cpl, 0, sizeof cpl);
    if (rc == ST_OK) rc = pool_alloc(&cpl, &c.src, c.copy_bytes);
    if (rc == ST_OK) rc = pool_alloc(&cpl, &c.dst, c.copy_bytes);
    if (rc == ST_OK) rc = CUS(cudaMemsetAsync(c.src, 0x3C, c.copy_bytes, s));
    if (rc == ST_OK) rc = time_launches(run_copy, &c, o->warmup, o->repeats, s, &t);
    cJSON *cp = cJSON_AddObjectToObject(obj, "copy");
    cJSON_AddNumberToObject(cp, "bytes", (double)c.copy_bytes);
    if (rc == ST_OK) {
        double gbs = 2.0 * (double)c.copy_bytes / (t.median * 1e-3) / 1e9;
        add_times(cp, &t);
        cJSON_AddNumberToObject(cp, "GBps", gbs);
        printf("  %-52s %9.1f GB/s   (median %.3f ms)\n", "device-to-device copy, bytes read + written", gbs, t.median);
    } else {
        record_error(cp, "copy");
        failed++;
    }
    pool_free(&cpl);
    c.src = c.dst = NULL;
    rc = ST_OK;

    /* GEMMs */
    c.n = o->gemm_size;
    rc = BLAS(cublasCreate(&c.h));
    if (rc == ST_OK) rc = BLAS(cublasSetStream(c.h, s));
    if (rc == ST_OK) rc = BLAS(cublasSetMathMode(c.h, CUBLAS_DEFAULT_MATH));
    if (rc == ST_OK) rc = gemm_inputs(&c, &pl, o->seed);
    if (rc == ST_OK) rc = settle();
    const char *names[3] = {"sgemm", "gemm_bf16", "gemm_fp32_fast_bf16"};
    const char *what[3] = {"sgemm fp32 (no TF32)", "gemm bf16 in/out, fp32 accumulate",
                           "gemm fp32 in/out, bf16 tensor cores (32F_FAST_16BF)"};
    double flops = 2.0 * (double)c.n * c.n * c.n;
    for (int k = 0; k < 3; k++) {
        cJSON *g = cJSON_AddObjectToObject(obj, names[k]);
        cJSON_AddNumberToObject(g, "size", c.n);
        int r = rc;
        c.kind = k;
        if (r == ST_OK) r = time_launches(run_gemm, &c, o->warmup, o->repeats, s, &t);
        if (r == ST_OK) {
            double tf = flops / (t.median * 1e-3) / 1e12;
            add_times(g, &t);
            cJSON_AddNumberToObject(g, "TFLOPs", tf);
            char label[96];
            snprintf(label, sizeof label, "%s, %d^3", what[k], c.n);
            printf("  %-52s %9.1f TFLOP/s (median %.3f ms)\n", label, tf, t.median);
        } else {
            record_error(g, names[k]);
            failed++;
        }
        fflush(stdout);
    }
    if (c.h) cublasDestroy(c.h);
    pool_free(&pl);
    if (s) cudaStreamDestroy(s);
    return failed;
}

/* ======================================================================= */
/* train                                                                   */

typedef struct {
    int *inst, *bar, *action;
    float *ctx, *old_logp, *adv, *old_value, *ret;
} train_inputs;

typedef struct {
    const st_dims *d;
    int n, sets;
    size_t P;
    const st_cuda_features *feat;
    st_cuda_model model;
    int model_ok;
    dev_pool pool;
    float *w, *g, *m, *v;
    unsigned char *decay;
    float *win, *logits, *value, *dlogits, *dvalue;
    double *loss_work, *norm_work, *gnorm;
    st_ppo_stats *stats;
    train_inputs in[ST_BENCH_MAX_SETS];
    st_adamw_hparams hp;
    st_ppo_coefs pc;
    double max_norm;
} train_bench;

static int train_step(void *ctx, int k, cudaStream_t s) {
    train_bench *t = ctx;
    const st_dims *d = t->d;
    const train_inputs *in = &t->in[k % t->sets];
    int n = t->n, ws = st_row_width(d);
    ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)t->feat->inst, t->feat->F, in->inst,
                                in->bar, in->ctx, d->C, t->win, ws, s));
    ST_TRY(st_cuda_model_forward(&t->model, n, t->win, ws, t->logits, d->A, t->value));
    ST_TRY(st_cuda_ppo_loss(n, d->A, t->logits, d->A, in->action, in->old_logp, in->adv, t->value, in->old_value,
                            in->ret, &t->pc, t->stats, t->dlogits, d->A, t->dvalue, t->loss_work, s));
    BCU(cudaMemsetAsync(t->g, 0, sizeof(float) * t->P, s));
    ST_TRY(st_cuda_model_backward(&t->model, t->dlogits, d->A, t->dvalue, NULL, 0));
    ST_TRY(st_cuda_grad_norm(t->P, t->g, t->gnorm, t->norm_work, s));
    ST_TRY(st_cuda_grad_clip(t->P, t->g, t->gnorm, t->max_norm, s));
    ST_TRY(st_cuda_adamw_step(t->P, t->w, t->g, t->m, t->v, t->decay, &t->hp, 1, s));
    return ST_OK;
}

static void train_free(train_bench *t) {
    if (t->model_ok) st_cuda_model_free(&t->model);
    t->model_ok = 0;
    pool_free(&t->pool);
}

/* Buffers, model and `sets` random input sets for n windows. */
static int train_setup(train_bench *t, const st_bench_opts *o, const st_param_table *table, int n, cudaStream_t s) {
    const st_dims *d = t->d;
    dev_pool *pl = &t->pool;
    size_t P = t->P;
    int C = d->C, A = d->A;
    t->n = n;
    ST_TRY(PALLOC(pl, t->w, P));
    ST_TRY(PALLOC(pl, t->g, P));
    ST_TRY(PALLOC(pl, t->m, P));
    ST_TRY(PALLOC(pl, t->v, P));
    ST_TRY(PALLOC(pl, t->decay, P));
    ST_TRY(PALLOC(pl, t->win, (size_t)n * d->K * st_row_width(d)));
    ST_TRY(PALLOC(pl, t->logits, (size_t)n * A));
    ST_TRY(PALLOC(pl, t->dlogits, (size_t)n * A));
    ST_TRY(PALLOC(pl, t->value, n));
    ST_TRY(PALLOC(pl, t->dvalue, n));
    ST_TRY(PALLOC(pl, t->loss_work, st_cuda_ppo_loss_work_count(n)));
    ST_TRY(PALLOC(pl, t->norm_work, st_cuda_grad_norm_work_count(P)));
    ST_TRY(PALLOC(pl, t->gnorm, 1));
    ST_TRY(PALLOC(pl, t->stats, 1));
    ST_TRY(st_cuda_adamw_decay_mask(table, t->decay));
    ST_TRY(st_cuda_model_init(&t->model, d, table, n, t->w, t->g));
    t->model_ok = 1;
    t->model.stream = (void *)s;
    int *hi = malloc(sizeof(int) * (size_t)n * 3);
    float *hf = malloc(sizeof(float) * (size_t)n * (C + 4));
    int rc = hi && hf ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of host memory for the training inputs");
    for (int k = 0; k < t->sets && rc == ST_OK; k++) {
        train_inputs *in = &t->in[k];
        uint32_t salt = 100 + 10 * (uint32_t)k;
        int *inst = hi, *bar = hi + n, *act = hi + 2 * n;
        float *ctx = hf, *olp = hf + (size_t)n * C, *adv = olp + n, *ov = adv + n, *ret = ov + n;
        draw_pairs(o->market, n, o->seed, salt, inst, bar);
        draw_actions(n, A, o->seed, salt + 1, act);
        fill_normal(ctx, (size_t)n * C, 0.5, o->seed, salt + 2);
        fill_normal(olp, (size_t)n, 0.1, o->seed, salt + 3);
        for (int b = 0; b < n; b++) olp[b] += (float)-log((double)A); /* near the initial uniform policy */
        fill_normal(adv, (size_t)n, 1.0, o->seed, salt + 4);
        fill_normal(ov, (size_t)n, 0.5, o->seed, salt + 5);
        fill_normal(ret, (size_t)n, 1.0, o->seed, salt + 6);
        rc = PALLOC(pl, in->inst, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->bar, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->action, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->ctx, (size_t)n * C);
        if (rc == ST_OK) rc = PALLOC(pl, in->old_logp, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->adv, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->old_value, n);
        if (rc == ST_OK) rc = PALLOC(pl, in->ret, n);
        if (rc == ST_OK) rc = up(in->inst, inst, sizeof(int) * n);
        if (rc == ST_OK) rc = up(in->bar, bar, sizeof(int) * n);
        if (rc == ST_OK) rc = up(in->action, act, sizeof(int) * n);
        if (rc == ST_OK) rc = up(in->ctx, ctx, sizeof(float) * (size_t)n * C);
        if (rc == ST_OK) rc = up(in->old_logp, olp, sizeof(float) * n);
        if (rc == ST_OK) rc = up(in->adv, adv, sizeof(float) * n);
        if (rc == ST_OK) rc = up(in->old_value, ov, sizeof(float) * n);
        if (rc == ST_OK) rc = up(in->ret, ret, sizeof(float) * n);
    }
    free(hi);
    free(hf);
    if (rc == ST_OK) rc = settle();
    return rc;
}

/* Fresh weights and zero moments (the same start for every precision). */
static int train_reset(train_bench *t, const float *w0, cudaStream_t s) {
    ST_TRY(up(t->w, w0, sizeof(float) * t->P));
    BCU(cudaMemsetAsync(t->m, 0, sizeof(float) * t->P, s));
    BCU(cudaMemsetAsync(t->v, 0, sizeof(float) * t->P, s));
    return settle();
}

/* One precision at n windows: an eager step (creates the cuBLAS handle,
 * reports errors outside capture), graphs, timing, finite check. */
static int train_measure(train_bench *t, const st_bench_opts *o, const float *w0, cudaStream_t s,
                         st_bench_times *tm, double *loss, double *gnorm) {
    ST_TRY(train_reset(t, w0, s));
    ST_TRY(train_step(t, 0, s));
    BCU(cudaStreamSynchronize(s));
    ST_TRY(capture_and_time(train_step, t, t->sets, o, s, tm));
    st_ppo_stats st;
    BCU(cudaMemcpy(&st, t->stats, sizeof st, cudaMemcpyDeviceToHost));
    BCU(cudaMemcpy(gnorm, t->gnorm, sizeof *gnorm, cudaMemcpyDeviceToHost));
    *loss = st.loss;
    ST_REQUIRE(isfinite(st.loss) && isfinite(*gnorm), ST_ERR_NUMERIC,
               "training step at %d windows: non-finite loss %g or gradient norm %g after the timed replays", t->n,
               st.loss, *gnorm);
    return ST_OK;
}

int st_bench_train(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "train");
    const st_dims *d = &o->d;
    printf("\n== train: window build + forward + PPO loss + zero grads + backward + grad norm + clip + AdamW;\n"
           "   one CUDA graph per input set (%d sets, rotated), median of %d replays after %d warm-up\n",
           o->sets, o->repeats, o->warmup);
    printf("  %7s %5s %9s %9s %9s %11s %8s %9s %9s %9s\n", "windows", "prec", "median ms", "p10 ms", "p90 ms",
           "windows/s", "TFLOP/s", "GB/s est", "held GiB", "used GiB");
    fflush(stdout);
    int failed = 0;
    st_train_config cfg;
    memset(&cfg, 0, sizeof cfg);
    st_param_table table;
    memset(&table, 0, sizeof table);
    st_cuda_features feat;
    memset(&feat, 0, sizeof feat);
    float *w0 = NULL;
    cudaStream_t s = NULL;
    int rc = st_train_config_default(&cfg, o->preset);
    if (rc == ST_OK) cfg.dims = *d;
    if (rc == ST_OK) rc = st_param_table_build(d, &table);
    if (rc == ST_OK) rc = (w0 = malloc(sizeof(float) * table.total)) ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "no memory");
    if (rc == ST_OK) st_params_init_f32(&table, o->seed, w0);
    if (rc == ST_OK) rc = st_cuda_features_upload(o->market, &feat);
    if (rc == ST_OK) rc = CUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (rc == ST_OK) rc = settle();
    if (rc != ST_OK) {
        record_error(cJSON_AddObjectToObject(out, "train_setup"), "train setup");
        failed++;
    }
    for (int i = 0; i < o->windows.n && rc == ST_OK; i++) {
        int n = o->windows.v[i];
        train_bench t;
        memset(&t, 0, sizeof t);
        t.d = d, t.sets = o->sets, t.P = table.total, t.feat = &feat;
        t.hp = (st_adamw_hparams){cfg.lr, cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay};
        t.pc = (st_ppo_coefs){cfg.clip, cfg.value_clip, cfg.vf_coef, cfg.ent_coef};
        t.max_norm = cfg.max_grad_norm;
        size_t free0 = mem_free();
        int r = train_setup(&t, o, &table, n, s);
        char setup_error[512] = "";
        if (r != ST_OK) snprintf(setup_error, sizeof setup_error, "%s", st_last_error());
        st_bench_cost cost = st_bench_train_cost(d, n, table.total);
        double held = (double)t.pool.bytes + (double)(t.model_ok ? t.model.arena_bytes : 0) + features_bytes(o->market);
        for (int k = 0; k < o->precision.n; k++) {
            int p = o->precision.v[k];
            cJSON *row = cJSON_CreateObject();
            cJSON_AddItemToArray(arr, row);
            cJSON_AddNumberToObject(row, "windows", n);
            cJSON_AddStringToObject(row, "precision", st_bench_precision_name(p));
            cJSON_AddNumberToObject(row, "sets", o->sets);
            char what[64];
            snprintf(what, sizeof what, "train %d windows %s", n, st_bench_precision_name(p));
            if (r != ST_OK) {
                st_fail(__FILE__, __LINE__, r, "setup of %d windows: %s", n, setup_error); /* one message per row */
                record_error(row, what);
                failed++;
                continue;
            }
            st_bench_times tm;
            double loss = NAN, gn = NAN;
            st_cuda_set_matmul_precision((st_matmul_precision)p);
            int e = train_measure(&t, o, w0, s, &tm, &loss, &gn);
            st_cuda_set_matmul_precision(ST_MATMUL_FP32);
            size_t free1 = mem_free();
            if (e != ST_OK) {
                record_error(row, what);
                failed++;
                continue;
            }
            double sec = tm.median * 1e-3, used = free0 > free1 ? (double)(free0 - free1) : 0;
            add_times(row, &tm);
            cJSON_AddNumberToObject(row, "windows_per_s", n / sec);
            cJSON_AddNumberToObject(row, "flops", cost.flops);
            cJSON_AddNumberToObject(row, "bytes_est", cost.bytes);
            cJSON_AddNumberToObject(row, "TFLOPs", cost.flops / sec / 1e12);
            cJSON_AddNumberToObject(row, "GBps_est", cost.bytes / sec / 1e9);
            cJSON_AddNumberToObject(row, "activation_bytes", cost.act_bytes);
            cJSON_AddNumberToObject(row, "held_bytes", held);
            cJSON_AddNumberToObject(row, "memgetinfo_delta_bytes", used);
            cJSON_AddNumberToObject(row, "loss", loss);
            cJSON_AddNumberToObject(row, "grad_norm", gn);
            printf("  %7d %5s %9.3f %9.3f %9.3f %11.4g %8.2f %9.1f %9.2f %9.2f\n", n, st_bench_precision_name(p),
                   tm.median, tm.p10, tm.p90, n / sec, cost.flops / sec / 1e12, cost.bytes / sec / 1e9, gib(held),
                   gib(used));
            fflush(stdout);
        }
        train_free(&t);
        (void)cudaGetLastError();
    }
    if (s) cudaStreamDestroy(s);
    if (feat.data || feat.inst) st_cuda_features_free(&feat);
    free(w0);
    st_param_table_free(&table);
    st_train_config_free(&cfg);
    return failed;
}

/* ======================================================================= */
/* act and envwin: the environments on the device                          */

typedef struct {
    const st_dims *d;
    int n, mode; /* envwin: 0 env + window, 1 env only, 2 window only */
    uint64_t seed;
    const st_cuda_features *feat;
    st_cuda_model model;
    int model_ok;
    st_cuda_env env;
    int env_ok;
    st_cuda_env_out out;
    dev_pool pool;
    int *action;
    float *logp, *win, *logits, *value;
    int *actions[ST_BENCH_MAX_SETS]; /* envwin: pre-drawn */
} env_bench;

static void env_bench_free(env_bench *b) {
    if (b->model_ok) st_cuda_model_free(&b->model);
    if (b->env_ok) st_cuda_env_free(&b->env);
    b->model_ok = b->env_ok = 0;
    pool_free(&b->pool);
}

/* The environments of n instances, reset, with their output buffers and the window. */
static int env_setup(env_bench *b, const st_bench_opts *o, int n, cudaStream_t s) {
    const st_dims *d = b->d;
    dev_pool *pl = &b->pool;
    st_train_config cfg;
    ST_TRY(st_train_config_default(&cfg, o->preset));
    cfg.seed = (long long)o->seed;
    st_env_config ec = st_trainer_env_config(&cfg);
    st_train_config_free(&cfg);
    b->n = n;
    ST_TRY(st_cuda_env_create(&b->env, o->market, n, &ec));
    b->env_ok = 1;
    st_cuda_env_out *e = &b->out;
    memset(e, 0, sizeof *e);
    e->ctx_stride = d->C;
    ST_TRY(PALLOC(pl, e->reward, n));
    ST_TRY(PALLOC(pl, e->done, n));
    ST_TRY(PALLOC(pl, e->ep_R, n));
    ST_TRY(PALLOC(pl, e->ctx, (size_t)n * d->C));
    ST_TRY(PALLOC(pl, e->inst, n));
    ST_TRY(PALLOC(pl, e->bar, n));
    ST_TRY(PALLOC(pl, b->win, (size_t)n * d->K * st_row_width(d)));
    ST_TRY(settle()); /* the environment's inputs went up synchronously */
    ST_TRY(st_cuda_env_reset(&b->env, e, s));
    BCU(cudaStreamSynchronize(s));
    return ST_OK;
}

static int act_step(void *ctx, int k, cudaStream_t s) {
    (void)k;
    env_bench *b = ctx;
    const st_dims *d = b->d;
    int n = b->n, ws = st_row_width(d);
    ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)b->feat->inst, b->feat->F, b->out.inst,
                                b->out.bar, b->out.ctx, b->out.ctx_stride, b->win, ws, s));
    ST_TRY(st_cuda_model_forward(&b->model, n, b->win, ws, b->logits, d->A, b->value));
    ST_TRY(st_cuda_select_actions(n, d->A, b->logits, d->A, b->seed, ST_STREAM_ACTION, NULL, 0, b->action, b->logp,
                                  s));
    ST_TRY(st_cuda_env_step(&b->env, b->action, &b->out, s));
    return ST_OK;
}

int st_bench_act(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "act");
    const st_dims *d = &o->d;
    printf("\n== act: window build + forward + action sampling + environment step, one CUDA graph,\n"
           "   median of %d replays after %d warm-up (the environments advance)\n", o->repeats, o->warmup);
    printf("  %7s %5s %9s %9s %9s %12s\n", "envs", "prec", "median us", "p10 us", "p90 us", "env steps/s");
    fflush(stdout);
    int failed = 0;
    st_param_table table;
    memset(&table, 0, sizeof table);
    st_cuda_features feat;
    memset(&feat, 0, sizeof feat);
    float *w0 = NULL, *wd = NULL, *gd = NULL; /* gd: the model binds a gradient buffer; the action step never writes it */
    cudaStream_t s = NULL;
    int rc = st_param_table_build(d, &table);
    if (rc == ST_OK) rc = (w0 = malloc(sizeof(float) * table.total)) ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "no memory");
    if (rc == ST_OK) st_params_init_f32(&table, o->seed, w0);
    if (rc == ST_OK) rc = CUS(cudaMalloc((void **)&wd, sizeof(float) * table.total));
    if (rc == ST_OK) rc = CUS(cudaMalloc((void **)&gd, sizeof(float) * table.total));
    if (rc == ST_OK) rc = up(wd, w0, sizeof(float) * table.total);
    if (rc == ST_OK) rc = st_cuda_features_upload(o->market, &feat);
    if (rc == ST_OK) rc = CUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (rc == ST_OK) rc = settle();
    if (rc != ST_OK) {
        record_error(cJSON_AddObjectToObject(out, "act_setup"), "act setup");
        failed++;
    }
    for (int i = 0; i < o->envs.n && rc == ST_OK; i++) {
        int n = o->envs.v[i];
        for (int k = 0; k < o->precision.n; k++) {
            int p = o->precision.v[k];
            cJSON *row = cJSON_CreateObject();
            cJSON_AddItemToArray(arr, row);
            cJSON_AddNumberToObject(row, "envs", n);
            cJSON_AddStringToObject(row, "precision", st_bench_precision_name(p));
            char what[64];
            snprintf(what, sizeof what, "act %d envs %s", n, st_bench_precision_name(p));
            /* fresh environments per precision: both start from the same state */
            env_bench b;
            memset(&b, 0, sizeof b);
            b.d = d, b.feat = &feat, b.seed = o->seed;
            int r = env_setup(&b, o, n, s);
            if (r == ST_OK) r = PALLOC(&b.pool, b.action, n);
            if (r == ST_OK) r = PALLOC(&b.pool, b.logp, n);
            if (r == ST_OK) r = PALLOC(&b.pool, b.logits, (size_t)n * d->A);
            if (r == ST_OK) r = PALLOC(&b.pool, b.value, n);
            if (r == ST_OK) r = st_cuda_model_init(&b.model, d, &table, n, wd, gd);
            if (r == ST_OK) b.model_ok = 1, b.model.stream = (void *)s;
            st_bench_times tm;
            st_cuda_set_matmul_precision((st_matmul_precision)p);
            if (r == ST_OK) r = act_step(&b, 0, s); /* eager: errors outside capture, cuBLAS handle made */
            if (r == ST_OK) r = CUS(cudaStreamSynchronize(s));
            if (r == ST_OK) r = capture_and_time(act_step, &b, 1, o, s, &tm);
            st_cuda_set_matmul_precision(ST_MATMUL_FP32);
            if (r == ST_OK) r = st_cuda_env_check(&b.env);
            if (r == ST_OK) {
                add_times(row, &tm);
                cJSON_AddNumberToObject(row, "env_steps_per_s", n / (tm.median * 1e-3));
                printf("  %7d %5s %9.1f %9.1f %9.1f %12.4g\n", n, st_bench_precision_name(p), tm.median * 1e3,
                       tm.p10 * 1e3, tm.p90 * 1e3, n / (tm.median * 1e-3));
                fflush(stdout);
            } else {
                record_error(row, what);
                failed++;
            }
            env_bench_free(&b);
        }
    }
    if (s) cudaStreamDestroy(s);
    if (feat.data || feat.inst) st_cuda_features_free(&feat);
    if (wd) cudaFree(wd);
    if (gd) cudaFree(gd);
    free(w0);
    st_param_table_free(&table);
    return failed;
}

static int envwin_step(void *ctx, int k, cudaStream_t s) {
    env_bench *b = ctx;
    const st_dims *d = b->d;
    int n = b->n, ws = st_row_width(d);
    if (b->mode != 2) ST_TRY(st_cuda_env_step(&b->env, b->actions[k], &b->out, s));
    if (b->mode != 1)
        ST_TRY(st_cuda_window_build(n, d->K, d->F, d->C, (const float *const *)b->feat->inst, b->feat->F,
                                    b->out.inst, b->out.bar, b->out.ctx, b->out.ctx_stride, b->win, ws, s));
    return ST_OK;
}

int st_bench_envwin(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "envwin");
    const st_dims *d = &o->d;
    int n = o->envwin_envs;
    printf("\n== envwin: environment step (pre-drawn random actions, %d buffers, one graph each) + window build,\n"
           "   %d environments, median of %d replays after %d warm-up\n", o->sets, n, o->repeats, o->warmup);
    printf("  %-22s %9s %9s %9s %12s %10s\n", "what", "median us", "p10 us", "p90 us", "env steps/s", "window GB/s");
    fflush(stdout);
    int failed = 0;
    st_cuda_features feat;
    memset(&feat, 0, sizeof feat);
    env_bench b;
    memset(&b, 0, sizeof b);
    b.d = d, b.feat = &feat, b.seed = o->seed;
    cudaStream_t s = NULL;
    int rc = st_cuda_features_upload(o->market, &feat);
    if (rc == ST_OK) rc = CUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (rc == ST_OK) rc = env_setup(&b, o, n, s);
    int *ha = malloc(sizeof(int) * (size_t)n);
    if (rc == ST_OK && !ha) rc = ST_FAIL(ST_ERR_MEMORY, "out of host memory for the actions");
    for (int k = 0; k < o->sets && rc == ST_OK; k++) {
        draw_actions(n, d->A, o->seed, 300 + (uint32_t)k, ha);
        rc = PALLOC(&b.pool, b.actions[k], n);
        if (rc == ST_OK) rc = up(b.actions[k], ha, sizeof(int) * (size_t)n);
    }
    free(ha);
    if (rc == ST_OK) rc = settle();
    /* window bytes: features read (F per row) and the row written (F + C) */
    double wbytes = (double)n * d->K * (2.0 * d->F + d->C) * sizeof(float);
    const char *names[3] = {"env_and_window", "env_only", "window_only"};
    for (int mode = 0; mode < 3; mode++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, row);
        cJSON_AddStringToObject(row, "what", names[mode]);
        cJSON_AddNumberToObject(row, "envs", n);
        cJSON_AddNumberToObject(row, "window_bytes", mode == 1 ? 0 : wbytes);
        if (rc != ST_OK) {
            record_error(row, names[mode]);
            failed++;
            continue;
        }
        b.mode = mode;
        st_bench_times tm;
        int r = envwin_step(&b, 0, s); /* eager once */
        if (r == ST_OK) r = CUS(cudaStreamSynchronize(s));
        if (r == ST_OK) r = capture_and_time(envwin_step, &b, o->sets, o, s, &tm);
        if (r == ST_OK) r = st_cuda_env_check(&b.env);
        if (r == ST_OK) {
            double sec = tm.median * 1e-3, gbs = mode == 1 ? 0 : wbytes / sec / 1e9;
            add_times(row, &tm);
            cJSON_AddNumberToObject(row, "env_steps_per_s", n / sec);
            cJSON_AddNumberToObject(row, "window_GBps", gbs);
            printf("  %-22s %9.1f %9.1f %9.1f %12.4g %10.1f\n", names[mode], tm.median * 1e3, tm.p10 * 1e3,
                   tm.p90 * 1e3, n / sec, gbs);
            fflush(stdout);
        } else {
            record_error(row, names[mode]);
            failed++;
        }
    }
    env_bench_free(&b);
    if (s) cudaStreamDestroy(s);
    if (feat.data || feat.inst) st_cuda_features_free(&feat);
    return failed;
}

/* ======================================================================= */
/* e2e: full PPO through the GPU trainer                                   */

int st_bench_e2e(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "e2e");
    printf("\n== e2e: full PPO updates (st_cuda_trainer_update), T=%d, %d epochs, minibatches of %d windows;\n"
           "   one warm-up update, then the median of %d timed updates (wall clock, device synchronised)\n",
           o->e2e_rollout, o->e2e_epochs, o->e2e_minibatch, o->e2e_updates);
    printf("  %7s %5s %11s %13s %9s %9s\n", "envs", "prec", "update s", "env steps/s", "used GiB", "loss");
    fflush(stdout);
    int failed = 0;
    for (int i = 0; i < o->e2e_envs.n; i++) {
        int B = o->e2e_envs.v[i];
        for (int k = 0; k < o->precision.n; k++) {
            int p = o->precision.v[k];
            cJSON *row = cJSON_CreateObject();
            cJSON_AddItemToArray(arr, row);
            cJSON_AddNumberToObject(row, "envs", B);
            cJSON_AddStringToObject(row, "precision", st_bench_precision_name(p));
            cJSON_AddNumberToObject(row, "T", o->e2e_rollout);
            cJSON_AddNumberToObject(row, "epochs", o->e2e_epochs);
            char what[64];
            snprintf(what, sizeof what, "e2e %d envs %s", B, st_bench_precision_name(p));
            long long N = (long long)o->e2e_rollout * B;
            int M = (int)(N / o->e2e_minibatch);
            st_train_config cfg;
            memset(&cfg, 0, sizeof cfg);
            int r = st_train_config_default(&cfg, o->preset);
            if (r == ST_OK && (M < 1 || N % o->e2e_minibatch != 0))
                r = ST_FAIL(ST_ERR_INPUT, "T*B = %lld is not a multiple of --e2e-minibatch %d", N, o->e2e_minibatch);
            if (r == ST_OK) {
                cfg.dims = o->d;
                cfg.dims.B = B;
                cfg.dims.T = o->e2e_rollout;
                cfg.epochs = o->e2e_epochs;
                cfg.minibatches = M;
                cfg.updates = 1 + o->e2e_updates + 100; /* the schedule's horizon: no decay to zero here */
                cfg.seed = (long long)o->seed;
                /* the trainer sets the matrix-product precision of its graphs from its config */
                r = st_train_config_set(&cfg, "precision", st_bench_precision_name(p));
                cJSON_AddNumberToObject(row, "minibatches", M);
                cJSON_AddNumberToObject(row, "minibatch", o->e2e_minibatch);
            }
            st_cuda_trainer t;
            memset(&t, 0, sizeof t);
            size_t free0 = mem_free(), free1 = free0;
            double *sec = calloc((size_t)o->e2e_updates, sizeof *sec);
            st_update_stats us;
            memset(&us, 0, sizeof us);
            st_cuda_set_matmul_precision((st_matmul_precision)p);
            if (r == ST_OK && !sec) r = ST_FAIL(ST_ERR_MEMORY, "no memory");
            int inited = 0;
            if (r == ST_OK) {
                r = st_cuda_trainer_init(&t, &cfg, o->market);
                inited = 1; /* free even after a failed init: it frees what was made */
            }
            if (r == ST_OK) r = st_cuda_trainer_update(&t, &us); /* warm-up (graph capture, cuBLAS plans) */
            if (r == ST_OK) r = CUS(cudaDeviceSynchronize());
            free1 = mem_free();
            for (int u = 0; u < o->e2e_updates && r == ST_OK; u++) {
                double t0 = now_seconds();
                r = st_cuda_trainer_update(&t, &us);
                if (r == ST_OK) r = CUS(cudaDeviceSynchronize());
                sec[u] = now_seconds() - t0;
            }
            st_cuda_set_matmul_precision(ST_MATMUL_FP32);
            if (inited) st_cuda_trainer_free(&t);
            if (r == ST_OK) {
                st_bench_times tm = st_bench_summarize(sec, o->e2e_updates);
                double used = free0 > free1 ? (double)(free0 - free1) : 0;
                cJSON_AddNumberToObject(row, "update_s_median", tm.median);
                cJSON_AddNumberToObject(row, "update_s_p10", tm.p10);
                cJSON_AddNumberToObject(row, "update_s_p90", tm.p90);
                cJSON_AddNumberToObject(row, "updates_timed", tm.count);
                cJSON_AddNumberToObject(row, "env_steps_per_s", (double)N / tm.median);
                cJSON_AddNumberToObject(row, "memgetinfo_delta_bytes", used);
                cJSON_AddNumberToObject(row, "loss", us.loss.loss);
                cJSON_AddNumberToObject(row, "entropy", us.loss.entropy);
                printf("  %7d %5s %11.3f %13.4g %9.2f %9.4f\n", B, st_bench_precision_name(p), tm.median,
                       (double)N / tm.median, gib(used), us.loss.loss);
                fflush(stdout);
            } else {
                record_error(row, what);
                failed++;
            }
            free(sec);
            st_train_config_free(&cfg);
        }
    }
    return failed;
}

#else /* no CUDA backend: cmd_bench.c stops before any of these */

st_bench_cost st_bench_train_cost(const st_dims *d, int n, size_t params) {
    (void)d, (void)n, (void)params;
    st_bench_cost c = {0, 0, 0};
    return c;
}
int st_bench_ceilings(const st_bench_opts *o, cJSON *out) { return (void)o, (void)out, 1; }
int st_bench_train(const st_bench_opts *o, cJSON *out) { return (void)o, (void)out, 1; }
int st_bench_act(const st_bench_opts *o, cJSON *out) { return (void)o, (void)out, 1; }
int st_bench_envwin(const st_bench_opts *o, cJSON *out) { return (void)o, (void)out, 1; }
int st_bench_e2e(const st_bench_opts *o, cJSON *out) { return (void)o, (void)out, 1; }

#endif
