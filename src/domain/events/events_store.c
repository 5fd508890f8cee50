/* The outbox. events_emit_in keeps a transaction's events in a batch of the calling thread (a
 * transaction belongs to one thread from db_begin to db_end) and registers its flush with
 * db_before_commit, so the rows are written last, just before the commit, and take no lock.
 *
 * Positions. Streams and replays read events by position (the SSE id, Last-Event-ID), never by
 * id, and positions must grow in the order rows become visible, or a reader that has seen
 * position N could miss a smaller one committed later. On SQLite every write runs on the one
 * writer connection, one transaction after another, so ids grow in commit order and the
 * position is the id (a generated column, migrations/sqlite/0028). On PostgreSQL the ids come
 * from a sequence in whatever order the writers draw them, and a row is written with no
 * position; the pumps give positions afterwards (events_store_place): one transaction that
 * takes the positioners' advisory lock and then, in one statement (whose snapshot is taken
 * once the lock is held), numbers every committed row still without one, in id order, after
 * the last position given (events_pos_seq). The lock makes the positioners run one after
 * another, each seeing everything the previous one committed, so every position given is
 * greater than every position given before, and a rolled-back row, never visible, gets none.
 * The lock is off the write path: only the positioners take it (each for two round trips), and
 * an erasure before it deletes events (so it never waits on rows a positioner holds while the
 * positioner waits on rows it deleted); pruning deletes positioned rows only, which no
 * positioner touches. No pg_snapshot_xmin is needed: a row that becomes visible after a
 * positioner's snapshot is numbered by the next one, after it, so no running transaction on
 * the cluster, however long, holds positioning back. Ids stay the internal key:
 * event_recipients and the banner name an event by id.
 *
 * The flush notifies EVENTS_CHANNEL from a process without a hub (PostgreSQL delivers that at
 * the commit, never on a rollback), with no payload: the hubs that hear it position the rows;
 * otherwise the commit wakes this process's hub (db_on_commit), whose pump positions the rows
 * and, in the same transaction, tells the other instances they are positioned (EVENTS_PLACED).
 * A token's end (events_tokens_ended_in) is an event for nobody, written the same way, that
 * every hub reads to check again at once the streams it names. */
#include "domain/events/events_store.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/events/events.h"
#include "domain/events/events_hub.h"
#include "ext/digest.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pg_advisory_xact_lock's key of the positioners ("events" in ASCII). */
#define OUTBOX_LOCK 0x6576656e7473LL
/* Rows positioned by one statement at most. */
#define PLACE_BATCH 1000

/* An event kept until its transaction commits: ev's strings point into text. */
typedef struct pending {
  event_new ev;
  char *text;
} pending;

typedef struct batch {
  db_conn *c;
  pending *items;
  int n, cap;
  char *erased_user, *erased_provider; /* the accounts erased in the transaction, or NULL */
} batch;

static _Thread_local batch *open_batch; /* the calling thread's transaction's, if it emitted */

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

static void batch_free(void *arg) {
  batch *b = arg;
  for (int i = 0; i < b->n; i++) {
    pending *p = &b->items[i];
    free((char *)p->ev.kind), free((char *)p->ev.data), free((char *)p->ev.user_id);
    free((char *)p->ev.provider_id), free((char *)p->ev.match_service), free((char *)p->ev.match_zip);
    free((char *)p->ev.match_job);
  }
  free(b->items);
  free(b->erased_user), free(b->erased_provider);
  if (open_batch == b) open_batch = NULL;
  free(b);
}

/* The event's id in the statements after its INSERT, on PostgreSQL (the sequence's value this
 * session drew last: the column's default). */
#define PG_EVENT_ID "currval('events_id_seq')"
/* The same on SQLite: AUTOINCREMENT keeps the largest id it gave in sqlite_sequence, updated by
 * the INSERT, and the one writer inserts events one after another, so it is the transaction's
 * last event (a row of a table of a few rows). Not MAX(id): with the statistics SQLite answers
 * that from the events_pos index, which it does not know is in id order, by reading all of it.
 * The SQL stays the same from event to event: with the id written into it as a number, every
 * event prepared three new statements and kept them in the writer's cache for good (300,000
 * after 100,000 quotes; its lookups walked them with strcmp), issue 37. */
#define SQLITE_EVENT_ID "(SELECT seq FROM sqlite_sequence WHERE name = 'events')"

/* The writes below need no answer: on PostgreSQL they go with the COMMIT, in its round trip
 * (db_exec_later, the parameters copied), the event's id drawn there too; on SQLite they run at
 * once. id_sql: the event's id as SQL (PG_EVENT_ID, SQLITE_EVENT_ID). */
void events_key(char out[EVENTS_KEY_MAX], const char *kind, const char *name) {
  snprintf(out, EVENTS_KEY_MAX, "%s:%s", kind, name);
}

static db_rc add_recipient(db_conn *c, const char *id_sql, const char *prefix, const char *name) {
  char key[EVENTS_KEY_MAX], sql[192];
  events_key(key, prefix, name);
  snprintf(sql, sizeof sql, "INSERT INTO event_recipients (recipient, event_id) VALUES ($1, %s) ON CONFLICT DO NOTHING",
           id_sql);
  return db_exec_later(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(key)));
}

/* One event's rows; none when it names an account erased in the transaction (it carries that
 * account's data). (An event for nobody, the outbox's origin or a token's end, is written.) */
static db_rc write_one(db_conn *c, arena *a, const batch *b, const event_new *ev, int64_t now, bool pg) {
  const char *user = ev->user_id, *provider = ev->provider_id;
  if ((user && b->erased_user && !strcmp(user, b->erased_user)) ||
      (provider && b->erased_provider && !strcmp(provider, b->erased_provider)))
    return DB_OK;
  const char *data = ev->data_of ? ev->data_of(a, ev->data_arg) : ev->data;
  if (!data) {
    log_msg(LOG_ERROR, "events: %s has no data", ev->kind);
    return DB_ERROR;
  }
  db_rc rc;
  char id_sql[64];
  /* the matching providers are not written: the pair is matched when the outbox is read */
  bool match = ev->match_service && ev->match_zip;
  static const char insert[] = "INSERT INTO events (kind, data, created_at, match_service, match_zip, match_job) "
                               "VALUES ($1, $2, $3, $4, $5, $6)";
  const db_val args[] = {DB_TEXT(ev->kind),
                         DB_TEXT(data),
                         DB_INT(now),
                         DB_TEXT(match ? ev->match_service : NULL),
                         DB_TEXT(match ? ev->match_zip : NULL),
                         DB_TEXT(match ? ev->match_job : NULL)};
  rc = db_exec_later(c, NULL, NULL, insert, args, 6);
  snprintf(id_sql, sizeof id_sql, "%s", pg ? PG_EVENT_ID : SQLITE_EVENT_ID);
  if (rc != DB_OK) return rc;
  if (user) rc = add_recipient(c, id_sql, "user", user);
  if (rc == DB_OK && provider) rc = add_recipient(c, id_sql, "provider", provider);
  for (unsigned bit = 1; rc == DB_OK && bit && bit <= ROLE_STAFF; bit <<= 1)
    if ((ev->staff & ROLE_STAFF & bit) && hs_role_name(bit)) rc = add_recipient(c, id_sql, "staff", hs_role_name(bit));
  if (rc == DB_OK && ev->written) rc = ev->written(c, id_sql, ev->user_id, ev->provider_id);
  return rc;
}

/* db_before_commit: the batch's rows, last in the transaction. On PostgreSQL all of it goes
 * with the COMMIT, in one round trip. The other instances are notified after the commit by this
 * process's pump (events_hub_committed), or, in a process without one (a CLI command), by a
 * NOTIFY here. */
static db_rc flush(db_conn *c, void *arg) {
  batch *b = arg;
  bool pg = db_engine_get() == DB_POSTGRES;
  db_rc rc = DB_OK; /* no lock: the rows get their positions after the commit */
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  for (int i = 0; rc == DB_OK && i < b->n; i++) rc = write_one(c, &a, b, &b->items[i].ev, now, pg);
  arena_fini(&a);
  if (rc == DB_OK && !events_hub_running()) rc = db_notify_in(c, EVENTS_CHANNEL); /* else the pump does */
  return rc;
}

/* The batch of the transaction open on c, made on its first use. */
static batch *batch_of(db_conn *c) {
  batch *b = open_batch;
  if (!b || b->c != c) {
    b = xcalloc(1, sizeof *b);
    b->c = c;
    open_batch = b;
    db_before_commit(c, flush, batch_free, b);
    db_on_commit(c, events_hub_committed, NULL);
  }
  return b;
}

db_rc events_emit_in(db_conn *c, const event_new *ev) {
  if (!db_in_tx(c)) {
    log_msg(LOG_ERROR, "events_emit_in outside a transaction: %s dropped", ev->kind);
    return DB_ERROR;
  }
  batch *b = batch_of(c);
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 4;
    b->items = xrealloc(b->items, (size_t)b->cap * sizeof *b->items);
  }
  pending *p = &b->items[b->n++];
  p->ev = *ev;
  p->ev.kind = xstrdup(ev->kind), p->ev.data = dup_or_null(ev->data);
  p->ev.user_id = dup_or_null(ev->user_id), p->ev.provider_id = dup_or_null(ev->provider_id);
  p->ev.match_service = dup_or_null(ev->match_service), p->ev.match_zip = dup_or_null(ev->match_zip);
  p->ev.match_job = dup_or_null(ev->match_job);
  return DB_OK;
}

db_rc events_tokens_ended_in(db_conn *c, const char *subject, bool staff) {
  if (!subject || !*subject) return DB_OK;
  char hash[65]; /* the outbox keeps no id of an erased account */
  sha256_hex(subject, strlen(subject), hash);
  json_t *d = json_pack("{s:s,s:b}", "subject", hash, "staff", staff);
  char *data = json_dumps(d, JSON_COMPACT);
  json_decref(d);
  if (!data) oom();
  event_new ev = {.kind = EVENTS_TOKENS_ENDED, .data = data}; /* for nobody: the hubs read it */
  db_rc rc = events_emit_in(c, &ev);
  free(data);
  return rc;
}

/* ---- positions ---- */

/* PostgreSQL: the committed rows without a position get theirs, in id order, after the last
 * given; events_pos_seq moves to the last one (a sequence, not MAX(pos): that goes back when the
 * newest event is pruned or erased). The statement's snapshot is taken once the lock is held, so
 * it sees every position the previous positioner committed. setval and the notice (delivered at
 * the commit) only when rows were placed. The UPDATE finds its rows by id alone: nobody else
 * changes a row without a position (the lock), and with `AND e.pos IS NULL` beside it the
 * planner, its statistics behind a burst of writes, drove the UPDATE from every waiting row and
 * looked each up in todo: 3.7 s a batch at 51,000 waiting, and positioning fell minutes behind
 * POST /quotes on PostgreSQL (docs/performance-history.md, section 16). */
static const char PLACE[] =
    "WITH todo AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM events WHERE pos IS NULL "
    "ORDER BY id LIMIT $1), "
    "placed AS (UPDATE events e SET pos = (SELECT last_value FROM events_pos_seq) + todo.n FROM todo "
    "WHERE e.id = todo.id RETURNING e.pos) "
    "SELECT count(*), CASE WHEN count(*) > 0 THEN setval('events_pos_seq', MAX(pos)) END, "
    "CASE WHEN count(*) > 0 THEN pg_notify($2, $3) END FROM placed";

err_t events_store_place(bool *more) {
  *more = false;
  if (db_engine_get() != DB_POSTGRES) return ERR_OK; /* on SQLite the position is the id */
  db_tx t;
  db_res *r;
  err_t e = db_tx_begin(&t);
  if (!e)
    e = db_to_err(db_exec_later(t.c, NULL, NULL, "SELECT pg_advisory_xact_lock($1)", DB_ARGS(DB_INT(OUTBOX_LOCK))));
  if (!e)
    e = db_to_err(
        db_exec(t.c, &t.a, &r, PLACE, DB_ARGS(DB_INT(PLACE_BATCH), DB_TEXT(EVENTS_CHANNEL), DB_TEXT(EVENTS_PLACED))));
  int64_t placed = e ? 0 : db_int(r, 0, 0);
  e = db_tx_end(&t, e);
  *more = !e && placed == PLACE_BATCH;
  return e;
}

void events_store_unplaced(int64_t *oldest) {
  *oldest = 0;
  if (db_engine_get() != DB_POSTGRES) return;
  arena a;
  arena_init(&a);
  db_res *r;
  if (db_query(&a, &r, "SELECT COALESCE(MIN(id), 0) FROM events WHERE pos IS NULL", DB_NOARGS) == DB_OK)
    *oldest = db_int(r, 0, 0);
  arena_fini(&a);
}

/* ---- reading ---- */

static db_rc last_position(int64_t *pos) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, "SELECT COALESCE(MAX(pos), 0) FROM events", DB_NOARGS);
  *pos = rc == DB_OK ? db_int(r, 0, 0) : 0;
  arena_fini(&a);
  return rc;
}

err_t events_store_position(int64_t *pos) {
  bool more;
  err_t e = events_store_place(&more);
  db_rc rc = e ? DB_ERROR : last_position(pos);
  if (rc != DB_OK || *pos > 0) return e ? e : db_to_err(rc);
  event_new origin = {.kind = "origin", .data = "{}"};
  db_conn *c;
  e = db_begin(&c);
  if (!e) e = db_to_err(events_emit_in(c, &origin));
  e = db_end(c, e);
  if (!e) e = events_store_place(&more);
  return e ? e : db_to_err(last_position(pos)); /* the origin, or later */
}

err_t events_store_batch(arena *a, int64_t after, int limit, db_res **events) {
  return db_to_err(db_query(a, events, "SELECT pos, kind, data, id FROM events WHERE pos > $1 ORDER BY pos LIMIT $2",
                            DB_ARGS(DB_INT(after), DB_INT(limit))));
}

/* The pump's read of a batch's recipients. On PostgreSQL the named ones are looked up per event
 * (a LATERAL subquery that OFFSET 0 keeps from being flattened): the planner otherwise turned
 * the join around once its generic plan (a prepared statement, after five runs) or stale
 * statistics misjudged the range, hashing every row of event_recipients at every round,
 * 13 ms at 100,000 rows and growing with the outbox. SQLite looks them up by event either way. */
#define NAMED_PG                                                                                                       \
  "SELECT e.pos, r.recipient FROM events e, LATERAL (SELECT recipient FROM event_recipients "                          \
  "WHERE event_id = e.id OFFSET 0) r WHERE e.pos > $1 AND e.pos <= $2 "
#define NAMED_SQLITE                                                                                                   \
  "SELECT e.pos, r.recipient FROM event_recipients r JOIN events e "                                                   \
  "ON e.id = r.event_id WHERE e.pos > $1 AND e.pos <= $2 "
/* The providers who match an open job's event now. */
#define MATCHING_PROVIDERS                                                                                             \
  "UNION SELECT e.pos, 'provider:' || s.provider_id FROM events e "                                                    \
  "JOIN provider_zips z ON z.zip = e.match_zip "                                                                       \
  "JOIN provider_services s ON s.provider_id = z.provider_id AND s.service = e.match_service "                         \
  "WHERE e.pos > $1 AND e.pos <= $2 AND e.match_service IS NOT NULL "
/* Those of them in $3 (a JSON array of ids), read from the round's events: each event's ZIP
 * looked up for each listed provider. Left to itself, SQLite without statistics (the service
 * runs no ANALYZE) started from the list and read every event of the listed providers'
 * services in the outbox (events_match), a cost that grows with the outbox; PostgreSQL could
 * do the same. A CROSS JOIN keeps SQLite's order; OFFSET 0 keeps PostgreSQL from flattening
 * the round's events into the join. */
#define AMONG_SQLITE                                                                                                   \
  "UNION SELECT e.pos, 'provider:' || s.provider_id FROM events e "                                                    \
  "CROSS JOIN provider_zips z ON z.zip = e.match_zip "                                                                 \
  "CROSS JOIN provider_services s ON s.provider_id = z.provider_id AND s.service = e.match_service "                   \
  "WHERE e.pos > $1 AND e.pos <= $2 AND e.match_service IS NOT NULL "                                                  \
  "AND z.provider_id IN (SELECT value FROM json_each($3)) "
#define AMONG_PG                                                                                                       \
  "UNION SELECT e.pos, 'provider:' || s.provider_id FROM (SELECT pos, match_zip, match_service FROM events "           \
  "WHERE pos > $1 AND pos <= $2 AND match_service IS NOT NULL OFFSET 0) e "                                            \
  "JOIN provider_zips z ON z.zip = e.match_zip "                                                                       \
  "JOIN provider_services s ON s.provider_id = z.provider_id AND s.service = e.match_service "                         \
  "WHERE z.provider_id IN (SELECT json_array_elements_text($3::json)) "

const char *events_store_recipients_sql(bool pg, bool providers, bool among) {
  if (providers && among) return pg ? NAMED_PG AMONG_PG "ORDER BY 1" : NAMED_SQLITE AMONG_SQLITE "ORDER BY 1";
  if (providers) return pg ? NAMED_PG MATCHING_PROVIDERS "ORDER BY 1" : NAMED_SQLITE MATCHING_PROVIDERS "ORDER BY 1";
  return pg ? NAMED_PG "ORDER BY 1" : NAMED_SQLITE "ORDER BY 1";
}

err_t events_store_recipients(arena *a, int64_t after, int64_t last, bool providers, const char *among, db_res **out) {
  const char *sql = events_store_recipients_sql(db_engine_get() == DB_POSTGRES, providers, among != NULL);
  const db_val args[] = {DB_INT(after), DB_INT(last), DB_TEXT(among)};
  return db_to_err(db_query(a, out, sql, args, providers && among ? 3 : 2));
}

err_t events_store_replay(arena *a, const char *recipient, int64_t after, int64_t upto, int limit, db_res **out) {
  /* Each part takes its first `limit` by position, and the union its first `limit` of those.
   * The named part joins the recipient's rows to their events: PostgreSQL drives it from
   * whichever side its statistics find narrower (an account's few events; a staff role's many,
   * in position order until the limit); SQLite from the recipient's rows, bounded by id there
   * since its positions are its ids (id_floor; none on PostgreSQL, where they are not).
   * A provider's also include the open jobs' events of its pairs, through events_match: of the
   * pairs it held since before the event was written (strictly: a pair added in the event's
   * millisecond was not held before it), of the jobs it can still read (open, or
   * assigned to it). Its joins go from the pairs to each pair's events (CROSS JOIN: SQLite's
   * order): left to plan without statistics, SQLite searched events_match by service alone,
   * every event of the provider's services in every ZIP. */
  const char *provider = !strncmp(recipient, "provider:", 9) ? recipient + 9 : NULL;
  int64_t id_floor = db_engine_get() == DB_POSTGRES ? 0 : after;
  return db_to_err(db_query(
      a, out,
      "SELECT pos, kind, data, id FROM (SELECT e.pos, e.kind, e.data, e.id FROM event_recipients r "
      "JOIN events e ON e.id = r.event_id WHERE r.recipient = $1 AND r.event_id > $6 AND e.pos > $2 AND e.pos <= $3 "
      "ORDER BY e.pos LIMIT $4) named "
      "UNION SELECT pos, kind, data, id FROM (SELECT m.pos, m.kind, m.data, m.id FROM provider_services s "
      "CROSS JOIN provider_zips z CROSS JOIN events m JOIN jobs j ON j.id = m.match_job "
      "WHERE s.provider_id = $5 AND z.provider_id = s.provider_id AND m.match_service = s.service "
      "AND m.match_zip = z.zip AND m.id > $6 AND m.pos > $2 AND m.pos <= $3 "
      "AND s.created_at < m.created_at AND z.created_at < m.created_at "
      "AND (j.status IN ('PENDING', 'QUOTED') OR j.provider_id = $5) ORDER BY m.pos LIMIT $4) matched "
      "ORDER BY 1 LIMIT $4",
      DB_ARGS(DB_TEXT(recipient), DB_INT(after), DB_INT(upto), DB_INT(limit), DB_TEXT(provider), DB_INT(id_floor))));
}

err_t events_store_known(int64_t pos, bool *found, int64_t *created_at) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, "SELECT created_at FROM events WHERE pos = $1", DB_ARGS(DB_INT(pos)));
  *found = rc == DB_OK && r->rows == 1;
  *created_at = *found ? db_int(r, 0, 0) : 0;
  arena_fini(&a);
  return db_to_err(rc);
}

/* One batch (db_prune_batch): the oldest `size` positioned events before before_ms (by
 * events_created), their recipients and them; *full when there may be more. */
static err_t prune_batch(int64_t before_ms, int size, bool *full) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c;
  *full = false;
  err_t e = db_begin_exec(&c, &a, &r,
                          "SELECT COUNT(*), MAX(id) FROM (SELECT id FROM events WHERE created_at < $1 "
                          "AND pos IS NOT NULL ORDER BY created_at LIMIT $2) b",
                          DB_ARGS(DB_INT(before_ms), DB_INT(size)));
  int64_t upto = !e && r->rows == 1 ? db_int(r, 0, 1) : 0;
  if (!e && upto > 0) {
    *full = db_int(r, 0, 0) >= size;
    e = db_to_err(db_exec(c, NULL, NULL, "DELETE FROM event_recipients WHERE event_id <= $1", DB_ARGS(DB_INT(upto))));
    /* positioned rows only: a row the positioner is numbering is never waited on here (nor this
     * on it) */
    if (!e)
      e = db_to_err(db_exec(c, NULL, NULL, "DELETE FROM events WHERE id <= $1 AND created_at < $2 AND pos IS NOT NULL",
                            DB_ARGS(DB_INT(upto), DB_INT(before_ms))));
  }
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

err_t events_store_prune(int64_t before_ms, int64_t now_ms) {
  int size = db_prune_batch();
  bool full = true;
  err_t e = ERR_OK;
  while (!e && full) e = prune_batch(before_ms, size, &full);
  if (e) return e;
  db_conn *c;
  e = db_begin_exec(&c, NULL, NULL, "DELETE FROM event_tickets WHERE expires_at < $1", DB_ARGS(DB_INT(now_ms)));
  if (!e)
    e = db_to_err(
        db_exec(c, NULL, NULL, "DELETE FROM event_sessions WHERE token_exp < $1", DB_ARGS(DB_INT(now_ms / 1000))));
  return db_end(c, e);
}

/* ---- tickets ---- */

err_t events_forget_account_in(db_conn *c, const account_ref *who, forget_mode mode) {
  (void)mode;
  const char *role = who->role, *account_id = who->id;
  if (!db_in_tx(c)) return ERR_INTERNAL;
  char key[EVENTS_KEY_MAX];
  events_key(key, role, account_id);
  batch *b = batch_of(c); /* what the transaction emits for it after this is not written either */
  char **erased = strcmp(role, "user") ? &b->erased_provider : &b->erased_user;
  free(*erased);
  *erased = xstrdup(account_id);
  /* the positioners' lock first (sent with the DELETE): a positioner then never waits on a
   * row deleted here while holding one this waits on; the erasure is the transaction's last
   * work, so the positioners wait for it briefly */
  db_rc rc = db_engine_get() == DB_POSTGRES
                 ? db_exec_later(c, NULL, NULL, "SELECT pg_advisory_xact_lock($1)", DB_ARGS(DB_INT(OUTBOX_LOCK)))
                 : DB_OK;
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL,
                 "DELETE FROM events WHERE id IN (SELECT event_id FROM event_recipients WHERE recipient = $1)",
                 DB_ARGS(DB_TEXT(key)));
  if (rc == DB_OK) /* the other recipients of those events too */
    rc = db_exec(c, NULL, NULL,
                 "DELETE FROM event_recipients WHERE event_id IN "
                 "(SELECT event_id FROM event_recipients WHERE recipient = $1)",
                 DB_ARGS(DB_TEXT(key)));
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL, "DELETE FROM event_tickets WHERE account_id = $1 AND role = $2 AND is_staff = 0",
                 DB_ARGS(DB_TEXT(account_id), DB_TEXT(role)));
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL, "DELETE FROM event_sessions WHERE account_id = $1 AND role = $2 AND is_staff = 0",
                 DB_ARGS(DB_TEXT(account_id), DB_TEXT(role)));
  if (rc == DB_OK) rc = events_tokens_ended_in(c, account_id, false);
  return db_to_err(rc);
}

err_t events_store_ticket_put(const char *hash, const token_claims *t, int64_t expires_at) {
  return db_to_err(db_query(NULL, NULL,
                            "INSERT INTO event_tickets (ticket_hash, account_id, role, is_staff, elevation_id, gen, "
                            "token_exp, expires_at, token_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                            DB_ARGS(DB_TEXT(hash), DB_TEXT(t->id), DB_TEXT(t->role), DB_BOOL(t->is_staff),
                                    DB_TEXT(t->elevation_id[0] ? t->elevation_id : NULL), DB_INT(t->gen),
                                    DB_INT(t->exp), DB_INT(expires_at), DB_TEXT(t->token_id))));
}

/* The claims of row i of r: account_id, role, is_staff, elevation_id, gen, token_exp, token_id. */
static void claims_of_row(const db_res *r, int i, token_claims *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->id, sizeof t->id, "%s", db_text(r, i, 0));
  snprintf(t->role, sizeof t->role, "%s", db_text(r, i, 1));
  t->is_staff = db_int(r, i, 2) != 0;
  snprintf(t->elevation_id, sizeof t->elevation_id, "%s", db_text(r, i, 3) ? db_text(r, i, 3) : "");
  t->gen = db_int(r, i, 4);
  t->exp = db_int(r, i, 5);
  snprintf(t->token_id, sizeof t->token_id, "%s", db_text(r, i, 6) ? db_text(r, i, 6) : "");
}

err_t events_store_session_put(const char *hash, const token_claims *t) {
  return db_to_err(db_query(NULL, NULL,
                            "INSERT INTO event_sessions (session_hash, account_id, role, is_staff, elevation_id, gen, "
                            "token_exp, token_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                            DB_ARGS(DB_TEXT(hash), DB_TEXT(t->id), DB_TEXT(t->role), DB_BOOL(t->is_staff),
                                    DB_TEXT(t->elevation_id[0] ? t->elevation_id : NULL), DB_INT(t->gen),
                                    DB_INT(t->exp), DB_TEXT(t->token_id))));
}

/* The claims of the one row sql reads or takes by hash (columns as claims_of_row reads them,
 * then the row's expiry in ms as column 7), when it has not expired by now_ms. */
static err_t claims_by_hash(const char *sql, const char *hash, int64_t now_ms, token_claims *t, bool *found) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, sql, DB_ARGS(DB_TEXT(hash)));
  *found = rc == DB_OK && r->rows == 1 && db_int(r, 0, 7) > now_ms;
  if (*found) claims_of_row(r, 0, t);
  arena_fini(&a);
  return db_to_err(rc);
}

err_t events_store_session_get(const char *hash, int64_t now_ms, token_claims *t, bool *found) {
  return claims_by_hash("SELECT account_id, role, is_staff, elevation_id, gen, token_exp, token_id, token_exp * 1000 "
                        "FROM event_sessions WHERE session_hash = $1",
                        hash, now_ms, t, found);
}

err_t events_store_ticket_take(const char *hash, int64_t now_ms, token_claims *t, bool *found) {
  return claims_by_hash("DELETE FROM event_tickets WHERE ticket_hash = $1 "
                        "RETURNING account_id, role, is_staff, elevation_id, gen, token_exp, token_id, expires_at",
                        hash, now_ms, t, found);
}
