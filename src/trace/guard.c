/* guard.c: sentinel checks, snapshot and replay, trip dumps (guard.h). */
#include "trace/guard.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "train/checkpoint.h"

/* The environment's state: every array st_env_step reads or writes, B
 * entries each (the same set a checkpoint stores): ST_ENV_ARRAYS of env/env.h. */

static size_t env_state_bytes(const st_env *e) {
    size_t n = 0;
#define ST_GUARD_SIZE(f, type) n += sizeof(type) * (size_t)e->B;
    ST_ENV_ARRAYS(ST_GUARD_SIZE)
#undef ST_GUARD_SIZE
    return n;
}

/* Copies the environment's arrays to (save = 1) or from (save = 0) buf. */
static void env_copy(st_env *e, unsigned char *buf, int save) {
    size_t o = 0;
#define ST_GUARD_COPY(f, type)                                                                                         \
    if (save)                                                                                                          \
        memcpy(buf + o, e->f, sizeof(type) * (size_t)e->B);                                                            \
    else                                                                                                               \
        memcpy(e->f, buf + o, sizeof(type) * (size_t)e->B);                                                            \
    o += sizeof(type) * (size_t)e->B;
    ST_ENV_ARRAYS(ST_GUARD_COPY)
#undef ST_GUARD_COPY
}

int st_trace_for_trainer(st_trace *tr, st_trainer *t, st_trace_mode mode, const char *inject) {
    st_label_sizes z = {t->cfg.dims, t->mb, t->pad};
    ST_TRY(st_trace_init(tr, mode, &z, &t->table, t->cfg.minibatches));
    if (inject && inject[0]) {
        int rc = st_trace_set_inject(tr, inject);
        if (rc != ST_OK) {
            st_trace_free(tr);
            return rc;
        }
    }
    tr->capture_first = mode == ST_TRACE_FULL;
    st_trainer_set_trace(t, tr);
    return ST_OK;
}

int st_trace_guard_init(st_trace_guard *g, st_trace *tr, st_trainer *t) {
    memset(g, 0, sizeof *g);
    g->tr = tr;
    g->t = t;
    size_t P = t->table.total, BC = (size_t)t->cfg.dims.B * t->cfg.dims.C;
    g->env_bytes = env_state_bytes(&t->env);
    g->w = malloc(sizeof(float) * P);
    g->m = malloc(sizeof(float) * P);
    g->v = malloc(sizeof(float) * P);
    g->ctx = malloc(sizeof(float) * BC);
    g->env = malloc(g->env_bytes);
    if (!g->w || !g->m || !g->v || !g->ctx || !g->env) {
        st_trace_guard_free(g);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory for the tracer's pre-step snapshot");
    }
    return ST_OK;
}

void st_trace_guard_free(st_trace_guard *g) {
    free(g->w), free(g->m), free(g->v), free(g->ctx), free(g->env);
    memset(g, 0, sizeof *g);
}

void st_trace_snapshot_take(st_trace_guard *g) {
    st_trainer *t = g->t;
    size_t P = t->table.total, BC = (size_t)t->cfg.dims.B * t->cfg.dims.C;
    memcpy(g->w, t->w, sizeof(float) * P);
    memcpy(g->m, t->adam_m, sizeof(float) * P);
    memcpy(g->v, t->adam_v, sizeof(float) * P);
    memcpy(g->ctx, t->ctx, sizeof(float) * BC);
    env_copy(&t->env, g->env, 1);
    g->update = t->update;
    g->env_steps = t->env_steps;
}

void st_trace_snapshot_restore(st_trace_guard *g) {
    st_trainer *t = g->t;
    size_t P = t->table.total, BC = (size_t)t->cfg.dims.B * t->cfg.dims.C;
    memcpy(t->w, g->w, sizeof(float) * P);
    memcpy(t->adam_m, g->m, sizeof(float) * P);
    memcpy(t->adam_v, g->v, sizeof(float) * P);
    memcpy(t->ctx, g->ctx, sizeof(float) * BC);
    env_copy(&t->env, g->env, 0);
    t->update = g->update;
    t->env_steps = g->env_steps;
}

/* The sentinel's scalars, then weights and moments. */
static void sentinel_check(st_trace_guard *g, const st_update_stats *s) {
    const st_trainer *t = g->t;
    const struct {
        const char *what;
        double v;
    } sc[] = {
        {"loss", s->loss.loss},
        {"policy loss", s->loss.policy},
        {"value loss", s->loss.value},
        {"entropy", s->loss.entropy},
        {"gradient norm", s->grad_norm},
        {"rewards", s->mean_reward},
        {"value predictions", s->mean_value},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        if (!isfinite(sc[i].v)) {
            st_trace_sentinel_trip(g->tr, sc[i].what);
            return;
        }
    size_t P = t->table.total;
    if (!st_trace_all_finite(t->w, P) || !st_trace_all_finite(t->adam_m, P) || !st_trace_all_finite(t->adam_v, P))
        st_trace_sentinel_trip(g->tr, "weights or AdamW moments");
}

/* Restores the snapshot and runs the same update again with full scans. */
static int replay_full(st_trace_guard *g, st_update_stats *s) {
    st_trace *tr = g->tr;
    char what[sizeof tr->sentinel_what];
    memcpy(what, tr->sentinel_what, sizeof what);
    int sentinel = tr->sentinel_tripped;
    st_trace_snapshot_restore(g);
    st_trace_reset(tr);
    tr->sentinel_tripped = sentinel;
    memcpy(tr->sentinel_what, what, sizeof what);
    tr->scanning = 1;
    tr->capture_first = 1;
    int rc = st_trainer_update(g->t, s);
    tr->scanning = tr->mode == ST_TRACE_FULL;
    tr->capture_first = tr->mode == ST_TRACE_FULL;
    return rc;
}

int st_trace_guard_update(st_trace_guard *g, st_update_stats *s) {
    st_trace *tr = g->tr;
    if (tr->mode == ST_TRACE_OFF) return st_trainer_update(g->t, s);
    st_trace_snapshot_take(g);
    long step = g->t->update;
    ST_TRY(st_trainer_update(g->t, s));
    /* full scans have named any bad label; the scalars then only catch a
     * value that no label holds */
    if (tr->mode == ST_TRACE_SENTINEL || tr->ntrip == 0) sentinel_check(g, s);
    if (!tr->sentinel_tripped && tr->ntrip == 0) return ST_OK;
    tr->trip_step = step;
    if (tr->mode == ST_TRACE_SENTINEL) ST_TRY(replay_full(g, s));
    st_trace_snapshot_restore(g);
    tr->tripped = 1;
    int first = st_trace_first(tr);
    if (first < 0)
        return ST_FAIL(ST_ERR_NUMERIC,
                       "NaN/Inf tracer: non-finite %s at step %ld, but no label holds one in the replay",
                       tr->sentinel_what, step);
    const st_trace_record *r = &tr->rec[first];
    return ST_FAIL(ST_ERR_NUMERIC, "NaN/Inf tracer tripped at step %lld: first non-finite label %s, index %lld (%s)",
                   (long long)r->step, tr->labels.l[first].name, (long long)r->index, st_trace_kind_name(r->kind));
}

/* ---- dumps ---------------------------------------------------------------- */

static int mkdir_p(const char *path) {
    char buf[1024];
    ST_REQUIRE(strlen(path) < sizeof buf, ST_ERR_INPUT, "path too long: %s", path);
    memcpy(buf, path, strlen(path) + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ST_FAIL(ST_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return ST_FAIL(ST_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
    return ST_OK;
}

/* The captures as safetensors entries, shaped by their labels. */
static st_st_tensor *capture_tensors(const st_trace *tr) {
    st_st_tensor *x = calloc((size_t)(tr->ncap ? tr->ncap : 1), sizeof *x);
    if (!x) return NULL;
    for (int i = 0; i < tr->ncap; i++) {
        const st_trace_capture *c = &tr->cap[i];
        const st_label *l = &tr->labels.l[c->label];
        int64_t prod = 1;
        for (int k = 0; k < l->ndim; k++)
            prod *= l->shape[k];
        x[i].name = l->name;
        x[i].dtype = c->f64 ? ST_DT_F64 : ST_DT_F32;
        x[i].data = c->data;
        if (prod == (int64_t)c->count) {
            x[i].ndim = l->ndim;
            for (int k = 0; k < l->ndim; k++)
                x[i].shape[k] = l->shape[k];
        } else {
            x[i].ndim = 1;
            x[i].shape[0] = (int64_t)c->count;
        }
    }
    return x;
}

/* The report as one string (caller frees). */
static char *report_text(const st_trace *tr) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    st_trace_report(tr, f, 1000);
    fclose(f);
    return buf;
}

int st_trace_write_dump(st_trace_guard *g, const char *dir) {
    st_trace *tr = g->tr;
    int first = st_trace_first(tr);
    ST_REQUIRE(first >= 0, ST_ERR_INPUT, "no trip to dump");
    ST_TRY(mkdir_p(dir));
    char path[1200];
    snprintf(path, sizeof path, "%s/pre_step.safetensors", dir);
    ST_TRY(st_checkpoint_save(path, g->t));
    const st_trace_record *r = &tr->rec[first];
    char step[32], index[32], pad[16], line[400], inputs[4096] = "";
    snprintf(step, sizeof step, "%lld", (long long)r->step);
    snprintf(index, sizeof index, "%lld", (long long)r->index);
    snprintf(pad, sizeof pad, "%d", tr->pad);
    st_trace_record_str(tr, first, line, sizeof line);
    size_t o = 0;
    for (int i = 0; i < tr->ncap && o < sizeof inputs; i++)
        if (tr->cap[i].label != first)
            o += (size_t)snprintf(inputs + o, sizeof inputs - o, "%s%s", o ? "," : "",
                                  tr->labels.l[tr->cap[i].label].name);
    char *report = report_text(tr);
    st_st_meta meta[] = {
        {"format", ST_TRACE_DUMP_FORMAT},
        {"first_label", tr->labels.l[first].name},
        {"step", step},
        {"index", index},
        {"kind", st_trace_kind_name(r->kind)},
        {"trip", line},
        {"tagged_padding", st_trace_record_tagged(r) ? "yes" : "no"},
        {"inject", tr->inject.armed ? tr->inject.spec : ""},
        {"poison_padding", pad},
        {"mode", st_trace_mode_name(tr->mode)},
        {"sentinel", tr->sentinel_tripped ? tr->sentinel_what : ""},
        {"inputs", inputs},
        {"report", report ? report : ""},
    };
    st_st_tensor *x = capture_tensors(tr);
    int rc = x ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of memory writing the dump");
    snprintf(path, sizeof path, "%s/trip.safetensors", dir);
    if (rc == ST_OK) rc = st_safetensors_write(path, x, tr->ncap, meta, (int)(sizeof meta / sizeof meta[0]));
    free(x);
    snprintf(path, sizeof path, "%s/report.txt", dir);
    FILE *f = rc == ST_OK ? fopen(path, "w") : NULL;
    if (f) {
        fputs(report ? report : "", f);
        fclose(f);
    } else if (rc == ST_OK) {
        rc = ST_FAIL(ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    free(report);
    return rc;
}

int st_trace_dump_read(const char *dir, st_trace_dump_info *info) {
    char path[1200];
    snprintf(path, sizeof path, "%s/trip.safetensors", dir);
    st_safetensors f;
    ST_TRY(st_safetensors_open(path, &f));
    const char *fmt = st_safetensors_meta(&f, "format");
    const char *label = st_safetensors_meta(&f, "first_label"), *step = st_safetensors_meta(&f, "step");
    const char *index = st_safetensors_meta(&f, "index"), *inject = st_safetensors_meta(&f, "inject");
    const char *pad = st_safetensors_meta(&f, "poison_padding"), *mode = st_safetensors_meta(&f, "mode");
    int ok = fmt && strcmp(fmt, ST_TRACE_DUMP_FORMAT) == 0 && label && step && index && pad;
    if (ok) {
        memset(info, 0, sizeof *info);
        snprintf(info->first_label, sizeof info->first_label, "%s", label);
        info->step = atoll(step);
        info->index = atoll(index);
        snprintf(info->inject, sizeof info->inject, "%s", inject ? inject : "");
        info->pad = atoi(pad);
        snprintf(info->mode, sizeof info->mode, "%s", mode ? mode : "");
    }
    st_safetensors_close(&f);
    ST_REQUIRE(ok, ST_ERR_INPUT, "%s is not a tracer dump (metadata format '%s', expected '%s')", path,
               fmt ? fmt : "(none)", ST_TRACE_DUMP_FORMAT);
    return ST_OK;
}

int st_trace_replay(const char *dir, const st_train_config *cfg, const st_market *m, FILE *out, int *reproduced) {
    st_trace_dump_info info;
    ST_TRY(st_trace_dump_read(dir, &info));
    *reproduced = 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/pre_step.safetensors", dir);
    st_safetensors f;
    ST_TRY(st_safetensors_open(path, &f));
    st_trainer t;
    int rc = st_trainer_init_padded(&t, cfg, m, info.pad);
    if (rc == ST_OK) rc = st_checkpoint_restore(&f, &t);
    st_safetensors_close(&f);
    st_trace tr;
    st_trace_guard g = {0};
    int have_tr = 0;
    if (rc == ST_OK) rc = st_trace_for_trainer(&tr, &t, ST_TRACE_FULL, info.inject);
    if (rc == ST_OK) have_tr = 1, rc = st_trace_guard_init(&g, &tr, &t);
    if (rc == ST_OK) {
        fprintf(out, "replaying step %ld of %s with full scans%s%s%s\n", t.update, dir,
                info.inject[0] ? " (injection " : "", info.inject, info.inject[0] ? ")" : "");
        st_update_stats s;
        rc = st_trace_guard_update(&g, &s);
        if (rc == ST_ERR_NUMERIC && tr.tripped) {
            st_clear_error();
            rc = ST_OK;
            st_trace_report(&tr, out, 20);
            int first = st_trace_first(&tr);
            *reproduced = first >= 0 && strcmp(tr.labels.l[first].name, info.first_label) == 0 &&
                          tr.rec[first].step == info.step && tr.rec[first].index == info.index;
        } else if (rc == ST_OK) {
            fprintf(out, "the step ran clean: no label holds a non-finite value\n");
        }
        fprintf(out, "%s: the dump's first label %s, step %lld, index %lld\n",
                *reproduced ? "reproduced" : "NOT reproduced", info.first_label, info.step, info.index);
    }
    st_trace_guard_free(&g);
    if (have_tr) st_trace_free(&tr);
    st_trainer_free(&t);
    return rc;
}

int st_trace_dump_step(st_trainer *t, const char *path, int *n_tensors) {
    st_trace tr;
    ST_TRY(st_trace_for_trainer(&tr, t, ST_TRACE_FULL, NULL));
    tr.capture_all = 1;
    tr.capture_first = 0;
    st_update_stats s;
    long step = t->update;
    int rc = st_trainer_update(t, &s);
    st_st_tensor *x = rc == ST_OK ? capture_tensors(&tr) : NULL;
    if (rc == ST_OK && !x) rc = ST_FAIL(ST_ERR_MEMORY, "out of memory writing %s", path);
    if (rc == ST_OK) {
        char stepbuf[32], trips[32];
        snprintf(stepbuf, sizeof stepbuf, "%ld", step);
        snprintf(trips, sizeof trips, "%d", tr.ntrip);
        char *cfg = st_train_config_to_json(&t->cfg);
        st_st_meta meta[] = {{"format", ST_TRACE_STEP_DUMP_FORMAT},
                             {"step", stepbuf},
                             {"labels_tripped", trips},
                             {"passes", "act/env: rollout step 0; train, saved, bwd, grad, optim: epoch 0 minibatch 0"},
                             {"config", cfg ? cfg : "{}"}};
        rc = st_safetensors_write(path, x, tr.ncap, meta, (int)(sizeof meta / sizeof meta[0]));
        free(cfg);
        *n_tensors = tr.ncap;
    }
    free(x);
    st_trainer_set_trace(t, NULL);
    st_trace_free(&tr);
    return rc;
}
