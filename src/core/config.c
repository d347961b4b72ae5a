/* config.c: presets and validation of the model sizes.
 *
 * st_dims_validate reports every problem of a set of sizes, not just the
 * first: its message is one line per problem, each naming the flag of the
 * size (cli/args.h) and the rule it breaks. */
#include "core/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/problems.h"

int st_dims_preset(const char *name, st_dims *d) {
    /*                      B     K   F   C   Dv  D    L  ex hd  N   G  W  Q   Hh   A  T */
    static const st_dims tiny = {32, 32, 40, 16, 8, 32, 1, 2, 16, 16, 1, 4, 16, 32, 3, 32};
    static const st_dims dflt = {128, 64, 40, 16, 32, 128, 2, 2, 32, 64, 1, 4, 32, 128, 3, 64};
    /* Not for training: odd sizes that catch any hidden constant (tests, gradcheck). */
    static const st_dims odd = {3, 50, 37, 11, 5, 96, 2, 2, 24, 10, 1, 4, 16, 20, 3, 8};
    static const st_dims large = {4096, 128, 40, 16, 64, 256, 4, 2, 64, 128, 1, 4, 64, 256, 3, 64};
    if (!name || strcmp(name, "default") == 0) *d = dflt;
    else if (strcmp(name, "tiny") == 0) *d = tiny;
    else if (strcmp(name, "large") == 0) *d = large;
    else if (strcmp(name, "odd") == 0) *d = odd;
    else return ST_FAIL(ST_ERR_INPUT, "unknown preset '%s' (expected tiny, default, large or odd)", name);
    return ST_OK;
}

int st_dims_validate(const st_dims *d) {
    st_problem_list p = {.len = 0};
    const struct {
        const char *flag, *name;
        int v;
    } pos[] = {
        {"batch", "B", d->B},           {"window", "K", d->K},       {"features", "F", d->F},
        {"context", "C", d->C},         {"vsn-hidden", "Dv", d->Dv}, {"d-model", "D", d->D},
        {"layers", "L", d->L},          {"expand", "expand", d->expand}, {"headdim", "P", d->headdim},
        {"d-state", "N", d->N},         {"groups", "G", d->G},       {"conv-width", "W", d->W},
        {"chunk", "Q", d->Q},           {"head-hidden", "Hh", d->Hh}, {"rollout", "T", d->T},
    };
    int all_positive = 1;
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i].v > 0) continue;
        all_positive = 0;
        st_problem_add(&p, "--%s %d: the size %s must be positive", pos[i].flag, pos[i].v, pos[i].name);
    }
    if (all_positive) {
        long di = (long)d->expand * d->D;
        if (di > (1 << 24)) {
            st_problem_add(&p, "d_inner = --expand %d x --d-model %d = %ld is too large (at most %d)", d->expand, d->D, di,
                    1 << 24);
        } else if (st_d_inner(d) % d->headdim != 0) {
            st_problem_add(&p, "d_inner = expand*D = %d must be a multiple of --headdim %d", st_d_inner(d), d->headdim);
        } else if (st_heads(d) % d->G != 0) {
            st_problem_add(&p, "heads H = d_inner/headdim = %d/%d = %d must be a multiple of --groups %d", st_d_inner(d),
                    d->headdim, st_heads(d), d->G);
        }
        if (d->K < d->W)
            st_problem_add(&p, "--window %d is smaller than the causal conv width %d (--conv-width)", d->K, d->W);
    }
    if (d->A != 3) st_problem_add(&p, "A must be 3 (short, flat, long), got %d", d->A);
    return st_problem_status(&p);
}
