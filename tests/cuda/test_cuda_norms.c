/* test_cuda_norms.c: the GPU LayerNorm (cuda/layernorm_cuda.h) and gated
 * RMSNorm (cuda/rmsnorm_gated_cuda.h) against the CPU float ops, at the
 * widths the model uses them (LN over D; RMSNorm over d_inner with z a
 * column slice of the in_proj output row) for the tiny and odd presets and
 * a 64-window batch:
 *  - forward y / out and the saved mean, rstd within 1e-5 relative (both
 *    sides sum in double; float rounding differs by an ulp or FMA);
 *  - backward dx (written or added to), dy, dz within 1e-4, dw/db (added to
 *    from the same random start, measured against the increment) within 1e-4;
 *  - padded strides, poisoned gaps: no leak in, no write out;
 *  - two GPU runs give the same bits;
 *  - the residual entry points (the forward writing x through to a copy,
 *    the backward adding a residual res into dx) give the bits of a copy
 *    and the plain calls, strided off the other buffers and in place;
 *  - LayerNorm at the register path's widths (1, 2, 4 columns a lane) and
 *    just past it (the loops);
 *  - the LayerNorm backward's ways (ln_paths_run): dx and the parameter
 *    sums in one kernel whose last blocks add the row splits (fused, the
 *    default), and the dx kernel then the parameter-sum kernel with its
 *    splits added by its last blocks (tickets) or by finish kernels: dx the
 *    same bits in all, dw and db the same bits between the two-kernel ways
 *    and within 1e-6 of them fused; fused run twice and replayed twice from
 *    a CUDA graph with the same bits (the tickets' counters back at zero);
 *    row counts of one split, one group of splits, a short last group and
 *    more rows than the split cap;
 *  - RMSNorm: every path (the register path at 1 to 4 chunks a lane, with
 *    16-byte or scalar loads per tensor, the loops past 512 columns), row
 *    counts off the block's rows and the backward's splits, dw added to,
 *    from zero or not passed; each case rerun with every buffer a float off
 *    alignment (scalar loads) must give the aligned run's bits.
 * Skips (77) without a GPU. */
#include <stdint.h>

#include "check/gradcheck.h"
#include "core/config.h"
#include "core/error.h"
#include "model/layernorm.h"
#include "model/rmsnorm_gated.h"
#include "cuda/cuda_test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/layernorm_cuda.h"
#include "cuda/linear_cuda.h"
#include "cuda/rmsnorm_gated_cuda.h"
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

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

static void parity(const char *op, const char *what, double err, double bound) {
    char name[96];
    snprintf(name, sizeof name, "%s %s", op, what);
    CHECK_PARITY(name, err, bound);
}

/* ---- LayerNorm ---- */

typedef struct {
    const char *name;
    int rows, n, dx_acc, pad;
} ln_case;

typedef struct {
    float *y, *mean, *rstd, *dx, *dw, *db;
} ln_out;

typedef struct {
    int xs, ys, gs, dxs;
    float *x, *w, *b, *dy, *dx0, *dw0, *db0;
} ln_data;

static void ln_gpu(const ln_case *c, const ln_data *h, ln_out *o) {
    size_t nx = (size_t)c->rows * h->xs, ny = (size_t)c->rows * h->ys, ndx = (size_t)c->rows * h->dxs;
    float *x = dev_upload(h->x, nx), *w = dev_upload(h->w, c->n), *b = dev_upload(h->b, c->n);
    float *dy = dev_upload(h->dy, (size_t)c->rows * h->gs), *y = dev_poisoned(ny);
    float *mean = dev_poisoned(c->rows), *rstd = dev_poisoned(c->rows);
    float *dx = c->dx_acc ? dev_upload(h->dx0, ndx) : dev_poisoned(ndx);
    float *dw = dev_upload(h->dw0, c->n), *db = dev_upload(h->db0, c->n);
    int rc = st_cuda_layernorm_forward(c->rows, c->n, x, h->xs, w, b, 1e-5f, y, h->ys, mean, rstd, NULL);
    CHECK(rc == ST_OK, "%s: LN forward: %s", c->name, st_last_error());
    rc = st_cuda_layernorm_backward(c->rows, c->n, x, h->xs, w, mean, rstd, dy, h->gs, dx, h->dxs, c->dx_acc, dw, db,
                                    NULL);
    CHECK(rc == ST_OK, "%s: LN backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: LN kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->y = dev_download_new(y, ny), o->mean = dev_download_new(mean, c->rows);
    o->rstd = dev_download_new(rstd, c->rows), o->dx = dev_download_new(dx, ndx);
    o->dw = dev_download_new(dw, c->n), o->db = dev_download_new(db, c->n);
    dev_free(x), dev_free(w), dev_free(b), dev_free(dy), dev_free(y), dev_free(mean), dev_free(rstd);
    dev_free(dx), dev_free(dw), dev_free(db);
}

static void ln_out_free(ln_out *o) { free(o->y), free(o->mean), free(o->rstd), free(o->dx), free(o->dw), free(o->db); }

static void ln_case_run(const ln_case *c, uint64_t seed) {
    int p = c->pad;
    ln_data h = {c->n + 3 * p, c->n + 5 * p, c->n + 2 * p, c->n + 7 * p, 0, 0, 0, 0, 0, 0, 0};
    h.x = host_rows(c->rows, c->n, h.xs, 1.0f, seed, 1);
    for (int r = 0; r < c->rows; r++) /* row offsets: the mean must be subtracted for real */
        for (int i = 0; i < c->n; i++)
            h.x[(size_t)r * h.xs + i] += (float)(r % 7) - 3.0f;
    h.w = host_rows(1, c->n, c->n, 1.0f, seed, 2), h.b = host_rows(1, c->n, c->n, 1.0f, seed, 3);
    h.dy = host_rows(c->rows, c->n, h.gs, 1.0f, seed, 4), h.dx0 = host_rows(c->rows, c->n, h.dxs, 1.0f, seed, 5);
    h.dw0 = host_rows(1, c->n, c->n, 1.0f, seed, 6), h.db0 = host_rows(1, c->n, c->n, 1.0f, seed, 7);
    size_t ny = (size_t)c->rows * h.ys, ndx = (size_t)c->rows * h.dxs;

    float *y = host_poisoned(ny), *mean = host_poisoned(c->rows), *rstd = host_poisoned(c->rows);
    float *dx = c->dx_acc ? host_copy(h.dx0, ndx) : host_poisoned(ndx);
    float *dw = host_copy(h.dw0, c->n), *db = host_copy(h.db0, c->n);
    st_layernorm_forward(c->rows, c->n, h.x, h.xs, h.w, h.b, 1e-5f, y, h.ys, mean, rstd);
    st_layernorm_backward(c->rows, c->n, h.x, h.xs, h.w, mean, rstd, h.dy, h.gs, dx, h.dxs, c->dx_acc, dw, db);

    ln_out g[2];
    ln_gpu(c, &h, &g[0]);
    ln_gpu(c, &h, &g[1]);
    printf("LayerNorm %s: rows %d n %d dx_acc %d strides x %d y %d dy %d dx %d\n", c->name, c->rows, c->n, c->dx_acc,
           h.xs, h.ys, h.gs, h.dxs);
    parity(c->name, "LN y", rel_err_rows(g[0].y, h.ys, y, h.ys, c->rows, c->n), 1e-5);
    parity(c->name, "LN mean", rel_err(g[0].mean, mean, c->rows), 1e-5);
    parity(c->name, "LN rstd", rel_err(g[0].rstd, rstd, c->rows), 1e-5);
    double edx = c->dx_acc ? rel_err_added_rows(g[0].dx, dx, h.dx0, c->rows, c->n, h.dxs)
                           : rel_err_rows(g[0].dx, h.dxs, dx, h.dxs, c->rows, c->n);
    parity(c->name, c->dx_acc ? "LN dx (+=)" : "LN dx", edx, 1e-4);
    parity(c->name, "LN dw (+=)", rel_err_added_rows(g[0].dw, dw, h.dw0, 1, c->n, c->n), 1e-4);
    parity(c->name, "LN db (+=)", rel_err_added_rows(g[0].db, db, h.db0, 1, c->n, c->n), 1e-4);
    long gy = gap_written(g[0].y, c->rows, c->n, h.ys), gdx = gap_written(g[0].dx, c->rows, c->n, h.dxs);
    CHECK(gy == 0 && gdx == 0, "LN %s: %ld gap values of y and %ld of dx were written", c->name, gy, gdx);
    int same = same_bits(g[0].y, g[1].y, ny) && same_bits(g[0].mean, g[1].mean, c->rows) &&
               same_bits(g[0].rstd, g[1].rstd, c->rows) && same_bits(g[0].dx, g[1].dx, ndx) &&
               same_bits(g[0].dw, g[1].dw, c->n) && same_bits(g[0].db, g[1].db, c->n);
    CHECK(same, "LN %s: two GPU runs differ (y %d dx %d dw %d db %d same)", c->name, same_bits(g[0].y, g[1].y, ny),
          same_bits(g[0].dx, g[1].dx, ndx), same_bits(g[0].dw, g[1].dw, c->n), same_bits(g[0].db, g[1].db, c->n));
    ln_out_free(&g[0]), ln_out_free(&g[1]);
    free(y), free(mean), free(rstd), free(dx), free(dw), free(db);
    free(h.x), free(h.w), free(h.b), free(h.dy), free(h.dx0), free(h.dw0), free(h.db0);
}

/* The residual entry point (st_cuda_layernorm_backward_res, as mamba2.cu
 * uses it) against the plain call after a copy, on the GPU, bit for bit:
 * dx, dw, db, and dx's gap (poisoned) never written. dx from a poisoned
 * buffer with res at its own (wider) stride, then again in place (res =
 * dx, as the accumulating form), each against copy + accumulate. */
static void ln_residual_run(const ln_case *c, uint64_t seed) {
    const int p = c->pad, R = c->rows, n = c->n, xs = n + 3 * p, ys = n + 5 * p, gs = n + 2 * p, dxs = n + 7 * p;
    const int rs = n + 6 * p + 2; /* res's stride, off the others' */
    float *hx = host_rows(R, n, xs, 1.0f, seed, 1), *hw = host_rows(1, n, n, 1.0f, seed, 2);
    float *hb = host_rows(1, n, n, 1.0f, seed, 3), *hdy = host_rows(R, n, gs, 1.0f, seed, 4);
    float *hres = host_rows(R, n, rs, 1.0f, seed, 5), *hdw0 = host_rows(1, n, n, 1.0f, seed, 6);
    float *hdx0 = host_rows(R, n, dxs, 1.0f, seed, 5); /* res's values at dx's stride */
    for (int r = 0; r < R; r++)
        for (int i = 0; i < n; i++)
            hx[(size_t)r * xs + i] += (float)(r % 5) - 2.0f;
    float *x = dev_upload(hx, (size_t)R * xs), *w = dev_upload(hw, n), *b = dev_upload(hb, n);
    float *dy = dev_upload(hdy, (size_t)R * gs), *res = dev_upload(hres, (size_t)R * rs);
    float *y = dev_poisoned((size_t)R * ys), *mean = dev_poisoned(R), *rstd = dev_poisoned(R), *dx[3], *dw[3], *db[3];
    /* dx[0]: plain, from dx0 accumulated; dx[1]: _res from poison; dx[2]: _res in place from dx0 */
    dx[0] = dev_upload(hdx0, (size_t)R * dxs), dx[1] = dev_poisoned((size_t)R * dxs);
    dx[2] = dev_upload(hdx0, (size_t)R * dxs);
    for (int k = 0; k < 3; k++)
        dw[k] = dev_upload(hdw0, n), db[k] = dev_upload(hdw0, n);
    int rc = st_cuda_layernorm_forward(R, n, x, xs, w, b, 1e-5f, y, ys, mean, rstd, NULL);
    rc |= st_cuda_layernorm_backward(R, n, x, xs, w, mean, rstd, dy, gs, dx[0], dxs, 1, dw[0], db[0], NULL);
    rc |= st_cuda_layernorm_backward_res(R, n, x, xs, w, mean, rstd, dy, gs, res, rs, dx[1], dxs, dw[1], db[1], NULL);
    rc |= st_cuda_layernorm_backward_res(R, n, x, xs, w, mean, rstd, dy, gs, dx[2], dxs, dx[2], dxs, dw[2], db[2],
                                         NULL);
    CHECK(rc == ST_OK, "LN residual %s: a call failed: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "LN residual %s: kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    float *gdx[3], *gdw[3], *gdb[3];
    for (int k = 0; k < 3; k++)
        gdx[k] = dev_download_new(dx[k], (size_t)R * dxs), gdw[k] = dev_download_new(dw[k], n),
        gdb[k] = dev_download_new(db[k], n);
    printf("LayerNorm residual %s: rows %d n %d strides x %d res %d dx %d\n", c->name, R, n, xs, rs, dxs);
    for (int k = 1; k < 3; k++) {
        CHECK(same_bits(gdx[0], gdx[k], (size_t)R * dxs) && gap_written(gdx[k], R, n, dxs) == 0,
              "LN residual %s: dx = res + LN'(dy)%s differs from copy + accumulate (or its gap written)", c->name,
              k == 2 ? " in place" : "");
        CHECK(same_bits(gdw[0], gdw[k], n) && same_bits(gdb[0], gdb[k], n),
              "LN residual %s: dw, db differ between the entry points", c->name);
    }
    for (int k = 0; k < 3; k++)
        dev_free(dx[k]), dev_free(dw[k]), dev_free(db[k]), free(gdx[k]), free(gdw[k]), free(gdb[k]);
    dev_free(y), dev_free(mean), dev_free(rstd), dev_free(x), dev_free(w), dev_free(b), dev_free(dy), dev_free(res);
    free(hx), free(hw), free(hb), free(hdy), free(hres), free(hdw0), free(hdx0);
}

/* The LayerNorm backward's three ways on the same inputs (dx poisoned or
 * accumulated, dw and db from random values): 0 the dx kernel then the
 * parameter sums' kernel and its finish kernels; 1 the same with the
 * finish in the sums' last blocks; 2, 3 fused, twice; 4, 5 fused, graph
 * replays. Fused against the CPU op within 1e-4 (dx) and against float64
 * sums within 1e-6 (dw, db). */
enum { LN_WAYS = 6 };
static void ln_paths_run(const ln_case *c, uint64_t seed) {
    const int p = c->pad, R = c->rows, n = c->n, xs = n + 3 * p, gs = n + 2 * p, dxs = n + 7 * p;
    const size_t ndx = (size_t)R * dxs;
    float *hx = host_rows(R, n, xs, 1.0f, seed, 1), *hw = host_rows(1, n, n, 1.0f, seed, 2);
    float *hdy = host_rows(R, n, gs, 1.0f, seed, 4), *hdx0 = host_rows(R, n, dxs, 1.0f, seed, 5);
    float *hdw0 = host_rows(1, n, n, 1.0f, seed, 6), *hdb0 = host_rows(1, n, n, 1.0f, seed, 7);
    float *hb = host_rows(1, n, n, 1.0f, seed, 3), *hy = host_poisoned((size_t)R * n);
    float *hmean = host_poisoned(R), *hrstd = host_poisoned(R);
    for (int r = 0; r < R; r++) /* row offsets: the mean must be subtracted for real */
        for (int i = 0; i < n; i++)
            hx[(size_t)r * xs + i] += (float)(r % 7) - 3.0f;
    st_layernorm_forward(R, n, hx, xs, hw, hb, 1e-5f, hy, n, hmean, hrstd); /* the saved statistics */
    float *cdx = c->dx_acc ? host_copy(hdx0, ndx) : host_poisoned(ndx), *cdw = host_copy(hdw0, n);
    float *cdb = host_copy(hdb0, n);
    st_layernorm_backward(R, n, hx, xs, hw, hmean, hrstd, hdy, gs, cdx, dxs, c->dx_acc, cdw, cdb);
    /* dw, db in float64 over the rows (the CPU op adds in float: ~1e-4 off over 10^5 rows), added
     * as the GPU adds its double sums: dw0 + (float)sum */
    for (int i = 0; i < n; i++) {
        double tw = 0, tb = 0;
        for (int r = 0; r < R; r++) {
            const float g = hdy[(size_t)r * gs + i];
            tw += (double)(float)(((double)hx[(size_t)r * xs + i] - hmean[r]) * hrstd[r]) * g, tb += g;
        }
        cdw[i] = hdw0[i] + (float)tw, cdb[i] = hdb0[i] + (float)tb;
    }
    float *x = dev_upload(hx, (size_t)R * xs), *w = dev_upload(hw, n), *mean = dev_upload(hmean, R);
    float *rstd = dev_upload(hrstd, R), *dy = dev_upload(hdy, (size_t)R * gs);
    float *dx = dev_poisoned(ndx), *dw = dev_upload(hdw0, n), *db = dev_upload(hdb0, n);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "uploads"); /* before the non-blocking stream */
    cudaStream_t s = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "LN ways: stream");
    float *gdx[LN_WAYS], *gdw[LN_WAYS], *gdb[LN_WAYS];
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    for (int k = 0; k < LN_WAYS; k++) {
        st_cuda_rowsplit_set_tickets(k != 0);
        st_cuda_layernorm_set_fused_grad(k >= 2);
        if (c->dx_acc)
            cudaMemcpyAsync(dx, hdx0, sizeof(float) * ndx, cudaMemcpyHostToDevice, s);
        else
            cudaMemsetAsync(dx, 0xFF, sizeof(float) * ndx, s);
        cudaMemcpyAsync(dw, hdw0, sizeof(float) * n, cudaMemcpyHostToDevice, s);
        cudaMemcpyAsync(db, hdb0, sizeof(float) * n, cudaMemcpyHostToDevice, s);
        int rc = ST_OK;
        if (k < 4) {
            rc = st_cuda_layernorm_backward(R, n, x, xs, w, mean, rstd, dy, gs, dx, dxs, c->dx_acc, dw, db, s);
        } else {
            if (!exec) {
                CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "LN ways: capture");
                rc = st_cuda_layernorm_backward(R, n, x, xs, w, mean, rstd, dy, gs, dx, dxs, c->dx_acc, dw, db, s);
                cudaError_t e = cudaStreamEndCapture(s, &graph);
                CHECK(e == cudaSuccess && graph, "LN ways %s: end capture: %s", c->name, cudaGetErrorString(e));
                if (graph) CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && exec, "LN ways: instantiate");
            }
            if (exec) CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "LN ways %s: replay", c->name);
        }
        CHECK(rc == ST_OK, "LN ways %s: way %d: %s", c->name, k, st_last_error());
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "LN ways %s: way %d: kernels failed: %s", c->name, k,
              cudaGetErrorString(cudaGetLastError()));
        gdx[k] = dev_download_new(dx, ndx), gdw[k] = dev_download_new(dw, n), gdb[k] = dev_download_new(db, n);
    }
    st_cuda_rowsplit_set_tickets(1);
    st_cuda_layernorm_set_fused_grad(1);
    printf("LayerNorm ways %s: rows %d n %d dx_acc %d\n", c->name, R, n, c->dx_acc);
    parity(c->name, "LN fused dw (+=) vs float64", rel_err_added_rows(gdw[2], cdw, hdw0, 1, n, n), 1e-6);
    parity(c->name, "LN fused db (+=) vs float64", rel_err_added_rows(gdb[2], cdb, hdb0, 1, n, n), 1e-6);
    double edx = c->dx_acc ? rel_err_added_rows(gdx[2], cdx, hdx0, R, n, dxs) : rel_err_rows(gdx[2], dxs, cdx, dxs, R, n);
    parity(c->name, "LN fused dx", edx, 1e-4);
    parity(c->name, "LN dw fused vs two kernels", rel_err_added_rows(gdw[2], gdw[0], hdw0, 1, n, n), 1e-6);
    parity(c->name, "LN db fused vs two kernels", rel_err_added_rows(gdb[2], gdb[0], hdb0, 1, n, n), 1e-6);
    CHECK(same_bits(gdw[0], gdw[1], n) && same_bits(gdb[0], gdb[1], n),
          "LN ways %s: the parameter sums' tickets give other bits than their finish kernels", c->name);
    for (int k = 1; k < LN_WAYS; k++)
        CHECK(same_bits(gdx[0], gdx[k], ndx) && gap_written(gdx[k], R, n, dxs) == 0,
              "LN ways %s: dx of way %d differs from the dx kernel's (or its gap written)", c->name, k);
    for (int k = 3; k < LN_WAYS; k++)
        CHECK(same_bits(gdw[2], gdw[k], n) && same_bits(gdb[2], gdb[k], n),
              "LN ways %s: fused run %d (%s) differs from the first", c->name, k, k == 3 ? "again" : "graph replay");
    for (int k = 0; k < LN_WAYS; k++)
        free(gdx[k]), free(gdw[k]), free(gdb[k]);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    dev_free(x), dev_free(w), dev_free(mean), dev_free(rstd), dev_free(dy), dev_free(dx), dev_free(dw), dev_free(db);
    free(hx), free(hw), free(hb), free(hy), free(hdy), free(hdx0), free(hdw0), free(hdb0), free(hmean), free(hrstd);
    free(cdx), free(cdw), free(cdb);
}

/* ---- gated RMSNorm ---- */

/* dw before the backward: random (added to), zeros, or no dw at all. */
enum { RMS_DW_ADD, RMS_DW_ZERO, RMS_DW_NONE };

/* z and the output gradient dz live in rows of zw values (the in_proj
 * output), z at column 0 of them, as in the Mamba2 mixer. */
typedef struct {
    const char *name;
    int rows, n, zw, pad, dw_mode;
} rms_case;

typedef struct {
    float *out, *rstd, *dy, *dz, *dw;
} rms_out;

typedef struct {
    int ys, zs, os, gs, dys, dzs;
    float *y, *z, *w, *dout, *dw0;
} rms_data;

/* n floats on the device `off` floats into a poisoned allocation (off 1:
 * no row start is 16-byte aligned), a copy of host when not NULL; *base
 * is what to free. */
static float *dev_at(const float *host, size_t n, int off, float **base) {
    float *b = dev_poisoned(n + off);
    if (b && host) cudaMemcpy(b + off, host, sizeof(float) * n, cudaMemcpyHostToDevice);
    *base = b;
    return b ? b + off : NULL;
}

/* One GPU forward and backward with every buffer `off` floats past its
 * allocation's start. */
static void rms_gpu(const rms_case *c, const rms_data *h, int off, rms_out *o) {
    size_t no = (size_t)c->rows * h->os, ndy = (size_t)c->rows * h->dys, ndz = (size_t)c->rows * h->dzs;
    float *base[9];
    float *y = dev_at(h->y, (size_t)c->rows * h->ys, off, &base[0]);
    float *z = dev_at(h->z, (size_t)c->rows * h->zs, off, &base[1]);
    float *w = dev_at(h->w, c->n, off, &base[2]), *dout = dev_at(h->dout, (size_t)c->rows * h->gs, off, &base[3]);
    float *out = dev_at(NULL, no, off, &base[4]), *rstd = dev_at(NULL, c->rows, off, &base[5]);
    float *dy = dev_at(NULL, ndy, off, &base[6]), *dz = dev_at(NULL, ndz, off, &base[7]);
    float *dw = dev_at(h->dw0, c->n, off, &base[8]);
    int rc = st_cuda_rmsnorm_gated_forward(c->rows, c->n, y, h->ys, z, h->zs, w, 1e-5f, out, h->os, rstd, NULL);
    CHECK(rc == ST_OK, "%s: RMSNorm forward: %s", c->name, st_last_error());
    rc = st_cuda_rmsnorm_gated_backward(c->rows, c->n, y, h->ys, z, h->zs, w, rstd, dout, h->gs, dy, h->dys, dz, h->dzs,
                                        c->dw_mode == RMS_DW_NONE ? NULL : dw, NULL);
    CHECK(rc == ST_OK, "%s: RMSNorm backward: %s", c->name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: RMSNorm kernels failed: %s", c->name,
          cudaGetErrorString(cudaGetLastError()));
    o->out = dev_download_new(out, no), o->rstd = dev_download_new(rstd, c->rows);
    o->dy = dev_download_new(dy, ndy), o->dz = dev_download_new(dz, ndz), o->dw = dev_download_new(dw, c->n);
    for (int i = 0; i < 9; i++)
        dev_free(base[i]);
}

static void rms_out_free(rms_out *o) { free(o->out), free(o->rstd), free(o->dy), free(o->dz), free(o->dw); }

static int rms_same(const rms_out *a, const rms_out *b, size_t no, int rows, size_t ndy, size_t ndz, int n) {
    return same_bits(a->out, b->out, no) && same_bits(a->rstd, b->rstd, rows) && same_bits(a->dy, b->dy, ndy) &&
           same_bits(a->dz, b->dz, ndz) && same_bits(a->dw, b->dw, n);
}

static void rms_case_run(const rms_case *c, uint64_t seed) {
    int p = c->pad;
    rms_data h = {c->n + 3 * p, c->zw + 4 * p, c->n + 5 * p, c->n + 2 * p, c->n + 6 * p, c->zw + 1 * p, 0, 0, 0, 0, 0};
    /* z spans the whole in_proj row (width zw): the op must read only its first n columns. */
    h.y = host_rows(c->rows, c->n, h.ys, 1.0f, seed, 1), h.z = host_rows(c->rows, c->zw, h.zs, 2.0f, seed, 2);
    h.w = host_rows(1, c->n, c->n, 1.0f, seed, 3), h.dout = host_rows(c->rows, c->n, h.gs, 1.0f, seed, 4);
    h.dw0 = host_rows(1, c->n, c->n, 1.0f, seed, 5);
    if (c->dw_mode == RMS_DW_ZERO) memset(h.dw0, 0, sizeof(float) * c->n);
    size_t no = (size_t)c->rows * h.os, ndy = (size_t)c->rows * h.dys, ndz = (size_t)c->rows * h.dzs;

    float *out = host_poisoned(no), *rstd = host_poisoned(c->rows), *dy = host_poisoned(ndy), *dz = host_poisoned(ndz);
    float *dw = host_copy(h.dw0, c->n);
    st_rmsnorm_gated_forward(c->rows, c->n, h.y, h.ys, h.z, h.zs, h.w, 1e-5f, out, h.os, rstd);
    st_rmsnorm_gated_backward(c->rows, c->n, h.y, h.ys, h.z, h.zs, h.w, rstd, h.dout, h.gs, dy, h.dys, dz, h.dzs,
                              c->dw_mode == RMS_DW_NONE ? NULL : dw);

    /* Two runs at aligned allocations, one a float off them: every 16-byte
     * load of the first becomes scalar loads in the third, same bits. */
    rms_out g[3];
    rms_gpu(c, &h, 0, &g[0]);
    rms_gpu(c, &h, 0, &g[1]);
    rms_gpu(c, &h, 1, &g[2]);
    printf("RMSNorm %s: rows %d n %d (z in rows of %d) strides y %d z %d out %d dout %d dy %d dz %d, dw %s\n", c->name,
           c->rows, c->n, c->zw, h.ys, h.zs, h.os, h.gs, h.dys, h.dzs,
           c->dw_mode == RMS_DW_ADD    ? "added to"
           : c->dw_mode == RMS_DW_ZERO ? "from zero"
                                       : "none");
    parity(c->name, "RMS out", rel_err_rows(g[0].out, h.os, out, h.os, c->rows, c->n), 1e-5);
    parity(c->name, "RMS rstd", rel_err(g[0].rstd, rstd, c->rows), 1e-5);
    parity(c->name, "RMS dy", rel_err_rows(g[0].dy, h.dys, dy, h.dys, c->rows, c->n), 1e-4);
    parity(c->name, "RMS dz", rel_err_rows(g[0].dz, h.dzs, dz, h.dzs, c->rows, c->n), 1e-4);
    if (c->dw_mode == RMS_DW_NONE)
        CHECK(same_bits(g[0].dw, h.dw0, c->n), "RMS %s: dw changed though none was passed", c->name);
    else
        parity(c->name, "RMS dw (+=)", rel_err_added_rows(g[0].dw, dw, h.dw0, 1, c->n, c->n), 1e-4);
    /* dz's row is as wide as z's, but only its first n columns are the op's. */
    long go = gap_written(g[0].out, c->rows, c->n, h.os), gdy = gap_written(g[0].dy, c->rows, c->n, h.dys);
    long gdz = gap_written(g[0].dz, c->rows, c->n, h.dzs);
    CHECK(go == 0 && gdy == 0 && gdz == 0, "RMS %s: gap values written: out %ld dy %ld dz %ld", c->name, go, gdy, gdz);
    CHECK(rms_same(&g[0], &g[1], no, c->rows, ndy, ndz, c->n),
          "RMS %s: two GPU runs differ (out %d dy %d dz %d dw %d same)", c->name, same_bits(g[0].out, g[1].out, no),
          same_bits(g[0].dy, g[1].dy, ndy), same_bits(g[0].dz, g[1].dz, ndz), same_bits(g[0].dw, g[1].dw, c->n));
    CHECK(rms_same(&g[0], &g[2], no, c->rows, ndy, ndz, c->n),
          "RMS %s: misaligned buffers (scalar loads) give other bits than aligned ones (out %d dy %d dz %d dw %d same)",
          c->name, same_bits(g[0].out, g[2].out, no), same_bits(g[0].dy, g[2].dy, ndy),
          same_bits(g[0].dz, g[2].dz, ndz), same_bits(g[0].dw, g[2].dw, c->n));
    rms_out_free(&g[0]), rms_out_free(&g[1]), rms_out_free(&g[2]);
    free(out), free(rstd), free(dy), free(dz), free(dw);
    free(h.y), free(h.z), free(h.w), free(h.dout), free(h.dw0);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_dims t, o, d;
    st_dims_preset("tiny", &t);
    st_dims_preset("odd", &o);
    st_dims_preset("default", &d);
    const ln_case ln[] = {
        {"tiny ln (D)", 2 * t.K, t.D, 0, 0},    {"tiny ln (D, dx +=)", 2 * t.K, t.D, 1, 1},
        {"odd ln (D)", 3 * o.K, o.D, 0, 1},     {"n=5 (fewer columns than a warp)", 7, 5, 1, 1},
        {"default ln (D)", 5 * d.K, d.D, 0, 1}, {"64 windows ln (D)", 64 * t.K, t.D, 0, 1},
        /* the register path's widths (K = 1, 2, 4 columns a lane up to 128) and the loop past it */
        {"n=32 (K 1), 1 row", 1, 32, 1, 1},
        {"n=33 (K 2), 9 rows", 9, 33, 0, 1},
        {"n=65 (K 4 partly used)", 13, 65, 1, 0},
        {"n=128 (K 4), 1 row", 1, 128, 0, 0},
        {"n=129 (the loop)", 11, 129, 1, 1},
    };
    for (size_t i = 0; i < sizeof ln / sizeof ln[0]; i++)
        ln_case_run(&ln[i], 2000 + i);
    for (size_t i = 0; i < sizeof ln / sizeof ln[0]; i++)
        ln_residual_run(&ln[i], 2500 + i);
    /* the backward's ways over row splits (fused: 128 rows a split, groups of 32 splits, at most
     * 2,048 splits; the two-kernel way: 1,024 rows a split, at most 64) */
    const ln_case ways[] = {
        {"2,048 windows (D): 1,024 splits, 32 groups", 131072, d.D, 0, 0},
        {"70,001 rows n=40 (K 2): 547 splits, a short last group", 70001, 40, 1, 1},
        {"300,001 rows n=64: past the split cap", 300001, 64, 0, 0},
        {"4,099 rows n=33: 33 splits, 2 groups", 4099, 33, 1, 1},
        {"200 rows n=17 (K 1): 2 splits, 1 group", 200, 17, 0, 1},
        {"100 rows n=128: 1 split", 100, 128, 1, 0},
        {"5,000 rows n=129 (the loop: not fused)", 5000, 129, 0, 1},
        {"1 row n=128", 1, 128, 0, 0},
    };
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++)
        ln_paths_run(&ways[i], 2700 + i);
    /* The register path takes n <= 512 in J = ceil(n / 128) chunks of 4
     * columns a lane, 16-byte loads for each tensor whose rows allow; the
     * backward cuts rows into ceil(rows / 128) splits; n > 512 runs the loops. */
    st_dims l;
    st_dims_preset("large", &l);
    const int tdi = st_d_inner(&t), odi = st_d_inner(&o), ddi = st_d_inner(&d);
    const int tio = st_in_proj_out(&t), oio = st_in_proj_out(&o), dio = st_in_proj_out(&d);
    const rms_case rms[] = {
        {"tiny (d_inner, J 1, float4)", 2 * t.K, tdi, tio, 0, RMS_DW_ADD},
        {"tiny (d_inner) padded (J 1, scalar)", 2 * t.K, tdi, tio, 1, RMS_DW_ADD},
        {"odd (d_inner, J 2 half used) padded", 3 * o.K, odi, oio, 1, RMS_DW_ADD},
        {"odd (d_inner, float4), dw from zero", 3 * o.K, odi, oio, 0, RMS_DW_ZERO},
        {"default (d_inner) padded", 3 * d.K, ddi, dio, 1, RMS_DW_ADD},
        {"default (d_inner, float4), 323 rows: 3 splits", 5 * d.K + 3, ddi, dio, 0, RMS_DW_ADD},
        {"default (d_inner, float4), no dw", 5 * d.K + 3, ddi, dio, 0, RMS_DW_NONE},
        {"default (d_inner, float4), 2,061 rows: 17 splits, dw from zero", 32 * d.K + 13, ddi, dio, 0, RMS_DW_ZERO},
        {"64 windows (d_inner): 16 splits", 64 * t.K, tdi, tio, 1, RMS_DW_ADD},
        {"default (d_inner, float4), 1 row", 1, ddi, dio, 0, RMS_DW_ADD},
        {"default (d_inner, float4), 3 rows (warps with no row)", 3, ddi, dio, 0, RMS_DW_ZERO},
        {"n=5 (fewer columns than a warp)", 7, 5, 9, 1, RMS_DW_ADD},
        {"n=300 (J 3; z scalar, the rest float4)", 130, 300, 317, 0, RMS_DW_ADD},
        {"large (d_inner, J 4, float4)", 2 * l.K + 1, st_d_inner(&l), st_in_proj_out(&l), 0, RMS_DW_ADD},
        {"n=509 (J 4, scalar: n not a multiple of 4)", 67, 509, 515, 0, RMS_DW_ZERO},
        {"n=600 (the loops) padded", 140, 600, 1210, 1, RMS_DW_ADD},
        {"n=1032 (the loops), no dw", 70, 1032, 1036, 0, RMS_DW_NONE},
    };
    for (size_t i = 0; i < sizeof rms / sizeof rms[0]; i++)
        rms_case_run(&rms[i], 3000 + i);
#endif
    TEST_MAIN_END();
}
