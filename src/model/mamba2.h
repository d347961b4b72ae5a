/* mamba2.h: one pre-norm residual Mamba2 block (DESIGN section 5) over Bsz
 * windows of K rows (r = b*K + k), forward and backward on the CPU.
 *
 * Sizes from st_dims: D, d_inner = expand*D, P = headdim, H = d_inner/P, N,
 * G, W, Q, K; conv_dim = d_inner + 2GN. Per row:
 *     a = LayerNorm(u; ln_w, ln_b)                        [D]
 *     [z, xBC, dt_raw] = a in_proj_w^T                    [d_inner | conv_dim | H]
 *     xBC = SiLU(causal depthwise conv(xBC; conv_w [conv_dim, W], conv_b))
 *     [x, B, C] = xBC                                     [d_inner | GN | GN]
 *     dt = softplus(dt_raw + dt_bias);  A = -exp(A_log)   [H]
 *     y = SSD(x, dt, A, B, C, Dskip)  (chunked, chunk Q)  [d_inner]
 *     y = RMSNorm(y * SiLU(z)) * norm_w                   [d_inner]
 *     u_out = u + y out_proj_w^T                          [D]
 * eps 1e-5 for both norms; no biases in the projections.
 *
 * The forward keeps what the backward needs in `saved` (named regions, see
 * st_mamba2_saved_layout, for the NaN tracer); `work` is scratch. Backward:
 * du is written (residual path included; du may be the same buffer as
 * du_out with the same stride), parameter gradients are added to. u_out may
 * be u with the same stride (in-place residual) when the caller does not
 * need u for the backward. `saved` and `work` hold st_mamba2_saved_count and
 * st_mamba2_work_count reals; work is not kept between calls. */
#ifndef ST_MAMBA2_H
#define ST_MAMBA2_H

#include <stddef.h>

#include "core/config.h"
#include "core/real.h"

#define st_mamba2_weights ST_R(st_mamba2_weights)
#define st_mamba2_grads ST_R(st_mamba2_grads)
#define st_mamba2_saved_count ST_R(st_mamba2_saved_count)
#define st_mamba2_work_count ST_R(st_mamba2_work_count)
#define st_mamba2_saved_layout ST_R(st_mamba2_saved_layout)
#define st_mamba2_forward ST_R(st_mamba2_forward)
#define st_mamba2_backward ST_R(st_mamba2_backward)

typedef struct {
    const real *ln_w, *ln_b, *in_proj_w, *conv_w, *conv_b, *dt_bias, *A_log, *Dskip, *norm_w, *out_proj_w;
} st_mamba2_weights;
typedef struct {
    real *ln_w, *ln_b, *in_proj_w, *conv_w, *conv_b, *dt_bias, *A_log, *Dskip, *norm_w, *out_proj_w;
} st_mamba2_grads; /* added to */

/* The regions of `saved`, in forward order; names are stable (the tracer
 * labels them). Each is rows x cols with a row stride, at an offset in reals
 * from the start of `saved` (a multiple of 16). */
#define ST_MAMBA2_SAVED_REGIONS(X)                                                                                     \
    X(LN_A, "ln_a")         /* LayerNorm output a        [R, D]          */                                            \
    X(LN_MEAN, "ln_mean")   /* LayerNorm mean            [R, 1]          */                                            \
    X(LN_RSTD, "ln_rstd")   /* LayerNorm 1/std           [R, 1]          */                                            \
    X(IN_PROJ, "in_proj")   /* [z, xBC, dt_raw]          [R, in_proj_out]*/                                            \
    X(CONV, "conv")         /* SiLU(conv(xBC)) = [x,B,C] [R, conv_dim]   */                                            \
    X(DT, "dt")             /* softplus(dt_raw + bias)   [R, H]          */                                            \
    X(SSD_Y, "ssd_y")       /* SSD output y              [R, d_inner]    */                                            \
    X(GATED, "gated")       /* RMSNorm(y SiLU(z)) norm_w [R, d_inner]    */                                            \
    X(RMS_RSTD, "rms_rstd") /* gated RMSNorm 1/rms       [R, 1]          */

enum {
#define ST_MAMBA2_ENUM(id, name) ST_MAMBA2_SAVED_##id,
    ST_MAMBA2_SAVED_REGIONS(ST_MAMBA2_ENUM)
#undef ST_MAMBA2_ENUM
        ST_MAMBA2_SAVED_NREGIONS
};

typedef struct {
    const char *name;
    size_t offset; /* in reals */
    int rows, cols, stride;
} st_mamba2_region;

/* Fills out[0 .. ST_MAMBA2_SAVED_NREGIONS-1]; returns the total reals
 * (= st_mamba2_saved_count). Offsets do not depend on the precision. */
size_t st_mamba2_saved_layout(const st_dims *d, int Bsz, st_mamba2_region *out);

size_t st_mamba2_saved_count(const st_dims *d, int Bsz); /* reals saved by forward for backward */
size_t st_mamba2_work_count(const st_dims *d, int Bsz);  /* scratch reals (forward or backward) */

void st_mamba2_forward(const st_dims *d, int Bsz, const st_mamba2_weights *w, const real *u, int u_stride, real *u_out,
                       int u_out_stride, real *saved, real *work);
void st_mamba2_backward(const st_dims *d, int Bsz, const st_mamba2_weights *w, const real *u, int u_stride,
                        const real *saved, const real *du_out, int du_out_stride, real *du, int du_stride,
                        st_mamba2_grads *g, real *work);

#endif
