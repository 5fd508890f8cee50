/* SQL of the quotes domain. Internal. */
#ifndef DOMAIN_QUOTES_STORE_H
#define DOMAIN_QUOTES_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include "domain/notifications/notifications.h"
#include "domain/quotes/quotes.h"
#include <stdbool.h>

typedef struct quote_new {
  const char *id, *job_id, *provider_id, *service, *note;
  int64_t amount_cents, fee_cents, scheduled_at;
  bool has_scheduled;
} quote_new;

/* What a quote change tells the other party: an email and a notification (with its push),
 * written in the change's own transaction. */
typedef struct quote_news {
  const char *email, *subject, *mail_body;
  notice note;
  bool device_known; /* has_device was read with the rest (PUSH_DEVICE_SQL) */
  bool has_device;
} quote_news;

/* What POST /quotes decides from what its transaction read (found: ERR_OK, or ERR_NOT_FOUND
 * without such a provider; row: see quotes_store_submit): QUOTE_CREATED with *q and *news
 * filled to go ahead, any other outcome to end the transaction without a change. */
typedef quote_outcome (*quote_decide)(void *ctx, arena *a, err_t found, const db_res *row, quote_new *q,
                                      quote_news *news);
/* POST /quotes in one transaction: reads what it decides on in one statement (the job, `jobs.*`,
 * all NULL when job_id does not exist; provider_headshots, provider_id_doc_front,
 * provider_id_doc_back, provider_name, provider_company_name, customer_email, customer_name,
 * customer_push_device (PUSH_DEVICE_SQL), and provider_matches: 1 when the provider serves the job's service in
 * its ZIP), asks decide, then inserts the quote, moves the job to QUOTED and writes the
 * customer's news; *quote receives the inserted row (arena a). Reading inside the transaction
 * puts it on SQLite's writer connection, whose cache the other writes keep warm. Returns what
 * decide refused with; QUOTE_DUPLICATE when this provider already quoted; QUOTE_NOT_OPEN when
 * the job left PENDING/QUOTED meanwhile; QUOTE_FAILED when storage failed. */
quote_outcome quotes_store_submit(arena *a, const char *provider_id, const char *job_id, quote_decide decide, void *ctx,
                                  db_res **quote);
/* The quote with its job's customer_id and job_status; with_parties adds what an acceptance
 * tells them: provider_email, provider_name, provider_push_device and customer_name (NULL when
 * that account is gone). */
err_t quotes_store_get(arena *a, const char *id, bool with_parties, db_res **out);
/* The read of quotes_store_get(a, id, false, ...) for db_query_all (no row when missing). */
db_read quotes_store_read(arena *a, const char *id);
/* Assigns the job, accepts this quote and rejects the others, writes the provider's news:
 * one transaction. *won false when the job was no longer open. */
err_t quotes_store_accept(const char *quote_id, const char *job_id, const char *provider_id, const quote_news *news,
                          bool *won);
/* amount_cents of the last 50 accepted quotes of service, newest first. */
err_t quotes_store_recent_accepted(arena *a, const char *service, db_res **out);
/* The order of a job's quotes: as they came, by (seq, id). */
extern const db_keyset JOB_QUOTES_KEYSET;
/* The read of page pg of a job's quotes with the quoting provider's details and average rating
 * (db_query_all). */
db_read quotes_store_read_for_job(arena *a, const char *job_id, const db_page *pg);
/* The order of a provider's quotes: newest first, by (seq, id) descending. */
extern const db_keyset PROVIDER_QUOTES_KEYSET;
/* The page pg of the provider's quotes (`quotes.*`) with their job's job_status and job_service. */
err_t quotes_store_of_provider(arena *a, const char *provider_id, const db_page *pg, db_res **out);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's quotes (account_part's sql): those on a customer's jobs, or a provider's own,
 * oldest first. */
extern const char *const QUOTES_EXPORT_SQL[2];
/* forget_in of the quotes: an erasure withdraws a provider's PENDING quotes (its ACCEPTED and
 * REJECTED ones stay, the ledger's); a deletion deletes the quotes on a customer's jobs, or a
 * provider's. Jobs only the provider had quoted go back to PENDING first. */
err_t quotes_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
