/* Unit tests for src/domain/audit/audit_chain.c: a record's hash depends on every field, on
 * its predecessor (and NULL is not "") and on the chain's key, the plain hash of records
 * written before the key is the same canonical form under the v1 tag, credentials are redacted
 * at any depth and in any letter case, and text is cleaned to valid UTF-8 without control
 * characters. */
#include "domain/audit/audit_chain.h"
#include "ext/digest.h"
#include "unit.h"
#include <stdlib.h>
#include <string.h>

static audit_record sample(void) {
  return (audit_record){.seq = 7,
                        .id = "cabcdefghijklmnopqrstuvwx",
                        .kind = "request",
                        .elevation_id = "celevationelevationelevat",
                        .actor_id = "cstaffstaffstaffstaffstaf",
                        .target_id = "cuseruseruseruseruseruser",
                        .target_role = "user",
                        .method = "POST",
                        .path = "/jobs",
                        .body = "{\"service\":\"lawncare\"}",
                        .created_at = 1795444226952,
                        .prev_hash = AUDIT_GENESIS};
}

#define KEY "a key of thirty-two bytes or more, for tests"

static void hash_of(const audit_record *r, char out[65]) { audit_record_hash(r, KEY, strlen(KEY), out); }

static void test_hash_is_stable_hex(void **state) {
  (void)state;
  audit_record r = sample();
  char a[65], b[65];
  hash_of(&r, a), hash_of(&r, b);
  assert_string_equal(a, b);
  assert_int_equal(strlen(a), 64);
  for (int i = 0; i < 64; i++) assert_true(strchr("0123456789abcdef", a[i]) != NULL);
}

static void test_hash_covers_every_field(void **state) {
  (void)state;
  audit_record base = sample();
  char h0[65], h[65];
  hash_of(&base, h0);
  audit_record variants[16];
  int n = 0;
  variants[n] = base, variants[n++].seq = 8;
  variants[n] = base, variants[n++].id = "cabcdefghijklmnopqrstuvwy";
  variants[n] = base, variants[n++].kind = "outcome";
  variants[n] = base, variants[n++].elevation_id = NULL;
  variants[n] = base, variants[n++].actor_id = "";
  variants[n] = base, variants[n++].actor_role = "customer_support";
  variants[n] = base, variants[n++].action = "x";
  variants[n] = base, variants[n++].target_id = "other";
  variants[n] = base, variants[n++].target_role = "provider";
  variants[n] = base, variants[n++].method = "GET";
  variants[n] = base, variants[n++].path = "/jobs/";
  variants[n] = base, variants[n++].status = 200;
  variants[n] = base, variants[n++].body = "{\"service\":\"handyman\"}";
  variants[n] = base, variants[n++].ref_seq = 6;
  variants[n] = base, variants[n++].created_at = 1795444226953;
  variants[n] = base, variants[n++].prev_hash = "1111111111111111111111111111111111111111111111111111111111111111";
  for (int i = 0; i < n; i++) {
    hash_of(&variants[i], h);
    assert_string_not_equal(h, h0);
  }
}

static void test_length_prefixes_keep_fields_apart(void **state) {
  (void)state;
  audit_record a = sample(), b = sample();
  a.method = "PO", a.path = "ST/jobs";
  b.method = "POS", b.path = "T/jobs";
  char ha[65], hb[65];
  hash_of(&a, ha), hash_of(&b, hb);
  assert_string_not_equal(ha, hb);
}

/* A small record's canonical form, written out by hand. */
#define SMALL_FORM(tag) tag "\n" AUDIT_GENESIS "\n1:1;3:cid;6:action;-;-;-;-;-;-;-;-;-;-;-;1:5;"

static void test_keyed_and_plain_hashes(void **state) {
  (void)state;
  audit_record r = {.seq = 1, .id = "cid", .kind = "action", .created_at = 5, .prev_hash = AUDIT_GENESIS};
  char keyed[65], other_key[65], plain[65], expected[65];
  hash_of(&r, keyed);
  audit_record_hash(&r, KEY "!", strlen(KEY) + 1, other_key);
  audit_record_hash_v1(&r, plain);
  assert_string_not_equal(keyed, other_key); /* the key decides */
  hmac_sha256_hex(KEY, strlen(KEY), SMALL_FORM("marketplace-audit-v2"), strlen(SMALL_FORM("marketplace-audit-v2")),
                  expected);
  assert_string_equal(keyed, expected);
  sha256_hex(SMALL_FORM("marketplace-audit-v1"), strlen(SMALL_FORM("marketplace-audit-v1")), expected);
  assert_string_equal(plain, expected); /* chains written before the key still verify */
}

static void test_redaction_at_any_depth(void **state) {
  (void)state;
  json_t *in = json_loads("{\"password\":\"p\",\"currentPassword\":\"c\",\"name\":\"n\","
                          "\"nested\":{\"NewPassword\":\"x\",\"list\":"
                          "[{\"token\":{\"deep\":1}},\"token\",{\"paymentmethodid\":5}]},\"tokens\":\"kept\"}",
                          0, NULL);
  json_t *out = audit_redact(in);
  char *text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"currentPassword\":\"[REDACTED]\",\"name\":\"n\",\"nested\":{\"NewPassword\":"
                            "\"[REDACTED]\",\"list\":[{\"token\":"
                            "\"[REDACTED]\"},\"token\",{\"paymentmethodid\":\"[REDACTED]\"}]},\"password\":"
                            "\"[REDACTED]\",\"tokens\":\"kept\"}");
  /* the input is untouched */
  assert_string_equal(json_string_value(json_object_get(in, "password")), "p");
  free(text);
  json_decref(in), json_decref(out);
  assert_null(audit_redact(NULL));
  json_t *scalar = json_integer(3), *copy = audit_redact(scalar);
  assert_true(json_equal(scalar, copy));
  json_decref(scalar), json_decref(copy);
}

static void test_clean_text(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  assert_null(audit_clean_text(&a, NULL));
  assert_string_equal(audit_clean_text(&a, "/jobs/\xc3\xa9t\xc3\xa9"), "/jobs/\xc3\xa9t\xc3\xa9");
  assert_string_equal(audit_clean_text(&a, "a\xff"
                                           "b\xc3"),
                      "a?b?");
  assert_string_equal(audit_clean_text(&a, "\xe2\x82"), "??");      /* truncated sequence */
  assert_string_equal(audit_clean_text(&a, "\xc0\xaf"), "??");      /* overlong */
  assert_string_equal(audit_clean_text(&a, "\xed\xa0\x80"), "???"); /* surrogate */
  assert_string_equal(audit_clean_text(&a, "\xf0\x9f\x98\x80 ok"), "\xf0\x9f\x98\x80 ok");
  assert_string_equal(audit_clean_text(&a, "line\r\nnext\tab\x7f"), "line??next\tab?");
  arena_fini(&a);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_hash_is_stable_hex), cmocka_unit_test(test_hash_covers_every_field),
          cmocka_unit_test(test_length_prefixes_keep_fields_apart), cmocka_unit_test(test_keyed_and_plain_hashes),
          cmocka_unit_test(test_redaction_at_any_depth), cmocka_unit_test(test_clean_text))
