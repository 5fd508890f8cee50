/* A per-connection cache of prepared statements keyed by SQL text (plus, on PostgreSQL, the
 * parameter types). Internal to src/db; used by one thread at a time. */
#ifndef DB_STMT_CACHE_H
#define DB_STMT_CACHE_H
#include <stddef.h>

typedef struct stmt_entry {
  struct stmt_entry *next;
  char *key;
  void *stmt; /* engine statement handle */
  int index;  /* engine-assigned number (PostgreSQL statement name) */
} stmt_entry;

#define STMT_CACHE_BUCKETS 256
typedef struct stmt_cache {
  stmt_entry *buckets[STMT_CACHE_BUCKETS];
  int count;
} stmt_cache;

stmt_entry *stmt_cache_find(stmt_cache *c, const char *key);
/* Adds a new entry (key copied) and returns it; stmt filled by the caller. */
stmt_entry *stmt_cache_add(stmt_cache *c, const char *key);
/* Calls finalize(stmt) on every entry and empties the cache. */
void stmt_cache_clear(stmt_cache *c, void (*finalize)(void *stmt));

#endif
