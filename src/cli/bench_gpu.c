/* bench_gpu.c: the measurements of `ssmtrade bench` (cli/bench.h, issue 7),
 * each in its file (bench_ceilings.c, bench_train.c, bench_env.c,
 * bench_e2e.c; shared pieces in bench_gpu.h), and here the hand count of a
 * training step:
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
#include "cuda/model_cuda.h"

st_bench_cost st_bench_train_cost(const st_dims *d, int n, size_t params) {
    double F = d->F, C = d->C, Dv = d->Dv, D = d->D, Hs = st_sel_hidden(d), K = d->K;
    double di = st_d_inner(d), H = st_heads(d), P = d->headdim, N = d->N, G = d->G, W = d->W, Q = d->Q;
    double vsn =
        2 * F * Dv + 2 * F * Dv * (F + Hs) + 2 * C * Hs + 2 * Hs * Hs + 4 * Hs * F + F * 8 * Dv * Dv + 2 * F * Dv;
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
