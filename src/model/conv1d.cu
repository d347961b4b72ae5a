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
 * value once: a thread owns a tile of consecutive rows of one window and V
 * adjacent channels (float4 / float2 loads where the pointers, the strides
 * and Ch allow, else V = 1), adjacent threads on adjacent channel groups
 * (coalesced). It keeps the last W inputs in registers, so a tile reads its
 * rows once plus W-1 rows of history (the previous tile's rows: from
 * cache). The forward's tiles are T = 8 rows, all loaded before any is
 * used, fewer (4, 2) where the rows would not fill a wave of 3 blocks an
 * SM (the host's choice; the bits do not depend on T). The backward's tiles are
 * ST_CONV_TILE rows whose x and dy come through a per-thread ring of
 * ST_CONV_RING rows in shared memory filled by cp.async (one stream through
 * a lane's tiles), so that rows stay in flight while the thread computes.
 * The backward is one kernel: per row g, dx of the row W-1 back (so g is
 * formed again for the W-1 rows past the tile, a halo) and the W+1
 * parameter sums of the tile's rows in double. A block's ST_CONV_TY tile
 * lanes add their sums in lane order into one partial per (group of tiles,
 * parameter) in `work`; a second kernel adds the groups in order into dw
 * and db. Which rows go into which sum depends
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
    ST_CONV_TILE = 16,     /* rows a backward thread owns, of one window (the forward: 2-16, the host picks) */
    ST_CONV_FWD_TILE = 8,  /* the forward's rows a thread where the grid fills the GPU */
    ST_CONV_RING = 8,      /* the backward's rows of x and dy a thread has in flight (cp.async) */
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

/* Tiles of T rows: nt tiles a window (the last one short when T does not
 * divide K), tiles = Bsz nt. The backward's tiles are ST_CONV_TILE rows;
 * its block row ty sums tiles (grp L + l) ST_CONV_TY + ty for l < L into
 * the partials of group grp: L tiles a lane, so that a partial covers
 * about ST_CONV_GROUP rows (the partials stay ~1/60 of the data they sum
 * at W = 4). The forward's T (16, 8, 4 or 2) is the host's choice
 * (forward_tile_rows); L and ngroups mean nothing there. */
struct conv_tiles {
    int K, T, nt, L;
    long tiles, ngroups;
};

static conv_tiles tiles_of(int Bsz, int K, int T = ST_CONV_TILE) {
    conv_tiles p;
    p.K = K;
    p.T = T;
    p.nt = (K + T - 1) / T;
    p.tiles = (long)Bsz * p.nt;
    const int tile_rows = K < T ? K : T, lane_rows = ST_CONV_TY * tile_rows;
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

/* h[i] = x[t0-W+i] for i = 1..W-1 (the history before row t0; zero before
 * the window's start: all of it at t0 = 0, the first rows where a tile is
 * shorter than W-1). xr points at row t0. */
template <int W, int V> static ST_HD void load_history(int t0, const float *xr, int x_stride, float (&h)[W][V]) {
    ST_UNROLL
    for (int i = 0; i < W; i++) {
        if (i > 0 && t0 >= W - i) {
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
 * T, no row predicates. Rows are loaded U = min(T, 8) at a time before any
 * is used: a tile of T <= 8 has its history and all its rows in flight at
 * once (11 loads at T = 8, W = 4), its only wait on memory. */
template <int W, int V, int T, bool FULL>
static ST_HD void forward_tile(int t0, int n, const float *__restrict__ xr, int x_stride, const float (&wr)[V][W],
                               const float (&br)[V], int silu, float *__restrict__ yr, int y_stride) {
    constexpr int U = T < 8 ? T : 8;
    float h[W][V];
    load_history<W, V>(t0, xr, x_stride, h);
    ST_UNROLL
    for (int r0 = 0; r0 < T; r0 += U) {
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

/* Tile `tile`: its window, first row t0 and rows n (<= p.T). */
static ST_HD void tile_at(const conv_tiles &p, long tile, long *win, int *t0, int *n) {
    *win = tile / p.nt;
    *t0 = (int)(tile % p.nt) * p.T;
    *n = p.K - *t0 < p.T ? p.K - *t0 : p.T;
}

/* Thread idx < p.tiles * Ch / V of the forward (tiles of T = p.T rows):
 * tile idx / (Ch / V), channels from (idx % (Ch / V)) V. */
template <int W, int V, int T>
static ST_HD void forward_thread_t(const conv_tiles &p, int Ch, long idx, const float *__restrict__ x, int x_stride,
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
    if (n == T)
        forward_tile<W, V, T, true>(t0, n, xr, x_stride, wr, br, silu, yr, y_stride);
    else
        forward_tile<W, V, T, false>(t0, n, xr, x_stride, wr, br, silu, yr, y_stride);
}

/* The same at p.T (the host test's entry: any tiling conv_tiles holds). */
template <int W, int V>
static ST_HD void forward_thread(const conv_tiles &p, int Ch, long idx, const float *__restrict__ x, int x_stride,
                                 const float *__restrict__ w, const float *__restrict__ b, int silu,
                                 float *__restrict__ y, int y_stride) {
    switch (p.T) {
    case 16: forward_thread_t<W, V, 16>(p, Ch, idx, x, x_stride, w, b, silu, y, y_stride); break;
    case 8: forward_thread_t<W, V, 8>(p, Ch, idx, x, x_stride, w, b, silu, y, y_stride); break;
    case 4: forward_thread_t<W, V, 4>(p, Ch, idx, x, x_stride, w, b, silu, y, y_stride); break;
    default: forward_thread_t<W, V, 2>(p, Ch, idx, x, x_stride, w, b, silu, y, y_stride); break;
    }
}

/* A thread per (tile of T rows, group of V channels), channel groups
 * fastest. 3 blocks an SM, 2 where a thread holds more than 16 floats of
 * rows (V = 4, T = 8: 94 registers; at 3 blocks' 80 it spills). */
template <int W, int V, int T>
static __global__ void __launch_bounds__(ST_CONV_THREADS, V * T > 16 ? 2 : 3)
    conv_forward_tile_kernel(conv_tiles p, int Ch, const float *__restrict__ x, int x_stride,
                             const float *__restrict__ w, const float *__restrict__ b, int silu, float *__restrict__ y,
                             int y_stride) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < p.tiles * (Ch / V)) forward_thread_t<W, V, T>(p, Ch, idx, x, x_stride, w, b, silu, y, y_stride);
}

/* The backward's ring (device only): a thread's own ST_CONV_RING slots of
 * one row of x and one of dy (V floats each) in shared memory, filled by
 * cp.async (L1-allocating: the halo rows are the next lane's first rows).
 * Slot s of array a (0: x, 1: dy) is at ring[(2 s + a) RING_ROW(V)], a
 * block's threads side by side (conflict-free V-float reads). A thread
 * reads only what it copied, after its own wait: no barrier. The ring runs
 * through a lane's tiles: the rows past the end of one tile's E are the
 * next tile's first rows, so a tile's slots start at `base`, the previous
 * tile's base + E (mod ST_CONV_RING). */
#define RING_ROW(V) (ST_CONV_CX * ST_CONV_TY * (V))
#ifdef __CUDA_ARCH__
template <int V> static __device__ __forceinline__ void ring_copy(float *dst, const float *src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(4 * V) : "memory");
}
static __device__ __forceinline__ void ring_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Every copy but the N most recently committed groups has landed. */
template <int N> static __device__ __forceinline__ void ring_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/* A row of x and dy (xq, dyq) into slot s when `want`; one group either
 * way, so that ring_wait counts rows. */
template <int V>
static __device__ __forceinline__ void ring_put(bool want, int s, const float *xq, const float *dyq, float *ring) {
    if (want) {
        float *slot = ring + (size_t)(2 * s) * RING_ROW(V);
        ring_copy<V>(slot, xq);
        ring_copy<V>(slot + RING_ROW(V), dyq);
    }
    ring_commit();
}
#endif

/* The backward of one tile, rows t0..t0+n-1 (pointers at row t0, channel
 * ch): rows r < E = ST_CONV_TILE + W - 1 of which the first e are in the
 * window (g beyond it is zero); g of row r is formed from the history and
 * dy, added into the tile's parameter sums when r < n, and dx of row r-W+1
 * (< n) is written from the last W values of g. FULL: n = ST_CONV_TILE and
 * e = E, no row predicates. On the device the rows come through the
 * thread's ring (ST_CONV_RING rows in flight while it computes; row r's
 * slot, base + r, refilled with row r + ST_CONV_RING once row r is used,
 * past E the next tile's rows: nxr, ndyr, ne as xr, dyr, e, ne = 0 where
 * there is none; `primed`: this tile's first rows were issued so by the
 * previous tile), on the host straight from memory. */
template <int W, int V, bool FULL>
static ST_HD void backward_tile(int t0, int n, int e, const float *__restrict__ xr, int x_stride,
                                const float *__restrict__ dyr, int dy_stride, float *__restrict__ dxr, int dx_stride,
                                const float (&wr)[V][W], const float (&br)[V], int silu, double (&acc)[V][W + 1],
                                float *ring, int base, bool primed, const float *nxr, const float *ndyr, int ne) {
    constexpr int E = ST_CONV_TILE + W - 1, D = ST_CONV_RING;
    static_assert((D & (D - 1)) == 0 && D <= E, "the ring's slots: a power of 2, at most a tile's rows");
#ifdef __CUDA_ARCH__
    if (!primed) {
        ST_UNROLL
        for (int q = 0; q < D; q++)
            ring_put<V>(FULL || q < e, (base + q) & (D - 1), xr + (size_t)q * x_stride, dyr + (size_t)q * dy_stride,
                        ring);
    }
#else
    (void)ring, (void)base, (void)primed, (void)nxr, (void)ndyr, (void)ne;
#endif
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
    for (int r = 0; r < E; r++) {
        const bool in = FULL || r < e;
        float xs[V] = {}, ds[V] = {}; /* zero past the window */
#ifdef __CUDA_ARCH__
        const int rs = (base + r) & (D - 1); /* row r's slot */
        ring_wait<D - 1>();
        if (in) {
            const float *slot = ring + (size_t)(2 * rs) * RING_ROW(V);
            ST_UNROLL
            for (int v = 0; v < V; v++)
                xs[v] = slot[v], ds[v] = slot[RING_ROW(V) + v];
        }
#else
        if (in) {
            load_v<V>(xr + (size_t)r * x_stride, xs);
            load_v<V>(dyr + (size_t)r * dy_stride, ds);
        }
#endif
        float dxv[V];
        ST_UNROLL
        for (int v = 0; v < V; v++) {
            ST_UNROLL
            for (int i = 0; i + 1 < W; i++)
                h[i][v] = h[i + 1][v], hd[i][v] = hd[i + 1][v], g[i][v] = g[i + 1][v];
            h[W - 1][v] = xs[v], hd[W - 1][v] = xs[v];
            float d = ds[v];
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
#ifdef __CUDA_ARCH__
        if (r + D < E) /* row r's values are used: its slot takes row r + D, or the next tile's row r + D - E */
            ring_put<V>(FULL || r + D < e, rs, xr + (size_t)(r + D) * x_stride, dyr + (size_t)(r + D) * dy_stride, ring);
        else
            ring_put<V>(r + D - E < ne, rs, nxr + (size_t)(r + D - E) * x_stride, ndyr + (size_t)(r + D - E) * dy_stride,
                        ring);
#endif
    }
}

/* A backward tile of a lane: its first row t0 in the window, rows n, rows
 * of it and its halo in the window e, pointers at row t0, channel ch. */
struct lane_tile {
    int t0, n, e;
    const float *xr, *dyr;
    float *dxr;
};

/* Tile l of lane ty of group grp into *a; false past the lane's last tile. */
template <int W>
static ST_HD bool lane_tile_at(const conv_tiles &p, long grp, int ty, int l, int ch, const float *x, int x_stride,
                               const float *dy, int dy_stride, float *dx, int dx_stride, lane_tile *a) {
    const long tile = (grp * p.L + l) * ST_CONV_TY + ty;
    if (l >= p.L || tile >= p.tiles) return false;
    long win;
    tile_at(p, tile, &win, &a->t0, &a->n);
    a->e = p.K - a->t0 < a->n + W - 1 ? p.K - a->t0 : a->n + W - 1;
    const size_t row = (size_t)win * p.K + a->t0;
    a->xr = x + row * x_stride + ch, a->dyr = dy + row * dy_stride + ch, a->dxr = dx + row * dx_stride + ch;
    return true;
}

/* Lane ty of group grp, channels ch..ch+V-1 (< Ch): the backward of its
 * tiles (grp L + l) ST_CONV_TY + ty, l < L, dx written and the parameter
 * sums added into acc in row order. ring: the thread's ring on the device,
 * one stream of rows through the lane's tiles (unused on the host). */
template <int W, int V>
static ST_HD void backward_lane(const conv_tiles &p, long grp, int ty, int ch, const float *__restrict__ x,
                                int x_stride, const float (&wr)[V][W], const float (&br)[V], int silu,
                                const float *__restrict__ dy, int dy_stride, float *__restrict__ dx, int dx_stride,
                                double (&acc)[V][W + 1], float *ring = nullptr) {
    constexpr int E = ST_CONV_TILE + W - 1;
    lane_tile cur = {};
    bool more = lane_tile_at<W>(p, grp, ty, 0, ch, x, x_stride, dy, dy_stride, dx, dx_stride, &cur);
    for (int l = 0, base = 0; more; l++, base = (base + E) & (ST_CONV_RING - 1)) {
        lane_tile nxt = {}; /* only its rows' pointers and e live through the tile: it is found again after */
        const bool next = lane_tile_at<W>(p, grp, ty, l + 1, ch, x, x_stride, dy, dy_stride, dx, dx_stride, &nxt);
        const float *nxr = next ? nxt.xr : cur.xr, *ndyr = next ? nxt.dyr : cur.dyr;
        const int ne = next ? nxt.e : 0;
        if (cur.e == E)
            backward_tile<W, V, true>(cur.t0, cur.n, cur.e, cur.xr, x_stride, cur.dyr, dy_stride, cur.dxr, dx_stride,
                                      wr, br, silu, acc, ring, base, l > 0, nxr, ndyr, ne);
        else
            backward_tile<W, V, false>(cur.t0, cur.n, cur.e, cur.xr, x_stride, cur.dyr, dy_stride, cur.dxr, dx_stride,
                                       wr, br, silu, acc, ring, base, l > 0, nxr, ndyr, ne);
        more = lane_tile_at<W>(p, grp, ty, l + 1, ch, x, x_stride, dy, dy_stride, dx, dx_stride, &cur);
    }
}

/* Block (ST_CONV_CX channel groups, ST_CONV_TY tile lanes) over the groups
 * of tiles grp = blockIdx.y, + gridDim.y, ...; each group's sums, lanes
 * added in order, go to parts[grp][dw as [Ch, W], then db [Ch]] (none when
 * parts is NULL: no parameter gradient wanted). Shared memory: the rings
 * (ST_CONV_RING 2 V floats a thread: 32 KB at V = 2) and the lanes' sums
 * (10 KB at W = 4). */
template <int W, int V>
static __global__ void __launch_bounds__(ST_CONV_CX *ST_CONV_TY, V == 1 ? 3 : 2)
    conv_backward_tile_kernel(conv_tiles p, int Ch, const float *__restrict__ x, int x_stride,
                              const float *__restrict__ w, const float *__restrict__ b, int silu,
                              const float *__restrict__ dy, int dy_stride, float *__restrict__ dx, int dx_stride,
                              double *__restrict__ parts) {
    __shared__ double part[W + 1][ST_CONV_TY][ST_CONV_CX];
    __shared__ __align__(16) float rings[2 * ST_CONV_RING * RING_ROW(V)];
    float *ring = rings + (threadIdx.y * ST_CONV_CX + threadIdx.x) * V;
    const int ch = (blockIdx.x * ST_CONV_CX + threadIdx.x) * V;
    const bool live = ch < Ch; /* V divides Ch */
    float wr[V][W], br[V];
    load_params<W, V>(ch, Ch, w, b, wr, br);
    for (long grp = blockIdx.y; grp < p.ngroups; grp += gridDim.y) {
        double acc[V][W + 1] = {};
        if (live)
            backward_lane<W, V>(p, grp, threadIdx.y, ch, x, x_stride, wr, br, silu, dy, dy_stride, dx, dx_stride, acc,
                                ring);
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

/* The current device's SM count (0 on failure: then the largest tile). */
static int conv_sms(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    return v;
}

/* The forward's rows a thread: ST_CONV_FWD_TILE, halved (down to 2) while
 * the grid would be less than a wave of 3 blocks an SM (a thread's rows
 * are its serial work: at few rows, more and shorter threads; at 128
 * windows of the default preset, 768 blocks of 4 rows rather than 384 of
 * 8, ~1.9 waves rather than ~1.5). The bits do not depend on it (a value's
 * taps are one FMA chain whatever the tiling). */
static int forward_tile_rows(int Bsz, int K, int groups) {
    const long want = 3L * conv_sms();
    int T = ST_CONV_FWD_TILE;
    while (T > 2 && (long)blocks_for(tiles_of(Bsz, K, T).tiles * groups, ST_CONV_THREADS) < want)
        T /= 2;
    return T;
}

template <int W, int V>
static void forward_launch(int Bsz, int K, int Ch, const float *x, int x_stride, const float *w, const float *b,
                           int silu, float *y, int y_stride, cudaStream_t st) {
    const int T = forward_tile_rows(Bsz, K, Ch / V);
    const conv_tiles p = tiles_of(Bsz, K, T);
    const unsigned grid = blocks_for(p.tiles * (Ch / V), ST_CONV_THREADS);
    if (T == 8)
        conv_forward_tile_kernel<W, V, 8>
            <<<grid, ST_CONV_THREADS, 0, st>>>(p, Ch, x, x_stride, w, b, silu, y, y_stride);
    else if (T == 4)
        conv_forward_tile_kernel<W, V, 4>
            <<<grid, ST_CONV_THREADS, 0, st>>>(p, Ch, x, x_stride, w, b, silu, y, y_stride);
    else
        conv_forward_tile_kernel<W, V, 2>
            <<<grid, ST_CONV_THREADS, 0, st>>>(p, Ch, x, x_stride, w, b, silu, y, y_stride);
}

template <int W>
static void forward_tiles(int Bsz, int K, int Ch, const float *x, int x_stride, const float *w, const float *b,
                          int silu, float *y, int y_stride, cudaStream_t st) {
    if (Ch % 4 == 0 && vec_ok(x, x_stride, 4) && vec_ok(y, y_stride, 4))
        forward_launch<W, 4>(Bsz, K, Ch, x, x_stride, w, b, silu, y, y_stride, st);
    else
        forward_launch<W, 1>(Bsz, K, Ch, x, x_stride, w, b, silu, y, y_stride, st);
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
    switch (tiled(W) ? W : 0) {
    case 1: forward_tiles<1>(Bsz, K, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    case 2: forward_tiles<2>(Bsz, K, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    case 3: forward_tiles<3>(Bsz, K, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
    case 4: forward_tiles<4>(Bsz, K, Ch, x, x_stride, w, b, silu, y, y_stride, st); break;
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
