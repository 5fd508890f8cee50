/* Streams (http/stream.h, and the handler's side in http/http.h). One mutex per stream guards
 * its buffer and flags; the transport's suspend and resume are called under it, so the write
 * that resumes a connection can never run between the reader finding the buffer empty and the
 * suspension (libmicrohttpd would lose the resume). The buffer is taken from the front by an
 * offset, compacted only when more than half of it was sent, and freed whenever it empties,
 * so an idle stream keeps no buffer. Every live stream is on one list, which a stop walks.
 * The owner's callbacks run with no stream lock held: an owner may keep its own lock around
 * writes. */
#include "http/stream.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include <pthread.h>
#include <string.h>
#include <unistd.h>

struct hs_stream {
  pthread_mutex_t mu;
  int refs; /* the owner's, and the request's (then the transport's) */
  struct buf out;
  size_t sent; /* bytes at the front of out already taken */
  size_t max_buffered;
  const hs_stream_owner *owner;
  void *arg;
  const hs_stream_transport *tp; /* set once attached */
  void *conn;
  int fd;
  bool waiting; /* the connection is suspended until the next write */
  bool ending;  /* end once what is buffered is taken */
  bool broken;  /* cut: nothing more is taken or sent */
  bool gone;    /* the transport is done; the owner was or is being told */
  hs_stream *prev, *next;
};

static struct {
  pthread_mutex_t mu;
  hs_stream *head;
  int count;
} live = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void unref(hs_stream *s) {
  pthread_mutex_lock(&s->mu);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&s->mu);
  if (!last) return;
  buf_free(&s->out);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

hs_stream *hs_stream_open(hs_req *req, const char *content_type, size_t max_buffered, const hs_stream_owner *owner,
                          void *arg) {
  hs_stream *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  s->refs = 2;
  buf_init(&s->out, BUF_CAP_MAX); /* the cap is the backlog's, checked by hs_stream_write */
  s->max_buffered = max_buffered;
  s->owner = owner, s->arg = arg;
  s->fd = -1;
  pthread_mutex_lock(&live.mu);
  s->next = live.head;
  if (live.head) live.head->prev = s;
  live.head = s;
  live.count++;
  pthread_mutex_unlock(&live.mu);
  req->stream = s;
  req->status = req->route && req->route->ok ? req->route->ok : 200;
  req->res_content_type = content_type;
  req->res_cache_control = "no-cache";
  return s;
}

/* Wakes the parked connection; s locked. */
static void wake(hs_stream *s) {
  if (s->waiting && s->tp && !s->gone) {
    s->waiting = false;
    s->tp->resume(s->conn);
  }
}

/* Drops what is buffered and breaks the connection off; s locked. */
static void cut(hs_stream *s) {
  s->broken = true;
  buf_free(&s->out);
  s->sent = 0;
  if (s->tp && !s->gone) s->tp->cut(s->conn, s->fd);
  wake(s);
}

bool hs_stream_write(hs_stream *s, const char *data, size_t n) {
  pthread_mutex_lock(&s->mu);
  bool ok = !s->broken && !s->ending && !s->gone;
  if (ok && buf_len(&s->out) - s->sent + n > s->max_buffered) {
    log_msg(LOG_WARN, "stream cut: the client's backlog passed %zu bytes", s->max_buffered);
    cut(s);
    ok = false;
  }
  if (ok && buf_addn(&s->out, data, n) != BUF_OK) oom();
  if (ok) wake(s);
  pthread_mutex_unlock(&s->mu);
  return ok;
}

void hs_stream_end(hs_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->ending = true;
  wake(s);
  pthread_mutex_unlock(&s->mu);
}

size_t hs_stream_backlog(hs_stream *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = buf_len(&s->out) - s->sent;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void hs_stream_release(hs_stream *s) {
  if (s) unref(s);
}

void hs_stream_attach(hs_stream *s, const hs_stream_transport *tp, void *conn, int fd) {
  pthread_mutex_lock(&s->mu);
  s->tp = tp, s->conn = conn, s->fd = fd;
  if (s->broken) tp->cut(conn, fd); /* cut before it got here: the reader says so at once */
  pthread_mutex_unlock(&s->mu);
}

ssize_t hs_stream_read(hs_stream *s, char *dst, size_t max) {
  pthread_mutex_lock(&s->mu);
  ssize_t n;
  size_t left = buf_len(&s->out) - s->sent;
  if (s->broken) {
    n = -2;
  } else if (left) {
    n = (ssize_t)(left < max ? left : max);
    memcpy(dst, buf_ptr(&s->out) + s->sent, (size_t)n);
    s->sent += (size_t)n;
    if (s->sent == buf_len(&s->out)) {
      buf_free(&s->out), s->sent = 0; /* an idle stream keeps no buffer */
    } else if (s->sent > buf_len(&s->out) / 2) {
      buf_drop_front(&s->out, s->sent), s->sent = 0;
    }
  } else if (s->ending) {
    n = -1;
  } else {
    n = 0;
    s->waiting = true;
    s->tp->suspend(s->conn);
  }
  pthread_mutex_unlock(&s->mu);
  return n;
}

void hs_stream_gone(hs_stream *s) {
  pthread_mutex_lock(&s->mu);
  bool first = !s->gone;
  s->gone = true, s->waiting = false;
  buf_free(&s->out), s->sent = 0;
  pthread_mutex_unlock(&s->mu);
  if (!first) return;
  pthread_mutex_lock(&live.mu);
  if (s->prev) s->prev->next = s->next;
  if (s->next) s->next->prev = s->prev;
  if (live.head == s) live.head = s->next;
  live.count--;
  pthread_mutex_unlock(&live.mu);
  if (s->owner && s->owner->closed) s->owner->closed(s->arg, s);
  unref(s);
}

int hs_streams_open(void) {
  pthread_mutex_lock(&live.mu);
  int n = live.count;
  pthread_mutex_unlock(&live.mu);
  return n;
}

/* The live streams, each with a reference taken (release with unref); *n of them. */
static hs_stream **snapshot(int *n) {
  pthread_mutex_lock(&live.mu);
  hs_stream **all = xmalloc(sizeof *all * (size_t)(live.count + 1));
  *n = 0;
  for (hs_stream *s = live.head; s; s = s->next) {
    pthread_mutex_lock(&s->mu);
    s->refs++;
    pthread_mutex_unlock(&s->mu);
    all[(*n)++] = s;
  }
  pthread_mutex_unlock(&live.mu);
  return all;
}

int hs_streams_stop(int wait_ms) {
  int n;
  hs_stream **all = snapshot(&n);
  for (int i = 0; i < n; i++) {
    if (all[i]->owner && all[i]->owner->stopping)
      all[i]->owner->stopping(all[i]->arg, all[i]);
    else
      hs_stream_end(all[i]);
  }
  for (int i = 0; i < n; i++) unref(all[i]);
  free(all);
  int64_t deadline = clock_mono_ms() + wait_ms;
  while (hs_streams_open() > 0 && clock_mono_ms() < deadline) usleep(10000);
  all = snapshot(&n);
  int cuts = 0;
  for (int i = 0; i < n; i++) {
    pthread_mutex_lock(&all[i]->mu);
    if (!all[i]->gone && !all[i]->broken) cut(all[i]), cuts++;
    pthread_mutex_unlock(&all[i]->mu);
    unref(all[i]);
  }
  free(all);
  return cuts;
}
