/* run_setup.c: flags -> training config, config -> market (run_setup.h). */
#include "cli/run_setup.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

int st_run_apply_args(const st_args *a, st_train_config *cfg) {
    const char *preset = st_args_str(a, "preset", NULL);
    if (preset) ST_TRY(st_train_config_set(cfg, "preset", preset));
    for (int i = 0; i < a->n; i++) {
        const char *name = a->name[i];
        if (strcmp(name, "preset") == 0) continue;
        int rc = st_train_config_set(cfg, name, a->value[i]);
        if (rc != ST_OK && !strstr(st_last_error(), "unknown training parameter")) return rc;
    }
    return ST_OK;
}

int st_run_market(const st_train_config *cfg, st_market *m, int verbose) {
    st_data_opts o = st_data_opts_default(cfg->dims.K);
    if (cfg->data && cfg->data[0]) {
        ST_TRY(st_market_load(cfg->data, &o, m));
        if (verbose) printf("data: %s (%d instruments)\n", cfg->data, m->n_inst);
    } else {
        ST_TRY(st_market_synthetic((uint64_t)cfg->market_seed, cfg->instruments, cfg->bars, &o, m));
        if (verbose)
            printf("data: built-in synthetic market, seed %lld, %d instruments x %d bars\n", cfg->market_seed,
                   cfg->instruments, cfg->bars);
    }
    return ST_OK;
}

static const char *const split_names[ST_SPLITS] = {"train", "validation", "test"};

int st_split_parse(const char *name, int *split) {
    for (int k = 0; k < ST_SPLITS; k++)
        if (strcmp(name, split_names[k]) == 0) {
            *split = k;
            return ST_OK;
        }
    return ST_FAIL(ST_ERR_INPUT, "--split '%s': expected train, validation or test", name);
}

const char *st_split_name(int split) { return split >= 0 && split < ST_SPLITS ? split_names[split] : "?"; }
