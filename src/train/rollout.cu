/* rollout.cu: the PPO minibatch gather with advantage normalisation on the
 * GPU (math in cuda/rollout_cuda.h). One block: thread 0 sums the mean and
 * the variance of the minibatch's advantages in index order in double (no
 * FMA contraction, as the CPU's plain double arithmetic), then every thread
 * copies samples i = tid, tid + blockDim, ... A minibatch is at most a few
 * thousand samples, so one block is plenty for this first increment. */
#include "cuda/check.h"

extern "C" {
#include "cuda/rollout_cuda.h"
}

enum { ST_GATHER_THREADS = 256 };

static __global__ void gather_kernel(int mb, int C, const int *idx, const int *r_inst, const int *r_bar,
                                     const int *r_action, const float *r_ctx, const float *r_logp,
                                     const float *r_value, const float *ret, const float *adv, int *mb_inst,
                                     int *mb_bar, int *mb_action, float *mb_ctx, float *mb_logp, float *mb_value,
                                     float *mb_ret, float *mb_adv) {
    __shared__ double s_mean, s_sd;
    if (threadIdx.x == 0) {
        double mean = 0, var = 0;
        for (int i = 0; i < mb; i++) mean = __dadd_rn(mean, (double)adv[idx[i]]);
        mean /= mb;
        for (int i = 0; i < mb; i++) {
            double dv = __dsub_rn((double)adv[idx[i]], mean);
            var = __dadd_rn(var, __dmul_rn(dv, dv));
        }
        s_mean = mean;
        s_sd = __dadd_rn(sqrt(var / (mb > 1 ? mb - 1 : 1)), 1e-8);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < mb; i += blockDim.x) {
        int k = idx[i];
        mb_inst[i] = r_inst[k];
        mb_bar[i] = r_bar[k];
        mb_action[i] = r_action[k];
        for (int j = 0; j < C; j++) mb_ctx[(size_t)i * C + j] = r_ctx[(size_t)k * C + j];
        mb_logp[i] = r_logp[k];
        mb_value[i] = r_value[k];
        mb_ret[i] = ret[k];
        mb_adv[i] = (float)(__dsub_rn((double)adv[k], s_mean) / s_sd);
    }
}

extern "C" int st_cuda_rollout_gather(int mb, int C, const int *idx, const int *r_inst, const int *r_bar,
                                      const int *r_action, const float *r_ctx, const float *r_logp,
                                      const float *r_value, const float *ret, const float *adv, int *mb_inst,
                                      int *mb_bar, int *mb_action, float *mb_ctx, float *mb_logp, float *mb_value,
                                      float *mb_ret, float *mb_adv, void *stream) {
    if (mb <= 0) return ST_FAIL(ST_ERR_INTERNAL, "minibatch of %d samples", mb);
    gather_kernel<<<1, ST_GATHER_THREADS, 0, (cudaStream_t)stream>>>(mb, C, idx, r_inst, r_bar, r_action, r_ctx,
                                                                      r_logp, r_value, ret, adv, mb_inst, mb_bar,
                                                                      mb_action, mb_ctx, mb_logp, mb_value, mb_ret,
                                                                      mb_adv);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
