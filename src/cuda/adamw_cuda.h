/* adamw_cuda.h: AdamW over the flat parameter buffer and global grad-norm
 * clipping on the GPU, float32 (the CUDA twin of train/adamw.h, DESIGN
 * section 6). Per element i, step counting from 1:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   w -= lr (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + lr wd w   (wd only where decay[i])
 * Weight decay follows the parameter table's per-tensor flags (matrices:
 * not norms, biases, A_log, dt_bias, Dskip), handed to the kernel as a
 * per-element byte mask built once from the table: one flat launch over all
 * tensors, no per-tensor indices in the kernel. The grad norm is summed in
 * double in a fixed order (per-block trees, then the blocks in order) and
 * stays on the device, so clipping needs no host synchronisation. All
 * buffers are device pointers; stream a cudaStream_t (NULL: default).
 * Returns ST_OK or ST_ERR_DEVICE (ST_ERR_MEMORY for the mask's host copy). */
#ifndef ST_ADAMW_CUDA_H
#define ST_ADAMW_CUDA_H

#include <stddef.h>

#include "model/params.h"
#include "train/adamw.h" /* st_adamw_hparams (precision-free) */

/* decay[i] = the decay flag of the tensor holding element i, for the
 * t->total elements of t (a device buffer of t->total bytes). Synchronous:
 * meant for setup, once per table. */
int st_cuda_adamw_decay_mask(const st_param_table *t, unsigned char *decay);

/* One update of the n elements of w, m, v from g (decay NULL: no weight decay). */
int st_cuda_adamw_step(size_t n, float *w, const float *g, float *m, float *v, const unsigned char *decay,
                       const st_adamw_hparams *h, long step, void *stream);

/* Device doubles of st_cuda_grad_norm's work buffer for n elements. */
size_t st_cuda_grad_norm_work_count(size_t n);
/* *norm (one device double) = sqrt(sum g^2) over n elements. */
int st_cuda_grad_norm(size_t n, const float *g, double *norm, double *work, void *stream);
/* g *= s (host scalar, rounded to float once as the CPU op does). */
int st_cuda_grad_scale(size_t n, float *g, double s, void *stream);
/* g *= max_norm / *norm when *norm > max_norm, the norm read on the device
 * (the trainer's clip, without a round trip to the host). */
int st_cuda_grad_clip(size_t n, float *g, const double *norm, double max_norm, void *stream);

#endif
