/* vsn_fused_device.cuh: what the fused VSN forward's two kernels share
 * (model/vsn_forward_fused.cu, the fp32 register tiles, and
 * model/vsn_forward_fused_tc.cu, the tensor-core variant in bf16 mode):
 * the kernel's arguments, the per-variable stage (weights, vectors, the
 * tile's s and alpha by cp.async into one of two buffers) and the step
 * that waits for it and starts the next, the sigmoid,
 * the tile-size rule and the tensor-core entry point. A shape S (one per
 * kernel) gives the stage's layout: dv, threads, R rows a block, LDW the
 * weight row stride, the offsets W2, WG, VEC, S, A of one stage, and the
 * vector rows of fused_vec_rows. CUDA sources only. */
#ifndef ST_VSN_FUSED_DEVICE_CUH
#define ST_VSN_FUSED_DEVICE_CUH

#include <cuda_pipeline.h>
#include <stddef.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/vsn_cuda.h" /* ST_CUDA_VSN_FUSED_SMALL, _LARGE */
}

struct fused_args {
    int rows, F, s_stride, alpha_stride, v_stride;
    /* the table mode reads neither alpha nor v: their slots hold, for a training minibatch's
     * bars (st_cuda_vsn_table_fill_rows), src_rows (table row r's s is s row src_rows[r]) and
     * nrows (the rows end at min(rows, *nrows), a device count); NULL: none. (Unions, not two
     * more fields: a larger argument block cost the v mode's Dv = 16 kernel 20 bytes of spills.) */
    const float *s;
    union {
        const float *alpha;
        const int *src_rows;
    };
    const float *W2, *Wg, *U, *V, *Vg, *ew, *eb, *lnw, *lnb;
    union {
        float *v; /* the combine's output (v mode) */
        const int *nrows;
    };
    float *tab; /* table mode: every t_j, row r's at tab + r F Dv */
};

/* The rows of a stage's vector block [8][dv]. */
struct fused_vec_rows {
    enum { U, V, B1, B2, EW, EB, LNW, LNB };
};

/* The rows a launch covers: a.rows, or the device count where there is one. */
__device__ static inline int fused_rows(const fused_args &a) { return a.nrows ? min(*a.nrows, a.rows) : a.rows; }

/* Asynchronous copies of variable j's weights, vectors and the tile's s
 * and alpha into a stage (4-byte copies: the callers' buffers carry no
 * 16-byte alignment); rows past the end get s = alpha = 0 (finite values
 * that are computed and never written). */
template <class S, bool TAB>
__device__ static void fused_stage(const fused_args &a, int rows, int j, size_t row0, float *st) {
    constexpr int DV = S::dv, T = S::threads;
    const int tid = threadIdx.x;
    const float *W2 = a.W2 + (size_t)j * DV * DV, *Wg = a.Wg + (size_t)j * 2 * DV * DV;
    for (int i = tid; i < 3 * DV * DV; i += T) { /* [W2; Wg] rows o < 3 DV, columns k */
        const int o = i / DV, k = i % DV;
        const float *src = o < DV ? W2 + i : Wg + (i - DV * DV);
        __pipeline_memcpy_async(st + S::W2 + o * S::LDW + k, src, sizeof(float));
    }
    for (int i = tid; i < 8 * DV; i += T) {
        const int which = i / DV, k = i % DV;
        const size_t jk = (size_t)j * DV + k;
        const float *src = which == S::U     ? a.U + jk
                           : which == S::V   ? a.V + jk
                           : which == S::B1  ? a.Vg + 2 * (size_t)j * DV + k
                           : which == S::B2  ? a.Vg + 2 * (size_t)j * DV + DV + k
                           : which == S::EW  ? a.ew + jk
                           : which == S::EB  ? a.eb + jk
                           : which == S::LNW ? a.lnw + jk
                                             : a.lnb + jk;
        __pipeline_memcpy_async(st + S::VEC + i, src, sizeof(float));
    }
    for (int i = tid; i < (TAB ? 1 : 2) * S::R; i += T) { /* table mode: no alpha */
        const int r = i % S::R;
        const size_t row = row0 + r;
        if (row >= (size_t)(TAB ? rows : a.rows)) /* v mode: a.rows, as it was (no register held) */
            st[i < S::R ? S::S + r : S::A + r] = 0.0f;
        else if (i < S::R) {
            const size_t src = TAB && a.src_rows ? (size_t)a.src_rows[row] : row;
            __pipeline_memcpy_async(st + S::S + r, a.s + src * (size_t)a.s_stride + j, sizeof(float));
        } else
            __pipeline_memcpy_async(st + S::A + r, a.alpha + row * (size_t)a.alpha_stride + j, sizeof(float));
    }
    __pipeline_commit();
}

/* The top of variable j's step: waits until j's stage has landed and
 * every thread is past variable j-1 (so that j-1's stage, and whatever
 * else the step wrote in shared memory, may be overwritten), then starts
 * the copies of j+1's stage (past the last variable an empty group, so
 * that the wait stays uniform). */
template <class S, bool TAB>
__device__ static inline void fused_next(const fused_args &a, int rows, int j, size_t row0, float *sm) {
    __pipeline_wait_prior(0);
    __syncthreads();
    if (j + 1 < a.F)
        fused_stage<S, TAB>(a, rows, j + 1, row0, sm + ((j + 1) & 1) * S::STAGE);
    else
        __pipeline_commit();
}

/* The v mode's block size: 1 (256 threads) where blocks of R256 rows make
 * at least one wave of two an SM or mode forces it, 0 (128 threads, half
 * the rows) else, so that a small batch still reaches every SM. */
static inline int fused_large(int rows, int R256, int mode, int *large) {
    int dev = 0, sms = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    ST_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t big = ((size_t)rows + R256 - 1) / R256;
    *large = mode == ST_CUDA_VSN_FUSED_LARGE || (mode != ST_CUDA_VSN_FUSED_SMALL && big >= 2 * (size_t)sms);
    return ST_OK;
}

/* The tensor-core kernel (model/vsn_forward_fused_tc.cu) for Dv 16 or 32
 * where st_cuda_vsn_fused_tc_takes(Dv): the v mode with the tile fused_large
 * picks for mode, or the table mode (tab) with 256-thread blocks. */
int vsn_fused_tc_launch(const fused_args &a, int Dv, int tab, int mode, cudaStream_t st);

/* The table mode's kernel with a block per (variable, row split) (model/vsn_table_fill_tc.cu) for
 * Dv 16 or 32, which the table fills run instead of vsn_fused_tc_launch's where that would take
 * them and vsn_table_fill_j_on() (st_cuda_vsn_set_table_fill_j: 1 by default): the same bits. */
int vsn_table_fill_j_on(void);
int vsn_table_fill_j_launch(const fused_args &a, int Dv, cudaStream_t st);

#endif
