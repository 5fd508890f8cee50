/* Queue workers. Each loop: look for ready work with a read (cheap, takes no write lock on
 * SQLite), claim one row with a conditional update that returns it, run its handler with
 * no database connection held, then record done, retry-at or failed. */
#include "ext/queue.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASE_MS (2 * 60 * 1000)
#define POLL_MS 250
#define MAX_BACKOFF_MS (60 * 60 * 1000)

typedef struct {
  const char *kind;
  queue_handler fn;
} registration;

static registration handlers[32];
static int nhandlers;

typedef struct {
  const char *kind;
  int64_t period_ms;
  int64_t queued_slot; /* the last slot this instance saw queued (by it or another) */
} periodic;

static periodic periodics[16];
static int nperiodics;
static pthread_mutex_t periodic_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t *threads;
static int nthreads;
static bool stopping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* queue_defer's work, written by the next worker that wakes (under mu). */
#define DEFERRED_MAX 256
static struct {
  const char *kind;
  json_t *payload;
} deferred[DEFERRED_MAX];
static int ndeferred;

void queue_register(const char *kind, queue_handler fn) {
  if (nhandlers == (int)ARRAY_LEN(handlers)) die("too many queue handlers");
  handlers[nhandlers++] = (registration){kind, fn};
}

static queue_handler handler_for(const char *kind) {
  for (int i = 0; i < nhandlers; i++)
    if (!strcmp(handlers[i].kind, kind)) return handlers[i].fn;
  return NULL;
}

db_rc queue_enqueue(db_conn *c, const char *kind, json_t *payload) {
  char id[ID_LEN + 1];
  id_new(id);
  char *text = json_dumps(payload, JSON_COMPACT);
  int64_t now = clock_now_ms();
  db_rc rc = db_exec(c, NULL, NULL,
                     "INSERT INTO job_queue (id, kind, payload, run_at, created_at, updated_at) "
                     "VALUES ($1, $2, $3, $4, $4, $4)",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(kind), DB_TEXT(text), DB_INT(now)));
  free(text);
  return rc;
}

db_rc queue_enqueue_once(db_conn *c, const char *kind, const char *dedupe_key, json_t *payload, bool *added) {
  char id[ID_LEN + 1];
  id_new(id);
  char *text = json_dumps(payload, JSON_COMPACT);
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r,
                     "INSERT INTO job_queue (id, kind, payload, run_at, created_at, updated_at, dedupe_key) "
                     "VALUES ($1, $2, $3, $4, $4, $4, $5) ON CONFLICT DO NOTHING",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(kind), DB_TEXT(text), DB_INT(now), DB_TEXT(dedupe_key)));
  if (added) *added = rc == DB_OK && r->changes > 0;
  arena_fini(&a);
  free(text);
  return rc;
}

void queue_every(const char *kind, int64_t period_ms) {
  if (nperiodics == (int)ARRAY_LEN(periodics)) die("too many periodic tasks");
  if (period_ms <= 0) die("periodic task %s needs a positive period", kind);
  periodics[nperiodics++] = (periodic){kind, period_ms, -1};
}

/* Queues the current slot of every periodic task that this instance has not seen queued. */
static void queue_due_periodics(void) {
  int64_t now = clock_now_ms();
  for (int i = 0; i < nperiodics; i++) {
    periodic *p = &periodics[i];
    int64_t slot = now - now % p->period_ms;
    pthread_mutex_lock(&periodic_mu);
    bool due = slot > p->queued_slot;
    pthread_mutex_unlock(&periodic_mu);
    if (!due) continue;
    char key[160];
    snprintf(key, sizeof key, "%s@%lld", p->kind, (long long)slot);
    json_t *payload = json_pack("{s:I}", "slot", (json_int_t)slot);
    db_conn *c = db_acquire();
    db_rc rc = queue_enqueue_once(c, p->kind, key, payload, NULL);
    db_release(c);
    json_decref(payload);
    if (rc != DB_OK) continue; /* the next loop tries again */
    pthread_mutex_lock(&periodic_mu);
    if (slot > p->queued_slot) p->queued_slot = slot;
    pthread_mutex_unlock(&periodic_mu);
  }
}

db_rc queue_commit(db_conn *c, db_rc rc) {
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  if (rc == DB_OK) queue_kick();
  return rc;
}

db_rc queue_now(const char *kind, json_t *payload) {
  db_conn *c = db_acquire();
  db_rc rc = queue_enqueue(c, kind, payload);
  db_release(c);
  if (rc == DB_OK) queue_kick();
  return rc;
}

void queue_defer(const char *kind, json_t *payload) {
  pthread_mutex_lock(&mu);
  if (ndeferred < DEFERRED_MAX) {
    deferred[ndeferred].kind = kind, deferred[ndeferred++].payload = payload;
    payload = NULL;
  }
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  json_decref(payload); /* dropped: the list is full */
}

/* Writes the work handed over by queue_defer. */
static void write_deferred(void) {
  for (;;) {
    pthread_mutex_lock(&mu);
    if (!ndeferred) {
      pthread_mutex_unlock(&mu);
      return;
    }
    const char *kind = deferred[--ndeferred].kind;
    json_t *payload = deferred[ndeferred].payload;
    pthread_mutex_unlock(&mu);
    if (queue_now(kind, payload) != DB_OK) log_msg(LOG_WARN, "queueing deferred %s work failed", kind);
    json_decref(payload);
  }
}

void queue_kick(void) {
  pthread_mutex_lock(&mu);
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

/* Ready: pending and due, or running with its lease expired (its worker died). */
#define READY_WHERE(now) "(status = 'pending' AND run_at <= " now ") OR (status = 'running' AND locked_until < " now ")"
#define CLAIM_SQL(lock)                                                                                                \
  "UPDATE job_queue SET status = 'running', attempts = attempts + 1, locked_until = $1, updated_at = $2 "              \
  "WHERE id = (SELECT id FROM job_queue WHERE " READY_WHERE(                                                           \
      "$2") " ORDER BY run_at LIMIT 1" lock ") "                                                                       \
            "RETURNING id, kind, payload, attempts, max_attempts"

static const char *claim_sql(void) {
  return db_engine_get() == DB_POSTGRES ? CLAIM_SQL(" FOR UPDATE SKIP LOCKED") : CLAIM_SQL("");
}

static int64_t backoff_ms(int64_t attempts) {
  int64_t ms = 1000;
  for (int64_t i = 1; i < attempts && ms < MAX_BACKOFF_MS; i++) ms *= 2;
  if (ms > MAX_BACKOFF_MS) ms = MAX_BACKOFF_MS;
  static _Thread_local unsigned seed;
  if (!seed) random_bytes(&seed, sizeof seed);
  return ms + rand_r(&seed) % 250; /* jitter so retries from many rows spread out */
}

static void finish(arena *a, const char *id, bool ok, int64_t attempts, int64_t max_attempts, const char *err) {
  int64_t now = clock_now_ms();
  if (ok) {
    db_query(a, NULL, "UPDATE job_queue SET status = 'done', locked_until = NULL, updated_at = $2 WHERE id = $1",
             DB_ARGS(DB_TEXT(id), DB_INT(now)));
    return;
  }
  bool dead = attempts >= max_attempts;
  log_json(dead ? LOG_ERROR : LOG_WARN, dead ? "background job failed for good" : "background job will retry",
           json_pack("{s:s,s:I,s:s}", "jobId", id, "attempts", (json_int_t)attempts, "error", err));
  db_query(a, NULL,
           "UPDATE job_queue SET status = $2, run_at = $3, locked_until = NULL, last_error = $4, updated_at = $5 "
           "WHERE id = $1",
           DB_ARGS(DB_TEXT(id), DB_TEXT(dead ? "failed" : "pending"), DB_INT(now + backoff_ms(attempts)), DB_TEXT(err),
                   DB_INT(now)));
}

/* Claims and runs one unit of work; false when none was ready. */
static bool run_one(void) {
  arena a;
  arena_init(&a);
  bool ran = false;
  db_res *r;
  int64_t now = clock_now_ms();
  if (db_query(&a, &r, "SELECT 1 FROM job_queue WHERE " READY_WHERE("$1") " LIMIT 1", DB_ARGS(DB_INT(now))) != DB_OK ||
      r->rows == 0)
    goto out;
  if (db_query(&a, &r, claim_sql(), DB_ARGS(DB_INT(now + LEASE_MS), DB_INT(now))) != DB_OK || r->rows == 0) goto out;
  ran = true;
  const char *id = db_text(r, 0, 0), *kind = db_text(r, 0, 1);
  int64_t attempts = db_int(r, 0, 3), max_attempts = db_int(r, 0, 4);
  char err[256] = "";
  queue_handler fn = handler_for(kind);
  json_t *payload = arena_json(&a, json_loads(db_text(r, 0, 2), 0, NULL));
  bool ok = false;
  if (!fn)
    snprintf(err, sizeof err, "no handler for kind %s", kind);
  else if (!payload)
    snprintf(err, sizeof err, "payload is not JSON");
  else
    ok = fn(payload, err);
  finish(&a, id, ok, attempts, fn && payload ? max_attempts : attempts, err);
out:
  arena_fini(&a);
  return ran;
}

bool queue_depth(int64_t *ready, int64_t *running) {
  arena a;
  arena_init(&a);
  db_res *r;
  bool ok =
      db_query(&a, &r,
               "SELECT COALESCE(SUM(CASE WHEN " READY_WHERE(
                   "$1") " THEN 1 ELSE 0 END), 0), "
                         "COALESCE(SUM(CASE WHEN status = 'running' AND locked_until >= $1 THEN 1 ELSE 0 END), 0) "
                         "FROM job_queue WHERE status IN ('pending', 'running')",
               DB_ARGS(DB_INT(clock_now_ms()))) == DB_OK;
  if (ok) *ready = db_int(r, 0, 0), *running = db_int(r, 0, 1);
  arena_fini(&a);
  return ok;
}

db_rc queue_prune_done(int64_t before_ms) {
  return db_query(NULL, NULL, "DELETE FROM job_queue WHERE status = 'done' AND dedupe_key IS NULL AND updated_at < $1",
                  DB_ARGS(DB_INT(before_ms)));
}

static void *worker(void *arg) {
  (void)arg;
  db_use_pool(DB_POOL_SLOW); /* background work never takes a request's connection */
  for (;;) {
    pthread_mutex_lock(&mu);
    bool stop = stopping;
    pthread_mutex_unlock(&mu);
    if (stop) break;
    write_deferred();
    queue_due_periodics();
    if (run_one()) continue;
    pthread_mutex_lock(&mu);
    if (!stopping && !ndeferred) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += POLL_MS * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&cv, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

void queue_start(int n) {
  stopping = false;
  threads = xcalloc((size_t)n, sizeof *threads);
  nthreads = n;
  for (int i = 0; i < n; i++) pthread_create(&threads[i], NULL, worker, NULL);
}

void queue_stop(void) {
  pthread_mutex_lock(&mu);
  stopping = true;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < nthreads; i++) pthread_join(threads[i], NULL);
  free(threads);
  threads = NULL, nthreads = 0;
  pthread_mutex_lock(&mu);
  while (ndeferred) json_decref(deferred[--ndeferred].payload); /* hints only: dropped at shutdown */
  pthread_mutex_unlock(&mu);
}
