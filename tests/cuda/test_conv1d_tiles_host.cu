/* test_conv1d_tiles_host.cu: the tiling of the GPU causal conv
 * (model/conv1d.cu, W <= 4) checked on the CPU, so that it runs where there
 * is nvcc but no GPU (CI). conv1d.cu's tile functions are
 * __host__ __device__: this program includes the file and runs them thread
 * by thread, the backward block's lane sums and the finish in the kernels'
 * orders, and compares with a float64 evaluation of the DESIGN formulas:
 *  - y within 1e-5 relative, dx, dw and db (added to) within 1e-4, SiLU on
 *    and off, W = 1..4, windows that are and are not multiples of the
 *    16-row tile (K = 16, 17, 18, 19, 37, 50, 64, 150), shorter than it
 *    (K = 3, 5: several tiles a lane), many groups of tiles;
 *  - every dx and y of the slice written (outputs start as NaN poison),
 *    nothing outside it (its poison bits survive);
 *  - the vector (V = 4 forward, 2 backward) and scalar paths give the same
 *    bits.
 * What it cannot see: the device compiler (FMA contraction, unrolling), the
 * __syncthreads reduction itself and the launch shapes; the GPU test
 * (test_cuda_conv1d) does. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "model/conv1d.cu"

/* The library symbols conv1d.cu refers to (only its wide-W path calls them). */
extern "C" int st_fail(const char *file, int line, int code, const char *fmt, ...) {
    (void)file, (void)line, (void)fmt;
    return code;
}
extern "C" int st_cuda_rowsplit_plan(int rows, int cols, void *stream, st_rowsplit *plan) {
    (void)rows, (void)cols, (void)stream;
    plan->parts = NULL, plan->splits = 1;
    return ST_OK;
}
extern "C" int st_cuda_rowsplit_finish(int cols, const double *parts, int ld, int splits, float *sum, void *stream) {
    (void)cols, (void)parts, (void)ld, (void)splits, (void)sum, (void)stream;
    return ST_OK;
}

static int n_pass, n_fail;
static void check(bool ok, const char *name, const char *what, double v) {
    if (ok) {
        n_pass++;
        return;
    }
    n_fail++;
    fprintf(stderr, "FAIL %s: %s (%.3e)\n", name, what, v);
}

static uint64_t rng = 88172645463325252ull;
static float uniform(void) { /* xorshift64, [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}
static float poison(void) {
    uint32_t u = 0xFFFFFFFFu;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static bool is_poison(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u == 0xFFFFFFFFu;
}

/* conv_forward_tile_kernel: every thread of the grid. */
template <int W, int V>
static void forward(int Bsz, int K, int Ch, const float *x, int xs, const float *w, const float *b, int silu, float *y,
                    int ys) {
    const conv_tiles p = tiles_of(Bsz, K);
    for (long idx = 0; idx < p.tiles * (Ch / V); idx++)
        forward_thread<W, V>(p, Ch, idx, x, xs, w, b, silu, y, ys);
}

/* conv_backward_tile_kernel (lanes added in order per group) and
 * conv_params_finish_kernel (groups l, l + ST_ROW_LANES, ... per lane, then
 * the lanes in order). */
template <int W, int V>
static void backward(int Bsz, int K, int Ch, const float *x, int xs, const float *w, const float *b, int silu,
                     const float *dy, int dys, float *dx, int dxs, float *dw, float *db) {
    const conv_tiles p = tiles_of(Bsz, K);
    const int cols = Ch * (W + 1);
    std::vector<double> parts((size_t)p.ngroups * cols, NAN);
    for (long grp = 0; grp < p.ngroups; grp++)
        for (int ch = 0; ch < Ch; ch += V) {
            float wr[V][W], br[V];
            load_params<W, V>(ch, Ch, w, b, wr, br);
            double acc[ST_CONV_TY][V][W + 1] = {};
            for (int ty = 0; ty < ST_CONV_TY; ty++)
                backward_lane<W, V>(p, grp, ty, ch, x, xs, wr, br, silu, dy, dys, dx, dxs, acc[ty]);
            for (int v = 0; v < V; v++)
                for (int i = 0; i <= W; i++) {
                    double t = 0;
                    for (int l = 0; l < ST_CONV_TY; l++)
                        t += acc[l][v][i];
                    size_t c = i < W ? (size_t)(ch + v) * W + i : (size_t)Ch * W + ch + v;
                    parts[(size_t)grp * cols + c] = t;
                }
        }
    for (int c = 0; c < cols; c++) {
        double lane[ST_ROW_LANES] = {}, t = 0;
        for (int l = 0; l < ST_ROW_LANES; l++)
            for (long g = l; g < p.ngroups; g += ST_ROW_LANES)
                lane[l] += parts[(size_t)g * cols + c];
        for (int l = 0; l < ST_ROW_LANES; l++)
            t += lane[l];
        if (c < Ch * W)
            dw[c] += (float)t;
        else
            db[c - Ch * W] += (float)t;
    }
}

/* x and dx: Ch columns at off of rows xs wide; y stride ys, dy stride dys. */
typedef struct {
    const char *name;
    int Bsz, K, Ch, silu, xs, off, ys, dys;
} tile_case;

typedef struct {
    std::vector<float> y, dx, dw, db;
} tile_out;

template <int W, int V, int VB> static void run(const tile_case *c, uint64_t seed, tile_out *o) {
    const long R = (long)c->Bsz * c->K;
    const int Ch = c->Ch;
    rng = seed;
    std::vector<float> xb(R * c->xs, poison()), w(Ch * W), b(Ch), dyb(R * c->dys, poison());
    for (long r = 0; r < R; r++)
        for (int ch = 0; ch < Ch; ch++)
            xb[r * c->xs + c->off + ch] = uniform(), dyb[r * c->dys + ch] = uniform();
    for (float &v : w)
        v = 0.5f * uniform();
    for (float &v : b)
        v = 0.3f * uniform();
    o->y.assign(R * c->ys, poison()), o->dx.assign(R * c->xs, poison());
    o->dw.assign(Ch * W, 0.25f), o->db.assign(Ch, -0.5f);
    const float *x = xb.data() + c->off;
    forward<W, V>(c->Bsz, c->K, Ch, x, c->xs, w.data(), b.data(), c->silu, o->y.data(), c->ys);
    backward<W, VB>(c->Bsz, c->K, Ch, x, c->xs, w.data(), b.data(), c->silu, dyb.data(), c->dys, o->dx.data() + c->off,
                    c->xs, o->dw.data(), o->db.data());

    /* float64: pre, y, g, then dx and the parameter sums */
    std::vector<double> g(R * Ch), dw(Ch * W, 0), db(Ch, 0);
    double ey = 0, ny = 0, edx = 0, ndx = 0, e, n;
    for (long r = 0; r < R; r++)
        for (int ch = 0; ch < Ch; ch++) {
            int t = (int)(r % c->K);
            double pre = b[ch];
            for (int i = 0; i < W; i++)
                if (t - W + 1 + i >= 0) pre += (double)w[ch * W + i] * x[(r - W + 1 + i) * c->xs + ch];
            double s = 1 / (1 + exp(-pre)), yr = c->silu ? pre * s : pre, yg = o->y[r * c->ys + ch];
            ey += yg == yg ? (yg - yr) * (yg - yr) : INFINITY, ny += yr * yr;
            g[r * Ch + ch] = dyb[r * c->dys + ch] * (c->silu ? s * (1 + pre * (1 - s)) : 1.0);
        }
    for (long r = 0; r < R; r++)
        for (int ch = 0; ch < Ch; ch++) {
            int t = (int)(r % c->K);
            double a = 0, d = o->dx[r * c->xs + c->off + ch];
            for (int i = 0; i < W; i++)
                if (t + W - 1 - i < c->K) a += w[ch * W + i] * g[(r + W - 1 - i) * Ch + ch];
            edx += d == d ? (d - a) * (d - a) : INFINITY, ndx += a * a;
            for (int i = 0; i < W; i++)
                if (t - W + 1 + i >= 0) dw[ch * W + i] += g[r * Ch + ch] * x[(r - W + 1 + i) * c->xs + ch];
            db[ch] += g[r * Ch + ch];
        }
    double err[4] = {sqrt(ey / ny), sqrt(edx / ndx), 0, 0};
    e = n = 0;
    for (int k = 0; k < Ch * W; k++) {
        double d = o->dw[k] - 0.25f - dw[k];
        e += d == d ? d * d : INFINITY, n += dw[k] * dw[k];
    }
    err[2] = sqrt(e / n);
    e = n = 0;
    for (int k = 0; k < Ch; k++) {
        double d = o->db[k] + 0.5f - db[k];
        e += d == d ? d * d : INFINITY, n += db[k] * db[k];
    }
    err[3] = sqrt(e / n);
    long gaps = 0;
    for (long r = 0; r < R; r++) {
        for (int ch = Ch; ch < c->ys; ch++)
            gaps += !is_poison(o->y[r * c->ys + ch]);
        for (int col = 0; col < c->xs; col++)
            gaps += (col < c->off || col >= c->off + Ch) && !is_poison(o->dx[r * c->xs + col]);
    }
    printf("  %-26s W %d V %d/%d: y %.1e dx %.1e dw %.1e db %.1e\n", c->name, W, V, VB, err[0], err[1], err[2], err[3]);
    check(err[0] <= 1e-5, c->name, "y rel err", err[0]);
    check(err[1] <= 1e-4, c->name, "dx rel err", err[1]);
    check(err[2] <= 1e-4, c->name, "dw rel err", err[2]);
    check(err[3] <= 1e-4, c->name, "db rel err", err[3]);
    check(gaps == 0, c->name, "values outside the slices written", (double)gaps);
}

/* The case on both paths (V-aligned layout), and their bits compared. */
template <int W> static void both(const tile_case *c, uint64_t seed) {
    tile_out s, v;
    run<W, 1, 1>(c, seed, &s);
    run<W, 4, 2>(c, seed, &v);
    /* bits (the poison in the gaps is a NaN, unequal to itself) */
    bool same = !memcmp(s.y.data(), v.y.data(), sizeof(float) * s.y.size()) &&
                !memcmp(s.dx.data(), v.dx.data(), sizeof(float) * s.dx.size()) &&
                !memcmp(s.dw.data(), v.dw.data(), sizeof(float) * s.dw.size()) &&
                !memcmp(s.db.data(), v.db.data(), sizeof(float) * s.db.size());
    check(same, c->name, "vector and scalar paths differ", 0);
}

int main(void) {
    /* strides and offsets multiples of 4, so both paths can run */
    const tile_case k64 = {"default xBC (K=64)", 3, 64, 384, 1, 648, 256, 384, 384};
    const tile_case k50 = {"odd xBC (K=50)", 3, 50, 212, 1, 412, 192, 216, 212};
    const tile_case k50p = {"odd xBC plain (K=50)", 2, 50, 212, 0, 412, 192, 212, 216};
    const tile_case k150 = {"K=150", 2, 150, 12, 1, 20, 4, 16, 12};
    const tile_case k16 = {"K=16", 3, 16, 8, 1, 12, 4, 8, 8}, k17 = {"K=17", 3, 17, 8, 1, 12, 4, 8, 8};
    const tile_case k18 = {"K=18 (halo cut)", 4, 18, 8, 1, 12, 0, 12, 8}, k19 = {"K=19", 3, 19, 8, 1, 12, 4, 8, 8};
    const tile_case k3 = {"W > K (K=3)", 5, 3, 12, 1, 16, 4, 12, 12};
    const tile_case k37 = {"K=37", 3, 37, 8, 1, 12, 4, 8, 8}, k33 = {"K=33", 3, 33, 8, 1, 12, 4, 8, 8};
    const tile_case k21 = {"K=21", 3, 21, 8, 0, 12, 4, 8, 8};
    const tile_case many = {"many groups (K=64)", 70, 64, 32, 1, 40, 4, 32, 32};
    const tile_case k5 = {"many short windows (K=5)", 300, 5, 4, 1, 8, 4, 4, 4};
    both<4>(&k64, 1), both<4>(&k50, 2), both<4>(&k50p, 3), both<4>(&k150, 4), both<4>(&k16, 5);
    both<4>(&k17, 6), both<4>(&k18, 7), both<4>(&k19, 8), both<4>(&k3, 9), both<3>(&k37, 10);
    both<2>(&k33, 11), both<1>(&k21, 12), both<4>(&many, 13), both<4>(&k5, 14);
    /* an odd stride and slice offset: the scalar path only */
    const tile_case odd = {"odd strides", 3, 50, 13, 1, 23, 5, 17, 15};
    tile_out o;
    run<4, 1, 1>(&odd, 15, &o);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 && n_pass > 0 ? 0 : 1;
}
