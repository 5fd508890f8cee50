/* The staff portal: staff accounts and login, customer and provider look-ups, the elevation
 * (impersonation) flow, and the HTTP hooks that have impersonated requests recorded in the
 * audit trail (domain/audit; the auth domain checks the tokens). Staff actions are recorded
 * there too, in the transaction of each change. */
#ifndef DOMAIN_STAFF_H
#define DOMAIN_STAFF_H
#include "domain/domain.h"
#include <jansson.h>
#include <stdbool.h>

extern const domain_def staff_domain;

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

/* `marketplace staff unlock --email E` (or `staff unlock E`): the email is checked as above
 * (normal, from staff_cli_email). Then, with the database open, the failed password checks
 * counted against the staff member and the administrator with that email are forgotten, so a
 * locked account (20 failures in an hour, http/ratelimit.h) can log in again at once; each
 * unlock of a locked account is recorded in the audit trail (`staff.unlock`) as done by the
 * operator's command line. Returns 0 with the outcome in msg ("staff member E unlocked", "...
 * was not locked", the same for an administrator), 1 when neither has the email or the
 * database failed. */
int staff_cli_unlock(const char *normal, char msg[320]);

#endif
