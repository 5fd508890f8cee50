/* Unit tests for src/http/schema.c: every field kind, presence rules, table order, dropping of
 * undeclared fields and query-string conversion. Bad inputs are table-driven. */
#include "http/schema.h"
#include "unit.h"
#include <string.h>

/* ---- helpers ---- */

static json_t *parse(const char *text) {
  json_error_t e;
  json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
  if (!v) fail_msg("bad test JSON %s: %s", text, e.text);
  return v;
}

/* Validates text against s; returns the output (caller decrefs) or NULL with err set. */
static json_t *run(const hs_schema *s, const char *text, bool from_query, char err[256]) {
  json_t *in = text ? parse(text) : NULL;
  strcpy(err, "(unset)");
  json_t *out = hs_validate(s, in, from_query, err);
  json_decref(in);
  return out;
}

/* Asserts that text validates and that the output equals want (JSON text). */
static void expect_ok(const hs_schema *s, const char *text, bool from_query, const char *want) {
  char err[256];
  json_t *out = run(s, text, from_query, err);
  if (!out) fail_msg("input %s was refused: %s", text ? text : "(none)", err);
  json_t *w = parse(want);
  if (!json_equal(out, w)) {
    char *got = json_dumps(out, JSON_SORT_KEYS | JSON_ENCODE_ANY);
    fail_msg("input %s gave %s, want %s", text ? text : "(none)", got, want);
  }
  json_decref(w);
  json_decref(out);
}

/* Asserts that text is refused with exactly the message want. */
static void expect_err(const hs_schema *s, const char *text, bool from_query, const char *want) {
  char err[256];
  json_t *out = run(s, text, from_query, err);
  if (out) {
    char *got = json_dumps(out, JSON_SORT_KEYS | JSON_ENCODE_ANY);
    fail_msg("input %s was accepted as %s, want error \"%s\"", text ? text : "(none)", got, want);
  }
  if (strcmp(err, want)) fail_msg("input %s: error \"%s\", want \"%s\"", text ? text : "(none)", err, want);
}

typedef struct bad_case {
  const char *input, *error;
} bad_case;

static void expect_all_bad(const hs_schema *s, const bad_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) expect_err(s, cases[i].input, false, cases[i].error);
}

#define BAD(schema, cases) expect_all_bad(&(schema), (cases), sizeof(cases) / sizeof((cases)[0]))

/* ---- F_STRING ---- */

static const hs_field string_fields[] = {
    {"name", F_STRING, F_REQUIRED, LEN(1, 3)},
    {"nick", F_STRING, 0, LEN(2, 0)},
    {"note", F_STRING, 0, LEN(0, 0)},
    {NULL},
};
static const hs_schema string_schema = {string_fields};

static void test_string_bounds_in_characters(void **state) {
  (void)state;
  expect_ok(&string_schema, "{\"name\": \"abc\"}", false, "{\"name\": \"abc\"}");
  expect_ok(&string_schema, "{\"name\": \"a\"}", false, "{\"name\": \"a\"}");
  /* three characters of two, three and four bytes each pass max 3 */
  expect_ok(&string_schema, "{\"name\": \"\u00e9\u00e9\u00e9\"}", false, "{\"name\": \"\u00e9\u00e9\u00e9\"}");
  expect_ok(&string_schema, "{\"name\": \"\u65e5\u672c\u8a9e\"}", false, "{\"name\": \"\u65e5\u672c\u8a9e\"}");
  expect_ok(&string_schema, "{\"name\": \"\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\"}", false,
            "{\"name\": \"\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\"}");
  /* min 2 counts characters too: one two-byte character is too short */
  expect_ok(&string_schema, "{\"name\": \"x\", \"nick\": \"\u00e9\u00e9\"}", false,
            "{\"name\": \"x\", \"nick\": \"\u00e9\u00e9\"}");
  /* no bounds: the empty string is fine */
  expect_ok(&string_schema, "{\"name\": \"x\", \"note\": \"\"}", false, "{\"name\": \"x\", \"note\": \"\"}");
  static const bad_case bad[] = {
      {"{\"name\": \"abcd\"}", "name: must be at most 3 characters"},
      {"{\"name\": \"\u00e9\u00e9\u00e9\u00e9\"}", "name: must be at most 3 characters"},
      {"{\"name\": \"\"}", "name: must not be empty"},
      {"{\"name\": \"   \"}", "name: must not be empty"},
      {"{\"name\": \"\\t\\n\"}", "name: must not be empty"},
      {"{\"name\": 12}", "name: must be a string"},
      {"{\"name\": [\"a\"]}", "name: must be a string"},
      {"{\"name\": true}", "name: must be a string"},
      {"{\"name\": \"a\\u0000b\"}", "name: must not contain NUL characters"},
      {"{\"name\": \"x\", \"nick\": \"\u00e9\"}", "nick: must be at least 2 characters"},
      {"{\"name\": \"x\", \"nick\": \" \"}", "nick: must not be empty"},
  };
  BAD(string_schema, bad);
}

/* ---- F_EMAIL and hs_is_email ---- */

static const hs_field email_fields[] = {
    {"email", F_EMAIL, F_REQUIRED, LEN(0, 0)},
    {NULL},
};
static const hs_schema email_schema = {email_fields};

static void test_email_trims_and_lowercases(void **state) {
  (void)state;
  expect_ok(&email_schema, "{\"email\": \"  Alice.Smith@Example.COM \\t\"}", false,
            "{\"email\": \"alice.smith@example.com\"}");
  expect_ok(&email_schema, "{\"email\": \"bob+tag@mail.example.org\"}", false,
            "{\"email\": \"bob+tag@mail.example.org\"}");
  static const bad_case bad[] = {
      {"{\"email\": \"alice\"}", "email: must be a valid email"},
      {"{\"email\": \"alice@\"}", "email: must be a valid email"},
      {"{\"email\": \"@example.com\"}", "email: must be a valid email"},
      {"{\"email\": \"alice@example\"}", "email: must be a valid email"},
      {"{\"email\": \"al ice@example.com\"}", "email: must be a valid email"},
      {"{\"email\": \"\"}", "email: must be a valid email"},
      {"{\"email\": \"   \"}", "email: must be a valid email"},
      {"{\"email\": 42}", "email: must be a string"},
      {"{}", "email: is required"},
  };
  BAD(email_schema, bad);
}

static void test_is_email(void **state) {
  (void)state;
  static const char *good[] = {
      "a@b.co", "first.last@example.com", "user+tag@sub.domain.example", "x_y-z@my-host.io", "1234@numbers123.net",
  };
  static const char *bad[] = {
      "",
      "plain",
      "@example.com",
      "user@",
      "user@example",
      "user@@example.com",
      "us@er@example.com",
      "user@example.c",     /* one-letter TLD */
      "user@example.c0m",   /* digit in TLD */
      "user@.example.com",  /* empty label */
      "user@example..com",  /* empty label */
      "user@example.com.",  /* trailing dot */
      "user@-example.com",  /* label starts with a hyphen */
      "user@example-.com",  /* label ends with a hyphen */
      "user@exa_mple.com",  /* underscore in domain */
      ".user@example.com",  /* local part starts with a dot */
      "user.@example.com",  /* local part ends with a dot */
      "us..er@example.com", /* two dots */
      "us er@example.com",  /* space */
      "us<er@example.com",  /* special character */
      "us,er@example.com",
      "us\"er@example.com",
      "user@exam ple.com",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    if (!hs_is_email(good[i])) fail_msg("hs_is_email(\"%s\") = false, want true", good[i]);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (hs_is_email(bad[i])) fail_msg("hs_is_email(\"%s\") = true, want false", bad[i]);

  /* RFC 5321 lengths: local part up to 64, a label up to 63, the address up to 254 */
  char buf[400];
  memset(buf, 'a', 64);
  strcpy(buf + 64, "@example.com");
  assert_true(hs_is_email(buf));
  memset(buf, 'a', 65);
  strcpy(buf + 65, "@example.com");
  assert_false(hs_is_email(buf));

  strcpy(buf, "u@");
  memset(buf + 2, 'b', 63);
  strcpy(buf + 65, ".com");
  assert_true(hs_is_email(buf));
  strcpy(buf, "u@");
  memset(buf + 2, 'b', 64);
  strcpy(buf + 66, ".com");
  assert_false(hs_is_email(buf));

  /* u@ + 4 labels of 60 + "com": 2 + 4 * 61 + 3 = 249 characters; then 254, then 255 */
  strcpy(buf, "u@");
  size_t n = 2;
  for (int i = 0; i < 4; i++) {
    memset(buf + n, 'c', 60);
    n += 60;
    buf[n++] = '.';
  }
  strcpy(buf + n, "com");
  assert_int_equal(strlen(buf), 249);
  assert_true(hs_is_email(buf));
  memmove(buf + 6, buf + 1, strlen(buf + 1) + 1); /* longer local part: 254 characters */
  memset(buf + 1, 'u', 5);
  assert_int_equal(strlen(buf), 254);
  assert_true(hs_is_email(buf));
  memmove(buf + 1, buf, strlen(buf) + 1); /* 255 characters */
  assert_int_equal(strlen(buf), 255);
  assert_false(hs_is_email(buf));
}

/* ---- F_ENUM, F_ZIP, F_DATETIME, F_BOOL ---- */

static const char *const status_choices[] = {"open", "closed", NULL};
static const hs_field misc_fields[] = {
    {"status", F_ENUM, 0, .choices = status_choices},
    {"zip", F_ZIP, 0, LEN(0, 0)},
    {"when", F_DATETIME, 0, LEN(0, 0)},
    {"flag", F_BOOL, 0, LEN(0, 0)},
    {NULL},
};
static const hs_schema misc_schema = {misc_fields};

static void test_enum(void **state) {
  (void)state;
  expect_ok(&misc_schema, "{\"status\": \"open\"}", false, "{\"status\": \"open\"}");
  expect_ok(&misc_schema, "{\"status\": \"closed\"}", false, "{\"status\": \"closed\"}");
  static const bad_case bad[] = {
      {"{\"status\": \"OPEN\"}", "status: must be one of: open, closed"},
      {"{\"status\": \"ope\"}", "status: must be one of: open, closed"},
      {"{\"status\": \"\"}", "status: must be one of: open, closed"},
      {"{\"status\": 1}", "status: must be one of: open, closed"},
  };
  BAD(misc_schema, bad);
}

static void test_zip(void **state) {
  (void)state;
  expect_ok(&misc_schema, "{\"zip\": \"02139\"}", false, "{\"zip\": \"02139\"}");
  static const bad_case bad[] = {
      {"{\"zip\": \"1234\"}", "zip: must be exactly 5 digits"},
      {"{\"zip\": \"123456\"}", "zip: must be exactly 5 digits"},
      {"{\"zip\": \"1234a\"}", "zip: must be exactly 5 digits"},
      {"{\"zip\": \" 1234\"}", "zip: must be exactly 5 digits"},
      {"{\"zip\": \"12345-6789\"}", "zip: must be exactly 5 digits"},
      {"{\"zip\": 12345}", "zip: must be exactly 5 digits"},
  };
  BAD(misc_schema, bad);
}

static void test_datetime(void **state) {
  (void)state;
  expect_ok(&misc_schema, "{\"when\": \"2026-11-22T10:00:00Z\"}", false, "{\"when\": \"2026-11-22T10:00:00Z\"}");
  expect_ok(&misc_schema, "{\"when\": \"2026-11-22T10:00+02:00\"}", false, "{\"when\": \"2026-11-22T10:00+02:00\"}");
  expect_ok(&misc_schema, "{\"when\": \"2026-11-22\"}", false, "{\"when\": \"2026-11-22\"}");
  static const bad_case bad[] = {
      {"{\"when\": \"2026-02-30\"}", "when: must be a valid ISO 8601 date-time"},
      {"{\"when\": \"tomorrow\"}", "when: must be a valid ISO 8601 date-time"},
      {"{\"when\": \"2026-11-22T10:00Zjunk\"}", "when: must be a valid ISO 8601 date-time"},
      {"{\"when\": 1795305600000}", "when: must be a valid ISO 8601 date-time"},
  };
  BAD(misc_schema, bad);
}

static void test_bool(void **state) {
  (void)state;
  expect_ok(&misc_schema, "{\"flag\": true}", false, "{\"flag\": true}");
  expect_ok(&misc_schema, "{\"flag\": false}", false, "{\"flag\": false}");
  static const bad_case bad[] = {
      {"{\"flag\": \"true\"}", "flag: must be a boolean"},
      {"{\"flag\": 1}", "flag: must be a boolean"},
      {"{\"flag\": 0}", "flag: must be a boolean"},
      {"{\"flag\": {}}", "flag: must be a boolean"},
  };
  BAD(misc_schema, bad);
}

/* ---- F_INT, F_NUMBER ---- */

static const hs_field num_fields[] = {
    {"count", F_INT, 0, RANGE(1, 10)},      /* ranged integer */
    {"any", F_INT, 0, LEN(0, 0)},           /* any integer */
    {"price", F_NUMBER, 0, RANGE(0, 99.5)}, /* ranged number */
    {"ratio", F_NUMBER, 0, LEN(0, 0)},      /* any finite number */
    {"flag", F_BOOL, 0, LEN(0, 0)},         /* for query conversion */
    {NULL},
};
static const hs_schema num_schema = {num_fields};

static void test_int(void **state) {
  (void)state;
  expect_ok(&num_schema, "{\"count\": 1}", false, "{\"count\": 1}");
  expect_ok(&num_schema, "{\"count\": 10}", false, "{\"count\": 10}");
  expect_ok(&num_schema, "{\"count\": 4.0}", false, "{\"count\": 4}"); /* an integral real is an integer */
  expect_ok(&num_schema, "{\"any\": -9007199254740991}", false, "{\"any\": -9007199254740991}");
  expect_ok(&num_schema, "{\"any\": 0}", false, "{\"any\": 0}");
  char err[256];
  json_t *out = run(&num_schema, "{\"count\": 4.0}", false, err);
  assert_non_null(out);
  assert_true(json_is_integer(json_object_get(out, "count"))); /* normalised to an integer */
  json_decref(out);
  static const bad_case bad[] = {
      {"{\"count\": 0}", "count: must be between 1 and 10"},
      {"{\"count\": 11}", "count: must be between 1 and 10"},
      {"{\"count\": -3}", "count: must be between 1 and 10"},
      {"{\"count\": 1.5}", "count: must be an integer"},
      {"{\"count\": \"1\"}", "count: must be an integer"},
      {"{\"count\": true}", "count: must be an integer"},
      {"{\"count\": [1]}", "count: must be an integer"},
      {"{\"any\": 1e300}", "any: must be an integer"},
      {"{\"any\": 9007199254740993}", "any: must be an integer"},
  };
  BAD(num_schema, bad);
}

static void test_number(void **state) {
  (void)state;
  expect_ok(&num_schema, "{\"price\": 0}", false, "{\"price\": 0}");
  expect_ok(&num_schema, "{\"price\": 99.5}", false, "{\"price\": 99.5}");
  expect_ok(&num_schema, "{\"price\": 12.25}", false, "{\"price\": 12.25}");
  expect_ok(&num_schema, "{\"ratio\": -1e20}", false, "{\"ratio\": -1e20}");
  static const bad_case bad[] = {
      {"{\"price\": -0.01}", "price: must be between 0 and 99.5"},
      {"{\"price\": 99.51}", "price: must be between 0 and 99.5"},
      {"{\"price\": \"3\"}", "price: must be a number"},
      {"{\"price\": \"3.5\"}", "price: must be a number"},
      {"{\"price\": false}", "price: must be a number"},
      {"{\"ratio\": {}}", "ratio: must be a number"},
  };
  BAD(num_schema, bad);
}

/* ---- F_OBJECT ---- */

static const hs_field address_fields[] = {
    {"zip", F_ZIP, F_REQUIRED, LEN(0, 0)},
    {"city", F_STRING, 0, LEN(1, 20)},
    {NULL},
};
static const hs_schema address_schema = {address_fields};
static const hs_field object_fields[] = {
    {"meta", F_OBJECT, 0, LEN(0, 0)},
    {"address", F_OBJECT, 0, .object = &address_schema},
    {NULL},
};
static const hs_schema object_schema = {object_fields};

static void test_object(void **state) {
  (void)state;
  /* an unchecked object is copied whole */
  expect_ok(&object_schema, "{\"meta\": {\"a\": [1, {\"b\": null}], \"c\": \"d\"}}", false,
            "{\"meta\": {\"a\": [1, {\"b\": null}], \"c\": \"d\"}}");
  expect_ok(&object_schema, "{\"meta\": {}}", false, "{\"meta\": {}}");
  /* a checked object keeps only its declared fields */
  expect_ok(&object_schema, "{\"address\": {\"zip\": \"12345\", \"city\": \"Boston\", \"extra\": 1}}", false,
            "{\"address\": {\"zip\": \"12345\", \"city\": \"Boston\"}}");
  static const bad_case bad[] = {
      {"{\"meta\": []}", "meta: must be an object"},
      {"{\"meta\": \"{}\"}", "meta: must be an object"},
      {"{\"address\": 5}", "address: must be an object"},
      {"{\"address\": {}}", "address.zip: is required"},
      {"{\"address\": {\"zip\": \"1\"}}", "address.zip: must be exactly 5 digits"},
      {"{\"address\": {\"zip\": \"12345\", \"city\": \"\"}}", "address.city: must not be empty"},
  };
  BAD(object_schema, bad);
}

static void test_object_output_is_a_copy(void **state) {
  (void)state;
  json_t *in = parse("{\"meta\": {\"k\": \"v\"}}");
  char err[256];
  json_t *out = hs_validate(&object_schema, in, false, err);
  assert_non_null(out);
  json_object_set_new(json_object_get(in, "meta"), "k", json_string("changed"));
  assert_string_equal(json_string_value(json_object_get(json_object_get(out, "meta"), "k")), "v");
  json_decref(in);
  json_decref(out);
}

/* ---- F_ARRAY and F_ONE_OR_MANY ---- */

static const hs_field tag_item = {"tag", F_STRING, 0, LEN(1, 5)};
static const hs_field zip_item = {"zip", F_ZIP, 0, LEN(0, 0)};
static const hs_field count_item = {"n", F_INT, 0, RANGE(0, 100)};
static const hs_field array_fields[] = {
    {"tags", F_ARRAY, 0, LEN(1, 3), .item = &tag_item},
    {"raw", F_ARRAY, 0, LEN(0, 0)},
    {"zips", F_ARRAY, F_ONE_OR_MANY, LEN(1, 2), .item = &zip_item},
    {"nums", F_ARRAY, F_ONE_OR_MANY, .item = &count_item},
    {NULL},
};
static const hs_schema array_schema = {array_fields};

static void test_array(void **state) {
  (void)state;
  expect_ok(&array_schema, "{\"tags\": [\"a\"]}", false, "{\"tags\": [\"a\"]}");
  /* a plain array keeps duplicates and order */
  expect_ok(&array_schema, "{\"tags\": [\"b\", \"a\", \"b\"]}", false, "{\"tags\": [\"b\", \"a\", \"b\"]}");
  /* no item rule: items are kept as they are; no count rule: empty is fine */
  expect_ok(&array_schema, "{\"raw\": [1, \"x\", null, {\"y\": []}]}", false,
            "{\"raw\": [1, \"x\", null, {\"y\": []}]}");
  expect_ok(&array_schema, "{\"raw\": []}", false, "{\"raw\": []}");
  static const bad_case bad[] = {
      {"{\"tags\": []}", "tags: must contain at least 1 item"},
      {"{\"tags\": [\"a\", \"b\", \"c\", \"d\"]}", "tags: must contain at most 3 items"},
      {"{\"tags\": \"a\"}", "tags: must be an array"},
      {"{\"tags\": {\"0\": \"a\"}}", "tags: must be an array"},
      {"{\"tags\": [\"a\", \"\"]}", "tags[1]: must not be empty"},
      {"{\"tags\": [\"a\", \"b\", \"toolong\"]}", "tags[2]: must be at most 5 characters"},
      {"{\"tags\": [7]}", "tags[0]: must be a string"},
      {"{\"raw\": 1}", "raw: must be an array"},
  };
  BAD(array_schema, bad);
}

static void test_one_or_many(void **state) {
  (void)state;
  /* a single value becomes a one-item array */
  expect_ok(&array_schema, "{\"zips\": \"12345\"}", false, "{\"zips\": [\"12345\"]}");
  expect_ok(&array_schema, "{\"zips\": [\"12345\"]}", false, "{\"zips\": [\"12345\"]}");
  /* duplicates are removed, first occurrence kept in order */
  expect_ok(&array_schema, "{\"zips\": [\"54321\", \"12345\", \"54321\", \"12345\"]}", false,
            "{\"zips\": [\"54321\", \"12345\"]}");
  /* items are normalised before duplicates are found: 3 and 3.0 are the same integer */
  expect_ok(&array_schema, "{\"nums\": [3, 3.0, 4]}", false, "{\"nums\": [3, 4]}");
  expect_ok(&array_schema, "{\"nums\": 7}", false, "{\"nums\": [7]}");
  static const bad_case bad[] = {
      {"{\"zips\": \"1234\"}", "zips[0]: must be exactly 5 digits"},
      {"{\"zips\": [\"12345\", \"x\"]}", "zips[1]: must be exactly 5 digits"},
      {"{\"zips\": []}", "zips: must contain at least 1 item"},
      {"{\"zips\": [\"11111\", \"22222\", \"33333\"]}", "zips: must contain at most 2 items"},
      {"{\"nums\": 101}", "nums[0]: must be between 0 and 100"},
      {"{\"nums\": [1, 1.5]}", "nums[1]: must be an integer"},
  };
  BAD(array_schema, bad);
}

/* ---- presence: required, optional, null, F_NULLABLE ---- */

static const hs_field presence_fields[] = {
    {"must", F_STRING, F_REQUIRED, LEN(1, 10)},
    {"may", F_STRING, 0, LEN(1, 10)},
    {"clear", F_STRING, F_NULLABLE, LEN(1, 10)},
    {"mustOrNull", F_INT, F_REQUIRED | F_NULLABLE, LEN(0, 0)},
    {NULL},
};
static const hs_schema presence_schema = {presence_fields};

static void test_required_optional_null(void **state) {
  (void)state;
  /* optional fields may be absent; they are then absent from the output */
  expect_ok(&presence_schema, "{\"must\": \"x\", \"mustOrNull\": 1}", false, "{\"must\": \"x\", \"mustOrNull\": 1}");
  /* null counts as absent for an optional field: dropped, not an error */
  expect_ok(&presence_schema, "{\"must\": \"x\", \"may\": null, \"mustOrNull\": 1}", false,
            "{\"must\": \"x\", \"mustOrNull\": 1}");
  /* F_NULLABLE keeps null in the output, also when required */
  expect_ok(&presence_schema, "{\"must\": \"x\", \"clear\": null, \"mustOrNull\": null}", false,
            "{\"must\": \"x\", \"clear\": null, \"mustOrNull\": null}");
  expect_ok(&presence_schema, "{\"must\": \"x\", \"clear\": \"v\", \"mustOrNull\": 2}", false,
            "{\"must\": \"x\", \"clear\": \"v\", \"mustOrNull\": 2}");
  static const bad_case bad[] = {
      {"{\"mustOrNull\": 1}", "must: is required"},
      {"{\"must\": null, \"mustOrNull\": 1}", "must: is required"},
      {"{\"must\": \"x\"}", "mustOrNull: is required"},
      {"{\"must\": \"x\", \"may\": \"\", \"mustOrNull\": 1}", "may: must not be empty"},
      {"{\"must\": \"x\", \"clear\": \"\", \"mustOrNull\": 1}", "clear: must not be empty"},
      {"{\"must\": \"x\", \"mustOrNull\": \"1\"}", "mustOrNull: must be an integer"},
  };
  BAD(presence_schema, bad);
  /* no input at all */
  expect_err(&presence_schema, NULL, false, "must: is required");
  expect_ok(&misc_schema, NULL, false, "{}");
  expect_ok(&misc_schema, "{}", false, "{}");
}

static void test_undeclared_fields_dropped(void **state) {
  (void)state;
  expect_ok(&presence_schema,
            "{\"role\": \"admin\", \"must\": \"x\", \"id\": 5, \"mustOrNull\": 1, \"MUST\": \"y\", \"__proto__\": {}}",
            false, "{\"must\": \"x\", \"mustOrNull\": 1}");
  char err[256];
  json_t *out = run(&presence_schema, "{\"must\": \"x\", \"mustOrNull\": 1, \"extra\": true}", false, err);
  assert_non_null(out);
  assert_int_equal(json_object_size(out), 2);
  assert_null(json_object_get(out, "extra"));
  json_decref(out);
}

/* ---- table order ---- */

static const hs_field order_fields[] = {
    {"zeta", F_INT, F_REQUIRED, LEN(0, 0)},
    {"alpha", F_STRING, F_REQUIRED, LEN(1, 3)},
    {"mid", F_BOOL, 0, LEN(0, 0)},
    {NULL},
};
static const hs_schema order_schema = {order_fields};

static void test_first_failure_in_table_order(void **state) {
  (void)state;
  /* both fields are wrong; "zeta" comes first in the table whatever the input order */
  expect_err(&order_schema, "{\"alpha\": \"toolong\", \"zeta\": \"x\"}", false, "zeta: must be an integer");
  expect_err(&order_schema, "{\"zeta\": \"x\", \"alpha\": \"toolong\"}", false, "zeta: must be an integer");
  expect_err(&order_schema, "{\"mid\": 1, \"alpha\": \"toolong\", \"zeta\": 1}", false,
             "alpha: must be at most 3 characters");
  expect_err(&order_schema, "{\"mid\": 1, \"alpha\": \"ok\", \"zeta\": 1}", false, "mid: must be a boolean");
  expect_err(&order_schema, "{}", false, "zeta: is required");
  expect_err(&order_schema, "{\"zeta\": 1}", false, "alpha: is required");
}

/* ---- query strings ---- */

static void test_from_query_converts(void **state) {
  (void)state;
  expect_ok(&num_schema, "{\"count\": \"4\", \"any\": \"42\", \"price\": \"12.5\", \"flag\": \"true\"}", true,
            "{\"count\": 4, \"any\": 42, \"price\": 12.5, \"flag\": true}");
  expect_ok(&num_schema, "{\"any\": \"-7\", \"flag\": \"false\"}", true, "{\"any\": -7, \"flag\": false}");
  expect_ok(&num_schema, "{\"flag\": \"1\"}", true, "{\"flag\": true}");
  expect_ok(&num_schema, "{\"flag\": \"0\"}", true, "{\"flag\": false}");
  expect_ok(&num_schema, "{\"ratio\": \"1e3\"}", true, "{\"ratio\": 1000.0}");
  /* strings stay strings */
  expect_ok(&string_schema, "{\"name\": \"42\"}", true, "{\"name\": \"42\"}");
  /* items of one-or-many fields are converted too */
  expect_ok(&array_schema, "{\"nums\": \"5\"}", true, "{\"nums\": [5]}");
  expect_ok(&array_schema, "{\"nums\": [\"5\", \"6\", \"5\"]}", true, "{\"nums\": [5, 6]}");

  char err[256];
  json_t *out = run(&num_schema, "{\"any\": \"42\", \"flag\": \"true\"}", true, err);
  assert_non_null(out);
  assert_true(json_is_integer(json_object_get(out, "any")));
  assert_int_equal(json_integer_value(json_object_get(out, "any")), 42);
  assert_true(json_is_true(json_object_get(out, "flag")));
  json_decref(out);

  static const bad_case bad[] = {
      {"{\"any\": \"4x\"}", "any: must be an integer"},           {"{\"any\": \"\"}", "any: must be an integer"},
      {"{\"any\": \"1.5\"}", "any: must be an integer"},          {"{\"any\": \"0x10\"}", "any: must be an integer"},
      {"{\"count\": \"42\"}", "count: must be between 1 and 10"}, {"{\"price\": \"abc\"}", "price: must be a number"},
      {"{\"price\": \"1.5x\"}", "price: must be a number"},       {"{\"price\": \" 1\"}", "price: must be a number"},
      {"{\"ratio\": \"inf\"}", "ratio: must be a number"},        {"{\"ratio\": \"nan\"}", "ratio: must be a number"},
      {"{\"flag\": \"yes\"}", "flag: must be a boolean"},         {"{\"flag\": \"TRUE\"}", "flag: must be a boolean"},
      {"{\"nums\": \"5x\"}", "nums[0]: must be an integer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const hs_schema *s = strstr(bad[i].input, "nums") ? &array_schema : &num_schema;
    expect_err(s, bad[i].input, true, bad[i].error);
  }
  /* the same strings are refused when not from a query */
  expect_err(&num_schema, "{\"any\": \"42\"}", false, "any: must be an integer");
  expect_err(&num_schema, "{\"flag\": \"true\"}", false, "flag: must be a boolean");
}

static void test_from_query_int_whitespace(void **state) {
  (void)state;
  /* F_NUMBER refuses " 1" from a query (tested above); F_INT should refuse " 42" likewise. */
  expect_err(&num_schema, "{\"any\": \" 42\"}", true, "any: must be an integer");
}

/* ---- F_TIME and arrays of checked objects ---- */

static const hs_field time_fields[] = {{"at", F_TIME, F_REQUIRED}, {NULL}};
static const hs_schema time_schema = {time_fields};

static void test_time(void **state) {
  (void)state;
  expect_ok(&time_schema, "{\"at\": \"00:00\"}", false, "{\"at\": \"00:00\"}");
  expect_ok(&time_schema, "{\"at\": \"23:59\"}", false, "{\"at\": \"23:59\"}");
  expect_ok(&time_schema, "{\"at\": \"08:30\"}", false, "{\"at\": \"08:30\"}");
  static const char msg[] = "at: must be a time HH:MM (00:00 to 23:59)";
  static const bad_case bad[] = {
      {"{\"at\": \"24:00\"}", msg},    {"{\"at\": \"12:60\"}", msg}, {"{\"at\": \"8:30\"}", msg},
      {"{\"at\": \"08:3\"}", msg},     {"{\"at\": \"0830\"}", msg},  {"{\"at\": \"08-30\"}", msg},
      {"{\"at\": \"08:30:00\"}", msg}, {"{\"at\": \"ab:cd\"}", msg}, {"{\"at\": \" 8:30\"}", msg},
      {"{\"at\": 830}", msg},          {"{\"at\": true}", msg},      {"{}", "at: is required"},
  };
  BAD(time_schema, bad);
}

static const hs_field line_fields[] = {
    {"sku", F_STRING, F_REQUIRED, LEN(1, 8)},
    {"qty", F_INT, F_REQUIRED, RANGE(1, 9)},
    {NULL},
};
static const hs_schema line_schema = {line_fields};
static const hs_field line_item = {"lines", F_OBJECT, .object = &line_schema};
static const hs_field lines_fields[] = {{"lines", F_ARRAY, F_REQUIRED, LEN(1, 2), .item = &line_item}, {NULL}};
static const hs_schema lines_schema = {lines_fields};

static void test_array_of_objects_names_the_inner_field(void **state) {
  (void)state;
  expect_ok(&lines_schema, "{\"lines\": [{\"sku\": \"a\", \"qty\": 1, \"x\": 0}]}", false,
            "{\"lines\": [{\"sku\": \"a\", \"qty\": 1}]}");
  static const bad_case bad[] = {
      {"{\"lines\": [5]}", "lines[0]: must be an object"},
      {"{\"lines\": [{\"sku\": \"a\", \"qty\": 1}, {\"qty\": 1}]}", "lines[1].sku: is required"},
      {"{\"lines\": [{\"sku\": \"a\", \"qty\": 10}]}", "lines[0].qty: must be between 1 and 9"},
      {"{\"lines\": []}", "lines: must contain at least 1 item"},
  };
  BAD(lines_schema, bad);
}

/* ---- F_CSV and a field's own message (the paging fields, ?status=A,B) ---- */

static const char *const STATUSES[] = {"OPEN", "DONE", NULL};
static const hs_field csv_fields[] = {
    {"status", F_ENUM, F_CSV, .choices = STATUSES},
    {"limit", F_INT, 0, RANGE(1, 100), .message = "must be an integer from 1 to 100"},
    {"cursor", F_STRING, 0, LEN(1, 10), .message = "is not valid"},
    {0},
};
static const hs_schema csv_schema = {csv_fields};

static void test_csv_and_field_messages(void **state) {
  (void)state;
  expect_ok(&csv_schema, "{\"status\": \"OPEN\"}", true, "{\"status\": [\"OPEN\"]}");
  expect_ok(&csv_schema, "{\"status\": \"DONE,OPEN,DONE\"}", true, "{\"status\": [\"DONE\", \"OPEN\"]}");
  expect_ok(&csv_schema, "{\"limit\": \"100\", \"cursor\": \"abc\"}", true, "{\"limit\": 100, \"cursor\": \"abc\"}");
  static const bad_case bad[] = {
      {"{\"status\": \"\"}", "status: must be one of: OPEN, DONE"},
      {"{\"status\": \"OPEN,\"}", "status: must be one of: OPEN, DONE"},
      {"{\"status\": \",OPEN\"}", "status: must be one of: OPEN, DONE"},
      {"{\"status\": \"OPEN,,DONE\"}", "status: must be one of: OPEN, DONE"},
      {"{\"status\": \"open\"}", "status: must be one of: OPEN, DONE"},
      {"{\"limit\": \"0\"}", "limit: must be an integer from 1 to 100"},
      {"{\"limit\": \"101\"}", "limit: must be an integer from 1 to 100"},
      {"{\"limit\": \"1.5\"}", "limit: must be an integer from 1 to 100"},
      {"{\"limit\": \"x\"}", "limit: must be an integer from 1 to 100"},
      {"{\"cursor\": \"\"}", "cursor: is not valid"},
      {"{\"cursor\": \"01234567890\"}", "cursor: is not valid"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_err(&csv_schema, bad[i].input, true, bad[i].error);
  /* a repeated key (status=A&status=B: hs_query_parse's array) reads the same list, commas
   * included; the bracket form of a list is refused, not half-read; a repeated single value is
   * its first (the key's first occurrence wins), and `limit[]` is a parameter it does not take */
  expect_ok(&csv_schema, "{\"status\": [\"DONE\", \"OPEN,DONE\"]}", true, "{\"status\": [\"DONE\", \"OPEN\"]}");
  expect_err(&csv_schema, "{\"status\": [\"DONE\", \"shut\"]}", true, "status: must be one of: OPEN, DONE");
  expect_ok(&csv_schema, "{\"limit\": [\"1\", \"200\"]}", true, "{\"limit\": 1}");
  expect_err(&csv_schema, "{\"status[]\": \"DONE\"}", true,
             "status: a list is written status=A,B or status=A&status=B, not status[]=A");
  expect_ok(&csv_schema, "{\"limit[]\": \"1\"}", true, "{}");
  /* in a JSON body a comma is only a character: the list is an array there */
  expect_err(&csv_schema, "{\"status\": \"OPEN,DONE\"}", false, "status: must be one of: OPEN, DONE");
  expect_ok(&csv_schema, "{\"status\": [\"DONE\", \"DONE\"]}", false, "{\"status\": [\"DONE\"]}");
  expect_err(&csv_schema, "{\"status\": [\"DONE\", 7]}", false, "status: must be one of: OPEN, DONE");
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_csv_and_field_messages), cmocka_unit_test(test_string_bounds_in_characters),
          cmocka_unit_test(test_email_trims_and_lowercases), cmocka_unit_test(test_is_email),
          cmocka_unit_test(test_enum), cmocka_unit_test(test_zip), cmocka_unit_test(test_datetime),
          cmocka_unit_test(test_bool), cmocka_unit_test(test_int), cmocka_unit_test(test_number),
          cmocka_unit_test(test_object), cmocka_unit_test(test_object_output_is_a_copy), cmocka_unit_test(test_array),
          cmocka_unit_test(test_one_or_many), cmocka_unit_test(test_required_optional_null),
          cmocka_unit_test(test_undeclared_fields_dropped), cmocka_unit_test(test_first_failure_in_table_order),
          cmocka_unit_test(test_from_query_converts), cmocka_unit_test(test_from_query_int_whitespace),
          cmocka_unit_test(test_time), cmocka_unit_test(test_array_of_objects_names_the_inner_field))
