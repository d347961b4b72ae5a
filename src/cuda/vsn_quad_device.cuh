/* vsn_quad_device.cuh: the accumulator-layout pieces that the fused VSN's
 * tensor-core kernels share (model/vsn_forward_fused_tc.cu, model/
 * vsn_backward_fused_tc.cu, model/vsn_table_fill_tc.cu). Lane (g, q) of a
 * warp holds, of an m16n8 accumulator tile, rows g and g + 8 (h = 0, 1) and
 * columns 2q, 2q + 1 of each n-tile p: a row's Dv outputs o = 8p + 2q + e
 * lie in the 4 lanes of its quad. The forward's h1 into A (h1_pair), gate
 * (quad_gate_x) and norm statistics (quad_stats) are here once, so that the
 * two table fills and the one-pass forward give the same bits. CUDA
 * sources only. */
#ifndef ST_VSN_QUAD_DEVICE_CUH
#define ST_VSN_QUAD_DEVICE_CUH

#include "cuda/mma_bf16_device.cuh" /* bf16x2 */
#include "cuda/vsn_device.cuh"
#include "cuda/vsn_tile_device.cuh" /* row_sum */

__device__ static inline float2 lds2(const float *p) { return *reinterpret_cast<const float2 *>(p); }

__device__ static inline float comp(float2 v, int e) { return e ? v.y : v.x; }

/* h1 = ELU(s U + V) at one row (s) and two adjacent columns (U, V pairs), as bf16x2: an A
 * fragment register of the first product. */
__device__ static inline uint32_t h1_pair(float s, float2 U, float2 V) {
    return bf16x2(dev_elu(s * U.x + V.x), dev_elu(s * U.y + V.y));
}

/* The gate and the norm's input of row h for the lane's outputs c = 2p + e
 * (o = 8p + 2q + e) from the product g = h2 Wg^T's accumulators acc (n-tile
 * p: g1, NT + p: g2) and the vectors b1, b2, ew, eb [Dv]: sg = sigma(g2 + b2),
 * x = (s ew + eb) + (g1 + b1) sg, the fp32 kernels' expressions. */
template <int NT>
__device__ static inline void quad_gate_x(const float (&acc)[2 * NT][4], int h, int q, float s, const float *b1v,
                                          const float *b2v, const float *ewv, const float *ebv, float (&x)[2 * NT],
                                          float (&sg)[2 * NT]) {
#pragma unroll
    for (int p = 0; p < NT; p++) {
        const int o = 8 * p + 2 * q;
        const float2 b1 = lds2(b1v + o), b2 = lds2(b2v + o), ew = lds2(ewv + o), eb = lds2(ebv + o);
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float g1 = acc[p][2 * h + e] + comp(b1, e);
            sg[2 * p + e] = sigmoid_one_div(acc[NT + p][2 * h + e] + comp(b2, e));
            x[2 * p + e] = (s * comp(ew, e) + comp(eb, e)) + g1 * sg[2 * p + e];
        }
    }
}

/* The forward's LayerNorm statistics of one row from the lane's 2 NT = Dv / 4 values x (its
 * quad holds the row): the mean and rstd as the fp32 kernel forms them (double sums, the quad's
 * butterfly, a double rsqrt). */
template <int NT> __device__ static inline void quad_stats(const float (&x)[2 * NT], float &mean, float &rstd) {
    constexpr int DV = 8 * NT;
    double sum = 0;
#pragma unroll
    for (int c = 0; c < 2 * NT; c++)
        sum += x[c];
    sum = row_sum<4>(sum) * (1.0 / DV); /* Dv a power of two: the same bits as / Dv */
    double var = 0;
#pragma unroll
    for (int c = 0; c < 2 * NT; c++)
        var += ((double)x[c] - sum) * ((double)x[c] - sum);
    var = row_sum<4>(var);
    mean = (float)sum, rstd = (float)rsqrt(var * (1.0 / DV) + VSN_EPS);
}

#endif
