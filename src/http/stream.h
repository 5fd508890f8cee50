/* Streamed answers, the transport's side (the handler's side is in http/http.h: hs_stream_open,
 * hs_stream_write, hs_stream_end, hs_stream_release).
 *
 * A stream is a buffer between its owner, which writes from any thread, and the transport,
 * which takes the bytes on the connection's event thread as the socket accepts them. While
 * nothing is buffered the transport's connection is suspended (hs_stream_transport.suspend),
 * so an idle stream holds no thread, and the next write resumes it. A stream is held by two
 * references, the owner's and the request's; the request's passes to the transport when the
 * answer is queued (hs_stream_attach) and ends with hs_stream_gone, after which the owner's
 * `closed` callback runs, once. Everything here is a function of the stream and the
 * transport's operations, so the unit tests drive it without a socket. */
#ifndef HTTP_STREAM_H
#define HTTP_STREAM_H
#include "http/http.h"
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What the stream needs of the connection that carries it. suspend is called by
 * hs_stream_read on the connection's event thread, resume and cut from any thread; all three
 * with the stream locked, so a resume never overtakes the suspend it answers. */
typedef struct hs_stream_transport {
  void (*suspend)(void *conn);
  void (*resume)(void *conn);
  /* Breaks the connection off (the socket shut down), for a reader too slow to keep up or a
   * stop that cannot wait; the transport then ends it as a failed one. */
  void (*cut)(void *conn, int fd);
} hs_stream_transport;

/* The answer is queued on conn (socket fd): from now on writes reach it. */
void hs_stream_attach(hs_stream *s, const hs_stream_transport *tp, void *conn, int fd);
/* Takes up to max buffered bytes into buf, on the connection's event thread: their number;
 * 0 when nothing is buffered (the connection was suspended until the next write); -1 when the
 * stream ended and everything was taken; -2 when it was cut. */
ssize_t hs_stream_read(hs_stream *s, char *buf, size_t max);
/* The transport is done with the stream (its connection finished or failed), or the request
 * was answered otherwise before it got there: nothing reaches a connection any more, the
 * owner's `closed` runs, and the request's reference is dropped. */
void hs_stream_gone(hs_stream *s);
/* The server is stopping: asks every owner to say its last words and end its stream
 * (hs_stream_owner.stopping), waits up to wait_ms for the streams to finish, then cuts those
 * still open. Returns how many had to be cut. */
int hs_streams_stop(int wait_ms);
/* Streams open now (answered, not yet gone). */
int hs_streams_open(void);

#endif
