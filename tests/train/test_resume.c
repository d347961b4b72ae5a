/* test_resume.c: a run of 2N updates equals N updates, a checkpoint, and N
 * more from it, bit for bit: weights, AdamW moments and environment state.
 * Also: the same seed twice gives the same run, another seed another. */
#include <unistd.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "data/dataset.h"
#include "test.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

static st_train_config small_config(void) {
    st_train_config c;
    st_train_config_default(&c, "tiny");
    c.dims.B = 8;
    c.dims.T = 8;
    c.updates = 4;
    c.minibatches = 2;
    c.epochs = 2;
    c.episode_length = 12; /* episodes end inside the run: resets are covered */
    c.seed = 5;
    return c;
}

static int run(const st_train_config *c, const st_market *m, int n, st_trainer *t) {
    int rc = st_trainer_init(t, c, m);
    for (int i = 0; rc == ST_OK && i < n; i++) {
        st_update_stats s;
        rc = st_trainer_update(t, &s);
    }
    return rc;
}

static int same_state(const st_trainer *a, const st_trainer *b) {
    size_t P = a->table.total;
    int B = a->env.B;
    return memcmp(a->w, b->w, sizeof(float) * P) == 0 && memcmp(a->adam_m, b->adam_m, sizeof(float) * P) == 0 &&
           memcmp(a->adam_v, b->adam_v, sizeof(float) * P) == 0 &&
           memcmp(a->env.equity_R, b->env.equity_R, sizeof(double) * B) == 0 &&
           memcmp(a->env.bar, b->env.bar, sizeof(int) * B) == 0 &&
           memcmp(a->env.episode, b->env.episode, sizeof(uint32_t) * B) == 0 &&
           memcmp(a->ctx, b->ctx, sizeof(float) * (size_t)B * a->cfg.dims.C) == 0 && a->update == b->update &&
           a->env_steps == b->env_steps;
}

int main(void) {
    st_market m;
    st_data_opts o = st_data_opts_default(32);
    o.use_cache = 0;
    CHECK(st_market_synthetic(3, 2, 1500, &o, &m) == ST_OK, "market: %s", st_last_error());
    st_train_config c = small_config();

    st_trainer straight, again;
    CHECK(run(&c, &m, 4, &straight) == ST_OK, "straight run: %s", st_last_error());
    CHECK(run(&c, &m, 4, &again) == ST_OK, "second run");
    CHECK(same_state(&straight, &again), "the same seed does not give the same run");
    st_trainer_free(&again);

    /* two updates, checkpoint, a fresh process-like restore, two more */
    st_trainer first;
    CHECK(run(&c, &m, 2, &first) == ST_OK, "first half");
    char path[] = "/tmp/st_resume_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(st_checkpoint_save(path, &first) == ST_OK, "save: %s", st_last_error());
    st_trainer_free(&first);
    st_safetensors f;
    CHECK(st_safetensors_open(path, &f) == ST_OK, "open checkpoint");
    st_train_config c2;
    CHECK(st_checkpoint_config(&f, &c2) == ST_OK, "config from checkpoint: %s", st_last_error());
    CHECK(c2.dims.B == 8 && c2.episode_length == 12 && c2.seed == 5 && c2.updates == 4, "config round trip");
    st_trainer resumed;
    CHECK(st_trainer_init(&resumed, &c2, &m) == ST_OK && st_checkpoint_restore(&f, &resumed) == ST_OK,
          "restore: %s", st_last_error());
    st_safetensors_close(&f);
    CHECK(resumed.update == 2, "restored update counter %ld", resumed.update);
    for (int i = 0; i < 2; i++) {
        st_update_stats s;
        CHECK(st_trainer_update(&resumed, &s) == ST_OK, "resumed update");
    }
    CHECK(same_state(&straight, &resumed), "2 + 2 resumed updates differ from 4 straight ones");

    /* another seed gives another run */
    c.seed = 6;
    st_trainer other;
    CHECK(run(&c, &m, 1, &other) == ST_OK, "other seed");
    CHECK(memcmp(other.w, straight.w, sizeof(float) * other.table.total) != 0, "seed has no effect");

    /* a checkpoint of other data is refused on restore */
    st_market m2;
    CHECK(st_market_synthetic(4, 2, 1500, &o, &m2) == ST_OK, "second market");
    st_trainer wrong;
    CHECK(st_safetensors_open(path, &f) == ST_OK && st_trainer_init(&wrong, &c2, &m2) == ST_OK, "init on m2");
    CHECK(st_checkpoint_restore(&f, &wrong) == ST_ERR_INPUT && strstr(st_last_error(), "normalisation"),
          "restore on other data must be refused: %s", st_last_error());
    st_safetensors_close(&f);
    st_trainer_free(&wrong);
    unlink(path);
    st_trainer_free(&other);
    st_trainer_free(&resumed);
    st_trainer_free(&straight);
    st_train_config_free(&c);
    st_train_config_free(&c2);
    st_market_free(&m);
    st_market_free(&m2);
    TEST_MAIN_END();
}
