/* The staff portal: staff accounts and login, customer and provider look-ups, the elevation
 * (impersonation) flow, and the tamper-evident audit trail.
 *
 * The audit trail is one hash chain (table audit_log): every record stores the hash of the
 * record before it and its own, an HMAC-SHA256 under the chain's key (AUDIT_KEY), so altering,
 * inserting or deleting a record breaks the chain, which `marketplace audit verify` checks,
 * with the checkpoints of the chain's tip kept outside the database. Requests made with a staff
 * impersonation token are recorded by hooks this domain installs into the HTTP layer
 * (staff_domain_init); staff and administrator actions are recorded by the domains that
 * perform them, through staff_audit_in(), in the transaction of the change. */
#ifndef DOMAIN_STAFF_H
#define DOMAIN_STAFF_H
#include "db/db.h"
#include "http/http.h"
#include <jansson.h>
#include <stdio.h>

extern const hs_route STAFF_ROUTES[];
extern const size_t STAFF_ROUTES_LEN;

/* Installs the HTTP hooks: every token checked against the database (its account exists and
 * has the token's generation; a staff member is enabled; an impersonation's elevation is
 * live), and the audit records of impersonated requests; starts the audit chain's
 * checkpoints. Call before the server starts, with the database open. */
void staff_domain_init(void);

/* One staff or administrator action for the audit trail. */
typedef struct audit_action {
  const char *actor_id;                /* the staff member or administrator; NULL for an approval link */
  const char *actor_role;              /* a staff role, "admin", or "approval-link" */
  const char *action;                  /* "staff.create", "elevation.approve", "ticket.update", ... */
  const char *target_id, *target_role; /* what it acted on (may be NULL) */
  json_t *detail;                      /* optional JSON object (borrowed); credentials are redacted */
} audit_action;

/* Appends an action to the audit chain on c, inside the caller's open transaction, so it is
 * recorded exactly when the change is committed. Appends take the chain's tip lock until the
 * transaction ends: make it the transaction's last write. */
db_rc staff_audit_in(db_conn *c, const audit_action *a);

/* Records an action in a transaction of its own (an action that changes nothing else, such
 * as issuing an impersonation token). */
err_t staff_audit(const audit_action *a);

/* `marketplace staff create`, an operator's way to manage staff where GODMODE (and with it
 * the administrator token POST /staff/create needs) does not exist. First the arguments are
 * checked as POST /staff/create checks its body: the normalised body, or NULL with the
 * refusal in msg. Then, with the database open, the staff member with that email is created,
 * or given that name, role and password, and the change is recorded in the audit trail as
 * done by the operator's command line: 0 with the outcome in msg, or 1. */
json_t *staff_cli_check(const char *name, const char *email, const char *role, const char *password, char msg[320]);
int staff_cli_save(const json_t *checked, char msg[320]);

/* `marketplace staff disable --email E` (disable true) and `staff enable --email E`. First
 * the email is checked as POST /staff/create checks it: its normal form in normal, or false
 * with the refusal in msg ("refused: email: ..."). Then, with the database open, the member is
 * disabled or enabled: a disabled member's login answers as a wrong password and every token
 * they hold, staff and impersonation, is refused from then on (their APPROVED and ACTIVE
 * elevations end); enabling lets them log in again (old tokens stay refused). A change is
 * recorded in the audit trail as done by the operator's command line. Returns 0 with the
 * outcome in msg (also when nothing changed), 1 when there is no such member or the database
 * failed. */
bool staff_cli_email(const char *email, char normal[256], char msg[320]);
int staff_cli_set_disabled(const char *normal, bool disable, char msg[320]);

/* Stops what staff_domain_init started beyond the hooks and writes the audit chain's
 * shutdown checkpoint. Call once the server has stopped, before the database closes. */
void staff_domain_stop(void);

/* Checks every row of the audit log and the chain from its first record, then every
 * checkpoint of AUDIT_CHECKPOINT_FILE and each "SEQ:HASH" of expect (nexpect of them), writing
 * a report to out. Returns 0 when all hold, 1 when the chain is broken or a checkpoint no
 * longer matches (the first problem is named), 2 when the database or the checkpoint file
 * could not be read or an expected checkpoint is malformed. */
int staff_audit_verify(FILE *out, const char *const *expect, int nexpect);

#endif
