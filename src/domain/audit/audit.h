/* The audit trail: one tamper-evident chain of records (table audit_log) that staff, admin,
 * support and payments write to and that `marketplace audit verify` checks. A domain below
 * its callers: it calls no other domain.
 *
 * Every record stores the hash of the record before it and its own, an HMAC-SHA256 under the
 * chain's key (AUDIT_KEY), so altering, inserting or deleting a record breaks the chain; the
 * chain's tip is also written outside the database (checkpoints, AUDIT_CHECKPOINT_FILE), so a
 * tail cut off or a chain rebuilt shows too. Two kinds of record:
 * - actions of staff members, administrators and operators, written by the domain that performs
 *   them in the transaction of the change (audit_log_in), so one exists exactly when the change
 *   was committed;
 * - requests made with a staff impersonation token, two records each: the request (method,
 *   path, redacted body) before its handler runs, and its outcome (status) once answered. */
#ifndef DOMAIN_AUDIT_H
#define DOMAIN_AUDIT_H
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include <jansson.h>
#include <stdio.h>

extern const domain_def audit_domain;

/* One staff, administrator or operator action. */
typedef struct audit_action {
  const char *actor_id;                /* the staff member or administrator; NULL for an approval link */
  const char *actor_role;              /* a staff role, "admin", "operator-cli" or "approval-link" */
  const char *action;                  /* "staff.create", "elevation.approve", "ticket.update", ... */
  const char *target_id, *target_role; /* what it acted on (may be NULL) */
  json_t *detail;                      /* optional JSON object (borrowed); credentials are redacted */
} audit_action;

/* Appends an action to the chain on c, inside the caller's open transaction. Appends take the
 * chain's tip lock until the transaction ends: make it the transaction's last write. */
err_t audit_log_in(db_conn *c, const audit_action *a);
/* Records an action in a transaction of its own (an action that changes nothing else, such as
 * issuing an impersonation token). */
err_t audit_log(const audit_action *a);

/* Requests made with a staff impersonation token (the staff domain's hooks), each named by its
 * req->impersonation (the elevation and its staff member). */
/* Commits the request record of req (its target is req->auth; the body recorded is redacted:
 * credentials replaced, multipart reduced to field and file names) and keeps its seq in
 * req->impersonation.request_seq. ERR_UNAVAILABLE when it cannot be written: the handler must
 * then not run. */
err_t audit_impersonated_request(hs_req *req);
/* Appends the outcome record of req (its status), and the request record first when it was
 * never written (a request refused before its handler). A failure is logged. */
void audit_impersonated_outcome(hs_req *req);

/* The request and outcome records of every elevation within the chain, in seq order (columns
 * seq, id, kind, elevation_id, method, path, status, body, ref_seq, created_at). */
err_t audit_sessions_events(arena *a, db_res **out);
/* The order of one actor's records: newest first (seq). */
extern const db_keyset AUDIT_ACTOR_KEYSET;
/* The page pg of actor_id's records, newest first: actions (kind "action": action, target_id,
 * target_role, body the detail) and requests made with their impersonation tokens (kind
 * "request": elevation_id, method, path, body, status the outcome's or NULL). */
err_t audit_of_actor(arena *a, const char *actor_id, const db_page *pg, db_res **out);

/* Checks every row of the audit log and the chain from its first record (a plain hash at or
 * after where the keyed chain starts is a rewrite), then every checkpoint of
 * AUDIT_CHECKPOINT_FILE and each "SEQ:HASH" of expect (nexpect of them), writing a report to
 * out. Returns 0 when all hold, 1 when the chain is broken or a checkpoint no longer matches
 * (the first problem is named), 2 when the database or the checkpoint file could not be read or
 * an expected checkpoint is malformed, and 2 in production when the checkpoint file is missing
 * or holds no checkpoint while the chain has a record older than the checkpoint period (that
 * message, "audit verify: checkpoint file missing: ...", goes to err). */
int audit_verify(FILE *out, FILE *err, const char *const *expect, int nexpect);

#endif
