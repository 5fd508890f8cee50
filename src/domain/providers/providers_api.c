/* Handlers for /providers/me and its uploads. Keys are stored; URLs are signed when a
 * response is built, so a document URL is always fresh and short-lived. */
#include "domain/providers/providers_api.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/providers/availability.h"
#include "domain/providers/providers.h"
#include "domain/providers/providers_store.h"
#include "domain/shapes.h"
#include "ext/storage.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

static void write_week(jw *w, const db_res *r, int row, const char *cell) {
  (void)r, (void)row;
  availability_jw(w, cell);
}

bool providers_premium_now(const db_res *r, int row) {
  const char *v = db_field(r, row, "is_premium"), *ends = db_field(r, row, "premium_ends_at");
  return v && !strcmp(v, "1") && (!ends || strtoll(ends, NULL, 10) > clock_now_ms());
}

/* is_premium, false once premium_ends_at passed: a cancelled membership is over at its end. */
static void write_premium(jw *w, const db_res *r, int row, const char *cell) {
  (void)cell;
  jw_bool(w, providers_premium_now(r, row));
}

const hs_rj_field PROVIDERS_PROFILE_JSON[] = {
    {"id", "id", RJ_STR},
    {"email", "email", RJ_STR},
    {"", "", RJ_INCLUDE, SHAPE_PROVIDER_CONTACT}, /* name, phone, companyName, ... */
    {"services", "services", RJ_LIST},
    {"serviceZips", "service_zips", RJ_LIST},
    {"headshots", "headshots", RJ_URLS},
    {"idDocFront", "id_doc_front", RJ_URL_DOC},
    {"idDocBack", "id_doc_back", RJ_URL_DOC},
    {"availability", "availability", RJ_FN, .write = write_week},
    {"isPremium", "is_premium", RJ_FN, .write = write_premium},
    {"premiumSince", "premium_since", RJ_ISO},
    {"preferredProAppliedAt", "preferred_pro_applied_at", RJ_ISO},
    {"premiumBilledMonth", "premium_billed_month", RJ_STR},
    {"premiumEndsAt", "premium_ends_at", RJ_ISO},
    {"idCheckStatus", "id_check_status", RJ_STR},
    {"idCheckName", "id_check_name", RJ_STR},
    {"idCheckDOB", "id_check_dob", RJ_STR},
    {"idCheckExpiry", "id_check_expiry", RJ_STR},
    {"idCheckState", "id_check_state", RJ_STR},
    {"idCheckFlags", "id_check_flags", RJ_LIST},
    {"idCheckAt", "id_check_at", RJ_ISO},
    {"insDocUrl", "ins_doc_url", RJ_URL_DOC},
    {"insCheckStatus", "ins_check_status", RJ_STR},
    {"insCheckCarrier", "ins_check_carrier", RJ_STR},
    {"insCheckPolicy", "ins_check_policy", RJ_STR},
    {"insCheckEffective", "ins_check_effective", RJ_STR},
    {"insCheckExpiry", "ins_check_expiry", RJ_STR},
    {"insCheckCoverage", "ins_check_coverage", RJ_STR},
    {"insCheckFlags", "ins_check_flags", RJ_LIST},
    {"insCheckAt", "ins_check_at", RJ_ISO},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

err_t providers_profile_row(arena *a, const char *provider_id, db_res **row) {
  return prov_store_get(a, provider_id, row);
}

/* ---- the account's part (domain/domain.h) ---- */

err_t providers_export_in(db_conn *c, const account_ref *who, account_export *x) {
  if (!who->provider) return ERR_OK;
  db_res *r;
  err_t e = account_read_in(c, x->a, who, PROV_EXPORT_SQL, 1, &r);
  if (e) return e;
  if (r->rows == 0) return ERR_NOT_FOUND; /* deleted meanwhile */
  hs_rj_object(account_export_member(x, "account"), hs_rj_bind(x->a, PROVIDERS_PROFILE_JSON, r), r, 0);
  jw_str(account_export_member(x, "devicePushToken"), db_field(r, 0, "push_token"));
  return ERR_OK;
}

static err_t reply_profile(hs_req *req) {
  db_res *r;
  err_t e = prov_store_get(&req->arena, req->auth.id, &r);
  return e ? hs_found_or_fail(req, e, "Provider") : hs_ok_row(req, PROVIDERS_PROFILE_JSON, r);
}

err_t api_providers_me(hs_req *req) { return reply_profile(req); }

err_t api_providers_update_me(hs_req *req) {
  err_t e = prov_store_update_profile(req->auth.id, req->body);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Provider");
  return e == ERR_OK ? reply_profile(req) : e;
}

/* Answers { member: the signed URL of key } (with insCheckStatus when check_status is given). */
/* {member: key's link} and its variants; with check_status, the insurance document's answer:
 * the specification's two members (the document's variants are in the profile). */
static err_t reply_url(hs_req *req, const char *member, const char *key, int64_t ttl, const char *check_status) {
  jw *w = hs_jw(req, 512);
  int64_t expires = storage_url_expiry(ttl);
  jw_obj(w);
  jw_key(w, member);
  storage_url_jw_at(w, key, expires);
  if (check_status)
    jw_key_str(w, "insCheckStatus", check_status);
  else
    storage_variants_jw(w, key, expires);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* Moves an upload into storage; the key lands in the arena. */
static err_t store_upload(hs_req *req, hs_upload *u, const char **key) {
  char k[STORAGE_KEY_LEN], err[256];
  if (!storage_save(u->path, u->ext, u->mime, k, err)) {
    log_msg(LOG_ERROR, "storing an upload failed: %s", err);
    return hs_fail(req, ERR_INTERNAL, NULL);
  }
  *key = arena_strdup(&req->arena, k);
  return ERR_OK;
}

static hs_upload *only_file(hs_req *req, const char *field) {
  int n;
  hs_upload **files = hs_files(req, field, &n);
  return n ? files[0] : NULL;
}

/* Stores the single file of field and records it with set (which reports the key it
 * replaced); the replaced file is deleted, and the new one too when recording fails. */
static err_t replace_single_file(hs_req *req, const char *field,
                                 err_t (*set)(arena *, const char *, const char *, const char **), const char **key) {
  const char *old = NULL;
  *key = NULL;
  err_t e = store_upload(req, only_file(req, field), key);
  if (e == ERR_OK) e = set(&req->arena, req->auth.id, *key, &old);
  if (e != ERR_OK) {
    storage_delete(*key);
    return hs_found_or_fail(req, e, "Provider");
  }
  storage_delete(old);
  return ERR_OK;
}

err_t api_providers_upload_logo(hs_req *req) {
  const char *key;
  err_t e = replace_single_file(req, "logo", prov_store_set_logo, &key);
  if (e != ERR_OK) return e;
  return reply_url(req, "logoUrl", key, URL_TTL_PHOTO, NULL);
}

typedef struct headshots_change {
  hs_req *req;
  const char *add; /* a key to append, or NULL to remove position index */
  long index;
  const char *removed; /* out: the key removed */
} headshots_change;

static err_t change_headshots(void *ctx, const char *old_json, char **new_json) {
  headshots_change *h = ctx;
  json_t *list = arena_json(&h->req->arena, jx_parse_or(old_json, json_array()));
  if (h->add) {
    json_array_append_new(list, json_string(h->add));
  } else {
    if (h->index < 0 || (size_t)h->index >= json_array_size(list))
      return hs_fail_field(h->req, "index", "Headshot index out of range");
    h->removed = arena_strdup(&h->req->arena, json_string_value(json_array_get(list, (size_t)h->index)));
    json_array_remove(list, (size_t)h->index);
  }
  *new_json = json_dumps(list, JSON_COMPACT);
  return *new_json ? ERR_OK : ERR_INTERNAL;
}

/* Appends add to the caller's headshots, or removes position index (its key in *removed);
 * *row: the provider's row after the edit. */
static err_t edit_headshots(hs_req *req, const char *add, long index, const char **removed, db_res **row) {
  headshots_change h = {req, add, index, NULL};
  err_t e = prov_store_edit_headshots(&req->arena, req->auth.id, change_headshots, &h, row);
  if (e == ERR_NOT_FOUND && req->err == ERR_OK) return hs_not_found(req, "Provider");
  if (!e && (!*row || (*row)->rows == 0)) return hs_not_found(req, "Provider");
  if (removed) *removed = h.removed;
  return e;
}

err_t api_providers_add_headshot(hs_req *req) {
  const char *key = NULL;
  err_t e = store_upload(req, only_file(req, "headshot"), &key);
  if (e != ERR_OK) return e;
  db_res *row;
  if ((e = edit_headshots(req, key, 0, NULL, &row)) != ERR_OK) {
    storage_delete(key);
    return e;
  }
  return hs_ok_row(req, PROVIDERS_PROFILE_JSON, row);
}

err_t api_providers_delete_headshot(hs_req *req) {
  const char *text = hs_param(req, "index"), *removed = NULL;
  char *end;
  long index = strtol(text, &end, 10);
  if (*end || end == text) return hs_fail_invalid(req, "index: must be an integer");
  db_res *row;
  err_t e = edit_headshots(req, NULL, index, &removed, &row);
  if (e != ERR_OK) return e;
  storage_delete(removed);
  return hs_ok_row(req, PROVIDERS_PROFILE_JSON, row);
}

err_t api_providers_upload_id_documents(hs_req *req) {
  hs_upload *front = only_file(req, "front"), *back = only_file(req, "back");
  const char *front_key = NULL, *back_key = NULL, *old_front = NULL, *old_back = NULL;
  db_res *row = NULL;
  err_t e = ERR_OK;
  if (front) e = store_upload(req, front, &front_key);
  if (e == ERR_OK && back) e = store_upload(req, back, &back_key);
  if (e == ERR_OK)
    e = prov_store_set_id_documents(&req->arena, req->auth.id, front_key, back_key, &old_front, &old_back, &row);
  if (e != ERR_OK) {
    storage_delete(front_key), storage_delete(back_key);
    return hs_found_or_fail(req, e, "Provider");
  }
  storage_delete(old_front), storage_delete(old_back);
  /* the answer describes the upload just made, the row as its UPDATE left it (check pending,
   * the last check's fields cleared): a fast background check may already have written its
   * result, which the next GET shows */
  if (!row || row->rows == 0) return hs_not_found(req, "Provider");
  return hs_ok_row(req, PROVIDERS_PROFILE_JSON, row);
}

err_t api_providers_upload_insurance(hs_req *req) {
  const char *key;
  err_t e = replace_single_file(req, "insuranceDoc", prov_store_set_insurance_document, &key);
  if (e != ERR_OK) return e;
  return reply_url(req, "insDocUrl", key, URL_TTL_DOCUMENT, "pending");
}
