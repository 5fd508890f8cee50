/* Handlers for /jobs/... and /reviews. A job is visible to its customer, its assigned
 * provider, and, while it is open (PENDING or QUOTED), to every provider whose services and
 * ZIPs match it; to anyone else it does not exist (404). */
#include "domain/jobs/jobs_api.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/common.h"
#include "domain/jobs/jobs.h"
#include "domain/jobs/jobs_store.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/shapes.h"
#include "ext/geo.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include "ext/storage.h"
#include <stdlib.h>
#include <string.h>

#define CANCEL_LOCK_MS (48 * HOUR_MS)

typedef enum { SEES_NONE, SEES_OWNER, SEES_ASSIGNED, SEES_MATCHING } relation;

/* Loads the job named by :id as the caller sees it; 404 when it is not theirs to see. */
static err_t load_visible(hs_req *req, db_res **job, relation *rel) {
  err_t e = jobs_get(&req->arena, hs_param(req, "id"), job);
  if (e) return hs_found_or_fail(req, e, "Job");
  const char *status = db_field(*job, 0, "status"), *provider = db_field(*job, 0, "provider_id");
  *rel = SEES_NONE;
  if (req->auth.role_bit == ROLE_USER && !strcmp(db_field(*job, 0, "customer_id"), req->auth.id))
    *rel = SEES_OWNER;
  else if (req->auth.role_bit == ROLE_PROVIDER && provider && !strcmp(provider, req->auth.id))
    *rel = SEES_ASSIGNED;
  else if (req->auth.role_bit == ROLE_PROVIDER && (!strcmp(status, "PENDING") || !strcmp(status, "QUOTED")) &&
           jobs_provider_matches(req->auth.id, db_field(*job, 0, "service"), db_field(*job, 0, "zip")))
    *rel = SEES_MATCHING;
  return *rel == SEES_NONE ? hs_not_found(req, "Job") : ERR_OK;
}

/* The job as its owner, or 404. */
static err_t load_owned(hs_req *req, db_res **job) {
  relation rel;
  err_t e = load_visible(req, job, &rel);
  if (e == ERR_OK && rel != SEES_OWNER) return hs_not_found(req, "Job");
  return e;
}

/* The customer's notification that their job moved to status (sent by the move). */
static notice *status_notice(hs_req *req, db_res *job, const char *status) {
  static const struct {
    const char *status, *text;
  } texts[] = {{"ON_THE_WAY", "Your provider is on the way"},
               {"IN_PROGRESS", "Work on your job has started"},
               {"COMPLETED", "Your job is completed"}};
  const char *text = status;
  for (size_t i = 0; i < ARRAY_LEN(texts); i++)
    if (!strcmp(texts[i].status, status)) text = texts[i].text;
  notice *n = arena_alloc(&req->arena, sizeof *n);
  *n = (notice){.role = "user",
                .title = "Job update",
                .body = arena_printf(&req->arena, "%s (%s)", text, db_field(job, 0, "service")),
                .job_id = db_field(job, 0, "id")};
  return n;
}

/* ---- posting and reading ---- */

err_t api_jobs_create(hs_req *req) {
  bool asap = json_is_true(json_object_get(req->body, "isAsap"));
  const char *preferred = hs_body_str(req, "preferredAt"); /* present unless isAsap (schema) */
  const char *address_id = hs_body_str(req, "addressId");
  db_res *loc;
  err_t e = jobs_store_user_location(&req->arena, req->auth.id, address_id, &loc);
  if (e != ERR_OK) return e;
  if (loc->rows == 0) return hs_not_found(req, address_id ? "Address" : "User");
  job_new j = {.customer_id = req->auth.id,
               .service = hs_body_str(req, "service"),
               .description = hs_body_str(req, "description"),
               .address = db_field(loc, 0, "address"),
               .zip = db_field(loc, 0, "zip"),
               .is_asap = asap};
  char id[ID_LEN + 1];
  id_new(id);
  j.id = id;
  if (preferred) j.has_preferred = clock_parse_iso(preferred, &j.preferred_at);
  json_t *details = json_object_get(req->body, "details");
  char *details_text = details ? json_dumps(details, JSON_COMPACT) : NULL;
  j.details = details_text;
  /* coordinates: the customer's own position for the profile address, else the ZIP's centroid */
  if (!db_isnull(loc, 0, 2) && !db_isnull(loc, 0, 3) && db_int(loc, 0, 4) == 0) {
    j.has_coords = true, j.lat = db_real(loc, 0, 2), j.lng = db_real(loc, 0, 3);
  } else {
    j.has_coords = geo_zip_centroid(j.zip, &j.lat, &j.lng);
  }
  /* urgent: every provider who could take it hears at once, from the job's own transaction */
  db_res *row;
  e = jobs_store_insert(&req->arena, &j, asap ? "Urgent job nearby" : NULL,
                        asap ? arena_printf(&req->arena, "An ASAP %s job was posted in %s", j.service, j.zip) : NULL,
                        &row);
  free(details_text);
  if (e != ERR_OK) return e;
  return jobs_write_row(req, row); /* the inserted row: no read after the commit */
}

/* ---- lifecycle ---- */

err_t api_jobs_cancel(hs_req *req) {
  db_res *job;
  err_t e = load_owned(req, &job);
  if (e != ERR_OK) return e;
  const char *status = db_field(job, 0, "status"), *id = db_field(job, 0, "id");
  bool accepted = !strcmp(status, "ACCEPTED");
  if (strcmp(status, "PENDING") && strcmp(status, "QUOTED") && !accepted)
    return hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_INVALID_STATE,
                        "Only a PENDING, QUOTED or ACCEPTED job can be cancelled");
  if (accepted && clock_now_ms() - db_int(job, 0, db_col(job, "accepted_at")) <= CANCEL_LOCK_MS)
    return hs_fail_code(req, ERR_CONFLICT, "WITHIN_CANCELLATION_WINDOW",
                        "An accepted job can be cancelled only after 48 hours");
  const char *const from[] = {status, NULL};
  db_res *moved;
  if ((e = jobs_store_move(&req->arena, &(job_move){.id = id, .from = from, .to = "CANCELLED"}, &moved)) != ERR_OK)
    return e;
  if (!moved) return hs_fail(req, ERR_CONFLICT, "The job changed meanwhile; try again");
  if (accepted && payments_void_job(id) != ERR_OK) log_msg(LOG_ERROR, "voiding the payment of job %s failed", id);
  return jobs_write_row(req, moved);
}

/* The step before each status a provider may set (the order is enforced one step at a time). */
static const char *previous_status(const char *to) {
  if (!strcmp(to, "ON_THE_WAY")) return "ACCEPTED";
  if (!strcmp(to, "IN_PROGRESS")) return "ON_THE_WAY";
  if (!strcmp(to, "COMPLETED")) return "IN_PROGRESS";
  return NULL;
}

/* The assigned provider's job, or 404. */
static err_t load_assigned(hs_req *req, db_res **job) {
  relation rel;
  err_t e = load_visible(req, job, &rel);
  if (e == ERR_OK && rel != SEES_ASSIGNED) return hs_not_found(req, "Job");
  return e;
}

err_t api_jobs_set_status(hs_req *req) {
  db_res *job;
  err_t e = load_assigned(req, &job);
  if (e != ERR_OK) return e;
  const char *to = hs_body_str(req, "status"), *id = db_field(job, 0, "id");
  const char *const from[] = {previous_status(to), NULL};
  json_t *flat = json_object_get(req->body, "fromLat"), *flng = json_object_get(req->body, "fromLng");
  const char *extra = NULL;
  db_val value = DB_NULL;
  if (!strcmp(to, "ON_THE_WAY") && flat && flng && !db_isnull(job, 0, db_col(job, "lat"))) {
    extra = "eta_minutes";
    value = DB_INT(geo_drive_minutes(json_number_value(flat), json_number_value(flng),
                                     db_real(job, 0, db_col(job, "lat")), db_real(job, 0, db_col(job, "lng"))));
  }
  db_res *moved;
  job_move m = {.id = id,
                .from = from,
                .to = to,
                .provider_id = req->auth.id,
                .extra_column = extra,
                .extra = value,
                .note = status_notice(req, job, to)};
  if ((e = jobs_store_move(&req->arena, &m, &moved)) != ERR_OK) return e;
  if (!moved)
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE,
                        arena_printf(&req->arena, "A job moves to %s only from %s (it is %s)", to, from[0],
                                     db_field(job, 0, "status")));
  if (!strcmp(to, "COMPLETED") && payments_capture_job(id) != ERR_OK)
    log_msg(LOG_ERROR, "job %s: payment neither captured nor queued; the reconciliation takes it up", id);
  return jobs_write_row(req, moved); /* the capture changes no column of the job */
}

/* Stores every file of field `images`, all or none; the keys as JSON array text (arena), or
 * NULL. */
static const char *store_photos(hs_req *req) {
  int n;
  hs_upload **files = hs_files(req, "images", &n);
  json_t *keys = arena_json(&req->arena, json_array());
  if (!common_store_uploads(files, n, keys)) return NULL;
  char *text = json_dumps(keys, JSON_COMPACT);
  const char *out = arena_strdup(&req->arena, text);
  free(text);
  return out;
}

static void delete_photos(const char *keys_json) {
  json_t *keys = jx_parse_or(keys_json, json_array());
  common_delete_stored(keys);
  json_decref(keys);
}

/* start and complete: photos plus one status step. */
static err_t photo_step(hs_req *req, const char *from, const char *to, const char *column) {
  db_res *job;
  err_t e = load_assigned(req, &job);
  if (e != ERR_OK) return e;
  const char *id = db_field(job, 0, "id");
  if (strcmp(db_field(job, 0, "status"), from))
    return hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_INVALID_STATE,
                        arena_printf(&req->arena, "The job must be %s", from));
  const char *keys = store_photos(req);
  if (!keys) return hs_fail(req, ERR_INTERNAL, NULL);
  db_res *moved;
  const char *const states[] = {from, NULL};
  job_move m = {.id = id,
                .from = states,
                .to = to,
                .provider_id = req->auth.id,
                .extra_column = column,
                .extra = DB_TEXT(keys),
                .note = status_notice(req, job, to)};
  e = jobs_store_move(&req->arena, &m, &moved);
  if (e != ERR_OK || !moved) {
    delete_photos(keys);
    return e != ERR_OK ? e
                       : hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_INVALID_STATE,
                                      arena_printf(&req->arena, "The job must be %s", from));
  }
  if (!strcmp(to, "COMPLETED") && payments_capture_job(id) != ERR_OK)
    log_msg(LOG_ERROR, "job %s: payment neither captured nor queued; the reconciliation takes it up", id);
  return jobs_write_row(req, moved);
}

err_t api_jobs_start(hs_req *req) { return photo_step(req, "ON_THE_WAY", "IN_PROGRESS", "before_images"); }
err_t api_jobs_complete(hs_req *req) { return photo_step(req, "IN_PROGRESS", "COMPLETED", "after_images"); }

err_t api_jobs_images(hs_req *req) {
  db_res *job;
  err_t e = load_owned(req, &job);
  if (e != ERR_OK) return e;
  const char *keys = store_photos(req);
  if (!keys) return hs_fail(req, ERR_INTERNAL, NULL);
  if ((e = jobs_store_append_images(db_field(job, 0, "id"), keys)) != ERR_OK) {
    delete_photos(keys);
    return e;
  }
  jw *w = hs_jw(req, 512);
  int64_t expires = storage_url_expiry(URL_TTL_PHOTO);
  jw_obj(w);
  jw_key(w, "images");
  storage_urls_jw_at(w, keys, expires);
  storage_variants_jw(w, keys, expires);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* ---- after completion ---- */

/* A COMPLETED job of the caller's, for report, tip, recurring and review: 404 when not
 * visible, 403 when visible but not the caller's, 409 when not COMPLETED. */
static err_t load_completed(hs_req *req, const char *id, db_res **job) {
  err_t e = jobs_get(&req->arena, id, job);
  if (e) return hs_found_or_fail(req, e, "Job");
  if (strcmp(db_field(*job, 0, "customer_id"), req->auth.id)) return hs_fail(req, ERR_FORBIDDEN, "Not your job");
  if (strcmp(db_field(*job, 0, "status"), "COMPLETED"))
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job is not completed");
  return ERR_OK;
}

/* A review and a report, as answered and exported (the account's part, below). */
const hs_rj_field JOBS_REVIEW_JSON[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"providerId", "provider_id", RJ_STR},
    {"rating", "rating", RJ_INT},
    {"comment", "comment", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
static const hs_rj_field REPORT[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"customerId", "customer_id", RJ_STR},
    {"description", "description", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
/* Answers each outcome of a customer's one-per-job record but JOBS_DONE. */
static err_t jobs_fail(hs_req *req, jobs_outcome out) {
  switch (out) {
  case JOBS_ALREADY_REPORTED: return hs_fail(req, ERR_CONFLICT, "This job was already reported");
  case JOBS_ALREADY_REVIEWED: return hs_fail(req, ERR_CONFLICT, "This job was already reviewed");
  case JOBS_DONE:
  case JOBS_FAILED: break;
  }
  return ERR_INTERNAL;
}

err_t api_jobs_report(hs_req *req) {
  db_res *job;
  err_t e = load_completed(req, hs_param(req, "id"), &job);
  if (e != ERR_OK) return e;
  if (clock_now_ms() - db_int(job, 0, db_col(job, "completed_at")) > JOBS_REPORT_WINDOW_MS)
    return hs_fail(req, ERR_CONFLICT, "Reports are accepted within 72 hours of completion");
  char id[ID_LEN + 1];
  id_new(id);
  const char *job_id = db_field(job, 0, "id"), *text = hs_body_str(req, "description");
  int64_t now = clock_now_ms();
  db_res *row;
  jobs_outcome out = jobs_store_insert_report(&req->arena, id, job_id, req->auth.id, text, now, &row);
  return out == JOBS_DONE ? hs_ok_row(req, REPORT, row) : jobs_fail(req, out);
}

err_t api_jobs_tip(hs_req *req) {
  db_res *job;
  err_t e = load_completed(req, hs_param(req, "id"), &job);
  if (e != ERR_OK) return e;
  const char *job_id = db_field(job, 0, "id");
  int64_t cents = jx_cents(json_number_value(json_object_get(req->body, "amount")));
  char msg[256] = "";
  e = payments_charge_tip(job_id, req->auth.id, &cents, msg); /* sets the job's tipAmount when paid */
  if (e != ERR_OK) return hs_fail(req, e, msg[0] ? msg : NULL);
  return hs_ok_pack(req, "{s:b,s:M}", "success", 1, "tipAmount", cents);
}

err_t api_jobs_recurring(hs_req *req) {
  db_res *job;
  err_t e = load_completed(req, hs_param(req, "id"), &job);
  if (e != ERR_OK) return e;
  const char *provider = db_field(job, 0, "provider_id");
  if (!provider) return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job has no provider");
  char id[ID_LEN + 1];
  id_new(id);
  static const char *const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
  recurring_new q = {.id = id,
                     .job_id = db_field(job, 0, "id"),
                     .customer_id = req->auth.id,
                     .provider_id = provider,
                     .time_slot = hs_body_str(req, "timeSlot"),
                     .end_date = hs_body_str(req, "endDate"),
                     .day_of_week = (int)json_integer_value(json_object_get(req->body, "dayOfWeek"))};
  const char *day = days[q.day_of_week];
  notice note = {
      provider, "provider", "Recurring service requested",
      arena_printf(&req->arena, "A customer asked for this job every %s (%s) until %s", day, q.time_slot, q.end_date),
      q.job_id};
  e = jobs_store_insert_recurring(&q, "A customer asked for a recurring service",
                                  arena_printf(&req->arena,
                                               "A customer asked you to repeat job %s every %s (%s) until %s.\nOpen "
                                               "the app to confirm the schedule.\n",
                                               q.job_id, day, q.time_slot, q.end_date),
                                  &note);
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b}", "requested", 1);
}

err_t api_reviews_create(hs_req *req) {
  db_res *job;
  err_t e = load_completed(req, hs_body_str(req, "jobId"), &job);
  if (e != ERR_OK) return e;
  const char *provider = db_field(job, 0, "provider_id"), *job_id = db_field(job, 0, "id");
  if (!provider) return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job has no provider");
  char id[ID_LEN + 1];
  id_new(id);
  int rating = (int)json_integer_value(json_object_get(req->body, "rating"));
  const char *comment = hs_body_str(req, "comment");
  int64_t now = clock_now_ms();
  db_res *row;
  jobs_outcome out =
      jobs_store_insert_review(&req->arena, id, job_id, req->auth.id, provider, rating, comment, now, &row);
  return out == JOBS_DONE ? hs_ok_row(req, JOBS_REVIEW_JSON, row) : jobs_fail(req, out);
}

/* ---- the account's part (domain/domain.h) ---- */

static const hs_rj_field RECURRING[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"customerId", "customer_id", RJ_STR},
    {"providerId", "provider_id", RJ_STR},
    {"dayOfWeek", "day_of_week", RJ_INT},
    {"timeSlot", "time_slot", RJ_STR},
    {"endDate", "end_date", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

err_t jobs_export_in(db_conn *c, const account_ref *who, account_export *x) {
  db_res *r[JOBS_EXPORT_PARTS];
  err_t e = account_read_in(c, x->a, who, JOBS_EXPORT_SQL, JOBS_EXPORT_PARTS, r);
  if (e) return e;
  jw *w = account_export_member(x, "jobs");
  shape_jobs *b = shape_jobs_bind(x->a, r[0]);
  jw_arr(w);
  for (int i = 0; i < r[0]->rows; i++)
    if (shape_job_open(w, b, r[0], i)) jw_obj_end(w);
  jw_arr_end(w);
  account_export_rows(x, "reviews", JOBS_REVIEW_JSON, r[1]);
  account_export_rows(x, "reports", REPORT, r[2]);
  account_export_rows(x, "recurringRequests", RECURRING, r[3]);
  return ERR_OK;
}
