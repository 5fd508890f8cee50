/* The HTTP layer's contract with the domains: route rows, the request a handler receives,
 * and the few calls a handler makes to answer.
 *
 * A request goes: route match -> body read (capped by the row's max_body, 413) -> auth
 * guard (401/403) -> rate limit (429) -> body and query validation (400) -> handler. A
 * handler reads only validated input, and answers with hs_ok()/hs_reply() or returns an
 * error through hs_fail(); it never builds an error body itself. Installed hooks (hs_hooks)
 * run inside the guard, just before the handler, and once the answer is decided. */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H
#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "core/jw.h"
#include "ext/token.h"
#include "http/schema.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { HS_GET = 1, HS_POST = 2, HS_PUT = 4, HS_PATCH = 8, HS_DELETE = 16 };

/* Roles as bits, so a route row lists every role it admits. */
enum {
  ROLE_USER = 1 << 0,
  ROLE_PROVIDER = 1 << 1,
  ROLE_ADMIN = 1 << 2,
  ROLE_CUSTOMER_SUPPORT = 1 << 3,
  ROLE_PROFESSIONAL_SUPPORT = 1 << 4,
  ROLE_TECHNICAL_SUPPORT = 1 << 5,
  ROLE_INTERNAL_AUDIT = 1 << 6,
};
#define ROLE_OPEN 0u /* no token needed */
/* The role named name in a token (staff: the token is a staff token), or 0 when there is none
 * (http/roles.c, the one table of role names). */
unsigned hs_role_bit(const char *name, bool staff);
/* The name of one role bit ("user", "customer_support", ...), NULL for anything else. */
const char *hs_role_name(unsigned bit);
/* The staff roles' names, and the customer and provider roles' ("user", "provider"),
 * NULL-terminated (an F_ENUM's choices). */
extern const char *const HS_STAFF_ROLE_NAMES[];
extern const char *const HS_ACCOUNT_ROLE_NAMES[];
#define ROLE_STAFF (ROLE_CUSTOMER_SUPPORT | ROLE_PROFESSIONAL_SUPPORT | ROLE_TECHNICAL_SUPPORT | ROLE_INTERNAL_AUDIT)
#define ROLE_ANY (ROLE_USER | ROLE_PROVIDER | ROLE_ADMIN | ROLE_STAFF)

/* Route flags. */
enum {
  ROUTE_TEST_ONLY = 1 << 0, /* exists only when APP_ENV=test (404 otherwise) */
  ROUTE_DEV_ONLY = 1 << 1,  /* GODMODE: 404 when APP_ENV=production */
  ROUTE_CORS_ANY = 1 << 2,  /* any Origin is allowed, whatever CORS_ORIGINS says */
  ROUTE_RAW_BODY = 1 << 3,  /* the body is not parsed as JSON (webhooks; a form, whose fields the
                               row's `body` then documents, read by the handler) */
  ROUTE_INLINE = 1 << 4,    /* the handler never blocks: run it on the event thread */
  ROUTE_SLOW = 1 << 5,      /* the handler waits on more than the database (password hashing,
                               the payment processor, object storage, routing): it runs on its
                               own worker lane so it cannot hold up the database-bound routes */
  ROUTE_DB_READ = 1 << 6,   /* the handler only reads the database (and signs URLs): where reads
                               never wait (SQLite, db_reads_inline) it runs on the event thread
                               with that thread's own connection, without a hand-over to a
                               worker; elsewhere on the database lane. It must not write (work it
                               needs written goes through queue_defer). When the database is
                               locked (by another process) it runs again on a worker, which waits;
                               impersonated requests (recorded by the hooks) always go to one. */
  ROUTE_SECRETS = 1 << 7,   /* the route takes a password or issues a token: Idempotency-Key is
                               ignored, so neither the request's fingerprint nor its answer (a
                               live token) is ever stored, and every request runs */
  ROUTE_TICKET = 1 << 8,    /* a `ticket` query parameter may stand in for the bearer token (for
                               clients that cannot send headers, such as a browser's EventSource):
                               the redeem_ticket hook turns it into the claims of the token it
                               was issued for, once */
  ROUTE_ETAG = 1 << 9,      /* the answer is a file with a strong ETag (hs_reply_file_cached): a
                               matching If-None-Match answers 304 Not Modified (documented) */
  ROUTE_PAGE = 1 << 10,     /* a page of a browser app (the staff portal): its answer carries a strict
                               Content-Security-Policy (scripts, styles and requests to this server
                               only; images also from object storage), no framing, no referrer */
  ROUTE_COOKIE = 1 << 11,   /* the session cookie of the redeem_cookie hook may stand in for the
                               bearer token (a browser's EventSource with withCredentials): only
                               on a request from this service's own origin or one CORS_ORIGINS
                               lists (hs_origin_credentialed), never across sites otherwise */
};

/* A fixed-window rate limit keyed by client address (an IPv6 client's /64), or by the caller's
 * account (role and id) on routes that need a token when per_account is set; counters live in
 * the database. */
typedef struct hs_rate_limit {
  const char *name;
  int max;
  int64_t window_ms;
  bool per_account;
} hs_rate_limit;

/* multipart/form-data uploads: which file fields a route takes and their limits. Files are
 * streamed to disk as they arrive; their type is sniffed from the bytes afterwards. */
typedef struct hs_file_rule {
  const char *field;
  int max_files;    /* per field */
  size_t max_bytes; /* per file; larger answers 413 */
  unsigned types;   /* FT_* bits (ext/filetype.h) */
} hs_file_rule;

typedef struct hs_upload_spec {
  const hs_file_rule *files; /* terminated by a row with field == NULL */
  int min_files;             /* fewer files in all answers 400 (0: files optional) */
  const char *none_message;  /* the 400 message when fewer than min_files arrive */
  const hs_schema *fields;   /* text fields, validated like a query (strings converted) */
} hs_upload_spec;

/* One received file: a temporary file that is removed with the request unless the handler
 * moved it into storage (storage_save consumes it). */
typedef struct hs_upload {
  const char *field;
  const char *filename; /* as the client named it (never used for storage) */
  const char *path;
  size_t size;
  const char *mime, *ext; /* sniffed: "image/png" / "png", ... */
  char sha256[65];        /* the bytes as received, when the request carries an Idempotency-Key */
} hs_upload;

typedef struct hs_req hs_req;
typedef err_t (*hs_handler)(hs_req *req);
typedef struct hs_stream hs_stream;

/* One row per endpoint: everything about it is here. */
typedef struct hs_route {
  int method;
  const char *path; /* "/jobs/:id/status": static segments win over :params */
  hs_handler handler;
  unsigned roles; /* ROLE_OPEN or a set of ROLE_* bits */
  const hs_schema *body;
  const hs_schema *query;
  size_t max_body; /* bytes; 0 means the default of 64 KiB */
  int ok;          /* success status; 0 means 200 */
  unsigned flags;
  const hs_rate_limit *limit;
  const hs_upload_spec *upload; /* multipart route; max_body defaults to what its files allow */
  const char *summary;
  /* The success answer, for the OpenAPI document (http/openapi.h): a component schema's name
   * ("Job"), "Job[]" for an array of them, "Job?" when it may also be null, or a media type
   * ("text/html") for an answer that is not JSON. A route without one fails the tests. */
  const char *response;
  /* The error codes the handler answers beyond those the row implies (auth 401/403, input 400,
   * body 413, limit 429, idempotency 409/422, upload 507, 431, 500, 503):
   * ERRORS(ERR_NOT_FOUND, ERR_CONFLICT). Checked when the table is built (real error codes,
   * none twice); the OpenAPI document lists their statuses. */
  const err_t *errors;
  /* A component that the listed errors answer with instead of the error body (GET /ready's
   * 503 answers NotReady), or NULL. */
  const char *error_schema;
  /* A streamed answer (response "text/event-stream"): the component each of its events
   * follows, for the OpenAPI document; NULL otherwise. */
  const char *stream_schema;
} hs_route;

/* A route's error list: ERRORS(ERR_NOT_FOUND, ERR_CONFLICT) (ended by ERR_OK). */
#define ERRORS(...) ((const err_t[]){__VA_ARGS__, ERR_OK})

/* The caller's identity after the auth guard (valid only when the route needs a token). */
typedef struct hs_auth {
  const char *id;
  const char *role;
  unsigned role_bit;
  const char *elevation_id; /* NULL unless a staff impersonation token */
  int64_t gen;              /* the token's account generation (its gen claim; 0 when absent) */
  const char *token_id;     /* the token's own id (ext/token.h), which logout records */
  int64_t token_exp;        /* when the token expires (epoch seconds) */
  const char *session_id;   /* the session (login) a customer's or provider's token belongs to
                               (its sid claim: the refresh-token family); NULL when none */
} hs_auth;

/* A request made with a live impersonation token, as the token check found it (the auth
 * domain's check_token hook fills it once every check passed); all zero otherwise. */
typedef struct hs_impersonation {
  const char *elevation_id; /* the elevation the token names (auth.elevation_id) */
  const char *staff_id;     /* the staff member who acts through it */
  int64_t request_seq;      /* the request's record in the audit trail, once committed; 0 before */
} hs_impersonation;

#define HS_MAX_PARAMS 8

struct hs_req {
  arena arena; /* request-lifetime memory; see core/arena.h */
  const hs_route *route;
  const char *method, *path;
  const char *param_names[HS_MAX_PARAMS], *param_values[HS_MAX_PARAMS];
  int nparams;
  int nuploads;  /* multipart routes: the files in uploads (next to nparams: no padding) */
  json_t *body;  /* validated body (only declared fields), never NULL for JSON routes */
  json_t *query; /* validated query arguments, never NULL */
  const char *raw_body;
  size_t raw_len;
  const char *query_string; /* the request target after '?', still percent-encoded; NULL without */
  hs_upload *uploads;       /* multipart routes: the files, in arrival order */
  json_t *form_fields;      /* multipart routes: the names of the text fields received, in order */
  hs_auth auth;
  hs_impersonation impersonation; /* staff_id NULL unless a live impersonation */
  const char *ip;
  char request_id[40];
  void *conn;                         /* the connection that carries the request, for hs_header() ... */
  const struct hs_conn_ops *conn_ops; /* ... through these operations (http/pipeline.h) */
  /* the answer */
  int status;
  err_t err;
  json_t *res_body;
  const char *res_json; /* the body as JSON text in the arena (hs_ok_jw), instead of res_body */
  size_t res_json_len;
  const char *err_message, *err_code;
  const char *err_field;             /* a validation error's field (the error body's `field`), or NULL */
  const char *www_authenticate;      /* a 401's WWW-Authenticate challenge (RFC 6750), or NULL */
  const char *res_link;              /* the Link header of the answer (a list's next page), or NULL */
  const char *res_set_cookie;        /* a Set-Cookie line of a success answer, or NULL */
  int retry_after;                   /* seconds; 0 = no header (a 503 without one gets HS_RETRY_AFTER_DEFAULT) */
  bool replayed;                     /* the kept answer of an earlier request with the same Idempotency-Key */
  const char *idem_scope, *idem_key; /* the Idempotency-Key this request claimed (http/idempotency.h) */
  int delay_ms;                      /* hold the answer back this long, without a thread (lane routes only) */
  /* a file answer instead of JSON (hs_reply_file) */
  int res_fd;
  char *res_data;
  size_t res_size;
  const char *res_content_type;
  const char *res_cache_control; /* a file answer's Cache-Control; NULL: "private, max-age=300" */
  const char *res_etag;          /* a file answer's ETag (quoted), or NULL */
  hs_stream *stream;             /* a streamed answer (hs_stream_open), until the transport takes it */
};

/* Path parameter by name (":id" -> "id"); NULL when the route has none by that name. */
const char *hs_param(const hs_req *req, const char *name);
/* Request header (case-insensitive); NULL when absent. */
const char *hs_header(const hs_req *req, const char *name);
/* Whether a browser may send req with its cookies and read the answer: it comes from an
 * origin CORS_ORIGINS lists (never by `*`), from this service's own (PUBLIC_URL's), or from no
 * other site (no Origin, and Sec-Fetch-Site absent, same-origin or none). */
bool hs_origin_credentialed(const hs_req *req);
/* Answers with the route's success status and body (the reference is stolen). */
err_t hs_ok(hs_req *req, json_t *body);
/* Answers with an explicit status and body (stolen). */
err_t hs_reply(hs_req *req, int status, json_t *body);
/* A JSON writer in the request's arena for the answer (hint: the expected size, or 0). */
jw *hs_jw(hs_req *req, size_t hint);
/* Answers with the route's success status / an explicit status and the writer's text, sent
 * from the arena as it is (no copy, no re-serialisation). */
err_t hs_ok_jw(hs_req *req, const jw *w);
/* Answers with the route's success status and a small value written by jw_pack (core/jw.h):
 * `hs_ok_pack(req, "{s:b}", "ok", 1)`. */
err_t hs_ok_pack(hs_req *req, const char *fmt, ...);
err_t hs_reply_jw(hs_req *req, int status, const jw *w);
/* Answers 200 with raw bytes: an open fd (closed by the server) or a heap buffer (freed by
 * the server), size bytes of content_type. */
err_t hs_reply_file(hs_req *req, int fd, char *data, size_t size, const char *content_type);
/* hs_reply_file with validators: etag (a strong entity tag, quoted) and cache_control are sent
 * with the file, and when the request's If-None-Match names etag (or is "*"; compared weakly,
 * as RFC 9110 says for it) the answer is 304 with them and no body (fd closed, data freed). */
err_t hs_reply_file_cached(hs_req *req, int fd, char *data, size_t size, const char *content_type, const char *etag,
                           const char *cache_control);
/* Whether an If-None-Match value (NULL: absent) names etag: "*", or a list of entity tags with
 * or without W/. Pure function. */
bool hs_etag_matches(const char *if_none_match, const char *etag);
/* Fails the request: the error's status, {"error": message, "code": the error's default code}
 * (message NULL: the default message; core/errors.h). Returns err so a handler can
 * `return hs_fail(...)`. */
err_t hs_fail(hs_req *req, err_t err, const char *message);
/* The one "not found" answer: 404 `<what> not found` (what: "Job", "Staff member"). */
err_t hs_not_found(hs_req *req, const char *what);
/* A look-up's outcome e answered, in the manner of Redis's lookupKeyReadOrReply: ERR_NOT_FOUND
 * fails the request as hs_not_found does; anything else (ERR_OK included) is returned as it
 * is, for `if (e) return hs_found_or_fail(req, e, "Job");`. */
err_t hs_found_or_fail(hs_req *req, err_t e, const char *what);
/* Same with a more precise machine-readable `code` (one of ERR_CODES; NULL: the default). */
err_t hs_fail_code(hs_req *req, err_t err, const char *code, const char *message);
/* Fails with a validation error: 400, code validation_failed, message "<field>: <text>" whose
 * field also goes to the body's `field`. */
err_t hs_fail_invalid(hs_req *req, const char *message);
/* The same for a message that does not begin with its field: 400 validation_failed, field. */
err_t hs_fail_field(hs_req *req, const char *field, const char *message);
/* Seconds of Retry-After on a 503 whose maker named none. */
#define HS_RETRY_AFTER_DEFAULT 5
/* Hooks a domain declares (domain_def.hooks; start-up adds them with hs_add_hooks), so the
 * HTTP layer can consult rules it must not know about (token checks, the audit trail, live
 * updates' tickets) without including a domain header. Each may be NULL. They run on worker threads and may use
 * the database; for a ROUTE_DB_READ route they may run on an HTTP event thread, where they
 * must only read, except for a request with an impersonation token (auth.elevation_id),
 * which is always answered by a worker.
 * - check_token: after a token's signature and expiry are verified and req->auth is filled,
 *   before its role is checked against the route. It may refuse the token by returning
 *   hs_fail(req, ERR_UNAUTHORIZED, ...) (any failure ends the request with that error).
 *   On an open route it is called only for a token carrying an elevationId; a refusal (401)
 *   there just drops the token, which open routes ignore. A live impersonation token's hook
 *   fills req->impersonation, which the pipeline clears again when a later one refuses.
 * - before_handler: when every check passed, just before the handler, for every request
 *   (open routes too); a failure ends the request without running the handler.
 * - after: once the answer is decided (status or error set), for every request that reached
 *   check_token, whatever its outcome.
 * - redeem_ticket: turns a ticket (ROUTE_TICKET) into the claims of the token it was issued
 *   for, once: true with *out filled, false when the ticket is unknown, used or expired. It may
 *   use the database. The first set that has one redeems.
 * - metrics: appends the domain's families to GET /metrics (Prometheus text: # HELP, # TYPE,
 *   then its lines) at each scrape, from the scraping thread; it must not block.
 * - session_cookie, redeem_cookie: the name of a cookie that stands for a token on ROUTE_COOKIE
 *   routes, and what turns its value into that token's claims (true with *out filled, false
 *   when unknown or expired); the token's check_token runs on them as on the token's own. The
 *   first set that has one redeems. */
typedef struct hs_hooks {
  err_t (*check_token)(hs_req *req);
  err_t (*before_handler)(hs_req *req);
  void (*after)(hs_req *req);
  bool (*redeem_ticket)(const char *ticket, token_claims *out);
  void (*metrics)(struct buf *out);
  const char *session_cookie;
  bool (*redeem_cookie)(const char *value, token_claims *out);
} hs_hooks;
/* Adds a set of hooks (kept by reference; at most HS_HOOKS_MAX sets), at start-up before
 * hs_server_start. Sets run in the order they were added: every check_token must pass (the
 * first refusal ends the request), every before_handler must pass, every after runs; every
 * set's check_token runs before any set's before_handler. */
#define HS_HOOKS_MAX 8
void hs_add_hooks(const hs_hooks *hooks);
/* Every set's metrics hook, in order, writing to out (http/metrics.c at a scrape). */
void hs_hooks_metrics(struct buf *out);
/* Whether a token with the claims of auth would still pass the check_token hook now (its
 * account exists, its generation did not move on, its impersonation is live), for a caller
 * that keeps acting on a request's claims after it was answered (a stream): ERR_OK (also with
 * no hook installed), ERR_UNAUTHORIZED when refused, or the error that kept it from being
 * told (the database). Runs the hook outside any request: it may use the database. */
err_t hs_token_recheck(const hs_auth *auth);
/* The status the request answers with (its error's status when it failed). */
int hs_status(const hs_req *req);

/* Streamed answers. A handler may answer with a stream instead of a body: hs_stream_open makes
 * the answer the route's success status with content_type, sent as soon as the handler
 * returns, followed by whatever the stream's owner writes for as long as the client stays
 * (chunked). While nothing is buffered the connection is parked: an idle stream holds no
 * thread, and its memory is the connection's. Writes may come from any thread. The owner
 * holds a reference until its `closed` callback has run (http/stream.h has the transport's
 * side). */
typedef struct hs_stream_owner {
  /* The stream is over: the client left, it ended or was cut, or its request was answered
   * otherwise (an error after the handler opened it). Called once, on a server thread, with no
   * lock of the stream held; the owner forgets the stream and calls hs_stream_release. */
  void (*closed)(void *arg, hs_stream *s);
  /* The server is stopping: write the last words and hs_stream_end (the stream is cut if it has
   * not finished within a second). */
  void (*stopping)(void *arg, hs_stream *s);
} hs_stream_owner;
/* Makes req's answer a stream of content_type whose owner (copied pointer) is told through
 * owner with arg. max_buffered: past this many bytes written and not yet taken by the client,
 * the stream is cut (a reader too slow to keep up). Returns the owner's reference. Call it
 * last, once every check passed: a failure afterwards drops the stream (`closed` runs). */
hs_stream *hs_stream_open(hs_req *req, const char *content_type, size_t max_buffered, const hs_stream_owner *owner,
                          void *arg);
/* Appends n bytes to the stream. False when it takes no more: it ended, was cut, or is cut now
 * because the client's backlog passed max_buffered (what was buffered is dropped). */
bool hs_stream_write(hs_stream *s, const char *data, size_t n);
/* Ends the stream once what was written has been sent. */
void hs_stream_end(hs_stream *s);
/* Bytes written and not yet taken by the client. */
size_t hs_stream_backlog(hs_stream *s);
/* The owner lets go of its reference. */
void hs_stream_release(hs_stream *s);

/* Field getters over the validated body (and query); NULL/defaults when absent. */
const char *hs_body_str(const hs_req *req, const char *field);
const char *hs_query_str(const hs_req *req, const char *field);
bool hs_body_has(const hs_req *req, const char *field);
/* The files received in field, in arrival order (an arena array of *count pointers). */
hs_upload **hs_files(hs_req *req, const char *field, int *count);

#endif
