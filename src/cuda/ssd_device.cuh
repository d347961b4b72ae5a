/* ssd_device.cuh: the device helpers the GPU SSD's files share
 * (model/ssd.cu, model/ssd_scan.cu): the decays' segment and prefix sums,
 * in double, in the order of ssd.c, and the staging of rows into shared
 * memory. CUDA sources only. */
#ifndef ST_SSD_DEVICE_CUH
#define ST_SSD_DEVICE_CUH

/* One 32-row segment of a warp's inclusive prefix sum in double: v summed
 * over lanes 0..lane by an up-shuffle tree, plus carry (the segments
 * before); carry becomes the segment's total (lane 31's) for the next.
 * The scan of every TC kernel's decays (cum over a chunk or a window). */
__device__ static inline double warp_prefix_step(double v, double &carry, int lane) {
    for (int o = 1; o < 32; o *= 2) {
        const double u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    v += carry;
    carry = __shfl_sync(0xffffffffu, v, 31);
    return v;
}

/* sum_{s<i<=t} a_i, summed from t down as ssd.c's decay_row does. */
__device__ static inline double segment(const double *ai, int t, int s) {
    double seg = 0;
    for (int i = t; i > s; i--)
        seg += ai[i];
    return seg;
}

/* sum_{i<=t} a_i, summed upwards as ssd.c's decay_from_entry does. */
__device__ static inline double prefix(const double *ai, int t) {
    double acc = 0;
    for (int i = 0; i <= t; i++)
        acc += ai[i];
    return acc;
}

/* Copies `rows` rows of `cols` floats (row stride ld) into dst, row
 * stride cols + 1: the odd stride puts a column's values in different
 * banks, so threads reading down a column (a row each) do not conflict. */
__device__ static inline const float *stage_rows(const float *src, int ld, int rows, int cols, float *dst) {
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x)
        dst[(idx / cols) * (cols + 1) + idx % cols] = src[(size_t)(idx / cols) * ld + idx % cols];
    return dst;
}

#endif
