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
    int use_cache;      /* read/write the binary cache beside the CSVs (1) */
} st_data_opts;

/* The defaults above for window length K. */
st_data_opts st_data_opts_default(int K);

/* Loads every *.csv of dir (or a single .csv file) as one instrument each.
 * Bad input: ST_ERR_INPUT with a message naming file, line and column. */
int st_market_load(const char *path, const st_data_opts *o, st_market *m);

/* The built-in synthetic market, deterministic from seed. */
int st_market_synthetic(uint64_t seed, int n_inst, int n_bars, const st_data_opts *o, st_market *m);

void st_market_free(st_market *m);

#endif
