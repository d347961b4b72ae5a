/* csv.h: OHLCV bars from and to CSV files (DESIGN section 3).
 *
 * Input: a header naming the columns in any order, case-insensitive:
 * the time as `timestamp`, `date`, `time` or `datetime`, then `open`, `high`,
 * `low`, `close`, `volume`; only the time and `close` are required, other
 * columns are ignored. Times are ISO-8601 dates (2000-09-27), date-times
 * (2000-09-27T14:30:00, a space instead of T, optional fraction of a second,
 * optional Z or +hh:mm offset; read as UTC) or unix seconds (an integer).
 * Derived when absent: open = the previous close (the first bar: its own
 * close), kept inside [low, high] when those are given; high = max(open,
 * close); low = min(open, close); volume = 0 with has_volume = 0.
 *
 * Rejected with ST_ERR_INPUT and "FILE:LINE: column 'NAME': why": a missing,
 * empty or unparsable field, NaN or Inf, a timestamp not after the previous
 * row's, a price <= 0 (log returns need it), a volume < 0, high below
 * max(open, close), low above min(open, close). Lines are counted from 1 (the
 * header); blank lines are skipped. */
#ifndef ST_CSV_H
#define ST_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "data/market.h"

/* Parses an ISO-8601 date or date-time, or unix seconds, from s[0:len].
 * Returns 0 and sets *ts (unix seconds, UTC), or -1 when it is not a time. */
int st_parse_time(const char *s, size_t len, int64_t *ts);

/* Writes ts as "YYYY-MM-DDTHH:MM:SSZ" into buf (at least 32 bytes). */
void st_format_time(int64_t ts, char *buf, size_t size);

/* Parses the CSV text[0:len] (the contents of `path`, named in messages) into
 * the bars of inst (allocated; n may be 0). On error inst is left empty. */
int st_csv_parse(const char *path, const char *text, size_t len, st_instrument *inst);

/* Reads the CSV file at path into the bars of inst, through the binary cache
 * (cache.h) when use_cache is set; sets inst->name to the file's stem and
 * inst->from_cache. */
int st_csv_load(const char *path, int use_cache, st_instrument *inst);

/* Writes the bars of inst as CSV with the header
 * timestamp,open,high,low,close,volume; times as ISO date-times (UTC), prices
 * and volume with 10 significant digits. */
int st_csv_write(const char *path, const st_instrument *inst);

#endif
