/* The staff domain's request hooks: the audit records of impersonated requests (written by the
 * audit domain). The auth domain's check_token has checked the token and, for a live
 * impersonation, filled req->impersonation (the elevation and its staff member) before these
 * run.
 *
 * Each impersonated request gets two chained records. The request record (elevation, staff
 * member, target, method, path, redacted body, time) is committed before the handler runs; if
 * it cannot be written the handler does not run (503). The outcome record (its status, ref_seq
 * naming the request record) is appended once the answer is decided. A request refused before
 * its handler (validation, rate limit, role) gets both records then. A request record without
 * an outcome means the process stopped while handling it. */
#include "domain/audit/audit.h"
#include "domain/staff/staff_api.h"

static err_t before_handler(hs_req *req) {
  if (!req->impersonation.staff_id || audit_impersonated_request(req) == ERR_OK) return ERR_OK;
  return hs_fail(req, ERR_UNAVAILABLE, "Audit trail unavailable");
}

static void after(hs_req *req) {
  if (req->impersonation.staff_id) audit_impersonated_outcome(req);
}

const hs_hooks staff_hooks = {.before_handler = before_handler, .after = after};
