/* eval_report.c: from backtest results to st_report (report/html.h). */
#include "cli/eval_report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "data/features.h"
#include "report/html.h"

#ifndef ST_GIT_REV
#define ST_GIT_REV "unknown"
#endif

typedef struct {
    int n, cap;
    double *step, *value_loss, *policy_loss, *entropy, *episode_R;
} curves;

static double num(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The run's metrics.jsonl beside the checkpoint (or one folder up, for
 * checkpoints/ckpt_*.safetensors). Missing: no curves. */
static void read_curves(const char *ckpt, curves *c) {
    memset(c, 0, sizeof *c);
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s", ckpt);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(path, sizeof path, "%s/../metrics.jsonl", dir);
        f = fopen(path, "r");
    }
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        if (!o) continue;
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 256;
            double **arrs[] = {&c->step, &c->value_loss, &c->policy_loss, &c->entropy, &c->episode_R};
            for (int i = 0; i < 5; i++) *arrs[i] = realloc(*arrs[i], sizeof(double) * (size_t)c->cap);
        }
        c->step[c->n] = num(o, "update");
        c->value_loss[c->n] = num(o, "value_loss");
        c->policy_loss[c->n] = num(o, "policy_loss");
        c->entropy[c->n] = num(o, "entropy");
        c->episode_R[c->n] = num(o, "mean_episode_R");
        c->n++;
        cJSON_Delete(o);
    }
    fclose(f);
}

static void free_curves(curves *c) {
    free(c->step), free(c->value_loss), free(c->policy_loss), free(c->entropy), free(c->episode_R);
}

int st_eval_report(const char *path, const st_eval_report_input *in) {
    const st_backtest_result *r = in->agent;
    int n = r->n_steps, nm = ST_METRIC_COUNT, nc = in->n_cols;
    double *eqR = calloc((size_t)n + 1, sizeof(double)), *eqM = calloc((size_t)n + 1, sizeof(double));
    double *dd = calloc((size_t)n + 1, sizeof(double)), *base = NULL;
    double *tradeR = calloc((size_t)r->n_trades + 1, sizeof(double)), *vals = calloc((size_t)nm * nc, sizeof(double));
    const char **mnames = calloc((size_t)nm, sizeof(char *)), **mfmts = calloc((size_t)nm, sizeof(char *));
    const char **cnames = calloc((size_t)nc, sizeof(char *)), **fnames = calloc((size_t)in->m->F, sizeof(char *));
    double cum = 0, money = 1, peak = 0;
    for (int k = 0; k < n; k++) {
        cum += r->R_step[k];
        money *= 1 + r->ret[k];
        peak = cum > peak ? cum : peak;
        eqR[k] = cum, eqM[k] = money, dd[k] = peak - cum;
    }
    if (in->baseline && in->baseline->n_steps == n) {
        base = calloc((size_t)n + 1, sizeof(double));
        double b = 0;
        for (int k = 0; k < n; k++) base[k] = b += in->baseline->R_step[k];
    }
    for (int i = 0; i < r->n_trades; i++) tradeR[i] = r->trades[i].R;
    for (int i = 0; i < nm; i++) {
        mnames[i] = st_metric_table[i].name;
        mfmts[i] = st_metric_table[i].fmt;
        for (int c = 0; c < nc; c++)
            vals[(size_t)i * nc + c] = in->cols[c].have ? st_metric_value(&in->cols[c].m, i) : NAN;
    }
    for (int c = 0; c < nc; c++) cnames[c] = in->cols[c].name;
    for (int j = 0; j < in->m->F; j++) fnames[j] = st_feature_name(j);
    curves cv;
    read_curves(in->ckpt, &cv);
    char title[256], subtitle[1024], when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    snprintf(title, sizeof title, "ssmtrade evaluation: %s split", in->split);
    snprintf(subtitle, sizeof subtitle,
             "checkpoint %s; data %s; %d instruments, %ld instrument-bars; preset %s; costs %.1f + %.1f bps per "
             "fill, 1R = %.1f ATR; %s; ssmtrade %s. Curves are the greedy agent's; the portfolio is equal-weight "
             "over instruments at %.1f%% risk per trade.",
             in->ckpt, in->cfg->data && in->cfg->data[0] ? in->cfg->data : "built-in synthetic market", r->n_acct,
             r->inst_bars, in->cfg->preset, in->cfg->slippage_bps, in->cfg->commission_bps, in->cfg->k_stop, when,
             ST_GIT_REV, 100 * in->cfg->risk_fraction);
    st_report rep = {
        .title = title,
        .subtitle = subtitle,
        .n_metrics = nm,
        .n_columns = nc,
        .metric_names = mnames,
        .column_names = cnames,
        .metric_values = vals,
        .metric_formats = mfmts,
        .n_bars = n,
        .equity_R = eqR,
        .equity_money = eqM,
        .drawdown_R = dd,
        .baseline_equity_R = base,
        .baseline_name = "buy-and-hold",
        .n_trades = r->n_trades,
        .trade_R = tradeR,
        .n_features = in->m->F,
        .feature_names = fnames,
        .importance = in->importance,
        .n_updates = cv.n,
        .update_step = cv.step,
        .value_loss = cv.value_loss,
        .policy_loss = cv.policy_loss,
        .entropy = cv.entropy,
        .mean_episode_R = cv.episode_R,
    };
    int rc = st_report_write_html(path, &rep);
    free(eqR), free(eqM), free(dd), free(base), free(tradeR), free(vals);
    free(mnames), free(mfmts), free(cnames), free(fnames);
    free_curves(&cv);
    return rc;
}
