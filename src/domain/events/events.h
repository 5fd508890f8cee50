/* Live updates: GET /events, one Server-Sent Events stream per signed-in app, and the outbox
 * every other domain writes its events to.
 *
 * An event is written on the changing transaction's connection (events_emit_in) and becomes a
 * row of the outbox just before that transaction commits, so it exists exactly when the change
 * does: a rolled-back change sends nothing. Each event names who may read it (the accounts
 * the REST routes would show the resource to); the committed rows get positions, growing in
 * the order they became visible, and every instance reads them in that order and writes each
 * to its own streams of those accounts, woken by the commit in-process and by PostgreSQL's
 * NOTIFY from other instances. A reconnecting stream replays what it missed from the outbox
 * (Last-Event-ID, the last 24 hours). docs/decisions.md, "Live updates". */
#ifndef DOMAIN_EVENTS_H
#define DOMAIN_EVENTS_H
#include "db/db.h"
#include "domain/domain.h"
#include <stdbool.h>
#include <stdint.h>

extern const domain_def events_domain;

/* One event, as a caller describes it. The strings are copied. */
typedef struct event_new {
  const char *kind; /* "message.created", "job.updated", ... */
  const char *data; /* its JSON: what the REST route of the resource answers */
  /* Instead of data, for a change whose row comes back only with a later round trip
   * (db_exec_later): data_of(a, data_arg) makes the JSON when the rows are written, just
   * before the commit (NULL there fails the transaction); data_arg must live until then. */
  const char *(*data_of)(arena *a, const void *data_arg);
  const void *data_arg;
  /* Who may read it: a customer and a provider (NULL: none), every staff member of the staff
   * roles in `staff` (ROLE_* bits), and with match_service and match_zip (an open job's event;
   * match_job its id) every provider whose services and ZIPs match (the provider feed): live,
   * those matching when the outbox is read; in a replay, those that held the pair since before
   * the event was written and can still read the job (open, or assigned to them). */
  const char *user_id, *provider_id;
  unsigned staff;
  const char *match_service, *match_zip, *match_job;
  /* Optional: called on the transaction's connection once the event's row is written (just
   * before the commit), to keep its id with the change (a banner does): id_sql is an SQL
   * expression of that id for the next statement on c (the id is drawn in the COMMIT's round
   * trip on PostgreSQL, so it is not known here). The id is the outbox's key, not the position
   * streams show (given after the commit on PostgreSQL). */
  db_rc (*written)(db_conn *c, const char *id_sql, const char *user_id, const char *provider_id);
} event_new;

/* Adds ev to the transaction open on c: its row is written when the transaction commits (and
 * then streams are woken), and never when it rolls back. Events keep the order of their calls.
 * DB_OK, or DB_ERROR outside a transaction. */
db_rc events_emit_in(db_conn *c, const event_new *ev);

/* Tokens ended in the transaction open on c (a logout, logout-all, a password change or reset,
 * an erasure, a staff member changed or disabled, an impersonation ended): once it commits,
 * every instance checks again at once the token of each of its streams that names subject (as
 * its account's or staff member's id, its own token id, or its elevation's id) and ends those
 * now refused with `token.expired`, within a second instead of at their minute's check. staff:
 * subject is a staff member whose elevations ended with its tokens, so every impersonation
 * stream is checked too. DB_OK, or DB_ERROR outside a transaction. */
db_rc events_tokens_ended_in(db_conn *c, const char *subject, bool staff);

/* A kind of event that stands for a record waiting to be read once (the banner, which the
 * account's next poll returns and removes): its owner says how a stream takes the pending
 * record when it opens, and how to clear it once a stream delivered its event. A row of its
 * owner's descriptor (domain_def's oneshots: the notifications domain's banner), registered at
 * start-up by src/domains.c. */
typedef struct events_oneshot {
  const char *kind;
  /* Takes (removes) the account's pending record when its event's position is at most upto
   * (or its event is unknown): its JSON in *data (arena a) and that position in *event_pos (0:
   * unknown); *data NULL when none is pending. A record whose event has no position yet, or a
   * later one, stays: the stream gets that event. */
  err_t (*take)(arena *a, const char *role, const char *account_id, int64_t upto, const char **data,
                int64_t *event_pos);
  /* Clears the account's pending record if it is still the one of event event_id (the id the
   * event's `written` was given, not its position). Failures logged. */
  void (*delivered)(const char *role, const char *account_id, int64_t event_id);
} events_oneshot;
void events_register_oneshot(const events_oneshot *o);

#endif
