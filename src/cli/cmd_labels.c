/* cmd_labels.c: `ssmtrade labels`: the NaN/Inf tracer's label table of a
 * preset (DESIGN sections 8, 12): number, name, phase, dtype, shape with
 * its coordinate names, row stride. Numbers follow a step's execution order;
 * only shapes depend on the batch sizes. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/error.h"
#include "trace/trace.h"

static const st_flag flags[] = {
    ST_DIMS_FLAGS,
    {"minibatches", "M", "minibatches per epoch (the training forward's batch is T*B/M)"},
    {"poison-padding", NULL, "show the strides of the poisoned-padding layout"},
    {"json", NULL, "print machine-readable JSON"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

static void print_json(const st_label_table *t) {
    cJSON *root = cJSON_CreateArray();
    for (int i = 0; i < t->n; i++) {
        const st_label *l = &t->l[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "name", l->name);
        cJSON_AddStringToObject(o, "phase", st_trace_phase_name(l->phase));
        cJSON_AddStringToObject(o, "dtype", l->f64 ? "f64" : "f32");
        cJSON *sh = cJSON_AddArrayToObject(o, "shape"), *dm = cJSON_AddArrayToObject(o, "dims");
        for (int k = 0; k < l->ndim; k++) {
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)l->shape[k]));
            cJSON_AddItemToArray(dm, cJSON_CreateString(l->dim[k]));
        }
        cJSON_AddNumberToObject(o, "rows", (double)l->rows);
        cJSON_AddNumberToObject(o, "width", (double)l->width);
        cJSON_AddNumberToObject(o, "row_stride", (double)l->stride);
        cJSON_AddItemToArray(root, o);
    }
    char *s = cJSON_Print(root);
    puts(s);
    cJSON_free(s);
    cJSON_Delete(root);
}

static void print_table(const st_label_table *t, const st_train_config *c, int mb) {
    printf("labels of preset %s: %d (B=%d windows per action step, %d per minibatch, K=%d, T=%d, L=%d)\n", c->preset,
           t->n, c->dims.B, mb, c->dims.K, c->dims.T, c->dims.L);
    printf("a step runs them in this order; env and act repeat per rollout step, train..optim per minibatch\n\n");
    printf("%5s  %-34s %-10s %-5s %-18s %-16s %s\n", "#", "name", "phase", "dtype", "shape", "coordinates",
           "row stride");
    for (int i = 0; i < t->n; i++) {
        const st_label *l = &t->l[i];
        char shape[64], dims[64];
        st_label_shape_str(l, shape, sizeof shape);
        st_label_dims_str(l, dims, sizeof dims);
        char stride[24] = "-"; /* a row stride means something for rows of 2+ dimensions */
        if (l->ndim > 1) snprintf(stride, sizeof stride, "%lld", (long long)l->stride);
        printf("%5d  %-34s %-10s %-5s %-18s %-16s %s\n", i, l->name, st_trace_phase_name(l->phase),
               l->f64 ? "f64" : "f32", shape, dims, stride);
    }
    printf("\nphases:\n");
    for (int p = 0; p < ST_PHASE_COUNT; p++)
        printf("  %-10s %s\n", st_trace_phase_name((st_trace_phase)p), st_trace_phase_what((st_trace_phase)p));
}

int st_cmd_labels(int argc, char **argv) {
    st_args a;
    int rc = st_args_parse(argc, argv, flags, N_FLAGS, &a);
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, "labels",
                      "Prints the NaN/Inf tracer's label table: every tensor of a training step, numbered in "
                      "execution order.",
                      flags, N_FLAGS);
        st_args_free(&a);
        return 0;
    }
    st_train_config cfg;
    int have_cfg = 0;
    if (rc == ST_OK) rc = st_train_config_default(&cfg, "default"), have_cfg = 1;
    if (rc == ST_OK) rc = st_run_apply_args(&a, &cfg);
    if (rc == ST_OK) rc = st_train_config_validate(&cfg);
    st_param_table pt = {0};
    st_label_table t = {0};
    if (rc == ST_OK) rc = st_param_table_build(&cfg.dims, &pt);
    int mb = rc == ST_OK ? cfg.dims.T * cfg.dims.B / cfg.minibatches : 0;
    st_label_sizes z = {cfg.dims, mb, st_args_has(&a, "poison-padding") ? ST_TRACE_POISON_PAD : 0};
    if (rc == ST_OK) rc = st_labels_build(&z, &pt, &t);
    if (rc == ST_OK) {
        if (st_args_has(&a, "json"))
            print_json(&t);
        else
            print_table(&t, &cfg, mb);
    }
    st_labels_free(&t);
    st_param_table_free(&pt);
    if (have_cfg) st_train_config_free(&cfg);
    st_args_free(&a);
    return rc;
}
