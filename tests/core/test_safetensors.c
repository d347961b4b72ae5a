/* test_safetensors.c: write/read round trip, format details (8-byte aligned
 * header, little-endian length), atomic replacement and clear errors on
 * malformed files: the header is checked whole when a file opens (offsets,
 * sizes, dtypes, overlaps, duplicate names). Fuzzer regressions
 * (fuzz/fuzz_safetensors.c), inline: the crashing header, and the checkpoint
 * restore refusing an environment state outside the data. */
#include "core/error.h"
#include "core/safetensors.h"
#include "data/dataset.h"
#include "test.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

#include <stdint.h>
#include <unistd.h>

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(p, 1, n, fp) == n, "writing %s", path);
    if (fp) fclose(fp);
}

/* A file of header text h (its little-endian length in front) and `data`
 * zero bytes after it; returns the status of opening it. */
static int open_header(const char *path, const char *h, size_t hlen, size_t data, st_safetensors *f) {
    size_t n = 8 + hlen + data;
    unsigned char *b = calloc(n, 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, h, hlen);
    write_bytes(path, b, n);
    free(b);
    return st_safetensors_open(path, f);
}

static void expect_refused(const char *path, const char *h, size_t data, const char *want, const char *what) {
    st_safetensors f;
    int rc = open_header(path, h, strlen(h), data, &f);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), want), "%s: rc %d, message '%s' lacks '%s'", what, rc,
          st_last_error(), want);
    if (rc == ST_OK) st_safetensors_close(&f);
}

static void test_bad_headers(const char *path) {
    /* Fuzzer crash: shape entries and offsets past what a double or size_t
     * holds went through (int64_t) and (size_t) casts (undefined behaviour). */
    expect_refused(path,
                   "{\"x\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,0]},"
                   "\"y\":{\"dtype\":\"U8\",\"shape\":[1e300],\"data_offsets\":[1e19,1.8446744073709552e19]}}",
                   8, "not a whole number in [0, 2^53]", "huge shape (fuzzer crash)");
    /* An element count that wraps around size_t to 0 elements in 0 bytes. */
    expect_refused(path,
                   "{\"x\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", 0,
                   "not what its F64 shape of more than 0 elements needs", "wrapping element count");
    expect_refused(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,64]}}", 16,
                   "data offsets [0, 64] outside the file's 16 bytes of data", "offsets past the end");
    expect_refused(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
                   "not whole numbers", "negative offset");
    expect_refused(path, "{\"x\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 8,
                   "shape entry 0 that is not a whole number", "fractional dimension");
    expect_refused(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
                   "has 8 bytes of data, not what its F32 shape of 3 elements needs", "size against shape");
    expect_refused(path,
                   "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   12, "tensors 'x' [0, 8) and 'y' [4, 12) overlap", "overlapping tensors");
    expect_refused(path,
                   "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[4,12]}}",
                   12, "names tensor 'x' twice", "duplicate names");
    expect_refused(path, "{\"__metadata__\":{\"a\":1}}", 0, "metadata 'a' is not a string", "metadata number");
    expect_refused(path, "{\"x\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "malformed header entry", "dtype not a string");
    expect_refused(path, "{\"x\":[1,2]}", 0, "not an object", "entry not an object");
    /* A string running to the end of the header: the parser gets a
     * NUL-terminated copy, so it cannot read on into the tensor bytes. */
    expect_refused(path, "{\"x\":{\"dtype\":\"F32\\", 64, "header is not a JSON object", "unterminated string");
    expect_refused(path, "{}   x", 0, "its header has bytes after the JSON object", "bytes after the JSON object");

    /* Dtypes of other writers open; asking for one is a clear error. */
    st_safetensors f;
    const char *h = "{\"h\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                    "\"five\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,2],\"data_offsets\":[4,6]},"
                    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[6,6]}}  ";
    CHECK(open_header(path, h, strlen(h), 6, &f) == ST_OK, "BF16 file: %s", st_last_error());
    st_dtype dt;
    int nd;
    int64_t sh[4];
    const void *data;
    size_t bytes;
    CHECK(st_safetensors_find(&f, "h", &dt, &nd, sh, &data, &bytes) == ST_ERR_INPUT &&
              strstr(st_last_error(), "unsupported dtype BF16"),
          "BF16: %s", st_last_error());
    CHECK(st_safetensors_find(&f, "five", &dt, &nd, sh, &data, &bytes) == ST_ERR_INPUT &&
              strstr(st_last_error(), "5 dimensions"),
          "5 dimensions: %s", st_last_error());
    CHECK(st_safetensors_find(&f, "e", &dt, &nd, sh, &data, &bytes) == ST_OK && nd == 2 && sh[0] == 0 &&
              sh[1] == 3 && bytes == 0,
          "empty tensor: %s", st_last_error());
    CHECK(st_safetensors_find(&f, "__metadata__", &dt, &nd, sh, &data, &bytes) == ST_ERR_INPUT, "metadata as tensor");
    st_safetensors_close(&f);
}

/* The trainer of fuzz/fuzz_safetensors.c: the tiny preset shrunk further. */
static int small_trainer(st_train_config *c, st_market *m, st_trainer *t) {
    st_train_config_default(c, "tiny");
    c->dims.B = 2, c->dims.T = 2, c->dims.Dv = 1, c->dims.D = 4, c->dims.headdim = 4;
    c->dims.N = 2, c->dims.Hh = 2, c->dims.Q = 4;
    c->minibatches = 1, c->episode_length = 16, c->seed = 3;
    st_data_opts o = st_data_opts_default(c->dims.K);
    o.use_cache = 0;
    int rc = st_market_synthetic(2, 1, 400, &o, m);
    if (rc == ST_OK) rc = st_trainer_init_host(t, c, m);
    int actions[2] = {2, 0};
    for (int s = 0; rc == ST_OK && s < 5; s++) rc = st_env_step(&t->env, actions, NULL);
    t->update = 3;
    t->env_steps = 10;
    return rc;
}

/* Bytes of a file, and where tensor `name`'s data starts in them. */
static unsigned char *file_bytes(const char *path, size_t *size, const char *name, size_t *at) {
    st_safetensors f;
    if (st_safetensors_open(path, &f) != ST_OK) return NULL;
    st_dtype dt;
    int nd;
    int64_t sh[4];
    const void *data = NULL;
    size_t bytes;
    unsigned char *b = malloc(f.size);
    if (b && st_safetensors_find(&f, name, &dt, &nd, sh, &data, &bytes) == ST_OK) {
        memcpy(b, f.blob, f.size);
        *size = f.size;
        *at = (size_t)((const unsigned char *)data - f.blob);
    } else {
        free(b);
        b = NULL;
    }
    st_safetensors_close(&f);
    return b;
}

/* Restores path patched with n bytes at tensor `name` + skip; returns the status. */
static int restore_patched(const char *path, const char *out, st_trainer *t, const char *name, size_t skip,
                           const void *patch, size_t n) {
    size_t size = 0, at = 0;
    unsigned char *b = file_bytes(path, &size, name, &at);
    if (!b) return -1;
    memcpy(b + at + skip, patch, n);
    write_bytes(out, b, size);
    free(b);
    st_safetensors f;
    int rc = st_safetensors_open(out, &f);
    if (rc == ST_OK) {
        rc = st_checkpoint_restore(&f, t);
        st_safetensors_close(&f);
    }
    return rc;
}

static void test_checkpoint_state(const char *path) {
    st_train_config c;
    st_market m;
    st_trainer t;
    CHECK(small_trainer(&c, &m, &t) == ST_OK, "small trainer: %s", st_last_error());
    CHECK(st_checkpoint_save(path, &t) == ST_OK, "save: %s", st_last_error());
    char out[300];
    snprintf(out, sizeof out, "%s.patched", path);
    int bar0 = t.env.bar[0];
    CHECK(restore_patched(path, out, &t, "env.active", 1, "\x01", 1) == ST_OK && t.env.bar[0] == bar0 &&
              t.update == 3 && t.env_steps == 10,
          "unchanged checkpoint: %s", st_last_error());
    /* Fuzzer crash (heap-buffer-overflow in st_env_step): its input, the one
     * byte 0xF0, over the first byte of the env.* tensors made env.inst[0] =
     * 240 on data of one instrument; restore took it, the next step read
     * the bars of instrument 240. */
    int rc = restore_patched(path, out, &t, "env.inst", 0, "\xf0", 1);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "env.inst[0] = 240, but the data has 1 instruments"),
          "instrument outside the data: rc %d '%s'", rc, st_last_error());
    /* The same family: a bar past the split (the next step reads bar + 1),
     * an episode outside the split, a side outside {-1, 0, 1}, NaN state. */
    int32_t v = m.inst[0].split_end[ST_SPLIT_TRAIN];
    rc = restore_patched(path, out, &t, "env.bar", 4, &v, 4);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "env.bar = ") && strstr(st_last_error(), "outside its episode"),
          "bar past the split: rc %d '%s'", rc, st_last_error());
    v = 1 << 30;
    rc = restore_patched(path, out, &t, "env.ep_last", 0, &v, 4);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "is not inside bars"), "episode past the split: rc %d '%s'",
          rc, st_last_error());
    v = 7;
    rc = restore_patched(path, out, &t, "env.pos", 0, &v, 4);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "env.pos[0] = 7 is outside [-1, 1]"), "side 7: rc %d '%s'", rc,
          st_last_error());
    double nan = NAN;
    rc = restore_patched(path, out, &t, "env.equity_R", 8, &nan, 8);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "env.equity_R[1] = nan is not finite"), "NaN equity: rc %d '%s'",
          rc, st_last_error());
    float fnan = NAN;
    rc = restore_patched(path, out, &t, "adam.v.vsn.embed_w", 0, &fnan, 4);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "'adam.v.vsn.embed_w' holds") &&
              strstr(st_last_error(), "must be finite and >= 0"),
          "NaN moment: rc %d '%s'", rc, st_last_error());
    /* A negative update counter in the metadata. */
    st_trainer_free(&t);
    CHECK(st_trainer_init_host(&t, &c, &m) == ST_OK, "trainer again");
    t.update = -1;
    CHECK(st_checkpoint_save(out, &t) == ST_OK, "save with update -1");
    st_safetensors f;
    rc = st_safetensors_open(out, &f);
    if (rc == ST_OK) {
        rc = st_checkpoint_restore(&f, &t);
        st_safetensors_close(&f);
    }
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "metadata update '-1' is not a count"), "update -1: '%s'",
          st_last_error());
    unlink(out);
    st_trainer_free(&t);
    st_market_free(&m);
    st_train_config_free(&c);
}


int main(void) {
    char path[] = "/tmp/st_test_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    float a[6] = {1.5f, -2, 3, 4, 5e-8f, -6e7f};
    double b[3] = {0.1, 0.2, -0.3};
    int32_t c[2] = {7, -9};
    st_st_tensor t[3] = {
        {"a.weight", ST_DT_F32, 2, {2, 3}, a},
        {"b", ST_DT_F64, 1, {3}, b},
        {"c", ST_DT_I32, 1, {2}, c},
    };
    st_st_meta meta[2] = {{"step", "12"}, {"config", "{\"K\": 32}"}};
    CHECK(st_safetensors_write(path, t, 3, meta, 2) == ST_OK, "write: %s", st_last_error());

    FILE *fp = fopen(path, "rb");
    unsigned char len8[8];
    CHECK(fread(len8, 1, 8, fp) == 8, "read length");
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    fclose(fp);
    CHECK(hlen % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hlen);

    st_safetensors f;
    CHECK(st_safetensors_open(path, &f) == ST_OK, "open: %s", st_last_error());
    float a2[6];
    double b2[3];
    int32_t c2[2];
    int64_t sa[2] = {2, 3}, sb[1] = {3}, sc[1] = {2}, wrong[2] = {3, 2};
    CHECK(st_safetensors_read(&f, "a.weight", ST_DT_F32, 2, sa, a2) == ST_OK && memcmp(a, a2, sizeof a) == 0,
          "a round trip");
    CHECK(st_safetensors_read(&f, "b", ST_DT_F64, 1, sb, b2) == ST_OK && memcmp(b, b2, sizeof b) == 0, "b");
    CHECK(st_safetensors_read(&f, "c", ST_DT_I32, 1, sc, c2) == ST_OK && memcmp(c, c2, sizeof c) == 0, "c");
    CHECK(st_safetensors_meta(&f, "step") && strcmp(st_safetensors_meta(&f, "step"), "12") == 0, "metadata");
    CHECK(st_safetensors_read(&f, "a.weight", ST_DT_F32, 2, wrong, a2) == ST_ERR_INPUT &&
              strstr(st_last_error(), "shape [2,3], expected [3,2]"),
          "shape mismatch message: %s", st_last_error());
    CHECK(st_safetensors_read(&f, "missing", ST_DT_F32, 2, sa, a2) == ST_ERR_INPUT &&
              strstr(st_last_error(), "no tensor named 'missing'"),
          "missing tensor message");
    CHECK(st_safetensors_read(&f, "b", ST_DT_F32, 1, sb, a2) == ST_ERR_INPUT, "dtype mismatch refused");
    st_safetensors_close(&f);

    /* Rewrite replaces atomically and leaves no temp file behind. */
    a[0] = 42;
    CHECK(st_safetensors_write(path, t, 1, NULL, 0) == ST_OK, "rewrite");
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0, "temp file left behind");
    CHECK(st_safetensors_open(path, &f) == ST_OK && st_safetensors_read(&f, "a.weight", ST_DT_F32, 2, sa, a2) == 0 &&
              a2[0] == 42,
          "rewritten content");
    st_safetensors_close(&f);

    /* Writing into a missing folder fails with a message naming the path. */
    CHECK(st_safetensors_write("/nonexistent-dir/x.safetensors", t, 1, NULL, 0) == ST_ERR_IO &&
              strstr(st_last_error(), "/nonexistent-dir/x.safetensors"),
          "io error names the path: %s", st_last_error());

    /* Truncated and garbage files give ST_ERR_INPUT, not a crash. */
    fp = fopen(path, "wb");
    fwrite("\x10\0\0\0\0\0\0\0{\"a\":", 1, 13, fp);
    fclose(fp);
    CHECK(st_safetensors_open(path, &f) == ST_ERR_INPUT, "truncated header refused");
    fp = fopen(path, "wb");
    fwrite("\x08\0\0\0\0\0\0\0[1,2,3] ", 1, 16, fp);
    fclose(fp);
    CHECK(st_safetensors_open(path, &f) == ST_ERR_INPUT, "non-object header refused");
    test_bad_headers(path);
    test_checkpoint_state(path);
    unlink(path);
    TEST_MAIN_END();
}
