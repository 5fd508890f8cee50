/* The audit chain's pure parts: a record's canonical content and hash, credential redaction,
 * and text cleaning. No I/O, so unit tests and `audit verify` use exactly what appends use. */
#ifndef DOMAIN_AUDIT_AUDIT_CHAIN_H
#define DOMAIN_AUDIT_AUDIT_CHAIN_H
#include "core/arena.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The prev_hash of the first record. */
#define AUDIT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* One record of the chain. NULL strings and zero status/ref_seq are SQL NULL. */
typedef struct audit_record {
  int64_t seq;
  const char *id, *kind; /* kind: "request", "outcome" or "action" */
  const char *elevation_id, *actor_id, *actor_role, *action, *target_id, *target_role;
  const char *method, *path;
  int status;
  const char *body; /* JSON text, credentials already redacted */
  int64_t ref_seq;
  int64_t created_at;
  const char *prev_hash;
} audit_record;

/* The record's hash: lowercase hex HMAC-SHA256 under key over the canonical form tagged
 * "marketplace-audit-v2": the tag, prev_hash and every field in a fixed order, each
 * length-prefixed (so no two different records serialise alike). Without the key nobody can
 * write a record, or rewrite the chain after an edit, that verifies. */
void audit_record_hash(const audit_record *r, const void *key, size_t keylen, char out[65]);
/* The hash of a record written before the chain was keyed: plain SHA-256 over the same form
 * tagged "marketplace-audit-v1". Only verification computes it; appends never write it. */
void audit_record_hash_v1(const audit_record *r, char out[65]);

/* The chain's key: AUDIT_KEY, or, when it is unset, a key derived from JWT_SECRET under its
 * own label. Borrowed, process lifetime; thread-safe (computed once). */
const char *audit_key(size_t *len);

/* A deep copy of v in which the value of every object member named password, newPassword,
 * token or paymentMethodId (any case), at any depth, is the string "[REDACTED]". New
 * reference; NULL for NULL. */
json_t *audit_redact(json_t *v);

/* s with every byte sequence that is not valid UTF-8 (and every control character but tab)
 * replaced by '?', in arena memory; NULL for NULL. Both engines then store it unchanged. */
char *audit_clean_text(arena *a, const char *s);

#endif
