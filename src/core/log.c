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

void log_access(const char *request_id, const char *method, const char *route, int status, double ms, const char *ip,
                bool aborted) {
  log_level lvl = status >= 500 ? LOG_ERROR : LOG_INFO;
  if (lvl < min_level) return;
  char line[1024], ts[25];
  clock_format_iso(clock_now_ms(), ts);
  size_t n = (size_t)snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"requestId\":\"", ts, names[lvl]);
  append_escaped(line, &n, sizeof line - 200, request_id);
  n += (size_t)snprintf(line + n, sizeof line - n, "\",\"method\":\"");
  append_escaped(line, &n, sizeof line - 200, method);
  n += (size_t)snprintf(line + n, sizeof line - n, "\",\"route\":\"");
  append_escaped(line, &n, sizeof line - 200, route);
  n += (size_t)snprintf(line + n, sizeof line - n, "\",\"status\":%d,\"ms\":%.2f,\"ip\":", status, ms);
  if (ip) {
    line[n++] = '"';
    append_escaped(line, &n, sizeof line - 40, ip);
    line[n++] = '"';
  } else {
    n += (size_t)snprintf(line + n, sizeof line - n, "null");
  }
  n += (size_t)snprintf(line + n, sizeof line - n, "%s}\n", aborted ? ",\"aborted\":true" : "");
  ssize_t w = write(STDERR_FILENO, line, n);
  (void)w;
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
