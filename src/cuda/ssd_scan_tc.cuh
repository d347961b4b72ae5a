/* ssd_scan_tc.cuh: what the scan forward's kernels share: the argument
 * struct (model/ssd_scan.cu fills it) and the entry points of the TF32
 * tensor-core variants (model/ssd_scan_tc.cu, model/ssd_scan_quad.cu),
 * which ssd_scan.cu takes in bf16 matrix-product mode. CUDA sources only. */
#ifndef ST_SSD_SCAN_TC_CUH
#define ST_SSD_SCAN_TC_CUH

#include <stddef.h>

#include <cuda_runtime.h>

/* Threads a block of either kernel (8 warps). */
#define SCAN_THREADS 256

struct scan_args {
    int K, H, P, G, N, Q, nc;
    const float *x, *dt, *A, *Bm, *Cm, *Dskip;
    int x_stride, dt_stride, B_stride, C_stride;
    float *y;
    int y_stride;
};

/* Dynamic shared memory of the tensor-core kernel at this shape (Q, P, N
 * each padded to a multiple of 16 inside). */
size_t scan_tc_smem_bytes(int Q, int P, int N);

/* Enqueues a tensor-core kernel (scan_tc_smem_bytes already known to be
 * within smem_optin, the device's opt-in limit): the quad kernel where
 * scan_quad_takes says so, else the pair kernel (or the heads kernel),
 * both chunks at once, where a.nc = 2 with full chunks (K = 2Q, Q a
 * multiple of 16) and its shared memory fits, else the walk. */
int scan_tc_launch(const scan_args &a, int Bsz, size_t smem_optin, cudaStream_t st);

/* The current device's SM count (0 on failure). */
int tc_sms(void);

/* `kernel` over `blocks` blocks of SCAN_THREADS with `bytes` of dynamic
 * shared memory (opted in past the 48 KiB default). */
int tc_launch(void (*kernel)(scan_args), const scan_args &a, size_t bytes, unsigned blocks, cudaStream_t st);

/* The quad kernel (model/ssd_scan_quad.cu): 1 when it takes a window of K
 * rows (HG = H/G heads a group) with smem_optin bytes of shared memory a
 * block allowed and st_cuda_ssd_set_scan_tc_quad on; the launch over Bsz
 * G blocks. */
int scan_quad_takes(int K, int P, int N, int HG, size_t smem_optin);
int scan_quad_launch(const scan_args &a, int Bsz, cudaStream_t st);

#endif
