/* jobs table access. The provider feed is one indexed query: jobs (service, zip, status,
 * feed_at) joined with the provider's normalised services and ZIPs. */
#include "domain/jobs/jobs_store.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "domain/notifications/notifications.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASAP_FEED_AT (-(1LL << 62)) /* before any date a job can carry */

db_rc jobs_insert_in(db_conn *c, const job_new *j) {
  int64_t now = clock_now_ms();
  return db_exec(
      c, NULL, NULL,
      "INSERT INTO jobs (id, customer_id, service, description, preferred_at, is_asap, feed_at, details, address, "
      "zip, lat, lng, status, created_at, updated_at, seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
      "$12, 'PENDING', $13, $13, $14)",
      DB_ARGS(DB_TEXT(j->id), DB_TEXT(j->customer_id), DB_TEXT(j->service), DB_TEXT(j->description),
              j->has_preferred ? DB_INT(j->preferred_at) : DB_NULL, DB_BOOL(j->is_asap),
              DB_INT(j->is_asap ? ASAP_FEED_AT : j->preferred_at), DB_TEXT(j->details), DB_TEXT(j->address),
              DB_TEXT(j->zip), j->has_coords ? DB_REAL(j->lat) : DB_NULL, j->has_coords ? DB_REAL(j->lng) : DB_NULL,
              DB_INT(now), DB_INT(clock_sequence())));
}

err_t jobs_store_insert(const job_new *j, const char *urgent_title, const char *urgent_body) {
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK) rc = jobs_insert_in(c, j);
  if (rc == DB_OK && urgent_title)
    rc = notify_matching_providers_in(c, j->service, j->zip, urgent_title, urgent_body, j->id);
  return db_to_err(queue_commit(c, rc));
}

static err_t rows(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  return db_query(a, out, sql, params, n) == DB_OK ? ERR_OK : ERR_INTERNAL;
}

err_t jobs_store_customer_jobs(arena *a, const char *customer_id, db_res **out) {
  return rows(a, out, "SELECT * FROM jobs WHERE customer_id = $1 ORDER BY seq DESC",
              DB_ARGS(DB_TEXT(customer_id)));
}

err_t jobs_store_feed(arena *a, const char *provider_id, db_res **out) {
  return rows(a, out,
              "SELECT j.*, CASE WHEN EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = j.id AND q.provider_id = $1) "
              "THEN 1 ELSE 0 END AS quoted FROM jobs j "
              "JOIN provider_services ps ON ps.provider_id = $1 AND ps.service = j.service "
              "JOIN provider_zips pz ON pz.provider_id = $1 AND pz.zip = j.zip "
              "WHERE j.status IN ('PENDING', 'QUOTED') ORDER BY j.feed_at, j.seq LIMIT 500",
              DB_ARGS(DB_TEXT(provider_id)));
}

err_t jobs_store_customer_card(arena *a, const char *customer_id, db_res **out) {
  return rows(a, out, "SELECT id, name, email, address, zip FROM users WHERE id = $1", DB_ARGS(DB_TEXT(customer_id)));
}

err_t jobs_store_provider_card(arena *a, const char *provider_id, db_res **out) {
  return rows(a, out,
              "SELECT p.id, p.name, p.phone, p.company_name, p.company_url, p.insurance_info, p.logo_url, "
              "(SELECT AVG(CAST(rating AS DOUBLE PRECISION)) FROM reviews r WHERE r.provider_id = p.id) AS average_rating "
              "FROM providers p WHERE p.id = $1",
              DB_ARGS(DB_TEXT(provider_id)));
}

err_t jobs_store_quotes_of(arena *a, const char *job_id, const char *provider_id, db_res **out) {
  if (provider_id)
    return rows(a, out, "SELECT * FROM quotes WHERE job_id = $1 AND provider_id = $2 ORDER BY seq",
                DB_ARGS(DB_TEXT(job_id), DB_TEXT(provider_id)));
  return rows(a, out, "SELECT * FROM quotes WHERE job_id = $1 ORDER BY seq", DB_ARGS(DB_TEXT(job_id)));
}

err_t jobs_store_user_location(arena *a, const char *user_id, const char *address_id, db_res **out) {
  if (address_id)
    return rows(a, out,
                "SELECT a.address, a.zip, u.lat, u.lng, 1 AS saved FROM user_addresses a JOIN users u ON u.id = a.user_id "
                "WHERE a.id = $1 AND a.user_id = $2",
                DB_ARGS(DB_TEXT(address_id), DB_TEXT(user_id)));
  return rows(a, out, "SELECT address, zip, lat, lng, 0 AS saved FROM users WHERE id = $1", DB_ARGS(DB_TEXT(user_id)));
}

err_t jobs_store_move(const char *id, const char *const *from, const char *to, const char *provider_id,
                      const char *extra_column, db_val extra, bool *moved) {
  char sql[512], in[160] = "", set[96] = "", who[48] = "";
  db_val args[5] = {DB_TEXT(id), DB_TEXT(to), DB_INT(clock_now_ms())};
  int n = 3;
  for (int i = 0; from[i]; i++) /* status names are constants of this file's callers, never input */
    snprintf(in + strlen(in), sizeof in - strlen(in), "%s'%s'", i ? ", " : "", from[i]);
  if (extra_column) {
    args[n++] = extra;
    snprintf(set, sizeof set, ", %s = $%d", extra_column, n);
  }
  if (provider_id) {
    args[n++] = DB_TEXT(provider_id);
    snprintf(who, sizeof who, " AND provider_id = $%d", n);
  }
  snprintf(sql, sizeof sql, "UPDATE jobs SET status = $2, updated_at = $3%s%s WHERE id = $1 AND status IN (%s)%s",
           strcmp(to, "COMPLETED") ? "" : ", completed_at = $3", set, in, who);
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, sql, args, n);
  *moved = rc == DB_OK && r->changes == 1;
  arena_fini(&a);
  return db_to_err(rc);
}

err_t jobs_store_move_with_photos(const char *id, const char *from, const char *to, const char *provider_id,
                                  const char *column, const char *photos_json, bool *moved) {
  const char *const states[] = {from, NULL};
  return jobs_store_move(id, states, to, provider_id, column, DB_TEXT(photos_json), moved);
}

err_t jobs_store_append_images(const char *id, const char *keys_json) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  /* the no-op update takes the row lock (the write lock on SQLite) before the read */
  if (rc == DB_OK) rc = db_exec(c, NULL, NULL, "UPDATE jobs SET id = id WHERE id = $1", DB_ARGS(DB_TEXT(id)));
  if (rc == DB_OK) rc = db_exec(c, &a, &r, "SELECT images FROM jobs WHERE id = $1", DB_ARGS(DB_TEXT(id)));
  if (rc == DB_OK && r->rows == 1) {
    json_t *all = jx_parse_or(db_text(r, 0, 0), json_array()), *add = jx_parse_or(keys_json, json_array());
    json_array_extend(all, add);
    char *text = json_dumps(all, JSON_COMPACT);
    json_decref(all), json_decref(add);
    rc = db_exec(c, NULL, NULL, "UPDATE jobs SET images = $2, updated_at = $3 WHERE id = $1",
                 DB_ARGS(DB_TEXT(id), DB_TEXT(text), DB_INT(clock_now_ms())));
    free(text);
  }
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  arena_fini(&a);
  return db_to_err(rc);
}

err_t jobs_store_reportable(arena *a, const char *customer_id, int64_t since, db_res **out) {
  return rows(a, out,
              "SELECT j.*, p.name AS provider_name, p.company_name AS provider_company FROM jobs j "
              "LEFT JOIN providers p ON p.id = j.provider_id "
              "WHERE j.customer_id = $1 AND j.status = 'COMPLETED' AND j.completed_at >= $2 "
              "AND NOT EXISTS (SELECT 1 FROM job_reports r WHERE r.job_id = j.id) ORDER BY j.updated_at DESC, j.seq DESC",
              DB_ARGS(DB_TEXT(customer_id), DB_INT(since)));
}

err_t jobs_store_has_report(const char *job_id, bool *has) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, "SELECT 1 FROM job_reports WHERE job_id = $1", DB_ARGS(DB_TEXT(job_id)));
  *has = rc == DB_OK && r->rows > 0;
  arena_fini(&a);
  return db_to_err(rc);
}

err_t jobs_store_insert_report(const char *id, const char *job_id, const char *customer_id, const char *description,
                               int64_t now) {
  return db_to_err(db_query(NULL, NULL,
                            "INSERT INTO job_reports (id, job_id, customer_id, description, created_at) "
                            "VALUES ($1, $2, $3, $4, $5)",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(job_id), DB_TEXT(customer_id), DB_TEXT(description),
                                    DB_INT(now))));
}

err_t jobs_store_insert_review(const char *id, const char *job_id, const char *customer_id, const char *provider_id,
                               int rating, const char *comment, int64_t now) {
  return db_to_err(db_query(NULL, NULL,
                            "INSERT INTO reviews (id, job_id, customer_id, provider_id, rating, comment, created_at) "
                            "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(job_id), DB_TEXT(customer_id), DB_TEXT(provider_id),
                                    DB_INT(rating), DB_TEXT(comment), DB_INT(now))));
}

err_t jobs_store_insert_recurring(const recurring_new *q, const char *subject, const char *mail_body,
                                  const notice *note) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL,
                 "INSERT INTO recurring_requests (id, job_id, customer_id, provider_id, day_of_week, time_slot, "
                 "end_date, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                 DB_ARGS(DB_TEXT(q->id), DB_TEXT(q->job_id), DB_TEXT(q->customer_id), DB_TEXT(q->provider_id),
                         DB_INT(q->day_of_week), DB_TEXT(q->time_slot), DB_TEXT(q->end_date), DB_INT(clock_now_ms())));
  if (rc == DB_OK)
    rc = db_exec(c, &a, &r, "SELECT email FROM providers WHERE id = $1", DB_ARGS(DB_TEXT(q->provider_id)));
  if (rc == DB_OK && r->rows) rc = mail_enqueue(c, db_text(r, 0, 0), subject, mail_body);
  if (rc == DB_OK) rc = notify_in(c, note);
  rc = queue_commit(c, rc);
  arena_fini(&a);
  return db_to_err(rc);
}
