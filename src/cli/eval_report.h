/* eval_report.h: assembling the HTML evaluation report from a backtest, the
 * metrics of every policy and the run's training curves. */
#ifndef ST_EVAL_REPORT_H
#define ST_EVAL_REPORT_H

#include "env/backtest.h"
#include "env/metrics_table.h"
#include "train/train_config.h"

typedef struct {
    const char *ckpt, *split;
    const st_train_config *cfg;
    const st_market *m;
    const st_backtest_result *agent; /* the greedy agent's backtest: curves and trades */
    const st_metrics_column *cols;   /* every policy's metrics */
    int n_cols;
    const double *importance;        /* [F] mean VSN selection weight */
    const st_backtest_result *baseline; /* drawn beside the agent's equity (may be NULL) */
} st_eval_report_input;

/* Writes the report to path; training curves come from metrics.jsonl in the
 * checkpoint's folder when it is there. */
int st_eval_report(const char *path, const st_eval_report_input *in);

#endif
