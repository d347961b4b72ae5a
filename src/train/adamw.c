/* adamw.c: AdamW update and gradient-norm clipping (math in adamw.h). */
#include "core/real.h"

#include <math.h>

#include "train/adamw.h"

void st_adamw_step(const st_param_table *t, real *w, const real *g, real *m, real *v, const st_adamw_hparams *h,
                   long step) {
    double bc1 = 1 - pow(h->beta1, (double)step), bc2 = 1 - pow(h->beta2, (double)step);
    real b1 = (real)h->beta1, b2 = (real)h->beta2;
    for (int k = 0; k < t->n; k++) {
        const st_param *p = &t->p[k];
        real wd = p->decay ? (real)(h->lr * h->weight_decay) : 0;
        real lr1 = (real)(h->lr / bc1), rbc2 = (real)(1 / sqrt(bc2)), eps = (real)h->eps;
        size_t o = p->offset;
#pragma omp parallel for schedule(static) if (p->count > 65536)
        for (size_t i = o; i < o + p->count; i++) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            w[i] -= lr1 * m[i] / ((real)sqrt((double)v[i]) * rbc2 + eps) + wd * w[i];
        }
    }
}

double st_grad_norm(size_t n, const real *g) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    return sqrt(s);
}

void st_grad_scale(size_t n, real *g, double s) {
    real f = (real)s;
    for (size_t i = 0; i < n; i++) g[i] *= f;
}
