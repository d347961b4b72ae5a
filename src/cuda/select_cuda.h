/* select_cuda.h: action selection from logits on the GPU, the CUDA twin of
 * st_select_actions (train/trainer.h), in double as the host:
 *   mx = max_j z_j (first maximum: argmax for greedy);  s = sum_j exp(z_j - mx)
 *   sampled: the first j with u_i s < sum_{j' <= j} exp(z_j' - mx), else A - 1
 *   logp[i] = (float)(z_a - mx - log s)
 * with u_i = st_u01d(w0, w1) of Philox(seed, stream_id, *draw_base + i)
 * (core/philox.h), the same uniforms the host draws for sample i.
 * draw_base is a DEVICE uint64 read when the kernel runs, so one captured
 * CUDA graph serves every rollout step (the trainer advances it between
 * replays); NULL means base 0. Greedy ignores the draws. One thread per
 * window; logits has a row stride. logp may be NULL. The double arithmetic
 * is the host's operation for operation (no FMA contraction); only CUDA's
 * exp and log may differ from glibc's by an ulp of double, so logp can be
 * an ulp of float off the host's and an action differs only if u s lies
 * within an ulp of a CDF step. Device pointers; stream a cudaStream_t
 * (NULL: default). Returns ST_OK, ST_ERR_INTERNAL (bad sizes) or
 * ST_ERR_DEVICE. */
#ifndef ST_SELECT_CUDA_H
#define ST_SELECT_CUDA_H

#include <stdint.h>

int st_cuda_select_actions(int n, int A, const float *logits, int logits_stride, uint64_t seed, uint32_t stream_id,
                           const uint64_t *draw_base, int greedy, int *action, float *logp, void *stream);

#endif
