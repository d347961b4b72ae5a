/* schedule.c: warm-up and decay of the learning rate (schedule.h). */
#include "train/schedule.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

int st_sched_parse(const char *name, st_sched_kind *k) {
    if (strcmp(name, "cosine") == 0) *k = ST_SCHED_COSINE;
    else if (strcmp(name, "linear") == 0) *k = ST_SCHED_LINEAR;
    else if (strcmp(name, "constant") == 0) *k = ST_SCHED_CONSTANT;
    else return ST_FAIL(ST_ERR_INPUT, "unknown schedule '%s' (expected cosine, linear or constant)", name);
    return ST_OK;
}

const char *st_sched_name(st_sched_kind k) {
    return k == ST_SCHED_COSINE ? "cosine" : k == ST_SCHED_LINEAR ? "linear" : "constant";
}

double st_sched_lr(st_sched_kind k, double lr, double min_frac, int warmup, int u, int total) {
    if (warmup > 0 && u < warmup) return lr * (double)(u + 1) / (double)warmup;
    if (k == ST_SCHED_CONSTANT || total <= warmup + 1) return lr;
    double p = (double)(u - warmup) / (double)(total - warmup - 1); /* 0 .. 1 */
    if (p > 1) p = 1;
    double f = k == ST_SCHED_COSINE ? 0.5 * (1 + cos(M_PI * p)) : 1 - p;
    return lr * (min_frac + (1 - min_frac) * f);
}
