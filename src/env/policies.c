/* policies.c: the baseline policies of policies.h. */
#include "env/policies.h"

#include <string.h>

#include "core/error.h"
#include "core/philox.h"

static const char *const names[ST_BASELINE_COUNT] = {"flat", "buyhold", "random", "oracle"};

const char *st_baseline_name(int policy) { return policy >= 0 && policy < ST_BASELINE_COUNT ? names[policy] : "?"; }

int st_baseline_parse(const char *name) {
    for (int p = 0; p < ST_BASELINE_COUNT; p++)
        if (strcmp(name, names[p]) == 0) return p;
    return -1;
}

int st_baseline_available(int policy, const st_market *m) {
    if (policy != ST_BASELINE_ORACLE) return policy >= 0 && policy < ST_BASELINE_COUNT;
    for (int i = 0; i < m->n_inst; i++)
        if (!m->inst[i].oracle) return 0;
    return m->n_inst > 0;
}

/* Uniform action at (instrument, bar), independent of everything else. */
static int random_action(uint64_t seed, int inst, int bar) {
    uint64_t index = ((uint64_t)(uint32_t)inst << 32) | (uint32_t)bar;
    st_philox4 d = st_philox_draw(seed, ST_STREAM_EVAL, index);
    return (int)(((uint64_t)d.v[0] * 3u) >> 32);
}

int st_baseline_act(void *user, const st_env *e, const float *ctx, int ctx_stride, int *actions) {
    const st_baseline *p = user;
    (void)ctx;
    (void)ctx_stride;
    for (int b = 0; b < e->B; b++) {
        const st_instrument *I = &e->m->inst[e->inst[b]];
        switch (p->policy) {
        case ST_BASELINE_FLAT: actions[b] = 1; break;
        case ST_BASELINE_BUYHOLD: actions[b] = 2; break;
        case ST_BASELINE_RANDOM: actions[b] = random_action(p->seed, e->inst[b], e->bar[b]); break;
        case ST_BASELINE_ORACLE:
            ST_REQUIRE(I->oracle, ST_ERR_INPUT, "oracle policy: instrument %s has no oracle (real data)", I->name);
            actions[b] = I->oracle[e->bar[b]] + 1;
            break;
        default: return ST_FAIL(ST_ERR_INTERNAL, "baseline policy %d does not exist", p->policy);
        }
    }
    return ST_OK;
}
