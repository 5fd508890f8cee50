/* Canonical form: "marketplace-audit-v2\n" <prev_hash> "\n" then each field as
 * "<length>:<bytes>;" or "-;" for NULL, integers in decimal. Length prefixes make the form
 * unambiguous without escaping, and it does not depend on a JSON library's formatting, so a
 * record hashes the same when built in memory and when read back from either engine. The v2
 * hash is an HMAC-SHA256 of that form under the chain's key; records written before the key
 * (tag v1) were hashed with plain SHA-256, which verification still accepts before the first
 * keyed record. */
#include "domain/audit/audit_chain.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/util.h"
#include "ext/digest.h"
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void put(struct buf *b, const char *s, size_t n) { buf_addn(b, s, n); }

static void put_text(struct buf *b, const char *s) {
  if (!s) return put(b, "-;", 2);
  char len[24];
  size_t n = strlen(s);
  put(b, len, (size_t)snprintf(len, sizeof len, "%zu:", n));
  put(b, s, n);
  put(b, ";", 1);
}

static void put_int(struct buf *b, int64_t v, bool null_when_zero) {
  if (null_when_zero && v == 0) return put_text(b, NULL);
  char text[24];
  snprintf(text, sizeof text, "%" PRId64, v);
  put_text(b, text);
}

/* The canonical form of r under tag, in b (an empty buffer). Out of memory aborts: a hash of
 * part of a record must never be written. */
static void canonical(struct buf *b, const char *tag, const audit_record *r) {
  put(b, tag, strlen(tag));
  put(b, "\n", 1);
  put(b, r->prev_hash, strlen(r->prev_hash));
  put(b, "\n", 1);
  put_int(b, r->seq, false);
  const char *texts[] = {r->id,     r->kind,      r->elevation_id, r->actor_id, r->actor_role,
                         r->action, r->target_id, r->target_role,  r->method,   r->path};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) put_text(b, texts[i]);
  put_int(b, r->status, true);
  put_text(b, r->body);
  put_int(b, r->ref_seq, true);
  put_int(b, r->created_at, false);
  if (buf_result(b) != BUF_OK) oom();
}

void audit_record_hash(const audit_record *r, const void *key, size_t keylen, char out[65]) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  canonical(&b, "marketplace-audit-v2", r);
  hmac_sha256_hex(key, keylen, buf_ptr(&b), buf_len(&b), out);
  buf_free(&b);
}

void audit_record_hash_v1(const audit_record *r, char out[65]) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  canonical(&b, "marketplace-audit-v1", r);
  sha256_hex(buf_ptr(&b), buf_len(&b), out);
  buf_free(&b);
}

static char derived_key[65];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void derive_key(void) { secret_derive_hex("audit-chain-key", derived_key); }

const char *audit_key(size_t *len) {
  if (CFG.audit_key) return *len = strlen(CFG.audit_key), CFG.audit_key;
  pthread_once(&key_once, derive_key);
  *len = 64;
  return derived_key;
}

static bool is_credential(const char *key) {
  static const char *const names[] = {"password", "newPassword", "currentPassword", "token", "paymentMethodId"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcasecmp(key, names[i])) return true;
  return false;
}

json_t *audit_redact(json_t *v) {
  if (json_is_object(v)) {
    json_t *out = json_object();
    const char *key;
    json_t *member;
    json_object_foreach(v, key, member) {
      json_object_set_new(out, key, is_credential(key) ? json_string("[REDACTED]") : audit_redact(member));
    }
    return out;
  }
  if (json_is_array(v)) {
    json_t *out = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) json_array_append_new(out, audit_redact(item));
    return out;
  }
  return v ? json_deep_copy(v) : NULL;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s) {
  if (s[0] < 0x80) return 1;
  size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
  if (!n) return 0;
  uint32_t cp = s[0] & (0x7F >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

char *audit_clean_text(arena *a, const char *s) {
  if (!s) return NULL;
  size_t len = strlen(s);
  char *out = arena_alloc(a, len + 1);
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0;
  while (*p) {
    size_t n = utf8_len(p);
    if (n == 1 && iscntrl(*p) && *p != '\t') n = 0;
    if (n == 0) {
      out[o++] = '?';
      p++;
      continue;
    }
    memcpy(out + o, p, n);
    o += n, p += n;
  }
  out[o] = 0;
  return out;
}
