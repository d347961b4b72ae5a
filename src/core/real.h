/* real.h: the floating-point type of dual-precision sources.
 *
 * Every op of the model is written once against `real` and compiled twice:
 * as float for training (ST_REAL_BITS=32, symbols end in _f32) and as double
 * for gradient checks (ST_REAL_BITS=64, symbols end in _f64). A header
 * declares each function under its plain name and maps it with
 *     #define st_linear_forward ST_R(st_linear_forward)
 * so callers write the plain name and get the precision of their own
 * translation unit. A translation unit uses one precision; it defaults to
 * float when the build does not say. The build (CMakeLists.txt) compiles a
 * .c file twice exactly when it includes this header directly. */
#ifndef ST_REAL_H
#define ST_REAL_H

#include <stddef.h> /* size_t, used by every op */

#ifndef ST_REAL_BITS
#define ST_REAL_BITS 32
#endif

#if ST_REAL_BITS == 64
typedef double real;
#define ST_R(name) name##_f64
#define ST_REAL_NAME "f64"
#elif ST_REAL_BITS == 32
typedef float real;
#define ST_R(name) name##_f32
#define ST_REAL_NAME "f32"
#else
#error "ST_REAL_BITS must be 32 or 64"
#endif

#endif
