/* Growing arrays (vec.h). */
#include "core/vec.h"
#include "core/util.h"
#include <stdint.h>
#include <string.h>

void vec_reserve_(arena *a, void **items, size_t item_size, size_t *capacity, size_t size, size_t n) {
  if (n <= *capacity) return;
  size_t grown = *capacity ? *capacity : 4;
  while (grown < n) grown *= 2;
  if (grown > SIZE_MAX / item_size) oom();
  if (a) {
    void *moved = arena_alloc(a, grown * item_size);
    if (size) memcpy(moved, *items, size * item_size);
    *items = moved;
  } else {
    *items = xrealloc(*items, grown * item_size);
  }
  *capacity = grown;
}
