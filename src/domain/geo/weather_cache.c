/* The forecast cache: a hash table of ZIPs under one mutex. An entry is empty, being
 * fetched, or ready (with its fetch time on the service clock, so the test clock ages it).
 * The thread that finds an entry missing or stale marks it fetching and fetches without the
 * lock; threads that arrive meanwhile wait on the condition variable for that fetch's
 * generation to end and take its outcome. Only ZIPs of the embedded table get entries, which
 * bounds the table (about 34,000 entries of 400 bytes at most). */
#include "core/clock.h"
#include "core/util.h"
#include "domain/geo/geo.h"
#include "ext/geo.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TTL_MS (3600LL * 1000)
#define BUCKETS 4096

typedef enum { EMPTY, FETCHING, READY } entry_state;

typedef struct entry {
  struct entry *next;
  char zip[6];
  entry_state state;
  unsigned generation; /* fetches finished */
  bool last_ok;        /* the outcome of the last fetch */
  int64_t fetched_at;
  int n;
  weather_day days[WEATHER_DAYS];
} entry;

static entry *table[BUCKETS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;

static entry *lookup(const char *zip) {
  unsigned h = (unsigned)strtoul(zip, NULL, 10) % BUCKETS;
  for (entry *e = table[h]; e; e = e->next)
    if (!strcmp(e->zip, zip)) return e;
  entry *e = xcalloc(1, sizeof *e);
  memcpy(e->zip, zip, 6);
  e->next = table[h];
  table[h] = e;
  return e;
}

static void copy_out(const entry *e, weather_day *out, int *n) {
  memcpy(out, e->days, sizeof *out * (size_t)e->n);
  *n = e->n;
}

err_t geo_forecast(const char *zip, weather_day out[WEATHER_DAYS], int *n) {
  double lat, lng;
  if (!geo_zip_centroid(zip, &lat, &lng)) return ERR_NOT_FOUND;
  pthread_mutex_lock(&mu);
  entry *e = lookup(zip);
  if (e->state == READY && clock_now_ms() - e->fetched_at < TTL_MS) {
    copy_out(e, out, n);
    pthread_mutex_unlock(&mu);
    return ERR_OK;
  }
  if (e->state == FETCHING) { /* another thread is asking: take its answer */
    unsigned gen = e->generation;
    while (e->generation == gen) pthread_cond_wait(&done, &mu);
    bool ok = e->last_ok;
    if (ok) copy_out(e, out, n);
    pthread_mutex_unlock(&mu);
    return ok ? ERR_OK : ERR_UNAVAILABLE;
  }
  e->state = FETCHING;
  pthread_mutex_unlock(&mu);
  weather_day days[WEATHER_DAYS];
  int count = 0;
  bool ok = weather_fetch(lat, lng, days, &count) == WEATHER_OK;
  pthread_mutex_lock(&mu);
  if (ok) {
    memcpy(e->days, days, sizeof days);
    e->n = count;
    e->fetched_at = clock_now_ms();
    copy_out(e, out, n);
  }
  e->state = ok ? READY : EMPTY;
  e->last_ok = ok;
  e->generation++;
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&mu);
  return ok ? ERR_OK : ERR_UNAVAILABLE;
}
