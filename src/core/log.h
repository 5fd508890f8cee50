/* Structured logging: one JSON object per line on stderr. Lines from concurrent threads never
 * interleave. While buffering is on (the server), info lines reach stderr within 100 ms, in
 * chunks; warnings and errors at once. */
#ifndef CORE_LOG_H
#define CORE_LOG_H
#include <jansson.h>
#include <stdbool.h>

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

/* Starts the flusher thread and buffers lines from then on. */
void log_buffering_start(void);
/* Writes every buffered line and stops buffering (idempotent). */
void log_buffering_stop(void);
/* Sets the lowest level written (default LOG_INFO). */
void log_set_level(log_level lvl);
/* Writes {"time","level","msg", ...fields}. fields may be NULL; the reference is stolen. */
void log_json(log_level lvl, const char *msg, json_t *fields);
/* The access log line of one request, written without building a JSON tree (it is on every
 * request's path). route is the matched pattern or the raw path; ip may be NULL. */
void log_access(const char *request_id, const char *method, const char *route, int status, double ms, const char *ip,
                bool aborted);
/* printf-style message without extra fields. */
void log_msg(log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
