/* Answers are decided in two steps. hs_answer_prepare runs where the request ran (a worker,
 * or the event thread for inline routes): it settles an error into its status and body
 * (error_body, the only place an error body is made), serialises the JSON, records it for
 * idempotency and compresses it, so the event thread that sends the answer only hands bytes
 * over. hs_answer_headers then lists the header lines in a fixed order for the transport,
 * which makes the response object (it alone knows libmicrohttpd). */
#include "http/answer.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "core/vec.h"
#include "http/compress.h"
#include "http/idempotency.h"
#include "http/pipeline.h"
#include "http/router.h"
#include "http/stream.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static VEC(char *) cors_list; /* empty when "*" */
static bool cors_any;
static char own_origin[256]; /* PUBLIC_URL's scheme, host and port */

void hs_answer_init(void) {
  const char *u = CFG.public_url ? CFG.public_url : "", *host = strstr(u, "://");
  size_t n = host ? (size_t)(strcspn(host + 3, "/?#") + (size_t)(host + 3 - u)) : 0;
  snprintf(own_origin, sizeof own_origin, "%.*s", (int)n, u);
  cors_any = !strcmp(CFG.cors_origins, "*");
  if (cors_any) return;
  char *copy = xstrdup(CFG.cors_origins), *save = NULL;
  for (char *p = strtok_r(copy, ", ", &save); p; p = strtok_r(NULL, ", ", &save))
    *vec_push(NULL, &cors_list) = xstrdup(p);
  free(copy);
}

/* The one error body: {"error", "code", "field"?}; a 5xx other than 503, 504 and 507 says
 * nothing of its cause: {"error": "Internal server error", "code", "requestId"}. A code that is
 * not one of ERR_CODES (a handler's slip) gives way to the error's default. */
static json_t *error_body(hs_req *req) {
  int status = err_status(req->err);
  if (status >= 500 && status != 503 && status != 504 && status != 507)
    return json_pack("{s:s,s:s,s:s}", "error", "Internal server error", "code", err_default_code(ERR_INTERNAL),
                     "requestId", req->request_id);
  const char *code = req->err_code;
  if (code && !err_code_known(code)) {
    log_msg(LOG_ERROR, "%s %s: error code %s is not one of the documented codes", req->method, req->path, code);
    code = NULL;
  }
  json_t *b = json_pack("{s:s,s:s}", "error", req->err_message ? req->err_message : err_default_message(req->err),
                        "code", code ? code : err_default_code(req->err));
  if (req->err_field) json_object_set_new(b, "field", json_string(req->err_field));
  return b;
}

/* A stream opened by the handler that will not be the answer after all. */
static void drop_stream(hs_req *req) {
  if (req->stream) hs_stream_gone(req->stream), req->stream = NULL;
}

/* Turns an error into the status and body that answer it (once). */
static void settle(hs_req *req) {
  if (req->err == ERR_OK) return;
  drop_stream(req);
  req->status = err_status(req->err);
  req->res_body = arena_json(&req->arena, error_body(req));
  req->res_json = NULL;
  req->res_content_type = NULL; /* a file answer begun before the failure is dropped */
  req->res_link = req->res_set_cookie = NULL;
  if (req->status == 503 && req->retry_after <= 0) req->retry_after = HS_RETRY_AFTER_DEFAULT;
  if (req->status != 401) req->www_authenticate = NULL;
  req->err = ERR_OK;
}

void hs_answer_prepare(hs_call *c) {
  hs_req *req = &c->req;
  settle(req);
  if (req->res_content_type || c->prepared) return;
  c->prepared = true;
  const char *text;
  if (req->res_json) {
    text = req->res_json, c->out_len = req->res_json_len;
  } else {
    c->out = req->res_body ? json_dumps(req->res_body, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
    text = c->out, c->out_len = c->out ? strlen(c->out) : 0;
  }
  hs_idem_end(req, req->status, text);
  if (c->out_len >= HS_GZIP_MIN && hs_accepts_gzip(hs_header(req, "Accept-Encoding"))) {
    size_t n;
    char *gz = hs_gzip(text, c->out_len, &n);
    if (gz) free(c->out), c->out = gz, c->out_len = n, c->out_gzip = true;
  }
}

void hs_answer_clear(hs_call *c) {
  hs_req *req = &c->req;
  drop_stream(req);
  if (req->res_fd >= 0) close(req->res_fd), req->res_fd = -1;
  free(req->res_data), req->res_data = NULL, req->res_content_type = NULL;
  req->status = 0, req->res_body = NULL, req->res_json = NULL, req->err = ERR_OK;
  req->err_message = req->err_code = req->err_field = req->www_authenticate = req->res_link = NULL;
  req->res_etag = NULL;
  req->res_set_cookie = NULL;
  req->retry_after = 0;
  free(c->out), c->out = NULL;
  c->out_len = 0, c->out_gzip = c->prepared = false;
}

void hs_answer_preflight(hs_call *c) {
  if (hs_router_methods(c->req.path))
    c->req.status = 204;
  else
    hs_fail(&c->req, ERR_NOT_FOUND, NULL);
}

/* The request's Origin when CORS_ORIGINS names it (never by `*`), else NULL. */
static const char *listed_origin(const hs_req *req) {
  const char *origin = hs_header(req, "Origin");
  if (!origin) return NULL;
  for (char **o = cors_list.items; o < cors_list.items + cors_list.size; o++)
    if (!strcmp(*o, origin)) return origin;
  return NULL;
}

static const char *cors_origin_for(const hs_req *req) {
  const char *origin = hs_header(req, "Origin");
  if (!origin) return NULL;
  if (cors_any || (req->route && (req->route->flags & ROUTE_CORS_ANY))) return "*";
  return listed_origin(req);
}

bool hs_origin_credentialed(const hs_req *req) {
  const char *origin = hs_header(req, "Origin");
  if (origin) return listed_origin(req) || (own_origin[0] && !strcmp(origin, own_origin));
  /* no Origin: a same-origin GET, a navigation or a program; a browser says which in
   * Sec-Fetch-Site, and a navigation from another site (a link, a frame) sends no cookie here */
  const char *site = hs_header(req, "Sec-Fetch-Site");
  return !site || !strcmp(site, "same-origin") || !strcmp(site, "none");
}

typedef void (*header_fn)(void *resp, const char *name, const char *value);

/* The scheme, host and port of url ("https://s3.example.com/bucket" -> " https://s3.example.com"),
 * or "" when it has none. */
static void origin_of(const char *url, char *out, size_t cap) {
  out[0] = 0;
  const char *sep = url ? strstr(url, "://") : NULL;
  if (!sep || strpbrk(url, " ;,'\"")) return;
  size_t n = (size_t)(sep + 3 - url) + strcspn(sep + 3, "/?#");
  snprintf(out, cap, " %.*s", (int)n, url);
}

static pthread_once_t csp_once = PTHREAD_ONCE_INIT;
static char csp[1024];

/* No inline script or style: scripts, style sheets and requests go to this server only; images
 * also to PUBLIC_URL and object storage (addressed path-style, ext/s3.c), where signed file URLs
 * point, and data: URLs. */
static void build_csp(void) {
  char storage[300], pub[300];
  origin_of(CFG.s3_endpoint, storage, sizeof storage);
  origin_of(CFG.public_url, pub, sizeof pub);
  snprintf(csp, sizeof csp,
           "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:%s%s; "
           "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
           pub, storage);
}

static const char *page_csp(void) {
  pthread_once(&csp_once, build_csp);
  return csp;
}

static void common_headers(const hs_req *req, bool vary_encoding, header_fn add, void *resp) {
  add(resp, "X-Request-Id", req->request_id);
  add(resp, "X-Content-Type-Options", "nosniff");
  /* a signed file URL may be cached by the client until well before it expires */
  add(resp, "Cache-Control",
      !req->res_content_type || req->err != ERR_OK ? "no-store"
      : req->res_cache_control                     ? req->res_cache_control
                                                   : "private, max-age=300");
  const char *origin = cors_origin_for(req);
  if (origin) {
    add(resp, "Access-Control-Allow-Origin", origin);
    /* credentials (cookies: the live updates' session) only for an origin named in the list */
    if (strcmp(origin, "*")) add(resp, "Access-Control-Allow-Credentials", "true");
    add(resp, "Access-Control-Expose-Headers",
        "X-Request-Id, Retry-After, Idempotent-Replayed, Link, WWW-Authenticate");
  }
  /* the answer depends on Origin only where some origin is allowed, and on Accept-Encoding
   * where it may be compressed */
  bool vary_origin = !cors_any && (cors_list.size || (req->route && (req->route->flags & ROUTE_CORS_ANY)));
  if (vary_origin || vary_encoding)
    add(resp, "Vary",
        vary_origin && vary_encoding ? "Origin, Accept-Encoding"
        : vary_origin                ? "Origin"
                                     : "Accept-Encoding");
  if (req->replayed) add(resp, "Idempotent-Replayed", "true");
  if (req->retry_after > 0) {
    char n[16];
    snprintf(n, sizeof n, "%d", req->retry_after);
    add(resp, "Retry-After", n);
  }
  if (req->www_authenticate) add(resp, "WWW-Authenticate", req->www_authenticate);
  if (req->res_link) add(resp, "Link", req->res_link);
  if (req->res_etag && req->err == ERR_OK) add(resp, "ETag", req->res_etag);
  if (req->route && (req->route->flags & ROUTE_PAGE) && req->res_content_type) {
    add(resp, "Content-Security-Policy", page_csp());
    add(resp, "X-Frame-Options", "DENY");
    add(resp, "Referrer-Policy", "no-referrer");
  }
  if (req->res_set_cookie) add(resp, "Set-Cookie", req->res_set_cookie);
}

/* A preflight's 204: the methods the path serves. */
static void preflight_headers(const hs_req *req, header_fn add, void *resp) {
  int methods = hs_router_methods(req->path);
  char allow[64] = "OPTIONS";
  for (int bit = HS_GET; bit <= HS_DELETE; bit <<= 1)
    if (methods & bit) strcat(allow, ", "), strcat(allow, hs_method_name(bit));
  common_headers(req, false, add, resp);
  add(resp, "Allow", allow);
  if (hs_header(req, "Origin") && (cors_any || req->route)) {
    add(resp, "Access-Control-Allow-Methods", allow);
    add(resp, "Access-Control-Allow-Headers",
        "Authorization, Content-Type, X-Request-Id, Idempotency-Key, Last-Event-ID");
    add(resp, "Access-Control-Max-Age", "600");
  }
}

void hs_answer_headers(const hs_call *c, header_fn add, void *resp) {
  const hs_req *req = &c->req;
  if (c->preflight && req->status == 204) return preflight_headers(req, add, resp);
  if (req->res_content_type) {
    if (req->status != 304) add(resp, "Content-Type", req->res_content_type); /* no representation with a 304 */
    if (req->stream) add(resp, "X-Accel-Buffering", "no"); /* proxies pass each event on at once */
    return common_headers(req, false, add, resp);
  }
  if (req->res_body || req->res_json) add(resp, "Content-Type", "application/json; charset=utf-8");
  if (c->out_gzip) add(resp, "Content-Encoding", "gzip");
  common_headers(req, c->out_gzip || c->out_len >= HS_GZIP_MIN, add, resp);
}
