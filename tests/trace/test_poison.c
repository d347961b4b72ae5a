/* test_poison.c: poisoned padding and the regression of the original bug
 * (DESIGN sections 1, 8, 9).
 *
 * A VSN variant built only here reads the snapshot rows with stride F out
 * of the (F+C)-wide window, as the original system's kernel did. Under
 * --poison-padding (window and activation rows wider than their width, the
 * gap holding the tagged NaN) the tracer must name the VSN output at step 0
 * and recognise the tag (a read across a row boundary). The correct VSN
 * must never trip under poisoned padding, and give bit-identical training
 * to the unpadded layout; without padding the broken variant is silent,
 * which is why the poison exists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "model/vsn.h"
#include "test.h"
#include "trace/guard.h"
#include "trace/trace.h"
#include "train/trainer.h"

/* The bug: rows of s read with stride F (the snapshot width) instead of the
 * window's row stride. */
static void vsn_read_with_stride_F(int rows, int F, int C, int Dv, const real *s, int s_stride, const real *c,
                                   int c_stride, const st_vsn_weights *w, real *v, int v_stride, real *alpha,
                                   int alpha_stride, real *saved, real *work) {
    (void)s_stride;
    st_vsn_forward(rows, F, C, Dv, s, F, c, c_stride, w, v, v_stride, alpha, alpha_stride, saved, work);
}

static st_train_config small_config(void) {
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.dims.B = 4;
    c.dims.T = 4;
    c.dims.K = 16;
    c.minibatches = 2;
    c.epochs = 1;
    c.updates = 4;
    c.episode_length = 6;
    c.seed = 21;
    return c;
}

typedef struct {
    st_trainer t;
    st_trace tr;
    st_trace_guard g;
} traced;

static int traced_init(traced *x, const st_train_config *c, const st_market *m, int pad, int broken) {
    int rc = st_trainer_init_padded(&x->t, c, m, pad);
    if (rc == ST_OK && broken) x->t.model.vsn_forward = vsn_read_with_stride_F;
    if (rc == ST_OK) rc = st_trace_for_trainer(&x->tr, &x->t, ST_TRACE_FULL, NULL);
    if (rc == ST_OK) rc = st_trace_guard_init(&x->g, &x->tr, &x->t);
    return rc;
}

static void traced_free(traced *x) {
    st_trace_guard_free(&x->g);
    st_trace_free(&x->tr);
    st_trainer_free(&x->t);
}

/* The broken VSN under poisoned padding trips at the VSN output, step 0, tagged. */
static void test_broken_vsn(const st_market *m) {
    st_train_config c = small_config();
    traced x;
    CHECK(traced_init(&x, &c, m, ST_TRACE_POISON_PAD, 1) == ST_OK, "trainer: %s", st_last_error());
    st_update_stats s;
    int rc = st_trace_guard_update(&x.g, &s);
    st_clear_error();
    int first = st_trace_first(&x.tr);
    CHECK(rc == ST_ERR_NUMERIC && first >= 0, "the mis-strided VSN does not trip the tracer");
    if (first >= 0) {
        const st_trace_record *r = &x.tr.rec[first];
        char line[400];
        st_trace_record_str(&x.tr, first, line, sizeof line);
        printf("mis-strided VSN, poisoned padding: %s\n", line);
        /* The action forward runs first in a step: its VSN output is the first label. */
        CHECK(strcmp(x.tr.labels.l[first].name, "act_vsn_out") == 0, "first label %s, expected act_vsn_out",
              x.tr.labels.l[first].name);
        CHECK(r->step == 0 && r->sub == 0, "step %lld pass %d, expected step 0, rollout step 0", (long long)r->step,
              r->sub);
        CHECK(st_trace_record_tagged(r), "the padding tag is not recognised (bits %#llx)", (unsigned long long)r->bits);
        /* Row 0 is read right by luck; row 1 starts at element F and runs into the padding. */
        CHECK(r->index == c.dims.Dv && r->coord[0] == 0 && r->coord[1] == 1 && r->coord[2] == 0,
              "first bad element %lld (b %d, k %d, j %d), expected row 1: index Dv = %d", (long long)r->index,
              r->coord[0], r->coord[1], r->coord[2], c.dims.Dv);
        int tv = st_labels_find(&x.tr.labels, "train_vsn_out");
        const st_trace_record *t = &x.tr.rec[tv];
        CHECK(t->index >= 0 && t->step == 0 && st_trace_record_tagged(t),
              "train_vsn_out trips at step 0 with the tag as well");
        int win = st_labels_find(&x.tr.labels, "act_window");
        CHECK(x.tr.rec[win].index < 0, "the window itself is clean: the padding is outside its rows");
        FILE *devnull = fopen("/dev/null", "w");
        st_trace_report(&x.tr, devnull, 10);
        fclose(devnull);
    }
    traced_free(&x);
    st_train_config_free(&c);
}

/* Without the poison the same bug reads finite neighbours: silent. */
static void test_broken_vsn_unpoisoned(const st_market *m) {
    st_train_config c = small_config();
    traced x;
    CHECK(traced_init(&x, &c, m, 0, 1) == ST_OK, "trainer: %s", st_last_error());
    st_update_stats s;
    int rc = st_trace_guard_update(&x.g, &s);
    st_clear_error();
    CHECK(rc == ST_OK && x.tr.ntrip == 0, "without poisoned padding the misread is silent at step 0");
    traced_free(&x);
    st_train_config_free(&c);
}

/* The correct VSN under poisoned padding: clean, and the same run. */
static void test_correct_vsn(const st_market *m) {
    st_train_config c = small_config();
    traced padded, plain;
    CHECK(traced_init(&padded, &c, m, ST_TRACE_POISON_PAD, 0) == ST_OK, "padded trainer: %s", st_last_error());
    CHECK(traced_init(&plain, &c, m, 0, 0) == ST_OK, "plain trainer");
    CHECK(padded.t.win_stride == c.dims.F + c.dims.C + ST_TRACE_POISON_PAD &&
              padded.t.model.u_stride == c.dims.D + ST_TRACE_POISON_PAD,
          "poisoned padding widens the strides");
    int ok = 1;
    for (int u = 0; u < 4; u++) {
        st_update_stats s;
        ok &= st_trace_guard_update(&padded.g, &s) == ST_OK;
        ok &= st_trace_guard_update(&plain.g, &s) == ST_OK;
    }
    CHECK(ok && padded.tr.ntrip == 0, "the correct model trips under poisoned padding: %s", st_last_error());
    size_t P = padded.t.table.total;
    CHECK(memcmp(padded.t.w, plain.t.w, sizeof(float) * P) == 0 &&
              memcmp(padded.t.adam_v, plain.t.adam_v, sizeof(float) * P) == 0,
          "poisoned padding changes the training (must be bit-identical)");
    /* the padding is still poisoned: nothing wrote into the gaps */
    int intact = 1;
    const st_model *md = &padded.t.model;
    uint32_t tag = ST_TRACE_TAG_F32;
    for (int r = 0; r < md->max_windows * c.dims.K; r++)
        for (int k = c.dims.D; k < md->u_stride; k++) {
            uint32_t b;
            memcpy(&b, md->u[0] + (size_t)r * md->u_stride + k, 4);
            intact &= b == tag;
            memcpy(&b, md->du_a + (size_t)r * md->u_stride + k, 4);
            intact &= b == tag;
        }
    CHECK(intact, "an op wrote into the padding of u_0 or du");
    traced_free(&padded);
    traced_free(&plain);
    st_train_config_free(&c);
}

int main(void) {
    st_market m;
    st_data_opts o = st_data_opts_default(16);
    o.use_cache = 0;
    CHECK(st_market_synthetic(5, 2, 1500, &o, &m) == ST_OK, "market: %s", st_last_error());
    test_broken_vsn(&m);
    test_broken_vsn_unpoisoned(&m);
    test_correct_vsn(&m);
    st_market_free(&m);
    TEST_MAIN_END();
}
