/* trace.h: the NaN/Inf tracer ("labels") of DESIGN section 8.
 *
 * Every tensor one training step touches has a label: a stable number, a
 * name `<phase>_<tensor>`, a shape and a row stride. The table is built in
 * one place (labels.c) from the sizes and the parameter table, numbered in
 * execution order within a step:
 *   step_entry  weights and AdamW moments at the top of the step
 *   env         the environments' context and rewards (per rollout step)
 *   act         action-selection forward (per rollout step; step T is the
 *               bootstrap value)
 *   train       GAE, then per minibatch: window, training forward, loss
 *   saved       what the training forward keeps for the backward
 *   bwd         activation gradients
 *   grad        parameter gradients (before clipping) and their norm
 *   optim       AdamW moments and weights after the update
 * A "step" is one PPO update (rollout + optimisation), numbered from 0 (the
 * update counter at its start). env and act interleave per rollout step and
 * train..optim repeat per minibatch, so the report orders trips by the
 * order the scans actually ran (seq), which within one pass is the label
 * order.
 *
 * A scan of a label looks at the logical [rows, width] part of a buffer
 * (row stride >= width) and, on the label's first trip only, fills its
 * record: first non-finite element (flat index in the logical layout and
 * its coordinates), kind, count, step, pass, run. Records live in an array
 * indexed by label number, allocated once; a scan writes only its own
 * record, with no synchronisation, so a CUDA version can do the same from a
 * kernel and the host read the records once per update.
 *
 * The model and the trainer call the hooks below at each labelled tensor
 * when a tracer is attached (a NULL pointer otherwise: --trace off costs a
 * branch). A hook also performs fault injection (--inject): it writes the
 * NaN/Inf into the tensor just before the scan, i.e. before anything
 * consumes it, so the first trip is exactly the injected label. */
#ifndef ST_TRACE_H
#define ST_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/real.h"
#include "model/params.h"

typedef enum { ST_TRACE_OFF = 0, ST_TRACE_SENTINEL = 1, ST_TRACE_FULL = 2 } st_trace_mode;

/* X(ENUM, name, what) in execution order. */
#define ST_TRACE_PHASES(X)                                                                                             \
    X(STEP_ENTRY, "step_entry", "weights and AdamW moments at the top of the step")                                    \
    X(ENV, "env", "environment context and rewards, per rollout step")                                                 \
    X(ACT, "act", "action-selection forward, per rollout step (step T: bootstrap value)")                              \
    X(TRAIN, "train", "GAE targets, then per minibatch the training forward and loss")                                 \
    X(SAVED, "saved", "state the training forward keeps for the backward")                                             \
    X(BWD, "bwd", "activation gradients")                                                                              \
    X(GRAD, "grad", "parameter gradients before clipping, and their global norm")                                      \
    X(OPTIM, "optim", "AdamW moments and weights after the update")

typedef enum {
#define ST_TRACE_PHASE_ENUM(e, name, what) ST_PHASE_##e,
    ST_TRACE_PHASES(ST_TRACE_PHASE_ENUM)
#undef ST_TRACE_PHASE_ENUM
        ST_PHASE_COUNT
} st_trace_phase;

/* What kind of tensor a label holds; hooks name a label by (phase, kind,
 * index), index = parameter number, layer, or saved region. */
typedef enum {
    ST_TK_PARAM,       /* a parameter tensor (step_entry, grad: its gradient, optim) */
    ST_TK_ADAM_M,      /* its AdamW first moment (step_entry, optim) */
    ST_TK_ADAM_V,      /* its AdamW second moment */
    ST_TK_CONTEXT,     /* env: the 16 context features [B, C] */
    ST_TK_REWARD,      /* env: rewards of the step [B] */
    ST_TK_WINDOW,      /* act/train: observation window [n, K, F+C] (the GPU action step reads none: it
                        * builds act's only where the label is scanned, for the scan: trainer_cuda.c) */
    ST_TK_VSN_OUT,     /* act/train: VSN output v [n, K, Dv] */
    ST_TK_VSN_ALPHA,   /* act/train: selection weights [n, K, F] */
    ST_TK_W_IN_IN,     /* act/train: [v; c] [n, K, Dv+C] */
    ST_TK_W_IN_OUT,    /* act/train: u_0 [n, K, D] */
    ST_TK_MIX_OUT,     /* act/train: u_{l+1}, output of Mamba2 block l [n, K, D]; the last block's: its rows
                        * K-1 [n, D] (what the heads read, all the GPU's last-row tail writes) */
    ST_TK_LOGITS,      /* act/train: [n, A] */
    ST_TK_VALUE,       /* act/train: [n] */
    ST_TK_LOGP,        /* act: log-probability of the sampled action [B] */
    ST_TK_GAE_ADV,     /* train: advantages [T, B] */
    ST_TK_GAE_RET,     /* train: returns [T, B] */
    ST_TK_MB_ADV,      /* train: normalised advantages of the minibatch [mb] */
    ST_TK_LOSS,        /* train: loss, policy, value, entropy, approx_kl, clipfrac (f64) */
    ST_TK_VSN_SAVED,   /* saved: a region of the VSN's saved block */
    ST_TK_MIX_SAVED,   /* saved: a region of Mamba2 block l's saved block (index l*regions + region) */
    ST_TK_HEADS_SAVED, /* saved: a region of the heads' saved block */
    ST_TK_DLOGITS,     /* bwd: [mb, A] */
    ST_TK_DVALUE,      /* bwd: [mb] */
    ST_TK_DU,          /* bwd: gradient of u_l (index l; u_L = output of the last block) */
    ST_TK_DC_HEAD,     /* bwd: context gradient from the heads [mb, C] */
    ST_TK_DVC,         /* bwd: gradient of [v; c] */
    ST_TK_DC,          /* bwd: context gradient, all three paths [mb, K, C] */
    ST_TK_GRAD_NORM,   /* grad: global gradient norm (f64) */
    ST_TK_COUNT
} st_trace_kind;

/* Kinds of the first non-finite element. */
enum { ST_TRACE_CLEAN = 0, ST_TRACE_NAN = 1, ST_TRACE_POS_INF = 2, ST_TRACE_NEG_INF = 3 };

/* The tagged quiet NaN of poisoned padding: a recognisable payload, so a
 * value read across a row boundary is told apart from a computed NaN.
 * Propagation through arithmetic keeps the payload (up to the sign bit). */
#define ST_TRACE_TAG_F32 0x7fc0deadu
#define ST_TRACE_TAG_F64 0x7ff800000000deadull
/* Row padding (elements) of --poison-padding. */
#define ST_TRACE_POISON_PAD 8

typedef struct {
    char name[64];
    int id;
    st_trace_phase phase;
    st_trace_kind kind;
    int index; /* parameter number, layer or region within the (phase, kind) */
    int f64;   /* values are double (losses, norms), else real of the caller */
    int ndim;  /* shape used to decode a flat index into coordinates */
    int64_t shape[4];
    const char *dim[4];  /* coordinate names ("b", "k", "f", ...) */
    int64_t rows, width; /* the logical 2-D view a hook scans: rows x width */
    int64_t stride;      /* row stride of the buffer in the layout (width, wider when padded) */
    size_t offset;       /* saved regions: offset in reals inside the saved block */
} st_label;

typedef struct {
    int n;
    st_label *l;
    int max_index; /* slot table: (phase, kind, index) -> label id or -1 */
    int *slot;
} st_label_table;

/* Sizes a label table depends on: dims (B, K, T, ...), the minibatch size
 * and the row padding (poisoned padding widens activation strides). */
typedef struct {
    st_dims d;
    int mb;  /* minibatch size (windows of one training forward) */
    int pad; /* extra row-stride elements of the model's activation buffers */
} st_label_sizes;

/* Builds the table (the one place labels are declared). */
int st_labels_build(const st_label_sizes *z, const st_param_table *pt, st_label_table *t);
void st_labels_free(st_label_table *t);
/* Id of label `name`, or -1. */
int st_labels_find(const st_label_table *t, const char *name);
/* Id of (phase, kind, index), or -1 when there is no such label. */
static inline int st_labels_slot(const st_label_table *t, st_trace_phase ph, st_trace_kind k, int index) {
    if (index < 0 || index >= t->max_index) return -1;
    return t->slot[((size_t)ph * ST_TK_COUNT + (size_t)k) * (size_t)t->max_index + (size_t)index];
}
const char *st_trace_phase_name(st_trace_phase p);
const char *st_trace_phase_what(st_trace_phase p);
/* "[32, 32, 56]" and "(b, k, f)". */
void st_label_shape_str(const st_label *l, char *buf, size_t n);
void st_label_dims_str(const st_label *l, char *buf, size_t n);
/* The label-name form of a parameter name: w_in.weight -> w_in_W, mix.0.conv_w -> mix0_conv_w. */
void st_label_param_name(const char *param, char *out, size_t n);

/* The record of one label: its first trip. */
typedef struct {
    int64_t index;    /* flat index of the first non-finite element (logical layout); -1: clean */
    int32_t coord[4]; /* index decoded by the label's shape */
    int32_t kind;     /* ST_TRACE_NAN, _POS_INF, _NEG_INF */
    int32_t sub;      /* pass within the step: rollout step, or epoch * M + minibatch; -1: once per step */
    uint64_t bits;    /* bits of the first bad value (float bits for f32) */
    int64_t count;    /* non-finite elements of the tensor at that scan */
    int64_t step;     /* update number (0-based) */
    int64_t seq;      /* scan order within the run: (step, seq) is execution order */
    int32_t run;
    int32_t f64;
} st_trace_record;

/* Where a label was last scanned (for the dump of a trip's inputs). */
typedef struct {
    const void *ptr;
    int64_t rows, width, stride, seq, step;
    int32_t sub, f64;
} st_trace_use;

/* A copy of a tensor taken at a trip (or for `ssmtrade dump`). */
typedef struct {
    int label;
    int f64;
    size_t count;
    void *data; /* contiguous [rows, width] of the label's logical layout */
} st_trace_capture;

typedef struct {
    int armed; /* an injection is configured */
    int label;
    int64_t step, index;
    int kind; /* ST_TRACE_NAN or ST_TRACE_POS_INF / _NEG_INF */
    int done; /* fired (once per run, re-armed by a replay) */
    char spec[128];
} st_trace_inject;

typedef struct st_trace {
    st_trace_mode mode;
    int scanning; /* full scans on: full mode, or the replay of a sentinel trip */
    st_label_table labels;
    st_trace_record *rec; /* [labels.n] */
    st_trace_use *use;    /* [labels.n] */
    int M;                /* minibatches per epoch (to print passes) */
    int T;                /* rollout length */
    /* position, set by the trainer */
    st_trace_phase phase; /* ACT or TRAIN: whose labels the model's forward fills */
    int32_t sub;
    int64_t step;
    int64_t seq;
    int32_t run;
    int ntrip; /* labels tripped since the last reset */
    int pad;   /* poisoned padding width (0: off) */
    st_trace_inject inject;
    /* sentinel */
    int sentinel_tripped;
    char sentinel_what[200];
    int tripped; /* the last guarded update tripped */
    int64_t trip_step;
    /* copies taken at the first trip (capture_first) or of every label (capture_all) */
    int capture_first, capture_all;
    st_trace_capture *cap;
    int ncap, capcap;
} st_trace;

/* A tracer for label sizes z and parameter table pt (which must outlive it). */
int st_trace_init(st_trace *tr, st_trace_mode mode, const st_label_sizes *z, const st_param_table *pt, int M);
void st_trace_free(st_trace *tr);
/* "off" | "sentinel" | "full". */
int st_trace_mode_parse(const char *s, st_trace_mode *mode);
const char *st_trace_mode_name(st_trace_mode mode);
/* LABEL:STEP:INDEX[:nan|inf|-inf]; checks the label exists and the index is inside it. */
int st_trace_set_inject(st_trace *tr, const char *spec);
/* The text of an --inject spec alone (its form, step, index and kind; not
 * the label, which needs the run's sizes): checked before any work. */
int st_trace_check_inject(const char *spec);
/* Forgets every record and capture and re-arms the injection (before a replay). */
void st_trace_reset(st_trace *tr);
/* The trainer's position: the step starts (step = update counter) ... */
void st_trace_begin_step(st_trace *tr, int64_t step);
/* ... and each pass: phase (ACT/TRAIN select the forward's labels), pass number. */
static inline void st_trace_position(st_trace *tr, st_trace_phase phase, int32_t sub) {
    tr->phase = phase;
    tr->sub = sub;
}

/* The earliest trip by (step, seq), or -1. */
int st_trace_first(const st_trace *tr);
/* Tripped label ids ordered by (step, seq); returns the count (<= cap). */
int st_trace_ordered(const st_trace *tr, int *ids, int cap);
/* The first bad value of record r is the padding tag (a read across a row boundary). */
int st_trace_record_tagged(const st_trace_record *r);
const char *st_trace_kind_name(int kind);
/* "epoch 0 minibatch 2", "rollout step 5", "bootstrap" or "". */
void st_trace_pass_str(const st_trace *tr, const st_label *l, int32_t sub, char *buf, size_t n);
/* One line for label id: name, step, pass, index, coordinates, kind, count, tag. */
void st_trace_record_str(const st_trace *tr, int id, char *buf, size_t n);
/* The report: first = cause candidate, the rest = consequences (at most
 * max_lines of them), and the sentinel's scalar when it tripped. */
void st_trace_report(const st_trace *tr, FILE *f, int max_lines);
/* "off", "sentinel ok", "full ok", "TRIPPED". */
const char *st_trace_status(const st_trace *tr);
/* The sentinel saw a non-finite scalar (what: "loss", "rewards", ...). */
void st_trace_sentinel_trip(st_trace *tr, const char *what);
/* Takes a copy of a tensor for the capture list (an allocation: trip path and dumps only). */
int st_trace_capture_add(st_trace *tr, int label, const void *ptr, int64_t rows, int64_t width, int64_t stride,
                         int f64);
const st_trace_capture *st_trace_capture_of(const st_trace *tr, int label);

/* ---- hooks (precision of the caller's translation unit) ------------------- */
#define st_trace_tensor ST_R(st_trace_tensor)
#define st_trace_at ST_R(st_trace_at)
#define st_trace_fwd ST_R(st_trace_fwd)
#define st_trace_params ST_R(st_trace_params)
#define st_trace_saved_block ST_R(st_trace_saved_block)
#define st_trace_all_finite ST_R(st_trace_all_finite)

/* Scans label id over rows x width at p (row stride), after an injection
 * into it when one is due. p is written only by an injection. */
void st_trace_tensor(st_trace *tr, int id, real *p, int64_t rows, int64_t width, int64_t stride);
/* The same for label (phase, kind, index); nothing when there is none. */
void st_trace_at(st_trace *tr, st_trace_phase phase, st_trace_kind kind, int index, real *p, int64_t rows,
                 int64_t width, int64_t stride);
/* A forward tensor of the current phase (act or train). */
void st_trace_fwd(st_trace *tr, st_trace_kind kind, int index, real *p, int64_t rows, int64_t width, int64_t stride);
/* Every parameter-shaped tensor of a flat buffer (weights, moments, gradients) as labels (phase, kind, i). */
void st_trace_params(st_trace *tr, st_trace_phase phase, st_trace_kind kind, const st_param_table *pt, real *base);
/* The regions of a saved block of n windows: labels (saved, kind, index)
 * for index in [first, first + count) (count < 0: every region of the
 * kind), each at base + its offset; skipped when the labels were laid out
 * for another batch size (their offsets would not apply). */
void st_trace_saved_block(st_trace *tr, st_trace_kind kind, int first, int count, real *base, int64_t n);
/* 1 when n values are all finite (the sentinel's weight check). */
int st_trace_all_finite(const real *p, size_t n);
/* The same for doubles (losses and norms are double in every build). */
void st_trace_tensor_f64v(st_trace *tr, st_trace_phase phase, st_trace_kind kind, int index, double *p, int64_t n);

/* The padding tag as a value of the caller's precision. */
static inline real st_trace_tag_value(void) {
#if ST_REAL_BITS == 64
    uint64_t b = ST_TRACE_TAG_F64;
#else
    uint32_t b = ST_TRACE_TAG_F32;
#endif
    real v;
    memcpy(&v, &b, sizeof v);
    return v;
}
/* Fills the gap after `width` in each of rows rows of stride `stride` with the tag. */
static inline void st_trace_poison_rows(real *p, int64_t rows, int64_t width, int64_t stride) {
    real tag = st_trace_tag_value();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = width; c < stride; c++)
            p[r * stride + c] = tag;
}

#endif
