/* trainer_step.cu: the GPU trainer's glue kernels and the control-driven
 * AdamW (math in cuda/trainer_step_cuda.h). Copies are one thread per
 * element; the control words are advanced by one thread after the kernels
 * that read them (stream order), never inside them. */
#include <math.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/trainer_step_cuda.h"
}

enum { ST_STEP_THREADS = 256 };

static unsigned step_blocks(long n) { return (unsigned)((n + ST_STEP_THREADS - 1) / ST_STEP_THREADS); }

static __global__ void record_kernel(int B, int C, const st_cuda_ctrl *ctrl, const int *inst, const int *bar,
                                     const float *ctx, int ctx_stride, int *r_inst, int *r_bar, float *r_ctx) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)B * C) return;
    size_t o = (size_t)ctrl->t * B;
    int b = (int)(i / C), j = (int)(i % C);
    r_ctx[(o + b) * C + j] = ctx[(size_t)b * ctx_stride + j];
    if (j == 0) {
        r_inst[o + b] = inst[b];
        r_bar[o + b] = bar[b];
    }
}

extern "C" int st_cuda_step_record(int B, int C, const st_cuda_ctrl *ctrl, const int *inst, const int *bar,
                                   const float *ctx, int ctx_stride, int *r_inst, int *r_bar, float *r_ctx,
                                   void *stream) {
    if (B <= 0 || C <= 0) return ST_FAIL(ST_ERR_INTERNAL, "step record of %d x %d", B, C);
    record_kernel<<<step_blocks((long)B * C), ST_STEP_THREADS, 0, (cudaStream_t)stream>>>(
        B, C, ctrl, inst, bar, ctx, ctx_stride, r_inst, r_bar, r_ctx);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void commit_kernel(int B, const st_cuda_ctrl *ctrl, const int *action, const float *logp,
                                     const float *value, const float *reward, const uint8_t *done, const float *ep_R,
                                     int *r_action, float *r_logp, float *r_value, float *r_reward, uint8_t *r_done,
                                     float *r_epR) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    size_t i = (size_t)ctrl->t * B + b;
    r_action[i] = action[b];
    r_logp[i] = logp[b];
    r_value[i] = value[b];
    r_reward[i] = reward[b];
    r_done[i] = done[b];
    r_epR[i] = ep_R[b];
}

extern "C" int st_cuda_step_commit(int B, const st_cuda_ctrl *ctrl, const int *action, const float *logp,
                                   const float *value, const float *reward, const uint8_t *done, const float *ep_R,
                                   int *r_action, float *r_logp, float *r_value, float *r_reward, uint8_t *r_done,
                                   float *r_epR, void *stream) {
    if (B <= 0) return ST_FAIL(ST_ERR_INTERNAL, "step commit of %d environments", B);
    commit_kernel<<<step_blocks(B), ST_STEP_THREADS, 0, (cudaStream_t)stream>>>(
        B, ctrl, action, logp, value, reward, done, ep_R, r_action, r_logp, r_value, r_reward, r_done, r_epR);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void advance_act_kernel(int B, st_cuda_ctrl *ctrl) {
    ctrl->t += 1;
    ctrl->draw_base += (uint64_t)B;
    ctrl->sub = ctrl->t;
}

extern "C" int st_cuda_step_advance_act(int B, st_cuda_ctrl *ctrl, void *stream) {
    advance_act_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(B, ctrl);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void begin_train_kernel(st_cuda_ctrl *ctrl) { ctrl->sub = ctrl->k; }

extern "C" int st_cuda_step_begin_train(st_cuda_ctrl *ctrl, void *stream) {
    begin_train_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ctrl);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void commit_train_kernel(st_cuda_ctrl *ctrl, const st_ppo_stats *stats1, const double *gnorm1,
                                           st_ppo_stats *stats, double *gnorm) {
    int k = ctrl->k;
    stats[k] = *stats1;
    gnorm[k] = *gnorm1;
    ctrl->k = k + 1;
    ctrl->opt_step += 1;
}

extern "C" int st_cuda_step_commit_train(st_cuda_ctrl *ctrl, const st_ppo_stats *stats1, const double *gnorm1,
                                         st_ppo_stats *stats, double *gnorm, void *stream) {
    commit_train_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ctrl, stats1, gnorm1, stats, gnorm);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void set_sub_kernel(st_cuda_ctrl *ctrl, int32_t value) { ctrl->sub = value; }

extern "C" int st_cuda_step_set_sub(st_cuda_ctrl *ctrl, int32_t value, void *stream) {
    set_sub_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ctrl, value);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* ---- AdamW with the clip folded in --------------------------------------------- */

typedef struct {
    float b1, b2, eps;
    double beta1, beta2, weight_decay; /* for the per-update constants */
} adam_fixed;

/* Thread 0 of each block turns (lr, step) into the float constants the host
 * version computes (same double formulas, rounded to float once). */
static __global__ void adamw_clip_kernel(size_t n, float *w, const float *g, float *m, float *v,
                                         const unsigned char *decay, adam_fixed c, double max_norm,
                                         const double *norm, const st_cuda_ctrl *ctrl) {
    __shared__ float s_lr1, s_rbc2, s_wd, s_clip;
    __shared__ int s_clipped;
    if (threadIdx.x == 0) {
        double lr = ctrl->lr, step = (double)ctrl->opt_step;
        double bc1 = 1 - pow(c.beta1, step), bc2 = 1 - pow(c.beta2, step);
        double gn = *norm;
        s_lr1 = (float)(lr / bc1);
        s_rbc2 = (float)(1 / sqrt(bc2));
        s_wd = (float)(lr * c.weight_decay);
        s_clipped = gn > max_norm;
        s_clip = s_clipped ? (float)(max_norm / gn) : 1.0f;
    }
    __syncthreads();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float wd = decay && decay[i] ? s_wd : 0.0f;
    float gi = g[i];
    if (s_clipped) gi *= s_clip;
    float mi = c.b1 * m[i] + (1 - c.b1) * gi;
    float vi = c.b2 * v[i] + (1 - c.b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= s_lr1 * mi / (sqrtf(vi) * s_rbc2 + c.eps) + wd * w[i];
}

extern "C" int st_cuda_adamw_clip_step(size_t n, float *w, const float *g, float *m, float *v,
                                       const unsigned char *decay, const st_adamw_hparams *h, double max_norm,
                                       const double *norm, const st_cuda_ctrl *ctrl, void *stream) {
    if (n == 0) return ST_OK;
    adam_fixed c;
    c.b1 = (float)h->beta1;
    c.b2 = (float)h->beta2;
    c.eps = (float)h->eps;
    c.beta1 = h->beta1;
    c.beta2 = h->beta2;
    c.weight_decay = h->weight_decay;
    adamw_clip_kernel<<<step_blocks((long)n), ST_STEP_THREADS, 0, (cudaStream_t)stream>>>(n, w, g, m, v, decay, c,
                                                                                         max_norm, norm, ctrl);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
