/* The provider's work views (assigned jobs, schedule), weekly availability and Preferred Pro
 * membership. Preferred Pro is one conditional update: of concurrent applications exactly one
 * changes the row and the others answer 409 already_member. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "domain/jobs/jobs.h"
#include "domain/providers/availability.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"
#include "ext/queue.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

err_t api_providers_jobs(hs_req *req) {
  db_page pg;
  db_res *r;
  err_t e = hs_page_rows(req, &PROVIDER_JOBS_KEYSET, 0, prov_store_assigned_jobs, req->auth.id, &pg, &r);
  return e == ERR_OK ? jobs_reply_list(req, r) : e;
}

/* A row of prov_store_schedule as the schedule entry. */
static const hs_rj_field SCHEDULE[] = {
    {"id", "id", RJ_STR},
    {"service", "service", RJ_STR},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"status", "status", RJ_STR},
    {"customerName", "customer_name", RJ_STR},
    {"scheduledAt", "scheduled_at", RJ_ISO},
    {"amount", "amount_cents", RJ_MONEY},
    {0},
};

err_t api_providers_schedule(hs_req *req) {
  return hs_ok_page(req, &SCHEDULE_KEYSET, 0, prov_store_schedule, req->auth.id, SCHEDULE, 256);
}

err_t api_providers_availability(hs_req *req) {
  db_res *r;
  err_t e = prov_store_get(&req->arena, req->auth.id, &r);
  if (e) return hs_found_or_fail(req, e, "Provider");
  jw *w = hs_jw(req, 512);
  availability_jw(w, db_field(r, 0, "availability"));
  return hs_ok_jw(req, w);
}

err_t api_providers_set_availability(hs_req *req) {
  char err[256];
  json_t *week = arena_json(&req->arena, availability_complete(json_object_get(req->body, "availability"), err));
  if (!week) return hs_fail_invalid(req, err);
  char *text = json_dumps(week, JSON_COMPACT);
  if (!text) return ERR_INTERNAL;
  jw *w = hs_jw(req, strlen(text) + 1);
  jw_json(w, text); /* the answer is the week as stored */
  free(text);
  err_t e = prov_store_set_availability(req->auth.id, jw_text(w));
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Provider");
  return e == ERR_OK ? hs_ok_jw(req, w) : e;
}

/* A membership change's answer: the one place its outcomes become HTTP. */
static err_t membership_answer(hs_req *req, membership_outcome out, int64_t ends) {
  switch (out) {
  case MEMBERSHIP_JOINED: return hs_ok_pack(req, "{s:b,s:s}", "ok", 1, "message", "Welcome to Preferred Pro");
  case MEMBERSHIP_RESUMED:
    return hs_ok_pack(req, "{s:b,s:s}", "ok", 1, "message", "Your Preferred Pro membership continues");
  case MEMBERSHIP_CANCELLED:
    return hs_ok_pack(req, "{s:b,s:b,s:T}", "isPremium", 1, "cancelAtMonthEnd", 1, "endsAt", ends);
  case MEMBERSHIP_ALREADY_MEMBER:
    return hs_fail_code(req, ERR_CONFLICT, "already_member", "You are already a Preferred Pro member");
  case MEMBERSHIP_NOT_MEMBER:
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "You are not a Preferred Pro member");
  case MEMBERSHIP_FAILED: break;
  }
  return ERR_INTERNAL;
}

err_t api_providers_preferred_pro(hs_req *req) {
  return membership_answer(req, prov_store_join_preferred_pro(req->auth.id, clock_now_ms()), 0);
}

/* The first instant (epoch ms, UTC) of the month after the one holding now. */
static int64_t next_month_start(int64_t now) {
  time_t t = (time_t)(now / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  tm.tm_mday = 1, tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  if (++tm.tm_mon == 12) tm.tm_mon = 0, tm.tm_year++;
  return (int64_t)timegm(&tm) * 1000;
}

err_t api_providers_preferred_pro_cancel(hs_req *req) {
  int64_t now = clock_now_ms(), ends = 0;
  membership_outcome out = prov_store_cancel_preferred_pro(req->auth.id, now, next_month_start(now), &ends);
  return membership_answer(req, out, ends);
}

/* Hourly: memberships cancelled for a month that is over end (no fee is billed for later
 * months: payouts bills only members whose end has not come). */
bool providers_end_memberships(json_t *payload, char err[256]) {
  (void)payload;
  int ended;
  if (prov_store_end_preferred_pro(clock_now_ms(), &ended) == ERR_OK) return true;
  snprintf(err, 256, "cannot end the Preferred Pro memberships due");
  return false;
}
