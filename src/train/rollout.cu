/* rollout.cu: the PPO minibatch gather with advantage normalisation on the
 * GPU (math in cuda/rollout_cuda.h).
 *
 * The minibatch moments, in double, in a fixed order: one block of 1024
 * threads, thread t sums the samples i = t, t + 1024, ... in index order,
 * a fixed shared-memory tree adds the threads; first the mean, then the
 * squared deviations around it:
 *   mean = sum adv[k_i] / mb;  sd = sqrt(sum (adv[k_i] - mean)^2 / (mb - 1)) + 1e-8
 * Every double operation is an explicit round-to-nearest intrinsic (no FMA
 * contraction), so the bits depend on mb alone, never on scheduling; they
 * differ from the host's sequential sums by rounding only.
 *
 * st_cuda_rollout_gather_at: the moments kernel writes (mean, sd + 1e-8)
 * into work, then a grid with a thread per copied value (mb * max(C, 1))
 * copies the samples and normalises the advantages. The indices are
 * perm + (*k_dev) * mb, k_dev read on the device, so the launches can be
 * captured once and replayed for every minibatch.
 * st_cuda_rollout_gather (explicit indices, no work buffer): one block
 * computes the same moments with the same code, keeps them in shared
 * memory and copies the samples itself; the same bits as gather_at. */
#include "cuda/check.h"

extern "C" {
#include "cuda/rollout_cuda.h"
}

enum { ST_MOMENT_THREADS = 1024, ST_COPY_THREADS = 256 };

/* The sum of v over the block's ST_MOMENT_THREADS threads by a fixed tree;
 * every thread gets the result, and red may be reused after it returns. */
static __device__ double block_sum(double v, double *red) {
    int tid = threadIdx.x;
    red[tid] = v;
    __syncthreads();
    for (int h = ST_MOMENT_THREADS / 2; h > 0; h >>= 1) {
        if (tid < h) red[tid] = __dadd_rn(red[tid], red[tid + h]);
        __syncthreads();
    }
    double s = red[0];
    __syncthreads();
    return s;
}

/* mean and sd + 1e-8 of adv[idx[0..mb)], in every thread of a block of
 * ST_MOMENT_THREADS threads. */
static __device__ void adv_moments(int mb, const int *idx, const float *adv, double *red, double *mean_out,
                                   double *denom_out) {
    double s = 0;
    for (int i = threadIdx.x; i < mb; i += ST_MOMENT_THREADS)
        s = __dadd_rn(s, (double)adv[idx[i]]);
    double mean = __ddiv_rn(block_sum(s, red), (double)mb);
    double q = 0;
    for (int i = threadIdx.x; i < mb; i += ST_MOMENT_THREADS) {
        double dv = __dsub_rn((double)adv[idx[i]], mean);
        q = __dadd_rn(q, __dmul_rn(dv, dv));
    }
    double var = block_sum(q, red);
    *mean_out = mean;
    *denom_out = __dadd_rn(__dsqrt_rn(__ddiv_rn(var, (double)(mb > 1 ? mb - 1 : 1))), 1e-8);
}

/* The scalars of sample i of the minibatch (rollout index k). */
static __device__ void copy_sample(int i, int k, const int *r_inst, const int *r_bar, const int *r_action,
                                   const float *r_logp, const float *r_value, const float *ret, const float *adv,
                                   double mean, double denom, int *mb_inst, int *mb_bar, int *mb_action, float *mb_logp,
                                   float *mb_value, float *mb_ret, float *mb_adv) {
    mb_inst[i] = r_inst[k];
    mb_bar[i] = r_bar[k];
    mb_action[i] = r_action[k];
    mb_logp[i] = r_logp[k];
    mb_value[i] = r_value[k];
    mb_ret[i] = ret[k];
    mb_adv[i] = __double2float_rn(__ddiv_rn(__dsub_rn((double)adv[k], mean), denom));
}

static __device__ const int *slice(int mb, const int *perm, const int32_t *k_dev) {
    return perm + (size_t)(k_dev ? *k_dev : 0) * (size_t)mb;
}

static __global__ void __launch_bounds__(ST_MOMENT_THREADS)
    moments_kernel(int mb, const int *perm, const int32_t *k_dev, const float *adv, double *work) {
    __shared__ double red[ST_MOMENT_THREADS];
    double mean, denom;
    adv_moments(mb, slice(mb, perm, k_dev), adv, red, &mean, &denom);
    if (threadIdx.x == 0) work[0] = mean, work[1] = denom;
}

/* Thread e copies context value e = i*C + j and, for e < mb, the scalars of
 * sample e. */
static __global__ void copy_kernel(int mb, int C, const int *perm, const int32_t *k_dev, const int *r_inst,
                                   const int *r_bar, const int *r_action, const float *r_ctx, const float *r_logp,
                                   const float *r_value, const float *ret, const float *adv, const double *work,
                                   int *mb_inst, int *mb_bar, int *mb_action, float *mb_ctx, float *mb_logp,
                                   float *mb_value, float *mb_ret, float *mb_adv) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int *idx = slice(mb, perm, k_dev);
    if (e < (size_t)mb * C) {
        size_t i = e / C, j = e % C;
        mb_ctx[e] = r_ctx[(size_t)idx[i] * C + j];
    }
    if (e < (size_t)mb)
        copy_sample((int)e, idx[e], r_inst, r_bar, r_action, r_logp, r_value, ret, adv, work[0], work[1], mb_inst,
                    mb_bar, mb_action, mb_logp, mb_value, mb_ret, mb_adv);
}

static __global__ void __launch_bounds__(ST_MOMENT_THREADS)
    gather_one_block_kernel(int mb, int C, const int *idx, const int *r_inst, const int *r_bar, const int *r_action,
                            const float *r_ctx, const float *r_logp, const float *r_value, const float *ret,
                            const float *adv, int *mb_inst, int *mb_bar, int *mb_action, float *mb_ctx, float *mb_logp,
                            float *mb_value, float *mb_ret, float *mb_adv) {
    __shared__ double red[ST_MOMENT_THREADS];
    double mean, denom;
    adv_moments(mb, idx, adv, red, &mean, &denom);
    for (size_t e = threadIdx.x; e < (size_t)mb * C; e += ST_MOMENT_THREADS)
        mb_ctx[e] = r_ctx[(size_t)idx[e / C] * C + e % C];
    for (int i = threadIdx.x; i < mb; i += ST_MOMENT_THREADS)
        copy_sample(i, idx[i], r_inst, r_bar, r_action, r_logp, r_value, ret, adv, mean, denom, mb_inst, mb_bar,
                    mb_action, mb_logp, mb_value, mb_ret, mb_adv);
}

extern "C" int st_cuda_rollout_gather(int mb, int C, const int *idx, const int *r_inst, const int *r_bar,
                                      const int *r_action, const float *r_ctx, const float *r_logp,
                                      const float *r_value, const float *ret, const float *adv, int *mb_inst,
                                      int *mb_bar, int *mb_action, float *mb_ctx, float *mb_logp, float *mb_value,
                                      float *mb_ret, float *mb_adv, void *stream) {
    if (mb <= 0 || C < 0) return ST_FAIL(ST_ERR_INTERNAL, "minibatch of %d samples of %d context values", mb, C);
    gather_one_block_kernel<<<1, ST_MOMENT_THREADS, 0, (cudaStream_t)stream>>>(
        mb, C, idx, r_inst, r_bar, r_action, r_ctx, r_logp, r_value, ret, adv, mb_inst, mb_bar, mb_action, mb_ctx,
        mb_logp, mb_value, mb_ret, mb_adv);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" size_t st_cuda_rollout_gather_work_count(void) { return 2; }

extern "C" int st_cuda_rollout_gather_at(int mb, int C, const int *perm, const int32_t *k_dev, const int *r_inst,
                                         const int *r_bar, const int *r_action, const float *r_ctx, const float *r_logp,
                                         const float *r_value, const float *ret, const float *adv, int *mb_inst,
                                         int *mb_bar, int *mb_action, float *mb_ctx, float *mb_logp, float *mb_value,
                                         float *mb_ret, float *mb_adv, double *work, void *stream) {
    if (mb <= 0 || C < 0) return ST_FAIL(ST_ERR_INTERNAL, "minibatch of %d samples of %d context values", mb, C);
    cudaStream_t s = (cudaStream_t)stream;
    moments_kernel<<<1, ST_MOMENT_THREADS, 0, s>>>(mb, perm, k_dev, adv, work);
    ST_CUDA_LAUNCHED();
    size_t items = (size_t)mb * (size_t)(C > 1 ? C : 1);
    unsigned blocks = (unsigned)((items + ST_COPY_THREADS - 1) / ST_COPY_THREADS);
    copy_kernel<<<blocks, ST_COPY_THREADS, 0, s>>>(mb, C, perm, k_dev, r_inst, r_bar, r_action, r_ctx, r_logp, r_value,
                                                   ret, adv, work, mb_inst, mb_bar, mb_action, mb_ctx, mb_logp,
                                                   mb_value, mb_ret, mb_adv);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
