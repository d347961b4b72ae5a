/* env.c: the C reference of the B trading environments of env.h.
 *
 * State is double precision (prices are double in market.h, and R sums
 * over thousands of steps must telescope exactly enough for the reward
 * identity); observations leave as float, the precision of the model's
 * inputs. The step loops over instances in order so that the trade log is
 * in a deterministic order; it allocates nothing. */
#include "env/env.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/philox.h"

const st_ctx_info st_ctx_table[ST_CTX_COUNT] = {
#define ST_CTX_ROW(e, name, L, c, what) {name, L, c, what},
    ST_CTX_FEATURES(ST_CTX_ROW)
#undef ST_CTX_ROW
};

double st_ctx_clip(int j, double x) {
    double L = st_ctx_table[j].L, c = st_ctx_table[j].centre;
    if (L <= 0) return x;
    return c + L * tanh((x - c) / L);
}

st_env_config st_env_config_default(void) {
    st_env_config c;
    memset(&c, 0, sizeof c);
    c.H = 256;
    c.H_norm = 0;
    c.k_stop = 2.0;
    c.r_floor_frac = 1e-3;
    c.slippage_bps = 1.0;
    c.commission_bps = 1.0;
    c.risk_fraction = 0.01;
    c.split = ST_SPLIT_TRAIN;
    c.seed = 1;
    c.auto_reset = 1;
    return c;
}

static double floor_tiny(double x) { return x > ST_ENV_TINY ? x : ST_ENV_TINY; }

/* ---- allocation: every array carved out of one block ---------------------- */

typedef struct {
    char *base;
    size_t used;
} st_carve;

static void *carve(st_carve *c, size_t bytes) {
    void *p = c->base ? c->base + c->used : NULL;
    c->used += (bytes + 63) & ~(size_t)63;
    return p;
}

size_t st_env_layout(st_env *e, void *base, int n_inst) {
    st_carve c = {(char *)base, 0};
    size_t B = (size_t)e->B;
#define ST_ENV_CARVE(f, type) e->f = carve(&c, sizeof(type) * B);
    ST_ENV_ARRAYS(ST_ENV_CARVE)
#undef ST_ENV_CARVE
    e->start_cum = carve(&c, sizeof(int64_t) * ((size_t)n_inst + 1));
    e->base = base;
    return c.used;
}

/* Number of episode starts of instrument i in the split: bars with a successor. */
static int64_t starts_of(const st_instrument *I, int split) {
    int n = I->split_end[split] - 1 - I->split_begin[split];
    return n > 0 ? n : 0;
}

int st_env_create(st_env *e, const st_market *m, int B, const st_env_config *cfg) {
    memset(e, 0, sizeof *e);
    ST_REQUIRE(m && m->n_inst > 0, ST_ERR_INPUT, "environment: the market has no instrument");
    ST_REQUIRE(B > 0, ST_ERR_INPUT, "environment: B = %d instances, need at least 1", B);
    ST_REQUIRE(cfg->split >= 0 && cfg->split < ST_SPLITS, ST_ERR_INPUT, "environment: bad split %d", cfg->split);
    ST_REQUIRE(cfg->H >= 0 && cfg->H_norm >= 0, ST_ERR_INPUT, "environment: negative episode length");
    ST_REQUIRE(cfg->k_stop > 0 && cfg->r_floor_frac >= 0 && cfg->slippage_bps >= 0 && cfg->commission_bps >= 0 &&
                   cfg->risk_fraction > 0 && cfg->risk_fraction < 1,
               ST_ERR_INPUT, "environment: k_stop and risk_fraction must be positive, costs non-negative");
    e->cfg = *cfg;
    e->m = m;
    e->B = B;
    e->Hn = cfg->H_norm > 0 ? cfg->H_norm : (cfg->H > 0 ? cfg->H : 256);
    size_t bytes = st_env_layout(e, NULL, m->n_inst);
    e->block = calloc(1, bytes + 64);
    ST_REQUIRE(e->block, ST_ERR_MEMORY, "environment: cannot allocate %zu bytes for B = %d", bytes, B);
    st_env_layout(e, (void *)(((uintptr_t)e->block + 63) & ~(uintptr_t)63), m->n_inst);
    e->start_cum[0] = 0;
    for (int i = 0; i < m->n_inst; i++) {
        const st_instrument *I = &m->inst[i];
        ST_REQUIRE(I->split_begin[cfg->split] >= 0 && I->split_end[cfg->split] <= I->n, ST_ERR_INPUT,
                   "environment: instrument %s: split %d [%d, %d) outside its %d bars", I->name, cfg->split,
                   I->split_begin[cfg->split], I->split_end[cfg->split], I->n);
        e->start_cum[i + 1] = e->start_cum[i] + starts_of(I, cfg->split);
    }
    e->start_total = e->start_cum[m->n_inst];
    if (e->start_total <= 0 || e->start_total >= ((int64_t)1 << 32)) {
        st_env_free(e);
        return ST_FAIL(ST_ERR_INPUT, "environment: split %d has %lld episode starts (need 1 .. 2^32 - 1)", cfg->split,
                       (long long)e->start_total);
    }
    return ST_OK;
}

void st_env_free(st_env *e) {
    free(e->block);
    memset(e, 0, sizeof *e);
}

void st_env_copy_instances(st_env *dst, int dst_b, const st_env *src, int src_b, int n) {
#define ST_ENV_COPY(f, type) memcpy(dst->f + dst_b, src->f + src_b, sizeof(type) * (size_t)n);
    ST_ENV_ARRAYS(ST_ENV_COPY)
#undef ST_ENV_COPY
}

/* ---- episodes -------------------------------------------------------------- */

void st_env_draw_start(const st_env *e, int b, uint32_t episode, int *inst, int *bar) {
    uint64_t index = ((uint64_t)(uint32_t)(e->b0 + b) << 32) | episode;
    st_philox4 d = st_philox_draw(e->cfg.seed, ST_STREAM_ENV_RESET, index);
    /* multiply-shift: uniform over the pairs with bias < total / 2^32 */
    int64_t k = (int64_t)(((uint64_t)d.v[0] * (uint64_t)e->start_total) >> 32);
    int lo = 0, hi = e->m->n_inst - 1; /* last instrument whose cumulative start <= k */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (e->start_cum[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    *inst = lo;
    *bar = e->m->inst[lo].split_begin[e->cfg.split] + (int)(k - e->start_cum[lo]);
}

/* Clears the trade and episode state of instance b and places it at (inst, bar). */
static void begin_episode(st_env *e, int b, int inst, int bar) {
    const st_instrument *I = &e->m->inst[inst];
    int last = I->split_end[e->cfg.split] - 1;
    if (e->cfg.H > 0 && bar + e->cfg.H < last) last = bar + e->cfg.H;
    e->inst[b] = inst;
    e->bar[b] = bar;
    e->ep_start[b] = bar;
    e->ep_last[b] = last;
    e->ep_step[b] = 0;
    e->active[b] = 1;
    e->pos[b] = 0;
    e->entry_bar[b] = bar;
    e->prev_target[b] = 0;
    e->entry[b] = e->r_unit[b] = e->stop[b] = e->entry_cost_R[b] = 0;
    e->atr_entry[b] = 1;
    e->mfe[b] = e->mae[b] = e->money_risk[b] = 0;
    e->trades[b] = 0;
    e->last_exit_bar[b] = bar;
    e->realized_R[b] = e->equity_R[b] = e->peak_R[b] = e->prev_reward[b] = 0;
    e->cash[b] = e->equity_money[b] = 1;
}

/* Writes the observations of instance b into out (reward and done by the caller). */
static void write_obs(const st_env *e, int b, const st_env_out *out) {
    if (!out) return;
    if (out->ctx) st_env_context(e, b, out->ctx + (size_t)b * out->ctx_stride);
    if (out->inst) out->inst[b] = e->inst[b];
    if (out->bar) out->bar[b] = e->bar[b];
}

static void write_step(const st_env_out *out, int b, float reward, uint8_t done) {
    if (!out) return;
    if (out->reward) out->reward[b] = reward;
    if (out->done) out->done[b] = done;
}

void st_env_reset(st_env *e, const st_env_out *out) {
    for (int b = 0; b < e->B; b++) {
        int inst, bar;
        e->episode[b] = 0;
        st_env_draw_start(e, b, 0, &inst, &bar);
        begin_episode(e, b, inst, bar);
        e->last_ep_R[b] = e->last_ep_money[b] = e->step_reward[b] = 0;
        write_step(out, b, 0, 0);
        write_obs(e, b, out);
    }
}

int st_env_start_at(st_env *e, int b, int inst, int bar, const st_env_out *out) {
    ST_REQUIRE(b >= 0 && b < e->B, ST_ERR_INPUT, "environment: instance %d outside 0..%d", b, e->B - 1);
    ST_REQUIRE(inst >= 0 && inst < e->m->n_inst, ST_ERR_INPUT, "environment: no instrument %d", inst);
    const st_instrument *I = &e->m->inst[inst];
    int s = e->cfg.split;
    ST_REQUIRE(bar >= I->split_begin[s] && bar <= I->split_end[s] - 2, ST_ERR_INPUT,
               "environment: %s: start bar %d outside [%d, %d] of split %d", I->name, bar, I->split_begin[s],
               I->split_end[s] - 2, s);
    begin_episode(e, b, inst, bar);
    e->step_reward[b] = 0;
    write_step(out, b, 0, 0);
    write_obs(e, b, out);
    return ST_OK;
}

/* ---- trades ---------------------------------------------------------------- */

static double cost_frac(const st_env *e) { return (e->cfg.slippage_bps + e->cfg.commission_bps) * 1e-4; }

/* Opens side at open[t1] (t1 = t + 1) with 1R from ATR(t1 - 1). */
static void open_trade(st_env *e, int b, int side, int t1) {
    const st_instrument *I = &e->m->inst[e->inst[b]];
    double px = I->open[t1], atr = I->atr[t1 - 1];
    double r = e->cfg.k_stop * atr;
    if (r < e->cfg.r_floor_frac * fabs(px)) r = e->cfg.r_floor_frac * fabs(px);
    r = floor_tiny(r);
    e->pos[b] = side;
    e->entry[b] = px;
    e->r_unit[b] = r;
    e->stop[b] = px - side * r;
    e->atr_entry[b] = floor_tiny(atr);
    e->entry_cost_R[b] = cost_frac(e) * fabs(px) / r;
    e->entry_bar[b] = t1;
    e->mfe[b] = e->mae[b] = 0;
    e->money_risk[b] = e->cfg.risk_fraction * e->cash[b];
    e->trades[b]++;
}

/* Closes the open trade at price px inside bar t1, books it, logs it. */
static void close_trade(st_env *e, int b, double px, int t1, int reason, st_trade_log *log) {
    int side = e->pos[b];
    double r = e->r_unit[b];
    double move = (px - e->entry[b]) * side / r;
    double cost = e->entry_cost_R[b] + cost_frac(e) * fabs(px) / r;
    double R = move - cost;
    if (reason != ST_EXIT_END) { /* the end exit already counted the bar's range at the mark */
        if (move > e->mfe[b]) e->mfe[b] = move;
        if (move < e->mae[b]) e->mae[b] = move;
    }
    e->realized_R[b] += R;
    e->cash[b] += R * e->money_risk[b];
    if (log) {
        if (log->n < log->cap) {
            st_trade *tr = &log->trades[log->n++];
            tr->env = b;
            tr->inst = e->inst[b];
            tr->side = side;
            tr->entry_bar = e->entry_bar[b];
            tr->exit_bar = t1;
            tr->exit_reason = reason;
            tr->bars = t1 - e->entry_bar[b] + (reason == ST_EXIT_SIGNAL || reason == ST_EXIT_GAP ? 0 : 1);
            tr->entry = e->entry[b];
            tr->exit = px;
            tr->stop = e->stop[b];
            tr->r_unit = r;
            tr->cost_R = cost;
            tr->R = R;
            tr->mfe = e->mfe[b];
            tr->mae = e->mae[b];
            tr->money_pnl = R * e->money_risk[b];
        } else {
            log->dropped++;
        }
    }
    e->pos[b] = 0;
    e->entry_cost_R[b] = 0;
    e->money_risk[b] = 0;
    e->last_exit_bar[b] = t1;
}

/* The stop inside bar t1: at the open when it gapped through, else at the stop. */
static void check_stop(st_env *e, int b, int t1, st_trade_log *log) {
    const st_instrument *I = &e->m->inst[e->inst[b]];
    int side = e->pos[b];
    double stop = e->stop[b], o = I->open[t1];
    if (side == 0) return;
    if ((side > 0 && o <= stop) || (side < 0 && o >= stop))
        close_trade(e, b, o, t1, ST_EXIT_GAP, log);
    else if ((side > 0 && I->low[t1] <= stop) || (side < 0 && I->high[t1] >= stop))
        close_trade(e, b, stop, t1, ST_EXIT_STOP, log);
}

/* Marks the open trade at close[t1]: excursions and unrealised R. */
static double mark(st_env *e, int b, int t1) {
    const st_instrument *I = &e->m->inst[e->inst[b]];
    int side = e->pos[b];
    if (side == 0) return 0;
    double r = e->r_unit[b], en = e->entry[b];
    double fav = side > 0 ? (I->high[t1] - en) / r : (en - I->low[t1]) / r;
    double adv = side > 0 ? (I->low[t1] - en) / r : (en - I->high[t1]) / r;
    if (fav > e->mfe[b]) e->mfe[b] = fav;
    if (adv < e->mae[b]) e->mae[b] = adv;
    return (I->close[t1] - en) * side / r - e->entry_cost_R[b];
}

/* Steps instance b by one bar under target position `target`; returns its reward. */
static double step_one(st_env *e, int b, int target, int *done, st_trade_log *log) {
    int t1 = e->bar[b] + 1;
    double before = e->equity_R[b];
    if (target != e->pos[b]) {
        if (e->pos[b] != 0) close_trade(e, b, e->m->inst[e->inst[b]].open[t1], t1, ST_EXIT_SIGNAL, log);
        if (target != 0) open_trade(e, b, target, t1);
    }
    check_stop(e, b, t1, log);
    double unreal = mark(e, b, t1);
    e->bar[b] = t1;
    e->ep_step[b]++;
    *done = t1 >= e->ep_last[b];
    if (*done && e->pos[b] != 0) {
        close_trade(e, b, e->m->inst[e->inst[b]].close[t1], t1, ST_EXIT_END, log);
        unreal = 0;
    }
    e->equity_R[b] = e->realized_R[b] + unreal;
    if (e->equity_R[b] > e->peak_R[b]) e->peak_R[b] = e->equity_R[b];
    e->equity_money[b] = e->cash[b] + unreal * e->money_risk[b];
    double reward = e->equity_R[b] - before;
    e->prev_target[b] = target;
    e->prev_reward[b] = reward;
    return reward;
}

int st_env_step(st_env *e, const int *actions, const st_env_out *out) {
    for (int b = 0; b < e->B; b++)
        ST_REQUIRE(actions[b] >= 0 && actions[b] <= 2, ST_ERR_INPUT,
                   "environment: action %d of instance %d is not 0 (short), 1 (flat) or 2 (long)", actions[b],
                   e->b0 + b);
    st_trade_log *log = out ? out->log : NULL;
    for (int b = 0; b < e->B; b++) {
        if (!e->active[b]) {
            e->step_reward[b] = 0;
            write_step(out, b, 0, 1);
            continue;
        }
        int fin = 0;
        double r = step_one(e, b, actions[b] - 1, &fin, log);
        e->step_reward[b] = r;
        write_step(out, b, (float)r, (uint8_t)fin);
        if (fin) {
            e->last_ep_R[b] = e->equity_R[b];
            e->last_ep_money[b] = e->equity_money[b];
            if (e->cfg.auto_reset) {
                int inst, bar;
                e->episode[b]++;
                st_env_draw_start(e, b, e->episode[b], &inst, &bar);
                begin_episode(e, b, inst, bar);
            } else {
                e->active[b] = 0;
            }
        }
        write_obs(e, b, out);
    }
    return ST_OK;
}

/* ---- context ------------------------------------------------------------- */

void st_env_context_raw(const st_env *e, int b, double *x) {
    const st_instrument *I = &e->m->inst[e->inst[b]];
    int t = e->bar[b], side = e->pos[b];
    double Hn = e->Hn, close = I->close[t], atr = floor_tiny(I->atr[t]);
    x[ST_CTX_POSITION] = side;
    x[ST_CTX_UNREALIZED_R] = side ? (close - e->entry[b]) * side / e->r_unit[b] - e->entry_cost_R[b] : 0;
    x[ST_CTX_BARS_IN_TRADE] = side ? (t - e->entry_bar[b] + 1) / Hn : 0;
    x[ST_CTX_MFE_R] = side ? e->mfe[b] : 0;
    x[ST_CTX_MAE_R] = side ? e->mae[b] : 0;
    x[ST_CTX_ATR_RATIO] = side ? atr / e->atr_entry[b] : 1;
    x[ST_CTX_REALIZED_R] = e->realized_R[b];
    x[ST_CTX_DRAWDOWN_R] = e->peak_R[b] - e->equity_R[b];
    x[ST_CTX_BARS_SINCE_EXIT] = (t - e->last_exit_bar[b]) / Hn;
    x[ST_CTX_TRADES] = e->trades[b] / Hn;
    x[ST_CTX_PROGRESS] = e->ep_step[b] / Hn;
    x[ST_CTX_PREV_SHORT] = e->prev_target[b] == -1;
    x[ST_CTX_PREV_FLAT] = e->prev_target[b] == 0;
    x[ST_CTX_PREV_LONG] = e->prev_target[b] == 1;
    x[ST_CTX_PREV_REWARD] = e->prev_reward[b];
    x[ST_CTX_DRIFT] = side ? (close - e->entry[b]) * side / atr : 0;
}

void st_env_context(const st_env *e, int b, float *row) {
    double x[ST_CTX_COUNT];
    st_env_context_raw(e, b, x);
    for (int j = 0; j < ST_CTX_COUNT; j++)
        row[j] = (float)st_ctx_clip(j, x[j]);
}
