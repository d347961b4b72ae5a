/* test_safetensors.c: write/read round trip, format details (8-byte aligned
 * header, little-endian length), atomic replacement and clear errors on
 * malformed files. */
#include "core/error.h"
#include "core/safetensors.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

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
    fp = fopen(path, "wb");
    const char *bad = "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,64]}}";
    uint64_t n = strlen(bad);
    fwrite(&n, 8, 1, fp);
    fwrite(bad, 1, n, fp);
    fclose(fp);
    CHECK(st_safetensors_open(path, &f) == ST_OK, "open");
    float x4[4];
    int64_t s4[1] = {4};
    CHECK(st_safetensors_read(&f, "x", ST_DT_F32, 1, s4, x4) == ST_ERR_INPUT && strstr(st_last_error(), "outside"),
          "offsets past the end refused: %s", st_last_error());
    st_safetensors_close(&f);
    unlink(path);
    TEST_MAIN_END();
}
