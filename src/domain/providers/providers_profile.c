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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PUBLIC_REVIEWS 20

/* "Casey T." from "Casey Tran", "Casey" from "Casey": the first word and the first character
 * (UTF-8) of the last. A deleted account is "Deleted account". */
static json_t *reviewer_name(arena *a, const char *name, bool deleted) {
  if (deleted) return json_string("Deleted account");
  if (!name) return json_null();
  const char *first = name + strspn(name, " "), *last = NULL;
  size_t first_len = strcspn(first, " ");
  for (const char *p = first + first_len; *(p += strspn(p, " "));) last = p, p += strcspn(p, " ");
  if (!last) return json_stringn(first, first_len);
  unsigned char c = (unsigned char)*last;
  size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (strnlen(last, n) < n) n = 1;
  return json_string(arena_printf(a, "%.*s %.*s.", (int)first_len, first, (int)n, last));
}

static json_t *reviews_json(arena *a, const db_res *r) {
  json_t *out = json_array();
  for (int i = 0; i < r->rows; i++)
    json_array_append_new(
        out,
        json_pack("{s:s,s:I,s:o,s:o,s:o,s:o}", "id", db_field(r, i, "id"), "rating",
                  (json_int_t)db_int(r, i, db_col(r, "rating")), "comment", jx_str_or_null(db_field(r, i, "comment")),
                  "service", jx_str_or_null(db_field(r, i, "service")), "reviewerName",
                  reviewer_name(a, db_field(r, i, "customer_name"), db_field(r, i, "customer_deleted_at") != NULL),
                  "createdAt", jx_iso_or_null(db_field(r, i, "created_at"))));
  return out;
}

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
  json_t *o = json_object();
  json_object_set_new(o, "id", json_string(db_field(p, 0, "id")));
  json_object_set_new(o, "name", json_string(db_field(p, 0, "name")));
  json_object_set_new(o, "companyName", jx_str_or_null(db_field(p, 0, "company_name")));
  json_object_set_new(o, "headshotUrl", storage_url_json(json_string_value(json_array_get(keys, 0)), URL_TTL_PHOTO));
  json_object_set_new(o, "logoUrl", storage_url_json(db_field(p, 0, "logo_url"), URL_TTL_PHOTO));
  json_object_set_new(o, "services", jx_parse_or(db_field(p, 0, "services"), json_array()));
  json_object_set_new(o, "serviceZips", jx_parse_or(db_field(p, 0, "service_zips"), json_array()));
  json_object_set_new(o, "averageRating", avg ? json_real(round(strtod(avg, NULL) * 100) / 100) : json_null());
  json_object_set_new(o, "totalReviews", json_integer(db_int(stats, 0, db_col(stats, "total"))));
  json_object_set_new(o, "completedJobs", json_integer(db_int(p, 0, db_col(p, "completed_jobs"))));
  json_object_set_new(o, "memberSince", jx_iso_or_null(db_field(p, 0, "created_at")));
  json_object_set_new(o, "preferredPro", jx_bool(db_field(p, 0, "is_premium")));
  json_object_set_new(o, "insured", json_boolean(ins && (!strcmp(ins, "active") || !strcmp(ins, "review"))));
  json_object_set_new(
      o, "verified",
      json_boolean(quotes_provider_verified(headshots, db_field(p, 0, "id_doc_front"), db_field(p, 0, "id_doc_back"))));
  storage_variants_json_set(o); /* the headshot's and the logo's */
  json_object_set_new(o, "reviews", reviews_json(a, reviews));
  if (pg.next) json_object_set_new(o, "reviewsNextCursor", json_string(pg.next));
  return hs_ok(req, o);
}
