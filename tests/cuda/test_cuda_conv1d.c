/* test_cuda_conv1d.c: the GPU causal depthwise conv (+ SiLU) of the Mamba2
 * block (cuda/conv1d_cuda.h) against the CPU float op (model/conv1d.h), with
 * x and dx column slices of the in_proj output rows as in the mixer (xBC at
 * column d_inner of rows of st_in_proj_out values), for the tiny, odd and
 * default presets, a 64-window batch and a window shorter than the kernel:
 *  - forward y within 1e-5 relative, SiLU on and off (W taps summed in the
 *    same order; FMA may round differently);
 *  - backward dx (written) within 1e-4, dw and db (added to from the same
 *    random start, measured against the increment) within 1e-4;
 *  - every value of the row outside the slice is poison: never read (no NaN
 *    leaks into results), never written (poison bits survive), and the
 *    gaps of y keep their poison;
 *  - two GPU runs give the same bits.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "model/conv1d.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/conv1d_cuda.h"
#endif

#ifdef ST_HAVE_CUDA
/* rows x stride of poison with N(0, scale^2) values in columns [off, off + width). */
static float *host_slice(int rows, int width, int stride, int off, float scale, uint64_t seed, uint32_t salt) {
    float *p = malloc(sizeof(float) * ((size_t)rows * stride + 1));
    float *v = malloc(sizeof(float) * ((size_t)rows * width + 1));
    st_gc_randnf(v, (long)rows * width, scale, seed, salt);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < stride; c++)
            p[(size_t)r * stride + c] = c >= off && c < off + width ? v[(size_t)r * width + c - off] : poison();
    free(v);
    return p;
}

/* Values outside columns [off, off + width) whose poison bits were overwritten. */
static long outside_written(const float *h, int rows, int width, int stride, int off) {
    long n = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < stride; c++) {
            if (c >= off && c < off + width) continue;
            uint32_t u;
            memcpy(&u, &h[(size_t)r * stride + c], sizeof u);
            n += u != POISON_BITS;
        }
    return n;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* x and dx are the Ch columns at `off` of rows `xs` wide (the in_proj output). */
typedef struct {
    const char *name;
    int Bsz, K, Ch, W, silu, off, row, pad;
} conv_case;

typedef struct {
    int xs, ys, gs;
    float *x, *w, *b, *dy, *dw0, *db0;
} conv_data;

typedef struct {
    float *y, *dx, *dw, *db;
} conv_out;

static void conv_gpu(const conv_case *c, const conv_data *h, conv_out *o) {
    int rows = c->Bsz * c->K;
    size_t nx = (size_t)rows * h->xs, ny = (size_t)rows * h->ys, nw = (size_t)c->Ch * c->W;
    float *xbuf = dev_upload(h->x, nx), *w = dev_upload(h->w, nw), *b = dev_upload(h->b, c->Ch);
    float *dy = dev_upload(h->dy, (size_t)rows * h->gs), *y = dev_poisoned(ny), *dxbuf = dev_poisoned(nx);
    float *dw = dev_upload(h->dw0, nw), *db = dev_upload(h->db0, c->Ch);
    float *work = dev_poisoned(st_cuda_conv1d_work_count(c->Bsz, c->K, c->Ch));
    int rc = st_cuda_conv1d_forward(c->Bsz, c->K, c->Ch, c->W, xbuf + c->off, h->xs, w, b, c->silu, y, h->ys, NULL);
    CHECK(rc == ST_OK, "%s: forward: %s", c->name, st_last_error());
    rc = st_cuda_conv1d_backward(c->Bsz, c->K, c->Ch, c->W, xbuf + c->off, h->xs, w, b, c->silu, dy, h->gs,
                                 dxbuf + c->off, h->xs, dw, db, work, NULL);
    CHECK(rc == ST_OK, "%s: backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->y = dev_download_new(y, ny), o->dx = dev_download_new(dxbuf, nx);
    o->dw = dev_download_new(dw, nw), o->db = dev_download_new(db, c->Ch);
    dev_free(xbuf), dev_free(w), dev_free(b), dev_free(dy), dev_free(y), dev_free(dxbuf), dev_free(dw);
    dev_free(db), dev_free(work);
}

static void conv_out_free(conv_out *o) { free(o->y), free(o->dx), free(o->dw), free(o->db); }

static void conv_case_run(const conv_case *c, uint64_t seed) {
    int rows = c->Bsz * c->K, p = c->pad;
    conv_data h = {c->row + 3 * p, c->Ch + 5 * p, c->Ch + 2 * p, 0, 0, 0, 0, 0, 0};
    size_t nx = (size_t)rows * h.xs, ny = (size_t)rows * h.ys, nw = (size_t)c->Ch * c->W;
    h.x = host_slice(rows, c->Ch, h.xs, c->off, 1.0f, seed, 1);
    h.w = host_slice(c->Ch, c->W, c->W, 0, 0.5f, seed, 2), h.b = host_slice(1, c->Ch, c->Ch, 0, 0.3f, seed, 3);
    h.dy = host_slice(rows, c->Ch, h.gs, 0, 1.0f, seed, 4);
    h.dw0 = host_slice(c->Ch, c->W, c->W, 0, 1.0f, seed, 5), h.db0 = host_slice(1, c->Ch, c->Ch, 0, 1.0f, seed, 6);

    float *y = host_poisoned(ny), *dx = host_poisoned(nx), *dw = host_copy(h.dw0, nw), *db = host_copy(h.db0, c->Ch);
    float *work = malloc(sizeof(float) * (st_conv1d_work_count(c->Bsz, c->K, c->Ch) + 1));
    st_conv1d_forward(c->Bsz, c->K, c->Ch, c->W, h.x + c->off, h.xs, h.w, h.b, c->silu, y, h.ys);
    st_conv1d_backward(c->Bsz, c->K, c->Ch, c->W, h.x + c->off, h.xs, h.w, h.b, c->silu, h.dy, h.gs, dx + c->off, h.xs,
                       dw, db, work);

    conv_out g[2];
    conv_gpu(c, &h, &g[0]);
    conv_gpu(c, &h, &g[1]);
    printf("%s: Bsz %d K %d Ch %d W %d silu %d, x/dx at column %d of rows of %d, y stride %d, dy stride %d\n", c->name,
           c->Bsz, c->K, c->Ch, c->W, c->silu, c->off, h.xs, h.ys, h.gs);
    char what[96];
    snprintf(what, sizeof what, "%s y", c->name);
    CHECK_PARITY(what, rel_err_rows(g[0].y, h.ys, y, h.ys, rows, c->Ch), 1e-5);
    snprintf(what, sizeof what, "%s dx", c->name);
    CHECK_PARITY(what, rel_err_rows(g[0].dx + c->off, h.xs, dx + c->off, h.xs, rows, c->Ch), 1e-4);
    snprintf(what, sizeof what, "%s dw (+=)", c->name);
    CHECK_PARITY(what, rel_err_added(g[0].dw, dw, h.dw0, nw), 1e-4);
    snprintf(what, sizeof what, "%s db (+=)", c->name);
    CHECK_PARITY(what, rel_err_added(g[0].db, db, h.db0, c->Ch), 1e-4);
    long gy = outside_written(g[0].y, rows, c->Ch, h.ys, 0), gdx = outside_written(g[0].dx, rows, c->Ch, h.xs, c->off);
    CHECK(gy == 0 && gdx == 0, "%s: %ld values of y's gaps and %ld of dx's row outside the slice were written", c->name,
          gy, gdx);
    int same = same_bits(g[0].y, g[1].y, ny) && same_bits(g[0].dx, g[1].dx, nx) && same_bits(g[0].dw, g[1].dw, nw) &&
               same_bits(g[0].db, g[1].db, c->Ch);
    CHECK(same, "%s: two GPU runs differ (y %d dx %d dw %d db %d same)", c->name, same_bits(g[0].y, g[1].y, ny),
          same_bits(g[0].dx, g[1].dx, nx), same_bits(g[0].dw, g[1].dw, nw), same_bits(g[0].db, g[1].db, c->Ch));
    conv_out_free(&g[0]), conv_out_free(&g[1]);
    free(y), free(dx), free(dw), free(db), free(work);
    free(h.x), free(h.w), free(h.b), free(h.dy), free(h.dw0), free(h.db0);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_dims t, o, d;
    st_dims_preset("tiny", &t);
    st_dims_preset("odd", &o);
    st_dims_preset("default", &d);
    const conv_case cases[] = {
        {"tiny xBC silu", 2, t.K, st_conv_dim(&t), t.W, 1, st_d_inner(&t), st_in_proj_out(&t), 0},
        {"tiny xBC plain", 2, t.K, st_conv_dim(&t), t.W, 0, st_d_inner(&t), st_in_proj_out(&t), 1},
        {"odd xBC silu", 3, o.K, st_conv_dim(&o), o.W, 1, st_d_inner(&o), st_in_proj_out(&o), 1},
        {"odd xBC plain", 3, o.K, st_conv_dim(&o), o.W, 0, st_d_inner(&o), st_in_proj_out(&o), 1},
        {"W > K (K=3, W=4)", 5, 3, 11, 4, 1, 2, 17, 1},
        {"default xBC silu", 2, d.K, st_conv_dim(&d), d.W, 1, st_d_inner(&d), st_in_proj_out(&d), 1},
        {"64 windows xBC silu", 64, t.K, st_conv_dim(&t), t.W, 1, st_d_inner(&t), st_in_proj_out(&t), 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_case_run(&cases[i], 4000 + i);
#endif
    TEST_MAIN_END();
}
