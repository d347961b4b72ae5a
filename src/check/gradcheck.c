/* gradcheck.c: the numeric side of gradient checks (see gradcheck.h). */
#include "check/gradcheck.h"

#include <math.h>
#include <stdlib.h>

#include "core/philox.h"

st_gc_result st_gc_tensor(st_gc_loss_fn loss, void *ctx, double *x, int rows, int cols, int x_stride,
                          const double *analytic, int a_stride, int max_checks, uint64_t seed) {
    st_gc_result res = {0, 0, 0};
    long total = (long)rows * cols;
    if (total <= 0) return res;
    long n = total <= max_checks ? total : max_checks;
    st_rng rng = st_rng_make(seed, ST_STREAM_TEST);
    double diff2 = 0, num2 = 0;
    for (long i = 0; i < n; i++) {
        long flat = total <= max_checks ? i : (long)(st_rng_uniform(&rng) * (double)total);
        int r = (int)(flat / cols), c = (int)(flat % cols);
        double *p = x + (long)r * x_stride + c;
        double keep = *p;
        double h = ST_GC_STEP * (fabs(keep) > 1 ? fabs(keep) : 1);
        *p = keep + h;
        double lp = loss(ctx);
        *p = keep - h;
        double lm = loss(ctx);
        *p = keep;
        double num = (lp - lm) / (2 * h);
        double ana = analytic[(long)r * a_stride + c];
        diff2 += (num - ana) * (num - ana);
        num2 += num * num;
    }
    res.checked = (int)n;
    res.num_norm = sqrt(num2);
    res.rel_err = res.num_norm < 1e-12 ? sqrt(diff2) : sqrt(diff2) / res.num_norm;
    return res;
}

double st_gc_dot(const double *out, int rows, int cols, int stride, const double *weight) {
    double s = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) s += out[(long)r * stride + c] * weight[(long)r * cols + c];
    return s;
}

void st_gc_randn(double *x, long n, double scale, uint64_t seed, uint32_t salt) {
    st_rng rng = st_rng_make(seed ^ ((uint64_t)salt << 32), ST_STREAM_TEST);
    for (long i = 0; i < n; i++) x[i] = scale * st_rng_normal(&rng);
}

void st_gc_randnf(float *x, long n, float scale, uint64_t seed, uint32_t salt) {
    st_rng rng = st_rng_make(seed ^ ((uint64_t)salt << 32), ST_STREAM_TEST);
    for (long i = 0; i < n; i++) x[i] = (float)(scale * st_rng_normal(&rng));
}
