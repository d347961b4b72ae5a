/* test_cuda_ssd.c: the GPU SSD scan (cuda/ssd_cuda.h) against the CPU op
 * (model/ssd.h). Skips (exit 77) without a device.
 *
 * For every case the GPU forward + backward runs on fresh Philox inputs and
 * is compared with
 *   - the CPU float chunked op with the same Q (same algorithm, float), and
 *   - the CPU float64 sequential recurrence (the definition),
 * as norm(gpu - ref) / norm(ref): forward <= 1e-5, gradients <= 1e-4. Both
 * sides keep float states; the GPU accumulates in double, so honest
 * differences are float round-off amplified by sums of a few hundred terms
 * (~1e-7..1e-6, printed), while any wrong term is O(1e-2) or more. dA and dD
 * are added to: they start from the same random values on every side and
 * the increments are compared (an overwrite instead of += fails).
 * Cases: Q in {8, 16, 32, 64} x K in {32, 50, 64, 7} for the tiny shape
 * (H=4, P=16, N=16, G=1), the odd shape (H=8, P=24, N=10, G=2) and
 * (H=4, P=16, N=16, G=2); a 64-window batch; the default shape (H=8, P=32,
 * N=64); each case on contiguous buffers and on xBC-style rows (x, B, C
 * inside one row, dx, dB, dC inside one dxBC row) padded with NaN, which
 * must give bit-identical results and leave the output padding untouched;
 * each run twice (bit-identical: no atomics). Last, a long window (K=256,
 * dt=0.5, A=-16, so exp(-2048) over the window) stays finite and matches.
 * The forward runs as the scan kernel and as the chunk-parallel kernels
 * (st_cuda_ssd_set_scan), staged and not, and the two agree. So does the
 * backward (st_cuda_ssd_set_scan_backward): the cases above run the scan
 * backward where it fits (checked: st_cuda_ssd_backward_is_scan), the
 * default and odd shapes run once more on the chunk-parallel backward, and
 * the two backwards are compared gradient by gradient (expected: the same
 * bits; bound 1e-6) at the default shape, an odd one (P=23, N=13, G=2, K=50
 * with Q=16: a short last chunk, P N > 256) and windows of 16 and 32 chunks.
 * In bf16 matrix-product mode the forward runs the TF32 tensor-core scan
 * (ssd_scan_tc.cu): case 11 checks that it is taken (default shape, odd
 * shapes K=50 with Q=16 and 32, P=24 and N=10 padded to 16; K=50 Q=24, rows
 * past Q padding in every chunk; K=100 Q=40, a chunk's decay scan over two
 * 32-row segments; the default shape with dt=0.5 A=-16) and compares y
 * with the float64 recurrence and the fp32 scan within the bf16 bound 2e-2
 * (whole tensor and each (window, head, chunk); TF32 gives ~1e-3), checks
 * contiguous and padded strides give the same bits (the kernel's 16-byte
 * and 4-byte copies: the padded xBC rows of W + 7 floats take the 4-byte
 * ones, contiguous rows the 16-byte ones where N or P is a multiple of 4),
 * two runs too, the output padding, and that st_cuda_ssd_set_scan_tc(0)
 * gives the fp32 bits. Where the pair kernel runs (two full chunks, Q a
 * multiple of 16: the default shape, K=32 Q=16, odd P and N, Q=64, P=48 >
 * Q=16) it is asserted taken and compared with the walk
 * (st_cuda_ssd_set_scan_tc_pair(0)): within 2e-2, chunk 0's rows
 * bit-identical; one chunk, four chunks and Q=24 assert the walk.
 * SSMTRADE_TEST_QUICK (the sanitizer runs): the grids take Q in {16, 32} x
 * K in {50, 64} (padding, several chunks, a short last chunk), the long
 * window only Q = 16 (its state pass), the chunk-parallel backward only the
 * default shape, the backwards' comparison not the 32 chunks, the TF32
 * case all but K=50 Q=32 and the large preset.
 * Case 12: in the bf16 precision mode the scan backward runs its products
 * in TF32 on the tensor cores where the shape allows (cuda/ssd_chunk_tc.cuh:
 * Q, P, N multiples of 16, K of Q); every gradient against the fp32 SIMT
 * backward, the CPU float chunked op and the float64 oracle (bound 2e-2,
 * TF32's 2^-11 rounding over sums of 32-64 terms: ~1e-3 expected), the path
 * each shape takes asserted (TC at the default shape, and at 1 and 4
 * chunks outside quick mode; the SIMT fallback, with the fp32 bits, at an
 * odd shape), reruns and strides bit-identical, fp32 restored after. The
 * TC variant stages rows by 16-byte copies where rows start on 16 bytes
 * (the contiguous runs) and 4-byte copies else (the padded strides), so
 * the strides' bit-identity compares the two; it forms the chunk's decays
 * by a scan in 32-row segments, so the cases take L = 32 (one segment),
 * L = 64 (two, with a carry: 2 chunks of 64 rows, also in quick mode) and
 * outside quick mode L = 16 (part of one).
 * Case 13: the last-row op (cuda/ssd_last_row_cuda.h) against the CPU
 * float64 reference st_ssd_last_row_* (itself checked against the
 * recurrence by tests/model/test_ssd.c): fresh inputs, x, B, C in one
 * padded xBC row, dx, dB, dC in one padded dxBC row, y, dy, dt, ddt
 * padded, every gap NaN and every output poisoned; y <= 1e-5, gradients
 * <= 1e-4 (dA, dD as increments: they are added to), the padding kept,
 * two runs bit-identical in every output and contiguous rows the same bits
 * as the padded ones; the default shape, H/G > 1 with G > 1, an odd
 * shape at K = 37, and K = 1024 (shared memory past the 48 KiB default).
 * Sizes it cannot take come back as ST_ERR_INPUT.
 * Case 14: the TC scan kernels' compile-time shapes (cuda/ssd_shape.cuh:
 * the scan backward's TC variant and the pair forward instantiated for
 * (Q, P, N) = (32, 32, 64) and (16, 16, 16)) against their runtime-shape
 * code (st_cuda_ssd_set_scan_fixed_shape(0)) in bf16 mode on fresh inputs:
 * y, dx, ddt, dB, dC, dA, dD bit-identical (memcmp), on contiguous rows
 * (16-byte copies) and padded strides (4-byte ones), each within the bf16
 * bound of the float64 recurrence; the default shape (pair forward, TC
 * backward), the tiny one, the default (Q, P, N) over 3 chunks with two
 * groups (the fixed backward with a middle chunk: the states slab and
 * sum(dS_out o S_in); the forward walks), and a shape with none (Q = 16 at
 * P = 32, N = 64: the runtime code both ways, asserted).
 * Case 15: case 13's checks at the edges of the last-row kernels' thread mapping
 * (a block of 8 warps a window, a warp a head with lane l owning rows
 * [l seg, (l+1) seg), seg = ceil(K/32), row x column phases split as
 * 256 / min(width, 256) rows): K = 33 with H = 12 heads (past the warps,
 * lanes without rows), K = 1, K = 100 (4 rows a lane) with P = 40 and
 * N = 96 (two lane rounds), H P = 288 and G N = 272 (past 256 threads),
 * H = P = N = 1 (256 row slots for K = 40); outside quick mode the default
 * shape at 300 windows (x past 16 MiB, the forward's L2 prefetch off)
 * against the reference and, in its first 16 windows, bit for bit against
 * those windows run alone (prefetch on).
 * Case 16: the pair forward as one block a (window, group), B, C and G
 * once for the group's heads (st_cuda_ssd_set_scan_tc_heads(2); under the
 * default batch rule these batches keep the other), against one
 * block a (window, head) in bf16 mode: every output bit for bit on
 * contiguous and padded rows, each within the bf16 bound of the float64
 * recurrence; the default and tiny shapes, two groups, and a runtime shape
 * (P = 24, N = 40, Q = 16) with three groups.
 * Case 17: the quad forward (ssd_scan_quad.cu: in bf16 mode a window of at
 * most 64 rows, K, P, N multiples of 16, as one chunk in the quadratic
 * form, a block a (window, group)), which cases 11, 14 and 16 run without
 * (st_cuda_ssd_set_scan_tc_quad(0): they check the kernels it takes over
 * from): asserted taken, and the pair and heads kernels not; y against the
 * float64 recurrence within the bf16 bound (whole and per chunk) into
 * poisoned outputs, the gaps between y's rows untouched, contiguous rows
 * and padded strides the same bits, two runs too; with the switch off the
 * pair kernel again (the walk where K is not 2Q), within the bound and
 * other bits. The default shape (and under the strong decays), K = 32
 * and 48, H = 4 with G = 2, P = 64 with Dskip NULL, one head a group at
 * K = 16, odd batches; the rule refuses K = 50, K = 128, P = 24, N = 10.
 * At these few windows the batch rule may spread a group's heads over
 * several blocks (case 19 asserts where it must); either way the same bits
 * as with st_cuda_ssd_set_scan_tc_quad_split(1), one block a (window, group).
 * Case 18: in bf16 mode the backward of windows of K <= 64 rows (K, P, N
 * multiples of 16) runs as the quad backward (ssd_scan_quad_backward.cu:
 * the window as one chunk, a block a (window, group), dB and dC summed
 * over the group's heads inside it): asserted taken, and the scan backward
 * not, at the default shape (7 windows) and H=4 G=2 (9), outside quick
 * mode also K=32, K=48 (P=16, N=32, two groups), P=64 (N=32, two groups:
 * two column slices a lane in dD's shares) and strong decays; every
 * output within 2e-2 of the float64 recurrence (dx per (window, head)
 * too), into poisoned outputs, contiguous and padded strides and two runs
 * bit-identical; its switch off, the scan backward's TC variant runs
 * (asserted; other bits, also within 2e-2). The rule's edges (K = 50,
 * K = 128, P = 24 N = 10, staging off) are asserted not taken. Cases 12
 * and 14 turn it off: they check the scan backward's TC variant.
 * Case 19: the quad forward's head slices (st_cuda_ssd_set_scan_tc_quad_split:
 * a block a (window, group, slice of ceil(H/G / n) heads), each forming G
 * itself): forced slice counts and the batch's own choice give the same
 * bits (padded strides; contiguous rows once), asserted as the blocks a
 * (window, group) the kernel runs, each within the bf16 bound of the
 * float64 recurrence (whole and per chunk), no padding written: the
 * default shape at the act step's 128 windows (1, 2, 3, 8 slices), H=6
 * G=2 (3 heads a group: 1, 2, 3), H=12 (unsplit: 3 rounds of 4 heads, the
 * third into the first round's buffer; 5 slices: 4 of 3 heads), P=48
 * (slabs of 16 columns unsplit, of 8 in 2 slices), K=16 with P=64;
 * outside quick mode 600 windows (past 2 blocks an SM: the batch rule
 * keeps one a (window, group)). */
#include "model/ssd.h"

#include <stdint.h>

#include "check/gradcheck.h"
#include "core/error.h"
#include "core/philox.h"
#include "cuda_test.h"

#ifdef ST_HAVE_CUDA
#include "cuda/linear_cuda.h"
#include "cuda/ssd_cuda.h"
#include "cuda/ssd_last_row_cuda.h"

#define FWD_BOUND 1e-5
#define GRAD_BOUND 1e-4

/* The float64 sequential oracle. ssd.h maps the plain names to this
 * translation unit's precision (float), so the _f64 build's entry points
 * are declared here by hand, exactly as ssd.h declares them. */
size_t st_ssd_work_count_f64(int Bsz, int K, int H, int P, int G, int N, int Q);
void st_ssd_forward_sequential_f64(int Bsz, int K, int H, int P, int G, int N, const double *x, int x_stride,
                                   const double *dt, int dt_stride, const double *A, const double *Bm, int B_stride,
                                   const double *Cm, int C_stride, const double *Dskip, double *y, int y_stride);
void st_ssd_backward_sequential_f64(int Bsz, int K, int H, int P, int G, int N, const double *x, int x_stride,
                                    const double *dt, int dt_stride, const double *A, const double *Bm, int B_stride,
                                    const double *Cm, int C_stride, const double *Dskip, const double *dy,
                                    int dy_stride, double *dx, int dx_stride, double *ddt, int ddt_stride, double *dA,
                                    double *dB, int dB_stride, double *dC, int dC_stride, double *dD, double *work);

size_t st_ssd_last_row_work_count_f64(int Bsz, int K, int H);
void st_ssd_last_row_forward_f64(int Bsz, int K, int H, int P, int G, int N, const double *x, int x_stride,
                                 const double *dt, int dt_stride, const double *A, const double *Bm, int B_stride,
                                 const double *Cm, int C_stride, const double *Dskip, double *y, int y_stride);
void st_ssd_last_row_backward_f64(int Bsz, int K, int H, int P, int G, int N, const double *x, int x_stride,
                                  const double *dt, int dt_stride, const double *A, const double *Bm, int B_stride,
                                  const double *Cm, int C_stride, const double *Dskip, const double *dy,
                                  int dy_stride, double *dx, int dx_stride, double *ddt, int ddt_stride, double *dA,
                                  double *dB, int dB_stride, double *dC, int dC_stride, double *dD, double *work);

/* One problem: contiguous host inputs of Bsz windows of K rows, and the
 * starting values of the accumulated gradients dA, dD. */
typedef struct {
    int Bsz, K, H, P, G, N;
    float *x, *dt, *A, *B, *C, *D, *dy, *dA0, *dD0;
} problem;

/* Outputs of a forward + backward, contiguous. */
typedef struct {
    float *y, *dx, *ddt, *dB, *dC, *dA, *dD;
} result;

enum { T_Y, T_DX, T_DDT, T_DB, T_DC, T_DA, T_DD, T_COUNT };
static const char *tensor_names[T_COUNT] = {"y", "dx", "ddt", "dB", "dC", "dA", "dD"};

static long rows_of(const problem *pb) { return (long)pb->Bsz * pb->K; }

/* Elements and width of tensor i. */
static void tensor_shape(const problem *pb, int i, long *rows, int *cols) {
    int widths[T_COUNT] = {pb->H * pb->P, pb->H * pb->P, pb->H, pb->G * pb->N, pb->G * pb->N, pb->H, pb->H};
    *rows = i >= T_DA ? 1 : rows_of(pb);
    *cols = widths[i];
}

static float **tensor_ptr(result *r, int i) {
    float **p[T_COUNT] = {&r->y, &r->dx, &r->ddt, &r->dB, &r->dC, &r->dA, &r->dD};
    return p[i];
}

static float *alloc_f(long n) { return malloc(sizeof(float) * (size_t)(n > 0 ? n : 1)); }

/* dt = u e^v with u log-uniform in [1e-3, 1e-1] (the Mamba2 init) and v in
 * [0, 1), so decays span gentle to strong; A = -exp(U[0, log 16]). */
static problem make_problem(int Bsz, int K, int H, int P, int G, int N, uint64_t seed) {
    problem pb = {Bsz, K, H, P, G, N, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    long R = (long)Bsz * K;
    pb.x = alloc_f(R * H * P), pb.dy = alloc_f(R * H * P);
    pb.B = alloc_f(R * G * N), pb.C = alloc_f(R * G * N);
    pb.dt = alloc_f(R * H), pb.A = alloc_f(H), pb.D = alloc_f(H), pb.dA0 = alloc_f(H), pb.dD0 = alloc_f(H);
    st_gc_randnf(pb.x, R * H * P, 1.0f, seed, 1);
    st_gc_randnf(pb.dy, R * H * P, 1.0f, seed, 2);
    st_gc_randnf(pb.B, R * G * N, 1.0f, seed, 3);
    st_gc_randnf(pb.C, R * G * N, 1.0f, seed, 4);
    st_gc_randnf(pb.D, H, 1.0f, seed, 5);
    st_gc_randnf(pb.dA0, H, 1.0f, seed, 6);
    st_gc_randnf(pb.dD0, H, 1.0f, seed, 7);
    st_rng rng = st_rng_make(seed, ST_STREAM_TEST);
    for (long i = 0; i < R * H; i++) {
        double u = exp(log(1e-3) + (log(1e-1) - log(1e-3)) * st_rng_uniform(&rng));
        pb.dt[i] = (float)(u * exp(st_rng_uniform(&rng)));
    }
    for (int h = 0; h < H; h++)
        pb.A[h] = (float)-exp(log(16.0) * st_rng_uniform(&rng));
    return pb;
}

static void free_problem(problem *pb) {
    free(pb->x), free(pb->dy), free(pb->B), free(pb->C), free(pb->dt), free(pb->A), free(pb->D);
    free(pb->dA0), free(pb->dD0);
}

static result make_result(const problem *pb) {
    result r;
    for (int i = 0; i < T_COUNT; i++) {
        long rows;
        int cols;
        tensor_shape(pb, i, &rows, &cols);
        *tensor_ptr(&r, i) = alloc_f(rows * cols);
    }
    memcpy(r.dA, pb->dA0, sizeof(float) * (size_t)pb->H);
    memcpy(r.dD, pb->dD0, sizeof(float) * (size_t)pb->H);
    return r;
}

static void free_result(result *r) {
    for (int i = 0; i < T_COUNT; i++)
        free(*tensor_ptr(r, i));
}

/* ---- CPU references ------------------------------------------------------ */

static void cpu_float_chunked(const problem *pb, int Q, result *r) {
    int HP = pb->H * pb->P, GN = pb->G * pb->N;
    float *work = alloc_f((long)st_ssd_work_count(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q));
    st_ssd_forward_chunked(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q, pb->x, HP, pb->dt, pb->H, pb->A, pb->B, GN,
                           pb->C, GN, pb->D, r->y, HP, work);
    st_ssd_backward_chunked(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q, pb->x, HP, pb->dt, pb->H, pb->A, pb->B, GN,
                            pb->C, GN, pb->D, pb->dy, HP, r->dx, HP, r->ddt, pb->H, r->dA, r->dB, GN, r->dC, GN, r->dD,
                            work);
    free(work);
}

static double *to_d(const float *f, long n) {
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++)
        d[i] = f[i];
    return d;
}

static double *alloc_d(long n) { return malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)); }

static void to_f(float *f, const double *d, long n) {
    for (long i = 0; i < n; i++)
        f[i] = (float)d[i];
}

/* The float64 sequential recurrence on the same (float) inputs; results
 * rounded to float once (6e-8 relative, far below the bounds). */
static void cpu_double_sequential(const problem *pb, result *r) {
    long R = rows_of(pb);
    int H = pb->H, HP = H * pb->P, GN = pb->G * pb->N;
    double *x = to_d(pb->x, R * HP), *dt = to_d(pb->dt, R * H), *A = to_d(pb->A, H), *B = to_d(pb->B, R * GN);
    double *C = to_d(pb->C, R * GN), *D = pb->D ? to_d(pb->D, H) : NULL, *dy = to_d(pb->dy, R * HP);
    double *y = alloc_d(R * HP), *dx = alloc_d(R * HP), *ddt = alloc_d(R * H);
    double *dB = alloc_d(R * GN), *dC = alloc_d(R * GN), *dA = to_d(pb->dA0, H), *dD = to_d(pb->dD0, H);
    double *work = malloc(sizeof(double) * st_ssd_work_count_f64(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, 1));
    st_ssd_forward_sequential_f64(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, x, HP, dt, H, A, B, GN, C, GN, D, y, HP);
    st_ssd_backward_sequential_f64(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, x, HP, dt, H, A, B, GN, C, GN, D, dy, HP, dx,
                                   HP, ddt, H, dA, dB, GN, dC, GN, dD, work);
    to_f(r->y, y, R * HP), to_f(r->dx, dx, R * HP), to_f(r->ddt, ddt, R * H);
    to_f(r->dB, dB, R * GN), to_f(r->dC, dC, R * GN), to_f(r->dA, dA, H), to_f(r->dD, dD, H);
    free(x), free(dt), free(A), free(B), free(C), free(D), free(dy), free(y), free(dx), free(ddt);
    free(dB), free(dC), free(dA), free(dD), free(work);
}

/* ---- the GPU run ----------------------------------------------------------- */

/* rows x width of src into dst with row stride `stride` (dst prefilled). */
static void put_rows(float *dst, int stride, const float *src, long rows, int width) {
    for (long r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * stride, src + (size_t)r * width, sizeof(float) * (size_t)width);
}

static void get_rows(float *dst, const float *src, int stride, long rows, int width) {
    for (long r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * width, src + (size_t)r * stride, sizeof(float) * (size_t)width);
}

static float *nan_buffer(long n) {
    float *p = alloc_f(n);
    for (long i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

/* 1 when columns [from, stride) of every row still hold the poison bits. */
static int padding_untouched(const float *buf, long rows, int from, int stride) {
    for (long r = 0; r < rows; r++)
        for (int i = from; i < stride; i++) {
            uint32_t bits;
            memcpy(&bits, buf + (size_t)r * stride + i, sizeof bits);
            if (bits != 0xFFFFFFFFu) return 0;
        }
    return 1;
}

/* The row strides of one GPU run: contiguous (each buffer its own width),
 * or padded: x, B, C in one xBC row of W + 7, dx, dB, dC in one dxBC row of
 * W + 9, dt, dy, y, ddt each wider than their width, gaps NaN. */
typedef struct {
    int xbc_s, dt_s, dy_s, y_s, dxbc_s, ddt_s;
} strides;

static strides strides_of(const problem *pb, int padded) {
    int HP = pb->H * pb->P, W = HP + 2 * pb->G * pb->N;
    strides s = {W, pb->H, HP, HP, W, pb->H};
    if (padded) s = (strides){W + 7, pb->H + 3, HP + 5, HP + 3, W + 9, pb->H + 2};
    return s;
}

/* Forward + backward on the device; inputs and outputs laid out as `padded`
 * says (x, B, C always share the xBC row: at padded == 0 its stride is just
 * W, which is still not any one tensor's width). With dy_last (Bsz rows of
 * HP), the last-row op (case 13) instead of the chunked one: y and dy one
 * row a window. Returns 0 on success; *pad_ok says whether output padding
 * kept its poison. */
static int gpu_run_op(const problem *pb, int Q, int padded, const float *dy_last, result *r, int *pad_ok) {
    long R = rows_of(pb), Ry = dy_last ? pb->Bsz : R; /* rows of y and dy */
    int H = pb->H, HP = H * pb->P, GN = pb->G * pb->N, W = HP + 2 * GN;
    strides s = strides_of(pb, padded);
    float *h_xbc = nan_buffer(R * s.xbc_s), *h_dt = nan_buffer(R * s.dt_s), *h_dy = nan_buffer(Ry * s.dy_s);
    put_rows(h_xbc, s.xbc_s, pb->x, R, HP);
    put_rows(h_xbc + HP, s.xbc_s, pb->B, R, GN);
    put_rows(h_xbc + HP + GN, s.xbc_s, pb->C, R, GN);
    put_rows(h_dt, s.dt_s, pb->dt, R, H);
    put_rows(h_dy, s.dy_s, dy_last ? dy_last : pb->dy, Ry, HP);
    size_t nwork = dy_last ? st_cuda_ssd_last_row_work_count(pb->Bsz, pb->K, H)
                           : st_cuda_ssd_work_count(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, Q);
    float *xbc = dev_upload(h_xbc, (size_t)(R * s.xbc_s)), *dt = dev_upload(h_dt, (size_t)(R * s.dt_s));
    float *dy = dev_upload(h_dy, (size_t)(Ry * s.dy_s)), *A = dev_upload(pb->A, (size_t)H);
    float *D = pb->D ? dev_upload(pb->D, (size_t)H) : NULL; /* pb->D NULL: no skip */
    float *dA = dev_upload(pb->dA0, (size_t)H), *dD = dev_upload(pb->dD0, (size_t)H);
    float *y = dev_poisoned((size_t)(Ry * s.y_s)), *dxbc = dev_poisoned((size_t)(R * s.dxbc_s));
    float *ddt = dev_poisoned((size_t)(R * s.ddt_s)), *work = dev_poisoned(nwork);
    int rc = ST_OK;
    if (!xbc || !dt || !dy || !A || (pb->D && !D) || !dA || !dD || !y || !dxbc || !ddt || !work) rc = ST_ERR_DEVICE;
    if (rc == ST_OK && dy_last)
        rc = st_cuda_ssd_last_row_forward(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, xbc, s.xbc_s, dt, s.dt_s, A,
                                          xbc + HP, s.xbc_s, xbc + HP + GN, s.xbc_s, D, y, s.y_s, NULL);
    else if (rc == ST_OK)
        rc = st_cuda_ssd_forward_chunked(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, Q, xbc, s.xbc_s, dt, s.dt_s, A,
                                         xbc + HP, s.xbc_s, xbc + HP + GN, s.xbc_s, D, y, s.y_s, work, NULL);
    /* Poison the work again: the backward must not rely on the forward's. */
    if (rc == ST_OK) cudaMemset(work, 0xFF, sizeof(float) * (nwork ? nwork : 1));
    if (rc == ST_OK && dy_last)
        rc = st_cuda_ssd_last_row_backward(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, xbc, s.xbc_s, dt, s.dt_s, A,
                                           xbc + HP, s.xbc_s, xbc + HP + GN, s.xbc_s, D, dy, s.dy_s, dxbc, s.dxbc_s,
                                           ddt, s.ddt_s, dA, dxbc + HP, s.dxbc_s, dxbc + HP + GN, s.dxbc_s, dD, work,
                                           NULL);
    else if (rc == ST_OK)
        rc = st_cuda_ssd_backward_chunked(pb->Bsz, pb->K, H, pb->P, pb->G, pb->N, Q, xbc, s.xbc_s, dt, s.dt_s, A,
                                          xbc + HP, s.xbc_s, xbc + HP + GN, s.xbc_s, D, dy, s.dy_s, dxbc, s.dxbc_s, ddt,
                                          s.ddt_s, dA, dxbc + HP, s.dxbc_s, dxbc + HP + GN, s.dxbc_s, dD, work, NULL);
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != ST_OK) fprintf(stderr, "GPU SSD call failed: %s\n", st_last_error());
    if (e != cudaSuccess) fprintf(stderr, "GPU SSD kernels failed: %s\n", cudaGetErrorString(e)), rc = ST_ERR_DEVICE;
    if (rc == ST_OK) {
        float *h_y = alloc_f(Ry * s.y_s), *h_dxbc = alloc_f(R * s.dxbc_s), *h_ddt = alloc_f(R * s.ddt_s);
        dev_download(h_y, y, (size_t)(Ry * s.y_s));
        dev_download(h_dxbc, dxbc, (size_t)(R * s.dxbc_s));
        dev_download(h_ddt, ddt, (size_t)(R * s.ddt_s));
        dev_download(r->dA, dA, (size_t)H);
        dev_download(r->dD, dD, (size_t)H);
        get_rows(r->y, h_y, s.y_s, Ry, HP);
        get_rows(r->dx, h_dxbc, s.dxbc_s, R, HP);
        get_rows(r->dB, h_dxbc + HP, s.dxbc_s, R, GN);
        get_rows(r->dC, h_dxbc + HP + GN, s.dxbc_s, R, GN);
        get_rows(r->ddt, h_ddt, s.ddt_s, R, H);
        *pad_ok = padding_untouched(h_y, Ry, HP, s.y_s) && padding_untouched(h_dxbc, R, W, s.dxbc_s) &&
                  padding_untouched(h_ddt, R, H, s.ddt_s);
        free(h_y), free(h_dxbc), free(h_ddt);
    }
    dev_free(xbc), dev_free(dt), dev_free(dy), dev_free(A), dev_free(D), dev_free(dA), dev_free(dD);
    dev_free(y), dev_free(dxbc), dev_free(ddt), dev_free(work);
    free(h_xbc), free(h_dt), free(h_dy);
    return rc;
}

static int gpu_run(const problem *pb, int Q, int padded, result *r, int *pad_ok) {
    return gpu_run_op(pb, Q, padded, NULL, r, pad_ok);
}

/* ---- comparisons ----------------------------------------------------------- */

/* rel err of tensor i; for the accumulated dA, dD, of the increments. Sets
 * *where to the element with the largest difference. */
static double tensor_err(const problem *pb, int i, const result *g, const result *ref, long *where, double *gv,
                         double *rv) {
    long rows;
    int cols;
    tensor_shape(pb, i, &rows, &cols);
    float *a = *tensor_ptr((result *)g, i), *b = *tensor_ptr((result *)ref, i);
    const float *base = i == T_DA ? pb->dA0 : i == T_DD ? pb->dD0 : NULL;
    long n = rows * cols;
    float *ga = alloc_f(n), *rb = alloc_f(n);
    double worst = -1;
    *where = 0;
    for (long k = 0; k < n; k++) {
        ga[k] = base ? a[k] - base[k] : a[k];
        rb[k] = base ? b[k] - base[k] : b[k];
        double d = fabs((double)ga[k] - (double)rb[k]);
        if (!(d <= worst)) worst = d, *where = k; /* NaN counts as worst */
    }
    *gv = ga[*where], *rv = rb[*where];
    double err = rel_err_rows(ga, (int)n, rb, (int)n, 1, (int)n);
    free(ga), free(rb);
    return err;
}

/* Checks every tensor of g against ref (named ref_name) for one case; keeps
 * the worst errors. Failures name the case, the tensor and its worst element. */
static void compare(const char *case_name, const char *ref_name, const problem *pb, const result *g, const result *ref,
                    double worst[T_COUNT]) {
    for (int i = 0; i < T_COUNT; i++) {
        long at;
        double gv, rv, bound = i == T_Y ? FWD_BOUND : GRAD_BOUND;
        double err = tensor_err(pb, i, g, ref, &at, &gv, &rv);
        long rows;
        int cols;
        tensor_shape(pb, i, &rows, &cols);
        CHECK(err <= bound, "%s: %s vs %s rel err %.3e > %.0e (worst element row %ld col %ld: gpu %.7g ref %.7g)",
              case_name, tensor_names[i], ref_name, err, bound, at / cols, at % cols, gv, rv);
        if (!(err <= worst[i])) worst[i] = err;
    }
}

static int same_result(const problem *pb, const result *a, const result *b) {
    for (int i = 0; i < T_COUNT; i++) {
        long rows;
        int cols;
        tensor_shape(pb, i, &rows, &cols);
        if (memcmp(*tensor_ptr((result *)a, i), *tensor_ptr((result *)b, i), sizeof(float) * (size_t)(rows * cols)))
            return 0;
    }
    return 1;
}

typedef struct {
    double vs_float[T_COUNT], vs_double[T_COUNT];
} worst_errs;

/* One (problem, Q): GPU contiguous, GPU padded twice; against the CPU float
 * chunked op and the given float64 oracle result. */
static void run_case(const problem *pb, int Q, const result *oracle, worst_errs *w) {
    char name[160];
    snprintf(name, sizeof name, "Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d", pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q);
    result cpu = make_result(pb), g0 = make_result(pb), g1 = make_result(pb), g2 = make_result(pb);
    cpu_float_chunked(pb, Q, &cpu);
    int pad0 = 0, pad1 = 0, pad2 = 0;
    int ok = gpu_run(pb, Q, 0, &g0, &pad0) == ST_OK && gpu_run(pb, Q, 1, &g1, &pad1) == ST_OK &&
             gpu_run(pb, Q, 1, &g2, &pad2) == ST_OK;
    CHECK(ok, "%s: a GPU call failed (message above)", name);
    if (ok) {
        compare(name, "CPU float chunked", pb, &g1, &cpu, w->vs_float);
        compare(name, "CPU float64 sequential", pb, &g1, oracle, w->vs_double);
        CHECK(pad0 && pad1 && pad2, "%s: the GPU wrote into output padding", name);
        CHECK(same_result(pb, &g0, &g1), "%s: padded xBC strides give other bits than contiguous rows", name);
        CHECK(same_result(pb, &g1, &g2), "%s: two GPU runs differ (not deterministic)", name);
    }
    free_result(&cpu), free_result(&g0), free_result(&g1), free_result(&g2);
}

static void print_worst(const char *what, const double *w, const char *ref_name) {
    for (int i = 0; i < T_COUNT; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s %s vs %s", what, tensor_names[i], ref_name);
        CHECK_PARITY(name, w[i], i == T_Y ? FWD_BOUND : GRAD_BOUND);
    }
}

/* Q in {8, 16, 32, 64} x K in {32, 50, 64, 7} for one head/group shape
 * (quick: the middle two of each). */
static void test_grid(int H, int P, int G, int N, uint64_t seed) {
    static const int Qs[] = {8, 16, 32, 64}, Ks[] = {32, 50, 64, 7};
    const int lo = test_quick() ? 1 : 0, hi = test_quick() ? 3 : 4;
    worst_errs w = {{0}, {0}};
    for (int ki = lo; ki < hi; ki++) {
        problem pb = make_problem(2, Ks[ki], H, P, G, N, seed + (uint64_t)ki);
        result oracle = make_result(&pb);
        cpu_double_sequential(&pb, &oracle);
        for (int qi = lo; qi < hi; qi++)
            run_case(&pb, Qs[qi], &oracle, &w);
        free_result(&oracle);
        free_problem(&pb);
    }
    char what[96];
    snprintf(what, sizeof what, "H=%d P=%d G=%d N=%d grid", H, P, G, N);
    printf("%s (Q in {%s} x K in {%s}, worst over the grid):\n", what, test_quick() ? "16,32" : "8,16,32,64",
           test_quick() ? "50,64" : "32,50,64,7");
    print_worst("grid", w.vs_float, "CPU f32");
    print_worst("grid", w.vs_double, "CPU f64 seq");
}

/* One larger problem: many blocks (and the default model's shape). */
static void test_one(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, uint64_t seed) {
    worst_errs w = {{0}, {0}};
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    result oracle = make_result(&pb);
    cpu_double_sequential(&pb, &oracle);
    run_case(&pb, Q, &oracle, &w);
    printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d):\n", label, Bsz, K, H, P, G, N, Q);
    print_worst(label, w.vs_float, "CPU f32");
    print_worst(label, w.vs_double, "CPU f64 seq");
    free_result(&oracle);
    free_problem(&pb);
}

static int all_finite(const float *v, long n) {
    for (long i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* dt = 0.5, A = -16: a = -8 per step, exp(-512) over a chunk of 64 and
 * exp(-2048) over the window, which overflows at once if any exponent is a
 * difference of cumulative sums taken the wrong way round. */
static void test_long_window(int Q) {
    problem pb = make_problem(2, 256, 4, 8, 1, 8, 2024 + (uint64_t)Q);
    long R = rows_of(&pb);
    for (long i = 0; i < R * pb.H; i++)
        pb.dt[i] = 0.5f;
    for (int h = 0; h < pb.H; h++)
        pb.A[h] = -16.0f;
    result oracle = make_result(&pb), g = make_result(&pb);
    cpu_double_sequential(&pb, &oracle);
    int pad = 0, ok = gpu_run(&pb, Q, 1, &g, &pad) == ST_OK;
    CHECK(ok, "long window Q=%d: a GPU call failed (message above)", Q);
    if (ok) {
        int finite = 1;
        for (int i = 0; i < T_COUNT; i++) {
            long rows;
            int cols;
            tensor_shape(&pb, i, &rows, &cols);
            int f = all_finite(*tensor_ptr(&g, i), rows * cols);
            CHECK(f, "long window K=256 Q=%d dt=0.5 A=-16: non-finite values in %s", Q, tensor_names[i]);
            finite &= f;
        }
        worst_errs w = {{0}, {0}};
        char name[64];
        snprintf(name, sizeof name, "long window K=256 Q=%d", Q);
        compare(name, "CPU float64 sequential", &pb, &g, &oracle, w.vs_double);
        double worst = 0;
        for (int i = 0; i < T_COUNT; i++)
            worst = fmax(worst, w.vs_double[i]);
        printf("long window K=256 Q=%d dt=0.5 A=-16: %s, worst rel err vs f64 sequential %.2e\n", Q,
               finite ? "finite" : "NOT FINITE", worst);
    }
    free_result(&oracle), free_result(&g), free_problem(&pb);
}

/* The scan forward (one kernel a (b, h), ssd_scan.cu) against the
 * chunk-parallel kernels on the same inputs: they sum in the same order and
 * round the state where the other rounds it, so y agrees to float rounding
 * (the bound leaves room only for a different contraction into FMAs). */
static void test_scan_vs_chunked(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    result scan = make_result(&pb), chunked = make_result(&pb);
    int pad_s = 0, pad_c = 0, ok = gpu_run(&pb, Q, 1, &scan, &pad_s) == ST_OK;
    st_cuda_ssd_set_scan(0);
    ok = ok && gpu_run(&pb, Q, 1, &chunked, &pad_c) == ST_OK;
    st_cuda_ssd_set_scan(1);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        long where;
        double gv, rv, err = tensor_err(&pb, T_Y, &scan, &chunked, &where, &gv, &rv);
        printf("%s: scan vs chunk-parallel forward, y rel err %.2e\n", label, err);
        CHECK(err <= 1e-6,
              "%s: the scan forward's y differs from the chunk-parallel one by %.2e (element %ld: %.9g vs %.9g)", label,
              err, where, gv, rv);
        CHECK(pad_s && pad_c, "%s: a forward wrote into output padding", label);
    }
    free_result(&scan), free_result(&chunked), free_problem(&pb);
}

/* The scan backward (one kernel a (b, h), ssd_scan_backward.cu) against the
 * chunk-parallel summary, state pass and chunk_backward on the same inputs:
 * the same step code, sums in the same order and states rounded where the
 * other rounds them, so every gradient should keep its bits (the bound
 * leaves room only for a different contraction into FMAs). */
static void test_scan_bwd_vs_chunked(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q,
                                     uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    result scan = make_result(&pb), chunked = make_result(&pb);
    int is_scan = st_cuda_ssd_backward_is_scan(Bsz, K, H, P, G, N, Q);
    CHECK(is_scan, "%s: the scan backward does not take this shape (the comparison would be vacuous)", label);
    int pad_s = 0, pad_c = 0, ok = gpu_run(&pb, Q, 1, &scan, &pad_s) == ST_OK;
    st_cuda_ssd_set_scan_backward(0);
    CHECK(!st_cuda_ssd_backward_is_scan(Bsz, K, H, P, G, N, Q), "%s: st_cuda_ssd_set_scan_backward(0) ignored", label);
    ok = ok && gpu_run(&pb, Q, 1, &chunked, &pad_c) == ST_OK;
    st_cuda_ssd_set_scan_backward(1);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        printf("%s: scan vs chunk-parallel backward (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d, %d chunks):\n", label, Bsz,
               K, H, P, G, N, Q, (K + Q - 1) / Q);
        for (int i = T_DX; i < T_COUNT; i++) {
            long where, rows;
            int cols;
            double gv, rv, err = tensor_err(&pb, i, &scan, &chunked, &where, &gv, &rv);
            tensor_shape(&pb, i, &rows, &cols);
            int same = !memcmp(*tensor_ptr(&scan, i), *tensor_ptr(&chunked, i), sizeof(float) * (size_t)(rows * cols));
            printf("  %-4s rel diff %.2e%s\n", tensor_names[i], err, same ? " (bit-identical)" : "");
            CHECK(err <= 1e-6,
                  "%s: the scan backward's %s differs from the chunk-parallel one by %.2e (row %ld col %ld: %.9g vs "
                  "%.9g)",
                  label, tensor_names[i], err, where / cols, where % cols, gv, rv);
        }
        CHECK(pad_s && pad_c, "%s: a backward wrote into output padding", label);
    }
    free_result(&scan), free_result(&chunked), free_problem(&pb);
}

/* The largest of the per-(window, head, chunk) relative errors of y, so
 * that one wrong tile cannot hide in the norm over the whole tensor. */
static double worst_chunk_err(const problem *pb, int Q, const float *y, const float *ref) {
    const int HP = pb->H * pb->P;
    double worst = 0;
    for (int b = 0; b < pb->Bsz; b++)
        for (int h = 0; h < pb->H; h++)
            for (int t0 = 0; t0 < pb->K; t0 += Q) {
                double d = 0, s = 0;
                for (int t = t0; t < t0 + Q && t < pb->K; t++)
                    for (int p = 0; p < pb->P; p++) {
                        size_t i = ((size_t)b * pb->K + t) * HP + (size_t)h * pb->P + p;
                        double e = (double)y[i] - ref[i];
                        d += e * e, s += (double)ref[i] * ref[i];
                    }
                double err = s > 0 ? sqrt(d / s) : sqrt(d);
                if (!(err <= worst)) worst = err; /* NaN counts as worst */
            }
    return worst;
}

#define TC_BOUND 2e-2 /* bf16 mode's bound (issue 6); TF32 rounding gives ~1e-3 */

/* Where the pair kernel ran (bf16 mode, two full chunks): the walk over the
 * same inputs (st_cuda_ssd_set_scan_tc_pair(0)) as a second TF32 answer.
 * Both within TC_BOUND of the float64 recurrence (whole and per chunk) and
 * of each other; chunk 0's rows bit-identical (the pair kernel forms them
 * with the walk's sums in the walk's order: a wrong M0 tile, D x or copy
 * shows here first), chunk 1's not all unless strong (its state term is
 * rounded otherwise: else the walk did not run). Leaves the pair kernel on and the
 * precision in bf16 mode. */
static void test_scan_tc_pair(const problem *pb, const char *label, int Q, int strong, const result *tc,
                              const result *oracle) {
    result walk = make_result(pb);
    int pad_w = 0;
    st_cuda_ssd_set_scan_tc_pair(0);
    const int off = st_cuda_ssd_forward_is_scan_tc_pair(pb->Bsz, pb->K, pb->H, pb->P, pb->G, pb->N, Q);
    const int ok = gpu_run(pb, Q, 1, &walk, &pad_w) == ST_OK;
    st_cuda_ssd_set_scan_tc_pair(1);
    CHECK(!off, "%s: st_cuda_ssd_set_scan_tc_pair(0) ignored", label);
    CHECK(ok, "%s: the walk's GPU call failed (message above)", label);
    if (ok) {
        long where;
        double gv, rv;
        const double w64 = tensor_err(pb, T_Y, &walk, oracle, &where, &gv, &rv);
        const double pw = tensor_err(pb, T_Y, tc, &walk, &where, &gv, &rv);
        const double cw = worst_chunk_err(pb, Q, walk.y, oracle->y);
        const size_t HP = (size_t)pb->H * (size_t)pb->P, row_bytes = sizeof(float) * (size_t)Q * HP;
        int c0_same = 1, c1_same = 1;
        for (int b = 0; b < pb->Bsz; b++) {
            const size_t at = (size_t)b * (size_t)pb->K * HP;
            c0_same &= !memcmp(tc->y + at, walk.y + at, row_bytes);
            c1_same &= !memcmp(tc->y + at + (size_t)Q * HP, walk.y + at + (size_t)Q * HP, row_bytes);
        }
        printf("  pair kernel vs the walk: y rel err %.2e (walk vs CPU f64 %.2e, worst chunk %.2e); chunk 0 rows "
               "%s, chunk 1 rows %s\n",
               pw, w64, cw, c0_same ? "bit-identical" : "DIFFER", c1_same ? "bit-identical" : "differ");
        CHECK(w64 <= TC_BOUND && cw <= TC_BOUND, "%s: the walk vs CPU f64: rel err %.2e, worst chunk %.2e > %.0e",
              label, w64, cw, TC_BOUND);
        CHECK(pw <= TC_BOUND, "%s: the pair kernel vs the walk: rel err %.2e > %.0e", label, pw, TC_BOUND);
        CHECK(c0_same, "%s: the pair kernel's chunk 0 rows are not the walk's bits", label);
        if (!strong) /* (strong decays leave chunk 1 little of its state term to round otherwise) */
            CHECK(!c1_same, "%s: the pair kernel's chunk 1 rows are the walk's bits (did the walk run?)", label);
        CHECK(pad_w, "%s: the walk wrote into output padding", label);
    }
    free_result(&walk);
}

/* make_problem's, with dt = 0.5 and A = -16 everywhere when strong (the
 * TC cases' strong decays: far past float's range). */
static problem make_problem_strong(int Bsz, int K, int H, int P, int G, int N, int strong, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    for (long i = 0; strong && i < rows_of(&pb) * H; i++)
        pb.dt[i] = 0.5f;
    for (int h = 0; strong && h < H; h++)
        pb.A[h] = -16.0f;
    return pb;
}

/* The tensor-core scan forward (ssd_scan_tc.cu: bf16 matrix-product mode,
 * TF32 products, float state) at one shape: whether it is taken (expect_tc:
 * 1 or 0 as the rule says, -1 where it depends on the device's shared
 * memory), y against the CPU float64 recurrence and the fp32 scan forward
 * within TC_BOUND, over the whole tensor and per (window, head, chunk);
 * it must differ from the fp32 bits where taken (else the comparison is
 * vacuous); contiguous rows (float4 staging and stores) and padded xBC
 * strides (scalar ones) give the same bits, two runs too, and the output
 * padding keeps its poison; st_cuda_ssd_set_scan_tc(0) in bf16 mode gives
 * the fp32 kernel's bits. fp32 mode is restored afterwards. strong: dt =
 * 0.5, A = -16 (a = -8 a row: decays to exp(-8) inside a chunk, past
 * float's range, so an exponent taken the wrong way round is infinite). */
static void test_scan_tc_pair(const problem *pb, const char *label, int Q, int strong, const result *tc,
                              const result *oracle);

static void test_scan_tc(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, int expect_tc,
                         int strong, uint64_t seed) {
    problem pb = make_problem_strong(Bsz, K, H, P, G, N, strong, seed);
    result oracle = make_result(&pb), f32 = make_result(&pb), tc0 = make_result(&pb), tc1 = make_result(&pb);
    result tc2 = make_result(&pb), off = make_result(&pb);
    cpu_double_sequential(&pb, &oracle);
    CHECK(!st_cuda_ssd_forward_is_scan_tc(Bsz, K, H, P, G, N, Q), "%s: fp32 mode would take the TF32 path", label);
    int pad_f = 0, pad0 = 0, pad1 = 0, pad2 = 0, pad_off = 0;
    int ok = gpu_run(&pb, Q, 1, &f32, &pad_f) == ST_OK;
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const int is_tc = st_cuda_ssd_forward_is_scan_tc(Bsz, K, H, P, G, N, Q);
    const int is_pair = st_cuda_ssd_forward_is_scan_tc_pair(Bsz, K, H, P, G, N, Q);
    const int Qc = Q < K ? Q : K; /* clamped as the op does */
    ok = ok && gpu_run(&pb, Q, 0, &tc0, &pad0) == ST_OK && gpu_run(&pb, Q, 1, &tc1, &pad1) == ST_OK &&
         gpu_run(&pb, Q, 1, &tc2, &pad2) == ST_OK;
    if (ok && is_pair) test_scan_tc_pair(&pb, label, Q, strong, &tc1, &oracle);
    st_cuda_ssd_set_scan_tc(0);
    CHECK(!st_cuda_ssd_forward_is_scan_tc(Bsz, K, H, P, G, N, Q), "%s: st_cuda_ssd_set_scan_tc(0) ignored", label);
    ok = ok && gpu_run(&pb, Q, 1, &off, &pad_off) == ST_OK;
    st_cuda_ssd_set_scan_tc(1);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    CHECK(st_cuda_matmul_precision() == ST_MATMUL_FP32, "%s: fp32 not restored", label);
    if (expect_tc >= 0)
        CHECK(is_tc == expect_tc, "%s: the TF32 scan forward is %s (the rule says %s)", label,
              is_tc ? "taken" : "not taken", expect_tc ? "taken" : "not taken");
    /* the pair kernel's rule (ssd_scan_tc.cu): two full chunks, Q a
     * multiple of 16, its shared memory within the device's limit (all the
     * shapes here but the large preset's, which may or may not fit) */
    const int pair_rule = is_tc && K == 2 * Qc && Qc % 16 == 0;
    if (expect_tc >= 0)
        CHECK(is_pair == pair_rule, "%s: the TF32 pair kernel is %s (the rule says %s)", label,
              is_pair ? "taken" : "not taken", pair_rule ? "taken" : "not taken");
    else
        CHECK(!is_pair || pair_rule, "%s: the TF32 pair kernel taken outside its rule", label);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        long where;
        double gv, rv;
        const double e64 = tensor_err(&pb, T_Y, &tc1, &oracle, &where, &gv, &rv);
        const double e32 = tensor_err(&pb, T_Y, &tc1, &f32, &where, &gv, &rv);
        const double c64 = worst_chunk_err(&pb, Q, tc1.y, oracle.y), c32 = worst_chunk_err(&pb, Q, tc1.y, f32.y);
        const double f64 = tensor_err(&pb, T_Y, &f32, &oracle, &where, &gv, &rv);
        printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d), bf16 mode, %s: y rel err %.2e vs CPU f64 seq (worst "
               "chunk %.2e), %.2e vs the fp32 scan (worst chunk %.2e; fp32 vs f64 %.2e)\n",
               label, Bsz, K, H, P, G, N, Q,
               is_pair ? "TF32 pair kernel" : (is_tc ? "TF32 tensor-core scan" : "fp32 scan (not taken)"), e64, c64,
               e32, c32, f64);
        CHECK(e64 <= TC_BOUND && c64 <= TC_BOUND, "%s: TF32 y vs CPU f64: rel err %.2e, worst chunk %.2e > %.0e", label,
              e64, c64, TC_BOUND);
        CHECK(e32 <= TC_BOUND && c32 <= TC_BOUND, "%s: TF32 y vs the fp32 scan: rel err %.2e, worst chunk %.2e > %.0e",
              label, e32, c32, TC_BOUND);
        if (is_tc) CHECK(e32 > 0, "%s: bf16 mode gave the fp32 kernel's bits (the TF32 path did not run)", label);
        CHECK(pad_f && pad0 && pad1 && pad2 && pad_off, "%s: a forward wrote into output padding", label);
        const size_t ybytes = sizeof(float) * (size_t)rows_of(&pb) * (size_t)(H * P);
        CHECK(!memcmp(tc0.y, tc1.y, ybytes), "%s: TF32 y: contiguous rows and padded strides give other bits", label);
        CHECK(!memcmp(tc1.y, tc2.y, ybytes), "%s: TF32 y: two runs differ (not deterministic)", label);
        CHECK(!memcmp(off.y, f32.y, ybytes), "%s: bf16 mode with the TF32 path off is not the fp32 kernel", label);
    }
    free_result(&oracle), free_result(&f32), free_result(&tc0), free_result(&tc1), free_result(&tc2);
    free_result(&off), free_problem(&pb);
}

/* The bf16 mode's scan backward (TF32 tensor-core products where the shape
 * allows: expect_tc says whether this one should) against the fp32 SIMT
 * scan backward on the same inputs and against the CPU: every gradient
 * within TC_GRAD_BOUND, printed. The TC variant must change the bits (else
 * it did not run); the fallback must keep them (it is the SIMT kernel).
 * The forward's y is held to the same bound (bf16 mode may run it in TF32
 * too). Leaves the precision at fp32. */
#define TC_GRAD_BOUND 2e-2
static void test_scan_bwd_tc(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, int expect_tc,
                             uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    result f32 = make_result(&pb), tc0 = make_result(&pb), tc1 = make_result(&pb), tc2 = make_result(&pb);
    result cpu = make_result(&pb), oracle = make_result(&pb);
    cpu_float_chunked(&pb, Q, &cpu);
    cpu_double_sequential(&pb, &oracle);
    CHECK(st_cuda_ssd_backward_is_scan(Bsz, K, H, P, G, N, Q), "%s: the scan backward does not take this shape", label);
    CHECK(!st_cuda_ssd_backward_is_scan_tc(Bsz, K, H, P, G, N, Q), "%s: fp32 mode would run the TC variant", label);
    int pads[4] = {0, 0, 0, 0}, ok = gpu_run(&pb, Q, 1, &f32, &pads[0]) == ST_OK;
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const int is_tc = st_cuda_ssd_backward_is_scan_tc(Bsz, K, H, P, G, N, Q);
    st_cuda_ssd_set_scan_backward_tc(0);
    const int tc_off = st_cuda_ssd_backward_is_scan_tc(Bsz, K, H, P, G, N, Q);
    st_cuda_ssd_set_scan_backward_tc(1);
    ok = ok && gpu_run(&pb, Q, 1, &tc0, &pads[1]) == ST_OK && gpu_run(&pb, Q, 1, &tc1, &pads[2]) == ST_OK &&
         gpu_run(&pb, Q, 0, &tc2, &pads[3]) == ST_OK;
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    CHECK(st_cuda_matmul_precision() == ST_MATMUL_FP32, "%s: fp32 not restored after the bf16 runs", label);
    CHECK(is_tc == expect_tc, "%s: bf16 mode %s the TC variant, expected %s", label, is_tc ? "takes" : "does not take",
          expect_tc ? "TC" : "the SIMT fallback");
    CHECK(!tc_off, "%s: st_cuda_ssd_set_scan_backward_tc(0) ignored", label);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d, %d chunks), bf16 mode, %s backward:\n", label, Bsz, K, H, P,
               G, N, Q, K / Q + (K % Q != 0), is_tc ? "TF32 tensor-core" : "SIMT fallback");
        const result *refs[3] = {&f32, &cpu, &oracle};
        const char *ref_names[3] = {"GPU fp32 SIMT", "CPU f32 chunked", "CPU f64 seq"};
        int grads_same = 1;
        for (int i = T_Y; i < T_COUNT; i++) {
            long rows;
            int cols;
            tensor_shape(&pb, i, &rows, &cols);
            if (i > T_Y)
                grads_same &=
                    !memcmp(*tensor_ptr(&tc0, i), *tensor_ptr(&f32, i), sizeof(float) * (size_t)(rows * cols));
            printf("  %-4s", tensor_names[i]);
            for (int j = 0; j < 3; j++) {
                long where;
                double gv, rv, err = tensor_err(&pb, i, &tc0, refs[j], &where, &gv, &rv);
                printf("  vs %s %.2e", ref_names[j], err);
                CHECK(err <= TC_GRAD_BOUND, "%s: bf16 %s vs %s rel err %.3e > %.0e (row %ld col %ld: %.9g vs %.9g)",
                      label, tensor_names[i], ref_names[j], err, TC_GRAD_BOUND, where / cols, where % cols, gv, rv);
            }
            printf("\n");
        }
        if (expect_tc)
            CHECK(!grads_same, "%s: the TC variant gave the fp32 SIMT bits on every gradient (did it run?)", label);
        else
            CHECK(grads_same, "%s: the SIMT fallback in bf16 mode gave other bits than in fp32 mode", label);
        CHECK(same_result(&pb, &tc0, &tc1), "%s: two bf16 runs differ (not deterministic)", label);
        CHECK(same_result(&pb, &tc0, &tc2), "%s: bf16 padded strides give other bits than contiguous rows", label);
        CHECK(pads[0] && pads[1] && pads[2] && pads[3], "%s: a backward wrote into output padding", label);
    }
    free_result(&f32), free_result(&tc0), free_result(&tc1), free_result(&tc2);
    free_result(&cpu), free_result(&oracle), free_problem(&pb);
}


/* ---- case 14: the compile-time shapes ------------------------------------------- */

static void check_taken(const char *label, const char *path, int taken, int expected) {
    CHECK(taken == expected, "%s: %s is %s, expected %s", label, path, taken ? "taken" : "not taken",
          expected ? "taken" : "not");
}

/* Two paths' runs (on, off: contiguous and padded rows each) of one
 * problem in bf16 mode: every output the same bits between them, each
 * within TC_GRAD_BOUND of the float64 oracle, no padding written
 * (pads[4]: gpu_run's padding checks). what: the two paths, for messages. */
static void check_same_bits(const char *label, const char *what, const problem *pb, result *on, result *off,
                            const result *oracle, const int *pads) {
    for (int i = T_Y; i < T_COUNT; i++) {
        long rows, where;
        int cols;
        double gv, rv, err = tensor_err(pb, i, &on[1], oracle, &where, &gv, &rv);
        tensor_shape(pb, i, &rows, &cols);
        const size_t bytes = sizeof(float) * (size_t)(rows * cols);
        int same[2];
        for (int padded = 0; padded < 2; padded++)
            same[padded] = !memcmp(*tensor_ptr(&on[padded], i), *tensor_ptr(&off[padded], i), bytes);
        printf("  %-4s contiguous %s, padded %s; vs CPU f64 seq %.2e\n", tensor_names[i],
               same[0] ? "bit-identical" : "DIFFER", same[1] ? "bit-identical" : "DIFFER", err);
        CHECK(same[0] && same[1], "%s: %s of %s differ (%s rows)", label, tensor_names[i], what,
              same[0] ? "padded" : "contiguous");
        CHECK(err <= TC_GRAD_BOUND, "%s: bf16 %s vs CPU f64 rel err %.3e > %.0e (row %ld col %ld: %.9g vs %.9g)", label,
              tensor_names[i], err, TC_GRAD_BOUND, where / cols, where % cols, gv, rv);
    }
    CHECK(pads[0] && pads[1] && pads[2] && pads[3], "%s: a run wrote into output padding", label);
}

/* bf16 mode, one shape: the fixed-shape kernels (expect_fixed: whether
 * the sizes have them; expect_pair: whether the forward is the pair
 * kernel) against the runtime-shape code, every output bit for bit, on
 * contiguous rows and padded strides; all within TC_GRAD_BOUND of the
 * float64 recurrence (so that two equally wrong answers cannot pass).
 * Leaves the switch on and fp32 mode. */
static void test_fixed_shape(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, int expect_fixed,
                             int expect_pair, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    result oracle = make_result(&pb), on[2] = {make_result(&pb), make_result(&pb)};
    result off[2] = {make_result(&pb), make_result(&pb)};
    cpu_double_sequential(&pb, &oracle);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const int bwd_tc = st_cuda_ssd_backward_is_scan_tc(Bsz, K, H, P, G, N, Q);
    const int pair = st_cuda_ssd_forward_is_scan_tc_pair(Bsz, K, H, P, G, N, Q);
    const int fixed = st_cuda_ssd_scan_fixed_shape_takes(K, P, N, Q);
    int pads[4] = {0, 0, 0, 0}, ok = 1;
    for (int padded = 0; padded < 2; padded++)
        ok = ok && gpu_run(&pb, Q, padded, &on[padded], &pads[padded]) == ST_OK;
    st_cuda_ssd_set_scan_fixed_shape(0);
    const int fixed_off = st_cuda_ssd_scan_fixed_shape_takes(K, P, N, Q);
    for (int padded = 0; padded < 2; padded++)
        ok = ok && gpu_run(&pb, Q, padded, &off[padded], &pads[2 + padded]) == ST_OK;
    st_cuda_ssd_set_scan_fixed_shape(1);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    CHECK(bwd_tc, "%s: bf16 mode does not run the scan backward's TC variant (nothing to compare)", label);
    check_taken(label, "the pair forward", pair, expect_pair);
    check_taken(label, "the compile-time shape", fixed, expect_fixed);
    check_taken(label, "the compile-time shape under st_cuda_ssd_set_scan_fixed_shape(0)", fixed_off, 0);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d), bf16 mode, %s vs the runtime shape:\n", label, Bsz, K, H, P,
               G, N, Q, fixed ? "compile-time shape" : "no compile-time shape (runtime both ways)");
        check_same_bits(label, "the compile-time shape and the runtime shape", &pb, on, off, &oracle, pads);
    }
    for (int j = 0; j < 2; j++)
        free_result(&on[j]), free_result(&off[j]);
    free_result(&oracle), free_problem(&pb);
}

/* ---- case 16: the pair forward a (window, group) -------------------------------- */

/* bf16 mode, one shape: the pair forward as one block a (window, group)
 * (st_cuda_ssd_set_scan_tc_heads(2): B, C and G once for the group's
 * heads) against one block a (window, head), every output bit for bit on
 * contiguous rows and padded strides, into poisoned outputs (gpu_run), and
 * within TC_GRAD_BOUND of the float64 recurrence. A head's X, dt, A or D
 * taken from another head, or a state from another head's decays, changes
 * y far beyond one bit. Leaves the switch on and fp32 mode. */
static void test_heads(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    result oracle = make_result(&pb), on[2] = {make_result(&pb), make_result(&pb)};
    result off[2] = {make_result(&pb), make_result(&pb)};
    cpu_double_sequential(&pb, &oracle);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    st_cuda_ssd_set_scan_tc_heads(1); /* the batch rule: these small batches keep a block a head */
    const int heads_auto = st_cuda_ssd_forward_is_scan_tc_heads(Bsz, K, H, P, G, N, Q);
    st_cuda_ssd_set_scan_tc_heads(2);
    const int heads = st_cuda_ssd_forward_is_scan_tc_heads(Bsz, K, H, P, G, N, Q);
    int pads[4] = {0, 0, 0, 0}, ok = 1;
    for (int padded = 0; padded < 2; padded++)
        ok = ok && gpu_run(&pb, Q, padded, &on[padded], &pads[padded]) == ST_OK;
    st_cuda_ssd_set_scan_tc_heads(0);
    const int heads_off = st_cuda_ssd_forward_is_scan_tc_heads(Bsz, K, H, P, G, N, Q);
    const int pair_off = st_cuda_ssd_forward_is_scan_tc_pair(Bsz, K, H, P, G, N, Q);
    for (int padded = 0; padded < 2; padded++)
        ok = ok && gpu_run(&pb, Q, padded, &off[padded], &pads[2 + padded]) == ST_OK;
    st_cuda_ssd_set_scan_tc_heads(1);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    check_taken(label, "the pair forward a (window, group) at a batch under 4 blocks an SM", heads_auto, 0);
    check_taken(label, "the pair forward a (window, group)", heads, 1);
    check_taken(label, "the pair forward a (window, group) under st_cuda_ssd_set_scan_tc_heads(0)", heads_off, 0);
    check_taken(label, "the pair forward a (window, head) under st_cuda_ssd_set_scan_tc_heads(0)", pair_off, 1);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d), bf16 mode, a block a (window, group) vs a (window, head):\n",
               label, Bsz, K, H, P, G, N, Q);
        check_same_bits(label, "the (window, group) and the (window, head) kernels", &pb, on, off, &oracle, pads);
    }
    for (int j = 0; j < 2; j++)
        free_result(&on[j]), free_result(&off[j]);
    free_result(&oracle), free_problem(&pb);
}

/* ---- case 18: the quad backward ----------------------------------------------- */

/* bf16 mode, one shape the quad backward takes (a window as one chunk, a
 * block a (window, group): ssd_scan_quad_backward.cu): asserted taken (and
 * the scan backward not), every output within TC_GRAD_BOUND of the float64
 * recurrence (dx also per (window, head), so that one wrong head cannot
 * hide in the norm), into poisoned outputs and work (gpu_run: an element
 * left unwritten is NaN and fails); contiguous rows and padded strides the
 * same bits, two runs too, no padding written. With
 * st_cuda_ssd_set_scan_quad_backward(0) the scan backward's TC variant runs
 * instead (asserted, and its gradients are other bits: else the quad one
 * did not run), also within the bound. strong: dt = 0.5, A = -16 (L
 * underflows to 0 a few rows below the diagonal; an exponent taken the
 * wrong way round is infinite). The quad backward runs its mma path
 * (st_cuda_ssd_set_scan_quad_backward_mma, at the default preset's shape
 * with its sizes as constants: asserted which); the WMMA path (the switch
 * off: changes 47, 51) also within the bound, contiguous and padded the
 * same bits and deterministic; at the constant shape the runtime-shape
 * mma path (st_cuda_ssd_set_scan_fixed_shape(0)) the same bits (only
 * index math differs); its mode 2 (TF32 rounding by an integer add) within
 * the bound, constant and runtime sizes the same bits, and mode 1's bits
 * (the add rounds half away from zero as cvt.rna does; its difference to
 * mode 1 printed too).
 * Leaves the switches on and fp32 mode. */
static void test_scan_quad(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, int strong,
                           uint64_t seed) {
    problem pb = make_problem_strong(Bsz, K, H, P, G, N, strong, seed);
    result oracle = make_result(&pb), old = make_result(&pb), any = make_result(&pb);
    result iadd[2] = {make_result(&pb), make_result(&pb)}; /* mode 2 at constant (where taken) and runtime sizes */
    result q[3] = {make_result(&pb), make_result(&pb), make_result(&pb)};
    result wm[3] = {make_result(&pb), make_result(&pb), make_result(&pb)};
    cpu_double_sequential(&pb, &oracle);
    const int fp32_quad = st_cuda_ssd_backward_is_scan_quad(Bsz, K, H, P, G, N, Q);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const int quad = st_cuda_ssd_backward_is_scan_quad(Bsz, K, H, P, G, N, Q);
    const int scan = st_cuda_ssd_backward_is_scan(Bsz, K, H, P, G, N, Q);
    const int fixed = K == 64 && P == 32 && N == 64; /* the shape compiled with constants */
    const int variant = st_cuda_ssd_scan_quad_backward_variant(K, P, N);
    int pads[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    st_cuda_ssd_set_scan_quad_backward_mma(1); /* q: mode 1 (cvt.rna); the default, 2, as iadd below */
    int ok = gpu_run(&pb, Q, 0, &q[0], &pads[0]) == ST_OK && gpu_run(&pb, Q, 1, &q[1], &pads[1]) == ST_OK &&
             gpu_run(&pb, Q, 1, &q[2], &pads[2]) == ST_OK;
    st_cuda_ssd_set_scan_quad_backward_mma(2);
    ok = ok && gpu_run(&pb, Q, 1, &iadd[0], &pads[8]) == ST_OK;
    st_cuda_ssd_set_scan_fixed_shape(0);
    ok = ok && gpu_run(&pb, Q, 1, &iadd[1], &pads[9]) == ST_OK;
    st_cuda_ssd_set_scan_quad_backward_mma(1);
    const int variant_any = st_cuda_ssd_scan_quad_backward_variant(K, P, N);
    ok = ok && gpu_run(&pb, Q, 1, &any, &pads[4]) == ST_OK;
    st_cuda_ssd_set_scan_fixed_shape(1);
    st_cuda_ssd_set_scan_quad_backward_mma(0);
    const int variant_off = st_cuda_ssd_scan_quad_backward_variant(K, P, N);
    const int quad_wmma = st_cuda_ssd_backward_is_scan_quad(Bsz, K, H, P, G, N, Q);
    ok = ok && gpu_run(&pb, Q, 0, &wm[0], &pads[5]) == ST_OK && gpu_run(&pb, Q, 1, &wm[1], &pads[6]) == ST_OK &&
         gpu_run(&pb, Q, 1, &wm[2], &pads[7]) == ST_OK;
    st_cuda_ssd_set_scan_quad_backward_mma(2); /* the default again */
    st_cuda_ssd_set_scan_quad_backward(0);
    const int quad_off = st_cuda_ssd_backward_is_scan_quad(Bsz, K, H, P, G, N, Q);
    const int tc_off = st_cuda_ssd_backward_is_scan_tc(Bsz, K, H, P, G, N, Q);
    ok = ok && gpu_run(&pb, Q, 1, &old, &pads[3]) == ST_OK;
    st_cuda_ssd_set_scan_quad_backward(1);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    const struct {
        const char *path;
        int taken, expected;
    } paths[] = {{"the quad backward in fp32 mode", fp32_quad, 0},
                 {"the quad backward", quad, 1},
                 {"the scan backward (the quad backward goes first)", scan, 0},
                 {"the quad backward under st_cuda_ssd_set_scan_quad_backward(0)", quad_off, 0},
                 {"the scan backward's TC variant under st_cuda_ssd_set_scan_quad_backward(0)", tc_off, 1},
                 {"the quad backward under st_cuda_ssd_set_scan_quad_backward_mma(0)", quad_wmma, 1},
                 {"the mma path with constant sizes", variant == ST_SSD_QUAD_MMA_FIXED, fixed},
                 {"the mma path (at either shape)", variant != ST_SSD_QUAD_WMMA, 1},
                 {"the runtime-shape mma path under st_cuda_ssd_set_scan_fixed_shape(0)", variant_any, ST_SSD_QUAD_MMA},
                 {"the WMMA path under st_cuda_ssd_set_scan_quad_backward_mma(0)", variant_off, ST_SSD_QUAD_WMMA}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        check_taken(label, paths[i].path, paths[i].taken, paths[i].expected);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d%s), bf16 mode, the quad backward:\n", label, Bsz, K, H, P, G, N,
               Q, strong ? ", dt=0.5 A=-16" : "");
        int grads_same = 1;
        for (int i = T_Y; i < T_COUNT; i++) {
            long rows, where, wo;
            int cols;
            double gv, rv, ov, orv, err = tensor_err(&pb, i, &q[1], &oracle, &where, &gv, &rv);
            const double old_err = tensor_err(&pb, i, &old, &oracle, &wo, &ov, &orv);
            const double wmma_err = tensor_err(&pb, i, &wm[1], &oracle, &wo, &ov, &orv);
            const double mma_wmma = tensor_err(&pb, i, &q[1], &wm[1], &wo, &ov, &orv);
            const double iadd_err = tensor_err(&pb, i, &iadd[0], &oracle, &wo, &ov, &orv);
            const double iadd_mma = tensor_err(&pb, i, &iadd[0], &q[1], &wo, &ov, &orv);
            tensor_shape(&pb, i, &rows, &cols);
            if (i > T_Y)
                grads_same &= !memcmp(*tensor_ptr(&q[1], i), *tensor_ptr(&old, i), sizeof(float) * (size_t)(rows * cols));
            printf("  %-4s vs CPU f64 seq %.2e (the WMMA path %.2e, mma vs WMMA %.2e; mode 2 %.2e, vs mode 1 %.2e; the "
                   "scan backward's TC variant %.2e)\n",
                   tensor_names[i], err, wmma_err, mma_wmma, iadd_err, iadd_mma, old_err);
            CHECK(err <= TC_GRAD_BOUND, "%s: quad %s vs CPU f64 rel err %.3e > %.0e (row %ld col %ld: %.9g vs %.9g)",
                  label, tensor_names[i], err, TC_GRAD_BOUND, where / cols, where % cols, gv, rv);
            CHECK(wmma_err <= TC_GRAD_BOUND, "%s: the quad WMMA path's %s vs CPU f64 rel err %.3e > %.0e", label,
                  tensor_names[i], wmma_err, TC_GRAD_BOUND);
            CHECK(iadd_err <= TC_GRAD_BOUND, "%s: the quad mma path's mode 2: %s vs CPU f64 rel err %.3e > %.0e", label,
                  tensor_names[i], iadd_err, TC_GRAD_BOUND);
            CHECK(old_err <= TC_GRAD_BOUND, "%s: with the quad backward off, %s vs CPU f64 rel err %.3e > %.0e", label,
                  tensor_names[i], old_err, TC_GRAD_BOUND);
        }
        const double dx_head = worst_chunk_err(&pb, K, q[1].dx, oracle.dx);
        printf("  dx   worst (window, head) vs CPU f64 seq %.2e\n", dx_head);
        CHECK(dx_head <= TC_GRAD_BOUND, "%s: quad dx of one (window, head) vs CPU f64 rel err %.3e > %.0e", label,
              dx_head, TC_GRAD_BOUND);
        CHECK(!grads_same, "%s: the quad backward gave the scan backward's bits on every gradient (did it run?)", label);
        CHECK(same_result(&pb, &q[0], &q[1]), "%s: quad: contiguous rows and padded strides give other bits", label);
        CHECK(same_result(&pb, &q[1], &q[2]), "%s: quad: two runs differ (not deterministic)", label);
        CHECK(same_result(&pb, &q[1], &any), "%s: quad: the mma path at constant and runtime sizes gives other bits",
              label);
        CHECK(same_result(&pb, &iadd[0], &iadd[1]),
              "%s: quad: the mma path's mode 2 at constant and runtime sizes gives other bits", label);
        CHECK(same_result(&pb, &iadd[0], &q[1]),
              "%s: quad: the mma path's mode 2 (TF32 rounding by an integer add) gives other bits than mode 1's "
              "cvt.rna",
              label);
        CHECK(same_result(&pb, &wm[0], &wm[1]),
              "%s: quad WMMA path: contiguous rows and padded strides give other bits", label);
        CHECK(same_result(&pb, &wm[1], &wm[2]), "%s: quad WMMA path: two runs differ (not deterministic)", label);
        int pads_ok = 1;
        for (int j = 0; j < 10; j++)
            pads_ok &= pads[j];
        CHECK(pads_ok, "%s: a backward wrote into output padding", label);
    }
    for (int j = 0; j < 3; j++)
        free_result(&q[j]), free_result(&wm[j]);
    free_result(&iadd[0]), free_result(&iadd[1]);
    free_result(&any), free_result(&old), free_result(&oracle), free_problem(&pb);
}

/* The quad backward's rule at the shapes next to it (bf16 mode): K not a
 * multiple of 16, K past 64, P and N not multiples of 16, staging off. */
static void test_scan_quad_rule(void) {
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const int k50 = st_cuda_ssd_backward_is_scan_quad(4, 50, 8, 32, 1, 64, 16);
    const int k128 = st_cuda_ssd_backward_is_scan_quad(4, 128, 8, 32, 1, 64, 64);
    const int odd = st_cuda_ssd_backward_is_scan_quad(4, 64, 8, 24, 2, 10, 32);
    const int k64 = st_cuda_ssd_backward_is_scan_quad(4, 64, 8, 32, 1, 64, 32);
    st_cuda_ssd_set_staging(0);
    const int unstaged = st_cuda_ssd_backward_is_scan_quad(4, 64, 8, 32, 1, 64, 32);
    st_cuda_ssd_set_staging(1);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    check_taken("quad rule: K=50", "the quad backward", k50, 0);
    check_taken("quad rule: K=128", "the quad backward", k128, 0);
    check_taken("quad rule: P=24 N=10", "the quad backward", odd, 0);
    check_taken("quad rule: the default shape", "the quad backward", k64, 1);
    check_taken("quad rule: the default shape, staging off", "the quad backward", unstaged, 0);
}

/* ---- case 17: the quad forward, the window as one chunk ------------------------- */

/* bf16 mode, one shape the quad kernel's rule takes (K <= 64; K, P, N
 * multiples of 16): that it is taken and the pair and heads kernels not;
 * y within TC_BOUND of the float64 recurrence (whole and per (window,
 * head, chunk of Q rows)) into poisoned outputs, the gaps between y's rows
 * untouched, contiguous rows (16-byte copies) and padded strides (4-byte
 * ones) the same bits, two runs too; with st_cuda_ssd_set_scan_tc_quad(0)
 * the pair kernel taken again where its rule says (the walk elsewhere),
 * within TC_BOUND and not the quad kernel's bits. no_skip: Dskip NULL;
 * strong: dt = 0.5, A = -16 (decays far past float's range: an exponent
 * the wrong way round is infinite). Leaves the switch on and fp32 mode. */
static void test_quad(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, int no_skip, int strong,
                      uint64_t seed) {
    problem pb = make_problem_strong(Bsz, K, H, P, G, N, strong, seed);
    if (no_skip) free(pb.D), pb.D = NULL;
    result oracle = make_result(&pb), on[3] = {make_result(&pb), make_result(&pb), make_result(&pb)};
    result off = make_result(&pb), whole = make_result(&pb);
    cpu_double_sequential(&pb, &oracle);
    const int fp32_quad = st_cuda_ssd_forward_is_scan_tc_quad(Bsz, K, H, P, G, N, Q);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const int quad = st_cuda_ssd_forward_is_scan_tc_quad(Bsz, K, H, P, G, N, Q);
    const int pair_on = st_cuda_ssd_forward_is_scan_tc_pair(Bsz, K, H, P, G, N, Q);
    st_cuda_ssd_set_scan_tc_heads(2);
    const int heads_on = st_cuda_ssd_forward_is_scan_tc_heads(Bsz, K, H, P, G, N, Q);
    st_cuda_ssd_set_scan_tc_heads(1);
    int pads[5] = {0, 0, 0, 0, 0}, ok = 1;
    const int slices = st_cuda_ssd_forward_scan_tc_quad_slices(Bsz, K, H, P, G, N, Q);
    for (int run = 0; run < 3; run++) /* contiguous, padded, padded again */
        ok = ok && gpu_run(&pb, Q, run > 0, &on[run], &pads[run]) == ST_OK;
    st_cuda_ssd_set_scan_tc_quad_split(1); /* a block a (window, group), as at a large batch */
    const int slices1 = st_cuda_ssd_forward_scan_tc_quad_slices(Bsz, K, H, P, G, N, Q);
    ok = ok && gpu_run(&pb, Q, 1, &whole, &pads[4]) == ST_OK;
    st_cuda_ssd_set_scan_tc_quad_split(0);
    st_cuda_ssd_set_scan_tc_quad(0);
    const int quad_off = st_cuda_ssd_forward_is_scan_tc_quad(Bsz, K, H, P, G, N, Q);
    const int pair_off = st_cuda_ssd_forward_is_scan_tc_pair(Bsz, K, H, P, G, N, Q);
    ok = ok && gpu_run(&pb, Q, 1, &off, &pads[3]) == ST_OK;
    st_cuda_ssd_set_scan_tc_quad(1);
    st_cuda_ssd_set_scan_tc(0);
    const int tc_off = st_cuda_ssd_forward_is_scan_tc_quad(Bsz, K, H, P, G, N, Q);
    st_cuda_ssd_set_scan_tc(1);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    const int Qc = Q < K ? Q : K; /* clamped as the op does */
    check_taken(label, "the quad forward in fp32 mode", fp32_quad, 0);
    check_taken(label, "the quad forward", quad, 1);
    check_taken(label, "the pair forward beside the quad forward", pair_on, 0);
    check_taken(label, "the pair forward a (window, group) beside the quad forward", heads_on, 0);
    check_taken(label, "the quad forward under st_cuda_ssd_set_scan_tc_quad(0)", quad_off, 0);
    check_taken(label, "the pair forward under st_cuda_ssd_set_scan_tc_quad(0)", pair_off, K == 2 * Qc && Qc % 16 == 0);
    check_taken(label, "the quad forward under st_cuda_ssd_set_scan_tc(0)", tc_off, 0);
    /* these batches (a few windows) are far under 2 blocks an SM: the rule may split the heads */
    CHECK(slices >= 1 && slices <= H / G, "%s: the quad forward runs %d blocks a (window, group) (H/G = %d)", label,
          slices, H / G);
    CHECK(slices1 == 1, "%s: st_cuda_ssd_set_scan_tc_quad_split(1) ignored (%d blocks a (window, group))", label,
          slices1);
    CHECK(ok, "%s: a GPU call failed (message above)", label);
    if (ok) {
        long where;
        double gv, rv;
        const double e64 = tensor_err(&pb, T_Y, &on[1], &oracle, &where, &gv, &rv);
        const double c64 = worst_chunk_err(&pb, Qc, on[1].y, oracle.y);
        const double eoff = tensor_err(&pb, T_Y, &off, &oracle, &where, &gv, &rv);
        const double coff = worst_chunk_err(&pb, Qc, off.y, oracle.y);
        const double qo = tensor_err(&pb, T_Y, &on[1], &off, &where, &gv, &rv);
        const size_t ybytes = sizeof(float) * (size_t)rows_of(&pb) * (size_t)(H * P);
        const int whole_same = !memcmp(on[1].y, whole.y, ybytes);
        printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d%s), bf16 mode, quad kernel (%d blocks a (window, group); "
               "one: %s): y rel err %.2e vs CPU f64 seq "
               "(worst chunk %.2e); the %s with the quad kernel off %.2e (worst chunk %.2e), %.2e from the quad's\n",
               label, Bsz, K, H, P, G, N, Q, no_skip ? ", Dskip NULL" : "", slices,
               whole_same ? "bit-identical" : "DIFFERS", e64, c64, pair_off ? "pair kernel" : "walk", eoff, coff, qo);
        CHECK(whole_same, "%s: quad y: %d head slices and one block a (window, group) give other bits", label, slices);
        CHECK(e64 <= TC_BOUND && c64 <= TC_BOUND, "%s: quad y vs CPU f64: rel err %.2e, worst chunk %.2e > %.0e", label,
              e64, c64, TC_BOUND);
        CHECK(eoff <= TC_BOUND && coff <= TC_BOUND,
              "%s: y with the quad kernel off vs CPU f64: rel err %.2e, worst chunk %.2e > %.0e", label, eoff, coff,
              TC_BOUND);
        CHECK(memcmp(on[1].y, off.y, ybytes), "%s: the quad kernel off gave its bits (did another kernel run?)", label);
        CHECK(!memcmp(on[0].y, on[1].y, ybytes), "%s: quad y: contiguous rows and padded strides give other bits",
              label);
        CHECK(!memcmp(on[1].y, on[2].y, ybytes), "%s: quad y: two runs differ (not deterministic)", label);
        CHECK(pads[0] && pads[1] && pads[2] && pads[3] && pads[4], "%s: a run wrote into output padding", label);
    }
    for (int j = 0; j < 3; j++)
        free_result(&on[j]);
    free_result(&off), free_result(&whole), free_result(&oracle), free_problem(&pb);
}

/* The quad kernel's rule at the shapes next to it, bf16 mode: not taken
 * (those keep the pair kernel or the walk, cases 11, 14, 16). */
static void test_quad_rule(void) {
    static const struct {
        const char *what;
        int K, H, P, G, N, Q;
    } shapes[] = {{"K=50 (not a multiple of 16)", 50, 8, 32, 1, 64, 16},
                  {"K=128 (past 64 rows)", 128, 8, 32, 1, 64, 64},
                  {"P=24 (not a multiple of 16)", 64, 8, 24, 1, 64, 32},
                  {"N=10 (not a multiple of 16)", 64, 8, 32, 2, 10, 32}};
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char label[96];
        snprintf(label, sizeof label, "quad rule: %s", shapes[i].what);
        check_taken(label, "the quad forward",
                    st_cuda_ssd_forward_is_scan_tc_quad(4, shapes[i].K, shapes[i].H, shapes[i].P, shapes[i].G,
                                                        shapes[i].N, shapes[i].Q),
                    0);
    }
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    printf("quad rule: not taken at K=50, K=128, P=24, N=10\n");
}

/* ---- case 19: the quad forward's head slices ------------------------------------ */

/* The device's SM count (0 where it cannot say). */
static int device_sms(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    return v;
}

/* bf16 mode, one shape the quad kernel takes, with the group's heads
 * divided over n_forced slice counts (st_cuda_ssd_set_scan_tc_quad_split:
 * forced[0] first, each asserted as the number of blocks a (window,
 * group) the kernel runs, ceil(H/G / ceil(H/G / n))) and the batch's own
 * choice: y the same bits under every one, on padded strides (4-byte
 * copies, scalar stores) and, for forced[0], contiguous rows (16-byte
 * copies, float2 stores), into poisoned outputs with the gaps between y's
 * rows untouched; within TC_BOUND of the float64 recurrence (whole and
 * per (window, head, chunk of Q rows)). The batch's choice: one block a
 * (window, group) where the batch has at least 2 an SM, at least 2 slices
 * where a block a head would fit one wave (H/G > 1), else 1 to H/G. A
 * head of one slice taken from another, a slice's heads past H/G or a
 * round's X from the wrong buffer change y far beyond its bits. Leaves the
 * switch at 0 and fp32 mode. */
static void test_quad_split(const char *label, int Bsz, int K, int H, int P, int G, int N, int Q, const int *forced,
                            int n_forced, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    const int HG = H / G, Qc = Q < K ? Q : K, sms = device_sms();
    result oracle = make_result(&pb), first = make_result(&pb), run = make_result(&pb);
    cpu_double_sequential(&pb, &oracle);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    const size_t ybytes = sizeof(float) * (size_t)rows_of(&pb) * (size_t)(H * P);
    printf("%s (Bsz=%d K=%d H=%d P=%d G=%d N=%d Q=%d), bf16 mode, quad kernel, blocks a (window, group):", label, Bsz,
           K, H, P, G, N, Q);
    for (int i = 0; i <= n_forced; i++) { /* forced[0..n-1], then the batch's choice (0) */
        const int want = i < n_forced ? forced[i] : 0;
        st_cuda_ssd_set_scan_tc_quad_split(want);
        const int slices = st_cuda_ssd_forward_scan_tc_quad_slices(Bsz, K, H, P, G, N, Q);
        const int hs = want ? (HG + (want < HG ? want : HG) - 1) / (want < HG ? want : HG) : 0;
        if (want)
            CHECK(slices == (HG + hs - 1) / hs, "%s: split %d runs %d blocks a (window, group), expected %d", label,
                  want, slices, (HG + hs - 1) / hs);
        else if (sms > 0 && (long)Bsz * G >= 2L * sms)
            CHECK(slices == 1, "%s: %d (window, group) pairs on %d SMs split into %d blocks each", label, Bsz * G, sms,
                  slices);
        else if (sms > 0 && HG > 1 && (long)Bsz * G * HG <= sms) /* a block a head fits one wave: the rule splits */
            CHECK(slices >= 2 && slices <= HG,
                  "%s: %d (window, group) pairs on %d SMs run %d blocks each (expected 2 to %d)", label, Bsz * G, sms,
                  slices, HG);
        else
            CHECK(slices >= 1 && slices <= HG, "%s: %d blocks a (window, group), H/G = %d", label, slices, HG);
        int pad_c = 1, pad_p = 0, ok = 1;
        if (i == 0) {
            ok = gpu_run(&pb, Q, 0, &first, &pad_c) == ST_OK;
            CHECK(ok, "%s: a GPU call failed (message above)", label);
        }
        ok = ok && gpu_run(&pb, Q, 1, &run, &pad_p) == ST_OK;
        CHECK(ok, "%s: a GPU call failed (message above)", label);
        if (!ok) break;
        long where;
        double gv, rv;
        const double e64 = tensor_err(&pb, T_Y, &run, &oracle, &where, &gv, &rv);
        const double c64 = worst_chunk_err(&pb, Qc, run.y, oracle.y);
        const int same = !memcmp(first.y, run.y, ybytes);
        printf(" %s%d: %.2e (chunk %.2e)%s", want ? "" : "auto ", slices, e64, c64, same ? "" : " DIFFER");
        CHECK(e64 <= TC_BOUND && c64 <= TC_BOUND, "%s: %d slices: y vs CPU f64: rel err %.2e, worst chunk %.2e > %.0e",
              label, slices, e64, c64, TC_BOUND);
        CHECK(same, "%s: %d slices give other bits than %d (contiguous rows)", label, slices, forced[0]);
        CHECK(pad_c && pad_p, "%s: %d slices: a run wrote into output padding", label, slices);
    }
    printf("\n");
    st_cuda_ssd_set_scan_tc_quad_split(0);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    free_result(&oracle), free_result(&first), free_result(&run), free_problem(&pb);
}

/* ---- case 13: the last row only --------------------------------------------- */

/* norm(a - b) / norm(b) over n values (Inf when a holds a non-finite value). */
static double lr_err(const float *a, const float *b, long n) {
    double d2 = 0, r2 = 0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r2 += (double)b[i] * b[i];
    }
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

/* The CPU float64 reference on the same (float) inputs, rounded once. */
static void cpu_last_row(const problem *pb, const float *dy_last, result *r) {
    long R = rows_of(pb);
    int Bsz = pb->Bsz, H = pb->H, HP = H * pb->P, GN = pb->G * pb->N;
    double *x = to_d(pb->x, R * HP), *dt = to_d(pb->dt, R * H), *A = to_d(pb->A, H), *B = to_d(pb->B, R * GN);
    double *C = to_d(pb->C, R * GN), *D = to_d(pb->D, H), *dy = to_d(dy_last, (long)Bsz * HP);
    double *y = alloc_d((long)Bsz * HP), *dx = alloc_d(R * HP), *ddt = alloc_d(R * H);
    double *dB = alloc_d(R * GN), *dC = alloc_d(R * GN), *dA = to_d(pb->dA0, H), *dD = to_d(pb->dD0, H);
    double *work = alloc_d((long)st_ssd_last_row_work_count_f64(Bsz, pb->K, H));
    st_ssd_last_row_forward_f64(Bsz, pb->K, H, pb->P, pb->G, pb->N, x, HP, dt, H, A, B, GN, C, GN, D, y, HP);
    st_ssd_last_row_backward_f64(Bsz, pb->K, H, pb->P, pb->G, pb->N, x, HP, dt, H, A, B, GN, C, GN, D, dy, HP, dx, HP,
                                 ddt, H, dA, dB, GN, dC, GN, dD, work);
    to_f(r->y, y, (long)Bsz * HP), to_f(r->dx, dx, R * HP), to_f(r->ddt, ddt, R * H);
    to_f(r->dB, dB, R * GN), to_f(r->dC, dC, R * GN), to_f(r->dA, dA, H), to_f(r->dD, dD, H);
    free(x), free(dt), free(A), free(B), free(C), free(D), free(dy), free(y), free(dx), free(ddt);
    free(dB), free(dC), free(dA), free(dD), free(work);
}

/* Whether two last-row runs gave the same bits in every output (y one row a
 * window); with `windows` < pb->Bsz, in the first `windows` windows' rows
 * only, dA and dD left out (their sums cover every window). */
static int lr_same(const problem *pb, const result *a, const result *b, int windows) {
    size_t HP = (size_t)pb->H * pb->P, GN = (size_t)pb->G * pb->N, R = (size_t)windows * pb->K, H = (size_t)pb->H;
    int same = memcmp(a->y, b->y, sizeof(float) * (size_t)windows * HP) == 0 &&
               memcmp(a->dx, b->dx, sizeof(float) * R * HP) == 0 &&
               memcmp(a->ddt, b->ddt, sizeof(float) * R * H) == 0 &&
               memcmp(a->dB, b->dB, sizeof(float) * R * GN) == 0 && memcmp(a->dC, b->dC, sizeof(float) * R * GN) == 0;
    if (windows == pb->Bsz)
        same = same && memcmp(a->dA, b->dA, sizeof(float) * H) == 0 && memcmp(a->dD, b->dD, sizeof(float) * H) == 0;
    return same;
}

/* dy at the last rows: fresh values (row K-1 of each window of pb.dy). */
static float *lr_dy_last(const problem *pb) {
    size_t HP = (size_t)pb->H * pb->P;
    float *dy_last = alloc_f((long)pb->Bsz * (long)HP);
    for (int b = 0; b < pb->Bsz; b++)
        memcpy(dy_last + (size_t)b * HP, pb->dy + ((size_t)b * pb->K + pb->K - 1) * HP, sizeof(float) * HP);
    return dy_last;
}

static void test_last_row(const char *label, int Bsz, int K, int H, int P, int G, int N, uint64_t seed) {
    problem pb = make_problem(Bsz, K, H, P, G, N, seed);
    long R = rows_of(&pb);
    int HP = H * P, GN = G * N;
    float *dy_last = lr_dy_last(&pb);
    result g = make_result(&pb), g2 = make_result(&pb), g3 = make_result(&pb), ref = make_result(&pb);
    int pad_ok = 0, pad2 = 0, pad3 = 0;
    int rc = gpu_run_op(&pb, 0, 1, dy_last, &g, &pad_ok);
    CHECK(rc == ST_OK, "%s: GPU last-row run failed", label);
    if (rc == ST_OK) {
        cpu_last_row(&pb, dy_last, &ref);
        double e[T_COUNT];
        e[T_Y] = lr_err(g.y, ref.y, (long)Bsz * HP);
        e[T_DX] = lr_err(g.dx, ref.dx, R * HP);
        e[T_DDT] = lr_err(g.ddt, ref.ddt, R * H);
        e[T_DB] = lr_err(g.dB, ref.dB, R * GN);
        e[T_DC] = lr_err(g.dC, ref.dC, R * GN);
        float incg[2][64], incr[2][64]; /* dA, dD increments (H <= 64 here) */
        for (int h = 0; h < H && h < 64; h++) {
            incg[0][h] = g.dA[h] - pb.dA0[h], incr[0][h] = ref.dA[h] - pb.dA0[h];
            incg[1][h] = g.dD[h] - pb.dD0[h], incr[1][h] = ref.dD[h] - pb.dD0[h];
        }
        e[T_DA] = lr_err(incg[0], incr[0], H < 64 ? H : 64);
        e[T_DD] = lr_err(incg[1], incr[1], H < 64 ? H : 64);
        printf("  last row %-48s y %.2e dx %.2e ddt %.2e dB %.2e dC %.2e dA %.2e dD %.2e\n", label, e[T_Y], e[T_DX],
               e[T_DDT], e[T_DB], e[T_DC], e[T_DA], e[T_DD]);
        for (int i = 0; i < T_COUNT; i++)
            CHECK(e[i] <= (i == T_Y ? FWD_BOUND : GRAD_BOUND), "%s: last-row %s rel err %.3e", label, tensor_names[i],
                  e[i]);
        CHECK(pad_ok, "%s: the last-row kernels wrote into the padding", label);
        /* run to run, and contiguous rows against the padded ones: every output's bits */
        rc = gpu_run_op(&pb, 0, 1, dy_last, &g2, &pad2);
        CHECK(rc == ST_OK && lr_same(&pb, &g, &g2, Bsz), "%s: two last-row runs differ", label);
        rc = gpu_run_op(&pb, 0, 0, dy_last, &g3, &pad3);
        CHECK(rc == ST_OK && lr_same(&pb, &g, &g3, Bsz), "%s: contiguous rows give other bits than padded ones", label);
    }
    free_result(&g), free_result(&g2), free_result(&g3), free_result(&ref), free(dy_last), free_problem(&pb);
}

/* A batch whose x passes LR_PREFETCH_BYTES (16 MiB: the forward's L2
 * prefetch off) against its first `few` windows alone (prefetch on): the
 * same bits in those windows' rows, and each run against the reference. */
static void test_last_row_prefetch(int Bsz, int few, uint64_t seed) {
    const int K = 64, H = 8, P = 32, G = 1, N = 64;
    test_last_row("default shape, x past 16 MiB (no prefetch)", Bsz, K, H, P, G, N, seed);
    problem pb = make_problem(Bsz, K, H, P, G, N, seed), part = pb;
    part.Bsz = few; /* the same arrays: the first windows' rows */
    float *dy_last = lr_dy_last(&pb);
    result all = make_result(&pb), sub = make_result(&part);
    int pad_all = 0, pad_sub = 0;
    int ok = gpu_run_op(&pb, 0, 1, dy_last, &all, &pad_all) == ST_OK &&
             gpu_run_op(&part, 0, 1, dy_last, &sub, &pad_sub) == ST_OK;
    CHECK(ok && lr_same(&pb, &all, &sub, few),
          "last row: %d windows alone (x prefetched) give other bits than in a batch of %d (not prefetched)", few, Bsz);
    free_result(&all), free_result(&sub), free(dy_last), free_problem(&pb);
}

static void test_last_row_bad_sizes(void) {
    int rc = st_cuda_ssd_last_row_forward(1, 4, 3, 2, 2, 2, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, NULL, 0,
                                          NULL);
    CHECK(rc == ST_ERR_INPUT, "last row, H=3 G=2 gave status %d, not ST_ERR_INPUT", rc);
    st_clear_error();
    rc = st_cuda_ssd_last_row_backward(1, 1 << 20, 8, 32, 1, 64, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, NULL,
                                       0, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL);
    CHECK(rc == ST_ERR_INPUT, "last row, K=2^20 (shared memory past any device) gave status %d", rc);
    st_clear_error();
    /* the model's question before it runs the tail: yes to what the cases above ran, no to what is refused */
    CHECK(st_cuda_ssd_last_row_fits(64, 8, 32, 1, 64) && st_cuda_ssd_last_row_fits(37, 6, 5, 3, 7) &&
              st_cuda_ssd_last_row_fits(1024, 8, 32, 1, 64),
          "last row: fits says no to a size the kernels take");
    CHECK(!st_cuda_ssd_last_row_fits(1 << 20, 8, 32, 1, 64) && !st_cuda_ssd_last_row_fits(4, 3, 2, 2, 2),
          "last row: fits says yes to a size the kernels refuse");
}

/* Sizes the kernels cannot take come back as ST_ERR_INPUT, not a crash. */
static void test_bad_sizes(void) {
    int rc = st_cuda_ssd_forward_chunked(1, 4, 3, 2, 2, 2, 4, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, NULL, 0,
                                         NULL, NULL);
    CHECK(rc == ST_ERR_INPUT, "H=3 G=2 (G does not divide H) gave status %d, not ST_ERR_INPUT", rc);
    st_clear_error();
}

/* The cases, numbered for SSMTRADE_TEST_PART (tests/test.h: the sanitizer
 * runs split the program over processes); each case sets the switches it
 * needs and leaves the defaults (staging, scan forward and backward on). */
static void set_paths(int staging, int scan, int scan_backward) {
    st_cuda_ssd_set_staging(staging);
    st_cuda_ssd_set_scan(scan);
    st_cuda_ssd_set_scan_backward(scan_backward);
}

static void run_numbered(int i) {
    set_paths(1, 1, 1);
    /* cases 11, 14 and 16 check the kernels the quad forward takes over at
     * K <= 64 (the pair and heads kernels, the walk against them): without it */
    st_cuda_ssd_set_scan_tc_quad(i != 11 && i != 14 && i != 16);
    switch (i) {
    case 0: test_grid(4, 16, 1, 16, 1000); break; /* tiny: d_inner 64, headdim 16, N 16 */
    case 1: test_grid(8, 24, 2, 10, 2000); break; /* odd: d_inner 192, headdim 24, N 10, two groups */
    case 2: test_grid(4, 16, 2, 16, 3000); break;
    case 3:
        test_one("batch of 64 windows", 64, 32, 4, 16, 1, 16, 16, 4000);
        test_one("default shape", 8, 64, 8, 32, 1, 64, 32, 5000);
        CHECK(st_cuda_ssd_backward_is_scan(8, 64, 8, 32, 1, 64, 32),
              "default shape: the backward does not run as the scan kernel (so the CPU comparisons do not cover it)");
        test_one("large preset shape (backward unstaged: too big)", 2, 128, 8, 64, 1, 128, 64, 5500);
        break;
    case 4:
        set_paths(0, 1, 1);
        test_one("default shape, rows read from global memory", 8, 64, 8, 32, 1, 64, 32, 5000);
        test_grid(8, 24, 2, 10, 2000);
        break;
    case 5: /* the chunk-parallel forward with staged rows (the scan forward is off) */
        set_paths(1, 0, 1);
        test_one("default shape, chunk-parallel forward", 8, 64, 8, 32, 1, 64, 32, 5000);
        test_grid(8, 24, 2, 10, 2000);
        test_long_window(16);
        break;
    case 6:
        test_scan_vs_chunked("default shape", 16, 64, 8, 32, 1, 64, 32, 5100);
        test_scan_vs_chunked("odd shape, K=50 Q=16", 5, 50, 8, 24, 2, 10, 16, 5200);
        test_scan_vs_chunked("large preset shape", 2, 128, 8, 64, 1, 128, 64, 5300);
        break;
    case 7:
        if (!test_quick()) test_long_window(64);
        if (!test_quick()) test_long_window(32);
        test_long_window(16); /* 16 chunks: more than the chunk kernels fuse, so the state pass runs with staging on */
        break;
    case 8: /* the chunk-parallel backward with staged rows (the scan backward is off) */
        set_paths(1, 1, 0);
        test_one("default shape, chunk-parallel backward", 8, 64, 8, 32, 1, 64, 32, 5000);
        if (!test_quick()) test_grid(8, 24, 2, 10, 2000);
        if (!test_quick()) test_long_window(16);
        break;
    case 9:
        test_scan_bwd_vs_chunked("default shape", 16, 64, 8, 32, 1, 64, 32, 5600);
        test_scan_bwd_vs_chunked("odd shape", 5, 50, 8, 23, 2, 13, 16, 5700);
        break;
    case 10:
        test_scan_bwd_vs_chunked("long window, 16 chunks", 2, 256, 8, 32, 1, 64, 16, 5800);
        if (!test_quick()) test_scan_bwd_vs_chunked("long window, 32 chunks", 2, 256, 4, 16, 2, 16, 8, 5900);
        test_bad_sizes();
        break;
    case 11: /* the TF32 tensor-core scan forward (bf16 mode); its rule takes every shape whose shared memory fits
              */
        test_scan_tc("default shape", 16, 64, 8, 32, 1, 64, 32, 1, 0, 6000);
        test_scan_tc("odd shape, K=50 Q=16 (P, N padded to 16, last chunk 2 rows)", 5, 50, 8, 24, 2, 10, 16, 1, 0,
                     6100);
        test_scan_tc("K=50 Q=24 (rows 24..31 of every chunk padding, last chunk 2 rows)", 4, 50, 8, 32, 1, 64, 24, 1, 0,
                     6400);
        test_scan_tc("K=100 Q=40 (two scan segments a chunk, last chunk 20 rows)", 3, 100, 4, 16, 2, 16, 40, 1, 0,
                     6500);
        test_scan_tc("default shape, dt=0.5 A=-16 (decays past float's range)", 4, 64, 8, 32, 1, 64, 32, 1, 1, 6600);
        /* the pair kernel (two full chunks) and the shapes next to its rule that walk */
        test_scan_tc("pair: K=32 Q=16 (P 16, N 16)", 6, 32, 4, 16, 1, 16, 16, 1, 0, 6700);
        test_scan_tc("pair: odd P, N (24, 10: padded to 32, 16), two groups", 5, 64, 8, 24, 2, 10, 32, 1, 0, 6800);
        test_scan_tc("pair: Q=64 (10 G tiles a chunk: rounds of 8 warps), P 16 < N 48", 3, 128, 4, 16, 2, 48, 64, 1, 0,
                     6900);
        /* default decays: under the strong ones chunk 1's state term keeps
         * ~exp(-8) of its weight in row 0 alone, and wrong state rows would
         * pass 2e-2 */
        test_scan_tc("pair: P=48 > Q=16 (the state rows past the B1 slot's Q)", 4, 32, 2, 48, 1, 16, 16, 1, 0, 7000);
        test_scan_tc("walk: one chunk (K=Q=32)", 6, 32, 8, 32, 1, 64, 32, 1, 0, 7100);
        test_scan_tc("walk: 4 chunks (K=64 Q=16)", 6, 64, 8, 32, 1, 64, 16, 1, 0, 7200);
        test_scan_tc("walk: 2 chunks, Q=24 not a multiple of 16 (K=48)", 4, 48, 8, 32, 1, 64, 24, 1, 0, 7300);
        if (!test_quick()) {
            test_scan_tc("odd shape, K=50 Q=32 (last chunk 18 rows)", 5, 50, 8, 24, 2, 10, 32, 1, 0, 6200);
            test_scan_tc("large preset shape (pair kernel 206 KB, walk 170 KB: taken where the device allows)", 2, 128,
                         8, 64, 1, 128, 64, -1, 0, 6300);
        }
        break;
    case 12: /* bf16 mode: the scan backward's TF32 tensor-core variant (the quad backward would take K <= 64) */
        st_cuda_ssd_set_scan_quad_backward(0);
        test_scan_bwd_tc("TC default shape", 8, 64, 8, 32, 1, 64, 32, 1, 6000);
        test_scan_bwd_tc("TC odd shape (SIMT fallback)", 5, 50, 8, 23, 2, 13, 16, 0, 6100);
        if (!test_quick()) test_scan_bwd_tc("TC 4 chunks, two groups", 4, 64, 4, 16, 2, 32, 16, 1, 6200);
        if (!test_quick()) test_scan_bwd_tc("TC one chunk", 4, 64, 8, 32, 1, 64, 64, 1, 6300);
        test_scan_bwd_tc("TC 2 chunks of 64 rows (two decay scan segments)", 2, 128, 2, 16, 1, 16, 64, 1, 6400);
        break;
    case 13: /* the last row only (the last Mamba2 block's tail) */
        test_last_row("default shape", 16, 64, 8, 32, 1, 64, 7400);
        test_last_row("G=2, H/G=4, K=64", 5, 64, 8, 16, 2, 24, 7500);
        test_last_row("odd K=37, H=6 P=5 G=3 N=7", 4, 37, 6, 5, 3, 7, 7600);
        if (!test_quick()) test_last_row("K=1024 (shared memory opt-in)", 2, 1024, 8, 32, 1, 64, 7700);
        test_last_row_bad_sizes();
        break;
    case 14: /* bf16 mode: the TC scans' compile-time shapes give the runtime shape's bits (the scan backward's:
              * the quad backward off) */
        st_cuda_ssd_set_scan_quad_backward(0);
        test_fixed_shape("fixed: default shape", 8, 64, 8, 32, 1, 64, 32, 1, 1, 7800);
        test_fixed_shape("fixed: tiny shape", 6, 32, 4, 16, 1, 16, 16, 1, 1, 7900);
        test_fixed_shape("fixed: default Q, P, N over 3 chunks, two groups", 4, 96, 8, 32, 2, 64, 32, 1, 0, 8000);
        test_fixed_shape("fixed: none (Q=16 at P=32, N=64: runtime shape)", 4, 64, 8, 32, 1, 64, 16, 0, 0, 8100);
        break;
    case 15: /* the last-row kernels' thread mapping at its edges (ssd_last_row.cu) */
        test_last_row("K=33 H=12 (heads past the 8 warps; lanes 17.. no rows)", 3, 33, 12, 8, 2, 20, 7800);
        test_last_row("K=1 (L = 0; dC's last row is row 0)", 4, 1, 3, 7, 1, 5, 7900);
        test_last_row("K=100 (4 rows a lane) P=40 N=96 (two lane rounds)", 3, 100, 2, 40, 1, 96, 8000);
        test_last_row("HP=288 GN=272 (past 256 threads: columns j, j+256)", 2, 50, 4, 72, 2, 136, 8100);
        test_last_row("H=P=N=1 (one column, 256 row slots, K=40)", 5, 40, 1, 1, 1, 1, 8200);
        if (!test_quick()) test_last_row_prefetch(300, 16, 8300);
        break;
    case 16: /* bf16 mode: the pair forward a (window, group) gives the (window, head) kernel's bits */
        test_heads("heads: default shape", 8, 64, 8, 32, 1, 64, 32, 8400);
        test_heads("heads: tiny shape", 6, 32, 4, 16, 1, 16, 16, 8500);
        test_heads("heads: default shape, two groups", 5, 64, 8, 32, 2, 64, 32, 8600);
        test_heads("heads: runtime shape, three groups (P=24 N=40)", 3, 32, 6, 24, 3, 40, 16, 8700);
        break;
    case 17: /* bf16 mode: the quad forward (windows of <= 64 rows as one chunk) */
        test_quad("quad: default shape", 7, 64, 8, 32, 1, 64, 32, 0, 0, 8800);
        test_quad("quad: default shape, dt=0.5 A=-16 (decays past float's range)", 3, 64, 8, 32, 1, 64, 32, 0, 1, 8900);
        test_quad("quad: K=32 (tiny shape)", 5, 32, 4, 16, 1, 16, 16, 0, 0, 9000);
        test_quad("quad: K=48 (3 row tiles; the walk when off)", 3, 48, 8, 32, 1, 64, 16, 0, 0, 9100);
        test_quad("quad: H=4 G=2 (2 heads a group), P=16 N=32", 5, 64, 4, 16, 2, 32, 32, 0, 0, 9200);
        test_quad("quad: P=64 (16 Y tiles: 2 a warp), N=32", 3, 64, 8, 64, 1, 32, 32, 1, 0, 9300);
        /* Q = 8: the walk when off has two chunks (one chunk of 16 would form the quad kernel's sums) */
        test_quad("quad: one head a group (H=2 G=2), K=16 (one tile)", 9, 16, 2, 32, 2, 16, 8, 0, 0, 9400);
        test_quad_rule();
        break;
    case 18: /* bf16 mode: the quad backward, a window as one chunk a (window, group) */
        test_scan_quad("quad: default shape", 7, 64, 8, 32, 1, 64, 32, 0, 9000);
        test_scan_quad("quad: H=4 G=2", 9, 64, 4, 32, 2, 64, 32, 0, 9100);
        /* one head a group (no ring, dG into W1), and 2 K (N+4) > 6 K (P+4): the epilogue's B, C above dX */
        test_scan_quad("quad: H=2 G=2, P=16 N=64", 5, 32, 2, 16, 2, 64, 16, 0, 9600);
        if (!test_quick()) {
            test_scan_quad("quad: H=6 G=2 (three heads: the ring of (X, dY) slots once round)", 3, 64, 6, 32, 2, 64, 32, 0,
                           9700);
            test_scan_quad("quad: K=32", 5, 32, 8, 32, 1, 64, 16, 0, 9200);
            test_scan_quad("quad: K=48 P=16 N=32, H=4 G=2", 3, 48, 4, 16, 2, 32, 16, 0, 9300);
            test_scan_quad("quad: P=64 N=32, H=4 G=2 (two column slices a lane)", 3, 64, 4, 64, 2, 32, 32, 0, 9500);
            test_scan_quad("quad: default shape, strong decays", 3, 64, 8, 32, 1, 64, 32, 1, 9400);
        }
        test_scan_quad_rule();
        break;
    case 19: { /* bf16 mode: the quad forward's heads over several blocks a (window, group) */
        static const int def[] = {1, 2, 3, 8}, odd[] = {1, 2, 3}, many[] = {1, 2, 5, 12}, two[] = {1, 2};
        test_quad_split("quad split: default shape, the act step's batch", 128, 64, 8, 32, 1, 64, 32, def, 4, 9500);
        test_quad_split("quad split: H=6 G=2 (3 heads a group), K=48 P=16 N=32", 5, 48, 6, 16, 2, 32, 16, odd, 3, 9600);
        test_quad_split("quad split: H=12 (3 rounds unsplit), K=64", 6, 64, 12, 32, 1, 64, 32, many, 4, 9700);
        test_quad_split("quad split: P=48 (slabs of 16 or 8 columns), K=32 N=16, H=4 G=2", 7, 32, 4, 48, 2, 16, 16, two,
                        2, 9800);
        test_quad_split("quad split: P=64, K=16, H=8", 4, 16, 8, 64, 1, 32, 16, def, 4, 9900);
        if (!test_quick())
            test_quad_split("quad split: default shape, 2 blocks an SM or more", 600, 64, 8, 32, 1, 64, 32, two, 2,
                            10000);
        break;
    }
    }
    set_paths(1, 1, 1);
    st_cuda_ssd_set_scan_tc_quad(1);
    st_cuda_ssd_set_scan_quad_backward(1);
}

static void run_all(void) {
    for (int i = 0; i <= 19; i++)
        if (test_part(i)) run_numbered(i);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    run_all();
#endif
    TEST_MAIN_END();
}
