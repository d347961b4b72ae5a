/* args.h: GNU long flags and JSON config files for the subcommands.
 *
 * Each command declares its flags (name, value placeholder or NULL for a
 * switch, help). `--name value` and `--name=value` are accepted; `--config
 * FILE` reads a JSON object whose keys are flag names, and flags given on
 * the command line win over the file (DESIGN section 12). Unknown flags,
 * missing values and unparsable numbers are errors that name the flag. */
#ifndef ST_ARGS_H
#define ST_ARGS_H

#include <stdio.h>

#include "core/config.h"

typedef struct {
    const char *name;  /* without the leading dashes */
    const char *value; /* placeholder shown in help ("N", "FILE"), NULL for a switch */
    const char *help;
} st_flag;

#define ST_ARGS_MAX 96

typedef struct {
    int n;
    const char *name[ST_ARGS_MAX];
    char *value[ST_ARGS_MAX]; /* "1" for switches */
    int help;                 /* --help was given */
} st_args;

/* Parses argv[1..] (argv[0] is the command name). */
int st_args_parse(int argc, char **argv, const st_flag *spec, int n_spec, st_args *a);
void st_args_free(st_args *a);
void st_args_usage(FILE *f, const char *cmd, const char *summary, const st_flag *spec, int n_spec);

const char *st_args_str(const st_args *a, const char *name, const char *def);
int st_args_has(const st_args *a, const char *name);
int st_args_int(const st_args *a, const char *name, int def, int *out);
int st_args_i64(const st_args *a, const char *name, long long def, long long *out);
int st_args_double(const st_args *a, const char *name, double def, double *out);

/* The model-size flags shared by every command that builds a model:
 * --preset and one flag per size of DESIGN section 2. */
#define ST_DIMS_FLAGS                                                                                           \
    {"preset", "NAME", "sizes preset: tiny, default, large (odd: test sizes)"},                                 \
        {"batch", "B", "environments / action batch"}, {"window", "K", "window length in bars"},                \
        {"features", "F", "snapshot features"}, {"context", "C", "context features"},                           \
        {"vsn-hidden", "Dv", "VSN hidden width"}, {"d-model", "D", "model width"},                              \
        {"layers", "L", "Mamba2 layers"}, {"expand", "E", "d_inner = expand * d_model"},                        \
        {"headdim", "P", "SSM head dimension"}, {"d-state", "N", "SSM state size"},                             \
        {"groups", "G", "B/C groups"}, {"conv-width", "W", "causal conv width"},                                \
        {"chunk", "Q", "SSD chunk length"}, {"head-hidden", "Hh", "policy/value head hidden width"},            \
        {"rollout", "T", "rollout length per update"}

/* The preset named by --preset (default_preset when absent) with every size
 * flag applied, validated. */
int st_args_dims(const st_args *a, const char *default_preset, st_dims *d);

#endif
