/* cmd_smoke.c: `ssmtrade smoke`: N runs (seeds S..S+N-1) with full NaN/Inf
 * scans, a table of the first bad label of each and one summary line
 * (DESIGN section 8; trace/smoke.h). Every training flag applies to all runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/error.h"
#include "trace/smoke.h"
#include "trace/trace.h"

static const st_flag extra_flags[] = {
    ST_DIMS_FLAGS,
    {"runs", "N", "runs (10)"},
    {"steps", "N", "updates per run (10)"},
    {"inject", "L:S:I[:nan|inf]", "write NaN/Inf into label L at step S, flat index I, in every run"},
    {"poison-padding", NULL, "activation rows wider than their width, the gap a tagged NaN"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_EXTRA (int)(sizeof extra_flags / sizeof extra_flags[0])

/* Exit status: a run that could not run, a trip in a plain smoke, or (with
 * --inject) a run whose first label is not the injected one, fail. */
static int verdict(const st_smoke_row *rows, int n, const char *inject) {
    char label[128] = "";
    if (inject) {
        snprintf(label, sizeof label, "%s", inject);
        char *colon = strchr(label, ':');
        if (colon) *colon = 0;
    }
    int errors = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        errors += rows[i].status == ST_SMOKE_ERROR;
        if (inject)
            bad += rows[i].status != ST_SMOKE_TRIPPED || strcmp(rows[i].first, label) != 0;
        else
            bad += rows[i].status == ST_SMOKE_TRIPPED;
    }
    ST_REQUIRE(errors == 0, ST_ERR_INPUT, "%d of %d runs could not run", errors, n);
    if (inject)
        ST_REQUIRE(bad == 0, ST_ERR_NUMERIC, "%d of %d runs did not name the injected label %s first", bad, n, label);
    else
        ST_REQUIRE(bad == 0, ST_ERR_NUMERIC, "%d of %d runs tripped the NaN/Inf tracer", bad, n);
    return ST_OK;
}

static int smoke(const st_args *a, st_train_config *cfg) {
    st_smoke_opts o = {0};
    ST_TRY(st_args_int(a, "runs", 10, &o.runs));
    ST_TRY(st_args_int(a, "steps", 10, &o.steps));
    ST_TRY(st_run_apply_args(a, cfg));
    ST_TRY(st_train_config_validate(cfg));
    st_problems p = {.len = 0}; /* the data and the memory of one run, before any work */
    st_run_check_data(cfg, &p);
    st_run_check_memory(cfg, 0, &p);
    ST_TRY(st_problems_report(&p, "smoke"));
    o.seed0 = cfg->seed;
    o.inject = st_args_str(a, "inject", NULL);
    o.pad = st_args_has(a, "poison-padding") ? ST_TRACE_POISON_PAD : 0;
    ST_REQUIRE(o.runs > 0 && o.steps > 0, ST_ERR_INPUT, "--runs and --steps must be positive");
    st_market m = {0};
    ST_TRY(st_run_market(cfg, &m, 1));
    printf("smoke: preset %s, B=%d T=%d K=%d, %d runs of %d steps, seeds %lld..%lld, full scans%s%s%s\n", cfg->preset,
           cfg->dims.B, cfg->dims.T, cfg->dims.K, o.runs, o.steps, o.seed0, o.seed0 + o.runs - 1,
           o.inject ? ", injection " : "", o.inject ? o.inject : "", o.pad ? ", poisoned padding" : "");
    st_smoke_row *rows = calloc((size_t)o.runs, sizeof *rows);
    int rc = rows ? st_smoke_run(cfg, &m, &o, stdout, rows) : ST_FAIL(ST_ERR_MEMORY, "out of memory");
    if (rc == ST_OK) {
        char line[1024];
        st_smoke_summary(rows, o.runs, line, sizeof line);
        printf("%s\n", line);
        rc = verdict(rows, o.runs, o.inject);
    }
    free(rows);
    st_market_free(&m);
    return rc;
}

int st_cmd_smoke(int argc, char **argv) {
    return st_run_train_command(argc, argv, "smoke",
                                "Trains --runs fresh models (seeds --seed .. --seed + runs - 1) for --steps updates with full "
                                "NaN/Inf scans and names the first non-finite label of each run. Exit status 0 when every run "
                                "is clean (with --inject: when every run names the injected label first), 4 otherwise.",
                                extra_flags, N_EXTRA, smoke);
}
