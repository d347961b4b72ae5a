/* cmd_baseline.c: `ssmtrade baseline`: the metrics of the baseline policies
 * (flat, buy-and-hold, random, oracle) on one split (DESIGN sections 4, 12).
 *
 * Loads --data (a CSV file or a folder of them) or builds the synthetic
 * market, walks the split with each chosen policy (src/env/backtest.h) and
 * prints the metrics table (one row per metric of ST_METRICS, one column per
 * policy) or the same as JSON. The oracle exists only where the data has
 * one (the synthetic market): with --policy all it shows n/a (JSON null)
 * on real data; asked for alone there, it is an error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/error.h"
#include "data/dataset.h"
#include "env/backtest.h"
#include "env/metrics_table.h"
#include "env/policies.h"

static const st_flag flags[] = {
    {"data", "PATH", "CSV file or folder of CSV files (default: the built-in synthetic market)"},
    {"split", "NAME", "train, validation or test (default test)"},
    {"policy", "NAME", "flat, buyhold, random, oracle or all (default all)"},
    {"seed", "S", "seed of the random policy (default 1)"},
    {"window", "K", "window length K: splits are K bars apart (default 64)"},
    {"market-seed", "S", "synthetic market seed (default 1)"},
    {"instruments", "N", "synthetic market instruments (default 8)"},
    {"bars", "N", "synthetic market bars per instrument (default 20000)"},
    {"bars-per-year", "N", "annualisation of Sharpe, Sortino and CAGR (default 252)"},
    {"k-stop", "X", "1R = k_stop x ATR (default 2)"},
    {"slippage-bps", "X", "slippage per fill in basis points (default 1)"},
    {"commission-bps", "X", "commission per fill in basis points (default 1)"},
    {"risk", "X", "fraction of equity risked per trade (default 0.01)"},
    {"json", NULL, "print machine-readable JSON"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

typedef struct {
    int split, policy_mask, json;
    long long seed, market_seed;
    int K, n_inst, n_bars;
    st_backtest_opts bt;
    const char *data;
} baseline_args;

static int parse_args(const st_args *a, baseline_args *o) {
    memset(o, 0, sizeof *o);
    ST_TRY(st_split_parse(st_args_str(a, "split", "test"), &o->split));
    const char *p = st_args_str(a, "policy", "all");
    if (strcmp(p, "all") == 0) {
        o->policy_mask = (1 << ST_BASELINE_COUNT) - 1;
    } else {
        int k = st_baseline_parse(p);
        ST_REQUIRE(k >= 0, ST_ERR_INPUT, "--policy '%s': expected flat, buyhold, random, oracle or all", p);
        o->policy_mask = 1 << k;
    }
    o->json = st_args_has(a, "json");
    o->data = st_args_str(a, "data", NULL);
    ST_TRY(st_args_i64(a, "seed", 1, &o->seed));
    ST_TRY(st_args_i64(a, "market-seed", 1, &o->market_seed));
    ST_TRY(st_args_int(a, "window", 64, &o->K));
    ST_TRY(st_args_int(a, "instruments", 8, &o->n_inst));
    ST_TRY(st_args_int(a, "bars", 20000, &o->n_bars));
    ST_REQUIRE(o->K > 0 && o->n_inst > 0 && o->n_bars > 0 && o->seed >= 0 && o->market_seed >= 0, ST_ERR_INPUT,
               "--window, --instruments and --bars must be positive, seeds non-negative");
    o->bt = st_backtest_opts_default(o->split);
    ST_TRY(st_args_double(a, "bars-per-year", ST_BARS_PER_YEAR, &o->bt.bars_per_year));
    ST_TRY(st_args_double(a, "k-stop", o->bt.env.k_stop, &o->bt.env.k_stop));
    ST_TRY(st_args_double(a, "slippage-bps", o->bt.env.slippage_bps, &o->bt.env.slippage_bps));
    ST_TRY(st_args_double(a, "commission-bps", o->bt.env.commission_bps, &o->bt.env.commission_bps));
    ST_TRY(st_args_double(a, "risk", o->bt.env.risk_fraction, &o->bt.env.risk_fraction));
    ST_REQUIRE(o->bt.bars_per_year > 0, ST_ERR_INPUT, "--bars-per-year must be positive");
    return ST_OK;
}

static int load_market(const baseline_args *o, st_market *m) {
    st_data_opts d = st_data_opts_default(o->K);
    if (o->data) return st_market_load(o->data, &d, m);
    return st_market_synthetic((uint64_t)o->market_seed, o->n_inst, o->n_bars, &d, m);
}

typedef struct {
    int ran[ST_BASELINE_COUNT];  /* asked for */
    int have[ST_BASELINE_COUNT]; /* available on this data, metrics filled */
    st_metrics met[ST_BASELINE_COUNT];
    long inst_bars;
    int n_acct;
} baseline_results;

static int run_all(const baseline_args *o, const st_market *m, baseline_results *res) {
    memset(res, 0, sizeof *res);
    for (int p = 0; p < ST_BASELINE_COUNT; p++) {
        if (!(o->policy_mask >> p & 1)) continue;
        res->ran[p] = 1;
        if (!st_baseline_available(p, m)) {
            ST_REQUIRE(o->policy_mask != 1 << p, ST_ERR_INPUT,
                       "--policy %s: this data has no oracle (only the synthetic market does)", st_baseline_name(p));
            continue;
        }
        st_baseline pol = {p, (uint64_t)o->seed};
        st_backtest_result r;
        int rc = st_backtest_run(m, &o->bt, st_baseline_act, &pol, &r);
        if (rc == ST_OK) {
            res->have[p] = 1;
            res->met[p] = r.metrics;
            res->inst_bars = r.inst_bars;
            res->n_acct = r.n_acct;
        }
        st_backtest_free(&r);
        ST_TRY(rc);
    }
    return ST_OK;
}

/* The columns of the policies that were asked for. */
static int columns(const baseline_results *res, st_metrics_column *cols) {
    int n = 0;
    for (int p = 0; p < ST_BASELINE_COUNT; p++)
        if (res->ran[p]) cols[n++] = (st_metrics_column){st_baseline_name(p), res->have[p], res->met[p]};
    return n;
}

static void print_table(const baseline_args *o, const baseline_results *res) {
    printf("baseline on the %s split of %s: %d instruments, %ld instrument-bars, %.0f bars per year\n\n",
           st_split_name(o->split), o->data ? o->data : "the synthetic market", res->n_acct, res->inst_bars,
           o->bt.bars_per_year);
    st_metrics_column cols[ST_BASELINE_COUNT];
    st_metrics_print(stdout, cols, columns(res, cols));
}

static void print_json(const baseline_args *o, const baseline_results *res) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "split", st_split_name(o->split));
    cJSON_AddStringToObject(root, "data", o->data ? o->data : "synthetic");
    cJSON_AddNumberToObject(root, "instruments", res->n_acct);
    cJSON_AddNumberToObject(root, "instrument_bars", (double)res->inst_bars);
    cJSON_AddNumberToObject(root, "bars_per_year", o->bt.bars_per_year);
    st_metrics_column cols[ST_BASELINE_COUNT];
    cJSON_AddItemToObject(root, "policies", st_metrics_json(cols, columns(res, cols)));
    cJSON_AddItemToObject(root, "definitions", st_metrics_definitions_json());
    char *s = cJSON_Print(root);
    puts(s);
    cJSON_free(s);
    cJSON_Delete(root);
}

int st_cmd_baseline(int argc, char **argv) {
    st_args a;
    int rc = st_args_parse(argc, argv, flags, N_FLAGS, &a);
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, "baseline",
                      "Backtests the baseline policies (flat, buy-and-hold, random, oracle) on one split and prints "
                      "their metrics.",
                      flags, N_FLAGS);
        st_args_free(&a);
        return 0;
    }
    baseline_args o;
    if (rc == ST_OK) rc = parse_args(&a, &o);
    st_market m;
    memset(&m, 0, sizeof m);
    int loaded = 0;
    if (rc == ST_OK) {
        rc = load_market(&o, &m);
        loaded = rc == ST_OK;
    }
    baseline_results res;
    if (rc == ST_OK) rc = run_all(&o, &m, &res);
    if (rc == ST_OK) {
        if (o.json)
            print_json(&o, &res);
        else
            print_table(&o, &res);
    }
    if (loaded) st_market_free(&m);
    st_args_free(&a);
    return rc;
}
