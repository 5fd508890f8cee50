/* libmicrohttpd glue: the only file that includes microhttpd.h. It turns MHD's callbacks into
 * the steps of the pipeline (http/pipeline.h), MHD's connections into the pipeline's abstract
 * connection (hs_conn_ops), the prepared answers (http/answer.h) into MHD responses, and MHD's
 * suspend/resume into the worker lanes' callbacks (http/lanes.h).
 *
 * MHD runs a few event threads (epoll, one per core) and calls on_uri with the request line,
 * then on_request several times per request: first with the headers (hs_call_start), then with
 * body chunks (hs_call_feed), then once with no data (hs_call_run_here). A request answered on
 * the event thread is queued at once; any other is suspended and queued on a lane, whose worker
 * runs hs_dispatch and resumes the connection, which MHD then calls once more to take the
 * answer. Answering only after the body keeps the connection alive. A JSON answer written with
 * the writer (hs_ok_jw) is sent from the arena as it is. on_completed writes the access log
 * line and drops the request's arena. Every connection is watched for slow clients from accept
 * to close (http/watch.h). */
#include "http/server.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "http/answer.h"
#include "http/lanes.h"
#include "http/pipeline.h"
#include "http/watch.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* libmicrohttpd's per-connection pool (headers, read and write buffers). It clears the pool
 * on every request, so its size is a per-request cost; 16 KiB holds any sane header set. */
#define CONNECTION_MEMORY (16 * 1024)

typedef struct conn_ctx {
  hs_call call;
  hs_work work;  /* on a lane, then held */
  bool started;  /* on_request has seen the headers (the context exists from the request line on) */
  bool answered; /* a response was queued */
  bool done;     /* a worker ran the pipeline; the answer waits to be queued */
  struct timespec start;
  hs_watch *watch; /* the connection's deadlines (http/watch.h) */
  /* the request arena's first chunk, so a small request allocates nothing else (kept last:
   * it is not zeroed) */
  _Alignas(max_align_t) unsigned char arena_buf[336]; /* what is left of 1 KiB */
} conn_ctx;

/* glibc serves blocks up to 1032 bytes from a per-thread cache; a larger one consolidates
 * the heap first, which measurably slows every request */
_Static_assert(sizeof(conn_ctx) <= 1024, "conn_ctx should stay within glibc's tcache sizes");
_Static_assert(sizeof(conn_ctx) > 1024 - 16, "arena_buf should take what is left of 1 KiB");

static struct MHD_Daemon *daemon_handle;
static _Atomic int inflight;

/* ---- the connection, as the pipeline sees it ---- */

static const char *conn_header(void *conn, const char *name) {
  return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

typedef struct header_walk {
  void (*fn)(void *arg, const char *name, const char *value);
  void *arg;
} header_walk;

static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  const header_walk *w = cls;
  if (key) w->fn(w->arg, key, value);
  return MHD_YES;
}

static void conn_each_header(void *conn, void (*fn)(void *arg, const char *name, const char *value), void *arg) {
  header_walk w = {fn, arg};
  MHD_get_connection_values(conn, MHD_HEADER_KIND, walk_header, &w);
}

static bool conn_peer(void *conn, char out[INET6_ADDRSTRLEN]) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = info ? info->client_addr : NULL;
  if (sa && sa->sa_family == AF_INET)
    return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, INET6_ADDRSTRLEN) != NULL;
  if (sa && sa->sa_family == AF_INET6)
    return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, INET6_ADDRSTRLEN) != NULL;
  return false;
}

static const hs_conn_ops mhd_conn_ops = {conn_header, conn_each_header, conn_peer};

/* ---- sending the answer ---- */

static void add_header(void *resp, const char *name, const char *value) { MHD_add_response_header(resp, name, value); }

static enum MHD_Result send_answer(struct MHD_Connection *conn, conn_ctx *ctx) {
  hs_call *c = &ctx->call;
  hs_req *req = &c->req;
  ctx->answered = true;
  hs_answer_prepare(c); /* answers that did not go through hs_dispatch (413 before the body, preflights) */
  struct MHD_Response *resp;
  if (req->res_content_type && req->res_fd >= 0) {
    resp = MHD_create_response_from_fd(req->res_size, req->res_fd);
    req->res_fd = -1; /* MHD closes it */
  } else if (req->res_content_type) {
    resp = MHD_create_response_from_buffer_with_free_callback(req->res_size, req->res_data, free);
    req->res_data = NULL;
  } else if (!c->out && req->res_json) { /* arena text outlives the response: the arena goes in on_completed */
    resp = MHD_create_response_from_buffer(c->out_len, (void *)req->res_json, MHD_RESPMEM_PERSISTENT);
  } else {
    resp = MHD_create_response_from_buffer_with_free_callback(c->out_len, c->out ? c->out : xstrdup(""), free);
    c->out = NULL; /* MHD frees it */
  }
  hs_answer_headers(c, add_header, resp);
  enum MHD_Result ret = MHD_queue_response(conn, (unsigned)req->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* ---- the worker lanes' view of a request ---- */

static conn_ctx *of_work(hs_work *w) { return (conn_ctx *)((char *)w - offsetof(conn_ctx, work)); }

static int lane_run(hs_work *w) {
  conn_ctx *ctx = of_work(w);
  hs_dispatch(&ctx->call);
  ctx->done = true;
  return ctx->call.req.delay_ms;
}

static void lane_resume(hs_work *w) { MHD_resume_connection(of_work(w)->call.req.conn); }
static void lane_suspend(hs_work *w) { MHD_suspend_connection(of_work(w)->call.req.conn); }

static void lane_refuse(hs_work *w) {
  conn_ctx *ctx = of_work(w);
  hs_call_refuse(&ctx->call);
  ctx->done = true;
}

static const hs_lane_ops mhd_lane_ops = {lane_run, lane_resume, lane_suspend, lane_refuse};

/* ---- MHD callbacks ---- */

/* MHD calls this with the request target as the client sent it, before it decodes it: the
 * context starts here, so the raw query string reaches hs_query_parse(). MHD then reports the
 * request to on_completed even when the headers never arrive. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls;
  conn_ctx *ctx = xmalloc(sizeof *ctx);
  memset(&ctx->work, 0, offsetof(conn_ctx, arena_buf) - offsetof(conn_ctx, work)); /* hs_call_init zeroes the call */
  hs_call_init(&ctx->call, conn, &mhd_conn_ops, uri, ctx->arena_buf, sizeof ctx->arena_buf);
  return ctx;
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

/* The first call of a request: its headers are in. True when it is answered already. */
static bool ctx_start(conn_ctx *ctx, struct MHD_Connection *conn, const char *url, const char *method) {
  ctx->started = true;
  clock_gettime(CLOCK_MONOTONIC, &ctx->start);
  atomic_fetch_add(&inflight, 1);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  ctx->watch = ci ? ci->socket_context : NULL;
  if (ctx->watch) hs_watch_body(ctx->watch);
  return hs_call_start(&ctx->call, method, url);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)cls, (void)version;
  conn_ctx *ctx = *con_cls;
  if (!ctx->started) return ctx_start(ctx, conn, url, method) ? send_answer(conn, ctx) : MHD_YES;
  if (*upload_size) {
    if (ctx->watch) hs_watch_body_bytes(ctx->watch, *upload_size);
    hs_call_feed(&ctx->call, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  if (ctx->answered) return MHD_YES;
  if (ctx->done) return send_answer(conn, ctx); /* resumed after a worker ran the pipeline */
  if (ctx->watch) hs_watch_busy(ctx->watch);
  hs_lane_id lane;
  if (hs_call_run_here(&ctx->call, &lane)) return send_answer(conn, ctx);
  if (!hs_lane_push(lane, &ctx->work)) { /* past the grace period of a shutdown, on a connection still open */
    hs_call_refuse(&ctx->call);
    return send_answer(conn, ctx);
  }
  return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)conn;
  conn_ctx *ctx = *con_cls;
  if (!ctx) return;
  if (ctx->started) { /* else the connection ended before the request's headers */
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ms = (double)(end.tv_sec - ctx->start.tv_sec) * 1e3 + (double)(end.tv_nsec - ctx->start.tv_nsec) / 1e6;
    hs_call_log(&ctx->call, ms, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (ctx->watch) hs_watch_waiting(ctx->watch);
  }
  hs_call_fini(&ctx->call);
  if (ctx->started) atomic_fetch_sub(&inflight, 1);
  free(ctx);
  *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n') buf[--n] = 0;
  log_json(LOG_WARN, buf, NULL);
}

/* ---- start and stop ---- */

bool hs_server_start(const char *bind, int port, char err[256]) {
  hs_pipeline_init();
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
  hs_lanes_start(&mhd_lane_ops, CFG.http_workers, CFG.http_slow_workers);
  return true;
}

void hs_server_load(int *in_flight, int *handlers_running) {
  *in_flight = atomic_load(&inflight);
  *handlers_running = hs_lanes_busy();
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
static bool only_handlers_left(void) { return atomic_load(&inflight) <= hs_lanes_busy(); }
static bool no_handler_running(void) { return hs_lanes_busy() == 0; }

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
  hs_lanes_cancel(); /* waiting requests answered 503, held answers released */
  if (!drained) wait_until(only_handlers_left, clock_mono_ms() + 1000);
  if (!wait_until(no_handler_running, clock_mono_ms() + 1000)) return false;
  hs_lanes_join();
  hs_watch_stop();
  MHD_stop_daemon(daemon_handle);
  if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
  daemon_handle = NULL;
  return true;
}
