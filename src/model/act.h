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

static inline real st_sigmoid(real x) {
    if (x >= 0) {
        real e = (real)exp(-(double)x);
        return (real)1 / ((real)1 + e);
    }
    real e = (real)exp((double)x);
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
    double xd = (double)x;
    return (real)((xd > 0 ? xd : 0) + log1p(exp(-fabs(xd))));
}
/* d/dx softplus = sigma(x) */
static inline real st_softplus_grad(real x) { return st_sigmoid(x); }
static inline real st_elu(real x) { return x > 0 ? x : (real)expm1((double)x); }
static inline real st_elu_grad(real x) { return x > 0 ? (real)1 : (real)exp((double)x); }

#endif
