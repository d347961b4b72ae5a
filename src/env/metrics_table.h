/* metrics_table.h: the metrics of several policies side by side, as a text
 * table (a column per policy, a row per metric with its definition) or as a
 * JSON object; shared by `baseline` and `eval`. */
#ifndef ST_METRICS_TABLE_H
#define ST_METRICS_TABLE_H

#include <stdio.h>

#include "env/metrics.h"

typedef struct {
    const char *name; /* column heading: policy name */
    int have;         /* 0: not available on this data, printed n/a (JSON null) */
    st_metrics m;
} st_metrics_column;

void st_metrics_print(FILE *f, const st_metrics_column *cols, int n);
/* {"<name>": {metric: value...} | null, ...}; a cJSON * the caller adds to a tree. */
void *st_metrics_json(const st_metrics_column *cols, int n);
/* {"<metric>": "<definition>", ...} */
void *st_metrics_definitions_json(void);

#endif
