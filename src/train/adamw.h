/* adamw.h: AdamW with decoupled weight decay, and global grad-norm clipping
 * (DESIGN section 6). Decay applies to the tensors the parameter table
 * marks (matrices: not norms, biases, A_log, dt_bias, Dskip).
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   w -= lr (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + lr wd w */
#ifndef ST_ADAMW_H
#define ST_ADAMW_H

#include <stddef.h>

#include "core/real.h"
#include "model/params.h"

#define st_adamw_step ST_R(st_adamw_step)
#define st_grad_norm ST_R(st_grad_norm)
#define st_grad_scale ST_R(st_grad_scale)

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
} st_adamw_hparams;

/* One update of every tensor of t; step counts from 1. */
void st_adamw_step(const st_param_table *t, real *w, const real *g, real *m, real *v, const st_adamw_hparams *h,
                   long step);
/* sqrt(sum g^2) over n elements, summed in a fixed order in double. */
double st_grad_norm(size_t n, const real *g);
void st_grad_scale(size_t n, real *g, double s);

#endif
