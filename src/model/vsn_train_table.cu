/* vsn_train_table.cu: the training step's bar index and the table
 * backward's per-row/per-bar step (the API and the math:
 * cuda/vsn_train_table_cuda.h).
 *
 * The index. keys key[r] (feature rows), values r: cub's radix sort by key
 * over `bits` bits is stable, so equal keys keep ascending rows: srow is
 * the CSR's row list, bar after bar in ascending key order. head[i] = 1
 * where skey changes; its inclusive scan hscan[i] - 1 is position i's
 * compact bar; a scatter writes crow, offs, first and nb. Every step is
 * integer and order-free (the sort's result is unique): the same index
 * run to run. Launch sizes depend on rows only (graph-safe).
 *
 * The table backward's first step. A warp a compact bar b < nb (grid for
 * cap, stopping at the device count), lane c < Dv its column (lanes past
 * Dv hold zeros), the variables in chunks of TT_CHUNK = 8: a chunk's 8
 * t_j[b][c] are loaded together (the next chunk's while this one runs) and
 * converted once; then for each of b's rows r in CSR order
 *   dalpha[r, j] = sum_c dv[r, c] t_j[c] (+ the caller's dalpha, as
 *     vsn_bwd_fused_kernel adds it): the 32 exact double products of each
 *     of the 8 variables, summed by a transposed reduction: a
 *     reduce-scatter over lane bits 4, 3, 2 (4 + 2 + 1 doubles exchanged,
 *     each lane keeping the half its bit names) leaves lane l variable
 *     l >> 2 summed over those bits, a butterfly over bits 1, 0 ends it.
 *     Every partial is (own + partner's) over the lane sets of a 32-lane
 *     butterfly's levels 16, 8, 4, 2, 1, and a float add commutes: the
 *     bits of that butterfly (the kernel this replaced), with 18 shuffles
 *     for 8 variables instead of 80;
 *   acc_jc += alpha[r, j] dv[r, c] (double; the chunk's alphas converted
 *     by 8 lanes and broadcast through shared memory, not converted by all
 *     32 lanes), dT[b, j, c] = (float) acc_jc: exact products added in
 *     ascending row order.
 * The table is read once a bar (not once a row); dv and alpha rows once a
 * chunk from L1/L2. The count: bench/notes-tt-kernels.md. */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <string.h>

#include "cuda/check.h"
#include "cuda/vsn_device.cuh"

extern "C" {
#include "cuda/vsn_forward_fused_cuda.h" /* st_cuda_vsn_table_combine */
#include "cuda/vsn_train_table_cuda.h"
}

#define TT_THREADS 256

static unsigned tt_blocks(size_t n, int per_block) {
    size_t b = (n + (size_t)per_block - 1) / (size_t)per_block;
    return (unsigned)(b > (1u << 30) ? (1u << 30) : (b ? b : 1));
}

/* The bits of keys below bars (at least 1). */
static int key_bits(int bars) {
    int b = 1;
    while (b < 31 && (1L << b) < (long)bars)
        b++;
    return b;
}

extern "C" int st_cuda_vsn_bar_index_at(st_vsn_bar_index *ix, void *base, int rows_max, int bars) {
    ST_REQUIRE(rows_max > 0 && bars > 0, ST_ERR_INPUT,
               "training bar index: bad sizes rows_max=%d bars=%d (both must be positive)", rows_max, bars);
    memset(ix, 0, sizeof *ix);
    ix->rows_max = rows_max;
    ix->bars = bars;
    ix->cap = rows_max < bars ? rows_max : bars;
    ix->bits = key_bits(bars);
    size_t sort_bytes = 0, scan_bytes = 0;
    ST_CUDA_TRY(cub::DeviceRadixSort::SortPairs((void *)NULL, sort_bytes, (const int *)NULL, (int *)NULL,
                                                (const int *)NULL, (int *)NULL, rows_max, 0, ix->bits));
    ST_CUDA_TRY(cub::DeviceScan::InclusiveSum((void *)NULL, scan_bytes, (const int *)NULL, (int *)NULL, rows_max));
    ix->temp_bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    char *p = (char *)base;
    size_t o = 0;
#define TT_TAKE(ptr, type, count)                                                                                      \
    do {                                                                                                               \
        (ptr) = p ? (type *)(p + o) : NULL;                                                                            \
        o += (sizeof(type) * (size_t)(count) + 255) / 256 * 256;                                                       \
    } while (0)
    TT_TAKE(ix->iota, int, rows_max);
    TT_TAKE(ix->skey, int, rows_max);
    TT_TAKE(ix->srow, int, rows_max);
    TT_TAKE(ix->head, int, rows_max);
    TT_TAKE(ix->hscan, int, rows_max);
    TT_TAKE(ix->crow, int, rows_max);
    TT_TAKE(ix->offs, int, (size_t)ix->cap + 1);
    TT_TAKE(ix->first, int, ix->cap);
    TT_TAKE(ix->count, int, 1);
    TT_TAKE(ix->temp, char, ix->temp_bytes);
#undef TT_TAKE
    ix->total_bytes = o;
    return ST_OK;
}

static __global__ void tt_iota_kernel(int rows, int *v) { GRID_LOOP(i, (size_t)rows) v[i] = (int)i; }

static __global__ void tt_head_kernel(int rows, const int *skey, int *head) {
    GRID_LOOP(i, (size_t)rows) head[i] = i == 0 || skey[i] != skey[i - 1];
}

/* Position i of the sorted rows: its compact bar c = hscan[i] - 1; the
 * first position of a bar writes its offset and first row, the last the
 * end offset and the count. */
static __global__ void tt_scatter_kernel(int rows, const int *srow, const int *head, const int *hscan, int *crow,
                                         int *offs, int *first, int *count) {
    GRID_LOOP(i, (size_t)rows) {
        const int c = hscan[i] - 1, r = srow[i];
        crow[r] = c;
        if (head[i]) {
            offs[c] = (int)i;
            first[c] = r;
        }
        if (i == (size_t)rows - 1) {
            offs[c + 1] = rows;
            *count = c + 1;
        }
    }
}

extern "C" int st_cuda_vsn_bar_index_build(const st_vsn_bar_index *ix, int rows, const int *key, void *stream) {
    ST_REQUIRE(ix && ix->iota, ST_ERR_INPUT, "training bar index build: the index has no device memory");
    ST_REQUIRE(rows > 0 && rows <= ix->rows_max, ST_ERR_INPUT,
               "training bar index build: %d rows, the index holds 1..%d", rows, ix->rows_max);
    ST_REQUIRE(key, ST_ERR_INPUT, "training bar index build: no keys (each row's feature row)");
    cudaStream_t st = (cudaStream_t)stream;
    tt_iota_kernel<<<tt_blocks((size_t)rows, TT_THREADS), TT_THREADS, 0, st>>>(rows, ix->iota);
    ST_CUDA_LAUNCHED();
    size_t bytes = ix->temp_bytes;
    ST_CUDA_TRY(cub::DeviceRadixSort::SortPairs(ix->temp, bytes, key, ix->skey, (const int *)ix->iota, ix->srow, rows,
                                                0, ix->bits, st));
    tt_head_kernel<<<tt_blocks((size_t)rows, TT_THREADS), TT_THREADS, 0, st>>>(rows, ix->skey, ix->head);
    ST_CUDA_LAUNCHED();
    bytes = ix->temp_bytes;
    ST_CUDA_TRY(cub::DeviceScan::InclusiveSum(ix->temp, bytes, (const int *)ix->head, ix->hscan, rows, st));
    tt_scatter_kernel<<<tt_blocks((size_t)rows, TT_THREADS), TT_THREADS, 0, st>>>(
        rows, ix->srow, ix->head, ix->hscan, ix->crow, ix->offs, ix->first, ix->count);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* The module comment's second part. */
#define TT_CHUNK 8

/* One level of the reduce-scatter: of the pairs (x[k], x[k + n]) a lane
 * keeps x[k] where its bit m is clear and x[k + n] where set, and adds the
 * partner's copy of the kept one (lane ^ m sends the half it drops). */
template <int N> static __device__ __forceinline__ void tt_scatter_level(const double *x, double *y, int m, bool hi) {
#pragma unroll
    for (int k = 0; k < N; k++) {
        const double keep = hi ? x[k + N] : x[k], send = hi ? x[k] : x[k + N];
        y[k] = keep + __shfl_xor_sync(0xffffffffu, send, m);
    }
}

static __global__ void __launch_bounds__(TT_THREADS)
    tt_grad_kernel(int rows, int F, int Dv, int cap, const int *count, const int *offs, const int *srow,
                   const float *tab, const float *alpha, int alpha_stride, const float *dv, int dv_stride,
                   const float *dalpha, int dalpha_stride, double *dad, float *dT) {
    __shared__ __align__(16) double tt_alpha[TT_THREADS / 32][TT_CHUNK];
    const int lane = threadIdx.x % 32, kv = lane >> 2; /* kv: the chunk's variable this lane ends with */
    const bool col = lane < Dv, b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
    double *als = tt_alpha[threadIdx.x / 32];
    const size_t nb = (size_t)min(*count, cap), P = (size_t)F * Dv;
    WARP_LOOP(b, nb) {
        const int i0 = offs[b], i1 = offs[b + 1];
        const float *t = tab + b * P;
        float tf[TT_CHUNK]; /* the next chunk's table values */
#pragma unroll
        for (int k = 0; k < TT_CHUNK; k++)
            tf[k] = col && k < F ? __ldg(t + (size_t)k * Dv + lane) : 0.0f;
        for (int j0 = 0; j0 < F; j0 += TT_CHUNK) {
            const int nj = min(TT_CHUNK, F - j0);
            double tk[TT_CHUNK], acc[TT_CHUNK];
#pragma unroll
            for (int k = 0; k < TT_CHUNK; k++) {
                tk[k] = (double)tf[k]; /* the old kernel's tj: 0.0 past Dv and past F */
                acc[k] = 0;
                const int jn = j0 + TT_CHUNK + k;
                tf[k] = col && jn < F ? __ldg(t + (size_t)jn * Dv + lane) : 0.0f;
            }
            for (int i = i0; i < i1; i++) {
                const size_t r = (size_t)srow[i];
                const double d = (double)(col ? __ldg(dv + r * (size_t)dv_stride + lane) : 0.0f);
                __syncwarp(); /* every lane has read the previous row's alphas */
                if (lane < TT_CHUNK) /* zeros past F: every slot the pairs below read is written */
                    als[lane] = lane < nj ? (double)alpha[r * (size_t)alpha_stride + j0 + lane] : 0.0;
                double p[TT_CHUNK], q4[4], q2[2], q1;
#pragma unroll
                for (int k = 0; k < TT_CHUNK; k++)
                    p[k] = d * tk[k];
                tt_scatter_level<4>(p, q4, 16, b4);
                tt_scatter_level<2>(q4, q2, 8, b3);
                tt_scatter_level<1>(q2, &q1, 4, b2);
                q1 += __shfl_xor_sync(0xffffffffu, q1, 2);
                q1 += __shfl_xor_sync(0xffffffffu, q1, 1);
                if ((lane & 3) == 0 && kv < nj)
                    dad[(size_t)(j0 + kv) * rows + r] =
                        q1 + (dalpha ? (double)dalpha[r * (size_t)dalpha_stride + j0 + kv] : 0.0);
                __syncwarp(); /* the row's alphas are in shared memory */
#pragma unroll
                for (int k = 0; k < TT_CHUNK; k += 2) { /* broadcast loads, two alphas each */
                    const double2 a = *reinterpret_cast<const double2 *>(als + k);
                    if (k < nj) acc[k] += a.x * d;
                    if (k + 1 < nj) acc[k + 1] += a.y * d;
                }
            }
            if (col) {
                float *o = dT + b * P + (size_t)j0 * Dv + lane;
#pragma unroll
                for (int k = 0; k < TT_CHUNK; k++)
                    if (k < nj) o[(size_t)k * Dv] = (float)acc[k];
            }
        }
    }
}

extern "C" int st_cuda_vsn_train_table_grad(const st_vsn_bar_index *ix, int rows, int F, int Dv, const float *tab,
                                            const float *alpha, int alpha_stride, const float *dv, int dv_stride,
                                            const float *dalpha, int dalpha_stride, double *dad, float *dT,
                                            void *stream) {
    ST_REQUIRE(ix && ix->count, ST_ERR_INPUT, "training bar table backward: no index");
    ST_REQUIRE(F > 0 && Dv > 0 && Dv <= 32, ST_ERR_INPUT,
               "training bar table backward: F=%d Dv=%d (a warp holds a variable's Dv <= 32 values)", F, Dv);
    ST_REQUIRE(rows > 0 && rows <= ix->rows_max, ST_ERR_INPUT,
               "training bar table backward: %d rows, the index was built for 1..%d", rows, ix->rows_max);
    ST_REQUIRE(tab && alpha && dv && dad && dT, ST_ERR_INPUT,
               "training bar table backward: a NULL buffer (table, alpha, dv, dalpha out or dT)");
    const int warps = TT_THREADS / 32;
    tt_grad_kernel<<<tt_blocks((size_t)ix->cap, warps), TT_THREADS, 0, (cudaStream_t)stream>>>(
        rows, F, Dv, ix->cap, ix->count, ix->offs, ix->srow, tab, alpha, alpha_stride, dv, dv_stride, dalpha,
        dalpha_stride, dad, dT);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* The training forward's combine, a warp a compact bar b < nb, lane c < Dv
 * its column: for each of b's rows r in CSR order v[r, c] = sum_j
 * alpha[r, j] t_j[b][c] over j in order in double, rounded once:
 * table_combine_kernel's sum term for term (the same bits), but each table
 * row is fetched once a bar (then from L1/L2) instead of once a row: 358
 * of 671 MB at 2,048 windows, 490 of 2,684 MB at 8,192
 * (bench/notes-tt-kernels.md). The row's alphas are converted once (lane
 * j) into Fe = F rounded up to even doubles of shared memory a warp and
 * read back as broadcast pairs; the variables' loads issue TC_UNROLL at a
 * time. Rows r >= rows (an index built over more rows than this call) are
 * skipped. */
#define TC_UNROLL 8
static __global__ void __launch_bounds__(TT_THREADS)
    tt_combine_kernel(int rows, int F, int Dv, int cap, const int *count, const int *offs, const int *srow,
                      const float *tab, const float *alpha, int alpha_stride, float *v, int v_stride) {
    extern __shared__ double2 tc_smem[];
    const int lane = threadIdx.x % 32, Fe = (F + 1) & ~1;
    double *als = reinterpret_cast<double *>(tc_smem) + (size_t)(threadIdx.x / 32) * Fe;
    const bool col = lane < Dv;
    const size_t nb = (size_t)min(*count, cap), P = (size_t)F * Dv;
    WARP_LOOP(b, nb) {
        const float *t = tab + b * P + (col ? lane : 0);
        const int i1 = offs[b + 1];
        for (int i = offs[b]; i < i1; i++) {
            const size_t r = (size_t)srow[i];
            if (r >= (size_t)rows) continue; /* warp-uniform */
            __syncwarp(); /* every lane has read the previous row's alphas */
            for (int j = lane; j < Fe; j += 32)
                als[j] = j < F ? (double)alpha[r * (size_t)alpha_stride + j] : 0.0;
            __syncwarp();
            double acc = 0;
            int j = 0;
            for (; j + TC_UNROLL <= F; j += TC_UNROLL) {
                float tv[TC_UNROLL];
#pragma unroll
                for (int k = 0; k < TC_UNROLL; k++)
                    tv[k] = __ldg(t + (size_t)(j + k) * Dv);
#pragma unroll
                for (int k = 0; k < TC_UNROLL; k += 2) {
                    const double2 a = *reinterpret_cast<const double2 *>(als + j + k);
                    acc += a.x * (double)tv[k];
                    acc += a.y * (double)tv[k + 1];
                }
            }
            for (; j < F; j++)
                acc += als[j] * (double)__ldg(t + (size_t)j * Dv);
            if (col) v[r * (size_t)v_stride + lane] = (float)acc;
        }
    }
}

extern "C" int st_cuda_vsn_train_table_combine(const st_vsn_bar_index *ix, int rows, int F, int Dv, const float *tab,
                                               const float *alpha, int alpha_stride, float *v, int v_stride,
                                               void *stream) {
    ST_REQUIRE(ix && ix->count, ST_ERR_INPUT, "training bar table combine: no index");
    ST_REQUIRE(F > 0 && Dv > 0 && Dv <= 32, ST_ERR_INPUT,
               "training bar table combine: F=%d Dv=%d (a warp holds a variable's Dv <= 32 values)", F, Dv);
    ST_REQUIRE(rows >= 0 && rows <= ix->rows_max, ST_ERR_INPUT,
               "training bar table combine: %d rows, the index was built for at most %d", rows, ix->rows_max);
    ST_REQUIRE(tab && alpha && v, ST_ERR_INPUT, "training bar table combine: a NULL buffer (table, alpha or v)");
    if (rows == 0) return ST_OK;
    const int warps = TT_THREADS / 32;
    const size_t bytes = sizeof(double) * warps * (size_t)((F + 1) & ~1);
    if (bytes > 49152) /* F > 768: the row kernel (the same bits) */
        return st_cuda_vsn_table_combine(rows, F, Dv, alpha, alpha_stride, tab, ix->crow, v, v_stride, stream);
    tt_combine_kernel<<<tt_blocks((size_t)ix->cap, warps), TT_THREADS, bytes, (cudaStream_t)stream>>>(
        rows, F, Dv, ix->cap, ix->count, ix->offs, ix->srow, tab, alpha, alpha_stride, v, v_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
