/* main.c: the ssmtrade binary: dispatch to a subcommand, print its error. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/error.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} st_command;

static const st_command commands[] = {
    {"train", st_cmd_train, "train the agent with PPO (built-in synthetic market or --data)"},
    {"eval", st_cmd_eval, "backtest a checkpoint against the baselines, metrics and HTML report"},
    {"info", st_cmd_info, "configuration, parameter table, memory estimate"},
    {"gradcheck", st_cmd_gradcheck, "float64 gradient check of every op and the whole model"},
    {"gen-data", st_cmd_gen_data, "write the built-in synthetic market as CSV files"},
    {"baseline", st_cmd_baseline, "metrics of flat, buy-and-hold, random and oracle policies on a split"},
    {"labels", st_cmd_labels, "the NaN/Inf tracer's label table (every tensor of a training step)"},
    {"smoke", st_cmd_smoke, "many seeds with full NaN/Inf scans, the first bad label of each run"},
    {"replay", st_cmd_replay, "replay the step of a NaN/Inf tracer dump and print its report"},
    {"dump", st_cmd_dump, "every labelled tensor of one training step, as safetensors"},
    {"bench", st_cmd_bench, "GPU benchmarks: ceilings, training and action steps, env steps/s (--json)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: ssmtrade COMMAND [options]   (ssmtrade COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
}

int main(int argc, char **argv) {
    /* The CPU backend parallelises over rows with OpenMP; OpenBLAS threads
     * on top of that oversubscribe the cores (measured: 1.8x slower). */
    openblas_set_num_threads(1);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            int rc = commands[i].run(argc - 1, argv + 1);
            if (rc != 0 && st_last_error()[0]) fprintf(stderr, "ssmtrade %s: %s\n", argv[1], st_last_error());
            return rc;
        }
    }
    fprintf(stderr, "ssmtrade: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
