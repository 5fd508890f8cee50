/* Handlers for /quotes/... Money is integer cents; the platform fee is 18% of the amount,
 * rounded to the cent. */
#include "domain/quotes/quotes_api.h"
#include "core/faults.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/jobs/jobs.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/providers/providers.h"
#include "domain/quotes/quotes.h"
#include "domain/quotes/quotes_store.h"
#include "ext/storage.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t quotes_platform_fee(int64_t amount_cents) { return (amount_cents * 18 + 50) / 100; }

json_t *quotes_json(const db_res *q, int i) {
  return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:s,s:o}", "id", db_field(q, i, "id"), "jobId",
                   db_field(q, i, "job_id"), "providerId", db_field(q, i, "provider_id"), "amount",
                   jx_money(db_int(q, i, db_col(q, "amount_cents"))), "platformFee",
                   jx_money(db_int(q, i, db_col(q, "platform_fee_cents"))), "totalAmount",
                   jx_money(db_int(q, i, db_col(q, "total_cents"))), "note", jx_str_or_null(db_field(q, i, "note")),
                   "scheduledAt", jx_iso_or_null(db_field(q, i, "scheduled_at")), "status", db_field(q, i, "status"),
                   "createdAt", jx_iso_or_null(db_field(q, i, "created_at")));
}

static err_t reply_quote(hs_req *req, const char *id, json_t *extra_job) {
  db_res *q;
  err_t e = quotes_store_get(&req->arena, id, &q);
  if (e != ERR_OK) return e;
  json_t *out = quotes_json(q, 0);
  if (extra_job) return hs_ok(req, json_pack("{s:o,s:o}", "quote", out, "job", extra_job));
  return hs_ok(req, out);
}

quote_outcome quotes_submit(arena *a, const quote_request *in, char id[ID_LEN + 1]) {
  if (!providers_is_verified(in->provider_id)) return QUOTE_UNVERIFIED;
  db_res *job;
  err_t e = jobs_get(a, in->job_id, &job);
  if (e != ERR_OK) return e == ERR_NOT_FOUND ? QUOTE_NO_JOB : QUOTE_FAILED;
  const char *status = db_field(job, 0, "status");
  /* a job outside the provider's services and ZIPs does not exist for it */
  if (!jobs_provider_matches(in->provider_id, db_field(job, 0, "service"), db_field(job, 0, "zip")))
    return QUOTE_NO_JOB;
  if (strcmp(status, "PENDING") && strcmp(status, "QUOTED")) return QUOTE_NOT_OPEN;
  quote_new q = {.job_id = db_field(job, 0, "id"),
                 .provider_id = in->provider_id,
                 .service = db_field(job, 0, "service"),
                 .note = in->note,
                 .amount_cents = in->amount_cents,
                 .fee_cents = quotes_platform_fee(in->amount_cents)};
  if (in->scheduled_at) q.has_scheduled = clock_parse_iso(in->scheduled_at, &q.scheduled_at);
  id_new(id);
  q.id = id;
  db_res *customer, *pro;
  if (quotes_store_contact(a, "users", db_field(job, 0, "customer_id"), &customer) != ERR_OK ||
      quotes_store_contact(a, "providers", in->provider_id, &pro) != ERR_OK)
    return QUOTE_FAILED;
  const char *company = db_text(pro, 0, 2), *pro_name = company ? company : db_text(pro, 0, 1);
  double total = (double)(q.amount_cents + q.fee_cents) / 100;
  char *body = arena_printf(a,
                            "Hello %s,\n\n%s quoted $%.2f (total $%.2f with the service fee) for your %s job.\n"
                            "Open the app to compare quotes and accept one.\n",
                            db_text(customer, 0, 1), pro_name, (double)q.amount_cents / 100, total, q.service);
  quote_news news = {db_text(customer, 0, 0), "You received a quote", body,
                     {db_field(job, 0, "customer_id"), "user", "New quote",
                      arena_printf(a, "%s quoted $%.2f for your %s job", pro_name, total, q.service), q.job_id}};
  e = quotes_store_submit(&q, &news);
  if (e == ERR_CONFLICT) return QUOTE_DUPLICATE;
  if (e == ERR_BAD_REQUEST) return QUOTE_NOT_OPEN;
  return e == ERR_OK ? QUOTE_CREATED : QUOTE_FAILED;
}

err_t quotes_fail_unverified(hs_req *req) {
  return hs_fail_code(req, ERR_BAD_REQUEST, "verification_required",
                      "Upload a headshot and both sides of your driver's licence before quoting");
}

err_t api_quotes_create(hs_req *req) {
  quote_request q = {.provider_id = req->auth.id,
                     .job_id = hs_body_str(req, "jobId"),
                     .note = hs_body_str(req, "note"),
                     .scheduled_at = hs_body_str(req, "scheduledAt"),
                     .amount_cents = jx_cents(json_number_value(json_object_get(req->body, "amount")))};
  if (q.amount_cents <= 0) return hs_fail(req, ERR_BAD_REQUEST, "amount: must be at least 0.01");
  char id[ID_LEN + 1];
  switch (quotes_submit(&req->arena, &q, id)) {
  case QUOTE_CREATED: return reply_quote(req, id, NULL);
  case QUOTE_UNVERIFIED: return quotes_fail_unverified(req);
  case QUOTE_NO_JOB: return hs_fail(req, ERR_NOT_FOUND, "Job not found");
  case QUOTE_NOT_OPEN: return hs_fail(req, ERR_CONFLICT, "The job is not open for quotes");
  case QUOTE_DUPLICATE: return hs_fail(req, ERR_CONFLICT, "You already quoted on this job");
  case QUOTE_FAILED: break;
  }
  return ERR_INTERNAL;
}

err_t api_quotes_accept(hs_req *req) {
  db_res *q;
  err_t e = quotes_store_get(&req->arena, hs_param(req, "id"), &q);
  if (e == ERR_NOT_FOUND) return hs_fail(req, e, "Quote not found");
  if (e != ERR_OK) return e;
  if (strcmp(db_field(q, 0, "customer_id"), req->auth.id)) return hs_fail(req, ERR_FORBIDDEN, "Not your job");
  const char *job_id = db_field(q, 0, "job_id"), *provider = db_field(q, 0, "provider_id");
  db_res *pro, *customer;
  if ((e = quotes_store_contact(&req->arena, "providers", provider, &pro)) != ERR_OK ||
      (e = quotes_store_contact(&req->arena, "users", req->auth.id, &customer)) != ERR_OK)
    return e;
  char *body = arena_printf(&req->arena,
                            "Hello %s,\n\n%s accepted your quote of $%.2f for job %s. Open the app to see the "
                            "address and schedule.\n",
                            db_text(pro, 0, 1), db_text(customer, 0, 1),
                            (double)db_int(q, 0, db_col(q, "amount_cents")) / 100, job_id);
  quote_news news = {db_text(pro, 0, 0), "Your quote was accepted", body,
                     {provider, "provider", "Quote accepted",
                      arena_printf(&req->arena, "%s accepted your quote", db_text(customer, 0, 1)), job_id}};
  bool won;
  if ((e = quotes_store_accept(db_field(q, 0, "id"), job_id, provider, &news, &won)) != ERR_OK) return e;
  if (!won) return hs_fail(req, ERR_CONFLICT, "The job is no longer open for acceptance");
  fault_point("accept-committed");
  /* the authorization follows the commit; a decline is recorded, the acceptance stands */
  if (payments_authorize_job(job_id, req->auth.id, db_int(q, 0, db_col(q, "total_cents"))) != ERR_OK)
    log_msg(LOG_ERROR, "recording the authorization of job %s failed", job_id);
  db_res *job;
  if ((e = jobs_get(&req->arena, job_id, &job)) != ERR_OK) return e;
  return reply_quote(req, db_field(q, 0, "id"), jobs_json(job, 0));
}

err_t quotes_market(arena *a, const char *service, quote_market *out) {
  db_res *r;
  err_t e = quotes_store_recent_accepted(a, service, &r);
  *out = (quote_market){0};
  if (e != ERR_OK || r->rows == 0) return e;
  int64_t *v = arena_alloc(a, sizeof *v * (size_t)r->rows), sum = 0;
  for (int i = 0; i < r->rows; i++) v[i] = db_int(r, i, 0), sum += v[i];
  for (int i = 1; i < r->rows; i++) /* insertion sort: at most 50 values */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      int64_t t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  int n = r->rows;
  double median = n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
  out->known = true;
  out->samples = n;
  out->rate_cents = (int64_t)round(median / 100.0 / 5.0) * 500; /* dollars, to the nearest 5 */
  out->mean_cents = llround((double)sum / n);
  return ERR_OK;
}

err_t api_quotes_market_rate(hs_req *req) {
  quote_market m;
  err_t e = quotes_market(&req->arena, json_string_value(json_object_get(req->query, "service")), &m);
  if (e != ERR_OK) return e;
  if (!m.known) return hs_ok(req, json_pack("{s:n}", "marketRate"));
  return hs_ok(req, json_pack("{s:f}", "marketRate", (double)m.rate_cents / 100.0));
}

err_t api_quotes_for_job(hs_req *req) {
  db_res *job, *q;
  err_t e = jobs_get(&req->arena, hs_param(req, "jobId"), &job);
  if (e == ERR_NOT_FOUND || (e == ERR_OK && strcmp(db_field(job, 0, "customer_id"), req->auth.id)))
    return hs_fail(req, ERR_NOT_FOUND, "Job not found");
  if (e != ERR_OK || (e = quotes_store_for_job(&req->arena, db_field(job, 0, "id"), &q)) != ERR_OK) return e;
  json_t *list = json_array();
  for (int i = 0; i < q->rows; i++) {
    json_t *o = quotes_json(q, i);
    const char *logo = db_field(q, i, "logo_url");
    char *logo_url = logo ? storage_url(logo, URL_TTL_PHOTO) : NULL;
    const char *avg = db_field(q, i, "average_rating");
    json_object_set_new(o, "provider",
                        json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "name", db_field(q, i, "name"), "phone",
                                  jx_str_or_null(db_field(q, i, "phone")), "companyName",
                                  jx_str_or_null(db_field(q, i, "company_name")), "companyUrl",
                                  jx_str_or_null(db_field(q, i, "company_url")), "insuranceInfo",
                                  jx_str_or_null(db_field(q, i, "insurance_info")), "logoUrl", jx_str_or_null(logo_url),
                                  "averageRating",
                                  avg ? json_real(round(strtod(avg, NULL) * 100) / 100) : json_null()));
    free(logo_url);
    json_array_append_new(list, o);
  }
  return hs_ok(req, list);
}
