/* Keeping by generation (core/gencache.h). */
#include "core/gencache.h"
#include "core/clock.h"
#include "core/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
  pthread_rwlock_t lock;
  char *key, *value; /* heap; NULL: empty */
  size_t len;
  uint64_t gen;
  int64_t kept_at; /* clock_mono_ms */
} slot;

struct gencache {
  slot *slots;
  size_t mask;
  int64_t ttl_ms;
};

gencache *gencache_new(unsigned slots, int64_t ttl_ms) {
  size_t n = 1;
  while (n < slots) n <<= 1;
  gencache *c = xcalloc(1, sizeof *c);
  c->slots = xcalloc(n, sizeof *c->slots);
  c->mask = n - 1;
  c->ttl_ms = ttl_ms;
  for (size_t i = 0; i < n; i++) pthread_rwlock_init(&c->slots[i].lock, NULL);
  return c;
}

void gencache_free(gencache *c) {
  if (!c) return;
  for (size_t i = 0; i <= c->mask; i++) {
    free(c->slots[i].key);
    free(c->slots[i].value);
    pthread_rwlock_destroy(&c->slots[i].lock);
  }
  free(c->slots);
  free(c);
}

static slot *slot_of(gencache *c, const char *key) { return &c->slots[fnv1a(FNV1A_BASIS, key) & c->mask]; }

bool gencache_get(gencache *c, const char *key, uint64_t gen, jw *out) {
  if (!gen) return false;
  slot *s = slot_of(c, key);
  int64_t now = clock_mono_ms();
  pthread_rwlock_rdlock(&s->lock);
  bool hit = s->key && s->gen == gen && now - s->kept_at < c->ttl_ms && !strcmp(s->key, key);
  if (hit && out) jw_raw(out, s->value, s->len);
  pthread_rwlock_unlock(&s->lock);
  return hit;
}

void gencache_put(gencache *c, const char *key, uint64_t gen, const char *value, size_t len) {
  if (!gen) return;
  slot *s = slot_of(c, key);
  char *k = xstrdup(key), *v = xmalloc(len + 1);
  if (len) memcpy(v, value, len);
  int64_t now = clock_mono_ms();
  if (pthread_rwlock_trywrlock(&s->lock)) {
    free(k);
    free(v);
    return;
  }
  char *old_key = s->key, *old_value = s->value;
  s->key = k, s->value = v, s->len = len, s->gen = gen, s->kept_at = now;
  pthread_rwlock_unlock(&s->lock);
  free(old_key);
  free(old_value);
}
