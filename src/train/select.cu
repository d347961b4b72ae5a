/* select.cu: action selection from logits on the GPU (math in
 * cuda/select_cuda.h), the twin of st_select_actions (train/trainer.c).
 *
 * One thread per window, in double with the host's order of operations:
 *   mx = max_j z_j (first maximum);  s = sum_j exp(z_j - mx), j = 0..A-1
 *   sampled: a = first j with u s < sum_{j' <= j} exp(z_j' - mx), else A - 1
 *   logp = (float)(z_a - mx - log s)
 * u = st_u01d(w0, w1) of Philox(seed, stream_id, *draw_base + i). Every
 * double operation is an explicit round-to-nearest intrinsic, so nvcc
 * cannot contract u * s or the sums into an FMA. The comparisons, the
 * sums' order and the draws are the host's; exp and log are CUDA's, which
 * are within an ulp of glibc's in double, so logp can differ from the host
 * by an ulp of float in rare cases and the sampled action only when u s
 * falls within an ulp of a CDF step (never seen in practice). */
#include "cuda/check.h"

extern "C" {
#include "core/philox.h"
#include "cuda/select_cuda.h"
}

enum { ST_SELECT_THREADS = 256 };

static __global__ void select_kernel(int n, int A, const float *logits, int logits_stride, uint64_t seed,
                                     uint32_t stream_id, const uint64_t *draw_base, int greedy, int *action,
                                     float *logp) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float *z = logits + (size_t)i * logits_stride;
    double mx = z[0];
    int best = 0;
    for (int j = 1; j < A; j++)
        if ((double)z[j] > mx) mx = z[j], best = j;
    double s = 0;
    for (int j = 0; j < A; j++)
        s = __dadd_rn(s, exp(__dsub_rn((double)z[j], mx)));
    int a = best;
    if (!greedy) {
        uint64_t base = draw_base ? *draw_base : 0;
        st_philox4 r = st_philox_draw(seed, stream_id, base + (uint64_t)i);
        double target = __dmul_rn(st_u01d(r.v[0], r.v[1]), s), acc = 0;
        a = A - 1; /* the last action takes any rounding remainder */
        for (int j = 0; j < A; j++) {
            acc = __dadd_rn(acc, exp(__dsub_rn((double)z[j], mx)));
            if (target < acc) {
                a = j;
                break;
            }
        }
    }
    action[i] = a;
    if (logp) logp[i] = __double2float_rn(__dsub_rn(__dsub_rn((double)z[a], mx), log(s)));
}

extern "C" int st_cuda_select_actions(int n, int A, const float *logits, int logits_stride, uint64_t seed,
                                      uint32_t stream_id, const uint64_t *draw_base, int greedy, int *action,
                                      float *logp, void *stream) {
    if (n < 0 || A < 1 || logits_stride < A)
        return ST_FAIL(ST_ERR_INTERNAL, "action selection over %d windows of %d logits (row stride %d)", n, A,
                       logits_stride);
    if (n == 0) return ST_OK;
    unsigned blocks = (unsigned)((n + ST_SELECT_THREADS - 1) / ST_SELECT_THREADS);
    select_kernel<<<blocks, ST_SELECT_THREADS, 0, (cudaStream_t)stream>>>(n, A, logits, logits_stride, seed, stream_id,
                                                                          draw_base, greedy, action, logp);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
