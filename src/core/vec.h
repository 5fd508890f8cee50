/* The one growing array type beside struct buf, in the manner of h2o's H2O_VECTOR: where an
 * array of unknown length is collected, its struct is declared in place (VEC(T): items, size,
 * capacity) and grown by vec_reserve, doubling, on the heap (arena NULL; vec_free releases it)
 * or in an arena (released with the arena; growing there leaves the old block to it). Running
 * out of memory aborts, as xmalloc does: these arrays hold the service's own bookkeeping, never
 * a caller's unbounded input (that goes through struct buf and its cap). */
#ifndef CORE_VEC_H
#define CORE_VEC_H
#include "core/arena.h"
#include <stddef.h>
#include <stdlib.h>

#define VEC(T)                                                                                                         \
  struct {                                                                                                             \
    T *items;                                                                                                          \
    size_t size, capacity;                                                                                             \
  }

/* Room for at least n items in v (its items may move). */
#define vec_reserve(a, v, n) vec_reserve_((a), (void **)&(v)->items, sizeof *(v)->items, &(v)->capacity, (v)->size, (n))
/* A new last item of v, uninitialized: *vec_push(NULL, &list) = item. */
#define vec_push(a, v) (vec_reserve((a), (v), (v)->size + 1), &(v)->items[(v)->size++])
/* Releases a heap vector's items; it is empty and may be used again. */
#define vec_free(v) (free((v)->items), (v)->items = NULL, (v)->size = (v)->capacity = 0)

void vec_reserve_(arena *a, void **items, size_t item_size, size_t *capacity, size_t size, size_t n);

#endif
