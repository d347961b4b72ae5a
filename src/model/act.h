/* act.h: scalar activations and their derivatives, in `real`.
 *
 * sigma(x) = 1/(1+e^-x); SiLU(x) = x sigma(x); softplus(x) = log(1+e^x);
 * ELU(x) = x for x > 0, e^x - 1 otherwise (alpha 1). Written to stay finite
 * for any finite input (no exp of a large positive argument). Include after
 * core/real.h has fixed the precision of the translation unit. */
#ifndef ST_ACT_H
#define ST_ACT_H

#include <math.h>

#include "core/real.h"

#include <stddef.h>

/* The libm functions of the translation unit's precision: the float build
 * must not pay for double exp (it dominated the CPU profile). */
#if ST_REAL_BITS == 64
#define st_rexp exp
#define st_rexpm1 expm1
#define st_rlog1p log1p
#define st_rfabs fabs
#else
#define st_rexp expf
#define st_rexpm1 expm1f
#define st_rlog1p log1pf
#define st_rfabs fabsf
#endif

static inline real st_sigmoid(real x) {
    if (x >= 0) {
        real e = st_rexp(-x);
        return (real)1 / ((real)1 + e);
    }
    real e = st_rexp(x);
    return e / ((real)1 + e);
}
static inline real st_silu(real x) { return x * st_sigmoid(x); }
/* d/dx SiLU = s (1 + x (1 - s)) */
static inline real st_silu_grad(real x) {
    real s = st_sigmoid(x);
    return s * ((real)1 + x * ((real)1 - s));
}
static inline real st_softplus(real x) {
    /* log(1+e^x) = max(x,0) + log1p(e^-|x|) */
    return (x > 0 ? x : (real)0) + st_rlog1p(st_rexp(-st_rfabs(x)));
}
/* d/dx softplus = sigma(x) */
static inline real st_softplus_grad(real x) { return st_sigmoid(x); }
static inline real st_elu(real x) { return x > 0 ? x : st_rexpm1(x); }
static inline real st_elu_grad(real x) { return x > 0 ? (real)1 : st_rexp(x); }

#endif
