/* schedule.h: the learning-rate schedule: linear warm-up over `warmup`
 * updates, then cosine or linear decay to min_frac * lr at the last update
 * (or constant). */
#ifndef ST_SCHEDULE_H
#define ST_SCHEDULE_H

typedef enum { ST_SCHED_COSINE, ST_SCHED_LINEAR, ST_SCHED_CONSTANT } st_sched_kind;

/* Parses "cosine", "linear" or "constant". */
int st_sched_parse(const char *name, st_sched_kind *k);
const char *st_sched_name(st_sched_kind k);
/* lr at update u (0-based) of `total`. */
double st_sched_lr(st_sched_kind k, double lr, double min_frac, int warmup, int u, int total);

#endif
