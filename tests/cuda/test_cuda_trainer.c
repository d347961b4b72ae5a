/* test_cuda_trainer.c: the GPU trainer (train/trainer_cuda.h: the whole
 * step on the device, three CUDA graphs) against the CPU trainer
 * (train/trainer.h), and on its own:
 *  1. one update from the same initial state on both: the initial weights
 *     are the same bits on the device; the rollout actions are the same
 *     (same uniforms, same inverse-CDF rule; the logits agree to ~1e-6, so
 *     a choice can only differ at a tie: the mismatch count is printed and
 *     must be 0 on this seed), log pi(a) and the values agree within 1e-5
 *     relative (forward bound of issue 6), the rewards are the same bits
 *     (the GPU environments reproduce the CPU's transitions), GAE
 *     advantages and returns within 1e-4; after the update the weights
 *     agree within 1e-4 relative (float reductions differ in order; issue
 *     6's bound), the AdamW moments within 1e-3 (m and v are built from the
 *     gradients alone, where the 1e-4 gradient bound is amplified by the
 *     clip's norm ratio; printed), the loss statistics and mean pre-clip
 *     grad norm within 1e-4, and the environments' state after T steps is
 *     the CPU's bit for bit;
 *  2. determinism: two GPU runs of 3 updates give bit-identical weights,
 *     moments, loss statistics and rollouts; so does a third run without
 *     the action step's bar table (st_cuda_trainer_set_bar_table(0)): the
 *     table changes no bit (both action steps read no window: the forward
 *     from the windows' feature-row index, st_cuda_model_forward_rows, with
 *     the per-variable GRNs from the table or over the gathered rows);
 *  3. resume: 2 updates, a checkpoint, a fresh trainer restored from it and
 *     2 more updates give the bits of 4 straight updates (weights, moments,
 *     environments);
 *  4. the NaN/Inf tracer inside the graphs: an injection at every label the
 *     GPU step has (all but the CPU model's `saved` regions; act_window's
 *     buffer is built for its scan alone, the action forward reads the
 *     rows), at step 0 and
 *     a random index, full scans: the update trips, the first label, step
 *     and index are the injected ones, and the trainer is back at its
 *     pre-step state; a few labels at step 1 under the sentinel (clean step
 *     0, a trip at step 1 replayed with full scans names the label); a
 *     clean run in full mode never trips;
 *  5. bf16 matrix products: one update against the CPU's within 2e-2;
 *  6. a short learning run at the tiny preset (40 updates) finishes with
 *     finite losses; env steps per second are printed;
 *  7. the training step's bar table (st_cuda_model_set_train_table): 3
 *     updates (quick: 2) with it on and off from the same start give
 *     weights within 1e-5 relative (the same math, other summation
 *     orders; the rollout actions compared, their mismatches printed),
 *     and two runs with it on the same bits; the small config's
 *     minibatches (128 windows of K = 32 over 3,000 bars) take it under
 *     the default choice too.
 * Skips (77) without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>

#include "core/error.h"
#include "core/philox.h"
#include "cuda/cuda_test.h"
#include "data/dataset.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_cuda.h"
#include "trace/trace.h"
#ifdef ST_HAVE_CUDA
#include "cuda/model_cuda.h" /* st_cuda_model_set_train_table */
#endif

/* test_quick() (the sanitizer runs): fewer injections, no bf16 or learning
 * run, updates of half the rollout and one epoch (the same kernels, half
 * the launches: racecheck took past 140-300 s a case), and fewer updates
 * a case (determinism 1 a run, resume 1 + 1 against 2, one clean
 * full-mode update: racecheck with 12 runs sharing the card still took
 * past 275 s in cases 1-5). */
static st_train_config small_config(void) {
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.dims.B = 16;
    c.dims.T = 16;
    c.updates = 4;
    c.minibatches = 2;
    c.epochs = 2;
    c.episode_length = 12; /* episodes end inside the rollout: resets are covered */
    c.seed = 7;
    if (test_quick()) c.dims.T = 8, c.epochs = 1, c.episode_length = 6; /* episodes still end inside a rollout */
    return c;
}

static double rel_errd(const double *a, const double *b, int n) {
    double d = 0, m = 0;
    for (int i = 0; i < n; i++)
        d += (a[i] - b[i]) * (a[i] - b[i]), m += b[i] * b[i];
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

static void stats_vec(const st_update_stats *s, double *v) {
    double x[7] = {s->loss.loss,      s->loss.policy,   s->loss.value, s->loss.entropy,
                   s->loss.approx_kl, s->loss.clipfrac, s->grad_norm};
    memcpy(v, x, sizeof x);
}

static float *host_floats(size_t n) { return calloc(n + 1, sizeof(float)); }

/* whole_envs: the minibatches as whole environments (segments of T steps,
 * so that the training bar table sees the most repeated bars), else the
 * default's samples one by one */
static void parity_one_update(const st_market *m, int whole_envs) {
    st_train_config c = small_config();
    if (whole_envs) c.segment = c.dims.T;
    printf("%s one update, CPU vs GPU, minibatches of segments of %d steps\n", whole_envs ? "8." : "1.", c.segment);
    st_trainer cpu;
    st_cuda_trainer gpu;
    int rc = st_trainer_init(&cpu, &c, m);
    CHECK(rc == ST_OK, "CPU trainer: %s", st_last_error());
    int rg = st_cuda_trainer_init(&gpu, &c, m);
    CHECK(rg == ST_OK, "GPU trainer: %s", st_last_error());
    if (rc != ST_OK || rg != ST_OK) return;
    size_t P = cpu.table.total;
    float *w = host_floats(P), *am = host_floats(P), *av = host_floats(P);
    CHECK(st_cuda_trainer_download(&gpu, w, am, av) == ST_OK, "download: %s", st_last_error());
    CHECK(memcmp(w, cpu.w, sizeof(float) * P) == 0, "the initial device weights differ from the CPU's");

    st_update_stats sc, sg;
    CHECK(st_trainer_update(&cpu, &sc) == ST_OK, "CPU update: %s", st_last_error());
    rg = st_cuda_trainer_update(&gpu, &sg);
    CHECK(rg == ST_OK, "GPU update: %s", st_last_error());
    if (rg != ST_OK) goto done;
    rg = st_cuda_trainer_download_rollout(&gpu);
    CHECK(rg == ST_OK, "rollout download: %s", st_last_error());
    if (rg != ST_OK) goto done;
    int N = cpu.N, B = c.dims.B, first_step = 0, mism = 0;
    for (int i = 0; i < N; i++) {
        mism += cpu.r_action[i] != gpu.host.r_action[i];
        if (i < B) first_step += cpu.r_action[i] != gpu.host.r_action[i];
    }
    printf("  rollout actions: %d of %d differ (%d in the first step)\n", mism, N, first_step);
    CHECK(first_step == 0, "%d actions of the first rollout step differ", first_step);
    CHECK(mism == 0, "%d of %d rollout actions differ (a tie is that unlikely: a logits bug?)", mism, N);
    CHECK_PARITY("rollout log pi(a)", rel_err(gpu.host.r_logp, cpu.r_logp, N), 1e-5);
    CHECK_PARITY("rollout values", rel_err(gpu.host.r_value, cpu.r_value, N), 1e-5);
    CHECK_PARITY("bootstrap values", rel_err(gpu.host.last_value, cpu.last_value, B), 1e-5);
    CHECK(memcmp(gpu.host.r_reward, cpu.r_reward, sizeof(float) * N) == 0, "rollout rewards differ");
    CHECK(gpu.host.env_steps == cpu.env_steps && gpu.host.update == cpu.update, "counters differ");
    CHECK_PARITY("GAE advantages", rel_err(gpu.host.adv, cpu.adv, N), 1e-4);
    CHECK_PARITY("GAE returns", rel_err(gpu.host.ret, cpu.ret, N), 1e-4);

    CHECK(st_cuda_trainer_download(&gpu, w, am, av) == ST_OK, "download: %s", st_last_error());
    CHECK_PARITY("weights after the update", rel_err(w, cpu.w, P), 1e-4);
    CHECK_PARITY("AdamW m", rel_err(am, cpu.adam_m, P), 1e-3);
    CHECK_PARITY("AdamW v", rel_err(av, cpu.adam_v, P), 1e-3);
    double vc[7], vg[7];
    stats_vec(&sc, vc);
    stats_vec(&sg, vg);
    printf("  CPU loss %.6f grad norm %.6f | GPU loss %.6f grad norm %.6f\n", sc.loss.loss, sc.grad_norm, sg.loss.loss,
           sg.grad_norm);
    CHECK_PARITY("loss statistics and grad norm", rel_errd(vg, vc, 7), 1e-4);
    printf("  mean reward CPU %.17g GPU %.17g, episodes %d / %d, explained variance %.6f / %.6f\n", sc.mean_reward,
           sg.mean_reward, sc.episodes, sg.episodes, sc.explained_var, sg.explained_var);
    CHECK(fabs(sg.mean_reward - sc.mean_reward) <= 1e-12 * fmax(1e-3, fabs(sc.mean_reward)) &&
              sg.episodes == sc.episodes,
          "rollout reward statistics differ");
    CHECK(fabs(sg.mean_episode_R - sc.mean_episode_R) <= 1e-6 * fmax(1.0, fabs(sc.mean_episode_R)),
          "mean episode R differs: %.9g vs %.9g", sg.mean_episode_R, sc.mean_episode_R);
    CHECK(fabs(sg.explained_var - sc.explained_var) <= 1e-4, "explained variance differs");
    /* sync_host fills the host trainer (what checkpoints read) with the device state */
    CHECK(st_cuda_trainer_sync_host(&gpu) == ST_OK && memcmp(gpu.host.w, w, sizeof(float) * P) == 0 &&
              memcmp(gpu.host.adam_v, av, sizeof(float) * P) == 0,
          "sync_host did not copy the device weights and moments");
    {
        const st_env *ec = &cpu.env, *eg = &gpu.host.env;
        size_t bi = sizeof(int) * (size_t)B, bd = sizeof(double) * (size_t)B;
        int same = memcmp(ec->inst, eg->inst, bi) == 0 && memcmp(ec->bar, eg->bar, bi) == 0 &&
                   memcmp(ec->pos, eg->pos, bi) == 0 && memcmp(ec->trades, eg->trades, bi) == 0 &&
                   memcmp(ec->entry, eg->entry, bd) == 0 && memcmp(ec->equity_R, eg->equity_R, bd) == 0 &&
                   memcmp(ec->realized_R, eg->realized_R, bd) == 0 && memcmp(ec->cash, eg->cash, bd) == 0 &&
                   memcmp(ec->episode, eg->episode, sizeof(uint32_t) * (size_t)B) == 0;
        CHECK(same, "the GPU environments' state after the rollout differs from the CPU's");
        CHECK_PARITY("environment context after the rollout", rel_err(gpu.host.ctx, cpu.ctx, (size_t)B * c.dims.C),
                     1e-6);
    }
done:
    free(w), free(am), free(av);
    st_trainer_free(&cpu);
    st_cuda_trainer_free(&gpu);
    st_train_config_free(&c); /* the trainers only borrowed its strings */
}

static int run_gpu(const st_train_config *c, const st_market *m, int n, st_cuda_trainer *t, double *stats) {
    int rc = st_cuda_trainer_init(t, c, m);
    for (int i = 0; rc == ST_OK && i < n; i++) {
        st_update_stats s;
        rc = st_cuda_trainer_update(t, &s);
        stats_vec(&s, stats + 7 * i);
    }
    return rc;
}

/* Weight/moment floats and loss statistics of a and b that differ, and the
 * rollouts' actions and values compared; what = the runs' names. */
static void same_runs(const char *what, st_cuda_trainer *a, st_cuda_trainer *b, const double *sa, const double *sb,
                      size_t ns) {
    int ra = st_cuda_trainer_download_rollout(a), rb = st_cuda_trainer_download_rollout(b);
    CHECK(ra == ST_OK && rb == ST_OK, "%s: rollout download: %s", what, st_last_error());
    if (ra != ST_OK || rb != ST_OK) return;
    size_t P = a->host.table.total;
    float *wa = host_floats(3 * P), *wb = host_floats(3 * P);
    st_cuda_trainer_download(a, wa, wa + P, wa + 2 * P);
    st_cuda_trainer_download(b, wb, wb + P, wb + 2 * P);
    long diff = 0;
    for (size_t i = 0; i < 3 * P; i++)
        diff += memcmp(wa + i, wb + i, sizeof(float)) != 0;
    printf("  %s: %ld of %zu weight/moment floats differ\n", what, diff, 3 * P);
    CHECK(diff == 0, "%s differ in %ld weight/moment floats", what, diff);
    CHECK(memcmp(sa, sb, sizeof(double) * ns) == 0, "%s differ in their loss statistics", what);
    CHECK(memcmp(a->host.r_action, b->host.r_action, sizeof(int) * a->host.N) == 0, "%s: rollout actions differ",
          what);
    CHECK(memcmp(a->host.r_value, b->host.r_value, sizeof(float) * a->host.N) == 0, "%s: rollout values differ",
          what);
    free(wa), free(wb);
}

/* Three runs of nu updates: set(on) before the first two, set(off) before
 * the third, set(back) after; each run's status in r. */
static void three_runs(const st_train_config *c, const st_market *m, int nu, void (*set)(int), int on, int off,
                       int back, st_cuda_trainer t[3], double s[3][21], int r[3]) {
    for (int i = 0; i < 3; i++) {
        set(i < 2 ? on : off);
        r[i] = run_gpu(c, m, nu, &t[i], s[i]);
    }
    set(back);
    CHECK(r[0] == ST_OK && r[1] == ST_OK && r[2] == ST_OK, "GPU runs: %s", st_last_error());
}

static void determinism(const st_market *m) {
    const int nu = test_quick() ? 1 : 3;
    printf("2. determinism: two GPU runs of %d updates, and one without the bar table\n", nu);
    st_train_config c = small_config();
    st_cuda_trainer t[3];
    double sr[3][21];
    int rr[3];
    three_runs(&c, m, nu, st_cuda_trainer_set_bar_table, 1, 0, 1, t, sr, rr);
    CHECK(t[0].tab && t[0].tab_built && !t[2].tab,
          "the default run has a bar table (tiny preset, Dv 8) and the other none");
    if (rr[0] == ST_OK && rr[1] == ST_OK) same_runs("two GPU runs", &t[0], &t[1], sr[0], sr[1], 7 * (size_t)nu);
    if (rr[0] == ST_OK && rr[2] == ST_OK)
        same_runs("runs with and without the bar table", &t[0], &t[2], sr[0], sr[2], 7 * (size_t)nu);
    for (int i = 0; i < 3; i++)
        st_cuda_trainer_free(&t[i]);
    st_train_config_free(&c); /* the trainers only borrowed its strings */
}

/* Weights, moments and the environments' state of t, on the host. */
static float *state_of(st_cuda_trainer *t) {
    size_t P = t->host.table.total;
    float *x = host_floats(3 * P);
    if (st_cuda_trainer_download(t, x, x + P, x + 2 * P) != ST_OK || st_cuda_trainer_sync_host(t) != ST_OK) {
        free(x);
        return NULL;
    }
    return x;
}

static int same_env(const st_env *a, const st_env *b) {
    size_t bi = sizeof(int) * (size_t)a->B, bd = sizeof(double) * (size_t)a->B;
    return memcmp(a->inst, b->inst, bi) == 0 && memcmp(a->bar, b->bar, bi) == 0 && memcmp(a->pos, b->pos, bi) == 0 &&
           memcmp(a->equity_R, b->equity_R, bd) == 0 && memcmp(a->cash, b->cash, bd) == 0 &&
           memcmp(a->mfe, b->mfe, bd) == 0 && memcmp(a->episode, b->episode, sizeof(uint32_t) * (size_t)a->B) == 0;
}

static void resume(const st_market *m) {
    const int h = test_quick() ? 1 : 2; /* updates before and after the checkpoint */
    printf("3. resume: %d updates + checkpoint + %d updates == %d updates\n", h, h, 2 * h);
    st_train_config c = small_config();
    st_cuda_trainer a, b, r;
    double sa[28], sb[14], sr[14];
    const char *path = "/tmp/ssmtrade_test_cuda_resume.safetensors";
    int ra = run_gpu(&c, m, 2 * h, &a, sa);
    int rb = run_gpu(&c, m, h, &b, sb);
    CHECK(ra == ST_OK && rb == ST_OK, "GPU runs: %s", st_last_error());
    if (rb == ST_OK) rb = st_cuda_trainer_sync_host(&b);
    if (rb == ST_OK) rb = st_checkpoint_save(path, &b.host);
    CHECK(rb == ST_OK, "checkpoint: %s", st_last_error());
    st_cuda_trainer_free(&b);
    int rr = st_cuda_trainer_init(&r, &c, m);
    st_safetensors f;
    if (rr == ST_OK) rr = st_safetensors_open(path, &f);
    if (rr == ST_OK) {
        rr = st_checkpoint_restore(&f, &r.host);
        st_safetensors_close(&f);
    }
    if (rr == ST_OK) rr = st_cuda_trainer_push_host(&r);
    for (int i = 0; rr == ST_OK && i < h; i++) {
        st_update_stats s;
        rr = st_cuda_trainer_update(&r, &s);
        stats_vec(&s, sr + 7 * i);
    }
    CHECK(rr == ST_OK, "resumed run: %s", st_last_error());
    if (ra == ST_OK && rr == ST_OK) {
        size_t P = a.host.table.total;
        float *xa = state_of(&a), *xr = state_of(&r);
        CHECK(xa && xr, "download: %s", st_last_error());
        if (xa && xr) {
            long diff = 0;
            for (size_t i = 0; i < 3 * P; i++)
                diff += memcmp(xa + i, xr + i, sizeof(float)) != 0;
            printf("  %ld of %zu weight/moment floats differ (resumed vs straight)\n", diff, 3 * P);
            CHECK(diff == 0, "the resumed run differs in %ld weight/moment floats", diff);
            CHECK(same_env(&a.host.env, &r.host.env), "the resumed run's environments differ");
            CHECK(memcmp(sa + 7 * h, sr, sizeof(double) * 7 * h) == 0, "the resumed run's loss statistics differ");
            CHECK(a.host.update == r.host.update && a.host.env_steps == r.host.env_steps, "counters differ");
        }
        free(xa), free(xr);
    }
    if (ra == ST_OK) st_cuda_trainer_free(&a);
    if (r.host.table.total) st_cuda_trainer_free(&r);
    st_train_config_free(&c); /* the trainers only borrowed its strings */
    remove(path);
}

/* One injection: label id at step `step`, index `index`, under mode; the
 * trainer t must trip at exactly that label and come back to its state. */
static int inject_one(st_cuda_trainer *t, st_trace_mode mode, int id, int64_t step, int64_t index, int clean_first) {
    st_label_sizes z;
    st_cuda_trainer_label_sizes(t, &z);
    st_trace tr;
    if (st_trace_init(&tr, mode, &z, &t->host.table, t->host.cfg.minibatches) != ST_OK) return 0;
    char spec[160];
    snprintf(spec, sizeof spec, "%s:%lld:%lld", tr.labels.l[id].name, (long long)step, (long long)index);
    int ok = st_trace_set_inject(&tr, spec) == ST_OK && st_cuda_trainer_set_trace(t, &tr) == ST_OK;
    float *before = NULL;
    st_update_stats s;
    for (int i = 0; ok && i < clean_first; i++)
        ok = st_cuda_trainer_update(t, &s) == ST_OK;
    if (ok) before = state_of(t);
    long update0 = t->host.update;
    int rc = ok ? st_cuda_trainer_update(t, &s) : ST_ERR_INTERNAL;
    int first = st_trace_first(&tr);
    const st_trace_record *r = first >= 0 ? &tr.rec[first] : NULL;
    int hit = ok && rc == ST_ERR_NUMERIC && tr.tripped && first == id && r->step == step && r->index == index;
    if (!hit) {
        char line[400] = "";
        if (first >= 0) st_trace_record_str(&tr, first, line, sizeof line);
        fprintf(stderr, "  injection %s (%s): rc %d, first: %s\n", spec, st_trace_mode_name(mode), rc,
                first >= 0 ? line : "none");
    }
    float *after = hit ? state_of(t) : NULL;
    size_t P = t->host.table.total;
    int restored =
        hit && before && after && memcmp(before, after, sizeof(float) * 3 * P) == 0 && t->host.update == update0;
    if (hit && !restored) fprintf(stderr, "  injection %s: the trainer is not back at its pre-step state\n", spec);
    free(before), free(after);
    st_cuda_trainer_set_trace(t, NULL);
    st_trace_free(&tr);
    return hit && restored;
}

/* The tracer inside the graphs, in two cases (so that the sanitizer runs
 * can put them in separate processes): sentinel < 0, a clean run in full
 * mode and then injections at labels spread over the table; else the
 * sentinel mode's replays, for the names of the list below at even
 * (sentinel 0) or odd (1) positions. */
static void tracer(const st_market *m, int sentinel) {
    if (sentinel < 0)
        printf("4. NaN/Inf tracer inside the graphs: full mode\n");
    else
        printf("4%c. NaN/Inf tracer inside the graphs: sentinel mode, the %s names\n", sentinel ? 'c' : 'b',
               sentinel ? "odd" : "even");
    st_train_config c = small_config();
    st_cuda_trainer t;
    int rc = st_cuda_trainer_init(&t, &c, m);
    CHECK(rc == ST_OK, "GPU trainer: %s", st_last_error());
    if (rc != ST_OK) return;
    st_label_sizes z;
    st_cuda_trainer_label_sizes(&t, &z);
    st_trace tr;
    CHECK(st_trace_init(&tr, ST_TRACE_FULL, &z, &t.host.table, c.minibatches) == ST_OK, "tracer");
    /* a clean run in full mode: no trip */
    CHECK(st_cuda_trainer_set_trace(&t, &tr) == ST_OK, "attach: %s", st_last_error());
    st_update_stats s;
    for (int i = 0; i < (test_quick() ? 1 : 2); i++)
        CHECK(st_cuda_trainer_update(&t, &s) == ST_OK, "clean full-mode update: %s", st_last_error());
    CHECK(tr.ntrip == 0, "a clean run tripped %d labels", tr.ntrip);
    CHECK(st_cuda_trainer_set_trace(&t, NULL) == ST_OK, "detach");
    if (sentinel < 0) {
        st_rng g = st_rng_make(99, ST_STREAM_TEST);
        int tried = 0, hits = 0, every = test_quick() ? 110 : 1, all = 0;
        for (int id = 0; id < tr.labels.n; id++) {
            const st_label *l = &tr.labels.l[id];
            if (l->phase == ST_PHASE_SAVED) continue; /* the CPU model's layout: not scanned on the GPU */
            if (all++ % every) continue;
            int64_t n = l->rows * l->width;
            int64_t index = (int64_t)st_rng_below(&g, (uint32_t)(n < 4000000000LL ? n : 4000000000LL));
            tried++;
            hits += inject_one(&t, ST_TRACE_FULL, id, t.host.update, index, 0);
        }
        printf("  full mode, step %ld: %d of %d injections named at their label, step and index\n", t.host.update, hits,
               tried);
        CHECK(tried > 300 / every && hits == tried, "%d of %d injections found", hits, tried);
    } else {
        const char *names[] = {"env_reward",  "act_vsn_out",  "train_vsn_out", "bwd_du0",
                               "grad_w_in_W", "optim_w_in_W", "train_loss",    "step_entry_w_in_b"};
        const size_t n_names = test_quick() ? 6 : sizeof names / sizeof names[0];
        int sh = 0, sn = 0;
        for (size_t i = (size_t)sentinel; i < n_names; i += 2) {
            int id = st_labels_find(&tr.labels, names[i]);
            if (id < 0) {
                printf("  (no label %s in this table)\n", names[i]);
                continue;
            }
            sn++;
            sh += inject_one(&t, ST_TRACE_SENTINEL, id, t.host.update + 1, 0, 1);
        }
        printf("  sentinel mode, trip at the second step: %d of %d replays named the injected label\n", sh, sn);
        CHECK(sn >= 3 && sh == sn, "%d of %d sentinel trips named", sh, sn);
    }
    st_trace_free(&tr);
    st_cuda_trainer_free(&t);
    st_train_config_free(&c); /* the trainers only borrowed its strings */
}

static void bf16_update(const st_market *m) {
    printf("5. bf16 matrix products: one update against the CPU\n");
    st_train_config c = small_config();
    free(c.precision);
    c.precision = strdup("bf16");
    st_trainer cpu;
    st_cuda_trainer gpu;
    int rc = st_trainer_init(&cpu, &c, m), rg = st_cuda_trainer_init(&gpu, &c, m);
    CHECK(rc == ST_OK && rg == ST_OK, "trainers: %s", st_last_error());
    st_update_stats sc, sg;
    if (rc == ST_OK && rg == ST_OK) {
        rc = st_trainer_update(&cpu, &sc);
        rg = st_cuda_trainer_update(&gpu, &sg);
        CHECK(rc == ST_OK && rg == ST_OK, "updates: %s", st_last_error());
    }
    if (rc == ST_OK && rg == ST_OK && st_cuda_trainer_download_rollout(&gpu) == ST_OK) {
        int N = cpu.N, mism = 0;
        for (int i = 0; i < N; i++)
            mism += cpu.r_action[i] != gpu.host.r_action[i];
        printf("  rollout actions: %d of %d differ (bf16 logits move ties)\n", mism, N);
        CHECK(mism <= N / 20, "%d of %d actions differ", mism, N);
        CHECK_PARITY("bf16 rollout values", rel_err(gpu.host.r_value, cpu.r_value, N), 2e-2);
        size_t P = cpu.table.total;
        float *w = host_floats(P);
        CHECK(st_cuda_trainer_download(&gpu, w, NULL, NULL) == ST_OK, "download");
        CHECK_PARITY("bf16 weights after the update", rel_err(w, cpu.w, P), 2e-2);
        free(w);
        CHECK(isfinite(sg.loss.loss) && isfinite(sg.grad_norm), "bf16 update not finite");
        printf("  CPU loss %.6f grad norm %.6f | GPU bf16 loss %.6f grad norm %.6f\n", sc.loss.loss, sc.grad_norm,
               sg.loss.loss, sg.grad_norm);
    }
    if (rc == ST_OK || cpu.table.total) st_trainer_free(&cpu);
    st_cuda_trainer_free(&gpu);
    st_train_config_free(&c); /* the trainers only borrowed its strings */
}

static void learning_run(void) {
    printf("6. learning run, tiny preset, 40 updates\n");
    enum { UPDATES = 40 };
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.updates = UPDATES;
    st_market m;
    st_data_opts o = st_data_opts_default(c.dims.K);
    o.use_cache = 0;
    CHECK(st_market_synthetic((uint64_t)c.market_seed, 4, 4000, &o, &m) == ST_OK, "market: %s", st_last_error());
    st_cuda_trainer t;
    int rc = st_cuda_trainer_init(&t, &c, &m);
    CHECK(rc == ST_OK, "GPU trainer: %s", st_last_error());
    double secs = 0, first = 0, last = 0;
    int finite = 1, done = 0, nf = 0, nl = 0;
    for (int u = 0; rc == ST_OK && u < UPDATES; u++) {
        st_update_stats s;
        rc = st_cuda_trainer_update(&t, &s);
        if (rc != ST_OK) break;
        done++;
        secs += s.seconds;
        finite &= isfinite(s.loss.loss) && isfinite(s.grad_norm) && isfinite(s.loss.entropy);
        if (u == 0 || u == UPDATES - 1)
            printf("  update %2d: loss %.4f entropy %.4f grad norm %.4f mean episode R %.3f (%.3f s)\n", u + 1,
                   s.loss.loss, s.loss.entropy, s.grad_norm, s.mean_episode_R, s.seconds);
        if (!isnan(s.mean_episode_R) && u < UPDATES / 4) first += s.mean_episode_R * s.episodes, nf += s.episodes;
        if (!isnan(s.mean_episode_R) && u >= UPDATES * 3 / 4) last += s.mean_episode_R * s.episodes, nl += s.episodes;
    }
    CHECK(rc == ST_OK && done == UPDATES, "update %d failed: %s", done + 1, st_last_error());
    CHECK(finite, "a non-finite loss or grad norm");
    long steps = (long)done * c.dims.T * c.dims.B;
    printf("  %ld env steps in %.2f s: %.0f env steps/s (update incl. PPO epochs)\n", steps, secs,
           secs > 0 ? steps / secs : 0.0);
    printf("  mean episode R: first quarter %.3f, last quarter %.3f (information; the CPU test_learning bounds "
           "learning)\n",
           nf ? first / nf : NAN, nl ? last / nl : NAN);
    st_cuda_trainer_free(&t);
    st_market_free(&m);
    st_train_config_free(&c);
}

#ifdef ST_HAVE_CUDA
/* Case 7 (the module comment). */
static void train_table(const st_market *m) {
    const int nu = test_quick() ? 2 : 3;
    printf("7. the training bar table: %d updates with it on (twice) and off\n", nu);
    st_train_config c = small_config();
    st_cuda_trainer t[3];
    double sr[3][21];
    int rr[3];
    three_runs(&c, m, nu, st_cuda_model_set_train_table, ST_CUDA_TRAIN_TABLE_ON, ST_CUDA_TRAIN_TABLE_OFF,
               ST_CUDA_TRAIN_TABLE_AUTO, t, sr, rr);
    st_cuda_trainer *on1 = &t[0], *off = &t[2];
    CHECK(on1->mb_rows && on1->model.tt && !off->mb_rows && !off->model.tt,
          "the runs with the table on have one (tiny preset, Dv 8) and the run with it off none");
    CHECK(st_cuda_model_train_table_wanted(&c.dims, on1->host.mb, on1->feat.rows),
          "the default choice takes the table for the small config's minibatches");
    if (rr[0] == ST_OK && rr[1] == ST_OK)
        same_runs("two runs with the training table", &t[0], &t[1], sr[0], sr[1], 7 * (size_t)nu);
    if (rr[0] == ST_OK && rr[2] == ST_OK) {
        size_t P = on1->host.table.total;
        float *a = host_floats(3 * P), *b = host_floats(3 * P);
        st_cuda_trainer_download(on1, a, a + P, a + 2 * P);
        st_cuda_trainer_download(off, b, b + P, b + 2 * P);
        CHECK_PARITY("weights, table on vs off", rel_err(a, b, P), 1e-5);
        printf("  %-36s rel err %.3e (printed)\n", "Adam m, table on vs off", rel_err(a + P, b + P, P));
        int ra = st_cuda_trainer_download_rollout(on1), rb = st_cuda_trainer_download_rollout(off);
        CHECK(ra == ST_OK && rb == ST_OK, "rollout download: %s", st_last_error());
        long mism = 0;
        for (long i = 0; ra == ST_OK && rb == ST_OK && i < on1->host.N; i++)
            mism += on1->host.r_action[i] != off->host.r_action[i];
        printf("  last rollout's actions, table on vs off: %ld of %ld differ\n", mism, (long)on1->host.N);
        free(a), free(b);
    }
    for (int i = 0; i < 3; i++)
        st_cuda_trainer_free(&t[i]);
    st_train_config_free(&c);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
    st_market m;
    st_data_opts o = st_data_opts_default(32);
    o.use_cache = 0;
    CHECK(st_market_synthetic(3, 2, 1500, &o, &m) == ST_OK, "market: %s", st_last_error());
    clock_t c0 = clock();
    /* cases 0-7 (SSMTRADE_TEST_PART, tests/test.h); quick: the sanitizer runs */
    if (test_part(0)) parity_one_update(&m, 0);
    if (test_part(1)) determinism(&m);
    if (test_part(2)) resume(&m);
    if (test_part(3)) tracer(&m, -1);
    if (test_part(4)) tracer(&m, 0);
    if (test_part(5)) tracer(&m, 1);
#ifdef ST_HAVE_CUDA
    if (test_part(6)) train_table(&m);
#endif
    if (test_part(7)) parity_one_update(&m, 1);
    if (!test_quick() && test_part(0)) bf16_update(&m); /* the fp32 path covers the same kernels */
    st_market_free(&m);
    if (!test_quick() && test_part(1)) learning_run();
    printf("CPU time %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    TEST_MAIN_END();
}
