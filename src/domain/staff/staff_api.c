/* Staff accounts: login (12-hour staff tokens), the caller's own record, the
 * administrator's management routes (list, create, impersonate a staff member), and the
 * operator's command line (create or update, disable, enable). Passwords go through the auth
 * domain's bounded hashing pool, with the same answers as the customer logins: one 401 for an
 * unknown email, a wrong password and a disabled member, after the same hashing. */
#include "domain/staff/staff_api.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/staff/staff.h"
#include "domain/staff/staff_store.h"
#include "ext/password.h"
#include "ext/token.h"
#include "http/paging.h"
#include <stdlib.h>
#include <string.h>

const hs_rj_field STAFF_JSON[] = {
    {"id", "id", RJ_STR},
    {"name", "name", RJ_STR},
    {"email", "email", RJ_STR},
    {"role", "role", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
const hs_rj_field STAFF_IDENTITY_JSON[] = {
    {"id", "id", RJ_STR}, {"name", "name", RJ_STR}, {"email", "email", RJ_STR}, {"role", "role", RJ_STR}, {0},
};

err_t staff_fail(hs_req *req, staff_outcome out) {
  switch (out) {
  case STAFF_EMAIL_TAKEN: return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_EMAIL_TAKEN, "Email already registered");
  case STAFF_ELEVATION_OPEN:
    return hs_fail(req, ERR_CONFLICT, "An elevation request for this account is already pending, approved or active");
  case STAFF_ELEVATION_REJECTED:
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "Elevation request was rejected");
  case STAFF_REPORT_RESOLVED: return hs_fail(req, ERR_CONFLICT, "This report was already resolved");
  case STAFF_DONE:
  case STAFF_FAILED: break;
  }
  return ERR_INTERNAL;
}

/* {token, staff: StaffIdentity} with a staff token for the member in row 0. */
static err_t reply_staff_token(hs_req *req, const db_res *r) {
  char *token = token_issue(db_field(r, 0, "id"), db_field(r, 0, "role"), true, NULL,
                            db_int(r, 0, db_col(r, "token_gen")), TOKEN_TTL_STAFF);
  if (!token) return ERR_INTERNAL;
  jw *w = hs_jw(req, 512);
  jw_obj(w);
  jw_key_str(w, "token", token);
  free(token);
  jw_key(w, "staff");
  hs_rj_object(w, hs_rj_bind(&req->arena, STAFF_IDENTITY_JSON, r), r, 0);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

err_t api_staff_login(hs_req *req) {
  if (auth_refuse_when_busy(req) != ERR_OK) return req->err;
  db_res *r;
  if (staff_store_find_email(&req->arena, hs_body_str(req, "email"), &r) != ERR_OK) return ERR_INTERNAL;
  bool usable = r->rows && !db_field(r, 0, "disabled_at"); /* a disabled member answers as a wrong password */
  err_t e = auth_check_login(req, LOGIN_STAFF, hs_body_str(req, "email"), hs_body_str(req, "password"),
                             usable ? db_field(r, 0, "password_hash") : NULL);
  return e == ERR_OK ? reply_staff_token(req, r) : e;
}

err_t api_staff_logout(hs_req *req) {
  err_t e = auth_end_caller_token(req);
  return e ? e : hs_reply(req, 204, NULL);
}

err_t api_staff_me(hs_req *req) {
  db_res *r;
  err_t e = staff_store_get(&req->arena, req->auth.id, &r);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Staff member");
  return e == ERR_OK ? hs_ok_row(req, STAFF_JSON, r) : e;
}

err_t api_staff_list(hs_req *req) {
  db_page pg;
  db_res *r;
  err_t e = hs_page_begin(req, &STAFF_KEYSET, NULL, 0, &pg);
  if (!e) e = staff_store_list(&req->arena, &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  return e == ERR_OK ? hs_ok_rows(req, STAFF_JSON, r, 160) : e;
}

err_t api_staff_create(hs_req *req) {
  const char *name = hs_body_str(req, "name"), *email = hs_body_str(req, "email"), *role = hs_body_str(req, "role");
  db_res *r;
  if (staff_store_find_email(&req->arena, email, &r) != ERR_OK) return ERR_INTERNAL;
  if (r->rows) return staff_fail(req, STAFF_EMAIL_TAKEN);
  char hash[128], id[ID_LEN + 1];
  err_t e = auth_hash_password(req, hs_body_str(req, "password"), hash);
  if (e != ERR_OK) return e;
  id_new(id);
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s,s:s}", "name", name, "email", email, "role", role));
  audit_action act = {req->auth.id, req->auth.role, "staff.create", id, "staff", detail};
  staff_outcome out = staff_store_insert(id, name, email, hash, role, &act);
  if (out != STAFF_DONE) return staff_fail(req, out);
  if (staff_store_get(&req->arena, id, &r) != ERR_OK) return ERR_INTERNAL;
  return hs_ok_row(req, STAFF_JSON, r);
}

json_t *staff_cli_check(const char *name, const char *email, const char *role, const char *password, char msg[320]) {
  json_t *input = json_pack("{s:s?,s:s?,s:s?,s:s?}", "name", name, "email", email, "password", password, "role", role);
  char err[256];
  json_t *body = hs_validate(&staff_create_schema, input, false, err);
  json_decref(input);
  if (!body) snprintf(msg, 320, "refused: %s", err);
  return body;
}

int staff_cli_save(const json_t *checked, char msg[320]) {
  const char *name = json_string_value(json_object_get(checked, "name")),
             *email = json_string_value(json_object_get(checked, "email")),
             *role = json_string_value(json_object_get(checked, "role"));
  char hash[128];
  if (!password_hash_now(json_string_value(json_object_get(checked, "password")), CFG.bcrypt_cost, hash))
    return snprintf(msg, 320, "the password could not be hashed"), 1;
  json_t *detail = json_pack("{s:s,s:s,s:s}", "name", name, "email", email, "role", role);
  audit_action act = {NULL, "operator-cli", NULL, NULL, "staff", detail};
  bool created = false;
  err_t e = staff_store_save(name, email, hash, role, &act, &created);
  json_decref(detail);
  if (e != ERR_OK) return snprintf(msg, 320, "the staff member could not be saved"), 1;
  snprintf(msg, 320, "staff member %s %s (%s)", email, created ? "created" : "updated", role);
  return 0;
}

bool staff_cli_email(const char *email, char normal[256], char msg[320]) {
  json_t *input = json_pack("{s:s?}", "email", email);
  char err[256];
  json_t *checked = hs_validate(&staff_email_schema, input, false, err);
  json_decref(input);
  if (!checked) return snprintf(msg, 320, "refused: %s", err), false;
  snprintf(normal, 256, "%s", json_string_value(json_object_get(checked, "email")));
  json_decref(checked);
  return true;
}

int staff_cli_set_disabled(const char *normal, bool disable, char msg[320]) {
  audit_action act = {NULL, "operator-cli", disable ? "staff.disable" : "staff.enable", NULL, "staff", NULL};
  bool found = false, changed = false;
  int rc = 0;
  if (staff_store_set_disabled(normal, disable, &act, &found, &changed) != ERR_OK)
    rc = 1, snprintf(msg, 320, "the staff member could not be saved");
  else if (!found)
    rc = 1, snprintf(msg, 320, "no staff member has the email %s", normal);
  else
    snprintf(msg, 320, "staff member %s %s%s", normal, changed ? "" : "was already ", disable ? "disabled" : "enabled");
  return rc;
}

/* Unlocks the account of kind with email: its outcome appended to msg ("; " between two). */
static err_t unlock_one(login_kind kind, const char *email, const char *id, char msg[320]) {
  bool locked = false;
  err_t e = auth_login_unlock(kind, email, &locked);
  if (!e && locked) {
    json_t *detail = json_pack("{s:s}", "email", email);
    audit_action act = {NULL, "operator-cli", "staff.unlock", id, kind == LOGIN_STAFF ? "staff" : "admin", detail};
    e = audit_log(&act);
    json_decref(detail);
  }
  if (e) return e;
  size_t n = strlen(msg);
  snprintf(msg + n, 320 - n, "%s%s %s %s", n ? "; " : "", kind == LOGIN_STAFF ? "staff member" : "administrator", email,
           locked ? "unlocked" : "was not locked");
  return ERR_OK;
}

int staff_cli_unlock(const char *normal, char msg[320]) {
  arena a;
  arena_init(&a);
  db_res *r;
  bool admin = false;
  msg[0] = 0;
  err_t e = staff_store_find_email(&a, normal, &r);
  if (!e) e = auth_admin_exists(normal, &admin);
  int rc = 0;
  if (!e && !r->rows && !admin) {
    rc = 1, snprintf(msg, 320, "no staff member or administrator has the email %s", normal);
  } else {
    if (!e && r->rows) e = unlock_one(LOGIN_STAFF, normal, db_field(r, 0, "id"), msg);
    if (!e && admin) e = unlock_one(LOGIN_ADMIN, normal, NULL, msg);
    if (e) rc = 1, snprintf(msg, 320, "the account could not be unlocked");
  }
  arena_fini(&a);
  return rc;
}

err_t api_staff_impersonate_staff(hs_req *req) {
  db_res *r;
  err_t e = staff_store_get(&req->arena, hs_body_str(req, "staffId"), &r);
  if (e) return hs_found_or_fail(req, e, "Staff member");
  audit_action act = {req->auth.id, req->auth.role, "admin.impersonate_staff", db_field(r, 0, "id"), "staff", NULL};
  if (audit_log(&act) != ERR_OK) return ERR_INTERNAL;
  return reply_staff_token(req, r);
}
