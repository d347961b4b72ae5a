/* arena.c: the single-block allocator of arena.h. */
#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int st_arena_init(st_arena *a, size_t size) {
    a->size = st_arena_round(size ? size : 64);
    a->used = 0;
    a->base = aligned_alloc(64, a->size);
    if (!a->base) return ST_FAIL(ST_ERR_MEMORY, "cannot allocate an arena of %zu bytes", a->size);
    memset(a->base, 0, a->size);
    return ST_OK;
}

void st_arena_free(st_arena *a) {
    free(a->base);
    a->base = NULL;
    a->size = a->used = 0;
}

void *st_arena_take(st_arena *a, size_t bytes) {
    size_t need = st_arena_round(bytes);
    if (a->used + need > a->size) return NULL;
    void *p = a->base + a->used;
    a->used += need;
    return p;
}
