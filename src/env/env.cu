/* env.cu: the B trading environments of env/env.h on the GPU
 * (cuda/env_cuda.h), transition for transition the C reference of env.c.
 *
 * One thread per instance b. The thread loads the instance's state from the
 * structure-of-arrays block into registers (inst_state, one scalar per
 * ST_ENV_ARRAYS entry: adjacent threads read adjacent elements), runs env.c's
 * step in double, and stores the state back. Per step, with t1 = bar + 1:
 *   execution at open[t1] (close, then open the target; 1R = max(k_stop x
 *   ATR(t1 - 1), r_floor_frac x |open|, tiny), stop = entry - side x 1R);
 *   the stop inside bar t1 (gap: filled at the open, else at the stop);
 *   mark at close[t1]; liquidation at close[t1] on the episode's last bar;
 *   equity_R = realized_R + unrealized_R, reward = equity_R - equity_R before;
 *   auto-reset at Philox(seed, ENV_RESET, ((b0 + b) << 32) | episode), the pair found
 *   by a binary search over the block's start_cum, as st_env_draw_start.
 *
 * Bits. Every expression keeps env.c's operands and order of operations,
 * and this file is compiled with --fmad=false (CMakeLists.txt): nvcc would
 * otherwise contract a * b + c into one FMA, which rounds once where the
 * host (gcc -O2, x86-64, no FMA) rounds twice. Double division is IEEE on
 * the device. So the state, the rewards and the trades are the host's bits.
 * The context features pass the same soft clip c + L tanh((x - c) / L), but
 * CUDA's tanh may differ from the host libm's by an ulp of double, which can
 * move the float output by one float ulp (< 1e-6 for |values| <= 6).
 *
 * The per-instance functions are __host__ __device__ so that a host build
 * of this file can be checked against env.c line for line; only the bad
 * action record (atomicMin) is device-only. Nothing here allocates or
 * synchronises inside reset / step / context: they are capturable. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "core/philox.h"
#include "cuda/env_cuda.h"
}

#define ST_ENV_HD static __host__ __device__ __forceinline__

/* What every kernel reads: the state (device arrays of dev), the market's
 * env inputs, and the error word. Passed by value as a kernel parameter. */
typedef struct {
    st_env s; /* cfg, B, Hn, start_total and the device arrays; s.m is a host pointer, never read here */
    int n_inst;
    const double *open, *high, *low, *close, *atr;
    const int64_t *bar0;
    const int *split_begin, *split_end;
    unsigned long long *error;
} env_args;

/* One instance's state in registers. */
typedef struct {
#define ST_ENV_REG(f, type) type f;
    ST_ENV_ARRAYS(ST_ENV_REG)
#undef ST_ENV_REG
} inst_state;

/* The bars of one instrument (index t = bar of the instrument). */
typedef struct {
    const double *open, *high, *low, *close, *atr;
} inst_bars;

ST_ENV_HD inst_state load_state(const env_args &a, int b) {
    inst_state s;
#define ST_ENV_LOAD(f, type) s.f = a.s.f[b];
    ST_ENV_ARRAYS(ST_ENV_LOAD)
#undef ST_ENV_LOAD
    return s;
}

ST_ENV_HD void store_state(const env_args &a, const inst_state &s, int b) {
#define ST_ENV_STORE(f, type) a.s.f[b] = s.f;
    ST_ENV_ARRAYS(ST_ENV_STORE)
#undef ST_ENV_STORE
}

ST_ENV_HD inst_bars bars_of(const env_args &a, int inst) {
    int64_t o = a.bar0[inst];
    inst_bars I = {a.open + o, a.high + o, a.low + o, a.close + o, a.atr + o};
    return I;
}

ST_ENV_HD double floor_tiny(double x) { return x > ST_ENV_TINY ? x : ST_ENV_TINY; }

ST_ENV_HD double cost_frac(const env_args &a) { return (a.s.cfg.slippage_bps + a.s.cfg.commission_bps) * 1e-4; }

/* ---- episodes (env.c: st_env_draw_start, begin_episode) -------------------- */

ST_ENV_HD void draw_start(const env_args &a, int b, uint32_t episode, int *inst, int *bar) {
    uint64_t index = ((uint64_t)(uint32_t)(a.s.b0 + b) << 32) | episode;
    st_philox4 d = st_philox_draw(a.s.cfg.seed, ST_STREAM_ENV_RESET, index);
    int64_t k = (int64_t)(((uint64_t)d.v[0] * (uint64_t)a.s.start_total) >> 32);
    int lo = 0, hi = a.n_inst - 1; /* last instrument whose cumulative start <= k */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (a.s.start_cum[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    *inst = lo;
    *bar = a.split_begin[lo] + (int)(k - a.s.start_cum[lo]);
}

ST_ENV_HD void begin_episode(const env_args &a, inst_state &s, int inst, int bar) {
    int last = a.split_end[inst] - 1;
    if (a.s.cfg.H > 0 && bar + a.s.cfg.H < last) last = bar + a.s.cfg.H;
    s.inst = inst;
    s.bar = bar;
    s.ep_start = bar;
    s.ep_last = last;
    s.ep_step = 0;
    s.active = 1;
    s.pos = 0;
    s.entry_bar = bar;
    s.prev_target = 0;
    s.entry = s.r_unit = s.stop = s.entry_cost_R = 0;
    s.atr_entry = 1;
    s.mfe = s.mae = s.money_risk = 0;
    s.trades = 0;
    s.last_exit_bar = bar;
    s.realized_R = s.equity_R = s.peak_R = s.prev_reward = 0;
    s.cash = s.equity_money = 1;
}

/* ---- trades (env.c: open_trade, close_trade, check_stop, mark) ------------- */

/* Where a step's closed trades go: slots [2b, 2b + 2) of out (may be NULL). */
typedef struct {
    st_trade *slot;
    int n;
} trade_slots;

ST_ENV_HD void open_trade(const env_args &a, inst_state &s, const inst_bars &I, int side, int t1) {
    double px = I.open[t1], atr = I.atr[t1 - 1];
    double r = a.s.cfg.k_stop * atr;
    if (r < a.s.cfg.r_floor_frac * fabs(px)) r = a.s.cfg.r_floor_frac * fabs(px);
    r = floor_tiny(r);
    s.pos = side;
    s.entry = px;
    s.r_unit = r;
    s.stop = px - side * r;
    s.atr_entry = floor_tiny(atr);
    s.entry_cost_R = cost_frac(a) * fabs(px) / r;
    s.entry_bar = t1;
    s.mfe = s.mae = 0;
    s.money_risk = a.s.cfg.risk_fraction * s.cash;
    s.trades++;
}

ST_ENV_HD void close_trade(const env_args &a, inst_state &s, int b, double px, int t1, int reason, trade_slots *log) {
    int side = s.pos;
    double r = s.r_unit;
    double move = (px - s.entry) * side / r;
    double cost = s.entry_cost_R + cost_frac(a) * fabs(px) / r;
    double R = move - cost;
    if (reason != ST_EXIT_END) { /* the end exit already counted the bar's range at the mark */
        if (move > s.mfe) s.mfe = move;
        if (move < s.mae) s.mae = move;
    }
    s.realized_R += R;
    s.cash += R * s.money_risk;
    if (log->slot) {
        st_trade *tr = &log->slot[log->n];
        tr->env = b;
        tr->inst = s.inst;
        tr->side = side;
        tr->entry_bar = s.entry_bar;
        tr->exit_bar = t1;
        tr->exit_reason = reason;
        tr->bars = t1 - s.entry_bar + (reason == ST_EXIT_SIGNAL || reason == ST_EXIT_GAP ? 0 : 1);
        tr->entry = s.entry;
        tr->exit = px;
        tr->stop = s.stop;
        tr->r_unit = r;
        tr->cost_R = cost;
        tr->R = R;
        tr->mfe = s.mfe;
        tr->mae = s.mae;
        tr->money_pnl = R * s.money_risk;
    }
    log->n++;
    s.pos = 0;
    s.entry_cost_R = 0;
    s.money_risk = 0;
    s.last_exit_bar = t1;
}

ST_ENV_HD void check_stop(const env_args &a, inst_state &s, const inst_bars &I, int b, int t1, trade_slots *log) {
    int side = s.pos;
    double stop = s.stop, o = I.open[t1];
    if (side == 0) return;
    if ((side > 0 && o <= stop) || (side < 0 && o >= stop))
        close_trade(a, s, b, o, t1, ST_EXIT_GAP, log);
    else if ((side > 0 && I.low[t1] <= stop) || (side < 0 && I.high[t1] >= stop))
        close_trade(a, s, b, stop, t1, ST_EXIT_STOP, log);
}

ST_ENV_HD double mark(inst_state &s, const inst_bars &I, int t1) {
    int side = s.pos;
    if (side == 0) return 0;
    double r = s.r_unit, en = s.entry;
    double fav = side > 0 ? (I.high[t1] - en) / r : (en - I.low[t1]) / r;
    double adv = side > 0 ? (I.low[t1] - en) / r : (en - I.high[t1]) / r;
    if (fav > s.mfe) s.mfe = fav;
    if (adv < s.mae) s.mae = adv;
    return (I.close[t1] - en) * side / r - s.entry_cost_R;
}

/* ---- context (env.c: st_env_context_raw, st_ctx_clip) ---------------------- */

/* The soft-clipped context row of one instance at its bar. The feature
 * index is a compile-time constant in the unrolled loop, so x[] and the
 * clip constants live in registers. */
ST_ENV_HD void write_context(const env_args &a, const inst_state &s, float *row) {
    const double Ls[ST_CTX_COUNT] = {
#define ST_CTX_L(e, name, L, c, what) L,
        ST_CTX_FEATURES(ST_CTX_L)
#undef ST_CTX_L
    };
    const double Cs[ST_CTX_COUNT] = {
#define ST_CTX_C(e, name, L, c, what) c,
        ST_CTX_FEATURES(ST_CTX_C)
#undef ST_CTX_C
    };
    inst_bars I = bars_of(a, s.inst);
    int t = s.bar, side = s.pos;
    double Hn = a.s.Hn, close = I.close[t], atr = floor_tiny(I.atr[t]);
    double x[ST_CTX_COUNT];
    x[ST_CTX_POSITION] = side;
    x[ST_CTX_UNREALIZED_R] = side ? (close - s.entry) * side / s.r_unit - s.entry_cost_R : 0;
    x[ST_CTX_BARS_IN_TRADE] = side ? (t - s.entry_bar + 1) / Hn : 0;
    x[ST_CTX_MFE_R] = side ? s.mfe : 0;
    x[ST_CTX_MAE_R] = side ? s.mae : 0;
    x[ST_CTX_ATR_RATIO] = side ? atr / s.atr_entry : 1;
    x[ST_CTX_REALIZED_R] = s.realized_R;
    x[ST_CTX_DRAWDOWN_R] = s.peak_R - s.equity_R;
    x[ST_CTX_BARS_SINCE_EXIT] = (t - s.last_exit_bar) / Hn;
    x[ST_CTX_TRADES] = s.trades / Hn;
    x[ST_CTX_PROGRESS] = s.ep_step / Hn;
    x[ST_CTX_PREV_SHORT] = s.prev_target == -1;
    x[ST_CTX_PREV_FLAT] = s.prev_target == 0;
    x[ST_CTX_PREV_LONG] = s.prev_target == 1;
    x[ST_CTX_PREV_REWARD] = s.prev_reward;
    x[ST_CTX_DRIFT] = side ? (close - s.entry) * side / atr : 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int j = 0; j < ST_CTX_COUNT; j++) {
        double L = Ls[j], c = Cs[j], v = x[j];
        row[j] = (float)(L <= 0 ? v : c + L * tanh((v - c) / L));
    }
}

/* ---- one instance: reset, step, observations -------------------------------- */

ST_ENV_HD void write_obs(const env_args &a, const inst_state &s, int b, const st_cuda_env_out &o) {
    if (o.ctx) write_context(a, s, o.ctx + (size_t)b * o.ctx_stride);
    if (o.inst) o.inst[b] = s.inst;
    if (o.bar) o.bar[b] = s.bar;
}

ST_ENV_HD void write_step(const st_cuda_env_out &o, int b, float reward, uint8_t done, float ep_R, uint8_t ntrades) {
    if (o.reward) o.reward[b] = reward;
    if (o.done) o.done[b] = done;
    if (o.ep_R) o.ep_R[b] = ep_R;
    if (o.ntrades) o.ntrades[b] = ntrades;
}

/* st_env_reset for instance b. */
ST_ENV_HD void reset_one(const env_args &a, int b, const st_cuda_env_out &o) {
    inst_state s = inst_state();
    int inst, bar;
    s.episode = 0;
    draw_start(a, b, 0, &inst, &bar);
    begin_episode(a, s, inst, bar);
    s.last_ep_R = s.last_ep_money = s.step_reward = 0;
    store_state(a, s, b);
    write_step(o, b, 0, 0, 0, 0);
    write_obs(a, s, b, o);
}

/* st_env_step's body (step_one and the auto-reset) for instance b under a
 * valid action (0, 1, 2). */
ST_ENV_HD void step_one(const env_args &a, int b, int action, const st_cuda_env_out &o) {
    inst_state s = load_state(a, b);
    if (!s.active) {
        a.s.step_reward[b] = 0;
        write_step(o, b, 0, 1, 0, 0);
        return;
    }
    trade_slots log = {o.trades ? o.trades + 2 * (size_t)b : NULL, 0};
    int target = action - 1;
    inst_bars I = bars_of(a, s.inst);
    int t1 = s.bar + 1;
    double before = s.equity_R;
    if (target != s.pos) {
        if (s.pos != 0) close_trade(a, s, b, I.open[t1], t1, ST_EXIT_SIGNAL, &log);
        if (target != 0) open_trade(a, s, I, target, t1);
    }
    check_stop(a, s, I, b, t1, &log);
    double unreal = mark(s, I, t1);
    s.bar = t1;
    s.ep_step++;
    int fin = t1 >= s.ep_last;
    if (fin && s.pos != 0) {
        close_trade(a, s, b, I.close[t1], t1, ST_EXIT_END, &log);
        unreal = 0;
    }
    s.equity_R = s.realized_R + unreal;
    if (s.equity_R > s.peak_R) s.peak_R = s.equity_R;
    s.equity_money = s.cash + unreal * s.money_risk;
    double reward = s.equity_R - before;
    s.prev_target = target;
    s.prev_reward = reward;
    s.step_reward = reward;
    float ep_R = 0;
    if (fin) {
        s.last_ep_R = s.equity_R;
        s.last_ep_money = s.equity_money;
        ep_R = (float)s.last_ep_R;
        if (a.s.cfg.auto_reset) {
            int inst, bar;
            s.episode++;
            draw_start(a, b, s.episode, &inst, &bar);
            begin_episode(a, s, inst, bar);
        } else {
            s.active = 0;
        }
    }
    store_state(a, s, b);
    write_step(o, b, (float)reward, (uint8_t)fin, ep_R, (uint8_t)log.n);
    write_obs(a, s, b, o);
}

/* ---- kernels --------------------------------------------------------------- */

enum { ENV_THREADS = 256 };

static __global__ void reset_kernel(const __grid_constant__ env_args a, const __grid_constant__ st_cuda_env_out o) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < a.s.B) reset_one(a, b, o);
}

static __global__ void step_kernel(const __grid_constant__ env_args a, const int *actions,
                                   const __grid_constant__ st_cuda_env_out o) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= a.s.B) return;
    int action = actions[b];
    if (action >= 0 && action <= 2) {
        step_one(a, b, action, o);
        return;
    }
    /* a bad action: record it, leave the state alone, report "nothing happened" */
    atomicMin(a.error, ((unsigned long long)(uint32_t)b << 32) | (unsigned long long)(uint32_t)action);
    write_step(o, b, 0, 0, 0, 0);
    write_obs(a, load_state(a, b), b, o);
}

static __global__ void context_kernel(const __grid_constant__ env_args a, float *ctx, int ctx_stride) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < a.s.B) write_context(a, load_state(a, b), ctx + (size_t)b * ctx_stride);
}

/* ---- host API ---------------------------------------------------------------- */

static env_args args_of(const st_cuda_env *e) {
    env_args a;
    a.s = e->dev;
    a.n_inst = e->n_inst;
    a.open = e->open, a.high = e->high, a.low = e->low, a.close = e->close, a.atr = e->atr;
    a.bar0 = e->bar0;
    a.split_begin = e->split_begin, a.split_end = e->split_end;
    a.error = e->error;
    return a;
}

static unsigned env_blocks(int B) { return (unsigned)((B + ENV_THREADS - 1) / ENV_THREADS); }

static int check_out(const st_cuda_env_out *o, const char *what) {
    ST_REQUIRE(!o || !o->ctx || o->ctx_stride >= ST_CTX_COUNT, ST_ERR_INPUT,
               "environment %s: context stride %d below the %d features", what, o->ctx_stride, ST_CTX_COUNT);
    return ST_OK;
}

extern "C" void st_cuda_env_free(st_cuda_env *e) {
    cudaFree(e->dev.block);
    cudaFree(e->open), cudaFree(e->high), cudaFree(e->low), cudaFree(e->close), cudaFree(e->atr);
    cudaFree(e->bar0), cudaFree(e->split_begin), cudaFree(e->split_end), cudaFree(e->error);
    memset(e, 0, sizeof *e);
}

template <typename T> static cudaError_t dev_alloc(T **p, size_t n) {
    return cudaMalloc((void **)p, sizeof(T) * (n ? n : 1));
}

/* The device side of create: host is a fresh host environment of the same
 * market, B and config, whose zeroed block (start_cum filled) seeds the device's. */
static int create_device(st_cuda_env *e, const st_market *m, const st_env *host) {
    int n = m->n_inst, split = host->cfg.split;
    e->block_bytes = st_env_layout(&e->dev, NULL, n);
    ST_CUDA_TRY(cudaMalloc(&e->dev.block, e->block_bytes));
    st_env_layout(&e->dev, e->dev.block, n); /* cudaMalloc is 256-byte aligned */
    ST_CUDA_TRY(cudaMemcpy(e->dev.block, host->base, e->block_bytes, cudaMemcpyHostToDevice));

    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += m->inst[i].n;
    ST_CUDA_TRY(dev_alloc(&e->open, (size_t)total));
    ST_CUDA_TRY(dev_alloc(&e->high, (size_t)total));
    ST_CUDA_TRY(dev_alloc(&e->low, (size_t)total));
    ST_CUDA_TRY(dev_alloc(&e->close, (size_t)total));
    ST_CUDA_TRY(dev_alloc(&e->atr, (size_t)total));
    ST_CUDA_TRY(dev_alloc(&e->bar0, (size_t)n));
    ST_CUDA_TRY(dev_alloc(&e->split_begin, (size_t)n));
    ST_CUDA_TRY(dev_alloc(&e->split_end, (size_t)n));
    ST_CUDA_TRY(dev_alloc(&e->error, 1));
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const st_instrument *I = &m->inst[i];
        size_t bytes = sizeof(double) * (size_t)I->n;
        ST_CUDA_TRY(cudaMemcpy(e->open + at, I->open, bytes, cudaMemcpyHostToDevice));
        ST_CUDA_TRY(cudaMemcpy(e->high + at, I->high, bytes, cudaMemcpyHostToDevice));
        ST_CUDA_TRY(cudaMemcpy(e->low + at, I->low, bytes, cudaMemcpyHostToDevice));
        ST_CUDA_TRY(cudaMemcpy(e->close + at, I->close, bytes, cudaMemcpyHostToDevice));
        ST_CUDA_TRY(cudaMemcpy(e->atr + at, I->atr, bytes, cudaMemcpyHostToDevice));
        int64_t b0 = at;
        int sb = I->split_begin[split], se = I->split_end[split];
        ST_CUDA_TRY(cudaMemcpy(e->bar0 + i, &b0, sizeof b0, cudaMemcpyHostToDevice));
        ST_CUDA_TRY(cudaMemcpy(e->split_begin + i, &sb, sizeof sb, cudaMemcpyHostToDevice));
        ST_CUDA_TRY(cudaMemcpy(e->split_end + i, &se, sizeof se, cudaMemcpyHostToDevice));
        at += I->n;
    }
    unsigned long long none = ST_CUDA_ENV_NO_ERROR;
    ST_CUDA_TRY(cudaMemcpy(e->error, &none, sizeof none, cudaMemcpyHostToDevice));
    ST_CUDA_TRY(cudaDeviceSynchronize());
    return ST_OK;
}

extern "C" int st_cuda_env_create(st_cuda_env *e, const st_market *m, int B, const st_env_config *cfg) {
    memset(e, 0, sizeof *e);
    st_env host;
    ST_TRY(st_env_create(&host, m, B, cfg)); /* the host's checks and messages */
    e->dev = host;
    e->dev.block = NULL; /* the host pointers are replaced by create_device's layout */
    e->dev.base = NULL;
    e->n_inst = m->n_inst;
    int rc = create_device(e, m, &host);
    st_env_free(&host);
    if (rc != ST_OK) st_cuda_env_free(e);
    return rc;
}

extern "C" int st_cuda_env_reset(st_cuda_env *e, const st_cuda_env_out *out, void *stream) {
    ST_TRY(check_out(out, "reset"));
    st_cuda_env_out o;
    if (out)
        o = *out;
    else
        memset(&o, 0, sizeof o);
    reset_kernel<<<env_blocks(e->dev.B), ENV_THREADS, 0, (cudaStream_t)stream>>>(args_of(e), o);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_env_step(st_cuda_env *e, const int *actions, const st_cuda_env_out *out, void *stream) {
    ST_REQUIRE(actions, ST_ERR_INPUT, "environment step: no actions");
    ST_TRY(check_out(out, "step"));
    st_cuda_env_out o;
    if (out)
        o = *out;
    else
        memset(&o, 0, sizeof o);
    step_kernel<<<env_blocks(e->dev.B), ENV_THREADS, 0, (cudaStream_t)stream>>>(args_of(e), actions, o);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_env_context(const st_cuda_env *e, float *ctx, int ctx_stride, void *stream) {
    ST_REQUIRE(ctx, ST_ERR_INPUT, "environment context: no output buffer");
    ST_REQUIRE(ctx_stride >= ST_CTX_COUNT, ST_ERR_INPUT, "environment context: context stride %d below the %d features",
               ctx_stride, ST_CTX_COUNT);
    context_kernel<<<env_blocks(e->dev.B), ENV_THREADS, 0, (cudaStream_t)stream>>>(args_of(e), ctx, ctx_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static int same_config(const st_env_config *x, const st_env_config *y) {
    return x->H == y->H && x->H_norm == y->H_norm && x->k_stop == y->k_stop && x->r_floor_frac == y->r_floor_frac &&
           x->slippage_bps == y->slippage_bps && x->commission_bps == y->commission_bps &&
           x->risk_fraction == y->risk_fraction && x->split == y->split && x->seed == y->seed &&
           x->auto_reset == y->auto_reset;
}

/* host and e describe the same environment, so their blocks have one layout. */
static int check_same(const st_cuda_env *e, const st_env *host, const char *what) {
    ST_REQUIRE(host && host->base && host->m, ST_ERR_INPUT, "environment %s: the host environment was not created",
               what);
    st_env sized = *host;
    size_t bytes = st_env_layout(&sized, NULL, host->m->n_inst);
    ST_REQUIRE(host->B == e->dev.B && host->m->n_inst == e->n_inst && host->Hn == e->dev.Hn &&
                   host->start_total == e->dev.start_total && bytes == e->block_bytes &&
                   same_config(&host->cfg, &e->dev.cfg),
               ST_ERR_INPUT,
               "environment %s: the host environment (B = %d, %d instruments, %lld starts) differs from the GPU's "
               "(B = %d, %d instruments, %lld starts) or has another config",
               what, host->B, host->m->n_inst, (long long)host->start_total, e->dev.B, e->n_inst,
               (long long)e->dev.start_total);
    return ST_OK;
}

extern "C" int st_cuda_env_upload(st_cuda_env *e, const st_env *host) {
    ST_TRY(check_same(e, host, "upload"));
    ST_CUDA_TRY(cudaDeviceSynchronize()); /* no kernel of any stream may still use the old state */
    ST_CUDA_TRY(cudaMemcpy(e->dev.block, host->base, e->block_bytes, cudaMemcpyHostToDevice));
    /* a copy from pageable memory may return before it lands, and the steps run on other streams */
    ST_CUDA_TRY(cudaDeviceSynchronize());
    return ST_OK;
}

extern "C" int st_cuda_env_download(const st_cuda_env *e, st_env *host) {
    ST_TRY(check_same(e, host, "download"));
    ST_CUDA_TRY(cudaDeviceSynchronize()); /* every step of every stream has finished */
    ST_CUDA_TRY(cudaMemcpy(host->base, e->dev.block, e->block_bytes, cudaMemcpyDeviceToHost));
    return ST_OK;
}

extern "C" int st_cuda_env_check(st_cuda_env *e) {
    unsigned long long word = ST_CUDA_ENV_NO_ERROR;
    ST_CUDA_TRY(cudaDeviceSynchronize());
    ST_CUDA_TRY(cudaMemcpy(&word, e->error, sizeof word, cudaMemcpyDeviceToHost));
    if (word == ST_CUDA_ENV_NO_ERROR) return ST_OK;
    unsigned long long none = ST_CUDA_ENV_NO_ERROR;
    ST_CUDA_TRY(cudaMemcpy(e->error, &none, sizeof none, cudaMemcpyHostToDevice));
    int b = (int)(uint32_t)(word >> 32), action = (int)(uint32_t)word;
    return ST_FAIL(ST_ERR_INPUT, "environment: action %d of instance %d is not 0 (short), 1 (flat) or 2 (long)", action,
                   e->dev.b0 + b);
}
