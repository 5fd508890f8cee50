/* Handlers for /providers/me and its uploads. Keys are stored; URLs are signed when a
 * response is built, so a document URL is always fresh and short-lived. */
#include "domain/providers/providers_api.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/providers/availability.h"
#include "domain/providers/providers.h"
#include "domain/providers/providers_store.h"
#include "ext/storage.h"
#include <stdlib.h>
#include <string.h>

/* The provider profile's members, in order: each from a column of the providers row. */
typedef enum {
  P_STR,      /* a string that is always set */
  P_TEXT,     /* a string or null */
  P_ISO,      /* epoch ms as ISO 8601, or null */
  P_LIST,     /* stored JSON, [] without */
  P_PHOTO,    /* a storage key as a signed photo URL */
  P_PHOTOS,   /* a JSON array of keys as signed photo URLs */
  P_DOCUMENT, /* a storage key as a signed document URL */
  P_WEEK,     /* the weekly availability */
  P_PREMIUM,  /* is_premium, false once premium_ends_at passed: a cancelled membership is over at its end */
} profile_kind;

static const struct {
  const char *key, *column;
  profile_kind kind;
} PROFILE[] = {
    {"id", "id", P_STR},
    {"email", "email", P_STR},
    {"name", "name", P_STR},
    {"phone", "phone", P_TEXT},
    {"companyName", "company_name", P_TEXT},
    {"companyUrl", "company_url", P_TEXT},
    {"insuranceInfo", "insurance_info", P_TEXT},
    {"logoUrl", "logo_url", P_PHOTO},
    {"services", "services", P_LIST},
    {"serviceZips", "service_zips", P_LIST},
    {"headshots", "headshots", P_PHOTOS},
    {"idDocFront", "id_doc_front", P_DOCUMENT},
    {"idDocBack", "id_doc_back", P_DOCUMENT},
    {"availability", "availability", P_WEEK},
    {"isPremium", "is_premium", P_PREMIUM},
    {"premiumSince", "premium_since", P_ISO},
    {"preferredProAppliedAt", "preferred_pro_applied_at", P_ISO},
    {"premiumBilledMonth", "premium_billed_month", P_TEXT},
    {"premiumEndsAt", "premium_ends_at", P_ISO},
    {"idCheckStatus", "id_check_status", P_TEXT},
    {"idCheckName", "id_check_name", P_TEXT},
    {"idCheckDOB", "id_check_dob", P_TEXT},
    {"idCheckExpiry", "id_check_expiry", P_TEXT},
    {"idCheckState", "id_check_state", P_TEXT},
    {"idCheckFlags", "id_check_flags", P_LIST},
    {"idCheckAt", "id_check_at", P_ISO},
    {"insDocUrl", "ins_doc_url", P_DOCUMENT},
    {"insCheckStatus", "ins_check_status", P_TEXT},
    {"insCheckCarrier", "ins_check_carrier", P_TEXT},
    {"insCheckPolicy", "ins_check_policy", P_TEXT},
    {"insCheckEffective", "ins_check_effective", P_TEXT},
    {"insCheckExpiry", "ins_check_expiry", P_TEXT},
    {"insCheckCoverage", "ins_check_coverage", P_TEXT},
    {"insCheckFlags", "ins_check_flags", P_LIST},
    {"insCheckAt", "ins_check_at", P_ISO},
    {"createdAt", "created_at", P_ISO},
};

static json_t *profile_member(db_res *r, const char *column, profile_kind kind) {
  const char *v = db_field(r, 0, column), *ends;
  switch (kind) {
  case P_STR: return json_string(v);
  case P_TEXT: return jx_str_or_null(v);
  case P_ISO: return jx_iso_or_null(v);
  case P_LIST: return jx_parse_or(v, json_array());
  case P_PHOTO: return storage_url_json(v, URL_TTL_PHOTO);
  case P_PHOTOS: return storage_urls_json(v, URL_TTL_PHOTO);
  case P_DOCUMENT: return storage_url_json(v, URL_TTL_DOCUMENT);
  case P_WEEK: return availability_json(v);
  case P_PREMIUM:
    ends = db_field(r, 0, "premium_ends_at");
    return json_boolean(v && !strcmp(v, "1") && (!ends || strtoll(ends, NULL, 10) > clock_now_ms()));
  }
  return NULL;
}

static json_t *profile_from_row(db_res *r) {
  json_t *o = json_object();
  for (size_t i = 0; i < sizeof PROFILE / sizeof *PROFILE; i++)
    json_object_set_new(o, PROFILE[i].key, profile_member(r, PROFILE[i].column, PROFILE[i].kind));
  storage_variants_json_set(o);
  return o;
}

json_t *providers_profile_json(arena *a, const char *provider_id) {
  db_res *r;
  return prov_store_get(a, provider_id, &r) == ERR_OK ? profile_from_row(r) : NULL;
}

/* ---- the account's part (domain/domain.h) ---- */

err_t providers_export_in(db_conn *c, const account_ref *who, account_export *x) {
  if (!who->provider) return ERR_OK;
  db_res *r;
  err_t e = account_read_in(c, x->a, who, PROV_EXPORT_SQL, 1, &r);
  if (e) return e;
  if (r->rows == 0) return ERR_NOT_FOUND; /* deleted meanwhile */
  json_t *p = arena_json(x->a, profile_from_row(r));
  char *text = json_dumps(p, JSON_COMPACT | JSON_REAL_PRECISION(15));
  if (!text) return ERR_INTERNAL;
  jw_raw_value(account_export_member(x, "account"), text, strlen(text));
  free(text);
  jw_str(account_export_member(x, "devicePushToken"), db_field(r, 0, "push_token"));
  return ERR_OK;
}

static err_t reply_profile(hs_req *req) {
  json_t *p = providers_profile_json(&req->arena, req->auth.id);
  return p ? hs_ok(req, p) : hs_not_found(req, "Provider");
}

err_t api_providers_me(hs_req *req) { return reply_profile(req); }

err_t api_providers_update_me(hs_req *req) {
  err_t e = prov_store_update_profile(req->auth.id, req->body);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Provider");
  return e == ERR_OK ? reply_profile(req) : e;
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
  json_t *answer = json_pack("{s:o}", "logoUrl", storage_url_json(key, URL_TTL_PHOTO));
  storage_variants_json_set(answer);
  return hs_ok(req, answer);
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
  return hs_ok(req, profile_from_row(row));
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
  return hs_ok(req, profile_from_row(row));
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
  /* the answer describes the upload just made (the row as it left it): a fast background
   * check may already have written its result, which the next GET shows */
  if (!row || row->rows == 0) return hs_not_found(req, "Provider");
  json_t *p = profile_from_row(row);
  json_object_set_new(p, "idCheckStatus", json_string("pending"));
  json_object_set_new(p, "idCheckFlags", json_array());
  static const char *const cleared[] = {"idCheckName", "idCheckDOB", "idCheckExpiry", "idCheckState", "idCheckAt"};
  for (size_t i = 0; i < sizeof cleared / sizeof *cleared; i++) json_object_set_new(p, cleared[i], json_null());
  return hs_ok(req, p);
}

err_t api_providers_upload_insurance(hs_req *req) {
  const char *key;
  err_t e = replace_single_file(req, "insuranceDoc", prov_store_set_insurance_document, &key);
  if (e != ERR_OK) return e;
  /* the specification's two members: the document's variants are in the profile */
  return hs_ok(
      req, json_pack("{s:o,s:s}", "insDocUrl", storage_url_json(key, URL_TTL_DOCUMENT), "insCheckStatus", "pending"));
}
