/* The parser keeps the bytes it cannot decide yet in one buffer and works through it as a
 * state machine: the preamble, a delimiter, a part's header lines, the part's value, and the
 * epilogue after the closing delimiter. The body is read as if it began with CRLF, so the
 * first delimiter ("--B" at the very start, or after a preamble line) is the same
 * "\r\n--B" as every later one. Inside a value, everything but the last |delimiter| - 1
 * bytes is passed on at once (those could be the start of a delimiter), so between two pieces
 * the buffer holds at most one header block (bounded) or a delimiter's length. A piece is taken
 * FEED_SLICE bytes at a time, so the buffer's cap is that block and one slice, whatever the
 * pieces. */
#include "http/multipart.h"
#include "core/buf.h"
#include "core/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A body piece is parsed this many bytes at a time: the undecided bytes never pass
 * HS_MULTIPART_MAX_HEADERS + FEED_SLICE. */
#define FEED_SLICE (16 * 1024)

typedef enum { MP_PREAMBLE, MP_DELIMITED, MP_HEADERS, MP_VALUE, MP_EPILOGUE, MP_FAILED } mp_state;

struct hs_multipart {
  hs_part_fn fn;
  void *cls;
  mp_state state;
  char delim[HS_MULTIPART_MAX_BOUNDARY + 5]; /* "\r\n--" + boundary */
  size_t delim_len;
  struct buf pending;    /* undecided bytes */
  size_t scanned;        /* header line: bytes of buf already searched for its end */
  size_t header_size;    /* header block of the current part so far */
  bool padded;           /* whitespace seen after a delimiter */
  char *name, *filename; /* the current part's (heap; NULL when absent) */
  uint64_t off;          /* bytes of the current part's value passed on */
};

static const char *skip_space(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* A parameter value at s (a token, or a quoted string with backslash escapes), copied into
 * out (cap bytes, cut); returns the position after it. */
static const char *param_value(const char *s, char *out, size_t cap) {
  size_t n = 0;
  if (*s == '"') {
    for (s++; *s && *s != '"'; s++) {
      if (*s == '\\' && s[1]) s++;
      if (n + 1 < cap) out[n++] = *s;
    }
    if (*s == '"') s++;
  } else {
    for (; *s && *s != ';' && *s != ' ' && *s != '\t'; s++)
      if (n + 1 < cap) out[n++] = *s;
  }
  out[n] = 0;
  return s;
}

/* Calls fn(name, value) for each `; name=value` parameter after the first ';' of s, until fn
 * returns false. */
static void each_param(const char *s, bool (*fn)(void *, const char *, const char *), void *arg, char *value,
                       size_t cap) {
  s = strchr(s, ';');
  while (s && *s == ';') {
    s = skip_space(s + 1);
    const char *name = s;
    while (*s && *s != '=' && *s != ';' && *s != ' ' && *s != '\t') s++;
    size_t name_len = (size_t)(s - name);
    s = skip_space(s);
    if (*s != '=') {
      s = strchr(s, ';');
      continue;
    }
    s = param_value(skip_space(s + 1), value, cap);
    char key[32];
    if (name_len < sizeof key) {
      memcpy(key, name, name_len), key[name_len] = 0;
      if (!fn(arg, key, value)) return;
    }
    s = strchr(s, ';');
  }
}

static bool boundary_param(void *arg, const char *key, const char *value) {
  if (strcasecmp(key, "boundary")) return true;
  char *out = arg;
  size_t n = strlen(value);
  if (n >= 1 && n <= HS_MULTIPART_MAX_BOUNDARY) memcpy(out, value, n + 1);
  return false;
}

bool hs_multipart_boundary(const char *content_type, char out[HS_MULTIPART_MAX_BOUNDARY + 1]) {
  static const char type[] = "multipart/form-data";
  out[0] = 0;
  if (!content_type) return false;
  const char *s = skip_space(content_type);
  if (strncasecmp(s, type, sizeof type - 1)) return false;
  s = skip_space(s + sizeof type - 1);
  if (*s && *s != ';') return false;
  char value[256];
  each_param(s, boundary_param, out, value, sizeof value);
  return out[0] != 0;
}

hs_multipart *hs_multipart_new(const char *content_type, hs_part_fn fn, void *cls) {
  char boundary[HS_MULTIPART_MAX_BOUNDARY + 1];
  if (!hs_multipart_boundary(content_type, boundary)) return NULL;
  hs_multipart *m = xcalloc(1, sizeof *m);
  m->fn = fn, m->cls = cls;
  m->delim_len = (size_t)snprintf(m->delim, sizeof m->delim, "\r\n--%s", boundary);
  buf_init(&m->pending, HS_MULTIPART_MAX_HEADERS + FEED_SLICE);
  if (buf_addn(&m->pending, "\r\n", 2) != BUF_OK) oom(); /* see the design note */
  return m;
}

void hs_multipart_free(hs_multipart *m) {
  if (!m) return;
  free(m->name), free(m->filename);
  buf_free(&m->pending);
  free(m);
}

static void consume(hs_multipart *m, size_t n) { buf_drop_front(&m->pending, n); }

static bool fail(hs_multipart *m) {
  m->state = MP_FAILED;
  buf_reset(&m->pending);
  return false;
}

static void emit(hs_multipart *m, const char *data, size_t n) {
  if (m->name) m->fn(m->cls, m->name, m->filename, data, m->off, n);
  m->off += n;
}

static void end_part(hs_multipart *m) {
  if (m->off == 0) emit(m, "", 0); /* an empty value is still a part */
  free(m->name), free(m->filename);
  m->name = m->filename = NULL;
}

static bool disposition_param(void *arg, const char *key, const char *value) {
  hs_multipart *m = arg;
  char **slot = !strcasecmp(key, "name") ? &m->name : !strcasecmp(key, "filename") ? &m->filename : NULL;
  if (slot && !*slot) *slot = xstrdup(value);
  return true;
}

/* One header line of a part (without its line end). Only Content-Disposition matters: the
 * type of a file comes from its bytes, and nothing else in a part's headers is used. */
static void header_line(hs_multipart *m, char *line) {
  static const char cd[] = "content-disposition:";
  if (strncasecmp(line, cd, sizeof cd - 1)) return;
  const char *v = skip_space(line + sizeof cd - 1);
  if (strncasecmp(v, "form-data", 9) || (v[9] && v[9] != ';' && v[9] != ' ' && v[9] != '\t')) return;
  char value[HS_MULTIPART_MAX_HEADERS + 1];
  each_param(v, disposition_param, m, value, sizeof value);
}

/* Advances the state machine over the buffer; false when it needs more bytes. */
static bool step(hs_multipart *m) {
  char *b = buf_ptr(&m->pending);
  size_t len = buf_len(&m->pending);
  switch (m->state) {
  case MP_PREAMBLE:
  case MP_VALUE: {
    char *at = memmem(b, len, m->delim, m->delim_len);
    if (!at) { /* all but a possible delimiter start is decided */
      size_t keep = len < m->delim_len - 1 ? len : m->delim_len - 1, pass = len - keep;
      if (m->state == MP_VALUE && pass) emit(m, b, pass);
      consume(m, pass);
      return false;
    }
    size_t n = (size_t)(at - b);
    if (m->state == MP_VALUE) {
      if (n) emit(m, b, n);
      end_part(m);
    }
    consume(m, n + m->delim_len);
    m->state = MP_DELIMITED, m->padded = false;
    return true;
  }
  case MP_DELIMITED: { /* "--" closes the body; otherwise optional padding and a line end */
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t')) i++;
    if (i) {
      consume(m, i);
      m->padded = true;
      return true;
    }
    if (len == 0) return false;
    if (b[0] == '-' && !m->padded) {
      if (len < 2) return false;
      if (b[1] != '-') return fail(m);
      m->state = MP_EPILOGUE;
      buf_reset(&m->pending);
      return false;
    }
    if (b[0] == '\n') {
      consume(m, 1);
    } else if (b[0] == '\r') {
      if (len < 2) return false;
      if (b[1] != '\n') return fail(m);
      consume(m, 2);
    } else {
      return fail(m);
    }
    m->state = MP_HEADERS, m->header_size = 0, m->scanned = 0, m->off = 0;
    return true;
  }
  case MP_HEADERS: {
    char *nl = memchr(b + m->scanned, '\n', len - m->scanned);
    if (!nl) {
      m->scanned = len;
      return m->header_size + len > HS_MULTIPART_MAX_HEADERS ? fail(m) : false;
    }
    size_t n = (size_t)(nl - b);
    if ((m->header_size += n + 1) > HS_MULTIPART_MAX_HEADERS) return fail(m);
    size_t line_len = n && b[n - 1] == '\r' ? n - 1 : n;
    if (line_len == 0) {
      m->state = MP_VALUE;
    } else {
      if (memchr(b, 0, line_len)) return fail(m);
      b[line_len] = 0; /* the line end, consumed below */
      header_line(m, b);
    }
    consume(m, n + 1);
    m->scanned = 0;
    return true;
  }
  case MP_EPILOGUE: buf_reset(&m->pending); return false;
  case MP_FAILED: return false;
  }
  return false;
}

bool hs_multipart_feed(hs_multipart *m, const char *data, size_t len) {
  while (len && m->state != MP_FAILED && m->state != MP_EPILOGUE) {
    size_t n = len < FEED_SLICE ? len : FEED_SLICE;
    if (buf_addn(&m->pending, data, n) != BUF_OK) return fail(m); /* not reached: see FEED_SLICE */
    data += n, len -= n;
    while (step(m)) {
    }
  }
  return m->state != MP_FAILED;
}

bool hs_multipart_finish(hs_multipart *m) { return m->state == MP_EPILOGUE; }
