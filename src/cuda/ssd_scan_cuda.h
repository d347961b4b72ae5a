/* ssd_scan_cuda.h: the SSD forward as one kernel a (window, head) that
 * walks the chunks in order (model/ssd_scan.cu), for ssd.cu's
 * st_cuda_ssd_forward_chunked: the same arguments, plus the shared memory
 * the device allows a block (its opt-in limit, 0 when staging is off).
 * *taken = 1 when it enqueued the forward; 0 (and nothing enqueued) when
 * the shape does not fit it or st_cuda_ssd_set_scan(0) turned it off, and
 * the caller runs the chunk-parallel kernels. */
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

#ifdef __cplusplus
}
#endif

#endif
