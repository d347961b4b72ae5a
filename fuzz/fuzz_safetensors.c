/* fuzz_safetensors.c: libFuzzer harness of the safetensors reader
 * (core/safetensors.h) and of the checkpoint restore (train/checkpoint.h).
 *
 * The input is the bytes of one .safetensors file, written to a temporary
 * file and opened with st_safetensors_open. When it opens, every entry of the
 * header is looked up with st_safetensors_find: a tensor it returns must lie
 * inside the file's data and hold exactly shape x dtype-size bytes, and
 * st_safetensors_read copies it into a buffer of exactly that size (the
 * sanitizer sees any byte outside); a read with a wrong shape must be
 * refused. Then the checkpoint paths, against a trainer built once: the
 * config (st_checkpoint_config, then validated), the weights alone
 * (st_checkpoint_weights against the parameter table) and the whole restore
 * (st_checkpoint_restore: missing tensors, wrong dtypes, shapes that do not
 * match the config, environment state). After a successful restore the
 * environments take one step and give their context, so a restored state
 * that points outside the data is caught. Every refusal must be
 * ST_ERR_INPUT with a message.
 *
 * A second view of the same input reaches the environment state directly
 * (mutations of a whole checkpoint rarely land on its few hundred bytes of
 * it): a valid checkpoint of the trainer, made once, with the bytes of the
 * env.* tensors (instrument, bar, episode bounds, trade, counters, context)
 * replaced by the input's first bytes, then restored and stepped likewise.
 *
 * The trainer is the tiny preset shrunk further (B = 2, D = 4, Dv = 1, ...)
 * on a small synthetic market, so that a whole checkpoint of it is ~48 KB
 * and fits the fuzzer's inputs. With ST_FUZZ_WRITE_SEED=PATH set, the
 * initialisation writes such a checkpoint to PATH (scripts/fuzz.sh seeds
 * the corpus with it). The input goes to a temporary file in $ST_FUZZ_TMPDIR
 * (else /dev/shm or /tmp), left behind when a crash aborts. With
 * ST_FUZZ_VERBOSE set, each input prints how far
 * it got (to see what a corpus reaches). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "data/dataset.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_assert.h"

static char path[256];
static st_train_config config; /* the trainer shares its strings */
static st_market market;
static st_trainer trainer;
static float *weights; /* st_checkpoint_weights' destination, table layout */
static int verbose;
static unsigned char *base;        /* a valid checkpoint of the trainer */
static size_t base_size, env_begin, env_end; /* its bytes; where the env.* tensors' bytes lie */

static void cleanup(void) {
    unlink(path);
    free(weights);
    free(base);
    st_trainer_free(&trainer);
    st_market_free(&market);
    st_train_config_free(&config);
}

static void fail_init(const char *what) {
    fprintf(stderr, "fuzz_safetensors: %s: %s\n", what, st_last_error());
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("ST_FUZZ_TMPDIR"); /* scripts/fuzz.sh: a folder it removes afterwards */
    if (!dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/st_fuzz_XXXXXX.safetensors", dir);
    int fd = mkstemps(path, 12);
    if (fd < 0) fail_init("mkstemps");
    close(fd);

    st_train_config *c = &config;
    if (st_train_config_default(c, "tiny") != ST_OK) fail_init("config");
    c->dims.B = 2;
    c->dims.T = 2;
    c->dims.Dv = 1;
    c->dims.D = 4;
    c->dims.headdim = 4;
    c->dims.N = 2;
    c->dims.Hh = 2;
    c->dims.Q = 4;
    c->minibatches = 1;
    c->episode_length = 16;
    c->seed = 3;
    if (st_train_config_validate(c) != ST_OK) fail_init("config");
    st_data_opts o = st_data_opts_default(c->dims.K);
    o.use_cache = 0;
    if (st_market_synthetic(2, 1, 400, &o, &market) != ST_OK) fail_init("market");
    if (st_trainer_init_host(&trainer, c, &market) != ST_OK) fail_init("trainer");
    weights = malloc(sizeof(float) * trainer.table.total);
    if (!weights) fail_init("weights");
    /* A few steps, so that the saved state has open trades and counters. */
    int actions[2] = {2, 0};
    for (int s = 0; s < 5; s++)
        if (st_env_step(&trainer.env, actions, NULL) != ST_OK) fail_init("step");
    trainer.update = 3;
    trainer.env_steps = 5L * trainer.env.B;
    const char *seed = getenv("ST_FUZZ_WRITE_SEED");
    if (seed && st_checkpoint_save(seed, &trainer) != ST_OK) fail_init("writing the seed checkpoint");
    /* The base of the second view, and the span of its env.* tensors. */
    st_safetensors f;
    if (st_checkpoint_save(path, &trainer) != ST_OK || st_safetensors_open(path, &f) != ST_OK) fail_init("base");
    base_size = f.size;
    base = malloc(base_size);
    if (!base) fail_init("base");
    memcpy(base, f.blob, base_size);
    env_begin = base_size;
    for (const cJSON *e = ((const cJSON *)f.json)->child; e; e = e->next) {
        st_dtype dt;
        int nd;
        int64_t sh[4];
        const void *d;
        size_t n;
        if (strncmp(e->string, "env.", 4) != 0 || st_safetensors_find(&f, e->string, &dt, &nd, sh, &d, &n) != ST_OK)
            continue;
        size_t at = (size_t)((const unsigned char *)d - f.blob);
        if (at < env_begin) env_begin = at;
        if (at + n > env_end) env_end = at + n;
    }
    st_safetensors_close(&f);
    if (env_begin >= env_end) fail_init("no env.* tensors in the base checkpoint");
    verbose = getenv("ST_FUZZ_VERBOSE") != NULL;
    atexit(cleanup);
    return 0;
}

static void say(const char *stage, int rc) {
    if (verbose) fprintf(stderr, "  %-22s %s\n", stage, rc == ST_OK ? "ok" : st_last_error());
}

static void check_refusal(int rc, const char *what) {
    FUZZ_ASSERT(rc == ST_ERR_INPUT && st_last_error()[0], "%s: status %d, message '%s'", what, rc,
                st_last_error());
}

/* Every tensor of the header: inside the data, the right size, readable. */
static void check_tensors(const st_safetensors *f) {
    for (const cJSON *e = ((const cJSON *)f->json)->child; e; e = e->next) {
        if (!e->string || strcmp(e->string, "__metadata__") == 0) continue;
        st_dtype dt;
        int nd = -1;
        int64_t shape[4] = {0};
        const void *data = NULL;
        size_t bytes = 0;
        st_clear_error();
        int rc = st_safetensors_find(f, e->string, &dt, &nd, shape, &data, &bytes);
        if (rc != ST_OK) {
            check_refusal(rc, "st_safetensors_find");
            continue;
        }
        FUZZ_ASSERT(nd >= 0 && nd <= 4, "'%s': %d dimensions", e->string, nd);
        size_t count = 1;
        for (int d = 0; d < nd; d++) {
            FUZZ_ASSERT(shape[d] >= 0, "'%s': dimension %d is %lld", e->string, d, (long long)shape[d]);
            count *= (size_t)shape[d];
        }
        const unsigned char *p = data, *lo = f->blob + f->data_start, *hi = f->blob + f->size;
        FUZZ_ASSERT(p >= lo && p <= hi && bytes <= (size_t)(hi - p), "'%s': %zu bytes at %td outside the data [%zu, %zu)",
                    e->string, bytes, p - f->blob, f->data_start, f->size);
        FUZZ_ASSERT(bytes == count * st_dtype_size(dt), "'%s': %zu bytes for %zu elements", e->string, bytes, count);
        unsigned char *out = malloc(bytes ? bytes : 1);
        if (!out) continue;
        rc = st_safetensors_read(f, e->string, dt, nd, shape, out);
        FUZZ_ASSERT(rc == ST_OK && memcmp(out, data, bytes) == 0, "'%s': read after find: %s", e->string,
                    st_last_error());
        free(out);
        /* One dimension more: always the wrong shape. */
        int64_t wrong[5] = {shape[0], shape[1], shape[2], shape[3], 1};
        unsigned char spare[8];
        if (nd < 4) check_refusal(st_safetensors_read(f, e->string, dt, nd + 1, wrong, spare), "wrong shape");
    }
}

/* Writes bytes to the harness's file; 0 when that failed. */
static int write_file(const unsigned char *data, size_t size) {
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0) return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fd);
    return done == size;
}

/* The whole restore into the trainer, and when it succeeds one step. */
static void restore_and_step(const st_safetensors *f, const char *stage, size_t size) {
    st_clear_error();
    int rc = st_checkpoint_restore(f, &trainer);
    say(stage, rc);
    if (rc == ST_OK) {
        int actions[2] = {(int)(size % 3), (int)(size / 3 % 3)};
        float ctx[2 * 16];
        st_env_out out = {.ctx = ctx, .ctx_stride = 16};
        FUZZ_ASSERT(st_env_step(&trainer.env, actions, &out) == ST_OK, "step after restore: %s", st_last_error());
        for (int b = 0; b < trainer.env.B; b++)
            st_env_context(&trainer.env, b, ctx + 16 * b);
    } else {
        check_refusal(rc, stage);
    }
}

/* View 1: the input is a whole file. */
static void fuzz_file(const uint8_t *data, size_t size) {
    if (!write_file(data, size)) return;
    st_safetensors f;
    st_clear_error();
    int rc = st_safetensors_open(path, &f);
    say("open", rc);
    if (rc != ST_OK) {
        check_refusal(rc, "st_safetensors_open");
        return;
    }
    check_tensors(&f);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive((const cJSON *)f.json, "__metadata__");
    for (const cJSON *m = meta ? meta->child : NULL; m; m = m->next)
        if (m->string) (void)st_safetensors_meta(&f, m->string);

    st_train_config c;
    memset(&c, 0, sizeof c);
    st_clear_error();
    rc = st_checkpoint_config(&f, &c);
    say("checkpoint config", rc);
    if (rc == ST_OK) {
        rc = st_train_config_validate(&c);
        say("config validate", rc);
        if (rc != ST_OK) check_refusal(rc, "st_train_config_validate");
    } else {
        check_refusal(rc, "st_checkpoint_config");
    }
    st_train_config_free(&c);

    st_clear_error();
    rc = st_checkpoint_weights(&f, &trainer.table, weights);
    say("checkpoint weights", rc);
    if (rc != ST_OK) check_refusal(rc, "st_checkpoint_weights");

    restore_and_step(&f, "checkpoint restore", size);
    st_safetensors_close(&f);
}

/* View 2: the input is the environment state of a valid checkpoint. */
static void fuzz_env_state(const uint8_t *data, size_t size) {
    unsigned char *file = malloc(base_size);
    if (!file) return;
    memcpy(file, base, base_size);
    size_t n = env_end - env_begin < size ? env_end - env_begin : size;
    memcpy(file + env_begin, data, n);
    int ok = write_file(file, base_size);
    free(file);
    if (!ok) return;
    st_safetensors f;
    FUZZ_ASSERT(st_safetensors_open(path, &f) == ST_OK, "the base checkpoint no longer opens: %s", st_last_error());
    restore_and_step(&f, "env-state restore", size);
    st_safetensors_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_file(data, size);
    fuzz_env_state(data, size);
    return 0;
}
