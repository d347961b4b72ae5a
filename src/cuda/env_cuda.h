/* env_cuda.h: the B trading environments of env/env.h on the GPU, the CUDA
 * twin of the C reference, transition for transition (DESIGN section 4).
 *
 * The state is an st_env whose arrays are DEVICE pointers, carved by the
 * same layout as the host's (st_env_layout in env/env.h), so the whole state
 * moves between host and device as one copy of the block: checkpoints and
 * the tracer's snapshot reuse the host code on a downloaded copy. The
 * market's env inputs (open, high, low, close, ATR in double; the split's
 * bar ranges; the cumulative start counts) are uploaded once.
 *
 * One thread per instance runs exactly env.c's step_one / close_trade /
 * open_trade / check_stop / mark / begin_episode / draw_start in double,
 * with no FMA contraction, so positions, stops, fills and rewards are the
 * host's bits; the context features leave as float after the same soft
 * clip (tanh may differ from the host's libm by an ulp). Episode resets
 * draw Philox(seed, ENV_RESET, ((dev.b0 + b) << 32) | episode) like the
 * host (dev.b0: the global number of instance 0; set it after create when
 * the instances are a rank's slice of a multi-GPU run).
 *
 * Outputs (st_cuda_env_out, every member a device pointer or NULL):
 *   reward[b]   the step's reward in R (float), 0 at reset
 *   done[b]     1 when the instance's episode ended with this step
 *   ep_R[b]     final equity_R of the episode that ended with this step
 *               (0 when not done): the trainer's mean episode R
 *   ctx         [B, ctx_stride] the soft-clipped context at the new bar
 *   inst, bar   where each instance now stands
 *   trades      [B, 2] trade slots: instance b's trades closed in this step
 *               are trades[2b .. 2b + ntrades[b]) in the order the host
 *               appends them (a flip's close, then a stop or end exit);
 *               ntrades [B] (written every step, 0..2). The host compacts
 *               them in instance order to get st_env_step's log.
 * A finished instance (auto_reset = 0) writes reward 0, done 1, ep_R 0,
 * ntrades 0 and leaves ctx, inst and bar as they were (the host's rule).
 *
 * An action outside 0..2 leaves its instance's state unchanged for that step
 * (it writes reward 0, done 0, ep_R 0, ntrades 0 and its unchanged ctx,
 * inst and bar) while the other instances step; unlike the host, which
 * refuses the whole step. The device error word keeps the lowest bad
 * instance since the last check, with its lowest bad action (one atomicMin
 * of the packed key (b << 32) | action: deterministic whatever the thread
 * order); st_cuda_env_check reads it (one synchronisation) and turns it
 * into ST_ERR_INPUT naming the instance and the action, as env.c words it.
 *
 * Arithmetic: env.cu is compiled with --fmad=false (CMakeLists.txt), so no
 * multiply-add is contracted into an FMA, as on the host (gcc -O2 on x86-64
 * emits none); division and sqrt are IEEE; every expression keeps env.c's
 * order of operations. Calls are asynchronous on `stream` (a cudaStream_t;
 * NULL: default), allocate nothing, never synchronise and are capturable in
 * a CUDA graph; they return ST_OK, ST_ERR_DEVICE, or ST_ERR_INPUT for a
 * missing array or a ctx_stride below ST_CTX_COUNT. */
#ifndef ST_ENV_CUDA_H
#define ST_ENV_CUDA_H

#include <stdint.h>

#include "data/market.h"
#include "env/env.h"

typedef struct {
    float *reward;
    uint8_t *done;
    float *ep_R;
    float *ctx;
    int ctx_stride;
    int *inst, *bar;
    st_trade *trades;
    uint8_t *ntrades;
} st_cuda_env_out;

typedef struct {
    st_env dev; /* cfg, B, Hn, start_total and m (the host market) on the host; every array a device
                   pointer into dev.block (= dev.base, block_bytes long, st_env_layout) */
    size_t block_bytes;
    int n_inst;
    /* the market's env inputs (device): instrument i's bar t is at [bar0[i] + t] */
    double *open, *high, *low, *close, *atr;
    int64_t *bar0;
    int *split_begin, *split_end; /* [n_inst] of cfg.split */
    /* device word: ST_CUDA_ENV_NO_ERROR, or ((uint64)b << 32) | (uint32)action
     * of the lowest bad instance b since the last st_cuda_env_check */
    unsigned long long *error;
} st_cuda_env;

#define ST_CUDA_ENV_NO_ERROR 0xFFFFFFFFFFFFFFFFull

/* Uploads m's env inputs and allocates the state of B instances on split
 * cfg->split (the same checks as st_env_create, same messages). Call reset
 * or upload next. */
int st_cuda_env_create(st_cuda_env *e, const st_market *m, int B, const st_env_config *cfg);
void st_cuda_env_free(st_cuda_env *e);

/* Episode 0 of every instance, observations into out (may be NULL). */
int st_cuda_env_reset(st_cuda_env *e, const st_cuda_env_out *out, void *stream);

/* One step of every instance; actions is a device array [B] in {0, 1, 2}. */
int st_cuda_env_step(st_cuda_env *e, const int *actions, const st_cuda_env_out *out, void *stream);

/* The soft-clipped context of every instance at its current bar into ctx
 * [B, ctx_stride] (device), without stepping (after an upload). */
int st_cuda_env_context(const st_cuda_env *e, float *ctx, int ctx_stride, void *stream);

/* The whole state host -> device and device -> host (synchronous): one
 * copy of st_env_layout's bytes from host->base. host must have been created
 * on the same market, B and config (ST_ERR_INPUT when B, the config, the
 * instruments or the start counts differ). */
int st_cuda_env_upload(st_cuda_env *e, const st_env *host);
int st_cuda_env_download(const st_cuda_env *e, st_env *host);

/* ST_ERR_INPUT when a step met a bad action since the last check, with
 * env.c's message ("environment: action %d of instance %d is not 0 (short),
 * 1 (flat) or 2 (long)"), and clears the word; synchronises the device. */
int st_cuda_env_check(st_cuda_env *e);

#endif
