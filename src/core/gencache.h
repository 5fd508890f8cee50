/* A process's copies of what it read, kept by key and by the change generation they were read
 * at (db_watch_generation): an answer counts only while the generation is the one it was read
 * at and it is younger than the cache's lifetime. A fixed table of slots, one entry each (a
 * key whose slot another takes is read again); each slot has its own read-write lock, so
 * requests that read one entry at once (every request of one token) do not queue. */
#ifndef CORE_GENCACHE_H
#define CORE_GENCACHE_H
#include "core/jw.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gencache gencache;

/* A cache of about slots entries (rounded up to a power of two) that lives ttl_ms each. */
gencache *gencache_new(unsigned slots, int64_t ttl_ms);
void gencache_free(gencache *c);
/* Whether key's entry was read at gen and is still within its lifetime; then its value is
 * appended to out (when not NULL). Gen 0 (nothing can be kept) is never a hit. */
bool gencache_get(gencache *c, const char *key, uint64_t gen, jw *out);
/* Keeps value (len bytes, none for a plain yes) for key, read at gen (read before the read);
 * nothing with gen 0, or while another thread reads or writes the slot (the next miss keeps it). */
void gencache_put(gencache *c, const char *key, uint64_t gen, const char *value, size_t len);

#endif
