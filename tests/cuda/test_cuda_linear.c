/* test_cuda_linear.c: the GPU linear layer (cuda/linear_cuda.h, cuBLAS) against
 * the CPU float op (model/linear.h), the layers of DESIGN section 5 at the
 * tiny, odd and a 64-window batch's sizes:
 *  - forward y (with and without bias) within 1e-5 relative (fp32 products
 *    summed in another order: a few ulps times sqrt(in));
 *  - backward dx (written, or added to), dW and db (added to: both sides
 *    start from the same random values, the error is measured against the
 *    increment) within 1e-4 relative (sums over up to 2048 rows);
 *  - padded strides with poisoned gaps: inputs' NaN never leaks, outputs'
 *    gaps keep their poison bits;
 *  - two GPU runs give the same bits (cuBLAS fixed algorithm, ordered db);
 *  - st_cuda_gemm with both operands transposed, alpha and beta.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "model/linear.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/linear_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
/* rows x width N(0, scale^2) values at row stride `stride`, poison in the gap. */
static float *host_rows(int rows, int width, int stride, float scale, uint64_t seed, uint32_t salt) {
    float *p = malloc(sizeof(float) * ((size_t)rows * stride + 1));
    float *v = malloc(sizeof(float) * ((size_t)rows * width + 1));
    st_gc_randnf(v, (long)rows * width, scale, seed, salt);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < stride; c++)
            p[(size_t)r * stride + c] = c < width ? v[(size_t)r * width + c] : poison();
    free(v);
    return p;
}

/* Gap values (columns width..stride-1) whose poison bits were overwritten. */
static long gap_written(const float *h, int rows, int width, int stride) {
    long n = 0;
    for (int r = 0; r < rows; r++)
        for (int c = width; c < stride; c++) {
            uint32_t u;
            memcpy(&u, &h[(size_t)r * stride + c], sizeof u);
            n += u != POISON_BITS;
        }
    return n;
}

typedef struct {
    const char *name;
    int rows, in, out, bias, dx_acc, pad;
} lin_case;

/* Inputs and starting gradients of one case, on the host. */
typedef struct {
    int xs, ys, gs, dxs;
    float *x, *W, *b, *dy, *dx0, *dW0, *db0;
} lin_data;

/* GPU results of one run. */
typedef struct {
    float *y, *dx, *dW, *db;
} lin_out;

static void gpu_run(const lin_case *c, const lin_data *h, lin_out *o) {
    size_t ny = (size_t)c->rows * h->ys, ndx = (size_t)c->rows * h->dxs, nW = (size_t)c->out * c->in;
    float *x = dev_upload(h->x, (size_t)c->rows * h->xs), *W = dev_upload(h->W, nW);
    float *b = c->bias ? dev_upload(h->b, c->out) : NULL, *dy = dev_upload(h->dy, (size_t)c->rows * h->gs);
    float *y = dev_poisoned(ny), *dx = c->dx_acc ? dev_upload(h->dx0, ndx) : dev_poisoned(ndx);
    float *dW = dev_upload(h->dW0, nW), *db = dev_upload(h->db0, c->out);
    int rc = st_cuda_linear_forward(c->rows, c->in, c->out, x, h->xs, W, b, y, h->ys, NULL);
    CHECK(rc == ST_OK, "%s: forward: %s", c->name, st_last_error());
    rc = st_cuda_linear_backward(c->rows, c->in, c->out, x, h->xs, W, dy, h->gs, dx, h->dxs, c->dx_acc, dW, db, NULL);
    CHECK(rc == ST_OK, "%s: backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->y = malloc(sizeof(float) * ny), o->dx = malloc(sizeof(float) * ndx);
    o->dW = malloc(sizeof(float) * nW), o->db = malloc(sizeof(float) * c->out);
    dev_download(o->y, y, ny), dev_download(o->dx, dx, ndx), dev_download(o->dW, dW, nW);
    dev_download(o->db, db, c->out);
    dev_free(x), dev_free(W), dev_free(b), dev_free(dy), dev_free(y), dev_free(dx), dev_free(dW), dev_free(db);
}

static void out_free(lin_out *o) { free(o->y), free(o->dx), free(o->dW), free(o->db); }

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

static void run_case(const lin_case *c, uint64_t seed) {
    int p = c->pad;
    lin_data h = {c->in + 5 * p, c->out + 3 * p, c->out + 7 * p, c->in + 2 * p, 0, 0, 0, 0, 0, 0, 0};
    h.x = host_rows(c->rows, c->in, h.xs, 1.0f, seed, 1);
    h.W = host_rows(c->out, c->in, c->in, (float)(1 / sqrt(c->in)), seed, 2);
    h.b = host_rows(1, c->out, c->out, 0.5f, seed, 3);
    h.dy = host_rows(c->rows, c->out, h.gs, 1.0f, seed, 4);
    h.dx0 = host_rows(c->rows, c->in, h.dxs, 1.0f, seed, 5);
    h.dW0 = host_rows(c->out, c->in, c->in, 1.0f, seed, 6);
    h.db0 = host_rows(1, c->out, c->out, 1.0f, seed, 7);
    size_t ny = (size_t)c->rows * h.ys, ndx = (size_t)c->rows * h.dxs, nW = (size_t)c->out * c->in;

    float *y = host_poisoned(ny), *dx = c->dx_acc ? host_copy(h.dx0, ndx) : host_poisoned(ndx);
    float *dW = host_copy(h.dW0, nW), *db = host_copy(h.db0, c->out);
    st_linear_forward(c->rows, c->in, c->out, h.x, h.xs, h.W, c->bias ? h.b : NULL, y, h.ys);
    st_linear_backward(c->rows, c->in, c->out, h.x, h.xs, h.W, h.dy, h.gs, dx, h.dxs, c->dx_acc, dW, db);

    lin_out g[2];
    gpu_run(c, &h, &g[0]);
    gpu_run(c, &h, &g[1]);
    printf("%s: rows %d in %d out %d bias %d dx_acc %d strides x %d y %d dy %d dx %d\n", c->name, c->rows, c->in,
           c->out, c->bias, c->dx_acc, h.xs, h.ys, h.gs, h.dxs);
    char what[96];
    snprintf(what, sizeof what, "%s y", c->name);
    CHECK_PARITY(what, rel_err_rows(g[0].y, h.ys, y, h.ys, c->rows, c->out), 1e-5);
    snprintf(what, sizeof what, c->dx_acc ? "%s dx (+=)" : "%s dx", c->name);
    double edx = c->dx_acc ? rel_err_added_rows(g[0].dx, dx, h.dx0, c->rows, c->in, h.dxs)
                           : rel_err_rows(g[0].dx, h.dxs, dx, h.dxs, c->rows, c->in);
    CHECK_PARITY(what, edx, 1e-4);
    snprintf(what, sizeof what, "%s dW (+=)", c->name);
    CHECK_PARITY(what, rel_err_added_rows(g[0].dW, dW, h.dW0, c->out, c->in, c->in), 1e-4);
    snprintf(what, sizeof what, "%s db (+=)", c->name);
    CHECK_PARITY(what, rel_err_added_rows(g[0].db, db, h.db0, 1, c->out, c->out), 1e-4);
    long gy = gap_written(g[0].y, c->rows, c->out, h.ys), gdx = gap_written(g[0].dx, c->rows, c->in, h.dxs);
    CHECK(gy == 0 && gdx == 0, "%s: %ld gap values of y and %ld of dx were written", c->name, gy, gdx);
    CHECK(same_bits(g[0].y, g[1].y, ny) && same_bits(g[0].dx, g[1].dx, ndx) && same_bits(g[0].dW, g[1].dW, nW) &&
              same_bits(g[0].db, g[1].db, c->out),
          "%s: two GPU runs differ (y %d dx %d dW %d db %d same)", c->name, same_bits(g[0].y, g[1].y, ny),
          same_bits(g[0].dx, g[1].dx, ndx), same_bits(g[0].dW, g[1].dW, nW), same_bits(g[0].db, g[1].db, c->out));
    out_free(&g[0]), out_free(&g[1]);
    free(y), free(dx), free(dW), free(db);
    free(h.x), free(h.W), free(h.b), free(h.dy), free(h.dx0), free(h.dW0), free(h.db0);
}

/* C = 0.5 A^T B^T - 1.5 C with padded leading dimensions, against st_gemm. */
static void check_gemm_tt(int M, int N, int Kd, uint64_t seed) {
    int lda = M + 3, ldb = Kd + 2, ldc = N + 4;
    float *A = host_rows(Kd, M, lda, 1.0f, seed, 11), *B = host_rows(N, Kd, ldb, 1.0f, seed, 12);
    float *C0 = host_rows(M, N, ldc, 1.0f, seed, 13), *C = host_copy(C0, (size_t)M * ldc);
    st_gemm(1, 1, M, N, Kd, 0.5f, A, lda, B, ldb, -1.5f, C, ldc);
    float *dA = dev_upload(A, (size_t)Kd * lda), *dB = dev_upload(B, (size_t)N * ldb);
    float *dC = dev_upload(C0, (size_t)M * ldc), *g = malloc(sizeof(float) * (size_t)M * ldc);
    int rc = st_cuda_gemm(1, 1, M, N, Kd, 0.5f, dA, lda, dB, ldb, -1.5f, dC, ldc, NULL);
    CHECK(rc == ST_OK, "gemm TT: %s", st_last_error());
    dev_download(g, dC, (size_t)M * ldc);
    char what[64];
    snprintf(what, sizeof what, "gemm TT %dx%dx%d", M, N, Kd);
    CHECK_PARITY(what, rel_err_rows(g, ldc, C, ldc, M, N), 1e-5);
    CHECK(gap_written(g, M, N, ldc) == 0, "gemm TT wrote into C's padding");
    dev_free(dA), dev_free(dB), dev_free(dC);
    free(A), free(B), free(C0), free(C), free(g);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_dims t, o;
    st_dims_preset("tiny", &t);
    st_dims_preset("odd", &o);
    int tw = 2 * t.K, ow = 3 * o.K, big = 64 * t.K; /* rows of 2, 3 and 64 windows */
    const lin_case cases[] = {
        {"tiny w_in", tw, t.Dv + t.C, t.D, 1, 0, 0},
        {"tiny in_proj", tw, t.D, st_in_proj_out(&t), 0, 0, 1},
        {"tiny out_proj (dx +=)", tw, st_d_inner(&t), t.D, 0, 1, 0},
        {"tiny pi2", 2, t.Hh, t.A, 1, 0, 1},
        {"tiny v2", 2, t.Hh, 1, 1, 0, 0},
        {"odd w_in", ow, o.Dv + o.C, o.D, 1, 0, 1},
        {"odd in_proj", ow, o.D, st_in_proj_out(&o), 0, 0, 1},
        {"odd out_proj (dx +=)", ow, st_d_inner(&o), o.D, 0, 1, 1},
        {"odd pi1", 3, o.D + o.C, o.Hh, 1, 1, 1},
        {"64 windows in_proj", big, t.D, st_in_proj_out(&t), 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 1000 + i);
    check_gemm_tt(37, 11, 50, 77);
    check_gemm_tt(5, 96, 3, 78);
#endif
    TEST_MAIN_END();
}
