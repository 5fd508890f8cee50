/* SQL of the token checks (auth_tokens.c). Internal to the auth domain. It reads the staff and
 * elevation_requests tables, which the staff domain owns and writes; it writes nothing. */
#ifndef DOMAIN_AUTH_TOKENS_STORE_H
#define DOMAIN_AUTH_TOKENS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <stdbool.h>
#include <stdint.h>

/* Whose token it is: each kind is checked against its own table. */
typedef enum { SUBJECT_STAFF, SUBJECT_ADMIN, SUBJECT_USER, SUBJECT_PROVIDER } token_subject;
/* Whether the token's subject exists as the token knew it (*found): a staff member with this
 * id and role, enabled, of token generation gen; an administrator; a customer or a provider
 * of generation gen; in each case whose token token_id was not ended (logout: ended_tokens).
 * ERR_INTERNAL when the database cannot be read. A db_guard: where the request's guard may
 * wait (PostgreSQL, the database lane) *found is true and the check rides with the request's
 * first statement, which it keeps from running when the subject moved on (the server then
 * answers 401: db_guard_refused). */
err_t auth_store_subject_exists(token_subject kind, const char *id, const char *role, int64_t gen, const char *token_id,
                                bool *found);
/* The elevation named by an impersonation token, if it is ACTIVE for that target, activated
 * after active_since, and its staff member is enabled: that member's id in *staff_id (arena a),
 * else NULL. */
err_t auth_store_live_elevation(arena *a, const char *elevation_id, const char *target_id, const char *target_role,
                                int64_t active_since, const char **staff_id);

#endif
