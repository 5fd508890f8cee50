/* The auth domain's request hook: every token (customer, provider, staff, administrator,
 * impersonation) checked against the database once its signature and expiry are verified.
 *
 * check_token refuses (401) a token whose subject is gone, was never there, or has moved on
 * since the token was issued: a staff token without its staff row (or with another role), of
 * an older token generation (a role or password change, disabling) or of a disabled member; an
 * administrator token without its administrator; a customer or provider token whose account
 * was deleted or whose generation moved on (a password reset, a password change, logout-all,
 * the owner's deletion), or which was ended by itself (logout). An impersonation token
 * (elevationId) must name an ACTIVE elevation for exactly its id and role, activated less than
 * ELEVATION_TTL_MS ago, whose staff member is enabled, and may carry only the role user or
 * provider; the request's impersonation (hs_req.impersonation: the elevation and its staff
 * member) is filled once every check passed, for the staff domain's hooks that record it in
 * the audit trail.
 *
 * On PostgreSQL the subject's check of a request on the database lane costs no round trip of
 * its own: it is a guard (db_guard) sent in front of the request's first statement, which does
 * not run when the check finds no row; the pipeline then answers 401. A password change or
 * reset therefore still ends older tokens at once, on every instance.
 *
 * On SQLite, where every write passes through this process, a customer's or provider's token
 * that passed its check is kept (core/gencache.h) until a commit changes the accounts or the
 * ended tokens (db_watch_generation) or a second passes: its next requests read nothing to
 * check it, and logout, a password change or a deletion still refuses it on its next request.
 * A check to keep is read at once, not as a guard riding with the first statement: only an
 * outcome known before the request goes on is kept.
 *
 * Sessions: a customer's or provider's login (registration, password change) opens a session, a
 * family of refresh tokens (auth_tokens_store.h). Its access tokens carry the family's id (sid)
 * and live 7 days, as before; POST /auth/refresh exchanges a refresh token (256 random bits as 64
 * hex digits, of which only the SHA-256 is kept) for a new access token and a new refresh token,
 * valid 30 days from then but never past 90 days from the login. A refresh token works once:
 * presented again, it ends its whole session and every access token issued in it. */
#include "core/clock.h"
#include "core/gencache.h"
#include "core/ids.h"
#include "core/util.h"
#include "domain/auth/auth.h"
#include "domain/auth/auth_api.h"
#include "domain/auth/auth_tokens_store.h"
#include "ext/digest.h"
#include "ext/token.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static err_t refuse(hs_req *req) { return hs_fail(req, ERR_UNAUTHORIZED, NULL); }

static gencache *checked; /* customers' and providers' tokens that passed, by checked_key */
#define CHECKED_SLOTS 4096

void auth_tokens_init(void) {
  db_watch_table("users");
  db_watch_table("providers");
  db_watch_table("ended_tokens");
  checked = gencache_new(CHECKED_SLOTS, DB_WATCH_TTL_MS);
}

void auth_tokens_stop(void) {
  gencache_free(checked);
  checked = NULL;
}

/* Everything the check compares: the token's id, its subject, role and generation; false when
 * that does not fit (never for the service's own tokens), and then nothing is kept. */
static bool checked_key(const hs_auth *au, char key[256]) {
  int n = snprintf(key, 256, "%s|%s|%s|%" PRId64, au->token_id ? au->token_id : "", au->id, au->role, au->gen);
  return n > 0 && n < 256;
}

static err_t check_token(hs_req *req) {
  const hs_auth *au = &req->auth;
  const char *staff_id = NULL;
  if (au->elevation_id) {
    if (au->role_bit != ROLE_USER && au->role_bit != ROLE_PROVIDER) return refuse(req);
    if (auth_store_live_elevation(&req->arena, au->elevation_id, au->id, au->role, clock_now_ms() - ELEVATION_TTL_MS,
                                  &staff_id) != ERR_OK)
      return ERR_INTERNAL;
    if (!staff_id) return refuse(req);
  }
  token_subject kind = au->role_bit & ROLE_STAFF       ? SUBJECT_STAFF
                       : au->role_bit == ROLE_ADMIN    ? SUBJECT_ADMIN
                       : au->role_bit == ROLE_PROVIDER ? SUBJECT_PROVIDER
                                                       : SUBJECT_USER;
  /* read before the check reads, so a change committed meanwhile makes what it found stale */
  uint64_t gen =
      checked && !au->elevation_id && (kind == SUBJECT_USER || kind == SUBJECT_PROVIDER) ? db_watch_generation() : 0;
  char key[256];
  if (gen && !checked_key(au, key)) gen = 0;
  if (gen && gencache_get(checked, key, gen, NULL)) return ERR_OK;
  bool found;
  if (auth_store_subject_exists(kind, au->id, au->role, au->gen, au->token_id, gen != 0, &found) != ERR_OK)
    return ERR_INTERNAL;
  if (!found) return refuse(req);
  if (gen) gencache_put(checked, key, gen, "", 0);
  if (staff_id) req->impersonation = (hs_impersonation){.elevation_id = au->elevation_id, .staff_id = staff_id};
  return ERR_OK;
}

const hs_hooks auth_hooks = {.check_token = check_token};

/* ---- sessions ---- */

/* A new refresh token (64 hex digits) and its SHA-256; a new access token's jti and expiry. */
static void session_new_init(session_new *n, int64_t now) {
  secret_new_hex(n->refresh, n->refresh_hash);
  id_new(n->access_id);
  n->now = now;
  /* the token's exp is in seconds from the same clock: a second over it covers the rounding */
  n->grant = (session_grant){n->refresh_hash, n->access_id, now + TOKEN_TTL_ACCOUNT * 1000 + 1000};
}

/* The access token of session s, issued with n (its jti), in *token (arena). */
static err_t issue_access(hs_req *req, const session_row *s, const session_new *n, const char **token) {
  char *t = token_issue_session(s->account_id, s->role, s->gen, TOKEN_TTL_ACCOUNT, s->family_id, n->access_id);
  if (!t) return hs_fail(req, ERR_INTERNAL, NULL);
  *token = arena_strdup(&req->arena, t);
  free(t);
  return ERR_OK;
}

void auth_session_prepare(session_new *n, const char *role, const char *id, int64_t gen) {
  session_new_init(n, clock_now_ms());
  id_new(n->family);
  n->row = (session_row){n->family, id, role, gen};
}

err_t auth_session_answer(hs_req *req, const session_new *n, const char **token, const char **refresh) {
  *refresh = arena_strdup(&req->arena, n->refresh);
  return issue_access(req, &n->row, n, token);
}

err_t auth_open_session(hs_req *req, const char *role, const char *id, int64_t gen, const char **token,
                        const char **refresh) {
  session_new n;
  auth_session_prepare(&n, role, id, gen);
  if (auth_store_session_open(&n.row, &n.grant, n.now) != ERR_OK) return ERR_INTERNAL;
  return auth_session_answer(req, &n, token, refresh);
}

err_t api_auth_refresh(hs_req *req) {
  const char *presented = hs_body_str(req, "refreshToken");
  char hash[65];
  sha256_hex(presented, strlen(presented), hash);
  int64_t now = clock_now_ms();
  session_new n;
  session_new_init(&n, now);
  session_row s;
  session_outcome out = auth_store_session_rotate(&req->arena, hash, &n.grant, now, &s);
  if (out == SESSION_FAILED) return ERR_INTERNAL;
  if (out != SESSION_ROTATED)
    return hs_fail_code(req, ERR_UNAUTHORIZED, ERR_CODE_INVALID_TOKEN, "Invalid or expired refresh token");
  const char *token;
  err_t e = issue_access(req, &s, &n, &token);
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:s,s:s}", "token", token, "refreshToken", n.refresh);
}
