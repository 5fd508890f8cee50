/* SQL of the jobs domain. Internal. State changes are conditional updates whose row count
 * says whether this request won. */
#ifndef DOMAIN_JOBS_STORE_H
#define DOMAIN_JOBS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include "domain/jobs/jobs.h"
#include "domain/notifications/notifications.h"
#include <jansson.h>
#include <stdbool.h>

/* Inserts the job and, when urgent_title is set (an ASAP job), notifies every matching
 * provider in the same transaction; *row has the new jobs row, owned by a. */
err_t jobs_store_insert(arena *a, const job_new *j, const char *urgent_title, const char *urgent_body, db_res **row);
/* The orders of the job lists: a customer's jobs newest first (seq, id); the provider feed by
 * (feed_at, seq, id), ASAP jobs first (feed_at is -2^62 for them); the reportable jobs by
 * (updated_at, seq, id), newest first. */
extern const db_keyset CUSTOMER_JOBS_KEYSET, FEED_KEYSET, REPORTABLE_KEYSET;
/* The page pg of the customer's jobs whose status is one of statuses (JOB_STATUS_COUNT slots,
 * the unused ones NULL; NULL: any status). */
err_t jobs_store_customer_jobs(arena *a, const char *customer_id, const char *const *statuses, const db_page *pg,
                               db_res **out);
/* The provider feed: the open jobs matching the provider's services and ZIPs whose status is
 * open[0] or open[1] (PENDING, QUOTED), as parts (one per pair, each in feed order (feed_at,
 * seq, id)) to be merged; columns feed_at, seq, id, json_head, json_tail, the photo columns and
 * status. Unpaged, each part holds its first 500 jobs, from the process's copies (feed_cache.h:
 * shared with other requests, read only); paged (pg->limit), the fetch rows of each pair after
 * the cursor's job, read afresh. `quoted` lists the job ids the provider has a pending quote
 * on, sorted by strcmp. */
typedef struct job_feed {
  const db_res **parts;
  int nparts;
  db_res *quoted;
} job_feed;
err_t jobs_store_feed(arena *a, const char *provider_id, const db_page *pg, const char *const open[2], job_feed *out);
/* Writes the stored JSON of the listed jobs whose JSON is missing. */
err_t jobs_store_repair_json(const char *const *ids, int n);
/* GET /jobs/:id in one statement: the job's id, customer_id, provider_id, status, stored JSON
 * and photo columns (the rest only if its JSON is missing, by jobs_get) with, per row, the customer's and
 * the assigned provider's cards (customer_card_*, provider_card_*), viewer_matches (1 when
 * provider_id serves the job's service in its ZIP), the job's payment (payment_<column> for
 * each column of PAYMENTS_JSON) and one visible quote (quote_<column> of SHAPE_QUOTE: all quotes for customer_id when
 * it owns the job, else provider_id's own), in quote order; one row with NULL quote_* when none. ERR_NOT_FOUND: no such
 * job. */
err_t jobs_store_detail(arena *a, const char *id, const char *provider_id, const char *customer_id, db_res **out);
/* The customer's profile address or saved address (addressId), with coordinates when known. */
err_t jobs_store_user_location(arena *a, const char *user_id, const char *address_id, db_res **out);

/* A move of job id from one of `from` (NULL-terminated) to `to`, optionally requiring the
 * assigned provider (provider_id); sets the extra column (eta_minutes, before_images ...) with
 * extra, and notifies the customer with note (its account_id filled in by the move) when set. */
typedef struct job_move {
  const char *id, *to, *provider_id, *extra_column;
  const char *const *from;
  db_val extra;
  notice *note;
} job_move;
/* Makes move m in one transaction with the job's event and the customer's notification; *row
 * has the moved jobs row (owned by a), or is NULL when the job was in none of `from`. */
err_t jobs_store_move(arena *a, const job_move *m, db_res **row);
/* Appends keys (a JSON array text) to the job's photos, under the job's row lock, so
 * concurrent uploads all land. */
err_t jobs_store_append_images(const char *id, const char *keys_json);
/* The page pg of the customer's COMPLETED jobs completed at or after since and not reported,
 * with provider_name and provider_company. */
err_t jobs_store_reportable(arena *a, const char *customer_id, int64_t since, const db_page *pg, db_res **out);
/* Deletes the reports kept past their customer's account whose time is over (keep_until). */
err_t jobs_store_prune_reports(int64_t now);
/* What a customer's one-per-job record (a report, a review) came to; jobs_fail (jobs_api.c)
 * answers each but JOBS_DONE. */
typedef enum {
  JOBS_DONE,
  JOBS_FAILED,           /* the database failed */
  JOBS_ALREADY_REPORTED, /* the job has a report (the unique index said so) */
  JOBS_ALREADY_REVIEWED, /* the job has a review */
} jobs_outcome;
/* Records a report of job_id and holds the provider's transfers of the job, in one
 * transaction; *row is the stored report (owned by a). */
jobs_outcome jobs_store_insert_report(arena *a, const char *id, const char *job_id, const char *customer_id,
                                      const char *description, int64_t now, db_res **row);
/* Records a review; *row is the stored review (owned by a). */
jobs_outcome jobs_store_insert_review(arena *a, const char *id, const char *job_id, const char *customer_id,
                                      const char *provider_id, int rating, const char *comment, int64_t now,
                                      db_res **row);
typedef struct recurring_new {
  const char *id, *job_id, *customer_id, *provider_id, *time_slot, *end_date;
  int day_of_week;
} recurring_new;
/* Records the request and, in the same transaction, emails its provider (subject,
 * mail_body) and notifies them (note). */
err_t jobs_store_insert_recurring(const recurring_new *q, const char *subject, const char *mail_body,
                                  const notice *note);
err_t jobs_store_has_report(const char *job_id, bool *has);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's reads (account_read_in): the account's jobs (a customer's own, a provider's
 * assigned), reviews, a customer's reports and the recurring requests, each oldest first. */
#define JOBS_EXPORT_PARTS 4
extern const char *const JOBS_EXPORT_SQL[JOBS_EXPORT_PARTS][2];
/* forget_in of the jobs, reviews, reports and recurring requests. An erasure: a customer's open
 * jobs are CANCELLED and every job of it loses its address, coordinates and photos (their keys
 * appended to who->files), its reports lose it and are kept for the dispute window
 * (JOBS_REPORT_KEPT_MS); the recurring requests go; jobs and reviews stay, the ledger's. A
 * deletion: a customer's payments (payments_forget_customer_in), reviews, reports, recurring
 * requests and jobs go; a provider's jobs go back to PENDING without it, their payments to their
 * history (payments_release_provider_jobs_in: given back after the commit), and its reviews and
 * recurring requests go. */
err_t jobs_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
