/* vsn_tile_device.cuh: the register tiles of the per-variable GRN that the
 * fused VSN kernels share (model/vsn_forward_fused.cu, its forward, and
 * model/vsn_backward_fused.cu, whose backward recomputes it). A block of T
 * threads holds a tile of R = 4 RG rows in shared memory at padded row
 * strides (LDH activations, LDW weights, multiples of 4 floats); thread
 * (rg, cg), cg < CG = DV / 4, rg < RG = T / CG, owns rows rg + RG i and
 * columns cg + CG c (i, c < 4) of each [R, DV] product. CUDA sources only. */
#ifndef ST_VSN_TILE_DEVICE_CUH
#define ST_VSN_TILE_DEVICE_CUH

#include "cuda/vsn_device.cuh"

__device__ static inline float4 lds4(const float *p) { return *reinterpret_cast<const float4 *>(p); }

/* acc += a . b, the 4 k in the order x, y, z, w (one accumulator of a register tile). */
__device__ static inline void fma4(float &acc, const float4 &a, const float4 &b) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    acc = fmaf(a.w, b.w, acc);
}

/* The sum of v over the CG adjacent lanes of one row. */
template <int CG> __device__ static inline double row_sum(double v) {
#pragma unroll
    for (int o = CG / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* h1[r][k] = ELU(s[r] U[k] + V[k]) over the tile's rows, a float4 of one
 * row a step (st_cuda_vsn_rank1's expression); tid is threadIdx.x. */
template <int DV, int T, int LDH>
__device__ static inline void vsn_tile_h1(const float *s, const float *U, const float *V, float *h1, int tid) {
    constexpr int CG = DV / 4, R = 4 * (T / CG);
    for (int u = tid; u < R * CG; u += T) {
        const int r = u / CG, k = 4 * (u % CG);
        const float sj = s[r];
        const float4 Uk = lds4(U + k), Vk = lds4(V + k);
        float4 h;
        h.x = dev_elu(sj * Uk.x + Vk.x);
        h.y = dev_elu(sj * Uk.y + Vk.y);
        h.z = dev_elu(sj * Uk.z + Vk.z);
        h.w = dev_elu(sj * Uk.w + Vk.w);
        *reinterpret_cast<float4 *>(h1 + r * LDH + k) = h;
    }
}

/* h2 = h1 W2^T: the thread's 4 x 4 outputs as a register tile, stored to h2. */
template <int DV, int RG, int LDH, int LDW>
__device__ static inline void vsn_tile_h2(const float *h1, const float *W2, float *h2, int rg, int cg) {
    constexpr int CG = DV / 4;
    float h[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            h[i][c] = 0;
#pragma unroll
    for (int k = 0; k < DV; k += 4) {
        float4 x[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            x[i] = lds4(h1 + (rg + RG * i) * LDH + k);
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const float4 w = lds4(W2 + (cg + CG * c) * LDW + k);
#pragma unroll
            for (int i = 0; i < 4; i++)
                fma4(h[i][c], x[i], w);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            h2[(rg + RG * i) * LDH + cg + CG * c] = h[i][c];
}

/* g = h2 Wg^T without its bias: g[i][q] is column cg + CG q (q < 4, g1) or
 * DV + cg + CG (q - 4) (its g2), so a thread holds both halves of its gates. */
template <int DV, int RG, int LDH, int LDW>
__device__ static inline void vsn_tile_g(const float *h2, const float *Wg, int rg, int cg, float (&g)[4][8]) {
    constexpr int CG = DV / 4;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int q = 0; q < 8; q++)
            g[i][q] = 0;
#pragma unroll 1 /* not unrolled: unrolled, ptxas hoists the next step's loads and spills */
    for (int k = 0; k < DV; k += 4) {
        float4 h[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            h[i] = lds4(h2 + (rg + RG * i) * LDH + k);
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const int o = (q < 4 ? 0 : DV) + cg + CG * (q & 3);
            const float4 w = lds4(Wg + o * LDW + k);
#pragma unroll
            for (int i = 0; i < 4; i++)
                fma4(g[i][q], h[i], w);
        }
    }
}

#endif
