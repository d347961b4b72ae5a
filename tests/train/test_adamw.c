/* test_adamw.c: AdamW against a hand-computed step, decay only where the
 * table says, grad-norm clipping. */
#define ST_REAL_BITS 64
#include "train/adamw.h"
#include "test.h"

int main(void) {
    st_dims d;
    st_param_table t;
    st_dims_preset("tiny", &d);
    CHECK(st_param_table_build(&d, &t) == 0, "table");
    size_t n = t.total;
    double *w = malloc(sizeof(double) * n), *g = malloc(sizeof(double) * n);
    double *m = calloc(n, sizeof(double)), *v = calloc(n, sizeof(double)), *w0 = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) {
        w0[i] = w[i] = 0.5 + 1e-4 * (double)(i % 97);
        g[i] = 0.1 * ((double)(i % 13) - 6);
    }
    st_adamw_hparams h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    st_adamw_step(&t, w, g, m, v, &h, 1);
    int ok = 1;
    for (int k = 0; k < t.n; k++) {
        const st_param *p = &t.p[k];
        for (size_t i = p->offset; i < p->offset + p->count; i++) {
            /* step 1: mhat = g, vhat = g^2 -> update = g/(|g|+eps) */
            double expect = w0[i] - h.lr * g[i] / (fabs(g[i]) + h.eps) - (p->decay ? h.lr * h.weight_decay * w0[i] : 0);
            ok &= fabs(w[i] - expect) < 1e-12;
        }
    }
    CHECK(ok, "AdamW step 1 differs from the hand-computed update");
    double nrm = st_grad_norm(n, g), expect = 0;
    for (size_t i = 0; i < n; i++) expect += g[i] * g[i];
    CHECK(fabs(nrm - sqrt(expect)) < 1e-9, "grad norm");
    st_grad_scale(n, g, 0.5);
    CHECK(fabs(st_grad_norm(n, g) - 0.5 * nrm) < 1e-9, "grad scale");
    free(w), free(g), free(m), free(v), free(w0);
    st_param_table_free(&t);
    TEST_MAIN_END();
}
