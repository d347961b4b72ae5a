/* vsn_device.cuh: the scalar device helpers the GPU VSN's files share
 * (model/vsn.cu, model/vsn_fold.cu), each the float twin of the CPU op's
 * (core/act.h, model/vsn.c), and their loop shapes. CUDA sources only. */
#ifndef ST_VSN_DEVICE_CUH
#define ST_VSN_DEVICE_CUH

#define VSN_EPS 1e-5

/* The selection GRN's hidden width Hs = min(Dv, F) (model/vsn.h). */
static __host__ __device__ inline int hidden_sel(int F, int Dv) { return Dv < F ? Dv : F; }

__device__ static inline float dev_sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
/* dev_sigmoid's value with one division for both signs (the same bits:
 * 1/(1+e) and e/(1+e) with e = exp(-|x|)), no divergent branch. */
__device__ static inline float sigmoid_one_div(float x) {
    const float e = expf(-fabsf(x));
    return (x >= 0 ? 1.0f : e) / (1.0f + e);
}

__device__ static inline float dev_elu(float x) { return x > 0 ? x : expm1f(x); }
/* d ELU(x)/dx given h = ELU(x): 1 where h > 0, else e^x = h + 1. */
__device__ static inline float elu_grad_from_out(float h) { return h > 0 ? 1.0f : h + 1.0f; }
/* xhat of a LayerNorm as vsn.c computes it (rounded to float). */
__device__ static inline float xhat_of(float x, float mean, float rstd) {
    return (float)(((double)x - (double)mean) * (double)rstd);
}

/* The sum of v over the 32 lanes of a warp, every lane getting it. */
__device__ static inline double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#define GRID_LOOP(i, n)                                                                                                \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Warps of the grid, each owning item `it` < n of a grid-stride loop; the
 * whole warp stays in the loop together (its shuffles need every lane). */
#define WARP_LOOP(it, n)                                                                                               \
    for (size_t it = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; it < (n);                                   \
         it += (size_t)gridDim.x * blockDim.x / 32)

#endif
