/* synthetic.c: the built-in synthetic market (model and parameters in
 * synthetic.h).
 *
 * Each bar takes exactly five Philox draws (20 words) in a fixed order, so
 * the market is a pure function of (seed, instrument, bar count): a longer
 * market starts with the bars of a shorter one. */
#include "data/synthetic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/philox.h"
#include "data/dataset.h"

static const double VOL_REGIMES[3] = {0.0025, 0.005, 0.01};
enum { SUB_STEPS = 8 };
static const double MAX_BAR_SCALE = 8.0; /* cap of w: one bar moves at most ~8 sigma of noise */

/* splitmix64's finaliser: spreads (seed, instrument) over the whole key. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double u_open(uint32_t x) { return ((double)x + 1.0) * (1.0 / 4294967296.0); } /* (0, 1] */
static double u_half(uint32_t x) { return (double)x * (1.0 / 4294967296.0); }         /* [0, 1) */

/* Two independent standard normals from two words (Box-Muller). */
static void normal_pair(uint32_t a, uint32_t b, double *z0, double *z1) {
    double r = sqrt(-2.0 * log(u_open(a))), th = 6.283185307179586476925 * u_half(b);
    *z0 = r * cos(th);
    *z1 = r * sin(th);
}

/* Moves a 3-state chain: stays with probability stay, else goes to one of
 * the two other states, chosen by the top bit of `choice`. */
static int chain_step(int state, double stay, uint32_t u, uint32_t choice) {
    if (u_half(u) < stay) return state;
    return (state + 1 + (int)(choice >> 31)) % 3;
}

typedef struct {
    double vol_scale, start_price, volume_scale;
    int q;     /* volatility regime 0..2 */
    int trend; /* trend state index 0..2 = z + 1 */
} syn_state;

static syn_state draw_instrument(st_rng *rng) {
    st_philox4 a = st_rng_next4(rng), b = st_rng_next4(rng);
    syn_state s;
    s.vol_scale = exp(log(0.75) + u_half(a.v[0]) * (log(1.25) - log(0.75)));
    s.start_price = 100.0 * exp(2.0 * u_half(a.v[1]) - 1.0);
    s.volume_scale = exp(log(2e5) + u_half(a.v[2]) * log(10.0));
    s.q = (int)(((uint64_t)a.v[3] * 3) >> 32);
    s.trend = (int)(((uint64_t)b.v[0] * 3) >> 32);
    return s;
}

/* Generates bar t from the previous log close; returns the new log close. */
static double bar(st_rng *rng, syn_state *s, int t, double log_prev, st_instrument *in) {
    st_philox4 d0 = st_rng_next4(rng), d1 = st_rng_next4(rng), d2 = st_rng_next4(rng), d3 = st_rng_next4(rng),
               d4 = st_rng_next4(rng);
    if (t > 0) {
        s->q = chain_step(s->q, ST_SYN_VOL_STAY, d0.v[0], d0.v[1]);
        s->trend = chain_step(s->trend, ST_SYN_TREND_STAY, d0.v[2], d0.v[3]);
    }
    double sigma = s->vol_scale * VOL_REGIMES[s->q], mu = (s->trend - 1) * ST_SYN_DRIFT_FRAC * sigma;
    double chi2 = -2.0 * (log(u_open(d1.v[0])) + log(u_open(d1.v[1])));
    double w = fmin(sqrt(2.0 / chi2), MAX_BAR_SCALE), gap, zv, z[SUB_STEPS], e_hi, e_lo;
    normal_pair(d1.v[2], d1.v[3], &gap, &zv);
    for (int k = 0; k < SUB_STEPS; k += 2) {
        const st_philox4 *d = k < 4 ? &d2 : &d3;
        normal_pair(d->v[k % 4], d->v[k % 4 + 1], &z[k], &z[k + 1]);
    }
    normal_pair(d4.v[0], d4.v[1], &e_hi, &e_lo);
    double step = sigma * w / sqrt((double)SUB_STEPS);
    double p0 = t > 0 ? log_prev + 0.1 * sigma * gap : log(s->start_price), p = p0, pmax = p0, pmin = p0;
    for (int k = 0; k < SUB_STEPS; k++) {
        p += mu / SUB_STEPS + step * z[k];
        pmax = fmax(pmax, p);
        pmin = fmin(pmin, p);
    }
    double o = exp(p0), c = exp(p);
    in->ts[t] = (int64_t)ST_SYN_EPOCH + (int64_t)t * ST_SYN_BAR_SECONDS;
    in->open[t] = o;
    in->close[t] = c;
    in->high[t] = fmax(exp(pmax + 0.3 * step * fabs(e_hi)), fmax(o, c));
    in->low[t] = fmin(exp(pmin - 0.3 * step * fabs(e_lo)), fmin(o, c));
    double activity = 0.4 + 0.6 * fabs(p - p0 - mu) / sigma;
    in->volume[t] = floor(s->volume_scale * sqrt(VOL_REGIMES[s->q] / VOL_REGIMES[1]) * activity * exp(0.3 * zv) + 0.5);
    in->oracle[t] = (int8_t)(s->trend - 1);
    return p;
}

int st_synthetic_instrument(uint64_t seed, int i, int n_bars, st_instrument *in) {
    ST_REQUIRE(n_bars > 0 && i >= 0, ST_ERR_INPUT, "synthetic instrument %d of %d bars", i, n_bars);
    ST_TRY(st_instrument_alloc(in, n_bars));
    in->oracle = malloc(sizeof(int8_t) * (size_t)n_bars);
    if (!in->oracle) {
        st_instrument_free(in);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for a synthetic instrument of %d bars", n_bars);
    }
    st_rng rng = st_rng_make(mix64(seed + 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)), ST_STREAM_MARKET);
    syn_state s = draw_instrument(&rng);
    double log_close = 0;
    for (int t = 0; t < n_bars; t++)
        log_close = bar(&rng, &s, t, log_close, in);
    in->n = n_bars;
    in->has_volume = 1;
    snprintf(in->name, sizeof in->name, "syn%d", i);
    return ST_OK;
}

void st_synthetic_describe(FILE *f, uint64_t seed, int n_inst, int n_bars) {
    fprintf(f,
            "# ssmtrade synthetic market\n\n"
            "Written by `ssmtrade gen-data --seed %llu --instruments %d --bars %d`; the same\n"
            "command writes the same files. One CSV per instrument (syn0.csv ...), hourly bars\n"
            "around the clock from 2020-01-01T00:00:00Z, prices with 10 significant digits.\n\n",
            (unsigned long long)seed, n_inst, n_bars);
    fprintf(f,
            "## Model (src/data/synthetic.h)\n\n"
            "- volatility regime: Markov chain calm / normal / wild, sigma = s_i x {0.25%%, 0.5%%, 1%%}\n"
            "  per bar, s_i in [0.75, 1.25] per instrument; stays with probability %.3f.\n"
            "- returns: Student-t (4 degrees of freedom) bar shocks, built as 8 intrabar normal\n"
            "  sub-steps sharing one chi-square scale; high / low from the intrabar path.\n"
            "- open = previous close plus a small gap (0.1 sigma).\n"
            "- volume rises with the regime and with the bar's absolute return.\n\n",
            ST_SYN_VOL_STAY);
    fprintf(f,
            "## Planted structure\n\n"
            "A hidden trend state z in {-1, 0, +1} per instrument, a Markov chain that stays\n"
            "with probability %.2f (mean run %.0f bars), adds a drift of z x %.2f x sigma to\n"
            "every bar's log return. It is weak (one bar agrees with the drift's sign about\n"
            "58%% of the time) but persistent, so past returns partly reveal it.\n\n"
            "Oracle: the position to hold from the open of bar t+1 is z_t, the true hidden\n"
            "state at bar t (an upper bound: a causal agent can only estimate it). The\n"
            "oracle is not in the CSVs: the built-in market with the same seed, instruments\n"
            "and bars (st_market_synthetic) has the same bars and carries it.\n",
            ST_SYN_TREND_STAY, 1.0 / (1.0 - ST_SYN_TREND_STAY), ST_SYN_DRIFT_FRAC);
}
