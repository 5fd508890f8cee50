/* The hub: this instance's open streams, by the recipient key their events are addressed to,
 * and the pump that writes each committed event to them in order. Internal to the events
 * domain.
 *
 * The pump is one thread: woken by a commit of this process (events_hub_committed), by a
 * NOTIFY of another instance (a listener thread, PostgreSQL only) and once a second in any
 * case, it reads the outbox after its position and writes each event to the streams of its
 * recipients, then moves its position. On PostgreSQL it first positions what was committed
 * (events_store_place), but only when something may be waiting for a position: a commit of
 * this process, a NOTIFY without a payload (a process without a hub), a listener that was
 * reconnected, a full batch, and rows found waiting for a position at two looks a second apart
 * (their writer stopped before its pump gave them). Another instance's NOTIFY says its pump
 * positioned its rows already: positioning again would take the positioners' lock for nothing,
 * and a pump slowed by its instance's load would hold it while the writers' pumps wait
 * (measured: a stream instance under a GET /users/me flood held it up to 0.8 s a second). A
 * stream joins at a position (events_hub_join): what came before it was replayed to it from
 * the outbox, what comes after reaches it from the pump. The same thread
 * writes the comment that keeps an idle stream open (every 25 seconds) and ends a stream whose
 * token expired, both by the service clock. Another thread asks again, once a minute per
 * stream, whether its token would still be accepted (hs_token_recheck: the account still
 * there, its generation unmoved, its impersonation live), and ends it like an expired one when
 * not; it asks at once for the streams a token's end names (events_tokens_ended_in: an event
 * for nobody that the pump reads from the outbox like any other, on every instance), and for a
 * stream that joins within seconds of one. */
#ifndef DOMAIN_EVENTS_HUB_H
#define DOMAIN_EVENTS_HUB_H
#include "core/buf.h"
#include "http/http.h"
#include <stdbool.h>
#include <stdint.h>

/* At most this many streams per account on an instance; a new one replaces the oldest. */
#define EVENTS_STREAMS_PER_ACCOUNT 5
/* A comment line this often on an idle stream (service clock). */
#define EVENTS_HEARTBEAT_MS 25000
/* A stream's token is checked again this often (service clock). */
#define EVENTS_RECHECK_MS 60000

/* One stream as the hub knows it. */
typedef struct ev_stream ev_stream;

/* A new stream for req's caller (req->auth) that receives the events of recipient (its own
 * key, or its staff role's), open until its token expires; the hub owns it from here on and
 * frees it once its connection is gone. */
ev_stream *events_hub_stream(hs_req *req, const char *recipient);
/* The stream's HTTP stream (for writes before it joins). */
hs_stream *events_hub_http(ev_stream *es);
/* The position up to which the pump has written events to the streams. */
int64_t events_hub_position(void);
/* Makes es one of the streams the pump writes to, if the pump is still at position `at` (the
 * stream has everything up to it): then its oldest sibling past the per-account limit is
 * replaced, `first` (when not NULL) is written before any event of the pump, and true is
 * returned. False when the pump moved on: the caller replays up to the new position first.
 * The pump skips events up to `floor` (ids the client already had from another instance whose
 * pump was ahead of this one's). */
bool events_hub_join(ev_stream *es, int64_t at, const char *first, int64_t floor);
/* db_on_commit of a transaction that wrote events: wakes the pump, which positions the events
 * and notifies the other instances (PostgreSQL) once for all the commits it finds. */
void events_hub_committed(void *unused);
/* Whether this process runs the hub (the server does; the CLI's commands do not, so their
 * transactions notify the other instances themselves). */
bool events_hub_running(void);
/* Formats one event of the stream protocol into out (id 0: no id line). */
void events_format(struct buf *out, int64_t id, const char *kind, const char *data);
/* The registered one-shot kind of name kind, or NULL; the i-th registered (from 0), or NULL past
 * the last. */
const struct events_oneshot *events_hub_oneshot(const char *kind);
const struct events_oneshot *events_hub_oneshot_at(int i);

/* Starts the pump at the outbox's position (and, on PostgreSQL, the listener); stops them. */
void events_hub_start(void);
void events_hub_stop(void);

#endif
