/* libjwt 1.10 does not check exp and, given a key, still parses other algorithms, so the
 * algorithm and expiry are checked here after the signature. */
#include "ext/token.h"
#include "core/clock.h"
#include "core/config.h"
#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *token_issue(const char *id, const char *role, bool is_staff, const char *elevation_id, int64_t ttl_seconds) {
  jwt_t *jwt = NULL;
  char *out = NULL;
  if (jwt_new(&jwt)) return NULL;
  int64_t now = clock_now_ms() / 1000;
  if (jwt_add_grant(jwt, "id", id) || jwt_add_grant(jwt, "role", role) ||
      (is_staff && jwt_add_grant(jwt, "type", "staff")) ||
      (elevation_id && *elevation_id && jwt_add_grant(jwt, "elevationId", elevation_id)) ||
      jwt_add_grant_int(jwt, "iat", (long)now) || jwt_add_grant_int(jwt, "exp", (long)(now + ttl_seconds)) ||
      jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)CFG.jwt_secret, (int)CFG.jwt_secret_len))
    goto out;
  out = jwt_encode_str(jwt);
out:
  jwt_free(jwt);
  return out;
}

static bool copy_claim(jwt_t *jwt, const char *name, char *dst, size_t cap, bool required) {
  const char *v = jwt_get_grant(jwt, name);
  if (!v) return !required;
  if (strlen(v) >= cap || !*v) return false;
  strcpy(dst, v);
  return true;
}

bool token_verify(const char *token, token_claims *out) {
  memset(out, 0, sizeof *out);
  if (!token || strlen(token) > 4096) return false;
  jwt_t *jwt = NULL;
  bool ok = false;
  if (jwt_decode(&jwt, token, (const unsigned char *)CFG.jwt_secret, (int)CFG.jwt_secret_len) || !jwt) goto out;
  /* libjwt matches the alg name case-insensitively ("Hs256" passes); RFC 7515 does not */
  const char *alg = jwt_get_header(jwt, "alg");
  if (jwt_get_alg(jwt) != JWT_ALG_HS256 || !alg || strcmp(alg, "HS256")) goto out;
  if (!copy_claim(jwt, "id", out->id, sizeof out->id, true) ||
      !copy_claim(jwt, "role", out->role, sizeof out->role, true) ||
      !copy_claim(jwt, "elevationId", out->elevation_id, sizeof out->elevation_id, false))
    goto out;
  const char *type = jwt_get_grant(jwt, "type");
  out->is_staff = type && !strcmp(type, "staff");
  out->iat = jwt_get_grant_int(jwt, "iat");
  out->exp = jwt_get_grant_int(jwt, "exp");
  if (out->exp <= 0 || out->exp <= clock_now_ms() / 1000) goto out; /* exp * 1000 could overflow */
  ok = true;
out:
  jwt_free(jwt);
  return ok;
}
