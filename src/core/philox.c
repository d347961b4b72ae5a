/* philox.c: the out-of-line draws of philox.h. */
#include "core/philox.h"

#include <math.h>

double st_rng_normal(st_rng *r) {
    st_philox4 d = st_rng_next4(r);
    double u1 = (st_u01d(d.v[0], d.v[1]) * 9007199254740992.0 + 1.0) / 9007199254740993.0; /* (0,1) */
    double u2 = st_u01d(d.v[2], d.v[3]);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
