/* SQL of the providers domain. Internal. */
#ifndef DOMAIN_PROVIDERS_STORE_H
#define DOMAIN_PROVIDERS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include "domain/providers/recognition.h"
#include <jansson.h>
#include <stdint.h>

/* The provider row with every column (names as in the table); ERR_NOT_FOUND when missing. */
err_t prov_store_get(arena *a, const char *id, db_res **row);
/* The same read, to run with others in one round trip (db_query_all); no row when missing. The
 * other prov_read_* functions are the reads of the prov_store_* functions of the same name. */
db_read prov_read(arena *a, const char *id);
/* Applies a validated PATCH body (name, phone, serviceZips, services, companyName,
 * companyUrl), keeping the normalised service and ZIP tables in step. */
err_t prov_store_update_profile(const char *id, json_t *patch);
/* Sets logo_url to key; *old receives the replaced key (arena) or NULL. */
err_t prov_store_set_logo(arena *a, const char *id, const char *key, const char **old);
/* An edit of the headshots array: from its JSON text old_json (NULL when none), the new text
 * in *new_json (heap, or the edit fails with the error it returns). */
typedef err_t (*headshots_edit)(void *ctx, const char *old_json, char **new_json);
/* Edits the provider's headshots under its row lock, so concurrent edits all land, one after
 * the other; ERR_NOT_FOUND without such a provider, else what edit answered. *row: the
 * provider's row as the edit left it (every column, owned by a). */
err_t prov_store_edit_headshots(arena *a, const char *id, headshots_edit edit, void *ctx, db_res **row);
/* Records new licence images (NULL: keep that side), sets idCheckStatus pending and queues
 * recognition, in one transaction. *old_front / *old_back receive replaced keys; *row the
 * provider's row as the change left it (every column, owned by a). */
err_t prov_store_set_id_documents(arena *a, const char *id, const char *front, const char *back, const char **old_front,
                                  const char **old_back, db_res **row);
/* Records a new insurance document, sets insCheckStatus pending and queues recognition. */
err_t prov_store_set_insurance_document(arena *a, const char *id, const char *key, const char **old);

/* ---- work views and business tools (providers_tools_store.c) ---- */

/* The orders of the provider's jobs and schedule: jobs without a date first, then by the date
 * (preferredAt; the schedule's time), then (seq, id). */
extern const db_keyset PROVIDER_JOBS_KEYSET, SCHEDULE_KEYSET;
/* The page pg of the jobs assigned to the provider (`SELECT jobs.*`), preferredAt ascending
 * (ASAP jobs without a date first). */
err_t prov_store_assigned_jobs(arena *a, const char *id, const db_page *pg, db_res **out);
/* The page pg of the provider's ACCEPTED, ON_THE_WAY and IN_PROGRESS jobs: id, service,
 * address, zip, status, customer_name, scheduled_at (the accepted quote's, else the job's
 * preferredAt) and amount_cents (the accepted quote's), soonest first. */
err_t prov_store_schedule(arena *a, const char *id, const db_page *pg, db_res **out);
/* Stores the weekly schedule (JSON text). */
err_t prov_store_set_availability(const char *id, const char *json);
/* Records on c, in the transaction that bills it, that month's ("YYYY-MM") Preferred Pro fee
 * was billed (premiumBilledMonth): the writer payouts_follow_premium is given. */
db_rc prov_store_set_billed_month_in(db_conn *c, const char *id, const char *month);
/* What a change of a Preferred Pro membership came to. */
typedef enum {
  MEMBERSHIP_JOINED,         /* a member as of now (isPremium, premiumSince, preferredProAppliedAt) */
  MEMBERSHIP_RESUMED,        /* a cancelled membership goes on */
  MEMBERSHIP_CANCELLED,      /* it ends at the month's end */
  MEMBERSHIP_ALREADY_MEMBER, /* joining: a member with no cancellation pending */
  MEMBERSHIP_NOT_MEMBER,     /* cancelling: no membership to cancel */
  MEMBERSHIP_FAILED,         /* storage failed */
} membership_outcome;
/* Joins Preferred Pro at now, or keeps a membership that was cancelled going. */
membership_outcome prov_store_join_preferred_pro(const char *id, int64_t now);
/* Cancels a membership at ends_at (the next month's start; one cancelled already keeps its end,
 * in *ends). */
membership_outcome prov_store_cancel_preferred_pro(const char *id, int64_t now, int64_t ends_at, int64_t *ends);
/* Ends the memberships whose end came by now. */
err_t prov_store_end_preferred_pro(int64_t now, int *ended);
/* One row per job the provider won (quote ACCEPTED) that is not cancelled: service, zip,
 * status, accepted_at, completed_at, amount_cents (the quote's), pay_status (the job
 * payment's, or NULL) and tip_cents (captured tips). */
err_t prov_store_won_jobs(arena *a, const char *id, db_res **out);
db_read prov_read_won_jobs(arena *a, const char *id);
/* total (count) and average (rating, or NULL) of the provider's reviews. */
db_read prov_read_review_stats(arena *a, const char *id);
/* The order of a provider's reviews: newest first, by (created_at, id) descending. */
extern const db_keyset REVIEWS_KEYSET;
/* The page pg of the provider's reviews with customer_name, customer_deleted_at and service. */
db_read prov_read_reviews(arena *a, const char *id, const db_page *pg);
/* What the provider's public profile shows: id, name, company_name, headshots, logo_url,
 * services, service_zips, is_premium, ins_check_status, id_doc_front, id_doc_back, created_at
 * and completed_jobs; no row when there is no such provider (or it was deleted). */
db_read prov_read_public(arena *a, const char *id);
/* Every quote of the provider: service, amount_cents, status, created_at. */
err_t prov_store_quotes(arena *a, const char *id, db_res **out);
/* The provider's rejected quotes on jobs another quote won: service, amount_cents,
 * winning_cents, won_at; newest first. */
err_t prov_store_lost_bids(arena *a, const char *id, int limit, db_res **out);
#define PROV_NEAR_ZIPS 60
/* Open jobs (PENDING, QUOTED) of the provider's services in the given ZIPs (at most
 * PROV_NEAR_ZIPS): zip, service, open_jobs. */
err_t prov_store_open_jobs_in(arena *a, const char *id, const char *const *zips, int n, db_res **out);
/* Open jobs of every service in the provider's ZIPs: service, open_jobs. */
err_t prov_store_open_jobs_by_service(arena *a, const char *id, db_res **out);
/* Completed jobs in the provider's services and ZIPs: total, insured (their provider's
 * insurance check is active or near expiry). */
err_t prov_store_local_completed(arena *a, const char *id, db_res **out);
/* Open jobs the provider matches and has not quoted with preferredAt in [from, to): id,
 * service, address, zip, preferred_at, lat, lng, customer_id, customer_name; by preferredAt. */
err_t prov_store_bundle_candidates(arena *a, const char *id, int64_t from, int64_t to, db_res **out);

/* Records a licence check's result (domain/providers/recognition.h) on provider id, only while
 * front and back are still its licence images (a slow check of a replaced upload writes
 * nothing). */
err_t prov_store_record_licence(const char *id, const char *front, const char *back, const licence_result *res);
/* The same for an insurance check of document key; insuranceInfo is filled when at least two
 * fields were found. */
err_t prov_store_record_insurance(const char *id, const char *key, const insurance_result *res);

/* ---- the account's part (domain/domain.h) ---- */

/* The rows of a new provider's services and ZIPs (arrays of strings), on c inside the
 * registering transaction (db_exec_later: they go with its COMMIT): the writer
 * auth_follow_provider_lists is given. */
db_rc prov_store_insert_lists_in(db_conn *c, const char *id, json_t *services, json_t *zips, int64_t now);
/* The export's account of a provider (account_read_in): its row, none when it is deleted. */
extern const char *const PROV_EXPORT_SQL[1][2];
/* forget_in of the provider's services and ZIPs and of its row's profile (providers_store.c's
 * columns): the lists go; at an erasure the profile is erased (ACCOUNT_DELETED_NAME, no phone,
 * company, documents or checks), the keys of its logo, headshots and documents appended to
 * who->files. */
err_t prov_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);
/* forget_in of the row's membership and schedule (providers_tools_store.c's columns): cleared
 * at an erasure. */
err_t prov_tools_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
