/* The capped growing buffer (buf.h). Every growth goes through room(): it refuses what would
 * pass the cap by comparing n with the room left (cap - len, never len + n), then doubles the
 * allocation from a small first size, stopping at cap + 1 (the content and its NUL), which
 * BUF_CAP_MAX keeps from wrapping. printf output is written in place when it fits what is
 * allocated (which never exceeds cap + 1, so it fits the cap too), else measured, made room
 * for, and written again. */
#include "core/buf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST 256

void buf_init(struct buf *b, size_t cap) {
  b->ptr = NULL;
  b->len = b->alloc = 0;
  b->cap = cap > BUF_CAP_MAX ? BUF_CAP_MAX : cap;
  b->rc = BUF_OK;
}

static buf_rc fail(struct buf *b, buf_rc rc) { return b->rc = rc; }

/* Makes room for n more bytes and the NUL after them. */
static buf_rc room(struct buf *b, size_t n) {
  if (b->rc != BUF_OK) return b->rc;
  if (n > b->cap - b->len) return fail(b, BUF_TOO_LARGE);
  size_t need = b->len + n + 1; /* at most cap + 1 */
  if (need <= b->alloc) return BUF_OK;
  size_t size = b->alloc ? b->alloc : BUF_FIRST;
  while (size < need) size = size > (b->cap + 1) / 2 ? b->cap + 1 : size * 2;
  if (size > b->cap + 1) size = b->cap + 1;
  char *p = realloc(b->ptr, size);
  if (!p) return fail(b, BUF_NOMEM);
  b->ptr = p, b->alloc = size;
  return BUF_OK;
}

buf_rc buf_addn(struct buf *b, const void *p, size_t n) {
  buf_rc rc = room(b, n);
  if (rc != BUF_OK) return rc;
  if (n) memcpy(b->ptr + b->len, p, n);
  b->len += n;
  b->ptr[b->len] = 0;
  return BUF_OK;
}

buf_rc buf_add(struct buf *b, const char *s) { return buf_addn(b, s, strlen(s)); }

buf_rc buf_vaddf(struct buf *b, const char *fmt, va_list ap) {
  if (b->rc != BUF_OK) return b->rc;
  va_list again;
  va_copy(again, ap);
  size_t spare = b->alloc > b->len ? b->alloc - b->len : 0; /* with the NUL's byte */
  int n = vsnprintf(spare ? b->ptr + b->len : NULL, spare, fmt, ap);
  buf_rc rc = BUF_OK;
  if (n < 0) {
    rc = fail(b, BUF_NOMEM);
  } else if ((size_t)n >= spare) { /* it did not fit: make room, write it again */
    if ((rc = room(b, (size_t)n)) == BUF_OK) vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, again);
  }
  va_end(again);
  if (rc != BUF_OK) {
    if (b->ptr) b->ptr[b->len] = 0; /* the attempt wrote past the content */
    return rc;
  }
  b->len += (size_t)n;
  return BUF_OK;
}

buf_rc buf_addf(struct buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_rc rc = buf_vaddf(b, fmt, ap);
  va_end(ap);
  return rc;
}

void buf_drop_front(struct buf *b, size_t n) {
  if (n >= b->len) n = b->len;
  if (!n) return;
  memmove(b->ptr, b->ptr + n, b->len - n);
  b->len -= n;
  b->ptr[b->len] = 0;
}

void buf_reset(struct buf *b) {
  b->len = 0;
  b->rc = BUF_OK;
  if (b->ptr) b->ptr[0] = 0;
}

void buf_free(struct buf *b) {
  free(b->ptr);
  buf_init(b, b->cap);
}

char *buf_take(struct buf *b, size_t *len) {
  char *p = b->ptr;
  if (len) *len = b->len;
  buf_init(b, b->cap);
  return p;
}
