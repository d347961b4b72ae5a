/* test_trace.c: the NaN/Inf tracer (DESIGN section 8).
 *
 * - the label registry: tiny preset >= 49 labels with the three names of
 *   the original system, unique names, numbering in phase order, names
 *   independent of the batch size;
 * - scans: first element, coordinates, kind, count of a padded buffer
 *   (padding never read), first trip kept, the padding tag recognised;
 * - a traced run (full or sentinel) is bit-identical to an untraced one,
 *   stays clean and scans every label every step;
 * - injection at EVERY label at steps 0 and 3, at a random index: the first
 *   label, step, index and kind are the injected ones and nothing trips
 *   before it;
 * - sentinel mode finds the same first label through its replay;
 * - a trip's dump replays to the same report; `dump` writes every label;
 *   the dump's inputs skip a buffer a later scan reused (L = 2 backward);
 * - the smoke harness over seeds, clean and injected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/philox.h"
#include "core/safetensors.h"
#include "data/dataset.h"
#include "test.h"
#include "trace/guard.h"
#include "trace/smoke.h"
#include "trace/trace.h"
#include "train/trainer.h"

/* Small sizes so that the ~700 injected updates take seconds. */
static st_train_config small_config(void) {
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.dims.B = 4;
    c.dims.T = 4;
    c.dims.K = 16;
    c.minibatches = 2;
    c.epochs = 1;
    c.updates = 8;
    c.episode_length = 6; /* episodes end and reset inside the run */
    c.seed = 11;
    return c;
}

static int same_weights(const st_trainer *a, const st_trainer *b) {
    size_t P = a->table.total;
    return memcmp(a->w, b->w, sizeof(float) * P) == 0 && memcmp(a->adam_m, b->adam_m, sizeof(float) * P) == 0 &&
           memcmp(a->adam_v, b->adam_v, sizeof(float) * P) == 0 && a->update == b->update;
}

/* ---- names and registry ------------------------------------------------------ */

static void test_names(void) {
    const char *cases[][2] = {
        {"w_in.weight", "w_in_W"},          {"w_in.bias", "w_in_b"},   {"mix.0.in_proj.weight", "mix0_in_proj_W"},
        {"mix.12.conv_w", "mix12_conv_w"},  {"ln.1.bias", "ln1_b"},    {"vsn.sel.norm.weight", "vsn_sel_norm_W"},
        {"vsn.var.fc1_w", "vsn_var_fc1_w"}, {"ln_f.weight", "ln_f_W"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        st_label_param_name(cases[i][0], out, sizeof out);
        CHECK(strcmp(out, cases[i][1]) == 0, "label name of %s is %s, expected %s", cases[i][0], out, cases[i][1]);
    }
}

static int build_labels(const char *preset, int B, int minibatches, st_param_table *pt, st_label_table *t) {
    st_train_config c;
    st_train_config_default(&c, preset);
    c.dims.B = B;
    st_label_sizes z = {c.dims, c.dims.T * B / minibatches, 0};
    st_train_config_free(&c);
    int rc = st_param_table_build(&z.d, pt);
    return rc == ST_OK ? st_labels_build(&z, pt, t) : rc;
}

static void test_registry(void) {
    st_param_table p32, p8;
    st_label_table t32, t8;
    CHECK(build_labels("tiny", 32, 4, &p32, &t32) == ST_OK, "labels of tiny: %s", st_last_error());
    CHECK(build_labels("tiny", 8, 2, &p8, &t8) == ST_OK, "labels of tiny, B=8: %s", st_last_error());
    printf("tiny preset: %d labels\n", t32.n);
    CHECK(t32.n >= 49, "tiny preset has %d labels, need >= 49", t32.n);
    const char *must[] = {"train_vsn_out",    "step_entry_w_in_W", "step_entry_w_in_b", "act_vsn_out",
                          "saved_mix0_ssd_y", "bwd_dvc",           "grad_w_in_W",       "optim_adam_v_w_in_W",
                          "env_reward",       "train_loss"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        CHECK(st_labels_find(&t32, must[i]) >= 0, "label %s missing", must[i]);
    /* step_entry_w_in_W is w_in.weight at the top of the step: its shape */
    int w = st_labels_find(&t32, "step_entry_w_in_W"), v = st_labels_find(&t32, "train_vsn_out");
    const st_param *pw = st_param_find(&p32, "w_in.weight");
    CHECK(w >= 0 && pw && t32.l[w].ndim == 2 && t32.l[w].shape[0] == pw->shape[0] && t32.l[w].shape[1] == pw->shape[1],
          "step_entry_w_in_W has not the shape of w_in.weight");
    CHECK(v >= 0 && t32.l[v].shape[0] == 256 && t32.l[v].shape[1] == 32 && t32.l[v].shape[2] == 8,
          "train_vsn_out is [mb=256, K=32, Dv=8]");
    int order = 1, unique = 1, same = t32.n == t8.n;
    for (int i = 0; i < t32.n; i++) {
        if (i > 0) order &= t32.l[i].phase >= t32.l[i - 1].phase;
        for (int j = i + 1; j < t32.n; j++)
            unique &= strcmp(t32.l[i].name, t32.l[j].name) != 0;
        if (same) same &= strcmp(t32.l[i].name, t8.l[i].name) == 0;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s_", st_trace_phase_name(t32.l[i].phase));
        CHECK(strncmp(t32.l[i].name, prefix, strlen(prefix)) == 0, "label %s lacks its phase prefix %s", t32.l[i].name,
              prefix);
    }
    CHECK(order, "labels are not numbered in phase order");
    CHECK(unique, "label names are not unique");
    CHECK(same, "the label table depends on the batch size beyond shapes");
    int a32 = st_labels_find(&t32, "act_window"), a8 = st_labels_find(&t8, "act_window");
    CHECK(a32 == a8 && t32.l[a32].shape[0] == 32 && t8.l[a8].shape[0] == 8, "act_window shapes follow B");
    st_labels_free(&t32), st_labels_free(&t8);
    st_param_table_free(&p32), st_param_table_free(&p8);
}

/* ---- scans ------------------------------------------------------------------- */

static void test_scan(void) {
    st_param_table pt;
    st_label_table probe;
    CHECK(build_labels("tiny", 8, 2, &pt, &probe) == ST_OK, "labels");
    st_labels_free(&probe);
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.dims.B = 8;
    st_label_sizes z = {c.dims, c.dims.T * 8 / 2, 0};
    st_trace tr;
    CHECK(st_trace_init(&tr, ST_TRACE_FULL, &z, &pt, 2) == ST_OK, "tracer: %s", st_last_error());
    int id = st_labels_find(&tr.labels, "act_vsn_out");
    int K = c.dims.K, Dv = c.dims.Dv, rows = 8 * K, stride = Dv + 5;
    float *x = malloc(sizeof(float) * (size_t)rows * stride);
    st_rng rng = st_rng_make(77, ST_STREAM_TEST);
    for (int i = 0; i < rows * stride; i++)
        x[i] = (i % stride) < Dv ? (float)st_rng_normal(&rng) : NAN;
    st_trace_begin_step(&tr, 5);
    st_trace_position(&tr, ST_PHASE_ACT, 2);
    st_trace_tensor(&tr, id, x, rows, Dv, stride);
    CHECK(tr.rec[id].index < 0 && tr.ntrip == 0, "NaN padding outside the logical rows must not trip");
    int r = 37, col = 3;
    x[r * stride + col] = INFINITY;
    x[50 * stride + 0] = NAN;
    x[60 * stride + 1] = -INFINITY;
    st_trace_tensor(&tr, id, x, rows, Dv, stride);
    const st_trace_record *rec = &tr.rec[id];
    CHECK(rec->index == (int64_t)r * Dv + col, "first index %lld, expected %d", (long long)rec->index, r * Dv + col);
    CHECK(rec->coord[0] == r / K && rec->coord[1] == r % K && rec->coord[2] == col, "coordinates (%d, %d, %d)",
          rec->coord[0], rec->coord[1], rec->coord[2]);
    CHECK(rec->kind == ST_TRACE_POS_INF && rec->count == 3 && rec->step == 5 && rec->sub == 2,
          "kind %d count %lld step %lld sub %d", rec->kind, (long long)rec->count, (long long)rec->step, rec->sub);
    x[0] = NAN;
    st_trace_tensor(&tr, id, x, rows, Dv, stride);
    CHECK(tr.rec[id].index == (int64_t)r * Dv + col && tr.ntrip == 1, "only the first trip of a label is kept");
    /* the padding tag, with either sign, is recognised; a computed NaN is not */
    int w = st_labels_find(&tr.labels, "act_w_in_out");
    float tag = st_trace_tag_value(), *y = calloc(4096, sizeof(float));
    y[100] = -tag;
    st_trace_tensor(&tr, w, y, 1, 4096, 4096);
    CHECK(st_trace_record_tagged(&tr.rec[w]), "a sign-flipped padding tag is not recognised");
    CHECK(!st_trace_record_tagged(&tr.rec[id]), "+Inf taken for the tag");
    int l2 = st_labels_find(&tr.labels, "act_mix0_out");
    y[100] = 0.0f, y[7] = NAN;
    st_trace_tensor(&tr, l2, y, 1, 4096, 4096);
    CHECK(tr.rec[l2].index == 7 && !st_trace_record_tagged(&tr.rec[l2]), "a plain NaN taken for the tag");
    int ids[8], n = st_trace_ordered(&tr, ids, 8);
    CHECK(n == 3 && ids[0] == id && ids[1] == w && ids[2] == l2 && st_trace_first(&tr) == id,
          "trips are ordered by scan order");
    /* injection specs */
    CHECK(st_trace_set_inject(&tr, "no_such_label:0:0") == ST_ERR_INPUT, "unknown label accepted");
    CHECK(st_trace_set_inject(&tr, "act_vsn_out:0:999999") == ST_ERR_INPUT, "index outside the label accepted");
    CHECK(st_trace_set_inject(&tr, "act_vsn_out:0:1:zero") == ST_ERR_INPUT, "bad kind accepted");
    CHECK(st_trace_set_inject(&tr, "act_vsn_out:x:1") == ST_ERR_INPUT, "bad step accepted");
    CHECK(st_trace_set_inject(&tr, "act_vsn_out:1:2:3:4") == ST_ERR_INPUT, "extra fields accepted");
    CHECK(st_trace_set_inject(&tr, "act_vsn_out:3:17:-inf") == ST_OK && tr.inject.label == id && tr.inject.step == 3 &&
              tr.inject.index == 17 && tr.inject.kind == ST_TRACE_NEG_INF,
          "a good spec: %s", st_last_error());
    st_clear_error();
    free(x), free(y);
    st_trace_free(&tr);
    st_param_table_free(&pt);
    st_train_config_free(&c);
}

/* ---- training under the tracer ---------------------------------------------- */

typedef struct {
    st_trainer t;
    st_trace tr;
    st_trace_guard g;
} traced;

static int traced_init(traced *x, const st_train_config *c, const st_market *m, st_trace_mode mode) {
    int rc = st_trainer_init(&x->t, c, m);
    if (rc == ST_OK) rc = st_trace_for_trainer(&x->tr, &x->t, mode, NULL);
    if (rc == ST_OK) rc = st_trace_guard_init(&x->g, &x->tr, &x->t);
    return rc;
}

static void traced_free(traced *x) {
    st_trace_guard_free(&x->g);
    st_trace_free(&x->tr);
    st_trainer_free(&x->t);
}

static void test_clean_runs(const st_market *m) {
    st_train_config c = small_config();
    st_trainer plain;
    traced full, sent;
    CHECK(st_trainer_init(&plain, &c, m) == ST_OK, "plain trainer: %s", st_last_error());
    CHECK(traced_init(&full, &c, m, ST_TRACE_FULL) == ST_OK, "full tracer: %s", st_last_error());
    CHECK(traced_init(&sent, &c, m, ST_TRACE_SENTINEL) == ST_OK, "sentinel tracer: %s", st_last_error());
    int all_scanned = 1;
    for (int u = 0; u < 4; u++) {
        st_update_stats s;
        CHECK(st_trainer_update(&plain, &s) == ST_OK, "plain update");
        CHECK(st_trace_guard_update(&full.g, &s) == ST_OK, "full update %d: %s", u, st_last_error());
        CHECK(st_trace_guard_update(&sent.g, &s) == ST_OK, "sentinel update %d: %s", u, st_last_error());
        for (int i = 0; i < full.tr.labels.n; i++)
            if (full.tr.use[i].step != u) {
                all_scanned = 0;
                printf("  label %s not scanned in step %d\n", full.tr.labels.l[i].name, u);
            }
    }
    CHECK(all_scanned, "full mode scans every label every step");
    CHECK(full.tr.ntrip == 0 && !full.tr.tripped && !sent.tr.tripped, "a clean run trips the tracer");
    CHECK(same_weights(&plain, &full.t) && same_weights(&plain, &sent.t),
          "the tracer changes the run (full or sentinel differ from off)");
    CHECK(strcmp(st_trace_status(&full.tr), "full ok") == 0 && strcmp(st_trace_status(&sent.tr), "sentinel ok") == 0,
          "status strings");
    st_trainer_free(&plain);
    traced_free(&full);
    traced_free(&sent);
    st_train_config_free(&c);
}

/* Injection at every label at steps 0 and 3: the tracer names exactly it. */
static void test_inject_every_label(const st_market *m) {
    st_train_config c = small_config();
    traced x;
    CHECK(traced_init(&x, &c, m, ST_TRACE_FULL) == ST_OK, "tracer: %s", st_last_error());
    st_trace_guard at0, at3;
    CHECK(st_trace_guard_init(&at0, &x.tr, &x.t) == ST_OK && st_trace_guard_init(&at3, &x.tr, &x.t) == ST_OK,
          "snapshots");
    st_trace_snapshot_take(&at0);
    for (int u = 0; u < 3; u++) {
        st_update_stats s;
        CHECK(st_trace_guard_update(&x.g, &s) == ST_OK, "clean update %d: %s", u, st_last_error());
    }
    st_trace_snapshot_take(&at3);
    st_rng rng = st_rng_make(2024, ST_STREAM_TEST);
    int tested = 0, named = 0, bad_step = 0, bad_index = 0, bad_kind = 0, earlier = 0;
    for (int step = 0; step <= 3; step += 3) {
        for (int id = 0; id < x.tr.labels.n; id++) {
            const st_label *l = &x.tr.labels.l[id];
            int64_t n = l->rows * l->width, index = (int64_t)st_rng_below(&rng, (uint32_t)n);
            int kind = (id + step) % 3 == 0 ? ST_TRACE_POS_INF : ST_TRACE_NAN;
            char spec[128];
            snprintf(spec, sizeof spec, "%s:%d:%lld%s", l->name, step, (long long)index,
                     kind == ST_TRACE_POS_INF ? ":inf" : "");
            st_trace_snapshot_restore(step == 0 ? &at0 : &at3);
            st_trace_reset(&x.tr);
            CHECK(st_trace_set_inject(&x.tr, spec) == ST_OK, "spec %s: %s", spec, st_last_error());
            st_update_stats s;
            int rc = st_trace_guard_update(&x.g, &s);
            st_clear_error();
            tested++;
            int first = st_trace_first(&x.tr);
            if (rc != ST_ERR_NUMERIC || first != id) {
                printf("  inject %s: rc %d, first label %s\n", spec, rc,
                       first >= 0 ? x.tr.labels.l[first].name : "(none)");
                continue;
            }
            named++;
            const st_trace_record *r = &x.tr.rec[id];
            bad_step += r->step != step;
            bad_index += r->index != index;
            bad_kind += r->kind != kind;
            for (int j = 0; j < x.tr.labels.n; j++) {
                const st_trace_record *o = &x.tr.rec[j];
                if (j != id && o->index >= 0 && (o->step < r->step || (o->step == r->step && o->seq <= r->seq)))
                    earlier++;
            }
        }
    }
    printf("injection at every label, steps 0 and 3: %d injections, %d named first; wrong step %d, index %d, "
           "kind %d; labels reported before the injected one %d\n",
           tested, named, bad_step, bad_index, bad_kind, earlier);
    CHECK(tested == 2 * x.tr.labels.n && named == tested, "%d of %d injections named as the first label", named,
          tested);
    CHECK(bad_step == 0 && bad_index == 0 && bad_kind == 0, "first record differs from the injection");
    CHECK(earlier == 0, "%d labels reported before the injected one", earlier);
    st_trace_guard_free(&at0);
    st_trace_guard_free(&at3);
    traced_free(&x);
    st_train_config_free(&c);
}

/* Sentinel: a few scalars trip, the replay names the injected label. */
static void test_sentinel(const st_market *m) {
    st_train_config c = small_config();
    const char *specs[] = {"train_vsn_out:3:40", "env_reward:0:2",      "step_entry_w_in_W:3:100:inf",
                           "bwd_du0:0:77",       "saved_mix0_conv:3:5", "optim_adam_v_pi2_b:0:1",
                           "act_logp:3:0",       "grad_global_norm:0:0"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        traced x;
        CHECK(traced_init(&x, &c, m, ST_TRACE_SENTINEL) == ST_OK, "tracer: %s", st_last_error());
        CHECK(st_trace_set_inject(&x.tr, specs[i]) == ST_OK, "spec %s", specs[i]);
        char label[64];
        snprintf(label, sizeof label, "%s", specs[i]);
        *strchr(label, ':') = 0;
        int step = atoi(strchr(specs[i], ':') + 1), rc = ST_OK;
        st_update_stats s;
        for (int u = 0; u < 5 && rc == ST_OK; u++)
            rc = st_trace_guard_update(&x.g, &s);
        int first = st_trace_first(&x.tr);
        CHECK(rc == ST_ERR_NUMERIC && x.tr.tripped && x.tr.sentinel_tripped, "sentinel misses %s", specs[i]);
        CHECK(first >= 0 && strcmp(x.tr.labels.l[first].name, label) == 0 && x.tr.rec[first].step == step &&
                  x.tr.trip_step == step,
              "sentinel replay of %s names %s at step %lld", specs[i], first >= 0 ? x.tr.labels.l[first].name : "-",
              first >= 0 ? (long long)x.tr.rec[first].step : -1LL);
        CHECK(x.t.update == step, "the trainer is not back at the pre-step state (update %ld)", x.t.update);
        printf("sentinel, injected %-28s -> %s (sentinel saw %s)\n", specs[i],
               first >= 0 ? x.tr.labels.l[first].name : "-", x.tr.sentinel_what);
        st_clear_error();
        traced_free(&x);
    }
    st_train_config_free(&c);
}

/* A trip's dump: tensors and metadata, and a replay that reproduces it. */
static void test_dump_replay(const st_market *m) {
    st_train_config c = small_config();
    traced x;
    CHECK(traced_init(&x, &c, m, ST_TRACE_SENTINEL) == ST_OK, "tracer");
    CHECK(st_trace_set_inject(&x.tr, "train_w_in_out:2:300") == ST_OK, "spec");
    int rc = ST_OK;
    st_update_stats s;
    for (int u = 0; u < 4 && rc == ST_OK; u++)
        rc = st_trace_guard_update(&x.g, &s);
    CHECK(rc == ST_ERR_NUMERIC, "no trip");
    char dir[] = "/tmp/st_trace_dump_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    CHECK(st_trace_write_dump(&x.g, dir) == ST_OK, "dump: %s", st_last_error());
    char path[256];
    snprintf(path, sizeof path, "%s/trip.safetensors", dir);
    st_safetensors f;
    CHECK(st_safetensors_open(path, &f) == ST_OK, "open trip.safetensors");
    const char *fl = st_safetensors_meta(&f, "first_label");
    CHECK(fl && strcmp(fl, "train_w_in_out") == 0, "metadata first_label %s", fl ? fl : "(none)");
    st_dtype dt;
    int nd;
    int64_t shape[4];
    const void *data;
    size_t bytes;
    CHECK(st_safetensors_find(&f, "train_w_in_out", &dt, &nd, shape, &data, &bytes) == ST_OK && nd == 3 &&
              shape[0] == x.t.mb && isnan(((const float *)data)[300]),
          "the bad tensor with the NaN at its index");
    CHECK(st_safetensors_find(&f, "train_w_in_in", &dt, &nd, shape, &data, &bytes) == ST_OK &&
              st_safetensors_find(&f, "train_window", &dt, &nd, shape, &data, &bytes) == ST_OK,
          "the inputs of the bad tensor (train_w_in_in, train_window)");
    st_safetensors_close(&f);
    int reproduced = 0;
    FILE *devnull = fopen("/dev/null", "w");
    CHECK(st_trace_replay(dir, &c, m, devnull, &reproduced) == ST_OK && reproduced, "replay does not reproduce: %s",
          st_last_error());
    fclose(devnull);
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    traced_free(&x);
    st_train_config_free(&c);
}

/* With two blocks the backward's du buffers ping-pong: du2 and du0 share
 * one. A trip at bwd_du0 copies du1 (still valid) but not du2 (overwritten). */
static void test_capture_inputs(const st_market *m) {
    st_train_config c = small_config();
    c.dims.L = 2;
    traced x;
    CHECK(traced_init(&x, &c, m, ST_TRACE_FULL) == ST_OK, "L=2 tracer: %s", st_last_error());
    CHECK(st_trace_set_inject(&x.tr, "bwd_du0:0:50") == ST_OK, "spec");
    st_update_stats s;
    CHECK(st_trace_guard_update(&x.g, &s) == ST_ERR_NUMERIC, "no trip");
    st_clear_error();
    int du0 = st_labels_find(&x.tr.labels, "bwd_du0"), du1 = st_labels_find(&x.tr.labels, "bwd_du1");
    int du2 = st_labels_find(&x.tr.labels, "bwd_du2"), dl = st_labels_find(&x.tr.labels, "bwd_dlogits");
    int win = st_labels_find(&x.tr.labels, "train_window");
    const st_trace_capture *c0 = st_trace_capture_of(&x.tr, du0);
    CHECK(st_trace_first(&x.tr) == du0 && c0 && isnan(((const float *)c0->data)[50]), "the bad tensor is copied");
    CHECK(st_trace_capture_of(&x.tr, du1) && st_trace_capture_of(&x.tr, dl), "inputs du1 and dlogits are copied");
    CHECK(!st_trace_capture_of(&x.tr, du2), "du2 is copied although du0 overwrote its buffer");
    CHECK(!st_trace_capture_of(&x.tr, win), "a label of another phase is copied as an input");
    traced_free(&x);
    st_train_config_free(&c);
}

static void test_dump_step(const st_market *m) {
    st_train_config c = small_config();
    st_trainer t;
    CHECK(st_trainer_init(&t, &c, m) == ST_OK, "trainer");
    char path[] = "/tmp/st_step_dump_XXXXXX";
    int fd = mkstemp(path), n = 0;
    close(fd);
    CHECK(st_trace_dump_step(&t, path, &n) == ST_OK, "dump step: %s", st_last_error());
    st_param_table pt;
    st_label_table lt;
    st_label_sizes z = {c.dims, t.mb, 0};
    st_param_table_build(&c.dims, &pt);
    st_labels_build(&z, &pt, &lt);
    CHECK(n == lt.n, "dump holds %d tensors, the step has %d labels", n, lt.n);
    st_safetensors f;
    CHECK(st_safetensors_open(path, &f) == ST_OK, "open dump");
    int missing = 0;
    for (int i = 0; i < lt.n; i++) {
        st_dtype dt;
        int nd;
        int64_t shape[4];
        const void *data;
        size_t bytes;
        missing += st_safetensors_find(&f, lt.l[i].name, &dt, &nd, shape, &data, &bytes) != ST_OK;
    }
    st_clear_error();
    CHECK(missing == 0, "%d labels missing from the dump", missing);
    st_safetensors_close(&f);
    unlink(path);
    st_labels_free(&lt);
    st_param_table_free(&pt);
    st_trainer_free(&t);
    st_train_config_free(&c);
}

static void test_smoke(const st_market *m) {
    st_train_config c = small_config();
    st_smoke_row rows[3];
    st_smoke_opts o = {3, 16962, 2, NULL, 0};
    char line[512];
    CHECK(st_smoke_run(&c, m, &o, stdout, rows) == ST_OK, "smoke");
    st_smoke_summary(rows, 3, line, sizeof line);
    printf("%s\n", line);
    CHECK(rows[0].status == ST_SMOKE_CLEAN && rows[1].status == ST_SMOKE_CLEAN && rows[2].status == ST_SMOKE_CLEAN &&
              rows[2].seed == 16964 && rows[2].steps_done == 2,
          "clean smoke");
    CHECK(strstr(line, "all 3 runs clean") != NULL, "clean summary: %s", line);
    o.inject = "train_vsn_out:1:40";
    CHECK(st_smoke_run(&c, m, &o, stdout, rows) == ST_OK, "injected smoke");
    st_smoke_summary(rows, 3, line, sizeof line);
    printf("%s\n", line);
    int all = 1;
    for (int i = 0; i < 3; i++)
        all &= rows[i].status == ST_SMOKE_TRIPPED && strcmp(rows[i].first, "train_vsn_out") == 0 && rows[i].step == 1 &&
               rows[i].index == 40;
    CHECK(all, "every injected run names train_vsn_out at step 1, index 40 first");
    CHECK(strcmp(line, "in all 3 failing runs the first non-finite label is train_vsn_out at index 40") == 0,
          "summary line: %s", line);
    st_train_config_free(&c);
}

int main(void) {
    test_names();
    test_registry();
    test_scan();
    st_market m;
    st_data_opts o = st_data_opts_default(16);
    o.use_cache = 0;
    CHECK(st_market_synthetic(3, 2, 1500, &o, &m) == ST_OK, "market: %s", st_last_error());
    test_clean_runs(&m);
    test_inject_every_label(&m);
    test_sentinel(&m);
    test_dump_replay(&m);
    test_capture_inputs(&m);
    test_dump_step(&m);
    test_smoke(&m);
    st_market_free(&m);
    TEST_MAIN_END();
}
