/* Tokens are issued with libjwt. They are verified here, on every authenticated request: the
 * signature first (HMAC-SHA256 over "header.payload" with a per-thread OpenSSL context keyed
 * once, compared in constant time), then the header's alg (exactly "HS256"), then the claims
 * and exp. libjwt's decoder, which re-derives the HMAC key and parses both JSON parts before
 * checking anything, cost about 40% of a GET /users/me. Nothing of a token is parsed before its
 * signature checks out. */
#include "ext/token.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/util.h"
#include <jansson.h>
#include <jwt.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *issue(const char *id, const char *role, bool is_staff, const char *elevation_id, int64_t gen,
                   int64_t ttl_seconds, const char *session_id, const char *jti) {
  jwt_t *jwt = NULL;
  char *out = NULL;
  if (jwt_new(&jwt)) return NULL;
  int64_t now = clock_now_ms() / 1000;
  if (jwt_add_grant(jwt, "id", id) || jwt_add_grant(jwt, "role", role) || jwt_add_grant(jwt, "jti", jti) ||
      (is_staff && jwt_add_grant(jwt, "type", "staff")) ||
      (elevation_id && *elevation_id && jwt_add_grant(jwt, "elevationId", elevation_id)) ||
      (session_id && *session_id && jwt_add_grant(jwt, "sid", session_id)) ||
      (gen && jwt_add_grant_int(jwt, "gen", (long)gen)) || jwt_add_grant_int(jwt, "iat", (long)now) ||
      jwt_add_grant_int(jwt, "exp", (long)(now + ttl_seconds)) ||
      jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)CFG.jwt_secret, (int)CFG.jwt_secret_len))
    goto out;
  out = jwt_encode_str(jwt);
out:
  jwt_free(jwt);
  return out;
}

char *token_issue(const char *id, const char *role, bool is_staff, const char *elevation_id, int64_t gen,
                  int64_t ttl_seconds) {
  char jti[ID_LEN + 1];
  id_new(jti);
  return issue(id, role, is_staff, elevation_id, gen, ttl_seconds, NULL, jti);
}

char *token_issue_session(const char *id, const char *role, int64_t gen, int64_t ttl_seconds, const char *session_id,
                          const char *jti) {
  return issue(id, role, false, NULL, gen, ttl_seconds, session_id, jti);
}

/* ---- verification ---- */

/* A thread's HMAC-SHA256 context, keyed with the secret it was made for. */
typedef struct mac_state {
  EVP_MAC_CTX *ctx;
  char *key;
  size_t keylen;
} mac_state;

static pthread_key_t mac_key;
static pthread_once_t mac_once = PTHREAD_ONCE_INIT;
static EVP_MAC *hmac_alg;

static void mac_state_free(void *p) {
  mac_state *m = p;
  EVP_MAC_CTX_free(m->ctx);
  free(m->key);
  free(m);
}

static void mac_init(void) {
  pthread_key_create(&mac_key, mac_state_free);
  hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* HMAC-SHA256 of data under CFG.jwt_secret into out (32 bytes). */
static bool hmac_sha256(const char *data, size_t len, unsigned char out[32]) {
  pthread_once(&mac_once, mac_init);
  if (!hmac_alg) return false;
  mac_state *m = pthread_getspecific(mac_key);
  bool same_key = m && m->keylen == CFG.jwt_secret_len && !memcmp(m->key, CFG.jwt_secret, m->keylen);
  if (!same_key) { /* first use on this thread, or the secret changed (unit tests) */
    if (m) mac_state_free(m);
    m = calloc(1, sizeof *m);
    if (!m || !(m->ctx = EVP_MAC_CTX_new(hmac_alg)) || !(m->key = malloc(CFG.jwt_secret_len + 1))) {
      if (m) mac_state_free(m);
      pthread_setspecific(mac_key, NULL);
      return false;
    }
    memcpy(m->key, CFG.jwt_secret, CFG.jwt_secret_len);
    m->keylen = CFG.jwt_secret_len;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0), OSSL_PARAM_END};
    if (!EVP_MAC_init(m->ctx, (const unsigned char *)m->key, m->keylen, params)) {
      mac_state_free(m);
      pthread_setspecific(mac_key, NULL);
      return false;
    }
    pthread_setspecific(mac_key, m);
  } else if (!EVP_MAC_init(m->ctx, NULL, 0, NULL)) { /* the same key: its padded state is reused */
    return false;
  }
  size_t outlen = 0;
  return EVP_MAC_update(m->ctx, (const unsigned char *)data, len) && EVP_MAC_final(m->ctx, out, &outlen, 32) &&
         outlen == 32;
}

/* The claims verification reads, from either parser. */
typedef enum { C_ABSENT, C_STRING, C_INT, C_OTHER } claim_kind;
typedef struct claim {
  claim_kind kind;
  const char *s;
  size_t n;
  int64_t i;
} claim;
typedef struct raw_claims {
  claim id, role, elevation_id, type, iat, exp, gen, jti, sid;
} raw_claims;

static claim *claim_slot(raw_claims *c, const char *key, size_t n) {
  static const struct {
    const char *name;
    size_t off;
  } names[] = {{"id", offsetof(raw_claims, id)},
               {"role", offsetof(raw_claims, role)},
               {"elevationId", offsetof(raw_claims, elevation_id)},
               {"type", offsetof(raw_claims, type)},
               {"iat", offsetof(raw_claims, iat)},
               {"exp", offsetof(raw_claims, exp)},
               {"gen", offsetof(raw_claims, gen)},
               {"jti", offsetof(raw_claims, jti)},
               {"sid", offsetof(raw_claims, sid)}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i].name) == n && !memcmp(names[i].name, key, n)) return (claim *)((char *)c + names[i].off);
  return NULL;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* A string without escapes, control or non-ASCII characters at p ('"'); NULL otherwise. */
static const char *plain_string(const char *p, const char *end, const char **s, size_t *n) {
  if (p >= end || *p != '"') return NULL;
  const char *q = ++p;
  while (q < end && *q != '"') {
    unsigned char c = (unsigned char)*q;
    if (c < 0x20 || c >= 0x80 || c == '\\') return NULL;
    q++;
  }
  if (q >= end) return NULL;
  *s = p, *n = (size_t)(q - p);
  return q + 1;
}

/* The claims of the tokens this service issues are a flat object of plain strings and small
 * integers: read those without a JSON library. Anything else (escapes, other values, non-ASCII
 * text) returns false, and jansson parses the part instead, with the same outcome. */
static bool scan_claims(const char *p, size_t len, raw_claims *c) {
  const char *end = p + len;
  p = skip_ws(p, end);
  if (p >= end || *p++ != '{') return false;
  p = skip_ws(p, end);
  if (p < end && *p == '}') return skip_ws(p + 1, end) == end;
  for (;;) {
    const char *key;
    size_t keylen;
    if (!(p = plain_string(p, end, &key, &keylen))) return false;
    p = skip_ws(p, end);
    if (p >= end || *p++ != ':') return false;
    p = skip_ws(p, end);
    claim v = {C_STRING};
    if (p < end && *p == '"') {
      if (!(p = plain_string(p, end, &v.s, &v.n))) return false;
    } else {
      const char *digits = p + (p < end && *p == '-');
      const char *q = digits;
      while (q < end && *q >= '0' && *q <= '9') q++;
      if (q == digits || q - digits > 18 || (q - digits > 1 && *digits == '0')) return false;
      if (q < end && (*q == '.' || *q == 'e' || *q == 'E')) return false;
      v.kind = C_INT;
      v.i = strtoll(p, NULL, 10);
      p = q;
    }
    claim *slot = claim_slot(c, key, keylen);
    if (slot) *slot = v; /* a repeated key: the last one counts, as in jansson */
    p = skip_ws(p, end);
    if (p < end && *p == ',') {
      p = skip_ws(p + 1, end);
      continue;
    }
    if (p < end && *p == '}') return skip_ws(p + 1, end) == end;
    return false;
  }
}

static void claim_from_json(claim *c, json_t *v) {
  if (!v)
    c->kind = C_ABSENT;
  else if (json_is_string(v))
    c->kind = C_STRING, c->s = json_string_value(v), c->n = json_string_length(v);
  else if (json_is_integer(v))
    c->kind = C_INT, c->i = json_integer_value(v);
  else
    c->kind = C_OTHER;
}

/* As libjwt's jwt_get_grant did: only a string counts; an optional claim may be absent. */
static bool copy_claim(const claim *c, char *dst, size_t cap, bool required) {
  if (c->kind != C_STRING) return !required;
  if (c->n >= cap || c->n == 0 || memchr(c->s, 0, c->n)) return false;
  memcpy(dst, c->s, c->n);
  dst[c->n] = 0;
  return true;
}

/* sig: the token's 32-byte signature, which names a token without a jti claim. */
static bool check_claims(const raw_claims *c, const unsigned char sig[32], token_claims *out) {
  if (!copy_claim(&c->id, out->id, sizeof out->id, true) || !copy_claim(&c->role, out->role, sizeof out->role, true) ||
      !copy_claim(&c->elevation_id, out->elevation_id, sizeof out->elevation_id, false) ||
      !copy_claim(&c->jti, out->token_id, 64, false) ||
      !copy_claim(&c->sid, out->session_id, sizeof out->session_id, false))
    return false;
  if (c->jti.kind != C_STRING) { /* a token from before tokens had an id */
    memcpy(out->token_id, "sig-", 4);
    hex_encode(sig, 16, out->token_id + 4);
  }
  out->is_staff = c->type.kind == C_STRING && c->type.n == 5 && !memcmp(c->type.s, "staff", 5);
  out->iat = c->iat.kind == C_INT ? c->iat.i : 0;
  out->exp = c->exp.kind == C_INT ? c->exp.i : 0;
  if (c->gen.kind != C_ABSENT && (c->gen.kind != C_INT || c->gen.i < 0)) return false;
  out->gen = c->gen.kind == C_INT ? c->gen.i : 0;
  return out->exp > 0 && out->exp > clock_now_ms() / 1000; /* exp * 1000 could overflow */
}

/* {"alg":"HS256","typ":"JWT"}, the header this service and most clients write. */
#define USUAL_HEADER "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

bool token_verify(const char *token, token_claims *out) {
  memset(out, 0, sizeof *out);
  size_t n = token ? strlen(token) : 0;
  if (!token || n > 4096) return false;
  const char *dot1 = memchr(token, '.', n);
  const char *dot2 = dot1 ? memchr(dot1 + 1, '.', n - (size_t)(dot1 + 1 - token)) : NULL;
  if (!dot2 || memchr(dot2 + 1, '.', n - (size_t)(dot2 + 1 - token))) return false;
  unsigned char sig[40], mac[32];
  size_t siglen;
  if (!b64url_decode(dot2 + 1, n - (size_t)(dot2 + 1 - token), sig, sizeof sig, &siglen) || siglen != 32 ||
      !hmac_sha256(token, (size_t)(dot2 - token), mac) || CRYPTO_memcmp(mac, sig, 32))
    return false;
  unsigned char buf[3072];
  size_t len;
  if ((size_t)(dot1 - token) != strlen(USUAL_HEADER) || memcmp(token, USUAL_HEADER, strlen(USUAL_HEADER))) {
    if (!b64url_decode(token, (size_t)(dot1 - token), buf, sizeof buf, &len)) return false;
    json_t *header = json_loadb((const char *)buf, len, 0, NULL);
    json_t *alg = json_object_get(header, "alg");
    bool hs256 = json_is_string(alg) && !strcmp(json_string_value(alg), "HS256");
    json_decref(header);
    if (!hs256) return false;
  }
  if (!b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), buf, sizeof buf, &len)) return false;
  raw_claims c = {0};
  bool ok;
  if (scan_claims((const char *)buf, len, &c)) {
    ok = check_claims(&c, sig, out);
  } else {
    json_t *claims = json_loadb((const char *)buf, len, 0, NULL);
    ok = json_is_object(claims);
    if (ok) {
      claim_from_json(&c.id, json_object_get(claims, "id"));
      claim_from_json(&c.role, json_object_get(claims, "role"));
      claim_from_json(&c.elevation_id, json_object_get(claims, "elevationId"));
      claim_from_json(&c.type, json_object_get(claims, "type"));
      claim_from_json(&c.iat, json_object_get(claims, "iat"));
      claim_from_json(&c.exp, json_object_get(claims, "exp"));
      claim_from_json(&c.gen, json_object_get(claims, "gen"));
      claim_from_json(&c.jti, json_object_get(claims, "jti"));
      claim_from_json(&c.sid, json_object_get(claims, "sid"));
      ok = check_claims(&c, sig, out);
    }
    json_decref(claims);
  }
  if (!ok) memset(out, 0, sizeof *out);
  return ok;
}
