/* A provider's public profile (GET /providers/:id/profile): what a customer choosing between
 * quotes sees, and nothing private (no email, phone, company address or documents, and the
 * reviewers' names shortened to a first name and an initial). Its reviews come newest first:
 * the newest PUBLIC_REVIEWS, or the page `limit` and `cursor` ask for, the next one announced
 * by the Link header and reviewsNextCursor. */
#include "core/jsonx.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"
#include "domain/quotes/quotes.h"
#include "ext/storage.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PUBLIC_REVIEWS 20

/* "Casey T." from "Casey Tran", "Casey" from "Casey": the first word and the first character
 * (UTF-8) of the last. A deleted account is "Deleted account". */
static void write_reviewer(jw *w, const db_res *r, int row, const char *name) {
  if (db_field(r, row, "customer_deleted_at")) return jw_str(w, "Deleted account");
  if (!name) return jw_null(w);
  const char *first = name + strspn(name, " "), *last = NULL;
  size_t first_len = strcspn(first, " ");
  for (const char *p = first + first_len; *(p += strspn(p, " "));) last = p, p += strcspn(p, " ");
  if (!last) return jw_strn(w, first, first_len);
  unsigned char c = (unsigned char)*last;
  size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (strnlen(last, n) < n) n = 1;
  jw_str(w, arena_printf(w->a, "%.*s %.*s.", (int)first_len, first, (int)n, last));
}

const hs_rj_field PROV_REVIEW_JSON[] = {
    {"id", "id", RJ_STR},           {"rating", "rating", RJ_INT},        {"comment", "comment", RJ_STR},
    {"service", "service", RJ_STR}, {"createdAt", "created_at", RJ_ISO}, {0},
};

/* A review as the public profile shows it: the reviewer's name shortened. */
static const hs_rj_field REVIEW[] = {
    {"", "", RJ_INCLUDE, PROV_REVIEW_JSON}, {"reviewerName", "customer_name", RJ_FN, .write = write_reviewer}, {0}};

/* The members of the public profile read from the provider's row as they are. */
static const hs_rj_field PUBLIC[] = {
    {"id", "id", RJ_STR},
    {"name", "name", RJ_STR},
    {"companyName", "company_name", RJ_STR},
    {"services", "services", RJ_LIST},
    {"serviceZips", "service_zips", RJ_LIST},
    {"completedJobs", "completed_jobs", RJ_INT},
    {"memberSince", "created_at", RJ_ISO},
    {"preferredPro", "is_premium", RJ_BOOL},
    {0},
};

err_t api_providers_public_profile(hs_req *req) {
  arena *a = &req->arena;
  const char *id = hs_param(req, "id");
  db_page pg;
  err_t e = hs_page_begin(req, &REVIEWS_KEYSET, id, PUBLIC_REVIEWS, &pg);
  if (e != ERR_OK) return e;
  /* independent reads: one round trip */
  db_read reads[] = {prov_read_public(a, id), prov_read_review_stats(a, id), prov_read_reviews(a, id, &pg)};
  if ((e = db_to_err(db_query_all(a, reads, 3))) != ERR_OK) return e;
  db_res *p = reads[0].res, *stats = reads[1].res, *reviews = reads[2].res;
  if (p->rows == 0) return hs_not_found(req, "Provider");
  if ((e = hs_page_end(req, &pg, reviews)) != ERR_OK) return e;
  const char *headshots = db_field(p, 0, "headshots"), *avg = db_field(stats, 0, "average");
  json_t *keys = arena_json(a, jx_parse_or(headshots, json_array()));
  const char *ins = db_field(p, 0, "ins_check_status");
  jw *w = hs_jw(req, 1024 + 384 * (size_t)reviews->rows);
  jw_obj(w);
  hs_rj_members(w, hs_rj_bind(a, PUBLIC, p), p, 0);
  /* the headshot (the first) and the logo, linked with one expiry for their variants */
  const char *headshot = json_string_value(json_array_get(keys, 0)), *logo = db_field(p, 0, "logo_url");
  int64_t expires = storage_url_expiry(URL_TTL_PHOTO);
  jw_key(w, "headshotUrl");
  storage_url_jw_at(w, headshot, expires);
  jw_key(w, "logoUrl");
  storage_url_jw_at(w, logo, expires);
  if (storage_has_variants(headshot) || storage_has_variants(logo)) {
    storage_variants_open(w);
    storage_variants_add(w, headshot, expires);
    storage_variants_add(w, logo, expires);
    storage_variants_close(w);
  }
  jw_key(w, "averageRating");
  avg ? jw_real(w, round(strtod(avg, NULL) * 100) / 100) : jw_null(w);
  jw_key(w, "totalReviews");
  jw_int(w, db_int(stats, 0, db_col(stats, "total")));
  jw_key(w, "insured");
  jw_bool(w, ins && (!strcmp(ins, "active") || !strcmp(ins, "review")));
  jw_key(w, "verified");
  jw_bool(w, quotes_provider_verified(headshots, db_field(p, 0, "id_doc_front"), db_field(p, 0, "id_doc_back")));
  jw_key(w, "reviews");
  hs_rj_array(w, a, REVIEW, reviews);
  if (pg.next) jw_key_str(w, "reviewsNextCursor", pg.next);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}
