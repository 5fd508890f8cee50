/* Customer and provider look-ups for support staff: searches (a literal, case-insensitive
 * substring; at most 100, newest first) and the detail views with jobs, quotes, reviews,
 * payments, the provider's monthly ledger and the elevations that targeted the account.
 *
 * Ledger: sums of recorded money movements by month (UTC). Each job assigned to the provider
 * belongs to the month of its completion, or of its acceptance while not completed; its
 * earnings are the accepted quote's amount (the platform fee is paid by the customer on top).
 * Per month: paidOut (the provider's job and tip transfers paid that month, as they stand after
 * refunds), inHold (job and tip transfers captured that month and not paid yet: scheduled,
 * waiting for the payout account, held by a report, or failed), pendingCapture (the earnings of
 * the month's jobs whose current payment is an authorization not captured yet), grossEarnings
 * (their sum), premiumFeeDeducted (39 when the provider is Preferred Pro, for months from its
 * premiumSince on, whether already taken from a transfer or still owed) and netEarnings (gross
 * minus the fee). Cancelled jobs count for nothing. Only a job's current payment counts. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers.h"
#include "domain/quotes/quotes.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

void staff_expire_elevations(void) {
  if (staff_store_expire_elevations() != ERR_OK) log_msg(LOG_ERROR, "deactivating lapsed elevations failed");
}

static const hs_rj_field CUSTOMER_ROW[] = {
    {"id", "id", RJ_STR},
    {"name", "name", RJ_STR},
    {"email", "email", RJ_STR},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {"processorCustomerId", "processor_customer_id", RJ_STR},
    {0},
};

static json_t *provider_row_json(const db_res *r, int i) {
  return json_pack(
      "{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", db_field(r, i, "id"), "name", db_field(r, i, "name"), "email",
      db_field(r, i, "email"), "companyName", jx_str_or_null(db_field(r, i, "company_name")), "services",
      jx_parse_or(db_field(r, i, "services"), json_array()), "serviceZips",
      jx_parse_or(db_field(r, i, "service_zips"), json_array()), "isPremium", jx_bool(db_field(r, i, "is_premium")),
      "premiumSince", jx_iso_or_null(db_field(r, i, "premium_since")), "premiumBilledMonth",
      jx_str_or_null(db_field(r, i, "premium_billed_month")), "createdAt",
      jx_iso_or_null(db_field(r, i, "created_at")));
}

err_t api_staff_customers(hs_req *req) {
  staff_expire_elevations();
  return hs_ok_page(req, &CUSTOMERS_KEYSET, SEARCH_CAP, staff_store_search_customers, hs_query_str(req, "q"),
                    CUSTOMER_ROW, 256);
}

err_t api_staff_providers(hs_req *req) {
  db_page pg;
  db_res *r;
  staff_expire_elevations();
  err_t e =
      hs_page_rows(req, &PROVIDERS_KEYSET, SEARCH_CAP, staff_store_search_providers, hs_query_str(req, "q"), &pg, &r);
  if (e != ERR_OK) return e;
  json_t *list = json_array();
  for (int i = 0; i < r->rows; i++) json_array_append_new(list, provider_row_json(r, i));
  return hs_ok(req, list);
}

static json_t *review_json(const db_res *r, int i) {
  return json_pack("{s:s,s:s,s:s,s:I,s:o,s:o}", "id", db_field(r, i, "id"), "jobId", db_field(r, i, "job_id"),
                   "providerId", db_field(r, i, "provider_id"), "rating", (json_int_t)db_int(r, i, db_col(r, "rating")),
                   "comment", jx_str_or_null(db_field(r, i, "comment")), "createdAt",
                   jx_iso_or_null(db_field(r, i, "created_at")));
}

/* A payments row as staff see it, with its refunds (refunds: rows of staff_store_refunds_of). */
static json_t *payment_json(const db_res *r, int i, const db_res *refunds) {
  json_t *list = json_array();
  const char *id = db_field(r, i, "id"), *dispute = db_field(r, i, "dispute_json");
  for (int k = 0; k < refunds->rows; k++)
    if (!strcmp(db_field(refunds, k, "payment_id"), id))
      json_array_append_new(
          list, json_pack("{s:s,s:o,s:s,s:s,s:s,s:s,s:o,s:o,s:o}", "id", db_field(refunds, k, "id"), "amount",
                          jx_money(db_int(refunds, k, db_col(refunds, "amount_cents"))), "reason",
                          db_field(refunds, k, "reason"), "source", db_field(refunds, k, "source"), "providerShare",
                          db_field(refunds, k, "provider_share"), "status", db_field(refunds, k, "status"),
                          "failureReason", jx_str_or_null(db_field(refunds, k, "failure_reason")), "staffId",
                          jx_str_or_null(db_field(refunds, k, "staff_id")), "createdAt",
                          jx_iso_or_null(db_field(refunds, k, "created_at"))));
  return json_pack(
      "{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", id, "jobId", db_field(r, i, "job_id"), "kind",
      db_field(r, i, "kind"), "status", db_field(r, i, "status"), "amount",
      jx_money(db_int(r, i, db_col(r, "amount_cents"))), "refundedAmount",
      jx_money(db_int(r, i, db_col(r, "refunded_cents"))), "processorPaymentIntentId",
      jx_str_or_null(db_field(r, i, "processor_payment_intent_id")), "failureReason",
      jx_str_or_null(db_field(r, i, "failure_reason")), "releasedAt", jx_iso_or_null(db_field(r, i, "released_at")),
      "createdAt", jx_iso_or_null(db_field(r, i, "created_at")), "updatedAt",
      jx_iso_or_null(db_field(r, i, "updated_at")), "lostAmount", jx_money(db_int(r, i, db_col(r, "lost_cents"))),
      "dispute", dispute ? jx_parse_or(dispute, json_null()) : json_null(), "refunds", list);
}

/* The Job JSON of every row of jobs, each with its quotes, review and payment, as a new
 * array. */
static err_t detailed_jobs(hs_req *req, bool provider, const char *id, const db_res *jobs, json_t **out) {
  db_res *q, *rv;
  if (staff_store_quotes_of(&req->arena, provider, id, &q) != ERR_OK ||
      staff_store_reviews_of(&req->arena, provider, id, &rv) != ERR_OK)
    return ERR_INTERNAL;
  json_t *quotes = arena_json(&req->arena, json_object()), *reviews = arena_json(&req->arena, json_object());
  for (int i = 0; i < q->rows; i++) {
    const char *job = db_field(q, i, "job_id");
    json_t *list = json_object_get(quotes, job);
    if (!list) json_object_set_new(quotes, job, list = json_array());
    json_array_append_new(list, quotes_json(q, i));
  }
  for (int i = 0; i < rv->rows; i++) json_object_set_new(reviews, db_field(rv, i, "job_id"), review_json(rv, i));
  *out = json_array();
  for (int i = 0; i < jobs->rows; i++) {
    const char *job = db_field(jobs, i, "id");
    json_t *o = jobs_json(jobs, i), *list = json_object_get(quotes, job), *review = json_object_get(reviews, job);
    json_object_set_new(o, "quotes", list ? json_incref(list) : json_array());
    json_object_set_new(o, "review", review ? json_incref(review) : json_null());
    json_object_set_new(o, "payment", payments_job_json(job, "job"));
    json_array_append_new(*out, o);
  }
  return ERR_OK;
}

static err_t target_elevations(hs_req *req, const char *id, const char *role, json_t **out) {
  db_res *r;
  if (staff_store_elevations_of_target(&req->arena, id, role, &r) != ERR_OK) return ERR_INTERNAL;
  *out = json_array();
  for (int i = 0; i < r->rows; i++) json_array_append_new(*out, elevation_json(r, i));
  return ERR_OK;
}

static json_t *customer_json(const db_res *r) {
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", db_field(r, 0, "id"), "email",
                   db_field(r, 0, "email"), "name", db_field(r, 0, "name"), "address", db_field(r, 0, "address"), "zip",
                   db_field(r, 0, "zip"), "lat", jx_real_or_null(db_field(r, 0, "lat")), "lng",
                   jx_real_or_null(db_field(r, 0, "lng")), "isPremium", jx_bool(db_field(r, 0, "is_premium")),
                   "premiumSince", jx_iso_or_null(db_field(r, 0, "premium_since")), "processorCustomerId",
                   jx_str_or_null(db_field(r, 0, "processor_customer_id")), "processorSubscriptionId",
                   jx_str_or_null(db_field(r, 0, "processor_subscription_id")), "seasonalAlertsEnabled",
                   jx_bool(db_field(r, 0, "seasonal_alerts_enabled")), "createdAt",
                   jx_iso_or_null(db_field(r, 0, "created_at")), "updatedAt",
                   jx_iso_or_null(db_field(r, 0, "updated_at")));
}

err_t api_staff_customer(hs_req *req) {
  const char *id = hs_param(req, "id");
  staff_expire_elevations();
  db_res *user, *jobs, *pays;
  err_t e = staff_store_customer(&req->arena, id, &user);
  if (e) return hs_found_or_fail(req, e, "Customer");
  json_t *job_list, *elevations;
  if (staff_store_jobs_of(&req->arena, false, id, &jobs) != ERR_OK ||
      detailed_jobs(req, false, id, jobs, &job_list) != ERR_OK)
    return ERR_INTERNAL;
  arena_json(&req->arena, job_list);
  db_res *refunds;
  if (staff_store_payments_of(&req->arena, id, &pays) != ERR_OK ||
      staff_store_refunds_of(&req->arena, id, &refunds) != ERR_OK ||
      target_elevations(req, id, "user", &elevations) != ERR_OK)
    return ERR_INTERNAL;
  json_t *payments = json_array();
  for (int i = 0; i < pays->rows; i++) json_array_append_new(payments, payment_json(pays, i, refunds));
  return hs_ok(req, json_pack("{s:o,s:O,s:o,s:o}", "user", customer_json(user), "jobs", job_list, "payments", payments,
                              "elevations", elevations));
}

/* ---- the provider's ledger ---- */

typedef struct ledger_month {
  char month[8]; /* YYYY-MM */
  int jobs;
  int64_t paid, hold, pending, netted;
} ledger_month;

static void month_of(int64_t ms, char out[8]) {
  char iso[25];
  clock_format_iso(ms, iso);
  memcpy(out, iso, 7);
  out[7] = 0;
}

static ledger_month *month_slot(ledger_month *months, int *n, const char *month) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(months[i].month, month)) return &months[i];
  ledger_month *m = &months[(*n)++];
  memset(m, 0, sizeof *m);
  memcpy(m->month, month, 8);
  return m;
}

static int newest_first(const void *a, const void *b) {
  return strcmp(((const ledger_month *)b)->month, ((const ledger_month *)a)->month);
}

static int64_t cell_int(const db_res *r, int i, const char *name) {
  const char *v = db_field(r, i, name);
  return v ? strtoll(v, NULL, 10) : 0;
}

static bool status_in(const char *status, const char *const *set) {
  for (; *set; set++)
    if (!strcmp(status, *set)) return true;
  return false;
}

/* Fills the ledger (newest month first), the anticipated jobs and their total from the jobs
 * and the provider's transfers (moves: payouts_provider_records). */
static json_t *provider_ledger(arena *a, const db_res *jobs, const db_res *moves, json_t *profile, int *anticipated,
                               int64_t *anticipated_cents) {
  static const char *const open_work[] = {"ACCEPTED", "ON_THE_WAY", "IN_PROGRESS", NULL};
  ledger_month *months = arena_alloc(a, sizeof *months * (size_t)(jobs->rows + moves->rows + 1));
  int n = 0;
  char month[8];
  *anticipated = 0, *anticipated_cents = 0;
  for (int i = 0; i < jobs->rows; i++) {
    const char *status = db_field(jobs, i, "status"), *pay = db_field(jobs, i, "payment_status");
    if (!strcmp(status, "CANCELLED")) continue;
    int64_t earned = cell_int(jobs, i, "earned_cents");
    int64_t when = cell_int(jobs, i, "completed_at");
    if (!when) when = cell_int(jobs, i, "accepted_at");
    if (!when) when = cell_int(jobs, i, "created_at");
    month_of(when, month);
    ledger_month *m = month_slot(months, &n, month);
    m->jobs++;
    if (pay && !strcmp(pay, "AUTHORIZED")) m->pending += earned;
    if (status_in(status, open_work)) (*anticipated)++, *anticipated_cents += earned;
  }
  for (int i = 0; i < moves->rows; i++) { /* paid: in the month it was paid; unpaid: of its capture */
    const char *status = db_field(moves, i, "status");
    int64_t amount = cell_int(moves, i, "amount_cents");
    bool paid = payouts_paid(status);
    if (!paid && !payouts_unpaid(status)) continue; /* cancelled: nothing */
    month_of(cell_int(moves, i, paid ? "paid_at" : "created_at"), month);
    ledger_month *m = month_slot(months, &n, month);
    *(paid ? &m->paid : &m->hold) += amount;
    if (paid) m->netted += cell_int(moves, i, "netted_cents");
  }
  const char *since = json_string_value(json_object_get(profile, "premiumSince"));
  int64_t since_ms = 0;
  bool premium = json_is_true(json_object_get(profile, "isPremium")) && since && clock_parse_iso(since, &since_ms);
  char premium_month[8] = "", now_month[8];
  if (premium) {
    month_of(since_ms, premium_month);
    month_of(clock_now_ms(), now_month);
    month_slot(months, &n, now_month); /* the fee is owed this month even without jobs */
  }
  qsort(months, (size_t)n, sizeof *months, newest_first);
  json_t *ledger = json_array();
  for (int i = 0; i < n; i++) {
    const ledger_month *m = &months[i];
    int64_t gross = m->paid + m->hold + m->pending;
    int64_t fee = premium && strcmp(m->month, premium_month) >= 0 ? PAYOUTS_PREMIUM_FEE_CENTS : 0;
    json_array_append_new(ledger, json_pack("{s:s,s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "month", m->month, "jobs", m->jobs,
                                            "paidOut", jx_money(m->paid), "inHold", jx_money(m->hold), "pendingCapture",
                                            jx_money(m->pending), "grossEarnings", jx_money(gross),
                                            "premiumFeeDeducted", jx_money(fee), "netEarnings", jx_money(gross - fee),
                                            "netted", jx_money(m->netted)));
  }
  return ledger;
}

err_t api_staff_provider(hs_req *req) {
  const char *id = hs_param(req, "id");
  staff_expire_elevations();
  json_t *profile = arena_json(&req->arena, providers_profile_json(&req->arena, id));
  if (!profile) return hs_not_found(req, "Provider");
  db_res *jobs, *moves;
  json_t *job_list, *elevations;
  if (staff_store_jobs_of(&req->arena, true, id, &jobs) != ERR_OK ||
      payouts_provider_records(&req->arena, id, &moves) != ERR_OK ||
      detailed_jobs(req, true, id, jobs, &job_list) != ERR_OK)
    return ERR_INTERNAL;
  arena_json(&req->arena, job_list);
  if (target_elevations(req, id, "provider", &elevations) != ERR_OK) return ERR_INTERNAL;
  int anticipated;
  int64_t anticipated_cents, owed, fees_owed;
  if (payouts_owed(&req->arena, id, &owed, &fees_owed) != ERR_OK) return ERR_INTERNAL;
  json_t *ledger = provider_ledger(&req->arena, jobs, moves, profile, &anticipated, &anticipated_cents);
  return hs_ok(req, json_pack("{s:O,s:O,s:o,s:i,s:o,s:o,s:o}", "provider", profile, "jobs", job_list, "ledger", ledger,
                              "anticipatedJobs", anticipated, "anticipatedTotal", jx_money(anticipated_cents),
                              "balance", jx_money(-owed), "elevations", elevations));
}
