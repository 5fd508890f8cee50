/* A list of watched connections under one mutex (added and removed once per connection);
 * phases, times and byte counts are atomics, written by the connection's thread and read by
 * the checker. Shutting a socket down happens under the mutex, and removal takes it too, so
 * the checker never touches a descriptor the server has already closed and maybe reused.
 *
 * The start of a request is seen from the kernel: TCP_INFO's tcpi_last_data_recv tells how
 * long ago data last arrived, so a connection waiting for a request that has received data
 * since it began waiting has a request under way; an idle keep-alive connection has not, and
 * only the server's idle timeout applies to it. */
#include "http/watch.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#define CHECK_EVERY_MS 200
/* The kernel counts in jiffies (up to 10 ms): data within this of a phase's start may belong
 * to the request before it. */
#define CLOCK_SLACK_MS 20

enum { PHASE_WAITING, PHASE_BODY, PHASE_BUSY };

struct hs_watch {
  int fd;
  _Atomic int phase;
  _Atomic int64_t since;        /* clock_mono_ms when the phase began */
  _Atomic int64_t request_from; /* waiting: when the request's first bytes arrived (0: none yet) */
  _Atomic size_t bytes;         /* body: bytes received */
  bool cut;                     /* its socket was shut down (checker only) */
  bool listed;                  /* on the checker's list (under the mutex) */
  hs_watch *prev, *next;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  hs_watch *head;
  pthread_t thread;
  bool running, stopping;
  int header_ms, min_rate;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void set_phase(hs_watch *w, int phase) {
  atomic_store(&w->since, clock_mono_ms());
  atomic_store(&w->request_from, 0);
  atomic_store(&w->bytes, 0);
  atomic_store(&w->phase, phase);
}

hs_watch *hs_watch_add(int fd) {
  hs_watch *w = xcalloc(1, sizeof *w);
  w->fd = fd;
  set_phase(w, PHASE_WAITING);
  pthread_mutex_lock(&W.mu);
  w->next = W.head;
  if (W.head) W.head->prev = w;
  W.head = w;
  w->listed = true;
  pthread_mutex_unlock(&W.mu);
  return w;
}

/* Takes w off the checker's list (W.mu held). */
static void unlist(hs_watch *w) {
  if (!w->listed) return;
  w->listed = false;
  if (w->prev)
    w->prev->next = w->next;
  else
    W.head = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
}

void hs_watch_remove(hs_watch *w) {
  pthread_mutex_lock(&W.mu);
  unlist(w);
  pthread_mutex_unlock(&W.mu);
  free(w);
}

void hs_watch_body(hs_watch *w) { set_phase(w, PHASE_BODY); }
void hs_watch_body_bytes(hs_watch *w, size_t n) { atomic_fetch_add(&w->bytes, n); }
void hs_watch_busy(hs_watch *w) { set_phase(w, PHASE_BUSY); }
void hs_watch_waiting(hs_watch *w) { set_phase(w, PHASE_WAITING); }

void hs_watch_last(hs_watch *w) {
  set_phase(w, PHASE_BUSY);
  pthread_mutex_lock(&W.mu);
  unlist(w);
  pthread_mutex_unlock(&W.mu);
}

/* When the request a waiting connection is receiving began (0: no data since it waits). */
static int64_t request_start(hs_watch *w, int64_t now) {
  int64_t from = atomic_load(&w->request_from);
  if (from) return from;
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(w->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
  int64_t last_data = now - (int64_t)ti.tcpi_last_data_recv;
  if (last_data <= atomic_load(&w->since) + CLOCK_SLACK_MS) return 0;
  atomic_store(&w->request_from, last_data); /* within one check of its first bytes */
  return last_data;
}

/* True when w has missed its phase's deadline. */
static bool overdue(hs_watch *w, int64_t now) {
  int phase = atomic_load(&w->phase);
  if (phase == PHASE_WAITING) {
    int64_t from = request_start(w, now);
    return from && now - from > W.header_ms;
  }
  if (phase == PHASE_BODY && W.min_rate > 0) {
    int64_t late = now - atomic_load(&w->since) - W.header_ms; /* past the grace period */
    return late > 0 && (int64_t)atomic_load(&w->bytes) < late * W.min_rate / 1000;
  }
  return false;
}

static void *check_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&W.mu);
  while (!W.stopping) {
    clock_cond_wait_ms(&W.cv, &W.mu, CHECK_EVERY_MS);
    int64_t now = clock_mono_ms();
    for (hs_watch *w = W.head; w && !W.stopping; w = w->next) {
      if (w->cut || !overdue(w, now)) continue;
      w->cut = true;
      shutdown(w->fd, SHUT_RDWR);
      log_json(LOG_INFO, "slow client cut off",
               json_pack("{s:s}", "phase", atomic_load(&w->phase) == PHASE_BODY ? "body" : "headers"));
    }
  }
  pthread_mutex_unlock(&W.mu);
  return NULL;
}

void hs_watch_start(int header_timeout_ms, int min_body_rate) {
  clock_cond_init(&W.cv);
  W.header_ms = header_timeout_ms, W.min_rate = min_body_rate;
  W.stopping = false, W.running = true;
  pthread_create(&W.thread, NULL, check_main, NULL);
}

void hs_watch_stop(void) {
  if (!W.running) return;
  thread_stop(W.thread, &W.mu, &W.cv, &W.stopping);
  W.running = false;
}
