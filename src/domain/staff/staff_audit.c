/* The audit trail and the HTTP hooks that feed it.
 *
 * Tokens. check_token refuses (401) a token whose subject is gone, was never there, or has
 * moved on since the token was issued: a staff token without its staff row (or with another
 * role), of an older token generation (a role or password change, disabling) or of a disabled
 * member; an administrator token without its administrator; a customer or provider token whose
 * account was deleted or whose generation moved on (a password reset). An impersonation token
 * (elevationId) must name an ACTIVE elevation for exactly its id and role, activated less than
 * 15 minutes ago, whose staff member is enabled, and may carry only the role user or provider.
 *
 * Impersonated requests. Each one gets two chained records. The request record (elevation,
 * staff member, target, method, path, redacted body, time) is committed before the handler
 * runs; if it cannot be written the handler does not run (503). The outcome record (its
 * status, ref_seq naming the request record) is appended once the answer is decided. A
 * request refused before its handler (validation, rate limit, role) gets both records then.
 * A request record without an outcome means the process stopped while handling it. */
#include "core/clock.h"
#include "core/config.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/staff/audit_chain.h"
#include "domain/staff/audit_checkpoint.h"
#include "domain/staff/audit_store.h"
#include "domain/staff/staff.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

db_rc staff_audit_in(db_conn *c, const audit_action *act) {
  arena a;
  arena_init(&a);
  char *detail = NULL;
  if (act->detail) {
    json_t *redacted = audit_redact(act->detail);
    detail = json_dumps(redacted, JSON_COMPACT);
    json_decref(redacted);
  }
  audit_record r = {.kind = "action",
                    .actor_id = act->actor_id,
                    .actor_role = act->actor_role,
                    .action = act->action,
                    .target_id = act->target_id,
                    .target_role = act->target_role,
                    .body = detail,
                    .created_at = clock_now_ms()};
  db_rc rc = audit_store_append(c, &a, &r);
  free(detail);
  arena_fini(&a);
  return rc;
}

/* ---- the hooks ---- */

typedef struct impersonation {
  const char *elevation_id, *staff_id;
  int64_t request_seq; /* 0 until the request record is committed */
} impersonation;

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
  if (staff_store_subject_exists(kind, au->id, au->role, au->gen, &found) != ERR_OK) return ERR_INTERNAL;
  if (!found) return refuse(req);
  if (staff_id) {
    impersonation *imp = arena_alloc(&req->arena, sizeof *imp);
    imp->elevation_id = au->elevation_id, imp->staff_id = staff_id;
    req->hook_state = imp;
  }
  return ERR_OK;
}

static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i])) return false;
  return true;
}

/* The body as recorded: JSON with credentials redacted; for multipart, the names of the text
 * fields and of the files, never their contents. Heap text or NULL (no body). */
static char *recorded_body(hs_req *req) {
  json_t *v;
  if (req->route && req->route->upload) {
    json_t *fields = json_array(), *files = json_array();
    json_t *name;
    size_t n;
    json_array_foreach(req->form_fields, n, name) {
      json_array_append_new(fields, json_string(audit_clean_text(&req->arena, json_string_value(name))));
    }
    for (int i = 0; i < req->nuploads; i++)
      json_array_append_new(files, json_pack("{s:s,s:s}", "field", audit_clean_text(&req->arena, req->uploads[i].field),
                                             "filename", audit_clean_text(&req->arena, req->uploads[i].filename)));
    v = json_pack("{s:o,s:o}", "fields", fields, "files", files);
  } else if (!req->raw_len || blank(req->raw_body, req->raw_len)) {
    return NULL;
  } else {
    json_t *parsed = json_loadb(req->raw_body, req->raw_len, JSON_ALLOW_NUL, NULL);
    v = parsed ? audit_redact(parsed) : json_sprintf("[unparsable body: %zu bytes]", req->raw_len);
    json_decref(parsed);
  }
  char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(v);
  return text;
}

static db_rc append_request(db_conn *c, hs_req *req, impersonation *imp) {
  char *body = recorded_body(req);
  audit_record r = {.kind = "request",
                    .elevation_id = imp->elevation_id,
                    .actor_id = imp->staff_id,
                    .target_id = req->auth.id,
                    .target_role = req->auth.role,
                    .method = req->method,
                    .path = audit_clean_text(&req->arena, req->path),
                    .body = body,
                    .created_at = clock_now_ms()};
  db_rc rc = audit_store_append(c, &req->arena, &r);
  free(body);
  if (rc == DB_OK) imp->request_seq = r.seq;
  return rc;
}

static err_t before_handler(hs_req *req) {
  impersonation *imp = req->hook_state;
  if (!imp) return ERR_OK;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK) rc = append_request(c, req, imp);
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  if (rc != DB_OK) {
    imp->request_seq = 0;
    return hs_fail(req, ERR_UNAVAILABLE, "Audit trail unavailable");
  }
  return ERR_OK;
}

static void after(hs_req *req) {
  impersonation *imp = req->hook_state;
  if (!imp) return;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK && !imp->request_seq) rc = append_request(c, req, imp);
  audit_record r = {.kind = "outcome",
                    .elevation_id = imp->elevation_id,
                    .actor_id = imp->staff_id,
                    .status = hs_status(req),
                    .ref_seq = imp->request_seq,
                    .created_at = clock_now_ms()};
  if (rc == DB_OK) rc = audit_store_append(c, &req->arena, &r);
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  if (rc != DB_OK)
    log_msg(LOG_ERROR, "audit: the outcome of request %s (elevation %s) was not recorded", req->request_id,
            imp->elevation_id);
}

void staff_domain_init(void) {
  static const hs_hooks hooks = {check_token, before_handler, after};
  hs_set_hooks(&hooks);
  if (CFG.env == ENV_PRODUCTION && !CFG.audit_key)
    log_msg(LOG_WARN, "AUDIT_KEY is unset: the audit chain is keyed with a key derived from JWT_SECRET; set AUDIT_KEY "
                      "and keep it off the database host (docs/operations.md)");
  audit_checkpoints_start();
}

void staff_domain_stop(void) { audit_checkpoints_stop(); }

/* ---- GET /staff/audit/sessions ---- */

static json_t *event_json(const db_res *r, int i) {
  return json_pack("{s:s,s:I,s:s,s:s,s:s,s:o,s:n,s:o,s:n}", "id", db_field(r, i, "id"), "seq",
                   (json_int_t)db_int(r, i, db_col(r, "seq")), "elevationId", db_field(r, i, "elevation_id"), "method",
                   db_field(r, i, "method"), "path", db_field(r, i, "path"), "body",
                   jx_parse_or(db_field(r, i, "body"), json_null()), "status", "createdAt",
                   jx_iso_or_null(db_field(r, i, "created_at")), "completedAt");
}

err_t api_staff_audit_sessions(hs_req *req) {
  staff_expire_elevations();
  db_res *staff, *elevations, *events;
  if (staff_store_list(&req->arena, &staff) != ERR_OK ||
      staff_store_elevations_all(&req->arena, &elevations) != ERR_OK ||
      audit_store_sessions_events(&req->arena, &events) != DB_OK)
    return ERR_INTERNAL;
  json_t *by_staff = arena_json(&req->arena, json_object()), *by_elevation = arena_json(&req->arena, json_object());
  json_t *by_seq = arena_json(&req->arena, json_object());
  json_t *list = json_array();
  for (int i = 0; i < staff->rows; i++) {
    json_t *s = staff_json(staff, i);
    json_object_set_new(s, "sessions", json_array());
    json_object_set(by_staff, db_field(staff, i, "id"), s);
    json_array_append_new(list, s);
  }
  for (int i = 0; i < elevations->rows; i++) {
    json_t *owner = json_object_get(by_staff, db_field(elevations, i, "staff_id")), *e = elevation_json(elevations, i);
    json_object_set_new(e, "events", json_array());
    json_object_set(by_elevation, db_field(elevations, i, "id"), e);
    json_array_append_new(json_object_get(owner, "sessions"), e);
  }
  for (int i = 0; i < events->rows; i++) {
    const char *kind = db_field(events, i, "kind");
    if (!strcmp(kind, "request")) {
      json_t *session = json_object_get(by_elevation, db_field(events, i, "elevation_id"));
      if (!session) continue;
      json_t *ev = event_json(events, i);
      json_object_set(by_seq, db_field(events, i, "seq"), ev);
      json_array_append_new(json_object_get(session, "events"), ev);
    } else {
      json_t *ev = json_object_get(by_seq, db_field(events, i, "ref_seq") ? db_field(events, i, "ref_seq") : "");
      if (!ev) continue;
      json_object_set_new(ev, "status", json_integer(db_int(events, i, db_col(events, "status"))));
      json_object_set_new(ev, "completedAt", jx_iso_or_null(db_field(events, i, "created_at")));
    }
  }
  return hs_ok(req, list);
}
