/* Durable background work.
 *
 * Work is a row in job_queue written with queue_enqueue() inside the caller's transaction,
 * so it exists exactly when the change that caused it was committed. Worker threads claim
 * ready rows one at a time with a conditional update (FOR UPDATE SKIP LOCKED on PostgreSQL),
 * so each row has one worker even across instances; a claim is a lease, and a row whose
 * worker died is claimed again once the lease runs out, which is how work resumes after a
 * crash. A failed run is retried with exponential backoff up to max_attempts. */
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
/* Adds work on connection c, normally inside the caller's open transaction. */
db_rc queue_enqueue(db_conn *c, const char *kind, json_t *payload);
/* Wakes the workers (call after committing enqueued work). */
void queue_kick(void);
/* Ends a transaction that queued work: commits when rc is DB_OK, releases c (which rolls back
 * an unfinished one), and wakes the workers once the work is committed. Returns the outcome. */
db_rc queue_commit(db_conn *c, db_rc rc);
/* Queues one unit of work in a statement of its own and wakes the workers. */
db_rc queue_now(const char *kind, json_t *payload);
/* Starts n worker threads. */
void queue_start(int n);
/* Stops the workers; a unit of work in progress finishes first. */
void queue_stop(void);

#endif
