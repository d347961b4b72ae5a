/* test_learning.c: PPO learns on the synthetic market (issue 4's learning
 * test, bounded in time). The tiny preset trains for a fixed budget of
 * updates on the training split; on the held-out test split the agent's
 * R per bar must beat the random policy's by more than the spread of either
 * over 3 evaluation seeds, greedy must beat random, the mean episode R of
 * the last quarter of training must exceed that of the first quarter, and
 * the agent's share of the oracle's R per bar is printed and bounded below
 * (the bound documented in README.md). */
#include <math.h>

#include "core/error.h"
#include "data/dataset.h"
#include "env/policies.h"
#include "test.h"
#include "train/evaluate.h"
#include "train/trainer.h"

#define UPDATES 100
#define ORACLE_SHARE_BOUND 0.10 /* measured 0.184 (greedy); documented in README.md, "Learning" */

static double bt_R_per_bar(const st_market *m, st_policy_fn fn, void *user) {
    st_backtest_opts o = st_backtest_opts_default(ST_SPLIT_TEST);
    o.env.H_norm = 256;
    st_backtest_result r;
    int rc = st_backtest_run(m, &o, fn, user, &r);
    double v = rc == ST_OK ? r.metrics.R_per_bar : NAN;
    st_backtest_free(&r);
    return v;
}

static double range3(const double *v) {
    double lo = v[0], hi = v[0];
    for (int i = 1; i < 3; i++) lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
    return hi - lo;
}

int main(void) {
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.updates = UPDATES;
    st_market m;
    st_data_opts o = st_data_opts_default(c.dims.K);
    CHECK(st_market_synthetic((uint64_t)c.market_seed, c.instruments, c.bars, &o, &m) == ST_OK, "market");
    st_trainer t;
    CHECK(st_trainer_init(&t, &c, &m) == ST_OK, "trainer: %s", st_last_error());
    double first = 0, last = 0;
    int nf = 0, nl = 0;
    for (int u = 0; u < UPDATES; u++) {
        st_update_stats s;
        if (st_trainer_update(&t, &s) != ST_OK) {
            CHECK(0, "update %d: %s", u, st_last_error());
            break;
        }
        if (!isnan(s.mean_episode_R) && u < UPDATES / 4) first += s.mean_episode_R * s.episodes, nf += s.episodes;
        if (!isnan(s.mean_episode_R) && u >= UPDATES * 3 / 4) last += s.mean_episode_R * s.episodes, nl += s.episodes;
    }
    first = nf ? first / nf : NAN;
    last = nl ? last / nl : NAN;
    printf("mean episode R: first quarter %.3f (%d episodes), last quarter %.3f (%d episodes)\n", first, nf, last, nl);
    CHECK(nf > 0 && nl > 0 && last > first, "mean episode R did not rise: %.3f -> %.3f", first, last);

    /* Evaluation on the test split with the model sized for the instruments. */
    st_model em;
    float *g = calloc(t.table.total, sizeof(float));
    CHECK(st_model_init(&em, &c.dims, &t.table, m.n_inst, t.w, g) == ST_OK, "eval model");
    double agent[3], rnd[3];
    for (int s = 0; s < 3; s++) {
        st_agent a;
        st_agent_init(&a, &em, &m, 0, (uint64_t)s + 1);
        agent[s] = bt_R_per_bar(&m, st_agent_act, &a);
        st_agent_free(&a);
        st_baseline b = {ST_BASELINE_RANDOM, (uint64_t)s + 1};
        rnd[s] = bt_R_per_bar(&m, st_baseline_act, &b);
    }
    st_agent greedy;
    st_agent_init(&greedy, &em, &m, 1, 1);
    double gr = bt_R_per_bar(&m, st_agent_act, &greedy);
    st_agent_free(&greedy);
    st_baseline ob = {ST_BASELINE_ORACLE, 1};
    double oracle = bt_R_per_bar(&m, st_baseline_act, &ob);
    double ma = (agent[0] + agent[1] + agent[2]) / 3, mr = (rnd[0] + rnd[1] + rnd[2]) / 3;
    double spread = fmax(range3(agent), range3(rnd));
    printf("test split R/bar: agent sampled %.5f %.5f %.5f (mean %.5f), greedy %.5f, random %.5f %.5f %.5f "
           "(mean %.5f), oracle %.5f\n",
           agent[0], agent[1], agent[2], ma, gr, rnd[0], rnd[1], rnd[2], mr, oracle);
    printf("margin over random %.5f vs spread over seeds %.5f; agent's share of the oracle: sampled %.3f, greedy "
           "%.3f\n",
           ma - mr, spread, ma / oracle, gr / oracle);
    CHECK(ma - mr > spread, "agent beats random by %.5f, not more than the seed spread %.5f", ma - mr, spread);
    CHECK(gr > mr, "greedy %.5f does not beat random %.5f", gr, mr);
    CHECK(fmax(ma, gr) / oracle > ORACLE_SHARE_BOUND, "share of the oracle %.3f <= %.3f", fmax(ma, gr) / oracle,
          ORACLE_SHARE_BOUND);
    st_model_free(&em);
    free(g);
    st_trainer_free(&t);
    st_train_config_free(&c);
    st_market_free(&m);
    TEST_MAIN_END();
}
