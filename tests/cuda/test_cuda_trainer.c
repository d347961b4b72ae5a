/* test_cuda_trainer.c: the GPU trainer (train/trainer_cuda.h) against the
 * CPU trainer (train/trainer.h), and on its own:
 *  1. one update from the same initial state on both: the initial weights
 *     are the same bits on the device; the rollout actions are the same
 *     (same uniforms, same inverse-CDF rule; the logits agree to ~1e-6, so
 *     a choice can only differ at a tie: the mismatch count is printed and
 *     must be 0 on this seed), log pi(a) and the values agree within 1e-5
 *     relative (forward bound of issue 6), the rewards are the same bits
 *     (the environments are the same CPU code given the same actions), GAE
 *     advantages and returns within 1e-4; after the update the weights
 *     agree within 1e-4 relative (float reductions differ in order; issue
 *     6's bound), the AdamW moments within 1e-3 (m and v are built from the
 *     gradients alone, where the 1e-4 gradient bound is amplified by the
 *     clip's norm ratio; printed), and the loss statistics and mean
 *     pre-clip grad norm within 1e-4;
 *  2. determinism: two GPU runs of 3 updates give bit-identical weights,
 *     moments and loss statistics;
 *  3. a short learning run at the tiny preset (40 updates) finishes with
 *     finite losses; env steps per second on the GPU are printed (the CPU
 *     environments dominate at this model size).
 * Skips (77) without a GPU. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "core/error.h"
#include "cuda/cuda_test.h"
#include "data/dataset.h"
#include "train/trainer.h"
#include "train/trainer_cuda.h"

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
    return c;
}

static double rel_errd(const double *a, const double *b, int n) {
    double d = 0, m = 0;
    for (int i = 0; i < n; i++) d += (a[i] - b[i]) * (a[i] - b[i]), m += b[i] * b[i];
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

static void stats_vec(const st_update_stats *s, double *v) {
    double x[7] = {s->loss.loss, s->loss.policy, s->loss.value, s->loss.entropy, s->loss.approx_kl,
                   s->loss.clipfrac, s->grad_norm};
    memcpy(v, x, sizeof x);
}

static float *host_floats(size_t n) { return calloc(n + 1, sizeof(float)); }

static void parity_one_update(const st_market *m) {
    printf("1. one update, CPU vs GPU\n");
    st_train_config c = small_config();
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
    printf("  CPU loss %.6f grad norm %.6f | GPU loss %.6f grad norm %.6f\n", sc.loss.loss, sc.grad_norm,
           sg.loss.loss, sg.grad_norm);
    CHECK_PARITY("loss statistics and grad norm", rel_errd(vg, vc, 7), 1e-4);
    CHECK(sg.mean_reward == sc.mean_reward && sg.episodes == sc.episodes, "rollout reward statistics differ");
    /* sync_host fills the host trainer (what checkpoints read) with the device state */
    CHECK(st_cuda_trainer_sync_host(&gpu) == ST_OK && memcmp(gpu.host.w, w, sizeof(float) * P) == 0 &&
              memcmp(gpu.host.adam_v, av, sizeof(float) * P) == 0,
          "sync_host did not copy the device weights and moments");
done:
    free(w), free(am), free(av);
    st_trainer_free(&cpu);
    st_cuda_trainer_free(&gpu);
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

static void determinism(const st_market *m) {
    printf("2. determinism: two GPU runs of 3 updates\n");
    st_train_config c = small_config();
    st_cuda_trainer a, b;
    double sa[21], sb[21];
    int ra = run_gpu(&c, m, 3, &a, sa), rb = run_gpu(&c, m, 3, &b, sb);
    CHECK(ra == ST_OK && rb == ST_OK, "GPU runs: %s", st_last_error());
    if (ra == ST_OK && rb == ST_OK) {
        size_t P = a.host.table.total;
        float *wa = host_floats(3 * P), *wb = host_floats(3 * P);
        st_cuda_trainer_download(&a, wa, wa + P, wa + 2 * P);
        st_cuda_trainer_download(&b, wb, wb + P, wb + 2 * P);
        long diff = 0;
        for (size_t i = 0; i < 3 * P; i++) diff += memcmp(wa + i, wb + i, sizeof(float)) != 0;
        printf("  %ld of %zu weight/moment floats differ between the runs\n", diff, 3 * P);
        CHECK(diff == 0, "two GPU runs differ in %ld weight/moment floats", diff);
        CHECK(memcmp(sa, sb, sizeof sa) == 0, "two GPU runs differ in their loss statistics");
        CHECK(memcmp(a.host.r_action, b.host.r_action, sizeof(int) * a.host.N) == 0, "rollout actions differ");
        free(wa), free(wb);
    }
    st_cuda_trainer_free(&a);
    st_cuda_trainer_free(&b);
}

static void learning_run(void) {
    printf("3. learning run, tiny preset, 40 updates\n");
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
           "learning)\n", nf ? first / nf : NAN, nl ? last / nl : NAN);
    st_cuda_trainer_free(&t);
    st_market_free(&m);
}

int main(void) {
    CUDA_TEST_BEGIN();
    st_market m;
    st_data_opts o = st_data_opts_default(32);
    o.use_cache = 0;
    CHECK(st_market_synthetic(3, 2, 1500, &o, &m) == ST_OK, "market: %s", st_last_error());
    clock_t c0 = clock();
    parity_one_update(&m);
    determinism(&m);
    st_market_free(&m);
    learning_run();
    printf("CPU time %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    TEST_MAIN_END();
}
