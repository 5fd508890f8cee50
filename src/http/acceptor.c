/* The acceptor (acceptor.h): one thread, one epoll set holding the listening socket, an
 * eventfd that stops it, and the connections accepted whose first bytes have not arrived yet
 * (each armed once: EPOLLONESHOT, re-armed while only a prefix of "GET /events" is there). Those
 * wait on a list in accept order, so the silent ones past the wait are found from its head, and
 * at most HS_ACCEPT_WAITING of them: past that the oldest is handed over at once, so a flood of
 * silent connections meets the transport's own limits (per address, in all) without delay. */
#include "http/acceptor.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* A connection accepted, its first request not seen yet. */
typedef struct waiting {
  int fd;
  struct sockaddr_storage addr;
  socklen_t len;
  int64_t since; /* clock_mono_ms */
  struct waiting *prev, *next;
} waiting;

static struct {
  int listen_fd, ep, stop_fd, port, wait_ms;
  hs_accept_fn hand;
  pthread_t thread;
  bool running;
  waiting *head, *tail;
  int n_waiting;
  int64_t paused_until; /* out of descriptors: the listening socket is left alone until then */
} A = {.listen_fd = -1, .ep = -1, .stop_fd = -1};

#define OUT_OF_FDS_PAUSE_MS 250

static char listen_tag, stop_tag; /* their epoll data: addresses no waiting connection has */

int hs_acceptor_classify(const char *bytes, size_t n) {
  static const char want[] = "GET /events";
  size_t k = sizeof want - 1;
  if (memcmp(bytes, want, n < k ? n : k)) return 0;
  if (n <= k) return -1;
  char next = bytes[k];
  return next == ' ' || next == '?' || next == '/';
}

static void unlink_waiting(waiting *w) {
  if (w->prev) w->prev->next = w->next;
  if (w->next) w->next->prev = w->prev;
  if (A.head == w) A.head = w->next;
  if (A.tail == w) A.tail = w->prev;
  A.n_waiting--;
}

static void hand_over(waiting *w, bool stream) {
  epoll_ctl(A.ep, EPOLL_CTL_DEL, w->fd, NULL);
  unlink_waiting(w);
  A.hand(w->fd, (struct sockaddr *)&w->addr, w->len, stream);
  free(w);
}

/* Its first bytes arrived (or it closed): hand it over, or wait for more of them. */
static void look_at(waiting *w) {
  char first[16];
  ssize_t n = recv(w->fd, first, sizeof first, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) n = -2;
  int kind = n > 0 ? hs_acceptor_classify(first, (size_t)n) : n == -2 ? -1 : 0;
  if (kind >= 0) return hand_over(w, kind == 1); /* a closed or failed one too: the transport ends it */
  struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = w};
  epoll_ctl(A.ep, EPOLL_CTL_MOD, w->fd, &e);
}

static void accept_all(void) {
  for (;;) {
    waiting *w = xcalloc(1, sizeof *w);
    w->len = sizeof w->addr;
    w->fd = accept4(A.listen_fd, (struct sockaddr *)&w->addr, &w->len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (w->fd < 0) {
      free(w);
      if (errno == EMFILE || errno == ENFILE) { /* the backlog waits (its events would spin) */
        log_msg(LOG_ERROR, "accept: out of descriptors; accepting again in %d ms", OUT_OF_FDS_PAUSE_MS);
        epoll_ctl(A.ep, EPOLL_CTL_DEL, A.listen_fd, NULL);
        A.paused_until = clock_mono_ms() + OUT_OF_FDS_PAUSE_MS;
      }
      return; /* EAGAIN: the backlog is empty (or an error, tried again on the next event) */
    }
    w->since = clock_mono_ms();
    w->prev = A.tail;
    if (A.tail) A.tail->next = w;
    A.tail = w;
    if (!A.head) A.head = w;
    A.n_waiting++;
    struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = w};
    if (epoll_ctl(A.ep, EPOLL_CTL_ADD, w->fd, &e) != 0) hand_over(w, false);
  }
}

static void *acceptor_main(void *arg) {
  (void)arg;
  struct epoll_event ev[64];
  for (;;) {
    int64_t next = A.head ? A.head->since + A.wait_ms : -1, start = clock_mono_ms();
    if (A.paused_until && (next < 0 || A.paused_until < next)) next = A.paused_until;
    int n = epoll_wait(A.ep, ev, 64, next < 0 ? -1 : next <= start ? 0 : (int)(next - start));
    for (int i = 0; i < n; i++) {
      if (ev[i].data.ptr == &stop_tag) return NULL;
      if (ev[i].data.ptr == &listen_tag)
        accept_all();
      else
        look_at(ev[i].data.ptr);
    }
    /* after the batch, which may still hold an event of a connection handed over here */
    int64_t now = clock_mono_ms();
    while (A.head && (now - A.head->since >= A.wait_ms || A.n_waiting > HS_ACCEPT_WAITING))
      hand_over(A.head, false); /* silent, or too many: an ordinary one */
    if (A.paused_until && now >= A.paused_until) {
      struct epoll_event l = {.events = EPOLLIN, .data.ptr = &listen_tag};
      epoll_ctl(A.ep, EPOLL_CTL_ADD, A.listen_fd, &l);
      A.paused_until = 0;
    }
  }
}

bool hs_acceptor_start(const char *address, int port, int backlog, int wait_ms, hs_accept_fn hand, char err[256]) {
  struct sockaddr_storage ss = {0};
  socklen_t len;
  if (strchr(address, ':')) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port), len = sizeof *a6;
    if (inet_pton(AF_INET6, address, &a6->sin6_addr) != 1)
      return snprintf(err, 256, "BIND %s is not an address", address), false;
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port), len = sizeof *a4;
    if (inet_pton(AF_INET, address, &a4->sin_addr) != 1)
      return snprintf(err, 256, "BIND %s is not an address", address), false;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd >= 0 && ss.ss_family == AF_INET6) /* an IPv6 address only, as libmicrohttpd bound it */
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, backlog) != 0) {
    snprintf(err, 256, "cannot listen on %s:%d: %s", address, port, strerror(errno)); /* "Address already in use" */
    if (fd >= 0) close(fd);
    return false;
  }
  struct sockaddr_storage got;
  socklen_t got_len = sizeof got;
  getsockname(fd, (struct sockaddr *)&got, &got_len);
  A.port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                           : ((struct sockaddr_in *)&got)->sin_port);
  A.listen_fd = fd, A.hand = hand, A.wait_ms = wait_ms;
  A.ep = epoll_create1(EPOLL_CLOEXEC);
  A.stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct epoll_event l = {.events = EPOLLIN, .data.ptr = &listen_tag}, s = {.events = EPOLLIN, .data.ptr = &stop_tag};
  epoll_ctl(A.ep, EPOLL_CTL_ADD, fd, &l);
  epoll_ctl(A.ep, EPOLL_CTL_ADD, A.stop_fd, &s);
  if (pthread_create(&A.thread, NULL, acceptor_main, NULL) != 0) die("cannot start the acceptor thread");
  A.running = true;
  return true;
}

int hs_acceptor_port(void) { return A.port; }

void hs_acceptor_stop(void) {
  if (!A.running) return;
  shutdown(A.listen_fd, SHUT_RDWR); /* what would queue on it is reset at once */
  uint64_t one = 1;
  if (write(A.stop_fd, &one, sizeof one) < 0) log_msg(LOG_WARN, "acceptor: could not be told to stop");
  pthread_join(A.thread, NULL);
  while (A.head) {
    waiting *w = A.head;
    unlink_waiting(w);
    close(w->fd);
    free(w);
  }
  close(A.listen_fd), close(A.ep), close(A.stop_fd);
  A.listen_fd = A.ep = A.stop_fd = -1;
  A.paused_until = 0;
  A.running = false;
}
