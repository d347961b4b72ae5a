/* train_config.h: every training hyper-parameter, declared once.
 *
 * ST_TRAIN_PARAMS is the one table (kind, field, flag name, default, help)
 * from which the struct, the command-line flags, the JSON config file
 * (keys = flag names) and the config stored in checkpoints are all made.
 * Model sizes (st_dims) travel beside it with their own flags (cli/args.h). */
#ifndef ST_TRAIN_CONFIG_H
#define ST_TRAIN_CONFIG_H

#include <stdint.h>

#include "core/config.h"

/* X(kind, field, flag, default, help); kind: INT, I64, DBL or STR */
#define ST_TRAIN_PARAMS(X)                                                                                      \
    X(INT, updates, "updates", 60, "PPO updates in all (the schedule's horizon)")                              \
    X(INT, stop_after, "stop-after", 0, "stop after this many updates of this invocation (0: run to the end)") \
    X(INT, epochs, "epochs", 2, "PPO epochs per update (E)")                                                   \
    X(INT, minibatches, "minibatches", 4, "minibatches per epoch (M); T*B must divide by M")                   \
    X(INT, segment, "segment", 1,                                                                              \
      "rollout steps of one environment kept together in a minibatch (1: samples shuffled one by one; T: whole "  \
      "environments); T and T*B/M must divide by it")                                                          \
    X(DBL, lr, "lr", 5e-4, "peak learning rate")                                                               \
    X(DBL, lr_min_frac, "lr-min-frac", 0.1, "final learning rate as a fraction of the peak")                   \
    X(INT, warmup, "warmup", 3, "linear warm-up updates")                                                      \
    X(STR, schedule, "schedule", "cosine", "decay after warm-up: cosine, linear or constant")                  \
    X(DBL, beta1, "adam-beta1", 0.9, "AdamW beta1")                                                            \
    X(DBL, beta2, "adam-beta2", 0.999, "AdamW beta2")                                                          \
    X(DBL, adam_eps, "adam-eps", 1e-8, "AdamW epsilon")                                                        \
    X(DBL, weight_decay, "weight-decay", 0.01, "decoupled weight decay (matrices only)")                       \
    X(DBL, max_grad_norm, "max-grad-norm", 0.5, "global gradient-norm clip")                                   \
    X(DBL, gamma, "gamma", 0.9, "discount (the trend edge is per bar: a short horizon cuts return noise)")                                                                   \
    X(DBL, gae_lambda, "gae-lambda", 0.9, "GAE lambda")                                                       \
    X(DBL, clip, "clip", 0.2, "PPO ratio clip")                                                                \
    X(DBL, value_clip, "value-clip", 0.2, "value clip around the rollout's value (0: off)")                    \
    X(DBL, vf_coef, "vf-coef", 0.5, "value loss weight")                                                       \
    X(DBL, ent_coef, "ent-coef", 0.05, "entropy bonus weight (0.01 collapsed to always-flat or always-long)")                                                 \
    X(INT, episode_length, "episode-length", 256, "bars per training episode (H)")                             \
    X(DBL, k_stop, "k-stop", 2.0, "1R = k_stop x ATR")                                                         \
    X(DBL, slippage_bps, "slippage-bps", 1.0, "slippage per fill, bps of price")                               \
    X(DBL, commission_bps, "commission-bps", 1.0, "commission per fill, bps of price")                         \
    X(DBL, risk_fraction, "risk-fraction", 0.01, "money equity risked per trade (reports)")                    \
    X(I64, seed, "seed", 1, "seed of every random stream")                                                     \
    X(STR, precision, "precision", "fp32", "GPU matrix products: fp32, or bf16 (bf16 operands, fp32 accumulation and master weights)") \
    X(INT, checkpoint_every, "checkpoint-every", 10, "updates between checkpoints (0: only at the end)")       \
    X(STR, data, "data", "", "folder or file of OHLCV CSVs (empty: the built-in synthetic market)")            \
    X(INT, instruments, "instruments", 8, "synthetic market: instruments")                                     \
    X(INT, bars, "bars", 12000, "synthetic market: bars per instrument")                                       \
    X(I64, market_seed, "market-seed", 1, "synthetic market: seed")

#define ST_TP_TYPE_INT int
#define ST_TP_TYPE_I64 long long
#define ST_TP_TYPE_DBL double
#define ST_TP_TYPE_STR char *

typedef struct {
#define ST_TP_FIELD(kind, field, flag, def, help) ST_TP_TYPE_##kind field;
    ST_TRAIN_PARAMS(ST_TP_FIELD)
#undef ST_TP_FIELD
    st_dims dims;
    char preset[16];
} st_train_config;

/* Defaults of the table for preset `preset`. Strings are owned (free with
 * st_train_config_free). */
int st_train_config_default(st_train_config *c, const char *preset);
void st_train_config_free(st_train_config *c);
/* Checks values that must hold together (divisibility, ranges). */
int st_train_config_validate(const st_train_config *c);
/* Sets the parameter of flag `flag` from text (numbers parsed, strings
 * copied). ST_ERR_INPUT naming the flag when unknown or unparsable. Model
 * size flags (cli/args.h names) are accepted too. */
int st_train_config_set(st_train_config *c, const char *flag, const char *value);
/* Applies every key of a JSON object (keys = flag names). */
int st_train_config_apply_json(st_train_config *c, const char *json, const char *what);
/* The config as a JSON object text whose keys are flag names (caller frees). */
char *st_train_config_to_json(const st_train_config *c);

/* Flag names of the table, in order, and their help (for the CLI). */
int st_train_param_count(void);
const char *st_train_param_flag(int i);
const char *st_train_param_help(int i);

#endif
