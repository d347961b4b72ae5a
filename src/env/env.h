/* env.h: B trading environments stepped together (DESIGN section 4), the C
 * reference that a CUDA kernel must reproduce transition for transition.
 *
 * A plain struct of arrays over B instances (PufferLib style): reset and
 * step act on all instances, the step allocates nothing, and observations
 * (rewards, done flags, the 16 context features) are written into the
 * caller's buffers. Each instance runs an episode on an (instrument, start
 * bar) of one split of an st_market and auto-resets when it ends.
 *
 * Time. Instance b "stands at" bar t = bar[b]: the agent has seen bars <= t
 * (the window ends at t) and chooses a target position at the close of t.
 * st_env_step moves every instance to t+1:
 *   1. execution at open[t+1]: when target != position the position is
 *      closed and the target opened, both at open[t+1] (a flip is two fills
 *      at the same open). A new position gets 1R = max(k_stop * ATR(t),
 *      r_floor_frac * open[t+1], ST_ENV_TINY) in price and a stop at
 *      entry -/+ 1R.
 *   2. the stop inside bar t+1: when the open is already through the stop
 *      (a gap) the position is closed at the open, else when low (long) /
 *      high (short) touches it, at the stop price.
 *   3. mark at close[t+1]. When t+1 is the episode's last bar an open
 *      position is liquidated at close[t+1] (exit costs charged), so every
 *      episode ends flat and its trades are all in the record.
 * After a stop the position is flat; holding the same target re-enters at
 * the next open (the action is a target position, and a stop does not
 * change the target). A buy-and-hold policy is therefore "long with a 1R
 * stop, re-entered the bar after each stop".
 *
 * Costs. Every fill pays slippage_bps (against the trader) plus
 * commission_bps of its reference price (open, stop or close):
 *   cost_R = (slippage_bps + commission_bps) * 1e-4 * (entry + exit) / R_unit
 *   trade R = (exit - entry) * side / R_unit - cost_R
 * with entry/exit the reference prices. The entry half of the cost is
 * charged when the trade opens, the exit half when it closes.
 *
 * Accounting in R (per episode, starting at 0):
 *   unrealised_R = (close - entry) * side / R_unit - entry cost in R
 *   equity_R     = realised_R (sum of closed trades' R) + unrealised_R
 *   reward       = equity_R after the step - equity_R before it
 * so the rewards of an episode sum to its final equity_R (up to rounding).
 * Money (per episode, starting at 1): a trade risks risk_fraction of the
 * money equity at its entry (size = risk_fraction * equity / R_unit), so its
 * money P&L is R * risk_fraction * equity_at_entry;
 *   equity_money = cash + unrealised_R * risk_fraction * cash_at_entry.
 *
 * Episodes. An episode starts at (instrument, s) drawn uniformly over all
 * pairs of the split with s in [split_begin, split_end - 2] (at least one
 * step), and ends after H steps or when bar split_end - 1 is reached
 * (H = 0: only the latter). The draw for episode e of instance b is
 * Philox(seed, ST_STREAM_ENV_RESET, ((uint64)(b0 + b) << 32) | e), word 0
 * scaled to the number of pairs: a pure function of (seed, b0 + b, e), so a
 * GPU kernel reproduces it without sequential state (st_env_draw_start).
 * b0 (0 unless set after create) is the global number of instance 0: the
 * ranks of multi-GPU training each step a slice of the B instances and
 * draw what the one-GPU run draws for them. Every done is
 * a time-limit truncation, never a terminal state of the market.
 *
 * All values are finite for any legal data: every divisor is floored. */
#ifndef ST_ENV_H
#define ST_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "data/market.h"

/* Floor of every divisor (prices, ATR, R unit, equity). */
#define ST_ENV_TINY 1e-12

/* The 16 context features, in their fixed order (DESIGN section 4).
 * X(ENUM, name, L, centre, definition). Before it reaches the model every
 * feature passes its soft clip  c + L tanh((x - c) / L)  (near identity for
 * |x - c| << L, bounded by c +/- L); L = 0 marks the features that are
 * exactly -1, 0 or +1 by construction and pass unchanged. Counts are
 * divided by Hn = H_norm (the training episode length, >= 1); "flat" means
 * position 0, where the trade-relative features are 0 and the ATR ratio 1.
 * t is the current bar, R_unit / entry / ATR(entry) those of the open trade
 * (entry = its fill's reference price, ATR(entry) = ATR of the bar the entry
 * was decided at). Excursions use the highs and lows of the trade's bars up
 * to t, before costs: MFE = max of (high - entry) / R_unit (long) or
 * (entry - low) / R_unit (short), >= 0; MAE = the adverse mirror, <= 0. */
#define ST_CTX_FEATURES(X)                                                                                             \
    X(POSITION, "position", 0, 0, "side of the open position: -1 short, 0 flat, +1 long")                              \
    X(UNREALIZED_R, "unrealized_R", 5, 0, "(close[t] - entry) * side / R_unit - entry cost in R")                      \
    X(BARS_IN_TRADE, "bars_in_trade", 5, 0, "(t - entry_bar + 1) / Hn, entry_bar = bar of the entry fill")             \
    X(MFE_R, "mfe_R", 5, 0, "max favourable excursion of the trade in R (>= 0)")                                       \
    X(MAE_R, "mae_R", 5, 0, "max adverse excursion of the trade in R (<= 0)")                                          \
    X(ATR_RATIO, "atr_ratio", 5, 1, "ATR(t) / ATR(entry); 1 when flat")                                                \
    X(REALIZED_R, "realized_R", 5, 0, "sum of the R of the trades closed this episode")                                \
    X(DRAWDOWN_R, "drawdown_R", 5, 0, "max(0, equity_R at the episode's closes) - equity_R (>= 0)")                    \
    X(BARS_SINCE_EXIT, "bars_since_exit", 5, 0, "(t - bar of the last exit, else of the episode start) / Hn")          \
    X(TRADES, "trades", 5, 0, "trades opened this episode / Hn")                                                       \
    X(PROGRESS, "progress", 5, 0, "steps taken this episode / Hn")                                                     \
    X(PREV_SHORT, "prev_target_short", 0, 0, "1 when the previous target was short (0 at reset)")                      \
    X(PREV_FLAT, "prev_target_flat", 0, 0, "1 when the previous target was flat (1 at reset)")                         \
    X(PREV_LONG, "prev_target_long", 0, 0, "1 when the previous target was long (0 at reset)")                         \
    X(PREV_REWARD, "prev_reward", 5, 0, "reward of the previous step in R (0 at reset)")                               \
    X(DRIFT, "drift", 5, 0, "(close[t] - entry) * side / ATR(t)")

enum {
#define ST_CTX_ENUM(e, name, L, c, what) ST_CTX_##e,
    ST_CTX_FEATURES(ST_CTX_ENUM)
#undef ST_CTX_ENUM
        ST_CTX_COUNT /* C = 16 */
};

typedef struct {
    const char *name;
    double L;      /* soft-clip scale; 0 = exact discrete value, no clip */
    double centre; /* the clip is symmetric around it */
    const char *what;
} st_ctx_info;

extern const st_ctx_info st_ctx_table[ST_CTX_COUNT];

/* The soft clip of context feature j (table above). */
double st_ctx_clip(int j, double x);

typedef struct {
    int H;                 /* episode length in steps (256); 0 = until the split's data ends */
    int H_norm;            /* divisor of the count features; 0 = H (or 256 when H = 0) */
    double k_stop;         /* 1R = k_stop * ATR(t) (2.0) */
    double r_floor_frac;   /* 1R >= r_floor_frac * entry price (1e-3) */
    double slippage_bps;   /* per fill, against the trader (1) */
    double commission_bps; /* per fill (1) */
    double risk_fraction;  /* money equity risked per trade (0.01) */
    int split;             /* ST_SPLIT_TRAIN / VALIDATION / TEST */
    uint64_t seed;         /* reset draws */
    int auto_reset;        /* 1: a finished episode restarts at once; 0: the instance stops (backtests) */
} st_env_config;

st_env_config st_env_config_default(void);

/* How a trade ended. */
enum { ST_EXIT_SIGNAL = 0, ST_EXIT_STOP = 1, ST_EXIT_GAP = 2, ST_EXIT_END = 3 };

/* One closed trade. Prices are reference prices (before costs). */
typedef struct {
    int env, inst;
    int side;        /* -1 short, +1 long */
    int entry_bar;   /* filled at open[entry_bar] */
    int exit_bar;    /* filled inside bar exit_bar (at its open, stop or close) */
    int exit_reason; /* ST_EXIT_* */
    int bars;        /* bars exposed: exit_bar - entry_bar, +1 when the exit is after the open */
    double entry, exit, stop, r_unit;
    double cost_R;    /* slippage + commission of both fills, in R */
    double R;         /* (exit - entry) * side / r_unit - cost_R */
    double mfe, mae;  /* in R, over the bars before the exit bar and the exit itself */
    double money_pnl; /* R * risk_fraction * money equity at entry */
} st_trade;

/* A caller-owned buffer the step appends closed trades to (at most 2 per
 * instance per step: a flip's close and a stop of the new position). */
typedef struct {
    st_trade *trades;
    int cap, n;
    long dropped; /* trades that did not fit */
} st_trade_log;

/* Where a step (or reset) writes its observations; any member may be NULL
 * (and the whole struct may be NULL) when the caller does not want it. */
typedef struct {
    float *reward;     /* [B] reward of the step in R (reset writes 0) */
    uint8_t *done;     /* [B] 1 when the instance's episode ended with this step */
    float *ctx;        /* [B, ST_CTX_COUNT] soft-clipped context at the new bar */
    int ctx_stride;    /* row stride of ctx (>= ST_CTX_COUNT); the gap is never written */
    int *inst, *bar;   /* [B] instrument and bar each instance now stands at (the window's last bar) */
    st_trade_log *log; /* closed trades are appended here */
} st_env_out;

/* The state arrays of st_env, B entries each, in the order st_env_layout
 * carves them: X(field, element type). The one list behind the struct
 * below, its layout, checkpoints (train/checkpoint.c), the tracer's
 * pre-step snapshot (trace/guard.c) and the CUDA twin (env/env.cu). */
// clang-format off
#define ST_ENV_INT_ARRAYS(X)                                                                                           \
    /* episode: current instrument and bar t, first and last bar, steps taken */                                      \
    X(inst, int) X(bar, int) X(ep_start, int) X(ep_last, int) X(ep_step, int)                                          \
    /* open trade: side (-1, 0, +1), bar of the entry fill; the previous target */                                     \
    X(pos, int) X(entry_bar, int) X(prev_target, int)                                                                  \
    /* episode accounting: trades opened, bar of the last exit */                                                      \
    X(trades, int) X(last_exit_bar, int)
#define ST_ENV_DOUBLE_ARRAYS(X)                                                                                        \
    /* open trade */                                                                                                   \
    X(entry, double) X(r_unit, double) X(stop, double) X(atr_entry, double) X(entry_cost_R, double)                    \
    X(mfe, double) X(mae, double) X(money_risk, double)                                                                \
    /* episode accounting */                                                                                           \
    X(realized_R, double) X(equity_R, double) X(peak_R, double) X(prev_reward, double)                                 \
    X(cash, double) X(equity_money, double)                                                                            \
    /* the last step's reward in double (the float output's source; kept across the auto-reset) and the last        \
     * finished episode of each instance */                                                                            \
    X(step_reward, double) X(last_ep_R, double) X(last_ep_money, double)
#define ST_ENV_ARRAYS(X)                                                                                               \
    ST_ENV_INT_ARRAYS(X)                                                                                               \
    ST_ENV_DOUBLE_ARRAYS(X)                                                                                            \
    X(episode, uint32_t) /* episode number of the instance (reset counter) */                                          \
    X(active, uint8_t)   /* 0 once finished when auto_reset = 0 */
// clang-format on

/* The state of B instances, one array entry per instance (ST_ENV_ARRAYS).
 * Read-only for callers. */
typedef struct {
    st_env_config cfg;
    const st_market *m;
    int B;
    int b0; /* global number of instance 0 (its draws and messages); 0 but in a rank's slice */
    int Hn; /* resolved H_norm */
#define ST_ENV_FIELD(f, type) type *f;
    ST_ENV_ARRAYS(ST_ENV_FIELD)
#undef ST_ENV_FIELD
    /* sampling of start pairs: cumulative start counts per instrument [n_inst + 1] */
    int64_t *start_cum;
    int64_t start_total;
    void *block; /* the one allocation behind the arrays */
    void *base;  /* where st_env_layout carved them: block rounded up to 64 bytes */
} st_env;

/* Lays the arrays of e (ST_ENV_ARRAYS, then start_cum of n_inst + 1) out
 * from base, each at a multiple of 64 bytes, sized by e->B; sets every
 * pointer and e->base, and returns the bytes the layout spans. base must be
 * 64-byte aligned; NULL is a sizing pass (the pointers become NULL). The
 * CUDA twin carves its device block with it, so that the whole state moves
 * between host and device as one copy of those bytes from e->base. */
size_t st_env_layout(st_env *e, void *base, int n_inst);

/* Allocates B instances on split cfg->split of m (which must outlive e).
 * ST_ERR_INPUT when the split has no bar with a successor. Call reset next. */
int st_env_create(st_env *e, const st_market *m, int B, const st_env_config *cfg);
void st_env_free(st_env *e);

/* The start of episode `episode` of instance b: a pure function of
 * (seed, b, episode) and the split's layout. */
void st_env_draw_start(const st_env *e, int b, uint32_t episode, int *inst, int *bar);

/* Copies the state of instances [src_b, src_b + n) of src into instances
 * [dst_b, dst_b + n) of dst (both on the same market and config): the
 * slices of multi-GPU training. */
void st_env_copy_instances(st_env *dst, int dst_b, const st_env *src, int src_b, int n);

/* Starts episode 0 of every instance and writes its observations (reward
 * 0, done 0, context, instrument, bar) into out (may be NULL). */
void st_env_reset(st_env *e, const st_env_out *out);

/* Starts a new episode of instance b at a chosen (instrument, bar) instead
 * of a drawn one (backtests walk whole splits with it); writes row b of
 * out. bar must lie in [split_begin, split_end - 2] of the configured
 * split. The instance's episode counter is left as it is. */
int st_env_start_at(st_env *e, int b, int inst, int bar, const st_env_out *out);

/* One step of every instance: actions[B] in {0 short, 1 flat, 2 long}.
 * Writes out (may be NULL): when done[b] the instance has auto-reset and
 * its context, instrument and bar are the new episode's first; a finished
 * instance (auto_reset = 0) writes reward 0, done 1 and keeps its context.
 * ST_ERR_INPUT on an action outside 0..2, before any change. */
int st_env_step(st_env *e, const int *actions, const st_env_out *out);

/* Writes the soft-clipped context row of instance b at its current bar. */
void st_env_context(const st_env *e, int b, float *row);
/* The same features before the clip (tests and reports). */
void st_env_context_raw(const st_env *e, int b, double *row);

#endif
