/* checkpoint.c: save and restore of training state (checkpoint.h).
 *
 * A checkpoint is input like any other: restore checks every tensor's dtype
 * and shape against the trainer's config (through st_safetensors_read),
 * that weights and moments are finite (second moments >= 0), and that the
 * environment state is one the environment can reach on this data before
 * anything steps with it. */
#include "train/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

#ifndef ST_GIT_REV
#define ST_GIT_REV "unknown"
#endif

/* The environment's state is the arrays of ST_ENV_ARRAYS (env/env.h), each
 * B long: int and double ones by the lists below, then episode and active. */

typedef struct {
    st_st_tensor *t;
    char (*names)[64];
    int n, cap;
} tensor_list;

static void push(tensor_list *l, const char *name, st_dtype dt, int ndim, int64_t s0, int64_t s1, int64_t s2,
                 const void *data) {
    st_st_tensor *x = &l->t[l->n];
    snprintf(l->names[l->n], 64, "%s", name);
    x->name = l->names[l->n];
    x->dtype = dt;
    x->ndim = ndim;
    x->shape[0] = s0, x->shape[1] = s1, x->shape[2] = s2;
    x->data = data;
    l->n++;
}

static void push_param_set(tensor_list *l, const st_param_table *tb, const char *prefix, const float *base) {
    char name[64];
    for (int i = 0; i < tb->n; i++) {
        const st_param *p = &tb->p[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        push(l, name, ST_DT_F32, p->ndim, p->shape[0], p->shape[1], p->shape[2], base + p->offset);
    }
}

int st_checkpoint_save(const char *path, const st_trainer *t) {
    const st_env *e = &t->env;
    int B = e->B, cap = 3 * t->table.n + 64;
    tensor_list l = {calloc((size_t)cap, sizeof(st_st_tensor)), calloc((size_t)cap, 64), 0, cap};
    if (!l.t || !l.names) {
        free(l.t), free(l.names);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory writing %s", path);
    }
    push_param_set(&l, &t->table, "", t->w);
    push_param_set(&l, &t->table, "adam.m.", t->adam_m);
    push_param_set(&l, &t->table, "adam.v.", t->adam_v);
    push(&l, "data.norm_mean", ST_DT_F32, 1, t->m->F, 0, 0, t->m->norm_mean);
    push(&l, "data.norm_std", ST_DT_F32, 1, t->m->F, 0, 0, t->m->norm_std);
#define PUSH_I32(f, type) push(&l, "env." #f, ST_DT_I32, 1, B, 0, 0, e->f);
#define PUSH_F64(f, type) push(&l, "env." #f, ST_DT_F64, 1, B, 0, 0, e->f);
    ST_ENV_INT_ARRAYS(PUSH_I32)
    ST_ENV_DOUBLE_ARRAYS(PUSH_F64)
#undef PUSH_I32
#undef PUSH_F64
    push(&l, "env.episode", ST_DT_I32, 1, B, 0, 0, e->episode); /* uint32 bits */
    push(&l, "env.active", ST_DT_U8, 1, B, 0, 0, e->active);
    push(&l, "env.context", ST_DT_F32, 2, B, t->cfg.dims.C, 0, t->ctx);

    char *cfg = st_train_config_to_json(&t->cfg);
    char update[32], steps[32], created[32];
    snprintf(update, sizeof update, "%ld", t->update);
    snprintf(steps, sizeof steps, "%ld", t->env_steps);
    time_t now = time(NULL);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    st_st_meta meta[] = {
        {"format", ST_CHECKPOINT_FORMAT}, {"config", cfg ? cfg : "{}"}, {"update", update},
        {"env_steps", steps}, {"git_revision", ST_GIT_REV}, {"created", created},
    };
    int rc = st_safetensors_write(path, l.t, l.n, meta, (int)(sizeof meta / sizeof meta[0]));
    free(cfg);
    free(l.t);
    free(l.names);
    return rc;
}

static int check_format(const st_safetensors *f) {
    const char *fmt = st_safetensors_meta(f, "format");
    ST_REQUIRE(fmt && strcmp(fmt, ST_CHECKPOINT_FORMAT) == 0, ST_ERR_INPUT,
               "%s is not an ssmtrade checkpoint (metadata format '%s', expected '%s')", f->path,
               fmt ? fmt : "(none)", ST_CHECKPOINT_FORMAT);
    return ST_OK;
}

int st_checkpoint_config(const st_safetensors *f, st_train_config *cfg) {
    ST_TRY(check_format(f));
    const char *json = st_safetensors_meta(f, "config");
    ST_REQUIRE(json, ST_ERR_INPUT, "%s: the checkpoint has no config", f->path);
    ST_TRY(st_train_config_default(cfg, "default"));
    int rc = st_train_config_apply_json(cfg, json, f->path);
    if (rc != ST_OK) st_train_config_free(cfg); /* on failure cfg owns nothing */
    return rc;
}

/* A value that a checkpoint can hold: finite, and >= 0 where it must be. */
static int check_floats(const st_safetensors *f, const char *name, const float *v, size_t n, int nonneg) {
    for (size_t i = 0; i < n; i++)
        ST_REQUIRE(isfinite(v[i]) && (!nonneg || v[i] >= 0), ST_ERR_INPUT,
                   "%s: tensor '%s' holds %g at element %zu (%s)", f->path, name, (double)v[i], i,
                   nonneg ? "must be finite and >= 0" : "must be finite");
    return ST_OK;
}

static int read_set(const st_safetensors *f, const st_param_table *tb, const char *prefix, float *base) {
    char name[64];
    int nonneg = strcmp(prefix, "adam.v.") == 0; /* second moments */
    for (int i = 0; i < tb->n; i++) {
        const st_param *p = &tb->p[i];
        int64_t shape[3] = {p->shape[0], p->shape[1], p->shape[2]};
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        ST_TRY(st_safetensors_read(f, name, ST_DT_F32, p->ndim, shape, base + p->offset));
        ST_TRY(check_floats(f, name, base + p->offset, p->count, nonneg));
    }
    return ST_OK;
}

int st_checkpoint_weights(const st_safetensors *f, const st_param_table *table, float *w) {
    ST_TRY(check_format(f));
    return read_set(f, table, "", w);
}

/* The restored environment state must be one the environment can reach:
 * instance b on an instrument of the data, inside an episode that lies in
 * the configured split (begin <= ep_start < ep_last <= end - 1, ep_start <=
 * bar <= ep_last, and bar < ep_last while active, so the next step's bar
 * exists), its trade's bars inside the episode, counters in range, sides
 * in {-1, 0, +1}, every double finite and the R unit of an open trade > 0.
 * A corrupt or foreign checkpoint is refused here instead of stepping
 * outside the bars. */
static int check_env_state(const st_safetensors *f, const st_env *e) {
    const st_market *m = e->m;
    int s = e->cfg.split;
    for (int b = 0; b < e->B; b++) {
        ST_REQUIRE(e->inst[b] >= 0 && e->inst[b] < m->n_inst, ST_ERR_INPUT,
                   "%s: env.inst[%d] = %d, but the data has %d instruments", f->path, b, e->inst[b], m->n_inst);
        const st_instrument *I = &m->inst[e->inst[b]];
        int lo = I->split_begin[s], hi = I->split_end[s] - 1, start = e->ep_start[b], last = e->ep_last[b];
        ST_REQUIRE(start >= lo && start < last && last <= hi, ST_ERR_INPUT,
                   "%s: instance %d: episode [%d, %d] (env.ep_start, env.ep_last) is not inside bars [%d, %d] of "
                   "%s's split %d",
                   f->path, b, start, last, lo, hi, I->name, s);
        ST_REQUIRE(e->active[b] <= 1, ST_ERR_INPUT, "%s: env.active[%d] = %d is not 0 or 1", f->path, b,
                   e->active[b]);
        int bar = e->bar[b], bar_end = e->active[b] ? last - 1 : last;
        ST_REQUIRE(bar >= start && bar <= bar_end, ST_ERR_INPUT,
                   "%s: instance %d: env.bar = %d is outside its episode's bars [%d, %d]", f->path, b, bar, start,
                   bar_end);
        const struct {
            const char *name;
            int v, lo, hi;
        } ints[] = {
            {"ep_step", e->ep_step[b], 0, last - start},
            {"entry_bar", e->entry_bar[b], start, bar},
            {"last_exit_bar", e->last_exit_bar[b], start, bar},
            {"trades", e->trades[b], 0, last - start + 1},
            {"pos", e->pos[b], -1, 1},
            {"prev_target", e->prev_target[b], -1, 1},
        };
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
            ST_REQUIRE(ints[k].v >= ints[k].lo && ints[k].v <= ints[k].hi, ST_ERR_INPUT,
                       "%s: env.%s[%d] = %d is outside [%d, %d]", f->path, ints[k].name, b, ints[k].v, ints[k].lo,
                       ints[k].hi);
#define CHECK_F64(fl, type)                                                                                    \
    ST_REQUIRE(isfinite(e->fl[b]), ST_ERR_INPUT, "%s: env." #fl "[%d] = %g is not finite", f->path, b, e->fl[b]);
        ST_ENV_DOUBLE_ARRAYS(CHECK_F64)
#undef CHECK_F64
        ST_REQUIRE(e->atr_entry[b] > 0 && (e->pos[b] == 0 || e->r_unit[b] > 0), ST_ERR_INPUT,
                   "%s: instance %d: env.atr_entry = %g and env.r_unit = %g must be > 0", f->path, b, e->atr_entry[b],
                   e->r_unit[b]);
    }
    return ST_OK;
}

/* A metadata counter: a whole decimal number >= 0. */
static int read_counter(const st_safetensors *f, const char *key, long *out) {
    const char *v = st_safetensors_meta(f, key);
    ST_REQUIRE(v, ST_ERR_INPUT, "%s: the checkpoint has no %s counter", f->path, key);
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    ST_REQUIRE(end != v && *end == '\0' && errno == 0 && n >= 0, ST_ERR_INPUT,
               "%s: metadata %s '%s' is not a count (a whole number >= 0)", f->path, key, v);
    *out = n;
    return ST_OK;
}

/* On failure the trainer is partly overwritten: initialise it again before use. */
int st_checkpoint_restore(const st_safetensors *f, st_trainer *t) {
    ST_TRY(check_format(f));
    st_env *e = &t->env;
    int B = e->B, F = t->m->F, C = t->cfg.dims.C;
    int64_t sB[1] = {B}, sF[1] = {F}, sctx[2] = {B, C};
    long update = 0, env_steps = 0;
    ST_TRY(read_counter(f, "update", &update));
    ST_TRY(read_counter(f, "env_steps", &env_steps));
    ST_TRY(read_set(f, &t->table, "", t->w));
    ST_TRY(read_set(f, &t->table, "adam.m.", t->adam_m));
    ST_TRY(read_set(f, &t->table, "adam.v.", t->adam_v));
    float *mean = malloc(sizeof(float) * (size_t)F), *sd = malloc(sizeof(float) * (size_t)F);
    int rc = mean && sd ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of memory restoring %s", f->path);
    if (rc == ST_OK) rc = st_safetensors_read(f, "data.norm_mean", ST_DT_F32, 1, sF, mean);
    if (rc == ST_OK) rc = st_safetensors_read(f, "data.norm_std", ST_DT_F32, 1, sF, sd);
    if (rc == ST_OK && (memcmp(mean, t->m->norm_mean, sizeof(float) * F) != 0 ||
                        memcmp(sd, t->m->norm_std, sizeof(float) * F) != 0))
        rc = ST_FAIL(ST_ERR_INPUT,
                     "%s: the data's feature normalisation differs from the checkpoint's: resume needs the same "
                     "data (--data, --instruments, --bars, --market-seed) as the run that wrote it",
                     f->path);
    free(mean);
    free(sd);
    ST_TRY(rc);
#define READ_I32(fl, type) ST_TRY(st_safetensors_read(f, "env." #fl, ST_DT_I32, 1, sB, e->fl));
#define READ_F64(fl, type) ST_TRY(st_safetensors_read(f, "env." #fl, ST_DT_F64, 1, sB, e->fl));
    ST_ENV_INT_ARRAYS(READ_I32)
    ST_ENV_DOUBLE_ARRAYS(READ_F64)
#undef READ_I32
#undef READ_F64
    ST_TRY(st_safetensors_read(f, "env.episode", ST_DT_I32, 1, sB, e->episode));
    ST_TRY(st_safetensors_read(f, "env.active", ST_DT_U8, 1, sB, e->active));
    ST_TRY(check_env_state(f, e));
    ST_TRY(st_safetensors_read(f, "env.context", ST_DT_F32, 2, sctx, t->ctx));
    ST_TRY(check_floats(f, "env.context", t->ctx, (size_t)B * (size_t)C, 0));
    t->update = update;
    t->env_steps = env_steps;
    return ST_OK;
}
