/* JSON log lines. Access lines are formatted by hand (they are on every request's path);
 * other lines go through jansson. Lines are buffered per thread and written in chunks of at
 * most PIPE_BUF bytes, so a chunk is one atomic write(2) even to a pipe and lines from
 * concurrent threads never interleave. A flusher thread writes what waits every
 * LOG_FLUSH_MS; warnings and errors are written at once; before log_buffering_start() and
 * after log_buffering_stop() every line is written at once. */
#include "core/log.h"
#include "core/clock.h"
#include "core/util.h"
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_FLUSH_MS 100
#define CHUNK PIPE_BUF

static log_level min_level = LOG_INFO;
static const char *const names[] = {"debug", "info", "warn", "error"};

/* One thread's pending lines. Buffers live until exit on a list the flusher walks. */
typedef struct log_buf {
  pthread_mutex_t mu;
  size_t len;
  struct log_buf *next;
  char data[CHUNK];
} log_buf;

static struct {
  pthread_mutex_t mu; /* guards the list */
  log_buf *all;
  _Atomic bool buffering;
  bool stopping;
  pthread_cond_t cv;
  pthread_t flusher;
} L = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static _Thread_local log_buf *mine;

static void write_all(const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, p, n);
    if (w <= 0) return; /* nowhere to report a failing log */
    p += w, n -= (size_t)w;
  }
}

static void drain(log_buf *b) { /* b->mu held */
  write_all(b->data, b->len);
  b->len = 0;
}

static log_buf *thread_buf(void) {
  if (mine) return mine;
  log_buf *b = xcalloc(1, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_mutex_lock(&L.mu);
  b->next = L.all, L.all = b;
  pthread_mutex_unlock(&L.mu);
  return mine = b;
}

/* Appends one complete line (ending in a newline); urgent lines are written at once. */
static void emit(const char *line, size_t n, bool urgent) {
  if (!atomic_load_explicit(&L.buffering, memory_order_relaxed) || n > CHUNK) {
    if (mine) { /* keep this thread's earlier lines before this one */
      pthread_mutex_lock(&mine->mu);
      drain(mine);
      pthread_mutex_unlock(&mine->mu);
    }
    write_all(line, n);
    return;
  }
  log_buf *b = thread_buf();
  pthread_mutex_lock(&b->mu);
  if (b->len + n > CHUNK) drain(b);
  memcpy(b->data + b->len, line, n);
  b->len += n;
  if (urgent) drain(b);
  pthread_mutex_unlock(&b->mu);
}

static void flush_all(void) {
  pthread_mutex_lock(&L.mu);
  for (log_buf *b = L.all; b; b = b->next) {
    pthread_mutex_lock(&b->mu);
    if (b->len) drain(b);
    pthread_mutex_unlock(&b->mu);
  }
  pthread_mutex_unlock(&L.mu);
}

static void *flusher_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&L.mu);
  while (!L.stopping) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += LOG_FLUSH_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&L.cv, &L.mu, &until);
    pthread_mutex_unlock(&L.mu);
    flush_all();
    pthread_mutex_lock(&L.mu);
  }
  pthread_mutex_unlock(&L.mu);
  return NULL;
}

void log_buffering_start(void) {
  L.stopping = false;
  if (pthread_create(&L.flusher, NULL, flusher_main, NULL) == 0) atomic_store(&L.buffering, true);
}

void log_buffering_stop(void) {
  if (!atomic_load(&L.buffering)) return;
  atomic_store(&L.buffering, false);
  thread_stop(L.flusher, &L.mu, &L.cv, &L.stopping);
  flush_all();
}

void log_set_level(log_level lvl) { min_level = lvl; }

void log_json(log_level lvl, const char *msg, json_t *fields) {
  if (lvl < min_level) {
    json_decref(fields);
    return;
  }
  char ts[25];
  clock_format_iso(clock_now_ms(), ts);
  json_t *o = json_object();
  json_object_set_new(o, "time", json_string(ts));
  json_object_set_new(o, "level", json_string(names[lvl]));
  if (msg) json_object_set_new(o, "msg", json_string(msg));
  if (fields) json_object_update(o, fields);
  json_decref(fields);
  char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
  json_decref(o);
  if (!line) return;
  size_t n = strlen(line);
  line[n] = '\n'; /* json_dumps leaves room: overwrite NUL, write n+1 bytes */
  emit(line, n + 1, lvl >= LOG_WARN);
  free(line);
}

/* Appends s as a JSON string body (no quotes) to out[*n..cap), escaping what JSON requires. */
static void append_escaped(char *out, size_t *n, size_t cap, const char *s) {
  static const char hex[] = "0123456789abcdef";
  for (; s && *s && *n + 7 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') out[(*n)++] = '\\', out[(*n)++] = (char)c;
    else if (c < 0x20) {
      memcpy(out + *n, "\\u00", 4);
      out[*n + 4] = hex[c >> 4], out[*n + 5] = hex[c & 15];
      *n += 6;
    } else out[(*n)++] = (char)c;
  }
}

/* The access line's "time" field: the date and time up to the second are formatted once
 * per second and thread. */
static size_t put_time(char *out) {
  static _Thread_local int64_t cached_sec = -1;
  static _Thread_local char cached[25];
  int64_t ms = clock_now_ms(), sec = ms / 1000;
  if (sec != cached_sec) clock_format_iso(sec * 1000, cached), cached_sec = sec;
  memcpy(out, cached, 20); /* "YYYY-MM-DDTHH:MM:SS." */
  int m = (int)(ms % 1000);
  out[20] = (char)('0' + m / 100), out[21] = (char)('0' + m / 10 % 10), out[22] = (char)('0' + m % 10), out[23] = 'Z';
  return 24;
}

#define PUT(lit) (memcpy(line + n, lit, sizeof lit - 1), n += sizeof lit - 1)

void log_access(const char *request_id, const char *method, const char *route, int status, double ms, const char *ip,
                bool aborted) {
  log_level lvl = status >= 500 ? LOG_ERROR : LOG_INFO;
  if (lvl < min_level) return;
  char line[1024];
  size_t n = 0;
  PUT("{\"time\":\"");
  n += put_time(line + n);
  PUT("\",\"level\":\"");
  memcpy(line + n, names[lvl], strlen(names[lvl])), n += strlen(names[lvl]);
  PUT("\",\"requestId\":\"");
  append_escaped(line, &n, sizeof line - 200, request_id);
  PUT("\",\"method\":\"");
  append_escaped(line, &n, sizeof line - 200, method);
  PUT("\",\"route\":\"");
  append_escaped(line, &n, sizeof line - 200, route);
  PUT("\",\"status\":");
  n += uint_digits(status > 0 ? (uint64_t)status : 0, line + n);
  PUT(",\"ms\":"); /* two decimals, like %.2f */
  uint64_t hundredths = ms > 0 ? (uint64_t)(ms * 100 + 0.5) : 0;
  n += uint_digits(hundredths / 100, line + n);
  line[n++] = '.', line[n++] = (char)('0' + hundredths / 10 % 10), line[n++] = (char)('0' + hundredths % 10);
  PUT(",\"ip\":");
  if (ip) {
    line[n++] = '"';
    append_escaped(line, &n, sizeof line - 40, ip);
    line[n++] = '"';
  } else {
    PUT("null");
  }
  if (aborted) PUT(",\"aborted\":true");
  PUT("}\n");
  emit(line, n, lvl >= LOG_WARN);
}

void log_msg(log_level lvl, const char *fmt, ...) {
  if (lvl < min_level) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  log_json(lvl, buf, NULL);
}
