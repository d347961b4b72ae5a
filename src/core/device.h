/* device.h: is there a CUDA device, and which backend a run uses.
 *
 * Compiled in every build: without the CUDA backend (no nvcc at build time)
 * st_cuda_devices() is 0. Tests of GPU code call st_cuda_devices() and skip
 * with a clear message when it is 0 (CI has nvcc but no GPU). */
#ifndef ST_DEVICE_H
#define ST_DEVICE_H

/* Number of usable CUDA devices (0 when none, or no CUDA backend built). */
int st_cuda_devices(void);
/* 1 when the CUDA backend was compiled in. */
int st_cuda_built(void);
/* Makes device dev current for this thread (a rank of multi-GPU training);
 * ST_OK (0), or ST_ERR_DEVICE with a message in st_last_error(). */
int st_cuda_use_device(int dev);
/* One line naming device 0 ("NVIDIA H200, sm_90, 132 SMs, 139 GiB"), or why there is none. */
const char *st_cuda_describe(void);

/* Exit status a test returns when it skips (ctest SKIP_RETURN_CODE). */
#define ST_TEST_SKIP 77

#endif
