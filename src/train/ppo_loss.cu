/* ppo_loss.cu: clipped surrogate, clipped value loss and entropy with their
 * gradients on the GPU (math in cuda/ppo_loss_cuda.h, the CPU op's in
 * train/ppo_loss.h). One thread per sample computes its loss pieces and
 * writes its dlogits row and dvalue, in double like the CPU op; each block
 * sums its pieces by a fixed shared-memory tree into work, and a last
 * one-thread kernel adds the blocks in order and writes the statistics. */
#include "cuda/check.h"

extern "C" {
#include "cuda/ppo_loss_cuda.h"
}

/* The pieces one sample contributes to the statistics. */
enum { PIECE_POLICY, PIECE_VALUE, PIECE_ENTROPY, PIECE_KL, PIECE_CLIP, ST_PPO_PIECES };
enum { ST_PPO_THREADS = 256 }; /* a power of two: the tree halves it */

static unsigned ppo_blocks(int n) { return (unsigned)((n + ST_PPO_THREADS - 1) / ST_PPO_THREADS); }

extern "C" size_t st_cuda_ppo_loss_work_count(int n) { return (size_t)ppo_blocks(n > 0 ? n : 0) * ST_PPO_PIECES; }

/* max and log-sum-exp of one row of A logits, max subtracted. */
static __device__ double row_lse(int A, const float *z) {
    double mx = z[0];
    for (int j = 1; j < A; j++)
        mx = z[j] > mx ? z[j] : mx;
    double s = 0;
    for (int j = 0; j < A; j++)
        s += exp((double)z[j] - mx);
    return mx + log(s);
}

static __global__ void log_softmax_kernel(int n, int A, const float *logits, int logits_stride, float *out,
                                          int out_stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float *z = logits + (size_t)i * logits_stride;
    float *o = out + (size_t)i * out_stride;
    double lse = row_lse(A, z);
    for (int j = 0; j < A; j++)
        o[j] = (float)((double)z[j] - lse);
}

extern "C" int st_cuda_log_softmax(int n, int A, const float *logits, int logits_stride, float *out, int out_stride,
                                   void *stream) {
    if (n <= 0) return ST_OK;
    log_softmax_kernel<<<ppo_blocks(n), ST_PPO_THREADS, 0, (cudaStream_t)stream>>>(n, A, logits, logits_stride, out,
                                                                                   out_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* Sample i: writes dz (its dlogits row) and *dv, fills piece[]. The CPU op's
 * arithmetic step for step. */
static __device__ void ppo_sample(int A, const float *z, int a, double old_logp, double A_i, double v, double old_v,
                                  double r, st_ppo_coefs k, double inv, float *dz, float *dv, double *piece) {
    double lse = row_lse(A, z), ent = 0;
    for (int j = 0; j < A; j++) {
        double lp = (double)z[j] - lse;
        ent -= exp(lp) * lp;
    }
    double logp = (double)z[a] - lse;
    double lr = logp - old_logp, ratio = exp(lr);
    double rc = ratio < 1 - k.clip ? 1 - k.clip : (ratio > 1 + k.clip ? 1 + k.clip : ratio);
    double unclipped = ratio * A_i, clipped = rc * A_i;
    piece[PIECE_POLICY] = -(unclipped < clipped ? unclipped : clipped);
    /* d min / d ratio: adv where the unclipped term is the min or the ratio is inside the clip range */
    double dratio = (unclipped <= clipped || (ratio >= 1 - k.clip && ratio <= 1 + k.clip)) ? A_i : 0;
    double dlogp = -dratio * ratio * inv;
    piece[PIECE_KL] = (ratio - 1) - lr;
    piece[PIECE_CLIP] = fabs(ratio - 1) > k.clip ? 1 : 0;
    piece[PIECE_ENTROPY] = ent;
    for (int j = 0; j < A; j++) {
        double lp = (double)z[j] - lse, p = exp(lp);
        double g = dlogp * ((j == a) - p);
        g += k.ent_coef * inv * p * (lp + ent); /* d(-ent_coef H)/dz_j = ent_coef p_j (log p_j + H) */
        dz[j] = (float)g;
    }
    double dvv;
    if (k.vclip > 0) {
        double dlt = v - old_v;
        int inside = dlt > -k.vclip && dlt < k.vclip;
        double vc = inside ? v : old_v + (dlt < 0 ? -k.vclip : k.vclip);
        double e1 = (v - r) * (v - r), e2 = (vc - r) * (vc - r);
        if (e1 >= e2) {
            piece[PIECE_VALUE] = 0.5 * e1;
            dvv = v - r;
        } else {
            piece[PIECE_VALUE] = 0.5 * e2;
            dvv = inside ? vc - r : 0;
        }
    } else {
        piece[PIECE_VALUE] = 0.5 * (v - r) * (v - r);
        dvv = v - r;
    }
    *dv = (float)(k.vf_coef * inv * dvv);
}

static __global__ void ppo_kernel(int n, int A, const float *logits, int logits_stride, const int *action,
                                  const float *old_logp, const float *adv, const float *value, const float *old_value,
                                  const float *ret, st_ppo_coefs k, float *dlogits, int dlogits_stride, float *dvalue,
                                  double *partials) {
    __shared__ double red[ST_PPO_PIECES][ST_PPO_THREADS];
    int tid = threadIdx.x, i = blockIdx.x * ST_PPO_THREADS + tid;
    double piece[ST_PPO_PIECES] = {0, 0, 0, 0, 0};
    if (i < n)
        ppo_sample(A, logits + (size_t)i * logits_stride, action[i], old_logp[i], adv[i], value[i], old_value[i],
                   ret[i], k, 1.0 / n, dlogits + (size_t)i * dlogits_stride, dvalue + i, piece);
    for (int p = 0; p < ST_PPO_PIECES; p++)
        red[p][tid] = piece[p];
    __syncthreads();
    for (int h = ST_PPO_THREADS / 2; h > 0; h >>= 1) { /* fixed tree: deterministic */
        if (tid < h)
            for (int p = 0; p < ST_PPO_PIECES; p++)
                red[p][tid] += red[p][tid + h];
        __syncthreads();
    }
    if (tid == 0)
        for (int p = 0; p < ST_PPO_PIECES; p++)
            partials[(size_t)blockIdx.x * ST_PPO_PIECES + p] = red[p][0];
}

/* One thread: the blocks' sums in block order, then the means. */
static __global__ void ppo_stats_kernel(int n, int blocks, const double *partials, st_ppo_coefs k,
                                        st_ppo_stats *stats) {
    double s[ST_PPO_PIECES] = {0, 0, 0, 0, 0}, inv = 1.0 / n;
    for (int b = 0; b < blocks; b++)
        for (int p = 0; p < ST_PPO_PIECES; p++)
            s[p] += partials[(size_t)b * ST_PPO_PIECES + p];
    stats->policy = s[PIECE_POLICY] * inv;
    stats->value = s[PIECE_VALUE] * inv;
    stats->entropy = s[PIECE_ENTROPY] * inv;
    stats->approx_kl = s[PIECE_KL] * inv;
    stats->clipfrac = s[PIECE_CLIP] * inv;
    stats->loss = stats->policy + k.vf_coef * stats->value - k.ent_coef * stats->entropy;
}

extern "C" int st_cuda_ppo_loss(int n, int A, const float *logits, int logits_stride, const int *action,
                                const float *old_logp, const float *adv, const float *value, const float *old_value,
                                const float *ret, const st_ppo_coefs *k, st_ppo_stats *stats, float *dlogits,
                                int dlogits_stride, float *dvalue, double *work, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (n <= 0) return ST_FAIL(ST_ERR_INTERNAL, "PPO loss over %d samples: the means need n > 0", n);
    unsigned blocks = ppo_blocks(n);
    ppo_kernel<<<blocks, ST_PPO_THREADS, 0, s>>>(n, A, logits, logits_stride, action, old_logp, adv, value, old_value,
                                                 ret, *k, dlogits, dlogits_stride, dvalue, work);
    ST_CUDA_LAUNCHED();
    ppo_stats_kernel<<<1, 1, 0, s>>>(n, (int)blocks, work, *k, stats);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
