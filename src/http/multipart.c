/* The parser keeps the bytes it cannot decide yet in one buffer and works through it as a
 * state machine: the preamble, a delimiter, a part's header lines, the part's value, and the
 * epilogue after the closing delimiter. The body is read as if it began with CRLF, so the
 * first delimiter ("--B" at the very start, or after a preamble line) is the same
 * "\r\n--B" as every later one. Inside a value, everything but the last |delimiter| - 1
 * bytes is passed on at once (those could be the start of a delimiter), so the buffer
 * holds at most one header line (bounded) or a delimiter's length, whatever the pieces. */
#include "http/multipart.h"
#include "core/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { MP_PREAMBLE, MP_DELIMITED, MP_HEADERS, MP_VALUE, MP_EPILOGUE, MP_FAILED } mp_state;

struct hs_multipart {
  hs_part_fn fn;
  void *cls;
  mp_state state;
  char delim[HS_MULTIPART_MAX_BOUNDARY + 5]; /* "\r\n--" + boundary */
  size_t delim_len;
  char *buf; /* undecided bytes */
  size_t len, cap;
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
  m->cap = 256;
  m->buf = xmalloc(m->cap);
  memcpy(m->buf, "\r\n", 2); /* see the design note */
  m->len = 2;
  return m;
}

void hs_multipart_free(hs_multipart *m) {
  if (!m) return;
  free(m->name), free(m->filename), free(m->buf);
  free(m);
}

static void consume(hs_multipart *m, size_t n) {
  memmove(m->buf, m->buf + n, m->len - n);
  m->len -= n;
}

static bool fail(hs_multipart *m) {
  m->state = MP_FAILED;
  m->len = 0;
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
  switch (m->state) {
  case MP_PREAMBLE:
  case MP_VALUE: {
    char *at = memmem(m->buf, m->len, m->delim, m->delim_len);
    if (!at) { /* all but a possible delimiter start is decided */
      size_t keep = m->len < m->delim_len - 1 ? m->len : m->delim_len - 1, pass = m->len - keep;
      if (m->state == MP_VALUE && pass) emit(m, m->buf, pass);
      consume(m, pass);
      return false;
    }
    size_t n = (size_t)(at - m->buf);
    if (m->state == MP_VALUE) {
      if (n) emit(m, m->buf, n);
      end_part(m);
    }
    consume(m, n + m->delim_len);
    m->state = MP_DELIMITED, m->padded = false;
    return true;
  }
  case MP_DELIMITED: { /* "--" closes the body; otherwise optional padding and a line end */
    size_t i = 0;
    while (i < m->len && (m->buf[i] == ' ' || m->buf[i] == '\t')) i++;
    if (i) {
      consume(m, i);
      m->padded = true;
      return true;
    }
    if (m->len == 0) return false;
    if (m->buf[0] == '-' && !m->padded) {
      if (m->len < 2) return false;
      if (m->buf[1] != '-') return fail(m);
      m->state = MP_EPILOGUE;
      m->len = 0;
      return false;
    }
    if (m->buf[0] == '\n') {
      consume(m, 1);
    } else if (m->buf[0] == '\r') {
      if (m->len < 2) return false;
      if (m->buf[1] != '\n') return fail(m);
      consume(m, 2);
    } else {
      return fail(m);
    }
    m->state = MP_HEADERS, m->header_size = 0, m->scanned = 0, m->off = 0;
    return true;
  }
  case MP_HEADERS: {
    char *nl = memchr(m->buf + m->scanned, '\n', m->len - m->scanned);
    if (!nl) {
      m->scanned = m->len;
      return m->header_size + m->len > HS_MULTIPART_MAX_HEADERS ? fail(m) : false;
    }
    size_t n = (size_t)(nl - m->buf);
    if ((m->header_size += n + 1) > HS_MULTIPART_MAX_HEADERS) return fail(m);
    size_t line_len = n && m->buf[n - 1] == '\r' ? n - 1 : n;
    if (line_len == 0) {
      m->state = MP_VALUE;
    } else {
      if (memchr(m->buf, 0, line_len)) return fail(m);
      m->buf[line_len] = 0; /* the line end, consumed below */
      header_line(m, m->buf);
    }
    consume(m, n + 1);
    m->scanned = 0;
    return true;
  }
  case MP_EPILOGUE: m->len = 0; return false;
  case MP_FAILED: return false;
  }
  return false;
}

bool hs_multipart_feed(hs_multipart *m, const char *data, size_t len) {
  if (m->state == MP_FAILED) return false;
  if (m->state == MP_EPILOGUE) return true;
  if (m->len + len > m->cap) {
    while (m->len + len > m->cap) m->cap *= 2;
    m->buf = xrealloc(m->buf, m->cap);
  }
  memcpy(m->buf + m->len, data, len);
  m->len += len;
  while (step(m)) {
  }
  return m->state != MP_FAILED;
}

bool hs_multipart_finish(hs_multipart *m) { return m->state == MP_EPILOGUE; }
