/* Handlers for /quotes/... Money is integer cents; the platform fee is 18% of the amount,
 * rounded to the cent. */
#include "domain/quotes/quotes_api.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/faults.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/jobs/jobs.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/quotes/quotes.h"
#include "domain/quotes/quotes_store.h"
#include "domain/shapes.h"
#include "ext/storage.h"
#include "http/paging.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t quotes_platform_fee(int64_t amount_cents) { return (amount_cents * 18 + 50) / 100; }

bool quotes_total_chargeable(int64_t amount_cents) { return amount_cents * 118 >= PAYMENTS_MIN_CHARGE_CENTS * 100; }

/* checked before anything else, as a validation of the amount */
static const char TOO_SMALL[] = "amount: the total charged must be at least 0.50";

/* Answers {quote, job}: quote q (a quotes_store_get row) and the Job JSON of job (a `jobs.*`
 * row). */
static err_t reply_accepted(hs_req *req, const db_res *q, const db_res *job) {
  jw *w = hs_jw(req, 2048);
  jw_obj(w);
  jw_key(w, "quote");
  hs_rj_object(w, hs_rj_bind(&req->arena, SHAPE_QUOTE, q), q, 0);
  jw_key(w, "job");
  shape_job_open(w, shape_jobs_bind(&req->arena, job), job, 0);
  jw_obj_end(w);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

bool quotes_provider_verified(const char *headshots, const char *id_doc_front, const char *id_doc_back) {
  if (!id_doc_front || !id_doc_back || !headshots) return false;
  json_t *heads = jx_parse_or(headshots, json_array());
  bool ok = json_array_size(heads) > 0;
  json_decref(heads);
  return ok;
}

/* The checks of quoting over what quotes_store_submit read (found: ERR_OK, or ERR_NOT_FOUND
 * without such a provider), in the order the errors take precedence. */
static quote_outcome quote_checks(err_t found, const db_res *ctx) {
  if (found == ERR_NOT_FOUND ||
      !quotes_provider_verified(db_field(ctx, 0, "provider_headshots"), db_field(ctx, 0, "provider_id_doc_front"),
                                db_field(ctx, 0, "provider_id_doc_back")))
    return QUOTE_UNVERIFIED;
  /* a job outside the provider's services and ZIPs does not exist for it */
  if (!db_field(ctx, 0, "id") || db_int(ctx, 0, db_col(ctx, "provider_matches")) != 1) return QUOTE_NO_JOB;
  const char *status = db_field(ctx, 0, "status");
  if (strcmp(status, "PENDING") && strcmp(status, "QUOTED")) return QUOTE_NOT_OPEN;
  return QUOTE_CREATED;
}

typedef struct submission {
  const quote_request *in;
  char *id;
} submission;

/* quote_decide: the checks, then the quote and the customer's news. */
static quote_outcome decide(void *ctx, arena *a, err_t found, const db_res *row, quote_new *q, quote_news *news) {
  submission *s = ctx;
  quote_outcome checked = quote_checks(found, row);
  if (checked != QUOTE_CREATED) return checked;
  const quote_request *in = s->in;
  *q = (quote_new){.job_id = db_field(row, 0, "id"),
                   .provider_id = in->provider_id,
                   .service = db_field(row, 0, "service"),
                   .note = in->note,
                   .amount_cents = in->amount_cents,
                   .fee_cents = quotes_platform_fee(in->amount_cents)};
  if (in->scheduled_at) q->has_scheduled = clock_parse_iso(in->scheduled_at, &q->scheduled_at);
  id_new(s->id);
  q->id = s->id;
  const char *company = db_field(row, 0, "provider_company_name");
  const char *pro_name = company ? company : db_field(row, 0, "provider_name");
  double total = (double)(q->amount_cents + q->fee_cents) / 100;
  char *body =
      arena_printf(a,
                   "Hello %s,\n\n%s quoted $%.2f (total $%.2f with the service fee) for your %s job.\n"
                   "Open the app to compare quotes and accept one.\n",
                   db_field(row, 0, "customer_name"), pro_name, (double)q->amount_cents / 100, total, q->service);
  *news = (quote_news){db_field(row, 0, "customer_email"),
                       "You received a quote",
                       body,
                       {db_field(row, 0, "customer_id"), "user", "New quote",
                        arena_printf(a, "%s quoted $%.2f for your %s job", pro_name, total, q->service), q->job_id},
                       true,
                       db_field(row, 0, "customer_push_device") != NULL};
  return QUOTE_CREATED;
}

/* quotes_submit, with the inserted row in *quote (arena a) when created. Everything it decides
 * on is read in one statement inside its transaction (quotes_store_submit). */
static quote_outcome submit(arena *a, const quote_request *in, char id[ID_LEN + 1], db_res **quote) {
  if (!quotes_total_chargeable(in->amount_cents)) return QUOTE_TOO_SMALL;
  submission s = {in, id};
  return quotes_store_submit(a, in->provider_id, in->job_id, decide, &s, quote);
}

quote_outcome quotes_submit(arena *a, const quote_request *in, char id[ID_LEN + 1]) {
  db_res *quote;
  return submit(a, in, id, &quote);
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
  if (q.amount_cents <= 0) return hs_fail_invalid(req, "amount: must be at least 0.01");
  char id[ID_LEN + 1];
  db_res *quote;
  switch (submit(&req->arena, &q, id, &quote)) {
  case QUOTE_CREATED: {
    jw *w = hs_jw(req, 512);
    hs_rj_object(w, hs_rj_bind(&req->arena, SHAPE_QUOTE, quote), quote, 0);
    return hs_ok_jw(req, w);
  }
  case QUOTE_UNVERIFIED: return quotes_fail_unverified(req);
  case QUOTE_TOO_SMALL: return hs_fail_invalid(req, TOO_SMALL);
  case QUOTE_NO_JOB: return hs_not_found(req, "Job");
  case QUOTE_NOT_OPEN: return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job is not open for quotes");
  case QUOTE_DUPLICATE: return hs_fail(req, ERR_CONFLICT, "You already quoted on this job");
  case QUOTE_FAILED: break;
  }
  return ERR_INTERNAL;
}

err_t api_quotes_accept(hs_req *req) {
  db_res *q;
  err_t e = quotes_store_get(&req->arena, hs_param(req, "id"), true, &q);
  if (e) return hs_found_or_fail(req, e, "Quote");
  if (strcmp(db_field(q, 0, "customer_id"), req->auth.id)) return hs_fail(req, ERR_FORBIDDEN, "Not your job");
  const char *job_id = db_field(q, 0, "job_id"), *provider = db_field(q, 0, "provider_id");
  const char *pro_email = db_field(q, 0, "provider_email"), *pro_name = db_field(q, 0, "provider_name");
  const char *customer_name = db_field(q, 0, "customer_name");
  if (!pro_email || !customer_name) return ERR_NOT_FOUND;
  char *body = arena_printf(&req->arena,
                            "Hello %s,\n\n%s accepted your quote of $%.2f for job %s. Open the app to see the "
                            "address and schedule.\n",
                            pro_name, customer_name, (double)db_int(q, 0, db_col(q, "amount_cents")) / 100, job_id);
  quote_news news = {pro_email,
                     "Your quote was accepted",
                     body,
                     {provider, "provider", "Quote accepted",
                      arena_printf(&req->arena, "%s accepted your quote", customer_name), job_id},
                     true,
                     db_field(q, 0, "provider_push_device") != NULL};
  bool won;
  if ((e = quotes_store_accept(db_field(q, 0, "id"), job_id, provider, &news, &won)) != ERR_OK) return e;
  if (!won) return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job is no longer open for acceptance");
  fault_point("accept-committed");
  /* the authorization follows the commit; a decline is recorded, the acceptance stands */
  if (payments_authorize_job(job_id, req->auth.id, db_int(q, 0, db_col(q, "total_cents"))) != ERR_OK)
    log_msg(LOG_ERROR, "recording the authorization of job %s failed", job_id);
  /* the answer: the quote and its job as they are now, in one round trip */
  db_read reads[] = {quotes_store_read(&req->arena, db_field(q, 0, "id")), jobs_read(&req->arena, job_id)};
  if ((e = db_to_err(db_query_all(&req->arena, reads, 2))) != ERR_OK) return e;
  if (reads[0].res->rows == 0 || reads[1].res->rows == 0) return ERR_NOT_FOUND;
  return reply_accepted(req, reads[0].res, reads[1].res);
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
  if (!m.known) return hs_ok_pack(req, "{s:n}", "marketRate");
  return hs_ok_pack(req, "{s:f}", "marketRate", (double)m.rate_cents / 100.0);
}

err_t api_quotes_for_job(hs_req *req) {
  /* the job and its page of quotes in one round trip; the quotes are thrown away unless the job
   * is the caller's, and a job that is not answers 404 before a cursor that is not valid */
  const char *id = hs_param(req, "jobId");
  db_page pg;
  err_t page = hs_page_begin(req, &JOB_QUOTES_KEYSET, NULL, 0, &pg);
  db_read reads[2] = {jobs_read(&req->arena, id)};
  if (!page) reads[1] = quotes_store_read_for_job(&req->arena, id, &pg);
  err_t e = db_to_err(db_query_all(&req->arena, reads, page ? 1 : 2));
  if (e != ERR_OK) return e;
  db_res *job = reads[0].res, *q = reads[1].res;
  if (job->rows == 0 || strcmp(db_field(job, 0, "customer_id"), req->auth.id)) return hs_not_found(req, "Job");
  if (page || (e = hs_page_end(req, &pg, q)) != ERR_OK) return page ? page : e;
  jw *w = hs_jw(req, 1024 * (size_t)(q->rows + 1));
  hs_rj *quote = hs_rj_bind(&req->arena, SHAPE_QUOTE, q),
        *provider = hs_rj_bind(&req->arena, SHAPE_PROVIDER_CONTACT, q);
  int avg = db_col(q, "average_rating");
  jw_arr(w);
  for (int i = 0; i < q->rows; i++) {
    jw_obj(w);
    hs_rj_members(w, quote, q, i);
    hs_rj_open(w, "provider", provider, q, i);
    jw_key(w, "averageRating");
    const char *rating = db_text(q, i, avg);
    if (rating)
      jw_real(w, round(strtod(rating, NULL) * 100) / 100);
    else
      jw_null(w);
    jw_obj_end(w);
    jw_obj_end(w);
  }
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

/* A provider's quotes, each with its job's status and service. */
static err_t provider_quotes_jw(hs_req *req, jw *w, const db_res *q) {
  static const hs_rj_field job_fields[] = {
      {"jobStatus", "job_status", RJ_STR}, {"service", "job_service", RJ_STR}, {0}};
  hs_rj *quote = hs_rj_bind(&req->arena, SHAPE_QUOTE, q), *job = hs_rj_bind(&req->arena, job_fields, q);
  for (int i = 0; i < q->rows; i++) {
    jw_obj(w);
    hs_rj_members(w, quote, q, i);
    hs_rj_members(w, job, q, i);
    jw_obj_end(w);
  }
  return ERR_OK;
}

err_t api_quotes_of_provider(hs_req *req) {
  return hs_ok_page_jw(req, &PROVIDER_QUOTES_KEYSET, 0, quotes_store_of_provider, req->auth.id, provider_quotes_jw,
                       384);
}

/* ---- the account's part (domain/domain.h) ---- */

const account_part QUOTES_EXPORT_PARTS[] = {{"quotes", QUOTES_EXPORT_SQL, SHAPE_QUOTE}, {0}};
