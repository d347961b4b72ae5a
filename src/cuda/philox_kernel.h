/* philox_kernel.h: n Philox draws (4 words each) computed on the GPU. */
#ifndef ST_PHILOX_KERNEL_H
#define ST_PHILOX_KERNEL_H

#include <stdint.h>

int st_cuda_philox_draws(uint64_t seed, uint32_t stream, uint64_t first, int n, uint32_t *host_out);

#endif
