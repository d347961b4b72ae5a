/* tboard.c: the TensorBoard event-file writer of tboard.h.
 *
 * Wire format, as TensorBoard's reader expects it:
 *   record = u64 LE n | u32 LE mask(crc32c(n's 8 bytes)) | payload[n] | u32 LE mask(crc32c(payload))
 *   mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 * Protobuf keys are (field << 3) | wire type: 0 varint, 1 fixed64, 2 length-
 * delimited, 5 fixed32. Multi-byte numbers are emitted byte by byte, so the
 * output does not depend on the host's endianness. */
#include "report/tboard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

/* Longest tag accepted; TensorBoard tags are short names like "loss/value". */
#define ST_TBOARD_MAX_TAG 1024

struct st_tboard {
    FILE *f;
    char *path;
};

/* Bitwise CRC32C: records are a few dozen bytes and written once per update,
 * so a lookup table would buy nothing worth its shared mutable state. */
uint32_t st_crc32c(const void *data, size_t n) {
    const unsigned char *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc ^ 0xFFFFFFFFu;
}

uint32_t st_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* --- protobuf encoding into a fixed buffer; callers size it up front ---- */

typedef struct {
    unsigned char *p;
    size_t n;
} pb_buf;

static void pb_byte(pb_buf *b, unsigned v) { b->p[b->n++] = (unsigned char)v; }

static void pb_varint(pb_buf *b, uint64_t v) {
    while (v >= 0x80) {
        pb_byte(b, (unsigned)(v & 0x7F) | 0x80);
        v >>= 7;
    }
    pb_byte(b, (unsigned)v);
}

static void pb_le(pb_buf *b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        pb_byte(b, (unsigned)(v >> (8 * i)) & 0xFF);
}

static void pb_key(pb_buf *b, int field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

static void pb_bytes(pb_buf *b, int field, const void *s, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void pb_double(pb_buf *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    pb_key(b, field, 1);
    pb_le(b, u, 8);
}

static void pb_float(pb_buf *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    pb_key(b, field, 5);
    pb_le(b, u, 4);
}

/* Bytes a varint of v takes. */
static size_t pb_varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static double wall_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- TFRecord framing ----------------------------------------------------- */

static int write_record(st_tboard *tb, const unsigned char *data, size_t n) {
    unsigned char head[12], tail[4];
    pb_buf h = {head, 0}, t = {tail, 0};
    pb_le(&h, n, 8);
    pb_le(&h, st_crc32c_mask(st_crc32c(head, 8)), 4);
    pb_le(&t, st_crc32c_mask(st_crc32c(data, n)), 4);
    if (fwrite(head, 1, sizeof head, tb->f) != sizeof head || fwrite(data, 1, n, tb->f) != n ||
        fwrite(tail, 1, sizeof tail, tb->f) != sizeof tail)
        return ST_FAIL(ST_ERR_IO, "writing %s: %s", tb->path, strerror(errno));
    return ST_OK;
}

static int write_file_version(st_tboard *tb) {
    static const char version[] = "brain.Event:2";
    unsigned char buf[64];
    pb_buf b = {buf, 0};
    pb_double(&b, 1, wall_time_now());
    pb_bytes(&b, 3, version, sizeof version - 1);
    return write_record(tb, buf, b.n);
}

int st_tboard_scalar(st_tboard *tb, const char *tag, long step, double value) {
    ST_REQUIRE(tb && tb->f, ST_ERR_INTERNAL, "st_tboard_scalar on a closed writer");
    ST_REQUIRE(tag && tag[0], ST_ERR_INPUT, "%s: empty TensorBoard tag", tb->path);
    size_t tag_len = strlen(tag);
    ST_REQUIRE(tag_len <= ST_TBOARD_MAX_TAG, ST_ERR_INPUT, "%s: TensorBoard tag of %zu bytes (max %d)", tb->path,
               tag_len, ST_TBOARD_MAX_TAG);
    /* Value = tag (key, len, bytes) + simple_value (key, 4 bytes). */
    size_t value_len = 1 + pb_varint_len(tag_len) + tag_len + 1 + 4;
    size_t summary_len = 1 + pb_varint_len(value_len) + value_len;
    unsigned char buf[ST_TBOARD_MAX_TAG + 64];
    pb_buf b = {buf, 0};
    pb_double(&b, 1, wall_time_now());
    pb_key(&b, 2, 0);
    pb_varint(&b, (uint64_t)(int64_t)step); /* int64: negatives take 10 bytes, as protobuf says */
    pb_key(&b, 5, 2);
    pb_varint(&b, summary_len);
    pb_key(&b, 1, 2);
    pb_varint(&b, value_len);
    pb_bytes(&b, 1, tag, tag_len);
    pb_float(&b, 2, (float)value);
    return write_record(tb, buf, b.n);
}

/* --- opening -------------------------------------------------------------- */

/* mkdir -p: every prefix of dir that is missing is created. */
static int make_dirs(const char *dir) {
    char path[PATH_MAX];
    size_t n = strlen(dir);
    ST_REQUIRE(n > 0 && n < sizeof path, ST_ERR_INPUT, "bad TensorBoard directory '%s'", dir);
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0') continue;
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return ST_FAIL(ST_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
        path[i] = c;
    }
    struct stat st;
    ST_REQUIRE(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), ST_ERR_IO, "%s is not a directory", dir);
    return ST_OK;
}

/* The host name with anything that would upset a file name replaced. */
static void file_safe_hostname(char *out, size_t cap) {
    if (gethostname(out, cap) != 0 || out[0] == '\0') snprintf(out, cap, "localhost");
    out[cap - 1] = '\0';
    for (char *c = out; *c; c++)
        if (*c == '/' || *c <= ' ' || *c == 0x7F) *c = '_';
}

/* Creates a fresh event file; two writers opened in the same second in the
 * same directory get ".<k>" before ".ssmtrade" rather than one clobbering
 * the other (TensorBoard reads every *tfevents* file). */
static int create_event_file(const char *dir, char **path_out, FILE **f_out) {
    char host[256], path[PATH_MAX];
    file_safe_hostname(host, sizeof host);
    long now = (long)time(NULL);
    for (int k = 0; k < 1000; k++) {
        int len = k == 0 ? snprintf(path, sizeof path, "%s/events.out.tfevents.%ld.%s.ssmtrade", dir, now, host)
                         : snprintf(path, sizeof path, "%s/events.out.tfevents.%ld.%s.%d.ssmtrade", dir, now, host, k);
        ST_REQUIRE(len > 0 && (size_t)len < sizeof path, ST_ERR_INPUT, "TensorBoard path too long under %s", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) return ST_FAIL(ST_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        FILE *f = fdopen(fd, "wb");
        char *copy = strdup(path);
        if (!f || !copy) {
            if (f)
                fclose(f);
            else
                close(fd);
            free(copy);
            unlink(path);
            return ST_FAIL(ST_ERR_MEMORY, "cannot open a stream on %s", path);
        }
        *path_out = copy;
        *f_out = f;
        return ST_OK;
    }
    return ST_FAIL(ST_ERR_IO, "too many event files named for second %ld in %s", now, dir);
}

int st_tboard_open(const char *dir, st_tboard **out) {
    *out = NULL;
    ST_REQUIRE(dir && dir[0], ST_ERR_INPUT, "no TensorBoard directory given");
    ST_TRY(make_dirs(dir));
    st_tboard *tb = calloc(1, sizeof *tb);
    ST_REQUIRE(tb, ST_ERR_MEMORY, "out of memory");
    int rc = create_event_file(dir, &tb->path, &tb->f);
    if (rc == ST_OK) rc = write_file_version(tb);
    if (rc == ST_OK) rc = st_tboard_flush(tb);
    if (rc != ST_OK) {
        if (tb->path) unlink(tb->path);
        st_tboard_close(tb);
        return rc;
    }
    *out = tb;
    return ST_OK;
}

int st_tboard_flush(st_tboard *tb) {
    ST_REQUIRE(tb && tb->f, ST_ERR_INTERNAL, "st_tboard_flush on a closed writer");
    ST_REQUIRE(fflush(tb->f) == 0, ST_ERR_IO, "flushing %s: %s", tb->path, strerror(errno));
    return ST_OK;
}

void st_tboard_close(st_tboard *tb) {
    if (!tb) return;
    if (tb->f) fclose(tb->f);
    free(tb->path);
    free(tb);
}

const char *st_tboard_path(const st_tboard *tb) { return tb ? tb->path : ""; }
