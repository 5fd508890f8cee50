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
#define STMT_CACHE_RECENT 64
typedef struct stmt_cache {
  stmt_entry *buckets[STMT_CACHE_BUCKETS];
  /* The entry last found for a key at each address (a slot by the address's bits). Most SQL is
   * a literal or a buffer built once, so its text comes back at the same address and is only
   * compared, not hashed again: hashing a job's 1.5 KB detail query byte by byte took 7.5% of
   * GET /jobs/:id (docs/performance-history.md, section 19). */
  const char *recent_at[STMT_CACHE_RECENT];
  stmt_entry *recent[STMT_CACHE_RECENT];
  int count;
} stmt_cache;

stmt_entry *stmt_cache_find(stmt_cache *c, const char *key);
/* Adds a new entry (key copied) and returns it; stmt filled by the caller. */
stmt_entry *stmt_cache_add(stmt_cache *c, const char *key);
/* Calls finalize(stmt) on every entry and empties the cache. */
void stmt_cache_clear(stmt_cache *c, void (*finalize)(void *stmt));

#endif
