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
 * reset therefore still ends older tokens at once, on every instance. */
#include "core/clock.h"
#include "domain/auth/auth.h"
#include "domain/auth/auth_api.h"
#include "domain/auth/auth_tokens_store.h"

static err_t refuse(hs_req *req) { return hs_fail(req, ERR_UNAUTHORIZED, NULL); }

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
  bool found;
  if (auth_store_subject_exists(kind, au->id, au->role, au->gen, au->token_id, &found) != ERR_OK) return ERR_INTERNAL;
  if (!found) return refuse(req);
  if (staff_id) req->impersonation = (hs_impersonation){.elevation_id = au->elevation_id, .staff_id = staff_id};
  return ERR_OK;
}

const hs_hooks auth_hooks = {.check_token = check_token};
