/* The elevation flow. A support agent asks to act as a customer or provider (PENDING); the
 * administrator gets an email with approve and deny links, each carrying a token that is an
 * HMAC of the action and the request id under a key derived from JWT_SECRET, so it cannot be
 * forged or moved to another request or action; a link resolves a request once because it
 * moves the request out of PENDING with a conditional update. The deny link also ends an
 * APPROVED or ACTIVE elevation (DEACTIVATED): the administrator can take access back at any
 * time. The approved agent then gets a 15-minute token with the target's id and role plus
 * elevationId (ACTIVE), within an hour of the approval (after that it lapses); the auth
 * domain's token check refuses the token once the elevation is no longer ACTIVE or its 15
 * minutes are over, and the staff hooks record every request made with it. */
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/common.h"
#include "domain/staff/staff.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"
#include "ext/digest.h"
#include "ext/token.h"
#include "http/paging.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const hs_rj_field ELEVATION_JSON[] = {
    {"id", "id", RJ_STR},
    {"staffId", "staff_id", RJ_STR},
    {"staff", "staff_", RJ_OBJECT, STAFF_IDENTITY_JSON}, /* staff_id, staff_name, ... */
    {"targetId", "target_id", RJ_STR},
    {"targetRole", "target_role", RJ_STR},
    {"reason", "reason", RJ_STR},
    {"status", "status", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {"resolvedAt", "resolved_at", RJ_ISO},
    {"activatedAt", "activated_at", RJ_ISO},
    {"expiresAt", "expires_at", RJ_ISO},
    {"deactivatedAt", "deactivated_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};

/* The link token of action ("approve" or "deny") on elevation id. */
static void link_token(const char *id, const char *action, char out[65]) {
  char key[65], msg[128];
  secret_derive_hex("elevation-link-signing", key);
  int n = snprintf(msg, sizeof msg, "%s:%s", action, id);
  hmac_sha256_hex(key, 64, msg, (size_t)n, out);
}

static char *link_url(arena *a, const char *id, const char *action) {
  char token[65];
  link_token(id, action, token);
  return arena_printf(a, "%s/staff/elevation/%s/%s?token=%s", CFG.public_url, id, action, token);
}

static err_t load(hs_req *req, const char *id, db_res **r) {
  err_t e = staff_store_elevation(&req->arena, id, r);
  return hs_found_or_fail(req, e, "Elevation request");
}

err_t api_staff_elevation_create(hs_req *req) {
  const char *target_id = hs_body_str(req, "targetId"), *target_role = hs_body_str(req, "targetRole");
  const char *reason = hs_body_str(req, "reason");
  account_card target;
  err_t e = auth_account_get(&req->arena, target_role, target_id, &target);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Account");
  db_res *me;
  if (e != ERR_OK || (e = staff_store_get(&req->arena, req->auth.id, &me)) != ERR_OK) return ERR_INTERNAL;
  char id[ID_LEN + 1];
  id_new(id);
  const char *who = arena_printf(&req->arena, "%s <%s>", db_field(me, 0, "name"), db_field(me, 0, "email"));
  char *subject =
      arena_printf(&req->arena, "Elevation request: %s wants to act as %s", db_field(me, 0, "name"), target.name);
  char *body = arena_printf(&req->arena,
                            "A staff member asks to act as a %s account.\n\n"
                            "Staff member: %s (%s)\nAccount: %s <%s> (%s %s)\nReason: %s\n\n"
                            "Approve:\n%s\n\nDeny:\n%s\n\n"
                            "Once approved, the staff member can act as this account for 15 minutes, and every "
                            "request made is recorded in the audit trail.\n",
                            target_role, who, req->auth.role, target.name, target.email, target_role, target.id, reason,
                            link_url(&req->arena, id, "approve"), link_url(&req->arena, id, "deny"));
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s}", "elevationId", id, "reason", reason));
  audit_action act = {req->auth.id, req->auth.role, "elevation.request", target_id, target_role, detail};
  staff_outcome out =
      staff_store_elevation_insert(id, req->auth.id, target_id, target_role, reason, subject, body, &act);
  if (out != STAFF_DONE) return staff_fail(req, out);
  db_res *r;
  if ((e = load(req, id, &r)) != ERR_OK) return e;
  return hs_ok_row(req, ELEVATION_JSON, r);
}

/* ---- the administrator's links ---- */

static err_t reply_text(hs_req *req, const char *content_type, char *text, size_t len) {
  return hs_reply_file(req, -1, text, len, content_type);
}

/* The page of a link that changed the request: title, its new status and, when given, note. */
static err_t reply_resolved_page(hs_req *req, const db_res *r, const char *title, const char *note) {
  account_card target = {0};
  auth_account_get(&req->arena, db_field(r, 0, "target_role"), db_field(r, 0, "target_id"), &target);
  char created[25];
  clock_format_iso(db_int(r, 0, db_col(r, "created_at")), created);
  const char *values[] = {title,
                          title,
                          db_field(r, 0, "status"),
                          note ? note : "",
                          db_field(r, 0, "id"),
                          db_field(r, 0, "staff_name"),
                          db_field(r, 0, "staff_email"),
                          db_field(r, 0, "staff_role"),
                          db_field(r, 0, "target_role"),
                          target.name ? target.name : "(account deleted)",
                          target.email ? target.email : "",
                          db_field(r, 0, "target_id"),
                          db_field(r, 0, "reason"),
                          created};
  return common_reply_html(
      req,
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title></head><body>\n"
      "<h1>%s</h1>\n<p>The elevation request is now <strong>%s</strong>.%s</p>\n<dl>\n"
      "<dt>Request</dt><dd>%s</dd>\n<dt>Staff member</dt><dd>%s &lt;%s&gt; (%s)</dd>\n"
      "<dt>Account</dt><dd>%s %s &lt;%s&gt; (%s)</dd>\n<dt>Reason</dt><dd>%s</dd>\n"
      "<dt>Requested at</dt><dd>%s</dd>\n</dl>\n</body></html>\n",
      values);
}

static err_t reply_already_resolved(hs_req *req, const char *status) {
  if (!strcmp(status, "EXPIRED")) { /* nobody answered within 24 hours: the link is dead */
    return common_reply_page(req, "This link is no longer valid",
                             "<p>The elevation request lapsed: nobody answered it within 24 hours. The staff "
                             "member may ask again.</p>\n",
                             NULL);
  }
  char *text = NULL;
  if (asprintf(&text, "This elevation request was already resolved: it is %s.\n", status) < 0) return ERR_INTERNAL;
  return reply_text(req, "text/plain; charset=utf-8", text, strlen(text));
}

/* A link: approve or deny a PENDING request; the deny link also ends an APPROVED or ACTIVE
 * one. Anything else was already resolved. */
static err_t resolve(hs_req *req, elevation_move move, const char *action) {
  static const struct {
    const char *action, *title, *note;
  } outcome[] = {
      [MOVE_APPROVE] = {"elevation.approve", "Elevation approved", NULL},
      [MOVE_DENY] = {"elevation.deny", "Elevation denied", NULL},
      [MOVE_END] = {"elevation.end", "Elevation ended",
                    " The elevation was ended: a token issued for it no longer works, and none can be issued."},
  };
  const char *id = hs_param(req, "id");
  db_res *r;
  staff_expire_elevations(); /* an elevation whose time is over is no longer live */
  err_t e = load(req, id, &r);
  if (e != ERR_OK) return e;
  const char *token = json_string_value(json_object_get(req->query, "token"));
  char expected[65];
  link_token(id, action, expected);
  if (!token || !digest_equal(token, expected)) return hs_fail(req, ERR_FORBIDDEN, "Invalid or missing link token");
  const char *status = db_field(r, 0, "status");
  bool live = !strcmp(status, "APPROVED") || !strcmp(status, "ACTIVE");
  if (strcmp(status, "PENDING") && !(move == MOVE_DENY && live)) return reply_already_resolved(req, status);
  if (live) move = MOVE_END;
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s,s:s,s:s}", "staffId", db_field(r, 0, "staff_id"),
                                                     "targetId", db_field(r, 0, "target_id"), "targetRole",
                                                     db_field(r, 0, "target_role"), "from", status));
  audit_action act = {NULL, "approval-link", outcome[move].action, id, "elevation", detail};
  bool moved;
  if (staff_store_elevation_move(move, id, NULL, &act, &moved) != ERR_OK || load(req, id, &r) != ERR_OK)
    return ERR_INTERNAL;
  if (!moved) return reply_already_resolved(req, db_field(r, 0, "status"));
  return reply_resolved_page(req, r, outcome[move].title, outcome[move].note);
}

err_t api_staff_elevation_approve(hs_req *req) { return resolve(req, MOVE_APPROVE, "approve"); }
err_t api_staff_elevation_deny(hs_req *req) { return resolve(req, MOVE_DENY, "deny"); }

/* ---- the administrator in the portal (GODMODE): the same moves as the links ---- */

err_t api_admin_elevations(hs_req *req) {
  staff_expire_elevations();
  return hs_ok_page(req, &ELEVATIONS_KEYSET, 0, staff_store_elevations_by_status, hs_query_str(req, "status"),
                    ELEVATION_JSON, 640);
}

/* Approve or deny a PENDING request as the links do; deny also ends an APPROVED or ACTIVE one.
 * 409 when it is past that; the action is recorded as the administrator's. */
static err_t admin_resolve(hs_req *req, elevation_move move) {
  static const char *const action[] = {
      [MOVE_APPROVE] = "elevation.approve", [MOVE_DENY] = "elevation.deny", [MOVE_END] = "elevation.end"};
  const char *id = hs_param(req, "id");
  db_res *r;
  staff_expire_elevations();
  err_t e = load(req, id, &r);
  if (e != ERR_OK) return e;
  const char *status = db_field(r, 0, "status");
  bool live = !strcmp(status, "APPROVED") || !strcmp(status, "ACTIVE");
  if (strcmp(status, "PENDING") && !(move == MOVE_DENY && live))
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE,
                        arena_printf(&req->arena, "Elevation request is already %s", status));
  if (live) move = MOVE_END;
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s,s:s,s:s}", "staffId", db_field(r, 0, "staff_id"),
                                                     "targetId", db_field(r, 0, "target_id"), "targetRole",
                                                     db_field(r, 0, "target_role"), "from", status));
  audit_action act = {req->auth.id, "admin", action[move], id, "elevation", detail};
  bool moved;
  if (staff_store_elevation_move(move, id, NULL, &act, &moved) != ERR_OK || load(req, id, &r) != ERR_OK)
    return ERR_INTERNAL;
  if (!moved)
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE,
                        arena_printf(&req->arena, "Elevation request is already %s", db_field(r, 0, "status")));
  return hs_ok_row(req, ELEVATION_JSON, r);
}

err_t api_admin_elevation_approve(hs_req *req) { return admin_resolve(req, MOVE_APPROVE); }
err_t api_admin_elevation_deny(hs_req *req) { return admin_resolve(req, MOVE_DENY); }

/* ---- the staff member's side ---- */

err_t api_staff_elevation_list(hs_req *req) {
  staff_expire_elevations();
  db_page pg;
  db_res *r;
  err_t e = hs_page_rows(req, &ELEVATIONS_KEYSET, 0, staff_store_elevations_by_staff, req->auth.id, &pg, &r);
  return e == ERR_OK ? hs_ok_rows(req, ELEVATION_JSON, r, 640) : e;
}

/* Loads elevation id and checks that the caller owns it (403 otherwise). */
static err_t load_own(hs_req *req, const char *id, db_res **r) {
  err_t e = load(req, id, r);
  if (e == ERR_OK && strcmp(db_field(*r, 0, "staff_id"), req->auth.id))
    return hs_fail(req, ERR_FORBIDDEN, "Not your elevation request");
  return e;
}

err_t api_staff_impersonate(hs_req *req) {
  const char *id = hs_body_str(req, "elevationId");
  db_res *r;
  staff_expire_elevations(); /* an approval not used within the hour has lapsed */
  err_t e = load_own(req, id, &r);
  if (e != ERR_OK) return e;
  if (strcmp(db_field(r, 0, "status"), "APPROVED"))
    return hs_fail(req, ERR_FORBIDDEN, "Elevation request is not approved");
  account_card target;
  const char *role = db_field(r, 0, "target_role");
  e = auth_account_get(&req->arena, role, db_field(r, 0, "target_id"), &target);
  if (e) return hs_found_or_fail(req, e, "Account");
  audit_action act = {req->auth.id, req->auth.role, "elevation.impersonate",
                      target.id,    role,           arena_json(&req->arena, json_pack("{s:s}", "elevationId", id))};
  bool moved;
  if (staff_store_elevation_move(MOVE_ACTIVATE, id, req->auth.id, &act, &moved) != ERR_OK) return ERR_INTERNAL;
  if (!moved) return hs_fail(req, ERR_FORBIDDEN, "Elevation request is not approved");
  impersonated who = {target.id, target.name, target.email, role, target.token_gen};
  return common_reply_impersonation(req, &who, id, TOKEN_TTL_STAFF_IMPERSONATION);
}

err_t api_staff_elevation_deactivate(hs_req *req) {
  const char *id = hs_param(req, "id");
  db_res *r;
  err_t e = load_own(req, id, &r);
  if (e != ERR_OK) return e;
  const char *status = db_field(r, 0, "status");
  if (!strcmp(status, "REJECTED")) return staff_fail(req, STAFF_ELEVATION_REJECTED);
  if (strcmp(status, "DEACTIVATED")) {
    audit_action act = {req->auth.id,
                        req->auth.role,
                        "elevation.deactivate",
                        db_field(r, 0, "target_id"),
                        db_field(r, 0, "target_role"),
                        arena_json(&req->arena, json_pack("{s:s,s:s}", "elevationId", id, "from", status))};
    bool moved;
    if (staff_store_elevation_move(MOVE_DEACTIVATE, id, req->auth.id, &act, &moved) != ERR_OK ||
        load(req, id, &r) != ERR_OK)
      return ERR_INTERNAL;
    if (!moved && strcmp(db_field(r, 0, "status"), "DEACTIVATED")) return staff_fail(req, STAFF_ELEVATION_REJECTED);
  }
  return hs_ok_row(req, ELEVATION_JSON, r);
}

/* ---- GET /staff/audit/sessions ---- */

/* An impersonated request as recorded (its answer's status and time, completedAt, are added
 * from the outcome's record). */
static const hs_rj_field EVENT_JSON[] = {
    {"id", "id", RJ_STR},
    {"seq", "seq", RJ_INT},
    {"elevationId", "elevation_id", RJ_STR},
    {"method", "method", RJ_STR},
    {"path", "path", RJ_STR},
    {"body", "body", RJ_JSON_CLEAN},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

/* The elevation's requests (rows of kind "request" of events, keyed by elevation_id in reqs),
 * each with its answer's status and time (the last "outcome" whose ref_seq is its seq). */
static void write_session_events(jw *w, const hs_rj *b, const db_res *ev, const staff_keyed *reqs, int nreqs,
                                 const staff_keyed *resps, int nresps, const char *elevation_id) {
  jw_key(w, "events");
  jw_arr(w);
  for (int k = staff_keyed_first(reqs, nreqs, elevation_id); k < nreqs && !strcmp(reqs[k].key, elevation_id); k++) {
    int i = reqs[k].row, last = -1;
    const char *seq = db_field(ev, i, "seq");
    for (int j = staff_keyed_first(resps, nresps, seq); j < nresps && !strcmp(resps[j].key, seq); j++)
      last = resps[j].row;
    jw_obj(w);
    hs_rj_members(w, b, ev, i);
    jw_key(w, "status");
    last < 0 ? jw_null(w) : jw_int(w, db_int(ev, last, db_col(ev, "status")));
    jw_key(w, "completedAt");
    last < 0 ? jw_null(w) : jw_cell_iso(w, db_field(ev, last, "created_at"));
    jw_obj_end(w);
  }
  jw_arr_end(w);
}

/* A page of the staff members (STAFF_KEYSET), each with every elevation and its events. */
err_t api_staff_audit_sessions(hs_req *req) {
  staff_expire_elevations();
  db_page pg;
  db_res *staff, *elevations, *events;
  err_t e = hs_page_begin(req, &STAFF_KEYSET, NULL, 0, &pg);
  if (!e) e = staff_store_list(&req->arena, &pg, &staff);
  if (!e) e = hs_page_end(req, &pg, staff);
  if (!e && (staff_store_elevations_all(&req->arena, &elevations) != ERR_OK ||
             audit_sessions_events(&req->arena, &events) != ERR_OK))
    e = ERR_INTERNAL;
  if (e != ERR_OK) return e;
  arena *a = &req->arena;
  int nown, nreqs, nresps;
  staff_keyed *owned = staff_keyed_rows(a, elevations, "staff_id", NULL, &nown);
  staff_keyed *reqs = staff_keyed_rows(a, events, "elevation_id", "request", &nreqs);
  staff_keyed *resps = staff_keyed_rows(a, events, "ref_seq", "outcome", &nresps);
  hs_rj *sb = hs_rj_bind(a, STAFF_JSON, staff), *eb = hs_rj_bind(a, ELEVATION_JSON, elevations);
  hs_rj *vb = hs_rj_bind(a, EVENT_JSON, events);
  jw *w = hs_jw(req, 256 * (size_t)(staff->rows + elevations->rows + events->rows + 1));
  jw_arr(w);
  for (int i = 0; i < staff->rows; i++) {
    const char *id = db_field(staff, i, "id");
    jw_obj(w);
    hs_rj_members(w, sb, staff, i);
    jw_key(w, "sessions");
    jw_arr(w);
    for (int k = staff_keyed_first(owned, nown, id); k < nown && !strcmp(owned[k].key, id); k++) {
      jw_obj(w);
      hs_rj_members(w, eb, elevations, owned[k].row);
      write_session_events(w, vb, events, reqs, nreqs, resps, nresps, db_field(elevations, owned[k].row, "id"));
      jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_obj_end(w);
  }
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

/* ---- GET /staff/audit/me: the caller's own trail ---- */

static void write_kind(jw *w, const db_res *r, int row, const char *cell) {
  (void)r, (void)row;
  jw_str(w, cell && !strcmp(cell, "request") ? "request" : "action");
}

/* One record of the caller's trail: an action, or a request made in an impersonation session. */
static const hs_rj_field AUDIT_RECORD_JSON[] = {
    {"id", "id", RJ_STR},
    {"seq", "seq", RJ_INT},
    {"kind", "kind", RJ_FN, .write = write_kind},
    {"action", "action", RJ_STR},
    {"targetId", "target_id", RJ_STR},
    {"targetRole", "target_role", RJ_STR},
    {"elevationId", "elevation_id", RJ_STR},
    {"method", "method", RJ_STR},
    {"path", "path", RJ_STR},
    {"detail", "body", RJ_JSON_CLEAN},
    {"status", "status", RJ_INT},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

err_t api_staff_audit_me(hs_req *req) {
  return hs_ok_page(req, &AUDIT_ACTOR_KEYSET, 0, audit_of_actor, req->auth.id, AUDIT_RECORD_JSON, 512);
}
