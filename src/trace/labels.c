/* labels.c: the label registry of the NaN/Inf tracer, declared here once.
 *
 * build() walks one training step in execution order and adds a label for
 * every tensor it touches; the CLI table, the hooks (through the slot
 * table), the records and the report all read this table. Shapes depend on
 * the batch sizes, names and numbers do not.
 *
 * The saved blocks of the VSN and of the heads are laid out privately by
 * vsn.c and heads.c; their regions are restated here from those files'
 * documented layouts, and the build fails (ST_ERR_INTERNAL) when the
 * restated total differs from st_vsn_saved_count / st_heads_saved_count,
 * so a layout change cannot go unnoticed. The Mamba2 block publishes its
 * layout (st_mamba2_saved_layout), which is used as is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/heads.h"
#include "model/mamba2.h"
#include "model/vsn.h"
#include "trace/trace.h"

static const char *const phase_names[] = {
#define ST_TRACE_PHASE_NAME(e, name, what) name,
    ST_TRACE_PHASES(ST_TRACE_PHASE_NAME)
#undef ST_TRACE_PHASE_NAME
};
static const char *const phase_whats[] = {
#define ST_TRACE_PHASE_WHAT(e, name, what) what,
    ST_TRACE_PHASES(ST_TRACE_PHASE_WHAT)
#undef ST_TRACE_PHASE_WHAT
};

const char *st_trace_phase_name(st_trace_phase p) { return p >= 0 && p < ST_PHASE_COUNT ? phase_names[p] : "?"; }
const char *st_trace_phase_what(st_trace_phase p) { return p >= 0 && p < ST_PHASE_COUNT ? phase_whats[p] : "?"; }

void st_label_param_name(const char *param, char *out, size_t n) {
    char buf[96];
    size_t o = 0;
    const char *p = param;
    while (*p && o + 2 < sizeof buf) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        int digits = len > 0;
        for (size_t i = 0; i < len; i++)
            digits &= p[i] >= '0' && p[i] <= '9';
        /* "mix.0" -> "mix0"; a final "weight"/"bias" -> "W"/"b" */
        if (o > 0 && !digits) buf[o++] = '_';
        if (!dot && len == 6 && strncmp(p, "weight", 6) == 0)
            buf[o++] = 'W';
        else if (!dot && len == 4 && strncmp(p, "bias", 4) == 0)
            buf[o++] = 'b';
        else
            for (size_t i = 0; i < len && o + 1 < sizeof buf; i++)
                buf[o++] = p[i];
        p = dot ? dot + 1 : p + len;
    }
    buf[o] = 0;
    snprintf(out, n, "%s", buf);
}

/* ---- the builder ---------------------------------------------------------- */

typedef struct {
    st_label_table *t;
    int cap;
} builder;

typedef struct {
    int ndim;
    int64_t shape[4];
    const char *dim[4];
} shape_spec;

static shape_spec shp1(int64_t a, const char *da) { return (shape_spec){1, {a}, {da}}; }
static shape_spec shp2(int64_t a, int64_t b, const char *da, const char *db) {
    return (shape_spec){2, {a, b}, {da, db}};
}
static shape_spec shp3(int64_t a, int64_t b, int64_t c, const char *da, const char *db, const char *dc) {
    return (shape_spec){3, {a, b, c}, {da, db, dc}};
}

/* Adds a label; rows x width is the scanned view, stride its row stride. */
static int add(builder *b, st_trace_phase ph, st_trace_kind k, int index, const char *tensor, shape_spec s,
               int64_t rows, int64_t width, int64_t stride, int f64, size_t offset) {
    st_label_table *t = b->t;
    if (t->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 256;
        st_label *l = realloc(t->l, sizeof *l * (size_t)cap);
        if (!l) return ST_FAIL(ST_ERR_MEMORY, "cannot grow the label table");
        t->l = l;
        b->cap = cap;
    }
    st_label *l = &t->l[t->n];
    memset(l, 0, sizeof *l);
    int w = snprintf(l->name, sizeof l->name, "%s_%s", phase_names[ph], tensor);
    if (w < 0 || (size_t)w >= sizeof l->name) return ST_FAIL(ST_ERR_INTERNAL, "label name too long: %s", tensor);
    l->id = t->n;
    l->phase = ph;
    l->kind = k;
    l->index = index;
    l->f64 = f64;
    l->ndim = s.ndim;
    for (int i = 0; i < s.ndim; i++)
        l->shape[i] = s.shape[i], l->dim[i] = s.dim[i];
    l->rows = rows;
    l->width = width;
    l->stride = stride;
    l->offset = offset;
    t->n++;
    return ST_OK;
}

/* A [n*K, w] activation of n windows, coordinates (b, k, col). */
static int add_rows(builder *b, st_trace_phase ph, st_trace_kind k, int index, const char *tensor, int n, int K, int w,
                    int stride, const char *col) {
    return add(b, ph, k, index, tensor, shp3(n, K, w, "b", "k", col), (int64_t)n * K, w, stride, 0, 0);
}

/* The parameter tensors of one flat buffer: "<prefix><param>". */
static int add_params(builder *b, st_trace_phase ph, st_trace_kind k, const char *prefix, const st_param_table *pt) {
    for (int i = 0; i < pt->n; i++) {
        const st_param *p = &pt->p[i];
        char nm[64], full[96];
        st_label_param_name(p->name, nm, sizeof nm);
        snprintf(full, sizeof full, "%s%s", prefix, nm);
        shape_spec s = p->ndim == 1   ? shp1(p->shape[0], "i")
                       : p->ndim == 2 ? shp2(p->shape[0], p->shape[1], "row", "col")
                                      : shp3(p->shape[0], p->shape[1], p->shape[2], "j", "row", "col");
        /* one row for a vector, else rows of the first dimension */
        int64_t rows = p->ndim == 1 ? 1 : p->shape[0], width = (int64_t)p->count / rows;
        ST_TRY(add(b, ph, k, i, full, s, rows, width, width, 0, 0));
    }
    return ST_OK;
}

/* The forward tensors of the model over n windows (act: B, train: mb). */
static int add_forward(builder *b, st_trace_phase ph, const st_dims *d, int n, int pad) {
    int K = d->K, F = d->F, C = d->C, Dv = d->Dv, D = d->D;
    ST_TRY(add_rows(b, ph, ST_TK_WINDOW, 0, "window", n, K, F + C, F + C + pad, "f"));
    ST_TRY(add_rows(b, ph, ST_TK_VSN_OUT, 0, "vsn_out", n, K, Dv, Dv + pad, "j"));
    ST_TRY(add_rows(b, ph, ST_TK_VSN_ALPHA, 0, "vsn_alpha", n, K, F, F + pad, "f"));
    ST_TRY(add_rows(b, ph, ST_TK_W_IN_IN, 0, "w_in_in", n, K, Dv + C, Dv + C + pad, "col"));
    ST_TRY(add_rows(b, ph, ST_TK_W_IN_OUT, 0, "w_in_out", n, K, D, D + pad, "d"));
    for (int l = 0; l < d->L; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "mix%d_out", l);
        if (l == d->L - 1) /* u_L: its last rows, all the heads read (and all the GPU's tail writes) */
            ST_TRY(add(b, ph, ST_TK_MIX_OUT, l, nm, shp2(n, D, "b", "d"), n, D, (int64_t)K * (D + pad), 0, 0));
        else
            ST_TRY(add_rows(b, ph, ST_TK_MIX_OUT, l, nm, n, K, D, D + pad, "d"));
    }
    ST_TRY(add(b, ph, ST_TK_LOGITS, 0, "logits", shp2(n, d->A, "b", "a"), n, d->A, d->A, 0, 0));
    return add(b, ph, ST_TK_VALUE, 0, "value", shp1(n, "b"), 1, n, n, 0, 0);
}

/* The VSN's saved block (layout of vsn.c: contiguous regions, in order). */
static int add_vsn_saved(builder *b, const st_dims *d, int n) {
    int K = d->K, F = d->F, Dv = d->Dv, Hs = st_sel_hidden(d), P = F * Dv;
    int64_t R = (int64_t)n * K;
    const struct {
        const char *name;
        int cols;
    } reg[] = {
        {"sel_h1", Hs},  {"sel_h2", Hs},  {"sel_glu", 2 * F}, {"sel_x", F},  {"sel_mean", 1},
        {"sel_rstd", 1}, {"alpha", F},    {"var_h1", P},      {"var_h2", P}, {"var_glu", 2 * P},
        {"var_x", P},    {"var_mean", F}, {"var_rstd", F},
    };
    size_t off = 0;
    for (int i = 0; i < (int)(sizeof reg / sizeof reg[0]); i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "vsn_%s", reg[i].name);
        shape_spec s = reg[i].cols == 1 ? shp2(n, K, "b", "k") : shp3(n, K, reg[i].cols, "b", "k", "col");
        ST_TRY(add(b, ST_PHASE_SAVED, ST_TK_VSN_SAVED, i, nm, s, R, reg[i].cols, reg[i].cols, 0, off));
        off += (size_t)R * (size_t)reg[i].cols;
    }
    size_t want = st_vsn_saved_count((int)R, F, d->C, Dv);
    ST_REQUIRE(off == want, ST_ERR_INTERNAL,
               "the tracer's copy of the VSN saved layout (%zu reals) no longer matches vsn.c (%zu): update "
               "add_vsn_saved in trace/labels.c",
               off, want);
    return ST_OK;
}

/* The regions the last block's tail writes at the last rows only (the GPU's
 * st_cuda_mamba2_forward_last): downstream of the SSD, per row. (Its
 * in_proj's z columns and its conv's C columns too: those labels are the
 * xBC and dt_raw columns, and the x and B columns.) */
static int tail_region(int i) {
    return i == ST_MAMBA2_SAVED_SSD_Y || i == ST_MAMBA2_SAVED_GATED || i == ST_MAMBA2_SAVED_RMS_RSTD;
}

static int add_mix_saved(builder *b, const st_dims *d, int n, int l) {
    st_mamba2_region reg[ST_MAMBA2_SAVED_NREGIONS];
    st_mamba2_saved_layout(d, n, reg);
    for (int i = 0; i < ST_MAMBA2_SAVED_NREGIONS; i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "mix%d_%s", l, reg[i].name);
        const st_mamba2_region *r = &reg[i];
        if (l == d->L - 1 && i == ST_MAMBA2_SAVED_IN_PROJ) { /* the tail's z is at rows K-1 only: xBC, dt_raw */
            const int di = st_d_inner(d), cols = r->cols - di;
            ST_TRY(add(b, ST_PHASE_SAVED, ST_TK_MIX_SAVED, l * ST_MAMBA2_SAVED_NREGIONS + i, nm,
                       shp3(n, d->K, cols, "b", "k", "col"), r->rows, cols, r->stride, 0, r->offset + (size_t)di));
            continue;
        }
        if (l == d->L - 1 && i == ST_MAMBA2_SAVED_CONV) { /* the tail's C is at rows K-1 only: x, B */
            const int cols = r->cols - d->G * d->N;
            ST_TRY(add(b, ST_PHASE_SAVED, ST_TK_MIX_SAVED, l * ST_MAMBA2_SAVED_NREGIONS + i, nm,
                       shp3(n, d->K, cols, "b", "k", "col"), r->rows, cols, r->stride, 0, r->offset));
            continue;
        }
        if (l == d->L - 1 && tail_region(i)) { /* row K-1 of each window: n rows, K rows apart */
            shape_spec s = r->cols == 1 ? shp1(n, "b") : shp2(n, r->cols, "b", "col");
            ST_TRY(add(b, ST_PHASE_SAVED, ST_TK_MIX_SAVED, l * ST_MAMBA2_SAVED_NREGIONS + i, nm, s, n, r->cols,
                       (int64_t)d->K * r->stride, 0, r->offset + (size_t)(d->K - 1) * (size_t)r->stride));
            continue;
        }
        shape_spec s = r->cols == 1 ? shp2(n, d->K, "b", "k") : shp3(n, d->K, r->cols, "b", "k", "col");
        ST_TRY(add(b, ST_PHASE_SAVED, ST_TK_MIX_SAVED, l * ST_MAMBA2_SAVED_NREGIONS + i, nm, s, r->rows, r->cols,
                   r->stride, 0, r->offset));
    }
    return ST_OK;
}

/* The heads' saved block (layout of heads.c: mean, rstd, g, p, q). */
static int add_heads_saved(builder *b, const st_dims *d, int n) {
    int D = d->D, C = d->C, Hh = d->Hh;
    const struct {
        const char *name;
        int cols;
    } reg[] = {{"mean", 1}, {"rstd", 1}, {"g", D + C}, {"p", Hh}, {"q", Hh}};
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "heads_%s", reg[i].name);
        shape_spec s = reg[i].cols == 1 ? shp1(n, "b") : shp2(n, reg[i].cols, "b", "col");
        ST_TRY(add(b, ST_PHASE_SAVED, ST_TK_HEADS_SAVED, i, nm, s, n, reg[i].cols, reg[i].cols, 0, off));
        off += (size_t)n * (size_t)reg[i].cols;
    }
    size_t want = st_heads_saved_count(n, D, C, Hh);
    ST_REQUIRE(off == want, ST_ERR_INTERNAL,
               "the tracer's copy of the heads saved layout (%zu reals) no longer matches heads.c (%zu): update "
               "add_heads_saved in trace/labels.c",
               off, want);
    return ST_OK;
}

static int add_backward(builder *b, const st_dims *d, int n, int pad) {
    int K = d->K, C = d->C, D = d->D, Dv = d->Dv;
    ST_TRY(add(b, ST_PHASE_BWD, ST_TK_DLOGITS, 0, "dlogits", shp2(n, d->A, "b", "a"), n, d->A, d->A, 0, 0));
    ST_TRY(add(b, ST_PHASE_BWD, ST_TK_DVALUE, 0, "dvalue", shp1(n, "b"), 1, n, n, 0, 0));
    char nm[32];
    snprintf(nm, sizeof nm, "du%d", d->L);
    ST_TRY(add_rows(b, ST_PHASE_BWD, ST_TK_DU, d->L, nm, n, K, D, D + pad, "d"));
    ST_TRY(add(b, ST_PHASE_BWD, ST_TK_DC_HEAD, 0, "dc_head", shp2(n, C, "b", "c"), n, C, C, 0, 0));
    for (int l = d->L - 1; l >= 0; l--) {
        snprintf(nm, sizeof nm, "du%d", l);
        ST_TRY(add_rows(b, ST_PHASE_BWD, ST_TK_DU, l, nm, n, K, D, D + pad, "d"));
    }
    ST_TRY(add_rows(b, ST_PHASE_BWD, ST_TK_DVC, 0, "dvc", n, K, Dv + C, Dv + C + pad, "col"));
    return add_rows(b, ST_PHASE_BWD, ST_TK_DC, 0, "dc", n, K, C, C + pad, "c");
}

/* One training step, in execution order. */
static int build(builder *b, const st_label_sizes *z, const st_param_table *pt) {
    const st_dims *d = &z->d;
    int B = d->B, T = d->T, C = d->C, mb = z->mb;
    ST_TRY(add_params(b, ST_PHASE_STEP_ENTRY, ST_TK_PARAM, "", pt));
    ST_TRY(add_params(b, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_M, "adam_m_", pt));
    ST_TRY(add_params(b, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_V, "adam_v_", pt));
    ST_TRY(add(b, ST_PHASE_ENV, ST_TK_CONTEXT, 0, "context", shp2(B, C, "b", "c"), B, C, C, 0, 0));
    ST_TRY(add(b, ST_PHASE_ENV, ST_TK_REWARD, 0, "reward", shp1(B, "b"), 1, B, B, 0, 0));
    ST_TRY(add_forward(b, ST_PHASE_ACT, d, B, z->pad));
    ST_TRY(add(b, ST_PHASE_ACT, ST_TK_LOGP, 0, "logp", shp1(B, "b"), 1, B, B, 0, 0));
    ST_TRY(add(b, ST_PHASE_TRAIN, ST_TK_GAE_ADV, 0, "gae_adv", shp2(T, B, "t", "b"), T, B, B, 0, 0));
    ST_TRY(add(b, ST_PHASE_TRAIN, ST_TK_GAE_RET, 0, "gae_ret", shp2(T, B, "t", "b"), T, B, B, 0, 0));
    ST_TRY(add(b, ST_PHASE_TRAIN, ST_TK_MB_ADV, 0, "mb_adv", shp1(mb, "b"), 1, mb, mb, 0, 0));
    ST_TRY(add_forward(b, ST_PHASE_TRAIN, d, mb, z->pad));
    ST_TRY(add(b, ST_PHASE_TRAIN, ST_TK_LOSS, 0, "loss", shp1(6, "term"), 1, 6, 6, 1, 0));
    ST_TRY(add_vsn_saved(b, d, mb));
    for (int l = 0; l < d->L; l++)
        ST_TRY(add_mix_saved(b, d, mb, l));
    ST_TRY(add_heads_saved(b, d, mb));
    ST_TRY(add_backward(b, d, mb, z->pad));
    ST_TRY(add_params(b, ST_PHASE_GRAD, ST_TK_PARAM, "", pt));
    ST_TRY(add(b, ST_PHASE_GRAD, ST_TK_GRAD_NORM, 0, "global_norm", shp1(1, "i"), 1, 1, 1, 1, 0));
    ST_TRY(add_params(b, ST_PHASE_OPTIM, ST_TK_ADAM_M, "adam_m_", pt));
    ST_TRY(add_params(b, ST_PHASE_OPTIM, ST_TK_ADAM_V, "adam_v_", pt));
    return add_params(b, ST_PHASE_OPTIM, ST_TK_PARAM, "", pt);
}

/* The slot table and two invariants: unique names, one label per slot. */
static int index_labels(st_label_table *t) {
    int mx = 1;
    for (int i = 0; i < t->n; i++)
        if (t->l[i].index + 1 > mx) mx = t->l[i].index + 1;
    t->max_index = mx;
    size_t n = (size_t)ST_PHASE_COUNT * ST_TK_COUNT * (size_t)mx;
    t->slot = malloc(sizeof(int) * n);
    ST_REQUIRE(t->slot, ST_ERR_MEMORY, "out of memory for the label slots");
    for (size_t i = 0; i < n; i++)
        t->slot[i] = -1;
    for (int i = 0; i < t->n; i++) {
        const st_label *l = &t->l[i];
        int *s = &t->slot[((size_t)l->phase * ST_TK_COUNT + (size_t)l->kind) * (size_t)mx + (size_t)l->index];
        ST_REQUIRE(*s < 0, ST_ERR_INTERNAL, "labels %s and %s share a slot", t->l[*s].name, l->name);
        *s = i;
    }
    for (int i = 0; i < t->n; i++)
        for (int j = i + 1; j < t->n; j++)
            ST_REQUIRE(strcmp(t->l[i].name, t->l[j].name) != 0, ST_ERR_INTERNAL, "label name %s used twice",
                       t->l[i].name);
    return ST_OK;
}

int st_labels_build(const st_label_sizes *z, const st_param_table *pt, st_label_table *t) {
    memset(t, 0, sizeof *t);
    ST_TRY(st_dims_validate(&z->d));
    ST_REQUIRE(z->mb > 0 && z->pad >= 0, ST_ERR_INPUT, "labels: minibatch %d and padding %d", z->mb, z->pad);
    builder b = {t, 0};
    int rc = build(&b, z, pt);
    if (rc == ST_OK) rc = index_labels(t);
    if (rc != ST_OK) st_labels_free(t);
    return rc;
}

void st_labels_free(st_label_table *t) {
    free(t->l);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

int st_labels_find(const st_label_table *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->l[i].name, name) == 0) return i;
    return -1;
}

void st_label_shape_str(const st_label *l, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < l->ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "[", (long long)l->shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

void st_label_dims_str(const st_label *l, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < l->ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "(", l->dim[i]);
    if (o < n) snprintf(buf + o, n - o, ")");
}
