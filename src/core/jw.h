/* A streaming JSON writer into arena memory: the one place where answers are serialised.
 *
 * Values are appended in order; commas between members and elements are placed by the writer
 * (a value or key that follows another gets one), so a caller only opens, writes and closes.
 * Strings are escaped as jansson escapes them (\" \\ \b \f \n \r \t, other control characters
 * as \u00XX, nothing else), except that invalid UTF-8, which jansson refuses, becomes U+FFFD;
 * reals are printed with 15 significant digits as jansson's JSON_REAL_PRECISION(15) prints
 * them (always with a '.' or an exponent), non-finite ones as null. The text lives in the
 * writer's arena and is NUL-terminated; it is never freed piecemeal. One writer is used by one
 * thread at a time. */
#ifndef CORE_JW_H
#define CORE_JW_H
#include "core/arena.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jw {
  arena *a;
  char *buf;
  size_t len, cap;
} jw;

/* Starts an empty text in a, with room for about hint bytes (0: a small default). */
void jw_init(jw *w, arena *a, size_t hint);
/* Makes room for n more bytes, so a caller that knows the size grows the buffer once. */
void jw_reserve(jw *w, size_t n);
/* The text so far (NUL-terminated) and its length. */
static inline const char *jw_text(const jw *w) { return w->buf; }
static inline size_t jw_len(const jw *w) { return w->len; }

/* Appends bytes as they are: JSON text, or a piece of one made by this writer earlier (a
 * stored fragment). No separator is added. */
void jw_raw(jw *w, const char *s, size_t n);
#define jw_lit(w, s) jw_raw((w), (s), sizeof(s) - 1)
/* The same for a complete value (or the opening part of one): a separator first if needed. */
void jw_raw_value(jw *w, const char *s, size_t n);

void jw_obj(jw *w);
void jw_obj_end(jw *w);
void jw_arr(jw *w);
void jw_arr_end(jw *w);
/* A member's key; key is a literal of the caller's that needs no escaping. */
void jw_key(jw *w, const char *key);

/* Values. A NULL string, JSON text or URL writes null. */
void jw_str(jw *w, const char *s);
/* A member with a string value: jw_key, then jw_str. */
void jw_key_str(jw *w, const char *key, const char *s);
void jw_strn(jw *w, const char *s, size_t n);
void jw_null(jw *w);
void jw_bool(jw *w, bool v);
void jw_int(jw *w, int64_t v);
void jw_real(jw *w, double v);
/* Dollars from integer cents (1250 -> 12.5), printed as jw_real prints cents / 100. */
void jw_money(jw *w, int64_t cents);
/* An ISO 8601 UTC timestamp from epoch milliseconds ("2026-11-22T01:49:51.123Z"). */
void jw_iso(jw *w, int64_t ms);
/* A JSON value stored as text (a database cell), copied as it is. */
void jw_json(jw *w, const char *text);

/* Cell conversions: a database cell (text, NULL for SQL NULL) as the JSON value it holds. */
void jw_cell_iso(jw *w, const char *ms_text); /* epoch ms -> timestamp, or null */
void jw_cell_real(jw *w, const char *text);   /* number, or null */
void jw_cell_int(jw *w, const char *text);    /* integer, or null */
void jw_cell_money(jw *w, const char *cents); /* dollars, or null */
void jw_cell_bool(jw *w, const char *text);   /* "1" -> true, anything else false */

/* Writes a small value described by fmt, in json_pack's notation, with the values as jw's own:
 * `{` `}` `[` `]` open and close, and in an object each member is a key `s` (a const char *)
 * then its value: `s` a string (NULL: null), `b` an int as a boolean, `i` an int, `I` an
 * int64_t, `f` a double, `n` null (no argument), `M` int64_t cents as dollars (jw_money), `T`
 * int64_t epoch ms as a timestamp (jw_iso); `:`, `,` and spaces are ignored. For answers that
 * are a few literal members: `jw_pack(w, "{s:b, s:s}", "ok", 1, "message", text)`. */
void jw_pack(jw *w, const char *fmt, ...);
void jw_packv(jw *w, const char *fmt, va_list ap);

/* Formats v as jw_real does into out (32 bytes); returns the length. */
size_t jw_format_real(double v, char out[32]);

#endif
