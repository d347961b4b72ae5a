/* ssd_shape.cuh: the sizes the SSD's tensor-core kernels index with, as a
 * template parameter (a shape policy), so that one source serves the
 * runtime shape and a compile-time one:
 *   ssd_shape_any            Q, P, N from the call's arguments (any struct
 *                            with fields Q, P, N), a chunk's rows its L, the
 *                            block's threads blockDim.x;
 *   ssd_shape_fixed<Q,P,N,T> the same sizes as constants, a chunk's rows Q
 *                            (taken only where every chunk is full: K a
 *                            multiple of Q, as the TC rules require), T
 *                            threads a block (the launch's).
 * With the fixed shape every idx / N, idx % P and row stride of the
 * elementwise loops is a constant (a shift and a mask, not the ~22
 * instructions of a division by a runtime value) and loops over constant
 * trip counts unroll (bench/notes-scan-shape.md). Only index math,
 * unrolling and hoisting differ: the arithmetic and its order are the
 * same, so both give the same bits. A kernel instantiated with a fixed
 * shape runs only on calls of that shape (ssd_shape_fixed::takes).
 * CUDA sources only. */
#ifndef ST_SSD_SHAPE_CUH
#define ST_SSD_SHAPE_CUH

#include <stddef.h>

#include <cuda_pipeline.h>

struct ssd_shape_any {
    template <class A> __device__ static int Q(const A &a) { return a.Q; }
    template <class A> __device__ static int P(const A &a) { return a.P; }
    template <class A> __device__ static int N(const A &a) { return a.N; }
    /* rows of chunk k (its L: the last chunk may be short) */
    template <class C> __device__ static int L(const C &k) { return k.L; }
    __device__ static int threads() { return (int)blockDim.x; }
    static constexpr bool fixed = false;
};

template <int Q_, int P_, int N_, int THREADS> struct ssd_shape_fixed {
    template <class A> __device__ static constexpr int Q(const A &) { return Q_; }
    template <class A> __device__ static constexpr int P(const A &) { return P_; }
    template <class A> __device__ static constexpr int N(const A &) { return N_; }
    template <class C> __device__ static constexpr int L(const C &) { return Q_; }
    __device__ static constexpr int threads() { return THREADS; }
    static constexpr bool fixed = true;
    /* 1 when a call of these sizes (Q clamped, every chunk full) may run it */
    static int takes(int Q, int P, int N) { return Q == Q_ && P == P_ && N == N_; }
};

/* rows x cols of src (row stride ld) into dst (row stride dld) by cp.async
 * copies of `width` floats (4: 16 bytes, else 1: 4 bytes), S::threads()
 * threads: each copy's (row, column) steps by that many copies, the
 * divisions once a call. Every copy of the thread is issued before any is
 * waited for; the caller commits, waits and synchronises. At a fixed shape
 * each width has its own loop, its divisions by constants; else one loop
 * takes the width at run time. */
__device__ static inline void ssd_copy_rows_loop(const float *src, int ld, int rows, int cols, float *dst, int dld,
                                                 int width, int step) {
    const int per_row = cols / width, total = rows * per_row;
    const int dr = step / per_row, dc = step % per_row;
    int r = (int)threadIdx.x / per_row, c = (int)threadIdx.x % per_row;
    for (int idx = (int)threadIdx.x; idx < total; idx += step) {
        const float *from = src + (size_t)r * ld + (size_t)c * width;
        float *to = dst + (size_t)r * dld + (size_t)c * width;
        if (width == 4)
            __pipeline_memcpy_async(to, from, 16);
        else
            __pipeline_memcpy_async(to, from, sizeof(float));
        r += dr, c += dc;
        if (c >= per_row) c -= per_row, r++;
    }
}
template <class S>
__device__ static inline void ssd_copy_rows_async(const float *src, int ld, int rows, int cols, float *dst, int dld,
                                                  int width) {
    if (!S::fixed)
        ssd_copy_rows_loop(src, ld, rows, cols, dst, dld, width, S::threads());
    else if (width == 4)
        ssd_copy_rows_loop(src, ld, rows, cols, dst, dld, 4, S::threads());
    else
        ssd_copy_rows_loop(src, ld, rows, cols, dst, dld, 1, S::threads());
}

/* The shapes (Q, P, N) the TC kernels are compiled for besides the
 * runtime one: the default preset's and the tiny preset's. */
#define SSD_SHAPE_DEFAULT 32, 32, 64
#define SSD_SHAPE_TINY 16, 16, 16

enum { SSD_FIXED_NONE, SSD_FIXED_DEFAULT, SSD_FIXED_TINY };

/* Which compile-time shape a call of these sizes (Q clamped to [1, K]) may
 * run under st_cuda_ssd_set_scan_fixed_shape (defined in model/ssd.cu):
 * its (Q, P, N) one of the above and every chunk full, else
 * SSD_FIXED_NONE (the runtime-shape kernels). The kernels' own rules (the
 * TC variants', the pair kernel's) still decide whether they run at all. */
int ssd_fixed_shape_of(int K, int P, int N, int Q);

/* 1 when st_cuda_ssd_set_scan_fixed_shape is on (for kernels with shapes
 * of their own, such as the quad backward's). */
int ssd_fixed_shape_on(void);

#endif
