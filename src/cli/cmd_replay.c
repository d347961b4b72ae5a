/* cmd_replay.c: `ssmtrade replay DUMP`: re-runs the step of a NaN/Inf
 * tracer dump from its pre-step checkpoint with full scans (and the dump's
 * injection, if any) and prints the report (DESIGN section 8;
 * trace/guard.h). Exit 0 when the replay names the dump's first label,
 * step and index again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "trace/guard.h"
#include "train/checkpoint.h"

static const st_flag flags[] = {
    {"dump", "DIR", "the dump folder (also accepted as the first argument)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

static int replay(const char *dir) {
    char path[1200];
    snprintf(path, sizeof path, "%s/pre_step.safetensors", dir);
    st_safetensors f;
    ST_TRY(st_safetensors_open(path, &f));
    st_train_config cfg;
    int rc = st_checkpoint_config(&f, &cfg);
    st_safetensors_close(&f);
    if (rc != ST_OK) return rc;
    st_market m = {0};
    rc = st_run_market(&cfg, &m, 1);
    int reproduced = 0;
    if (rc == ST_OK) rc = st_trace_replay(dir, &cfg, &m, stdout, &reproduced);
    if (rc == ST_OK && !reproduced) rc = ST_FAIL(ST_ERR_NUMERIC, "the replay of %s does not reproduce its trip", dir);
    st_market_free(&m);
    st_train_config_free(&cfg);
    return rc;
}

int st_cmd_replay(int argc, char **argv) {
    /* `replay DIR`: the positional folder becomes --dump DIR. */
    char **av = calloc((size_t)argc + 2, sizeof *av);
    if (!av) return ST_FAIL(ST_ERR_MEMORY, "out of memory");
    int ac = 0;
    av[ac++] = argv[0];
    if (argc > 1 && strncmp(argv[1], "--", 2) != 0) {
        av[ac++] = "--dump";
        av[ac++] = argv[1];
        for (int i = 2; i < argc; i++)
            av[ac++] = argv[i];
    } else {
        for (int i = 1; i < argc; i++)
            av[ac++] = argv[i];
    }
    st_args a;
    int rc = st_args_parse(ac, av, flags, N_FLAGS, &a);
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, "replay DUMP",
                      "Replays the step of a NaN/Inf tracer dump (a folder written on a trip) with full scans and "
                      "prints the report; exit 0 when it reproduces the dump's first label.",
                      flags, N_FLAGS);
    } else if (rc == ST_OK) {
        const char *dir = st_args_str(&a, "dump", NULL);
        rc = dir ? replay(dir) : ST_FAIL(ST_ERR_INPUT, "which dump? usage: ssmtrade replay DUMP");
    }
    st_args_free(&a);
    free(av);
    return rc;
}
