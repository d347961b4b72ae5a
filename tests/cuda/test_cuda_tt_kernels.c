/* test_cuda_tt_kernels.c: the training bar table's three small kernels,
 * each against a plain CPU double reference of the sums it promises, bit
 * for bit (bench/notes-tt-kernels.md). Skips (exit 77) without a device.
 *
 *  1. st_cuda_vsn_train_table_grad (tt_grad_kernel): a bar index over
 *     random keys (bars of 1 row, and bars of many rows; the distinct count
 *     below the index's capacity; fewer rows than the index holds), random
 *     table, alpha, dv and dalpha with strides wider than their widths
 *     (the gaps NaN); dad and dT poisoned. dad[j][r] must equal the
 *     32-lane butterfly's sum of the exact products dv[r, c] t_j[c]
 *     (levels 16, 8, 4, 2, 1, lanes >= Dv zeros) plus dalpha (or + 0.0),
 *     dT[b, j, c] the double sum over b's rows in ascending row order of
 *     alpha[r, j] dv[r, c], rounded once; dT rows past the count keep the
 *     poison. F = 40 / Dv = 32 (the default), F = 37 / Dv = 16 (a partial
 *     variable chunk), F = 13 / Dv = 5 (lanes past Dv), F = 3 / Dv = 8;
 *     and bars of 1 to 200 rows (tt_keys_runs: the kernel's groups of 4
 *     rows and srow windows of 32 at their edges, rows scattered), 37 or
 *     13 bars (not a multiple of the warps a block or the chunks a bar).
 *     The same index then drives st_cuda_vsn_train_table_combine
 *     (tt_combine_stage_kernel for F <= 64, then with the switch off
 *     tt_combine_kernel): v[r, c] = (float) sum_j alpha[r, j] t_j[b][c]
 *     in variable order in double for every row, and again for all but
 *     the last 7 rows (those, and v's row gaps, keep the poison) with
 *     the table and alpha 4 bytes past 16-byte alignment.
 *  2. st_cuda_vsn_backward_fused_dlog (bwd_dlog_tile_kernel, and
 *     bwd_dlog_kernel for F > 95): dlog_j = alpha_j ((float) dad_j - dot),
 *     dot = sum_j alpha_j dad_j in variable order as fused multiply-adds
 *     (the kernels' contraction, checked in their PTX), rows not a
 *     multiple of the 32-row tile, alpha strided.
 *  3. st_cuda_vsn_table_combine (table_combine4_kernel at Dv 8, 16, 32;
 *     table_combine_kernel at Dv = 5 and for a table not 16-byte aligned):
 *     v[r, c] = (float) sum_j alpha[r, j] t[tab_row[r], j, c] in variable
 *     order in double; v strided, its gap checked still poisoned. */
#include <stdint.h>

#include "cuda_test.h"

#ifdef ST_HAVE_CUDA
#include "core/error.h"
#include "cuda/vsn_backward_fused_cuda.h"
#include "cuda/vsn_forward_fused_cuda.h"
#include "cuda/vsn_train_table_cuda.h"

static uint64_t lcg_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* rows x width floats at row stride `stride` (gap NaN), N(0, scale). */
static float *host_strided(int rows, int width, int stride, float scale, uint64_t seed, uint32_t salt) {
    float *dense = host_randn_scaled((size_t)rows * width, scale, seed, salt);
    float *p = malloc(sizeof(float) * ((size_t)rows * stride + 1));
    for (size_t i = 0; i < (size_t)rows * stride; i++) p[i] = NAN;
    for (int r = 0; r < rows; r++) memcpy(p + (size_t)r * stride, dense + (size_t)r * width, sizeof(float) * width);
    free(dense);
    return p;
}

static int same_bits_d(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static int same_bits_f(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---- 1. tt_grad ---------------------------------------------------------- */

/* The keys: every third row the last bar (a bar of many rows), every
 * seventh row else a bar of its own (spread + r / 7: bars of 1 row), the
 * rest over bars [0, spread). The callers keep spread + rows / 7 < bars - 1. */
static void tt_keys(int rows, int bars, int spread, uint64_t seed, int *key) {
    uint64_t s = seed;
    for (int r = 0; r < rows; r++) {
        if (r % 3 == 0)
            key[r] = bars - 1;
        else if (r % 7 == 1)
            key[r] = spread + r / 7;
        else
            key[r] = (int)(lcg_next(&s) % (uint64_t)spread);
    }
}

/* Run k's rows for tt_keys_runs: the group and srow-window edges first
 * (1 to 5 rows, 31 to 33, 63 to 65, 200), then 1 + (53 k + 7) % 200. */
static int tt_run_rows(int k) {
    static const int edge[] = {1, 2, 3, 4, 5, 31, 32, 33, 63, 64, 65, 200};
    return k < (int)(sizeof edge / sizeof edge[0]) ? edge[k] : 1 + (53 * k + 7) % 200;
}

/* The rows of runs bars of tt_run_rows rows each. */
static int tt_runs_total(int runs) {
    int n = 0;
    for (int k = 0; k < runs; k++) n += tt_run_rows(k);
    return n;
}

/* Bars of many rows (the --segment minibatches): run k's tt_run_rows(k)
 * rows take key 3 k + 1 (keys with gaps), the rows shuffled so that a
 * bar's rows are scattered over the minibatch. rows = tt_runs_total(runs);
 * the callers keep 3 runs < bars. */
static void tt_keys_runs(int rows, int runs, uint64_t seed, int *key) {
    int r = 0;
    for (int k = 0; k < runs; k++)
        for (int i = 0; i < tt_run_rows(k); i++) key[r++] = 3 * k + 1;
    uint64_t s = seed;
    for (int i = rows - 1; i > 0; i--) {
        const int j = (int)(lcg_next(&s) % (uint64_t)(i + 1)), t = key[i];
        key[i] = key[j], key[j] = t;
    }
}

/* runs > 0: the keys of tt_keys_runs (rows must be tt_runs_total(runs),
 * spread unused); else tt_keys'. */
static void tt_case(int rows_max, int rows, int bars, int spread, int runs, int F, int Dv, int with_dalpha,
                    uint64_t seed) {
    char name[96];
    snprintf(name, sizeof name, "tt_grad rows %d/%d bars %d%s F=%d Dv=%d%s", rows, rows_max, bars,
             runs ? " (runs)" : "", F, Dv, with_dalpha ? " +dalpha" : "");
    const int as = F + 3, ds = Dv + 5, das = F + 2, P = F * Dv;
    int *key = malloc(sizeof(int) * rows);
    if (runs)
        tt_keys_runs(rows, runs, seed, key);
    else
        tt_keys(rows, bars, spread, seed, key);
    /* the CPU's compact bars: distinct keys in ascending order, rows ascending within each */
    int *bar_of_key = malloc(sizeof(int) * bars), nb = 0;
    for (int k = 0; k < bars; k++) bar_of_key[k] = -1;
    for (int r = 0; r < rows; r++) bar_of_key[key[r]] = 0;
    for (int k = 0; k < bars; k++)
        if (bar_of_key[k] == 0) bar_of_key[k] = nb++;
    st_vsn_bar_index ix;
    int rc = st_cuda_vsn_bar_index_at(&ix, NULL, rows_max, bars);
    CHECK(rc == ST_OK, "%s: index size pass: %s", name, st_last_error());
    void *base = dev_bytes(NULL, ix.total_bytes);
    st_cuda_vsn_bar_index_at(&ix, base, rows_max, bars);
    CHECK(nb < ix.cap, "%s: the case must leave the count (%d) below the capacity (%d)", name, nb, ix.cap);
    float *tab = host_randn_scaled((size_t)ix.cap * P, 1.0f, seed, 1);
    float *alpha = host_strided(rows, F, as, 0.3f, seed, 2), *dv = host_strided(rows, Dv, ds, 1.0f, seed, 3);
    float *dalpha = with_dalpha ? host_strided(rows, F, das, 0.5f, seed, 4) : NULL;
    int *dkey = dev_bytes(key, sizeof(int) * rows);
    float *dtab = dev_upload(tab, (size_t)ix.cap * P), *dal = dev_upload(alpha, (size_t)rows * as);
    float *ddv = dev_upload(dv, (size_t)rows * ds), *ddal = with_dalpha ? dev_upload(dalpha, (size_t)rows * das) : NULL;
    double *ddad = dev_bytes(NULL, sizeof(double) * F * rows);
    float *ddT = dev_poisoned((size_t)ix.cap * P);
    cudaMemset(ddad, 0xFF, sizeof(double) * F * rows); /* NaN doubles */
    rc = st_cuda_vsn_bar_index_build(&ix, rows, dkey, NULL);
    CHECK(rc == ST_OK, "%s: index build: %s", name, st_last_error());
    rc = st_cuda_vsn_train_table_grad(&ix, rows, F, Dv, dtab, dal, as, ddv, ds, ddal, das, ddad, ddT, NULL);
    CHECK(rc == ST_OK, "%s: grad: %s", name, st_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: %s", name, cudaGetErrorString(cudaGetLastError()));
    int count = -1;
    cudaMemcpy(&count, ix.count, sizeof count, cudaMemcpyDeviceToHost);
    CHECK(count == nb, "%s: %d distinct bars on the device, %d on the CPU", name, count, nb);
    double *dad = malloc(sizeof(double) * F * rows);
    float *dT = dev_download_new(ddT, (size_t)ix.cap * P);
    cudaMemcpy(dad, ddad, sizeof(double) * F * rows, cudaMemcpyDeviceToHost);
    /* dad: the butterfly's tree over 32 lanes */
    long bad_dad = 0, bad_dT = 0, bad_tail = 0;
    for (int r = 0; r < rows; r++) {
        const float *t = tab + (size_t)bar_of_key[key[r]] * P;
        for (int j = 0; j < F; j++) {
            double v[32];
            for (int c = 0; c < 32; c++)
                v[c] = c < Dv ? (double)dv[(size_t)r * ds + c] * (double)t[j * Dv + c] : 0.0;
            for (int o = 16; o > 0; o >>= 1)
                for (int c = 0; c < o; c++) v[c] = v[c] + v[c + o];
            const double want = v[0] + (dalpha ? (double)dalpha[(size_t)r * das + j] : 0.0);
            if (!same_bits_d(dad[(size_t)j * rows + r], want)) {
                if (bad_dad++ < 3)
                    fprintf(stderr, "  %s: dad[%d][%d] %.17g, want %.17g\n", name, j, r, dad[(size_t)j * rows + r],
                            want);
            }
        }
    }
    /* dT: ascending rows of each compact bar */
    double *acc = calloc((size_t)nb * P, sizeof(double));
    for (int r = 0; r < rows; r++) {
        const int b = bar_of_key[key[r]];
        for (int j = 0; j < F; j++)
            for (int c = 0; c < Dv; c++)
                acc[(size_t)b * P + j * Dv + c] += (double)alpha[(size_t)r * as + j] * (double)dv[(size_t)r * ds + c];
    }
    for (size_t i = 0; i < (size_t)nb * P; i++)
        if (!same_bits_f(dT[i], (float)acc[i])) {
            if (bad_dT++ < 3) fprintf(stderr, "  %s: dT[%zu] %.9g, want %.9g\n", name, i, dT[i], (float)acc[i]);
        }
    for (size_t i = (size_t)nb * P; i < (size_t)ix.cap * P; i++) bad_tail += !is_poison(dT[i]);
    CHECK(bad_dad == 0, "%s: %ld of %d dalpha values differ from the butterfly's bits", name, bad_dad, F * rows);
    CHECK(bad_dT == 0, "%s: %ld of %d dT values differ from the ascending double sum", name, bad_dT, nb * P);
    CHECK(bad_tail == 0, "%s: %ld dT values past the %d bars written", name, bad_tail, nb);
    printf("  %-60s %d bars, bit-exact: %s\n", name, nb, bad_dad + bad_dT + bad_tail == 0 ? "yes" : "NO");
    /* the training forward's combine through the same index, staged (F <= 64) and a row at a time: all rows,
     * then all but the last 7 with the table and alpha 4 bytes off their 16-byte alignment */
    const int vs = Dv + 3;
    float *dtab1 = dev_upload(NULL, (size_t)ix.cap * P + 1), *dal1 = dev_upload(NULL, (size_t)rows * as + 1);
    cudaMemcpy(dtab1 + 1, tab, sizeof(float) * ix.cap * P, cudaMemcpyHostToDevice);
    cudaMemcpy(dal1 + 1, alpha, sizeof(float) * rows * as, cudaMemcpyHostToDevice);
    for (int pass = 0; pass < 4; pass++) {
        const int n = pass & 1 ? rows - 7 : rows, stage = pass < 2;
        float *dvv = dev_poisoned((size_t)rows * vs);
        st_cuda_vsn_set_tt_combine_stage(stage);
        rc = st_cuda_vsn_train_table_combine(&ix, n, F, Dv, pass & 1 ? dtab1 + 1 : dtab, pass & 1 ? dal1 + 1 : dal, as,
                                             dvv, vs, NULL);
        st_cuda_vsn_set_tt_combine_stage(1);
        CHECK(rc == ST_OK, "%s: combine (stage %d): %s", name, stage, st_last_error());
        float *v = dev_download_new(dvv, (size_t)rows * vs);
        long bad_v = 0, bad_gap = 0;
        for (int r = 0; r < rows; r++) {
            const float *t = tab + (size_t)bar_of_key[key[r]] * P;
            for (int c = 0; c < vs; c++) {
                const float got = v[(size_t)r * vs + c];
                if (c >= Dv || r >= n) {
                    bad_gap += !is_poison(got);
                    continue;
                }
                double a = 0;
                for (int j = 0; j < F; j++) a += (double)alpha[(size_t)r * as + j] * (double)t[j * Dv + c];
                if (!same_bits_f(got, (float)a) && bad_v++ < 3)
                    fprintf(stderr, "  %s: combine (stage %d) v[%d][%d] %.9g, want %.9g\n", name, stage, r, c, got,
                            (float)a);
            }
        }
        CHECK(bad_v == 0, "%s: combine (stage %d) over %d rows: %ld of %d v values differ from the double sum's bits",
              name, stage, n, bad_v, n * Dv);
        CHECK(bad_gap == 0, "%s: combine (stage %d) over %d rows: %ld values written outside them or in the row gaps",
              name, stage, n, bad_gap);
        free(v);
        dev_free(dvv);
    }
    dev_free(dtab1), dev_free(dal1);
    free(acc), free(dad), free(dT), free(key), free(bar_of_key), free(tab), free(alpha), free(dv), free(dalpha);
    dev_free(dkey), dev_free(dtab), dev_free(dal), dev_free(ddv), dev_free(ddal), dev_free(ddad), dev_free(ddT);
    dev_free(base);
}

/* ---- 2. dlog --------------------------------------------------------------- */

static void dlog_case(int rows, int F, uint64_t seed) {
    char name[64];
    snprintf(name, sizeof name, "dlog rows %d F=%d", rows, F);
    const int as = F + 5;
    float *alpha = host_strided(rows, F, as, 0.3f, seed, 5);
    float *dadf = host_randn_scaled((size_t)F * rows, 1.0f, seed, 6);
    double *dad = malloc(sizeof(double) * F * rows);
    for (size_t i = 0; i < (size_t)F * rows; i++) dad[i] = (double)dadf[i] * (1.0 + 1e-9 * (double)(i % 97));
    double *ddad = dev_bytes(dad, sizeof(double) * F * rows);
    float *dal = dev_upload(alpha, (size_t)rows * as), *ddl = dev_poisoned((size_t)rows * F);
    int rc = st_cuda_vsn_backward_fused_dlog(rows, F, ddad, dal, as, ddl, NULL);
    CHECK(rc == ST_OK, "%s: %s", name, st_last_error());
    float *dl = dev_download_new(ddl, (size_t)rows * F);
    long bad = 0;
    for (int r = 0; r < rows; r++) {
        const float *al = alpha + (size_t)r * as;
        double dot = 0;
        for (int j = 0; j < F; j++) dot = fma((double)al[j], dad[(size_t)j * rows + r], dot);
        for (int j = 0; j < F; j++) {
            const float want = (float)((double)al[j] * ((double)(float)dad[(size_t)j * rows + r] - dot));
            if (!same_bits_f(dl[(size_t)r * F + j], want) && bad++ < 3)
                fprintf(stderr, "  %s: dlog[%d][%d] %.9g, want %.9g\n", name, r, j, dl[(size_t)r * F + j], want);
        }
    }
    CHECK(bad == 0, "%s: %ld of %d dlog values differ from the reference's bits", name, bad, rows * F);
    printf("  %-60s bit-exact: %s\n", name, bad == 0 ? "yes" : "NO");
    free(alpha), free(dadf), free(dad), free(dl);
    dev_free(ddad), dev_free(dal), dev_free(ddl);
}

/* ---- 3. combine ------------------------------------------------------------ */

static void combine_case(int rows, int F, int Dv, int tbars, int misalign, uint64_t seed) {
    char name[80];
    snprintf(name, sizeof name, "combine rows %d F=%d Dv=%d%s", rows, F, Dv, misalign ? " unaligned table" : "");
    const int as = F + 1, vs = Dv + 3;
    const size_t P = (size_t)F * Dv;
    float *tab = host_randn_scaled((size_t)tbars * P, 1.0f, seed, 7), *alpha = host_strided(rows, F, as, 0.3f, seed, 8);
    int *trow = malloc(sizeof(int) * rows);
    uint64_t s = seed;
    for (int r = 0; r < rows; r++) trow[r] = r % 5 == 0 ? tbars - 1 : (int)(lcg_next(&s) % (uint64_t)tbars);
    float *dbuf = dev_upload(NULL, (size_t)tbars * P + 1), *dtab = dbuf + (misalign ? 1 : 0);
    cudaMemcpy(dtab, tab, sizeof(float) * tbars * P, cudaMemcpyHostToDevice);
    float *dal = dev_upload(alpha, (size_t)rows * as), *dv = dev_poisoned((size_t)rows * vs);
    int *dtrow = dev_bytes(trow, sizeof(int) * rows);
    int rc = st_cuda_vsn_table_combine(rows, F, Dv, dal, as, dtab, dtrow, dv, vs, NULL);
    CHECK(rc == ST_OK, "%s: %s", name, st_last_error());
    float *v = dev_download_new(dv, (size_t)rows * vs);
    long bad = 0, gap = 0;
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < Dv; c++) {
            double acc = 0;
            for (int j = 0; j < F; j++)
                acc += (double)alpha[(size_t)r * as + j] * (double)tab[(size_t)trow[r] * P + (size_t)j * Dv + c];
            if (!same_bits_f(v[(size_t)r * vs + c], (float)acc) && bad++ < 3)
                fprintf(stderr, "  %s: v[%d][%d] %.9g, want %.9g\n", name, r, c, v[(size_t)r * vs + c], (float)acc);
        }
        for (int c = Dv; c < vs; c++) gap += !is_poison(v[(size_t)r * vs + c]);
    }
    CHECK(bad == 0, "%s: %ld of %d v values differ from the double sum's bits", name, bad, rows * Dv);
    CHECK(gap == 0, "%s: %ld values written in v's row gaps", name, gap);
    printf("  %-60s bit-exact: %s\n", name, bad == 0 ? "yes" : "NO");
    free(tab), free(alpha), free(trow), free(v);
    dev_free(dbuf), dev_free(dal), dev_free(dv), dev_free(dtrow);
}

static void run_all(void) {
    /* 1. rows_max > rows; bars > rows_max so cap = rows_max, and the count well below it */
    if (test_part(0)) tt_case(600, 517, 1000, 60, 0, 40, 32, 1, 9100);
    if (test_part(1)) tt_case(600, 517, 1000, 60, 0, 40, 32, 0, 9101);
    if (test_part(2)) tt_case(300, 300, 250, 90, 0, 37, 16, 1, 9102); /* cap = bars */
    if (test_part(3)) tt_case(200, 161, 400, 30, 0, 13, 5, 1, 9103);
    if (test_part(4)) tt_case(64, 64, 128, 8, 0, 3, 8, 0, 9104);
    /* 2. */
    if (test_part(5)) dlog_case(1000 + 13, 40, 9200);
    if (test_part(6)) dlog_case(77, 37, 9201);
    if (test_part(7)) dlog_case(5, 1, 9202);
    if (test_part(8)) dlog_case(333, 97, 9203); /* past the tile's 48 KB: the thread-a-row kernel */
    /* 3. */
    if (test_part(9)) combine_case(1000 + 7, 40, 32, 300, 0, 9300);
    if (test_part(10)) combine_case(1000 + 7, 40, 32, 300, 1, 9301);
    if (test_part(11)) combine_case(301, 37, 16, 50, 0, 9302);
    if (test_part(12)) combine_case(129, 13, 8, 9, 0, 9303);
    if (test_part(13)) combine_case(99, 11, 5, 20, 0, 9304);
    /* the boundaries: Dv = 32 with a partial variable chunk, an odd Dv, the dlog tile's widest F
     * (48,640 bytes of shared memory) and the first F past it, the float4 combine's variable tail at Dv = 32 */
    if (test_part(14)) tt_case(300, 290, 500, 40, 0, 45, 32, 1, 9105);
    if (test_part(15)) tt_case(128, 120, 300, 20, 0, 9, 7, 0, 9106);
    if (test_part(16)) dlog_case(100, 95, 9204);
    if (test_part(17)) dlog_case(70, 96, 9205);
    if (test_part(18)) combine_case(257, 45, 32, 40, 0, 9305);
    /* bars of 1 to 200 rows (the --segment minibatches: the group tails of 1 to 3 rows, srow windows of 32
     * crossed, full groups), 37 or 13 bars (not a multiple of the 4 warps a block, nor of the items' 5 or
     * 2 chunks a bar); the combine through the same index */
    if (test_part(19)) tt_case(tt_runs_total(37) + 9, tt_runs_total(37), 4000, 0, 37, 40, 32, 1, 9107);
    if (test_part(20)) tt_case(tt_runs_total(37) + 9, tt_runs_total(37), 4000, 0, 37, 40, 32, 0, 9108);
    if (test_part(21)) tt_case(tt_runs_total(13), tt_runs_total(13), 500, 0, 13, 13, 5, 1, 9109);
    if (test_part(22)) tt_case(tt_runs_total(13) + 1, tt_runs_total(13), 100, 0, 13, 37, 16, 1, 9110);
    /* the staged combine's widest F (alpha lanes j and j + 32 full) and the first past it (the row-at-a-time
     * kernel either way), bars of 1 to 200 rows */
    if (test_part(23)) tt_case(tt_runs_total(13) + 5, tt_runs_total(13), 100, 0, 13, 64, 32, 0, 9111);
    if (test_part(24)) tt_case(tt_runs_total(13), tt_runs_total(13), 100, 0, 13, 65, 8, 1, 9112);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    run_all();
#endif
    TEST_MAIN_END();
}
