/* Deadlines for slow and stalled clients, which an idle timeout alone does not catch (a
 * client that sends one byte every few seconds is never idle).
 *
 * Each connection is watched from accept to close, in one of three phases:
 *   waiting  for a request: once its first bytes arrive, the rest of the request line and
 *            headers must follow within the header timeout;
 *   body     the headers are in: after a grace period equal to the header timeout, the body
 *            must keep up an average of at least the minimum rate (bytes per second);
 *   busy     the request is being handled or answered: no deadline here (handlers have their
 *            own bounds, and a stalled reader is caught by the server's idle timeout).
 * A connection past its deadline has its socket shut down; the server then sees the peer
 * gone and closes it as usual. One thread checks every watched connection a few times a
 * second; the phase changes are plain stores from the server's threads. */
#ifndef HTTP_WATCH_H
#define HTTP_WATCH_H
#include <stddef.h>

typedef struct hs_watch hs_watch;

/* Starts the checking thread. header_timeout_ms > 0; min_body_rate in bytes/s (0: none). */
void hs_watch_start(int header_timeout_ms, int min_body_rate);
/* Stops it; connections still watched are left alone (the server closes them). */
void hs_watch_stop(void);
/* A new connection on socket fd, waiting for its first request. Never NULL. */
hs_watch *hs_watch_add(int fd);
/* The connection is closing: forgets it, before the server closes fd (so fd is never shut
 * down once it may have been reused). Frees w. */
void hs_watch_remove(hs_watch *w);
/* Phase changes, called by the thread serving the connection. */
void hs_watch_body(hs_watch *w);
void hs_watch_body_bytes(hs_watch *w, size_t n);
void hs_watch_busy(hs_watch *w);
void hs_watch_waiting(hs_watch *w);
/* Busy for the rest of the connection, whose last request is in (a stream's connection serves
 * one, for hours): the checker stops walking over it (10,000 streams' connections five times a
 * second were 5% of an instance's CPU while it delivered events). */
void hs_watch_last(hs_watch *w);

#endif
