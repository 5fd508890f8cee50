/* Handlers of /events. GET /events opens the caller's stream: a Last-Event-ID (header, or the
 * lastEventId parameter for a first connection that cannot send one) from the last 24 hours
 * has the caller's missed events replayed from the outbox, in order, before the stream joins
 * the hub at the position the replay reached (events_hub_join fails, and the replay goes on,
 * while the pump moves); an older or unknown one gets a `reset` event first. The stream then
 * gets the position as its id (so the app holds a Last-Event-ID even before its first event)
 * and, for a customer or a provider, the pending banner at once. A backlog too large to send
 * in one go (REPLAY_MAX) is sent in part and the stream ends: the app reconnects from the last
 * id it got. POST /events/ticket issues a single-use ticket for clients that cannot send a
 * header; POST /events/session a cookie that a browser's EventSource sends on every reconnect,
 * for as long as the token that asked for it is valid. */
#include "domain/events/events_api.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/events/events.h"
#include "domain/events/events_hub.h"
#include "domain/events/events_store.h"
#include "ext/digest.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICKET_TTL_MS 60000
#define REPLAY_PAGE 200
/* A replay stops past this many bytes (the stream's backlog cap is twice as much). */
#define REPLAY_MAX (512 * 1024)
/* How long an app waits before reconnecting (the stream's `retry`, ms). */
#define RETRY_MS 2000

static token_claims claims_of(const hs_req *req);

/* ---- tickets ---- */

static bool ticket_shape(const char *t) {
  size_t n = 0;
  for (; t[n]; n++)
    if (!isxdigit((unsigned char)t[n]) || isupper((unsigned char)t[n])) return false;
  return n == 64;
}

/* The claims a secret handed out stands for, read by its hash with read (false: none). */
static bool redeem(const char *secret, err_t (*read)(const char *, int64_t, token_claims *, bool *),
                   token_claims *out) {
  if (!ticket_shape(secret)) return false;
  char hash[65];
  sha256_hex(secret, strlen(secret), hash);
  bool found = false;
  return read(hash, clock_now_ms(), out, &found) == ERR_OK && found;
}

bool events_redeem_ticket(const char *ticket, token_claims *out) {
  return redeem(ticket, events_store_ticket_take, out);
}

err_t api_events_ticket(hs_req *req) {
  char ticket[65], hash[65], at[25];
  secret_new_hex(ticket, hash);
  token_claims t = claims_of(req);
  int64_t expires = clock_now_ms() + TICKET_TTL_MS;
  if (expires > req->auth.token_exp * 1000) expires = req->auth.token_exp * 1000; /* never beyond the token */
  err_t e = events_store_ticket_put(hash, &t, expires);
  if (e != ERR_OK) return e;
  clock_format_iso(expires, at);
  return hs_ok_pack(req, "{s:s,s:s}", "ticket", ticket, "expiresAt", at);
}

/* ---- the browser session ---- */

/* 64 lowercase hex digits: what POST /events/session and /events/ticket hand out. */
bool events_redeem_session(const char *value, token_claims *out) {
  return redeem(value, events_store_session_get, out);
}

/* The token's claims, for a ticket or a session that stands for it. */
static token_claims claims_of(const hs_req *req) {
  token_claims t = {
      .is_staff = (req->auth.role_bit & ROLE_STAFF) != 0, .gen = req->auth.gen, .exp = req->auth.token_exp};
  snprintf(t.id, sizeof t.id, "%s", req->auth.id);
  snprintf(t.role, sizeof t.role, "%s", req->auth.role);
  snprintf(t.elevation_id, sizeof t.elevation_id, "%s", req->auth.elevation_id ? req->auth.elevation_id : "");
  snprintf(t.token_id, sizeof t.token_id, "%s", req->auth.token_id ? req->auth.token_id : ""); /* logout ends it */
  return t;
}

/* POST /events/session: a cookie for GET /events that stands for the caller's token until it
 * expires (and is refused once the token is: logout, a password change, an erasure). HttpOnly,
 * so no script reads it; Path=/events, so no other route gets it; SameSite as configured
 * (EVENTS_COOKIE_SAMESITE), with Secure outside development and always with None (browsers
 * refuse None without it), and Partitioned with None: the page that asked for it (its top-level
 * site) is the only one whose EventSource sends it. docs/decisions.md, "Live updates". */
err_t api_events_session(hs_req *req) {
  char value[65], hash[65], at[25];
  secret_new_hex(value, hash);
  token_claims t = claims_of(req);
  err_t e = events_store_session_put(hash, &t);
  if (e != ERR_OK) return e;
  int64_t now = clock_now_ms(), expires = req->auth.token_exp * 1000;
  long long max_age = expires > now ? (long long)((expires - now) / 1000) : 0;
  const char *same_site = CFG.events_cookie_samesite;
  bool none = !strcmp(same_site, "None"), secure = none || CFG.env != ENV_DEVELOPMENT;
  req->res_set_cookie =
      arena_printf(&req->arena, "%s=%s; Path=/events; Max-Age=%lld; HttpOnly; SameSite=%s%s%s", EVENTS_SESSION_COOKIE,
                   value, max_age, same_site, secure ? "; Secure" : "", none ? "; Partitioned" : "");
  clock_format_iso(expires, at);
  return hs_ok_pack(req, "{s:s}", "expiresAt", at);
}

/* ---- the stream ---- */

/* The Last-Event-ID the app sent: *given when it sent one, *id when it is a number. */
static void last_event_id(hs_req *req, bool *given, int64_t *id) {
  const char *v = hs_header(req, "Last-Event-ID");
  if (!v) v = json_string_value(json_object_get(req->query, "lastEventId"));
  *given = v && *v, *id = -1;
  if (!*given) return;
  char *end;
  long long n = strtoll(v, &end, 10);
  if (isdigit((unsigned char)*v) && !*end && n > 0) *id = n;
}

static void write_event(hs_stream *s, int64_t id, const char *kind, const char *data) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  events_format(&b, id, kind, data);
  hs_stream_write(s, buf_ptr(&b), buf_len(&b));
  buf_free(&b);
}

/* Whether the app's Last-Event-ID can be replayed from; otherwise the reason of its reset. */
static err_t check_cursor(bool given, int64_t id, bool *replay, const char **reason) {
  *replay = false, *reason = NULL;
  if (!given) return ERR_OK;
  bool found = false;
  int64_t written = 0;
  err_t e = id > 0 ? events_store_known(id, &found, &written) : ERR_OK;
  if (e != ERR_OK) return e;
  *replay = found && written >= clock_now_ms() - DAY_MS;
  if (!*replay) *reason = found ? "expired" : "unknown";
  return ERR_OK;
}

/* The replay of recipient's events after position *from up to upto into s; *from moves to the
 * last event written, *bytes counts them. One-shot events replayed are cleared for the account
 * (by the event's id). */
static err_t replay(hs_req *req, arena *a, hs_stream *s, const char *recipient, int64_t *from, int64_t upto,
                    size_t *bytes) {
  int64_t after = *from;
  for (;;) {
    db_res *r;
    err_t e = events_store_replay(a, recipient, after, upto, REPLAY_PAGE, &r);
    if (e != ERR_OK) return e;
    for (int i = 0; i < r->rows; i++) {
      int64_t pos = db_int(r, i, 0);
      const char *kind = db_text(r, i, 1), *data = db_text(r, i, 2);
      write_event(s, pos, kind, data);
      *from = pos, *bytes += db_len(r, i, 2) + strlen(kind) + 32;
      const events_oneshot *once = events_hub_oneshot(kind);
      if (once) once->delivered(hs_role_name(req->auth.role_bit), req->auth.id, db_int(r, i, 3));
      if (*bytes >= REPLAY_MAX) return ERR_OK;
    }
    if (r->rows < REPLAY_PAGE) return ERR_OK;
    after = *from;
  }
}

/* The account's pending one-shot records (the banner), at once, unless the replay sent them. */
static void take_pending(hs_req *req, arena *a, hs_stream *s, int64_t replayed_after, int64_t upto) {
  unsigned bit = req->auth.role_bit;
  if (!(bit & (ROLE_USER | ROLE_PROVIDER))) return;
  const events_oneshot *once;
  for (int i = 0; (once = events_hub_oneshot_at(i)); i++) {
    const char *data = NULL;
    int64_t pos = 0;
    if (once->take(a, hs_role_name(bit), req->auth.id, upto, &data, &pos) != ERR_OK || !data) continue;
    if (replayed_after >= 0 && pos > replayed_after && pos <= upto) continue; /* replayed already */
    write_event(s, 0, once->kind, data);
  }
}

err_t api_events_stream(hs_req *req) {
  unsigned bit = req->auth.role_bit;
  const char *role = hs_role_name(bit);
  bool staff = (bit & ROLE_STAFF) != 0;
  char recipient[EVENTS_KEY_MAX], first[64];
  events_key(recipient, staff ? "staff" : role, staff ? role : req->auth.id);
  bool given, can_replay;
  int64_t last;
  const char *reason;
  /* the token's check may still wait to ride with a first statement: it runs before a stream
   * opens, so a refused token never takes a place among the account's streams */
  if (db_guard_refused()) return ERR_UNAUTHORIZED; /* the pipeline answers its 401 */
  last_event_id(req, &given, &last);
  err_t e = check_cursor(given, last, &can_replay, &reason);
  if (e != ERR_OK) return e;

  ev_stream *es = events_hub_stream(req, recipient);
  hs_stream *s = events_hub_http(es);
  char retry[32];
  snprintf(retry, sizeof retry, "retry: %d\n\n", RETRY_MS);
  hs_stream_write(s, retry, strlen(retry));
  if (reason) {
    char data[48];
    snprintf(data, sizeof data, "{\"reason\":\"%s\"}", reason);
    write_event(s, 0, "reset", data);
  }

  arena a;
  arena_init(&a);
  int64_t upto = events_hub_position();
  int64_t sent = can_replay ? last : upto; /* the app has every event of its own up to here */
  size_t bytes = 0;
  for (;;) {
    if (sent < upto && (e = replay(req, &a, s, recipient, &sent, upto, &bytes)) != ERR_OK) break;
    if (bytes >= REPLAY_MAX) { /* the rest after a reconnect, from the last id sent */
      hs_stream_end(s);
      break;
    }
    int64_t have = sent > upto ? sent : upto; /* more than upto: another instance's pump was ahead */
    first[0] = 0;
    if (have > 0) snprintf(first, sizeof first, "id: %lld\n\n", (long long)have); /* the app's position */
    if (events_hub_join(es, upto, first[0] ? first : NULL, have)) {
      take_pending(req, &a, s, can_replay ? last : -1, upto);
      break;
    }
    sent = have;
    upto = events_hub_position();
  }
  arena_fini(&a);
  return e;
}
