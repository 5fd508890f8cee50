/* Reports as customer support works them: GET /staff/reports lists them with the money each
 * holds (the job's transfers and when the hold lapses), POST /staff/reports/:id/resolve
 * releases that money or refunds the customer, and closes the report, audited.
 *
 * A report (POST /jobs/:id/report, the jobs domain) holds the job's unpaid transfers for 7
 * days; staff are emailed when it holds money. Releasing ends the hold at once (a dispute's
 * hold stays); refunding goes through the staff refund (payments_staff_refund: the job's
 * payment, the provider bearing its share), whose key is the report's, so a retried
 * resolution finds the same refund. */
#include "core/jsonx.h"
#include "core/jw.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

#define LIST_CAP 100
#define REPORT_HOLD_MS (7LL * 24 * 3600 * 1000)

/* Writes report row i of r with its job's transfers (t: payouts_read_job_transfers' rows). */
static void report_jw(jw *w, arena *a, const db_res *r, int i, const db_res *t) {
  static const hs_rj_field FIELDS[] = {
      {"id", "id", RJ_STR},
      {"jobId", "job_id", RJ_STR},
      {"customerId", "customer_id", RJ_STR},
      {"description", "description", RJ_STR},
      {"status", "status", RJ_STR},
      {"createdAt", "created_at", RJ_ISO},
      {0},
  };
  static const hs_rj_field TRANSFER[] = {
      {"id", "id", RJ_STR},
      {"kind", "kind", RJ_STR},
      {"amount", "amount_cents", RJ_MONEY},
      {"status", "status", RJ_STR},
      {"holdUntil", "hold_until", RJ_ISO},
      {0},
  };
  bool open = !strcmp(db_field(r, i, "status"), "open");
  jw_obj(w);
  hs_rj_members(w, hs_rj_bind(a, FIELDS, r), r, i);
  jw_key(w, "holdEndsAt"); /* when the report stops holding the job's money on its own */
  if (open)
    jw_iso(w, db_int(r, i, db_col(r, "created_at")) + REPORT_HOLD_MS);
  else
    jw_null(w);
  jw_key(w, "job");
  jw_obj(w);
  jw_key_str(w, "service", db_field(r, i, "service"));
  jw_key_str(w, "status", db_field(r, i, "job_status"));
  jw_key_str(w, "providerId", db_field(r, i, "provider_id"));
  jw_obj_end(w);
  jw_key(w, "heldTransfers");
  jw_arr(w);
  const hs_rj *tb = hs_rj_bind(a, TRANSFER, t);
  for (int k = 0; k < t->rows; k++)
    if (!strcmp(db_field(t, k, "status"), "on_hold")) hs_rj_object(w, tb, t, k);
  jw_arr_end(w);
  jw_key(w, "resolution");
  if (open) {
    jw_null(w);
  } else {
    jw_obj(w);
    jw_key_str(w, "action", db_field(r, i, "resolution"));
    jw_key_str(w, "note", db_field(r, i, "resolution_note"));
    jw_key_str(w, "resolvedBy", db_field(r, i, "resolved_by"));
    jw_key(w, "resolvedAt");
    jw_cell_iso(w, db_field(r, i, "resolved_at"));
    jw_obj_end(w);
  }
  jw_obj_end(w);
}

/* Writes every report of r, each with its job's transfers (read together: one round trip). */
static err_t reports_jw(hs_req *req, jw *w, const db_res *r) {
  db_read *reads = arena_alloc(&req->arena, sizeof *reads * (size_t)(r->rows ? r->rows : 1));
  for (int i = 0; i < r->rows; i++) reads[i] = payouts_read_job_transfers(&req->arena, db_field(r, i, "job_id"));
  err_t e = r->rows ? db_to_err(db_query_all(&req->arena, reads, r->rows)) : ERR_OK;
  for (int i = 0; e == ERR_OK && i < r->rows; i++) report_jw(w, &req->arena, r, i, reads[i].res);
  return e;
}

err_t api_staff_reports(hs_req *req) {
  return hs_ok_page_jw(req, &REPORTS_KEYSET, LIST_CAP, jobs_reports, hs_query_str(req, "status"), reports_jw, 768);
}

err_t api_staff_report_resolve(hs_req *req) {
  const char *id = hs_param(req, "id"), *action = hs_body_str(req, "action"), *note = hs_body_str(req, "note");
  bool refund = !strcmp(action, "refund");
  if (!refund && hs_body_has(req, "amount")) return hs_fail_invalid(req, "amount: is only for action refund");
  db_res *r;
  err_t e = jobs_report(&req->arena, id, &r);
  if (e != ERR_OK) return e;
  if (r->rows != 1) return hs_not_found(req, "Report");
  if (strcmp(db_field(r, 0, "status"), "open")) return staff_fail(req, STAFF_REPORT_RESOLVED);
  const char *job_id = db_field(r, 0, "job_id");
  jw *refunded = NULL; /* the refund's answer, written before the report is resolved */
  if (refund) {
    payments_refund_ask ask = {
        .job_id = job_id,
        .target = "job",
        .reason = note,
        .provider_share = "prorata",
        .key = arena_printf(&req->arena, "report-%s", id),
        .cents = hs_body_has(req, "amount") ? jx_cents(json_number_value(json_object_get(req->body, "amount"))) : 0};
    refunded = hs_jw(req, 2048);
    if ((e = payments_staff_refund(req, &ask, refunded)) != ERR_OK) return e;
  }
  json_t *detail = arena_json(
      &req->arena, json_pack("{s:s,s:s,s:s,s:s}", "reportId", id, "jobId", job_id, "action", action, "note", note));
  audit_action act = {req->auth.id, req->auth.role, "report.resolve", id, "report", detail};
  bool resolved;
  if ((e = staff_store_resolve_report(id, job_id, action, note, &act, &resolved)) != ERR_OK) return e;
  if (!resolved) return staff_fail(req, STAFF_REPORT_RESOLVED);
  if ((e = jobs_report(&req->arena, id, &r)) != ERR_OK || r->rows != 1) return e ? e : ERR_INTERNAL;
  jw *w = hs_jw(req, 2048);
  jw_obj(w);
  jw_key(w, "report");
  if ((e = reports_jw(req, w, r)) != ERR_OK) return e;
  jw_key(w, "refund");
  refunded ? jw_raw_value(w, jw_text(refunded), jw_len(refunded)) : jw_null(w);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}
