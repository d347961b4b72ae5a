/* test_minibatch_segments.c: the minibatch permutation over segments
 * (--segment S, st_trainer_permutation): a permutation of the rollout's
 * samples in which every S consecutive entries are S consecutive steps of
 * one environment, in time order, the segments in the order that the
 * samples' own Fisher-Yates gives N / S entries; S = 1 the permutation the
 * trainer had before segments (its draws, its order); and the config's
 * checks of S. */
#include <string.h>

#include "core/error.h"
#include "core/philox.h"
#include "test.h"
#include "train/trainer.h"

/* Fisher-Yates over 0..n-1 as the trainer drew it before segments. */
static void reference_fy(int *p, int n, uint64_t seed, uint64_t base) {
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        st_philox4 r = st_philox_draw(seed, ST_STREAM_MINIBATCH, base + (uint64_t)i);
        int j = (int)(((uint64_t)r.v[0] * (uint64_t)(i + 1)) >> 32);
        int t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* A trainer with only what st_trainer_permutation reads. */
static void perm_of(st_trainer *t, int T, int B, int S, int E, long update, int epoch) {
    t->cfg.dims.T = T, t->cfg.dims.B = B, t->cfg.segment = S, t->cfg.epochs = E, t->cfg.seed = 11;
    t->N = T * B, t->update = update;
    st_trainer_permutation(t, epoch);
}

static int is_permutation(const int *p, int n) {
    int *seen = calloc((size_t)n, sizeof(int)), ok = seen != NULL;
    for (int i = 0; ok && i < n; i++) ok = p[i] >= 0 && p[i] < n && !seen[p[i]]++;
    free(seen);
    return ok;
}

static void segments(int T, int B, int S) {
    int N = T * B, NS = N / S;
    st_trainer t;
    memset(&t, 0, sizeof t);
    t.perm = malloc(sizeof(int) * (size_t)N);
    int *ref = malloc(sizeof(int) * (size_t)N);
    if (!t.perm || !ref) {
        CHECK(0, "out of memory");
        free(t.perm), free(ref);
        return;
    }
    const long update = 3;
    const int E = 2, epoch = 1;
    perm_of(&t, T, B, S, E, update, epoch);
    CHECK(is_permutation(t.perm, N), "T=%d B=%d S=%d: not a permutation of the %d samples", T, B, S, N);
    /* segment i: S steps tb S .. tb S + S - 1 of one environment, in order */
    int bad = 0;
    for (int i = 0; i < NS; i++) {
        int e = t.perm[(size_t)i * S] % B, t0 = t.perm[(size_t)i * S] / B;
        bad += t0 % S != 0;
        for (int u = 0; u < S; u++) bad += t.perm[(size_t)i * S + u] != (t0 + u) * B + e;
    }
    CHECK(bad == 0, "T=%d B=%d S=%d: %d entries outside their segment's environment and steps", T, B, S, bad);
    /* the segments' order: the Fisher-Yates of N / S entries with the samples' draws */
    reference_fy(ref, NS, 11, ((uint64_t)update * E + epoch) * (uint64_t)N);
    int order = 0;
    for (int i = 0; i < NS; i++) {
        int q = ref[i], tb = q / B, e = q % B;
        order += t.perm[(size_t)i * S] != tb * S * B + e;
    }
    CHECK(order == 0, "T=%d B=%d S=%d: %d segments out of the reference order", T, B, S, order);
    if (S == 1) {
        reference_fy(ref, N, 11, ((uint64_t)update * E + epoch) * (uint64_t)N);
        CHECK(memcmp(ref, t.perm, sizeof(int) * (size_t)N) == 0,
              "S = 1: not the permutation the trainer drew before segments");
    }
    /* another epoch, another order */
    memcpy(ref, t.perm, sizeof(int) * (size_t)N);
    perm_of(&t, T, B, S, E, update, 0);
    CHECK(NS < 3 || memcmp(ref, t.perm, sizeof(int) * (size_t)N) != 0, "T=%d B=%d S=%d: epochs 0 and 1 agree", T,
          B, S);
    free(t.perm), free(ref);
}

static void config_checks(void) {
    st_train_config c;
    CHECK(st_train_config_default(&c, "tiny") == ST_OK, "defaults");
    c.dims.T = 32, c.dims.B = 32, c.minibatches = 4; /* 256 samples a minibatch */
    c.segment = 8;
    CHECK(st_train_config_validate(&c) == ST_OK, "S = 8 of T = 32, minibatch 256: %s", st_last_error());
    c.segment = 32;
    CHECK(st_train_config_validate(&c) == ST_OK, "S = T: %s", st_last_error());
    c.segment = 0;
    CHECK(st_train_config_validate(&c) != ST_OK && strstr(st_last_error(), "--segment 0 must be positive"),
          "S = 0 passed or its message is wrong: %s", st_last_error());
    c.segment = 5;
    CHECK(st_train_config_validate(&c) != ST_OK && strstr(st_last_error(), "--segment 5") &&
              strstr(st_last_error(), "T = 32"),
          "S = 5 with T = 32 passed or its message is wrong: %s", st_last_error());
    c.segment = 16, c.dims.B = 3, c.minibatches = 8; /* 96 samples, minibatches of 12 */
    CHECK(st_train_config_validate(&c) != ST_OK && strstr(st_last_error(), "12 samples"),
          "S = 16 with minibatches of 12 passed or its message is wrong: %s", st_last_error());
    CHECK(st_train_config_set(&c, "segment", "4") == ST_OK && c.segment == 4, "--segment 4 from text");
    char *json = st_train_config_to_json(&c);
    CHECK(json && strstr(json, "\"segment\":") != NULL, "the config's JSON has no segment key");
    free(json);
    st_train_config_free(&c);
}

int main(void) {
    segments(8, 6, 1);
    segments(8, 6, 4);
    segments(8, 6, 8);
    segments(32, 5, 2);
    segments(16, 1, 16); /* one environment, one segment */
    config_checks();
    TEST_MAIN_END();
}
