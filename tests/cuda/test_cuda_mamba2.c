/* test_cuda_mamba2.c: the GPU Mamba2 block (cuda/mamba2_cuda.h) against the
 * CPU float block (model/mamba2.h) on the same random inputs, at the tiny,
 * odd and default sizes and a 64-window batch:
 *  - forward u_out within 1e-5 relative, and every saved region (ln_a ...
 *    rms_rstd, same layout as the CPU's) within 1e-5, so a broken stage is
 *    named;
 *  - backward du (written) within 1e-4 and the ten parameter gradients
 *    (added to from the same random start on both sides, measured against
 *    what was added) within 1e-4;
 *  - padded strides (u, u_out, du_out, du each wider than D with a NaN gap):
 *    the gaps are never read (no NaN in results) and never written;
 *  - outputs poisoned with NaN before each GPU run (an unwritten element
 *    shows up as a NaN error);
 *  - in place (u_out = u, du = du_out) gives the out-of-place results;
 *  - two GPU runs give the same bits.
 * fp32 bounds of issue 6: forward 1e-5, gradients 1e-4 (both sides compute
 * in float with double reductions; errors seen are far below).
 * The last block's tail (st_cuda_mamba2_forward_last / _backward_last)
 * against the full GPU block on the same inputs, du_out zero but at the
 * last rows (what the heads leave): u_out at rows K-1 and the tail's saved
 * regions (ssd_y, gated, rms_rstd) at those rows within 1e-5 (the same
 * math in fp32, the SSD unrolled instead of chunked and the products over
 * n rows instead of n K: sums in other orders, ~1e-6); in_proj's z
 * columns at rows K-1 and its xBC, dt_raw columns at every row, conv's
 * x, B columns at every row and C at rows K-1, dt within 1e-5 (the tail's
 * in_proj is two products: other kernels), the LayerNorm's regions the
 * same bits; u_out's other rows, z's, C's and those regions' still
 * poisoned (never written), or u's values in place;
 * du and every parameter gradient within 1e-4 (as against the CPU: the
 * dt_bias and A_log sums cancel); two runs the same bits. Skips (77)
 * without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "model/mamba2.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/mamba2_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
/* rows x width random values (scale, shift) at row stride `stride`, the gap poison. */
static float *host_rows(int rows, int width, int stride, float scale, float shift, uint64_t seed, uint32_t salt) {
    float *p = host_poisoned((size_t)rows * stride), *v = malloc(sizeof(float) * ((size_t)rows * width + 1));
    st_gc_randnf(v, (long)rows * width, scale, seed, salt);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < width; c++)
            p[(size_t)r * stride + c] = v[(size_t)r * width + c] + shift;
    free(v);
    return p;
}

/* Values in the gaps (columns width .. stride-1) that are not poison. */
static long gap_written(const float *h, int rows, int width, int stride) {
    long bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = width; c < stride; c++)
            bad += !is_poison(h[(size_t)r * stride + c]);
    return bad;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* The ten parameter tensors, in the structs' order. */
enum { P_LN_W, P_LN_B, P_IN, P_CONV_W, P_CONV_B, P_DT_BIAS, P_A_LOG, P_DSKIP, P_NORM_W, P_OUT, NP };
static const char *const PNAME[NP] = {"ln_w",    "ln_b",  "in_proj_w", "conv_w", "conv_b",
                                      "dt_bias", "A_log", "Dskip",     "norm_w", "out_proj_w"};

typedef struct {
    const char *name, *preset;
    int Bsz, pad, inplace;
    int same_strides; /* u_out as wide as u, du as du_out (set by in place) */
} m2_case;

/* Host inputs of a case and its sizes. */
typedef struct {
    st_dims d;
    int Bsz, R, D, us, uos, dos, dus; /* strides of u, u_out, du_out, du */
    size_t cnt[NP], nsaved, nwork;
    float *u, *du_out, *p[NP], *g0[NP];
} m2_data;

typedef struct {
    float *u_out, *saved, *du, *g[NP];
} m2_out;

static void param_counts(const st_dims *d, size_t *cnt) {
    size_t D = (size_t)d->D, di = (size_t)st_d_inner(d), cd = (size_t)st_conv_dim(d), H = (size_t)st_heads(d);
    size_t v[NP] = {D, D, (size_t)st_in_proj_out(d) * D, cd * d->W, cd, H, H, H, di, D * di};
    memcpy(cnt, v, sizeof v);
}

/* Random parameters in the ranges the block meets in training: norms near
 * 1, fan-in scaled matrices, dt_bias around softplus^-1(0.02), A_log around
 * log(U[1, 16]) (so dt and A are those of a live model). */
static void make_params(m2_data *h, uint64_t seed) {
    const st_dims *d = &h->d;
    const float scale[NP] = {0.2f, 0.2f, (float)(1 / sqrt(d->D)), (float)(0.5 / sqrt(d->W)), 0.2f, 0.5f, 0.5f, 0.2f,
                             0.2f, (float)(1 / sqrt(st_d_inner(d)))};
    const float shift[NP] = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, -4.0f, 1.4f, 1.0f, 1.0f, 0.0f};
    for (int k = 0; k < NP; k++) {
        h->p[k] = host_rows(1, (int)h->cnt[k], (int)h->cnt[k], scale[k], shift[k], seed, 10 + k);
        h->g0[k] = host_rows(1, (int)h->cnt[k], (int)h->cnt[k], 0.1f, 0.0f, seed, 30 + k);
    }
}

/* One GPU forward + backward (tail: the last block's tail). In place: the
 * forward writes over its input u, the backward (which needs the input)
 * reads a second copy, and du overwrites du_out. */
static void m2_gpu(const m2_case *c, const m2_data *h, m2_out *o, int tail) {
    const st_dims *d = &h->d;
    int R = h->R;
    float *u = dev_upload(h->u, (size_t)R * h->us), *u_bwd = u, *u_out;
    if (c->inplace) {
        u_out = u;
        u_bwd = dev_upload(h->u, (size_t)R * h->us);
    } else {
        u_out = dev_poisoned((size_t)R * h->uos);
    }
    float *du_out = dev_upload(h->du_out, (size_t)R * h->dos);
    float *du = c->inplace ? du_out : dev_poisoned((size_t)R * h->dus);
    float *saved = dev_poisoned(h->nsaved), *work = dev_poisoned(h->nwork), *p[NP], *g[NP];
    for (int k = 0; k < NP; k++)
        p[k] = dev_upload(h->p[k], h->cnt[k]), g[k] = dev_upload(h->g0[k], h->cnt[k]);
    st_cuda_mamba2_weights w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
    st_cuda_mamba2_grads gr = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]};
    int rc = (tail ? st_cuda_mamba2_forward_last : st_cuda_mamba2_forward)(d, h->Bsz, &w, u, h->us, u_out, h->uos,
                                                                           saved, work, NULL);
    CHECK(rc == ST_OK, "%s: forward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: forward kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->u_out = dev_download_new(u_out, (size_t)R * h->uos);
    cudaMemset(work, 0xFF, sizeof(float) * h->nwork); /* nothing may carry over in work */
    rc = (tail ? st_cuda_mamba2_backward_last : st_cuda_mamba2_backward)(d, h->Bsz, &w, u_bwd, h->us, saved, du_out,
                                                                         h->dos, du, h->dus, &gr, work, NULL);
    CHECK(rc == ST_OK, "%s: backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: backward kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->saved = dev_download_new(saved, h->nsaved);
    o->du = dev_download_new(du, (size_t)R * h->dus);
    for (int k = 0; k < NP; k++)
        o->g[k] = dev_download_new(g[k], h->cnt[k]), dev_free(p[k]), dev_free(g[k]);
    dev_free(u), dev_free(du_out), dev_free(saved), dev_free(work);
    if (c->inplace) dev_free(u_bwd);
    else dev_free(u_out), dev_free(du);
}

static void m2_out_free(m2_out *o) {
    free(o->u_out), free(o->saved), free(o->du);
    for (int k = 0; k < NP; k++)
        free(o->g[k]);
}

/* CPU reference (never in place). */
static void m2_cpu(const m2_data *h, m2_out *o) {
    int R = h->R;
    float *work = host_poisoned(st_mamba2_work_count(&h->d, h->Bsz)); /* the CPU's own scratch size */
    o->u_out = host_poisoned((size_t)R * h->uos), o->saved = host_poisoned(h->nsaved);
    o->du = host_poisoned((size_t)R * h->dus);
    for (int k = 0; k < NP; k++)
        o->g[k] = host_copy(h->g0[k], h->cnt[k]);
    float **p = (float **)h->p;
    st_mamba2_weights w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
    st_mamba2_grads gr = {o->g[0], o->g[1], o->g[2], o->g[3], o->g[4],
                          o->g[5], o->g[6], o->g[7], o->g[8], o->g[9]};
    st_mamba2_forward(&h->d, h->Bsz, &w, h->u, h->us, o->u_out, h->uos, o->saved, work);
    st_mamba2_backward(&h->d, h->Bsz, &w, h->u, h->us, o->saved, h->du_out, h->dos, o->du, h->dus, &gr, work);
    free(work);
}

static void m2_compare(const m2_case *c, const m2_data *h, const m2_out *cpu, const m2_out *gpu) {
    char what[96];
#define PARITY(label, err, bound)                                                                                      \
    do {                                                                                                               \
        snprintf(what, sizeof what, "%s %s", c->name, (label));                                                        \
        CHECK_PARITY(what, (err), (bound));                                                                            \
    } while (0)
    int R = h->R, D = h->D;
    PARITY("u_out", rel_err_rows(gpu->u_out, h->uos, cpu->u_out, h->uos, R, D), 1e-5);
    st_mamba2_region reg[ST_MAMBA2_SAVED_NREGIONS];
    st_mamba2_saved_layout(&h->d, h->Bsz, reg);
    for (int i = 0; i < ST_MAMBA2_SAVED_NREGIONS; i++) {
        char label[48];
        snprintf(label, sizeof label, "saved %s", reg[i].name);
        PARITY(label,
               rel_err_rows(gpu->saved + reg[i].offset, reg[i].stride, cpu->saved + reg[i].offset, reg[i].stride,
                            reg[i].rows, reg[i].cols),
               1e-5);
    }
    PARITY("du", rel_err_rows(gpu->du, h->dus, cpu->du, h->dus, R, D), 1e-4);
    for (int k = 0; k < NP; k++) {
        char label[48];
        snprintf(label, sizeof label, "d%s (+=)", PNAME[k]);
        PARITY(label, rel_err_added(gpu->g[k], cpu->g[k], h->g0[k], h->cnt[k]), 1e-4);
    }
#undef PARITY
    long gu = gap_written(gpu->u_out, R, D, h->uos), gd = gap_written(gpu->du, R, D, h->dus);
    CHECK(gu == 0 && gd == 0, "%s: padding written: u_out %ld, du %ld values", c->name, gu, gd);
}

static int m2_same(const m2_data *h, const m2_out *a, const m2_out *b) {
    size_t R = (size_t)h->R;
    int same = same_bits(a->u_out, b->u_out, R * h->uos) && same_bits(a->saved, b->saved, h->nsaved) &&
               same_bits(a->du, b->du, R * h->dus);
    for (int k = 0; k < NP; k++)
        same &= same_bits(a->g[k], b->g[k], h->cnt[k]);
    return same;
}

/* The inputs of case c. */
static void m2_setup(const m2_case *c, uint64_t seed, m2_data *hp) {
    m2_data h;
    memset(&h, 0, sizeof h);
    CHECK(st_dims_preset(c->preset, &h.d) == ST_OK, "%s: preset", c->name);
    int pad = c->pad;
    h.Bsz = c->Bsz, h.D = h.d.D, h.R = c->Bsz * h.d.K;
    h.us = h.D + pad;
    int same = c->inplace || c->same_strides;
    h.uos = same ? h.us : h.D + 2 * pad;
    h.dos = h.D + 3 * pad;
    h.dus = same ? h.dos : h.D + 5 * pad;
    h.nsaved = st_mamba2_saved_count(&h.d, h.Bsz), h.nwork = st_cuda_mamba2_work_count(&h.d, h.Bsz);
    CHECK(h.nsaved == st_cuda_mamba2_saved_count(&h.d, h.Bsz), "%s: GPU saved count %zu differs from the CPU's %zu",
          c->name, st_cuda_mamba2_saved_count(&h.d, h.Bsz), h.nsaved);
    param_counts(&h.d, h.cnt);
    h.u = host_rows(h.R, h.D, h.us, 1.0f, 0.0f, seed, 1);
    h.du_out = host_rows(h.R, h.D, h.dos, 1.0f, 0.0f, seed, 2);
    make_params(&h, seed);
    printf("%s: Bsz %d K %d D %d d_inner %d P %d H %d N %d G %d W %d Q %d, strides u %d u_out %d du_out %d du %d%s\n",
           c->name, h.Bsz, h.d.K, h.D, st_d_inner(&h.d), h.d.headdim, st_heads(&h.d), h.d.N, h.d.G, h.d.W, h.d.Q, h.us,
           h.uos, h.dos, h.dus, c->inplace ? " (in place)" : "");

    *hp = h;
}

static void m2_data_free(m2_data *h) {
    free(h->u), free(h->du_out);
    for (int k = 0; k < NP; k++)
        free(h->p[k]), free(h->g0[k]);
}

static void m2_case_run(const m2_case *c, uint64_t seed, m2_out *keep) {
    m2_data h;
    m2_setup(c, seed, &h);
    m2_out cpu, gpu[2];
    m2_cpu(&h, &cpu);
    m2_gpu(c, &h, &gpu[0], 0);
    m2_gpu(c, &h, &gpu[1], 0);
    m2_compare(c, &h, &cpu, &gpu[0]);
    CHECK(m2_same(&h, &gpu[0], &gpu[1]), "%s: two GPU runs differ", c->name);
    m2_out_free(&cpu), m2_out_free(&gpu[1]);
    if (keep) *keep = gpu[0];
    else m2_out_free(&gpu[0]);
    m2_data_free(&h);
}

/* Rows r % K != K-1 of a rows x cols block (row stride) that are not all poison. */
static long m2_other_rows_written(const float *p, int rows, int K, int cols, int stride) {
    long bad = 0;
    for (int r = 0; r < rows; r++)
        if (r % K != K - 1)
            for (int c = 0; c < cols; c++)
                bad += !is_poison(p[(size_t)r * stride + c]);
    return bad;
}

/* The tail against the full block (both GPU), du_out zero but at the last rows. */
static void m2_tail_run(const m2_case *c, uint64_t seed) {
    m2_data h;
    m2_setup(c, seed, &h);
    const int K = h.d.K, n = h.Bsz, R = h.R, D = h.D;
    for (int r = 0; r < R; r++)
        if (r % K != K - 1) memset(h.du_out + (size_t)r * h.dos, 0, sizeof(float) * D);
    m2_out full, tail[2];
    m2_gpu(c, &h, &full, 0);
    m2_gpu(c, &h, &tail[0], 1);
    m2_gpu(c, &h, &tail[1], 1);
    const m2_out *t = &tail[0];
    char what[96];
#define TAIL_PARITY(label, err, bound)                                                                                 \
    do {                                                                                                               \
        snprintf(what, sizeof what, "%s tail %s", c->name, (label));                                                   \
        CHECK_PARITY(what, (err), (bound));                                                                            \
    } while (0)
    const size_t lu = (size_t)(K - 1) * h.uos;
    TAIL_PARITY("u_out[K-1]", rel_err_rows(t->u_out + lu, K * h.uos, full.u_out + lu, K * h.uos, n, D), 1e-5);
    long other = 0;
    if (c->inplace) { /* u_out is u: its other rows keep u's values */
        for (int r = 0; r < R; r++)
            if (r % K != K - 1) other += !same_bits(t->u_out + (size_t)r * h.uos, h.u + (size_t)r * h.us, D);
    } else {
        other = m2_other_rows_written(t->u_out, R, K, D, h.uos);
    }
    CHECK(other == 0, "%s: the tail wrote %ld values of u_out outside rows K-1", c->name, other);
    st_mamba2_region reg[ST_MAMBA2_SAVED_NREGIONS];
    st_mamba2_saved_layout(&h.d, h.Bsz, reg);
    for (int i = 0; i < ST_MAMBA2_SAVED_NREGIONS; i++) {
        const st_mamba2_region *g = &reg[i];
        const float *a = t->saved + g->offset, *b = full.saved + g->offset;
        if (i == ST_MAMBA2_SAVED_SSD_Y || i == ST_MAMBA2_SAVED_GATED || i == ST_MAMBA2_SAVED_RMS_RSTD) {
            const size_t l = (size_t)(K - 1) * g->stride;
            char label[48];
            snprintf(label, sizeof label, "saved %s[K-1]", g->name);
            TAIL_PARITY(label, rel_err_rows(a + l, K * g->stride, b + l, K * g->stride, n, g->cols), 1e-5);
            long w = m2_other_rows_written(a, g->rows, K, g->cols, g->stride);
            CHECK(w == 0, "%s: the tail wrote %ld values of saved %s outside rows K-1", c->name, w, g->name);
        } else if (i == ST_MAMBA2_SAVED_IN_PROJ) { /* xBC, dt_raw at every row; z at rows K-1 only */
            const int di = st_d_inner(&h.d);
            const size_t l = (size_t)(K - 1) * g->stride;
            TAIL_PARITY("saved in_proj [xBC, dt_raw]",
                        rel_err_rows(a + di, g->stride, b + di, g->stride, g->rows, g->cols - di), 1e-5);
            TAIL_PARITY("saved in_proj z[K-1]", rel_err_rows(a + l, K * g->stride, b + l, K * g->stride, n, di), 1e-5);
            long w = m2_other_rows_written(a, g->rows, K, di, g->stride);
            CHECK(w == 0, "%s: the tail wrote %ld values of in_proj's z outside rows K-1", c->name, w);
        } else if (i == ST_MAMBA2_SAVED_CONV) { /* x, B at every row; C at rows K-1 only */
            const int xb = g->cols - h.d.G * h.d.N;
            const size_t l = (size_t)(K - 1) * g->stride;
            TAIL_PARITY("saved conv [x, B]", rel_err_rows(a, g->stride, b, g->stride, g->rows, xb), 1e-5);
            TAIL_PARITY("saved conv C[K-1]",
                        rel_err_rows(a + l + xb, K * g->stride, b + l + xb, K * g->stride, n, g->cols - xb), 1e-5);
            long w = m2_other_rows_written(a + xb, g->rows, K, g->cols - xb, g->stride);
            CHECK(w == 0, "%s: the tail wrote %ld values of conv's C outside rows K-1", c->name, w);
        } else if (i == ST_MAMBA2_SAVED_DT) { /* from in_proj's other products */
            char label[48];
            snprintf(label, sizeof label, "saved %s", g->name);
            TAIL_PARITY(label, rel_err_rows(a, g->stride, b, g->stride, g->rows, g->cols), 1e-5);
        } else {
            CHECK(same_bits(a, b, (size_t)g->rows * g->stride), "%s: the tail's saved %s differs from the block's",
                  c->name, g->name);
        }
    }
    TAIL_PARITY("du", rel_err_rows(t->du, h.dus, full.du, h.dus, R, D), 1e-4);
    for (int k = 0; k < NP; k++) {
        char label[48];
        snprintf(label, sizeof label, "d%s (+=)", PNAME[k]);
        TAIL_PARITY(label, rel_err_added(t->g[k], full.g[k], h.g0[k], h.cnt[k]), 1e-4);
    }
#undef TAIL_PARITY
    long gd = gap_written(t->du, R, D, h.dus), gu = gap_written(t->u_out, R, D, h.uos);
    CHECK(gd == 0, "%s: the tail wrote %ld values into du's padding", c->name, gd);
    CHECK(gu == 0, "%s: the tail wrote %ld values into u_out's padding (its 2-D copy, out_proj)", c->name, gu);
    CHECK(m2_same(&h, &tail[0], &tail[1]), "%s: two tail runs differ", c->name);
    m2_out_free(&full), m2_out_free(&tail[0]), m2_out_free(&tail[1]);
    m2_data_free(&h);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    const m2_case cases[] = {
        {"tiny", "tiny", 2, 0, 0, 0},
        {"tiny padded", "tiny", 3, 3, 0, 0},
        {"odd padded", "odd", 3, 1, 0, 0},
        {"default padded", "default", 2, 2, 0, 0},
        {"64 windows", "tiny", 64, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        m2_case_run(&cases[i], 6000 + i, NULL);

    /* In place against out of place on the same inputs and strides (only
     * the aliasing differs): the same bits. */
    const m2_case out_of_place = {"tiny (aliasing off)", "tiny", 2, 2, 0, 1};
    const m2_case in_place = {"tiny in place", "tiny", 2, 2, 1, 1};
    m2_out a, b;
    m2_case_run(&out_of_place, 6100, &a);
    m2_case_run(&in_place, 6100, &b);
    st_dims t;
    st_dims_preset("tiny", &t);
    int R = 2 * t.K, D = t.D;
    /* both: u_out stride D+2 (u's), du stride D+6 (du_out's) */
    int same_u = 1, same_du = 1;
    for (int r = 0; r < R; r++) {
        same_u &= same_bits(a.u_out + (size_t)r * (D + 2), b.u_out + (size_t)r * (D + 2), D);
        same_du &= same_bits(a.du + (size_t)r * (D + 6), b.du + (size_t)r * (D + 6), D);
    }
    CHECK(same_u && same_du, "in place differs from out of place: u_out %s, du %s", same_u ? "same" : "DIFFERS",
          same_du ? "same" : "DIFFERS");
    int same_g = 1;
    size_t cnt[NP];
    param_counts(&t, cnt);
    for (int k = 0; k < NP; k++)
        same_g &= same_bits(a.g[k], b.g[k], cnt[k]);
    CHECK(same_g, "in place: parameter gradients differ from out of place");
    m2_out_free(&a), m2_out_free(&b);

    /* the last block's tail against the full block */
    const m2_case tails[] = {
        {"tiny", "tiny", 3, 0, 0, 0},
        {"odd padded", "odd", 3, 1, 0, 0},
        {"default padded", "default", 4, 2, 0, 0},
        {"tiny in place", "tiny", 2, 2, 1, 1},
    };
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++)
        m2_tail_run(&tails[i], 6200 + i);
#endif
    TEST_MAIN_END();
}
