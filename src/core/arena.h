/* Request-lifetime memory.
 *
 * Every request owns one arena: allocations are bump-allocated from chunks and never freed
 * one by one; resources that need a destructor (jansson values, result sets, files) are
 * registered with arena_defer() and released, in reverse order, when the arena is cleared.
 * An arena is used by one thread at a time. Out of memory (a size that cannot be allocated,
 * however large) ends the process. */
#ifndef CORE_ARENA_H
#define CORE_ARENA_H
#include <stddef.h>
#include <jansson.h>

typedef struct arena_chunk arena_chunk;
typedef struct arena_defer_node arena_defer_node;
typedef struct arena {
  arena_chunk *head;
  arena_defer_node *defers;
  arena_chunk *embedded; /* the first chunk, in caller storage (arena_init_buf), or NULL */
} arena;

/* Prepares an empty arena in caller-owned storage. */
void arena_init(arena *a);
/* The same, with a first chunk in caller storage (size bytes, aligned for any type), so a
 * small request allocates nothing. The buffer must outlive the arena. */
void arena_init_buf(arena *a, void *buf, size_t size);
/* Runs every deferred destructor (last registered first) and frees all memory; the arena is
 * then empty and can be used again. */
void arena_fini(arena *a);
/* Returns zeroed memory aligned for any type, valid until arena_fini(). */
void *arena_alloc(arena *a, size_t n);
/* The same without zeroing, for buffers that are written before they are read. */
void *arena_alloc_raw(arena *a, size_t n);
/* Copies a string (NULL stays NULL) / the first n bytes plus a terminating NUL. */
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
/* printf into arena memory; an output error gives "" (always terminated). */
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Registers fn(ptr) to run at arena_fini(). */
void arena_defer(arena *a, void (*fn)(void *), void *ptr);
/* Registers a jansson reference to drop at arena_fini(); returns v for chaining. */
json_t *arena_json(arena *a, json_t *v);

#endif
