/* test_cuda_vsn_fill.c: the VSN bar table's fill a block per (variable,
 * row split) (model/vsn_table_fill_tc.cu, st_cuda_vsn_set_table_fill_j(1))
 * against the tensor-core kernel's table mode it replaces in bf16 mode
 * (model/vsn_forward_fused_tc.cu, the switch at 0): the same bits for every
 * t, the contract the action step's tests build on (the table's t_j are the
 * one-pass forward's: tests/cuda/test_cuda_vsn.c, test_cuda_model.c).
 * Skips (exit 77) without a device.
 *
 * Per case: fresh Philox s (its rows strided, the gap NaN) and weights and
 * folds (U, V, Vg: the fill reads them as given), then each fill into a
 * table poisoned with NaN, TAB_PAST rows past the end included:
 *   - st_cuda_vsn_table_fill (the action step's build): rows 1, 7 (a
 *     partial warp tile), 128, 129 (past a 128-row block of the old
 *     kernel), 5,000 (several tiles a warp);
 *   - st_cuda_vsn_table_fill_rows (the training step's): cap 5,000 with a
 *     device count below it (3,333), above it (the rows end at cap), 0, and
 *     source rows a random permutation of more s rows than the cap;
 * at Dv 32 and 16, F 40 and 7. Checks: the count's rows the same bits in
 * both (memcmp) and free of NaN; every row past the count (and the
 * TAB_PAST rows past the cap) still holding the poison in both; the new
 * fill run twice the same bits. A control shows memcmp sees an error of
 * one ulp: the first t with its last bit flipped differs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_test.h"
#include "model/vsn.h"

#ifdef ST_HAVE_CUDA
#include "cuda/linear_cuda.h" /* st_cuda_set_matmul_precision */
#include "cuda/vsn_fold_cuda.h"
#include "cuda/vsn_forward_fused_cuda.h"

#define TAB_PAST 3 /* rows past the cap, poisoned, checked untouched */

/* A case's device weights, folds and s. */
typedef struct {
    int F, Dv, srows, s_stride;
    float *W2, *Wg, *U, *V, *Vg, *ew, *eb, *lnw, *lnb, *s;
    struct st_vsn_weights_f32 w;
    st_vsn_fold fo;
} fill_in;

static float *dev_randn(size_t n, float scale, uint64_t seed, uint32_t salt) {
    float *h = host_randn_scaled(n, scale, seed, salt);
    float *d = h ? dev_upload(h, n) : NULL;
    free(h);
    return d;
}

/* Weights and folds of F variables at Dv (the scales of a trained model's: the products O(1)),
 * and srows rows of s at a stride with a NaN gap. Returns 1 when every upload worked. */
static int fill_in_make(fill_in *in, int F, int Dv, int srows, uint64_t seed) {
    memset(in, 0, sizeof *in);
    in->F = F, in->Dv = Dv, in->srows = srows, in->s_stride = F + 3;
    const size_t P = (size_t)F * Dv;
    const float ws = 1.0f / sqrtf((float)Dv);
    in->W2 = dev_randn(P * Dv, ws, seed, 1), in->Wg = dev_randn(2 * P * Dv, ws, seed, 2);
    in->U = dev_randn(P, 1.0f, seed, 3), in->V = dev_randn(P, 0.5f, seed, 4), in->Vg = dev_randn(2 * P, 0.5f, seed, 5);
    in->ew = dev_randn(P, 1.0f, seed, 6), in->eb = dev_randn(P, 0.3f, seed, 7);
    in->lnw = dev_randn(P, 1.0f, seed, 8), in->lnb = dev_randn(P, 0.3f, seed, 9);
    float *s = host_randn_scaled((size_t)srows * F, 1.5f, seed, 10),
          *sp = malloc(sizeof(float) * (size_t)srows * in->s_stride);
    if (s && sp) {
        for (int r = 0; r < srows; r++)
            for (int c = 0; c < in->s_stride; c++)
                sp[(size_t)r * in->s_stride + c] = c < F ? s[(size_t)r * F + c] : NAN;
        in->s = dev_upload(sp, (size_t)srows * in->s_stride);
    }
    free(s), free(sp);
    memset(&in->w, 0, sizeof in->w);
    in->w.var_fc2_w = in->W2, in->w.var_glu_w = in->Wg, in->w.embed_w = in->ew, in->w.embed_b = in->eb;
    in->w.var_ln_w = in->lnw, in->w.var_ln_b = in->lnb;
    memset(&in->fo, 0, sizeof in->fo);
    in->fo.U = in->U, in->fo.V = in->V, in->fo.Vg = in->Vg;
    return in->W2 && in->Wg && in->U && in->V && in->Vg && in->ew && in->eb && in->lnw && in->lnb && in->s;
}

static void fill_in_free(fill_in *in) {
    float *all[] = {in->W2, in->Wg, in->U, in->V, in->Vg, in->ew, in->eb, in->lnw, in->lnb, in->s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dev_free(all[i]);
}

/* One fill of cap rows into a poisoned table (cap + TAB_PAST rows), by the kernel `by_j` picks:
 * st_cuda_vsn_table_fill where dcount is NULL, else _fill_rows with the device count and source
 * rows. Returns the host table (NULL: the call or the kernel failed, said on stderr). */
static float *fill_run(const fill_in *in, int cap, const int *dcount, const int *dsrc, int by_j) {
    const size_t n = (size_t)(cap + TAB_PAST) * in->F * in->Dv;
    float *dtab = dev_poisoned(n);
    if (!dtab) return NULL;
    st_cuda_vsn_set_table_fill_j(by_j);
    int rc = dcount ? st_cuda_vsn_table_fill_rows(cap, dcount, dsrc, in->F, in->Dv, in->s, in->s_stride, &in->w,
                                                  &in->fo, dtab, NULL)
                    : st_cuda_vsn_table_fill(cap, in->F, in->Dv, in->s, in->s_stride, &in->w, &in->fo, dtab, NULL);
    st_cuda_vsn_set_table_fill_j(1);
    cudaError_t e = cudaDeviceSynchronize();
    if (rc != ST_OK) fprintf(stderr, "VSN table fill failed: %s\n", st_last_error());
    if (e != cudaSuccess) fprintf(stderr, "VSN table fill kernel failed: %s\n", cudaGetErrorString(e));
    float *tab = rc == ST_OK && e == cudaSuccess ? dev_download_new(dtab, n) : NULL;
    dev_free(dtab);
    return tab;
}

/* 1 when no value of rows [0, n) is NaN, and every value of rows [n, end) is the poison. */
static int written_then_poisoned(const float *tab, int P, int n, int end) {
    for (size_t i = 0; i < (size_t)n * P; i++)
        if (tab[i] != tab[i]) return 0;
    for (size_t i = (size_t)n * P; i < (size_t)end * P; i++)
        if (!is_poison(tab[i])) return 0;
    return 1;
}

/* Both kernels over the same inputs; count < 0: st_cuda_vsn_table_fill of cap rows, else
 * _fill_rows with that device count and src_rows a permutation's first cap entries. */
static void test_fill(const char *label, int cap, int count, int F, int Dv, uint64_t seed) {
    const int srows = count < 0 ? cap : cap + 5, P = F * Dv;
    const int n = count < 0 ? cap : count < cap ? count : cap;
    printf("%s: cap %d, count %d, F=%d Dv=%d\n", label, cap, count, F, Dv);
    fill_in in;
    int ok = fill_in_make(&in, F, Dv, srows, seed);
    int *dcount = NULL, *dsrc = NULL;
    if (ok && count >= 0) {
        int *perm = malloc(sizeof(int) * (size_t)srows);
        float *u = host_randn_scaled((size_t)srows, 1.0f, seed, 11);
        for (int r = 0; r < srows; r++)
            perm[r] = r;
        for (int r = srows - 1; r > 0; r--) { /* Fisher-Yates from the normals' fractional bits */
            const int k = (int)((uint32_t)(fabsf(u[r]) * 1e6f) % (uint32_t)(r + 1)), t = perm[r];
            perm[r] = perm[k], perm[k] = t;
        }
        dcount = dev_bytes(&count, sizeof count), dsrc = dev_bytes(perm, sizeof(int) * (size_t)cap);
        ok = dcount && dsrc;
        free(perm), free(u);
    }
    CHECK(ok, "%s: device buffers", label);
    if (ok) {
        float *old = fill_run(&in, cap, dcount, dsrc, 0), *by_j = fill_run(&in, cap, dcount, dsrc, 1);
        float *again = fill_run(&in, cap, dcount, dsrc, 1);
        CHECK(old && by_j && again, "%s: a fill failed (message above)", label);
        if (old && by_j && again) {
            const size_t bytes = sizeof(float) * (size_t)n * P;
            CHECK(written_then_poisoned(old, P, n, cap + TAB_PAST),
                  "%s: the old fill left NaN in its %d rows or wrote past them", label, n);
            CHECK(written_then_poisoned(by_j, P, n, cap + TAB_PAST),
                  "%s: the fill by variable left NaN in its %d rows or wrote past them", label, n);
            CHECK(!memcmp(old, by_j, bytes), "%s: the fill by variable differs from the old kernel's bits", label);
            CHECK(!memcmp(by_j, again, bytes), "%s: two fills by variable differ (not deterministic)", label);
            if (n > 0) { /* control: one ulp in one value is seen */
                uint32_t bits;
                memcpy(&bits, by_j, sizeof bits);
                bits ^= 1u;
                memcpy(by_j, &bits, sizeof bits);
                CHECK(memcmp(old, by_j, bytes) != 0, "%s: control: a flipped last bit went unseen", label);
            }
        }
        free(old), free(by_j), free(again);
    }
    if (dcount) dev_free(dcount);
    if (dsrc) dev_free(dsrc);
    fill_in_free(&in);
}

static void run_all(void) {
    st_cuda_set_matmul_precision(ST_MATMUL_BF16);
    st_cuda_vsn_set_fused_tc(1);
    CHECK(st_cuda_vsn_fused_tc_takes(32) && st_cuda_vsn_fused_tc_takes(16),
          "bf16 mode: the tensor-core fills do not take Dv 32 and 16");
    static const int dvs[2] = {32, 16}, fs[2] = {40, 7}, rows[5] = {1, 7, 128, 129, 5000};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            char label[64];
            const uint64_t seed = 0xF111A000u + 16u * (unsigned)(2 * a + b);
            for (int r = 0; r < 5; r++) {
                snprintf(label, sizeof label, "fill Dv=%d F=%d, %d rows", dvs[a], fs[b], rows[r]);
                test_fill(label, rows[r], -1, fs[b], dvs[a], seed + (unsigned)r);
            }
            snprintf(label, sizeof label, "fill_rows Dv=%d F=%d, count below cap", dvs[a], fs[b]);
            test_fill(label, 5000, 3333, fs[b], dvs[a], seed + 5);
            snprintf(label, sizeof label, "fill_rows Dv=%d F=%d, count above cap", dvs[a], fs[b]);
            test_fill(label, 1000, 1010, fs[b], dvs[a], seed + 6);
            snprintf(label, sizeof label, "fill_rows Dv=%d F=%d, count 0", dvs[a], fs[b]);
            test_fill(label, 300, 0, fs[b], dvs[a], seed + 7);
        }
    st_cuda_set_matmul_precision(ST_MATMUL_FP32);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    run_all();
#endif
    TEST_MAIN_END();
}
