/* A latency probe whose figures can be checked: closed-loop keep-alive connections (one
 * thread each) sending one GET at a time, every request's latency recorded exactly, plus a
 * canary thread that sleeps 1 ms at a time and reports when it was kept off the CPU for
 * longer, which tells a stall of the server from a stall of the whole machine.
 *
 *   probe [-c conns] [-d seconds] [-H 'Name: value']... [-g gap_ms] [-o requests.tsv] URL
 *
 * Prints a summary, then a "BENCH key=value ..." line in the form bench/stats.lua gives wrk's
 * reports, plus canary_max_ms and canary_gaps. -o writes one line per request: start (s
 * since the run began), latency (ms), status, connection.
 *
 * Unlike wrk, whose histogram adds the requests a stalled connection did not send
 * (coordinated-omission correction, docs/performance-history.md finding 3), every figure
 * here is a request that was made, so the mean can be checked: it equals connections *
 * seconds / requests less the time between requests.
 * Plain HTTP/1.1 on IPv4 only: it is a tool for bench/, not a client library. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  double start_s, ms;
  int status;
} sample;

typedef struct {
  int id;
  sample *v;
  size_t n, cap;
  long errors, non2xx;
} conn_state;

typedef struct {
  double at_s, ms;
} gap;

static struct sockaddr_in addr;
static char request[8192];
static size_t request_len;
static double t_start, t_end;
static double gap_ms = 5;
static gap *gaps;
static size_t ngaps, gaps_cap;
static volatile int running = 1;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *msg) {
  fprintf(stderr, "probe: %s\n", msg);
  exit(2);
}

static int connect_to(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Reads one response; returns its status, 0 on a broken connection. *close_after is set
 * when the server will close the connection. */
static int read_response(int fd, char *buf, size_t cap, bool *close_after) {
  size_t have = 0;
  char *end = NULL;
  while (!end) {
    if (have == cap - 1) return 0;
    ssize_t r = recv(fd, buf + have, cap - 1 - have, 0);
    if (r <= 0) return 0;
    have += (size_t)r;
    buf[have] = 0;
    end = strstr(buf, "\r\n\r\n");
  }
  int status = 0;
  if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) return 0;
  long length = 0;
  *close_after = false;
  for (char *line = strstr(buf, "\r\n") + 2; line < end; line = strstr(line, "\r\n") + 2) {
    if (strncasecmp(line, "Content-Length:", 15) == 0) length = strtol(line + 15, NULL, 10);
    if (strncasecmp(line, "Connection: close", 17) == 0) *close_after = true;
  }
  long body_have = (long)(have - (size_t)(end + 4 - buf));
  while (body_have < length) { /* drain the body without keeping it */
    ssize_t r = recv(fd, buf, cap - 1, 0);
    if (r <= 0) return 0;
    body_have += r;
  }
  return status;
}

static void record(conn_state *c, double start, double ms, int status) {
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 65536;
    c->v = realloc(c->v, c->cap * sizeof *c->v);
    if (!c->v) die("out of memory");
  }
  c->v[c->n++] = (sample){start - t_start, ms, status};
}

static void *connection(void *arg) {
  conn_state *c = arg;
  static __thread char buf[65536];
  int fd = -1;
  while (running && now_s() < t_end) {
    if (fd < 0 && (fd = connect_to()) < 0) {
      c->errors++;
      usleep(10000);
      continue;
    }
    double t0 = now_s();
    bool close_after = false;
    int status = 0;
    if (send(fd, request, request_len, MSG_NOSIGNAL) == (ssize_t)request_len)
      status = read_response(fd, buf, sizeof buf, &close_after);
    double t1 = now_s();
    if (status == 0) {
      c->errors++;
      close(fd);
      fd = -1;
      continue;
    }
    if (status < 200 || status > 299) c->non2xx++;
    record(c, t0, (t1 - t0) * 1e3, status);
    if (close_after) close(fd), fd = -1;
  }
  if (fd >= 0) close(fd);
  return NULL;
}

static void *canary(void *arg) {
  (void)arg;
  struct timespec ms1 = {0, 1000000};
  while (running && now_s() < t_end) {
    double t0 = now_s();
    nanosleep(&ms1, NULL);
    double late = (now_s() - t0) * 1e3 - 1;
    if (late > gap_ms) {
      if (ngaps == gaps_cap) {
        gaps_cap = gaps_cap ? 2 * gaps_cap : 256;
        gaps = realloc(gaps, gaps_cap * sizeof *gaps);
        if (!gaps) die("out of memory");
      }
      gaps[ngaps++] = (gap){t0 - t_start, late};
    }
  }
  return NULL;
}

static int by_ms(const void *a, const void *b) {
  double x = ((const sample *)a)->ms, y = ((const sample *)b)->ms;
  return (x > y) - (x < y);
}

static double pct(const sample *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)(p / 100.0 * (double)n);
  return v[i < n ? i : n - 1].ms;
}

static void parse_url(const char *url, char *host, size_t hcap, int *port, const char **path) {
  if (strncmp(url, "http://", 7) != 0) die("only http:// URLs");
  const char *h = url + 7, *slash = strchr(h, '/');
  *path = slash ? slash : "/";
  size_t hl = slash ? (size_t)(slash - h) : strlen(h);
  if (hl >= hcap) die("host too long");
  memcpy(host, h, hl);
  host[hl] = 0;
  *port = 80;
  char *colon = strchr(host, ':');
  if (colon) *colon = 0, *port = atoi(colon + 1);
}

int main(int argc, char **argv) {
  int conns = 4;
  double seconds = 10;
  const char *out = NULL, *headers[32];
  int nheaders = 0, opt;
  while ((opt = getopt(argc, argv, "c:d:H:g:o:")) != -1) {
    switch (opt) {
    case 'c': conns = atoi(optarg); break;
    case 'd': seconds = atof(optarg); break;
    case 'g': gap_ms = atof(optarg); break;
    case 'o': out = optarg; break;
    case 'H':
      if (nheaders == 32) die("too many headers");
      headers[nheaders++] = optarg;
      break;
    default: die("usage: probe [-c conns] [-d seconds] [-H header]... [-g gap_ms] [-o file] URL");
    }
  }
  if (optind != argc - 1 || conns < 1 || conns > 1024 || seconds <= 0) die("usage: probe [-c conns] [-d seconds] [-H header]... [-g gap_ms] [-o file] URL");
  char host[256];
  int port;
  const char *path;
  parse_url(argv[optind], host, sizeof host, &port, &path);
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
  if (getaddrinfo(host, NULL, &hints, &ai) != 0) die("cannot resolve the host");
  addr = *(struct sockaddr_in *)ai->ai_addr;
  addr.sin_port = htons((uint16_t)port);
  freeaddrinfo(ai);

  int len = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n", path, host, port);
  for (int i = 0; i < nheaders; i++) len += snprintf(request + len, sizeof request - (size_t)len, "%s\r\n", headers[i]);
  len += snprintf(request + len, sizeof request - (size_t)len, "\r\n");
  if (len >= (int)sizeof request) die("request too long");
  request_len = (size_t)len;

  conn_state *cs = calloc((size_t)conns, sizeof *cs);
  pthread_t *th = calloc((size_t)conns, sizeof *th), canary_th;
  if (!cs || !th) die("out of memory");
  t_start = now_s();
  t_end = t_start + seconds;
  pthread_create(&canary_th, NULL, canary, NULL);
  for (int i = 0; i < conns; i++) {
    cs[i].id = i;
    pthread_create(&th[i], NULL, connection, &cs[i]);
  }
  for (int i = 0; i < conns; i++) pthread_join(th[i], NULL);
  running = 0;
  pthread_join(canary_th, NULL);
  double elapsed = now_s() - t_start;

  size_t n = 0;
  long errors = 0, non2xx = 0;
  for (int i = 0; i < conns; i++) n += cs[i].n, errors += cs[i].errors, non2xx += cs[i].non2xx;
  sample *all = malloc((n ? n : 1) * sizeof *all);
  if (!all) die("out of memory");
  FILE *f = out ? fopen(out, "w") : NULL;
  if (out && !f) die("cannot write the -o file");
  size_t k = 0;
  double sum = 0;
  for (int i = 0; i < conns; i++)
    for (size_t j = 0; j < cs[i].n; j++) {
      all[k++] = cs[i].v[j];
      sum += cs[i].v[j].ms;
      if (f) fprintf(f, "%.6f\t%.3f\t%d\t%d\n", cs[i].v[j].start_s, cs[i].v[j].ms, cs[i].v[j].status, i);
    }
  if (f) fclose(f);
  double mean = n ? sum / (double)n : 0;
  /* slowest first for the list below, then ascending for percentiles */
  qsort(all, n, sizeof *all, by_ms);
  double longest_gap = 0;
  for (size_t i = 0; i < ngaps; i++)
    if (gaps[i].ms > longest_gap) longest_gap = gaps[i].ms;

  printf("%zu requests in %.2f s on %d connections: %.0f req/s, %ld non-2xx, %ld errors\n", n, elapsed, conns,
         (double)n / elapsed, non2xx, errors);
  printf("latency ms: mean %.3f (the most %d connections allow: %.3f)  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
         mean, conns, n ? conns * elapsed * 1e3 / (double)n : 0, pct(all, n, 50), pct(all, n, 90), pct(all, n, 99),
         pct(all, n, 99.9), n ? all[n - 1].ms : 0);
  printf("canary (1 ms sleeps): %zu late by more than %.0f ms, the longest %.1f ms\n", ngaps, gap_ms, longest_gap);
  for (size_t i = 0; i < ngaps && i < 20; i++) printf("  canary late %.1f ms at %.3f s\n", gaps[i].ms, gaps[i].at_s);
  for (size_t i = 0; i < n && i < 10; i++)
    printf("  slow request %.1f ms at %.3f s (status %d)\n", all[n - 1 - i].ms, all[n - 1 - i].start_s, all[n - 1 - i].status);
  /* the key=value line bench/lib.sh's record() reads from wrk's reports (bench/stats.lua) */
  printf("BENCH requests=%zu duration_s=%.3f rps=%.1f mean_ms=%.3f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f non2xx=%ld "
         "connect_err=0 read_err=%ld write_err=0 timeouts=0 canary_max_ms=%.1f canary_gaps=%zu\n",
         n, elapsed, (double)n / elapsed, mean, pct(all, n, 50), pct(all, n, 99), n ? all[n - 1].ms : 0, non2xx, errors,
         longest_gap, ngaps);
  for (int i = 0; i < conns; i++) free(cs[i].v);
  free(cs), free(th), free(all), free(gaps);
  return 0;
}
