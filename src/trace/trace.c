/* trace.c: the tracer's state, fault injection, captures and the report
 * (trace.h). The scans themselves are in scan.c (one per precision). */
#include "trace/trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* The double-precision scan (scan.c's f64 build), for losses and norms. */
void st_trace_tensor_f64(st_trace *tr, int id, double *p, int64_t rows, int64_t width, int64_t stride);

int st_trace_mode_parse(const char *s, st_trace_mode *mode) {
    static const char *const names[] = {"off", "sentinel", "full"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *mode = (st_trace_mode)i;
            return ST_OK;
        }
    return ST_FAIL(ST_ERR_INPUT, "--trace '%s': expected off, sentinel or full", s);
}

const char *st_trace_mode_name(st_trace_mode mode) {
    return mode == ST_TRACE_FULL ? "full" : mode == ST_TRACE_SENTINEL ? "sentinel" : "off";
}

int st_trace_init(st_trace *tr, st_trace_mode mode, const st_label_sizes *z, const st_param_table *pt, int M) {
    memset(tr, 0, sizeof *tr);
    ST_TRY(st_labels_build(z, pt, &tr->labels));
    tr->rec = calloc((size_t)tr->labels.n, sizeof *tr->rec);
    tr->use = calloc((size_t)tr->labels.n, sizeof *tr->use);
    if (!tr->rec || !tr->use) {
        st_trace_free(tr);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for the tracer's records");
    }
    tr->mode = mode;
    tr->scanning = mode == ST_TRACE_FULL;
    tr->M = M > 0 ? M : 1;
    tr->T = z->d.T;
    tr->pad = z->pad;
    tr->inject.label = -1;
    st_trace_reset(tr);
    return ST_OK;
}

static void free_captures(st_trace *tr) {
    for (int i = 0; i < tr->ncap; i++)
        free(tr->cap[i].data);
    tr->ncap = 0;
}

void st_trace_free(st_trace *tr) {
    free_captures(tr);
    free(tr->cap);
    free(tr->rec);
    free(tr->use);
    st_labels_free(&tr->labels);
    memset(tr, 0, sizeof *tr);
}

void st_trace_reset(st_trace *tr) {
    for (int i = 0; i < tr->labels.n; i++) {
        memset(&tr->rec[i], 0, sizeof tr->rec[i]);
        tr->rec[i].index = -1;
        memset(&tr->use[i], 0, sizeof tr->use[i]);
        tr->use[i].step = -1;
    }
    tr->ntrip = 0;
    tr->sentinel_tripped = 0;
    tr->sentinel_what[0] = 0;
    tr->tripped = 0;
    tr->inject.done = 0;
    free_captures(tr);
}

void st_trace_begin_step(st_trace *tr, int64_t step) {
    tr->step = step;
    tr->sub = -1;
    tr->phase = ST_PHASE_STEP_ENTRY;
}

static int parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0) return 0;
    *out = v;
    return 1;
}

/* The parts of LABEL:STEP:INDEX[:KIND] (label into name[64]), every
 * problem of the text itself an error; the label is not looked up. */
static int parse_inject(const char *spec, char *name, int64_t *step, int64_t *index, int *kind) {
    char buf[128];
    ST_REQUIRE(strlen(spec) < sizeof buf, ST_ERR_INPUT, "--inject %s: too long", spec);
    snprintf(buf, sizeof buf, "%s", spec);
    char *part[5] = {0};
    int n = 0;
    char *p = buf;
    while (p && n < 5) {
        part[n++] = p;
        p = strchr(p, ':');
        if (p) *p++ = 0;
    }
    ST_REQUIRE(!p && (n == 3 || n == 4), ST_ERR_INPUT, "--inject %s: expected LABEL:STEP:INDEX[:nan|inf|-inf]", spec);
    ST_REQUIRE(strlen(part[0]) < 64, ST_ERR_INPUT, "--inject %s: label '%s' is too long", spec, part[0]);
    snprintf(name, 64, "%s", part[0]);
    ST_REQUIRE(parse_i64(part[1], step), ST_ERR_INPUT, "--inject %s: bad step '%s'", spec, part[1]);
    ST_REQUIRE(parse_i64(part[2], index), ST_ERR_INPUT, "--inject %s: bad index '%s'", spec, part[2]);
    *kind = ST_TRACE_NAN;
    if (n == 4) {
        if (strcmp(part[3], "inf") == 0 || strcmp(part[3], "+inf") == 0)
            *kind = ST_TRACE_POS_INF;
        else if (strcmp(part[3], "-inf") == 0)
            *kind = ST_TRACE_NEG_INF;
        else
            ST_REQUIRE(strcmp(part[3], "nan") == 0, ST_ERR_INPUT, "--inject %s: kind '%s' (nan, inf or -inf)", spec,
                       part[3]);
    }
    return ST_OK;
}

int st_trace_check_inject(const char *spec) {
    char name[64];
    int64_t step, index;
    int kind;
    return parse_inject(spec, name, &step, &index, &kind);
}

int st_trace_set_inject(st_trace *tr, const char *spec) {
    char name[64];
    st_trace_inject in = {.armed = 1};
    ST_TRY(parse_inject(spec, name, &in.step, &in.index, &in.kind));
    int id = st_labels_find(&tr->labels, name);
    ST_REQUIRE(id >= 0, ST_ERR_INPUT, "--inject %s: no label named '%s' (ssmtrade labels lists them)", spec, name);
    in.label = id;
    const st_label *l = &tr->labels.l[id];
    ST_REQUIRE(in.index < l->rows * l->width, ST_ERR_INPUT, "--inject %s: index %lld outside %s (%lld elements)", spec,
               (long long)in.index, l->name, (long long)(l->rows * l->width));
    snprintf(in.spec, sizeof in.spec, "%s", spec);
    tr->inject = in;
    return ST_OK;
}

void st_trace_tensor_f64v(st_trace *tr, st_trace_phase phase, st_trace_kind kind, int index, double *p, int64_t n) {
    if (!tr) return;
    int id = st_labels_slot(&tr->labels, phase, kind, index);
    if (id >= 0) st_trace_tensor_f64(tr, id, p, 1, n, n);
}

void st_trace_sentinel_trip(st_trace *tr, const char *what) {
    if (tr->sentinel_tripped) return;
    tr->sentinel_tripped = 1;
    snprintf(tr->sentinel_what, sizeof tr->sentinel_what, "%s", what);
}

/* ---- captures ------------------------------------------------------------- */

int st_trace_capture_add(st_trace *tr, int label, const void *ptr, int64_t rows, int64_t width, int64_t stride,
                         int f64) {
    if (st_trace_capture_of(tr, label)) return ST_OK;
    if (tr->ncap == tr->capcap) {
        int cap = tr->capcap ? 2 * tr->capcap : 64;
        st_trace_capture *c = realloc(tr->cap, sizeof *c * (size_t)cap);
        ST_REQUIRE(c, ST_ERR_MEMORY, "out of memory for the tracer's captures");
        tr->cap = c;
        tr->capcap = cap;
    }
    size_t es = f64 ? sizeof(double) : sizeof(float), count = (size_t)(rows * width);
    char *dst = malloc(es * (count ? count : 1));
    ST_REQUIRE(dst, ST_ERR_MEMORY, "out of memory copying label %s", tr->labels.l[label].name);
    const char *src = ptr;
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * width * es, src + (size_t)(r * stride) * es, es * width);
    tr->cap[tr->ncap++] = (st_trace_capture){label, f64, count, dst};
    return ST_OK;
}

const st_trace_capture *st_trace_capture_of(const st_trace *tr, int label) {
    for (int i = 0; i < tr->ncap; i++)
        if (tr->cap[i].label == label) return &tr->cap[i];
    return NULL;
}

/* ---- report --------------------------------------------------------------- */

int st_trace_record_tagged(const st_trace_record *r) {
    if (r->index < 0 || r->kind != ST_TRACE_NAN) return 0;
    if (r->f64) return (r->bits & 0x7fffffffffffffffull) == ST_TRACE_TAG_F64;
    return ((uint32_t)r->bits & 0x7fffffffu) == ST_TRACE_TAG_F32;
}

const char *st_trace_kind_name(int kind) {
    return kind == ST_TRACE_NAN ? "NaN" : kind == ST_TRACE_POS_INF ? "+Inf" : kind == ST_TRACE_NEG_INF ? "-Inf" : "ok";
}

static int earlier(const st_trace_record *x, const st_trace_record *y) {
    return x->step < y->step || (x->step == y->step && x->seq < y->seq);
}

int st_trace_ordered(const st_trace *tr, int *ids, int cap) {
    int n = 0;
    for (int i = 0; i < tr->labels.n && n < cap; i++) {
        if (tr->rec[i].index < 0) continue;
        int j = n++; /* insertion: few labels trip, and they arrive nearly in order */
        while (j > 0 && earlier(&tr->rec[i], &tr->rec[ids[j - 1]]))
            ids[j] = ids[j - 1], j--;
        ids[j] = i;
    }
    return n;
}

int st_trace_first(const st_trace *tr) {
    int best = -1;
    for (int i = 0; i < tr->labels.n; i++) {
        const st_trace_record *r = &tr->rec[i];
        if (r->index < 0) continue;
        if (best < 0 || earlier(r, &tr->rec[best])) best = i;
    }
    return best;
}

void st_trace_pass_str(const st_trace *tr, const st_label *l, int32_t sub, char *buf, size_t n) {
    buf[0] = 0;
    if (sub < 0) return;
    if (l->phase == ST_PHASE_ENV || l->phase == ST_PHASE_ACT) {
        if (sub >= tr->T)
            snprintf(buf, n, "bootstrap forward");
        else
            snprintf(buf, n, "rollout step %d", sub);
    } else if (l->phase != ST_PHASE_STEP_ENTRY) {
        snprintf(buf, n, "epoch %d minibatch %d", sub / tr->M, sub % tr->M);
    }
}

void st_trace_record_str(const st_trace *tr, int id, char *buf, size_t n) {
    const st_label *l = &tr->labels.l[id];
    const st_trace_record *r = &tr->rec[id];
    char coords[96] = "", pass[48];
    size_t o = 0;
    for (int i = 0; i < l->ndim && o < sizeof coords; i++)
        o += (size_t)snprintf(coords + o, sizeof coords - o, "%s%s %d", i ? ", " : "", l->dim[i], r->coord[i]);
    st_trace_pass_str(tr, l, r->sub, pass, sizeof pass);
    snprintf(buf, n, "#%-4d %-28s step %lld%s%s  index %lld (%s)  %s  count %lld%s", id, l->name, (long long)r->step,
             pass[0] ? ", " : "", pass, (long long)r->index, coords, st_trace_kind_name(r->kind), (long long)r->count,
             st_trace_record_tagged(r) ? "  [tagged padding NaN: a read across a row boundary]" : "");
}

void st_trace_report(const st_trace *tr, FILE *f, int max_lines) {
    int *ids = malloc(sizeof(int) * (size_t)(tr->labels.n ? tr->labels.n : 1));
    int n = ids ? st_trace_ordered(tr, ids, tr->labels.n) : 0;
    char line[400];
    fprintf(f, "NaN/Inf tracer report (trace %s%s%s)\n", st_trace_mode_name(tr->mode),
            tr->inject.armed ? ", injected " : "", tr->inject.armed ? tr->inject.spec : "");
    if (tr->sentinel_tripped && tr->mode == ST_TRACE_SENTINEL)
        fprintf(f, "sentinel: non-finite %s at step %lld; the step was replayed with full scans\n", tr->sentinel_what,
                (long long)tr->trip_step);
    else if (tr->sentinel_tripped)
        fprintf(f, "non-finite %s at step %lld\n", tr->sentinel_what, (long long)tr->trip_step);
    if (n == 0) {
        fprintf(f, "no label holds a non-finite value%s\n",
                tr->sentinel_tripped ? " in the replay (the trip did not reproduce, or hit an unlabelled tensor)" : "");
        free(ids);
        return;
    }
    st_trace_record_str(tr, ids[0], line, sizeof line);
    fprintf(f, "first non-finite label (cause candidate):\n  %s\n", line);
    if (n > 1) fprintf(f, "consequences, in (step, execution order): %d label%s\n", n - 1, n > 2 ? "s" : "");
    for (int i = 1; i < n && i <= max_lines; i++) {
        st_trace_record_str(tr, ids[i], line, sizeof line);
        fprintf(f, "  %s\n", line);
    }
    if (n - 1 > max_lines) fprintf(f, "  ... and %d more\n", n - 1 - max_lines);
    free(ids);
}

const char *st_trace_status(const st_trace *tr) {
    if (!tr || tr->mode == ST_TRACE_OFF) return tr && tr->tripped ? "TRIPPED" : "off";
    if (tr->tripped) return "TRIPPED";
    return tr->mode == ST_TRACE_FULL ? "full ok" : "sentinel ok";
}
