/* ssd_scan_quad_cuda.h: the SSD backward in its quadratic form, the whole
 * window (K <= 64 rows) as one chunk, a block a (window, group)
 * (model/ssd_scan_quad_backward.cu), for ssd.cu's
 * st_cuda_ssd_backward_chunked. CUDA sources only (C++: it takes ssd.cu's
 * argument struct). */
#ifndef ST_SSD_SCAN_QUAD_CUDA_H
#define ST_SSD_SCAN_QUAD_CUDA_H

#include <stddef.h>

/* 1 when st_cuda_ssd_scan_quad_backward would take these sizes: bf16
 * matrix-product mode, st_cuda_ssd_set_scan_quad_backward on, K <= 64 and
 * K, P, N multiples of 16, G dividing H, and its shared memory within
 * smem_optin (the device's opt-in limit a block, 0 when staging is off). */
int st_cuda_ssd_scan_quad_fits(int Bsz, int K, int H, int P, int G, int N, size_t smem_optin);

/* The backward for the sizes, pointers and strides in `a` (ssd.cu's, with
 * dy, dx, ddt set; its Q, nc, stage and fused are not read): dx, ddt, dB
 * and dC written, and each (window, head)'s dA, dD partials into partA,
 * partD [Bsz H] (at b H + h: ssd.cu's reduce_head with nc = 1 sums them).
 * *taken = 1 when it enqueued the work; 0 (nothing enqueued) where
 * st_cuda_ssd_scan_quad_fits says no. */
struct ssd_dev_args;
int st_cuda_ssd_scan_quad_backward(const ssd_dev_args &a, float *dB, int dB_stride, float *dC, int dC_stride,
                                   float *partA, float *partD, size_t smem_optin, void *stream, int *taken);

#endif
