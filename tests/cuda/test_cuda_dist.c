/* test_cuda_dist.c: data-parallel training (train/trainer_cuda.h,
 * st_cuda_trainer_init_dist; issue 8) on ONE GPU. NCCL refuses two ranks on
 * one device, so the ranks here are threads of this process with a test
 * double of the collectives (st_dist_ops below: host barriers, the ranks'
 * device buffers read through plain copies on the legacy stream, which
 * each rank waits for before it leaves; reductions in rank order), and
 * one rank's GPU work at a time (a mutex handed over at every collective:
 * the ranks' graphs share the per-device scratch of the matrix products).
 * The trainer's code path is the one NCCL drives, collective for
 * collective; only the transport differs.
 *  1. 2 ranks x B/2 environments against 1 x B, same seed, 20 updates:
 *     the ranks' weights are the same bits as each other, and within 1e-5
 *     relative of the one-GPU run (issue 8's bound), AdamW moments within
 *     1e-4; the last rollout's actions are the same (mapped through the
 *     gathered layout), the environments' state (gathered to the host as
 *     a checkpoint takes it) is the one-GPU run's bit for bit, the loss
 *     statistics within 1e-5; every rank takes the training bar table
 *     (st_cuda_model_train_table_wanted) where one GPU does; 4 and 8 ranks
 *     likewise (6 updates);
 *  2. B or the minibatch not divisible by the ranks: ST_ERR_INPUT naming it;
 *  3. the tracer: an injection on rank 1 only; both ranks stop with
 *     ST_ERR_NUMERIC at the same update, rank 1 names the injected label,
 *     and both say the first non-finite value appeared on rank 1;
 *  4. checkpoints are the one-GPU format: 1 GPU x 2 updates, checkpoint,
 *     2 ranks x 2 more, and 2 ranks x 2, checkpoint (rank 0, environments
 *     gathered), 1 GPU x 2 more, each against 1 GPU x 4 straight: weights
 *     within 1e-5, environments bit-identical, counters equal.
 * SSMTRADE_TEST_QUICK (the sanitizer runs): half the rollout and one epoch
 * an update, 1 update in case 1 (2 ranks only), the injection in case 3 at
 * update 0, case 4 at 1 + 1 updates.
 * Skips (77) without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "cuda/cuda_test.h"
#include "data/dataset.h"
#include "dist/dist.h"
#include "trace/trace.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_cuda.h"

#ifdef ST_HAVE_CUDA

/* ---- the test double: ranks as threads --------------------------------------------- */

enum { MAX_RANKS = 8 };

typedef struct {
    int world;
    pthread_mutex_t lock; /* the barrier's */
    pthread_cond_t cond;
    int arrived, generation, aborted;
    pthread_mutex_t gpu; /* held by the rank whose work is on the GPU */
    void *buf[MAX_RANKS];
} tworld;

typedef struct {
    tworld *w;
    int rank;
} trank;

/* 0 once every rank has arrived; -1 when a rank gave up (tw_abort). */
static int tw_barrier(tworld *w) {
    pthread_mutex_lock(&w->lock);
    int gen = w->generation, rc = 0;
    if (++w->arrived == w->world) {
        w->arrived = 0;
        w->generation++;
        pthread_cond_broadcast(&w->cond);
    } else {
        while (gen == w->generation && !w->aborted) pthread_cond_wait(&w->cond, &w->lock);
    }
    if (w->aborted) rc = -1;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static void tw_abort(tworld *w) {
    pthread_mutex_lock(&w->lock);
    w->aborted = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Enter: this rank's stream done, its buffer posted, the GPU handed over. */
static int tw_enter(st_dist *d, void *buf, void *stream) {
    trank *r = d->ctx;
    if (cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess)
        return ST_FAIL(ST_ERR_DEVICE, "rank %d: stream failed before a collective", d->rank);
    r->w->buf[d->rank] = buf;
    pthread_mutex_unlock(&r->w->gpu);
    if (tw_barrier(r->w) != 0) {
        pthread_mutex_lock(&r->w->gpu);
        return ST_FAIL(ST_ERR_DEVICE, "rank %d: a peer rank stopped", d->rank);
    }
    return ST_OK;
}

/* Leave: this rank's copies done (cudaMemcpy between device buffers, or
 * from pageable host memory, may return before the copy has landed, and
 * the trainer's stream does not wait for the legacy stream), every rank
 * done, the GPU taken back. */
static int tw_leave(st_dist *d) {
    trank *r = d->ctx;
    int synced = cudaStreamSynchronize(0) == cudaSuccess;
    int rc = tw_barrier(r->w);
    if (!synced) rc = -1;
    pthread_mutex_lock(&r->w->gpu);
    return rc == 0 ? ST_OK : ST_FAIL(ST_ERR_DEVICE, "rank %d: a peer rank stopped", d->rank);
}

static int tw_allreduce(st_dist *d, void *buf, size_t n, st_dist_type type, st_dist_op op, void *stream) {
    ST_TRY(tw_enter(d, buf, stream));
    tworld *w = ((trank *)d->ctx)->w;
    size_t es = type == ST_DIST_F64 ? 8 : 4;
    double *acc = calloc(n + 1, sizeof(double));
    unsigned char *part = malloc(n * es + 1);
    int ok = acc && part;
    for (int r = 0; ok && r < w->world; r++) { /* rank order: the same sums on every rank */
        ok = cudaMemcpy(part, w->buf[r], n * es, cudaMemcpyDeviceToHost) == cudaSuccess;
        for (size_t i = 0; ok && i < n; i++) {
            double v = es == 8 ? ((double *)part)[i] : (double)((float *)part)[i];
            acc[i] = r == 0 ? v : op == ST_DIST_MAX ? fmax(acc[i], v) : acc[i] + v;
        }
    }
    int left = tw_barrier(w); /* every rank has read every buffer */
    for (size_t i = 0; ok && i < n; i++) {
        double v = op == ST_DIST_MEAN ? acc[i] / w->world : acc[i];
        if (es == 8) ((double *)part)[i] = v;
        else ((float *)part)[i] = (float)v;
    }
    ok = ok && cudaMemcpy(buf, part, n * es, cudaMemcpyHostToDevice) == cudaSuccess;
    free(acc), free(part);
    int rc = tw_leave(d);
    ST_REQUIRE(ok && left == 0, ST_ERR_DEVICE, "rank %d: the test all-reduce failed", d->rank);
    return rc;
}

static int tw_allgather(st_dist *d, void *buf, size_t bytes, void *stream) {
    ST_TRY(tw_enter(d, buf, stream));
    tworld *w = ((trank *)d->ctx)->w;
    int ok = 1;
    for (int r = 0; r < w->world; r++)
        if (r != d->rank)
            ok &= cudaMemcpy((char *)buf + (size_t)r * bytes, (char *)w->buf[r] + (size_t)r * bytes, bytes,
                             cudaMemcpyDeviceToDevice) == cudaSuccess;
    int rc = tw_leave(d);
    ST_REQUIRE(ok, ST_ERR_DEVICE, "rank %d: the test all-gather failed", d->rank);
    return rc;
}

static const st_dist_ops thread_ops = {tw_allreduce, tw_allgather};

/* ---- runs ------------------------------------------------------------------------------ */

static st_train_config config(int updates) {
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.dims.B = 32;
    c.dims.T = 16;
    c.updates = updates;
    c.minibatches = 2;
    c.epochs = 2;
    c.episode_length = 12; /* resets inside the rollout */
    c.seed = 11;
    /* quick (the sanitizer runs, where racecheck took past 350 s a case): the
     * same kernels in half the rollout and one epoch, episodes still ending
     * inside it */
    if (test_quick()) c.dims.T = 8, c.epochs = 1, c.episode_length = 6;
    return c;
}

typedef struct {
    tworld *w;
    trank me;
    st_dist d;
    const st_market *m;
    st_train_config c;
    int updates, inject_rank; /* inject_rank >= 0: that rank's tracer injects `inject` */
    const char *inject;
    const char *restore, *save; /* a checkpoint every rank starts from / rank 0 writes at the end */
    /* out */
    int rc, init_rc;
    char err[600];
    st_cuda_trainer t;
    st_update_stats last;
    float *w_, *am, *av; /* weights and moments after the run */
    st_trace tr;
    int traced;
} rank_run;

/* Checkpoint `path` into t's host side, then to the device (a rank: its slice). */
static int restore_from(st_cuda_trainer *t, const char *path) {
    st_safetensors f;
    int rc = st_safetensors_open(path, &f);
    if (rc == ST_OK) rc = st_checkpoint_restore(&f, &t->host);
    if (rc == ST_OK) rc = st_cuda_trainer_push_host(t);
    st_safetensors_close(&f);
    return rc;
}

static void *rank_main(void *arg) {
    rank_run *r = arg;
    pthread_mutex_lock(&r->w->gpu);
    r->d = (st_dist){.rank = r->me.rank, .world = r->w->world, .ops = &thread_ops, .ctx = &r->me};
    int rc = r->init_rc = st_cuda_trainer_init_dist(&r->t, &r->c, r->m, &r->d);
    if (rc == ST_OK && r->restore) rc = restore_from(&r->t, r->restore); /* this rank's slice */
    if (rc == ST_OK && r->inject_rank >= 0) {
        st_label_sizes z;
        st_cuda_trainer_label_sizes(&r->t, &z);
        rc = st_trace_init(&r->tr, ST_TRACE_SENTINEL, &z, &r->t.host.table, r->c.minibatches);
        r->traced = rc == ST_OK;
        if (rc == ST_OK && r->me.rank == r->inject_rank) rc = st_trace_set_inject(&r->tr, r->inject);
        if (rc == ST_OK) rc = st_cuda_trainer_set_trace(&r->t, &r->tr);
    }
    for (int u = 0; rc == ST_OK && u < r->updates; u++) rc = st_cuda_trainer_update(&r->t, &r->last);
    if (rc == ST_OK) rc = st_cuda_trainer_sync_host(&r->t); /* collective: the environments gathered */
    if (rc == ST_OK && r->save && r->me.rank == 0) rc = st_checkpoint_save(r->save, &r->t.host);
    if (rc == ST_OK) rc = st_cuda_trainer_download_rollout(&r->t);
    r->rc = rc;
    if (rc != ST_OK) snprintf(r->err, sizeof r->err, "%s", st_last_error());
    if (rc != ST_OK && rc != ST_ERR_NUMERIC) tw_abort(r->w); /* a tracer stop is every rank's, together */
    pthread_mutex_unlock(&r->w->gpu);
    return NULL;
}

/* world ranks of config c for `updates` updates; runs[] filled. restore /
 * save: checkpoint paths (NULL: none). */
static void run_ranks_ck(int world, const st_market *m, const st_train_config *c, int updates, rank_run *runs,
                         int inject_rank, const char *inject, const char *restore, const char *save) {
    static tworld w;
    memset(&w, 0, sizeof w);
    w.world = world;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    pthread_mutex_init(&w.gpu, NULL);
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        memset(&runs[r], 0, sizeof runs[r]);
        runs[r].w = &w;
        runs[r].me = (trank){&w, r};
        runs[r].m = m;
        runs[r].c = *c;
        runs[r].updates = updates;
        runs[r].inject_rank = inject_rank;
        runs[r].inject = inject;
        runs[r].restore = restore;
        runs[r].save = save;
        pthread_create(&th[r], NULL, rank_main, &runs[r]);
    }
    for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
}

static void run_ranks(int world, const st_market *m, const st_train_config *c, int updates, rank_run *runs,
                      int inject_rank, const char *inject) {
    run_ranks_ck(world, m, c, updates, runs, inject_rank, inject, NULL, NULL);
}

static void free_run(rank_run *r) {
    if (r->traced) {
        st_cuda_trainer_set_trace(&r->t, NULL);
        st_trace_free(&r->tr);
    }
    if (r->t.host.table.total) st_cuda_trainer_free(&r->t);
}

static float *weights_of(st_cuda_trainer *t, int which) {
    size_t P = t->host.table.total;
    float *p = calloc(P + 1, sizeof(float));
    st_cuda_trainer_download(t, which == 0 ? p : NULL, which == 1 ? p : NULL, which == 2 ? p : NULL);
    return p;
}

static int env_equal(const st_env *a, const st_env *b) {
    int same = a->B == b->B;
#define ST_ENV_SAME(f, type) same = same && memcmp(a->f, b->f, sizeof(type) * (size_t)a->B) == 0;
    ST_ENV_ARRAYS(ST_ENV_SAME)
#undef ST_ENV_SAME
    return same;
}

static void against_one_gpu(const st_market *m, int world, int updates) {
    printf("1. %d ranks x B/%d against 1 x B, %d updates\n", world, world, updates);
    st_train_config c = config(updates);
    st_cuda_trainer one;
    int rc = st_cuda_trainer_init(&one, &c, m);
    CHECK(rc == ST_OK, "one-GPU trainer: %s", st_last_error());
    st_update_stats s1;
    for (int u = 0; rc == ST_OK && u < updates; u++) rc = st_cuda_trainer_update(&one, &s1);
    if (rc == ST_OK) rc = st_cuda_trainer_sync_host(&one);
    if (rc == ST_OK) rc = st_cuda_trainer_download_rollout(&one);
    CHECK(rc == ST_OK, "one-GPU run: %s", st_last_error());
    rank_run runs[MAX_RANKS];
    run_ranks(world, m, &c, updates, runs, -1, NULL);
    int ok = rc == ST_OK;
    for (int r = 0; r < world; r++) {
        CHECK(runs[r].rc == ST_OK, "rank %d: %s", r, runs[r].err);
        ok &= runs[r].rc == ST_OK;
    }
    if (ok) {
        size_t P = one.host.table.total;
        float *w1 = weights_of(&one, 0), *m1 = weights_of(&one, 1), *v1 = weights_of(&one, 2);
        float *w0 = weights_of(&runs[0].t, 0), *m0 = weights_of(&runs[0].t, 1), *v0 = weights_of(&runs[0].t, 2);
        for (int r = 1; r < world; r++) {
            float *wr = weights_of(&runs[r].t, 0);
            CHECK(memcmp(wr, w0, sizeof(float) * P) == 0, "rank %d's weights differ from rank 0's", r);
            free(wr);
        }
        /* the training bar table is decided from the global minibatch: every rank as one GPU */
        for (int r = 0; r < world; r++)
            CHECK((runs[r].t.mb_rows != NULL) == (one.mb_rows != NULL),
                  "rank %d of %d %s the training bar table and one GPU %s (decided from a rank's share?)", r, world,
                  runs[r].t.mb_rows ? "takes" : "does not take", one.mb_rows ? "does" : "does not");
        double dw = rel_err(w0, w1, P);
        printf("  weights: relative difference %.3e (bound 1e-5); AdamW m %.3e, v %.3e\n", dw, rel_err(m0, m1, P),
               rel_err(v0, v1, P));
        CHECK_PARITY("weights against one GPU", dw, 1e-5);
        CHECK_PARITY("AdamW m against one GPU", rel_err(m0, m1, P), 1e-4);
        CHECK_PARITY("AdamW v against one GPU", rel_err(v0, v1, P), 1e-4);
        /* the last rollout: rank 0 holds every rank's, in the gathered layout */
        const st_cuda_trainer *t0 = &runs[0].t;
        int N = one.host.N, B = c.dims.B, Bl = B / world, Nl = c.dims.T * Bl, mism = 0;
        for (int g = 0; g < N; g++) {
            int step = g / B, b = g % B, at = (b / Bl) * Nl + step * Bl + b % Bl;
            mism += one.host.r_action[g] != t0->host.r_action[at];
        }
        printf("  last rollout: %d of %d actions differ\n", mism, N);
        CHECK(mism == 0, "%d of %d actions of the last rollout differ from one GPU's", mism, N);
        CHECK(env_equal(&t0->host.env, &one.host.env), "the gathered environments differ from one GPU's");
        CHECK(memcmp(t0->host.ctx, one.host.ctx, sizeof(float) * (size_t)B * c.dims.C) == 0,
              "the gathered contexts differ from one GPU's");
        CHECK(t0->host.env_steps == one.host.env_steps && t0->host.update == one.host.update, "counters differ");
        const st_update_stats *sd = &runs[0].last;
        double a[6] = {s1.loss.loss, s1.loss.value, s1.loss.entropy, s1.grad_norm, s1.mean_reward, s1.explained_var};
        double b2[6] = {sd->loss.loss, sd->loss.value, sd->loss.entropy, sd->grad_norm, sd->mean_reward,
                        sd->explained_var};
        for (int i = 0; i < 6; i++)
            CHECK(fabs(a[i] - b2[i]) <= 1e-5 * (1 + fabs(a[i])),
                  "statistic %d of the last update: %.9g vs one GPU %.9g", i, b2[i], a[i]);
        CHECK(sd->episodes == s1.episodes, "episodes %d vs one GPU %d", sd->episodes, s1.episodes);
        free(w1), free(m1), free(v1), free(w0), free(m0), free(v0);
    }
    for (int r = 0; r < world; r++) free_run(&runs[r]);
    if (one.host.table.total) st_cuda_trainer_free(&one);
}

static void refusals(const st_market *m) {
    printf("2. sizes that do not split over the ranks\n");
    st_train_config c = config(1);
    struct {
        int B, minibatches, world;
        const char *says;
    } cases[] = {{30, 2, 4, "--batch 30"}, {32, 64, 3, "--batch 32"}, {32, 256, 4, NULL}};
    /* the last case's minibatch, T * 32 / 256 windows, is 2 (1 in quick mode, where T is 8) */
    char small[64];
    snprintf(small, sizeof small, "minibatch of %d windows", c.dims.T * 32 / 256);
    cases[2].says = small;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c.dims.B = cases[i].B;
        c.minibatches = cases[i].minibatches;
        st_dist d = {.rank = 0, .world = cases[i].world, .ops = &thread_ops};
        st_cuda_trainer t;
        int rc = st_cuda_trainer_init_dist(&t, &c, m, &d);
        CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), cases[i].says),
              "B %d, %d minibatches, %d ranks: rc %d '%s'", cases[i].B, cases[i].minibatches, cases[i].world, rc,
              st_last_error());
        if (rc == ST_OK) st_cuda_trainer_free(&t);
    }
}

static void tracer(const st_market *m) {
    printf("3. the tracer: an injection on rank 1 of 2\n");
    st_train_config c = config(3);
    rank_run runs[2];
    /* update 1 (quick: update 0, one update fewer under the sanitizers), rank 1's element 5 */
    const long at = test_quick() ? 0 : 1;
    const char *spec = at ? "act_logits:1:5" : "act_logits:0:5";
    run_ranks(2, m, &c, 3, runs, 1, spec);
    for (int r = 0; r < 2; r++) {
        printf("  rank %d: rc %d: %s\n", r, runs[r].rc, runs[r].err);
        CHECK(runs[r].rc == ST_ERR_NUMERIC, "rank %d: rc %d, not a tracer stop: %s", r, runs[r].rc, runs[r].err);
        CHECK(strstr(runs[r].err, "appeared on rank 1") != NULL, "rank %d does not name rank 1: %s", r, runs[r].err);
        CHECK(runs[r].t.host.update == at, "rank %d stopped after update %ld, not %ld", r, runs[r].t.host.update, at);
    }
    CHECK(strstr(runs[1].err, "act_logits") != NULL, "rank 1 does not name the injected label: %s", runs[1].err);
    for (int r = 0; r < 2; r++) free_run(&runs[r]);
}

/* One GPU for n updates (from checkpoint `restore` when not NULL), then
 * synced to the host; `save`: its checkpoint. */
static int one_gpu(const st_market *m, const st_train_config *c, int n, const char *restore, const char *save,
                   st_cuda_trainer *t) {
    int rc = st_cuda_trainer_init(t, c, m);
    if (rc == ST_OK && restore) rc = restore_from(t, restore);
    st_update_stats s;
    for (int u = 0; rc == ST_OK && u < n; u++) rc = st_cuda_trainer_update(t, &s);
    if (rc == ST_OK) rc = st_cuda_trainer_sync_host(t);
    if (rc == ST_OK && save) rc = st_checkpoint_save(save, &t->host);
    return rc;
}

/* a (ranks or one GPU) against b (one GPU, straight): weights, environments, counters */
static void same_run(const char *what, st_cuda_trainer *a, st_cuda_trainer *b) {
    size_t P = b->host.table.total;
    float *wa = weights_of(a, 0), *wb = weights_of(b, 0);
    double dw = rel_err(wa, wb, P);
    int same_env = env_equal(&a->host.env, &b->host.env);
    printf("  %-44s weights %.3e, environments %s\n", what, dw, same_env ? "same" : "DIFFER");
    CHECK_PARITY(what, dw, 1e-5);
    CHECK(same_env, "%s: the environments differ", what);
    CHECK(a->host.update == b->host.update && a->host.env_steps == b->host.env_steps, "%s: counters differ", what);
    free(wa), free(wb);
}

static void checkpoints_across_ranks(const st_market *m) {
    printf("4. checkpoints move between rank counts (the one-GPU format)\n");
    /* n straight updates against n/2 + n/2 across a checkpoint (quick: n = 2, for the sanitizers) */
    const int n = test_quick() ? 2 : 4, h = n / 2;
    st_train_config c = config(n);
    char one_ck[64], ranks_ck[64];
    snprintf(one_ck, sizeof one_ck, "/tmp/st_dist_one_%d.safetensors", (int)getpid());
    snprintf(ranks_ck, sizeof ranks_ck, "/tmp/st_dist_ranks_%d.safetensors", (int)getpid());
    st_cuda_trainer straight, half, resumed;
    memset(&half, 0, sizeof half), memset(&resumed, 0, sizeof resumed);
    int rc = one_gpu(m, &c, n, NULL, NULL, &straight);
    CHECK(rc == ST_OK, "%d straight updates on one GPU: %s", n, st_last_error());
    if (rc == ST_OK) rc = one_gpu(m, &c, h, NULL, one_ck, &half);
    CHECK(rc == ST_OK, "%d updates and a checkpoint on one GPU: %s", h, st_last_error());
    rank_run runs[2];
    memset(runs, 0, sizeof runs);
    if (rc == ST_OK) { /* one GPU's checkpoint -> 2 ranks, h more updates */
        run_ranks_ck(2, m, &c, h, runs, -1, NULL, one_ck, NULL);
        CHECK(runs[0].rc == ST_OK && runs[1].rc == ST_OK, "2 ranks from one GPU's checkpoint: %s / %s", runs[0].err,
              runs[1].err);
        if (runs[0].rc == ST_OK) same_run("1 GPU x n/2, then 2 ranks x n/2 vs 1 GPU x n", &runs[0].t, &straight);
        for (int r = 0; r < 2; r++) free_run(&runs[r]);
    }
    if (rc == ST_OK) { /* 2 ranks' checkpoint (after h updates) -> one GPU, h more updates */
        run_ranks_ck(2, m, &c, h, runs, -1, NULL, NULL, ranks_ck);
        CHECK(runs[0].rc == ST_OK && runs[1].rc == ST_OK, "2 ranks and a checkpoint: %s / %s", runs[0].err,
              runs[1].err);
        for (int r = 0; r < 2; r++) free_run(&runs[r]);
        rc = one_gpu(m, &c, h, ranks_ck, NULL, &resumed);
        CHECK(rc == ST_OK, "one GPU from the ranks' checkpoint: %s", st_last_error());
        if (rc == ST_OK) same_run("2 ranks x n/2, then 1 GPU x n/2 vs 1 GPU x n", &resumed, &straight);
    }
    if (straight.host.table.total) st_cuda_trainer_free(&straight);
    if (half.host.table.total) st_cuda_trainer_free(&half);
    if (resumed.host.table.total) st_cuda_trainer_free(&resumed);
    remove(one_ck), remove(ranks_ck);
}

#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    st_market m;
    st_data_opts o = st_data_opts_default(32);
    o.use_cache = 0;
    CHECK(st_market_synthetic(3, 2, 1500, &o, &m) == ST_OK, "market: %s", st_last_error());
    /* cases 0-3 (SSMTRADE_TEST_PART, tests/test.h); quick: the sanitizer runs */
    if (test_part(0)) against_one_gpu(&m, 2, test_quick() ? 1 : 20);
    if (!test_quick() && test_part(0)) against_one_gpu(&m, 4, 6);
    if (!test_quick() && test_part(0)) against_one_gpu(&m, 8, 6); /* issue 9's rank counts, as threads */
    if (test_part(1)) refusals(&m);
    if (test_part(2)) tracer(&m);
    if (test_part(3)) checkpoints_across_ranks(&m);
    st_market_free(&m);
#endif
    TEST_MAIN_END();
}
