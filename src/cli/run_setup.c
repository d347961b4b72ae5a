/* run_setup.c: flags -> training config, the checks a run passes before it
 * starts (problems, data, memory), config -> market (run_setup.h). */
#include "cli/run_setup.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "data/features.h"
#include "data/splits.h"
#include "model/model.h"
#include "model/params.h"

/* ---- problems ---------------------------------------------------------------------------- */

static void add_line(st_problems *p, const char *line, size_t n) {
    if (p->len + n + 2 >= sizeof p->text) {
        p->hidden++;
        return;
    }
    memcpy(p->text + p->len, line, n);
    p->len += n;
    p->text[p->len++] = '\n';
    p->text[p->len] = 0;
    p->n++;
}

void st_problem_at(st_problems *p, const char *file, int line, const char *fmt, ...) {
    char buf[600];
    const char *src = strstr(file, "src/");
    int k = snprintf(buf, sizeof buf, "%s:%d: ", src ? src : file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, sizeof buf - (size_t)k, fmt, ap);
    va_end(ap);
    add_line(p, buf, strlen(buf));
}

int st_problems_take(st_problems *p, int rc) {
    if (rc == ST_OK) return rc;
    const char *m = st_last_error();
    if (!m[0]) m = st_status_name(rc);
    while (*m) {
        const char *e = strchr(m, '\n');
        size_t n = e ? (size_t)(e - m) : strlen(m);
        if (n > 0) add_line(p, m, n);
        m += n + (e ? 1 : 0);
    }
    return rc;
}

/* line without a leading "src/file.c:LINE: " */
static const char *without_location(const char *line) {
    const char *c = strstr(line, ": ");
    if (c && c > line && c[-1] >= '0' && c[-1] <= '9' && !memchr(line, ' ', (size_t)(c - line))) return c + 2;
    return line;
}

int st_problems_report(const st_problems *p, const char *cmd) {
    if (p->n == 0 && p->hidden == 0) return ST_OK;
    int total = p->n + p->hidden;
    for (const char *m = p->text; *m;) {
        const char *e = strchr(m, '\n');
        size_t n = e ? (size_t)(e - m) : strlen(m);
        char line[700];
        snprintf(line, sizeof line, "%.*s", (int)n, m);
        fprintf(stderr, "ssmtrade %s: %s\n", cmd, total > 1 ? without_location(line) : line);
        m += n + (e ? 1 : 0);
    }
    if (p->hidden) fprintf(stderr, "ssmtrade %s: (and %d more problems)\n", cmd, p->hidden);
    if (total > 1) fprintf(stderr, "ssmtrade %s: %d problems: nothing was started\n", cmd, total);
    fflush(stderr);
    st_clear_error();
    return ST_ERR_INPUT;
}

/* ---- flags -> config --------------------------------------------------------------------- */

int st_run_apply_args(const st_args *a, st_train_config *cfg) {
    st_problems p = {.len = 0};
    const char *preset = st_args_str(a, "preset", NULL);
    if (preset) st_problems_take(&p, st_train_config_set(cfg, "preset", preset));
    for (int i = 0; i < a->n; i++) {
        const char *name = a->name[i];
        if (strcmp(name, "preset") == 0) continue;
        int rc = st_train_config_set(cfg, name, a->value[i]);
        if (rc != ST_OK && !strstr(st_last_error(), "unknown training parameter")) st_problems_take(&p, rc);
    }
    if (p.n == 0) return ST_OK;
    if (p.n == 1) { /* the message as its setter recorded it, location included */
        char line[700], file[256];
        int at = 0;
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p.text, "\n"), p.text);
        const char *text = without_location(line);
        if (text != line && sscanf(line, "%255[^:]:%d", file, &at) == 2)
            return st_fail(file, at, ST_ERR_INPUT, "%s", text);
        return ST_FAIL(ST_ERR_INPUT, "%s", text);
    }
    /* one message, one problem a line, as the validators give theirs */
    char msg[960];
    size_t len = 0;
    int shown = 0;
    for (const char *m = p.text; *m && len < sizeof msg;) {
        const char *e = strchr(m, '\n');
        size_t n = e ? (size_t)(e - m) : strlen(m);
        char line[700];
        snprintf(line, sizeof line, "%.*s", (int)n, m);
        const char *t = without_location(line);
        if (len + strlen(t) + 48 >= sizeof msg) break;
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s", shown ? "\n" : "", t);
        shown++;
        m += n + (e ? 1 : 0);
    }
    if (shown < p.n) snprintf(msg + len, sizeof msg - len, "\n(and %d more problems)", p.n - shown);
    return ST_FAIL(ST_ERR_INPUT, "%s", msg);
}

/* ---- data -------------------------------------------------------------------------------- */

static int is_csv(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".csv") == 0;
}

/* Bytes of the CSV files of path (a file or a folder of *.csv); -1 when it cannot be read. */
static double csv_bytes(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) return (double)sb.st_size;
    DIR *d = opendir(path);
    if (!d) return -1;
    double total = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (!is_csv(e->d_name)) continue;
        char full[1200];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) total += (double)sb.st_size;
    }
    closedir(d);
    return total;
}

void st_run_check_data(const st_train_config *cfg, st_problems *p) {
    if (cfg->data && cfg->data[0]) {
        struct stat sb;
        if (stat(cfg->data, &sb) != 0) ST_PROBLEM(p, "--data %s: %s", cfg->data, strerror(errno));
        return;
    }
    int K = cfg->dims.K;
    if (K < 1 || cfg->bars < 1 || cfg->instruments < 1) return; /* said by the validators */
    st_data_opts o = st_data_opts_default(K);
    int need = st_split_rows_needed(ST_FEATURE_WARMUP, K, o.train_frac, o.val_frac);
    int begin[ST_SPLITS], end[ST_SPLITS];
    if (cfg->bars < need) {
        ST_PROBLEM(p,
                   "--bars %d is too few for --window %d: a synthetic instrument needs at least %d bars (%d of "
                   "feature warm-up, the first window, 2 gaps of K bars and three splits)",
                   cfg->bars, K, need, ST_FEATURE_WARMUP);
    } else if (st_splits_make(cfg->bars, ST_FEATURE_WARMUP, K, o.train_frac, o.val_frac, begin, end) == 0) {
        int train = end[ST_SPLIT_TRAIN] - begin[ST_SPLIT_TRAIN];
        if (cfg->episode_length > train)
            ST_PROBLEM(p,
                       "--episode-length %d is longer than the training split: %d bars per instrument (--bars %d, "
                       "--window %d)",
                       cfg->episode_length, train, cfg->bars, K);
    }
}

void st_run_check_market(const st_train_config *cfg, const st_market *m, st_problems *p) {
    int shortest = -1;
    const char *name = "";
    for (int i = 0; i < m->n_inst; i++) {
        int n = m->inst[i].split_end[ST_SPLIT_TRAIN] - m->inst[i].split_begin[ST_SPLIT_TRAIN];
        if (shortest < 0 || n < shortest) shortest = n, name = m->inst[i].name;
    }
    if (shortest >= 0 && cfg->episode_length > shortest)
        ST_PROBLEM(p, "--episode-length %d is longer than the training split of %s: %d bars (--window %d)",
                   cfg->episode_length, name, shortest, cfg->dims.K);
}

/* ---- memory ------------------------------------------------------------------------------ */

/* A number from the first line of a file, or -1. */
static double file_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    double v = -1;
    char buf[64];
    if (fgets(buf, sizeof buf, f)) {
        char *end;
        double x = strtod(buf, &end);
        if (end != buf) v = x;
    }
    fclose(f);
    return v;
}

/* Bytes of memory available now: MemAvailable, lowered to what a cgroup
 * limit leaves; -1 when nothing says. */
static double available_bytes(void) {
    double avail = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            double kb;
            if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) avail = kb * 1024;
        }
        fclose(f);
    }
    if (avail < 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        if (pages > 0 && size > 0) avail = (double)pages * (double)size;
    }
    double limit = file_number("/sys/fs/cgroup/memory.max"); /* cgroup v2; "max" reads as -1 */
    double used = file_number("/sys/fs/cgroup/memory.current");
    if (limit < 0) {
        limit = file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"); /* cgroup v1 */
        used = file_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    }
    if (limit > 0 && limit < 1e18 && used >= 0) {
        double left = limit > used ? limit - used : 0;
        if (avail < 0 || left < avail) avail = left;
    }
    return avail;
}

void st_run_check_memory(const st_train_config *cfg, int gpu, st_problems *p) {
    const st_dims *d = &cfg->dims;
    st_param_table t = {0};
    if (st_param_table_build(d, &t) != ST_OK) {
        st_problems_take(p, ST_ERR_INPUT);
        return;
    }
    double P = (double)t.total;
    st_param_table_free(&t);
    double N = (double)d->T * d->B, mb = N / cfg->minibatches, mw = mb > d->B ? mb : d->B;
    double C = d->C, A = d->A;
    /* the trainer's arrays (train/trainer.c alloc_buffers), model arena, market */
    double params = 16 * P;
    double rollout = N * (4 * 4 + 4 * C + 4 * 5 + 1) + (double)d->B * (4 * C + 4);
    double act = gpu ? 0 : (double)st_model_activation_bytes(d, (int)mw);
    double window = gpu ? 0 : mw * (4 * 8 + 4 * C + 8 * A + 8) + 4 * mw * d->K * (d->F + d->C);
    /* a bar holds time, OHLCV, ATR (8 bytes each), its F float features and the oracle; a CSV row is at
     * least ~24 bytes, so a CSV's bytes / 24 bound its bars */
    double per_bar = 8 * 7 + 4.0 * d->F + 1;
    double bars = cfg->data && cfg->data[0] ? csv_bytes(cfg->data) / 24 : (double)cfg->instruments * cfg->bars;
    double market = bars > 0 ? bars * per_bar : 0;
    double need = params + rollout + act + window + market;
    double avail = available_bytes();
    if (avail < 0 || need <= 0.9 * avail) return;
    double gib = 1024.0 * 1024.0 * 1024.0;
    const char *fix;
    char fixbuf[200];
    if (act + window >= rollout && mb > d->B) {
        snprintf(fixbuf, sizeof fixbuf, "raise --minibatches (now %d) or lower --rollout (%d) or --batch (%d)",
                 cfg->minibatches, d->T, d->B);
        fix = fixbuf;
    } else if (act + window >= rollout) {
        snprintf(fixbuf, sizeof fixbuf, "lower --batch (now %d: the action step runs B windows at once)", d->B);
        fix = fixbuf;
    } else if (market > rollout) {
        fix = "use less market data (--instruments, --bars or a smaller --data)";
    } else {
        snprintf(fixbuf, sizeof fixbuf, "lower --rollout (now %d) or --batch (%d)", d->T, d->B);
        fix = fixbuf;
    }
    if (gpu)
        ST_PROBLEM(p,
                   "the GPU trainer's host side needs about %.1f GiB of memory (rollout of T*B = %.0f samples: %.1f "
                   "GiB, parameters and AdamW state %.1f GiB, market %.1f GiB) but %.1f GiB is available: %s",
                   need / gib, N, rollout / gib, params / gib, market / gib, avail / gib, fix);
    else
        ST_PROBLEM(p,
                   "the CPU trainer needs about %.1f GiB of memory (model activations for max(B, T*B/M) = %.0f "
                   "windows: %.1f GiB, rollout of T*B = %.0f samples: %.1f GiB, parameters and AdamW state %.1f GiB, "
                   "market %.1f GiB) but %.1f GiB is available: %s",
                   need / gib, mw, (act + window) / gib, N, rollout / gib, params / gib, market / gib, avail / gib,
                   fix);
}

/* ---- market, splits, the command body ---------------------------------------------------- */

int st_run_market(const st_train_config *cfg, st_market *m, int verbose) {
    st_data_opts o = st_data_opts_default(cfg->dims.K);
    if (cfg->data && cfg->data[0]) {
        ST_TRY(st_market_load(cfg->data, &o, m));
        if (verbose) printf("data: %s (%d instruments)\n", cfg->data, m->n_inst);
    } else {
        ST_TRY(st_market_synthetic((uint64_t)cfg->market_seed, cfg->instruments, cfg->bars, &o, m));
        if (verbose)
            printf("data: built-in synthetic market, seed %lld, %d instruments x %d bars\n", cfg->market_seed,
                   cfg->instruments, cfg->bars);
    }
    return ST_OK;
}

static const char *const split_names[ST_SPLITS] = {"train", "validation", "test"};

int st_split_parse(const char *name, int *split) {
    for (int k = 0; k < ST_SPLITS; k++)
        if (strcmp(name, split_names[k]) == 0) {
            *split = k;
            return ST_OK;
        }
    return ST_FAIL(ST_ERR_INPUT, "--split '%s': expected train, validation or test", name);
}

const char *st_split_name(int split) { return split >= 0 && split < ST_SPLITS ? split_names[split] : "?"; }

/* The flag table of a training command: extra, then every training parameter. */
static st_flag *train_flags(const st_flag *extra, int n_extra, int *n) {
    int np = st_train_param_count();
    *n = n_extra + np;
    st_flag *flags = calloc((size_t)*n, sizeof *flags);
    if (!flags) return NULL;
    for (int i = 0; i < n_extra; i++) flags[i] = extra[i];
    for (int i = 0; i < np; i++) flags[n_extra + i] = (st_flag){st_train_param_flag(i), "V", st_train_param_help(i)};
    return flags;
}

int st_run_train_command(int argc, char **argv, const char *cmd, const char *summary, const st_flag *extra,
                         int n_extra, int (*run)(const st_args *a, st_train_config *cfg)) {
    int n;
    st_flag *flags = train_flags(extra, n_extra, &n);
    ST_REQUIRE(flags, ST_ERR_MEMORY, "out of memory for the flag table");
    st_args a;
    int rc = st_args_parse(argc, argv, flags, n, &a);
    if (a.help) {
        st_args_usage(stdout, cmd, summary, flags, n);
        rc = ST_OK;
    } else if (rc == ST_OK) {
        st_train_config cfg;
        rc = st_train_config_default(&cfg, "tiny");
        if (rc == ST_OK) rc = run(&a, &cfg);
        st_train_config_free(&cfg);
    }
    if (rc != ST_OK && strchr(st_last_error(), '\n')) {
        st_problems p = {.len = 0};
        st_problems_take(&p, rc);
        rc = st_problems_report(&p, cmd);
    }
    st_args_free(&a);
    free(flags);
    return rc;
}

int st_run_train_command_checked(int argc, char **argv, const char *cmd, const char *summary, const st_flag *extra,
                                 int n_extra, int (*run)(const st_args *a, st_train_config *cfg, st_problems *found)) {
    int n;
    st_flag *flags = train_flags(extra, n_extra, &n);
    ST_REQUIRE(flags, ST_ERR_MEMORY, "out of memory for the flag table");
    st_args a;
    st_problems *found = calloc(1, sizeof *found);
    int rc = found ? st_args_parse(argc, argv, flags, n, &a) : ST_FAIL(ST_ERR_MEMORY, "out of memory");
    if (found && a.help) {
        st_args_usage(stdout, cmd, summary, flags, n);
        rc = ST_OK;
    } else if (found) {
        st_problems_take(found, rc);
        st_train_config cfg;
        rc = st_train_config_default(&cfg, "tiny");
        if (rc == ST_OK) rc = run(&a, &cfg, found);
        st_train_config_free(&cfg);
    }
    if (found) st_args_free(&a);
    free(found);
    free(flags);
    return rc;
}
