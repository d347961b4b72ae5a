/* run_setup.h: what train and eval share: applying flags to a training
 * config, checking a run before it starts, and building the market a
 * config names.
 *
 * Validation before work: a command collects every problem of its flags,
 * config file, checkpoint and memory (st_problems), prints them all, one
 * line each, and stops before the market is loaded or anything big is
 * allocated. */
#ifndef ST_RUN_SETUP_H
#define ST_RUN_SETUP_H

#include "cli/args.h"
#include "data/dataset.h"
#include "train/train_config.h"

/* The problems found so far, one line each ("src/file.c:LINE: message",
 * the location optional). Lines past the buffer are counted, not kept. */
typedef struct {
    char text[8192];
    size_t len;
    int n, hidden;
} st_problems;

/* Adds one problem, located at file:line (ST_PROBLEM fills them in). */
void st_problem_at(st_problems *p, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define ST_PROBLEM(p, ...) st_problem_at((p), __FILE__, __LINE__, __VA_ARGS__)
/* Adds the lines of the last error message (st_last_error) when rc is not
 * ST_OK; returns rc. A validator's message may hold several lines. */
int st_problems_take(st_problems *p, int rc);
/* ST_OK when there is none; else prints them to stderr ("ssmtrade CMD:
 * ..." each; with more than one, without locations and with a closing
 * count), clears the last error (so that main prints nothing more) and
 * returns ST_ERR_INPUT. */
int st_problems_report(const st_problems *p, const char *cmd);

/* Applies every flag of a that names a training parameter or a model size
 * (the preset first) to cfg. Every unparsable value is a problem: the
 * message has one line each. */
int st_run_apply_args(const st_args *a, st_train_config *cfg);

/* Problems of the data a config names, found without loading it: --data
 * that does not exist; for the synthetic market, --bars too few for the
 * window and --episode-length longer than the training split. */
void st_run_check_data(const st_train_config *cfg, st_problems *p);
/* After loading: --episode-length against the shortest training split. */
void st_run_check_market(const st_train_config *cfg, const st_market *m, st_problems *p);

/* The host memory a trainer of cfg needs (the CPU trainer: parameters,
 * gradients and AdamW moments, model activations for max(B, T*B/M)
 * windows, window buffer, rollout arrays, market; the GPU trainer's host
 * side: all but the model), against the memory available now
 * (/proc/meminfo MemAvailable, a cgroup limit when lower): a problem that
 * says how much is needed and which flag lowers it when it does not fit in
 * 90% of it. Call with sizes that passed st_train_config_validate. */
void st_run_check_memory(const st_train_config *cfg, int gpu, st_problems *p);

/* The market of cfg: its --data, or the synthetic market of --market-seed,
 * --instruments, --bars; features for window K = cfg->dims.K. */
int st_run_market(const st_train_config *cfg, st_market *m, int verbose);

/* The body of a command that trains (train, smoke, dump): its flags are
 * `extra` plus every training parameter (train_config.h); parses them,
 * prints --help, or fills a training config (tiny preset unless the flags
 * say otherwise) and calls run with it. A failure whose message has
 * several lines (one per problem) is printed here, one line each. */
int st_run_train_command(int argc, char **argv, const char *cmd, const char *summary, const st_flag *extra,
                         int n_extra, int (*run)(const st_args *a, st_train_config *cfg));
/* The same, but run is called even when the flags do not parse (unknown
 * flags, values missing, config file keys): `found` then holds those
 * problems, and run must add its own and report them all
 * (st_problems_report) before doing any work. */
int st_run_train_command_checked(int argc, char **argv, const char *cmd, const char *summary, const st_flag *extra,
                                 int n_extra, int (*run)(const st_args *a, st_train_config *cfg, st_problems *found));

/* "train", "validation", "test" <-> ST_SPLIT_*. */
int st_split_parse(const char *name, int *split);
const char *st_split_name(int split);

#endif
