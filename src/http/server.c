/* libmicrohttpd glue. MHD runs a few event threads (epoll, one per core) and calls on_request
 * several times per request: first with the headers (we match the route, check
 * Content-Length and, for uploads, the token), then with body chunks (copied, or streamed to
 * disk for multipart, up to the route's limit), then once with no data. Then routes flagged
 * ROUTE_INLINE (and 404s) are answered on the event thread, and so are ROUTE_DB_READ routes
 * where reads never wait (SQLite: the thread's own connection); every other request is handed
 * to a worker thread with its connection suspended, and answered when the worker resumes it.
 * A JSON answer written with the writer (hs_ok_jw) is sent from the arena as it is.
 * Answering only after the body keeps the connection alive. on_completed writes the access
 * log line and drops the request's arena. */
#include "http/server.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"
#include "http/compress.h"
#include "http/http.h"
#include "http/idempotency.h"
#include "http/metrics.h"
#include "http/multipart.h"
#include "http/ratelimit.h"
#include "http/router.h"
#include "http/upload.h"
#include "http/watch.h"
#include "ext/storage.h"
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (64 * 1024)
/* libmicrohttpd's per-connection pool (headers, read and write buffers). It clears the pool
 * on every request, so its size is a per-request cost; 16 KiB holds any sane header set. */
#define CONNECTION_MEMORY (16 * 1024)

typedef struct conn_ctx {
  hs_req req;
  char *body;
  size_t body_len, body_cap, max_body;
  bool started; /* on_request has seen the headers (the context exists from the request line on) */
  bool too_large, preflight, authorized, multipart, pp_failed;
  bool claims_read; /* the token was read (claims: its claims, NULL when it is not valid) */
  token_claims *claims;
  bool answered; /* a response was queued */
  bool done;     /* a worker ran the pipeline; the answer waits to be queued */
  bool prepared; /* prepare_answer ran */
  bool out_gzip; /* out is gzip-compressed */
  char *out;     /* the JSON answer's bytes, prepared by the thread that ran the pipeline */
  size_t out_len;
  struct conn_ctx *next_work; /* in a lane's queue, then in the held list */
  int64_t release_at;         /* held: when to answer (clock_mono_ms) */
  struct timespec start;
  hs_watch *watch;       /* the connection's deadlines (http/watch.h) */
  const char *raw_query; /* the request target after '?', still percent-encoded (arena) */
  /* multipart routes */
  hs_multipart *mp;
  hs_form *form;
  /* the request arena's first chunk, so a small request allocates nothing else (kept last:
   * it is not zeroed) */
  _Alignas(max_align_t) unsigned char arena_buf[416]; /* what is left of 1 KiB */
} conn_ctx;

/* glibc serves blocks up to 1032 bytes from a per-thread cache; a larger one consolidates
 * the heap first, which measurably slows every request */
_Static_assert(sizeof(conn_ctx) <= 1024, "conn_ctx should stay within glibc's tcache sizes");

static struct MHD_Daemon *daemon_handle;
static _Atomic int inflight;
static _Atomic int busy_workers; /* lane workers inside a handler */
static char **cors_list; /* NULL-terminated; NULL when "*" */
static bool cors_any;
/* The body and query of routes that declare none: one shared object that nothing modifies,
 * instead of two allocations per request. */
static json_t *empty_object;
static hs_hooks hooks; /* hs_set_hooks */

/* Requests whose handlers may block run on worker threads while their connection is
 * suspended, so MHD's few event threads never wait and keep serving every other connection.
 * There are two lanes. The database lane has as many workers as the pool has connections:
 * its handlers wait only on the database, so a worker never queues for a connection, and
 * requests beyond that wait in this FIFO, not as threads blocked in the pool (measured: 64
 * workers on 16 connections gave PostgreSQL a p99 of 0.4-0.8 s at 64 clients, 16 on 16 gave
 * 15 ms). The slow lane takes uploads and ROUTE_SLOW handlers, which also wait on a password
 * hash, an outbound call or object storage, so a burst of those cannot occupy the database
 * lane's workers. */
typedef struct lane {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  conn_ctx *head, *tail;
  pthread_t *threads;
  int n;
  bool stopping;
} lane;

enum { LANE_DB, LANE_SLOW, LANE_COUNT };
static lane lanes[LANE_COUNT] = {
    {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER},
    {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER},
};

/* Answers held back (hs_req.delay_ms) wait here, not on a worker: a refused login's 503 is
 * held 200 ms, and a flood of them would otherwise keep every slow-lane worker asleep while
 * payments and uploads queued behind them. One timer thread resumes each connection at its
 * deadline; the list is kept in deadline order. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC, like clock_mono_ms */
  conn_ctx *head, *tail;
  pthread_t thread;
  bool running, stopping;
} held = {.mu = PTHREAD_MUTEX_INITIALIZER};
static void hold_answer(conn_ctx *ctx);

/* ---- small helpers ---- */

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

const char *hs_header(const hs_req *req, const char *name) {
  return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *hs_param(const hs_req *req, const char *name) {
  for (int i = 0; i < req->nparams; i++)
    if (!strcmp(req->param_names[i], name)) return req->param_values[i];
  return NULL;
}

err_t hs_reply(hs_req *req, int status, json_t *body) {
  req->status = status;
  req->res_json = NULL;
  req->res_body = arena_json(&req->arena, body);
  return ERR_OK;
}

jw *hs_jw(hs_req *req, size_t hint) {
  jw *w = arena_alloc(&req->arena, sizeof *w);
  jw_init(w, &req->arena, hint);
  return w;
}

err_t hs_reply_jw(hs_req *req, int status, const jw *w) {
  req->status = status;
  req->res_body = NULL;
  req->res_json = jw_text(w), req->res_json_len = jw_len(w);
  return ERR_OK;
}

err_t hs_ok_jw(hs_req *req, const jw *w) {
  return hs_reply_jw(req, req->route && req->route->ok ? req->route->ok : 200, w);
}

err_t hs_reply_file(hs_req *req, int fd, char *data, size_t size, const char *content_type) {
  req->status = 200;
  req->res_fd = fd, req->res_data = data, req->res_size = size;
  req->res_content_type = content_type;
  return ERR_OK;
}

err_t hs_ok(hs_req *req, json_t *body) { return hs_reply(req, req->route && req->route->ok ? req->route->ok : 200, body); }

err_t hs_fail_code(hs_req *req, err_t err, const char *code, const char *message) {
  req->err = err;
  req->err_code = code;
  req->err_message = message ? arena_strdup(&req->arena, message) : NULL;
  return err;
}

err_t hs_fail(hs_req *req, err_t err, const char *message) { return hs_fail_code(req, err, NULL, message); }

const char *hs_body_str(const hs_req *req, const char *field) {
  return json_string_value(json_object_get(req->body, field));
}

bool hs_body_has(const hs_req *req, const char *field) { return json_object_get(req->body, field) != NULL; }

hs_upload **hs_files(hs_req *req, const char *field, int *count) {
  hs_upload **out = arena_alloc(&req->arena, sizeof *out * (size_t)(req->nuploads + 1));
  *count = 0;
  for (int i = 0; i < req->nuploads; i++)
    if (!strcmp(req->uploads[i].field, field)) out[(*count)++] = &req->uploads[i];
  return out;
}

/* Every X-Forwarded-For line, in arrival order: repeated lines are one comma-separated list
 * (RFC 9110, 5.3), and a proxy may add its own line after the one the client wrote. */
typedef struct forwarded {
  const char *lines[16];
  int n;
} forwarded;

static enum MHD_Result collect_forwarded(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  forwarded *f = cls;
  if (!key || !value || strcasecmp(key, "X-Forwarded-For")) return MHD_YES;
  if (f->n == (int)ARRAY_LEN(f->lines)) memmove(f->lines, f->lines + 1, sizeof f->lines - sizeof *f->lines), f->n--;
  f->lines[f->n++] = value; /* only the last lines matter: the client's own come first */
  return MHD_YES;
}

/* Parses one list entry ("203.0.113.7", "2001:db8::1", "[2001:db8::1]:443", "203.0.113.7:80")
 * into its canonical text; false when it is not an address. */
static bool forwarded_address(const char *s, size_t n, char out[INET6_ADDRSTRLEN]) {
  char buf[INET6_ADDRSTRLEN + 8];
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n), buf[n] = 0;
  char *a = buf, *colon = strchr(buf, ':');
  if (*a == '[') { /* [v6]:port */
    char *end = strchr(a, ']');
    if (!end) return false;
    *end = 0, a++;
  } else if (colon && !strchr(colon + 1, ':')) { /* v4:port */
    *colon = 0;
  }
  struct in6_addr v6;
  struct in_addr v4;
  if (inet_pton(AF_INET, a, &v4) == 1) return inet_ntop(AF_INET, &v4, out, INET6_ADDRSTRLEN) != NULL;
  if (inet_pton(AF_INET6, a, &v6) == 1) return inet_ntop(AF_INET6, &v6, out, INET6_ADDRSTRLEN) != NULL;
  return false;
}

/* With TRUST_PROXY=N, the Nth address from the right of X-Forwarded-For: each trusted proxy
 * appends the address it saw, so the entries further left are whatever the client wrote and
 * are never read. A shorter list (the request passed fewer proxies) gives its leftmost entry,
 * which a trusted proxy wrote. False when there is no usable entry. */
static bool forwarded_client(hs_req *req, char out[INET6_ADDRSTRLEN]) {
  forwarded f = {.n = 0};
  MHD_get_connection_values(req->conn, MHD_HEADER_KIND, collect_forwarded, &f);
  const char *pick = NULL;
  size_t pick_len = 0;
  int seen = 0;
  for (int line = f.n - 1; line >= 0 && seen < CFG.trust_proxy; line--) {
    const char *v = f.lines[line], *end = v + strlen(v);
    while (end > v && seen < CFG.trust_proxy) {
      const char *start = end;
      while (start > v && start[-1] != ',') start--;
      const char *a = start, *b = end;
      while (a < b && (*a == ' ' || *a == '\t')) a++;
      while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
      if (b > a) pick = a, pick_len = (size_t)(b - a), seen++;
      end = start > v ? start - 1 : v;
    }
  }
  return pick && forwarded_address(pick, pick_len, out);
}

static const char *client_ip(hs_req *req) {
  char buf[INET6_ADDRSTRLEN] = "unknown";
  if (CFG.trust_proxy > 0 && forwarded_client(req, buf)) return arena_strdup(&req->arena, buf);
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info && info->client_addr) {
    const struct sockaddr *sa = info->client_addr;
    if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
      inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof buf);
  }
  return arena_strdup(&req->arena, buf);
}

/* ---- multipart uploads (http/multipart.c parses, http/upload.c keeps the parts) ---- */

static void on_form_part(void *cls, const char *key, const char *filename, const char *data, uint64_t off, size_t size) {
  hs_form_data(cls, key, filename, data, off, size);
}

/* After the body: the parts' problems, the files and the text fields. */
static err_t finish_upload(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  if (!ctx->multipart) return hs_fail(req, ERR_BAD_REQUEST, "body: must be multipart/form-data");
  err_t e = hs_form_finish(ctx->form);
  if (e == ERR_OK && !req->body) req->body = empty_object;
  return e;
}

/* ---- the pipeline ---- */

static unsigned role_bit(const token_claims *c) {
  static const struct {
    const char *name;
    bool staff;
    unsigned bit;
  } roles[] = {
      {"user", false, ROLE_USER},
      {"provider", false, ROLE_PROVIDER},
      {"admin", false, ROLE_ADMIN},
      {"customer_support", true, ROLE_CUSTOMER_SUPPORT},
      {"professional_support", true, ROLE_PROFESSIONAL_SUPPORT},
      {"technical_support", true, ROLE_TECHNICAL_SUPPORT},
      {"internal_audit", true, ROLE_INTERNAL_AUDIT},
  };
  for (size_t i = 0; i < ARRAY_LEN(roles); i++)
    if (roles[i].staff == c->is_staff && !strcmp(roles[i].name, c->role)) return roles[i].bit;
  return 0;
}

/* The request's token claims, verified once (NULL: no valid bearer token). */
static const token_claims *claims_of(conn_ctx *ctx) {
  if (ctx->claims_read) return ctx->claims;
  ctx->claims_read = true;
  const char *h = hs_header(&ctx->req, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7)) return NULL;
  h += 7;
  while (*h == ' ') h++;
  token_claims *c = arena_alloc(&ctx->req.arena, sizeof *c);
  return ctx->claims = token_verify(h, c) ? c : NULL;
}

/* 401 without a valid token, 403 when its role is not one the route admits. The check_token
 * hook may use the database, so it runs only where the request is answered: an upload's early
 * guard on the event thread (with_hook false) leaves it to dispatch. */
static err_t guard(conn_ctx *ctx, bool with_hook) {
  hs_req *req = &ctx->req;
  const token_claims *c = claims_of(ctx);
  if (!c) return hs_fail(req, ERR_UNAUTHORIZED, NULL);
  unsigned bit = role_bit(c);
  if (!bit) return hs_fail(req, ERR_FORBIDDEN, NULL);
  req->auth = (hs_auth){c->id, c->role, bit, c->elevation_id[0] ? c->elevation_id : NULL, c->gen};
  err_t e = with_hook && hooks.check_token ? hooks.check_token(req) : ERR_OK;
  if (e != ERR_OK) return req->err != ERR_OK ? req->err : hs_fail(req, e, NULL);
  if (!(bit & req->route->roles)) return hs_fail(req, ERR_FORBIDDEN, NULL);
  return ERR_OK;
}

/* An open route takes no token, yet a request made with a valid impersonation token is still
 * that impersonation's: the check_token hook sees it as on any route, so the other hooks
 * record it. A token that is not a live impersonation is ignored here, as open routes ignore
 * tokens; a check that could not be made (the database) fails the request. */
static err_t observe_impersonation(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  const token_claims *c = claims_of(ctx);
  if (!c || !c->elevation_id[0] || !hooks.check_token) return ERR_OK;
  req->auth = (hs_auth){c->id, c->role, role_bit(c), c->elevation_id, c->gen};
  err_t e = hooks.check_token(req);
  if (e == ERR_OK && req->err == ERR_OK) return ERR_OK;
  if (e == ERR_UNAUTHORIZED || req->err == ERR_UNAUTHORIZED) {
    req->err = ERR_OK, req->err_message = req->err_code = NULL;
    req->auth = (hs_auth){0};
    return ERR_OK;
  }
  return req->err != ERR_OK ? req->err : hs_fail(req, e, NULL);
}

void hs_set_hooks(const hs_hooks *h) { hooks = *h; }

int hs_status(const hs_req *req) { return req->err != ERR_OK ? err_status(req->err) : req->status; }

static bool only_space(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i])) return false;
  return true;
}

static err_t parse_body(hs_req *req) {
  const hs_route *r = req->route;
  json_t *input = NULL;
  if (req->raw_len > 0 && !only_space(req->raw_body, req->raw_len)) {
    input = arena_json(&req->arena, json_loadb(req->raw_body, req->raw_len, JSON_ALLOW_NUL, NULL));
    if (!input) return hs_fail(req, ERR_BAD_REQUEST, "body: malformed JSON");
    if (!json_is_object(input)) return hs_fail(req, ERR_BAD_REQUEST, "body: must be a JSON object");
  }
  if (!r->body) {
    req->body = empty_object;
    return ERR_OK;
  }
  char err[256];
  req->body = arena_json(&req->arena, hs_validate(r->body, input, false, err));
  return req->body ? ERR_OK : hs_fail(req, ERR_BAD_REQUEST, err);
}

static err_t parse_query(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  if (!req->route->query) {
    req->query = empty_object;
    return ERR_OK;
  }
  json_t *args = arena_json(&req->arena, json_object());
  hs_query_parse(ctx->raw_query, args);
  char err[256];
  req->query = arena_json(&req->arena, hs_validate(req->route->query, args, true, err));
  return req->query ? ERR_OK : hs_fail(req, ERR_BAD_REQUEST, err);
}

/* The answer to a request that arrives or still waits for a worker after the grace period. */
static void refuse_unavailable(hs_req *req) {
  req->retry_after = 1;
  hs_fail(req, ERR_UNAVAILABLE, "Service unavailable");
}

static void run_pipeline(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  const hs_route *r = req->route;
  if (!r) { /* rows that do not exist in this environment are never matched (router.c) */
    req->route = NULL;
    hs_fail(req, ERR_NOT_FOUND, NULL);
    return;
  }
  if (ctx->too_large) {
    hs_fail(req, ERR_TOO_LARGE, NULL);
    return;
  }
  req->raw_body = ctx->body ? ctx->body : "";
  req->raw_len = ctx->body_len;
  if (r->roles) {
    err_t e = ctx->authorized ? (hooks.check_token ? hooks.check_token(req) : ERR_OK) : guard(ctx, true);
    if (e != ERR_OK && req->err == ERR_OK) hs_fail(req, e, NULL);
    if (req->err != ERR_OK) return;
  } else if (observe_impersonation(ctx) != ERR_OK) {
    return;
  }
  if (r->limit) {
    int retry = 0;
    const char *client = r->limit->per_account && req->auth.id
                             ? arena_printf(&req->arena, "%s:%s", req->auth.role, req->auth.id)
                             : req->ip;
    err_t e = hs_rate_limit_hit(r->limit, client, &retry);
    if (e != ERR_OK) {
      req->retry_after = retry;
      hs_fail(req, e, NULL);
      return;
    }
  }
  if (r->upload) {
    if (finish_upload(ctx) != ERR_OK) return;
  } else if (!(r->flags & ROUTE_RAW_BODY) && parse_body(req) != ERR_OK) {
    return;
  }
  if (parse_query(ctx) != ERR_OK) return;
  if (!hs_idem_begin(req)) return;
  if (hooks.before_handler && hooks.before_handler(req) != ERR_OK) {
    if (req->err == ERR_OK) hs_fail(req, ERR_INTERNAL, NULL);
    return;
  }
  err_t e = r->handler(req);
  if (e != ERR_OK && req->err == ERR_OK) hs_fail(req, e, NULL);
  if (e == ERR_OK && req->err == ERR_OK && !req->status) hs_ok(req, json_object());
}

static json_t *error_body(hs_req *req);

/* Forgets the answer decided so far, and the bytes prepare_answer made of it. */
static void answer_clear(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  if (req->res_fd >= 0) close(req->res_fd), req->res_fd = -1;
  free(req->res_data), req->res_data = NULL, req->res_content_type = NULL;
  req->status = 0, req->res_body = NULL, req->res_json = NULL, req->err = ERR_OK;
  req->err_message = req->err_code = NULL, req->retry_after = 0;
  free(ctx->out), ctx->out = NULL;
  ctx->out_len = 0, ctx->out_gzip = ctx->prepared = false;
}

/* Turns an error into the status and body that answer it (once). */
static void settle(hs_req *req) {
  if (req->err == ERR_OK) return;
  req->status = err_status(req->err);
  req->res_body = arena_json(&req->arena, error_body(req));
  req->res_json = NULL;
  req->res_content_type = NULL; /* a file answer begun before the failure is dropped */
  req->err = ERR_OK;
}

/* Makes the JSON answer's bytes once (and compresses them when the client takes gzip), so the
 * event thread that sends it only hands bytes over. Text the JSON writer made stays in the
 * arena (ctx->out NULL) unless it is compressed. */
static void prepare_answer(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  settle(req);
  if (req->res_content_type || ctx->prepared) return;
  ctx->prepared = true;
  const char *text;
  if (req->res_json) {
    text = req->res_json, ctx->out_len = req->res_json_len;
  } else {
    ctx->out = req->res_body ? json_dumps(req->res_body, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
    text = ctx->out, ctx->out_len = ctx->out ? strlen(ctx->out) : 0;
  }
  hs_idem_end(req, req->status, text);
  if (ctx->out_len >= HS_GZIP_MIN && hs_accepts_gzip(hs_header(req, "Accept-Encoding"))) {
    size_t n;
    char *gz = hs_gzip(text, ctx->out_len, &n);
    if (gz) free(ctx->out), ctx->out = gz, ctx->out_len = n, ctx->out_gzip = true;
  }
}

/* The pipeline, and two rules over it. A file that could not be stored makes the request's
 * 500 a 503 `File storage unavailable` (with Retry-After) or 507 `Insufficient storage`. A
 * request during which the database was unavailable answers 503 `Service unavailable` with
 * Retry-After, whatever its handler made of the failure (a 500, or a 200 that would claim
 * something was done). */
static void dispatch(conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  db_unavailable_clear();
  storage_failure_clear();
  run_pipeline(ctx);
  err_t stored = storage_failure();
  if (stored != ERR_OK && !db_unavailable_seen() && (req->err == ERR_INTERNAL || req->err == stored)) {
    req->err = ERR_OK;
    hs_fail(req, stored, stored == ERR_INSUFFICIENT_STORAGE ? "Insufficient storage" : "File storage unavailable");
    if (stored == ERR_UNAVAILABLE) req->retry_after = 5;
  }
  if (db_unavailable_seen()) {
    answer_clear(ctx);
    hs_fail(req, ERR_UNAVAILABLE, "Service unavailable");
    req->retry_after = 1;
  }
  if (req->route && req->auth.id && hooks.after) hooks.after(req); /* sees the final answer */
  prepare_answer(ctx);
}

/* ---- writing the answer ---- */

static const char *cors_origin_for(hs_req *req) {
  const char *origin = hs_header(req, "Origin");
  if (!origin) return NULL;
  if (cors_any || (req->route && (req->route->flags & ROUTE_CORS_ANY))) return "*";
  for (char **o = cors_list; o && *o; o++)
    if (!strcmp(*o, origin)) return origin;
  return NULL;
}

static void add_common_headers(struct MHD_Response *resp, hs_req *req, bool vary_encoding) {
  MHD_add_response_header(resp, "X-Request-Id", req->request_id);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  /* a signed file URL may be cached by the client until well before it expires */
  MHD_add_response_header(resp, "Cache-Control", !req->res_content_type || req->err != ERR_OK ? "no-store"
                                                 : req->res_cache_control                 ? req->res_cache_control
                                                                                          : "private, max-age=300");
  const char *origin = cors_origin_for(req);
  if (origin) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", "X-Request-Id, Retry-After, Idempotent-Replayed");
  }
  /* the answer depends on Origin only where some origin is allowed, and on Accept-Encoding
   * where it may be compressed */
  bool vary_origin = !cors_any && ((cors_list && cors_list[0]) || (req->route && (req->route->flags & ROUTE_CORS_ANY)));
  if (vary_origin || vary_encoding)
    MHD_add_response_header(resp, "Vary", vary_origin && vary_encoding ? "Origin, Accept-Encoding"
                                          : vary_origin               ? "Origin"
                                                                      : "Accept-Encoding");
  if (req->replayed) MHD_add_response_header(resp, "Idempotent-Replayed", "true");
  if (req->retry_after > 0) {
    char n[16];
    snprintf(n, sizeof n, "%d", req->retry_after);
    MHD_add_response_header(resp, "Retry-After", n);
  }
}

static json_t *error_body(hs_req *req) {
  int status = err_status(req->err);
  if (status >= 500 && status != 503 && status != 504 && status != 507)
    return json_pack("{s:s,s:s}", "error", "Internal server error", "requestId", req->request_id);
  json_t *b = json_pack("{s:s}", "error", req->err_message ? req->err_message : err_default_message(req->err));
  if (req->err_code) json_object_set_new(b, "code", json_string(req->err_code));
  return b;
}

static enum MHD_Result send_file(struct MHD_Connection *conn, hs_req *req) {
  struct MHD_Response *resp;
  if (req->res_fd >= 0) {
    resp = MHD_create_response_from_fd(req->res_size, req->res_fd);
    req->res_fd = -1; /* MHD closes it */
  } else {
    resp = MHD_create_response_from_buffer_with_free_callback(req->res_size, req->res_data, free);
    req->res_data = NULL;
  }
  MHD_add_response_header(resp, "Content-Type", req->res_content_type);
  add_common_headers(resp, req, false);
  enum MHD_Result ret = MHD_queue_response(conn, (unsigned)req->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result send_answer(struct MHD_Connection *conn, conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  ctx->answered = true;
  prepare_answer(ctx); /* answers that did not go through dispatch (413 before the body, 404 preflights) */
  if (req->res_content_type) return send_file(conn, req);
  struct MHD_Response *resp;
  if (!ctx->out && req->res_json) /* arena text outlives the response: the arena is dropped in on_completed */
    resp = MHD_create_response_from_buffer(ctx->out_len, (void *)req->res_json, MHD_RESPMEM_PERSISTENT);
  else
    resp = MHD_create_response_from_buffer_with_free_callback(ctx->out_len, ctx->out ? ctx->out : xstrdup(""), free);
  bool compressible = ctx->out_gzip || ctx->out_len >= HS_GZIP_MIN;
  ctx->out = NULL; /* MHD frees it */
  if (req->res_body || req->res_json) MHD_add_response_header(resp, "Content-Type", "application/json; charset=utf-8");
  if (ctx->out_gzip) MHD_add_response_header(resp, "Content-Encoding", "gzip");
  add_common_headers(resp, req, compressible);
  enum MHD_Result ret = MHD_queue_response(conn, (unsigned)req->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result send_preflight(struct MHD_Connection *conn, conn_ctx *ctx) {
  hs_req *req = &ctx->req;
  ctx->answered = true;
  int methods = hs_router_methods(req->path);
  if (!methods) {
    hs_fail(req, ERR_NOT_FOUND, NULL);
    return send_answer(conn, ctx);
  }
  char allow[64] = "OPTIONS";
  for (int bit = HS_GET; bit <= HS_DELETE; bit <<= 1)
    if (methods & bit) strcat(allow, ", "), strcat(allow, hs_method_name(bit));
  req->status = 204;
  struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(0, xstrdup(""), free);
  add_common_headers(resp, req, false);
  MHD_add_response_header(resp, "Allow", allow);
  if (hs_header(req, "Origin") && (cors_any || req->route)) {
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id, Idempotency-Key");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
  }
  enum MHD_Result ret = MHD_queue_response(conn, 204, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* ---- MHD callbacks ---- */

/* MHD calls this with the request target as the client sent it, before it decodes it: the
 * context starts here, so the raw query string reaches hs_query_parse(). MHD then reports the
 * request to on_completed even when the headers never arrive. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls;
  conn_ctx *ctx = xmalloc(sizeof *ctx);
  memset(ctx, 0, offsetof(conn_ctx, arena_buf));
  hs_req *req = &ctx->req;
  arena_init_buf(&req->arena, ctx->arena_buf, sizeof ctx->arena_buf);
  req->conn = conn;
  req->res_fd = -1;
  const char *q = uri ? strchr(uri, '?') : NULL;
  if (q) ctx->raw_query = arena_strdup(&req->arena, q + 1);
  return ctx;
}

/* The first call of a request: its headers are in. */
static void ctx_start(conn_ctx *ctx, struct MHD_Connection *conn, const char *url, const char *method) {
  hs_req *req = &ctx->req;
  ctx->started = true;
  req->method = arena_strdup(&req->arena, method);
  req->path = arena_strdup(&req->arena, url);
  req->ip = client_ip(req);
  clock_gettime(CLOCK_MONOTONIC, &ctx->start);
  const char *incoming = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
  if (acceptable_request_id(incoming)) snprintf(req->request_id, sizeof req->request_id, "%s", incoming);
  else request_id_new(req->request_id);
  int bit = hs_method_bit(method);
  ctx->preflight = !strcmp(method, "OPTIONS");
  if (bit) req->route = hs_router_match(bit, url, req);
  if (!strcmp(method, "HEAD")) { /* health checkers use it; only side-effect-free GETs answer */
    req->route = hs_router_match(HS_GET, url, req);
    if (req->route && !(req->route->flags & ROUTE_INLINE)) req->route = NULL;
  }
  if (ctx->preflight) {
    /* a preflight names the route it asks about, for per-route CORS rules */
    const char *asked = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    if (asked && hs_method_bit(asked)) req->route = hs_router_match(hs_method_bit(asked), url, req);
  }
  ctx->max_body = req->route && req->route->max_body ? req->route->max_body
                  : req->route && req->route->upload ? hs_form_body_limit(req->route->upload)
                                                     : DEFAULT_MAX_BODY;
  if (req->route && req->route->upload && !ctx->preflight) {
    ctx->form = hs_form_new(req);
    ctx->mp = hs_multipart_new(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"), on_form_part,
                               ctx->form);
    ctx->multipart = ctx->mp != NULL; /* NULL: the body is not multipart/form-data */
  }
  atomic_fetch_add(&inflight, 1);
}

static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4; /* "key: value\r\n" */
  return MHD_YES;
}

/* The size of the request's header fields, as sent. */
static size_t header_bytes(struct MHD_Connection *conn) {
  size_t n = 0;
  MHD_get_connection_values(conn, MHD_HEADER_KIND, add_header_bytes, &n);
  return n;
}

/* Every connection is watched from accept to close (http/watch.h). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  (void)cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? hs_watch_add(ci->connect_fd) : NULL;
  } else if (*socket_context) {
    hs_watch_remove(*socket_context);
    *socket_context = NULL;
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)cls, (void)version;
  conn_ctx *ctx = *con_cls;
  if (!ctx->started) {
    ctx_start(ctx, conn, url, method);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    ctx->watch = ci ? ci->socket_context : NULL;
    if (ctx->watch) hs_watch_body(ctx->watch);
    if (header_bytes(conn) > (size_t)CFG.http_max_header_bytes) {
      hs_fail(&ctx->req, ERR_HEADERS_TOO_LARGE, NULL);
      return send_answer(conn, ctx);
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > ctx->max_body) {
      /* refuse before reading the body; MHD closes the connection after this answer */
      ctx->too_large = true;
      hs_fail(&ctx->req, ERR_TOO_LARGE, NULL);
      return send_answer(conn, ctx);
    }
    /* check the token before accepting any file onto disk */
    const hs_route *r = ctx->req.route;
    if (r && r->upload && r->roles && !ctx->preflight) {
      if (guard(ctx, false) != ERR_OK) return send_answer(conn, ctx);
      ctx->authorized = true;
    }
    return MHD_YES;
  }
  if (*upload_size && ctx->watch) hs_watch_body_bytes(ctx->watch, *upload_size);
  if (*upload_size && ctx->req.route && ctx->req.route->upload) {
    ctx->body_len += *upload_size; /* counted, not kept: the parts go to disk */
    if (ctx->body_len > ctx->max_body) ctx->too_large = true;
    else if (ctx->mp && !ctx->pp_failed && !hs_multipart_feed(ctx->mp, upload, *upload_size))
      ctx->pp_failed = true, hs_form_malformed(ctx->form); /* the parser stops at its first error */
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    if (!ctx->too_large) {
      if (ctx->body_len + *upload_size > ctx->max_body) {
        ctx->too_large = true; /* keep reading to keep the connection in step, discard */
      } else {
        if (ctx->body_len + *upload_size + 1 > ctx->body_cap) {
          ctx->body_cap = (ctx->body_len + *upload_size + 1) * 2;
          if (ctx->body_cap > ctx->max_body + 1) ctx->body_cap = ctx->max_body + 1;
          ctx->body = xrealloc(ctx->body, ctx->body_cap);
        }
        memcpy(ctx->body + ctx->body_len, upload, *upload_size);
        ctx->body_len += *upload_size;
        ctx->body[ctx->body_len] = 0;
      }
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (ctx->answered) return MHD_YES;
  if (ctx->done) return send_answer(conn, ctx); /* resumed after a worker ran the pipeline */
  if (ctx->watch) hs_watch_busy(ctx->watch);
  if (ctx->mp) { /* refuses a body that ended before its closing boundary */
    if (!hs_multipart_finish(ctx->mp)) hs_form_malformed(ctx->form);
    hs_multipart_free(ctx->mp);
    ctx->mp = NULL;
  }
  if (ctx->preflight) return send_preflight(conn, ctx);
  const hs_route *r = ctx->req.route;
  /* the hooks write the records of an impersonated request, whatever the route: a worker's work */
  const token_claims *claims = r && (r->flags & (ROUTE_DB_READ | ROUTE_INLINE)) ? claims_of(ctx) : NULL;
  bool impersonated = claims && claims->elevation_id[0];
  bool read_here = r && (r->flags & ROUTE_DB_READ) && db_reads_inline() && !impersonated;
  if (!r || ((r->flags & ROUTE_INLINE) && !impersonated) || read_here || ctx->too_large) { /* answer here */
    if (read_here) db_use_pool(DB_POOL_EVENT);
    dispatch(ctx);
    if (!read_here || ctx->too_large || !db_unavailable_seen()) return send_answer(conn, ctx);
    answer_clear(ctx); /* the file is locked: a worker's connection waits for it */
  }
  lane *l = &lanes[(r->flags & ROUTE_SLOW) || r->upload ? LANE_SLOW : LANE_DB];
  pthread_mutex_lock(&l->mu);
  if (l->stopping) { /* past the grace period of a shutdown, on a connection still open */
    pthread_mutex_unlock(&l->mu);
    refuse_unavailable(&ctx->req);
    return send_answer(conn, ctx);
  }
  MHD_suspend_connection(conn);
  if (l->tail) l->tail->next_work = ctx;
  else l->head = ctx;
  l->tail = ctx;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)conn;
  conn_ctx *ctx = *con_cls;
  if (!ctx) return;
  hs_req *req = &ctx->req;
  if (!ctx->started) { /* the connection ended before the request's headers */
    arena_fini(&req->arena);
    free(ctx);
    *con_cls = NULL;
    return;
  }
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  double ms = (double)(end.tv_sec - ctx->start.tv_sec) * 1e3 + (double)(end.tv_nsec - ctx->start.tv_nsec) / 1e6;
  /* hit counts serve only GET /__test/routes; elsewhere they would be shared cache lines */
  if (CFG.env == ENV_TEST && req->route && req->status && !ctx->preflight) hs_router_count(req->route, req->status);
  if (req->status) hs_metrics_observe(req->route, req->method, req->status, ms / 1e3);
  log_access(req->request_id, req->method, req->route ? req->route->path : req->path, req->status, ms, req->ip,
             toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
  hs_multipart_free(ctx->mp);
  if (ctx->watch) hs_watch_waiting(ctx->watch);
  if (req->res_fd >= 0) close(req->res_fd); /* a file answer that was never sent */
  free(req->res_data);
  free(ctx->out); /* an answer that was never sent */
  arena_fini(&req->arena);
  free(ctx->body);
  free(ctx);
  *con_cls = NULL;
  atomic_fetch_sub(&inflight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n') buf[--n] = 0;
  log_json(LOG_WARN, buf, NULL);
}

static void parse_cors(void) {
  cors_any = !strcmp(CFG.cors_origins, "*");
  if (cors_any) return;
  char *copy = xstrdup(CFG.cors_origins), *save = NULL;
  size_t n = 0;
  cors_list = xcalloc(1, sizeof *cors_list);
  for (char *p = strtok_r(copy, ", ", &save); p; p = strtok_r(NULL, ", ", &save)) {
    cors_list = xrealloc(cors_list, (n + 2) * sizeof *cors_list);
    cors_list[n++] = xstrdup(p);
    cors_list[n] = NULL;
  }
  free(copy);
}

static void *worker_main(void *arg) {
  lane *l = arg;
  if (l == &lanes[LANE_SLOW]) db_use_pool(DB_POOL_SLOW); /* its own connections: see db.c */
  for (;;) {
    pthread_mutex_lock(&l->mu);
    while (!l->head && !l->stopping) pthread_cond_wait(&l->cv, &l->mu);
    conn_ctx *ctx = l->head;
    if (!ctx) {
      pthread_mutex_unlock(&l->mu);
      return NULL;
    }
    l->head = ctx->next_work;
    if (!l->head) l->tail = NULL;
    atomic_fetch_add(&busy_workers, 1);
    pthread_mutex_unlock(&l->mu);
    dispatch(ctx);
    ctx->done = true;
    if (ctx->req.delay_ms > 0) hold_answer(ctx);
    else MHD_resume_connection(ctx->req.conn);
    atomic_fetch_sub(&busy_workers, 1);
  }
}

/* Queues ctx (answered, suspended) to be resumed delay_ms from now; at once when the timer
 * is not running. */
static void hold_answer(conn_ctx *ctx) {
  pthread_mutex_lock(&held.mu);
  if (!held.running || held.stopping) {
    pthread_mutex_unlock(&held.mu);
    MHD_resume_connection(ctx->req.conn);
    return;
  }
  ctx->release_at = clock_mono_ms() + ctx->req.delay_ms;
  ctx->next_work = NULL;
  if (!held.head || held.tail->release_at <= ctx->release_at) { /* the usual case: append */
    if (held.tail) held.tail->next_work = ctx;
    else held.head = ctx;
    held.tail = ctx;
  } else {
    conn_ctx **p = &held.head;
    while ((*p)->release_at <= ctx->release_at) p = &(*p)->next_work;
    ctx->next_work = *p;
    *p = ctx;
  }
  pthread_cond_signal(&held.cv);
  pthread_mutex_unlock(&held.mu);
}

static void *held_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&held.mu);
  for (;;) {
    while (!held.head && !held.stopping) pthread_cond_wait(&held.cv, &held.mu);
    conn_ctx *ctx = held.head;
    if (!ctx) break; /* stopping, nothing left */
    int64_t wait_ms = ctx->release_at - clock_mono_ms();
    if (wait_ms > 0 && !held.stopping) { /* stopping: everything is answered at once */
      clock_cond_wait_ms(&held.cv, &held.mu, wait_ms);
      continue; /* an earlier deadline may have arrived meanwhile */
    }
    held.head = ctx->next_work;
    if (!held.head) held.tail = NULL;
    pthread_mutex_unlock(&held.mu);
    MHD_resume_connection(ctx->req.conn);
    pthread_mutex_lock(&held.mu);
  }
  pthread_mutex_unlock(&held.mu);
  return NULL;
}

static void held_start(void) {
  clock_cond_init(&held.cv);
  held.stopping = false;
  held.running = true;
  pthread_create(&held.thread, NULL, held_main, NULL);
}

/* Answers whatever is still held, then ends the timer thread. */
static void held_stop(void) {
  pthread_mutex_lock(&held.mu);
  held.stopping = true;
  pthread_cond_signal(&held.cv);
  pthread_mutex_unlock(&held.mu);
  pthread_join(held.thread, NULL);
  held.running = false;
  pthread_cond_destroy(&held.cv);
}

static void lane_start(lane *l, int n) {
  l->stopping = false;
  l->threads = xcalloc((size_t)n, sizeof *l->threads);
  l->n = n;
  for (int i = 0; i < n; i++) pthread_create(&l->threads[i], NULL, worker_main, l);
}

/* Ends the lane's workers once idle: no new work is taken, what waits is answered 503 and
 * resumed at once. Returns before the workers have ended (lane_join). */
static void lane_cancel(lane *l) {
  pthread_mutex_lock(&l->mu);
  l->stopping = true;
  conn_ctx *waiting = l->head;
  l->head = l->tail = NULL;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  while (waiting) {
    conn_ctx *next = waiting->next_work;
    refuse_unavailable(&waiting->req);
    waiting->done = true;
    MHD_resume_connection(waiting->req.conn);
    waiting = next;
  }
}

static void lane_join(lane *l) {
  for (int i = 0; i < l->n; i++) pthread_join(l->threads[i], NULL);
  free(l->threads);
  l->threads = NULL, l->n = 0;
}

bool hs_server_start(const char *bind, int port, char err[256]) {
  parse_cors();
  if (!empty_object) empty_object = json_object();
  struct sockaddr_storage ss = {0};
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (strchr(bind, ':')) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, bind, &a6->sin6_addr) != 1) return snprintf(err, 256, "BIND %s is not an address", bind), false;
    flags |= MHD_USE_IPv6;
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, bind, &a4->sin_addr) != 1) return snprintf(err, 256, "BIND %s is not an address", bind), false;
  }
  daemon_handle = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                   MHD_OPTION_SOCK_ADDR, &ss,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
                                   on_connection, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CFG.http_idle_timeout,
                                   MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)CFG.http_max_connections_per_ip,
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY, MHD_OPTION_CONNECTION_LIMIT, (unsigned)4096,
                                   MHD_OPTION_THREAD_POOL_SIZE, (unsigned)CFG.http_threads,
                                   MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024), MHD_OPTION_LISTEN_BACKLOG_SIZE,
                                   (unsigned)1024, MHD_OPTION_END);
  if (!daemon_handle) return snprintf(err, 256, "cannot listen on %s:%d", bind, port), false;
  hs_watch_start(CFG.http_header_timeout * 1000, CFG.http_body_min_rate);
  held_start();
  lane_start(&lanes[LANE_DB], CFG.http_workers);
  lane_start(&lanes[LANE_SLOW], CFG.http_slow_workers);
  return true;
}

void hs_server_load(int *in_flight, int *handlers_running) {
  *in_flight = atomic_load(&inflight);
  *handlers_running = atomic_load(&busy_workers);
}

int hs_server_port(void) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_handle, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

/* Waits until cond() holds or the deadline (clock_mono_ms) passes; true when it holds. */
static bool wait_until(bool (*cond)(void), int64_t deadline) {
  while (!cond()) {
    if (clock_mono_ms() >= deadline) return false;
    usleep(10000);
  }
  return true;
}

static bool nothing_in_flight(void) { return atomic_load(&inflight) == 0; }
static bool only_handlers_left(void) { return atomic_load(&inflight) <= atomic_load(&busy_workers); }
static bool no_handler_running(void) { return atomic_load(&busy_workers) == 0; }

/* The order matters: stop accepting, let what is in flight finish within the grace period,
 * then answer 503 to whatever still waits for a worker (and to new requests on open
 * connections), give those answers and the running handlers one more second, and only then
 * end the lanes and the daemon. A handler that is still running (an outbound call can take a
 * minute) holds a suspended connection: MHD must not stop under it, so the daemon is left
 * running and the caller exits without tearing anything down. */
bool hs_server_stop(int grace_ms) {
  if (!daemon_handle) return true;
  MHD_socket listen_fd = MHD_quiesce_daemon(daemon_handle);
  /* refuse new connections at once: shutting the listening socket down (it is closed only
   * after MHD_stop_daemon, as MHD requires) resets whatever would queue on it */
  if (listen_fd != MHD_INVALID_SOCKET) shutdown(listen_fd, SHUT_RDWR);
  bool drained = wait_until(nothing_in_flight, clock_mono_ms() + grace_ms);
  for (int i = 0; i < LANE_COUNT; i++) lane_cancel(&lanes[i]);
  held_stop(); /* MHD must not stop with a connection suspended */
  if (!drained) wait_until(only_handlers_left, clock_mono_ms() + 1000);
  if (!wait_until(no_handler_running, clock_mono_ms() + 1000)) return false;
  for (int i = 0; i < LANE_COUNT; i++) lane_join(&lanes[i]);
  hs_watch_stop();
  MHD_stop_daemon(daemon_handle);
  if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
  daemon_handle = NULL;
  return true;
}
