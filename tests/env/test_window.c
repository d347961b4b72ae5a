/* test_window.c: the window builder (window.h) on poisoned padded buffers.
 *
 * Window rows have stride F + C + 6 with NaN in the gap, the context rows
 * stride C + 3 with NaN in theirs: the valid part must equal the window
 * built by hand (copies: bit-identical), the window's padding must still be
 * NaN, and no NaN of the context padding may leak in. Both precisions,
 * the market entry point and the raw-pointer kernel. Bad pairs are refused. */
#define ST_REAL_BITS 64
#include <stdint.h>

#include "core/error.h"
#include "core/philox.h"
#include "env/window.h"
#include "test.h"

/* The float build of the same function (window.h maps the plain name to _f64 here). */
int st_window_build_f32(const st_market *m, int B, int K, const int *inst, const int *bar, const float *ctx, int C,
                        int ctx_stride, float *win, int win_stride);

enum { F = 5, C = 16, K = 7, B = 6, NI = 2, NBARS = 40 };
enum { WS = F + C + 6, CS = C + 3 };

int main(void) {
    st_rng r = st_rng_make(2024, ST_STREAM_TEST);
    st_instrument inst[NI];
    float feat[NI][NBARS * F];
    memset(inst, 0, sizeof inst);
    for (int i = 0; i < NI; i++) {
        for (int x = 0; x < NBARS * F; x++)
            feat[i][x] = (float)st_rng_normal(&r);
        inst[i].n = NBARS;
        inst[i].features = feat[i];
        snprintf(inst[i].name, sizeof inst[i].name, "i%d", i);
    }
    st_market m = {.n_inst = NI, .inst = inst, .F = F};
    int pi[B] = {0, 1, 1, 0, 1, 0}, pb[B] = {K - 1, 10, NBARS - 1, 25, K, NBARS - 1};
    float ctx[B * CS];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < CS; j++)
            ctx[b * CS + j] = j < C ? (float)st_rng_normal(&r) : NAN;

    /* double precision, market entry point */
    double *win = test_padded(B * K, F + C, WS);
    CHECK(st_window_build(&m, B, K, pi, pb, ctx, C, CS, win, WS) == ST_OK, "build: %s", st_last_error());
    int wrong = 0, pad = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) {
            const double *row = win + (size_t)(b * K + k) * WS;
            const float *src = feat[pi[b]] + (size_t)(pb[b] - K + 1 + k) * F; /* by hand: bar pb - K + 1 + k */
            for (int j = 0; j < F; j++)
                wrong += row[j] != (double)src[j];
            for (int j = 0; j < C; j++)
                wrong += row[F + j] != (double)ctx[b * CS + j];
            for (int j = F + C; j < WS; j++)
                pad += !isnan(row[j]);
        }
    CHECK(wrong == 0, "%d window values differ from the hand-built window", wrong);
    CHECK(pad == 0, "%d padding values were overwritten", pad);

    /* float precision: the same values */
    float *winf = malloc(sizeof(float) * B * K * WS);
    for (int x = 0; x < B * K * WS; x++)
        winf[x] = NAN;
    CHECK(st_window_build_f32(&m, B, K, pi, pb, ctx, C, CS, winf, WS) == ST_OK, "build f32");
    wrong = pad = 0;
    for (int x = 0; x < B * K * WS; x++) {
        if (x % WS < F + C)
            wrong += (double)winf[x] != win[x];
        else
            pad += !isnan(winf[x]);
    }
    CHECK(wrong == 0 && pad == 0, "float window: %d values differ, %d padding written", wrong, pad);

    /* raw-pointer kernel, contiguous output: equal to the padded one row by row */
    const float *fp[B];
    for (int b = 0; b < B; b++)
        fp[b] = feat[pi[b]];
    double *dense = malloc(sizeof(double) * B * K * (F + C));
    st_window_build_rows(B, K, F, C, fp, F, pb, ctx, CS, dense, F + C);
    wrong = 0;
    for (int rr = 0; rr < B * K; rr++)
        wrong += memcmp(dense + (size_t)rr * (F + C), win + (size_t)rr * WS, sizeof(double) * (F + C)) != 0;
    CHECK(wrong == 0, "%d contiguous rows differ from the padded build", wrong);

    /* the model reads only the first F' < F features: a feature stride wider than
     * the width read must still walk whole bars (stride F, width 3) */
    double *narrow = test_padded(B * K, 3 + C, 3 + C);
    st_window_build_rows(B, K, 3, C, fp, F, pb, ctx, CS, narrow, 3 + C);
    wrong = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < 3; j++)
                wrong += narrow[(size_t)(b * K + k) * (3 + C) + j] != (double)feat[pi[b]][(pb[b] - K + 1 + k) * F + j];
    CHECK(wrong == 0, "feature stride 5, width 3: %d values differ", wrong);

    /* bad input */
    int early[1] = {K - 2}, zero[1] = {0}, past[1] = {NBARS}, noinst[1] = {NI};
    CHECK(st_window_build(&m, 1, K, zero, early, ctx, C, CS, win, WS) == ST_ERR_INPUT, "bar < K - 1 accepted");
    CHECK(st_window_build(&m, 1, K, zero, past, ctx, C, CS, win, WS) == ST_ERR_INPUT, "bar >= n accepted");
    CHECK(st_window_build(&m, 1, K, noinst, pb, ctx, C, CS, win, WS) == ST_ERR_INPUT, "missing instrument accepted");
    CHECK(st_window_build(&m, 1, K, zero, pb, ctx, C, CS, win, F + C - 1) == ST_ERR_INPUT, "short stride accepted");
    printf("  window B=%d K=%d F=%d C=%d, row stride %d, context stride %d: exact, padding intact\n", B, K, F, C, WS,
           CS);
    free(win);
    free(winf);
    free(dense);
    free(narrow);
    TEST_MAIN_END();
}
