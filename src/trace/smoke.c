/* smoke.c: the smoke harness over seeds (smoke.h). */
#include "trace/smoke.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "trace/guard.h"
#include "trace/trace.h"
#include "train/trainer.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_trip(const st_trace *tr, st_smoke_row *row) {
    int id = st_trace_first(tr);
    if (id < 0) {
        snprintf(row->first, sizeof row->first, "(unlabelled: %.48s)", tr->sentinel_what);
        row->step = tr->trip_step;
        row->index = -1;
        return;
    }
    const st_label *l = &tr->labels.l[id];
    const st_trace_record *r = &tr->rec[id];
    snprintf(row->first, sizeof row->first, "%s", l->name);
    row->step = r->step;
    row->index = r->index;
    size_t o = 0;
    for (int i = 0; i < l->ndim && o < sizeof row->coords; i++)
        o +=
            (size_t)snprintf(row->coords + o, sizeof row->coords - o, "%s%s %d", i ? ", " : "", l->dim[i], r->coord[i]);
    snprintf(row->kind, sizeof row->kind, "%s", st_trace_kind_name(r->kind));
    row->tagged = st_trace_record_tagged(r);
}

/* One run: a fresh trainer on seed, full scans, until a trip or `steps`. */
static void one_run(const st_train_config *base, const st_market *m, const st_smoke_opts *o, int i, st_smoke_row *row) {
    memset(row, 0, sizeof *row);
    row->run = i;
    row->seed = o->seed0 + i;
    row->index = -1;
    st_train_config cfg = *base; /* strings stay owned by base */
    cfg.seed = row->seed;
    cfg.updates = o->steps;
    double t0 = now_seconds();
    st_trainer t;
    st_trace tr;
    st_trace_guard g = {0};
    int have_tr = 0;
    int rc = st_trainer_init_padded(&t, &cfg, m, o->pad);
    if (rc == ST_OK) rc = st_trace_for_trainer(&tr, &t, ST_TRACE_FULL, o->inject);
    if (rc == ST_OK) have_tr = 1, tr.run = i, rc = st_trace_guard_init(&g, &tr, &t);
    for (int s = 0; rc == ST_OK && s < o->steps; s++) {
        st_update_stats st;
        rc = st_trace_guard_update(&g, &st);
        if (rc == ST_OK) row->steps_done++;
    }
    if (rc == ST_OK) {
        row->status = ST_SMOKE_CLEAN;
    } else if (rc == ST_ERR_NUMERIC && have_tr && tr.tripped) {
        row->status = ST_SMOKE_TRIPPED;
        fill_trip(&tr, row);
    } else {
        row->status = ST_SMOKE_ERROR;
        snprintf(row->error, sizeof row->error, "%s", st_last_error());
    }
    st_clear_error();
    st_trace_guard_free(&g);
    if (have_tr) st_trace_free(&tr);
    st_trainer_free(&t);
    row->seconds = now_seconds() - t0;
}

static void print_row(FILE *out, const st_smoke_row *r) {
    static const char *const status[] = {"clean", "TRIPPED", "error"};
    if (r->status == ST_SMOKE_TRIPPED)
        fprintf(out, "%4d  %8lld  %-8s %-28s %5lld  %8lld  (%s) %s%s  %6.1fs\n", r->run, r->seed, status[r->status],
                r->first, r->step, r->index, r->coords, r->kind, r->tagged ? " tagged" : "", r->seconds);
    else if (r->status == ST_SMOKE_ERROR)
        fprintf(out, "%4d  %8lld  %-8s %s\n", r->run, r->seed, status[r->status], r->error);
    else
        fprintf(out, "%4d  %8lld  %-8s %-28s %5s  %8s  %d steps  %6.1fs\n", r->run, r->seed, status[r->status], "-",
                "-", "-", r->steps_done, r->seconds);
    fflush(out);
}

int st_smoke_run(const st_train_config *base, const st_market *m, const st_smoke_opts *o, FILE *out,
                 st_smoke_row *rows) {
    ST_REQUIRE(o->runs > 0 && o->steps > 0, ST_ERR_INPUT, "smoke: --runs %d and --steps %d must be positive", o->runs,
               o->steps);
    if (out) {
        fprintf(out, "%4s  %8s  %-8s %-28s %5s  %8s  %s\n", "run", "seed", "status", "first label", "step", "index",
                "coordinates");
        fflush(out);
    }
    for (int i = 0; i < o->runs; i++) {
        one_run(base, m, o, i, &rows[i]);
        if (out) print_row(out, &rows[i]);
    }
    return ST_OK;
}

void st_smoke_summary(const st_smoke_row *rows, int n, char *buf, size_t len) {
    int failing = 0, errors = 0, same_label = 1, same_index = 1, first = -1;
    for (int i = 0; i < n; i++) {
        if (rows[i].status == ST_SMOKE_ERROR) errors++;
        if (rows[i].status != ST_SMOKE_TRIPPED) continue;
        failing++;
        if (first < 0) {
            first = i;
            continue;
        }
        same_label &= strcmp(rows[i].first, rows[first].first) == 0;
        same_index &= rows[i].index == rows[first].index;
    }
    char err[64] = "";
    if (errors) snprintf(err, sizeof err, " (%d run%s stopped by an error)", errors, errors > 1 ? "s" : "");
    if (failing == 0) {
        snprintf(buf, len, "all %d runs clean: no label held a non-finite value%s", n - errors, err);
    } else if (same_label) {
        const char *all = failing == 1 ? "in the 1 failing run" : "in all";
        char idx[48];
        if (same_index)
            snprintf(idx, sizeof idx, " at index %lld", rows[first].index);
        else
            snprintf(idx, sizeof idx, " (at different indices)");
        if (failing == 1)
            snprintf(buf, len, "%s the first non-finite label is %s%s%s", all, rows[first].first, idx, err);
        else
            snprintf(buf, len, "%s %d failing runs the first non-finite label is %s%s%s", all, failing,
                     rows[first].first, idx, err);
    } else {
        size_t o = (size_t)snprintf(buf, len, "%d failing runs, first non-finite labels differ:", failing);
        for (int i = 0; i < n && o < len; i++)
            if (rows[i].status == ST_SMOKE_TRIPPED)
                o += (size_t)snprintf(buf + o, len - o, " run %d %s;", rows[i].run, rows[i].first);
        if (o < len) snprintf(buf + o, len - o, "%s", err);
    }
}
