/* GODMODE handlers. Every change is recorded in the audit trail (actor: the administrator).
 *
 * Account deletion first voids the account's card holds at the processor (nothing is deleted
 * when the processor cannot be reached), then deletes the rows in one transaction, then the
 * stored files: a file whose deletion fails is logged and left behind, never a row pointing at
 * a missing file. The generator hashes its one shared password once per request and inserts
 * accounts and jobs in transactions of GENERATE_BATCH accounts, so a large run never holds the
 * database's write lock for long. */
#include "domain/admin/admin_api.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/admin/admin.h"
#include "domain/admin/admin_store.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/common.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "domain/shapes.h"
#include "ext/geo.h"
#include "ext/storage.h"
#include "ext/token.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

#define LIST_LIMIT 1000
#define GENERATE_BATCH 100
#define GENERATED_PASSWORD "password123"

err_t api_admin_logout(hs_req *req) {
  err_t e = auth_end_caller_token(req);
  return e ? e : hs_reply(req, 204, NULL);
}

err_t api_admin_login(hs_req *req) {
  err_t e = auth_refuse_when_busy(req);
  if (e != ERR_OK) return e;
  db_res *r;
  if (admin_store_find_email(&req->arena, hs_body_str(req, "email"), &r) != ERR_OK) return ERR_INTERNAL;
  e = auth_check_login(req, LOGIN_ADMIN, hs_body_str(req, "email"), hs_body_str(req, "password"),
                       r->rows ? db_field(r, 0, "password_hash") : NULL);
  if (e != ERR_OK) return e;
  char *token = token_issue(db_field(r, 0, "id"), "admin", false, NULL, 0, TOKEN_TTL_ADMIN);
  if (!token) return ERR_INTERNAL;
  e = hs_ok_pack(req, "{s:s,s:{s:s,s:s}}", "token", token, "admin", "id", db_field(r, 0, "id"), "email",
                 db_field(r, 0, "email"));
  free(token);
  return e;
}

/* The administrator's lists of customers and providers. */
static const hs_rj_field USER_ROW[] = {
    {"", "", RJ_INCLUDE, SHAPE_CUSTOMER}, {"processorCustomerId", "processor_customer_id", RJ_STR}, {0}};
static const hs_rj_field PROVIDER_ROW[] = {{"", "", RJ_INCLUDE, SHAPE_PROVIDER_ROW}, {"phone", "phone", RJ_STR}, {0}};

err_t api_admin_users(hs_req *req) {
  db_res *u, *p;
  if (admin_store_users(&req->arena, LIST_LIMIT, &u) != ERR_OK ||
      admin_store_providers(&req->arena, LIST_LIMIT, &p) != ERR_OK)
    return ERR_INTERNAL;
  jw *w = hs_jw(req, 320 * (size_t)(u->rows + p->rows + 1));
  jw_obj(w);
  jw_key(w, "users");
  hs_rj_array(w, &req->arena, USER_ROW, u);
  jw_key(w, "providers");
  hs_rj_array(w, &req->arena, PROVIDER_ROW, p);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* The account named by id and role, or 404. */
static err_t load_account(hs_req *req, const char *role, const char *id, account_card *out) {
  err_t e = auth_account_get(&req->arena, role, id, out);
  return hs_found_or_fail(req, e, "Account");
}

err_t api_admin_impersonate(hs_req *req) {
  const char *role = hs_body_str(req, "targetRole");
  account_card acc;
  err_t e = load_account(req, role, hs_body_str(req, "targetId"), &acc);
  if (e != ERR_OK) return e;
  audit_action act = {req->auth.id, "admin", "admin.impersonate", acc.id, role, NULL};
  if (audit_log(&act) != ERR_OK) return ERR_INTERNAL;
  impersonated who = {acc.id, acc.name, acc.email, role, acc.token_gen};
  return common_reply_impersonation(req, &who, NULL, TOKEN_TTL_ADMIN_IMPERSONATION);
}

/* ---- deleting an account ---- */

err_t api_admin_delete_account(hs_req *req) {
  const char *id = hs_param(req, "id"), *role = json_string_value(json_object_get(req->query, "role"));
  account_card acc;
  err_t e = load_account(req, role, id, &acc);
  if (e != ERR_OK) return e;
  db_res *held, *files[3];
  bool provider = !strcmp(role, "provider");
  if (!provider && admin_store_authorized_jobs(&req->arena, id, &held) != ERR_OK) return ERR_INTERNAL;
  for (int i = 0; !provider && i < held->rows; i++)
    if ((e = payments_void_job(db_text(held, i, 0))) != ERR_OK)
      return e == ERR_UNAVAILABLE ? hs_fail(req, e, "Payment processor unavailable") : e;
  if (admin_store_account_files(&req->arena, role, id, files) != ERR_OK) return ERR_INTERNAL;
  json_t *keys = arena_json(&req->arena, json_array());
  for (int f = 0; f < 3; f++)
    for (int i = 0; i < files[f]->rows; i++)
      for (int col = 0; col < files[f]->cols; col++) common_cell_keys(keys, db_text(files[f], i, col));
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s}", "email", acc.email, "name", acc.name));
  audit_action act = {req->auth.id, "admin", "admin.delete_account", id, role, detail};
  e = admin_store_delete_account(role, id, &act);
  if (e) return hs_found_or_fail(req, e, "Account");
  size_t i;
  json_t *k;
  json_array_foreach(keys, i, k) if (!storage_delete(json_string_value(k)))
      log_msg(LOG_WARN, "deleting stored file %s of a deleted account failed", json_string_value(k));
  return hs_ok_pack(req, "{s:b}", "ok", 1);
}

/* ---- generating data ---- */

static int body_int(const hs_req *req, const char *field) {
  return (int)json_integer_value(json_object_get(req->body, field));
}

err_t api_admin_generate(hs_req *req) {
  char hash[128], tag[ID_LEN + 1];
  err_t e = auth_hash_password(req, GENERATED_PASSWORD, hash);
  if (e != ERR_OK) return e;
  id_new(tag);
  tag[9] = 0; /* "c" and 8 random characters keep this run's emails apart from every other run's */
  admin_generation g = {tag + 1, hash, body_int(req, "requestsPerCustomer")};
  int customers = body_int(req, "customers"), professionals = body_int(req, "professionals");
  int made_customers = 0, made_providers = 0, jobs = 0;
  e = ERR_OK;
  for (int i = 0; !e && i < customers; i += GENERATE_BATCH) {
    int to = i + GENERATE_BATCH < customers ? i + GENERATE_BATCH : customers;
    if (!(e = admin_store_generate_customers(&req->arena, &g, i, to, &jobs))) made_customers = to;
  }
  for (int i = 0; !e && i < professionals; i += GENERATE_BATCH) {
    int to = i + GENERATE_BATCH < professionals ? i + GENERATE_BATCH : professionals;
    if (!(e = admin_store_generate_providers(&req->arena, &g, i, to))) made_providers = to;
  }
  json_t *created =
      json_pack("{s:i,s:i,s:i}", "customers", made_customers, "professionals", made_providers, "jobs", jobs);
  audit_action act = {req->auth.id, "admin", "admin.generate", NULL, NULL, arena_json(&req->arena, created)};
  if (audit_log(&act) != ERR_OK || e != ERR_OK) return ERR_INTERNAL;
  return hs_ok_pack(req, "{s:{s:i,s:i,s:i},s:s}", "created", "customers", made_customers, "professionals",
                    made_providers, "jobs", jobs, "note",
                    "Every generated customer and provider signs in with the password " GENERATED_PASSWORD
                    " (emails gen-<run>-c<n>@example.com and gen-<run>-p<n>@example.com).");
}

/* ---- banners ---- */

err_t api_admin_notify(hs_req *req) {
  const char *account_id = hs_body_str(req, "userId"), *role = hs_body_str(req, "role");
  const char *title = hs_body_str(req, "title");
  account_card acc;
  err_t e = load_account(req, role, account_id, &acc);
  if (e != ERR_OK) return e;
  audit_action act = {req->auth.id, "admin", "admin.notify",
                      account_id,   role,    arena_json(&req->arena, json_pack("{s:s}", "title", title))};
  e = admin_store_put_banner(account_id, role, hs_body_str(req, "icon"), title, hs_body_str(req, "body"), &act);
  if (e != ERR_OK) return e;
  return hs_ok(
      req, json_pack("{s:b,s:{s:s,s:s,s:s}}", "ok", 1, "queued", "userId", account_id, "role", role, "title", title));
}
