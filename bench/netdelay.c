/* A network hop with a fixed delay, for bench/remote.sh on kernels without netem (this
 * machine's has no sch_netem): a TCP relay that accepts on LISTEN_ADDR:PORT, connects each
 * client to TARGET_ADDR:PORT, and passes every chunk it reads on ONE_WAY_US microseconds later,
 * in each direction, so a request-and-answer exchange takes twice that plus the relay's own
 * cost. Order is kept per direction; a direction holding more than 8 MiB stops reading until it
 * drains (TCP's own flow control does the rest). One thread, epoll and a timerfd; bench/remote.sh
 * runs it at nice -15, as a network's own work runs ahead of the hosts' processes.
 *
 *   netdelay LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT ONE_WAY_US
 *
 * It runs until killed. Benchmark tooling only: not part of the service. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define MAX_HELD (8 * 1024 * 1024)

typedef struct chunk {
  struct chunk *next;
  int64_t due_ns;
  size_t len, off;
  char data[];
} chunk;

typedef struct side side;
typedef struct pair pair;

struct side { /* one socket, and what waits to be written to it */
  int fd;
  pair *p;
  side *peer;
  chunk *head, *tail;
  size_t held;       /* bytes waiting to be written to this socket */
  bool eof_in;       /* this socket sent EOF: once its peer's queue drains, shut the peer's write */
  bool shut, paused; /* paused: not reading, its peer's queue is full */
};

struct pair {
  side a, b;
  bool dead;
  pair *next_dead;
};

static int ep, tfd;
static int64_t one_way_ns;
static struct sockaddr_in target;
static pair *graveyard;

/* every pair with something queued, scanned for the next deadline (a few dozen connections) */
#define MAX_PAIRS 4096
static pair *live[MAX_PAIRS];
static int nlive;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void watch(side *s, uint32_t events, int op) {
  struct epoll_event ev = {.events = events, .data.ptr = s};
  epoll_ctl(ep, op, s->fd, &ev);
}

static void kill_pair(pair *p) {
  if (p->dead) return;
  p->dead = true;
  close(p->a.fd), close(p->b.fd);
  for (int i = 0; i < nlive; i++)
    if (live[i] == p) live[i] = live[--nlive];
  p->next_dead = graveyard, graveyard = p;
}

static void free_side(side *s) {
  while (s->head) {
    chunk *c = s->head;
    s->head = c->next;
    free(c);
  }
}

static void bury(void) {
  while (graveyard) {
    pair *p = graveyard;
    graveyard = p->next_dead;
    free_side(&p->a), free_side(&p->b);
    free(p);
  }
}

static void arm(void) {
  int64_t next = INT64_MAX;
  for (int i = 0; i < nlive; i++) {
    pair *p = live[i];
    if (p->a.head && p->a.head->due_ns < next) next = p->a.head->due_ns;
    if (p->b.head && p->b.head->due_ns < next) next = p->b.head->due_ns;
  }
  struct itimerspec it = {0};
  if (next != INT64_MAX) {
    it.it_value.tv_sec = next / 1000000000, it.it_value.tv_nsec = next % 1000000000;
    if (!it.it_value.tv_sec && !it.it_value.tv_nsec) it.it_value.tv_nsec = 1;
  }
  timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

/* Writes what is due to s; false when the pair died. */
static bool flush_due(side *s, int64_t now) {
  while (s->head && s->head->due_ns <= now) {
    chunk *c = s->head;
    ssize_t n = send(s->fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(s, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
      return true;
    }
    if (n < 0) return kill_pair(s->p), false;
    c->off += (size_t)n;
    s->held -= (size_t)n;
    if (c->off < c->len) continue;
    s->head = c->next;
    if (!s->head) s->tail = NULL;
    free(c);
  }
  if (s->paused == false && s->peer->paused && s->held < MAX_HELD / 2) {
    s->peer->paused = false;
    watch(s->peer, EPOLLIN, EPOLL_CTL_MOD);
  }
  if (!s->head && s->peer->eof_in && !s->shut) shutdown(s->fd, SHUT_WR), s->shut = true;
  if (s->shut && s->peer->shut) return kill_pair(s->p), false;
  return true;
}

/* Reads what s sent and queues it for its peer. */
static void take(side *s) {
  side *to = s->peer;
  for (;;) {
    if (to->held >= MAX_HELD) {
      s->paused = true;
      watch(s, 0, EPOLL_CTL_MOD);
      return;
    }
    chunk *c = malloc(sizeof *c + CHUNK);
    if (!c) abort();
    ssize_t n = recv(s->fd, c->data, CHUNK, 0);
    if (n <= 0) {
      free(c);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) {
        kill_pair(s->p);
        return;
      }
      s->eof_in = true;
      watch(s, 0, EPOLL_CTL_MOD);
      if (!to->head && !to->shut) shutdown(to->fd, SHUT_WR), to->shut = true;
      if (to->shut && s->shut) kill_pair(s->p);
      return;
    }
    c->next = NULL, c->len = (size_t)n, c->off = 0, c->due_ns = now_ns() + one_way_ns;
    if (to->tail)
      to->tail->next = c;
    else
      to->head = c;
    to->tail = c;
    to->held += (size_t)n;
    if ((size_t)n < CHUNK) return;
  }
}

static void accept_all(int lfd) {
  for (;;) {
    int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) return;
    int sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (sfd < 0 || connect(sfd, (struct sockaddr *)&target, sizeof target) != 0 || nlive == MAX_PAIRS) {
      if (sfd >= 0) close(sfd);
      close(cfd);
      continue;
    }
    fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pair *p = calloc(1, sizeof *p);
    if (!p) abort();
    p->a = (side){.fd = cfd, .p = p, .peer = &p->b};
    p->b = (side){.fd = sfd, .p = p, .peer = &p->a};
    live[nlive++] = p;
    watch(&p->a, EPOLLIN, EPOLL_CTL_ADD);
    watch(&p->b, EPOLLIN, EPOLL_CTL_ADD);
  }
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT ONE_WAY_US\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_TIMERSLACK, 1UL); /* wake at the deadline, not up to 50 us after it */
  one_way_ns = atoll(argv[5]) * 1000;
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
  target = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[4]))};
  if (inet_pton(AF_INET, argv[1], &at.sin_addr) != 1 || inet_pton(AF_INET, argv[3], &target.sin_addr) != 1) {
    fprintf(stderr, "netdelay: bad address\n");
    return 2;
  }
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&at, sizeof at) != 0 || listen(lfd, 512) != 0) {
    perror("netdelay: listen");
    return 1;
  }
  ep = epoll_create1(EPOLL_CLOEXEC);
  tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  static int lmark, tmark;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &lmark};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  ev.data.ptr = &tmark;
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &lmark) {
        accept_all(lfd);
      } else if (tag == &tmark) {
        uint64_t ticks;
        if (read(tfd, &ticks, sizeof ticks) < 0) { /* spurious: the deadlines are checked below */
        }
      } else {
        side *s = tag;
        if (s->p->dead) continue;
        if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
          kill_pair(s->p);
          continue;
        }
        if (evs[i].events & EPOLLOUT) watch(s, s->paused || s->eof_in ? 0 : EPOLLIN, EPOLL_CTL_MOD);
        if (evs[i].events & EPOLLIN) take(s);
      }
    }
    int64_t now = now_ns();
    for (int i = 0; i < nlive; i++) {
      pair *p = live[i];
      if (p->a.head && !flush_due(&p->a, now))
        i--;
      else if (!p->dead && p->b.head && !flush_due(&p->b, now))
        i--;
    }
    bury();
    arm();
  }
}
