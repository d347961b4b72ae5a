/* ssd_scan_quad.cu: the scan forward for windows of at most 64 rows in bf16
 * matrix-product mode as ONE chunk in the quadratic (attention-like) form,
 * with no state at all: a block of 8 warps a (window b, group g, slice of
 * the group's heads), TF32 mma.sync m16n8k8 with float accumulators
 * (cuda/ssd_scan_quad_fwd.cuh). For the window's K rows:
 *     G   = C B^T                 [K x K] over N, lower 16 x 16 tiles, once a block
 *     M_h = G o L_h o dt_h        L_h[t, s] = exp(cum_h[t] - cum_h[s]), s <= t
 *     Y_h = D_h X_h + M_h X_h     (M X over s up to the row tile's diagonal)
 * for each head h of the slice, with cum_h[t] = sum_{i<=t} dt[i, h] A[h] in
 * double (a warp's shuffle scan, qf_prefix: tc_decay_prefix's sums; it is
 * non-increasing, so every exponent is <= 0 and none overflows), the
 * difference rounded to float and its expf as the other TC kernels take
 * theirs (decay_tile's expression). M is never stored: the warp that
 * multiplies a row tile of M forms its elements from G, cum and dt in the
 * MMA's A fragments. Within TF32 rounding of the pair and heads kernels,
 * not their bits (other sums).
 * Work (bench/notes-quadfwd.md): a task is one head's row tiles a and
 * Kt-1-a (Kt = K/16; 2(a+1) + 2(Kt-a) k-steps of 8: every pair the same
 * length at even Kt) over a slab of 8 NT columns of P; a head's tasks are
 * its row pairs x slabs (tph); R = 8/tph heads make a round, one task a
 * warp. NT (4, 2 or 1, the kernel's template argument) is the widest slab
 * whose tasks still fill the 8 warps: narrower slabs repeat M's elements
 * (their exps) once a slab.
 * Shared memory (floats; quad_layout): XA, X of a round's heads [K][R P +
 * 4] (head j's columns at j P); XB: B, C [K][N + 8] (phases 0 and 1), then
 * the next round's X; G [K][K + 8]; cum [hs][K] doubles; dt [hs][K]. 95 KB
 * at the default shape (K = 64, P = 32, N = 64, 8 heads: 2 blocks an SM).
 * Phases:
 *     0. B, C and round 0's X by cp.async (two groups); meanwhile warp w
 *        scans heads w, w + 8, ... (their dt from global memory) into cum
 *        and dt; B and C waited for, a barrier;
 *     1. G's lower tiles, a warp a tile; round 0's X waited for, a barrier
 *        (then XB is free: round 1's X into it);
 *     per round r: its tasks (qf_y_tile twice), y stored from the
 *        accumulators; then (not after the last) round r+1's X waited for,
 *        a barrier, round r+2's X into the buffer round r read.
 * 2 + rounds - 1 barriers a block (3 at the default shape); each buffer is
 * written only after the barrier that ends its last read.
 * Head slices (st_cuda_ssd_set_scan_tc_quad_split, quad_choose): a batch
 * of few (window, group) pairs runs as several blocks each, of hs heads,
 * each staging B, C and forming G itself; the host picks hs from the batch,
 * the SM count and each plan's blocks an SM (quad_cost), or the switch
 * forces a slice count. The same bits whatever the slices (a head's sums
 * do not depend on them).
 * Taken (scan_quad_takes) in the TC forward's mode (bf16, the scan and TC
 * switches on, staging on) where K <= 64 and K, P, N are multiples of 16
 * (whole tiles, no pads), the unsplit plan's shared memory fits the
 * device's opt-in limit and st_cuda_ssd_set_scan_tc_quad is on; before the
 * pair kernel. */
#include <cuda_pipeline.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/ssd_cuda.h"
}
#include "cuda/ssd_scan_quad_fwd.cuh"
#include "cuda/ssd_scan_tc.cuh"
#include "cuda/ssd_scan_tc_tile.cuh"

/* The most rows a window may have (4 row tiles). */
#define QUAD_MAX_K 64

/* A launch's division of the work (quad_plan_of). */
struct quad_plan {
    int hs;     /* heads a block (the last slice of a group may have fewer) */
    int slices; /* blocks a (window, group): ceil(HG / hs) */
    int R;      /* heads a round */
    int tph;    /* tasks a head: row pairs x slabs */
    int slabs;  /* slabs of 8 nt columns */
    int nt;     /* n8 tiles a task (the kernel's template argument) */
};

/* Row strides and the float offsets of the buffers. */
struct quad_layout {
    int ldn, lm, lx;
    int XA, XB, G, cum, dt, total; /* floats; cum: hs K doubles from there */
};

__host__ __device__ static inline quad_layout quad_layout_of(int K, int P, int N, int hs, int R) {
    quad_layout l;
    l.ldn = N + 8, l.lm = K + 8, l.lx = R * P + 4;
    const int xr = K * l.lx, bc = 2 * K * l.ldn, rounds = (hs + R - 1) / R, xb = rounds > 1 && xr > bc ? xr : bc;
    l.XA = 0, l.XB = xr, l.G = l.XB + xb; /* each size a multiple of 16 floats (K is): 64-byte aligned */
    l.cum = l.G + K * l.lm;
    l.dt = l.cum + 2 * hs * K;
    l.total = l.dt + hs * K;
    return l;
}

static size_t quad_plan_bytes(int K, int P, int N, const quad_plan &p) {
    return sizeof(float) * (size_t)quad_layout_of(K, P, N, p.hs, p.R).total;
}

/* Tasks of a round of hs heads a block with slabs of 8 nt columns. */
static int quad_round_tasks(int rows, int p8, int nt, int hs) {
    const int tph = rows * (p8 / nt), R = TC_WARPS / tph > 1 ? TC_WARPS / tph : 1;
    return (R < hs ? R : hs) * tph;
}

/* The plan of hs heads a block (HG a group): the widest slab (nt of 4, 2,
 * 1 dividing P / 8) whose round's tasks fill the 8 warps, else the one
 * that fills most (the widest of those), R heads a round. */
static quad_plan quad_plan_of(int K, int P, int HG, int hs) {
    quad_plan p;
    const int rows = (K / 16 + 1) / 2, p8 = P / 8;
    p.hs = hs, p.slices = (HG + hs - 1) / hs;
    p.nt = 1;
    for (int nt = 4, most = 0; nt >= 1; nt /= 2) {
        if (p8 % nt) continue;
        const int tasks = quad_round_tasks(rows, p8, nt, hs);
        if (tasks > most) p.nt = nt, most = tasks;
        if (tasks >= TC_WARPS) break;
    }
    p.slabs = p8 / p.nt, p.tph = rows * p.slabs;
    p.R = TC_WARPS / p.tph > 1 ? TC_WARPS / p.tph : 1;
    if (p.R > hs) p.R = hs;
    return p;
}

/* 2 blocks an SM at nt = 4 (its shared memory at the default shape), 3
 * for the narrower slabs of the split plans (85 registers a thread). */
template <int NT>
static __global__ void __launch_bounds__(SCAN_THREADS, NT == 4 ? 2 : 3) scan_quad_kernel(scan_args a, quad_plan p) {
    extern __shared__ __align__(128) float sm_q[];
    const int K = a.K, P = a.P, N = a.N, HG = a.H / a.G, Kt = K / 16;
    const quad_layout l = quad_layout_of(K, P, N, p.hs, p.R);
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int slice = (int)(blockIdx.x % (unsigned)p.slices), bg = (int)(blockIdx.x / (unsigned)p.slices);
    const int b = bg / a.G, g = bg % a.G, hb = slice * p.hs, nh = min(p.hs, HG - hb), h0 = g * HG + hb;
    const size_t row0 = (size_t)b * K;
    const int vec_b = (a.B_stride & 3) == 0 && aligned16(a.Bm), vec_c = (a.C_stride & 3) == 0 && aligned16(a.Cm);
    const int vec_x = (a.x_stride & 3) == 0 && aligned16(a.x);
    const int vec2 = (a.y_stride & 1) == 0 && ((uintptr_t)a.y & 7) == 0;
    double *cum = (double *)(sm_q + l.cum);
    float *dts = sm_q + l.dt;
    const float *xw = a.x + row0 * a.x_stride + (size_t)h0 * P; /* the slice's first head, row 0 */
    /* 0. B, C (one group) and round 0's X (a second); the heads' prefixes meanwhile */
    qf_stage(a.Bm + row0 * a.B_stride + (size_t)g * N, a.B_stride, K, N, sm_q + l.XB, l.ldn, vec_b);
    qf_stage(a.Cm + row0 * a.C_stride + (size_t)g * N, a.C_stride, K, N, sm_q + l.XB + K * l.ldn, l.ldn, vec_c);
    __pipeline_commit();
    qf_stage(xw, a.x_stride, K, min(p.R, nh) * P, sm_q + l.XA, l.lx, vec_x);
    __pipeline_commit();
    for (int i = warp; i < nh; i += TC_WARPS)
        qf_prefix(a.dt + row0 * a.dt_stride + h0 + i, a.dt_stride, K, (double)a.A[h0 + i], cum + i * K, dts + i * K,
                  lane);
    __pipeline_wait_prior(1);
    __syncthreads();
    /* 1. G's lower tiles */
    for (int task = warp; task < Kt * (Kt + 1) / 2; task += TC_WARPS) {
        int ti, tj;
        tri_index(task, ti, tj);
        qf_g_tile(sm_q + l.XB + K * l.ldn, sm_q + l.XB, l.ldn, N, sm_q + l.G, l.lm, ti, tj, lane);
    }
    __pipeline_wait_prior(0);
    __syncthreads();
    const int rounds = (nh + p.R - 1) / p.R;
    if (rounds > 1) qf_stage(xw + p.R * P, a.x_stride, K, min(p.R, nh - p.R) * P, sm_q + l.XB, l.lx, vec_x);
    __pipeline_commit();
    const int cols = 8 * NT;
#pragma unroll 1
    for (int r = 0;; r++) {
        const int xo = r & 1 ? l.XB : l.XA, nr = min(p.R, nh - r * p.R);
#pragma unroll 1
        for (int task = warp; task < nr * p.tph; task += TC_WARPS) {
            const int hr = task / p.tph, rest = task - hr * p.tph, rp = rest / p.slabs, slab = rest - rp * p.slabs;
            const int i = r * p.R + hr, h = h0 + i;
            const float D = a.Dskip ? a.Dskip[h] : 0.0f;
            const float *X = sm_q + xo + hr * P + slab * cols;
            float *y = a.y + row0 * a.y_stride + (size_t)h * P + slab * cols;
            const int tb = Kt - 1 - rp; /* the longer tile first */
            qf_y_tile<NT>(X, l.lx, sm_q + l.G, l.lm, cum + i * K, dts + i * K, tb, D, y, a.y_stride, vec2, lane);
            if (rp != tb)
                qf_y_tile<NT>(X, l.lx, sm_q + l.G, l.lm, cum + i * K, dts + i * K, rp, D, y, a.y_stride, vec2, lane);
        }
        if (r + 1 >= rounds) break;
        __pipeline_wait_prior(0);
        __syncthreads();
        if (r + 2 < rounds) /* into the buffer round r read */
            qf_stage(xw + (size_t)(r + 2) * p.R * P, a.x_stride, K, min(p.R, nh - (r + 2) * p.R) * P, sm_q + xo, l.lx,
                     vec_x);
        __pipeline_commit();
    }
}

static int quad_on = 1, quad_split = 0;
extern "C" void st_cuda_ssd_set_scan_tc_quad(int on) { quad_on = on != 0; }
extern "C" void st_cuda_ssd_set_scan_tc_quad_split(int slices) { quad_split = slices < 0 ? 0 : slices; }

int scan_quad_takes(int K, int P, int N, int HG, size_t smem_optin) {
    return quad_on && K > 0 && K <= QUAD_MAX_K && K % 16 == 0 && P % 16 == 0 && N % 16 == 0 && HG > 0 &&
           quad_plan_bytes(K, P, N, quad_plan_of(K, P, HG, HG)) <= smem_optin;
}

typedef void (*quad_kernel_fn)(scan_args, quad_plan);

static quad_kernel_fn quad_kernel_of(int nt) {
    return nt == 4 ? scan_quad_kernel<4> : nt == 2 ? scan_quad_kernel<2> : scan_quad_kernel<1>;
}

/* Lets the plan's kernel take `bytes` of dynamic shared memory. */
static int quad_allow(int nt, size_t bytes) {
    if (bytes > 49152)
        ST_CUDA_TRY(cudaFuncSetAttribute(quad_kernel_of(nt), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return ST_OK;
}

/* Blocks an SM of the plan's kernel with `bytes` (0 on failure); cached
 * by (device, nt, bytes): the launch asks once a shape. */
static int quad_blocks_per_sm(int dev, int nt, size_t bytes) {
    enum { SLOTS = 16 };
    static struct {
        int dev, nt, n;
        size_t bytes;
    } cache[SLOTS];
    static int used = 0;
    for (int i = 0; i < used; i++)
        if (cache[i].dev == dev && cache[i].nt == nt && cache[i].bytes == bytes) return cache[i].n;
    int n = 0;
    if (quad_allow(nt, bytes) != ST_OK ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, quad_kernel_of(nt), SCAN_THREADS, bytes) != cudaSuccess)
        return 0;
    const int at = used < SLOTS ? used++ : (int)(bytes % SLOTS);
    cache[at].dev = dev, cache[at].nt = nt, cache[at].bytes = bytes, cache[at].n = n;
    return n;
}

/* A plan's time in units of about 4.5 ns on the H200 (fitted to forced
 * slice counts over 16 to 4,096 windows at the default shape:
 * bench/notes-quadfwd.md). A block's issue time I = its fixed work (B, C
 * staged, the prefixes, G: Kt (Kt + 1) N / 8 n8 steps) + hs heads of Kt
 * (Kt + 1) k-steps (QUAD_M_UNITS for the M elements and P / 8 MMAs each);
 * alone its life L = I + QUAD_LATENCY_UNITS (its global round trips) +
 * QUAD_ROUND_UNITS a later round (its X's wait). With nb blocks on the
 * busiest SM: max(L + (nb - 1) I / 2, nb I) where 2 fit an SM (a second
 * block hides half its issue time in the first's latency, more are bound
 * by issue), nb L where one. */
#define QUAD_M_UNITS 4
#define QUAD_BLOCK_UNITS 484
#define QUAD_LATENCY_UNITS 844
#define QUAD_ROUND_UNITS 150
static double quad_cost(const quad_plan &p, int K, int P, int N, size_t pairs, int sms, int per_sm) {
    const int Kt = K / 16, rounds = (p.hs + p.R - 1) / p.R;
    const double steps = (double)Kt * (Kt + 1);
    const double I = QUAD_BLOCK_UNITS + steps * (N / 8) + p.hs * steps * (QUAD_M_UNITS + P / 8);
    const double L = I + QUAD_LATENCY_UNITS + (rounds - 1) * QUAD_ROUND_UNITS;
    const size_t blocks = pairs * (size_t)p.slices;
    const double nb = (double)((blocks + (size_t)sms - 1) / (size_t)sms);
    if (per_sm < 2) return nb * L;
    const double lat = L + (nb - 1) * I / 2, issue = nb * I;
    return lat > issue ? lat : issue;
}

/* The plan of a launch over Bsz windows: the forced slice count, or the
 * head count a block (HG, HG/2, HG/4, ..., 1, rounded up) of least cost. */
static quad_plan quad_choose(int Bsz, int K, int P, int N, int G, int HG) {
    if (quad_split >= 1) {
        const int s = quad_split < HG ? quad_split : HG;
        return quad_plan_of(K, P, HG, (HG + s - 1) / s);
    }
    quad_plan best = quad_plan_of(K, P, HG, HG);
    int dev = 0;
    const int sms = tc_sms();
    if (sms <= 0 || cudaGetDevice(&dev) != cudaSuccess) return best;
    const size_t pairs = (size_t)Bsz * (size_t)G;
    if (pairs >= 2 * (size_t)sms) return best; /* a full wave of 2 blocks an SM without a split */
    double best_cost = 0;
    for (int d = 1, last = 0; d <= 2 * HG; d *= 2) {
        const int hs = (HG + d - 1) / d;
        if (hs == last) continue;
        last = hs;
        const quad_plan p = quad_plan_of(K, P, HG, hs);
        const int per_sm = quad_blocks_per_sm(dev, p.nt, quad_plan_bytes(K, P, N, p));
        if (per_sm <= 0) continue;
        const double c = quad_cost(p, K, P, N, pairs, sms, per_sm);
        if (best_cost == 0 || c < best_cost) best = p, best_cost = c;
    }
    return best;
}

extern "C" int st_cuda_ssd_forward_scan_tc_quad_slices(int Bsz, int K, int H, int P, int G, int N, int Q) {
    if (!st_cuda_ssd_forward_is_scan_tc_quad(Bsz, K, H, P, G, N, Q)) return 0;
    return quad_choose(Bsz, K, P, N, G, H / G).slices;
}

int scan_quad_launch(const scan_args &a, int Bsz, cudaStream_t st) {
    const int HG = a.H / a.G;
    const quad_plan p = quad_choose(Bsz, a.K, a.P, a.N, a.G, HG);
    const size_t bytes = quad_plan_bytes(a.K, a.P, a.N, p);
    ST_TRY(quad_allow(p.nt, bytes));
    const unsigned blocks = (unsigned)((size_t)Bsz * (size_t)a.G * (size_t)p.slices);
    quad_kernel_of(p.nt)<<<blocks, SCAN_THREADS, bytes, st>>>(a, p);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
