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
 * The table backward's first step. A warp an item (compact bar b < nb,
 * variable chunk of TT_CHUNK = 8: nb ceil(F / 8) items, a bar's chunks in
 * adjacent warps; the grid for cap ceil(F / 8), stopping at the device
 * count), lane c < Dv its column (lanes past Dv hold zeros): the chunk's
 * 8 t_j[b][c] are loaded together with the bar's CSR offsets and
 * converted once; the bar's srow positions are read 32 at a time (lane l
 * position l, a row reaching every lane by a shuffle, the next 32 loaded
 * while these are used); the rows go in groups of TT_GROUP = 4 whose dv,
 * alpha and dalpha cp.async copies into a shared stage (two a warp) while
 * the previous group computes. Then for each of b's rows r in CSR order
 *   dalpha[r, j] = sum_c dv[r, c] t_j[c] (+ the caller's dalpha, as
 *     vsn_bwd_fused_kernel adds it): the 32 exact double products of each
 *     of the 8 variables, summed by a transposed reduction: a
 *     reduce-scatter over lane bits 4, 3, 2 (4 + 2 + 1 doubles exchanged,
 *     each lane keeping the half its bit names) leaves lane l variable
 *     l >> 2 summed over those bits, a butterfly over bits 1, 0 ends it.
 *     Every partial is (own + partner's) over the lane sets of a 32-lane
 *     butterfly's levels 16, 8, 4, 2, 1, and a float add commutes: the
 *     bits of that butterfly (the kernel this replaced), with 18 shuffles
 *     for 8 variables instead of 80; two rows' reductions run unrolled
 *     together (independent chains);
 *   acc_jc += alpha[r, j] dv[r, c] (double; the group's alphas converted
 *     once, a lane each, and broadcast through shared memory), dT[b, j, c]
 *     = (float) acc_jc: exact products added in ascending row order (a
 *     bar's rows are never split across warps: the bits of the per-row
 *     double sum).
 * The table is read once a bar (not once a row); dv and alpha rows once a
 * chunk from L1/L2. The count: bench/notes-tt-kernels.md, and for the
 * item and group split bench/notes-ttgrad.md. */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_pipeline.h>
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
#define TT_GROUP 4     /* rows a group: TT_GROUP TT_CHUNK = 32 alphas, one a lane */
#define TG_THREADS 128 /* tt_grad's block: 4 warps (at 96 registers 5 blocks, 20 warps, an SM) */

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

/* A group's staging in shared memory (a warp, one of two stages): the
 * rows' dv (row g, column c), alpha and dalpha (slot 8 g + k: variable
 * j0 + k of row g) as copied there by cp.async, and the rows. */
struct tt_stage {
    float dv[TT_GROUP][32];
    float a[TT_GROUP * TT_CHUNK], da[TT_GROUP * TT_CHUNK];
    int r[TT_GROUP];
};

/* The item's fixed values a group's copies and rows need. */
struct tt_item {
    int lane, j0, nj, rows;
    bool col, writer; /* writer: lane 4 kv (kv = lane >> 2 < nj) writes variable j0 + kv's dalpha */
};

/* Issues the copies of the n (0..TT_GROUP) rows at position base of the
 * srow window sw (lane l holding position l) into stage s, and commits
 * them (an empty batch when n = 0): they land while the previous group
 * shuffles, without holding registers. Slots of missing rows, of lanes
 * past Dv and of variables past F are not copied (their readers select
 * zeros or ignore them). */
static __device__ __forceinline__ void tt_issue_group(tt_stage &s, const tt_item &it, int sw, int base, int n,
                                                      const float *alpha, int alpha_stride, const float *dv,
                                                      int dv_stride, const float *dalpha, int dalpha_stride) {
#pragma unroll
    for (int k = 0; k < TT_GROUP; k++) {
        const size_t r = (size_t)__shfl_sync(0xffffffffu, sw, base + k);
        if (k < n && it.col) __pipeline_memcpy_async(&s.dv[k][it.lane], dv + r * (size_t)dv_stride + it.lane, 4);
    }
    const int ga = it.lane >> 3, ka = it.lane & 7;
    const int ra = __shfl_sync(0xffffffffu, sw, base + ga);
    if (ga < n && ka < it.nj) {
        __pipeline_memcpy_async(&s.a[it.lane], alpha + (size_t)ra * alpha_stride + it.j0 + ka, 4);
        if (dalpha) __pipeline_memcpy_async(&s.da[it.lane], dalpha + (size_t)ra * dalpha_stride + it.j0 + ka, 4);
    }
    const int rl = __shfl_sync(0xffffffffu, sw, base + (it.lane & (TT_GROUP - 1)));
    if (it.lane < TT_GROUP) s.r[it.lane] = rl;
    __pipeline_commit();
}

/* Rows G0 .. G0 + G - 1 of a landed group (all present; their alphas in
 * als[8 g + k] as doubles): the G reductions are independent (unrolled
 * together, the scheduler interleaves their shuffle chains); dT's
 * accumulators then take the rows in ascending order. */
template <int G, int G0>
static __device__ __forceinline__ void tt_rows(const tt_stage &s, const tt_item &it, bool has_dalpha, const double *tk,
                                               double *acc, const double *als, double *dad) {
    const bool b4 = it.lane & 16, b3 = it.lane & 8, b2 = it.lane & 4;
    const int kv = it.lane >> 2;
    double d[G], q1[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        d[g] = it.col ? (double)s.dv[G0 + g][it.lane] : 0.0; /* zeros past Dv, as the butterfly's lanes */
        double p[TT_CHUNK], q4[4], q2[2];
#pragma unroll
        for (int k = 0; k < TT_CHUNK; k++)
            p[k] = d[g] * tk[k];
        tt_scatter_level<4>(p, q4, 16, b4);
        tt_scatter_level<2>(q4, q2, 8, b3);
        tt_scatter_level<1>(q2, &q1[g], 4, b2);
        q1[g] += __shfl_xor_sync(0xffffffffu, q1[g], 2);
        q1[g] += __shfl_xor_sync(0xffffffffu, q1[g], 1);
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (it.writer)
            dad[(size_t)(it.j0 + kv) * it.rows + s.r[G0 + g]] =
                q1[g] + (has_dalpha ? (double)s.da[(G0 + g) * TT_CHUNK + kv] : 0.0);
#pragma unroll
        for (int k = 0; k < TT_CHUNK; k += 2) { /* broadcast loads, two alphas each */
            const double2 a = *reinterpret_cast<const double2 *>(als + (G0 + g) * TT_CHUNK + k);
            acc[k] += a.x * d[g];
            acc[k + 1] += a.y * d[g];
        }
    }
}

static __global__ void __launch_bounds__(TG_THREADS)
    tt_grad_kernel(int rows, int F, int Dv, int cap, const int *count, const int *offs, const int *srow,
                   const float *tab, const float *alpha, int alpha_stride, const float *dv, int dv_stride,
                   const float *dalpha, int dalpha_stride, double *dad, float *dT) {
    __shared__ __align__(16) double tt_alpha[TG_THREADS / 32][TT_GROUP * TT_CHUNK];
    __shared__ __align__(16) tt_stage tt_stages[TG_THREADS / 32][2];
    double *als = tt_alpha[threadIdx.x / 32];
    tt_stage *stg = tt_stages[threadIdx.x / 32];
    const int lane = threadIdx.x % 32, nch = (F + TT_CHUNK - 1) / TT_CHUNK;
    const size_t nb = (size_t)min(*count, cap), P = (size_t)F * Dv;
    WARP_LOOP(w, nb * (size_t)nch) {
        const size_t b = w / (size_t)nch;
        tt_item it;
        it.lane = lane, it.rows = rows, it.col = lane < Dv;
        it.j0 = (int)(w - b * (size_t)nch) * TT_CHUNK, it.nj = min(TT_CHUNK, F - it.j0);
        it.writer = (lane & 3) == 0 && (lane >> 2) < it.nj;
        const float *t = tab + b * P + (size_t)it.j0 * Dv + lane;
        float tf[TT_CHUNK]; /* the chunk's table values, issued with offs (no dependency between them) */
#pragma unroll
        for (int k = 0; k < TT_CHUNK; k++)
            tf[k] = it.col && k < it.nj ? __ldg(t + (size_t)k * Dv) : 0.0f;
        const int i0 = offs[b], i1 = offs[b + 1];
        /* the srow windows of 32 positions: sw the one the next copies read, swn the one after */
        int sw = i0 + lane < i1 ? srow[i0 + lane] : 0, swn = i0 + 32 + lane < i1 ? srow[i0 + 32 + lane] : 0;
        __syncwarp(); /* every lane is done with the previous item's stages */
        tt_issue_group(stg[0], it, sw, 0, min(TT_GROUP, i1 - i0), alpha, alpha_stride, dv, dv_stride, dalpha,
                       dalpha_stride);
        double tk[TT_CHUNK], acc[TT_CHUNK];
#pragma unroll
        for (int k = 0; k < TT_CHUNK; k++) {
            tk[k] = (double)tf[k]; /* the old kernel's tj: 0.0 past Dv and past F */
            acc[k] = 0;
        }
        for (int i = i0, s = 0; i < i1; i += TT_GROUP, s ^= 1) { /* groups aligned at i0: never across a window */
            const int n = min(TT_GROUP, i1 - i), q = i + TT_GROUP;
            if (((q - i0) & 31) == 0) { /* warp-uniform */
                sw = swn;
                swn = q + 32 + lane < i1 ? srow[q + 32 + lane] : 0;
            }
            /* the next group's copies (none past the bar's rows) before this group's shuffles; its stage
             * was last read by the previous group's rows, which every lane has finished */
            __syncwarp();
            tt_issue_group(stg[s ^ 1], it, sw, (q - i0) & 31, max(0, min(TT_GROUP, i1 - q)), alpha, alpha_stride, dv,
                           dv_stride, dalpha, dalpha_stride);
            __pipeline_wait_prior(1); /* this lane's copies of group i have landed */
            __syncwarp();             /* ... and every lane's */
            const tt_stage &cur = stg[s];
            const int ka = lane & 7;
            als[lane] = ka < it.nj ? (double)cur.a[lane] : 0.0; /* rows past n: read by no row */
            __syncwarp();
            /* warp-uniform; a full group as 2 chains at a time (96 registers; 4 at a time take 107) */
            if (n == TT_GROUP) {
                tt_rows<2, 0>(cur, it, dalpha != NULL, tk, acc, als, dad);
                tt_rows<2, 2>(cur, it, dalpha != NULL, tk, acc, als, dad);
            } else {
                if (n >= 2) tt_rows<2, 0>(cur, it, dalpha != NULL, tk, acc, als, dad);
                if (n == 1) tt_rows<1, 0>(cur, it, dalpha != NULL, tk, acc, als, dad);
                if (n == 3) tt_rows<1, 2>(cur, it, dalpha != NULL, tk, acc, als, dad);
            }
        }
        if (it.col) {
            float *o = dT + b * P + (size_t)it.j0 * Dv + lane;
#pragma unroll
            for (int k = 0; k < TT_CHUNK; k++)
                if (k < it.nj) o[(size_t)k * Dv] = (float)acc[k];
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
    const int warps = TG_THREADS / 32, nch = (F + TT_CHUNK - 1) / TT_CHUNK;
    tt_grad_kernel<<<tt_blocks((size_t)ix->cap * nch, warps), TG_THREADS, 0, (cudaStream_t)stream>>>(
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

/* The staged combine (st_cuda_vsn_set_tt_combine_stage, default on; F <=
 * TCS_FMAX, else the kernel above): the same warp a bar and lane a column,
 * the same sums, but the bar's chain paid once. At the bar's start each
 * lane issues all F of its column's table values by cp.async into the
 * warp's shared stage (F 32 floats; no registers held while they fly),
 * together with the CSR offsets: one DRAM latency a bar for the table
 * instead of ceil(F / 8) in turn. The bar's srow positions come 32 at a
 * time (lane l position l; the first from the index's first[b], loaded
 * with the offsets: a bar of one row waits on no srow); its rows go in
 * groups of up to TCS_GROUP = 4 whose alphas (lanes j and j + 32 of each
 * row, issued together) are converted once into the warp's TCS_GROUP Fe
 * doubles; each table value is
 * then read and converted once a group (not once a row) and enters the
 * group's row sums, each row its own accumulator term by term in
 * ascending j: the same bits as the row kernel. A lane reads back only the
 * table values it copied (no warp barrier for them). Rows r >= rows are
 * neither loaded nor stored. Blocks of 4 warps, 64 registers: 8 blocks an
 * SM at F = 40 (25.6 KB each). The count: bench/notes-ttc.md. */
#define TCS_GROUP 4
#define TCS_THREADS 128
#define TCS_FMAX 64 /* alpha lanes j, j + 32; 41 KB a block at F = 64 (no opt-in past 48 KB needed) */

/* The warp's stage at F: TCS_GROUP Fe alpha doubles, then F rows of 32 table floats. */
static __host__ __device__ size_t tcs_warp_bytes(int F) {
    return sizeof(double) * TCS_GROUP * (size_t)((F + 1) & ~1) + sizeof(float) * 32 * (size_t)F;
}

/* Rows 0 .. G - 1 of a staged group (alphas at als[g Fe + j], the lane's table column at ts[32 j]). */
template <int G>
static __device__ __forceinline__ void tcs_rows(const float *ts, const double *als, int Fe, int F, double *acc) {
#pragma unroll
    for (int g = 0; g < G; g++)
        acc[g] = 0;
    for (int k = 0; k + 1 < F; k += 2) {
        const double t0 = (double)ts[32 * k], t1 = (double)ts[32 * (k + 1)];
#pragma unroll
        for (int g = 0; g < G; g++) {
            const double2 a = *reinterpret_cast<const double2 *>(als + g * Fe + k);
            acc[g] += a.x * t0;
            acc[g] += a.y * t1;
        }
    }
    if (F & 1) {
        const double t0 = (double)ts[32 * (F - 1)];
#pragma unroll
        for (int g = 0; g < G; g++)
            acc[g] += als[g * Fe + F - 1] * t0;
    }
}

static __global__ void __launch_bounds__(TCS_THREADS, 8)
    tt_combine_stage_kernel(int rows, int F, int Dv, int cap, const int *count, const int *offs, const int *first,
                            const int *srow, const float *tab, const float *alpha, int alpha_stride, float *v,
                            int v_stride) {
    extern __shared__ double2 tc_smem[];
    const int lane = threadIdx.x % 32, Fe = (F + 1) & ~1;
    double *als =
        reinterpret_cast<double *>(reinterpret_cast<char *>(tc_smem) + (size_t)(threadIdx.x / 32) * tcs_warp_bytes(F));
    float *ts = reinterpret_cast<float *>(als + TCS_GROUP * Fe) + lane;
    const bool col = lane < Dv;
    const size_t nb = (size_t)min(*count, cap), P = (size_t)F * Dv;
    WARP_LOOP(b, nb) {
        const int i0 = offs[b], i1 = offs[b + 1], f = first[b]; /* f = srow[i0]: a bar of one row needs no srow */
        if (col) {
            const float *t = tab + b * P + lane;
            for (int j = 0; j < F; j++)
                __pipeline_memcpy_async(ts + 32 * j, t + (size_t)j * Dv, 4);
        }
        __pipeline_commit();
        for (int w0 = i0; w0 < i1; w0 += 32) {
            const int i = w0 + lane, sw = i < i1 ? (i == i0 ? f : srow[i]) : 0, m = min(32, i1 - w0);
            for (int q = 0; q < m; q += TCS_GROUP) { /* warp-uniform */
                const int n = min(TCS_GROUP, m - q);
                int rg[TCS_GROUP];
                float ag[TCS_GROUP][2];
#pragma unroll
                for (int g = 0; g < TCS_GROUP; g++) {
                    rg[g] = __shfl_sync(0xffffffffu, sw, min(q + g, 31));
                    const bool live = g < n && rg[g] < rows;
                    const float *ar = alpha + (size_t)(live ? rg[g] : 0) * alpha_stride;
                    ag[g][0] = live && lane < F ? __ldg(ar + lane) : 0.0f;
                    ag[g][1] = live && lane + 32 < F ? __ldg(ar + lane + 32) : 0.0f;
                }
                __syncwarp(); /* every lane has read the previous group's alphas */
#pragma unroll
                for (int g = 0; g < TCS_GROUP; g++) {
                    if (lane < Fe) als[g * Fe + lane] = (double)ag[g][0];
                    if (lane + 32 < Fe) als[g * Fe + lane + 32] = (double)ag[g][1];
                }
                __pipeline_wait_prior(0); /* this lane's table column has landed (a no-op after the first group) */
                __syncwarp();
                double acc[TCS_GROUP];
                if (n == 4)
                    tcs_rows<4>(ts, als, Fe, F, acc);
                else if (n == 3)
                    tcs_rows<3>(ts, als, Fe, F, acc);
                else if (n == 2)
                    tcs_rows<2>(ts, als, Fe, F, acc);
                else
                    tcs_rows<1>(ts, als, Fe, F, acc);
#pragma unroll
                for (int g = 0; g < TCS_GROUP; g++)
                    if (g < n && rg[g] < rows && col) v[(size_t)rg[g] * v_stride + lane] = (float)acc[g];
            }
        }
        __syncwarp(); /* every lane is done with this bar's stage before the next bar's copies */
    }
    __pipeline_wait_prior(0);
}

static int tt_combine_stage_on = 1;
extern "C" void st_cuda_vsn_set_tt_combine_stage(int on) { tt_combine_stage_on = on != 0; }

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
    if (tt_combine_stage_on && F <= TCS_FMAX) {
        const int swarps = TCS_THREADS / 32;
        tt_combine_stage_kernel<<<tt_blocks((size_t)ix->cap, swarps), TCS_THREADS, swarps * tcs_warp_bytes(F),
                                  (cudaStream_t)stream>>>(rows, F, Dv, ix->cap, ix->count, ix->offs, ix->first,
                                                          ix->srow, tab, alpha, alpha_stride, v, v_stride);
        ST_CUDA_LAUNCHED();
        return ST_OK;
    }
    const int warps = TT_THREADS / 32;
    const size_t bytes = sizeof(double) * warps * (size_t)((F + 1) & ~1);
    if (bytes > 49152) /* F > 768: the row kernel (the same bits) */
        return st_cuda_vsn_table_combine(rows, F, Dv, alpha, alpha_stride, tab, ix->crow, v, v_stride, stream);
    tt_combine_kernel<<<tt_blocks((size_t)ix->cap, warps), TT_THREADS, bytes, (cudaStream_t)stream>>>(
        rows, F, Dv, ix->cap, ix->count, ix->offs, ix->srow, tab, alpha, alpha_stride, v, v_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
