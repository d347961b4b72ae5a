/* config.c: presets and validation of the model sizes. */
#include "core/config.h"

#include <string.h>

#include "core/error.h"

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
    const struct { const char *name; int v; } pos[] = {
        {"B", d->B}, {"K", d->K}, {"F", d->F}, {"C", d->C}, {"Dv", d->Dv}, {"D", d->D},
        {"L", d->L}, {"expand", d->expand}, {"headdim", d->headdim}, {"N", d->N},
        {"G", d->G}, {"W", d->W}, {"Q", d->Q}, {"Hh", d->Hh}, {"A", d->A}, {"T", d->T},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        ST_REQUIRE(pos[i].v > 0, ST_ERR_INPUT, "size %s must be positive, got %d", pos[i].name, pos[i].v);
    ST_REQUIRE(st_d_inner(d) % d->headdim == 0, ST_ERR_INPUT,
               "d_inner = expand*D = %d must be a multiple of headdim %d", st_d_inner(d), d->headdim);
    ST_REQUIRE(st_heads(d) % d->G == 0, ST_ERR_INPUT,
               "heads H = %d must be a multiple of the groups G = %d", st_heads(d), d->G);
    ST_REQUIRE(d->A == 3, ST_ERR_INPUT, "A must be 3 (short, flat, long), got %d", d->A);
    return ST_OK;
}
