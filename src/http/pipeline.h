/* The request pipeline without sockets: what happens to a request between the transport that
 * reads it and the transport that sends its answer.
 *
 *   hs_call_init     (request line)  the request's arena, its connection, its raw query
 *   hs_call_start    (headers)       method, path, client address, request id, route match;
 *                                    431 past HTTP_MAX_HEADER_BYTES, 413 by Content-Length, an
 *                                    upload's token checked before any file reaches the disk
 *   hs_call_feed     (body pieces)   kept up to the route's max_body, or streamed to the
 *                                    multipart parser
 *   hs_call_run_here (body read)     answers here what belongs on the calling event thread,
 *                                    else names the worker lane that must run hs_dispatch
 *   hs_dispatch                      gates -> guard -> limit -> parse -> validate -> idempotency
 *                                    -> hooks -> handler -> settle (http/answer.h)
 *   hs_call_log, hs_call_fini        access log and metrics; the arena dropped
 *
 * The connection is abstract (hs_conn_ops): the server implements it over libmicrohttpd, the
 * unit tests over a table of headers. One call belongs to one request and is used by one
 * thread at a time (the event thread, then at most one worker). */
#ifndef HTTP_PIPELINE_H
#define HTTP_PIPELINE_H
#include "core/buf.h"
#include "ext/token.h"
#include "http/http.h"
#include "http/lanes.h"
#include "http/multipart.h"
#include "http/upload.h"
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the pipeline needs of the connection that carries a request. */
typedef struct hs_conn_ops {
  /* The value of a request header (name case-insensitive), NULL when absent. */
  const char *(*header)(void *conn, const char *name);
  /* Calls fn with every header line, in arrival order. */
  void (*each_header)(void *conn, void (*fn)(void *arg, const char *name, const char *value), void *arg);
  /* The socket peer's address as text; false when unknown. */
  bool (*peer)(void *conn, char out[INET6_ADDRSTRLEN]);
} hs_conn_ops;

/* One request on its way through the pipeline. */
typedef struct hs_call {
  hs_req req;
  struct buf body;       /* a JSON or raw body, capped at the route's max_body */
  uint64_t upload_bytes; /* an upload's body, counted (its parts go to disk) */
  const char *raw_query; /* the request target after '?', still percent-encoded (arena) */
  token_claims *claims;  /* with claims_read: the verified token, NULL when not valid */
  hs_multipart *mp;      /* upload routes: the parser, until the body ends */
  hs_form *form;         /* upload routes: the parts */
  char *out;             /* the JSON answer's bytes when serialised or compressed (heap) */
  size_t out_len;
  int db_trips; /* database round trips made for this request (db_trips), wherever it ran */
  bool too_large, preflight, authorized, multipart, mp_failed, claims_read, prepared, out_gzip;
} hs_call;

/* Prepares every module the pipeline uses (CORS, the shared empty body); once, before the
 * first request. */
void hs_pipeline_init(void);
/* The request line arrived: zeroes c, starts its arena (a first chunk of arena_size bytes in
 * arena_buf, caller storage aligned for any type) and keeps conn and the raw query of uri. */
void hs_call_init(hs_call *c, void *conn, const hs_conn_ops *ops, const char *uri, void *arena_buf, size_t arena_size);
/* The headers arrived. True when the request is answered already (431, 413 by Content-Length,
 * an upload refused by the guard): the transport sends the answer and reads no body. */
bool hs_call_start(hs_call *c, const char *method, const char *url);
/* The next size bytes of the body. */
void hs_call_feed(hs_call *c, const char *data, size_t size);
/* The body is read (call once). True when the request is answered here, on the calling
 * thread: a preflight, a 404, a refused body, a ROUTE_INLINE route, or a ROUTE_DB_READ route
 * where reads never wait (unless the database was locked: then it goes to a worker after
 * all); otherwise *lane is where hs_dispatch must run it. */
bool hs_call_run_here(hs_call *c, hs_lane_id *lane);
/* The pipeline, then three rules over its outcome: a request whose token the check_token
 * hook's guard (db_guard) refused answers 401, whatever its handler made of the statements
 * the guard kept from running; a file that could not be stored makes a 500
 * a 503 `File storage unavailable` (Retry-After: 5) or 507 `Insufficient storage`; a request
 * during which the database was unavailable answers 503 `Service unavailable` (Retry-After:
 * 1) whatever its handler made of it. Then the after hook, and the answer prepared
 * (hs_answer_prepare). */
void hs_dispatch(hs_call *c);
/* The answer to a request that arrives, or still waits for a worker, after the shutdown's
 * grace period: 503 with Retry-After: 1. */
void hs_call_refuse(hs_call *c);
/* The request ended after ms (aborted: the connection failed first): counts it for
 * GET /__test/routes and metrics and writes the access log line. */
void hs_call_log(hs_call *c, double ms, bool aborted);
/* Releases everything the request holds (arena, body, parser, unsent answer). */
void hs_call_fini(hs_call *c);

#endif
