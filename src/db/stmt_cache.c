/* Chained hash table of prepared statements (FNV-1a over the key). */
#include "db/stmt_cache.h"
#include "core/util.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned bucket_of(const char *key) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 16777619u;
  return h % STMT_CACHE_BUCKETS;
}

stmt_entry *stmt_cache_find(stmt_cache *c, const char *key) {
  unsigned r = (unsigned)(((uintptr_t)key >> 4) % STMT_CACHE_RECENT);
  /* the same address may hold another text now (a buffer on the stack): compared first */
  if (c->recent_at[r] == key && !strcmp(c->recent[r]->key, key)) return c->recent[r];
  for (stmt_entry *e = c->buckets[bucket_of(key)]; e; e = e->next)
    if (!strcmp(e->key, key)) {
      c->recent_at[r] = key, c->recent[r] = e;
      return e;
    }
  return NULL;
}

stmt_entry *stmt_cache_add(stmt_cache *c, const char *key) {
  stmt_entry *e = xcalloc(1, sizeof *e);
  unsigned b = bucket_of(key);
  e->key = xstrdup(key);
  e->index = c->count++;
  e->next = c->buckets[b];
  c->buckets[b] = e;
  return e;
}

void stmt_cache_clear(stmt_cache *c, void (*finalize)(void *stmt)) {
  for (int b = 0; b < STMT_CACHE_BUCKETS; b++) {
    stmt_entry *e = c->buckets[b];
    while (e) {
      stmt_entry *next = e->next;
      if (finalize && e->stmt) finalize(e->stmt);
      free(e->key);
      free(e);
      e = next;
    }
    c->buckets[b] = NULL;
  }
  memset(c->recent_at, 0, sizeof c->recent_at);
  memset(c->recent, 0, sizeof c->recent);
  c->count = 0;
}
