/* The customer's premium features: favorite providers, private notes on providers, the
 * year-to-date spend summary and the seasonal-alert switch. Premium-only routes answer 403
 * premium_required to a customer without premium (USERS_HAS_PREMIUM, the rule that also
 * gates a second saved address); removing a favorite or a note, reading one's notes and
 * switching alerts off are always allowed. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "domain/users/users.h"
#include "domain/users/users_api.h"
#include "domain/users/users_store.h"
#include "ext/storage.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

err_t users_fail(hs_req *req, users_outcome out, const char *needs_premium) {
  switch (out) {
  case USERS_NO_USER: return hs_not_found(req, "User");
  case USERS_NEEDS_PREMIUM: return hs_fail_code(req, ERR_FORBIDDEN, "premium_required", needs_premium);
  case USERS_CHANGED:
  case USERS_FAILED: break;
  }
  return ERR_INTERNAL;
}

static err_t premium_required(hs_req *req) {
  return users_fail(req, USERS_NEEDS_PREMIUM, "This feature requires a premium subscription");
}

/* ERR_OK when the caller has premium; otherwise the request has failed. */
static err_t require_premium(hs_req *req) {
  bool premium = false;
  err_t e = users_store_premium(req->auth.id, &premium);
  if (e) return hs_found_or_fail(req, e, "User");
  return premium ? ERR_OK : premium_required(req);
}

/* A row of users_store_favorites as the favorite's card. */
static const hs_rj_field FAVORITE[] = {
    {"id", "id", RJ_STR},
    {"name", "name", RJ_STR},
    {"companyName", "company_name", RJ_STR},
    {"logoUrl", "logo_url", RJ_URL},
    {"headshots", "headshots", RJ_URLS},
    {"services", "services", RJ_JSON_CLEAN},
    {0},
};

err_t api_users_favorites(hs_req *req) {
  err_t e = require_premium(req);
  return e ? e : hs_ok_page(req, &FAVORITES_KEYSET, 0, users_store_favorites, req->auth.id, FAVORITE, 512);
}

/* The answer to a write about the provider :providerId: { key: value } on success, 404 for an
 * unknown provider. */
static err_t reply_write(hs_req *req, err_t e, const char *key, bool value) {
  return e != ERR_OK ? hs_found_or_fail(req, e, "Provider") : hs_ok_pack(req, "{s:b}", key, value);
}

err_t api_users_add_favorite(hs_req *req) {
  err_t e = require_premium(req);
  if (e != ERR_OK) return e;
  return reply_write(req, users_store_add_favorite(req->auth.id, hs_param(req, "providerId")), "favorited", true);
}

err_t api_users_remove_favorite(hs_req *req) {
  return reply_write(req, users_store_remove_favorite(req->auth.id, hs_param(req, "providerId")), "favorited", false);
}

err_t api_users_pro_notes(hs_req *req) {
  db_res *r;
  err_t e = users_store_pro_notes(&req->arena, req->auth.id, &r);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 128 * (size_t)(r->rows + 1));
  jw_obj(w); /* provider id -> note (ids are generated: nothing to escape) */
  for (int i = 0; i < r->rows; i++) jw_key_str(w, db_field(r, i, "provider_id"), db_field(r, i, "note"));
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

err_t api_users_set_pro_note(hs_req *req) {
  err_t e = require_premium(req);
  if (e != ERR_OK) return e;
  return reply_write(req, users_store_set_pro_note(req->auth.id, hs_param(req, "providerId"), hs_body_str(req, "note")),
                     "ok", true);
}

err_t api_users_delete_pro_note(hs_req *req) {
  return reply_write(req, users_store_delete_pro_note(req->auth.id, hs_param(req, "providerId")), "ok", true);
}

err_t api_users_seasonal_alerts(hs_req *req) {
  bool enabled = json_is_true(json_object_get(req->body, "enabled"));
  users_outcome out = users_store_set_seasonal_alerts(req->auth.id, enabled);
  if (out != USERS_CHANGED) return users_fail(req, out, "Seasonal alerts require a premium subscription");
  return hs_ok_pack(req, "{s:b}", "seasonalAlertsEnabled", enabled);
}

/* ---- GET /users/me/spend-summary ---- */

typedef struct spend {
  const char *key; /* month "YYYY-MM", service or provider id */
  int64_t cents, jobs;
  int row; /* a row naming it (provider details) */
} spend;

/* The entry of key in list (n entries, room for one more), added when missing. */
static spend *entry(spend *list, int *n, const char *key, int row) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(list[i].key, key)) return &list[i];
  list[*n] = (spend){key, 0, 0, row};
  return &list[(*n)++];
}

static int by_total(const void *x, const void *y) {
  const spend *a = x, *b = y;
  if (a->cents != b->cents) return a->cents > b->cents ? -1 : 1;
  return strcmp(a->key, b->key);
}

/* Member name: the n entries of list, each { key_name: key, total, jobs }. */
static void spend_list(jw *w, const char *name, const spend *list, int n, const char *key_name) {
  jw_key(w, name);
  jw_arr(w);
  for (int i = 0; i < n; i++)
    jw_pack(w, "{s:s,s:M,s:I}", key_name, list[i].key, "total", list[i].cents, "jobs", list[i].jobs);
  jw_arr_end(w);
}

err_t api_users_spend_summary(hs_req *req) {
  arena *a = &req->arena;
  err_t e = require_premium(req);
  if (e != ERR_OK) return e;
  char iso[25];
  clock_format_iso(clock_now_ms(), iso);
  int64_t year_start;
  clock_parse_iso(arena_printf(a, "%.4s-01-01", iso), &year_start);
  db_res *r;
  if ((e = users_store_spend(a, req->auth.id, year_start, &r)) != ERR_OK) return e;
  size_t cap = sizeof(spend) * (size_t)(r->rows + 1);
  spend *months = arena_alloc(a, cap), *services = arena_alloc(a, cap), *providers = arena_alloc(a, cap);
  int nm = 0, ns = 0, np = 0;
  int64_t total = 0, jobs = 0;
  for (int i = 0; i < r->rows; i++) {
    int64_t cents = strtoll(db_field(r, i, "amount_cents"), NULL, 10);
    int job = !strcmp(db_field(r, i, "kind"), "job"); /* a tip adds money, not a job */
    char month[25];
    clock_format_iso(strtoll(db_field(r, i, "paid_at"), NULL, 10), month);
    spend *m = entry(months, &nm, arena_strndup(a, month, 7), i),
          *s = entry(services, &ns, db_field(r, i, "service"), i);
    m->cents += cents, m->jobs += job, s->cents += cents, s->jobs += job;
    total += cents, jobs += job;
    const char *provider = db_field(r, i, "provider_id");
    if (provider) entry(providers, &np, provider, i)->cents += cents;
  }
  qsort(services, (size_t)ns, sizeof *services, by_total);
  qsort(providers, (size_t)np, sizeof *providers, by_total);
  jw *w = hs_jw(req, 512 + 96 * (size_t)(nm + ns));
  jw_obj(w);
  jw_key(w, "ytdTotal");
  jw_money(w, total);
  jw_key(w, "ytdJobs");
  jw_int(w, jobs);
  spend_list(w, "byMonth", months, nm, "month");
  spend_list(w, "byService", services, ns, "service");
  jw_key(w, "topProvider");
  if (np)
    jw_pack(w, "{s:s,s:s,s:s}", "id", providers[0].key, "name", db_field(r, providers[0].row, "provider_name"),
            "companyName", db_field(r, providers[0].row, "company_name"));
  else
    jw_null(w);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}
