/* Two lanes, each a FIFO under a mutex with a fixed set of workers, and one list of held
 * answers in deadline order with its timer thread.
 *
 * Requests whose handlers may block run on worker threads while their connection is
 * suspended, so the event threads never wait and keep serving every other connection. The
 * database lane has as many workers as the pool has connections: its handlers wait only on the
 * database, so a worker never queues for a connection, and requests beyond that wait in this
 * FIFO, not as threads blocked in the pool (measured: 64 workers on 16 connections gave
 * PostgreSQL a p99 of 0.4-0.8 s at 64 clients, 16 on 16 gave 15 ms). The slow lane takes
 * uploads and ROUTE_SLOW handlers, which also wait on a password hash, an outbound call or
 * object storage, so a burst of those cannot occupy the database lane's workers.
 *
 * Answers held back (hs_req.delay_ms) wait here, not on a worker: a refused login's 503 is
 * held 200 ms, and a flood of them would otherwise keep every slow-lane worker asleep while
 * payments and uploads queued behind them. The timer thread hands each back at its deadline;
 * the list is kept in deadline order (appending is the usual case). */
#include "http/lanes.h"
#include "core/clock.h"
#include "core/util.h"
#include "db/db.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct lane {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  hs_work *head, *tail;
  pthread_t *threads;
  int n;
  bool stopping;
} lane;

static lane lanes[HS_LANE_COUNT] = {
    {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER},
    {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER},
};
static hs_lane_ops ops;
static _Atomic int busy_workers; /* lane workers inside a handler */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC, like clock_mono_ms */
  hs_work *head, *tail;
  pthread_t thread;
  bool running, stopping;
} held = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Queues w (answered, suspended) to be handed back delay_ms from now; at once when the timer
 * is not running. */
static void hold(hs_work *w, int delay_ms) {
  pthread_mutex_lock(&held.mu);
  if (!held.running || held.stopping) {
    pthread_mutex_unlock(&held.mu);
    ops.resume(w);
    return;
  }
  w->release_at = clock_mono_ms() + delay_ms;
  w->next = NULL;
  if (!held.head || held.tail->release_at <= w->release_at) { /* the usual case: append */
    if (held.tail)
      held.tail->next = w;
    else
      held.head = w;
    held.tail = w;
  } else {
    hs_work **p = &held.head;
    while ((*p)->release_at <= w->release_at) p = &(*p)->next;
    w->next = *p;
    *p = w;
  }
  pthread_cond_signal(&held.cv);
  pthread_mutex_unlock(&held.mu);
}

static void *held_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&held.mu);
  for (;;) {
    while (!held.head && !held.stopping) pthread_cond_wait(&held.cv, &held.mu);
    hs_work *w = held.head;
    if (!w) break; /* stopping, nothing left */
    int64_t wait_ms = w->release_at - clock_mono_ms();
    if (wait_ms > 0 && !held.stopping) { /* stopping: everything is answered at once */
      clock_cond_wait_ms(&held.cv, &held.mu, wait_ms);
      continue; /* an earlier deadline may have arrived meanwhile */
    }
    held.head = w->next;
    if (!held.head) held.tail = NULL;
    pthread_mutex_unlock(&held.mu);
    ops.resume(w);
    pthread_mutex_lock(&held.mu);
  }
  pthread_mutex_unlock(&held.mu);
  return NULL;
}

static void held_start(void) {
  clock_cond_init(&held.cv);
  held.stopping = false;
  held.running = true;
  pthread_create(&held.thread, NULL, held_main, NULL);
}

/* Answers whatever is still held, then ends the timer thread. */
static void held_stop(void) {
  thread_stop(held.thread, &held.mu, &held.cv, &held.stopping);
  held.running = false;
  pthread_cond_destroy(&held.cv);
}

static void *worker_main(void *arg) {
  lane *l = arg;
  if (l == &lanes[HS_LANE_SLOW]) db_use_pool(DB_POOL_SLOW); /* its own connections: see db.c */
  for (;;) {
    pthread_mutex_lock(&l->mu);
    while (!l->head && !l->stopping) pthread_cond_wait(&l->cv, &l->mu);
    hs_work *w = l->head;
    if (!w) {
      pthread_mutex_unlock(&l->mu);
      return NULL;
    }
    l->head = w->next;
    if (!l->head) l->tail = NULL;
    atomic_fetch_add(&busy_workers, 1);
    pthread_mutex_unlock(&l->mu);
    int delay_ms = ops.run(w);
    if (delay_ms > 0)
      hold(w, delay_ms);
    else
      ops.resume(w);
    atomic_fetch_sub(&busy_workers, 1);
  }
}

static void lane_start(lane *l, int n) {
  l->stopping = false;
  l->threads = xcalloc((size_t)n, sizeof *l->threads);
  l->n = n;
  for (int i = 0; i < n; i++) pthread_create(&l->threads[i], NULL, worker_main, l);
}

void hs_lanes_start(const hs_lane_ops *o, int db_workers, int slow_workers) {
  ops = *o;
  held_start();
  lane_start(&lanes[HS_LANE_DB], db_workers);
  lane_start(&lanes[HS_LANE_SLOW], slow_workers);
}

bool hs_lane_push(hs_lane_id id, hs_work *w) {
  lane *l = &lanes[id];
  pthread_mutex_lock(&l->mu);
  if (l->stopping) { /* past the grace period of a shutdown, on a connection still open */
    pthread_mutex_unlock(&l->mu);
    return false;
  }
  ops.suspend(w);
  w->next = NULL;
  if (l->tail)
    l->tail->next = w;
  else
    l->head = w;
  l->tail = w;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  return true;
}

int hs_lanes_busy(void) { return atomic_load(&busy_workers); }

/* Ends the lane's workers once idle: no new work is taken, what waits is refused and handed
 * back at once. */
static void lane_cancel(lane *l) {
  pthread_mutex_lock(&l->mu);
  l->stopping = true;
  hs_work *waiting = l->head;
  l->head = l->tail = NULL;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  while (waiting) {
    hs_work *next = waiting->next;
    ops.refuse(waiting);
    ops.resume(waiting);
    waiting = next;
  }
}

void hs_lanes_cancel(void) {
  for (int i = 0; i < HS_LANE_COUNT; i++) lane_cancel(&lanes[i]);
  held_stop(); /* the server must not stop with a connection suspended */
}

static void lane_join(lane *l) {
  for (int i = 0; i < l->n; i++) pthread_join(l->threads[i], NULL);
  free(l->threads);
  l->threads = NULL, l->n = 0;
}

void hs_lanes_join(void) {
  for (int i = 0; i < HS_LANE_COUNT; i++) lane_join(&lanes[i]);
}
