/* arena.h: one allocation per model, carved into named pieces.
 *
 * Parameters, gradients, optimiser moments and activations are each laid
 * out once (offsets computed from the config) and live in a single block,
 * so that a checkpoint, a scan or a copy walks one pointer and a length. */
#ifndef ST_ARENA_H
#define ST_ARENA_H

#include <stddef.h>

typedef struct {
    char *base;
    size_t size; /* bytes available */
    size_t used; /* bytes handed out */
} st_arena;

/* Allocates `size` bytes aligned to 64. Returns ST_OK or ST_ERR_MEMORY. */
int st_arena_init(st_arena *a, size_t size);
void st_arena_free(st_arena *a);
/* Hands out `bytes` aligned to 64, or NULL when the arena is full. */
void *st_arena_take(st_arena *a, size_t bytes);
/* Rounds bytes up to the arena's alignment (for sizing passes). */
static inline size_t st_arena_round(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

#endif
