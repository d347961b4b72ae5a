/* dataset.h: building an st_market (market.h) from CSV files or from the
 * built-in synthetic market (DESIGN section 3). */
#ifndef ST_DATASET_H
#define ST_DATASET_H

#include <stdint.h>

#include "data/market.h"

typedef struct {
    int K;              /* window length: splits are separated by K bars */
    double train_frac;  /* share of usable bars in the training split (0.70) */
    double val_frac;    /* share in the validation split (0.15); test gets the rest */
    float clip;         /* feature clip after normalisation (5) */
    int use_cache;      /* read/write the binary cache (1): under $SSMTRADE_CACHE or
                           ~/.cache/ssmtrade, never beside the CSVs (data/cache.h) */
} st_data_opts;

/* The defaults above for window length K. */
st_data_opts st_data_opts_default(int K);

/* Loads every *.csv of dir (or a single .csv file) as one instrument each.
 * Bad input: ST_ERR_INPUT with a message naming file, line and column. */
int st_market_load(const char *path, const st_data_opts *o, st_market *m);

/* The built-in synthetic market, deterministic from seed. */
int st_market_synthetic(uint64_t seed, int n_inst, int n_bars, const st_data_opts *o, st_market *m);

void st_market_free(st_market *m);

/* (Re)computes ATR, features, splits and normalisation from the bars of every
 * instrument of m (allocating atr, features, norm_mean and norm_std when NULL)
 * for the options o; after a bar was edited, call it again (an instrument's
 * bar count must not change between calls: the buffers are reused). Too few
 * bars for the splits: ST_ERR_INPUT saying how many are needed. */
int st_market_prepare(st_market *m, const st_data_opts *o);

/* Allocates the bar arrays of an instrument of n bars (ts, open, high, low,
 * close, volume; zeroed), everything else NULL / 0. */
int st_instrument_alloc(st_instrument *in, int n);
/* Frees every array of one instrument and zeroes it. */
void st_instrument_free(st_instrument *in);

#endif
