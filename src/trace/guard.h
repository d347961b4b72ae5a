/* guard.h: the tracer's driver around PPO updates: sentinel checks, the
 * pre-step snapshot, replay of a tripped step with full scans, the trip
 * dump and its offline replay (DESIGN section 8).
 *
 * Modes:
 *   off       st_trainer_update as is (an --inject still fires: a drill of
 *             what happens without the tracer).
 *   sentinel  before each update the state that determines it is copied
 *             (weights, AdamW moments, environment arrays and context,
 *             update and env-step counters; every random draw is keyed by
 *             the update counter, and the minibatch permutation with it, so
 *             nothing else is needed). After it, a few scalars are checked:
 *             losses, gradient norm, rewards, values, and that weights and
 *             moments are finite. On a non-finite one the snapshot is
 *             restored and the same update replayed with full scans, which
 *             names the first label (runs are bit-identical, so the replay
 *             reproduces the trip).
 *   full      every label scanned in every update (snapshot kept as well,
 *             for the dump).
 * On a trip the trainer is left in its pre-step state, the update returns
 * ST_ERR_NUMERIC, st_trace_report prints the report and
 * st_trace_write_dump writes the dump folder:
 *   DIR/pre_step.safetensors  the checkpoint of the pre-step state (train/checkpoint.h)
 *   DIR/trip.safetensors      the first bad label's tensor and its inputs
 *                             (the labels of its phase scanned before it in
 *                             the same pass), named by label; metadata: the
 *                             trip (label, step, index...), injection, padding
 *   DIR/report.txt            the report
 * `ssmtrade replay DIR` (st_trace_replay) re-runs that step from the
 * checkpoint in full mode, with the same injection, and prints the report. */
#ifndef ST_TRACE_GUARD_H
#define ST_TRACE_GUARD_H

#include <stdio.h>

#include "trace/trace.h"
#include "train/trainer.h"

#define ST_TRACE_DUMP_FORMAT "ssmtrade-trace-dump-1"
#define ST_TRACE_STEP_DUMP_FORMAT "ssmtrade-step-dump-1"

typedef struct {
    st_trace *tr;
    st_trainer *t;
    /* the pre-step snapshot */
    float *w, *m, *v, *ctx;
    unsigned char *env; /* the environment's state arrays, back to back */
    size_t env_bytes;
    long update, env_steps;
} st_trace_guard;

/* A tracer for trainer t: labels from its config and parameter table, mode,
 * optional injection spec (NULL: none), attached to t. */
int st_trace_for_trainer(st_trace *tr, st_trainer *t, st_trace_mode mode, const char *inject);

int st_trace_guard_init(st_trace_guard *g, st_trace *tr, st_trainer *t);
void st_trace_guard_free(st_trace_guard *g);
/* One update under the tracer's mode. ST_ERR_NUMERIC on a trip (tr->tripped,
 * the trainer back at its pre-step state); other errors as the trainer's. */
int st_trace_guard_update(st_trace_guard *g, st_update_stats *s);

/* The state copy on its own (tests compare replays with it). */
void st_trace_snapshot_take(st_trace_guard *g);
void st_trace_snapshot_restore(st_trace_guard *g);

/* Writes the dump folder of the last trip (see above). */
int st_trace_write_dump(st_trace_guard *g, const char *dir);

/* What a dump recorded. */
typedef struct {
    char first_label[64];
    long long step, index;
    char inject[128]; /* "" when none */
    int pad;
    char mode[16];
} st_trace_dump_info;

int st_trace_dump_read(const char *dir, st_trace_dump_info *info);
/* Replays the step of dump DIR: cfg and m are the checkpoint's config and
 * market (the caller builds the market from cfg). Prints the report to out
 * and whether it reproduces the dump's first label, step and index. */
int st_trace_replay(const char *dir, const st_train_config *cfg, const st_market *m, FILE *out, int *reproduced);

/* `ssmtrade dump`: one update of trainer t with full scans, every label's
 * first occurrence (act: rollout step 0; train...optim: epoch 0 minibatch 0)
 * written to path as safetensors, named by label. */
int st_trace_dump_step(st_trainer *t, const char *path, int *n_tensors);

#endif
