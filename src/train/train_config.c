/* train_config.c: defaults, setting by flag name, validation and JSON of
 * the training configuration (train_config.h). */
#include "train/train_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "train/schedule.h"

typedef struct {
    const char *flag, *help;
    char kind; /* 'i' int, 'l' long long, 'd' double, 's' string */
    size_t off;
} param_info;

#define ST_TP_KIND_INT 'i'
#define ST_TP_KIND_I64 'l'
#define ST_TP_KIND_DBL 'd'
#define ST_TP_KIND_STR 's'
static const param_info params[] = {
#define ST_TP_INFO(kind, field, flag, def, help) {flag, help, ST_TP_KIND_##kind, offsetof(st_train_config, field)},
    ST_TRAIN_PARAMS(ST_TP_INFO)
#undef ST_TP_INFO
};
#define N_PARAMS (int)(sizeof params / sizeof params[0])

/* Model size flags and their fields (the names of cli/args.h). */
static const struct {
    const char *flag;
    size_t off;
} dims_flags[] = {
    {"batch", offsetof(st_dims, B)},       {"window", offsetof(st_dims, K)},     {"features", offsetof(st_dims, F)},
    {"context", offsetof(st_dims, C)},     {"vsn-hidden", offsetof(st_dims, Dv)}, {"d-model", offsetof(st_dims, D)},
    {"layers", offsetof(st_dims, L)},      {"expand", offsetof(st_dims, expand)}, {"headdim", offsetof(st_dims, headdim)},
    {"d-state", offsetof(st_dims, N)},     {"groups", offsetof(st_dims, G)},     {"conv-width", offsetof(st_dims, W)},
    {"chunk", offsetof(st_dims, Q)},       {"head-hidden", offsetof(st_dims, Hh)}, {"rollout", offsetof(st_dims, T)},
};
#define N_DIMS (int)(sizeof dims_flags / sizeof dims_flags[0])

int st_train_param_count(void) { return N_PARAMS; }
const char *st_train_param_flag(int i) { return params[i].flag; }
const char *st_train_param_help(int i) { return params[i].help; }

int st_train_config_default(st_train_config *c, const char *preset) {
    memset(c, 0, sizeof *c);
#define ST_TP_DEF_INT(field, def) c->field = (int)(def);
#define ST_TP_DEF_I64(field, def) c->field = (long long)(def);
#define ST_TP_DEF_DBL(field, def) c->field = (double)(def);
#define ST_TP_DEF_STR(field, def) c->field = strdup((const char *)(def));
#define ST_TP_DEF(kind, field, flag, def, help) ST_TP_DEF_##kind(field, def)
    ST_TRAIN_PARAMS(ST_TP_DEF)
#undef ST_TP_DEF
    const char *p = preset ? preset : "default";
    ST_TRY(st_dims_preset(p, &c->dims));
    snprintf(c->preset, sizeof c->preset, "%s", p);
    return ST_OK;
}

void st_train_config_free(st_train_config *c) {
    for (int i = 0; i < N_PARAMS; i++)
        if (params[i].kind == 's') {
            char **s = (char **)((char *)c + params[i].off);
            free(*s);
            *s = NULL;
        }
}

static int parse_ll(const char *flag, const char *v, long long *out) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    ST_REQUIRE(end != v && *end == 0 && errno == 0 && d == (double)(long long)d, ST_ERR_INPUT,
               "--%s: '%s' is not a whole number", flag, v);
    *out = (long long)d;
    return ST_OK;
}

int st_train_config_set(st_train_config *c, const char *flag, const char *value) {
    for (int i = 0; i < N_PARAMS; i++) {
        if (strcmp(params[i].flag, flag) != 0) continue;
        void *dst = (char *)c + params[i].off;
        long long ll;
        switch (params[i].kind) {
        case 'i':
            ST_TRY(parse_ll(flag, value, &ll));
            ST_REQUIRE(ll >= -2147483647LL && ll <= 2147483647LL, ST_ERR_INPUT, "--%s: %lld is out of range", flag,
                       ll);
            *(int *)dst = (int)ll;
            return ST_OK;
        case 'l':
            ST_TRY(parse_ll(flag, value, &ll));
            *(long long *)dst = ll;
            return ST_OK;
        case 'd': {
            char *end;
            errno = 0;
            double d = strtod(value, &end);
            ST_REQUIRE(end != value && *end == 0 && errno == 0, ST_ERR_INPUT, "--%s: '%s' is not a number", flag,
                       value);
            *(double *)dst = d;
            return ST_OK;
        }
        default:
            free(*(char **)dst);
            *(char **)dst = strdup(value);
            return ST_OK;
        }
    }
    if (strcmp(flag, "preset") == 0) {
        /* A preset resets every size; later size flags refine it. */
        ST_TRY(st_dims_preset(value, &c->dims));
        snprintf(c->preset, sizeof c->preset, "%s", value);
        return ST_OK;
    }
    for (int i = 0; i < N_DIMS; i++) {
        if (strcmp(dims_flags[i].flag, flag) != 0) continue;
        long long ll;
        ST_TRY(parse_ll(flag, value, &ll));
        ST_REQUIRE(ll > 0 && ll < 1 << 24, ST_ERR_INPUT, "--%s: %lld is out of range", flag, ll);
        *(int *)((char *)&c->dims + dims_flags[i].off) = (int)ll;
        return ST_OK;
    }
    return ST_FAIL(ST_ERR_INPUT, "unknown training parameter '%s'", flag);
}

int st_train_config_apply_json(st_train_config *c, const char *json, const char *what) {
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return ST_FAIL(ST_ERR_INPUT, "%s: the config is not a JSON object", what);
    }
    /* The preset first, so that explicit sizes refine it. */
    cJSON *preset = cJSON_GetObjectItemCaseSensitive(root, "preset");
    int rc = cJSON_IsString(preset) ? st_train_config_set(c, "preset", preset->valuestring) : ST_OK;
    for (cJSON *it = root->child; it && rc == ST_OK; it = it->next) {
        if (strcmp(it->string, "preset") == 0) continue;
        char num[64];
        const char *v = NULL;
        if (cJSON_IsString(it)) v = it->valuestring;
        else if (cJSON_IsNumber(it)) {
            snprintf(num, sizeof num, "%.17g", it->valuedouble);
            v = num;
        } else {
            rc = ST_FAIL(ST_ERR_INPUT, "%s: key '%s' must be a string or a number", what, it->string);
            break;
        }
        rc = st_train_config_set(c, it->string, v);
    }
    cJSON_Delete(root);
    return rc;
}

char *st_train_config_to_json(const st_train_config *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "preset", c->preset);
    for (int i = 0; i < N_DIMS; i++)
        cJSON_AddNumberToObject(root, dims_flags[i].flag, *(const int *)((const char *)&c->dims + dims_flags[i].off));
    for (int i = 0; i < N_PARAMS; i++) {
        const void *src = (const char *)c + params[i].off;
        switch (params[i].kind) {
        case 'i': cJSON_AddNumberToObject(root, params[i].flag, *(const int *)src); break;
        case 'l': cJSON_AddNumberToObject(root, params[i].flag, (double)*(const long long *)src); break;
        case 'd': cJSON_AddNumberToObject(root, params[i].flag, *(const double *)src); break;
        default: cJSON_AddStringToObject(root, params[i].flag, *(char *const *)src); break;
        }
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

int st_train_config_validate(const st_train_config *c) {
    const st_dims *d = &c->dims;
    ST_TRY(st_dims_validate(d));
    long n = (long)d->T * d->B;
    ST_REQUIRE(c->updates > 0, ST_ERR_INPUT, "--updates must be positive, got %d", c->updates);
    ST_REQUIRE(c->stop_after >= 0, ST_ERR_INPUT, "--stop-after must be >= 0");
    ST_REQUIRE(c->epochs > 0 && c->minibatches > 0, ST_ERR_INPUT, "--epochs and --minibatches must be positive");
    ST_REQUIRE(n % c->minibatches == 0, ST_ERR_INPUT,
               "rollout T*B = %d*%d = %ld samples do not split into %d equal minibatches", d->T, d->B, n,
               c->minibatches);
    ST_REQUIRE(c->lr > 0 && c->lr < 1, ST_ERR_INPUT, "--lr %g is outside (0, 1)", c->lr);
    ST_REQUIRE(c->precision && (strcmp(c->precision, "fp32") == 0 || strcmp(c->precision, "bf16") == 0),
               ST_ERR_INPUT, "--precision %s: expected fp32 or bf16", c->precision ? c->precision : "(none)");
    ST_REQUIRE(c->gamma > 0 && c->gamma <= 1 && c->gae_lambda >= 0 && c->gae_lambda <= 1, ST_ERR_INPUT,
               "--gamma must be in (0, 1] and --gae-lambda in [0, 1]");
    ST_REQUIRE(c->clip > 0, ST_ERR_INPUT, "--clip must be positive");
    ST_REQUIRE(c->max_grad_norm > 0, ST_ERR_INPUT, "--max-grad-norm must be positive");
    ST_REQUIRE(c->episode_length >= 2, ST_ERR_INPUT, "--episode-length must be at least 2");
    ST_REQUIRE(c->k_stop > 0, ST_ERR_INPUT, "--k-stop must be positive");
    ST_REQUIRE(c->slippage_bps >= 0 && c->commission_bps >= 0, ST_ERR_INPUT, "costs must be >= 0");
    ST_REQUIRE(d->F == 40 && d->C == 16, ST_ERR_INPUT,
               "training needs F = 40 snapshot and C = 16 context features (got F=%d, C=%d)", d->F, d->C);
    st_sched_kind k;
    ST_TRY(st_sched_parse(c->schedule, &k));
    return ST_OK;
}
