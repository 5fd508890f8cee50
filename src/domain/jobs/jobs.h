/* Jobs: posting, the provider feed, details, cancellation, the status lifecycle with its
 * photos, tips, reviews, dispute reports and recurring requests. */
#ifndef DOMAIN_JOBS_H
#define DOMAIN_JOBS_H
#include "db/db.h"
#include "domain/domain.h"
#include "http/http.h"
#include "http/paging.h"
#include "http/rowjson.h"

extern const domain_def jobs_domain;

/* Registers how the jobs table follows payments (a job's tipAmount: payments_follow_tips). The
 * domain's init does it; a command that runs payment work without the domains' start-up
 * (`marketplace payments reconcile`) calls it first. */
void jobs_wire_payments(void);

/* The Review JSON `{ id, jobId, providerId, rating, comment, createdAt }` of a reviews row, as
 * a field table (http/rowjson.h). */
extern const hs_rj_field JOBS_REVIEW_JSON[];
/* Answers req with the Job JSON of every row of r (`SELECT jobs.*` rows) as an array, from
 * the JSON stored with each job (docs/internals/job-json.md). */
err_t jobs_reply_list(hs_req *req, const db_res *r);
/* Rewrites the stored JSON of the jobs row at index row of job (a `SELECT jobs.*` or
 * `RETURNING *` result taken inside c's open transaction, after the change). Every writer of
 * the jobs table calls it, or jobs_json_refresh_in, in the changing transaction; a change
 * that does not is still correct (migration 0012's trigger drops the stored JSON) but slower
 * to read until repaired. */
db_rc jobs_json_save_in(db_conn *c, const db_res *job, int row);
/* The same, reading job id inside c's transaction first. */
db_rc jobs_json_refresh_in(db_conn *c, const char *id);
/* Moves a job to status `to` from one of `from` (NULL-terminated constants), with
 * updated_at = now, on c inside the caller's transaction. job[row] is the job as read before
 * the transaction (`jobs.*`): when the row is unchanged since (same stored JSON), the new
 * JSON is written by the same statement; otherwise the moved row is read back and rendered.
 * *moved false (and nothing changed) when the job is no longer in one of `from`. */
db_rc jobs_move_in(db_conn *c, const db_res *job, int row, const char *const *from, const char *to, int64_t now,
                   bool *moved);
/* The other writes of jobs rows that other domains make, each on c inside the caller's
 * transaction and each keeping the stored JSON current (the jobs table is written only through
 * this domain):
 * - jobs_accept_in: job_id goes from PENDING or QUOTED to ACCEPTED with provider_id at now
 *   (*accepted false, nothing changed, when it was no longer open);
 * - jobs_set_tip_in: the job's tipAmount (cents; negative: none);
 * - jobs_lock_in: takes the job's row lock, so that concurrent transactions about one job run
 *   one after another (on PostgreSQL it is sent with the transaction's next statement, which
 *   runs once the lock is held; on SQLite every write transaction holds the database's write
 *   lock already, so it does nothing);
 * - jobs_reopen_quoted_by_in: QUOTED jobs whose only quotes are provider_id's go back to
 *   PENDING (before that provider's quotes are withdrawn). */
db_rc jobs_accept_in(db_conn *c, const char *job_id, const char *provider_id, int64_t now, bool *accepted);
db_rc jobs_set_tip_in(db_conn *c, const char *job_id, int64_t cents);
db_rc jobs_lock_in(db_conn *c, const char *job_id);
db_rc jobs_reopen_quoted_by_in(db_conn *c, const char *provider_id, int64_t now);
/* Reads job id; ERR_NOT_FOUND when missing. */
err_t jobs_get(arena *a, const char *id, db_res **row);
/* The same read, to run with other stores' reads in one round trip (db_query_all): its result
 * holds job id's row, or none. */
db_read jobs_read(arena *a, const char *id);
/* True when provider serves the job's service in its ZIP. */
bool jobs_provider_matches(const char *provider_id, const char *service, const char *zip);

/* ---- reports (POST /jobs/:id/report; staff resolve them) ----
 * A report holds the job's unpaid transfers for 7 days (payouts), and customer support is
 * emailed when it holds money. It outlives its customer's account for the dispute window
 * (JOBS_REPORT_KEPT_MS), without the customer's identity; a daily task deletes it then. */
#define JOBS_REPORT_KEPT_MS (120LL * 24 * 3600 * 1000)
/* The order of the staff's report list: newest first. */
extern const db_keyset REPORTS_KEYSET;
/* A page of reports of status ("open", "resolved"; NULL: every one): id, job_id, customer_id
 * (NULL once the customer erased the account), description, status, resolution,
 * resolution_note, resolved_by, resolved_at, created_at, service, job_status, provider_id. */
err_t jobs_reports(arena *a, const char *status, const db_page *pg, db_res **out);
/* Report id with the same columns (no row when it does not exist). */
err_t jobs_report(arena *a, const char *id, db_res **out);
/* Resolves report id on c when it is open: action ("release" or "refund"), note, by staff_id;
 * *resolved false when it was not open (resolved meanwhile). */
db_rc jobs_report_resolve_in(db_conn *c, const char *id, const char *action, const char *note, const char *staff_id,
                             int64_t now, bool *resolved);

/* A job to post. */
typedef struct job_new {
  const char *id, *customer_id, *service, *description, *details, *address, *zip;
  int64_t preferred_at;
  bool has_preferred, is_asap, has_coords;
  double lat, lng;
} job_new;
/* Inserts j as a new PENDING job on c, inside the caller's transaction (POST /jobs, and the
 * GODMODE generator, which posts many in one transaction); *row (when row is not NULL) has
 * the new jobs row, owned by a. */
db_rc jobs_insert_in(db_conn *c, const job_new *j, arena *a, db_res **row);

#endif
