/* Staff domain storage. Every change is one transaction that ends with its audit record, so
 * a change and its record are committed together (and the chain's tip lock is taken last).
 * Elevation moves are conditional updates: of two concurrent approvals or impersonations
 * exactly one changes the row. Search text is bound as a LIKE pattern with its wildcard
 * characters escaped, never spliced into SQL. */
#include "domain/staff/staff_store.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "domain/audit/audit.h"
#include "domain/events/events.h"
#include "domain/jobs/jobs.h"
#include "domain/payouts/payouts.h"
#include "ext/mail.h"
#include <stdio.h>
#include <string.h>

static err_t rows(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  return db_query(a, out, sql, params, n) == DB_OK ? ERR_OK : ERR_INTERNAL;
}

static err_t one_row(arena *a, db_res **out, const char *sql, const char *id) {
  return db_query_row(a, out, sql, DB_ARGS(DB_TEXT(id)));
}

/* Records act (when given) as the transaction's last write, then ends the transaction. */
static err_t end_recorded(db_conn *c, err_t e, const audit_action *act) {
  if (!e && act) e = audit_log_in(c, act);
  return db_end(c, e);
}

/* ---- staff accounts ---- */

#define STAFF_COLUMNS "id, name, email, role, password_hash, created_at, token_gen, disabled_at"

err_t staff_store_find_email(arena *a, const char *email, db_res **out) {
  return rows(a, out, "SELECT " STAFF_COLUMNS " FROM staff WHERE email = $1", DB_ARGS(DB_TEXT(email)));
}

err_t staff_store_get(arena *a, const char *id, db_res **out) {
  return one_row(a, out, "SELECT " STAFF_COLUMNS " FROM staff WHERE id = $1", id);
}

const db_keyset STAFF_KEYSET = {"staff", {{"seq", "seq", 'i', true}, {"id", "id", 's', true}}};
const db_keyset ELEVATIONS_KEYSET = {"elevations", {{"e.seq", "seq", 'i', true}, {"e.id", "id", 's', true}}};
const db_keyset CUSTOMERS_KEYSET = {"customers", {{"created_at", "created_at", 'i', true}, {"id", "id", 's', false}}};
const db_keyset PROVIDERS_KEYSET = {"providers", {{"created_at", "created_at", 'i', true}, {"id", "id", 's', false}}};

err_t staff_store_list(arena *a, const db_page *pg, db_res **out) {
  db_val args[DB_PAGE_ARGS(0)];
  return db_to_err(db_page_query(a, pg, "SELECT " STAFF_COLUMNS ", seq FROM staff WHERE TRUE", args, 0, out));
}

static db_rc insert_staff(db_conn *c, const char *id, const char *name, const char *email, const char *hash,
                          const char *role) {
  return db_exec(c, NULL, NULL,
                 "INSERT INTO staff (id, name, email, password_hash, role, created_at, seq) "
                 "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                 DB_ARGS(DB_TEXT(id), DB_TEXT(name), DB_TEXT(email), DB_TEXT(hash), DB_TEXT(role),
                         DB_INT(clock_now_ms()), DB_INT(clock_sequence())));
}

/* A unique index's refusal as outcome taken; any other failure as STAFF_FAILED. */
static staff_outcome outcome_of(err_t e, staff_outcome taken) {
  return e == ERR_OK ? STAFF_DONE : e == ERR_CONFLICT ? taken : STAFF_FAILED;
}

staff_outcome staff_store_insert(const char *id, const char *name, const char *email, const char *hash,
                                 const char *role, const audit_action *act) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(insert_staff(c, id, name, email, hash, role));
  return outcome_of(end_recorded(c, e, act), STAFF_EMAIL_TAKEN);
}

/* Ends the open elevation requests of staff member id, PENDING, APPROVED and ACTIVE (their
 * tokens are then refused, their links no longer act): its role, password or access changed,
 * so what it asked for under the old ones does not outlive them. */
static db_rc end_elevations_of(db_conn *c, const char *id) {
  return db_exec(c, NULL, NULL,
                 "UPDATE elevation_requests SET status = 'DEACTIVATED', deactivated_at = $2, updated_at = $2 "
                 "WHERE staff_id = $1 AND status IN ('PENDING', 'APPROVED', 'ACTIVE')",
                 DB_ARGS(DB_TEXT(id), DB_INT(clock_now_ms())));
}

err_t staff_store_save(const char *name, const char *email, const char *hash, const char *role, audit_action *act,
                       bool *created) {
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  db_conn *c;
  err_t e = db_begin_exec(&c, &a, &r,
                          "UPDATE staff SET name = $2, password_hash = $3, role = $4, token_gen = token_gen + 1 "
                          "WHERE email = $1 RETURNING id",
                          DB_ARGS(DB_TEXT(email), DB_TEXT(name), DB_TEXT(hash), DB_TEXT(role)));
  *created = !e && r->rows == 0;
  char id[ID_LEN + 1];
  if (*created) {
    id_new(id);
    e = db_to_err(insert_staff(c, id, name, email, hash, role));
  } else if (!e) {
    snprintf(id, sizeof id, "%s", db_text(r, 0, 0));
    e = db_to_err(end_elevations_of(c, id));
    if (!e) e = db_to_err(events_tokens_ended_in(c, id, true)); /* its streams end, impersonations' too */
  }
  act->target_id = id;
  act->action = *created ? "staff.create" : "staff.update";
  e = end_recorded(c, e, act);
  act->target_id = NULL; /* it pointed at this frame */
  arena_fini(&a);
  return e;
}

err_t staff_store_set_disabled(const char *email, bool disable, audit_action *act, bool *found, bool *changed) {
  arena a;
  arena_init(&a);
  db_res *r = NULL, *who = NULL;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e && disable)
    e = db_to_err(
        db_exec(c, &a, &r,
                "UPDATE staff SET disabled_at = $2, token_gen = token_gen + 1 WHERE email = $1 AND disabled_at IS NULL "
                "RETURNING id",
                DB_ARGS(DB_TEXT(email), DB_INT(clock_now_ms()))));
  else if (!e)
    e = db_to_err(db_exec(
        c, &a, &r, "UPDATE staff SET disabled_at = NULL WHERE email = $1 AND disabled_at IS NOT NULL RETURNING id",
        DB_ARGS(DB_TEXT(email))));
  *changed = !e && r->rows == 1;
  if (!e && !*changed)
    e = db_to_err(db_exec(c, &a, &who, "SELECT id FROM staff WHERE email = $1", DB_ARGS(DB_TEXT(email))));
  *found = *changed || (!e && who->rows == 1);
  act->target_id = *changed ? db_text(r, 0, 0) : NULL;
  if (*changed && disable) e = db_to_err(end_elevations_of(c, act->target_id));
  if (!e && *changed && disable) e = db_to_err(events_tokens_ended_in(c, act->target_id, true)); /* streams end */
  e = end_recorded(c, e, *changed ? act : NULL);
  act->target_id = NULL; /* it pointed into this arena */
  arena_fini(&a);
  return e;
}

/* ---- look-ups ---- */

/* '%' + q with LIKE's wildcards and its escape character escaped + '%'; NULL for no q. */
static const char *contains_pattern(arena *a, const char *q) {
  if (!q || !*q) return NULL;
  char *p = arena_alloc(a, strlen(q) * 2 + 3), *o = p;
  *o++ = '%';
  for (; *q; q++) {
    if (*q == '%' || *q == '_' || *q == '\\') *o++ = '\\';
    *o++ = *q;
  }
  *o++ = '%';
  return p;
}

/* The search condition; $1 is contains_pattern(q), NULL for everyone. */
#define MATCHES(extra)                                                                                                 \
  "WHERE (CAST($1 AS TEXT) IS NULL OR lower(name) LIKE lower($1) ESCAPE '\\' "                                         \
  "OR lower(email) LIKE lower($1) ESCAPE '\\' " extra ")"

err_t staff_store_search_customers(arena *a, const char *q, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT id, name, email, address, zip, created_at, processor_customer_id FROM users " MATCHES(""),
                      contains_pattern(a, q), out);
}

err_t staff_store_search_providers(arena *a, const char *q, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT id, name, email, company_name, services, service_zips, is_premium, "
                      "premium_since, premium_billed_month, created_at FROM providers " MATCHES(
                          "OR lower(COALESCE(company_name, '')) LIKE lower($1) ESCAPE '\\' "),
                      contains_pattern(a, q), out);
}

err_t staff_store_customer(arena *a, const char *id, db_res **out) {
  return one_row(a, out,
                 "SELECT id, email, name, address, zip, lat, lng, is_premium, premium_since, processor_customer_id, "
                 "processor_subscription_id, seasonal_alerts_enabled, created_at, updated_at FROM users WHERE id = $1",
                 id);
}

err_t staff_store_jobs_of(arena *a, bool provider, const char *id, db_res **out) {
#define JOB_MONEY                                                                                                      \
  "SELECT j.*, (SELECT q.amount_cents FROM quotes q WHERE q.job_id = j.id AND q.status = 'ACCEPTED') AS "              \
  "earned_cents, p.id AS payment_id, p.status AS payment_status, p.amount_cents AS payment_amount_cents, "             \
  "p.processor_payment_intent_id AS payment_processor_payment_intent_id, "                                             \
  "p.hold_expires_at AS payment_hold_expires_at, p.failure_reason AS payment_failure_reason, "                         \
  "p.refunded_cents AS payment_refunded_cents, p.dispute_json AS payment_dispute_json FROM jobs j "                    \
  "LEFT JOIN payments p ON p.job_id = j.id AND p.kind = 'job' AND p.released_at IS NULL "
  return rows(a, out,
              provider ? JOB_MONEY "WHERE j.provider_id = $1 ORDER BY j.seq DESC"
                       : JOB_MONEY "WHERE j.customer_id = $1 ORDER BY j.seq DESC",
              DB_ARGS(DB_TEXT(id)));
#undef JOB_MONEY
}

err_t staff_store_quotes_of(arena *a, bool provider, const char *id, db_res **out) {
  return rows(a, out,
              provider
                  ? "SELECT q.* FROM quotes q JOIN jobs j ON j.id = q.job_id WHERE j.provider_id = $1 ORDER BY q.seq"
                  : "SELECT q.* FROM quotes q JOIN jobs j ON j.id = q.job_id WHERE j.customer_id = $1 ORDER BY q.seq",
              DB_ARGS(DB_TEXT(id)));
}

err_t staff_store_reviews_of(arena *a, bool provider, const char *id, db_res **out) {
  return rows(a, out,
              provider ? "SELECT r.* FROM reviews r JOIN jobs j ON j.id = r.job_id WHERE j.provider_id = $1"
                       : "SELECT r.* FROM reviews r JOIN jobs j ON j.id = r.job_id WHERE j.customer_id = $1",
              DB_ARGS(DB_TEXT(id)));
}

err_t staff_store_payments_of(arena *a, const char *user_id, db_res **out) {
  return rows(a, out, "SELECT * FROM payments WHERE user_id = $1 ORDER BY created_at DESC, id",
              DB_ARGS(DB_TEXT(user_id)));
}

err_t staff_store_refunds_of(arena *a, const char *user_id, db_res **out) {
  return rows(a, out,
              "SELECT r.* FROM payment_refunds r JOIN payments p ON p.id = r.payment_id WHERE p.user_id = $1 "
              "ORDER BY r.created_at, r.id",
              DB_ARGS(DB_TEXT(user_id)));
}

/* ---- elevations ---- */

/* Lapses ACTIVE elevations after 15 minutes, APPROVED ones an hour after their approval and
 * PENDING ones nobody answered within 24 hours (EXPIRED), on c, each stamped with the moment it
 * lapsed. */
static db_rc expire_in(db_conn *c) {
  int64_t now = clock_now_ms();
  /* nothing waits for their answers: they go with the transaction's next statement */
  db_rc rc = db_exec_later(c, NULL, NULL,
                           "UPDATE elevation_requests SET status = 'DEACTIVATED', deactivated_at = activated_at + $2, "
                           "updated_at = $3 WHERE status = 'ACTIVE' AND activated_at <= $1",
                           DB_ARGS(DB_INT(now - ELEVATION_TTL_MS), DB_INT(ELEVATION_TTL_MS), DB_INT(now)));
  if (rc == DB_OK)
    rc = db_exec_later(c, NULL, NULL,
                       "UPDATE elevation_requests SET status = 'DEACTIVATED', deactivated_at = resolved_at + $2, "
                       "updated_at = $3 WHERE status = 'APPROVED' AND resolved_at <= $1",
                       DB_ARGS(DB_INT(now - APPROVAL_TTL_MS), DB_INT(APPROVAL_TTL_MS), DB_INT(now)));
  if (rc == DB_OK)
    rc = db_exec_later(c, NULL, NULL,
                       "UPDATE elevation_requests SET status = 'EXPIRED', resolved_at = created_at + $2, "
                       "updated_at = $3 WHERE status = 'PENDING' AND created_at <= $1",
                       DB_ARGS(DB_INT(now - PENDING_TTL_MS), DB_INT(PENDING_TTL_MS), DB_INT(now)));
  return rc;
}

err_t staff_store_expire_elevations(void) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(expire_in(c));
  return db_end(c, e);
}

err_t staff_store_prune_elevations(int64_t before_ms) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(expire_in(c)); /* what lapsed by now ends first */
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "DELETE FROM elevation_requests WHERE status IN ('DEACTIVATED', 'EXPIRED', 'REJECTED') "
                          "AND activated_at IS NULL AND updated_at < $1",
                          DB_ARGS(DB_INT(before_ms))));
  return db_end(c, e);
}

_Static_assert(ELEVATION_TTL_MS == 900000, "expires_at below is activated_at + ELEVATION_TTL_MS");
#define ELEVATION_SELECT                                                                                               \
  "SELECT e.*, e.activated_at + 900000 AS expires_at, s.name AS staff_name, s.email AS staff_email, "                  \
  "s.role AS staff_role FROM elevation_requests e JOIN staff s ON s.id = e.staff_id "

err_t staff_store_elevation(arena *a, const char *id, db_res **out) {
  return one_row(a, out, ELEVATION_SELECT "WHERE e.id = $1", id);
}

err_t staff_store_elevations_by_staff(arena *a, const char *staff_id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg, ELEVATION_SELECT "WHERE e.staff_id = $1", staff_id, out);
}

err_t staff_store_elevations_of_target(arena *a, const char *target_id, const char *target_role, db_res **out) {
  return rows(a, out, ELEVATION_SELECT "WHERE e.target_id = $1 AND e.target_role = $2 ORDER BY e.seq DESC",
              DB_ARGS(DB_TEXT(target_id), DB_TEXT(target_role)));
}

err_t staff_store_elevations_by_status(arena *a, const char *status, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg, ELEVATION_SELECT "WHERE e.status = COALESCE(CAST($1 AS TEXT), e.status)", status, out);
}

err_t staff_store_elevations_all(arena *a, db_res **out) {
  return rows(a, out, ELEVATION_SELECT "ORDER BY e.seq DESC", DB_NOARGS);
}

staff_outcome staff_store_elevation_insert(const char *id, const char *staff_id, const char *target_id,
                                           const char *target_role, const char *reason, const char *mail_subject,
                                           const char *mail_body, const audit_action *act) {
  int64_t now = clock_now_ms();
  db_conn *c;
  err_t e = db_begin(&c);
  /* an elevation whose time is over no longer blocks a new request */
  if (!e) e = db_to_err(expire_in(c));
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "INSERT INTO elevation_requests (id, staff_id, target_id, target_role, reason, status, "
                          "created_at, updated_at, seq) VALUES ($1, $2, $3, $4, $5, 'PENDING', $6, $6, $7)",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(staff_id), DB_TEXT(target_id), DB_TEXT(target_role),
                                  DB_TEXT(reason), DB_INT(now), DB_INT(clock_sequence()))));
  if (!e) e = db_to_err(mail_enqueue(c, CFG.admin_email, mail_subject, mail_body));
  return outcome_of(end_recorded(c, e, act), STAFF_ELEVATION_OPEN);
}

err_t staff_store_elevation_move(elevation_move move, const char *id, const char *owner, const audit_action *act,
                                 bool *moved) {
  static const char *const sql[] = {
      [MOVE_APPROVE] = "UPDATE elevation_requests SET status = 'APPROVED', resolved_at = $2, updated_at = $2 "
                       "WHERE id = $1 AND status = 'PENDING'",
      [MOVE_DENY] = "UPDATE elevation_requests SET status = 'REJECTED', resolved_at = $2, updated_at = $2 "
                    "WHERE id = $1 AND status = 'PENDING'",
      [MOVE_ACTIVATE] = "UPDATE elevation_requests SET status = 'ACTIVE', activated_at = $2, updated_at = $2 "
                        "WHERE id = $1 AND status = 'APPROVED' AND staff_id = $3 AND resolved_at > $4",
      [MOVE_DEACTIVATE] = "UPDATE elevation_requests SET status = 'DEACTIVATED', deactivated_at = $2, updated_at = $2 "
                          "WHERE id = $1 AND status IN ('PENDING', 'APPROVED', 'ACTIVE') AND staff_id = $3",
      [MOVE_END] = "UPDATE elevation_requests SET status = 'DEACTIVATED', deactivated_at = $2, updated_at = $2 "
                   "WHERE id = $1 AND status IN ('APPROVED', 'ACTIVE')",
  };
  static const int nargs[] = {
      [MOVE_APPROVE] = 2, [MOVE_DENY] = 2, [MOVE_ACTIVATE] = 4, [MOVE_DEACTIVATE] = 3, [MOVE_END] = 2};
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  db_conn *c;
  err_t e = db_begin(&c);
  int64_t now = clock_now_ms();
  db_val args[] = {DB_TEXT(id), DB_INT(now), DB_TEXT(owner), DB_INT(now - APPROVAL_TTL_MS)};
  if (!e) e = db_to_err(db_exec(c, &a, &r, sql[move], args, nargs[move]));
  *moved = !e && r->changes == 1;
  if (*moved && (move == MOVE_DEACTIVATE || move == MOVE_END)) e = db_to_err(events_tokens_ended_in(c, id, false));
  e = end_recorded(c, e, *moved ? act : NULL);
  arena_fini(&a);
  return e;
}

err_t staff_store_resolve_report(const char *id, const char *job_id, const char *action, const char *note,
                                 const audit_action *act, bool *resolved) {
  db_conn *c;
  *resolved = false;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(jobs_report_resolve_in(c, id, action, note, act->actor_id, clock_now_ms(), resolved));
  if (!e && *resolved && !strcmp(action, "release")) e = db_to_err(payouts_release_job_in(c, job_id));
  if (!e && *resolved) e = audit_log_in(c, act); /* the transaction's last write */
  e = db_end(c, e);
  if (e) *resolved = false;
  return e;
}
