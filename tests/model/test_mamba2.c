/* test_mamba2.c: the Mamba2 block (LayerNorm, in_proj, conv + SiLU, SSD,
 * gated RMSNorm, out_proj, residual), forward and backward, in float64.
 *
 * On the tiny preset's block (D 32, expand 2, headdim 16, N 16, G 1, W 4,
 * Q 16, K 32, Bsz 2) and an odd one (D 96, headdim 24, N 10, K 50, Q 16:
 * K not a multiple of Q, H = 8 heads):
 * 1. the forward, with the chunked SSD, against the block written out here
 *    with plain loops and the sequential SSD (the recurrence that defines
 *    it): every saved region, found by its name in the layout table, and the
 *    output, within 1e-12 relative (max-norm; the two differ only by the
 *    order of floating-point sums);
 * 2. central-difference gradients of every parameter tensor and of u, rel
 *    err <= 1e-6 (the harness bound), on a Philox sample of each tensor
 *    (on one thread: see 4 for why that changes no bits);
 * 3. u, u_out, du_out, du with NaN-padded row strides: every output, every
 *    saved value and every parameter gradient bit-identical to contiguous;
 *    and the documented in-place uses (u_out = u, du = du_out) give the
 *    same bits too;
 * 4. one thread and two threads give the same bits, on a batch large enough
 *    (Bsz 16) that the ops do split their rows.
 * Weights are initialised as the Mamba2 reference does (dt log-uniform in
 * [1e-3, 1e-1] -> inverse softplus into dt_bias, A_log = log U[1, 16],
 * Dskip = 1), the rest small random, norm weights around 1. */
#define ST_REAL_BITS 64
#include "core/real.h"

#include <omp.h>
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/philox.h"
#include "model/mamba2.h"
#include "model/ssd.h"
#include "test.h"

/* The parameter tensors, in st_mamba2_weights order, with their shapes. */
enum { P_LN_W, P_LN_B, P_IN_PROJ, P_CONV_W, P_CONV_B, P_DT_BIAS, P_A_LOG, P_DSKIP, P_NORM_W, P_OUT_PROJ, P_COUNT };
static const char *const param_names[P_COUNT] = {"ln_w",    "ln_b",  "in_proj_w", "conv_w", "conv_b",
                                                 "dt_bias", "A_log", "Dskip",     "norm_w", "out_proj_w"};

typedef struct {
    st_dims d;
    int Bsz, R, D, di, H, P, N, G, W, K, cd, io;
    int rows[P_COUNT], cols[P_COUNT];
    double *param[P_COUNT], *grad[P_COUNT];
    st_mamba2_weights w;
    st_mamba2_grads g;
    double *u, *u_out, *saved, *work, *R_w; /* R_w: loss weights [R, D] */
} block;

static st_dims dims_of(int D, int headdim, int N, int K, int Q) {
    st_dims d;
    memset(&d, 0, sizeof d);
    d.D = D, d.expand = 2, d.headdim = headdim, d.N = N, d.G = 1, d.W = 4, d.Q = Q, d.K = K;
    return d;
}

static void normal_fill(double *x, long n, double scale, double shift, uint64_t seed, uint32_t salt) {
    st_gc_randn(x, n, scale, seed, salt);
    for (long i = 0; i < n; i++)
        x[i] += shift;
}

/* Parameters as the Mamba2 reference initialises them (see the top). */
static void init_params(block *b, uint64_t seed) {
    normal_fill(b->param[P_LN_W], b->D, 0.1, 1, seed, 1);
    normal_fill(b->param[P_LN_B], b->D, 0.1, 0, seed, 2);
    normal_fill(b->param[P_IN_PROJ], (long)b->io * b->D, 1 / sqrt(b->D), 0, seed, 3);
    normal_fill(b->param[P_CONV_W], (long)b->cd * b->W, 1 / sqrt(b->W), 0, seed, 4);
    normal_fill(b->param[P_CONV_B], b->cd, 0.1, 0, seed, 5);
    normal_fill(b->param[P_NORM_W], b->di, 0.1, 1, seed, 6);
    normal_fill(b->param[P_OUT_PROJ], (long)b->D * b->di, 1 / sqrt(b->di), 0, seed, 7);
    st_rng rng = st_rng_make(seed, ST_STREAM_TEST);
    for (int h = 0; h < b->H; h++) {
        double dt = exp(log(1e-3) + st_rng_uniform(&rng) * (log(1e-1) - log(1e-3)));
        b->param[P_DT_BIAS][h] = dt + log(-expm1(-dt)); /* softplus(dt_bias) = dt */
        b->param[P_A_LOG][h] = log(1 + 15 * st_rng_uniform(&rng));
        b->param[P_DSKIP][h] = 1;
    }
}

static block block_make(st_dims d, int Bsz, uint64_t seed) {
    block b;
    memset(&b, 0, sizeof b);
    b.d = d, b.Bsz = Bsz, b.K = d.K, b.R = Bsz * d.K, b.D = d.D, b.di = st_d_inner(&d), b.H = st_heads(&d);
    b.P = d.headdim, b.N = d.N, b.G = d.G, b.W = d.W, b.cd = st_conv_dim(&d), b.io = st_in_proj_out(&d);
    const int shapes[P_COUNT][2] = {{1, b.D}, {1, b.D}, {b.io, b.D}, {b.cd, b.W}, {1, b.cd},
                                    {1, b.H}, {1, b.H}, {1, b.H},    {1, b.di},   {b.D, b.di}};
    for (int i = 0; i < P_COUNT; i++) {
        b.rows[i] = shapes[i][0], b.cols[i] = shapes[i][1];
        b.param[i] = malloc(sizeof(double) * b.rows[i] * b.cols[i]);
        b.grad[i] = calloc((size_t)b.rows[i] * b.cols[i], sizeof(double));
    }
    init_params(&b, seed);
    st_mamba2_weights w = {b.param[0], b.param[1], b.param[2], b.param[3], b.param[4],
                           b.param[5], b.param[6], b.param[7], b.param[8], b.param[9]};
    st_mamba2_grads g = {b.grad[0], b.grad[1], b.grad[2], b.grad[3], b.grad[4],
                         b.grad[5], b.grad[6], b.grad[7], b.grad[8], b.grad[9]};
    b.w = w, b.g = g;
    b.u = malloc(sizeof(double) * b.R * b.D), b.u_out = malloc(sizeof(double) * b.R * b.D);
    b.R_w = malloc(sizeof(double) * b.R * b.D);
    normal_fill(b.u, (long)b.R * b.D, 1, 0, seed, 8);
    normal_fill(b.R_w, (long)b.R * b.D, 1, 0, seed, 9);
    b.saved = malloc(sizeof(double) * st_mamba2_saved_count(&d, Bsz));
    b.work = malloc(sizeof(double) * st_mamba2_work_count(&d, Bsz));
    return b;
}

static void block_free(block *b) {
    for (int i = 0; i < P_COUNT; i++)
        free(b->param[i]), free(b->grad[i]);
    free(b->u), free(b->u_out), free(b->R_w), free(b->saved), free(b->work);
}

static double block_loss(void *p) {
    block *b = p;
    st_mamba2_forward(&b->d, b->Bsz, &b->w, b->u, b->D, b->u_out, b->D, b->saved, b->work);
    return st_gc_dot(b->u_out, b->R, b->D, b->D, b->R_w);
}

/* ---- 1. the block written out with loops and the sequential SSD ---------- */

typedef struct {
    double *a, *mean, *rstd, *zx, *xBC, *dt, *y, *gated, *rms, *u_out;
} reference;

static double silu(double v) { return v / (1 + exp(-v)); }

static reference reference_forward(const block *b) {
    int R = b->R, D = b->D, di = b->di, cd = b->cd, io = b->io, H = b->H, W = b->W, K = b->K;
    reference f;
    f.a = malloc(sizeof(double) * R * D), f.mean = malloc(sizeof(double) * R), f.rstd = malloc(sizeof(double) * R);
    f.zx = malloc(sizeof(double) * R * io), f.xBC = malloc(sizeof(double) * R * cd);
    f.dt = malloc(sizeof(double) * R * H), f.y = malloc(sizeof(double) * R * di);
    f.gated = malloc(sizeof(double) * R * di), f.rms = malloc(sizeof(double) * R);
    f.u_out = malloc(sizeof(double) * R * D);
    double *const *p = b->param;
    for (int r = 0; r < R; r++) {
        const double *u = b->u + r * D;
        double mu = 0, var = 0;
        for (int i = 0; i < D; i++)
            mu += u[i] / D;
        for (int i = 0; i < D; i++)
            var += (u[i] - mu) * (u[i] - mu) / D;
        f.mean[r] = mu, f.rstd[r] = 1 / sqrt(var + 1e-5);
        for (int i = 0; i < D; i++)
            f.a[r * D + i] = (u[i] - mu) * f.rstd[r] * p[P_LN_W][i] + p[P_LN_B][i];
        for (int o = 0; o < io; o++) {
            double s = 0;
            for (int i = 0; i < D; i++)
                s += f.a[r * D + i] * p[P_IN_PROJ][o * D + i];
            f.zx[r * io + o] = s;
        }
    }
    for (int r = 0; r < R; r++) {
        int t = r % K;
        for (int ch = 0; ch < cd; ch++) {
            double s = p[P_CONV_B][ch];
            for (int i = 0; i < W; i++)
                if (t - W + 1 + i >= 0) s += p[P_CONV_W][ch * W + i] * f.zx[(r - W + 1 + i) * io + di + ch];
            f.xBC[r * cd + ch] = silu(s);
        }
        for (int h = 0; h < H; h++)
            f.dt[r * H + h] = log1p(exp(f.zx[r * io + di + cd + h] + p[P_DT_BIAS][h]));
    }
    double *A = malloc(sizeof(double) * H);
    for (int h = 0; h < H; h++)
        A[h] = -exp(p[P_A_LOG][h]);
    st_ssd_forward_sequential(b->Bsz, K, H, b->P, b->G, b->N, f.xBC, cd, f.dt, H, A, f.xBC + di, cd,
                              f.xBC + di + b->G * b->N, cd, p[P_DSKIP], f.y, di);
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < di; i++) {
            double g = f.y[r * di + i] * silu(f.zx[r * io + i]);
            ss += g * g;
        }
        f.rms[r] = 1 / sqrt(ss / di + 1e-5);
        for (int i = 0; i < di; i++)
            f.gated[r * di + i] = f.y[r * di + i] * silu(f.zx[r * io + i]) * f.rms[r] * p[P_NORM_W][i];
        for (int o = 0; o < D; o++) {
            double s = 0;
            for (int i = 0; i < di; i++)
                s += f.gated[r * di + i] * p[P_OUT_PROJ][o * di + i];
            f.u_out[r * D + o] = b->u[r * D + o] + s;
        }
    }
    free(A);
    return f;
}

/* max |x - ref| / max |ref| over rows x cols (x strided, ref contiguous). */
static double max_rel(const double *x, int x_stride, const double *ref, int rows, int cols) {
    double dm = 0, rm = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            dm = fmax(dm, fabs(x[(long)r * x_stride + c] - ref[(long)r * cols + c]));
            rm = fmax(rm, fabs(ref[(long)r * cols + c]));
        }
    return rm > 0 ? dm / rm : dm;
}

static void check_forward(block *b, const char *tag) {
    reference f = reference_forward(b);
    block_loss(b);
    st_mamba2_region reg[ST_MAMBA2_SAVED_NREGIONS];
    size_t total = st_mamba2_saved_layout(&b->d, b->Bsz, reg);
    CHECK(total == st_mamba2_saved_count(&b->d, b->Bsz), "saved layout total %zu != saved count", total);
    /* The reference tensor of each stable region name. */
    const struct {
        const char *name;
        const double *ref;
        int cols;
    } want[] = {
        {"ln_a", f.a, b->D},      {"ln_mean", f.mean, 1},    {"ln_rstd", f.rstd, 1},
        {"in_proj", f.zx, b->io}, {"conv", f.xBC, b->cd},    {"dt", f.dt, b->H},
        {"ssd_y", f.y, b->di},    {"gated", f.gated, b->di}, {"rms_rstd", f.rms, 1},
    };
    int nwant = (int)(sizeof want / sizeof want[0]);
    CHECK(nwant == ST_MAMBA2_SAVED_NREGIONS, "%d saved regions, expected %d", ST_MAMBA2_SAVED_NREGIONS, nwant);
    for (int k = 0; k < nwant; k++) {
        int found = -1;
        for (int i = 0; i < ST_MAMBA2_SAVED_NREGIONS; i++)
            if (strcmp(reg[i].name, want[k].name) == 0) found = i;
        CHECK(found >= 0, "no saved region named %s", want[k].name);
        if (found < 0) continue;
        const st_mamba2_region *g = &reg[found];
        CHECK(g->rows == b->R && g->cols == want[k].cols && g->stride >= g->cols &&
                  g->offset + (size_t)(g->rows - 1) * g->stride + g->cols <= total,
              "region %s: shape %d x %d stride %d offset %zu", g->name, g->rows, g->cols, g->stride, g->offset);
        double e = max_rel(b->saved + g->offset, g->stride, want[k].ref, b->R, want[k].cols);
        printf("  %s saved %-9s vs reference: max rel err %.2e\n", tag, g->name, e);
        CHECK(e <= 1e-12, "%s: saved region %s differs from the reference by %.3e", tag, g->name, e);
    }
    /* The block's increment u_out - u, so the residual does not hide it. */
    double dm = 0, rm = 0;
    for (long i = 0; i < (long)b->R * b->D; i++) {
        dm = fmax(dm, fabs(b->u_out[i] - f.u_out[i]));
        rm = fmax(rm, fabs(f.u_out[i] - b->u[i]));
    }
    printf("  %s u_out - u vs reference (sequential SSD): max rel err %.2e\n", tag, dm / rm);
    CHECK(dm / rm <= 1e-12, "%s: block output (chunked SSD) differs from the sequential reference: %.3e", tag, dm / rm);
    free(f.a), free(f.mean), free(f.rstd), free(f.zx), free(f.xBC), free(f.dt), free(f.y), free(f.gated);
    free(f.rms), free(f.u_out);
}

/* ---- 2. gradients --------------------------------------------------------- */

static void check_grads(block *b, const char *tag, int max_checks, uint64_t seed) {
    double *du = malloc(sizeof(double) * b->R * b->D);
    for (int i = 0; i < P_COUNT; i++)
        memset(b->grad[i], 0, sizeof(double) * b->rows[i] * b->cols[i]);
    block_loss(b);
    st_mamba2_backward(&b->d, b->Bsz, &b->w, b->u, b->D, b->saved, b->R_w, b->D, du, b->D, &b->g, b->work);
    char name[96];
    for (int i = 0; i < P_COUNT; i++) {
        snprintf(name, sizeof name, "%s %s", tag, param_names[i]);
        CHECK_GRAD(name,
                   st_gc_tensor(block_loss, b, b->param[i], b->rows[i], b->cols[i], b->cols[i], b->grad[i], b->cols[i],
                                max_checks, seed + i),
                   ST_GC_BOUND);
    }
    snprintf(name, sizeof name, "%s u", tag);
    CHECK_GRAD(name, st_gc_tensor(block_loss, b, b->u, b->R, b->D, b->D, du, b->D, max_checks, seed + 99), ST_GC_BOUND);
    free(du);
}

/* ---- 3. strides and in-place use ------------------------------------------ */

typedef struct {
    double *u_out, *du, *saved, *grads[P_COUNT];
} block_result;

/* Forward and backward with the given strides; results copied out contiguous. */
static block_result run_strided(block *b, int us, int uos, int dos, int dus, int in_place) {
    int R = b->R, D = b->D;
    double *u = test_padded(R, D, us), *du_out = test_padded(R, D, dos);
    for (int r = 0; r < R; r++) {
        memcpy(u + (long)r * us, b->u + (long)r * D, sizeof(double) * D);
        memcpy(du_out + (long)r * dos, b->R_w + (long)r * D, sizeof(double) * D);
    }
    double *u_out = in_place ? u : test_padded(R, D, uos), *du = in_place ? du_out : test_padded(R, D, dus);
    if (in_place) uos = us, dus = dos;
    for (int i = 0; i < P_COUNT; i++)
        memset(b->grad[i], 0, sizeof(double) * b->rows[i] * b->cols[i]);
    size_t ns = st_mamba2_saved_count(&b->d, b->Bsz);
    block_result res;
    res.u_out = malloc(sizeof(double) * R * D), res.du = malloc(sizeof(double) * R * D);
    res.saved = malloc(sizeof(double) * ns);
    st_mamba2_forward(&b->d, b->Bsz, &b->w, u, us, u_out, uos, b->saved, b->work);
    for (int r = 0; r < R; r++)
        memcpy(res.u_out + (long)r * D, u_out + (long)r * uos, sizeof(double) * D);
    /* In place, u was overwritten by u_out: the backward gets the original. */
    st_mamba2_backward(&b->d, b->Bsz, &b->w, in_place ? b->u : u, in_place ? D : us, b->saved, du_out, dos, du, dus,
                       &b->g, b->work);
    for (int r = 0; r < R; r++)
        memcpy(res.du + (long)r * D, du + (long)r * dus, sizeof(double) * D);
    memcpy(res.saved, b->saved, sizeof(double) * ns);
    for (int i = 0; i < P_COUNT; i++) {
        size_t n = (size_t)b->rows[i] * b->cols[i];
        res.grads[i] = malloc(sizeof(double) * n);
        memcpy(res.grads[i], b->grad[i], sizeof(double) * n);
    }
    free(u), free(du_out);
    if (!in_place) free(u_out), free(du);
    return res;
}

/* Differing values between two results; NaN counted in the second. */
static int result_diff(const block *b, const block_result *x, const block_result *y, int *nan) {
    long n = (long)b->R * b->D;
    int diff = 0;
    *nan = 0;
    for (long i = 0; i < n; i++)
        *nan += isnan(y->u_out[i]) + isnan(y->du[i]);
    diff += memcmp(x->u_out, y->u_out, sizeof(double) * n) != 0;
    diff += memcmp(x->du, y->du, sizeof(double) * n) != 0;
    diff += memcmp(x->saved, y->saved, sizeof(double) * st_mamba2_saved_count(&b->d, b->Bsz)) != 0;
    for (int i = 0; i < P_COUNT; i++) {
        size_t m = (size_t)b->rows[i] * b->cols[i];
        diff += memcmp(x->grads[i], y->grads[i], sizeof(double) * m) != 0;
        for (size_t k = 0; k < m; k++)
            *nan += isnan(y->grads[i][k]);
    }
    return diff;
}

static void result_free(block_result *r) {
    free(r->u_out), free(r->du), free(r->saved);
    for (int i = 0; i < P_COUNT; i++)
        free(r->grads[i]);
}

static void check_strides(block *b, const char *tag) {
    int D = b->D, nan = 0;
    /* The saved buffer is compared whole: fill it with NaN before each run
     * so the alignment gaps between regions compare equal. */
    size_t ns = st_mamba2_saved_count(&b->d, b->Bsz);
    for (size_t i = 0; i < ns; i++)
        b->saved[i] = NAN;
    block_result c = run_strided(b, D, D, D, D, 0);
    for (size_t i = 0; i < ns; i++)
        b->saved[i] = NAN;
    block_result p = run_strided(b, D + 5, D + 3, D + 7, D + 2, 0);
    /* memcmp of NaN gaps: same bits both times, so equal. */
    int diff = result_diff(b, &c, &p, &nan);
    printf("  %s padded strides: %d differing tensors, %d NaN\n", tag, diff, nan);
    CHECK(diff == 0 && nan == 0, "%s: padded strides give %d differing tensors, %d NaN", tag, diff, nan);
    for (size_t i = 0; i < ns; i++)
        b->saved[i] = NAN;
    block_result q = run_strided(b, D + 4, 0, D + 1, 0, 1);
    diff = result_diff(b, &c, &q, &nan);
    printf("  %s in place (u_out = u, du = du_out): %d differing tensors, %d NaN\n", tag, diff, nan);
    CHECK(diff == 0 && nan == 0, "%s: in-place use gives %d differing tensors, %d NaN", tag, diff, nan);
    result_free(&c), result_free(&p), result_free(&q);
}

/* ---- 4. thread count ----------------------------------------------------- */

static void check_threads(st_dims d, int Bsz, uint64_t seed) {
    block b = block_make(d, Bsz, seed);
    int keep = omp_get_max_threads(), nan = 0;
    size_t ns = st_mamba2_saved_count(&b.d, Bsz);
    for (size_t i = 0; i < ns; i++)
        b.saved[i] = NAN;
    omp_set_num_threads(1);
    block_result one = run_strided(&b, b.D, b.D, b.D, b.D, 0);
    for (size_t i = 0; i < ns; i++)
        b.saved[i] = NAN;
    omp_set_num_threads(2);
    block_result two = run_strided(&b, b.D, b.D, b.D, b.D, 0);
    omp_set_num_threads(keep);
    int diff = result_diff(&b, &one, &two, &nan);
    printf("threads (Bsz %d): 1 vs 2 threads: %d differing tensors, %d NaN\n", Bsz, diff, nan);
    CHECK(diff == 0 && nan == 0, "1 and 2 threads give %d differing tensors, %d NaN", diff, nan);
    result_free(&one), result_free(&two);
    block_free(&b);
}

int main(void) {
    const uint64_t seed = 0x3A3BA2;
    struct {
        const char *tag;
        st_dims d;
        int Bsz, max_checks;
    } cfg[] = {
        {"tiny", dims_of(32, 16, 16, 32, 16), 2, 30},
        {"odd", dims_of(96, 24, 10, 50, 16), 2, 16},
    };
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        block b = block_make(cfg[k].d, cfg[k].Bsz, seed + k);
        printf("%s: D %d d_inner %d H %d P %d N %d K %d Q %d Bsz %d\n", cfg[k].tag, b.D, b.di, b.H, b.P, b.N, b.K,
               cfg[k].d.Q, b.Bsz);
        check_forward(&b, cfg[k].tag);
        /* The checks run the forward hundreds of times on small sizes; on
         * one thread they do not wait on barriers when the cores are shared.
         * The bits are the same at any thread count (check_threads). */
        int keep = omp_get_max_threads();
        omp_set_num_threads(1);
        check_grads(&b, cfg[k].tag, cfg[k].max_checks, seed + 1000 * k);
        omp_set_num_threads(keep);
        check_strides(&b, cfg[k].tag);
        block_free(&b);
    }
    check_threads(dims_of(32, 16, 16, 32, 16), 16, seed + 7);
    TEST_MAIN_END();
}
