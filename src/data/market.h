/* market.h: bars, features and splits of a dataset, as the environment and
 * the window builder see them (DESIGN sections 3 and 4).
 *
 * One st_instrument per CSV file (or per synthetic instrument). Prices are
 * double; features are float [n, F] with row stride F (already normalised
 * with the training split's statistics and clipped). Fields marked (env) are
 * what src/env reads; src/data owns how they are filled.
 *
 * Features: the 40 of data/features.h (table there), in that order. Bars
 * before `warmup` have all-zero features (they are not fully defined); from
 * `warmup` on, feature j is clip((raw_j - norm_mean[j]) / norm_std[j], -clip,
 * clip), with the statistics pooled over the training split of every
 * instrument (data/splits.h). Splits: train, gap of K bars, validation, gap
 * of K bars, test (to the last bar). */
#ifndef ST_MARKET_H
#define ST_MARKET_H

#include <stdint.h>

enum { ST_SPLIT_TRAIN = 0, ST_SPLIT_VALIDATION = 1, ST_SPLIT_TEST = 2, ST_SPLITS = 3 };

typedef struct {
    char name[64];   /* instrument name: the file stem, or "syn0".. */
    int n;           /* bars */
    int64_t *ts;     /* unix seconds, strictly increasing */
    double *open;    /* (env) */
    double *high;    /* (env) */
    double *low;     /* (env) */
    double *close;   /* (env) */
    double *volume;  /* zeros when the file has no volume column */
    int has_volume;
    double *atr;     /* (env) causal ATR(t) in price units, floored > 0 */
    float *features; /* (env) [n, F], row stride F, normalised and clipped */
    int warmup;      /* first bar whose features are fully defined */
    /* (env) bar ranges [begin, end) of each split; begin >= warmup + K - 1 so
     * that a window of K bars ending at any bar of a split is inside the data. */
    int split_begin[ST_SPLITS];
    int split_end[ST_SPLITS];
    /* (env) synthetic market only, else NULL: the oracle's target position
     * (-1, 0, +1) to hold from the open of bar t+1, decided at the close of t
     * from the planted structure. */
    int8_t *oracle;
    int from_cache;  /* 1 when the bars came from the binary cache (data/cache.h) */
} st_instrument;

typedef struct {
    int n_inst;
    st_instrument *inst;
    int F;             /* snapshot features per bar (40) */
    float *norm_mean;  /* [F] fitted on the training split */
    float *norm_std;   /* [F] floored */
    float clip;        /* features are clipped to [-clip, clip] after normalisation */
    int K;             /* the window length the splits were made for */
    int synthetic;     /* 1 for the built-in synthetic market (oracle set) */
    uint64_t seed;     /* the synthetic market's seed, else 0 */
} st_market;

#endif
