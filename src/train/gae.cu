/* gae.cu: GAE and the rollout's statistics on the GPU (math in
 * cuda/gae_cuda.h and train/gae.h).
 *
 * GAE: one thread per environment b runs the host's backward recursion
 *   delta = (r + (gamma next_v) live) - v;  a = delta + ((gamma lambda) live) a
 *   adv = (float)a;  ret = (float)(a + v)
 * with every double operation an explicit round-to-nearest intrinsic
 * (__dadd_rn, __dmul_rn...), so nvcc cannot contract a multiply-add into an
 * FMA: the host's bits exactly (the host build targets baseline x86-64,
 * which has no FMA, and C11 mode does not contract).
 *
 * Statistics: a grid of G blocks (G a function of N only) of 256 threads;
 * thread t of block g sums the samples g*256 + t + k*G*256 in order, a fixed
 * shared-memory tree adds a block's threads, then one block of 1024 threads
 * adds the G block partials by the same kind of tree. Pass 1 sums reward,
 * value, done, ep_R (where done), ret and d = (float)(ret - value) (a float
 * difference, as the host computes it); pass 2 sums (ret - mr)^2 and
 * (d - md)^2 around the means of pass 1. Four launches, no atomics, no host
 * read: the same bits from run to run, and capturable in a graph.
 *
 * Work layout (doubles): [0, 6G) pass-1 partials, [6G, 8G) pass-2
 * partials, [8G, 8G + 2) the means mr, md. */
#include "cuda/check.h"

extern "C" {
#include "cuda/gae_cuda.h"
}

enum { ST_GAE_THREADS = 256, ST_STATS_THREADS = 256, ST_STATS_MAX_BLOCKS = 1024, ST_STATS_FINISH_THREADS = 1024 };
enum { ST_STATS_Q1 = 6, ST_STATS_Q2 = 2 };

static __global__ void gae_kernel(int T, int B, const float *reward, const float *value, const uint8_t *done,
                                  const float *last_value, double gamma, double lambda, float *adv, float *ret) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    double gl = __dmul_rn(gamma, lambda);
    double a = 0, next_v = last_value[b];
    for (int t = T - 1; t >= 0; t--) {
        size_t i = (size_t)t * B + b;
        double live = done[i] ? 0.0 : 1.0;
        double v = value[i];
        double delta = __dsub_rn(__dadd_rn((double)reward[i], __dmul_rn(__dmul_rn(gamma, next_v), live)), v);
        a = __dadd_rn(delta, __dmul_rn(__dmul_rn(gl, live), a));
        adv[i] = __double2float_rn(a);
        ret[i] = __double2float_rn(__dadd_rn(a, v));
        next_v = v;
    }
}

extern "C" int st_cuda_gae(int T, int B, const float *reward, const float *value, const uint8_t *done,
                           const float *last_value, double gamma, double lambda, float *adv, float *ret, void *stream) {
    if (T < 0 || B < 0) return ST_FAIL(ST_ERR_INTERNAL, "GAE over T = %d steps of B = %d environments", T, B);
    if (T == 0 || B == 0) return ST_OK;
    unsigned blocks = (unsigned)((B + ST_GAE_THREADS - 1) / ST_GAE_THREADS);
    gae_kernel<<<blocks, ST_GAE_THREADS, 0, (cudaStream_t)stream>>>(T, B, reward, value, done, last_value, gamma,
                                                                    lambda, adv, ret);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* The sum of v over the block's THREADS threads by a fixed tree; every
 * thread gets the result, and red may be reused after it returns. */
template <int THREADS> static __device__ double block_sum(double v, double *red) {
    int tid = threadIdx.x;
    red[tid] = v;
    __syncthreads();
    for (int h = THREADS / 2; h > 0; h >>= 1) {
        if (tid < h) red[tid] = __dadd_rn(red[tid], red[tid + h]);
        __syncthreads();
    }
    double s = red[0];
    __syncthreads();
    return s;
}

static int stats_blocks(int N) {
    int b = (N + ST_STATS_THREADS - 1) / ST_STATS_THREADS;
    if (b < 1) return 1;
    return b < ST_STATS_MAX_BLOCKS ? b : ST_STATS_MAX_BLOCKS;
}

extern "C" size_t st_cuda_rollout_stats_work_count(int N) {
    return (size_t)(ST_STATS_Q1 + ST_STATS_Q2) * (size_t)stats_blocks(N) + 2;
}

static __global__ void __launch_bounds__(ST_STATS_THREADS)
    stats_pass1_kernel(int N, const float *reward, const float *value, const uint8_t *done, const float *ep_R,
                       const float *ret, double *partials) {
    __shared__ double red[ST_STATS_THREADS];
    double q[ST_STATS_Q1] = {0, 0, 0, 0, 0, 0}; /* reward, value, episodes, ep_R, ret, ret - value */
    size_t step = (size_t)gridDim.x * ST_STATS_THREADS;
    for (size_t i = (size_t)blockIdx.x * ST_STATS_THREADS + threadIdx.x; i < (size_t)N; i += step) {
        q[0] = __dadd_rn(q[0], (double)reward[i]);
        q[1] = __dadd_rn(q[1], (double)value[i]);
        if (done[i]) {
            q[2] = __dadd_rn(q[2], 1.0);
            q[3] = __dadd_rn(q[3], (double)ep_R[i]);
        }
        q[4] = __dadd_rn(q[4], (double)ret[i]);
        q[5] = __dadd_rn(q[5], (double)__fsub_rn(ret[i], value[i]));
    }
    for (int k = 0; k < ST_STATS_Q1; k++) {
        double s = block_sum<ST_STATS_THREADS>(q[k], red);
        if (threadIdx.x == 0) partials[(size_t)blockIdx.x * ST_STATS_Q1 + k] = s;
    }
}

static __global__ void __launch_bounds__(ST_STATS_FINISH_THREADS)
    stats_finish1_kernel(int N, int G, const double *partials, double *means, st_cuda_rollout_stats *out) {
    __shared__ double red[ST_STATS_FINISH_THREADS];
    double tot[ST_STATS_Q1];
    int g = threadIdx.x;
    for (int k = 0; k < ST_STATS_Q1; k++)
        tot[k] = block_sum<ST_STATS_FINISH_THREADS>(g < G ? partials[(size_t)g * ST_STATS_Q1 + k] : 0.0, red);
    if (g == 0) {
        out->reward_sum = tot[0];
        out->value_sum = tot[1];
        out->episodes = (int64_t)tot[2];
        out->ep_R_sum = tot[3];
        means[0] = __ddiv_rn(tot[4], (double)N);
        means[1] = __ddiv_rn(tot[5], (double)N);
    }
}

static __global__ void __launch_bounds__(ST_STATS_THREADS)
    stats_pass2_kernel(int N, const float *value, const float *ret, const double *means, double *partials) {
    __shared__ double red[ST_STATS_THREADS];
    double mr = means[0], md = means[1], vr = 0, vd = 0;
    size_t step = (size_t)gridDim.x * ST_STATS_THREADS;
    for (size_t i = (size_t)blockIdx.x * ST_STATS_THREADS + threadIdx.x; i < (size_t)N; i += step) {
        double dr = __dsub_rn((double)ret[i], mr);
        double dd = __dsub_rn((double)__fsub_rn(ret[i], value[i]), md);
        vr = __dadd_rn(vr, __dmul_rn(dr, dr));
        vd = __dadd_rn(vd, __dmul_rn(dd, dd));
    }
    vr = block_sum<ST_STATS_THREADS>(vr, red);
    vd = block_sum<ST_STATS_THREADS>(vd, red);
    if (threadIdx.x == 0) {
        partials[(size_t)blockIdx.x * ST_STATS_Q2] = vr;
        partials[(size_t)blockIdx.x * ST_STATS_Q2 + 1] = vd;
    }
}

static __global__ void __launch_bounds__(ST_STATS_FINISH_THREADS)
    stats_finish2_kernel(int G, const double *partials, st_cuda_rollout_stats *out) {
    __shared__ double red[ST_STATS_FINISH_THREADS];
    int g = threadIdx.x;
    double vr = block_sum<ST_STATS_FINISH_THREADS>(g < G ? partials[(size_t)g * ST_STATS_Q2] : 0.0, red);
    double vd = block_sum<ST_STATS_FINISH_THREADS>(g < G ? partials[(size_t)g * ST_STATS_Q2 + 1] : 0.0, red);
    if (g == 0) out->explained_var = vr > 0 ? __dsub_rn(1.0, __ddiv_rn(vd, vr)) : 0.0;
}

extern "C" int st_cuda_rollout_stats_compute(int N, const float *reward, const float *value, const uint8_t *done,
                                             const float *ep_R, const float *ret, st_cuda_rollout_stats *out,
                                             double *work, void *stream) {
    if (N <= 0) return ST_FAIL(ST_ERR_INTERNAL, "rollout statistics over %d samples", N);
    cudaStream_t s = (cudaStream_t)stream;
    int G = stats_blocks(N);
    double *p1 = work, *p2 = work + (size_t)ST_STATS_Q1 * G, *means = p2 + (size_t)ST_STATS_Q2 * G;
    stats_pass1_kernel<<<G, ST_STATS_THREADS, 0, s>>>(N, reward, value, done, ep_R, ret, p1);
    ST_CUDA_LAUNCHED();
    stats_finish1_kernel<<<1, ST_STATS_FINISH_THREADS, 0, s>>>(N, G, p1, means, out);
    ST_CUDA_LAUNCHED();
    stats_pass2_kernel<<<G, ST_STATS_THREADS, 0, s>>>(N, value, ret, means, p2);
    ST_CUDA_LAUNCHED();
    stats_finish2_kernel<<<1, ST_STATS_FINISH_THREADS, 0, s>>>(G, p2, out);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
