/* window.h: the observation window builder (the kernel called
 * encoder_context_broadcast in the original system; DESIGN sections 1, 4, 9).
 *
 * For each of B (instrument, bar) pairs and a context buffer [B, C]:
 *   win[b, k, 0:F]   = features of bar (bar[b] - K + 1 + k),  k = 0..K-1
 *   win[b, k, F:F+C] = ctx[b, 0:C]  (broadcast to every row)
 * Window rows are r = b*K + k at win + r * win_stride; win_stride >= F + C
 * and the gap after column F + C is never written (poisoned padding stays
 * poisoned). The context row b starts at ctx + b * ctx_stride. Feature rows
 * of an instrument start at features + t * feat_stride; market.h stores them
 * with row stride m->F, which st_window_build passes as the stride (never
 * as a width). Output precision is the translation unit's `real`; inputs
 * are float (the data and the rollout's stored context). */
#ifndef ST_WINDOW_H
#define ST_WINDOW_H

#include "core/real.h"
#include "data/market.h"

#define st_window_build ST_R(st_window_build)
#define st_window_build_rows ST_R(st_window_build_rows)

/* The kernel on raw pointers: feat[b] points at bar 0 of pair b's
 * instrument features. Sizes and bars are taken as valid
 * (bar[b] >= K - 1 and bar[b] inside the instrument). */
void st_window_build_rows(int B, int K, int F, int C, const float *const *feat, int feat_stride, const int *bar,
                          const float *ctx, int ctx_stride, real *win, int win_stride);

/* The same over a market: pair b is (inst[b], bar[b]). Checks the pairs
 * (instrument exists, K - 1 <= bar < n) and the strides, then builds.
 * ST_ERR_INPUT naming the first bad pair. */
int st_window_build(const st_market *m, int B, int K, const int *inst, const int *bar, const float *ctx, int C,
                    int ctx_stride, real *win, int win_stride);

#endif
