/* splits.c: time splits and training-split normalisation (rules in splits.h). */
#include "data/splits.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

int st_split_fracs_check(double train_frac, double val_frac) {
    double test_frac = 1.0 - train_frac - val_frac;
    ST_REQUIRE(train_frac >= 0.01 && val_frac >= 0.01 && test_frac >= 0.01, ST_ERR_INPUT,
               "split fractions train %g, validation %g, test %g: each must be at least 0.01", train_frac, val_frac,
               test_frac);
    return ST_OK;
}

/* Train, validation and test bars out of R (the small epsilon keeps 0.7 *
 * 100 from flooring to 69). */
static void allocate(int R, double train_frac, double val_frac, int out[ST_SPLITS]) {
    out[0] = (int)floor(R * train_frac + 1e-9);
    out[1] = (int)floor(R * val_frac + 1e-9);
    out[2] = R - out[0] - out[1];
}

static int min_split_total(double train_frac, double val_frac) {
    for (int R = 3 * ST_MIN_SPLIT_BARS;; R++) {
        int s[ST_SPLITS];
        allocate(R, train_frac, val_frac, s);
        if (s[0] >= ST_MIN_SPLIT_BARS && s[1] >= ST_MIN_SPLIT_BARS && s[2] >= ST_MIN_SPLIT_BARS) return R;
    }
}

int st_split_rows_needed(int warmup, int K, double train_frac, double val_frac) {
    return warmup + K - 1 + 2 * K + min_split_total(train_frac, val_frac);
}

int st_splits_make(int n, int warmup, int K, double train_frac, double val_frac, int begin[ST_SPLITS],
                   int end[ST_SPLITS]) {
    if (n < st_split_rows_needed(warmup, K, train_frac, val_frac)) return -1;
    int R = n - (warmup + K - 1) - 2 * K, s[ST_SPLITS];
    allocate(R, train_frac, val_frac, s);
    begin[0] = warmup + K - 1;
    end[0] = begin[0] + s[0];
    begin[1] = end[0] + K;
    end[1] = begin[1] + s[1];
    begin[2] = end[1] + K;
    end[2] = n;
    return 0;
}

void st_norm_fit(const st_market *m, int F, int stride, float *mean, float *std) {
    for (int j = 0; j < F; j++) {
        double s = 0, s2 = 0;
        long count = 0;
        for (int i = 0; i < m->n_inst; i++) {
            const st_instrument *in = &m->inst[i];
            for (int t = in->split_begin[ST_SPLIT_TRAIN]; t < in->split_end[ST_SPLIT_TRAIN]; t++)
                s += in->features[(size_t)t * stride + j];
            count += in->split_end[ST_SPLIT_TRAIN] - in->split_begin[ST_SPLIT_TRAIN];
        }
        double mu = count > 0 ? s / (double)count : 0;
        for (int i = 0; i < m->n_inst; i++) {
            const st_instrument *in = &m->inst[i];
            for (int t = in->split_begin[ST_SPLIT_TRAIN]; t < in->split_end[ST_SPLIT_TRAIN]; t++) {
                double d = in->features[(size_t)t * stride + j] - mu;
                s2 += d * d;
            }
        }
        mean[j] = (float)mu;
        std[j] = (float)fmax(count > 0 ? sqrt(s2 / (double)count) : 0, ST_NORM_STD_FLOOR);
    }
}

void st_norm_apply(st_instrument *in, int F, int stride, const float *mean, const float *std, float clip) {
    for (int t = 0; t < in->n; t++) {
        float *f = in->features + (size_t)t * stride;
        if (t < in->warmup) {
            memset(f, 0, sizeof(float) * (size_t)F);
            continue;
        }
        for (int j = 0; j < F; j++) {
            float z = (f[j] - mean[j]) / std[j];
            f[j] = z > clip ? clip : z < -clip ? -clip : z;
        }
    }
}
