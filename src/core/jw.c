/* The JSON writer (jw.h). Text grows in arena memory by doubling; a run of bytes that needs no
 * escaping is copied with one memcpy; a byte class table decides what a string byte needs.
 * Numbers are formatted by hand where that is exact (integers, cents, timestamps) and by
 * printf("%.15g") with jansson's fix-ups otherwise. */
#include "core/jw.h"
#include "core/clock.h"
#include "core/util.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JW_MIN_CAP 1024

void jw_init(jw *w, arena *a, size_t hint) {
  w->a = a;
  w->cap = hint > JW_MIN_CAP ? hint : JW_MIN_CAP;
  w->buf = arena_alloc_raw(a, w->cap);
  w->len = 0;
  w->buf[0] = 0;
}

void jw_reserve(jw *w, size_t n) {
  if (w->len + n + 1 <= w->cap) return;
  size_t cap = w->cap * 2;
  while (cap < w->len + n + 1) cap *= 2;
  char *grown = arena_alloc_raw(w->a, cap);
  memcpy(grown, w->buf, w->len + 1);
  w->buf = grown, w->cap = cap;
}

static inline void put(jw *w, const char *s, size_t n) {
  jw_reserve(w, n);
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = 0;
}

static inline void put1(jw *w, char c) {
  jw_reserve(w, 1);
  w->buf[w->len++] = c;
  w->buf[w->len] = 0;
}

/* A comma when something other than an opening bracket or a key precedes. */
static inline void sep(jw *w) {
  if (w->len) {
    char last = w->buf[w->len - 1];
    if (last != '{' && last != '[' && last != ':') put1(w, ',');
  }
}

void jw_raw(jw *w, const char *s, size_t n) { put(w, s, n); }
void jw_raw_value(jw *w, const char *s, size_t n) { sep(w), put(w, s, n); }

void jw_obj(jw *w) { sep(w), put1(w, '{'); }
void jw_obj_end(jw *w) { put1(w, '}'); }
void jw_arr(jw *w) { sep(w), put1(w, '['); }
void jw_arr_end(jw *w) { put1(w, ']'); }

void jw_key(jw *w, const char *key) {
  size_t n = strlen(key);
  sep(w);
  jw_reserve(w, n + 3);
  char *p = w->buf + w->len;
  *p++ = '"';
  memcpy(p, key, n);
  p += n;
  *p++ = '"';
  *p++ = ':';
  w->len += n + 3;
  w->buf[w->len] = 0;
}

void jw_null(jw *w) { sep(w), put(w, "null", 4); }
void jw_bool(jw *w, bool v) { sep(w), v ? put(w, "true", 4) : put(w, "false", 5); }

/* ---- strings ---- */

/* 0: copied as it is; 1: escaped; 2: the first byte of a multi-byte sequence, checked. */
static const unsigned char byte_class[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when it is not one; the same
 * rules as jansson's utf8_check_full (no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned v;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2, v = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    len = 3, v = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    len = 4, v = c & 0x07;
  else
    return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[i] & 0x3F);
  }
  if ((len == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)))
    return 0;
  return len;
}

void jw_strn(jw *w, const char *str, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *s = (const unsigned char *)str;
  sep(w);
  jw_reserve(w, n + 2);
  put1(w, '"');
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && !byte_class[s[run]]) run++;
    if (run > i) put(w, str + i, run - i), i = run;
    if (i >= n) break;
    unsigned c = s[i];
    if (byte_class[c] == 2) {
      size_t len = utf8_len(s + i, n - i);
      if (len)
        put(w, str + i, len), i += len;
      else
        put(w, "\xEF\xBF\xBD", 3), i++; /* U+FFFD for each byte that starts no valid sequence */
      continue;
    }
    char esc[6] = {'\\', 0};
    size_t elen = 2;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default: esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15]; elen = 6;
    }
    put(w, esc, elen);
    i++;
  }
  put1(w, '"');
}

void jw_str(jw *w, const char *s) {
  if (!s) return jw_null(w);
  jw_strn(w, s, strlen(s));
}

void jw_key_str(jw *w, const char *key, const char *s) {
  jw_key(w, key);
  jw_str(w, s);
}

/* ---- numbers ---- */

void jw_int(jw *w, int64_t v) {
  char buf[21];
  size_t n = 0;
  uint64_t u = (uint64_t)v;
  if (v < 0) buf[n++] = '-', u = 0 - u;
  n += uint_digits(u, buf + n);
  sep(w);
  put(w, buf, n);
}

size_t jw_format_real(double v, char out[32]) {
  int len = snprintf(out, 32, "%.15g", v);
  if (len < 0 || len >= 29) return (size_t)snprintf(out, 32, "null");
  if (!strchr(out, '.') && !strchr(out, 'e')) out[len++] = '.', out[len++] = '0', out[len] = 0;
  char *e = strchr(out, 'e'); /* "1e+20" -> "1e20", "1e-05" -> "1e-5", as jansson prints them */
  if (e) {
    char *start = e + 1, *end = start + 1;
    if (*start == '-') start++;
    while (*end == '0') end++;
    if (end != start) {
      memmove(start, end, (size_t)(out + len - end) + 1);
      len -= (int)(end - start);
    }
  }
  return (size_t)len;
}

void jw_real(jw *w, double v) {
  if (!isfinite(v)) return jw_null(w);
  char buf[32];
  size_t n = jw_format_real(v, buf);
  sep(w);
  put(w, buf, n);
}

void jw_money(jw *w, int64_t cents) {
  /* below 10^13 cents every amount has at most 15 significant digits, so %.15g of
   * cents / 100.0 is exactly the decimal written here */
  if (cents <= -10000000000000LL || cents >= 10000000000000LL) return jw_real(w, (double)cents / 100.0);
  char buf[24];
  size_t n = 0;
  uint64_t u = (uint64_t)(cents < 0 ? -cents : cents);
  if (cents < 0) buf[n++] = '-';
  n += uint_digits(u / 100, buf + n);
  unsigned frac = (unsigned)(u % 100);
  buf[n++] = '.';
  buf[n++] = (char)('0' + frac / 10);
  if (frac % 10) buf[n++] = (char)('0' + frac % 10);
  sep(w);
  put(w, buf, n);
}

void jw_iso(jw *w, int64_t ms) {
  char buf[26];
  buf[0] = '"';
  clock_format_iso(ms, buf + 1);
  buf[25] = '"';
  sep(w);
  put(w, buf, 26);
}

void jw_json(jw *w, const char *text) {
  if (!text) return jw_null(w);
  sep(w);
  put(w, text, strlen(text));
}

/* ---- database cells ---- */

void jw_cell_iso(jw *w, const char *ms_text) {
  if (!ms_text) return jw_null(w);
  jw_iso(w, strtoll(ms_text, NULL, 10));
}

void jw_cell_real(jw *w, const char *text) {
  if (!text) return jw_null(w);
  jw_real(w, strtod(text, NULL));
}

void jw_cell_int(jw *w, const char *text) {
  if (!text) return jw_null(w);
  jw_int(w, strtoll(text, NULL, 10));
}

void jw_cell_money(jw *w, const char *cents) {
  if (!cents) return jw_null(w);
  jw_money(w, strtoll(cents, NULL, 10));
}

void jw_cell_bool(jw *w, const char *text) { jw_bool(w, text && (text[0] == '1' || text[0] == 't')); }

void jw_pack(jw *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jw_packv(w, fmt, ap);
  va_end(ap);
}

void jw_packv(jw *w, const char *fmt, va_list ap) {
  bool obj[16], want_key[16]; /* per open level: an object; its next 's' is a member's key */
  int depth = 0;
  for (const char *f = fmt; *f; f++) {
    switch (*f) {
    case '{':
    case '[':
      *f == '{' ? jw_obj(w) : jw_arr(w);
      obj[depth] = want_key[depth] = *f == '{', depth++;
      continue;
    case '}': jw_obj_end(w), depth--; break;
    case ']': jw_arr_end(w), depth--; break;
    case 's':
      if (depth > 0 && want_key[depth - 1]) {
        jw_key(w, va_arg(ap, const char *)), want_key[depth - 1] = false;
        continue;
      }
      jw_str(w, va_arg(ap, const char *));
      break;
    case 'b': jw_bool(w, va_arg(ap, int) != 0); break;
    case 'i': jw_int(w, va_arg(ap, int)); break;
    case 'I': jw_int(w, va_arg(ap, int64_t)); break;
    case 'f': jw_real(w, va_arg(ap, double)); break;
    case 'n': jw_null(w); break;
    case 'M': jw_money(w, va_arg(ap, int64_t)); break;
    case 'T': jw_iso(w, va_arg(ap, int64_t)); break;
    default: continue; /* ':', ',', spaces */
    }
    if (depth > 0) want_key[depth - 1] = obj[depth - 1]; /* a value done: in an object, a key next */
  }
}
