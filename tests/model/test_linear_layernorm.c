/* test_linear_layernorm.c: linear and LayerNorm in float64: central
 * differences for every input and parameter, and padded (NaN-filled) row
 * strides giving bit-identical results to contiguous buffers. */
#define ST_REAL_BITS 64
#include "check/gradcheck.h"
#include "model/layernorm.h"
#include "model/linear.h"
#include "test.h"

enum { ROWS = 7, IN = 5, OUT = 4 };

typedef struct {
    double x[ROWS * IN], W[OUT * IN], b[OUT], lw[IN], lb[IN], R[ROWS * OUT], RL[ROWS * IN];
} inputs;

static double loss_linear(void *p) {
    inputs *q = p;
    double y[ROWS * OUT];
    st_linear_forward(ROWS, IN, OUT, q->x, IN, q->W, q->b, y, OUT);
    return st_gc_dot(y, ROWS, OUT, OUT, q->R);
}

static double loss_ln(void *p) {
    inputs *q = p;
    double y[ROWS * IN];
    st_layernorm_forward(ROWS, IN, q->x, IN, q->lw, q->lb, 1e-5, y, IN, NULL, NULL);
    return st_gc_dot(y, ROWS, IN, IN, q->RL);
}

/* Copies a contiguous rows x w block into a NaN-padded buffer of stride s. */
static double *pad(const double *src, int rows, int w, int s) {
    double *p = test_padded(rows, w, s);
    for (int r = 0; r < rows; r++) memcpy(p + (size_t)r * s, src + (size_t)r * w, sizeof(double) * w);
    return p;
}

/* Valid part of a padded buffer equals the contiguous one bit for bit, no NaN. */
static int same_rows(const double *padded, int s, const double *ref, int rows, int w) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < w; c++) {
            double v = padded[(size_t)r * s + c];
            if (isnan(v) || memcmp(&v, &ref[(size_t)r * w + c], sizeof v) != 0) return 0;
        }
    return 1;
}

int main(void) {
    inputs q;
    st_gc_randn(q.x, ROWS * IN, 1.0, 1, 1);
    st_gc_randn(q.W, OUT * IN, 0.5, 1, 2);
    st_gc_randn(q.b, OUT, 0.5, 1, 3);
    st_gc_randn(q.lw, IN, 0.3, 1, 4);
    for (int i = 0; i < IN; i++) q.lw[i] += 1;
    st_gc_randn(q.lb, IN, 0.3, 1, 5);
    st_gc_randn(q.R, ROWS * OUT, 1.0, 1, 6);
    st_gc_randn(q.RL, ROWS * IN, 1.0, 1, 7);

    /* linear: analytic gradients for dy = R */
    double dx[ROWS * IN], dW[OUT * IN] = {0}, db[OUT] = {0};
    st_linear_backward(ROWS, IN, OUT, q.x, IN, q.W, q.R, OUT, dx, IN, 0, dW, db);
    printf("linear\n");
    CHECK_GRAD("x", st_gc_tensor(loss_linear, &q, q.x, ROWS, IN, IN, dx, IN, 1000, 1), ST_GC_BOUND);
    CHECK_GRAD("W", st_gc_tensor(loss_linear, &q, q.W, OUT, IN, IN, dW, IN, 1000, 1), ST_GC_BOUND);
    CHECK_GRAD("b", st_gc_tensor(loss_linear, &q, q.b, 1, OUT, OUT, db, OUT, 1000, 1), ST_GC_BOUND);

    /* linear with padded strides: bit-identical to the contiguous run */
    double y[ROWS * OUT];
    st_linear_forward(ROWS, IN, OUT, q.x, IN, q.W, q.b, y, OUT);
    double *xp = pad(q.x, ROWS, IN, IN + 3), *yp = test_padded(ROWS, OUT, OUT + 2);
    double *dyp = pad(q.R, ROWS, OUT, OUT + 5), *dxp = test_padded(ROWS, IN, IN + 4);
    double dW2[OUT * IN] = {0}, db2[OUT] = {0};
    st_linear_forward(ROWS, IN, OUT, xp, IN + 3, q.W, q.b, yp, OUT + 2);
    st_linear_backward(ROWS, IN, OUT, xp, IN + 3, q.W, dyp, OUT + 5, dxp, IN + 4, 0, dW2, db2);
    CHECK(same_rows(yp, OUT + 2, y, ROWS, OUT), "linear forward differs with padded strides");
    CHECK(same_rows(dxp, IN + 4, dx, ROWS, IN), "linear dx differs with padded strides");
    CHECK(memcmp(dW, dW2, sizeof dW) == 0 && memcmp(db, db2, sizeof db) == 0, "linear dW/db differ");
    /* accumulate flag adds */
    double dx_acc[ROWS * IN];
    for (int i = 0; i < ROWS * IN; i++) dx_acc[i] = 1;
    st_linear_backward(ROWS, IN, OUT, q.x, IN, q.W, q.R, OUT, dx_acc, IN, 1, NULL, NULL);
    int acc_ok = 1;
    for (int i = 0; i < ROWS * IN; i++) acc_ok &= fabs(dx_acc[i] - (dx[i] + 1)) < 1e-12;
    CHECK(acc_ok, "dx_accumulate adds to dx");

    /* LayerNorm */
    double ldx[ROWS * IN], ldw[IN] = {0}, ldb[IN] = {0}, mean[ROWS], rstd[ROWS], ly[ROWS * IN];
    st_layernorm_forward(ROWS, IN, q.x, IN, q.lw, q.lb, 1e-5, ly, IN, mean, rstd);
    st_layernorm_backward(ROWS, IN, q.x, IN, q.lw, mean, rstd, q.RL, IN, ldx, IN, 0, ldw, ldb);
    printf("layernorm\n");
    CHECK_GRAD("x", st_gc_tensor(loss_ln, &q, q.x, ROWS, IN, IN, ldx, IN, 1000, 1), ST_GC_BOUND);
    CHECK_GRAD("weight", st_gc_tensor(loss_ln, &q, q.lw, 1, IN, IN, ldw, IN, 1000, 1), ST_GC_BOUND);
    CHECK_GRAD("bias", st_gc_tensor(loss_ln, &q, q.lb, 1, IN, IN, ldb, IN, 1000, 1), ST_GC_BOUND);
    double *lyp = test_padded(ROWS, IN, IN + 2), *ldyp = pad(q.RL, ROWS, IN, IN + 1);
    double *ldxp = test_padded(ROWS, IN, IN + 6), ldw2[IN] = {0}, ldb2[IN] = {0}, mean2[ROWS], rstd2[ROWS];
    st_layernorm_forward(ROWS, IN, xp, IN + 3, q.lw, q.lb, 1e-5, lyp, IN + 2, mean2, rstd2);
    st_layernorm_backward(ROWS, IN, xp, IN + 3, q.lw, mean2, rstd2, ldyp, IN + 1, ldxp, IN + 6, 0, ldw2, ldb2);
    CHECK(same_rows(lyp, IN + 2, ly, ROWS, IN), "layernorm forward differs with padded strides");
    CHECK(same_rows(ldxp, IN + 6, ldx, ROWS, IN), "layernorm dx differs with padded strides");
    CHECK(memcmp(ldw, ldw2, sizeof ldw) == 0 && memcmp(ldb, ldb2, sizeof ldb) == 0, "layernorm dw/db differ");
    /* constant rows stay finite (eps floor) */
    double cx[IN] = {3, 3, 3, 3, 3}, cy[IN];
    st_layernorm_forward(1, IN, cx, IN, q.lw, q.lb, 1e-5, cy, IN, NULL, NULL);
    int finite = 1;
    for (int i = 0; i < IN; i++) finite &= isfinite(cy[i]);
    CHECK(finite, "constant row gives non-finite LayerNorm");
    free(xp), free(yp), free(dyp), free(dxp), free(lyp), free(ldyp), free(ldxp);
    TEST_MAIN_END();
}
