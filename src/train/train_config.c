/* train_config.c: defaults, setting by flag name, validation and JSON of
 * the training configuration (train_config.h).
 *
 * st_train_config_validate reports every problem, not just the first: its
 * message is one line per problem (the model sizes' from st_dims_validate
 * first), each naming the flag and the rule, so that a command can print
 * them all before any work starts. */
#include "train/train_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/problems.h"
#include "core/whole_number.h"
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

int st_train_config_set(st_train_config *c, const char *flag, const char *value) {
    for (int i = 0; i < N_PARAMS; i++) {
        if (strcmp(params[i].flag, flag) != 0) continue;
        void *dst = (char *)c + params[i].off;
        long long ll;
        switch (params[i].kind) {
        case 'i':
            ST_TRY(st_parse_whole(flag, value, &ll));
            ST_REQUIRE(ll >= -2147483647LL && ll <= 2147483647LL, ST_ERR_INPUT, "--%s: %lld is out of range", flag,
                       ll);
            *(int *)dst = (int)ll;
            return ST_OK;
        case 'l':
            ST_TRY(st_parse_whole(flag, value, &ll));
            *(long long *)dst = ll;
            return ST_OK;
        case 'd': {
            char *end;
            errno = 0;
            double d = strtod(value, &end);
            ST_REQUIRE(end != value && *end == 0 && errno == 0, ST_ERR_INPUT, "--%s: '%s' is not a number", flag,
                       value);
            ST_REQUIRE(isfinite(d), ST_ERR_INPUT, "--%s: '%s' is not a finite number", flag, value);
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
        ST_TRY(st_parse_whole(flag, value, &ll));
        ST_REQUIRE(ll > 0 && ll < 1 << 24, ST_ERR_INPUT, "--%s %lld: a size must be a whole number from 1 to %d",
                   flag, ll, (1 << 24) - 1);
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
            st_json_number_text(it->valuedouble, num, sizeof num);
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
        case 'l': { /* 16 digits or more as a string: cJSON prints numbers to 15 significant digits when
                     * that reads back within an epsilon, so 9007199254740993 would come out as
                     * 9.00719925474099e+15 (st_train_config_apply_json reads strings too) */
            long long v = *(const long long *)src;
            char t[32];
            snprintf(t, sizeof t, "%lld", v);
            if (v >= 1000000000000000LL || v <= -1000000000000000LL) cJSON_AddStringToObject(root, params[i].flag, t);
            else cJSON_AddNumberToObject(root, params[i].flag, (double)v);
            break;
        }
        case 'd': cJSON_AddNumberToObject(root, params[i].flag, *(const double *)src); break;
        default: cJSON_AddStringToObject(root, params[i].flag, *(char *const *)src); break;
        }
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

static int in_range(double x, double lo, double hi) { return x >= lo && x <= hi; } /* false for NaN */

int st_train_config_validate(const st_train_config *c) {
    const st_dims *d = &c->dims;
    st_problem_list p = {.len = 0};
    int dims_ok = st_dims_validate(d) == ST_OK;
    if (!dims_ok) st_problem_add_last_error(&p);
    if (d->F != 40 || d->C != 16)
        st_problem_add(&p, "training needs F = 40 snapshot and C = 16 context features (--features %d, --context %d)", d->F,
                d->C);
    if (c->updates <= 0) st_problem_add(&p, "--updates %d must be positive", c->updates);
    if (c->stop_after < 0) st_problem_add(&p, "--stop-after %d must be >= 0 (0: run to the end)", c->stop_after);
    if (c->epochs <= 0) st_problem_add(&p, "--epochs %d must be positive", c->epochs);
    if (c->minibatches <= 0) st_problem_add(&p, "--minibatches %d must be positive", c->minibatches);
    if (c->segment <= 0) st_problem_add(&p, "--segment %d must be positive", c->segment);
    long long n = (long long)d->T * d->B;
    if (dims_ok && n > INT_MAX) {
        st_problem_add(&p, "--rollout %d x --batch %d = %lld samples per update is more than %d", d->T, d->B, n, INT_MAX);
    } else if (dims_ok && c->minibatches > 0) {
        if (n % c->minibatches != 0) {
            st_problem_add(&p, "rollout T*B = %d*%d = %lld samples do not split into %d equal minibatches (--minibatches)",
                    d->T, d->B, n, c->minibatches);
        } else {
            /* A minibatch holds whole segments: S steps of one environment (st_trainer_permutation). */
            if (c->segment > 0 && (d->T % c->segment != 0 || (n / c->minibatches) % c->segment != 0))
                st_problem_add(&p,
                        "--segment %d: segments of S steps of one environment need T = %d and the minibatch's "
                        "T*B/M = %lld samples to divide by S",
                        c->segment, d->T, n / c->minibatches);
            /* The model counts its rows (windows x K) in an int. */
            long long mw = d->B > n / c->minibatches ? d->B : n / c->minibatches, rows = mw * d->K;
            if (rows > INT_MAX)
                st_problem_add(&p,
                        "the model would see %lld rows at once (max(B, T*B/M) = %lld windows x K = %d), more than "
                        "2^31 - 1: lower --batch or --window, or raise --minibatches",
                        rows, mw, d->K);
        }
    }
    if (!(c->lr > 0 && c->lr < 1)) st_problem_add(&p, "--lr %g is outside (0, 1)", c->lr);
    if (!in_range(c->lr_min_frac, 0, 1)) st_problem_add(&p, "--lr-min-frac %g is outside [0, 1]", c->lr_min_frac);
    if (c->warmup < 0) st_problem_add(&p, "--warmup %d must be >= 0", c->warmup);
    st_sched_kind k;
    if (!c->schedule || st_sched_parse(c->schedule, &k) != ST_OK)
        st_problem_add(&p, "--schedule %s: expected cosine, linear or constant", c->schedule ? c->schedule : "(none)");
    if (!(c->beta1 >= 0 && c->beta1 < 1)) st_problem_add(&p, "--adam-beta1 %g is outside [0, 1)", c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1)) st_problem_add(&p, "--adam-beta2 %g is outside [0, 1)", c->beta2);
    if (!(c->adam_eps > 0)) st_problem_add(&p, "--adam-eps %g must be positive", c->adam_eps);
    if (!(c->weight_decay >= 0)) st_problem_add(&p, "--weight-decay %g must be >= 0", c->weight_decay);
    if (!(c->max_grad_norm > 0)) st_problem_add(&p, "--max-grad-norm %g must be positive", c->max_grad_norm);
    if (!(c->gamma > 0 && c->gamma <= 1)) st_problem_add(&p, "--gamma %g is outside (0, 1]", c->gamma);
    if (!in_range(c->gae_lambda, 0, 1)) st_problem_add(&p, "--gae-lambda %g is outside [0, 1]", c->gae_lambda);
    if (!(c->clip > 0)) st_problem_add(&p, "--clip %g must be positive", c->clip);
    if (!(c->value_clip >= 0)) st_problem_add(&p, "--value-clip %g must be >= 0 (0: off)", c->value_clip);
    if (!(c->vf_coef >= 0)) st_problem_add(&p, "--vf-coef %g must be >= 0", c->vf_coef);
    if (!(c->ent_coef >= 0)) st_problem_add(&p, "--ent-coef %g must be >= 0", c->ent_coef);
    if (c->episode_length < 2) st_problem_add(&p, "--episode-length %d must be at least 2", c->episode_length);
    if (!(c->k_stop > 0)) st_problem_add(&p, "--k-stop %g must be positive", c->k_stop);
    if (!(c->slippage_bps >= 0)) st_problem_add(&p, "--slippage-bps %g must be >= 0", c->slippage_bps);
    if (!(c->commission_bps >= 0)) st_problem_add(&p, "--commission-bps %g must be >= 0", c->commission_bps);
    if (!(c->risk_fraction > 0 && c->risk_fraction < 1))
        st_problem_add(&p, "--risk-fraction %g is outside (0, 1)", c->risk_fraction);
    if (!c->precision || (strcmp(c->precision, "fp32") != 0 && strcmp(c->precision, "bf16") != 0))
        st_problem_add(&p, "--precision %s: expected fp32 or bf16", c->precision ? c->precision : "(none)");
    if (c->checkpoint_every < 0)
        st_problem_add(&p, "--checkpoint-every %d must be >= 0 (0: only at the end)", c->checkpoint_every);
    if (!c->data || !c->data[0]) { /* the synthetic market */
        if (c->instruments < 1 || c->instruments > 1 << 16)
            st_problem_add(&p, "--instruments %d is outside 1 .. %d", c->instruments, 1 << 16);
        if (c->bars < 1) st_problem_add(&p, "--bars %d must be positive", c->bars);
    }
    return st_problem_status(&p);
}
