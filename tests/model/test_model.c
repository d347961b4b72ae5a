/* test_model.c: the whole model in float64: every parameter tensor and the
 * input window by central differences under the PPO loss (tiny and odd
 * sizes), the per-op table, and the window read through a padded stride. */
#define ST_REAL_BITS 64
#include "check/gradcheck.h"
#include "check/model_check.h"
#include "model/model.h"
#include "test.h"

static void check_table(const char *what, const st_gc_table *t) {
    printf("%s: %d rows\n", what, t->n);
    for (int i = 0; i < t->n; i++) {
        const st_gc_row *r = &t->rows[i];
        printf("  %-40s %.3e (%d)\n", r->name, r->rel_err, r->checked);
        CHECK(r->rel_err <= ST_GC_BOUND && r->checked > 0, "%s: %s rel err %.3e", what, r->name, r->rel_err);
    }
}

/* The model on a window whose rows are wider than F+C (padding NaN) gives
 * bit-identical logits, values and gradients to the contiguous window. */
static void padded_window(const st_dims *d) {
    st_param_table t;
    st_param_table_build(d, &t);
    int n = 3, row = d->F + d->C, wide = row + 7, rows = n * d->K, A = d->A;
    double *w = malloc(sizeof(double) * t.total), *g1 = calloc(t.total, sizeof(double));
    double *g2 = calloc(t.total, sizeof(double));
    st_params_init_f64(&t, 5, w);
    double *X = malloc(sizeof(double) * (size_t)rows * row), *Xp = test_padded(rows, row, wide);
    st_gc_randn(X, (long)rows * row, 1.0, 5, 1);
    for (int r = 0; r < rows; r++) memcpy(Xp + (size_t)r * wide, X + (size_t)r * row, sizeof(double) * row);
    double l1[9], v1[3], l2[9], v2[3], dl[9], dv[3];
    st_gc_randn(dl, n * A, 1.0, 5, 2);
    st_gc_randn(dv, n, 1.0, 5, 3);
    double *dX = malloc(sizeof(double) * (size_t)rows * row), *dXp = test_padded(rows, row, wide);
    st_model m;
    st_model_init(&m, d, &t, n, w, g1);
    st_model_forward(&m, n, X, row, l1, A, v1);
    st_model_backward(&m, dl, A, dv, dX, row);
    st_model_bind(&m, w, g2);
    st_model_forward(&m, n, Xp, wide, l2, A, v2);
    st_model_backward(&m, dl, A, dv, dXp, wide);
    CHECK(memcmp(l1, l2, sizeof(double) * n * A) == 0 && memcmp(v1, v2, sizeof(double) * n) == 0,
          "padded window changes the forward");
    CHECK(memcmp(g1, g2, sizeof(double) * t.total) == 0, "padded window changes the parameter gradients");
    int same = 1;
    for (int r = 0; r < rows; r++) {
        same &= memcmp(dX + (size_t)r * row, dXp + (size_t)r * wide, sizeof(double) * row) == 0;
        for (int k = row; k < wide; k++) same &= isnan(dXp[(size_t)r * wide + k]); /* padding untouched */
    }
    CHECK(same, "padded window changes dX or writes into the padding");
    int finite = 1;
    for (int i = 0; i < n * A; i++) finite &= isfinite(l2[i]);
    CHECK(finite, "non-finite logits");
    st_model_free(&m);
    free(w), free(g1), free(g2), free(X), free(Xp), free(dX), free(dXp);
    st_param_table_free(&t);
}

int main(void) {
    /* The same checks at the tiny, odd (F=37, C=11, K=50, D=96, headdim=24)
     * and default sizes: no size is a compile-time constant. */
    const char *presets[] = {"tiny", "odd", "default"};
    const int checks[] = {12, 12, 6};
    for (int p = 0; p < 3; p++) {
        st_dims d;
        st_dims_preset(presets[p], &d);
        st_gc_table t = {0};
        CHECK(st_gradcheck_model(&d, 2, 7, checks[p], &t) == 0, "model check runs");
        CHECK(t.n > 40, "one row per parameter tensor plus the window (%d rows)", t.n);
        check_table(presets[p], &t);
        st_gc_table_free(&t);
        padded_window(&d);
    }
    for (int p = 0; p < 2; p++) {
        st_dims d;
        st_dims_preset(presets[p], &d);
        st_gc_table ops = {0};
        CHECK(st_gradcheck_ops(&d, 3, 24, &ops) == 0, "op checks run");
        check_table(presets[p], &ops);
        st_gc_table_free(&ops);
    }
    TEST_MAIN_END();
}
