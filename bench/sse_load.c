/* The live-updates load generator (bench/events.sh): many streams held open, messages written
 * at a fixed rate, and the time from each message's request to each stream's receipt.
 *
 *   sse_load streams URL TOKENS N SECONDS   open N streams (GET /events, the tokens of the file
 *                                           TOKENS in turn), print "READY <n>" once all answered,
 *                                           then read them for SECONDS (or until SIGTERM); SIGUSR1
 *                                           prints the figures so far and starts counting anew
 *   sse_load write URL TARGETS RATE SECONDS post RATE messages a second for SECONDS, open loop,
 *                                           each "bench <microseconds>" (the wall clock when it is
 *                                           sent) to a thread of TARGETS ("token jobId" lines)
 *
 * streams prints a "BENCH streams=... connected=... receipts=... p50_ms=... p99_ms=... max_ms=...
 * lost_streams=..." line: a receipt is a message.created event whose content is "bench <us>",
 * and its latency the wall clock at receipt less that time, so it covers the message's request,
 * its commit and the delivery (an upper bound of commit-to-receipt); the w_ figures are from
 * the message's createdAt instead (the server's clock when its handler wrote the row, before
 * the commit: a tighter upper bound, without the request's wait for a worker). write prints "BENCH
 * sent=... ok=... failed=... first_failure=<status> rate=... behind_max_ms=...". One epoll thread reads every stream;
 * each writer connection is a thread with a blocking keep-alive socket. Plain HTTP/1.1 on IPv4,
 * chunked bodies: a tool for bench/, not a client library. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in addr;
static char host[64];
static volatile sig_atomic_t stop, report;

static void on_term(int sig) {
  (void)sig;
  stop = 1;
}

static void on_usr1(int sig) {
  (void)sig;
  report = 1;
}

static int64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static int64_t mono_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void parse_url(const char *url) {
  int port = 80;
  if (sscanf(url, "http://%63[^:/]:%d", host, &port) < 1) {
    fprintf(stderr, "bad URL %s\n", url);
    exit(2);
  }
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "not an IPv4 address: %s\n", host);
    exit(2);
  }
}

static char **read_lines(const char *path, int *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(2);
  }
  char **v = NULL, line[4096];
  int cap = 0;
  *n = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!*line) continue;
    if (*n == cap) v = realloc(v, sizeof *v * (size_t)(cap = cap ? cap * 2 : 256));
    v[(*n)++] = strdup(line);
  }
  fclose(f);
  return v;
}

static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* ---- streams ---- */

typedef struct stream {
  int fd;
  bool sent, head_done, open, ended; /* sent: the request went out */
  char *buf;                         /* what arrived and is not parsed yet (raw HTTP, chunk framing and all) */
  size_t len, cap;
  size_t chunk_left; /* bytes of the current chunk still to come; 0: a size line is next */
  char line[8192];   /* the event stream's current line */
  size_t line_len;
} stream;

/* The receipts' latencies: from the message's request (lat), and from its createdAt (wlat). */
typedef struct series {
  int64_t *v;
  size_t n, cap;
} series;
static series lat, wlat;

static void add_latency(series *s, int64_t us) {
  if (s->n == s->cap) s->v = realloc(s->v, sizeof *s->v * (s->cap = s->cap ? s->cap * 2 : 65536));
  s->v[s->n++] = us;
}

/* The wall clock in microseconds of an ISO 8601 UTC time with milliseconds at p; 0 if none. */
static int64_t iso_us(const char *p) {
  struct tm t = {0};
  int ms = 0;
  if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min, &t.tm_sec,
             &ms) != 7)
    return 0;
  t.tm_year -= 1900, t.tm_mon -= 1;
  return ((int64_t)timegm(&t) * 1000 + ms) * 1000;
}

/* One line of the event stream: a receipt when it is the data of a bench message. */
static void on_line(const char *line, size_t n, int64_t at) {
  static const char mark[] = "\"content\":\"bench ";
  if (n < 6 || memcmp(line, "data: ", 6)) return;
  const char *p = memmem(line, n, mark, sizeof mark - 1);
  if (!p) return;
  int64_t sent = strtoll(p + sizeof mark - 1, NULL, 10);
  if (sent <= 0) return;
  add_latency(&lat, at - sent);
  static const char created[] = "\"createdAt\":\"";
  const char *c = memmem(line, n, created, sizeof created - 1);
  int64_t written = c ? iso_us(c + sizeof created - 1) : 0;
  if (written > 0) add_latency(&wlat, at - written + 500); /* the millisecond's middle */
}

/* The body's bytes, with chunk framing removed, split into lines. */
static void on_body(stream *s, const char *p, size_t n, int64_t at) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '\n') {
      on_line(s->line, s->line_len, at);
      s->line_len = 0;
    } else if (s->line_len < sizeof s->line) {
      s->line[s->line_len++] = p[i];
    }
  }
}

/* Parses what the stream holds; false when the server ended it. */
static bool parse(stream *s, int64_t at) {
  size_t at_byte = 0;
  if (!s->head_done) {
    char *end = memmem(s->buf, s->len, "\r\n\r\n", 4);
    if (!end) return true;
    if (strncmp(s->buf, "HTTP/1.1 200", 12)) {
      fprintf(stderr, "stream refused: %.60s\n", s->buf);
      return false;
    }
    s->head_done = s->open = true;
    at_byte = (size_t)(end - s->buf) + 4;
  }
  for (;;) {
    if (s->chunk_left) {
      size_t take = s->len - at_byte < s->chunk_left ? s->len - at_byte : s->chunk_left;
      on_body(s, s->buf + at_byte, take, at);
      at_byte += take, s->chunk_left -= take;
      if (s->chunk_left) break;
      continue;
    }
    char *nl = memmem(s->buf + at_byte, s->len - at_byte, "\r\n", 2);
    if (!nl) break;
    size_t line_len = (size_t)(nl - (s->buf + at_byte));
    if (line_len == 0) { /* the CRLF after a chunk */
      at_byte += 2;
      continue;
    }
    unsigned long size = strtoul(s->buf + at_byte, NULL, 16);
    at_byte += line_len + 2;
    if (size == 0) return false; /* the last chunk */
    s->chunk_left = size;
  }
  memmove(s->buf, s->buf + at_byte, s->len - at_byte);
  s->len -= at_byte;
  return true;
}

static double pct(series *s, double p) { return s->n ? (double)s->v[(size_t)((double)(s->n - 1) * p)] / 1000.0 : 0.0; }

/* One BENCH line of the receipts counted so far; they are forgotten after it. The w_ figures
 * are from the message's createdAt (the server's clock as the handler wrote the row, before
 * its commit): an upper bound of commit-to-receipt that leaves out the request's wait before
 * its handler ran. */
static void print_receipts(int n, int connected, int refused, int lost) {
  qsort(lat.v, lat.n, sizeof *lat.v, cmp_i64);
  qsort(wlat.v, wlat.n, sizeof *wlat.v, cmp_i64);
  printf("BENCH streams=%d connected=%d refused=%d lost_streams=%d receipts=%zu p50_ms=%.2f p90_ms=%.2f "
         "p99_ms=%.2f p999_ms=%.2f max_ms=%.2f w_receipts=%zu w_p50_ms=%.2f w_p99_ms=%.2f w_max_ms=%.2f\n",
         n, connected, refused, lost, lat.n, pct(&lat, 0.5), pct(&lat, 0.9), pct(&lat, 0.99), pct(&lat, 0.999),
         pct(&lat, 1.0), wlat.n, pct(&wlat, 0.5), pct(&wlat, 0.99), pct(&wlat, 1.0));
  fflush(stdout);
  lat.n = wlat.n = 0;
}

static int connect_nb(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

static int cmd_streams(const char *url, const char *tokens_path, int n, int seconds) {
  parse_url(url);
  raise_fd_limit();
  int ntok;
  char **tokens = read_lines(tokens_path, &ntok);
  stream *st = calloc((size_t)n, sizeof *st);
  int ep = epoll_create1(0);
  int opened = 0, connected = 0, refused = 0, lost = 0, in_flight = 0;
  const int window = 64; /* requests awaiting their answer at once, while opening */
  int64_t ready_at = 0, end_at = 0;
  struct epoll_event evs[512];
  char rbuf[65536];
  for (;;) {
    while (opened < n && in_flight < window) { /* open the next ones */
      stream *s = &st[opened];
      s->fd = connect_nb();
      if (s->fd < 0) {
        perror("connect");
        return 1;
      }
      char req[4096];
      int len = snprintf(req, sizeof req,
                         "GET /events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n"
                         "Authorization: Bearer %s\r\n\r\n",
                         host, tokens[opened % ntok]);
      struct epoll_event e = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.ptr = s};
      epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &e);
      s->buf = malloc(s->cap = 4096);
      s->len = (size_t)len; /* the request waits in buf until the socket is writable */
      memcpy(s->buf, req, (size_t)len);
      opened++, in_flight++;
    }
    if (!ready_at && connected + refused == n) {
      ready_at = mono_us();
      end_at = ready_at + (int64_t)seconds * 1000000;
      printf("READY %d\n", connected);
      fflush(stdout);
    }
    if (report) {
      report = 0;
      print_receipts(n, connected, refused, lost);
    }
    if (stop || (end_at && mono_us() >= end_at)) break;
    int k = epoll_wait(ep, evs, 512, 200);
    int64_t at = now_us();
    for (int i = 0; i < k; i++) {
      stream *s = evs[i].data.ptr;
      if (!s->sent && (evs[i].events & EPOLLOUT)) { /* the request, once connected */
        ssize_t w = send(s->fd, s->buf, s->len, MSG_NOSIGNAL);
        if (w != (ssize_t)s->len) {
          fprintf(stderr, "could not send a request\n");
          return 1;
        }
        s->len = 0, s->sent = true;
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = s};
        epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e);
        continue;
      }
      if (s->ended || !s->sent) continue;
      bool was_open = s->open, alive = true;
      for (;;) {
        ssize_t r = recv(s->fd, rbuf, sizeof rbuf, 0);
        if (r > 0) {
          if (s->len + (size_t)r > s->cap) s->buf = realloc(s->buf, s->cap = (s->len + (size_t)r) * 2);
          memcpy(s->buf + s->len, rbuf, (size_t)r);
          s->len += (size_t)r;
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        alive = false; /* closed or failed */
        break;
      }
      if (alive) alive = parse(s, at);
      if (!was_open && s->open) connected++, in_flight--;
      if (!alive) {
        s->ended = true;
        epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
        close(s->fd);
        if (!was_open && !s->open) refused++, in_flight--;
        if (s->open && ready_at) lost++;
      }
    }
  }
  print_receipts(n, connected, refused, lost);
  return 0;
}

/* ---- the writer ---- */

typedef struct writer {
  int id, nconns;
  char **targets;
  int ntargets;
  double rate; /* messages a second, all writers together */
  int64_t start_us, end_us;
  long sent, ok, failed;
  int first_failure; /* the status of the first failed request (-1: the connection failed) */
  int64_t behind_max_us;
} writer;

static int connect_blocking(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    perror("connect");
    exit(1);
  }
  return fd;
}

/* Reads one answer (headers and a Content-Length body); its status, or -1. */
static int read_answer(int fd) {
  char buf[16384];
  size_t len = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
    if (r <= 0) return -1;
    len += (size_t)r;
    buf[len] = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (!end) continue;
    char *cl = strcasestr(buf, "\r\nContent-Length:");
    size_t body = cl ? strtoul(cl + 17, NULL, 10) : 0;
    size_t need = (size_t)(end - buf) + 4 + body;
    while (len < need) {
      r = recv(fd, buf, sizeof buf, 0); /* the body is not looked at */
      if (r <= 0) return -1;
      len += (size_t)r;
    }
    return atoi(buf + 9);
  }
}

static void *writer_main(void *arg) {
  writer *w = arg;
  int fd = connect_blocking();
  double every_us = 1e6 / w->rate * w->nconns;
  for (long k = 0;; k++) {
    int64_t due = w->start_us + (int64_t)((double)k * every_us + every_us * w->id / w->nconns);
    if (due >= w->end_us || stop) break;
    int64_t t = mono_us();
    if (due > t) {
      usleep((useconds_t)(due - t));
    } else if (t - due > w->behind_max_us) {
      w->behind_max_us = t - due;
    }
    const char *line = w->targets[(k * w->nconns + w->id) % w->ntargets];
    char token[2048], job[64], body[128], req[4096];
    if (sscanf(line, "%2047s %63s", token, job) != 2) continue;
    int blen = snprintf(body, sizeof body, "{\"content\":\"bench %lld\"}", (long long)now_us());
    int len = snprintf(req, sizeof req,
                       "POST /jobs/%s/messages HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                       "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                       job, host, token, blen, body);
    w->sent++;
    int status = send(fd, req, (size_t)len, MSG_NOSIGNAL) == len ? read_answer(fd) : -1;
    if (status != 201) {
      if (!w->failed++) w->first_failure = status;
      close(fd);
      fd = connect_blocking();
    } else {
      w->ok++;
    }
  }
  close(fd);
  return NULL;
}

static int cmd_write(const char *url, const char *targets_path, double rate, int seconds) {
  parse_url(url);
  int n;
  char **targets = read_lines(targets_path, &n);
  enum { CONNS = 8 };
  writer w[CONNS];
  pthread_t th[CONNS];
  int64_t start = mono_us() + 100000;
  for (int i = 0; i < CONNS; i++) {
    w[i] = (writer){.id = i,
                    .nconns = CONNS,
                    .targets = targets,
                    .ntargets = n,
                    .rate = rate,
                    .start_us = start,
                    .end_us = start + (int64_t)seconds * 1000000};
    pthread_create(&th[i], NULL, writer_main, &w[i]);
  }
  long sent = 0, ok = 0, failed = 0;
  int64_t behind = 0;
  int first_failure = 0;
  for (int i = 0; i < CONNS; i++) {
    pthread_join(th[i], NULL);
    sent += w[i].sent, ok += w[i].ok, failed += w[i].failed;
    if (w[i].behind_max_us > behind) behind = w[i].behind_max_us;
    if (w[i].failed && !first_failure) first_failure = w[i].first_failure;
  }
  double took = (double)(mono_us() - start) / 1e6;
  printf("BENCH sent=%ld ok=%ld failed=%ld first_failure=%d rate=%.1f behind_max_ms=%.1f\n", sent, ok, failed,
         first_failure, (double)ok / took, (double)behind / 1000.0);
  return ok ? 0 : 1; /* failures are counted in the results (a loaded machine may refuse a few) */
}

int main(int argc, char **argv) {
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGUSR1, on_usr1);
  signal(SIGPIPE, SIG_IGN);
  if (argc == 6 && !strcmp(argv[1], "streams")) return cmd_streams(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
  if (argc == 6 && !strcmp(argv[1], "write")) return cmd_write(argv[2], argv[3], atof(argv[4]), atoi(argv[5]));
  fprintf(stderr, "usage: sse_load streams URL TOKENS N SECONDS | sse_load write URL TARGETS RATE SECONDS\n");
  return 2;
}
