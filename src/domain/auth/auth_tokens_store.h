/* SQL of the token checks and of sessions (auth_tokens.c). Internal to the auth domain. It owns
 * ended_tokens (tokens ended before their expiry) and the sessions' refresh_families and
 * refresh_tokens; it reads the staff and elevation_requests tables, which the staff domain owns
 * and writes. */
#ifndef DOMAIN_AUTH_TOKENS_STORE_H
#define DOMAIN_AUTH_TOKENS_STORE_H
#include "core/clock.h"
#include "core/errors.h"
#include "db/db.h"
#include "domain/domain.h"
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
 * answers 401: db_guard_refused); at_once runs it at once instead (*found is its answer). */
err_t auth_store_subject_exists(token_subject kind, const char *id, const char *role, int64_t gen, const char *token_id,
                                bool at_once, bool *found);
/* The elevation named by an impersonation token, if it is ACTIVE for that target, activated
 * after active_since, and its staff member is enabled: that member's id in *staff_id (arena a),
 * else NULL. */
err_t auth_store_live_elevation(arena *a, const char *elevation_id, const char *target_id, const char *target_role,
                                int64_t active_since, const char **staff_id);

/* ---- sessions: a login's family of refresh tokens ---- */

/* A refresh token is valid for SESSION_SLIDE_MS after its issue, and none of a family past
 * SESSION_MAX_MS after its login. */
#define SESSION_SLIDE_MS (30 * DAY_MS)
#define SESSION_MAX_MS (90 * DAY_MS)

/* A session: its family's id, its account (role "user" or "provider", account_id) and that
 * account's token generation (strings in the caller's arena). */
typedef struct session_row {
  const char *family_id, *account_id, *role;
  int64_t gen;
} session_row;

/* The refresh token of a session just issued: the SHA-256 (hex) of its text, and the access token
 * issued with it (its jti and expiry, epoch ms). */
typedef struct session_grant {
  const char *refresh_hash, *access_id;
  int64_t access_expires_at;
} session_grant;

/* Opens the session s (a login at now) with its first refresh token g, in one transaction. */
err_t auth_store_session_open(const session_row *s, const session_grant *g, int64_t now);
/* The same on c inside the caller's transaction (a registration); the statements ride with the
 * transaction's next statement or its COMMIT. */
db_rc auth_store_session_open_in(db_conn *c, const session_row *s, const session_grant *g, int64_t now);

typedef enum {
  SESSION_ROTATED, /* the refresh token was exchanged for g */
  SESSION_FAILED,  /* the database failed */
  SESSION_INVALID, /* unknown, expired, or its session ended (or moved on with its account) */
  SESSION_REUSED,  /* it was exchanged before: its session ended now, with every token of it */
} session_outcome;
/* Exchanges the refresh token whose SHA-256 is refresh_hash for g (g->refresh_hash the next one,
 * valid SESSION_SLIDE_MS but never past its family's cap), at now, in one transaction: the
 * session in *out (arena a) when SESSION_ROTATED. A token exchanged once is never exchanged again:
 * presenting it again ends its session (auth_store_session_end_in). */
session_outcome auth_store_session_rotate(arena *a, const char *refresh_hash, const session_grant *g, int64_t now,
                                          session_row *out);
/* Ends session family_id (if it was live) on c inside the caller's transaction: its refresh
 * tokens are refused, every access token issued in it is ended as logout ends one (ended_tokens),
 * the devices registered in it lose their push registration, and its streams are checked again. */
db_rc auth_store_session_end_in(db_conn *c, const char *family_id, int64_t now);
/* Ends every session of the account (role "user" or "provider") on c, inside the caller's
 * transaction (logout-all, a password change or reset: the account's tokens end by its
 * generation). */
db_rc auth_store_sessions_end_all_in(db_conn *c, const char *role, const char *account_id, int64_t now);
/* Logout: records that the token token_id ended until expires_at (epoch ms), when it would have
 * expired anyway, and ends its session (session_id, NULL: none) with the devices it registered
 * (role and account_id: its account; a staff or administrator token has none); its streams end. */
err_t auth_store_logout(const char *token_id, int64_t expires_at, const char *session_id, const char *role,
                        const char *account_id);
/* Deletes ended tokens whose tokens expired before now, and the refresh tokens and sessions
 * past their expiry. */
err_t auth_store_prune_ended(int64_t now);
/* forget_in's part of the sessions: the account's families and their refresh tokens go. */
err_t auth_store_sessions_forget_in(db_conn *c, const account_ref *who);

#endif
