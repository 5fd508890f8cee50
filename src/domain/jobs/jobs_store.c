/* jobs table access. Every change to a job rewrites its stored JSON (shapes.h) in the same
 * transaction, from the row the change returned (RETURNING *), so readers copy it as it is,
 * and writes its job.created or job.updated event there too (told_in), to the accounts that may
 * read the job: its customer, its provider, the providers matching it while it is open (the
 * feed), customer support, and professional support once a provider is assigned.
 * The provider feed reads the versions of the provider's (service, ZIP) pairs, takes each
 * pair's open jobs from the process's copy at that version or reads them again (one range
 * scan of jobs_feed_open in feed order), and the caller merges the pairs. */
#include "domain/jobs/jobs_store.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "domain/common.h"
#include "domain/events/events.h"
#include "domain/jobs/feed_cache.h"
#include "domain/jobs/jobs.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/shapes.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASAP_FEED_AT (-(1LL << 62)) /* before any date a job can carry */

/* The event of a change to the jobs row r[row] (a full row, after the change), on c. */
static db_rc told_in(db_conn *c, const char *kind, const db_res *r, int row) {
  arena a;
  arena_init(&a);
  jw w;
  jw_init(&w, &a, 1024);
  shape_job_open(&w, shape_jobs_bind(&a, r), r, row);
  jw_obj_end(&w);
  const char *status = db_field(r, row, "status"), *provider = db_field(r, row, "provider_id");
  bool open = !strcmp(status, "PENDING") || !strcmp(status, "QUOTED");
  event_new ev = {.kind = kind,
                  .data = jw_text(&w),
                  .user_id = db_field(r, row, "customer_id"),
                  .provider_id = provider,
                  .staff = ROLE_CUSTOMER_SUPPORT | (provider ? ROLE_PROFESSIONAL_SUPPORT : 0),
                  .match_service = open ? db_field(r, row, "service") : NULL,
                  .match_zip = open ? db_field(r, row, "zip") : NULL,
                  .match_job = open ? db_field(r, row, "id") : NULL};
  db_rc rc = events_emit_in(c, &ev);
  arena_fini(&a);
  return rc;
}

/* Saves the stored JSON of the changed row r[row] and tells of the change. */
static db_rc changed_in(db_conn *c, const db_res *r, int row) {
  db_rc rc = jobs_json_save_in(c, r, row);
  return rc == DB_OK ? told_in(c, "job.updated", r, row) : rc;
}

db_rc jobs_insert_in(db_conn *c, const job_new *j, arena *out_arena, db_res **row) {
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  db_rc rc = db_exec(
      c, out_arena ? out_arena : &a, &r,
      "INSERT INTO jobs (id, customer_id, service, description, preferred_at, is_asap, feed_at, details, address, "
      "zip, lat, lng, status, created_at, updated_at, seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
      "$12, 'PENDING', $13, $13, $14) RETURNING *",
      DB_ARGS(DB_TEXT(j->id), DB_TEXT(j->customer_id), DB_TEXT(j->service), DB_TEXT(j->description),
              j->has_preferred ? DB_INT(j->preferred_at) : DB_NULL, DB_BOOL(j->is_asap),
              DB_INT(j->is_asap ? ASAP_FEED_AT : j->preferred_at), DB_TEXT(j->details), DB_TEXT(j->address),
              DB_TEXT(j->zip), j->has_coords ? DB_REAL(j->lat) : DB_NULL, j->has_coords ? DB_REAL(j->lng) : DB_NULL,
              DB_INT(now), DB_INT(clock_sequence())));
  if (rc == DB_OK) rc = jobs_json_save_in(c, r, 0);
  if (rc == DB_OK) rc = told_in(c, "job.created", r, 0);
  if (row) *row = rc == DB_OK ? r : NULL;
  arena_fini(&a);
  return rc;
}

err_t jobs_store_insert(arena *a, const job_new *j, const char *urgent_title, const char *urgent_body, db_res **row) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(jobs_insert_in(c, j, a, row));
  if (!e && urgent_title)
    e = db_to_err(notify_matching_providers_in(c, j->service, j->zip, urgent_title, urgent_body, j->id));
  return db_end(c, e);
}

/* ---- the stored Job JSON ---- */

db_rc jobs_json_save_in(db_conn *c, const db_res *job, int row) {
  if (!job || row >= job->rows) return DB_OK;
  arena a;
  arena_init(&a);
  const char *head, *tail;
  shape_job_render(&a, job, row, &head, &tail);
  /* nothing waits for it: on PostgreSQL it goes with the transaction's next statement */
  db_rc rc = db_exec_later(c, NULL, NULL, "UPDATE jobs SET json_head = $2, json_tail = $3 WHERE id = $1",
                           DB_ARGS(DB_TEXT(db_field(job, row, "id")), DB_TEXT(head), DB_TEXT(tail)));
  arena_fini(&a);
  return rc;
}

db_rc jobs_json_refresh_in(db_conn *c, const char *id) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, "SELECT * FROM jobs WHERE id = $1", DB_ARGS(DB_TEXT(id)));
  if (rc == DB_OK) rc = jobs_json_save_in(c, r, 0);
  arena_fini(&a);
  return rc;
}

/* Saves the stored JSON of every row of r (a `RETURNING *` result on c) and tells of each. */
static db_rc save_all_in(db_conn *c, const db_res *r) {
  db_rc rc = DB_OK;
  for (int i = 0; rc == DB_OK && i < r->rows; i++) rc = changed_in(c, r, i);
  return rc;
}

/* Runs one statement that changes jobs rows (`... RETURNING *`) and saves their JSON. */
static db_rc change_in(db_conn *c, int *changed, const char *sql, const db_val *args, int n) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, sql, args, n);
  if (rc == DB_OK) rc = save_all_in(c, r);
  if (changed) *changed = rc == DB_OK ? r->rows : 0;
  arena_fini(&a);
  return rc;
}

db_rc jobs_accept_in(db_conn *c, const char *job_id, const char *provider_id, int64_t now, bool *accepted) {
  int n;
  db_rc rc = change_in(c, &n,
                       "UPDATE jobs SET status = 'ACCEPTED', provider_id = $2, accepted_at = $3, updated_at = $3, "
                       "json_head = NULL WHERE id = $1 AND status IN ('PENDING', 'QUOTED') RETURNING *",
                       DB_ARGS(DB_TEXT(job_id), DB_TEXT(provider_id), DB_INT(now)));
  *accepted = n == 1;
  return rc;
}

db_rc jobs_set_tip_in(db_conn *c, const char *job_id, int64_t cents) {
  return change_in(c, NULL, "UPDATE jobs SET tip_cents = $2, json_head = NULL WHERE id = $1 RETURNING *",
                   DB_ARGS(DB_TEXT(job_id), cents >= 0 ? DB_INT(cents) : DB_NULL));
}

db_rc jobs_lock_in(db_conn *c, const char *job_id) {
  /* SQLite: every write transaction runs on the one writer, after the one before it; a row
   * rewritten for nothing cost a page of the WAL. PostgreSQL: the lock an UPDATE takes, without
   * a new version of the row (nor its index entries) */
  if (db_engine_get() != DB_POSTGRES) return DB_OK;
  return db_exec_later(c, NULL, NULL, "SELECT 1 FROM jobs WHERE id = $1 FOR NO KEY UPDATE", DB_ARGS(DB_TEXT(job_id)));
}

db_rc jobs_reopen_quoted_by_in(db_conn *c, const char *provider_id, int64_t now) {
  return change_in(c, NULL,
                   "UPDATE jobs SET status = 'PENDING', updated_at = $2, json_head = NULL "
                   "WHERE status = 'QUOTED' AND provider_id IS NULL "
                   "AND id IN (SELECT job_id FROM quotes WHERE provider_id = $1) "
                   "AND NOT EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = jobs.id AND q.provider_id <> $1) "
                   "RETURNING *",
                   DB_ARGS(DB_TEXT(provider_id), DB_INT(now)));
}

/* The jobs of a deleted provider go back to PENDING without it (the quotes domain reopened
 * those it quoted alone when its quotes went: its forget_in runs before). */
static db_rc release_provider_in(db_conn *c, const char *provider_id, int64_t now) {
  db_rc rc =
      change_in(c, NULL,
                "UPDATE jobs SET status = 'PENDING', provider_id = NULL, accepted_at = NULL, completed_at = NULL, "
                "eta_minutes = NULL, before_images = '[]', after_images = '[]', updated_at = $2, "
                "json_head = NULL WHERE provider_id = $1 AND status <> 'CANCELLED' RETURNING *",
                DB_ARGS(DB_TEXT(provider_id), DB_INT(now)));
  if (rc == DB_OK)
    rc = change_in(c, NULL,
                   "UPDATE jobs SET provider_id = NULL, updated_at = $2, json_head = NULL WHERE provider_id = $1 "
                   "RETURNING *",
                   DB_ARGS(DB_TEXT(provider_id), DB_INT(now)));
  return rc;
}

/* The owner erases a customer account: its open jobs (PENDING, QUOTED) are CANCELLED, and every
 * job of it loses its address (""), coordinates and photos (their keys appended to removed, a
 * JSON array, for the caller to delete after the commit); the jobs stay, for the ledger. */
static db_rc erase_customer_in(db_conn *c, const char *customer_id, int64_t now, json_t *removed) {
  db_rc rc = change_in(c, NULL,
                       "UPDATE jobs SET status = 'CANCELLED', updated_at = $2, json_head = NULL "
                       "WHERE customer_id = $1 AND status IN ('PENDING', 'QUOTED') RETURNING *",
                       DB_ARGS(DB_TEXT(customer_id), DB_INT(now)));
  arena a;
  arena_init(&a);
  db_res *photos = NULL;
  /* read under the row locks the erasing takes (PostgreSQL), so no photo slips in between */
  const char *sql = db_engine_get() == DB_POSTGRES
                        ? "SELECT images, before_images, after_images FROM jobs WHERE customer_id = $1 FOR UPDATE"
                        : "SELECT images, before_images, after_images FROM jobs WHERE customer_id = $1";
  if (rc == DB_OK) rc = db_exec(c, &a, &photos, sql, DB_ARGS(DB_TEXT(customer_id)));
  for (int i = 0; rc == DB_OK && i < photos->rows; i++)
    for (int col = 0; removed && col < 3; col++) common_cell_keys(removed, db_text(photos, i, col));
  if (rc == DB_OK)
    rc = change_in(c, NULL,
                   "UPDATE jobs SET address = '', lat = NULL, lng = NULL, images = '[]', before_images = '[]', "
                   "after_images = '[]', json_head = NULL WHERE customer_id = $1 RETURNING *",
                   DB_ARGS(DB_TEXT(customer_id)));
  arena_fini(&a);
  return rc;
}

/* "'A', 'B'" from a NULL-terminated list of status constants (never input). */
static void status_list(const char *const *from, char *out, size_t cap) {
  out[0] = 0;
  for (int i = 0; from[i]; i++) snprintf(out + strlen(out), cap - strlen(out), "%s'%s'", i ? ", " : "", from[i]);
}

db_rc jobs_move_in(db_conn *c, const db_res *job, int row, const char *const *from, const char *to, int64_t now,
                   bool *moved) {
  const char *id = db_field(job, row, "id"), *old_head = db_field(job, row, "json_head");
  const char *old_tail = db_field(job, row, "json_tail");
  char in[160], sql[512], now_text[24];
  status_list(from, in, sizeof in);
  snprintf(now_text, sizeof now_text, "%lld", (long long)now);
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  db_rc rc = DB_OK;
  *moved = false;
  if (old_head && old_tail) { /* one statement: the new JSON, if the row is as it was read */
    static const char *const columns[] = {"status", "updated_at"};
    const char *values[] = {to, now_text}, *head, *tail;
    shape_job_render_with(&a, job, row, columns, values, 2, &head, &tail);
    /* a job that stays in its status (a second quote's QUOTED) leaves status out of the SET:
     * SQLite rewrites the entries of every index whose columns an UPDATE sets, equal or not
     * (jobs_feed, jobs_provider: two pages in the WAL of each such quote) */
    const char *old_status = db_field(job, row, "status");
    bool stays = old_status && !strcmp(old_status, to);
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET %supdated_at = $3, json_head = $4, json_tail = $5 "
             "WHERE id = $1 AND status IN (%s)%s AND json_head = $6 AND json_tail = $7 RETURNING *",
             stays ? "" : "status = $2, ", in, stays ? " AND status = $2" : "");
    /* the row comes back for its event, in the same round trip */
    rc = db_exec(c, &a, &r, sql,
                 DB_ARGS(DB_TEXT(id), DB_TEXT(to), DB_INT(now), DB_TEXT(head), DB_TEXT(tail), DB_TEXT(old_head),
                         DB_TEXT(old_tail)));
    *moved = rc == DB_OK && r->rows == 1;
    if (*moved) rc = told_in(c, "job.updated", r, 0);
  }
  if (rc == DB_OK && !*moved) { /* changed meanwhile, or without JSON: move it, render what moved */
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET status = $2, updated_at = $3, json_head = NULL WHERE id = $1 AND status IN (%s) "
             "RETURNING *",
             in);
    rc = db_exec(c, &a, &r, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(to), DB_INT(now)));
    *moved = rc == DB_OK && r->rows == 1;
    if (*moved) rc = changed_in(c, r, 0);
  }
  arena_fini(&a);
  return rc;
}

err_t jobs_store_repair_json(const char *const *ids, int n) {
  /* locked while rendered, so no change slips between the read and the write */
  const char *sql = db_engine_get() == DB_POSTGRES ? "SELECT * FROM jobs WHERE id = $1 AND json_head IS NULL FOR UPDATE"
                                                   : "SELECT * FROM jobs WHERE id = $1 AND json_head IS NULL";
  arena a;
  arena_init(&a);
  db_conn *c;
  err_t e = db_begin(&c);
  for (int i = 0; !e && i < n; i++) {
    db_res *r;
    e = db_to_err(db_exec(c, &a, &r, sql, DB_ARGS(DB_TEXT(ids[i]))));
    if (!e) e = db_to_err(jobs_json_save_in(c, r, 0));
  }
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

static err_t rows(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  return db_query(a, out, sql, params, n) == DB_OK ? ERR_OK : ERR_INTERNAL;
}

const db_keyset CUSTOMER_JOBS_KEYSET = {"jobs", {{"seq", "seq", 'i', true}, {"id", "id", 's', true}}};
const db_keyset FEED_KEYSET = {
    "feed", {{"feed_at", "feed_at", 'i', false}, {"seq", "seq", 'i', false}, {"id", "id", 's', false}}};
const db_keyset REPORTABLE_KEYSET = {
    "reportable", {{"j.updated_at", "updated_at", 'i', true}, {"j.seq", "seq", 'i', true}, {"j.id", "id", 's', true}}};

err_t jobs_store_customer_jobs(arena *a, const char *customer_id, const char *const *statuses, const db_page *pg,
                               db_res **out) {
  db_val args[DB_PAGE_ARGS(1 + JOB_STATUS_COUNT)] = {DB_TEXT(customer_id)};
  for (int i = 0; i < JOB_STATUS_COUNT; i++) args[1 + i] = DB_TEXT(statuses ? statuses[i] : JOB_STATUS_NAMES[i]);
  return db_to_err(db_page_query(a, pg,
                                 "SELECT * FROM jobs WHERE customer_id = $1 AND status IN ($2, $3, $4, $5, $6, $7, $8)",
                                 args, 1 + JOB_STATUS_COUNT, out));
}

#define FEED_COLUMNS "feed_at, seq, id, json_head, json_tail, images, before_images, after_images, status"

static int cmp_text(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

/* One pair's part read afresh for a page of the feed: the fetch jobs after the cursor's (one
 * range scan of jobs_feed_open), as a read for db_exec_all. */
static db_read feed_page_read(arena *a, const char *service, const char *zip, const db_page *pg,
                              const char *const open[2]) {
  db_val *args = arena_alloc(a, DB_PAGE_ARGS(4) * sizeof *args);
  args[0] = DB_TEXT(service), args[1] = DB_TEXT(zip), args[2] = DB_TEXT(open[0]), args[3] = DB_TEXT(open[1]);
  int n = 4;
  const char *sql = db_page_sql(a, pg,
                                db_engine_get() == DB_POSTGRES
                                    ? "SELECT " FEED_COLUMNS " FROM jobs WHERE service = $1 AND zip = $2 "
                                      "AND status IN ('PENDING', 'QUOTED') AND status IN ($3, $4)"
                                    : "SELECT " FEED_COLUMNS " FROM jobs INDEXED BY jobs_feed_open WHERE service = $1 "
                                      "AND zip = $2 AND status IN ('PENDING', 'QUOTED') AND status IN ($3, $4)",
                                args, &n);
  return (db_read){sql, args, n, NULL};
}

/* One statement for the versions of the provider's pairs and its pending quotes; unpaged, each
 * pair's jobs from the process's copy read at the same version (feed_cache.c), or read again
 * (one range scan of jobs_feed_open, in feed order: covering on SQLite) and kept. Reading the
 * versions before the rows keeps every copy at least as new as its version. A page reads each
 * pair afresh from its cursor (feed_page_part). */
static db_rc feed_read(db_conn *c, arena *a, const char *provider_id, const db_page *pg, const char *const open[2],
                       job_feed *out) {
  const char *part_sql = db_engine_get() == DB_POSTGRES
                             ? "SELECT " FEED_COLUMNS " FROM jobs WHERE service = $1 AND zip = $2 "
                               "AND status IN ('PENDING', 'QUOTED') ORDER BY feed_at, seq, id LIMIT 500"
                             : "SELECT " FEED_COLUMNS
                               " FROM jobs INDEXED BY jobs_feed_open WHERE service = $1 AND zip = $2 "
                               "AND status IN ('PENDING', 'QUOTED') ORDER BY feed_at, seq, id LIMIT 500";
  db_res *head;
  db_rc rc = db_exec(c, a, &head,
                     "SELECT 0 AS kind, s.service AS a, z.zip AS b, COALESCE(v.version, 0) AS version "
                     "FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
                     "LEFT JOIN feed_versions v ON v.service = s.service AND v.zip = z.zip WHERE s.provider_id = $1 "
                     "UNION ALL SELECT 1, job_id, NULL, 0 FROM quotes WHERE provider_id = $1 AND status = 'PENDING'",
                     DB_ARGS(DB_TEXT(provider_id)));
  if (rc != DB_OK) return rc;
  db_res *quoted = arena_alloc(a, sizeof *quoted);
  *quoted = (db_res){.cols = 1, .cells = arena_alloc(a, sizeof(char *) * (size_t)(head->rows + 1))};
  out->parts = arena_alloc(a, sizeof *out->parts * (size_t)(head->rows + 1));
  /* the pairs whose copy is missing or older are read again, all in one round trip */
  db_read *reads = arena_alloc(a, sizeof *reads * (size_t)(head->rows + 1));
  int *missing = arena_alloc(a, sizeof *missing * (size_t)(head->rows + 1)), nmissing = 0;
  for (int i = 0; i < head->rows; i++) {
    const char *x = db_text(head, i, 1), *zip = db_text(head, i, 2);
    if (db_int(head, i, 0) == 1) {
      quoted->cells[quoted->rows++] = (char *)x;
      continue;
    }
    /* a page reads each pair afresh from its cursor; the whole feed uses the copies */
    const db_res *part = pg->limit ? NULL : feed_cache_get(a, x, zip, db_int(head, i, 3));
    if (!part && pg->limit) {
      reads[nmissing] = feed_page_read(a, x, zip, pg, open);
      missing[nmissing++] = i;
    } else if (!part) {
      db_val *args = arena_alloc(a, 2 * sizeof *args);
      args[0] = DB_TEXT(x), args[1] = DB_TEXT(zip);
      reads[nmissing] = (db_read){part_sql, args, 2, NULL};
      missing[nmissing++] = i;
    }
    out->parts[out->nparts++] = part;
  }
  if (nmissing) rc = db_exec_all(c, a, reads, nmissing);
  for (int m = 0, p = 0; rc == DB_OK && m < nmissing; m++) {
    int i = missing[m];
    if (!pg->limit) feed_cache_put(db_text(head, i, 1), db_text(head, i, 2), db_int(head, i, 3), reads[m].res);
    while (out->parts[p]) p++; /* the m-th missing part is the m-th hole */
    out->parts[p++] = reads[m].res;
  }
  qsort(quoted->cells, (size_t)quoted->rows, sizeof *quoted->cells, cmp_text);
  out->quoted = quoted;
  return rc;
}

err_t jobs_store_feed(arena *a, const char *provider_id, const db_page *pg, const char *const open[2], job_feed *out) {
  *out = (job_feed){0};
  db_conn *c = db_acquire();
  db_rc rc = feed_read(c, a, provider_id, pg, open, out);
  db_release(c);
  return rc == DB_OK ? ERR_OK : ERR_INTERNAL;
}

/* "t.col AS prefix_col, " for each field's column: the detail reads exactly the columns the
 * Payment and Quote JSON tables name, so a member added to either reaches GET /jobs/:id. */
static void select_fields(char *sql, size_t cap, const char *table, const char *prefix, const hs_rj_field *fields) {
  for (const hs_rj_field *f = fields; f->key; f++)
    snprintf(sql + strlen(sql), cap - strlen(sql), ", %s.%s AS %s%s", table, f->column, prefix, f->column);
}

static char detail_sql[4096];
static pthread_once_t detail_once = PTHREAD_ONCE_INIT;

static void detail_sql_build(void) {
  snprintf(detail_sql, sizeof detail_sql, "%s",
           "SELECT j.id, j.customer_id, j.provider_id, j.status, j.json_head, j.json_tail, j.images, "
           "j.before_images, j.after_images, cu.id AS customer_card_id, cu.name AS customer_card_name, "
           "pr.id AS provider_card_id, pr.name AS provider_card_name, pr.company_name AS provider_card_company_name, "
           "pr.phone AS provider_card_phone, "
           "CASE WHEN EXISTS (SELECT 1 FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
           "WHERE s.provider_id = $2 AND s.service = j.service AND z.zip = j.zip) THEN 1 ELSE 0 END AS viewer_matches");
  select_fields(detail_sql, sizeof detail_sql, "pay", "payment_", PAYMENTS_JSON);
  select_fields(detail_sql, sizeof detail_sql, "q", "quote_", SHAPE_QUOTE);
  snprintf(detail_sql + strlen(detail_sql), sizeof detail_sql - strlen(detail_sql), "%s",
           " FROM jobs j LEFT JOIN users cu ON cu.id = j.customer_id LEFT JOIN providers pr ON pr.id = j.provider_id "
           "LEFT JOIN payments pay ON pay.job_id = j.id AND pay.kind = 'job' AND pay.released_at IS NULL "
           "LEFT JOIN quotes q ON q.job_id = j.id AND (j.customer_id = $3 OR q.provider_id = $2) "
           "WHERE j.id = $1 ORDER BY q.seq");
}

err_t jobs_store_detail(arena *a, const char *id, const char *provider_id, const char *customer_id, db_res **out) {
  pthread_once(&detail_once, detail_sql_build);
  return db_query_row(
      a, out, detail_sql,
      DB_ARGS(DB_TEXT(id), DB_TEXT(provider_id ? provider_id : ""), DB_TEXT(customer_id ? customer_id : "")));
}

err_t jobs_store_user_location(arena *a, const char *user_id, const char *address_id, db_res **out) {
  if (address_id)
    return rows(
        a, out,
        "SELECT a.address, a.zip, u.lat, u.lng, 1 AS saved FROM user_addresses a JOIN users u ON u.id = a.user_id "
        "WHERE a.id = $1 AND a.user_id = $2",
        DB_ARGS(DB_TEXT(address_id), DB_TEXT(user_id)));
  return rows(a, out, "SELECT address, zip, lat, lng, 0 AS saved FROM users WHERE id = $1", DB_ARGS(DB_TEXT(user_id)));
}

err_t jobs_store_move(arena *a, const job_move *m, db_res **row) {
  char sql[640], in[160], set[96] = "", who[48] = "";
  db_val args[5] = {DB_TEXT(m->id), DB_TEXT(m->to), DB_INT(clock_now_ms())};
  int n = 3;
  status_list(m->from, in, sizeof in);
  if (m->extra_column) {
    args[n++] = m->extra;
    snprintf(set, sizeof set, ", %s = $%d", m->extra_column, n);
  }
  if (m->provider_id) {
    args[n++] = DB_TEXT(m->provider_id);
    snprintf(who, sizeof who, " AND provider_id = $%d", n);
  }
  /* whether the customer has a push device comes back with the row, for the notification */
#define CUSTOMER_DEVICE PUSH_DEVICE_SQL("jobs.customer_id", "user")
  snprintf(sql, sizeof sql,
           "UPDATE jobs SET status = $2, updated_at = $3, json_head = NULL%s%s WHERE id = $1 AND status IN (%s)%s "
           "RETURNING *, " CUSTOMER_DEVICE " AS customer_push_device",
           strcmp(m->to, "COMPLETED") ? "" : ", completed_at = $3", set, in, who);
  db_res *r = NULL;
  db_conn *c;
  err_t e = db_begin_exec(&c, a, &r, sql, args, n);
  bool moved = !e && r->rows == 1;
  if (moved) e = db_to_err(changed_in(c, r, 0));
  if (moved && !e && m->note) {
    m->note->account_id = db_field(r, 0, "customer_id");
    e = db_to_err(notify_in_known(c, m->note, db_field(r, 0, "customer_push_device") != NULL));
  }
  e = db_end(c, e);
  *row = !e && moved ? r : NULL;
  return e;
}

err_t jobs_store_append_images(const char *id, const char *keys_json) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c;
  char *merged = NULL;
  bool pg = db_engine_get() == DB_POSTGRES;
  err_t e = db_begin(&c);
  /* PostgreSQL appends in the update itself, under the row's lock; on SQLite the transaction
   * holds the write lock, so the list is read and written back */
  if (!e && !pg) e = db_to_err(db_exec(c, &a, &r, "SELECT images FROM jobs WHERE id = $1", DB_ARGS(DB_TEXT(id))));
  if (!e && !pg && r->rows == 1) {
    json_t *all = jx_parse_or(db_text(r, 0, 0), json_array()), *add = jx_parse_or(keys_json, json_array());
    json_array_extend(all, add);
    merged = json_dumps(all, JSON_COMPACT);
    json_decref(all), json_decref(add);
  }
  if (!e && (pg || merged))
    e = db_to_err(
        db_exec(c, &a, &r,
                pg ? "UPDATE jobs SET images = (images::jsonb || $2::jsonb)::text, updated_at = $3, "
                     "json_head = NULL WHERE id = $1 RETURNING *"
                   : "UPDATE jobs SET images = $2, updated_at = $3, json_head = NULL WHERE id = $1 RETURNING *",
                DB_ARGS(DB_TEXT(id), DB_TEXT(pg ? keys_json : merged), DB_INT(clock_now_ms()))));
  free(merged);
  if (!e && r->rows == 1) e = db_to_err(changed_in(c, r, 0));
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

err_t jobs_store_reportable(arena *a, const char *customer_id, int64_t since, const db_page *pg, db_res **out) {
  db_val args[DB_PAGE_ARGS(2)] = {DB_TEXT(customer_id), DB_INT(since)};
  return db_to_err(db_page_query(a, pg,
                                 "SELECT j.*, p.name AS provider_name, p.company_name AS provider_company FROM jobs j "
                                 "LEFT JOIN providers p ON p.id = j.provider_id "
                                 "WHERE j.customer_id = $1 AND j.status = 'COMPLETED' AND j.completed_at >= $2 "
                                 "AND NOT EXISTS (SELECT 1 FROM job_reports r WHERE r.job_id = j.id)",
                                 args, 2, out));
}

err_t jobs_store_has_report(const char *job_id, bool *has) {
  return db_to_err(db_exists(has, "SELECT 1 FROM job_reports WHERE job_id = $1", DB_ARGS(DB_TEXT(job_id))));
}

/* A unique index's refusal as outcome taken; any other failure as JOBS_FAILED. */
static jobs_outcome record_outcome(err_t e, jobs_outcome taken) {
  return e == ERR_OK ? JOBS_DONE : e == ERR_CONFLICT ? taken : JOBS_FAILED;
}

jobs_outcome jobs_store_insert_report(arena *a, const char *id, const char *job_id, const char *customer_id,
                                      const char *description, int64_t now, db_res **row) {
  db_conn *c;
  err_t e =
      db_begin_exec(&c, a, row,
                    "INSERT INTO job_reports (id, job_id, customer_id, description, created_at) "
                    "VALUES ($1, $2, $3, $4, $5) RETURNING *",
                    DB_ARGS(DB_TEXT(id), DB_TEXT(job_id), DB_TEXT(customer_id), DB_TEXT(description), DB_INT(now)));
  int64_t held = 0;
  if (!e) e = db_to_err(payouts_hold_job_in(c, job_id, now, &held)); /* the provider's transfers wait for staff */
  if (!e && held > 0) { /* money nobody sees is money nobody releases: customer support is told */
    char until[25];
    clock_format_iso(now + PAYOUTS_HOLD_MS, until);
    e = db_to_err(notify_staff_in(
        c, "customer_support", arena_printf(a, "A report holds $%.2f of job %s", (double)held / 100, job_id),
        arena_printf(a,
                     "The customer reported job %s after its completion:\n\n%s\n\nThe provider's $%.2f for it is "
                     "held until %s, then paid unless you act. Resolve it in the staff portal: GET /staff/reports, "
                     "then POST /staff/reports/%s/resolve (release the money, or refund the customer).\n",
                     job_id, description, (double)held / 100, until, id)));
  }
  return record_outcome(db_end(c, e), JOBS_ALREADY_REPORTED);
}

const db_keyset REPORTS_KEYSET = {"reports", {{"rp.created_at", "created_at", 'i', true}, {"rp.id", "id", 's', true}}};

#define REPORTS_SQL                                                                                                    \
  "SELECT rp.id, rp.job_id, rp.customer_id, rp.description, rp.status, rp.resolution, rp.resolution_note, "            \
  "rp.resolved_by, rp.resolved_at, rp.created_at, j.service, j.status AS job_status, j.provider_id "                   \
  "FROM job_reports rp JOIN jobs j ON j.id = rp.job_id WHERE "

err_t jobs_reports(arena *a, const char *status, const db_page *pg, db_res **out) {
  db_val args[DB_PAGE_ARGS(1)] = {DB_TEXT(status)};
  return db_to_err(status ? db_page_query(a, pg, REPORTS_SQL "rp.status = $1", args, 1, out)
                          : db_page_query(a, pg, REPORTS_SQL "1 = 1", args, 0, out));
}

err_t jobs_report(arena *a, const char *id, db_res **out) {
  return db_to_err(db_query(a, out, REPORTS_SQL "rp.id = $1", DB_ARGS(DB_TEXT(id))));
}

db_rc jobs_report_resolve_in(db_conn *c, const char *id, const char *action, const char *note, const char *staff_id,
                             int64_t now, bool *resolved) {
  return db_changes_in(c, resolved,
                       "UPDATE job_reports SET status = 'resolved', resolution = $2, resolution_note = $3, "
                       "resolved_by = $4, resolved_at = $5 WHERE id = $1 AND status = 'open'",
                       DB_ARGS(DB_TEXT(id), DB_TEXT(action), DB_TEXT(note), DB_TEXT(staff_id), DB_INT(now)));
}

err_t jobs_store_prune_reports(int64_t now) {
  return db_to_err(db_query(NULL, NULL, "DELETE FROM job_reports WHERE keep_until IS NOT NULL AND keep_until < $1",
                            DB_ARGS(DB_INT(now))));
}

jobs_outcome jobs_store_insert_review(arena *a, const char *id, const char *job_id, const char *customer_id,
                                      const char *provider_id, int rating, const char *comment, int64_t now,
                                      db_res **row) {
  return record_outcome(
      db_to_err(db_query(a, row,
                         "INSERT INTO reviews (id, job_id, customer_id, provider_id, rating, comment, created_at) "
                         "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
                         DB_ARGS(DB_TEXT(id), DB_TEXT(job_id), DB_TEXT(customer_id), DB_TEXT(provider_id),
                                 DB_INT(rating), DB_TEXT(comment), DB_INT(now)))),
      JOBS_ALREADY_REVIEWED);
}

err_t jobs_store_insert_recurring(const recurring_new *q, const char *subject, const char *mail_body,
                                  const notice *note) {
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t now = clock_now_ms();
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL,
                          "INSERT INTO recurring_requests (id, job_id, customer_id, provider_id, day_of_week, "
                          "time_slot, end_date, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                          DB_ARGS(DB_TEXT(q->id), DB_TEXT(q->job_id), DB_TEXT(q->customer_id), DB_TEXT(q->provider_id),
                                  DB_INT(q->day_of_week), DB_TEXT(q->time_slot), DB_TEXT(q->end_date), DB_INT(now)));
  if (!e)
    e = db_to_err(db_exec(c, &a, &r, "SELECT email FROM providers WHERE id = $1", DB_ARGS(DB_TEXT(q->provider_id))));
  if (!e && r->rows) e = db_to_err(mail_enqueue(c, db_text(r, 0, 0), subject, mail_body));
  if (!e) e = db_to_err(notify_in(c, note));
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

static const char JOB_SQL[] = "SELECT * FROM jobs WHERE id = $1";

err_t jobs_get(arena *a, const char *id, db_res **row) { return db_query_row(a, row, JOB_SQL, DB_ARGS(DB_TEXT(id))); }

db_read jobs_read(arena *a, const char *id) { return db_read_make(a, JOB_SQL, DB_ARGS(DB_TEXT(id))); }

bool jobs_provider_matches(const char *provider_id, const char *service, const char *zip) {
  bool found;
  return db_exists(&found,
                   "SELECT 1 FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
                   "WHERE s.provider_id = $1 AND s.service = $2 AND z.zip = $3",
                   DB_ARGS(DB_TEXT(provider_id), DB_TEXT(service), DB_TEXT(zip))) == DB_OK &&
         found;
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const JOBS_EXPORT_SQL[JOBS_EXPORT_PARTS][2] = {
    {"SELECT * FROM jobs WHERE customer_id = $1 ORDER BY seq",
     "SELECT * FROM jobs WHERE provider_id = $1 ORDER BY seq"},
    {"SELECT * FROM reviews WHERE customer_id = $1 ORDER BY created_at, id",
     "SELECT * FROM reviews WHERE provider_id = $1 ORDER BY created_at, id"},
    {"SELECT * FROM job_reports WHERE customer_id = $1 ORDER BY created_at, id", NULL},
    {"SELECT * FROM recurring_requests WHERE customer_id = $1 ORDER BY created_at, id",
     "SELECT * FROM recurring_requests WHERE provider_id = $1 ORDER BY created_at, id"},
};

#define OF_CUSTOMER "(SELECT id FROM jobs WHERE customer_id = $1)"
/* $1 = the account's id: [mode][provider]. */
static const char *const forget_sql[][2][4] = {
    [FORGET_ERASE] = {{"DELETE FROM recurring_requests WHERE customer_id = $1"},
                      {"DELETE FROM recurring_requests WHERE provider_id = $1"}},
    [FORGET_DELETE] = {{"DELETE FROM reviews WHERE customer_id = $1 OR job_id IN " OF_CUSTOMER,
                        "DELETE FROM job_reports WHERE customer_id = $1 OR job_id IN " OF_CUSTOMER,
                        "DELETE FROM recurring_requests WHERE customer_id = $1 OR job_id IN " OF_CUSTOMER,
                        "DELETE FROM jobs WHERE customer_id = $1"},
                       {"DELETE FROM reviews WHERE provider_id = $1",
                        "DELETE FROM recurring_requests WHERE provider_id = $1"}},
};

err_t jobs_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  db_rc rc = DB_OK;
  if (mode == FORGET_ERASE && !who->provider) rc = erase_customer_in(c, who->id, who->now, who->files);
  if (rc == DB_OK && mode == FORGET_ERASE && !who->provider) /* kept for the dispute window, anonymous */
    rc = db_exec(c, NULL, NULL,
                 "UPDATE job_reports SET customer_id = NULL, keep_until = created_at + $2 WHERE customer_id = $1",
                 DB_ARGS(DB_TEXT(who->id), DB_INT(JOBS_REPORT_KEPT_MS)));
  /* the rows of lower domains that name its jobs go first: a customer's payments (nothing was
     paid for them), a provider's jobs' current payments to their history */
  if (mode == FORGET_DELETE && !who->provider) rc = payments_forget_customer_in(c, who->id);
  if (mode == FORGET_DELETE && who->provider) rc = payments_release_provider_jobs_in(c, who->id);
  if (rc == DB_OK && mode == FORGET_DELETE && who->provider) rc = release_provider_in(c, who->id, who->now);
  return rc != DB_OK ? db_to_err(rc) : account_exec_in(c, who, forget_sql[mode][who->provider], 4, NULL);
}
