/* philox_kernel.cu: Philox draws on the device, for the parity test that
 * shows the CPU and GPU streams are the same numbers (DESIGN section 7). */
#include "cuda/check.h"

extern "C" {
#include "core/philox.h"
#include "cuda/philox_kernel.h"
}

__global__ static void draw_kernel(uint64_t seed, uint32_t stream, uint64_t first, int n, uint32_t *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    st_philox4 r = st_philox_draw(seed, stream, first + (uint64_t)i);
    for (int k = 0; k < 4; k++) out[4 * i + k] = r.v[k];
}

extern "C" int st_cuda_philox_draws(uint64_t seed, uint32_t stream, uint64_t first, int n, uint32_t *host_out) {
    uint32_t *d = NULL;
    ST_CUDA_TRY(cudaMalloc(&d, sizeof(uint32_t) * 4 * (size_t)n));
    draw_kernel<<<(n + 255) / 256, 256>>>(seed, stream, first, n, d);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(host_out, d, sizeof(uint32_t) * 4 * (size_t)n, cudaMemcpyDeviceToHost);
    cudaFree(d);
    ST_CUDA_TRY(e);
    return ST_OK;
}
