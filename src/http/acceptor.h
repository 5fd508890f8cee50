/* The listening socket, served by one thread of its own. Every connection is accepted here and,
 * once its first bytes show what it asks for, handed to the transport: a request for the event
 * stream (GET /events) to the connections kept apart for streams, anything else to the rest.
 *
 * Why: libmicrohttpd parks an idle stream by suspending its connection, and each time it
 * resumes any connection it walks all the suspended ones of that event thread. With thousands
 * of streams parked among ordinary connections, every request handed back by a worker lane
 * would pay that walk; kept apart (and spread over threads of their own), the streams cost
 * ordinary requests nothing, and a delivery walks only its own thread's share of streams.
 *
 * A connection that sends nothing within the wait is handed over as an ordinary one (whose idle
 * timeout then applies); so is one that sent a prefix of "GET /events" and stalled, whose
 * header deadline (http/watch.h) then runs. The bytes are only peeked at: the transport reads
 * the request whole. Only a connection's first request decides: one that asked for something
 * else first stays with the ordinary connections whatever it asks next. */
#ifndef HTTP_ACCEPTOR_H
#define HTTP_ACCEPTOR_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Connections accepted and waiting for their first bytes at most; past it the oldest is
 * handed over as an ordinary one at once. */
#define HS_ACCEPT_WAITING 1024

/* Takes connection fd (its peer addr, len bytes); stream: its first request is GET /events. */
typedef void (*hs_accept_fn)(int fd, const struct sockaddr *addr, socklen_t len, bool stream);

/* Listens on bind:port (port 0: any free port) with a backlog of backlog and starts the thread
 * that hands connections to hand; a connection silent for wait_ms is handed as an ordinary one.
 * False with err on failure. */
bool hs_acceptor_start(const char *address, int port, int backlog, int wait_ms, hs_accept_fn hand, char err[256]);
/* The port bound (0 before start). */
int hs_acceptor_port(void);
/* Stops accepting: connections waiting in the backlog are refused (reset), the thread ends, and
 * connections accepted but not yet handed over are closed. */
void hs_acceptor_stop(void);
/* What the first n bytes of a connection are: 1 a request for the event stream ("GET /events"
 * followed by a space, '?' or '/'), 0 anything else, -1 not known yet (a prefix of it). */
int hs_acceptor_classify(const char *bytes, size_t n);

#endif
