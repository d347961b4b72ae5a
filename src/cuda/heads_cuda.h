/* heads_cuda.h: final LayerNorm, policy head and value head on the GPU,
 * float32 (the CUDA twin of model/heads.h, DESIGN section 5):
 *
 *   h = ln_f(u[row K-1])      [n, D]   (only the last row of each window)
 *   g = [h; c]                [n, D+C]
 *   logits = pi2(tanh(pi1(g)))  [n, A]
 *   value  = v2(tanh(v1(g)))    [n]
 * u_last and c point at the last row of the first window; their row strides
 * step from window to window (K rows of the window buffer). Built on
 * cuda/linear_cuda.h and cuda/layernorm_cuda.h. saved and work are device
 * buffers with the CPU op's layout and sizes (st_cuda_heads_saved_count,
 * st_cuda_heads_work_count): mean [n], rstd [n], g [n, D+C], p [n, Hh], q [n, Hh].
 * Device pointers; stream a cudaStream_t (NULL: default). Returns ST_OK or
 * ST_ERR_DEVICE. */
#ifndef ST_HEADS_CUDA_H
#define ST_HEADS_CUDA_H

#include <stddef.h>

/* Device pointers to the head's parameters (the shapes of DESIGN section 5:
 * ln_f [D], pi1 [Hh, D+C] + [Hh], pi2 [A, Hh] + [A], v1 [Hh, D+C] + [Hh],
 * v2 [1, Hh] + [1]). Plain float pointers whatever the caller's `real`. */
typedef struct {
    const float *ln_w, *ln_b, *pi1_w, *pi1_b, *pi2_w, *pi2_b, *v1_w, *v1_b, *v2_w, *v2_b;
} st_cuda_heads_weights;
/* Device pointers to their gradients (added to). */
typedef struct {
    float *ln_w, *ln_b, *pi1_w, *pi1_b, *pi2_w, *pi2_b, *v1_w, *v1_b, *v2_w, *v2_b;
} st_cuda_heads_grads;

size_t st_cuda_heads_saved_count(int n, int D, int C, int Hh);
size_t st_cuda_heads_work_count(int n, int D, int C, int Hh);

/* logits [n, A] (row stride logits_stride), value [n] contiguous, saved written. */
int st_cuda_heads_forward(int n, int D, int C, int Hh, int A, const float *u_last, int u_stride, const float *c,
                          int c_stride, const st_cuda_heads_weights *w, float *logits, int logits_stride, float *value,
                          float *saved, void *stream);

/* du_last [n, D] written; dc [n, C] written, or added to when dc_accumulate
 * is set; every gradient in g added to. dvalue [n] contiguous. */
int st_cuda_heads_backward(int n, int D, int C, int Hh, int A, const float *u_last, int u_stride,
                           const st_cuda_heads_weights *w, const float *saved, const float *dlogits, int dlogits_stride,
                           const float *dvalue, float *du_last, int du_stride, float *dc, int dc_stride,
                           int dc_accumulate, const st_cuda_heads_grads *g, float *work, void *stream);

#endif
