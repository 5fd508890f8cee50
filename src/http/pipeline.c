/* The pipeline (pipeline.h), in the order a request meets it. Everything here is a function of
 * the call and its connection's operations, so the unit tests drive it with a table of headers
 * and no socket (tests/unit/http/test_pipeline.c).
 *
 * hs_dispatch runs, in order: the environment gate (a row that does not exist here is a 404),
 * the body's size (413), the auth guard (401 without a valid token, 403 when the role is not
 * one the row admits; on an open route only a live impersonation token is looked at, so its
 * request is recorded), the rate limit (429 + Retry-After, per client address or per
 * account), the body (400 `body: malformed JSON`, or the multipart form's first problem) and
 * its schema, the query's schema (400 `<field>: <message>`), the Idempotency-Key, the
 * before_handler hook, and the handler. A failure at any step ends the request with that
 * step's answer: later steps do not run. The token is verified once per request (claims_of),
 * whether the event thread looked at it first (to pick a thread, or to refuse an upload early)
 * or not. */
#include "http/pipeline.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"
#include "ext/storage.h"
#include "http/answer.h"
#include "http/forwarded.h"
#include "http/idempotency.h"
#include "http/metrics.h"
#include "http/ratelimit.h"
#include "http/router.h"
#include "http/stream.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (64 * 1024)

/* The body and query of routes that declare none: one shared object that nothing modifies,
 * instead of two allocations per request. */
static json_t *empty_object;
static const hs_hooks *hooks[HS_HOOKS_MAX]; /* hs_add_hooks, in order */
static int nhooks;

void hs_pipeline_init(void) {
  hs_answer_init();
  if (!empty_object) empty_object = json_object();
}

void hs_add_hooks(const hs_hooks *h) {
  if (nhooks == HS_HOOKS_MAX) die("more than %d sets of HTTP hooks", HS_HOOKS_MAX);
  hooks[nhooks++] = h;
}

void hs_hooks_metrics(struct buf *out) {
  for (int i = 0; i < nhooks; i++)
    if (hooks[i]->metrics) hooks[i]->metrics(out);
}

static bool any_check_token(void) {
  for (int i = 0; i < nhooks; i++)
    if (hooks[i]->check_token) return true;
  return false;
}

/* Every check_token hook in order, until one refuses (its error, or req->err set): then the
 * request is no impersonation, whatever an earlier hook found. */
static err_t check_tokens(hs_req *req) {
  for (int i = 0; i < nhooks; i++) {
    err_t e = hooks[i]->check_token ? hooks[i]->check_token(req) : ERR_OK;
    if (e != ERR_OK || req->err != ERR_OK) {
      req->impersonation = (hs_impersonation){0};
      return e;
    }
  }
  return ERR_OK;
}

static err_t before_handlers(hs_req *req) {
  for (int i = 0; i < nhooks; i++)
    if (hooks[i]->before_handler && hooks[i]->before_handler(req) != ERR_OK) return req->err ? req->err : ERR_INTERNAL;
  return ERR_OK;
}

static void afters(hs_req *req) {
  for (int i = 0; i < nhooks; i++)
    if (hooks[i]->after) hooks[i]->after(req);
}

err_t hs_token_recheck(const hs_auth *auth) {
  if (!any_check_token()) return ERR_OK;
  hs_req req = {.auth = *auth, .res_fd = -1};
  arena_init(&req.arena);
  err_t e = check_tokens(&req);
  if (e == ERR_OK) e = req.err;
  arena_fini(&req.arena);
  return e;
}

/* ---- the request's identity: id and client address ---- */

static _Thread_local uint64_t rid_state;

/* Request ids need to be unique, not secret: a per-thread xorshift seeded from the kernel. */
static void request_id_new(char out[40]) {
  static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  if (!rid_state) random_bytes(&rid_state, sizeof rid_state), rid_state |= 1;
  out[0] = 'r';
  for (int i = 1; i < 25; i++) {
    rid_state ^= rid_state << 13, rid_state ^= rid_state >> 7, rid_state ^= rid_state << 17;
    out[i] = alphabet[rid_state % 36];
  }
  out[25] = 0;
}

static bool acceptable_request_id(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 36) return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.') return false;
  return true;
}

static void collect_forwarded(void *arg, const char *name, const char *value) {
  if (name && value && !strcasecmp(name, "X-Forwarded-For")) hs_forwarded_add(arg, value);
}

/* With TRUST_PROXY, the address X-Forwarded-For names (http/forwarded.h); else the peer's. */
static const char *client_ip(hs_call *c) {
  hs_req *req = &c->req;
  char out[INET6_ADDRSTRLEN] = "unknown";
  if (CFG.trust_proxy > 0) {
    hs_forwarded f = {.n = 0};
    req->conn_ops->each_header(req->conn, collect_forwarded, &f);
    if (hs_forwarded_client(&f, CFG.trust_proxy, out)) return arena_strdup(&req->arena, out);
  }
  req->conn_ops->peer(req->conn, out);
  return arena_strdup(&req->arena, out);
}

static void add_header_bytes(void *arg, const char *name, const char *value) {
  *(size_t *)arg += strlen(name) + (value ? strlen(value) : 0) + 4; /* "name: value\r\n" */
}

/* ---- reading the request ---- */

void hs_call_init(hs_call *c, void *conn, const hs_conn_ops *ops, const char *uri, void *arena_buf, size_t arena_size) {
  memset(c, 0, sizeof *c);
  hs_req *req = &c->req;
  arena_init_buf(&req->arena, arena_buf, arena_size);
  req->conn = conn, req->conn_ops = ops;
  req->res_fd = -1;
  const char *q = uri ? strchr(uri, '?') : NULL;
  if (q) req->query_string = c->raw_query = arena_strdup(&req->arena, q + 1);
}

static void on_form_part(void *cls, const char *key, const char *filename, const char *data, uint64_t off,
                         size_t size) {
  hs_form_data(cls, key, filename, data, off, size);
}

static err_t guard(hs_call *c, bool with_hook);

/* Finds the route: a preflight names the route it asks about (per-route CORS rules), and HEAD
 * is answered only by side-effect-free GETs (health checkers use it). */
static void match(hs_call *c, const char *method, const char *url) {
  hs_req *req = &c->req;
  int bit = hs_method_bit(method);
  c->preflight = !strcmp(method, "OPTIONS");
  if (bit) req->route = hs_router_match(bit, url, req);
  if (!strcmp(method, "HEAD")) {
    req->route = hs_router_match(HS_GET, url, req);
    if (req->route && !(req->route->flags & ROUTE_INLINE)) req->route = NULL;
  }
  if (c->preflight) {
    const char *asked = hs_header(req, "Access-Control-Request-Method");
    if (asked && hs_method_bit(asked)) req->route = hs_router_match(hs_method_bit(asked), url, req);
  }
}

bool hs_call_start(hs_call *c, const char *method, const char *url) {
  hs_req *req = &c->req;
  req->method = arena_strdup(&req->arena, method);
  req->path = arena_strdup(&req->arena, url);
  req->ip = client_ip(c);
  const char *incoming = hs_header(req, "X-Request-Id");
  if (acceptable_request_id(incoming))
    snprintf(req->request_id, sizeof req->request_id, "%s", incoming);
  else
    request_id_new(req->request_id);
  match(c, method, url);
  const hs_route *r = req->route;
  size_t max_body = r && r->max_body ? r->max_body : r && r->upload ? hs_form_body_limit(r->upload) : DEFAULT_MAX_BODY;
  buf_init(&c->body, max_body);
  if (r && r->upload && !c->preflight) {
    c->form = hs_form_new(req);
    c->mp = hs_multipart_new(hs_header(req, "Content-Type"), on_form_part, c->form);
    c->multipart = c->mp != NULL; /* NULL: the body is not multipart/form-data */
  }
  size_t header_bytes = 0;
  req->conn_ops->each_header(req->conn, add_header_bytes, &header_bytes);
  if (header_bytes > (size_t)CFG.http_max_header_bytes) {
    hs_fail(req, ERR_HEADERS_TOO_LARGE, NULL);
    return true;
  }
  const char *cl = hs_header(req, "Content-Length");
  if (cl && strtoull(cl, NULL, 10) > max_body) { /* refused before the body is read */
    c->too_large = true;
    hs_fail(req, ERR_TOO_LARGE, NULL);
    return true;
  }
  if (r && r->upload && r->roles && !c->preflight) { /* the token before any file reaches the disk */
    if (guard(c, false) != ERR_OK) return true;
    c->authorized = true;
  }
  return false;
}

void hs_call_feed(hs_call *c, const char *data, size_t size) {
  const hs_route *r = c->req.route;
  if (r && r->upload) { /* counted, not kept: the parts go to disk */
    c->upload_bytes += size;
    if (c->upload_bytes > c->body.cap)
      c->too_large = true;
    else if (c->mp && !c->mp_failed && !hs_multipart_feed(c->mp, data, size))
      c->mp_failed = true, hs_form_malformed(c->form); /* the parser stops at its first error */
    return;
  }
  if (c->too_large) return; /* keep reading to keep the connection in step, discard */
  buf_rc rc = buf_addn(&c->body, data, size);
  if (rc == BUF_NOMEM) oom();
  if (rc != BUF_OK) c->too_large = true;
}

/* ---- the guard ---- */

/* The bearer token the request presents (after "Bearer "), or NULL without one. */
static const char *bearer_of(hs_call *c) {
  const char *h = hs_header(&c->req, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7)) return NULL;
  h += 7;
  while (*h == ' ') h++;
  return *h ? h : NULL;
}

/* The request's token claims, verified once (NULL: no valid bearer token). */
static const token_claims *claims_of(hs_call *c) {
  if (c->claims_read) return c->claims;
  c->claims_read = true;
  const char *h = bearer_of(c);
  if (!h) return NULL;
  token_claims *t = arena_alloc(&c->req.arena, sizeof *t);
  return c->claims = token_verify(h, t) ? t : NULL;
}

/* A 401 of the guard, with its RFC 6750 challenge: a bare `Bearer` when no token came, and
 * `error="invalid_token"` for one that is expired, tampered or no longer accepted. */
static err_t unauthorized(hs_call *c) {
  hs_req *req = &c->req;
  req->www_authenticate = bearer_of(c) ? "Bearer error=\"invalid_token\"" : "Bearer";
  return req->err != ERR_OK ? req->err : hs_fail(req, ERR_UNAUTHORIZED, NULL);
}

/* The check_token hook on a verified token (req->auth filled): a token it refuses (401) gets
 * the invalid_token challenge; any other failure ends the request as the hook decided. */
static err_t check_hook(hs_call *c) {
  hs_req *req = &c->req;
  err_t e = check_tokens(req);
  if (e == ERR_OK && req->err == ERR_OK) return ERR_OK;
  if (req->err == ERR_UNAUTHORIZED || (req->err == ERR_OK && e == ERR_UNAUTHORIZED)) return unauthorized(c);
  return req->err != ERR_OK ? req->err : hs_fail(req, e, NULL);
}

/* On a ROUTE_TICKET route without a valid bearer token: the claims of the `ticket` query
 * parameter's token, redeemed once (NULL: none; *offered tells whether a ticket was given). */
static const token_claims *ticket_claims(hs_call *c, bool *offered) {
  *offered = false;
  const hs_hooks *redeemer = NULL;
  for (int i = 0; i < nhooks && !redeemer; i++)
    if (hooks[i]->redeem_ticket) redeemer = hooks[i];
  if (!redeemer || !c->raw_query || !(c->req.route->flags & ROUTE_TICKET)) return NULL;
  json_t *args = arena_json(&c->req.arena, json_object());
  hs_query_parse(c->raw_query, args);
  json_t *given = json_object_get(args, "ticket");
  const char *ticket = json_string_value(json_is_array(given) ? json_array_get(given, 0) : given); /* the first */
  if (!ticket) return NULL;
  *offered = true;
  token_claims *t = arena_alloc(&c->req.arena, sizeof *t);
  return c->claims = redeemer->redeem_ticket(ticket, t) ? t : NULL;
}

/* The value of cookie name in a Cookie header (RFC 6265 `a=b; c=d`), copied into the arena;
 * NULL without one. */
static const char *cookie_value(arena *a, const char *header, const char *name) {
  size_t n = strlen(name);
  for (const char *p = header; p && *p;) {
    while (*p == ' ' || *p == ';') p++;
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > n && !strncmp(p, name, n) && p[n] == '=') return arena_printf(a, "%.*s", (int)(len - n - 1), p + n + 1);
    p = end;
  }
  return NULL;
}

/* On a ROUTE_COOKIE route without a valid bearer token or ticket: the claims of the token the
 * session cookie stands for (NULL: none; *offered tells whether one came). A cookie sent from
 * another origin than the service's own or a listed one is not looked at: a page elsewhere
 * may have the browser send it, never use it. */
static const token_claims *cookie_claims(hs_call *c, bool *offered) {
  *offered = false;
  const hs_hooks *redeemer = NULL;
  for (int i = 0; i < nhooks && !redeemer; i++)
    if (hooks[i]->redeem_cookie && hooks[i]->session_cookie) redeemer = hooks[i];
  const char *header = hs_header(&c->req, "Cookie");
  if (!redeemer || !header || !(c->req.route->flags & ROUTE_COOKIE)) return NULL;
  const char *value = cookie_value(&c->req.arena, header, redeemer->session_cookie);
  if (!value || !hs_origin_credentialed(&c->req)) return NULL;
  *offered = true;
  token_claims *t = arena_alloc(&c->req.arena, sizeof *t);
  return c->claims = redeemer->redeem_cookie(value, t) ? t : NULL;
}

/* 401 without a valid token (or ticket), 403 when its role is not one the route admits. The
 * check_token hook may use the database, so it runs only where the request is answered: an
 * upload's early guard on the event thread (with_hook false) leaves it to hs_dispatch. */
static err_t guard(hs_call *c, bool with_hook) {
  hs_req *req = &c->req;
  const token_claims *t = claims_of(c);
  bool offered = false;
  if (!t) t = ticket_claims(c, &offered);
  if (!t && offered) { /* a ticket is no bearer token: the bare challenge */
    req->www_authenticate = "Bearer";
    return hs_fail(req, ERR_UNAUTHORIZED, "Invalid or expired ticket");
  }
  if (!t && !bearer_of(c)) t = cookie_claims(c, &offered);
  if (!t && offered) {
    req->www_authenticate = "Bearer";
    return hs_fail(req, ERR_UNAUTHORIZED, "Invalid or expired session");
  }
  if (!t) return unauthorized(c);
  unsigned bit = hs_role_bit(t->role, t->is_staff);
  if (!bit) return hs_fail(req, ERR_FORBIDDEN, NULL);
  req->auth = (hs_auth){t->id,  t->role,     bit,    t->elevation_id[0] ? t->elevation_id : NULL,
                        t->gen, t->token_id, t->exp, t->session_id[0] ? t->session_id : NULL};
  if (with_hook && check_hook(c) != ERR_OK) return req->err;
  if (!(bit & req->route->roles)) return hs_fail(req, ERR_FORBIDDEN, NULL);
  return ERR_OK;
}

/* An open route takes no token, yet a request made with a valid impersonation token is still
 * that impersonation's: the check_token hook sees it as on any route, so the other hooks
 * record it. A token that is not a live impersonation is ignored here, as open routes ignore
 * tokens; a check that could not be made (the database) fails the request. */
static err_t observe_impersonation(hs_call *c) {
  hs_req *req = &c->req;
  const token_claims *t = claims_of(c);
  if (!t || !t->elevation_id[0] || !any_check_token()) return ERR_OK;
  req->auth = (hs_auth){t->id,       t->role, hs_role_bit(t->role, t->is_staff),      t->elevation_id, t->gen,
                        t->token_id, t->exp,  t->session_id[0] ? t->session_id : NULL};
  err_t e = check_tokens(req);
  if (e == ERR_OK && req->err == ERR_OK) return ERR_OK;
  if (e == ERR_UNAUTHORIZED || req->err == ERR_UNAUTHORIZED) {
    req->err = ERR_OK, req->err_message = req->err_code = req->err_field = NULL;
    req->auth = (hs_auth){0};
    return ERR_OK;
  }
  return req->err != ERR_OK ? req->err : hs_fail(req, e, NULL);
}

/* ---- limits and input ---- */

static err_t limit(hs_req *req) {
  const hs_route *r = req->route;
  if (!r->limit) return ERR_OK;
  int retry = 0;
  const char *client = r->limit->per_account && req->auth.id
                           ? arena_printf(&req->arena, "%s:%s", req->auth.role, req->auth.id)
                           : hs_rate_client(req);
  err_t e = hs_rate_limit_hit(r->limit, client, &retry);
  if (e == ERR_OK) return ERR_OK;
  req->retry_after = retry;
  return hs_fail(req, e, NULL);
}

static bool only_space(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i])) return false;
  return true;
}

/* A JSON route that takes a body reads no form: a multipart one is refused (415) unread. */
static bool multipart_body(hs_req *req) {
  const char *type = hs_header(req, "Content-Type");
  return (req->route->method & (HS_POST | HS_PUT | HS_PATCH | HS_DELETE)) && type &&
         !strncasecmp(type, "multipart/", 10);
}

static err_t parse_body(hs_req *req) {
  const hs_route *r = req->route;
  json_t *input = NULL;
  if (multipart_body(req))
    return hs_fail(req, ERR_UNSUPPORTED_MEDIA_TYPE, "This route takes a JSON body (Content-Type: application/json)");
  if (req->raw_len > 0 && !only_space(req->raw_body, req->raw_len)) {
    input = arena_json(&req->arena, json_loadb(req->raw_body, req->raw_len, JSON_ALLOW_NUL, NULL));
    if (!input) return hs_fail_invalid(req, "body: malformed JSON");
    if (!json_is_object(input)) return hs_fail_invalid(req, "body: must be a JSON object");
  }
  if (!r->body) {
    req->body = empty_object;
    return ERR_OK;
  }
  char err[256];
  req->body = arena_json(&req->arena, hs_validate(r->body, input, false, err));
  return req->body ? ERR_OK : hs_fail_invalid(req, err);
}

/* An upload's parts, after the body: their problems, the files and the text fields. */
static err_t finish_upload(hs_call *c) {
  hs_req *req = &c->req;
  if (!c->multipart) return hs_fail_invalid(req, "body: must be multipart/form-data");
  err_t e = hs_form_finish(c->form);
  if (e == ERR_OK && !req->body) req->body = empty_object;
  return e;
}

static err_t parse_input(hs_call *c) {
  hs_req *req = &c->req;
  const hs_route *r = req->route;
  err_t e = r->upload ? finish_upload(c) : r->flags & ROUTE_RAW_BODY ? ERR_OK : parse_body(req);
  if (e != ERR_OK) return e;
  if (!r->query) {
    req->query = empty_object;
    return ERR_OK;
  }
  json_t *args = arena_json(&req->arena, json_object());
  hs_query_parse(c->raw_query, args);
  char err[256];
  req->query = arena_json(&req->arena, hs_validate(r->query, args, true, err));
  return req->query ? ERR_OK : hs_fail_invalid(req, err);
}

/* ---- the pipeline ---- */

static void run_pipeline(hs_call *c) {
  hs_req *req = &c->req;
  const hs_route *r = req->route;
  req->raw_body = buf_ptr(&c->body) ? buf_ptr(&c->body) : "";
  req->raw_len = buf_len(&c->body);
  if (!r || !hs_route_available(r)) { /* the router never matches such rows; the gate holds anyway */
    req->route = NULL;
    /* a call made with an impersonation token is recorded whatever it asked for, a 404 too */
    if (observe_impersonation(c) == ERR_OK) hs_fail(req, ERR_NOT_FOUND, NULL);
    return;
  }
  if (c->too_large) {
    hs_fail(req, ERR_TOO_LARGE, NULL);
    return;
  }
  if (r->roles) {
    if (c->authorized)
      check_hook(c);
    else
      guard(c, true);
    if (req->err != ERR_OK) return;
  } else if (observe_impersonation(c) != ERR_OK) {
    return;
  }
  if (limit(req) != ERR_OK || parse_input(c) != ERR_OK || !hs_idem_begin(req)) return;
  if (before_handlers(req) != ERR_OK) {
    if (req->err == ERR_OK) hs_fail(req, ERR_INTERNAL, NULL);
    return;
  }
  err_t e = r->handler(req);
  if (e != ERR_OK && req->err == ERR_OK) hs_fail(req, e, NULL);
  if (e == ERR_OK && req->err == ERR_OK && !req->status) hs_ok(req, json_object());
}

void hs_call_refuse(hs_call *c) {
  c->req.retry_after = 1;
  hs_fail(&c->req, ERR_UNAVAILABLE, "Service unavailable");
}

void hs_dispatch(hs_call *c) {
  hs_req *req = &c->req;
  const hs_route *r = req->route;
  db_unavailable_clear();
  db_trips_clear();
  db_guard_clear();
  /* the token's check rides with the request's first statement; whatever acts beyond the
   * database first (an outbound call, a stored file, a password hashed) runs it before
   * (db_guard_passed) */
  db_guard_defer(r != NULL);
  storage_failure_clear();
  run_pipeline(c);
  db_guard_defer(false);
  if (db_guard_refused()) { /* what ran after the token's check did not run: 401 */
    hs_answer_clear(c);
    unauthorized(c); /* the token verified, so its challenge says invalid_token */
  }
  err_t stored = storage_failure();
  if (stored != ERR_OK && !db_unavailable_seen() && (req->err == ERR_INTERNAL || req->err == stored)) {
    req->err = ERR_OK;
    hs_fail(req, stored, stored == ERR_INSUFFICIENT_STORAGE ? "Insufficient storage" : "File storage unavailable");
    if (stored == ERR_UNAVAILABLE) req->retry_after = 5;
  }
  if (db_unavailable_seen()) {
    hs_answer_clear(c);
    hs_call_refuse(c);
  }
  if (req->auth.id) afters(req); /* sees the final answer (an identity: a token was checked) */
  hs_answer_prepare(c);
  c->db_trips += db_trips(); /* a read tried on an event thread first, then on a worker: both */
  db_guard_clear();          /* the thread's next work is not this request's */
}

bool hs_call_run_here(hs_call *c, hs_lane_id *lane) {
  if (c->mp) { /* refuses a body that ended before its closing boundary */
    if (!hs_multipart_finish(c->mp)) hs_form_malformed(c->form);
    hs_multipart_free(c->mp);
    c->mp = NULL;
  }
  if (c->preflight) {
    hs_answer_preflight(c);
    return true;
  }
  const hs_route *r = c->req.route;
  /* the hooks write the records of an impersonated request, whatever the route: a worker's work */
  const token_claims *claims = !r || (r->flags & (ROUTE_DB_READ | ROUTE_INLINE)) ? claims_of(c) : NULL;
  bool impersonated = claims && claims->elevation_id[0];
  bool read_here = r && (r->flags & ROUTE_DB_READ) && db_reads_inline() && !impersonated;
  if (((!r || (r->flags & ROUTE_INLINE)) && !impersonated) || read_here || c->too_large) {
    if (read_here) db_use_pool(DB_POOL_EVENT);
    hs_dispatch(c);
    if (!read_here || c->too_large || !db_unavailable_seen()) return true;
    hs_answer_clear(c); /* the file is locked: a worker's connection waits for it */
  }
  *lane = r && ((r->flags & ROUTE_SLOW) || r->upload) ? HS_LANE_SLOW : HS_LANE_DB;
  return false;
}

/* ---- the end ---- */

void hs_call_log(hs_call *c, double ms, bool aborted) {
  hs_req *req = &c->req;
  /* hit counts serve only GET /__test/routes; elsewhere they would be shared cache lines */
  if (CFG.env == ENV_TEST && req->route && req->status && !c->preflight) hs_router_count(req->route, req->status);
  if (req->status) hs_metrics_observe(req->route, req->method, req->status, ms / 1e3, c->db_trips);
  log_access(req->request_id, req->method, req->route ? req->route->path : req->path, req->status, ms, req->ip,
             aborted);
}

void hs_call_fini(hs_call *c) {
  hs_req *req = &c->req;
  if (req->stream) hs_stream_gone(req->stream), req->stream = NULL; /* opened, never sent */
  hs_multipart_free(c->mp);
  c->mp = NULL;
  if (req->res_fd >= 0) close(req->res_fd), req->res_fd = -1; /* a file answer that was never sent */
  free(req->res_data), req->res_data = NULL;
  free(c->out), c->out = NULL; /* an answer that was never sent */
  arena_fini(&req->arena);
  buf_free(&c->body);
}
