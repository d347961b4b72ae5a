/* mma_bf16_device.cuh: the warp-level bf16 tensor-core pieces that the
 * fused VSN kernels share (model/vsn_forward_fused_tc.cu,
 * model/vsn_backward_fused_tc.cu): bf16x2 packing, mma.sync m16n8k16 with
 * fp32 accumulators, and ldmatrix / stmatrix of 8 x 8 b16 matrices.
 * Fragment layouts (PTX ISA; lane = 4 g + q): an 8 x 8 matrix's fragment
 * is one register, lane (g, q) holding row g, columns 2q, 2q + 1 (the
 * lower column in the low half); ldmatrix / stmatrix take matrix i's row
 * addresses (16 bytes each, 16-byte aligned) from lanes 8 i .. 8 i + 7,
 * and with .trans the lane's register holds column g, rows 2q, 2q + 1
 * instead. CUDA sources only; sm_90 (stmatrix). */
#ifndef ST_MMA_BF16_DEVICE_CUH
#define ST_MMA_BF16_DEVICE_CUH

#include <cuda_bf16.h>
#include <stdint.h>

/* (lo, hi) as bf16x2, lo in the low half (a fragment register's lower-indexed element). */
__device__ static inline uint32_t bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}

/* d += a b over one m16n8k16 tile: bf16 operands, fp32 accumulators. */
__device__ static inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ static inline uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Four 8 x 8 matrices stored from r[0..3], this lane's row address p. */
__device__ static inline void stsm_x4(void *p, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr(p)), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

/* Four (two: lanes 0-15's addresses) 8 x 8 matrices loaded transposed, this lane's row address p. */
__device__ static inline void ldsm_x4_trans(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p))
                 : "memory");
}
__device__ static inline void ldsm_x2_trans(uint32_t (&r)[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(p))
                 : "memory");
}

#endif
