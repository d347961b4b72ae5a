/* test_tboard.c: the TensorBoard event writer read back by an independent
 * decoder: CRC32C known answers, TFRecord framing with both CRCs verified,
 * and the Event / Summary / Value protobuf fields decoded and compared with
 * what was written. */
#include "core/error.h"
#include "core/philox.h"
#include "report/tboard.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define N_SCALARS 40

/* One decoded event: what the writer may have set. */
typedef struct {
    int has_wall, has_step, has_version, n_values;
    double wall;
    int64_t step;
    char version[64];
    char tag[2048];
    float value;
} event;

/* The decoder's own CRC32C (table-driven, unlike the writer's bitwise one)
 * and mask, so that the file is checked against the format, not against the
 * writer's code. */
static uint32_t ref_crc32c(const unsigned char *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
    uint32_t c = ~0u;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

static uint32_t ref_mask(uint32_t c) {
    uint32_t rotated = (uint32_t)((c >> 15) | (c << 17));
    return rotated + 0xa282ead8u;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Reads a varint at *p (bounded by end); returns 0 on a truncated one. */
static int varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char c = *(*p)++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return 1;
    }
    return 0;
}

/* Walks the fields of a message: calls back with (field, wire, varint or
 * fixed value, bytes for wire 2). Returns 0 when malformed. */
typedef int (*field_fn)(void *ctx, int field, int wire, uint64_t v, const unsigned char *s, size_t n);

static int walk(const unsigned char *p, size_t len, field_fn fn, void *ctx) {
    const unsigned char *end = p + len;
    while (p < end) {
        uint64_t key, v = 0;
        if (!varint(&p, end, &key)) return 0;
        int field = (int)(key >> 3), wire = (int)(key & 7);
        const unsigned char *s = NULL;
        size_t n = 0;
        if (wire == 0) {
            if (!varint(&p, end, &v)) return 0;
        } else if (wire == 1 || wire == 5) {
            int w = wire == 1 ? 8 : 4;
            if (end - p < w) return 0;
            v = le(p, w);
            p += w;
        } else if (wire == 2) {
            if (!varint(&p, end, &v) || v > (uint64_t)(end - p)) return 0;
            s = p;
            n = (size_t)v;
            p += n;
        } else {
            return 0;
        }
        if (!fn(ctx, field, wire, v, s, n)) return 0;
    }
    return 1;
}

static int on_value(void *ctx, int field, int wire, uint64_t v, const unsigned char *s, size_t n) {
    event *e = ctx;
    if (field == 1 && wire == 2 && n < sizeof e->tag) {
        memcpy(e->tag, s, n);
        e->tag[n] = '\0';
        return 1;
    }
    if (field == 2 && wire == 5) {
        uint32_t u = (uint32_t)v;
        memcpy(&e->value, &u, 4);
        return 1;
    }
    return 0;
}

static int on_summary(void *ctx, int field, int wire, uint64_t v, const unsigned char *s, size_t n) {
    event *e = ctx;
    (void)v;
    if (field != 1 || wire != 2) return 0;
    e->n_values++;
    return walk(s, n, on_value, e);
}

static int on_event(void *ctx, int field, int wire, uint64_t v, const unsigned char *s, size_t n) {
    event *e = ctx;
    if (field == 1 && wire == 1) {
        memcpy(&e->wall, &v, 8);
        e->has_wall = 1;
    } else if (field == 2 && wire == 0) {
        e->step = (int64_t)v;
        e->has_step = 1;
    } else if (field == 3 && wire == 2 && n < sizeof e->version) {
        memcpy(e->version, s, n);
        e->version[n] = '\0';
        e->has_version = 1;
    } else if (field == 5 && wire == 2) {
        return walk(s, n, on_summary, e);
    } else {
        return 0;
    }
    return 1;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* Splits a file into TFRecords, verifying both masked CRCs; returns the
 * number of events decoded into ev (max cap), or -1 on any framing error. */
static int read_events(const char *path, event *ev, int cap) {
    size_t len = 0;
    unsigned char *b = slurp(path, &len);
    if (!b) return -1;
    size_t off = 0;
    int count = 0;
    while (off < len && count < cap) {
        if (len - off < 12) break;
        uint64_t n = le(b + off, 8);
        uint32_t len_crc = (uint32_t)le(b + off + 8, 4);
        if (len_crc != ref_mask(ref_crc32c(b + off, 8)) || n > len - off - 16) break;
        const unsigned char *data = b + off + 12;
        uint32_t data_crc = (uint32_t)le(data + n, 4);
        if (data_crc != ref_mask(ref_crc32c(data, (size_t)n))) break;
        memset(&ev[count], 0, sizeof ev[count]);
        if (!walk(data, (size_t)n, on_event, &ev[count])) break;
        count++;
        off += 12 + (size_t)n + 4;
    }
    int ok = off == len;
    free(b);
    return ok ? count : -1;
}

static void test_crc32c(void) {
    /* Check value of CRC-32C, and the RFC 3720 (iSCSI) B.4 vectors. */
    CHECK(st_crc32c("123456789", 9) == 0xE3069283u, "crc32c('123456789') = %08x", st_crc32c("123456789", 9));
    unsigned char z[32], o[32], inc[32];
    for (int i = 0; i < 32; i++) {
        z[i] = 0;
        o[i] = 0xFF;
        inc[i] = (unsigned char)i;
    }
    CHECK(st_crc32c(z, 32) == 0x8A9136AAu, "crc32c(32 zeros) = %08x", st_crc32c(z, 32));
    CHECK(st_crc32c(o, 32) == 0x62A8AB43u, "crc32c(32 x ff) = %08x", st_crc32c(o, 32));
    CHECK(st_crc32c(inc, 32) == 0x46DD794Eu, "crc32c(0..31) = %08x", st_crc32c(inc, 32));
    CHECK(st_crc32c("", 0) == 0, "crc32c of nothing is 0");
    CHECK(ref_crc32c((const unsigned char *)"123456789", 9) == 0xE3069283u, "the test's own CRC32C is wrong");
    /* Writer and decoder CRCs agree on random buffers of every length to 300. */
    unsigned char buf[300];
    st_rng r = st_rng_make(99, ST_STREAM_TEST);
    for (int i = 0; i < 300; i++)
        buf[i] = (unsigned char)st_rng_below(&r, 256);
    int differ = 0;
    for (size_t n = 0; n <= sizeof buf; n++)
        differ += st_crc32c(buf, n) != ref_crc32c(buf, n);
    CHECK(differ == 0, "writer and decoder CRC32C differ on %d of 301 random buffers", differ);
    /* The mask is a rotation plus a constant: it must move every value. */
    CHECK(st_crc32c_mask(0) == 0xa282ead8u, "mask(0) = %08x", st_crc32c_mask(0));
    CHECK(st_crc32c_mask(0x00008000u) == 0xa282ead9u, "mask rotates right by 15");
}

static void fill_tags(char tags[][300]) {
    static const char *base[] = {"loss/value", "loss/policy", "entropy", "episode/mean_R"};
    for (int i = 0; i < N_SCALARS; i++)
        snprintf(tags[i], 300, "%s_%d", base[i % 4], i);
    /* A tag over 127 bytes: its length needs a two-byte varint. */
    memset(tags[7], 'x', 200);
    tags[7][200] = '\0';
}

static void test_roundtrip(const char *dir) {
    static char tags[N_SCALARS][300];
    fill_tags(tags);
    long steps[N_SCALARS];
    double values[N_SCALARS];
    st_rng r = st_rng_make(2024, ST_STREAM_TEST);
    for (int i = 0; i < N_SCALARS; i++) {
        steps[i] = (long)(i * 37) + (long)st_rng_below(&r, 30);
        values[i] = 100.0 * st_rng_normal(&r);
    }
    steps[5] = 1L << 40; /* a six-byte varint */
    steps[6] = -3;       /* negative int64: ten bytes */

    st_tboard *tb = NULL;
    time_t t0 = time(NULL);
    int rc = st_tboard_open(dir, &tb);
    CHECK(rc == 0 && tb, "open: %s", st_last_error());
    if (!tb) return;
    for (int i = 0; i < N_SCALARS; i++) {
        rc = st_tboard_scalar(tb, tags[i], steps[i], values[i]);
        CHECK(rc == 0, "scalar %d: %s", i, st_last_error());
        if (i == N_SCALARS / 2) CHECK(st_tboard_flush(tb) == 0, "flush: %s", st_last_error());
    }
    CHECK(st_tboard_scalar(tb, "", 1, 1.0) != 0, "an empty tag must be refused");
    char path[4096];
    snprintf(path, sizeof path, "%s", st_tboard_path(tb));
    st_tboard_close(tb);

    const char *name = strrchr(path, '/') + 1;
    char host[256] = "";
    gethostname(host, sizeof host);
    CHECK(strncmp(name, "events.out.tfevents.", 20) == 0, "file name %s", name);
    CHECK(strstr(name, ".ssmtrade") && strcmp(strstr(name, ".ssmtrade"), ".ssmtrade") == 0, "suffix of %s", name);
    CHECK(host[0] == '\0' || strstr(name, host), "host name %s not in %s", host, name);
    long stamp = atol(name + 20);
    CHECK(stamp >= (long)t0 - 1 && stamp <= (long)time(NULL) + 1, "unix time %ld in name", stamp);

    static event ev[N_SCALARS + 8];
    int n = read_events(path, ev, N_SCALARS + 8);
    CHECK(n == N_SCALARS + 1, "decoded %d events, wanted %d (framing/CRC error if -1)", n, N_SCALARS + 1);
    if (n != N_SCALARS + 1) return;
    CHECK(ev[0].has_version && strcmp(ev[0].version, "brain.Event:2") == 0 && ev[0].n_values == 0,
          "first event is not file_version brain.Event:2");
    int bad_tag = 0, bad_step = 0, bad_value = 0, bad_wall = 0;
    double lo = (double)t0 - 5, hi = (double)time(NULL) + 5;
    for (int i = 0; i <= N_SCALARS; i++)
        if (!ev[i].has_wall || ev[i].wall < lo || ev[i].wall > hi) bad_wall++;
    for (int i = 0; i < N_SCALARS; i++) {
        const event *e = &ev[i + 1];
        if (e->n_values != 1 || strcmp(e->tag, tags[i]) != 0) bad_tag++;
        if (!e->has_step || e->step != (int64_t)steps[i]) bad_step++;
        /* simple_value is a float: the stored value is exactly (float)value. */
        if (e->value != (float)values[i]) bad_value++;
    }
    CHECK(bad_wall == 0, "%d events with a missing or implausible wall_time", bad_wall);
    CHECK(bad_tag == 0, "%d tags differ", bad_tag);
    CHECK(bad_step == 0, "%d steps differ", bad_step);
    CHECK(bad_value == 0, "%d values differ", bad_value);
    printf("  %d scalar events read back, both CRCs verified on %d records\n", N_SCALARS, n);

    /* A flipped byte must be caught by the data CRC. */
    size_t len = 0;
    unsigned char *b = slurp(path, &len);
    b[len - 10] ^= 0x01;
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
    free(b);
    CHECK(read_events(path, ev, N_SCALARS + 8) == -1, "a corrupted record was not detected");
}

static void test_two_writers(const char *dir) {
    st_tboard *a = NULL, *b = NULL;
    CHECK(st_tboard_open(dir, &a) == 0 && st_tboard_open(dir, &b) == 0, "two opens: %s", st_last_error());
    if (a && b) CHECK(strcmp(st_tboard_path(a), st_tboard_path(b)) != 0, "two writers share one file");
    st_tboard_close(a);
    st_tboard_close(b);
    st_tboard *c = NULL;
    CHECK(st_tboard_open("/proc/nonexistent/dir", &c) != 0 && c == NULL, "opening under /proc must fail");
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    char base[] = "/tmp/st_tboard_XXXXXX";
    if (!mkdtemp(base)) return 1;
    char dir[256], dir2[256];
    snprintf(dir, sizeof dir, "%s/run", base); /* missing: open must create it */
    snprintf(dir2, sizeof dir2, "%s/two", base);
    test_crc32c();
    test_roundtrip(dir);
    test_two_writers(dir2);
    remove_tree(dir);
    remove_tree(dir2);
    rmdir(base);
    TEST_MAIN_END();
}
