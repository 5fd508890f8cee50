/* Each thread that answers requests owns a fixed open-addressing table of entries keyed by
 * (route, method, status), each holding a count, a duration sum and histogram buckets. Only
 * the owner writes an entry (relaxed atomic stores, no read-modify-write); a scrape reads
 * every table with relaxed loads and adds them up, so the counts it reports may lag a request
 * in flight but never tear. Tables are created on a thread's first request and live as long
 * as the process (threads are a fixed pool). */
#include "http/metrics.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "core/vec.h"
#include "db/db.h"
#include "ext/digest.h"
#include "ext/password.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include "http/ratelimit.h"
#include "http/router.h"
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define TABLE_SIZE 1024 /* entries per thread; a power of two */
static const double BUCKETS[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])
static const int TRIP_BUCKETS[] = {0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50};
#define NTRIPS (sizeof TRIP_BUCKETS / sizeof TRIP_BUCKETS[0])
static const char *const METHODS[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"};
#define NMETHODS (sizeof METHODS / sizeof METHODS[0])

typedef struct entry {
  _Atomic uint64_t key; /* 0: empty; else (route slot + 1) << 24 | method << 16 | status */
  _Atomic uint64_t count, sum_us;
  _Atomic uint64_t bucket[NBUCKETS];         /* not cumulative: the first bucket the duration fits */
  _Atomic uint64_t trips_sum, trips[NTRIPS]; /* database round trips, bucketed the same way */
} entry;

typedef struct table {
  struct table *next;
  _Atomic uint64_t dropped; /* requests not counted because the table was full */
  entry e[TABLE_SIZE];
} table;

static _Atomic(table *) tables;
static _Thread_local table *mine;

static void bump(_Atomic uint64_t *v, uint64_t by) {
  atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + by, memory_order_relaxed);
}

static uint64_t hash64(uint64_t k) {
  k ^= k >> 33, k *= 0xff51afd7ed558ccdULL, k ^= k >> 33;
  return k;
}

static int method_index(const char *m) {
  for (size_t i = 0; i + 1 < NMETHODS; i++)
    if (!strcmp(METHODS[i], m)) return (int)i;
  return (int)NMETHODS - 1;
}

void hs_metrics_observe(const hs_route *route, const char *method, int status, double seconds, int db_trips) {
  if (!mine) {
    mine = xcalloc(1, sizeof *mine);
    table *head = atomic_load(&tables);
    do mine->next = head;
    while (!atomic_compare_exchange_weak(&tables, &head, mine));
  }
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  uint64_t slot = route ? (uint64_t)(route - rows) : n;
  uint64_t key = (slot + 1) << 24 | (uint64_t)method_index(method) << 16 | (uint64_t)(status & 0xffff);
  for (uint64_t i = hash64(key), probes = 0; probes < TABLE_SIZE; i++, probes++) {
    entry *e = &mine->e[i & (TABLE_SIZE - 1)];
    uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);
    if (k == 0) atomic_store_explicit(&e->key, k = key, memory_order_release);
    if (k != key) continue;
    size_t b = 0;
    while (b < NBUCKETS && seconds > BUCKETS[b]) b++;
    if (b < NBUCKETS) bump(&e->bucket[b], 1);
    bump(&e->sum_us, (uint64_t)(seconds * 1e6));
    size_t t = 0;
    while (t < NTRIPS && db_trips > TRIP_BUCKETS[t]) t++;
    if (t < NTRIPS) bump(&e->trips[t], 1);
    bump(&e->trips_sum, (uint64_t)(db_trips > 0 ? db_trips : 0));
    bump(&e->count, 1);
    return;
  }
  bump(&mine->dropped, 1);
}

static bool is_loopback(const char *ip) {
  return !strncmp(ip, "127.", 4) || !strcmp(ip, "::1") || !strncmp(ip, "::ffff:127.", 11);
}

bool hs_metrics_allowed(const hs_req *req) {
  if (req->ip && is_loopback(req->ip)) return true;
  if (!CFG.metrics_token) return false;
  const char *h = hs_header(req, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7)) return false;
  char want[65], got[65]; /* compare digests: constant time whatever the lengths */
  sha256_hex(CFG.metrics_token, strlen(CFG.metrics_token), want);
  sha256_hex(h + 7, strlen(h + 7), got);
  return digest_equal(want, got);
}

/* ---- rendering ---- */

/* A scrape is a few hundred KiB; past this something is wrong, and the lines that would pass it
 * are left out (hs_metrics_render logs it). */
#define MAX_OUTPUT (64 * 1024 * 1024)

__attribute__((format(printf, 2, 3))) static void emit(struct buf *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_vaddf(o, fmt, ap); /* a failure is kept in o, and reported once */
  va_end(ap);
}

static void family(struct buf *o, const char *name, const char *type, const char *help) {
  emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

typedef struct sum {
  uint64_t key, count, sum_us, bucket[NBUCKETS];
  uint64_t trips_sum, trips[NTRIPS];
} sum;

static int by_key(const void *a, const void *b) {
  uint64_t x = ((const sum *)a)->key, y = ((const sum *)b)->key;
  return x < y ? -1 : x > y;
}

/* Adds the entries of every thread's table into one sorted array (by route, method, status). */
static sum *collect(size_t *count, uint64_t *dropped) {
  VEC(sum) sums = {0};
  vec_reserve(NULL, &sums, 256);
  *dropped = 0;
  for (table *t = atomic_load(&tables); t; t = t->next) {
    *dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
    for (size_t i = 0; i < TABLE_SIZE; i++) {
      const entry *e = &t->e[i];
      uint64_t key = atomic_load_explicit(&e->key, memory_order_acquire);
      if (!key) continue;
      sum *into = sums.items;
      while (into < sums.items + sums.size && into->key != key) into++;
      if (into == sums.items + sums.size) *(into = vec_push(NULL, &sums)) = (sum){.key = key};
      into->count += atomic_load_explicit(&e->count, memory_order_relaxed);
      into->sum_us += atomic_load_explicit(&e->sum_us, memory_order_relaxed);
      for (size_t b = 0; b < NBUCKETS; b++)
        into->bucket[b] += atomic_load_explicit(&e->bucket[b], memory_order_relaxed);
      into->trips_sum += atomic_load_explicit(&e->trips_sum, memory_order_relaxed);
      for (size_t b = 0; b < NTRIPS; b++) into->trips[b] += atomic_load_explicit(&e->trips[b], memory_order_relaxed);
    }
  }
  qsort(sums.items, sums.size, sizeof *sums.items, by_key);
  *count = sums.size;
  return sums.items;
}

static const char *route_label(uint64_t key) {
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  size_t slot = (size_t)(key >> 24) - 1;
  return slot < n ? rows[slot].path : "unmatched";
}

/* The sums of all[i..] that share all[i]'s route and method (their statuses added up) in *h;
 * returns the index past them. */
static size_t merged(const sum *all, size_t n, size_t i, sum *h) {
  *h = all[i];
  size_t j = i + 1;
  for (; j < n && all[j].key >> 16 == all[i].key >> 16; j++) {
    h->count += all[j].count, h->sum_us += all[j].sum_us, h->trips_sum += all[j].trips_sum;
    for (size_t b = 0; b < NBUCKETS; b++) h->bucket[b] += all[j].bucket[b];
    for (size_t b = 0; b < NTRIPS; b++) h->trips[b] += all[j].trips[b];
  }
  return j;
}

/* One histogram family over every route and method of all (their statuses added up): the
 * request durations in seconds, or (trips) the database round trips. */
static void histograms(struct buf *o, const sum *all, size_t n, bool trips) {
  const char *name = trips ? "db_round_trips" : "http_request_duration_seconds";
  family(o, name, "histogram",
         trips ? "Database round trips per request, by method and route pattern (PostgreSQL: network round trips, "
                 "however many statements each carried; SQLite: statements)."
               : "Time from the request's first byte to its answer being queued, by method and route pattern.");
  for (size_t i = 0; i < n;) {
    sum h;
    i = merged(all, n, i, &h);
    const char *m = METHODS[(h.key >> 16) & 0xff], *r = route_label(h.key);
    uint64_t cumulative = 0;
    for (size_t b = 0; b < (trips ? NTRIPS : NBUCKETS); b++) {
      cumulative += trips ? h.trips[b] : h.bucket[b];
      emit(o, "%s_bucket{method=\"%s\",route=\"%s\",le=\"%g\"} %llu\n", name, m, r,
           trips ? (double)TRIP_BUCKETS[b] : BUCKETS[b], (unsigned long long)cumulative);
    }
    emit(o, "%s_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"} %llu\n", name, m, r, (unsigned long long)h.count);
    if (trips)
      emit(o, "%s_sum{method=\"%s\",route=\"%s\"} %llu\n", name, m, r, (unsigned long long)h.trips_sum);
    else
      emit(o, "%s_sum{method=\"%s\",route=\"%s\"} %.6f\n", name, m, r, (double)h.sum_us / 1e6);
    emit(o, "%s_count{method=\"%s\",route=\"%s\"} %llu\n", name, m, r, (unsigned long long)h.count);
  }
}

static void render_http(struct buf *o) {
  size_t n;
  uint64_t dropped;
  sum *all = collect(&n, &dropped);
  family(o, "http_requests_total", "counter", "Requests answered, by method, route pattern and status.");
  for (size_t i = 0; i < n; i++)
    emit(o, "http_requests_total{method=\"%s\",route=\"%s\",status=\"%u\"} %llu\n", METHODS[(all[i].key >> 16) & 0xff],
         route_label(all[i].key), (unsigned)(all[i].key & 0xffff), (unsigned long long)all[i].count);
  histograms(o, all, n, false);
  histograms(o, all, n, true);
  family(o, "http_metrics_dropped_total", "counter", "Requests not counted because a thread's metrics table was full.");
  emit(o, "http_metrics_dropped_total %llu\n", (unsigned long long)dropped);
  free(all);
}

static void render_db(struct buf *o) {
  static const struct {
    const char *name, *type, *help;
  } series[] = {
      {"marketplace_db_pool_connections", "gauge", "Database connections of each lane's pool."},
      {"marketplace_db_pool_open", "gauge",
       "Of those, the ones open now (the slow pool opens past its first 4 as a burst needs them)."},
      {"marketplace_db_pool_in_use", "gauge", "Connections borrowed now."},
      {"marketplace_db_pool_waiting", "gauge", "Threads waiting for a connection now."},
      {"marketplace_db_pool_waits_total", "counter", "Borrowings that had to wait for a connection."},
  };
  long v[DB_POOL_COUNT][ARRAY_LEN(series)]; /* each pool's values, in the series' order */
  for (int k = 0; k < DB_POOL_COUNT; k++) {
    db_pool_stats s;
    db_pool_stats_get((db_pool_kind)k, &s);
    const long row[] = {s.size, s.open, s.in_use, s.waiting, s.waits};
    _Static_assert(ARRAY_LEN(row) == ARRAY_LEN(series), "a value for each series");
    memcpy(v[k], row, sizeof row);
  }
  for (size_t i = 0; i < ARRAY_LEN(series); i++) {
    family(o, series[i].name, series[i].type, series[i].help);
    for (int k = 0; k < DB_POOL_COUNT; k++)
      emit(o, "%s{lane=\"%s\"} %ld\n", series[i].name, db_pool_name((db_pool_kind)k), v[k][i]);
  }
}

static void backlog_line(void *ctx, const char *kind, const char *state, long n) {
  emit(ctx, "marketplace_queue_jobs{kind=\"%s\",state=\"%s\"} %ld\n", kind, state, n);
}

static void render_queue(struct buf *o) {
  family(o, "marketplace_queue_jobs", "gauge",
         "Background work in the database by kind and state: pending (due or waiting to be retried), running, "
         "failed (gave up).");
  queue_backlog(backlog_line, o);
  queue_kind_runs runs[64];
  int n = queue_runs(runs, 64);
  family(o, "marketplace_queue_runs_total", "counter",
         "Background runs finished by this instance, by kind and outcome (done, retried, failed).");
  for (int i = 0; i < n; i++) {
    emit(o, "marketplace_queue_runs_total{kind=\"%s\",outcome=\"done\"} %ld\n", runs[i].kind, runs[i].done);
    emit(o, "marketplace_queue_runs_total{kind=\"%s\",outcome=\"retried\"} %ld\n", runs[i].kind, runs[i].retried);
    emit(o, "marketplace_queue_runs_total{kind=\"%s\",outcome=\"failed\"} %ld\n", runs[i].kind, runs[i].failed);
  }
}

static void render_processor(struct buf *o) {
  family(o, "marketplace_payment_processor_unauthorized", "gauge",
         "1 while the payment processor refuses the service's key (401/403) and no call succeeded since.");
  emit(o, "marketplace_payment_processor_unauthorized %d\n", payments_unauthorized() ? 1 : 0);
  family(o, "marketplace_payment_processor_auth_failures_total", "counter",
         "Calls the payment processor refused for the key (401/403) since start.");
  emit(o, "marketplace_payment_processor_auth_failures_total %ld\n", payments_auth_failures());
}

static void refusal_line(void *ctx, const char *rule, long n) {
  emit(ctx, "marketplace_rate_limit_refusals_total{rule=\"%s\"} %ld\n", rule, n);
}

static void render_limits(struct buf *o) {
  int waiting, busy;
  long refused, computed;
  password_pool_stats(&waiting, &busy, &refused, &computed);
  family(o, "marketplace_password_hash_queue_depth", "gauge", "Password hashes waiting for a hashing thread.");
  emit(o, "marketplace_password_hash_queue_depth %d\n", waiting);
  family(o, "marketplace_password_hash_busy_threads", "gauge", "Hashing threads at work.");
  emit(o, "marketplace_password_hash_busy_threads %d\n", busy);
  family(o, "marketplace_password_hash_refusals_total", "counter",
         "Requests answered 503 Server busy because the hashing queue was full.");
  emit(o, "marketplace_password_hash_refusals_total %ld\n", refused);
  family(o, "marketplace_password_hashes_total", "counter",
         "bcrypt computations done (hashes and checks; an unknown account's login checks a dummy hash).");
  emit(o, "marketplace_password_hashes_total %ld\n", computed);
  family(o, "marketplace_rate_limit_refusals_total", "counter", "Requests answered 429 by a rate limit, by rule.");
  hs_rate_limit_refusals(refusal_line, o);
}

static void render_process(struct buf *o) {
  long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
  long long rss = 0;
  char buf[4096];
  FILE *f = fopen("/proc/self/stat", "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (p)
    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
           &utime, &stime, &start, &vsize, &rss);
  long long btime = 0;
  if ((f = fopen("/proc/stat", "r"))) {
    while (fgets(buf, sizeof buf, f))
      if (sscanf(buf, "btime %lld", &btime) == 1) break;
    fclose(f);
  }
  int fds = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *de; d && (de = readdir(d));) fds += de->d_name[0] != '.';
  if (d) closedir(d), fds--; /* the directory's own descriptor */
  struct rlimit rl = {0};
  getrlimit(RLIMIT_NOFILE, &rl);
  family(o, "process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.");
  emit(o, "process_cpu_seconds_total %.2f\n", (double)(utime + stime) / (double)ticks);
  family(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  emit(o, "process_resident_memory_bytes %lld\n", rss * page);
  family(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  emit(o, "process_virtual_memory_bytes %llu\n", vsize);
  family(o, "process_open_fds", "gauge", "Number of open file descriptors.");
  emit(o, "process_open_fds %d\n", fds);
  family(o, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
  emit(o, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
  family(o, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
  emit(o, "process_start_time_seconds %.2f\n", (double)btime + (double)start / (double)ticks);
}

char *hs_metrics_render(size_t *len) {
  struct buf o;
  buf_init(&o, MAX_OUTPUT);
  render_http(&o);
  render_db(&o);
  render_queue(&o);
  render_processor(&o);
  render_limits(&o);
  render_process(&o);
  hs_hooks_metrics(&o);
  if (buf_result(&o) != BUF_OK)
    log_msg(LOG_ERROR, "metrics: the scrape was cut short (%s)",
            buf_result(&o) == BUF_TOO_LARGE ? "over 64 MiB" : "out of memory");
  char *text = buf_take(&o, len);
  return text ? text : xstrdup("");
}
