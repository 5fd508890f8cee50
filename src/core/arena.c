/* Bump allocator with deferred destructors; see arena.h. Chunks grow geometrically so a
 * typical request (a few KiB) touches one malloc. */
#include "core/arena.h"
#include "core/util.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arena_chunk {
  arena_chunk *next;
  size_t size, used;
  _Alignas(max_align_t) unsigned char data[];
};
struct arena_defer_node {
  arena_defer_node *next;
  void (*fn)(void *);
  void *ptr;
};

void arena_init(arena *a) { a->head = NULL, a->defers = NULL, a->embedded = NULL; }

void arena_init_buf(arena *a, void *buf, size_t size) {
  arena_chunk *c = buf;
  c->next = NULL, c->size = size - sizeof *c, c->used = 0;
  a->head = a->embedded = c, a->defers = NULL;
}

void arena_fini(arena *a) {
  for (arena_defer_node *d = a->defers; d; d = d->next) d->fn(d->ptr);
  arena_chunk *c = a->head;
  while (c) {
    arena_chunk *next = c->next;
    if (c != a->embedded) free(c);
    c = next;
  }
  a->defers = NULL;
  a->head = a->embedded;
  if (a->head) a->head->used = 0, a->head->next = NULL;
}

void *arena_alloc_raw(arena *a, size_t n) {
  const size_t align = _Alignof(max_align_t);
  /* a size that cannot be rounded up, or whose chunk header would not fit, is out of memory */
  if (n > SIZE_MAX - sizeof(arena_chunk) - align) oom();
  n = (n + align - 1) & ~(align - 1);
  arena_chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t size = c && c->size >= 4096 && c->size <= SIZE_MAX / 4 ? c->size * 2 : 4096;
    if (size < n) size = n; /* a large allocation gets a chunk of its own size */
    c = xmalloc(sizeof *c + size);
    c->size = size, c->used = 0, c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

void *arena_alloc(arena *a, size_t n) {
  void *p = arena_alloc_raw(a, n);
  memset(p, 0, n);
  return p;
}

char *arena_strndup(arena *a, const char *s, size_t n) {
  char *p = arena_alloc_raw(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(arena *a, const char *s) { return s ? arena_strndup(a, s, strlen(s)) : NULL; }

char *arena_printf(arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return arena_strdup(a, ""); /* an encoding error: an empty string, terminated */
  char *p = arena_alloc_raw(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void arena_defer(arena *a, void (*fn)(void *), void *ptr) {
  arena_defer_node *d = arena_alloc(a, sizeof *d);
  d->fn = fn, d->ptr = ptr, d->next = a->defers;
  a->defers = d;
}

static void json_release(void *p) { json_decref(p); }

json_t *arena_json(arena *a, json_t *v) {
  if (v) arena_defer(a, json_release, v);
  return v;
}
