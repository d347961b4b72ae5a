/* splits.h: train / validation / test splits by time, and the feature
 * normalisation fitted on the training split (DESIGN section 3).
 *
 * Splits of one instrument of n bars, for window length K:
 *   u0 = warmup + K - 1   the first bar whose window of K bars has only fully
 *                         defined features; U = n - u0 usable bars
 *   R  = U - 2K           the bars left once two gaps of K bars are removed
 *   train = floor(R train_frac), validation = floor(R val_frac), test = rest
 *   [u0, u0+train)  gap K  [.., +validation)  gap K  [.., n)
 * Each split needs at least ST_MIN_SPLIT_BARS bars; st_split_rows_needed says
 * how many bars that takes. The gap of K bars means that no window ending in
 * one split contains a bar of the split before it.
 *
 * Normalisation: per feature j, mean_j and std_j over the raw features of the
 * training-split bars of every instrument pooled (double accumulation, two
 * passes, instruments in order), std_j floored at ST_NORM_STD_FLOOR (constant
 * features become 0); then x = clip((raw - mean_j) / std_j, -clip, clip). */
#ifndef ST_SPLITS_H
#define ST_SPLITS_H

#include "data/market.h"

enum { ST_MIN_SPLIT_BARS = 16 };
#define ST_NORM_STD_FLOOR 1e-6

/* Checks 0.01 <= train_frac, val_frac and 1 - train_frac - val_frac. */
int st_split_fracs_check(double train_frac, double val_frac);

/* The fewest bars an instrument needs for three splits of at least
 * ST_MIN_SPLIT_BARS bars. */
int st_split_rows_needed(int warmup, int K, double train_frac, double val_frac);

/* The three splits of n bars (as above) into begin/end; -1 when n is below
 * st_split_rows_needed, else 0. */
int st_splits_make(int n, int warmup, int K, double train_frac, double val_frac, int begin[ST_SPLITS],
                   int end[ST_SPLITS]);

/* Mean and floored std of each of the F raw features (rows of inst->features,
 * row stride `stride`) over the training splits of every instrument. */
void st_norm_fit(const st_market *m, int F, int stride, float *mean, float *std);

/* Normalises and clips the raw features of one instrument in place; rows
 * before its warm-up become zeros. */
void st_norm_apply(st_instrument *in, int F, int stride, const float *mean, const float *std, float clip);

#endif
