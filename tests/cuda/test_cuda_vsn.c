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
 * than row splits, each against the CPU and the two against each other. */
#include "model/vsn.h"

#include <stdint.h>

#include "check/gradcheck.h"
#include "core/error.h"
#include "cuda_test.h"
#include "model/vsn_ref.h"

#ifdef ST_HAVE_CUDA
#include "cuda/vsn_backward_fused_cuda.h"
#include "cuda/vsn_cuda.h"

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
    memset(&d, 0, sizeof d);
    const float *s, *c;
    int s_stride, c_stride;
    upload_inputs(&k, 2, &st, &d, &s, &s_stride, &c, &c_stride);
    d.p = dev_upload(k.p, k.L.total);
    d.saved = dev_poisoned(st_cuda_vsn_saved_count(R, F, C, Dv));
    d.work = dev_poisoned(st_cuda_vsn_work_count(R, F, C, Dv));
    float *dvs[NMODES], *das[NMODES];
    int rc = d.p && d.saved && d.work && d.win ? ST_OK : ST_ERR_DEVICE;
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
