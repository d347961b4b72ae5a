/* csv.c: reading and writing OHLCV CSV files (rules in csv.h).
 *
 * The whole file is read into memory (its bytes are hashed for the cache
 * anyway) and parsed line by line in place. Every rejection names the file,
 * the line and the column, because the person reading it has a spreadsheet
 * open and wants to jump to the cell. */
#define _POSIX_C_SOURCE 200809L
#include "data/csv.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "data/cache.h"
#include "data/dataset.h"

/* ---- times ------------------------------------------------------------ */

static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int64_t y, int m) {
    static const int d[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

/* Leap years in 1..y (y >= 0). */
static int64_t leaps_through(int64_t y) { return y / 4 - y / 100 + y / 400; }

/* Days from 1970-01-01 to y-m-d (1 <= y <= 9999). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    int64_t days = 365 * (y - 1970) + leaps_through(y - 1) - leaps_through(1969);
    for (int k = 1; k < m; k++)
        days += days_in_month(y, k);
    return days + d - 1;
}

/* Reads exactly n digits at s[*i]; -1 when they are not all digits. */
static int64_t read_digits(const char *s, size_t len, size_t *i, int n) {
    int64_t v = 0;
    for (int k = 0; k < n; k++, (*i)++) {
        if (*i >= len || !isdigit((unsigned char)s[*i])) return -1;
        v = v * 10 + (s[*i] - '0');
    }
    return v;
}

static int parse_unix_seconds(const char *s, size_t len, int64_t *ts) {
    size_t i = (len > 0 && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    if (i == len || len - i > 18) return -1;
    int64_t v = 0;
    for (size_t k = i; k < len; k++) {
        if (!isdigit((unsigned char)s[k])) return -1;
        v = v * 10 + (s[k] - '0');
    }
    *ts = s[0] == '-' ? -v : v;
    return 0;
}

/* The "HH:MM[:SS[.fff]]" after a date; returns seconds or -1. */
static int64_t parse_clock(const char *s, size_t len, size_t *i) {
    int64_t hh = read_digits(s, len, i, 2);
    if (hh < 0 || hh > 23 || *i >= len || s[(*i)++] != ':') return -1;
    int64_t mm = read_digits(s, len, i, 2), ss = 0;
    if (mm < 0 || mm > 59) return -1;
    if (*i < len && s[*i] == ':') {
        (*i)++;
        ss = read_digits(s, len, i, 2);
        if (ss < 0 || ss > 60) return -1;
        if (*i < len && (s[*i] == '.' || s[*i] == ',')) { /* fractions are dropped */
            (*i)++;
            if (*i >= len || !isdigit((unsigned char)s[*i])) return -1;
            while (*i < len && isdigit((unsigned char)s[*i]))
                (*i)++;
        }
    }
    return hh * 3600 + mm * 60 + ss;
}

/* "Z", "+hh:mm", "+hhmm", "-hh:mm"...: the offset in seconds to subtract. */
static int parse_zone(const char *s, size_t len, size_t *i, int64_t *offset) {
    *offset = 0;
    if (*i == len) return 0;
    if (s[*i] == 'Z' || s[*i] == 'z') return ++(*i) == len ? 0 : -1;
    if (s[*i] != '+' && s[*i] != '-') return -1;
    int sign = s[(*i)++] == '-' ? -1 : 1;
    int64_t hh = read_digits(s, len, i, 2);
    if (*i < len && s[*i] == ':') (*i)++;
    int64_t mm = read_digits(s, len, i, 2);
    if (hh < 0 || hh > 23 || mm < 0 || mm > 59 || *i != len) return -1;
    *offset = sign * (hh * 3600 + mm * 60);
    return 0;
}

int st_parse_time(const char *s, size_t len, int64_t *ts) {
    if (len < 10 || s[4] != '-') return parse_unix_seconds(s, len, ts);
    size_t i = 0;
    int64_t y = read_digits(s, len, &i, 4);
    if (y < 1 || s[i++] != '-') return -1;
    int64_t mo = read_digits(s, len, &i, 2);
    if (mo < 1 || mo > 12 || i >= len || s[i++] != '-') return -1;
    int64_t d = read_digits(s, len, &i, 2);
    if (d < 1 || d > days_in_month(y, (int)mo)) return -1;
    int64_t secs = 0, offset = 0;
    if (i < len && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
        i++;
        secs = parse_clock(s, len, &i);
        if (secs < 0) return -1;
    }
    if (parse_zone(s, len, &i, &offset) != 0) return -1;
    *ts = days_from_civil(y, (int)mo, (int)d) * 86400 + secs - offset;
    return 0;
}

/* Any int64 time in constant time: 400 Gregorian years are exactly 146097
 * days, so whole cycles are stepped over before walking years and months.
 * (Unix seconds are read with up to 18 digits: walking from 1970 one year at
 * a time took minutes for the message about such a time.) */
void st_format_time(int64_t ts, char *buf, size_t size) {
    int64_t days = ts / 86400, secs = ts % 86400; /* rounded down below, without overflow at INT64_MIN */
    if (secs < 0) secs += 86400, days--;
    int64_t cycles = days / 146097, rest = days % 146097;
    if (rest < 0) rest += 146097, cycles--;
    int64_t y = 1970 + 400 * cycles;
    days = rest; /* 0 <= days < 146097 */
    while (days >= 365 + is_leap(y))
        days -= 365 + is_leap(y++);
    int m = 1;
    while (days >= days_in_month(y, m))
        days -= days_in_month(y, m++);
    snprintf(buf, size, "%04lld-%02d-%02lldT%02lld:%02lld:%02lldZ", (long long)y, m, (long long)days + 1,
             (long long)(secs / 3600), (long long)(secs / 60 % 60), (long long)(secs % 60));
}

/* ---- parsing ---------------------------------------------------------- */

enum { COL_TIME, COL_OPEN, COL_HIGH, COL_LOW, COL_CLOSE, COL_VOLUME, COL_KINDS };
enum { MAX_COLUMNS = 256 };

typedef struct {
    const char *p;
    size_t len;
} field;

typedef struct {
    const char *path;
    int ncols;
    int col[COL_KINDS];       /* field index of each kind, -1 when absent */
    char name[COL_KINDS][32]; /* the header's spelling, for messages */
    field f[MAX_COLUMNS + 1]; /* the current row's fields */
    int nf;
    int line;
} csv_reader;

/* Records "PATH:LINE: column 'NAME': why" and returns ST_ERR_INPUT. */
static int cell_error(const csv_reader *R, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cell_error(const csv_reader *R, int kind, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ST_FAIL(ST_ERR_INPUT, "%s:%d: column '%s': %s", R->path, R->line, R->name[kind], why);
}

static field trim(const char *p, size_t len) {
    while (len > 0 && (*p == ' ' || *p == '\t'))
        p++, len--;
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r'))
        len--;
    if (len >= 2 && p[0] == '"' && p[len - 1] == '"') p++, len -= 2;
    field f = {p, len};
    return f;
}

/* Splits line[0:len] at commas into R->f; at most MAX_COLUMNS + 1 fields. */
static void split_fields(csv_reader *R, const char *line, size_t len) {
    R->nf = 0;
    size_t a = 0;
    for (size_t i = 0; i <= len && R->nf <= MAX_COLUMNS; i++) {
        if (i == len || line[i] == ',') {
            R->f[R->nf++] = trim(line + a, i - a);
            a = i + 1;
        }
    }
}

static int column_kind(field f) {
    static const struct {
        const char *name;
        int kind;
    } known[] = {{"timestamp", COL_TIME}, {"date", COL_TIME},   {"time", COL_TIME},
                 {"datetime", COL_TIME},  {"open", COL_OPEN},   {"high", COL_HIGH},
                 {"low", COL_LOW},        {"close", COL_CLOSE}, {"volume", COL_VOLUME}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (strlen(known[k].name) == f.len && strncasecmp(known[k].name, f.p, f.len) == 0) return known[k].kind;
    return -1;
}

static int read_header(csv_reader *R, const char *line, size_t len) {
    static const char *const kind_names[COL_KINDS] = {"timestamp", "open", "high", "low", "close", "volume"};
    split_fields(R, line, len);
    R->ncols = R->nf;
    for (int k = 0; k < COL_KINDS; k++) {
        R->col[k] = -1;
        snprintf(R->name[k], sizeof R->name[k], "%s", kind_names[k]);
    }
    if (R->nf > MAX_COLUMNS)
        return ST_FAIL(ST_ERR_INPUT, "%s:1: column %d: more than %d columns", R->path, MAX_COLUMNS + 1, MAX_COLUMNS);
    for (int c = 0; c < R->nf; c++) {
        int k = column_kind(R->f[c]);
        if (k < 0) continue; /* extra columns (adj_close...) are ignored */
        if (R->col[k] >= 0)
            return ST_FAIL(ST_ERR_INPUT, "%s:1: column %d '%.*s': a second %s column", R->path, c + 1, (int)R->f[c].len,
                           R->f[c].p, kind_names[k]);
        R->col[k] = c;
        snprintf(R->name[k], sizeof R->name[k], "%.*s", (int)(R->f[c].len < 31 ? R->f[c].len : 31), R->f[c].p);
    }
    if (R->col[COL_TIME] < 0)
        return ST_FAIL(ST_ERR_INPUT,
                       "%s:1: column 'timestamp': no time column (timestamp, date, time or datetime) in the header",
                       R->path);
    if (R->col[COL_CLOSE] < 0)
        return ST_FAIL(ST_ERR_INPUT, "%s:1: column 'close': no close column in the header", R->path);
    return ST_OK;
}

/* The field of column kind in the current row, or an error if it is absent. */
static int get_field(const csv_reader *R, int kind, field *out) {
    int c = R->col[kind];
    if (c >= R->nf) return cell_error(R, kind, "missing (the row has %d fields, the header %d)", R->nf, R->ncols);
    if (R->f[c].len == 0) return cell_error(R, kind, "empty field");
    *out = R->f[c];
    return ST_OK;
}

static int get_number(const csv_reader *R, int kind, double *v) {
    field f = {NULL, 0};
    ST_TRY(get_field(R, kind, &f));
    char buf[64];
    if (f.len >= sizeof buf) return cell_error(R, kind, "'%.40s...' is not a number", f.p);
    memcpy(buf, f.p, f.len);
    buf[f.len] = '\0';
    char *end;
    errno = 0;
    *v = strtod(buf, &end);
    if (end == buf || *end != '\0') return cell_error(R, kind, "'%s' is not a number", buf);
    if (!isfinite(*v)) return cell_error(R, kind, "'%s' is not finite (NaN and Inf are not allowed)", buf);
    if (kind == COL_VOLUME && *v < 0) return cell_error(R, kind, "volume %s is negative", buf);
    if (kind != COL_VOLUME && !(*v > 0))
        return cell_error(R, kind, "price %s must be positive (log returns need it)", buf);
    return ST_OK;
}

/* Parses one data row into bar i; prev_ts is the previous row's time. */
static int read_row(csv_reader *R, st_instrument *in, int i) {
    field tf = {NULL, 0};
    ST_TRY(get_field(R, COL_TIME, &tf));
    if (R->nf > R->ncols)
        return ST_FAIL(ST_ERR_INPUT, "%s:%d: column %d: more fields than the %d of the header", R->path, R->line,
                       R->ncols + 1, R->ncols);
    int64_t ts;
    if (st_parse_time(tf.p, tf.len, &ts) != 0)
        return cell_error(R, COL_TIME, "'%.*s' is not an ISO-8601 date or date-time nor unix seconds", (int)tf.len,
                          tf.p);
    if (i > 0 && ts <= in->ts[i - 1]) {
        char prev[40];
        st_format_time(in->ts[i - 1], prev, sizeof prev);
        return cell_error(R, COL_TIME, "'%.*s' is not after the previous row's %s (times must increase)", (int)tf.len,
                          tf.p, prev);
    }
    in->ts[i] = ts;
    double v[COL_KINDS] = {0};
    for (int k = COL_OPEN; k < COL_KINDS; k++)
        if (R->col[k] >= 0) ST_TRY(get_number(R, k, &v[k]));
    double c = v[COL_CLOSE], o = v[COL_OPEN];
    int has_o = R->col[COL_OPEN] >= 0, has_h = R->col[COL_HIGH] >= 0, has_l = R->col[COL_LOW] >= 0;
    double top = has_o ? fmax(o, c) : c, bottom = has_o ? fmin(o, c) : c;
    const char *which_top = has_o ? "max(open, close)" : "close", *which_bottom = has_o ? "min(open, close)" : "close";
    if (has_h && v[COL_HIGH] < top)
        return cell_error(R, COL_HIGH, "%.10g is below %s = %.10g", v[COL_HIGH], which_top, top);
    if (has_l && v[COL_LOW] > bottom)
        return cell_error(R, COL_LOW, "%.10g is above %s = %.10g", v[COL_LOW], which_bottom, bottom);
    if (!has_o) { /* the previous close, kept inside the bar's given range */
        o = i > 0 ? in->close[i - 1] : c;
        if (has_h) o = fmin(o, v[COL_HIGH]);
        if (has_l) o = fmax(o, v[COL_LOW]);
    }
    in->open[i] = o;
    in->close[i] = c;
    in->high[i] = has_h ? v[COL_HIGH] : fmax(o, c);
    in->low[i] = has_l ? v[COL_LOW] : fmin(o, c);
    in->volume[i] = v[COL_VOLUME];
    return ST_OK;
}

static int is_blank(const char *p, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)p[i])) return 0;
    return 1;
}

/* Walks the lines of text; returns the number of data rows parsed. */
static int parse_lines(csv_reader *R, const char *text, size_t len, st_instrument *in) {
    size_t pos = 0;
    int rows = 0, have_header = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3; /* UTF-8 byte-order mark */
    for (R->line = 1; pos < len; R->line++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        const char *line = text + pos;
        pos += n + 1;
        if (!have_header) {
            if (is_blank(line, n)) return ST_FAIL(ST_ERR_INPUT, "%s:1: column 1: empty header line", R->path);
            ST_TRY(read_header(R, line, n));
            have_header = 1;
            continue;
        }
        if (is_blank(line, n)) continue;
        split_fields(R, line, n);
        ST_TRY(read_row(R, in, rows));
        rows++;
    }
    if (!have_header) return ST_FAIL(ST_ERR_INPUT, "%s:1: column 1: the file is empty (no header)", R->path);
    in->n = rows;
    in->has_volume = R->col[COL_VOLUME] >= 0;
    return ST_OK;
}

int st_csv_parse(const char *path, const char *text, size_t len, st_instrument *in) {
    int lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    ST_TRY(st_instrument_alloc(in, lines));
    csv_reader *R = malloc(sizeof *R);
    if (!R) {
        st_instrument_free(in);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory reading %s", path);
    }
    R->path = path;
    int rc = parse_lines(R, text, len, in);
    free(R);
    if (rc != ST_OK) st_instrument_free(in);
    return rc;
}

/* ---- files ------------------------------------------------------------ */

static int read_file(const char *path, char **text, size_t *len, st_cache_key *key) {
    FILE *f = fopen(path, "rb");
    if (!f) return ST_FAIL(ST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ST_FAIL(ST_ERR_IO, "%s is not a regular file", path);
    }
    *len = (size_t)sb.st_size;
    *text = malloc(*len + 1);
    if (!*text) {
        fclose(f);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory reading %s (%zu bytes)", path, *len);
    }
    size_t got = fread(*text, 1, *len, f);
    fclose(f);
    if (got != *len) {
        free(*text);
        return ST_FAIL(ST_ERR_IO, "cannot read %s: got %zu of %zu bytes", path, got, *len);
    }
    (*text)[*len] = '\0';
    key->size = (uint64_t)sb.st_size;
    key->mtime_sec = (int64_t)sb.st_mtim.tv_sec;
    key->mtime_nsec = (int64_t)sb.st_mtim.tv_nsec;
    key->hash = st_hash64(*text, *len);
    return ST_OK;
}

/* The file name without folder and extension. */
static void file_stem(const char *path, char *out, size_t size) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    snprintf(out, size, "%.*s", (int)(n < size - 1 ? n : size - 1), base);
}

int st_csv_load(const char *path, int use_cache, st_instrument *in) {
    char *text = NULL;
    size_t len = 0;
    st_cache_key key;
    ST_TRY(read_file(path, &text, &len, &key));
    int rc = ST_OK, hit = use_cache && st_cache_lookup(path, &key, in);
    if (!hit) {
        rc = st_csv_parse(path, text, len, in);
        if (rc == ST_OK && use_cache) st_cache_store(path, &key, in);
    }
    free(text);
    if (rc != ST_OK) return rc;
    file_stem(path, in->name, sizeof in->name);
    in->from_cache = hit;
    return ST_OK;
}

int st_csv_write(const char *path, const st_instrument *in) {
    FILE *f = fopen(path, "w");
    if (!f) return ST_FAIL(ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "timestamp,open,high,low,close,volume\n");
    char when[40];
    for (int t = 0; t < in->n; t++) {
        st_format_time(in->ts[t], when, sizeof when);
        fprintf(f, "%s,%.10g,%.10g,%.10g,%.10g,%.10g\n", when, in->open[t], in->high[t], in->low[t], in->close[t],
                in->volume ? in->volume[t] : 0.0);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ST_FAIL(ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return ST_OK;
}
