/* Durable background work.
 *
 * Work is a row in job_queue written with queue_enqueue() inside the caller's transaction,
 * so it exists exactly when the change that caused it was committed. Worker threads claim
 * ready rows one at a time with a conditional update (FOR UPDATE SKIP LOCKED on PostgreSQL),
 * so each row has one worker even across instances; a claim is a lease (by the real wall
 * clock, so instances agree and a moved test clock expires none), renewed while the work runs,
 * and a row whose worker died is claimed again once its lease runs out (QUEUE_LEASE_MS, 20 s by
 * default), which is how work resumes after a crash. A failed run is retried with exponential backoff up to
 * max_attempts. The outcome of a run is recorded even when the database was away meanwhile
 * (the worker waits for it), so finished work is not run again. Every finished run logs one
 * line: kind, jobId, attempt, ms, outcome (done, retry, failed) and the error, if any.
 *
 * Heavy work (document recognition) has workers of its own at a lower CPU priority, so a
 * burst of it neither delays emails and pushes nor takes CPU from requests. */
#ifndef EXT_QUEUE_H
#define EXT_QUEUE_H
#include "core/arena.h"
#include "db/db.h"
#include <jansson.h>
#include <stdbool.h>

/* A handler runs one unit of work. Returns true when done; false to retry later, with a
 * reason in err (256 bytes). It must be idempotent: a retried or reclaimed row runs again. */
typedef bool (*queue_handler)(json_t *payload, char err[256]);

/* Registers the handler for a kind (before queue_start). */
void queue_register(const char *kind, queue_handler fn);
/* Registers the handler of a heavy kind: run only by the heavy workers (queue_start). */
void queue_register_heavy(const char *kind, queue_handler fn);

/* The unit of work a worker thread is running, for its handler (NULL on other threads). */
typedef struct queue_item {
  const char *id, *kind;
  int64_t attempt;    /* 1 on the first run */
  int64_t created_at; /* when it was queued, by the service clock (epoch ms) */
} queue_item;
const queue_item *queue_current(void);
/* For a handler about to fail because of something that waits for a person (the payment
 * processor refused the service's key): its unit is tried again no sooner than run_at (epoch
 * ms, service clock), and this attempt does not count toward max_attempts, so the work waits
 * instead of running out of attempts. No effect outside a unit of work, or when it succeeds. */
void queue_retry_at(int64_t run_at);
/* Adds work on connection c, normally inside the caller's open transaction; a worker of its
 * lane is woken once that commits (db_on_commit), or at once when c has no transaction. */
db_rc queue_enqueue(db_conn *c, const char *kind, json_t *payload);
/* The same, due only at run_at (epoch ms, by the service clock). */
db_rc queue_enqueue_at(db_conn *c, const char *kind, json_t *payload, int64_t run_at);
/* Adds work on c unless work with the same dedupe_key was ever queued (by any instance);
 * *added (may be NULL) says which. DB_OK in both cases. */
db_rc queue_enqueue_once(db_conn *c, const char *kind, const char *dedupe_key, json_t *payload, bool *added);
/* Registers a periodic task (before queue_start): once per period_ms, in slots aligned on the
 * epoch by the service clock (so the test clock moves them), one unit of `kind` is queued with
 * payload {"slot": <slot start, epoch ms>}. Instances sharing a database queue each slot once
 * between them; a slot missed while no instance ran is not made up, the current one runs. The
 * handler is registered with queue_register as usual. */
void queue_every(const char *kind, int64_t period_ms);
/* Hands one unit of work (payload stolen) to the queue workers, which write it as queue_now
 * would: for threads that must not write themselves (ROUTE_DB_READ handlers on an event
 * thread). Held in memory until then (at most a few hundred; more are dropped), so only for
 * work whose loss costs nothing but time, such as a cache repair. */
void queue_defer(const char *kind, json_t *payload);
/* Queues one unit of work in a statement of its own and wakes the workers. */
db_rc queue_now(const char *kind, json_t *payload);
/* Which lanes queue_depth counts: both, the general one (every kind but the heavy ones), or
 * the heavy one (document recognition). */
typedef enum { QUEUE_LANES_ALL, QUEUE_LANES_GENERAL, QUEUE_LANES_HEAVY } queue_lanes;
/* Counts the work of the lanes `which` due now (pending, or running with a lapsed lease) and
 * the work being run. False when the database could not be read. For tests and operators. */
bool queue_depth(queue_lanes which, int64_t *ready, int64_t *running);
/* Runs of one kind finished by this instance since start, by outcome. */
typedef struct queue_kind_runs {
  const char *kind;
  long done, retried, failed; /* failed: gave up after its last attempt */
} queue_kind_runs;
/* Fills out with every registered kind (at most cap); returns how many. */
int queue_runs(queue_kind_runs *out, int cap);
/* Calls fn for each (kind, state) with rows in the database: state is pending (waiting to run
 * or to be retried), running or failed (gave up). False when the database could not be read. */
bool queue_backlog(void (*fn)(void *ctx, const char *kind, const char *state, long n), void *ctx);
/* Deletes finished work (status done) last changed before before_ms; rows with a dedupe key
 * also only once two of the longest periodic task's periods have passed (their keys are what
 * keeps a periodic slot from running twice while it is current). */
db_rc queue_prune_done(int64_t before_ms);
/* Starts n general worker threads and `heavy` workers for the heavy kinds (at nice 10). */
void queue_start(int n, int heavy);
/* Stops the workers; a unit of work in progress finishes first. */
void queue_stop(void);

#endif
