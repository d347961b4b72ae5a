/* test_cuda_trace.c: the GPU tracer's scans (cuda/trace_cuda.h) against the
 * host tracer's (trace/scan.c), on the labels of the tiny preset with
 * poisoned padding (activation rows wider than their width, the gap full of
 * the NaN tag). Every comparison downloads the device records into a
 * second host tracer and requires every field of every label's record
 * (index, coordinates, kind, bits, count, step, sub, seq, run, f64), the
 * scan counter, the tripped count and the injection's done flag to equal
 * the host tracer's after the same scans on the same data; the device
 * buffers must equal the host's bit for bit afterwards (no write but an
 * injection, the gap untouched).
 *  - records: padded activations (one block and many), parameters at
 *    misaligned addresses, 1-D and 1-row labels, the double loss and grad
 *    norm: clean data and the NaN gap never trip; NaN (several payloads,
 *    the tag among them), +Inf and -Inf planted at random positions, some
 *    in one row: the first index and the count are also checked against
 *    the planted values; a second scan with an earlier bad value keeps the
 *    first record;
 *  - bad items are refused (ST_ERR_INPUT) with nothing launched;
 *  - injection (float padded label, double label; full and sentinel): only
 *    at step 2, once, the same record and buffer as the host's, re-armed
 *    by a reset;
 *  - graphs: a captured sequence of batches (step and pass words copied on
 *    the device between them; batches of 3 to 3 x params items, so several
 *    chunks) replayed with and without a captured reset: the host's
 *    records after the same sequence each time, identical between replays;
 *  - 16M floats, contiguous and padded, one NaN near the end: the right
 *    record; the clean scan's time and bandwidth are printed.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "core/error.h"
#include "core/philox.h"
#include "model/params.h"
#include "trace/trace.h"
#include "train/train_config.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/trace_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
/* The host's double scan (scan.c's f64 build; trace.c declares it the same way). */
void st_trace_tensor_f64(st_trace *tr, int id, double *p, int64_t rows, int64_t width, int64_t stride);

/* ---- a tensor on both sides ------------------------------------------------ */

typedef struct {
    int id, f64;
    int64_t rows, width, stride;
    size_t n, es;      /* elements of the buffer (rows * stride), element size */
    int shift;         /* the data starts `shift` elements into the device allocation */
    unsigned char *h;  /* host copy */
    unsigned char *da; /* device allocation */
    void *d;           /* device data */
} tbuf;

static uint64_t get_bits(const tbuf *b, size_t e) {
    if (b->f64) {
        uint64_t u;
        memcpy(&u, b->h + e * 8, 8);
        return u;
    }
    uint32_t u;
    memcpy(&u, b->h + e * 4, 4);
    return u;
}

static void set_bits(tbuf *b, size_t e, uint64_t u) {
    if (b->f64) {
        memcpy(b->h + e * 8, &u, 8);
    } else {
        uint32_t v = (uint32_t)u;
        memcpy(b->h + e * 4, &v, 4);
    }
}

static int bad_bits(uint64_t u, int f64) {
    return f64 ? (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull : (u & 0x7f800000u) == 0x7f800000u;
}

static size_t at_logical(const tbuf *b, int64_t i) { return (size_t)((i / b->width) * b->stride + i % b->width); }

/* Random finite values in the logical part, the padding tag in the gap. */
static void tbuf_fill(tbuf *b, st_rng *rng) {
    for (int64_t r = 0; r < b->rows; r++)
        for (int64_t c = 0; c < b->stride; c++) {
            size_t e = (size_t)(r * b->stride + c);
            if (c >= b->width) {
                set_bits(b, e, b->f64 ? ST_TRACE_TAG_F64 : ST_TRACE_TAG_F32);
            } else if (b->f64) {
                double v = st_rng_normal(rng);
                memcpy(b->h + e * 8, &v, 8);
            } else {
                float v = (float)st_rng_normal(rng);
                memcpy(b->h + e * 4, &v, 4);
            }
        }
}

/* Synchronised: a pageable copy may still be in flight when cudaMemcpy
 * returns, and the graphs run on a stream that does not wait for it. */
static int tbuf_upload(tbuf *b) {
    return cudaMemcpy(b->d, b->h, b->n * b->es, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
}

/* A buffer of rows x width (row stride) for label id. */
static int tbuf_make_shape(tbuf *b, int id, int f64, int64_t rows, int64_t width, int64_t stride, int shift,
                           st_rng *rng) {
    memset(b, 0, sizeof *b);
    b->id = id, b->f64 = f64, b->rows = rows, b->width = width, b->stride = stride, b->shift = shift;
    b->n = (size_t)(rows * stride), b->es = f64 ? 8 : 4;
    b->h = malloc(b->n * b->es + 8);
    if (!b->h || cudaMalloc((void **)&b->da, (b->n + (size_t)shift) * b->es) != cudaSuccess) return 0;
    b->d = b->da + (size_t)shift * b->es;
    tbuf_fill(b, rng);
    return tbuf_upload(b);
}

/* A buffer of label `name`'s own shape and stride. */
static int tbuf_make(tbuf *b, const st_trace *tr, const char *name, int shift, st_rng *rng) {
    int id = st_labels_find(&tr->labels, name);
    CHECK(id >= 0, "label %s missing", name);
    if (id < 0) return 0;
    const st_label *l = &tr->labels.l[id];
    int ok = tbuf_make_shape(b, id, l->f64, l->rows, l->width, l->stride, shift, rng);
    CHECK(ok, "buffer of %s", name);
    return ok;
}

static void tbuf_free(tbuf *b) {
    free(b->h);
    cudaFree(b->da);
    memset(b, 0, sizeof *b);
}

static st_cuda_scan_item tbuf_item(const tbuf *b) {
    st_cuda_scan_item it = {b->id, b->f64, b->d, b->rows, b->width, b->stride};
    return it;
}

static void host_scan(st_trace *tr, tbuf *b) {
    if (b->f64)
        st_trace_tensor_f64(tr, b->id, (double *)b->h, b->rows, b->width, b->stride);
    else
        st_trace_tensor(tr, b->id, (float *)b->h, b->rows, b->width, b->stride);
}

/* The device buffer equals the host's, bit for bit (first difference printed). */
static void tbuf_check_same(const tbuf *b, const char *what) {
    unsigned char *g = malloc(b->n * b->es + 8);
    int ok = cudaMemcpy(g, b->d, b->n * b->es, cudaMemcpyDeviceToHost) == cudaSuccess;
    size_t e = 0;
    if (ok)
        for (e = 0; e < b->n; e++)
            if (memcmp(g + e * b->es, b->h + e * b->es, b->es) != 0) break;
    if (ok && e < b->n) {
        uint64_t gu = 0, hu = get_bits(b, e);
        memcpy(&gu, g + e * b->es, b->es);
        fprintf(stderr, "  %s: device buffer differs at element %zu (row %zu col %zu): %#llx, host %#llx\n", what, e,
                e / (size_t)b->stride, e % (size_t)b->stride, (unsigned long long)gu, (unsigned long long)hu);
    }
    CHECK(ok && e == b->n, "%s: the device buffer is not the host's", what);
    free(g);
}

/* Bad values in the logical part of the host copy: count and first logical index. */
static int64_t logical_bad(const tbuf *b, int64_t *first) {
    int64_t count = 0;
    *first = -1;
    for (int64_t i = 0; i < b->rows * b->width; i++)
        if (bad_bits(get_bits(b, at_logical(b, i)), b->f64)) {
            if (*first < 0) *first = i;
            count++;
        }
    return count;
}

/* The bad values planted: NaNs of several payloads (quiet, negative,
 * signalling, the padding tag), +Inf, -Inf. */
static uint64_t bad_value(int f64, int which) {
    static const uint32_t b32[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0xffc00001u, ST_TRACE_TAG_F32, 0x7f800001u};
    static const uint64_t b64[] = {0x7ff8000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                                   0xfff8000000000001ull, ST_TRACE_TAG_F64,      0x7ff0000000000001ull};
    return f64 ? b64[which % 6] : b32[which % 6];
}

/* ---- host tracer, device tracer, and the device tracer's records on the host */

typedef struct {
    st_trace host, mirror;
    st_cuda_trace dev;
    int64_t *d_step;
    int32_t *d_sub;
} pair;

static int pair_init(pair *p, st_trace_mode mode, const st_label_sizes *z, const st_param_table *pt,
                     const char *inject) {
    memset(p, 0, sizeof *p);
    int rc = st_trace_init(&p->host, mode, z, pt, 4);
    if (rc == ST_OK) rc = st_trace_init(&p->mirror, mode, z, pt, 4);
    if (rc == ST_OK && inject) rc = st_trace_set_inject(&p->host, inject);
    if (rc == ST_OK && inject) rc = st_trace_set_inject(&p->mirror, inject);
    p->d_step = dev_bytes(NULL, sizeof(int64_t));
    p->d_sub = dev_bytes(NULL, sizeof(int32_t));
    if (rc == ST_OK && (!p->d_step || !p->d_sub)) rc = ST_ERR_DEVICE;
    if (rc == ST_OK) rc = st_cuda_trace_init(&p->dev, &p->host, p->d_step, p->d_sub);
    CHECK(rc == ST_OK, "tracers (%s): %s", inject ? inject : "no injection", st_last_error());
    return rc == ST_OK;
}

static void pair_free(pair *p) {
    st_cuda_trace_free(&p->dev);
    st_trace_free(&p->host);
    st_trace_free(&p->mirror);
    cudaFree(p->d_step);
    cudaFree(p->d_sub);
}

/* Both at (step, pass): the host's position, the device's words. */
static void pair_pos(pair *p, int64_t step, int32_t sub) {
    st_trace_begin_step(&p->host, step);
    st_trace_position(&p->host, ST_PHASE_TRAIN, sub);
    CHECK(cudaMemcpy(p->d_step, &step, sizeof step, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(p->d_sub, &sub, sizeof sub, cudaMemcpyHostToDevice) == cudaSuccess,
          "position words");
}

/* One item scanned on both sides. */
static void pair_scan(pair *p, tbuf *b) {
    host_scan(&p->host, b);
    st_cuda_scan_item it = tbuf_item(b);
    int rc = st_cuda_trace_scan(&p->dev, 1, &it, NULL);
    CHECK(rc == ST_OK, "device scan of %s: %s", p->host.labels.l[b->id].name, st_last_error());
}

static void record_str(const st_trace_record *r, char *buf, size_t n) {
    snprintf(buf, n,
             "index %lld coord (%d, %d, %d, %d) kind %d bits %#llx count %lld step %lld sub %d seq %lld run %d f64 %d",
             (long long)r->index, r->coord[0], r->coord[1], r->coord[2], r->coord[3], r->kind,
             (unsigned long long)r->bits, (long long)r->count, (long long)r->step, r->sub, (long long)r->seq, r->run,
             r->f64);
}

static int same_record(const st_trace_record *a, const st_trace_record *b) {
    return a->index == b->index && memcmp(a->coord, b->coord, sizeof a->coord) == 0 && a->kind == b->kind &&
           a->sub == b->sub && a->bits == b->bits && a->count == b->count && a->step == b->step && a->seq == b->seq &&
           a->run == b->run && a->f64 == b->f64;
}

/* Downloads the device records into the mirror and compares them with the host's. */
static void pair_check(pair *p, const char *what) {
    /* poisoned first: a field the download does not write cannot pass */
    memset(p->mirror.rec, 0xFF, sizeof(st_trace_record) * (size_t)p->mirror.labels.n);
    p->mirror.seq = -7, p->mirror.ntrip = -7, p->mirror.inject.done = -7;
    int rc = st_cuda_trace_download(&p->dev, &p->mirror);
    CHECK(rc == ST_OK, "%s: download: %s", what, st_last_error());
    int bad = 0;
    for (int i = 0; i < p->host.labels.n; i++) {
        if (same_record(&p->host.rec[i], &p->mirror.rec[i])) continue;
        if (bad++ < 3) {
            char h[256], d[256];
            record_str(&p->host.rec[i], h, sizeof h);
            record_str(&p->mirror.rec[i], d, sizeof d);
            fprintf(stderr, "  %s: label %d %s\n    host   %s\n    device %s\n", what, i, p->host.labels.l[i].name, h,
                    d);
        }
    }
    CHECK(bad == 0, "%s: %d labels' records differ from the host's", what, bad);
    CHECK(p->mirror.seq == p->host.seq, "%s: seq %lld, host %lld", what, (long long)p->mirror.seq,
          (long long)p->host.seq);
    CHECK(p->mirror.ntrip == p->host.ntrip, "%s: %d labels tripped, host %d", what, p->mirror.ntrip, p->host.ntrip);
    CHECK(p->mirror.inject.done == p->host.inject.done, "%s: injection done %d, host %d", what, p->mirror.inject.done,
          p->host.inject.done);
}

/* ---- records ----------------------------------------------------------------- */

typedef struct {
    const char *label;
    int shift; /* misalignment of the device data, elements */
} rec_case;

static void test_records(const st_label_sizes *z, const st_param_table *pt) {
    static const rec_case cases[] = {
        {"act_vsn_out", 0},         /* [B, K, Dv] padded: one block */
        {"train_w_in_out", 0},      /* [mb, K, D] padded: many blocks */
        {"step_entry_w_in_W", 1},   /* a parameter, data not 16-byte aligned */
        {"grad_mix0_in_proj_W", 3}, /* a larger parameter */
        {"step_entry_w_in_b", 2},   /* a vector */
        {"train_gae_adv", 0},       /* [T, B] */
        {"env_reward", 0},          /* one row [B] */
        {"act_value", 1},           /* one row [B] */
        {"train_loss", 1},          /* [6] doubles, 8 bytes off alignment */
        {"grad_global_norm", 0},    /* [1] double */
    };
    pair p;
    if (!pair_init(&p, ST_TRACE_FULL, z, pt, NULL)) return;
    st_rng rng = st_rng_make(5150, ST_STREAM_TEST);
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        const rec_case *c = &cases[ci];
        tbuf b;
        if (!tbuf_make(&b, &p.host, c->label, c->shift, &rng)) continue;
        char what[160];
        int64_t n = b.rows * b.width, step = 10 + ci;
        printf("  %-22s rows %6lld width %4lld stride %4lld %s, shift %d\n", c->label, (long long)b.rows,
               (long long)b.width, (long long)b.stride, b.f64 ? "f64" : "f32", c->shift);

        /* clean, with the NaN tag in every gap */
        pair_pos(&p, step, 0);
        pair_scan(&p, &b);
        snprintf(what, sizeof what, "%s clean", c->label);
        pair_check(&p, what);
        CHECK(p.mirror.rec[b.id].index < 0, "%s: clean data (NaN gap) tripped", what);

        /* bad values at random positions, one more in the first one's row */
        int nbad = n == 1 ? 1 : 2 + (int)st_rng_below(&rng, 4);
        int64_t first_planted = -1;
        for (int k = 0; k < nbad; k++) {
            int64_t i = (int64_t)st_rng_below(&rng, (uint32_t)n);
            if (k == 1) i = (first_planted / b.width) * b.width + (int64_t)st_rng_below(&rng, (uint32_t)b.width);
            if (k == 0) first_planted = i;
            set_bits(&b, at_logical(&b, i), bad_value(b.f64, (int)st_rng_below(&rng, 6)));
        }
        int64_t want_first, want_count = logical_bad(&b, &want_first);
        CHECK(tbuf_upload(&b), "upload");
        pair_pos(&p, step, 1);
        pair_scan(&p, &b);
        snprintf(what, sizeof what, "%s with %lld bad values", c->label, (long long)want_count);
        pair_check(&p, what);
        const st_trace_record *r = &p.mirror.rec[b.id];
        CHECK(r->index == want_first && r->count == want_count && r->step == step && r->sub == 1,
              "%s: index %lld count %lld step %lld sub %d, planted first %lld count %lld", what, (long long)r->index,
              (long long)r->count, (long long)r->step, r->sub, (long long)want_first, (long long)want_count);
        printf("    first bad value at %lld, %lld in all, kind %s, bits %#llx\n", (long long)r->index,
               (long long)r->count, st_trace_kind_name(r->kind), (unsigned long long)r->bits);

        /* an earlier bad value: the first record stays */
        int64_t earlier = want_first > 0 ? 0 : n - 1;
        set_bits(&b, at_logical(&b, earlier), bad_value(b.f64, ci));
        CHECK(tbuf_upload(&b), "upload");
        int64_t kept = r->index;
        pair_pos(&p, step + 1, 2);
        pair_scan(&p, &b);
        snprintf(what, sizeof what, "%s second trip", c->label);
        pair_check(&p, what);
        CHECK(p.mirror.rec[b.id].index == kept && p.mirror.rec[b.id].step == step,
              "%s: the first record was replaced (index %lld, step %lld)", what, (long long)p.mirror.rec[b.id].index,
              (long long)p.mirror.rec[b.id].step);
        tbuf_check_same(&b, what);
        tbuf_free(&b);
    }
    pair_free(&p);
}

/* ---- bad items ----------------------------------------------------------------- */

static void test_bad_items(const st_label_sizes *z, const st_param_table *pt) {
    pair p;
    if (!pair_init(&p, ST_TRACE_FULL, z, pt, NULL)) return;
    st_rng rng = st_rng_make(77, ST_STREAM_TEST);
    tbuf a, l;
    if (tbuf_make(&a, &p.host, "act_vsn_out", 0, &rng) && tbuf_make(&l, &p.host, "train_loss", 0, &rng)) {
        st_cuda_scan_item items[3] = {tbuf_item(&a), tbuf_item(&a), tbuf_item(&l)};
        items[1].label = p.host.labels.n;
        CHECK(st_cuda_trace_scan(&p.dev, 3, items, NULL) == ST_ERR_INPUT, "a label out of range accepted");
        items[1] = tbuf_item(&a), items[1].stride = items[1].width - 1;
        CHECK(st_cuda_trace_scan(&p.dev, 3, items, NULL) == ST_ERR_INPUT, "a stride below the width accepted");
        items[1] = tbuf_item(&a), items[2].f64 = 0;
        CHECK(st_cuda_trace_scan(&p.dev, 3, items, NULL) == ST_ERR_INPUT, "floats for a double label accepted");
        items[2] = tbuf_item(&l), items[0].rows = 0;
        CHECK(st_cuda_trace_scan(&p.dev, 3, items, NULL) == ST_ERR_INPUT, "zero rows accepted");
        CHECK(st_cuda_trace_scan(&p.dev, 0, NULL, NULL) == ST_OK, "an empty batch refused");
        st_clear_error();
        pair_pos(&p, 0, 0);
        pair_check(&p, "refused batches"); /* nothing ran: seq 0 on both */
        tbuf_free(&a), tbuf_free(&l);
    }
    pair_free(&p);
}

/* ---- injection ------------------------------------------------------------------ */

static void test_inject(const st_label_sizes *z, const st_param_table *pt, const char *label, const char *kind,
                        st_trace_mode mode, uint64_t seed) {
    st_rng rng = st_rng_make(seed, ST_STREAM_TEST);
    st_label_table probe;
    if (st_labels_build(z, pt, &probe) != ST_OK) {
        CHECK(0, "labels: %s", st_last_error());
        return;
    }
    int id = st_labels_find(&probe, label);
    int64_t n = id >= 0 ? probe.l[id].rows * probe.l[id].width : 1;
    st_labels_free(&probe);
    int64_t index = (int64_t)st_rng_below(&rng, (uint32_t)n);
    char spec[128], what[200];
    snprintf(spec, sizeof spec, "%s:2:%lld%s%s", label, (long long)index, kind ? ":" : "", kind ? kind : "");
    pair p;
    if (!pair_init(&p, mode, z, pt, spec)) return;
    printf("  inject %s (%s)\n", spec, st_trace_mode_name(mode));
    /* the injected label between two others, in one batch */
    tbuf b[3];
    int ok = tbuf_make(&b[0], &p.host, "act_logits", 1, &rng);
    ok = ok && tbuf_make(&b[1], &p.host, label, 0, &rng);
    ok = ok && tbuf_make(&b[2], &p.host, "bwd_dvc", 0, &rng);
    if (!ok) return;
    unsigned char *clean = malloc(b[1].n * b[1].es);
    memcpy(clean, b[1].h, b[1].n * b[1].es);
    st_cuda_scan_item items[3] = {tbuf_item(&b[0]), tbuf_item(&b[1]), tbuf_item(&b[2])};
    int full = mode == ST_TRACE_FULL;
    /* steps 0..3, then step 2 again (another pass) with the buffer clean again */
    for (int pass = 0; pass < 5; pass++) {
        int64_t step = pass < 4 ? pass : 2;
        if (pass == 4) {
            memcpy(b[1].h, clean, b[1].n * b[1].es);
            CHECK(tbuf_upload(&b[1]), "upload");
        }
        pair_pos(&p, step, pass);
        for (int k = 0; k < 3; k++)
            host_scan(&p.host, &b[k]);
        CHECK(st_cuda_trace_scan(&p.dev, 3, items, NULL) == ST_OK, "scan: %s", st_last_error());
        snprintf(what, sizeof what, "%s at step %lld (pass %d)", spec, (long long)step, pass);
        pair_check(&p, what);
        tbuf_check_same(&b[1], what);
        const st_trace_record *r = &p.mirror.rec[b[1].id];
        CHECK(p.mirror.inject.done == (pass >= 2), "%s: injection done %d", what, p.mirror.inject.done);
        CHECK(full && pass >= 2 ? r->index == index && r->step == 2 && r->sub == 2 : r->index < 0,
              "%s: record index %lld step %lld sub %d", what, (long long)r->index, (long long)r->step, r->sub);
        int64_t f, nb = logical_bad(&b[1], &f);
        CHECK(nb == (pass >= 2 && pass < 4), "%s: %lld bad values in the buffer", what, (long long)nb);
    }
    /* a reset re-arms it */
    memcpy(b[1].h, clean, b[1].n * b[1].es);
    CHECK(tbuf_upload(&b[1]), "upload");
    st_trace_reset(&p.host);
    CHECK(st_cuda_trace_reset(&p.dev, NULL) == ST_OK, "reset: %s", st_last_error());
    snprintf(what, sizeof what, "%s after a reset", spec);
    pair_check(&p, what);
    pair_pos(&p, 2, 7);
    for (int k = 0; k < 3; k++)
        host_scan(&p.host, &b[k]);
    CHECK(st_cuda_trace_scan(&p.dev, 3, items, NULL) == ST_OK, "scan: %s", st_last_error());
    snprintf(what, sizeof what, "%s re-armed", spec);
    pair_check(&p, what);
    tbuf_check_same(&b[1], what);
    CHECK(p.mirror.inject.done == 1 && (!full || p.mirror.rec[b[1].id].index == index), "%s: did not fire", what);
    free(clean);
    for (int k = 0; k < 3; k++)
        tbuf_free(&b[k]);
    pair_free(&p);
}

/* ---- graphs ----------------------------------------------------------------------- */

enum { G_STEPS = 4 };

/* The labels (ph, kind, i) of every parameter i of flat device buffer dbase, as items. */
static int param_items(const st_trace *tr, const st_param_table *pt, st_trace_phase ph, st_trace_kind kind,
                       const float *dbase, st_cuda_scan_item *out) {
    int n = 0;
    for (int i = 0; i < pt->n; i++) {
        int id = st_labels_slot(&tr->labels, ph, kind, i);
        if (id < 0) continue;
        const st_label *l = &tr->labels.l[id];
        st_cuda_scan_item it = {id, 0, dbase + pt->p[i].offset, l->rows, l->width, l->stride};
        out[n++] = it;
    }
    return n;
}

typedef struct {
    tbuf w, m, v;        /* flat parameter buffers (labels unused: scanned through the table) */
    tbuf act, gae, loss; /* act_vsn_out, train_gae_adv (the injection's target), train_loss */
    tbuf loss_bad;       /* train_loss with a NaN (scanned at step 3) */
    st_cuda_scan_item *batch[G_STEPS];
    int nbatch[G_STEPS];
} g_data;

/* The host side of one step of the sequence (the device batch's order). */
static void g_host_step(st_trace *tr, const st_param_table *pt, g_data *g, int s) {
    if (s == 0) {
        st_trace_params(tr, ST_PHASE_STEP_ENTRY, ST_TK_PARAM, pt, (float *)g->w.h);
        st_trace_params(tr, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_M, pt, (float *)g->m.h);
        st_trace_params(tr, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_V, pt, (float *)g->v.h);
    }
    host_scan(tr, &g->act);
    host_scan(tr, &g->gae);
    host_scan(tr, s == 3 ? &g->loss_bad : &g->loss);
    if (s == 1) st_trace_params(tr, ST_PHASE_GRAD, ST_TK_PARAM, pt, (float *)g->w.h);
}

static void test_graph(const st_label_sizes *z, const st_param_table *pt) {
    static const int64_t steps[G_STEPS] = {0, 1, 2, 3};
    static const int32_t subs[G_STEPS] = {-1, 0, 5, 11};
    st_rng rng = st_rng_make(909, ST_STREAM_TEST);
    st_label_table probe;
    if (st_labels_build(z, pt, &probe) != ST_OK) return;
    int gid = st_labels_find(&probe, "train_gae_adv");
    int64_t gidx = (int64_t)st_rng_below(&rng, (uint32_t)(probe.l[gid].rows * probe.l[gid].width));
    st_labels_free(&probe);
    char spec[96];
    snprintf(spec, sizeof spec, "train_gae_adv:2:%lld:inf", (long long)gidx);
    pair p;
    if (!pair_init(&p, ST_TRACE_FULL, z, pt, spec)) return;
    g_data g;
    memset(&g, 0, sizeof g);
    int P = (int)pt->total, ok = 1;
    ok = ok && tbuf_make_shape(&g.w, 0, 0, 1, P, P, 0, &rng) && tbuf_make_shape(&g.m, 0, 0, 1, P, P, 0, &rng) &&
         tbuf_make_shape(&g.v, 0, 0, 1, P, P, 0, &rng);
    ok = ok && tbuf_make(&g.act, &p.host, "act_vsn_out", 0, &rng) &&
         tbuf_make(&g.gae, &p.host, "train_gae_adv", 0, &rng);
    ok = ok && tbuf_make(&g.loss, &p.host, "train_loss", 0, &rng) &&
         tbuf_make(&g.loss_bad, &p.host, "train_loss", 1, &rng);
    CHECK(ok, "graph buffers");
    if (!ok) return;
    /* bad values: a weight of the first chunk, a second moment in the last
     * chunk, the loss's policy term at step 3 */
    const st_param *p0 = &pt->p[1], *pl = &pt->p[pt->n - 2];
    set_bits(&g.w, p0->offset + p0->count / 2, 0xff800000u);
    set_bits(&g.v, pl->offset + pl->count - 1, 0x7fc00000u);
    set_bits(&g.v, pl->offset, 0x7f800000u);
    set_bits(&g.loss_bad, 1, 0x7ff8000000000000ull);
    ok = tbuf_upload(&g.w) && tbuf_upload(&g.v) && tbuf_upload(&g.loss_bad);
    CHECK(ok, "upload");
    unsigned char *gae_clean = malloc(g.gae.n * 4);
    memcpy(gae_clean, g.gae.h, g.gae.n * 4);
    /* the batches */
    for (int s = 0; s < G_STEPS; s++) {
        st_cuda_scan_item *it = malloc(sizeof *it * (size_t)(4 * pt->n + 3));
        int n = 0;
        if (s == 0) {
            n += param_items(&p.host, pt, ST_PHASE_STEP_ENTRY, ST_TK_PARAM, g.w.d, it + n);
            n += param_items(&p.host, pt, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_M, g.m.d, it + n);
            n += param_items(&p.host, pt, ST_PHASE_STEP_ENTRY, ST_TK_ADAM_V, g.v.d, it + n);
        }
        it[n++] = tbuf_item(&g.act);
        it[n++] = tbuf_item(&g.gae);
        it[n++] = tbuf_item(s == 3 ? &g.loss_bad : &g.loss);
        if (s == 1) n += param_items(&p.host, pt, ST_PHASE_GRAD, ST_TK_PARAM, g.w.d, it + n);
        g.batch[s] = it, g.nbatch[s] = n;
    }
    printf("  graph: %d steps, batches of %d, %d, %d, %d items (chunks of %d)\n", G_STEPS, g.nbatch[0], g.nbatch[1],
           g.nbatch[2], g.nbatch[3], ST_CUDA_TRACE_CHUNK);
    int64_t *d_steps = dev_bytes(steps, sizeof steps);
    int32_t *d_subs = dev_bytes(subs, sizeof subs);
    cudaStream_t stream = NULL;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
    cudaGraphExec_t exec[2] = {NULL, NULL};
    /* graph 0: the sequence; graph 1: a reset, then the sequence */
    for (int gi = 0; gi < 2; gi++) {
        cudaGraph_t graph = NULL;
        int rc = ST_OK;
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
        if (gi == 1) rc = st_cuda_trace_reset(&p.dev, stream);
        for (int s = 0; s < G_STEPS && rc == ST_OK; s++) {
            if (cudaMemcpyAsync(p.d_step, d_steps + s, sizeof(int64_t), cudaMemcpyDeviceToDevice, stream) !=
                    cudaSuccess ||
                cudaMemcpyAsync(p.d_sub, d_subs + s, sizeof(int32_t), cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
                rc = ST_ERR_DEVICE;
            if (rc == ST_OK) rc = st_cuda_trace_scan(&p.dev, g.nbatch[s], g.batch[s], stream);
        }
        CHECK(rc == ST_OK, "capture %d: %s", gi, st_last_error());
        cudaError_t e = cudaStreamEndCapture(stream, &graph);
        CHECK(e == cudaSuccess, "end capture: %s", cudaGetErrorString(e));
        e = cudaGraphInstantiate(&exec[gi], graph, 0);
        CHECK(e == cudaSuccess, "instantiate: %s", cudaGetErrorString(e));
        cudaGraphDestroy(graph);
    }
    pair_check(&p, "graphs captured, nothing run"); /* capture launches nothing */
    /* replays: 0, 0 (no reset: records kept, seq counting), then 1, 1 with the target clean again */
    const int order[4] = {0, 0, 1, 1};
    int nl = p.host.labels.n;
    st_trace_record *prev = malloc(sizeof *prev * (size_t)nl);
    for (int rep = 0; rep < 4; rep++) {
        int gi = order[rep];
        if (gi == 1) {
            memcpy(g.gae.h, gae_clean, g.gae.n * 4);
            CHECK(tbuf_upload(&g.gae), "upload");
            st_trace_reset(&p.host);
        }
        for (int s = 0; s < G_STEPS; s++) {
            st_trace_begin_step(&p.host, steps[s]);
            st_trace_position(&p.host, ST_PHASE_TRAIN, subs[s]);
            g_host_step(&p.host, pt, &g, s);
        }
        cudaError_t e = cudaGraphLaunch(exec[gi], stream);
        CHECK(e == cudaSuccess, "replay %d: %s", rep, cudaGetErrorString(e));
        e = cudaStreamSynchronize(stream);
        CHECK(e == cudaSuccess, "replay %d ran: %s", rep, cudaGetErrorString(e));
        char what[96];
        snprintf(what, sizeof what, "replay %d (graph %s)", rep, gi ? "reset + sequence" : "sequence");
        pair_check(&p, what);
        tbuf_check_same(&g.gae, what);
        int ids[16], nt = st_trace_ordered(&p.mirror, ids, 16);
        printf("    %s: %d trips, seq %lld, first %s\n", what, nt, (long long)p.mirror.seq,
               nt ? p.mirror.labels.l[ids[0]].name : "-");
        CHECK(nt == 5, "%s: %d labels tripped, expected 5 (weight, moment, gradient, injected gae, loss)", what, nt);
        if (rep == 3) { /* two replays of the reset graph: the same records, seq shifted by one sequence */
            int64_t per = p.host.seq / 4;
            int same = 1;
            for (int i = 0; i < nl; i++) {
                st_trace_record a = prev[i];
                if (a.index >= 0) a.seq += per;
                same &= same_record(&a, &p.mirror.rec[i]);
            }
            CHECK(same, "two replays of the reset graph give different records");
        }
        memcpy(prev, p.mirror.rec, sizeof(st_trace_record) * (size_t)nl);
    }
    for (int gi = 0; gi < 2; gi++)
        if (exec[gi]) cudaGraphExecDestroy(exec[gi]);
    cudaStreamDestroy(stream);
    cudaFree(d_steps), cudaFree(d_subs);
    for (int s = 0; s < G_STEPS; s++)
        free(g.batch[s]);
    free(gae_clean), free(prev);
    tbuf_free(&g.w), tbuf_free(&g.m), tbuf_free(&g.v), tbuf_free(&g.act), tbuf_free(&g.gae), tbuf_free(&g.loss);
    tbuf_free(&g.loss_bad);
    pair_free(&p);
}

/* ---- 16M floats --------------------------------------------------------------------- */

static double time_scans(pair *p, tbuf *b, int reps) {
    st_cuda_scan_item it = tbuf_item(b);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    CHECK(st_cuda_trace_scan(&p->dev, 1, &it, NULL) == ST_OK, "warm-up scan: %s", st_last_error());
    cudaEventRecord(e0, NULL);
    for (int r = 0; r < reps; r++)
        st_cuda_trace_scan(&p->dev, 1, &it, NULL);
    cudaEventRecord(e1, NULL);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    for (int r = 0; r < reps + 1; r++)
        host_scan(&p->host, b);
    return ms / 1e3 / reps;
}

static void test_big(const st_label_sizes *z, const st_param_table *pt) {
    pair p;
    if (!pair_init(&p, ST_TRACE_FULL, z, pt, NULL)) return;
    st_rng rng = st_rng_make(16, ST_STREAM_TEST);
    const int64_t n = (int64_t)1 << 24, W = 1000, S = 1024;
    int a = st_labels_find(&p.host.labels, "train_w_in_out"), b = st_labels_find(&p.host.labels, "train_mix0_out");
    tbuf x, y;
    memset(&x, 0, sizeof x), memset(&y, 0, sizeof y);
    int ok = tbuf_make_shape(&x, a, 0, 1, n, n, 0, &rng) && tbuf_make_shape(&y, b, 0, n / S, W, S, 0, &rng);
    CHECK(ok, "16M buffers");
    if (ok) {
        pair_pos(&p, 3, 1);
        double tx = time_scans(&p, &x, 20), ty = time_scans(&p, &y, 20);
        double bx = (double)n * 4 / tx / 1e9, by = (double)(n / S) * W * 4 / ty / 1e9;
        printf("  clean scan of %lld floats, contiguous: %.1f us, %.0f GB/s\n", (long long)n, tx * 1e6, bx);
        printf("  clean scan of %lld x %lld floats (stride %lld, NaN gap): %.1f us, %.0f GB/s\n", (long long)(n / S),
               (long long)W, (long long)S, ty * 1e6, by);
        if (bx < 1000) printf("  note: contiguous scan below 1 TB/s\n");
        pair_check(&p, "16M clean");
        CHECK(p.mirror.ntrip == 0, "clean 16M scans tripped");
        /* one NaN near the end (and an -Inf after it) */
        int64_t ix = n - 1 - 1 - (int64_t)st_rng_below(&rng, 4096);
        set_bits(&x, (size_t)ix, 0x7fc00000u), set_bits(&x, (size_t)n - 1, 0xff800000u);
        int64_t iy = (n / S - 1) * W - 1 - (int64_t)st_rng_below(&rng, 5000);
        set_bits(&y, at_logical(&y, iy), 0xffc00000u);
        CHECK(tbuf_upload(&x) && tbuf_upload(&y), "upload");
        pair_pos(&p, 4, 2);
        pair_scan(&p, &x);
        pair_scan(&p, &y);
        pair_check(&p, "16M with a NaN near the end");
        CHECK(p.mirror.rec[a].index == ix && p.mirror.rec[a].count == 2,
              "contiguous: index %lld count %lld, planted %lld", (long long)p.mirror.rec[a].index,
              (long long)p.mirror.rec[a].count, (long long)ix);
        CHECK(p.mirror.rec[b].index == iy && p.mirror.rec[b].count == 1, "padded: index %lld count %lld, planted %lld",
              (long long)p.mirror.rec[b].index, (long long)p.mirror.rec[b].count, (long long)iy);
    }
    tbuf_free(&x), tbuf_free(&y);
    pair_free(&p);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_train_config c;
    st_param_table pt;
    CHECK(st_train_config_default(&c, "tiny") == ST_OK, "tiny config");
    st_label_sizes z = {c.dims, c.dims.T * c.dims.B / c.minibatches, ST_TRACE_POISON_PAD};
    CHECK(st_param_table_build(&z.d, &pt) == ST_OK, "parameter table: %s", st_last_error());
    printf("tiny preset, minibatch %d, padding %d, %d parameters\n", z.mb, z.pad, pt.n);
    printf("records:\n");
    test_records(&z, &pt);
    test_bad_items(&z, &pt);
    printf("injection:\n");
    test_inject(&z, &pt, "act_vsn_out", "-inf", ST_TRACE_FULL, 31);
    test_inject(&z, &pt, "train_loss", NULL, ST_TRACE_FULL, 32);
    test_inject(&z, &pt, "train_w_in_out", "inf", ST_TRACE_SENTINEL, 33);
    printf("graphs:\n");
    test_graph(&z, &pt);
    printf("16M floats:\n");
    test_big(&z, &pt);
    st_param_table_free(&pt);
    st_train_config_free(&c);
    CHECK(cudaGetLastError() == cudaSuccess, "a CUDA error is left over: %s", cudaGetErrorString(cudaGetLastError()));
#endif
    TEST_MAIN_END();
}
