/* device.c: CUDA device discovery through the runtime's C API (device.h). */
#include "core/device.h"

#include <stdio.h>

#include "core/error.h"

#ifdef ST_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int st_cuda_built(void) {
#ifdef ST_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int st_cuda_devices(void) {
#ifdef ST_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
#else
    return 0;
#endif
}

int st_cuda_use_device(int dev) {
#ifdef ST_HAVE_CUDA
    int n = st_cuda_devices();
    ST_REQUIRE(dev >= 0 && dev < n, ST_ERR_DEVICE, "GPU %d: this host has %d GPU(s)", dev, n);
    cudaError_t e = cudaSetDevice(dev);
    ST_REQUIRE(e == cudaSuccess, ST_ERR_DEVICE, "GPU %d: %s", dev, cudaGetErrorString(e));
    return 0;
#else
    return ST_FAIL(ST_ERR_DEVICE, "GPU %d: no CUDA backend in this build", dev);
#endif
}

const char *st_cuda_describe(void) {
    static char buf[512];
#ifdef ST_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(buf, sizeof buf, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return buf;
    }
    struct cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    snprintf(buf, sizeof buf, "%.200s, sm_%d%d, %d SMs, %.0f GiB", p.name, p.major, p.minor, p.multiProcessorCount,
             (double)p.totalGlobalMem / (1 << 30));
#else
    snprintf(buf, sizeof buf, "no CUDA backend in this build (nvcc was not found when it was configured)");
#endif
    return buf;
}
