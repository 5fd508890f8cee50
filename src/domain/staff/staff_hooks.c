/* The HTTP hooks of the staff domain: every token checked against the database, and the
 * audit records of impersonated requests (written by the audit domain).
 *
 * Tokens. check_token refuses (401) a token whose subject is gone, was never there, or has
 * moved on since the token was issued: a staff token without its staff row (or with another
 * role), of an older token generation (a role or password change, disabling) or of a disabled
 * member; an administrator token without its administrator; a customer or provider token whose
 * account was deleted or whose generation moved on (a password reset, a password change,
 * logout-all, the owner's deletion), or which was ended by itself (logout). An impersonation token
 * (elevationId) must name an ACTIVE elevation for exactly its id and role, activated less than
 * 15 minutes ago, whose staff member is enabled, and may carry only the role user or provider.
 *
 * Impersonated requests. Each one gets two chained records. The request record (elevation,
 * staff member, target, method, path, redacted body, time) is committed before the handler
 * runs; if it cannot be written the handler does not run (503). The outcome record (its
 * status, ref_seq naming the request record) is appended once the answer is decided. A
 * request refused before its handler (validation, rate limit, role) gets both records then.
 * A request record without an outcome means the process stopped while handling it.
 *
 * On PostgreSQL the subject's check of a request on the database lane costs no round trip of
 * its own: it is a guard (db_guard) sent in front of the request's first statement, which does
 * not run when the check finds no row; the pipeline then answers 401. A password change or
 * reset therefore still ends older tokens at once, on every instance. */
#include "core/clock.h"
#include "domain/audit/audit.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"

static err_t refuse(hs_req *req) { return hs_fail(req, ERR_UNAUTHORIZED, NULL); }

/* The request's impersonation is recorded (hook_state) only once every check passed. */
static err_t check_token(hs_req *req) {
  const hs_auth *au = &req->auth;
  const char *staff_id = NULL;
  if (au->elevation_id) {
    if (au->role_bit != ROLE_USER && au->role_bit != ROLE_PROVIDER) return refuse(req);
    if (staff_store_live_elevation(&req->arena, au->elevation_id, au->id, au->role, clock_now_ms() - ELEVATION_TTL_MS,
                                   &staff_id) != ERR_OK)
      return ERR_INTERNAL;
    if (!staff_id) return refuse(req);
  }
  token_subject kind = au->role_bit & ROLE_STAFF       ? SUBJECT_STAFF
                       : au->role_bit == ROLE_ADMIN    ? SUBJECT_ADMIN
                       : au->role_bit == ROLE_PROVIDER ? SUBJECT_PROVIDER
                                                       : SUBJECT_USER;
  bool found;
  if (staff_store_subject_exists(kind, au->id, au->role, au->gen, au->token_id, &found) != ERR_OK) return ERR_INTERNAL;
  if (!found) return refuse(req);
  if (staff_id) {
    audit_impersonation *imp = arena_alloc(&req->arena, sizeof *imp);
    imp->elevation_id = au->elevation_id, imp->staff_id = staff_id;
    req->hook_state = imp;
  }
  return ERR_OK;
}

static err_t before_handler(hs_req *req) {
  audit_impersonation *imp = req->hook_state;
  if (!imp || audit_impersonated_request(req, imp) == ERR_OK) return ERR_OK;
  return hs_fail(req, ERR_UNAVAILABLE, "Audit trail unavailable");
}

static void after(hs_req *req) {
  if (req->hook_state) audit_impersonated_outcome(req, req->hook_state);
}

const hs_hooks staff_hooks = {check_token, before_handler, after, NULL};
