/* test_cuda_model.c: the whole GPU model (cuda/model_cuda.h) against the CPU
 * float model (model/model.h) with the same flat weights (one upload of the
 * host copy), at the tiny, odd and default presets for 3 and 64 windows:
 *  - logits and value within 1e-5 relative (forward bound of issue 6);
 *  - every parameter tensor's gradient (added to from the same random start
 *    on both sides, measured against what was added) within 1e-4, the worst
 *    tensor printed;
 *  - the window gradient dX, snapshot columns and context columns (the sum
 *    of the VSN, w_in and head paths) apart, within 1e-4;
 *  - outputs poisoned with NaN before the GPU run; the window buffers padded
 *    with NaN gaps that must be neither read nor written;
 *  - two GPU runs give the same bits.
 * Named regression (DESIGN section 9): the window read with its own stride
 * F+C (the 56-wide row of the 40-wide snapshot) and the same window in a
 * padded buffer with NaN gaps give identical bits, and the backward without
 * dX gives the same parameter gradients.
 * bf16 (st_cuda_set_matmul_precision(ST_MATMUL_BF16): the model's linear
 * products on bf16 tensor cores, everything else fp32) at the tiny and
 * default presets, against the same CPU reference: logits, value and the
 * global gradient vector (every parameter gradient concatenated, measured
 * against what was added) within 2e-2 (issue 6); dX and each parameter
 * tensor printed, those above 5e-2 flagged but not failed (a tensor of
 * small gradients can amplify rounding); no NaN anywhere, dX's padding
 * untouched, two bf16 runs with the same bits, fp32 restored afterwards.
 * The action step's bar table (case 7, md_table_case): the forward through
 * it equals the plain forward bit for bit. The action step's forward from
 * the window's description, no window (case 8, md_rows_case): within 1e-5
 * (bf16 2e-2) of the window forward on the builder's windows, with and
 * without the table the same bits.
 * The training step's bar table (case 9, md_train_table_case): forward +
 * backward (dX not wanted, as the training step) through
 * st_cuda_model_forward_train_table against the per-row path on the same
 * inputs: logits, value and every parameter gradient within 1e-5 (fp32)
 * or 2e-2 (bf16) relative; outputs poisoned before each run; windows that
 * overlap (repeated bars, whole repeated windows: bars of many rows; and
 * a market of K bars, every window the same), and every row's bar
 * distinct; two runs through the table give the same
 * bits; a second minibatch of other bars through the same index after the
 * first (the index and table rebuilt, no state carried).
 * The last block's tail (case 10, md_tail_case; on by default, so cases
 * 0-9 run it against the CPU's full block): forward + backward with
 * st_cuda_model_set_last_row_tail(1) against (0) on the same inputs:
 * fp32 logits and value within 1e-5, dX and every parameter gradient
 * within 1e-4 (the same math, the SSD unrolled at the last rows instead of
 * chunked, products over n rows instead of n K: fp32 sums in other
 * orders); bf16 logits, value and the global gradient within 2e-2 (the
 * full block's SSD runs in TF32 there, the tail's in fp32); two runs with
 * the tail the same bits; the switch reads back.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "model/model.h"
#include "model/params.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/linear_cuda.h"
#include "cuda/mamba2_cuda.h" /* st_cuda_mamba2_last_fits */
#include "cuda/model_cuda.h"
#include "cuda/vsn_cuda.h"
#include "cuda/window_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
/* rows x width random normals at row stride `stride`, the gap poison. */
static float *host_rows(int rows, int width, int stride, float scale, uint64_t seed, uint32_t salt) {
    float *p = host_poisoned((size_t)rows * stride), *v = malloc(sizeof(float) * ((size_t)rows * width + 1));
    st_gc_randnf(v, (long)rows * width, scale, seed, salt);
    for (int r = 0; r < rows; r++)
        memcpy(p + (size_t)r * stride, v + (size_t)r * width, sizeof(float) * width);
    free(v);
    return p;
}

static long gap_written(const float *h, int rows, int width, int stride) {
    long bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = width; c < stride; c++)
            bad += !is_poison(h[(size_t)r * stride + c]);
    return bad;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* Inputs of one comparison. */
typedef struct {
    const char *name;
    st_dims d;
    st_param_table t;
    int n, rows, xs; /* windows, rows, window row stride */
    float *w, *g0, *X, *dlogits, *dvalue;
} md_data;

typedef struct {
    float *logits, *value, *g, *dX;
} md_out;

static void md_out_free(md_out *o) { free(o->logits), free(o->value), free(o->g), free(o->dX); }

/* The initial parameters (st_params_init_f32) nudged by small noise, so that
 * zero-initialised biases and the 0.01-scaled policy output carry gradients
 * of ordinary size and every tensor is exercised; K > 0 replaces the
 * preset's window length. */
static int md_setup_k(md_data *h, const char *name, const char *preset, int K, int n, int pad, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->name = name;
    if (st_dims_preset(preset, &h->d) != ST_OK) return 0;
    if (K > 0) h->d.K = K;
    if (st_param_table_build(&h->d, &h->t) != ST_OK) return 0;
    size_t P = h->t.total;
    h->n = n, h->rows = n * h->d.K, h->xs = h->d.F + h->d.C + pad;
    h->w = malloc(sizeof(float) * P);
    st_params_init_f32(&h->t, seed, h->w);
    float *noise = host_rows(1, (int)P, (int)P, 0.02f, seed, 1);
    for (size_t i = 0; i < P; i++)
        h->w[i] += noise[i];
    free(noise);
    h->g0 = host_rows(1, (int)P, (int)P, 0.1f, seed, 2);
    h->X = host_rows(h->rows, h->d.F + h->d.C, h->xs, 1.0f, seed, 3);
    h->dlogits = host_rows(n, h->d.A, h->d.A, 1.0f, seed, 4);
    h->dvalue = host_rows(1, n, n, 1.0f, seed, 5);
    return 1;
}

static int md_setup(md_data *h, const char *name, const char *preset, int n, int pad, uint64_t seed) {
    return md_setup_k(h, name, preset, 0, n, pad, seed);
}

static void md_free(md_data *h) {
    st_param_table_free(&h->t);
    free(h->w), free(h->g0), free(h->X), free(h->dlogits), free(h->dvalue);
}

static void md_cpu(const md_data *h, md_out *o) {
    int n = h->n, A = h->d.A;
    st_model m;
    o->g = host_copy(h->g0, h->t.total);
    o->logits = host_poisoned((size_t)n * A), o->value = host_poisoned(n);
    o->dX = host_poisoned((size_t)h->rows * h->xs);
    int rc = st_model_init(&m, &h->d, &h->t, n, h->w, o->g);
    CHECK(rc == ST_OK, "%s: CPU model init: %s", h->name, st_last_error());
    if (rc != ST_OK) return;
    st_model_forward(&m, n, h->X, h->xs, o->logits, A, o->value);
    st_model_backward(&m, h->dlogits, A, h->dvalue, o->dX, h->xs);
    st_model_free(&m);
}

/* One GPU forward + backward (dX NULL when want_dx is 0). */
static void md_gpu(const md_data *h, int want_dx, md_out *o) {
    int n = h->n, A = h->d.A;
    size_t P = h->t.total, nx = (size_t)h->rows * h->xs;
    float *w = dev_upload(h->w, P), *g = dev_upload(h->g0, P), *X = dev_upload(h->X, nx);
    float *dlogits = dev_upload(h->dlogits, (size_t)n * A), *dvalue = dev_upload(h->dvalue, n);
    float *logits = dev_poisoned((size_t)n * A), *value = dev_poisoned(n), *dX = want_dx ? dev_poisoned(nx) : NULL;
    st_cuda_model m;
    int rc = st_cuda_model_init(&m, &h->d, &h->t, n + 2, w, g); /* room for more windows than used */
    CHECK(rc == ST_OK, "%s: GPU model init: %s", h->name, st_last_error());
    if (rc == ST_OK) {
        rc = st_cuda_model_forward(&m, n, X, h->xs, logits, A, value);
        CHECK(rc == ST_OK, "%s: GPU forward: %s", h->name, st_last_error());
        rc = st_cuda_model_backward(&m, dlogits, A, dvalue, dX, h->xs);
        CHECK(rc == ST_OK, "%s: GPU backward: %s", h->name, st_last_error());
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", h->name,
              cudaGetErrorString(cudaGetLastError()));
        st_cuda_model_free(&m);
    }
    o->logits = dev_download_new(logits, (size_t)n * A), o->value = dev_download_new(value, n);
    o->g = dev_download_new(g, P);
    o->dX = want_dx ? dev_download_new(dX, nx) : NULL;
    dev_free(w), dev_free(g), dev_free(X), dev_free(dlogits), dev_free(dvalue), dev_free(logits), dev_free(value);
    if (dX) dev_free(dX);
}

/* Every parameter tensor within the bound; prints the worst. */
static void md_check_grads(const md_data *h, const md_out *cpu, const md_out *gpu) {
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < h->t.n; i++) {
        const st_param *p = &h->t.p[i];
        double e = rel_err_added(gpu->g + p->offset, cpu->g + p->offset, h->g0 + p->offset, p->count);
        CHECK(e <= 1e-4, "%s: gradient of %s: GPU vs CPU rel err %.3e > 1e-4", h->name, p->name, e);
        if (!(e <= worst)) worst = e, worst_name = p->name;
    }
    char what[96];
    snprintf(what, sizeof what, "%s worst of %d grads (%s)", h->name, h->t.n, worst_name);
    printf("  %-36s rel err %.3e (bound 1e-04)\n", what, worst);
}

static void md_compare(const md_data *h, const md_out *cpu, const md_out *gpu) {
    int n = h->n, A = h->d.A, F = h->d.F, C = h->d.C, rows = h->rows;
    char what[96];
#define PARITY(label, err, bound)                                                                                      \
    do {                                                                                                               \
        snprintf(what, sizeof what, "%s %s", h->name, (label));                                                        \
        CHECK_PARITY(what, (err), (bound));                                                                            \
    } while (0)
    PARITY("logits", rel_err_rows(gpu->logits, A, cpu->logits, A, n, A), 1e-5);
    PARITY("value", rel_err(gpu->value, cpu->value, n), 1e-5);
    PARITY("dX snapshot", rel_err_rows(gpu->dX, h->xs, cpu->dX, h->xs, rows, F), 1e-4);
    PARITY("dX context", rel_err_rows(gpu->dX + F, h->xs, cpu->dX + F, h->xs, rows, C), 1e-4);
#undef PARITY
    md_check_grads(h, cpu, gpu);
    long gaps = gap_written(gpu->dX, rows, F + C, h->xs);
    CHECK(gaps == 0, "%s: %ld values written in dX's padding", h->name, gaps);
}

static int md_same(const md_data *h, const md_out *a, const md_out *b, int with_dx) {
    int same = same_bits(a->logits, b->logits, (size_t)h->n * h->d.A) && same_bits(a->value, b->value, h->n) &&
               same_bits(a->g, b->g, h->t.total);
    if (with_dx)
        for (int r = 0; r < h->rows; r++)
            same &= same_bits(a->dX + (size_t)r * h->xs, b->dX + (size_t)r * h->xs, h->d.F + h->d.C);
    return same;
}

/* ---- bf16 ---- */

#define BF16_BOUND 2e-2 /* logits, value, the global gradient (issue 6) */
#define BF16_FLAG 5e-2  /* dX and single tensors above this are flagged, not failed */

/* Non-finite values in a rows x cols block at row stride `stride`. */
static long count_nonfinite(const float *a, int rows, int cols, int stride) {
    long bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            bad += !isfinite(a[(size_t)r * stride + c]);
    return bad;
}

static void bf16_report(const char *what, double err) {
    printf("  %-44s rel err %.3e%s\n", what, err, err > BF16_FLAG ? "  FLAG: above 5e-2 (not failed)" : "");
}

static void md_compare_bf16(const md_data *h, const md_out *cpu, const md_out *gpu) {
    int n = h->n, A = h->d.A, F = h->d.F, C = h->d.C, rows = h->rows;
    size_t P = h->t.total;
    char what[112];
    long bad = count_nonfinite(gpu->logits, n, A, A) + count_nonfinite(gpu->value, 1, n, n) +
               count_nonfinite(gpu->dX, rows, F + C, h->xs) + count_nonfinite(gpu->g, 1, (int)P, (int)P);
    CHECK(bad == 0, "%s bf16: %ld non-finite values in logits, value, dX or the gradients", h->name, bad);
    snprintf(what, sizeof what, "%s bf16 logits", h->name);
    CHECK_PARITY(what, rel_err_rows(gpu->logits, A, cpu->logits, A, n, A), BF16_BOUND);
    snprintf(what, sizeof what, "%s bf16 value", h->name);
    CHECK_PARITY(what, rel_err(gpu->value, cpu->value, n), BF16_BOUND);
    /* the global gradient vector, against what was added to it */
    double d = 0, s = 0;
    for (size_t i = 0; i < P; i++) {
        double e = (double)gpu->g[i] - cpu->g[i], a = (double)cpu->g[i] - h->g0[i];
        d += e * e, s += a * a;
    }
    double global = bad ? INFINITY : s > 0 ? sqrt(d / s) : sqrt(d);
    snprintf(what, sizeof what, "%s bf16 all %d grads", h->name, h->t.n);
    CHECK_PARITY(what, global, BF16_BOUND);
    snprintf(what, sizeof what, "%s bf16 dX snapshot", h->name);
    bf16_report(what, rel_err_rows(gpu->dX, h->xs, cpu->dX, h->xs, rows, F));
    snprintf(what, sizeof what, "%s bf16 dX context", h->name);
    bf16_report(what, rel_err_rows(gpu->dX + F, h->xs, cpu->dX + F, h->xs, rows, C));
    int flagged = 0;
    for (int i = 0; i < h->t.n; i++) {
        const st_param *p = &h->t.p[i];
        double e = rel_err_added(gpu->g + p->offset, cpu->g + p->offset, h->g0 + p->offset, p->count);
        snprintf(what, sizeof what, "  grad %s", p->name);
        bf16_report(what, e);
        flagged += e > BF16_FLAG;
    }
    printf("  %s bf16: %d of %d gradient tensors above 5e-2\n", h->name, flagged, h->t.n);
    long gaps = gap_written(gpu->dX, rows, F + C, h->xs);
    CHECK(gaps == 0, "%s bf16: %ld values written in dX's padding", h->name, gaps);
}

/* The bf16 section of one case: two GPU runs against the CPU reference
 * already computed; the switch is back at fp32 afterwards. */
static void md_bf16_run(const md_data *h, const md_out *cpu) {
    md_out gpu[2];
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    md_gpu(h, 1, &gpu[0]);
    md_gpu(h, 1, &gpu[1]);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    CHECK(st_cuda_matmul_precision() == ST_MATMUL_FP32, "%s: fp32 not restored after the bf16 section", h->name);
    md_compare_bf16(h, cpu, &gpu[0]);
    CHECK(md_same(h, &gpu[0], &gpu[1], 1), "%s bf16: two GPU runs differ", h->name);
    md_out_free(&gpu[0]), md_out_free(&gpu[1]);
}

static void md_case_run(const char *name, const char *preset, int n, int pad, uint64_t seed) {
    md_data h;
    if (!md_setup(&h, name, preset, n, pad, seed)) {
        CHECK(0, "%s: setup: %s", name, st_last_error());
        return;
    }
    printf("%s: n %d K %d F %d C %d D %d L %d, %zu parameters, window stride %d\n", name, n, h.d.K, h.d.F, h.d.C, h.d.D,
           h.d.L, h.t.total, h.xs);
    md_out cpu, gpu[2];
    md_cpu(&h, &cpu);
    md_gpu(&h, 1, &gpu[0]);
    md_gpu(&h, 1, &gpu[1]);
    md_compare(&h, &cpu, &gpu[0]);
    CHECK(md_same(&h, &gpu[0], &gpu[1], 1), "%s: two GPU runs differ", name);
    if (strcmp(preset, "odd") != 0) md_bf16_run(&h, &cpu); /* bf16 at the tiny and default presets */
    md_out_free(&cpu), md_out_free(&gpu[0]), md_out_free(&gpu[1]);
    md_free(&h);
}

/* The named regression: the window read through its own stride F+C, and
 * the same values in a buffer with a NaN gap after each row. */
static void md_stride_regression(void) {
    md_data tight, wide;
    const char *name = "regression: window stride F+C vs padded";
    if (!md_setup(&tight, name, "tiny", 3, 0, 7100) || !md_setup(&wide, name, "tiny", 3, 9, 7100)) {
        CHECK(0, "%s: setup: %s", name, st_last_error());
        return;
    }
    CHECK(tight.xs == tight.d.F + tight.d.C && tight.xs != tight.d.F, "%s: the tight stride is F+C", name);
    for (int r = 0; r < tight.rows; r++) /* same values, different stride */
        CHECK(memcmp(tight.X + (size_t)r * tight.xs, wide.X + (size_t)r * wide.xs, sizeof(float) * tight.xs) == 0,
              "%s: window row %d differs between the buffers", name, r);
    md_out cpu, a, b, c;
    md_cpu(&tight, &cpu);
    md_gpu(&tight, 1, &a);
    md_gpu(&wide, 1, &b);
    md_gpu(&wide, 0, &c);
    md_compare(&tight, &cpu, &a);
    int same = same_bits(a.logits, b.logits, 3 * (size_t)tight.d.A) && same_bits(a.value, b.value, 3) &&
               same_bits(a.g, b.g, tight.t.total);
    for (int r = 0; r < tight.rows; r++)
        same &= same_bits(a.dX + (size_t)r * tight.xs, b.dX + (size_t)r * wide.xs, tight.xs);
    CHECK(same, "%s: the padded window gives other bits than the F+C-stride window", name);
    long gaps = gap_written(b.dX, wide.rows, wide.d.F + wide.d.C, wide.xs);
    CHECK(gaps == 0, "%s: %ld values written in the padded dX's gaps", name, gaps);
    CHECK(same_bits(b.g, c.g, wide.t.total) && same_bits(b.logits, c.logits, 3 * (size_t)wide.d.A),
          "%s: the backward without dX gives other parameter gradients", name);
    printf("  %-36s %s\n", "stride F+C vs padded: bits", same ? "identical" : "DIFFER");
    md_out_free(&cpu), md_out_free(&a), md_out_free(&b), md_out_free(&c);
    md_free(&tight), md_free(&wide);
}

/* md_setup of n unpadded windows under the name "<what>, <preset> x<n>[ bf16]"; 0 (a failed check) if it fails. */
static int md_named_setup(md_data *h, char *name, size_t cap, const char *what, const char *preset, int n, int bf16,
                          uint64_t seed) {
    snprintf(name, cap, "%s, %s x%d%s", what, preset, n, bf16 ? " bf16" : "");
    int ok = md_setup(h, name, preset, n, 0, seed);
    CHECK(ok, "%s: setup: %s", name, st_last_error());
    return ok;
}

/* The action step's bar table (cuda/model_cuda.h): windows built from a
 * market of `bars` random snapshot rows (row stride F + 3, NaN gaps), each
 * window n ending at a random bar, its context random and broadcast. The
 * forward through the table (built from the bar rows, each window row
 * named by its bar) gives the plain forward's logits and value bit for
 * bit, and the backward after it the same gradients and dX; in fp32 and,
 * where bf16 is set, bf16. The table's v is the fused forward's
 * (st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED_LARGE): the one-pass combine in
 * variable order); a preset whose Dv takes no table (odd: Dv 5) is
 * refused with a message. */
static void md_table_case(const char *preset, int n, int bars, int bf16, uint64_t seed) {
    md_data h;
    char name[64];
    if (!md_named_setup(&h, name, sizeof name, "bar table", preset, n, bf16, seed)) return;
    const st_dims *d = &h.d;
    const int K = d->K, F = d->F, C = d->C, A = d->A, bs = F + 3;
    size_t P = h.t.total, nx = (size_t)h.rows * h.xs;
    float *feat = host_rows(bars, F, bs, 1.0f, seed, 11), *ctx = host_rows(n, C, C, 1.0f, seed, 12);
    int *tab_row = malloc(sizeof(int) * (size_t)h.rows);
    uint64_t u = seed * 2654435761u + 1;
    for (int b = 0; b < n; b++) {
        u = u * 6364136223846793005u + 1442695040888963407u;
        int end = K - 1 + (int)((u >> 33) % (uint64_t)(bars - K + 1)); /* any window that fits */
        if (b == 0) end = K - 1;                                       /* the first bars */
        if (b == 1) end = bars - 1;                                    /* the last */
        for (int k = 0; k < K; k++) {
            int r = b * K + k, bar = end - K + 1 + k;
            tab_row[r] = bar;
            memcpy(h.X + (size_t)r * h.xs, feat + (size_t)bar * bs, sizeof(float) * F);
            memcpy(h.X + (size_t)r * h.xs + F, ctx + (size_t)b * C, sizeof(float) * C);
        }
    }
    float *w = dev_upload(h.w, P), *X = dev_upload(h.X, nx), *dfeat = dev_upload(feat, (size_t)bars * bs);
    float *dlogits = dev_upload(h.dlogits, (size_t)n * A), *dvalue = dev_upload(h.dvalue, n);
    int *drow = dev_bytes(tab_row, sizeof(int) * (size_t)h.rows);
    st_cuda_model m;
    float *g = dev_upload(h.g0, P);
    int rc = st_cuda_model_init(&m, d, &h.t, n, w, g);
    CHECK(rc == ST_OK, "%s: GPU model init: %s", name, st_last_error());
    if (rc != ST_OK) goto done;
    if (!st_cuda_model_table_fits(&m)) {
        CHECK(strcmp(preset, "odd") == 0, "%s: Dv = %d should take a table", name, d->Dv);
        float *logits = dev_poisoned((size_t)n * A), *value = dev_poisoned(n);
        rc = st_cuda_model_forward_table(&m, n, X, h.xs, dfeat, drow, logits, A, value);
        CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "Dv"), "%s: a forward through a table is refused (%s)",
              name, st_last_error());
        printf("  %-36s refused: %s\n", name, st_last_error());
        dev_free(logits), dev_free(value);
        st_cuda_model_free(&m);
        goto done;
    }
    st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED_LARGE);
    if (bf16) st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    float *tab = dev_poisoned((size_t)bars * F * d->Dv);
    md_out out[2];
    for (int via = 0; via < 2; via++) { /* 0: the plain forward, 1: through the table */
        float *logits = dev_poisoned((size_t)n * A), *value = dev_poisoned(n), *dX = dev_poisoned(nx);
        CHECK(cudaMemcpy(g, h.g0, sizeof(float) * P, cudaMemcpyHostToDevice) == cudaSuccess, "%s: upload", name);
        if (via) {
            rc = st_cuda_model_table_build(&m, bars, dfeat, bs, tab);
            CHECK(rc == ST_OK, "%s: table build: %s", name, st_last_error());
            rc = st_cuda_model_forward_table(&m, n, X, h.xs, tab, drow, logits, A, value);
        } else {
            rc = st_cuda_model_forward(&m, n, X, h.xs, logits, A, value);
        }
        CHECK(rc == ST_OK, "%s: forward %d: %s", name, via, st_last_error());
        rc = st_cuda_model_backward(&m, dlogits, A, dvalue, dX, h.xs);
        CHECK(rc == ST_OK, "%s: backward %d: %s", name, via, st_last_error());
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", name,
              cudaGetErrorString(cudaGetLastError()));
        out[via].logits = dev_download_new(logits, (size_t)n * A), out[via].value = dev_download_new(value, n);
        out[via].g = dev_download_new(g, P), out[via].dX = dev_download_new(dX, nx);
        dev_free(logits), dev_free(value), dev_free(dX);
    }
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED);
    long bad = count_nonfinite(out[1].logits, n, A, A) + count_nonfinite(out[1].value, 1, n, n);
    CHECK(bad == 0, "%s: %ld non-finite logits/values through the table", name, bad);
    int same = md_same(&h, &out[0], &out[1], 1);
    CHECK(same, "%s: the forward through the table gives other bits than the plain forward", name);
    printf("  %-36s %s (%d bars, %d windows)\n", name, same ? "identical" : "DIFFER", bars, n);
    /* and the table against a second build in the same precision (bf16 mode's fill runs on the
     * tensor cores): the same bits (a fixed order, no atomics) */
    float *tab2 = dev_poisoned((size_t)bars * F * d->Dv);
    if (bf16) st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    CHECK(st_cuda_model_table_build(&m, bars, dfeat, bs, tab2) == ST_OK, "%s: second build", name);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    float *t1 = dev_download_new(tab, (size_t)bars * F * d->Dv), *t2 = dev_download_new(tab2, (size_t)bars * F * d->Dv);
    CHECK(same_bits(t1, t2, (size_t)bars * F * d->Dv) && count_nonfinite(t1, bars, F * d->Dv, F * d->Dv) == 0,
          "%s: two table builds differ, or the table holds a non-finite (unwritten) value", name);
    free(t1), free(t2);
    dev_free(tab), dev_free(tab2);
    md_out_free(&out[0]), md_out_free(&out[1]);
    st_cuda_model_free(&m);
done:
    dev_free(w), dev_free(g), dev_free(X), dev_free(dfeat), dev_free(dlogits), dev_free(dvalue), dev_free(drow);
    free(feat), free(ctx), free(tab_row);
    md_free(&h);
}

/* Windows of a random market, in two forms: the window builder's
 * materialised [n K, F + C] rows, and their description (the feature-row
 * index of st_cuda_window_feature_rows and the context [n, C]). */
typedef struct {
    st_cuda_features feat; /* 2 instruments, row stride F + 3 with NaN gaps */
    int *inst, *bar, *row; /* device [n], [n], [n K] */
    float *ctx;            /* device [n, C + 2], NaN gaps */
    float *X;              /* device [n K, xs], xs = F + C + 1, NaN gaps */
    int xs, cs;
} md_rows_in;

static void md_rows_in_free(md_rows_in *in) {
    st_cuda_features_free(&in->feat);
    dev_free(in->inst), dev_free(in->bar), dev_free(in->row), dev_free(in->ctx), dev_free(in->X);
}

static int md_rows_in_make(md_rows_in *in, const st_dims *d, int n, int bars0, int bars1, uint64_t seed) {
    const int K = d->K, F = d->F, C = d->C, fs = F + 3, bars = bars0 + bars1;
    memset(in, 0, sizeof *in);
    in->xs = F + C + 1, in->cs = C + 2;
    float *feat = host_rows(bars, F, fs, 1.0f, seed, 21), *ctx = host_rows(n, C, in->cs, 1.0f, seed, 22);
    int *inst = malloc(sizeof(int) * (size_t)n), *bar = malloc(sizeof(int) * (size_t)n);
    uint64_t u = seed * 2654435761u + 3;
    for (int b = 0; b < n; b++) {
        u = u * 6364136223846793005u + 1442695040888963407u;
        inst[b] = (int)((u >> 40) & 1);
        int nb = inst[b] ? bars1 : bars0;
        bar[b] = K - 1 + (int)((u >> 33) % (uint64_t)(nb - K + 1)); /* any window that fits */
        if (b == 0) inst[b] = 0, bar[b] = K - 1;                    /* the first bars of the first instrument */
        if (b == 1) inst[b] = 1, bar[b] = bars1 - 1;                /* the last of the last */
    }
    in->feat.n_inst = 2, in->feat.F = fs, in->feat.rows = bars;
    in->feat.data = dev_upload(feat, (size_t)bars * fs);
    const float *ptrs[2] = {in->feat.data, in->feat.data ? in->feat.data + (size_t)bars0 * fs : NULL};
    in->feat.inst = dev_bytes(ptrs, sizeof ptrs);
    in->inst = dev_bytes(inst, sizeof(int) * (size_t)n), in->bar = dev_bytes(bar, sizeof(int) * (size_t)n);
    in->row = dev_bytes(NULL, sizeof(int) * (size_t)n * K);
    in->ctx = dev_upload(ctx, (size_t)n * in->cs);
    in->X = dev_poisoned((size_t)n * K * in->xs);
    free(feat), free(ctx), free(inst), free(bar);
    if (!in->feat.data || !in->feat.inst || !in->inst || !in->bar || !in->row || !in->ctx || !in->X) return 0;
    int rc = st_cuda_window_build(n, K, F, C, (const float *const *)in->feat.inst, fs, in->inst, in->bar, in->ctx,
                                  in->cs, in->X, in->xs, NULL);
    if (rc == ST_OK) rc = st_cuda_window_feature_rows(n, K, &in->feat, in->inst, in->bar, in->row, NULL);
    return rc == ST_OK && cudaDeviceSynchronize() == cudaSuccess;
}

/* The action step's forward from the window's description
 * (st_cuda_model_forward_rows) against the window forward on the windows
 * the window builder made of the same market and context: logits and value
 * within 1e-5 relative in fp32 (2e-2 in bf16; the selection GRN's ctx
 * product is formed once a window, another cuBLAS shape); the [v; c] input
 * of w_in (the act_w_in_in label's buffer) with its context columns the
 * same bits as the window forward's; through the bar table (where Dv takes
 * one) the same bits as without, and every v NaN through a NaN table (the
 * table is read, not only built); two runs the same bits; outputs (and
 * [v; c]) poisoned before each run,
 * the feature rows, context and window in buffers with NaN gaps; a
 * backward after it refused with a message. */
static void md_rows_case(const char *preset, int n, int bf16, uint64_t seed) {
    md_data h;
    char name[64];
    if (!md_named_setup(&h, name, sizeof name, "window rows", preset, n, bf16, seed)) return;
    const st_dims *d = &h.d;
    const int K = d->K, F = d->F, C = d->C, A = d->A, Dv = d->Dv, vcw = Dv + C;
    size_t P = h.t.total, nvc = (size_t)n * K * vcw;
    md_rows_in in;
    st_cuda_model m;
    int made = md_rows_in_make(&in, d, n, 3 * K + 5, 2 * K + 1, seed);
    CHECK(made, "%s: inputs: %s", name, st_last_error());
    float *w = dev_upload(h.w, P), *g = dev_upload(h.g0, P), *tab = NULL;
    int rc = made ? st_cuda_model_init(&m, d, &h.t, n + 1, w, g) : ST_ERR_INTERNAL;
    CHECK(!made || rc == ST_OK, "%s: GPU model init: %s", name, st_last_error());
    if (rc != ST_OK) goto done;
    int has_tab = st_cuda_model_table_fits(&m);
    if (has_tab) tab = dev_poisoned((size_t)in.feat.rows * F * Dv);
    if (bf16) st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    /* runs: 0 the window forward, 1 and 2 from the rows (twice), 3 from the rows through the table */
    float *lg[4] = {0}, *val[4] = {0}, *vc[4] = {0};
    int runs = has_tab ? 4 : 3;
    for (int i = 0; i < runs; i++) {
        float *logits = dev_poisoned((size_t)n * A), *value = dev_poisoned(n);
        CHECK(cudaMemset(m.vc, 0xFF, sizeof(float) * nvc) == cudaSuccess, "%s: poison [v; c]", name);
        if (i == 3) {
            rc = st_cuda_model_table_build(&m, in.feat.rows, in.feat.data, in.feat.F, tab);
            CHECK(rc == ST_OK, "%s: table build: %s", name, st_last_error());
        }
        if (i == 0)
            rc = st_cuda_model_forward(&m, n, in.X, in.xs, logits, A, value);
        else
            rc = st_cuda_model_forward_rows(&m, n, in.feat.data, in.feat.F, in.row, in.ctx, in.cs, i == 3 ? tab : NULL,
                                            logits, A, value);
        CHECK(rc == ST_OK, "%s: forward %d: %s", name, i, st_last_error());
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels of run %d failed: %s", name, i,
              cudaGetErrorString(cudaGetLastError()));
        lg[i] = dev_download_new(logits, (size_t)n * A), val[i] = dev_download_new(value, n);
        vc[i] = dev_download_new(m.vc, nvc);
        dev_free(logits), dev_free(value);
    }
    if (has_tab) { /* the table is read, not only built: all NaN, every row's v is NaN */
        float *logits = dev_upload(NULL, (size_t)n * A), *value = dev_upload(NULL, n);
        int ok = logits && value && cudaMemset(tab, 0xFF, sizeof(float) * (size_t)in.feat.rows * F * Dv) == cudaSuccess;
        rc = ok ? st_cuda_model_forward_rows(&m, n, in.feat.data, in.feat.F, in.row, in.ctx, in.cs, tab, logits, A,
                                             value)
                : ST_ERR_INTERNAL;
        CHECK(rc == ST_OK && cudaDeviceSynchronize() == cudaSuccess, "%s: forward through a NaN table: %s", name,
              st_last_error());
        float *v = dev_download_new(m.vsn_v, (size_t)n * K * Dv);
        long nan_v = count_nonfinite(v, n * K, Dv, Dv);
        CHECK(nan_v == (long)n * K * Dv,
              "%s: through a NaN table %ld of %ld v values are NaN (the forward must read "
              "every row's v from the table)",
              name, nan_v, (long)n * K * Dv);
        free(v);
        dev_free(logits), dev_free(value);
    }
    /* no backward after a forward from rows: it has no window */
    float *dlogits = dev_upload(h.dlogits, (size_t)n * A), *dvalue = dev_upload(h.dvalue, n);
    rc = st_cuda_model_backward(&m, dlogits, A, dvalue, NULL, 0);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "window"), "%s: a backward after the rows forward is refused "
          "(rc %d: %s)", name, rc, st_last_error());
    dev_free(dlogits), dev_free(dvalue);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    const double bound = bf16 ? BF16_BOUND : 1e-5;
    long bad = 0;
    for (int i = 0; i < runs; i++) bad += count_nonfinite(lg[i], n, A, A) + count_nonfinite(val[i], 1, n, n);
    CHECK(bad == 0, "%s: %ld non-finite logits/values", name, bad);
    char what[112];
    snprintf(what, sizeof what, "%s logits", name);
    CHECK_PARITY(what, rel_err_rows(lg[1], A, lg[0], A, n, A), bound);
    snprintf(what, sizeof what, "%s value", name);
    CHECK_PARITY(what, rel_err(val[1], val[0], n), bound);
    snprintf(what, sizeof what, "%s w_in input v", name);
    CHECK_PARITY(what, rel_err_rows(vc[1], vcw, vc[0], vcw, n * K, Dv), bound);
    int ctx_same = 1;
    for (int r = 0; r < n * K; r++) ctx_same &= same_bits(vc[1] + (size_t)r * vcw + Dv, vc[0] + (size_t)r * vcw + Dv, C);
    CHECK(ctx_same, "%s: the context columns of w_in's input differ from the window forward's", name);
    CHECK(same_bits(lg[1], lg[2], (size_t)n * A) && same_bits(val[1], val[2], n) && same_bits(vc[1], vc[2], nvc),
          "%s: two forwards from the rows differ", name);
    if (has_tab) {
        int same = same_bits(lg[1], lg[3], (size_t)n * A) && same_bits(val[1], val[3], n) &&
                   same_bits(vc[1], vc[3], nvc);
        CHECK(same, "%s: the forward from the rows through the bar table gives other bits than without", name);
        printf("  %-36s table on/off %s\n", name, same ? "identical" : "DIFFER");
    } else {
        printf("  %-36s (Dv %d takes no bar table)\n", name, Dv);
    }
    for (int i = 0; i < runs; i++) free(lg[i]), free(val[i]), free(vc[i]);
    st_cuda_model_free(&m);
done:
    md_rows_in_free(&in);
    dev_free(w), dev_free(g), dev_free(tab);
    md_free(&h);
}

/* The feature rows of case 9: `overlap` 1: n windows of K consecutive bars
 * over `bars` bars at random ends, windows 1 and 2 the same (a bar of many
 * rows), window 0 at the first bars; 0: every row a bar of its own, in a
 * shuffled order (bars >= rows). X's snapshot columns copied from feat. */
static void tt_rows(md_data *h, const float *feat, int bs, const float *ctx, int bars, int overlap, uint64_t u,
                    int *bar_rows) {
    const int K = h->d.K, F = h->d.F, C = h->d.C, n = h->n;
    for (int r = 0; r < h->rows; r++)
        bar_rows[r] = r;
    for (int b = 0; b < n; b++) {
        u = u * 6364136223846793005u + 1442695040888963407u;
        int end = K - 1 + (int)((u >> 33) % (uint64_t)(bars - K + 1));
        if (b == 0) end = K - 1;
        for (int k = 0; k < K; k++) {
            int r = b * K + k;
            if (overlap) bar_rows[r] = b == 2 ? bar_rows[K + k] : end - K + 1 + k;
        }
    }
    if (!overlap)
        for (int r = h->rows - 1; r > 0; r--) { /* Fisher-Yates over the rows' distinct bars */
            u = u * 6364136223846793005u + 1442695040888963407u;
            int q = (int)((u >> 33) % (uint64_t)(r + 1)), t = bar_rows[r];
            bar_rows[r] = bar_rows[q], bar_rows[q] = t;
        }
    for (int r = 0; r < h->rows; r++) {
        memcpy(h->X + (size_t)r * h->xs, feat + (size_t)bar_rows[r] * bs, sizeof(float) * F);
        memcpy(h->X + (size_t)r * h->xs + F, ctx + (size_t)(r / K) * C, sizeof(float) * C);
    }
}

/* One forward + backward (dX NULL) on model m, through the training table
 * (bar_rows) or per row (NULL); outputs poisoned first. */
static void tt_run(const md_data *h, st_cuda_model *m, float *g, const float *X, const int *bar_rows,
                   const float *dlogits, const float *dvalue, md_out *o) {
    const int n = h->n, A = h->d.A;
    const size_t P = h->t.total;
    float *logits = dev_poisoned((size_t)n * A), *value = dev_poisoned(n);
    CHECK(cudaMemcpy(g, h->g0, sizeof(float) * P, cudaMemcpyHostToDevice) == cudaSuccess, "%s: upload", h->name);
    int rc = bar_rows ? st_cuda_model_forward_train_table(m, n, X, h->xs, bar_rows, logits, A, value)
                      : st_cuda_model_forward(m, n, X, h->xs, logits, A, value);
    CHECK(rc == ST_OK, "%s: forward (%s): %s", h->name, bar_rows ? "table" : "per row", st_last_error());
    rc = st_cuda_model_backward(m, dlogits, A, dvalue, NULL, 0);
    CHECK(rc == ST_OK, "%s: backward (%s): %s", h->name, bar_rows ? "table" : "per row", st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", h->name,
          cudaGetErrorString(cudaGetLastError()));
    o->logits = dev_download_new(logits, (size_t)n * A), o->value = dev_download_new(value, n);
    o->g = dev_download_new(g, P), o->dX = NULL;
    dev_free(logits), dev_free(value);
}

static void md_train_table_case(const char *preset, int n, int bars, int overlap, int bf16, uint64_t seed) {
    md_data h;
    char name[80];
    char over[32] = "distinct";
    if (overlap) snprintf(over, sizeof over, "over %d bars", bars);
    snprintf(name, sizeof name, "train table, %s x%d %s%s", preset, n, over, bf16 ? " bf16" : "");
    if (!md_setup(&h, name, preset, n, 2, seed)) {
        CHECK(0, "%s: setup: %s", name, st_last_error());
        return;
    }
    const st_dims *d = &h.d;
    const int F = d->F, C = d->C, A = d->A, bs = F + 3;
    if (!overlap && bars < h.rows) bars = h.rows;
    const size_t P = h.t.total, nx = (size_t)h.rows * h.xs;
    float *feat = host_rows(bars, F, bs, 1.0f, seed, 11), *ctx = host_rows(n, C, C, 1.0f, seed, 12);
    int *bar_rows = malloc(sizeof(int) * (size_t)h.rows);
    tt_rows(&h, feat, bs, ctx, bars, overlap, seed * 2654435761u + 1, bar_rows);
    float *w = dev_upload(h.w, P), *g = dev_upload(h.g0, P), *X = dev_upload(h.X, nx);
    float *dlogits = dev_upload(h.dlogits, (size_t)n * A), *dvalue = dev_upload(h.dvalue, n);
    int *drows = dev_bytes(bar_rows, sizeof(int) * (size_t)h.rows);
    st_cuda_model m;
    int rc = st_cuda_model_init(&m, d, &h.t, n + 1, w, g); /* room for a window more than used */
    CHECK(rc == ST_OK, "%s: GPU model init: %s", name, st_last_error());
    if (rc != ST_OK) goto done;
    if (!st_cuda_model_table_fits(&m)) { /* the odd preset's Dv: refused with a reason */
        rc = st_cuda_model_train_table_init(&m, bars, NULL, 0);
        CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "Dv"), "%s: a training table is refused (%s)", name,
              st_last_error());
        printf("  %-44s refused: %s\n", name, st_last_error());
        st_cuda_model_free(&m);
        goto done;
    }
    rc = st_cuda_model_train_table_init(&m, bars, NULL, 0);
    CHECK(rc == ST_OK, "%s: training table init: %s", name, st_last_error());
    if (rc != ST_OK) {
        st_cuda_model_free(&m);
        goto done;
    }
    if (bf16) st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    md_out out[3];
    tt_run(&h, &m, g, X, NULL, dlogits, dvalue, &out[0]);
    tt_run(&h, &m, g, X, drows, dlogits, dvalue, &out[1]);
    tt_run(&h, &m, g, X, drows, dlogits, dvalue, &out[2]);
    const double bound = bf16 ? BF16_BOUND : 1e-5;
    char what[160];
    snprintf(what, sizeof what, "%s logits", name);
    CHECK_PARITY(what, rel_err_rows(out[1].logits, A, out[0].logits, A, n, A), bound);
    snprintf(what, sizeof what, "%s value", name);
    CHECK_PARITY(what, rel_err(out[1].value, out[0].value, n), bound);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < h.t.n; i++) {
        const st_param *p = &h.t.p[i];
        double e = rel_err_added(out[1].g + p->offset, out[0].g + p->offset, h.g0 + p->offset, p->count);
        CHECK(e <= bound, "%s: gradient of %s: table vs per row rel err %.3e > %.0e", name, p->name, e, bound);
        if (!(e <= worst)) worst = e, worst_name = p->name;
    }
    snprintf(what, sizeof what, "%s worst grad (%s)", name, worst_name);
    printf("  %-44s rel err %.3e (bound %.0e)\n", what, worst, bound);
    CHECK(md_same(&h, &out[1], &out[2], 0), "%s: two runs through the training table differ", name);
    /* a second minibatch of other bars (shifted) through the same model: again the per-row results */
    for (int r = 0; r < h.rows; r++) {
        bar_rows[r] = (bar_rows[r] + 1) % bars;
        memcpy(h.X + (size_t)r * h.xs, feat + (size_t)bar_rows[r] * bs, sizeof(float) * F);
    }
    CHECK(cudaMemcpy(X, h.X, sizeof(float) * nx, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(drows, bar_rows, sizeof(int) * (size_t)h.rows, cudaMemcpyHostToDevice) == cudaSuccess,
          "%s: upload of the second minibatch", name);
    md_out again[2];
    tt_run(&h, &m, g, X, NULL, dlogits, dvalue, &again[0]);
    tt_run(&h, &m, g, X, drows, dlogits, dvalue, &again[1]);
    double e2 = rel_err_added(again[1].g, again[0].g, h.g0, P);
    snprintf(what, sizeof what, "%s 2nd minibatch all grads", name);
    CHECK_PARITY(what, e2, bound);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    for (int k = 0; k < 3; k++)
        md_out_free(&out[k]);
    md_out_free(&again[0]), md_out_free(&again[1]);
    st_cuda_model_free(&m);
done:
    dev_free(w), dev_free(g), dev_free(X), dev_free(dlogits), dev_free(dvalue), dev_free(drows);
    free(feat), free(ctx), free(bar_rows);
    md_free(&h);
}

/* Case 10: the last block's tail on against off (both GPU). */
static void md_tail_case(const char *preset, int n, int bf16, uint64_t seed) {
    md_data h;
    char name[64];
    snprintf(name, sizeof name, "tail on vs off: %s x%d%s", preset, n, bf16 ? " bf16" : "");
    if (!md_setup(&h, name, preset, n, 2, seed)) {
        CHECK(0, "%s: setup: %s", name, st_last_error());
        return;
    }
    md_out on[2], off;
    if (bf16) st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    st_cuda_model_set_last_row_tail(0);
    CHECK(st_cuda_model_last_row_tail() == 0, "%s: the switch does not read back 0", name);
    md_gpu(&h, 1, &off);
    st_cuda_model_set_last_row_tail(1);
    CHECK(st_cuda_model_last_row_tail() == 1, "%s: the switch does not read back 1", name);
    md_gpu(&h, 1, &on[0]);
    md_gpu(&h, 1, &on[1]);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    int A = h.d.A, F = h.d.F, C = h.d.C;
    double fb = bf16 ? BF16_BOUND : 1e-5, gb = bf16 ? BF16_BOUND : 1e-4;
    char what[112];
    snprintf(what, sizeof what, "%s logits", name);
    CHECK_PARITY(what, rel_err_rows(on[0].logits, A, off.logits, A, n, A), fb);
    snprintf(what, sizeof what, "%s value", name);
    CHECK_PARITY(what, rel_err(on[0].value, off.value, n), fb);
    snprintf(what, sizeof what, "%s dX snapshot", name);
    CHECK_PARITY(what, rel_err_rows(on[0].dX, h.xs, off.dX, h.xs, h.rows, F), gb);
    snprintf(what, sizeof what, "%s dX context", name);
    CHECK_PARITY(what, rel_err_rows(on[0].dX + F, h.xs, off.dX + F, h.xs, h.rows, C), gb);
    if (bf16) {
        snprintf(what, sizeof what, "%s all grads", name);
        CHECK_PARITY(what, rel_err_added(on[0].g, off.g, h.g0, h.t.total), gb);
    } else {
        md_check_grads(&h, &off, &on[0]);
    }
    CHECK(md_same(&h, &on[0], &on[1], 1), "%s: two runs with the tail differ", name);
    md_out_free(&on[0]), md_out_free(&on[1]), md_out_free(&off);
    md_free(&h);
}

/* Case 10: a window too long for the tail's shared memory (tiny at K =
 * 4096: 290 KiB a window) runs the full block with the switch on: no
 * error, the bits of the switch off. */
static void md_tail_too_long_case(uint64_t seed) {
    md_data h;
    const char *name = "tail on, window too long for it: tiny K=4096 x2";
    if (!md_setup_k(&h, name, "tiny", 4096, 2, 0, seed)) {
        CHECK(0, "%s: setup: %s", name, st_last_error());
        return;
    }
    CHECK(!st_cuda_mamba2_last_fits(&h.d), "%s: the tail claims to fit", name);
    md_out on, off;
    st_cuda_model_set_last_row_tail(0);
    md_gpu(&h, 1, &off);
    st_cuda_model_set_last_row_tail(1);
    md_gpu(&h, 1, &on);
    CHECK(md_same(&h, &on, &off, 1), "%s: the switch on differs from off (the full block should have run)", name);
    md_out_free(&on), md_out_free(&off);
    md_free(&h);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    static const char *const presets[] = {"tiny", "odd", "default"};
    static const int windows[] = {3, 64};
    uint64_t seed = 7000;
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 2; k++, seed++) {
            char name[48];
            snprintf(name, sizeof name, "%s x%d%s", presets[p], windows[k], k ? " padded" : "");
            if (test_part(2 * p + k)) md_case_run(name, presets[p], windows[k], k ? 3 : 0, seed); /* cases 0-5 */
        }
    if (test_part(6)) md_stride_regression();
    if (test_part(7)) { /* case 7: the bar table */
        md_table_case("tiny", 5, 200, 0, 7200);
        md_table_case("default", 6, 400, 0, 7201);
        md_table_case("default", 6, 400, 1, 7202);
        md_table_case("odd", 3, 120, 0, 7203);
    }
    if (test_part(8)) { /* case 8: the action step's forward from window rows, no window */
        md_rows_case("tiny", 5, 0, 8200);
        md_rows_case("default", 7, 0, 8201);
        md_rows_case("default", 7, 1, 8202);
        md_rows_case("odd", 4, 0, 8203);
        if (!test_quick()) md_rows_case("default", 64, 0, 8204); /* the sanitizer runs: the small ones */
    }
    if (test_part(9)) { /* case 9: the training step's bar table */
        md_train_table_case("tiny", 6, 100, 1, 0, 7300);
        md_train_table_case("tiny", 5, 0, 0, 0, 7301);
        md_train_table_case("default", 12, 300, 1, 0, 7302);
        md_train_table_case("default", 4, 0, 0, 0, 7303);
        md_train_table_case("default", 12, 300, 1, 1, 7304);
        md_train_table_case("odd", 3, 120, 1, 0, 7305);
        md_train_table_case("tiny", 6, 32, 1, 0, 7306); /* bars = K: every window the same K bars (6 rows a bar) */
    }
    if (test_part(10)) { /* case 10: the last block's tail on against off */
        md_tail_case("tiny", 5, 0, 7400);
        md_tail_case("default", 6, 0, 7401);
        md_tail_case("odd", 64, 0, 7402);
        md_tail_case("default", 6, 1, 7403);
        md_tail_too_long_case(7404);
    }
#endif
    TEST_MAIN_END();
}
