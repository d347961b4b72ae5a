/* cache.c: the binary cache of parsed CSV bars (rules in cache.h).
 *
 * File layout (native byte order; the cache never leaves the machine):
 *   char magic[8] "STBARS01" (a format change bumps it: old caches miss)
 *   uint64 size, int64 mtime_sec, int64 mtime_nsec, uint64 hash  (the key)
 *   int32 n, int32 has_volume
 *   int64 ts[n], double open[n], high[n], low[n], close[n], volume[n]
 * Written to a temporary name and renamed, so that a reader never sees half a
 * file even when several processes load the same data at once. */
#define _XOPEN_SOURCE 700
#include "data/cache.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "data/dataset.h"

static const char MAGIC[8] = {'S', 'T', 'B', 'A', 'R', 'S', '0', '1'};

uint64_t st_hash64(const void *p, size_t n) {
    /* FNV-1a over 8-byte words, then a final avalanche (splitmix64's). */
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

int st_cache_dir(char *buf, size_t size) {
    const char *env = getenv("SSMTRADE_CACHE"), *home = getenv("HOME");
    int n;
    if (env && env[0])
        n = snprintf(buf, size, "%s", env);
    else if (home && home[0])
        n = snprintf(buf, size, "%s/.cache/ssmtrade", home);
    else
        return ST_FAIL(ST_ERR_IO, "no cache folder: neither SSMTRADE_CACHE nor HOME is set");
    if (n < 0 || (size_t)n >= size) return ST_FAIL(ST_ERR_IO, "the cache folder's name is too long");
    return ST_OK;
}

int st_make_dirs(const char *path) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return ST_FAIL(ST_ERR_IO, "path too long: %s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return ST_FAIL(ST_ERR_IO, "cannot create %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) return ST_FAIL(ST_ERR_IO, "cannot create %s: %s", p, strerror(errno));
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ST_FAIL(ST_ERR_IO, "%s is not a folder", p);
    return ST_OK;
}

/* The cache file of a CSV: <dir>/<hash of its absolute path>.bars */
static int cache_path(const char *csv_path, char *out, size_t size) {
    char dir[PATH_MAX], abs[PATH_MAX];
    if (st_cache_dir(dir, sizeof dir) != ST_OK) return -1;
    const char *name = realpath(csv_path, abs) ? abs : csv_path;
    int n = snprintf(out, size, "%s/%016llx.bars", dir, (unsigned long long)st_hash64(name, strlen(name)));
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

typedef struct {
    char magic[8];
    st_cache_key key;
    int32_t n, has_volume;
} cache_header;

static int read_exact(FILE *f, void *p, size_t bytes) { return fread(p, 1, bytes, f) == bytes; }

static int key_equal(const st_cache_key *a, const st_cache_key *b) {
    return a->size == b->size && a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec && a->hash == b->hash;
}

int st_cache_lookup(const char *csv_path, const st_cache_key *key, st_instrument *in) {
    char path[PATH_MAX];
    if (cache_path(csv_path, path, sizeof path) != 0) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    cache_header h;
    int ok = read_exact(f, &h, sizeof h) && memcmp(h.magic, MAGIC, 8) == 0 && key_equal(&h.key, key) && h.n >= 0 &&
             (uint64_t)h.n <= key->size; /* a CSV row takes more than one byte */
    st_instrument got = {0};
    ok = ok && st_instrument_alloc(&got, h.n) == ST_OK;
    if (ok) {
        size_t n = (size_t)h.n;
        ok = read_exact(f, got.ts, n * sizeof *got.ts) && read_exact(f, got.open, n * sizeof(double)) &&
             read_exact(f, got.high, n * sizeof(double)) && read_exact(f, got.low, n * sizeof(double)) &&
             read_exact(f, got.close, n * sizeof(double)) && read_exact(f, got.volume, n * sizeof(double)) &&
             fgetc(f) == EOF;
    }
    fclose(f);
    if (!ok) {
        st_instrument_free(&got);
        st_clear_error(); /* a miss is not an error */
        return 0;
    }
    got.n = h.n;
    got.has_volume = h.has_volume;
    *in = got;
    return 1;
}

static int write_all(FILE *f, const st_cache_key *key, const st_instrument *in) {
    cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.key = *key;
    h.n = in->n;
    h.has_volume = in->has_volume;
    size_t n = (size_t)in->n;
    return fwrite(&h, sizeof h, 1, f) == 1 && fwrite(in->ts, sizeof *in->ts, n, f) == n &&
           fwrite(in->open, sizeof(double), n, f) == n && fwrite(in->high, sizeof(double), n, f) == n &&
           fwrite(in->low, sizeof(double), n, f) == n && fwrite(in->close, sizeof(double), n, f) == n &&
           fwrite(in->volume, sizeof(double), n, f) == n;
}

int st_cache_store(const char *csv_path, const st_cache_key *key, const st_instrument *in) {
    char path[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX + 32];
    if (cache_path(csv_path, path, sizeof path) != 0 || st_cache_dir(dir, sizeof dir) != ST_OK ||
        st_make_dirs(dir) != ST_OK) {
        st_clear_error(); /* no cache is not an error: the data still loads */
        return 0;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return 0;
    int ok = write_all(f, key, in);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return 0;
    }
    return 1;
}
