/* Unit tests for src/http/pipeline.c and src/http/answer.c: requests driven through the
 * pipeline without a socket (a fake connection: a table of headers and a peer address; route
 * rows of this file; a body fed in pieces), checking which gate answers, in which order, with
 * which body and headers, and whether the hooks and the handler ran. Rate limits and
 * idempotency keys live in a SQLite database migrated in the group setup. */
#include "core/config.h"
#include "core/log.h"
#include "db/db.h"
#include "db/migrate.h"
#include "ext/filetype.h"
#include "ext/token.h"
#include "http/answer.h"
#include "http/pipeline.h"
#include "http/router.h"
#include "http/stream.h"
#include "unit.h"
#include "unit_db.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- what ran: hooks and handlers append their names ---- */

static char trail[256];
static err_t before_verdict; /* what the before_handler hook answers */

static void ran(const char *what) {
  size_t n = strlen(trail);
  snprintf(trail + n, sizeof trail - n, "%s%s", n ? "," : "", what);
}

static err_t hook_check_token(hs_req *req) {
  (void)req;
  ran("check_token");
  return ERR_OK;
}

static err_t hook_before(hs_req *req) {
  ran("before_handler");
  return before_verdict == ERR_OK ? ERR_OK : hs_fail(req, before_verdict, "refused by the hook");
}

static void hook_after(hs_req *req) {
  char what[32];
  snprintf(what, sizeof what, "after(%d)", hs_status(req));
  ran(what);
}

static err_t h_ok(hs_req *req) {
  ran("handler");
  return hs_ok(req, json_pack("{s:b}", "ok", 1));
}

static err_t h_item(hs_req *req) {
  ran("handler");
  return hs_ok(req, json_pack("{s:s}", "name", hs_body_str(req, "name")));
}

static err_t h_silent(hs_req *req) {
  ran("handler");
  (void)req;
  return ERR_OK;
}

static err_t h_boom(hs_req *req) {
  ran("handler");
  return hs_fail(req, ERR_INTERNAL, "the secret detail of a failure");
}

static err_t h_busy(hs_req *req) {
  ran("handler");
  req->retry_after = 7;
  return hs_fail_code(req, ERR_UNAVAILABLE, NULL, "Try again soon");
}

static err_t h_down(hs_req *req) { /* names no Retry-After, and a code that is not documented */
  ran("handler");
  return hs_fail_code(req, ERR_UNAVAILABLE, "processor_down", "Down");
}

static err_t h_state(hs_req *req) {
  ran("handler");
  return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The item is sold");
}

/* ---- streamed answers: an owner that records what happens to its stream ---- */

static int stream_closed_calls;
static hs_stream *opened_stream;

static void owner_closed(void *arg, hs_stream *s) {
  (void)arg;
  stream_closed_calls++;
  hs_stream_release(s);
}

static const hs_stream_owner unit_owner = {owner_closed, NULL};

static err_t h_stream(hs_req *req) {
  ran("handler");
  opened_stream = hs_stream_open(req, "text/event-stream", 1024, &unit_owner, NULL);
  hs_stream_write(opened_stream, "retry: 1\n\n", 11);
  return ERR_OK;
}

/* Opens the stream, then fails: the failure is the answer, and the stream is dropped. */
static err_t h_stream_fails(hs_req *req) {
  ran("handler");
  opened_stream = hs_stream_open(req, "text/event-stream", 1024, &unit_owner, NULL);
  return hs_fail(req, ERR_CONFLICT, "changed my mind");
}

static err_t h_who(hs_req *req) {
  ran("handler");
  return hs_ok(req, json_pack("{s:s,s:s,s:I}", "id", req->auth.id, "role", req->auth.role, "exp",
                              (json_int_t)req->auth.token_exp));
}

/* Tickets: "good" once, for user u-ticket. */
static int redeemed;
static bool unit_redeem(const char *ticket, token_claims *out) {
  redeemed++;
  if (strcmp(ticket, "good") || redeemed > 1) return false;
  memset(out, 0, sizeof *out);
  snprintf(out->id, sizeof out->id, "u-ticket");
  snprintf(out->role, sizeof out->role, "user");
  out->exp = 4102444800; /* 2100-01-01 */
  return true;
}

/* Session cookies: "sess=good-cookie" for user u-cookie, as often as it comes. */
static int cookie_redeemed;
static bool unit_redeem_cookie(const char *value, token_claims *out) {
  cookie_redeemed++;
  if (strcmp(value, "good-cookie")) return false;
  memset(out, 0, sizeof *out);
  snprintf(out->id, sizeof out->id, "u-cookie");
  snprintf(out->role, sizeof out->role, "user");
  out->exp = 4102444800;
  return true;
}

static err_t h_raw(hs_req *req) {
  ran("handler");
  return hs_ok(req, json_pack("{s:s%}", "raw", req->raw_body, req->raw_len));
}

static const hs_field item_fields[] = {
    {.name = "name", .kind = F_STRING, .flags = F_REQUIRED, LEN(1, 20)},
    {0},
};
static const hs_schema item_schema = {item_fields};
static const hs_rate_limit item_limit = {"unit-items", 2, 60 * 1000, true};
static const hs_file_rule photo_rules[] = {{"photo", 1, 1024, FT_PNG}, {0}};
static const hs_upload_spec photo_upload = {.files = photo_rules};

static const hs_field ticket_fields[] = {{.name = "ticket", .kind = F_STRING}, {0}};
static const hs_schema ticket_query = {ticket_fields};

static const hs_route routes[] = {
    {.method = HS_GET, .path = "/stream", .handler = h_stream, .roles = ROLE_USER, .summary = "stream"},
    {.method = HS_GET, .path = "/stream-fails", .handler = h_stream_fails, .roles = ROLE_USER, .summary = "fails"},
    {.method = HS_GET,
     .path = "/who",
     .handler = h_who,
     .roles = ROLE_USER,
     .query = &ticket_query,
     .flags = ROUTE_TICKET | ROUTE_COOKIE,
     .summary = "who"},
    {.method = HS_GET, .path = "/open", .handler = h_ok, .flags = ROUTE_INLINE, .summary = "open"},
    {.method = HS_GET, .path = "/silent", .handler = h_silent, .summary = "silent"},
    {.method = HS_GET, .path = "/slow", .handler = h_ok, .flags = ROUTE_SLOW, .summary = "slow"},
    {.method = HS_POST,
     .path = "/items",
     .handler = h_item,
     .roles = ROLE_USER,
     .body = &item_schema,
     .max_body = 64,
     .ok = 201,
     .limit = &item_limit,
     .summary = "items"},
    {.method = HS_POST, .path = "/raw", .handler = h_raw, .flags = ROUTE_RAW_BODY, .summary = "raw"},
    {.method = HS_GET, .path = "/boom", .handler = h_boom, .summary = "boom"},
    {.method = HS_GET, .path = "/busy", .handler = h_busy, .summary = "busy"},
    {.method = HS_GET, .path = "/down", .handler = h_down, .summary = "down"},
    {.method = HS_GET, .path = "/state", .handler = h_state, .summary = "state"},
    {.method = HS_GET, .path = "/admin", .handler = h_ok, .roles = ROLE_ADMIN, .summary = "admin"},
    {.method = HS_GET, .path = "/test-only", .handler = h_ok, .flags = ROUTE_TEST_ONLY, .summary = "test only"},
    {.method = HS_POST,
     .path = "/photos",
     .handler = h_ok,
     .roles = ROLE_USER,
     .upload = &photo_upload,
     .summary = "photos"},
};

/* ---- a fake connection ---- */

typedef struct fake_conn {
  const char *h[16][2];
  int n;
  const char *peer;
} fake_conn;

static const char *fake_header(void *conn, const char *name) {
  fake_conn *f = conn;
  for (int i = 0; i < f->n; i++)
    if (!strcasecmp(f->h[i][0], name)) return f->h[i][1];
  return NULL;
}

static void fake_each_header(void *conn, void (*fn)(void *arg, const char *name, const char *value), void *arg) {
  fake_conn *f = conn;
  for (int i = 0; i < f->n; i++) fn(arg, f->h[i][0], f->h[i][1]);
}

static bool fake_peer(void *conn, char out[INET6_ADDRSTRLEN]) {
  fake_conn *f = conn;
  if (!f->peer) return false;
  snprintf(out, INET6_ADDRSTRLEN, "%s", f->peer);
  return true;
}

static const hs_conn_ops fake_ops = {fake_header, fake_each_header, fake_peer};

/* ---- one request through the pipeline ---- */

typedef struct result {
  bool answered_at_start, answered_here;
  hs_lane_id lane;
  int status;
  json_t *body; /* the answer parsed, NULL when there is none */
  char headers[1024];
} result;

static fake_conn conn;
static struct {
  hs_call call;
  _Alignas(max_align_t) unsigned char arena[512];
} slot;
static result res;
static bool live; /* slot.call holds a request to release */

static void release(void) {
  if (live) hs_call_fini(&slot.call);
  live = false;
}

static void add_line(void *resp, const char *name, const char *value) {
  char *h = resp;
  size_t n = strlen(h);
  snprintf(h + n, sizeof res.headers - n, "%s: %s\n", name, value);
}

/* Sends method path with the headers set by header() and body (fed in pieces of 7 bytes); a
 * request that is not answered where it was read is dispatched as a worker would. */
static result *send_req(const char *method, const char *path, const char *body) {
  hs_call *c = &slot.call;
  json_decref(res.body);
  memset(&res, 0, sizeof res);
  trail[0] = 0;
  release();
  hs_call_init(c, &conn, &fake_ops, path, slot.arena, sizeof slot.arena);
  live = true;
  char url[256]; /* the path without its query, as the transport gives it */
  snprintf(url, sizeof url, "%.*s", (int)strcspn(path, "?"), path);
  res.answered_at_start = hs_call_start(c, method, url);
  if (!res.answered_at_start) {
    for (size_t at = 0, n = body ? strlen(body) : 0; at < n; at += 7)
      hs_call_feed(c, body + at, n - at < 7 ? n - at : 7);
    res.answered_here = hs_call_run_here(c, &res.lane);
    if (!res.answered_here) hs_dispatch(c);
  }
  hs_answer_prepare(c);
  res.status = c->req.status;
  const char *text = c->out ? c->out : c->req.res_json;
  if (text) res.body = json_loads(text, JSON_DECODE_ANY, NULL);
  hs_answer_headers(c, add_line, res.headers);
  return &res;
}

static void header(const char *name, const char *value) {
  conn.h[conn.n][0] = name, conn.h[conn.n][1] = value;
  conn.n++;
}

/* The next request has no header lines. */
static void no_headers(void) { conn.n = 0; }

static const char *error_of(const result *r) { return json_string_value(json_object_get(r->body, "error")); }
static const char *code_of(const result *r) { return json_string_value(json_object_get(r->body, "code")); }
static const char *field_of(const result *r) { return json_string_value(json_object_get(r->body, "field")); }

/* r is an error of status with the message error, answered after the hooks want_trail names. */
static void assert_refused(const result *r, int status, const char *error, const char *want_trail) {
  assert_int_equal(r->status, status);
  assert_string_equal(error_of(r), error);
  assert_string_equal(trail, want_trail);
}

/* "Bearer <token>" for id and role; the text is reused by the next call. */
static char *token_for(const char *id, const char *role) {
  static char bearer[1024];
  char *t = token_issue(id, role, false, NULL, 0, 3600);
  snprintf(bearer, sizeof bearer, "Bearer %s", t);
  free(t);
  return bearer;
}

/* ---- set-up ---- */

static char secret[] = "pipeline-unit-secret-0123456789abcdef0123";
static char cors[] = "*";
static char public_url[] = "https://api.example/v1";

static int group_setup(void **state) {
  (void)state;
  log_set_level(LOG_ERROR);
  CFG.env = ENV_TEST;
  CFG.jwt_secret = secret, CFG.jwt_secret_len = strlen(secret);
  CFG.cors_origins = cors;
  CFG.public_url = public_url;
  CFG.http_max_header_bytes = 8192;
  CFG.retain.idempotency = 24LL * 3600 * 1000; /* RETAIN_IDEMPOTENCY's default */
  unit_db_open("pipeline", 2);
  if (!db_migrate()) fail_msg("migrations failed");
  hs_router_build(routes, sizeof routes / sizeof *routes);
  hs_pipeline_init();
  static const hs_hooks hooks = {hook_check_token,
                                 hook_before,
                                 hook_after,
                                 unit_redeem,
                                 .session_cookie = "sess",
                                 .redeem_cookie = unit_redeem_cookie};
  hs_add_hooks(&hooks);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  json_decref(res.body);
  release();
  unit_db_close();
  return 0;
}

/* Each test starts without headers, and with the request of the previous test released. */
static int setup(void **state) {
  (void)state;
  release();
  memset(&conn, 0, sizeof conn);
  conn.peer = "203.0.113.9";
  before_verdict = ERR_OK;
  CFG.env = ENV_TEST;
  CFG.trust_proxy = 0;
  return 0;
}

/* ---- the tests ---- */

static void test_open_route(void **state) {
  (void)state;
  header("X-Request-Id", "abc-123");
  result *r = send_req("GET", "/open", NULL);
  assert_true(r->answered_here); /* ROUTE_INLINE: on the thread that read it */
  assert_int_equal(r->status, 200);
  assert_true(json_is_true(json_object_get(r->body, "ok")));
  assert_string_equal(trail, "before_handler,handler"); /* no token: no check_token, no after */
  assert_string_equal(slot.call.req.request_id, "abc-123");
  assert_string_equal(slot.call.req.ip, "203.0.113.9");
  assert_non_null(strstr(r->headers, "Content-Type: application/json; charset=utf-8\n"));
  assert_non_null(strstr(r->headers, "X-Request-Id: abc-123\n"));
  assert_non_null(strstr(r->headers, "X-Content-Type-Options: nosniff\n"));
  assert_non_null(strstr(r->headers, "Cache-Control: no-store\n"));
}

static void test_not_found(void **state) {
  (void)state;
  header("X-Request-Id", "not ok!"); /* refused: a new id is made */
  result *r = send_req("GET", "/nowhere", NULL);
  assert_true(r->answered_here);
  assert_refused(r, 404, "Not found", "");
  assert_int_equal(slot.call.req.request_id[0], 'r');
  assert_int_equal(strlen(slot.call.req.request_id), 25);
}

/* A row that does not exist in this environment is a 404, whether the router or the pipeline's
 * own gate sees it first. */
static void test_environment_gate(void **state) {
  (void)state;
  assert_int_equal(send_req("GET", "/test-only", NULL)->status, 200);
  CFG.env = ENV_DEVELOPMENT;
  result *r = send_req("GET", "/test-only", NULL);
  assert_int_equal(r->status, 404);
  assert_string_equal(trail, "");
  /* the gate itself: the row handed to the pipeline directly */
  hs_call *c = &slot.call;
  release();
  hs_call_init(c, &conn, &fake_ops, "/test-only", slot.arena, sizeof slot.arena);
  live = true;
  assert_false(hs_call_start(c, "GET", "/test-only"));
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(rows[i].path, "/test-only")) c->req.route = &rows[i];
  hs_dispatch(c);
  assert_int_equal(c->req.status, 404);
  assert_string_equal(trail, "");
}

static void test_unauthorized(void **state) {
  (void)state;
  result *r = send_req("POST", "/items", "{\"name\":\"x\"}");
  assert_false(r->answered_here);
  assert_int_equal(r->lane, HS_LANE_DB);
  assert_int_equal(r->status, 401);
  assert_string_equal(error_of(r), "Unauthorized");
  assert_string_equal(code_of(r), "unauthorized");
  assert_non_null(strstr(r->headers, "\nWWW-Authenticate: Bearer\n")); /* no token: no error (RFC 6750) */
  assert_string_equal(trail, "");                                      /* no hook: there is no caller to look at */
  header("Authorization", "Bearer not.a.token");
  r = send_req("POST", "/items", "{\"name\":\"x\"}");
  assert_int_equal(r->status, 401);
  assert_non_null(strstr(r->headers, "\nWWW-Authenticate: Bearer error=\"invalid_token\"\n"));
  assert_string_equal(trail, "");
  no_headers();
  header("Authorization", "Basic dTpw"); /* not a bearer token: as if none came */
  r = send_req("POST", "/items", "{\"name\":\"x\"}");
  assert_non_null(strstr(r->headers, "\nWWW-Authenticate: Bearer\n"));
}

/* check_token sees the caller before the role is compared; after sees the refusal. */
static void test_forbidden(void **state) {
  (void)state;
  header("Authorization", token_for("p1", "provider"));
  result *r = send_req("POST", "/items", "{\"name\":\"x\"}");
  assert_int_equal(r->status, 403);
  assert_string_equal(error_of(r), "Forbidden");
  assert_string_equal(code_of(r), "forbidden");
  assert_null(strstr(r->headers, "WWW-Authenticate"));
  assert_string_equal(trail, "check_token,after(403)");
  no_headers();
  header("Authorization", token_for("u1", "nobody-knows-this-role"));
  r = send_req("GET", "/admin", NULL);
  assert_int_equal(r->status, 403);
}

static void test_too_large_by_content_length(void **state) {
  (void)state;
  header("Authorization", token_for("u2", "user"));
  header("Content-Length", "65");
  result *r = send_req("POST", "/items", NULL);
  assert_true(r->answered_at_start); /* before any byte of the body */
  assert_refused(r, 413, "Request body too large", "");
}

/* A body past max_body is refused on the thread that read it, before the guard: no token
 * needed to learn it is too large, and no hook or limit runs. */
static void test_too_large_by_body(void **state) {
  (void)state;
  char big[66];
  memset(big, ' ', 65), big[65] = 0;
  result *r = send_req("POST", "/items", big);
  assert_true(r->answered_here);
  assert_int_equal(r->status, 413);
  assert_string_equal(trail, "");
  memset(big, ' ', 64), big[64] = 0; /* exactly max_body: read, then judged */
  r = send_req("POST", "/items", big);
  assert_int_equal(r->status, 401);
}

static void test_header_fields_too_large(void **state) {
  (void)state;
  static char big[9000];
  memset(big, 'a', sizeof big - 1);
  header("X-Big", big);
  result *r = send_req("GET", "/open", NULL);
  assert_true(r->answered_at_start);
  assert_int_equal(r->status, 431);
  assert_string_equal(trail, "");
}

/* The guard, then the limit (per account), then the body: a refused caller is not counted,
 * a malformed body is, and past the limit the body is not even parsed. */
static void test_rate_limit(void **state) {
  (void)state;
  send_req("POST", "/items", "{\"name\":\"x\"}"); /* 401: not counted */
  header("Authorization", token_for("u3", "user"));
  assert_int_equal(send_req("POST", "/items", "{\"name\":\"one\"}")->status, 201);
  assert_int_equal(send_req("POST", "/items", "{")->status, 400); /* counted */
  result *r = send_req("POST", "/items", "{");
  assert_refused(r, 429, "Too many requests", "check_token,after(429)");
  assert_true(slot.call.req.retry_after >= 1 && slot.call.req.retry_after <= 60);
  assert_non_null(strstr(r->headers, "\nRetry-After: "));
  no_headers();
  header("Authorization", token_for("u4", "user")); /* another account: its own count */
  assert_int_equal(send_req("POST", "/items", "{\"name\":\"two\"}")->status, 201);
}

static void test_malformed_json(void **state) {
  (void)state;
  header("Authorization", token_for("u5", "user"));
  result *r = send_req("POST", "/items", "{\"name\": ");
  assert_refused(r, 400, "body: malformed JSON", "check_token,after(400)");
  r = send_req("POST", "/items", "[\"name\"]");
  assert_int_equal(r->status, 400);
  assert_string_equal(error_of(r), "body: must be a JSON object");
  assert_string_equal(code_of(r), "validation_failed");
  assert_string_equal(field_of(r), "body");
}

/* A JSON route refuses a form before reading it; the check comes after the guard. */
static void test_multipart_to_json_route(void **state) {
  (void)state;
  header("Authorization", token_for("u11", "user"));
  header("Content-Type", "multipart/form-data; boundary=X");
  result *r = send_req("POST", "/items", "--X--\r\n");
  assert_int_equal(r->status, 415);
  assert_string_equal(code_of(r), "unsupported_media_type");
  assert_string_equal(trail, "check_token,after(415)");
}

static void test_validation(void **state) {
  (void)state;
  header("Authorization", token_for("u6", "user"));
  result *r = send_req("POST", "/items", "{\"other\":1}");
  assert_int_equal(r->status, 400);
  assert_string_equal(error_of(r), "name: is required");
  assert_string_equal(code_of(r), "validation_failed");
  assert_string_equal(field_of(r), "name");
  assert_int_equal(json_object_size(r->body), 3);
  assert_string_equal(trail, "check_token,after(400)");
}

/* Every gate passed: the hooks around the handler, in order, and only declared fields reach
 * it; the route's success status. */
static void test_handler_and_hooks(void **state) {
  (void)state;
  header("Authorization", token_for("u7", "user"));
  result *r = send_req("POST", "/items", "{\"name\":\"lamp\",\"extra\":true}");
  assert_int_equal(r->status, 201);
  assert_string_equal(json_string_value(json_object_get(r->body, "name")), "lamp");
  assert_string_equal(trail, "check_token,before_handler,handler,after(201)");
  assert_string_equal(slot.call.req.auth.id, "u7");
  assert_int_equal(slot.call.req.auth.role_bit, ROLE_USER);
  assert_null(json_object_get(slot.call.req.body, "extra"));
}

static void test_before_handler_refuses(void **state) {
  (void)state;
  before_verdict = ERR_FORBIDDEN;
  header("Authorization", token_for("u8", "user"));
  result *r = send_req("POST", "/items", "{\"name\":\"lamp\"}");
  assert_refused(r, 403, "refused by the hook", "check_token,before_handler,after(403)");
}

static void test_handler_without_answer(void **state) {
  (void)state;
  result *r = send_req("GET", "/silent", NULL);
  assert_false(r->answered_here);
  assert_int_equal(r->status, 200);
  assert_true(json_is_object(r->body) && json_object_size(r->body) == 0);
}

/* A 5xx hides what went wrong behind the request id; 503 says what the handler said. */
static void test_error_bodies(void **state) {
  (void)state;
  result *r = send_req("GET", "/boom", NULL);
  assert_int_equal(r->status, 500);
  assert_int_equal(json_object_size(r->body), 3);
  assert_string_equal(error_of(r), "Internal server error");
  assert_string_equal(code_of(r), "internal_error");
  assert_string_equal(json_string_value(json_object_get(r->body, "requestId")), slot.call.req.request_id);
  r = send_req("GET", "/busy", NULL);
  assert_int_equal(r->status, 503);
  assert_string_equal(error_of(r), "Try again soon");
  assert_string_equal(code_of(r), "service_unavailable");
  assert_non_null(strstr(r->headers, "\nRetry-After: 7\n"));
  r = send_req("GET", "/down", NULL); /* every 503 says when to come back */
  assert_non_null(strstr(r->headers, "\nRetry-After: 5\n"));
  assert_string_equal(code_of(r), "service_unavailable"); /* not one of ERR_CODES: the default */
  r = send_req("GET", "/state", NULL);
  assert_int_equal(r->status, 409);
  assert_string_equal(code_of(r), "invalid_state");
  assert_int_equal(json_object_size(r->body), 2);
  assert_null(strstr(r->headers, "Retry-After"));
}

static void test_raw_body(void **state) {
  (void)state;
  result *r = send_req("POST", "/raw", "not json at all, and not parsed");
  assert_int_equal(r->status, 200);
  assert_string_equal(json_string_value(json_object_get(r->body, "raw")), "not json at all, and not parsed");
  assert_null(slot.call.req.body);
}

static void test_lanes(void **state) {
  (void)state;
  result *r = send_req("GET", "/slow", NULL);
  assert_false(r->answered_here);
  assert_int_equal(r->lane, HS_LANE_SLOW);
  assert_int_equal(r->status, 200);
}

/* An upload's token is checked with the headers, before any file reaches the disk. */
static void test_upload_guarded_early(void **state) {
  (void)state;
  header("Content-Type", "multipart/form-data; boundary=X");
  result *r = send_req("POST", "/photos", NULL);
  assert_true(r->answered_at_start);
  assert_int_equal(r->status, 401);
  header("Authorization", token_for("u9", "provider"));
  r = send_req("POST", "/photos", NULL);
  assert_true(r->answered_at_start);
  assert_int_equal(r->status, 403);
  assert_string_equal(trail, ""); /* the hook waits for the worker */
}

static void test_idempotent_replay(void **state) {
  (void)state;
  header("Authorization", token_for("u10", "user"));
  header("Idempotency-Key", "unit-key-1");
  result *r = send_req("POST", "/items", "{\"name\":\"once\"}");
  assert_int_equal(r->status, 201);
  assert_false(slot.call.req.replayed);
  r = send_req("POST", "/items", "{\"name\":\"once\"}");
  assert_int_equal(r->status, 201);
  assert_true(slot.call.req.replayed);
  assert_string_equal(json_string_value(json_object_get(r->body, "name")), "once");
  assert_string_equal(trail, "check_token,after(201)"); /* the handler did not run again */
  assert_non_null(strstr(r->headers, "Idempotent-Replayed: true\n"));
}

static void test_forwarded_client(void **state) {
  (void)state;
  header("X-Forwarded-For", "198.51.100.1, 198.51.100.2");
  header("X-Forwarded-For", "198.51.100.3");
  send_req("GET", "/open", NULL);
  assert_string_equal(slot.call.req.ip, "203.0.113.9"); /* TRUST_PROXY=0: the peer */
  CFG.trust_proxy = 1;
  send_req("GET", "/open", NULL);
  assert_string_equal(slot.call.req.ip, "198.51.100.3");
  CFG.trust_proxy = 3;
  send_req("GET", "/open", NULL);
  assert_string_equal(slot.call.req.ip, "198.51.100.1");
  conn.peer = NULL, conn.n = 0;
  send_req("GET", "/open", NULL);
  assert_string_equal(slot.call.req.ip, "unknown");
}

static void test_preflight(void **state) {
  (void)state;
  header("Origin", "https://app.example");
  header("Access-Control-Request-Method", "POST");
  result *r = send_req("OPTIONS", "/items", NULL);
  assert_true(r->answered_here);
  assert_int_equal(r->status, 204);
  assert_null(r->body);
  assert_non_null(strstr(r->headers, "Allow: OPTIONS, POST\n"));
  assert_non_null(strstr(r->headers, "Access-Control-Allow-Methods: OPTIONS, POST\n"));
  assert_null(strstr(r->headers, "Content-Type: application/json"));
  r = send_req("OPTIONS", "/nowhere", NULL);
  assert_int_equal(r->status, 404);
  assert_string_equal(error_of(r), "Not found");
}

/* A handler that opens a stream answers with it: the route's status, the stream's type, no
 * body, headers that keep caches and proxies from holding events back; the call holds the
 * stream until a transport takes it, and dropping the call ends it (the owner is told once). */
static void test_stream_answer(void **state) {
  (void)state;
  stream_closed_calls = 0;
  header("Authorization", token_for("u1", "user"));
  result *r = send_req("GET", "/stream", NULL);
  assert_int_equal(r->status, 200);
  assert_null(r->body);
  assert_ptr_equal(slot.call.req.stream, opened_stream);
  assert_non_null(strstr(r->headers, "Content-Type: text/event-stream\n"));
  assert_non_null(strstr(r->headers, "Cache-Control: no-cache\n"));
  assert_non_null(strstr(r->headers, "X-Accel-Buffering: no\n"));
  assert_string_equal(trail, "check_token,before_handler,handler,after(200)");
  assert_int_equal(hs_streams_open(), 1);
  assert_int_equal(hs_stream_backlog(opened_stream), 11);
  release(); /* never sent: the call lets go of it */
  assert_int_equal(stream_closed_calls, 1);
  assert_int_equal(hs_streams_open(), 0);
  /* opened, then failed: the error answers and the owner is told */
  header("Authorization", token_for("u1", "user"));
  r = send_req("GET", "/stream-fails", NULL);
  assert_int_equal(r->status, 409);
  assert_string_equal(error_of(r), "changed my mind");
  assert_null(slot.call.req.stream);
  assert_int_equal(stream_closed_calls, 2);
  assert_null(strstr(r->headers, "text/event-stream"));
  /* without a token the handler never runs */
  no_headers();
  assert_int_equal(send_req("GET", "/stream", NULL)->status, 401);
  assert_int_equal(stream_closed_calls, 2);
}

/* A ROUTE_TICKET route takes a `ticket` parameter instead of the bearer token, once; a bearer
 * token wins when both come; other routes ignore tickets. */
static void test_ticket(void **state) {
  (void)state;
  redeemed = 0;
  result *r = send_req("GET", "/who?ticket=good", NULL);
  assert_int_equal(r->status, 200);
  assert_string_equal(json_string_value(json_object_get(r->body, "id")), "u-ticket");
  assert_int_equal(json_integer_value(json_object_get(r->body, "exp")), 4102444800);
  assert_string_equal(trail, "check_token,before_handler,handler,after(200)");
  r = send_req("GET", "/who?ticket=good", NULL); /* used */
  assert_int_equal(r->status, 401);
  assert_string_equal(error_of(r), "Invalid or expired ticket");
  r = send_req("GET", "/who", NULL);
  assert_int_equal(r->status, 401);
  assert_string_equal(error_of(r), "Unauthorized");
  int before = redeemed;
  header("Authorization", token_for("u2", "user"));
  r = send_req("GET", "/who?ticket=good", NULL);
  assert_int_equal(r->status, 200);
  assert_string_equal(json_string_value(json_object_get(r->body, "id")), "u2");
  assert_int_equal(redeemed, before); /* not looked at */
  no_headers();
  r = send_req("GET", "/stream?ticket=good", NULL);
  assert_int_equal(r->status, 401);
  assert_string_equal(error_of(r), "Unauthorized");
  assert_int_equal(redeemed, before);
}

/* A ROUTE_COOKIE route takes the session cookie instead of the bearer token, again and again,
 * from the service's own origin, none, or a listed one (none here: CORS_ORIGINS is `*`), never
 * from another site; a bearer token decides when one comes; other routes ignore the cookie. */
static void test_session_cookie(void **state) {
  (void)state;
  cookie_redeemed = 0;
  for (int i = 0; i < 2; i++) {
    no_headers();
    header("Cookie", i ? "theme=dark; sess=good-cookie; x=1" : "sess=good-cookie");
    result *r = send_req("GET", "/who", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(json_string_value(json_object_get(r->body, "id")), "u-cookie");
    assert_string_equal(trail, "check_token,before_handler,handler,after(200)");
  }
  header("Origin", "https://api.example"); /* PUBLIC_URL's origin */
  assert_int_equal(send_req("GET", "/who", NULL)->status, 200);
  assert_int_equal(cookie_redeemed, 3);
  static const char *const elsewhere[][2] = {
      {"Origin", "https://elsewhere.example"}, {"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}};
  for (size_t i = 0; i < sizeof elsewhere / sizeof *elsewhere; i++) {
    no_headers();
    header("Cookie", "sess=good-cookie");
    header(elsewhere[i][0], elsewhere[i][1]);
    result *r = send_req("GET", "/who", NULL);
    assert_int_equal(r->status, 401);
    assert_string_equal(error_of(r), "Unauthorized");
  }
  assert_int_equal(cookie_redeemed, 3); /* not looked at */
  no_headers();
  header("Cookie", "sess=stale");
  result *r = send_req("GET", "/who", NULL);
  assert_int_equal(r->status, 401);
  assert_string_equal(error_of(r), "Invalid or expired session");
  assert_non_null(strstr(r->headers, "WWW-Authenticate: Bearer\n"));
  no_headers();
  header("Cookie", "xsess=good-cookie; sess_=good-cookie");
  assert_string_equal(error_of(send_req("GET", "/who", NULL)), "Unauthorized");
  no_headers();
  header("Cookie", "sess=good-cookie");
  header("Authorization", token_for("u2", "user"));
  r = send_req("GET", "/who", NULL);
  assert_string_equal(json_string_value(json_object_get(r->body, "id")), "u2");
  no_headers();
  header("Cookie", "sess=good-cookie");
  r = send_req("GET", "/stream", NULL);
  assert_int_equal(r->status, 401);
  assert_int_equal(cookie_redeemed, 4);
}

UNIT_MAIN(group_setup, group_teardown, cmocka_unit_test_setup(test_open_route, setup),
          cmocka_unit_test_setup(test_not_found, setup), cmocka_unit_test_setup(test_environment_gate, setup),
          cmocka_unit_test_setup(test_unauthorized, setup), cmocka_unit_test_setup(test_forbidden, setup),
          cmocka_unit_test_setup(test_too_large_by_content_length, setup),
          cmocka_unit_test_setup(test_too_large_by_body, setup),
          cmocka_unit_test_setup(test_header_fields_too_large, setup), cmocka_unit_test_setup(test_rate_limit, setup),
          cmocka_unit_test_setup(test_malformed_json, setup), cmocka_unit_test_setup(test_validation, setup),
          cmocka_unit_test_setup(test_multipart_to_json_route, setup),
          cmocka_unit_test_setup(test_handler_and_hooks, setup),
          cmocka_unit_test_setup(test_before_handler_refuses, setup),
          cmocka_unit_test_setup(test_handler_without_answer, setup), cmocka_unit_test_setup(test_error_bodies, setup),
          cmocka_unit_test_setup(test_raw_body, setup), cmocka_unit_test_setup(test_lanes, setup),
          cmocka_unit_test_setup(test_upload_guarded_early, setup),
          cmocka_unit_test_setup(test_idempotent_replay, setup), cmocka_unit_test_setup(test_forwarded_client, setup),
          cmocka_unit_test_setup(test_preflight, setup), cmocka_unit_test_setup(test_stream_answer, setup),
          cmocka_unit_test_setup(test_ticket, setup), cmocka_unit_test_setup(test_session_cookie, setup))
