/* ssd_scan_cuda.h: the SSD forward and backward as one kernel a (window,
 * head) that walks the chunks in order (model/ssd_scan.cu,
 * model/ssd_scan_backward.cu), for ssd.cu's st_cuda_ssd_forward_chunked
 * and st_cuda_ssd_backward_chunked: the forward the same arguments (Q
 * already clamped to [1, K]), the backward ssd.cu's argument struct, plus
 * the shared memory the device allows a block (its opt-in
 * limit, 0 when staging is off). *taken = 1 when it enqueued the work; 0
 * (and nothing enqueued) when the shape does not fit it or
 * st_cuda_ssd_set_scan(0) / st_cuda_ssd_set_scan_backward(0) turned it off,
 * and the caller runs the chunk-parallel kernels. The forward runs its
 * tensor-core variant where st_cuda_ssd_scan_tc_fits says so. */
#ifndef ST_SSD_SCAN_CUDA_H
#define ST_SSD_SCAN_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int st_cuda_ssd_scan_forward(int Bsz, int K, int H, int P, int G, int N, int Q, const float *x, int x_stride,
                             const float *dt, int dt_stride, const float *A, const float *Bm, int B_stride,
                             const float *Cm, int C_stride, const float *Dskip, float *y, int y_stride,
                             size_t smem_optin, void *stream, int *taken);

/* 1 when st_cuda_ssd_scan_forward would run these sizes (Q clamped) on
 * the tensor cores (ssd_scan_tc.cu): bf16 mode, the switches on, the
 * shared memory within smem_optin. */
int st_cuda_ssd_scan_tc_fits(int Bsz, int H, int P, int N, int Q, size_t smem_optin);

/* 1 when st_cuda_ssd_scan_backward would take these sizes (Q clamped). */
int st_cuda_ssd_scan_backward_fits(int Bsz, int K, int H, int P, int N, int Q, size_t smem_optin);

#ifdef __cplusplus
}

/* The backward's part before reduce_group and reduce_head, for the sizes,
 * pointers and strides in `a` (ssd.cu's, with dy, dx, ddt set; its stage
 * and fused flags are not read), into ssd.cu's work slabs: `states`
 * [Bsz H nc, P N] (scratch: the states entering the chunks), dBp, dCp
 * [Bsz H, K N] (this head's dB, dC rows), partA, partD [Bsz H nc] (each
 * chunk's dA, dD partials), as chunk_backward leaves them. */
struct ssd_dev_args;
int st_cuda_ssd_scan_backward(const ssd_dev_args &a, float *states, float *dBp, float *dCp, float *partA, float *partD,
                              size_t smem_optin, void *stream, int *taken);
#endif

#endif
