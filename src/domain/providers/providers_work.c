/* The provider's work views (assigned jobs, schedule), weekly availability and Preferred Pro
 * membership. Preferred Pro is one conditional update: of concurrent applications exactly one
 * changes the row and the others answer 409 already_member. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "domain/jobs/jobs.h"
#include "domain/providers/availability.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"
#include <stdlib.h>

/* Answers the caller's rows (load) as an array of row_json shapes. */
static err_t reply_rows(hs_req *req, err_t (*load)(arena *, const char *, db_res **),
                        json_t *(*row_json)(const db_res *, int)) {
  db_res *r;
  err_t e = load(&req->arena, req->auth.id, &r);
  if (e != ERR_OK) return e;
  json_t *list = json_array();
  for (int i = 0; i < r->rows; i++) json_array_append_new(list, row_json(r, i));
  return hs_ok(req, list);
}

err_t api_providers_jobs(hs_req *req) { return reply_rows(req, prov_store_assigned_jobs, jobs_json); }

/* One row of prov_store_schedule as the schedule entry. */
static json_t *schedule_json(const db_res *r, int i) {
  const char *amount = db_field(r, i, "amount_cents");
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:o}", "id", db_field(r, i, "id"), "service",
                   db_field(r, i, "service"), "address", db_field(r, i, "address"), "zip", db_field(r, i, "zip"),
                   "status", db_field(r, i, "status"), "customerName", jx_str_or_null(db_field(r, i, "customer_name")),
                   "scheduledAt", jx_iso_or_null(db_field(r, i, "scheduled_at")), "amount",
                   amount ? jx_money(strtoll(amount, NULL, 10)) : json_null());
}

err_t api_providers_schedule(hs_req *req) { return reply_rows(req, prov_store_schedule, schedule_json); }

err_t api_providers_availability(hs_req *req) {
  db_res *r;
  err_t e = prov_store_get(&req->arena, req->auth.id, &r);
  if (e == ERR_NOT_FOUND) return hs_fail(req, e, "Provider not found");
  if (e != ERR_OK) return e;
  return hs_ok(req, availability_json(db_field(r, 0, "availability")));
}

err_t api_providers_set_availability(hs_req *req) {
  char err[256];
  json_t *week = arena_json(&req->arena, availability_complete(json_object_get(req->body, "availability"), err));
  if (!week) return hs_fail(req, ERR_BAD_REQUEST, err);
  char *text = json_dumps(week, JSON_COMPACT);
  err_t e = prov_store_set_availability(req->auth.id, text);
  free(text);
  if (e == ERR_NOT_FOUND) return hs_fail(req, e, "Provider not found");
  return e == ERR_OK ? hs_ok(req, json_incref(week)) : e;
}

err_t api_providers_preferred_pro(hs_req *req) {
  err_t e = prov_store_join_preferred_pro(req->auth.id, clock_now_ms());
  if (e == ERR_CONFLICT) return hs_fail_code(req, e, "already_member", "You are already a Preferred Pro member");
  if (e != ERR_OK) return e;
  return hs_ok(req, json_pack("{s:b,s:s}", "ok", 1, "message", "Welcome to Preferred Pro"));
}
