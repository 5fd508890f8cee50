/* Queue workers. Each loop: look for ready work with a read (cheap, takes no write lock on
 * SQLite), claim one row with a conditional update that returns it, run its handler with
 * no database connection held, then record done, retry-at or failed.
 *
 * Two lanes of workers: general ones take every kind but the heavy ones, heavy ones (nice 10)
 * only the heavy kinds; a row carries its kind's lane (job_queue.lane, from the registration
 * when it is queued), so that each lane's claim seeks its own rows in job_queue_ready (status,
 * lane, run_at) instead of walking the other lane's due work. A lease keeper renews the lease of
 * every row this process is running every lease / 4, so long work keeps its claim and work
 * of a process that died is free again a lease (QUEUE_LEASE_MS, 20 s by default) after its last
 * renewal. Leases, renewals and outcomes name the attempt they belong to, so a process whose
 * lease lapsed (a long database outage) never overwrites the state of a row that another
 * worker claimed since. */
#include "ext/queue.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LEASE_MS (20 * 1000)
#define POLL_MS 250
#define MAX_BACKOFF_MS (60 * 60 * 1000)
#define MAX_KINDS 32
#define HEAVY_NICE 10

typedef struct {
  const char *kind;
  queue_handler fn;
  bool heavy;
  _Atomic long done, retried, failed;
} registration;

static registration handlers[MAX_KINDS];
static int nhandlers;

typedef struct {
  const char *kind;
  int64_t period_ms;
  int64_t queued_slot; /* the last slot this instance saw queued (by it or another) */
} periodic;

static periodic periodics[16];
static int nperiodics;
static pthread_mutex_t periodic_mu = PTHREAD_MUTEX_INITIALIZER;

/* job_queue.lane's values */
enum { LANE_GENERAL, LANE_HEAVY, LANE_COUNT };
/* A claim takes up to a worker's batch of rows: one while claims find less than they ask
 * for, doubling up to CLAIM_MAX while each finds its fill. Under a backlog (POST /quotes
 * queues an email each) a worker then pays one claim per batch instead of one per row; when
 * work is scarce, rows stay one per worker and run side by side. */
#define CLAIM_MAX 16

/* How long a claim lasts without a renewal: QUEUE_LEASE_MS (CFG is all zero where the
 * configuration was not loaded, as in the unit tests: the default then). */
static int64_t lease_ms(void) { return CFG.queue_lease_ms > 0 ? CFG.queue_lease_ms : DEFAULT_LEASE_MS; }

/* A worker and the rows it holds (claimed, not yet finished), for the lease keeper. */
typedef struct worker {
  pthread_t thread;
  int lane;
  int batch; /* rows its next claim asks for */
  int nheld;
  struct {
    char id[ID_LEN + 1];
    int64_t attempt;
  } held[CLAIM_MAX];
} worker;

static worker *workers;
static int nworkers;
static pthread_t keeper;
static bool stopping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* stopping, worker slots, kicks */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;   /* stopping (the lease keeper, retries) */
/* Each lane's workers nap on their own condition. A kick wakes one worker of the lane that got
 * the work, not every worker of both lanes: each woken worker runs its ready check, and with a
 * broadcast per commit the heavy lane and the idle general workers read the queue once per
 * quote for nothing (perf: more than half the server's CPU under POST /quotes). kicks counts
 * wake-ups no worker was napping for, so a kick that lands between a worker's empty check and
 * its nap is not lost (bounded by the lane's workers). */
static pthread_cond_t lane_cv[LANE_COUNT] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static int kicks[LANE_COUNT], lane_workers[LANE_COUNT];
static _Thread_local const queue_item *current;

/* queue_defer's work, written by the next general worker that wakes (under mu). */
#define DEFERRED_MAX 256
static struct {
  const char *kind;
  json_t *payload;
} deferred[DEFERRED_MAX];
static int ndeferred;

static void add_handler(const char *kind, queue_handler fn, bool heavy) {
  if (nhandlers == MAX_KINDS) die("too many queue handlers");
  handlers[nhandlers].kind = kind, handlers[nhandlers].fn = fn, handlers[nhandlers].heavy = heavy;
  nhandlers++;
}

void queue_register(const char *kind, queue_handler fn) { add_handler(kind, fn, false); }
void queue_register_heavy(const char *kind, queue_handler fn) { add_handler(kind, fn, true); }

const queue_item *queue_current(void) { return current; }

static _Thread_local int64_t retry_no_sooner; /* queue_retry_at of the unit this thread runs; 0: none */

void queue_retry_at(int64_t run_at) {
  if (current && run_at > retry_no_sooner) retry_no_sooner = run_at;
}

static registration *registration_for(const char *kind) {
  for (int i = 0; i < nhandlers; i++)
    if (!strcmp(handlers[i].kind, kind)) return &handlers[i];
  return NULL;
}

int queue_runs(queue_kind_runs *out, int cap) {
  int n = 0;
  for (; n < nhandlers && n < cap; n++)
    out[n] = (queue_kind_runs){handlers[n].kind, handlers[n].done, handlers[n].retried, handlers[n].failed};
  return n;
}

bool queue_backlog(void (*fn)(void *ctx, const char *kind, const char *state, long n), void *ctx) {
  arena a;
  arena_init(&a);
  db_res *r;
  bool ok = db_query(&a, &r,
                     "SELECT kind, status, COUNT(*) FROM job_queue WHERE status IN ('pending', 'running', 'failed') "
                     "GROUP BY kind, status ORDER BY kind, status",
                     DB_NOARGS) == DB_OK;
  for (int i = 0; ok && i < r->rows; i++) fn(ctx, db_text(r, i, 0), db_text(r, i, 1), (long)db_int(r, i, 2));
  arena_fini(&a);
  return ok;
}

/* Wakes one worker of lane (mu held). */
static void wake_locked(int lane) {
  if (kicks[lane] < lane_workers[lane]) kicks[lane]++;
  pthread_cond_signal(&lane_cv[lane]);
}

/* The lane that runs kind (unregistered kinds: the general one, which records them failed). */
static int lane_of(const char *kind) {
  registration *reg = registration_for(kind);
  return reg && reg->heavy ? LANE_HEAVY : LANE_GENERAL;
}

/* Wakes one worker of the lane whose number is lane (a db_on_commit callback). */
static void wake_lane(void *lane) {
  pthread_mutex_lock(&mu);
  wake_locked((int)(intptr_t)lane);
  pthread_mutex_unlock(&mu);
}

/* Work was written on c: its lane's worker is woken once it is committed (at once when c has no
 * transaction: the insert is committed already). */
static void wake_after(db_conn *c, int lane_number) {
  void *lane = (void *)(intptr_t)lane_number;
  if (db_in_tx(c))
    db_on_commit(c, wake_lane, lane);
  else
    wake_lane(lane);
}

db_rc queue_enqueue_at(db_conn *c, const char *kind, json_t *payload, int64_t run_at) {
  char id[ID_LEN + 1];
  id_new(id);
  char *text = json_dumps(payload, JSON_COMPACT);
  int64_t now = clock_now_ms();
  int lane = lane_of(kind);
  /* in a transaction it goes with the next statement or the COMMIT (no round trip of its own);
   * the worker is woken once that committed */
  db_rc rc =
      db_exec_later(c, NULL, NULL,
                    "INSERT INTO job_queue (id, kind, payload, run_at, created_at, updated_at, lane) "
                    "VALUES ($1, $2, $3, $5, $4, $4, $6)",
                    DB_ARGS(DB_TEXT(id), DB_TEXT(kind), DB_TEXT(text), DB_INT(now), DB_INT(run_at), DB_INT(lane)));
  free(text);
  if (rc == DB_OK) wake_after(c, lane);
  return rc;
}

db_rc queue_enqueue(db_conn *c, const char *kind, json_t *payload) {
  return queue_enqueue_at(c, kind, payload, clock_now_ms());
}

db_rc queue_enqueue_once(db_conn *c, const char *kind, const char *dedupe_key, json_t *payload, bool *added) {
  char id[ID_LEN + 1];
  id_new(id);
  char *text = json_dumps(payload, JSON_COMPACT);
  int64_t now = clock_now_ms();
  int lane = lane_of(kind);
  bool inserted;
  db_rc rc =
      db_changes_in(c, &inserted,
                    "INSERT INTO job_queue (id, kind, payload, run_at, created_at, updated_at, dedupe_key, lane) "
                    "VALUES ($1, $2, $3, $4, $4, $4, $5, $6) ON CONFLICT DO NOTHING",
                    DB_ARGS(DB_TEXT(id), DB_TEXT(kind), DB_TEXT(text), DB_INT(now), DB_TEXT(dedupe_key), DB_INT(lane)));
  if (added) *added = inserted;
  if (inserted) wake_after(c, lane);
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

db_rc queue_now(const char *kind, json_t *payload) {
  db_conn *c = db_acquire();
  db_rc rc = queue_enqueue(c, kind, payload);
  db_release(c);
  return rc;
}

void queue_defer(const char *kind, json_t *payload) {
  pthread_mutex_lock(&mu);
  if (ndeferred < DEFERRED_MAX) {
    deferred[ndeferred].kind = kind, deferred[ndeferred++].payload = payload;
    payload = NULL;
  }
  wake_locked(LANE_GENERAL); /* a general worker writes it */
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

/* Ready: pending and due by the service clock, or running with its lease (real clock) run
 * out: its worker died. */
#define PENDING_DUE(now) "status = 'pending' AND run_at <= " now
#define LEASE_LAPSED(real) "status = 'running' AND locked_until < " real
#define READY_WHERE(now, real) "((" PENDING_DUE(now) ") OR (" LEASE_LAPSED(real) "))"

/* A lane's SQL: its rows ($4). Pending work that is due and running work whose lease lapsed
 * are two range searches of job_queue_ready (status, lane, run_at), joined with UNION ALL:
 * written as one OR, SQLite's planner scanned the whole table (done rows included) for every
 * check and claim once its statistics were older than the table's growth, and the claim
 * sorted the whole backlog. ORDER BY run_at in each part has the planner take the index
 * whatever its statistics say. */
/* The statements are laid out by their clauses, past the formatter (it would stair-step them). */
/* clang-format off */
static const char READY_SQL[] =
    "SELECT 1 FROM (SELECT 1 FROM job_queue WHERE " PENDING_DUE("$2") " AND lane = $4 ORDER BY run_at LIMIT 1) p "
    "UNION ALL SELECT 1 FROM (SELECT 1 FROM job_queue WHERE " LEASE_LAPSED("$3") " AND lane = $4 "
    "ORDER BY run_at LIMIT 1) l";

/* The claim of a lane's rows ($4) on target, each part's rows locked by lock. */
#define CLAIM_SQL(target, lock) \
  "UPDATE " target " SET status = 'running', attempts = attempts + 1, locked_until = $1, updated_at = $2 " \
  "WHERE id IN (SELECT id FROM (" \
  "SELECT id, run_at FROM (SELECT id, run_at FROM job_queue WHERE " PENDING_DUE("$2") " AND lane = $4 " \
  "ORDER BY run_at LIMIT $5" lock ") p UNION ALL " \
  "SELECT id, run_at FROM (SELECT id, run_at FROM job_queue WHERE " LEASE_LAPSED("$3") " AND lane = $4 " \
  "ORDER BY run_at LIMIT $5" lock ") l) c ORDER BY run_at LIMIT $5) " \
  "RETURNING id, kind, payload, attempts, max_attempts, created_at, run_at"
/* clang-format on */

/* PostgreSQL skips the rows another instance locked; SQLite updates the claimed rows by primary
 * key (with statistics from when the table was small, it matched `id IN (...)` by scanning the
 * table) */
static const char *claim_sql(void) {
  return db_engine_get() == DB_POSTGRES ? CLAIM_SQL("job_queue", " FOR UPDATE SKIP LOCKED")
                                        : CLAIM_SQL("job_queue INDEXED BY sqlite_autoindex_job_queue_1", "");
}

/* A lane's parameters: lease end, now, real now, the lane, then the claim's batch. */
static int lane_args(int lane, db_val *p, int64_t now, int64_t real, int batch) {
  p[0] = DB_INT(real + lease_ms()), p[1] = DB_INT(now), p[2] = DB_INT(real);
  p[3] = DB_INT(lane), p[4] = DB_INT(batch);
  return 5;
}

static int64_t backoff_ms(int64_t attempts) {
  int64_t ms = 1000;
  for (int64_t i = 1; i < attempts && ms < MAX_BACKOFF_MS; i++) ms *= 2;
  if (ms > MAX_BACKOFF_MS) ms = MAX_BACKOFF_MS;
  static _Thread_local unsigned seed;
  if (!seed) random_bytes(&seed, sizeof seed);
  return ms + rand_r(&seed) % 250; /* jitter so retries from many rows spread out */
}

static bool is_stopping(void) {
  pthread_mutex_lock(&mu);
  bool s = stopping;
  pthread_mutex_unlock(&mu);
  return s;
}

/* Sleeps up to ms, or less when the queue stops or (lane >= 0) the lane is kicked. */
static void nap_on(int lane, int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&mu);
  if (lane < 0) {
    if (!stopping) pthread_cond_timedwait(&cv, &mu, &ts);
  } else {
    if (!stopping && !kicks[lane]) pthread_cond_timedwait(&lane_cv[lane], &mu, &ts);
    if (kicks[lane]) kicks[lane]--;
  }
  pthread_mutex_unlock(&mu);
}

static void nap(int64_t ms) { nap_on(-1, ms); }

/* After a recording that the database refused (unavailable): waits before the next try;
 * false once it should give up (5 s into shutdown). */
static bool record_wait(int64_t *wait, int64_t *give_up_at) {
  if (is_stopping()) {
    if (!*give_up_at) *give_up_at = clock_mono_ms() + 5000;
    if (clock_mono_ms() >= *give_up_at) {
      log_msg(LOG_ERROR, "background job outcome not recorded (database unavailable at shutdown): it runs again");
      return false;
    }
  }
  nap(*wait);
  if (*wait < 2000) *wait *= 2;
  return true;
}

/* Runs one recording statement until the database takes it: an outcome that is not recorded
 * would have the work run again once its lease lapses. Gives up only on an error that waiting
 * cannot fix, or 5 s into shutdown. */
static void record(arena *a, const char *sql, const db_val *p, int n) {
  int64_t wait = 100, give_up_at = 0;
  while (db_query(a, NULL, sql, p, n) == DB_UNAVAILABLE && record_wait(&wait, &give_up_at)) {
  }
}

/* The rows of a batch that ran well, recorded done together at its end: one transaction (one
 * turn on SQLite's writer, one commit) for the batch instead of one per row. Until then they
 * stay held, so their leases are still renewed. */
typedef struct done_list {
  int n;
  const queue_item *rows[CLAIM_MAX];
} done_list;

static void record_done(arena *a, const done_list *d) {
  int64_t wait = 100, give_up_at = 0;
  err_t e;
  do {
    int64_t now = clock_now_ms();
    db_conn *c;
    e = db_begin(&c);
    for (int i = 0; !e && i < d->n; i++)
      e = db_to_err(db_exec(c, a, NULL,
                            "UPDATE job_queue SET status = 'done', locked_until = NULL, updated_at = $2 "
                            "WHERE id = $1 AND attempts = $3",
                            DB_ARGS(DB_TEXT(d->rows[i]->id), DB_INT(now), DB_INT(d->rows[i]->attempt))));
    e = db_end(c, e);
  } while (e == ERR_UNAVAILABLE && record_wait(&wait, &give_up_at));
}

/* Logs a row's outcome and records it: a failure at once, a success in the batch's list. */
static void finish(arena *a, const queue_item *job, bool ok, int64_t max_attempts, const char *err, int64_t ms,
                   done_list *done) {
  int64_t now = clock_now_ms();
  int64_t waits_until = retry_no_sooner; /* a wait for a person does not use up an attempt */
  bool dead = !ok && !waits_until && job->attempt >= max_attempts;
  const char *outcome = ok ? "done" : dead ? "failed" : "retry";
  json_t *fields = json_pack("{s:s,s:s,s:I,s:I,s:s}", "kind", job->kind, "jobId", job->id, "attempt",
                             (json_int_t)job->attempt, "ms", (json_int_t)ms, "outcome", outcome);
  if (!ok) json_object_set_new(fields, "error", json_string(err));
  log_json(ok     ? LOG_INFO
           : dead ? LOG_ERROR
                  : LOG_WARN,
           ok     ? "background job done"
           : dead ? "background job failed for good"
                  : "background job will retry",
           fields);
  if (ok) {
    done->rows[done->n++] = job;
    return;
  }
  int64_t run_at = now + backoff_ms(job->attempt);
  if (waits_until > run_at) run_at = waits_until;
  record(a,
         "UPDATE job_queue SET status = $2, run_at = $3, locked_until = NULL, last_error = $4, updated_at = $5, "
         "attempts = attempts - $7 WHERE id = $1 AND attempts = $6",
         DB_ARGS(DB_TEXT(job->id), DB_TEXT(dead ? "failed" : "pending"), DB_INT(run_at), DB_TEXT(err), DB_INT(now),
                 DB_INT(job->attempt), DB_INT(waits_until ? 1 : 0)));
}

/* Forgets w's held rows (their outcomes are recorded). */
static void drop_held(worker *w) {
  pthread_mutex_lock(&mu);
  w->nheld = 0;
  pthread_mutex_unlock(&mu);
}

/* Runs one claimed row (row i of r). */
static void run_row(arena *a, const db_res *r, int i, done_list *done) {
  queue_item *job = arena_alloc(a, sizeof *job); /* outlives the row: the batch's done list */
  *job = (queue_item){db_text(r, i, 0), db_text(r, i, 1), db_int(r, i, 3), db_int(r, i, 5)};
  int64_t max_attempts = db_int(r, i, 4);
  char err[256] = "";
  registration *reg = registration_for(job->kind);
  queue_handler fn = reg ? reg->fn : NULL;
  json_t *payload = arena_json(a, json_loads(db_text(r, i, 2), 0, NULL));
  bool ok = false;
  int64_t started = clock_mono_ms();
  current = job;
  retry_no_sooner = 0;
  if (!fn)
    snprintf(err, sizeof err, "no handler for kind %s", job->kind);
  else if (!payload)
    snprintf(err, sizeof err, "payload is not JSON");
  else
    ok = fn(payload, err);
  current = NULL;
  finish(a, job, ok, fn && payload ? max_attempts : job->attempt, err, clock_mono_ms() - started, done);
  bool waits = retry_no_sooner != 0;
  retry_no_sooner = 0;
  if (reg) {
    if (ok)
      reg->done++;
    else if (!waits && (job->attempt >= max_attempts || !payload))
      reg->failed++;
    else
      reg->retried++;
  }
}

static int by_run_at(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

/* Claims a batch of w's lane and runs it, oldest first; false when nothing was ready. */
static bool run_batch(worker *w) {
  arena a;
  arena_init(&a);
  bool ran = false;
  db_res *r;
  db_val p[5];
  int n = lane_args(w->lane, p, clock_now_ms(), clock_real_ms(), w->batch);
  if (db_query(&a, &r, READY_SQL, p, n) != DB_OK || r->rows == 0) goto out;
  n = lane_args(w->lane, p, clock_now_ms(), clock_real_ms(), w->batch);
  if (db_query(&a, &r, claim_sql(), p, n) != DB_OK || r->rows == 0) goto out;
  ran = true;
  int rows = r->rows < CLAIM_MAX ? r->rows : CLAIM_MAX;
  w->batch = rows < w->batch ? 1 : w->batch < CLAIM_MAX ? w->batch * 2 : CLAIM_MAX;
  int64_t order[CLAIM_MAX][2]; /* run_at, row: RETURNING keeps no order */
  for (int i = 0; i < rows; i++) order[i][0] = db_int(r, i, 6), order[i][1] = i;
  qsort(order, (size_t)rows, sizeof order[0], by_run_at);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < rows; i++) {
    snprintf(w->held[i].id, sizeof w->held[i].id, "%s", db_text(r, (int)order[i][1], 0));
    w->held[i].attempt = db_int(r, (int)order[i][1], 3);
  }
  w->nheld = rows;
  pthread_mutex_unlock(&mu);
  done_list done = {0};
  for (int i = 0; i < rows; i++) run_row(&a, r, (int)order[i][1], &done);
  if (done.n) record_done(&a, &done);
  drop_held(w);
out:
  if (!ran) w->batch = 1;
  arena_fini(&a);
  return ran;
}

bool queue_depth(queue_lanes which, int64_t *ready, int64_t *running) {
  arena a;
  arena_init(&a);
  db_res *r;
  /* by lane, as the lanes claim them */
  /* clang-format off */
  bool ok = db_query(&a, &r,
                     "SELECT lane, COALESCE(SUM(CASE WHEN " READY_WHERE("$1", "$2") " THEN 1 ELSE 0 END), 0), "
                     "COALESCE(SUM(CASE WHEN status = 'running' AND locked_until >= $2 THEN 1 ELSE 0 END), 0) "
                     "FROM job_queue WHERE status IN ('pending', 'running') GROUP BY lane",
                     DB_ARGS(DB_INT(clock_now_ms()), DB_INT(clock_real_ms()))) == DB_OK;
  /* clang-format on */
  *ready = *running = 0;
  for (int i = 0; ok && i < r->rows; i++) {
    bool heavy = db_int(r, i, 0) == LANE_HEAVY;
    if (which != QUEUE_LANES_ALL && heavy != (which == QUEUE_LANES_HEAVY)) continue;
    *ready += db_int(r, i, 1), *running += db_int(r, i, 2);
  }
  arena_fini(&a);
  return ok;
}

db_rc queue_prune_done(int64_t before_ms) {
  /* a periodic slot's key keeps that slot from running twice while it is current: keyed rows
   * stay at least two of the longest period (the others' keys name a state that has passed) */
  int64_t longest = 0;
  pthread_mutex_lock(&periodic_mu);
  for (int i = 0; i < nperiodics; i++)
    if (periodics[i].period_ms > longest) longest = periodics[i].period_ms;
  pthread_mutex_unlock(&periodic_mu);
  int64_t keyed_before = clock_now_ms() - 2 * longest;
  if (keyed_before > before_ms) keyed_before = before_ms;
  /* a lane at a time, its done rows by run_at (job_queue_ready): a row finishes after it is
   * due, so the rows past the period are among those due before it, and a batch's search
   * ends there instead of reading every row kept */
  int batch = db_prune_batch();
  db_rc rc = DB_OK;
  for (int lane = 0; rc == DB_OK && lane < LANE_COUNT; lane++)
    rc = db_delete_in_batches("DELETE FROM job_queue WHERE id IN (SELECT id FROM job_queue WHERE status = 'done' "
                              "AND lane = $3 AND run_at < $1 AND updated_at < "
                              "CASE WHEN dedupe_key IS NULL THEN $1 ELSE $2 END LIMIT $4)",
                              DB_ARGS(DB_INT(before_ms), DB_INT(keyed_before), DB_INT(lane), DB_INT(batch)), batch);
  return rc;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  db_use_pool(DB_POOL_SLOW); /* background work never takes a request's connection */
  db_plan_each_run();        /* job_queue grows from empty in a burst */
  if (w->lane == LANE_HEAVY) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), HEAVY_NICE);
  while (!is_stopping()) {
    if (w->lane == LANE_GENERAL) write_deferred(), queue_due_periodics();
    if (run_batch(w)) continue;
    nap_on(w->lane, POLL_MS);
  }
  return NULL;
}

/* Renews the leases of the rows this process runs, every lease / 4. */
static void *keeper_main(void *arg) {
  (void)arg;
  db_use_pool(DB_POOL_SLOW);
  db_plan_each_run();
  arena a;
  while (!is_stopping()) {
    nap(lease_ms() / 4);
    for (int i = 0; i < nworkers; i++)
      for (int h = 0;; h++) {
        char id[ID_LEN + 1];
        pthread_mutex_lock(&mu);
        bool more = h < workers[i].nheld;
        if (more) snprintf(id, sizeof id, "%s", workers[i].held[h].id);
        int64_t attempt = more ? workers[i].held[h].attempt : 0;
        pthread_mutex_unlock(&mu);
        if (!more) break;
        arena_init(&a);
        db_query(&a, NULL,
                 "UPDATE job_queue SET locked_until = $1 WHERE id = $2 AND attempts = $3 AND status = 'running'",
                 DB_ARGS(DB_INT(clock_real_ms() + lease_ms()), DB_TEXT(id), DB_INT(attempt)));
        arena_fini(&a);
      }
  }
  return NULL;
}

void queue_start(int n, int heavy) {
  stopping = false;
  nworkers = n + heavy;
  workers = xcalloc((size_t)nworkers, sizeof *workers);
  lane_workers[LANE_GENERAL] = n, lane_workers[LANE_HEAVY] = heavy;
  kicks[LANE_GENERAL] = kicks[LANE_HEAVY] = 0;
  for (int i = 0; i < nworkers; i++) {
    workers[i].lane = i < n ? LANE_GENERAL : LANE_HEAVY;
    workers[i].batch = 1;
    pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
    pthread_setname_np(workers[i].thread, workers[i].lane == LANE_HEAVY ? "recognition" : "queue");
  }
  pthread_create(&keeper, NULL, keeper_main, NULL);
  pthread_setname_np(keeper, "queue-lease");
}

void queue_stop(void) {
  pthread_mutex_lock(&mu);
  stopping = true;
  pthread_cond_broadcast(&cv);
  for (int l = 0; l < LANE_COUNT; l++) pthread_cond_broadcast(&lane_cv[l]);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < nworkers; i++) pthread_join(workers[i].thread, NULL);
  pthread_join(keeper, NULL);
  free(workers);
  workers = NULL, nworkers = 0;
  pthread_mutex_lock(&mu);
  while (ndeferred) json_decref(deferred[--ndeferred].payload); /* hints only: dropped at shutdown */
  pthread_mutex_unlock(&mu);
}
