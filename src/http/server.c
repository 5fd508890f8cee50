/* libmicrohttpd glue: the only file that includes microhttpd.h. It turns MHD's callbacks into
 * the steps of the pipeline (http/pipeline.h), MHD's connections into the pipeline's abstract
 * connection (hs_conn_ops), the prepared answers (http/answer.h) into MHD responses, and MHD's
 * suspend/resume into the worker lanes' callbacks (http/lanes.h).
 *
 * The listening socket is the acceptor's (http/acceptor.h), which hands each connection to one
 * of two MHD daemons without listening sockets of their own: a connection whose first request
 * is GET /events to the streams' daemon (HTTP_STREAM_THREADS event threads, a pool sized for
 * the header limit, one request per connection), any other to the ordinary one, so that parked
 * streams never lengthen the walk MHD makes over its suspended connections at every resume.
 * HTTP_MAX_CONNECTIONS holds for the two together (open_connections).
 *
 * MHD runs a few event threads (epoll, one per core) and calls on_uri with the request line,
 * then on_request several times per request: first with the headers (hs_call_start), then with
 * body chunks (hs_call_feed), then once with no data (hs_call_run_here). A request answered on
 * the event thread is queued at once; any other is suspended and queued on a lane, whose worker
 * runs hs_dispatch and resumes the connection, which MHD then calls once more to take the
 * answer. Answering only after the body keeps the connection alive. A JSON answer written with
 * the writer (hs_ok_jw) is sent from the arena as it is. on_completed writes the access log
 * line and drops the request's arena. Every connection is watched for slow clients from accept
 * to close (http/watch.h).
 *
 * A streamed answer (http/stream.h) is a response from a content-reader callback of unknown
 * size (chunked): the callback takes what the stream holds, or suspends the connection and
 * returns 0 when it holds nothing, and the stream's next write resumes it; so a parked stream
 * holds no thread and MHD keeps no timer for it. Once its headers are queued the stream counts
 * as answered: its access log line is written then, and it no longer counts as in flight, so a
 * shutdown's drain does not wait for it; the stop asks the streams' owners for their last
 * words first (hs_streams_stop) and cuts what does not finish, because MHD must not stop with
 * a connection suspended. */
#include "http/server.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "http/acceptor.h"
#include "http/answer.h"
#include "http/lanes.h"
#include "http/pipeline.h"
#include "http/stream.h"
#include "http/watch.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* libmicrohttpd's per-connection pool (headers, read and write buffers). It clears the pool
 * on every request, so its size is a per-request cost; 16 KiB holds any sane header set. A
 * stream's connection keeps its pool (most of it touched) as long as it lasts, so the streams'
 * daemon gives each just what the largest header set allowed (HTTP_MAX_HEADER_BYTES) needs,
 * with STREAM_POOL_SLACK for libmicrohttpd's own records and the writes (12 KiB by default). */
#define CONNECTION_MEMORY (16 * 1024)
#define STREAM_POOL_SLACK (4 * 1024)

typedef struct conn_ctx {
  hs_call call;
  hs_work work;  /* on a lane, then held */
  bool started;  /* on_request has seen the headers (the context exists from the request line on) */
  bool answered; /* a response was queued */
  bool done;     /* a worker ran the pipeline; the answer waits to be queued */
  bool streaming;  /* the answer is a stream, answered and logged when it was queued */
  bool on_streams; /* a connection of the streams' daemon: its one request answered, it closes */
  struct timespec start;
  hs_watch *watch; /* the connection's deadlines (http/watch.h) */
  /* the request arena's first chunk, so a small request allocates nothing else (kept last:
   * it is not zeroed) */
  _Alignas(max_align_t) unsigned char arena_buf[304]; /* what is left of 1 KiB */
} conn_ctx;

/* glibc serves blocks up to 1032 bytes from a per-thread cache; a larger one consolidates
 * the heap first, which measurably slows every request */
_Static_assert(sizeof(conn_ctx) <= 1024, "conn_ctx should stay within glibc's tcache sizes");
_Static_assert(sizeof(conn_ctx) > 1024 - 16, "arena_buf should take what is left of 1 KiB");

static struct MHD_Daemon *daemon_handle, *stream_daemon; /* ordinary connections; streams' (http/acceptor.h) */
static char streams_tag; /* the streams' daemon's callbacks get its address as their cls */
static _Atomic int inflight;
static _Atomic int open_connections; /* both daemons' (HTTP_MAX_CONNECTIONS holds for the two) */
static int connection_cap;

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

static double elapsed_ms(const conn_ctx *ctx) {
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  return (double)(end.tv_sec - ctx->start.tv_sec) * 1e3 + (double)(end.tv_nsec - ctx->start.tv_nsec) / 1e6;
}

/* A stream is answered once its headers are queued: its access line (the time to the answer)
 * is written then, and it no longer counts as in flight. */
static void log_answered(conn_ctx *ctx) {
  hs_call_log(&ctx->call, elapsed_ms(ctx), false);
  atomic_fetch_sub(&inflight, 1);
  hs_call_fini(&ctx->call); /* nothing of the request is needed for the stream's life: its memory goes now */
}

/* ---- sending the answer ---- */

static void add_header(void *resp, const char *name, const char *value) { MHD_add_response_header(resp, name, value); }

/* A stream's connection, as http/stream.h sees it. */
static void stream_suspend(void *conn) { MHD_suspend_connection(conn); }
static void stream_resume(void *conn) { MHD_resume_connection(conn); }
static void stream_cut(void *conn, int fd) {
  (void)conn;
  if (fd >= 0) shutdown(fd, SHUT_RDWR); /* MHD sees the peer gone and closes the connection */
}
static const hs_stream_transport mhd_stream_ops = {stream_suspend, stream_resume, stream_cut};

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  ssize_t n = hs_stream_read(cls, buf, max);
  return n == -1 ? MHD_CONTENT_READER_END_OF_STREAM : n == -2 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void stream_done(void *cls) { hs_stream_gone(cls); }

/* A stream's socket buffers what the client has not read yet up to this: beyond it writes wait
 * in the stream, where the backlog is counted and capped (kernel autotuning would hide a slow
 * reader's backlog in megabytes of socket memory). */
#define STREAM_SNDBUF (64 * 1024)

/* The stream's response: headers now, then what its owner writes. The stream is the
 * transport's from here on (req->stream cleared), answered and no longer in flight. */
static struct MHD_Response *stream_response(struct MHD_Connection *conn, conn_ctx *ctx) {
  hs_req *req = &ctx->call.req;
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_reader, req->stream, stream_done);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  int fd = ci ? ci->connect_fd : -1;
  int sndbuf = STREAM_SNDBUF;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  hs_stream_attach(req->stream, &mhd_stream_ops, conn, fd);
  return resp;
}

static enum MHD_Result send_answer(struct MHD_Connection *conn, conn_ctx *ctx) {
  hs_call *c = &ctx->call;
  hs_req *req = &c->req;
  ctx->answered = true;
  hs_answer_prepare(c); /* answers that did not go through hs_dispatch (413 before the body, preflights) */
  struct MHD_Response *resp;
  hs_stream *stream = req->stream;
  if (stream) {
    resp = stream_response(conn, ctx);
  } else if (req->res_content_type && req->res_fd >= 0) {
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
  if (ctx->on_streams) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(conn, (unsigned)req->status, resp);
  MHD_destroy_response(resp); /* a stream's is freed (stream_done) when its connection lets go of it */
  if (stream) {
    req->stream = NULL;
    ctx->streaming = true;
    log_answered(ctx);
  }
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
  conn_ctx *ctx = xmalloc(sizeof *ctx);
  memset(&ctx->work, 0, offsetof(conn_ctx, arena_buf) - offsetof(conn_ctx, work)); /* hs_call_init zeroes the call */
  ctx->on_streams = cls != NULL;
  hs_call_init(&ctx->call, conn, &mhd_conn_ops, uri, ctx->arena_buf, sizeof ctx->arena_buf);
  return ctx;
}

/* Every connection is watched from accept to close (http/watch.h). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  (void)cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    atomic_fetch_add(&open_connections, 1);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? hs_watch_add(ci->connect_fd) : NULL;
    return;
  }
  atomic_fetch_sub(&open_connections, 1);
  if (*socket_context) {
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
  if (ctx->watch && ctx->on_streams)
    hs_watch_last(ctx->watch); /* the streams' daemon serves one request a connection */
  else if (ctx->watch)
    hs_watch_busy(ctx->watch);
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
  if (ctx->started && !ctx->streaming) { /* else the connection ended before the request's headers */
    hs_call_log(&ctx->call, elapsed_ms(ctx), toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    atomic_fetch_sub(&inflight, 1);
  }
  if (ctx->started && ctx->watch) hs_watch_waiting(ctx->watch);
  hs_call_fini(&ctx->call);
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

/* Descriptors beyond the connections: database, files, logs, pipes. */
#define SPARE_FDS 512

/* Every connection takes a descriptor: raises the process's soft limit towards
 * HTTP_MAX_CONNECTIONS (the hard limit caps it, and then the connections). */
static unsigned connection_limit(void) {
  struct rlimit rl;
  rlim_t want = (rlim_t)CFG.http_max_connections + HS_ACCEPT_WAITING + SPARE_FDS;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return (unsigned)CFG.http_max_connections;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur >= want) return (unsigned)CFG.http_max_connections;
  rlim_t spare = HS_ACCEPT_WAITING + SPARE_FDS;
  unsigned fit = rl.rlim_cur > spare * 2 ? (unsigned)(rl.rlim_cur - spare) : (unsigned)rl.rlim_cur / 2;
  log_msg(LOG_WARN, "HTTP_MAX_CONNECTIONS lowered to %u: the descriptor limit is %llu", fit,
          (unsigned long long)rl.rlim_cur);
  return fit;
}

/* One daemon: a pool of event threads over connections the acceptor hands it; tag (the
 * callbacks' cls) is &streams_tag for the streams' daemon. */
static struct MHD_Daemon *start_daemon(unsigned threads, size_t memory, unsigned limit, void *tag) {
  unsigned flags =
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
  return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                          NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, tag, MHD_OPTION_CONNECTION_TIMEOUT,
                          (unsigned)CFG.http_idle_timeout, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                          (unsigned)CFG.http_max_connections_per_ip, MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
                          MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_THREAD_POOL_SIZE, threads,
                          MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024), MHD_OPTION_END);
}

/* The acceptor's hand-over: a stream request to the streams' daemon, anything else to the
 * other; past HTTP_MAX_CONNECTIONS open in all, closed. MHD closes the socket itself when it
 * cannot take it (the per-address cap, which each daemon counts for its own connections). */
static void hand_connection(int fd, const struct sockaddr *addr, socklen_t len, bool stream) {
  if (atomic_load(&open_connections) >= connection_cap) {
    close(fd);
    log_msg(LOG_WARN, "a connection was refused: %d connections are open (HTTP_MAX_CONNECTIONS)", connection_cap);
    return;
  }
  MHD_add_connection(stream ? stream_daemon : daemon_handle, fd, addr, len);
}

/* How long the acceptor waits for a connection's first bytes before it hands it over as an
 * ordinary one: clients send their request with the handshake's last packet. */
#define ACCEPT_WAIT_MS 1000

bool hs_server_start(const char *bind, int port, char err[256]) {
  hs_pipeline_init();
  unsigned limit = connection_limit();
  connection_cap = (int)limit;
  daemon_handle = start_daemon((unsigned)CFG.http_threads, CONNECTION_MEMORY, limit, NULL);
  size_t stream_memory = (size_t)CFG.http_max_header_bytes + STREAM_POOL_SLACK;
  if (stream_memory > CONNECTION_MEMORY) stream_memory = CONNECTION_MEMORY;
  stream_daemon = start_daemon((unsigned)CFG.http_stream_threads, stream_memory, limit, &streams_tag);
  if (!daemon_handle || !stream_daemon) return snprintf(err, 256, "cannot start the HTTP event threads"), false;
  int wait_ms = CFG.http_header_timeout * 1000 < ACCEPT_WAIT_MS ? CFG.http_header_timeout * 1000 : ACCEPT_WAIT_MS;
  if (!hs_acceptor_start(bind, port, 1024, wait_ms, hand_connection, err)) return false;
  hs_watch_start(CFG.http_header_timeout * 1000, CFG.http_body_min_rate);
  hs_lanes_start(&mhd_lane_ops, CFG.http_workers, CFG.http_slow_workers);
  return true;
}

void hs_server_load(int *in_flight, int *handlers_running) {
  *in_flight = atomic_load(&inflight);
  *handlers_running = hs_lanes_busy();
}

int hs_server_port(void) { return hs_acceptor_port(); }

/* How long a stop waits for the streams to send their last event and finish. */
#define STREAM_STOP_MS 1000

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
  hs_acceptor_stop();                        /* refuses new connections at once */
  int cut = hs_streams_stop(STREAM_STOP_MS); /* the owners' last words, before the drain */
  if (cut) log_msg(LOG_WARN, "%d stream(s) cut at shutdown: their clients did not take their last event", cut);
  bool drained = wait_until(nothing_in_flight, clock_mono_ms() + grace_ms);
  hs_lanes_cancel(); /* waiting requests answered 503, held answers released */
  if (!drained) wait_until(only_handlers_left, clock_mono_ms() + 1000);
  if (!wait_until(no_handler_running, clock_mono_ms() + 1000)) return false;
  hs_lanes_join();
  hs_watch_stop();
  MHD_stop_daemon(stream_daemon);
  MHD_stop_daemon(daemon_handle);
  daemon_handle = stream_daemon = NULL;
  return true;
}
