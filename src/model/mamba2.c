/* mamba2.c: the Mamba2 block (see mamba2.h for the math), composed of the
 * CPU ops: LayerNorm, linear (BLAS), conv1d (+ SiLU), SSD (chunked), gated
 * RMSNorm.
 *
 * Backward, in reverse:
 *     d_gated = du_out out_proj_w;            d out_proj_w += du_out^T gated
 *     d_ssd_y, dz <- gated RMSNorm backward;  d norm_w
 *     dx, dB, dC, ddt <- SSD backward;        dA, d Dskip
 *     dxBC_raw <- conv backward (dx, dB, dC); d conv_w, d conv_b
 *     ddt_raw = ddt sigma(dt_raw + dt_bias);  d dt_bias = sum_r ddt_raw
 *     d A_log = dA * A                        (A = -exp(A_log))
 *     d_a = d[z, xBC, dt_raw] in_proj_w;      d in_proj_w
 *     du = du_out + LayerNorm backward(d_a);  d ln_w, d ln_b
 * The gradients of z, xBC and dt_raw are written straight into the column
 * slices of one [R, in_proj_out] buffer, which in_proj's backward reads as is.
 * Parameter sums run in a fixed order (deterministic). */
#include "core/real.h"

#include <math.h>
#include <string.h>

#include "model/act.h"
#include "model/conv1d.h"
#include "model/layernorm.h"
#include "model/linear.h"
#include "model/mamba2.h"
#include "model/rmsnorm_gated.h"
#include "model/ssd.h"

#define ST_MAMBA2_EPS 1e-5

/* Below this many elements a loop runs on one thread: forking costs more than
 * it saves, and small calls (gradient checks, tiny batches) stay cheap when
 * the cores are shared. The split never changes the bits (rows are independent). */
#define ST_OMP_MIN_WORK 32768L

/* Offsets are rounded to 16 reals: 64-byte aligned regions in float. */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* The sizes every function below needs, derived once from st_dims. */
typedef struct {
    int Bsz, K, R, D, d_inner, P, H, N, G, W, Q, GN, conv_dim, in_out;
} mamba2_sizes;

static mamba2_sizes mamba2_sizes_of(const st_dims *d, int Bsz) {
    mamba2_sizes s;
    s.Bsz = Bsz, s.K = d->K, s.R = Bsz * d->K, s.D = d->D, s.d_inner = st_d_inner(d), s.P = d->headdim;
    s.H = st_heads(d), s.N = d->N, s.G = d->G, s.W = d->W, s.Q = d->Q, s.GN = d->G * d->N;
    s.conv_dim = st_conv_dim(d), s.in_out = st_in_proj_out(d);
    return s;
}

size_t st_mamba2_saved_layout(const st_dims *d, int Bsz, st_mamba2_region *out) {
    mamba2_sizes s = mamba2_sizes_of(d, Bsz);
    static const char *const names[] = {
#define ST_MAMBA2_NAME(id, name) name,
        ST_MAMBA2_SAVED_REGIONS(ST_MAMBA2_NAME)
#undef ST_MAMBA2_NAME
    };
    const int cols[ST_MAMBA2_SAVED_NREGIONS] = {
        [ST_MAMBA2_SAVED_LN_A] = s.D,         [ST_MAMBA2_SAVED_LN_MEAN] = 1,       [ST_MAMBA2_SAVED_LN_RSTD] = 1,
        [ST_MAMBA2_SAVED_IN_PROJ] = s.in_out, [ST_MAMBA2_SAVED_CONV] = s.conv_dim, [ST_MAMBA2_SAVED_DT] = s.H,
        [ST_MAMBA2_SAVED_SSD_Y] = s.d_inner,  [ST_MAMBA2_SAVED_GATED] = s.d_inner, [ST_MAMBA2_SAVED_RMS_RSTD] = 1,
    };
    size_t off = 0;
    for (int i = 0; i < ST_MAMBA2_SAVED_NREGIONS; i++) {
        st_mamba2_region reg = {names[i], off, s.R, cols[i], cols[i]};
        if (out) out[i] = reg;
        off += round16((size_t)s.R * cols[i]);
    }
    return off;
}

size_t st_mamba2_saved_count(const st_dims *d, int Bsz) { return st_mamba2_saved_layout(d, Bsz, NULL); }

/* Scratch of the backward (the forward uses a prefix: A, then SSD work). */
typedef struct {
    real *A, *dA, *ssd, *d_gated, *d_ssd_y, *d_zx, *d_xBC, *conv;
    size_t total;
} mamba2_work;

/* n reals (rounded up to 16) carved out of base at *off; NULL when counting. */
static real *carve(real *base, size_t *off, size_t n) {
    real *p = base ? base + *off : NULL;
    *off += round16(n);
    return p;
}

static mamba2_work mamba2_work_layout(const mamba2_sizes *s, real *base) {
    size_t R = (size_t)s->R, off = 0;
    mamba2_work w;
    w.A = carve(base, &off, (size_t)s->H);
    w.dA = carve(base, &off, (size_t)s->H);
    w.ssd = carve(base, &off, st_ssd_work_count(s->Bsz, s->K, s->H, s->P, s->G, s->N, s->Q));
    w.d_gated = carve(base, &off, R * s->d_inner); /* reused for d_a [R, D]: D <= d_inner */
    w.d_ssd_y = carve(base, &off, R * s->d_inner);
    w.d_zx = carve(base, &off, R * s->in_out);
    w.d_xBC = carve(base, &off, R * s->conv_dim);
    w.conv = carve(base, &off, st_conv1d_work_count(s->Bsz, s->K, s->conv_dim));
    w.total = off;
    return w;
}

size_t st_mamba2_work_count(const st_dims *d, int Bsz) {
    mamba2_sizes s = mamba2_sizes_of(d, Bsz);
    return mamba2_work_layout(&s, NULL).total;
}

/* Pointers to the saved regions of one `saved` buffer. */
typedef struct {
    real *a, *mean, *rstd, *zx, *xBC, *dt, *y, *gated, *rms;
} mamba2_saved;

static mamba2_saved mamba2_saved_at(const st_dims *d, int Bsz, const real *saved) {
    st_mamba2_region reg[ST_MAMBA2_SAVED_NREGIONS];
    st_mamba2_saved_layout(d, Bsz, reg);
    real *b = (real *)saved; /* const again in the backward's use */
    mamba2_saved p = {b + reg[ST_MAMBA2_SAVED_LN_A].offset,    b + reg[ST_MAMBA2_SAVED_LN_MEAN].offset,
                      b + reg[ST_MAMBA2_SAVED_LN_RSTD].offset, b + reg[ST_MAMBA2_SAVED_IN_PROJ].offset,
                      b + reg[ST_MAMBA2_SAVED_CONV].offset,    b + reg[ST_MAMBA2_SAVED_DT].offset,
                      b + reg[ST_MAMBA2_SAVED_SSD_Y].offset,   b + reg[ST_MAMBA2_SAVED_GATED].offset,
                      b + reg[ST_MAMBA2_SAVED_RMS_RSTD].offset};
    return p;
}

/* A = -exp(A_log), per head. */
static void mamba2_A(int H, const real *A_log, real *A) {
    for (int h = 0; h < H; h++)
        A[h] = -(real)exp((double)A_log[h]);
}

/* dt[r, h] = softplus(dt_raw[r, h] + dt_bias[h]); dt_raw a slice of zx rows. */
static void mamba2_dt_forward(const mamba2_sizes *s, const real *zx, const real *dt_bias, real *dt) {
    const int off = s->d_inner + s->conv_dim;
#pragma omp parallel for schedule(static) if ((long)s->R * s->H >= ST_OMP_MIN_WORK)
    for (int r = 0; r < s->R; r++) {
        const real *raw = zx + (size_t)r * s->in_out + off;
        for (int h = 0; h < s->H; h++)
            dt[(size_t)r * s->H + h] = st_softplus(raw[h] + dt_bias[h]);
    }
}

/* In place on the dt_raw slice of d_zx: ddt -> ddt_raw = ddt sigma(dt_raw +
 * dt_bias); then d dt_bias += column sums over rows in order. */
static void mamba2_dt_backward(const mamba2_sizes *s, const real *zx, const real *dt_bias, real *d_zx,
                               real *g_dt_bias) {
    const int off = s->d_inner + s->conv_dim;
#pragma omp parallel for schedule(static) if ((long)s->R * s->H >= ST_OMP_MIN_WORK)
    for (int r = 0; r < s->R; r++) {
        const real *raw = zx + (size_t)r * s->in_out + off;
        real *g = d_zx + (size_t)r * s->in_out + off;
        for (int h = 0; h < s->H; h++)
            g[h] *= st_softplus_grad(raw[h] + dt_bias[h]);
    }
    for (int h = 0; h < s->H; h++) {
        double acc = 0;
        for (int r = 0; r < s->R; r++)
            acc += d_zx[(size_t)r * s->in_out + off + h];
        g_dt_bias[h] += (real)acc;
    }
}

/* Copies rows of width n between strided buffers; nothing when they coincide. */
static void copy_rows(int rows, int n, const real *src, int src_stride, real *dst, int dst_stride) {
    if (src == dst && src_stride == dst_stride) return;
    for (int r = 0; r < rows; r++)
        memmove(dst + (size_t)r * dst_stride, src + (size_t)r * src_stride, sizeof(real) * n);
}

void st_mamba2_forward(const st_dims *d, int Bsz, const st_mamba2_weights *w, const real *u, int u_stride, real *u_out,
                       int u_out_stride, real *saved, real *work) {
    mamba2_sizes s = mamba2_sizes_of(d, Bsz);
    mamba2_saved sv = mamba2_saved_at(d, Bsz, saved);
    mamba2_work wk = mamba2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out;

    st_layernorm_forward(s.R, s.D, u, u_stride, w->ln_w, w->ln_b, ST_MAMBA2_EPS, sv.a, s.D, sv.mean, sv.rstd);
    st_linear_forward(s.R, s.D, io, sv.a, s.D, w->in_proj_w, NULL, sv.zx, io);
    st_conv1d_forward(Bsz, s.K, cd, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, sv.xBC, cd);
    mamba2_dt_forward(&s, sv.zx, w->dt_bias, sv.dt);
    mamba2_A(s.H, w->A_log, wk.A);
    st_ssd_forward_chunked(Bsz, s.K, s.H, s.P, s.G, s.N, s.Q, sv.xBC, cd, sv.dt, s.H, wk.A, sv.xBC + di, cd,
                           sv.xBC + di + s.GN, cd, w->Dskip, sv.y, di, wk.ssd);
    st_rmsnorm_gated_forward(s.R, di, sv.y, di, sv.zx, io, w->norm_w, ST_MAMBA2_EPS, sv.gated, di, sv.rms);
    /* Residual: u_out = u, then u_out += gated out_proj_w^T (beta = 1). */
    copy_rows(s.R, s.D, u, u_stride, u_out, u_out_stride);
    st_gemm(0, 1, s.R, s.D, di, 1, sv.gated, di, w->out_proj_w, di, 1, u_out, u_out_stride);
}

void st_mamba2_backward(const st_dims *d, int Bsz, const st_mamba2_weights *w, const real *u, int u_stride,
                        const real *saved, const real *du_out, int du_out_stride, real *du, int du_stride,
                        st_mamba2_grads *g, real *work) {
    mamba2_sizes s = mamba2_sizes_of(d, Bsz);
    mamba2_saved sv = mamba2_saved_at(d, Bsz, saved);
    mamba2_work wk = mamba2_work_layout(&s, work);
    const int di = s.d_inner, cd = s.conv_dim, io = s.in_out, GN = s.GN;

    st_linear_backward(s.R, di, s.D, sv.gated, di, w->out_proj_w, du_out, du_out_stride, wk.d_gated, di, 0,
                       g->out_proj_w, NULL);
    st_rmsnorm_gated_backward(s.R, di, sv.y, di, sv.zx, io, w->norm_w, sv.rms, wk.d_gated, di, wk.d_ssd_y, di, wk.d_zx,
                              io, g->norm_w);
    mamba2_A(s.H, w->A_log, wk.A);
    memset(wk.dA, 0, sizeof(real) * (size_t)s.H);
    st_ssd_backward_chunked(Bsz, s.K, s.H, s.P, s.G, s.N, s.Q, sv.xBC, cd, sv.dt, s.H, wk.A, sv.xBC + di, cd,
                            sv.xBC + di + GN, cd, w->Dskip, wk.d_ssd_y, di, wk.d_xBC, cd, wk.d_zx + di + cd, io, wk.dA,
                            wk.d_xBC + di, cd, wk.d_xBC + di + GN, cd, g->Dskip, wk.ssd);
    st_conv1d_backward(Bsz, s.K, cd, s.W, sv.zx + di, io, w->conv_w, w->conv_b, 1, wk.d_xBC, cd, wk.d_zx + di, io,
                       g->conv_w, g->conv_b, wk.conv);
    mamba2_dt_backward(&s, sv.zx, w->dt_bias, wk.d_zx, g->dt_bias);
    for (int h = 0; h < s.H; h++)
        g->A_log[h] += wk.dA[h] * wk.A[h]; /* dA/dA_log = -exp(A_log) = A */

    real *d_a = wk.d_gated; /* dead since the gated RMSNorm backward; D <= d_inner */
    st_linear_backward(s.R, s.D, io, sv.a, s.D, w->in_proj_w, wk.d_zx, io, d_a, s.D, 0, g->in_proj_w, NULL);
    copy_rows(s.R, s.D, du_out, du_out_stride, du, du_stride); /* the residual path */
    st_layernorm_backward(s.R, s.D, u, u_stride, w->ln_w, sv.mean, sv.rstd, d_a, s.D, du, du_stride, 1, g->ln_w,
                          g->ln_b);
}
