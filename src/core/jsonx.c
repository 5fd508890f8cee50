/* Conversions between database text cells and JSON values. */
#include "core/jsonx.h"
#include "core/clock.h"
#include <math.h>
#include <stdlib.h>

json_t *jx_str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *jx_iso(int64_t ms) {
  char buf[25];
  clock_format_iso(ms, buf);
  return json_string(buf);
}

json_t *jx_iso_or_null(const char *ms_text) { return ms_text ? jx_iso(strtoll(ms_text, NULL, 10)) : json_null(); }

json_t *jx_real_or_null(const char *text) { return text ? json_real(strtod(text, NULL)) : json_null(); }

json_t *jx_bool(const char *text) { return json_boolean(text && text[0] == '1'); }

int64_t jx_cents(double dollars) { return (int64_t)llround(dollars * 100.0); }

json_t *jx_money(int64_t cents) { return json_real((double)cents / 100.0); }

json_t *jx_parse_or(const char *text, json_t *fallback) {
  json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
  if (!v) return fallback;
  json_decref(fallback);
  return v;
}
