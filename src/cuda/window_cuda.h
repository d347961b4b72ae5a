/* window_cuda.h: the observation window builder on the GPU (the CUDA twin of
 * env/window.h; DESIGN sections 1, 4, 9). For each of B (instrument, bar)
 * pairs and a context buffer [B, C]:
 *   win[b, k, 0:F]   = features of bar (bar[b] - K + 1 + k),  k = 0..K-1
 *   win[b, k, F:F+C] = ctx[b, 0:C]  (broadcast to every row)
 * Window rows are r = b*K + k at win + r * win_stride (win_stride >= F + C;
 * the gap after column F + C is never written); context row b starts at
 * ctx + b * ctx_stride; feature rows of an instrument are feat_stride apart
 * (market.h's layout: m->F, passed as a stride, never as a width). Pure
 * copies, one thread per window value: equal bits to the CPU op's float
 * build. Bars are taken as valid (checked on the host by st_window_build or
 * by whoever draws them). Device pointers; stream a cudaStream_t (NULL:
 * default). Returns ST_OK or ST_ERR_DEVICE. */
#ifndef ST_WINDOW_CUDA_H
#define ST_WINDOW_CUDA_H

#include "data/market.h"

/* The twin of st_window_build_rows: feat is a device array of B device
 * pointers, feat[b] at bar 0 of pair b's instrument. */
int st_cuda_window_build_rows(int B, int K, int F, int C, const float *const *feat, int feat_stride, const int *bar,
                              const float *ctx, int ctx_stride, float *win, int win_stride, void *stream);

/* The same through an instrument table: pair b is (inst[b], bar[b]) and
 * inst_feat is a device array of one device pointer per instrument (as
 * st_cuda_features holds), so the rollout keeps only (inst, bar, ctx). */
int st_cuda_window_build(int B, int K, int F, int C, const float *const *inst_feat, int feat_stride, const int *inst,
                         const int *bar, const float *ctx, int ctx_stride, float *win, int win_stride, void *stream);

/* Device copies of a market's feature arrays: every instrument's [n, F]
 * rows in one allocation (row stride F), and a device table of one pointer
 * per instrument into it. */
typedef struct {
    int n_inst;
    int F;              /* the row stride of every instrument's features */
    long rows;          /* the bars of all instruments: data's rows */
    float *data;        /* all features, instrument after instrument */
    const float **inst; /* device array [n_inst]: bar 0 of each instrument */
} st_cuda_features;

/* Uploads m's features (synchronous; once per market). Free with
 * st_cuda_features_free. */
int st_cuda_features_upload(const st_market *m, st_cuda_features *out);
void st_cuda_features_free(st_cuda_features *f);

/* rows[b K + k] = the row of f->data that st_cuda_window_build copies into
 * window row k of pair b (inst[b], bar[b]), [B * K] device ints: the index
 * of the action step's bar table (cuda/model_cuda.h). f->rows must be
 * below 2^31. */
int st_cuda_window_feature_rows(int B, int K, const st_cuda_features *f, const int *inst, const int *bar, int *rows,
                                void *stream);

#endif
