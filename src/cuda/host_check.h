/* host_check.h: checked CUDA runtime calls in the backend's host C files
 * (train/trainer_cuda.c, train/evaluate_cuda.c; the .cu files use
 * cuda/check.h). ST_CU(call) turns a failure into ST_ERR_DEVICE naming the
 * call and the runtime's own words, returned from the enclosing int
 * function. Include after <cuda_runtime_api.h>. */
#ifndef ST_HOST_CHECK_H
#define ST_HOST_CHECK_H

#include "core/error.h"

#define ST_CU(call)                                                                                            \
    do {                                                                                                       \
        cudaError_t st_e_ = (call);                                                                            \
        if (st_e_ != cudaSuccess) return ST_FAIL(ST_ERR_DEVICE, "%s: %s", #call, cudaGetErrorString(st_e_));  \
    } while (0)

#endif
