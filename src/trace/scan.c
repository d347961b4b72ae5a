/* scan.c: the tracer's scans and hooks, in the precision of the caller
 * (trace.h; compiled once per precision).
 *
 * A scan reads the logical [rows, width] part of a buffer (never the gap
 * of a padded row) and, on the label's first trip, fills its record. The
 * clean path is one integer pass: for a float x with bits b,
 * (b & exponent_mask) + exponent_lsb carries into the sign bit exactly when
 * every exponent bit is set, i.e. x is NaN or +-Inf; or-ing that over a row
 * and testing the top bit needs no floating-point compare, so the loop
 * vectorises without fast-math. Only a row that fails is looked at again,
 * element by element, to find the first value and count the bad ones. */
#include "core/real.h"

#include <math.h>
#include <string.h>

#include "trace/trace.h"

#if ST_REAL_BITS == 64
typedef uint64_t st_bits;
#define ST_EXP_MASK 0x7ff0000000000000ull
#define ST_EXP_LSB 0x0010000000000000ull
#define ST_TOP_BIT 0x8000000000000000ull
#define ST_IS_F64 1
#else
typedef uint32_t st_bits;
#define ST_EXP_MASK 0x7f800000u
#define ST_EXP_LSB 0x00800000u
#define ST_TOP_BIT 0x80000000u
#define ST_IS_F64 0
#endif

static int run_bad(const real *p, int64_t n) {
    st_bits acc = 0;
    for (int64_t i = 0; i < n; i++) {
        st_bits b;
        memcpy(&b, p + i, sizeof b);
        acc |= (b & ST_EXP_MASK) + ST_EXP_LSB;
    }
    return (acc & ST_TOP_BIT) != 0;
}

int st_trace_all_finite(const real *p, size_t n) { return !run_bad(p, (int64_t)n); }

static int value_kind(real x) {
    if (isnan(x)) return ST_TRACE_NAN;
    return x > 0 ? ST_TRACE_POS_INF : ST_TRACE_NEG_INF;
}

static void decode(const st_label *l, int64_t flat, int32_t *coord) {
    for (int i = l->ndim - 1; i >= 0; i--) {
        int64_t s = l->shape[i] > 0 ? l->shape[i] : 1;
        coord[i] = (int32_t)(flat % s);
        flat /= s;
    }
}

/* Two byte ranges overlap. */
static int overlap(const st_trace_use *a, const st_trace_use *b) {
    size_t ea = a->f64 ? sizeof(double) : sizeof(float), eb = b->f64 ? sizeof(double) : sizeof(float);
    const char *a0 = a->ptr, *a1 = a0 + (size_t)((a->rows - 1) * a->stride + a->width) * ea;
    const char *b0 = b->ptr, *b1 = b0 + (size_t)((b->rows - 1) * b->stride + b->width) * eb;
    return a0 < b1 && b0 < a1;
}

/* The first trip of the run: copy the tensor and its inputs, the labels of
 * the same phase scanned earlier in the same pass whose buffers no later
 * scan of this step has reused (the backward's ping-pong buffers). */
static void capture_trip(st_trace *tr, int id) {
    const st_trace_use *u = &tr->use[id];
    const st_label *l = &tr->labels.l[id];
    st_trace_capture_add(tr, id, u->ptr, u->rows, u->width, u->stride, u->f64);
    for (int j = 0; j < tr->labels.n; j++) {
        const st_trace_use *v = &tr->use[j];
        if (j == id || tr->labels.l[j].phase != l->phase || v->step != u->step || v->sub != u->sub ||
            v->seq >= u->seq || !v->ptr)
            continue;
        int stale = 0;
        for (int k = 0; k < tr->labels.n && !stale; k++) {
            const st_trace_use *w = &tr->use[k];
            stale = k != j && w->ptr && w->step == v->step && w->seq > v->seq && w->seq <= u->seq && overlap(v, w);
        }
        if (!stale) st_trace_capture_add(tr, j, v->ptr, v->rows, v->width, v->stride, v->f64);
    }
}

static void inject(st_trace *tr, real *p, int64_t rows, int64_t width, int64_t stride) {
    st_trace_inject *in = &tr->inject;
    if (in->index >= rows * width) return;
    real v = in->kind == ST_TRACE_NAN ? (real)NAN : in->kind == ST_TRACE_POS_INF ? (real)INFINITY : -(real)INFINITY;
    p[(in->index / width) * stride + in->index % width] = v;
    in->done = 1;
}

/* Fills the record of id from row r0, the first row holding a bad value. */
static void record_trip(st_trace *tr, int id, const real *p, int64_t r0, int64_t rows, int64_t width, int64_t stride,
                        int64_t seq) {
    st_trace_record *rec = &tr->rec[id];
    int64_t first = -1, count = 0;
    for (int64_t r = r0; r < rows; r++) {
        const real *row = p + r * stride;
        for (int64_t c = 0; c < width; c++) {
            if (isfinite(row[c])) continue;
            if (first < 0) {
                first = r * width + c;
                rec->kind = value_kind(row[c]);
                st_bits b;
                memcpy(&b, row + c, sizeof b);
                rec->bits = (uint64_t)b;
            }
            count++;
        }
    }
    rec->count = count;
    decode(&tr->labels.l[id], first, rec->coord);
    rec->step = tr->step;
    rec->sub = tr->sub;
    rec->seq = seq;
    rec->run = tr->run;
    rec->f64 = ST_IS_F64;
    rec->index = first; /* last: the record is complete once index >= 0 */
    if (tr->ntrip++ == 0 && tr->capture_first) capture_trip(tr, id);
}

void st_trace_tensor(st_trace *tr, int id, real *p, int64_t rows, int64_t width, int64_t stride) {
    if (!tr || id < 0 || id >= tr->labels.n || rows <= 0 || width <= 0) return;
    int64_t seq = ++tr->seq;
    st_trace_inject *in = &tr->inject;
    if (in->armed && !in->done && in->label == id && in->step == tr->step) inject(tr, p, rows, width, stride);
    if (!tr->scanning) return;
    tr->use[id] = (st_trace_use){p, rows, width, stride, seq, tr->step, tr->sub, ST_IS_F64};
    if (tr->capture_all) st_trace_capture_add(tr, id, p, rows, width, stride, ST_IS_F64);
    if (tr->rec[id].index >= 0) return; /* only the first trip of a label is kept */
    if (stride == width) {
        if (run_bad(p, rows * width))
            for (int64_t r = 0; r < rows; r++)
                if (run_bad(p + r * stride, width)) {
                    record_trip(tr, id, p, r, rows, width, stride, seq);
                    return;
                }
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        if (run_bad(p + r * stride, width)) {
            record_trip(tr, id, p, r, rows, width, stride, seq);
            return;
        }
}

void st_trace_at(st_trace *tr, st_trace_phase phase, st_trace_kind kind, int index, real *p, int64_t rows,
                 int64_t width, int64_t stride) {
    if (!tr) return;
    st_trace_tensor(tr, st_labels_slot(&tr->labels, phase, kind, index), p, rows, width, stride);
}

void st_trace_fwd(st_trace *tr, st_trace_kind kind, int index, real *p, int64_t rows, int64_t width, int64_t stride) {
    if (!tr) return;
    st_trace_tensor(tr, st_labels_slot(&tr->labels, tr->phase, kind, index), p, rows, width, stride);
}

void st_trace_params(st_trace *tr, st_trace_phase phase, st_trace_kind kind, const st_param_table *pt, real *base) {
    if (!tr) return;
    for (int i = 0; i < pt->n; i++) {
        int id = st_labels_slot(&tr->labels, phase, kind, i);
        if (id < 0) continue;
        const st_label *l = &tr->labels.l[id];
        st_trace_tensor(tr, id, base + pt->p[i].offset, l->rows, l->width, l->stride);
    }
}

void st_trace_saved_block(st_trace *tr, st_trace_kind kind, int first, int count, real *base, int64_t n) {
    if (!tr) return;
    int end = count < 0 ? tr->labels.max_index : first + count;
    for (int i = first; i < end; i++) {
        int id = st_labels_slot(&tr->labels, ST_PHASE_SAVED, kind, i);
        if (id < 0) continue;
        const st_label *l = &tr->labels.l[id];
        if (l->shape[0] != n) continue; /* laid out for another batch: offsets would be wrong */
        st_trace_tensor(tr, id, base + l->offset, l->rows, l->width, l->stride);
    }
}
