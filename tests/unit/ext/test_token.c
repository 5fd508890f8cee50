/* Unit tests for src/ext/token.c: issue/verify round trip, and refusal of tampered, foreign,
 * "none", HS512, truncated and expired tokens. Forged tokens are built by hand with base64url
 * and OpenSSL's HMAC; a hand-built HS256 token serves as the control that the forging is right. */
#include "core/clock.h"
#include "core/config.h"
#include "ext/token.h"
#include "unit.h"
#include <jansson.h>
#include <jwt.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char secret[] = "unit-test-secret-0123456789abcdef0123456789";
static char other_secret[] = "a-different-secret-0123456789abcdef01234567";

static void use_secret(char *s) {
  CFG.jwt_secret = s;
  CFG.jwt_secret_len = strlen(s);
}

static int group_setup(void **state) {
  (void)state;
  use_secret(secret);
  return 0;
}

/* ---- base64url and token assembly ---- */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Unpadded base64url of n bytes into a new heap string. */
static char *b64url_encode(const unsigned char *in, size_t n) {
  char *out = malloc(n * 4 / 3 + 4), *p = out;
  assert_non_null(out);
  size_t i = 0;
  for (; i + 2 < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    *p++ = b64url[v >> 18 & 63], *p++ = b64url[v >> 12 & 63], *p++ = b64url[v >> 6 & 63], *p++ = b64url[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    *p++ = b64url[v >> 18 & 63], *p++ = b64url[v >> 12 & 63];
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    *p++ = b64url[v >> 18 & 63], *p++ = b64url[v >> 12 & 63], *p++ = b64url[v >> 6 & 63];
  }
  *p = 0;
  return out;
}

/* Decodes n characters of unpadded base64url into a new NUL-terminated heap string. */
static char *b64url_decode(const char *in, size_t n) {
  unsigned char *out = calloc(1, n * 3 / 4 + 4), *p = out;
  assert_non_null(out);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    const char *c = strchr(b64url, in[i]);
    if (!c || !in[i]) fail_msg("not base64url: %.*s", (int)n, in);
    acc = acc << 6 | (uint32_t)(c - b64url);
    bits += 6;
    if (bits >= 8) bits -= 8, *p++ = (unsigned char)(acc >> bits & 0xFF);
  }
  return (char *)out;
}

/* "header.payload.signature", the signature an HMAC (md, key) over "header.payload", or empty
 * ("h.p.") when md is NULL. Returns a new heap string. */
static char *forge(const char *header_json, const char *payload_json, const EVP_MD *md, const char *key) {
  char *h = b64url_encode((const unsigned char *)header_json, strlen(header_json));
  char *p = b64url_encode((const unsigned char *)payload_json, strlen(payload_json));
  size_t cap = strlen(h) + strlen(p) + 200;
  char *tok = malloc(cap);
  assert_non_null(tok);
  snprintf(tok, cap, "%s.%s", h, p);
  char *sig = NULL;
  if (md) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    assert_non_null(HMAC(md, key, (int)strlen(key), (const unsigned char *)tok, strlen(tok), mac, &maclen));
    sig = b64url_encode(mac, maclen);
  }
  strcat(tok, ".");
  if (sig) strcat(tok, sig);
  free(h), free(p), free(sig);
  return tok;
}

static char *claims_json(const char *id, const char *role, int64_t exp_offset_s) {
  int64_t now = clock_now_ms() / 1000;
  char *out = malloc(256);
  assert_non_null(out);
  snprintf(out, 256, "{\"id\":\"%s\",\"role\":\"%s\",\"iat\":%lld,\"exp\":%lld}", id, role, (long long)now,
           (long long)(now + exp_offset_s));
  return out;
}

/* The decoded payload of a token (new heap string). */
static char *payload_of(const char *token) {
  const char *dot1 = strchr(token, '.');
  assert_non_null(dot1);
  const char *dot2 = strchr(dot1 + 1, '.');
  assert_non_null(dot2);
  return b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1));
}

static bool verifies(const char *token) {
  token_claims c;
  return token_verify(token, &c);
}

/* A token for the account id with role (no staff, no elevation, generation 0), lasting ttl_s. */
static char *issued(const char *id, const char *role, int64_t ttl_s) {
  char *t = token_issue(id, role, false, NULL, 0, ttl_s);
  assert_non_null(t);
  return t;
}

/* The token forge() makes of header_json and payload_json (md and key as there) is refused. */
static void assert_forgery_refused(const char *header_json, const char *payload_json, const EVP_MD *md,
                                   const char *key) {
  char *t = forge(header_json, payload_json, md, key);
  assert_false(verifies(t));
  free(t);
}

/* ---- tests ---- */

static void test_round_trip(void **state) {
  (void)state;
  char *t = token_issue("cuser0000000000000000001", "user", false, NULL, 0, TOKEN_TTL_ACCOUNT);
  assert_non_null(t);
  assert_int_equal(strspn(t, b64url), strcspn(t, ".")); /* header is base64url */
  token_claims c;
  memset(&c, 0x7F, sizeof c);
  assert_true(token_verify(t, &c));
  assert_string_equal(c.id, "cuser0000000000000000001");
  assert_string_equal(c.role, "user");
  assert_false(c.is_staff);
  assert_string_equal(c.elevation_id, "");
  assert_int_equal(c.exp - c.iat, TOKEN_TTL_ACCOUNT);
  assert_int_equal(c.gen, 0); /* generation 0: no gen claim */
  char *p = payload_of(t);
  assert_null(strstr(p, "\"gen\""));
  free(p);
  int64_t now = clock_now_ms() / 1000;
  assert_in_range(c.iat, now - 5, now);
  free(t);
}

static void test_round_trip_staff_elevation(void **state) {
  (void)state;
  char *t = token_issue("cstaff000000000000000001", "customer_support", true, "celev0000000000000000001", 7,
                        TOKEN_TTL_STAFF_IMPERSONATION);
  assert_non_null(t);
  token_claims c;
  assert_true(token_verify(t, &c));
  assert_string_equal(c.id, "cstaff000000000000000001");
  assert_string_equal(c.role, "customer_support");
  assert_true(c.is_staff);
  assert_string_equal(c.elevation_id, "celev0000000000000000001");
  assert_int_equal(c.exp - c.iat, TOKEN_TTL_STAFF_IMPERSONATION);
  assert_int_equal(c.gen, 7);
  /* the claims are in the payload under their documented names */
  char *p = payload_of(t);
  json_t *j = json_loads(p, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "type")), "staff");
  assert_string_equal(json_string_value(json_object_get(j, "elevationId")), "celev0000000000000000001");
  assert_int_equal(json_integer_value(json_object_get(j, "gen")), 7);
  assert_int_equal(json_integer_value(json_object_get(j, "exp")) - json_integer_value(json_object_get(j, "iat")),
                   TOKEN_TTL_STAFF_IMPERSONATION);
  json_decref(j);
  free(p);
  free(t);

  /* staff without elevation; an empty elevation id is the same as none */
  t = token_issue("cadmin", "admin", false, "", 0, TOKEN_TTL_ADMIN);
  assert_non_null(t);
  assert_true(token_verify(t, &c));
  assert_string_equal(c.role, "admin");
  assert_false(c.is_staff);
  assert_string_equal(c.elevation_id, "");
  assert_int_equal(c.exp - c.iat, TOKEN_TTL_ADMIN);
  free(t);
}

/* Every token has an id of its own (jti, a cuid); a token issued before tokens had one is named
 * by its signature, as unique to it, so logout can end either. */
static void test_token_ids(void **state) {
  (void)state;
  char *a = token_issue("cuser0000000000000000001", "user", false, NULL, 0, 60);
  char *b = token_issue("cuser0000000000000000001", "user", false, NULL, 0, 60);
  token_claims ca, cb;
  assert_true(token_verify(a, &ca) && token_verify(b, &cb));
  assert_int_equal(strlen(ca.token_id), 25);
  assert_int_equal(ca.token_id[0], 'c');
  assert_string_not_equal(ca.token_id, cb.token_id);
  char *p = payload_of(a);
  json_t *j = json_loads(p, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(j, "jti")), ca.token_id);
  json_decref(j);
  free(p), free(a), free(b);

  char *claims = claims_json("cold", "user", 600);
  char *old = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", claims, EVP_sha256(), secret);
  token_claims c;
  assert_true(token_verify(old, &c));
  assert_int_equal(strncmp(c.token_id, "sig-", 4), 0);
  assert_int_equal(strlen(c.token_id), 4 + 32);
  token_claims again;
  assert_true(token_verify(old, &again));
  assert_string_equal(c.token_id, again.token_id); /* the same token, the same id */
  /* a jti that is not a string is no token of this service */
  char forged[256];
  snprintf(forged, sizeof forged, "{\"id\":\"x\",\"role\":\"user\",\"jti\":5,\"exp\":%lld}",
           (long long)(clock_now_ms() / 1000 + 600));
  char *bad = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", forged, EVP_sha256(), secret);
  assert_true(token_verify(bad, &c)); /* an optional claim of another type is ignored, as elevationId */
  assert_int_equal(strncmp(c.token_id, "sig-", 4), 0);
  free(claims), free(old), free(bad);
}

static void test_header_is_hs256(void **state) {
  (void)state;
  char *t = issued("u1", "provider", 60);
  char *h = b64url_decode(t, strcspn(t, "."));
  json_t *j = json_loads(h, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "alg")), "HS256");
  json_decref(j);
  free(h);
  free(t);
}

static void test_handmade_hs256_control(void **state) {
  (void)state;
  /* proves forge() builds what libjwt accepts, so the refusals below are about the attack */
  char *claims = claims_json("cforged", "user", 600);
  char *t = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", claims, EVP_sha256(), secret);
  token_claims c;
  assert_true(token_verify(t, &c));
  assert_string_equal(c.id, "cforged");
  assert_string_equal(c.role, "user");
  free(t);
  free(claims);
}

static void test_modified_payload_refused(void **state) {
  (void)state;
  char *t = issued("cuser1", "user", 3600);
  assert_true(verifies(t));
  /* replace the payload with one claiming admin, keeping header and signature */
  char *p = payload_of(t);
  char *role = strstr(p, "\"user\"");
  assert_non_null(role);
  char forged_payload[512];
  snprintf(forged_payload, sizeof forged_payload, "%.*s\"admin\"%s", (int)(role - p), p, role + 6);
  char *enc = b64url_encode((const unsigned char *)forged_payload, strlen(forged_payload));
  const char *dot1 = strchr(t, '.'), *dot2 = strchr(dot1 + 1, '.');
  char tampered[2048];
  snprintf(tampered, sizeof tampered, "%.*s.%s%s", (int)(dot1 - t), t, enc, dot2);
  char *check = b64url_decode(enc, strlen(enc));
  assert_non_null(strstr(check, "\"role\":\"admin\""));
  free(check);
  assert_false(verifies(tampered));
  /* flipping one character of the payload is refused too */
  char flipped[2048];
  strcpy(flipped, t);
  size_t k = (size_t)(dot1 - t) + 3;
  flipped[k] = flipped[k] == 'A' ? 'B' : 'A';
  assert_false(verifies(flipped));
  free(enc);
  free(p);
  free(t);
}

static void test_different_secret_refused(void **state) {
  (void)state;
  char *t = issued("cuser2", "user", 3600);
  use_secret(other_secret);
  assert_false(verifies(t));
  char *t2 = issued("cuser2", "user", 3600);
  assert_true(verifies(t2));
  use_secret(secret);
  assert_true(verifies(t));
  assert_false(verifies(t2));
  free(t);
  free(t2);

  /* and a hand-signed HS256 token with a foreign key */
  char *claims = claims_json("cforged", "admin", 600);
  assert_forgery_refused("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", claims, EVP_sha256(), other_secret);
  free(claims);
}

static void test_alg_none_refused(void **state) {
  (void)state;
  char *claims = claims_json("cforged", "admin", 600);
  assert_forgery_refused("{\"alg\":\"none\",\"typ\":\"JWT\"}", claims, NULL, NULL);
  assert_forgery_refused("{\"alg\":\"NONE\",\"typ\":\"JWT\"}", claims, NULL, NULL);
  char *t = forge("{\"alg\":\"none\"}", claims, NULL, NULL);
  t[strlen(t) - 1] = 0; /* "h.p" without the final dot */
  assert_false(verifies(t));
  free(t);
  /* "none" with a valid HS256 signature attached */
  assert_forgery_refused("{\"alg\":\"none\",\"typ\":\"JWT\"}", claims, EVP_sha256(), secret);
  /* HS256 header but no signature */
  assert_forgery_refused("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", claims, NULL, NULL);
  free(claims);
}

static void test_hs512_same_secret_refused(void **state) {
  (void)state;
  char *claims = claims_json("cforged", "admin", 600);
  char *t = forge("{\"alg\":\"HS512\",\"typ\":\"JWT\"}", claims, EVP_sha512(), secret);
  /* control: libjwt itself accepts this signature, so only the algorithm policy stands */
  jwt_t *jwt = NULL;
  assert_int_equal(jwt_decode(&jwt, t, (const unsigned char *)secret, (int)strlen(secret)), 0);
  assert_int_equal(jwt_get_alg(jwt), JWT_ALG_HS512);
  jwt_free(jwt);
  assert_false(verifies(t));
  free(t);
  assert_forgery_refused("{\"alg\":\"HS384\",\"typ\":\"JWT\"}", claims, EVP_sha384(), secret);
  free(claims);
}

static void test_truncated_and_garbage_refused(void **state) {
  (void)state;
  char *t = issued("cuser3", "user", 3600);
  size_t n = strlen(t);
  char buf[2048];
  assert_true(n < sizeof buf);
  /* every strict prefix is refused */
  for (size_t len = 0; len < n; len++) {
    memcpy(buf, t, len);
    buf[len] = 0;
    if (verifies(buf)) fail_msg("prefix of %zu/%zu characters verified: %s", len, n, buf);
  }
  /* extra characters after the signature */
  snprintf(buf, sizeof buf, "%sA", t);
  assert_false(verifies(buf));
  snprintf(buf, sizeof buf, "%s.x", t);
  assert_false(verifies(buf));
  assert_true(verifies(t));
  free(t);
  assert_false(verifies(NULL));
  assert_false(verifies(""));
  assert_false(verifies("..."));
  assert_false(verifies("not-a-token"));
  /* oversized input is refused before parsing */
  char *big = malloc(5000);
  memset(big, 'A', 4999);
  big[4999] = 0;
  assert_false(verifies(big));
  free(big);
}

static void test_missing_claims_refused(void **state) {
  (void)state;
  int64_t now = clock_now_ms() / 1000;
  char claims[256];
  const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
  snprintf(claims, sizeof claims, "{\"role\":\"user\",\"iat\":%lld,\"exp\":%lld}", (long long)now,
           (long long)now + 600);
  assert_forgery_refused(hdr, claims, EVP_sha256(), secret); /* no id */
  snprintf(claims, sizeof claims, "{\"id\":\"u\",\"iat\":%lld,\"exp\":%lld}", (long long)now, (long long)now + 600);
  assert_forgery_refused(hdr, claims, EVP_sha256(), secret); /* no role */
  snprintf(claims, sizeof claims, "{\"id\":\"u\",\"role\":\"user\",\"iat\":%lld}", (long long)now);
  assert_forgery_refused(hdr, claims, EVP_sha256(), secret); /* no exp */
  snprintf(claims, sizeof claims, "{\"id\":\"u\",\"role\":\"user\",\"iat\":%lld,\"exp\":%lld}", (long long)now - 20,
           (long long)now - 10);
  assert_forgery_refused(hdr, claims, EVP_sha256(), secret); /* exp in the past */
}

/* Last: moves the process clock. */
static void test_expired_refused(void **state) {
  (void)state;
  char *t = issued("cuser4", "user", 60);
  token_claims c;
  assert_true(token_verify(t, &c));
  assert_int_equal(c.exp - c.iat, 60);
  clock_advance_ms(30000);
  assert_true(verifies(t)); /* half-way: still valid */
  clock_advance_ms(31000);
  assert_false(verifies(t));
  /* a token issued now, on the moved clock, is valid */
  char *t2 = issued("cuser4", "user", 60);
  assert_true(verifies(t2));
  free(t2);
  free(t);
}

/* Claims in every form JSON allows: the fast reader of plain claims and jansson must agree.
 * Each case is signed correctly, so only the claims decide. */
static void test_claim_forms(void **state) {
  (void)state;
  long long now = (long long)(clock_now_ms() / 1000), exp = now + 3600;
  static const struct {
    const char *claims; /* %lld: exp */
    bool valid;
    const char *id, *role, *elevation;
    bool staff;
  } cases[] = {
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":%lld}", true, "c1", "user", "", false},
      {" { \"id\" : \"c1\" ,\n\t\"role\":\"user\", \"exp\" : %lld } ", true, "c1", "user", "", false},
      {"{\"id\":\"c\\u0031\",\"role\":\"user\",\"exp\":%lld}", true, "c1", "user", "", false}, /* escape */
      {"{\"i\\u0064\":\"c1\",\"role\":\"user\",\"exp\":%lld}", true, "c1", "user", "", false}, /* key escape */
      {"{\"id\":\"caf\u00e9\",\"role\":\"user\",\"exp\":%lld}", true, "caf\u00e9", "user", "", false},
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":%lld,\"x\":{\"y\":[1,2.5,null,true]}}", true, "c1", "user", "", false},
      {"{\"id\":\"c0\",\"id\":\"c1\",\"role\":\"user\",\"exp\":%lld}", true, "c1", "user", "", false}, /* last */
      {"{\"id\":\"c1\",\"role\":\"support\",\"type\":\"staff\",\"elevationId\":\"e1\",\"exp\":%lld}", true, "c1",
       "support", "e1", true},
      {"{\"id\":\"c1\",\"role\":\"user\",\"type\":\"staffs\",\"exp\":%lld}", true, "c1", "user", "", false},
      {"{\"id\":\"c1\",\"role\":\"user\",\"elevationId\":7,\"exp\":%lld}", true, "c1", "user", "", false},
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":%lld.0}", false},   /* a real exp */
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":\"%lld\"}", false}, /* a string exp */
      {"{\"id\":1,\"role\":\"user\",\"exp\":%lld}", false},          /* a number id */
      {"{\"id\":\"\",\"role\":\"user\",\"exp\":%lld}", false},       /* an empty id */
      {"{\"id\":\"c1\",\"role\":\"user\",\"elevationId\":\"\",\"exp\":%lld}", false},
      {"{\"id\":\"c\\u0000\",\"role\":\"user\",\"exp\":%lld}", false},                  /* an embedded NUL */
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":%lld} x", false},                      /* trailing text */
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":0%lld}", false},                       /* a leading zero */
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":%lld,}", false},                       /* a trailing comma */
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":-%lld}", false},                       /* a negative exp */
      {"{\"id\":\"c1\",\"role\":\"user\",\"exp\":99999999999999999999999%lld}", false}, /* too big */
      {"[\"id\",\"c1\",%lld]", false},
      {"{\"id\":\"c\xff\",\"role\":\"user\",\"exp\":%lld}", false}, /* invalid UTF-8 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char claims[512], num[24];
    const char *at = strstr(cases[i].claims, "%lld");
    snprintf(num, sizeof num, "%lld", exp);
    snprintf(claims, sizeof claims, "%.*s%s%s", (int)(at - cases[i].claims), cases[i].claims, num, at + 4);
    char *t = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", claims, EVP_sha256(), secret);
    token_claims c;
    bool got = token_verify(t, &c);
    if (got != cases[i].valid) fail_msg("case %zu (%s): verified %d", i, claims, got);
    if (got) {
      assert_string_equal(c.id, cases[i].id);
      assert_string_equal(c.role, cases[i].role);
      assert_string_equal(c.elevation_id, cases[i].elevation);
      assert_int_equal(c.is_staff, cases[i].staff);
      assert_int_equal(c.exp, exp);
    }
    free(t);
  }
}

/* A header in another form than the usual encoding is parsed: only alg HS256 counts. */
static void test_header_forms(void **state) {
  (void)state;
  char *claims = claims_json("c1", "user", 3600);
  const char *headers[] = {"{\"typ\":\"JWT\",\"alg\":\"HS256\"}", "{ \"alg\" : \"HS256\" }",
                           "{\"alg\":\"HS256\",\"kid\":\"k1\"}"};
  for (size_t i = 0; i < 3; i++) {
    char *t = forge(headers[i], claims, EVP_sha256(), secret);
    assert_true(verifies(t));
    free(t);
  }
  const char *bad[] = {"{\"alg\":\"hs256\"}", "{\"typ\":\"JWT\"}", "{\"alg\":256}", "not json", "{\"alg\":\"HS256\""};
  for (size_t i = 0; i < 5; i++) {
    char *t = forge(bad[i], claims, EVP_sha256(), secret);
    if (verifies(t)) fail_msg("header %s verified", bad[i]);
    free(t);
  }
  free(claims);
}

UNIT_MAIN(group_setup, NULL, cmocka_unit_test(test_claim_forms), cmocka_unit_test(test_header_forms),
          cmocka_unit_test(test_round_trip), cmocka_unit_test(test_round_trip_staff_elevation),
          cmocka_unit_test(test_token_ids), cmocka_unit_test(test_header_is_hs256),
          cmocka_unit_test(test_handmade_hs256_control), cmocka_unit_test(test_modified_payload_refused),
          cmocka_unit_test(test_different_secret_refused), cmocka_unit_test(test_alg_none_refused),
          cmocka_unit_test(test_hs512_same_secret_refused), cmocka_unit_test(test_truncated_and_garbage_refused),
          cmocka_unit_test(test_missing_claims_refused), cmocka_unit_test(test_expired_refused))
