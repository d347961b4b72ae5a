/* test_cuda_window.c: the GPU window builder (cuda/window_cuda.h) against
 * the CPU float op (env/window.h), for the tiny and odd presets (F=40 C=16
 * K=32; F=37 C=11 K=50) and a 64-window batch over several instruments:
 *  - both GPU entry points (a pointer per pair; an instrument table filled
 *    by st_cuda_features_upload) equal the CPU window bit for bit (copies);
 *  - window rows have a padded stride, context rows too, with poison in the
 *    gaps: the window's gaps keep their poison bits and no context poison
 *    leaks in; bars at both ends of an instrument (K-1 and n-1);
 *  - two runs, same bits.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "env/window.h"
#include "check/gradcheck.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/window_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
typedef struct {
    const char *name;
    int B, K, F, C, n_inst, pad;
} win_case;

/* A market of n_inst instruments of 100 + 37 i bars of F random features. */
static st_market make_market(const win_case *c, uint64_t seed) {
    st_market m;
    memset(&m, 0, sizeof m);
    m.n_inst = c->n_inst, m.F = c->F, m.K = c->K;
    m.inst = calloc((size_t)c->n_inst, sizeof(st_instrument));
    for (int i = 0; i < c->n_inst; i++) {
        st_instrument *I = &m.inst[i];
        I->n = c->K + 100 + 37 * i;
        I->features = malloc(sizeof(float) * (size_t)I->n * c->F);
        st_gc_randnf(I->features, (long)I->n * c->F, 1.0f, seed, 10 + (uint32_t)i);
        snprintf(I->name, sizeof I->name, "syn%d", i);
    }
    return m;
}

static void free_market(st_market *m) {
    for (int i = 0; i < m->n_inst; i++)
        free(m->inst[i].features);
    free(m->inst);
}

static long gaps_written(const float *win, int rows, int width, int stride) {
    long bad = 0;
    for (int r = 0; r < rows; r++)
        for (int j = width; j < stride; j++) {
            uint32_t u;
            memcpy(&u, &win[(size_t)r * stride + j], sizeof u);
            bad += u != POISON_BITS;
        }
    return bad;
}

static void win_case_run(const win_case *c, uint64_t seed) {
    int B = c->B, K = c->K, F = c->F, C = c->C, rows = B * K;
    int ws = F + C + 6 * c->pad, cs = C + 3 * c->pad;
    size_t nwin = (size_t)rows * ws;
    st_market m = make_market(c, seed);
    /* pairs: instruments round-robin, bars random, the first and last bars included */
    int *inst = malloc(sizeof(int) * B), *bar = malloc(sizeof(int) * B);
    st_rng r = st_rng_make(seed, ST_STREAM_TEST);
    for (int b = 0; b < B; b++) {
        inst[b] = b % c->n_inst;
        int n = m.inst[inst[b]].n;
        bar[b] = b == 0 ? K - 1 : b == 1 ? n - 1 : K - 1 + (int)st_rng_below(&r, (uint32_t)(n - K + 1));
    }
    float *ctx = malloc(sizeof(float) * (size_t)B * cs), *cv = malloc(sizeof(float) * (size_t)B * C);
    st_gc_randnf(cv, (long)B * C, 1.0f, seed, 2);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < cs; j++)
            ctx[(size_t)b * cs + j] = j < C ? cv[(size_t)b * C + j] : poison();

    /* CPU reference */
    float *ref = malloc(sizeof(float) * nwin);
    for (size_t i = 0; i < nwin; i++)
        ref[i] = poison();
    const float **feat = malloc(sizeof(float *) * B);
    for (int b = 0; b < B; b++)
        feat[b] = m.inst[inst[b]].features;
    st_window_build_rows(B, K, F, C, feat, F, bar, ctx, cs, ref, ws);

    /* GPU: both entry points, twice each */
    st_cuda_features df;
    int rc = st_cuda_features_upload(&m, &df);
    CHECK(rc == ST_OK, "%s: features upload: %s", c->name, st_last_error());
    const float **host_ptrs = malloc(sizeof(float *) * B);
    size_t off = 0, *inst_off = malloc(sizeof(size_t) * c->n_inst);
    for (int i = 0; i < c->n_inst; i++)
        inst_off[i] = off, off += (size_t)m.inst[i].n * F;
    for (int b = 0; b < B; b++)
        host_ptrs[b] = df.data + inst_off[inst[b]]; /* device addresses */
    const float *const *dptrs = dev_bytes(host_ptrs, sizeof(float *) * B);
    int *dinst = dev_bytes(inst, sizeof(int) * B), *dbar = dev_bytes(bar, sizeof(int) * B);
    float *dctx = dev_upload(ctx, (size_t)B * cs);
    float *out[4];
    for (int run = 0; run < 4; run++) {
        float *dwin = dev_poisoned(nwin);
        rc = run % 2 == 0 ? st_cuda_window_build_rows(B, K, F, C, dptrs, F, dbar, dctx, cs, dwin, ws, NULL)
                          : st_cuda_window_build(B, K, F, C, df.inst, df.F, dinst, dbar, dctx, cs, dwin, ws, NULL);
        CHECK(rc == ST_OK, "%s: build (%s): %s", c->name, run % 2 ? "instrument table" : "pointer per pair",
              st_last_error());
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernel failed: %s", c->name,
              cudaGetErrorString(cudaGetLastError()));
        out[run] = malloc(sizeof(float) * nwin);
        dev_download(out[run], dwin, nwin);
        dev_free(dwin);
    }
    printf("%s: B %d K %d F %d C %d over %d instruments, window stride %d, context stride %d\n", c->name, B, K, F, C,
           c->n_inst, ws, cs);
    for (int run = 0; run < 2; run++) {
        const char *how = run ? "instrument table" : "pointer per pair";
        long diff = 0;
        for (int rr = 0; rr < rows; rr++)
            for (int j = 0; j < F + C; j++)
                diff += out[run][(size_t)rr * ws + j] != ref[(size_t)rr * ws + j];
        CHECK(diff == 0, "%s (%s): %ld window values differ from the CPU's", c->name, how, diff);
        long gaps = gaps_written(out[run], rows, F + C, ws);
        CHECK(gaps == 0, "%s (%s): %ld gap values written", c->name, how, gaps);
        CHECK(memcmp(out[run], out[run + 2], sizeof(float) * nwin) == 0, "%s (%s): two runs differ", c->name, how);
        printf("  %-36s %ld values differ, %ld gap values written\n", how, diff, gaps);
    }
    for (int run = 0; run < 4; run++)
        free(out[run]);
    st_cuda_features_free(&df);
    dev_free((void *)dptrs), dev_free(dinst), dev_free(dbar), dev_free(dctx);
    free(host_ptrs), free(inst_off), free(feat), free(ref), free(ctx), free(cv), free(inst), free(bar);
    free_market(&m);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_dims t, o;
    st_dims_preset("tiny", &t);
    st_dims_preset("odd", &o);
    const win_case cases[] = {
        {"tiny", 4, t.K, t.F, t.C, 2, 0},
        {"tiny padded", 6, t.K, t.F, t.C, 3, 1},
        {"odd padded", 10, o.K, o.F, o.C, 3, 1},
        {"64 windows padded", 64, t.K, t.F, t.C, 5, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        win_case_run(&cases[i], 8000 + i);
#endif
    TEST_MAIN_END();
}
