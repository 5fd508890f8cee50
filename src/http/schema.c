/* The validator: one switch over field kinds, each returning a message or NULL. */
#include "http/schema.h"
#include "core/clock.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counts UTF-8 code points, so "characters" means what a person counts. */
static size_t utf8_len(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80) n++;
  return n;
}

static bool blank(const char *s) {
  for (; *s; s++)
    if (!isspace((unsigned char)*s)) return false;
  return true;
}

bool hs_is_email(const char *s) {
  size_t len = strlen(s);
  const char *at = strchr(s, '@');
  if (len > 254 || !at || at == s || at - s > 64 || strchr(at + 1, '@')) return false;
  for (const char *p = s; p < at; p++)
    if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p) || strchr("<>()[]\\,;:\"", *p)) return false;
  if (s[0] == '.' || at[-1] == '.' || strstr(s, "..")) return false;
  const char *domain = at + 1, *last_dot = strrchr(domain, '.');
  if (!last_dot || last_dot == domain) return false;
  size_t label = 0;
  for (const char *p = domain; *p; p++) {
    if (*p == '.') {
      if (label == 0 || p[-1] == '-') return false;
      label = 0;
    } else if (isalnum((unsigned char)*p) || (*p == '-' && label > 0)) {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  if (label == 0) return false;
  size_t tld = strlen(last_dot + 1);
  if (tld < 2) return false;
  for (const char *p = last_dot + 1; *p; p++)
    if (!isalpha((unsigned char)*p)) return false;
  return true;
}

static const char *check_string(const hs_field *f, json_t *v, char *msg, size_t cap) {
  if (!json_is_string(v)) return "must be a string";
  const char *s = json_string_value(v);
  size_t n = utf8_len(s);
  if (f->min_len > 0 && (n == 0 || blank(s))) return "must not be empty";
  if (f->min_len > 1 && n < f->min_len) return snprintf(msg, cap, "must be at least %zu characters", f->min_len), msg;
  if (f->max_len && n > f->max_len) return snprintf(msg, cap, "must be at most %zu characters", f->max_len), msg;
  if (f->max_bytes && strlen(s) > f->max_bytes) return snprintf(msg, cap, "must be at most %zu bytes", f->max_bytes), msg;
  return NULL;
}

static const char *check_range(const hs_field *f, double d, char *msg, size_t cap) {
  if (!f->ranged || (d >= f->lo && d <= f->hi)) return NULL;
  snprintf(msg, cap, "must be between %.15g and %.15g", f->lo, f->hi);
  return msg;
}

/* Converts a query-string value to the JSON type the field expects; NULL when impossible. */
static json_t *from_query_string(const hs_field *f, json_t *v) {
  const char *s = json_string_value(v);
  char *end;
  switch (f->kind) {
  case F_INT: {
    long long n = strtoll(s, &end, 10);
    return *s && !*end && !isspace((unsigned char)*s) ? json_integer(n) : NULL;
  }
  case F_NUMBER: {
    double d = strtod(s, &end);
    return *s && !*end && !isspace((unsigned char)*s) ? json_real(d) : NULL;
  }
  case F_BOOL:
    if (!strcmp(s, "true") || !strcmp(s, "1")) return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "0")) return json_false();
    return NULL;
  default: return json_incref(v);
  }
}

/* Checks one value; returns its normalised form (new reference) or NULL with *why set. */
static json_t *check_value(const hs_field *f, json_t *v, bool from_query, const char **why, char *msg, size_t cap) {
  if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
    *why = "must not contain NUL characters";
    return NULL;
  }
  json_t *converted = NULL;
  if (from_query && json_is_string(v) && (f->kind == F_INT || f->kind == F_NUMBER || f->kind == F_BOOL)) {
    converted = from_query_string(f, v);
    if (!converted) {
      *why = f->kind == F_BOOL ? "must be a boolean" : f->kind == F_INT ? "must be an integer" : "must be a number";
      return NULL;
    }
    v = converted;
  }
  json_t *out = NULL;
  *why = NULL;
  switch (f->kind) {
  case F_STRING:
    if (!(*why = check_string(f, v, msg, cap))) out = json_incref(v);
    break;
  case F_EMAIL: {
    if (!json_is_string(v)) {
      *why = "must be a string";
      break;
    }
    const char *s = json_string_value(v);
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
    char *lower = strndup(s, n);
    for (char *p = lower; *p; p++) *p = (char)tolower((unsigned char)*p);
    if (hs_is_email(lower)) out = json_string(lower);
    else *why = "must be a valid email";
    free(lower);
    break;
  }
  case F_ENUM:
    if (json_is_string(v))
      for (const char *const *c = f->choices; *c; c++)
        if (!strcmp(*c, json_string_value(v))) out = json_incref(v);
    if (!out) {
      size_t n = (size_t)snprintf(msg, cap, "must be one of:");
      for (const char *const *c = f->choices; *c && n < cap; c++)
        n += (size_t)snprintf(msg + n, cap - n, "%s %s", c == f->choices ? "" : ",", *c);
      *why = msg;
    }
    break;
  case F_ZIP: {
    const char *s = json_string_value(v);
    bool ok = s && strlen(s) == 5;
    for (int i = 0; ok && i < 5; i++) ok = isdigit((unsigned char)s[i]);
    if (ok) out = json_incref(v);
    else *why = "must be exactly 5 digits";
    break;
  }
  case F_DATETIME: {
    int64_t ms;
    if (json_is_string(v) && clock_parse_iso(json_string_value(v), &ms)) out = json_incref(v);
    else *why = "must be a valid ISO 8601 date-time";
    break;
  }
  case F_TIME: {
    const char *s = json_string_value(v);
    bool ok = s && strlen(s) == 5 && s[2] == ':' && isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) &&
              isdigit((unsigned char)s[3]) && isdigit((unsigned char)s[4]);
    if (ok && atoi(s) < 24 && atoi(s + 3) < 60) out = json_incref(v);
    else *why = "must be a time HH:MM (00:00 to 23:59)";
    break;
  }
  case F_BOOL:
    if (json_is_boolean(v)) out = json_incref(v);
    else *why = "must be a boolean";
    break;
  case F_INT: {
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : NAN;
    if (isnan(d) || d != floor(d) || fabs(d) > 9007199254740991.0) *why = "must be an integer";
    else if (!(*why = check_range(f, d, msg, cap))) out = json_integer((json_int_t)d);
    break;
  }
  case F_NUMBER: {
    if (!json_is_number(v) || !isfinite(json_number_value(v))) *why = "must be a number";
    else if (!(*why = check_range(f, json_number_value(v), msg, cap))) out = json_incref(v);
    break;
  }
  case F_OBJECT:
    if (!json_is_object(v)) *why = "must be an object";
    else if (!f->object) out = json_deep_copy(v);
    else out = hs_validate(f->object, v, false, msg), *why = out ? NULL : msg;
    break;
  case F_ARRAY:
    break; /* handled by the caller, which knows the field name for item messages */
  }
  json_decref(converted);
  return out;
}

static bool contains(json_t *arr, json_t *v) {
  size_t i;
  json_t *x;
  json_array_foreach(arr, i, x) if (json_equal(x, v)) return true;
  return false;
}

/* Validates an array (or, for F_ONE_OR_MANY, a single item) into a new array. */
static json_t *check_array(const hs_field *f, json_t *v, bool from_query, char err[256]) {
  char msg[256];
  const char *why = NULL;
  json_t *items = json_is_array(v) ? json_incref(v) : NULL;
  if (!items && (f->flags & F_ONE_OR_MANY)) items = json_pack("[O]", v);
  if (!items) return snprintf(err, 256, "%s: must be an array", f->name), NULL;
  json_t *out = json_array();
  size_t i;
  json_t *x;
  json_array_foreach(items, i, x) {
    json_t *ok = f->item ? check_value(f->item, x, from_query, &why, msg, sizeof msg) : json_incref(x);
    if (!ok) {
      /* an object item names the inner field as a path: "jobs[0].amount: ..." */
      bool inner = f->item && f->item->kind == F_OBJECT && f->item->object && why == msg;
      if (inner) snprintf(err, 256, "%s[%zu].%s", f->name, i, why);
      else snprintf(err, 256, "%s[%zu]: %s", f->name, i, why);
      json_decref(out), json_decref(items);
      return NULL;
    }
    if ((f->flags & F_ONE_OR_MANY) && contains(out, ok)) json_decref(ok);
    else json_array_append_new(out, ok);
  }
  json_decref(items);
  size_t n = json_array_size(out);
  if (n < f->min_len) snprintf(err, 256, "%s: must contain at least %zu item%s", f->name, f->min_len, f->min_len == 1 ? "" : "s");
  else if (f->max_len && n > f->max_len) snprintf(err, 256, "%s: must contain at most %zu items", f->name, f->max_len);
  else return out;
  json_decref(out);
  return NULL;
}

/* An F_CSV field's items: a query value split at its commas, an array as it is (what
 * validation answered), or the one value. New reference. */
static void split_commas(json_t *items, const char *s) {
  for (const char *p = s;; p++) {
    size_t n = strcspn(p, ",");
    json_array_append_new(items, json_stringn(p, n));
    p += n;
    if (!*p) return;
  }
}

/* In a query, each value of a repeated key (status=A&status=B) is split too, so both forms
 * read the same list. */
static json_t *csv_items(json_t *v, bool from_query) {
  if (!from_query) return json_is_array(v) ? json_incref(v) : json_pack("[O]", v);
  json_t *items = json_array(), *one;
  size_t i;
  if (!json_is_array(v)) {
    split_commas(items, json_string_value(v) ? json_string_value(v) : "");
    return items;
  }
  json_array_foreach(v, i, one) split_commas(items, json_string_value(one) ? json_string_value(one) : "");
  return items;
}

static bool list_field(const hs_field *f) { return (f->flags & (F_CSV | F_ONE_OR_MANY)) || f->kind == F_ARRAY; }

/* A list written in a query form the schema does not read, `name[]=A` (the bracket style of
 * some libraries): refused, rather than the list left out. Writes the 400's message. */
static bool unread_query_form(const hs_schema *s, json_t *input, char err[256]) {
  for (const hs_field *f = s->fields; f->name; f++) {
    char brackets[96];
    snprintf(brackets, sizeof brackets, "%s[]", f->name);
    if (list_field(f) && json_object_get(input, brackets)) {
      snprintf(err, 256, "%s: a list is written %s=A,B or %s=A&%s=B, not %s[]=A", f->name, f->name, f->name,
               f->name, f->name);
      return true;
    }
  }
  return false;
}

/* An F_CSV field as an array of its items, each checked as f's kind, without duplicates; NULL
 * with *why set when an item fails. New reference. */
static json_t *check_csv(const hs_field *f, json_t *v, bool from_query, const char **why, char *msg, size_t cap) {
  json_t *items = csv_items(v, from_query), *out = json_array(), *item;
  size_t i;
  json_array_foreach(items, i, item) {
    json_t *ok = check_value(f, item, from_query, why, msg, cap);
    if (!ok) {
      json_decref(items), json_decref(out);
      return NULL;
    }
    if (contains(out, ok))
      json_decref(ok);
    else
      json_array_append_new(out, ok);
  }
  json_decref(items);
  return out;
}

json_t *hs_validate(const hs_schema *s, json_t *input, bool from_query, char err[256]) {
  if (from_query && input && unread_query_form(s, input, err)) return NULL;
  json_t *out = json_object();
  for (const hs_field *f = s->fields; f->name; f++) {
    json_t *v = input ? json_object_get(input, f->name) : NULL;
    if (from_query && json_is_array(v) && !list_field(f)) v = json_array_get(v, 0); /* the first one wins */
    if (json_is_null(v) && (f->flags & F_NULLABLE)) {
      json_object_set_new(out, f->name, json_null());
      continue;
    }
    if (!v || json_is_null(v)) {
      if (f->flags & F_REQUIRED) {
        snprintf(err, 256, "%s: is required", f->name);
        goto fail;
      }
      if (f->required_unless && !json_is_true(input ? json_object_get(input, f->required_unless) : NULL)) {
        snprintf(err, 256, "%s: is required unless %s is true", f->name, f->required_unless);
        goto fail;
      }
      continue;
    }
    json_t *ok;
    char msg[256];
    const char *why = NULL;
    if (f->flags & F_CSV) {
      ok = check_csv(f, v, from_query, &why, msg, sizeof msg);
    } else if (f->kind == F_ARRAY || (f->flags & F_ONE_OR_MANY)) {
      if (!(ok = check_array(f, v, from_query, err)) && !f->message) goto fail;
    } else {
      ok = check_value(f, v, from_query, &why, msg, sizeof msg);
    }
    if (!ok) {
      if (f->message)
        snprintf(err, 256, "%s: %s", f->name, f->message);
      else if (f->kind == F_OBJECT && f->object && why == msg)
        snprintf(err, 256, "%s.%s", f->name, msg);
      else
        snprintf(err, 256, "%s: %s", f->name, why);
      goto fail;
    }
    json_object_set_new(out, f->name, ok);
  }
  return out;
fail:
  json_decref(out);
  return NULL;
}
