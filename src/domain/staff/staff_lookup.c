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
#include "core/log.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers.h"
#include "domain/shapes.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

void staff_expire_elevations(void) {
  if (staff_store_expire_elevations() != ERR_OK) log_msg(LOG_ERROR, "deactivating lapsed elevations failed");
}

static int keyed_cmp(const void *a, const void *b) {
  const staff_keyed *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : x->row - y->row;
}

staff_keyed *staff_keyed_rows(arena *a, const db_res *r, const char *col, const char *kind, int *n) {
  staff_keyed *k = arena_alloc(a, sizeof *k * (size_t)(r->rows + 1));
  *n = 0;
  for (int i = 0; i < r->rows; i++)
    if (db_field(r, i, col) && (!kind || !strcmp(db_field(r, i, "kind"), kind)))
      k[(*n)++] = (staff_keyed){db_field(r, i, col), i};
  qsort(k, (size_t)*n, sizeof *k, keyed_cmp);
  return k;
}

int staff_keyed_first(const staff_keyed *k, int n, const char *key) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (strcmp(k[mid].key, key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
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

static const hs_rj_field PROVIDER_ROW[] = {
    {"", "", RJ_INCLUDE, SHAPE_PROVIDER_ROW},
    {"premiumSince", "premium_since", RJ_ISO},
    {"premiumBilledMonth", "premium_billed_month", RJ_STR},
    {0},
};

err_t api_staff_customers(hs_req *req) {
  staff_expire_elevations();
  return hs_ok_page(req, &CUSTOMERS_KEYSET, SEARCH_CAP, staff_store_search_customers, hs_query_str(req, "q"),
                    CUSTOMER_ROW, 256);
}

err_t api_staff_providers(hs_req *req) {
  staff_expire_elevations();
  return hs_ok_page(req, &PROVIDERS_KEYSET, SEARCH_CAP, staff_store_search_providers, hs_query_str(req, "q"),
                    PROVIDER_ROW, 384);
}

/* A payments row as staff see it (Payment): its export's members and these, with its refunds,
 * each as REFUND. */
static const hs_rj_field PAYMENT[] = {
    {"", "", RJ_INCLUDE, PAYMENTS_ROW_JSON},
    {"lostAmount", "lost_cents", RJ_MONEY},
    {"dispute", "dispute_json", RJ_JSON_CLEAN},
    {0},
};
static const hs_rj_field REFUND[] = {
    {"id", "id", RJ_STR},
    {"amount", "amount_cents", RJ_MONEY},
    {"reason", "reason", RJ_STR},
    {"source", "source", RJ_STR},
    {"providerShare", "provider_share", RJ_STR},
    {"status", "status", RJ_STR},
    {"failureReason", "failure_reason", RJ_STR},
    {"staffId", "staff_id", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

/* The customer's payments, each with its refunds (rows of staff_store_refunds_of). */
static void write_payments(jw *w, arena *a, const db_res *pays, const db_res *refunds) {
  int n;
  staff_keyed *of = staff_keyed_rows(a, refunds, "payment_id", NULL, &n);
  hs_rj *pb = hs_rj_bind(a, PAYMENT, pays), *rb = hs_rj_bind(a, REFUND, refunds);
  jw_key(w, "payments");
  jw_arr(w);
  for (int i = 0; i < pays->rows; i++) {
    const char *id = db_field(pays, i, "id");
    jw_obj(w);
    hs_rj_members(w, pb, pays, i);
    jw_key(w, "refunds");
    jw_arr(w);
    for (int k = staff_keyed_first(of, n, id); k < n && !strcmp(of[k].key, id); k++)
      hs_rj_object(w, rb, refunds, of[k].row);
    jw_arr_end(w);
    jw_obj_end(w);
  }
  jw_arr_end(w);
}

/* Member "jobs": the Job JSON of every row of jobs (staff_store_jobs_of), each with its
 * quotes, review and current payment (StaffJob). */
static err_t write_jobs(hs_req *req, jw *w, bool provider, const char *id, const db_res *jobs) {
  arena *a = &req->arena;
  db_res *q, *rv;
  if (staff_store_quotes_of(a, provider, id, &q) != ERR_OK || staff_store_reviews_of(a, provider, id, &rv) != ERR_OK)
    return ERR_INTERNAL;
  int nq, nrv;
  staff_keyed *quotes = staff_keyed_rows(a, q, "job_id", NULL, &nq),
              *reviews = staff_keyed_rows(a, rv, "job_id", NULL, &nrv);
  shape_jobs *jb = shape_jobs_bind(a, jobs);
  hs_rj *qb = hs_rj_bind(a, SHAPE_QUOTE, q), *rb = hs_rj_bind(a, JOBS_REVIEW_JSON, rv);
  hs_rj *pb = hs_rj_bind_as(a, PAYMENTS_JSON, jobs, "payment_");
  jw_key(w, "jobs");
  jw_arr(w);
  for (int i = 0; i < jobs->rows; i++) {
    const char *job = db_field(jobs, i, "id");
    if (!shape_job_open(w, jb, jobs, i)) {
      jw_null(w);
      continue;
    }
    jw_key(w, "quotes");
    jw_arr(w);
    for (int k = staff_keyed_first(quotes, nq, job); k < nq && !strcmp(quotes[k].key, job); k++)
      hs_rj_object(w, qb, q, quotes[k].row);
    jw_arr_end(w);
    jw_key(w, "review");
    int k = staff_keyed_first(reviews, nrv, job);
    k < nrv && !strcmp(reviews[k].key, job) ? hs_rj_object(w, rb, rv, reviews[k].row) : jw_null(w);
    jw_key(w, "payment");
    db_field(jobs, i, "payment_id") ? hs_rj_object(w, pb, jobs, i) : jw_null(w);
    jw_obj_end(w);
  }
  jw_arr_end(w);
  return ERR_OK;
}

/* Member "elevations": the elevations that targeted the account, newest first. */
static err_t write_elevations(hs_req *req, jw *w, const char *id, const char *role) {
  db_res *r;
  if (staff_store_elevations_of_target(&req->arena, id, role, &r) != ERR_OK) return ERR_INTERNAL;
  jw_key(w, "elevations");
  hs_rj_array(w, &req->arena, ELEVATION_JSON, r);
  return ERR_OK;
}

/* The customer's record as staff see it, processor ids included. */
static const hs_rj_field CUSTOMER[] = {
    {"", "", RJ_INCLUDE, SHAPE_CUSTOMER},
    {"processorCustomerId", "processor_customer_id", RJ_STR},
    {"processorSubscriptionId", "processor_subscription_id", RJ_STR},
    {"seasonalAlertsEnabled", "seasonal_alerts_enabled", RJ_BOOL},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};

err_t api_staff_customer(hs_req *req) {
  const char *id = hs_param(req, "id");
  staff_expire_elevations();
  db_res *user, *jobs, *pays, *refunds;
  err_t e = staff_store_customer(&req->arena, id, &user);
  if (e) return hs_found_or_fail(req, e, "Customer");
  if (staff_store_jobs_of(&req->arena, false, id, &jobs) != ERR_OK ||
      staff_store_payments_of(&req->arena, id, &pays) != ERR_OK ||
      staff_store_refunds_of(&req->arena, id, &refunds) != ERR_OK)
    return ERR_INTERNAL;
  jw *w = hs_jw(req, 4096 + 2048 * (size_t)(jobs->rows + pays->rows));
  jw_obj(w);
  jw_key(w, "user");
  hs_rj_object(w, hs_rj_bind(&req->arena, CUSTOMER, user), user, 0);
  if ((e = write_jobs(req, w, false, id, jobs)) != ERR_OK) return e;
  write_payments(w, &req->arena, pays, refunds);
  if ((e = write_elevations(req, w, id, "user")) != ERR_OK) return e;
  jw_obj_end(w);
  return hs_ok_jw(req, w);
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

/* Writes member "ledger" (newest month first) and fills the anticipated jobs and their total,
 * from the jobs and the provider's transfers (moves: payouts_provider_records); profile: the
 * provider's row (providers_profile_row). */
static void write_ledger(jw *w, arena *a, const db_res *jobs, const db_res *moves, const db_res *profile,
                         int *anticipated, int64_t *anticipated_cents) {
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
  const char *since = db_field(profile, 0, "premium_since");
  int64_t since_ms = since ? strtoll(since, NULL, 10) : 0;
  bool premium = providers_premium_now(profile, 0) && since;
  char premium_month[8] = "", now_month[8];
  if (premium) {
    month_of(since_ms, premium_month);
    month_of(clock_now_ms(), now_month);
    month_slot(months, &n, now_month); /* the fee is owed this month even without jobs */
  }
  qsort(months, (size_t)n, sizeof *months, newest_first);
  jw_key(w, "ledger");
  jw_arr(w);
  for (int i = 0; i < n; i++) {
    const ledger_month *m = &months[i];
    int64_t gross = m->paid + m->hold + m->pending;
    int64_t fee = premium && strcmp(m->month, premium_month) >= 0 ? PAYOUTS_PREMIUM_FEE_CENTS : 0;
    jw_pack(w, "{s:s,s:i,s:M,s:M,s:M,s:M,s:M,s:M,s:M}", "month", m->month, "jobs", m->jobs, "paidOut", m->paid,
            "inHold", m->hold, "pendingCapture", m->pending, "grossEarnings", gross, "premiumFeeDeducted", fee,
            "netEarnings", gross - fee, "netted", m->netted);
  }
  jw_arr_end(w);
}

err_t api_staff_provider(hs_req *req) {
  const char *id = hs_param(req, "id");
  staff_expire_elevations();
  db_res *profile, *jobs, *moves;
  err_t e = providers_profile_row(&req->arena, id, &profile);
  if (e) return hs_found_or_fail(req, e, "Provider");
  int64_t owed, fees_owed;
  if (staff_store_jobs_of(&req->arena, true, id, &jobs) != ERR_OK ||
      payouts_provider_records(&req->arena, id, &moves) != ERR_OK ||
      payouts_owed(&req->arena, id, &owed, &fees_owed) != ERR_OK)
    return ERR_INTERNAL;
  jw *w = hs_jw(req, 4096 + 2048 * (size_t)(jobs->rows + moves->rows));
  jw_obj(w);
  jw_key(w, "provider");
  hs_rj_object(w, hs_rj_bind(&req->arena, PROVIDERS_PROFILE_JSON, profile), profile, 0);
  if ((e = write_jobs(req, w, true, id, jobs)) != ERR_OK) return e;
  int anticipated;
  int64_t anticipated_cents;
  write_ledger(w, &req->arena, jobs, moves, profile, &anticipated, &anticipated_cents);
  jw_key(w, "anticipatedJobs");
  jw_int(w, anticipated);
  jw_key(w, "anticipatedTotal");
  jw_money(w, anticipated_cents);
  jw_key(w, "balance");
  jw_money(w, -owed);
  if ((e = write_elevations(req, w, id, "provider")) != ERR_OK) return e;
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}
