/* The HTTP server: libmicrohttpd event threads for the sockets, and a pool of worker threads
 * for handlers, so a handler that blocks on the database, a password hash or an outbound call
 * holds one worker and stalls no other connection. */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H
#include <stdbool.h>

/* Starts listening on bind:port and serving the route table. False with err on failure. */
bool hs_server_start(const char *bind, int port, char err[256]);
/* Requests received and not yet completed, and lane workers inside a handler (a snapshot,
 * for test support). */
void hs_server_load(int *in_flight, int *handlers_running);
/* The port actually bound (useful with PORT=0). */
int hs_server_port(void);
/* Graceful stop: stop accepting, let requests in flight finish (grace_ms at most), answer
 * 503 to those still waiting for a worker, close. False when a handler was still running a
 * second after that: the server was left running under it, and the caller should exit the
 * process without releasing what handlers use (database, pools). */
bool hs_server_stop(int grace_ms);

#endif
