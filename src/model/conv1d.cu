/* conv1d.cu: causal depthwise convolution (+ fused SiLU) on the GPU
 * (cuda/conv1d_cuda.h).
 *
 * forward:  pre[t, ch] = b[ch] + sum_i w[ch, i] x[t-W+1+i, ch] (x[<0] = 0),
 *           y = SiLU(pre) or pre                     x, y [Bsz*K, Ch], w [Ch, W]
 * backward: g = dy SiLU'(pre) (pre recomputed) or dy;
 *           dx[s, ch] = sum_i w[ch, i] g[s+W-1-i, ch] over s+W-1-i < K;
 *           dw[ch, i] += sum_{b,t} g[t, ch] x[t-W+1+i, ch];  db[ch] += sum g.
 *
 * Widths W <= ST_CONV_MAX_W (W a template argument), built to read each
 * value once: a thread owns a tile of up to ST_CONV_TILE consecutive rows
 * of one window and V adjacent channels (float4 / float2 loads where the
 * pointers, the strides and Ch allow, else V = 1), adjacent threads on
 * adjacent channel groups (coalesced). It keeps the last W inputs in
 * registers, so a tile reads its rows once plus W-1 rows of history (the
 * previous tile's rows: from cache). The backward is one kernel: per row g,
 * dx of the row W-1 back (so g is formed again for the W-1 rows past the
 * tile, a halo) and the W+1 parameter sums of the tile's rows in double. A
 * block's ST_CONV_TY tile lanes add their sums in lane order into one
 * partial per (group of tiles, parameter) in `work`; a second kernel adds
 * the groups in order into dw and db. Which rows go into which sum depends
 * on the shapes only: bit-identical from run to run, and the vector and
 * scalar paths give the same bits.
 *
 * Wider W: one thread per (row, channel) reading its W inputs, g through
 * `work`, the parameter sums over st_rowsplit (the first version's kernels,
 * kept for that case). */
#include <stdint.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/conv1d_cuda.h"
#include "cuda/linear_cuda.h"
}

enum {
    ST_CONV_TILE = 16,     /* rows a thread owns, of one window */
    ST_CONV_MAX_W = 4,     /* widths with a register history; wider: the row kernels */
    ST_CONV_THREADS = 256, /* forward block */
    ST_CONV_CX = 32,       /* backward block: a warp of channel groups ... */
    ST_CONV_TY = 8,        /* ... times tile lanes, added in lane order */
    ST_CONV_GROUP = 256,   /* rows a partial covers at least (when there are that many) */
    ST_COL_TILE = 32,      /* the finish and row kernels' parameter sums: columns ... */
    ST_ROW_LANES = 16,     /* ... times row (or group) lanes */
    ST_CONV_BWD_V = 2      /* the backward's channels a thread where aligned (1: scalar everywhere) */
};

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

/* model/act.h's float sigmoid, 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x)
 * below, without its branch: e^-|x| is the exponential either side takes and
 * only the numerator differs, so the bits are the same and a warp whose
 * values have both signs does not run both sides. */
static __host__ __device__ __forceinline__ float sigmoidf_st(float x) {
    float e = expf(-fabsf(x));
    return (x >= 0 ? 1.0f : e) / (1.0f + e);
}
static __host__ __device__ __forceinline__ float siluf_st(float x) { return x * sigmoidf_st(x); }
/* s (1 + x (1 - s)), the inner multiply-add written as the FMA nvcc would
 * contract it into, so that every instantiation rounds it alike. */
static __host__ __device__ __forceinline__ float silu_gradf_st(float x) {
    float s = sigmoidf_st(x);
    return s * fmaf(x, 1.0f - s, 1.0f);
}

/* ---- the tiles (W <= ST_CONV_MAX_W) ------------------------------------- */

/* nt tiles a window (the last one short when ST_CONV_TILE does not divide
 * K), tiles = Bsz nt. Backward block row ty sums tiles
 * (grp L + l) ST_CONV_TY + ty for l < L into the partials of group grp:
 * L tiles a lane, so that a partial covers about ST_CONV_GROUP rows (the
 * partials stay ~1/60 of the data they sum at W = 4). */
struct conv_tiles {
    int K, nt, L;
    long tiles, ngroups;
};

static conv_tiles tiles_of(int Bsz, int K) {
    conv_tiles p;
    p.K = K;
    p.nt = (K + ST_CONV_TILE - 1) / ST_CONV_TILE;
    p.tiles = (long)Bsz * p.nt;
    const int tile_rows = K < ST_CONV_TILE ? K : ST_CONV_TILE, lane_rows = ST_CONV_TY * tile_rows;
    p.L = (ST_CONV_GROUP + lane_rows - 1) / lane_rows;
    long per = (long)ST_CONV_TY * p.L;
    p.ngroups = (p.tiles + per - 1) / per;
    return p;
}

/* The tile functions are __host__ __device__ so that a host program can run
 * them (a check of the tiling without a GPU); on the device, reads of the
 * inputs go through the read-only path. */
#define ST_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define ST_UNROLL _Pragma("unroll")
#else
#define ST_UNROLL
#endif
template <typename T> static ST_HD T load_ro(const T *p) {
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

/* V floats at p (V-aligned: the caller checked). */
template <int V> static ST_HD void load_v(const float *p, float *v) {
    if constexpr (V == 4) {
        float4 q = load_ro(reinterpret_cast<const float4 *>(p));
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else if constexpr (V == 2) {
        float2 q = load_ro(reinterpret_cast<const float2 *>(p));
        v[0] = q.x, v[1] = q.y;
    } else {
        v[0] = load_ro(p);
    }
}
template <int V> static ST_HD void store_v(float *p, const float *v) {
    if constexpr (V == 4)
        *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    else if constexpr (V == 2)
        *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
    else
        *p = v[0];
}

/* The host's check for V-wide access: p V-aligned, stride a multiple of V. */
static bool vec_ok(const void *p, int stride, int V) {
    return (uintptr_t)p % (sizeof(float) * V) == 0 && stride % V == 0;
}

/* w [Ch, W] and b of channels ch..ch+V-1 into registers (zero past Ch). */
template <int W, int V>
static ST_HD void load_params(int ch, int Ch, const float *w, const float *b, float (&wr)[V][W], float (&br)[V]) {
    ST_UNROLL
    for (int v = 0; v < V; v++) {
        bool in = ch + v < Ch;
        br[v] = in ? load_ro(&b[ch + v]) : 0.0f;
        ST_UNROLL
        for (int i = 0; i < W; i++)
            wr[v][i] = in ? load_ro(&w[(size_t)(ch + v) * W + i]) : 0.0f;
    }
}

/* h[i] = x[t0-W+i] for i = 1..W-1 (the history before row t0; zero at the
 * window's start, t0 = 0). xr points at row t0. */
template <int W, int V> static ST_HD void load_history(int t0, const float *xr, int x_stride, float (&h)[W][V]) {
    ST_UNROLL
    for (int i = 0; i < W; i++) {
        if (i > 0 && t0 > 0) {
            load_v<V>(xr - (size_t)(W - i) * x_stride, h[i]);
        } else {
            ST_UNROLL
            for (int v = 0; v < V; v++)
                h[i][v] = 0.0f;
        }
    }
}

/* pre at the row whose inputs are h[0..W-1] (h[i] = x[t-W+1+i]): the taps
 * added in the CPU's order, one FMA each (a zero input adds nothing). */
template <int W, int V>
static ST_HD float tile_pre(int v, const float (&h)[W][V], const float (&wr)[V][W], const float (&br)[V]) {
    float pre = br[v];
    ST_UNROLL
    for (int i = 0; i < W; i++)
        pre = fmaf(wr[v][i], h[i][v], pre);
    return pre;
}

/* Rows t0..t0+n-1 of one window (xr, yr at row t0, channel ch); FULL: n is
 * ST_CONV_TILE, no row predicates. Rows are loaded U at a time before they
 * are used, so each thread has U loads in flight. */
template <int W, int V, bool FULL>
static ST_HD void forward_tile(int t0, int n, const float *__restrict__ xr, int x_stride, const float (&wr)[V][W],
                               const float (&br)[V], int silu, float *__restrict__ yr, int y_stride) {
    constexpr int U = ST_CONV_TILE / (2 * V);
    float h[W][V];
    load_history<W, V>(t0, xr, x_stride, h);
    ST_UNROLL
    for (int r0 = 0; r0 < ST_CONV_TILE; r0 += U) {
        float xs[U][V] = {};
        ST_UNROLL
        for (int u = 0; u < U; u++)
            if (FULL || r0 + u < n) load_v<V>(xr + (size_t)(r0 + u) * x_stride, xs[u]);
        ST_UNROLL
        for (int u = 0; u < U; u++) {
            if (!FULL && r0 + u >= n) continue;
            float out[V];
            ST_UNROLL
            for (int v = 0; v < V; v++) {
                ST_UNROLL
                for (int i = 0; i + 1 < W; i++)
                    h[i][v] = h[i + 1][v];
                h[W - 1][v] = xs[u][v];
                float pre = tile_pre<W, V>(v, h, wr, br);
                out[v] = silu ? siluf_st(pre) : pre;
            }
            store_v<V>(yr + (size_t)(r0 + u) * y_stride, out);
        }
    }
}

/* Tile `tile`: its window, first row t0 and rows n (<= ST_CONV_TILE). */
static ST_HD void tile_at(const conv_tiles &p, long tile, long *win, int *t0, int *n) {
    *win = tile / p.nt;
    *t0 = (int)(tile % p.nt) * ST_CONV_TILE;
    *n = p.K - *t0 < ST_CONV_TILE ? p.K - *t0 : ST_CONV_TILE;
}

/* Thread idx < p.tiles * Ch / V of the forward: tile idx / (Ch / V),
 * channels from (idx % (Ch / V)) V. */
template <int W, int V>
static ST_HD void forward_thread(const conv_tiles &p, int Ch, long idx, const float *__restrict__ x, int x_stride,
                                 const float *__restrict__ w, const float *__restrict__ b, int silu,
                                 float *__restrict__ y, int y_stride) {
    const int groups = Ch / V, ch = (int)(idx % groups) * V;
    long win;
    int t0, n;
    tile_at(p, idx / groups, &win, &t0, &n);
    float wr[V][W], br[V];
    load_params<W, V>(ch, Ch, w, b, wr, br);
    const size_t row = (size_t)win * p.K + t0;
    const float *xr = x + row * x_stride + ch;
    float *yr = y + row * y_stride + ch;
    if (n == ST_CONV_TILE)
        forward_tile<W, V, true>(t0, n, xr, x_stride, wr, br, silu, yr, y_stride);
    else
        forward_tile<W, V, false>(t0, n, xr, x_stride, wr, br, silu, yr, y_stride);
}

/* A thread per (tile, group of V channels), channel groups fastest. */
template <int W, int V>
static __global__ void __launch_bounds__(ST_CONV_THREADS, 3)
    conv_forward_tile_kernel(conv_tiles p, int Ch, const float *__restrict__ x, int x_stride,
                             const float *__restrict__ w, const float *__restrict__ b, int silu, float *__restrict__ y,
                             int y_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < p.tiles * (Ch / V)) forward_thread<W, V>(p, Ch, idx, x, x_stride, w, b, silu, y, y_stride);
}

/* The backward of one tile, rows t0..t0+n-1 (pointers at row t0, channel
 * ch): rows r < E = ST_CONV_TILE + W - 1 of which the first e are in the
 * window (g beyond it is zero); g of row r is formed from the history and
 * dy, added into the tile's parameter sums when r < n, and dx of row r-W+1
 * (< n) is written from the last W values of g. FULL: n = ST_CONV_TILE and
 * e = E, no row predicates. */
template <int W, int V, bool FULL>
static ST_HD void backward_tile(int t0, int n, int e, const float *__restrict__ xr, int x_stride,
                                const float *__restrict__ dyr, int dy_stride, float *__restrict__ dxr, int dx_stride,
                                const float (&wr)[V][W], const float (&br)[V], int silu, double (&acc)[V][W + 1]) {
    constexpr int E = ST_CONV_TILE + W - 1, U = V == 1 ? 2 : 4;
    float h[W][V], g[W][V]; /* h[i] = x[t-W+1+i], g[i] = g[t-W+1+i] at row t */
    double hd[W][V];        /* h in double: each input converted once */
    load_history<W, V>(t0, xr, x_stride, h);
    ST_UNROLL
    for (int i = 0; i < W; i++) {
        ST_UNROLL
        for (int v = 0; v < V; v++)
            hd[i][v] = h[i][v], g[i][v] = 0.0f; /* g before the tile is never used: dx rows start at t0 */
    }
    ST_UNROLL
    for (int r0 = 0; r0 < E; r0 += U) {
        float xs[U][V] = {}, ds[U][V] = {};
        ST_UNROLL
        for (int u = 0; u < U; u++)
            if (r0 + u < E && (FULL || r0 + u < e)) {
                load_v<V>(xr + (size_t)(r0 + u) * x_stride, xs[u]);
                load_v<V>(dyr + (size_t)(r0 + u) * dy_stride, ds[u]);
            }
        ST_UNROLL
        for (int u = 0; u < U; u++) {
            const int r = r0 + u;
            if (r >= E) continue;
            const bool in = FULL || r < e;
            float dxv[V];
            ST_UNROLL
            for (int v = 0; v < V; v++) {
                ST_UNROLL
                for (int i = 0; i + 1 < W; i++)
                    h[i][v] = h[i + 1][v], hd[i][v] = hd[i + 1][v], g[i][v] = g[i + 1][v];
                h[W - 1][v] = xs[u][v], hd[W - 1][v] = xs[u][v];
                float d = ds[u][v];
                if (silu && in) d *= silu_gradf_st(tile_pre<W, V>(v, h, wr, br));
                g[W - 1][v] = d; /* zero past the window (xs, ds are) */
                if (r < ST_CONV_TILE && (FULL || r < n)) {
                    double gd = d;
                    ST_UNROLL
                    for (int i = 0; i < W; i++)
                        acc[v][i] = fma(gd, hd[i][v], acc[v][i]); /* the float product is exact in double */
                    acc[v][W] += gd;
                }
                float s = 0.0f; /* dx[t-W+1]: tap i read it for the output t-i */
                ST_UNROLL
                for (int i = 0; i < W; i++)
                    s = fmaf(wr[v][i], g[W - 1 - i][v], s);
                dxv[v] = s;
            }
            if (r >= W - 1 && (FULL || r - (W - 1) < n)) store_v<V>(dxr + (size_t)(r - (W - 1)) * dx_stride, dxv);
        }
    }
}

/* Lane ty of group grp, channels ch..ch+V-1 (< Ch): the backward of its
 * tiles (grp L + l) ST_CONV_TY + ty, l < L, dx written and the parameter
 * sums added into acc in row order. */
template <int W, int V>
static ST_HD void backward_lane(const conv_tiles &p, long grp, int ty, int ch, const float *__restrict__ x,
                                int x_stride, const float (&wr)[V][W], const float (&br)[V], int silu,
                                const float *__restrict__ dy, int dy_stride, float *__restrict__ dx, int dx_stride,
                                double (&acc)[V][W + 1]) {
    for (int l = 0; l < p.L; l++) {
        const long tile = (grp * p.L + l) * ST_CONV_TY + ty;
        if (tile >= p.tiles) return;
        long win;
        int t0, n;
        tile_at(p, tile, &win, &t0, &n);
        const int e = p.K - t0 < n + W - 1 ? p.K - t0 : n + W - 1; /* rows of the tile and its halo in the window */
        const size_t row = (size_t)win * p.K + t0;
        const float *xr = x + row * x_stride + ch, *dyr = dy + row * dy_stride + ch;
        float *dxr = dx + row * dx_stride + ch;
        if (e == ST_CONV_TILE + W - 1)
            backward_tile<W, V, true>(t0, n, e, xr, x_stride, dyr, dy_stride, dxr, dx_stride, wr, br, silu, acc);
        else
            backward_tile<W, V, false>(t0, n, e, xr, x_stride, dyr, dy_stride, dxr, dx_stride, wr, br, silu, acc);
    }
}

/* Block (ST_CONV_CX channel groups, ST_CONV_TY tile lanes) over the groups
 * of tiles grp = blockIdx.y, + gridDim.y, ...; each group's sums, lanes
 * added in order, go to parts[grp][dw as [Ch, W], then db [Ch]] (none when
 * parts is NULL: no parameter gradient wanted). */
template <int W, int V>
static __global__ void __launch_bounds__(ST_CONV_CX *ST_CONV_TY, V == 1 ? 3 : 2)
    conv_backward_tile_kernel(conv_tiles p, int Ch, const float *__restrict__ x, int x_stride,
                              const float *__restrict__ w, const float *__restrict__ b, int silu,
                              const float *__restrict__ dy, int dy_stride, float *__restrict__ dx, int dx_stride,
                              double *__restrict__ parts) {
    __shared__ double part[W + 1][ST_CONV_TY][ST_CONV_CX];
    const int ch = (blockIdx.x * ST_CONV_CX + threadIdx.x) * V;
    const bool live = ch < Ch; /* V divides Ch */
    float wr[V][W], br[V];
    load_params<W, V>(ch, Ch, w, b, wr, br);
    for (long grp = blockIdx.y; grp < p.ngroups; grp += gridDim.y) {
        double acc[V][W + 1] = {};
        if (live)
            backward_lane<W, V>(p, grp, threadIdx.y, ch, x, x_stride, wr, br, silu, dy, dy_stride, dx, dx_stride, acc);
        if (!parts) continue;
        ST_UNROLL
        for (int v = 0; v < V; v++) {
            ST_UNROLL
            for (int i = 0; i <= W; i++)
                part[i][threadIdx.y][threadIdx.x] = acc[v][i];
            __syncthreads();
            if (threadIdx.y <= W && live) { /* row i adds parameter i's lanes */
                const int i = threadIdx.y;
                double t = 0;
                for (int l = 0; l < ST_CONV_TY; l++)
                    t += part[i][l][threadIdx.x];
                size_t c = i < W ? (size_t)(ch + v) * W + i : (size_t)Ch * W + ch + v;
                parts[(size_t)grp * Ch * (W + 1) + c] = t;
            }
            __syncthreads();
        }
    }
}

/* dw, db += the sum over groups of parts[group][c], c < Ch (W + 1): lane l
 * adds groups l, l + ST_ROW_LANES, ..., then the lanes in order. */
static __global__ void conv_params_finish_kernel(long ngroups, int Ch, int W, const double *__restrict__ parts,
                                                 float *dw, float *db) {
    __shared__ double part[ST_ROW_LANES][ST_COL_TILE];
    const long cols = (long)Ch * (W + 1), c = (long)blockIdx.x * ST_COL_TILE + threadIdx.x;
    double acc = 0;
    if (c < cols)
        for (long grp = threadIdx.y; grp < ngroups; grp += ST_ROW_LANES)
            acc += parts[(size_t)grp * cols + c];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || c >= cols) return;
    double t = 0;
    for (int l = 0; l < ST_ROW_LANES; l++)
        t += part[l][threadIdx.x];
    if (c < (long)Ch * W) {
        if (dw) dw[c] += (float)t;
    } else if (db) {
        db[c - (long)Ch * W] += (float)t;
    }
}

template <int W>
static void forward_tiles(const conv_tiles &p, int Ch, const float *x, int x_stride, const float *w, const float *b,
                          int silu, float *y, int y_stride, cudaStream_t st) {
    if (Ch % 4 == 0 && vec_ok(x, x_stride, 4) && vec_ok(y, y_stride, 4))
        conv_forward_tile_kernel<W, 4><<<blocks_for(p.tiles * (Ch / 4), ST_CONV_THREADS), ST_CONV_THREADS, 0, st>>>(
            p, Ch, x, x_stride, w, b, silu, y, y_stride);
    else
        conv_forward_tile_kernel<W, 1><<<blocks_for(p.tiles * Ch, ST_CONV_THREADS), ST_CONV_THREADS, 0, st>>>(
            p, Ch, x, x_stride, w, b, silu, y, y_stride);
}

template <int W>
static void backward_tiles(const conv_tiles &p, int Ch, const float *x, int x_stride, const float *w, const float *b,
                           int silu, const float *dy, int dy_stride, float *dx, int dx_stride, double *parts,
                           cudaStream_t st) {
    const bool vec = ST_CONV_BWD_V == 2 && Ch % 2 == 0 && vec_ok(x, x_stride, 2) && vec_ok(dy, dy_stride, 2) &&
                     vec_ok(dx, dx_stride, 2);
    const int V = vec ? 2 : 1;
    const long groups = Ch / V;
    dim3 block(ST_CONV_CX, ST_CONV_TY), grid(blocks_for(groups, ST_CONV_CX), (unsigned)min(p.ngroups, 65535L));
    if (V == 2)
        conv_backward_tile_kernel<W, 2>
            <<<grid, block, 0, st>>>(p, Ch, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, parts);
    else
        conv_backward_tile_kernel<W, 1>
            <<<grid, block, 0, st>>>(p, Ch, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, parts);
}

/* ---- any width: a thread per (row, channel) ----------------------------- */

/* pre at (row r = window start + t, channel ch), the taps added in the CPU's order. */
static __device__ float conv_pre(int t, int ch, int W, const float *xw, int x_stride, const float *w, const float *b) {
    float pre = b[ch];
    for (int i = 0; i < W; i++) {
        int s = t - W + 1 + i;
        if (s >= 0) pre += w[(size_t)ch * W + i] * xw[(size_t)s * x_stride + ch];
    }
    return pre;
}

static __global__ void conv_forward_kernel(long rows, int K, int Ch, int W, const float *x, int x_stride,
                                           const float *w, const float *b, int silu, float *y, int y_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * Ch) return;
    long r = idx / Ch;
    int ch = (int)(idx % Ch), t = (int)(r % K);
    float pre = conv_pre(t, ch, W, x + (size_t)(r - t) * x_stride, x_stride, w, b);
    y[(size_t)r * y_stride + ch] = silu ? siluf_st(pre) : pre;
}

/* g[r, ch] = dy[r, ch] SiLU'(pre[r, ch]) (or dy) into contiguous rows of Ch. */
static __global__ void conv_grad_pre_kernel(long rows, int K, int Ch, int W, const float *x, int x_stride,
                                            const float *w, const float *b, int silu, const float *dy, int dy_stride,
                                            float *g) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * Ch) return;
    long r = idx / Ch;
    int ch = (int)(idx % Ch), t = (int)(r % K);
    float d = dy[(size_t)r * dy_stride + ch];
    if (silu) d *= silu_gradf_st(conv_pre(t, ch, W, x + (size_t)(r - t) * x_stride, x_stride, w, b));
    g[idx] = d;
}

/* dx[s] = sum over the outputs t = s+W-1-i (< K) that read x[s]. */
static __global__ void conv_grad_x_kernel(long rows, int K, int Ch, int W, const float *w, const float *g, float *dx,
                                          int dx_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * Ch) return;
    long r = idx / Ch;
    int ch = (int)(idx % Ch), s = (int)(r % K);
    const float *gw = g + (size_t)(r - s) * Ch;
    float acc = 0;
    for (int i = 0; i < W; i++) {
        int t = s + W - 1 - i;
        if (t < K) acc += w[(size_t)ch * W + i] * gw[(size_t)t * Ch + ch];
    }
    dx[(size_t)r * dx_stride + ch] = acc;
}

/* Parameter column c < Ch*(W+1): tap i = c / Ch of channel ch = c % Ch
 * (i == W: the bias). Lanes sum rows r = lane, lane + ST_ROW_LANES, ... */
static __global__ void conv_grad_params_kernel(long rows, int K, int Ch, int W, const float *x, int x_stride,
                                               const float *g, int splits, double *parts, float *dw, float *db) {
    __shared__ double part[ST_ROW_LANES][ST_COL_TILE];
    long c = (long)blockIdx.x * ST_COL_TILE + threadIdx.x;
    int i = (int)(c / Ch), ch = (int)(c % Ch);
    int live = c < (long)Ch * (W + 1) && (i < W ? dw != NULL : db != NULL);
    long r0, r1;
    st_rowsplit_range(rows, splits, blockIdx.y, &r0, &r1);
    double acc = 0;
    if (live)
        for (long r = r0 + threadIdx.y; r < r1; r += ST_ROW_LANES) {
            double gv = g[(size_t)r * Ch + ch];
            if (i == W) {
                acc += gv;
                continue;
            }
            int s = (int)(r % K) - W + 1 + i; /* the input time this tap read */
            if (s >= 0) acc += gv * x[(size_t)(r - W + 1 + i) * x_stride + ch];
        }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || !live) return;
    double t = 0;
    for (int l = 0; l < ST_ROW_LANES; l++)
        t += part[l][threadIdx.x];
    if (parts) /* [split][dw as [Ch, W], then db [Ch]] */
        parts[(size_t)blockIdx.y * Ch * (W + 1) + (i < W ? (size_t)ch * W + i : (size_t)Ch * W + ch)] = t;
    else if (i < W)
        dw[(size_t)ch * W + i] += (float)t;
    else
        db[ch] += (float)t;
}

static int backward_rows(long rows, int K, int Ch, int W, const float *x, int x_stride, const float *w, const float *b,
                         int silu, const float *dy, int dy_stride, float *dx, int dx_stride, float *dw, float *db,
                         float *work, cudaStream_t st) {
    unsigned grid = blocks_for(rows * Ch, 256);
    conv_grad_pre_kernel<<<grid, 256, 0, st>>>(rows, K, Ch, W, x, x_stride, w, b, silu, dy, dy_stride, work);
    ST_CUDA_LAUNCHED();
    conv_grad_x_kernel<<<grid, 256, 0, st>>>(rows, K, Ch, W, w, work, dx, dx_stride);
    ST_CUDA_LAUNCHED();
    if (!dw && !db) return ST_OK;
    const int cols = Ch * (W + 1);
    st_rowsplit plan;
    ST_TRY(st_cuda_rowsplit_plan((int)rows, cols, st, &plan));
    dim3 block(ST_COL_TILE, ST_ROW_LANES), pgrid(blocks_for(cols, ST_COL_TILE), (unsigned)plan.splits);
    conv_grad_params_kernel<<<pgrid, block, 0, st>>>(rows, K, Ch, W, x, x_stride, work, plan.splits, plan.parts, dw,
                                                     db);
    ST_CUDA_LAUNCHED();
    if (plan.parts && dw) ST_TRY(st_cuda_rowsplit_finish(Ch * W, plan.parts, cols, plan.splits, dw, st));
    if (plan.parts && db) ST_TRY(st_cuda_rowsplit_finish(Ch, plan.parts + (size_t)Ch * W, cols, plan.splits, db, st));
    return ST_OK;
}

/* ---- the API ------------------------------------------------------------ */

static bool tiled(int W) { return W >= 1 && W <= ST_CONV_MAX_W; }

extern "C" size_t st_cuda_conv1d_work_count(int Bsz, int K, int Ch, int W) {
    if (Bsz <= 0 || K <= 0 || Ch <= 0) return 0;
    if (!tiled(W)) return (size_t)Bsz * (size_t)K * (size_t)Ch;
    /* the partials in double, and one float to align them */
    return (size_t)tiles_of(Bsz, K).ngroups * (size_t)Ch * (size_t)(W + 1) * 2 + 1;
}

extern "C" int st_cuda_conv1d_forward(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w,
                                      const float *b, int silu, float *y, int y_stride, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    long rows = (long)Bsz * K;
    if (rows <= 0 || Ch <= 0) return ST_OK;
    const conv_tiles p = tiles_of(Bsz, K);
    switch (tiled(W) ? W : 0) {
    case 1: forward_tiles<1>(p, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    case 2: forward_tiles<2>(p, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    case 3: forward_tiles<3>(p, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    case 4: forward_tiles<4>(p, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    default:
        conv_forward_kernel<<<blocks_for(rows * Ch, 256), 256, 0, st>>>(rows, K, Ch, W, x, x_stride, w, b, silu, y,
                                                                        y_stride);
    }
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* Row K-1 of window b (a thread per (window, channel)): the taps in the
 * CPU's order, one FMA each as tile_pre (the window's zero history taps
 * skipped: they add nothing), so the bits of the full forward's row K-1. */
static __global__ void conv_forward_last_kernel(int Bsz, int K, int Ch, int W, const float *__restrict__ x,
                                                int x_stride, const float *__restrict__ w,
                                                const float *__restrict__ b, int silu, float *__restrict__ y,
                                                int y_stride) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)Bsz * Ch) return;
    const int ch = (int)(idx % Ch);
    const size_t r = (size_t)(idx / Ch) * K + (K - 1);
    float pre = b[ch];
    for (int i = 0; i < W; i++) {
        const int back = W - 1 - i; /* x[K-1-back] */
        if (back <= K - 1) pre = fmaf(w[(size_t)ch * W + i], x[(r - back) * x_stride + ch], pre);
    }
    y[r * y_stride + ch] = silu ? siluf_st(pre) : pre;
}

extern "C" int st_cuda_conv1d_forward_last(int Bsz, int K, int Ch, int W, const float *x, int x_stride,
                                           const float *w, const float *b, int silu, float *y, int y_stride,
                                           void *stream) {
    if (Bsz <= 0 || K <= 0 || Ch <= 0) return ST_OK;
    conv_forward_last_kernel<<<blocks_for((long)Bsz * Ch, 256), 256, 0, (cudaStream_t)stream>>>(
        Bsz, K, Ch, W, x, x_stride, w, b, silu, y, y_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_conv1d_backward(int Bsz, int K, int Ch, int W, const float *x, int x_stride, const float *w,
                                       const float *b, int silu, const float *dy, int dy_stride, float *dx,
                                       int dx_stride, float *dw, float *db, float *work, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    long rows = (long)Bsz * K;
    if (rows <= 0 || Ch <= 0) return ST_OK;
    if (!tiled(W))
        return backward_rows(rows, K, Ch, W, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, dw, db, work, st);
    const conv_tiles p = tiles_of(Bsz, K);
    double *parts = dw || db ? (double *)(((uintptr_t)work + 7) & ~(uintptr_t)7) : NULL;
    switch (W) {
    case 1: backward_tiles<1>(p, Ch, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, parts, st); break;
    case 2: backward_tiles<2>(p, Ch, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, parts, st); break;
    case 3: backward_tiles<3>(p, Ch, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, parts, st); break;
    default: backward_tiles<4>(p, Ch, x, x_stride, w, b, silu, dy, dy_stride, dx, dx_stride, parts, st); break;
    }
    ST_CUDA_LAUNCHED();
    if (!parts) return ST_OK;
    dim3 block(ST_COL_TILE, ST_ROW_LANES);
    conv_params_finish_kernel<<<blocks_for((long)Ch * (W + 1), ST_COL_TILE), block, 0, st>>>(p.ngroups, Ch, W, parts,
                                                                                             dw, db);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
