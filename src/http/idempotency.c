/* The claim is one row per (scope, key) in idempotency_keys, inserted before the handler runs:
 * the primary key decides between concurrent duplicates, on one instance or many. The row
 * holds the request's fingerprint ("hmac:" and the HMAC-SHA256 of method, path and canonical
 * JSON body, or an upload's text fields and files' SHA-256s, under a key derived from JWT_SECRET; rows written before
 * migration 0014 hold a bare SHA-256 and are compared as such until they expire), the kept answer once the handler is
 * done (status NULL while it runs), and its expiry. An expired row, or a claim whose request never finished (its lease
 * ran out), is deleted and claimed afresh. Expired rows are deleted by the system domain's housekeeping
 * (hs_idem_prune, every RETENTION_SWEEP). */
#include "http/idempotency.h"
#include "core/clock.h"
#include "core/config.h"
#include "db/db.h"
#include "ext/digest.h"
#include <pthread.h>
#include <string.h>

#define MAX_KEY_LEN 255

bool hs_idem_applies(const hs_route *r) {
  return (r->method == HS_POST || r->method == HS_PATCH) &&
         !(r->flags & (ROUTE_RAW_BODY | ROUTE_INLINE | ROUTE_SECRETS));
}

static bool key_valid(const char *k) {
  size_t n = strlen(k);
  if (n == 0 || n > MAX_KEY_LEN) return false;
  for (; *k; k++)
    if (*k < 0x20 || *k > 0x7e) return false;
  return true;
}

#define FINGERPRINT_PREFIX "hmac:"

static char fingerprint_key[65];
static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;

static void fingerprint_key_init(void) { secret_derive_hex("idempotency-fingerprint", fingerprint_key); }

/* An upload as one JSON value: its text fields as validated, and each file (field, SHA-256 of
 * its bytes as received) in arrival order. New reference. */
static json_t *form_of(const hs_req *req) {
  json_t *files = json_array();
  for (int i = 0; i < req->nuploads; i++)
    json_array_append_new(files, json_pack("[s,s]", req->uploads[i].field, req->uploads[i].sha256));
  return json_pack("{s:o,s:o}", "fields", json_deep_copy(req->body), "files", files);
}

/* Method, path and the body as canonical JSON (sorted keys, no spaces), so a retry that
 * serialises the same object differently is still the same request; an upload's body is its
 * form (form_of). Arena text. */
static const char *request_text(hs_req *req) {
  json_t *body = req->route->upload ? form_of(req)
                 : req->raw_len     ? json_loadb(req->raw_body, req->raw_len, JSON_ALLOW_NUL, NULL)
                                    : NULL;
  char *canon = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
  const char *text = arena_printf(&req->arena, "%s\n%s\n%s", req->method, req->path, canon ? canon : "{}");
  free(canon);
  json_decref(body);
  return text;
}

/* The stored fingerprint of text: "hmac:" + 64 hex digits. */
static void fingerprint(const char *text, char out[70]) {
  pthread_once(&fingerprint_once, fingerprint_key_init);
  memcpy(out, FINGERPRINT_PREFIX, sizeof FINGERPRINT_PREFIX - 1);
  hmac_sha256_hex(fingerprint_key, 64, text, strlen(text), out + sizeof FINGERPRINT_PREFIX - 1);
}

/* Whether a kept fingerprint is text's: an HMAC, or the bare SHA-256 of a row written before
 * migration 0014 (such rows expire within 24 hours of it). */
static bool same_request(const char *stored, const char *text, const char *hmac) {
  if (!strncmp(stored, FINGERPRINT_PREFIX, sizeof FINGERPRINT_PREFIX - 1)) return digest_equal(stored, hmac);
  char legacy[65];
  sha256_hex(text, strlen(text), legacy);
  return digest_equal(stored, legacy);
}

err_t hs_idem_prune(int64_t now) {
  int batch = db_prune_batch();
  return db_to_err(db_delete_in_batches("DELETE FROM idempotency_keys WHERE (scope, key) IN (SELECT scope, key "
                                        "FROM idempotency_keys WHERE expires_at <= $1 LIMIT $2)",
                                        DB_ARGS(DB_INT(now), DB_INT(batch)), batch));
}

/* Answers with a kept answer; an error kept before error bodies carried `code` gets its
 * status's default, so a replay keeps today's error shape. */
static void replay(hs_req *req, int status, const char *text) {
  json_t *body = json_loads(text, JSON_DECODE_ANY, NULL);
  if (status >= 400 && json_is_object(body) && json_object_get(body, "error") && !json_object_get(body, "code"))
    json_object_set_new(body, "code", json_string(err_default_code(err_of_status(status))));
  hs_reply(req, status, body);
}

typedef enum { CLAIMED, TAKEN, FAILED } claim_rc;

static claim_rc claim(hs_req *req, const char *scope, const char *key, const char *hash, int64_t now) {
  db_res *r;
  if (db_query(&req->arena, &r,
               "INSERT INTO idempotency_keys (scope, key, request_hash, locked_until, created_at, expires_at) "
               "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope, key) DO NOTHING RETURNING 1",
               DB_ARGS(DB_TEXT(scope), DB_TEXT(key), DB_TEXT(hash), DB_INT(now + IDEMPOTENCY_LEASE_MS), DB_INT(now),
                       DB_INT(now + CFG.retain.idempotency))) != DB_OK)
    return FAILED;
  return r->rows == 1 ? CLAIMED : TAKEN;
}

bool hs_idem_begin(hs_req *req) {
  const char *key = hs_header(req, "Idempotency-Key");
  if (!key || !hs_idem_applies(req->route)) return true;
  if (!key_valid(key)) {
    hs_fail_invalid(req, "Idempotency-Key: must be 1 to 255 printable ASCII characters");
    return false;
  }
  const char *scope = req->route->roles ? arena_printf(&req->arena, "%s:%s", req->auth.role, req->auth.id)
                                        : arena_printf(&req->arena, "ip:%s", req->ip);
  const char *text = request_text(req);
  char hash[70];
  fingerprint(text, hash);
  int64_t now = clock_now_ms();
  for (int attempt = 0; attempt < 3; attempt++) {
    claim_rc rc = claim(req, scope, key, hash, now);
    if (rc == FAILED) break;
    if (rc == CLAIMED) {
      req->idem_scope = scope, req->idem_key = arena_strdup(&req->arena, key);
      return true;
    }
    db_res *r;
    if (db_query(&req->arena, &r,
                 "SELECT request_hash, status, response, locked_until, expires_at FROM idempotency_keys "
                 "WHERE scope = $1 AND key = $2",
                 DB_ARGS(DB_TEXT(scope), DB_TEXT(key))) != DB_OK)
      break;
    if (r->rows == 0) continue; /* released meanwhile: claim again */
    bool running = db_isnull(r, 0, 1);
    if (db_int(r, 0, 4) <= now || (running && db_int(r, 0, 3) <= now)) {
      /* expired, or abandoned by a request that never finished: the one who deletes it wins */
      if (db_query(NULL, NULL,
                   "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND "
                   "(expires_at <= $3 OR (status IS NULL AND locked_until <= $3))",
                   DB_ARGS(DB_TEXT(scope), DB_TEXT(key), DB_INT(now))) != DB_OK)
        break;
      continue;
    }
    if (!same_request(db_text(r, 0, 0), text, hash)) {
      hs_fail_code(req, ERR_UNPROCESSABLE, ERR_CODE_IDEMPOTENCY_REUSED,
                   "Idempotency-Key reused with a different request");
      return false;
    }
    if (running) {
      hs_fail_code(req, ERR_CONFLICT, ERR_CODE_IDEMPOTENCY_IN_PROGRESS,
                   "A request with this Idempotency-Key is in progress");
      req->retry_after = 1;
      return false;
    }
    req->replayed = true;
    replay(req, (int)db_int(r, 0, 1), db_text(r, 0, 2));
    return false;
  }
  hs_fail(req, ERR_INTERNAL, NULL);
  return false;
}

void hs_idem_end(hs_req *req, int status, const char *body_text) {
  if (!req->idem_key) return;
  if (status == 400 || status >= 500)
    db_query(NULL, NULL, "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND status IS NULL",
             DB_ARGS(DB_TEXT(req->idem_scope), DB_TEXT(req->idem_key)));
  else
    db_query(NULL, NULL, "UPDATE idempotency_keys SET status = $3, response = $4 WHERE scope = $1 AND key = $2",
             DB_ARGS(DB_TEXT(req->idem_scope), DB_TEXT(req->idem_key), DB_INT(status),
                     DB_TEXT(body_text ? body_text : "null")));
  req->idem_key = NULL;
}
