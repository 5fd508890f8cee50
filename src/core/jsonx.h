/* Small jansson helpers for building responses from database rows. */
#ifndef CORE_JSONX_H
#define CORE_JSONX_H
#include <jansson.h>
#include <stdint.h>

/* A string, or null when s is NULL. */
json_t *jx_str_or_null(const char *s);
/* An ISO 8601 timestamp from epoch ms text (a database cell), or null when NULL. */
json_t *jx_iso_or_null(const char *ms_text);
json_t *jx_iso(int64_t ms);
/* A number from text, or null when NULL. */
json_t *jx_real_or_null(const char *text);
/* A boolean from "0"/"1" text. */
json_t *jx_bool(const char *text);
/* Integer cents from dollars, rounded to the nearest cent. */
int64_t jx_cents(double dollars);
/* Dollars from integer cents, rounded to cents. */
json_t *jx_money(int64_t cents);
/* Parses a JSON document stored as text; on NULL or invalid text returns fallback (stolen). */
json_t *jx_parse_or(const char *text, json_t *fallback);

#endif
