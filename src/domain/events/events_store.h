/* SQL of the events domain: the outbox (events, event_recipients), written at the end of the
 * changing transaction and read in position order, and stream tickets (event_tickets). Internal to
 * the domain; other domains write events through events.h. */
#ifndef DOMAIN_EVENTS_STORE_H
#define DOMAIN_EVENTS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "domain/domain.h"
#include "ext/token.h"
#include <stdbool.h>
#include <stdint.h>

/* The PostgreSQL channel every instance listens on: a commit that wrote events notifies it. */
#define EVENTS_CHANNEL "marketplace_events"

/* The kind of an event for nobody that tells the hubs a token ended (events_tokens_ended_in);
 * its data is {"subject": "<the SHA-256 of the id, hex>", "staff": <bool>}. Never written to a
 * stream. */
#define EVENTS_TOKENS_ENDED "tokens.ended"

/* A recipient's key, in the outbox and in the hub: "<role>:<id>" for an account ("user",
 * "provider"), "staff:<role name>" for every stream of a staff role. */
#define EVENTS_KEY_MAX 160
void events_key(char out[EVENTS_KEY_MAX], const char *kind, const char *name);

/* The events domain's part of an erased account (forget_in, domain/domain.h; either mode): in
 * the erasing transaction, every event addressed to it goes, for all its recipients (they are
 * about its jobs, quotes, messages, payments and notifications and carry its data; an open
 * job's feed events name its customer too), what the transaction emits for it is not written
 * (whether emitted before or after this), its unused tickets and its sessions go, and its streams end
 * (events_tokens_ended_in). */
err_t events_forget_account_in(db_conn *c, const account_ref *who, forget_mode mode);

/* PostgreSQL: gives the committed events that have no position yet theirs, each greater than
 * every position given before (events_store.c): at most a batch of them, *more when the batch
 * was full (more may wait). When it gave any, the other instances' listeners are notified at
 * its commit with the payload EVENTS_PLACED (a process without a hub notifies with none, and a
 * hub that hears that positions the rows itself). Nothing to do on SQLite, where the position
 * is the id. */
#define EVENTS_PLACED "placed"
err_t events_store_place(bool *more);
/* PostgreSQL: the smallest id of a committed event without a position, 0 when there is none (or
 * on SQLite, or on a failure, logged). */
void events_store_unplaced(int64_t *oldest);
/* The outbox's position: the highest position given. An empty outbox (a new database, or one
 * idle past the retention) gets an event of kind "origin" for no one first, so a stream can
 * always be given a position that a reconnect finds. */
err_t events_store_position(int64_t *pos);
/* The positioned events after position `after`, in position order, at most limit (pos, kind,
 * data, id). */
err_t events_store_batch(arena *a, int64_t after, int limit, db_res **events);
/* The recipients (pos, recipient) of the events with after < pos <= last, ordered by pos: every
 * named one, and with providers the providers matching an open job's event now (all of them,
 * or with among, a JSON array of provider ids, those of them in it). */
err_t events_store_recipients(arena *a, int64_t after, int64_t last, bool providers, const char *among, db_res **out);
/* The statement events_store_recipients runs (pg: PostgreSQL's; among: with a list of ids), for
 * the unit test of its plan. */
const char *events_store_recipients_sql(bool pg, bool providers, bool among);
/* recipient's events with after < pos <= upto, in position order, at most limit (pos, kind,
 * data, id). */
err_t events_store_replay(arena *a, const char *recipient, int64_t after, int64_t upto, int limit, db_res **out);
/* Whether the event at position pos is in the outbox (*found), and when it was written
 * (*created_at, epoch ms). */
err_t events_store_known(int64_t pos, bool *found, int64_t *created_at);
/* Deletes the (positioned) events written before before_ms, and tickets and sessions expired
 * before now_ms. */
err_t events_store_prune(int64_t before_ms, int64_t now_ms);

/* Keeps a ticket (its SHA-256, hex) for the token claims t until expires_at (epoch ms). */
err_t events_store_ticket_put(const char *hash, const token_claims *t, int64_t expires_at);
/* Takes the ticket of hash (removed whether live or not): *found, with its claims in *t, when
 * it existed and had not expired at now_ms. */
err_t events_store_ticket_take(const char *hash, int64_t now_ms, token_claims *t, bool *found);

/* Keeps a browser session (its cookie's SHA-256, hex) for the token claims t, until the token
 * expires. */
err_t events_store_session_put(const char *hash, const token_claims *t);
/* The claims of the session of hash (*found) when it exists and its token had not expired at
 * now_ms. The session is kept: it opens every stream until then. */
err_t events_store_session_get(const char *hash, int64_t now_ms, token_claims *t, bool *found);

#endif
