/* grouped_dw.cu: dW[g] += dy_g^T x_g for the F stacked per-variable
 * linears of the VSN, every group in one launch (math, shapes and the
 * order of the sums in cuda/grouped_dw_cuda.h).
 *
 * Block (g, split) sums rows [r0, r1) of its split (st_rowsplit_range):
 * tiles of GDW_ROWS rows of dy_g and x_g go to shared memory by cp.async
 * (16-byte copies where the rows allow, each thread's offsets formed once),
 * double-buffered (the next tile's copies in flight while this one is
 * summed); thread (to, ti) holds the 4 x 2 outputs o = 4 to .. 4 to + 3,
 * i = 2 ti, 2 ti + 1 and per row reads a float4 of dy and a float2 of x:
 * 2 shared loads per 8 multiply-adds. Rows past r1 are zeros in the tile
 * (their terms add 0 * 0). The split's float sums go to the row-split
 * scratch in double, which st_cuda_rowsplit_finish adds in split order;
 * with one split the block adds into dW itself. */
#include <cuda_pipeline.h>
#include <stdint.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/grouped_dw_cuda.h"
#include "cuda/linear_cuda.h"
}

#define GDW_THREADS 256
#define GDW_ROWS 32

/* The copies of rows [r, r + GDW_ROWS) of dy_g, x_g into the tile (dys
 * [GDW_ROWS][out], xs [GDW_ROWS][in]), in units of VW floats (4: 16-byte
 * cp.async, where the host found every row start 16-byte aligned; else 1).
 * A thread's units are the same every tile, so their (row, column)
 * offsets are formed once (gdw_units_of); rows at or past r1 are zeroed. */
/* units a thread at most: GDW_ROWS (out + in) / VW <= GDW_THREADS gdw_max_units(VW) */
__host__ __device__ constexpr int gdw_max_units(int vw) { return vw == 4 ? 4 : 12; }

/* A thread's units, unrolled so that they stay in registers: unit m is
 * q = tid + GDW_THREADS m of the tile's GDW_ROWS out dy units, then its
 * GDW_ROWS in x units; t its tile row (-1: no unit), k its column. */
template <int VW> struct gdw_units { int t[gdw_max_units(VW)], k[gdw_max_units(VW)], is_x[gdw_max_units(VW)]; };

template <int VW> __device__ static gdw_units<VW> gdw_units_of(int in, int out) {
    gdw_units<VW> u;
    const int udy = GDW_ROWS * out / VW, ux = GDW_ROWS * in / VW;
#pragma unroll
    for (int m = 0; m < gdw_max_units(VW); m++) {
        const int q = threadIdx.x + GDW_THREADS * m, isx = q >= udy, qq = isx ? q - udy : q;
        const int w = (isx ? in : out) / VW;
        u.is_x[m] = isx, u.t[m] = q < udy + ux ? qq / w : -1, u.k[m] = (qq % w) * VW;
    }
    return u;
}

template <int VW>
__device__ static void gdw_stage(const gdw_units<VW> &u, long r, long r1, int in, int out, const float *dy,
                                 int dy_stride, const float *x, int x_stride, float *dys, float *xs) {
#pragma unroll
    for (int m = 0; m < gdw_max_units(VW); m++) {
        const int t = u.t[m], k = u.k[m];
        if (t < 0) continue;
        float *dst = u.is_x[m] ? xs + t * in + k : dys + t * out + k;
        if (r + t < r1) {
            const float *src = u.is_x[m] ? x + (size_t)(r + t) * x_stride + k : dy + (size_t)(r + t) * dy_stride + k;
            __pipeline_memcpy_async(dst, src, sizeof(float) * VW);
        } else {
#pragma unroll
            for (int v = 0; v < VW; v++)
                dst[v] = 0.0f;
        }
    }
    __pipeline_commit();
}

template <int VW>
static __global__ void __launch_bounds__(GDW_THREADS)
    grouped_dw_kernel(int rows, int splits, int in, int out, const float *dy, int dy_stride, long dy_goff,
                      const float *x, int x_stride, long x_goff, double *parts, float *dW) {
    extern __shared__ float4 sm_gdw[];
    float *buf = (float *)sm_gdw; /* two tiles of GDW_ROWS x (out + in) */
    const int g = blockIdx.x, sp = blockIdx.y, per_tile = GDW_ROWS * (out + in);
    const int in2 = in / 2, ti = threadIdx.x % in2, to = threadIdx.x / in2, active = to < out / 4;
    dy += (size_t)g * dy_goff, x += (size_t)g * x_goff;
    const gdw_units<VW> u = gdw_units_of<VW>(in, out);
    long r0, r1;
    st_rowsplit_range(rows, splits, sp, &r0, &r1);
    float acc[4][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
    if (r0 < r1) gdw_stage<VW>(u, r0, r1, in, out, dy, dy_stride, x, x_stride, buf, buf + GDW_ROWS * out);
    int cur = 0;
    for (long r = r0; r < r1; r += GDW_ROWS, cur ^= 1) {
        float *nxt = buf + (cur ^ 1) * per_tile;
        if (r + GDW_ROWS < r1) {
            gdw_stage<VW>(u, r + GDW_ROWS, r1, in, out, dy, dy_stride, x, x_stride, nxt, nxt + GDW_ROWS * out);
            __pipeline_wait_prior(1); /* this tile's copies are done, the next one's may run on */
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads();
        const float *dys = buf + cur * per_tile, *xs = dys + GDW_ROWS * out;
        if (active) {
#pragma unroll 8
            for (int t = 0; t < GDW_ROWS; t++) {
                const float4 d = *(const float4 *)(dys + t * out + 4 * to);
                const float2 v = *(const float2 *)(xs + t * in + 2 * ti);
                acc[0][0] += d.x * v.x, acc[0][1] += d.x * v.y;
                acc[1][0] += d.y * v.x, acc[1][1] += d.y * v.y;
                acc[2][0] += d.z * v.x, acc[2][1] += d.z * v.y;
                acc[3][0] += d.w * v.x, acc[3][1] += d.w * v.y;
            }
        }
        __syncthreads(); /* the tile is reused for the copies after next */
    }
    if (!active) return;
    const size_t cols = (size_t)out * in, base = (size_t)g * cols;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++) {
            const size_t c = base + (size_t)(4 * to + a) * in + 2 * ti + b;
            if (parts)
                parts[(size_t)sp * cols * gridDim.x + c] = (double)acc[a][b];
            else
                dW[c] += acc[a][b];
        }
}

static int gdw_kernel_on = 1;
extern "C" void st_cuda_grouped_dw_set_kernel(int on) { gdw_kernel_on = on != 0; }

extern "C" int st_cuda_grouped_dw(int rows, int groups, int in, int out, const float *dy, int dy_stride, long dy_goff,
                                  const float *x, int x_stride, long x_goff, float *dW, void *stream) {
    if (rows <= 0 || groups <= 0 || in <= 0 || out <= 0) return ST_OK;
    const size_t bytes = 2 * sizeof(float) * GDW_ROWS * ((size_t)out + (size_t)in);
    /* 16-byte copies where every row start of both operands is 16-byte aligned */
    const int vec = in % 4 == 0 && dy_stride % 4 == 0 && x_stride % 4 == 0 && dy_goff % 4 == 0 && x_goff % 4 == 0 &&
                    (uintptr_t)dy % 16 == 0 && (uintptr_t)x % 16 == 0;
    const int fits = out % 4 == 0 && in % 2 == 0 && (long)(out / 4) * (in / 2) <= GDW_THREADS &&
                     (long)GDW_ROWS * (out + in) / (vec ? 4 : 1) <= (long)GDW_THREADS * gdw_max_units(vec ? 4 : 1) &&
                     bytes <= 48 * 1024;
    /* bf16 mode: cuBLAS's tensor-core products beat these CUDA-core FMAs at
     * 8,192 windows (+1.5 ms a training step with the kernel, bench/NOTES.md) */
    if (!gdw_kernel_on || !fits || st_cuda_matmul_precision() == ST_MATMUL_BF16) {
        for (int g = 0; g < groups; g++)
            ST_TRY(st_cuda_gemm(1, 0, out, in, rows, 1.0f, dy + (size_t)g * dy_goff, dy_stride, x + (size_t)g * x_goff,
                                x_stride, 1.0f, dW + (size_t)g * out * in, in, stream));
        return ST_OK;
    }
    const int cols = groups * out * in;
    st_rowsplit plan;
    ST_TRY(st_cuda_rowsplit_plan(rows, cols, stream, &plan));
    dim3 grid((unsigned)groups, (unsigned)plan.splits);
    if (vec)
        grouped_dw_kernel<4><<<grid, GDW_THREADS, bytes, (cudaStream_t)stream>>>(
            rows, plan.splits, in, out, dy, dy_stride, dy_goff, x, x_stride, x_goff, plan.parts, dW);
    else
        grouped_dw_kernel<1><<<grid, GDW_THREADS, bytes, (cudaStream_t)stream>>>(
            rows, plan.splits, in, out, dy, dy_stride, dy_goff, x, x_stride, x_goff, plan.parts, dW);
    ST_CUDA_LAUNCHED();
    return st_cuda_rowsplit_finish(cols, plan.parts, cols, plan.splits, dW, stream);
}
