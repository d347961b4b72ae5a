/* test_cuda_learning.c: `ssmtrade train --device cuda --preset default`
 * passes the CPU's learning check (issue 6). The GPU trainer (the whole
 * step on the device) trains the default preset (551,100 parameters, B=128,
 * T=64, K=64) on the built-in synthetic market for a fixed budget of
 * updates, then the checks of tests/train/learning_check.h run on the
 * held-out test split with the model on the GPU (train/evaluate_cuda.h).
 * SSMTRADE_GPU_LEARN_UPDATES overrides the budget, SSMTRADE_GPU_LEARN_CONFIG
 * (a JSON object of train flags, e.g. {"segment": 16, "seed": 2}) the config
 * (information runs only: scripts/gpu-learn.sh compares settings with it).
 * Skips (77) without a GPU. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "cuda/cuda_test.h"
#include "data/dataset.h"
#include "train/evaluate_cuda.h"
#include "train/learning_check.h"
#include "train/trainer_cuda.h"

#define UPDATES 60
#define ORACLE_SHARE_BOUND 0.10 /* the CPU test's bound; the measured share is printed and in README.md */

typedef struct {
    const st_dims *d;
    const st_param_table *table;
    const float *w;
    const st_market *m;
} gpu_agents;

static void *make_agent(void *ctx, int greedy, uint64_t seed) {
    gpu_agents *g = ctx;
    st_cuda_agent *a = calloc(1, sizeof *a);
    if (a && st_cuda_agent_init(a, g->d, g->table, g->w, g->m, greedy, seed) != ST_OK) free(a), a = NULL;
    return a;
}

static void drop_agent(void *a) {
    st_cuda_agent_free(a);
    free(a);
}

int main(void) {
    CUDA_TEST_BEGIN();
    int updates = getenv("SSMTRADE_GPU_LEARN_UPDATES") ? atoi(getenv("SSMTRADE_GPU_LEARN_UPDATES")) : UPDATES;
    st_train_config c;
    st_train_config_default(&c, "default");
    c.updates = updates;
    const char *json = getenv("SSMTRADE_GPU_LEARN_CONFIG");
    if (json) {
        CHECK(st_train_config_apply_json(&c, json, "SSMTRADE_GPU_LEARN_CONFIG") == ST_OK, "%s", st_last_error());
        printf("config: %s\n", json);
    }
    st_market m;
    st_data_opts o = st_data_opts_default(c.dims.K);
    CHECK(st_market_synthetic((uint64_t)c.market_seed, c.instruments, c.bars, &o, &m) == ST_OK, "market");
    st_cuda_trainer t;
    int rc = st_cuda_trainer_init(&t, &c, &m);
    CHECK(rc == ST_OK, "GPU trainer: %s", st_last_error());
    lc_episodes ep = {0};
    double secs = 0;
    for (int u = 0; rc == ST_OK && u < updates; u++) {
        st_update_stats s;
        rc = st_cuda_trainer_update(&t, &s);
        CHECK(rc == ST_OK, "update %d: %s", u, st_last_error());
        if (rc != ST_OK) break;
        secs += s.seconds;
        lc_episodes_add(&ep, u, updates, s.mean_episode_R, s.episodes, s.explained_var);
        if (u % 10 == 0 || u == updates - 1)
            printf("update %3d: pi %+.4f v %.4f ent %.3f kl %.4f epR %+.3f ev %+.2f  %.3f s\n", u + 1, s.loss.policy,
                   s.loss.value, s.loss.entropy, s.loss.approx_kl, s.mean_episode_R, s.explained_var, s.seconds);
    }
    long steps = (long)updates * c.dims.T * c.dims.B;
    printf("%d updates, %ld env steps in %.1f s: %.0f env steps/s\n", updates, steps, secs, secs > 0 ? steps / secs : 0);
    if (rc == ST_OK) rc = st_cuda_trainer_sync_host(&t);
    if (rc == ST_OK) {
        gpu_agents ga = {&c.dims, &t.host.table, t.host.w, &m};
        lc_agents f = {st_cuda_agent_act, make_agent, drop_agent, &ga};
        learning_check(&m, &ep, &f, ORACLE_SHARE_BOUND);
    }
    st_cuda_trainer_free(&t);
    st_train_config_free(&c);
    st_market_free(&m);
    TEST_MAIN_END();
}
