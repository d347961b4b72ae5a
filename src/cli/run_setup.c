/* run_setup.c: flags -> training config, config -> market (run_setup.h). */
#include "cli/run_setup.h"

#include <stdio.h>
#include <stdlib.h>
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

int st_run_train_command(int argc, char **argv, const char *cmd, const char *summary, const st_flag *extra,
                         int n_extra, int (*run)(const st_args *a, st_train_config *cfg)) {
    int np = st_train_param_count(), n = n_extra + np;
    st_flag *flags = calloc((size_t)n, sizeof *flags);
    ST_REQUIRE(flags, ST_ERR_MEMORY, "out of memory for the flag table");
    for (int i = 0; i < n_extra; i++) flags[i] = extra[i];
    for (int i = 0; i < np; i++) flags[n_extra + i] = (st_flag){st_train_param_flag(i), "V", st_train_param_help(i)};
    st_args a;
    int rc = st_args_parse(argc, argv, flags, n, &a);
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, cmd, summary, flags, n);
    } else if (rc == ST_OK) {
        st_train_config cfg;
        rc = st_train_config_default(&cfg, "tiny");
        if (rc == ST_OK) rc = run(&a, &cfg);
        st_train_config_free(&cfg);
    }
    st_args_free(&a);
    free(flags);
    return rc;
}
