/* check.h: checked CUDA and cuBLAS calls for the CUDA backend's .cu files.
 *
 * ST_CUDA_TRY(call) and ST_CUBLAS_TRY(call) turn a failure into an
 * ST_ERR_DEVICE status with file:line and the runtime's own words, and
 * return it from the enclosing int function; ST_CUDA_LAUNCHED() checks the
 * last kernel launch. No exit() in the library. */
#ifndef ST_CUDA_CHECK_H
#define ST_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "core/error.h"
}

#define ST_CUDA_TRY(call)                                                                                      \
    do {                                                                                                       \
        cudaError_t st_e_ = (call);                                                                            \
        if (st_e_ != cudaSuccess)                                                                              \
            return st_fail(__FILE__, __LINE__, ST_ERR_DEVICE, "%s: %s", #call, cudaGetErrorString(st_e_));     \
    } while (0)

#define ST_CUDA_LAUNCHED() ST_CUDA_TRY(cudaGetLastError())

#define ST_CUBLAS_TRY(call)                                                                                    \
    do {                                                                                                       \
        cublasStatus_t st_s_ = (call);                                                                         \
        if (st_s_ != CUBLAS_STATUS_SUCCESS)                                                                    \
            return st_fail(__FILE__, __LINE__, ST_ERR_DEVICE, "%s: cuBLAS status %d", #call, (int)st_s_);     \
    } while (0)

#endif
