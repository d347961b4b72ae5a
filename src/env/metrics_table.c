/* metrics_table.c: text and JSON tables of metrics (metrics_table.h). */
#include "env/metrics_table.h"

#include <cjson/cJSON.h>

void st_metrics_print(FILE *f, const st_metrics_column *cols, int n) {
    fprintf(f, "%-14s", "metric");
    for (int p = 0; p < n; p++) fprintf(f, " %12s", cols[p].name);
    fprintf(f, "   %s\n", "definition");
    for (int i = 0; i < ST_METRIC_COUNT; i++) {
        fprintf(f, "%-14s", st_metric_table[i].name);
        for (int p = 0; p < n; p++) {
            char cell[64] = "n/a";
            if (cols[p].have) snprintf(cell, sizeof cell, st_metric_table[i].fmt, st_metric_value(&cols[p].m, i));
            fprintf(f, " %12s", cell);
        }
        fprintf(f, "   %s\n", st_metric_table[i].what);
    }
}

void *st_metrics_json(const st_metrics_column *cols, int n) {
    cJSON *pol = cJSON_CreateObject();
    for (int p = 0; p < n; p++) {
        if (!cols[p].have) {
            cJSON_AddNullToObject(pol, cols[p].name);
            continue;
        }
        cJSON *mo = cJSON_AddObjectToObject(pol, cols[p].name);
        for (int i = 0; i < ST_METRIC_COUNT; i++)
            cJSON_AddNumberToObject(mo, st_metric_table[i].name, st_metric_value(&cols[p].m, i));
    }
    return pol;
}

void *st_metrics_definitions_json(void) {
    cJSON *defs = cJSON_CreateObject();
    for (int i = 0; i < ST_METRIC_COUNT; i++)
        cJSON_AddStringToObject(defs, st_metric_table[i].name, st_metric_table[i].what);
    return defs;
}
