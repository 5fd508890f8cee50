/* One growing byte buffer with a maximum size, for every part of the service that collects
 * bytes of unknown length (a request body, an outbound answer, a form, text, a report), in the
 * manner of curl's dynbuf (`Curl_dyn_init(&b, MAX)`).
 *
 * The cap is given once, at buf_init: the most bytes the buffer may ever hold. An add that
 * would pass it fails with BUF_TOO_LARGE, one that cannot get memory with BUF_NOMEM; either
 * way the content stays as it was, and the buffer remembers the failure: every later add
 * fails with the same result (buf_result) until buf_reset. So a caller may add many pieces
 * and look once at the end. Sizes are checked before any arithmetic, so no length wraps.
 * The content is always followed by a NUL byte (not counted in the length), and may itself
 * hold NUL bytes. Memory is the heap's (buf_free, or buf_take to keep it). One buffer is used
 * by one thread at a time. The type is `struct buf`, without a typedef: `buf` stays free for
 * the many variables of that name. */
#ifndef CORE_BUF_H
#define CORE_BUF_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The largest cap, for a buffer bounded by memory alone. */
#define BUF_CAP_MAX (SIZE_MAX / 2)

typedef enum {
  BUF_OK = 0,
  BUF_TOO_LARGE, /* the add would pass the cap */
  BUF_NOMEM,     /* no memory for it (or printf could not format it) */
} buf_rc;

struct buf {
  char *ptr;    /* NULL until the first byte is added */
  size_t len;   /* bytes held */
  size_t alloc; /* bytes allocated (len + 1 at least once allocated) */
  size_t cap;   /* most bytes it may hold */
  buf_rc rc;    /* the first failure since init or reset */
};

/* An empty buffer that will hold at most cap bytes (BUF_CAP_MAX when larger). Allocates
 * nothing. */
void buf_init(struct buf *b, size_t cap);
/* Appends n bytes / a string / printf output. BUF_OK, or the failure (content unchanged). */
buf_rc buf_addn(struct buf *b, const void *p, size_t n);
buf_rc buf_add(struct buf *b, const char *s);
buf_rc buf_addf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
buf_rc buf_vaddf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Removes the first n bytes (all of them when n >= length), keeping the rest in order. */
void buf_drop_front(struct buf *b, size_t n);
/* Empties the buffer and forgets a failure; the memory is kept for reuse. */
void buf_reset(struct buf *b);
/* Frees the memory; the buffer is empty again, with the same cap. */
void buf_free(struct buf *b);
/* Hands the memory over (free() it; NULL when nothing was ever added), its length in *len
 * when len is not NULL; the buffer is left empty, as after buf_free. */
char *buf_take(struct buf *b, size_t *len);

/* The content (NUL-terminated; NULL while nothing was added) and its length. */
static inline char *buf_ptr(const struct buf *b) { return b->ptr; }
static inline size_t buf_len(const struct buf *b) { return b->len; }
/* BUF_OK, or the failure that stopped the buffer. */
static inline buf_rc buf_result(const struct buf *b) { return b->rc; }

#endif
