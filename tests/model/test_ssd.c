/* test_ssd.c: the Mamba2 SSD scan (model/ssd.h) in float64.
 *
 * 1. chunked forward == sequential forward over a grid of chunk lengths Q and
 *    window lengths K (K not a multiple of Q, Q > K), G = 1 and G = 2;
 * 2. chunked backward == sequential backward on the same grid, each of dx,
 *    ddt, dA, dB, dC, dD; dA and dD accumulate;
 * 3. central-difference gradient checks of the chunked (and sequential) op;
 * 4. strides: x, B, C inside one xBC row, dx, dB, dC inside one dxBC row,
 *    every row buffer padded with NaN: bit-identical to contiguous buffers,
 *    padding untouched, no NaN in valid outputs; runs are repeatable;
 * 5. a long window with strong decay stays finite and still matches;
 * 6. the last-row op (st_ssd_last_row_*) against the sequential recurrence's
 *    row K-1 (forward) and its backward with dy nonzero at the last rows
 *    only (every gradient), x, B, C in one padded xBC row. */
#define ST_REAL_BITS 64
#include "model/ssd.h"

#include "check/gradcheck.h"
#include "core/philox.h"
#include "test.h"

/* One problem: contiguous inputs of Bsz windows of K rows. */
typedef struct {
    int Bsz, K, H, P, G, N;
    double *x, *dt, *A, *B, *C, *D, *dy;
} problem;

/* Outputs of a backward (contiguous). */
typedef struct {
    double *dx, *ddt, *dA, *dB, *dC, *dD;
} grads;

static int rows_of(const problem *pb) { return pb->Bsz * pb->K; }

/* dt = u * e^v with u log-uniform in [1e-3, 1e-1] (the Mamba2 dt init) and
 * v ~ U[0, 1), so decays span gentle to strong; A = -exp(U[0, log 16]). */
static problem make_problem(int Bsz, int K, int H, int P, int G, int N, uint64_t seed) {
    problem pb = {Bsz, K, H, P, G, N, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    long R = (long)Bsz * K;
    pb.x = malloc(sizeof(double) * R * H * P);
    pb.dy = malloc(sizeof(double) * R * H * P);
    pb.B = malloc(sizeof(double) * R * G * N);
    pb.C = malloc(sizeof(double) * R * G * N);
    pb.dt = malloc(sizeof(double) * R * H);
    pb.A = malloc(sizeof(double) * H);
    pb.D = malloc(sizeof(double) * H);
    st_gc_randn(pb.x, R * H * P, 1.0, seed, 1);
    st_gc_randn(pb.dy, R * H * P, 1.0, seed, 2);
    st_gc_randn(pb.B, R * G * N, 1.0, seed, 3);
    st_gc_randn(pb.C, R * G * N, 1.0, seed, 4);
    st_gc_randn(pb.D, H, 1.0, seed, 5);
    st_rng rng = st_rng_make(seed, ST_STREAM_TEST);
    for (long i = 0; i < R * H; i++) {
        double u = exp(log(1e-3) + (log(1e-1) - log(1e-3)) * st_rng_uniform(&rng));
        pb.dt[i] = u * exp(st_rng_uniform(&rng));
    }
    for (int h = 0; h < H; h++)
        pb.A[h] = -exp(log(16.0) * st_rng_uniform(&rng));
    return pb;
}

static void free_problem(problem *pb) {
    free(pb->x), free(pb->dy), free(pb->B), free(pb->C), free(pb->dt), free(pb->A), free(pb->D);
}

static grads make_grads(const problem *pb) {
    long R = rows_of(pb);
    grads g;
    g.dx = malloc(sizeof(double) * R * pb->H * pb->P);
    g.ddt = malloc(sizeof(double) * R * pb->H);
    g.dB = malloc(sizeof(double) * R * pb->G * pb->N);
    g.dC = malloc(sizeof(double) * R * pb->G * pb->N);
    g.dA = calloc((size_t)pb->H, sizeof(double));
    g.dD = calloc((size_t)pb->H, sizeof(double));
    return g;
}

static void free_grads(grads *g) { free(g->dx), free(g->ddt), free(g->dB), free(g->dC), free(g->dA), free(g->dD); }

/* Work filled with NaN, so that reading a slot before writing it shows. */
static double *make_work(const problem *pb, int Q) {
    size_t n = st_ssd_work_count(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q);
    double *w = malloc(sizeof(double) * (n + 1));
    for (size_t i = 0; i < n; i++)
        w[i] = NAN;
    return w;
}

/* Forward on contiguous buffers; Q = 0 runs the sequential oracle. */
static void forward(const problem *pb, int Q, double *y, double *work) {
    int HP = pb->H * pb->P, GN = pb->G * pb->N;
    if (Q == 0)
        st_ssd_forward_sequential(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, pb->x, HP, pb->dt, pb->H, pb->A, pb->B,
                                  GN, pb->C, GN, pb->D, y, HP);
    else
        st_ssd_forward_chunked(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q, pb->x, HP, pb->dt, pb->H, pb->A, pb->B,
                               GN, pb->C, GN, pb->D, y, HP, work);
}

static void backward(const problem *pb, int Q, const double *dy, grads *g, double *work) {
    int HP = pb->H * pb->P, GN = pb->G * pb->N;
    if (Q == 0)
        st_ssd_backward_sequential(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, pb->x, HP, pb->dt, pb->H, pb->A, pb->B,
                                   GN, pb->C, GN, pb->D, dy, HP, g->dx, HP, g->ddt, pb->H, g->dA, g->dB, GN, g->dC, GN,
                                   g->dD, work);
    else
        st_ssd_backward_chunked(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q, pb->x, HP, pb->dt, pb->H, pb->A, pb->B,
                                GN, pb->C, GN, pb->D, dy, HP, g->dx, HP, g->ddt, pb->H, g->dA, g->dB, GN, g->dC, GN,
                                g->dD, work);
}

/* norm(a - ref) / norm(ref); also flags any non-finite value of a. */
static double rel_err(const double *a, const double *ref, long n) {
    double d2 = 0, r2 = 0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        d2 += (a[i] - ref[i]) * (a[i] - ref[i]);
        r2 += ref[i] * ref[i];
    }
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

/* The six gradient errors of g against the oracle o, in the order
 * dx, ddt, dA, dB, dC, dD. */
static void grad_errors(const problem *pb, const grads *g, const grads *o, double err[6]) {
    long R = rows_of(pb);
    err[0] = rel_err(g->dx, o->dx, R * pb->H * pb->P);
    err[1] = rel_err(g->ddt, o->ddt, R * pb->H);
    err[2] = rel_err(g->dA, o->dA, pb->H);
    err[3] = rel_err(g->dB, o->dB, R * pb->G * pb->N);
    err[4] = rel_err(g->dC, o->dC, R * pb->G * pb->N);
    err[5] = rel_err(g->dD, o->dD, pb->H);
}

static const char *grad_names[6] = {"dx", "ddt", "dA", "dB", "dC", "dD"};

/* Tests 1 and 2 over the Q x K grid for one head/group shape. Both sides
 * accumulate in double over at most a few hundred terms of size O(1), so
 * they agree to ~1e-15; 1e-12 leaves room for exp/ordering differences
 * while catching any wrong term (which would be O(1e-2) or more). */
static void test_grid(int H, int P, int G, int N, uint64_t seed) {
    static const int Qs[] = {1, 8, 16, 32, 64}, Ks[] = {32, 50, 64, 7};
    double worst_y = 0, worst_g[6] = {0};
    for (int ki = 0; ki < 4; ki++) {
        problem pb = make_problem(2, Ks[ki], H, P, G, N, seed + (uint64_t)ki);
        long ny = (long)rows_of(&pb) * H * P;
        double *y_ref = malloc(sizeof(double) * ny), *y = malloc(sizeof(double) * ny);
        double *wseq = make_work(&pb, 1);
        grads o = make_grads(&pb);
        forward(&pb, 0, y_ref, NULL);
        backward(&pb, 0, pb.dy, &o, wseq);
        for (int qi = 0; qi < 5; qi++) {
            int Q = Qs[qi];
            double *work = make_work(&pb, Q);
            grads g = make_grads(&pb);
            forward(&pb, Q, y, work);
            double ey = rel_err(y, y_ref, ny);
            CHECK(ey <= 1e-12, "H=%d P=%d G=%d N=%d K=%d Q=%d: forward rel err %.3e", H, P, G, N, pb.K, Q, ey);
            worst_y = fmax(worst_y, ey);
            backward(&pb, Q, pb.dy, &g, work);
            double err[6];
            grad_errors(&pb, &g, &o, err);
            for (int i = 0; i < 6; i++) {
                CHECK(err[i] <= 1e-12, "H=%d P=%d G=%d N=%d K=%d Q=%d: %s rel err %.3e", H, P, G, N, pb.K, Q,
                      grad_names[i], err[i]);
                worst_g[i] = fmax(worst_g[i], err[i]);
            }
            free_grads(&g);
            free(work);
        }
        free_grads(&o);
        free(wseq), free(y), free(y_ref);
        free_problem(&pb);
    }
    printf("  grid H=%d P=%d G=%d N=%d, Q in {1,8,16,32,64} x K in {32,50,64,7}: worst rel err\n", H, P, G, N);
    printf("    y %.2e  dx %.2e  ddt %.2e  dA %.2e  dB %.2e  dC %.2e  dD %.2e\n", worst_y, worst_g[0], worst_g[1],
           worst_g[2], worst_g[3], worst_g[4], worst_g[5]);
}

/* dA and dD are added to: a second backward into the same buffers doubles
 * them exactly (v + v = 2v in floating point). */
static void test_accumulate(void) {
    problem pb = make_problem(2, 21, 4, 8, 2, 6, 77);
    double *work = make_work(&pb, 8);
    grads g = make_grads(&pb);
    backward(&pb, 8, pb.dy, &g, work);
    double a0[4], d0[4];
    memcpy(a0, g.dA, sizeof a0), memcpy(d0, g.dD, sizeof d0);
    backward(&pb, 8, pb.dy, &g, work);
    int ok = 1;
    for (int h = 0; h < 4; h++)
        ok &= g.dA[h] == 2 * a0[h] && g.dD[h] == 2 * d0[h] && a0[h] != 0 && d0[h] != 0;
    CHECK(ok, "dA/dD do not accumulate (+=)");
    free_grads(&g), free(work), free_problem(&pb);
}

/* ---- 3. gradient check ------------------------------------------------ */

typedef struct {
    problem *pb;
    int Q; /* 0 = sequential */
    double *y, *weight, *work;
} gc_ctx;

static double gc_loss(void *p) {
    gc_ctx *c = p;
    forward(c->pb, c->Q, c->y, c->work);
    return st_gc_dot(c->y, rows_of(c->pb), c->pb->H * c->pb->P, c->pb->H * c->pb->P, c->weight);
}

/* Central differences with h = 1e-5 have truncation error ~h^2 ~ 1e-10 and
 * rounding error ~1e-16/h ~ 1e-11 relative: 1e-6 (ST_GC_BOUND) is far above
 * both and far below what any wrong term gives. At most max_checks elements
 * per tensor (two forwards each) keep the runtime short; dt, A and Dskip are
 * small enough to be checked whole. */
static void test_gradcheck(int Q, int max_checks, const char *what) {
    problem pb = make_problem(2, 13, 4, 3, 2, 5, 4242);
    int R = rows_of(&pb), HP = pb.H * pb.P, GN = pb.G * pb.N;
    gc_ctx c = {&pb, Q, malloc(sizeof(double) * R * HP), pb.dy, make_work(&pb, Q ? Q : 1)};
    grads g = make_grads(&pb);
    backward(&pb, Q, pb.dy, &g, c.work);
    char name[64];
    struct {
        const char *n;
        double *x, *a;
        int rows, cols;
    } t[6] = {{"x", pb.x, g.dx, R, HP}, {"dt", pb.dt, g.ddt, R, pb.H}, {"A", pb.A, g.dA, 1, pb.H},
              {"B", pb.B, g.dB, R, GN}, {"C", pb.C, g.dC, R, GN},      {"Dskip", pb.D, g.dD, 1, pb.H}};
    for (int i = 0; i < 6; i++) {
        st_gc_result res = st_gc_tensor(gc_loss, &c, t[i].x, t[i].rows, t[i].cols, t[i].cols, t[i].a, t[i].cols,
                                        max_checks, 99 + (uint64_t)i);
        snprintf(name, sizeof name, "%s d%s", what, t[i].n);
        CHECK_GRAD(name, res, ST_GC_BOUND);
    }
    free_grads(&g), free(c.y), free(c.work), free_problem(&pb);
}

/* ---- 4. strides ------------------------------------------------------- */

/* Copy a contiguous rows x width block into a strided buffer. */
static void put_rows(double *dst, int stride, const double *src, int rows, int width) {
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * stride, src + (size_t)r * width, sizeof(double) * width);
}

/* 1 when the strided block equals the contiguous one bit for bit, contains
 * no NaN, and the padding columns [width, stride) are all still NaN. */
static int same_rows(const double *strided, int stride, int width, int pad_to, const double *ref, int rows) {
    for (int r = 0; r < rows; r++) {
        const double *s = strided + (size_t)r * stride;
        if (memcmp(s, ref + (size_t)r * width, sizeof(double) * width) != 0) return 0;
        for (int i = 0; i < width; i++)
            if (isnan(s[i])) return 0;
        for (int i = width; i < pad_to; i++)
            if (!isnan(s[i])) return 0;
    }
    return 1;
}

static void test_strides(int Q) {
    problem pb = make_problem(3, 50, 4, 16, 2, 10, 555); /* big enough to run threaded */
    int R = rows_of(&pb), HP = pb.H * pb.P, GN = pb.G * pb.N, W = HP + 2 * GN;
    int xbc_s = W + 7, dt_s = pb.H + 3, dy_s = HP + 5, y_s = HP + 3, dxbc_s = W + 9, ddt_s = pb.H + 2;
    double *xbc = test_padded(R, W, xbc_s), *dtp = test_padded(R, pb.H, dt_s), *dyp = test_padded(R, HP, dy_s);
    double *yp = test_padded(R, HP, y_s), *dxbc = test_padded(R, W, dxbc_s), *ddtp = test_padded(R, pb.H, ddt_s);
    put_rows(xbc, xbc_s, pb.x, R, HP);
    put_rows(xbc + HP, xbc_s, pb.B, R, GN);
    put_rows(xbc + HP + GN, xbc_s, pb.C, R, GN);
    put_rows(dtp, dt_s, pb.dt, R, pb.H);
    put_rows(dyp, dy_s, pb.dy, R, HP);
    double *y = malloc(sizeof(double) * R * HP), *work = make_work(&pb, Q ? Q : 1);
    grads g = make_grads(&pb), gp = make_grads(&pb);
    forward(&pb, Q, y, work);
    backward(&pb, Q, pb.dy, &g, work);
    free(work);
    work = make_work(&pb, Q ? Q : 1);
    const char *what = Q ? "chunked" : "sequential";
    if (Q) {
        st_ssd_forward_chunked(pb.Bsz, pb.K, pb.H, pb.P, pb.G, pb.N, Q, xbc, xbc_s, dtp, dt_s, pb.A, xbc + HP, xbc_s,
                               xbc + HP + GN, xbc_s, pb.D, yp, y_s, work);
        st_ssd_backward_chunked(pb.Bsz, pb.K, pb.H, pb.P, pb.G, pb.N, Q, xbc, xbc_s, dtp, dt_s, pb.A, xbc + HP, xbc_s,
                                xbc + HP + GN, xbc_s, pb.D, dyp, dy_s, dxbc, dxbc_s, ddtp, ddt_s, gp.dA, dxbc + HP,
                                dxbc_s, dxbc + HP + GN, dxbc_s, gp.dD, work);
    } else {
        st_ssd_forward_sequential(pb.Bsz, pb.K, pb.H, pb.P, pb.G, pb.N, xbc, xbc_s, dtp, dt_s, pb.A, xbc + HP, xbc_s,
                                  xbc + HP + GN, xbc_s, pb.D, yp, y_s);
        st_ssd_backward_sequential(pb.Bsz, pb.K, pb.H, pb.P, pb.G, pb.N, xbc, xbc_s, dtp, dt_s, pb.A, xbc + HP, xbc_s,
                                   xbc + HP + GN, xbc_s, pb.D, dyp, dy_s, dxbc, dxbc_s, ddtp, ddt_s, gp.dA, dxbc + HP,
                                   dxbc_s, dxbc + HP + GN, dxbc_s, gp.dD, work);
    }
    CHECK(same_rows(yp, y_s, HP, y_s, y, R), "%s strided y differs from contiguous", what);
    /* dx, dB, dC share the dxBC row: each is checked on its own columns and
     * the row's tail [W, stride) must still be NaN. */
    CHECK(same_rows(dxbc, dxbc_s, HP, HP, g.dx, R), "%s strided dx differs", what);
    CHECK(same_rows(dxbc + HP, dxbc_s, GN, GN, g.dB, R), "%s strided dB differs", what);
    CHECK(same_rows(dxbc + HP + GN, dxbc_s, GN, dxbc_s - HP - GN, g.dC, R), "%s strided dC differs or pad written",
          what);
    CHECK(same_rows(ddtp, ddt_s, pb.H, ddt_s, g.ddt, R), "%s strided ddt differs", what);
    CHECK(memcmp(gp.dA, g.dA, sizeof(double) * pb.H) == 0 && memcmp(gp.dD, g.dD, sizeof(double) * pb.H) == 0,
          "%s strided dA/dD differ", what);
    printf("  strides (%s, Q=%d): xBC/dxBC rows with NaN padding bit-identical to contiguous\n", what, Q);
    free(xbc), free(dtp), free(dyp), free(yp), free(dxbc), free(ddtp), free(y), free(work);
    free_grads(&g), free_grads(&gp), free_problem(&pb);
}

/* Two runs of the chunked backward are bit-identical (no order that depends
 * on thread scheduling; OMP_NUM_THREADS=2 under ctest). */
static void test_repeatable(void) {
    problem pb = make_problem(4, 40, 8, 8, 2, 8, 31337);
    long R = rows_of(&pb);
    double *work = make_work(&pb, 16);
    grads a = make_grads(&pb), b = make_grads(&pb);
    backward(&pb, 16, pb.dy, &a, work);
    backward(&pb, 16, pb.dy, &b, work);
    int same = memcmp(a.dx, b.dx, sizeof(double) * R * pb.H * pb.P) == 0 &&
               memcmp(a.ddt, b.ddt, sizeof(double) * R * pb.H) == 0 &&
               memcmp(a.dB, b.dB, sizeof(double) * R * pb.G * pb.N) == 0 &&
               memcmp(a.dC, b.dC, sizeof(double) * R * pb.G * pb.N) == 0 &&
               memcmp(a.dA, b.dA, sizeof(double) * pb.H) == 0 && memcmp(a.dD, b.dD, sizeof(double) * pb.H) == 0;
    CHECK(same, "two chunked backward runs differ");
    free_grads(&a), free_grads(&b), free(work), free_problem(&pb);
}

/* ---- 5. long window, strong decay ------------------------------------- */

static int all_finite(const double *v, long n) {
    for (long i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* dt = 0.5, A = -16: a = -8 per step, so a chunk of 64 spans exp(-512) and
 * a window exp(-2048), which would overflow as exp(+2048) if any exponent
 * were a difference of cumulative sums taken the wrong way round. */
static void test_long_window(int Q) {
    problem pb = make_problem(2, 256, 4, 8, 1, 8, 2024);
    long R = rows_of(&pb), ny = R * pb.H * pb.P;
    for (long i = 0; i < R * pb.H; i++)
        pb.dt[i] = 0.5;
    for (int h = 0; h < pb.H; h++)
        pb.A[h] = -16;
    double *y = malloc(sizeof(double) * ny), *y_ref = malloc(sizeof(double) * ny), *work = make_work(&pb, Q);
    grads g = make_grads(&pb), o = make_grads(&pb);
    forward(&pb, Q, y, work);
    forward(&pb, 0, y_ref, NULL);
    backward(&pb, Q, pb.dy, &g, work);
    backward(&pb, 0, pb.dy, &o, work);
    int finite = all_finite(y, ny) && all_finite(g.dx, ny) && all_finite(g.ddt, R * pb.H) &&
                 all_finite(g.dB, R * pb.N) && all_finite(g.dC, R * pb.N) && all_finite(g.dA, pb.H) &&
                 all_finite(g.dD, pb.H);
    CHECK(finite, "K=256 Q=%d dt=0.5 A=-16: non-finite output", Q);
    double err[6], ey = rel_err(y, y_ref, ny);
    grad_errors(&pb, &g, &o, err);
    double worst = ey;
    for (int i = 0; i < 6; i++)
        worst = fmax(worst, err[i]);
    CHECK(worst <= 1e-12, "K=256 Q=%d strong decay: chunked vs sequential rel err %.3e", Q, worst);
    printf("  long window K=256 Q=%d dt=0.5 A=-16: finite, worst rel err vs sequential %.2e\n", Q, worst);
    free(y), free(y_ref), free(work), free_grads(&g), free_grads(&o), free_problem(&pb);
}


/* ---- 6. the last row only ---------------------------------------------- */

/* Forward against the sequential oracle's row K-1; backward against the
 * sequential backward with dy zero but at the last rows. x, B, C sit in one
 * xBC row and dx, dB, dC in one dxBC row (as the Mamba2 block has them),
 * every buffer padded with NaN, the outputs NaN beforehand (an unwritten
 * element shows as non-finite: rel_err is then Inf), dA and dD starting
 * nonzero (they are added to). Both sides sum the same terms in double in
 * other orders: ~1e-15; 1e-12 as the grid test. */
static void test_last_row(int Bsz, int K, int H, int P, int G, int N, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    int R = rows_of(&pb), HP = H * P, GN = G * N, W = HP + 2 * GN;
    int xbc_s = W + 5, dt_s = H + 3, dyl_s = HP + 7, yl_s = HP + 4, dxbc_s = W + 6, ddt_s = H + 1;
    double *xbc = test_padded(R, W, xbc_s), *dtp = test_padded(R, H, dt_s), *dyl = test_padded(Bsz, HP, dyl_s);
    double *yl = test_padded(Bsz, HP, yl_s), *dxbc = test_padded(R, W, dxbc_s), *ddtp = test_padded(R, H, ddt_s);
    put_rows(xbc, xbc_s, pb.x, R, HP);
    put_rows(xbc + HP, xbc_s, pb.B, R, GN);
    put_rows(xbc + HP + GN, xbc_s, pb.C, R, GN);
    put_rows(dtp, dt_s, pb.dt, R, H);
    /* dy of the oracle: pb.dy at rows K-1, zero elsewhere; the last-row op's dy: those rows */
    double *dy_full = calloc((size_t)R * HP, sizeof(double));
    for (int b = 0; b < Bsz; b++) {
        size_t r = (size_t)b * K + K - 1;
        memcpy(dy_full + r * HP, pb.dy + r * HP, sizeof(double) * HP);
        memcpy(dyl + (size_t)b * dyl_s, pb.dy + r * HP, sizeof(double) * HP);
    }
    double *y_ref = malloc(sizeof(double) * R * HP), *seqw = make_work(&pb, 1);
    forward(&pb, 0, y_ref, NULL);
    st_ssd_last_row_forward(Bsz, K, H, P, G, N, xbc, xbc_s, dtp, dt_s, pb.A, xbc + HP, xbc_s, xbc + HP + GN, xbc_s,
                            pb.D, yl, yl_s);
    double d2 = 0, r2 = 0;
    int pad_ok = 1, finite = 1;
    for (int b = 0; b < Bsz; b++)
        for (int j = 0; j < yl_s; j++) {
            double v = yl[(size_t)b * yl_s + j];
            if (j >= HP) {
                pad_ok &= isnan(v) != 0;
                continue;
            }
            double ref = y_ref[((size_t)b * K + K - 1) * HP + j];
            finite &= isfinite(v) != 0;
            d2 += (v - ref) * (v - ref), r2 += ref * ref;
        }
    double ey = finite ? sqrt(d2 / r2) : INFINITY;
    CHECK(ey <= 1e-12 && pad_ok, "last row K=%d H=%d P=%d G=%d N=%d: forward rel err %.3e, padding %s", K, H, P, G, N,
          ey, pad_ok ? "kept" : "written");
    grads o = make_grads(&pb), g = make_grads(&pb);
    for (int h = 0; h < H; h++)
        o.dA[h] = g.dA[h] = 0.25 + h, o.dD[h] = g.dD[h] = -0.5 * h;
    backward(&pb, 0, dy_full, &o, seqw);
    size_t nw = st_ssd_last_row_work_count(Bsz, K, H);
    double *work = malloc(sizeof(double) * (nw + 1));
    for (size_t i = 0; i < nw; i++)
        work[i] = NAN;
    st_ssd_last_row_backward(Bsz, K, H, P, G, N, xbc, xbc_s, dtp, dt_s, pb.A, xbc + HP, xbc_s, xbc + HP + GN, xbc_s,
                             pb.D, dyl, dyl_s, dxbc, dxbc_s, ddtp, ddt_s, g.dA, dxbc + HP, dxbc_s, dxbc + HP + GN,
                             dxbc_s, g.dD, work);
    /* gather the strided outputs (and check the dxBC row's tail and ddt's gap stayed NaN) */
    for (int r = 0; r < R; r++) {
        memcpy(g.dx + (size_t)r * HP, dxbc + (size_t)r * dxbc_s, sizeof(double) * HP);
        memcpy(g.dB + (size_t)r * GN, dxbc + (size_t)r * dxbc_s + HP, sizeof(double) * GN);
        memcpy(g.dC + (size_t)r * GN, dxbc + (size_t)r * dxbc_s + HP + GN, sizeof(double) * GN);
        memcpy(g.ddt + (size_t)r * H, ddtp + (size_t)r * ddt_s, sizeof(double) * H);
        for (int j = W; j < dxbc_s; j++)
            pad_ok &= isnan(dxbc[(size_t)r * dxbc_s + j]) != 0;
        for (int j = H; j < ddt_s; j++)
            pad_ok &= isnan(ddtp[(size_t)r * ddt_s + j]) != 0;
    }
    double err[6];
    grad_errors(&pb, &g, &o, err);
    for (int i = 0; i < 6; i++)
        CHECK(err[i] <= 1e-12, "last row K=%d H=%d P=%d G=%d N=%d: %s rel err %.3e", K, H, P, G, N, grad_names[i],
              err[i]);
    CHECK(pad_ok, "last row K=%d: a padding column was written", K);
    printf("  last row Bsz=%d K=%d H=%d P=%d G=%d N=%d: y %.2e  dx %.2e  ddt %.2e  dA %.2e  dB %.2e  dC %.2e  dD "
           "%.2e\n",
           Bsz, K, H, P, G, N, ey, err[0], err[1], err[2], err[3], err[4], err[5]);
    free(xbc), free(dtp), free(dyl), free(yl), free(dxbc), free(ddtp), free(dy_full), free(y_ref), free(seqw);
    free(work), free_grads(&o), free_grads(&g), free_problem(&pb);
}

int main(void) {
    printf("chunked vs sequential (tests 1, 2):\n");
    test_grid(4, 16, 1, 16, 1000);
    test_grid(4, 24, 2, 10, 2000);
    test_accumulate();
    printf("gradient checks (test 3, Bsz=2 K=13 H=4 P=3 G=2 N=5):\n");
    test_gradcheck(4, 120, "chunked Q=4");
    test_gradcheck(0, 40, "sequential");
    printf("strides and determinism (test 4):\n");
    test_strides(16);
    test_strides(0);
    test_repeatable();
    printf("long window (test 5):\n");
    test_long_window(32);
    test_long_window(64);
    printf("last row only (test 6):\n");
    test_last_row(3, 37, 4, 8, 1, 16, 4001);  /* H/G = 4 */
    test_last_row(2, 64, 4, 6, 2, 10, 4002);  /* G = 2, H/G = 2 */
    test_last_row(2, 37, 6, 5, 3, 7, 4003);   /* G = 3 */
    test_last_row(1, 1, 2, 3, 2, 4, 4004);    /* K = 1: only the skip and the own term */
    test_last_row(40, 64, 8, 32, 1, 64, 4005); /* the default preset's block, threaded */
    TEST_MAIN_END();
}
