/* SQL of the provider's work views and business tools: reads over jobs, quotes, payments and
 * reviews keyed by the provider (indexes jobs_provider, quotes_provider, reviews_provider),
 * and the two writes (availability, Preferred Pro). Figures are aggregated by the callers,
 * in C, from these rows. */
#include "core/clock.h"
#include "domain/common.h"
#include "domain/providers/providers_store.h"
#include <stdio.h>
#include <string.h>

/* the accepted quote of a job assigned to provider $1 */
#define WON_QUOTE "JOIN quotes q ON q.job_id = j.id AND q.provider_id = $1 AND q.status = 'ACCEPTED' "

#define DATED(at) "CASE WHEN " at " IS NULL THEN 0 ELSE 1 END"
#define JOB_AT "preferred_at"
#define SCHEDULE_AT "COALESCE(q.scheduled_at, j.preferred_at)"

const db_keyset PROVIDER_JOBS_KEYSET = {"provider-jobs",
                                        {{DATED(JOB_AT), "page_dated", 'i', false},
                                         {"COALESCE(" JOB_AT ", 0)", "page_at", 'i', false},
                                         {"seq", "seq", 'i', false},
                                         {"id", "id", 's', false}}};
const db_keyset SCHEDULE_KEYSET = {"schedule",
                                   {{DATED(SCHEDULE_AT), "page_dated", 'i', false},
                                    {"COALESCE(" SCHEDULE_AT ", 0)", "page_at", 'i', false},
                                    {"j.seq", "seq", 'i', false},
                                    {"j.id", "id", 's', false}}};

err_t prov_store_assigned_jobs(arena *a, const char *id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT *, " DATED(JOB_AT) " AS page_dated, COALESCE(" JOB_AT ", 0) AS page_at "
                                                 "FROM jobs WHERE provider_id = $1",
                      id, out);
}

err_t prov_store_schedule(arena *a, const char *id, const db_page *pg, db_res **out) {
  return db_page_rows(
      a, pg,
      "SELECT j.id, j.service, j.address, j.zip, j.status, u.name AS customer_name, " SCHEDULE_AT " AS scheduled_at, "
      "q.amount_cents, j.seq, " DATED(
          SCHEDULE_AT) " AS page_dated, COALESCE(" SCHEDULE_AT ", 0) AS page_at "
                       "FROM jobs j " WON_QUOTE "LEFT JOIN users u ON u.id = j.customer_id "
                       "WHERE j.provider_id = $1 AND j.status IN ('ACCEPTED', 'ON_THE_WAY', 'IN_PROGRESS')",
      id, out);
}

err_t prov_store_set_availability(const char *id, const char *json) {
  int64_t changed;
  db_rc rc = db_changes_count(&changed, "UPDATE providers SET availability = $2, updated_at = $3 WHERE id = $1",
                              DB_ARGS(DB_TEXT(id), DB_TEXT(json), DB_INT(clock_now_ms())));
  return rc != DB_OK ? ERR_INTERNAL : changed ? ERR_OK : ERR_NOT_FOUND;
}

db_rc prov_store_set_billed_month_in(db_conn *c, const char *id, const char *month) {
  return db_exec(c, NULL, NULL, "UPDATE providers SET premium_billed_month = $2, updated_at = $3 WHERE id = $1",
                 DB_ARGS(DB_TEXT(id), DB_TEXT(month), DB_INT(clock_now_ms())));
}

/* a membership that lasts at $2 (joined, and not ended by a cancellation whose end came) */
#define LIVE "(is_premium = 1 AND (premium_ends_at IS NULL OR premium_ends_at > $2))"

membership_outcome prov_store_join_preferred_pro(const char *id, int64_t now) {
  arena a;
  arena_init(&a);
  db_res *r;
  /* the condition decides concurrent applications: one changes the row, the others none; a
     member whose cancellation has not taken effect yet keeps the membership going instead */
  /* (a membership whose end came is over, whether or not the hourly task cleared it yet) */
  db_rc rc = db_query(&a, &r,
                      "UPDATE providers SET is_premium = 1, premium_since = CASE WHEN " LIVE " THEN premium_since "
                      "ELSE $2 END, preferred_pro_applied_at = CASE WHEN " LIVE " THEN preferred_pro_applied_at "
                      "ELSE $2 END, premium_ends_at = NULL, updated_at = $2 WHERE id = $1 AND (is_premium = 0 OR "
                      "premium_ends_at IS NOT NULL) RETURNING preferred_pro_applied_at",
                      DB_ARGS(DB_TEXT(id), DB_INT(now)));
  membership_outcome out = rc != DB_OK              ? MEMBERSHIP_FAILED
                           : !r->rows               ? MEMBERSHIP_ALREADY_MEMBER
                           : db_int(r, 0, 0) != now ? MEMBERSHIP_RESUMED
                                                    : MEMBERSHIP_JOINED;
  arena_fini(&a);
  return out;
}

membership_outcome prov_store_cancel_preferred_pro(const char *id, int64_t now, int64_t ends_at, int64_t *ends) {
  arena a;
  arena_init(&a);
  db_res *r;
  *ends = 0;
  db_rc rc = db_query(&a, &r,
                      "UPDATE providers SET premium_ends_at = COALESCE(premium_ends_at, $3), updated_at = $2 "
                      "WHERE id = $1 AND is_premium = 1 AND (premium_ends_at IS NULL OR premium_ends_at > $2) "
                      "RETURNING premium_ends_at",
                      DB_ARGS(DB_TEXT(id), DB_INT(now), DB_INT(ends_at)));
  membership_outcome out = rc != DB_OK ? MEMBERSHIP_FAILED : r->rows ? MEMBERSHIP_CANCELLED : MEMBERSHIP_NOT_MEMBER;
  if (out == MEMBERSHIP_CANCELLED) *ends = db_int(r, 0, 0);
  arena_fini(&a);
  return out;
}

err_t prov_store_end_preferred_pro(int64_t now, int *ended) {
  int64_t count;
  db_rc rc = db_changes_count(&count,
                              "UPDATE providers SET is_premium = 0, premium_since = NULL, premium_ends_at = NULL, "
                              "updated_at = $1 WHERE is_premium = 1 AND premium_ends_at <= $1",
                              DB_ARGS(DB_INT(now)));
  *ended = (int)count;
  return db_to_err(rc);
}

db_read prov_read_won_jobs(arena *a, const char *id) {
  return db_read_make(
      a,
      "SELECT j.service, j.zip, j.status, j.accepted_at, COALESCE(j.completed_at, j.updated_at) AS completed_at, "
      /* what the provider bears: refunds it shares and lost disputes, not the platform's goodwill */
      "q.amount_cents, p.status AS pay_status, p.amount_cents AS pay_cents, "
      "p.refunded_cents - p.goodwill_cents + p.lost_cents AS pay_refunded_cents, "
      "COALESCE((SELECT SUM(t.amount_cents - t.refunded_cents + t.goodwill_cents - t.lost_cents) FROM payments t "
      "WHERE t.job_id = j.id "
      "AND t.kind = 'tip' AND t.released_at IS NULL AND t.status IN ('PAID', 'REFUNDED')), 0) AS tip_cents "
      "FROM jobs j " WON_QUOTE "LEFT JOIN payments p ON p.job_id = j.id AND p.kind = 'job' AND p.released_at IS NULL "
      "WHERE j.provider_id = $1 AND j.status <> 'CANCELLED' ORDER BY j.seq",
      DB_ARGS(DB_TEXT(id)));
}

err_t prov_store_won_jobs(arena *a, const char *id, db_res **out) {
  db_read r = prov_read_won_jobs(a, id);
  return db_to_err(db_query(a, out, r.sql, r.params, r.n));
}

db_read prov_read_review_stats(arena *a, const char *id) {
  return db_read_make(a,
                      "SELECT COUNT(*) AS total, AVG(CAST(rating AS DOUBLE PRECISION)) AS average FROM reviews "
                      "WHERE provider_id = $1",
                      DB_ARGS(DB_TEXT(id)));
}

const db_keyset REVIEWS_KEYSET = {"provider-reviews",
                                  {{"r.created_at", "created_at", 'i', true}, {"r.id", "id", 's', true}}};

db_read prov_read_reviews(arena *a, const char *id, const db_page *pg) {
  db_val args[DB_PAGE_ARGS(1)] = {DB_TEXT(id)};
  return db_page_read(a, pg,
                      "SELECT r.id, r.job_id, r.rating, r.comment, r.created_at, u.name AS customer_name, "
                      "u.deleted_at AS customer_deleted_at, j.service "
                      "FROM reviews r LEFT JOIN users u ON u.id = r.customer_id LEFT JOIN jobs j ON j.id = r.job_id "
                      "WHERE r.provider_id = $1",
                      args, 1);
}

db_read prov_read_public(arena *a, const char *id) {
  return db_read_make(
      a,
      "SELECT p.id, p.name, p.company_name, p.headshots, p.logo_url, p.services, p.service_zips, "
      "p.is_premium, p.ins_check_status, p.id_doc_front, p.id_doc_back, p.created_at, "
      "(SELECT COUNT(*) FROM jobs j WHERE j.provider_id = p.id AND j.status = 'COMPLETED') AS completed_jobs "
      "FROM providers p WHERE p.id = $1 AND p.deleted_at IS NULL",
      DB_ARGS(DB_TEXT(id)));
}

err_t prov_store_quotes(arena *a, const char *id, db_res **out) {
  return db_to_err(db_query(
      a, out, "SELECT service, amount_cents, status, created_at FROM quotes WHERE provider_id = $1 ORDER BY seq",
      DB_ARGS(DB_TEXT(id))));
}

err_t prov_store_lost_bids(arena *a, const char *id, int limit, db_res **out) {
  return db_to_err(
      db_query(a, out,
               "SELECT q.service, q.amount_cents, w.amount_cents AS winning_cents, w.accepted_at AS won_at "
               "FROM quotes q JOIN quotes w ON w.job_id = q.job_id AND w.status = 'ACCEPTED' "
               "WHERE q.provider_id = $1 AND q.status = 'REJECTED' ORDER BY w.accepted_at DESC, q.seq DESC LIMIT $2",
               DB_ARGS(DB_TEXT(id), DB_INT(limit))));
}

/* "$first, ..., $(first + count - 1)" into out: the IN lists below. */
static void param_list(char *out, size_t cap, int first, int count) {
  size_t at = 0;
  out[0] = 0;
  for (int i = 0; i < count && at < cap; i++)
    at += (size_t)snprintf(out + at, cap - at, "%s$%d", i ? ", " : "", first + i);
}

err_t prov_store_open_jobs_in(arena *a, const char *id, const char *const *zips, int n, db_res **out) {
  /* always PROV_NEAR_ZIPS placeholders, all text (unused ones '', which no job's ZIP is), so
   * the statement and its prepared plan are one */
  db_val args[1 + PROV_NEAR_ZIPS];
  char list[PROV_NEAR_ZIPS * 6], sql[1024 + sizeof list];
  args[0] = DB_TEXT(id);
  for (int i = 0; i < PROV_NEAR_ZIPS; i++) args[1 + i] = DB_TEXT(i < n ? zips[i] : "");
  param_list(list, sizeof list, 2, PROV_NEAR_ZIPS);
  snprintf(sql, sizeof sql,
           "SELECT j.zip, j.service, COUNT(*) AS open_jobs FROM jobs j "
           "JOIN provider_services ps ON ps.provider_id = $1 AND ps.service = j.service "
           "WHERE j.status IN ('PENDING', 'QUOTED') AND j.zip IN (%s) GROUP BY j.zip, j.service",
           list);
  return db_to_err(db_query(a, out, sql, args, 1 + PROV_NEAR_ZIPS));
}

err_t prov_store_open_jobs_by_service(arena *a, const char *id, db_res **out) {
  /* from the provider's ZIPs, each (service, ZIP) searched in jobs_feed: left to itself, SQLite
   * read every open job of every ZIP (the plan audit, tests/api/plans.py) */
  db_val args[8] = {DB_TEXT(id)};
  int n = 1;
  for (int i = 0; SERVICE_NAMES[i] && n < (int)(sizeof args / sizeof *args); i++) args[n++] = DB_TEXT(SERVICE_NAMES[i]);
  char list[64];
  param_list(list, sizeof list, 2, n - 1);
  char *sql = arena_printf(a,
                           "SELECT j.service, COUNT(*) AS open_jobs FROM provider_zips pz CROSS JOIN jobs j "
                           "WHERE pz.provider_id = $1 AND j.zip = pz.zip AND j.service IN (%s) "
                           "AND j.status IN ('PENDING', 'QUOTED') GROUP BY j.service",
                           list);
  return db_to_err(db_query(a, out, sql, args, n));
}

/* The two statements below go from the provider's services and ZIPs to each (service, ZIP)'s
 * jobs in jobs_feed (CROSS JOIN: SQLite's order): left to plan without statistics, SQLite
 * searched jobs_feed by service alone, every job of the service in every ZIP there ever was. */
err_t prov_store_local_completed(arena *a, const char *id, db_res **out) {
  return db_to_err(
      db_query(a, out,
               "SELECT COUNT(*) AS total, COALESCE(SUM(CASE WHEN p.ins_check_status IN ('active', 'review') "
               "THEN 1 ELSE 0 END), 0) AS insured FROM provider_services ps CROSS JOIN provider_zips pz "
               "CROSS JOIN jobs j JOIN providers p ON p.id = j.provider_id WHERE ps.provider_id = $1 "
               "AND pz.provider_id = $1 AND j.service = ps.service AND j.zip = pz.zip AND j.status = 'COMPLETED'",
               DB_ARGS(DB_TEXT(id))));
}

err_t prov_store_bundle_candidates(arena *a, const char *id, int64_t from, int64_t to, db_res **out) {
  return db_to_err(db_query(a, out,
                            "SELECT j.id, j.service, j.address, j.zip, j.preferred_at, j.lat, j.lng, j.customer_id, "
                            "u.name AS customer_name FROM provider_services ps CROSS JOIN provider_zips pz "
                            "CROSS JOIN jobs j LEFT JOIN users u ON u.id = j.customer_id "
                            "WHERE ps.provider_id = $1 AND pz.provider_id = $1 AND j.service = ps.service "
                            "AND j.zip = pz.zip "
                            "AND j.status IN ('PENDING', 'QUOTED') AND j.preferred_at >= $2 AND j.preferred_at < $3 "
                            "AND NOT EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = j.id AND q.provider_id = $1) "
                            "ORDER BY j.preferred_at, j.seq LIMIT 500",
                            DB_ARGS(DB_TEXT(id), DB_INT(from), DB_INT(to))));
}

err_t prov_tools_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  static const char *const sql[] = {"UPDATE providers SET availability = NULL, is_premium = 0, premium_since = NULL, "
                                    "preferred_pro_applied_at = NULL, premium_billed_month = NULL WHERE id = $1"};
  return mode == FORGET_ERASE && who->provider ? account_exec_in(c, who, sql, 1, NULL) : ERR_OK;
}
