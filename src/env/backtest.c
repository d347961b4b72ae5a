/* backtest.c: the backtest runner of backtest.h.
 *
 * Allocations happen here, outside the environment step: the trade list
 * grows by doubling; everything else is sized from the split up front. */
#include "env/backtest.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

st_backtest_opts st_backtest_opts_default(int split) {
    st_backtest_opts o;
    o.env = st_env_config_default();
    o.env.split = split;
    o.bars_per_year = ST_BARS_PER_YEAR;
    return o;
}

void st_backtest_free(st_backtest_result *r) {
    free(r->ret);
    free(r->R_step);
    free(r->walking);
    free(r->acct_inst);
    free(r->final_R);
    free(r->final_money);
    free(r->trades);
    memset(r, 0, sizeof *r);
}

/* Appends the step's trades to r, growing its list. */
static int keep_trades(st_backtest_result *r, int *cap, const st_trade_log *log) {
    if (log->n == 0) return ST_OK; /* r->trades may still be NULL: no memcpy from/to it */
    if (r->n_trades + log->n > *cap) {
        int nc = *cap ? *cap : 1024;
        while (nc < r->n_trades + log->n)
            nc *= 2;
        st_trade *t = realloc(r->trades, sizeof(st_trade) * (size_t)nc);
        ST_REQUIRE(t, ST_ERR_MEMORY, "backtest: cannot keep %d trades", nc);
        r->trades = t;
        *cap = nc;
    }
    memcpy(r->trades + r->n_trades, log->trades, sizeof(st_trade) * (size_t)log->n);
    r->n_trades += log->n;
    return ST_OK;
}

/* The environment buffers of one run. */
typedef struct {
    st_env env;
    float *ctx, *reward;
    int *actions;
    uint8_t *done, *was_active;
    double *before; /* money equity before the step */
    st_trade *log_buf;
} st_bt_work;

static void work_free(st_bt_work *w) {
    st_env_free(&w->env);
    free(w->ctx);
    free(w->reward);
    free(w->actions);
    free(w->done);
    free(w->was_active);
    free(w->before);
    free(w->log_buf);
}

/* Counts the instruments with a walkable split and sizes r. */
static int plan(const st_market *m, int split, st_backtest_result *r) {
    for (int i = 0; i < m->n_inst; i++) {
        int steps = m->inst[i].split_end[split] - 1 - m->inst[i].split_begin[split];
        if (steps < 1) continue;
        r->n_acct++;
        if (steps > r->n_steps) r->n_steps = steps;
    }
    ST_REQUIRE(r->n_acct > 0, ST_ERR_INPUT, "backtest: no instrument has two bars in split %d", split);
    size_t n = (size_t)r->n_steps, a = (size_t)r->n_acct;
    r->ret = calloc(n, sizeof(double));
    r->R_step = calloc(n, sizeof(double));
    r->walking = calloc(n, sizeof(int));
    r->acct_inst = calloc(a, sizeof(int));
    r->final_R = calloc(a, sizeof(double));
    r->final_money = calloc(a, sizeof(double));
    ST_REQUIRE(r->ret && r->R_step && r->walking && r->acct_inst && r->final_R && r->final_money, ST_ERR_MEMORY,
               "backtest: cannot allocate %d steps", r->n_steps);
    for (int i = 0, b = 0; i < m->n_inst; i++)
        if (m->inst[i].split_end[split] - 1 - m->inst[i].split_begin[split] >= 1) r->acct_inst[b++] = i;
    return ST_OK;
}

static int setup(const st_market *m, const st_backtest_opts *o, st_backtest_result *r, st_bt_work *w) {
    ST_TRY(plan(m, o->env.split, r));
    int B = r->n_acct;
    st_env_config c = o->env;
    if (c.H_norm <= 0) c.H_norm = c.H > 0 ? c.H : 256; /* keep the training normaliser */
    c.H = 0;                                           /* an episode is the whole split */
    c.auto_reset = 0;
    ST_TRY(st_env_create(&w->env, m, B, &c));
    w->ctx = malloc(sizeof(float) * (size_t)B * ST_CTX_COUNT);
    w->reward = malloc(sizeof(float) * (size_t)B);
    w->actions = malloc(sizeof(int) * (size_t)B);
    w->done = malloc((size_t)B);
    w->was_active = malloc((size_t)B);
    w->before = malloc(sizeof(double) * (size_t)B);
    w->log_buf = malloc(sizeof(st_trade) * 2 * (size_t)B);
    ST_REQUIRE(w->ctx && w->reward && w->actions && w->done && w->was_active && w->before && w->log_buf, ST_ERR_MEMORY,
               "backtest: cannot allocate buffers for %d instruments", B);
    st_env_out out = {.ctx = w->ctx, .ctx_stride = ST_CTX_COUNT};
    for (int b = 0; b < B; b++) {
        int i = r->acct_inst[b];
        ST_TRY(st_env_start_at(&w->env, b, i, m->inst[i].split_begin[c.split], &out));
    }
    return ST_OK;
}

/* One step of every account: policy, environment, per-step sums. */
static int walk_step(st_bt_work *w, int k, st_policy_fn policy, void *user, st_backtest_result *r, int *cap) {
    st_env *e = &w->env;
    double *before = w->before;
    uint8_t *was_active = w->was_active;
    for (int b = 0; b < e->B; b++) {
        before[b] = e->equity_money[b];
        was_active[b] = e->active[b];
        w->actions[b] = 1;
    }
    ST_TRY(policy(user, e, w->ctx, ST_CTX_COUNT, w->actions));
    st_trade_log log = {w->log_buf, 2 * e->B, 0, 0};
    st_env_out out = {w->reward, w->done, w->ctx, ST_CTX_COUNT, NULL, NULL, &log};
    ST_TRY(st_env_step(e, w->actions, &out));
    ST_REQUIRE(log.dropped == 0, ST_ERR_INTERNAL, "backtest: %ld trades did not fit the step log", log.dropped);
    ST_TRY(keep_trades(r, cap, &log));
    double s = 0, sR = 0; /* double rewards (step_reward), not the float copies */
    int n = 0;
    for (int b = 0; b < e->B; b++) {
        if (!was_active[b]) continue;
        double base = before[b] > ST_ENV_TINY ? before[b] : ST_ENV_TINY;
        s += (e->equity_money[b] - before[b]) / base;
        sR += e->step_reward[b];
        n++;
    }
    r->ret[k] = n > 0 ? s / n : 0;
    r->R_step[k] = sR;
    r->walking[k] = n;
    r->inst_bars += n;
    return ST_OK;
}

int st_backtest_run(const st_market *m, const st_backtest_opts *opts, st_policy_fn policy, void *user,
                    st_backtest_result *r) {
    memset(r, 0, sizeof *r);
    st_bt_work w;
    memset(&w, 0, sizeof w);
    int rc = setup(m, opts, r, &w), cap = 0;
    for (int k = 0; rc == ST_OK && k < r->n_steps; k++)
        rc = walk_step(&w, k, policy, user, r, &cap);
    if (rc == ST_OK) {
        for (int b = 0; b < r->n_acct; b++) {
            r->final_R[b] = w.env.equity_R[b];
            r->final_money[b] = w.env.equity_money[b];
        }
        st_metrics_compute(r->trades, r->n_trades, r->ret, r->R_step, r->n_steps, r->inst_bars, opts->bars_per_year,
                           &r->metrics);
    }
    work_free(&w);
    return rc;
}
