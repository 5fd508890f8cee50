/* Disputes (chargebacks) as customer support works them: GET /staff/disputes lists them with
 * their job, parties, deadline and the job's photos that may be sent as evidence; POST
 * /staff/disputes/:id/evidence answers one at the processor.
 *
 * Disputes themselves are recorded from the processor's events (payments_store.c:
 * apply_dispute). Evidence is the staff member's text and, optionally, photos of the job
 * (the customer's, before and after) and of its message threads, chosen by their file ids
 * (storage keys): the job's photos go as one PDF (service_documentation), the threads' as
 * another (customer_communication), uploaded to the processor first; the customer, the job
 * and its completion date go with them. The submission is final at the processor, so a
 * dispute answered, closed or past its deadline is refused here before anything is sent; a
 * retry after a lost answer (its files uploaded again, so the processor refuses the key with
 * other parameters) asks the processor for the dispute and records the submission it holds. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/jw.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"
#include "domain/payments/payments_store.h"
#include "ext/payments.h"
#include "ext/photobook.h"
#include "ext/storage.h"
#include "http/paging.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIST_CAP 100
#define PHOTO_PREFIX "[IMAGE]"

static bool is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* The job's files that may be sent as evidence: keys[i] with source[i] ("job", "before",
 * "after", "message"); *n of them, at most cap. */
static err_t job_files(arena *a, const char *job_id, const char **keys, const char **sources, int cap, int *n) {
  db_res *r;
  *n = 0;
  err_t e = pay_store_job_files(a, job_id, &r);
  static const char *const origin[] = {"job", "before", "after"};
  for (int i = 0; e == ERR_OK && i < r->rows; i++) {
    if (i > 0) { /* a message: "[IMAGE]<key>" */
      const char *content = db_text(r, i, 0);
      if (*n < cap && content && !strncmp(content, PHOTO_PREFIX, strlen(PHOTO_PREFIX)))
        keys[*n] = content + strlen(PHOTO_PREFIX), sources[(*n)++] = "message";
      continue;
    }
    for (int col = 0; col < 3; col++) { /* the job's three JSON arrays of keys */
      json_t *list = json_loads(db_text(r, 0, col) ? db_text(r, 0, col) : "[]", 0, NULL), *k;
      size_t j;
      json_array_foreach(list, j, k) if (*n < cap && json_is_string(k)) {
        keys[*n] = arena_strdup(a, json_string_value(k));
        sources[(*n)++] = origin[col];
      }
      json_decref(list);
    }
  }
  return e;
}

#define MAX_FILES 200

/* The Dispute's job and people, each an object of the list row's columns. */
static const hs_rj_field JOB[] = {{"service", "service", RJ_STR}, {"status", "job_status", RJ_STR}, {0}};
static const hs_rj_field CUSTOMER[] = {
    {"id", "customer_id", RJ_STR}, {"name", "customer_name", RJ_STR}, {"email", "customer_email", RJ_STR}, {0}};
static const hs_rj_field PROVIDER[] = {{"id", "provider_id", RJ_STR}, {"name", "provider_name", RJ_STR}, {0}};

/* Writes member key: row i of r as an object of fields, or null when its first column is NULL
 * (a LEFT JOIN that found nothing). */
static void member_object(jw *w, arena *a, const char *key, const hs_rj_field *fields, const db_res *r, int i) {
  jw_key(w, key);
  if (!db_field(r, i, fields[0].column)) return jw_null(w);
  hs_rj_object(w, hs_rj_bind(a, fields, r), r, i);
}

/* Writes a dispute row of the list (pay_store_disputes' columns) as the Dispute JSON. */
static err_t dispute_jw(hs_req *req, jw *w, const db_res *r, int i) {
  static const hs_rj_field FIELDS[] = {
      {"id", "id", RJ_STR},
      {"processorDisputeId", "processor_dispute_id", RJ_STR},
      {"jobId", "job_id", RJ_STR},
      {"paymentId", "payment_id", RJ_STR},
      {"paymentKind", "payment_kind", RJ_STR},
      {"status", "status", RJ_STR},
      {"reason", "reason", RJ_STR},
      {"amount", "amount_cents", RJ_MONEY},
      {"lostAmount", "lost_cents", RJ_MONEY},
      {"evidenceDueBy", "evidence_due_by", RJ_ISO},
      {"fundsWithdrawn", "funds_withdrawn", RJ_BOOL},
      {"evidenceSubmittedAt", "evidence_submitted_at", RJ_ISO},
      {"closedAt", "closed_at", RJ_ISO},
      {"createdAt", "created_at", RJ_ISO},
      {0},
  };
  const char *keys[MAX_FILES], *sources[MAX_FILES];
  int n;
  err_t e = job_files(&req->arena, db_field(r, i, "job_id"), keys, sources, MAX_FILES, &n);
  if (e != ERR_OK) return e;
  jw_obj(w);
  hs_rj_members(w, hs_rj_bind(&req->arena, FIELDS, r), r, i);
  member_object(w, &req->arena, "job", JOB, r, i);
  member_object(w, &req->arena, "customer", CUSTOMER, r, i);
  member_object(w, &req->arena, "provider", PROVIDER, r, i); /* null without one */
  jw_key(w, "files");                                        /* what may be sent as evidence */
  jw_arr(w);
  for (int f = 0; f < n; f++) {
    jw_obj(w);
    jw_key_str(w, "id", keys[f]);
    jw_key_str(w, "source", sources[f]);
    jw_key(w, "url");
    storage_url_jw(w, keys[f], URL_TTL_PHOTO);
    jw_obj_end(w);
  }
  jw_arr_end(w);
  jw_obj_end(w);
  return ERR_OK;
}

static err_t disputes_jw(hs_req *req, jw *w, const db_res *r) {
  err_t e = ERR_OK;
  for (int i = 0; e == ERR_OK && i < r->rows; i++) e = dispute_jw(req, w, r, i);
  return e;
}

err_t api_disputes_list(hs_req *req) {
  return hs_ok_page_jw(req, &DISPUTES_KEYSET, LIST_CAP, pay_store_disputes, hs_query_str(req, "status"), disputes_jw,
                       1024);
}

/* ---- evidence ---- */

/* The chosen files of one evidence field, as one PDF uploaded to the processor: its file id
 * into id ("" when none was chosen). ERR_OK, or the request failed. */
static err_t upload_book(hs_req *req, const char *const *keys, int n, const char *title, char id[PAY_ID_LEN]) {
  id[0] = 0;
  if (n == 0) return ERR_OK;
  char *paths[PHOTOBOOK_MAX_PHOTOS] = {0}, err[256] = "";
  unsigned char *pdf = NULL;
  size_t len = 0;
  err_t e = ERR_OK;
  for (int i = 0; i < n && e == ERR_OK; i++)
    if (!(paths[i] = storage_fetch_to_temp(keys[i]))) e = hs_fail(req, ERR_UNAVAILABLE, "File storage unavailable");
  if (e == ERR_OK && !photobook_make((const char *const *)paths, n, title, &pdf, &len, err))
    e = hs_fail_invalid(req, arena_printf(&req->arena, "fileIds: %s", err));
  pay_error pe;
  pay_rc rc = e == ERR_OK ? payments_upload_file("evidence.pdf", "application/pdf", pdf, len, id, &pe) : PAY_OK;
  if (rc == PAY_UNAVAILABLE) e = hs_fail(req, ERR_UNAVAILABLE, "Payment processor unavailable");
  if (rc != PAY_OK && rc != PAY_UNAVAILABLE) {
    log_json(LOG_ERROR, "the processor refused a dispute evidence file", json_pack("{s:s}", "error", pe.message));
    e = hs_fail(req, ERR_CONFLICT,
                arena_printf(&req->arena, "The payment processor refused the file (%s)", pe.message));
  }
  for (int i = 0; i < n; i++)
    if (paths[i]) unlink(paths[i]), free(paths[i]);
  free(pdf);
  return e;
}

/* The refusal of evidence for d, or NULL when it may be sent. */
static const char *evidence_refused(const dispute_row *d) {
  if (pay_dispute_closed(d->status)) return "This dispute is closed";
  if (d->evidence_submitted_at || is(d->status, "under_review") || is(d->status, "warning_under_review"))
    return "Evidence was already submitted for this dispute";
  if (d->evidence_due_by && d->evidence_due_by < clock_now_ms())
    return "The deadline for this dispute's evidence has passed";
  return NULL;
}

err_t api_disputes_evidence(hs_req *req) {
  dispute_row d;
  bool found;
  err_t e = pay_store_dispute(&req->arena, hs_param(req, "id"), &d, &found);
  if (e != ERR_OK) return e;
  if (!found) return hs_not_found(req, "Dispute");
  const char *refused = evidence_refused(&d);
  if (refused) return hs_fail(req, ERR_CONFLICT, refused);
  /* the chosen files: each one of the job's, in two books by where it comes from */
  const char *keys[MAX_FILES], *sources[MAX_FILES], *job_keys[PHOTOBOOK_MAX_PHOTOS], *thread_keys[PHOTOBOOK_MAX_PHOTOS];
  int n, njob = 0, nthread = 0;
  if ((e = job_files(&req->arena, d.job_id, keys, sources, MAX_FILES, &n)) != ERR_OK) return e;
  json_t *ids = json_object_get(req->body, "fileIds"), *id;
  size_t i;
  json_array_foreach(ids, i, id) {
    const char *want = json_string_value(id), *source = NULL;
    for (int k = 0; k < n && !source; k++)
      if (!strcmp(keys[k], want)) source = sources[k];
    if (!source)
      return hs_fail_invalid(req,
                             arena_printf(&req->arena, "fileIds: %s is not a photo of this job or its messages", want));
    if (is(source, "message"))
      thread_keys[nthread++] = want;
    else
      job_keys[njob++] = want;
  }
  pay_evidence_context cx;
  if ((e = pay_store_evidence_context(&req->arena, d.job_id, &cx)) != ERR_OK) return e;
  char service_doc[PAY_ID_LEN], messages_doc[PAY_ID_LEN];
  if ((e = upload_book(req, job_keys, njob, "Photos of the job", service_doc)) != ERR_OK ||
      (e = upload_book(req, thread_keys, nthread, "Photos from the job's messages", messages_doc)) != ERR_OK)
    return e;
  char date[25] = "";
  if (cx.completed_at) clock_format_iso(cx.completed_at, date), date[10] = 0;
  const char *text = hs_body_str(req, "text");
  pay_evidence ev = {.text = text,
                     .product_description =
                         arena_printf(&req->arena, "%s job %s: %s", cx.service, d.job_id,
                                      cx.description && *cx.description ? cx.description : "home service"),
                     .customer_name = cx.customer_name,
                     .customer_email = cx.customer_email,
                     .service_date = date[0] ? date : NULL,
                     .service_documentation = service_doc[0] ? service_doc : NULL,
                     .customer_communication = messages_doc[0] ? messages_doc : NULL};
  pay_dispute answered;
  pay_error pe;
  const char *key = arena_printf(&req->arena, "evidence-%s", d.id);
  pay_rc rc = payments_submit_evidence(d.processor_id, &ev, key, &answered, &pe);
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) { /* an earlier answer lost: did it arrive? */
    pay_error asked;
    if (payments_retrieve_dispute(d.processor_id, &answered, &asked) == PAY_OK && answered.submissions > 0) rc = PAY_OK;
  }
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY)
    return hs_fail(req, ERR_UNAVAILABLE, "Payment processor unavailable");
  if (rc != PAY_OK)
    return hs_fail(req, ERR_CONFLICT,
                   arena_printf(&req->arena, "The payment processor refused the evidence (%s)", pe.message));
  char *files = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
  const char *files_text = arena_strdup(&req->arena, files ? files : "[]");
  free(files);
  json_t *detail =
      arena_json(&req->arena, json_pack("{s:s,s:s,s:s,s:O*,s:s}", "disputeId", d.id, "jobId", d.job_id, "paymentId",
                                        d.payment_id, "fileIds", ids, "status", answered.status));
  audit_action act = {req->auth.id, req->auth.role, "dispute.evidence", d.id, "dispute", detail};
  if ((e = pay_store_dispute_evidence(d.id, text, files_text, req->auth.id, &answered, &act)) != ERR_OK) return e;
  db_res *r;
  if ((e = pay_store_dispute_listed(&req->arena, d.id, &r)) != ERR_OK || r->rows != 1) return e ? e : ERR_INTERNAL;
  jw *w = hs_jw(req, 2048);
  if ((e = dispute_jw(req, w, r, 0)) != ERR_OK) return e;
  return hs_ok_jw(req, w);
}
