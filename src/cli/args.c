/* args.c: flag parsing, config files and size flags (args.h).
 *
 * Parsing goes on past a bad flag or config key so that every problem of a
 * command line is reported at once: the error message has one line per
 * problem. */
#include "cli/args.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/problems.h"
#include "core/whole_number.h"

static const st_flag *find_spec(const st_flag *spec, int n, const char *name, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(spec[i].name) == len && strncmp(spec[i].name, name, len) == 0) return &spec[i];
    return NULL;
}

static int set(st_args *a, const char *name, const char *value) {
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->name[i], name) == 0) {
            free(a->value[i]);
            a->value[i] = strdup(value);
            return ST_OK;
        }
    ST_REQUIRE(a->n < ST_ARGS_MAX, ST_ERR_INPUT, "too many flags");
    a->name[a->n] = name;
    a->value[a->n++] = strdup(value);
    return ST_OK;
}

/* Adds the keys of a JSON config file that the command line did not set;
 * every unusable key is a problem. */
static void load_config(const char *path, const st_flag *spec, int n_spec, st_args *a, st_problem_list *p) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        st_problem_add(p, "--config %s: cannot open: %s", path, strerror(errno));
        return;
    }
    size_t sz;
    char *buf = st_read_all(f, &sz);
    fclose(f);
    if (!buf) {
        st_problem_add(p, "--config %s: cannot read the file", path);
        return;
    }
    cJSON *root = cJSON_Parse(buf);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= buf && at <= buf + sz ? (long)(at - buf) : -1;
        if (off >= 0) {
            /* up to 24 bytes before the point the parser gave up, on one line */
            char near[32];
            long from = off > 24 ? off - 24 : 0, k = 0;
            for (long i = from; i < off; i++)
                near[k++] = buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t' ? ' ' : buf[i];
            near[k] = 0;
            st_problem_add(p, "--config %s: not valid JSON (it stops at byte %ld, after '%s%s')", path, off,
                    from > 0 ? "..." : "", near);
        } else {
            st_problem_add(p, "--config %s: not valid JSON", path);
        }
        free(buf);
        return;
    }
    free(buf);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        st_problem_add(p, "--config %s: not a JSON object (expected {\"flag-name\": value, ...})", path);
        return;
    }
    for (cJSON *it = root->child; it; it = it->next) {
        const st_flag *s = find_spec(spec, n_spec, it->string, strlen(it->string));
        if (!s || strcmp(it->string, "config") == 0) {
            st_problem_add(p, "--config %s: unknown key '%s' (keys are the command's flag names)", path, it->string);
            continue;
        }
        if (st_args_has(a, s->name)) continue; /* the command line wins */
        char num[64];
        int rc = ST_OK;
        if (cJSON_IsString(it)) rc = set(a, s->name, it->valuestring);
        else if (cJSON_IsBool(it)) {
            if (cJSON_IsTrue(it)) rc = set(a, s->name, "1");
        } else if (cJSON_IsNumber(it)) {
            st_json_number_text(it->valuedouble, num, sizeof num);
            rc = set(a, s->name, num);
        } else {
            st_problem_add(p, "--config %s: key '%s' must be a string, number or boolean", path, it->string);
        }
        if (rc != ST_OK) st_problem_add(p, "--config %s: key '%s': too many flags", path, it->string);
    }
    cJSON_Delete(root);
}

int st_args_parse(int argc, char **argv, const st_flag *spec, int n_spec, st_args *a) {
    memset(a, 0, sizeof *a);
    st_problem_list p = {.len = 0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            st_problem_add(&p, "unexpected argument '%s' (flags look like --name value)", arg);
            continue;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const st_flag *s = find_spec(spec, n_spec, name, len);
        if (!s) {
            st_problem_add(&p, "unknown flag '%.*s' (see %s --help)", (int)len + 2, arg, argv[0]);
            /* its value, if it has one, is not a second problem */
            if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) i++;
            continue;
        }
        const char *value;
        if (!s->value) {
            if (eq) {
                st_problem_add(&p, "flag --%s takes no value", s->name);
                continue;
            }
            value = "1";
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            st_problem_add(&p, "flag --%s needs a value (%s)", s->name, s->value);
            continue;
        }
        if (set(a, s->name, value) != ST_OK) st_problem_add(&p, "too many flags (at most %d)", ST_ARGS_MAX);
    }
    const char *cfg = st_args_str(a, "config", NULL);
    if (cfg) load_config(cfg, spec, n_spec, a, &p);
    return st_problem_status(&p);
}

void st_args_free(st_args *a) {
    for (int i = 0; i < a->n; i++) free(a->value[i]);
    memset(a, 0, sizeof *a);
}

void st_args_usage(FILE *f, const char *cmd, const char *summary, const st_flag *spec, int n_spec) {
    fprintf(f, "usage: ssmtrade %s [options]\n%s\n\noptions:\n", cmd, summary);
    for (int i = 0; i < n_spec; i++) {
        char left[48];
        snprintf(left, sizeof left, "--%s%s%s", spec[i].name, spec[i].value ? " " : "",
                 spec[i].value ? spec[i].value : "");
        fprintf(f, "  %-26s %s\n", left, spec[i].help);
    }
    fprintf(f, "  %-26s %s\n", "--help", "this text");
}

const char *st_args_str(const st_args *a, const char *name, const char *def) {
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->name[i], name) == 0) return a->value[i];
    return def;
}

int st_args_has(const st_args *a, const char *name) { return st_args_str(a, name, NULL) != NULL; }

int st_args_i64(const st_args *a, const char *name, long long def, long long *out) {
    const char *v = st_args_str(a, name, NULL);
    if (!v) {
        *out = def;
        return ST_OK;
    }
    return st_parse_whole(name, v, out);
}

int st_args_int(const st_args *a, const char *name, int def, int *out) {
    long long v;
    ST_TRY(st_args_i64(a, name, def, &v));
    ST_REQUIRE(v >= -2147483647LL && v <= 2147483647LL, ST_ERR_INPUT, "--%s: %lld is out of range", name, v);
    *out = (int)v;
    return ST_OK;
}

int st_args_double(const st_args *a, const char *name, double def, double *out) {
    const char *v = st_args_str(a, name, NULL);
    if (!v) {
        *out = def;
        return ST_OK;
    }
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    ST_REQUIRE(end != v && *end == 0 && errno == 0, ST_ERR_INPUT, "--%s: '%s' is not a number", name, v);
    return ST_OK;
}

int st_args_dims(const st_args *a, const char *default_preset, st_dims *d) {
    ST_TRY(st_dims_preset(st_args_str(a, "preset", default_preset), d));
    struct {
        const char *flag;
        int *field;
    } map[] = {
        {"batch", &d->B},      {"window", &d->K},      {"features", &d->F},  {"context", &d->C},
        {"vsn-hidden", &d->Dv}, {"d-model", &d->D},    {"layers", &d->L},    {"expand", &d->expand},
        {"headdim", &d->headdim}, {"d-state", &d->N},  {"groups", &d->G},    {"conv-width", &d->W},
        {"chunk", &d->Q},      {"head-hidden", &d->Hh}, {"rollout", &d->T},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) ST_TRY(st_args_int(a, map[i].flag, *map[i].field, map[i].field));
    return st_dims_validate(d);
}
