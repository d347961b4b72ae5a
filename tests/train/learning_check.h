/* learning_check.h: the learning check of issue 4, shared by the CPU test
 * (tests/train/test_learning.c, tiny preset) and the GPU test
 * (tests/cuda/test_cuda_learning.c, default preset): after a fixed budget
 * of training updates, on the held-out test split,
 *   - the mean episode R of the last quarter of training exceeds that of
 *     the first quarter;
 *   - the value function's error relative to the spread of the returns
 *     falls: the explained variance 1 - Var(ret - V) / Var(ret) of the last
 *     quarter exceeds that of the first (the raw value loss grows with the
 *     returns' variance as the agent moves from flat to taking positions,
 *     so it is the normalised error that shows the critic learning);
 *   - the sampled agent's R per bar beats the random policy's by more than
 *     the spread of either over 3 evaluation seeds;
 *   - the greedy agent beats random;
 *   - the better of the two reaches a bounded share of the oracle's R/bar.
 * The agent comes from a factory so that either backend's model acts. */
#ifndef ST_TEST_LEARNING_CHECK_H
#define ST_TEST_LEARNING_CHECK_H

#include <math.h>

#include "env/backtest.h"
#include "env/policies.h"
#include "test.h"

typedef struct {
    st_policy_fn act;
    void *(*make)(void *ctx, int greedy, uint64_t seed); /* NULL on failure */
    void (*drop)(void *agent);
    void *ctx;
} lc_agents;

/* Mean episode R (episode-weighted) and mean explained variance of the
 * first and last quarter of a run. */
typedef struct {
    double first, last, ev_first, ev_last;
    int nf, nl, uf, ul;
} lc_episodes;

static inline void lc_episodes_add(lc_episodes *e, int u, int updates, double mean_episode_R, int episodes,
                                   double explained_var) {
    if (u < updates / 4) e->ev_first += explained_var, e->uf++;
    if (u >= updates * 3 / 4) e->ev_last += explained_var, e->ul++;
    if (isnan(mean_episode_R)) return;
    if (u < updates / 4) e->first += mean_episode_R * episodes, e->nf += episodes;
    if (u >= updates * 3 / 4) e->last += mean_episode_R * episodes, e->nl += episodes;
}

static inline double lc_R_per_bar(const st_market *m, st_policy_fn fn, void *user) {
    st_backtest_opts o = st_backtest_opts_default(ST_SPLIT_TEST);
    o.env.H_norm = 256;
    st_backtest_result r;
    int rc = st_backtest_run(m, &o, fn, user, &r);
    double v = rc == ST_OK ? r.metrics.R_per_bar : NAN;
    st_backtest_free(&r);
    return v;
}

static inline double lc_range3(const double *v) {
    double lo = v[0], hi = v[0];
    for (int i = 1; i < 3; i++) lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
    return hi - lo;
}

static inline double lc_agent_R(const st_market *m, const lc_agents *f, int greedy, uint64_t seed) {
    void *a = f->make(f->ctx, greedy, seed);
    CHECK(a != NULL, "agent: %s", st_last_error());
    if (!a) return NAN;
    double v = lc_R_per_bar(m, f->act, a);
    f->drop(a);
    return v;
}

static inline void learning_check(const st_market *m, const lc_episodes *ep, const lc_agents *f,
                                  double oracle_share_bound) {
    double first = ep->nf ? ep->first / ep->nf : NAN, last = ep->nl ? ep->last / ep->nl : NAN;
    printf("mean episode R: first quarter %.3f (%d episodes), last quarter %.3f (%d episodes)\n", first, ep->nf, last,
           ep->nl);
    CHECK(ep->nf > 0 && ep->nl > 0 && last > first, "mean episode R did not rise: %.3f -> %.3f", first, last);
    double evf = ep->uf ? ep->ev_first / ep->uf : NAN, evl = ep->ul ? ep->ev_last / ep->ul : NAN;
    printf("explained variance of the value function: first quarter %.4f, last quarter %.4f\n", evf, evl);
    CHECK(evl > evf, "the value function's normalised error did not fall: explained variance %.4f -> %.4f", evf, evl);
    double agent[3], rnd[3];
    for (int s = 0; s < 3; s++) {
        agent[s] = lc_agent_R(m, f, 0, (uint64_t)s + 1);
        st_baseline b = {ST_BASELINE_RANDOM, (uint64_t)s + 1};
        rnd[s] = lc_R_per_bar(m, st_baseline_act, &b);
    }
    double gr = lc_agent_R(m, f, 1, 1);
    st_baseline ob = {ST_BASELINE_ORACLE, 1};
    double oracle = lc_R_per_bar(m, st_baseline_act, &ob);
    double ma = (agent[0] + agent[1] + agent[2]) / 3, mr = (rnd[0] + rnd[1] + rnd[2]) / 3;
    double spread = fmax(lc_range3(agent), lc_range3(rnd));
    printf("test split R/bar: agent sampled %.5f %.5f %.5f (mean %.5f), greedy %.5f, random %.5f %.5f %.5f "
           "(mean %.5f), oracle %.5f\n",
           agent[0], agent[1], agent[2], ma, gr, rnd[0], rnd[1], rnd[2], mr, oracle);
    printf("margin over random %.5f vs spread over seeds %.5f; agent's share of the oracle: sampled %.3f, greedy "
           "%.3f\n",
           ma - mr, spread, ma / oracle, gr / oracle);
    CHECK(ma - mr > spread, "agent beats random by %.5f, not more than the seed spread %.5f", ma - mr, spread);
    CHECK(gr > mr, "greedy %.5f does not beat random %.5f", gr, mr);
    CHECK(fmax(ma, gr) / oracle > oracle_share_bound, "share of the oracle %.3f <= %.3f", fmax(ma, gr) / oracle,
          oracle_share_bound);
}

#endif
