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
 *  - st_cuda_gemm with both operands transposed, alpha and beta;
 *  - the bias broadcast (64-row tiles, 256 threads walking them) at rows
 *    wider than a block, a block wide, and ending in a partial tile.
 * bf16 products (st_cuda_set_matmul_precision(ST_MATMUL_BF16)), on every
 * case above plus odd ones (in/out not multiples of 8, a single row): y,
 * dx, dW, db and the transposed gemm against a float64 reference computed
 * here (plain loops, no BLAS) within 2e-2 relative (issue 6; bf16 operands
 * with fp32 accumulation measure ~1e-3..5e-3), poisoned outputs, no NaN,
 * untouched gaps, two runs with the same bits. Each error is printed with
 * the regime it suggests (cuBLAS may run a shape in TF32 or fp32 anyway).
 * The bias epilogue (cublasLt) against the broadcast-then-beta = 1 way on
 * the same inputs, taken only with a 16-byte aligned bias (check_bias_epilogue).
 * The residual product y = res + x W^T, its three ways against the CPU
 * (check_res_lt).
 * The column sums' finish by the last block of each column tile (row-split
 * tickets, check_colsum_tickets) against the finish kernel, bit for bit,
 * and against a float64 sum, with the op run twice and replayed twice
 * from a CUDA graph (the counters must be back at zero every time).
 * CUDA graphs, in both precisions: the forward and backward of three
 * layers captured on a created stream, replayed on fresh inputs copied into
 * the same buffers, equal bit for bit the same calls made directly; the
 * replay runs with the switch set to the other precision, so a graph is
 * shown to keep the precision it was captured with.
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

static lin_data lin_data_make(const lin_case *c, uint64_t seed) {
    int p = c->pad;
    lin_data h = {c->in + 5 * p, c->out + 3 * p, c->out + 7 * p, c->in + 2 * p, 0, 0, 0, 0, 0, 0, 0};
    h.x = host_rows(c->rows, c->in, h.xs, 1.0f, seed, 1);
    h.W = host_rows(c->out, c->in, c->in, (float)(1 / sqrt(c->in)), seed, 2);
    h.b = host_rows(1, c->out, c->out, 0.5f, seed, 3);
    h.dy = host_rows(c->rows, c->out, h.gs, 1.0f, seed, 4);
    h.dx0 = host_rows(c->rows, c->in, h.dxs, 1.0f, seed, 5);
    h.dW0 = host_rows(c->out, c->in, c->in, 1.0f, seed, 6);
    h.db0 = host_rows(1, c->out, c->out, 1.0f, seed, 7);
    return h;
}

static void lin_data_free(lin_data *h) {
    free(h->x), free(h->W), free(h->b), free(h->dy), free(h->dx0), free(h->dW0), free(h->db0);
}

static void run_case_bf16(const lin_case *c, const lin_data *h);

static void run_case(const lin_case *c, uint64_t seed) {
    lin_data h = lin_data_make(c, seed);
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
    run_case_bf16(c, &h);
    lin_data_free(&h);
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

/* ---- bf16 products against a float64 reference ---- */

#define BF16_BOUND 2e-2

/* What an error level suggests about the kernel cuBLAS ran: bf16 operands
 * (8-bit mantissa) give ~1e-3 and more, TF32 (11 bits) ~1e-4, fp32 ~1e-7. */
static const char *regime(double e) {
    return e < 1e-5 ? "fp32-level: no bf16 rounding seen" : e < 5e-4 ? "tf32-level" : "bf16-level";
}

/* norm(gpu - ref) / norm(ref - init) over a rows x cols block: gpu at row
 * stride gs, ref and init (NULL: zero) contiguous rows x cols doubles. +Inf
 * when gpu holds a NaN or Inf, whose first coordinates are printed. */
static double rel_err_f64(const char *what, const float *gpu, int gs, const double *ref, const double *init, int rows,
                          int cols) {
    double d = 0, n = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double g = gpu[(size_t)r * gs + c], x = ref[(size_t)r * cols + c];
            double i = init ? init[(size_t)r * cols + c] : 0;
            if (!isfinite(g)) {
                printf("  %s: first non-finite value %g at row %d col %d (reference %.6g)\n", what, g, r, c, x);
                return INFINITY;
            }
            d += (g - x) * (g - x), n += (x - i) * (x - i);
        }
    return n > 0 ? sqrt(d / n) : sqrt(d);
}

static void check_bf16(const char *what, double err, int is_product) {
    printf("  %-36s rel err %.3e (bound %.0e)  %s\n", what, err, BF16_BOUND,
           is_product ? regime(err) : "fp32 colsum, not a product");
    CHECK(err <= BF16_BOUND, "%s: bf16 GPU vs float64 rel err %.3e > %.0e", what, err, BF16_BOUND);
}

/* A rows x cols block of a strided float buffer as contiguous doubles. */
static double *to_f64(const float *a, int stride, int rows, int cols) {
    double *d = malloc(sizeof(double) * ((size_t)rows * cols + 1));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            d[(size_t)r * cols + c] = a[(size_t)r * stride + c];
    return d;
}

/* The float64 linear op, contiguous outputs: y = x W^T + b, dx (= | +=)
 * dy W, dW = dW0 + dy^T x, db = db0 + sum_r dy. */
typedef struct {
    double *y, *dx, *dx0, *dW, *dW0, *db, *db0;
} lin_ref;

static lin_ref ref_run(const lin_case *c, const lin_data *h) {
    int R = c->rows, I = c->in, O = c->out;
    lin_ref r;
    r.y = malloc(sizeof(double) * ((size_t)R * O + 1)), r.dx = malloc(sizeof(double) * ((size_t)R * I + 1));
    r.dx0 = c->dx_acc ? to_f64(h->dx0, h->dxs, R, I) : NULL;
    r.dW0 = to_f64(h->dW0, I, O, I), r.db0 = to_f64(h->db0, O, 1, O);
    r.dW = to_f64(h->dW0, I, O, I), r.db = to_f64(h->db0, O, 1, O);
    for (int i = 0; i < R; i++) {
        const float *x = h->x + (size_t)i * h->xs, *dy = h->dy + (size_t)i * h->gs;
        for (int o = 0; o < O; o++) {
            double acc = c->bias ? h->b[o] : 0;
            for (int k = 0; k < I; k++)
                acc += (double)x[k] * h->W[(size_t)o * I + k];
            r.y[(size_t)i * O + o] = acc;
            r.db[o] += dy[o];
            for (int k = 0; k < I; k++)
                r.dW[(size_t)o * I + k] += (double)dy[o] * x[k];
        }
        for (int k = 0; k < I; k++) {
            double acc = r.dx0 ? r.dx0[(size_t)i * I + k] : 0;
            for (int o = 0; o < O; o++)
                acc += (double)dy[o] * h->W[(size_t)o * I + k];
            r.dx[(size_t)i * I + k] = acc;
        }
    }
    return r;
}

static void ref_free(lin_ref *r) {
    free(r->y), free(r->dx), free(r->dx0), free(r->dW), free(r->dW0), free(r->db), free(r->db0);
}

/* One case in bf16: two GPU runs (outputs poisoned in each) against the
 * float64 reference; the switch is back at fp32 afterwards. */
static void run_case_bf16(const lin_case *c, const lin_data *h) {
    size_t ny = (size_t)c->rows * h->ys, ndx = (size_t)c->rows * h->dxs, nW = (size_t)c->out * c->in;
    lin_ref r = ref_run(c, h);
    lin_out g[2];
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    CHECK(st_cuda_matmul_precision() == ST_MATMUL_BF16, "the precision switch does not read back bf16");
    gpu_run(c, h, &g[0]);
    gpu_run(c, h, &g[1]);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    CHECK(st_cuda_matmul_precision() == ST_MATMUL_FP32, "the precision switch does not read back fp32");
    char what[96];
    snprintf(what, sizeof what, "bf16 %s y", c->name);
    check_bf16(what, rel_err_f64(what, g[0].y, h->ys, r.y, NULL, c->rows, c->out), 1);
    snprintf(what, sizeof what, c->dx_acc ? "bf16 %s dx (+=)" : "bf16 %s dx", c->name);
    check_bf16(what, rel_err_f64(what, g[0].dx, h->dxs, r.dx, r.dx0, c->rows, c->in), 1);
    snprintf(what, sizeof what, "bf16 %s dW (+=)", c->name);
    check_bf16(what, rel_err_f64(what, g[0].dW, c->in, r.dW, r.dW0, c->out, c->in), 1);
    snprintf(what, sizeof what, "bf16 %s db (+=)", c->name);
    check_bf16(what, rel_err_f64(what, g[0].db, c->out, r.db, r.db0, 1, c->out), 0);
    long gy = gap_written(g[0].y, c->rows, c->out, h->ys), gdx = gap_written(g[0].dx, c->rows, c->in, h->dxs);
    CHECK(gy == 0 && gdx == 0, "bf16 %s: %ld gap values of y and %ld of dx were written", c->name, gy, gdx);
    CHECK(same_bits(g[0].y, g[1].y, ny) && same_bits(g[0].dx, g[1].dx, ndx) && same_bits(g[0].dW, g[1].dW, nW) &&
              same_bits(g[0].db, g[1].db, c->out),
          "bf16 %s: two GPU runs differ (y %d dx %d dW %d db %d same)", c->name, same_bits(g[0].y, g[1].y, ny),
          same_bits(g[0].dx, g[1].dx, ndx), same_bits(g[0].dW, g[1].dW, nW), same_bits(g[0].db, g[1].db, c->out));
    out_free(&g[0]), out_free(&g[1]);
    ref_free(&r);
}

/* C = 0.5 A^T B^T - 1.5 C in bf16 against float64, the error measured
 * against the product term 0.5 A^T B^T. */
static void check_gemm_tt_bf16(int M, int N, int Kd, uint64_t seed) {
    int lda = M + 3, ldb = Kd + 2, ldc = N + 4;
    float *A = host_rows(Kd, M, lda, 1.0f, seed, 11), *B = host_rows(N, Kd, ldb, 1.0f, seed, 12);
    float *C0 = host_rows(M, N, ldc, 1.0f, seed, 13), *g = malloc(sizeof(float) * (size_t)M * ldc);
    double *ref = malloc(sizeof(double) * (size_t)M * N), *init = malloc(sizeof(double) * (size_t)M * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < Kd; k++)
                acc += (double)A[(size_t)k * lda + m] * B[(size_t)n * ldb + k];
            init[(size_t)m * N + n] = -1.5 * C0[(size_t)m * ldc + n];
            ref[(size_t)m * N + n] = 0.5 * acc + init[(size_t)m * N + n];
        }
    float *dA = dev_upload(A, (size_t)Kd * lda), *dB = dev_upload(B, (size_t)N * ldb);
    float *dC = dev_upload(C0, (size_t)M * ldc);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    int rc = st_cuda_gemm(1, 1, M, N, Kd, 0.5f, dA, lda, dB, ldb, -1.5f, dC, ldc, NULL);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    CHECK(rc == ST_OK, "bf16 gemm TT: %s", st_last_error());
    dev_download(g, dC, (size_t)M * ldc);
    char what[64];
    snprintf(what, sizeof what, "bf16 gemm TT %dx%dx%d", M, N, Kd);
    check_bf16(what, rel_err_f64(what, g, ldc, ref, init, M, N), 1);
    CHECK(gap_written(g, M, N, ldc) == 0, "bf16 gemm TT wrote into C's padding");
    dev_free(dA), dev_free(dB), dev_free(dC);
    free(A), free(B), free(C0), free(g), free(ref), free(init);
}

/* ---- CUDA graph capture ----
 * Three layers, forward and backward, on one stream:
 *   y0 = x W0^T + b0          x [R, 56] (padded stride), y0 [R, 32]
 *   y1 = y0 W1^T              [R, 164]
 *   y2 = y1[:, 0:64] W2^T + b2 [R, 32]   (a strided view of y1)
 *   backward from dy2 and dy1 (an incoming gradient of all of y1, to which
 *   layer 2's dx is added in columns 0:64), down to dx.
 * CAP_INPUT buffers are copied fresh before each run, CAP_OUTPUT ones
 * poisoned before each run, CAP_ADDED ones copied fresh and added to. */
enum { CAP_R = 128, CAP_IN = 56, CAP_XS = 59, CAP_D = 32, CAP_Z = 164, CAP_V = 64 };
enum { CAP_INPUT, CAP_OUTPUT, CAP_ADDED };
enum { X, W0, B0, W1, W2, B2, Y0, Y1, Y2, DY2, DY1, DY0, DX, DW0, DB0, DW1, DW2, DB2, CAP_N };
typedef struct {
    const char *name;
    int rows, width, stride, kind;
    float scale;
} cap_buf;
static const cap_buf cap_bufs[CAP_N] = {
    [X] = {"x", CAP_R, CAP_IN, CAP_XS, CAP_INPUT, 1.0f},
    [W0] = {"W0", CAP_D, CAP_IN, CAP_IN, CAP_INPUT, 0.13f},
    [B0] = {"b0", 1, CAP_D, CAP_D, CAP_INPUT, 0.5f},
    [W1] = {"W1", CAP_Z, CAP_D, CAP_D, CAP_INPUT, 0.18f},
    [W2] = {"W2", CAP_D, CAP_V, CAP_V, CAP_INPUT, 0.125f},
    [B2] = {"b2", 1, CAP_D, CAP_D, CAP_INPUT, 0.5f},
    [Y0] = {"y0", CAP_R, CAP_D, CAP_D, CAP_OUTPUT, 0},
    [Y1] = {"y1", CAP_R, CAP_Z, CAP_Z, CAP_OUTPUT, 0},
    [Y2] = {"y2", CAP_R, CAP_D, CAP_D, CAP_OUTPUT, 0},
    [DY2] = {"dy2", CAP_R, CAP_D, CAP_D, CAP_INPUT, 1.0f},
    [DY1] = {"dy1 (+= layer 2's dx)", CAP_R, CAP_Z, CAP_Z, CAP_ADDED, 1.0f},
    [DY0] = {"dy0", CAP_R, CAP_D, CAP_D, CAP_OUTPUT, 0},
    [DX] = {"dx", CAP_R, CAP_IN, CAP_XS, CAP_OUTPUT, 0},
    [DW0] = {"dW0 (+=)", CAP_D, CAP_IN, CAP_IN, CAP_ADDED, 1.0f},
    [DB0] = {"db0 (+=)", 1, CAP_D, CAP_D, CAP_ADDED, 1.0f},
    [DW1] = {"dW1 (+=)", CAP_Z, CAP_D, CAP_D, CAP_ADDED, 1.0f},
    [DW2] = {"dW2 (+=)", CAP_D, CAP_V, CAP_V, CAP_ADDED, 1.0f},
    [DB2] = {"db2 (+=)", 1, CAP_D, CAP_D, CAP_ADDED, 1.0f},
};

static size_t cap_len(int i) { return (size_t)cap_bufs[i].rows * cap_bufs[i].stride; }

/* The step: every call enqueued on s; the first failing status. */
static int cap_step(float *const *b, cudaStream_t s) {
    int rc = st_cuda_linear_forward(CAP_R, CAP_IN, CAP_D, b[X], CAP_XS, b[W0], b[B0], b[Y0], CAP_D, s);
    if (rc == ST_OK) rc = st_cuda_linear_forward(CAP_R, CAP_D, CAP_Z, b[Y0], CAP_D, b[W1], NULL, b[Y1], CAP_Z, s);
    if (rc == ST_OK) rc = st_cuda_linear_forward(CAP_R, CAP_V, CAP_D, b[Y1], CAP_Z, b[W2], b[B2], b[Y2], CAP_D, s);
    if (rc == ST_OK)
        rc = st_cuda_linear_backward(CAP_R, CAP_V, CAP_D, b[Y1], CAP_Z, b[W2], b[DY2], CAP_D, b[DY1], CAP_Z, 1, b[DW2],
                                     b[DB2], s);
    if (rc == ST_OK)
        rc = st_cuda_linear_backward(CAP_R, CAP_D, CAP_Z, b[Y0], CAP_D, b[W1], b[DY1], CAP_Z, b[DY0], CAP_D, 0, b[DW1],
                                     NULL, s);
    if (rc == ST_OK)
        rc = st_cuda_linear_backward(CAP_R, CAP_IN, CAP_D, b[X], CAP_XS, b[W0], b[DY0], CAP_D, b[DX], CAP_XS, 0, b[DW0],
                                     b[DB0], s);
    return rc;
}

/* Fresh inputs of trial `seed` copied into the buffers, outputs poisoned (all on s). */
static void cap_load(float *const *b, uint64_t seed, cudaStream_t s) {
    for (int i = 0; i < CAP_N; i++) {
        const cap_buf *c = &cap_bufs[i];
        if (c->kind == CAP_OUTPUT) {
            CHECK(cudaMemsetAsync(b[i], 0xFF, sizeof(float) * cap_len(i), s) == cudaSuccess, "capture: poison %s",
                  c->name);
            continue;
        }
        float *h = host_rows(c->rows, c->width, c->stride, c->scale, seed, 100 + (uint32_t)i);
        CHECK(cudaMemcpyAsync(b[i], h, sizeof(float) * cap_len(i), cudaMemcpyHostToDevice, s) == cudaSuccess,
              "capture: upload %s", c->name);
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "capture: upload %s", c->name); /* h is pageable and freed */
        free(h);
    }
}

/* Every buffer that a run writes, to the host (after the stream is done). */
static void cap_fetch(float *const *b, cudaStream_t s, float **h) {
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "capture: kernels failed: %s",
          cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; i < CAP_N; i++) {
        h[i] = NULL;
        if (cap_bufs[i].kind == CAP_INPUT) continue;
        h[i] = malloc(sizeof(float) * cap_len(i));
        CHECK(cudaMemcpy(h[i], b[i], sizeof(float) * cap_len(i), cudaMemcpyDeviceToHost) == cudaSuccess,
              "capture: download %s", cap_bufs[i].name);
    }
}

/* Direct and replayed results equal bit for bit, are finite in their width
 * and keep the poison of the gaps; prints the first differing element. */
static void cap_compare(const char *what, float **direct, float **replay) {
    for (int i = 0; i < CAP_N; i++) {
        const cap_buf *c = &cap_bufs[i];
        if (c->kind == CAP_INPUT) continue;
        long diff = 0, bad = 0, gaps = 0;
        int fr = -1, fc = -1;
        for (int r = 0; r < c->rows; r++)
            for (int k = 0; k < c->stride; k++) {
                size_t j = (size_t)r * c->stride + k;
                uint32_t a, b;
                memcpy(&a, &direct[i][j], 4), memcpy(&b, &replay[i][j], 4);
                if (a != b && diff++ == 0) fr = r, fc = k;
                if (k < c->width)
                    bad += !isfinite(direct[i][j]);
                else
                    gaps += !is_poison(replay[i][j]);
            }
        CHECK(diff == 0,
              "%s %s: %ld elements differ between replay and direct calls, first at row %d col %d (%.9g vs %.9g)", what,
              c->name, diff, fr, fc, fr >= 0 ? replay[i][(size_t)fr * c->stride + fc] : 0.0,
              fr >= 0 ? direct[i][(size_t)fr * c->stride + fc] : 0.0);
        CHECK(bad == 0, "%s %s: %ld non-finite values in the direct result", what, c->name, bad);
        CHECK(gaps == 0, "%s %s: %ld gap values written by the replay", what, c->name, gaps);
    }
}

/* Captures the step in precision p, then for two trials of fresh inputs
 * compares the replay (switch set to the other precision) with direct calls. */
static void check_capture(st_matmul_precision p) {
    const char *pname = p == ST_MATMUL_BF16 ? "bf16" : "fp32";
    st_matmul_precision other = p == ST_MATMUL_BF16 ? ST_MATMUL_FP32 : ST_MATMUL_BF16;
    float *b[CAP_N];
    for (int i = 0; i < CAP_N; i++)
        b[i] = dev_poisoned(cap_len(i));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "capture: allocation"); /* before the non-blocking stream */
    cudaStream_t s = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "capture: stream");
    st_cuda_set_matmul_precision(p);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "capture: begin");
    int rc = cap_step(b, s);
    cudaError_t e = cudaStreamEndCapture(s, &graph); /* ended even when a call failed */
    CHECK(rc == ST_OK, "%s capture: a call failed while capturing: %s", pname, st_last_error());
    CHECK(e == cudaSuccess && graph, "%s capture: end: %s", pname, cudaGetErrorString(e));
    size_t nodes = 0;
    if (graph) {
        e = cudaGraphGetNodes(graph, NULL, &nodes);
        CHECK(e == cudaSuccess, "%s capture: nodes: %s", pname, cudaGetErrorString(e));
        e = cudaGraphInstantiate(&exec, graph, 0);
        CHECK(e == cudaSuccess && exec, "%s capture: instantiate: %s", pname, cudaGetErrorString(e));
    }
    printf("capture %s: 3 layers forward + backward, %zu graph nodes, rows %d\n", pname, nodes, CAP_R);
    for (int t = 0; t < 2 && exec; t++) {
        float *direct[CAP_N], *replay[CAP_N];
        st_cuda_set_matmul_precision(p);
        cap_load(b, 9000 + (uint64_t)t, s);
        rc = cap_step(b, s);
        CHECK(rc == ST_OK, "%s capture: direct calls: %s", pname, st_last_error());
        cap_fetch(b, s, direct);
        st_cuda_set_matmul_precision(other);
        cap_load(b, 9000 + (uint64_t)t, s);
        e = cudaGraphLaunch(exec, s);
        CHECK(e == cudaSuccess, "%s capture: launch: %s", pname, cudaGetErrorString(e));
        cap_fetch(b, s, replay);
        char what[64];
        snprintf(what, sizeof what, "capture %s trial %d", pname, t);
        int fails = st_test_fail;
        cap_compare(what, direct, replay);
        printf("  %-36s %s\n", what, st_test_fail == fails ? "replay == direct, bit for bit" : "DIFFER");
        for (int i = 0; i < CAP_N; i++)
            free(direct[i]), free(replay[i]);
    }
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (s) cudaStreamDestroy(s);
    for (int i = 0; i < CAP_N; i++)
        dev_free(b[i]);
}
/* The bias epilogue (one cublasLt product, linear.cu) against the old way
 * (the bias broadcast, then the product with beta = 1) on the same fresh
 * inputs, each into poisoned outputs: taken where the bias and every row
 * are 16-byte aligned (must_take; with 4-byte rows it is printed whether
 * cublasLt offered an algorithm), not where the bias is not (that call still right), within 1e-5 (fp32:
 * other kernels, other orders of the sums) or 1e-2 (bf16: cuBLAS may run
 * either in bf16 or TF32) of each other, no NaN, padding untouched. */
static void check_bias_epilogue(st_matmul_precision prec, int rows, int in, int out, int pad, int must_take,
                                uint64_t seed) {
    st_cuda_set_matmul_precision(prec);
    const int xs = in + 5 * pad, ys = out + 3 * pad;
    const size_t ny = (size_t)rows * ys;
    float *hx = host_rows(rows, in, xs, 1.0f, seed, 1), *hW = host_rows(out, in, in, (float)(1 / sqrt(in)), seed, 2);
    float *hb = host_rows(1, out + 1, out + 1, 0.5f, seed, 3);
    float *x = dev_upload(hx, (size_t)rows * xs), *W = dev_upload(hW, (size_t)out * in);
    float *b = dev_upload(hb, (size_t)out + 1); /* b + 1: a bias 4 bytes past 16-byte alignment */
    float *y[3], *h[3];
    const char *bf = prec == ST_MATMUL_BF16 ? "bf16" : "fp32";
    for (int k = 0; k < 3; k++) {
        y[k] = dev_poisoned(ny);
        const float *bk = k == 2 ? b + 1 : b;
        st_cuda_linear_set_bias_epilogue(k != 1);
        const int takes = st_cuda_linear_bias_epilogue_takes(rows, in, out, x, xs, W, bk, y[k], ys, NULL);
        if (k == 0 && !must_take)
            printf("%s %d rows %d->%d pad %d: the epilogue %s\n", bf, rows, in, out, pad, takes ? "taken" : "not taken");
        CHECK(k == 0 ? takes || !must_take : !takes, "%s %d rows %d->%d: the epilogue %s (run %d: %s)", bf, rows, in, out,
              takes ? "taken" : "not taken", k, k == 0 ? "aligned bias" : k == 1 ? "switched off" : "bias at +4 bytes");
        CHECK(st_cuda_linear_forward(rows, in, out, x, xs, W, bk, y[k], ys, NULL) == ST_OK, "%s: forward: %s", bf,
              st_last_error());
        h[k] = malloc(sizeof(float) * ny);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed", bf);
        dev_download(h[k], y[k], ny);
    }
    st_cuda_linear_set_bias_epilogue(1);
    /* run 2's bias is b + 1: the host reference of that run is run 1's way over the shifted bias */
    float *ref2 = host_poisoned(ny);
    st_linear_forward(rows, in, out, hx, xs, hW, hb + 1, ref2, ys);
    const double bound = prec == ST_MATMUL_BF16 ? 1e-2 : 1e-5;
    char what[128];
    snprintf(what, sizeof what, "%s %d rows %d->%d pad %d: epilogue vs broadcast", bf, rows, in, out, pad);
    CHECK_PARITY(what, rel_err_rows(h[0], ys, h[1], ys, rows, out), bound);
    snprintf(what, sizeof what, "%s %d rows %d->%d pad %d: unaligned bias vs the CPU", bf, rows, in, out, pad);
    CHECK_PARITY(what, rel_err_rows(h[2], ys, ref2, ys, rows, out), prec == ST_MATMUL_BF16 ? 2e-2 : 1e-5);
    for (int k = 0; k < 3; k++) {
        long nan = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < out; c++)
                nan += !isfinite(h[k][(size_t)r * ys + c]);
        CHECK(nan == 0 && gap_written(h[k], rows, out, ys) == 0, "%s run %d: %ld non-finite outputs or gaps written",
              what, k, nan);
        free(h[k]), dev_free(y[k]);
    }
    free(ref2), free(hx), free(hW), free(hb), dev_free(x), dev_free(W), dev_free(b);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
}

/* The residual product y = res + x W^T (st_cuda_linear_forward_res): the
 * cublasLt way (res as C, y as D; taken where must_take), the copy-then-
 * beta = 1 way (switched off) and in place (res = y), each into a poisoned
 * y, against the CPU's x W^T plus res within 1e-5 (fp32) or 2e-2 (bf16):
 * no NaN, y's gap untouched, res unchanged (poison in its gap). Fresh
 * inputs, res at its own stride. */
static void check_res_lt(st_matmul_precision prec, int rows, int in, int out, int pad, int must_take, uint64_t seed) {
    st_cuda_set_matmul_precision(prec);
    const int xs = in + 5 * pad, ys = out + 3 * pad, rs = out + 7 * pad;
    const size_t ny = (size_t)rows * ys, nr = (size_t)rows * rs;
    float *hx = host_rows(rows, in, xs, 1.0f, seed, 1), *hW = host_rows(out, in, in, (float)(1 / sqrt(in)), seed, 2);
    float *hres = host_rows(rows, out, rs, 1.0f, seed, 3), *hres_y = host_rows(rows, out, ys, 1.0f, seed, 3);
    float *x = dev_upload(hx, (size_t)rows * xs), *W = dev_upload(hW, (size_t)out * in), *res = dev_upload(hres, nr);
    float *ref = host_poisoned(ny);
    st_linear_forward(rows, in, out, hx, xs, hW, NULL, ref, ys);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < out; c++)
            ref[(size_t)r * ys + c] += hres[(size_t)r * rs + c];
    const char *bf = prec == ST_MATMUL_BF16 ? "bf16" : "fp32";
    const double bound = prec == ST_MATMUL_BF16 ? 2e-2 : 1e-5;
    for (int k = 0; k < 3; k++) { /* 0 cublasLt, 1 switched off, 2 in place */
        float *y = k == 2 ? dev_upload(hres_y, ny) : dev_poisoned(ny);
        const float *rk = k == 2 ? y : res;
        const int rks = k == 2 ? ys : rs;
        st_cuda_linear_set_res_lt(k != 1);
        const int takes = st_cuda_linear_res_lt_takes(rows, in, out, x, xs, W, rk, rks, y, ys, NULL);
        if (k == 0 && !must_take)
            printf("%s %d rows %d->%d pad %d: the residual's cublasLt product %s\n", bf, rows, in, out, pad,
                   takes ? "taken" : "not taken");
        CHECK(k == 0 ? takes || !must_take : !takes, "%s %d rows %d->%d: the residual's product %s (run %d)", bf, rows,
              in, out, takes ? "taken" : "not taken", k);
        CHECK(st_cuda_linear_forward_res(rows, in, out, x, xs, W, rk, rks, y, ys, NULL) == ST_OK,
              "%s: forward_res: %s", bf, st_last_error());
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed", bf);
        float *h = malloc(sizeof(float) * ny), *hr = malloc(sizeof(float) * nr);
        dev_download(h, y, ny);
        dev_download(hr, res, nr);
        char what[160];
        snprintf(what, sizeof what, "%s %d rows %d->%d pad %d: y = res + x W^T (%s) vs the CPU", bf, rows, in, out, pad,
                 k == 0 ? "cublasLt" : k == 1 ? "copy, beta = 1" : "in place");
        CHECK_PARITY(what, rel_err_rows(h, ys, ref, ys, rows, out), bound);
        long nan = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < out; c++)
                nan += !isfinite(h[(size_t)r * ys + c]);
        CHECK(nan == 0 && gap_written(h, rows, out, ys) == 0, "%s: %ld non-finite outputs or gaps written", what, nan);
        CHECK(memcmp(hr, hres, sizeof(float) * nr) == 0, "%s: res was changed", what);
        free(h), free(hr), dev_free(y);
    }
    st_cuda_linear_set_res_lt(1);
    free(ref), free(hx), free(hW), free(hres), free(hres_y), dev_free(x), dev_free(W), dev_free(res);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
}

/* sum += the column sums of x (rows x cols, row stride cols + pad) over the
 * row splits: the tickets' way (the last block of a column tile adds the
 * splits) and the finish kernel's must give the same bits; run twice
 * directly and twice as a graph replay (counters left at zero by each
 * run, or a later run's last block never finishes), against a float64
 * sum within 1e-6 of the increment. sum starts from random values. Then
 * with st_cuda_colsum_set_fill(0) (64 splits a tile at most, the old
 * split count: another order) within 1e-6 too. */
static void check_colsum_tickets(int rows, int cols, int pad, uint64_t seed) {
    const int xs = cols + pad;
    float *hx = host_rows(rows, cols, xs, 1.0f, seed, 1), *hs0 = host_rows(1, cols, cols, 1.0f, seed, 2);
    float *ref = malloc(sizeof(float) * (size_t)cols);
    for (int c = 0; c < cols; c++) {
        double t = 0;
        for (int r = 0; r < rows; r++)
            t += hx[(size_t)r * xs + c];
        ref[c] = hs0[c] + (float)t;
    }
    float *x = dev_upload(hx, (size_t)rows * xs), *sum = dev_upload(hs0, cols);
    float *h[6]; /* 0: finish kernel; 1, 2: tickets; 3, 4: graph replays; 5: the finish kernel again */
    for (int k = 0; k < 6; k++)
        h[k] = host_poisoned(cols);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "uploads"); /* before the non-blocking stream */
    cudaStream_t s = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "colsum tickets: stream");
    for (int k = 0; k < 3; k++) {
        st_cuda_rowsplit_set_tickets(k != 0);
        cudaMemcpyAsync(sum, hs0, sizeof(float) * cols, cudaMemcpyHostToDevice, s);
        CHECK(st_cuda_colsum_add(rows, cols, x, xs, sum, s) == ST_OK, "colsum: %s", st_last_error());
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "colsum tickets: kernels failed");
        dev_download(h[k], sum, cols);
    }
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "colsum tickets: capture");
    int rc = st_cuda_colsum_add(rows, cols, x, xs, sum, s);
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    CHECK(rc == ST_OK && e == cudaSuccess && graph, "colsum tickets: capture failed: %s", st_last_error());
    if (graph) CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && exec, "colsum tickets: instantiate");
    for (int k = 3; k < 5 && exec; k++) {
        cudaMemcpyAsync(sum, hs0, sizeof(float) * cols, cudaMemcpyHostToDevice, s);
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess,
              "colsum tickets: replay %d failed", k - 3);
        dev_download(h[k], sum, cols);
    }
    st_cuda_rowsplit_set_tickets(0); /* and the old way still right after the tickets' runs */
    cudaMemcpyAsync(sum, hs0, sizeof(float) * cols, cudaMemcpyHostToDevice, s);
    CHECK(st_cuda_colsum_add(rows, cols, x, xs, sum, s) == ST_OK, "colsum: %s", st_last_error());
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "colsum tickets: kernels failed");
    dev_download(h[5], sum, cols);
    st_cuda_rowsplit_set_tickets(1);
    float *hold = host_poisoned(cols);
    st_cuda_colsum_set_fill(0);
    cudaMemcpyAsync(sum, hs0, sizeof(float) * cols, cudaMemcpyHostToDevice, s);
    CHECK(st_cuda_colsum_add(rows, cols, x, xs, sum, s) == ST_OK, "colsum: %s", st_last_error());
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "colsum (fill off): kernels failed");
    dev_download(hold, sum, cols);
    st_cuda_colsum_set_fill(1);
    char what[96];
    snprintf(what, sizeof what, "colsum %d rows x %d (tickets)", rows, cols);
    CHECK_PARITY(what, rel_err_added(h[1], ref, hs0, cols), 1e-6);
    snprintf(what, sizeof what, "colsum %d rows x %d (fill off)", rows, cols);
    CHECK_PARITY(what, rel_err_added(hold, ref, hs0, cols), 1e-6);
    free(hold);
    const char *run[6] = {"finish kernel", "tickets", "tickets again", "graph replay", "graph replay again",
                          "finish kernel after"};
    for (int k = 1; k < 6; k++)
        CHECK(same_bits(h[0], h[k], cols), "colsum %d rows x %d: %s differs from the finish kernel's bits", rows, cols,
              run[k]);
    printf("  %-36s %s\n", what, "finish kernel == tickets == replays, bit for bit");
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    for (int k = 0; k < 6; k++)
        free(h[k]);
    free(hx), free(hs0), free(ref), dev_free(x), dev_free(sum);
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
        {"odd 37->13", ow, 37, 13, 1, 0, 1},
        {"odd 13->29 (dx +=)", 61, 13, 29, 1, 1, 1},
        {"1 row 29->11", 1, 29, 11, 1, 0, 1},
        {"1 row 20->3 (dx +=)", 1, 20, 3, 1, 1, 0},
        {"70001 rows 13->29 (column sums over 64 row splits, the last short)", 70001, 13, 29, 1, 1, 1},
        /* the bias broadcast's 64-row tiles walked by 256 threads: a row wider than the block (one
         * column step, no row step), exactly its width, and a partial last tile */
        {"70 rows 17->300 (bias rows wider than a block)", 70, 17, 300, 1, 0, 1},
        {"129 rows 9->256 (bias rows a block wide)", 129, 9, 256, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 1000 + i);
    check_gemm_tt(37, 11, 50, 77);
    check_gemm_tt(5, 96, 3, 78);
    check_gemm_tt_bf16(37, 11, 50, 77);
    check_gemm_tt_bf16(5, 96, 3, 78);
    for (int p = 0; p < 2; p++) {
        const st_matmul_precision prec = p ? ST_MATMUL_BF16 : ST_MATMUL_FP32;
        check_bias_epilogue(prec, 4096, 128, 128, 0, 1, 91); /* the selection GRN's fc2 at 64 windows */
        check_bias_epilogue(prec, 70, 17, 300, 1, 0, 92);    /* padded, 4-byte aligned rows */
        check_bias_epilogue(prec, 1, 29, 11, 0, 0, 93);
        check_res_lt(prec, 4096, 256, 128, 0, 1, 94); /* out_proj at 64 windows */
        check_res_lt(prec, 64, 256, 128, 0, 1, 95);   /* few rows */
        check_res_lt(prec, 70, 17, 30, 1, 0, 96);     /* padded, 4-byte aligned rows */
    }
    check_colsum_tickets(131072, 40, 0, 97); /* F at 2,048 windows: 256 splits (fill off 64), 2 column tiles */
    check_colsum_tickets(70001, 300, 3, 98); /* 64 splits, the last short; 10 tiles, the last partial */
    check_colsum_tickets(4099, 1, 0, 99);    /* 16 splits (fill off 4), one column */
    check_colsum_tickets(524288, 8, 0, 100); /* dt_bias's H = 8 at 8,192 windows: 512 splits (fill off 64) */
    check_capture(ST_MATMUL_FP32);
    check_capture(ST_MATMUL_BF16);
    CHECK(st_cuda_matmul_precision() == ST_MATMUL_FP32, "the precision switch was not restored to fp32");
#endif
    TEST_MAIN_END();
}
