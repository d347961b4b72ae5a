/* run_setup.h: what train and eval share: applying flags to a training
 * config and building the market a config names. */
#ifndef ST_RUN_SETUP_H
#define ST_RUN_SETUP_H

#include "cli/args.h"
#include "data/dataset.h"
#include "train/train_config.h"

/* Applies every flag of a that names a training parameter or a model size
 * (the preset first) to cfg. */
int st_run_apply_args(const st_args *a, st_train_config *cfg);

/* The market of cfg: its --data, or the synthetic market of --market-seed,
 * --instruments, --bars; features for window K = cfg->dims.K. */
int st_run_market(const st_train_config *cfg, st_market *m, int verbose);

/* The body of a command that trains (train, smoke, dump): its flags are
 * `extra` plus every training parameter (train_config.h); parses them,
 * prints --help, or fills a training config (tiny preset unless the flags
 * say otherwise) and calls run with it. */
int st_run_train_command(int argc, char **argv, const char *cmd, const char *summary, const st_flag *extra,
                         int n_extra, int (*run)(const st_args *a, st_train_config *cfg));

/* "train", "validation", "test" <-> ST_SPLIT_*. */
int st_split_parse(const char *name, int *split);
const char *st_split_name(int split);

#endif
