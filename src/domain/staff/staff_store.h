/* SQL of the staff domain: staff accounts, look-ups of customers and providers, elevation
 * requests (the auth domain's token check reads staff and elevation_requests too). Internal to
 * the domain. Functions that change data take the audit action to record and write it in their
 * own transaction. */
#ifndef DOMAIN_STAFF_STAFF_STORE_H
#define DOMAIN_STAFF_STAFF_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/staff/staff.h"
#include <stdbool.h>
#include <stdint.h>

/* An ACTIVE elevation lapses ELEVATION_TTL_MS (domain/auth/auth.h) after its activation. */
/* An APPROVED elevation not started within this long of its approval lapses. */
#define APPROVAL_TTL_MS (60LL * 60 * 1000)
/* A PENDING request nobody answered within this long lapses (EXPIRED). */
#define PENDING_TTL_MS (24LL * 60 * 60 * 1000)

/* ---- staff accounts ---- */

/* The staff member with this email (id, name, email, role, password_hash, created_at,
 * token_gen, disabled_at); no row when there is none. */
err_t staff_store_find_email(arena *a, const char *email, db_res **out);
/* The staff member id (same columns); ERR_NOT_FOUND when missing. */
err_t staff_store_get(arena *a, const char *id, db_res **out);
/* The orders of the staff lists: staff members and elevation requests newest first (seq, id);
 * customers and providers found by a search newest first (created_at descending, id). */
extern const db_keyset STAFF_KEYSET, ELEVATIONS_KEYSET, CUSTOMERS_KEYSET, PROVIDERS_KEYSET;
/* The page pg of the staff members. */
err_t staff_store_list(arena *a, const db_page *pg, db_res **out);
/* What a change of the staff domain came to; staff_fail (staff_api.c) answers each but
 * STAFF_DONE. */
typedef enum {
  STAFF_DONE,
  STAFF_FAILED,             /* the database failed */
  STAFF_EMAIL_TAKEN,        /* another staff member has the email */
  STAFF_ELEVATION_OPEN,     /* the staff member has a pending, approved or active request for the account */
  STAFF_ELEVATION_REJECTED, /* the elevation request was rejected: it cannot be deactivated */
  STAFF_REPORT_RESOLVED,    /* the job report was resolved already */
} staff_outcome;
/* Creates a staff member and records act (STAFF_EMAIL_TAKEN: the email is taken). */
staff_outcome staff_store_insert(const char *id, const char *name, const char *email, const char *hash,
                                 const char *role, const audit_action *act);

/* Creates the staff member with this email, or gives the existing one this name, role and
 * password hash (*created tells which), and records act (its target_id is filled). An update
 * moves the member's token generation on and ends their APPROVED and ACTIVE elevations, so
 * every token they held (staff and impersonation) is refused from then on. */
err_t staff_store_save(const char *name, const char *email, const char *hash, const char *role, audit_action *act,
                       bool *created);

/* Disables (disable true) or enables the staff member with this email and records act (its
 * target_id is filled) when that changed anything. Disabling moves their token generation on
 * and ends their APPROVED and ACTIVE elevations. *found false: no such member (nothing
 * recorded); *changed false: they already were so. */
err_t staff_store_set_disabled(const char *email, bool disable, audit_action *act, bool *found, bool *changed);

/* ---- look-ups ---- */

/* The page pg of the customers (providers) whose name or email (or company name) contains the
 * literal, case-insensitive text q (NULL: all); unpaged, the first SEARCH_CAP. */
#define SEARCH_CAP 100
err_t staff_store_search_customers(arena *a, const char *q, const db_page *pg, db_res **out);
err_t staff_store_search_providers(arena *a, const char *q, const db_page *pg, db_res **out);
/* The customer row; ERR_NOT_FOUND when missing. */
err_t staff_store_customer(arena *a, const char *id, db_res **out);
/* Jobs of a customer (column "customer_id") or assigned to a provider ("provider_id"),
 * newest first, each with earned_cents (the accepted quote's amount) and its current job
 * payment's columns of PAYMENTS_JSON as payment_<column> (payment_id NULL without one). */
err_t staff_store_jobs_of(arena *a, bool provider, const char *id, db_res **out);
/* The quotes (reviews) of those jobs, oldest first. */
err_t staff_store_quotes_of(arena *a, bool provider, const char *id, db_res **out);
err_t staff_store_reviews_of(arena *a, bool provider, const char *id, db_res **out);
/* The customer's payments, newest first. */
/* The refunds of the customer's payments, oldest first (every column of payment_refunds). */
err_t staff_store_refunds_of(arena *a, const char *user_id, db_res **out);
err_t staff_store_payments_of(arena *a, const char *user_id, db_res **out);

/* ---- elevations ---- */

/* Deactivates the elevations whose time is over: ACTIVE ones activated 15 minutes ago or more,
 * APPROVED ones approved an hour ago or more (deactivatedAt: the moment each lapsed). */
err_t staff_store_expire_elevations(void);
/* Lapses what is due, then deletes the elevations that ended without a session (expired,
 * denied, or approved and never started) and have not changed since before_ms
 * (RETAIN_ELEVATIONS). Those that started are the internal audit's sessions and stay. */
err_t staff_store_prune_elevations(int64_t before_ms);
/* Elevation rows joined with their staff member (staff_name, staff_email, staff_role), with
 * expires_at (the end of an activated elevation's time). */
err_t staff_store_elevation(arena *a, const char *id, db_res **out); /* ERR_NOT_FOUND */
err_t staff_store_elevations_by_staff(arena *a, const char *staff_id, const db_page *pg, db_res **out);
err_t staff_store_elevations_of_target(arena *a, const char *target_id, const char *target_role, db_res **out);
err_t staff_store_elevations_all(arena *a, db_res **out);
/* The page pg of every staff member's elevations (ELEVATIONS_KEYSET), those in status only
 * unless it is NULL. */
err_t staff_store_elevations_by_status(arena *a, const char *status, const db_page *pg, db_res **out);
/* Creates a PENDING elevation, queues the administrator's email and records act, in one
 * transaction (STAFF_ELEVATION_OPEN: the staff member has an open one for the target). */
staff_outcome staff_store_elevation_insert(const char *id, const char *staff_id, const char *target_id,
                                           const char *target_role, const char *reason, const char *mail_subject,
                                           const char *mail_body, const audit_action *act);
/* The moves of an elevation: PENDING -> APPROVED or REJECTED (the links), APPROVED (within an
 * hour of its approval) -> ACTIVE (its owner impersonates), PENDING, APPROVED or ACTIVE ->
 * DEACTIVATED (its owner), APPROVED or ACTIVE -> DEACTIVATED (the deny link: END). */
typedef enum { MOVE_APPROVE, MOVE_DENY, MOVE_ACTIVATE, MOVE_DEACTIVATE, MOVE_END } elevation_move;
/* Makes the move when the elevation is in a status it starts from (and, for ACTIVATE and
 * DEACTIVATE, owned by owner) and records act with it; *moved false when a condition failed
 * (nothing changed, nothing recorded). */
err_t staff_store_elevation_move(elevation_move move, const char *id, const char *owner, const audit_action *act,
                                 bool *moved);

/* Resolves report id (of job_id) as action ("release": the money its report holds goes out
 * as scheduled; "refund": refunded already by the caller) with note, audited, in one
 * transaction; *resolved false when it was not open. */
err_t staff_store_resolve_report(const char *id, const char *job_id, const char *action, const char *note,
                                 const audit_action *act, bool *resolved);

#endif
