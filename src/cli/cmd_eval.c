/* cmd_eval.c: `ssmtrade eval`: backtest a checkpoint on a split, greedy and
 * sampled, against the baselines on the same bars; metrics table, JSON and
 * the HTML report (DESIGN sections 4, 10, 12). The agent's model runs on
 * the GPU (train/evaluate_cuda.h) or the CPU (train/evaluate.h): --device. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/eval_report.h"
#include "cli/run_setup.h"
#include "core/device.h"
#include "core/error.h"
#include "env/metrics_table.h"
#include "env/policies.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/evaluate_cuda.h"

static const st_flag flags[] = {
    {"ckpt", "CKPT", "checkpoint to evaluate (required)"},
    {"data", "PATH", "CSV file or folder (default: the data the checkpoint was trained on)"},
    {"split", "NAME", "validation or test (default test)"},
    {"report", "FILE.html", "write the self-contained HTML report here"},
    {"seed", "S", "seed of the sampled policy and the random baseline (1)"},
    {"device", "cpu|cuda", "where the model runs (default: cuda when a GPU is present, else cpu)"},
    {"bars-per-year", "N", "annualisation of Sharpe, Sortino and CAGR (252)"},
    {"json", NULL, "print machine-readable JSON"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

enum { COL_GREEDY, COL_SAMPLED, COL_FLAT, COL_BUYHOLD, COL_RANDOM, COL_ORACLE, N_COLS };
static const char *const col_names[N_COLS] = {"greedy", "sampled", "flat", "buyhold", "random", "oracle"};

static int run_agent_cpu(st_model *model, const st_market *m, const st_backtest_opts *bt, int greedy, uint64_t seed,
                         st_backtest_result *r, double *importance) {
    st_agent ag;
    ST_TRY(st_agent_init(&ag, model, m, greedy, seed));
    int rc = st_backtest_run(m, bt, st_agent_act, &ag, r);
    if (rc == ST_OK && importance)
        for (int j = 0; j < m->F; j++) importance[j] = ag.importance_rows ? ag.importance[j] / ag.importance_rows : 0;
    st_agent_free(&ag);
    return rc;
}

/* The same agent with the model on the GPU (train/evaluate_cuda.h). */
static int run_agent_cuda(st_model *model, const st_market *m, const st_backtest_opts *bt, int greedy,
                          uint64_t seed, st_backtest_result *r, double *importance) {
    st_cuda_agent ag;
    ST_TRY(st_cuda_agent_init(&ag, &model->d, model->table, model->w, m, greedy, seed));
    int rc = st_backtest_run(m, bt, st_cuda_agent_act, &ag, r);
    if (rc == ST_OK && importance) st_cuda_agent_importance(&ag, importance);
    st_cuda_agent_free(&ag);
    return rc;
}

typedef struct {
    st_train_config cfg;
    st_market m;
    st_param_table table;
    float *w, *g;
    st_model model;
    int have_model, have_market;
} eval_state;

static int load(const st_args *a, eval_state *s) {
    const char *ckpt = st_args_str(a, "ckpt", NULL);
    ST_REQUIRE(ckpt, ST_ERR_INPUT, "--ckpt CKPT is required (a checkpoint written by ssmtrade train)");
    st_safetensors f;
    ST_TRY(st_safetensors_open(ckpt, &f));
    int rc = st_checkpoint_config(&f, &s->cfg);
    const char *data = st_args_str(a, "data", NULL);
    if (rc == ST_OK && data) rc = st_train_config_set(&s->cfg, "data", data);
    if (rc == ST_OK) rc = st_run_market(&s->cfg, &s->m, 0);
    s->have_market = rc == ST_OK;
    if (rc == ST_OK) {
        /* The features must be normalised as in training. */
        int F = s->m.F;
        float *mean = malloc(sizeof(float) * F), *sd = malloc(sizeof(float) * F);
        int64_t sh[1] = {F};
        rc = st_safetensors_read(&f, "data.norm_mean", ST_DT_F32, 1, sh, mean);
        if (rc == ST_OK) rc = st_safetensors_read(&f, "data.norm_std", ST_DT_F32, 1, sh, sd);
        if (rc == ST_OK && (memcmp(mean, s->m.norm_mean, sizeof(float) * F) || memcmp(sd, s->m.norm_std, sizeof(float) * F)))
            rc = ST_FAIL(ST_ERR_INPUT,
                         "%s: the evaluation data's training split differs from the checkpoint's, so its feature "
                         "normalisation would differ: evaluate on the data the checkpoint was trained on",
                         ckpt);
        free(mean);
        free(sd);
    }
    if (rc == ST_OK) rc = st_param_table_build(&s->cfg.dims, &s->table);
    if (rc == ST_OK) {
        s->w = calloc(s->table.total, sizeof(float));
        s->g = calloc(s->table.total, sizeof(float));
        rc = s->w && s->g ? st_checkpoint_weights(&f, &s->table, s->w) : ST_FAIL(ST_ERR_MEMORY, "out of memory");
    }
    if (rc == ST_OK) rc = st_model_init(&s->model, &s->cfg.dims, &s->table, s->m.n_inst, s->w, s->g);
    s->have_model = rc == ST_OK;
    st_safetensors_close(&f);
    return rc;
}

static void unload(eval_state *s) {
    if (s->have_model) st_model_free(&s->model);
    if (s->have_market) st_market_free(&s->m);
    st_param_table_free(&s->table);
    free(s->w);
    free(s->g);
    st_train_config_free(&s->cfg);
}

static int evaluate(const st_args *a) {
    eval_state s;
    memset(&s, 0, sizeof s);
    int split;
    long long seed;
    double bpy;
    int rc = st_split_parse(st_args_str(a, "split", "test"), &split);
    const char *device = st_args_str(a, "device", st_cuda_devices() > 0 ? "cuda" : "cpu");
    int gpu = strcmp(device, "cuda") == 0;
    if (rc == ST_OK && !gpu && strcmp(device, "cpu") != 0)
        rc = ST_FAIL(ST_ERR_INPUT, "--device %s: expected cpu or cuda", device);
    if (rc == ST_OK && gpu && st_cuda_devices() == 0) rc = ST_FAIL(ST_ERR_INPUT, "--device cuda: %s", st_cuda_describe());
    if (rc == ST_OK) rc = st_args_i64(a, "seed", 1, &seed);
    if (rc == ST_OK) rc = st_args_double(a, "bars-per-year", 252, &bpy);
    if (rc == ST_OK) rc = load(a, &s);
    if (rc != ST_OK) {
        unload(&s);
        return rc;
    }
    st_backtest_opts bt = st_backtest_opts_default(split);
    bt.bars_per_year = bpy;
    bt.env.k_stop = s.cfg.k_stop;
    bt.env.slippage_bps = s.cfg.slippage_bps;
    bt.env.commission_bps = s.cfg.commission_bps;
    bt.env.risk_fraction = s.cfg.risk_fraction;
    bt.env.H_norm = s.cfg.episode_length;
    st_metrics_column cols[N_COLS];
    st_backtest_result res[N_COLS];
    memset(res, 0, sizeof res);
    double *importance = calloc((size_t)s.m.F, sizeof(double));
    for (int c = 0; c < N_COLS && rc == ST_OK; c++) {
        memset(&cols[c], 0, sizeof cols[c]);
        cols[c].name = col_names[c];
        if (c == COL_GREEDY || c == COL_SAMPLED) {
            rc = (gpu ? run_agent_cuda : run_agent_cpu)(&s.model, &s.m, &bt, c == COL_GREEDY, (uint64_t)seed,
                                                        &res[c], c == COL_GREEDY ? importance : NULL);
        } else {
            int p = c == COL_FLAT ? ST_BASELINE_FLAT : c == COL_BUYHOLD ? ST_BASELINE_BUYHOLD
                    : c == COL_RANDOM ? ST_BASELINE_RANDOM : ST_BASELINE_ORACLE;
            if (!st_baseline_available(p, &s.m)) continue;
            st_baseline pol = {p, (uint64_t)seed};
            rc = st_backtest_run(&s.m, &bt, st_baseline_act, &pol, &res[c]);
        }
        if (rc == ST_OK) cols[c].have = 1, cols[c].m = res[c].metrics;
    }
    const char *ckpt = st_args_str(a, "ckpt", "");
    if (rc == ST_OK && st_args_has(a, "json")) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "checkpoint", ckpt);
        cJSON_AddStringToObject(root, "split", st_split_name(split));
        cJSON_AddNumberToObject(root, "instrument_bars", (double)res[COL_GREEDY].inst_bars);
        cJSON_AddItemToObject(root, "policies", st_metrics_json(cols, N_COLS));
        cJSON_AddItemToObject(root, "definitions", st_metrics_definitions_json());
        char *txt = cJSON_Print(root);
        puts(txt);
        cJSON_free(txt);
        cJSON_Delete(root);
    } else if (rc == ST_OK) {
        printf("evaluation of %s on the %s split: %d instruments, %ld instrument-bars\n", ckpt,
               st_split_name(split), res[COL_GREEDY].n_acct, res[COL_GREEDY].inst_bars);
        printf("device: %s\n\n", gpu ? st_cuda_describe() : "cpu");
        st_metrics_print(stdout, cols, N_COLS);
    }
    const char *report = st_args_str(a, "report", NULL);
    if (rc == ST_OK && report) {
        st_eval_report_input in = {ckpt, st_split_name(split), &s.cfg, &s.m, &res[COL_GREEDY],
                                   cols,  N_COLS,               importance, cols[COL_BUYHOLD].have ? &res[COL_BUYHOLD] : NULL};
        rc = st_eval_report(report, &in);
        if (rc == ST_OK && !st_args_has(a, "json")) printf("\nreport: %s\n", report);
    }
    for (int c = 0; c < N_COLS; c++) st_backtest_free(&res[c]);
    free(importance);
    unload(&s);
    return rc;
}

int st_cmd_eval(int argc, char **argv) {
    st_args a;
    int rc = st_args_parse(argc, argv, flags, N_FLAGS, &a);
    if (rc == ST_OK && a.help)
        st_args_usage(stdout, "eval",
                      "Backtests a checkpoint on a split, greedy and sampled, against flat, buy-and-hold, random and\n"
                      "the oracle (where the data has one), and writes the HTML report.",
                      flags, N_FLAGS);
    else if (rc == ST_OK)
        rc = evaluate(&a);
    st_args_free(&a);
    return rc;
}
