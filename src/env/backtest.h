/* backtest.h: walk a whole split of every instrument with a policy and
 * collect what the metrics need (DESIGN section 4, "Evaluation").
 *
 * One environment instance per instrument (whose split has at least two
 * bars), started at the split's first bar, stepped bar by bar until its
 * last bar (episode length = the split, no auto-reset, the open position
 * liquidated at the last close). The count features of the context keep
 * the training normaliser (opts.env.H_norm, else opts.env.H), so a trained
 * policy sees inputs on the scale it learned; they are soft-clipped beyond.
 * Each instrument is its own account at fixed-fractional risk (from 1);
 * the portfolio return of step k is the mean of the accounts' returns over
 * the instruments still walking at step k (equal weight, rebalanced each
 * bar; instruments are aligned by their offset into the split).
 *
 * Baselines measured on the built-in synthetic market (seed 1, 8 instruments
 * x 20,000 bars, K = 64, test split: 23,696 instrument-bars; default costs
 * 1 + 1 bps, k_stop 2, random seed 1), `ssmtrade baseline`:
 *
 *   policy    R/bar     expectancy  trades  Sharpe (252)
 *   flat       0.0000    0.000          0     0.00
 *   buyhold    0.0001    0.012        221    -0.06
 *   random    -0.0143   -0.032      10669    -1.99
 *   oracle     0.0456    4.893        221     5.33
 *
 * Over market seeds 1..5, validation and test splits, the oracle made
 * 0.035 .. 0.051 R/bar (Sharpe 4.2 .. 5.3) and no other baseline more than
 * 0.014 R/bar. tests/env/test_backtest.c asserts the conservative bound
 * oracle R/bar > every other baseline's + 0.02 (and expectancy > 1R,
 * Sharpe > random's + 3) on seed 1's test split. */
#ifndef ST_BACKTEST_H
#define ST_BACKTEST_H

#include "env/env.h"
#include "env/metrics.h"

/* A policy: writes actions[b] in {0, 1, 2} for every instance of e from its
 * state (e->inst, e->bar, positions...) and the context rows ctx [B, 16]
 * (row stride ctx_stride). Actions of finished instances are ignored.
 * Returns ST_OK or an error status (which stops the backtest). */
typedef int (*st_policy_fn)(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions);

typedef struct {
    st_env_config env;    /* split, costs, stop, risk, H / H_norm (for the normaliser) */
    double bars_per_year; /* annualisation (ST_BARS_PER_YEAR) */
} st_backtest_opts;

st_backtest_opts st_backtest_opts_default(int split);

typedef struct {
    int n_acct;          /* instruments walked */
    int n_steps;         /* steps of the longest walk */
    long inst_bars;      /* steps summed over instruments */
    double *ret;         /* [n_steps] portfolio money return of each step */
    double *R_step;      /* [n_steps] rewards of each step summed over instruments (R) */
    int *walking;        /* [n_steps] instruments still walking at each step */
    int *acct_inst;      /* [n_acct] instrument of each account */
    double *final_R;     /* [n_acct] equity_R at the end */
    double *final_money; /* [n_acct] money equity at the end */
    st_trade *trades;    /* [n_trades] in step order, then instance order */
    int n_trades;
    st_metrics metrics;
} st_backtest_result;

/* Runs policy over split opts->env.split of m and fills r (free it with
 * st_backtest_free, also after a failure). */
int st_backtest_run(const st_market *m, const st_backtest_opts *opts, st_policy_fn policy, void *user,
                    st_backtest_result *r);
void st_backtest_free(st_backtest_result *r);

#endif
