/* test_cuda_vsn_gate.c: the two layouts of the GPU VSN backward's gate,
 * norm and softmax kernels (model/vsn.cu: a group of Dv/4 lanes per (row,
 * variable), each lane holding 4 values, where Dv % 4 == 0 and Dv <= 32;
 * a warp per item otherwise, or after st_cuda_vsn_set_gate_lanes(0))
 * against the CPU float op (model/vsn.h) and each other. Skips (exit 77)
 * without a device. test_cuda_vsn.c checks the whole op (strides, output
 * padding, the plain backward) on the default path; this file the paths.
 *
 * Per case (Philox inputs and weights as tests/model/vsn_ref.h scales
 * them), forward then backward_ex with dv and dalpha, `work` poisoned
 * between them:
 *   - st_cuda_vsn_gate_group says which path each setting takes (the
 *     lane groups for Dv = 32, 16, 12, 8, 4; none for Dv = 5 or 48 or
 *     when turned off), so that the cases below cover both;
 *   - lanes on: v, alpha (<= 1e-5), ds, dc and the 21 parameter
 *     gradients' increments (<= 1e-4) vs the CPU; a second run
 *     bit-identical (no atomics);
 *   - lanes on with dv's rows and every weight off 16-byte alignment (dv
 *     stride Dv + 3, the parameters one float into their buffer: the
 *     kernels' scalar loads): vs the CPU, and vs the aligned run;
 *   - lanes off (the warp-per-item kernels): vs the CPU;
 *   - the two paths vs each other: <= 1e-5 (they differ only in the order
 *     of double sums, ~1e-7 in float; a wrong term is O(1e-2)).
 * Sizes: the default preset's F=40, C=16, Dv=32 and the tiny Dv=8, odd
 * row counts (the last warp's groups partly past the items), F=37 (the
 * parameters' offsets not multiples of 4), Dv=12 (a lane of each group of
 * 4 idle) and Dv=4 (a lane an item, no shuffle). The backward's fused
 * kernel (model/vsn_backward_fused.cu) would take Dv = 8, 16 and 32 and
 * skip these kernels: it is switched off here (test_cuda_vsn.c covers it). */
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
#define PATHS_BOUND 1e-5

static float *alloc_f(long n) { return malloc(sizeof(float) * (size_t)(n > 0 ? n : 1)); }

/* One case: sizes, contiguous host inputs, weights, starting gradients. */
typedef struct {
    const char *label;
    int rows, F, C, Dv;
    vsn_layout L;
    float *s, *c, *dv, *dalpha, *p, *g0;
} gcase;

static gcase make_case(const char *label, int rows, int F, int C, int Dv, uint64_t seed) {
    gcase k;
    k.label = label, k.rows = rows, k.F = F, k.C = C, k.Dv = Dv;
    k.L = vsn_layout_make(F, C, Dv);
    long R = rows;
    k.s = alloc_f(R * F), k.c = alloc_f(R * C), k.dv = alloc_f(R * Dv), k.dalpha = alloc_f(R * F);
    k.p = alloc_f((long)k.L.total), k.g0 = alloc_f((long)k.L.total);
    st_gc_randnf(k.s, R * F, 1.0f, seed, 1);
    st_gc_randnf(k.c, R * C, 1.0f, seed, 2);
    st_gc_randnf(k.dv, R * Dv, 1.0f, seed, 3);
    st_gc_randnf(k.dalpha, R * F, 1.0f, seed, 4);
    st_gc_randnf(k.g0, (long)k.L.total, 1.0f, seed, 5);
    double *pd = malloc(sizeof(double) * k.L.total);
    vsn_fill_params(&k.L, pd, seed);
    for (size_t i = 0; i < k.L.total; i++)
        k.p[i] = (float)pd[i];
    free(pd);
    return k;
}

static void free_case(gcase *k) { free(k->s), free(k->c), free(k->dv), free(k->dalpha), free(k->p), free(k->g0); }

/* Results of one run, contiguous: v, alpha, ds, dc, the flat gradients. */
typedef struct {
    float *v, *alpha, *ds, *dc, *g;
} gout;

static gout make_out(const gcase *k) {
    gout o;
    long R = k->rows;
    o.v = alloc_f(R * k->Dv), o.alpha = alloc_f(R * k->F), o.ds = alloc_f(R * k->F), o.dc = alloc_f(R * k->C);
    o.g = alloc_f((long)k->L.total);
    memcpy(o.g, k->g0, sizeof(float) * k->L.total);
    return o;
}

static void free_out(gout *o) { free(o->v), free(o->alpha), free(o->ds), free(o->dc), free(o->g); }

static void cpu_run(const gcase *k, gout *o) {
    int R = k->rows, F = k->F, C = k->C, Dv = k->Dv;
    float *saved = alloc_f((long)st_vsn_saved_count(R, F, C, Dv)),
          *work = alloc_f((long)st_vsn_work_count(R, F, C, Dv));
    st_vsn_weights w = vsn_bind_w(&k->L, k->p);
    st_vsn_grads g = vsn_bind_g(&k->L, o->g);
    st_vsn_forward(R, F, C, Dv, k->s, F, k->c, C, &w, o->v, Dv, o->alpha, F, saved, work);
    st_vsn_backward_ex(R, F, C, Dv, k->s, F, k->c, C, &w, saved, k->dv, Dv, k->dalpha, F, o->ds, F, o->dc, C, 0, &g,
                       work);
    free(saved), free(work);
}

/* Forward + backward_ex on the device, the gate kernels' layout as `lanes`
 * says. misalign: dv with row stride Dv + 3 and the parameters (and their
 * gradients) one float into their device buffers. Returns 0 on success. */
static int gpu_run(const gcase *k, int lanes, int misalign, gout *o) {
    int R = k->rows, F = k->F, C = k->C, Dv = k->Dv, sh = misalign ? 1 : 0, dv_s = misalign ? Dv + 3 : Dv;
    size_t nsaved = st_cuda_vsn_saved_count(R, F, C, Dv), nwork = st_cuda_vsn_work_count(R, F, C, Dv);
    float *hdv = alloc_f((long)R * dv_s), *hp = alloc_f((long)k->L.total + 1), *hg = alloc_f((long)k->L.total + 1);
    for (long i = 0; i < (long)R * dv_s; i++)
        hdv[i] = NAN; /* the gap must never be read */
    for (int r = 0; r < R; r++)
        memcpy(hdv + (size_t)r * dv_s, k->dv + (size_t)r * Dv, sizeof(float) * (size_t)Dv);
    hp[0] = hg[0] = NAN;
    memcpy(hp + sh, k->p, sizeof(float) * k->L.total);
    memcpy(hg + sh, k->g0, sizeof(float) * k->L.total);
    float *s = dev_upload(k->s, (size_t)R * F), *c = dev_upload(k->c, (size_t)R * C);
    float *dv = dev_upload(hdv, (size_t)R * dv_s), *dalpha = dev_upload(k->dalpha, (size_t)R * F);
    float *p = dev_upload(hp, k->L.total + 1), *g = dev_upload(hg, k->L.total + 1);
    float *v = dev_poisoned((size_t)R * Dv), *alpha = dev_poisoned((size_t)R * F);
    float *ds = dev_poisoned((size_t)R * F), *dc = dev_poisoned((size_t)R * C);
    float *saved = dev_poisoned(nsaved), *work = dev_poisoned(nwork);
    free(hdv), free(hp), free(hg);
    int rc = s && c && dv && dalpha && p && g && v && alpha && ds && dc && saved && work ? ST_OK : ST_ERR_DEVICE;
    st_vsn_weights w = vsn_bind_w(&k->L, p + sh);
    st_vsn_grads gr = vsn_bind_g(&k->L, g + sh);
    st_cuda_vsn_set_gate_lanes(lanes);
    if (rc == ST_OK) rc = st_cuda_vsn_forward(R, F, C, Dv, s, F, c, C, &w, v, Dv, alpha, F, saved, work, NULL);
    /* Poison the work again: the backward recomputes what it needs there. */
    if (rc == ST_OK) cudaMemset(work, 0xFF, sizeof(float) * nwork);
    if (rc == ST_OK)
        rc = st_cuda_vsn_backward_ex(R, F, C, Dv, s, F, c, C, &w, saved, dv, dv_s, dalpha, F, ds, F, dc, C, 0, &gr,
                                     work, NULL);
    cudaError_t e = cudaDeviceSynchronize();
    st_cuda_vsn_set_gate_lanes(1);
    if (rc != ST_OK) fprintf(stderr, "GPU VSN call failed: %s\n", st_last_error());
    if (e != cudaSuccess) fprintf(stderr, "GPU VSN kernels failed: %s\n", cudaGetErrorString(e)), rc = ST_ERR_DEVICE;
    if (rc == ST_OK) {
        dev_download(o->v, v, (size_t)R * Dv), dev_download(o->alpha, alpha, (size_t)R * F);
        dev_download(o->ds, ds, (size_t)R * F), dev_download(o->dc, dc, (size_t)R * C);
        dev_download(o->g, g + sh, k->L.total);
    }
    float *all[] = {s, c, dv, dalpha, p, g, v, alpha, ds, dc, saved, work};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dev_free(all[i]);
    return rc;
}

/* rel err of n values of a vs b (increments over base when given); checked
 * against bound, printed when print. */
static double check_tensor(const char *label, const char *what, const float *a, const float *b, const float *base,
                           long n, double bound, int print) {
    float *x = alloc_f(n), *y = alloc_f(n);
    for (long i = 0; i < n; i++) {
        x[i] = base ? a[i] - base[i] : a[i];
        y[i] = base ? b[i] - base[i] : b[i];
    }
    double err = rel_err_rows(x, (int)n, y, (int)n, 1, (int)n);
    if (print) {
        char name[160];
        snprintf(name, sizeof name, "%s %s", label, what);
        printf("  %-60s rel err %.3e (bound %.0e)\n", name, err, bound);
    }
    CHECK(err <= bound, "%s: %s rel err %.3e > %.0e", label, what, err, bound);
    free(x), free(y);
    return err;
}

/* v, alpha, ds, dc and the 21 parameter gradients of a vs b; the gradient
 * bound grad_bound (fwd_bound for v and alpha). */
static void compare(const gcase *k, const char *label, const gout *a, const gout *b, double fwd_bound,
                    double grad_bound) {
    long R = k->rows;
    check_tensor(label, "v", a->v, b->v, NULL, R * k->Dv, fwd_bound, 1);
    check_tensor(label, "alpha", a->alpha, b->alpha, NULL, R * k->F, fwd_bound, 1);
    check_tensor(label, "ds", a->ds, b->ds, NULL, R * k->F, grad_bound, 1);
    check_tensor(label, "dc", a->dc, b->dc, NULL, R * k->C, grad_bound, 1);
    double worst = 0;
    int worst_i = 0;
    for (int i = 0; i < VSN_NT; i++) {
        const vsn_tensor *t = &k->L.t[i];
        size_t o = k->L.off[i];
        double e = check_tensor(label, t->name, a->g + o, b->g + o, k->g0 + o, (long)t->rows * t->cols, grad_bound, 0);
        if (!(e <= worst)) worst = e, worst_i = i;
    }
    char name[160];
    snprintf(name, sizeof name, "%s params (worst: %s)", label, k->L.t[worst_i].name);
    printf("  %-60s rel err %.3e (bound %.0e)\n", name, worst, grad_bound);
}

static int same_out(const gcase *k, const gout *a, const gout *b) {
    size_t R = (size_t)k->rows;
    return !memcmp(a->v, b->v, sizeof(float) * R * k->Dv) && !memcmp(a->alpha, b->alpha, sizeof(float) * R * k->F) &&
           !memcmp(a->ds, b->ds, sizeof(float) * R * k->F) && !memcmp(a->dc, b->dc, sizeof(float) * R * k->C) &&
           !memcmp(a->g, b->g, sizeof(float) * k->L.total);
}

/* The group width the lane-group path takes for Dv (0: none). */
static int want_group(int Dv) {
    if (Dv % 4 != 0 || Dv > 32) return 0;
    int G = 1;
    while (4 * G < Dv)
        G *= 2;
    return G;
}

static void test_case(const char *label, int rows, int F, int C, int Dv, uint64_t seed) {
    gcase k = make_case(label, rows, F, C, Dv, seed);
    int G = st_cuda_vsn_gate_group(rows, F, Dv);
    printf("%s: rows=%d F=%d C=%d Dv=%d (lane groups of %d)\n", label, rows, F, C, Dv, G);
    CHECK(G == want_group(Dv) && G > 0, "%s: st_cuda_vsn_gate_group says %d lanes a group, not %d", label, G,
          want_group(Dv));
    st_cuda_vsn_set_gate_lanes(0);
    CHECK(st_cuda_vsn_gate_group(rows, F, Dv) == 0, "%s: the lane groups stay on after st_cuda_vsn_set_gate_lanes(0)",
          label);
    st_cuda_vsn_set_gate_lanes(1);
    gout cpu = make_out(&k), on = make_out(&k), on2 = make_out(&k), mis = make_out(&k), off = make_out(&k);
    cpu_run(&k, &cpu);
    int ok_on = gpu_run(&k, 1, 0, &on) == ST_OK, ok_on2 = gpu_run(&k, 1, 0, &on2) == ST_OK;
    int ok_mis = gpu_run(&k, 1, 1, &mis) == ST_OK, ok_off = gpu_run(&k, 0, 0, &off) == ST_OK;
    CHECK(ok_on && ok_on2 && ok_mis && ok_off, "%s: a GPU call failed (message above)", label);
    char name[128];
    if (ok_on && ok_on2 && ok_mis && ok_off) {
        snprintf(name, sizeof name, "%s, lane groups vs CPU", label);
        compare(&k, name, &on, &cpu, FWD_BOUND, GRAD_BOUND);
        CHECK(same_out(&k, &on, &on2), "%s: two runs of the lane groups differ (not deterministic)", label);
        snprintf(name, sizeof name, "%s, lane groups, unaligned dv and weights vs CPU", label);
        compare(&k, name, &mis, &cpu, FWD_BOUND, GRAD_BOUND);
        snprintf(name, sizeof name, "%s, unaligned vs aligned", label);
        compare(&k, name, &mis, &on, FWD_BOUND, PATHS_BOUND);
        snprintf(name, sizeof name, "%s, a warp an item vs CPU", label);
        compare(&k, name, &off, &cpu, FWD_BOUND, GRAD_BOUND);
        snprintf(name, sizeof name, "%s, lane groups vs a warp an item", label);
        compare(&k, name, &on, &off, FWD_BOUND, PATHS_BOUND);
        printf("  %s: the two paths %s bit for bit\n", label, same_out(&k, &on, &off) ? "agree" : "differ");
    }
    free_out(&cpu), free_out(&on), free_out(&on2), free_out(&mis), free_out(&off);
    free_case(&k);
}

/* The sizes the lane groups do not take keep a warp an item. */
static void test_other_sizes(void) {
    const int Dvs[] = {5, 6, 36, 48, 64, 256};
    for (size_t i = 0; i < sizeof Dvs / sizeof Dvs[0]; i++) {
        int G = st_cuda_vsn_gate_group(64, 40, Dvs[i]);
        CHECK(G == 0, "Dv=%d: st_cuda_vsn_gate_group says %d lanes a group, not 0 (a warp an item)", Dvs[i], G);
    }
    CHECK(st_cuda_vsn_gate_group(0, 40, 32) == 0, "rows = 0 takes the lane groups");
}

static void run_all(void) {
    const int quick = test_quick();
    st_cuda_vsn_set_fused_backward(0); /* the unfused backward: the gate kernels under test */
    test_other_sizes();
    test_case("default Dv=32", quick ? 64 : 4 * 64, 40, 16, 32, 0xC0DB01);
    test_case("tiny Dv=8", quick ? 32 : 2 * 32, 40, 16, 8, 0xC0DB02);
    test_case("odd rows Dv=32", quick ? 37 : 3 * 61, 40, 16, 32, 0xC0DB03);
    test_case("odd rows F=37 Dv=16", quick ? 29 : 2 * 53 + 1, 37, 11, 16, 0xC0DB04);
    test_case("Dv=12 (a lane of each group idle)", quick ? 23 : 63, 10, 5, 12, 0xC0DB05);
    test_case("Dv=4 (a lane an item)", quick ? 19 : 45, 9, 3, 4, 0xC0DB06);
    st_cuda_vsn_set_fused_backward(1);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    run_all();
#endif
    TEST_MAIN_END();
}
