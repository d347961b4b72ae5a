/* bench_gpu.h: what the GPU benchmarks of `ssmtrade bench` share
 * (bench_gpu.c): checked CUDA calls, device buffers with their byte count,
 * event timing and graph replay, random inputs of the Philox test stream.
 * The measurements themselves are bench_ceilings.c, bench_train.c,
 * bench_env.c (action step, environment + window builder) and
 * bench_e2e.c (full PPO), declared in cli/bench.h. CUDA builds only. */
#ifndef ST_BENCH_GPU_H
#define ST_BENCH_GPU_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/bench.h"
#include "cuda/window_cuda.h"
#include "model/params.h"

/* ---- checked CUDA calls: ST_OK, or ST_ERR_DEVICE naming the call --------- */
int st_bench_cu_status(cudaError_t e, const char *what, const char *file, int line);
int st_bench_blas_status(cublasStatus_t s, const char *what, const char *file, int line);
#define CUS(call) st_bench_cu_status((call), #call, __FILE__, __LINE__)
#define BCU(call) ST_TRY(CUS(call))
#define BLAS(call) st_bench_blas_status((call), #call, __FILE__, __LINE__)

double st_bench_now(void);         /* monotonic seconds */
size_t st_bench_mem_free(void);    /* cudaMemGetInfo's free bytes (0 on failure) */
double st_bench_gib(double bytes); /* bytes / 2^30 */
/* A failed configuration: its message on the console and as "error" in
 * row; clears the error (and a non-sticky CUDA error) for the next one. */
void st_bench_record_error(cJSON *row, const char *what);

/* ---- device buffers with their byte count -------------------------------- */
#define ST_BENCH_POOL_MAX 256
typedef struct {
    void *p[ST_BENCH_POOL_MAX];
    int n;
    size_t bytes;
} st_bench_pool;
int st_bench_pool_alloc(st_bench_pool *pl, void **out, size_t bytes);
#define PALLOC(pl, ptr, count) st_bench_pool_alloc((pl), (void **)&(ptr), sizeof *(ptr) * (size_t)(count))
void st_bench_pool_free(st_bench_pool *pl);
/* A synchronous upload on the legacy stream. From pageable memory it may
 * return before the DMA lands, and our streams are non-blocking: every
 * setup ends with st_bench_settle() before work is enqueued on them. */
int st_bench_upload(void *dst, const void *src, size_t bytes);
int st_bench_settle(void); /* cudaDeviceSynchronize, checked */

/* ---- what a measurement's setup shares ----------------------------------- */
/* The market's features on the device, a non-blocking stream and, with
 * `weights`, the parameter table of o->d and its initial weights from
 * o->seed on the host (w0); settled (st_bench_settle) at the end. On
 * failure what was made is kept for st_bench_setup_free. */
typedef struct {
    st_param_table table;
    float *w0;
    st_cuda_features feat;
    cudaStream_t s;
} st_bench_setup;
int st_bench_setup_init(st_bench_setup *b, const st_bench_opts *o, int weights);
void st_bench_setup_free(st_bench_setup *b);

/* ---- timing -------------------------------------------------------------- */
/* Enqueues run i of a measurement on stream s. */
typedef int (*st_bench_launch_fn)(void *ctx, int i, cudaStream_t s);
/* warmup untimed runs, then `repeats` runs each between two events. */
int st_bench_time_launches(st_bench_launch_fn fn, void *ctx, int warmup, int repeats, cudaStream_t s,
                           st_bench_times *out);
/* Enqueues one step (input set k) on s; captured into a graph. */
typedef int (*st_bench_step_fn)(void *ctx, int k, cudaStream_t s);
int st_bench_capture_graph(st_bench_step_fn fn, void *ctx, int k, cudaStream_t s, cudaGraphExec_t *exec);
/* One graph per input set k < n of fn; then warm-up and timed replays
 * (o->warmup, o->repeats), the graphs rotated. */
int st_bench_capture_and_time(st_bench_step_fn fn, void *ctx, int n, const st_bench_opts *o, cudaStream_t s,
                              st_bench_times *t);
/* A new result row in arr: {size_key: size, "precision": fp32|bf16}. */
cJSON *st_bench_row(cJSON *arr, const char *size_key, int size, int precision);
/* median_ms, p10_ms, p90_ms and repeats into row */
void st_bench_add_times(cJSON *row, const st_bench_times *t);

/* ---- random host inputs (Philox test stream, salt = a sub-stream) -------- */
void st_bench_fill_normal(float *x, size_t n, double scale, uint64_t seed, uint32_t salt);
/* (instrument, bar) pairs uniform over the training split of m. */
void st_bench_draw_pairs(const st_market *m, int n, uint64_t seed, uint32_t salt, int *inst, int *bar);
/* n (instrument, bar) pairs as a PPO minibatch of segments of S steps
 * (--segment): each segment one environment's S consecutive bars from a
 * uniform start, at a uniform phase of its H-bar episode, restarting at a
 * new uniform start where the episode or the split ends (the trainer's
 * auto-reset). S <= 1: st_bench_draw_pairs. */
void st_bench_draw_segments(const st_market *m, int n, int S, int H, uint64_t seed, uint32_t salt, int *inst,
                            int *bar);
void st_bench_draw_actions(int n, int A, uint64_t seed, uint32_t salt, int *a);
size_t st_bench_features_bytes(const st_market *m); /* the market's feature tables on the device */

#endif
