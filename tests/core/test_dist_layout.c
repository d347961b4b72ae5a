/* test_dist_layout.c: the gathered rollout layout of data-parallel
 * training (train/trainer_cuda_dist.h) on the CPU: for world sizes 1, 2,
 * 3, 4, 8 and several B and T, st_cuda_dist_place maps the global sample
 * numbers t*B + b of one GPU one-to-one onto the gathered arrays, and
 * sample (t, b) lands where its rank r = b / (B/world) writes it: at
 * r*Nl + t*Bl + b % Bl (Nl = T*Bl); the size checks refuse B or a
 * minibatch that does not split, naming the flag. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "test.h"
#include "train/trainer_cuda_dist.h"

static void layout(int world, int B, int T) {
    st_cuda_trainer t;
    memset(&t, 0, sizeof t);
    t.host.cfg.dims.B = B;
    t.host.cfg.dims.T = T;
    t.world = world;
    t.Bl = B / world;
    t.Nl = T * t.Bl;
    int N = T * B, bad = 0, wrong = 0;
    char *seen = calloc((size_t)N, 1);
    for (int g = 0; g < N; g++) {
        int at = st_cuda_dist_place(&t, g);
        if (at < 0 || at >= N || seen[at]++) {
            bad++;
            continue;
        }
        int step = g / B, b = g % B, r = b / t.Bl;
        wrong += at != r * t.Nl + step * t.Bl + b % t.Bl;
    }
    free(seen);
    CHECK(bad == 0 && wrong == 0, "world %d, B %d, T %d: %d places out of range or taken twice, %d not the rank's", world,
          B, T, bad, wrong);
}

int main(void) {
    const int worlds[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
        int W = worlds[i];
        layout(W, W, 1);
        layout(W, 8 * W, 3);
        layout(W, 24 * W, 64);
    }
    st_train_config c;
    memset(&c, 0, sizeof c);
    c.dims.B = 30, c.dims.T = 8, c.minibatches = 2;
    st_dist d = {.world = 4};
    CHECK(st_cuda_dist_check(&c, &d) == ST_ERR_INPUT && strstr(st_last_error(), "--batch 30"), "B 30 over 4: '%s'",
          st_last_error());
    c.dims.B = 32, c.minibatches = 128; /* 256 samples: minibatches of 2 */
    CHECK(st_cuda_dist_check(&c, &d) == ST_ERR_INPUT && strstr(st_last_error(), "minibatch of 2 windows"),
          "minibatch 2 over 4: '%s'", st_last_error());
    c.minibatches = 8;
    CHECK(st_cuda_dist_check(&c, &d) == ST_OK, "B 32, minibatch 32 over 4: %s", st_last_error());
    CHECK(st_cuda_dist_check(&c, NULL) == ST_OK, "no ranks");
    TEST_MAIN_END();
}
