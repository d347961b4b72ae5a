/* gradcheck.h: float64 central-difference gradient checks.
 *
 * A check perturbs elements of one input tensor by +-h, re-evaluates a scalar
 * loss (the caller's forward followed by L = sum(out * R) with fixed random
 * R), and compares (L+ - L-)/2h with the analytic gradient the caller's
 * backward produced for dout = R. The error of a tensor is
 *     norm(numeric - analytic) / norm(numeric)
 * over the checked elements (the absolute norm when norm(numeric) < 1e-12,
 * so a gradient that is really zero must come out zero). Large tensors are
 * checked on a Philox-chosen sample of elements. */
#ifndef ST_GRADCHECK_H
#define ST_GRADCHECK_H

#include <stdint.h>

/* The loss evaluated at the current inputs (runs the forward). */
typedef double (*st_gc_loss_fn)(void *ctx);

/* The default step and the bound the issue sets (relative error). */
#define ST_GC_STEP 1e-5
#define ST_GC_BOUND 1e-6

typedef struct {
    double rel_err;   /* as defined above */
    double num_norm;  /* norm of the numeric gradient over the checked elements */
    int checked;      /* elements checked */
} st_gc_result;

/* Checks tensor x laid out as rows x cols with row stride x_stride against
 * `analytic` (same shape, row stride a_stride). At most max_checks elements
 * (all of them when the tensor is that small), chosen from `seed`. x is
 * restored exactly after each probe. */
st_gc_result st_gc_tensor(st_gc_loss_fn loss, void *ctx, double *x, int rows, int cols, int x_stride,
                          const double *analytic, int a_stride, int max_checks, uint64_t seed);

/* sum_i out[i] * weight[i] over a rows x cols strided tensor: the scalar the
 * checks differentiate; weight is contiguous rows x cols. */
double st_gc_dot(const double *out, int rows, int cols, int stride, const double *weight);

/* Fills a contiguous buffer with N(0, scale^2) draws from a Philox stream
 * keyed by seed (fresh random inputs, never zeros). */
void st_gc_randn(double *x, long n, double scale, uint64_t seed, uint32_t salt);
/* The same for float buffers (tests of the float build). */
void st_gc_randnf(float *x, long n, float scale, uint64_t seed, uint32_t salt);

#endif
