/* model_check.h: float64 gradient checks of the ops and of the whole model,
 * as a table (name, relative error, elements), for `ssmtrade gradcheck`
 * and the test suite. Bound: ST_GC_BOUND (1e-6) on every row. */
#ifndef ST_MODEL_CHECK_H
#define ST_MODEL_CHECK_H

#include <stdint.h>

#include "core/config.h"

typedef struct {
    char name[64];
    double rel_err;
    int checked;
} st_gc_row;

typedef struct {
    int n, cap;
    st_gc_row *rows;
} st_gc_table;

void st_gc_table_add(st_gc_table *t, const char *name, double rel_err, int checked);
void st_gc_table_free(st_gc_table *t);
/* Rows whose error exceeds the bound or that checked nothing. */
int st_gc_table_failures(const st_gc_table *t);

/* The whole model (VSN -> w_in -> Mamba2 blocks -> heads) under the PPO loss,
 * n windows of random inputs: one row per parameter tensor ("model/<name>")
 * plus the input window ("model/window"). max_checks elements per tensor. */
int st_gradcheck_model(const st_dims *d, int n, uint64_t seed, int max_checks, st_gc_table *out);

/* Each op alone at the sizes of d: rows "op/<tensor>". */
int st_gradcheck_ops(const st_dims *d, uint64_t seed, int max_checks, st_gc_table *out);

#endif
