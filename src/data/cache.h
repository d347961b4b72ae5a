/* cache.h: the binary cache of parsed CSV bars (DESIGN section 3).
 *
 * A parsed file is stored as one binary file under $SSMTRADE_CACHE, or
 * ~/.cache/ssmtrade when that is unset (never beside the CSVs, whose folder
 * may be read-only), named by a hash of the CSV's absolute path. It is reused
 * while the CSV is unchanged: the key is the CSV's size, its modification
 * time and a 64-bit hash of its bytes, all three stored in the cache file and
 * compared on every load. A cache that cannot be read is a miss; one that
 * cannot be written is skipped silently (loading works without a cache). */
#ifndef ST_CACHE_H
#define ST_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "data/market.h"

typedef struct {
    uint64_t size;     /* bytes of the CSV */
    int64_t mtime_sec; /* its modification time */
    int64_t mtime_nsec;
    uint64_t hash; /* st_hash64 of its bytes */
} st_cache_key;

/* A 64-bit hash of n bytes (not cryptographic: it detects edits). */
uint64_t st_hash64(const void *p, size_t n);

/* Writes the cache directory into buf; ST_ERR_IO when neither $SSMTRADE_CACHE
 * nor $HOME is set or the name does not fit. */
int st_cache_dir(char *buf, size_t size);

/* Fills the bars of inst (ts, open, high, low, close, volume, has_volume, n)
 * from the cache of csv_path when its stored key equals key: returns 1.
 * Returns 0 (inst untouched) on any miss. */
int st_cache_lookup(const char *csv_path, const st_cache_key *key, st_instrument *inst);

/* Stores the bars of inst under key, best effort: returns 1 when written. */
int st_cache_store(const char *csv_path, const st_cache_key *key, const st_instrument *inst);

/* mkdir -p: ST_OK when path is (now) a directory, else ST_ERR_IO. */
int st_make_dirs(const char *path);

#endif
