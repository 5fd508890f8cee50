/* JSON log lines. jansson serialises (escaping included); one write(2) per line. */
#include "core/log.h"
#include "core/clock.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static log_level min_level = LOG_INFO;
static const char *const names[] = {"debug", "info", "warn", "error"};

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
  ssize_t w = write(STDERR_FILENO, line, n + 1);
  (void)w;
  free(line);
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
