/* Declarative validation of JSON bodies and query strings.
 *
 * A schema is a table of field rules, checked in table order (the specification's order);
 * the first failure becomes "<field>: <message>". The output holds only declared fields,
 * normalised: emails lowercased, "one value or an array" fields made arrays, query values
 * converted to the declared type. Depends on jansson only. */
#ifndef HTTP_SCHEMA_H
#define HTTP_SCHEMA_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
  F_STRING,   /* min_len/max_len in characters */
  F_EMAIL,    /* a valid address, trimmed and lowercased */
  F_ENUM,     /* one of choices */
  F_ZIP,      /* exactly 5 digits */
  F_DATETIME, /* ISO 8601 date-time or date */
  F_TIME,     /* a time of day "HH:MM", 24-hour, 00:00 to 23:59 */
  F_BOOL,
  F_INT,      /* integer within lo..hi when ranged */
  F_NUMBER,   /* finite number within lo..hi when ranged */
  F_OBJECT,   /* any JSON object, or one checked by `object` */
  F_ARRAY,    /* items checked by `item`; min_len/max_len bound the count */
} hs_field_kind;

enum {
  F_REQUIRED = 1 << 0,
  F_ONE_OR_MANY = 1 << 1, /* a single item or an array of items; output is an array without duplicates */
  F_NULLABLE = 1 << 2,    /* null is kept (to clear a value); otherwise null counts as absent */
  F_CSV = 1 << 3,         /* a list of items of the field's kind, output as an array without
                             duplicates: in a query comma-separated ("status=A,B"), in a body
                             an array */
};

typedef struct hs_schema hs_schema;
typedef struct hs_field {
  const char *name;
  hs_field_kind kind;
  unsigned flags;
  size_t min_len, max_len; /* strings: characters; arrays: items; max 0 = unbounded */
  size_t max_bytes;        /* strings: also at most this many bytes of UTF-8 (0 = unbounded) */
  const char *required_unless; /* absent is allowed only when this other field is true */
  bool ranged;
  double lo, hi;
  const char *const *choices; /* F_ENUM: NULL-terminated */
  const struct hs_field *item; /* F_ARRAY and F_ONE_OR_MANY: the rule for each item */
  const hs_schema *object;     /* F_OBJECT: nested rules (optional) */
  const char *message;         /* the message of any failure of this field, instead of the kind's */
} hs_field;

struct hs_schema {
  const hs_field *fields; /* terminated by a row with name == NULL */
};

#define LEN(a, b) .min_len = (a), .max_len = (b)
#define RANGE(a, b) .ranged = true, .lo = (a), .hi = (b)

/* Validates input (an object, or NULL for none) against s. On success returns a new object
 * with the normalised fields; on failure returns NULL and writes "<field>: <message>" to err
 * (256 bytes). from_query: values are strings to convert (query arguments). */
json_t *hs_validate(const hs_schema *s, json_t *input, bool from_query, char err[256]);
/* True when s is a plausible email address (RFC 5321 lengths, a dotted domain). */
bool hs_is_email(const char *s);

#endif
