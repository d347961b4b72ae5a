/* checkpoint.h: training checkpoints as safetensors (DESIGN section 10).
 *
 * Tensors: every parameter under its section-5 name (F32), the AdamW
 * moments as "adam.m.<name>" / "adam.v.<name>", the feature normalisation
 * ("data.norm_mean", "data.norm_std"), and the environments' state
 * ("env.<field>", "env.context") so that a resumed run continues
 * bit-identically. Metadata: format, config (JSON, keys = flag names),
 * update, env_steps, git_revision, created. Written atomically. */
#ifndef ST_CHECKPOINT_H
#define ST_CHECKPOINT_H

#include "core/safetensors.h"
#include "train/trainer.h"

#define ST_CHECKPOINT_FORMAT "ssmtrade-checkpoint-1"

int st_checkpoint_save(const char *path, const st_trainer *t);

/* Reads the config stored in a checkpoint (defaults + its JSON) into cfg,
 * which it overwrites without freeing (pass one that owns no strings); the
 * caller may override fields before st_trainer_init. On failure cfg owns
 * nothing. */
int st_checkpoint_config(const st_safetensors *f, st_train_config *cfg);

/* Restores weights, moments, environment state and counters into a trainer
 * initialised with the checkpoint's config on the same data. */
int st_checkpoint_restore(const st_safetensors *f, st_trainer *t);

/* Weights only (evaluation): w laid out by table. */
int st_checkpoint_weights(const st_safetensors *f, const st_param_table *table, float *w);

#endif
