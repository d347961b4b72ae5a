/* test_cuda_conv1d.c: the GPU causal depthwise conv (+ SiLU) of the Mamba2
 * block (cuda/conv1d_cuda.h) against the CPU float op (model/conv1d.h), with
 * x and dx column slices of the in_proj output rows as in the mixer (xBC at
 * column d_inner of rows of st_in_proj_out values), for the tiny, odd and
 * default presets, a 64-window batch and a window shorter than the kernel,
 * and for the tiled kernels (W <= 4: tiles of 16 rows of a window, g formed
 * again for the W-1 rows past a tile, parameter partials over groups of
 * tiles; conv1d.cu): windows that are not a multiple of the tile (K = 50,
 * 150, 18) or shorter than it, W = 2 and 3, many groups of tiles, and a
 * wider W (6, the per-row kernels). The vector paths (float4 forward,
 * float2 backward) run where the slice is aligned and the strides are
 * multiples of 4 (pad 0: the mixer's own layout); the padded and the
 * misaligned cases take the scalar ones:
 *  - forward y within 1e-5 relative, SiLU on and off (W taps summed in the
 *    same order; FMA may round differently);
 *  - backward dx (written) within 1e-4, dw and db (added to from the same
 *    random start, measured against the increment) within 1e-4;
 *  - every value of the row outside the slice is poison: never read (no NaN
 *    leaks into results), never written (poison bits survive), and the
 *    gaps of y keep their poison;
 *  - the forward at rows K-1 alone (st_cuda_conv1d_forward_last) gives
 *    the full forward's bits there and writes nothing else;
 *  - two GPU runs give the same bits, and a vector-path case gives the same
 *    bits as its scalar twin (same values, other strides: the sums run in
 *    an order that depends on the shapes only).
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

/* x and dx are the Ch columns at `off` of rows `row + 3 pad` wide (the
 * in_proj output); y's stride is Ch + 5 pad, dy's Ch + 2 pad. twin > 0:
 * the same shape and values as case twin - 1, whose bits it must give. */
typedef struct {
    const char *name;
    int Bsz, K, Ch, W, silu, off, row, pad, twin;
} conv_case;

/* A case's GPU results, compact ([rows, Ch] for y and dx). */
typedef struct {
    float *y, *dx, *dw, *db;
} conv_bits;

typedef struct {
    int xs, ys, gs;
    float *x, *w, *b, *dy, *dw0, *db0;
} conv_data;

typedef struct {
    float *y, *dx, *dw, *db, *ylast; /* ylast: st_cuda_conv1d_forward_last into a poisoned y */
} conv_out;

static void conv_gpu(const conv_case *c, const conv_data *h, conv_out *o) {
    int rows = c->Bsz * c->K;
    size_t nx = (size_t)rows * h->xs, ny = (size_t)rows * h->ys, nw = (size_t)c->Ch * c->W;
    float *xbuf = dev_upload(h->x, nx), *w = dev_upload(h->w, nw), *b = dev_upload(h->b, c->Ch);
    float *dy = dev_upload(h->dy, (size_t)rows * h->gs), *y = dev_poisoned(ny), *dxbuf = dev_poisoned(nx);
    float *dw = dev_upload(h->dw0, nw), *db = dev_upload(h->db0, c->Ch);
    float *work = dev_poisoned(st_cuda_conv1d_work_count(c->Bsz, c->K, c->Ch, c->W));
    int rc = st_cuda_conv1d_forward(c->Bsz, c->K, c->Ch, c->W, xbuf + c->off, h->xs, w, b, c->silu, y, h->ys, NULL);
    CHECK(rc == ST_OK, "%s: forward: %s", c->name, st_last_error());
    float *ylast = dev_poisoned(ny);
    rc = st_cuda_conv1d_forward_last(c->Bsz, c->K, c->Ch, c->W, xbuf + c->off, h->xs, w, b, c->silu, ylast, h->ys,
                                     NULL);
    CHECK(rc == ST_OK, "%s: forward_last: %s", c->name, st_last_error());
    rc = st_cuda_conv1d_backward(c->Bsz, c->K, c->Ch, c->W, xbuf + c->off, h->xs, w, b, c->silu, dy, h->gs,
                                 dxbuf + c->off, h->xs, dw, db, work, NULL);
    CHECK(rc == ST_OK, "%s: backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->y = dev_download_new(y, ny), o->dx = dev_download_new(dxbuf, nx);
    o->dw = dev_download_new(dw, nw), o->db = dev_download_new(db, c->Ch), o->ylast = dev_download_new(ylast, ny);
    dev_free(ylast), dev_free(xbuf), dev_free(w), dev_free(b), dev_free(dy), dev_free(y), dev_free(dxbuf), dev_free(dw);
    dev_free(db), dev_free(work);
}

static void conv_out_free(conv_out *o) { free(o->y), free(o->dx), free(o->dw), free(o->db), free(o->ylast); }

static void conv_case_run(const conv_case *c, uint64_t seed, conv_bits *keep) {
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
    /* forward_last: row K-1 of each window the full forward's bits, every other value still poison */
    long last_diff = 0, last_written = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = g[0].ylast + (size_t)r * h.ys, *f = g[0].y + (size_t)r * h.ys;
        for (int k = 0; k < h.ys; k++) {
            if (r % c->K == c->K - 1 && k < c->Ch) last_diff += !same_bits(a + k, f + k, 1);
            else last_written += !is_poison(a[k]);
        }
    }
    CHECK(last_diff == 0 && last_written == 0,
          "%s: forward_last: %ld values at rows K-1 differ from the full forward's, %ld written elsewhere", c->name,
          last_diff, last_written);
    int same = same_bits(g[0].y, g[1].y, ny) && same_bits(g[0].dx, g[1].dx, nx) && same_bits(g[0].dw, g[1].dw, nw) &&
               same_bits(g[0].db, g[1].db, c->Ch);
    CHECK(same, "%s: two GPU runs differ (y %d dx %d dw %d db %d same)", c->name, same_bits(g[0].y, g[1].y, ny),
          same_bits(g[0].dx, g[1].dx, nx), same_bits(g[0].dw, g[1].dw, nw), same_bits(g[0].db, g[1].db, c->Ch));
    keep->y = malloc(sizeof(float) * ((size_t)rows * c->Ch + 1));
    keep->dx = malloc(sizeof(float) * ((size_t)rows * c->Ch + 1));
    for (int r = 0; r < rows; r++) {
        memcpy(keep->y + (size_t)r * c->Ch, g[0].y + (size_t)r * h.ys, sizeof(float) * c->Ch);
        memcpy(keep->dx + (size_t)r * c->Ch, g[0].dx + (size_t)r * h.xs + c->off, sizeof(float) * c->Ch);
    }
    keep->dw = host_copy(g[0].dw, nw), keep->db = host_copy(g[0].db, c->Ch);
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
    /* the largest case: 300 windows of the default preset (1,200 tiles, a
     * parameter partial per 16: 75 groups for the finish's 16 lanes), 40
     * under test_quick() */
    const int many = test_quick() ? 40 : 300;
    const int dC = st_conv_dim(&d), dI = st_d_inner(&d), dR = st_in_proj_out(&d);
    const int oC = st_conv_dim(&o), oI = st_d_inner(&o), oR = st_in_proj_out(&o);
    const conv_case cases[] = {
        {"tiny xBC silu (vector)", 2, t.K, st_conv_dim(&t), t.W, 1, st_d_inner(&t), st_in_proj_out(&t), 0, 0},
        {"tiny xBC plain", 2, t.K, st_conv_dim(&t), t.W, 0, st_d_inner(&t), st_in_proj_out(&t), 1, 0},
        {"odd xBC silu", 3, o.K, oC, o.W, 1, oI, oR, 1, 0},
        {"odd xBC plain", 3, o.K, oC, o.W, 0, oI, oR, 1, 0},
        {"W > K (K=3, W=4)", 5, 3, 11, 4, 1, 2, 17, 1, 0},
        {"default xBC silu", 2, d.K, dC, d.W, 1, dI, dR, 1, 0},
        {"64 windows xBC silu", 64, t.K, st_conv_dim(&t), t.W, 1, st_d_inner(&t), st_in_proj_out(&t), 1, 0},
        /* 7: the mixer's layouts (vector paths), twins of 2 and 5 */
        {"odd xBC silu (vector, K=50)", 3, o.K, oC, o.W, 1, oI, oR, 0, 3},
        {"default xBC silu (vector)", 2, d.K, dC, d.W, 1, dI, dR, 0, 6},
        /* 9: the slice one float off alignment, strides multiples of 4: scalar */
        {"default xBC silu (misaligned)", 2, d.K, dC, d.W, 1, dI + 1, dR, 0, 0},
        /* 10: windows of 150 rows (9 tiles of 16 and one of 6), both paths */
        {"K=150 (vector)", 3, 150, 12, 4, 1, 4, 20, 0, 0},
        {"K=150 (scalar)", 3, 150, 12, 4, 1, 4, 20, 1, 11},
        /* 12: K=18: the first tile's halo is cut by the window's end */
        {"K=18 W=4", 4, 18, 20, 4, 1, 0, 24, 0, 0},
        {"W=3 K=37 (vector)", 3, 37, 16, 3, 1, 4, 24, 0, 0},
        {"W=2 K=33 plain (scalar)", 3, 33, 7, 2, 0, 3, 12, 1, 0},
        /* 15: wider than the tiled kernels: the per-row ones */
        {"W=6 K=40 (rows)", 3, 40, 24, 6, 1, 8, 36, 1, 0},
        /* 16: many groups of tiles, vector and scalar twins */
        {"many windows default (vector)", many, d.K, dC, d.W, 1, dI, dR, 0, 0},
        {"many windows default (scalar)", many, d.K, dC, d.W, 1, dI, dR, 1, 17},
        /* 18: windows of 5 rows: a lane sums several tiles */
        {"300 windows of K=5", 300, 5, 8, 4, 1, 0, 8, 0, 0},
    };
    enum { NCASES = sizeof cases / sizeof cases[0] };
    conv_bits bits[NCASES];
    for (int i = 0; i < NCASES; i++) {
        const conv_case *c = &cases[i];
        uint64_t seed = 4000 + (uint64_t)(c->twin ? c->twin - 1 : i);
        conv_case_run(c, seed, &bits[i]);
        if (!c->twin) continue;
        const conv_case *o2 = &cases[c->twin - 1];
        size_t n = (size_t)c->Bsz * c->K * c->Ch;
        CHECK(o2->Bsz == c->Bsz && o2->K == c->K && o2->Ch == c->Ch && o2->W == c->W && o2->silu == c->silu,
              "%s: its twin %s has another shape", c->name, o2->name);
        const conv_bits *a = &bits[i], *b = &bits[c->twin - 1];
        int sy = same_bits(a->y, b->y, n), sdx = same_bits(a->dx, b->dx, n);
        int sdw = same_bits(a->dw, b->dw, (size_t)c->Ch * c->W), sdb = same_bits(a->db, b->db, c->Ch);
        printf("  %s vs %s: y %s, dx %s, dw %s, db %s\n", c->name, o2->name, sy ? "same" : "differ",
               sdx ? "same" : "differ", sdw ? "same" : "differ", sdb ? "same" : "differ");
        CHECK(sy && sdx && sdw && sdb, "%s: bits differ from %s's (y %d dx %d dw %d db %d same)", c->name, o2->name, sy,
              sdx, sdw, sdb);
    }
    for (int i = 0; i < NCASES; i++)
        free(bits[i].y), free(bits[i].dx), free(bits[i].dw), free(bits[i].db);
#endif
    TEST_MAIN_END();
}
