/* model.cu: the whole model on the GPU (cuda/model_cuda.h), the composition
 * of model/model.c with the CUDA ops, step for step:
 *   forward:  v = VSN(X[:, 0:F], X[:, F:F+C]); vc = [v; c]; u0 = w_in(vc);
 *             u_{l+1} = Mamba2_l(u_l); logits, value = heads(u_L[K-1], c[K-1]);
 *             block L-1 as its last-row tail (st_cuda_model_set_last_row_tail)
 *   backward: du_L = 0 but the last rows (heads); Mamba2 blocks in reverse;
 *             dvc = w_in backward; VSN backward writes dX[:, 0:F] and dc;
 *             dc += dvc[:, Dv:] (the w_in path), then the heads' dc on the
 *             last row of each window, in that order (the CPU's rounding).
 * Only the [v; c] concatenation and the context-gradient sum are kernels of
 * this file (one thread per element, pure copies and two float adds).
 * The window is read through its own row stride everywhere (never F or F+C).
 * The action step's forward reads no window but its description
 * (st_cuda_model_forward_rows): feature rows by index and one context row
 * a window, the selection GRN's ctx product formed once a window. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/heads_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/mamba2_cuda.h"
#include "cuda/model_cuda.h"
#include "cuda/vsn_cuda.h"
#include "cuda/vsn_forward_fused_cuda.h" /* st_cuda_vsn_table_fits */
#include "cuda/vsn_train_table_cuda.h"
#include "model/vsn.h" /* st_vsn_weights_f32 / st_vsn_grads_f32 (float build) */
#include "trace/trace.h" /* label kinds of the tracer hook */
}

/* The tracer hook of a labelled tensor (nothing without one). */
#define MD_SCAN(phase, kind, index, p, rows, width, stride)                                                    \
    do {                                                                                                       \
        if (m->scan) ST_TRY(m->scan(m->scan_ctx, (phase), (kind), (index), (p), (rows), (width), (stride)));  \
    } while (0)

#define MD_THREADS 256

static unsigned md_blocks(long n) { return (unsigned)((n + MD_THREADS - 1) / MD_THREADS); }

/* Device pointers into w and g, one per tensor, bound by name. */
struct st_cuda_model_views {
    st_vsn_weights_f32 vsn_w;
    st_vsn_grads_f32 vsn_g;
    const float *w_in_w, *w_in_b;
    float *g_w_in_w, *g_w_in_b;
    st_cuda_mamba2_weights *mix_w; /* [L] */
    st_cuda_mamba2_grads *mix_g;   /* [L] */
    st_cuda_heads_weights heads_w;
    st_cuda_heads_grads heads_g;
};

/* ---- binding ---------------------------------------------------------------- */

static void md_bind_vsn(st_cuda_model *m) {
    st_vsn_weights_f32 *w = &m->views->vsn_w;
    st_vsn_grads_f32 *g = &m->views->vsn_g;
#define MD_B(field, name)                                                                                      \
    w->field = m->w + st_param_offset(m->table, name);                                                         \
    g->field = m->g + st_param_offset(m->table, name)
    MD_B(embed_w, "vsn.embed_w");
    MD_B(embed_b, "vsn.embed_b");
    MD_B(sel_skip_w, "vsn.sel.skip.weight");
    MD_B(sel_skip_b, "vsn.sel.skip.bias");
    MD_B(sel_fc1_w, "vsn.sel.fc1.weight");
    MD_B(sel_fc1_b, "vsn.sel.fc1.bias");
    MD_B(sel_ctx_w, "vsn.sel.ctx.weight");
    MD_B(sel_fc2_w, "vsn.sel.fc2.weight");
    MD_B(sel_fc2_b, "vsn.sel.fc2.bias");
    MD_B(sel_glu_w, "vsn.sel.glu.weight");
    MD_B(sel_glu_b, "vsn.sel.glu.bias");
    MD_B(sel_norm_w, "vsn.sel.norm.weight");
    MD_B(sel_norm_b, "vsn.sel.norm.bias");
    MD_B(var_fc1_w, "vsn.var.fc1_w");
    MD_B(var_fc1_b, "vsn.var.fc1_b");
    MD_B(var_fc2_w, "vsn.var.fc2_w");
    MD_B(var_fc2_b, "vsn.var.fc2_b");
    MD_B(var_glu_w, "vsn.var.glu_w");
    MD_B(var_glu_b, "vsn.var.glu_b");
    MD_B(var_ln_w, "vsn.var.ln_w");
    MD_B(var_ln_b, "vsn.var.ln_b");
#undef MD_B
}

static void md_bind_mixer(st_cuda_model *m, int l) {
    st_cuda_mamba2_weights *w = &m->views->mix_w[l];
    st_cuda_mamba2_grads *g = &m->views->mix_g[l];
    char n[48];
#define MD_B(field, fmt)                                                                                       \
    snprintf(n, sizeof n, fmt, l);                                                                             \
    w->field = m->w + st_param_offset(m->table, n);                                                            \
    g->field = m->g + st_param_offset(m->table, n)
    MD_B(ln_w, "ln.%d.weight");
    MD_B(ln_b, "ln.%d.bias");
    MD_B(in_proj_w, "mix.%d.in_proj.weight");
    MD_B(conv_w, "mix.%d.conv_w");
    MD_B(conv_b, "mix.%d.conv_b");
    MD_B(dt_bias, "mix.%d.dt_bias");
    MD_B(A_log, "mix.%d.A_log");
    MD_B(Dskip, "mix.%d.Dskip");
    MD_B(norm_w, "mix.%d.norm_w");
    MD_B(out_proj_w, "mix.%d.out_proj.weight");
#undef MD_B
}

static void md_bind_heads(st_cuda_model *m) {
    st_cuda_heads_weights *w = &m->views->heads_w;
    st_cuda_heads_grads *g = &m->views->heads_g;
#define MD_B(field, name)                                                                                      \
    w->field = m->w + st_param_offset(m->table, name);                                                         \
    g->field = m->g + st_param_offset(m->table, name)
    MD_B(ln_w, "ln_f.weight");
    MD_B(ln_b, "ln_f.bias");
    MD_B(pi1_w, "pi1.weight");
    MD_B(pi1_b, "pi1.bias");
    MD_B(pi2_w, "pi2.weight");
    MD_B(pi2_b, "pi2.bias");
    MD_B(v1_w, "v1.weight");
    MD_B(v1_b, "v1.bias");
    MD_B(v2_w, "v2.weight");
    MD_B(v2_b, "v2.bias");
#undef MD_B
}

extern "C" void st_cuda_model_bind(st_cuda_model *m, float *w_dev, float *g_dev) {
    m->w = w_dev;
    m->g = g_dev;
    md_bind_vsn(m);
    m->views->w_in_w = w_dev + st_param_offset(m->table, "w_in.weight");
    m->views->w_in_b = w_dev + st_param_offset(m->table, "w_in.bias");
    m->views->g_w_in_w = g_dev + st_param_offset(m->table, "w_in.weight");
    m->views->g_w_in_b = g_dev + st_param_offset(m->table, "w_in.bias");
    for (int l = 0; l < m->d.L; l++)
        md_bind_mixer(m, l);
    md_bind_heads(m);
}

/* ---- activations ------------------------------------------------------------ */

static size_t md_max3(size_t a, size_t b, size_t c) {
    size_t x = a > b ? a : b;
    return x > c ? x : c;
}

/* Carves every activation out of base (a size pass when base is NULL); each
 * buffer starts on a 256-byte boundary. Returns the bytes. */
static size_t md_carve(st_cuda_model *m, char *base) {
    const st_dims *d = &m->d;
    int n = m->max_windows, rows = n * d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D;
    size_t total = 0;
#define MD_TAKE(ptr, count)                                                                                    \
    do {                                                                                                       \
        size_t bytes_ = sizeof(float) * (size_t)(count);                                                       \
        if (base) (ptr) = (float *)(base + total);                                                             \
        total += (bytes_ + 255) / 256 * 256;                                                                   \
    } while (0)
    MD_TAKE(m->vsn_v, (size_t)rows * Dv);
    MD_TAKE(m->vsn_alpha, (size_t)rows * F);
    MD_TAKE(m->vsn_saved, st_cuda_vsn_saved_count(rows, F, C, Dv));
    MD_TAKE(m->vc, (size_t)rows * (Dv + C));
    for (int l = 0; l <= d->L; l++)
        MD_TAKE(m->u[l], (size_t)rows * D);
    for (int l = 0; l < d->L; l++)
        MD_TAKE(m->mix_saved[l], st_cuda_mamba2_saved_count(d, n));
    MD_TAKE(m->heads_saved, st_cuda_heads_saved_count(n, D, C, d->Hh));
    MD_TAKE(m->du_a, (size_t)rows * D);
    MD_TAKE(m->du_b, (size_t)rows * D);
    MD_TAKE(m->dvc, (size_t)rows * (Dv + C));
    MD_TAKE(m->dc_rows, (size_t)rows * C);
    MD_TAKE(m->dc_head, (size_t)n * C);
    MD_TAKE(m->work, md_max3(st_cuda_vsn_work_count(rows, F, C, Dv), st_cuda_mamba2_work_count(d, n),
                             st_cuda_heads_work_count(n, D, C, d->Hh)));
#undef MD_TAKE
    return total;
}

extern "C" size_t st_cuda_model_activation_bytes(const st_dims *d, int max_windows) {
    st_cuda_model m;
    memset(&m, 0, sizeof m);
    m.d = *d;
    m.max_windows = max_windows;
    return md_carve(&m, NULL); /* the size pass touches no pointer table */
}

/* The training step's bar table: its index and table, in one allocation
 * (mem; the table's part only where none was lent). */
struct st_cuda_train_table {
    st_vsn_bar_index ix;
    float *tab;
    void *mem;
    size_t bytes;
};

extern "C" void st_cuda_model_free(st_cuda_model *m) {
    if (m->tt) {
        if (m->tt->mem) cudaFree(m->tt->mem);
        free(m->tt);
    }
    if (m->arena) cudaFree(m->arena);
    if (m->views) {
        free(m->views->mix_w);
        free(m->views->mix_g);
    }
    free(m->views);
    free(m->u);
    free(m->mix_saved);
    memset(m, 0, sizeof *m);
}

extern "C" int st_cuda_model_init(st_cuda_model *m, const st_dims *d, const st_param_table *t, int max_windows,
                                  float *w_dev, float *g_dev) {
    memset(m, 0, sizeof *m);
    ST_TRY(st_dims_validate(d));
    ST_REQUIRE(max_windows > 0, ST_ERR_INPUT, "the GPU model needs room for at least one window");
    ST_REQUIRE(d->Dv <= ST_CUDA_VSN_MAX_DV, ST_ERR_INPUT,
               "--vsn-hidden %d: the GPU backend takes at most %d (its VSN kernels hold a variable's values in "
               "registers); use a smaller one or --device cpu",
               d->Dv, ST_CUDA_VSN_MAX_DV);
    m->d = *d;
    m->max_windows = max_windows;
    m->table = t;
    m->views = (st_cuda_model_views *)calloc(1, sizeof *m->views);
    m->u = (float **)calloc((size_t)d->L + 1, sizeof *m->u);
    m->mix_saved = (float **)calloc((size_t)d->L, sizeof *m->mix_saved);
    if (m->views) {
        m->views->mix_w = (st_cuda_mamba2_weights *)calloc((size_t)d->L, sizeof *m->views->mix_w);
        m->views->mix_g = (st_cuda_mamba2_grads *)calloc((size_t)d->L, sizeof *m->views->mix_g);
    }
    if (!m->views || !m->u || !m->mix_saved || !m->views->mix_w || !m->views->mix_g) {
        st_cuda_model_free(m);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for the GPU model's tables");
    }
    m->arena_bytes = md_carve(m, NULL);
    cudaError_t e = cudaMalloc(&m->arena, m->arena_bytes);
    if (e != cudaSuccess) {
        size_t bytes = m->arena_bytes;
        m->arena = NULL;
        st_cuda_model_free(m);
        return ST_FAIL(ST_ERR_DEVICE, "cudaMalloc of %zu bytes for the GPU model's activations: %s", bytes,
                       cudaGetErrorString(e));
    }
    md_carve(m, (char *)m->arena);
    st_cuda_model_bind(m, w_dev, g_dev);
    return ST_OK;
}

/* ---- the two kernels of the composition ------------------------------------------- */

/* vc[r, 0:Dv] = v[r, 0:Dv];  vc[r, Dv:Dv+C] = c[r / c_per, 0:C]: c_per 1,
 * the window's own context columns (X + F, its stride); c_per K, one
 * context row a window (a window description's ctx). */
static __global__ void md_concat_kernel(int rows, int Dv, int C, const float *v, int v_stride, const float *c,
                                        int c_stride, int c_per, float *vc, int vc_stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    int w = Dv + C;
    if (i >= (long)rows * w) return;
    int r = (int)(i / w), j = (int)(i % w);
    vc[(size_t)r * vc_stride + j] =
        j < Dv ? v[(size_t)r * v_stride + j] : c[(size_t)(r / c_per) * c_stride + j - Dv];
}

/* dc[r, j] += dvc[r, Dv + j], then, on the last row of each window,
 * dc[r, j] += dc_head[b, j]: two float adds in the CPU model's order. */
static __global__ void md_context_grad_kernel(int rows, int K, int Dv, int C, const float *dvc, int dvc_stride,
                                              const float *dc_head, int dc_head_stride, float *dc, int dc_stride) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * C) return;
    int r = (int)(i / C), j = (int)(i % C);
    float *dst = dc + (size_t)r * dc_stride + j;
    float t = *dst + dvc[(size_t)r * dvc_stride + Dv + j];
    if (r % K == K - 1) t += dc_head[(size_t)(r / K) * dc_head_stride + j];
    *dst = t;
}

/* ---- forward and backward ------------------------------------------------------------ */

/* What a forward reads: a window X (row stride x_stride), or its
 * description (x NULL): window b's row k is feature row
 * feat_row[b K + k] of feat and its context ctx[b]. */
struct md_input {
    const float *x;
    int x_stride;
    const float *feat;
    int feat_stride;
    const int *feat_row;
    const float *ctx;
    int ctx_stride;
};

static int last_row_tail = 1;
extern "C" void st_cuda_model_set_last_row_tail(int on) { last_row_tail = on != 0; }
extern "C" int st_cuda_model_last_row_tail(void) { return last_row_tail; }

/* The forward, the VSN's v through the bar table tab when it is given
 * (tab_row: each window row's table row; a description's feat_row), or
 * through the training table m->tt (its index built; a window's forward
 * only) when train_table. */
static int model_forward(st_cuda_model *m, int n, const md_input &in, const float *tab, const int *tab_row,
                         int train_table, float *logits, int logits_stride, float *value) {
    const st_dims *d = &m->d;
    const st_cuda_model_views *vw = m->views;
    cudaStream_t st = (cudaStream_t)m->stream;
    int K = d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D, rows = n * K, vcw = Dv + C;
    ST_REQUIRE(n > 0 && n <= m->max_windows, ST_ERR_INPUT, "GPU model forward: %d windows, room for 1..%d", n,
               m->max_windows);
    const float *X = in.x;
    int x_stride = in.x_stride;
    ST_REQUIRE(!X || x_stride >= F + C, ST_ERR_INPUT, "GPU model forward: window row stride %d < F+C = %d", x_stride,
               F + C);
    m->n = n;
    m->x = X; /* NULL after a forward from a description: no backward (st_cuda_model_backward says so) */
    m->x_stride = x_stride;
    int ph = m->scan_phase;
    m->tt_used = train_table;
    if (!X)
        ST_TRY(st_cuda_vsn_forward_rows(rows, K, F, C, Dv, in.feat, in.feat_stride, in.feat_row, in.ctx, in.ctx_stride,
                                        &vw->vsn_w, tab, m->vsn_v, Dv, m->vsn_alpha, F, m->vsn_saved, m->work, st));
    else if (train_table)
        ST_TRY(st_cuda_vsn_forward_train_table(rows, F, C, Dv, X, x_stride, X + F, x_stride, &vw->vsn_w, &m->tt->ix,
                                               m->tt->tab, m->vsn_v, Dv, m->vsn_alpha, F, m->vsn_saved, m->work, st));
    else if (tab)
        ST_TRY(st_cuda_vsn_forward_table(rows, F, C, Dv, X, x_stride, X + F, x_stride, &vw->vsn_w, tab, tab_row,
                                         m->vsn_v, Dv, m->vsn_alpha, F, m->vsn_saved, m->work, st));
    else
        ST_TRY(st_cuda_vsn_forward(rows, F, C, Dv, X, x_stride, X + F, x_stride, &vw->vsn_w, m->vsn_v, Dv,
                                   m->vsn_alpha, F, m->vsn_saved, m->work, st));
    MD_SCAN(ph, ST_TK_VSN_OUT, 0, m->vsn_v, rows, Dv, Dv);
    MD_SCAN(ph, ST_TK_VSN_ALPHA, 0, m->vsn_alpha, rows, F, F);
    /* the context of every row (a window's columns), or of every window (its last row's, for the heads) */
    const float *c_rows = X ? X + F : in.ctx, *c_last = X ? X + (size_t)(K - 1) * x_stride + F : in.ctx;
    int c_rows_stride = X ? x_stride : in.ctx_stride, c_per = X ? 1 : K, c_last_stride = X ? K * x_stride : in.ctx_stride;
    md_concat_kernel<<<md_blocks((long)rows * vcw), MD_THREADS, 0, st>>>(rows, Dv, C, m->vsn_v, Dv, c_rows,
                                                                         c_rows_stride, c_per, m->vc, vcw);
    ST_CUDA_LAUNCHED();
    MD_SCAN(ph, ST_TK_W_IN_IN, 0, m->vc, rows, vcw, vcw);
    ST_TRY(st_cuda_linear_forward(rows, vcw, D, m->vc, vcw, vw->w_in_w, vw->w_in_b, m->u[0], D, st));
    MD_SCAN(ph, ST_TK_W_IN_OUT, 0, m->u[0], rows, D, D);
    m->tail_used = last_row_tail && st_cuda_mamba2_last_fits(d); /* else the full block: a window too long */
    for (int l = 0; l < d->L; l++) {
        if (l == d->L - 1 && m->tail_used)
            ST_TRY(st_cuda_mamba2_forward_last(d, n, &vw->mix_w[l], m->u[l], D, m->u[l + 1], D, m->mix_saved[l],
                                               m->work, st));
        else
            ST_TRY(st_cuda_mamba2_forward(d, n, &vw->mix_w[l], m->u[l], D, m->u[l + 1], D, m->mix_saved[l], m->work,
                                          st));
        /* u_L's label is its last rows (what the heads read; all the tail writes) */
        if (l == d->L - 1)
            MD_SCAN(ph, ST_TK_MIX_OUT, l, m->u[l + 1] + (size_t)(K - 1) * D, n, D, (int64_t)K * D);
        else
            MD_SCAN(ph, ST_TK_MIX_OUT, l, m->u[l + 1], rows, D, D);
    }
    ST_TRY(st_cuda_heads_forward(n, D, C, d->Hh, d->A, m->u[d->L] + (size_t)(K - 1) * D, K * D, c_last, c_last_stride,
                                 &vw->heads_w, logits, logits_stride, value, m->heads_saved, st));
    MD_SCAN(ph, ST_TK_LOGITS, 0, logits, n, d->A, logits_stride);
    MD_SCAN(ph, ST_TK_VALUE, 0, value, 1, n, n);
    return ST_OK;
}

extern "C" int st_cuda_model_forward(st_cuda_model *m, int n, const float *X, int x_stride, float *logits,
                                     int logits_stride, float *value) {
    ST_REQUIRE(X, ST_ERR_INPUT, "GPU model forward: no window");
    md_input in = {X, x_stride, NULL, 0, NULL, NULL, 0};
    return model_forward(m, n, in, NULL, NULL, 0, logits, logits_stride, value);
}

extern "C" int st_cuda_model_forward_rows(st_cuda_model *m, int n, const float *feat, int feat_stride,
                                          const int *feat_row, const float *ctx, int ctx_stride, const float *tab,
                                          float *logits, int logits_stride, float *value) {
    const st_dims *d = &m->d;
    ST_REQUIRE(feat && feat_row && feat_stride >= d->F, ST_ERR_INPUT,
               "GPU model forward from window rows: no feature rows, or their row stride %d < F = %d", feat_stride,
               d->F);
    ST_REQUIRE(d->C == 0 || (ctx && ctx_stride >= d->C), ST_ERR_INPUT,
               "GPU model forward from window rows: no context, or its row stride %d < C = %d", ctx_stride, d->C);
    md_input in = {NULL, 0, feat, feat_stride, feat_row, ctx, ctx_stride};
    return model_forward(m, n, in, tab, feat_row, 0, logits, logits_stride, value);
}

extern "C" int st_cuda_model_table_fits(const st_cuda_model *m) { return st_cuda_vsn_table_fits(m->d.F, m->d.Dv); }

extern "C" int st_cuda_model_table_build(st_cuda_model *m, long bars, const float *s, int s_stride, float *tab) {
    ST_REQUIRE(bars >= 0 && bars <= INT_MAX, ST_ERR_INPUT, "GPU bar table: %ld bars (at most %d)", bars, INT_MAX);
    return st_cuda_vsn_table_build((int)bars, m->d.F, m->d.Dv, s, s_stride, &m->views->vsn_w, tab, m->work,
                                   (cudaStream_t)m->stream);
}

extern "C" int st_cuda_model_forward_table(st_cuda_model *m, int n, const float *X, int x_stride, const float *tab,
                                           const int *tab_row, float *logits, int logits_stride, float *value) {
    ST_REQUIRE(X, ST_ERR_INPUT, "GPU model forward through a bar table: no window");
    ST_REQUIRE(tab && tab_row, ST_ERR_INPUT, "GPU model forward through a bar table: no table");
    md_input in = {X, x_stride, NULL, 0, NULL, NULL, 0};
    return model_forward(m, n, in, tab, tab_row, 0, logits, logits_stride, value);
}

static int train_table_mode = ST_CUDA_TRAIN_TABLE_AUTO;
extern "C" void st_cuda_model_set_train_table(int mode) { train_table_mode = mode; }

extern "C" int st_cuda_model_train_table_wanted(const st_dims *d, int max_windows, long bars) {
    const double rows = (double)max_windows * d->K;
    if (train_table_mode == ST_CUDA_TRAIN_TABLE_OFF || !st_cuda_vsn_table_fits(d->F, d->Dv)) return 0;
    if (bars <= 0 || bars > INT_MAX || max_windows <= 0 || rows > INT_MAX) return 0;
    if (train_table_mode == ST_CUDA_TRAIN_TABLE_ON) return 1;
    return (double)bars * -expm1(-rows / (double)bars) <= 0.8 * rows;
}

extern "C" int st_cuda_model_train_table_init(st_cuda_model *m, long bars, float *tab, size_t tab_floats) {
    const st_dims *d = &m->d;
    const long rows_max = (long)m->max_windows * d->K;
    ST_REQUIRE(!m->tt, ST_ERR_INPUT, "GPU training bar table: the model has one already");
    ST_REQUIRE(st_cuda_vsn_table_fits(d->F, d->Dv), ST_ERR_INPUT,
               "GPU training bar table: the fused VSN kernels do not take Dv = %d (8, 16 or 32), or are switched off",
               d->Dv);
    ST_REQUIRE(bars > 0 && bars <= INT_MAX && rows_max <= INT_MAX, ST_ERR_INPUT,
               "GPU training bar table: %ld bars and %ld rows a minibatch (each must be 1..%d)", bars, rows_max,
               INT_MAX);
    st_cuda_train_table *tt = (st_cuda_train_table *)calloc(1, sizeof *tt);
    ST_REQUIRE(tt, ST_ERR_MEMORY, "GPU training bar table: out of host memory");
    int rc = st_cuda_vsn_bar_index_at(&tt->ix, NULL, (int)rows_max, (int)bars);
    const size_t P = (size_t)d->F * d->Dv, tab_need = (size_t)tt->ix.cap * P;
    const int own_tab = !tab || tab_floats < tab_need;
    tt->bytes = tt->ix.total_bytes + (own_tab ? sizeof(float) * tab_need : 0);
    cudaError_t e = rc == ST_OK ? cudaMalloc(&tt->mem, tt->bytes) : cudaSuccess;
    if (rc == ST_OK && e != cudaSuccess) {
        tt->mem = NULL;
        rc = ST_FAIL(ST_ERR_DEVICE, "GPU training bar table: cudaMalloc of %zu bytes (index of %ld rows, table of %d "
                                    "bars): %s",
                     tt->bytes, rows_max, tt->ix.cap, cudaGetErrorString(e));
    }
    if (rc == ST_OK) rc = st_cuda_vsn_bar_index_at(&tt->ix, tt->mem, (int)rows_max, (int)bars);
    if (rc != ST_OK) {
        if (tt->mem) cudaFree(tt->mem);
        free(tt);
        return rc;
    }
    tt->tab = own_tab ? (float *)((char *)tt->mem + tt->ix.total_bytes) : tab;
    m->tt = tt;
    return ST_OK;
}

extern "C" size_t st_cuda_model_train_table_bytes(const st_cuda_model *m) { return m->tt ? m->tt->bytes : 0; }

extern "C" int st_cuda_model_forward_train_table(st_cuda_model *m, int n, const float *X, int x_stride,
                                                 const int *bar_rows, float *logits, int logits_stride, float *value) {
    ST_REQUIRE(m->tt, ST_ERR_INPUT, "GPU model forward through the training bar table: none (call "
                                    "st_cuda_model_train_table_init first)");
    ST_REQUIRE(X, ST_ERR_INPUT, "GPU model forward through the training bar table: no window");
    ST_REQUIRE(bar_rows, ST_ERR_INPUT, "GPU model forward through the training bar table: no bar of each row");
    ST_REQUIRE(n > 0 && n <= m->max_windows, ST_ERR_INPUT,
               "GPU model forward through the training bar table: %d windows, room for 1..%d", n, m->max_windows);
    ST_TRY(st_cuda_vsn_bar_index_build(&m->tt->ix, n * m->d.K, bar_rows, m->stream));
    md_input in = {X, x_stride, NULL, 0, NULL, NULL, 0};
    return model_forward(m, n, in, NULL, NULL, 1, logits, logits_stride, value);
}

extern "C" int st_cuda_model_backward(st_cuda_model *m, const float *dlogits, int dlogits_stride, const float *dvalue,
                                      float *dX, int dx_stride) {
    const st_dims *d = &m->d;
    const st_cuda_model_views *vw = m->views;
    cudaStream_t st = (cudaStream_t)m->stream;
    int n = m->n, K = d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D, rows = n * K, vcw = Dv + C;
    ST_REQUIRE(n > 0, ST_ERR_INPUT, "GPU model backward without a forward");
    ST_REQUIRE(m->x, ST_ERR_INPUT,
               "GPU model backward after a forward from window rows (st_cuda_model_forward_rows, the action step's): "
               "it keeps no window to differentiate; run st_cuda_model_forward on the window instead");
    ST_REQUIRE(!dX || dx_stride >= F + C, ST_ERR_INPUT, "GPU model backward: dX row stride %d < F+C = %d", dx_stride,
               F + C);
    /* Heads: only the last row of each window receives a gradient. */
    float *du = m->du_a, *du_next = m->du_b;
    ST_CUDA_TRY(cudaMemsetAsync(du, 0, sizeof(float) * (size_t)rows * D, st));
    ST_TRY(st_cuda_heads_backward(n, D, C, d->Hh, d->A, m->u[d->L] + (size_t)(K - 1) * D, K * D, &vw->heads_w,
                                  m->heads_saved, dlogits, dlogits_stride, dvalue, du + (size_t)(K - 1) * D, K * D,
                                  m->dc_head, C, 0, &vw->heads_g, m->work, st));
    MD_SCAN(ST_PHASE_BWD, ST_TK_DU, d->L, du, rows, D, D);
    MD_SCAN(ST_PHASE_BWD, ST_TK_DC_HEAD, 0, m->dc_head, n, C, C);
    for (int l = d->L - 1; l >= 0; l--) {
        if (l == d->L - 1 && m->tail_used)
            ST_TRY(st_cuda_mamba2_backward_last(d, n, &vw->mix_w[l], m->u[l], D, m->mix_saved[l], du, D, du_next, D,
                                                &vw->mix_g[l], m->work, st));
        else
            ST_TRY(st_cuda_mamba2_backward(d, n, &vw->mix_w[l], m->u[l], D, m->mix_saved[l], du, D, du_next, D,
                                           &vw->mix_g[l], m->work, st));
        MD_SCAN(ST_PHASE_BWD, ST_TK_DU, l, du_next, rows, D, D);
        float *t = du;
        du = du_next;
        du_next = t;
    }
    ST_TRY(st_cuda_linear_backward(rows, vcw, D, m->vc, vcw, vw->w_in_w, du, D, m->dvc, vcw, 0, vw->g_w_in_w,
                                   vw->g_w_in_b, st));
    MD_SCAN(ST_PHASE_BWD, ST_TK_DVC, 0, m->dvc, rows, vcw, vcw);
    /* VSN: the snapshot gradient goes to dX; the context gradient to dX's
     * context columns (or scratch), then the w_in and head paths add in. */
    float *dc = dX ? dX + F : m->dc_rows;
    int dc_stride = dX ? dx_stride : C;
    /* The training table's backward (it forms no snapshot gradient) where its dT and partials fit
     * the VSN's work slots: not below ~43 rows at Dv = 32 (~23 at 16, ~14 at 8), where one split's
     * partials outweigh the rows; there the per-row backward, valid after either forward. */
    const int tt_cap = m->tt ? (m->tt->ix.cap < rows ? m->tt->ix.cap : rows) : 0;
    if (m->tt_used && !dX && st_cuda_vsn_train_table_work_fits(rows, F, Dv, tt_cap))
        ST_TRY(st_cuda_vsn_backward_train_table(rows, F, C, Dv, m->x, m->x_stride, m->x + F, m->x_stride, &vw->vsn_w,
                                                m->vsn_saved, m->dvc, vcw, NULL, 0, dc, dc_stride, 0, &vw->vsn_g,
                                                &m->tt->ix, m->tt->tab, m->work, st));
    else
        ST_TRY(st_cuda_vsn_backward(rows, F, C, Dv, m->x, m->x_stride, m->x + F, m->x_stride, &vw->vsn_w,
                                    m->vsn_saved, m->dvc, vcw, dX, dx_stride, dc, dc_stride, 0, &vw->vsn_g, m->work,
                                    st));
    md_context_grad_kernel<<<md_blocks((long)rows * C), MD_THREADS, 0, st>>>(rows, K, Dv, C, m->dvc, vcw, m->dc_head,
                                                                             C, dc, dc_stride);
    ST_CUDA_LAUNCHED();
    MD_SCAN(ST_PHASE_BWD, ST_TK_DC, 0, dc, rows, C, dc_stride);
    return ST_OK;
}
