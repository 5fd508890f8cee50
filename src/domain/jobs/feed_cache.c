/* The provider feed's parts (docs/internals/job-json.md). Read per request, the feed cost
 * PostgreSQL's backend about 0.5 ms of CPU (a join of the provider's pairs with the open
 * jobs, 200 heap rows, a sort, 110 KB of text) and SQLite a range scan per pair, most of the
 * request's cost on either engine. A part is a pure function of the rows of its pair, and feed_versions gives
 * each pair a version that moves in the transaction of every change to one of its open jobs;
 * so a request reads only the versions of its pairs and reads a pair's rows again only when
 * its version differs from the one its copy here was read at. Each process checks the version
 * on every request, so what another instance changed shows at once.
 *
 * Entries are shared by the requests that read them (a reference each, dropped with the
 * request's arena) and bounded by FEED_CACHE_BYTES, the oldest put dropped first. */
#include "domain/jobs/feed_cache.h"
#include "core/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FEED_CACHE_BYTES ((size_t)32 << 20)
#define BUCKETS 1024

typedef struct entry {
  struct entry *next;          /* in its bucket */
  struct entry *older, *newer; /* in the order of puts */
  uint64_t hash;
  char *key; /* service, '\n', zip */
  int64_t version;
  db_res *rows;
  size_t bytes;
  int refs; /* the cache's own (while listed), and one per request holding it */
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *buckets[BUCKETS];
static entry *oldest, *newest;
static size_t total;

static uint64_t key_hash(const char *service, const char *zip) {
  return fnv1a(fnv1a_byte(fnv1a(FNV1A_BASIS, service), '\n'), zip);
}

static bool key_is(const entry *e, uint64_t h, const char *service, const char *zip) {
  size_t n = strlen(service);
  return e->hash == h && !strncmp(e->key, service, n) && e->key[n] == '\n' && !strcmp(e->key + n + 1, zip);
}

static void entry_unref(entry *e) { /* under mu */
  if (--e->refs) return;
  db_res_free(e->rows);
  free(e->key);
  free(e);
}

static void release(void *p) {
  pthread_mutex_lock(&mu);
  entry_unref(p);
  pthread_mutex_unlock(&mu);
}

/* Takes e out of the table and the order (under mu); freed once no request holds it. */
static void unlist(entry *e) {
  entry **at = &buckets[e->hash % BUCKETS];
  while (*at != e) at = &(*at)->next;
  *at = e->next;
  if (e->older)
    e->older->newer = e->newer;
  else
    oldest = e->newer;
  if (e->newer)
    e->newer->older = e->older;
  else
    newest = e->older;
  total -= e->bytes;
  entry_unref(e);
}

const db_res *feed_cache_get(arena *a, const char *service, const char *zip, int64_t version) {
  uint64_t h = key_hash(service, zip);
  entry *hit = NULL;
  pthread_mutex_lock(&mu);
  for (entry *e = buckets[h % BUCKETS]; e; e = e->next)
    if (key_is(e, h, service, zip)) {
      if (e->version == version) hit = e, e->refs++;
      break;
    }
  pthread_mutex_unlock(&mu);
  if (!hit) return NULL;
  arena_defer(a, release, hit);
  return hit->rows;
}

void feed_cache_put(const char *service, const char *zip, int64_t version, const db_res *rows) {
  entry *e = xcalloc(1, sizeof *e);
  e->hash = key_hash(service, zip);
  e->key = xmalloc(strlen(service) + strlen(zip) + 2);
  sprintf(e->key, "%s\n%s", service, zip);
  e->version = version;
  e->rows = db_res_copy(rows);
  e->bytes = sizeof *e + strlen(e->key) + 64 + (size_t)rows->rows * (size_t)rows->cols * 16;
  for (int i = 0; i < rows->rows * rows->cols; i++) e->bytes += rows->lens[i] + 1;
  e->refs = 1;
  pthread_mutex_lock(&mu);
  for (entry *old = buckets[e->hash % BUCKETS]; old; old = old->next)
    if (key_is(old, e->hash, service, zip)) {
      if (old->version > version) { /* a request that read later put first: versions only grow */
        entry_unref(e);
        pthread_mutex_unlock(&mu);
        return;
      }
      unlist(old);
      break;
    }
  e->next = buckets[e->hash % BUCKETS];
  buckets[e->hash % BUCKETS] = e;
  e->older = newest;
  if (newest)
    newest->newer = e;
  else
    oldest = e;
  newest = e;
  total += e->bytes;
  while (total > FEED_CACHE_BYTES && oldest != e) unlist(oldest);
  pthread_mutex_unlock(&mu);
}

void feed_cache_clear(void) {
  pthread_mutex_lock(&mu);
  while (oldest) unlist(oldest);
  pthread_mutex_unlock(&mu);
}
