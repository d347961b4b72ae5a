/* test_cuda_vsn.c: the GPU Variable Selection Network (cuda/vsn_cuda.h)
 * against the CPU float op (model/vsn.h). Skips (exit 77) without a device.
 *
 * Per case (fresh Philox inputs and weights, the weights scaled as in
 * tests/model/vsn_ref.h), forward then backward_ex with dv and dalpha:
 *   - v and alpha vs the CPU float op: rel err <= 1e-5;
 *   - ds, dc and all 21 parameter gradients: <= 1e-4. Parameter gradients
 *     are added to: they start from the same random values on both sides
 *     and the increments are compared (an overwrite instead of += fails).
 * Both sides round to float at the same places and differ in summation
 * order and precision (the GPU sums in double): honest differences are
 * ~1e-7..1e-6 (printed), a wrong term is O(1e-2) or more.
 * The named regression of DESIGN section 1: the GPU runs on
 *   (a) contiguous copies s [rows, F], c [rows, C];
 *   (b) s = window, c = window + F, both with the window's stride F+C;
 *   (c) the same with a wider stride whose gap holds NaN, and every output
 *       strided too (v, alpha, ds/dc in one gradient-window row), output
 *       padding poisoned and checked untouched;
 * and (a), (b), (c) must agree bit for bit (a kernel reading with stride F
 * would read the neighbouring context as snapshot values, or NaN). (c) runs
 * twice: bit-identical (no atomics). A last run per case uses the plain
 * st_cuda_vsn_backward with alpha = NULL, ds = NULL and dc accumulated.
 * `work` is poisoned between the forward and the backward: the backward
 * recomputes the per-variable GRNs' activations there (only the selection
 * GRN's state is saved; its size is checked as vsn_cuda.h states it).
 * Sizes: tiny (F=40, C=16, Dv=8), odd (F=37, C=11, Dv=5, K=50), a batch of
 * 64 windows, the default Dv=32, F < Dv (Hs = F), and Dv = 48 (the gate
 * kernels' lanes hold two values each, as for the large preset's 64).
 * The forward's per-variable GRNs run as one fused kernel for Dv in {8, 16,
 * 32} (model/vsn_forward_fused.cu) and as cuBLAS products + element-wise
 * kernels otherwise: the cases above take the fused kernel at Dv = 8 and 32
 * and the unfused one at Dv = 5 and 48; F = 37 at Dv = 32 and F = 13 at
 * Dv = 16, with row counts that end in a partial tile (150 rows, 90),
 * take the fused one too, with the tile the row count picks (128-thread
 * blocks for so few rows) and again with 256-thread blocks forced (as
 * tiny); tiny, the default and F = 37 run again with the unfused path
 * forced (st_cuda_vsn_set_fused). The selection GRN's tail runs 8 lanes
 * a row for F <= 64 (every case above; F = 64 fills the lanes' 8 values)
 * and a warp a row above (F = 70). Last, the forward alone on the GPU in
 * each mode at the default preset's action step (4,096 windows x K=64 =
 * 262,144 rows; 64 windows in quick mode) and at F = 37 (1,650 rows; 150
 * quick): the fused modes bit-identical, unfused v within 1e-6, timed.
 * The backward runs its fused kernel (model/vsn_backward_fused.cu) in
 * every case above with Dv in {8, 16, 32}; test_backward_paths runs both
 * of its paths on F = 37 at each of those Dv, partial tiles and more tiles
 * than row splits, each against the CPU and the two against each other.
 * In bf16 mode the fused forward's products run on the tensor cores at
 * Dv 16 and 32 (model/vsn_forward_fused_tc.cu): test_fused_tc compares
 * them, v and the bar table, with the fp32 kernel within 2e-2 (~3e-3
 * expected), at 1, 37 and over 1,000 rows, and checks the fp32 mode's
 * bits, the switch, determinism and the table's bits against v. */
#include "model/vsn.h"

#include <stdint.h>

#include "check/gradcheck.h"
#include "core/error.h"
#include "cuda_test.h"
#include "model/vsn_ref.h"

#ifdef ST_HAVE_CUDA
#include "cuda/linear_cuda.h" /* st_cuda_set_matmul_precision */
#include "cuda/vsn_backward_fused_cuda.h"
#include "cuda/vsn_cuda.h"
#include "cuda/vsn_fold_cuda.h"          /* the fold the fused backward reads */
#include "cuda/vsn_forward_fused_cuda.h" /* the tensor-core switch, the table combine */

#define FWD_BOUND 1e-5
#define GRAD_BOUND 1e-4

static float *alloc_f(long n) { return malloc(sizeof(float) * (size_t)(n > 0 ? n : 1)); }

static float *nan_buffer(long n) {
    float *p = alloc_f(n);
    for (long i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static void put_rows(float *dst, int stride, const float *src, int rows, int width) {
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * stride, src + (size_t)r * width, sizeof(float) * (size_t)width);
}

static void get_rows(float *dst, const float *src, int stride, int rows, int width) {
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * width, src + (size_t)r * stride, sizeof(float) * (size_t)width);
}

/* 1 when columns [from, stride) of every row still hold the poison bits. */
static int padding_untouched(const float *buf, int rows, int from, int stride) {
    for (int r = 0; r < rows; r++)
        for (int i = from; i < stride; i++) {
            uint32_t bits;
            memcpy(&bits, buf + (size_t)r * stride + i, sizeof bits);
            if (bits != 0xFFFFFFFFu) return 0;
        }
    return 1;
}

/* One case: sizes, contiguous host inputs, weights, starting gradients. */
typedef struct {
    const char *label;
    int rows, F, C, Dv;
    vsn_layout L;
    float *s, *c, *dv, *dalpha, *p, *g0, *dc0;
} vcase;

static vcase make_case(const char *label, int windows, int K, int F, int C, int Dv, uint64_t seed) {
    vcase k;
    k.label = label, k.rows = windows * K, k.F = F, k.C = C, k.Dv = Dv;
    k.L = vsn_layout_make(F, C, Dv);
    long R = k.rows;
    k.s = alloc_f(R * F), k.c = alloc_f(R * C), k.dv = alloc_f(R * Dv), k.dalpha = alloc_f(R * F);
    k.p = alloc_f((long)k.L.total), k.g0 = alloc_f((long)k.L.total), k.dc0 = alloc_f(R * C);
    st_gc_randnf(k.s, R * F, 1.0f, seed, 1);
    st_gc_randnf(k.c, R * C, 1.0f, seed, 2);
    st_gc_randnf(k.dv, R * Dv, 1.0f, seed, 3);
    st_gc_randnf(k.dalpha, R * F, 1.0f, seed, 4);
    st_gc_randnf(k.g0, (long)k.L.total, 1.0f, seed, 5);
    st_gc_randnf(k.dc0, R * C, 1.0f, seed, 6);
    double *pd = malloc(sizeof(double) * k.L.total);
    vsn_fill_params(&k.L, pd, seed);
    for (size_t i = 0; i < k.L.total; i++)
        k.p[i] = (float)pd[i];
    free(pd);
    return k;
}

static void free_case(vcase *k) {
    free(k->s), free(k->c), free(k->dv), free(k->dalpha), free(k->p), free(k->g0), free(k->dc0);
}

/* Results of one run, contiguous: v, alpha, ds, dc, the flat gradients. */
typedef struct {
    float *v, *alpha, *ds, *dc, *g;
} vout;

static vout make_out(const vcase *k) {
    vout o;
    long R = k->rows;
    o.v = alloc_f(R * k->Dv), o.alpha = alloc_f(R * k->F), o.ds = alloc_f(R * k->F), o.dc = alloc_f(R * k->C);
    o.g = alloc_f((long)k->L.total);
    memcpy(o.g, k->g0, sizeof(float) * k->L.total);
    return o;
}

static void free_out(vout *o) { free(o->v), free(o->alpha), free(o->ds), free(o->dc), free(o->g); }

/* The CPU float op on contiguous buffers. plain: st_vsn_backward with
 * alpha = NULL, ds = NULL and dc accumulated onto dc0; else backward_ex. */
static void cpu_run(const vcase *k, int plain, vout *o) {
    int R = k->rows, F = k->F, C = k->C, Dv = k->Dv;
    float *saved = alloc_f((long)st_vsn_saved_count(R, F, C, Dv)),
          *work = alloc_f((long)st_vsn_work_count(R, F, C, Dv));
    st_vsn_weights w = vsn_bind_w(&k->L, k->p);
    st_vsn_grads g = vsn_bind_g(&k->L, o->g);
    if (plain) {
        memcpy(o->dc, k->dc0, sizeof(float) * (size_t)R * C);
        st_vsn_forward(R, F, C, Dv, k->s, F, k->c, C, &w, o->v, Dv, NULL, 0, saved, work);
        st_vsn_backward(R, F, C, Dv, k->s, F, k->c, C, &w, saved, k->dv, Dv, NULL, 0, o->dc, C, 1, &g, work);
    } else {
        st_vsn_forward(R, F, C, Dv, k->s, F, k->c, C, &w, o->v, Dv, o->alpha, F, saved, work);
        st_vsn_backward_ex(R, F, C, Dv, k->s, F, k->c, C, &w, saved, k->dv, Dv, k->dalpha, F, o->ds, F, o->dc, C, 0, &g,
                           work);
    }
    free(saved), free(work);
}

/* Row strides of a GPU run. layout 0: contiguous copies; 1: s, c inside one
 * window row of F+C (and ds, dc inside one gradient row of F+C); 2: the
 * same rows wider, gaps NaN, and v, alpha, dv, dalpha wider too. */
typedef struct {
    int win_s, dwin_s, v_s, alpha_s, dv_s, dalpha_s;
} vstrides;

static vstrides vstrides_of(const vcase *k, int layout) {
    int F = k->F, C = k->C, Dv = k->Dv;
    vstrides s = {F + C, F + C, Dv, F, Dv, F};
    if (layout == 2) s = (vstrides){F + C + 5, F + C + 3, Dv + 3, F + 2, Dv + 4, F + 3};
    return s;
}

/* Device buffers of a GPU run (freed together). */
typedef struct {
    float *s, *c, *win, *dv, *dalpha, *p, *g, *v, *alpha, *ds, *dc, *dwin, *saved, *work;
} vdev;

static void vdev_free(vdev *d) {
    float *all[] = {d->s, d->c,     d->win, d->dv, d->dalpha, d->p,     d->g,
                    d->v, d->alpha, d->ds,  d->dc, d->dwin,   d->saved, d->work};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dev_free(all[i]);
}

/* Inputs on the device as `layout` says; s and c point into them. */
static void upload_inputs(const vcase *k, int layout, const vstrides *st, vdev *d, const float **s, int *s_stride,
                          const float **c, int *c_stride) {
    int R = k->rows, F = k->F, C = k->C;
    if (layout == 0) {
        d->s = dev_upload(k->s, (size_t)R * F), d->c = dev_upload(k->c, (size_t)R * C);
        *s = d->s, *s_stride = F, *c = d->c, *c_stride = C;
    } else {
        float *h = nan_buffer((long)R * st->win_s);
        put_rows(h, st->win_s, k->s, R, F);
        put_rows(h + F, st->win_s, k->c, R, C);
        d->win = dev_upload(h, (size_t)R * st->win_s);
        free(h);
        *s = d->win, *s_stride = st->win_s, *c = d->win + F, *c_stride = st->win_s;
    }
    float *hdv = nan_buffer((long)R * st->dv_s), *hda = nan_buffer((long)R * st->dalpha_s);
    put_rows(hdv, st->dv_s, k->dv, R, k->Dv);
    put_rows(hda, st->dalpha_s, k->dalpha, R, F);
    d->dv = dev_upload(hdv, (size_t)R * st->dv_s), d->dalpha = dev_upload(hda, (size_t)R * st->dalpha_s);
    free(hdv), free(hda);
}

/* Downloads the outputs into o (contiguous); *pad_ok: output padding kept. */
static void download_outputs(const vcase *k, int layout, int plain, const vstrides *st, const vdev *d, vout *o,
                             int *pad_ok) {
    int R = k->rows, F = k->F, C = k->C, Dv = k->Dv;
    float *hv = alloc_f((long)R * st->v_s);
    dev_download(hv, d->v, (size_t)R * st->v_s);
    get_rows(o->v, hv, st->v_s, R, Dv);
    *pad_ok = padding_untouched(hv, R, Dv, st->v_s);
    free(hv);
    dev_download(o->g, d->g, k->L.total);
    if (plain) {
        dev_download(o->dc, d->dc, (size_t)R * C);
        return;
    }
    float *ha = alloc_f((long)R * st->alpha_s);
    dev_download(ha, d->alpha, (size_t)R * st->alpha_s);
    get_rows(o->alpha, ha, st->alpha_s, R, F);
    *pad_ok &= padding_untouched(ha, R, F, st->alpha_s);
    free(ha);
    if (layout == 0) {
        dev_download(o->ds, d->ds, (size_t)R * F), dev_download(o->dc, d->dc, (size_t)R * C);
        return;
    }
    float *hw = alloc_f((long)R * st->dwin_s);
    dev_download(hw, d->dwin, (size_t)R * st->dwin_s);
    get_rows(o->ds, hw, st->dwin_s, R, F);
    get_rows(o->dc, hw + F, st->dwin_s, R, C);
    *pad_ok &= padding_untouched(hw, R, F + C, st->dwin_s);
    free(hw);
}

/* Forward + backward on the device. plain as in cpu_run (layout 0 only).
 * Returns 0 on success. */
static int gpu_run(const vcase *k, int layout, int plain, vout *o, int *pad_ok) {
    int R = k->rows, F = k->F, C = k->C, Dv = k->Dv;
    vstrides st = vstrides_of(k, layout);
    vdev d;
    memset(&d, 0, sizeof d);
    const float *s, *c;
    int s_stride, c_stride;
    upload_inputs(k, layout, &st, &d, &s, &s_stride, &c, &c_stride);
    d.p = dev_upload(k->p, k->L.total), d.g = dev_upload(k->g0, k->L.total);
    d.v = dev_poisoned((size_t)R * st.v_s), d.alpha = dev_poisoned((size_t)R * st.alpha_s);
    d.saved = dev_poisoned(st_cuda_vsn_saved_count(R, F, C, Dv));
    d.work = dev_poisoned(st_cuda_vsn_work_count(R, F, C, Dv));
    float *ds, *dc;
    int ds_stride, dc_stride;
    if (layout == 0 || plain) {
        d.ds = dev_poisoned((size_t)R * F);
        d.dc = plain ? dev_upload(k->dc0, (size_t)R * C) : dev_poisoned((size_t)R * C);
        ds = d.ds, dc = d.dc, ds_stride = F, dc_stride = C;
    } else {
        d.dwin = dev_poisoned((size_t)R * st.dwin_s);
        ds = d.dwin, dc = d.dwin + F, ds_stride = dc_stride = st.dwin_s;
    }
    st_vsn_weights w = vsn_bind_w(&k->L, d.p);
    st_vsn_grads g = vsn_bind_g(&k->L, d.g);
    int rc = d.v && d.alpha && d.saved && d.work && d.p && d.g ? ST_OK : ST_ERR_DEVICE;
    if (rc == ST_OK)
        rc = st_cuda_vsn_forward(R, F, C, Dv, s, s_stride, c, c_stride, &w, d.v, st.v_s, plain ? NULL : d.alpha,
                                 st.alpha_s, d.saved, d.work, NULL);
    /* Poison the work again: the backward must not rely on the forward's. */
    if (rc == ST_OK) cudaMemset(d.work, 0xFF, sizeof(float) * st_cuda_vsn_work_count(R, F, C, Dv));
    if (rc == ST_OK && plain)
        rc = st_cuda_vsn_backward(R, F, C, Dv, s, s_stride, c, c_stride, &w, d.saved, d.dv, st.dv_s, NULL, 0, dc,
                                  dc_stride, 1, &g, d.work, NULL);
    else if (rc == ST_OK)
        rc = st_cuda_vsn_backward_ex(R, F, C, Dv, s, s_stride, c, c_stride, &w, d.saved, d.dv, st.dv_s, d.dalpha,
                                     st.dalpha_s, ds, ds_stride, dc, dc_stride, 0, &g, d.work, NULL);
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != ST_OK) fprintf(stderr, "GPU VSN call failed: %s\n", st_last_error());
    if (e != cudaSuccess) fprintf(stderr, "GPU VSN kernels failed: %s\n", cudaGetErrorString(e)), rc = ST_ERR_DEVICE;
    if (rc == ST_OK) download_outputs(k, layout, plain, &st, &d, o, pad_ok);
    vdev_free(&d);
    return rc;
}

/* ---- comparisons ----------------------------------------------------------- */

/* rel err of n values (increments over base when base is given); on
 * failure the message names the worst element. */
static double check_tensor(const char *case_label, const char *what, const float *gpu, const float *ref,
                           const float *base, long n, int cols, double bound, int print) {
    float *a = alloc_f(n), *b = alloc_f(n);
    long at = 0;
    double worst = -1;
    for (long i = 0; i < n; i++) {
        a[i] = base ? gpu[i] - base[i] : gpu[i];
        b[i] = base ? ref[i] - base[i] : ref[i];
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) worst = d, at = i;
    }
    double err = rel_err_rows(a, (int)n, b, (int)n, 1, (int)n);
    if (print) {
        char name[128];
        snprintf(name, sizeof name, "%s %s", case_label, what);
        printf("  %-52s rel err %.3e (bound %.0e)\n", name, err, bound);
    }
    CHECK(err <= bound, "%s: %s GPU vs CPU rel err %.3e > %.0e (worst element row %ld col %ld: gpu %.7g cpu %.7g)",
          case_label, what, err, bound, at / cols, at % cols, (double)a[at], (double)b[at]);
    free(a), free(b);
    return err;
}

/* v, alpha, ds, dc and the 21 parameter gradients; grads printed as the
 * worst of them (each one checked). */
static void compare(const vcase *k, const char *label, int plain, const vout *gpu, const vout *cpu) {
    long R = k->rows;
    check_tensor(label, "v", gpu->v, cpu->v, NULL, R * k->Dv, k->Dv, FWD_BOUND, 1);
    if (!plain) {
        check_tensor(label, "alpha", gpu->alpha, cpu->alpha, NULL, R * k->F, k->F, FWD_BOUND, 1);
        check_tensor(label, "ds", gpu->ds, cpu->ds, NULL, R * k->F, k->F, GRAD_BOUND, 1);
    }
    check_tensor(label, plain ? "dc (accumulated)" : "dc", gpu->dc, cpu->dc, plain ? k->dc0 : NULL, R * k->C, k->C,
                 GRAD_BOUND, 1);
    double worst = 0;
    int worst_i = 0;
    for (int i = 0; i < VSN_NT; i++) {
        const vsn_tensor *t = &k->L.t[i];
        size_t o = k->L.off[i];
        double e = check_tensor(label, t->name, gpu->g + o, cpu->g + o, k->g0 + o, (long)t->rows * t->cols, t->cols,
                                GRAD_BOUND, 0);
        if (!(e <= worst)) worst = e, worst_i = i;
    }
    char name[128];
    snprintf(name, sizeof name, "%s params (worst: %s)", label, k->L.t[worst_i].name);
    printf("  %-52s rel err %.3e (bound %.0e)\n", name, worst, GRAD_BOUND);
}

static int same_out(const vcase *k, int plain, const vout *a, const vout *b) {
    size_t R = (size_t)k->rows;
    int same = !memcmp(a->v, b->v, sizeof(float) * R * k->Dv) && !memcmp(a->dc, b->dc, sizeof(float) * R * k->C) &&
               !memcmp(a->g, b->g, sizeof(float) * k->L.total);
    if (!plain)
        same &=
            !memcmp(a->alpha, b->alpha, sizeof(float) * R * k->F) && !memcmp(a->ds, b->ds, sizeof(float) * R * k->F);
    return same;
}

static void test_case(const char *label, int windows, int K, int F, int C, int Dv, uint64_t seed) {
    vcase k = make_case(label, windows, K, F, C, Dv, seed);
    printf("%s: rows=%d (%d windows x K=%d) F=%d C=%d Dv=%d\n", label, k.rows, windows, K, F, C, Dv);
    vout cpu = make_out(&k), g0 = make_out(&k), g1 = make_out(&k), g2 = make_out(&k), g3 = make_out(&k);
    cpu_run(&k, 0, &cpu);
    int pad0 = 0, pad1 = 0, pad2 = 0, pad3 = 0;
    int ok0 = gpu_run(&k, 0, 0, &g0, &pad0) == ST_OK, ok1 = gpu_run(&k, 1, 0, &g1, &pad1) == ST_OK;
    int ok2 = gpu_run(&k, 2, 0, &g2, &pad2) == ST_OK, ok3 = gpu_run(&k, 2, 0, &g3, &pad3) == ST_OK;
    CHECK(ok0 && ok1 && ok2 && ok3, "%s: a GPU call failed (message above)", label);
    char name[96];
    if (ok0 && ok1 && ok2 && ok3) {
        snprintf(name, sizeof name, "%s, window stride F+C", label);
        compare(&k, name, 0, &g1, &cpu);
        CHECK(same_out(&k, 0, &g0, &g1),
              "%s: s = window, c = window + F (stride %d) differs from contiguous copies: a stride is ignored", label,
              F + C);
        CHECK(same_out(&k, 0, &g0, &g2), "%s: padded window (stride %d, NaN gap) differs from contiguous copies", label,
              F + C + 5);
        CHECK(pad0 && pad1 && pad2 && pad3, "%s: the GPU wrote into output padding", label);
        CHECK(same_out(&k, 0, &g2, &g3), "%s: two GPU runs differ (not deterministic)", label);
    }
    vout cpu_p = make_out(&k), gp = make_out(&k);
    cpu_run(&k, 1, &cpu_p);
    int padp = 0, okp = gpu_run(&k, 0, 1, &gp, &padp) == ST_OK;
    CHECK(okp, "%s: the plain backward failed on the GPU (message above)", label);
    snprintf(name, sizeof name, "%s, plain, alpha=ds=NULL, dc +=", label);
    if (okp) compare(&k, name, 1, &gp, &cpu_p);
    free_out(&cpu), free_out(&g0), free_out(&g1), free_out(&g2), free_out(&g3), free_out(&cpu_p), free_out(&gp);
    free_case(&k);
}

/* A forward's device inputs in layout 2 (s and c inside padded window rows
 * with NaN gaps; dv, dalpha strided), the weights, and `saved` and `work`
 * poisoned. Returns 1 when every buffer was allocated. */
static int forward_setup(const vcase *k, const vstrides *st, vdev *d, const float **s, int *s_stride, const float **c,
                         int *c_stride) {
    const int R = k->rows, F = k->F, C = k->C, Dv = k->Dv;
    memset(d, 0, sizeof *d);
    upload_inputs(k, 2, st, d, s, s_stride, c, c_stride);
    d->p = dev_upload(k->p, k->L.total);
    d->saved = dev_poisoned(st_cuda_vsn_saved_count(R, F, C, Dv));
    d->work = dev_poisoned(st_cuda_vsn_work_count(R, F, C, Dv));
    return d->p && d->saved && d->work && d->win;
}

/* The forward alone at the preset's sizes in each of its modes (s inside a
 * padded window row with a NaN gap, v and alpha strided and poisoned): the
 * fused kernel with its tile picked by the rows, forced to 256-thread and
 * to 128-thread blocks, and unfused. The three fused runs give the same
 * bits (the same expressions in the same order); fused and unfused v
 * agree within FUSED_BOUND (both fp32 products, summed in other orders);
 * alpha is the same bits in all four (the same selection GRN); padding is
 * untouched. Each forward runs twice, the second timed (printed only). */
#define FUSED_BOUND 1e-6
#define NMODES 4
static void test_fused_vs_unfused(const char *label, int windows, int K, int F, int C, int Dv, uint64_t seed) {
    static const int modes[NMODES] = {ST_CUDA_VSN_FUSED, ST_CUDA_VSN_FUSED_LARGE, ST_CUDA_VSN_FUSED_SMALL,
                                      ST_CUDA_VSN_UNFUSED};
    static const char *names[NMODES] = {"fused (tile by rows)", "fused, 256-thread tiles", "fused, 128-thread tiles",
                                        "unfused"};
    vcase k = make_case(label, windows, K, F, C, Dv, seed);
    const int R = k.rows;
    printf("%s: the forward's modes, rows=%d (%d windows x K=%d) F=%d C=%d Dv=%d\n", label, R, windows, K, F, C, Dv);
    vstrides st = vstrides_of(&k, 2);
    vdev d;
    const float *s, *c;
    int s_stride, c_stride;
    int rc = forward_setup(&k, &st, &d, &s, &s_stride, &c, &c_stride) ? ST_OK : ST_ERR_DEVICE;
    float *dvs[NMODES], *das[NMODES];
    for (int u = 0; u < NMODES; u++) {
        dvs[u] = dev_poisoned((size_t)R * st.v_s), das[u] = dev_poisoned((size_t)R * st.alpha_s);
        if (!dvs[u] || !das[u]) rc = ST_ERR_DEVICE;
    }
    CHECK(rc == ST_OK, "%s: device buffers (%zu floats of work) could not be allocated", label,
          st_cuda_vsn_work_count(R, F, C, Dv));
    st_vsn_weights w = vsn_bind_w(&k.L, d.p);
    float ms[NMODES] = {0};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    for (int u = 0; u < NMODES && rc == ST_OK; u++) {
        st_cuda_vsn_set_fused(modes[u]);
        for (int rep = 0; rep < 2 && rc == ST_OK; rep++) {
            cudaEventRecord(e0, NULL);
            rc = st_cuda_vsn_forward(R, F, C, Dv, s, s_stride, c, c_stride, &w, dvs[u], st.v_s, das[u], st.alpha_s,
                                     d.saved, d.work, NULL);
            cudaEventRecord(e1, NULL);
        }
        cudaError_t e = cudaEventSynchronize(e1);
        if (e != cudaSuccess)
            fprintf(stderr, "GPU VSN kernels failed: %s\n", cudaGetErrorString(e)), rc = ST_ERR_DEVICE;
        if (rc == ST_OK) cudaEventElapsedTime(&ms[u], e0, e1);
    }
    st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED);
    if (rc != ST_OK) fprintf(stderr, "GPU VSN forward failed: %s\n", st_last_error());
    CHECK(rc == ST_OK, "%s: a GPU forward failed (message above)", label);
    if (rc == ST_OK) {
        float *hv[NMODES], *ha[NMODES];
        for (int u = 0; u < NMODES; u++) {
            hv[u] = alloc_f((long)R * st.v_s), ha[u] = alloc_f((long)R * st.alpha_s);
            dev_download(hv[u], dvs[u], (size_t)R * st.v_s);
            dev_download(ha[u], das[u], (size_t)R * st.alpha_s);
            printf("  forward %-28s %8.3f ms (the whole VSN forward, one call)\n", names[u], (double)ms[u]);
        }
        double err = rel_err_rows(hv[0], st.v_s, hv[NMODES - 1], st.v_s, R, Dv);
        printf("  %-52s rel err %.3e (bound %.0e)\n", "v fused vs unfused", err, FUSED_BOUND);
        CHECK(err <= FUSED_BOUND, "%s: v fused vs unfused rel err %.3e > %.0e", label, err, FUSED_BOUND);
        for (int u = 0; u < NMODES; u++) {
            int same_v = 1, same_alpha = 1;
            for (int r = 0; r < R; r++) {
                size_t ov = (size_t)r * st.v_s, oa = (size_t)r * st.alpha_s;
                same_v &= !memcmp(hv[0] + ov, hv[u] + ov, sizeof(float) * Dv);
                same_alpha &= !memcmp(ha[0] + oa, ha[u] + oa, sizeof(float) * F);
            }
            CHECK(u == NMODES - 1 || same_v, "%s: v of the %s forward differs from the %s one in its bits", label,
                  names[u], names[0]);
            CHECK(same_alpha, "%s: alpha of the %s forward differs from the %s one", label, names[u], names[0]);
            CHECK(padding_untouched(hv[u], R, Dv, st.v_s) && padding_untouched(ha[u], R, F, st.alpha_s),
                  "%s: the %s forward wrote into v's or alpha's padding", label, names[u]);
        }
        for (int u = 0; u < NMODES; u++)
            free(hv[u]), free(ha[u]);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    for (int u = 0; u < NMODES; u++) {
        if (dvs[u]) dev_free(dvs[u]);
        if (das[u]) dev_free(das[u]);
    }
    vdev_free(&d);
    free_case(&k);
}

/* The backward's two paths for the per-variable GRNs (the fused kernel of
 * model/vsn_backward_fused.cu, the default for Dv in {8, 16, 32}, and the
 * unfused sequence, st_cuda_vsn_set_fused_backward(0)) on one case, in the
 * padded-window layout (every stride wider than its row, gaps NaN, work
 * poisoned): each against the CPU op with the usual bounds; the fused run
 * twice, bit-identical; fused vs unfused within FUSED_BWD_BOUND (both
 * fp32 products, other summation orders: honest differences ~1e-7..1e-6;
 * a wrong or missing term, an unwritten ds (NaN), a gradient overwritten
 * instead of added to, are O(1e-2) or more). The fused path must be the
 * one taken (st_cuda_vsn_backward_fused_fits with the backward's scratch,
 * the six P-wide slots of work), and not taken when switched off. */
#define FUSED_BWD_BOUND 2e-5
static void test_backward_paths(const char *label, int windows, int K, int F, int C, int Dv, uint64_t seed) {
    vcase k = make_case(label, windows, K, F, C, Dv, seed);
    const int R = k.rows;
    const size_t scratch = 6 * (size_t)R * F * Dv;
    printf("%s: the backward's paths, rows=%d (%d windows x K=%d) F=%d C=%d Dv=%d\n", label, R, windows, K, F, C, Dv);
    CHECK(st_cuda_vsn_backward_fused_fits(R, F, Dv, scratch) == 1, "%s: the fused backward does not take these sizes",
          label);
    vout cpu = make_out(&k), fa = make_out(&k), fb = make_out(&k), un = make_out(&k);
    cpu_run(&k, 0, &cpu);
    int pa = 0, pb = 0, pu = 0;
    int oka = gpu_run(&k, 2, 0, &fa, &pa) == ST_OK, okb = gpu_run(&k, 2, 0, &fb, &pb) == ST_OK;
    st_cuda_vsn_set_fused_backward(0);
    CHECK(st_cuda_vsn_backward_fused_fits(R, F, Dv, scratch) == 0, "%s: the fused backward is taken when off", label);
    int oku = gpu_run(&k, 2, 0, &un, &pu) == ST_OK;
    st_cuda_vsn_set_fused_backward(1);
    CHECK(oka && okb && oku, "%s: a GPU call failed (message above)", label);
    if (oka && okb && oku) {
        char name[128];
        snprintf(name, sizeof name, "%s, fused backward", label);
        compare(&k, name, 0, &fa, &cpu);
        snprintf(name, sizeof name, "%s, unfused backward", label);
        compare(&k, name, 0, &un, &cpu);
        CHECK(same_out(&k, 0, &fa, &fb), "%s: two fused-backward runs differ (not deterministic)", label);
        CHECK(pa && pb && pu, "%s: the GPU wrote into output padding", label);
        /* fused vs unfused: the same outputs up to summation order (v and alpha: the same forward) */
        long n = R;
        CHECK(!memcmp(fa.v, un.v, sizeof(float) * (size_t)n * Dv) &&
                  !memcmp(fa.alpha, un.alpha, sizeof(float) * (size_t)n * F),
              "%s: the forward's outputs differ between the backward's paths", label);
        snprintf(name, sizeof name, "%s, fused vs unfused", label);
        check_tensor(name, "ds", fa.ds, un.ds, NULL, n * F, F, FUSED_BWD_BOUND, 1);
        check_tensor(name, "dc", fa.dc, un.dc, NULL, n * C, C, FUSED_BWD_BOUND, 1);
        double worst = 0;
        int worst_i = 0;
        for (int i = 0; i < VSN_NT; i++) {
            const vsn_tensor *t = &k.L.t[i];
            size_t o = k.L.off[i];
            double e = check_tensor(name, t->name, fa.g + o, un.g + o, k.g0 + o, (long)t->rows * t->cols, t->cols,
                                    FUSED_BWD_BOUND, 0);
            if (!(e <= worst)) worst = e, worst_i = i;
        }
        printf("  %-52s rel err %.3e (bound %.0e)\n", "params, fused vs unfused (worst)", worst, FUSED_BWD_BOUND);
        printf("  (worst: %s)\n", k.L.t[worst_i].name);
    }
    free_out(&cpu), free_out(&fa), free_out(&fb), free_out(&un);
    free_case(&k);
}

/* ---- the tensor-core variant (model/vsn_forward_fused_tc.cu) ----------------- */

/* One configuration's outputs, R + TC_PAST rows of each (host and device):
 * the forward's v and alpha (strided as layout 2) and a bar table of the
 * same s rows (st_cuda_vsn_table_build). */
#define TC_PAST 3 /* rows past the count in every output, poisoned, checked untouched */
typedef struct {
    float *v, *alpha, *tab;    /* host */
    float *dv, *dalpha, *dtab; /* device */
} tc_out;

static void tc_out_free(tc_out *o) {
    free(o->v), free(o->alpha), free(o->tab);
    if (o->dv) dev_free(o->dv);
    if (o->dalpha) dev_free(o->dalpha);
    if (o->dtab) dev_free(o->dtab);
}

/* The forward and a table build in the current precision and switches, the
 * fused tile by `mode`, into poisoned outputs. Returns ST_OK or the error. */
static int tc_run(const vcase *k, const vstrides *st, const float *s, int s_stride, const float *c, int c_stride,
                  const vdev *d, float *fold_work, int mode, tc_out *o) {
    const int R = k->rows, F = k->F, C = k->C, Dv = k->Dv;
    const size_t nv = (size_t)(R + TC_PAST) * st->v_s, na = (size_t)(R + TC_PAST) * st->alpha_s,
                 nt = (size_t)(R + TC_PAST) * F * Dv;
    memset(o, 0, sizeof *o);
    o->dv = dev_poisoned(nv), o->dalpha = dev_poisoned(na), o->dtab = dev_poisoned(nt);
    st_vsn_weights w = vsn_bind_w(&k->L, d->p);
    int rc = o->dv && o->dalpha && o->dtab ? ST_OK : ST_ERR_DEVICE;
    st_cuda_vsn_set_fused(mode);
    if (rc == ST_OK)
        rc = st_cuda_vsn_forward(R, F, C, Dv, s, s_stride, c, c_stride, &w, o->dv, st->v_s, o->dalpha, st->alpha_s,
                                 d->saved, d->work, NULL);
    if (rc == ST_OK) rc = st_cuda_vsn_table_build(R, F, Dv, s, s_stride, &w, o->dtab, fold_work, NULL);
    st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED);
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != ST_OK) fprintf(stderr, "GPU VSN call failed: %s\n", st_last_error());
    if (e != cudaSuccess) fprintf(stderr, "GPU VSN kernels failed: %s\n", cudaGetErrorString(e)), rc = ST_ERR_DEVICE;
    if (rc != ST_OK) return rc;
    o->v = alloc_f((long)nv), o->alpha = alloc_f((long)na), o->tab = alloc_f((long)nt);
    dev_download(o->v, o->dv, nv), dev_download(o->alpha, o->dalpha, na), dev_download(o->tab, o->dtab, nt);
    return ST_OK;
}

/* 1 when the two runs' v, alpha and tables (the first R rows) have the same bits. */
static int tc_same(const vcase *k, const vstrides *st, const tc_out *a, const tc_out *b) {
    const size_t R = (size_t)k->rows;
    return !memcmp(a->v, b->v, sizeof(float) * R * st->v_s) &&
           !memcmp(a->alpha, b->alpha, sizeof(float) * R * st->alpha_s) &&
           !memcmp(a->tab, b->tab, sizeof(float) * R * k->F * k->Dv);
}

/* 1 when the run kept the poison in v's and alpha's padding and in every
 * buffer's TC_PAST rows past the count. */
static int tc_untouched(const vcase *k, const vstrides *st, const tc_out *o) {
    const int R = k->rows, P = k->F * k->Dv;
    return padding_untouched(o->v, R, k->Dv, st->v_s) && padding_untouched(o->alpha, R, k->F, st->alpha_s) &&
           padding_untouched(o->v + (size_t)R * st->v_s, TC_PAST, 0, st->v_s) &&
           padding_untouched(o->alpha + (size_t)R * st->alpha_s, TC_PAST, 0, st->alpha_s) &&
           padding_untouched(o->tab + (size_t)R * P, TC_PAST, 0, P);
}

/* The fused forward's products on the tensor cores in bf16 mode against the
 * fp32 kernel, both modes of the kernel (v and the table). Runs, each with
 * every output poisoned and TC_PAST rows past the count:
 *   0  fp32 mode, the switch on    st_cuda_vsn_fused_tc_takes(Dv) = 0: the
 *   1  fp32 mode, the switch off   fp32 kernel both times, the same bits;
 *   2  bf16 mode, the switch off   the fp32 kernel, bf16 selection GRN;
 *   3  bf16 mode, the switch on    takes = 1: the tensor-core kernel;
 *   4  the same again              the same bits as 3;
 *   5  the same, 256-thread tiles  the same bits as 3 (the tile by rows
 *                                  takes 128-thread ones at these sizes).
 * Checks: v and the table of run 3 within TC_BOUND of runs 2 and 1
 * (rel_err_rows: the Frobenius norm of the difference over the reference's;
 * bf16 operands with fp32 accumulation give ~3e-3 there, as cuBLAS's bf16
 * products; a swapped row or column in a fragment, or g1 and g2 of other
 * outputs, O(1)); alpha the same bits in 2 and 3 (the same selection GRN);
 * run 3's table through st_cuda_vsn_table_combine with its alpha gives its
 * v bit for bit (the table mode's t_j are the ones the v mode combines);
 * padding and rows past the count untouched. A control shows the bound
 * discriminates: the reference table with the two columns of each output
 * pair swapped (what one exchanged pair in a B or accumulator fragment
 * would give) is further than 10 TC_BOUND from run 3's. */
#define TC_BOUND 2e-2
#define TC_RUNS 6
static void test_fused_tc(const char *label, int rows, int F, int C, int Dv, uint64_t seed) {
    vcase k = make_case(label, 1, rows, F, C, Dv, seed);
    const int R = k.rows, P = F * Dv;
    printf("%s: tensor-core products vs fp32, rows=%d F=%d C=%d Dv=%d\n", label, R, F, C, Dv);
    vstrides st = vstrides_of(&k, 2);
    vdev d;
    const float *s, *c;
    int s_stride, c_stride;
    int ok = forward_setup(&k, &st, &d, &s, &s_stride, &c, &c_stride);
    float *fold_work = dev_poisoned(st_vsn_fold_count(F, Dv));
    tc_out o[TC_RUNS];
    memset(o, 0, sizeof o);
    int rc = ok && fold_work ? ST_OK : ST_ERR_DEVICE;
    static const int bf16[TC_RUNS] = {0, 0, 1, 1, 1, 1}, tc[TC_RUNS] = {1, 0, 0, 1, 1, 1};
    for (int u = 0; u < TC_RUNS && rc == ST_OK; u++) {
        st_cuda_set_matmul_precision(bf16[u] ? ST_MATMUL_BF16 : ST_MATMUL_FP32);
        st_cuda_vsn_set_fused_tc(tc[u]);
        const int takes = st_cuda_vsn_fused_tc_takes(Dv);
        CHECK(takes == (bf16[u] && tc[u]), "%s: run %d: st_cuda_vsn_fused_tc_takes(%d) = %d (bf16 %d, switch %d)",
              label, u, Dv, takes, bf16[u], tc[u]);
        rc = tc_run(&k, &st, s, s_stride, c, c_stride, &d, fold_work,
                    u == 5 ? ST_CUDA_VSN_FUSED_LARGE : ST_CUDA_VSN_FUSED, &o[u]);
    }
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    st_cuda_vsn_set_fused_tc(1);
    CHECK(rc == ST_OK, "%s: a GPU run failed (message above)", label);
    if (rc == ST_OK) {
        for (int u = 0; u < TC_RUNS; u++)
            CHECK(tc_untouched(&k, &st, &o[u]), "%s: run %d wrote into padding or past the %d rows", label, u, R);
        CHECK(tc_same(&k, &st, &o[0], &o[1]), "%s: fp32 mode differs with the tensor-core switch on and off", label);
        CHECK(tc_same(&k, &st, &o[3], &o[4]), "%s: two tensor-core runs differ (not deterministic)", label);
        CHECK(tc_same(&k, &st, &o[3], &o[5]), "%s: the tensor-core kernel's bits depend on its tile", label);
        int same_alpha = 1;
        for (int r = 0; r < R; r++)
            same_alpha &=
                !memcmp(o[2].alpha + (size_t)r * st.alpha_s, o[3].alpha + (size_t)r * st.alpha_s, sizeof(float) * F);
        CHECK(same_alpha, "%s: alpha differs between the fused kernels (the selection GRN is the same)", label);
        char name[96];
        static const char *refs[2] = {"bf16 fp32-kernel", "fp32 mode"};
        for (int ref = 0; ref < 2; ref++) {
            const tc_out *b = &o[ref == 0 ? 2 : 1];
            double ev = rel_err_rows(o[3].v, st.v_s, b->v, st.v_s, R, Dv);
            double et = rel_err_rows(o[3].tab, P, b->tab, P, R, P);
            snprintf(name, sizeof name, "%s v vs %s", label, refs[ref]);
            printf("  %-52s rel err %.3e (bound %.0e)\n", name, ev, TC_BOUND);
            CHECK(ev <= TC_BOUND, "%s: rel err %.3e > %.0e", name, ev, TC_BOUND);
            snprintf(name, sizeof name, "%s table vs %s", label, refs[ref]);
            printf("  %-52s rel err %.3e (bound %.0e)\n", name, et, TC_BOUND);
            CHECK(et <= TC_BOUND, "%s: rel err %.3e > %.0e", name, et, TC_BOUND);
        }
        float *swapped = alloc_f((long)R * P);
        for (long i = 0; i < (long)R * P; i++)
            swapped[i] = o[2].tab[i ^ 1];
        double ectl = rel_err_rows(o[3].tab, P, swapped, P, R, P);
        free(swapped);
        printf("  %-52s rel err %.3e (must exceed %.0e)\n", "  control: reference pairs swapped", ectl, 10 * TC_BOUND);
        CHECK(ectl > 10 * TC_BOUND, "%s: a swapped pair gives only %.3e: the bound cannot see a fragment error", label,
              ectl);
        /* the table mode's t_j combined give the v mode's v */
        int *ident = malloc(sizeof(int) * (size_t)R);
        for (int r = 0; r < R; r++)
            ident[r] = r;
        int *drow = dev_bytes(ident, sizeof(int) * (size_t)R);
        float *dv2 = dev_poisoned((size_t)(R + TC_PAST) * st.v_s);
        int crc = drow && dv2
                      ? st_cuda_vsn_table_combine(R, F, Dv, o[3].dalpha, st.alpha_s, o[3].dtab, drow, dv2, st.v_s, NULL)
                      : ST_ERR_DEVICE;
        CHECK(crc == ST_OK && cudaDeviceSynchronize() == cudaSuccess, "%s: table combine: %s", label, st_last_error());
        if (crc == ST_OK) {
            float *v2 = alloc_f((long)R * st.v_s);
            dev_download(v2, dv2, (size_t)R * st.v_s);
            int same_v = 1;
            for (int r = 0; r < R; r++)
                same_v &= !memcmp(v2 + (size_t)r * st.v_s, o[3].v + (size_t)r * st.v_s, sizeof(float) * Dv);
            CHECK(same_v, "%s: v through the tensor-core table differs from the one-pass v in its bits", label);
            free(v2);
        }
        free(ident);
        if (drow) dev_free(drow);
        if (dv2) dev_free(dv2);
    }
    for (int u = 0; u < TC_RUNS; u++)
        tc_out_free(&o[u]);
    if (fold_work) dev_free(fold_work);
    vdev_free(&d);
    free_case(&k);
}

/* ---- the backward's tensor-core kernel (model/vsn_backward_fused_tc.cu) ---- */

#define BTC_BOUND 2e-2
#define BTC_RUNS 5

/* One run's outputs of both fused-backward calls (host copies): the window
 * call's dlog [rows, F], dad and dsv ([F][rows] doubles, its scratch), its
 * gradients and fold sums (g, fr), and the bar-table call's (gt, frt). */
typedef struct {
    float *dlog, *g, *fr, *gt, *frt;
    double *dad, *dsv;
} btc_out;

static void btc_out_free(btc_out *o) {
    free(o->dlog), free(o->g), free(o->fr), free(o->gt), free(o->frt), free(o->dad); /* dsv lies in dad */
}

/* Device inputs of the test (freed together). */
typedef struct {
    float *p, *fo, *s, *alpha, *dv, *dalpha, *dT;
    int *src, *count;
    int rows, F, Dv, n, s_stride, alpha_stride, dv_stride, dalpha_stride;
} btc_in;

/* Both calls in the current precision and switch, every output poisoned
 * (dlog, the scratch, the partials) or fresh (g from g0, fr from fr0). */
static int btc_run(const vcase *k, const btc_in *in, const float *fr0, size_t nfr, btc_out *o) {
    const int R = in->rows, F = in->F, Dv = in->Dv;
    /* the window call's scratch: dad, dsv and its splits' partials (a split a tile: as many as the table's) */
    const size_t parts_d = st_cuda_vsn_backward_fused_table_doubles(R, F, Dv),
                 scratch_f = 6 * (size_t)R * F * Dv + 2 * parts_d;
    memset(o, 0, sizeof *o);
    float *g = dev_upload(k->g0, k->L.total), *gt = dev_upload(k->g0, k->L.total);
    float *fr = dev_upload(fr0, nfr), *frt = dev_upload(fr0, nfr), *dlog = dev_poisoned((size_t)R * F);
    float *scratch = dev_poisoned(scratch_f), *parts = dev_poisoned(2 * parts_d);
    int rc = g && gt && fr && frt && dlog && scratch && parts ? ST_OK : ST_ERR_DEVICE, taken = 0;
    st_vsn_weights w = vsn_bind_w(&k->L, in->p);
    st_vsn_grads gg = vsn_bind_g(&k->L, g), ggt = vsn_bind_g(&k->L, gt);
    st_vsn_fold fo = st_vsn_fold_at(in->fo, F, Dv);
    st_vsn_fold_grads r = st_vsn_fold_grads_at(fr, F, Dv), rt = st_vsn_fold_grads_at(frt, F, Dv);
    if (rc == ST_OK)
        rc = st_cuda_vsn_backward_fused(R, F, Dv, in->s, in->s_stride, in->alpha, in->alpha_stride, in->dv,
                                        in->dv_stride, in->dalpha, in->dalpha_stride, &w, &fo, &r, &gg, dlog, 1,
                                        scratch, scratch_f, NULL, &taken);
    if (rc == ST_OK && !taken)
        fprintf(stderr, "the fused backward did not take the window call\n"), rc = ST_ERR_INTERNAL;
    if (rc == ST_OK)
        rc = st_cuda_vsn_backward_fused_table(R, in->count, in->src, F, Dv, in->s, in->s_stride, in->dT, &w, &fo, &rt,
                                              &ggt, (double *)parts, parts_d, NULL);
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != ST_OK) fprintf(stderr, "GPU VSN fused backward failed: %s\n", st_last_error());
    if (e != cudaSuccess) fprintf(stderr, "GPU VSN kernels failed: %s\n", cudaGetErrorString(e)), rc = ST_ERR_DEVICE;
    if (rc == ST_OK) {
        o->dlog = dev_download_new(dlog, (size_t)R * F), o->g = dev_download_new(g, k->L.total);
        o->gt = dev_download_new(gt, k->L.total), o->fr = dev_download_new(fr, nfr),
        o->frt = dev_download_new(frt, nfr);
        o->dad = malloc(sizeof(double) * 2 * (size_t)R * F);
        cudaMemcpy(o->dad, scratch, sizeof(double) * 2 * (size_t)R * F, cudaMemcpyDeviceToHost);
        o->dsv = o->dad + (size_t)R * F; /* freed with dad */
    }
    float *all[] = {g, gt, fr, frt, dlog, scratch, parts};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dev_free(all[i]);
    return rc;
}

static int btc_same(const vcase *k, size_t nfr, int R, const btc_out *a, const btc_out *b) {
    const size_t RF = (size_t)R * k->F;
    return !memcmp(a->dlog, b->dlog, sizeof(float) * RF) && !memcmp(a->dad, b->dad, sizeof(double) * 2 * RF) &&
           !memcmp(a->g, b->g, sizeof(float) * k->L.total) && !memcmp(a->gt, b->gt, sizeof(float) * k->L.total) &&
           !memcmp(a->fr, b->fr, sizeof(float) * nfr) && !memcmp(a->frt, b->frt, sizeof(float) * nfr);
}

/* n doubles as floats (new). */
static float *btc_floats(const double *d, size_t n) {
    float *f = alloc_f((long)n);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    return f;
}

static void btc_check(const char *label, const char *what, const float *gpu, const float *ref, const float *base,
                      long n, double *worst) {
    double e = check_tensor(label, what, gpu, ref, base, n, (int)n, BTC_BOUND, 1);
    if (!(e <= *worst)) *worst = e;
}

/* The fused backward's products on the tensor cores in bf16 mode against
 * the fp32 fused kernel, both calls (window rows: alpha, dv and dalpha at
 * odd strides, s inside a NaN-padded row; the bar table: dT, source rows
 * that repeat, a device count below the capacity). Runs, every output
 * poisoned:
 *   0  fp32 mode, the switch on     st_cuda_vsn_backward_fused_tc_takes = 0:
 *   1  bf16 mode, the switch off    the fp32 kernel both times, the same bits;
 *   2  bf16 mode, the switch on     takes = 1: the tensor-core kernel;
 *   3  the same again               the same bits as 2;
 *   4  as 2, the column sums double within a tile (the fsum switch off;
 *      2 and 3 run its default, fp32 within a tile): dlog, dalpha, the ds
 *      part and every gradient but ln_w's the bits of run 2; ln_w's and the
 *      fold sums within 1e-5 of run 2's.
 * Run 2 against run 1 within BTC_BOUND (rel_err: norm of the difference
 * over the reference's) on every output: dlog, dad, dsv, the increments of
 * the four per-variable gradients (glu_w, fc2_w, fc2_b, ln_w) and of the
 * five fold sums (gg, Q, Sx, q, X), in both calls; bf16 operands with fp32
 * accumulation give ~3e-3..1e-2 there (the dh1 side through two bf16
 * products); a swapped row or column of a fragment, a missed tile or a
 * split counted twice give O(1). The other gradients keep their bits. A
 * control: run 1's glu_w increments with each column pair swapped (one
 * exchanged pair in a fragment) are further than 10 BTC_BOUND from run 2's. */
static void test_backward_tc(const char *label, int rows, int F, int Dv, uint64_t seed) {
    vcase k = make_case(label, 1, rows, F, 5, Dv, seed);
    const int R = k.rows, P = F * Dv;
    printf("%s: backward tensor-core products vs fp32, rows=%d F=%d Dv=%d\n", label, R, F, Dv);
    btc_in in;
    memset(&in, 0, sizeof in);
    in.rows = R, in.F = F, in.Dv = Dv, in.n = R - R / 7;
    in.s_stride = F + 3, in.alpha_stride = F + 2, in.dv_stride = Dv + 3, in.dalpha_stride = F + 1;
    float *hs = nan_buffer((long)R * in.s_stride), *ha = nan_buffer((long)R * in.alpha_stride);
    float *hdv = nan_buffer((long)R * in.dv_stride), *hda = nan_buffer((long)R * in.dalpha_stride);
    float *al = host_randn_scaled((size_t)R * F, 1.0f, seed, 7), *dT = host_randn_scaled((size_t)R * P, 1.0f, seed, 8);
    for (long i = 0; i < (long)R * F; i++)
        al[i] = fabsf(al[i]) / (float)F; /* softmax-like weights */
    put_rows(hs, in.s_stride, k.s, R, F), put_rows(ha, in.alpha_stride, al, R, F);
    put_rows(hdv, in.dv_stride, k.dv, R, Dv), put_rows(hda, in.dalpha_stride, k.dalpha, R, F);
    int *src = malloc(sizeof(int) * (size_t)R);
    for (int b = 0; b < R; b++)
        src[b] = (int)(((long)b * 7919 + 13) % R); /* some rows twice, some not at all */
    in.p = dev_upload(k.p, k.L.total), in.fo = dev_poisoned(st_vsn_fold_count(F, Dv));
    in.s = dev_upload(hs, (size_t)R * in.s_stride), in.alpha = dev_upload(ha, (size_t)R * in.alpha_stride);
    in.dv = dev_upload(hdv, (size_t)R * in.dv_stride), in.dalpha = dev_upload(hda, (size_t)R * in.dalpha_stride);
    in.dT = dev_upload(dT, (size_t)R * P), in.src = dev_bytes(src, sizeof(int) * (size_t)R);
    in.count = dev_bytes(&in.n, sizeof(int));
    const size_t nfr = st_vsn_fold_grads_count(F, Dv);
    float *fr0 = host_randn_scaled(nfr, 1.0f, seed, 9);
    free(hs), free(ha), free(hdv), free(hda), free(al), free(dT), free(src);
    int rc = in.p && in.fo && in.s && in.alpha && in.dv && in.dalpha && in.dT && in.src && in.count && fr0
                 ? ST_OK
                 : ST_ERR_DEVICE;
    if (rc == ST_OK) {
        st_vsn_weights w = vsn_bind_w(&k.L, in.p);
        st_vsn_fold fo = st_vsn_fold_at(in.fo, F, Dv);
        rc = st_cuda_vsn_fold(F, Dv, &w, &fo, NULL);
    }
    btc_out o[BTC_RUNS];
    memset(o, 0, sizeof o);
    static const int bf16[BTC_RUNS] = {0, 1, 1, 1, 1}, tc[BTC_RUNS] = {1, 0, 1, 1, 1};
    for (int u = 0; u < BTC_RUNS && rc == ST_OK; u++) {
        st_cuda_set_matmul_precision(bf16[u] ? ST_MATMUL_BF16 : ST_MATMUL_FP32);
        st_cuda_vsn_set_fused_backward_tc(tc[u]);
        st_cuda_vsn_set_fused_backward_tc_fsum(u != 4);
        const int takes = st_cuda_vsn_backward_fused_tc_takes(Dv);
        CHECK(takes == (bf16[u] && tc[u]),
              "%s: run %d: st_cuda_vsn_backward_fused_tc_takes(%d) = %d (bf16 %d, switch %d)", label, u, Dv, takes,
              bf16[u], tc[u]);
        rc = btc_run(&k, &in, fr0, nfr, &o[u]);
    }
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    st_cuda_vsn_set_fused_backward_tc(0);
    st_cuda_vsn_set_fused_backward_tc_fsum(1);
    CHECK(rc == ST_OK, "%s: a GPU run failed (message above)", label);
    if (rc == ST_OK) { /* run 4: the column sums in double within a tile */
        const btc_out *t = &o[2], *d = &o[4];
        const size_t RF = (size_t)R * F;
        CHECK(!memcmp(t->dlog, d->dlog, sizeof(float) * RF) && !memcmp(t->dad, d->dad, sizeof(double) * 2 * RF),
              "%s: dlog, dalpha or the ds part depend on the column sums' precision", label);
        const double ef =
            check_tensor(label, "fold sums, double a tile", d->fr, t->fr, fr0, (long)nfr, (int)nfr, 1e-5, 1);
        const double eft =
            check_tensor(label, "fold sums, double a tile (table)", d->frt, t->frt, fr0, (long)nfr, (int)nfr, 1e-5, 1);
        const double eg =
            check_tensor(label, "gradients, double a tile", d->g, t->g, k.g0, (long)k.L.total, (int)k.L.total, 1e-5, 1);
        const double egt = check_tensor(label, "gradients, double a tile (table)", d->gt, t->gt, k.g0, (long)k.L.total,
                                        (int)k.L.total, 1e-5, 1);
        CHECK(ef > 0 || eft > 0 || eg > 0 || egt > 0 || R == 1,
              "%s: the column sums' precision switch changed no bit (did it reach the kernel?)", label);
    }
    if (rc == ST_OK) {
        CHECK(btc_same(&k, nfr, R, &o[0], &o[1]), "%s: the fp32 kernel's bits differ with the switch off in bf16 mode",
              label);
        CHECK(btc_same(&k, nfr, R, &o[2], &o[3]), "%s: two tensor-core runs differ (not deterministic)", label);
        const btc_out *t = &o[2], *b = &o[1];
        double worst = 0;
        char name[96];
        btc_check(label, "dlog", t->dlog, b->dlog, NULL, (long)R * F, &worst);
        float *ft = btc_floats(t->dad, 2 * (size_t)R * F), *fb = btc_floats(b->dad, 2 * (size_t)R * F);
        btc_check(label, "dalpha_j (dad)", ft, fb, NULL, (long)R * F, &worst);
        btc_check(label, "ds part (dsv)", ft + (size_t)R * F, fb + (size_t)R * F, NULL, (long)R * F, &worst);
        free(ft), free(fb);
        static const char *grads[4] = {"vsn.var.glu_w", "vsn.var.fc2_w", "vsn.var.fc2_b", "vsn.var.ln_w"};
        int unchanged = 1;
        for (int i = 0; i < VSN_NT; i++) {
            const vsn_tensor *te = &k.L.t[i];
            const size_t off = k.L.off[i], n = (size_t)te->rows * te->cols;
            int ours = 0;
            for (int m = 0; m < 4; m++)
                ours |= !strcmp(te->name, grads[m]);
            if (!ours) {
                unchanged &= !memcmp(t->g + off, k.g0 + off, sizeof(float) * n) &&
                             !memcmp(t->gt + off, k.g0 + off, sizeof(float) * n);
                continue;
            }
            snprintf(name, sizeof name, "%s (window rows)", te->name);
            btc_check(label, name, t->g + off, b->g + off, k.g0 + off, (long)n, &worst);
            snprintf(name, sizeof name, "%s (bar table)", te->name);
            btc_check(label, name, t->gt + off, b->gt + off, k.g0 + off, (long)n, &worst);
        }
        CHECK(unchanged, "%s: the tensor-core kernel changed a gradient it does not own", label);
        {
            float *base = fr0; /* the fold sums' offsets in their buffer */
            st_vsn_fold_grads r = st_vsn_fold_grads_at(base, F, Dv);
            const struct {
                const char *name;
                const float *at;
                long n;
            } sums[5] = {{"gg", r.gg, 2 * P}, {"Q", r.Q, P}, {"Sx", r.Sx, P}, {"q", r.q, P}, {"X", r.X, P}};
            for (int m = 0; m < 5; m++) {
                const size_t off = (size_t)(sums[m].at - base);
                snprintf(name, sizeof name, "fold %s (window rows)", sums[m].name);
                btc_check(label, name, t->fr + off, b->fr + off, fr0 + off, sums[m].n, &worst);
                snprintf(name, sizeof name, "fold %s (bar table)", sums[m].name);
                btc_check(label, name, t->frt + off, b->frt + off, fr0 + off, sums[m].n, &worst);
            }
        }
        printf("  %-52s rel err %.3e (bound %.0e)\n", "worst of the above", worst, BTC_BOUND);
        /* the control: the reference's glu_w increments, column pairs swapped */
        for (int i = 0; i < VSN_NT; i++) {
            if (strcmp(k.L.t[i].name, "vsn.var.glu_w")) continue;
            const size_t off = k.L.off[i], n = (size_t)k.L.t[i].rows * k.L.t[i].cols;
            float *inc = alloc_f((long)n), *sw = alloc_f((long)n);
            for (size_t e = 0; e < n; e++)
                inc[e] = t->g[off + e] - k.g0[off + e], sw[e] = b->g[off + (e ^ 1)] - k.g0[off + (e ^ 1)];
            const double ectl = rel_err(inc, sw, n);
            printf("  %-52s rel err %.3e (must exceed %.0e)\n", "  control: glu_w pairs swapped", ectl, 10 * BTC_BOUND);
            CHECK(ectl > 10 * BTC_BOUND, "%s: a swapped pair gives only %.3e: the bound cannot see a fragment error",
                  label, ectl);
            free(inc), free(sw);
        }
    }
    for (int u = 0; u < BTC_RUNS; u++)
        btc_out_free(&o[u]);
    free(fr0);
    void *all[] = {in.p, in.fo, in.s, in.alpha, in.dv, in.dalpha, in.dT, in.src, in.count};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dev_free(all[i]);
    free_case(&k);
}

/* Sizes the kernels cannot take come back as ST_ERR_INPUT, not a crash. */
static void test_bad_sizes(void) {
    int rc = st_cuda_vsn_forward(4, 0, 3, 8, NULL, 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL);
    CHECK(rc == ST_ERR_INPUT, "F=0 gave status %d, not ST_ERR_INPUT", rc);
    st_clear_error();
}

/* `saved` holds no [rows, F*Dv] buffer (vsn_cuda.h: 2 min(Dv, F) + 4F + 2
 * floats a row), and `work` no more than the backward's six P-wide slots,
 * its small buffers and the copy of s a row, plus the folds (fewer than
 * 16 P + 4 F^2 floats in all, however many rows): the training step's
 * memory at 8,192 windows. */
static void test_sizes(void) {
    const int R = 8192 * 64, F = 40, C = 16, Dv = 32, Hs = Dv < F ? Dv : F;
    size_t saved = st_cuda_vsn_saved_count(R, F, C, Dv), work = st_cuda_vsn_work_count(R, F, C, Dv);
    size_t saved_want = (size_t)R * (size_t)(2 * Hs + 4 * F + 2);
    size_t work_max = (size_t)R * (size_t)(6 * F * Dv + 7 * F + 2 * Hs) + 16 * (size_t)F * Dv + 4 * (size_t)F * F;
    printf("sizes at %d rows: saved %zu floats a row, work %zu\n", R, saved / (size_t)R, work / (size_t)R);
    CHECK(saved == saved_want, "saved is %zu floats, not %zu (2Hs + 4F + 2 a row)", saved, saved_want);
    CHECK(work <= work_max, "work is %zu floats, more than %zu (6P + 7F + 2Hs a row + the folds)", work, work_max);
}

static void run_all(void) {
    test_sizes();
    test_case("tiny", 2, 32, 40, 16, 8, 0xC0DA01);
    test_case("odd", 2, 50, 37, 11, 5, 0xC0DA02);
    test_case("batch of 64 windows", 64, 32, 40, 16, 8, 0xC0DA03);
    test_case("default Dv=32", 4, 64, 40, 16, 32, 0xC0DA04);
    test_case("F < Dv (Hs = F)", 2, 20, 6, 3, 8, 0xC0DA05);
    test_case("Dv=48 (two values a lane in the gate kernels)", 2, 32, 12, 5, 48, 0xC0DA06);
    /* the fused forward with partial tiles and an odd F: 150 rows at Dv = 32 are 64-row tiles by
     * default (few rows: 128-thread blocks), 128-row ones forced; 90 at Dv = 16, of 128 and 256 */
    test_case("fused, F=37 Dv=32, a partial tile", 3, 50, 37, 11, 32, 0xC0DA07);
    test_case("fused, F=13 Dv=16, a partial tile", 2, 45, 13, 7, 16, 0xC0DA08);
    /* the selection tail: 8 lanes a row up to F = 64 (8 values a lane at 64; 45 rows, 1 past a warp's 4),
     * a warp a row above (F = 70, 46 rows) */
    test_case("F=64 (the selection tail's 8 values a lane), 45 rows", 1, 45, 64, 5, 8, 0xC0DA11);
    test_case("F=70 (the selection tail a warp a row), 46 rows", 2, 23, 70, 6, 5, 0xC0DA12);
    st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED_LARGE);
    test_case("fused 256-thread tiles, F=37 Dv=32", 3, 50, 37, 11, 32, 0xC0DA07);
    test_case("fused 256-thread tiles, F=13 Dv=16", 2, 45, 13, 7, 16, 0xC0DA08);
    test_case("fused 256-thread tiles, tiny", 2, 32, 40, 16, 8, 0xC0DA01);
    /* the unfused forward forced (what every other Dv runs, and the backward's recomputation) */
    st_cuda_vsn_set_fused(ST_CUDA_VSN_UNFUSED);
    test_case("tiny, unfused forward", 2, 32, 40, 16, 8, 0xC0DA01);
    test_case("default Dv=32, unfused forward", 4, 64, 40, 16, 32, 0xC0DA04);
    test_case("F=37 Dv=32, unfused forward", 3, 50, 37, 11, 32, 0xC0DA07);
    st_cuda_vsn_set_fused(ST_CUDA_VSN_FUSED);
    /* the backward's fused kernel against its unfused sequence: the default preset's shape, F = 37
     * at each Dv it takes with row counts ending in a partial tile (tiles of 128, 256, 512 rows at
     * Dv = 32, 16, 8), and more tiles than row splits (35 tiles in 32 splits, some empty) */
    test_backward_paths("bwd default Dv=32", 4, 64, 40, 16, 32, 0xC0DA0B);
    test_backward_paths("bwd F=37 Dv=32, 150 rows", 3, 50, 37, 11, 32, 0xC0DA0C);
    test_backward_paths("bwd F=37 Dv=16, 300 rows", 6, 50, 37, 11, 16, 0xC0DA0D);
    test_backward_paths("bwd F=37 Dv=8, 550 rows", 11, 50, 37, 11, 8, 0xC0DA0E);
    test_backward_paths("bwd F=37 Dv=16, 45 rows", 1, 45, 37, 5, 16, 0xC0DA0F);
    test_backward_paths("bwd F=40 Dv=32, 35 tiles", 70, 64, 40, 16, 32, 0xC0DA10);
    /* the default preset (F=40, C=16, Dv=32, K=64) at the action step of 4,096 environments */
    test_fused_vs_unfused("default preset", test_quick() ? 64 : 4096, 64, 40, 16, 32, 0xC0DA09);
    test_fused_vs_unfused("F=37 Dv=32, a partial tile", test_quick() ? 3 : 33, 50, 37, 11, 32, 0xC0DA0A);
    /* the tensor-core products (bf16 mode) at Dv = 32 and 16: one row, a partial warp's tile, and
     * rows past a 256-thread block's tile (128 rows at Dv = 32, 256 at 16) ending in a partial one;
     * Dv = 8 keeps the fp32 kernel */
    test_fused_tc("tc Dv=32, 1 row", 1, 40, 16, 32, 0xC0DA13);
    test_fused_tc("tc Dv=32 F=37, 37 rows", 37, 37, 11, 32, 0xC0DA14);
    test_fused_tc("tc Dv=32, 1,037 rows", 1037, 40, 16, 32, 0xC0DA15);
    test_fused_tc("tc Dv=16 F=13, 1 row", 1, 13, 7, 16, 0xC0DA16);
    test_fused_tc("tc Dv=16, 37 rows", 37, 40, 16, 16, 0xC0DA17);
    test_fused_tc("tc Dv=16 F=37, 1,100 rows", 1100, 37, 11, 16, 0xC0DA18);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    CHECK(!st_cuda_vsn_fused_tc_takes(8), "Dv = 8 takes the tensor-core kernel (it has no tile for it)");
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    /* the backward's tensor-core products (bf16 mode): one row, odd counts ending in a partial
     * 128-row tile, F not a multiple of anything, and more tiles than the 32 row splits (4,500 rows
     * at Dv = 32, 9,000 at 16: a block walks several tiles, both staging buffers); Dv = 8 keeps the
     * fp32 kernel */
    test_backward_tc("btc Dv=32 F=37, 1 row", 1, 37, 32, 0xC0DA19);
    test_backward_tc("btc Dv=32 F=37, 1,037 rows", 1037, 37, 32, 0xC0DA1A);
    test_backward_tc("btc Dv=32 F=13, 4,500 rows", 4500, 13, 32, 0xC0DA1B);
    test_backward_tc("btc Dv=16 F=13, 45 rows", 45, 13, 16, 0xC0DA1C);
    test_backward_tc("btc Dv=16 F=37, 1,100 rows", 1100, 37, 16, 0xC0DA1D);
    test_backward_tc("btc Dv=16 F=7, 9,000 rows", 9000, 7, 16, 0xC0DA1E);
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    st_cuda_vsn_set_fused_backward_tc(1);
    CHECK(!st_cuda_vsn_backward_fused_tc_takes(8), "Dv = 8 takes the backward's tensor-core kernel");
    st_cuda_vsn_set_fused_backward_tc(0);
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
    test_bad_sizes();
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    run_all();
#endif
    TEST_MAIN_END();
}
